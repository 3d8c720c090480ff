//! The consumer-ahead-of-producer predicate (`outrun.rs`) on hand-built
//! runs shaped like a stack pushed by one thread and popped by another:
//! the exact key, condition, description, intervention and truth, and the
//! pairs that are no producer and consumer.

use super::*;
use crate::model::{
    Call, CallSet, Function, Label, Probe, Run, Session,
    testing::{call, function, run, thread},
};

const US: u64 = 1000;
const T1: u32 = 0;
const T2: u32 = 1;
const PUSH: u32 = 2;
const POP: u32 = 3;
const LOCK: u32 = 5;
const UNLOCK: u32 = 6;
const M: i64 = 0x5581_a022_3060;

fn sync(id: u32, name: &str) -> Function {
    Function { internal: true, probe: Probe::Sync, ..function(id, name) }
}

/// The functions of these runs; ids 4 (inc_top, one test's) left free.
fn functions() -> Vec<Function> {
    let mut f =
        vec![function(T1, "t1"), function(T2, "t2"), function(PUSH, "push"), function(POP, "pop")];
    f.push(function(4, "inc_top"));
    f.push(sync(LOCK, "pthread_mutex_lock@@GLIBC_2.2.5"));
    f.push(sync(UNLOCK, "pthread_mutex_unlock@@GLIBC_2.2.5"));
    f
}

/// t1 (role 1) pushing at the given (entry, exit) times, t2 (role 2)
/// likewise popping, each push and pop inside a critical section of one
/// mutex (locked 300 ns before it, unlocked 300 ns after it returned);
/// µs, None: never returned.
fn mk(
    id: u32,
    fail: bool,
    pushes: &[(u64, Option<u64>)],
    pops: &[(u64, Option<u64>)],
    end: u64,
) -> Run {
    let label = if fail { Label::Fail } else { Label::Pass };
    let done = if fail { None } else { Some(end * US - 1) };
    let mut calls: Vec<Call> = vec![
        call(T1, 1, 1, 5 * US, done, done.map(|_| 0)),
        call(T2, 2, 1, 6 * US, done, done.map(|_| 0)),
    ];
    for (func, role, list) in [(PUSH, 1, pushes), (POP, 2, pops)] {
        let mut unlocks = 0;
        for (k, &(a, b)) in list.iter().enumerate() {
            let (n, exit) = (k as u32 + 1, b.map(|b| b * US));
            calls.push(call(func, role, n, a * US, exit, exit.map(|_| 0)));
            calls.push(call(LOCK, role, n, a * US - 300, None, None).with_args([M, 0, 0]));
            if let Some(x) = exit {
                unlocks += 1;
                calls.push(call(UNLOCK, role, unlocks, x + 300, None, None).with_args([M, 0, 0]));
            }
        }
    }
    calls.sort_by_key(|c| c.entry_ns);
    run(id, label, calls, end * US).with_threads(vec![
        thread(0, "main"),
        thread(1, "t1"),
        thread(2, "t2"),
    ])
}

fn session(extra: Vec<Run>) -> Session {
    let mut runs = vec![
        // Each pop after a push it can take has returned: in turns, and
        // every push first.
        mk(
            0,
            false,
            &[(11, Some(12)), (20, Some(21)), (30, Some(31))],
            &[(14, Some(15)), (25, Some(26)), (35, Some(36))],
            50,
        ),
        mk(
            1,
            false,
            &[(11, Some(12)), (13, Some(14)), (15, Some(16))],
            &[(20, Some(21)), (22, Some(23)), (24, Some(25))],
            50,
        ),
        // The 2nd pop starts while the 2nd push still runs (the run ends
        // inside it), and the 3rd pop after two pushes.
        mk(2, true, &[(11, Some(12)), (16, None)], &[(14, Some(15)), (17, None)], 19),
        mk(
            3,
            true,
            &[(11, Some(12)), (20, Some(21))],
            &[(14, Some(15)), (24, Some(25)), (26, None)],
            28,
        ),
    ];
    runs.extend(extra);
    Session { functions: functions(), runs }
}

fn outrun_key() -> PredKey {
    PredKey {
        kind: Kind::Outruns,
        func: POP,
        calls: Calls::Group { class: 2, within: None },
        other: Some(Other { func: PUSH, calls: Calls::Group { class: 1, within: None } }),
        arg: 0,
        callee: None,
    }
}

#[test]
fn a_pop_that_starts_before_the_push_it_needs_has_returned_outruns_the_pushes() {
    let s = session(Vec::new());
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let id = c.find(&outrun_key()).expect("pop ahead of push is learned");
    let p = &c.predicates[id.0 as usize];
    assert_eq!(p.key.to_string(), "outruns:f3/c2+f2/c1");
    assert_eq!(p.condition, Condition::AheadOfProducer);
    assert_eq!(p.anchor, Anchor::Entry);
    assert_eq!(
        p.description,
        "some call of pop on t2 starts when no more calls of push on t1 have returned than calls of pop on t2 have started before it: pop runs ahead of push, which no passing run shows"
    );
    // Its locks wait while the pushing thread's body runs.
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldLocks {
            calls: CallSet { func: T2, roles: vec![2], instance: 0, within: None },
            while_running: CallSet { func: T1, roles: vec![1], instance: 0, within: None },
        })
    );
    // In both failing runs, at the pop that ran ahead (the 2nd in one, the
    // 3rd in the other); in no passing run.
    let truths: Vec<RunTruth> = s.runs.iter().map(|r| c.evaluate(r)).collect();
    assert_eq!(truths.iter().map(|t| t.holds(id)).collect::<Vec<_>>(), [false, false, true, true]);
    assert_eq!(truths[2].anchor(id), Some(17 * US));
    assert_eq!(truths[3].anchor(id), Some(26 * US));
    // The other direction (pushes "ahead" of pops) is every run's order:
    // no predicate.
    assert_eq!(c.predicates.iter().filter(|p| p.key.kind == Kind::Outruns).count(), 1);
}

/// A passing run whose first pop started before any push had returned
/// (it found the stack filled beforehand): pop does not consume what push
/// makes one for one, and nothing is learned.
#[test]
fn a_pair_whose_passing_runs_let_the_consumer_go_first_is_no_producer_and_consumer() {
    let early =
        mk(4, false, &[(11, Some(13)), (20, Some(21))], &[(12, Some(14)), (25, Some(26))], 50);
    let s = session(vec![early]);
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    assert!(c.find(&outrun_key()).is_none());
    assert!(c.predicates.iter().all(|p| p.key.kind != Kind::Outruns));
}

/// The count itself: a push still running when a pop starts has made
/// nothing yet; a pop that starts as the push before it returns (at the
/// same nanosecond) is ahead too.
#[test]
fn only_pushes_that_returned_before_a_pop_started_count_for_it() {
    let s = session(Vec::new());
    let classes = Classes::learn(&s.runs);
    let at = |r: &Run| {
        let idx = index::RunIndex::with_groups(r, |_| true, &classes, &Default::default());
        let g = |f: u32| *idx.by_group.keys().find(|g| g.0 == f).unwrap();
        outrun::outrun_at(&idx, &g(PUSH), &g(POP))
    };
    assert_eq!(at(&s.runs[0]), None);
    assert_eq!(at(&s.runs[2]), Some(17 * US));
    let tie = mk(5, true, &[(11, Some(14))], &[(14, Some(15))], 20);
    assert_eq!(at(&tie), Some(14 * US));
    let after = mk(6, true, &[(11, Some(13))], &[(14, Some(15))], 20);
    assert_eq!(at(&after), None);
}

/// Every push increments the stack's top in a traced call of its own, the
/// push's last step: "pop runs ahead of inc_top" holds in the same runs,
/// and the pair is named by the call the program's threads make, push.
#[test]
fn the_producer_is_named_by_the_call_around_its_last_step() {
    const INC: u32 = 4;
    let mut s = session(Vec::new());
    for r in &mut s.runs {
        let steps: Vec<Call> = r
            .calls
            .iter()
            .filter(|c| c.func == PUSH)
            .map(|c| {
                let exit = c.exit_ns.map(|x| x - 100);
                call(INC, c.role, c.instance, c.entry_ns + 100, exit, exit.map(|_| 0))
            })
            .collect();
        r.calls.extend(steps);
        r.calls.sort_by_key(|c| c.entry_ns);
    }
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let outruns: Vec<String> = c
        .predicates
        .iter()
        .filter(|p| p.key.kind == Kind::Outruns)
        .map(|p| p.key.to_string())
        .collect();
    assert_eq!(outruns, ["outruns:f3/c2+f2/c1"]);
}

/// Passing runs that pop once only kept no count: the failing runs' 2nd
/// pop ahead of the pushes is not learned from them.
#[test]
fn a_count_no_passing_run_kept_is_not_learned() {
    let pushes = [(11, Some(12)), (20, Some(21)), (30, Some(31))];
    let runs = vec![
        mk(0, false, &pushes, &[(14, Some(15))], 50),
        mk(1, false, &pushes, &[(25, Some(26))], 50),
        mk(2, true, &[(11, Some(12)), (16, None)], &[(14, Some(15)), (17, None)], 19),
    ];
    let c = learn(&Session { functions: functions(), runs }, &ExtractConfig::default()).unwrap();
    assert!(c.predicates.iter().all(|p| p.key.kind != Kind::Outruns));
}

/// The same runs without lock events (the pops not under a lock the
/// thread took, as far as the runs show): holding t2's locks would not
/// hold its pops, so the predicate is learned with no intervention.
#[test]
fn a_consumer_not_seen_under_a_lock_gets_no_intervention() {
    let mut s = session(Vec::new());
    for r in &mut s.runs {
        r.calls.retain(|c| c.func != LOCK && c.func != UNLOCK);
    }
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let id = c.find(&outrun_key()).expect("pop ahead of push is learned");
    assert_eq!(c.predicates[id.0 as usize].intervention, None);
}
