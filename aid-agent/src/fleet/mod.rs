//! A fleet of hosts making a session's runs, on NATS JetStream: workers
//! (`aid-agent worker --connect URL`, [`worker`]) take batches of runs
//! from a work queue, make them with their own eBPF probes and send each
//! run back; the coordinator (`debug --fleet URL`, [`coordinator`])
//! keeps the analysis and sends the batches.
//!
//! What is on the server (docs/fleet.md draws it):
//! - the stream `AID_WORK` (work-queue retention, subjects
//!   `aid.work.<session>`), read by all workers through one durable pull
//!   consumer: each batch goes to one worker, which acknowledges it once
//!   every run of it has been reported. One not acknowledged within
//!   [`ACK_WAIT`] (a worker killed mid-batch) is delivered again, to
//!   another worker.
//! - the stream `AID_RESULTS` (subjects `aid.results.<session>`): one
//!   report per run made, in parts of at most the server's message size.
//!   A run carries its number: a redelivered batch's runs that were
//!   already reported are dropped by the coordinator, and counted.
//! - the key-value bucket `aid_sessions`: each session's spec (what to
//!   run, which functions to trace and how), under the session's name.
//! - the key-value bucket `aid_workers`: each worker's name and how many
//!   runs it makes at once, put again every [`HEARTBEAT`]; a worker whose
//!   key is older than [`WORKER_GONE`] has stopped.
//!
//! The agent's code is synchronous; the client's is async. A [`Bus`] runs
//! the client on a tokio runtime of its own thread and answers blocking
//! calls ([`Bus::block`]).

pub mod attach;
pub mod coordinator;
pub mod worker;

use std::{ffi::OsString, future::Future, path::PathBuf, time::Duration};

use async_nats::jetstream::{self, consumer, kv, stream};
use serde::{Deserialize, Serialize};

pub use crate::store::host_name;
use crate::{
    intervene::Plan,
    model::{Function, Intervention, Noise, RecordedRun},
    record::tracer::TracerSpec,
};

/// The work queue's stream.
pub const WORK_STREAM: &str = "AID_WORK";
/// The results' stream.
pub const RESULTS_STREAM: &str = "AID_RESULTS";
/// The one durable consumer all workers take batches through.
pub const WORKERS_CONSUMER: &str = "aid-workers";
/// Sessions' specs, by session name.
pub const SESSIONS_BUCKET: &str = "aid_sessions";
/// Workers, by name.
pub const WORKERS_BUCKET: &str = "aid_workers";
/// A batch not acknowledged (nor reported in progress) for this long is
/// delivered again. Workers report progress every [`PROGRESS`].
pub const ACK_WAIT: Duration = Duration::from_secs(10);
/// How often a worker tells the server it is still on a batch.
pub const PROGRESS: Duration = Duration::from_secs(2);
/// How often a worker puts its key in [`WORKERS_BUCKET`].
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// A worker's key expires this long after it was last put.
pub const WORKER_GONE: Duration = Duration::from_secs(8);
/// Deliveries of one batch at most: a batch that ended every worker that
/// took it is not sent to more. The server then says so on
/// [`MAX_DELIVERIES_ADVISORY`], and the coordinator stops.
pub const MAX_DELIVER: i64 = 5;
/// Where the server tells that a batch reached [`MAX_DELIVER`]: a JSON
/// advisory with its `stream_seq`.
pub const MAX_DELIVERIES_ADVISORY: &str =
    "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.AID_WORK.aid-workers";
/// Room left in a message for its headers.
const HEADER_ROOM: usize = 4096;

/// A message's header: the run a report part belongs to.
pub const H_RUN: &str = "Aid-Run";
/// The worker that made it.
pub const H_WORKER: &str = "Aid-Worker";
/// Which delivery of its batch made it (parts of two deliveries never mix).
pub const H_DELIVERY: &str = "Aid-Delivery";
/// `k/n`: the part's place among the report's parts.
pub const H_PART: &str = "Aid-Part";

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(
        "cannot reach the NATS server at {url}: {reason}: start one with JetStream on (`nats-server -js -a 127.0.0.1`) or give its nats://HOST:PORT"
    )]
    Connect { url: String, reason: String },
    #[error(
        "the NATS server at {url} has no JetStream ({reason}): start it with -js (`nats-server -js`)"
    )]
    NoJetStream { url: String, reason: String },
    #[error("the NATS server at {url} refused {what}: {reason}")]
    Server { url: String, what: String, reason: String },
    #[error("the fleet's client thread could not start: {0}")]
    Thread(std::io::Error),
    #[error("the fleet's client thread ended")]
    Ended,
    #[error("the session's reports stopped coming from {0}")]
    ReportsStopped(String),
    #[error(
        "--name {0:?}: a worker's name is letters, digits, '-' and '_' (it is a key and a subject token)"
    )]
    BadName(String),
}

/// The version of what coordinators, workers and joined hosts say to each
/// other. A spec of another version is refused in one line; specs written
/// before there was one read as 0. 2: a report carries its run's calls
/// only as its rows ([`RunReport::body`]).
pub const PROTOCOL: u32 = 2;

/// Why a host cannot take part in a session whose spec has `protocol`;
/// None when it can.
pub fn protocol_mismatch(protocol: u32) -> Option<String> {
    (protocol != PROTOCOL).then(|| {
        format!(
            "the session speaks fleet protocol {protocol} and this host's aid ({}) speaks {PROTOCOL}: run the same aid version on every host",
            env!("CARGO_PKG_VERSION")
        )
    })
}

/// What every run of a session is made from: the same on every worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SessionSpec {
    /// [`PROTOCOL`] of the coordinator.
    #[serde(default)]
    pub protocol: u32,
    pub tracer: TracerSpec,
    /// The executable, as the coordinator found it: each worker runs its
    /// own copy at the same path, checked by build-id.
    pub program: PathBuf,
    pub argv: Vec<OsString>,
    /// The build-id of every file the probes are in (the program and its
    /// libraries), by path: a worker whose copy differs makes no run.
    pub files: Vec<FileId>,
    /// `--fail-on`, as given.
    pub fail_on: Vec<String>,
    pub timeout_ms: u64,
    /// `--hang-after`; 0: not watched.
    pub hang_after_ms: u64,
}

/// A file and its build-id (hex; None: it has none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    pub path: PathBuf,
    pub build_id: Option<String>,
}

impl FileId {
    /// `path` with the build-id read from it now; an error says why it
    /// cannot be read.
    pub fn read(path: &std::path::Path) -> Result<FileId, String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", path.display()))?;
        let build_id = object::Object::build_id(&file)
            .ok()
            .flatten()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect());
        Ok(FileId { path: path.to_owned(), build_id })
    }
}

impl FileId {
    /// The build-ids of the files `functions` are in and of `program`:
    /// what every host of a session must have the same of.
    pub fn of_traced(
        functions: &[Function],
        program: &std::path::Path,
    ) -> anyhow::Result<Vec<FileId>> {
        let mut paths: std::collections::BTreeSet<&std::path::Path> =
            functions.iter().map(|f| f.module.as_path()).collect();
        paths.insert(program);
        paths
            .into_iter()
            .map(FileId::read)
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| anyhow::anyhow!("cannot read a traced file's build-id: {e}"))
    }

    /// Whether this host's file at the same path has this build-id; why
    /// not, in words (`there`: whose file this is, "the coordinator's").
    pub fn check_here(&self, there: &str, hosts: &str) -> Result<(), String> {
        let have = FileId::read(&self.path)
            .map_err(|e| format!("this host's copy of a traced file cannot be read: {e}"))?;
        if have.build_id == self.build_id {
            return Ok(());
        }
        Err(format!(
            "{} differs from {there} (build-id {} here, {} there): install the same build on every {hosts}",
            self.path.display(),
            have.build_id.as_deref().unwrap_or("none"),
            self.build_id.as_deref().unwrap_or("none")
        ))
    }
}

/// A batch of runs, as the work queue carries it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkBatch {
    pub session: String,
    /// The revision of the session's spec in [`SESSIONS_BUCKET`] the runs
    /// are made with: a batch of an older one is dropped.
    pub spec_revision: u64,
    pub runs: Vec<WorkRun>,
}

/// One run to make: its number, the noise it carries and what it
/// intervenes on (neither: observed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkRun {
    pub id: u32,
    pub noise: Vec<Noise>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interventions: Vec<Intervention>,
    /// The interventions' longest hold, in microseconds.
    #[serde(default)]
    pub hold_timeout_us: u64,
}

impl WorkRun {
    /// The run `plan` describes (its interventions and noise).
    pub fn of(id: u32, plan: Option<Plan>) -> WorkRun {
        let plan = plan.unwrap_or_default();
        WorkRun {
            id,
            noise: plan.noise,
            interventions: plan.interventions,
            hold_timeout_us: u64::try_from(plan.hold_timeout.as_micros()).unwrap_or(u64::MAX),
        }
    }

    /// Its plan, over the session's `functions` (the coordinator's ids);
    /// None: observed.
    pub fn plan(&self, functions: &[Function]) -> Option<Plan> {
        if self.interventions.is_empty() {
            return (!self.noise.is_empty()).then(|| Plan::default().with_noise(&self.noise));
        }
        let hold = Duration::from_micros(self.hold_timeout_us);
        Some(Plan::new(&self.interventions, hold, functions).with_noise(&self.noise))
    }
}

/// One run made, as the results' stream carries it (in parts).
#[derive(Serialize, Deserialize)]
pub struct RunReport {
    pub id: u32,
    pub worker: String,
    /// The worker's host (the run's `host` in the session).
    pub host: String,
    /// The run, or why the worker could not make it (one line).
    pub run: Result<RecordedRun, String>,
    /// Not a run: a host joined an attach session, or left it
    /// (`attach --fleet`, [`attach`]; `id` is then 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<Presence>,
}

impl RunReport {
    /// The report as it is sent: without its run's calls, which are its
    /// rows paired, with the agent's pauses taken out (as the tracer made
    /// them and as the session's reader makes them again);
    /// [`RunReport::from_body`] builds them again. Each call was in a
    /// report twice before. `self` is as it was when this returns.
    pub fn body(&mut self) -> serde_json::Result<Vec<u8>> {
        let calls = match &mut self.run {
            Ok(rec) => std::mem::take(&mut rec.run.calls),
            Err(_) => Vec::new(),
        };
        let body = serde_json::to_vec(self);
        if let Ok(rec) = &mut self.run {
            rec.run.calls = calls;
        }
        body
    }

    /// A report read from what [`RunReport::body`] made.
    pub fn from_body(body: &[u8]) -> serde_json::Result<RunReport> {
        let mut report: RunReport = serde_json::from_slice(body)?;
        if let Ok(rec) = &mut report.run {
            rec.run.calls = crate::model::paired_calls(&rec.rows, &rec.run.pauses);
        }
        Ok(report)
    }
}

/// A host's coming and going in an attach session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Presence {
    /// It traces process `pid` of its host from now on.
    Joined { pid: u32 },
    /// It stopped (why, in words) after sending `runs` runs.
    Left { runs: u32, why: String },
}

/// This worker's entry in [`WORKERS_BUCKET`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub name: String,
    pub host: String,
    pub pid: u32,
    /// Runs it makes at once (`worker --jobs`).
    pub jobs: u32,
}

/// The subject a session's batches are published on.
pub fn work_subject(session: &str) -> String {
    format!("aid.work.{session}")
}

/// The subject a session's reports are published on.
pub fn results_subject(session: &str) -> String {
    format!("aid.results.{session}")
}

/// The subject a coordinator asks its session's runs in flight to stop on.
pub fn cancel_subject(session: &str) -> String {
    format!("aid.cancel.{session}")
}

/// A name usable as a key and a subject token: letters, digits, `-`, `_`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A host's name in the fleet: `name` when given (refused unless
/// [`valid_name`]), else this host's name and the agent's pid.
pub fn member_name(name: Option<&str>) -> Result<String, FleetError> {
    match name {
        Some(n) if valid_name(n) => Ok(n.to_owned()),
        Some(n) => Err(FleetError::BadName(n.to_owned())),
        None => Ok(to_name(&format!("{}-{}", host_name(), std::process::id()))),
    }
}

/// `s` with anything [`valid_name`] refuses turned into `-`.
pub fn to_name(s: &str) -> String {
    let n: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
    if n.is_empty() { "aid".to_owned() } else { n }
}

/// The NATS client on a tokio runtime of its own thread, for synchronous
/// callers.
pub struct Bus {
    pub url: String,
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    runtime: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bus {
    /// Connects to the server at `url` as `name` (shown by the server's
    /// monitoring), with JetStream.
    pub fn connect(url: &str, name: &str) -> Result<Bus, FleetError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(FleetError::Thread)?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("aid-fleet".into())
            .spawn(move || {
                // Until the bus is dropped; its tasks end with the runtime.
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(FleetError::Thread)?;
        let (addr, name_owned) = (url.to_owned(), name.to_owned());
        let connected = block_on(&handle, async move {
            async_nats::ConnectOptions::new()
                .name(name_owned)
                .connection_timeout(Duration::from_secs(5))
                .connect(addr)
                .await
        });
        let client = match connected {
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                return Err(FleetError::Connect {
                    url: url.to_owned(),
                    reason: connect_reason(&e),
                });
            }
            None => return Err(FleetError::Ended),
        };
        // The context starts a task of its own: on the bus's runtime.
        let js = {
            let _on = handle.enter();
            jetstream::new(client.clone())
        };
        Ok(Bus {
            url: url.to_owned(),
            client,
            js,
            runtime: handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `f` on the client's runtime and waits for its output; None
    /// when the runtime has ended.
    pub fn block<F>(&self, f: F) -> Option<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        block_on(&self.runtime, f)
    }

    /// Runs `f` on the client's runtime in the background.
    pub fn spawn<F>(&self, f: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.runtime.spawn(f)
    }

    /// The most bytes of a report one message carries: the largest
    /// message the server takes, less room for the headers.
    pub fn part_size(&self) -> usize {
        self.client.server_info().max_payload.saturating_sub(HEADER_ROOM).max(HEADER_ROOM)
    }

    /// Runs the request `f` on the client's runtime: its answer, or the
    /// server's refusal of `what` with its reason.
    pub fn request<T, F>(&self, what: impl Into<String>, f: F) -> Result<T, FleetError>
    where
        F: Future<Output = Result<T, String>> + Send + 'static,
        T: Send + 'static,
    {
        match self.block(f) {
            Some(Ok(v)) => Ok(v),
            Some(Err(reason)) => {
                Err(FleetError::Server { url: self.url.clone(), what: what.into(), reason })
            }
            None => Err(FleetError::Ended),
        }
    }

    /// Makes (or finds) the streams, the workers' consumer and the
    /// buckets every coordinator and worker use.
    pub fn queues(&self) -> Result<Queues, FleetError> {
        let (js, url) = (self.js.clone(), self.url.clone());
        self.block(async move { Queues::make(&js, &url).await }).unwrap_or(Err(FleetError::Ended))
    }

    /// Publishes `report` on the session's results' subject, in parts of
    /// at most the server's message size, each stored before the next is
    /// sent.
    pub fn publish_report(
        &self,
        session: &str,
        delivery: u64,
        report: &mut RunReport,
    ) -> Result<(), FleetError> {
        let what = format!("run {}'s report", report.id);
        let body = report.body().map_err(|e| FleetError::Server {
            url: self.url.clone(),
            what: what.clone(),
            reason: e.to_string(),
        })?;
        let parts: Vec<bytes::Bytes> =
            body.chunks(self.part_size()).map(bytes::Bytes::copy_from_slice).collect();
        let n = parts.len().max(1);
        let (js, subject) = (self.js.clone(), results_subject(session));
        let (id, worker) = (report.id, report.worker.clone());
        self.request(what, async move {
            for (k, part) in parts.into_iter().enumerate() {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(H_RUN, id.to_string().as_str());
                headers.insert(H_WORKER, worker.as_str());
                headers.insert(H_DELIVERY, delivery.to_string().as_str());
                headers.insert(H_PART, format!("{}/{n}", k + 1).as_str());
                stored(&js, subject.clone(), headers, part).await?;
            }
            Ok(())
        })
    }
}

/// Publishes `body` on a stream's `subject` and waits until the server
/// has stored it: its place in the stream.
async fn stored(
    js: &jetstream::Context,
    subject: String,
    headers: async_nats::HeaderMap,
    body: bytes::Bytes,
) -> Result<u64, String> {
    let ack = js.publish_with_headers(subject, headers, body).await.map_err(|e| e.to_string())?;
    ack.await.map(|a| a.sequence).map_err(|e| e.to_string())
}

impl Drop for Bus {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Checks, before a session spends anything, that the server at `url`
/// answers and has JetStream.
pub fn check(url: &str) -> Result<(), FleetError> {
    Bus::connect(url, "aid-agent check")?.queues().map(drop)
}

/// Why a connection failed, in words (not the socket's errno).
fn connect_reason(e: &async_nats::ConnectError) -> String {
    use async_nats::ConnectErrorKind as K;
    match e.kind() {
        K::ServerParse => "not a server address (nats://HOST:PORT)".to_owned(),
        K::Dns => "its host name does not resolve".to_owned(),
        K::Io => "nothing answered there".to_owned(),
        K::TimedOut => "no answer within 5 s".to_owned(),
        K::Authentication | K::AuthorizationViolation => {
            "it refused this client (authentication)".to_owned()
        }
        K::Tls => "its TLS set-up failed".to_owned(),
        K::MaxReconnects => "it stopped answering".to_owned(),
    }
}

/// Runs `f` on `runtime` (driven by its own thread) and waits for it.
fn block_on<F>(runtime: &tokio::runtime::Handle, f: F) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv().ok()
}

/// The server's side of a fleet, made once by whoever connects first.
#[derive(Clone)]
pub struct Queues {
    pub work: stream::Stream,
    pub results: stream::Stream,
    pub workers: consumer::Consumer<consumer::pull::Config>,
    pub sessions: kv::Store,
    pub members: kv::Store,
}

impl Queues {
    async fn make(js: &jetstream::Context, url: &str) -> Result<Queues, FleetError> {
        let refused = |what: &str, reason: String| {
            if reason.contains("not enabled") || reason.contains("no responders") {
                FleetError::NoJetStream { url: url.to_owned(), reason }
            } else {
                FleetError::Server { url: url.to_owned(), what: what.to_owned(), reason }
            }
        };
        let hour = Duration::from_secs(3600);
        let work = js
            .get_or_create_stream(stream::Config {
                name: WORK_STREAM.into(),
                subjects: vec!["aid.work.>".into()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                max_age: hour,
                ..Default::default()
            })
            .await
            .map_err(|e| refused("the work queue", e.to_string()))?;
        let results = js
            .get_or_create_stream(stream::Config {
                name: RESULTS_STREAM.into(),
                subjects: vec!["aid.results.>".into()],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                max_age: hour,
                ..Default::default()
            })
            .await
            .map_err(|e| refused("the results' stream", e.to_string()))?;
        let workers = work
            .get_or_create_consumer(
                WORKERS_CONSUMER,
                consumer::pull::Config {
                    durable_name: Some(WORKERS_CONSUMER.into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    max_deliver: MAX_DELIVER,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| refused("the workers' consumer", e.to_string()))?;
        let sessions =
            bucket(js, SESSIONS_BUCKET, Duration::from_secs(24 * 3600), stream::StorageType::File)
                .await
                .map_err(|e| refused("the sessions' bucket", e))?;
        let members = bucket(js, WORKERS_BUCKET, WORKER_GONE, stream::StorageType::Memory)
            .await
            .map_err(|e| refused("the workers' bucket", e))?;
        Ok(Queues { work, results, workers, sessions, members })
    }
}

/// The key-value bucket `name` (one value a key, kept for `max_age`),
/// made when missing. Its stream is made here, as the client's
/// `create_key_value` would make it, because that call first asks for the
/// account's information in a form servers before 2.10 do not answer.
async fn bucket(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    storage: stream::StorageType,
) -> Result<kv::Store, String> {
    if let Ok(kv) = js.get_key_value(name).await {
        return Ok(kv);
    }
    js.get_or_create_stream(stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        storage,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        num_replicas: 1,
        ..Default::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    js.get_key_value(name).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_keys_and_subject_tokens() {
        assert!(valid_name("host-1_a"));
        assert!(!valid_name(""));
        assert!(!valid_name("a.b"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("a>"));
        assert_eq!(to_name("web.example.com"), "web-example-com");
        assert_eq!(to_name(""), "aid");
        assert!(valid_name(&to_name("x.y*z>")));
    }

    #[test]
    fn the_advisory_names_the_workers_consumer() {
        assert_eq!(
            MAX_DELIVERIES_ADVISORY,
            format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{WORK_STREAM}.{WORKERS_CONSUMER}")
        );
    }

    #[test]
    fn a_spec_of_another_protocol_is_refused_in_words() {
        assert_eq!(protocol_mismatch(PROTOCOL), None);
        let why = protocol_mismatch(0).unwrap();
        assert!(why.contains("protocol 0") && why.contains("same aid version"), "{why}");
        let old: SessionSpec = serde_json::from_str(&spec_json_without_protocol()).unwrap();
        assert_eq!(old.protocol, 0);
    }

    /// A spec as a coordinator before [`PROTOCOL`] wrote it.
    fn spec_json_without_protocol() -> String {
        let spec = SessionSpec {
            protocol: PROTOCOL,
            tracer: TracerSpec {
                functions: Vec::new(),
                pthread_create: None,
                bodies: Default::default(),
                scope: crate::bpf::Scope::Target,
                programs: crate::bpf::Programs::Record,
                load: crate::bpf::LoadOptions::default(),
                repair_unwind: false,
                sync_in_every_run: false,
                statements: false,
            },
            program: "/bin/true".into(),
            argv: Vec::new(),
            files: Vec::new(),
            fail_on: Vec::new(),
            timeout_ms: 1000,
            hang_after_ms: 0,
        };
        let mut v = serde_json::to_value(&spec).unwrap();
        v.as_object_mut().unwrap().remove("protocol");
        v.to_string()
    }

    /// A report's calls go as its rows only and come back as the tracer
    /// made them: nested, unwound, with arguments, content and a return
    /// value, on two threads, with a pause of the agent taken out.
    #[test]
    fn a_report_carries_each_call_once_and_reads_back_whole() {
        use crate::model::{Label, Pause, testing};
        let calls = vec![
            testing::call(0, 0, 1, 10, Some(90), Some(7)).with_args([1, -2, 3]),
            testing::call(1, 0, 1, 20, Some(30), Some(-1)).with_content(b"ab"),
            testing::call(1, 1, 1, 25, Some(60), None).unwound(),
            testing::call(2, 1, 1, 70, None, None),
        ];
        let mut rec = testing::recorded(testing::run(3, Label::Fail, calls, 100));
        // As the tracer makes them: the rows paired, the pauses out.
        rec.run.pauses = vec![Pause { role: 1, at_ns: 40, dur_ns: 5 }];
        rec.run.calls = crate::model::paired_calls(&rec.rows, &rec.run.pauses);
        assert_eq!(rec.run.calls.iter().map(|c| c.paused_ns).sum::<u64>(), 5);
        let before = rec.run.calls.clone();
        let mut report = RunReport {
            id: 3,
            worker: "w1".into(),
            host: "h1".into(),
            run: Ok(rec),
            presence: None,
        };
        let whole = serde_json::to_vec(&report).unwrap();
        let body = report.body().unwrap();
        assert_eq!(report.run.as_ref().unwrap().run.calls, before, "body() leaves it as it was");
        assert!(body.len() < whole.len(), "{} bytes, {} with the calls", body.len(), whole.len());
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["run"]["Ok"]["run"]["calls"], serde_json::json!([]));
        let back = RunReport::from_body(&body).unwrap();
        assert_eq!(back.run.unwrap().run.calls, before);
        let mut failed = RunReport {
            id: 4,
            worker: "w1".into(),
            host: "h1".into(),
            run: Err("no such file".into()),
            presence: None,
        };
        let again = RunReport::from_body(&failed.body().unwrap()).unwrap();
        assert_eq!(again.run.err().as_deref(), Some("no such file"));
    }

    #[test]
    fn subjects_are_per_session() {
        assert_eq!(work_subject("s1"), "aid.work.s1");
        assert_eq!(results_subject("s1"), "aid.results.s1");
        assert_eq!(cancel_subject("s1"), "aid.cancel.s1");
    }
}
