//! `aid-agent completions SHELL` (clap_complete) and the hidden
//! `aid-agent man --out DIR` that `cargo xtask man` runs (clap_mangen):
//! both generated from the one command definition, so they never drift.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write aid-agent.1 and aid-agent-SUBCOMMAND.1 into.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn completions(args: &CompletionArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "aid-agent", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// One page for the command and one per visible subcommand.
pub fn man_pages(args: &ManArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let cmd = Cli::command();
    let mut written = Vec::new();
    let mut page = |cmd: clap::Command, name: String| -> anyhow::Result<()> {
        let path = args.out.join(format!("{name}.1"));
        let mut bytes = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut bytes)?;
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("aid-agent-{}", sub.get_name());
        page(sub.clone().name(name.clone()), name)?;
    }
    page(cmd, "aid-agent".into())?;
    for p in &written {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
