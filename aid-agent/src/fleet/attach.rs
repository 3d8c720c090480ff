//! `attach --fleet`: one session of a service's units (or windows) made on
//! several hosts. The host that starts it (`attach -p PID --fleet URL`)
//! traces its own process, puts what it traces in the sessions' bucket
//! ([`AttachSpec`]) and writes every run to its session directory, each
//! other host's tagged with that host ([`Gathering`]). Another host joins
//! with `attach -p PID --fleet URL --join SESSION` ([`join`]): its process
//! must run the same files at the same paths (checked by build-id), it is
//! traced with the session's functions, and each run is sent on the
//! session's results' subject as it is whole. The session ends where it
//! started (Ctrl-C, `-d`, the process's exit): the joined hosts are asked
//! to stop on the session's cancel subject, send their last runs and say
//! they left ([`Presence`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use async_nats::jetstream::kv;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};

use super::{
    Bus, FileId, FleetError, Presence, RunReport, cancel_subject, coordinator::Fleet, host_name,
};
use crate::{
    bpf::Scope,
    model::{FuncId, Label, RecordedRun},
    record::{
        attach::{Counters, Follow, Followed, Peers, Shared, Sink, follow},
        fail::{FailIf, ReturnCheck},
        progress::Progress,
        tracer::{Tracer, TracerSpec},
    },
    symbols::{DebugSearch, Resolver},
    sys::proc,
};

/// How long the host that started a session waits, once it stopped, for
/// the joined hosts to send their last runs and leave.
pub const LEAVE_GRACE: Duration = Duration::from_secs(15);
/// How often a joined host checks that its session still exists (its
/// first host may have ended without a word: killed).
const SESSION_CHECK: Duration = Duration::from_secs(2);
/// Reports taken from the server at one look, at most: the host's own
/// process is looked at again in between.
const REPORTS_A_LOOK: usize = 256;

/// What every host of an attach session traces, as the sessions' bucket
/// holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttachSpec {
    /// [`super::PROTOCOL`] of the first host.
    #[serde(default)]
    pub protocol: u32,
    /// The session's function table and probe settings (its scope is set
    /// to each host's process).
    pub tracer: TracerSpec,
    /// The first host's executable: every host runs a copy at this path.
    pub program: PathBuf,
    /// The build-id of every traced file, by path.
    pub files: Vec<FileId>,
    /// Each invocation of this function is one run; None: time windows.
    pub unit: Option<FuncId>,
    /// Without a unit, the windows' length.
    pub window_ms: u64,
    /// `--fail-if`, resolved: the functions each condition is about.
    pub checks: Vec<CheckSpec>,
}

/// A `--fail-if` condition and the functions it names.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckSpec {
    pub funcs: Vec<FuncId>,
    pub text: String,
}

/// The first host's side: the session's spec put, the other hosts' runs
/// taken as they come, and their leaving waited for at the end.
pub struct Gathering {
    fleet: Fleet,
    /// Hosts that joined, by name, and those of them that left.
    joined: BTreeSet<String>,
    left: BTreeSet<String>,
    /// Runs each host sent, by name.
    sent: BTreeMap<String, u32>,
}

impl Gathering {
    /// Connects to the server at `url` under a new session name.
    pub fn connect(url: &str) -> Result<Gathering, FleetError> {
        Ok(Gathering {
            fleet: Fleet::connect(url)?,
            joined: BTreeSet::new(),
            left: BTreeSet::new(),
            sent: BTreeMap::new(),
        })
    }

    pub fn session(&self) -> &str {
        self.fleet.session()
    }

    /// The reports that came (up to `wait` for the first), as runs; what
    /// the hosts said of themselves goes to `ui`.
    fn receive(
        &mut self,
        wait: Duration,
        ui: &mut dyn Progress,
    ) -> anyhow::Result<Vec<RecordedRun>> {
        let mut runs = Vec::new();
        let mut wait = wait;
        for _ in 0..REPORTS_A_LOOK {
            let Some((report, _)) = self.fleet.next_report(wait)? else { break };
            wait = Duration::ZERO;
            let RunReport { worker, host, run, presence, .. } = report;
            match (presence, run) {
                (Some(Presence::Joined { pid }), _) => {
                    ui.say(&format!("{worker} joined: pid {pid} on host {host}"));
                    self.joined.insert(worker);
                }
                (Some(Presence::Left { runs: n, why }), _) => {
                    ui.say(&format!(
                        "{worker} left ({why}) after sending {}",
                        crate::util::human::count(u64::from(n), "run")
                    ));
                    self.left.insert(worker);
                }
                (None, Ok(mut rec)) => {
                    rec.host = Some(crate::store::safe_host(&host));
                    *self.sent.entry(worker).or_default() += 1;
                    runs.push(rec);
                }
                (None, Err(why)) => ui.say(&format!("{worker}: {why}")),
            }
        }
        Ok(runs)
    }
}

impl Peers for Gathering {
    fn begin(&mut self, shared: &Shared<'_>) -> anyhow::Result<String> {
        let tracer = shared.tracer.spec();
        let files = FileId::of_traced(&tracer.functions, shared.program)?;
        let checks = shared
            .checks
            .iter()
            .map(|c| CheckSpec { funcs: c.funcs.clone(), text: c.text.clone() })
            .collect();
        let spec = AttachSpec {
            protocol: super::PROTOCOL,
            tracer,
            program: shared.program.to_owned(),
            files,
            unit: shared.unit,
            window_ms: u64::try_from(shared.window.as_millis()).unwrap_or(u64::MAX),
            checks,
        };
        self.fleet.put_body(serde_json::to_vec(&spec)?)?;
        let (url, session) = (self.fleet.url(), self.fleet.session());
        Ok(format!(
            "session {session} on {url}: other hosts join it with `aid-agent attach -p PID --fleet {url} --join {session}`"
        ))
    }

    fn take(&mut self, ui: &mut dyn Progress) -> anyhow::Result<Vec<RecordedRun>> {
        self.receive(Duration::ZERO, ui)
    }

    fn finish(&mut self, ui: &mut dyn Progress) -> anyhow::Result<Vec<RecordedRun>> {
        self.fleet.ask_to_stop();
        let mut runs = Vec::new();
        let began = Instant::now();
        let on = self.joined.difference(&self.left).count();
        if on > 0 {
            ui.say(&format!(
                "waiting for {} to send their last runs",
                crate::util::human::count(on as u64, "joined host")
            ));
        }
        while self.joined.difference(&self.left).next().is_some() && began.elapsed() < LEAVE_GRACE {
            runs.extend(self.receive(Duration::from_millis(250), ui)?);
        }
        // Runs sent just before a late leaving.
        runs.extend(self.receive(Duration::ZERO, ui)?);
        let silent: Vec<&String> = self.joined.difference(&self.left).collect();
        if !silent.is_empty() {
            ui.say(&format!(
                "{} did not say they left within {}: runs they had not sent are not in the session",
                crate::util::human::summarize(&silent),
                crate::util::human::duration(LEAVE_GRACE.as_nanos() as u64)
            ));
        }
        Ok(runs)
    }

    fn mark(&self) -> Option<crate::store::FleetMark> {
        (!self.joined.is_empty()).then(|| crate::store::FleetMark {
            url: self.fleet.url().to_owned(),
            workers: self.sent.clone(),
        })
    }
}

/// What `attach --join` was given.
pub struct JoinOptions {
    pub url: String,
    pub session: String,
    pub pid: u32,
    /// This host's name in the session (default: the host's name and the
    /// agent's pid).
    pub name: Option<String>,
    pub duration: Option<Duration>,
    pub debug: DebugSearch,
}

/// What a joined host sent.
#[derive(Debug)]
pub struct Joined {
    pub name: String,
    pub runs: u32,
    pub failing: u32,
    pub ended: &'static str,
    pub lost: u64,
}

/// Joins `opts.session` with process `opts.pid`: traces it with the
/// session's functions and sends each run, until the session ends, `cancel`
/// is set, the duration passes or the process exits.
pub fn join(
    opts: &JoinOptions,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Joined> {
    let name = super::member_name(opts.name.as_deref())?;
    let pid = opts.pid;
    proc::traceable(pid)?;
    if pid == std::process::id() {
        anyhow::bail!("pid {pid} is aid-agent itself: give the pid of the program to trace");
    }
    crate::bpf::preflight(crate::bpf::Needs::Trace)?;
    let bus = Bus::connect(&opts.url, &format!("aid-agent attach {name}"))?;
    let queues = bus.queues()?;
    let (sessions, key) = (queues.sessions.clone(), opts.session.clone());
    let read = bus.request("the session's spec", async move {
        sessions.entry(key).await.map_err(|e| e.to_string())
    })?;
    let spec: AttachSpec = match read {
        Some(e) if e.operation == kv::Operation::Put => serde_json::from_slice(&e.value)
            .map_err(|_| {
                anyhow::anyhow!(
                    "session {} on {} is not an attach session (or was started by another version of aid than {})",
                    opts.session,
                    opts.url,
                    env!("CARGO_PKG_VERSION")
                )
            })?,
        _ => anyhow::bail!(
            "no session {} on {}: give the name the first host's `attach --fleet` printed (a session ends with its first host)",
            opts.session,
            opts.url
        ),
    };
    if let Some(why) = super::protocol_mismatch(spec.protocol) {
        anyhow::bail!("session {}: {why}", opts.session);
    }
    same_files(pid, &spec).map_err(|why| anyhow::anyhow!("pid {pid}: {why}"))?;
    let mut tspec = spec.tracer.clone();
    tspec.scope = Scope::Process(pid);
    let names = Resolver::for_process_with(pid, &opts.debug)?.names();
    let mut tracer = Tracer::from_spec(tspec, names)?;
    let checks = spec
        .checks
        .iter()
        .map(|c| {
            let cond = FailIf::parse(&c.text)?.cond;
            Ok(ReturnCheck { funcs: c.funcs.clone(), cond, text: c.text.clone() })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ended = Arc::new(AtomicBool::new(false));
    let watcher =
        bus.spawn(watch_end(bus.client.clone(), cancel_subject(&opts.session), Arc::clone(&ended)));
    let mut sender = Sender {
        bus: &bus,
        session: &opts.session,
        name: &name,
        sessions: queues.sessions.clone(),
        ended: &ended,
        checked: Instant::now(),
        counters: Counters::default(),
        failed: None,
    };
    sender.tell(Presence::Joined { pid })?;
    let running = tracer.follow(pid, spec.unit, checks.clone())?;
    let traced = spec.tracer.functions.iter().filter(|f| !f.internal).count();
    ui.say(&format!(
        "joined session {} on {} as {name}: tracing pid {pid} ({}), {} thread(s), {}; Ctrl-C to stop",
        opts.session,
        opts.url,
        spec.program.display(),
        running.threads(),
        crate::util::human::count(traced as u64, "function")
    ));
    let how = Follow {
        pid,
        unit: spec.unit,
        checks: &checks,
        window: Duration::from_millis(spec.window_ms.max(1)),
        duration: opts.duration,
    };
    let followed = follow(running, &how, &mut sender, cancel, ui);
    watcher.abort();
    let why = match &followed {
        Ok(f) => f.ended.to_owned(),
        Err(e) => format!("failed: {e:#}"),
    };
    let runs = sender.counters.runs as u32;
    // Said even after an error, so the first host does not wait for it.
    let told = sender.tell(Presence::Left { runs, why });
    let Followed { ended, lost, .. } = followed?;
    if let Some(e) = sender.failed.take() {
        return Err(e.into());
    }
    told?;
    let failing = sender.counters.failing as u32;
    Ok(Joined { name, runs, failing, ended, lost })
}

/// Whether process `pid` maps every file of the session at its path, with
/// the first host's build-id; why not, in words.
fn same_files(pid: u32, spec: &AttachSpec) -> Result<(), String> {
    let mapped = proc::mapped_executables(pid);
    for want in &spec.files {
        if !mapped.contains(&want.path) {
            return Err(format!(
                "it does not run {} (no such file mapped): each host of a session runs the same build at the same path",
                want.path.display()
            ));
        }
        want.check_here("the first host's", "host")?;
    }
    Ok(())
}

/// A joined host's runs, sent to the session as they come.
struct Sender<'a> {
    bus: &'a Bus,
    session: &'a str,
    name: &'a str,
    sessions: kv::Store,
    /// Set when the first host asks the session's hosts to stop.
    ended: &'a AtomicBool,
    /// When the session's existence was last checked.
    checked: Instant,
    counters: Counters,
    failed: Option<FleetError>,
}

impl Sender<'_> {
    fn tell(&self, presence: Presence) -> Result<(), FleetError> {
        let mut report = RunReport {
            id: 0,
            worker: self.name.to_owned(),
            host: host_name(),
            run: Err(String::new()),
            presence: Some(presence),
        };
        self.bus.publish_report(self.session, 1, &mut report)
    }
}

impl Sink for Sender<'_> {
    fn store(&mut self, rec: RecordedRun) -> anyhow::Result<()> {
        self.counters.runs += 1;
        self.counters.failing += u64::from(rec.run.label == Label::Fail);
        let mut report = RunReport {
            id: self.counters.runs as u32,
            worker: self.name.to_owned(),
            host: host_name(),
            run: Ok(rec),
            presence: None,
        };
        if let Err(e) = self.bus.publish_report(self.session, 1, &mut report) {
            let line = e.to_string();
            self.failed.get_or_insert(e);
            anyhow::bail!("a run could not be sent: {line}");
        }
        Ok(())
    }

    fn look(&mut self, _ui: &mut dyn Progress) -> anyhow::Result<Option<&'static str>> {
        if self.ended.load(Ordering::SeqCst) {
            return Ok(Some("the session ended"));
        }
        if self.checked.elapsed() >= SESSION_CHECK {
            self.checked = Instant::now();
            let (sessions, key) = (self.sessions.clone(), self.session.to_owned());
            let gone = self.bus.block(async move {
                match sessions.entry(key).await {
                    Ok(None) => true,
                    Ok(Some(e)) => e.operation != kv::Operation::Put,
                    // The server away: not a sign of the session's end.
                    Err(_) => false,
                }
            });
            if gone == Some(true) {
                return Ok(Some("the session ended"));
            }
        }
        Ok(None)
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

/// Sets `ended` when a message comes on the session's cancel subject.
async fn watch_end(client: async_nats::Client, subject: String, ended: Arc<AtomicBool>) {
    let Ok(mut sub) = client.subscribe(subject).await else { return };
    if sub.next().await.is_some() {
        ended.store(true, Ordering::SeqCst);
    }
}
