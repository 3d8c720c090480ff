//! `aid-agent record`: run a program N times under the tracer and store
//! every run, labelled pass or fail, in a session directory.

use std::{ffi::OsString, process::ExitCode};

use anyhow::bail;

use super::{
    args::{RunArgs, SessionOut, heading, print_list},
    terminal::{Terminal, interrupt_flag},
};
use crate::{
    bpf::Programs,
    record::{
        list::ListIn,
        program::{RecordRequest, record},
    },
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace: a glob over (demangled) names, optionally in a
    /// library: 'cache_*', 'Cache::*', 'libc:pthread_mutex_*'. Repeatable,
    /// one pattern each: a comma is part of the name ('{a,b}' matches
    /// both).
    /// Default: the program's own functions (not libraries), the first 32
    /// in address order (`debug` chooses them by what tracing costs).
    #[arg(help_heading = heading::TRACE, long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// Observe exactly N runs of the program (`debug --runs N` observes N
    /// too before analysing).
    #[arg(help_heading = heading::RUNS, short = 'n', long, default_value_t = 10, value_name = "N")]
    pub runs: u32,
    /// List the functions PATTERN matches in the program, with library and
    /// address, and exit (like `bpftrace -l`).
    #[arg(help_heading = heading::TRACE, short, long, value_name = "PATTERN")]
    pub list: Option<String>,
    /// Where separate debug files of a stripped program are looked for
    /// (by build-id and .gnu_debuglink; debuginfod too when
    /// DEBUGINFOD_URLS is set).
    #[arg(help_heading = heading::TRACE, long, value_name = "DIR", default_value = crate::symbols::debuginfo::DEFAULT_ROOT)]
    pub debug_root: std::path::PathBuf,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub out: SessionOut,
    /// Noise in every run, as `debug --amplify` injects it, at its
    /// strongest level (16 points a run held up to 16 ms; starve: 2
    /// threads starved 1 ms to 1 s); `one-cpu` has no holds. The runs
    /// are made as intervened runs are (under ptrace, the C library's
    /// synchronisation points probed), after one run without noise that
    /// the points are learnt from: -n N makes N + 1 runs.
    #[arg(help_heading = heading::RUNS, long, value_enum, value_name = "MODE")]
    pub noise: Option<super::args::AmplifyArg>,
    /// Attach programs that record nothing (benchmark floor).
    #[arg(long, hide = true)]
    pub empty_probes: bool,
    /// The program and its arguments (`--` before them only when the
    /// program's name starts with `-`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(pattern) = &args.list {
        return print_list(ListIn::Program(&args.command), std::slice::from_ref(pattern));
    }
    if args.runs == 0 {
        bail!("--runs 0 records nothing: give at least 1");
    }
    super::args::check_patterns(&args.trace)?;
    let req = RecordRequest {
        policy: args.run.policy()?,
        load: args.run.load_options()?,
        command: args.command,
        trace: args.trace,
        runs: args.runs,
        store: args.out.store()?,
        out: args.out.out,
        programs: if args.empty_probes { Programs::Empty } else { Programs::Record },
        plan: None,
        debug: crate::symbols::DebugSearch::with_root(args.debug_root),
        noise: args.noise.map(Into::into),
        jobs: args.run.jobs()?,
    };
    let cancel = interrupt_flag()?;
    let s = record(&req, &cancel, &mut Terminal::default())?;
    let tally = match (s.first_failed, req.noise) {
        (Some(first), Some(schedule)) => format!(
            "run 1 without noise ({}), {} with noise ({}): {} pass, {} fail;",
            if first { "fail" } else { "pass" },
            s.recorded.saturating_sub(1),
            schedule.describe(),
            s.passed - u32::from(!first),
            s.failed - u32::from(first),
        ),
        _ => format!("{} pass, {} fail,", s.passed, s.failed),
    };
    println!(
        "recorded {} run(s) of {}: {tally} {} events -> {}",
        s.recorded,
        s.command,
        s.events,
        s.out.display()
    );
    if s.lost_runs > 0 {
        eprintln!(
            "aid: warning: {} run(s) lost {} event(s) (ring buffer full) and are marked incomplete; analysis excludes them. Use a larger --ring-size.",
            s.lost_runs, s.lost_events
        );
    }
    if s.noted_runs > 1 {
        eprintln!(
            "aid: {} run(s) left something untraced (child processes); each run's record in runs.jsonl says what",
            s.noted_runs
        );
    }
    if s.interrupted {
        eprintln!("aid: interrupted; the {} run(s) recorded so far are saved", s.recorded);
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}
