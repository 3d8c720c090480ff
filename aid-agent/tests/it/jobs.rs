//! Parallel runs on one host (`--jobs N`): runs made at once, each with
//! probes of its own, numbered and stored as one at a time would be.

use std::path::{Path, PathBuf};

use crate::common::*;
use aid::model::{Label, Run, Session};

/// The pid of a run: its main thread's.
fn pid(run: &Run) -> u32 {
    run.threads.iter().find(|t| t.role == 0).map(|t| t.tid).expect("a main thread")
}

/// Every call of `name` in `run`.
fn calls<'a>(s: &'a Session, run: &'a Run, name: &str) -> Vec<&'a aid::model::Call> {
    run.calls.iter().filter(|c| s.functions[c.func as usize].name == name).collect()
}

/// Each run saw only its own process: one thread, and every call of `tag`
/// (whose argument is the caller's pid) made by that process; at least
/// `min_tags` of them.
fn assert_own_events(s: &Session, min_tags: usize) {
    let mut pids: Vec<u32> = Vec::new();
    for r in &s.runs {
        assert_eq!(r.threads.len(), 1, "run {}: {:?}", r.id, r.threads);
        let tags = calls(s, r, "tag");
        assert!(tags.len() >= min_tags, "run {}: {} calls of tag", r.id, tags.len());
        for c in tags {
            assert_eq!(c.args[0], i64::from(pid(r)), "run {}: a call of another process", r.id);
        }
        pids.push(pid(r));
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), s.runs.len(), "one process per run");
}

/// The fixture, a temporary directory with the session's path in it,
/// and the empty folder in it where the fixture's processes meet.
fn jobs_fixture() -> (PathBuf, tempfile::TempDir, PathBuf, PathBuf) {
    let exe = c_fixture("jobs.c", "jobs", &[]);
    let (tmp, out) = temp_session();
    let meet = tmp.path().join("meet");
    std::fs::create_dir(&meet).unwrap();
    (exe, tmp, out, meet)
}

/// What each call of `met` in `run` returned: how many processes it met.
fn met(s: &Session, run: &Run) -> Vec<Option<i64>> {
    calls(s, run, "met").iter().map(|c| c.ret).collect()
}

/// `session.json`'s `jobs`.
fn jobs_in_header(out: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(out.join("session.json")).unwrap();
    let header: serde_json::Value = serde_json::from_str(&text).unwrap();
    header.get("jobs").and_then(serde_json::Value::as_u64)
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn record_jobs_makes_runs_at_once_each_with_its_own_events() {
    let _bpf = require_bpf();
    let (exe, _tmp, out, meet) = jobs_fixture();
    let output = run_ok(
        agent()
            .args(["record", "--jobs", "2", "--runs", "4", "-t", "tag", "-t", "met", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg(&meet)
            .arg("2"),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("recorded 4 run(s) of "), "{stdout}");
    let s = load(&out);
    let ids: Vec<u32> = s.runs.iter().map(|r| r.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    for r in &s.runs {
        assert_eq!(r.label, Label::Pass, "run {}: {}", r.id, r.outcome.reason);
        assert!(r.complete && r.lost_events == 0, "run {}", r.id);
        let met = met(&s, r);
        // Runs 1 and 2 start together and meet each other; a later run
        // finds their files too.
        if r.id <= 2 {
            assert_eq!(met, [Some(2)], "run {}", r.id);
        } else {
            assert!(met.len() == 1 && met[0] >= Some(2), "run {}: {met:?}", r.id);
        }
    }
    assert_own_events(&s, 21);
    assert_eq!(jobs_in_header(&out), Some(2));
}

/// Two runs under ptrace at once, each served by its own thread: a wait
/// that reaped any tracee of the agent would take one run's stops (or its
/// exit) for the other's, and that run's interventions would not apply.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn two_controlled_runs_at_once_keep_their_own_stops() {
    let _bpf = require_bpf();
    let (exe, tmp, out, meet) = jobs_fixture();
    let plan_path = tmp.path().join("plan.json");
    // checked (function 1) returns 42; tag's third call (function 0) is
    // held 50 ms before it returns.
    let plan = r#"[{"kind":"override_return","site":{"func":1,"role":0,"instance":1},"value":42},
                   {"kind":"delay_exit","site":{"func":0,"role":0,"instance":3},"delay_us":50000}]"#;
    std::fs::write(&plan_path, plan).unwrap();
    run_ok(
        agent()
            .args(["intervene", "--jobs", "2", "--runs", "2", "-t", "tag", "-t", "checked"])
            .arg("--plan")
            .arg(&plan_path)
            .arg("--out")
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg(&meet)
            .arg("2")
            .arg("checked"),
    );
    let s = load(&out);
    assert_eq!(s.runs.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2]);
    for r in &s.runs {
        assert_eq!((r.label, r.outcome.exit_code), (Label::Pass, Some(0)), "run {}", r.id);
        assert_eq!(r.interventions.len(), 2);
        assert!(r.interventions.iter().all(|a| a.applied && !a.timed_out), "run {}", r.id);
        assert_eq!(calls(&s, r, "checked")[0].ret, Some(42));
        let third = calls(&s, r, "tag")[2];
        let held = third.duration_ns().unwrap();
        assert!((50_000_000..1_000_000_000).contains(&held), "run {}: tag held {held} ns", r.id);
    }
    assert_own_events(&s, 21);
}

/// `debug --jobs 2` observes two runs at once: runs 1 and 2 meet. Every
/// run passes, so the session ends saying no run failed; its runs are
/// kept, numbered in order.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn debug_jobs_observes_runs_at_once() {
    let _bpf = require_bpf();
    let (exe, _tmp, out, meet) = jobs_fixture();
    let output = agent()
        .args(["debug", "--jobs", "2", "--runs", "4", "-t", "tag", "-t", "met", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(&meet)
        .arg("2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no run failed in 4 runs"), "{stderr}");
    let s = load(&out);
    assert_eq!(s.runs.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2, 3, 4]);
    for r in &s.runs[..2] {
        let met = met(&s, r);
        assert_eq!(met, [Some(2)], "run {}", r.id);
    }
    assert_own_events(&s, 21);
    assert_eq!(jobs_in_header(&out), Some(2));
}

/// Ctrl-C with two runs in flight: both are ended, kept and marked
/// interrupted (never evidence); no run starts after it.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn ctrl_c_keeps_every_run_in_flight_marked_interrupted() {
    let _bpf = require_bpf();
    let (exe, _tmp, out, meet) = jobs_fixture();
    // Three to meet, two at a time: both runs wait (3 s at most).
    let mut child = agent()
        .args(["record", "--jobs", "2", "--runs", "4", "-t", "tag", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg(&meet)
        .arg("3")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let both = wait_for(20, || std::fs::read_dir(&meet).map_or(0, Iterator::count) == 2);
    signal(child.id(), nix::sys::signal::Signal::SIGINT);
    if !both {
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    assert!(both, "two runs at once");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.starts_with("recorded 2 run(s) of "), "{stdout}");
    let s = load(&out);
    assert_eq!(s.runs.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2]);
    for r in &s.runs {
        assert!(!r.complete, "run {}", r.id);
        assert_eq!(r.outcome.reason, "interrupted by the user");
        assert!(wait_for(5, || !alive(pid(r))), "run {}'s target was ended", r.id);
    }
    // Interrupted as soon as both had started: the second may not have
    // called tag yet.
    assert_own_events(&s, 0);
}

#[test]
fn jobs_zero_or_with_a_pid_is_refused() {
    let line = run_err(agent().args(["record", "--jobs", "0", "--", "/bin/true"]));
    assert_eq!(line, "aid: --jobs 0 makes no runs: give at least 1 (runs made at once)");
    let line = run_err(agent().args([
        "debug",
        "--jobs",
        "2",
        "-p",
        "1",
        "--unit",
        "f",
        "--fail-if",
        "f ret < 0",
    ]));
    assert!(line.starts_with("aid: --jobs is for a program aid starts"), "{line}");
}
