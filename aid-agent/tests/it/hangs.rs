//! Hangs end to end: a run all of whose threads wait for one another is
//! labelled failing with the reason `hang` within about `--hang-after`
//! (sooner when the waits form a cycle), ended, and saved with its
//! wait-for graph; a program that sleeps, spins or waits for a signal is
//! not hung; and `debug` with no flags diagnoses a lock-order deadlock
//! that happens only sometimes.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use crate::common::*;
use aid::{
    model::{Label, Wait},
    store,
};

/// `record -n 1` of hangs.c in `mode`, with `flags`: the session's one run
/// record (runs.jsonl) and how long the agent took.
fn record(mode: &str, flags: &[&str]) -> (store::RunRecord, Duration) {
    let exe = c_fixture("hangs.c", "hangs", &[]);
    let (_tmp, out) = temp_session();
    let started = Instant::now();
    run_ok(
        agent().args(["record", "-n", "1"]).args(flags).arg("--out").arg(&out).arg(&exe).arg(mode),
    );
    let took = started.elapsed();
    let loaded = store::load_full(&out).unwrap();
    assert_eq!(loaded.records.len(), 1);
    (loaded.records[0].clone(), took)
}

/// Two threads each holding the lock the other asks for, main joining the
/// first: labelled `hang` about `--hang-after` after the last one started
/// waiting (not at the 60 s timeout), with the graph: who waits for which
/// lock, who holds it, the cycle — with the sync points' events and
/// without them (the locks' owner fields then name the holders).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_deadlock_is_a_hang_with_its_wait_for_graph() {
    let _bpf = require_bpf();
    for sync in [false, true] {
        let mut flags = vec!["--hang-after", "300ms", "-t", "take_*"];
        if sync {
            flags.extend(["-t", "libc:pthread_mutex_lock", "-t", "libc:pthread_mutex_unlock"]);
        }
        let (rec, took) = record("deadlock", &flags);
        assert_eq!(rec.label, Label::Fail);
        assert_eq!(rec.outcome.reason, "hang");
        assert!(!rec.outcome.timed_out);
        assert!(took < Duration::from_secs(20), "took {took:?}");
        let g = rec.hang.expect("the wait-for graph is saved with the run");
        // A cycle of lock waits: a hang after CYCLE_CONFIRM (100 ms).
        assert!(g.waited_ns >= 100_000_000 && g.waited_ns < 5_000_000_000, "{}", g.waited_ns);
        let names: Vec<&str> = g.threads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["main", "take_a_then_b", "take_b_then_a"], "{g:?}");
        let [main, first, second] = &g.threads[..] else { panic!("{g:?}") };
        assert_eq!(main.waits, Wait::Join { thread: first.tid });
        assert!(main.holds.is_empty());
        let (
            Wait::Lock { addr: b, holder: Some(hb), left_by: None },
            Wait::Lock { addr: a, holder: Some(ha), left_by: None },
        ) = (&first.waits, &second.waits)
        else {
            panic!("{g:?}")
        };
        assert_eq!((*hb, *ha), (second.tid, first.tid));
        assert_eq!(first.holds, vec![a.clone()]);
        assert_eq!(second.holds, vec![b.clone()]);
        assert_eq!(first.in_call.as_deref(), Some("take_a_then_b"));
        assert_eq!(second.in_call.as_deref(), Some("take_b_then_a"));
        assert_eq!(g.cycle, vec![first.tid, second.tid]);
    }
}

/// Sleeping threads, a spinning thread, a process waiting for a signal:
/// none is a hang. The first two end normally (and pass); the last lasts
/// until the timeout and is still `timed out`.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn sleeping_spinning_and_waiting_for_a_signal_are_not_hangs() {
    let _bpf = require_bpf();
    for mode in ["sleep", "spin"] {
        let (rec, _) = record(mode, &["--hang-after", "200ms", "-t", "nap", "-t", "spin"]);
        assert_eq!(rec.label, Label::Pass, "{mode}: {:?}", rec.outcome);
        assert_eq!(rec.outcome.reason, "exit code 0");
        assert!(rec.outcome.wall_ns > 1_400_000_000, "{mode}: ended early");
        assert!(rec.hang.is_none());
    }
    let (rec, _) = record("pause", &["--hang-after", "200ms", "--timeout", "1500ms", "-t", "nap"]);
    assert_eq!(rec.label, Label::Fail);
    assert_eq!(rec.outcome.reason, "timed out");
    assert!(rec.outcome.timed_out && rec.hang.is_none());
    // `--hang-after 0s` watches for none: the deadlock lasts until the
    // timeout.
    let (rec, _) = record("deadlock", &["--hang-after", "0s", "--timeout", "1s", "-t", "take_*"]);
    assert_eq!(rec.outcome.reason, "timed out");
    assert!(rec.hang.is_none());
}

/// A lock-order deadlock that happens only sometimes (fixtures/
/// lock_order.c: two threads move money between two accounts, each
/// locking its source first), debugged as a new user would: no flags.
/// aid's noise makes it deadlock; each deadlocked run is a hang within
/// about a tenth of a second of the cycle forming (not the 60 s timeout),
/// and the root cause is the cycle. The corpus' deadlock01_bad is the
/// same bug in someone else's code: `cargo xtask corpus` measures it.
///
/// Acceptance: 2 of 3 sessions ([`DEADLOCK_SESSIONS`]). Measured per
/// session with the release agent (`debug ./lock_order`, 2026-11-30): 1
/// miss in 10 on 6674f44 (the start order of the cycle's calls named the
/// root, told apart since 5b6b263), 0 in 10 on 5b6b263; at a tenth per
/// session the test fails about 3 times in 100. Before 6674f44 the
/// round's own noise could stand in for the serialisation (1 session of
/// 3 with no cause here; the CI failure of 74eb4a3).
const DEADLOCK_SESSIONS: usize = 3;
const DEADLOCK_NEEDED: usize = 2;

/// One session; Ok when the root cause is the lock-order cycle of the two
/// threads' `move_money` calls.
fn deadlock_session(exe: &Path) -> Result<Duration, String> {
    let started = Instant::now();
    let (_tmp, _out, output) = debug_session(exe, &[] as &[&str]);
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let root = root_cause_line(&text);
    let right = output.status.success()
        && root.contains("move_money on payroll")
        && root.contains("move_money on refund")
        && root.contains("a lock-order cycle (deadlock)");
    if right {
        Ok(took)
    } else {
        Err(format!(
            "took {took:?}, exit {:?}, root cause line {root:?}\n{text}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_lock_order_deadlock_is_diagnosed_with_no_flags() {
    let _alone = alone();
    let exe = c_fixture("lock_order.c", "lock_order", &[]);
    sessions_right("lock_order", DEADLOCK_SESSIONS, DEADLOCK_NEEDED, || deadlock_session(&exe));
}
