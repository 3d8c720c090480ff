//! `cargo xtask bench amplify`: what failure amplification and the
//! default mode (issue 10) do to two of the ordinary example programs.
//!
//! 1. `two-lock-race`, which practically never fails on its own: the
//!    failure rate of runs without probes, of observed runs with the
//!    default set traced, of runs with random delays and of runs with
//!    PCT-style change points, interleaved run by run, at the first two
//!    noise levels `debug` uses.
//! 2. `inventory-sixty` with its hot helper: the default set (functions
//!    and probes) and the wall time of a run with it traced, and of a run
//!    with aid's own probes only, against a run without probes,
//!    interleaved round by round, the ratios taken within a round. All are
//!    timed the same way (from the release of the held child to its
//!    reaping), so agent start-up is not counted.
//!
//! 3. `--only modes`: the failure rate per noise mode on each program of
//!    `../shared/corpus` (built in `target/corpus/` by `cargo xtask
//!    corpus`), run from its folder with the manifest's arguments: no
//!    probes, observed with the default set, random delays, PCT-style
//!    change points, near-miss delays (at the first level, 2 points of up
//!    to 2 ms each), starvation (2 points of 1 ms to 1 s) and one CPU with
//!    random thread priorities (`--amplify one-cpu`), interleaved
//!    run by run after the 40 observed runs `debug` amplifies from. The
//!    near-miss cell learns its near misses as `debug` does: from the
//!    passing runs seen, and from the passing runs of the two random
//!    cells (which record sync points whatever the budget).
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
    debug::default_set::{choose_by_cost, default_candidates},
    intervene::{
        Plan,
        noise::{LADDER, Level, NoiseSource, Schedule},
    },
    model::{Label, Run},
    record::{fail::RunPolicy, progress::Progress, tracer::Tracer},
    symbols::Resolver,
    sys::spawn::{self, Target},
};

struct Args {
    runs: usize,
    rounds: usize,
    only: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args { runs: 200, rounds: 20, only: None };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--runs" => args.runs = value().parse().expect("--runs N"),
            "--rounds" => args.rounds = value().parse().expect("--rounds N"),
            "--only" => args.only = Some(value()),
            other => {
                panic!(
                    "unknown argument {other}: --runs N, --rounds N, --only amplify|default|modes"
                )
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
    default_tracer_with(exe, &[], policy, cancel)
}

/// The same, the program run with `args`.
fn default_tracer_with(
    exe: &Path,
    args: &[&str],
    policy: &RunPolicy,
    cancel: &AtomicBool,
) -> (Tracer, Target) {
    let mut argv = vec![OsString::from(exe)];
    argv.extend(args.iter().map(OsString::from));
    let target = Target::from_argv(&argv).unwrap();
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
    let exit = child.wait(policy.timeout, policy.hang_after, cancel).unwrap();
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
        let functions = tracer.functions().to_vec();
        let mut random = NoiseSource::new(l, Schedule::Random, &seen, &functions, seed);
        let mut pct = NoiseSource::new(l, Schedule::Pct, &seen, &functions, seed + 1);
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

/// The corpus' programs: folder, program and arguments, from its manifest.
fn corpus_programs(root: &Path) -> Vec<(String, String, Vec<String>)> {
    let manifest = root.join("../shared/corpus/manifest.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let json: serde_json::Value = serde_json::from_str(&text).expect("manifest.json");
    json.as_array()
        .expect("manifest.json: a list")
        .iter()
        .map(|p| {
            let dir = p["dir"].as_str().expect("dir").to_owned();
            let mut run = p["run"].as_str().expect("run").split_whitespace().map(str::to_owned);
            let exe = run.next().expect("a program").trim_start_matches("./").to_owned();
            (dir, exe, run.collect())
        })
        .collect()
}

fn modes(runs: usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let policy = RunPolicy::new(&[], Duration::from_secs(30)).unwrap();
    let cancel = AtomicBool::new(false);
    println!("## corpus: failure rate per noise mode ({runs} runs per cell, interleaved)");
    println!(
        "| program | no probes | observed (default set) | random delays | PCT-style change points | near-miss delays | starvation | one CPU, random priorities |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (dir, exe, args) in corpus_programs(&root) {
        let folder = root.join("target/corpus").join(&dir);
        let path = folder.join(&exe);
        if !path.exists() {
            println!("| {dir} | not built: run `cargo xtask corpus` first | | | | | | |");
            continue;
        }
        std::env::set_current_dir(&folder).unwrap();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (mut tracer, target) = default_tracer_with(&path, &args, &policy, &cancel);
        let mut id = 0;
        let mut next = || {
            id += 1;
            id
        };
        let seen: Vec<Run> = (0..40)
            .map(|_| tracer.observe(&target, next(), &policy, &cancel).unwrap().run)
            .collect();
        let functions = tracer.functions().to_vec();
        let source =
            |level, schedule, seed| NoiseSource::new(level, schedule, &seen, &functions, seed);
        let mut sources = [
            source(Level::START, Schedule::Random, 1),
            source(Level::START, Schedule::Pct, 2),
            source(Level::START, Schedule::NearMiss, 3),
            source(LADDER[4], Schedule::Random, 4),
            source(Level::START, Schedule::OneCpu, 5),
        ];
        let mut tallies: [Tally; 7] = Default::default();
        for _ in 0..runs {
            let (f, w) = untraced(&target, &policy, &cancel);
            tallies[0].add(f, w);
            let rec = tracer.observe(&target, next(), &policy, &cancel).unwrap();
            tallies[1].add(failed(&rec.run), rec.run.outcome.wall_ns);
            for k in 0..sources.len() {
                let plan = Plan::default().with_noise(&sources[k].draw());
                let rec = tracer.intervene(&target, next(), &policy, &plan, &cancel).unwrap();
                sources[k].learn(&rec.sync_steps);
                if k != 2 {
                    sources[2].learn_near_misses(&rec.run, &functions);
                }
                tallies[k + 2].add(failed(&rec.run), rec.run.outcome.wall_ns);
            }
        }
        let cells: Vec<String> = tallies.iter_mut().map(Tally::cell).collect();
        println!("| {dir} | {} |", cells.join(" | "));
    }
}

fn default_mode(dir: &Path, rounds: usize) {
    let exe = dir.join("inventory-sixty");
    let policy = RunPolicy::new(&[], Duration::from_secs(60)).unwrap();
    let cancel = AtomicBool::new(false);
    println!("## inventory-sixty: the default set and its cost ({rounds} rounds of 3 blocks)");
    let started = Instant::now();
    let (mut tracer, target) = default_tracer(&exe, &policy, &cancel);
    let chosen: Vec<aid::model::Function> = tracer.user_functions().cloned().collect();
    println!(
        "default set: {} functions, {} probes per observed run ({} with the sync points), chosen in {:.1} s",
        chosen.len(),
        tracer.probe_count(false),
        tracer.probe_count(true),
        started.elapsed().as_secs_f64()
    );
    // Each round runs the program in three blocks of BLOCK runs, in an
    // order that rotates from round to round: without probes, with aid's
    // own probes only (what any traced run costs: per-run attach, exec into
    // probed code, the event stream, the previous run's probes removed in
    // the background), and with the default set. The first run of a block
    // is not counted (it pays for the block before it); the block's median
    // is. A failing run stops at its first error, so only passing runs are
    // timed. Ratios are taken within a round.
    const BLOCK: usize = 6;
    let (mut bare, mut own, mut traced) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = [0usize; 3];
    let mut id = 0;
    for round in 0..rounds {
        let mut medians = [None; 3];
        for k in 0..3 {
            let config = (round + k) % 3;
            match config {
                1 => tracer.set_user_functions(Vec::new()).unwrap(),
                2 => tracer.set_user_functions(chosen.clone()).unwrap(),
                _ => {}
            }
            let mut walls = Vec::new();
            for n in 0..BLOCK {
                let (f, w) = if config == 0 {
                    untraced(&target, &policy, &cancel)
                } else {
                    id += 1;
                    let r = tracer.observe(&target, id, &policy, &cancel).unwrap().run;
                    (failed(&r), r.outcome.wall_ns)
                };
                failures[config] += usize::from(f);
                if n > 0 && !f {
                    walls.push(w as f64);
                }
            }
            walls.sort_by(f64::total_cmp);
            medians[config] = walls.get(walls.len() / 2).copied();
        }
        if let [Some(b), Some(o), Some(t)] = medians {
            bare.push(b);
            own.push(o);
            traced.push(t);
        }
    }
    let runs = rounds * BLOCK;
    if bare.is_empty() {
        println!("no round with a passing run timed in every block: no ratio");
        return;
    }
    let summary = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let ratios = |a: &[f64]| -> Vec<f64> { a.iter().zip(&bare).map(|(x, b)| x / b).collect() };
    let ms = |v: &[f64]| {
        let (m, lo, hi) = summary(v);
        format!("{:.1} ({:.1}–{:.1})", m / 1e6, lo / 1e6, hi / 1e6)
    };
    let ratio = |v: &[f64]| {
        let (m, lo, hi) = summary(&ratios(v));
        format!("{m:.2}× ({lo:.2}–{hi:.2})")
    };
    println!("rounds with a passing run timed in every block: {} of {rounds}", bare.len());
    println!(
        "| runs | failed | wall per passing run, ms: median of the block medians (min–max) | against no probes, round by round |"
    );
    println!("| --- | --- | --- | --- |");
    println!("| no probes | {}/{runs} | {} | — |", failures[0], ms(&bare));
    println!("| aid's own probes only | {}/{runs} | {} | {} |", failures[1], ms(&own), ratio(&own));
    println!(
        "| default set ({} functions) | {}/{runs} | {} | {} |",
        chosen.len(),
        failures[2],
        ms(&traced),
        ratio(&traced)
    );
}

fn main() {
    let args = parse_args();
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bench amplify needs root (it loads eBPF programs)");
        std::process::exit(2);
    }
    aid::bpf::preflight(aid::bpf::Needs::Trace).expect("eBPF preflight");
    if args.only.as_deref() == Some("modes") {
        modes(args.runs);
        return;
    }
    let dir = examples();
    if args.only.as_deref().is_none_or(|o| o == "default") {
        default_mode(&dir, args.rounds);
    }
    if args.only.as_deref().is_none_or(|o| o == "amplify") {
        amplify(&dir, args.runs);
    }
}
