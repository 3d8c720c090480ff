//! The command line: argument definitions, rendering and exit codes. Each
//! subcommand lives in its own file and calls one library entry point;
//! errors are printed once, with their cause chain, and map to the exit
//! codes documented in README.md. The only module that knows clap and
//! indicatif.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod analyze;
pub mod args;
pub mod attach;
pub mod bench;
pub mod compare;
pub mod debug;
pub mod intervene;
pub mod mine;
pub mod out;
pub mod record;
pub mod slice;
pub mod terminal;
pub mod watch;

/// Exit code for bad input, missing privileges or an unusable target.
pub const EXIT_USAGE: u8 = 2;

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
    /// Mine cross-thread access patterns that explain the failing runs.
    Mine(mine::Args),
    /// Keep the calls of a failing run that carry its failure.
    Slice(slice::Args),
    /// Explain how a failing run differs from a passing one, re-running to test each link.
    Compare(compare::Args),
    /// Re-run with hardware watchpoints on objects and show which calls read and wrote them.
    Watch(watch::Args),
}

/// Parses the command line, runs the subcommand, prints any error once.
pub fn main() -> ExitCode {
    // Before any thread exists: the ptrace controller waits for tracee
    // stops with sigtimedwait(SIGCHLD).
    crate::sys::ptrace::block_sigchld();
    let cli = Cli::parse();
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
        Command::Mine(args) => mine::run(args),
        Command::Slice(args) => slice::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Watch(args) => watch::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("aid: {err:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
