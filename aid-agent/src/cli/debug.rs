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
    runner::{self, Target},
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
    /// Confidence that a round still showing no failure really stopped it.
    #[arg(long, default_value_t = 0.99)]
    pub confidence: f64,
    /// Longest any hold may last before the run is given up as evidence.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    /// Seed for tie-breaking and noise (runs are still nondeterministic).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub run: RunArgs,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
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
        eprintln!("aid: no --trace given: tracing the program's {total} own functions: {}", names.join(", "));
    }
    Ok(functions)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = args.run.policy()?;
    let load = args.run.load_options()?;
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
    let target = Target::from_argv(&args.command)?;
    probe::preflight()?;
    let mut resolver = Resolver::for_executable(&target.program)?;
    let functions = if args.trace.is_empty() { default_functions(&resolver)? } else { resolver.resolve(&args.trace)? };
    for pattern in &args.safe {
        let matcher = globset::Glob::new(pattern)?.compile_matcher();
        if !functions.iter().any(|f| matcher.is_match(&f.name) || matcher.is_match(&f.symbol)) {
            anyhow::bail!("--safe `{pattern}` matches none of the traced functions: trace it too, or fix the pattern");
        }
    }
    let out = args.run.out.clone().unwrap_or_else(|| session::default_dir(&target.program));
    let interrupted = common::interrupt_flag()?;
    let mut tracer = Tracer::new(resolver, functions, load, Scope::AllProcesses, Programs::Record)?;
    let mut header = common::header(Mode::Debug, target.program.clone(), &args.command, args.run.rule_texts(), tracer.functions.clone());
    header.fail_rules = args.run.rule_texts();
    let mut writer = Writer::create(&out, &header)?;
    let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
    eprintln!("aid: debugging {} ({} traced functions: {})", target.display(), names.len(), super::record::summarize(&names));

    let outcome = debugger::debug(&mut tracer, &target, &policy, &mut writer, &opts, &interrupted, &mut Terminal)?;
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

fn write_outputs(out: &Path, text: &str, report: &report::Report<'_>, outcome: &debugger::Outcome) -> anyhow::Result<()> {
    let write = |name: &str, bytes: &[u8]| {
        let p = out.join(name);
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    write("report.txt", text.as_bytes())?;
    write("report.json", serde_json::to_string_pretty(report)?.as_bytes())?;
    let highlight = outcome.discovery.as_ref().map(|d| d.path.iter().copied().collect()).unwrap_or_default();
    write("dag.dot", outcome.analysis.dot(&highlight).as_bytes())?;
    Ok(())
}
