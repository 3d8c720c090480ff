//! Debugging a running service: each invocation of the unit function is
//! one run. Units are observed as they come; then each question of the
//! causal engine is answered by installing the interventions in the
//! kernel and judging the next unit that starts after that — the process
//! is never restarted. It is ptrace'd only while interventions are
//! installed and released (not killed) at the end, whatever happens.

use std::{
    collections::{BTreeSet, VecDeque},
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::bail;
use nix::unistd::Pid;

use super::{DebugOptions, Debugged, beside, debug, source::RunSource};
use crate::{
    bpf::LoadOptions,
    intervene::control::Flow,
    intervene::{Plan, Reach},
    model::{FuncId, Function, Noise, RecordedRun},
    record::{
        Interrupted,
        progress::Progress,
        start::{self, ProcessSpec},
        tracer::Running,
    },
    store::Mode,
    sys::{poll, proc, ptrace},
};

/// The units of a running process.
pub struct ServiceSource<'t> {
    running: Running<'t>,
    unit: FuncId,
    /// Longest wait for one unit to complete.
    unit_timeout: Duration,
    /// Units cut out but not yet handed to the pipeline.
    waiting: VecDeque<RecordedRun>,
    last_unit: Instant,
    /// Threads traced with ptrace while interventions are installed.
    traced: BTreeSet<Pid>,
    intervening: bool,
}

impl<'t> ServiceSource<'t> {
    /// `running` must watch units of `unit`.
    pub fn new(running: Running<'t>, unit: FuncId, unit_timeout: Duration) -> Self {
        ServiceSource {
            running,
            unit,
            unit_timeout,
            waiting: VecDeque::new(),
            last_unit: Instant::now(),
            traced: BTreeSet::new(),
            intervening: false,
        }
    }
}

impl RunSource for ServiceSource<'_> {
    fn noun(&self) -> &'static str {
        "unit"
    }

    fn functions(&self) -> &[Function] {
        self.running.functions()
    }

    fn reach(&self) -> Reach {
        Reach::UNIT_THREAD
    }

    fn can_amplify(&self) -> bool {
        false
    }

    fn hint_no_failure(&self) -> String {
        ": check --fail-if, or observe longer with --runs".into()
    }

    fn hint_all_failed(&self) -> &'static str {
        ""
    }

    fn observe(
        &mut self,
        _noise: &[Noise],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Option<RecordedRun>> {
        let pid = self.running.pid();
        loop {
            if let Some(rec) = self.waiting.pop_front() {
                self.last_unit = Instant::now();
                return Ok(Some(rec));
            }
            if cancel.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if !proc::exists(pid) {
                bail!("pid {pid} exited during observation");
            }
            if self.last_unit.elapsed() > self.unit_timeout {
                bail!(
                    "no call of the unit function completed in {:?}: is the service receiving work?",
                    self.unit_timeout
                );
            }
            std::thread::sleep(poll::UNIT_LOOK);
            self.running.look()?;
            let units = self.running.watcher().finished_units(poll::UNIT_SETTLE);
            self.waiting.extend(units);
        }
    }

    fn begin_interventions(&mut self) -> anyhow::Result<()> {
        self.traced = ptrace::seize_running(self.running.pid())?;
        self.intervening = true;
        let probes = self.running.probes();
        probes.set_live_unit(Some(self.unit))?;
        probes.set_intervene(true)?;
        Ok(())
    }

    fn intervene(&mut self, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        let pid = self.running.pid();
        let probes = self.running.probes();
        probes.clear_actions()?;
        for (site, action, _) in &plan.actions {
            probes.set_action(*site, *action)?;
        }
        // Only a unit that starts after this moment has every action in place.
        self.running.watcher().restart_units();
        let waited = Instant::now();
        let mut last_look = Instant::now();
        let mut found: Option<RecordedRun> = None;
        let mut timed_out = false;
        let mut failed_look = None;
        let mut interrupted = false;
        let unit_timeout = self.unit_timeout;
        let served =
            self.running.serve(std::mem::take(&mut self.traced), &mut |watcher, probes| {
                if cancel.load(Ordering::Relaxed) {
                    interrupted = true;
                    return Flow::Stop;
                }
                if last_look.elapsed() < poll::INTERVENED_UNIT_LOOK {
                    return Flow::Continue;
                }
                last_look = Instant::now();
                if let Err(e) = watcher.look(probes) {
                    failed_look = Some(e);
                    return Flow::Stop;
                }
                if let Some(u) =
                    watcher.finished_units(poll::INTERVENED_UNIT_SETTLE).into_iter().next()
                {
                    found = Some(u);
                    return Flow::Stop;
                }
                if waited.elapsed() > unit_timeout {
                    timed_out = true;
                    return Flow::Stop;
                }
                Flow::Continue
            })?;
        self.traced = served.traced;
        if let Some(e) = failed_look {
            return Err(e.into());
        }
        if served.status.is_some() {
            bail!("pid {pid} exited while aid was intervening");
        }
        if interrupted {
            return Err(Interrupted("interrupted by the user".into()).into());
        }
        if timed_out {
            bail!(
                "no unit started and completed within {unit_timeout:?} after the interventions were installed"
            );
        }
        let Some(mut rec) = found else { bail!("intervening on pid {pid} stopped without a unit") };
        // What was done in this unit: the stops on its thread in its window.
        let tid = rec.run.threads.iter().find(|t| t.role == 0).map_or(0, |t| t.tid);
        let (lo, hi) = (rec.start_ns, rec.start_ns + rec.run.end_ns);
        let stops: Vec<_> = served
            .stops
            .into_iter()
            .filter(|s| s.tid == tid && s.probe_ns >= lo && s.probe_ns <= hi)
            .collect();
        rec.run.interventions = plan.outcome(&stops);
        Ok(rec)
    }

    /// Removes every action and releases the process: it keeps running.
    fn end_interventions(&mut self) {
        if !self.intervening {
            return;
        }
        self.intervening = false;
        let probes = self.running.probes();
        let _ = probes.clear_actions();
        let _ = probes.set_intervene(false);
        let _ = probes.set_live_unit(None);
        let traced = std::mem::take(&mut self.traced);
        self.running.release(&traced);
    }
}

impl Drop for ServiceSource<'_> {
    fn drop(&mut self) {
        // An error or a panic in the engine must not leave the service
        // stopped or intervened on.
        self.end_interventions();
    }
}

/// `debug --pid PID --unit FN --fail-if ...`.
pub struct ServiceRequest {
    pub pid: u32,
    /// `--trace` patterns.
    pub trace: Vec<String>,
    /// The function each invocation of which is one run.
    pub unit: String,
    /// When a unit failed.
    pub fail_if: Vec<String>,
    /// `--safe` patterns (also in `options.safe`).
    pub safe: Vec<String>,
    /// Longest wait for a unit to complete.
    pub unit_timeout: Duration,
    pub out: Option<PathBuf>,
    pub load: LoadOptions,
    pub options: DebugOptions,
    /// `--patterns` (see `ProgramRequest::patterns`).
    pub patterns: Option<PathBuf>,
}

/// Starts the session on the running process, debugs it on its later
/// units, and leaves it running, untraced.
pub fn debug_service(
    req: &ServiceRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Debugged> {
    let patterns = match &req.patterns {
        Some(p) => Some((p.clone(), beside::load_patterns(p)?)),
        None => None,
    };
    let spec = ProcessSpec {
        mode: Mode::Debug,
        pid: req.pid,
        trace: &req.trace,
        unit: Some(&req.unit),
        fail_if: &req.fail_if,
        safe: &req.safe,
        out: req.out.as_deref(),
        load: req.load,
        debug: &crate::symbols::DebugSearch::default(),
    };
    let start::ProcessSession { mut tracer, mut writer, program, unit, checks } =
        start::process(&spec, &mut *ui)?;
    let Some(unit) = unit else { bail!("--unit `{}` names no function", req.unit) };
    ui.say(&format!(
        "debugging pid {} ({}): each call of {} is one run",
        req.pid,
        program.display(),
        req.unit
    ));
    let running = tracer.watch(req.pid, Some(unit), checks)?;
    let mut source = ServiceSource::new(running, unit, req.unit_timeout);
    let diagnosis = debug(&mut source, &mut writer, &req.options, cancel, ui)?;
    drop(source);
    drop(tracer);
    let beside = beside::beside(
        &diagnosis.session,
        &program,
        &req.options.safe,
        patterns.as_ref().map(|(p, f)| (p.as_path(), f)),
    );
    Ok(Debugged { diagnosis, out: writer.dir().to_owned(), beside })
}
