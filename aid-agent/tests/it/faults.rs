//! The fault suite (issue 8): what happens to the target, the probes, the
//! session and the user when things go wrong. Each test says the target's
//! fate (running, not stopped, not ptraced — or, when aid ended it, ended),
//! that no probe is left behind, that nothing recorded is lost, and the
//! message the user sees. Faults covered elsewhere: SIGKILL during a hold
//! (`interventions::a_held_target_ends_with_the_killed_agent`),
//! SIGKILL and Ctrl-C of `attach` (`tracer::agent_sigkill_leaves_target_running_and_untraced`,
//! `tracer::ctrl_c_detaches_and_keeps_what_was_recorded`), a ring buffer
//! overflowed by five million calls (`tracer::lost_events_are_counted_and_runs_marked_incomplete`),
//! a target hanging past the timeout (`tracer::fail_rules_exit_code_output_and_timeout`),
//! stripped and non-ELF programs (`tracer::error_stripped_binary`,
//! `tracer::error_not_elf`), forked children (`scope::forked_child_of_the_target_runs_untraced_and_unharmed`).
//! docs/guarantees.md lists every promise with its test.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::*;
use aid::model::{Label, Session};
use nix::sys::signal::Signal;

fn faults() -> PathBuf {
    c_fixture("faults.c", "faults", &[])
}

/// `aid-agent ARGS` in the background with stderr piped.
fn spawn_agent(args: &[&str], out: &Path, command: &[&std::ffi::OsStr]) -> Child {
    agent()
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--")
        .args(command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Everything the agent wrote to stderr once it has exited, and its code.
fn finish(child: Child) -> (Option<i32>, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The target of a run in progress and where `symbol` is in it: the
/// agent's child once it has exec'd the fixture (before that, the child is
/// the agent's copy) and mapped its code.
fn target_of(agent: &Child, exe: &Path, symbol: &str) -> (u32, u64) {
    let mut found = None;
    assert!(
        wait_for(20, || {
            // The run under way, once its code is mapped: not the previous
            // run's process on its way out (its exe link outlives its
            // mappings), nor this one halfway through its exec (the first
            // segment is mapped before the one holding the code).
            found = children_of(agent.id())
                .into_iter()
                .find_map(|c| mapped_address(c, exe, symbol).map(|a| (c, a)));
            found.is_some()
        }),
        "the agent never started the target"
    );
    found.unwrap()
}

/// A `debug` killed by `timeout` (SIGKILL) while a run it had started hung
/// left that program running, hung, with no parent to end it: the program
/// aid started ends with the agent, and the runs finished before are kept.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn agent_sigkill_during_observation_ends_the_target_it_started() {
    let _bpf = require_bpf();
    let exe = faults();
    let (tmp, out) = temp_session();
    let progress = tmp.path().join("progress");
    // Two runs that time out (and are kept), then the third is cut short
    // by the agent's death. Each run has 3 s: the test finds the third
    // run's target, sees it probed and kills the agent within that. With
    // 700 ms, a CI run of afb11ea on a loaded machine saw the third run
    // time out and its target end before the test read its code (EIO).
    let agent_proc = spawn_agent(
        &["record", "-t", "add3", "--runs", "3", "--timeout", "3s"],
        &out,
        &[exe.as_os_str(), "chatty".as_ref(), progress.as_os_str()],
    );
    assert!(wait_for(30, || load_quietly(&out).is_some_and(|s| s.runs.len() == 2)));
    let mut agent_proc = agent_proc;
    let (target, addr) = target_of(&agent_proc, &exe, "add3");
    assert!(wait_for(5, || code_byte(target, addr) == 0xcc), "probed while observed");
    agent_proc.kill().unwrap();
    agent_proc.wait().unwrap();
    let gone = wait_for(5, || !alive(target));
    if !gone {
        signal(target, Signal::SIGKILL);
    }
    assert!(gone, "the target outlived the agent by 5 s (state {})", proc_state(target));
    // Nothing finished is lost.
    let s = load(&out);
    assert_eq!(s.runs.len(), 2);
    assert!(s.runs.iter().all(|r| r.outcome.timed_out && r.label == Label::Fail));
    assert!(s.runs.iter().all(|r| !r.calls.is_empty()));
}

/// The session as written so far, or None while it is not readable yet.
fn load_quietly(out: &Path) -> Option<Session> {
    aid::store::load(out).ok()
}

/// `attach` is killed the moment its probes are unregistered (the breakpoint
/// byte is back), while it waits for the kernel to finish removing them.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn agent_sigkill_while_probes_are_removed() {
    let _bpf = require_bpf();
    let exe = c_fixture("service.c", "service_removal", &[]);
    let (svc, _) = serving(&mut Command::new(&exe));
    let addr = runtime_address(svc.pid(), &exe, "handle_request");
    let original = code_byte(svc.pid(), addr);
    let (_tmp, out) = temp_session();
    let mut agent_proc = agent()
        .args(["attach", "--pid", &svc.pid().to_string(), "--unit", "handle_request"])
        .args(["-t", "lookup", "--duration", "1s", "--out"])
        .arg(&out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(10, || code_byte(svc.pid(), addr) == 0xcc), "probes attached");
    // Removal starts after the duration: kill as soon as the byte is back.
    let deadline = Instant::now() + Duration::from_secs(20);
    while code_byte(svc.pid(), addr) == 0xcc {
        assert!(Instant::now() < deadline, "the probes were never removed");
        std::hint::spin_loop();
    }
    let still_running = agent_proc.try_wait().unwrap().is_none();
    agent_proc.kill().unwrap();
    let status = agent_proc.wait().unwrap();
    assert!(still_running, "the agent had already exited: the kill did not land in teardown");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
    std::thread::sleep(Duration::from_millis(50));
    assert_untouched(svc.pid(), "after SIGKILL during probe removal");
    assert_eq!(code_byte(svc.pid(), addr), original, "no breakpoint left");
    // The units stored before the kill are readable.
    assert!(load(&out).runs.len() > 10);
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn ctrl_c_during_start_up_exits_130_with_a_readable_session() {
    let _bpf = require_bpf();
    let exe = faults();
    let (_tmp, out) = temp_session();
    let agent_proc = spawn_agent(
        &["record", "-t", "add3", "--runs", "5"],
        &out,
        &[exe.as_os_str(), "threads".as_ref(), "2".as_ref()],
    );
    // Loading the eBPF object takes far longer than this.
    std::thread::sleep(Duration::from_millis(30));
    signal(agent_proc.id(), Signal::SIGINT);
    let (code, _, stderr) = finish(agent_proc);
    assert_eq!(code, Some(130), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("aid: interrupted; the "), "{stderr}");
    assert!(last.ends_with(" run(s) recorded so far are saved"), "{stderr}");
    let s = load(&out);
    assert!(s.runs.len() <= 1, "stopped at once: {} runs", s.runs.len());
    assert!(stderr.contains(&format!("the {} run(s)", s.runs.len())), "{stderr}");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn ctrl_c_during_a_run_keeps_it_marked_interrupted() {
    let _bpf = require_bpf();
    let exe = faults();
    let (tmp, out) = temp_session();
    let progress = tmp.path().join("progress");
    let agent_proc = spawn_agent(
        &["record", "-t", "add3", "--runs", "3", "--timeout", "60s"],
        &out,
        &[exe.as_os_str(), "chatty".as_ref(), progress.as_os_str()],
    );
    let (target, _) = target_of(&agent_proc, &exe, "add3");
    assert!(wait_for(20, || read_count(&progress) >= 20));
    signal(agent_proc.id(), Signal::SIGINT);
    let (code, stdout, stderr) = finish(agent_proc);
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(
        stderr.lines().last(),
        Some("aid: interrupted; the 1 run(s) recorded so far are saved"),
        "{stderr}"
    );
    assert!(stdout.starts_with("recorded 1 run(s) of "), "{stdout}");
    // aid ended its own run (the target is aid's to end), and kept it.
    assert!(wait_for(5, || !alive(target)), "the interrupted run's target was ended");
    let s = load(&out);
    assert_eq!(s.runs.len(), 1);
    assert!(!s.runs[0].complete);
    assert_eq!(s.runs[0].outcome.reason, "interrupted by the user");
    assert!(s.runs[0].calls.len() >= 20);
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn ctrl_c_while_debug_observes_names_what_is_saved() {
    let _bpf = require_bpf();
    let exe = faults();
    let (_tmp, out) = temp_session();
    let agent_proc = spawn_agent(
        &["debug", "-t", "prepare", "-t", "consume", "--runs", "100"],
        &out,
        &[exe.as_os_str(), "slow-flaky".as_ref()],
    );
    assert!(wait_for(60, || load_quietly(&out).is_some_and(|s| s.runs.len() >= 2)));
    signal(agent_proc.id(), Signal::SIGINT);
    let (code, _, stderr) = finish(agent_proc);
    assert_eq!(code, Some(130), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("aid: interrupted while observing: the "), "{stderr}");
    assert!(last.contains(&format!("are saved in {}", out.display())), "{stderr}");
    let n = load(&out).runs.len();
    assert!(n >= 2 && last.contains(&format!("the {n} run(s) so far")), "{n}: {stderr}");
}

/// `debug` on the faults fixture's flaky mode, once it intervenes (after
/// a round or two): the agent, its stderr after "intervening with", and
/// how many runs it observed.
///
/// The interrupt must land while the session intervenes. A session can
/// end before that: the confidence asked for makes a first round long, and
/// when the control runs fail less often than the observed ones (5 of 14,
/// 36 %, against 38 %: 2026-11-30, `faults::` with `--test-threads 2`), it
/// needs more runs than aid starts a round for, so none is started and
/// `debug` ends ("no intervention round is started, the failure being too
/// rare under the agent's control"). The test then waited 60 s for runs
/// that could not come: in CI on 130affd, and in 2 of 5 passes of
/// `faults::` here (1 of 5 with a build of 2026-11-29). Such a session is
/// no case of the behaviour under test: it is started again, at most
/// [`INTERVENING_TRIES`] times, its output printed.
fn debug_until_intervening(
    out: &Path,
) -> (Child, BufReader<std::process::ChildStderr>, usize, String) {
    for _ in 1..INTERVENING_TRIES {
        match try_debug_until_intervening(out) {
            Ok(found) => return found,
            Err(ended) => {
                eprintln!("debug ended before it could be interrupted, started again:\n{ended}");
                let _ = std::fs::remove_dir_all(out);
            }
        }
    }
    try_debug_until_intervening(out).unwrap_or_else(|ended| panic!("debug ended early: {ended}"))
}

/// Sessions [`debug_until_intervening`] starts before it gives up.
const INTERVENING_TRIES: usize = 3;

/// One try of [`debug_until_intervening`]; what the agent wrote, when it
/// ended before the interrupt could land in a round.
fn try_debug_until_intervening(
    out: &Path,
) -> Result<(Child, BufReader<std::process::ChildStderr>, usize, String), String> {
    let exe = faults();
    let mut agent_proc = spawn_agent(
        &[
            "debug",
            "-t",
            "prepare",
            "-t",
            "publish",
            "-t",
            "consume",
            "--min-runs",
            "6",
            // Long rounds, so that the interrupt lands in one.
            "--confidence",
            "0.9999999",
        ],
        out,
        &[exe.as_os_str(), "flaky".as_ref()],
    );
    let mut stderr = BufReader::new(agent_proc.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let _ = agent_proc.wait();
            return Err(seen);
        }
        seen.push_str(&line);
        if line.starts_with("aid: intervening with") {
            break;
        }
    }
    let observed = load(out).runs.len();
    // Let a round or two run.
    let mut ended = false;
    assert!(wait_for(60, || {
        ended = matches!(agent_proc.try_wait(), Ok(Some(_)));
        ended || load_quietly(out).is_some_and(|s| s.runs.len() >= observed + 3)
    }));
    if ended {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        return Err(seen + &rest);
    }
    Ok((agent_proc, stderr, observed, seen))
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn ctrl_c_while_debug_intervenes_prints_the_partial_report() {
    let _bpf = require_bpf();
    let (_tmp, out) = temp_session();
    let (agent_proc, mut stderr, observed, seen) = debug_until_intervening(&out);
    signal(agent_proc.id(), Signal::SIGINT);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let (code, stdout, _) = finish(agent_proc);
    assert_eq!(code, Some(130), "{seen}{rest}");
    assert!(
        rest.lines().last().unwrap_or_default().starts_with(
            "aid: interrupted while intervening: the report above holds only what was confirmed before; every run is saved in "
        ),
        "{rest}"
    );
    // The report module's report, for what was known.
    assert!(
        stdout.contains("Session and report (report.html, report.json, dag.dot): "),
        "{stdout}"
    );
    assert!(out.join("report.json").exists());
    assert!(load(&out).runs.len() > observed);
}

/// Whether `pid` has a process-wide signal pending (`ShdPnd`), i.e. one
/// sent with kill(2) and not yet delivered to any thread.
fn shared_pending(pid: u32, sig: Signal) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("ShdPnd:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig as i32 - 1)) != 0)
}

/// Two Ctrl-C in a row (as GNU `timeout` and impatient users send) used
/// to exit 130 at once, with no partial report: the second is noted and
/// the stop goes on, so the report of what was confirmed is still printed
/// and written.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_second_ctrl_c_still_writes_the_partial_report() {
    let _bpf = require_bpf();
    let (_tmp, out) = temp_session();
    let (agent_proc, mut stderr, observed, seen) = debug_until_intervening(&out);
    signal(agent_proc.id(), Signal::SIGINT);
    // The second once the first is delivered (two pending SIGINTs are one).
    assert!(wait_for(10, || !shared_pending(agent_proc.id(), Signal::SIGINT)));
    signal(agent_proc.id(), Signal::SIGINT);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let (code, stdout, _) = finish(agent_proc);
    assert_eq!(code, Some(130), "{seen}{rest}");
    let notes: Vec<&str> = rest.lines().filter(|l| l.starts_with("aid: stopping")).collect();
    assert_eq!(
        notes,
        ["aid: stopping, writing what was recorded (Ctrl-C again to quit at once)"],
        "{rest}"
    );
    assert!(
        rest.lines().last().unwrap_or_default().starts_with(
            "aid: interrupted while intervening: the report above holds only what was confirmed before; every run is saved in "
        ),
        "{rest}"
    );
    assert!(
        stdout.contains(&format!(
            "Session and report (report.html, report.json, dag.dot): {}\n",
            out.display()
        )),
        "{stdout}"
    );
    for file in ["report.json", "report.txt", "report.html", "dag.dot"] {
        assert!(out.join(file).exists(), "{file}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["interrupted"], "intervening");
    assert!(load(&out).runs.len() > observed);
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn target_that_crashes_in_some_runs_is_recorded_run_by_run() {
    let _bpf = require_bpf();
    let exe = faults();
    let (tmp, out) = temp_session();
    let counter = tmp.path().join("count");
    let output = run_ok(
        agent()
            .args(["record", "-t", "add3", "--runs", "4", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg("crash-odd")
            .arg(&counter),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("recorded 4 run(s) of "), "{stdout}");
    assert!(stdout.contains(": 2 pass, 2 fail, "), "{stdout}");
    let s = load(&out);
    for (i, run) in s.runs.iter().enumerate() {
        let crashed = i % 2 == 1;
        assert_eq!(run.label == Label::Fail, crashed, "run {}", i + 1);
        assert_eq!(run.outcome.signal, crashed.then_some(libc::SIGSEGV));
        assert!(run.complete);
        assert_eq!(
            calls_on(&s, i, 0),
            vec![("add3".to_owned(), 1, [i as i64, 0, 0], Some(i as i64))]
        );
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn target_that_forks_and_execs_is_traced_alone() {
    let _bpf = require_bpf();
    let exe = faults();
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["record", "-t", "add3", "--runs", "2", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg("forkexec"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("aid: run 1: the target started 1 child process(es) (pid "),
        "{stderr}"
    );
    assert!(stderr.contains("their calls are not traced: aid traces the target process only"));
    let loaded = aid::store::load_full(&out).unwrap();
    for (i, run) in loaded.session.runs.iter().enumerate() {
        assert_eq!(run.label, Label::Pass);
        let calls: Vec<i64> = calls_on(&loaded.session, i, 0).iter().map(|c| c.2[0]).collect();
        assert_eq!(calls, vec![1, 10], "only the target's own calls");
        assert_eq!(loaded.records[i].notes.len(), 1, "the run says so");
        // The exec'd child never hit a breakpoint.
        let stdout =
            std::fs::read_to_string(out.join(format!("runs/{:06}/stdout.txt", i + 1))).unwrap();
        assert_eq!(stdout, "child sum=42 uprobes=0\n");
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn target_with_200_threads_gets_a_role_per_thread() {
    let _bpf = require_bpf();
    let exe = faults();
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "add3", "--runs", "2", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .args(["threads", "200"]),
    );
    let s = load(&out);
    for (i, run) in s.runs.iter().enumerate() {
        assert!(run.complete && run.label == Label::Pass, "run {i}");
        assert_eq!(run.threads.len(), 201, "main and 200 workers");
        let mut args: Vec<i64> = run
            .calls
            .iter()
            .filter(|c| !s.functions[c.func as usize].internal)
            .inspect(|c| assert!(c.role >= 1 && c.instance == 1 && c.ret == Some(c.args[0])))
            .map(|c| c.args[0])
            .collect();
        args.sort_unstable();
        assert_eq!(args, (1..=200).collect::<Vec<i64>>(), "one call per worker");
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn unprobeable_functions_are_skipped_and_named() {
    let _bpf = require_bpf();
    let exe = faults();
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["record", "-t", "locked_inc", "-t", "add3", "--runs", "2", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg("locked"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "aid: skipping 1 function(s) the kernel cannot probe: locked_inc (the kernel cannot probe its first instruction (ENOTSUPP))"
        ),
        "{stderr}"
    );
    let s = load(&out);
    assert!(s.functions.iter().all(|f| f.name != "locked_inc"), "left out of the session");
    for i in 0..2 {
        assert_eq!(s.runs[i].label, Label::Pass);
        assert_eq!(calls_on(&s, i, 0), vec![("add3".to_owned(), 1, [1, 2, 3], Some(6))]);
    }
    // Nothing else to trace: one line, exit 2, nothing attached.
    let (_tmp2, out2) = temp_session();
    let line = run_err(
        agent().args(["record", "-t", "locked_inc", "--out"]).arg(&out2).arg("--").arg(&exe),
    );
    assert_eq!(
        line,
        "aid: the kernel can probe none of the 1 function(s) matched (locked_inc (the kernel cannot probe its first instruction (ENOTSUPP))): choose other functions with --trace"
    );
    assert!(!out2.exists(), "no empty session left behind");
}

/// Regression (issue 8): return probes on `_setjmp`/`longjmp` made the
/// traced target exit 5 instead of 0 in 3 of 3 runs. A copy of the same
/// program running untraced meanwhile is untouched.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn setjmp_longjmp_target_is_traced_with_entry_probes_only() {
    let _bpf = require_bpf();
    let exe = faults();
    let bystander = std::thread::spawn({
        let exe = exe.clone();
        move || {
            let mut codes = Vec::new();
            for _ in 0..30 {
                codes.push(Command::new(&exe).args(["jumps", "200"]).status().unwrap().code());
            }
            codes
        }
    });
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["record", "-t", "libc:*setjmp*", "-t", "libc:*longjmp*", "-t", "add3"])
            .args(["--runs", "3", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .args(["jumps", "20"]),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "aid: entry probes only (no return value or duration) for __sigsetjmp, _setjmp, setjmp"
        ),
        "{stderr}"
    );
    let s = load(&out);
    for (i, run) in s.runs.iter().enumerate() {
        assert_eq!((run.label, run.outcome.exit_code), (Label::Pass, Some(0)), "run {i}");
        let jumps = run
            .calls
            .iter()
            .filter(|c| s.functions[c.func as usize].name.contains("jmp"))
            .inspect(|c| assert_eq!(c.ret, None, "no return probe"))
            .count();
        assert!(jumps >= 20, "setjmp entries recorded: {jumps}");
        let adds = calls_on(&s, i, 0).into_iter().filter(|c| c.0 == "add3").count();
        assert_eq!(adds, 20);
    }
    assert!(bystander.join().unwrap().iter().all(|c| *c == Some(0)), "the bystander was harmed");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_static_program_is_traced() {
    let _bpf = require_bpf();
    let exe = c_fixture("faults.c", "faults_static", &["-static"]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "add3", "--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .args(["threads", "3"]),
    );
    let s = load(&out);
    assert_eq!(s.runs[0].threads.len(), 4);
    let mut args: Vec<i64> = s.runs[0]
        .calls
        .iter()
        .filter(|c| !s.functions[c.func as usize].internal)
        .map(|c| c.args[0])
        .collect();
    args.sort_unstable();
    assert_eq!(args, vec![1, 2, 3]);
}

#[test]
fn kernel_thread_zombie_and_stripped_pids_are_one_line_errors() {
    let line = run_err(agent().args(["attach", "--pid", "2", "-t", "x"]));
    assert_eq!(
        line,
        "aid: pid 2 is a kernel thread (kthreadd): aid traces user-space programs; give the pid of one"
    );
    // `sleep 0` exits; its parent became `sleep 5` by exec and never reaps it.
    let parent =
        Background(Command::new("sh").args(["-c", "sleep 0 & exec sleep 5"]).spawn().unwrap());
    let mut zombie = 0;
    assert!(wait_for(5, || {
        zombie = children_of(parent.pid()).first().copied().unwrap_or(0);
        zombie != 0 && proc_state(zombie) == 'Z'
    }));
    let line = run_err(agent().args(["attach", "--pid", &zombie.to_string(), "-t", "x"]));
    assert_eq!(
        line,
        format!(
            "aid: pid {zombie} (sleep) is a zombie: it has exited and only waits for its parent to collect it; nothing is left to trace"
        )
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_stripped_running_process_is_a_one_line_error() {
    let _bpf = require_bpf();
    let exe = c_fixture("scoped.c", "scoped_for_strip", &[]);
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("stripped");
    assert!(Command::new("strip").arg("-o").arg(&stripped).arg(&exe).status().unwrap().success());
    let running = Background(Command::new(&stripped).arg("pause").spawn().unwrap());
    assert!(wait_for(5, || std::fs::read_link(format!("/proc/{}/exe", running.pid()))
        .is_ok_and(|e| e == stripped)));
    let line = run_err(agent().args(["attach", "--pid", &running.pid().to_string(), "-t", "add3"]));
    assert!(line.ends_with("has no function symbols (stripped, and no debug file found by build-id or .gnu_debuglink under /usr/lib/debug): install its debug symbols or pass --debug-root DIR; library functions can still be traced ('libc:PATTERN')"), "{line}");
    assert_untouched(running.pid(), "after the refusal");
}

/// A session with six runs, three of them damaged (a truncated events
/// file, a flipped byte, a missing file) and the last record cut short:
/// `analyze` names each and analyses the three intact ones.
#[test]
fn analyze_skips_damaged_runs_and_names_them() {
    use aid::model::testing::{call, function, run};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let int = aid::model::ValueType { kind: aid::model::ValueKind::Signed, size: 4 };
    let f = function(0, "parse").in_module("/bin/t", 0).with_types(int, vec![]);
    let header = aid::store::Header {
        format: aid::store::FORMAT.into(),
        version: aid::store::VERSION,
        tool: "test".into(),
        created: 0,
        created_subsec_ns: 0,
        mode: aid::store::Mode::Record,
        program: "/bin/t".into(),
        command: vec![],
        pid: None,
        unit: None,
        fail_rules: vec![],
        functions: vec![f.clone()],
        settings: None,
        jobs: None,
        fleet: None,
    };
    let mut w = aid::store::Writer::create(&out, &header).unwrap();
    for id in 1..=7u32 {
        let (label, ret) = if id % 2 == 0 { (Label::Fail, -22) } else { (Label::Pass, 0) };
        let r = run(id, label, vec![call(0, 0, 1, 5, Some(9), Some(ret))], 20);
        let rows = vec![
            aid::model::EventRow {
                t_ns: 5,
                tid: 1,
                role: 0,
                func: 0,
                point: aid::model::Point::Entry,
                instance: 1,
                args: [0; 3],
                ret: None,
                content: None,
            },
            aid::model::EventRow {
                t_ns: 9,
                tid: 1,
                role: 0,
                func: 0,
                point: aid::model::Point::Exit,
                instance: 1,
                args: [0; 3],
                ret: Some(ret),
                content: None,
            },
        ];
        let rec = aid::model::RecordedRun {
            host: None,
            run: r,
            rows,
            start_ns: 0,
            orphan_exits: 0,
            stdout: String::new(),
            stderr: String::new(),
            probe_errors: 0,
            notes: vec![],
            sync_steps: vec![],
            hang: None,
        };
        w.append(&rec, &header.functions).unwrap();
    }
    let events = |id: u32| out.join(format!("runs/{id:06}/events.csv"));
    let text = std::fs::read(events(3)).unwrap();
    std::fs::write(events(3), &text[..text.len() - 4]).unwrap();
    let mut bytes = std::fs::read(events(5)).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(events(5), bytes).unwrap();
    std::fs::remove_file(events(6)).unwrap();
    let runs = out.join("runs.jsonl");
    let text = std::fs::read_to_string(&runs).unwrap();
    std::fs::write(&runs, &text[..text.len() - 5]).unwrap();
    let output = agent().arg("analyze").arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 4, "{stderr}");
    assert!(warnings[0].contains("runs.jsonl line 7 is cut short"), "{stderr}");
    assert!(warnings[1].starts_with("aid: warning: run 3 skipped: session file "), "{stderr}");
    assert!(warnings[1].ends_with(
        "events.csv is corrupt: checksum mismatch (truncated or modified after recording)"
    ));
    assert!(warnings[2].starts_with("aid: warning: run 5 skipped: "), "{stderr}");
    assert!(warnings[3].starts_with("aid: warning: run 6 skipped: "), "{stderr}");
    assert!(warnings[3].contains("runs/000006/events.csv is missing (run 6)"), "{stderr}");
    // Runs 1, 2 and 4 are analysed: one passing, two failing.
    assert!(stdout.starts_with("3 runs (2 failing, 1 passing)"), "{stdout}");
    // A record naming a file outside the session refuses the whole session.
    std::fs::write(&runs, text.replacen("runs/000001/events.csv", "/etc/shadow", 1)).unwrap();
    let line = run_err(agent().arg("analyze").arg(&out));
    assert_eq!(
        line,
        format!(
            "aid: {} names `/etc/shadow`, outside the session directory: refusing to read it (the session was tampered with)",
            runs.display()
        )
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn two_agents_at_once_do_not_cross_talk() {
    let _bpf = require_bpf();
    let scoped = c_fixture("scoped.c", "scoped_two", &[]);
    let threads = faults();
    let (_t1, out1) = temp_session();
    let (_t2, out2) = temp_session();
    let (_t3, out3) = temp_session();
    let trace = ["record", "-t", "libc:getppid", "-t", "add3", "--runs", "3"];
    // Two agents on the same binary with different call counts, one on
    // another program, all at once.
    let a = spawn_agent(&trace, &out1, &[scoped.as_os_str(), "getppid".as_ref(), "100".as_ref()]);
    let b = spawn_agent(&trace, &out2, &[scoped.as_os_str(), "getppid".as_ref(), "150".as_ref()]);
    let c = spawn_agent(
        &["record", "-t", "add3", "--runs", "3"],
        &out3,
        &[threads.as_os_str(), "threads".as_ref(), "20".as_ref()],
    );
    for (child, name) in [(a, "a"), (b, "b"), (c, "c")] {
        let (code, _, stderr) = finish(child);
        assert_eq!(code, Some(0), "agent {name}: {stderr}");
    }
    for (out, n) in [(&out1, 100), (&out2, 150)] {
        let s = load(out);
        for (i, run) in s.runs.iter().enumerate() {
            assert!(run.complete);
            let calls = calls_on(&s, i, 0);
            assert_eq!(calls.len(), n, "exactly this agent's target's calls");
            assert!(calls.iter().all(|c| c.0 == "getppid"));
        }
    }
    let s = load(&out3);
    for run in &s.runs {
        assert_eq!(run.threads.len(), 21);
        assert_eq!(run.calls.iter().filter(|c| !s.functions[c.func as usize].internal).count(), 20);
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let exe = c_fixture("faults.c", "faults_bad", &[]);
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("prog.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["record".into(), "--runs".into(), "0".into(), "-t".into(), "add3".into()],
            "aid: --runs 0 records nothing: give at least 1".into(),
        ),
        (
            vec!["record".into(), "--timeout".into(), "0s".into(), "-t".into(), "add3".into()],
            "aid: --timeout 0s would kill every run at once: give a positive duration, e.g. 60s"
                .into(),
        ),
        (
            vec!["record".into(), "-t".into(), String::new()],
            "aid: --trace '' is empty: give a function name or a glob such as 'cache_*'".into(),
        ),
        (
            vec!["record".into(), "--max-probes".into(), "0".into(), "-t".into(), "add3".into()],
            "aid: --max-probes 0 allows no function: give at least 1".into(),
        ),
        (
            vec!["debug".into(), "--runs".into(), "1".into()],
            "aid: --runs 1 cannot show both a failing and a passing run: give at least 2".into(),
        ),
        (
            vec!["debug".into(), "--hold-timeout".into(), "0s".into()],
            "aid: --hold-timeout 0s allows no time at all: give a positive duration".into(),
        ),
        (
            vec!["debug".into(), "--amplify-below".into(), "150%".into()],
            "aid: --amplify-below `150%`: give a percentage between 0 and 100, e.g. 5%".into(),
        ),
        (
            vec![
                "debug".into(),
                "--pid".into(),
                "1".into(),
                "--unit".into(),
                "f".into(),
                "--fail-if".into(),
                "f ret < 0".into(),
            ],
            "aid: the argument '--pid <PID>' cannot be used with '[CMD]...' (see --help)".into(),
        ),
    ];
    for (args, want) in cases {
        let mut cmd = agent();
        cmd.args(&args).arg("--").arg(&exe);
        assert_eq!(run_err(&mut cmd), want, "{args:?}");
    }
    let line =
        run_err(agent().args(["record", "-t", "add3", "--fail-on", "stdout:(x", "--"]).arg(&exe));
    assert!(
        line.starts_with(
            "aid: invalid --fail-on rule `stdout:(x`: invalid regex: unclosed group ("
        ),
        "{line}"
    );
    let line = run_err(agent().args(["record", "-t", "add3", "--"]).arg(&source));
    assert_eq!(
        line,
        format!(
            "aid: `{}` is not executable: chmod +x it, or give the program that runs it",
            source.display()
        )
    );
    let line = run_err(agent().args(["attach", "--pid", "1", "--duration", "0s", "-t", "x"]));
    assert_eq!(line, "aid: --duration 0s allows no time at all: give a positive duration");
    let line = run_err(agent().args(["record", "-t", "add3"]));
    assert!(
        line.starts_with("aid: the following required arguments were not provided: <CMD>"),
        "{line}"
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn too_many_functions_and_unusable_out_are_refused_before_any_probe() {
    let _bpf = require_bpf();
    let exe = faults();
    let line =
        run_err(agent().args(["record", "-t", "libc:*", "--"]).arg(&exe).arg("threads").arg("1"));
    assert!(line.starts_with("aid: the patterns match "), "{line}");
    assert!(line.ends_with(" functions, more than the limit of 512 (each costs two probes): narrow --trace, or raise --max-probes"), "{line}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = file.join("session");
    let line = run_err(
        agent()
            .args(["record", "-t", "add3", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .args(["threads", "1"]),
    );
    assert_eq!(
        line,
        format!(
            "aid: cannot write {}: Not a directory (os error 20): choose another --out",
            out.display()
        )
    );
    // Not a byte written anywhere, no session left looking complete.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A full disk: a run that cannot be stored fails the command in one line;
/// the runs before it stay readable and nothing half-written is left.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_full_out_fails_cleanly_and_keeps_the_earlier_runs() {
    let _bpf = require_bpf();
    let exe = faults();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let out = mnt.join("s");
    // A 1 MiB tmpfs in a mount namespace of the command's own (unshare
    // makes its mounts private): nothing stays mounted.
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs '{}' && '{}' record -t add3 --runs 50 --out '{}' -- '{}' threads 200; code=$?; cp -r '{}' '{}/copy'; exit $code",
        mnt.display(),
        env!("CARGO_BIN_EXE_aid-agent"),
        out.display(),
        exe.display(),
        out.display(),
        dir.path().display(),
    );
    let output = Command::new("unshare").args(["-m", "sh", "-c", &script]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("aid: saving run "), "{stderr}");
    assert!(
        last.ends_with(
            "No space left on device (os error 28): free space, or choose another --out"
        ),
        "{stderr}"
    );
    let copy = dir.path().join("copy");
    let loaded = aid::store::load_full(&copy).unwrap();
    assert!(
        loaded.skipped.is_empty(),
        "nothing half-written: {:?}",
        loaded.skipped.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
    let n = loaded.session.runs.len();
    assert!((1..50).contains(&n), "{n} runs kept");
    let failed: u32 =
        last.trim_start_matches("aid: saving run ").split(':').next().unwrap().parse().unwrap();
    assert_eq!(failed as usize, n + 1, "the runs before the failed one are all there");
    let dirs = std::fs::read_dir(copy.join("runs")).unwrap().count();
    assert_eq!(dirs, n, "no directory of the failed run left");
}
