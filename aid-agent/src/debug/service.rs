//! Debugging a running service: `aid-agent debug --pid PID --unit FN
//! --fail-if ...`. Each invocation of FN is one run. aid watches units until
//! it has enough passing and failing ones, learns the predicates, and then
//! answers the causal engine's questions by installing the interventions in
//! the kernel and judging the next unit that starts after that — the
//! process is never restarted. It is ptrace'd only during the intervention
//! phase and released (not killed) at the end, whatever happens.

use std::{
    collections::BTreeSet,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::bail;
use nix::unistd::Pid;

use crate::{
    bpf::monotonic_ns,
    causal::{self, Observation, Oracle},
    debug::oracle::OracleRun,
    debug::{self, DebugOptions, Diagnosis, Observed, Progress},
    intervene::Plan,
    model::{FuncId, Label, Run, Session},
    predicates::{Catalog, PredId},
    record::recorder::{self, Recorder},
    record::tracer::Tracer,
    record::units::{ReturnCheck, Splitter, Unit},
    store::Writer,
    sys::ptrace::{self, Controller, Flow},
};

/// The live process and how its units are recognised.
pub struct Service {
    pub pid: u32,
    pub unit: FuncId,
    pub conditions: Vec<ReturnCheck>,
    /// Threads that existed at attach time, main first, with names.
    pub threads: Vec<(u32, String)>,
    /// Longest wait for one unit to complete.
    pub unit_timeout: Duration,
}

pub fn debug_live(
    tracer: &mut Tracer,
    service: &Service,
    writer: &mut Writer,
    opts: &DebugOptions,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Diagnosis> {
    let start_ns = monotonic_ns();
    let tids: Vec<u32> = service.threads.iter().map(|t| t.0).collect();
    tracer.probes.begin_running_target(service.pid, &tids, false)?;
    let attached_ns = monotonic_ns() - start_ns;
    let Tracer {
        functions,
        pthread_create,
        probes,
        stream,
        resolver,
        unwinder,
        stop_signal,
        first_bytes,
    } = tracer;
    let resolver = &*resolver;
    let symbolize = resolver.symbolizer();
    let ctx = recorder::Context {
        pid: service.pid,
        functions,
        pthread_create: *pthread_create,
        symbolize: &symbolize,
        start_ns: Some(start_ns),
        existing_threads: &service.threads,
    };
    let mut rec = Recorder::new(&ctx);
    let mut next_id = 1u32;

    // Observation: units as they come.
    let mut basis: Vec<Run> = Vec::new();
    let mut observed = Observed::default();
    let mut splitter = Splitter::new(service.unit, service.conditions.clone(), attached_ns);
    let bar = ui.bar(u64::from(opts.max_runs), "observing units");
    let mut last_unit = Instant::now();
    loop {
        let (failing, passing) = (observed.failing, observed.passing);
        if (failing >= opts.min_failing && passing >= opts.min_passing)
            || observed.runs >= opts.max_runs
        {
            break;
        }
        if cancel.load(Ordering::Relaxed) {
            bail!(
                "interrupted by the user during observation; the {} unit(s) so far are saved",
                observed.runs
            );
        }
        if !crate::sys::proc::exists(service.pid) {
            bail!("pid {} exited during observation", service.pid);
        }
        if last_unit.elapsed() > service.unit_timeout {
            bail!(
                "no call of the unit function completed in {:?}: is the service receiving work?",
                service.unit_timeout
            );
        }
        std::thread::sleep(Duration::from_millis(50));
        rec.push(&stream.try_take());
        let lost = probes.take_lost()?.total();
        let now = monotonic_ns() - start_ns;
        let threads = rec.threads().to_vec();
        for u in splitter.complete(
            rec.rows(),
            &threads,
            functions,
            now.saturating_sub(100_000_000),
            &mut next_id,
        ) {
            last_unit = Instant::now();
            let mut u = u;
            if lost > 0 {
                u.run.lost_events = lost;
                u.run.complete = false;
                observed.incomplete += 1;
            }
            writer.append(&u.stored(start_ns), functions)?;
            observed.runs += 1;
            bar.inc(1);
            if !u.run.complete {
                continue;
            }
            match u.run.label {
                Label::Fail => observed.failing += 1,
                Label::Pass => observed.passing += 1,
            }
            basis.push(u.run);
        }
    }
    bar.finish_and_clear();
    if observed.failing == 0 {
        bail!(
            "no unit failed in {} units: check --fail-if, or observe longer with --runs",
            observed.runs
        );
    }
    if observed.passing == 0 {
        bail!(
            "every one of {} units failed: aid needs passing units to compare with",
            observed.runs
        );
    }
    observed.analysed = basis.len() as u32;
    ui.say(&format!(
        "observed {} units: {} failing, {} passing",
        observed.runs, observed.failing, observed.passing
    ));

    let session = Session { functions: functions.clone(), runs: basis };
    let analysis = debug::analyse(&session, opts, true, ui)?;
    if analysis.candidates.is_empty() || cancel.load(Ordering::Relaxed) {
        return Ok(Diagnosis {
            observed,
            analysis,
            discovery: None,
            tagt: None,
            oracle_runs: Vec::new(),
        });
    }
    let config = debug::engine_config(&analysis, opts, ui)?;
    let traced = ptrace::seize_running(service.pid)?;
    probes.set_live_unit(Some(service.unit))?;
    probes.set_intervene(true)?;
    let progress = ui.bar(0, "intervening");
    let mut oracle = UnitOracle {
        controller: Controller {
            probes,
            functions,
            unwinder,
            stop_signal: *stop_signal,
            first_bytes,
        },
        rec: &mut rec,
        stream,
        service,
        catalog: &analysis.catalog,
        writer,
        hold_timeout: opts.hold_timeout,
        cancel,
        start_ns,
        next_id,
        traced,
        log: Vec::new(),
        progress: progress.clone(),
    };
    let discovery = causal::discover(&analysis.dag, opts.strategy, &mut oracle, &config);
    progress.finish_and_clear();
    let log = std::mem::take(&mut oracle.log);
    oracle.finish();
    drop(oracle);
    let (discovery, tagt) = debug::conclude(&analysis, discovery, &config, opts)?;
    Ok(Diagnosis { observed, analysis, discovery: Some(discovery), tagt, oracle_runs: log })
}

/// Answers the engine with units of the running service.
struct UnitOracle<'a, 'c> {
    controller: Controller<'a>,
    rec: &'a mut Recorder<'c>,
    stream: &'a crate::bpf::EventStream,
    service: &'a Service,
    catalog: &'a Catalog,
    writer: &'a mut Writer,
    hold_timeout: Duration,
    cancel: &'a AtomicBool,
    start_ns: u64,
    next_id: u32,
    traced: BTreeSet<Pid>,
    log: Vec<OracleRun>,
    progress: indicatif::ProgressBar,
}

impl UnitOracle<'_, '_> {
    /// Removes every action and releases the process: it keeps running.
    fn finish(&mut self) {
        let probes = &mut *self.controller.probes;
        let _ = probes.clear_actions();
        let _ = probes.set_intervene(false);
        let _ = probes.set_live_unit(None);
        ptrace::release_running(probes, &self.traced, self.controller.stop_signal);
        self.traced.clear();
    }
}

impl Drop for UnitOracle<'_, '_> {
    fn drop(&mut self) {
        // Idempotent: an error or a panic in the engine must not leave the
        // service stopped or intervened on.
        self.finish();
    }
}

impl Oracle for UnitOracle<'_, '_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let interventions: Vec<_> =
            group.iter().filter_map(|p| self.catalog.get(*p)?.intervention.clone()).collect();
        let plan = Plan::new(&interventions, self.hold_timeout);
        let probes = &mut *self.controller.probes;
        probes.clear_actions()?;
        for (site, action, _) in &plan.actions {
            probes.set_action(*site, *action)?;
        }
        // Only a unit that starts after this moment has every action in place.
        let installed = monotonic_ns() - self.start_ns;
        let mut splitter =
            Splitter::new(self.service.unit, self.service.conditions.clone(), installed);
        let mut next_id = self.next_id;
        let waited = Instant::now();
        let mut found: Option<Unit> = None;
        let mut timed_out = false;
        let (rec, stream, functions) = (&mut *self.rec, self.stream, self.controller.functions);
        let mut last_look = Instant::now();
        let served = self.controller.serve(
            self.service.pid,
            std::mem::take(&mut self.traced),
            &mut |_| {
                // Stops are served every few hundred µs; units only need a look
                // every few ms.
                if last_look.elapsed() < Duration::from_millis(5) {
                    return Flow::Continue;
                }
                last_look = Instant::now();
                rec.push(&stream.try_take());
                let now = monotonic_ns();
                let threads = rec.threads().to_vec();
                let cutoff = now.saturating_sub(self.start_ns).saturating_sub(20_000_000);
                if let Some(u) = splitter
                    .complete(rec.rows(), &threads, functions, cutoff, &mut next_id)
                    .into_iter()
                    .next()
                {
                    found = Some(u);
                    return Flow::Stop;
                }
                if waited.elapsed() > self.service.unit_timeout {
                    timed_out = true;
                    return Flow::Stop;
                }
                Flow::Continue
            },
        )?;
        self.traced = served.traced;
        if served.status.is_some() {
            bail!("pid {} exited while aid was intervening", self.service.pid);
        }
        if timed_out {
            bail!(
                "no unit started and completed within {:?} after the interventions were installed",
                self.service.unit_timeout
            );
        }
        let mut unit = found.expect("a unit");
        self.next_id = next_id;
        // What was done in this unit: the stops on its thread in its window.
        let tid = unit.run.threads.iter().find(|t| t.role == 0).map_or(0, |t| t.tid);
        let (lo, hi) =
            (self.start_ns + unit.start_ns, self.start_ns + unit.start_ns + unit.run.end_ns);
        let stops: Vec<_> = served
            .stops
            .into_iter()
            .filter(|s| s.tid == tid && s.probe_ns >= lo && s.probe_ns <= hi)
            .collect();
        unit.run.interventions = plan.outcome(&stops);
        let truth = self.catalog.evaluate(&unit.run);
        let valid =
            unit.run.complete && unit.run.interventions.iter().all(|a| a.applied && !a.timed_out);
        self.writer.append(&unit.stored(self.start_ns), functions)?;
        let obs = Observation::from_truth(&truth, self.catalog.failure(), valid);
        self.log.push(OracleRun {
            run: unit.run.id,
            group: group.clone(),
            failed: obs.failed,
            valid,
            held: obs.held.clone(),
        });
        self.progress.inc(1);
        Ok(obs)
    }
}
