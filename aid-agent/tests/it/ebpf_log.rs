//! The eBPF programs' own diagnostics reach the agent's log through
//! aya-log: every failed probe body is one record, the first ten shown
//! at `-v` and all at `-vv`, and the per-kind count the agent reads from
//! the error map agrees.

use crate::common::*;

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn every_probe_failure_is_logged_by_the_probe_itself() {
    let _bpf = require_bpf();
    // 2100 threads in one run: more than the roles the thread probe can
    // hand out, so its body fails for each thread past the last role.
    let exe = c_fixture("many_threads.c", "many_threads", &[]);
    let (_tmp, out) = temp_session();
    let output =
        run_ok(agent().args(["-vv", "record", "-n", "1", "-t", "work", "-o"]).arg(&out).arg(&exe));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let counted: u64 = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("[WARN ] eBPF probes: ")?
                .strip_suffix(" time(s) a new thread found no role left")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no count of the failures: {stderr}"));
    let re = regex::Regex::new(
        r"^\[(INFO |DEBUG)\] probe failed in thread (\d+): a new thread found no role left(?: \(further records at -vv\))?$",
    )
    .unwrap();
    let records: Vec<(String, u32)> = stderr
        .lines()
        .filter_map(|l| re.captures(l))
        .map(|c| (c[1].to_owned(), c[2].parse().unwrap()))
        .collect();
    assert!(counted > 10);
    assert_eq!(records.len() as u64, counted, "one record per failure, none lost");
    let levels: Vec<&str> = records.iter().map(|(l, _)| l.as_str()).collect();
    assert!(
        levels[..10].iter().all(|&l| l == "INFO ") && levels[10..].iter().all(|&l| l == "DEBUG"),
        "the first ten at info, the rest at debug: {levels:?}"
    );
    assert!(stderr.contains("left (further records at -vv)"), "{stderr}");
    let mut tids: Vec<u32> = records.iter().map(|&(_, t)| t).collect();
    // The thread probe runs in the creating thread: here always main.
    let main = load(&out).runs[0].threads.iter().find(|t| t.role == 0).unwrap().tid;
    tids.dedup();
    assert_eq!(tids, vec![main], "each record names the thread the probe ran in");
    // At -v the first ten are shown; without -v none, the count still is.
    let (_tmp2, out2) = temp_session();
    let output =
        run_ok(agent().args(["-v", "record", "-n", "1", "-t", "work", "-o"]).arg(&out2).arg(&exe));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("probe failed in thread").count(), 10, "{stderr}");
    let (_tmp3, out3) = temp_session();
    let output =
        run_ok(agent().args(["record", "-n", "1", "-t", "work", "-o"]).arg(&out3).arg(&exe));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("probe failed in thread"), "{stderr}");
    assert!(stderr.contains("time(s) a new thread found no role left"), "{stderr}");
}
