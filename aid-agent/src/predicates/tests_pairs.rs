//! Extraction on hand-built runs, pairwise kinds of two calls on two
//! threads: orders (flipped, held at the exit, the entry or until a
//! return, joined into `after_all`), start orders, end orders, calls at
//! the same time, and overlaps on the same pointer (helpers: `tests.rs`;
//! group kinds: `tests_groups.rs`).

use super::{
    tests::{US, func, keys, learn_default, site, with_args},
    *,
};
use crate::model::{
    Label, Point, ValueKind,
    testing::{call, run, thread},
};

/// The only difference between the runs is which of two calls on
/// different threads runs first.
#[test]
fn order_flipped_between_two_threads() {
    let functions =
        vec![func(0, "init", ValueKind::Void, &[]), func(1, "use_config", ValueKind::Void, &[])];
    let pass = |id| {
        run(
            id,
            Label::Pass,
            vec![call(0, 0, 1, 0, Some(10), None), call(1, 1, 1, 20, Some(30), None)],
            100,
        )
    };
    let fail = run(
        2,
        Label::Fail,
        vec![call(1, 1, 1, 0, Some(10), None), call(0, 0, 1, 20, Some(30), None)],
        100,
    );
    let s = Session { functions, runs: vec![pass(0), pass(1), fail] };
    let c = learn_default(&s);
    let order = PredKey::pair(Kind::Order, site(1, 1, 1), site(0, 0, 1));
    // It also started first: the same flip, placed at its start.
    let starts = PredKey::pair(Kind::StartsBefore, site(1, 1, 1), site(0, 0, 1));
    assert_eq!(keys(&c), vec![PredKey::failure(), order, starts]);
    assert_eq!(c.predicates[2].anchor, Anchor::Entry);
    assert_eq!(c.evaluate(&s.runs[2]).anchor(PredId(2)), Some(0));
    let p = &c.predicates[1];
    assert_eq!(p.condition, Condition::EndsBefore);
    // Placed when use_config ends (docs/predicates.md: anchors and
    // intervention points); held at its entry, where the order went wrong.
    assert_eq!(p.anchor, Anchor::FirstExit);
    // Passing runs ran init to completion first: make use_config wait.
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: site(1, 1, 1),
            point: Point::Entry,
            until: site(0, 0, 1),
            until_point: Point::Exit
        })
    );
    assert_eq!(
        p.description,
        "call 1 of use_config on worker ends before call 1 of init on main starts, which no passing run shows"
    );
    // Settled when use_config ends (10), before init starts (20).
    assert_eq!(c.evaluate(&s.runs[2]).anchor(PredId(1)), Some(10));
    assert!(!c.evaluate(&s.runs[0]).holds(PredId(1)));
    assert!(c.evaluate(&s.runs[0]).observed(PredId(1)));
    assert!(!c.evaluate(&s.runs[0]).undecided(PredId(1)), "false, not undecided");
    // A run that ended after use_config returned and before init started
    // leaves the order undecided (unobserved, as learning sees it); one
    // that ended inside use_config, or without it, does not.
    let ended = |calls| run(3, Label::Pass, calls, 100);
    let before_init = ended(vec![call(1, 1, 1, 0, Some(10), None)]);
    let inside = ended(vec![call(1, 1, 1, 0, None, None)]);
    let neither = ended(vec![call(0, 0, 1, 0, Some(10), None)]);
    let t = c.evaluate(&before_init);
    assert!(t.undecided(PredId(1)) && !t.holds(PredId(1)) && !t.observed(PredId(1)));
    assert!(t.undecided(PredId(2)), "use_config started, init did not");
    assert!(!c.evaluate(&inside).undecided(PredId(1)));
    assert!(c.evaluate(&inside).undecided(PredId(2)));
    assert!(!c.evaluate(&neither).undecided(PredId(1)));
}

/// A checker that fails only once both updaters have run: each order
/// alone ("deposit ends before check starts") some passing run shows, the
/// two together none.
#[test]
fn after_all_joins_orders_that_only_together_separate_the_runs() {
    let functions = vec![
        func(0, "deposit", ValueKind::Void, &[]),
        func(1, "withdraw", ValueKind::Void, &[]),
        func(2, "check", ValueKind::Void, &[]),
    ];
    let at = |id, label, d: u64, w: u64, c: u64| {
        let mut r = run(
            id,
            label,
            vec![
                call(0, 1, 1, d, Some(d + 10), None),
                call(1, 2, 1, w, Some(w + 10), None),
                call(2, 3, 1, c, Some(c + 10), None),
            ],
            100,
        );
        r.threads = vec![
            thread(0, "main"),
            thread(1, "depositor"),
            thread(2, "withdrawer"),
            thread(3, "checker"),
        ];
        r
    };
    let s = Session {
        functions,
        runs: vec![
            at(0, Label::Pass, 20, 40, 0),
            at(1, Label::Pass, 0, 40, 20),
            at(2, Label::Pass, 40, 0, 20),
            at(3, Label::Fail, 0, 20, 40),
            at(4, Label::Fail, 20, 0, 40),
        ],
    };
    let c = learn_default(&s);
    let after = PredKey { arg: 2, ..PredKey::pair(Kind::AfterAll, site(2, 3, 1), site(0, 1, 1)) };
    assert_eq!(keys(&c), vec![PredKey::failure(), after]);
    let p = &c.predicates[1];
    let part =
        |a| PairMember { a, b: site(2, 3, 1), at_entry: false, reversed: true, sections: false };
    assert_eq!(
        p.condition,
        Condition::AfterAll {
            pairs: vec![part(site(0, 1, 1)), part(site(1, 2, 1))],
            any: Vec::new()
        }
    );
    assert_eq!(
        p.description,
        "call 1 of check on checker starts only after call 1 of deposit on depositor and call 1 of withdraw on withdrawer have all ended, which no passing run shows (each of them alone ending first, some do)"
    );
    // A passing run ran check before deposit: deposit waits for it.
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: site(0, 1, 1),
            point: Point::Entry,
            until: site(2, 3, 1),
            until_point: Point::Exit
        })
    );
    assert_eq!(p.anchor, Anchor::FirstExit);
    // Settled when the last of the two ended: withdraw at 30 (deposit at 10).
    assert_eq!(c.evaluate(&s.runs[3]).anchor(PredId(1)), Some(30));
    for r in 0..3 {
        assert!(!c.evaluate(&s.runs[r]).holds(PredId(1)), "run {r}");
        assert!(c.evaluate(&s.runs[r]).observed(PredId(1)), "run {r}");
    }
    // With a passing run that shows both orders, nothing is learned.
    let mut both = s.clone();
    both.runs.push(at(5, Label::Pass, 0, 20, 40));
    assert_eq!(keys(&learn_default(&both)), vec![PredKey::failure()]);
}

#[test]
fn order_against_overlapping_passing_runs_holds_the_exit() {
    let functions = vec![func(0, "a", ValueKind::Void, &[]), func(1, "b", ValueKind::Void, &[])];
    // Passing: b starts while a runs. Failing: a ends before b starts.
    let pass = |id| {
        run(
            id,
            Label::Pass,
            vec![call(0, 0, 1, 0, Some(20), None), call(1, 1, 1, 10, Some(30), None)],
            100,
        )
    };
    let fail = run(
        2,
        Label::Fail,
        vec![call(0, 0, 1, 0, Some(20), None), call(1, 1, 1, 25, Some(45), None)],
        100,
    );
    let s = Session { functions, runs: vec![pass(0), pass(1), fail] };
    let c = learn_default(&s);
    let order = PredKey::pair(Kind::Order, site(0, 0, 1), site(1, 1, 1));
    assert_eq!(keys(&c), vec![PredKey::failure(), order]);
    // Settled when a ends (20) before b starts (25).
    assert_eq!(c.predicates[1].anchor, Anchor::FirstExit);
    assert_eq!(c.evaluate(&s.runs[2]).anchor(PredId(1)), Some(20));
    assert_eq!(
        c.predicates[1].intervention,
        Some(Intervention::HoldUntil {
            site: site(0, 0, 1),
            point: Point::Exit,
            until: site(1, 1, 1),
            until_point: Point::Entry
        })
    );
}

/// Passing runs had b run inside a (start after a's, return before a's);
/// the failing run has a end before b starts. Releasing a's return as b
/// merely starts would let what follows a run beside b's body, which no
/// passing run showed: a's return waits for b's return. Once one passing
/// run has b return after a did, the hold is the one above (until b has
/// started).
#[test]
fn order_against_passing_runs_where_b_returned_first_holds_until_its_return() {
    let functions = vec![func(0, "a", ValueKind::Void, &[]), func(1, "b", ValueKind::Void, &[])];
    let pass = |id, b_exit| {
        run(
            id,
            Label::Pass,
            vec![call(0, 0, 1, 0, Some(20), None), call(1, 1, 1, 10, Some(b_exit), None)],
            100,
        )
    };
    let fail = |id| {
        run(
            id,
            Label::Fail,
            vec![call(0, 0, 1, 0, Some(20), None), call(1, 1, 1, 25, Some(45), None)],
            100,
        )
    };
    let order = PredKey::pair(Kind::Order, site(0, 0, 1), site(1, 1, 1));
    let hold = |until_point| {
        Some(Intervention::HoldUntil {
            site: site(0, 0, 1),
            point: Point::Exit,
            until: site(1, 1, 1),
            until_point,
        })
    };
    let s = Session { functions, runs: vec![pass(0, 15), pass(1, 18), fail(2)] };
    let c = learn_default(&s);
    assert_eq!(keys(&c), vec![PredKey::failure(), order]);
    assert_eq!(c.predicates[1].anchor, Anchor::FirstExit);
    assert_eq!(c.predicates[1].intervention, hold(Point::Exit));
    let s = Session { runs: vec![pass(0, 15), pass(1, 30), fail(2)], ..s };
    let c = learn_default(&s);
    assert_eq!(keys(&c), vec![PredKey::failure(), order]);
    assert_eq!(c.predicates[1].intervention, hold(Point::Entry));
}

/// A read before the write it needs (rare.c under load): most passing runs
/// ran the write (b) to completion before the read (a) started; one had
/// the read's thread enter first and do its work after b, as a thread
/// preempted right after its entry does. Only "a ends before b starts"
/// separates the runs, and its hold is at a's entry, until b returned:
/// held at a's return it would come after the read.
#[test]
fn order_once_reversed_in_a_passing_run_holds_the_entry() {
    let functions = vec![func(0, "a", ValueKind::Void, &[]), func(1, "b", ValueKind::Void, &[])];
    let r = |id, label, a: (u64, u64), b: (u64, u64)| {
        run(
            id,
            label,
            vec![call(0, 0, 1, a.0, Some(a.1), None), call(1, 1, 1, b.0, Some(b.1), None)],
            100,
        )
    };
    let runs = vec![
        r(0, Label::Pass, (20, 30), (0, 10)),
        r(1, Label::Pass, (0, 30), (5, 15)),
        r(2, Label::Fail, (0, 10), (20, 30)),
    ];
    let s = Session { functions, runs };
    let c = learn_default(&s);
    let order = PredKey::pair(Kind::Order, site(0, 0, 1), site(1, 1, 1));
    assert_eq!(keys(&c), vec![PredKey::failure(), order]);
    assert_eq!(c.predicates[1].anchor, Anchor::FirstExit);
    assert_eq!(
        c.predicates[1].intervention,
        Some(Intervention::HoldUntil {
            site: site(0, 0, 1),
            point: Point::Entry,
            until: site(1, 1, 1),
            until_point: Point::Exit
        })
    );
}

/// The only difference between the runs is that two calls that overlap in
/// every run receive the same object in the failing one.
#[test]
fn overlap_on_the_same_pointer() {
    let functions = vec![
        func(0, "push", ValueKind::Void, &[ValueKind::Pointer]),
        func(1, "pop", ValueKind::Void, &[ValueKind::Pointer, ValueKind::Signed]),
    ];
    let r = |id, label, a: i64, b: i64| {
        run(
            id,
            label,
            vec![
                with_args(call(0, 1, 1, 0, Some(10), None), [a, 0, 0]),
                with_args(call(1, 2, 1, 5, Some(15), None), [b, 0x7000, 0]),
            ],
            100,
        )
        .with_threads(vec![
            thread(0, "main"),
            thread(1, "producer"),
            thread(2, "consumer"),
        ])
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, 0x7000, 0x9000),
            r(1, Label::Pass, 0x7000, 0x8000),
            r(2, Label::Fail, 0x7000, 0x7000),
        ],
    };
    let c = learn_default(&s);
    // In passing runs pop's *second* argument also equals push's object —
    // but DWARF types it as a signed integer, not a pointer, so it does not
    // count.
    let overlap = PredKey::pair(Kind::Overlap, site(0, 1, 1), site(1, 2, 1));
    assert_eq!(keys(&c), vec![PredKey::failure(), overlap]);
    let p = &c.predicates[1];
    assert_eq!(
        p.intervention,
        Some(Intervention::Serialize { a: site(0, 1, 1), b: site(1, 2, 1) })
    );
    assert_eq!(p.anchor, Anchor::LaterEntry);
    assert_eq!(c.evaluate(&s.runs[2]).anchor(PredId(1)), Some(5));
    assert!(!c.evaluate(&s.runs[0]).holds(PredId(1)));
}

/// "A starts before B starts" and "B starts while A runs" for two calls on
/// different threads that share no object: passing runs always started B
/// first and finished it before A started.
#[test]
fn starts_before_and_concurrent() {
    let functions = vec![
        func(0, "login", ValueKind::Signed, &[]),
        func(1, "heartbeat", ValueKind::Signed, &[]),
    ];
    let r = |id, label, login: (u64, u64), hb: (u64, u64)| {
        run(
            id,
            label,
            vec![
                call(0, 0, 1, login.0 * US, Some(login.1 * US), Some(1)),
                call(1, 1, 1, hb.0 * US, Some(hb.1 * US), Some(1)),
            ],
            100 * US,
        )
        .with_threads(vec![thread(0, "main"), thread(1, "beat")])
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, (0, 20), (30, 40)),
            r(1, Label::Pass, (0, 25), (30, 40)),
            // The heartbeat starts while login runs.
            r(2, Label::Fail, (10, 40), (5, 20)),
        ],
    };
    let c = learn_default(&s);
    let hb = site(1, 1, 1);
    let login = site(0, 0, 1);
    assert_eq!(
        keys(&c),
        vec![
            PredKey::failure(),
            PredKey::pair(Kind::StartsBefore, hb, login),
            PredKey::pair(Kind::Concurrent, hb, login),
            // And it returned while login ran.
            PredKey::pair(Kind::EndsFirst, hb, login),
        ]
    );
    let starts = &c.predicates[1];
    assert_eq!((starts.condition.clone(), starts.anchor), (Condition::EntersBefore, Anchor::Entry));
    // Passing runs ran login to completion before the heartbeat started.
    assert_eq!(
        starts.intervention,
        Some(Intervention::HoldUntil {
            site: hb,
            point: Point::Entry,
            until: login,
            until_point: Point::Exit
        })
    );
    assert_eq!(
        starts.description,
        "call 1 of heartbeat on beat starts before call 1 of login on main starts, which no passing run shows"
    );
    let during = &c.predicates[2];
    assert_eq!(
        (during.condition.clone(), during.anchor),
        (Condition::Intersect, Anchor::LaterEntry)
    );
    assert_eq!(
        during.description,
        "call 1 of login on main starts while call 1 of heartbeat on beat runs, which no passing run shows"
    );
    let ends = &c.predicates[3];
    assert_eq!((ends.condition.clone(), ends.anchor), (Condition::ExitsBefore, Anchor::FirstExit));
    // The heartbeat's return waits for login's.
    assert_eq!(
        ends.intervention,
        Some(Intervention::HoldUntil {
            site: hb,
            point: Point::Exit,
            until: login,
            until_point: Point::Exit
        })
    );
    assert_eq!(
        ends.description,
        "call 1 of heartbeat on beat ends while call 1 of login on main runs, which no passing run shows"
    );
    // Anchors: the heartbeat's entry (5 µs), login's entry (10 µs), the
    // heartbeat's exit (20 µs).
    let t = c.evaluate(&s.runs[2]);
    assert_eq!(
        (t.anchor(PredId(1)), t.anchor(PredId(2)), t.anchor(PredId(3))),
        (Some(5 * US), Some(10 * US), Some(20 * US))
    );
    assert!(!c.evaluate(&s.runs[0]).holds(PredId(1)));
    assert!(!c.evaluate(&s.runs[0]).holds(PredId(3)));
}

/// SPLASH-2's LU in miniature: main and a worker it never joins each run
/// `solve`; main checks, right after its own, that the worker's has
/// returned. Failing runs have main's `solve` return first (the worker's
/// still running, or cut off by the failing check); passing runs the
/// worker's, or returned less than `EXIT_TIE_NS` (2 µs) before it (the
/// worker counted itself done while main's return probe ran). No call
/// starts after another ended, and both start in either order: only the
/// order of the two returns separates the runs.
#[test]
fn a_call_that_returns_while_another_threads_call_runs_is_ends_first() {
    let functions = vec![func(0, "solve", ValueKind::Void, &[])];
    let r = |id, label, main: (u64, Option<u64>), worker: (u64, Option<u64>), end: u64| {
        run(
            id,
            label,
            vec![
                call(0, 0, 1, main.0 * US, main.1.map(|x| x * US), None),
                call(0, 1, 1, worker.0 * US, worker.1.map(|x| x * US), None),
            ],
            end * US,
        )
        .with_threads(vec![thread(0, "main"), thread(1, "worker")])
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, (0, Some(50)), (5, Some(48)), 60),
            r(1, Label::Pass, (6, Some(52)), (1, Some(49)), 60),
            r(2, Label::Fail, (0, Some(45)), (5, Some(48)), 60),
            // The check killed the process inside the worker's call.
            r(3, Label::Fail, (4, Some(40)), (2, None), 45),
            r(4, Label::Pass, (0, Some(50)), (5, Some(51)), 60),
        ],
    };
    let c = learn_default(&s);
    let (main, worker) = (site(0, 0, 1), site(0, 1, 1));
    let ends = PredKey::pair(Kind::EndsFirst, main, worker);
    assert_eq!(keys(&c), vec![PredKey::failure(), ends]);
    let p = &c.predicates[1];
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: main,
            point: Point::Exit,
            until: worker,
            until_point: Point::Exit
        })
    );
    assert_eq!(
        p.description,
        "call 1 of solve on main ends while call 1 of solve on worker runs, which no passing run shows"
    );
    for (run, at) in [(2, Some(45 * US)), (3, Some(40 * US)), (0, None), (1, None), (4, None)] {
        assert_eq!(c.evaluate(&s.runs[run]).anchor(PredId(1)), at, "run {run}");
    }
    // More than two microseconds apart, the returns are ordered.
    let apart = r(5, Label::Pass, (0, Some(50)), (5, Some(53)), 60);
    assert_eq!(c.evaluate(&apart).anchor(PredId(1)), Some(50 * US));
    // A worker's call begun only after main's returned is an order, not
    // this.
    let after = r(6, Label::Pass, (0, Some(50)), (51, Some(60)), 70);
    assert_eq!(c.evaluate(&after).anchor(PredId(1)), None);
}
