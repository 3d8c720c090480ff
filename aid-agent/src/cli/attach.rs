//! `aid-agent attach --pid PID`: trace a process that is already running,
//! for a while or until Ctrl-C. With `--unit FN` every invocation of FN is
//! one run, written to the session as soon as it completes.

use std::{path::PathBuf, process::ExitCode};

use super::{
    args::{load_options, parse_duration, positive, print_list},
    terminal::{Terminal, interrupt_flag},
};
use crate::record::{
    attach::{AttachRequest, attach},
    list::ListIn,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to trace (all its threads, existing and future).
    #[arg(short, long)]
    pub pid: u32,
    /// Functions to trace (globs, optionally 'lib:glob'). Repeatable.
    #[arg(long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// Stop after this long (30s, 1m30s; default: until Ctrl-C or the
    /// process exits).
    #[arg(short, long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Each invocation of this function is one run (execution unit).
    #[arg(long, value_name = "FN")]
    pub unit: Option<String>,
    /// Label a run failed when a call returns such a value:
    /// 'FN ret < 0', 'FN ret == -1', 'FN ret != 0', 'FN ret null'.
    #[arg(long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// Session directory to write (default: aid-sessions/<time>-<program>).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// List the functions PATTERN matches in the process and its
    /// libraries, with library and address, and exit (like `bpftrace -l`).
    #[arg(short, long, value_name = "PATTERN")]
    pub list: Option<String>,
    /// Ring buffer size in bytes (a power of two).
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub ring_size: u32,
    /// Most functions to probe (an entry and a return probe each).
    #[arg(long, default_value_t = crate::bpf::MAX_FUNCTIONS, value_name = "N")]
    pub max_probes: usize,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(pattern) = &args.list {
        return print_list(ListIn::Process(args.pid), std::slice::from_ref(pattern));
    }
    super::args::check_patterns(&args.trace)?;
    let req = AttachRequest {
        duration: args
            .duration
            .as_deref()
            .map(|d| positive("--duration", parse_duration(d)?))
            .transpose()?,
        load: load_options(args.ring_size, args.max_probes)?,
        pid: args.pid,
        trace: args.trace,
        unit: args.unit,
        fail_if: args.fail_if,
        out: args.out,
    };
    let cancel = interrupt_flag()?;
    let s = attach(&req, &cancel, &mut Terminal::default())?;
    let what = if req.unit.is_some() { "unit(s)" } else { "run" };
    println!(
        "recorded {} {what} of pid {} ({}): {} pass, {} fail -> {}",
        s.recorded,
        req.pid,
        s.ended,
        s.passed,
        s.failed,
        s.out.display()
    );
    if s.partial > 0 {
        eprintln!(
            "aid: {} unit(s) running while probes were attached or removed were not recorded (partially traced)",
            s.partial
        );
    }
    if s.lost > 0 {
        eprintln!(
            "aid: warning: the kernel dropped {} event(s) (ring buffer full); affected runs are marked incomplete and excluded from analysis. Use a larger --ring-size.",
            s.lost
        );
    }
    Ok(if s.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}
