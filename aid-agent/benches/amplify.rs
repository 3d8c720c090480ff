//! `cargo xtask bench amplify`: what failure amplification and the
//! default mode (issue 10) do to two of the ordinary example programs.
//!
//! 1. `two-lock-race`, which practically never fails on its own: the
//!    failure rate of runs without probes, of observed runs with the
//!    default set traced, of runs with random delays and of runs with
//!    PCT-style change points, interleaved run by run, at the first two
//!    noise levels `debug` uses.
//! 2. `inventory-sixty` with its hot helper: the default set (functions
//!    and probes) and the wall time of a run with it traced against a run
//!    without probes, interleaved, the ratio taken pair by pair. Both are
//!    timed the same way (from the release of the held child to its
//!    reaping), so agent start-up is not counted.
//!
//! Needs root. Prints markdown rows for BENCHMARKS.md.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::AtomicBool,
    time::{Duration, Instant},
};

use aid::{
    bpf::{LoadOptions, Programs, Scope},
    debug::program::{choose_by_cost, default_candidates},
    intervene::{
        Plan,
        noise::{Level, NoiseSource, Schedule},
    },
    model::{Label, Run},
    record::{fail::RunPolicy, progress::Progress, tracer::Tracer},
    symbols::Resolver,
    sys::spawn::{self, Target},
};

struct Args {
    runs: usize,
    pairs: usize,
    only: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args { runs: 200, pairs: 60, only: None };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--runs" => args.runs = value().parse().expect("--runs N"),
            "--pairs" => args.pairs = value().parse().expect("--pairs N"),
            "--only" => args.only = Some(value()),
            other => {
                panic!("unknown argument {other}: --runs N, --pairs N, --only amplify|default")
            }
        }
    }
    args
}

/// Prints what the library says, indented.
struct Say;

impl Progress for Say {
    fn say(&mut self, line: &str) {
        println!("    {line}");
    }
}

fn examples() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("target/bench/examples");
    let status = Command::new(root.join("examples/build.sh"))
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("examples/build.sh");
    assert!(status.success(), "building the examples");
    out
}

/// A tracer with the program's default set (and the sync points).
fn default_tracer(exe: &Path, policy: &RunPolicy, cancel: &AtomicBool) -> (Tracer, Target) {
    let target = Target::from_argv(&[OsString::from(exe)]).unwrap();
    let resolver = Resolver::for_executable(exe).unwrap();
    let found = default_candidates(&resolver).unwrap();
    let first = found.functions.clone();
    let mut tracer =
        Tracer::new(resolver, first, LoadOptions::default(), Scope::Target, Programs::Record)
            .unwrap();
    choose_by_cost(&mut tracer, &target, policy, &[], found, cancel, &mut Say).unwrap();
    tracer.add_sync_points().unwrap();
    (tracer, target)
}

fn untraced(target: &Target, policy: &RunPolicy, cancel: &AtomicBool) -> (bool, u64) {
    let mut child = spawn::spawn_held(target).unwrap();
    child.release().unwrap();
    let exit = child.wait(policy.timeout, cancel).unwrap();
    (exit.code != Some(0), exit.wall_ns)
}

fn failed(run: &Run) -> bool {
    run.label == Label::Fail
}

#[derive(Default)]
struct Tally {
    failed: usize,
    runs: usize,
    walls: Vec<u64>,
}

impl Tally {
    fn add(&mut self, failed: bool, wall_ns: u64) {
        self.failed += usize::from(failed);
        self.runs += 1;
        self.walls.push(wall_ns);
    }

    fn cell(&mut self) -> String {
        self.walls.sort_unstable();
        let median = self.walls.get(self.walls.len() / 2).copied().unwrap_or(0);
        format!(
            "{}/{} ({:.1} %), {:.1} ms",
            self.failed,
            self.runs,
            100.0 * self.failed as f64 / self.runs.max(1) as f64,
            median as f64 / 1e6
        )
    }
}

fn amplify(dir: &Path, runs: usize) {
    let exe = dir.join("two-lock-race");
    let policy = RunPolicy::new(&[], Duration::from_secs(30)).unwrap();
    let cancel = AtomicBool::new(false);
    println!("## two-lock-race: failure rate, natural and amplified ({runs} runs per cell)");
    let (mut tracer, target) = default_tracer(&exe, &policy, &cancel);
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    // The runs `debug` observes before it amplifies: their call sites seed
    // the noise.
    let seen: Vec<Run> =
        (0..40).map(|_| tracer.observe(&target, next(), &policy, &cancel).unwrap().run).collect();
    println!(
        "| level | no probes | observed (default set) | random delays | PCT-style change points |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut level = Some(Level::START);
    let mut seed = 1;
    while let Some(l) = level.take() {
        let mut random = NoiseSource::new(l, Schedule::Random, &seen, seed);
        let mut pct = NoiseSource::new(l, Schedule::Pct, &seen, seed + 1);
        seed += 2;
        let (mut bare, mut observed, mut rand_t, mut pct_t) =
            (Tally::default(), Tally::default(), Tally::default(), Tally::default());
        for _ in 0..runs {
            let (f, w) = untraced(&target, &policy, &cancel);
            bare.add(f, w);
            let rec = tracer.observe(&target, next(), &policy, &cancel).unwrap();
            observed.add(failed(&rec.run), rec.run.outcome.wall_ns);
            for (source, tally) in [(&mut random, &mut rand_t), (&mut pct, &mut pct_t)] {
                let plan = Plan::default().with_noise(&source.draw());
                let rec = tracer.intervene(&target, next(), &policy, &plan, &cancel).unwrap();
                source.learn(&rec.sync_steps);
                tally.add(failed(&rec.run), rec.run.outcome.wall_ns);
            }
        }
        println!(
            "| {} points, up to {} µs | {} | {} | {} | {} |",
            l.sites,
            l.max_delay_us,
            bare.cell(),
            observed.cell(),
            rand_t.cell(),
            pct_t.cell()
        );
        if l == Level::START {
            level = l.stronger();
        }
    }
}

fn default_mode(dir: &Path, pairs: usize) {
    let exe = dir.join("inventory-sixty");
    let policy = RunPolicy::new(&[], Duration::from_secs(60)).unwrap();
    let cancel = AtomicBool::new(false);
    println!("## inventory-sixty: the default set and its cost ({pairs} pairs)");
    let started = Instant::now();
    let (mut tracer, target) = default_tracer(&exe, &policy, &cancel);
    let user: Vec<String> = tracer.user_functions().map(|f| f.name.clone()).collect();
    println!(
        "default set: {} functions, {} probes per observed run ({} with the sync points), chosen in {:.1} s",
        user.len(),
        tracer.probe_count(false),
        tracer.probe_count(true),
        started.elapsed().as_secs_f64()
    );
    // A failing run stops at its first error, so its wall time is not
    // comparable: the ratio is taken over pairs in which both runs passed.
    let (mut bare, mut traced, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = (0, 0);
    for i in 0..pairs {
        let (f, b) = untraced(&target, &policy, &cancel);
        let rec = tracer.observe(&target, i as u32 + 1, &policy, &cancel).unwrap();
        let t = failed(&rec.run);
        failures.0 += usize::from(f);
        failures.1 += usize::from(t);
        if !f && !t {
            bare.push(b);
            traced.push(rec.run.outcome.wall_ns);
            ratios.push(rec.run.outcome.wall_ns as f64 / b as f64);
        }
    }
    if ratios.is_empty() {
        println!("no pair in which both runs passed: no ratio");
        return;
    }
    let med = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2] as f64 / 1e6
    };
    ratios.sort_by(f64::total_cmp);
    println!("| run | failed | wall per passing run, median (ms) |");
    println!("| --- | --- | --- |");
    println!("| no probes | {}/{pairs} | {:.1} |", failures.0, med(&mut bare));
    println!("| default set traced | {}/{pairs} | {:.1} |", failures.1, med(&mut traced));
    println!(
        "slowdown over the {} pairs in which both passed: median {:.2}× (min {:.2}×, max {:.2}×)",
        ratios.len(),
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}

fn main() {
    let args = parse_args();
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bench amplify needs root (it loads eBPF programs)");
        std::process::exit(2);
    }
    aid::bpf::preflight().expect("eBPF preflight");
    let dir = examples();
    if args.only.as_deref().is_none_or(|o| o == "default") {
        default_mode(&dir, args.pairs);
    }
    if args.only.as_deref().is_none_or(|o| o == "amplify") {
        amplify(&dir, args.runs);
    }
}
