//! Reading a session back, verified: every file a record names lies
//! inside the session directory and has the row count and SHA-256 the
//! record says; a damaged run is skipped with a warning naming it.

use std::{
    fs,
    io::{BufRead as _, BufReader},
    path::Path,
};

use sha2::{Digest as _, Sha256};

use crate::model::{EventRow, Run, Session, Thread, paired_calls};

use super::{lines::*, *};

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
    let text = read_own(&header_path)?;
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
    let file = open_own(&runs_path)?;
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
            calls: paired_calls(&rows, &rec.pauses),
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
pub(super) fn inside(root: &Path, runs_path: &Path, file: &str) -> Result<(), SessionError> {
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
pub(super) fn read_verified<L: serde::de::DeserializeOwned>(
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

pub(super) fn read_events(
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

pub(super) fn read_threads(
    dir: &Path,
    rec: &RunRecord,
    version: u32,
) -> Result<Vec<Thread>, SessionError> {
    let cols = columns(THREAD_COLUMNS, version);
    let lines = read_verified::<ThreadLine>(dir, &rec.threads, rec.id, cols)?;
    Ok(lines.into_iter().map(Thread::from).collect())
}
