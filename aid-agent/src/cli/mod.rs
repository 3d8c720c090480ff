//! The command line: argument definitions, rendering and exit codes. Each
//! subcommand lives in its own file and calls one library entry point;
//! errors are printed once, with their cause chain, and map to the exit
//! codes documented in README.md. The only module that knows clap and
//! indicatif.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::record::Interrupted;

pub mod analyze;
pub mod args;
pub mod attach;
pub mod bench;
pub mod debug;
pub mod intervene;
pub mod record;
pub mod terminal;

/// Exit code for bad input, missing privileges or an unusable target.
pub const EXIT_USAGE: u8 = 2;

/// Exit code after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Parser)]
#[command(
    name = "aid-agent",
    version,
    about = "Explains why a native program fails only sometimes."
)]
pub struct Cli {
    /// More logging (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program N times under the tracer and store every run.
    Record(record::Args),
    /// Find the root cause and causal path of an intermittent failure.
    Debug(debug::Args),
    /// Trace a process that is already running (optionally per unit of work).
    Attach(attach::Args),
    /// Run a program under explicit interventions (testing aid).
    #[command(hide = true)]
    Intervene(intervene::Args),
    /// Rank the predicates that separate failing from passing runs of a session.
    Analyze(analyze::Args),
    /// Benchmarks (synthetic sensitivity study, ...).
    Bench(bench::Args),
}

/// Parses the command line, runs the subcommand, prints any error once.
pub fn main() -> ExitCode {
    // Before any thread exists: the ptrace controller waits for tracee
    // stops with sigtimedwait(SIGCHLD).
    crate::sys::ptrace::block_sigchld();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // Before anything slow: from here on a Ctrl-C is an interruption the
    // tracing commands handle (exit 130, what was recorded kept). The
    // others keep the default: Ctrl-C ends them at once.
    let traces = matches!(
        cli.command,
        Command::Record(_) | Command::Debug(_) | Command::Attach(_) | Command::Intervene(_)
    );
    if traces && let Err(err) = terminal::interrupt_flag() {
        eprintln!("aid: {}", one_line(&err));
        return ExitCode::from(EXIT_USAGE);
    }
    let level = match cli.verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    };
    env_logger::Builder::new()
        .filter_level(level)
        .format_timestamp(None)
        .format_target(false)
        .init();
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Debug(args) => debug::run(args),
        Command::Attach(args) => attach::run(args),
        Command::Intervene(args) => intervene::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("aid: {}", one_line(&err));
            if err.downcast_ref::<Interrupted>().is_some() {
                ExitCode::from(EXIT_INTERRUPTED)
            } else {
                ExitCode::from(EXIT_USAGE)
            }
        }
    }
}

/// clap's own messages for help and version; a usage error as one line
/// (clap's first), exit 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(EXIT_USAGE)
        } else {
            ExitCode::SUCCESS
        };
    }
    // The message is the first paragraph (a list of missing arguments
    // follows its first line); usage and tips come after a blank line.
    let text = e.render().to_string();
    let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    eprintln!("aid: {first} (see --help)");
    ExitCode::from(EXIT_USAGE)
}

/// An error and its causes on one line: each cause once (many errors
/// already quote their cause), line breaks (a regex error draws a caret
/// under the pattern) folded into spaces.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_printed_once_on_one_line() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let inner = anyhow::anyhow!("cannot read /proc/2/exe: {io}");
        let err = anyhow::Error::new(io)
            .context("cannot read /proc/2/exe: No such file or directory (os error 2)");
        assert_eq!(
            one_line(&err),
            "cannot read /proc/2/exe: No such file or directory (os error 2)"
        );
        assert_eq!(
            one_line(&inner.context("starting")),
            "starting: cannot read /proc/2/exe: No such file or directory (os error 2)"
        );
        // Built at run time: clippy rejects an invalid regex literal.
        let pattern = ["(", "unclosed"].concat();
        let regex = regex::Regex::new(&pattern).unwrap_err();
        let line = one_line(&anyhow::Error::new(regex).context("bad --fail-on"));
        assert!(!line.contains('\n'), "{line}");
        assert!(line.starts_with("bad --fail-on: regex parse error:"), "{line}");
    }
}
