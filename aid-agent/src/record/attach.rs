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
    model::{EventRow, Function, Label, RecordedRun},
    record::{
        fail::ReturnCheck,
        progress::Progress,
        start::{self, ProcessSpec},
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

pub fn attach(
    req: &AttachRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<AttachSummary> {
    if req.window.is_zero() {
        anyhow::bail!("--window must be longer than 0");
    }
    let start::ProcessSession { mut tracer, mut writer, program, unit, checks } =
        start::process(&spec(req), &mut *ui)?;
    let names: Vec<String> = tracer.user_functions().map(|f| f.name.clone()).collect();
    let mut running = tracer.follow(req.pid, unit, checks.clone())?;
    let noun = if unit.is_some() { "unit" } else { "window" };
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
    let mut counters = Counters::default();
    let store = |rec: &RecordedRun, writer: &mut Writer, counters: &mut Counters| {
        counters.runs += 1;
        counters.failing += u64::from(rec.run.label == Label::Fail);
        writer.append(rec, functions).with_context(|| format!("saving run {}", rec.run.id))
    };
    let attach_ns = running.follower().start_ns();
    let window_ns = req.window.as_nanos() as u64;
    let mut window = Window::first(window_ns);
    let began = Instant::now();
    ui.begin(&format!("tracing pid {}", req.pid), None);
    ui.step_to(0, &counters.status(noun));
    // A look every UNIT_LOOK; the cancel flag (set by signal-hook on
    // Ctrl-C, ARCHITECTURE.md) and the process are checked at each, the
    // `-d` deadline ends the loop when it comes.
    let deadline = req.duration.map(|d| began + d);
    // Child processes the service started while traced (pids).
    let mut children: Vec<u32> = Vec::new();
    let every = running.look_every();
    let mut look = || -> anyhow::Result<Option<&'static str>> {
        running.look()?;
        let follower = running.follower();
        if unit.is_some() {
            for rec in follower.finished_units(poll::UNIT_SETTLE) {
                store(&rec, &mut writer, &mut counters)?;
            }
        } else {
            // A window closes once nothing recorded inside it can still
            // be on its way.
            let settled = follower.now_ns().saturating_sub(poll::UNIT_SETTLE.as_nanos() as u64);
            while window.end_ns <= settled {
                let (rows, threads) = follower.take_rows_before(window.end_ns);
                let lost = follower.lost_during(window.start_ns, window.end_ns);
                let cx =
                    window::Cut { threads: &threads, functions, checks: &checks, attach_ns, lost };
                store(&window::cut(window, rows, &cx), &mut writer, &mut counters)?;
                window = window.next();
            }
        }
        counters.lost = running.follower().lost_total();
        for child in running.follower().take_children() {
            if children.is_empty() {
                ui.say(&format!(
                    "{}; further children are counted at the end",
                    children_note(req.pid, child)
                ));
            }
            children.push(child);
        }
        ui.step_to(counters.runs, &counters.status(noun));
        if cancel.load(Ordering::Relaxed) {
            return Ok(Some("stopped"));
        }
        if !proc::exists(req.pid) {
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
    .unwrap_or(Ok("duration reached"))?;
    ui.end();
    if children.len() > 1 {
        ui.say(&children_count(req.pid, &children));
    }
    if running.functions().len() > 64 {
        ui.say(&format!("removing the probes of {} functions", running.functions().len()));
    }
    let stop_ns = running.follower().now_ns();
    let lost_before = running.follower().lost_total();
    let open_lost = running.follower().lost_during(window.start_ns, u64::MAX);
    let finished = running.finish(ended)?;
    if unit.is_some() {
        for rec in &finished.runs {
            store(rec, &mut writer, &mut counters)?;
        }
    } else if let Some(rest) = finished.runs.into_iter().next() {
        // The windows still open: up to the moment recording stopped
        // (rows of the probes' last moments included in the last one).
        let late = Lost {
            calls: open_lost.calls + finished.lost.saturating_sub(lost_before),
            thread_records: open_lost.thread_records,
        };
        let tail = Tail { checks: &checks, functions, attach_ns, stop_ns, lost: late };
        for rec in tail.windows(window, rest.rows, &rest.run.threads) {
            store(&rec, &mut writer, &mut counters)?;
        }
    }
    Ok(AttachSummary {
        out: writer.dir().to_owned(),
        recorded: writer.runs_written(),
        passed: (counters.runs - counters.failing) as u32,
        failed: counters.failing as u32,
        ended,
        partial_at_start: finished.partial - finished.partial_at_end,
        partial_at_end: finished.partial_at_end,
        lost: finished.lost,
        interrupted: cancel.load(Ordering::Relaxed),
    })
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
