//! `slice --verify` (seed 003; it replaces the paper's proof that the
//! slice is an error trace): re-run the program forcing the slice's
//! happens-before edges between threads and check that the failure
//! reproduces, then flip each hazard edge (war, waw) on its own, the
//! others still forced, to show whether it is necessary.
//!
//! An edge `a → b` is forced by holding `b` until `a` has happened
//! (`HoldUntil`): `b` at its entry until `a` has returned when the two
//! calls did not overlap in the sliced run, else at the points where the
//! access events of the edge sit (a read at its call's entry, a write at
//! its exit). A flip holds `a` until `b` instead. One hold per call site:
//! when several edges end at the same call, the one whose source came last
//! in the sliced run is forced and the others are expected to follow from
//! it (listed as implied). A flip always holds the whole of `a` (from its
//! entry) until `b` has returned.
//!
//! Runs are not replayed: each re-run is a fresh run under the holds. A
//! re-run is usable when every hold was carried out (none timed out) and
//! no events were lost.

use std::{
    fmt::Write as _,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use serde::Serialize;

use super::{
    access::{Access, RunAccesses, Substrate},
    rerun,
    slice::{Edge, EdgeKind, Slice, numbers},
};
use crate::{
    bpf::LoadOptions,
    intervene::Plan,
    model::{Intervention, Point, Run, Site},
    record::progress::Progress,
    store::Loaded,
};

/// One happens-before edge of the slice, as holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    pub edge: Edge,
    pub from: (Site, Point),
    pub to: (Site, Point),
    /// When `from` happened in the sliced run (for choosing among edges
    /// into the same call).
    from_ns: u64,
    /// `war 2→7 account`, with the slice's call numbers.
    pub text: String,
}

impl Order {
    fn hazard(&self) -> bool {
        matches!(self.edge.kind, EdgeKind::War | EdgeKind::Waw)
    }

    /// `to` waits for `from`: the edge as it was.
    fn force(&self) -> Intervention {
        Intervention::HoldUntil {
            site: self.to.0,
            point: self.to.1,
            until: self.from.0,
            until_point: self.from.1,
        }
    }

    /// `from` waits for `to`: the edge reversed, whole calls (`from`
    /// enters only once `to` has returned), so that every access of
    /// `from` comes after every access of `to`.
    fn flip(&self) -> Intervention {
        Intervention::HoldUntil {
            site: self.from.0,
            point: Point::Entry,
            until: self.to.0,
            until_point: Point::Exit,
        }
    }
}

/// The slice's data edges between threads (raw, war, waw), as holds.
pub fn orders(s: &Slice, run: &Run, acc: &RunAccesses, substrate: &Substrate) -> Vec<Order> {
    let num = numbers(run, &substrate.functions);
    let site = |c: usize| {
        let call = &run.calls[c];
        Site { func: call.func, role: call.role, instance: call.instance }
    };
    // Where the call's access of `object` of this kind sits.
    let point = |c: usize, object, access| {
        acc.events
            .iter()
            .find(|e| e.call == c && Some(e.object) == object && e.access == access)
            .map_or(if access == Access::R { Point::Entry } else { Point::Exit }, |e| e.point)
    };
    s.hb_edges(run)
        .filter(|e| matches!(e.kind, EdgeKind::Raw | EdgeKind::War | EdgeKind::Waw))
        .map(|e| {
            let (a, b) = (&run.calls[e.from], &run.calls[e.to]);
            let apart = a.exit_ns.is_some_and(|x| x <= b.entry_ns);
            let (from_point, to_point) = if apart {
                (Point::Exit, Point::Entry)
            } else {
                let (fa, ta) = match e.kind {
                    EdgeKind::Raw => (Access::W, Access::R),
                    EdgeKind::War => (Access::R, Access::W),
                    _ => (Access::W, Access::W),
                };
                (point(e.from, e.object, fa), point(e.to, e.object, ta))
            };
            let from_ns = if from_point == Point::Exit {
                a.exit_ns.unwrap_or(a.entry_ns)
            } else {
                a.entry_ns
            };
            let object =
                e.object.map(|o| format!(" {}", substrate.objects.name(o))).unwrap_or_default();
            Order {
                edge: *e,
                from: (site(e.from), from_point),
                to: (site(e.to), to_point),
                from_ns,
                text: format!("{} {}→{}{object}", e.kind.as_str(), num[e.from], num[e.to]),
            }
        })
        .collect()
}

/// One set of holds, re-run `repeat` times.
#[derive(Clone, Debug, Serialize)]
pub struct Experiment {
    /// `forced`, or `flip war 2→7 account`.
    pub label: String,
    /// The holds, as edges.
    pub forced: Vec<String>,
    pub runs: u32,
    pub usable: u32,
    pub failed: u32,
    /// `reproduces` / `does not reproduce` (forced); `necessary` / `not
    /// necessary on its own` (flips); `undecided` when under half the
    /// re-runs were usable.
    pub verdict: String,
}

/// What `--verify` found.
#[derive(Clone, Debug, Serialize)]
pub struct Verification {
    pub repeat: u32,
    pub theta: f64,
    pub forced: Experiment,
    /// Edges not held by a hold of their own (another edge into the same
    /// call was forced).
    pub implied: Vec<String>,
    pub flips: Vec<Experiment>,
    pub reruns: u32,
    pub out: PathBuf,
}

/// How the re-runs are made.
#[derive(Clone, Debug)]
pub struct VerifySettings {
    pub repeat: u32,
    pub theta: f64,
    pub hold_timeout: Duration,
    pub timeout: Duration,
    pub out: PathBuf,
    pub load: LoadOptions,
}

/// One hold per site: of several orders ending at the same site, the one
/// whose source happened last.
fn one_per_site<'a>(orders: impl Iterator<Item = &'a Order>) -> (Vec<&'a Order>, Vec<&'a Order>) {
    let mut chosen: Vec<&Order> = Vec::new();
    let mut implied = Vec::new();
    for o in orders {
        match chosen.iter().position(|c| c.to == o.to) {
            Some(i) if chosen[i].from_ns < o.from_ns => {
                implied.push(std::mem::replace(&mut chosen[i], o));
            }
            Some(_) => implied.push(o),
            None => chosen.push(o),
        }
    }
    (chosen, implied)
}

/// Re-runs the program `loaded` was recorded from: the slice's orders
/// forced, then each hazard order flipped alone.
pub fn verify_program(
    loaded: &Loaded,
    orders: &[Order],
    settings: &VerifySettings,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Verification> {
    anyhow::ensure!(
        !orders.is_empty(),
        "the slice has no happens-before edge between threads: nothing to verify"
    );
    let (mut session, policy) =
        rerun::restart(loaded, &settings.out, settings.timeout, settings.load)?;
    let (forced, implied) = one_per_site(orders.iter());
    let mut experiments: Vec<(String, Vec<&Order>, Option<&Order>)> =
        vec![("forced".to_owned(), forced.clone(), None)];
    for h in orders.iter().filter(|o| o.hazard()) {
        // The flip holds `from`: no other hold may act at that site.
        let rest: Vec<&Order> = forced
            .iter()
            .copied()
            .filter(|o| *o != h && o.to != (h.from.0, Point::Entry))
            .collect();
        experiments.push((format!("flip {}", h.text), rest, Some(h)));
    }
    let total = experiments.len() as u64 * u64::from(settings.repeat);
    ui.begin("verifying", Some(total));
    let mut next_id = 1;
    let mut results = Vec::new();
    for (label, holds, flip) in experiments {
        let mut interventions: Vec<Intervention> = holds.iter().map(|o| o.force()).collect();
        interventions.extend(flip.map(Order::flip));
        let plan = Plan::new(&interventions, settings.hold_timeout, session.tracer.functions());
        let (mut usable, mut failed, mut runs) = (0, 0, 0);
        for _ in 0..settings.repeat {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            let rec = session.tracer.intervene(&session.target, next_id, &policy, &plan, cancel)?;
            next_id += 1;
            session.writer.append(&rec, session.tracer.functions())?;
            runs += 1;
            let ok = rec.run.complete
                && !cancel.load(Ordering::Relaxed)
                && rec.run.interventions.iter().all(|a| a.applied && !a.timed_out);
            if ok {
                usable += 1;
                failed += u32::from(rec.run.failed());
            }
            ui.step(&format!("{label}: {failed} of {usable} usable re-runs failed"));
        }
        let verdict = verdict(flip.is_some(), runs, usable, failed, settings.theta);
        let mut forced: Vec<String> = holds.iter().map(|o| o.text.clone()).collect();
        forced.extend(flip.map(|o| format!("{} reversed", o.text)));
        results.push(Experiment { label, forced, runs, usable, failed, verdict });
    }
    ui.end();
    let forced = results.remove(0);
    Ok(Verification {
        repeat: settings.repeat,
        theta: settings.theta,
        forced,
        implied: implied.iter().map(|o| o.text.clone()).collect(),
        flips: results,
        reruns: next_id - 1,
        out: settings.out.clone(),
    })
}

/// The verdict on one experiment: at least half the re-runs usable, and
/// `theta` of those failing (forced) or passing (a flip).
fn verdict(flip: bool, runs: u32, usable: u32, failed: u32, theta: f64) -> String {
    if usable == 0 || usable * 2 < runs {
        return "undecided: too few usable re-runs".into();
    }
    let rate = f64::from(failed) / f64::from(usable);
    match (flip, rate >= theta, 1.0 - rate >= theta) {
        (false, true, _) => "the failure reproduces".into(),
        (false, false, _) => "the failure does not reproduce".into(),
        (true, _, true) => "necessary".into(),
        (true, _, false) => "not necessary on its own".into(),
    }
}

/// `--verify`'s text, after the slice's.
pub fn render_text(v: &Verification) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "verify: {} re-run(s) per experiment, θ = {} (re-runs in {}):",
        v.repeat,
        v.theta,
        v.out.display()
    );
    let line = |s: &mut String, e: &Experiment, what: &str| {
        let _ = writeln!(
            s,
            "  {what}: {} of {} usable re-run(s) failed ({} made): {}",
            e.failed, e.usable, e.runs, e.verdict
        );
    };
    line(&mut s, &v.forced, &format!("forced {}", v.forced.forced.join(", ")));
    if !v.implied.is_empty() {
        let _ = writeln!(s, "    (implied, not held on their own: {})", v.implied.join(", "));
    }
    for f in &v.flips {
        line(&mut s, f, &f.label);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_need_usable_runs_and_theta() {
        assert_eq!(verdict(false, 10, 10, 10, 0.8), "the failure reproduces");
        assert_eq!(verdict(false, 10, 10, 7, 0.8), "the failure does not reproduce");
        assert_eq!(verdict(true, 10, 9, 0, 0.8), "necessary");
        assert_eq!(verdict(true, 10, 9, 9, 0.8), "not necessary on its own");
        assert_eq!(verdict(true, 10, 4, 0, 0.8), "undecided: too few usable re-runs");
    }
}
