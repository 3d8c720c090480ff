//! Observed runs: start the target held before exec, attach the probes to
//! its pid, release it, wait for it, collect its events and turn them into
//! a recorded run. One target at a time; the eBPF object is loaded once.

use std::{
    sync::atomic::AtomicBool,
    time::Duration,
};

use crate::{
    model::{FuncId, Function, Run},
    probe::{EventStream, LoadOptions, Mode, ProbeError, Probes},
    recorder::{self, Row},
    runner::{self, FailRule, RunError, Target},
    symbols::Resolver,
};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A finished run with everything the session stores about it.
pub struct RecordedRun {
    pub run: Run,
    pub rows: Vec<Row>,
    pub start_ns: u64,
    pub orphan_exits: u64,
    pub stdout: String,
    pub stderr: String,
    /// Probe bodies that failed in the kernel during this run.
    pub probe_errors: u64,
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
    /// Program pair attached by [`Tracer::observe`].
    pub observe_mode: Mode,
    pub pthread_create: Option<FuncId>,
    pub probes: Probes,
    pub stream: EventStream,
    pub resolver: Resolver,
}

impl Tracer {
    /// Loads the eBPF object for tracing `functions` (resolved by
    /// `resolver`); adds aid's own `pthread_create` probe to name threads.
    pub fn new(mut resolver: Resolver, mut functions: Vec<Function>, load: LoadOptions) -> Result<Tracer, TraceError> {
        let pthread_create = resolver.pthread_create(functions.len() as FuncId).map(|f| {
            functions.push(f);
            (functions.len() - 1) as FuncId
        });
        let mut probes = Probes::load(load)?;
        if probes.kernel_writes_registers() {
            log::info!("this kernel lets BPF write registers: return overrides need no thread stop");
        } else {
            log::info!("this kernel refuses BPF register writes: return overrides use ptrace stops");
        }
        let stream = probes.event_stream();
        Ok(Tracer { functions, observe_mode: Mode::Observe, pthread_create, probes, stream, resolver })
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
        let _stale = self.stream.flush();
        let mut child = runner::spawn_held(target)?;
        let pid = child.pid;
        self.probes.begin_target(pid)?;
        let attached = self.probes.attach(&self.functions, pid, self.observe_mode);
        if let Err(e) = attached {
            self.probes.detach_all();
            return Err(e.into());
        }
        child.release()?;
        let exit = child.wait(policy.timeout, cancel)?;
        let events = self.stream.flush();
        self.probes.detach_all();
        let lost = self.probes.take_lost()?;
        let probe_errors = self.probes.take_errors()?;
        let (label, reason) = runner::judge(&exit, &policy.rules);
        Ok(self.assemble(id, pid, &events, exit, label, reason, lost, probe_errors))
    }

    /// Builds the run from its events and how it ended.
    #[allow(clippy::too_many_arguments)]
    pub fn assemble(
        &self,
        id: u32,
        pid: u32,
        events: &[aid_common::Event],
        exit: runner::Exit,
        label: crate::model::Label,
        reason: String,
        lost: u64,
        probe_errors: u64,
    ) -> RecordedRun {
        let resolver = &self.resolver;
        let symbolize = |module: &std::path::Path, addr: u64| resolver.function_at(module, addr).map(str::to_owned);
        let ctx = recorder::Context {
            pid,
            functions: &self.functions,
            pthread_create: self.pthread_create,
            symbolize: &symbolize,
            start_ns: None,
            existing_threads: &[],
        };
        let rec = recorder::record(events, &ctx);
        let end_ns = rec.rows.last().map(|r| r.t_ns).unwrap_or(0).max(exit.wall_ns);
        let run = Run {
            id,
            label,
            outcome: exit.outcome(reason),
            lost_events: lost,
            complete: lost == 0,
            threads: rec.threads,
            calls: recorder::calls_from_rows(&rec.rows),
            end_ns,
            interventions: Vec::new(),
            noise: Vec::new(),
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
