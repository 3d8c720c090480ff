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

use std::{
    fs::{self, File, OpenOptions},
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::model::{
    AppliedIntervention, EventRow, FuncId, Function, Label, Noise, Outcome, Pause, Point,
    RecordedRun, Role, Run, Session, Thread, apply_pauses, calls_from_rows,
};

pub const FORMAT: &str = "aid-session";
pub const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{} is not an aid session (no session.json): give the directory written by `aid-agent record`", .0.display())]
    NotASession(PathBuf),
    #[error("{} was written by a newer aid (format version {found}, this one reads {VERSION}): upgrade aid-agent", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("session directory {} already exists and is not empty: choose another --out or remove it", .0.display())]
    Exists(PathBuf),
    #[error("session file {} is corrupt: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("session file {} is missing (run {run}): the session was moved or damaged", path.display())]
    Missing { path: PathBuf, run: u32 },
    #[error("writing {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
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
}

/// One line of `runs.jsonl`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: u32,
    pub label: Label,
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
    runs: File,
    count: usize,
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Write { path: path.to_owned(), source }
}

impl Writer {
    /// Creates `dir` (which must not exist or be empty) and writes the header.
    pub fn create(dir: &Path, header: &Header) -> Result<Writer, SessionError> {
        if dir.exists() && fs::read_dir(dir).map_err(write_err(dir))?.next().is_some() {
            return Err(SessionError::Exists(dir.to_owned()));
        }
        fs::create_dir_all(dir.join("runs")).map_err(write_err(dir))?;
        let header_path = dir.join("session.json");
        let text = serde_json::to_string_pretty(header).expect("header serializes");
        atomic_write(&header_path, text.as_bytes())?;
        let runs_path = dir.join("runs.jsonl");
        let runs = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runs_path)
            .map_err(write_err(&runs_path))?;
        Ok(Writer { dir: dir.to_owned(), runs, count: 0 })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn runs_written(&self) -> usize {
        self.count
    }

    /// Writes a run's files, then its record (the record last, so a record
    /// never points at files that were not completely written).
    pub fn append(
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
            ..
        } = rec;
        let (start_monotonic_ns, orphan_exits) = (*start_monotonic_ns, *orphan_exits);
        let rel = format!("runs/{:06}", run.id);
        let run_dir = self.dir.join(&rel);
        fs::create_dir_all(&run_dir).map_err(write_err(&run_dir))?;
        let events = write_csv(
            &self.dir,
            &format!("{rel}/events.csv"),
            EVENT_COLUMNS,
            rows.iter().map(|r| EventLine::new(r, functions)),
        )?;
        let threads = write_csv(
            &self.dir,
            &format!("{rel}/threads.csv"),
            THREAD_COLUMNS,
            run.threads.iter().map(ThreadLine::from),
        )?;
        for (name, text) in [("stdout.txt", stdout.as_str()), ("stderr.txt", stderr.as_str())] {
            let p = run_dir.join(name);
            fs::write(&p, text).map_err(write_err(&p))?;
        }
        let record = RunRecord {
            id: run.id,
            label: run.label,
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
            events,
            threads,
        };
        let mut line = serde_json::to_string(&record).expect("record serializes");
        line.push('\n');
        let path = self.dir.join("runs.jsonl");
        self.runs.write_all(line.as_bytes()).map_err(write_err(&path))?;
        self.runs.sync_data().map_err(write_err(&path))?;
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
/// exits, the other cells empty.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct EventLine {
    t_ns: u64,
    tid: u32,
    role: Role,
    func: FuncId,
    /// The function's name, for people reading the file.
    function: String,
    point: Point,
    instance: u32,
    arg0: Option<i64>,
    arg1: Option<i64>,
    arg2: Option<i64>,
    ret: Option<i64>,
}

const EVENT_COLUMNS: &[&str] = &[
    "t_ns", "tid", "role", "func", "function", "point", "instance", "arg0", "arg1", "arg2", "ret",
];

impl EventLine {
    fn new(r: &EventRow, functions: &[Function]) -> EventLine {
        let entry = r.point == Point::Entry;
        let arg = |i: usize| entry.then_some(r.args[i]);
        EventLine {
            t_ns: r.t_ns,
            tid: r.tid,
            role: r.role,
            func: r.func,
            function: functions.get(r.func as usize).map(|f| f.name.clone()).unwrap_or_default(),
            point: r.point,
            instance: r.instance,
            arg0: arg(0),
            arg1: arg(1),
            arg2: arg(2),
            ret: (!entry).then_some(r.ret),
        }
    }

    fn row(self) -> Result<EventRow, String> {
        let (args, ret) = match (self.point, self.arg0, self.arg1, self.arg2, self.ret) {
            (Point::Entry, Some(a0), Some(a1), Some(a2), None) => ([a0, a1, a2], 0),
            (Point::Exit, None, None, None, Some(ret)) => ([0; 3], ret),
            _ => {
                return Err(format!(
                    "{:?} at {} ns has the wrong cells filled",
                    self.point, self.t_ns
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
        })
    }
}

/// One line of `threads.csv`.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct ThreadLine {
    role: Role,
    tid: u32,
    name: String,
    parent_role: Option<Role>,
    created_ns: u64,
}

const THREAD_COLUMNS: &[&str] = &["role", "tid", "name", "parent_role", "created_ns"];

impl From<&Thread> for ThreadLine {
    fn from(t: &Thread) -> ThreadLine {
        ThreadLine {
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

/// A session read back: header, run records and the model.
pub struct Loaded {
    pub header: Header,
    pub records: Vec<RunRecord>,
    pub session: Session,
}

/// Reads and verifies a whole session directory.
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
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|source| SessionError::Read { path: runs_path.clone(), source })?;
        if n == 0 {
            break;
        }
        number += 1;
        if !line.ends_with('\n') {
            return Err(SessionError::Corrupt {
                path: runs_path,
                reason: format!(
                    "line {number} is cut short (the recording was interrupted while writing it)"
                ),
            });
        }
        let record: RunRecord = serde_json::from_str(&line).map_err(|e| SessionError::Corrupt {
            path: runs_path.clone(),
            reason: format!("line {number}: {e}"),
        })?;
        records.push(record);
    }
    let mut runs = Vec::with_capacity(records.len());
    for rec in &records {
        let rows = read_events(dir, rec, &header.functions)?;
        let threads = read_threads(dir, rec)?;
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
    }
    let session = Session { functions: header.functions.clone(), runs };
    Ok(Loaded { header, records, session })
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
    functions: &[Function],
) -> Result<Vec<EventRow>, SessionError> {
    let path = dir.join(&rec.events.path);
    let corrupt = |reason: String| SessionError::Corrupt { path: path.clone(), reason };
    read_verified::<EventLine>(dir, &rec.events, rec.id, EVENT_COLUMNS)?
        .into_iter()
        .map(|line| {
            if line.func as usize >= functions.len() {
                return Err(corrupt(format!("function id {} not in session.json", line.func)));
            }
            line.row().map_err(corrupt)
        })
        .collect()
}

fn read_threads(dir: &Path, rec: &RunRecord) -> Result<Vec<Thread>, SessionError> {
    let lines = read_verified::<ThreadLine>(dir, &rec.threads, rec.id, THREAD_COLUMNS)?;
    Ok(lines.into_iter().map(Thread::from).collect())
}

/// A default session directory name: `aid-sessions/<UTC time>-<program>`.
pub fn default_dir(program: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name =
        program.file_name().map_or_else(|| "target".into(), |n| n.to_string_lossy().into_owned());
    PathBuf::from("aid-sessions").join(format!("{}-{name}", utc_stamp(secs)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        testing::{self, function, thread},
    };

    fn header() -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            tool: "test".into(),
            created: 0,
            mode: Mode::Record,
            program: "/bin/x".into(),
            command: vec!["x".into()],
            pid: None,
            unit: None,
            fail_rules: vec![],
            functions: vec![
                function(0, "f(int, int)").with_symbol("_Z1fii").in_module("/bin/x", 0x1000),
            ],
        }
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

    #[test]
    fn truncated_events_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let h = header();
        let mut w = Writer::create(dir.path(), &h).unwrap();
        let (r, rows) = run(1);
        w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
        let events = dir.path().join("runs/000001/events.csv");
        let text = fs::read_to_string(&events).unwrap();
        fs::write(&events, &text[..text.len() - 3]).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("events.csv is corrupt: checksum mismatch"), "{err}");
    }

    #[test]
    fn cut_short_run_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let h = header();
        let mut w = Writer::create(dir.path(), &h).unwrap();
        let (r, rows) = run(1);
        w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
        let runs = dir.path().join("runs.jsonl");
        let text = fs::read_to_string(&runs).unwrap();
        fs::write(&runs, &text[..text.len() - 10]).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("line 1 is cut short"), "{err}");
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
        assert_eq!(header(&EventLine::new(&rows[0], &[])), EVENT_COLUMNS.join(","));
        assert_eq!(header(&ThreadLine::from(&r.threads[0])), THREAD_COLUMNS.join(","));
    }

    #[test]
    fn utc_stamp_is_right() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_795_000_000), "20261118-110640");
    }
}
