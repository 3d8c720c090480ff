//! A program's runs made by the [`Tracer`]: one observed (no ptrace,
//! probes only), or intervened on as the ptrace tracer of all its threads
//! (the plan's stops served), each recorded from its events and how it
//! ended.

use std::{
    collections::{BTreeSet, HashMap},
    sync::atomic::{AtomicBool, Ordering},
};

use nix::sys::wait::WaitStatus;

use super::{RunHook, TraceError, Tracer};
use crate::{
    bpf::{PROGRAM_BACKLOG, SyncProbes},
    intervene::{
        Plan,
        control::{Controller, Flow},
        one_cpu,
    },
    model::{NoiseAction, RecordedRun, Role, Run, calls_from_rows, paired_calls},
    record::{
        fail::{RunPolicy, judge},
        hang, lost,
        recorder::{self, Symbolize},
        stops,
    },
    sys::{
        hang::HangCheck,
        ptrace,
        spawn::{self, Target},
    },
};

struct NoHook;

impl RunHook for NoHook {}

impl<S: Symbolize> Tracer<S> {
    /// Runs the target once under observation (no ptrace, no
    /// interventions) and records it. A run cut short by `cancel` is kept
    /// but marked incomplete: it is never evidence.
    pub fn observe(
        &mut self,
        target: &Target,
        id: u32,
        policy: &RunPolicy,
        cancel: &AtomicBool,
    ) -> Result<RecordedRun, TraceError> {
        if self.probes.repairs_unwind() {
            // Its threads stop for the agent when they unwind.
            return self.served(target, id, policy, &Plan::default(), cancel, &mut NoHook, false);
        }
        self.probes.set_sync_points(self.sync_probes(false));
        let t = std::time::Instant::now();
        let mut child = self.start(target, false)?;
        let started = t.elapsed();
        let pid = child.pid;
        child.release()?;
        let exec = t.elapsed();
        let exit = child.wait(policy.timeout, policy.hang_after, cancel)?;
        let ended = t.elapsed();
        let mut rec = self.finish(id, pid, exit, policy)?;
        if self.sync_in_every_run {
            rec.sync_steps = self.sync_steps(&rec.run.threads);
        }
        log::debug!(
            "run {id}: held child and probes {started:.1?}, exec {exec:.1?}, end {ended:.1?}, recorded {:.1?}",
            t.elapsed()
        );
        mark_interrupted(&mut rec.run, cancel);
        Ok(rec)
    }

    /// Starts the target held before its exec and registers it with the
    /// probes (the stream is flushed first, so nothing of an earlier run
    /// is taken for this one).
    fn start(&mut self, target: &Target, intervene: bool) -> Result<spawn::Spawned, TraceError> {
        let _stale = self.stream.flush();
        self.stream.set_backlog_cap(Some(PROGRAM_BACKLOG));
        let child = spawn::spawn_held(target)?;
        let started = std::time::Instant::now();
        self.probes.begin_target(child.pid, intervene)?;
        log::info!(
            "pid {}: probes attached in {:.3} ms",
            child.pid,
            started.elapsed().as_secs_f64() * 1e3
        );
        Ok(child)
    }

    /// After the target ended: collects its events and counters, judges
    /// the run, and builds it.
    fn finish(
        &mut self,
        id: u32,
        pid: u32,
        exit: spawn::Exit,
        policy: &RunPolicy,
    ) -> Result<RecordedRun, TraceError> {
        let events = self.stream.flush();
        let started = std::time::Instant::now();
        self.probes.end_target(pid)?;
        log::info!(
            "pid {pid}: probes handed to the background for removal in {:.3} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        let lost = self.probes.take_lost()?;
        let probe_errors = self.probes.take_errors()?;
        let (label, reason) = judge(&exit, &policy.rules);
        let hung = exit.hung.clone();
        let mut rec =
            self.assemble(RunEnd { id, pid, events, exit, label, reason, lost, probe_errors });
        rec.hang = hung.map(|h| hang::graph(&h, &rec.run, &self.functions));
        Ok(rec)
    }

    /// Runs the target once as the ptrace tracer of all its threads, with
    /// the plan's actions installed in the kernel, and records it with what
    /// became of each intervention (cut short by `cancel`: as in
    /// [`Tracer::observe`]).
    pub fn intervene(
        &mut self,
        target: &Target,
        id: u32,
        policy: &RunPolicy,
        plan: &Plan,
        cancel: &AtomicBool,
    ) -> Result<RecordedRun, TraceError> {
        self.intervene_hooked(target, id, policy, plan, cancel, &mut NoHook)
    }

    /// [`Tracer::intervene`], with `hook` told when the target starts, at
    /// every turn of the loop that serves its stops, and when it ended.
    pub fn intervene_hooked(
        &mut self,
        target: &Target,
        id: u32,
        policy: &RunPolicy,
        plan: &Plan,
        cancel: &AtomicBool,
        hook: &mut dyn RunHook,
    ) -> Result<RecordedRun, TraceError> {
        self.served(target, id, policy, plan, cancel, hook, true)
    }

    /// A run as the ptrace tracer of all its threads, serving their stops:
    /// with the plan's actions (`intervene`), or an observation run of a
    /// target that throws (an empty plan), whose threads stop only to have
    /// their return addresses repaired.
    #[allow(clippy::too_many_arguments, reason = "intervene_hooked's, and whether to intervene")]
    fn served(
        &mut self,
        target: &Target,
        id: u32,
        policy: &RunPolicy,
        plan: &Plan,
        cancel: &AtomicBool,
        hook: &mut dyn RunHook,
        intervene: bool,
    ) -> Result<RecordedRun, TraceError> {
        let sync = self.sync_probes(plan.sync_points);
        self.probes.set_sync_points(sync);
        self.stops.new_run();
        let mut child = self.start(target, intervene)?;
        let pid = child.pid;
        for (site, action, _) in &plan.actions {
            self.probes.set_action(*site, *action)?;
        }
        for site in &plan.stamp {
            self.probes.stamp(*site)?;
        }
        for (member, slot) in &plan.groups {
            self.probes.set_group(*member, *slot)?;
        }
        hook.started(&mut self.probes, pid)?;
        // Single-CPU noise: pinned before the exec, so every thread the
        // target starts is pinned too.
        let mut pin_failed = false;
        let mut one_cpu =
            match plan.noise.iter().find_map(|n| one_cpu::Shuffler::start(pid, n.action)) {
                Some(Ok(s)) => Some(s),
                Some(Err(e)) => {
                    log::warn!("run {id}: cannot pin the target to one CPU: {e}");
                    pin_failed = true;
                    None
                }
                None => None,
            };
        ptrace::seize(pid)?;
        child.release()?;
        let started = child.started();
        let mut controller = Controller {
            probes: &mut self.probes,
            functions: &self.functions,
            state: &mut self.stops,
        };
        let (mut killed, mut timed_out) = (false, false);
        let mut hangs = policy.hang_after.map(HangCheck::new);
        let mut hung = None;
        let served = controller.serve(pid, BTreeSet::new(), &mut |probes| {
            if !killed && (started.elapsed() >= policy.timeout || cancel.load(Ordering::Relaxed)) {
                timed_out = started.elapsed() >= policy.timeout;
                killed = true;
                // SIGKILL ends even threads held in a ptrace stop.
                spawn::kill_group(pid);
            }
            // A thread held by the agent is stopped, not waiting: a hang
            // is every thread waiting for another, none held.
            if !killed && let Some(h) = hangs.as_mut().and_then(|w| w.look(pid)) {
                hung = Some(h);
                killed = true;
                spawn::kill_group(pid);
            }
            if !killed {
                hook.tick(probes, pid);
                if let Some(s) = one_cpu.as_mut() {
                    s.tick(pid);
                }
            }
            Flow::Continue
        })?;
        if let Some(s) = &one_cpu {
            log::info!("run {id}: the threads' priorities drawn {} times on one CPU", s.draws);
        }
        let mut exit = child.finish(served.status.unwrap_or(WaitStatus::StillAlive));
        exit.timed_out = timed_out;
        exit.hung = hung;
        exit.wall_ns = started.elapsed().as_nanos() as u64;
        hook.ended(&mut self.probes);
        let stops = served.stops;
        let mut rec = self.finish(id, pid, exit, policy)?;
        stops::shift_held_rows(
            &mut rec.rows,
            &stops,
            rec.start_ns,
            rec.run.end_ns,
            &self.functions,
        );
        stops::record_forced_returns(&mut rec.rows, &stops, &self.functions);
        rec.run.noise = stops::noise_outcome(plan, &stops, &self.functions);
        if pin_failed {
            // The run had no single-CPU noise: it is not recorded as such.
            rec.run.noise.retain(|n| !matches!(n.action, NoiseAction::OneCpu { .. }));
        }
        rec.run.pauses = stops::pauses(&stops, &rec.run.threads, rec.start_ns, |s| {
            stops::is_noise(plan, s, &self.functions)
        });
        rec.run.calls = paired_calls(&rec.rows, &rec.run.pauses);
        rec.run.interventions = plan.outcome(&stops, rec.start_ns, &rec.run);
        if sync != SyncProbes::None {
            rec.sync_steps = self.sync_steps(&rec.run.threads);
        }
        mark_interrupted(&mut rec.run, cancel);
        for stop in stops.iter().filter(|s| s.error.is_some()) {
            log::warn!(
                "run {id}: intervention at {:?} not applied: {}",
                stop.site,
                stop.error.as_deref().unwrap_or("")
            );
        }
        Ok(rec)
    }

    /// Synchronisation points each role entered in the run that just
    /// ended, by role.
    fn sync_steps(&self, threads: &[crate::model::Thread]) -> Vec<(Role, u32)> {
        let roles: HashMap<u32, Role> = threads.iter().map(|t| (t.tid, t.role)).collect();
        let mut steps: Vec<(Role, u32)> = self
            .probes
            .sync_steps()
            .into_iter()
            .filter_map(|(tid, n)| Some((*roles.get(&tid)?, n)))
            .collect();
        steps.sort_unstable();
        steps
    }

    /// Builds the run from its events and how it ended.
    fn assemble(&self, end: RunEnd) -> RecordedRun {
        let RunEnd { id, pid, events, exit, label, reason, lost, probe_errors } = end;
        let ctx = recorder::Context {
            pid,
            functions: &self.functions,
            pthread_create: self.pthread_create,
            bodies: &self.bodies,
            symbolize: &self.resolver,
            start_ns: None,
            existing_threads: Vec::new(),
        };
        let rec = recorder::record(&events, ctx);
        // The run ends when its last thread exited, as the kernel dated it;
        // the agent's own clock stops only when its wait woke, milliseconds
        // later after a fatal signal, and a call still open when the
        // process died (a thread blocked on a lock the aborting thread
        // held) would look that much slower in failing runs.
        let end_ns =
            rec.rows.last().map_or(0, |r| r.t_ns).max(rec.last_exit_ns.unwrap_or(exit.wall_ns));
        let mut run = Run {
            id,
            label,
            outcome: exit.outcome(reason),
            lost_events: 0,
            lost_thread_records: 0,
            complete: true,
            threads: rec.threads,
            calls: calls_from_rows(&rec.rows),
            end_ns,
            interventions: Vec::new(),
            noise: Vec::new(),
            pauses: Vec::new(),
        };
        // Counters are read once, at the run's end: all of it is charged.
        lost::charge(&mut run, lost);
        let children: Vec<String> = events
            .iter()
            .filter(|e| e.pid == pid && e.kind == aid_common::EventKind::CHILD)
            .map(|e| e.func.to_string())
            .collect();
        let mut notes = Vec::new();
        if !children.is_empty() {
            notes.push(format!(
                "the target started {} child process(es) (pid {}); their calls are not traced: aid traces the target process only",
                children.len(),
                crate::util::human::summarize(&children)
            ));
        }
        RecordedRun {
            host: None,
            run,
            rows: rec.rows,
            start_ns: rec.start_ns,
            orphan_exits: rec.orphan_exits,
            stdout: exit.stdout.tail().to_owned(),
            stderr: exit.stderr.tail().to_owned(),
            probe_errors,
            notes,
            sync_steps: Vec::new(),
            hang: None,
        }
    }
}

/// A run the user interrupted (its process killed by us) is kept, but
/// never as evidence.
fn mark_interrupted(run: &mut Run, cancel: &AtomicBool) {
    if cancel.load(Ordering::Relaxed) {
        run.complete = false;
        run.outcome.reason = "interrupted by the user".into();
    }
}

/// How one run of a program ended: what [`Tracer::assemble`] turns into a
/// recorded run.
struct RunEnd {
    id: u32,
    pid: u32,
    /// The run's events, flushed from the stream after its end.
    events: Vec<aid_common::Event>,
    exit: spawn::Exit,
    /// The verdict of the run's rules, and why.
    label: crate::model::Label,
    reason: String,
    /// Counters read once, at the end: the whole run is charged.
    lost: crate::bpf::Lost,
    probe_errors: u64,
}
