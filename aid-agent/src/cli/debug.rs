//! `aid-agent debug`: from a flaky program to its root cause and causal
//! path. Runs it, learns what separates failing runs from passing ones,
//! confirms the causal path with interventions, and explains it.

use std::{ffi::OsString, path::Path, process::ExitCode};

use anyhow::Context as _;

use super::common::{self, RunArgs};
use crate::{
    causal::Strategy,
    debugger::{self, Options, Progress},
    model::Function,
    probe::{self, Programs, Scope},
    report,
    runner::{self},
    session::{self, Mode, Writer},
    stats::SafeList,
    symbols::{self, Resolver},
    trace::Tracer,
};

/// With no --trace, at most this many of the program's own functions are
/// traced (each costs two probes and ~100 ms to remove at the end).
const DEFAULT_FUNCTIONS: usize = 32;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace (globs, 'lib:glob'). Default: the program's own
    /// functions (not libraries), up to 32.
    #[arg(long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// Functions whose return value may be forced (globs, repeatable).
    /// Premature returns and return overrides are only applied to these
    /// (AID Sec. 3.2); delays and orderings are always allowed.
    #[arg(long = "safe", value_name = "PATTERN")]
    pub safe: Vec<String>,
    /// Intervention strategy.
    #[arg(long, value_enum, default_value_t = Strategy::Aid)]
    pub strategy: Strategy,
    /// Most runs to observe before intervening.
    #[arg(long, default_value_t = 200)]
    pub runs: u32,
    /// Failing (and passing) runs wanted before intervening.
    #[arg(long, default_value_t = 10)]
    pub min_runs: u32,
    /// Confidence that the whole session's path is right: the rounds that
    /// believed "the failure stopped" may together be wrong with at most
    /// 1 − this probability. The report prints the confidence achieved.
    #[arg(long, default_value_t = 0.99)]
    pub confidence: f64,
    /// Longest any hold may last before the run is given up as evidence.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    /// Seed for tie-breaking and noise (runs are still nondeterministic).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Debug a running service instead of starting a program: each call of
    /// --unit is one run, and interventions go to later calls.
    #[arg(long, requires_all = ["unit", "fail_if"], conflicts_with = "command")]
    pub pid: Option<u32>,
    /// With --pid: the function each invocation of which is one run.
    #[arg(long, value_name = "FN")]
    pub unit: Option<String>,
    /// With --pid: when a unit failed ('FN ret < 0', 'FN ret == -1', ...).
    #[arg(long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// With --pid: longest wait for a unit to complete.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub unit_timeout: String,
    #[command(flatten)]
    pub run: RunArgs,
    /// The program and its arguments.
    #[arg(last = true, required_unless_present = "pid", value_name = "CMD")]
    pub command: Vec<OsString>,
}

struct Terminal;

impl Progress for Terminal {
    fn say(&mut self, line: &str) {
        eprintln!("aid: {line}");
    }

    fn bar(&mut self, len: u64, what: &str) -> indicatif::ProgressBar {
        common::progress(len, what)
    }
}

/// The program's own functions, first ones in address order, capped.
fn default_functions(resolver: &Resolver) -> anyhow::Result<Vec<Function>> {
    let mut own = resolver.own_functions();
    if own.is_empty() {
        anyhow::bail!(
            "{} has no functions of its own to trace (only start-up code and libraries): pass --trace PATTERN",
            resolver.executable().path.display()
        );
    }
    own.sort_by_key(|s| s.address);
    let total = own.len();
    own.truncate(DEFAULT_FUNCTIONS);
    let functions: Vec<Function> = own
        .iter()
        .enumerate()
        .map(|(i, s)| symbols::function(resolver.executable(), s, i as u32, false))
        .collect();
    let names: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();
    if total > DEFAULT_FUNCTIONS {
        eprintln!(
            "aid: no --trace given: tracing the first {DEFAULT_FUNCTIONS} of the program's {total} own functions (in address order): {}; pass --trace to choose",
            names.join(", ")
        );
    } else {
        eprintln!(
            "aid: no --trace given: tracing the program's {total} own functions: {}",
            names.join(", ")
        );
    }
    Ok(functions)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let safe = SafeList::new(&args.safe)?;
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        anyhow::bail!("--confidence {} must be between 0 and 1", args.confidence);
    }
    let opts = Options {
        strategy: args.strategy,
        confidence: args.confidence,
        min_failing: args.min_runs,
        min_passing: args.min_runs,
        max_runs: args.runs,
        hold_timeout: runner::parse_duration(&args.hold_timeout)?,
        safe,
        seed: args.seed,
        ..Options::default()
    };
    if let Some(pid) = args.pid {
        return run_live(&args, pid, opts, args.run.load_options()?);
    }
    let policy = args.run.policy()?;
    let common::Started { target, mut tracer, mut writer, out, interrupted } =
        common::start(Mode::Debug, &args.command, &args.run, Programs::Record, |r| {
            let functions =
                if args.trace.is_empty() { default_functions(r)? } else { r.resolve(&args.trace)? };
            check_safe(&args.safe, &functions)?;
            Ok(functions)
        })?;
    let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
    eprintln!(
        "aid: debugging {} ({} traced functions: {})",
        target.display(),
        names.len(),
        super::record::summarize(&names)
    );

    let outcome = debugger::debug(
        &mut tracer,
        &target,
        &policy,
        &mut writer,
        &opts,
        &interrupted,
        &mut Terminal,
    )?;
    let report = report::build(&outcome);
    let text = report::render(&report);
    write_outputs(&out, &text, &report, &outcome)?;
    println!("{text}");
    println!("Session and report: {}", out.display());
    // Probes are removed when the tracer is dropped; say why it may take a moment.
    eprintln!("aid: removing {} probes", 2 * tracer.functions.len());
    drop(tracer);
    Ok(if report.root_cause.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn check_safe(safe: &[String], functions: &[Function]) -> anyhow::Result<()> {
    for pattern in safe {
        let matcher = globset::Glob::new(pattern)?.compile_matcher();
        if !functions.iter().any(|f| matcher.is_match(&f.name) || matcher.is_match(&f.symbol)) {
            anyhow::bail!(
                "--safe `{pattern}` matches none of the traced functions: trace it too, or fix the pattern"
            );
        }
    }
    Ok(())
}

/// `debug --pid`: a running service, one run per call of the unit.
fn run_live(
    args: &Args,
    pid: u32,
    opts: Options,
    load: probe::LoadOptions,
) -> anyhow::Result<ExitCode> {
    use crate::units::{Condition, FailIf};
    let conditions: Vec<FailIf> =
        args.fail_if.iter().map(|t| FailIf::parse(t)).collect::<Result<_, _>>()?;
    let unit_name = args.unit.clone().expect("clap requires --unit with --pid");
    if !Path::new(&format!("/proc/{pid}")).exists() {
        anyhow::bail!("pid {pid} not found: is the process still running?");
    }
    probe::preflight()?;
    let mut resolver = Resolver::for_process(pid)?;
    let mut patterns = args.trace.clone();
    patterns.push(unit_name.clone());
    patterns.extend(conditions.iter().map(|c| c.function.clone()));
    let functions = resolver.resolve(&patterns)?;
    check_safe(&args.safe, &functions)?;
    let find = |name: &str| -> Vec<u32> {
        functions.iter().filter(|f| f.name == name || f.symbol == name).map(|f| f.id).collect()
    };
    let unit = match find(&unit_name).as_slice() {
        [id] => *id,
        ids => {
            anyhow::bail!("--unit `{unit_name}` names {} functions: give exactly one", ids.len())
        }
    };
    let conditions: Vec<Condition> = conditions
        .iter()
        .map(|c| Condition { funcs: find(&c.function), cond: c.cond, text: c.text.clone() })
        .collect();
    let program = resolver.executable().path.clone();
    let out = args.run.out.clone().unwrap_or_else(|| session::default_dir(&program));
    let interrupted = common::interrupt_flag()?;
    let mut tracer = Tracer::new(resolver, functions, load, Scope::Process(pid), Programs::Record)?;
    let mut header = common::header(
        Mode::Debug,
        program.clone(),
        &[],
        args.fail_if.clone(),
        tracer.functions.clone(),
    );
    header.pid = Some(pid);
    header.unit = Some(unit_name.clone());
    let mut writer = Writer::create(&out, &header)?;
    let service = crate::live_unit::Service {
        pid,
        unit,
        conditions,
        threads: super::attach::existing_threads(pid),
        unit_timeout: runner::parse_duration(&args.unit_timeout)?,
    };
    eprintln!(
        "aid: debugging pid {pid} ({}): each call of {unit_name} is one run",
        program.display()
    );
    let outcome = crate::live_unit::debug_live(
        &mut tracer,
        &service,
        &mut writer,
        &opts,
        &interrupted,
        &mut Terminal,
    )?;
    let report = report::build(&outcome);
    let text = report::render(&report);
    write_outputs(&out, &text, &report, &outcome)?;
    println!("{text}");
    println!("Session and report: {}", out.display());
    drop(tracer);
    Ok(if report.root_cause.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn write_outputs(
    out: &Path,
    text: &str,
    report: &report::Report<'_>,
    outcome: &debugger::Outcome,
) -> anyhow::Result<()> {
    let write = |name: &str, bytes: &[u8]| {
        let p = out.join(name);
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    write("report.txt", text.as_bytes())?;
    write("report.json", serde_json::to_string_pretty(report)?.as_bytes())?;
    let highlight =
        outcome.discovery.as_ref().map(|d| d.path.iter().copied().collect()).unwrap_or_default();
    write("dag.dot", outcome.analysis.dot(&highlight).as_bytes())?;
    Ok(())
}
