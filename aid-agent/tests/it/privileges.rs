//! What aid needs, measured with a capability-only user (`setpriv` as
//! nobody): CAP_BPF and CAP_PERFMON to trace its own targets (observed and
//! intervened on), CAP_SYS_PTRACE on top only for another user's process.
//! The target gets none of them, and runs in the user's mount namespace.

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::Path,
    process::Command,
};

use crate::common::*;
use aid::model::Label;

const NOBODY: u32 = 65534;

/// `aid-agent` as nobody with exactly `caps` (e.g. "+bpf,+perfmon"), in
/// its effective and ambient sets.
fn as_nobody(caps: &str) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if caps.is_empty() {
        cmd.arg("--inh-caps=-all");
    } else {
        cmd.arg(format!("--inh-caps={caps}")).arg(format!("--ambient-caps={caps}"));
    }
    cmd.arg(env!("CARGO_BIN_EXE_aid-agent"));
    cmd
}

/// A directory nobody may write sessions into.
fn nobodys_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

fn own_mount_namespace() -> String {
    std::fs::read_link("/proc/self/ns/mnt").unwrap().to_string_lossy().into_owned()
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn capability_only_user_records_and_the_target_keeps_its_world() {
    let _bpf = require_bpf();
    let exe = c_fixture("faults.c", "faults_priv", &[]);
    let dir = nobodys_dir();
    let out = dir.path().join("s");
    // With TMPDIR pointing nowhere: aid writes nothing outside --out.
    run_ok(
        as_nobody("+bpf,+perfmon")
            .env("TMPDIR", "/nonexistent")
            .args(["record", "-t", "add3", "--runs", "2", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&exe)
            .arg("status"),
    );
    let s = load(&out);
    assert_eq!(s.runs.len(), 2);
    for (i, run) in s.runs.iter().enumerate() {
        assert_eq!(run.label, Label::Pass);
        assert_eq!(calls_on(&s, i, 0), vec![("add3".to_owned(), 1, [1, 2, 3], Some(6))]);
        let stdout =
            std::fs::read_to_string(out.join(format!("runs/{:06}/stdout.txt", i + 1))).unwrap();
        // None of the agent's capabilities, and the mount namespace the
        // user (this test) sees: aid mounts nothing.
        assert!(stdout.contains("CapEff:\t0000000000000000\n"), "{stdout}");
        assert!(stdout.contains(&format!("mnt {}\n", own_mount_namespace())), "{stdout}");
    }
    // The session belongs to the user and only to them.
    let meta = std::fs::metadata(&out).unwrap();
    assert_eq!((meta.uid(), meta.permissions().mode() & 0o777), (NOBODY, 0o700));
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn capability_only_user_intervenes_on_its_own_target() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_priv", &[]);
    let dir = nobodys_dir();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"kind":"delay_exit","site":{"func":0,"role":0,"instance":1},"delay_us":1000}]"#,
    )
    .unwrap();
    std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = run_ok(
        as_nobody("+bpf,+perfmon")
            .args(["intervene", "-t", "add3", "--runs", "2", "--plan"])
            .arg(&plan)
            .arg("--out")
            .arg(dir.path().join("s"))
            .arg("--")
            .arg(&exe),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec![
            "run 1: pass (exit code 0); 1/1 intervention(s) applied",
            "run 2: pass (exit code 0); 1/1 intervention(s) applied"
        ]
    );
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn missing_capabilities_are_named() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_nocaps", &[]);
    let dir = nobodys_dir();
    for (caps, missing) in [("", "CAP_BPF and CAP_PERFMON"), ("+bpf", "CAP_PERFMON")] {
        let line = run_err(
            as_nobody(caps)
                .args(["record", "-t", "add3", "--out"])
                .arg(dir.path().join("s"))
                .arg("--")
                .arg(&exe),
        );
        assert_eq!(
            line,
            format!(
                "aid: root or the capabilities CAP_BPF and CAP_PERFMON are needed (missing: {missing}): run aid-agent with sudo, or grant it those capabilities"
            )
        );
    }
    assert!(!dir.path().join("s").exists(), "nothing written before the check");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn another_users_process_needs_cap_sys_ptrace() {
    let _bpf = require_bpf();
    let exe = c_fixture("service.c", "service_priv", &[]);
    // Runs as root: another user, for nobody.
    let (svc, _) = serving(&mut Command::new(&exe));
    let dir = nobodys_dir();
    let attach = |caps: &str, out: &Path| {
        let mut cmd = as_nobody(caps);
        cmd.args(["attach", "--pid", &svc.pid().to_string(), "-t", "lookup"])
            .args(["--duration", "300ms", "--out"])
            .arg(out);
        cmd
    };
    let line = run_err(&mut attach("+bpf,+perfmon", &dir.path().join("a")));
    assert_eq!(
        line,
        "aid: root or the capabilities CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE are needed to trace a process of another user (missing: CAP_SYS_PTRACE): run aid-agent with sudo, or grant it those capabilities"
    );
    run_ok(&mut attach("+bpf,+perfmon,+sys_ptrace", &dir.path().join("b")));
    assert!(load(&dir.path().join("b")).runs.len() == 1);
    assert_untouched(svc.pid(), "after attach as another user");
}
