//! The lock-order cycle predicate (`deadlock.rs`) on hand-built runs
//! shaped like deadlock01 (thread1 locks a then b, thread2 b then a): the
//! exact key, condition, description, intervention and truth, and the
//! near misses that are no cycle.

use super::*;
use crate::model::{
    Call, CallSet, Function, Label, Probe, Run, Session,
    testing::{call, function, run, thread},
};

const US: u64 = 1000;
const A: i64 = 0x5581_a022_3060;
const B: i64 = 0x5581_a022_30a0;
const LOCK: u32 = 2;
const UNLOCK: u32 = 3;

fn sync(id: u32, name: &str) -> Function {
    Function { internal: true, probe: Probe::Sync, ..function(id, name) }
}

fn functions() -> Vec<Function> {
    vec![
        function(0, "thread1"),
        function(1, "thread2"),
        sync(LOCK, "pthread_mutex_lock@@GLIBC_2.2.5"),
        sync(UNLOCK, "pthread_mutex_unlock@@GLIBC_2.2.5"),
    ]
}

/// One thread's body on `role` (function `func`), entered at `enter` µs:
/// its lock calls as (time, address, lock or unlock), returning at `exit`
/// (None: it never returned).
fn body(
    func: u32,
    role: u32,
    enter: u64,
    ops: &[(u64, i64, bool)],
    exit: Option<u64>,
) -> Vec<Call> {
    let mut v = vec![call(func, role, 1, enter * US, exit.map(|x| x * US), exit.map(|_| 0))];
    let (mut locks, mut unlocks) = (0, 0);
    for &(t, addr, lock) in ops {
        let (f, k) = if lock {
            locks += 1;
            (LOCK, locks)
        } else {
            unlocks += 1;
            (UNLOCK, unlocks)
        };
        v.push(call(f, role, k, t * US, None, None).with_args([addr, 0, 0]));
    }
    v
}

/// thread1 takes a then b, thread2 b then a, each releasing both.
fn t1(enter: u64, at: [u64; 4], exit: Option<u64>) -> Vec<Call> {
    body(
        0,
        1,
        enter,
        &[(at[0], A, true), (at[1], B, true), (at[2], B, false), (at[3], A, false)],
        exit,
    )
}
fn t2(enter: u64, at: [u64; 4], exit: Option<u64>) -> Vec<Call> {
    body(
        1,
        2,
        enter,
        &[(at[0], B, true), (at[1], A, true), (at[2], A, false), (at[3], B, false)],
        exit,
    )
}

fn mk(id: u32, fail: bool, calls: Vec<Call>, end: u64) -> Run {
    let label = if fail { Label::Fail } else { Label::Pass };
    run(id, label, calls, end * US).with_threads(vec![
        thread(0, "main"),
        thread(1, "thread1"),
        thread(2, "thread2"),
    ])
}

/// Passing runs: one body after the other (either first), and a near
/// miss — the two bodies overlap, thread2 takes b just after thread1 let
/// it go while thread1 still holds a, so thread2 waits for a a while.
/// Failing runs: each holds its first lock when it asks for the second,
/// and neither returns (the run hung), whichever started first.
fn deadlock_session() -> Session {
    let runs = vec![
        mk(
            0,
            false,
            [t1(10, [12, 14, 16, 18], Some(20)), t2(50, [52, 54, 56, 58], Some(60))].concat(),
            70,
        ),
        mk(
            1,
            false,
            [t2(10, [12, 14, 16, 18], Some(20)), t1(50, [52, 54, 56, 58], Some(60))].concat(),
            70,
        ),
        mk(
            2,
            false,
            [t1(10, [12, 14, 16, 30], Some(40)), t2(15, [17, 20, 32, 34], Some(60))].concat(),
            70,
        ),
        mk(
            3,
            true,
            [
                t1(10, [12, 20, 0, 0], None)[..3].to_vec(),
                t2(13, [15, 18, 0, 0], None)[..3].to_vec(),
            ]
            .concat(),
            1_000_000,
        ),
        mk(
            4,
            true,
            [
                t2(10, [12, 20, 0, 0], None)[..3].to_vec(),
                t1(14, [15, 18, 0, 0], None)[..3].to_vec(),
            ]
            .concat(),
            1_000_000,
        ),
    ];
    Session { functions: functions(), runs }
}

fn cycle_key() -> PredKey {
    PredKey {
        kind: Kind::LockCycle,
        func: 0,
        calls: Calls::Group { class: 1, within: None },
        other: Some(Other { func: 1, calls: Calls::Group { class: 2, within: None } }),
        arg: 0,
        callee: None,
    }
}

#[test]
fn two_threads_each_holding_the_lock_the_other_waits_for_is_a_lock_cycle() {
    let s = deadlock_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let id = c.find(&cycle_key()).expect("the lock-order cycle is learned");
    let p = &c.predicates[id.0 as usize];
    assert_eq!(p.key.to_string(), "lock_cycle:f0/c1+f1/c2");
    assert_eq!(p.condition, Condition::LockCycle { held: 1, takes: 2 });
    assert_eq!(p.anchor, Anchor::LaterEntry);
    assert_eq!(
        p.description,
        "some call of thread1 on thread1 holds its 1st lock and waits for its 2nd while some call of thread2 on thread2 holds that 2nd lock and waits for the 1st: a lock-order cycle (deadlock), which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups {
            a: CallSet { func: 0, roles: vec![1], instance: 0, within: None },
            b: CallSet { func: 1, roles: vec![2], instance: 0, within: None },
            object: None,
        })
    );
    assert_eq!(
        p.intervention_text,
        "let no call of thread1 on thread1 start while a call of thread2 on thread2 runs, and the other way round"
    );
    assert_eq!(p.described.kind, "lock_cycle");
    assert_eq!(
        p.described.values,
        vec![("held_lock".to_owned(), "1".to_owned()), ("waited_lock".to_owned(), "2".to_owned()),]
    );
    // In every failing run and no passing one, anchored where serialising
    // acts: the later of the two bodies' entries.
    let truths: Vec<RunTruth> = s.runs.iter().map(|r| c.evaluate(r)).collect();
    assert_eq!(
        truths.iter().map(|t| t.holds(id)).collect::<Vec<_>>(),
        [false, false, false, true, true]
    );
    assert_eq!(truths[3].anchor(id), Some(13 * US));
    assert_eq!(truths[4].anchor(id), Some(14 * US));
    // One key whichever thread took its first lock first.
    assert_eq!(c.predicates.iter().filter(|p| p.key.kind == Kind::LockCycle).count(), 1);
    // The bodies overlap in the near miss too (thread2 starts while
    // thread1 runs), so that overlap is no predicate. thread1 and thread2
    // are one thread each, so their overlaps are per call and directed:
    // the one other direction, "thread1 starts while thread2 runs", no
    // passing run shows, and it holds in failing run 4 only.
    let concurrent: Vec<&Predicate> =
        c.predicates.iter().filter(|p| p.key.kind == Kind::Concurrent).collect();
    assert_eq!(concurrent.len(), 1, "{concurrent:?}");
    assert_eq!(
        concurrent[0].description,
        "call 1 of thread1 on thread1 starts while call 1 of thread2 on thread2 runs, which no passing run shows"
    );
    assert_eq!(
        truths.iter().map(|t| t.holds(concurrent[0].id)).collect::<Vec<_>>(),
        [false, false, false, false, true]
    );
    // Sync points are never predicates themselves.
    assert!(c.predicates.iter().all(|p| p.key.func < LOCK));
    // A run without sync-point events shows no cycle: false, not guessed.
    let mut bare = s.runs[3].clone();
    bare.calls.retain(|c| c.func < LOCK);
    assert!(!c.evaluate(&bare).holds(id));
}

/// The near miss alone: thread2 asks for a while thread1 holds it, but
/// thread1 had already let b go, so the two never wait for each other.
#[test]
fn a_lock_taken_after_the_other_thread_let_it_go_is_no_cycle() {
    let s = deadlock_session();
    let idx = index::RunIndex::with_groups(
        &s.runs[2],
        |f| f < LOCK,
        &Classes::learn(&s.runs),
        &Default::default(),
    );
    assert!(deadlock::cycles(&idx, &deadlock::lock_calls(&s.functions)).is_empty());
    let idx = index::RunIndex::with_groups(
        &s.runs[3],
        |f| f < LOCK,
        &Classes::learn(&s.runs),
        &Default::default(),
    );
    let found = deadlock::cycles(&idx, &deadlock::lock_calls(&s.functions));
    assert_eq!(found.len(), 1);
}

/// Two calls of one function (a transfer locking its two accounts in
/// argument order) on a pool: the cycle is between two calls of the same
/// group, and so is the serialisation; the locks are named by the order
/// the first call took them.
#[test]
fn two_calls_of_one_function_locking_in_opposite_orders_are_a_cycle_of_one_group() {
    let functions = [
        function(0, "transfer"),
        sync(LOCK, "pthread_mutex_lock"),
        sync(UNLOCK, "pthread_mutex_unlock"),
    ];
    let functions = vec![
        functions[0].clone(),
        function(1, "unused"),
        functions[1].clone(),
        functions[2].clone(),
    ];
    let transfer = |role: u32, enter: u64, from: i64, to: i64, at: [u64; 4], exit: Option<u64>| {
        body(
            0,
            role,
            enter,
            &[(at[0], from, true), (at[1], to, true), (at[2], to, false), (at[3], from, false)],
            exit,
        )
    };
    let pool = |id: u32, fail: bool, calls: Vec<Call>| {
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 900 * US).with_threads(vec![
            thread(0, "main"),
            thread(1, "worker"),
            thread(2, "worker"),
        ])
    };
    let runs = vec![
        pool(
            0,
            false,
            [
                transfer(1, 10, A, B, [11, 12, 13, 14], Some(15)),
                transfer(2, 20, B, A, [21, 22, 23, 24], Some(25)),
            ]
            .concat(),
        ),
        pool(
            1,
            false,
            [
                transfer(2, 10, A, B, [11, 12, 13, 14], Some(15)),
                transfer(1, 20, B, A, [21, 22, 23, 24], Some(25)),
            ]
            .concat(),
        ),
        pool(
            2,
            true,
            [
                transfer(1, 10, A, B, [11, 15, 0, 0], None)[..3].to_vec(),
                transfer(2, 12, B, A, [13, 14, 0, 0], None)[..3].to_vec(),
            ]
            .concat(),
        ),
    ];
    let s = Session { functions, runs };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 1, within: None } }),
        ..cycle_key()
    };
    let p = &c.predicates[c.find(&key).expect("learned").0 as usize];
    assert_eq!(p.condition, Condition::LockCycle { held: 1, takes: 2 });
    assert_eq!(
        p.description,
        "some call of transfer on the worker threads holds its 1st lock and waits for its 2nd while another call of transfer on the worker threads holds that 2nd lock and waits for the 1st: a lock-order cycle (deadlock), which no passing run shows"
    );
    let all = CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None };
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups { a: all.clone(), b: all, object: None })
    );
}
