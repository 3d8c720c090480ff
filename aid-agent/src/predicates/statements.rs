//! Windows between two statements of one call, and the statements of
//! another thread that ran inside them, read from aid's statement points
//! ([`crate::model::Probe::Statement`]: where source lines begin inside
//! traced functions, attached to the runs that carry noise once the
//! amplification ladder's first pass provoked nothing).
//!
//! A pair published by two plain stores (`a = 1; b = -1;`) and read by a
//! checker on another thread is torn only when the read runs after the
//! first store and before the second: no call and no lock marks that
//! moment, but the statement points do. A statement point's window runs
//! from its event to its thread's next statement event (or the call's
//! return): the thread was past the statements before it and had not
//! begun the next one. Two windows of two threads that overlap say that
//! the statements they hold ran at the same time: "call 1 of check_pair
//! runs two_stores.c:16 while call 1 of set_pair is between two_stores.c:11
//! and its next statement", when failing runs show it and no passing run
//! does. Negated by holding the other call's thread at its entry until
//! the call has returned: it then runs after every statement of the call.
//!
//! Threads that are one each (per-call keys), as for the order of first
//! sections (`sections.rs`). A key names the first window's statement
//! point in `callee` and the second's by its rank among its function's
//! points in `arg` ([`Points`]).

use super::{
    Condition, Kind, PredKey,
    base::{Funcs, Learned, Points},
    calls::site_of,
    index::{RunIndex, end_of},
};
use crate::model::{FuncId, Intervention, Point, Role, Run, Site};
use crate::util::fxhash::{FxMap, FxSet};

/// Windows of other threads paired with one window, those that began
/// last before its end first, among twice as many: keeps the pairs linear
/// in the statement events.
const PER_WINDOW: usize = 8;

/// Two overlapping statement windows: (the call whose window began
/// first, its statement point, the other call, its statement point), by
/// index in `run.calls` for the calls.
pub(super) type Window = (u32, FuncId, u32, FuncId);

/// One statement window: its call, point, thread, and times.
struct Span {
    call: u32,
    point: FuncId,
    role: Role,
    from: u64,
    until: u64,
}

/// Every [`Window`] pair of the run, with when it first held (the later
/// window's start).
pub(super) fn windows(
    idx: &RunIndex<'_>,
    points: &Points,
    single: &dyn Fn(Role) -> bool,
) -> Vec<(Window, u64)> {
    let run = idx.run;
    let traced =
        |i: usize| idx.group.get(i).is_some_and(Option::is_some) && run.calls[i].instance > 0;
    // One pass in entry order, as `sections::sections` does: per thread,
    // the traced calls running; each statement event opens a window in
    // the innermost one, and closes its thread's previous window.
    let mut stacks: FxMap<Role, Vec<usize>> = FxMap::default();
    let mut open: FxMap<Role, usize> = FxMap::default();
    let mut spans: Vec<Span> = Vec::new();
    for (i, c) in run.calls.iter().enumerate() {
        let point = points.is_point(c.func);
        if !(point || traced(i)) || !single(c.role) {
            continue;
        }
        let stack = stacks.entry(c.role).or_default();
        while stack.last().is_some_and(|&j| end_of(&run.calls[j], run) < c.entry_ns) {
            stack.pop();
        }
        if !point {
            stack.push(i);
            continue;
        }
        if let Some(k) = open.remove(&c.role) {
            spans[k].until = spans[k].until.min(c.entry_ns);
        }
        if let Some(&a) = stack.last() {
            let until = end_of(&run.calls[a], run);
            open.insert(c.role, spans.len());
            spans.push(Span {
                call: a as u32,
                point: c.func,
                role: c.role,
                from: c.entry_ns,
                until,
            });
        }
    }
    spans.sort_by_key(|s| s.from);
    let mut out = Vec::new();
    for (i, b) in spans.iter().enumerate() {
        // Windows of other threads that began before this one and still
        // held when it began.
        for a in spans[..i]
            .iter()
            .rev()
            .filter(|a| a.role != b.role)
            .take(2 * PER_WINDOW)
            .filter(|a| a.until > b.from)
            .take(PER_WINDOW)
        {
            out.push(((a.call, a.point, b.call, b.point), b.from));
        }
    }
    out
}

/// A window pair by its sites: (call, its point, other call, its point).
type Key = (Site, FuncId, Site, FuncId);

fn keys(idx: &RunIndex<'_>, funcs: &Funcs) -> FxSet<Key> {
    let single = |r: Role| funcs.single(idx, r);
    let calls = &idx.run.calls;
    windows(idx, &funcs.points, &single)
        .into_iter()
        .map(|((a, pa, b, pb), _)| {
            (site_of(&calls[a as usize]), pa, site_of(&calls[b as usize]), pb)
        })
        .collect()
}

/// The window pairs passing runs showed.
#[derive(Default)]
pub(super) struct StatementBase {
    seen: FxSet<Key>,
}

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut StatementBase) {
    if funcs.points.any() {
        base.seen.extend(keys(idx, funcs));
    }
}

/// Window pairs of failing runs no passing run shows.
#[derive(Default)]
pub(super) struct Candidates {
    found: FxSet<Key>,
}

pub(super) fn candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &StatementBase,
    out: &mut Candidates,
) {
    if funcs.points.any() {
        out.found.extend(keys(idx, funcs).into_iter().filter(|k| !base.seen.contains(k)));
    }
}

/// Keeps the window pairs whose calls and statement points some passing
/// run made too (there is a passing order to restore).
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: &mut Candidates) {
    if cands.found.is_empty() {
        return;
    }
    let mut made: FxSet<Key> = FxSet::default();
    for run in passing {
        let idx = funcs.index(run);
        let reached: FxSet<FuncId> =
            run.calls.iter().map(|c| c.func).filter(|&f| funcs.points.is_point(f)).collect();
        for k in &cands.found {
            if reached.contains(&k.1)
                && reached.contains(&k.3)
                && idx.index_of(k.0).is_some()
                && idx.index_of(k.2).is_some()
            {
                made.insert(*k);
            }
        }
    }
    cands.found.retain(|k| made.contains(k));
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    let mut found: Vec<&Key> = cands.found.iter().collect();
    found.sort_unstable();
    found
        .into_iter()
        .map(|&(a, pa, b, pb)| {
            let key = PredKey {
                callee: Some(pa),
                arg: funcs.points.rank(pb),
                ..PredKey::pair(Kind::BetweenStatements, a, b)
            };
            // B runs after A has returned: after every statement of A.
            let iv = Intervention::HoldUntil {
                site: b,
                point: Point::Entry,
                until: a,
                until_point: Point::Exit,
            };
            (key, Condition::RunsBetweenStatements, super::Anchor::LaterEntry, Some(iv))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        model::{
            Function, Label, Probe, Session,
            testing::{call, function, run, thread},
        },
        predicates::{Anchor, ExtractConfig, learn},
    };

    const US: u64 = 1_000;

    /// set_pair (0) and check_pair (1), with two statement points each:
    /// set_pair's at lines 10 and 11 (2, 3), check_pair's at 16 and 17
    /// (4, 5).
    fn functions() -> Vec<Function> {
        let point = |id: u32, parent: &str, off: u32, line: u32| {
            let mut f = function(id, &format!("{parent} at t.c:{line}"))
                .with_symbol(&format!("{parent}+{off:#x}"));
            f.internal = true;
            f.probe = Probe::Statement;
            f
        };
        vec![
            function(0, "set_pair"),
            function(1, "check_pair"),
            point(2, "set_pair", 8, 10),
            point(3, "set_pair", 0x12, 11),
            point(4, "check_pair", 8, 16),
            point(5, "check_pair", 0x10, 17),
        ]
    }

    /// A run: set_pair on thread 1 from 10 µs, past line 10 at 12 µs and
    /// line 11 at `line11`; check_pair on thread 2 from `check` µs, at
    /// its lines 2 and 10 µs later.
    fn pair_run(id: u32, label: Label, line11: u64, check: u64) -> Run {
        let set_end = line11 + 2;
        let calls = vec![
            call(0, 1, 1, 10 * US, Some(set_end * US), None),
            call(2, 1, 1, 12 * US, None, None),
            call(3, 1, 1, line11 * US, None, None),
            call(1, 2, 1, check * US, Some((check + 12) * US), None),
            call(4, 2, 1, (check + 2) * US, None, None),
            call(5, 2, 1, (check + 10) * US, None, None),
        ];
        run(id, label, calls, 200 * US).with_threads(vec![
            thread(0, "main"),
            thread(1, "set_pair"),
            thread(2, "check_pair"),
        ])
    }

    #[test]
    fn points_know_their_function_and_rank() {
        let p = Points::new(&functions());
        assert!(!p.is_point(0) && p.is_point(2) && p.is_point(5));
        assert_eq!((p.rank(2), p.rank(3), p.rank(4), p.rank(5)), (0, 1, 0, 1));
        assert_eq!((p.of_rank(0, 1), p.of_rank(1, 0), p.of_rank(1, 2)), (Some(3), Some(4), None));
    }

    /// Failing runs: set_pair held past line 10 (after `a = 1`) while
    /// check_pair reads; passing runs: check_pair before or after. The
    /// predicate is the overlap of set_pair's window from line 10 with
    /// check_pair's from line 16, held where check_pair's window began,
    /// negated by holding check_pair until set_pair has returned; a
    /// window check_pair only touches after line 11 (run 5) is another.
    #[test]
    fn a_read_between_two_stores_is_a_predicate() {
        let mut runs = Vec::new();
        for i in 0..4 {
            runs.push(pair_run(i, Label::Fail, 50, 20 + u64::from(i)));
            runs.push(pair_run(10 + i, Label::Pass, 14, 70));
        }
        let s = Session { functions: functions(), runs };
        let c = learn(&s, &ExtractConfig::default()).unwrap();
        let a = Site { func: 0, role: 1, instance: 1 };
        let b = Site { func: 1, role: 2, instance: 1 };
        let key =
            PredKey { callee: Some(2), arg: 0, ..PredKey::pair(Kind::BetweenStatements, a, b) };
        let p = &c.predicates[c.find(&key).expect("learned").0 as usize];
        assert_eq!(p.condition, Condition::RunsBetweenStatements);
        assert_eq!(p.anchor, Anchor::LaterEntry);
        assert_eq!(
            p.intervention,
            Some(Intervention::HoldUntil {
                site: b,
                point: Point::Entry,
                until: a,
                until_point: Point::Exit
            })
        );
        assert_eq!(
            p.description,
            "call 1 of check_pair on check_pair#2 is between t.c:16 and its next statement while call 1 of set_pair on set_pair#1 is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
        );
        for r in &s.runs {
            let t = c.evaluate(r);
            assert_eq!(t.holds(p.id), r.failed(), "run {}", r.id);
        }
        // Placed where check_pair's window began (22 µs in run 0).
        assert_eq!(c.evaluate(&s.runs[0]).anchor(p.id), Some(22 * US));
        // check_pair reading after line 11 (set_pair at 12..15 µs, its
        // window from line 11 until its return at 16 µs): not this one.
        let after = pair_run(5, Label::Fail, 14, 13);
        assert!(!c.evaluate(&after).holds(p.id));
        // A run without the statement points does not observe it.
        let mut plain = s.runs[0].clone();
        plain.calls.retain(|c| c.func < 2);
        assert!(!c.evaluate(&plain).observed(p.id));
    }
}
