//! `aid-agent mine [SESSION]`: bug explanation patterns mined from the
//! session's failing runs (seed 002; [`crate::explain::mine`]). Also the
//! access options `slice` and `compare` share.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;

use super::{
    args::{load_options, parse_duration, session_dir},
    out::emit,
    terminal::{Terminal, interrupt_flag},
};
use crate::{
    explain::{
        self, AccessSpec, ExplainError, Substrate,
        mine::{self, Dataset, Options, predicates, report},
        watch::WatchSettings,
        watched::{MineRequest, mine_watched},
    },
    store,
};

/// How calls are typed as reads and writes of the objects they are passed.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AccessArgs {
    /// Functions that only read the objects they are passed (globs,
    /// repeatable or comma-separated). Other calls count as a read at
    /// entry and a write at exit.
    #[arg(long = "reads", value_name = "GLOB")]
    pub reads: Vec<String>,
    /// Functions that only write the objects they are passed.
    #[arg(long = "writes", value_name = "GLOB")]
    pub writes: Vec<String>,
}

impl AccessArgs {
    pub fn spec(&self) -> Result<AccessSpec, ExplainError> {
        AccessSpec::new(&self.reads, &self.writes)
    }
}

/// How reads and writes of the objects are known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessMode {
    /// From the calls: see --reads and --writes.
    #[default]
    Rw,
    /// From hardware watchpoints on (up to two of) the objects, in re-runs
    /// of the program, unless the session already has watched runs.
    Watch,
}

/// Re-running the program (`--access watch`, `slice --verify`).
#[derive(Debug, Clone, clap::Args)]
pub struct RerunArgs {
    #[arg(long, value_enum, default_value = "rw")]
    pub access: AccessMode,
    /// With --access watch: how many watched re-runs to make at most.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub watch_runs: u32,
    /// With --access watch: the objects (at most two), or words of them
    /// (`pool+0x20`), to watch instead of the ones the analysis names.
    #[arg(long = "watch-object", value_name = "NAME")]
    pub watch_objects: Vec<String>,
    /// Kill a re-run (and count it as failed) after this long.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// Session directory the re-runs are written to (default: a new
    /// directory in SESSION), as `record -o`; what the command prints goes
    /// to standard output.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `-o DIR` given to a command that will not re-run the program: refused,
/// since nothing would be written there; `when` says what re-runs.
pub fn refuse_idle_out(out: Option<&Path>, command: &str, when: &str) -> anyhow::Result<()> {
    if out.is_some() {
        anyhow::bail!(
            "-o/--out DIR is where {command}'s re-runs are written, and {command} re-runs the program only {when}: to keep what it prints, redirect it (> FILE)"
        );
    }
    Ok(())
}

impl RerunArgs {
    /// Watch settings, or None without --access watch.
    pub fn watch(&self, session: &Path, runs: u32) -> anyhow::Result<Option<WatchSettings>> {
        if self.access != AccessMode::Watch {
            return Ok(None);
        }
        let timeout = parse_duration(&self.timeout)?;
        Ok(Some(WatchSettings {
            names: self.watch_objects.clone(),
            runs,
            until_failure: false,
            delay: None,
            interventions: Vec::new(),
            hold_timeout: timeout,
            timeout,
            out: self.dir(session, "watch"),
            load: load_options(64 << 20, crate::bpf::MAX_FUNCTIONS)?,
        }))
    }

    /// `--out`, or `SESSION/<what>-<time>` (`-2`, `-3`, ... when taken).
    pub fn dir(&self, session: &Path, what: &str) -> PathBuf {
        self.out.clone().unwrap_or_else(|| fresh_dir(session, what))
    }
}

/// `SESSION/<what>-<time>`, or with `-2`, `-3`, ... when that exists.
pub fn fresh_dir(session: &Path, what: &str) -> PathBuf {
    let base = format!("{what}-{}", store::now_unix());
    let mut dir = session.join(&base);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = session.join(format!("{base}-{n}"));
    }
    dir
}

/// Says which runs the explainers leave out, and why.
pub fn note_excluded(session: &crate::model::Session) {
    for line in explain::excluded_runs(session) {
        eprintln!("aid: {line}");
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`
    /// (default: the newest in aid-sessions/).
    pub session: Option<PathBuf>,
    /// First support threshold, as a fraction of the failing runs.
    #[arg(long, default_value_t = 1.0, value_name = "FRACTION")]
    pub min_supp: f64,
    /// How much to lower the threshold each time no pattern explains.
    #[arg(long, default_value_t = 0.1, value_name = "FRACTION")]
    pub step: f64,
    /// Longest pattern mined, in abstract events (the paper's 4).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub max_len: usize,
    /// Count a run toward a pattern's support only where the pattern
    /// occurs with dependences between all its macros, in passing runs as
    /// in failing ones (not the paper's definition; for long, looping
    /// traces, where every short pattern occurs in every run).
    #[arg(long)]
    pub witnessed: bool,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub rerun: RerunArgs,
    /// Write the patterns as "pattern occurs" predicates to FILE (format:
    /// docs/explain.md).
    #[arg(long, value_name = "FILE")]
    pub emit_predicates: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.min_supp > 0.0 && args.min_supp <= 1.0,
        "--min-supp {} must be in (0, 1]: a fraction of the failing runs",
        args.min_supp
    );
    anyhow::ensure!(args.step > 0.0 && args.step <= 1.0, "--step {} must be in (0, 1]", args.step);
    anyhow::ensure!(
        (1..=8).contains(&args.max_len),
        "--max-len {} must be between 1 and 8 (mining is exponential in it)",
        args.max_len
    );
    if args.rerun.access != AccessMode::Watch {
        refuse_idle_out(args.rerun.out.as_deref(), "mine", "with --access watch")?;
    }
    let spec = args.access.spec()?;
    let dir = session_dir(args.session.as_deref())?;
    let (loaded, globals) = explain::load(&dir)?;
    note_excluded(&loaded.session);
    let opts = Options {
        min_supp: args.min_supp,
        step: args.step,
        max_len: args.max_len,
        prune: true,
        witnessed: args.witnessed,
    };
    let (data, mined) = match args.rerun.watch(&dir, args.rerun.watch_runs)? {
        None => {
            let substrate = Substrate::build(&loaded.session, globals.as_ref(), &spec, &[]);
            if !substrate.runs.iter().any(|r| r.failed) {
                return Err(ExplainError::NoFailingRuns.into());
            }
            let data = Dataset::from_substrate(&substrate, &spec);
            let mined = mine::mine(&data, &opts);
            (data, mined)
        }
        Some(settings) => {
            let cancel = interrupt_flag()?;
            let req = MineRequest { dir: &dir, spec: &spec, opts: &opts };
            let (data, mined, note) = mine_watched(
                &loaded,
                globals.as_ref(),
                &req,
                &settings,
                &cancel,
                &mut Terminal::default(),
            )?;
            eprintln!("aid: {}", note.text());
            (data, mined)
        }
    };
    if let Some(path) = &args.emit_predicates {
        let file = predicates::export(&data, &mined, &args.access.reads, &args.access.writes);
        let text = serde_json::to_string_pretty(&file).expect("patterns serialize") + "\n";
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        emit(&(serde_json::to_string_pretty(&report::report(&data, &mined))? + "\n"))?;
    } else {
        emit(&report::render_text(&data, &mined))?;
    }
    Ok(ExitCode::SUCCESS)
}
