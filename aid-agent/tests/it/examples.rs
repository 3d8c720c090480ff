//! `aid-agent debug` on the bundled examples (examples/*): the exact root
//! cause and causal path it reports, and no more interventions than TAGT
//! would need on the same session.
//!
//! The cases — each example, the flags it is debugged with and the path it
//! must report — are `examples/cases.rs`, shared with the scoreboard:
//! `cargo xtask bench examples` debugs every case several times and counts
//! the sessions with the right path, no cause and another path. The suite
//! runs a representative few ([`SUITE`]): one per kind of bug and of
//! session (an order violation with `--safe`, a data race confirmed with
//! watchpoints, a lock interleaving found with no flags and amplified, a
//! Rust program with no flags, a climb to a caller in a second session);
//! the others are the scoreboard's, so the suite fits CI's time.
//!
//! The examples fail because of timing, so their sessions run alone
//! ([`alone`]: a busy machine changes their failure rates), and a session
//! can miss: on rare occasions a scheduler stall makes a passing run show
//! the root-cause behaviour, so it is no longer fully discriminative. The
//! acceptance rule is therefore statistical ([`SESSIONS`], [`NEEDED`]).

use aid::model::Probe;
use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use crate::{
    cases::{self, Link, Verdict},
    common::*,
};

/// The cases the suite runs (the rest are the scoreboard's).
const SUITE: &[&str] = &[
    "commit_after_close",
    "counter_atomicity",
    "two_lock_race_with_no_flags",
    "rust_spawn_closures_with_no_flags",
    "inventory_sixty_climbs_from_the_insert",
];

/// Sessions per case, and how many must report the exact path.
///
/// Acceptance rule: up to `SESSIONS` sessions, stopping once the verdict
/// is known; a case passes when `NEEDED` of them report the exact path
/// (and, in each of those, the root cause and no more interventions than
/// the case allows against TAGT: anything else there fails at once). If a
/// session misses with probability q, the case fails with probability
/// 3q² − 2q³: 0.7 % for q = 5 %, 50 % for a coin flip, always for a
/// systematic miss; a single retry (1 of 2) would pass a coin-flip aid
/// 75 % of the time. Miss rates measured so far (the examples' READMEs and
/// BENCHMARKS.md), sessions that missed of those run on a quiet or
/// moderately loaded machine: commit_after_close 0 of 6 (2026-11-22),
/// counter_atomicity 0 of 6 (2026-11-22 and 23), two_lock_race_with_no_flags
/// 0 of 42 (2026-11-23) and 0 of 26 on each of ec3530c's and a12e57a's
/// builds (2026-11-28; yet a fresh-clone CI of ec3530c missed 2 of 2 with
/// the overlap on the same object, step 1 of its README's chain, and the
/// next CI 0 of 2: not reproduced here; the CI of 797d700 stopped on a
/// session that started no round, 2 of 39 control runs failing (an error
/// here, as any outcome outside the two no-cause reports is): the control
/// now goes on before judging; 0 of 10 on d21a9b2's build, 2026-11-29;
/// since stop 74's cheap lock probes the failure needs more noise: on
/// 2026-12-06 a fresh-clone CI missed 2 of 2, and 20 sessions of the
/// dev agent with interleavings naming the overlaps they stand for
/// (b0153bd, 701754e) missed 4, each the same way: the focused noise held
/// a withdrawal at its entry, serialising the withdrawals displaced that
/// hold in every intervened run, the round was left untested ("it acted
/// where the noise that provokes the failure would have"), and the
/// session with noise at statements added a statement window after the
/// cause; 1 in 10 CI runs of this case would fail at that rate); with
/// the noise kept before the serialisation (stop 76), 0 of 12 sessions
/// missed (2026-12-06); on 2026-12-07 a fresh-clone CI of a8e5559 missed
/// 2 of 2 and 1 of 6 sessions here did, each without the stale read: its
/// round (an override of the load, counted as acting from the run's start,
/// so with no witness) ran 343 to 930 runs, and one run failed in a
/// schedule the forced value fails in itself; with a value change acting
/// from the call it changes (rounds on the stale read of 7 to 45 runs),
/// 1 of 47 (d39cd03 and 5b4017c: 43 sessions by hand, none missed; the
/// bench's 4, one with the same two links and no stale read, its session
/// not kept),
/// rust_spawn_closures_with_no_flags 0 of 3
/// (2026-11-24). Under a load of 15 on 2 CPUs (five engineers building,
/// 2026-11-27) commit_after_close missed 2 of 2 (`prepare_batch` was no
/// slower in failing runs than in passing ones, so only the order was on
/// the path): such a machine is outside this rule. `cargo xtask bench
/// examples` measures every case's rate. Every missed session is printed
/// with the path it reported, past the harness' output capture, so no
/// miss goes unseen even when the case passes.
const SESSIONS: usize = 3;
const NEEDED: usize = 2;

/// An example built once per test process (examples/build.sh).
fn build(name: &str) -> PathBuf {
    example(name)
}

/// One `debug` session of `case`. A session that confirmed no cause (exit
/// 1, its report written: "No cause was confirmed", or no candidate to
/// test) is an outcome with an empty path — a miss under [`SESSIONS`]'
/// rule, printed with the others — not an error; any other failure is.
fn debug(case: &cases::Case, extra: &[&str], inspect: &dyn Fn(&Path)) -> cases::Outcome {
    let exe = build(case.example);
    let mut args = case.args().unwrap();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let started = std::time::Instant::now();
    let (_tmp, out, output) = debug_session(&exe, &args);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let no_cause = output.status.code() == Some(1)
        && (text.contains("No cause was confirmed")
            || text.contains("No predicate both held in every failing run"));
    assert!(
        output.status.success() || no_cause,
        "aid-agent failed ({:?}):\nstdout: {text}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = writeln!(
        std::io::stderr(),
        "{}: session in {:.1} s",
        case.name,
        started.elapsed().as_secs_f64()
    );
    inspect(&out);
    cases::Outcome::read(&out, &text).unwrap()
}

/// Debugs a case of the suite under [`SESSIONS`]' rule.
fn check(name: &str) {
    check_with(name, &[]);
}

/// [`check`] with `extra` arguments after the case's own.
fn check_with(name: &str, extra: &[&str]) {
    check_session(name, extra, &|_| {});
}

/// [`check_with`], `inspect` asserting what it must of each session's
/// directory.
fn check_session(name: &str, extra: &[&str], inspect: &dyn Fn(&Path)) {
    assert!(SUITE.contains(&name), "{name} is not in the suite");
    let case = cases::case(name);
    let _alone = alone();
    two_of_three(name, || {
        let outcome = debug(&case, extra, inspect);
        match cases::judge(&case, &outcome) {
            Verdict::Right => Ok(()),
            Verdict::Failed(why) => panic!("{why}"),
            miss => Err(Miss {
                said: format!("MISSED the causal path: {miss:?}"),
                report: outcome.text,
            }),
        }
    });
}

/// A session that missed: a line for the moment it happens, and its whole
/// report.
struct Miss {
    said: String,
    report: String,
}

/// Runs `session` until [`NEEDED`] sessions passed or too many missed to
/// get there. Each miss is written straight to stderr, past the test
/// harness' capture: shown even when the case passes.
fn two_of_three(name: &str, mut session: impl FnMut() -> Result<(), Miss>) {
    let (mut passed, mut missed) = (0, Vec::new());
    while passed < NEEDED && missed.len() <= SESSIONS - NEEDED {
        match session() {
            Ok(()) => passed += 1,
            Err(miss) => {
                let k = passed + missed.len() + 1;
                let _ = writeln!(std::io::stderr(), "{name}: session {k} {}", miss.said);
                missed.push(miss);
            }
        }
    }
    assert!(
        passed >= NEEDED,
        "{name}: {} of {} sessions missed; the last {}\n{}",
        missed.len(),
        passed + missed.len(),
        missed.last().map_or("", |m| m.said.as_str()),
        missed.last().map_or("", |m| m.report.as_str())
    );
}

/// A path matches with each optional link present or left out, never
/// with a link out of place or one too many.
#[test]
fn an_optional_link_may_be_left_out_but_not_moved() {
    let path = |links: &[&str]| links.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
    let expected =
        [Link::Starts("root".into()), Link::Maybe("facet [12]".into()), Link::Starts("ret".into())];
    assert!(cases::matches(&path(&["root", "ret"]), &expected));
    assert!(cases::matches(&path(&["root", "facet 2", "ret"]), &expected));
    assert!(!cases::matches(&path(&["root", "facet 3", "ret"]), &expected));
    assert!(!cases::matches(&path(&["facet 1", "root", "ret"]), &expected));
    assert!(!cases::matches(&path(&["root", "facet 1", "facet 2", "ret"]), &expected));
    assert!(!cases::matches(&path(&["root"]), &expected));
    assert!(!cases::matches(&path(&["root", "ret", "more"]), &expected));
}

/// Every case names an example with a program, flags that can be read,
/// and links whose regular expressions compile; the suite's names are
/// cases, each once.
#[test]
fn every_case_is_well_formed() {
    let all = cases::cases();
    for c in &all {
        let dir = cases::examples_dir().join(c.example);
        assert!(dir.is_dir(), "{}: no examples/{}", c.name, c.example);
        c.args().unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert!(!c.path.is_empty(), "{}", c.name);
        for link in &c.path {
            if let Link::Regex(r) | Link::Maybe(r) = link {
                regex::Regex::new(r).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            }
        }
        assert_eq!(all.iter().filter(|d| d.name == c.name).count(), 1, "{}", c.name);
    }
    for name in SUITE {
        assert!(all.iter().any(|c| c.name == *name), "{name}");
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn commit_after_close() {
    check("commit_after_close");
}

/// Observed runs made two at a time (`--jobs 2`): the same root cause and
/// path as one at a time, under the same rule.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn commit_after_close_with_jobs_2() {
    check_with("commit_after_close", &["--jobs", "2"]);
}

/// Runs made by a fleet of three workers on this host (`debug --fleet`, a
/// nats-server of the test's own on 127.0.0.1), the rounds' and their
/// control runs too: the same root cause and path as one at a time, under
/// the same rule.
#[test]
#[ignore = "needs root, eBPF and nats-server: `cargo xtask test` runs it"]
fn commit_after_close_on_a_fleet_of_three_workers() {
    let server = crate::fleet::nats_server();
    let logs = tempfile::tempdir().unwrap();
    let _workers: Vec<_> = (1..=3)
        .map(|i| {
            let log = logs.path().join(format!("w{i}.log"));
            crate::fleet::worker(&server.url, &format!("w{i}"), &log)
        })
        .collect();
    // Every run, intervened and observed, made by the workers: each
    // record names the host that made it (this one).
    let host = aid::store::host_name();
    check_session("commit_after_close", &["--fleet", &server.url], &|out| {
        let records = std::fs::read_to_string(out.join("runs.jsonl")).unwrap();
        let phases: Vec<(String, Option<String>)> = records
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let host = v.get("host").and_then(|h| h.as_str()).map(str::to_owned);
                (v["phase"].as_str().unwrap_or_default().to_owned(), host)
            })
            .collect();
        assert!(phases.iter().any(|(p, _)| p == "intervene"), "{phases:?}");
        assert!(phases.iter().all(|(_, h)| h.as_deref() == Some(host.as_str())), "{phases:?}");
    });
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn counter_atomicity() {
    check("counter_atomicity");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn two_lock_race_with_no_flags() {
    check("two_lock_race_with_no_flags");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rust_spawn_closures_with_no_flags() {
    check("rust_spawn_closures_with_no_flags");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn inventory_sixty_climbs_from_the_insert() {
    check("inventory_sixty_climbs_from_the_insert");
}

/// Without `--safe`, no run may have its return values forced (AID Sec.
/// 3.2): the slow `prepare_batch` cannot be tested and is reported as such,
/// and the path is found with orderings only.
///
/// The ordering that negates the root cause holds `consumer_poll` until
/// `consumer_commit` has *returned*: at poll's return, or at its entry when
/// some passing run had the commit return before poll started (the rule of
/// `predicates/pairs.rs`; CI on 56daac2 saw such a run, and the entry hold
/// this test did not then expect). Until 2026-11-23 it held only until the commit had *started*, and
/// `consumer_close` could slip into the commit's ~100 µs body when the
/// machine was busy; when the round had nothing upstream to witness it
/// ran to its cap (600 runs), where one such run pruned the cause (2 of 8
/// sessions, each with one failing run of 600). That is not measured
/// away yet (the slip did not occur in 28 sessions at load 3 to 7, with
/// either hold: BENCHMARKS.md), so the rule stays: **no session forces a value, every session
/// names the slow `prepare_batch` as needing `--safe`, and at least one
/// of two sessions reports the root cause**, held until the commit has
/// returned at the point the passing runs call for (each session's outcome
/// is printed).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn safe_list_is_respected() {
    let _alone = alone();
    let exe = build("commit-after-close");
    let want = "Root cause: call 1 of consumer_poll on main ends before call 1 of consumer_commit on committer starts";
    let mut outcomes = Vec::new();
    for session in 1..=2 {
        let (_tmp, out, output) = debug_session(&exe, &["-t", "consumer_*", "-t", "prepare_batch"]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let loaded = aid::store::load_full(&out).unwrap();
        let intervened: Vec<&aid::model::AppliedIntervention> =
            loaded.session.runs.iter().flat_map(|r| r.interventions.iter()).collect();
        assert!(!intervened.is_empty(), "the session has intervened runs");
        assert!(
            intervened.iter().all(|a| !a.intervention.changes_values()),
            "a return value was forced on a function not declared safe"
        );
        assert!(text.contains("call 1 of prepare_batch on committer runs too slow"), "{text}");
        assert!(text.contains("(needs a return-value intervention: declare the function --safe if forcing it is harmless)"), "{text}");
        let found = output.status.success() && text.contains(want);
        if found {
            // The rule of `predicates/pairs.rs` (`hold`): when some passing
            // run the order was learnt from had the commit return before
            // poll started, poll waits at its entry; else at its return.
            let reversed = commit_returned_before_poll(&loaded.session);
            let point = if reversed { "at its entry" } else { "before it returns" };
            let hold = format!(
                "hold call 1 of consumer_poll on main {point} until call 1 of consumer_commit on committer has returned"
            );
            assert!(
                text.contains(&hold),
                "a passing run had commit before poll: {reversed}\n{text}"
            );
        }
        eprintln!("session {session}: exit {:?}, root cause found: {found}", output.status.code());
        if found {
            return;
        }
        outcomes.push(text);
    }
    panic!("no session reported the root cause: {outcomes:#?}");
}

/// Whether some passing run without intervention or noise had call 1 of
/// `consumer_commit` return before call 1 of `consumer_poll` started.
fn commit_returned_before_poll(s: &aid::model::Session) -> bool {
    let id = |name: &str| {
        s.functions.iter().position(|f| f.name == name).map(|i| i as aid::model::FuncId)
    };
    let (Some(poll), Some(commit)) = (id("consumer_poll"), id("consumer_commit")) else {
        return false;
    };
    s.runs
        .iter()
        .filter(|r| r.label == aid::model::Label::Pass && r.interventions.is_empty() && r.noise.is_empty())
        .any(|r| {
            let first = |f| r.calls.iter().find(|c| c.func == f && c.instance == 1);
            matches!((first(poll), first(commit)), (Some(p), Some(c)) if c.exit_ns.is_some_and(|x| x < p.entry_ns))
        })
}

/// A failure rarer than 5 %: debug says so, amplifies it with random delays
/// at traced calls (stored with the runs), and still finds the order
/// violation behind it.
///
/// Acceptance rule: [`SESSIONS`]', two of at most three sessions, each
/// checked in full. A session can find no candidate to test: in CI on
/// 2026-11-23 one amplified session had 1 of 7 predicates separating the
/// runs (the return of `consume`, not `--safe`), the order held in some
/// passing run too. A loaded machine does that: a thread preempted right
/// after its entry probe enters "first" and reads or writes later (two
/// sessions side by side here on 2026-11-24: 1 of 24 found no candidate,
/// 23 the root cause). A session that tests the order and prunes it is no
/// miss but a failure: CI on 1b063a4 pruned it after one intervened run.
/// One passing run where consume entered first moved the hold to
/// consume's return, after the read (seen again here in 1 of the 24, held
/// at the entry now: `order_once_reversed_in_a_passing_run_holds_the_entry`);
/// and a hold until publish had started let consume go while noise still
/// held publish at its entry (`a_hold_waits_for_the_other_call_to_be_let_go`).
///
/// A session in which the failure was not rare is a miss, not a pass: its
/// premise did not hold. rare.c fails in about 3 % of untraced runs here
/// (11 of 400 on 2026-11-28, 66 of 400 with two CPU hogs beside it),
/// close to the 5 % threshold; every block of 40 natural runs is judged
/// (`debug::amplify`), on all natural runs so far, and a session whose
/// every block showed 5 % or more is not judged rare there (CI on
/// b0c2249: 10 of 186, then "under the agent's control the failure is
/// rare" and noise after all). Measured on 2026-11-30 with the release
/// build, each session stopped once its observation was judged: 1 of 120
/// sessions not judged rare on the idle machine, 10 of 15 with one CPU
/// hog beside it. The stored runs must bear the miss out: a session that
/// says nothing while some block of its natural runs failed in fewer
/// than 5 % fails the test ([`observed_not_rare`]). A fixture with
/// a 2 ms margin and a rare branch of 1 in 100 fails in 3 of 400 runs, but
/// its focused noise let "consume starts while prepare runs" become the
/// root cause in 2 of 5 sessions (2026-11-28), which this test does not
/// accept, so it was not adopted: the miss is reported, not mended.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rare_failures_are_amplified() {
    let _alone = alone();
    let exe = c_fixture("rare.c", "rare", &[]);
    two_of_three("rare", || rare_session(&exe));
}

/// One session of [`rare_failures_are_amplified`]; its report when it
/// confirmed no cause.
fn rare_session(exe: &Path) -> Result<(), Miss> {
    let (_tmp, out, output) =
        debug_session(exe, &["-t", "prepare", "-t", "publish", "-t", "consume"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !stderr.contains("failures are rare (") {
        let said = observed_not_rare(&stderr, &aid::store::load(&out).unwrap());
        return Err(Miss { said, report: format!("{stdout}\n{stderr}") });
    }
    assert!(
        stderr.contains("injecting noise at synchronisation points and traced calls"),
        "{stderr}"
    );
    // Not a terminal: no progress bars, spinners or colour, only lines.
    assert!(!stderr.contains('\r') && !stderr.contains('\x1b'), "{stderr:?}");
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
    assert!(stderr.lines().all(|l| l.starts_with("aid: ")), "{stderr}");
    let loaded = aid::store::load(&out).unwrap();
    assert!(loaded.runs.iter().any(|r| !r.noise.is_empty()), "noise is recorded with the runs");
    if !output.status.success() {
        let none = "No predicate both held in every failing run and in no passing one and could be intervened on";
        assert!(stdout.contains(none), "{stdout}\n{stderr}");
        return Err(Miss {
            said: "confirmed no cause".into(),
            report: format!("{stdout}\n{stderr}"),
        });
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(!report["observed"]["amplified"].is_null());
    // The order violation has two statements: "consume ends before
    // publish starts" (the read before the write) and "consume starts
    // before publish starts". Each is negated by holding consume's entry
    // until publish has returned whenever some passing run ran publish
    // wholly before consume, as nearly all do (docs/predicates.md,
    // "anchors and intervention points"): one intervention, and when both
    // separate the runs, one candidate, the other the same hold. Either
    // can be the only one: on a loaded machine a thread preempted right
    // after its entry probe enters "first" and reads or writes later, so
    // a passing run can show consume starting first (no "starts before"),
    // or a failing one publish starting first while its write came after
    // the read ("ends before" then not in every failing run; CI on
    // 5d43f8f: root "starts before").
    let rows = report["analysis"]["rows"].as_array().unwrap();
    let row = |relation: &str| {
        let text = format!(
            "call 1 of consume on reader {relation} before call 1 of publish on writer starts, which no passing run shows"
        );
        rows.iter().find(|r| r["description"] == text.as_str())
    };
    let root = report["root_cause"].as_str().expect("a root cause");
    assert!(stdout.contains(&format!("Root cause: {root}")), "{stdout}");
    let root_id = &report["root_cause_id"];
    let (root_row, other) = match (row("ends"), row("starts")) {
        (Some(e), s) if e["id"] == *root_id => (e, s),
        (e, Some(s)) if s["id"] == *root_id => (s, e),
        _ => panic!("the root cause is not the order of consume and publish: {root}\n{stdout}"),
    };
    let hold = serde_json::json!({
        "kind": "hold_until",
        "site": {"func": 2, "role": 2, "instance": 1},
        "point": "entry",
        "until": {"func": 1, "role": 1, "instance": 1},
        "until_point": "exit"
    });
    assert_eq!(root_row["intervention"], hold, "{stdout}");
    if let Some(other) = other {
        // The same hold, or not in every failing run.
        assert!(
            ["same_as", "not_discriminative"].contains(&other["status"].as_str().unwrap()),
            "{other}\n{stdout}"
        );
    }
    Ok(())
}

/// What a session that never said "failures are rare (" missed: every
/// block of 40 of its natural runs (the first observation, before any
/// control run) failed in 5 % or more, as the stored runs show. Panics
/// when some block was rare, for then debug should have said so.
fn observed_not_rare(stderr: &str, s: &aid::model::Session) -> String {
    const BLOCK: usize = 40;
    let observed: usize = stderr
        .lines()
        .find_map(|l| l.strip_prefix("aid: observed ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no observation line: {stderr}"));
    let mut natural: Vec<_> =
        s.runs.iter().filter(|r| r.phase() == aid::model::RunPhase::Observe).collect();
    natural.sort_by_key(|r| r.id);
    natural.truncate(observed);
    assert_eq!(natural.len(), observed, "{stderr}");
    for k in (BLOCK..=observed).step_by(BLOCK) {
        let failed = natural[..k].iter().filter(|r| r.failed()).count();
        assert!(
            20 * failed >= k,
            "{failed} of the first {k} natural runs failed, never said rare: {stderr}"
        );
    }
    let failed = natural.iter().filter(|r| r.failed()).count();
    format!("did not see the failure as rare: {failed} of {observed} natural runs failed")
}

/// Without --trace, debug measures the program's own functions, traces
/// those cheap enough (all of them here) without `main`, and says which;
/// a program that never fails is a one-line error.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn default_functions_and_no_failure() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_default", &[]);
    let (_tmp, _out, output) = debug_session(&exe, &["--runs", "5"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no --trace given: measuring how often the program's 5 own functions are called; not candidates: main: its return restates the failure"),
        "{stderr}"
    );
    let tracing =
        stderr.lines().find(|l| l.starts_with("aid: tracing 5 of them (")).expect(&stderr);
    assert!(tracing.ends_with("per run): add3, scale, negate, worker_a, worker_b"), "{tracing}");
    assert!(
        stderr.lines().last().unwrap().starts_with(
            "aid: no run failed in 5 runs (a run fails on: nonzero, signal, timeout, hang)"
        ),
        "{stderr}"
    );
}

/// Of near_miss.c's amplified runs whose near miss was held (the earlier
/// thread alone), at least this many tenths fail (measured: see the
/// test's comment).
const NEAR_MISS_HELD_FAIL_TENTHS: usize = 5;

/// Near-miss noise (issue 24, as TSVD targets its delays). near_miss.c's
/// main takes `m` right after starting a worker that takes `m` as soon as
/// it starts: main comes first by the worker's start-up time in nearly
/// every run, and fails when the worker comes first. Each thread also
/// takes a lock of its own, main 200 times and the worker 100, so a run
/// has some 600 synchronisation points and random noise at two of them
/// rarely holds the one that matters. With `--amplify near-miss`, once a
/// passing run has shown the near miss, every amplified run holds it:
/// main's synchronisation point (by rank) where, in that run too, it
/// takes the lock the worker takes (a run with the worker first fails,
/// and failing runs show no near miss); and a run held there fails as
/// soon as the worker overtakes it.
///
/// Acceptance rule: at least [`NEAR_MISS_HELD_FAIL_TENTHS`] tenths of the
/// runs held there and intervened on in no other way fail (each hold is
/// longer than the gap seen, up to 2 ms; a held run passes only when the
/// worker took longer than the hold to start). Measured 2026-11-29, six
/// sessions: 228 of 232 such runs failed, at least 37 of 39 in each; the
/// test passed 10 times in 10.
///
/// Since near misses also hold both threads in half their holds
/// (`PAIR_SHARE`: the worker at its lock call too, and main let go inside
/// that hold, so main still comes first and such a run is expected to
/// pass), the rule is the same for the runs held the first way, and a
/// pair's second point must be the worker's rank at which it takes that
/// same lock. Measured 2026-12-04, 40 sessions: 694 of 695 runs held
/// the first way failed (16 to 20 a session), and 18 to 24 runs a session
/// held both threads; the test passed 40 times in 40 (and 19 of 21 before
/// it followed a session `debug` went on to with fewer probes).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn near_miss_noise_holds_the_earlier_of_two_threads_close_lock_calls() {
    let _alone = alone();
    let exe = c_fixture("near_miss.c", "near_miss", &[]);
    let (_tmp, out, output) =
        debug_session(&exe, &["--amplify", "near-miss", "--amplify-below", "50%", "--runs", "80"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("delays at near misses"), "{stderr}");
    // When the untraced runs failed more often than the traced ones,
    // `debug` went on with fewer probes in a session of its own (2 of 39
    // runs of this test, where 16 of the 100 untraced runs failed and 0
    // of the first 40 traced ones): the amplified runs are there.
    let loaded = aid::store::load_full(&last_session(&out)).unwrap();
    let s = &loaded.session;
    let locks: Vec<u32> = s
        .functions
        .iter()
        .filter(|f| f.internal && f.probe == Probe::Sync && f.name == "pthread_mutex_lock")
        .map(|f| f.id)
        .collect();
    let sync = |func: u32| s.functions[func as usize].probe.is_sync_point();
    let amplified: Vec<&aid::model::Run> = s.runs.iter().filter(|r| !r.noise.is_empty()).collect();
    assert!(amplified.len() >= 20, "{} amplified runs\n{stderr}", amplified.len());
    let (mut held, mut held_failed, mut pairs) = (0, 0, 0);
    for r in &amplified {
        // The lock both threads take in this run (its address moves run
        // to run): `m`, not either thread's own.
        let taken = |role: u32| -> std::collections::BTreeSet<i64> {
            r.calls
                .iter()
                .filter(|c| c.role == role && locks.contains(&c.func))
                .map(|c| c.args[0])
                .collect()
        };
        let roles: std::collections::BTreeSet<u32> = r.calls.iter().map(|c| c.role).collect();
        let worker = *roles.iter().find(|&&role| role != 0).unwrap();
        let both: Vec<i64> = taken(0).intersection(&taken(worker)).copied().collect();
        assert_eq!(both.len(), 1, "run {}: {both:?}", r.id);
        if !r.noise.iter().any(|n| n.near_miss) {
            // Random delays: no near miss was known yet (the runs before
            // amplification record sync points only when the tracing
            // budget has room for them).
            continue;
        }
        // Each point is main's rank at which, in this run too, it takes
        // that lock; in a pair, the other is the worker's.
        let mut on = Vec::new();
        for n in &r.noise {
            assert!(n.near_miss, "run {}: {:?} among near misses", r.id, r.noise);
            let aid::model::NoiseAt::Sync { role, step } = n.at else {
                panic!("run {}: {n:?} is not a near miss", r.id)
            };
            assert!(role == 0 || role == worker, "run {}: {n:?}", r.id);
            let mut syncs: Vec<&aid::model::Call> =
                r.calls.iter().filter(|c| c.role == role && sync(c.func)).collect();
            syncs.sort_by_key(|c| c.entry_ns);
            let Some(at) = syncs.get(step as usize - 1) else {
                // A worker held at a rank it never reached in this run.
                assert_eq!(role, worker, "run {}: role {role} step {step}", r.id);
                on.push(role);
                continue;
            };
            assert!(locks.contains(&at.func), "run {}: role {role} step {step} is {at:?}", r.id);
            assert_eq!(at.args[0], both[0], "run {}: role {role} step {step}", r.id);
            on.push(role);
        }
        on.sort_unstable();
        assert!(on == [0] || on == [0, worker], "run {}: {:?}", r.id, r.noise);
        if on.len() == 2 {
            pairs += 1;
            continue;
        }
        // An intervention round's run may pass because of its intervention.
        if r.noise.iter().any(|n| n.held_ns > 0) && r.interventions.is_empty() {
            held += 1;
            held_failed += usize::from(r.failed());
        }
    }
    assert!(held >= 10, "{held} runs held at the near miss\n{stderr}");
    assert!(pairs >= 1, "no run held both threads\n{stderr}");
    assert!(
        held_failed * 10 >= held * NEAR_MISS_HELD_FAIL_TENTHS,
        "{held_failed} of {held} held runs failed\n{stderr}"
    );
    eprintln!("near misses: {held_failed} of {held} held runs failed; {pairs} pairs");
}

/// Of unjoined.c's amplified runs held at `exit`, at least this many
/// tenths fail (measured: see the test's comment).
const EXIT_HELD_FAIL_TENTHS: usize = 7;

/// The main thread held at `exit` (issue 24: noise where the process
/// ends). unjoined.c's main returns right after starting a worker it never
/// joins; the worker fails (exit 3) at the end of a count that takes far
/// longer than main's return, so untraced and under random delays at two
/// of its 100 or so synchronisation points it practically never gets
/// there. Once a run has shown the thread started and never joined,
/// about half the amplified runs hold the thread calling `exit` until
/// every other thread is done: the worker then finishes its count, and
/// the run fails.
///
/// Acceptance rule: at least [`EXIT_HELD_FAIL_TENTHS`] tenths of the runs
/// held at `exit` and intervened on in no other way fail (the hold ends
/// before the worker is done only at its bound: the run's other holds,
/// the level's 2 ms and the longest run seen without noise,
/// `EXIT_RUN_MAX_US`); at least 5 runs are held there and at least 5
/// amplified runs are not. Measured 2026-11-29, six sessions: 59 of 60
/// held runs failed (9 to 11 held a session). On 2026-12-01 the CI of
/// e62b277 missed it, 10 of 15: the bound was then the other holds and
/// 2 ms only, and a worker slowed by the suite's other tests was still
/// counting when it ran out (93 % of held runs failed alone on the
/// machine, 87 of 93, and 92 % beside one CPU hog, 59 of 64, also on
/// 79a7d7f). With the run's length added: 92 of 92 alone (six sessions,
/// 15 or 16 held each) and 64 of 64 beside the hog (four).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn exit_noise_keeps_a_thread_main_never_joined_alive() {
    let _alone = alone();
    let exe = c_fixture("unjoined.c", "unjoined", &[]);
    let (_tmp, out, output) =
        debug_session(&exe, &["--amplify", "random", "--amplify-below", "50%", "--runs", "80"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The untraced runs fail often (25 of 86 in one CI run, against 3 of
    // the first 40 traced ones): `debug` may go on with fewer probes in a
    // session of its own, where the amplified runs then are.
    let loaded = aid::store::load_full(&last_session(&out)).unwrap();
    let s = &loaded.session;
    let exit: Vec<u32> = s
        .functions
        .iter()
        .filter(|f| f.internal && f.probe == Probe::Sync && f.name == "exit")
        .map(|f| f.id)
        .collect();
    assert_eq!(exit.len(), 1, "{:?}", s.functions);
    let at_exit = |at: aid::model::NoiseAt| matches!(at, aid::model::NoiseAt::Every { func, .. } if func == exit[0]);
    let (mut held, mut held_failed, mut unheld) = (0, 0, 0);
    for r in s.runs.iter().filter(|r| !r.noise.is_empty() && r.interventions.is_empty()) {
        let Some(n) = r.noise.iter().find(|n| at_exit(n.at)) else {
            unheld += 1;
            continue;
        };
        let aid::model::NoiseAction::Demote { priority, .. } = n.action else {
            // A point of a focused plan left off in this run.
            assert_eq!(n.action, aid::model::NoiseAction::Skip, "run {}", r.id);
            unheld += 1;
            continue;
        };
        assert_eq!(priority, aid::model::OUTLIVE, "run {}: {n:?}", r.id);
        if n.held_ns > 0 {
            held += 1;
            held_failed += usize::from(r.failed());
        }
    }
    assert!(held >= 5, "{held} runs held at exit\n{stderr}");
    assert!(unheld >= 5, "{unheld} amplified runs not held at exit\n{stderr}");
    assert!(
        held_failed * 10 >= held * EXIT_HELD_FAIL_TENTHS,
        "{held_failed} of {held} runs held at exit failed\n{stderr}"
    );
}

/// The main thread held where its join returns (issue 24: noise at a
/// `pthread_join` return). after_join.c's main joins `first` and then
/// checks that `second`, which works for about a millisecond once
/// `first` has ended, has not published yet: a hold of main after the
/// join has returned and before the check lets it publish, while a hold
/// before the join ends long before `first`'s 20 ms do. The point is
/// aid's own probe on the instruction after each of main's calls of
/// `pthread_join`, named by the call's line, and random delays draw it as
/// any other synchronisation point of main's.
///
/// Exact: the two points and their names; in every run that reached the
/// first one, main reached it after `first` had returned and after main
/// entered `pthread_join`. Acceptance rule: at least [`JOIN_HELD_RUNS`]
/// of the 40 amplified runs hold main at one of the two. Measured
/// 2026-12-04 with the change that made the points: 9 to 11 of 40 in six
/// sessions. The traced runs also fail without such a hold (5 of the 40
/// observed runs of one session): the tracer delays main's wake from the
/// join by about as much, so which runs fail is not asserted.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn noise_after_a_join_returns_holds_the_joiner_before_its_check() {
    let _alone = alone();
    let exe = c_fixture("after_join.c", "after_join", &[]);
    // The two thread bodies traced by name: with the default set (which
    // adds `busy_us`), the untraced runs failed more often than the traced
    // ones (25 of 86 against 3 of 40 in one CI run), `debug` went on with
    // fewer probes, and in one CI run its last session had left `first`
    // out too (stop 63), so nothing could be checked against its return.
    let args = ["--trace", "first", "--trace", "second", "--amplify", "random"];
    let (_tmp, out, output) =
        debug_session(&exe, &[&args[..], &["--amplify-below", "50%", "--runs", "80"]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let loaded = aid::store::load_full(&last_session(&out)).unwrap();
    let s = &loaded.session;
    let id_of = |pred: &dyn Fn(&aid::model::Function) -> bool| -> Vec<u32> {
        s.functions.iter().filter(|f| pred(f)).map(|f| f.id).collect()
    };
    let returns: Vec<(u32, &str)> = s
        .functions
        .iter()
        .filter(|f| f.internal && f.probe == Probe::Sync && f.name.contains(" returned to "))
        .map(|f| (f.id, f.name.as_str()))
        .collect();
    let names: Vec<&str> = returns.iter().map(|r| r.1).collect();
    assert_eq!(
        names,
        [
            "pthread_join returned to main at after_join.c:42",
            "pthread_join returned to main at after_join.c:45"
        ],
        "{:?}",
        s.functions
    );
    let first = id_of(&|f| !f.internal && f.name == "first");
    let join = id_of(&|f| f.internal && f.probe == Probe::Sync && f.name == "pthread_join");
    assert_eq!((first.len(), join.len()), (1, 1), "{:?}", s.functions);
    let mut reached = 0;
    for r in &s.runs {
        let call = |func: u32| r.calls.iter().find(|c| c.func == func && c.instance == 1);
        let Some(back) = call(returns[0].0) else { continue };
        reached += 1;
        let first_ret = call(first[0]).and_then(|c| c.exit_ns).expect("first returned");
        let join_entry = call(join[0]).expect("main entered pthread_join").entry_ns;
        assert_eq!(back.role, 0, "run {}", r.id);
        assert!(back.entry_ns > first_ret && back.entry_ns > join_entry, "run {}: {back:?}", r.id);
    }
    assert!(reached > 0, "no run recorded the point\n{stderr}");
    let returned: Vec<u32> = returns.iter().map(|r| r.0).collect();
    let amplified: Vec<&aid::model::Run> =
        s.runs.iter().filter(|r| !r.noise.is_empty() && r.interventions.is_empty()).collect();
    let held = amplified
        .iter()
        .filter(|r| {
            r.noise.iter().any(|n| n.func.is_some_and(|f| returned.contains(&f)) && n.held_ns > 0)
        })
        .count();
    assert!(
        held >= JOIN_HELD_RUNS,
        "{held} of {} amplified runs held after a join\n{stderr}",
        amplified.len()
    );
}

/// Amplified runs of [`noise_after_a_join_returns_holds_the_joiner_before_its_check`]
/// held after a join, at least.
const JOIN_HELD_RUNS: usize = 4;

/// Noise is never a cause (issue 10). `noise_only.c` fails only when the
/// critical section inside `work` takes longer than 300 µs, which on its
/// own it practically never does; amplification injects noise, and the
/// noise at the lock or unlock inside `work` is what makes runs fail. The
/// time a thread was held for noise is taken out of the durations of the
/// calls it was in, and synchronisation points are aid's own functions,
/// so no predicate may blame `work` for being slow or name a sync point:
/// without that, "call 1 of work on main runs too slow" separates every
/// failing run from every passing one. Meanwhile a bystander running the
/// same locks never meets a sync-point probe: they exist in the targets
/// only.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn injected_noise_is_never_a_predicate() {
    let _alone = alone();
    let exe = c_fixture("noise_only.c", "noise_only", &[]);
    let mut bystander = Background(
        Command::new(&exe).arg("spin").stdout(std::process::Stdio::piped()).spawn().unwrap(),
    );
    let mut spun = std::io::BufReader::new(bystander.0.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut spun, &mut line).unwrap();
    assert_eq!(line.trim(), "spinning");
    let (_tmp, out, output) =
        debug_session(&exe, &["-t", "work", "--amplify", "random", "--runs", "150"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("failures are rare ("), "{stderr}");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", bystander.pid())).unwrap();
    assert!(!maps.lines().any(|l| l.ends_with("[uprobes]")), "a probe was hit in the bystander");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(bystander.pid() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert!(bystander.0.wait().unwrap().success(), "the bystander survived");
    line.clear();
    std::io::BufRead::read_line(&mut spun, &mut line).unwrap();
    assert!(line.starts_with("calls="), "{line}");
    let loaded = aid::store::load_full(&out).unwrap();
    let s = &loaded.session;
    let failing: Vec<&aid::model::Run> = s.runs.iter().filter(|r| r.failed()).collect();
    assert!(
        failing.len() >= 5,
        "amplified runs fail: {} of {}\n{stderr}",
        failing.len(),
        s.runs.len()
    );
    // The noise is stored with the runs, with what it held and where.
    let name = |f: Option<u32>| f.map(|f| s.functions[f as usize].name.clone());
    let served: Vec<String> = s
        .runs
        .iter()
        .flat_map(|r| &r.noise)
        .filter(|n| n.held_ns > 0)
        .filter_map(|n| name(n.func))
        .collect();
    assert!(
        served.iter().any(|n| n == "pthread_mutex_lock" || n == "pthread_mutex_unlock"),
        "{served:?}"
    );
    assert!(
        failing.iter().all(|r| r.noise.iter().any(|n| n.held_ns > 0)),
        "every failing run was held by noise (the program alone does not fail)"
    );
    // The sync points are recorded in amplified runs, and only there:
    // the lock and the unlock inside `work`, once each, on its mutex, as
    // entries without a return (no return probe).
    let ids = |name: &str| -> Vec<u32> {
        s.functions.iter().filter(|f| f.internal && f.name == name).map(|f| f.id).collect()
    };
    let (lock, unlock) = (ids("pthread_mutex_lock"), ids("pthread_mutex_unlock"));
    assert!(!lock.is_empty() && !unlock.is_empty(), "{:?}", s.functions);
    for r in &s.runs {
        let syncs: Vec<&aid::model::Call> =
            r.calls.iter().filter(|c| lock.contains(&c.func) || unlock.contains(&c.func)).collect();
        if r.noise.is_empty() {
            assert!(syncs.is_empty(), "run {}: sync points recorded without noise", r.id);
            continue;
        }
        let work = r.calls.iter().find(|c| s.functions[c.func as usize].name == "work").unwrap();
        let end = work.exit_ns.unwrap_or(r.end_ns);
        let inside: Vec<&&aid::model::Call> =
            syncs.iter().filter(|c| c.entry_ns >= work.entry_ns && c.entry_ns <= end).collect();
        assert_eq!(inside.len(), 2, "run {}: {inside:?}", r.id);
        assert!(lock.contains(&inside[0].func) && unlock.contains(&inside[1].func), "{inside:?}");
        assert_eq!(inside[0].args[0], inside[1].args[0], "one mutex");
        assert!(inside.iter().all(|c| c.exit_ns.is_none() && c.role == work.role));
    }
    let options = aid::analysis::AnalysisOptions {
        extract: aid::predicates::ExtractConfig::default(),
        safe: aid::intervene::SafeList::default(),
        reach: aid::intervene::Reach::PROGRAM,
    };
    let analysis = aid::analysis::analyze(s, &options).unwrap();
    for i in 1..analysis.catalog.len() {
        let p = analysis.catalog.get(aid::predicates::PredId(i as u32)).unwrap();
        let f = &s.functions[p.key.func as usize];
        assert!(!f.internal, "a predicate on aid's own probe {}: {}", f.name, p.description);
        if p.description.contains("runs too slow") {
            assert!(
                !analysis.scores[i].fully_discriminative,
                "noise surfaced as a cause: {}",
                p.description
            );
        }
    }
}

/// Amplification reaches a race that rarely shows on its own (issue 10):
/// two-lock-race's window is a few instructions between an unlock and the
/// next lock, and it failed 0 times in 1000 runs natively on a quiet
/// machine (3 of 200 on 2026-11-28). The test names the three functions
/// with `-t`, as a user who knows them would: with no `-t`, `debug`
/// records the C library's lock and unlock calls in every run when they
/// fit the budget, and those probes sit on the unlock path and widen the
/// window; on 2026-11-28 the program then failed in 7 and 10 of its first
/// 40 traced runs on a quiet machine (so it is not rare under that
/// tracing, and noise then made it rarer: 3 of 116 and 2 of 196 noisy
/// runs failed, one of them without a hold; the CI run of f861b1a missed
/// this test that way). Named functions leave the lock probes to the runs
/// that amplify; 0 of the first 40 runs failed in 3 of 3 sessions that day. On a loaded one the traced program fails more often (CI, two
/// vCPUs shared with other jobs: 10 of 103 runs), above the 5 % under
/// which `debug` amplifies by default; so the test says where "rare"
/// begins, `--amplify-below 50%`: fewer than 20 of the first 40 runs fail
/// on either machine, and `debug` then injects noise at the
/// synchronisation points (stronger every 40 runs while fewer than half
/// fail), and the failure appears. On a machine loaded enough that 10 of
/// the first runs fail before 40 are made (the CI run of 0d4e791: 10 of 26),
/// the observation ends without amplifying; the control runs, made under
/// the agent's control, then show the failure rare (0 of 39 there) and
/// `debug` amplifies from there ("under the agent's control the failure
/// is rare"). Either way in is amplification; the test asks for one.
///
/// Acceptance rule: one session (no retry) must have at least 5 failing
/// runs among its runs held by noise, and its held runs must fail more
/// often than its runs without noise (the first 40, or 80). Held runs are
/// the runs without an intervention in which a noise point held a thread
/// (the amplifying observation's, up to 160 after the first 40, and
/// control runs'); runs with an intervention are
/// neither, on either side: a round's intervention is there to stop the
/// failure (CI on 4b25c0a counted them: a round of 570 runs with noise
/// and no failure made it "10 failing of 576 runs held by noise, 2 of 49
/// without noise", while its amplifying observation had 10 failing of 36
/// analysed runs against 2 of the first 40). Amplified
/// runs fail 5–13 % of the time (BENCHMARKS.md: 9.3 % with random delays
/// and 5.3 % with PCT-style change points at the first level, 150 runs
/// each, more at the next), so 160 of them show fewer than 5 failures with
/// a probability of about 1 % (binomial, mean 11.7); the program's own
/// rate on a quiet machine, at most 0.5 % in the README's measurements,
/// would give 5 failures in 160 runs with a probability below 0.2 %. Eight
/// sessions of the release build on 2026-11-24 had 150–160 amplifying runs
/// with 16–28 failing, and 220–351 amplified runs in all. Until 2026-11-28
/// the rule asked every failing noisy run to have been held; that is not
/// what the program does: once the noise is focused, the runs with the
/// plan off carry the lock probes but no hold, and fail now and then as
/// the probes widen the window (1 of 11 such runs in one session; 2 of 6
/// sessions had one). The comparison with the same session's runs without
/// noise says what the held check said, that the noise and not the
/// machine's load made the failures, and holds on a loaded machine too.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn amplification_makes_two_lock_race_fail() {
    let _alone = alone();
    let exe = build("two-lock-race");
    let (_tmp, out, output) = debug_session(
        &exe,
        &[
            "--amplify-below",
            "50%",
            "-t",
            "account_withdraw",
            "-t",
            "client",
            "-t",
            "account_balance",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failures are rare (")
            || stderr.contains("under the agent's control the failure is rare ("),
        "{stderr}"
    );
    let s = aid::store::load(&out).unwrap();
    let rate = |runs: &[&aid::model::Run]| {
        let failing = runs.iter().filter(|r| r.failed()).count();
        (failing, runs.len(), failing as f64 / runs.len().max(1) as f64)
    };
    let observed = || s.runs.iter().filter(|r| r.interventions.is_empty());
    let held: Vec<&aid::model::Run> =
        observed().filter(|r| r.noise.iter().any(|n| n.held_ns > 0)).collect();
    let plain: Vec<&aid::model::Run> = observed().filter(|r| r.noise.is_empty()).collect();
    let (held_failing, held_runs, held_rate) = rate(&held);
    let (plain_failing, plain_runs, plain_rate) = rate(&plain);
    let said = format!(
        "{held_failing} failing of {held_runs} runs held by noise, {plain_failing} of {plain_runs} without noise ({} in all)\n{stderr}",
        s.runs.len()
    );
    assert!(held_failing >= 5, "{said}");
    assert!(held_rate > plain_rate, "{said}");
}

/// Default mode on a program with a hot helper (issue 10): `debug` with
/// no flags measures how often each of inventory-sixty's own functions is
/// called, leaves out `crc32_update` (about 427,000 calls per run) with its
/// count (a lower bound when the counting run was cut short) and the way to
/// trace it anyway, never makes `main` or the
/// never-returning `die` candidates, and traces the functions called a
/// handful of times per run. (Which of the functions called a few hundred
/// times fit depends on the measured budget, 15 % of the untraced
/// run's wall time; BENCHMARKS.md has a measured set and the slowdown.)
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn default_mode_leaves_the_hot_helper_out() {
    let _alone = alone();
    let exe = build("inventory-sixty");
    let (_tmp, out, output) = debug_session(&exe, &["--runs", "2"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("main: its return restates the failure"), "{stderr}");
    assert!(stderr.contains("die: never returns: calling it ends the program"), "{stderr}");
    let hot = stderr.lines().find(|l| l.contains("called too often to trace")).expect(&stderr);
    let count: u64 = hot
        .split("crc32_update (")
        .nth(1)
        .map(|rest| rest.strip_prefix("at least ").unwrap_or(rest))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("crc32_update is left out with its count: {hot}"));
    // About 427,000 per run; a counting run cut short counts fewer, and
    // says "at least" (CI on 5a81ae7: "crc32_update (at least 193413
    // calls, ...)", which this parse did not read before).
    assert!(count > 100_000, "{hot}");
    assert!(hot.contains("name every function to trace with --trace"), "{hot}");
    let s = aid::store::load(&out).unwrap();
    let traced: Vec<&str> =
        s.functions.iter().filter(|f| !f.internal).map(|f| f.name.as_str()).collect();
    for f in ["importer_main", "load_journal", "apply_journal", "reconcile_counts", "catalog_load"]
    {
        assert!(traced.contains(&f), "{f} not traced: {traced:?}");
    }
    for f in ["crc32_update", "main", "die"] {
        assert!(!traced.contains(&f), "{f} traced: {traced:?}");
    }
    // About 23,000 lock and unlock calls per run: far over what the set
    // left of the budget, so runs without noise do not record them.
    let sync = stderr.lines().find(|l| l.contains("lock, unlock and wait calls")).expect(&stderr);
    assert!(sync.contains("only in runs that amplify a rare failure"), "{sync}");
    let sync_ids: Vec<u32> =
        s.functions.iter().filter(|f| f.probe == Probe::Sync).map(|f| f.id).collect();
    assert!(!sync_ids.is_empty());
    for r in s.runs.iter().filter(|r| r.noise.is_empty()) {
        assert!(!r.calls.iter().any(|c| sync_ids.contains(&c.func)), "run {}", r.id);
    }
}

/// Default mode on a program that locks a handful of times per run
/// (two-lock-race: about 14 lock and unlock calls, some of them inside
/// `pthread_create`): what recording them costs, measured with one run,
/// fits in what the default set left of the budget, so every run records
/// them — runs without noise too, whose lock events the lock predicates
/// then read. Only a signal fails a run here (`--fail-on signal`; the
/// example fails with exit code 1), so the session ends with "no run
/// failed" after its 3 runs; what they recorded is stored all the same.
/// Until 2026-11-28 it counted on 3 runs being too few to fail, but
/// two-lock-race fails in about 5 % of runs: in CI on 5a81ae7 one of the
/// three failed and the session went on to 1,113 intervened runs.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn default_mode_records_lock_events_when_cheap() {
    let _alone = alone();
    let exe = build("two-lock-race");
    let (_tmp, out, output) = debug_session(&exe, &["--runs", "3", "--fail-on", "signal"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let sync = stderr.lines().find(|l| l.contains("lock, unlock and wait calls")).expect(&stderr);
    assert!(
        sync.contains("recording the C library's lock, unlock and wait calls in every run ("),
        "{sync}"
    );
    let s = aid::store::load(&out).unwrap();
    let name = |id: u32| s.functions[id as usize].name.as_str();
    let plain: Vec<_> = s.runs.iter().filter(|r| r.noise.is_empty()).collect();
    assert_eq!(plain.len(), 3, "{stderr}");
    for r in plain {
        // A client's account_withdraw takes the lock once to check, and
        // once more to debit when the balance covered it (returns 0).
        for client in [1, 2] {
            let count =
                |f: &str| r.calls.iter().filter(|c| c.role == client && name(c.func) == f).count();
            let withdraw = r
                .calls
                .iter()
                .find(|c| c.role == client && name(c.func) == "account_withdraw")
                .unwrap_or_else(|| panic!("run {}: client#{client} withdrew", r.id));
            let sections = if withdraw.ret == Some(0) { 2 } else { 1 };
            assert_eq!(
                (count("pthread_mutex_lock"), count("pthread_mutex_unlock")),
                (sections, sections),
                "run {}, client#{client}",
                r.id
            );
        }
        // account_balance on main takes it once more.
        let balance = r.calls.iter().find(|c| name(c.func) == "account_balance").unwrap();
        let inside = r.calls.iter().filter(|c| {
            c.role == 0
                && name(c.func) == "pthread_mutex_lock"
                && c.entry_ns >= balance.entry_ns
                && balance.exit_ns.is_none_or(|x| c.entry_ns <= x)
        });
        assert_eq!(inside.count(), 1, "run {}", r.id);
    }
}
