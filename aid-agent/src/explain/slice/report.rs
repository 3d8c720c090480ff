//! How a slice is shown: its calls numbered as printed, as JSON, in
//! words and as Graphviz DOT.

use std::{collections::BTreeMap, fmt::Write as _};

use serde::Serialize;

use super::{EdgeKind, Slice};
use crate::{
    explain::access::{RunAccesses, Substrate},
    model::{Function, Run, ValueKind, identity::Slot},
};

/// How a call prints: `role:f#k(args) → ret`, pointers by object name.
pub fn call_text(run: &Run, acc: &RunAccesses, substrate: &Substrate, c: usize) -> String {
    let call = &run.calls[c];
    let Some(f) = substrate.functions.get(call.func as usize) else { return "?".into() };
    let args: Vec<String> = (0..f.params.len().min(3))
        .map(|a| {
            acc.pointers[c].iter().find(|(s, _)| *s == Slot::Arg(a as u8)).map_or_else(
                || call.args[a].to_string(),
                |(_, o)| substrate.objects.name(*o).to_owned(),
            )
        })
        .collect();
    let ret = match (call.ret, f.ret.kind) {
        (_, ValueKind::Void) => String::new(),
        (None, _) => " (did not return)".into(),
        (Some(r), _) => match acc.pointers[c].iter().find(|(s, _)| *s == Slot::Ret) {
            Some((_, o)) => format!(" → {}", substrate.objects.name(*o)),
            None => format!(" → {r}"),
        },
    };
    format!("{}:{}#{}({}){ret}", acc.roles.name(call.role), f.name, call.instance, args.join(", "))
}

/// Call numbers as printed: position among the run's traced calls, from 1.
pub(crate) fn numbers(run: &Run, functions: &[Function]) -> Vec<usize> {
    let mut n = 0;
    run.calls
        .iter()
        .map(|c| {
            if functions.get(c.func as usize).is_some_and(|f| !f.internal) {
                n += 1;
            }
            n
        })
        .collect()
}

#[derive(Serialize)]
pub struct KeptJson {
    pub n: usize,
    pub role: String,
    pub function: String,
    pub instance: u32,
    pub text: String,
    pub hazard_only: bool,
    pub criterion: bool,
}

#[derive(Serialize)]
pub struct EdgeJson {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
    pub object: Option<String>,
}

#[derive(Serialize)]
pub struct SliceJson {
    pub run: u32,
    pub outcome: String,
    pub criterion: usize,
    pub deps: String,
    pub total_calls: usize,
    pub kept_calls: usize,
    pub total_roles: usize,
    pub kept_roles: usize,
    pub reduction: f64,
    pub kept: Vec<KeptJson>,
    pub edges: Vec<EdgeJson>,
}

pub fn report(s: &Slice, run: &Run, acc: &RunAccesses, substrate: &Substrate) -> SliceJson {
    let num = numbers(run, &substrate.functions);
    SliceJson {
        run: s.run,
        outcome: run.outcome.reason.clone(),
        criterion: num[s.criterion],
        deps: s.levels.label(),
        total_calls: s.total_calls,
        kept_calls: s.kept.len(),
        total_roles: s.total_roles,
        kept_roles: s.kept_roles(run),
        reduction: s.reduction(),
        kept: s
            .kept
            .iter()
            .map(|&c| KeptJson {
                n: num[c],
                role: acc.roles.name(run.calls[c].role).to_owned(),
                function: substrate.function_name(run.calls[c].func).to_owned(),
                instance: run.calls[c].instance,
                text: call_text(run, acc, substrate, c),
                hazard_only: s.hazard_only.contains(&c),
                criterion: c == s.criterion,
            })
            .collect(),
        edges: s
            .edges
            .iter()
            .map(|e| EdgeJson {
                from: num[e.from],
                to: num[e.to],
                kind: e.kind,
                object: e.object.map(|o| substrate.objects.name(o).to_owned()),
            })
            .collect(),
    }
}

pub fn render_text(j: &SliceJson) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "slice of run {} ({}) at call {}, deps {}: kept {} of {} calls ({:.0}% removed), {} of {} roles",
        j.run,
        j.outcome,
        j.criterion,
        j.deps,
        j.kept_calls,
        j.total_calls,
        j.reduction * 100.0,
        j.kept_roles,
        j.total_roles
    );
    for k in &j.kept {
        let tag = if k.criterion {
            "  [criterion]"
        } else if k.hazard_only {
            "  [hazard]"
        } else {
            ""
        };
        let _ = writeln!(out, "  {:>4}  {}{tag}", k.n, k.text);
    }
    if !j.edges.is_empty() {
        let _ = writeln!(out, "edges:");
    }
    for e in &j.edges {
        let obj = e.object.as_deref().map(|o| format!(" {o}")).unwrap_or_default();
        let _ = writeln!(out, "  {:>4} → {:<4} {}{obj}", e.from, e.to, e.kind.as_str());
    }
    out
}

/// Graphviz: one cluster per role, edges labelled by kind.
pub fn render_dot(j: &SliceJson) -> String {
    let mut out =
        String::from("digraph slice {\n  rankdir=TB;\n  node [shape=box, fontname=monospace];\n");
    let mut roles: BTreeMap<&str, Vec<&KeptJson>> = BTreeMap::new();
    for k in &j.kept {
        roles.entry(k.role.as_str()).or_default().push(k);
    }
    for (i, (role, ks)) in roles.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{i} {{\n    label=\"{}\";", dot_escape(role));
        for k in ks {
            let style = if k.criterion {
                ", style=bold"
            } else if k.hazard_only {
                ", style=dashed"
            } else {
                ""
            };
            let _ =
                writeln!(out, "    c{} [label=\"{}: {}\"{style}];", k.n, k.n, dot_escape(&k.text));
        }
        out.push_str("  }\n");
    }
    for e in &j.edges {
        let _ = writeln!(out, "  c{} -> c{} [label=\"{}\"];", e.from, e.to, e.kind.as_str());
    }
    out.push_str("}\n");
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
