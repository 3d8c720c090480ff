//! Programs of the public corpus (`../shared/corpus/` next to the
//! project: SCTBench programs written by other people, with their true
//! causes in its `manifest.json`), debugged with no flags from their own
//! folder as a user would (issue 23). `cargo xtask corpus` scores every
//! program; these tests hold aid to the ones it has been right on in
//! every pass, by the scoreboard's rule: the root cause names at least two
//! of the cause's functions (the one, when only one is listed), and a
//! confirmed cause that does not is wrong, which fails a test at once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{agent, alone, sessions_right};
use crate::corpus_rule::{last_report, names_cause, printed_report, root_cause_functions};

/// The most a session may take (the scoreboard's `--session-timeout`).
const SESSION_SECS: &str = "300";

/// One corpus program, built in a folder of its own.
struct Program {
    dir: tempfile::TempDir,
    run: Vec<String>,
    cause: Vec<String>,
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus")
}

/// Copies corpus program `name` to a temporary folder and builds it with
/// the manifest's command.
fn program(name: &str) -> Program {
    let corpus = corpus();
    let manifest = std::fs::read_to_string(corpus.join("manifest.json")).unwrap_or_else(|e| {
        panic!("{}: {e} (the corpus lies next to the project)", corpus.display())
    });
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let entries = manifest.as_array().or_else(|| manifest["programs"].as_array());
    let p = entries.into_iter().flatten().find(|p| p["name"] == name).expect(name);
    let text = |k: &str| p[k].as_str().unwrap_or_else(|| panic!("{name}: no {k}")).to_owned();
    let dir = tempfile::tempdir().unwrap();
    let from = corpus.join(text("dir"));
    let copied = Command::new("cp").arg("-r").arg(from.join(".")).arg(dir.path()).status();
    assert!(copied.is_ok_and(|s| s.success()), "copying {}", from.display());
    let built = Command::new("timeout")
        .args(["300", "sh", "-c", &text("build")])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .status();
    assert!(built.is_ok_and(|s| s.success()), "building {name}: {}", text("build"));
    let cause = p["cause_functions"].as_array().expect(name);
    Program {
        dir,
        run: text("run").split_whitespace().map(str::to_owned).collect(),
        cause: cause.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect(),
    }
}

/// One `aid-agent debug` with no flags: the root cause when it names the
/// cause's functions; Err with why when there is none. Panics on a wrong
/// cause.
fn session(p: &Program) -> Result<String, String> {
    let sessions = p.dir.path().join("aid-sessions");
    if sessions.exists() {
        std::fs::remove_dir_all(&sessions).unwrap();
    }
    let output = Command::new("timeout")
        .args(["-s", "INT", "-k", "30", SESSION_SECS])
        .arg(agent().get_program())
        .arg("debug")
        .args(&p.run)
        .current_dir(p.dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("running aid-agent");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let made = std::fs::read_dir(&sessions).ok().and_then(|mut d| d.find_map(Result::ok));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report =
        printed_report(&stdout, p.dir.path()).or_else(|| made.and_then(|d| last_report(&d.path())));
    let Some(report) = report else {
        return Err(format!("no report ({}): {}", output.status, last_line(&stderr)));
    };
    let Some(text) = report["root_cause"].as_str() else {
        return Err(format!("nothing confirmed: {}", last_line(&stderr)));
    };
    let named = root_cause_functions(&report);
    let cause: Vec<&str> = p.cause.iter().map(String::as_str).collect();
    assert!(
        names_cause(&named, &cause),
        "a wrong root cause: {text} (names {named:?}; the cause's functions are {cause:?})"
    );
    Ok(text.to_owned())
}

fn last_line(text: &str) -> &str {
    text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default()
}

/// bluetooth_driver_bad: `BCSP_IoIncrement` tests the stopping flag
/// without the lock and counts itself in only afterwards; `BCSP_PnpStop`
/// stops the device in between (through `BCSP_IoDecrement`). Acceptance rule: right in 1 of at most 2 sessions,
/// never wrong. Measured: right in 18 of 18 sessions over the six passes
/// of BENCHMARKS.md's scoreboard (cbfcdc1 to f441adc).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn bluetooth_driver_bad_is_diagnosed_with_no_flags() {
    let _alone = alone();
    let p = program("bluetooth_driver_bad");
    sessions_right("bluetooth_driver_bad", 2, 1, || session(&p));
}

/// deadlock01_bad: two threads take two locks in opposite orders. Its
/// hanging runs are recognised as hangs and the root cause is the
/// lock-order cycle of thread1 and thread2. Acceptance rule: right in 1
/// of at most 2 sessions, never wrong. Measured: right in 18 of 18
/// sessions over the six passes of the scoreboard.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn deadlock01_bad_is_diagnosed_with_no_flags() {
    let _alone = alone();
    let p = program("deadlock01_bad");
    sessions_right("deadlock01_bad", 2, 1, || session(&p));
}

/// reorder_5_bad: `checkThread` reads two globals between one of four
/// `setThread`s' two unsynchronised stores, a window between two
/// statements of one function. Acceptance rule: right in 1 of at most 2
/// sessions, never wrong. Measured: right in 17 of 18 sessions over the
/// six passes of the scoreboard (the miss: nothing confirmed).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn reorder_5_bad_is_diagnosed_with_no_flags() {
    let _alone = alone();
    let p = program("reorder_5_bad");
    sessions_right("reorder_5_bad", 2, 1, || session(&p));
}

/// stringbuffer-jdk1.4: main's `append(sb)` reads `sb->length()` and then
/// calls `sb->getChars(0, len, ...)`, each under `sb`'s lock but not the
/// pair; `thread_main`'s `erase` in between trips getChars' bounds check.
/// Acceptance rule: right in 1 of at most 2 sessions, never wrong.
/// Measured: right in 11 of 11 sessions on 9d83c37 (passes of 3 and 8);
/// on 83066a3, before candidates were checked against the runs set
/// aside, 1 of 3 sessions confirmed a start order (wrong: the test below).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn stringbuffer_jdk1_4_is_diagnosed_with_no_flags() {
    let _alone = alone();
    let p = program("stringbuffer-jdk1.4");
    sessions_right("stringbuffer-jdk1.4", 2, 1, || session(&p));
}

/// stringbuffer-jdk1.4's session that confirmed a wrong root cause
/// (recorded on 83066a3, its runs made under interventions left out:
/// `fixtures/sessions/stringbuffer-wrong65.tar.gz`). It analysed runs
/// 208 to 227, made under noise focused on what provoked the failure; in
/// all 10 passing ones `thread_main` started before main constructed its
/// buffer, in all 10 failing ones after, and that start order was
/// confirmed the root cause. Checked against the 169 other observed runs
/// of the session, it is not a candidate: it held in 67 of their passing
/// runs and 22 of their failing ones. The true interleaving (erase takes
/// the lock while append is between `length` and `getChars`) stays one:
/// it held in every failing run set aside and 10 passing ones.
#[test]
fn a_start_order_held_mostly_in_the_runs_set_aside_is_not_a_candidate() {
    use aid::analysis::{AnalysisOptions, Exclusion, analyze, analyze_beside};
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sessions/stringbuffer-wrong65.tar.gz");
    let unpacked = Command::new("tar").arg("xzf").arg(&fixture).arg("-C").arg(dir.path()).status();
    assert!(unpacked.is_ok_and(|s| s.success()), "unpacking {}", fixture.display());
    let session = aid::store::load(&dir.path().join("stringbuffer-wrong65")).unwrap();
    assert_eq!(session.runs.len(), 189);
    let (basis, aside): (Vec<_>, Vec<_>) =
        session.runs.into_iter().partition(|r| (208..=227).contains(&r.id));
    let basis = aid::model::Session { functions: session.functions, runs: basis };
    let opts = AnalysisOptions { reach: aid::intervene::Reach::PROGRAM, ..Default::default() };
    let find = |a: &aid::analysis::Analysis, text: &str| {
        let found = (0..a.catalog.len() as u32)
            .map(aid::predicates::PredId)
            .find(|&p| a.catalog.get(p).is_some_and(|x| x.description.starts_with(text)));
        found.unwrap_or_else(|| panic!("no predicate {text}"))
    };
    const START: &str = "call 1 of StringBuffer::StringBuffer() on main starts before call 1 of thread_main(void*) on thread_main(void*) starts";
    const ERASE: &str = "some call of StringBuffer::erase(int, int) on thread_main(void*) takes a lock while some call of StringBuffer::append(StringBuffer*) on main is between two critical sections on it";
    let without = analyze(&basis, &opts).unwrap();
    assert_eq!((without.totals.failing, without.totals.passing), (10, 10));
    let start = find(&without, START);
    assert!(without.candidates.contains(&start), "the start order was a candidate");
    let (with, _) = analyze_beside(&basis, &opts, &aside).unwrap();
    assert_eq!((with.aside.failing, with.aside.passing), (23, 146));
    let (start, erase) = (find(&with, START), find(&with, ERASE));
    assert_eq!(with.aside.held(start), (22, 67));
    assert!(!with.candidates.contains(&start));
    assert!(
        with.excluded.contains(&(start, Exclusion::Contradicted { failing: 22, passing: 67 })),
        "{:?}",
        with.excluded
    );
    assert!(with.candidates.contains(&erase), "{:?}", with.candidates);
    // In 10 passing runs thread_main appended "abc" again before getChars.
    assert_eq!(with.aside.held(erase), (23, 10));
}
