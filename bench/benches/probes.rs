//! `cargo xtask bench probes`: what scoping probes to the target costs.
//!
//! 1. Per-run attach and detach, for 1, 32 and 512 functions, with each
//!    way of putting probes in one process only (uprobe_multi links with a
//!    pid filter; pid-scoped perf-event uprobes), detaching synchronously
//!    or in the background, beside today's once-per-session probes for all
//!    processes.
//! 2. Cost per traced call in the target against the empty-probe floor,
//!    and the cost per call of a bystander process running the same code
//!    while the target is traced.
//! 3. Whether perf-event uprobes opened with `inherit` on a fork server
//!    follow its children (and run their BPF program there).
//!
//! Needs root. Prints markdown rows for BENCHMARKS.md and docs/probes.md.

use std::{
    ffi::OsString,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::atomic::AtomicBool,
    time::{Duration, Instant},
};

use aid::{
    bpf::{LoadOptions, Mechanism, Probes, Programs, Scope},
    model::Function,
    symbols::Resolver,
    sys::spawn::{self as runner, Target},
};

const MAX_FUNCTIONS: usize = 512;

struct Args {
    runs: usize,
    calls: u64,
    rounds: usize,
    sizes: Vec<usize>,
    /// Runs of the slowest configuration (perf events removed
    /// synchronously at 512 functions: ~1,000 grace periods per run).
    slow_runs: usize,
    only: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        runs: 10,
        calls: 200_000,
        rounds: 5,
        sizes: vec![1, 32, 512],
        slow_runs: 1,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--runs" => args.runs = value().parse().expect("--runs N"),
            "--calls" => args.calls = value().parse().expect("--calls N"),
            "--rounds" => args.rounds = value().parse().expect("--rounds N"),
            "--slow-runs" => args.slow_runs = value().parse().expect("--slow-runs N"),
            "--sizes" => {
                args.sizes = value()
                    .split(',')
                    .map(|s| s.parse().expect("--sizes 1,32,512"))
                    .filter(|n| *n <= MAX_FUNCTIONS)
                    .collect();
            }
            "--only" => args.only = Some(value()),
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn main() -> anyhow::Result<()> {
    let args = parse_args();
    if !nix::unistd::geteuid().is_root() {
        anyhow::bail!("the probe benchmark loads eBPF programs: run it as root");
    }
    aid::bpf::preflight(aid::bpf::Needs::Trace)?;
    let want = |name: &str| args.only.as_deref().is_none_or(|o| o == name);
    if want("inherit") {
        // While this process has one thread: unshare refuses threads that
        // share their file system context.
        private_tracefs()?;
    }
    let dir = std::env::temp_dir().join(format!("aid-bench-probes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let workload = build_workload(&dir)?;
    let functions = resolve(&workload)?;
    if want("attach") {
        attach_detach(&args, &workload, &functions)?;
    }
    if want("calls") {
        call_costs(&args, &workload, &functions)?;
    }
    if want("inherit") {
        inherit(&workload, &functions)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A program with `MAX_FUNCTIONS` empty functions. `all` calls each once;
/// `loop N` calls the first N times and prints the time per call; `server`
/// forks a child per line read on stdin (`all` or `loop N`), which stops
/// itself, then execs the workload with those arguments once continued.
fn build_workload(dir: &Path) -> anyhow::Result<PathBuf> {
    let mut c = String::from(
        "#include <errno.h>\n#include <fcntl.h>\n#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
         #include <sys/wait.h>\n#include <time.h>\n#include <unistd.h>\n",
    );
    for i in 0..MAX_FUNCTIONS {
        c.push_str(&format!(
            "__attribute__((noipa)) long bench_f{i:03}(long x) {{ return x + {i}; }}\n"
        ));
    }
    c.push_str("static long (*const table[])(long) = {");
    for i in 0..MAX_FUNCTIONS {
        c.push_str(&format!("bench_f{i:03},"));
    }
    c.push_str(
        r#"};
int main(int argc, char **argv) {
    long sum = 0;
    if (argc > 1 && !strcmp(argv[1], "all")) {
        for (unsigned i = 0; i < sizeof table / sizeof *table; i++) sum += table[i](i);
        return sum == 0;
    }
    if (argc > 2 && !strcmp(argv[1], "loop")) {
        long n = atol(argv[2]);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) sum += bench_f000(i);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
        printf("ns_per_call=%.1f sum=%ld\n", ns / n, sum);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "server")) {
        char line[64];
        setvbuf(stdout, NULL, _IOLBF, 0);
        while (fgets(line, sizeof line, stdin)) {
            line[strcspn(line, "\n")] = 0;
            pid_t child = fork();
            if (child == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                raise(SIGSTOP);
                char *space = strchr(line, ' ');
                if (space) *space++ = 0;
                execl(argv[0], argv[0], line, space, (char *)NULL);
                _exit(127);
            }
            if (child < 0) {
                printf("fork failed: %s\n", strerror(errno));
                continue;
            }
            printf("%d\n", child);
            int status;
            waitpid(child, &status, 0);
            printf("done\n");
        }
        return 0;
    }
    return 2;
}
"#,
    );
    let src = dir.join("probes_workload.c");
    std::fs::write(&src, c)?;
    let exe = dir.join("probes_workload");
    let status = Command::new("gcc").args(["-O2", "-o"]).arg(&exe).arg(&src).status()?;
    anyhow::ensure!(status.success(), "gcc failed on {}", src.display());
    Ok(exe)
}

fn resolve(workload: &Path) -> anyhow::Result<Vec<Function>> {
    let mut resolver = Resolver::for_executable(workload)?;
    let mut functions = resolver.resolve(&["bench_f*".to_owned()])?;
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    for (i, f) in functions.iter_mut().enumerate() {
        f.id = i as u32;
    }
    anyhow::ensure!(functions.len() == MAX_FUNCTIONS, "expected {MAX_FUNCTIONS} functions");
    Ok(functions)
}

fn target(workload: &Path, args: &[&str]) -> Target {
    let mut argv: Vec<OsString> = vec![workload.as_os_str().to_owned()];
    argv.extend(args.iter().map(OsString::from));
    Target { program: workload.to_owned(), argv, output_dir: None }
}

fn load(mechanism: Mechanism) -> anyhow::Result<Probes> {
    Ok(Probes::load(LoadOptions { ring_bytes: 1 << 20, mechanism, ..LoadOptions::default() })?)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::MAX, f64::min);
    let hi = v.iter().copied().fold(f64::MIN, f64::max);
    format!("{:.1} ({lo:.1}–{hi:.1})", median(v))
}

/// One run of `all` with probes on `functions`, attached and detached per
/// run; returns (attach, detach on the critical path).
fn scoped_run(
    probes: &mut Probes,
    workload: &Path,
    functions: &[Function],
    mechanism: Mechanism,
    background: bool,
) -> anyhow::Result<(Duration, Duration)> {
    let cancel = AtomicBool::new(false);
    let mut child = runner::spawn_held(&target(workload, &["all"]))?;
    let t0 = Instant::now();
    let attachment = probes.attach_scoped_with(functions, child.pid, Programs::Empty, mechanism)?;
    let attach = t0.elapsed();
    child.release()?;
    let exit = child.wait(Duration::from_secs(30), None, &cancel)?;
    anyhow::ensure!(exit.code == Some(0), "workload failed: {exit:?}");
    let t1 = Instant::now();
    if background {
        probes.detach_later(attachment);
    } else {
        attachment.detach();
    }
    Ok((attach, t1.elapsed()))
}

fn attach_detach(args: &Args, workload: &Path, functions: &[Function]) -> anyhow::Result<()> {
    println!("\n### Per-run attach and detach (entry + return probe per function)\n");
    println!(
        "runs per cell: {} ({} for perf events and the fork server at 512 functions); ms, median (min–max)\n",
        args.runs, args.slow_runs
    );
    println!(
        "| functions | mechanism | attach per run | detach on the critical path | per run, total | background drain after the last run |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: |");
    for &n in &args.sizes {
        let fs = &functions[..n];
        // Today: once per session, every process.
        {
            let mut probes = load(Mechanism::PerfEvents)?;
            let t0 = Instant::now();
            probes.attach(fs, Scope::AllProcesses, Programs::Empty)?;
            let attach = t0.elapsed();
            let t1 = Instant::now();
            probes.detach_all();
            let detach = t1.elapsed();
            println!(
                "| {n} | all processes, once per session (before) | 0 ({:.1} once) | 0 ({:.1} once) | 0 | — |",
                ms(attach),
                ms(detach)
            );
        }
        fork_server_row(args, workload, fs)?;
        for (mechanism, background, name) in [
            (Mechanism::PerfEvents, false, "perf events, pid-scoped, detach synchronously"),
            (Mechanism::PerfEvents, true, "perf events, pid-scoped, detach in background"),
            (Mechanism::UprobeMulti, false, "uprobe_multi + pid, detach synchronously"),
            (Mechanism::UprobeMulti, true, "uprobe_multi + pid, detach in background"),
        ] {
            let runs = if mechanism == Mechanism::PerfEvents && n >= 512 {
                args.slow_runs
            } else {
                args.runs
            };
            let mut probes = load(mechanism)?;
            let (mut attach, mut detach, mut total) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..runs {
                let (a, d) = scoped_run(&mut probes, workload, fs, mechanism, background)?;
                attach.push(ms(a));
                detach.push(ms(d));
                total.push(ms(a + d));
            }
            let drain = if background {
                let t = Instant::now();
                probes.detach_all();
                format!("{:.1}", ms(t.elapsed()))
            } else {
                "—".to_owned()
            };
            println!(
                "| {n} | {name} | {} | {} | {} | {drain} |",
                spread(&attach),
                spread(&detach),
                spread(&total)
            );
            eprintln!("bench: {n} functions, {name}: done");
        }
    }
    Ok(())
}

/// tracefs uprobes opened once per session with `inherit` on a fork
/// server: each run is a fork of the server, which inherits the events.
/// The cost per run is the extra time of a fork-exec-exit with them.
fn fork_server_row(args: &Args, workload: &Path, fs: &[Function]) -> anyhow::Result<()> {
    let n = fs.len();
    let probes = load(Mechanism::PerfEvents)?;
    let mut server = ForkServer::start(workload)?;
    let runs = if n >= 512 { args.slow_runs } else { args.runs };
    let timed_runs = |server: &mut ForkServer| -> anyhow::Result<Vec<f64>> {
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                server.run("all", |_| Ok(()))?;
                Ok(ms(t.elapsed()))
            })
            .collect()
    };
    let without = timed_runs(&mut server)?;
    let t0 = Instant::now();
    let mut events = Vec::with_capacity(2 * n);
    for f in fs {
        for (program, ret) in [("enter_empty", false), ("exit_empty", true)] {
            events.push(InheritedUprobe::open(
                &probes,
                f,
                server.pid(),
                program,
                Inherit::Tracefs,
                ret,
            )?);
        }
    }
    let attach = t0.elapsed();
    let with = timed_runs(&mut server)?;
    let t1 = Instant::now();
    // Each last close unregisters the uprobe and waits for a grace period:
    // close on parallel threads so that they overlap.
    let chunk = events.len().div_ceil(32).max(1);
    std::thread::scope(|s| {
        let mut rest = events;
        while !rest.is_empty() {
            let part: Vec<InheritedUprobe> = rest.drain(..chunk.min(rest.len())).collect();
            s.spawn(move || drop(part));
        }
    });
    let detach = t1.elapsed();
    let extra: Vec<f64> = with.iter().map(|w| w - median(&without)).collect();
    println!(
        "| {n} | tracefs uprobes inherited from a fork server, once per session | 0 ({:.1} once) | 0 ({:.1} once, 32 threads) | {} extra per fork-exec-exit | — |",
        ms(attach),
        ms(detach),
        spread(&extra)
    );
    eprintln!("bench: {n} functions, fork server: done");
    Ok(())
}

/// ns per call reported by `loop`, run as the traced target.
fn traced_loop(
    probes: &mut Probes,
    workload: &Path,
    calls: u64,
    scoped: Option<(Mechanism, Programs)>,
    functions: &[Function],
) -> anyhow::Result<f64> {
    let cancel = AtomicBool::new(false);
    let calls = calls.to_string();
    let mut child = runner::spawn_held(&target(workload, &["loop", &calls]))?;
    let pid = child.pid;
    probes.begin_target(pid, false)?;
    let attachment = match scoped {
        Some((mechanism, programs)) => {
            Some(probes.attach_scoped_with(functions, pid, programs, mechanism)?)
        }
        None => None,
    };
    child.release()?;
    let exit = child.wait(Duration::from_secs(120), None, &cancel)?;
    probes.end_target(pid)?;
    if let Some(a) = attachment {
        probes.detach_later(a);
    }
    ns_per_call(exit.stdout.tail())
}

fn ns_per_call(text: &str) -> anyhow::Result<f64> {
    let field = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ns_per_call="))
        .ok_or_else(|| anyhow::anyhow!("no ns_per_call in {text:?}"))?;
    Ok(field.parse()?)
}

/// ns per call of an untraced `loop` started by this process (the
/// bystander), while `probes` has whatever attached.
fn bystander_loop(workload: &Path, calls: u64) -> anyhow::Result<f64> {
    let out = Command::new(workload).args(["loop", &calls.to_string()]).output()?;
    anyhow::ensure!(out.status.success(), "bystander failed");
    ns_per_call(&String::from_utf8_lossy(&out.stdout))
}

fn call_costs(args: &Args, workload: &Path, functions: &[Function]) -> anyhow::Result<()> {
    let f0 = &functions[..1];
    let calls = args.calls;
    // One loaded object per way of attaching, reused across rounds; the
    // probes for all processes are attached only for their own rows.
    let mut all = load(Mechanism::PerfEvents)?;
    let stream_all = all.event_stream();
    let mut multi = load(Mechanism::UprobeMulti)?;
    let stream_multi = multi.event_stream();
    let mut perf = load(Mechanism::PerfEvents)?;
    let stream_perf = perf.event_stream();
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("untraced", Vec::new()),
        ("all processes, perf events, empty programs (floor)", Vec::new()),
        ("all processes, perf events, recorder (before)", Vec::new()),
        ("pid-scoped perf events, recorder", Vec::new()),
        ("uprobe_multi + pid, empty programs", Vec::new()),
        ("uprobe_multi + pid, recorder", Vec::new()),
        ("bystander while all-process probes are attached (before)", Vec::new()),
        ("bystander while uprobe_multi + pid probes are attached", Vec::new()),
    ];
    for round in 0..args.rounds {
        let mut v = vec![bystander_loop(workload, calls)?];
        all.attach(f0, Scope::AllProcesses, Programs::Empty)?;
        v.push(traced_loop(&mut all, workload, calls, None, f0)?);
        all.detach_all();
        all.attach(f0, Scope::AllProcesses, Programs::Record)?;
        v.push(traced_loop(&mut all, workload, calls, None, f0)?);
        let bystander_all = bystander_loop(workload, calls)?;
        all.detach_all();
        let scoped = |m, p| Some((m, p));
        v.push(traced_loop(
            &mut perf,
            workload,
            calls,
            scoped(Mechanism::PerfEvents, Programs::Record),
            f0,
        )?);
        v.push(traced_loop(
            &mut multi,
            workload,
            calls,
            scoped(Mechanism::UprobeMulti, Programs::Empty),
            f0,
        )?);
        v.push(traced_loop(
            &mut multi,
            workload,
            calls,
            scoped(Mechanism::UprobeMulti, Programs::Record),
            f0,
        )?);
        v.push(bystander_all);
        // A target held before its exec has the scoped probes; a bystander
        // runs the same function meanwhile.
        let mut held = runner::spawn_held(&target(workload, &["all"]))?;
        multi.begin_target(held.pid, false)?;
        let a = multi.attach_scoped_with(f0, held.pid, Programs::Record, Mechanism::UprobeMulti)?;
        v.push(bystander_loop(workload, calls)?);
        let pid = held.pid;
        held.release()?;
        held.wait(Duration::from_secs(10), None, &AtomicBool::new(false))?;
        multi.end_target(pid)?;
        multi.detach_later(a);
        for (row, x) in rows.iter_mut().zip(v) {
            row.1.push(x);
        }
        for s in [&stream_all, &stream_multi, &stream_perf] {
            let _ = s.flush();
        }
        eprintln!("bench: calls round {}/{} done", round + 1, args.rounds);
    }
    println!(
        "\n### Cost per call of `bench_f000` ({calls} calls per run, {} rounds)\n",
        args.rounds
    );
    println!("ns per call: median (min–max); ratio: median of per-round ratios to the floor\n");
    println!("| configuration | ns per call | ratio to floor |");
    println!("| --- | ---: | ---: |");
    let floor = rows[1].1.clone();
    for (name, v) in &rows {
        let ratios: Vec<f64> = v.iter().zip(&floor).map(|(a, f)| a / f).collect();
        println!("| {name} | {} | {:.2}× |", spread(v), median(&ratios));
    }
    Ok(())
}

/// Perf-event uprobes opened with `inherit` on a fork server: do they
/// follow a forked child across its exec, and does their BPF program run
/// there? Tried with the uprobe PMU (what aya and bpftrace use) and with a
/// uprobe defined in tracefs `uprobe_events`.
fn inherit(workload: &Path, functions: &[Function]) -> anyhow::Result<()> {
    println!("\n### perf-event uprobes with `inherit` on a fork server\n");
    for how in [Inherit::Pmu, Inherit::Tracefs] {
        match inherit_one(workload, &functions[0], how) {
            Ok(text) => println!("- {how:?}: {text}"),
            Err(e) => println!("- {how:?}: {e:#}"),
        }
    }
    Ok(())
}

/// The tracefs variant needs tracefs (the agent itself no longer does):
/// mounted, if it is not, in a mount namespace of this benchmark process
/// alone, so nothing stays mounted afterwards.
fn private_tracefs() -> anyhow::Result<()> {
    if Path::new(UPROBE_EVENTS).exists() {
        return Ok(());
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    // SAFETY: plain system calls with valid NUL-terminated strings.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0
            || libc::mount(
                std::ptr::null(),
                c("/").as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            || libc::mount(
                c("tracefs").as_ptr(),
                c("/sys/kernel/tracing").as_ptr(),
                c("tracefs").as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
        {
            anyhow::bail!("mounting tracefs privately: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Inherit {
    Pmu,
    Tracefs,
}

fn inherit_one(workload: &Path, f0: &Function, how: Inherit) -> anyhow::Result<String> {
    let mut probes = load(Mechanism::PerfEvents)?;
    let stream = probes.event_stream();
    let mut server = ForkServer::start(workload)?;
    let event = InheritedUprobe::open(&probes, f0, server.pid(), "enter_fn", how, false)?;
    let calls = 1000u64;
    let mut recorded = 0;
    let ran = server.run(&format!("loop {calls}"), |child| {
        // The child stopped itself before its exec: make it the target.
        probes.begin_target(child, false)?;
        Ok(())
    });
    if ran.is_ok() {
        recorded = stream.flush().len();
    }
    let hits = event.count()?;
    drop(event);
    Ok(match ran {
        Err(e) => format!("{e:#}"),
        Ok(()) => format!(
            "the child called bench_f000 {calls} times after fork + exec; the event and its inherited copies counted {hits} hits; the BPF program recorded {recorded} events in the child"
        ),
    })
}

/// The workload in `server` mode: forks a child per request.
struct ForkServer {
    process: std::process::Child,
    to: std::process::ChildStdin,
    from: BufReader<std::process::ChildStdout>,
}

impl ForkServer {
    fn start(workload: &Path) -> anyhow::Result<ForkServer> {
        let mut process = Command::new(workload)
            .arg("server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let to = process.stdin.take().expect("stdin");
        let from = BufReader::new(process.stdout.take().expect("stdout"));
        Ok(ForkServer { process, to, from })
    }

    fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Forks a child that runs the workload with `args`; `before` sees its
    /// pid while it is stopped before its exec. Returns when it has exited.
    fn run(
        &mut self,
        args: &str,
        before: impl FnOnce(u32) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        writeln!(self.to, "{args}")?;
        let mut line = String::new();
        self.from.read_line(&mut line)?;
        let child: u32 =
            line.trim().parse().map_err(|_| anyhow::anyhow!("the server said: {}", line.trim()))?;
        wait_stopped(child, Duration::from_secs(5));
        before(child)?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child as i32),
            nix::sys::signal::SIGCONT,
        )?;
        line.clear();
        self.from.read_line(&mut line)?;
        anyhow::ensure!(line.trim() == "done", "the server said: {}", line.trim());
        Ok(())
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Waits until `pid` is in a stopped state.
fn wait_stopped(pid: u32, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('T')) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A perf-event entry uprobe on one function, opened with `inherit` for a
/// process, with a BPF program of `probes` attached (aya opens perf events
/// without `inherit`, so this one is opened by hand).
struct InheritedUprobe {
    /// Declared first: dropped (closed) before the definition it uses.
    fd: std::os::fd::OwnedFd,
    _definition: Option<TracefsUprobe>,
}

/// A uprobe defined in tracefs `uprobe_events` (global kernel state, not
/// tied to a descriptor): removed when dropped, retrying while the kernel
/// still holds it busy.
struct TracefsUprobe {
    name: String,
}

const UPROBE_EVENTS: &str = "/sys/kernel/tracing/uprobe_events";

impl TracefsUprobe {
    fn define(kind: char, name: String, f: &Function) -> anyhow::Result<TracefsUprobe> {
        let mut file = std::fs::OpenOptions::new().append(true).open(UPROBE_EVENTS)?;
        // One write per command: tracefs parses each write alone.
        file.write_all(
            format!("{kind}:{name} {}:{:#x}\n", f.module.display(), f.offset).as_bytes(),
        )?;
        Ok(TracefsUprobe { name })
    }
}

impl Drop for TracefsUprobe {
    fn drop(&mut self) {
        let start = Instant::now();
        loop {
            let removed = std::fs::OpenOptions::new()
                .append(true)
                .open(UPROBE_EVENTS)
                .and_then(|mut f| f.write_all(format!("-:{}\n", self.name).as_bytes()));
            match removed {
                Ok(()) => return,
                Err(e) if start.elapsed() > Duration::from_secs(5) => {
                    eprintln!(
                        "bench: could not remove uprobe {} ({e}): echo '-:{}' >> {UPROBE_EVENTS}",
                        self.name, self.name
                    );
                    return;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl InheritedUprobe {
    fn open(
        probes: &Probes,
        f: &Function,
        pid: u32,
        program: &'static str,
        how: Inherit,
        ret: bool,
    ) -> anyhow::Result<Self> {
        use std::os::{
            fd::{AsRawFd as _, FromRawFd as _},
            unix::ffi::OsStrExt as _,
        };

        use aya_obj::generated::{
            PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_SET_BPF, PERF_FLAG_FD_CLOEXEC, perf_event_attr,
            perf_type_id,
        };
        let path = std::ffi::CString::new(f.module.as_os_str().as_bytes())?;
        // SAFETY: all-zero is a valid perf_event_attr (every field unset).
        let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
        attr.size = size_of::<perf_event_attr>() as u32;
        let mut definition = None;
        match how {
            Inherit::Pmu => {
                attr.type_ = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")?
                    .trim()
                    .parse()?;
                attr.config = u64::from(ret); // bit 0: return probe
                attr.__bindgen_anon_3.config1 = path.as_ptr() as u64;
                attr.__bindgen_anon_4.config2 = f.offset;
            }
            Inherit::Tracefs => {
                let kind = if ret { 'r' } else { 'p' };
                let name = format!("aid_bench_{}/{kind}{}", std::process::id(), f.id);
                let def = TracefsUprobe::define(kind, name, f)?;
                let id =
                    std::fs::read_to_string(format!("/sys/kernel/tracing/events/{}/id", def.name))?;
                definition = Some(def);
                attr.type_ = perf_type_id::PERF_TYPE_TRACEPOINT as u32;
                attr.config = id.trim().parse()?;
            }
        }
        attr.__bindgen_anon_1.sample_period = 1;
        attr.set_inherit(1);
        attr.set_disabled(1);
        // SAFETY: a valid attr that outlives the call; pid > 0, any cpu.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                std::ptr::from_ref(&attr),
                pid as libc::pid_t,
                -1i32,
                -1i32,
                libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
            )
        };
        anyhow::ensure!(fd >= 0, "perf_event_open: {}", std::io::Error::last_os_error());
        // SAFETY: perf_event_open returned a new descriptor we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
        let event = InheritedUprobe { fd, _definition: definition };
        let prog = probes.program_fd(program)?;
        // SAFETY: ioctls on the perf event we own, with a program descriptor.
        let rc = unsafe { libc::ioctl(event.fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF.into(), prog) };
        anyhow::ensure!(rc == 0, "PERF_EVENT_IOC_SET_BPF: {}", std::io::Error::last_os_error());
        // SAFETY: as above.
        let rc = unsafe { libc::ioctl(event.fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE.into(), 0) };
        anyhow::ensure!(rc == 0, "PERF_EVENT_IOC_ENABLE: {}", std::io::Error::last_os_error());
        Ok(event)
    }

    /// Hits counted by the event and its inherited copies (children's
    /// counts are added when they exit).
    fn count(&self) -> anyhow::Result<u64> {
        let mut buf = [0u8; 8];
        let n = nix::unistd::read(&self.fd, &mut buf)?;
        anyhow::ensure!(n == 8, "short read from the perf event");
        Ok(u64::from_ne_bytes(buf))
    }
}
