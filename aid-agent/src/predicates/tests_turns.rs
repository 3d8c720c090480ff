//! The lock-section predicates on hand-built runs of turns and hand-offs:
//! SCTBench's token ring (an order among the sections before a check), two
//! loops handing a lock to each other, a consumer that polled before the
//! producer's first hand-off, a turn taken twice while the other thread
//! waits, and a lock taken before a call's second lock told from its
//! first. Each asserts the exact key, condition, intervention and truth.

use super::{
    tests_groups::{US, fd, func, site},
    tests_sections::sync,
    *,
};
use crate::model::{
    Call, CallSet, Label, Point, ValueKind,
    testing::{call, run, thread},
};

/// SCTBench's token ring as runs: functions t1 … t4 (0 … 3) on roles
/// 1 … 4, each taking one lock once; per run, its label and the functions
/// in the order they took the lock, each holding it 2 µs, 10 µs apart (a
/// failing run ends inside t4's section). Times in µs.
fn token_ring(runs: &[(Label, &[u32])]) -> Session {
    let functions = vec![
        func(0, "t1", ValueKind::Void, &[]),
        func(1, "t2", ValueKind::Void, &[]),
        func(2, "t3", ValueKind::Void, &[]),
        func(3, "t4", ValueKind::Void, &[]),
        sync(4, "pthread_mutex_lock"),
        sync(5, "pthread_mutex_unlock"),
    ];
    const LOCK: i64 = 0x7000;
    let section = |f: u32, at: u64, open: bool| -> Vec<Call> {
        let role = f + 1;
        let exit = (!open).then_some((at + 3) * US);
        let mut v = vec![
            call(f, role, 1, (at - 1) * US, exit, None),
            call(4, role, 1, at * US, None, None).with_args([LOCK, 0, 0]),
        ];
        if !open {
            v.push(call(5, role, 1, (at + 2) * US, None, None).with_args([LOCK, 0, 0]));
        }
        v
    };
    let threads =
        vec![thread(0, "main"), thread(1, "t1"), thread(2, "t2"), thread(3, "t3"), thread(4, "t4")];
    let runs = runs
        .iter()
        .enumerate()
        .map(|(id, &(label, order))| {
            let calls = order
                .iter()
                .enumerate()
                .flat_map(|(k, &f)| section(f, 10 * (k as u64 + 1), label == Label::Fail && f == 3))
                .collect();
            run(id as u32, label, calls, 100 * US).with_threads(threads.clone())
        })
        .collect();
    Session { functions, runs }
}

/// SCTBench's token ring: t1, t2 and t3 each take the lock once; t4's
/// check fails only when its section comes after all three and t1's did
/// not come first. Passing runs show every order before t4 (t1 first),
/// t2 before t1 with t4 before t1, or with t3 never running: no
/// conjunction of orders before t4 separates the runs; with "t2's section
/// before t1's" it does, negated by holding t2 until t1 has returned. A
/// passing run without t4 (main returned first) says nothing. Times in µs.
#[test]
fn an_order_between_two_of_the_sections_before_a_check_completes_the_conjunction() {
    let s = token_ring(&[
        (Label::Fail, &[1, 0, 2, 3]),
        (Label::Fail, &[1, 2, 0, 3]),
        (Label::Pass, &[0, 1, 2, 3]),
        (Label::Pass, &[0, 2, 1, 3]),
        (Label::Pass, &[1, 2, 3, 0]),
        (Label::Pass, &[1, 0, 3]),
        (Label::Pass, &[1, 0, 2]),
    ]);
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let (t1, t2, t3, t4) = (site(0, 1, 1), site(1, 2, 1), site(2, 3, 1), site(3, 4, 1));
    let key = PredKey {
        arg: 3 | after_all::SECTIONS | after_all::INNER,
        ..PredKey::pair(Kind::AfterAll, t4, t1)
    };
    let p = c.predicates.iter().find(|p| p.key == key).expect("the completed conjunction");
    // Some passing run ran the second call to its end before the first
    // started (t4 before t1, t1 before t2).
    let part = |a, b, reversed| PairMember { a, b, at_entry: false, reversed, sections: true };
    assert_eq!(
        p.condition,
        Condition::AfterAll {
            pairs: vec![part(t1, t4, true), part(t3, t4, false), part(t2, t1, true)],
            any: Vec::new()
        }
    );
    assert_eq!(
        p.description,
        "call 1 of t4 on t4 takes a lock only after call 1 of t1 on t1 and call 1 of t3 on t3 have each held it and let it go, and call 1 of t2 on t2 held it before call 1 of t1 on t1 did (the order of their first critical sections on it), which no passing run shows (each of these orders alone, some do)"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: t2,
            point: Point::Entry,
            until: t1,
            until_point: Point::Exit
        })
    );
    for (run, holds) in [(0, true), (1, true), (2, false), (3, false), (4, false), (5, false)] {
        assert_eq!(c.evaluate(&s.runs[run]).holds(p.id), holds, "run {run}");
    }
    // Holding only t2 leaves t3 to go before t1. "t1 was not the first of
    // them" completes it too, negated by holding t2 and t3 until t1 has
    // returned.
    let key = PredKey {
        arg: 4 | after_all::SECTIONS | after_all::LATE,
        ..PredKey::pair(Kind::AfterAll, t4, t1)
    };
    let p = c.predicates.iter().find(|p| p.key == key).expect("t1 not first");
    assert_eq!(
        p.condition,
        Condition::AfterAll {
            pairs: vec![part(t1, t4, true), part(t3, t4, false)],
            any: vec![part(t2, t1, false), part(t3, t1, false)]
        }
    );
    assert_eq!(
        p.description,
        "call 1 of t4 on t4 takes a lock only after call 1 of t1 on t1 and call 1 of t3 on t3 have each held it and let it go, and call 1 of t1 on t1 was not the first to hold it: call 1 of t2 on t2 or call 1 of t3 on t3 did before it (their first critical sections on it), which no passing run shows (each of these orders alone, some do)"
    );
    let first = |site| Intervention::HoldUntil {
        site,
        point: Point::Entry,
        until: t1,
        until_point: Point::Exit,
    };
    assert_eq!(p.intervention, Some(Intervention::All { each: vec![first(t2), first(t3)] }));
    for (run, holds) in [(0, true), (1, true), (2, false), (3, false), (4, false), (5, false)] {
        assert_eq!(c.evaluate(&s.runs[run]).holds(p.id), holds, "run {run}");
    }
    // Neither form without its completion is learned.
    let plain = |p: &Predicate| {
        p.key.kind == Kind::AfterAll && p.key.arg & (after_all::INNER | after_all::LATE) == 0
    };
    assert!(!c.predicates.iter().any(plain));
}

/// The token ring as a session analyses it: every failing run had t2
/// before t1, and every passing run had t1 first and t4 last. "t2's
/// section before t1's" separates the runs on its own; holding t2 until
/// t1 has returned lets t3 go first. "t1 was not the first of them" is
/// learned beside it, negated by holding t2 and t3 until t1 has returned.
#[test]
fn a_part_that_was_not_the_first_is_learned_beside_an_order_that_separates() {
    let s = token_ring(&[
        (Label::Fail, &[1, 0, 2, 3]),
        (Label::Fail, &[1, 2, 0, 3]),
        (Label::Pass, &[0, 1, 2, 3]),
        (Label::Pass, &[0, 2, 1, 3]),
    ]);
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let (t1, t2, t3, t4) = (site(0, 1, 1), site(1, 2, 1), site(2, 3, 1), site(3, 4, 1));
    let order = PredKey::pair(Kind::SectionOrder, t2, t1);
    assert!(c.predicates.iter().any(|p| p.key == order), "the order alone separates");
    let late = c
        .predicates
        .iter()
        .find(|p| p.key.kind == Kind::AfterAll && p.key.arg & after_all::LATE != 0)
        .expect("t1 not first");
    let Condition::AfterAll { pairs, any } = &late.condition else { panic!("{late:?}") };
    assert_eq!(pairs.len(), 1);
    assert_eq!(pairs[0].b, t4);
    assert_eq!(any.iter().map(|m| (m.a, m.b)).collect::<Vec<_>>(), vec![(t2, t1), (t3, t1)]);
    let first = |site| Intervention::HoldUntil {
        site,
        point: Point::Entry,
        until: t1,
        until_point: Point::Exit,
    };
    assert_eq!(late.intervention, Some(Intervention::All { each: vec![first(t2), first(t3)] }));
    for (run, holds) in [(0, true), (1, true), (2, false), (3, false)] {
        assert_eq!(c.evaluate(&s.runs[run]).holds(late.id), holds, "run {run}");
    }
    // No order between two parts completes it: t2 before t1 is an order
    // of its own.
    assert!(
        !c.predicates
            .iter()
            .any(|p| p.key.kind == Kind::AfterAll && p.key.arg & after_all::INNER != 0)
    );
}

/// Two threads that each run one call taking turns on one lock: the
/// first thread's call (function `names[0]` on `threads[0]`) takes it at
/// the times in a run's first list, the second's at those in its second
/// list, each section 2 µs long but a failing run's second
/// thread's last (it aborted holding the lock). Times in µs.
fn two_loops_session(
    names: [&str; 2],
    threads: [&str; 2],
    runs: &[(bool, &[u64], &[u64])],
) -> Session {
    let functions = vec![
        func(0, names[0], ValueKind::Pointer, &[ValueKind::Pointer]),
        func(1, names[1], ValueKind::Pointer, &[ValueKind::Pointer]),
        sync(2, "pthread_mutex_lock"),
        sync(3, "pthread_mutex_unlock"),
    ];
    const LOCK: i64 = 0x9000;
    let sections = |role: u32, at: &[u64], open_last: bool| -> Vec<Call> {
        let mut v = Vec::new();
        for (k, &t) in at.iter().enumerate() {
            let k = k as u32 + 1;
            v.push(call(2, role, k, t * US, None, None).with_args([LOCK, 0, 0]));
            if !(open_last && k as usize == at.len()) {
                v.push(call(3, role, k, (t + 2) * US, None, None).with_args([LOCK, 0, 0]));
            }
        }
        v
    };
    let threads = vec![thread(0, threads[0]), thread(1, threads[1])];
    let runs = runs
        .iter()
        .enumerate()
        .map(|(id, &(fail, first, second))| {
            let end = |at: &[u64], open: bool| (!open).then(|| (at[at.len() - 1] + 3) * US);
            let mut calls = vec![
                call(0, 0, 1, (first[0] - 1) * US, end(first, false), Some(0)),
                call(1, 1, 1, (second[0] - 1) * US, end(second, fail), Some(0)),
            ];
            calls.extend(sections(0, first, false));
            calls.extend(sections(1, second, fail));
            calls.sort_by_key(|c| c.entry_ns);
            let label = if fail { Label::Fail } else { Label::Pass };
            run(id as u32, label, calls, 200 * US).with_threads(threads.clone())
        })
        .collect();
    Session { functions, runs }
}

/// A producer hands its first element over in its call's second section
/// on the queue's lock (the first fills the queue, the later ones find
/// nothing to do); a consumer polls under the same lock and compares what
/// it takes out with its own loop counter. A run fails when the consumer
/// polled once before the hand-off and again after it (its counter ran
/// ahead). In passing runs the producer's later, empty sections fall
/// between the consumer's polls too, and the consumer's polls between
/// the producer's sections: only "the producer's second section came
/// between two polls" separates the runs.
fn hand_off_session() -> Session {
    two_loops_session(
        ["produce", "consume"],
        ["producer", "consumer"],
        &[
            // The producer wholly first; the consumer wholly before its
            // hand-off; the hand-off before the first poll, its empty
            // sections between the polls.
            (false, &[10, 20, 30, 40], &[50, 60, 70, 80]),
            (false, &[10, 60, 70, 80], &[20, 30, 40, 50]),
            (false, &[10, 20, 40, 60], &[30, 50, 70, 80]),
            // A poll before the hand-off and one after it.
            (true, &[10, 30, 50, 70], &[20, 40]),
            (true, &[10, 40, 60, 80], &[20, 30, 50]),
        ],
    )
}

/// The interleaving of two loops' sections of the given form: a call of
/// function 0 (class 0) takes a lock while a call of function 1 (class
/// 1) is between two of its sections.
fn interleaved(form: u8) -> PredKey {
    PredKey {
        kind: Kind::Interleaved,
        func: 1,
        calls: Calls::Group { class: 1, within: None },
        other: Some(Other { func: 0, calls: Calls::Group { class: 0, within: None } }),
        arg: form,
        callee: None,
    }
}

/// What negates [`interleaved`]: function 0's locks wait while a call of
/// function 1 runs.
fn first_locks_held_while_second_runs() -> Intervention {
    Intervention::HoldLocks {
        calls: CallSet { func: 0, roles: vec![0], instance: 0, within: None },
        while_running: CallSet { func: 1, roles: vec![1], instance: 0, within: None },
    }
}

#[test]
fn a_hand_off_between_two_polls_is_a_predicate_by_its_place_in_its_call() {
    let s = hand_off_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let fd = fd(&c, &s);
    let hand_off = interleaved(locks::nth(2));
    assert!(fd.contains(&hand_off), "{fd:?}");
    // Any section, the last one, the 3rd one: passing run 2 shows them.
    for form in [0, locks::LAST, locks::nth(1), locks::nth(3)] {
        assert!(c.find(&interleaved(form)).is_none(), "{:?}", interleaved(form));
    }
    let p = &c.predicates[c.find(&hand_off).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::InterleavedSections);
    assert_eq!(
        p.description,
        "some call of produce on producer takes a lock for the 2nd time in its call while some call of consume on consumer is between two critical sections on it (released it, to take it again), which no passing run shows"
    );
    assert_eq!(p.intervention, Some(first_locks_held_while_second_runs()));
    // Anchored at the later entry: the consumer's (19 µs) in run 3.
    assert_eq!(c.evaluate(&s.runs[3]).anchor(p.id), Some(19 * US));
    assert!(!c.evaluate(&s.runs[2]).holds(p.id));
}

/// A sender and a receiver that must take turns on one lock (the
/// receiver compares what it takes with its own loop counter): a run
/// fails when one of them takes the lock twice while the other is
/// between two of its sections, a turn ahead. Passing runs have one
/// wholly before the other, or strict turns, so the sender's sections do
/// come between the receiver's, but one at a time.
#[test]
fn a_turn_taken_twice_while_the_other_waits_is_a_predicate() {
    let s = two_loops_session(
        ["send", "recv"],
        ["sender", "receiver"],
        &[
            (false, &[10, 20, 30], &[40, 50, 60]),
            (false, &[10, 30, 50], &[20, 40, 60]),
            (false, &[20, 30, 40], &[10, 12, 14]),
            // The sender twice between the receiver's two sections, the
            // second of which the run ended inside.
            (true, &[20, 30], &[10, 40]),
            (true, &[10, 30, 40], &[5, 25, 60]),
        ],
    );
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let fd = fd(&c, &s);
    let twice = interleaved(locks::TWICE);
    assert!(fd.contains(&twice), "{fd:?}");
    // One turn between two of the receiver's: passing run 1 shows it.
    assert!(c.find(&interleaved(0)).is_none());
    let p = &c.predicates[c.find(&twice).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "some call of send on sender takes a lock twice while some call of recv on receiver is between two critical sections on it (released it, to take it again), which no passing run shows"
    );
    assert_eq!(p.intervention, Some(first_locks_held_while_second_runs()));
    // Anchored at the later entry: the sender's (19 µs) in run 3.
    assert_eq!(c.evaluate(&s.runs[3]).anchor(p.id), Some(19 * US));
    for pass in &s.runs[..3] {
        assert!(!c.evaluate(pass).holds(p.id), "run {}", pass.id);
    }
}

/// A sender and a receiver that must take turns (the receiver compares
/// what it takes with its own loop counter), where neither "a turn
/// ahead" separates the runs: a receiver that ends its loop polling
/// after the sender's last turn has polled twice between two of the
/// sender's sections, and a sender that ends its loop with empty turns
/// has taken two between the receiver's. A run fails when the receiver
/// polled twice running (or first, before any turn of the sender's) and
/// polls again after the sender's next turn: its counter is then a turn
/// ahead of what it takes out.
#[test]
fn a_poll_out_of_turn_followed_by_another_is_a_predicate() {
    let s = two_loops_session(
        ["send", "recv"],
        ["sender", "receiver"],
        &[
            // Strict turns; the sender's last turns empty after a turn of
            // the receiver's; the receiver's last polls after the
            // sender's last turn; the receiver wholly first.
            (false, &[10, 30, 50], &[20, 40, 60]),
            (false, &[10, 30, 40], &[20, 50, 60]),
            (false, &[10, 60], &[20, 30, 40]),
            (false, &[40, 50, 60], &[10, 20, 30]),
            // A poll before any turn of the sender's, and one after.
            (true, &[10], &[5, 20]),
            // A turn, a poll, a poll, a turn, a poll.
            (true, &[5, 30], &[10, 20, 40]),
        ],
    );
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let fd = fd(&c, &s);
    let out_of_turn = interleaved(locks::OUT_OF_TURN);
    assert!(fd.contains(&out_of_turn), "{fd:?}");
    // Passing run 1 shows a turn between two polls, and two turns
    // between two polls; passing run 2 two polls between two turns.
    assert!(c.find(&interleaved(0)).is_none());
    assert!(c.find(&interleaved(locks::TWICE)).is_none());
    let p = &c.predicates[c.find(&out_of_turn).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "some call of send on sender takes a lock while some call of recv on receiver is between two critical sections on it (released it, to take it again), the first of the two taken with no section of the other's since its own previous one or its start (a turn out of order), which no passing run shows"
    );
    assert_eq!(p.intervention, Some(first_locks_held_while_second_runs()));
    for pass in &s.runs[..4] {
        assert!(!c.evaluate(pass).holds(p.id), "run {}", pass.id);
    }
    for fail in &s.runs[4..] {
        assert!(c.evaluate(fail).holds(p.id), "run {}", fail.id);
    }
}

/// A two-stage update (SCTBench's twostage): `write` sets a field under
/// lock 1, then another under lock 2; `read` takes lock 1, returns at
/// once when the first field is unset, else reads the second under lock 2
/// and fails when the two disagree. A run fails when the read's section
/// on lock 2 comes after the write began and before its section on lock
/// 2. Passing runs show the read taking lock 1 before the write's section
/// on it (returning early), so "takes a lock" regardless of which is no
/// predicate: only the write's 2nd lock is. Times in µs.
#[test]
fn a_lock_taken_before_a_calls_second_lock_is_told_from_its_first() {
    let functions = vec![
        func(0, "write", ValueKind::Pointer, &[ValueKind::Pointer]),
        func(1, "read", ValueKind::Pointer, &[ValueKind::Pointer]),
        sync(2, "pthread_mutex_lock"),
        sync(3, "pthread_mutex_unlock"),
    ];
    const L1: i64 = 0x9000;
    const L2: i64 = 0xa000;
    // One call on `role` from `enter` to `exit` (None: the run ended in
    // it), with its sections (lock, taken at, let go 2 µs later).
    let body = |f: u32, role: u32, enter: u64, exit: Option<u64>, sections: &[(i64, u64)]| {
        let mut v = vec![call(f, role, 1, enter * US, exit.map(|e| e * US), exit.map(|_| 0))];
        for (k, &(lock, at)) in sections.iter().enumerate() {
            let k = k as u32 + 1;
            v.push(call(2, role, k, at * US, None, None).with_args([lock, 0, 0]));
            v.push(call(3, role, k, (at + 2) * US, None, None).with_args([lock, 0, 0]));
        }
        v
    };
    let mk = |id: u32, fail: bool, calls: Vec<Vec<Call>>| {
        let mut calls = calls.concat();
        calls.sort_by_key(|c| c.entry_ns);
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 100 * US).with_threads(vec![thread(0, "writer"), thread(1, "reader")])
    };
    let runs = vec![
        // The read after the whole write; the read first, returning early.
        mk(
            0,
            false,
            vec![
                body(0, 0, 10, Some(25), &[(L1, 11), (L2, 20)]),
                body(1, 1, 30, Some(40), &[(L1, 31), (L2, 35)]),
            ],
        ),
        mk(
            1,
            false,
            vec![
                body(0, 0, 3, Some(25), &[(L1, 10), (L2, 20)]),
                body(1, 1, 5, Some(9), &[(L1, 6)]),
            ],
        ),
        // The read between the write's two sections.
        mk(
            2,
            true,
            vec![
                body(0, 0, 10, Some(26), &[(L1, 11), (L2, 21)]),
                body(1, 1, 14, None, &[(L1, 15), (L2, 18)]),
            ],
        ),
        mk(
            3,
            true,
            vec![
                body(0, 0, 20, Some(45), &[(L1, 22), (L2, 40)]),
                body(1, 1, 25, None, &[(L1, 27), (L2, 32)]),
            ],
        ),
    ];
    let s = Session { functions, runs };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let early = |place: u8| PredKey {
        kind: Kind::BeforeFirstSection,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: Some(Other { func: 1, calls: Calls::Group { class: 1, within: None } }),
        arg: place,
        callee: None,
    };
    let fd = fd(&c, &s);
    assert!(fd.contains(&early(2)), "{fd:?}");
    // Any lock, and the first: passing run 1 shows them.
    assert!(c.find(&early(0)).is_none() && c.find(&early(1)).is_none(), "{:?}", c.predicates);
    let p = &c.predicates[c.find(&early(2)).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "some call of read on reader takes a lock after some call of write on writer has started and before that call first takes it (the 2nd lock that call takes; what it did before taking the lock may no longer hold when it does), which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldLocks {
            calls: CallSet { func: 1, roles: vec![1], instance: 0, within: None },
            while_running: CallSet { func: 0, roles: vec![0], instance: 0, within: None },
        })
    );
    // Anchored at the later entry: the read's (14 µs) in run 2.
    assert_eq!(c.evaluate(&s.runs[2]).anchor(p.id), Some(14 * US));
    assert!(!c.evaluate(&s.runs[1]).holds(p.id));
}
