//! `aid-agent debug --pid` on the two service examples (examples/svc-*),
//! as a user would run it on a staging box: the service was started
//! without aid, runs forever, and must keep serving, untraced, once aid is
//! done. Each test asserts the exact root cause aid reports (or, where it
//! cannot name the true one, exactly what it does report, as the
//! example's README says), then that the same process still runs, is not
//! ptraced, has no breakpoint left, and that its `[uprobes]` page did not
//! grow afterwards; finally the service is stopped with SIGTERM and must
//! exit 0 with its usual summary line.
//!
//! And a memory bound: `attach --unit` on a busy process for 60 s keeps
//! the agent's RSS under a stated bound (rows no open unit needs are
//! dropped).
//!
//! The services fail by themselves (random keys and timings), so the
//! sessions are not deterministic; the root causes asserted here are the
//! only fully discriminative, intervenable predicates their failures can
//! produce (see each README), and every session stops on its own: each
//! agent runs under `timeout`.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::*;

/// Longest a whole `debug --pid` session may take here.
const SESSION_LIMIT: &str = "900";

/// A service started as a user would, its one line of stderr (at exit)
/// in a file.
struct Service {
    bg: Background,
    exe: PathBuf,
    stderr: PathBuf,
}

fn start(exe: &Path, dir: &Path) -> Service {
    let stderr = dir.join("service.stderr");
    let child = Command::new(exe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    // Let it warm its cache and start serving.
    std::thread::sleep(Duration::from_millis(500));
    Service { bg: Background(child), exe: exe.to_owned(), stderr }
}

/// `aid-agent debug --pid` with `args`, bounded in time; its exit code,
/// stdout and the report's path (predicates in words).
fn debug(pid: u32, args: &[&str], out: &Path) -> (Option<i32>, String, Vec<String>) {
    let output = Command::new("timeout")
        .arg(SESSION_LIMIT)
        .arg(env!("CARGO_BIN_EXE_aid-agent"))
        .args(["debug", "--pid", &pid.to_string(), "--unit", "handle_request"])
        .args(["--fail-if", "handle_request ret < 0"])
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(124), "the session overran {SESSION_LIMIT} s: {stderr}");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json"))
            .unwrap_or_else(|e| panic!("no report.json ({e}); stdout: {text}\nstderr: {stderr}")),
    )
    .unwrap();
    let path = report["path"]
        .as_array()
        .map(|p| p.iter().map(|l| l["predicate"].as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default();
    (output.status.code(), format!("{text}\n{stderr}"), path)
}

fn uprobes_pages(pid: u32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.ends_with("[uprobes]"))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
        .collect()
}

fn voluntary_switches(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The service outlived the agent as it was: running, not stopped, not
/// ptraced, no breakpoint left in `traced` functions, its `[uprobes]` page
/// (made at its first breakpoint hit) at most one and not growing, still
/// serving (a request every 2 ms sleeps in between: voluntary context
/// switches keep coming); then SIGTERM ends it with exit 0 and its line.
fn assert_still_serving(svc: Service, traced: &[&str], name: &str) {
    let pid = svc.bg.pid();
    assert_untouched(pid, name);
    for f in traced {
        let addr = runtime_address(pid, &svc.exe, f);
        assert_ne!(code_byte(pid, addr), 0xcc, "{name}: a breakpoint is left in {f}");
    }
    let pages = uprobes_pages(pid);
    assert!(pages.len() <= 1, "{name}: {pages:?}");
    let switches = voluntary_switches(pid);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(uprobes_pages(pid), pages, "{name}: the [uprobes] mapping changed after aid left");
    let served = voluntary_switches(pid) - switches;
    assert!(served >= 100, "{name}: only {served} sleeps in 1 s: is it still serving?");
    assert_untouched(pid, name);
    signal(pid, nix::sys::signal::Signal::SIGTERM);
    let mut bg = svc.bg;
    let status = bg.0.wait().unwrap();
    assert!(status.success(), "{name} exited with {status}");
    let line = std::fs::read_to_string(&svc.stderr).unwrap();
    let rx = regex::Regex::new(&format!(r"^{name}: \d+ requests, \d+ failed\n$")).unwrap();
    assert!(rx.is_match(&line), "{name} said: {line:?}");
}

/// svc-stale-cache (own-thread transient fault, its good value depending
/// on the request) with no `--trace` and the three functions its README
/// lists as side-effect free declared `--safe`. The backend timeout is in
/// every failing unit and in some passing ones (a timeout on a plain read
/// is served from the cache and passes): a necessary-only candidate
/// (docs/causal.md), confirmed by re-executing the fetch, upstream of
/// `validate_response` rejecting the stale value. The conjunct that decides
/// which timeouts fail (the client has just written the key) is outside
/// the unit and is not named; the report says the cause is not sufficient
/// on its own.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn svc_stale_cache_confirms_the_timeout_then_the_stale_value_rejected() {
    let _alone = alone();
    let tmp = tempfile::tempdir().unwrap();
    let exe = example("svc-stale-cache");
    let svc = start(&exe, tmp.path());
    let out = tmp.path().join("session");
    let safe = ["--safe", "backend_fetch", "--safe", "cache_get", "--safe", "validate_response"];
    let (code, text, path) = debug(svc.bg.pid(), &safe, &out);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        path,
        vec![
            "call 1 of backend_fetch on main returns an error: a negative value",
            "call 1 of validate_response on main returns a value other than 0, which every passing run returned"
        ],
        "{text}"
    );
    assert!(
        text.contains("necessary for the failure, not sufficient on its own"),
        "the report says the timeout alone does not fail a unit: {text}"
    );
    // The timeout was in every failing unit, and in some passing ones.
    let session = load(&out);
    let fetch = session.functions.iter().position(|f| f.name == "backend_fetch").unwrap() as u32;
    let observed: Vec<_> = session.runs.iter().filter(|r| r.interventions.is_empty()).collect();
    let timed_out =
        |r: &&aid::model::Run| r.calls.iter().any(|c| c.func == fetch && c.ret == Some(-110));
    let failing: Vec<_> = observed.iter().filter(|r| r.label == aid::model::Label::Fail).collect();
    assert!(!failing.is_empty());
    assert!(failing.iter().all(|r| timed_out(r)), "a failing unit without a backend timeout");
    assert!(
        observed.iter().any(|r| r.label == aid::model::Label::Pass && timed_out(r)),
        "no passing unit with a backend timeout among {} observed",
        observed.len()
    );
    assert_still_serving(svc, &["handle_request", "backend_fetch"], "svc-stale-cache");
}

/// svc-compaction (cross-thread cause) with the lock the requests try
/// traced beside the store's functions: the compaction running on the
/// compactor thread overlaps the request's trylock on the same segment,
/// confirmed live by serialising the two across threads.
///
/// The overlap is measured between the probes at `compact_segment`'s entry
/// and exit, and the lock is taken and released a few instructions inside
/// them: on a loaded machine a compactor preempted in between lets a
/// request's trylock succeed "during" the compaction, and then the overlap
/// is no longer in every failing unit *only*. Acceptance rule: **at least
/// one of two sessions reports exactly this root cause** (each session's
/// outcome is printed); the service checks hold after every session.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn svc_compaction_confirms_the_compaction_holding_the_segment() {
    let _alone = alone();
    let trace = ["-t", "segment_*", "-t", "compact_segment", "-t", "libc:pthread_mutex_trylock"];
    let want = "call 1 of compact_segment on svc-compaction and call 1 of pthread_mutex_trylock on main run at the same time on the same object, which no passing run shows";
    let mut outcomes = Vec::new();
    for session in 1..=2 {
        let tmp = tempfile::tempdir().unwrap();
        let exe = example("svc-compaction");
        let svc = start(&exe, tmp.path());
        let out = tmp.path().join("session");
        let (code, text, path) = debug(svc.bg.pid(), &trace, &out);
        let exact = code == Some(0) && path == [want];
        eprintln!("session {session}: exit {code:?}, path {path:?}");
        if exact {
            // The rounds intervened on later units of the same process.
            assert!(load(&out).runs.iter().any(|r| !r.interventions.is_empty()));
        }
        outcomes.push((exact, text));
        assert_still_serving(svc, &["handle_request", "compact_segment"], "svc-compaction");
        if exact {
            return;
        }
    }
    panic!("no session reported the root cause: {outcomes:#?}");
}

/// svc-compaction with no `--trace` (the program's own functions): every
/// failing unit contains the compaction the compactor thread was running
/// when the request came, on the request's segment — units see the other
/// threads — but GETs and PUTs fail through different functions, so when
/// the failing units observed include both, no single predicate holds in
/// every failing unit and no cause is tested (exit 1): the finding the
/// README states. When they happen to be all GETs (72 % of failures are
/// GETs: 0.72^9, about 5 % of sessions; 1 in 40 measured) or all PUTs, the
/// overlap with that one function is in every observed failing unit and
/// is tested, but serialising it leaves the other kind's failures: a unit
/// under the intervention fails through the other function, the round
/// persists, and no cause is confirmed (exit 1) — correctly, since that
/// overlap is not behind every failure. The test then asserts that
/// instead.
///
/// Failing units return at once (the segment is busy), so "call 1 of
/// handle_request on main runs too fast" often separates the units too
/// (3 of 8 sessions on 2026-12-06). Its intervention, a delay before the
/// unit function returns, acts after the unit's outcome is decided, so it
/// is left out (`after_outcome`) and "No predicate both held ..." stands.
/// Before, it was tested, the failure persisted and the report said "No
/// cause was confirmed" (fresh-clone CIs of 2026-12-05 and
/// 2026-12-06 failed on that).
///
/// Whole sessions on a timing bug, like the other two service sessions
/// here, run alone (`alone`): CI on 5f80310 ran this one beside
/// `a_busy_attach_keeps_agent_memory_bounded`, which keeps another
/// service busy, and saw 3 failing units in 200 and 5 of 57 control
/// units, too rare to start a round ("No cause was tested", a finding
/// this test does not foresee); 8 sessions alone here, all as above.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn svc_compaction_without_trace_sees_the_compaction_but_tests_no_cause() {
    let _alone = alone();
    let tmp = tempfile::tempdir().unwrap();
    let exe = example("svc-compaction");
    let svc = start(&exe, tmp.path());
    let out = tmp.path().join("session");
    let (code, text, path) = debug(svc.bg.pid(), &[], &out);
    let session = load(&out);
    let id = |name: &str| session.functions.iter().position(|f| f.name == name).unwrap() as u32;
    let (compact, get, put) = (id("compact_segment"), id("segment_get"), id("segment_put"));
    let failing: Vec<_> = session
        .runs
        .iter()
        .filter(|r| r.label == aid::model::Label::Fail && r.interventions.is_empty())
        .collect();
    assert!(!failing.is_empty(), "{text}");
    let mut kinds = std::collections::BTreeSet::new();
    for run in &failing {
        let request = run
            .calls
            .iter()
            .find(|c| c.role == 0 && (c.func == get || c.func == put))
            .expect("a failing request reads or writes a segment");
        kinds.insert(request.func);
        let compaction = run.calls.iter().find(|c| {
            c.func == compact
                && c.role != 0
                && c.args[0] == request.args[0]
                && c.entry_ns <= request.entry_ns
                && c.exit_ns.is_none_or(|x| x >= request.entry_ns)
        });
        assert!(compaction.is_some(), "unit {} has no compaction on its segment", run.id);
    }
    if kinds.len() == 2 {
        assert_eq!(code, Some(1), "{text}");
        assert!(path.is_empty(), "{text}");
        assert!(text.contains("No predicate both held in every failing unit"), "{text}");
    } else {
        assert_eq!(code, Some(1), "{text}");
        assert!(path.is_empty(), "{text}");
        assert!(text.contains("No cause was confirmed"), "{text}");
        let other = if kinds.contains(&get) { put } else { get };
        let through_other = session.runs.iter().any(|r| {
            r.label == aid::model::Label::Fail
                && !r.interventions.is_empty()
                && r.calls.iter().any(|c| c.role == 0 && c.func == other)
        });
        // What each intervened failing unit called, for a miss to be read.
        let intervened: Vec<String> = session
            .runs
            .iter()
            .filter(|r| r.label == aid::model::Label::Fail && !r.interventions.is_empty())
            .map(|r| {
                let called = |f| r.calls.iter().any(|c| c.role == 0 && c.func == f);
                format!(
                    "unit {}: get {}, put {}, interventions {:?}",
                    r.id,
                    called(get),
                    called(put),
                    r.interventions
                )
            })
            .collect();
        assert!(
            through_other,
            "no intervened unit failed through the other function: {intervened:#?}\n{text}"
        );
    }
    assert_still_serving(svc, &["handle_request", "compact_segment"], "svc-compaction");
}

/// Memory stays bounded on a busy process: `attach --unit` for 60 s of
/// about 500 units and 20,000 traced calls a second (the busy_service
/// fixture, the rate of issue 12's measurement). What is measured is the
/// agent's own memory, `RssAnon`: the kernel's ring buffer (128 MiB,
/// mapped by the agent) counts in `RssFile` once its pages have been
/// cycled through, a fixed amount. Acceptance rule, on samples every
/// second: `RssAnon` never exceeds 128 MiB, and its highest value in the
/// last 30 s is within 32 MiB of its highest between 10 s and 30 s (before
/// this change the agent kept every row: 19 MB to 446 MB in 120 s at this
/// rate). The 10-minute run: BENCHMARKS.md ("Live sessions").
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_busy_attach_keeps_agent_memory_bounded() {
    let _bpf = require_bpf();
    let exe = c_fixture("busy_service.c", "busy_service", &["-O1"]);
    let child = Command::new(&exe).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let svc = Background(child);
    std::thread::sleep(Duration::from_millis(300));
    let (_tmp, out) = temp_session();
    let mut agent = Command::new("timeout")
        .arg("300")
        .arg(env!("CARGO_BIN_EXE_aid-agent"))
        .args(["attach", "--pid", &svc.pid().to_string(), "-t", "step", "-t", "tick"])
        .args(["--unit", "handle_request", "--fail-if", "handle_request ret < 0", "-d", "60s"])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `timeout` runs the agent as its child.
    let began = Instant::now();
    let agent_pid = loop {
        if let Some(p) = children_of(agent.id()).first() {
            break *p;
        }
        assert!(began.elapsed() < Duration::from_secs(5), "the agent did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    let anon_kib = |pid: u32| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    let mut samples = Vec::new();
    while agent.try_wait().unwrap().is_none() {
        if let Some(kib) = anon_kib(agent_pid) {
            samples.push((began.elapsed().as_secs(), kib));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let status = agent.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut agent.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    let units = load(&out).runs.len();
    assert!(units > 60 * 250, "only {units} units in 60 s: not the busy process this bounds");
    eprintln!("agent RssAnon (s, KiB): {samples:?}; {units} units");
    let highest = |lo: u64, hi: u64| {
        samples.iter().filter(|s| s.0 >= lo && s.0 < hi).map(|s| s.1).max().unwrap_or(0)
    };
    let max = highest(0, u64::MAX);
    let (early, late) = (highest(10, 30), highest(30, u64::MAX));
    assert!(max <= 128 * 1024, "RssAnon reached {max} KiB: {samples:?}");
    assert!(late <= early + 32 * 1024, "RssAnon grew from {early} KiB to {late}: {samples:?}");
    assert_untouched(svc.pid(), "busy_service");
}
