//! The session directory: what `record`, `attach` and `debug` write and
//! `analyze` reads. The format is documented in docs/session-format.md.
//!
//! - `session.json`: header (format, version, command, traced functions);
//! - `runs.jsonl`: one JSON object per run, appended when the run ends, so
//!   a session interrupted at any point keeps every run it finished;
//! - `runs/NNNNNN/events.csv`, `threads.csv`, `stdout.txt`, `stderr.txt`.
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
    fs::{self, File, OpenOptions},
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::model::{
    AppliedIntervention, EventRow, FuncId, Function, Label, Noise, Outcome, Pause, Point,
    RecordedRun, Role, Run, RunPhase, Session, Thread, ValueKind, ValueType, apply_pauses,
    calls_from_rows,
};

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
    #[error("{} names `{file}`, outside the session directory: refusing to read it (the session was tampered with)", path.display())]
    Escapes { path: PathBuf, file: String },
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
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

/// Appends runs to a new session directory.
pub struct Writer {
    dir: PathBuf,
    header: Header,
    runs: File,
    count: usize,
    /// When `runs.jsonl` last reached the disk.
    synced: Option<std::time::Instant>,
}

/// `runs.jsonl` reaches the disk at most this long after a run's record:
/// a service's units come every few milliseconds, and waiting for the
/// disk after each one made the agent fall behind the event stream
/// (issue 12). A record is in the page cache at once, so an agent that is
/// killed loses nothing; only a machine crash can lose this much.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.runs.sync_data();
    }
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Write { path: path.to_owned(), source }
}

/// Creates the session directory `dir` (mode 0700, with any missing
/// parents), which must not exist or be empty, and checks that files can be
/// created in it: done before any probe is attached, so that an unusable
/// `--out` is found first.
pub fn prepare(dir: &Path) -> Result<(), SessionError> {
    if dir.exists() && fs::read_dir(dir).map_err(write_err(dir))?.next().is_some() {
        return Err(SessionError::Exists(dir.to_owned()));
    }
    private_dir(dir)?;
    // An unnamed file: nothing is left behind.
    tempfile::tempfile_in(dir).map_err(write_err(dir))?;
    Ok(())
}

/// Creates `dir` and its missing parents 0700, and makes `dir` 0700 if it
/// existed.
fn private_dir(dir: &Path) -> Result<(), SessionError> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(write_err(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(write_err(dir))
}

impl Writer {
    /// Creates `dir` (which must not exist or be empty; see [`prepare`])
    /// and writes the header.
    pub fn create(dir: &Path, header: &Header) -> Result<Writer, SessionError> {
        if dir.exists() && fs::read_dir(dir).map_err(write_err(dir))?.next().is_some() {
            return Err(SessionError::Exists(dir.to_owned()));
        }
        private_dir(dir)?;
        private_dir(&dir.join("runs"))?;
        let header_path = dir.join("session.json");
        let text = serde_json::to_string_pretty(header).expect("header serializes");
        atomic_write(&header_path, text.as_bytes())?;
        let runs_path = dir.join("runs.jsonl");
        let runs = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runs_path)
            .map_err(write_err(&runs_path))?;
        Ok(Writer { dir: dir.to_owned(), header: header.clone(), runs, count: 0, synced: None })
    }

    /// Stores the analysis settings in `session.json` (rewritten whole,
    /// atomically).
    pub fn set_settings(&mut self, settings: Settings) -> Result<(), SessionError> {
        self.header.settings = Some(settings);
        let text = serde_json::to_string_pretty(&self.header).expect("header serializes");
        atomic_write(&self.dir.join("session.json"), text.as_bytes())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn runs_written(&self) -> usize {
        self.count
    }

    /// Writes a run's files, then its record (the record last, so a record
    /// never points at files that were not completely written). If any of
    /// it cannot be written (a full disk), what was written of the run is
    /// removed: the session keeps its earlier runs and nothing half-written
    /// looks complete.
    pub fn append(
        &mut self,
        rec: &RecordedRun,
        functions: &[Function],
    ) -> Result<(), SessionError> {
        let before = self.runs.metadata().map(|m| m.len()).ok();
        let run_dir = self.dir.join(format!("runs/{:06}", rec.run.id));
        let result = self.try_append(rec, functions);
        if result.is_err() {
            if let Some(len) = before {
                let _ = self.runs.set_len(len);
            }
            let _ = fs::remove_dir_all(&run_dir);
        }
        result
    }

    fn try_append(
        &mut self,
        rec: &RecordedRun,
        functions: &[Function],
    ) -> Result<(), SessionError> {
        let RecordedRun {
            run,
            rows,
            start_ns: start_monotonic_ns,
            orphan_exits,
            stdout,
            stderr,
            notes,
            ..
        } = rec;
        let (start_monotonic_ns, orphan_exits) = (*start_monotonic_ns, *orphan_exits);
        let rel = format!("runs/{:06}", run.id);
        let run_dir = self.dir.join(&rel);
        private_dir(&run_dir)?;
        let events = write_csv(
            &self.dir,
            &format!("{rel}/events.csv"),
            EVENT_COLUMNS,
            rows.iter().map(|r| EventLine::new(run.id, r, functions)),
        )?;
        let threads = write_csv(
            &self.dir,
            &format!("{rel}/threads.csv"),
            THREAD_COLUMNS,
            run.threads.iter().map(|t| ThreadLine::new(run.id, t)),
        )?;
        for (name, text) in [("stdout.txt", stdout.as_str()), ("stderr.txt", stderr.as_str())] {
            let p = run_dir.join(name);
            fs::write(&p, text).map_err(write_err(&p))?;
        }
        let record = RunRecord {
            id: run.id,
            label: run.label,
            phase: Some(run.phase()),
            outcome: run.outcome.clone(),
            lost_events: run.lost_events,
            lost_thread_records: run.lost_thread_records,
            complete: run.complete,
            end_ns: run.end_ns,
            start_monotonic_ns,
            orphan_exits,
            interventions: run.interventions.clone(),
            noise: run.noise.clone(),
            pauses: run.pauses.clone(),
            notes: notes.clone(),
            events,
            threads,
        };
        let mut line = serde_json::to_string(&record).expect("record serializes");
        line.push('\n');
        let path = self.dir.join("runs.jsonl");
        self.runs.write_all(line.as_bytes()).map_err(write_err(&path))?;
        if self.synced.is_none_or(|t| t.elapsed() >= SYNC_EVERY) {
            self.runs.sync_data().map_err(write_err(&path))?;
            self.synced = Some(std::time::Instant::now());
        }
        self.count += 1;
        Ok(())
    }
}

fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).map_err(write_err(&tmp))?;
    fs::rename(&tmp, path).map_err(write_err(path))
}

/// One line of `events.csv`: arguments on entries, the return value on
/// exits, the other cells empty. Values of pointer type are written in hex
/// (`0x7ffd1234`), the others in decimal; both are read back.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct EventLine {
    /// The run's id (version 2; version 1 files have no such column).
    #[serde(default)]
    run: Option<u32>,
    t_ns: u64,
    tid: u32,
    role: Role,
    func: FuncId,
    /// The function's name, for people reading the file.
    function: String,
    point: Point,
    instance: u32,
    arg0: Option<String>,
    arg1: Option<String>,
    arg2: Option<String>,
    ret: Option<String>,
    /// Entries of functions with a pointee: the bytes read, in hex,
    /// trailing zero bytes left out (version 3).
    #[serde(default)]
    content: Option<String>,
}

const EVENT_COLUMNS: &[&str] = &[
    "run", "t_ns", "tid", "role", "func", "function", "point", "instance", "arg0", "arg1", "arg2",
    "ret", "content",
];

/// The columns of events.csv in a session of `version`.
fn event_columns(version: u32) -> &'static [&'static str] {
    match version {
        ..=1 => &EVENT_COLUMNS[1..12],
        2 => &EVENT_COLUMNS[..12],
        _ => EVENT_COLUMNS,
    }
}

/// Writes pointee bytes as hex, without trailing zero bytes (at least one
/// byte, so that nothing read stays apart from zeros read).
fn content_cell(c: &crate::model::Content) -> String {
    let n = c.iter().rposition(|&b| b != 0).map_or(1, |i| i + 1);
    hex(&c[..n])
}

/// Reads a cell written by [`content_cell`].
fn parse_content(text: &str) -> Result<crate::model::Content, String> {
    let bad = || format!("`{text}` is not pointee content");
    let mut out = crate::model::Content::default();
    if !text.len().is_multiple_of(2) || text.len() / 2 > out.len() {
        return Err(bad());
    }
    for (i, b) in out.iter_mut().enumerate().take(text.len() / 2) {
        *b = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

/// Writes a value as its type wants it read: pointers in hex.
fn cell(value: i64, ty: Option<&ValueType>) -> String {
    match ty.map(|t| t.kind) {
        Some(ValueKind::Pointer) => format!("{:#x}", value as u64),
        _ => value.to_string(),
    }
}

/// Reads a cell written by [`cell`] (or by version 1: always decimal).
fn parse_cell(text: &str) -> Result<i64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map(|v| v as i64),
        None => text.parse::<i64>(),
    };
    parsed.map_err(|_| format!("`{text}` is not a number"))
}

impl EventLine {
    fn new(run: u32, r: &EventRow, functions: &[Function]) -> EventLine {
        let f = functions.get(r.func as usize);
        let entry = r.point == Point::Entry;
        let arg = |i: usize| entry.then(|| cell(r.args[i], f.and_then(|f| f.params.get(i))));
        EventLine {
            run: Some(run),
            t_ns: r.t_ns,
            tid: r.tid,
            role: r.role,
            func: r.func,
            function: f.map(|f| f.name.clone()).unwrap_or_default(),
            point: r.point,
            instance: r.instance,
            arg0: arg(0),
            arg1: arg(1),
            arg2: arg(2),
            ret: (!entry).then(|| cell(r.ret, f.map(|f| &f.ret))),
            content: r.content.as_ref().filter(|_| entry).map(content_cell),
        }
    }

    fn row(self) -> Result<EventRow, String> {
        let num = |c: &str| parse_cell(c);
        let (args, ret) = match (self.point, &self.arg0, &self.arg1, &self.arg2, &self.ret) {
            (Point::Entry, Some(a0), Some(a1), Some(a2), None) => {
                ([num(a0)?, num(a1)?, num(a2)?], 0)
            }
            (Point::Exit, None, None, None, Some(ret)) => ([0; 3], num(ret)?),
            _ => {
                return Err(format!(
                    "the {} at {} ns has the wrong cells filled",
                    match self.point {
                        Point::Entry => "entry",
                        Point::Exit => "exit",
                    },
                    self.t_ns
                ));
            }
        };
        Ok(EventRow {
            t_ns: self.t_ns,
            tid: self.tid,
            role: self.role,
            func: self.func,
            point: self.point,
            instance: self.instance,
            args,
            ret,
            content: self.content.as_deref().map(parse_content).transpose()?,
        })
    }
}

/// One line of `threads.csv`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct ThreadLine {
    /// The run's id (version 2).
    #[serde(default)]
    run: Option<u32>,
    role: Role,
    tid: u32,
    name: String,
    parent_role: Option<Role>,
    created_ns: u64,
}

const THREAD_COLUMNS: &[&str] = &["run", "role", "tid", "name", "parent_role", "created_ns"];

/// The columns a session of `version` has (version 1: no `run` column).
fn columns(all: &'static [&'static str], version: u32) -> &'static [&'static str] {
    if version < 2 { &all[1..] } else { all }
}

impl ThreadLine {
    fn new(run: u32, t: &Thread) -> ThreadLine {
        ThreadLine {
            run: Some(run),
            role: t.role,
            tid: t.tid,
            name: t.name.clone(),
            parent_role: t.parent,
            created_ns: t.created_ns,
        }
    }
}

impl From<ThreadLine> for Thread {
    fn from(t: ThreadLine) -> Thread {
        Thread {
            role: t.role,
            tid: t.tid,
            name: t.name,
            parent: t.parent_role,
            created_ns: t.created_ns,
        }
    }
}

/// Writes a CSV file (the header, then one line per item) and returns its
/// reference (rows, SHA-256).
fn write_csv<L: Serialize>(
    dir: &Path,
    rel: &str,
    columns: &[&str],
    lines: impl Iterator<Item = L>,
) -> Result<FileRef, SessionError> {
    let path = dir.join(rel);
    let mut bytes = Vec::new();
    let mut count = 0u64;
    {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(&mut bytes);
        let io = |e: csv::Error| SessionError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        };
        // Written by hand so that a file without lines still names them.
        w.write_record(columns).map_err(io)?;
        for line in lines {
            w.serialize(line).map_err(io)?;
            count += 1;
        }
        w.flush().map_err(|e| SessionError::Write { path: path.clone(), source: e })?;
    }
    let sha256 = hex(&Sha256::digest(&bytes));
    fs::write(&path, &bytes).map_err(write_err(&path))?;
    Ok(FileRef { path: rel.to_owned(), rows: count, sha256 })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A session read back: header, run records and the model (of the runs
/// that could be read), and the damaged runs that were left out.
pub struct Loaded {
    pub header: Header,
    pub records: Vec<RunRecord>,
    pub session: Session,
    pub skipped: Vec<Skipped>,
}

/// Reads and verifies a session directory; damaged runs are left out
/// ([`load_full`] says which).
pub fn load(dir: &Path) -> Result<Session, SessionError> {
    load_full(dir).map(|l| l.session)
}

pub fn load_full(dir: &Path) -> Result<Loaded, SessionError> {
    let header_path = dir.join("session.json");
    if !header_path.is_file() {
        return Err(SessionError::NotASession(dir.to_owned()));
    }
    let text = fs::read_to_string(&header_path)
        .map_err(|source| SessionError::Read { path: header_path.clone(), source })?;
    let header: Header = serde_json::from_str(&text)
        .map_err(|e| SessionError::Corrupt { path: header_path.clone(), reason: e.to_string() })?;
    if header.format != FORMAT {
        return Err(SessionError::Corrupt {
            path: header_path,
            reason: format!("format is `{}`, expected `{FORMAT}`", header.format),
        });
    }
    if header.version > VERSION {
        return Err(SessionError::Version { path: header_path, found: header.version });
    }
    let runs_path = dir.join("runs.jsonl");
    let file = File::open(&runs_path)
        .map_err(|source| SessionError::Read { path: runs_path.clone(), source })?;
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| SessionError::Read { path: runs_path.clone(), source })?;
        if n == 0 {
            break;
        }
        number += 1;
        let damaged = |what: String| Skipped {
            run: None,
            reason: format!("{} line {number} {what}", runs_path.display()),
        };
        if line.last() != Some(&b'\n') {
            skipped.push(damaged(
                "is cut short (the recording was interrupted while writing it)".into(),
            ));
            continue;
        }
        match serde_json::from_slice::<RunRecord>(&line) {
            Ok(record) => records.push(record),
            Err(e) => skipped.push(damaged(format!("is damaged ({e})"))),
        }
    }
    // Where files may be: inside the session directory, symbolic links
    // resolved.
    let root =
        dir.canonicalize().map_err(|source| SessionError::Read { path: dir.into(), source })?;
    for rec in &records {
        for file in [&rec.events, &rec.threads] {
            inside(&root, &runs_path, &file.path)?;
        }
    }
    let mut runs = Vec::with_capacity(records.len());
    let mut kept = Vec::with_capacity(records.len());
    for rec in records {
        let read = read_events(dir, &rec, &header)
            .and_then(|rows| Ok((rows, read_threads(dir, &rec, header.version)?)));
        let (rows, threads) = match read {
            Ok(read) => read,
            Err(
                e @ (SessionError::Corrupt { .. }
                | SessionError::Missing { .. }
                | SessionError::Read { .. }),
            ) => {
                skipped.push(Skipped { run: Some(rec.id), reason: e.to_string() });
                continue;
            }
            Err(other) => return Err(other),
        };
        runs.push(Run {
            id: rec.id,
            label: rec.label,
            outcome: rec.outcome.clone(),
            lost_events: rec.lost_events,
            lost_thread_records: rec.lost_thread_records,
            complete: rec.complete,
            threads,
            calls: {
                let mut calls = calls_from_rows(&rows);
                apply_pauses(&mut calls, &rec.pauses);
                calls
            },
            end_ns: rec.end_ns,
            interventions: rec.interventions.clone(),
            noise: rec.noise.clone(),
            pauses: rec.pauses.clone(),
        });
        kept.push(rec);
    }
    let session = Session { functions: header.functions.clone(), runs };
    Ok(Loaded { header, records: kept, session, skipped })
}

/// A damaged run left out of a loaded session, and why.
#[derive(Clone, Debug)]
pub struct Skipped {
    /// The run, when its record could be read.
    pub run: Option<u32>,
    /// What is damaged, naming the file.
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.run {
            Some(id) => write!(f, "run {id} skipped: {}", self.reason),
            None => write!(f, "a run skipped: {}", self.reason),
        }
    }
}

/// Refuses a file reference that leaves the session directory `root`
/// (canonical): an absolute path, `..`, or a symbolic link pointing out.
fn inside(root: &Path, runs_path: &Path, file: &str) -> Result<(), SessionError> {
    use std::path::Component;
    let escapes = || SessionError::Escapes { path: runs_path.to_owned(), file: file.to_owned() };
    let rel = Path::new(file);
    if file.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(escapes());
    }
    // A file that does not exist is a damaged run, not an escape; its
    // parent, if it exists, must still be inside.
    let mut probe = root.join(rel);
    loop {
        match probe.canonicalize() {
            Ok(real) if real.starts_with(root) => return Ok(()),
            Ok(_) => return Err(escapes()),
            Err(_) => {
                if !probe.pop() {
                    return Ok(());
                }
            }
        }
    }
}

/// Reads a referenced CSV file, checking its digest and row count.
fn read_verified<L: serde::de::DeserializeOwned>(
    dir: &Path,
    file: &FileRef,
    run: u32,
    columns: &[&str],
) -> Result<Vec<L>, SessionError> {
    let path = dir.join(&file.path);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SessionError::Missing { path, run });
        }
        Err(source) => return Err(SessionError::Read { path, source }),
    };
    let corrupt = |reason: String| SessionError::Corrupt { path: path.clone(), reason };
    if hex(&Sha256::digest(&bytes)) != file.sha256 {
        return Err(corrupt("checksum mismatch (truncated or modified after recording)".into()));
    }
    let mut reader = csv::Reader::from_reader(&bytes[..]);
    let head = reader.headers().map_err(|e| corrupt(e.to_string()))?;
    if head.iter().collect::<Vec<_>>() != columns {
        return Err(corrupt(format!("unexpected columns {:?}", head.iter().collect::<Vec<_>>())));
    }
    let lines: Vec<L> =
        reader.deserialize().collect::<Result<_, _>>().map_err(|e| corrupt(e.to_string()))?;
    if lines.len() as u64 != file.rows {
        return Err(corrupt(format!("{} rows, the run record says {}", lines.len(), file.rows)));
    }
    Ok(lines)
}

fn read_events(
    dir: &Path,
    rec: &RunRecord,
    header: &Header,
) -> Result<Vec<EventRow>, SessionError> {
    let path = dir.join(&rec.events.path);
    let corrupt = |reason: String| SessionError::Corrupt { path: path.clone(), reason };
    let cols = event_columns(header.version);
    read_verified::<EventLine>(dir, &rec.events, rec.id, cols)?
        .into_iter()
        .map(|line| {
            if line.func as usize >= header.functions.len() {
                return Err(corrupt(format!("function id {} not in session.json", line.func)));
            }
            if line.run.is_some_and(|r| r != rec.id) {
                return Err(corrupt(format!(
                    "a row of run {} in run {}",
                    line.run.unwrap_or(0),
                    rec.id
                )));
            }
            line.row().map_err(corrupt)
        })
        .collect()
}

fn read_threads(dir: &Path, rec: &RunRecord, version: u32) -> Result<Vec<Thread>, SessionError> {
    let cols = columns(THREAD_COLUMNS, version);
    let lines = read_verified::<ThreadLine>(dir, &rec.threads, rec.id, cols)?;
    Ok(lines.into_iter().map(Thread::from).collect())
}

/// Where sessions go when no `--out` is given.
pub const SESSIONS_DIR: &str = "aid-sessions";

/// The newest session in `root` (`aid-sessions` for the commands): the
/// one whose header was created last, by name when two were created in
/// the same second.
pub fn latest(root: &Path) -> Result<PathBuf, SessionError> {
    let entries = fs::read_dir(root).map_err(|_| SessionError::NoSessions(root.to_owned()))?;
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(text) = fs::read_to_string(dir.join("session.json")) else { continue };
        let Ok(header) = serde_json::from_str::<Header>(&text) else { continue };
        let key = (header.created, dir);
        if best.as_ref().is_none_or(|b| (b.0, &b.1) < (key.0, &key.1)) {
            best = Some(key);
        }
    }
    best.map(|(_, d)| d).ok_or_else(|| SessionError::NoSessions(root.to_owned()))
}

/// A default session directory name: `aid-sessions/<UTC time>-<program>`.
pub fn default_dir(program: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name =
        program.file_name().map_or_else(|| "target".into(), |n| n.to_string_lossy().into_owned());
    PathBuf::from(SESSIONS_DIR).join(format!("{}-{name}", utc_stamp(secs)))
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
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A session header for tests: program `/bin/x`, run as `x`, no rules.
#[cfg(test)]
pub(crate) fn test_header(mode: Mode, functions: Vec<Function>) -> Header {
    Header {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        created: 0,
        mode,
        program: "/bin/x".into(),
        command: vec!["x".into()],
        pid: None,
        unit: None,
        fail_rules: vec![],
        settings: None,
        functions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        testing::{self, function, thread},
    };

    fn header() -> Header {
        test_header(
            Mode::Record,
            vec![function(0, "f(int, int)").with_symbol("_Z1fii").in_module("/bin/x", 0x1000)],
        )
    }

    fn stored(run: &Run, rows: &[EventRow], stdout: &str, stderr: &str) -> RecordedRun {
        RecordedRun {
            run: run.clone(),
            rows: rows.to_vec(),
            start_ns: 100,
            orphan_exits: 0,
            stdout: stdout.into(),
            stderr: stderr.into(),
            probe_errors: 0,
            notes: Vec::new(),
            sync_steps: Vec::new(),
        }
    }

    fn run(id: u32) -> (Run, Vec<EventRow>) {
        let rows = vec![
            EventRow {
                t_ns: 5,
                tid: 7,
                role: 0,
                func: 0,
                point: Point::Entry,
                instance: 1,
                args: [1, -2, 3],
                ret: 0,
                content: Some(*b"SKU-7\0\0\0\0\0\0\0\0\0\0\0"),
            },
            EventRow {
                t_ns: 9,
                tid: 7,
                role: 0,
                func: 0,
                point: Point::Exit,
                instance: 1,
                args: [0; 3],
                ret: -1,
                content: None,
            },
        ];
        let outcome =
            Outcome { exit_code: Some(1), reason: "exit code 1".into(), ..Default::default() };
        let mut main = thread(0, "main");
        main.tid = 7;
        let run = testing::run(id, Label::Fail, calls_from_rows(&rows), 12)
            .with_threads(vec![main])
            .with_outcome(outcome);
        (run, rows)
    }

    #[test]
    fn round_trip_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let h = header();
        let mut w = Writer::create(dir.path(), &h).unwrap();
        let (r, rows) = run(1);
        w.append(&stored(&r, &rows, "out", "err"), &h.functions).unwrap();
        let s = load(dir.path()).unwrap();
        assert_eq!(s.runs, vec![r]);
        assert_eq!(s.functions, h.functions);
    }

    /// A session of three identical runs, 1 to 3.
    fn three_runs() -> (tempfile::TempDir, Header) {
        let dir = tempfile::tempdir().unwrap();
        let h = header();
        let mut w = Writer::create(&dir.path().join("s"), &h).unwrap();
        for id in 1..=3 {
            let (r, rows) = run(id);
            w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
        }
        (dir, h)
    }

    fn ids(loaded: &Loaded) -> Vec<u32> {
        loaded.session.runs.iter().map(|r| r.id).collect()
    }

    #[test]
    fn truncated_or_flipped_events_file_skips_that_run() {
        let (dir, _) = three_runs();
        let s = dir.path().join("s");
        let events = s.join("runs/000002/events.csv");
        let text = fs::read_to_string(&events).unwrap();
        fs::write(&events, &text[..text.len() - 3]).unwrap();
        let mut bytes = fs::read(s.join("runs/000003/threads.csv")).unwrap();
        bytes[20] ^= 0x01;
        fs::write(s.join("runs/000003/threads.csv"), bytes).unwrap();
        let loaded = load_full(&s).unwrap();
        assert_eq!(ids(&loaded), vec![1]);
        let why: Vec<String> = loaded.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(why.len(), 2);
        assert!(why[0].starts_with("run 2 skipped: session file "), "{why:?}");
        assert!(why[0].ends_with("runs/000002/events.csv is corrupt: checksum mismatch (truncated or modified after recording)"), "{why:?}");
        assert!(
            why[1].contains("runs/000003/threads.csv is corrupt: checksum mismatch"),
            "{why:?}"
        );
    }

    #[test]
    fn cut_short_or_damaged_record_and_missing_file_skip_their_runs() {
        let (dir, _) = three_runs();
        let s = dir.path().join("s");
        let runs = s.join("runs.jsonl");
        let text = fs::read_to_string(&runs).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines[0] = lines[0].replacen("\"label\"", "\"lab\u{1}el\"", 1);
        let last = lines.pop().unwrap();
        let cut = format!("{}\n{}", lines.join("\n"), &last[..last.len() - 10]);
        fs::write(&runs, cut).unwrap();
        fs::remove_file(s.join("runs/000002/events.csv")).unwrap();
        let loaded = load_full(&s).unwrap();
        assert_eq!(ids(&loaded), Vec::<u32>::new());
        let why: Vec<String> = loaded.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why[0].contains("runs.jsonl line 1 is damaged"), "{why:?}");
        assert!(why[1].contains("runs.jsonl line 3 is cut short"), "{why:?}");
        assert!(why[2].starts_with("run 2 skipped: session file "), "{why:?}");
        assert!(why[2].contains("runs/000002/events.csv is missing (run 2)"), "{why:?}");
    }

    #[test]
    fn a_file_outside_the_session_is_refused() {
        for bad in ["/etc/shadow", "../outside.csv", "runs/../../outside.csv", "link/events.csv"] {
            let (dir, _) = three_runs();
            let s = dir.path().join("s");
            fs::write(dir.path().join("outside.csv"), "t_ns\n").unwrap();
            std::os::unix::fs::symlink(dir.path(), s.join("link")).unwrap();
            let runs = s.join("runs.jsonl");
            let text = fs::read_to_string(&runs).unwrap();
            fs::write(&runs, text.replacen("runs/000002/events.csv", bad, 1)).unwrap();
            let Err(err) = load(&s) else { panic!("{bad} was read") };
            let err = err.to_string();
            assert_eq!(
                err,
                format!(
                    "{} names `{bad}`, outside the session directory: refusing to read it (the session was tampered with)",
                    runs.display()
                )
            );
        }
    }

    #[test]
    fn session_directories_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let (dir, _) = three_runs();
        let s = dir.path().join("s");
        for d in [s.clone(), s.join("runs"), s.join("runs/000001")] {
            assert_eq!(fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700, "{d:?}");
        }
        let fresh = dir.path().join("a/b");
        prepare(&fresh).unwrap();
        assert_eq!(fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(fs::read_dir(&fresh).unwrap().count(), 0, "prepare leaves nothing behind");
        Writer::create(&fresh, &header()).unwrap();
    }

    /// A run that cannot be written (here: its directory is taken by a
    /// file) leaves no trace, and the runs before it stay readable.
    #[test]
    fn a_failed_append_leaves_the_session_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("s");
        let h = header();
        let mut w = Writer::create(&s, &h).unwrap();
        let (r, rows) = run(1);
        w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
        let before = fs::read(s.join("runs.jsonl")).unwrap();
        fs::write(s.join("runs/000002"), "in the way").unwrap();
        let (r2, rows2) = run(2);
        let err = w.append(&stored(&r2, &rows2, "", ""), &h.functions).unwrap_err().to_string();
        assert!(err.starts_with("cannot write "), "{err}");
        assert!(err.ends_with(": choose another --out"), "{err}");
        assert_eq!(fs::read(s.join("runs.jsonl")).unwrap(), before);
        assert_eq!(ids(&load_full(&s).unwrap()), vec![1]);
    }

    #[test]
    fn not_a_session_and_existing_dir() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(dir.path()), Err(SessionError::NotASession(_))));
        fs::write(dir.path().join("x"), "").unwrap();
        assert!(matches!(Writer::create(dir.path(), &header()), Err(SessionError::Exists(_))));
    }

    /// The columns the reader checks are the fields the writer fills, in
    /// the same order.
    #[test]
    fn csv_columns_are_the_line_fields() {
        fn header<L: Serialize>(line: &L) -> String {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.serialize(line).unwrap();
            let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
            text.lines().next().unwrap().to_owned()
        }
        let (r, rows) = run(1);
        assert_eq!(header(&EventLine::new(1, &rows[0], &[])), EVENT_COLUMNS.join(","));
        assert_eq!(header(&ThreadLine::new(1, &r.threads[0])), THREAD_COLUMNS.join(","));
    }

    /// Version 2 files: a `run` column, pointers in hex, a phase per run,
    /// the settings in session.json; version 3: the pointee content of an
    /// entry in hex (trailing zeros left out); all read back exactly.
    #[test]
    fn run_column_hex_pointers_phase_and_settings() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = header();
        let ptr = ValueType::POINTER;
        h.functions[0] = h.functions[0].clone().with_types(ptr, vec![ptr, ValueType::UNKNOWN]);
        let mut w = Writer::create(dir.path(), &h).unwrap();
        let settings =
            Settings { safe: vec!["f*".into()], confidence: 0.99, ..Settings::default() };
        w.set_settings(settings.clone()).unwrap();
        let (mut r, mut rows) = run(3);
        rows[0].args = [0x7ffd_1234, -2, 0];
        rows[1].ret = 0x5555_0000;
        r.calls = calls_from_rows(&rows);
        w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
        let events = fs::read_to_string(dir.path().join("runs/000003/events.csv")).unwrap();
        assert_eq!(
            events,
            "run,t_ns,tid,role,func,function,point,instance,arg0,arg1,arg2,ret,content\n\
             3,5,7,0,0,\"f(int, int)\",entry,1,0x7ffd1234,-2,0,,534b552d37\n\
             3,9,7,0,0,\"f(int, int)\",exit,1,,,,0x55550000,\n"
        );
        let threads = fs::read_to_string(dir.path().join("runs/000003/threads.csv")).unwrap();
        assert_eq!(threads, "run,role,tid,name,parent_role,created_ns\n3,0,7,main,,0\n");
        let loaded = load_full(dir.path()).unwrap();
        assert_eq!(loaded.session.runs, vec![r]);
        assert_eq!(loaded.records[0].phase, Some(RunPhase::Observe));
        assert_eq!(loaded.header.settings, Some(settings));
    }

    /// Pointee content that is all zeros stays apart from none read; a cell
    /// that is not hex, or longer than what a probe reads, is refused.
    #[test]
    fn content_cells() {
        let zeros = crate::model::Content::default();
        assert_eq!(content_cell(&zeros), "00");
        assert_eq!(parse_content("00"), Ok(zeros));
        let mut c = zeros;
        c[..3].copy_from_slice(b"a\0b");
        assert_eq!(content_cell(&c), "610062");
        assert_eq!(parse_content("610062"), Ok(c));
        for bad in ["6", "zz", &"00".repeat(17)] {
            assert!(parse_content(bad).is_err(), "{bad}");
        }
        assert_eq!(event_columns(2).last(), Some(&"ret"));
        assert_eq!(event_columns(1).first(), Some(&"t_ns"));
    }

    /// A version 1 session (no `run` column, decimal pointers, no phase)
    /// is still read.
    #[test]
    fn version_1_sessions_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = header();
        h.version = 1;
        fs::create_dir_all(dir.path().join("runs/000001")).unwrap();
        fs::write(dir.path().join("session.json"), serde_json::to_string(&h).unwrap()).unwrap();
        let events = "t_ns,tid,role,func,function,point,instance,arg0,arg1,arg2,ret\n\
                      5,7,0,0,f,entry,1,140724908732980,-2,3,\n9,7,0,0,f,exit,1,,,,-1\n";
        let threads = "role,tid,name,parent_role,created_ns\n0,7,main,,0\n";
        let file = |name: &str, text: &str| {
            fs::write(dir.path().join("runs/000001").join(name), text).unwrap();
            FileRef {
                path: format!("runs/000001/{name}"),
                rows: 2 - u64::from(name == "threads.csv"),
                sha256: hex(&Sha256::digest(text.as_bytes())),
            }
        };
        let mut record = serde_json::json!({
            "id": 1, "label": "fail", "outcome": {"exit_code": 1, "signal": null,
            "timed_out": false, "wall_ns": 10, "reason": "exit code 1"},
            "lost_events": 0, "complete": true, "end_ns": 12, "start_monotonic_ns": 100,
            "orphan_exits": 0,
        });
        record["events"] = serde_json::to_value(file("events.csv", events)).unwrap();
        record["threads"] = serde_json::to_value(file("threads.csv", threads)).unwrap();
        fs::write(dir.path().join("runs.jsonl"), format!("{record}\n")).unwrap();
        let loaded = load_full(dir.path()).unwrap();
        assert_eq!(loaded.records[0].phase, None);
        let call = &loaded.session.runs[0].calls[0];
        assert_eq!((call.args, call.ret), ([140_724_908_732_980, -2, 3], Some(-1)));
        assert_eq!(loaded.session.runs[0].phase(), RunPhase::Observe);
    }

    #[test]
    fn latest_is_the_newest_session() {
        let root = tempfile::tempdir().unwrap();
        let err = latest(&root.path().join("none")).unwrap_err().to_string();
        assert!(err.starts_with("no session given and none in "), "{err}");
        for (name, created) in [("b", 20), ("a", 30), ("c", 10)] {
            let mut h = header();
            h.created = created;
            Writer::create(&root.path().join(name), &h).unwrap();
        }
        fs::create_dir(root.path().join("not-a-session")).unwrap();
        assert_eq!(latest(root.path()).unwrap(), root.path().join("a"));
    }

    #[test]
    fn utc_stamp_is_right() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_795_000_000), "20261118-110640");
    }
}
