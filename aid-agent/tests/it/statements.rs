//! Noise and predicates at statements: a window between two statements of
//! one function (fixtures/torn_pair.c: a pair published by two plain
//! stores, read by a checker on another thread), which the C library's
//! synchronisation points and the traced calls' entries cannot reach,
//! diagnosed with no flags. The ladder's first pass provokes nothing; the
//! second acts at the statement points too, a hold right after `a = 1`
//! tears the pair, and the root cause names the publisher and the checker.

use std::path::Path;

use crate::common::*;

/// Acceptance: 2 of 3 sessions name both functions in the root cause
/// (`debug` with no flags, exit 0). Measured on 2026-11-28: 5 of 5 (2
/// named the two windows, "check_pair is between torn_pair.c:26 ... while
/// set_pair is between torn_pair.c:19 ...", 3 "check_pair starts while
/// set_pair runs", both confirmed by holding check_pair until set_pair
/// returned). The fresh-clone CI of 797d700 missed 2 of 3 (exit 1, no
/// root cause: why is not in its log); on d21a9b2's build, 2026-11-29,
/// 1 of 11 missed here.
const TORN_SESSIONS: usize = 3;
const TORN_NEEDED: usize = 2;

/// One session; Ok with the root cause line when it names both calls.
fn torn_session(exe: &Path) -> Result<String, String> {
    let (_tmp, _out, output) = debug_session(exe, &[] as &[&str]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let root = root_cause_line(&text);
    let second_pass = stderr.lines().any(|l| {
        l.contains("the ladder again from its start, now also at ")
            && l.contains(" statements inside the traced functions")
    });
    if output.status.success()
        && second_pass
        && root.contains("call 1 of check_pair on check_pair")
        && root.contains("call 1 of set_pair on set_pair")
    {
        Ok(root.to_owned())
    } else {
        // The first line is all a miss prints when the case passes, and
        // all CI's log keeps when it fails: what the session concluded
        // and the last thing it said before.
        let verdict = text.lines().find(|l| l.starts_with("Root cause: ") || l.starts_with("No "));
        let said = stderr.lines().rev().find(|l| l.starts_with("aid: "));
        Err(format!(
            "exit {:?}, second pass {second_pass}, verdict {:?}, last said {:?}\n{text}\n{stderr}",
            output.status,
            verdict.unwrap_or_default(),
            said.unwrap_or_default()
        ))
    }
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_window_between_two_statements_is_provoked_and_diagnosed_with_no_flags() {
    let _alone = alone();
    let exe = c_fixture("torn_pair.c", "torn_pair", &[]);
    sessions_right("torn_pair", TORN_SESSIONS, TORN_NEEDED, || torn_session(&exe));
}
