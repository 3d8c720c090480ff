//! `aid-agent worker`: one host of a fleet (`fleet/worker.rs`).

use std::process::ExitCode;

use super::terminal::interrupt_flag;
use crate::fleet::worker::{WorkerOptions, WorkerUi, serve};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The fleet's NATS server (nats://HOST:PORT, JetStream on), the one
    /// `debug --fleet` is given.
    #[arg(long, value_name = "URL")]
    pub connect: String,
    /// This worker's name in the coordinator's messages (letters, digits,
    /// '-', '_'). Default: the host's name and the worker's pid.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Runs made at once, each with its own probes (as `debug --jobs`).
    #[arg(short = 'j', long, default_value_t = 1, value_name = "N")]
    pub jobs: u32,
}

/// Lines on standard error, as the agent's other progress lines.
struct Lines;

impl WorkerUi for Lines {
    fn say(&mut self, line: &str) {
        eprintln!("aid: {line}");
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.jobs == 0 {
        anyhow::bail!("--jobs 0 makes no runs: give at least 1 (runs made at once)");
    }
    let stop = interrupt_flag()?;
    let opts = WorkerOptions { url: args.connect, name: args.name, jobs: args.jobs };
    serve(&opts, &stop, &mut Lines)?;
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
    }
    Ok(ExitCode::SUCCESS)
}
