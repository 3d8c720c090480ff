//! Binaries as they ship (issue 12): stripped executables traced through
//! their dynamic symbols and libraries, separate debug files found by
//! build-id and `.gnu_debuglink` under a debug root, and a target in
//! another mount namespace (a container) resolved through `/proc/PID/root`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::common::*;
use aid::{
    model::{ValueKind, ValueType},
    symbols::{DebugSearch, Origin, Resolver, debuginfo::Found},
};

const INT: ValueType = ValueType { kind: ValueKind::Signed, size: 4 };

/// The fixture's line of `handle_request`'s definition.
const HANDLE_REQUEST_LINE: u32 = 15;

fn service() -> PathBuf {
    c_fixture("ship_service.c", "ship_service", &[])
}

fn tool(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed");
}

/// A stripped copy of the fixture and its `objcopy --only-keep-debug`
/// file, in `dir`.
fn stripped_with_debug(dir: &Path, exe: &Path) -> (PathBuf, PathBuf) {
    let stripped = dir.join("ship_stripped");
    let debug = dir.join("ship_stripped.debug");
    tool(Command::new("objcopy").arg("--only-keep-debug").arg(exe).arg(&debug));
    tool(Command::new("strip").arg("-o").arg(&stripped).arg(exe));
    (stripped, debug)
}

fn build_id(path: &Path) -> Vec<u8> {
    use object::Object as _;
    let data = std::fs::read(path).unwrap();
    object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .expect("gcc writes a build-id")
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ROOT/.build-id/xx/yyyy.debug` for the debug file.
fn install_by_build_id(root: &Path, debug: &Path) -> PathBuf {
    let id = build_id(debug);
    let dir = root.join(".build-id").join(format!("{:02x}", id[0]));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.debug", hex(&id[1..])));
    std::fs::copy(debug, &path).unwrap();
    path
}

fn search(root: &Path) -> DebugSearch {
    DebugSearch { root: root.to_owned(), servers: Vec::new(), cache: root.join("no-cache") }
}

#[test]
fn a_stripped_binary_gets_names_lines_and_types_from_its_build_id_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug) = stripped_with_debug(dir.path(), &service());
    let root = dir.path().join("debug-root");
    let installed = install_by_build_id(&root, &debug);
    let mut r = Resolver::for_executable_with(&stripped, &search(&root)).unwrap();
    assert_eq!(
        r.executable().origin,
        Origin::Separate { path: installed.clone(), how: Found::BuildId }
    );
    let f = r.resolve(&["handle_request".into()]).unwrap().remove(0);
    assert_eq!(f.name, "handle_request");
    let source = f.source.clone().expect("a source line from the debug file");
    assert!(source.file.ends_with("ship_service.c"), "{}", source.file);
    assert_eq!(source.line, HANDLE_REQUEST_LINE);
    assert_eq!((f.ret, f.params.clone()), (INT, vec![INT, INT]));
    // The offset is the stripped file's: the same code as the original.
    let original = Resolver::for_executable(&service())
        .unwrap()
        .resolve(&["handle_request".into()])
        .unwrap()
        .remove(0);
    assert_eq!((f.address, f.offset), (original.address, original.offset));
    assert_eq!(
        r.symbol_sources(&[f]),
        vec![format!("ship_stripped: {} (by build-id)", installed.display())]
    );
}

#[test]
fn a_gnu_debuglink_is_followed_next_to_the_binary_and_its_crc_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug) = stripped_with_debug(dir.path(), &service());
    tool(
        Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", debug.display()))
            .arg(&stripped),
    );
    let empty_root = dir.path().join("empty-root");
    let r = Resolver::for_executable_with(&stripped, &search(&empty_root)).unwrap();
    assert_eq!(
        r.executable().origin,
        Origin::Separate { path: debug.clone(), how: Found::DebugLink }
    );
    // In `.debug/` beside the binary, too; a file of that name with the
    // wrong contents (another build) is not taken.
    let dot_debug = dir.path().join(".debug");
    std::fs::create_dir_all(&dot_debug).unwrap();
    std::fs::rename(&debug, dot_debug.join("ship_stripped.debug")).unwrap();
    std::fs::write(&debug, b"not the debug file").unwrap();
    let r = Resolver::for_executable_with(&stripped, &search(&empty_root)).unwrap();
    assert_eq!(
        r.executable().origin,
        Origin::Separate { path: dot_debug.join("ship_stripped.debug"), how: Found::DebugLink }
    );
    std::fs::remove_file(dot_debug.join("ship_stripped.debug")).unwrap();
    let mut r = Resolver::for_executable_with(&stripped, &search(&empty_root)).unwrap();
    assert_eq!(r.executable().origin, Origin::Dynsym);
    let err = r.resolve(&["handle_request".into()]).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{} has no function symbols (stripped, and no debug file found by build-id or .gnu_debuglink under {}): install its debug symbols or pass --debug-root DIR; library functions can still be traced ('libc:PATTERN')",
            stripped.display(),
            empty_root.display()
        )
    );
    // Library functions still resolve.
    let usleep = r.resolve(&["libc:usleep".into()]).unwrap();
    assert_eq!(usleep.len(), 1);
}

#[test]
fn a_stripped_executable_keeps_the_functions_it_exports() {
    let exe = c_fixture("ship_service.c", "ship_service_rdynamic", &["-rdynamic"]);
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("ship_exported");
    tool(Command::new("strip").arg("-o").arg(&stripped).arg(&exe));
    let mut r = Resolver::for_executable_with(&stripped, &search(dir.path())).unwrap();
    assert_eq!(r.executable().origin, Origin::Dynsym);
    let f = r.resolve(&["handle_request".into()]).unwrap().remove(0);
    assert_eq!(f.name, "handle_request");
    assert_eq!(f.source, None, "no DWARF without a debug file");
    assert_eq!(r.symbol_sources(&[f]), vec!["ship_exported: .dynsym only (stripped)".to_owned()]);
}

/// The service started from `exe`, its served count in `count`.
fn start(exe: &Path, count: &Path, micros: &str) -> Background {
    serving(Command::new(exe).arg(count).arg(micros)).0
}

/// Every call of handle_request in the session returned what the fixture
/// returns for its id: -1 (an `int`, read as such) for ids 2 mod 3.
fn assert_requests_exact(out: &Path) -> usize {
    let s = load(out);
    let f = s.functions.iter().position(|f| f.name == "handle_request").unwrap();
    let mut n = 0;
    for run in &s.runs {
        for c in run.calls.iter().filter(|c| c.func as usize == f && c.ret.is_some()) {
            let id = c.args[0];
            let want = if id % 3 == 2 { -1 } else { id * 2 };
            assert_eq!(c.ret, Some(want), "request {id}");
            n += 1;
        }
    }
    n
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn attach_traces_a_stripped_process_with_its_debug_file_and_its_libraries() {
    let _bpf = require_bpf();
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug) = stripped_with_debug(dir.path(), &service());
    let root = dir.path().join("debug-root");
    let installed = install_by_build_id(&root, &debug);
    let svc = start(&stripped, &dir.path().join("count"), "0");
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["attach", "-p", &svc.pid().to_string(), "-t", "handle_request"])
            .args(["-t", "libc:usleep", "-d", "1s", "--debug-root"])
            .arg(&root)
            .arg("-o")
            .arg(&out),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.lines().find(|l| l.starts_with("aid: symbols: ")).expect("the sources line");
    assert!(
        line.starts_with(&format!(
            "aid: symbols: ship_stripped: {} (by build-id); libc.so.6: ",
            installed.display()
        )),
        "{line}"
    );
    assert!(assert_requests_exact(&out) > 100);
    let s = load(&out);
    let usleep = s.functions.iter().position(|f| f.name == "usleep").unwrap();
    assert!(s.runs.iter().any(|r| r.calls.iter().any(|c| c.func as usize == usleep)));
    assert_untouched(svc.pid(), "after attach");
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn attach_traces_library_functions_of_a_stripped_process_without_debug_info() {
    let _bpf = require_bpf();
    let dir = tempfile::tempdir().unwrap();
    let (stripped, _) = stripped_with_debug(dir.path(), &service());
    let svc = start(&stripped, &dir.path().join("count"), "0");
    let (_tmp, out) = temp_session();
    let pid = svc.pid().to_string();
    let line = run_err(
        agent()
            .args(["attach", "-p", &pid, "-t", "handle_request", "-d", "1s"])
            .arg("--debug-root")
            .arg(dir.path()),
    );
    assert!(line.contains("ship_stripped has no function symbols (stripped"), "{line}");
    run_ok(agent().args(["attach", "-p", &pid, "-t", "libc:usleep", "-d", "1s", "-o"]).arg(&out));
    let s = load(&out);
    let calls: usize = s.runs.iter().map(|r| r.calls.len()).sum();
    assert!(calls > 100, "{calls} calls of usleep in 1 s");
    assert_untouched(svc.pid(), "after attach");
}

/// The service in a mount namespace of its own (a container), run from a
/// bind-mounted copy at a path that does not exist outside it.
fn start_in_container(dir: &Path) -> (Background, PathBuf) {
    let mount_point = dir.join("ns");
    std::fs::create_dir_all(&mount_point).unwrap();
    let inside = mount_point.join("svc");
    let script = format!(
        "mount -t tmpfs tmpfs {mp} && touch {inside} && mount --bind {exe} {inside} && exec {inside} {count} 0",
        mp = mount_point.display(),
        inside = inside.display(),
        exe = service().display(),
        count = dir.join("count").display(),
    );
    let (svc, line) = serving(Command::new("unshare").args([
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
    ]));
    assert_eq!(line.trim().parse::<u32>().unwrap(), svc.pid(), "unshare and sh exec the service");
    (svc, inside)
}

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn attach_and_debug_reach_a_process_in_another_mount_namespace() {
    let _bpf = require_bpf();
    let dir = tempfile::tempdir().unwrap();
    let (svc, inside) = start_in_container(dir.path());
    let pid = svc.pid().to_string();
    assert!(!inside.exists(), "{} exists only inside the namespace", inside.display());
    assert_eq!(std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(), inside);
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["attach", "-p", &pid, "-t", "handle_request", "-t", "libc:usleep", "-d", "1s"])
            .arg("-o")
            .arg(&out),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let seen_as = format!("/proc/{pid}/root{}", inside.display());
    assert!(stderr.contains(&format!("attached to pid {pid} ({seen_as})")), "{stderr}");
    assert!(assert_requests_exact(&out) > 100);
    assert_untouched(svc.pid(), "after attach");
    // debug --pid: units observed and analysed through the same paths.
    let (_tmp2, out2) = temp_session();
    let output = agent()
        .args(["debug", "-p", &pid, "--unit", "handle_request", "-t", "lookup"])
        .args(["--fail-if", "handle_request ret < 0", "--max-runs", "40", "-o"])
        .arg(&out2)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "debugging pid {pid} ({seen_as}): each call of handle_request is one run"
        )),
        "{stderr}"
    );
    let s = load(&out2);
    assert!(s.runs.len() >= 10, "{stdout}\n{stderr}");
    assert!(s.runs.iter().any(|r| r.label == aid::model::Label::Fail), "{stdout}");
    assert!(assert_requests_exact(&out2) >= 10);
    assert_untouched(svc.pid(), "after debug");
}

/// `record` of a stripped program with no `--trace`: its own functions,
/// found in its debug file.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn record_of_a_stripped_program_finds_its_own_functions_in_the_debug_file() {
    let _bpf = require_bpf();
    let dir = tempfile::tempdir().unwrap();
    let (stripped, debug) = stripped_with_debug(dir.path(), &service());
    let root = dir.path().join("debug-root");
    install_by_build_id(&root, &debug);
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent()
            .args(["record", "-n", "1", "--timeout", "300ms", "--debug-root"])
            .arg(&root)
            .arg("-o")
            .arg(&out)
            .arg(&stripped)
            .args(["/dev/null", "0"]),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "no --trace given: tracing the program's 3 own functions: lookup, handle_request, main"
        ),
        "{stderr}"
    );
    assert!(assert_requests_exact(&out) > 50);
}
