//! The AC-DAG as a picture: Graphviz DOT (`dag.dot`, `analyze --dot`) with
//! labels wrapped to a readable width, the transitive reduction in grey,
//! and the causal path as solid red edges joined to the failure node even
//! where the reduction leaves that edge implied; `dag.svg` through
//! Graphviz' `dot` when it is installed. The page's own drawing
//! ([`super::html`]) uses [`layers`] and needs no Graphviz.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    io::Write as _,
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use crate::{
    analysis::Analysis,
    predicates::{Kind, PredId},
};

/// Characters per label line.
pub const LABEL_WIDTH: usize = 40;

/// A node's label: "P3: call 1 of f on main runs too slow: ...", "F: the
/// run fails".
pub fn label(a: &Analysis, p: PredId, noun: &str) -> String {
    match a.catalog.get(p) {
        Some(x) if x.key.kind == Kind::Failure => format!("F: the {noun} fails"),
        Some(x) => format!("{p}: {}", x.description),
        None => p.to_string(),
    }
}

/// An edge of the drawing.
pub type Edge = (PredId, PredId);

/// The edges to draw: the transitive reduction, plus the causal path's
/// consecutive links and its last link to F (which the reduction omits
/// when another predicate lies between them); and those on the path.
pub fn edges(a: &Analysis, path: &[PredId]) -> (Vec<Edge>, BTreeSet<Edge>) {
    let f = a.catalog.failure();
    let mut on_path = BTreeSet::new();
    for w in path.windows(2) {
        on_path.insert((w[0], w[1]));
    }
    if let Some(&last) = path.last() {
        on_path.insert((last, f));
    }
    let mut all = a.dag.reduction();
    for e in &on_path {
        if !all.contains(e) {
            all.push(*e);
        }
    }
    all.sort_unstable();
    (all, on_path)
}

/// Nodes by layer, top to bottom: each node one below its lowest
/// predecessor (longest path from a source), F alone at the bottom.
pub fn layers(a: &Analysis, edges: &[(PredId, PredId)]) -> Vec<Vec<PredId>> {
    let f = a.catalog.failure();
    let order = a.dag.topological();
    let mut depth: BTreeMap<PredId, usize> = order.iter().map(|&p| (p, 0)).collect();
    for &p in &order {
        let d = depth[&p];
        for &(x, y) in edges {
            if x == p && y != f {
                let e = depth.entry(y).or_insert(0);
                *e = (*e).max(d + 1);
            }
        }
    }
    let deepest = depth.values().copied().max().map_or(0, |d| d + 1);
    let mut out = vec![Vec::new(); deepest];
    for (&p, &d) in &depth {
        out[d].push(p);
    }
    out.push(vec![f]);
    out.retain(|l| !l.is_empty());
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// DOT of the AC-DAG, `path` (root cause first) highlighted.
pub fn render(a: &Analysis, path: &[PredId], noun: &str) -> String {
    let f = a.catalog.failure();
    let (all, on_path) = edges(a, path);
    let highlighted: BTreeSet<PredId> = path.iter().copied().collect();
    let mut s = String::from(
        "digraph acdag {\n  // The approximate causal DAG: an edge P -> Q when P happened before Q in\n  // every failing run. Red: the causal path aid confirmed, root cause first.\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=11];\n  edge [color=gray50];\n",
    );
    let mut nodes = a.dag.topological();
    nodes.push(f);
    for p in nodes {
        let text = textwrap::fill(&label(a, p, noun), LABEL_WIDTH);
        let mut attrs = format!("label=\"{}\"", escape(&text).replace('\n', "\\l") + "\\l");
        if p == f {
            attrs = format!("label=\"{}\", shape=doubleoctagon", escape(&text));
            if !path.is_empty() {
                attrs.push_str(", color=red, penwidth=2");
            }
        } else if highlighted.contains(&p) {
            attrs.push_str(", color=red, penwidth=2");
            if path.first() == Some(&p) {
                attrs.push_str(", style=\"rounded,bold\"");
            }
        }
        let _ = writeln!(s, "  n{} [{attrs}];", p.0);
    }
    for (x, y) in all {
        if on_path.contains(&(x, y)) {
            let _ = writeln!(s, "  n{} -> n{} [color=red, penwidth=2.5];", x.0, y.0);
        } else {
            let _ = writeln!(s, "  n{} -> n{};", x.0, y.0);
        }
    }
    s.push_str("}\n");
    s
}

/// The graph drawn by Graphviz as SVG; None when `dot` is not installed.
pub fn svg(graph: &str) -> anyhow::Result<Option<String>> {
    let mut child = match Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).context("running Graphviz `dot`"),
    };
    child
        .stdin
        .take()
        .context("Graphviz `dot` has no stdin")?
        .write_all(graph.as_bytes())
        .context("writing to Graphviz `dot`")?;
    let out = child.wait_with_output().context("running Graphviz `dot`")?;
    if !out.status.success() {
        bail!("Graphviz `dot` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
}
