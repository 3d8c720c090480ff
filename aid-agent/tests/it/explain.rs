//! `mine`, `slice` and `compare` on sessions recorded in the test with
//! `aid-agent record`: the counter-atomicity example (a lost update between
//! two workers) and the bank_audit fixture (a lost update between two
//! tellers, beside an auditor thread that has nothing to do with it).
//!
//! The example fails in about a quarter of its runs, so a session is a
//! sample: each test states what it needs from the sample and how likely
//! it is not to get it. No test retries.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use crate::common::*;
use serde_json::Value;

/// A session of 40 runs of counter-atomicity with its aid.args functions,
/// recorded once for all the tests here: its directory and its (failing,
/// passing) run ids.
///
/// Acceptance: the tests need at least one failing and one passing run.
/// With the example's failure rate p ≈ 0.25 (23–34 % measured), 40 runs
/// miss a failure with probability (1 − p)^40 < 1e-4 and a pass with
/// probability p^40 < 1e-20.
fn counter_session() -> &'static (tempfile::TempDir, PathBuf, Vec<u32>, Vec<u32>) {
    static SESSION: OnceLock<(tempfile::TempDir, PathBuf, Vec<u32>, Vec<u32>)> = OnceLock::new();
    SESSION.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let exe = example("counter-atomicity");
        let out = tmp.path().join("session");
        run_ok(
            agent()
                .args(["record", "--trace", "increment", "--trace", "*_counter"])
                .args(["--trace", "check_total", "--runs", "40", "--out"])
                .arg(&out)
                .arg("--")
                .arg(&exe),
        );
        let s = load(&out);
        let ids = |fail: bool| -> Vec<u32> {
            s.runs.iter().filter(|r| r.complete && r.failed() == fail).map(|r| r.id).collect()
        };
        let (f, p) = (ids(true), ids(false));
        assert!(!f.is_empty() && !p.is_empty(), "need a failing and a passing run: {f:?} / {p:?}");
        (tmp, out, f, p)
    })
}

fn json(cmd: &mut Command) -> Value {
    let out = run_ok(cmd);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Which worker's update survived a failing counter-atomicity run: the
/// role name of the worker whose store came last (its stale value is the
/// total), and of the other one. Usually worker 2 survives; when worker 1
/// was delayed past worker 2's set-up, either may.
fn survivor(session: &Path, run: u32) -> (String, String) {
    let s = load(session);
    let r = s.runs.iter().find(|r| r.id == run).unwrap();
    let store = s.functions.iter().find(|f| f.name == "store_counter").unwrap().id;
    let mut stores: Vec<(u64, &str)> = r
        .calls
        .iter()
        .filter(|c| c.func == store)
        .map(|c| {
            let name = &r.threads.iter().find(|t| t.role == c.role).unwrap().name;
            (c.exit_ns.unwrap_or(u64::MAX), name.as_str())
        })
        .collect();
    stores.sort_unstable();
    assert_eq!(stores.len(), 2, "run {run}: {stores:?}");
    (stores[1].1.to_owned(), stores[0].1.to_owned())
}

/// The workers' accesses to the counter in a watched run, in time order,
/// as (thread, function, write); None unless the run's watch record is
/// complete and each of their accesses lies in a traced call.
fn workers_accesses(
    session: &aid::model::Session,
    rec: &aid::explain::watch::WatchRecord,
) -> Option<Vec<(String, String, bool)>> {
    if !rec.complete() {
        return None;
    }
    let run = session.runs.iter().find(|r| r.id == rec.run)?;
    let mut seen = Vec::new();
    for a in &rec.accesses {
        let thread = &run.threads.iter().find(|t| t.role == a.role)?.name;
        if thread.ends_with("_worker") {
            let call = run.calls.get(a.call?)?;
            let func = &session.functions.get(call.func as usize)?.name;
            seen.push((thread.clone(), func.clone(), a.write));
        }
    }
    Some(seen)
}

/// `mine` on counter-atomicity: the top group is worker 2's load before
/// worker 1's store, with the anti-dependence between them — the lost
/// update — whichever way the session's failing runs interleave otherwise.
/// With the declared access types the pattern is exactly that pair; with
/// the default read-write typing it still contains both racing calls.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn mine_ranks_the_racing_pair_first() {
    let _alone = alone();
    let (_, session, _, _) = counter_session();
    let tmp = tempfile::tempdir().unwrap();
    let typed = json(agent().arg("mine").arg(session).args([
        "--reads",
        "load_counter,check_total",
        "--writes",
        "store_counter",
        "--json",
    ]));
    let top = &typed["groups"][0];
    let deps: Vec<String> = top["deps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        deps.contains(
            &"R second_worker:load_counter(events) → W first_worker:store_counter(events) (anti)"
                .to_owned()
        ),
        "{top:#}"
    );
    let pattern = top["patterns"][0]["text"].as_str().unwrap();
    let load = pattern.find("second_worker:load_counter(events)").expect(pattern);
    let store = pattern.find("first_worker:store_counter(events)").expect(pattern);
    assert!(load < store, "{pattern}");
    assert!(top["rel_supp"].as_f64().unwrap() > 0.5);
    // The predicates file loads back.
    let file = tmp.path().join("patterns.json");
    run_ok(agent().arg("mine").arg(session).arg("--emit-predicates").arg(&file));
    let emitted: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(emitted["format"], "aid-mined-patterns");
    assert!(emitted["predicates"][0]["description"].as_str().unwrap().starts_with("pattern ⟨"));
    // Default typing: every call is a read at entry and a write at exit.
    let plain = json(agent().arg("mine").arg(session).arg("--json"));
    let text = plain["groups"][0]["patterns"][0]["text"].as_str().unwrap().to_owned();
    assert!(
        text.contains("second_worker:load_counter(events)")
            && text.contains("first_worker:store_counter(events)"),
        "{plain:#}"
    );
}

/// `slice` on counter-atomicity keeps both racing calls: the surviving
/// worker's stale load (usually worker 2's) and the other worker's store
/// it raced with (a hazard), and not the other worker's own load.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn slice_keeps_both_racing_calls() {
    let _alone = alone();
    let (_, session, fail, _) = counter_session();
    let (won, lost) = survivor(session, fail[0]);
    let s = json(agent().arg("slice").arg(session).args(["--run", &fail[0].to_string()]).args([
        "--reads",
        "load_counter,check_total",
        "--writes",
        "store_counter",
        "--json",
    ]));
    let kept: Vec<(String, bool)> = s["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                format!(
                    "{}:{}#{}",
                    k["role"].as_str().unwrap(),
                    k["function"].as_str().unwrap(),
                    k["instance"]
                ),
                k["hazard_only"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(kept.contains(&(format!("{won}:load_counter#1"), false)), "{s:#}");
    assert!(kept.contains(&(format!("{lost}:store_counter#1"), true)), "{s:#}");
    assert!(kept.contains(&("main:check_total#1".into(), false)), "{s:#}");
    assert!(!kept.iter().any(|(k, _)| *k == format!("{lost}:load_counter#1")), "{s:#}");
}

/// `slice` on the bank_audit fixture, exactly: the withdrawal's read and
/// write, the deposit's write it overwrote (hazard), the check; the
/// deposit's read and the auditor thread are gone, although the auditor
/// shares the journal with main. At `ds` the deposit teller disappears
/// too, as the paper says of hazard-insensitive slices.
///
/// Acceptance: the fixture fails unless a teller is delayed by more than
/// ~4 ms; the test slices the first failing run of 3 and needs one.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn slice_drops_the_unrelated_thread() {
    let _alone = alone();
    let exe = c_fixture("bank_audit.c", "bank_audit", &[]);
    let (_tmp, out) = temp_session();
    run_ok(
        agent()
            .args(["record", "-t", "balance_*", "-t", "journal_*", "--runs", "3", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe),
    );
    let session = load(&out);
    let fail = session.runs.iter().find(|r| r.failed()).expect("one of 3 runs fails").id;
    let slice = |deps: &str| {
        let s = json(
            agent().arg("slice").arg(&out).args(["--run", &fail.to_string(), "--deps", deps]).args(
                ["--reads", "balance_get,balance_check", "--writes", "balance_set", "--json"],
            ),
        );
        let kept: Vec<String> = s["kept"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["text"].as_str().unwrap().to_owned())
            .collect();
        (s, kept)
    };
    let (s, kept) = slice("ds,war,waw");
    assert_eq!(
        kept,
        [
            "withdraw_teller:balance_get#1(account) → 100",
            "deposit_teller:balance_set#1(account, 150) → 150",
            "withdraw_teller:balance_set#1(account, 70) → 70",
            "main:balance_check#1(account) → 70",
        ]
    );
    assert_eq!((s["kept_roles"].as_u64(), s["total_roles"].as_u64()), (Some(3), Some(4)));
    assert_eq!(s["total_calls"], 10);
    let (_, kept) = slice("ds");
    assert_eq!(
        kept,
        [
            "withdraw_teller:balance_get#1(account) → 100",
            "withdraw_teller:balance_set#1(account, 70) → 70",
            "main:balance_check#1(account) → 70",
        ]
    );
}

/// `compare` on counter-atomicity, re-running the program: the chain
/// starts at the order of worker 2's load and worker 1's store and ends at
/// the failure, and the order link passes both symmetric tests (holding
/// worker 2's load until worker 1's store has returned cures a failing
/// run; holding worker 1's store until worker 2's load has returned
/// induces the failure in a passing one). The failing run compared is the
/// first one where worker 2's update survived (the usual lost update;
/// [`survivor`]), with the access types declared, as the README's
/// `--safe load_counter` declares what may be forced.
///
/// Acceptance: each side of each test is 5 fresh runs and passes when at
/// least 3 are usable and at least 80 % of those show the effect. Under
/// the holds the outcome does not depend on the schedule (the load reads
/// 1 after the store, 0 before it), so a side fails only when holds time
/// out (1 s, against ~15 ms runs), runs lose events, or re-runs are
/// confounded (a thread ordering neither original run had); a no-op
/// replacement would need ≥ 4 of 5 natural failures and ≥ 4 of 5 natural
/// passes at once, which cannot happen.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn compare_tests_the_order_both_ways() {
    let _alone = alone();
    let (_, session, fail, _) = counter_session();
    let run = *fail
        .iter()
        .find(|&&r| survivor(session, r).0 == "second_worker")
        .expect("a failing run where worker 2's update survived");
    let tmp = tempfile::tempdir().unwrap();
    let reruns = tmp.path().join("reruns");
    let c = json(
        agent()
            .arg("compare")
            .arg(session)
            .args(["--fail", &run.to_string(), "--safe", "load_counter", "--repeat", "5"])
            .args(["--reads", "load_counter,check_total", "--writes", "store_counter"])
            .arg("--out")
            .arg(&reruns)
            .arg("--json"),
    );
    let chain = &c["chain"];
    let first = &chain[0];
    assert_eq!(
        first["text"],
        "order second_worker.load_counter#1 ≺ first_worker.store_counter#1 (FAIL) vs ≻ (PASS)",
        "{c:#}"
    );
    let test = &first["test"];
    assert_eq!(test["cure"]["passed"], true, "{c:#}");
    assert_eq!(test["induce"]["passed"], true, "{c:#}");
    let texts: Vec<String> =
        chain.as_array().unwrap().iter().map(|s| s["text"].as_str().unwrap().to_owned()).collect();
    assert_eq!(texts[1], "second_worker.load_counter#1 ret 0 vs 1", "{c:#}");
    assert!(
        texts.last().unwrap().starts_with("the run fails: exit code 1 vs exit code 0"),
        "{c:#}"
    );
    assert_eq!(c["stopped"], false);
    // The re-runs are a session of their own, with the interventions.
    let rr = load(&reruns);
    assert_eq!(rr.runs.len() as u64, c["reruns"].as_u64().unwrap());
    assert!(rr.runs.iter().all(|r| !r.interventions.is_empty()));
}

/// `compare --access watch` on counter-atomicity, declaring nothing: the
/// reads-from edges of the two runs and of every re-run come from what
/// watchpoints saw. The read-write guess makes worker 1's `load_counter`
/// a writer (a write at its exit), so worker 2's load may "read from" it
/// and the dual slice keep it (when the two loads did not overlap);
/// typed by the hardware the load never writes, returns 0 in both runs,
/// and is not in the slice. The chain starts at the order of
/// [`compare_tests_the_order_both_ways`], tested with watched re-runs.
///
/// Acceptance: 30 watched runs must hold a failing one where worker 2's
/// update survived (p ≈ 0.25 per run, worker 2 usually survives; no
/// failure at all has probability 0.75^30 < 2e-4) and a passing one where
/// worker 1 stored first (the usual order). The chain's first link is
/// found without re-running; its test is made but its verdict depends on
/// how many re-runs are confounded (below), so it is not asserted.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn compare_with_watchpoints_takes_reads_from_real_writes() {
    let _alone = alone();
    let (_, session, fail, _) = counter_session();
    let tmp = tempfile::tempdir().unwrap();
    let watched = tmp.path().join("watched");
    run_ok(
        agent()
            .arg("watch")
            .arg(session)
            .args(["--object", "events", "--run", &fail[0].to_string(), "--runs", "30"])
            .arg("--out")
            .arg(&watched),
    );
    let w = load(&watched);
    // The failing run: worker 2's update survived; the passing run: worker
    // 1 stored first (as in the spec's example). With another passing
    // run the two differ in worker 1's load too. Both are told by the
    // accesses the watchpoints saw, in a complete watch record: the calls'
    // exit times do not order the stores (CI of 32abef4, on a loaded
    // machine, picked a pair whose dual slice held worker 1's load).
    let records = aid::explain::watch::load_records(&watched).unwrap();
    let access = |who: &str, func: &str, write: bool| (who.to_owned(), func.to_owned(), write);
    let (load1, store1) = (
        access("first_worker", "load_counter", false),
        access("first_worker", "store_counter", true),
    );
    let (load2, store2) = (
        access("second_worker", "load_counter", false),
        access("second_worker", "store_counter", true),
    );
    let pick = |failed: bool| {
        w.runs.iter().filter(|r| r.complete && r.failed() == failed).map(|r| r.id).find(|&r| {
            let Some(seen) = records.get(&r).and_then(|rec| workers_accesses(&w, rec)) else {
                return false;
            };
            if failed {
                seen.len() == 4
                    && seen[..2].contains(&load1)
                    && seen[..2].contains(&load2)
                    && seen[2..] == [store1.clone(), store2.clone()]
            } else {
                seen == [load1.clone(), store1.clone(), load2.clone(), store2.clone()]
            }
        })
    };
    let run = pick(true).expect("a failing watched run where worker 2's update survived");
    let pass = pick(false).expect("a passing watched run where worker 1 stored first");
    let compare = |access: &str, repeat: &str| {
        json(
            agent()
                .arg("compare")
                .arg(&watched)
                .args(["--fail", &run.to_string(), "--pass", &pass.to_string()])
                .args(["--access", access, "--repeat", repeat])
                .args(["--safe", "load_counter", "--out"])
                .arg(tmp.path().join(format!("reruns-{access}")))
                .arg("--json"),
        )
    };
    let slice = |c: &Value| -> Vec<String> {
        c["dual_slice"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().into()).collect()
    };
    let c = compare("watch", "5");
    assert_eq!((&c["fail"], &c["pass"]), (&Value::from(run), &Value::from(pass)));
    assert!(!slice(&c).contains(&"first_worker.load_counter#1".to_owned()), "{c:#}");
    let first = &c["chain"][0];
    assert_eq!(
        first["text"],
        "order second_worker.load_counter#1 ≺ first_worker.store_counter#1 (FAIL) vs ≻ (PASS)",
        "{c:#}"
    );
    // The link was tested from the failing side with watched re-runs. Its
    // verdict is not asserted: typed exactly, the re-runs' reads-from
    // edges show this program's natural schedule variation (worker 2
    // storing first, check_total reading worker 1's store), which
    // discards 1 to 3 of 5 re-runs a side as confounded (measured), where
    // the read-write guess hides it.
    let cure = &first["test"]["cure"];
    assert_eq!(cure["runs"].as_array().unwrap().len(), 5, "{c:#}");
    let sum = |side: &Value| {
        ["usable", "confounded", "not_applied"]
            .iter()
            .map(|k| side[k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum(cure), 5, "{c:#}");
    // Every re-run watched the counter.
    let reruns = tmp.path().join("reruns-watch");
    let lines = std::fs::read_to_string(reruns.join("watch.jsonl")).unwrap();
    assert_eq!(lines.lines().count() as u64, c["reruns"].as_u64().unwrap());
}

/// `debug --amplify-watch account` on the race_window fixture: holding the
/// thread that first touches the account for 5 ms right after its read
/// opens the lost update's window, which on its own is a few
/// instructions wide. The overlap of the two withdrawals is then the
/// last link before the failure, decided a data race by watched re-runs
/// (both write the account), and serialising the two calls (its
/// intervention) stops the failure. It is the root cause unless every
/// run in which `late` drew 2 ms failed and every 8 ms one passed: then
/// "serve on late runs too fast" (the 2 ms draw that brings `late` into
/// the window, the fixture's own account) separates them too, comes
/// first, and delaying serve's return stops the failure; the root cause
/// is that, and the race is link 2 (a CI session, 9 of 20 failing).
/// Since `ends_first` (stop 78) the same timing has a second statement,
/// "serve on late ends while withdraw on early runs" (late's serve
/// returning inside early's held withdraw is what brings late's withdraw
/// into the window), placed at serve's return, before the race: a
/// landmark against one of the race's own calls, which the report gives
/// as the timing the race needs, the race staying the root cause
/// (`analysis::triggers`; on e18191c it was named the root cause).
///
/// Acceptance: without the hold a run fails only if `early` is preempted
/// for 2 ms between two adjacent instructions: at most 1 of 16 recorded
/// runs may fail. With it, runs 2 to 20 of debug (the first locates the
/// account) fail whenever `late` draws 2 ms (a fair coin): fewer than 3
/// of 19 has probability P(Bin(19, ½) ≤ 2) < 4e-4. The causal path is
/// the engine's verdict at its 99 % confidence.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn debug_amplified_by_a_watchpoint_finds_the_data_race() {
    let _alone = alone();
    let exe = c_fixture("race_window.c", "race_window", &[]);
    let trace = ["-t", "withdraw", "-t", "serve", "-t", "open_branch", "-t", "balance_of"];
    let tmp = tempfile::tempdir().unwrap();
    let natural = tmp.path().join("natural");
    run_ok(
        agent().arg("record").args(trace).args(["--runs", "16", "--out"]).arg(&natural).arg(&exe),
    );
    let failed = |s: &aid::model::Session, from: u32| {
        s.runs.iter().filter(|r| r.id >= from && r.failed()).count()
    };
    let n = failed(&load(&natural), 1);
    assert!(n <= 1, "{n} of 16 runs failed without amplification");
    let debugged = tmp.path().join("debugged");
    let output = run_ok(
        agent()
            .arg("debug")
            .args(trace)
            .args(["--amplify-watch", "account", "--runs", "20", "--out"])
            .arg(&debugged)
            .arg(&exe),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let s = load(&debugged);
    let observed: Vec<&aid::model::Run> =
        s.runs.iter().filter(|r| r.id <= 20 && r.interventions.is_empty()).collect();
    assert_eq!(observed.len(), 20);
    let amplified = observed.iter().filter(|r| r.id >= 2 && r.failed()).count();
    assert!(amplified >= 3, "{amplified} of 19 amplified runs failed\n{text}");
    // The watched re-runs' verdict, and the predicate in its words.
    let races: Value =
        serde_json::from_str(&std::fs::read_to_string(debugged.join("races.json")).unwrap())
            .unwrap();
    let race = &races[0];
    assert_eq!(race["object"], "account", "{races:#}");
    assert_eq!(race["verdict"], "data_race", "{races:#}");
    assert_eq!(
        (&race["evidence"]["a_writes"], &race["evidence"]["b_writes"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    let runs = race["evidence"]["runs"].as_u64().unwrap();
    assert!((1..=3).contains(&runs), "{races:#}");
    let race = format!(
        "call 1 of withdraw on early and call 1 of withdraw on late run at the same time on the same object, which no passing run shows: a data race on account, which both write (hardware watchpoints, {runs} re-run(s))"
    );
    let root_is_race = text.lines().any(|l| l == format!("Root cause: {race}"));
    let serve_then_race =
        text.lines().any(|l| l.starts_with("Root cause: call 1 of serve on late runs too fast: "))
            && text.lines().any(|l| l == format!("  2. {race}"));
    assert!(root_is_race || serve_then_race, "{race}\n{text}");
    assert!(
        text.contains(
            "intervention: run call 1 of withdraw on early and call 1 of withdraw on late one after the other"
        ),
        "{text}"
    );
}

/// Bad input is one line and exit code 2.
#[test]
fn bad_arguments_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let line = run_err(agent().arg("mine").arg(dir.path()));
    assert!(line.ends_with("is not an aid session (no session.json): give the directory written by `aid-agent record`"), "{line}");
    let line = run_err(agent().arg("mine").arg(dir.path()).args(["--min-supp", "0"]));
    assert_eq!(line, "aid: --min-supp 0 must be in (0, 1]: a fraction of the failing runs");
    let line =
        run_err(agent().arg("slice").arg(dir.path()).args(["--run", "1", "--deps", "ds,xyz"]));
    assert_eq!(line, "aid: bad --deps `ds,xyz`: give a comma-separated subset of ds, cs, war, waw");
    let line =
        run_err(agent().arg("compare").arg(dir.path()).args(["--fail", "1", "--target", "f#1"]));
    assert_eq!(
        line,
        "aid: bad criterion `f#1`: give `exit` or `function#k.ret`, e.g. `check_total#1.ret`"
    );
    let line = run_err(agent().args(["debug", "-p", "1", "--amplify-watch", "account"]));
    assert_eq!(
        line,
        "aid: --amplify-watch needs runs of a program aid starts (a watched object is located in one run and watched from the next), not --pid"
    );
}

/// A session written directly with the library (no probes): `parse`
/// returns 0 in two runs and -22 in the third, which fails.
fn written_session(dir: &Path) {
    use aid::{
        model::{EventRow, Label, Outcome, Point, RecordedRun, ValueKind, ValueType, testing},
        store::{self, Header, Mode, Writer},
    };
    let int = ValueType { kind: ValueKind::Signed, size: 4 };
    let f = testing::function(0, "parse").in_module("/bin/t", 0x1000).with_types(int, vec![]);
    let header = Header {
        format: store::FORMAT.into(),
        version: store::VERSION,
        tool: "test".into(),
        created: 0,
        created_subsec_ns: 0,
        mode: Mode::Record,
        program: "/bin/t".into(),
        command: vec!["/bin/t".into()],
        pid: None,
        unit: None,
        fail_rules: Vec::new(),
        functions: vec![f.clone()],
        settings: None,
        jobs: None,
        fleet: None,
    };
    let mut w = Writer::create(dir, &header).unwrap();
    for (id, ret) in [(1, 0), (2, 0), (3, -22)] {
        let row = |t_ns, point, ret| EventRow {
            t_ns,
            tid: 100,
            role: 0,
            func: 0,
            point,
            instance: 1,
            args: [0; 3],
            ret,
            content: None,
        };
        let rows = vec![row(5, Point::Entry, None), row(9, Point::Exit, Some(ret))];
        let label = if ret == 0 { Label::Pass } else { Label::Fail };
        let mut run = testing::run(id, label, aid::model::calls_from_rows(&rows), 20);
        run.outcome = Outcome { exit_code: Some(i32::from(ret != 0)), ..Outcome::default() };
        let rec = RecordedRun {
            host: None,
            run,
            rows,
            start_ns: 0,
            orphan_exits: 0,
            stdout: String::new(),
            stderr: String::new(),
            probe_errors: 0,
            notes: Vec::new(),
            sync_steps: Vec::new(),
            hang: None,
        };
        w.append(&rec, std::slice::from_ref(&f)).unwrap();
    }
}

/// `analyze`, `mine` and `slice` writing into a pipe whose reader has
/// gone end quietly: no panic, an exit code (`print!` panicked here).
#[test]
fn printing_commands_survive_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    written_session(&dir);
    for args in [vec!["analyze"], vec!["mine"], vec!["slice", "--run", "3"]] {
        let mut child = agent()
            .args(&args)
            .arg(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before anything is written.
        drop(child.stdout.take());
        let result = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(result.status.code(), Some(0), "{args:?}: {stderr}");
    }
}
