//! Probes exist only in the target's address space: a bystander running
//! the same code never traps into them, the target's events across exec
//! and threads are exact, its forked children are left alone, and the
//! probes are gone when detached.

use std::{
    ffi::OsString,
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Command, Stdio},
    sync::atomic::AtomicBool,
    time::{Duration, Instant},
};

use crate::common::*;
use aid::{
    bpf::{LoadOptions, Mechanism, Probes, Programs, Scope},
    model::Label,
    symbols::Resolver,
    sys::spawn::{self as runner, Target},
};

/// The `[uprobes]` mapping: the kernel creates it in a process the first
/// time one of its threads hits a uprobe breakpoint, and it stays for the
/// life of the address space.
fn has_uprobes_mapping(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .any(|l| l.ends_with("[uprobes]"))
}

/// A process of `exe spin`: calls getppid() and add3() in a loop until
/// SIGTERM.
fn spinner(exe: &Path) -> (Background, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(exe)
        .arg("spin")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the bystander");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "spinning");
    (Background(child), out)
}

/// Stops the spinner; asserts it exited normally and made calls.
fn stop_spinner(mut spinner: Background, mut out: BufReader<std::process::ChildStdout>) -> u64 {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(spinner.pid() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = spinner.0.wait().unwrap();
    assert!(status.success(), "the bystander ended with {status:?}");
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.trim().strip_prefix("calls=").expect("calls=N").parse().unwrap()
}

/// A process's state and tracer, sampled every millisecond from a thread
/// of the test while the agent works on another process.
struct Sampler {
    on: std::sync::Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(char, Option<u32>)>>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let on = std::sync::Arc::new(AtomicBool::new(true));
        let thread = {
            let on = std::sync::Arc::clone(&on);
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while on.load(std::sync::atomic::Ordering::Relaxed) {
                    seen.push((proc_state(pid), tracer_pid(pid)));
                    std::thread::sleep(Duration::from_millis(1));
                }
                seen
            })
        };
        Sampler { on, thread }
    }

    /// Ends the sampling: the process was in one of `states` (running,
    /// sleeping: never `T` or `t`, stopped), and not ptraced, at every
    /// sample.
    fn assert_never_stopped(self, states: &[char]) {
        self.on.store(false, std::sync::atomic::Ordering::Relaxed);
        let seen = self.thread.join().unwrap();
        assert!(seen.len() > 10, "sampled {} times", seen.len());
        let fine = |(s, t): &(char, Option<u32>)| states.contains(s) && *t == Some(0);
        assert!(
            seen.iter().all(fine),
            "the bystander was stopped or ptraced: {:?}",
            seen.iter().find(|x| !fine(x))
        );
    }
}

/// The probes aid adds when its target throws C++ exceptions — entries
/// of `_Unwind_RaiseException` and `_Unwind_ForcedUnwind` in libgcc_s and
/// of `__cxa_begin_catch` in libstdc++, where the agent stops the
/// target's thread to put return addresses back (docs/probes.md,
/// "Exceptions") — are the target's only: a C++ process throwing and
/// catching through the same two libraries every 2 ms, all the while the
/// agent records five runs of a program that throws through traced
/// functions, never traps into them, is never stopped or ptraced, and
/// keeps serving; the target's runs pass and their exceptions were
/// caught (`outer` returned -1).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn bystander_throwing_through_the_same_libraries_never_hits_the_unwind_probes() {
    let _bpf = require_bpf();
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    let service = c_fixture("exceptions_service.cpp", "exceptions_service", &[]);
    let (bystander, _) = serving(Command::new(&service).arg(&count));
    assert!(wait_for(10, || read_count(&count) > 0), "the bystander never counted");
    let sampler = Sampler::start(bystander.pid());
    let exe = c_fixture("exceptions.cpp", "exceptions", &[]);
    let (_tmp, out) = temp_session();
    let output = agent()
        .args(["record", "-t", "parse", "-t", "middle", "-t", "outer", "--runs", "5", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("aid puts back the return addresses"), "{stderr}");
    // `D` too: the bystander writes its count to a file.
    sampler.assert_never_stopped(&['R', 'S', 'D']);
    assert!(!has_uprobes_mapping(bystander.pid()), "a breakpoint was hit in the bystander");
    let before = read_count(&count);
    assert!(wait_for(10, || read_count(&count) > before + 50), "the bystander stopped serving");
    let s = load(&out);
    assert_eq!(s.runs.len(), 5);
    for run in 0..5 {
        assert_eq!(s.runs[run].label, Label::Pass);
        let caught =
            calls_on(&s, run, 0).iter().filter(|c| c.0 == "outer(int)" && c.3 == Some(-1)).count();
        assert_eq!(caught, 3, "run {run}");
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn bystander_calling_the_traced_libc_function_never_hits_a_probe() {
    let _bpf = require_bpf();
    let exe = c_fixture("scoped.c", "scoped", &[]);
    let (bystander, out_b) = spinner(&exe);
    let sampler = Sampler::start(bystander.pid());
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "libc:getppid", "--runs", "3", "--out"])
            .arg(&out)
            .arg("--")
            .args([exe.as_os_str(), "getppid".as_ref(), "100".as_ref()]),
    );
    // While the agent traced getppid in its targets, the bystander ran it
    // in a loop. It never trapped into a breakpoint (the kernel maps
    // `[uprobes]` into a process at its first hit), so it never paid for
    // one: not slowed, whatever the load on the machine. And it was never
    // stopped or ptraced.
    sampler.assert_never_stopped(&['R', 'S']);
    assert!(!has_uprobes_mapping(bystander.pid()), "a breakpoint was hit in the bystander");
    let calls = stop_spinner(bystander, out_b);
    assert!(calls > 0);
    let s = load(&out);
    assert_eq!(s.runs.len(), 3);
    for (i, run) in s.runs.iter().enumerate() {
        assert_eq!(run.label, Label::Pass);
        assert!(run.complete);
        let getppids = calls_on(&s, i, 0);
        assert_eq!(getppids.len(), 100, "run {i}");
        assert!(getppids.iter().enumerate().all(|(k, c)| c.0 == "getppid" && c.1 == k as u32 + 1));
        assert_eq!(run.threads.len(), 1);
    }
}

/// The check above can fail: with probes for all processes (the way aid
/// attached them before), a bystander does trap into them. (On a function
/// of a private copy of the fixture, so that only this test's processes
/// can hit them.)
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn bystander_check_sees_probes_attached_for_all_processes() {
    let _bpf = require_bpf();
    aid::bpf::preflight(aid::bpf::Needs::Trace).unwrap();
    let exe = c_fixture("scoped.c", "scoped_all", &[]);
    let (bystander, out_b) = spinner(&exe);
    let mut resolver = Resolver::for_executable(&exe).unwrap();
    let functions = resolver.resolve(&["add3".to_owned()]).unwrap();
    let mut probes = Probes::load(LoadOptions::default()).unwrap();
    probes.attach(&functions, Scope::AllProcesses, Programs::Empty).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !has_uprobes_mapping(bystander.pid()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(has_uprobes_mapping(bystander.pid()));
    probes.detach_all();
    assert!(stop_spinner(bystander, out_b) > 0);
}

fn held(exe: &Path, args: &[&str]) -> runner::Spawned {
    let mut argv: Vec<OsString> = vec![exe.as_os_str().to_owned()];
    argv.extend(args.iter().map(OsString::from));
    runner::spawn_held(&Target { program: exe.canonicalize().unwrap(), argv, output_dir: None })
        .unwrap()
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn probes_follow_the_target_through_exec_and_are_removed_at_its_end() {
    let _bpf = require_bpf();
    aid::bpf::preflight(aid::bpf::Needs::Trace).unwrap();
    let exe = c_fixture("scoped.c", "scoped_pause", &[]);
    let mut resolver = Resolver::for_executable(&exe).unwrap();
    let functions = resolver.resolve(&["add3".to_owned()]).unwrap();
    let mut probes = Probes::load(LoadOptions::default()).unwrap();
    assert_eq!(probes.mechanism(), Mechanism::UprobeMulti, "this kernel has uprobe_multi");
    let stream = probes.event_stream();
    probes.attach(&functions, Scope::Target, Programs::Record).unwrap();
    // Attached before the exec, to the child held by the agent.
    let mut child = held(&exe, &["pause"]);
    let pid = child.pid;
    probes.begin_target(pid, false).unwrap();
    child.release().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !has_uprobes_mapping(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let addr = runtime_address(pid, &exe, "add3");
    assert_eq!(code_byte(pid, addr), 0xcc, "breakpoint in the new image");
    let entries: Vec<_> = stream
        .flush()
        .into_iter()
        .filter(|e| e.pid == pid && e.kind == aid_common::EventKind::ENTRY)
        .map(|e| e.args)
        .collect();
    assert_eq!(entries, vec![[1, 2, 3]]);
    // Ending the target detaches in the background; detach_all waits.
    probes.end_target(pid).unwrap();
    probes.detach_all();
    // The link's last descriptor may still be open for a moment in a
    // process another test thread is forking (its copy closes at exec):
    // the kernel removes the breakpoint then.
    let original = std::fs::read(&exe).unwrap()[functions[0].offset as usize];
    assert!(wait_for(5, || code_byte(pid, addr) == original), "breakpoint removed");
    assert!(alive(pid), "the target keeps running");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGTERM)
        .unwrap();
    let exit = child.wait(Duration::from_secs(5), None, &AtomicBool::new(false)).unwrap();
    assert_eq!(exit.code, Some(0));
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn forked_child_of_the_target_runs_untraced_and_unharmed() {
    let _bpf = require_bpf();
    let exe = c_fixture("scoped.c", "scoped_fork", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "add3", "--runs", "2", "--out"])
            .arg(&out)
            .arg("--")
            .args([exe.as_os_str(), "fork".as_ref()]),
    );
    let s = load(&out);
    for run in 0..2 {
        // Exit 0: the child (which inherited the breakpoints with its copy
        // of the address space) was not killed, and the parent's last call
        // returned the right value.
        assert_eq!(s.runs[run].label, Label::Pass);
        assert_eq!(s.runs[run].outcome.exit_code, Some(0));
        let calls: Vec<_> =
            calls_on(&s, run, 0).into_iter().map(|(n, i, a, r)| (n, i, a[0], r)).collect();
        assert_eq!(
            calls,
            vec![("add3".to_owned(), 1, 1, Some(6)), ("add3".to_owned(), 2, 10, Some(60))],
            "only the target's own calls"
        );
        assert_eq!(s.runs[run].threads.len(), 1);
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn per_run_links_leave_nothing_attached_after_many_runs() {
    let _bpf = require_bpf();
    aid::bpf::preflight(aid::bpf::Needs::Trace).unwrap();
    let exe = c_fixture("scoped.c", "scoped_many", &[]);
    let mut resolver = Resolver::for_executable(&exe).unwrap();
    let functions = resolver.resolve(&["add3".to_owned(), "libc:getppid".to_owned()]).unwrap();
    let mut probes = Probes::load(LoadOptions::default()).unwrap();
    let stream = probes.event_stream();
    probes.attach(&functions, Scope::Target, Programs::Record).unwrap();
    let ours = probes.multi_program_ids();
    assert_eq!(ours.len(), 4);
    for _ in 0..5 {
        let mut child = held(&exe, &["getppid", "3"]);
        let pid = child.pid;
        probes.begin_target(pid, false).unwrap();
        child.release().unwrap();
        let exit = child.wait(Duration::from_secs(5), None, &AtomicBool::new(false)).unwrap();
        assert_eq!(exit.code, Some(0));
        // This run's entry and return links in two modules (earlier runs' may
        // still be closing in the background).
        assert!(uprobe_multi_links(&ours).len() >= 4);
        let events = stream.flush();
        probes.end_target(pid).unwrap();
        let getppids = events
            .iter()
            .filter(|e| e.pid == pid && e.func == 1 && e.kind == aid_common::EventKind::EXIT)
            .count();
        assert_eq!(getppids, 3);
    }
    probes.detach_all();
    // As above: a copy of a link's descriptor in a process another test
    // thread is forking keeps the link until that process execs.
    assert!(wait_for(5, || uprobe_multi_links(&ours).is_empty()), "every per-run link was closed");
}

/// Ids of the uprobe_multi links in the kernel now whose program is one of
/// `programs`.
fn uprobe_multi_links(programs: &[u32]) -> Vec<u32> {
    aya::programs::loaded_links()
        .filter_map(Result::ok)
        .filter(|l| matches!(l.link_type(), Ok(aya::programs::links::LinkType::UProbeMulti)))
        .filter(|l| programs.contains(&l.program_id()))
        .map(|l| l.id())
        .collect()
}

/// Kernels without uprobe_multi get pid-scoped perf events per run: slower
/// to remove, but just as scoped.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn perf_event_fallback_is_scoped_too() {
    let _bpf = require_bpf();
    aid::bpf::preflight(aid::bpf::Needs::Trace).unwrap();
    let exe = c_fixture("scoped.c", "scoped_perf", &[]);
    let (bystander, out_b) = spinner(&exe);
    let mut resolver = Resolver::for_executable(&exe).unwrap();
    let functions = resolver.resolve(&["libc:getppid".to_owned()]).unwrap();
    let options = LoadOptions { mechanism: Mechanism::PerfEvents, ..LoadOptions::default() };
    let mut probes = Probes::load(options).unwrap();
    assert_eq!(probes.mechanism(), Mechanism::PerfEvents);
    let stream = probes.event_stream();
    probes.attach(&functions, Scope::Target, Programs::Record).unwrap();
    let mut child = held(&exe, &["getppid", "3"]);
    let pid = child.pid;
    probes.begin_target(pid, false).unwrap();
    child.release().unwrap();
    let exit = child.wait(Duration::from_secs(5), None, &AtomicBool::new(false)).unwrap();
    assert_eq!(exit.code, Some(0));
    let exits = stream
        .flush()
        .iter()
        .filter(|e| e.pid == pid && e.kind == aid_common::EventKind::EXIT)
        .count();
    assert_eq!(exits, 3);
    probes.end_target(pid).unwrap();
    probes.detach_all();
    assert!(!has_uprobes_mapping(bystander.pid()), "a breakpoint was hit in the bystander");
    assert!(stop_spinner(bystander, out_b) > 0);
}
