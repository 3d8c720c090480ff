//! The intervention machinery end to end: kernel trigger, thread stop,
//! ptrace action, resume — on fixtures compiled at test time.

use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use crate::common::*;
use aid::model::{Call, Label, Session};

/// Runs `aid-agent intervene` with a JSON plan and loads the session.
fn intervene(exe: &Path, args: &[&str], trace: &[&str], plan: &str, extra: &[&str]) -> Session {
    let (tmp, out) = temp_session();
    let plan_path = tmp.path().join("plan.json");
    std::fs::write(&plan_path, plan).unwrap();
    let mut cmd = agent();
    cmd.arg("intervene");
    for t in trace {
        cmd.args(["-t", t]);
    }
    cmd.arg("--plan")
        .arg(&plan_path)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .arg("--")
        .arg(exe)
        .args(args);
    run_ok(&mut cmd);
    let s = load(&out);
    drop(tmp);
    s
}

/// The plan that holds the entry of the second traced function's first
/// call on thread 2 until the first function's first call on thread 1 has
/// returned.
const HOLD_SECOND_UNTIL_FIRST_RETURNED: &str = r#"[{"kind":"hold_until",
    "site":{"func":1,"role":2,"instance":1},"point":"entry",
    "until":{"func":0,"role":1,"instance":1},"until_point":"exit"}]"#;

fn call<'a>(s: &'a Session, name: &str, role: u32) -> &'a Call {
    s.runs[0]
        .calls
        .iter()
        .find(|c| s.functions[c.func as usize].name == name && c.role == role)
        .unwrap_or_else(|| panic!("no call of {name} on role {role}"))
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn return_early_and_override_change_what_the_program_sees() {
    let _bpf = require_bpf();
    let exe = c_fixture("intervene.c", "intervene", &[]);
    // Without interventions the program fails.
    let s = intervene(&exe, &[], &["answer", "slow"], "[]", &[]);
    assert_eq!(s.runs[0].label, Label::Fail);
    let plan = r#"[{"kind":"override_return","site":{"func":0,"role":0,"instance":1},"value":42},
                   {"kind":"return_early","site":{"func":1,"role":0,"instance":1},"value":9}]"#;
    let s = intervene(&exe, &[], &["answer", "slow"], plan, &[]);
    let r = &s.runs[0];
    assert_eq!((r.label, r.outcome.exit_code), (Label::Pass, Some(0)));
    assert!(r.interventions.iter().all(|a| a.applied && !a.timed_out));
    assert_eq!(call(&s, "answer", 0).ret, Some(42));
    let slow = call(&s, "slow", 0);
    assert_eq!(slow.ret, Some(9));
    // slow's 200 ms sleep never ran.
    assert!(slow.duration_ns().unwrap() < 100_000_000, "{:?}", slow.duration_ns());
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn delay_before_return_holds_only_that_thread() {
    let _bpf = require_bpf();
    let exe = c_fixture("intervene.c", "intervene", &[]);
    let plan =
        r#"[{"kind":"delay_exit","site":{"func":0,"role":0,"instance":1},"delay_us":80000}]"#;
    let s = intervene(&exe, &[], &["answer"], plan, &[]);
    let answer = call(&s, "answer", 0);
    let held = answer.duration_ns().unwrap();
    assert!((80_000_000..200_000_000).contains(&held), "answer took {held} ns");
    assert!(s.runs[0].interventions[0].applied);
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn serialize_removes_the_overlap_on_the_same_object() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let overlaps = |s: &Session| {
        let (a, b) = (call(s, "critical", 1), call(s, "critical", 2));
        assert_eq!(a.args[0], b.args[0], "same object");
        a.entry_ns < b.exit_ns.unwrap() && b.entry_ns < a.exit_ns.unwrap()
    };
    let s = intervene(&exe, &["race"], &["critical"], "[]", &[]);
    assert!(overlaps(&s), "the barrier makes the two calls overlap");
    let plan = r#"[{"kind":"serialize","a":{"func":0,"role":1,"instance":1},"b":{"func":0,"role":2,"instance":1}}]"#;
    let s = intervene(&exe, &["race"], &["critical"], plan, &[]);
    assert!(!overlaps(&s), "serialized calls must not overlap");
    assert!(s.runs[0].interventions[0].applied);
}

/// Rounds of the `races` scenario: each is one more chance for the two
/// entry probes to run at the same moment on the two CPUs.
const ROUNDS: u32 = 60;

/// Rounds (by instance) in which the two threads' calls of `touch`
/// overlapped.
fn overlapping_rounds(s: &Session) -> Vec<u32> {
    let touches = |role| -> Vec<&Call> {
        s.runs[0]
            .calls
            .iter()
            .filter(|c| s.functions[c.func as usize].name == "touch" && c.role == role)
            .collect()
    };
    let (a, b) = (touches(1), touches(2));
    assert_eq!((a.len(), b.len()), (ROUNDS as usize, ROUNDS as usize), "every call recorded");
    a.iter()
        .zip(&b)
        .filter(|(a, b)| {
            assert_eq!(a.instance, b.instance);
            a.entry_ns < b.exit_ns.unwrap() && b.entry_ns < a.exit_ns.unwrap()
        })
        .map(|(a, _)| a.instance)
        .collect()
}

/// One run of the fixture's ROUNDS racing rounds of `touch` under `plan`
/// (holds time out after 300 ms).
fn races(plan: &str) -> Session {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let rounds = ROUNDS.to_string();
    intervene(&exe, &["races", rounds.as_str()], &["touch"], plan, &["--hold-timeout", "300ms"])
}

/// The race of the test above, ROUNDS times in one run: the two threads
/// enter `touch` together after a barrier, round after round, and every
/// pair of calls is serialised by its own intervention. Acceptance rule:
/// without interventions at least half of the rounds overlap (the
/// scenario races); with them no round overlaps and every intervention
/// is carried out within its hold timeout.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn serialize_holds_in_every_round_of_racing_pairs() {
    let s = races("[]");
    let raced = overlapping_rounds(&s).len();
    assert!(raced >= ROUNDS as usize / 2, "only {raced} of {ROUNDS} rounds overlap");
    let plan: Vec<String> = (1..=ROUNDS)
        .map(|k| {
            format!(
                r#"{{"kind":"serialize","a":{{"func":0,"role":1,"instance":{k}}},"b":{{"func":0,"role":2,"instance":{k}}}}}"#
            )
        })
        .collect();
    let s = races(&format!("[{}]", plan.join(",")));
    let ivs = &s.runs[0].interventions;
    let failed: Vec<usize> =
        (0..ivs.len()).filter(|&i| !ivs[i].applied || ivs[i].timed_out).collect();
    assert_eq!(
        (overlapping_rounds(&s), failed),
        (vec![], vec![]),
        "rounds that overlapped, interventions not carried out"
    );
}

/// The same rounds serialised as two groups (every call of `touch` on
/// thread 1 against every call on thread 2, on the same object), with the
/// same acceptance rule.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn serialize_groups_holds_in_every_round_of_racing_pairs() {
    let plan = r#"[{"kind":"serialize_groups",
        "a":{"func":0,"roles":[1],"instance":0},
        "b":{"func":0,"roles":[2],"instance":0},"object":[1,1]}]"#;
    let s = races(plan);
    let iv = &s.runs[0].interventions[0];
    assert_eq!(
        (overlapping_rounds(&s), iv.applied, iv.timed_out),
        (vec![], true, false),
        "rounds that overlapped, applied, timed out"
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn hold_until_forces_the_order() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let s = intervene(&exe, &["order"], &["first", "second"], "[]", &[]);
    assert!(call(&s, "second", 2).entry_ns < call(&s, "first", 1).exit_ns.unwrap());
    let plan = HOLD_SECOND_UNTIL_FIRST_RETURNED;
    let s = intervene(&exe, &["order"], &["first", "second"], plan, &[]);
    assert!(call(&s, "second", 2).entry_ns >= call(&s, "first", 1).exit_ns.unwrap());
    assert!(s.runs[0].interventions[0].applied);
}

/// A hold at a function's return until another call has returned (the
/// negation of "A ends before B starts" when passing runs had B run
/// inside A): `second` enters while `first` sleeps and, held before it
/// returns, returns only after `first` has.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn hold_at_return_until_another_call_has_returned() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let s = intervene(&exe, &["order"], &["first", "second"], "[]", &[]);
    assert!(call(&s, "second", 2).exit_ns.unwrap() < call(&s, "first", 1).exit_ns.unwrap());
    let plan = r#"[{"kind":"hold_until","site":{"func":1,"role":2,"instance":1},"point":"exit",
                    "until":{"func":0,"role":1,"instance":1},"until_point":"exit"}]"#;
    let s = intervene(&exe, &["order"], &["first", "second"], plan, &[]);
    let (first, second) = (call(&s, "first", 1), call(&s, "second", 2));
    assert!(s.runs[0].interventions[0].applied);
    assert!(second.entry_ns < first.exit_ns.unwrap(), "held at its return, not its entry");
    assert!(second.exit_ns.unwrap() >= first.exit_ns.unwrap());
    assert_eq!(second.ret, Some(2), "the held call returns its own value");
}

/// Regression: the kernel runs a probed function's first instruction before
/// the stop signal is delivered. At -O1, read_flag's first instruction is
/// the read itself, so a hold at its entry used to come too late: the read
/// had happened. The agent now rewinds the thread to the first instruction.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn hold_at_entry_comes_before_the_first_instruction() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv_o1", &["-O1"]);
    let s = intervene(&exe, &["readflag"], &["set_flag", "read_flag"], "[]", &[]);
    assert_eq!((s.runs[0].label, call(&s, "read_flag", 2).ret), (Label::Fail, Some(0)));
    let plan = HOLD_SECOND_UNTIL_FIRST_RETURNED;
    let s = intervene(&exe, &["readflag"], &["set_flag", "read_flag"], plan, &[]);
    let r = &s.runs[0];
    assert!(r.interventions[0].applied);
    assert_eq!((r.label, call(&s, "read_flag", 2).ret), (Label::Pass, Some(1)));
    // The repeated entry and the duplicate return are not recorded.
    let reads: Vec<_> =
        r.calls.iter().filter(|c| s.functions[c.func as usize].name == "read_flag").collect();
    assert_eq!(reads.len(), 1);
    assert!(reads[0].entry_ns >= call(&s, "set_flag", 1).exit_ns.unwrap());
}

/// A call that waits for another's return waits for the return itself,
/// not for its probe: set_flag's return is held 50 ms (a delay, as noise
/// or another intervention holds it), and read_flag, held at its entry
/// until set_flag has returned, enters only after that return was let go.
/// (When the probe marked the return, read_flag went at 20 ms, 50 ms before
/// set_flag returned; at an entry the same let a call go while the one it
/// waited for was still held before its first instruction.)
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_hold_waits_for_the_other_call_to_be_let_go() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv_o1", &["-O1"]);
    let plan = r#"[{"kind":"hold_until","site":{"func":1,"role":2,"instance":1},"point":"entry",
                    "until":{"func":0,"role":1,"instance":1},"until_point":"exit"},
                   {"kind":"delay_exit","site":{"func":0,"role":1,"instance":1},"delay_us":50000}]"#;
    let s = intervene(&exe, &["readflag"], &["set_flag", "read_flag"], plan, &[]);
    let r = &s.runs[0];
    assert!(r.interventions.iter().all(|a| a.applied && !a.timed_out), "{:?}", r.interventions);
    let (set, read) = (call(&s, "set_flag", 1), call(&s, "read_flag", 2));
    let returned = set.exit_ns.unwrap();
    assert!(returned - set.entry_ns >= 50_000_000, "set_flag's return was held 50 ms");
    assert!(
        read.entry_ns >= returned,
        "read_flag entered at {} ns, set_flag returned at {returned}",
        read.entry_ns
    );
    assert_eq!((r.label, read.ret), (Label::Pass, Some(1)));
}

/// b_step is what lets a_poll finish, and a_poll polls for it every
/// millisecond: holding b_step until a_poll ends cannot be satisfied, but
/// a thread still runs (it might yet bring the event), so the hold lasts
/// until its timeout.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_hold_that_cannot_be_satisfied_is_released_at_its_timeout() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let plan = HOLD_SECOND_UNTIL_FIRST_RETURNED;
    let started = Instant::now();
    let s = intervene(&exe, &["stall"], &["a_poll", "b_step"], plan, &["--hold-timeout", "300ms"]);
    assert!(started.elapsed() < Duration::from_secs(20));
    let r = &s.runs[0];
    assert_eq!(r.label, Label::Pass, "the program finished once released");
    assert!(!r.interventions[0].applied && r.interventions[0].timed_out);
    let b = call(&s, "b_step", 2);
    let a = call(&s, "a_poll", 1);
    assert!(
        b.entry_ns >= a.entry_ns + 300_000_000 - 50_000_000,
        "held ~300 ms: {} vs {}",
        b.entry_ns,
        a.entry_ns
    );
}

/// b_step is what lets a_step finish, and a_step waits for it in
/// `sem_wait` (main in `pthread_join`): with b_step held until a_step
/// ends, no thread can run at all. The hold is given up as soon as two
/// looks agree, not at its 30 s timeout, which would have outlasted the
/// run's 20 s: the run ends by itself, the hold not applied.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_hold_nothing_can_satisfy_is_given_up_at_once() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let plan = HOLD_SECOND_UNTIL_FIRST_RETURNED;
    let extra = ["--hold-timeout", "30s", "--timeout", "20s"];
    let s = intervene(&exe, &["deadlock"], &["a_step", "b_step"], plan, &extra);
    let r = &s.runs[0];
    assert!(!r.outcome.timed_out && r.label == Label::Pass, "{:?}", r.outcome);
    let iv = &r.interventions[0];
    assert_eq!((iv.applied, iv.timed_out), (false, true), "applied, timed out");
    let (a, b) = (call(&s, "a_step", 1), call(&s, "b_step", 2));
    assert!(b.entry_ns > a.entry_ns && a.exit_ns.is_some_and(|x| x > b.entry_ns));
}

/// A target the agent holds in a ptrace stop (as a run deadlocked under
/// an intervention would wait) ends with the agent when it is SIGKILLed:
/// it was left running with no parent to end it.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_held_target_ends_with_the_killed_agent() {
    let _bpf = require_bpf();
    let exe = c_fixture("threads_iv.c", "threads_iv", &[]);
    let (tmp, out) = temp_session();
    let progress = tmp.path().join("progress");
    let plan_path = tmp.path().join("plan.json");
    // Hold the third step for a minute.
    std::fs::write(
        &plan_path,
        r#"[{"kind":"delay_exit","site":{"func":0,"role":0,"instance":3},"delay_us":60000000}]"#,
    )
    .unwrap();
    let mut agent_proc = agent()
        .args(["intervene", "-t", "step", "--hold-timeout", "120s", "--timeout", "120s", "--plan"])
        .arg(&plan_path)
        .arg("--out")
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .arg("loop")
        .arg(&progress)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the target is held in a ptrace stop.
    let deadline = Instant::now() + Duration::from_secs(20);
    let target = loop {
        assert!(Instant::now() < deadline, "the target was never held");
        if let Some(&t) = children_of(agent_proc.id()).first()
            && proc_state(t) == 't'
        {
            break t;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(proc_state(target), 't', "still held");
    agent_proc.kill().unwrap();
    agent_proc.wait().unwrap();
    let gone = wait_for(5, || !alive(target));
    if !gone {
        // SAFETY: killing the fixture we started.
        unsafe { libc::kill(target as i32, libc::SIGKILL) };
    }
    assert!(gone, "the target outlived the agent by 5 s (state {})", proc_state(target));
    // The session stays readable (the run in progress was never finished).
    assert_eq!(load(&out).runs.len(), 0);
}

/// `debug --pid`: a running service is debugged on its later requests,
/// never restarted, and left running untraced.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn debug_a_live_service_on_later_requests() {
    let _bpf = require_bpf();
    let exe = c_fixture("live_service.c", "live_service", &["-O1"]);
    let mut child = std::process::Command::new(&exe).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let svc = Background(child);
    let pid = svc.pid();
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args([
                "debug",
                "--pid",
                &pid.to_string(),
                "--unit",
                "handle_request",
                "--fail-if",
                "handle_request ret < 0",
            ])
            .args([
                "-t",
                "fetch",
                "-t",
                "parse",
                "-t",
                "lookup_user",
                "-t",
                "audit",
                "--safe",
                "fetch",
                "--safe",
                "parse",
                "--out",
            ])
            .arg(&out),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let path: Vec<&str> = report["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["predicate"].as_str().unwrap())
        .collect();
    assert_eq!(path.len(), 2, "{text}");
    assert!(
        path[0].starts_with("call 1 of fetch on ")
            && path[0].ends_with("returns an error: a negative value"),
        "{text}"
    );
    assert!(
        path[1].starts_with("call 1 of parse on ")
            && path[1].contains("returns a value other than 50,"),
        "{text}"
    );
    // The same process, still running, no longer traced.
    assert!(alive(pid));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    // Every intervened unit was a later request of that process.
    let loaded = aid::store::load_full(&out).unwrap();
    assert_eq!(loaded.header.pid, Some(pid));
    assert!(loaded.session.runs.iter().any(|r| !r.interventions.is_empty()));
}

/// Re-execution of every call of a function in one calling context: the
/// failed `fetch` made from `norm` runs again and returns the value that
/// second run computes (702: key 7, attempt 2), which the program prints;
/// the `fetch` made from `intern` is outside the context and keeps its -1.
/// The re-executed call is recorded once, with its genuine value, and the
/// agent's stop as a pause.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn reexecution_returns_the_value_a_second_run_computes() {
    let _bpf = require_bpf();
    let exe = c_fixture("reexec.c", "reexec", &[]);
    let (tmp, out) = temp_session();
    let plan_path = tmp.path().join("plan.json");
    std::fs::write(
        &plan_path,
        r#"[{"kind":"reexecute","calls":{"func":0,"roles":[0],"instance":0,"within":1},
             "test":{"test":"error","negative":true,"zero":false},"retries":3,"fallback":null}]"#,
    )
    .unwrap();
    run_ok(
        agent()
            .args(["intervene", "-t", "fetch", "-t", "norm", "-t", "intern", "--plan"])
            .arg(&plan_path)
            .arg("--out")
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let stdout = std::fs::read_to_string(out.join("runs/000001/stdout.txt")).unwrap();
    assert_eq!(stdout, "702 -1 3\n");
    let s = load(&out);
    let r = &s.runs[0];
    assert_eq!((r.label, r.outcome.exit_code), (Label::Pass, Some(0)));
    assert!(r.interventions[0].applied, "{:?}", r.interventions);
    let fetches: Vec<(u32, Option<i64>)> = r
        .calls
        .iter()
        .filter(|c| s.functions[c.func as usize].name == "fetch")
        .map(|c| (c.instance, c.ret))
        .collect();
    assert_eq!(fetches, vec![(1, Some(702)), (2, Some(-1))]);
    assert_eq!(r.pauses.len(), 1, "the re-execution stop is the agent's pause");
    drop(tmp);
}

/// Two calls of one class's threads serialised as groups: the get, which
/// overlaps the put on the same table without intervention, waits until
/// the put has returned.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn group_serialisation_keeps_the_two_groups_apart() {
    let _bpf = require_bpf();
    let exe = c_fixture("groups.c", "groups", &[]);
    let overlap = |s: &Session| {
        let put = call(s, "put", 1);
        let get = call(s, "get", 2);
        get.entry_ns < put.exit_ns.unwrap() && put.entry_ns < get.exit_ns.unwrap()
    };
    let s = intervene(&exe, &[], &["put", "get"], "[]", &[]);
    assert!(overlap(&s), "the fixture overlaps without intervention");
    let plan = r#"[{"kind":"serialize_groups",
        "a":{"func":0,"roles":[1,2],"instance":0},
        "b":{"func":1,"roles":[1,2],"instance":0},"object":[1,1]}]"#;
    let s = intervene(&exe, &[], &["put", "get"], plan, &[]);
    assert!(!overlap(&s), "get waited for put");
    let r = &s.runs[0];
    assert!(r.interventions[0].applied && !r.interventions[0].timed_out);
    assert!(call(&s, "get", 2).entry_ns >= call(&s, "put", 1).exit_ns.unwrap());
}

/// Noise at one call of a serialised group comes first, and the
/// serialisation after it: the get is delayed 5 ms at its entry (as a
/// debug round's focused noise would), and then, the put still running,
/// waits until the put has returned. Left out (as it was: the kernel finds
/// the noise at the call's own key first), the intervened run would lack
/// the noise its control runs had; made alone, it would stand in for the
/// serialisation, and the get would overlap the put.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn noise_at_a_serialised_call_comes_before_the_serialisation() {
    let _bpf = require_bpf();
    let exe = c_fixture("groups.c", "groups", &[]);
    let tmp = tempfile::tempdir().unwrap();
    let noise = tmp.path().join("noise.json");
    std::fs::write(
        &noise,
        r#"[{"at":{"kind":"call","site":{"func":1,"role":2,"instance":1}},
            "action":{"kind":"delay","us":5000}}]"#,
    )
    .unwrap();
    let plan = r#"[{"kind":"serialize_groups",
        "a":{"func":0,"roles":[1,2],"instance":0},
        "b":{"func":1,"roles":[1,2],"instance":0},"object":[1,1]}]"#;
    let noise_arg = noise.to_str().unwrap();
    let s = intervene(&exe, &[], &["put", "get"], plan, &["--noise", noise_arg]);
    let r = &s.runs[0];
    let [n] = &r.noise[..] else { panic!("one noise point: {:?}", r.noise) };
    assert!(n.held_ns >= 5_000_000, "the get was delayed 5 ms: {n:?}");
    assert!(r.interventions[0].applied && !r.interventions[0].timed_out);
    assert!(
        call(&s, "get", 2).entry_ns >= call(&s, "put", 1).exit_ns.unwrap(),
        "get waited for put"
    );
}

/// A thread's locks held while another thread's call runs: the taker's
/// start routine runs for its whole life (no entry to hold it at), and
/// takes its lock about 20 times inside `window` without intervention;
/// with every lock it takes waiting while `window` runs, none of its lock
/// calls starts inside the window (each held call is dated when it went
/// on), and all 60 are made.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn held_locks_keep_a_threads_sections_out_of_another_call() {
    let _bpf = require_bpf();
    let exe = c_fixture("held_locks.c", "held_locks", &[]);
    let inside = |s: &Session| {
        let window = call(s, "window", 2);
        let lock = s.functions.iter().find(|f| f.name.starts_with("pthread_mutex_lock"));
        let locks: Vec<&Call> = s.runs[0]
            .calls
            .iter()
            .filter(|c| Some(c.func) == lock.map(|f| f.id) && c.role == 1)
            .collect();
        let n = locks
            .iter()
            .filter(|c| c.entry_ns > window.entry_ns && c.entry_ns < window.exit_ns.unwrap())
            .count();
        (locks.len(), n)
    };
    let plan = r#"[{"kind":"hold_locks",
        "calls":{"func":0,"roles":[1],"instance":0},
        "while_running":{"func":1,"roles":[2],"instance":0}}]"#;
    let s = intervene(&exe, &[], &["taker", "window"], plan, &[]);
    let r = &s.runs[0];
    assert_eq!(r.label, Label::Pass, "{:?}", r.outcome);
    assert!(r.interventions[0].applied && !r.interventions[0].timed_out, "{:?}", r.interventions);
    assert_eq!(inside(&s), (60, 0), "no lock taken inside the window");
    // The same plan holding nothing: the window is on another role.
    let idle = plan.replace(r#""roles":[2]"#, r#""roles":[3]"#);
    let s = intervene(&exe, &[], &["taker", "window"], &idle, &[]);
    let (locks, inside) = inside(&s);
    assert_eq!(locks, 60);
    assert!(inside >= 5, "the fixture takes the lock inside the window: {inside}");
}

/// A call serialised against the call it runs inside, on two threads
/// both inside the outer call (`journal` waits for the other thread
/// before it calls `entry`): "no `entry` while another thread's `journal`
/// runs" cannot be kept in this run. Each `entry` waits only for the
/// other thread's `journal` (not its own), and when both threads wait on
/// each other one is let go at once, reported not applied, instead of
/// every one of the 400 calls being held until its 300 ms timeout (two
/// minutes, past the run's 20 s timeout).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_call_serialised_against_the_call_it_runs_inside_is_not_held_to_its_timeout() {
    let _bpf = require_bpf();
    let exe = c_fixture("nested_groups.c", "nested_groups", &[]);
    let plan = r#"[{"kind":"serialize_groups",
        "a":{"func":0,"roles":[1,2],"instance":0},
        "b":{"func":1,"roles":[1,2],"instance":0},"object":null}]"#;
    let extra = ["--hold-timeout", "300ms", "--timeout", "20s"];
    let s = intervene(&exe, &[], &["entry", "journal"], plan, &extra);
    assert_eq!(s.functions[0].name, "entry");
    let r = &s.runs[0];
    assert!(!r.outcome.timed_out && r.label == Label::Pass, "{:?}", r.outcome);
    let entries = r.calls.iter().filter(|c| c.func == 0 && c.exit_ns.is_some()).count();
    assert_eq!(entries, 400, "every entry ran and returned");
    let iv = &r.interventions[0];
    assert_eq!((iv.applied, iv.timed_out), (false, false), "applied, timed out");
}

/// A lock call checked before a call of the group began, and taking the
/// lock only after (its thread waited in it: another thread held the
/// mutex): `window` begins while the taker waits in
/// `pthread_mutex_lock`, and main lets the mutex go once `window` has
/// begun or its thread is held. Without intervention the taker's critical
/// section comes inside `window`. With its locks held while `window`
/// runs, `window` waits at its entry until the taker has let the lock go
/// (its entry is dated when it went on): the section is before it, not
/// inside it, and the hold is applied.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_lock_checked_before_a_held_call_began_is_let_go_before_it_runs() {
    let _bpf = require_bpf();
    let exe = c_fixture("taken_lock.c", "taken_lock", &[]);
    // (window's entry, the taker's release of the lock).
    let times = |s: &Session| {
        let window = call(s, "window", 2).entry_ns;
        let unlock = s.functions.iter().find(|f| f.name.starts_with("pthread_mutex_unlock"));
        let release = s.runs[0]
            .calls
            .iter()
            .find(|c| Some(c.func) == unlock.map(|f| f.id) && c.role == 1)
            .map(|c| c.entry_ns)
            .expect("the taker let the lock go");
        (window, release)
    };
    let plan = r#"[{"kind":"hold_locks",
        "calls":{"func":0,"roles":[1],"instance":0},
        "while_running":{"func":1,"roles":[2],"instance":0}}]"#;
    let untouched = plan.replace(r#""roles":[2]"#, r#""roles":[3]"#);
    let s = intervene(&exe, &[], &["taker", "window"], &untouched, &[]);
    assert_eq!(s.runs[0].label, Label::Pass, "{:?}", s.runs[0].outcome);
    let (window, release) = times(&s);
    assert!(window < release, "the fixture takes the lock inside window");
    let s = intervene(&exe, &[], &["taker", "window"], plan, &[]);
    let r = &s.runs[0];
    assert_eq!(r.label, Label::Pass, "{:?}", r.outcome);
    assert!(r.interventions[0].applied && !r.interventions[0].timed_out, "{:?}", r.interventions);
    let (window, release) = times(&s);
    assert!(release < window, "window waited for the lock to be let go: {release} vs {window}");
}

/// A try-lock that fails inside a call whose locks are held leaves no
/// lock taken: its thread is not counted among the lockers, and a call of
/// the awaited group that begins after the failed try does not wait for
/// it. `taker` tries the mutex main holds, fails, and stays inside its
/// call for 300 ms; `window` begins at once, before `taker` returns.
/// Counted, the taker stayed a locker until its thread exited, and
/// `window` waited for it.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_failed_try_lock_of_a_held_call_does_not_keep_the_awaited_call_waiting() {
    let _bpf = require_bpf();
    let exe = c_fixture("failed_trylock.c", "failed_trylock", &[]);
    let plan = r#"[{"kind":"hold_locks",
        "calls":{"func":0,"roles":[1],"instance":0},
        "while_running":{"func":1,"roles":[2],"instance":0}}]"#;
    let s = intervene(&exe, &[], &["taker", "window"], plan, &[]);
    let r = &s.runs[0];
    assert_eq!(r.label, Label::Pass, "{:?}", r.outcome);
    let (taker, window) = (call(&s, "taker", 1), call(&s, "window", 2));
    let returned = taker.exit_ns.expect("taker returned");
    assert!(
        window.entry_ns < returned,
        "window began at {}, taker returned at {returned}",
        window.entry_ns
    );
}

/// The C library's lock probes sit on the first instruction of the
/// function the kernel emulates rather than single-steps
/// (`symbols/entry_step.rs`; BENCHMARKS.md, "Where a lock probe sits"):
/// on this machine kind's glibc, `pthread_mutex_lock`'s and
/// `pthread_mutex_unlock`'s are past their entries (its text's file
/// offsets are its addresses). Moved, each still fires once a call and
/// records the caller's mutex: 100 locks and 100 unlocks of one mutex on
/// the worker. The held locks of `work` wait on `idle` on a thread that
/// never runs it, so the sync points are attached and nothing waits.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn the_c_library_lock_probes_sit_where_the_kernel_emulates_and_see_every_call() {
    let _bpf = require_bpf();
    let exe = c_fixture("lock_loop.c", "lock_loop", &[]);
    let plan = r#"[{"kind":"hold_locks",
        "calls":{"func":0,"roles":[1],"instance":0},
        "while_running":{"func":1,"roles":[3],"instance":0}}]"#;
    let s = intervene(&exe, &[], &["work", "idle"], plan, &[]);
    assert_eq!(s.runs[0].label, Label::Pass, "{:?}", s.runs[0].outcome);
    for name in ["pthread_mutex_lock", "pthread_mutex_unlock"] {
        let f = s.functions.iter().find(|f| f.name == name).expect(name);
        assert!(
            f.offset > f.address,
            "{name} probed at {:#x}, its entry {:#x}",
            f.offset,
            f.address
        );
    }
    let calls: Vec<(&str, i64)> = s.runs[0]
        .calls
        .iter()
        .filter(|c| c.role == 1)
        .map(|c| (s.functions[c.func as usize].name.as_str(), c.args[0]))
        .collect();
    let mutexes =
        |name: &str| -> Vec<i64> { calls.iter().filter(|c| c.0 == name).map(|c| c.1).collect() };
    let (locked, unlocked) = (mutexes("pthread_mutex_lock"), mutexes("pthread_mutex_unlock"));
    assert_eq!((locked.len(), unlocked.len()), (100, 100), "{calls:?}");
    assert!(locked[0] != 0 && locked.iter().chain(&unlocked).all(|m| *m == locked[0]), "{calls:?}");
}

/// A thread held until an event goes on when the event happens, before
/// the thread that made it does: main, held at `check`'s entry until the
/// worker's `mark` has begun, begins `check` before the worker's first
/// `tick`, which follows `mark` at once (each call dated when it went on).
/// The worker starts `mark` only once main is held.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_held_thread_goes_on_when_its_event_happens_before_the_thread_that_made_it() {
    let _bpf = require_bpf();
    let exe = c_fixture("release_waiters.c", "release_waiters", &[]);
    let plan = r#"[{"kind":"hold_until",
        "site":{"func":1,"role":0,"instance":1},"point":"entry",
        "until":{"func":0,"role":1,"instance":1},"until_point":"entry"}]"#;
    let s = intervene(&exe, &[], &["mark", "check", "tick"], plan, &[]);
    let r = &s.runs[0];
    assert_eq!(r.label, Label::Pass, "{:?}", r.outcome);
    assert!(r.interventions[0].applied && !r.interventions[0].timed_out, "{:?}", r.interventions);
    let (check, mark) = (call(&s, "check", 0).entry_ns, call(&s, "mark", 1).entry_ns);
    let tick = call(&s, "tick", 1).entry_ns;
    assert!(mark < check && check < tick, "mark {mark}, check {check}, first tick {tick}");
}
