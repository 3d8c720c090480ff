//! Candidates an intervention negates by construction. Serialising two
//! groups of calls (or holding one call until the other has returned)
//! leaves no moment at which a call of one runs beside a call of the
//! other — nor beside any call made inside one of them — so every
//! candidate that says two such calls ran at the same time (an overlap, a
//! race, an interleaving of critical sections, a lock-order cycle, two
//! statement windows at once) cannot hold while it acts.
//!
//! Such a candidate can witness nothing in that round, and its absence is
//! no sign that the intervention changed something upstream: it is part of
//! what the intervention does. The AC-DAG keeps these pairs
//! ([`crate::causal::AcDag::implied`]) and the engine leaves them out of
//! what may witness or confound a round, as it does the candidates tied to
//! it. Before, a round on "t1 takes a lock while t2 is between two
//! critical sections" (queue_bad of the corpus), whose only upstream
//! candidates were overlaps of t1 and t2 that its serialisation made
//! impossible, ran 600 runs without a failure and was set aside, "nothing
//! upstream held".
//!
//! A serialisation restricted to calls on one object counts too: it was
//! chosen because every failing run showed the two sides on that object,
//! so it keeps them apart in every run like those; a run in which they
//! were on two objects and overlapped shows the candidate, which then
//! still witnesses (any candidate that holds in a round does).

use crate::{
    model::{CallSet, FuncId, Intervention, Point, Role, Run},
    predicates::{Kind, PredId},
    util::fxhash::FxMap,
};

/// Kinds that hold only while a call of one side runs at the same time as
/// a call of the other.
fn co_occurrence(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Overlap
            | Kind::Concurrent
            | Kind::DataRace
            | Kind::Interleaved
            | Kind::BeforeFirstSection
            | Kind::BetweenStatements
            | Kind::LockCycle
    )
}

/// The two sides an intervention keeps from running at the same time, when
/// it keeps every call of one apart from every call of the other: each
/// part's [`sides`], but of holds only one that keeps a call from starting
/// until the other has returned.
fn kept_apart(iv: &Intervention) -> Vec<(CallSet, CallSet)> {
    iv.parts()
        .into_iter()
        .filter(|part| match part {
            Intervention::HoldUntil { point, until_point, .. } => {
                (*point, *until_point) == (Point::Entry, Point::Exit)
            }
            _ => true,
        })
        .filter_map(sides)
        .collect()
}

/// The two sides a co-occurrence candidate says ran at the same time, read
/// from the intervention that negates it (object restrictions do not
/// matter here: the candidate's calls are among them either way).
fn sides(iv: &Intervention) -> Option<(CallSet, CallSet)> {
    match iv {
        Intervention::Serialize { a, b } => Some((CallSet::site(*a), CallSet::site(*b))),
        Intervention::SerializeGroups { a, b, .. } => Some((a.clone(), b.clone())),
        Intervention::HoldUntil { site, until, .. } => {
            Some((CallSet::site(*site), CallSet::site(*until)))
        }
        _ => None,
    }
}

/// Per thread, the function whose first call encloses every other traced
/// call of that thread, in every run that has the thread (its start
/// routine, when traced). aid's own probes (`internal`: the C library's
/// lock calls, statement points), which record entries only, are not
/// calls here.
pub(super) fn bodies(runs: &[Run], internal: &dyn Fn(FuncId) -> bool) -> FxMap<Role, FuncId> {
    let end = |c: &crate::model::Call| c.exit_ns.unwrap_or(u64::MAX);
    let mut out: FxMap<Role, Option<FuncId>> = FxMap::default();
    for run in runs {
        let mut first: FxMap<Role, &crate::model::Call> = FxMap::default();
        for c in run.calls.iter().filter(|c| !internal(c.func)) {
            let f = first.entry(c.role).or_insert(c);
            if (c.entry_ns, std::cmp::Reverse(end(c))) < (f.entry_ns, std::cmp::Reverse(end(f))) {
                *f = c;
            }
        }
        for (role, body) in first {
            let encloses = run
                .calls
                .iter()
                .filter(|c| c.role == role && !internal(c.func))
                .all(|c| body.entry_ns <= c.entry_ns && end(c) <= end(body));
            let found = (encloses && body.instance == 1).then_some(body.func);
            let seen = out.entry(role).or_insert(found);
            if *seen != found {
                *seen = None;
            }
        }
    }
    out.into_iter().filter_map(|(r, f)| Some((r, f?))).collect()
}

/// Whether every call of `inner` is a call of `outer` or made inside one
/// of them: the same function on the same threads (the same call, or
/// `outer` names every call), or on threads whose body `outer` names.
fn covered(inner: &CallSet, outer: &CallSet, bodies: &FxMap<Role, FuncId>) -> bool {
    let threads = inner.roles.iter().all(|r| outer.roles.contains(r));
    let same = inner.func == outer.func
        && (outer.instance == 0 || outer.instance == inner.instance)
        && (outer.within.is_none() || outer.within == inner.within);
    let inside = outer.instance <= 1
        && outer.within.is_none()
        && inner.roles.iter().all(|r| bodies.get(r) == Some(&outer.func));
    threads && (same || inside)
}

/// A candidate as this reads it: its id, kind and intervention.
pub(super) type Candidate<'a> = (PredId, Kind, Option<&'a Intervention>);

/// Pairs (p, q) of candidates where p's intervention makes q impossible.
pub(super) fn implied(
    candidates: &[Candidate<'_>],
    bodies: &FxMap<Role, FuncId>,
) -> Vec<(PredId, PredId)> {
    let apart: Vec<(PredId, Vec<(CallSet, CallSet)>)> = candidates
        .iter()
        .filter_map(|&(p, _, iv)| Some((p, kept_apart(iv?))))
        .filter(|(_, a)| !a.is_empty())
        .collect();
    let mut out = Vec::new();
    for &(q, kind, iv) in candidates {
        if !co_occurrence(kind) {
            continue;
        }
        let Some((qa, qb)) = iv.and_then(sides) else { continue };
        for (p, pairs) in &apart {
            let negates = pairs.iter().any(|(a, b)| {
                (covered(&qa, a, bodies) && covered(&qb, b, bodies))
                    || (covered(&qa, b, bodies) && covered(&qb, a, bodies))
            });
            if *p != q && negates {
                out.push((*p, q));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label, Site,
        testing::{call, run},
    };

    const T1: FuncId = 0;
    const T2: FuncId = 1;
    const ENQUEUE: FuncId = 2;
    const DEQUEUE: FuncId = 3;

    fn site(func: FuncId, role: Role) -> Site {
        Site { func, role, instance: 1 }
    }

    fn every(func: FuncId, role: Role) -> CallSet {
        CallSet { func, roles: vec![role], instance: 0, within: None }
    }

    /// A producer thread (role 1, body t1, which calls enqueue) and a
    /// consumer (role 2, body t2, which calls dequeue), as queue_bad of
    /// the corpus: serialising t1 and t2 (all calls, or those on one
    /// object) makes impossible every candidate about their calls, or
    /// calls inside them, running at the same time; serialising enqueue
    /// with t2, or one dequeue with t1, makes nothing else impossible, nor
    /// does an order.
    #[test]
    fn keeping_two_thread_bodies_apart_makes_their_overlaps_impossible() {
        let calls = vec![
            call(T1, 1, 1, 10, Some(100), Some(0)),
            call(ENQUEUE, 1, 1, 20, Some(30), Some(0)),
            call(T2, 2, 1, 15, Some(120), Some(0)),
            call(DEQUEUE, 2, 1, 40, Some(50), Some(0)),
            call(DEQUEUE, 2, 2, 60, Some(70), Some(0)),
        ];
        // A lock probe's entry (function 9, aid's own) has no return.
        let mut calls = calls;
        calls.push(call(9, 1, 1, 25, None, None));
        let runs = vec![run(1, Label::Fail, calls, 200)];
        let bodies = bodies(&runs, &|f| f == 9);
        assert_eq!((bodies.get(&1), bodies.get(&2)), (Some(&T1), Some(&T2)));
        let bodies_apart = Intervention::SerializeGroups {
            a: every(T1, 1),
            b: every(T2, 2),
            object: Some((1, 1)),
        };
        let calls_apart = Intervention::Serialize { a: site(T1, 1), b: site(T2, 2) };
        let enqueue_on_object = Intervention::SerializeGroups {
            a: every(ENQUEUE, 1),
            b: every(T2, 2),
            object: Some((1, 1)),
        };
        let dequeue_after_t1 = Intervention::Serialize { a: site(DEQUEUE, 2), b: site(T1, 1) };
        let order = Intervention::HoldUntil {
            site: site(T2, 2),
            point: Point::Exit,
            until: site(T1, 1),
            until_point: Point::Entry,
        };
        let candidates: Vec<Candidate<'_>> = vec![
            (PredId(40), Kind::Interleaved, Some(&bodies_apart)),
            (PredId(36), Kind::Overlap, Some(&calls_apart)),
            (PredId(24), Kind::Overlap, Some(&enqueue_on_object)),
            (PredId(25), Kind::Overlap, Some(&dequeue_after_t1)),
            (PredId(7), Kind::Order, Some(&order)),
        ];
        let mut got = implied(&candidates, &bodies);
        got.sort_unstable();
        let p = PredId;
        assert_eq!(
            got,
            vec![
                (p(36), p(24)),
                (p(36), p(25)),
                (p(36), p(40)),
                (p(40), p(24)),
                (p(40), p(25)),
                (p(40), p(36)),
            ]
        );
    }

    /// A thread whose first call does not enclose the others has no body.
    #[test]
    fn a_thread_whose_calls_follow_each_other_has_no_body() {
        let calls =
            vec![call(T1, 1, 1, 10, Some(20), Some(0)), call(ENQUEUE, 1, 1, 30, Some(40), Some(0))];
        assert!(bodies(&[run(1, Label::Pass, calls, 100)], &|_| false).is_empty());
    }
}
