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
pub mod debug;
pub mod export;
pub mod intervene;
pub mod man;
pub mod record;
pub mod terminal;

/// Exit code for bad input, missing privileges or an unusable target.
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "aid-agent",
    version,
    about = "Explains why a native program fails only sometimes.",
    after_help = "Examples:\n  aid-agent debug ./flaky-test --arg\n  aid-agent debug -p 4242 --unit handle_request --fail-if 'handle_request ret < 0'\n  aid-agent debug -l 'cache_*' ./flaky-test\n  aid-agent analyze\n  aid-agent export --run 3 --format perfetto -o run3.pftrace"
)]
pub struct Cli {
    /// More detail: statistics and the TAGT comparison in the report, and
    /// logging (-v info, -vv debug).
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
    /// Write recorded runs as a trace for Perfetto or chrome://tracing.
    Export(export::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(man::CompletionArgs),
    /// Write the man pages (`cargo xtask man`).
    #[command(hide = true)]
    Man(man::ManArgs),
    /// Benchmarks (synthetic sensitivity study, ...).
    Bench(bench::Args),
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
    let verbose = cli.verbose > 0;
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Debug(args) => debug::run(args, verbose),
        Command::Attach(args) => attach::run(args),
        Command::Intervene(args) => intervene::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Export(args) => export::run(args),
        Command::Completions(args) => man::completions(&args),
        Command::Man(args) => man::man_pages(&args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("aid: {err:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
