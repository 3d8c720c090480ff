//! `aid-agent debug`: from a flaky program (or a service's flaky units)
//! to its root cause and causal path. The pipeline is
//! [`crate::debug`]; this file reads arguments and prints the report.

use std::{ffi::OsString, process::ExitCode};

use anyhow::bail;

use super::{
    args::{AmplifyArg, RunArgs, StrategyArg, parse_duration},
    terminal::{Terminal, interrupt_flag},
};
use crate::{
    debug::{
        DebugOptions,
        program::{ProgramRequest, debug_program},
        service::{ServiceRequest, debug_service},
    },
    intervene::SafeList,
    report,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace (globs, 'lib:glob'). Default: the program's own
    /// functions that are cheap enough to trace, measured in a first run
    /// (those left out are named).
    #[arg(long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// Functions whose return value may be forced (globs, repeatable).
    /// Premature returns and return overrides are only applied to these
    /// (AID Sec. 3.2); delays and orderings are always allowed.
    #[arg(long = "safe", value_name = "PATTERN")]
    pub safe: Vec<String>,
    /// Intervention strategy.
    #[arg(long, value_enum, default_value_t = StrategyArg::Aid)]
    pub strategy: StrategyArg,
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
    /// The noise that amplifies a rare failure (injected at synchronisation
    /// points and traced calls when fewer than 5 % of the first runs fail).
    #[arg(long, value_enum, default_value_t = AmplifyArg::Both)]
    pub amplify: AmplifyArg,
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

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let safe = SafeList::new(&args.safe)?;
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        bail!("--confidence {} must be between 0 and 1", args.confidence);
    }
    let options = DebugOptions {
        strategy: args.strategy.into(),
        confidence: args.confidence,
        min_failing: args.min_runs,
        min_passing: args.min_runs,
        max_runs: args.runs,
        hold_timeout: parse_duration(&args.hold_timeout)?,
        safe,
        seed: args.seed,
        schedule: args.amplify.into(),
        ..DebugOptions::default()
    };
    let load = args.run.load_options()?;
    let mut ui = Terminal::default();
    let debugged = match args.pid {
        Some(pid) => {
            let req = ServiceRequest {
                pid,
                trace: args.trace,
                unit: args.unit.expect("clap requires --unit with --pid"),
                fail_if: args.fail_if,
                safe: args.safe,
                unit_timeout: parse_duration(&args.unit_timeout)?,
                out: args.run.out,
                load,
                options,
            };
            debug_service(&req, &*interrupt_flag()?, &mut ui)?
        }
        None => {
            let req = ProgramRequest {
                policy: args.run.policy()?,
                command: args.command,
                trace: args.trace,
                safe: args.safe,
                out: args.run.out,
                load,
                options,
            };
            debug_program(&req, &*interrupt_flag()?, &mut ui)?
        }
    };
    let report = report::build(&debugged.diagnosis);
    let text = report::render(&report);
    report::save(&debugged.out, &text, &report, &debugged.diagnosis)?;
    println!("{text}");
    println!("Session and report: {}", debugged.out.display());
    Ok(if report.root_cause.is_some() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
