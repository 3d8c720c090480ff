//! `aid-agent debug` on every bundled example (examples/*): the exact root
//! cause and causal path it reports, and no more interventions than TAGT
//! would need on the same session (fewer, for the five built for aid,
//! whose AC-DAGs have several candidates).
//!
//! The examples fail because of timing, so they run one at a time (a busy
//! machine changes their failure rates), and a session can miss: on rare
//! occasions a scheduler stall makes a passing run show the root-cause
//! behaviour, so it is no longer fully discriminative. The acceptance rule
//! is therefore statistical, and stated here (see [`check`]): **an example
//! passes when at least 2 of 3 sessions report the exact path**, each of
//! those with its root cause named and no more interventions than TAGT
//! (fewer for the five built for aid).
//!
//! The three ordinary programs (pool-table-race, heartbeat-auth,
//! transient-fetch) are run with the flags in their `aid.args`: the
//! functions a user would trace after reading the code, `--safe` only for
//! the functions their READMEs list as side-effect free. heartbeat-auth
//! and two-lock-race are also run with no flags at all.


use aid::model::Probe;
use std::{io::Write as _, path::PathBuf, process::Command};

use crate::common::*;


fn example_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name)
}

/// Builds an example the way its README (and examples/build.sh) says: its
/// program is `<name>.c`, `<name>.cpp` or `main.rs` (other files, such as
/// two-lock-race's noise library, are not part of it).
fn build(name: &str) -> PathBuf {
    let dir = example_dir(name);
    let out = std::env::temp_dir().join(format!("aid-example-{}-{name}", std::process::id()));
    if out.exists() {
        return out;
    }
    let stem = name.replace('-', "_");
    let (c, cpp) = (dir.join(format!("{stem}.c")), dir.join(format!("{stem}.cpp")));
    let status = if c.exists() {
        Command::new("gcc")
            .args(["-g", "-O1", "-pthread", "-o"])
            .arg(&out)
            .arg(c)
            .arg("-lm")
            .status()
    } else if cpp.exists() {
        Command::new("g++")
            .args(["-std=c++17", "-g", "-O1", "-pthread", "-o"])
            .arg(&out)
            .arg(cpp)
            .status()
    } else {
        Command::new("rustc")
            .args(["-g", "-C", "opt-level=1", "--edition", "2021", "--crate-name", &stem, "-o"])
            .arg(&out)
            .arg(dir.join("main.rs"))
            .status()
    };
    assert!(status.unwrap().success(), "building example {name}");
    out
}

struct Outcome {
    path: Vec<String>,
    root_cause: String,
    interventions: f64,
    tagt_mean: f64,
    tagt_max: f64,
    text: String,
}

/// The flags an example's README runs `debug` with, one per line of its
/// `aid.args`.
fn aid_args(name: &str) -> Vec<String> {
    std::fs::read_to_string(example_dir(name).join("aid.args"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// `aid-agent debug ARGS --out SESSION -- EXE`, whatever its exit: the
/// temporary directory (the session goes with it), the session directory
/// and the output.
fn debug_session<S: AsRef<std::ffi::OsStr>>(
    exe: &std::path::Path,
    args: &[S],
) -> (tempfile::TempDir, PathBuf, std::process::Output) {
    let (tmp, out) = temp_session();
    let output = agent()
        .arg("debug")
        .args(args)
        .arg("--out")
        .arg(&out)
        .arg("--")
        .arg(exe)
        .output()
        .expect("running aid-agent");
    (tmp, out, output)
}

/// One `debug` session of example `name`. A session that confirmed no
/// cause (exit 1, its report written: "No cause was confirmed", or no
/// candidate to test) is an outcome with an empty path — a miss under
/// [`check_path`]'s rule, printed with the others — not an error; any
/// other failure is.
fn debug(name: &str, args: &[String]) -> Outcome {
    let exe = build(name);
    let (_tmp, out, output) = debug_session(&exe, args);
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
    // The last session's directory: `out` itself, or one under it when
    // `debug` went on to trace callers.
    let last = text
        .lines()
        .find_map(|l| l.strip_prefix("Session and report (report.html, report.json, dag.dot): "))
        .map_or(out.clone(), PathBuf::from);
    assert!(last.starts_with(&out), "{}", last.display());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(last.join("report.json")).unwrap()).unwrap();
    let path = report["path"]
        .as_array()
        .map(|links| links.iter().map(|l| l["predicate"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    Outcome {
        path,
        root_cause: report["root_cause"].as_str().unwrap_or_default().to_owned(),
        interventions: report["interventions"].as_f64().unwrap_or(0.0),
        tagt_mean: report["tagt"]["mean_interventions"].as_f64().unwrap_or(0.0),
        tagt_max: report["tagt"]["max_interventions"].as_f64().unwrap_or(0.0),
        text,
    }
}

/// How a link of the expected path is matched.
enum Expect<'a> {
    /// The start of the predicate's description (the numbers after it are
    /// measured durations).
    Starts(&'a str),
    /// The whole description, a regular expression: for a fact that aid
    /// can state in more than one exact form.
    Regex(&'a str),
    /// A link that may be on the path or not, a regular expression as in
    /// [`Expect::Regex`]: another facet of a fact already on the path,
    /// confirmed in the sessions whose runs all show it.
    Maybe(&'a str),
}

impl Expect<'_> {
    fn matches(&self, p: &str) -> bool {
        match self {
            Expect::Starts(s) => p.starts_with(s),
            Expect::Regex(r) | Expect::Maybe(r) => {
                regex::Regex::new(&format!("^(?:{r})$")).unwrap().is_match(p)
            }
        }
    }

    fn words(&self) -> &str {
        match self {
            Expect::Starts(s) | Expect::Regex(s) | Expect::Maybe(s) => s,
        }
    }
}

/// Whether `path` is `expected` link by link, each [`Expect::Maybe`] link
/// present or left out.
fn matches(path: &[String], expected: &[Expect<'_>]) -> bool {
    match (path.split_first(), expected.split_first()) {
        (_, None) => path.is_empty(),
        (p, Some((e @ Expect::Maybe(_), rest))) => {
            matches(path, rest) || p.is_some_and(|(p, tail)| e.matches(p) && matches(tail, rest))
        }
        (None, Some(_)) => false,
        (Some((p, tail)), Some((e, rest))) => e.matches(p) && matches(tail, rest),
    }
}

/// A path matches with each optional link present or left out, never
/// with a link out of place or one too many.
#[test]
fn an_optional_link_may_be_left_out_but_not_moved() {
    let path = |links: &[&str]| links.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
    let expected = [Expect::Starts("root"), Expect::Maybe("facet [12]"), Expect::Starts("ret")];
    assert!(matches(&path(&["root", "ret"]), &expected));
    assert!(matches(&path(&["root", "facet 2", "ret"]), &expected));
    assert!(!matches(&path(&["root", "facet 3", "ret"]), &expected));
    assert!(!matches(&path(&["facet 1", "root", "ret"]), &expected));
    assert!(!matches(&path(&["root", "facet 1", "facet 2", "ret"]), &expected));
    assert!(!matches(&path(&["root"]), &expected));
    assert!(!matches(&path(&["root", "ret", "more"]), &expected));
}

/// Sessions per example, and how many must report the exact path.
const SESSIONS: usize = 3;
const NEEDED: usize = 2;

/// Debugs `name` and checks the causal path, root cause first; each entry
/// is the start of the predicate's description (the numbers after it are
/// measured durations).
///
/// Acceptance rule: up to [`SESSIONS`] sessions, stopping once the verdict
/// is known; the example passes when [`NEEDED`] of them report the exact
/// path (and, in each of those, the root cause and fewer interventions
/// than TAGT). If a session misses with probability q, the example fails
/// with probability 3q² − 2q³: 0.7 % for q = 5 %, 50 % for a coin flip,
/// always for a systematic miss; a single retry (1 of 2) would pass a
/// coin-flip aid 75 % of the time. Every missed session is printed with
/// the path it reported, past the harness' output capture, so no miss
/// goes unseen even when the example passes.
fn check(name: &str, expected: &[&str]) {
    let expected: Vec<Expect<'_>> = expected.iter().map(|&s| Expect::Starts(s)).collect();
    check_path(name, &expected, Tagt::Fewer);
}

/// How AID's interventions must compare with TAGT's estimate.
#[derive(Clone, Copy, PartialEq)]
enum Tagt {
    Fewer,
    /// With one or two candidates the two strategies need the same rounds.
    NoMore,
    /// No more than TAGT's worst replayed seed: with a handful of
    /// candidates that are each pruned alone, the two strategies run much
    /// the same rounds in another order, and one session's count is a
    /// single draw against the mean of 20 replays (heartbeat-auth with no
    /// flags, 2026-11-23: 8 against a mean of 6.8 and a maximum of 8; with
    /// its `aid.args`, in CI the same day: 7 against 6.55 and at most 8,
    /// where 16 earlier sessions took 4–6).
    NoMoreThanWorst,
}

fn check_path(name: &str, expected: &[Expect<'_>], tagt: Tagt) {
    check_path_with(name, &aid_args(name), expected, tagt);
}

/// [`check_path`] with the given flags instead of the example's `aid.args`.
fn check_path_with(name: &str, args: &[String], expected: &[Expect<'_>], tagt: Tagt) {
    let _alone = alone();
    two_of_three(name, || {
        let outcome = debug(name, args);
        if !matches(&outcome.path, expected) {
            return Err(Miss {
                said: format!("MISSED the causal path, reporting {:#?}", outcome.path),
                report: outcome.text,
            });
        }
        // The terminal names the same call site (with the values the runs
        // showed rather than the rule).
        let site =
            outcome.path[0].split(" runs ").next().unwrap().split(" returns ").next().unwrap();
        let root = format!("Root cause: {site}");
        assert!(
            outcome.text.contains(&root)
                && expected[0].matches(&outcome.path[0])
                && expected[0].matches(&outcome.root_cause),
            "{}\n(expected {})",
            outcome.text,
            expected[0].words()
        );
        let fewer = match tagt {
            Tagt::Fewer => outcome.interventions < outcome.tagt_mean,
            Tagt::NoMore => outcome.interventions <= outcome.tagt_mean,
            Tagt::NoMoreThanWorst => outcome.interventions <= outcome.tagt_max,
        };
        assert!(
            fewer,
            "{name}: AID took {} interventions, TAGT about {} (at most {})",
            outcome.interventions, outcome.tagt_mean, outcome.tagt_max
        );
        Ok(())
    });
}

/// A session that missed: a line for the moment it happens, and its whole
/// report.
struct Miss {
    said: String,
    report: String,
}

/// Runs `session` until [`NEEDED`] sessions passed or too many missed to
/// get there ([`check_path`]'s rule). Each miss is written straight to
/// stderr, past the test harness' capture: shown even when the example
/// passes.
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

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn index_race() {
    check(
        "index-race",
        &[
            "call 1 of pool_return on returner#1 and call 1 of pool_top_index on opener#2 run at the same time on the same object",
            "call 1 of pool_top_index on opener#2 returns a value other than 3,",
            "call 1 of pool_get on opener#2 returns a value other than 104,",
        ],
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn commit_after_close() {
    check(
        "commit-after-close",
        &[
            "call 1 of prepare_batch on committer#1 runs too slow",
            "call 1 of consumer_poll on main ends before call 1 of consumer_commit on committer#1 starts",
        ],
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn cache_expiry() {
    check(
        "cache-expiry",
        &[
            "call 2 of fetch_document on main returns a value other than 200,",
            "call 2 of run_task on main runs too slow",
        ],
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn counter_atomicity() {
    // The atomicity violation is one instant seen two ways (the README's
    // root cause): the two increments overlap, and worker 2's increment
    // starts before worker 1's store. Both are anchored at worker 2's
    // `increment` entry; intervening on either stops the failure, so aid
    // may name either as the root cause.
    // Watched re-runs show both increments write the counter: the overlap
    // is a data race (docs/predicates.md).
    let root = r"call 1 of increment on first_worker#1 and call 1 of increment on second_worker#2 run at the same time on the same object, which no passing run shows: a data race on events, which both write \(hardware watchpoints, [1-3] re-run\(s\)\)|call 1 of increment on second_worker#2 starts before call 1 of store_counter on first_worker#1 starts, which no passing run shows";
    check_path(
        "counter-atomicity",
        &[
            Expect::Regex(root),
            Expect::Starts(
                "call 1 of increment on first_worker#1 and call 1 of load_counter on second_worker#2 run at the same time on the same object",
            ),
            Expect::Starts(
                "call 1 of load_counter on second_worker#2 returns a value other than 1,",
            ),
        ],
        Tagt::Fewer,
    );
}

/// The README's root cause, the lookup before the publish, is stated as
/// the loader's `load_config` overlapping the server's `capacity` and
/// `lookup_config` on the registry (a data race), then `capacity`
/// returning 64. Between them aid may confirm one more facet of the same
/// order violation, "`lookup_config` ends before `parse_config` (or
/// `publish_config`) starts" — the order flip the README lists among the
/// fully-discriminative predicates — when every failing run of the
/// session shows it; held as "lookup waits until parse has returned", it
/// stops the failure. Last measured in 5 of 16 sessions, and in 2 of 3 of
/// one CI run on 2026-11-23 (examples/rust-config-race/README.md), so the
/// path is matched with or without it.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rust_config_race() {
    let f = |name: &str| format!("call 1 of rust_config_race::{name}");
    let lookup_first = format!(
        "{} on server#2 ends before {} on loader#1 starts, which no passing run shows",
        f("lookup_config"),
        f("(?:parse|publish)_config")
    );
    let races = [
        format!(
            "{} on server#2 and {} on loader#1 run at the same time on the same object",
            f("capacity"),
            f("load_config")
        ),
        format!(
            "{} on loader#1 and {} on server#2 run at the same time on the same object",
            f("load_config"),
            f("lookup_config")
        ),
    ];
    let capacity = format!("{} on server#2 returns a value other than 256,", f("capacity"));
    check_path(
        "rust-config-race",
        &[
            Expect::Starts(&races[0]),
            Expect::Starts(&races[1]),
            Expect::Maybe(&lookup_first),
            Expect::Starts(&capacity),
        ],
        Tagt::Fewer,
    );
}

/// Without `--safe`, no run may have its return values forced (AID Sec.
/// 3.2): the slow `prepare_batch` cannot be tested and is reported as such,
/// and the path is found with orderings only.
///
/// The ordering that negates the root cause holds `consumer_poll`'s return
/// until `consumer_commit` has *returned*, as every passing run had it.
/// Until 2026-11-23 it held only until the commit had *started*, and
/// `consumer_close` could slip into the commit's ~100 µs body when the
/// machine was busy; when the round had nothing upstream to witness it
/// ran to its cap (600 runs), where one such run pruned the cause (2 of 8
/// sessions, each with one failing run of 600). That is not measured
/// away yet (the slip did not occur in 28 sessions at load 3 to 7, with
/// either hold: BENCHMARKS.md), so the rule stays: **no session forces a value, every session
/// names the slow `prepare_batch` as needing `--safe`, and at least one
/// of two sessions reports the root cause**, held until the commit has
/// returned (each session's outcome is printed).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn safe_list_is_respected() {
    let _alone = alone();
    let exe = build("commit-after-close");
    let want = "Root cause: call 1 of consumer_poll on main ends before call 1 of consumer_commit on committer#1 starts";
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
        assert!(text.contains("call 1 of prepare_batch on committer#1 runs too slow"), "{text}");
        assert!(text.contains("(needs a return-value intervention: declare the function --safe if forcing it is harmless)"), "{text}");
        let found = output.status.success() && text.contains(want);
        if found {
            let hold = "hold call 1 of consumer_poll on main before it returns until call 1 of consumer_commit on committer#1 has returned";
            assert!(text.contains(hold), "{text}");
        }
        eprintln!("session {session}: exit {:?}, root cause found: {found}", output.status.code());
        if found {
            return;
        }
        outcomes.push(text);
    }
    panic!("no session reported the root cause: {outcomes:#?}");
}

/// A failure rarer than 5 %: debug says so, amplifies it with random delays
/// at traced calls (stored with the runs), and still finds the order
/// violation behind it.
///
/// Acceptance rule: [`check_path`]'s, two of at most three sessions, each
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
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rare_failures_are_amplified() {
    let _alone = alone();
    let exe = c_fixture("rare.c", "rare", &[]);
    two_of_three("rare", || rare_session(&exe));
}

/// One session of [`rare_failures_are_amplified`]; its report when it
/// confirmed no cause.
fn rare_session(exe: &std::path::Path) -> Result<(), Miss> {
    let (_tmp, out, output) =
        debug_session(exe, &["-t", "prepare", "-t", "publish", "-t", "consume"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stderr.contains("failures are rare ("), "{stderr}");
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
            "call 1 of consume on reader#2 {relation} before call 1 of publish on writer#1 starts, which no passing run shows"
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
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("aid: no run failed in 5 runs (a run fails on: nonzero, signal, timeout)"),
        "{stderr}"
    );
}

/// A thread pool: which worker runs which job changes every run, so only
/// group predicates mean something. The race itself (a resize inside
/// `dict_intern` overlapping a lookup) has no call of its own: `dict_grow`
/// is inlined, and under the tracer every `dict_intern` can be slow
/// (lock contention) in passing runs too. What separates the runs is its
/// first effect, a lookup from `document_norm` that returns NULL for a
/// word that is in the table; re-executing that lookup (a pure read) gives
/// its genuine value and the failure stops (examples/pool-table-race).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn pool_table_race() {
    check_path(
        "pool-table-race",
        &[Expect::Starts(
            "some call of dict_lookup from document_norm on the worker threads returns an error: 0 (NULL or false)",
        )],
        Tagt::NoMore,
    );
}

/// C++ std::thread with a lambda: the heartbeat reaches the server before
/// main's HELLO or AUTH frame (the calls share no pointer). aid states it
/// as the heartbeat thread's first `Server::handle` starting (or ending)
/// before main's first or second one — both forms are the README's root
/// cause, which one holds in every failing run depends on the session —
/// and confirms it by holding that heartbeat until main's frames were
/// handled. `send_heartbeat` and `Client::login` returning false follow,
/// but change state (not `--safe`), so the path is the root cause alone.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn heartbeat_auth() {
    let handle = r"session::Server::handle\(unsigned int, session::Frame const&\)";
    let one = format!(
        r"call 1 of {handle} on .+#1 (?:starts|ends) before call [12] of {handle} on main starts"
    );
    let root = format!("{one}(?:, or {one})?, which no passing run shows");
    check_path("heartbeat-auth", &[Expect::Regex(&root)], Tagt::NoMoreThanWorst);
}

/// The C++ program whose heartbeat thread is a `std::thread` running a
/// lambda, with no flags at all (issue 10): `debug` picks the program's
/// own functions (`main` is not a candidate), names the thread by its
/// lambda, amplifies the failure when it is rare, and finds the heartbeat
/// reaching the server before main's HELLO or AUTH frame. aid states that
/// fact in one of two forms, depending on what the session's runs show:
///
/// - as an order: the heartbeat thread's first `Server::handle` starts (or
///   ends) before main's first or second one starts, confirmed by holding
///   it until those have run;
/// - as an interleaving of lock sections: the heartbeat's `handle` takes
///   the server's lock while `Client::login` on main is between its two
///   round trips (HELLO done, AUTH not yet), confirmed by serialising
///   `login` and the heartbeat's `handle`. This is the AUTH form of the
///   cause, learned from runs that record lock sections (amplified ones,
///   and every run when they fit the budget), and it separates the runs
///   when no failing run of the session had the heartbeat before HELLO.
///
/// `send_heartbeat` and `login` returning false follow, but are not
/// `--safe`, so the path is the root cause alone. Acceptance rule:
/// [`check_path`]'s, two of at most three sessions, each with no more
/// interventions than TAGT's worst replay ([`Tagt::NoMoreThanWorst`]).
/// Measured 2026-11-23: 12 of 13 sessions found the cause (the miss is in
/// the example's README), so the test fails about 2 % of the time. A
/// session that confirms no cause counts as such a miss ([`debug`]);
/// until 2026-11-23 it failed the test at once (CI that day: 56 runs,
/// 18 % failing, not amplified, the lambda's effects each pruned). A
/// session whose intervention never took effect ended with no report
/// (CI on 0d4e791) until such a predicate was left untested instead.
/// 2026-11-24: 27 of 28 sessions found the cause.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn heartbeat_auth_with_no_flags() {
    let handle = r"session::Server::handle\(unsigned int, session::Frame const&\)";
    let lambda = r"session::Client::connect::\{lambda\(\)#1\}";
    let login = r"session::Client::login\(session::Credentials const&\)";
    let one = format!(
        r"call 1 of {handle} on {lambda}#1 (?:starts|ends) before call [12] of {handle} on main starts"
    );
    let order = format!("{one}(?:, or {one})?");
    let interleaved = format!(
        r"some call of {handle} on {lambda}#1 takes a lock while some call of {login} on main is between two critical sections on it \(released it, to take it again\)"
    );
    let root = format!("(?:{order}|{interleaved}), which no passing run shows");
    check_path_with("heartbeat-auth", &[], &[Expect::Regex(&root)], Tagt::NoMoreThanWorst);
}

/// Rust clerk threads (`thread::spawn` closures) sell the same seat twice
/// (issue 10): two `try_book` calls on the one venue for the same seat, a
/// field of two different `Request`s. Entry probes read each request (DWARF:
/// `req`, after the hidden return pointer), and "another `try_book` runs
/// at the same time on the same venue, both for the same `req.seat`" holds
/// in every failing run and in some passing ones (where the second call
/// finds the seat sold): a necessary candidate, confirmed by serialising
/// the clerks' `try_book` calls. Here the crate's two functions are named
/// with `-t`; [`rust_spawn_closures_with_no_flags`] lets `debug` choose.
/// Acceptance rule: [`check_path`]'s, two of at most three sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rust_spawn_closures_same_seat() {
    let args: Vec<String> =
        ["-t", BOOK, "-t", "rust_spawn_closures::next_request"].map(str::to_owned).to_vec();
    check_path_with("rust-spawn-closures", &args, &[Expect::Regex(&same_seat())], Tagt::NoMore);
}

const BOOK: &str = "rust_spawn_closures::try_book";

/// rust-spawn-closures' root cause, as the report words it.
fn same_seat() -> String {
    let clerks = r"rust_spawn_closures::main::\{closure#0\}::\{closure#0\} threads";
    format!(
        r"some call of {BOOK} on the {clerks} and another call of {BOOK} on the {clerks} run at the same time on the same object \(first passed as argument 2 of {BOOK} on the {clerks}\), both for the same req\.seat"
    )
}

/// The same seat sold twice, with no flags at all (issue 10). The run is
/// short (about 4 ms untraced in `debug`'s measurement on a quiet machine,
/// 1.2 ms once in CI, 1–2 ms from outside) and each of the crate's two
/// functions is called about 360 times, ~2 ms of probes: neither fits the
/// 1 ms budget, so `debug` chooses again within the untraced run's own
/// time, at least 5 ms, which both fit (docs/probes.md, "Default mode";
/// before that floor, the 1.2 ms run refused both and the test failed).
/// The same-seat overlap of `try_book` calls is confirmed.
/// Acceptance rule: [`check_path`]'s, two of at most three sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rust_spawn_closures_with_no_flags() {
    check_path_with("rust-spawn-closures", &[], &[Expect::Regex(&same_seat())], Tagt::NoMore);
}

/// inventory-sixty's root cause as a regular expression: two importers'
/// `stock_item` calls for the same SKU overlap on the stock, and both go
/// on to call `callee` (a regular expression too).
/// The shared stock is named by the first traced call it is passed to:
/// `stock_init` on main when that is traced (default mode), else the
/// importers' `stock_item`.
fn racing_stock_items(callee: &str) -> String {
    let item = "stock_item on the importer_main threads";
    format!(
        r"some call of {item} and another call of {item} run at the same time on the same object \(first passed as argument 1 of (?:{item}|stock_init on main)\), both for the same sku, and both call {callee}"
    )
}

/// inventory-sixty's duplicate insert (issue 10), with the racing
/// function and the insert named: two importers' `stock_item` calls for
/// the same SKU overlap in every run (entry probes read `sku`), but only
/// in failing runs do both go on to call `stock_add` (both found the SKU
/// missing). That is the root cause, confirmed by serialising the
/// importers' `stock_item` calls. With no flags `stock_item` (~5,600
/// calls a run) does not fit the default budget (the example's README).
/// Acceptance rule: [`check_path`]'s, two of at most three sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn inventory_sixty_both_insert() {
    let root = racing_stock_items("stock_add");
    let args: Vec<String> = ["-t", "stock_item", "-t", "stock_add"].map(str::to_owned).to_vec();
    check_path_with("inventory-sixty", &args, &[Expect::Regex(&root)], Tagt::NoMore);
}

/// inventory-sixty's duplicate insert seen from the insert alone (issue
/// 10): with only `stock_add` traced (its entry probe reads `it->sku`, a
/// character array), the failing runs add some SKU twice, and the passing
/// runs do not, or rarely (a duplicate can do no harm), so "stock_add is
/// called twice on the importer_main threads for the same it.sku" holds
/// in every failing run. Nothing in `stock_add` can be forced to stop it,
/// so `debug` traces its caller from DWARF's call sites (`stock_item`)
/// and there confirms the two importers' `stock_item` calls for the same
/// SKU that both go on to add it. Acceptance rule: [`check_path`]'s, two
/// of at most three sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn inventory_sixty_climbs_from_the_insert() {
    let root = racing_stock_items("stock_add");
    let args: Vec<String> = ["-t", "stock_add"].map(str::to_owned).to_vec();
    check_path_with("inventory-sixty", &args, &[Expect::Regex(&root)], Tagt::NoMore);
}

/// From a function that sees the key twice to the race, by its callers
/// (issue 10): with only `catalog_find` traced, "catalog_find is called
/// twice ... for the same sku" is what separates the runs (the importer
/// that lost the race describes the SKU from the catalog too), and has no
/// intervention. `debug` then traces `catalog_find`'s callers from DWARF's
/// call sites (`catalog_describe`, and `report_render`), finds no cause,
/// climbs one caller further (`stock_item`), and there confirms the two
/// importers' `stock_item` calls for the same SKU that both go on to
/// describe it. Acceptance rule: [`check_path`]'s, two of at most three
/// sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn inventory_sixty_climbs_to_the_racing_caller() {
    let root = racing_stock_items("(?:catalog_find|catalog_describe)");
    let args: Vec<String> = ["-t", "catalog_find"].map(str::to_owned).to_vec();
    check_path_with("inventory-sixty", &args, &[Expect::Regex(&root)], Tagt::NoMore);
}

/// inventory-sixty with no flags at all (issue 10). Which functions of
/// about 150 calls a run fit the default budget changes from session to
/// session (the counting run, the machine's load). When the set holds
/// `catalog_find`, the SKU seen twice there climbs (through its callers
/// already traced) to `stock_item`; when it holds neither `catalog_find`
/// nor `stock_add`, the functions left out for cost are traced next, a
/// share at a time, those called on both importers first, and the insert
/// seen twice climbs to `stock_item`. Either way the root cause is the
/// two importers' `stock_item` calls for the same SKU, named by what both
/// go on to call. Acceptance rule: [`check_path`]'s, two of at most three
/// sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn inventory_sixty_with_no_flags() {
    let root = racing_stock_items("(?:stock_add|catalog_find|catalog_describe)");
    check_path_with("inventory-sixty", &[], &[Expect::Regex(&root)], Tagt::NoMore);
}

/// A transient fault whose right value depends on the call: re-executing
/// the failed `pricing_fetch` gives the genuine price (a constant would
/// still be wrong for most SKUs). `unit_price` follows; `price_order` is
/// not safe (it stores the price) and `validate_invoice` is inlined into
/// `main` at -O1, so neither can be on the path.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn transient_fetch() {
    check_path(
        "transient-fetch",
        &[
            Expect::Starts(
                "some call of pricing_fetch on main returns a value other than the one every passing run returned for that call",
            ),
            Expect::Starts(
                "some call of unit_price on main returns a value other than the one every passing run returned for that call",
            ),
        ],
        Tagt::NoMore,
    );
}

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
/// machine. On a loaded one the traced program fails more often (CI, two
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
/// runs among its amplified runs, each held by noise. Amplified runs are
/// those of the amplifying observation (up to 160 after the first 40) and
/// the intervened runs, which carry noise too. Amplified runs fail 5–13 %
/// of the time (BENCHMARKS.md: 9.3 % with random delays and 5.3 % with
/// PCT-style change points at the first level, 150 runs each, more at the
/// next), so 160 of them show fewer than 5 failures with a probability of
/// about 1 % (binomial, mean 11.7); the program's own rate on a quiet
/// machine, at most 0.5 % in the README's measurements, would give 5
/// failures in 160 runs with a probability below 0.2 %. Eight sessions of
/// the release build on 2026-11-24 had 150–160 amplifying runs with 16–28
/// failing, and 220–351 amplified runs in all. (On a loaded machine the
/// count alone does not tell noise from load; the held check still holds.)
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn amplification_makes_two_lock_race_fail() {
    let _alone = alone();
    let exe = build("two-lock-race");
    let (_tmp, out, output) = debug_session(&exe, &["--amplify-below", "50%"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("failures are rare (")
            || stderr.contains("under the agent's control the failure is rare ("),
        "{stderr}"
    );
    let s = aid::store::load(&out).unwrap();
    let amplified: Vec<&aid::model::Run> = s.runs.iter().filter(|r| !r.noise.is_empty()).collect();
    let failing: Vec<&aid::model::Run> = amplified.iter().copied().filter(|r| r.failed()).collect();
    assert!(
        failing.len() >= 5,
        "{} failing of {} amplified runs ({} in all)\n{stderr}",
        failing.len(),
        amplified.len(),
        s.runs.len()
    );
    assert!(
        failing.iter().all(|r| r.noise.iter().any(|n| n.held_ns > 0)),
        "an amplified run failed without being held: {:?}",
        failing.iter().find(|r| r.noise.iter().all(|n| n.held_ns == 0)).map(|r| r.id)
    );
}

/// An atomicity violation between two lock sections, with no flags at all
/// (issue 10): two-lock-race's `account_withdraw` checks the balance in
/// one critical section and debits it in a second, and the program
/// practically never fails on its own. `debug` picks the program's three
/// functions, amplifies the failure with noise at the synchronisation
/// points (whose probes record each lock and unlock), and names the
/// interleaving — one withdrawal holding the account's lock between the
/// other's two sections — as the root cause, confirmed by serialising the
/// withdrawals on the same account. `account_balance` returning -20
/// follows but is not `--safe`, so the path is the root cause alone.
/// Acceptance rule: [`check_path`]'s, two of at most three sessions.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn two_lock_race_with_no_flags() {
    let withdraw = "call of account_withdraw on the client threads";
    let root = format!(
        "some {withdraw} takes a lock while another {withdraw} is between two critical sections on it \\(released it, to take it again\\), which no passing run shows"
    );
    check_path("two-lock-race", &[Expect::Regex(&root)], Tagt::NoMore);
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
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("crc32_update is left out with its count: {hot}"));
    // About 427,000 per run; a counting run cut short counts fewer.
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
/// then read. The runs here are too few to fail (the session may end with
/// "no run failed"); what they recorded is stored all the same.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn default_mode_records_lock_events_when_cheap() {
    let _alone = alone();
    let exe = build("two-lock-race");
    let (_tmp, out, output) = debug_session(&exe, &["--runs", "3"]);
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
