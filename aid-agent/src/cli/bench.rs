//! `aid-agent bench ...`: benchmarks that need the agent's internals.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("bench is not built yet")
}
