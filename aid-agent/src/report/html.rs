//! `report.html`: the report as one self-contained page (inline CSS and
//! SVG, no script, nothing fetched): the root cause and the causal path
//! with their evidence, the AC-DAG drawn with the path highlighted and
//! joined to the failure, a timeline of one failing and one passing run
//! side by side (threads as lanes, calls as slices, predicate events and
//! interventions marked, each call's bar labelled), what the other
//! explainers add beside the causal path (as `report.txt` says it), and
//! the ranking table.

use std::{collections::BTreeMap, fmt::Write as _};

use super::{DebugReport, beside as beside_words, dot, facts::PredicateView};
use crate::{
    debug::{Diagnosis, beside::Beside},
    model::{Label, Point, Role, Run, identity::RoleNames},
    predicates::{Kind, PredId},
    util::human::{count, duration},
};

/// Escapes text for HTML and SVG.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0; color: #1d2330; background: #fafbfc; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 32px 0 10px; border-bottom: 1px solid #dde1e7; padding-bottom: 4px; }
.sub { color: #5b6472; margin: 0 0 16px; }
.root { background: #fff4f2; border: 1px solid #f3b8ad; border-left: 5px solid #d0341b; padding: 12px 16px; border-radius: 4px; }
.root b { color: #a3220e; }
ol.path { padding-left: 22px; }
ol.path > li { margin: 0 0 14px; }
.evidence, .callers, .intervention, .effects { color: #3e4654; margin: 2px 0; }
.label { display: inline-block; min-width: 112px; color: #6b7482; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.failure-step { font-weight: 600; color: #a3220e; }
svg text { font-family: system-ui, Helvetica, Arial, sans-serif; }
.node rect { fill: #fff; stroke: #8a93a3; stroke-width: 1; }
.node.on-path rect { fill: #fff1ee; stroke: #d0341b; stroke-width: 2.5; }
.node.failure rect { fill: #d0341b; stroke: #8e1f0c; }
.node.failure text { fill: #fff; font-weight: 600; }
.edge { fill: none; stroke: #a9b0bc; stroke-width: 1.2; }
.edge.on-path { stroke: #d0341b; stroke-width: 3; }
.timelines { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.timeline { background: #fff; border: 1px solid #dde1e7; border-radius: 4px; padding: 8px 10px; overflow-x: auto; }
.timeline h3 { font-size: 14px; margin: 0 0 6px; }
.timeline.fail h3 { color: #a3220e; }
.timeline.pass h3 { color: #1c7a3a; }
.lane-name { font-size: 11px; fill: #3e4654; }
.slice { fill: #7aa6d8; stroke: #4c79ad; stroke-width: .5; }
.slice.hot { fill: #f19a86; stroke: #c2412a; }
.bar-label { font-size: 8px; fill: #1d2330; pointer-events: none; }
.mark-pred { fill: #d0341b; color: #d0341b; }
.mark-iv { fill: #1c7a3a; color: #1c7a3a; }
.mark-noise { fill: #b7791f; color: #b7791f; }
.legend { font-size: 12px; color: #5b6472; margin: 6px 0 0; }
.legend i { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; vertical-align: -1px; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
th, td { border-bottom: 1px solid #e6e9ee; padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f1f3f6; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.on-path td { background: #fff4f2; }
.guide { color: #3e4654; font-size: 13px; }
"#;

/// The whole page. `intervened` is a passing run made under the root
/// cause's intervention, shown next to a failing run; without one, an
/// observed passing run is shown. `beside`: what the other explainers add.
pub fn render(
    r: &DebugReport<'_>,
    d: &Diagnosis,
    intervened: Option<&Run>,
    beside: &Beside,
) -> String {
    let mut s = String::new();
    let noun = r.noun;
    let title = d
        .session
        .functions
        .iter()
        .find(|f| !f.internal)
        .and_then(|f| f.module.file_name())
        .map_or_else(
            || "aid report".to_owned(),
            |n| format!("aid report: {}", n.to_string_lossy()),
        );
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let ob = r.observed;
    let _ = writeln!(
        s,
        "<p class=\"sub\" id=\"observed\">Observed {}: {} failing, {} passing{}{}.</p>",
        count(ob.runs, noun),
        ob.failing,
        ob.passing,
        match (&ob.noise, ob.amplified) {
            (Some(words), _) => format!(" (failures made more frequent with {})", esc(words)),
            (None, Some((sites, us))) => format!(
                " (failures made more frequent with noise: {sites} points per {noun}, holds up to {})",
                duration(us * 1000)
            ),
            (None, None) => String::new(),
        },
        esc(&super::jobs_words(ob, noun))
    );
    if let Some(line) = &ob.tracer {
        let _ = writeln!(s, "<p class=\"sub\" id=\"tracer\">{}.</p>", esc(line));
    }
    cause(&mut s, r);
    s.push_str(&beside_section(beside));
    s.push_str("<h2>Approximate causal DAG</h2>\n<p class=\"guide\">An arrow P → Q: P happened before Q in every failing run. In red, the causal path aid confirmed by intervening, from the root cause to the failure.</p>\n");
    let path = d.discovery.as_ref().map(crate::causal::Discovery::chain).unwrap_or_default();
    dag(&mut s, d, &path, noun);
    timelines(&mut s, r, d, intervened);
    ranking(&mut s, r, &path);
    s.push_str("</main>\n</body>\n</html>\n");
    s
}

/// One confirmed link: its headline, evidence, intervention and effects.
fn link_item(s: &mut String, link: &super::Link) {
    let _ = writeln!(
        s,
        "<li data-pred=\"{}\">{}<div class=\"evidence\"><span class=\"label\">evidence</span>{}</div>",
        link.id,
        esc(&link.structured.headline),
        esc(&link.evidence)
    );
    if let Some(called) = link.structured.called() {
        let _ = writeln!(
            s,
            "<div class=\"callers\"><span class=\"label\">called</span>{}</div>",
            esc(&called)
        );
    }
    if !link.intervention.is_empty() {
        let _ = writeln!(
            s,
            "<div class=\"intervention\"><span class=\"label\">intervention</span>{}</div>",
            esc(&link.intervention)
        );
    }
    if !link.effects.is_empty() {
        s.push_str("<div class=\"effects\"><span class=\"label\">then gone</span><ul>");
        for e in &link.effects {
            let _ = write!(s, "<li>{}</li>", esc(&e.headline));
        }
        s.push_str("</ul></div>");
    }
    s.push_str("</li>\n");
}

fn cause(s: &mut String, r: &DebugReport<'_>) {
    let noun = r.noun;
    match r.path.first() {
        Some(root) => {
            let _ = writeln!(
                s,
                "<div class=\"root\" id=\"root-cause\" data-pred=\"{}\"><b>Root cause:</b> {}</div>",
                root.id,
                esc(&root.structured.headline)
            );
            if !r.triggers.is_empty() {
                s.push_str("<h2>The timing it happens with</h2>\n<p class=\"guide\">Confirmed as well: forcing it back also stopped the failure, by moving one thread's calls away from the other's.</p>\n<ul class=\"path\" id=\"timing\">\n");
                for link in &r.triggers {
                    link_item(s, link);
                }
                s.push_str("</ul>\n");
            }
            s.push_str("<h2>Causal path</h2>\n<ol class=\"path\" id=\"causal-path\">\n");
            for link in &r.path {
                link_item(s, link);
            }
            let a = &r.analysis;
            let _ = writeln!(
                s,
                "<li class=\"failure-step\">the {noun} fails ({} of {} analysed {noun}s)</li>\n</ol>",
                a.failing_runs,
                a.failing_runs + a.passing_runs
            );
            if let (Some(n), Some(runs)) = (r.interventions, r.runs) {
                let _ = writeln!(
                    s,
                    "<p id=\"cost\">It took {} ({}).{}</p>",
                    count(n, "intervention"),
                    count(runs, noun),
                    r.tagt.map_or(String::new(), |t| format!(
                        " Traditional adaptive group testing (TAGT) would need about {:.1}.",
                        t.mean_interventions
                    ))
                );
            }
        }
        None => {
            let _ = writeln!(
                s,
                "<div class=\"root\" id=\"root-cause\"><b>No cause was confirmed.</b> {}</div>",
                if let Some(phase) = r.interrupted {
                    format!("Interrupted while {phase}, before a cause was confirmed.")
                } else if let Some(n) = r.not_started {
                    format!(
                        "No intervention round was started, the failure being too rare under the agent's control to judge one: {}.",
                        esc(&n.describe(r.noun))
                    )
                } else if r.discovery.is_some() {
                    "No intervention on the candidates stopped the failure.".to_string()
                } else {
                    "No predicate held in every failing run and no passing one while being open to an intervention.".to_string()
                }
            );
        }
    }
    if !r.untested.is_empty() {
        let _ = writeln!(s, "<h2>Also in every failing {noun}, not tested</h2>\n<ul>");
        for u in &r.untested {
            let _ = writeln!(
                s,
                "<li>{} <span class=\"guide\">({})</span></li>",
                esc(&u.predicate.headline),
                esc(&u.hint)
            );
        }
        s.push_str("</ul>\n");
    }
}

/// "Beside the causal path": the lines `report.txt` ends with, an item
/// per line and its details as a list under it (empty: nothing to add).
fn beside_section(b: &Beside) -> String {
    let lines = beside_words::lines(b);
    if lines.is_empty() {
        return String::new();
    }
    let mut s =
        format!("<h2>{}</h2>\n<ul class=\"beside\" id=\"beside\">\n", beside_words::HEADING);
    let mut details = false;
    for (i, (depth, line)) in lines.iter().enumerate() {
        match depth {
            0 => {
                if i > 0 {
                    s.push_str(if details { "</ul></li>\n" } else { "</li>\n" });
                }
                details = false;
                let _ = write!(s, "<li>{}", esc(line));
            }
            _ => {
                if !details {
                    s.push_str("<ul>");
                    details = true;
                }
                let _ = write!(s, "<li>{}</li>", esc(line));
            }
        }
    }
    s.push_str(if details { "</ul></li>\n</ul>\n" } else { "</li>\n</ul>\n" });
    s
}

/// The AC-DAG drawn in SVG with a layered layout (no Graphviz needed).
fn dag(s: &mut String, d: &Diagnosis, path: &[PredId], noun: &str) {
    const BOX_W: f64 = 300.0;
    const LINE_H: f64 = 15.0;
    const GAP_X: f64 = 36.0;
    const GAP_Y: f64 = 54.0;
    const WRAP: usize = 44;
    let a = &d.analysis;
    let f = a.catalog.failure();
    let (edges, on_path) = dot::edges(a, path);
    let layers = dot::layers(a, &edges);
    let lines: BTreeMap<PredId, Vec<String>> = layers
        .iter()
        .flatten()
        .map(|&p| {
            let label = dot::label(a, p, noun);
            let wrapped = textwrap::wrap(&label, WRAP)
                .into_iter()
                .map(std::borrow::Cow::into_owned)
                .collect();
            (p, wrapped)
        })
        .collect();
    let widest = layers.iter().map(Vec::len).max().unwrap_or(1) as f64;
    // Room on the right for edges that skip layers.
    let width = widest * BOX_W + (widest + 1.0) * GAP_X + BOX_W * 0.5;
    let mut pos: BTreeMap<PredId, (f64, f64, f64)> = BTreeMap::new();
    let mut layer_of: BTreeMap<PredId, usize> = BTreeMap::new();
    let mut y = 16.0;
    for (li, layer) in layers.iter().enumerate() {
        let h = layer.iter().map(|p| lines[p].len()).max().unwrap_or(1) as f64 * LINE_H + 14.0;
        let row_w = layer.len() as f64 * BOX_W + (layer.len() as f64 - 1.0) * GAP_X;
        let mut x = (width - BOX_W * 0.5 - row_w) / 2.0;
        for &p in layer {
            layer_of.insert(p, li);
            pos.insert(p, (x, y, h));
            x += BOX_W + GAP_X;
        }
        y += h + GAP_Y;
    }
    let height = y - GAP_Y + 16.0;
    let _ = writeln!(
        s,
        "<svg id=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"approximate causal DAG\">\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#a9b0bc\"/></marker><marker id=\"arrow-path\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#d0341b\"/></marker></defs>"
    );
    // Path edges last, so they are drawn on top.
    let mut ordered = edges.clone();
    ordered.sort_by_key(|e| on_path.contains(e));
    for (x, yv) in ordered {
        let (Some(&(x1, y1, h1)), Some(&(x2, y2, _))) = (pos.get(&x), pos.get(&yv)) else {
            continue;
        };
        let (sx, sy) = (x1 + BOX_W / 2.0, y1 + h1);
        let (tx, ty) = (x2 + BOX_W / 2.0, y2);
        let mid = (sy + ty) / 2.0;
        let hot = on_path.contains(&(x, yv));
        // An edge that skips layers bows out to the right of the boxes
        // between, instead of running through them.
        let skips = layer_of[&yv].saturating_sub(layer_of[&x]) > 1;
        let d = if skips {
            let out = sx.max(tx) + BOX_W * 0.5 + GAP_X;
            format!(
                "M{sx:.1},{sy:.1} C{out:.1},{:.1} {out:.1},{:.1} {tx:.1},{ty:.1}",
                sy + 30.0,
                ty - 30.0
            )
        } else {
            format!("M{sx:.1},{sy:.1} C{sx:.1},{mid:.1} {tx:.1},{mid:.1} {tx:.1},{ty:.1}")
        };
        let _ = writeln!(
            s,
            "<path class=\"edge{}\" data-from=\"{x}\" data-to=\"{}\" d=\"{d}\" marker-end=\"url(#{})\"/>",
            if hot { " on-path" } else { "" },
            if yv == f { "F".to_owned() } else { yv.to_string() },
            if hot { "arrow-path" } else { "arrow" }
        );
    }
    for (&p, &(x, y, h)) in &pos {
        let class = if p == f {
            "node failure"
        } else if path.contains(&p) {
            "node on-path"
        } else {
            "node"
        };
        let id = if p == f { "F".to_owned() } else { p.to_string() };
        let _ = write!(
            s,
            "<g class=\"{class}\" data-pred=\"{id}\"><title>{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{BOX_W}\" height=\"{h:.1}\" rx=\"6\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">",
            esc(&dot::label(a, p, noun)),
            x + 10.0,
            y + 4.0
        );
        for line in &lines[&p] {
            let _ = write!(s, "<tspan x=\"{:.1}\" dy=\"{LINE_H}\">{}</tspan>", x + 10.0, esc(line));
        }
        s.push_str("</text></g>\n");
    }
    s.push_str("</svg>\n");
}

/// A mark on a timeline: a predicate that held, an intervention or a
/// random delay, at a time on a role.
struct Mark {
    role: Role,
    t_ns: u64,
    class: &'static str,
    title: String,
}

/// What to mark on a run: predicates of the graph that held (at their
/// time anchor), interventions carried out, noise at traced calls.
fn marks(d: &Diagnosis, run: &Run, names: &BTreeMap<PredId, String>) -> Vec<Mark> {
    let a = &d.analysis;
    let truth = a.catalog.evaluate(run);
    let mut out = Vec::new();
    for &(p, t) in &truth.held {
        let Some(pred) = a.catalog.get(p) else { continue };
        if pred.key.kind == Kind::Failure || !a.dag.contains(p) {
            continue;
        }
        // A group key's lane: the thread of its call nearest the moment.
        let role = pred.key.site().map(|s| s.role).or_else(|| {
            run.calls
                .iter()
                .filter(|c| c.func == pred.key.func)
                .min_by_key(|c| c.entry_ns.abs_diff(t))
                .map(|c| c.role)
        });
        let role = role.unwrap_or(0);
        out.push(Mark {
            role,
            t_ns: t,
            class: "mark-pred",
            title: format!("{p}: {}", names.get(&p).unwrap_or(&pred.description)),
        });
    }
    let at = |site: crate::model::Site, point: Point| {
        run.call(site).map(|c| match point {
            Point::Entry => c.entry_ns,
            Point::Exit => c.exit_ns.unwrap_or(c.entry_ns),
        })
    };
    for iv in run.interventions.iter().filter(|i| i.applied) {
        for site in iv.intervention.acting_sites() {
            if let Some(t) = at(site, Point::Entry) {
                out.push(Mark {
                    role: site.role,
                    t_ns: t,
                    class: "mark-iv",
                    title: format!("intervention: {}", describe_iv(d, &iv.intervention)),
                });
            }
        }
    }
    // Noise at traced calls (noise at synchronisation points has no
    // traced call to be placed at).
    for n in run.noise.iter().filter(|n| n.action != crate::model::NoiseAction::Skip) {
        let crate::model::NoiseAt::Call { site } = n.at else { continue };
        if let Some(t) = at(site, Point::Entry) {
            out.push(Mark {
                role: site.role,
                t_ns: t,
                class: "mark-noise",
                title: super::noise_words(n),
            });
        }
    }
    out
}

fn describe_iv(d: &Diagnosis, iv: &crate::model::Intervention) -> String {
    d.analysis
        .catalog
        .predicates
        .iter()
        .find(|p| p.intervention.as_ref() == Some(iv))
        .map_or_else(|| "an intervention".to_owned(), |p| p.intervention_text.clone())
}

/// One failing and one passing run side by side.
fn timelines(s: &mut String, r: &DebugReport<'_>, d: &Diagnosis, intervened: Option<&Run>) {
    let root = r.path.first().map(|l| l.id);
    let failing = d
        .session
        .runs
        .iter()
        .filter(|x| x.complete && x.label == Label::Fail)
        .find(|x| root.is_none_or(|p| d.analysis.catalog.evaluate(x).holds(p)));
    let passing =
        intervened.or_else(|| d.session.runs.iter().find(|x| x.complete && x.label == Label::Pass));
    let (Some(failing), Some(passing)) = (failing, passing) else { return };
    let names: BTreeMap<PredId, String> = r
        .predicates
        .iter()
        .chain(r.path.iter().map(|l| &l.structured))
        .map(|v: &PredicateView| (v.id, v.headline.clone()))
        .collect();
    // Each run from its first traced call to its last, on one scale: the
    // start-up before the first call (longer under ptrace) is not shown.
    let window = |run: &Run| {
        let calls = run
            .calls
            .iter()
            .filter(|c| d.session.functions.get(c.func as usize).is_some_and(|f| !f.internal));
        let first = calls.clone().map(|c| c.entry_ns).min().unwrap_or(0);
        let last = calls.map(|c| c.exit_ns.unwrap_or(run.end_ns)).max().unwrap_or(run.end_ns);
        (first, last.saturating_sub(first))
    };
    let span = window(failing).1.max(window(passing).1).max(1);
    s.push_str("<h2>Timeline</h2>\n<p class=\"guide\">One failing and one passing run on the same time scale, each from its first traced call: each lane is a thread, each bar a call of a traced function, labelled f#n for the n-th call of f on that thread (hover for when it started, its duration and return value).</p>\n<div class=\"timelines\">\n");
    let noun = r.noun;
    let title_fail = format!("failing {noun} {} ({})", failing.id, failing.outcome.reason);
    let title_pass = if intervened.is_some_and(|x| x.id == passing.id) {
        format!("passing {noun} {} under the root cause's intervention", passing.id)
    } else {
        format!("passing {noun} {}", passing.id)
    };
    lanes(s, d, failing, "fail", &title_fail, (window(failing).0, span), &names);
    lanes(s, d, passing, "pass", &title_pass, (window(passing).0, span), &names);
    s.push_str("</div>\n<p class=\"legend\"><i style=\"background:#7aa6d8\"></i>call<i style=\"background:#f19a86\"></i>call of a causal-path site<i style=\"background:#d0341b\"></i>predicate held<i style=\"background:#1c7a3a\"></i>intervention<i style=\"background:#b7791f\"></i>random delay</p>\n");
}

fn lanes(
    s: &mut String,
    d: &Diagnosis,
    run: &Run,
    class: &str,
    title: &str,
    (origin, span): (u64, u64),
    names: &BTreeMap<PredId, String>,
) {
    const W: f64 = 560.0;
    const LEFT: f64 = 110.0;
    const ROW: f64 = 12.0;
    const MAX_CALLS: usize = 4000;
    let funcs = &d.session.functions;
    let hot_sites: Vec<(u32, Role, u32)> = d
        .discovery
        .as_ref()
        .map(|x| x.path.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|&p| d.analysis.catalog.get(p))
        .flat_map(|p| {
            [p.key.site(), p.key.other_site()]
                .into_iter()
                .flatten()
                .map(|s| (s.func, s.role, s.instance))
        })
        .collect();
    let mut roles: Vec<Role> =
        run.threads.iter().map(|t| t.role).chain(run.calls.iter().map(|c| c.role)).collect();
    roles.sort_unstable();
    roles.dedup();
    // The session's names, as the predicates say them (the run may be an
    // intervened one from outside the session: its own threads come last).
    let role_names = RoleNames::of_runs(d.session.runs.iter().chain([run]));
    // Nesting depth of each call on its role.
    let mut depth = vec![0usize; run.calls.len()];
    let mut lane_depth: BTreeMap<Role, usize> = BTreeMap::new();
    let mut open: BTreeMap<Role, Vec<u64>> = BTreeMap::new();
    for (i, c) in run.calls.iter().enumerate().take(MAX_CALLS) {
        let stack = open.entry(c.role).or_default();
        stack.retain(|&end| end > c.entry_ns);
        depth[i] = stack.len();
        stack.push(c.exit_ns.unwrap_or(run.end_ns));
        let m = lane_depth.entry(c.role).or_default();
        *m = (*m).max(depth[i] + 1);
    }
    let mut lane_y: BTreeMap<Role, (f64, f64)> = BTreeMap::new();
    let mut y = 22.0;
    for &r in &roles {
        let h = lane_depth.get(&r).copied().unwrap_or(1) as f64 * ROW + 10.0;
        lane_y.insert(r, (y, h));
        y += h + 4.0;
    }
    let height = y + 6.0;
    let x_of = |t: u64| {
        (LEFT + (t.saturating_sub(origin) as f64 / span as f64) * (W - LEFT - 8.0)).min(W - 8.0)
    };
    let _ = writeln!(
        s,
        "<section class=\"timeline {class}\" data-run=\"{}\" data-label=\"{class}\"><h3>{}</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height:.0}\" viewBox=\"0 0 {W} {height:.0}\">",
        run.id,
        esc(title)
    );
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"12\" font-size=\"10\" fill=\"#6b7482\">first call</text><text x=\"{:.0}\" y=\"12\" font-size=\"10\" fill=\"#6b7482\" text-anchor=\"end\">+{}</text>",
        W - 8.0,
        duration(span)
    );
    for &r in &roles {
        let (ly, lh) = lane_y[&r];
        let _ = writeln!(
            s,
            "<g class=\"lane\" data-role=\"{r}\"><rect x=\"0\" y=\"{ly:.1}\" width=\"{W}\" height=\"{lh:.1}\" fill=\"{}\"/><text class=\"lane-name\" x=\"4\" y=\"{:.1}\">{}</text></g>",
            if r % 2 == 0 { "#f6f7f9" } else { "#ffffff" },
            ly + 12.0,
            esc(&role_names.label(r))
        );
    }
    for (i, c) in run.calls.iter().enumerate().take(MAX_CALLS) {
        let Some(f) = funcs.get(c.func as usize) else { continue };
        if f.internal {
            continue;
        }
        let (ly, _) = lane_y[&c.role];
        let x1 = x_of(c.entry_ns);
        let x2 = x_of(c.exit_ns.unwrap_or(run.end_ns)).max(x1 + 1.0);
        let hot = hot_sites.contains(&(c.func, c.role, c.instance));
        let (by, bw, bh) = (ly + 4.0 + depth[i] as f64 * ROW, x2 - x1, ROW - 1.5);
        // The label is drawn in a viewport of the bar's size, which clips
        // it to the bar: a short call shows the start of its name.
        let _ = writeln!(
            s,
            "<g class=\"call\"><title>{}</title><rect class=\"slice{}\" x=\"{x1:.1}\" y=\"{by:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\"/><svg x=\"{x1:.1}\" y=\"{by:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\"><text class=\"bar-label\" x=\"2\" y=\"{:.1}\">{}</text></svg></g>",
            esc(&bar_title(c, &f.name, &role_names.label(c.role), origin)),
            if hot { " hot" } else { "" },
            bh - 2.0,
            esc(&bar_label(c, &f.name))
        );
    }
    for m in marks(d, run, names) {
        let Some(&(ly, lh)) = lane_y.get(&m.role) else { continue };
        let x = x_of(m.t_ns);
        let (top, bottom) = (ly, ly + lh);
        let _ = writeln!(
            s,
            "<path class=\"mark {}\" d=\"M{:.1},{top:.1} L{:.1},{top:.1} L{x:.1},{:.1} z M{:.1},{top:.1} L{:.1},{bottom:.1}\" stroke-width=\"1.5\" stroke=\"currentColor\"><title>{}</title></path>",
            m.class,
            x - 5.0,
            x + 5.0,
            top + 7.0,
            x,
            x,
            esc(&m.title)
        );
    }
    s.push_str("</svg></section>\n");
}

/// A call's bar label: "fetch#2", the 2nd call of fetch on its thread
/// (the lane), as the comparison chains say it.
pub(super) fn bar_label(c: &crate::model::Call, name: &str) -> String {
    format!("{name}#{}", c.instance)
}

/// A call's tooltip: the call in the report's words, when it started after
/// the timeline's first call (`origin`), how long it took, what it returned.
pub(super) fn bar_title(c: &crate::model::Call, name: &str, role: &str, origin: u64) -> String {
    format!(
        "call {} of {name} on {role}: start +{}, {}{}",
        c.instance,
        duration(c.entry_ns.saturating_sub(origin)),
        c.duration_ns()
            .map_or_else(|| "did not return".to_owned(), |n| format!("duration {}", duration(n))),
        c.ret.map_or(String::new(), |v| format!(", returned {v}"))
    )
}

/// The ranking table, like `aid-agent analyze`.
fn ranking(s: &mut String, r: &DebugReport<'_>, path: &[PredId]) {
    const ROWS: usize = 30;
    s.push_str("<h2>Ranking</h2>\n<p class=\"guide\">Every predicate by CBI importance (how strongly it predicts the failure). F(P) and S(P): failing and passing runs where it held. A predicate in every failing run and no passing one is <em>fully discriminative</em>; one aid can force back to its passing behaviour is a <em>candidate</em> for intervention.</p>\n<table id=\"ranking\">\n<thead><tr><th>rank</th><th>id</th><th>importance</th><th>F(P)</th><th>S(P)</th><th>status</th><th>predicate</th></tr></thead>\n<tbody>\n");
    for row in r.analysis.rows.iter().take(ROWS) {
        let _ = writeln!(
            s,
            "<tr{} data-pred=\"{}\"><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            if path.contains(&row.id) { " class=\"on-path\"" } else { "" },
            row.id,
            row.rank,
            row.id,
            row.scores.importance,
            row.scores.counts.failing_true,
            row.scores.counts.passing_true,
            esc(&row.status.replace('_', " ")),
            esc(&row.description)
        );
    }
    s.push_str("</tbody>\n</table>\n");
    if r.analysis.rows.len() > ROWS {
        let _ = writeln!(
            s,
            "<p class=\"guide\">{} more in report.json and `aid-agent analyze`.</p>",
            r.analysis.rows.len() - ROWS
        );
    }
}
