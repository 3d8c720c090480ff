//! The tracer's own effect on the failure (issue 24, part 2): a program
//! whose failure aid's probes hide, or provoke, is debugged again with
//! fewer of them.

use std::path::Path;

use crate::common::*;

/// Acceptance: 2 of 3 sessions ([`HIDDEN_SESSIONS`]). Measured with the
/// release agent (`debug ./probe_hidden`, 2026-12-01, fixture pinned to
/// two CPUs): 5 sessions of 5 right, 48 to 59 of the 100 untraced runs
/// failing against 0 of the first 40 traced ones. Before the fixture kept
/// its two threads on two CPUs, one session of 4 had 8 of 100 untraced
/// runs failing, too few to tell from the traced ones, and it was
/// debugged with noise instead (a right cause, but not this test's
/// point): a miss here. The CI of 32abef4, on a loaded machine, missed
/// twice, its sessions thousands of runs long: beside two CPU-bound loops
/// 10 of the first 29 traced runs failed (not rare: debugged with `mix`,
/// a miss, 10,737 runs before it was stopped). Since the fixture's
/// threads run at real-time priority: 2 of 2 right beside the loops, 2 of
/// 2 unloaded (2026-12-02).
const HIDDEN_SESSIONS: usize = 3;
const HIDDEN_NEEDED: usize = 2;

/// One session; Ok when the probes on `mix` were found to hide the
/// failure, left out, and the session without them named the order of
/// the worker's publication and main's registration.
fn hidden_session(exe: &Path) -> Result<String, String> {
    let (_tmp, _out, output) = debug_session(exe, &[] as &[&str]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    let root = root_cause_line(&text).to_owned();
    let right = output.status.success()
        && said.contains("aid's probes hide the failure: debugging again without the functions called most often (mix: 150 calls a run), so that the probes change the schedule less: meet, spin, publish, pin, worker, setup, register_listener traced")
        && text.contains("\nWith mix traced too, the failure was rarer under aid's probes (")
        && text.contains(" of the first 40 traced ones, beyond chance): this session leaves it out.\n")
        && root.contains("on worker ends before call 1 of register_listener on main starts")
        && !root.contains("mix");
    if right {
        Ok(root)
    } else {
        Err(format!("exit {:?}, root cause line {root:?}\n{text}\n{said}", output.status))
    }
}

/// fixtures/probe_hidden.c fails in about half of its untraced runs and in
/// none with its hot helper `mix` traced (the probes slow the worker past
/// main's registration). With no flags, the first session compares the
/// two rates, ends, and the program is debugged again without `mix`; the
/// report says why, and the cause is found in the runs that fail as the
/// program does untraced.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_failure_the_probes_hide_is_debugged_with_fewer_probes() {
    let _alone = alone();
    let exe = c_fixture("probe_hidden.c", "probe_hidden", &[]);
    sessions_right("probe_hidden", HIDDEN_SESSIONS, HIDDEN_NEEDED, || hidden_session(&exe));
}

/// Acceptance: 2 of 3 sessions ([`PROVOKED_SESSIONS`]). Measured with the
/// dev agent (`debug ./probe_provoked`, 2026-12-05, alone): 5 sessions of
/// 5 right, 0 of the 100 untraced runs failing against 10 to 20 of the
/// first 22 to 30 traced ones; with the release agent, 1 of 1. In each,
/// the session with `mix` traced confirmed nothing: the probes on `mix`
/// make its 150 calls a clock, and the orders of main's check against
/// each of them were confounded with one another. On 2026-12-05
/// (22:31–22:37, stop69, alone) 4 runs of this test made 9 sessions: 7
/// right, 2 missed (in the same run, which failed). In both misses the
/// session with `mix` confirmed "call 1 of check on main starts (ends)
/// before call 143 of mix on worker starts" after 18 rounds, before any
/// later session: a timing in front of the cause, found by rounds the
/// clock of `mix` did not confound that time. With the C library's lock
/// probes made cheap (stop 74), the first session confirmed a cause in 4
/// of 12 sessions (2026-12-06, dev agent, alone): twice such a timing
/// ("call 1 of check on main ends before call 149 of mix on worker
/// starts"), twice main's check against the publication, and the CI on
/// record missed 2 of 3. Since a session whose probes provoke the failure
/// is debugged again without the hot ones whatever it confirmed, 12 of
/// 12 sessions were right (4 of them after a first confirmation).
const PROVOKED_SESSIONS: usize = 3;
const PROVOKED_NEEDED: usize = 2;

/// One session; Ok when the probes on `mix` were found to provoke the
/// failure, the session with them confirmed nothing, and the one without
/// them named main's check against the worker's publication.
fn provoked_session(exe: &Path) -> Result<String, String> {
    let (_tmp, _out, output) = debug_session(exe, &[] as &[&str]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    let root = root_cause_line(&text).to_owned();
    // The first session, with `mix` traced, confirmed a cause or none;
    // either way the program is debugged again without `mix`.
    let again = ": debugging again without the functions called most often (mix: 150 calls a run), so that the probes change the schedule less: meet, publish, check, pin, worker traced";
    let first = if said.contains(&format!(
        "aid: a cause is confirmed, but aid's probes provoke part of the failure{again}"
    )) {
        text.contains(" beyond chance), and the cause confirmed with them is the failure's as they make it: this session leaves it out.\n")
            && text.contains("\nConfirmed in an earlier session, under probes that provoke part of the failure (its report: ")
    } else {
        said.contains(&format!(
            "aid: no cause confirmed, and aid's probes provoke part of the failure{again}"
        )) && text
            .contains(" beyond chance) and no cause was confirmed: this session leaves it out.\n")
            && text
                .contains("\nEarlier sessions, which confirmed no cause (each with its report): ")
    };
    let right = output.status.success()
        && said.contains("aid: the failure is more frequent under aid's probes: 0 of 100 runs made without them before the session failed, ")
        && first
        && text.contains("\nWith mix traced too, the failure was more frequent under aid's probes (0 of 100 runs made without them failed, ")
        && root.contains("check on main")
        && root.contains("publish on worker")
        && !root.contains("mix");
    if right {
        Ok(root)
    } else {
        Err(format!("exit {:?}, root cause line {root:?}\n{text}\n{said}", output.status))
    }
}

/// fixtures/probe_provoked.c fails in none of its untraced runs and in
/// about half with its hot helper `mix` traced (the probes slow the
/// worker past main's earliest check). With no flags, the session says
/// so with both rates; whether or not it confirms a cause, the program is
/// debugged again without `mix`, the report says why, and the cause is
/// found in the runs that noise makes fail as the program does untraced.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_failure_the_probes_provoke_is_debugged_again_with_fewer_probes() {
    let _alone = alone();
    let exe = c_fixture("probe_provoked.c", "probe_provoked", &[]);
    sessions_right("probe_provoked", PROVOKED_SESSIONS, PROVOKED_NEEDED, || provoked_session(&exe));
}
