//! The lock-section predicates (`sections.rs`, `locks.rs`) on hand-built
//! runs shaped like the programs that need them: two withdrawals whose
//! check and debit are two critical sections, a check-then-act whose check
//! takes no lock, and the StringBuffer of the corpus (turns and hand-offs
//! are in `tests_turns.rs`). Each asserts the exact key, condition,
//! intervention and truth.

use super::{
    tests_groups::{US, fd, func, on_workers, site},
    *,
};
use crate::model::{
    Call, CallSet, Function, Label, Point, ValueKind,
    testing::{call, run, thread},
};

/// aid's synchronisation-point probe on the C library's `name`.
pub(super) fn sync(id: u32, name: &str) -> Function {
    let mut f = func(id, name, ValueKind::Signed, &[ValueKind::Pointer]);
    f.internal = true;
    f.probe = crate::model::Probe::Sync;
    f
}

/// Two clients withdraw from one account; a withdrawal checks the balance
/// in one critical section and debits it in a second one. Runs fail when
/// the other client's check comes between the two sections (both see the
/// balance cover the amount). The calls overlap in passing runs too (a
/// client delayed before its first lock lets the other run its whole
/// withdrawal inside its call), so no overlap predicate separates the
/// runs: the interleaving of the lock sections does. Times in µs; the
/// releases are aid's sync-point probes on `pthread_mutex_unlock`.
pub(crate) fn withdraw_session() -> Session {
    let functions = vec![
        func(0, "withdraw", ValueKind::Signed, &[ValueKind::Pointer, ValueKind::Signed]),
        func(1, "balance", ValueKind::Signed, &[ValueKind::Pointer]),
        sync(2, "pthread_mutex_unlock"),
        sync(3, "pthread_mutex_lock"),
    ];
    const ACCT: i64 = 0x7000;
    // One withdrawal on `role`: its calls, given when it enters, where its
    // sections end (unlocks) and when it returns what.
    let withdraw = |role: u32, enter: u64, unlocks: &[u64], exit: u64, ret: i64| -> Vec<Call> {
        let mut v =
            vec![call(0, role, 1, enter * US, Some(exit * US), Some(ret)).with_args([ACCT, 60, 0])];
        for (k, &u) in unlocks.iter().enumerate() {
            let k = k as u32;
            v.push(call(3, role, k + 1, (u - 2) * US, None, None).with_args([ACCT, 0, 0]));
            v.push(call(2, role, k + 1, u * US, None, None).with_args([ACCT, 0, 0]));
        }
        v
    };
    let threads = vec![thread(0, "main"), thread(1, "client"), thread(2, "client")];
    let mk = |id: u32, fail: bool, mut calls: Vec<Call>| {
        calls.push(call(1, 0, 1, 200 * US, Some(201 * US), Some(if fail { -20 } else { 40 })));
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 210 * US).with_threads(threads.clone())
    };
    let runs = vec![
        // One after the other.
        mk(0, false, [withdraw(1, 10, &[15, 35], 40, 0), withdraw(2, 50, &[55], 60, -1)].concat()),
        // Overlapping calls, the second one's only section after both of
        // the first's.
        mk(1, false, [withdraw(1, 10, &[15, 35], 40, 0), withdraw(2, 20, &[50], 70, -1)].concat()),
        mk(2, false, [withdraw(2, 10, &[15, 35], 40, 0), withdraw(1, 12, &[60], 70, -1)].concat()),
        // The other client's check between the two sections.
        mk(
            3,
            true,
            [withdraw(1, 10, &[15, 55], 60, 0), withdraw(2, 12, &[20, 45], 50, 0)].concat(),
        ),
        mk(
            4,
            true,
            [withdraw(2, 10, &[15, 65], 70, 0), withdraw(1, 30, &[40, 50], 52, 0)].concat(),
        ),
    ];
    Session { functions, runs }
}

#[test]
fn a_lock_taken_between_two_critical_sections_of_one_call_is_a_predicate() {
    let s = withdraw_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 1, within: None } }),
        ..on_workers(Kind::Interleaved, 0)
    };
    assert!(fd(&c, &s).contains(&key), "{:?}", fd(&c, &s));
    let p = &c.predicates[c.find(&key).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::InterleavedSections);
    assert_eq!(p.anchor, Anchor::LaterEntry);
    assert_eq!(
        p.description,
        "some call of withdraw on the client threads takes a lock while another call of withdraw on the client threads is between two critical sections on it (released it, to take it again), which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups {
            a: CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None },
            b: CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None },
            object: Some((1, 1)),
        })
    );
    // Anchored where serialising acts: the later of the two entries.
    let t = c.evaluate(&s.runs[4]);
    assert_eq!(t.anchor(p.id), Some(30 * US));
    // The overlap itself is no predicate: passing runs overlap too.
    assert!(c.predicates.iter().all(|p| p.key.kind != Kind::Overlap), "{:?}", c.predicates);
    // Sync points are never predicates themselves.
    assert!(c.predicates.iter().all(|p| p.key.func < 2));
    // A run without sync-point events shows no interleaving: false, not
    // guessed.
    let mut bare = s.runs[3].clone();
    bare.calls.retain(|c| c.func < 2);
    assert!(!c.evaluate(&bare).holds(p.id));
}

/// A check-then-act whose check is not under the lock: `incr` (main)
/// tests a flag and only then takes the lock to count itself in; `stop`
/// (one thread) sets the flag and counts down under the same lock, in
/// its helper `decr`. Runs fail when `decr`'s section comes after `incr`
/// began and before `incr`'s own section. Passing runs have `stop` wholly
/// first (then `incr` takes no lock at all) or wholly after. Times in
/// µs; both calls pass the device (0x7000).
fn check_then_act_session() -> Session {
    let functions = vec![
        func(0, "incr", ValueKind::Signed, &[ValueKind::Pointer]),
        func(1, "decr", ValueKind::Void, &[ValueKind::Pointer]),
        sync(2, "pthread_mutex_lock"),
        sync(3, "pthread_mutex_unlock"),
    ];
    const DEV: i64 = 0x7000;
    const LOCK: i64 = 0x9000;
    // A call on `role` from `enter` to `exit`, with its section (lock and
    // unlock times), if it takes one.
    let with_section = |f: u32, role: u32, enter: u64, exit: u64, section: Option<(u64, u64)>| {
        let mut v =
            vec![call(f, role, 1, enter * US, Some(exit * US), Some(0)).with_args([DEV, 0, 0])];
        if let Some((l, u)) = section {
            v.push(call(2, role, 1, l * US, None, None).with_args([LOCK, 0, 0]));
            v.push(call(3, role, 1, u * US, None, None).with_args([LOCK, 0, 0]));
        }
        v
    };
    let threads = vec![thread(0, "main"), thread(1, "stop")];
    let mk = |id: u32, fail: bool, calls: Vec<Vec<Call>>| {
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls.concat(), 100 * US).with_threads(threads.clone())
    };
    let runs = vec![
        // stop wholly first: incr sees the flag and takes no lock.
        mk(
            0,
            false,
            vec![with_section(1, 1, 5, 15, Some((8, 12))), with_section(0, 0, 20, 25, None)],
        ),
        // stop wholly after incr.
        mk(
            1,
            false,
            vec![
                with_section(0, 0, 10, 20, Some((12, 15))),
                with_section(1, 1, 30, 40, Some((32, 35))),
            ],
        ),
        mk(
            2,
            false,
            vec![
                with_section(0, 0, 10, 20, Some((14, 16))),
                with_section(1, 1, 22, 30, Some((24, 26))),
            ],
        ),
        // decr's section between incr's check and incr's section.
        mk(
            3,
            true,
            vec![
                with_section(0, 0, 10, 40, Some((30, 35))),
                with_section(1, 1, 15, 25, Some((18, 22))),
            ],
        ),
        mk(
            4,
            true,
            vec![
                with_section(0, 0, 10, 50, Some((45, 48))),
                with_section(1, 1, 12, 30, Some((20, 28))),
            ],
        ),
    ];
    Session { functions, runs }
}

#[test]
fn a_lock_taken_after_a_call_began_and_before_its_first_section_is_a_predicate() {
    let s = check_then_act_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        kind: Kind::BeforeFirstSection,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: Some(Other { func: 1, calls: Calls::Group { class: 1, within: None } }),
        arg: 0,
        callee: None,
    };
    let found = fd(&c, &s);
    assert!(found.contains(&key), "{found:?}");
    let p = &c.predicates[c.find(&key).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::TakenBeforeFirstSection);
    assert_eq!(p.anchor, Anchor::LaterEntry);
    assert_eq!(
        p.description,
        "some call of decr on stop takes a lock after some call of incr on main has started and before that call first takes it (what it did before taking the lock may no longer hold when it does), which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldLocks {
            calls: CallSet { func: 1, roles: vec![1], instance: 0, within: None },
            while_running: CallSet { func: 0, roles: vec![0], instance: 0, within: None },
        })
    );
    // Anchored at the later entry: decr's (12 µs) in run 4.
    assert_eq!(c.evaluate(&s.runs[4]).anchor(p.id), Some(12 * US));
    // A section that began before incr did is not counted: its reads may
    // have come first.
    let mut early = s.runs[3].clone();
    for call in early.calls.iter_mut().filter(|c| c.role == 1) {
        call.entry_ns -= 10 * US;
    }
    early.calls.sort_by_key(|c| c.entry_ns);
    assert!(!c.evaluate(&early).holds(p.id));
}

#[test]
fn which_thread_took_the_lock_first_is_a_predicate() {
    let s = check_then_act_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey::pair(Kind::SectionOrder, site(1, 1, 1), site(0, 0, 1));
    let found = fd(&c, &s);
    assert!(found.contains(&key), "{found:?}");
    let p = &c.predicates[c.find(&key).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::SectionsInOrder);
    assert_eq!(p.anchor, Anchor::Entry);
    assert_eq!(
        p.description,
        "the first critical section of call 1 of decr on stop on a lock (one it takes or runs in) comes before the first section of call 1 of incr on main on it, which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: site(1, 1, 1),
            point: Point::Entry,
            until: site(0, 0, 1),
            until_point: Point::Exit,
        })
    );
    // Placed at decr's entry.
    assert_eq!(c.evaluate(&s.runs[3]).anchor(p.id), Some(15 * US));
    // Not observed where the two calls share no lock (run 0: incr took
    // none).
    assert!(!c.evaluate(&s.runs[0]).observed(p.id));
    // A passing run in decr's order that ended inside incr (main returned
    // before incr could fail) neither drops the predicate nor is observed.
    let mut censored = s.runs[3].clone();
    censored.id = 99;
    censored.label = Label::Pass;
    for call in censored.calls.iter_mut().filter(|c| c.func == 0 && c.role == 0) {
        call.exit_ns = None;
    }
    let mut with = check_then_act_session();
    with.runs.push(censored.clone());
    let c = learn(&with, &ExtractConfig::default()).unwrap();
    let p = c.find(&key).expect("still learned");
    assert!(!c.evaluate(&censored).observed(p));
    assert!(c.evaluate(&with.runs[3]).holds(p));
}

/// A call's second section never released — the run aborted inside it —
/// still ends a window another thread's section fell in: the other
/// thread released the lock after the first section and before the end.
#[test]
fn a_second_section_the_run_ended_inside_still_closes_an_interleaving() {
    let s = withdraw_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 1, within: None } }),
        ..on_workers(Kind::Interleaved, 0)
    };
    let p = c.find(&key).unwrap();
    // Run 3, with client 1's second unlock (55 µs) gone: it aborted while
    // holding the lock, after client 2's sections (released at 20, 45).
    let mut aborted = s.runs[3].clone();
    aborted.calls.retain(|c| !(c.role == 1 && c.func == 2 && c.entry_ns == 55 * US));
    assert!(c.evaluate(&aborted).holds(p));
}

/// A StringBuffer-style atomicity violation: `append_sb` (main) reads the
/// other buffer's length in one critical section and copies that many
/// characters in a second one; a worker `erase`s the buffer and then
/// `append_str`s to it again, each in its own section. A run fails when
/// the erase is the last section between the two (the copy finds the
/// buffer short); when the append follows it inside the window the length
/// is right again and the run passes. So passing runs show the erase
/// between the two sections too: only "the last one between" separates.
fn erase_session() -> Session {
    let functions = vec![
        func(0, "append_sb", ValueKind::Pointer, &[ValueKind::Pointer, ValueKind::Pointer]),
        func(1, "erase", ValueKind::Pointer, &[ValueKind::Pointer]),
        func(2, "append_str", ValueKind::Pointer, &[ValueKind::Pointer, ValueKind::Pointer]),
        sync(3, "pthread_mutex_unlock"),
        sync(4, "pthread_mutex_lock"),
    ];
    const SB: i64 = 0x5000;
    const BUF: i64 = 0x6000;
    const STR: i64 = 0x7000;
    // A section on BUF taken at `at` by the `k`-th lock call of `role`,
    // let go 2 µs later unless `open` (the run ended inside it).
    let section = |role: u32, k: u32, at: u64, open: bool| -> Vec<Call> {
        let mut v = vec![call(4, role, k, at * US, None, None).with_args([BUF, 0, 0])];
        if !open {
            v.push(call(3, role, k, (at + 2) * US, None, None).with_args([BUF, 0, 0]));
        }
        v
    };
    // main: append_sb from 10 µs, its sections at 12 and `copy`; the
    // worker: erase at `erase`, append_str 5 µs later (its section open
    // when the run ended inside main's copy).
    let mk = |id: u32, fail: bool, copy: u64, erase: u64| {
        let end = if fail { None } else { Some((copy + 4) * US) };
        let mut calls = vec![call(0, 0, 1, 10 * US, end, Some(SB)).with_args([SB, BUF, 0])];
        calls.extend(section(0, 1, 12, false));
        calls.extend(section(0, 2, copy, fail));
        let append = erase + 5;
        calls.push(
            call(1, 1, 1, erase * US, Some((erase + 4) * US), Some(BUF)).with_args([BUF, 0, 3]),
        );
        calls.extend(section(1, 1, erase + 1, false));
        let stuck = fail && append > copy;
        let ret = if stuck { None } else { Some((append + 4) * US) };
        calls.push(call(2, 1, 1, append * US, ret, ret.map(|_| BUF)).with_args([BUF, STR, 0]));
        calls.extend(section(1, 2, append + 1, stuck));
        calls.sort_by_key(|c| c.entry_ns);
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 100 * US).with_threads(vec![thread(0, "main"), thread(1, "worker")])
    };
    let runs = vec![
        // The worker after both sections, before both, inside the window
        // with both its sections, after a quick copy.
        mk(0, false, 40, 50),
        mk(1, false, 40, 60),
        mk(2, false, 40, 16),
        mk(3, false, 45, 18),
        mk(4, false, 20, 30),
        // The erase last in the window.
        mk(5, true, 20, 16),
        mk(6, true, 21, 17),
    ];
    Session { functions, runs }
}

#[test]
fn the_last_section_between_two_is_a_predicate_when_any_section_between_is_not() {
    let s = erase_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let interleaved = |func: u32, last: bool| PredKey {
        kind: Kind::Interleaved,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: Some(Other { func, calls: Calls::Group { class: 1, within: None } }),
        arg: u8::from(last),
        callee: None,
    };
    let fd = fd(&c, &s);
    assert!(fd.contains(&interleaved(1, true)), "{fd:?}");
    // The wide form is seen in passing runs 2 and 3: no predicate; nor is
    // the append, which is never the last one in a failing run.
    for key in [interleaved(1, false), interleaved(2, false), interleaved(2, true)] {
        assert!(c.find(&key).is_none(), "{key:?}");
    }
    let p = &c.predicates[c.find(&interleaved(1, true)).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "some call of erase on worker takes a lock while some call of append_sb on main is between two critical sections on it (released it, to take it again), the last to hold it before that call took it again, which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldLocks {
            calls: CallSet { func: 1, roles: vec![1], instance: 0, within: None },
            while_running: CallSet { func: 0, roles: vec![0], instance: 0, within: None },
        })
    );
    // Anchored at the later entry: the erase's.
    assert_eq!(c.evaluate(&s.runs[5]).anchor(p.id), Some(16 * US));
}

/// SCTBench's account: the checker is created first and waits for the
/// lock; it fails (aborting inside its section, which stays open) only
/// when its section comes after both the deposit's and the withdrawal's.
/// Each order alone some passing run shows; no call-level order
/// separates the runs (the check starts first in every run): the
/// conjunction of section orders does, negated by holding the deposit at
/// its entry until the check has returned. A passing run that ended
/// inside the check (main returned first) is left out. Times in µs.
#[test]
fn a_section_after_every_other_sections_is_a_conjunction() {
    let functions = vec![
        func(0, "deposit", ValueKind::Void, &[]),
        func(1, "withdraw", ValueKind::Void, &[]),
        func(2, "check", ValueKind::Void, &[]),
        sync(3, "pthread_mutex_unlock"),
        sync(4, "pthread_mutex_lock"),
    ];
    const LOCK: i64 = 0x7000;
    // One call on `role` whose section ends at `unlock` (None: the run
    // ended inside it).
    let section = |f: u32, role: u32, enter: u64, unlock: Option<u64>| -> Vec<Call> {
        let lock_at = unlock.map_or(enter + 30, |u| u - 2);
        let exit = unlock.map(|u| (u + 1) * US);
        let mut v = vec![
            call(f, role, 1, enter * US, exit, None),
            call(4, role, 1, lock_at * US, None, None).with_args([LOCK, 0, 0]),
        ];
        if let Some(u) = unlock {
            v.push(call(3, role, 1, u * US, None, None).with_args([LOCK, 0, 0]));
        }
        v
    };
    let threads =
        vec![thread(0, "main"), thread(1, "check"), thread(2, "deposit"), thread(3, "withdraw")];
    // The check enters at 1 µs in every run; (deposit, withdraw, check)
    // sections end at these times; a failing run ends inside the check's.
    let mk = |id: u32, d: u64, w: u64, c: u64| {
        let fail = c > d && c > w;
        let calls = [
            section(2, 1, 1, (!fail).then_some(c)),
            section(0, 2, d - 4, Some(d)),
            section(1, 3, w - 4, Some(w)),
        ]
        .concat();
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 100 * US).with_threads(threads.clone())
    };
    let s = Session {
        functions,
        runs: vec![
            mk(0, 20, 40, 10),
            mk(1, 10, 40, 20),
            mk(2, 40, 10, 20),
            mk(3, 10, 20, 40),
            mk(4, 20, 10, 40),
            // Main returned while the check held the lock, after both
            // sections, before it could fail: says nothing.
            Run { label: Label::Pass, ..mk(5, 10, 20, 40) },
        ],
    };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let check = site(2, 1, 1);
    let after = PredKey {
        arg: 2 | after_all::SECTIONS,
        ..PredKey::pair(Kind::AfterAll, check, site(0, 2, 1))
    };
    let p = c.predicates.iter().find(|p| p.key == after).expect("the conjunction of sections");
    let part = |a| PairMember { a, b: check, at_entry: false, reversed: true, sections: true };
    assert_eq!(
        p.condition,
        Condition::AfterAll {
            pairs: vec![part(site(0, 2, 1)), part(site(1, 3, 1))],
            any: Vec::new()
        }
    );
    assert_eq!(
        p.description,
        "call 1 of check on check takes a lock only after call 1 of deposit on deposit and call 1 of withdraw on withdraw have each held it and let it go (their first critical sections on it came before its own), which no passing run shows (each of them alone coming first, some do)"
    );
    // Run 0 had the check's section before the deposit's.
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: site(0, 2, 1),
            point: Point::Entry,
            until: check,
            until_point: Point::Exit
        })
    );
    // No order of the calls themselves separates the runs.
    assert!(!c.predicates.iter().any(|p| p.key.kind == Kind::AfterAll && p.key.arg == 2));
    // Holds in the failing runs, settled when the later of the two
    // sections ended (20 µs); observed and false in the passing ones.
    for (run, holds) in [(0, false), (1, false), (2, false), (3, true), (4, true)] {
        let truth = c.evaluate(&s.runs[run]);
        assert!(truth.observed(p.id), "run {run}");
        assert_eq!(truth.holds(p.id), holds, "run {run}");
    }
    let censored = c.evaluate(&s.runs[5]);
    assert!(!censored.observed(p.id) && !censored.holds(p.id));
    assert_eq!(c.evaluate(&s.runs[3]).anchor(p.id), Some(20 * US));
}
