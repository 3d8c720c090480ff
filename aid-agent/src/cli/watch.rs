//! `aid-agent watch [SESSION] --object NAME`: re-run the session's program
//! with hardware watchpoints on up to two objects and print which calls
//! read and wrote them ([`crate::explain::watch`]).

use std::{path::PathBuf, process::ExitCode, sync::atomic::Ordering};

use super::{
    args::{load_options, parse_duration, session_dir},
    mine::fresh_dir,
    out::emit,
    terminal::{Terminal, interrupt_flag},
};
use crate::{
    explain::{
        self, ExplainError, id_list,
        watch::{self, WatchSettings},
    },
    record::watchpoints::WatchDelay,
};

/// After which accesses `--delay` holds the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DelayAfter {
    Writes,
    Any,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`
    /// (default: the newest in aid-sessions/).
    pub session: Option<PathBuf>,
    /// An object to watch, by the name `mine` and `slice` print (a global
    /// `events`, or `role:function#k.argN|ret`), or a member of a global
    /// as C writes it (`savings.balance`); at most two.
    #[arg(long = "object", value_name = "NAME", required = true)]
    pub objects: Vec<String>,
    /// The run whose calls and threads locate the objects (default: the
    /// first failing run, else the first run).
    #[arg(long, value_name = "N")]
    pub run: Option<u32>,
    /// How many watched re-runs.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub runs: u32,
    /// Hold a thread right after it touches a watched object (failure
    /// amplification): after writes, or after any access.
    #[arg(long, value_enum, value_name = "WHICH", requires = "delay")]
    pub delay_after: Option<DelayAfter>,
    /// How long that hold lasts.
    #[arg(long, value_name = "DURATION")]
    pub delay: Option<String>,
    /// At most this many holds per run.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub max_delays: u32,
    /// Kill a re-run (and count it as failed) after this long.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// Session directory the watched re-runs are written to (default:
    /// SESSION/watch-TIME), as `record -o`; what they show goes to
    /// standard output.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let timeout = parse_duration(&args.timeout)?;
    let delay = match (args.delay_after, &args.delay) {
        (Some(after), Some(d)) => Some(WatchDelay {
            writes_only: after == DelayAfter::Writes,
            delay_us: parse_duration(d)?.as_micros() as u64,
            max: args.max_delays,
        }),
        (None, Some(_)) => anyhow::bail!("--delay needs --delay-after writes|any"),
        _ => None,
    };
    let dir = session_dir(args.session.as_deref())?;
    let (loaded, globals) = explain::load(&dir)?;
    let session = &loaded.session;
    let base = match args.run {
        Some(id) => session.runs.iter().find(|r| r.id == id).ok_or_else(|| {
            ExplainError::NoSuchRun(id, id_list(session.runs.iter().map(|r| r.id)))
        })?,
        None => session
            .runs
            .iter()
            .find(|r| r.failed())
            .or(session.runs.first())
            .ok_or_else(|| anyhow::anyhow!("{} has no runs", dir.display()))?,
    };
    let objects = watch::resolve(&session.functions, base, globals.as_ref(), &args.objects)?;
    let out = args.out.clone().unwrap_or_else(|| fresh_dir(&dir, "watch"));
    let settings = WatchSettings {
        names: Vec::new(),
        runs: args.runs,
        until_failure: false,
        delay,
        interventions: Vec::new(),
        hold_timeout: timeout,
        timeout,
        out: out.clone(),
        load: load_options(64 << 20, crate::bpf::MAX_FUNCTIONS)?,
    };
    let cancel = interrupt_flag()?;
    let outcome =
        watch::watch_program(&loaded, objects, &settings, &cancel, &mut Terminal::default())?;
    let reports: Vec<_> = outcome
        .runs
        .iter()
        .map(|(run, rec)| watch::run_report(run, rec, &outcome.functions))
        .collect();
    eprintln!("aid: {} watched run(s) saved in {}", reports.len(), out.display());
    if args.json {
        emit(&(serde_json::to_string_pretty(&reports)? + "\n"))?;
    } else {
        emit(&watch::render_text(&reports))?;
    }
    Ok(if cancel.load(Ordering::Relaxed) { ExitCode::from(130) } else { ExitCode::SUCCESS })
}
