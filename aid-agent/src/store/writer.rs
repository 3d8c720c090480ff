//! Writing a session: the directory (created 0700), the header, each
//! run's CSV files with their row counts and SHA-256, its Parquet tables
//! (`tables.rs`), and the run record appended to `runs.jsonl` when the
//! run ends.

use std::{
    fs::{self, File, OpenOptions},
    io::Write as _,
    path::{Path, PathBuf},
};

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::model::{Function, RecordedRun};

use super::{
    lines::*,
    tables::{Destination, EventColumns, Tables, ThreadColumns},
    *,
};

/// Appends runs to a new session directory.
pub struct Writer {
    dir: PathBuf,
    header: Header,
    runs: File,
    tables: Tables,
    count: usize,
    /// When `runs.jsonl` last reached the disk.
    synced: Option<std::time::Instant>,
}

/// `runs.jsonl` reaches the disk at most this long after a run's record:
/// a service's units come every few milliseconds, and waiting for the
/// disk after each one made the agent fall behind the event stream
/// (issue 12). A record is in the page cache at once, so an agent that is
/// killed loses nothing; only a machine crash can lose this much.
pub(super) const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.runs.sync_data();
    }
}

/// Creates the session directory `dir` (mode 0700, with any missing
/// parents), which must not exist or be empty, and checks that files can be
/// created in it and in the directory of `store` (made 0700 if missing; one
/// that exists may be shared, and keeps its mode), or that `store`'s bucket
/// answers: done before any probe is attached, so that an unusable `--out`
/// or `--store` is found first.
pub fn prepare(dir: &Path, store: &Destination) -> Result<(), SessionError> {
    use std::os::unix::fs::DirBuilderExt as _;
    if dir.exists() && fs::read_dir(dir).map_err(write_err(dir))?.next().is_some() {
        return Err(SessionError::Exists(dir.to_owned()));
    }
    private_dir(dir)?;
    let mut dirs = vec![dir];
    if let Destination::Dir(store) = store {
        create_dirs(store, |d| fs::DirBuilder::new().recursive(true).mode(0o700).create(d))?;
        dirs.push(store);
    }
    for dir in dirs {
        // An unnamed file: nothing is left behind.
        tempfile::tempfile_in(dir).map_err(write_err(dir))?;
    }
    if let Destination::S3 { .. } = store {
        // The bucket answers and lets these credentials in.
        Tables::open(store, dir)?.check()?;
    }
    Ok(())
}

impl Writer {
    /// Creates `dir` (which must not exist or be empty; see [`prepare`])
    /// and writes the header; the runs' Parquet tables go to `dir` too.
    pub fn create(dir: &Path, header: &Header) -> Result<Writer, SessionError> {
        Writer::create_with(dir, header, &Destination::Session)
    }

    /// [`Writer::create`], the runs' Parquet tables to `store`.
    pub fn create_with(
        dir: &Path,
        header: &Header,
        store: &Destination,
    ) -> Result<Writer, SessionError> {
        if dir.exists() && fs::read_dir(dir).map_err(write_err(dir))?.next().is_some() {
            return Err(SessionError::Exists(dir.to_owned()));
        }
        private_dir(dir)?;
        private_dir(&dir.join("runs"))?;
        write_header(dir, header)?;
        let runs_path = dir.join("runs.jsonl");
        let runs = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runs_path)
            .map_err(write_err(&runs_path))?;
        hand_over(&runs_path);
        let tables = Tables::open(store, dir)?;
        Ok(Writer {
            dir: dir.to_owned(),
            header: header.clone(),
            runs,
            tables,
            count: 0,
            synced: None,
        })
    }

    /// Stores the analysis settings in `session.json` (rewritten whole,
    /// atomically).
    pub fn set_settings(&mut self, settings: Settings) -> Result<(), SessionError> {
        self.header.settings = Some(settings);
        write_header(&self.dir, &self.header)
    }

    /// Records in `session.json` that the runs are made `n` at a time
    /// (`--jobs`; rewritten whole, atomically).
    pub fn set_jobs(&mut self, n: u32) -> Result<(), SessionError> {
        self.header.jobs = Some(n);
        write_header(&self.dir, &self.header)
    }

    /// Records which fleet made the observed runs (`debug --fleet`).
    pub fn set_fleet(&mut self, fleet: FleetMark) -> Result<(), SessionError> {
        self.header.fleet = Some(fleet);
        write_header(&self.dir, &self.header)
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
            // Not a run stored earlier under this id (refused as a
            // duplicate): that one stays.
            if !matches!(result, Err(SessionError::Duplicate { .. })) {
                self.tables.remove_run(rec.run.id, rec.host.as_deref());
            }
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
            hang,
            ..
        } = rec;
        let (start_monotonic_ns, orphan_exits) = (*start_monotonic_ns, *orphan_exits);
        let rel = format!("runs/{:06}", run.id);
        let run_dir = self.dir.join(&rel);
        private_dir(&run_dir)?;
        // The Parquet tables get the very cells the CSV files get.
        let mut event_columns = EventColumns::default();
        let events = write_csv(
            &self.dir,
            &format!("{rel}/events.csv"),
            EVENT_COLUMNS,
            rows.iter()
                .map(|r| EventLine::new(run.id, r, functions))
                .inspect(|l| event_columns.push(l)),
        )?;
        let mut thread_columns = ThreadColumns::default();
        let threads = write_csv(
            &self.dir,
            &format!("{rel}/threads.csv"),
            THREAD_COLUMNS,
            run.threads
                .iter()
                .map(|t| ThreadLine::new(run.id, t))
                .inspect(|l| thread_columns.push(l)),
        )?;
        self.tables.put_run(run.id, rec.host.as_deref(), &event_columns, &thread_columns)?;
        for (name, text) in [("stdout.txt", stdout.as_str()), ("stderr.txt", stderr.as_str())] {
            // A live session's unit has no output of its own (the service
            // writes where it always did): two empty files a unit were a
            // third of what the busy service's 400 units a second made
            // the agent create (BENCHMARKS.md "Live sessions").
            if self.header.pid.is_some() && text.is_empty() {
                continue;
            }
            let p = run_dir.join(name);
            fs::write(&p, text).map_err(write_err(&p))?;
            hand_over(&p);
        }
        let record = RunRecord {
            host: rec.host.clone(),
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
            hang: hang.clone(),
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

pub(super) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).map_err(write_err(&tmp))?;
    hand_over(&tmp);
    fs::rename(&tmp, path).map_err(write_err(path))
}

/// Writes a CSV file (the header, then one line per item) and returns its
/// reference (rows, SHA-256).
pub(super) fn write_csv<L: Serialize>(
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
    hand_over(&path);
    Ok(FileRef { path: rel.to_owned(), rows: count, sha256 })
}

/// Writes `session.json` in `dir`, whole and atomically: at creation, and
/// each time the header gains something.
fn write_header(dir: &Path, header: &Header) -> Result<(), SessionError> {
    let text = serde_json::to_string_pretty(header).expect("header serializes");
    atomic_write(&dir.join("session.json"), text.as_bytes())
}
