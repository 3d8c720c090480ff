//! The corpus scoreboard's rule, one copy for `cargo xtask corpus`
//! (`corpus.rs`) and the corpus integration tests
//! (`aid-agent/tests/it/corpus.rs` includes this file by path): which
//! report a session's answer is read from, and whether its root cause
//! names the true cause's functions.

use std::path::Path;

/// Whether a root cause naming the functions `named` names the cause:
/// at least two of the cause's functions (the one, when only one is
/// listed). A confirmed cause that does not is wrong.
pub fn names_cause(named: &[&str], cause: &[&str]) -> bool {
    let hits = cause.iter().filter(|c| named.iter().any(|n| same_function(n, c))).count();
    hits >= cause.len().min(2)
}

/// Two names of one function: equal, or equal without a C++ parameter
/// list.
fn same_function(a: &str, b: &str) -> bool {
    let bare = |s: &str| s.split('(').next().unwrap_or(s).trim().to_owned();
    a == b || bare(a) == bare(b)
}

/// The report of the session, or of the last session `debug` went on to
/// (`fewer-probes-N`, `statements-N`, `left-out-N` or `callers-N` below
/// it): the answer it printed last. Before 2026-11-29 the `left-out-N`
/// sessions were not followed, and before 2026-12-05 the `fewer-probes-N`
/// ones: a cause confirmed there counted as none.
pub fn last_report(session: &Path) -> Option<serde_json::Value> {
    // In the order `debug` makes them (debug/campaign.rs): the default
    // set, without the most called functions, with noise at statements,
    // the shares of functions left out for cost, the climb to callers.
    let mut dirs = vec![session.to_owned()];
    for kind in ["fewer-probes", "statements", "left-out", "callers"] {
        let mut k = 1;
        while session.join(format!("{kind}-{k}")).is_dir() {
            dirs.push(session.join(format!("{kind}-{k}")));
            k += 1;
        }
    }
    dirs.iter().rev().find_map(|d| {
        let text = std::fs::read_to_string(d.join("report.json")).ok()?;
        serde_json::from_str(&text).ok()
    })
}

/// The report of the session `debug` printed, named on its line
/// "Session and report (report.html, report.json, dag.dot): DIR" in
/// `log` (DIR relative to `cwd`, where debug ran); None when no such
/// line names a report. A session with fewer probes after a cause
/// confirmed under probes that provoke the failure is made after the
/// one reported and confirms nothing: the last directory made is then
/// not the answer.
pub fn printed_report(log: &str, cwd: &Path) -> Option<serde_json::Value> {
    const LINE: &str = "Session and report (report.html, report.json, dag.dot): ";
    let dir = log.lines().rev().find_map(|l| l.strip_prefix(LINE))?;
    let text = std::fs::read_to_string(cwd.join(dir.trim()).join("report.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The functions a report's root cause names: its structured
/// `functions`.
pub fn root_cause_functions(report: &serde_json::Value) -> Vec<&str> {
    report["path"][0]["structured"]["functions"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
        .unwrap_or_default()
}
