//! `aid-agent export [SESSION] --format chrome|perfetto -o FILE|-`: recorded
//! runs as a trace (one process per run, one track per thread role, a
//! slice per call), as uftrace's `dump --chrome` does. The encoding is
//! [`crate::report::trace`].

use std::{io::IsTerminal as _, path::PathBuf, process::ExitCode};

use anyhow::bail;

use super::{
    args::session_dir,
    out::{emit_bytes, is_stdout},
};
use crate::report::trace::{Format, export, trace_of};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory (default: the newest in aid-sessions/).
    pub session: Option<PathBuf>,
    /// Runs to export, by id (repeatable, or comma-separated; default: all).
    #[arg(short, long = "run", value_name = "N", value_delimiter = ',')]
    pub runs: Vec<u32>,
    /// Chrome's JSON trace event format, or Perfetto's protobuf trace.
    #[arg(short, long, value_enum, default_value_t = FormatArg::Perfetto)]
    pub format: FormatArg,
    /// File to write (open it at ui.perfetto.dev or chrome://tracing);
    /// `-` for standard output.
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// JSON trace event format (chrome://tracing, Perfetto).
    Chrome,
    /// Perfetto's protobuf trace (ui.perfetto.dev, trace_processor).
    Perfetto,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = session_dir(args.session.as_deref())?;
    let format = match args.format {
        FormatArg::Chrome => Format::Chrome,
        FormatArg::Perfetto => Format::Perfetto,
    };
    let (e, to) = if is_stdout(&args.out) {
        if format == Format::Perfetto && std::io::stdout().is_terminal() {
            bail!(
                "a Perfetto trace is binary and stdout is a terminal: redirect it (`-o - > trace.pftrace`) or give -o FILE"
            );
        }
        let (bytes, e) = trace_of(&dir, &args.runs, format)?;
        emit_bytes(&bytes)?;
        (e, "standard output".to_owned())
    } else {
        (export(&dir, &args.runs, format, &args.out)?, args.out.display().to_string())
    };
    eprintln!(
        "aid: wrote {} run(s), {} call(s), {} intervention and delay mark(s) from {} to {to}",
        e.runs,
        e.slices,
        e.instants,
        dir.display(),
    );
    Ok(ExitCode::SUCCESS)
}
