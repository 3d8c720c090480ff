//! The session directory: what `record`, `attach` and `debug` write and
//! `analyze` reads. The format is documented in docs/session-format.md.
//!
//! - `session.json`: header (format, version, command, traced functions);
//! - `runs.jsonl`: one JSON object per run, appended when the run ends, so
//!   a session interrupted at any point keeps every run it finished;
//! - `runs/NNNNNN/events.csv`, `threads.csv`, `stdout.txt`, `stderr.txt`
//!   (the last two not for a live session's units);
//! - `parquet/events/` and `parquet/threads/`: the same rows as Parquet,
//!   one file per run, for other tools (or where `--store` says).
//!
//! Every CSV file's row count and SHA-256 are in its run's record; loading
//! checks both, so a truncated or modified file is reported, never read in
//! part.
//!
//! A session is data, never instructions: a file a record names must lie
//! inside the session directory (or the session is refused), and a damaged
//! run (a record cut short, a flipped byte, a missing file) is skipped with
//! a warning naming it while the intact runs are read. Session directories
//! are created 0700: they hold argument values and program output.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::model::{
    AppliedIntervention, Function, Label, Noise, Outcome, Pause, RunPhase, WaitGraph,
};

mod lines;
mod owner;
mod reader;
mod tables;
mod writer;

pub use owner::hand_over;
pub use reader::{Loaded, Skipped, load, load_full};
pub use tables::{Destination, StoreError, host_name, safe_host};
pub use writer::{Writer, prepare};

pub const FORMAT: &str = "aid-session";

/// 2: a `run` column in events.csv and threads.csv, pointers in hex, a
/// `phase` per run, the analysis settings in session.json. 3: a `content`
/// column in events.csv (what an argument pointed to at entry). Versions
/// 1 and 2 are still read.
pub const VERSION: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{} is not an aid session (no session.json): give the directory written by `aid-agent record`", .0.display())]
    NotASession(PathBuf),
    #[error("{} was written by a newer aid (format version {found}, this one reads {VERSION}): upgrade aid-agent", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("no session given and none in {}/: give a session directory (written by `aid-agent record`, `attach` or `debug`)", .0.display())]
    NoSessions(PathBuf),
    #[error("session directory {} already exists and is not empty: choose another --out or remove it", .0.display())]
    Exists(PathBuf),
    #[error("session file {} is corrupt: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("session file {} is missing (run {run}): the session was moved or damaged", path.display())]
    Missing { path: PathBuf, run: u32 },
    #[error("cannot write {}: {source}: {}", path.display(), write_hint(source))]
    Write { path: PathBuf, source: std::io::Error },
    /// An S3 bucket (`--store s3://…`) refused or did not answer.
    #[error(
        "cannot write {url}: {reason}: check the bucket's name, AWS_ENDPOINT_URL and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
    )]
    Bucket { url: String, reason: String },
    #[error("{} names `{file}`, outside the session directory: refusing to read it (the session was tampered with)", path.display())]
    Escapes { path: PathBuf, file: String },
    #[error("{} is a symbolic link: refusing to follow it (the session was tampered with)", .0.display())]
    Symlink(PathBuf),
    #[error("{} exists: run {run} of host {host} is already stored there (two sessions of one name on one host?): give this session another --out name or another --store", path.display())]
    Duplicate { path: PathBuf, run: u32, host: String },
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
}

/// Opens one of the session's own files for reading, never through a
/// symbolic link (a `runs.jsonl` pointing at `/etc/shadow` would
/// otherwise be read, and its lines echoed in warnings).
pub(crate) fn open_own(path: &Path) -> Result<fs::File, SessionError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).map_err(|source| {
        match source.raw_os_error() {
            Some(libc::ELOOP) => SessionError::Symlink(path.to_owned()),
            _ => SessionError::Read { path: path.to_owned(), source },
        }
    })
}

/// [`open_own`], the whole file as text.
pub(crate) fn read_own(path: &Path) -> Result<String, SessionError> {
    use std::io::Read as _;
    let mut text = String::new();
    open_own(path)?
        .read_to_string(&mut text)
        .map_err(|source| SessionError::Read { path: path.to_owned(), source })?;
    Ok(text)
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Write { path: path.to_owned(), source }
}

/// Creates `dir` and its missing parents 0700, and makes `dir` 0700 if it
/// existed; under `sudo` `dir` and the parents made for it go to the user.
fn private_dir(dir: &Path) -> Result<(), SessionError> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    create_dirs(dir, |dir| fs::DirBuilder::new().recursive(true).mode(0o700).create(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(write_err(dir))?;
    hand_over(dir);
    Ok(())
}

/// Runs `create` (which makes `dir` and its missing parents), and under
/// `sudo` gives the directories it made to the user.
fn create_dirs(
    dir: &Path,
    create: impl FnOnce(&Path) -> std::io::Result<()>,
) -> Result<(), SessionError> {
    let missing: Vec<&Path> =
        dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).collect();
    create(dir).map_err(write_err(dir))?;
    missing.into_iter().for_each(hand_over);
    Ok(())
}

fn write_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => "free space, or choose another --out",
        _ => "choose another --out",
    }
}

/// How the session was produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Record,
    Attach,
    Debug,
}

/// Contents of `session.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub tool: String,
    /// Seconds since the Unix epoch.
    pub created: u64,
    /// Nanoseconds past `created`: orders sessions created in the same
    /// second (0 in sessions written before it existed).
    #[serde(default)]
    pub created_subsec_ns: u32,
    pub mode: Mode,
    /// Absolute path of the traced executable.
    pub program: PathBuf,
    /// The command line (record/debug), empty for attach.
    pub command: Vec<String>,
    /// The process attached to (attach mode).
    pub pid: Option<u32>,
    /// The unit function, when each invocation is one run (attach --unit).
    pub unit: Option<String>,
    /// The rules runs were labelled by, as given.
    pub fail_rules: Vec<String>,
    pub functions: Vec<Function>,
    /// How `debug` analysed the runs (absent for `record` and `attach`,
    /// and in version 1 sessions), so that `analyze` later judges them the
    /// same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Settings>,
    /// How many runs were made at once (`--jobs`), when more than one:
    /// the load of the others is part of each run's conditions. Absent:
    /// one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u32>,
    /// `debug --fleet`: the server the observed runs went through and how
    /// many each worker made. Absent: this host made them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetMark>,
}

/// Which fleet made a session's runs (`debug --fleet`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetMark {
    /// The NATS server's address.
    pub url: String,
    /// Runs each worker made (observed, intervened and control runs), by
    /// the worker's name.
    pub workers: BTreeMap<String, u32>,
}

/// The options a session was analysed with, as the user gave them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `--safe` patterns: functions whose return value may be forced.
    pub safe: Vec<String>,
    /// Zero (false) returns of integer and bool functions count as errors.
    pub zero_is_error: bool,
    /// Negative returns do not count as errors.
    pub negative_is_ok: bool,
    /// The intervention strategy (`--strategy`).
    pub strategy: String,
    /// `--confidence`.
    pub confidence: f64,
    /// `--min-runs` (failing and passing runs wanted before intervening).
    pub min_runs: u32,
    /// `--max-runs` (most runs observed before intervening).
    pub max_runs: u32,
    /// `--hold-timeout`, ms.
    pub hold_timeout_ms: u64,
    /// `--seed`.
    pub seed: u64,
}

/// One line of `runs.jsonl`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: u32,
    pub label: Label,
    /// What the run was made for (absent in version 1: derived from the
    /// interventions and noise).
    #[serde(default)]
    pub phase: Option<RunPhase>,
    pub outcome: Outcome,
    pub lost_events: u64,
    #[serde(default)]
    pub lost_thread_records: u64,
    pub complete: bool,
    pub end_ns: u64,
    /// `CLOCK_MONOTONIC` ns of time zero.
    pub start_monotonic_ns: u64,
    /// Exits of calls entered before tracing began (attach).
    pub orphan_exits: u64,
    #[serde(default)]
    pub interventions: Vec<AppliedIntervention>,
    #[serde(default)]
    pub noise: Vec<Noise>,
    /// Agent overhead stops, taken out of call durations.
    #[serde(default)]
    pub pauses: Vec<Pause>,
    /// What was not traced in the run, in words (child processes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A run that hung: its wait-for graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang: Option<WaitGraph>,
    /// The host that made the run, when not the one that wrote the
    /// session (a fleet's worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub events: FileRef,
    pub threads: FileRef,
}

/// A file of a run, with what it must contain.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileRef {
    /// Relative to the session directory.
    pub path: String,
    /// Data rows (header excluded).
    pub rows: u64,
    pub sha256: String,
}

/// Where sessions go when no `--out` is given.
pub const SESSIONS_DIR: &str = "aid-sessions";

/// The newest session in `root` (`aid-sessions` for the commands): the
/// one whose header was created last, by name when two were created at
/// the same instant.
pub fn latest(root: &Path) -> Result<PathBuf, SessionError> {
    let entries = fs::read_dir(root).map_err(|_| SessionError::NoSessions(root.to_owned()))?;
    let mut best: Option<((u64, u32), PathBuf)> = None;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(text) = read_own(&dir.join("session.json")) else { continue };
        let Ok(header) = serde_json::from_str::<Header>(&text) else { continue };
        let key = ((header.created, header.created_subsec_ns), dir);
        if best.as_ref().is_none_or(|b| (b.0, &b.1) < (key.0, &key.1)) {
            best = Some(key);
        }
    }
    best.map(|(_, d)| d).ok_or_else(|| SessionError::NoSessions(root.to_owned()))
}

/// Creates a new, empty default session directory for `program`:
/// `aid-sessions/<UTC time>-<program>`, with `-2`, `-3`, ... added when
/// another session took that name in the same second. Each name is tried
/// with one `mkdir`, so two agents started at once never share a
/// directory.
pub fn create_default_dir(program: &Path) -> Result<PathBuf, SessionError> {
    create_default_in(Path::new(SESSIONS_DIR), program, now_unix())
}

/// Attempts at a free name before giving up (a thousand sessions of one
/// program in one second is not a use aid has).
const NAME_ATTEMPTS: u32 = 1000;

/// [`create_default_dir`] under `root`, at `secs` since the Unix epoch.
pub(crate) fn create_default_in(
    root: &Path,
    program: &Path,
    secs: u64,
) -> Result<PathBuf, SessionError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let name =
        program.file_name().map_or_else(|| "target".into(), |n| n.to_string_lossy().into_owned());
    let base = format!("{}-{name}", utc_stamp(secs));
    create_dirs(root, |dir| fs::DirBuilder::new().recursive(true).mode(0o700).create(dir))?;
    for n in 1..=NAME_ATTEMPTS {
        let dir = match n {
            1 => root.join(&base),
            n => root.join(format!("{base}-{n}")),
        };
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                hand_over(&dir);
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(SessionError::Write { path: dir, source: e }),
        }
    }
    Err(SessionError::Exists(root.join(format!("{base}-{NAME_ATTEMPTS}"))))
}

/// `YYYYmmdd-HHMMSS` in UTC (civil-from-days, H. Hinnant).
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

pub fn now_unix() -> u64 {
    now().0
}

/// Now, as seconds since the Unix epoch and nanoseconds past them.
pub fn now() -> (u64, u32) {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or((0, 0), |d| (d.as_secs(), d.subsec_nanos()))
}

/// A session header for tests: program `/bin/x`, run as `x`, no rules.
#[cfg(test)]
pub(crate) fn test_header(mode: Mode, functions: Vec<Function>) -> Header {
    Header {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        created: 0,
        created_subsec_ns: 0,
        mode,
        program: "/bin/x".into(),
        command: vec!["x".into()],
        pid: None,
        unit: None,
        fail_rules: vec![],
        settings: None,
        jobs: None,
        fleet: None,
        functions,
    }
}

#[cfg(test)]
mod tests;
