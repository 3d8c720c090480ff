//! The coordinator's side of a fleet (`debug --fleet URL`): the session's
//! spec put in the sessions' bucket, batches of runs published on the
//! work queue, the workers' reports read back, put together from their
//! parts and handed on by run number. A run reported twice (its batch was
//! delivered again after a worker stopped) counts once; the others are
//! dropped and counted.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use async_nats::jetstream::{consumer, kv};
use futures_util::StreamExt;

use super::{
    Bus, FileId, FleetError, H_DELIVERY, H_PART, H_RUN, H_WORKER, MAX_DELIVER,
    MAX_DELIVERIES_ADVISORY, Queues, RunReport, SessionSpec, WORKER_GONE, WorkBatch, WorkRun,
    WorkerInfo, cancel_subject, host_name, results_subject, stored, to_name, work_subject,
};
use crate::{
    record::{
        fail::RunPolicy,
        jobs::{Done, Feed},
        tracer::{TraceError, Tracer},
    },
    sys::spawn::Target,
};

/// How long a coordinator waits for a worker to join before it gives up.
pub const NO_WORKER: Duration = Duration::from_secs(30);
/// After Ctrl-C, how long the runs in flight have to be reported.
const CANCEL_GRACE: Duration = Duration::from_secs(15);

/// One part of a run's report, as it came.
struct Part {
    run: u32,
    worker: String,
    delivery: u64,
    k: usize,
    n: usize,
    body: bytes::Bytes,
}

/// A session's link to the fleet.
pub struct Fleet {
    bus: Bus,
    queues: Queues,
    session: String,
    spec: Option<(Vec<u8>, u64)>,
    /// The session's reports, read from the first [`Fleet::next_report`].
    reports: Option<Reports>,
    /// Reports being put together: (run, worker, delivery) → parts.
    partial: HashMap<(u32, String, u64), BTreeMap<usize, bytes::Bytes>>,
    /// Runs handed on.
    received: BTreeSet<u32>,
    /// Runs handed on, by the worker that made them.
    made_by: BTreeMap<String, u32>,
    /// Reports of runs already handed on, dropped.
    pub duplicates: u32,
    /// Workers seen, and those seen to stop.
    seen: BTreeMap<String, WorkerInfo>,
    /// Runs the workers connected at the last look make at once.
    jobs: u32,
    gone: BTreeSet<String>,
    /// The runs of each batch published, by its place in the work queue.
    batches: HashMap<u64, Vec<u32>>,
    /// Places of batches the server stopped delivering ([`MAX_DELIVER`]).
    dropped: mpsc::Receiver<u64>,
    advisories: tokio::task::JoinHandle<()>,
}

/// The parts of the session's reports as a reader on the client's runtime
/// gets them: at most [`PARTS_AHEAD`] wait to be put together, so a
/// coordinator slower than its workers leaves the rest on the server.
struct Reports {
    /// Lent to the client's runtime for each wait (None: lost with it).
    parts: Option<tokio::sync::mpsc::Receiver<Part>>,
    reader: tokio::task::JoinHandle<()>,
}

/// Parts read ahead of the coordinator, at most (each at most the server's
/// largest message: 1 MiB by default).
const PARTS_AHEAD: usize = 64;

/// Bytes of reports the server sends the coordinator for one request, at
/// most: well below what it lets wait for a client (64 MiB) before it cuts
/// the client off as a slow consumer. With the client's default of 500
/// messages a request, a backlog of 1 MiB parts (runs of 100,000 events)
/// did that, and the reading stalled until the client made a new reader
/// (`cargo xtask bench fleet`, docs/fleet.md).
const PULL_BYTES: usize = 16 << 20;

impl Fleet {
    /// Connects to the fleet's server and listens for batches it stops
    /// delivering (the session's reports are read from the first
    /// [`Fleet::next_report`] on).
    pub fn connect(url: &str) -> Result<Fleet, FleetError> {
        let session = to_name(&format!(
            "{}-{}-{}",
            host_name(),
            std::process::id(),
            crate::bpf::monotonic_ns() / 1_000_000
        ));
        let bus = Bus::connect(url, &format!("aid-agent debug {session}"))?;
        let queues = bus.queues()?;
        // Subscribed before any batch is published.
        let client = bus.client.clone();
        let advised = bus.request("a subscription to the work queue's advisories", async move {
            client.subscribe(MAX_DELIVERIES_ADVISORY).await.map_err(|e| e.to_string())
        })?;
        let (tx, dropped) = mpsc::channel();
        let advisories = bus.spawn(read_dropped(advised, tx));
        Ok(Fleet {
            bus,
            queues,
            session,
            spec: None,
            reports: None,
            partial: HashMap::new(),
            received: BTreeSet::new(),
            made_by: BTreeMap::new(),
            duplicates: 0,
            seen: BTreeMap::new(),
            jobs: 0,
            gone: BTreeSet::new(),
            batches: HashMap::new(),
            dropped,
            advisories,
        })
    }

    /// The session's name on the server.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The server's address.
    pub fn url(&self) -> &str {
        &self.bus.url
    }

    /// The server and the runs each worker made so far.
    pub fn mark(&self) -> crate::store::FleetMark {
        crate::store::FleetMark { url: self.bus.url.clone(), workers: self.made_by.clone() }
    }

    /// The workers connected now ([`Fleet::jobs`] from them).
    pub fn workers(&mut self) -> Vec<WorkerInfo> {
        let members = self.queues.members.clone();
        let now: Vec<WorkerInfo> = self
            .bus
            .block(async move {
                let values = match latest_values(&members).await {
                    Some(values) => values,
                    None => values_one_by_one(&members).await,
                };
                values
                    .iter()
                    .filter_map(|v| serde_json::from_slice::<WorkerInfo>(v).ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let names: BTreeSet<&str> = now.iter().map(|w| w.name.as_str()).collect();
        let missing: Vec<String> = self
            .seen
            .keys()
            .filter(|n| !names.contains(n.as_str()) && !self.gone.contains(*n))
            .cloned()
            .collect();
        for (name, left) in self.how_gone(missing) {
            if left {
                log::warn!("worker {name} left the fleet");
            } else {
                log::warn!(
                    "worker {name} stopped answering (no word for {}): its batch goes to another worker",
                    crate::util::human::duration(WORKER_GONE.as_nanos() as u64)
                );
            }
            self.gone.insert(name);
        }
        for w in &now {
            self.gone.remove(&w.name);
            self.seen.insert(w.name.clone(), w.clone());
        }
        self.jobs = now.iter().map(|w| w.jobs.max(1)).sum();
        now
    }

    /// Whether each worker no longer in the bucket left (its key purged
    /// as it ended) rather than stopped answering (its key expired).
    fn how_gone(&self, names: Vec<String>) -> Vec<(String, bool)> {
        if names.is_empty() {
            return Vec::new();
        }
        let members = self.queues.members.clone();
        self.bus
            .block(async move {
                let mut out = Vec::new();
                for name in names {
                    let purged = matches!(
                        members.entry(name.clone()).await,
                        Ok(Some(e)) if e.operation == kv::Operation::Purge
                    );
                    out.push((name, purged));
                }
                out
            })
            .unwrap_or_default()
    }

    /// Runs the fleet makes at once: the `--jobs` of the workers connected
    /// at the last look summed (at least 1).
    pub fn jobs(&self) -> u32 {
        self.jobs.max(1)
    }

    /// The workers connected once at least one has joined (waited for up
    /// to [`NO_WORKER`]).
    pub fn wait_for_workers(&mut self, cancel: &AtomicBool) -> anyhow::Result<Vec<WorkerInfo>> {
        let start = Instant::now();
        loop {
            let now = self.workers();
            if !now.is_empty() || cancel.load(Ordering::SeqCst) {
                return Ok(now);
            }
            if start.elapsed() > NO_WORKER {
                anyhow::bail!(
                    "no worker joined the fleet at {} in {}: start one on each host with `aid-agent worker --connect {}`",
                    self.bus.url,
                    crate::util::human::duration(NO_WORKER.as_nanos() as u64),
                    self.bus.url
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Puts the session's spec (what `tracer` traces, `target`, `policy`)
    /// where the workers read it, when it changed; its revision.
    fn put_spec(
        &mut self,
        tracer: &Tracer,
        target: &Target,
        policy: &RunPolicy,
    ) -> anyhow::Result<u64> {
        let tspec = tracer.spec();
        let files = FileId::of_traced(&tspec.functions, &target.program)?;
        let spec = SessionSpec {
            protocol: super::PROTOCOL,
            tracer: tspec,
            program: target.program.clone(),
            argv: target.argv.clone(),
            files,
            fail_on: policy.texts.clone(),
            timeout_ms: policy.timeout.as_millis() as u64,
            hang_after_ms: policy.hang_after.map_or(0, |d| d.as_millis() as u64),
        };
        self.put_body(serde_json::to_vec(&spec)?)
    }

    /// Puts `body` as the session's spec in the sessions' bucket, when it
    /// changed; its revision.
    pub fn put_body(&mut self, body: Vec<u8>) -> anyhow::Result<u64> {
        if let Some((old, rev)) = &self.spec
            && *old == body
        {
            return Ok(*rev);
        }
        let (sessions, key, value) =
            (self.queues.sessions.clone(), self.session.clone(), bytes::Bytes::from(body.clone()));
        let rev = self.bus.request("the session's spec", async move {
            sessions.put(key, value).await.map_err(|e| e.to_string())
        })?;
        self.spec = Some((body, rev));
        Ok(rev)
    }

    /// Makes the runs `feed` asks for on the fleet's workers, as
    /// [`crate::record::jobs::Jobs::run`] makes them on this host:
    /// observed, with noise, or intervened on. Set `cancel` and the workers are asked
    /// to stop the runs in flight, which come back incomplete.
    pub fn run(
        &mut self,
        tracer: &Tracer,
        target: &Target,
        policy: &RunPolicy,
        cancel: &AtomicBool,
        feed: &mut dyn Feed,
    ) -> anyhow::Result<()> {
        let revision = self.put_spec(tracer, target, policy)?;
        let mut waiting: BTreeSet<u32> = BTreeSet::new();
        let mut failed: Option<anyhow::Error> = None;
        let mut cancelled: Option<Instant> = None;
        let mut alone_since: Option<Instant> = None;
        let mut checked = Instant::now();
        loop {
            if failed.is_none() && cancelled.is_none() && !cancel.load(Ordering::SeqCst) {
                let mut runs = Vec::new();
                while let Some(job) = feed.next() {
                    waiting.insert(job.id);
                    runs.push(WorkRun::of(job.id, job.plan));
                }
                self.publish(revision, runs)?;
            }
            if waiting.is_empty() {
                return failed.map_or(Ok(()), Err);
            }
            if cancel.load(Ordering::SeqCst) && cancelled.is_none() {
                cancelled = Some(Instant::now());
                self.ask_to_stop();
            }
            if cancelled.is_some_and(|t| t.elapsed() > CANCEL_GRACE) {
                log::warn!(
                    "{} run(s) in flight on the fleet were not reported after Ctrl-C",
                    waiting.len()
                );
                return failed.map_or(Ok(()), Err);
            }
            match self.next_report(Duration::from_millis(250)) {
                Ok(Some((report, delivery))) => {
                    // Not a run of this call (an older one's, delivered late).
                    if !waiting.remove(&report.id) {
                        continue;
                    }
                    self.received.insert(report.id);
                    *self.made_by.entry(report.worker.clone()).or_default() += 1;
                    if delivery > 1 {
                        log::warn!(
                            "run {} made by worker {}: its batch was delivered again (delivery {delivery}), as a worker that had it stopped before reporting it",
                            report.id,
                            report.worker
                        );
                    }
                    let (worker, host) = (report.worker, crate::store::safe_host(&report.host));
                    let run = report
                        .run
                        .map(|mut r| {
                            r.host = Some(host);
                            r
                        })
                        .map_err(|what| TraceError::Remote { worker, what });
                    if let Err(e) = feed.done(Done { id: report.id, run })
                        && failed.is_none()
                    {
                        failed = Some(e);
                    }
                }
                Ok(None) => {}
                Err(e) => anyhow::bail!("{e} with {} run(s) in flight", waiting.len()),
            }
            self.lost(&waiting)?;
            if checked.elapsed() > Duration::from_secs(2) {
                checked = Instant::now();
                if self.workers().is_empty() {
                    let since = *alone_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > NO_WORKER {
                        anyhow::bail!(
                            "no worker is left on {}: {} run(s) were not made; start `aid-agent worker --connect {}`",
                            self.bus.url,
                            waiting.len(),
                            self.bus.url
                        );
                    }
                } else {
                    alone_since = None;
                }
            }
        }
    }

    /// Asks every host making the session's runs to stop (its cancel
    /// subject).
    pub fn ask_to_stop(&self) {
        let (client, subject) = (self.bus.client.clone(), cancel_subject(&self.session));
        self.bus.block(async move {
            let _ = client.publish(subject, bytes::Bytes::new()).await;
            let _ = client.flush().await;
        });
    }

    /// Publishes `runs` in batches, one per worker connected now.
    fn publish(&mut self, revision: u64, runs: Vec<WorkRun>) -> anyhow::Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let workers = self.workers().len().max(1);
        let per = runs.len().div_ceil(workers);
        let batches: Vec<WorkBatch> = runs
            .chunks(per)
            .map(|c| WorkBatch {
                session: self.session.clone(),
                spec_revision: revision,
                runs: c.to_vec(),
            })
            .collect();
        let (js, subject) = (self.bus.js.clone(), work_subject(&self.session));
        let bodies = batches
            .iter()
            .map(|b| Ok((b.runs[0].id, serde_json::to_vec(b)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let session = self.session.clone();
        let places = self.bus.request("a batch of runs", async move {
            let mut places = Vec::new();
            for (first, body) in bodies {
                let mut headers = async_nats::HeaderMap::new();
                // The server drops a batch published twice.
                headers.insert("Nats-Msg-Id", format!("{session}-{first}").as_str());
                places.push(stored(&js, subject.clone(), headers, body.into()).await?);
            }
            Ok(places)
        })?;
        for (place, batch) in places.into_iter().zip(batches) {
            self.batches.insert(place, batch.runs.iter().map(|r| r.id).collect());
        }
        Ok(())
    }

    /// Fails when the server stopped delivering a batch that has runs
    /// still `waiting`: every worker it went to stopped (or lost the
    /// server) before reporting them, [`MAX_DELIVER`] times.
    fn lost(&mut self, waiting: &BTreeSet<u32>) -> anyhow::Result<()> {
        while let Ok(place) = self.dropped.try_recv() {
            let Some(runs) = self.batches.remove(&place) else { continue };
            // It stays in the work queue until it expires otherwise.
            let work = self.queues.work.clone();
            self.bus.block(async move {
                let _ = work.delete_message(place).await;
            });
            let lost: Vec<String> =
                runs.iter().filter(|id| waiting.contains(id)).map(u32::to_string).collect();
            if !lost.is_empty() {
                anyhow::bail!(
                    "{} not made: a batch went to workers {MAX_DELIVER} times and each stopped, or lost the server, before reporting it (runs {}): see the workers' output",
                    crate::util::human::count(lost.len() as u64, "run"),
                    crate::util::human::summarize(&lost)
                );
            }
        }
        Ok(())
    }

    /// The next report whose parts have all come, waiting up to `wait`:
    /// the report and which delivery of its batch made it. The session's
    /// reports are read from the first call on (each from the stream's
    /// start: none is missed).
    pub fn next_report(&mut self, wait: Duration) -> Result<Option<(RunReport, u64)>, FleetError> {
        if self.reports.is_none() {
            let results = self.queues.results.clone();
            let subject = results_subject(&self.session);
            let per_request =
                (PULL_BYTES / self.bus.client.server_info().max_payload.max(1)).max(1);
            let made = self.bus.request("a reader of the session's reports", async move {
                results
                    .create_consumer(consumer::pull::OrderedConfig {
                        filter_subject: subject,
                        max_batch: per_request as i64,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| e.to_string())
            })?;
            let (tx, parts) = tokio::sync::mpsc::channel(PARTS_AHEAD);
            let reader = self.bus.spawn(read_parts(made, tx));
            self.reports = Some(Reports { parts: Some(parts), reader });
        }
        let deadline = Instant::now() + wait;
        loop {
            let Some(mut parts) = self.reports.as_mut().and_then(|r| r.parts.take()) else {
                return Err(FleetError::Ended);
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let (parts, got) = self
                .bus
                .block(async move {
                    let got = tokio::time::timeout(left, parts.recv()).await;
                    (parts, got)
                })
                .ok_or(FleetError::Ended)?;
            if let Some(r) = self.reports.as_mut() {
                r.parts = Some(parts);
            }
            let part = match got {
                Ok(Some(part)) => part,
                Err(_) => return Ok(None),
                Ok(None) => return Err(FleetError::ReportsStopped(self.bus.url.clone())),
            };
            if let Some(done) = self.assemble(part) {
                return Ok(Some(done));
            }
        }
    }

    /// Adds `part` to its report; the report once all its parts came.
    fn assemble(&mut self, part: Part) -> Option<(RunReport, u64)> {
        if self.received.contains(&part.run) {
            // Already handed on: count each duplicate report once.
            if part.k == 1 {
                self.duplicates += 1;
            }
            return None;
        }
        let key = (part.run, part.worker.clone(), part.delivery);
        let parts = self.partial.entry(key.clone()).or_default();
        parts.insert(part.k, part.body);
        if parts.len() < part.n {
            return None;
        }
        let parts = self.partial.remove(&key)?;
        let body: Vec<u8> = parts.into_values().flat_map(|b| b.to_vec()).collect();
        match RunReport::from_body(&body) {
            Ok(r) => Some((r, part.delivery)),
            Err(e) => {
                log::warn!("run {}'s report from {} cannot be read: {e}", part.run, part.worker);
                None
            }
        }
    }
}

/// How long the look at the workers waits for the bucket to deliver its
/// values through one consumer before it asks for them key by key.
const LATEST_WITHIN: Duration = Duration::from_secs(1);

/// The value of every key in `store`, through one consumer of the
/// bucket's last message per key: two requests, where a request per key
/// took 88 ms at 1,000 workers (docs/fleet.md). None when they did not
/// all come within [`LATEST_WITHIN`] (values expired meanwhile).
async fn latest_values(store: &kv::Store) -> Option<Vec<bytes::Bytes>> {
    // The stream's state now (`Store::status` gives the one cached when
    // the bucket was opened).
    if store.stream.get_info().await.ok()?.state.messages == 0 {
        return Some(Vec::new());
    }
    let mut watch = store.watch_with_history(">").await.ok()?;
    let all = async move {
        let mut out = Vec::new();
        while let Some(Ok(e)) = watch.next().await {
            if e.operation == kv::Operation::Put {
                out.push(e.value);
            }
            if e.delta == 0 {
                return Some(out);
            }
        }
        None
    };
    tokio::time::timeout(LATEST_WITHIN, all).await.ok().flatten()
}

/// The value of every key in `store`, a request per key.
async fn values_one_by_one(store: &kv::Store) -> Vec<bytes::Bytes> {
    let mut out = Vec::new();
    let Ok(mut keys) = store.keys().await else { return out };
    while let Some(Ok(k)) = keys.next().await {
        if let Ok(Some(v)) = store.get(k).await {
            out.push(v);
        }
    }
    out
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(r) = &self.reports {
            r.reader.abort();
        }
        self.advisories.abort();
        if self.duplicates > 0 {
            log::warn!(
                "{} dropped: runs already reported, made again after their batch was delivered again",
                crate::util::human::count(self.duplicates, "duplicate report")
            );
        }
        // The session's spec and reports are not needed any more.
        let (sessions, key) = (self.queues.sessions.clone(), self.session.clone());
        let (results, subject) = (self.queues.results.clone(), results_subject(&self.session));
        self.bus.block(async move {
            let _ = sessions.purge(key).await;
            let _ = results.purge().filter(subject).await;
        });
    }
}

/// Sends the place in the work queue of each batch the server stopped
/// delivering, from its advisories, until the channel closes.
async fn read_dropped(mut advised: async_nats::Subscriber, tx: mpsc::Sender<u64>) {
    while let Some(m) = advised.next().await {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&m.payload) else { continue };
        let Some(place) = v["stream_seq"].as_u64() else { continue };
        if tx.send(place).is_err() {
            return;
        }
    }
}

/// Reads the session's reports, part by part, until the channel closes.
async fn read_parts(
    made: consumer::Consumer<consumer::pull::OrderedConfig>,
    tx: tokio::sync::mpsc::Sender<Part>,
) {
    let Ok(mut messages) = made.messages().await else { return };
    while let Some(Ok(m)) = messages.next().await {
        let Some(h) = m.headers.as_ref() else { continue };
        let get = |name: &str| h.get(name).map(|v| v.as_str().to_owned());
        let (Some(run), Some(worker), Some(delivery), Some(part)) =
            (get(H_RUN), get(H_WORKER), get(H_DELIVERY), get(H_PART))
        else {
            continue;
        };
        let Some((k, n)) = part.split_once('/') else { continue };
        let (Ok(run), Ok(delivery), Ok(k), Ok(n)) =
            (run.parse(), delivery.parse(), k.parse(), n.parse())
        else {
            continue;
        };
        let part = Part { run, worker, delivery, k, n, body: m.payload.clone() };
        if tx.send(part).await.is_err() {
            return;
        }
    }
}
