//! `aid-agent debug`: from a flaky program (or a service's flaky units)
//! to its root cause and causal path. The pipeline is
//! [`crate::debug`]; this file reads arguments and prints the report.

use std::{ffi::OsString, process::ExitCode};

use anyhow::bail;

use super::{
    args::{
        AmplifyArg, RunArgs, SessionOut, StrategyArg, heading, parse_duration, parse_percent,
        positive, print_list,
    },
    out::emit,
    terminal::{Terminal, interrupt_flag, report_layout},
};
use crate::{
    debug::{
        DebugOptions,
        campaign::{ProgramRequest, debug_program},
        program::WatchAmplify,
        service::{ServiceRequest, debug_service},
    },
    intervene::SafeList,
    record::{list::ListIn, watchpoints::WatchDelay},
    report,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace (globs, 'lib:glob'). Default: the program's own
    /// functions that are cheap enough to trace, measured in a first run
    /// (those left out are named). Repeatable, one pattern each: a comma
    /// is part of the name ('{a,b}' matches both).
    #[arg(help_heading = heading::TRACE, long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// List the functions PATTERN matches in the program (or -p PID), with
    /// library and address, and exit (like `bpftrace -l`).
    #[arg(help_heading = heading::TRACE, short, long, value_name = "PATTERN")]
    pub list: Option<String>,
    /// Observe exactly N runs before analysing, as `record --runs N` records
    /// N. Without it, observation stops once --min-runs failing and passing
    /// runs are seen, or after --max-runs.
    #[arg(help_heading = heading::RUNS, short = 'n', long, value_name = "N")]
    pub runs: Option<u32>,
    /// Most runs to observe before intervening (without --runs).
    #[arg(help_heading = heading::RUNS, long, default_value_t = 200, value_name = "N")]
    pub max_runs: u32,
    /// Failing (and passing) runs wanted before intervening.
    #[arg(help_heading = heading::RUNS, long, default_value_t = 10)]
    pub min_runs: u32,
    /// Seed for tie-breaking and noise (runs are still nondeterministic).
    #[arg(help_heading = heading::RUNS, long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub run: RunArgs,
    /// Functions whose return value may be forced (globs, repeatable).
    /// Premature returns and return overrides are only applied to these
    /// (AID Sec. 3.2); delays and orderings are always allowed.
    #[arg(help_heading = heading::INTERVENTIONS, long = "safe", value_name = "PATTERN")]
    pub safe: Vec<String>,
    /// Intervention strategy.
    #[arg(help_heading = heading::INTERVENTIONS, long, value_enum, default_value_t = StrategyArg::Aid)]
    pub strategy: StrategyArg,
    /// Confidence that the whole session's path is right: the rounds that
    /// believed "the failure stopped" may together be wrong with at most
    /// 1 − this probability. The report prints the confidence achieved.
    #[arg(help_heading = heading::INTERVENTIONS, long, default_value_t = 0.99)]
    pub confidence: f64,
    /// Longest any hold may last before the run is given up as evidence.
    #[arg(help_heading = heading::INTERVENTIONS, long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    /// The noise that amplifies a rare failure (injected at synchronisation
    /// points and traced calls when fewer than --amplify-below of the first
    /// runs fail).
    #[arg(help_heading = heading::AMPLIFICATION, long, value_enum, default_value_t = AmplifyArg::All)]
    pub amplify: AmplifyArg,
    /// A failure is rare, and amplified with noise, when fewer than this
    /// share of the runs so far fail, judged every 40 runs (and of each 40
    /// amplified runs, for stronger noise). 0 never injects noise.
    #[arg(help_heading = heading::AMPLIFICATION, long, default_value = "5%", value_name = "PERCENT")]
    pub amplify_below: String,
    /// Amplify with a hardware watchpoint on OBJECT (a global, a word of
    /// one such as `pool+0x20`, or `role:function#k.argN|ret`): the thread
    /// that reads or writes it is held right after the access, in every
    /// run from the second on (docs/explain.md).
    #[arg(help_heading = heading::AMPLIFICATION, long, value_name = "OBJECT")]
    pub amplify_watch: Option<String>,
    /// With --amplify-watch: how long the thread is held.
    #[arg(help_heading = heading::AMPLIFICATION, long, default_value = "5ms", value_name = "DURATION")]
    pub amplify_watch_delay: String,
    /// With --amplify-watch: hold only after writes, not after reads.
    #[arg(help_heading = heading::AMPLIFICATION, long)]
    pub amplify_watch_writes: bool,
    /// With --amplify-watch: at most this many holds per run.
    #[arg(help_heading = heading::AMPLIFICATION, long, default_value_t = 1, value_name = "N")]
    pub amplify_watch_max: u32,
    /// Make the runs on a fleet's workers (`aid-agent worker --connect
    /// URL` on each host), through the NATS server at URL
    /// (nats://HOST:PORT, JetStream on): observed runs, interventions and
    /// their control runs (docs/fleet.md).
    #[arg(help_heading = heading::RUNS, long, value_name = "URL", conflicts_with = "pid")]
    pub fleet: Option<String>,
    /// Debug a running service instead of starting a program: each call of
    /// --unit is one run, and interventions go to later calls.
    #[arg(help_heading = heading::SERVICES, short, long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// With --pid: the function each invocation of which is one run.
    #[arg(help_heading = heading::SERVICES, long, value_name = "FN")]
    pub unit: Option<String>,
    /// With --pid: when a unit failed ('FN ret < 0', 'FN ret == -1', ...).
    #[arg(help_heading = heading::SERVICES, long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// With --pid: a unit's window opens this long before its call (its
    /// own thread since its previous unit ended, other threads' calls that
    /// ended within it). Calls other threads are in when the unit starts
    /// are always part of it.
    #[arg(help_heading = heading::SERVICES, long, default_value = "0s", value_name = "DURATION")]
    pub context: String,
    /// With --pid: longest wait for a unit to complete.
    #[arg(help_heading = heading::SERVICES, long, default_value = "30s", value_name = "DURATION")]
    pub unit_timeout: String,
    /// Start the report with five lines on how to read it.
    #[arg(help_heading = heading::OUTPUT, long)]
    pub explain: bool,
    /// Also draw the AC-DAG as dag.svg with Graphviz (when `dot` is installed).
    #[arg(help_heading = heading::OUTPUT, long)]
    pub svg: bool,
    /// A file written by `mine --emit-predicates`: report how often each
    /// "pattern occurs" predicate held in the failing and passing runs.
    #[arg(help_heading = heading::OUTPUT, long, value_name = "FILE")]
    pub patterns: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub out: SessionOut,
    /// The program and its arguments (`--` before them only when the
    /// program's name starts with `-`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "pid",
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// Writes one session's report (text, HTML, JSON, DAG) and what lies
/// beside its causal path, in its directory.
fn save_session(
    d: &crate::debug::Debugged,
    svg: bool,
) -> anyhow::Result<(report::DebugReport<'_>, report::Saved)> {
    let report = report::build(&d.diagnosis);
    let saved = report::save(&d.out, &report, &d.diagnosis, &d.beside, svg)?;
    report::beside::save(&d.out, &d.beside)?;
    Ok((report, saved))
}

/// The session's options from the command line, after the checks that
/// need no program: a valid --safe list, a confidence strictly between 0
/// and 1, --runs and --max-runs of at least 2, --min-runs of at least 1,
/// valid trace patterns. Apart from [`run`] because these checks come
/// first, before anything is started.
fn options(args: &Args) -> anyhow::Result<DebugOptions> {
    let safe = SafeList::new(&args.safe)?;
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        bail!("--confidence {} must be between 0 and 1", args.confidence);
    }
    if let Some(n) = args.runs.filter(|n| *n < 2) {
        bail!("--runs {n} cannot show both a failing and a passing run: give at least 2");
    }
    if args.max_runs < 2 {
        bail!(
            "--max-runs {} cannot show both a failing and a passing run: give at least 2",
            args.max_runs
        );
    }
    if args.min_runs == 0 {
        bail!("--min-runs 0: aid needs at least 1 failing and 1 passing run; give at least 1");
    }
    super::args::check_patterns(&args.trace)?;
    Ok(DebugOptions {
        strategy: args.strategy.into(),
        confidence: args.confidence,
        min_failing: args.min_runs,
        min_passing: args.min_runs,
        max_runs: args.max_runs,
        runs: args.runs,
        hold_timeout: positive("--hold-timeout", parse_duration(&args.hold_timeout)?)?,
        safe,
        seed: args.seed,
        schedule: args.amplify.into(),
        amplify_below: parse_percent("--amplify-below", &args.amplify_below)?,
        ..DebugOptions::default()
    })
}

/// Saves each session's report beside its runs and prints the last one,
/// with where it was saved; the exit code says whether a cause was
/// confirmed (or the session was interrupted). Apart from [`run`] because
/// it is what happens after the sessions, whichever kind they were.
fn print_report(
    debugged: &crate::debug::Debugged,
    svg: bool,
    verbose: bool,
    explain: bool,
) -> anyhow::Result<ExitCode> {
    // Each session's report next to its runs: sessions before the last
    // (callers traced since), those after it, then the one reported.
    let mut unconfirmed = Vec::new();
    let mut others = String::new();
    for earlier in &debugged.earlier {
        let dir = earlier.out.display();
        match save_session(earlier, svg)?.0.root_cause {
            None => unconfirmed.push(dir.to_string()),
            Some(root) => {
                others += &format!(
                    "Confirmed in an earlier session, under probes that provoke part of the failure (its report: {dir}): {root}\n"
                );
            }
        }
    }
    for later in &debugged.later {
        save_session(later, svg)?;
        others += &format!(
            "Debugged again with fewer probes, so that they change the schedule less (its report: {}): no cause confirmed there; the cause above is the failure's as aid's probes make it.\n",
            later.out.display()
        );
    }
    let (report, saved) = save_session(debugged, svg)?;
    if saved.no_graphviz {
        eprintln!(
            "aid: warning: --svg needs Graphviz (`dot` not found): apt-get install graphviz; dag.dot and report.html are written"
        );
    }
    let text = report::render(&report, &report_layout(verbose, explain))
        + &report::beside::render(&debugged.beside);
    let earlier = match unconfirmed.as_slice() {
        [] => String::new(),
        dirs => format!(
            "Earlier sessions, which confirmed no cause (each with its report): {}\n",
            dirs.join(", ")
        ),
    };
    emit(&format!(
        "{text}\nSession and report (report.html, report.json, dag.dot): {}\n{earlier}{others}",
        debugged.out.display()
    ))?;
    let interrupted =
        std::iter::once(debugged).chain(&debugged.later).find_map(|d| d.diagnosis.interrupted);
    if let Some(phase) = interrupted {
        eprintln!(
            "aid: interrupted while {phase}: the report above holds only what was confirmed before; every run is saved in {}",
            debugged.out.display()
        );
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    }
    Ok(if report.root_cause.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub fn run(args: Args, verbose: bool) -> anyhow::Result<ExitCode> {
    if let Some(pattern) = &args.list {
        let target = match args.pid {
            Some(pid) => ListIn::Process(pid),
            None => ListIn::Program(&args.command),
        };
        return print_list(target, std::slice::from_ref(pattern));
    }
    let options = options(&args)?;
    let load = args.run.load_options()?;
    let jobs = args.run.jobs()?;
    let mut ui = Terminal::default();
    let debugged = match args.pid {
        Some(pid) => {
            if jobs > 1 {
                bail!(
                    "--jobs is for a program aid starts (N runs of it at once): a service's units come one at a time from its process; leave --jobs out with --pid"
                );
            }
            if args.amplify_watch.is_some() {
                bail!(
                    "--amplify-watch needs runs of a program aid starts (a watched object is located in one run and watched from the next), not --pid"
                );
            }
            if args.fail_if.is_empty() {
                bail!("--pid needs --fail-if CONDITION (when a unit failed, e.g. 'FN ret < 0')");
            }
            if args.out.store.is_some() {
                bail!(
                    "--store is for a program aid starts: with --pid the Parquet tables go to the session directory (leave --store out)"
                );
            }
            let req = ServiceRequest {
                pid,
                trace: args.trace,
                unit: args.unit.ok_or_else(|| {
                    anyhow::anyhow!(
                        "--pid needs --unit FN (each call of FN is one run) and --fail-if CONDITION"
                    )
                })?,
                fail_if: args.fail_if,
                safe: args.safe,
                unit_timeout: positive("--unit-timeout", parse_duration(&args.unit_timeout)?)?,
                context: parse_duration(&args.context)?,
                out: args.out.out,
                load,
                options,
                patterns: args.patterns,
            };
            debug_service(&req, &*interrupt_flag()?, &mut ui)?
        }
        None => {
            let amplify_watch = match args.amplify_watch {
                Some(object) => Some(WatchAmplify {
                    object,
                    delay: WatchDelay {
                        writes_only: args.amplify_watch_writes,
                        delay_us: positive(
                            "--amplify-watch-delay",
                            parse_duration(&args.amplify_watch_delay)?,
                        )?
                        .as_micros() as u64,
                        max: args.amplify_watch_max,
                    },
                }),
                None => None,
            };
            if args.fleet.is_some() && amplify_watch.is_some() {
                bail!(
                    "--amplify-watch watches runs on this host (its watchpoints are the agent's): leave --fleet out with it"
                );
            }
            if jobs > 1 && amplify_watch.is_some() {
                bail!(
                    "--amplify-watch watches one run at a time (its watchpoints are the agent's, per run): leave --jobs out with it"
                );
            }
            let req = ProgramRequest {
                jobs,
                fleet: args.fleet,
                amplify_watch,
                policy: args.run.policy()?,
                command: args.command,
                trace: args.trace,
                safe: args.safe,
                store: args.out.store()?,
                out: args.out.out,
                load,
                options,
                patterns: args.patterns,
            };
            debug_program(&req, &*interrupt_flag()?, &mut ui)?
        }
    };
    print_report(&debugged, args.svg, verbose, args.explain)
}
