//! `cargo xtask bench tracing`: nanoseconds per traced call (entry + exit)
//! of one empty C function, for the untraced program, the uprobe floor
//! (aid's entry/exit programs that do nothing), `aid-agent record`, and
//! bpftrace `count()` and `printf`. The workload times its own loop, so
//! tracer start-up is not counted. Configurations run interleaved, round
//! after round, and ratios are taken within a round.
//!
//! `cargo xtask bench probes` runs the probe-scoping benchmark, which loads
//! eBPF programs itself (bench/benches/probes.rs).
//!
//! `cargo xtask bench runs`: what one run costs through the real `record`
//! path (spawn held, attach the per-run links, exec, run, detach in the
//! background, record and store the run) for 1, 32 and 512 traced
//! functions, against running the same program without aid.
//!
//! `cargo xtask bench amplify`: the amplification and default-mode
//! benchmark (bench/benches/amplify.rs).
//!
//! `cargo xtask bench synthetic` and `cargo xtask bench extract` run the
//! benchmarks crate's binary (bench/src/main.rs, `aid-bench`): the
//! sensitivity study on generated applications, and the offline analysis'
//! throughput. `cargo xtask bench fleet` runs it too: what limits a fleet
//! (report sizes, the coordinator's reading, its look at the workers).
//!
//! Every benchmark lives in the benchmarks crate (`bench/`, outside the
//! default build) or here; none is part of the agent.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::{agent_binary, exec, root};

#[derive(clap::Subcommand)]
pub enum Which {
    /// The examples' scoreboard: `aid-agent debug` on every case of
    /// examples/cases.rs (each example debugged as its README or a test
    /// says), sessions with the expected path, with no cause and with
    /// another; interventions and runs against TAGT, wall time. A
    /// session that missed is kept in
    /// target/bench/examples/missed/CASE-N (the next miss of that case's
    /// N-th session replaces it); the others are removed.
    Examples {
        /// Sessions per case.
        #[arg(long, default_value_t = 3)]
        sessions: usize,
        /// Only these cases (comma-separated names; default: all).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// Cost of one stop-and-resume intervention (a return-value override).
    Stop {
        /// Intervened calls per run.
        #[arg(long, default_value_t = 1000)]
        calls: u64,
        #[arg(long, default_value_t = 7)]
        rounds: usize,
    },
    /// Probes scoped to the target: per-run attach and detach for 1, 32
    /// and 512 functions with each mechanism beside today's once-per-session
    /// probes, cost per call against the floor, bystander cost, and the
    /// inherited-event experiment (needs root; docs/probes.md;
    /// bench/benches/probes.rs).
    Probes {
        /// Arguments for the benchmark (`--runs N`, `--rounds N`, `--calls N`,
        /// `--sizes 1,32,512`, `--slow-runs N`, `--only attach|calls|inherit`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Per-run cost of `aid-agent record` (attach, run, detach, store) for
    /// 1, 32 and 512 functions, against the untraced program.
    Runs {
        /// Runs per `record` session (the per-run cost is the difference
        /// with a one-run session, divided by RUNS - 1).
        #[arg(long, default_value_t = 21)]
        runs: u32,
        /// Rounds (each measures every size once).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Failure amplification on two-lock-race (natural, random delays,
    /// PCT-style change points) and the default set's slowdown on
    /// inventory-sixty (needs root; bench/benches/amplify.rs).
    Amplify {
        /// Arguments for the benchmark (`--runs N`, `--rounds N`,
        /// `--only amplify|default|modes`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The sensitivity study on generated applications (AID Sec. 7.2,
    /// Fig. 8; docs/synthetic.md); fails if an approach reports a wrong
    /// causal path where the paper's assumptions hold. No root needed.
    #[command(disable_help_flag = true)]
    Synthetic {
        /// Arguments for the study (`--model easy|adversarial`, `--apps N`,
        /// `--maxt 2..40:2`, `--strategies aid,tagt`, `--json`; `--help`
        /// lists them all).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Predicate extraction, statistics and AC-DAG throughput over a
    /// generated session (no root needed).
    #[command(disable_help_flag = true)]
    Extract {
        /// Arguments for the benchmark (`--runs N`, `--events N`,
        /// `--threads N`, `--barrier N`, `--seed N`, `--json`; `--help`
        /// lists them all).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// What limits a fleet's session as hosts are added (docs/fleet.md):
    /// report sizes, the coordinator's reading of reports and its look at
    /// 10 to 1,000 workers, against a nats-server of its own on 127.0.0.1.
    #[command(disable_help_flag = true)]
    Fleet {
        /// Arguments for the benchmark (`--events 1000,10000,100000`,
        /// `--reports N`, `--bytes N`, `--workers 10,100,1000`,
        /// `--looks N`; `--help` lists them all).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Cost of a traced call against the uprobe floor and bpftrace.
    Tracing {
        /// Calls per run.
        #[arg(long, default_value_t = 1_000_000)]
        calls: u64,
        /// Rounds (each runs every configuration once).
        #[arg(long, default_value_t = 7)]
        rounds: usize,
    },
}

impl Which {
    /// Whether the benchmark runs the release build of `aid-agent` (the
    /// in-process ones build the benchmarks crate instead).
    pub fn runs_the_agent(&self) -> bool {
        !matches!(
            self,
            Which::Synthetic { .. }
                | Which::Extract { .. }
                | Which::Fleet { .. }
                | Which::Probes { .. }
                | Which::Amplify { .. }
        )
    }
}

pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Synthetic { args } => aid_bench("synthetic", &args),
        Which::Extract { args } => aid_bench("extract", &args),
        Which::Fleet { args } => aid_bench("fleet", &args),
        Which::Tracing { calls, rounds } => tracing(calls, rounds),
        Which::Runs { runs, rounds } => runs_cost(runs, rounds),
        Which::Examples { sessions, only } => examples(sessions, &only),
        Which::Stop { calls, rounds } => stop(calls, rounds),
        Which::Probes { args } => exec(
            Command::new("cargo")
                .args(["bench", "--package", "aid-bench", "--bench", "probes", "--"])
                .args(&args)
                .current_dir(root()),
        ),
        Which::Amplify { args } => exec(
            Command::new("cargo")
                .args(["bench", "--package", "aid-bench", "--bench", "amplify", "--"])
                .args(&args)
                .current_dir(root()),
        ),
    }
}

/// `aid-bench BENCH ARGS...`, built with the release profile.
fn aid_bench(bench: &str, args: &[String]) -> anyhow::Result<()> {
    exec(
        Command::new("cargo")
            .args(["run", "--quiet", "--release", "--package", "aid-bench", "--", bench])
            .args(args)
            .current_dir(root()),
    )
}

/// Every case of examples/cases.rs, `sessions` times each: a row per
/// case with how many sessions reported the expected path ("right"),
/// confirmed no cause, reported another path, or the expected path with
/// its root cause unnamed or more interventions than the case allows
/// ("failed"), and the means over the sessions (min-max). Each session
/// that was not right is printed with what it reported.
fn examples(sessions: usize, only: &[String]) -> anyhow::Result<()> {
    let all = crate::cases::cases();
    if let Some(bad) = only.iter().find(|o| !all.iter().any(|c| c.name == o.as_str())) {
        let names: Vec<&str> = all.iter().map(|c| c.name).collect();
        bail!("--only {bad}: not a case; one of {}", names.join(", "));
    }
    let dir = root().join("target/bench/examples");
    std::fs::create_dir_all(&dir)?;
    println!(
        "sessions per case: {sessions}; agent: {}; each number cell: mean over the sessions (min-max)",
        agent_binary().display()
    );
    println!(
        "| case | right | no cause | other path | failed | AID interventions | TAGT interventions (replayed) | AID runs | observed runs | wall time (s) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for case in all.iter().filter(|c| only.is_empty() || only.iter().any(|o| o == c.name)) {
        let exe = crate::cases::build(case.example, &dir).map_err(anyhow::Error::msg)?;
        let args = case.args().map_err(anyhow::Error::msg)?;
        let mut rows: Vec<[f64; 5]> = Vec::new();
        let mut verdicts = [0usize; 4];
        for k in 1..=sessions {
            // Beside where a miss is kept: moved there, not copied.
            let out = dir.join(format!("session-{}-{}", std::process::id(), rand_suffix()));
            std::fs::create_dir_all(&out)?;
            let started = std::time::Instant::now();
            let output = Command::new(agent_binary())
                .arg("debug")
                .args(&args)
                .arg("--out")
                .arg(out.join("s"))
                .arg("--")
                .arg(&exe)
                .stderr(std::process::Stdio::null())
                .output()?;
            let wall = started.elapsed().as_secs_f64();
            let stdout = String::from_utf8_lossy(&output.stdout);
            let outcome = crate::cases::Outcome::read(&out.join("s"), &stdout);
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&out);
                    bail!("{}: session {k} wrote no report ({}): {e}", case.name, output.status)
                }
            };
            let verdict = crate::cases::judge(case, &outcome);
            let slot = match &verdict {
                crate::cases::Verdict::Right => 0,
                crate::cases::Verdict::NoCause => 1,
                crate::cases::Verdict::OtherPath(_) => 2,
                crate::cases::Verdict::Failed(_) => 3,
            };
            verdicts[slot] += 1;
            if slot > 0 {
                // A miss keeps its session, one per case and session
                // number (the next pass's miss replaces it).
                let kept = dir.join("missed").join(format!("{}-{k}", case.name));
                let _ = std::fs::remove_dir_all(&kept);
                let moved = std::fs::create_dir_all(dir.join("missed"))
                    .and_then(|()| std::fs::rename(out.join("s"), &kept));
                let at = match moved {
                    Ok(()) => format!(" (session kept in {})", kept.display()),
                    Err(e) => format!(" (session not kept: {e})"),
                };
                eprintln!("{}: session {k}: {verdict:?}{at}", case.name);
            }
            let _ = std::fs::remove_dir_all(&out);
            rows.push([
                outcome.interventions,
                outcome.tagt_mean,
                outcome.runs,
                outcome.observed_runs,
                wall,
            ]);
        }
        let cell = |i: usize, digits: usize| {
            let v: Vec<f64> = rows.iter().map(|r| r[i]).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let (lo, hi) = (
                v.iter().copied().fold(f64::MAX, f64::min),
                v.iter().copied().fold(f64::MIN, f64::max),
            );
            format!("{mean:.digits$} ({lo:.digits$}-{hi:.digits$})")
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            case.name,
            verdicts[0],
            verdicts[1],
            verdicts[2],
            verdicts[3],
            cell(0, 1),
            cell(1, 1),
            cell(2, 0),
            cell(3, 0),
            cell(4, 1)
        );
    }
    Ok(())
}

/// ns per call of the loop workload run under `aid-agent intervene` with
/// `plan`, read from the program's own timing.
fn intervened_ns(workload: &Path, calls: u64, plan: &str) -> anyhow::Result<f64> {
    let dir = tempfile_dir()?;
    std::fs::write(dir.join("plan.json"), plan)?;
    stdout_of(
        Command::new(agent_binary())
            .args(["intervene", "-t", "traced", "--plan"])
            .arg(dir.join("plan.json"))
            .arg("--out")
            .arg(dir.join("s"))
            .arg("--")
            .arg(workload)
            .arg(calls.to_string()),
    )?;
    let text = std::fs::read_to_string(dir.join("s/runs/000001/stdout.txt"))?;
    let _ = std::fs::remove_dir_all(&dir);
    ns_per_call(&text)
}

/// One stop-and-resume: every call of the loop gets a return-value
/// override to the value it returns anyway (instance k returns k - 1), so
/// the program is unchanged and the difference with an intervened run
/// without actions is the cost of the stop.
fn stop(calls: u64, rounds: usize) -> anyhow::Result<()> {
    let out_dir = root().join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    let workload = out_dir.join("loop");
    exec(Command::new("gcc").args(["-O2", "-o"]).arg(&workload).arg(root().join("bench/loop.c")))?;
    let overrides: Vec<String> = (1..=calls)
        .map(|k| format!(r#"{{"kind":"override_return","site":{{"func":0,"role":0,"instance":{k}}},"value":{}}}"#, k - 1))
        .collect();
    let plan = format!("[{}]", overrides.join(","));
    let (mut with, mut without, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let a = intervened_ns(&workload, calls, "[]")?;
        let b = intervened_ns(&workload, calls, &plan)?;
        without.push(a);
        with.push(b);
        diff.push(b - a);
        eprintln!("bench: round {}/{rounds} done", round + 1);
    }
    println!("calls per run: {calls}; rounds: {rounds}; median (min-max) ns per call");
    println!("| configuration | ns per call |");
    println!("| --- | --- |");
    let row = |name: &str, v: &mut Vec<f64>| {
        let (lo, hi) =
            (v.iter().copied().fold(f64::MAX, f64::min), v.iter().copied().fold(0.0, f64::max));
        println!("| {name} | {:.0} ({lo:.0}-{hi:.0}) |", median(v));
    };
    row("intervened run, no action due (ptrace'd, instances counted)", &mut without);
    row("every call stopped, return value set, resumed", &mut with);
    row("one stop-and-resume (difference, per round)", &mut diff);
    Ok(())
}

fn ensure_bpftrace() -> anyhow::Result<()> {
    if Command::new("bpftrace").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    eprintln!("bench: installing bpftrace for the comparison");
    exec(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "bpftrace"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn ns_per_call(text: &str) -> anyhow::Result<f64> {
    let field = text.split_whitespace().find_map(|w| w.strip_prefix("ns_per_call=")).with_context(
        || format!("no ns_per_call in output: {}", text.chars().take(300).collect::<String>()),
    )?;
    Ok(field.parse()?)
}

fn stdout_of(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn aid_record(workload: &Path, calls: u64, empty: bool) -> anyhow::Result<f64> {
    let dir = tempfile_dir()?;
    let mut cmd = Command::new(agent_binary());
    cmd.args(["record", "-t", "traced", "--runs", "1", "--out"]).arg(dir.join("s"));
    if empty {
        cmd.arg("--empty-probes");
    }
    cmd.arg("--").arg(workload).arg(calls.to_string());
    stdout_of(&mut cmd)?;
    let text = std::fs::read_to_string(dir.join("s/runs/000001/stdout.txt"))?;
    let _ = std::fs::remove_dir_all(&dir);
    ns_per_call(&text)
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir =
        std::env::temp_dir().join(format!("aid-bench-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn bpftrace(workload: &Path, calls: u64, body: &str, ret_body: &str) -> anyhow::Result<f64> {
    let w = workload.display();
    let program = format!("uprobe:{w}:traced {{ {body} }} uretprobe:{w}:traced {{ {ret_body} }}");
    let text = stdout_of(
        Command::new("bpftrace").args(["-q", "-e", &program, "-c"]).arg(format!("{w} {calls}")),
    )?;
    ns_per_call(&text)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn tracing(calls: u64, rounds: usize) -> anyhow::Result<()> {
    ensure_bpftrace()?;
    let out_dir = root().join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    let workload = out_dir.join("loop");
    exec(Command::new("gcc").args(["-O2", "-o"]).arg(&workload).arg(root().join("bench/loop.c")))?;
    type Config<'a> = (&'a str, Box<dyn Fn() -> anyhow::Result<f64> + 'a>);
    let w = workload.as_path();
    let configs: Vec<Config> = vec![
        ("untraced", Box::new(|| ns_per_call(&stdout_of(Command::new(w).arg(calls.to_string()))?))),
        ("uprobe+uretprobe, empty programs (floor)", Box::new(|| aid_record(w, calls, true))),
        ("aid-agent record (entry+exit events)", Box::new(|| aid_record(w, calls, false))),
        (
            "bpftrace count() entry+return",
            Box::new(|| bpftrace(w, calls, "@e = count();", "@r = count();")),
        ),
        (
            "bpftrace printf entry+return",
            Box::new(|| {
                bpftrace(
                    w,
                    calls,
                    r#"printf("%d %d\n", tid, arg0);"#,
                    r#"printf("%d %d\n", tid, retval);"#,
                )
            }),
        ),
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for (i, (name, f)) in configs.iter().enumerate() {
            let v = f().with_context(|| format!("{name}, round {}", round + 1))?;
            samples[i].push(v);
        }
        eprintln!("bench: round {}/{rounds} done", round + 1);
    }
    const FLOOR: usize = 1;
    println!(
        "calls per run: {calls}; rounds: {rounds}; ns per call = median (min-max); ratio = median of per-round ratios to the floor"
    );
    println!("| configuration | ns per call | ratio to floor |");
    println!("| --- | --- | --- |");
    for (i, (name, _)) in configs.iter().enumerate() {
        let mut ratios: Vec<f64> =
            samples[i].iter().zip(&samples[FLOOR]).map(|(a, f)| a / f).collect();
        let mut v = samples[i].clone();
        let (lo, hi) =
            (v.iter().copied().fold(f64::MAX, f64::min), v.iter().copied().fold(0.0, f64::max));
        println!(
            "| {name} | {:.0} ({lo:.0}-{hi:.0}) | {:.2}x |",
            median(&mut v),
            median(&mut ratios)
        );
    }
    Ok(())
}

/// Functions in the `runs` workload.
const RUN_FUNCTIONS: usize = 512;

/// A program with 512 empty functions `f0000`..`f0511`; it calls each once.
fn run_workload(dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let mut c = String::new();
    for i in 0..RUN_FUNCTIONS {
        c.push_str(&format!("__attribute__((noipa)) int f{i:04}(int x) {{ return x + {i}; }}\n"));
    }
    c.push_str("int main(void) {\n    int s = 0;\n");
    for i in 0..RUN_FUNCTIONS {
        c.push_str(&format!("    s += f{i:04}(s & 1);\n"));
    }
    c.push_str("    return s == -1;\n}\n");
    let src = dir.join("runs512.c");
    std::fs::write(&src, c)?;
    let exe = dir.join("runs512");
    exec(Command::new("gcc").args(["-O1", "-o"]).arg(&exe).arg(&src))?;
    Ok(exe)
}

/// What one `aid-agent record` session tracing the first `n` functions
/// over `runs` runs of `workload` took: wall ms, and the attach, detach
/// (on the critical path) and background-close times it logged (`-v`).
struct Session {
    wall: f64,
    attach: Vec<f64>,
    detach: Vec<f64>,
    background: Vec<f64>,
}

fn record_session(workload: &Path, n: usize, runs: u32) -> anyhow::Result<Session> {
    let dir = tempfile_dir()?;
    let mut cmd = Command::new(agent_binary());
    cmd.args(["-v", "record"]);
    for i in 0..n {
        cmd.arg("-t").arg(format!("f{i:04}"));
    }
    cmd.args(["--runs", &runs.to_string(), "--out"]).arg(dir.join("s")).arg("--").arg(workload);
    let started = std::time::Instant::now();
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let wall = started.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let log = String::from_utf8_lossy(&out.stderr);
    let ms = |marker: &str| -> Vec<f64> {
        log.lines()
            .filter_map(|l| l.split_once(marker))
            .filter_map(|(_, rest)| rest.trim().strip_suffix(" ms")?.parse().ok())
            .collect()
    };
    Ok(Session {
        wall,
        attach: ms("probes attached in "),
        detach: ms("handed to the background for removal in "),
        background: ms("probe attachment(s) in "),
    })
}

fn runs_cost(runs: u32, rounds: usize) -> anyhow::Result<()> {
    if runs < 2 {
        bail!("--runs {runs}: the per-run cost needs at least 2 runs per session");
    }
    let out_dir = root().join("target/bench");
    std::fs::create_dir_all(&out_dir)?;
    let workload = run_workload(&out_dir)?;
    let sizes = [1usize, 32, 512];
    let mut plain = Vec::new();
    let k = sizes.len();
    let (mut per_run, mut once) = (vec![Vec::new(); k], vec![Vec::new(); k]);
    let (mut attach, mut detach, mut background) =
        (vec![Vec::new(); k], vec![Vec::new(); k], vec![Vec::new(); k]);
    for round in 0..rounds {
        let started = std::time::Instant::now();
        for _ in 0..runs {
            exec(Command::new(&workload).stdout(std::process::Stdio::null()))?;
        }
        plain.push(started.elapsed().as_secs_f64() * 1e3 / f64::from(runs));
        for (i, &n) in sizes.iter().enumerate() {
            let one = record_session(&workload, n, 1)?;
            let many = record_session(&workload, n, runs)?;
            once[i].push(one.wall);
            per_run[i].push((many.wall - one.wall) / f64::from(runs - 1));
            attach[i].extend(many.attach);
            detach[i].extend(many.detach);
            background[i].extend(many.background);
        }
        eprintln!("bench: round {}/{rounds} done", round + 1);
    }
    let spread = |v: &mut Vec<f64>| {
        if v.is_empty() {
            return "—".to_owned();
        }
        let (lo, hi) = (
            v.iter().copied().fold(f64::MAX, f64::min),
            v.iter().copied().fold(f64::MIN, f64::max),
        );
        let digits = if hi < 10.0 { 2 } else { 1 };
        format!("{:.digits$} ({lo:.digits$}-{hi:.digits$})", median(v))
    };
    println!(
        "runs per session: {runs}; rounds: {rounds}; ms, median (min-max). attach / detach: each run of the {rounds} {runs}-run sessions, as `record -v` logs them; background: each batch the detach thread closed; per run: (session of {runs} runs - session of 1 run) / {}",
        runs - 1
    );
    println!(
        "| functions | attach per run | detach per run (critical path) | background close per batch | whole run through `record` | untraced run of the same program | one-run session |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (i, &n) in sizes.iter().enumerate() {
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} |",
            spread(&mut attach[i]),
            spread(&mut detach[i]),
            spread(&mut background[i]),
            spread(&mut per_run[i]),
            spread(&mut plain.clone()),
            spread(&mut once[i])
        );
    }
    Ok(())
}
