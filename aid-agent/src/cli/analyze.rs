//! `aid-agent analyze SESSION`: the ranked predicate table.

use std::{path::PathBuf, process::ExitCode};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`.
    pub session: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("analyze is not built yet")
}
