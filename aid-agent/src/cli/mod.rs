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
pub mod compare;
pub mod debug;
pub mod export;
pub mod intervene;
pub mod man;
pub mod mine;
pub mod out;
pub mod record;
pub mod slice;
pub mod terminal;
pub mod watch;
pub mod worker;

/// Exit code for bad input, missing privileges or an unusable target.
pub const EXIT_USAGE: u8 = 2;

/// Exit code after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

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
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
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
    /// Mine cross-thread access patterns that explain the failing runs.
    Mine(mine::Args),
    /// Keep the calls of a failing run that carry its failure.
    Slice(slice::Args),
    /// Explain how a failing run differs from a passing one, re-running to test each link.
    Compare(compare::Args),
    /// Re-run with hardware watchpoints on objects and show which calls read and wrote them.
    Watch(watch::Args),
    /// Make runs for `debug --fleet` sessions on this host (one host of a fleet).
    Worker(worker::Args),
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
    if let Some(e) = mistyped_option(&cli) {
        return usage_error(&e);
    }
    // Before anything slow: from here on a Ctrl-C is an interruption the
    // tracing commands handle (exit 130, what was recorded kept). The
    // others keep the default: Ctrl-C ends them at once.
    let traces = matches!(
        cli.command,
        Command::Record(_)
            | Command::Debug(_)
            | Command::Attach(_)
            | Command::Intervene(_)
            | Command::Worker(_)
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
    let verbose = cli.verbose > 0;
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Debug(args) => debug::run(args, verbose),
        Command::Attach(args) => attach::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Intervene(args) => intervene::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Export(args) => export::run(args),
        Command::Completions(args) => man::completions(&args),
        Command::Man(args) => man::man_pages(&args),
        Command::Mine(args) => mine::run(args),
        Command::Slice(args) => slice::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Watch(args) => watch::run(args),
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
/// (clap's first) and a line for each of clap's tips, exit 2.
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
    // clap's tips ("a similar subcommand exists: 'debug'") keep a line each.
    for tip in text.lines().map(str::trim).filter(|l| l.starts_with("tip: ")) {
        eprintln!("aid: {tip}");
    }
    ExitCode::from(EXIT_USAGE)
}

/// `debug` and `record` take everything from the program on as its command
/// line, so a mistyped option (`--trase`) arrives as the program's name.
/// Without a `--` on the command line, a "program" that starts with `-` and
/// is no file is the usage error clap gives for an unknown option, with
/// clap's suggestion (as clap finds one: Jaro similarity above 0.7).
fn mistyped_option(cli: &Cli) -> Option<clap::Error> {
    use clap::{
        CommandFactory as _,
        error::{ContextKind, ContextValue, ErrorKind},
    };
    let (name, command) = match &cli.command {
        Command::Debug(a) => ("debug", &a.command),
        Command::Record(a) => ("record", &a.command),
        _ => return None,
    };
    let first = command.first()?.to_str()?;
    if !first.starts_with('-')
        || std::path::Path::new(first).exists()
        || std::env::args_os().any(|a| a == "--")
    {
        return None;
    }
    let mut root = Cli::command();
    root.build();
    let sub = root.find_subcommand(name)?;
    let typed = first.split('=').next().unwrap_or(first).trim_start_matches('-');
    let similar = sub
        .get_arguments()
        .filter_map(clap::Arg::get_long)
        .map(|long| (strsim::jaro(typed, long), long))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, long)| format!("--{long}"));
    let mut e = clap::Error::new(ErrorKind::UnknownArgument).with_cmd(sub);
    e.insert(ContextKind::InvalidArg, ContextValue::String(first.to_owned()));
    if let Some(similar) = similar {
        e.insert(ContextKind::SuggestedArg, ContextValue::String(similar));
    }
    Some(e)
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
    use std::ffi::OsString;

    use clap::Parser as _;

    use super::*;

    fn parse(args: &[&str]) -> Command {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}")).command
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    /// `debug ./prog args` needs no `--`; flags after the program are its own.
    #[test]
    fn debug_without_double_dash() {
        let Command::Debug(a) =
            parse(&["aid-agent", "debug", "-t", "f*", "./prog", "--fast", "-v", "x"])
        else {
            panic!()
        };
        assert_eq!(a.trace, ["f*"]);
        assert_eq!(a.command, os(&["./prog", "--fast", "-v", "x"]));
        let Command::Debug(a) = parse(&["aid-agent", "debug", "--", "./prog", "--runs", "3"])
        else {
            panic!()
        };
        assert_eq!(a.command, os(&["./prog", "--runs", "3"]));
        assert_eq!(a.runs, None);
        let Command::Record(a) = parse(&["aid-agent", "record", "./prog", "-n", "2"]) else {
            panic!()
        };
        assert_eq!((a.runs, a.command), (10, os(&["./prog", "-n", "2"])));
    }

    /// A joining host takes what to trace from the session: --join needs
    /// --fleet, and refuses what the first host decides.
    #[test]
    fn join_needs_a_fleet_and_nothing_the_session_decides() {
        let Command::Attach(a) = parse(&[
            "aid-agent",
            "attach",
            "-p",
            "42",
            "--fleet",
            "nats://h:4222",
            "--join",
            "s1",
            "--name",
            "web2",
            "-d",
            "1m",
        ]) else {
            panic!()
        };
        assert_eq!(
            (a.fleet.as_deref(), a.join.as_deref(), a.name.as_deref()),
            (Some("nats://h:4222"), Some("s1"), Some("web2"))
        );
        let refused = |args: &[&str]| Cli::try_parse_from(args).map(drop).unwrap_err().kind();
        use clap::error::ErrorKind;
        assert_eq!(
            refused(&["aid-agent", "attach", "-p", "42", "--join", "s1"]),
            ErrorKind::MissingRequiredArgument
        );
        for extra in [["-t", "f"], ["--unit", "f"], ["--window", "1s"], ["-o", "d"]] {
            let mut args = vec!["aid-agent", "attach", "-p", "42", "--fleet", "u", "--join", "s"];
            args.extend(extra);
            assert_eq!(refused(&args), ErrorKind::ArgumentConflict, "{extra:?}");
        }
        assert_eq!(
            refused(&["aid-agent", "attach", "-p", "42", "--fleet", "u", "--name", "n"]),
            ErrorKind::MissingRequiredArgument
        );
    }

    /// -p, -o, -d, -n, -l, -t, humantime durations.
    #[test]
    fn short_flags_and_durations() {
        let Command::Attach(a) =
            parse(&["aid-agent", "attach", "-p", "42", "-d", "1m30s", "-o", "s", "-t", "h*"])
        else {
            panic!()
        };
        assert_eq!(
            (a.pid, a.duration.as_deref(), a.out.as_deref()),
            (42, Some("1m30s"), Some(std::path::Path::new("s")))
        );
        let Command::Debug(a) = parse(&[
            "aid-agent",
            "debug",
            "-p",
            "42",
            "--unit",
            "u",
            "--fail-if",
            "u ret < 0",
            "-o",
            "dir",
            "--timeout",
            "1m30s",
            "--explain",
            "--svg",
        ]) else {
            panic!()
        };
        assert_eq!(a.pid, Some(42));
        assert!(a.explain && a.svg);
        assert_eq!(args::parse_duration(&a.run.timeout).unwrap().as_secs(), 90);
        let Command::Debug(a) =
            parse(&["aid-agent", "debug", "-n", "40", "--max-runs", "80", "-l", "c*", "./p"])
        else {
            panic!()
        };
        assert_eq!((a.runs, a.max_runs, a.list.as_deref()), (Some(40), 80, Some("c*")));
        let Command::Record(a) = parse(&["aid-agent", "record", "-l", "c*", "-o", "d", "./p"])
        else {
            panic!()
        };
        assert!(a.trace.is_empty(), "record needs no --trace");
        assert_eq!(a.list.as_deref(), Some("c*"));
        let Command::Export(a) = parse(&[
            "aid-agent",
            "export",
            "--run",
            "1,2",
            "-r",
            "5",
            "-f",
            "chrome",
            "-o",
            "t.json",
        ]) else {
            panic!()
        };
        assert_eq!((a.session, a.runs, a.format), (None, vec![1, 2, 5], export::FormatArg::Chrome));
        let Command::Analyze(a) = parse(&["aid-agent", "analyze"]) else { panic!() };
        assert_eq!((a.session, a.out), (None, None));
        let Command::Analyze(a) = parse(&["aid-agent", "analyze", "-o", "t.txt"]) else { panic!() };
        assert_eq!(a.out, Some("t.txt".into()));
        // Where the re-runs go: -o DIR, as in record and debug.
        let Command::Watch(a) = parse(&["aid-agent", "watch", "-o", "d", "--object", "x"]) else {
            panic!()
        };
        assert_eq!((a.session, a.out), (None, Some("d".into())));
        let Command::Mine(a) = parse(&["aid-agent", "mine", "-o", "d", "s"]) else { panic!() };
        assert_eq!((a.session, a.rerun.out), (Some("s".into()), Some("d".into())));
        assert!(Cli::try_parse_from(["aid-agent", "debug", "-p", "1", "./prog"]).is_err());
    }

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

    /// A load error keeps the kernel's error as its source (not a
    /// string), and the line still says both.
    #[test]
    fn a_probe_load_error_keeps_its_cause_and_prints_it() {
        let err = crate::bpf::ProbeError::Load {
            program: "enter_fn",
            source: aya::programs::ProgramError::NotLoaded,
        };
        assert!(std::error::Error::source(&err).is_some());
        let line = one_line(&anyhow::Error::new(err));
        assert!(line.starts_with("loading the eBPF program enter_fn failed: "), "{line}");
        assert!(line.len() > "loading the eBPF program enter_fn failed: ".len(), "{line}");
    }
}
