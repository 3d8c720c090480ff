//! `aid-agent intervene` (hidden): run a program under an explicit list of
//! interventions and store the runs. For testing the intervention machinery
//! and for trying an intervention by hand; `debug` chooses interventions
//! itself.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;

use super::{
    args::{RunArgs, SessionOut, parse_duration, positive},
    terminal::interrupt_flag,
};
use crate::{
    bpf::Programs,
    model::{Intervention, Noise},
    record::{
        program::{RecordRequest, record},
        progress::Progress,
    },
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace; function ids in the plan count from 0 in the
    /// order these patterns match.
    #[arg(long = "trace", short = 't', value_name = "PATTERN", required = true)]
    pub trace: Vec<String>,
    /// JSON file: a list of interventions (see model::Intervention).
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// JSON file: noise made in every run with the interventions, as a
    /// debug round's intervened runs have it (a list of noise points, as
    /// `runs.jsonl` records a run's `noise`).
    #[arg(long, value_name = "FILE")]
    pub noise: Option<PathBuf>,
    /// Longest any hold may last.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub out: SessionOut,
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// A JSON file's contents, or a one-line error saying what it should be.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not {what}", path.display()))
}

/// One line on stdout per run: what became of its interventions.
struct RunLines;

impl Progress for RunLines {
    fn say(&mut self, line: &str) {
        eprintln!("aid: {line}");
    }

    fn step(&mut self, status: &str) {
        println!("{status}");
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.runs == 0 {
        anyhow::bail!("--runs 0 runs nothing: give at least 1");
    }
    super::args::check_patterns(&args.trace)?;
    let policy = args.run.policy()?;
    let hold_timeout = positive("--hold-timeout", parse_duration(&args.hold_timeout)?)?;
    let interventions: Vec<Intervention> = read_json(&args.plan, "a list of interventions")?;
    let noise: Vec<Noise> = match &args.noise {
        Some(path) => read_json(path, "a list of noise points")?,
        None => Vec::new(),
    };
    let req = RecordRequest {
        noise: None,
        policy,
        load: args.run.load_options()?,
        command: args.command,
        trace: args.trace,
        runs: args.runs,
        store: args.out.store()?,
        out: args.out.out,
        programs: Programs::Record,
        plan: Some((interventions, noise, hold_timeout)),
        debug: crate::symbols::DebugSearch::default(),
        jobs: args.run.jobs()?,
    };
    let cancel = interrupt_flag()?;
    let s = record(&req, &cancel, &mut RunLines)?;
    if s.interrupted {
        eprintln!("aid: interrupted; the {} run(s) made so far are saved", s.recorded);
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}
