//! Statement windows (`statements.rs`) on hand-built runs: a read
//! between two stores of a call, of any thread of a pool, and of any call
//! of one thread; long windows among many short ones; a write on either
//! side of the statement between a read and its check.

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
    vec![
        function(0, "set_pair"),
        function(1, "check_pair"),
        point(2, "set_pair", 8, 10),
        point(3, "set_pair", 0x12, 11),
        point(4, "check_pair", 8, 16),
        point(5, "check_pair", 0x10, 17),
    ]
}

fn point(id: u32, parent: &str, off: u32, line: u32) -> Function {
    let mut f =
        function(id, &format!("{parent} at t.c:{line}")).with_symbol(&format!("{parent}+{off:#x}"));
    f.internal = true;
    f.probe = Probe::Statement;
    f
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

/// Four failing runs (set_pair held past line 10 while check_pair
/// reads) and four passing ones, each through `wrap`, learned with
/// `functions`; with the predicate "check_pair between line 16 while
/// set_pair between line 10", and the two calls.
fn torn_pair(
    functions: Vec<Function>,
    wrap: impl Fn(Run) -> Run,
) -> (Session, crate::predicates::Catalog, crate::predicates::PredId, Site, Site) {
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(wrap(pair_run(i, Label::Fail, 50, 20 + u64::from(i))));
        runs.push(wrap(pair_run(10 + i, Label::Pass, 14, 70)));
    }
    let s = Session { functions, runs };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let a = Site { func: 0, role: 1, instance: 1 };
    let b = Site { func: 1, role: 2, instance: 1 };
    let key = PredKey { callee: Some(2), arg: 0, ..PredKey::pair(Kind::BetweenStatements, a, b) };
    let p = c.predicates[c.find(&key).expect("learned").0 as usize].id;
    (s, c, p, a, b)
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
    let (s, c, p, a, b) = torn_pair(functions(), |r| r);
    let p = &c.predicates[p.0 as usize];
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
        "call 1 of check_pair on check_pair is between t.c:16 and its next statement while call 1 of set_pair on set_pair is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
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

/// `run` with 24 bystander threads, each running log_line (6) with a
/// short window at its line 40 (7), one every 250 ns from 13 µs: all
/// begun after set_pair's window from line 10 (12 µs) and before
/// check_pair's from line 16 (from 22 µs).
fn with_bystanders(mut run: Run) -> Run {
    for k in 0..24u32 {
        let role = 3 + k;
        let at = 13 * US + u64::from(k) * 250;
        run.calls.push(call(6, role, 1, at, Some(at + 200), None));
        run.calls.push(call(7, role, 1, at + 100, None, None));
        run.threads.push(thread(role, "log_line"));
    }
    run.calls.sort_by_key(|c| c.entry_ns);
    run
}

/// Bystanders that open and close many short windows while set_pair
/// is held past line 10 do not hide that check_pair read then: a
/// thread's window that still holds is its latest, however many
/// others began since.
#[test]
fn a_long_window_is_seen_past_many_short_ones_of_other_threads() {
    let mut fns = functions();
    fns.extend([function(6, "log_line"), point(7, "log_line", 8, 40)]);
    let (s, c, p, ..) = torn_pair(fns, with_bystanders);
    for r in &s.runs {
        assert_eq!(c.evaluate(r).holds(p), r.failed(), "run {}", r.id);
    }
    assert_eq!(c.evaluate(&s.runs[0]).anchor(p), Some(22 * US));
}

/// read_check on thread 1 from 10 µs to its return at 40 µs: past
/// line 19 (`x = v`) at 12 µs, line 20 (`v++`) at 20 µs, line 21
/// (`v != x + 1`) at 30 µs; bump on thread 2 from `bump` µs for 4 µs,
/// past its line 32 (`v++`) 1 µs in.
fn read_check_run(id: u32, label: Label, bump: u64) -> Run {
    let mut calls = vec![
        call(0, 1, 1, 10 * US, Some(40 * US), None),
        call(2, 1, 1, 12 * US, None, None),
        call(3, 1, 1, 20 * US, None, None),
        call(4, 1, 1, 30 * US, None, None),
        call(1, 2, 1, bump * US, Some((bump + 4) * US), None),
        call(5, 2, 1, (bump + 1) * US, None, None),
    ];
    calls.sort_by_key(|c| c.entry_ns);
    run(id, label, calls, 100 * US).with_threads(vec![
        thread(0, "main"),
        thread(1, "read_check"),
        thread(2, "bump"),
    ])
}

/// A write that lands between a read and its check fails the run on
/// either side of the statement between them: half the failing runs
/// have bump's window begin in read_check's window from line 20, half
/// in its window from line 21. Each narrow pair holds in half of
/// them; the wide window from line 20 (it and the next) in all, and
/// in no passing run (bump before read_check began or after it
/// returned).
#[test]
fn a_write_on_either_side_of_the_statement_between_a_read_and_its_check_is_one_predicate() {
    let fns = vec![
        function(0, "read_check"),
        function(1, "bump"),
        point(2, "read_check", 8, 19),
        point(3, "read_check", 0x10, 20),
        point(4, "read_check", 0x18, 21),
        point(5, "bump", 8, 32),
    ];
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(read_check_run(i, Label::Fail, if i % 2 == 0 { 22 } else { 32 }));
        runs.push(read_check_run(10 + i, Label::Pass, if i % 2 == 0 { 2 } else { 50 }));
    }
    let s = Session { functions: fns, runs };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let a = Site { func: 0, role: 1, instance: 1 };
    let b = Site { func: 1, role: 2, instance: 1 };
    let at = |point: u32, arg: u8| {
        let key =
            PredKey { callee: Some(point), arg, ..PredKey::pair(Kind::BetweenStatements, a, b) };
        &c.predicates[c.find(&key).expect("learned").0 as usize]
    };
    let wide = at(3, WIDE);
    assert_eq!(
        wide.description,
        "call 1 of bump on bump is between t.c:32 and its next statement while call 1 of read_check on read_check is between t.c:20 and the end of the statement after it (the two ran at the same time), which no passing run shows"
    );
    assert_eq!(
        wide.intervention,
        Some(Intervention::HoldUntil {
            site: b,
            point: Point::Entry,
            until: a,
            until_point: Point::Exit
        })
    );
    let (line20, line21) = (at(3, 0), at(4, 0));
    for r in &s.runs {
        let t = c.evaluate(r);
        assert_eq!(t.holds(wide.id), r.failed(), "run {}", r.id);
        let early = r.failed() && r.id % 2 == 0;
        assert_eq!(t.holds(line20.id), early, "run {}", r.id);
        assert_eq!(t.holds(line21.id), r.failed() && !early, "run {}", r.id);
    }
    // Placed where bump's window began.
    assert_eq!(c.evaluate(&s.runs[2]).anchor(wide.id), Some(33 * US));
    // Where one narrow pair holds in every failing run, the wide one
    // says nothing more and is not learned.
    let narrow: Vec<Run> = (0..4)
        .flat_map(|i| [read_check_run(i, Label::Fail, 22), read_check_run(10 + i, Label::Pass, 50)])
        .collect();
    let s = Session { functions: s.functions, runs: narrow };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let wide: Vec<u8> = c
        .predicates
        .iter()
        .filter(|p| p.key.kind == Kind::BetweenStatements && p.key.arg & WIDE != 0)
        .map(|p| p.key.arg)
        .collect();
    assert_eq!(wide, Vec::<u8>::new());
}

/// A run of a pool: set_pair on threads 1 and 3 (one class, two
/// threads), check_pair on thread 2, reading from 60 µs. In failing
/// runs the setter `torn` (1 or 3, whichever) is held past line 10
/// (after `a = 1`) while check_pair reads, and the other setter runs
/// after check_pair, or (`other_first`) before it, both stores done
/// by 20 µs; in passing runs both setters are done first.
fn pool_run(id: u32, label: Label, torn: Role, other_first: bool) -> Run {
    let other = if torn == 1 { 3 } else { 1 };
    let setter = |role: Role, from: u64, line11: u64, to: u64| {
        [
            call(0, role, 1, from * US, Some(to * US), None),
            call(2, role, 1, (from + 2) * US, None, None),
            call(3, role, 1, line11 * US, None, None),
        ]
    };
    let mut calls = vec![
        call(1, 2, 1, 60 * US, Some(72 * US), None),
        call(4, 2, 1, 62 * US, None, None),
        call(5, 2, 1, 70 * US, None, None),
    ];
    let first = if other_first || label == Label::Pass { 10 } else { 110 };
    calls.extend(setter(other, first, first + 4, first + 10));
    if label == Label::Fail {
        calls.extend(setter(torn, 40, 98, 100));
    } else {
        calls.extend(setter(torn, 30, 34, 40));
    }
    calls.sort_by_key(|c| c.entry_ns);
    run(id, label, calls, 200 * US).with_threads(vec![
        thread(0, "main"),
        thread(1, "set_pair"),
        thread(2, "check_pair"),
        thread(3, "set_pair"),
    ])
}

/// The pair torn by whichever setter of a pool check_pair read in
/// between is one predicate about some call of the pool: its failing
/// runs hold it whichever setter it was, and serialising the pool's
/// calls with check_pair's negates it.
#[test]
fn a_read_between_two_stores_of_any_thread_of_a_pool_is_one_predicate() {
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(pool_run(i, Label::Fail, if i % 2 == 0 { 1 } else { 3 }, false));
        runs.push(pool_run(10 + i, Label::Pass, if i % 2 == 0 { 1 } else { 3 }, false));
    }
    let s = Session { functions: functions(), runs };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let found: Vec<&crate::predicates::Predicate> =
        c.predicates.iter().filter(|p| p.key.kind == Kind::BetweenStatements).collect();
    // check_pair ran both its lines (16 and 17) inside the window: one
    // predicate each, about some setter's window and about the pool's
    // (no setter past line 11 yet).
    let args: Vec<u8> = found.iter().map(|p| p.key.arg).collect();
    assert_eq!(args, vec![0, 1, POOL, POOL | 1], "{found:#?}");
    let p = found[0];
    let class = c.classes.id("set_pair").expect("a class");
    let b = Site { func: 1, role: 2, instance: 1 };
    assert_eq!(p.key.calls, Calls::Group { class, within: None });
    assert_eq!(p.key.other_site(), Some(b));
    assert_eq!((p.key.callee, p.key.arg), (Some(2), 0));
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups {
            a: CallSet { func: 0, roles: vec![1, 3], instance: 0, within: None },
            b: CallSet::site(b),
            object: None,
        })
    );
    assert_eq!(
        p.description,
        "call 1 of check_pair on check_pair is between t.c:16 and its next statement while some call of set_pair on the set_pair threads is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
    );
    holds_in_the_failing_runs(&s, &c, p.id);
    // Placed where check_pair's window began.
    assert_eq!(c.evaluate(&s.runs[0]).anchor(p.id), Some(62 * US));
    let pool = found[2];
    assert_eq!(pool.intervention, p.intervention);
    assert_eq!(
        pool.description,
        "call 1 of check_pair on check_pair is between t.c:16 and its next statement while calls of set_pair on the set_pair threads have reached t.c:10 and none has gone past its next statement (the two ran at the same time), which no passing run shows"
    );
    // One setter past both stores while the other is between them:
    // the pair is whole (the first's `b` is stored), some setter's
    // window holds, the pool's does not.
    let whole = pool_run(20, Label::Fail, 1, true);
    let t = c.evaluate(&whole);
    assert!(t.holds(p.id), "some setter's window");
    assert!(t.observed(pool.id) && !t.holds(pool.id), "the pool's window closed at 14 µs");
}

/// One owner thread calls set_pair twice (at 10 and 100 µs); the
/// checker reads between the stores of its first call in some failing
/// runs and of its second in others. Neither per-call pair holds in
/// every failing run; "some call of set_pair on set_pair" does, and
/// serialising the two functions' calls negates it. With the read
/// always in the first call, only the per-call pair is made.
#[test]
fn a_read_between_two_stores_of_any_call_of_one_thread_is_one_predicate() {
    let owner = |id: u32, label: Label, torn: u32, check: u64| {
        let setter = |instance: u32, from: u64, line11: u64| {
            [
                call(0, 1, instance, from * US, Some((line11 + 2) * US), None),
                call(2, 1, instance, (from + 2) * US, None, None),
                call(3, 1, instance, line11 * US, None, None),
            ]
        };
        let mut calls = vec![
            call(1, 2, 1, check * US, Some((check + 12) * US), None),
            call(4, 2, 1, (check + 2) * US, None, None),
            call(5, 2, 1, (check + 10) * US, None, None),
        ];
        calls.extend(setter(1, 10, if torn == 1 { 50 } else { 14 }));
        calls.extend(setter(2, 100, if torn == 2 { 150 } else { 104 }));
        calls.sort_by_key(|c| c.entry_ns);
        run(id, label, calls, 300 * US).with_threads(vec![
            thread(0, "main"),
            thread(1, "set_pair"),
            thread(2, "check_pair"),
        ])
    };
    let learned = |torn: &dyn Fn(u32) -> u32| {
        let mut runs = Vec::new();
        for i in 0..4 {
            let t = torn(i);
            runs.push(owner(i, Label::Fail, t, if t == 1 { 20 } else { 110 }));
            runs.push(owner(10 + i, Label::Pass, 0, 60));
        }
        let s = Session { functions: functions(), runs };
        let c = learn(&s, &ExtractConfig::default()).unwrap();
        (s, c)
    };
    let (s, c) = learned(&|i| 1 + i % 2);
    let class = |name| Calls::Group { class: c.classes.id(name).expect("a class"), within: None };
    let p = c
        .predicates
        .iter()
        .find(|p| {
            p.key.kind == Kind::BetweenStatements
                && p.key.calls == class("set_pair")
                && (p.key.callee, p.key.arg) == (Some(2), 0)
        })
        .expect("some call of set_pair");
    assert_eq!(p.key.other.map(|o| o.calls), Some(class("check_pair")));
    let every = |func, role| CallSet { func, roles: vec![role], instance: 0, within: None };
    let apart = Intervention::SerializeGroups { a: every(0, 1), b: every(1, 2), object: None };
    assert_eq!(p.intervention, Some(apart));
    assert_eq!(
        p.description,
        "some call of check_pair on check_pair is between t.c:16 and its next statement while some call of set_pair on set_pair is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
    );
    holds_in_the_failing_runs(&s, &c, p.id);
    // Each per-call pair holds in two of the four failing runs.
    let first = PredKey {
        callee: Some(2),
        arg: 0,
        ..PredKey::pair(
            Kind::BetweenStatements,
            Site { func: 0, role: 1, instance: 1 },
            Site { func: 1, role: 2, instance: 1 },
        )
    };
    let q = c.find(&first).expect("the first call's pair");
    assert_eq!(s.runs.iter().filter(|r| c.evaluate(r).holds(q)).count(), 2);
    // The read always in the first call: no group pair.
    let setters = class("set_pair");
    let (_, c) = learned(&|_| 1);
    assert!(c.find(&first).is_some());
    let group = |p: &&crate::predicates::Predicate| {
        p.key.kind == Kind::BetweenStatements && p.key.calls == setters
    };
    assert!(!c.predicates.iter().any(|p| group(&p)));
}

/// Predicate `p` of `c` holds in exactly the failing runs of `s`.
fn holds_in_the_failing_runs(
    s: &Session,
    c: &crate::predicates::Catalog,
    p: crate::predicates::PredId,
) {
    for r in &s.runs {
        assert_eq!(c.evaluate(r).holds(p), r.failed(), "run {}", r.id);
    }
}
