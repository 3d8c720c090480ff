//! The tracer end to end: real uprobes on fixtures compiled at test time,
//! exact event sequences per thread role, attach, lost events, teardown and
//! the one-line errors.

use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::*;
use aid::model::{Label, identity::RoleNames};

type Calls = Vec<(String, u32, [i64; 3], Option<i64>)>;

fn c(name: &str, instance: u32, args: [i64; 3], ret: i64) -> (String, u32, [i64; 3], Option<i64>) {
    (name.to_owned(), instance, args, Some(ret))
}

/// The exact calls of two_threads.c, per role.
fn assert_two_threads(exe: &std::path::Path) {
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "add3", "-t", "scale", "-t", "negate", "--runs", "2", "--out"])
            .arg(&out)
            .arg("--")
            .arg(exe),
    );
    let s = load(&out);
    assert_eq!(s.runs.len(), 2);
    for run in 0..2 {
        let r = &s.runs[run];
        assert_eq!(r.label, Label::Pass);
        assert!(r.complete && r.lost_events == 0);
        let threads: Vec<(u32, &str, Option<u32>)> =
            r.threads.iter().map(|t| (t.role, t.name.as_str(), t.parent)).collect();
        assert_eq!(
            threads,
            vec![(0, "main", None), (1, "worker_a", Some(0)), (2, "worker_b", Some(0))]
        );
        let main: Calls = vec![c("add3", 1, [100, 200, 300], 600)];
        let a: Calls = vec![c("add3", 1, [1, 2, 3], 6), c("scale", 1, [7, 0, 0], 70)];
        let b: Calls = vec![
            c("add3", 1, [10, 20, 30], 60),
            c("negate", 1, [5, 0, 0], -5),
            c("negate", 2, [6, 0, 0], -6),
        ];
        assert_eq!(calls_on(&s, run, 0), main);
        assert_eq!(calls_on(&s, run, 1), a);
        assert_eq!(calls_on(&s, run, 2), b);
        // Entries precede exits, and worker_a is done before worker_b starts.
        for call in &r.calls {
            assert!(call.exit_ns.unwrap() >= call.entry_ns);
        }
        let last_a =
            r.calls.iter().filter(|c| c.role == 1).map(|c| c.exit_ns.unwrap()).max().unwrap();
        let first_b = r.calls.iter().filter(|c| c.role == 2).map(|c| c.entry_ns).min().unwrap();
        assert!(last_a < first_b);
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn exact_events_per_role_pie() {
    let _bpf = require_bpf();
    assert_two_threads(&c_fixture("two_threads.c", "two_threads_pie", &["-fPIE", "-pie"]));
}

/// What an argument points to is read at entry, as DWARF describes it:
/// a C string up to its NUL (16 bytes at most), a small record split into
/// its scalar members, a record passed after the hidden return pointer of
/// a 24-byte struct (so in `rsi`, not `rdi`), an empty string as read (no
/// bytes but its NUL), nothing for NULL, and a record whose key is a
/// character array: the array is a field compared up to its NUL.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn pointees_are_read_at_entry() {
    let _bpf = require_bpf();
    let exe = c_fixture("pointee.c", "pointee", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "find", "-t", "book", "-t", "issue", "-t", "stock"])
            .args(["--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    let func = |name: &str| s.functions.iter().find(|f| f.name == name).unwrap();
    let (find, book, issue, stock) = (func("find"), func("book"), func("issue"), func("stock"));
    let text = |name: &str| aid::model::PointeeField {
        name: name.into(),
        offset: 0,
        size: 16,
        text: false,
    };
    let field = |name: &str, offset| aid::model::PointeeField {
        name: name.into(),
        offset,
        size: 4,
        text: false,
    };
    let request = vec![field("r.customer", 0), field("r.seat", 4)];
    let pointee = |f: &aid::model::Function| {
        let p = f.pointee.clone().unwrap();
        (p.arg, p.text, p.len, p.fields)
    };
    assert_eq!(pointee(find), (1, true, 16, vec![text("sku")]));
    assert_eq!(pointee(book), (1, false, 8, request.clone()));
    assert_eq!(pointee(issue), (1, false, 8, request));
    let sku = aid::model::PointeeField { name: "it.sku".into(), offset: 0, size: 12, text: true };
    let item = vec![sku.clone(), field("it.qty", 12)];
    assert_eq!(pointee(stock), (1, false, 16, item), "the name, past 16 bytes, is not a field");
    // `issue` returns 24 bytes through memory: its first register is the
    // hidden pointer, a pointer too.
    assert_eq!(issue.params.len(), 2);
    let contents = |f: &aid::model::Function| -> Vec<Option<Vec<u8>>> {
        s.runs[0]
            .calls
            .iter()
            .filter(|c| c.func == f.id)
            .map(|c| c.content.map(|b| b.to_vec()))
            .collect()
    };
    let padded = |bytes: &[u8]| {
        let mut v = bytes.to_vec();
        v.resize(16, 0);
        Some(v)
    };
    let request =
        |customer: u32, seat: u32| padded(&[customer.to_le_bytes(), seat.to_le_bytes()].concat());
    assert_eq!(
        contents(find),
        vec![padded(b"BRG-101-M"), padded(b"SKU-0123456789a"), None, padded(b"")],
        "the second string is cut to 15 bytes and its NUL; an empty string is read, NULL is not"
    );
    assert_eq!(contents(book), vec![request(7, 12), request(8, 12)]);
    assert_eq!(contents(issue), vec![request(8, 12)]);
    let mut item = b"CAB-7-S\0xxxx".to_vec();
    item.extend(5u32.to_le_bytes());
    assert_eq!(contents(stock), vec![Some(item.clone())]);
    let content: aid::model::Content = item.try_into().unwrap();
    assert_eq!(sku.bytes(&content), b"CAB-7-S", "the key is compared up to its NUL");
    let issue_call = s.runs[0].calls.iter().find(|c| c.func == issue.id).unwrap();
    let second_book = s.runs[0].calls.iter().filter(|c| c.func == book.id).nth(1).unwrap();
    assert_eq!(issue_call.args[1], second_book.args[1], "the request is issue's second register");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn exact_events_per_role_non_pie() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_nopie", &["-fno-PIE", "-no-pie"]);
    let data = std::fs::read(&exe).unwrap();
    assert_eq!(u16::from_le_bytes([data[16], data[17]]), 2, "fixture must be ET_EXEC");
    assert_two_threads(&exe);
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn cpp_names_are_demangled() {
    let _bpf = require_bpf();
    let exe = c_fixture("cache.cpp", "cache_cpp", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "store::Cache::*", "--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    let calls = calls_on(&s, 0, 0);
    let this = calls[0].2[0];
    assert_eq!(
        calls,
        vec![
            ("store::Cache::put(int, int)".to_owned(), 1, [this, 2, 3], Some(0)),
            ("store::Cache::get(int)".to_owned(), 1, [this, 4, 0], Some(9)),
        ]
    );
    let put = s.functions.iter().find(|f| f.name.starts_with("store::Cache::put")).unwrap();
    assert_eq!(put.symbol, "_ZN5store5Cache3putEii");
    assert!(
        put.source.as_ref().is_some_and(|l| l.file.ends_with("cache.cpp") && l.line == 8),
        "{:?}",
        put.source
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rust_names_are_demangled() {
    let _bpf = require_bpf();
    let exe = rust_fixture("rust_fixture.rs", "rust_fixture");
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "rust_fixture::worker::*", "--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    assert_eq!(calls_on(&s, 0, 0), vec![c("rust_fixture::worker::compute", 1, [14, 0, 0], 42)]);
    assert_eq!(calls_on(&s, 0, 1), vec![c("rust_fixture::worker::compute", 1, [5, 0, 0], 15)]);
    // Every std thread starts in the same runtime trampoline: the role is
    // named after the name the thread was given.
    assert_eq!(RoleNames::of(&s.runs[0]).label(1), "cruncher");
}

/// Threads started through a runtime's trampoline are named by the user
/// function they run (issue 10): a `std::thread`'s lambda or function
/// object, a `thread::spawn` closure — not `thread#N`, not the trampoline.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn std_threads_are_named_by_what_they_run() {
    let _bpf = require_bpf();
    let names = |exe: &std::path::Path, pattern: &str| -> Vec<String> {
        let (_tmp, out) = temp_session();
        run_ok(
            agent()
                .args(["record", "-t", pattern, "--runs", "1", "--out"])
                .arg(&out)
                .arg("--")
                .arg(exe),
        );
        let s = load(&out);
        let r = &s.runs[0];
        let names = RoleNames::of(r);
        (1..r.threads.len() as u32).map(|role| names.label(role)).collect()
    };
    let cpp = c_fixture("std_threads.cpp", "std_threads", &[]);
    assert_eq!(names(&cpp, "pool::step"), vec!["pool::start::{lambda()#1}", "pool::Job"]);
    let rust = rust_fixture("rust_spawn.rs", "rust_spawn");
    assert_eq!(
        names(&rust, "rust_spawn::step"),
        vec![
            "rust_spawn::main::{closure#0}",
            "rust_spawn::main::{closure#1}::{closure#0}#1",
            "rust_spawn::main::{closure#1}::{closure#0}#2",
        ]
    );
}

/// The C library's symbols are versioned (`pthread_mutex_unlock@@GLIBC_2.2.5`)
/// and share addresses with aliases (`__pthread_mutex_unlock`): a bare name
/// traces the function, as in bpftrace (issue 10).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn versioned_libc_functions_are_traced_by_bare_name() {
    let _bpf = require_bpf();
    let exe = c_fixture("noise_only.c", "noise_only_lib", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "libc:pthread_mutex_lock", "-t", "libc:pthread_mutex_unlock"])
            .args(["--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    let calls = calls_on(&s, 0, 0);
    let mutexes =
        |name: &str| -> Vec<i64> { calls.iter().filter(|c| c.0 == name).map(|c| c.2[0]).collect() };
    let (locked, unlocked) = (mutexes("pthread_mutex_lock"), mutexes("pthread_mutex_unlock"));
    assert!(
        locked.iter().any(|m| unlocked.contains(m)),
        "work's mutex is locked and unlocked: {calls:?}"
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn shared_library_functions_by_short_name() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_lib", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "libc:pthread_join", "--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    let joins: Vec<_> = calls_on(&s, 0, 0).into_iter().map(|(n, i, _, r)| (n, i, r)).collect();
    assert_eq!(
        joins,
        vec![("pthread_join".into(), 1, Some(0)), ("pthread_join".into(), 2, Some(0))]
    );
    assert!(s.functions[0].module.to_string_lossy().contains("libc.so"));
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn crash_and_exit_codes_label_runs() {
    let _bpf = require_bpf();
    let exe = c_fixture("crash.c", "crash", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "poke", "--runs", "1", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    let r = &s.runs[0];
    assert_eq!(r.label, Label::Fail);
    assert_eq!(r.outcome.signal, Some(libc::SIGSEGV));
    assert_eq!(r.outcome.reason, "killed by SIGSEGV");
    // The call never returned.
    assert_eq!(calls_on(&s, 0, 0), vec![("poke".to_owned(), 1, [0, 0, 0], None)]);
}

/// A call still running when another thread aborts the process
/// (abort_blocked.c: the worker waits in `wait_for_lock` for the lock main
/// holds when it aborts) ends with the process, when its last thread
/// exited as the kernel dated it: before the agent's wait woke, whose
/// clock (`wall_ns`) started before the program was even executed. Before,
/// the run ended at the later of the two, and such a call looked slower in
/// every failing run by the agent's wake-up latency.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_run_killed_by_a_signal_ends_when_its_threads_exited() {
    let _bpf = require_bpf();
    let exe = c_fixture("abort_blocked.c", "abort_blocked", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "wait_for_lock", "-t", "fail_now", "--runs", "3", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    for (i, r) in s.runs.iter().enumerate() {
        assert_eq!(r.outcome.signal, Some(libc::SIGABRT));
        let calls = calls_on(&s, i, 0);
        assert_eq!(calls, vec![("fail_now".to_owned(), 1, [0, 0, 0], None)]);
        let waits = calls_on(&s, i, 1);
        assert_eq!(waits, vec![("wait_for_lock".to_owned(), 1, [0, 0, 0], None)]);
        let aborted = s.runs[i].calls.iter().map(|c| c.entry_ns).max().unwrap();
        assert!(r.end_ns > aborted, "run {i}: {} <= {aborted}", r.end_ns);
        assert!(r.end_ns < r.outcome.wall_ns, "run {i}: {} >= {}", r.end_ns, r.outcome.wall_ns);
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn fail_rules_exit_code_output_and_timeout() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_rules", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "add3", "--runs", "1", "--fail-on", "exit=0", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    assert_eq!((s.runs[0].label, s.runs[0].outcome.reason.as_str()), (Label::Fail, "exit code 0"));

    // service.c prints its pid and never exits.
    let exe = c_fixture("service.c", "service", &[]);
    let (_tmp2, out) = temp_session();
    run_ok(
        agent()
            .args([
                "record",
                "-t",
                "lookup",
                "--runs",
                "1",
                "--timeout",
                "300ms",
                "--fail-on",
                "stdout:^[0-9]+$",
                "--out",
            ])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let s = load(&out);
    let r = &s.runs[0];
    assert_eq!(
        (r.label, r.outcome.reason.as_str(), r.outcome.timed_out),
        (Label::Fail, "timed out", true)
    );
    assert_eq!(r.outcome.signal, Some(libc::SIGKILL));
    assert!(r.calls.len() > 10);
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn lost_events_are_counted_and_runs_marked_incomplete() {
    let _bpf = require_bpf();
    let exe = c_fixture("hot.c", "hot", &[]);
    let (_tmp, out) = temp_session();
    // Five million calls overflow a 4 KiB ring buffer many times over.
    let output = run_ok(
        agent()
            .args(["record", "-t", "hot", "--runs", "1", "--ring-size", "4096", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg("5000000"),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let loaded = aid::store::load_full(&out).unwrap();
    let (rec, run) = (&loaded.records[0], &loaded.session.runs[0]);
    assert!(run.lost_events > 0, "a 4 KiB ring buffer cannot keep up with 10M events");
    assert!(!run.complete);
    assert_eq!(run.label, Label::Pass, "the target ran to its end");
    // Every one of the 10,000,000 entry/exit events was delivered (a row,
    // or an exit whose entry was lost) or counted as lost: nothing silently
    // dropped. Thread and exec records lost are counted apart.
    let lost_calls = run.lost_events - run.lost_thread_records;
    assert_eq!(rec.events.rows + rec.orphan_exits + lost_calls, 10_000_000);
    assert!(stderr.contains(&format!("1 run(s) lost {} event(s)", run.lost_events)), "{stderr}");
}

fn start_service() -> Background {
    let (svc, line) = serving(&mut Command::new(c_fixture("service.c", "service", &[])));
    assert_eq!(line.trim().parse::<u32>().unwrap(), svc.pid());
    svc
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn attach_records_units_of_a_running_process() {
    let _bpf = require_bpf();
    let svc = start_service();
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args([
                "attach",
                "--pid",
                &svc.pid().to_string(),
                "--unit",
                "handle_request",
                "-t",
                "lookup",
            ])
            .args(["--fail-if", "handle_request ret < 0", "--duration", "1s", "--out"])
            .arg(&out),
    );
    let s = load(&out);
    assert!(s.runs.len() > 50, "only {} units in 1 s", s.runs.len());
    for r in &s.runs {
        let calls = calls_on(&s, (r.id - 1) as usize, 0);
        let id = calls[0].2[0];
        let expect_ret = if id % 3 == 2 { -1 } else { id * 2 };
        assert_eq!(
            calls,
            vec![
                c("handle_request", 1, [id, 0, 0], expect_ret),
                c("lookup", 1, [id, 0, 0], id * 2)
            ],
            "unit {}",
            r.id
        );
        assert_eq!(r.label == Label::Fail, id % 3 == 2);
        if r.label == Label::Fail {
            assert_eq!(r.outcome.reason, "ret of handle_request = -1 (handle_request ret < 0)");
        }
    }
    // Consecutive units handle consecutive requests.
    let ids: Vec<i64> = s.runs.iter().map(|r| r.calls[0].args[0]).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    assert!(alive(svc.pid()));
}

/// The same service compiled as C++: `--unit handle_request` and
/// `--fail-if 'handle_request ret < 0'` name `handle_request(int)` as `-t`
/// does, and every unit whose request returned -1 fails (issue 24: the
/// condition was accepted and never fired, and `--unit` was refused).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn unit_and_fail_if_name_a_cpp_function_without_its_parameters() {
    let _bpf = require_bpf();
    let (svc, _) = serving(&mut Command::new(c_fixture("service_cxx.cpp", "service_cxx", &[])));
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["attach", "--pid", &svc.pid().to_string(), "--unit", "handle_request"])
            .args(["-t", "lookup", "--fail-if", "handle_request ret < 0", "--duration", "1s"])
            .arg("--out")
            .arg(&out),
    );
    let s = load(&out);
    let names: Vec<&str> = s.functions.iter().map(|f| f.name.as_str()).collect();
    assert!(names.contains(&"handle_request(int)"), "{names:?}");
    assert!(s.runs.len() > 50, "only {} units in 1 s", s.runs.len());
    let handle = s.functions.iter().position(|f| f.name == "handle_request(int)").unwrap();
    for r in &s.runs {
        let call = r.calls.iter().find(|c| c.func as usize == handle).expect("the unit's call");
        let id = call.args[0];
        assert_eq!(r.label == Label::Fail, id % 3 == 2, "unit {} (request {id})", r.id);
        if r.label == Label::Fail {
            assert_eq!(
                r.outcome.reason,
                "ret of handle_request(int) = -1 (handle_request ret < 0)"
            );
        }
    }
    assert!(s.runs.iter().any(|r| r.label == Label::Fail));
    assert!(alive(svc.pid()));
}

/// `aid-agent attach` on the service in the background, once it has said
/// it is attached; the address of handle_request's first instruction, and
/// the byte that was there before any probe.
fn attach_in_background(
    svc: &Background,
    extra: &[&str],
    out: &std::path::Path,
) -> (std::process::Child, u64, u8) {
    let exe = c_fixture("service.c", "service", &[]);
    let addr = runtime_address(svc.pid(), &exe, "handle_request");
    let original = code_byte(svc.pid(), addr);
    assert_ne!(original, 0xcc, "no probe before attaching");
    let mut agent_proc = agent()
        .args(["attach", "--pid", &svc.pid().to_string()])
        .args(extra)
        .arg("--out")
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The lines before it say where the symbols came from.
    let mut stderr = BufReader::new(agent_proc.stderr.as_mut().unwrap());
    let mut line = String::new();
    while !line.contains("attached to pid") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the agent ended before attaching");
    }
    (agent_proc, addr, original)
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn agent_sigkill_leaves_target_running_and_untraced() {
    let _bpf = require_bpf();
    let svc = start_service();
    let (_tmp, out) = temp_session();
    let (mut agent_proc, addr, original) =
        attach_in_background(&svc, &["-t", "handle_request"], &out);
    assert_eq!(code_byte(svc.pid(), addr), 0xcc, "uprobe installed while attached");
    agent_proc.kill().unwrap();
    agent_proc.wait().unwrap();
    // The kernel tears down probes when the agent's descriptors close.
    let deadline = Instant::now() + Duration::from_secs(5);
    while code_byte(svc.pid(), addr) == 0xcc && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(code_byte(svc.pid(), addr), original, "uprobe removed after SIGKILL");
    std::thread::sleep(Duration::from_millis(50));
    assert!(alive(svc.pid()), "target survives the agent");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn ctrl_c_detaches_and_keeps_what_was_recorded() {
    let _bpf = require_bpf();
    let svc = start_service();
    let (_tmp, out) = temp_session();
    let (mut agent_proc, addr, original) =
        attach_in_background(&svc, &["--unit", "handle_request"], &out);
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent_proc.id() as i32),
        nix::sys::signal::SIGINT,
    )
    .unwrap();
    let status = agent_proc.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(code_byte(svc.pid(), addr), original);
    assert!(alive(svc.pid()));
    assert!(load(&out).runs.len() >= 10);
}

// ---- errors: one line, exit code 2 ----

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn error_pattern_matches_nothing_lists_close_matches() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_err", &[]);
    let line = run_err(agent().args(["record", "-t", "add", "--"]).arg(&exe));
    assert!(line.contains("pattern `add` matches no function in"), "{line}");
    assert!(line.contains("close matches: add3"), "{line}");
}

#[test]
fn error_pid_not_found() {
    let line = run_err(agent().args(["attach", "--pid", "999999999", "-t", "x"]));
    assert_eq!(line, "aid: pid 999999999 not found: is the process still running?");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn error_not_elf() {
    let _bpf = require_bpf();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let line = run_err(agent().args(["record", "-t", "x", "--"]).arg(&script));
    assert!(
        line.ends_with(
            "script.sh is not an ELF file: aid traces native executables and shared libraries"
        ),
        "{line}"
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn error_stripped_binary() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_strip", &[]);
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("stripped");
    assert!(
        Command::new("strip")
            .arg("-s")
            .arg("-o")
            .arg(&stripped)
            .arg(&exe)
            .status()
            .unwrap()
            .success()
    );
    let line = run_err(agent().args(["record", "-t", "add3", "--"]).arg(&stripped));
    assert!(line.contains("has no function symbols (stripped, and no debug file found"), "{line}");
}

/// A C++ program whose exception unwinds through two traced functions
/// (exceptions.cpp: `parse` throws, `middle` has no handler, `outer`
/// catches). Untraced it prints "sum 78" and exits 0, always. With return
/// probes the unwinder would meet the kernel's trampoline and end the
/// program with SIGABRT; aid puts the return addresses back while the
/// exception unwinds and re-arms the live frames at the catch
/// (intervene/returns.rs), so it runs as untraced, says so before the
/// first run, and records every return that happened: all ten of
/// `outer` (three of them -1, after the catch) and the seven of `middle`
/// and `parse` no exception crossed. A C++ program that never throws
/// gets no such line.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_program_that_throws_through_traced_functions_runs_as_untraced() {
    let _bpf = require_bpf();
    let exe = c_fixture("exceptions.cpp", "exceptions", &[]);
    let untraced = Command::new(&exe).output().unwrap();
    assert_eq!(untraced.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&untraced.stdout), "sum 78\n");
    let (_tmp, out) = temp_session();
    let record = |exe: &std::path::Path, patterns: &[&str], out: &std::path::Path| {
        let mut cmd = agent();
        cmd.arg("record");
        for p in patterns {
            cmd.args(["-t", p]);
        }
        let output =
            cmd.args(["--runs", "2", "--out"]).arg(out).arg("--").arg(exe).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = record(&exe, &["parse", "middle", "outer"], &out);
    let said = "aid: exceptions throws C++ exceptions (it calls __cxa_throw): aid puts back the return addresses an exception unwinds through, so the program runs as untraced; a traced call an exception leaves ends where the exception is caught, without a return value (docs/probes.md, \"Exceptions\")";
    assert!(stderr.lines().any(|l| l == said), "{stderr}");
    let s = load(&out);
    for run in 0..2 {
        assert_eq!(s.runs[run].label, Label::Pass);
        let stdout = std::fs::read_to_string(out.join(format!("runs/{:06}/stdout.txt", run + 1)));
        assert_eq!(stdout.unwrap(), "sum 78\n");
        let calls = calls_on(&s, run, 0);
        let returns = |name: &str| -> Vec<i64> {
            calls.iter().filter(|c| c.0 == name).filter_map(|c| c.3).collect()
        };
        let entries = |name: &str| calls.iter().filter(|c| c.0 == name).count();
        assert_eq!(returns("outer(int)"), vec![3, 5, -1, 9, 11, -1, 15, 17, -1, 21]);
        assert_eq!(returns("middle(int)"), vec![3, 5, 9, 11, 15, 17, 21]);
        assert_eq!(returns("parse(int)"), vec![2, 4, 8, 10, 14, 16, 20]);
        for name in ["outer(int)", "middle(int)", "parse(int)"] {
            assert_eq!(entries(name), 10, "{name}");
        }
        assert_unwound_inside(&s, run, "outer(int)", &["middle(int)", "parse(int)"]);
    }
    let quiet = c_fixture("std_threads.cpp", "std_threads", &[]);
    let (_tmp2, out2) = temp_session();
    let stderr = record(&quiet, &["pool::step"], &out2);
    assert!(!stderr.contains("C++ exceptions"), "{stderr}");
}

/// A program with no throw expression of its own whose library throws
/// (exceptions_std.cpp: `std::stoi` throws `std::invalid_argument` from
/// inside libstdc++, through `parse` and `middle`, caught in `outer`) is
/// known to throw by the library's throw helper it calls, and runs traced
/// as untraced.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_program_whose_library_throws_runs_as_untraced() {
    let _bpf = require_bpf();
    let exe = c_fixture("exceptions_std.cpp", "exceptions_std", &[]);
    let untraced = Command::new(&exe).output().unwrap();
    assert_eq!(untraced.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&untraced.stdout), "sum 41\n");
    let (_tmp, out) = temp_session();
    let output = agent()
        .args(["record", "-t", "parse", "-t", "middle", "-t", "outer", "--runs", "2", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = "aid: exceptions_std throws C++ exceptions (it calls std::__throw_invalid_argument): aid puts back the return addresses";
    assert!(stderr.lines().any(|l| l.starts_with(said)), "{stderr}");
    let s = load(&out);
    for run in 0..2 {
        assert_eq!(s.runs[run].label, Label::Pass);
        let stdout = std::fs::read_to_string(out.join(format!("runs/{:06}/stdout.txt", run + 1)));
        assert_eq!(stdout.unwrap(), "sum 41\n");
        let outer: Vec<i64> = calls_on(&s, run, 0)
            .iter()
            .filter(|c| c.0.starts_with("outer("))
            .filter_map(|c| c.3)
            .collect();
        assert_eq!(outer, vec![2, 3, -1, 5, 6, -1, 8, 9, -1, 11]);
        assert_unwound_inside(&s, run, "outer", &["middle", "parse"]);
    }
}

/// Calls 3, 6 and 9 of each of `crossed` (a name, or a C++ name without
/// its parameters) did not return: the exception (or panic) thrown in
/// them was caught in call k of `catcher`, so each ended inside that
/// call, by the catch, and after its own entry.
fn assert_unwound_inside(s: &aid::model::Session, run: usize, catcher: &str, crossed: &[&str]) {
    let calls = &s.runs[run].calls;
    let named = |f: &str, name: &str| f == name || f.starts_with(&format!("{name}("));
    let call = |name: &str, k: u32| {
        calls
            .iter()
            .find(|c| named(&s.functions[c.func as usize].name, name) && c.instance == k)
            .unwrap_or_else(|| panic!("no call {k} of {name}"))
    };
    for k in [3, 6, 9] {
        let outer = call(catcher, k);
        for name in crossed {
            let c = call(name, k);
            assert_eq!(c.ret, None, "call {k} of {name}");
            let end = c.exit_ns.unwrap_or_else(|| panic!("call {k} of {name} never ended"));
            assert!(
                outer.entry_ns < c.entry_ns && c.entry_ns <= end && end <= outer.exit_ns.unwrap(),
                "call {k} of {name}: {c:?} not inside {outer:?}"
            );
        }
    }
}

/// A Rust panic that unwinds through two traced functions (panics.rs:
/// `leaf` panics, `middle` has no handler, `outer` catches with
/// `catch_unwind`) is repaired like a C++ exception, the catch point being
/// the standard library's `__rust_panic_cleanup`: the program prints what
/// it prints untraced, and `outer`'s ten returns are recorded, three of
/// them -1 after the catch.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_rust_panic_through_traced_functions_leaves_the_program_as_untraced() {
    let _bpf = require_bpf();
    let exe = rust_fixture("panics.rs", "panics");
    let untraced = Command::new(&exe).output().unwrap();
    assert_eq!(untraced.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&untraced.stdout), "sum 41\n");
    let (_tmp, out) = temp_session();
    let output = agent()
        .args(["record", "-t", "panics::leaf", "-t", "panics::middle", "-t", "panics::outer"])
        .args(["--runs", "2", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = "aid: panics unwinds its stack on a panic or an exception (it calls _Unwind_RaiseException): aid puts back the return addresses an exception unwinds through, so the program runs as untraced; a traced call an exception leaves ends where the exception is caught, without a return value (docs/probes.md, \"Exceptions\")";
    assert!(stderr.lines().any(|l| l == said), "{stderr}");
    let s = load(&out);
    for run in 0..2 {
        assert_eq!(s.runs[run].label, Label::Pass);
        let stdout = std::fs::read_to_string(out.join(format!("runs/{:06}/stdout.txt", run + 1)));
        assert_eq!(stdout.unwrap(), "sum 41\n");
        let calls = calls_on(&s, run, 0);
        let returns = |name: &str| -> Vec<i64> {
            calls.iter().filter(|c| c.0 == name).filter_map(|c| c.3).collect()
        };
        assert_eq!(returns("panics::outer"), vec![2, 3, -1, 5, 6, -1, 8, 9, -1, 11]);
        assert_eq!(returns("panics::middle"), vec![2, 3, 5, 6, 8, 9, 11]);
        assert_eq!(returns("panics::leaf"), vec![1, 2, 4, 5, 7, 8, 10]);
        assert_unwound_inside(&s, run, "panics::outer", &["panics::middle", "panics::leaf"]);
    }
}

/// Exceptions in every shape, on two threads at once
/// (exceptions_nested.cpp): a throw through three traced frames, a
/// rethrow from a handler, a destructor that throws and catches while
/// another exception unwinds (each catch re-arms only its own unwind's
/// frames), a throw inside a handler. Built without optimisation and
/// with `-O1` (where the destructor is inlined into the cleanup and its
/// call of `leaf` reuses the return slot of the `leaf` call the first
/// exception crossed). Traced, the program prints what it prints
/// untraced, and aid records exactly the calls and normal returns the
/// program counted itself, and the end of every other call.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn exceptions_in_every_shape_leave_the_program_as_untraced_and_its_returns_recorded() {
    let _bpf = require_bpf();
    for (flags, name) in [(&[][..], "exceptions_nested"), (&["-O1"][..], "exceptions_nested_o1")] {
        let exe = c_fixture("exceptions_nested.cpp", name, flags);
        let untraced = Command::new(&exe).output().unwrap();
        assert_eq!(untraced.status.code(), Some(0));
        let expected = String::from_utf8_lossy(&untraced.stdout).into_owned();
        let (_tmp, out) = temp_session();
        run_ok(
            agent()
                .args(["record", "-t", "leaf", "-t", "guarded", "-t", "rethrower"])
                .args(["-t", "catcher", "-t", "worker", "--runs", "2", "--out"])
                .arg(&out)
                .arg("--")
                .arg(&exe),
        );
        let s = load(&out);
        for run in 0..2 {
            assert_eq!(s.runs[run].label, Label::Pass, "{name}");
            let stdout =
                std::fs::read_to_string(out.join(format!("runs/{:06}/stdout.txt", run + 1)));
            assert_eq!(stdout.unwrap(), expected, "{name}");
            // "leaf 424 136": calls and normal returns, as the program
            // counted them.
            for line in expected.lines().skip(1) {
                let mut words = line.split(' ');
                let function = format!("{}(", words.next().unwrap());
                let counted: Vec<usize> = words.map(|w| w.parse().unwrap()).collect();
                let mine: Vec<&aid::model::Call> = s.runs[run]
                    .calls
                    .iter()
                    .filter(|c| s.functions[c.func as usize].name.starts_with(&function))
                    .collect();
                let returned = mine.iter().filter(|c| c.ret.is_some()).count();
                assert_eq!(vec![mine.len(), returned], counted, "{name}: {line}");
                // Every exception is caught: each call that did not
                // return ended when a handler caught what unwound it.
                assert!(mine.iter().all(|c| c.exit_ns.is_some()), "{name}: {line}");
            }
        }
    }
}

#[test]
fn error_missing_program() {
    let line = run_err(agent().args(["record", "-t", "x", "--", "/nonexistent/prog"]));
    assert_eq!(line, "aid: `/nonexistent/prog` not found: give a path or a program on PATH");
}
