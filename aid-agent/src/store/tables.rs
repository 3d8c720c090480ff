//! The session's rows as Parquet tables, for DuckDB, pandas and
//! DataFusion: each run's events and threads, the CSV files' columns with
//! a `host` column after `run`, written when the run ends through
//! `object_store`. By default they go to the session directory
//! (`parquet/events/<host>-run-NNNNNN.parquet`, and `threads/` alike);
//! `--store DIR` puts them in `DIR/<session name>/` instead, and
//! `--store s3://BUCKET/PREFIX` in `PREFIX/<session name>/` of an S3
//! bucket (cargo feature `s3`, on by default), where the sessions of many
//! hosts that share a name make one table.
//!
//! The CSV files stay what aid itself reads: these tables are a copy for
//! other tools, written with the same cells (pointers in hex). A run's
//! object is created only if absent, so no run is ever stored twice.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use object_store::{
    ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, local::LocalFileSystem,
    path::Path as Key,
};
use parquet::{
    basic::Compression,
    data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type},
    errors::ParquetError,
    file::{properties::WriterProperties, writer::SerializedFileWriter},
    schema::parser::parse_message_type,
};

use super::{
    SessionError,
    lines::{EventLine, ThreadLine},
    owner::hand_over,
    private_dir, write_err,
};

/// Where the Parquet tables go (`--store`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Destination {
    /// `parquet/` in the session directory.
    #[default]
    Session,
    /// `<dir>/<session name>/`: a local directory (`--store DIR` or
    /// `--store file:///DIR`).
    Dir(PathBuf),
    /// `<prefix>/<session name>/` in an S3 bucket (`--store
    /// s3://BUCKET/PREFIX`): the endpoint, region and credentials come
    /// from the `AWS_*` variables of the environment, as for AWS's own
    /// tools (`AWS_ENDPOINT_URL` for another S3-compatible server,
    /// `AWS_ALLOW_HTTP=true` for one without TLS).
    S3 { bucket: String, prefix: String },
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("--store is empty: give a directory or a file:// URL")]
    Empty,
    #[error(
        "--store {0}: this aid-agent was built without S3 (cargo feature `s3`): give a directory (a mounted bucket works), or build it with `--features s3`"
    )]
    S3(String),
    #[error("--store {0}: name a bucket: s3://BUCKET or s3://BUCKET/PREFIX")]
    NoBucket(String),
    #[error("--store {0}: unknown URL scheme: give a directory or a file:///absolute/path URL")]
    Scheme(String),
    #[error("--store {0}: a file:// URL needs an absolute path (file:///data/aid)")]
    Relative(String),
}

impl Destination {
    /// Reads `--store`: a local path, `file:///path` or
    /// `s3://bucket/prefix` (refused when built without S3); any other
    /// scheme is refused.
    pub fn parse(text: &str) -> Result<Destination, StoreError> {
        if text.is_empty() {
            return Err(StoreError::Empty);
        }
        match text.split_once("://") {
            None => Ok(Destination::Dir(text.into())),
            Some(("file", path)) if path.starts_with('/') => Ok(Destination::Dir(path.into())),
            Some(("file", _)) => Err(StoreError::Relative(text.to_owned())),
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("s3") && !cfg!(feature = "s3") => {
                Err(StoreError::S3(text.to_owned()))
            }
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("s3") => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(StoreError::NoBucket(text.to_owned()));
                }
                let prefix = prefix.trim_matches('/').to_owned();
                Ok(Destination::S3 { bucket: bucket.to_owned(), prefix })
            }
            Some(_) => Err(StoreError::Scheme(text.to_owned())),
        }
    }

    /// Where the tables of session `session` go: the local directory, or
    /// the bucket's `s3://BUCKET` (for messages), and the key prefix
    /// under it.
    fn root(&self, session: &Path) -> (PathBuf, String) {
        let name = || {
            session
                .file_name()
                .map_or_else(|| "session".to_owned(), |n| n.to_string_lossy().into_owned())
        };
        match self {
            Destination::Session => (session.to_owned(), "parquet".to_owned()),
            Destination::Dir(dir) => (dir.clone(), name()),
            Destination::S3 { bucket, prefix } if prefix.is_empty() => {
                (PathBuf::from(format!("s3://{bucket}")), name())
            }
            Destination::S3 { bucket, prefix } => {
                (PathBuf::from(format!("s3://{bucket}")), format!("{prefix}/{}", name()))
            }
        }
    }
}

/// Retries of an S3 request that failed for want of an answer (a refusal,
/// as a missing bucket, is not retried).
#[cfg(feature = "s3")]
const S3_RETRIES: usize = 3;

/// The longest an S3 request is retried for.
#[cfg(feature = "s3")]
const S3_RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// The bucket of `--store s3://BUCKET/…`, its endpoint, region and
/// credentials from the environment (`AWS_*`).
#[cfg(feature = "s3")]
fn s3_store(bucket: &str) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
    // The HTTP client's TLS takes its cryptography from the process's
    // default: ring, which the NATS client links too. Installed once; a
    // second call finds it there.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A run's tables are written as it ends: a server that does not
    // answer is given a few seconds, not the client's three minutes.
    let retry = object_store::RetryConfig {
        max_retries: S3_RETRIES,
        retry_timeout: S3_RETRY_TIMEOUT,
        ..object_store::RetryConfig::default()
    };
    let store = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(retry)
        .build()?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "s3"))]
fn s3_store(_bucket: &str) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
    Err(object_store::Error::NotImplemented {
        operation: "S3".into(),
        implementer: "aid-agent".into(),
    })
}

/// Writes each run's tables to its [`Destination`].
pub struct Tables {
    store: Arc<dyn ObjectStore>,
    /// The store's local directory, where the tables' files are; for a
    /// bucket, `s3://BUCKET`, to name its objects.
    root: PathBuf,
    /// The files are local: made private, and given to `sudo`'s user.
    local: bool,
    prefix: String,
    host: String,
    /// `object_store` is asynchronous: its calls are run to completion
    /// here ([`Tables::block_on`]). An `Option` only so that [`Drop`] can
    /// shut it down without blocking.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Tables {
    /// A live session drops its writer on the thread that drives its own
    /// runtime, where a blocking shutdown would panic.
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The table a run's rows go to.
#[derive(Clone, Copy, Debug)]
pub(super) enum Table {
    Events,
    Threads,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Events => "events",
            Table::Threads => "threads",
        }
    }
}

impl Tables {
    /// Makes the directories of the tables of `session` (0700) and opens
    /// the store: done before any run, so an unusable `--store` is found
    /// first.
    pub fn open(dest: &Destination, session: &Path) -> Result<Tables, SessionError> {
        let (root, prefix) = dest.root(session);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(write_err(&root))?;
        let (store, local) = match dest {
            Destination::S3 { bucket, .. } => {
                (s3_store(bucket).map_err(|e| bucket_err(&root, &e))?, false)
            }
            _ => {
                // The session's own directories are private; `--store`
                // itself may be shared and keeps its mode.
                for table in [Table::Events, Table::Threads] {
                    private_dir(&root.join(&prefix).join(table.name()))?;
                }
                let store =
                    LocalFileSystem::new_with_prefix(&root).map_err(|e| store_err(&root, &e))?;
                (Arc::new(store) as Arc<dyn ObjectStore>, true)
            }
        };
        Ok(Tables { store, root, local, prefix, host: host_name(), runtime: Some(runtime) })
    }

    /// A bucket answers, and lets these credentials list the session's
    /// prefix: an unusable `--store` is found before any run ([`prepare`],
    /// once a session).
    ///
    /// [`prepare`]: super::prepare
    pub(super) fn check(&self) -> Result<(), SessionError> {
        let prefix = Key::from(self.prefix.as_str());
        let place = self.root.join(&self.prefix);
        match self.block_on(self.store.list_with_delimiter(Some(&prefix)))? {
            Ok(_) => Ok(()),
            Err(e) => Err(bucket_err(&place, &e)),
        }
    }

    #[cfg(test)]
    fn host(&self) -> &str {
        &self.host
    }

    /// The host a run was made on: `made_on`, else this one.
    fn host_of<'a>(&'a self, made_on: Option<&'a str>) -> &'a str {
        made_on.unwrap_or(&self.host)
    }

    /// The key of `run`'s file of `table`: `<prefix>/<table>/<host>-run-NNNNNN.parquet`.
    fn key(&self, table: Table, run: u32, made_on: Option<&str>) -> String {
        let host = self.host_of(made_on);
        format!("{}/{}/{host}-run-{run:06}.parquet", self.prefix, table.name())
    }

    /// The local file of `run`'s table.
    pub(super) fn file(&self, table: Table, run: u32, made_on: Option<&str>) -> PathBuf {
        self.root.join(self.key(table, run, made_on))
    }

    /// Stores `run`'s events and threads, made on host `made_on` (None:
    /// this one); refuses a run already stored.
    pub(super) fn put_run(
        &self,
        run: u32,
        made_on: Option<&str>,
        events: &EventColumns,
        threads: &ThreadColumns,
    ) -> Result<(), SessionError> {
        let host = self.host_of(made_on);
        self.put(Table::Events, run, made_on, events_parquet(run, host, events))?;
        self.put(Table::Threads, run, made_on, threads_parquet(run, host, threads))
    }

    /// Removes what [`Tables::put_run`] wrote of `run` (a run that could
    /// not be stored whole).
    pub(super) fn remove_run(&self, run: u32, made_on: Option<&str>) {
        for table in [Table::Events, Table::Threads] {
            let key = Key::from(self.key(table, run, made_on));
            let _ = self.block_on(self.store.delete(&key));
        }
    }

    /// Runs `f` to completion. A live session (`attach`, `debug -p`)
    /// stores its runs from the thread that drives its own tokio runtime,
    /// where blocking on another would panic: there it runs on a thread
    /// of its own, waited for.
    fn block_on<F>(&self, f: F) -> Result<F::Output, SessionError>
    where
        F: Future + Send,
        F::Output: Send,
    {
        let Some(rt) = &self.runtime else {
            return Err(SessionError::Write {
                path: self.root.clone(),
                source: std::io::Error::other("the table writer was shut down"),
            });
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return Ok(rt.block_on(f));
        }
        Ok(std::thread::scope(|s| s.spawn(|| rt.block_on(f)).join())
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    }

    fn put(
        &self,
        table: Table,
        run: u32,
        made_on: Option<&str>,
        bytes: Result<Vec<u8>, ParquetError>,
    ) -> Result<(), SessionError> {
        let file = self.file(table, run, made_on);
        let bytes = bytes.map_err(|e| SessionError::Write {
            path: file.clone(),
            source: std::io::Error::other(e),
        })?;
        let key = Key::from(self.key(table, run, made_on));
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        match self.block_on(self.store.put_opts(&key, bytes.into(), opts))? {
            Ok(_) => {
                if self.local {
                    hand_over(&file);
                }
                Ok(())
            }
            Err(object_store::Error::AlreadyExists { .. }) => Err(SessionError::Duplicate {
                path: file,
                run,
                host: self.host_of(made_on).to_owned(),
            }),
            Err(e) if self.local => Err(store_err(&file, &e)),
            Err(e) => Err(bucket_err(&file, &e)),
        }
    }
}

/// An S3 error in a line: the status and S3's code of what the server
/// answered (`404 Not Found (NoSuchBucket)`), or, when it did not
/// answer, what the network said (`Connection refused`).
fn bucket_err(url: &Path, e: &object_store::Error) -> SessionError {
    let text = e.to_string();
    const STATUS: &str = "status code: ";
    let reason = if let Some(at) = text.find(STATUS) {
        let rest = &text[at + STATUS.len()..];
        let status = rest.split(':').next().unwrap_or(rest).trim();
        match text.split("<Code>").nth(1).and_then(|c| c.split("</Code>").next()) {
            Some(code) => format!("the server answered {status} ({code})"),
            None => format!("the server answered {status}"),
        }
    } else {
        let mut cause: &(dyn std::error::Error + 'static) = e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        cause.to_string()
    };
    SessionError::Bucket { url: url.display().to_string(), reason }
}

/// An `object_store` error as a write error: the operating system's error
/// when one caused it (so that a full disk says so, with its hint).
fn store_err(path: &Path, e: &object_store::Error) -> SessionError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let os = std::iter::from_fn(|| {
        let this = cause?;
        cause = this.source();
        Some(this)
    })
    .find_map(|c| c.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error));
    let source = match os {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::other(e.to_string()),
    };
    SessionError::Write { path: path.to_owned(), source }
}

/// This machine's name as the `host` column holds it ([`safe_host`]).
pub fn host_name() -> String {
    let name = nix::unistd::gethostname()
        .map_or_else(|_| "localhost".to_owned(), |n| n.to_string_lossy().into_owned());
    safe_host(&name)
}

/// A host's name with anything but letters, digits, `.`, `-` and `_`
/// made `_`, so that it is safe in a file name (a leading `.` too: no
/// `..`).
pub fn safe_host(name: &str) -> String {
    let name: String = name
        .chars()
        .enumerate()
        .map(|(i, c)| {
            let kept = c.is_ascii_alphanumeric() || "-_".contains(c) || (c == '.' && i > 0);
            if kept { c } else { '_' }
        })
        .collect();
    if name.is_empty() { "localhost".to_owned() } else { name }
}

/// The columns of events.csv, `host` after `run`; unsigned integers are
/// stored as such, the other cells as the CSV text.
const EVENTS_SCHEMA: &str = "message events {
    required int32 run (INTEGER(32, false));
    required binary host (STRING);
    required int64 t_ns (INTEGER(64, false));
    required int32 tid (INTEGER(32, false));
    required int32 role (INTEGER(32, false));
    required int32 func (INTEGER(32, false));
    required binary function (STRING);
    required binary point (STRING);
    required int32 instance (INTEGER(32, false));
    optional binary arg0 (STRING);
    optional binary arg1 (STRING);
    optional binary arg2 (STRING);
    optional binary ret (STRING);
    optional binary content (STRING);
}";

/// The columns of threads.csv, `host` after `run`.
const THREADS_SCHEMA: &str = "message threads {
    required int32 run (INTEGER(32, false));
    required binary host (STRING);
    required int32 role (INTEGER(32, false));
    required int32 tid (INTEGER(32, false));
    required binary name (STRING);
    optional int32 parent_role (INTEGER(32, false));
    required int64 created_ns (INTEGER(64, false));
}";

/// A text column as it is gathered: the cells' bytes one after another,
/// where each ends, and which are null (one allocation, not one per cell:
/// a run can have a million rows).
#[derive(Default)]
struct Text {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    present: Vec<bool>,
}

impl Text {
    fn push(&mut self, cell: Option<&str>) {
        if let Some(cell) = cell {
            self.bytes.extend_from_slice(cell.as_bytes());
        }
        self.ends.push(self.bytes.len());
        self.present.push(cell.is_some());
    }

    /// Rows `rows` as Parquet values (nulls left out) and definition
    /// levels (1 for a value, 0 for a null).
    fn chunk(&self, rows: std::ops::Range<usize>) -> (Vec<ByteArray>, Vec<i16>) {
        let mut values = Vec::with_capacity(rows.len());
        let mut start = rows.start.checked_sub(1).map_or(0, |i| self.ends[i]);
        for i in rows.clone() {
            if self.present[i] {
                values.push(ByteArray::from(self.bytes[start..self.ends[i]].to_vec()));
            }
            start = self.ends[i];
        }
        (values, self.present[rows].iter().map(|&p| i16::from(p)).collect())
    }
}

/// A run's events.csv lines as columns.
#[derive(Default)]
pub(super) struct EventColumns {
    t_ns: Vec<u64>,
    tid: Vec<u32>,
    role: Vec<u32>,
    func: Vec<u32>,
    function: Text,
    point: Text,
    instance: Vec<u32>,
    args: [Text; 3],
    ret: Text,
    content: Text,
}

impl EventColumns {
    pub(super) fn push(&mut self, l: &EventLine) {
        self.t_ns.push(l.t_ns);
        self.tid.push(l.tid);
        self.role.push(l.role);
        self.func.push(l.func);
        self.function.push(Some(&l.function));
        self.point.push(Some(match l.point {
            crate::model::Point::Entry => "entry",
            crate::model::Point::Exit => "exit",
        }));
        self.instance.push(l.instance);
        for (column, cell) in self.args.iter_mut().zip([&l.arg0, &l.arg1, &l.arg2]) {
            column.push(cell.as_deref());
        }
        self.ret.push(l.ret.as_deref());
        self.content.push(l.content.as_deref());
    }
}

/// A run's threads.csv lines as columns.
#[derive(Default)]
pub(super) struct ThreadColumns {
    role: Vec<u32>,
    tid: Vec<u32>,
    name: Text,
    parent_role: Vec<Option<u32>>,
    created_ns: Vec<u64>,
}

impl ThreadColumns {
    pub(super) fn push(&mut self, l: &ThreadLine) {
        self.role.push(l.role);
        self.tid.push(l.tid);
        self.name.push(Some(&l.name));
        self.parent_role.push(l.parent_role);
        self.created_ns.push(l.created_ns);
    }
}

/// One column's values, in schema order.
enum Column<'a> {
    U32(&'a [u32]),
    OptU32(&'a [Option<u32>]),
    U64(&'a [u64]),
    Text(&'a Text),
    /// The same text in every row (`host`).
    Same(&'a str),
}

fn events_parquet(run: u32, host: &str, c: &EventColumns) -> Result<Vec<u8>, ParquetError> {
    let runs = vec![run; c.t_ns.len()];
    let [a0, a1, a2] = &c.args;
    to_parquet(
        EVENTS_SCHEMA,
        c.t_ns.len(),
        &[
            Column::U32(&runs),
            Column::Same(host),
            Column::U64(&c.t_ns),
            Column::U32(&c.tid),
            Column::U32(&c.role),
            Column::U32(&c.func),
            Column::Text(&c.function),
            Column::Text(&c.point),
            Column::U32(&c.instance),
            Column::Text(a0),
            Column::Text(a1),
            Column::Text(a2),
            Column::Text(&c.ret),
            Column::Text(&c.content),
        ],
    )
}

fn threads_parquet(run: u32, host: &str, c: &ThreadColumns) -> Result<Vec<u8>, ParquetError> {
    let runs = vec![run; c.tid.len()];
    to_parquet(
        THREADS_SCHEMA,
        c.tid.len(),
        &[
            Column::U32(&runs),
            Column::Same(host),
            Column::U32(&c.role),
            Column::U32(&c.tid),
            Column::Text(&c.name),
            Column::OptU32(&c.parent_role),
            Column::U64(&c.created_ns),
        ],
    )
}

/// Parquet's unsigned integers are stored in its signed physical types,
/// bit for bit.
fn bits32(v: u32) -> i32 {
    i32::from_ne_bytes(v.to_ne_bytes())
}

fn bits64(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

/// Rows handed to the column writer at a time: text cells are made into
/// Parquet values this many at once.
const CHUNK: usize = 8192;

/// One Parquet file (one row group, Snappy) of the `rows` rows of
/// `columns`, which follow `schema`.
fn to_parquet(schema: &str, rows: usize, columns: &[Column<'_>]) -> Result<Vec<u8>, ParquetError> {
    let schema = Arc::new(parse_message_type(schema)?);
    let props = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
    let mut out = Vec::new();
    let mut file = SerializedFileWriter::new(&mut out, schema, props)?;
    let mut group = file.next_row_group()?;
    for column in columns {
        let mut w = group
            .next_column()?
            .ok_or_else(|| ParquetError::General("more columns than the schema has".into()))?;
        match *column {
            Column::U32(v) => {
                let v: Vec<i32> = v.iter().copied().map(bits32).collect();
                w.typed::<Int32Type>().write_batch(&v, None, None)?;
            }
            Column::OptU32(v) => {
                let defs: Vec<i16> = v.iter().map(|c| i16::from(c.is_some())).collect();
                let v: Vec<i32> = v.iter().flatten().copied().map(bits32).collect();
                w.typed::<Int32Type>().write_batch(&v, Some(&defs), None)?;
            }
            Column::U64(v) => {
                let v: Vec<i64> = v.iter().copied().map(bits64).collect();
                w.typed::<Int64Type>().write_batch(&v, None, None)?;
            }
            Column::Text(text) => {
                for start in (0..rows).step_by(CHUNK) {
                    let (values, defs) = text.chunk(start..rows.min(start + CHUNK));
                    w.typed::<ByteArrayType>().write_batch(&values, Some(&defs), None)?;
                }
            }
            Column::Same(text) => {
                let value = ByteArray::from(text.as_bytes().to_vec());
                for start in (0..rows).step_by(CHUNK) {
                    let values = vec![value.clone(); rows.min(start + CHUNK) - start];
                    w.typed::<ByteArrayType>().write_batch(&values, None, None)?;
                }
            }
        }
        w.close()?;
    }
    group.close()?;
    file.close()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use parquet::file::reader::{FileReader as _, SerializedFileReader};

    use super::*;
    use crate::model::{Point, Thread};

    /// Every row of a Parquet file, as `(column, value)` text.
    fn rows(path: &Path) -> Vec<String> {
        let file = std::fs::File::open(path).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        reader.get_row_iter(None).unwrap().map(|r| r.unwrap().to_string()).collect()
    }

    fn line(t_ns: u64, point: Point, args: Option<[&str; 3]>, ret: Option<&str>) -> EventLine {
        let arg = |i: usize| args.map(|a| a[i].to_owned());
        EventLine {
            run: Some(7),
            t_ns,
            tid: 4242,
            role: 1,
            func: 3,
            function: "use_cache".into(),
            point,
            instance: 2,
            arg0: arg(0),
            arg1: arg(1),
            arg2: arg(2),
            ret: ret.map(str::to_owned),
            content: (point == Point::Entry).then(|| "42524721".to_owned()),
        }
    }

    #[test]
    fn a_run_is_stored_with_its_run_and_host_once() {
        let tmp = tempfile::tempdir().unwrap();
        let session = tmp.path().join("s");
        let tables = Tables::open(&Destination::Session, &session).unwrap();
        let events = [
            line(1_000, Point::Entry, Some(["0x7f0000001000", "-2", "0"]), None),
            line(u64::MAX, Point::Exit, None, Some("4")),
            line(3_000, Point::Exit, None, None),
        ];
        let thread = |role, parent| Thread {
            role,
            tid: 4000 + role,
            name: if role == 0 { "main".into() } else { "worker".into() },
            parent,
            created_ns: 10 * u64::from(role),
        };
        let mut event_columns = EventColumns::default();
        for l in &events {
            event_columns.push(l);
        }
        let mut threads = ThreadColumns::default();
        for t in [thread(0, None), thread(1, Some(0))] {
            threads.push(&ThreadLine::new(7, &t));
        }
        tables.put_run(7, None, &event_columns, &threads).unwrap();
        let host = tables.host().to_owned();
        let file = session.join(format!("parquet/events/{host}-run-000007.parquet"));
        assert_eq!(tables.file(Table::Events, 7, None), file);
        let h = format!("host: \"{host}\"");
        assert_eq!(
            rows(&file),
            [
                format!(
                    "{{run: 7, {h}, t_ns: 1000, tid: 4242, role: 1, func: 3, function: \"use_cache\", point: \"entry\", instance: 2, arg0: \"0x7f0000001000\", arg1: \"-2\", arg2: \"0\", ret: null, content: \"42524721\"}}"
                ),
                format!(
                    "{{run: 7, {h}, t_ns: 18446744073709551615, tid: 4242, role: 1, func: 3, function: \"use_cache\", point: \"exit\", instance: 2, arg0: null, arg1: null, arg2: null, ret: \"4\", content: null}}"
                ),
                format!(
                    "{{run: 7, {h}, t_ns: 3000, tid: 4242, role: 1, func: 3, function: \"use_cache\", point: \"exit\", instance: 2, arg0: null, arg1: null, arg2: null, ret: null, content: null}}"
                ),
            ]
        );
        assert_eq!(
            rows(&session.join(format!("parquet/threads/{host}-run-000007.parquet"))),
            [
                format!(
                    "{{run: 7, {h}, role: 0, tid: 4000, name: \"main\", parent_role: null, created_ns: 0}}"
                ),
                format!(
                    "{{run: 7, {h}, role: 1, tid: 4001, name: \"worker\", parent_role: 0, created_ns: 10}}"
                ),
            ]
        );
        // A second copy of run 7 is refused, and the first stays whole.
        let mut one = EventColumns::default();
        one.push(&events[0]);
        let err = tables.put_run(7, None, &one, &threads).unwrap_err();
        assert!(matches!(err, SessionError::Duplicate { run: 7, .. }), "{err}");
        assert_eq!(rows(&file).len(), 3);
        tables.remove_run(7, None);
        assert!(!file.exists());
    }

    /// A full disk under `object_store` says so, with the hint to free
    /// space, as the CSV files' writes do.
    #[test]
    fn a_full_disk_in_the_store_is_named() {
        let e = object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(std::io::Error::from_raw_os_error(libc::ENOSPC)),
        };
        assert_eq!(
            store_err(Path::new("/s/t.parquet"), &e).to_string(),
            "cannot write /s/t.parquet: No space left on device (os error 28): free space, or choose another --out"
        );
    }

    #[test]
    fn store_is_a_directory_or_a_file_url() {
        assert_eq!(Destination::parse("out/t"), Ok(Destination::Dir("out/t".into())));
        assert_eq!(
            Destination::parse("file:///data/aid"),
            Ok(Destination::Dir("/data/aid".into()))
        );
        for (text, message) in [
            ("", "--store is empty: give a directory or a file:// URL"),
            (
                "file://data",
                "--store file://data: a file:// URL needs an absolute path (file:///data/aid)",
            ),
            (
                "gs://b/p",
                "--store gs://b/p: unknown URL scheme: give a directory or a file:///absolute/path URL",
            ),
        ] {
            assert_eq!(Destination::parse(text).unwrap_err().to_string(), message);
        }
        let s3 = |bucket: &str, prefix: &str| {
            Ok(Destination::S3 { bucket: bucket.into(), prefix: prefix.into() })
        };
        if cfg!(feature = "s3") {
            assert_eq!(Destination::parse("s3://b/lake/aid/"), s3("b", "lake/aid"));
            assert_eq!(Destination::parse("S3://b"), s3("b", ""));
            assert_eq!(
                Destination::parse("s3:///p").unwrap_err().to_string(),
                "--store s3:///p: name a bucket: s3://BUCKET or s3://BUCKET/PREFIX"
            );
        } else {
            let said = Destination::parse("s3://b/p").unwrap_err().to_string();
            assert!(
                said.starts_with("--store s3://b/p: this aid-agent was built without S3"),
                "{said}"
            );
        }
    }

    /// In a bucket, a session's tables are under the prefix and the
    /// session's name; messages name them by URL.
    #[test]
    fn a_bucket_holds_the_session_by_name_under_its_prefix() {
        let session = Path::new("aid-sessions/20260101-000000-x");
        let dest = Destination::S3 { bucket: "b".into(), prefix: "lake".into() };
        assert_eq!(dest.root(session), ("s3://b".into(), "lake/20260101-000000-x".into()));
        let dest = Destination::S3 { bucket: "b".into(), prefix: String::new() };
        assert_eq!(dest.root(session), ("s3://b".into(), "20260101-000000-x".into()));
    }

    #[test]
    fn store_dir_holds_the_session_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = Destination::Dir(tmp.path().join("lake"));
        let tables = Tables::open(&dest, Path::new("aid-sessions/20260101-000000-x")).unwrap();
        tables.put_run(1, None, &EventColumns::default(), &ThreadColumns::default()).unwrap();
        let host = tables.host().to_owned();
        let file =
            tmp.path().join(format!("lake/20260101-000000-x/threads/{host}-run-000001.parquet"));
        assert!(rows(&file).is_empty());
    }
}
