//! `attach` as a library call: trace a process that is already running,
//! for a while or until cancelled. With a unit function every invocation
//! of it is one run, stored as soon as it has settled; without, the
//! recording is cut into time windows (`--window`), each stored as soon as
//! it closes ([`super::window`]), so an agent killed mid-attach loses at
//! most the window it was in. Counters (runs seen, failing, events lost)
//! reach the front end at every look.

use std::{
    ops::ControlFlow,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    bpf::{LoadOptions, Lost},
    model::{EventRow, FuncId, Function, Label, RecordedRun},
    record::{
        fail::ReturnCheck,
        progress::Progress,
        start::{self, ProcessSpec},
        tracer::Running,
        window::{self, Window},
    },
    store::{Mode, Writer},
    symbols::DebugSearch,
    sys::{poll, proc},
};

/// The default `--window`.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(1);

pub struct AttachRequest {
    pub pid: u32,
    /// `--trace` patterns.
    pub trace: Vec<String>,
    /// Each invocation of this function is one run.
    pub unit: Option<String>,
    /// Without a unit: the length of each window (one run each).
    pub window: Duration,
    /// `--fail-if` conditions.
    pub fail_if: Vec<String>,
    /// Stop after this long (default: when cancelled or the process exits).
    pub duration: Option<Duration>,
    pub out: Option<PathBuf>,
    pub load: LoadOptions,
    /// Where separate debug information is looked for.
    pub debug: DebugSearch,
}

/// What was recorded.
#[derive(Clone, Debug)]
pub struct AttachSummary {
    pub out: PathBuf,
    pub recorded: usize,
    pub passed: u32,
    pub failed: u32,
    /// Why recording stopped: "stopped", "duration reached", "process exited".
    pub ended: &'static str,
    /// Units not recorded because they began before every probe was
    /// attached...
    pub partial_at_start: u64,
    /// ...or were still running when recording stopped.
    pub partial_at_end: u64,
    /// Events the kernel dropped.
    pub lost: u64,
    pub interrupted: bool,
    /// Of `recorded`, runs other hosts sent (`attach --fleet`).
    pub from_peers: u64,
}

/// The counters shown while an attach runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Runs stored: units, or closed windows.
    pub runs: u64,
    pub failing: u64,
    pub lost: u64,
}

impl Counters {
    /// "12 windows, 2 failing, 0 events lost".
    pub fn status(&self, noun: &str) -> String {
        let plural = if self.runs == 1 { "" } else { "s" };
        format!(
            "{} {noun}{plural}, {} failing, {} event{} lost",
            self.runs,
            self.failing,
            self.lost,
            if self.lost == 1 { "" } else { "s" }
        )
    }
}

/// Other hosts whose runs go into the same session (`attach --fleet`,
/// `fleet/attach.rs`): told what this attach traces, asked at each look
/// for the runs they sent, and at the end for the rest.
pub trait Peers {
    /// The session is set up here: what every host traces. A line for the
    /// user (how other hosts join).
    fn begin(&mut self, shared: &Shared<'_>) -> anyhow::Result<String>;
    /// Runs the other hosts sent since the last call (each with its host);
    /// what they said of themselves goes to `ui`.
    fn take(&mut self, ui: &mut dyn Progress) -> anyhow::Result<Vec<RecordedRun>>;
    /// Recording stopped here: the other hosts are asked to stop, and the
    /// runs they send until they have (or a grace period ends).
    fn finish(&mut self, ui: &mut dyn Progress) -> anyhow::Result<Vec<RecordedRun>>;
    /// The server and the runs each other host sent (session.json).
    fn mark(&self) -> Option<crate::store::FleetMark>;
}

/// What every host of an `attach --fleet` session traces.
pub struct Shared<'a> {
    pub tracer: &'a crate::record::tracer::Tracer,
    pub program: &'a std::path::Path,
    pub unit: Option<FuncId>,
    pub checks: &'a [ReturnCheck],
    pub window: Duration,
}

/// Where the runs of a followed process go: this host's session, or the
/// fleet's coordinator.
pub trait Sink {
    fn store(&mut self, rec: RecordedRun) -> anyhow::Result<()>;
    /// At each look; Some(why) ends the recording.
    fn look(&mut self, ui: &mut dyn Progress) -> anyhow::Result<Option<&'static str>>;
    /// Runs stored so far and how many of them failed.
    fn counters(&self) -> Counters;
}

/// How a followed process is cut into runs, and when following ends.
pub struct Follow<'a> {
    pub pid: u32,
    pub unit: Option<FuncId>,
    pub checks: &'a [ReturnCheck],
    pub window: Duration,
    pub duration: Option<Duration>,
}

/// How following ended.
pub struct Followed {
    /// "stopped", "duration reached", "process exited", or the sink's.
    pub ended: &'static str,
    pub partial_at_start: u64,
    pub partial_at_end: u64,
    pub lost: u64,
}

pub fn attach(
    req: &AttachRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
    mut peers: Option<&mut dyn Peers>,
) -> anyhow::Result<AttachSummary> {
    if req.window.is_zero() {
        anyhow::bail!("--window must be longer than 0");
    }
    let start::ProcessSession { mut tracer, writer, program, unit, checks } =
        start::process(&spec(req), &mut *ui)?;
    if let Some(peers) = peers.as_deref_mut() {
        let shared = Shared {
            tracer: &tracer,
            program: &program,
            unit,
            checks: &checks,
            window: req.window,
        };
        let line = peers.begin(&shared)?;
        ui.say(&line);
    }
    let names: Vec<String> = tracer.user_functions().map(|f| f.name.clone()).collect();
    let running = tracer.follow(req.pid, unit, checks.clone())?;
    let cut_into = if unit.is_some() {
        String::new()
    } else {
        format!(", one run per {}", humantime::format_duration(req.window))
    };
    ui.say(&format!(
        "attached to pid {} ({}), {} thread(s); tracing {}{cut_into}; Ctrl-C to stop",
        req.pid,
        program.display(),
        running.threads(),
        crate::util::human::summarize(&names)
    ));
    let functions = running.functions();
    let mut shelf = Shelf {
        writer,
        functions,
        counters: Counters::default(),
        next_id: peers.as_ref().map(|_| 0),
        peers,
        from_peers: 0,
    };
    let how =
        Follow { pid: req.pid, unit, checks: &checks, window: req.window, duration: req.duration };
    let f = follow(running, &how, &mut shelf, cancel, ui)?;
    if let Some(peers) = shelf.peers.take() {
        for rec in peers.finish(ui)? {
            shelf.from_peers += 1;
            shelf.store(rec)?;
        }
        if let Some(mark) = peers.mark() {
            shelf.writer.set_fleet(mark)?;
        }
    }
    let counters = shelf.counters;
    Ok(AttachSummary {
        out: shelf.writer.dir().to_owned(),
        recorded: shelf.writer.runs_written(),
        passed: (counters.runs - counters.failing) as u32,
        failed: counters.failing as u32,
        from_peers: shelf.from_peers,
        ended: f.ended,
        partial_at_start: f.partial_at_start,
        partial_at_end: f.partial_at_end,
        lost: f.lost,
        interrupted: cancel.load(Ordering::Relaxed),
    })
}

/// This host's session: each run written as it comes, numbered again in
/// the order written when other hosts' runs go into it too.
struct Shelf<'a, 'p> {
    writer: Writer,
    functions: &'a [Function],
    counters: Counters,
    /// With peers: the last number given.
    next_id: Option<u32>,
    peers: Option<&'p mut dyn Peers>,
    from_peers: u64,
}

impl Sink for Shelf<'_, '_> {
    fn store(&mut self, mut rec: RecordedRun) -> anyhow::Result<()> {
        if let Some(n) = &mut self.next_id {
            *n += 1;
            rec.run.id = *n;
        }
        self.counters.runs += 1;
        self.counters.failing += u64::from(rec.run.label == Label::Fail);
        self.writer
            .append(&rec, self.functions)
            .with_context(|| format!("saving run {}", rec.run.id))
    }

    fn look(&mut self, ui: &mut dyn Progress) -> anyhow::Result<Option<&'static str>> {
        let Some(peers) = self.peers.as_deref_mut() else { return Ok(None) };
        let came = peers.take(ui)?;
        self.from_peers += came.len() as u64;
        for rec in came {
            self.store(rec)?;
        }
        Ok(None)
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

/// Follows `running` until cancelled, the deadline, the process's exit or
/// the sink's word, each run (a unit, or a closed window) going to `sink`
/// as soon as it is whole; then removes the probes and sends the rest.
pub fn follow(
    mut running: Running<'_>,
    how: &Follow<'_>,
    sink: &mut dyn Sink,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Followed> {
    let (unit, checks, pid) = (how.unit, how.checks, how.pid);
    let noun = if unit.is_some() { "unit" } else { "window" };
    let functions = running.functions();
    let attach_ns = running.follower().start_ns();
    let window_ns = how.window.as_nanos() as u64;
    let window = Window::first(window_ns);
    let began = Instant::now();
    let began_ns = running.follower().now_ns();
    let mut lost_total = 0;
    let status = |sink: &dyn Sink, lost: u64| Counters { lost, ..sink.counters() }.status(noun);
    ui.begin(&format!("tracing pid {pid}"), None);
    ui.step_to(0, &status(sink, 0));
    // A look every UNIT_LOOK; the cancel flag (set by signal-hook on
    // Ctrl-C, ARCHITECTURE.md) and the process are checked at each, the
    // `-d` deadline ends the loop when it comes.
    let deadline = how.duration.map(|d| began + d);
    // Child processes the service started while traced (pids).
    let mut children: Vec<u32> = Vec::new();
    let every = running.look_every();
    let mut cut = Cutting { unit: unit.is_some(), functions, checks, attach_ns, window };
    let mut look = || -> anyhow::Result<Option<&'static str>> {
        cut.record(&mut running, sink)?;
        lost_total = running.follower().lost_total();
        for child in running.follower().take_children() {
            if children.is_empty() {
                ui.say(&format!(
                    "{}; further children are counted at the end",
                    children_note(pid, child)
                ));
            }
            children.push(child);
        }
        let said = sink.look(&mut *ui)?;
        ui.step_to(sink.counters().runs, &status(sink, lost_total));
        if said.is_some() {
            return Ok(said);
        }
        if cancel.load(Ordering::Relaxed) {
            return Ok(Some("stopped"));
        }
        if !proc::exists(pid) {
            return Ok(Some("process exited"));
        }
        Ok(None)
    };
    let ended = poll::look_every(every, deadline, || match look() {
        Ok(None) => ControlFlow::Continue(()),
        Ok(Some(ended)) => ControlFlow::Break(Ok(ended)),
        Err(e) => ControlFlow::Break(Err(e)),
    })
    .context("starting the look timer")?
    .unwrap_or(Ok(DURATION_REACHED))?;
    ui.end();
    if children.len() > 1 {
        ui.say(&children_count(pid, &children));
    }
    if running.functions().len() > 64 {
        ui.say(&format!("removing the probes of {} functions", running.functions().len()));
    }
    // The probes removed, what the ring still holds is recorded as the
    // reader drains it (within its backlog cap) and each run stored as it
    // is whole, until nothing came for DRAIN_QUIET looks; the last flush
    // takes the rest. A ring left full by a stall is never held at once.
    // `-d` is how long it records: a look that ended past the deadline
    // (late on a loaded machine) does not make it longer.
    let by = how.duration.filter(|_| ended == DURATION_REACHED);
    let stop_ns = running.detach_by(by.map(|d| began_ns + d.as_nanos() as u64));
    let mut quiet = 0;
    while quiet < DRAIN_QUIET {
        if cut.record(&mut running, sink)? == 0 {
            quiet += 1;
            std::thread::sleep(poll::EVENT_STREAM);
        } else {
            quiet = 0;
        }
    }
    let window = cut.window;
    let lost_before = running.follower().lost_total();
    let open_lost = running.follower().lost_during(window.start_ns, u64::MAX);
    let finished = running.finish(ended)?;
    if unit.is_some() {
        for rec in finished.runs {
            sink.store(rec)?;
        }
    } else if let Some(rest) = finished.runs.into_iter().next() {
        // The windows still open: up to the moment recording stopped
        // (rows of the probes' last moments included in the last one).
        let late = Lost {
            calls: open_lost.calls + finished.lost.saturating_sub(lost_before),
            thread_records: open_lost.thread_records,
        };
        let tail = Tail { checks, functions, attach_ns, stop_ns, lost: late };
        for rec in tail.windows(window, rest.rows, &rest.run.threads) {
            sink.store(rec)?;
        }
    }
    Ok(Followed {
        ended,
        partial_at_start: finished.partial - finished.partial_at_end,
        partial_at_end: finished.partial_at_end,
        lost: finished.lost,
    })
}

/// Why recording stopped when the `-d` deadline came.
const DURATION_REACHED: &str = "duration reached";

/// Looks in a row that took no event after which the ring of a detached
/// process counts as drained.
const DRAIN_QUIET: u32 = 3;

/// How a followed process's rows become runs: units, or windows cut one
/// after another from `window` on.
struct Cutting<'a> {
    unit: bool,
    functions: &'a [Function],
    checks: &'a [ReturnCheck],
    attach_ns: u64,
    window: Window,
}

impl Cutting<'_> {
    /// Records the events taken, step by step ([`crate::record::follow::LOOK_STEP`]),
    /// and stores in `sink` each run finished after every step; how many
    /// events it took.
    fn record(&mut self, running: &mut Running<'_>, sink: &mut dyn Sink) -> anyhow::Result<u64> {
        let before = running.follower().taken();
        loop {
            let more = running.look_step()?;
            let follower = running.follower();
            if self.unit {
                for rec in follower.finished_units(poll::UNIT_SETTLE) {
                    sink.store(rec)?;
                }
            } else {
                // A window closes once nothing recorded inside it can
                // still be on its way.
                let settled = follower.settled_ns(poll::UNIT_SETTLE);
                while self.window.end_ns <= settled {
                    let (rows, threads) = follower.take_rows_before(self.window.end_ns);
                    let lost = follower.lost_during(self.window.start_ns, self.window.end_ns);
                    let cx = window::Cut {
                        threads: &threads,
                        functions: self.functions,
                        checks: self.checks,
                        attach_ns: self.attach_ns,
                        lost,
                    };
                    sink.store(window::cut(self.window, rows, &cx))?;
                    self.window = self.window.next();
                }
            }
            if !more {
                return Ok(running.follower().taken() - before);
            }
        }
    }
}

/// What `attach` asks of the process start: the request's patterns,
/// unit, failure conditions and output, in attach mode (nothing is safe to
/// force: attach never intervenes).
fn spec(req: &AttachRequest) -> ProcessSpec<'_> {
    ProcessSpec {
        mode: Mode::Attach,
        pid: req.pid,
        trace: &req.trace,
        unit: req.unit.as_deref(),
        fail_if: &req.fail_if,
        safe: &[],
        out: req.out.as_deref(),
        load: req.load,
        debug: &req.debug,
    }
}

/// The line at the end that counts the child processes the service
/// started while traced, when there was more than the one said at once.
fn children_count(pid: u32, children: &[u32]) -> String {
    let pids: Vec<String> = children.iter().map(u32::to_string).collect();
    format!(
        "pid {pid} started {} child processes while traced (pid {}); their calls are not recorded",
        pids.len(),
        crate::util::human::summarize(&pids)
    )
}

/// What becomes of a child process of an attached service: probes are
/// scoped to the process aid attached to (docs/probes.md), and a child
/// is another process.
pub fn children_note(pid: u32, child: u32) -> String {
    format!(
        "pid {pid} started a child process (pid {child}): aid traces pid {pid} only, so the child's calls are not recorded (to trace it while it runs: aid-agent attach -p {child})"
    )
}

/// The windows left open when recording stopped.
struct Tail<'a> {
    checks: &'a [ReturnCheck],
    functions: &'a [Function],
    attach_ns: u64,
    /// When recording stopped (process time).
    stop_ns: u64,
    /// Losses not yet charged to a closed window (all go to the last one).
    lost: Lost,
}

impl Tail<'_> {
    /// `first`, the window open at the stop, and any after it up to the
    /// stop; the last one ends at the stop (or at the last row, recorded
    /// while the probes were being removed) and holds what is left.
    fn windows(
        &self,
        mut window: Window,
        mut rows: Vec<EventRow>,
        threads: &[crate::model::Thread],
    ) -> Vec<RecordedRun> {
        let mut out = Vec::new();
        loop {
            let last = window.end_ns >= self.stop_ns;
            let taken: Vec<EventRow> = if last {
                let end = rows.iter().map(|r| r.t_ns + 1).max().unwrap_or(0);
                window.end_ns = self.stop_ns.max(end).max(window.start_ns + 1);
                std::mem::take(&mut rows)
            } else {
                let (taken, kept) = rows.into_iter().partition(|r| r.t_ns < window.end_ns);
                rows = kept;
                taken
            };
            // Upper bound: every tail window may have lost them (record/lost.rs).
            let lost = self.lost;
            let cx = window::Cut {
                threads,
                functions: self.functions,
                checks: self.checks,
                attach_ns: self.attach_ns,
                lost,
            };
            out.push(window::cut(window, taken, &cx));
            if last {
                return out;
            }
            window = window.next();
        }
    }
}
