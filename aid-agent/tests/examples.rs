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
//! the functions their READMEs list as side-effect free.

mod common;

use std::{io::Write as _, path::PathBuf, process::Command, sync::Mutex};

use common::*;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn example_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name)
}

/// Builds an example the way its README says.
fn build(name: &str) -> PathBuf {
    let dir = example_dir(name);
    let out = std::env::temp_dir().join(format!("aid-example-{}-{name}", std::process::id()));
    if out.exists() {
        return out;
    }
    let source = |ext: &str| {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == ext))
    };
    let status = match (source("c"), source("cpp")) {
        (Some(c), _) => Command::new("gcc")
            .args(["-g", "-O1", "-pthread", "-o"])
            .arg(&out)
            .arg(c)
            .arg("-lm")
            .status(),
        (None, Some(cpp)) => Command::new("g++")
            .args(["-std=c++17", "-g", "-O1", "-pthread", "-o"])
            .arg(&out)
            .arg(cpp)
            .status(),
        (None, None) => Command::new("rustc")
            .args([
                "-g",
                "-C",
                "opt-level=1",
                "--edition",
                "2021",
                "--crate-name",
                &name.replace('-', "_"),
                "-o",
            ])
            .arg(&out)
            .arg(dir.join("main.rs"))
            .status(),
    };
    assert!(status.unwrap().success(), "building example {name}");
    out
}

struct Outcome {
    path: Vec<String>,
    root_cause: String,
    interventions: f64,
    tagt_mean: f64,
    text: String,
}

fn debug(name: &str) -> Outcome {
    let exe = build(name);
    let args: Vec<String> = std::fs::read_to_string(example_dir(name).join("aid.args"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let (_tmp, out) = temp_session();
    let output =
        run_ok(agent().arg("debug").args(&args).arg("--out").arg(&out).arg("--").arg(&exe));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let path = report["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["predicate"].as_str().unwrap().to_owned())
        .collect();
    Outcome {
        path,
        root_cause: report["root_cause"].as_str().unwrap_or_default().to_owned(),
        interventions: report["interventions"].as_f64().unwrap(),
        tagt_mean: report["tagt"]["mean_interventions"].as_f64().unwrap(),
        text: String::from_utf8_lossy(&output.stdout).into_owned(),
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
}

impl Expect<'_> {
    fn matches(&self, p: &str) -> bool {
        match self {
            Expect::Starts(s) => p.starts_with(s),
            Expect::Regex(r) => regex::Regex::new(&format!("^(?:{r})$")).unwrap().is_match(p),
        }
    }

    fn words(&self) -> &str {
        match self {
            Expect::Starts(s) | Expect::Regex(s) => s,
        }
    }
}

fn matches(path: &[String], expected: &[Expect<'_>]) -> bool {
    path.len() == expected.len() && path.iter().zip(expected).all(|(p, e)| e.matches(p))
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
}

fn check_path(name: &str, expected: &[Expect<'_>], tagt: Tagt) {
    require_bpf();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (mut exact, mut missed) = (0, Vec::new());
    while exact < NEEDED && missed.len() <= SESSIONS - NEEDED {
        let outcome = debug(name);
        if !matches(&outcome.path, expected) {
            // Straight to stderr, past the test harness' capture: shown
            // even when the example passes.
            let _ = writeln!(
                std::io::stderr(),
                "{name}: session {} MISSED the causal path, reporting {:#?}",
                exact + missed.len() + 1,
                outcome.path
            );
            missed.push(outcome);
            continue;
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
        };
        assert!(
            fewer,
            "{name}: AID took {} interventions, TAGT about {}",
            outcome.interventions, outcome.tagt_mean
        );
        exact += 1;
    }
    assert!(
        exact >= NEEDED,
        "{name}: {} of {} sessions missed the causal path; the last reported {:#?}\n{}",
        missed.len(),
        exact + missed.len(),
        missed.last().map(|o| &o.path),
        missed.last().map_or("", |o| o.text.as_str())
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
    check(
        "counter-atomicity",
        &[
            "call 1 of increment on first_worker#1 and call 1 of increment on second_worker#2 run at the same time on the same object",
            "call 1 of increment on first_worker#1 and call 1 of load_counter on second_worker#2 run at the same time on the same object",
            "call 1 of load_counter on second_worker#2 returns a value other than 1,",
        ],
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rust_config_race() {
    check(
        "rust-config-race",
        &[
            "call 1 of rust_config_race::capacity on server#2 and call 1 of rust_config_race::load_config on loader#1 run at the same time on the same object",
            "call 1 of rust_config_race::load_config on loader#1 and call 1 of rust_config_race::lookup_config on server#2 run at the same time on the same object",
            "call 1 of rust_config_race::capacity on server#2 returns a value other than 256,",
        ],
    );
}

/// Without `--safe`, no run may have its return values forced (AID Sec.
/// 3.2): the slow `prepare_batch` cannot be tested and is reported as such,
/// and the path is found with orderings only.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn safe_list_is_respected() {
    require_bpf();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let exe = build("commit-after-close");
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["debug", "-t", "consumer_*", "-t", "prepare_batch", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let text = String::from_utf8_lossy(&output.stdout);
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
    assert!(text.contains("Root cause: call 1 of consumer_poll on main ends before call 1 of consumer_commit on committer#1 starts"), "{text}");
}

/// A failure rarer than 5 %: debug says so, amplifies it with random delays
/// at traced calls (stored with the runs), and still finds the order
/// violation behind it.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn rare_failures_are_amplified() {
    require_bpf();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let exe = c_fixture("rare.c", "rare", &[]);
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["debug", "-t", "prepare", "-t", "publish", "-t", "consume", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stderr.contains("failures are rare ("), "{stderr}");
    assert!(stderr.contains("injecting random delays at traced calls"), "{stderr}");
    // Not a terminal: no progress bars, spinners or colour, only lines.
    assert!(!stderr.contains('\r') && !stderr.contains('\x1b'), "{stderr:?}");
    assert!(!stdout.contains('\x1b'), "{stdout:?}");
    assert!(stderr.lines().all(|l| l.starts_with("aid: ")), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(!report["observed"]["amplified"].is_null());
    let loaded = aid::store::load(&out).unwrap();
    assert!(loaded.runs.iter().any(|r| !r.noise.is_empty()), "noise is recorded with the runs");
    assert!(
        stdout.contains("Root cause: call 1 of consume on reader#2 ends before call 1 of publish on writer#1 starts"),
        "{stdout}"
    );
}

/// Without --trace, debug traces the program's own functions and says
/// which; a program that never fails is a one-line error.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn default_functions_and_no_failure() {
    require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_default", &[]);
    let (_tmp, out) = temp_session();
    let output = agent()
        .args(["debug", "--runs", "5", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no --trace given: tracing the program's 6 own functions: add3, scale, negate, worker_a, worker_b, main"),
        "{stderr}"
    );
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
    check_path("heartbeat-auth", &[Expect::Regex(&root)], Tagt::NoMore);
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
