//! Debugging a running service: each invocation of the unit function is
//! one run, with what the other threads did meanwhile
//! (`record/units.rs`). Units are observed as they come; then each
//! question of the causal engine is answered by installing the
//! interventions in the kernel — on the unit's own thread by call, on any
//! other thread by function while a unit is in flight
//! (`intervene/live.rs`) — and judging the next unit that starts after
//! that: the process is never restarted. It is ptrace'd only while
//! interventions are installed and released (not killed) at the end,
//! whatever happens. Without `--trace`, the program's own functions are
//! traced (docs/services.md).

use std::{
    collections::{BTreeSet, VecDeque},
    ops::ControlFlow,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::bail;
use nix::unistd::Pid;

use super::{DebugOptions, Debugged, beside, debug, default_set, source::RunSource};
use crate::{
    bpf::{LoadOptions, monotonic_ns},
    intervene::control::Flow,
    intervene::{Plan, Reach, live},
    model::{FuncId, Function, Intervention, Noise, Point, RecordedRun, paired_calls},
    record::{
        Interrupted,
        progress::Progress,
        start::{self, DEFAULT_FUNCTIONS, ProcessSpec},
        stops::write_forced_returns,
        tracer::Running,
    },
    store::Mode,
    symbols::Resolver,
    sys::{poll, proc, ptrace},
};

/// Units that start this soon after the probes were attached are not
/// used: calls other threads were already in then (a compaction under
/// way) have no entry and would be missing from them. A call that began
/// before aid attached and runs longer than this is still missed.
const WARM_UP: Duration = Duration::from_secs(1);

/// The units of a running process.
pub struct ServiceSource<'t> {
    running: Running<'t>,
    unit: FuncId,
    /// Longest wait for one unit to complete.
    unit_timeout: Duration,
    /// Bounds every hold of an intervention.
    hold_timeout: Duration,
    /// Units cut out but not yet handed to the pipeline.
    waiting: VecDeque<RecordedRun>,
    last_unit: Instant,
    /// Threads traced with ptrace while interventions are installed.
    traced: BTreeSet<Pid>,
    intervening: bool,
    /// The interventions installed (in their live form), and when (monotonic
    /// ns): a plan is installed once for all the units of its round.
    installed: Option<(Vec<Intervention>, u64)>,
    /// Child processes the service started, not yet noted on a unit.
    children: Vec<u32>,
}

impl<'t> ServiceSource<'t> {
    /// `running` must follow units of `unit`.
    pub fn new(
        running: Running<'t>,
        unit: FuncId,
        unit_timeout: Duration,
        hold_timeout: Duration,
    ) -> Self {
        ServiceSource {
            running,
            unit,
            unit_timeout,
            hold_timeout,
            waiting: VecDeque::new(),
            last_unit: Instant::now(),
            traced: BTreeSet::new(),
            intervening: false,
            installed: None,
            children: Vec::new(),
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
        Reach { unit: Some(self.unit), ..Reach::LIVE_UNITS }
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
        if let Some(rec) = self.waiting.pop_front() {
            self.last_unit = Instant::now();
            return Ok(Some(rec));
        }
        // A look every UNIT_LOOK until a unit settles, Ctrl-C (the flag) or
        // the process ends; the unit timeout ends it when it comes.
        let every = self.running.look_every();
        let (running, waiting, children) =
            (&mut self.running, &mut self.waiting, &mut self.children);
        let mut look = || -> anyhow::Result<Option<Option<RecordedRun>>> {
            if cancel.load(Ordering::Relaxed) {
                return Ok(Some(None));
            }
            if !proc::exists(pid) {
                bail!("pid {pid} exited during observation");
            }
            running.look()?;
            waiting.extend(running.follower().finished_units(poll::UNIT_SETTLE));
            children.extend(running.follower().take_children());
            if let (Some(&child), Some(rec)) = (children.first(), waiting.back_mut()) {
                rec.notes.push(crate::record::attach::children_note(pid, child));
                children.clear();
            }
            Ok(waiting.pop_front().map(Some))
        };
        let looked =
            poll::look_every(every, Some(self.last_unit + self.unit_timeout), || match look() {
                Ok(None) => ControlFlow::Continue(()),
                Ok(Some(unit)) => ControlFlow::Break(Ok(unit)),
                Err(e) => ControlFlow::Break(Err(e)),
            })?;
        let Some(unit) = looked.transpose()? else {
            bail!(
                "no call of the unit function completed in {:?}: is the service receiving work?",
                self.unit_timeout
            );
        };
        if unit.is_some() {
            self.last_unit = Instant::now();
        }
        Ok(unit)
    }

    fn begin_interventions(&mut self) -> anyhow::Result<()> {
        self.traced = match self.running.take_traced() {
            Some(traced) => traced,
            None => ptrace::seize_running(self.running.pid())?,
        };
        self.intervening = true;
        let probes = self.running.probes();
        probes.set_live_unit(Some(self.unit))?;
        probes.set_intervene(true)?;
        Ok(())
    }

    fn intervene(&mut self, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        let pid = self.running.pid();
        let live: Vec<_> = plan.interventions.iter().map(live::for_units).collect();
        let plan = &Plan::new(&live, self.hold_timeout, self.running.functions());
        // A plan that serialises groups is installed once for its round:
        // reinstalling it for every unit would forget the calls other
        // threads are in (their group counts), and a request could then
        // meet a compaction that nothing counts. Other plans are installed
        // afresh for every unit, as before (kept: a re-execution round
        // followed by an override round lost the overrides' evidence when
        // installed once, not yet understood).
        if plan.groups.is_empty() || self.installed.as_ref().is_none_or(|(l, _)| *l != live) {
            let probes = self.running.probes();
            probes.clear_actions()?;
            probes.clear_groups()?;
            for (member, slot) in &plan.groups {
                probes.set_group(*member, *slot)?;
            }
            for site in &plan.stamp {
                probes.stamp(*site)?;
            }
            for (site, action, _) in &plan.actions {
                probes.set_action(*site, *action)?;
            }
            self.installed = Some((live, monotonic_ns()));
        }
        let installed_ns = self.installed.as_ref().map_or(0, |(_, t)| *t);
        // Calls of serialised groups on other threads that began before
        // the plan was installed were never counted: a unit they overlap
        // is not judged (the next one is).
        let members: Vec<(FuncId, u32)> = plan
            .groups
            .iter()
            .filter(|(m, _)| m.role != 0)
            .map(|(m, _)| (m.func, m.role))
            .collect();
        let judged = move |rec: &RecordedRun| {
            !rec.run.calls.iter().any(|c| {
                members.contains(&(c.func, c.role)) && rec.start_ns + c.entry_ns < installed_ns
            })
        };
        // Only a unit that starts after this moment has every action in place.
        self.running.follower().restart_units();
        let waited = Instant::now();
        let mut last_look = Instant::now();
        let mut found: Option<RecordedRun> = None;
        let mut timed_out = false;
        let mut failed_look = None;
        let mut interrupted = false;
        let unit_timeout = self.unit_timeout;
        let served =
            self.running.serve(std::mem::take(&mut self.traced), &mut |follower, probes| {
                if cancel.load(Ordering::Relaxed) {
                    interrupted = true;
                    return Flow::Stop;
                }
                if last_look.elapsed() < poll::INTERVENED_UNIT_LOOK {
                    return Flow::Continue;
                }
                last_look = Instant::now();
                if let Err(e) = follower.look(probes) {
                    failed_look = Some(e);
                    return Flow::Stop;
                }
                if let Some(u) =
                    follower.finished_units(poll::INTERVENED_UNIT_SETTLE).into_iter().find(&judged)
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
        // What was done in this unit: the stops of any thread in its window.
        let (lo, hi) = (rec.start_ns, rec.start_ns + rec.run.end_ns);
        let stops: Vec<_> =
            served.stops.into_iter().filter(|s| s.probe_ns >= lo && s.probe_ns <= hi).collect();
        rec.run.interventions = plan.outcome(&stops, rec.start_ns, &rec.run);
        if record_forced_returns(&mut rec, &stops, self.running.functions()) {
            self.running.follower().rejudge(&mut rec.run);
        }
        Ok(rec)
    }

    /// Removes every action and releases the process: it keeps running.
    fn end_interventions(&mut self) {
        if !self.intervening {
            return;
        }
        self.intervening = false;
        self.installed = None;
        let probes = self.running.probes();
        let _ = probes.clear_actions();
        let _ = probes.clear_groups();
        let _ = probes.set_intervene(false);
        let _ = probes.set_live_unit(None);
        let traced = std::mem::take(&mut self.traced);
        if let Some(traced) = self.running.keeps_traced(traced) {
            self.running.release(&traced);
        }
    }
}

impl Drop for ServiceSource<'_> {
    fn drop(&mut self) {
        // An error or a panic in the engine must not leave the service
        // stopped or intervened on.
        self.end_interventions();
        self.running.stop_repairs();
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
    /// `--context`: a unit's window opens this long before its call.
    pub context: Duration,
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
    let trace = if req.trace.is_empty() { default_trace(req.pid, ui)? } else { req.trace.clone() };
    let spec = ProcessSpec {
        mode: Mode::Debug,
        pid: req.pid,
        trace: &trace,
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
    let mut running = tracer.follow(req.pid, Some(unit), checks)?;
    running.follower().set_context(req.context);
    running.follower().warm_up(WARM_UP);
    let mut source = ServiceSource::new(running, unit, req.unit_timeout, req.options.hold_timeout);
    let diagnosis = debug(&mut source, &mut writer, &req.options, cancel, ui)?;
    drop(source);
    drop(tracer);
    let beside = beside::beside(
        &diagnosis,
        &program,
        &req.options.safe,
        patterns.as_ref().map(|(p, f)| (p.as_path(), f)),
    );
    Ok(Debugged {
        diagnosis,
        out: writer.dir().to_owned(),
        beside,
        earlier: Vec::new(),
        later: Vec::new(),
    })
}

/// Without `--trace`: the program's own functions (not `main`, error
/// exits, sleep and clock helpers, stubs), the first
/// [`DEFAULT_FUNCTIONS`] in address order, as patterns. A running service
/// cannot be measured untraced first, as a program aid starts is
/// (`record/census.rs`), so the set is capped instead, and said.
fn default_trace(pid: u32, ui: &mut dyn Progress) -> anyhow::Result<Vec<String>> {
    proc::traceable(pid)?;
    let resolver = Resolver::for_process(pid)?;
    let found = default_set::default_candidates(&resolver)?;
    let total = found.functions.len();
    let names: Vec<&str> =
        found.functions.iter().take(DEFAULT_FUNCTIONS).map(|f| f.name.as_str()).collect();
    let left_out: Vec<&str> = found.skipped.iter().map(|(n, _)| n.as_str()).collect();
    let mut line = if total > DEFAULT_FUNCTIONS {
        format!(
            "no --trace given: tracing the first {DEFAULT_FUNCTIONS} of the program's {total} own functions (in address order): {}",
            names.join(", ")
        )
    } else {
        format!("no --trace given: tracing the program's own functions: {}", names.join(", "))
    };
    if !left_out.is_empty() {
        line.push_str(&format!(
            " (not {}: main, exits, sleep/clock helpers and stubs are never candidates)",
            crate::util::human::summarize(&left_out)
        ));
    }
    ui.say(&format!("{line}; pass --trace to choose"));
    Ok(names.iter().map(|n| globset::escape(n)).collect())
}

/// The values the agent forced a unit's calls to return, in its rows:
/// the unit is judged on what the program saw (an override left unrecorded
/// made every overridden unit with the failure under way look as if the
/// intervention had not applied, and the round had no evidence). Units are
/// cut out of the process' rows with instances of their own, so a stop is
/// matched to the exit of its thread's call of that function nearest in
/// time. True when a value changed: the unit must then be judged again
/// (a forced return of the unit's own function is what `--fail-if` reads).
fn record_forced_returns(
    rec: &mut RecordedRun,
    stops: &[crate::intervene::control::StopRecord],
    functions: &[Function],
) -> bool {
    let start = rec.start_ns;
    let changed = write_forced_returns(&mut rec.rows, stops, functions, |rows, s| {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| r.tid == s.tid && r.func == s.site.func && r.point == Point::Exit)
            .min_by_key(|(_, r)| (start + r.t_ns).abs_diff(s.probe_ns))
            .map(|(i, _)| i)
    });
    if changed {
        rec.run.calls = paired_calls(&rec.rows, &rec.run.pauses);
    }
    changed
}
