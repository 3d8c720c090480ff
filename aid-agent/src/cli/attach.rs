//! `aid-agent attach --pid PID`: trace a process that is already running,
//! for a while or until Ctrl-C. With `--unit FN` every invocation of FN is
//! one run, written to the session as soon as it completes; without, one
//! run per `--window`, written as it closes. Counters on stderr while it
//! runs: one line redrawn in place on a terminal, a plain line every
//! `--status-every` otherwise. With `--fleet`, other hosts' runs go into
//! the same session (`--join` on each of them).

use std::{
    io::IsTerminal as _,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use std::sync::atomic::Ordering;

use super::{
    args::{load_options, parse_duration, positive, print_list},
    terminal::{Terminal, interrupt_flag},
};
use crate::{
    fleet::attach::{Gathering, JoinOptions, join},
    record::{
        attach::{AttachRequest, AttachSummary, DEFAULT_WINDOW, Peers, attach},
        list::ListIn,
        progress::Progress,
    },
    symbols::DebugSearch,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to trace (all its threads, existing and future).
    #[arg(short, long)]
    pub pid: u32,
    /// Functions to trace (globs, optionally 'lib:glob'). Repeatable, one
    /// pattern each: a comma is part of the name ('{a,b}' matches both).
    #[arg(long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// Stop after this long (30s, 1m30s; default: until Ctrl-C or the
    /// process exits).
    #[arg(short, long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Each invocation of this function is one run (execution unit).
    #[arg(long, value_name = "FN")]
    pub unit: Option<String>,
    /// Without --unit: one run per window of this length, each written to
    /// the session as it closes (an agent killed mid-attach loses at most
    /// one window).
    #[arg(short, long, value_name = "DURATION", conflicts_with = "unit")]
    pub window: Option<String>,
    /// Label a run failed when a call returns such a value:
    /// 'FN ret < 0', 'FN ret == -1', 'FN ret != 0', 'FN ret null'.
    #[arg(long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// Session directory to write (default: aid-sessions/<time>-<program>).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// List the functions PATTERN matches in the process and its
    /// libraries, with library and address, and exit (like `bpftrace -l`).
    #[arg(short, long, value_name = "PATTERN")]
    pub list: Option<String>,
    /// Where separate debug files of stripped binaries are looked for
    /// (by build-id and .gnu_debuglink; debuginfod too when
    /// DEBUGINFOD_URLS is set).
    #[arg(long, value_name = "DIR", default_value = crate::symbols::debuginfo::DEFAULT_ROOT)]
    pub debug_root: PathBuf,
    /// When stderr is not a terminal, print the counters this often.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub status_every: String,
    /// Ring buffer size in bytes (a power of two).
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub ring_size: u32,
    /// Most functions to probe (an entry and a return probe each).
    #[arg(long, default_value_t = crate::bpf::MAX_FUNCTIONS, value_name = "N")]
    pub max_probes: usize,
    /// One session from several hosts, through the NATS server at URL
    /// (JetStream on): this host's runs are written here, other hosts'
    /// sent here (they join with --join; docs/fleet.md).
    #[arg(long, value_name = "nats://HOST:PORT")]
    pub fleet: Option<String>,
    /// With --fleet: send this process's runs to SESSION, started by
    /// `attach --fleet` on another host (what to trace comes from there).
    #[arg(
        long,
        value_name = "SESSION",
        requires = "fleet",
        conflicts_with_all = ["trace", "unit", "window", "fail_if", "out", "list"]
    )]
    pub join: Option<String>,
    /// With --join: this host's name in the session (letters, digits, '-'
    /// and '_'; default: the host's name and the agent's pid).
    #[arg(long, value_name = "NAME", requires = "join")]
    pub name: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(pattern) = &args.list {
        return print_list(ListIn::Process(args.pid), std::slice::from_ref(pattern));
    }
    super::args::check_patterns(&args.trace)?;
    let window = match args.window.as_deref() {
        Some(w) => positive("--window", parse_duration(w)?)?,
        None => DEFAULT_WINDOW,
    };
    let every = positive("--status-every", parse_duration(&args.status_every)?)?;
    let duration =
        args.duration.as_deref().map(|d| positive("--duration", parse_duration(d)?)).transpose()?;
    let cancel = interrupt_flag()?;
    let mut ui = Counters::new(every);
    if let (Some(url), Some(session)) = (&args.fleet, &args.join) {
        let opts = JoinOptions {
            url: url.clone(),
            session: session.clone(),
            pid: args.pid,
            name: args.name,
            duration,
            debug: DebugSearch::with_root(args.debug_root),
        };
        let j = join(&opts, &cancel, &mut ui)?;
        println!(
            "sent {} of pid {} to session {session} as {} ({}): {} pass, {} fail",
            crate::util::human::count(u64::from(j.runs), "run"),
            args.pid,
            j.name,
            j.ended,
            j.runs - j.failing,
            j.failing
        );
        if j.lost > 0 {
            eprintln!(
                "aid: warning: the kernel dropped {} event(s) (ring buffer full); affected runs are marked incomplete and excluded from analysis",
                j.lost
            );
        }
        return Ok(if cancel.load(Ordering::Relaxed) {
            ExitCode::from(130)
        } else {
            ExitCode::SUCCESS
        });
    }
    let mut gathering = args.fleet.as_deref().map(Gathering::connect).transpose()?;
    let req = AttachRequest {
        duration,
        load: load_options(args.ring_size, args.max_probes)?,
        pid: args.pid,
        trace: args.trace,
        unit: args.unit,
        window,
        fail_if: args.fail_if,
        out: args.out,
        debug: DebugSearch::with_root(args.debug_root),
    };
    let peers = gathering.as_mut().map(|g| g as &mut dyn Peers);
    let s = attach(&req, &cancel, &mut ui, peers)?;
    let what = if req.unit.is_some() { "unit(s)" } else { "window(s)" };
    let others = if gathering.is_some() {
        format!(", {} of them from other hosts", s.from_peers)
    } else {
        String::new()
    };
    println!(
        "recorded {} {what} of pid {} ({}){others}: {} pass, {} fail -> {}",
        s.recorded,
        req.pid,
        s.ended,
        s.passed,
        s.failed,
        s.out.display()
    );
    if let Some(line) = not_recorded(&s) {
        eprintln!("aid: {line}");
    }
    if s.lost > 0 {
        eprintln!(
            "aid: warning: the kernel dropped {} event(s) (ring buffer full); affected runs are marked incomplete and excluded from analysis. Use a larger --ring-size.",
            s.lost
        );
    }
    Ok(if s.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

/// The units left out, with why; None when there were none.
fn not_recorded(s: &AttachSummary) -> Option<String> {
    let mut why = Vec::new();
    if s.partial_at_start > 0 {
        why.push(format!(
            "{} already running while the probes were being attached",
            s.partial_at_start
        ));
    }
    if s.partial_at_end > 0 {
        why.push(format!("{} still running when recording stopped", s.partial_at_end));
    }
    (!why.is_empty()).then(|| {
        format!(
            "{} unit(s) were not recorded, being only partly traced: {}",
            s.partial_at_start + s.partial_at_end,
            why.join("; ")
        )
    })
}

/// The terminal, and on a non-terminal the counters as a plain line at
/// most every `every` (a spinner redraws them in place on a terminal).
struct Counters {
    term: Terminal,
    plain: bool,
    every: Duration,
    last: Option<Instant>,
}

impl Counters {
    fn new(every: Duration) -> Counters {
        Counters {
            term: Terminal::default(),
            plain: !std::io::stderr().is_terminal(),
            every,
            last: None,
        }
    }
}

impl Progress for Counters {
    fn say(&mut self, line: &str) {
        self.term.say(line);
    }

    fn begin(&mut self, what: &str, total: Option<u64>) {
        self.last = Some(Instant::now());
        self.term.begin(what, total);
    }

    fn step(&mut self, status: &str) {
        self.term.step(status);
    }

    fn step_to(&mut self, pos: u64, status: &str) {
        self.term.step_to(pos, status);
        if self.plain && self.last.is_some_and(|t| t.elapsed() >= self.every) {
            self.last = Some(Instant::now());
            eprintln!("aid: {status}");
        }
    }

    fn end(&mut self) {
        self.term.end();
    }
}
