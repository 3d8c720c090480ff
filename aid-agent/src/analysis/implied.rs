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
//!
//! A hold of a call at its entry until another has returned also makes
//! impossible every order that says the held call came first (ended,
//! started or took its first critical section before the other): the
//! token ring's "t1 was not the first" is negated by holding t2 and t3
//! until t1 has returned, which makes "t2's first section came before
//! t1's" impossible; before this, that round was set aside as having
//! changed it.
//!
//! A hold of one side's locks (`HoldLocks`: every lock a call of B takes
//! waits while a call of A runs) does not keep the calls apart, only B's
//! critical sections out of A's calls. It makes impossible the candidates
//! that say a call of B (or of a function only ever called inside B)
//! took a lock inside a call of A, or of a function only ever called
//! inside A: an interleaving of critical sections, a section taken before
//! another call's first. stringbuffer-jdk1.4 of the corpus beside a CPU
//! hog: the round holding `erase`'s locks while main's
//! `append(StringBuffer*)` runs was set aside because "erase takes a lock
//! after getChars started and before it first takes it" was gone, though
//! `getChars` is only ever called inside `append(StringBuffer*)`; the
//! session then named the constructor's order as the root cause.

use crate::{
    model::{Call, CallSet, FuncId, Intervention, Point, Role, Run},
    predicates::{Kind, PredId},
    util::fxhash::{FxMap, FxSet},
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

/// Each part of an intervention that holds a call at its entry until
/// another has returned: (the held calls, the calls they wait for). The
/// held side starts only after the other has ended.
fn held_until_returned(iv: &Intervention) -> Vec<(CallSet, CallSet)> {
    iv.parts()
        .into_iter()
        .filter_map(|part| match part {
            Intervention::HoldUntil {
                site,
                point: Point::Entry,
                until,
                until_point: Point::Exit,
            } => Some((CallSet::site(*site), CallSet::site(*until))),
            _ => None,
        })
        .collect()
}

/// Kinds that say one call (the site its intervention holds) came before
/// another (the one it waits for): ended before the other started,
/// started first, ended first, or took its first critical section first.
fn ordered(kind: Kind) -> bool {
    matches!(kind, Kind::Order | Kind::StartsBefore | Kind::EndsFirst | Kind::SectionOrder)
}

/// Each part of an intervention that holds one side's locks while the
/// other side runs: (the calls whose locks wait, the calls they wait for).
fn locks_kept_out(iv: &Intervention) -> Vec<(CallSet, CallSet)> {
    iv.parts()
        .into_iter()
        .filter_map(|part| match part {
            Intervention::HoldLocks { calls, while_running } => {
                Some((calls.clone(), while_running.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Kinds that hold only when a call of one side takes a lock while a call
/// of the other runs (the taker is `HoldLocks::calls` of the intervention
/// that negates them).
fn lock_taken_inside(kind: Kind) -> bool {
    matches!(kind, Kind::Interleaved | Kind::BeforeFirstSection)
}

/// The two sides a co-occurrence candidate says ran at the same time, read
/// from the intervention that negates it (object restrictions do not
/// matter here: the candidate's calls are among them either way).
fn candidate_sides(iv: &Intervention) -> Option<(CallSet, CallSet)> {
    match iv {
        Intervention::HoldLocks { calls, while_running } => {
            Some((calls.clone(), while_running.clone()))
        }
        other => sides(other),
    }
}

/// The two sides an intervention keeps apart whole ([`kept_apart`]).
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

/// How the traced calls of the learning runs nest, thread by thread.
#[derive(Clone, Debug, Default)]
pub(super) struct Nesting {
    /// Per thread, the function whose first call encloses every other
    /// traced call of that thread, in every run that has the thread (its
    /// start routine, when traced).
    bodies: FxMap<Role, FuncId>,
    /// (thread, inner, outer): every call of `inner` on that thread ran
    /// inside a call of `outer` on it, in every run (a function only ever
    /// called from another, directly or not).
    inside: FxSet<(Role, FuncId, FuncId)>,
}

impl Nesting {
    /// Whether, on thread `role`, every call of one of `f` and `g` ran
    /// inside a call of the other in every run, or one of them is the
    /// thread's body.
    pub(super) fn nested(&self, role: Role, f: FuncId, g: FuncId) -> bool {
        self.inside.contains(&(role, f, g))
            || self.inside.contains(&(role, g, f))
            || self.bodies.get(&role).is_some_and(|&b| b == f || b == g)
    }

    /// Reads it from `runs`. aid's own probes (`internal`: the C library's
    /// lock calls, statement points), which record entries only, are not
    /// calls here.
    pub(super) fn of(runs: &[Run], internal: &dyn Fn(FuncId) -> bool) -> Nesting {
        Nesting { bodies: bodies(runs, internal), inside: inside(runs, internal) }
    }
}

fn end(c: &Call) -> u64 {
    c.exit_ns.unwrap_or(u64::MAX)
}

/// [`Nesting::bodies`].
fn bodies(runs: &[Run], internal: &dyn Fn(FuncId) -> bool) -> FxMap<Role, FuncId> {
    let mut out: FxMap<Role, Option<FuncId>> = FxMap::default();
    for run in runs {
        let mut first: FxMap<Role, &Call> = FxMap::default();
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

/// [`Nesting::inside`]: per thread, the calls in entry order against a
/// stack of the calls still open; each (thread, function) keeps the
/// functions that enclosed every one of its calls so far.
fn inside(runs: &[Run], internal: &dyn Fn(FuncId) -> bool) -> FxSet<(Role, FuncId, FuncId)> {
    let mut outers: FxMap<(Role, FuncId), Vec<FuncId>> = FxMap::default();
    let mut around: Vec<FuncId> = Vec::new();
    for run in runs {
        // Each thread's calls in entry order, an enclosing call before the
        // calls it encloses when both start at once. The run lists calls
        // in entry order, so each thread's list is nearly sorted already.
        let mut threads: FxMap<Role, Vec<&Call>> = FxMap::default();
        for c in run.calls.iter().filter(|c| !internal(c.func)) {
            threads.entry(c.role).or_default().push(c);
        }
        for (_, mut calls) in threads {
            calls.sort_by_key(|c| (c.entry_ns, std::cmp::Reverse(end(c))));
            let mut open: Vec<&Call> = Vec::new();
            for c in calls {
                open.retain(|o| o.entry_ns <= c.entry_ns && end(c) <= end(o));
                around.clear();
                around.extend(open.iter().map(|o| o.func));
                around.sort_unstable();
                around.dedup();
                match outers.get_mut(&(c.role, c.func)) {
                    Some(seen) => seen.retain(|f| around.binary_search(f).is_ok()),
                    None => {
                        outers.insert((c.role, c.func), around.clone());
                    }
                }
                open.push(c);
            }
        }
    }
    outers
        .into_iter()
        .flat_map(|((role, inner), fs)| fs.into_iter().map(move |outer| (role, inner, outer)))
        .collect()
}

/// Whether every call of `inner` is a call of `outer` or made inside one
/// of them: the same function on the same threads (the same call, or
/// `outer` names every call), on threads whose body `outer` names, or a
/// function only ever called inside `outer`'s function when `outer`
/// names every call of it.
fn covered(inner: &CallSet, outer: &CallSet, nesting: &Nesting) -> bool {
    let threads = inner.roles.iter().all(|r| outer.roles.contains(r));
    let same = inner.func == outer.func
        && (outer.instance == 0 || outer.instance == inner.instance)
        && (outer.within.is_none() || outer.within == inner.within);
    let body = outer.instance <= 1
        && outer.within.is_none()
        && inner.roles.iter().all(|r| nesting.bodies.get(r) == Some(&outer.func));
    let called_inside = outer.instance == 0
        && outer.within.is_none()
        && inner.roles.iter().all(|&r| nesting.inside.contains(&(r, inner.func, outer.func)));
    threads && (same || body || called_inside)
}

/// A candidate as this reads it: its id, kind and intervention.
pub(super) type Candidate<'a> = (PredId, Kind, Option<&'a Intervention>);

/// Pairs (p, q) of candidates where p's intervention makes q impossible.
pub(super) fn implied(candidates: &[Candidate<'_>], nesting: &Nesting) -> Vec<(PredId, PredId)> {
    // Per candidate with an intervention: the sides it keeps apart whole,
    // and those whose locks it keeps out of the other's calls.
    type Sides = Vec<(CallSet, CallSet)>;
    let apart: Vec<(PredId, Sides, Sides)> = candidates
        .iter()
        .filter_map(|&(p, _, iv)| Some((p, kept_apart(iv?), locks_kept_out(iv?))))
        .filter(|(_, a, l)| !a.is_empty() || !l.is_empty())
        .collect();
    let cover = |inner: &CallSet, outer: &CallSet| covered(inner, outer, nesting);
    let mut out = Vec::new();
    // An order "A before B" is impossible while A is held at its entry
    // until B has returned (q's own intervention holds A until B).
    let held: Vec<(PredId, Sides)> = candidates
        .iter()
        .filter_map(|&(p, _, iv)| Some((p, held_until_returned(iv?))))
        .filter(|(_, h)| !h.is_empty())
        .collect();
    for &(q, kind, iv) in candidates {
        let Some(Intervention::HoldUntil { site, until, .. }) = iv.filter(|_| ordered(kind)) else {
            continue;
        };
        let (first, second) = (CallSet::site(*site), CallSet::site(*until));
        for (p, pairs) in &held {
            let negates = pairs.iter().any(|(x, y)| cover(&first, x) && cover(&second, y));
            if *p != q && negates {
                out.push((*p, q));
            }
        }
    }
    for &(q, kind, iv) in candidates {
        if !co_occurrence(kind) {
            continue;
        }
        let Some((qa, qb)) = iv.and_then(candidate_sides) else { continue };
        // The taker and the window, when q says a lock was taken inside a
        // call.
        let taken = match iv {
            Some(Intervention::HoldLocks { calls, while_running }) if lock_taken_inside(kind) => {
                Some((calls, while_running))
            }
            _ => None,
        };
        for (p, pairs, locks) in &apart {
            let negates = pairs
                .iter()
                .any(|(a, b)| (cover(&qa, a) && cover(&qb, b)) || (cover(&qa, b) && cover(&qb, a)))
                || taken.is_some_and(|(taker, window)| {
                    locks.iter().any(|(held, during)| cover(taker, held) && cover(window, during))
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
        let nesting = Nesting::of(&runs, &|f| f == 9);
        assert_eq!((nesting.bodies.get(&1), nesting.bodies.get(&2)), (Some(&T1), Some(&T2)));
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
        let mut got = implied(&candidates, &nesting);
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

    /// stringbuffer-jdk1.4's shape: main's append(StringBuffer*) (role 0)
    /// calls length() and then getChars(); thread_main (role 1) calls
    /// erase(). Holding erase's locks while append(StringBuffer*) runs
    /// makes impossible "erase takes a lock between append's two
    /// sections" and "erase takes a lock after getChars started and
    /// before its first section" (getChars is only called inside append);
    /// holding them while getChars runs does not make the first
    /// impossible (erase may take its lock between length() and
    /// getChars()), nor does a hold of another function's locks.
    #[test]
    fn holding_one_sides_locks_makes_its_sections_inside_the_other_impossible() {
        const APPEND: FuncId = 0;
        const LENGTH: FuncId = 1;
        const GET_CHARS: FuncId = 2;
        const ERASE: FuncId = 3;
        const APPEND_CHARS: FuncId = 4;
        let calls = vec![
            call(APPEND, 0, 1, 10, Some(100), Some(0)),
            call(LENGTH, 0, 1, 20, Some(30), Some(3)),
            call(GET_CHARS, 0, 1, 50, Some(90), Some(0)),
            call(ERASE, 1, 1, 40, Some(60), Some(0)),
            call(APPEND_CHARS, 1, 1, 70, Some(80), Some(0)),
        ];
        let runs = vec![run(1, Label::Fail, calls, 200)];
        let nesting = Nesting::of(&runs, &|_| false);
        assert!(nesting.inside.contains(&(0, GET_CHARS, APPEND)));
        assert!(!nesting.inside.contains(&(0, APPEND, GET_CHARS)));
        let hold = |calls: FuncId, role: Role, during: FuncId| Intervention::HoldLocks {
            calls: every(calls, role),
            while_running: every(during, 0),
        };
        let during_append = hold(ERASE, 1, APPEND);
        let during_get_chars = hold(ERASE, 1, GET_CHARS);
        let other_taker = hold(APPEND_CHARS, 1, APPEND);
        let candidates: Vec<Candidate<'_>> = vec![
            (PredId(32), Kind::Interleaved, Some(&during_append)),
            (PredId(33), Kind::BeforeFirstSection, Some(&during_get_chars)),
            (PredId(34), Kind::Interleaved, Some(&other_taker)),
        ];
        assert_eq!(implied(&candidates, &nesting), vec![(PredId(32), PredId(33))]);
    }

    /// The token ring: holding t2 and t3 until t1 has returned makes
    /// impossible "t2's first section came before t1's" and "t3 ends
    /// before t1 starts" (each negated by holding its first call until
    /// the second); not "t1's first section came before t4's", nor an
    /// order of t1 before t2.
    #[test]
    fn holding_a_call_until_another_returned_makes_its_orders_before_it_impossible() {
        const T1: FuncId = 0;
        const T2: FuncId = 1;
        const T3: FuncId = 2;
        const T4: FuncId = 3;
        let runs = vec![run(1, Label::Fail, Vec::new(), 100)];
        let nesting = Nesting::of(&runs, &|_| false);
        let first = |x: FuncId, y: FuncId| Intervention::HoldUntil {
            site: site(x, x + 1),
            point: Point::Entry,
            until: site(y, y + 1),
            until_point: Point::Exit,
        };
        let not_first = Intervention::All { each: vec![first(T2, T1), first(T3, T1)] };
        let (t2_first, t3_ends_first) = (first(T2, T1), first(T3, T1));
        let (t1_before_t4, t1_before_t2) = (first(T1, T4), first(T1, T2));
        let candidates: Vec<Candidate<'_>> = vec![
            (PredId(14), Kind::AfterAll, Some(&not_first)),
            (PredId(11), Kind::SectionOrder, Some(&t2_first)),
            (PredId(7), Kind::Order, Some(&t3_ends_first)),
            (PredId(9), Kind::SectionOrder, Some(&t1_before_t4)),
            (PredId(3), Kind::StartsBefore, Some(&t1_before_t2)),
        ];
        let mut got = implied(&candidates, &nesting);
        got.sort_unstable();
        let p = PredId;
        assert_eq!(got, vec![(p(14), p(7)), (p(14), p(11))]);
    }
}
