//! `aid-agent worker`: one host of a fleet. It takes batches of runs from
//! the work queue, one batch at a time, makes each batch's runs (up to
//! `--jobs` at once, each with its own probes, as `--jobs` does on one
//! host), reports each run as it ends and acknowledges the batch once all
//! are reported. It makes a session's runs only with copies of the
//! session's files that have the coordinator's build-ids.

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use async_nats::jetstream::{self, AckKind, kv};
use futures_util::StreamExt;

use super::{
    Bus, FleetError, HEARTBEAT, PROGRESS, Queues, RunReport, SessionSpec, WorkBatch, WorkerInfo,
    cancel_subject, host_name,
};
use crate::{
    model::Function,
    record::{
        fail::RunPolicy,
        jobs::{Done, Feed, Job, Jobs},
        tracer::{TraceError, Tracer},
    },
    symbols::Resolver,
    sys::spawn::Target,
};

/// What `aid-agent worker` was given.
pub struct WorkerOptions {
    pub url: String,
    /// Default: this host's name and the worker's pid.
    pub name: Option<String>,
    /// Runs made at once.
    pub jobs: u32,
}

/// What a worker says as it works.
pub trait WorkerUi {
    fn say(&mut self, line: &str);
}

/// The tracers of the session whose batch came last, kept for the next
/// batch of the same session and spec.
struct Made {
    session: String,
    revision: u64,
    /// The session's tracers, target and policy, or why this worker makes
    /// none of its runs (its files differ).
    ready: Result<(Jobs, Target, RunPolicy), String>,
}

/// Serves batches until `stop` is set (Ctrl-C): the batch in hand is
/// given back to the queue (its runs in flight are killed and not
/// reported) and the worker leaves the fleet.
pub fn serve(
    opts: &WorkerOptions,
    stop: &Arc<AtomicBool>,
    ui: &mut dyn WorkerUi,
) -> anyhow::Result<()> {
    let name = super::member_name(opts.name.as_deref())?;
    crate::bpf::preflight(crate::bpf::Needs::Trace)?;
    let bus = Bus::connect(&opts.url, &format!("aid-worker {name}"))?;
    let queues = bus.queues()?;
    let info = WorkerInfo {
        name: name.clone(),
        host: host_name(),
        pid: std::process::id(),
        jobs: opts.jobs.max(1),
    };
    let info_jobs = info.jobs;
    let beat = bus.spawn(heartbeat(queues.clone(), info));
    ui.say(&format!(
        "worker {name} on {}: making up to {} run(s) at once; Ctrl-C stops",
        opts.url,
        opts.jobs.max(1)
    ));
    let mut made: Option<Made> = None;
    let mut batches = 0u32;
    let mut unreachable = false;
    let outcome = loop {
        if stop.load(Ordering::SeqCst) {
            break Ok(());
        }
        let consumer = queues.workers.clone();
        let msg = match bus.block(async move { next_batch(&consumer).await }) {
            Some(Ok(Some(msg))) => msg,
            Some(Ok(None)) => continue,
            Some(Err(e)) => {
                // The server is away: the client reconnects meanwhile.
                if !unreachable {
                    ui.say(&format!("no batch can be taken from {}: {e}; trying again", opts.url));
                }
                unreachable = true;
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            None => break Err(anyhow::anyhow!("the fleet's client thread ended")),
        };
        unreachable = false;
        let delivered = msg.info().map_or(1, |i| i.delivered.max(1) as u64);
        let batch: WorkBatch = match serde_json::from_slice(&msg.payload) {
            Ok(b) => b,
            Err(e) => {
                ui.say(&format!("dropping a message that is not a batch of runs: {e}"));
                let m = msg.clone();
                bus.block(async move { m.ack_with(AckKind::Term).await });
                continue;
            }
        };
        let progress = bus.spawn(in_progress(msg.clone()));
        let result =
            make_batch(&bus, &queues, &name, &mut made, &batch, delivered, info_jobs, stop, ui);
        progress.abort();
        let m = msg.clone();
        match result {
            Ok(Batch::Done) => {
                batches += 1;
                bus.block(async move { m.double_ack().await });
            }
            // Stopped: another worker makes the batch.
            Ok(Batch::Stopped) => {
                bus.block(async move { m.ack_with(AckKind::Nak(None)).await });
            }
            Ok(Batch::Unread(reason)) => {
                ui.say(&format!(
                    "session {}'s spec cannot be read from {}: {reason}; its batch goes back to the queue",
                    batch.session, opts.url
                ));
                bus.block(async move { m.ack_with(AckKind::Nak(Some(GIVE_BACK_DELAY))).await });
            }
            Err(e) => {
                bus.block(async move { m.ack_with(AckKind::Nak(None)).await });
                break Err(e);
            }
        }
    };
    beat.abort();
    let (members, key) = (queues.members.clone(), name.clone());
    bus.block(async move { members.purge(key).await });
    ui.say(&format!("worker {name} left the fleet after {batches} batch(es)"));
    outcome
}

/// The next batch, or None after a second without one.
async fn next_batch(
    consumer: &jetstream::consumer::Consumer<jetstream::consumer::pull::Config>,
) -> Result<Option<jetstream::Message>, String> {
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(1))
        .messages()
        .await
        .map_err(|e| e.to_string())?;
    match batch.next().await {
        Some(Ok(m)) => Ok(Some(m)),
        Some(Err(e)) => Err(e.to_string()),
        None => Ok(None),
    }
}

/// Tells the server, every [`PROGRESS`], that the batch is being made.
async fn in_progress(msg: jetstream::Message) {
    loop {
        tokio::time::sleep(PROGRESS).await;
        let _ = msg.ack_with(AckKind::Progress).await;
    }
}

/// Puts this worker's key every [`HEARTBEAT`].
async fn heartbeat(queues: Queues, info: WorkerInfo) {
    let body = bytes::Bytes::from(serde_json::to_vec(&info).unwrap_or_default());
    loop {
        let _ = queues.members.put(&info.name, body.clone()).await;
        tokio::time::sleep(HEARTBEAT).await;
    }
}

/// What became of a batch taken.
#[derive(Debug)]
enum Batch {
    /// Every run reported, or none to make (its session has ended).
    Done,
    /// This worker was stopped before all were reported.
    Stopped,
    /// The session's spec could not be read (the server is away): the
    /// batch is given back, to be taken again after [`GIVE_BACK_DELAY`].
    Unread(String),
}

/// How long a batch given back because its spec could not be read waits
/// before it is delivered again (to any worker).
const GIVE_BACK_DELAY: Duration = Duration::from_secs(1);

/// A session's spec as the sessions' bucket holds it: its revision,
/// whether it is a value (not a deletion) and its bytes.
type Stored = (u64, bool, bytes::Bytes);

/// What the sessions' bucket says of a batch made with the spec of
/// `revision`: the spec to make it with, Ok(None) when the session has
/// ended or has another spec now (its coordinator no longer waits for
/// the batch), or why the bucket could not be read.
fn spec_of<S: serde::de::DeserializeOwned>(
    read: Result<Option<Stored>, String>,
    revision: u64,
) -> Result<Option<Result<S, String>>, String> {
    match read? {
        Some((rev, true, value)) if rev == revision => Ok(Some(
            serde_json::from_slice(&value)
                .map_err(|e| format!("this worker (aid {}) cannot read the session's spec: {e}: run the coordinator's version", env!("CARGO_PKG_VERSION"))),
        )),
        _ => Ok(None),
    }
}

/// Makes `batch`'s runs and reports each.
#[allow(clippy::too_many_arguments, reason = "one call site: the serve loop's state")]
fn make_batch(
    bus: &Bus,
    queues: &Queues,
    name: &str,
    made: &mut Option<Made>,
    batch: &WorkBatch,
    delivery: u64,
    jobs: u32,
    stop: &Arc<AtomicBool>,
    ui: &mut dyn WorkerUi,
) -> anyhow::Result<Batch> {
    let current = made
        .as_ref()
        .is_some_and(|m| m.session == batch.session && m.revision == batch.spec_revision);
    if !current {
        let (sessions, key) = (queues.sessions.clone(), batch.session.clone());
        let read = bus
            .block(async move {
                sessions.entry(key).await.map_err(|e| e.to_string()).map(|entry| {
                    entry.map(|e| (e.revision, e.operation == kv::Operation::Put, e.value))
                })
            })
            .ok_or(FleetError::Ended)?;
        let spec = match spec_of::<SessionSpec>(read, batch.spec_revision) {
            Ok(Some(spec)) => spec,
            Ok(None) => return Ok(Batch::Done),
            Err(reason) => return Ok(Batch::Unread(reason)),
        };
        // The previous session's tracers are let go first.
        *made = None;
        *made = Some(prepare(&batch.session, batch.spec_revision, spec, jobs, ui));
    }
    let Some(m) = made.as_mut() else { return Ok(Batch::Done) };
    let (tracers, target, policy) = match &mut m.ready {
        Ok((tracers, target, policy)) => (tracers, &*target, &*policy),
        Err(why) => {
            for run in &batch.runs {
                let mut report = RunReport {
                    id: run.id,
                    worker: name.to_owned(),
                    host: host_name(),
                    run: Err(why.clone()),
                    presence: None,
                };
                bus.publish_report(&batch.session, delivery, &mut report)?;
            }
            return Ok(Batch::Done);
        }
    };
    // The coordinator's Ctrl-C (its cancel subject) or this worker's.
    let cancel = Arc::new(AtomicBool::new(false));
    let watcher = bus.spawn(watch_cancel(
        bus.client.clone(),
        cancel_subject(&batch.session),
        Arc::clone(&cancel),
        Arc::clone(stop),
    ));
    // The session's functions, for the plans of intervened runs.
    let intervened = batch.runs.iter().any(|r| !r.interventions.is_empty());
    let functions = if intervened { tracers.functions().to_vec() } else { Vec::new() };
    let mut feed = BatchFeed { bus, batch, functions, delivery, name, next: 0, stop, failed: None };
    let ran = tracers.run(target, policy, &cancel, &mut feed);
    watcher.abort();
    ran?;
    if let Some(e) = feed.failed {
        return Err(e.into());
    }
    Ok(if stop.load(Ordering::SeqCst) { Batch::Stopped } else { Batch::Done })
}

/// The session's tracers, target and policy, or why this worker makes
/// none of its runs (`spec` could not be read, or its files differ).
fn prepare(
    session: &str,
    revision: u64,
    spec: Result<SessionSpec, String>,
    jobs: u32,
    ui: &mut dyn WorkerUi,
) -> Made {
    let ready = spec.and_then(|spec| {
        let ready = tracers(&spec, jobs)?;
        ui.say(&format!(
            "session {session}: {} ({} traced functions)",
            ready.1.display(),
            spec.tracer.functions.iter().filter(|f| !f.internal).count()
        ));
        Ok(ready)
    });
    if let Err(why) = &ready {
        ui.say(&format!("session {session}: making none of its runs: {why}"));
    }
    Made { session: session.to_owned(), revision, ready }
}

/// Checks the session's files against this host's copies, then makes
/// `n` tracers of its functions.
fn tracers(spec: &SessionSpec, n: u32) -> Result<(Jobs, Target, RunPolicy), String> {
    if let Some(why) = super::protocol_mismatch(spec.protocol) {
        return Err(why);
    }
    for want in &spec.files {
        want.check_here("the coordinator's", "worker")?;
    }
    let mut resolver = Resolver::for_executable(&spec.program).map_err(|e| e.to_string())?;
    let libraries: BTreeSet<&std::path::Path> = spec
        .tracer
        .functions
        .iter()
        .map(|f| f.module.as_path())
        .filter(|m| *m != spec.program.as_path())
        .collect();
    for lib in libraries {
        // A library not found names fewer start routines; runs still work.
        let _ = resolver.module(Some(&lib.to_string_lossy()));
    }
    let names = resolver.names();
    let tracers = (0..n)
        .map(|_| Tracer::from_spec(spec.tracer.clone(), names.clone()))
        .collect::<Result<Vec<_>, TraceError>>()
        .map_err(|e| crate::util::error_chain(&e))?;
    let target =
        Target { program: spec.program.clone(), argv: spec.argv.clone(), output_dir: None };
    let policy = RunPolicy::new(&spec.fail_on, Duration::from_millis(spec.timeout_ms))
        .map_err(|e| e.to_string())?
        .with_hang_after(Duration::from_millis(spec.hang_after_ms));
    Ok((Jobs::from_tracers(tracers), target, policy))
}

/// Sets `cancel` when the coordinator asks (a message on its session's
/// cancel subject) or this worker is stopped.
async fn watch_cancel(
    client: async_nats::Client,
    subject: String,
    cancel: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let mut sub = client.subscribe(subject).await.ok();
    loop {
        if stop.load(Ordering::SeqCst) {
            cancel.store(true, Ordering::SeqCst);
            return;
        }
        let asked = match &mut sub {
            Some(s) => tokio::time::timeout(Duration::from_millis(100), s.next())
                .await
                .is_ok_and(|m| m.is_some()),
            None => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                false
            }
        };
        if asked {
            cancel.store(true, Ordering::SeqCst);
            return;
        }
    }
}

/// A batch's runs, fed to the tracers; each run reported as it ends.
struct BatchFeed<'a> {
    bus: &'a Bus,
    batch: &'a WorkBatch,
    functions: Vec<Function>,
    delivery: u64,
    name: &'a str,
    next: usize,
    stop: &'a AtomicBool,
    failed: Option<FleetError>,
}

impl Feed for BatchFeed<'_> {
    fn next(&mut self) -> Option<Job> {
        let run = self.batch.runs.get(self.next)?;
        self.next += 1;
        Some(Job { id: run.id, plan: run.plan(&self.functions) })
    }

    fn done(&mut self, done: Done) -> anyhow::Result<()> {
        // Stopped by this worker's Ctrl-C: the run was cut short here;
        // another worker makes it whole.
        if self.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let run = done.run.map_err(|e| crate::util::error_chain(&e));
        let mut report = RunReport {
            id: done.id,
            worker: self.name.to_owned(),
            host: host_name(),
            run,
            presence: None,
        };
        if let Err(e) = self.bus.publish_report(&self.batch.session, self.delivery, &mut report) {
            self.failed.get_or_insert(e);
            anyhow::bail!("a run's report could not be sent");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands for [`SessionSpec`] (the reading is the same).
    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    struct Spec {
        program: String,
    }

    fn spec_bytes() -> bytes::Bytes {
        serde_json::to_vec(&Spec { program: "/bin/true".into() }).unwrap().into()
    }

    /// A spec the bucket could not give (the server away) is not a
    /// session that ended: the batch is given back, not acknowledged.
    #[test]
    fn an_unread_spec_gives_the_batch_back() {
        assert_eq!(spec_of::<Spec>(Err("timed out".into()), 3).unwrap_err(), "timed out");
    }

    #[test]
    fn a_session_ended_or_respecified_has_nothing_to_make() {
        assert!(spec_of::<Spec>(Ok(None), 3).unwrap().is_none());
        assert!(spec_of::<Spec>(Ok(Some((4, true, spec_bytes()))), 3).unwrap().is_none());
        assert!(spec_of::<Spec>(Ok(Some((3, false, bytes::Bytes::new()))), 3).unwrap().is_none());
    }

    #[test]
    fn the_current_spec_is_made_with_or_refused_in_words() {
        let spec = spec_of::<Spec>(Ok(Some((3, true, spec_bytes()))), 3).unwrap().unwrap().unwrap();
        assert_eq!(spec.program, "/bin/true");
        let why = spec_of::<Spec>(Ok(Some((3, true, bytes::Bytes::from_static(b"{}")))), 3)
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert!(
            why.contains("cannot read the session's spec") && why.contains("coordinator's version"),
            "{why}"
        );
    }
}
