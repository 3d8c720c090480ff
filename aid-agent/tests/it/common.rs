//! Shared by the integration tests: building fixtures at test time, running
//! the agent binary, checking what the kernel is doing to a process, and
//! the one rule for which eBPF tests may run at the same time.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::{OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
    time::{Duration, Instant},
};

use aid::{model::Session, store};

/// The agent binary under test.
pub fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aid-agent"))
}

/// Which eBPF tests run at the same time. Whole-session tests on timing
/// bugs run alone ([`alone`]): a busy machine changes their failure rates,
/// which is why each used to be one at a time in its own test binary. The
/// other eBPF tests share the machine with each other ([`require_bpf`]),
/// as they did within their binaries, never with a session running alone.
static BPF: RwLock<()> = RwLock::new(());

/// The eBPF tests are `#[ignore]`d, so a plain `cargo test` lists them as
/// ignored instead of passing them without running; `cargo xtask test` runs
/// them with `--include-ignored`. Each starts here: on a machine that
/// cannot run them it fails, saying what is missing. The guard keeps
/// [`alone`] tests out while the test runs.
#[must_use = "the guard keeps the tests that run alone out while it lives"]
pub fn require_bpf() -> RwLockReadGuard<'static, ()> {
    check_bpf();
    BPF.read().unwrap_or_else(PoisonError::into_inner)
}

/// [`require_bpf`] for a test whose sessions depend on timing: no other
/// eBPF test runs while the guard lives.
#[must_use = "the guard keeps the other eBPF tests out while it lives"]
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    check_bpf();
    let guard = BPF.write().unwrap_or_else(PoisonError::into_inner);
    settle();
    guard
}

/// The CPUs count as quiet for a test that runs [`alone`] when they were
/// idle this share of a [`QUIET_WINDOW`].
const QUIET_IDLE: f64 = 0.9;

/// How long the CPUs are watched at a time.
const QUIET_WINDOW: Duration = Duration::from_millis(250);

/// At most how long a test waits for the CPUs to be quiet.
const QUIET_WAIT: Duration = Duration::from_secs(20);

/// Before a test that runs alone: writes the dirty pages out (a test
/// before it may have written a large session, whose writeback would
/// otherwise share the CPUs with this one's runs) and waits, at most
/// [`QUIET_WAIT`], for the CPUs to be quiet. What it found goes to the
/// test's captured output, which a failing test shows: CI has seen
/// failure rates of these tests' programs that sessions alone on the
/// machine never had (two-lock-race failing in 10 of its first 38 runs
/// against 0 to 4 of 40 here), and the load at their start is the first
/// thing to rule out.
fn settle() {
    let began = Instant::now();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let dirty = meminfo.lines().find(|l| l.starts_with("Dirty:")).unwrap_or("Dirty: ?");
    nix::unistd::sync();
    let mut idle = idle_share(QUIET_WINDOW);
    while idle < QUIET_IDLE && began.elapsed() < QUIET_WAIT {
        idle = idle_share(QUIET_WINDOW);
    }
    eprintln!(
        "alone: load average {} and {} before; then CPUs {:.0} % idle over the last {} ms after {} ms of settling",
        load.trim(),
        dirty.split_whitespace().collect::<Vec<_>>().join(" "),
        idle * 100.0,
        QUIET_WINDOW.as_millis(),
        began.elapsed().as_millis(),
    );
}

/// The share of `window` the machine's CPUs spent idle (or waiting for
/// I/O), from `/proc/stat`; 1 when it cannot be read.
fn idle_share(window: Duration) -> f64 {
    let times = || -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
        Some((idle, fields.iter().sum()))
    };
    let before = times();
    std::thread::sleep(window);
    match (before, times()) {
        (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => (i1 - i0) as f64 / (t1 - t0) as f64,
        _ => 1.0,
    }
}

fn check_bpf() {
    let missing = if !nix::unistd::geteuid().is_root() {
        Some("root")
    } else if !Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        Some("uprobe support in the kernel")
    } else {
        None
    };
    if let Some(what) = missing {
        panic!("this eBPF test needs {what}: run `cargo xtask test` as root");
    }
}

/// Fixture builds of this test process: a folder per process in the
/// system's temporary folder, so that two test processes never share a
/// binary; folders of test processes that have ended are removed first,
/// so they do not pile up. Not under `target/`: the privilege tests run
/// the fixtures as another user, and a clone's folder may be 0700 (a
/// fresh-clone CI run in a `mktemp -d` folder failed that way).
fn fixture_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::env::temp_dir();
        let root = root.as_path();
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ended = name
                .strip_prefix("aid-fixtures-")
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            if ended {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = root.join(format!("aid-fixtures-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// One fixture build at a time: two tests wanting the same binary wait
/// for one build of it.
static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Where the binary `name` built from `recipe` (source and flags) goes: a
/// folder per recipe, so that two test modules giving one name to two
/// builds never share a binary, and the binary keeps its name (the process
/// name tests see).
fn fixture_path(name: &str, recipe: &[&str]) -> PathBuf {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    recipe.hash(&mut h);
    let dir = fixture_dir().join(format!("{:016x}", h.finish()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn build(out: &Path, cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(status.success(), "building {} failed: {cmd:?}", out.display());
}

/// Compiles `tests/fixtures/<src>` once per test process, with `flags`,
/// into a binary named `<name>`.
pub fn c_fixture(src: &str, name: &str, flags: &[&str]) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(PoisonError::into_inner);
    let out = fixture_path(name, &[&[src], flags].concat());
    if !out.exists() {
        let compiler = if src.ends_with(".cpp") { "g++" } else { "gcc" };
        build(
            &out,
            Command::new(compiler)
                .args(["-g", "-O0", "-pthread"])
                .args(flags)
                .arg("-o")
                .arg(&out)
                .arg(source(src)),
        );
    }
    out
}

pub fn rust_fixture(src: &str, crate_name: &str) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(PoisonError::into_inner);
    let out = fixture_path(crate_name, &[src]);
    if !out.exists() {
        build(
            &out,
            Command::new("rustc")
                .args([
                    "-g",
                    "-C",
                    "opt-level=1",
                    "--edition",
                    "2021",
                    "--crate-name",
                    crate_name,
                    "-o",
                ])
                .arg(&out)
                .arg(source(src)),
        );
    }
    out
}

/// Bundled example `name` (examples/), built once per test process with
/// examples/build.sh into `<fixtures>/examples/<name>`: the process is
/// called by the example's name, as a user's would be.
pub fn example(name: &str) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = fixture_dir().join("examples");
    let out = dir.join(name);
    if !out.exists() {
        crate::cases::build(name, &dir).unwrap_or_else(|e| panic!("{e}"));
    }
    out
}

pub fn temp_session() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session");
    (dir, out)
}

/// `aid-agent debug ARGS --out SESSION -- EXE`, whatever its exit: the
/// temporary directory (the session goes with it), the session directory
/// and the output.
pub fn debug_session<S: AsRef<std::ffi::OsStr>>(
    exe: &Path,
    args: &[S],
) -> (tempfile::TempDir, PathBuf, Output) {
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

/// The session `debug` went on in: `out`, or, where the untraced runs
/// failed more often than the traced ones and `debug` went on with fewer
/// probes in a session of its own, the last of those (`fewer-probes-N`
/// inside `out`), where the runs made after it are.
pub fn last_session(out: &Path) -> PathBuf {
    (1..=aid::debug::campaign::FEWER_PROBE_SESSIONS)
        .rev()
        .map(|k| out.join(format!("fewer-probes-{k}")))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| out.to_path_buf())
}

/// The "Root cause: …" line of `debug`'s output, or "" when it printed
/// none.
pub fn root_cause_line(stdout: &str) -> &str {
    stdout.lines().find(|l| l.starts_with("Root cause: ")).unwrap_or_default()
}

/// Runs the agent, asserting success, and returns its output.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("running aid-agent");
    assert!(
        out.status.success(),
        "aid-agent failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs the agent expecting a usage error: exit code 2 and exactly one
/// line on stderr starting with `aid: `. Returns that line.
pub fn run_err(cmd: &mut Command) -> String {
    let out = cmd.output().expect("running aid-agent");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit code 2, got {:?}; stderr: {stderr}",
        out.status
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {stderr}");
    assert!(lines[0].starts_with("aid: "), "{stderr}");
    lines[0].to_owned()
}

pub fn load(dir: &Path) -> Session {
    store::load(dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

/// (function name, role, instance, args, ret) of every call of a user
/// function on `role`, in entry order.
pub fn calls_on(s: &Session, run: usize, role: u32) -> Vec<(String, u32, [i64; 3], Option<i64>)> {
    s.runs[run]
        .calls
        .iter()
        .filter(|c| c.role == role && !s.functions[c.func as usize].internal)
        .map(|c| (s.functions[c.func as usize].name.clone(), c.instance, c.args, c.ret))
        .collect()
}

/// Runtime address of `symbol` (an exact ELF symbol name of `exe`) in
/// process `pid`.
pub fn runtime_address(pid: u32, exe: &Path, symbol: &str) -> u64 {
    mapped_address(pid, exe, symbol).unwrap_or_else(|| panic!("{symbol} not mapped in {pid}"))
}

/// Runtime address of `symbol` in `pid`, or None while the segment holding
/// it is not mapped there (a process in the middle of its exec has mapped
/// the executable's first segment before its code).
pub fn mapped_address(pid: u32, exe: &Path, symbol: &str) -> Option<u64> {
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    use object::{Object as _, ObjectSegment as _, ObjectSymbol as _};
    let sym = file.symbols().find(|s| s.name() == Ok(symbol)).expect("symbol");
    let seg = file
        .segments()
        .find(|s| sym.address() >= s.address() && sym.address() < s.address() + s.size())
        .expect("segment");
    let file_offset = sym.address() - seg.address() + seg.file_range().0;
    let exe = exe.canonicalize().unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || Path::new(f[5]) != exe {
            continue;
        }
        let (lo, hi) = f[0].split_once('-').unwrap();
        let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
        let off = u64::from_str_radix(f[2], 16).unwrap();
        if file_offset >= off && file_offset < off + (hi - lo) {
            return Some(lo + (file_offset - off));
        }
    }
    None
}

/// The first byte of the code at `addr` in `pid`: 0xcc while a uprobe is
/// installed there.
pub fn code_byte(pid: u32, addr: u64) -> u8 {
    use std::os::unix::fs::FileExt as _;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8; 1];
    mem.read_exact_at(&mut b, addr).unwrap();
    b[0]
}

/// A process running in the background, killed when dropped.
pub struct Background(pub std::process::Child);

impl Background {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The process `cmd` starts, once it has printed its first line (a
/// service prints its pid when it serves), and that line.
pub fn serving(cmd: &mut Command) -> (Background, String) {
    use std::io::BufRead as _;
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    (Background(child), line)
}

pub fn alive(pid: u32) -> bool {
    // A zombie still "exists"; look at its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// The state letter of `/proc/PID/stat` ('R', 'S', 't' traced stop, 'T'
/// stopped, 'Z' zombie, '?' gone).
pub fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')').and_then(|(_, r)| r.trim_start().chars().next()).unwrap_or('?')
}

/// `TracerPid` of `/proc/PID/status` (0: nobody ptraces it).
pub fn tracer_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("TracerPid:")).and_then(|v| v.trim().parse().ok())
}

/// The fate every fault test wants for a target that outlives the agent:
/// running (not a zombie), not stopped, not ptraced.
pub fn assert_untouched(pid: u32, what: &str) {
    assert!(alive(pid), "{what}: the target is gone");
    let state = proc_state(pid);
    assert!(!matches!(state, 't' | 'T'), "{what}: the target is stopped ({state})");
    assert_eq!(tracer_pid(pid), Some(0), "{what}: the target is still ptraced");
}

/// Child processes of `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Polls `cond` every 5 ms for up to `secs` seconds; true once it holds.
pub fn wait_for(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends `sig` to a process this test started.
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// A number a fixture writes to a file (0 while the file is missing).
pub fn read_count(path: &Path) -> i64 {
    std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

/// A statistical test's sessions: runs `session` until `needed` of them
/// are right or more than `sessions - needed` missed, saying each on
/// stderr under `name`; fails with the last miss when fewer than `needed`
/// were right.
pub fn sessions_right<T: std::fmt::Debug>(
    name: &str,
    sessions: usize,
    needed: usize,
    mut session: impl FnMut() -> Result<T, String>,
) {
    let (mut right, mut missed) = (0, Vec::new());
    while right < needed && missed.len() <= sessions - needed {
        match session() {
            Ok(what) => {
                eprintln!("{name}: right: {what:?}");
                right += 1;
            }
            Err(why) => {
                eprintln!("{name}: MISSED: {}", why.lines().next().unwrap_or_default());
                missed.push(why);
            }
        }
    }
    assert!(
        right >= needed,
        "{} of {} sessions missed; the last: {}",
        missed.len(),
        right + missed.len(),
        missed.last().map_or("", String::as_str)
    );
}
