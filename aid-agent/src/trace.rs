//! Observed runs: start the target held before exec, attach the probes to
//! its pid, release it, wait for it, collect its events and turn them into
//! a recorded run. One target at a time; the eBPF object is loaded once.

use std::{sync::atomic::AtomicBool, time::Duration};

use crate::{
    control::{self, ControlError, Controller, StopRecord},
    intervene::Plan,
    model::{FuncId, Function, Point, Run},
    probe::{EventStream, LoadOptions, ProbeError, Probes, Programs, Scope},
    recorder::{self, RecordedRun, Row},
    runner::{self, FailRule, RunError, Target},
    symbols::Resolver,
    unwind::Unwinder,
};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Control(#[from] ControlError),
}

/// How runs are judged and bounded.
#[derive(Clone, Debug)]
pub struct RunPolicy {
    pub rules: Vec<FailRule>,
    pub timeout: Duration,
}

/// Fields are public so callers can borrow them separately (recording
/// reads `functions` and `resolver` while `probes` changes).
pub struct Tracer {
    /// User functions first, then aid's internal ones.
    pub functions: Vec<Function>,
    pub pthread_create: Option<FuncId>,
    pub probes: Probes,
    pub stream: EventStream,
    pub resolver: Resolver,
    pub unwinder: Unwinder,
    pub stop_signal: nix::sys::signal::Signal,
    pub first_bytes: std::collections::HashMap<u32, Vec<u8>>,
}

impl Tracer {
    /// Loads the eBPF object and attaches it to `functions` (resolved by
    /// `resolver`), plus aid's own `pthread_create` probe to name threads:
    /// for the whole session, or to each run's target with
    /// [`Scope::Target`].
    pub fn new(
        mut resolver: Resolver,
        mut functions: Vec<Function>,
        load: LoadOptions,
        scope: Scope,
        programs: Programs,
    ) -> Result<Tracer, TraceError> {
        let pthread_create = resolver.pthread_create(functions.len() as FuncId).map(|f| {
            functions.push(f);
            (functions.len() - 1) as FuncId
        });
        let mut probes = Probes::load(load)?;
        if probes.kernel_writes_registers() {
            log::info!(
                "this kernel lets BPF write registers: return overrides need no thread stop"
            );
        } else {
            log::info!(
                "this kernel refuses BPF register writes: return overrides use ptrace stops"
            );
        }
        let stream = probes.event_stream();
        probes.attach(&functions, scope, programs)?;
        let stop_signal = nix::sys::signal::Signal::try_from(load.stop_signal)
            .unwrap_or(nix::sys::signal::SIGURG);
        Ok(Tracer {
            functions,
            pthread_create,
            probes,
            stream,
            resolver,
            unwinder: Unwinder::default(),
            stop_signal,
            first_bytes: Default::default(),
        })
    }

    /// Functions the user asked for (not aid's internal probes).
    pub fn user_functions(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| !f.internal)
    }

    /// Runs the target once under observation (no ptrace, no
    /// interventions) and records it.
    pub fn observe(
        &mut self,
        target: &Target,
        id: u32,
        policy: &RunPolicy,
        cancel: &AtomicBool,
    ) -> Result<RecordedRun, TraceError> {
        let mut child = self.start(target, false)?;
        let pid = child.pid;
        child.release()?;
        let exit = child.wait(policy.timeout, cancel)?;
        self.finish(id, pid, exit, policy)
    }

    /// Starts the target held before its exec and registers it with the
    /// probes (the stream is flushed first, so nothing of an earlier run
    /// is taken for this one).
    fn start(&mut self, target: &Target, intervene: bool) -> Result<runner::Spawned, TraceError> {
        let _stale = self.stream.flush();
        let child = runner::spawn_held(target)?;
        self.probes.begin_target(child.pid, intervene)?;
        Ok(child)
    }

    /// After the target ended: collects its events and counters, judges
    /// the run, and builds it.
    fn finish(
        &mut self,
        id: u32,
        pid: u32,
        exit: runner::Exit,
        policy: &RunPolicy,
    ) -> Result<RecordedRun, TraceError> {
        let events = self.stream.flush();
        self.probes.end_target(pid)?;
        let lost = self.probes.take_lost()?;
        let probe_errors = self.probes.take_errors()?;
        let (label, reason) = runner::judge(&exit, &policy.rules);
        Ok(self.assemble(id, pid, &events, exit, label, reason, lost, probe_errors))
    }

    /// Runs the target once as the ptrace tracer of all its threads, with
    /// the plan's actions installed in the kernel, and records it with what
    /// became of each intervention.
    pub fn intervene(
        &mut self,
        target: &Target,
        id: u32,
        policy: &RunPolicy,
        plan: &Plan,
        cancel: &AtomicBool,
    ) -> Result<RecordedRun, TraceError> {
        let mut child = self.start(target, true)?;
        let pid = child.pid;
        for (site, action, _) in &plan.actions {
            self.probes.set_action(*site, *action)?;
        }
        for site in &plan.watch {
            self.probes.watch(*site)?;
        }
        control::seize(pid)?;
        child.release()?;
        let started = std::time::Instant::now();
        let mut controller = Controller {
            probes: &mut self.probes,
            functions: &self.functions,
            unwinder: &mut self.unwinder,
            stop_signal: self.stop_signal,
            first_bytes: &mut self.first_bytes,
        };
        let driven = controller.drive(pid, policy.timeout, cancel)?;
        let mut exit = child.finish(driven.status);
        exit.timed_out = driven.timed_out;
        exit.wall_ns = started.elapsed().as_nanos() as u64;
        let mut rec = self.finish(id, pid, exit, policy)?;
        shift_held_rows(&mut rec.rows, &driven.stops, rec.start_ns);
        record_forced_returns(&mut rec.rows, &driven.stops, plan, &self.functions);
        rec.run.pauses = pauses(&driven.stops, &rec.run.threads, rec.start_ns);
        rec.run.calls = recorder::calls_from_rows(&rec.rows);
        recorder::apply_pauses(&mut rec.run.calls, &rec.run.pauses);
        rec.run.interventions = plan.outcome(&driven.stops);
        rec.run.noise = plan.noise.clone();
        for stop in driven.stops.iter().filter(|s| s.error.is_some()) {
            log::warn!(
                "run {id}: intervention at {:?} not applied: {}",
                stop.site,
                stop.error.as_deref().unwrap_or("")
            );
        }
        Ok(rec)
    }

    /// Builds the run from its events and how it ended.
    #[allow(clippy::too_many_arguments, reason = "to be replaced by a run request struct")]
    pub fn assemble(
        &self,
        id: u32,
        pid: u32,
        events: &[aid_common::Event],
        exit: runner::Exit,
        label: crate::model::Label,
        reason: String,
        lost: crate::probe::Lost,
        probe_errors: u64,
    ) -> RecordedRun {
        let resolver = &self.resolver;
        let symbolize = resolver.symbolizer();
        let ctx = recorder::Context {
            pid,
            functions: &self.functions,
            pthread_create: self.pthread_create,
            symbolize: &symbolize,
            start_ns: None,
            existing_threads: &[],
        };
        let rec = recorder::record(events, &ctx);
        let end_ns = rec.rows.last().map_or(0, |r| r.t_ns).max(exit.wall_ns);
        let run = Run {
            id,
            label,
            outcome: exit.outcome(reason),
            lost_events: lost.total(),
            lost_thread_records: lost.thread_records,
            complete: lost.total() == 0,
            threads: rec.threads,
            calls: recorder::calls_from_rows(&rec.rows),
            end_ns,
            interventions: Vec::new(),
            noise: Vec::new(),
            pauses: Vec::new(),
        };
        RecordedRun {
            run,
            rows: rec.rows,
            start_ns: rec.start_ns,
            orphan_exits: rec.orphan_exits,
            stdout: exit.stdout.tail().to_owned(),
            stderr: exit.stderr.tail().to_owned(),
            probe_errors,
        }
    }
}

/// A held thread's probe fired before the hold: the call really proceeded
/// (entered its body, or returned to its caller) only when released, at a
/// time taken on the events' own clock.
fn shift_held_rows(rows: &mut [Row], stops: &[StopRecord], start_ns: u64) {
    for stop in stops.iter().filter(|s| s.released_ns > 0) {
        let point = if stop.site.point == aid_common::SitePoint::ENTRY {
            Point::Entry
        } else {
            Point::Exit
        };
        if let Some(row) = rows.iter_mut().find(|r| {
            r.tid == stop.tid
                && r.func == stop.site.func
                && r.instance == stop.site.instance
                && r.point == point
        }) {
            row.t_ns = row.t_ns.max(stop.released_ns.saturating_sub(start_ns));
        }
    }
}

/// Stops that were only the agent's overhead (register edits, holds that
/// turned out not to be needed), as pauses of the thread's role.
fn pauses(
    stops: &[StopRecord],
    threads: &[crate::model::Thread],
    start_ns: u64,
) -> Vec<crate::model::Pause> {
    stops
        .iter()
        .filter(|s| !s.held && s.released_ns > s.probe_ns && s.probe_ns >= start_ns)
        .filter_map(|s| {
            let role = threads.iter().find(|t| t.tid == s.tid)?.role;
            Some(crate::model::Pause {
                role,
                at_ns: s.probe_ns - start_ns,
                dur_ns: s.released_ns - s.probe_ns,
            })
        })
        .collect()
}

/// The exit probe saw the value the function computed; after an override
/// the caller saw the forced one, and that is what the run records.
fn record_forced_returns(
    rows: &mut [Row],
    stops: &[StopRecord],
    plan: &Plan,
    functions: &[Function],
) {
    for stop in
        stops.iter().filter(|s| s.applied && s.action == aid_common::ActionKind::OVERRIDE_RETURN)
    {
        let Some((_, action, _)) = plan.actions.iter().find(|(k, _, _)| *k == stop.site) else {
            continue;
        };
        let Some(f) = functions.get(stop.site.func as usize) else { continue };
        if let Some(row) = rows.iter_mut().find(|r| {
            r.tid == stop.tid
                && r.func == stop.site.func
                && r.instance == stop.site.instance
                && r.point == Point::Exit
        }) {
            row.ret = f.ret.normalize(action.value);
        }
    }
}
