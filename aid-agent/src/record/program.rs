//! `record` and `intervene` as library calls: run a program N times under
//! the tracer — observed, or under a fixed list of interventions — and
//! store every run, labelled pass or fail, in a session directory.

use std::{
    ffi::OsString,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::{Context as _, ensure};

use crate::{
    bpf::{LoadOptions, Programs},
    intervene::{
        Plan,
        noise::{NoiseSource, Schedule},
    },
    model::{Function, Intervention, Label, Noise, NoiseAt, RecordedRun},
    record::{
        fail::RunPolicy,
        jobs::{Done, Feed, Job, Jobs},
        progress::Progress,
        start::{self, ProgramSession},
    },
    store::{Mode, Writer},
};

pub struct RecordRequest {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// `--trace` patterns; none: the program's own functions, up to
    /// [`start::DEFAULT_FUNCTIONS`] (as `debug` does).
    pub trace: Vec<String>,
    pub runs: u32,
    pub policy: RunPolicy,
    /// Session directory (default: `aid-sessions/<time>-<program>`).
    pub out: Option<PathBuf>,
    /// Where the runs' Parquet tables go (`--store`).
    pub store: crate::store::Destination,
    pub load: LoadOptions,
    pub programs: Programs,
    /// Interventions applied to every run (function ids count from 0 in
    /// the order the patterns match), the noise made with them in every
    /// run (as a debug round's intervened runs have it), and the longest
    /// any hold may last.
    pub plan: Option<(Vec<Intervention>, Vec<Noise>, Duration)>,
    /// Where separate debug files of a stripped program are looked for.
    pub debug: crate::symbols::DebugSearch,
    /// Noise in every run after the first (`record --noise`), which is
    /// made without it: the points are learnt from it.
    pub noise: Option<Schedule>,
    /// Runs made at once (`--jobs`, at least 1): each by a tracer of its
    /// own on a thread of its own (`record/jobs.rs`).
    pub jobs: u32,
}

/// What was recorded.
#[derive(Clone, Debug)]
pub struct RecordSummary {
    pub out: PathBuf,
    /// The command line, as the user gave it.
    pub command: String,
    pub recorded: usize,
    pub passed: u32,
    pub failed: u32,
    /// Entry and exit events stored.
    pub events: usize,
    /// Runs that lost events, and how many they lost.
    pub lost_runs: u32,
    pub lost_events: u64,
    /// Runs whose record notes something left untraced (child processes).
    pub noted_runs: u32,
    pub interrupted: bool,
    /// With `--noise`: whether the first run (made without it) failed.
    pub first_failed: Option<bool>,
}

impl RecordSummary {
    /// Counts run `id` in: its label, lost events and notes (the first
    /// noted run's are said).
    fn count(&mut self, id: u32, rec: &RecordedRun, ui: &mut dyn Progress) {
        if rec.probe_errors > 0 {
            log::warn!(
                "run {id}: {} probe error(s) in the kernel (a map was full)",
                rec.probe_errors
            );
        }
        match rec.run.label {
            Label::Pass => self.passed += 1,
            Label::Fail => self.failed += 1,
        }
        if rec.run.lost_events > 0 {
            self.lost_runs += 1;
            self.lost_events += rec.run.lost_events;
        }
        self.events += rec.rows.len();
        if !rec.notes.is_empty() {
            if self.noted_runs == 0 {
                for note in &rec.notes {
                    ui.say(&format!("run {id}: {note}"));
                }
            }
            self.noted_runs += 1;
        }
    }
}

/// Refuses a plan that names a function beyond the `traced` ones, in an
/// intervention or in its noise.
fn check_plan(req: &RecordRequest, traced: usize) -> anyhow::Result<()> {
    let noise = req.plan.iter().flat_map(|(_, noise, _)| noise).filter_map(|n| match n.at {
        NoiseAt::Call { site } => Some(site.func),
        NoiseAt::Every { func, .. } => Some(func),
        NoiseAt::Sync { .. } | NoiseAt::Process => None,
    });
    let ivs = req.plan.iter().flat_map(|(ivs, _, _)| ivs);
    for func in ivs.flat_map(Intervention::acting_sites).map(|s| s.func).chain(noise) {
        ensure!(
            (func as usize) < traced,
            "plan names function id {func} but only {traced} are traced"
        );
    }
    Ok(())
}

/// Whether a plan acts at the C library's lock calls: locks it holds are
/// held there, and noise at a thread's synchronisation points is made
/// there.
fn plan_acts_at_sync_points(req: &RecordRequest) -> bool {
    req.plan.iter().any(|(ivs, noise, _)| {
        let holds_locks = |iv: &Intervention| {
            iv.parts().iter().any(|p| matches!(p, Intervention::HoldLocks { .. }))
        };
        ivs.iter().any(holds_locks) || noise.iter().any(|n| matches!(n.at, NoiseAt::Sync { .. }))
    })
}

/// Runs `req.command` `req.runs` times (fewer when `cancel` is set: the
/// runs made so far are kept). Each step of the "recording" phase reports
/// the tally — or, with a plan, what became of that run's interventions.
/// Long (about 120 lines): a recording's steps in order, one at a time or
/// `--jobs` at once, sharing the tracer, the writer and the tally.
pub fn record(
    req: &RecordRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<RecordSummary> {
    let mode = if req.plan.is_some() { Mode::Debug } else { Mode::Record };
    let ProgramSession { target, mut tracer, mut writer } = start::program(
        mode,
        &req.command,
        &req.policy.texts,
        req.load,
        req.out.as_deref(),
        &req.store,
        req.programs,
        &req.debug,
        &mut *ui,
        |r, ui| {
            let functions = if req.trace.is_empty() && req.plan.is_none() {
                start::default_functions(r, ui)?
            } else {
                r.resolve(&req.trace)?
            };
            check_plan(req, functions.len())?;
            Ok(functions)
        },
        |tracer, _, _| {
            if plan_acts_at_sync_points(req) {
                tracer.add_sync_points()?;
            }
            Ok(())
        },
    )?;
    // `with_noise` asks for the synchronisation points even with no noise.
    let plan = req.plan.as_ref().map(|(ivs, noise, hold)| {
        let plan = Plan::new(ivs, *hold, tracer.functions());
        if noise.is_empty() { plan } else { plan.with_noise(noise) }
    });
    if plan.is_none() {
        let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
        ui.say(&format!(
            "tracing {} function(s) of {}: {}",
            names.len(),
            target.program.display(),
            crate::util::human::summarize(&names)
        ));
    }
    let mut summary = RecordSummary {
        out: writer.dir().to_owned(),
        command: target.display(),
        recorded: 0,
        passed: 0,
        failed: 0,
        events: 0,
        lost_runs: 0,
        lost_events: 0,
        noted_runs: 0,
        interrupted: false,
        first_failed: None,
    };
    let total = req.runs + u32::from(req.noise.is_some());
    ui.begin(&format!("recording {total} runs"), Some(u64::from(total)));
    if req.jobs > 1 {
        writer.set_jobs(req.jobs)?;
    }
    let mut keep = Keep {
        summary: &mut summary,
        writer: &mut writer,
        functions: tracer.functions().to_vec(),
        planned: plan.is_some(),
        schedule: req.noise,
        noise: None,
    };
    if req.jobs > 1 {
        let mut jobs = Jobs::new(&tracer, req.jobs)?;
        ui.say(&format!("{} runs at once, each with probes of its own", jobs.len()));
        let mut feed = InOrder {
            keep,
            plan: plan.as_ref(),
            total,
            started: 0,
            kept: 0,
            ended: std::collections::BTreeMap::new(),
            ui: &mut *ui,
        };
        jobs.run(&target, &req.policy, cancel, &mut feed)?;
    } else {
        for id in 1..=total {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            let rec = match (&plan, keep.noise.as_mut()) {
                (Some(plan), _) => tracer.intervene(&target, id, &req.policy, plan, cancel)?,
                (None, Some(n)) if id > 1 => {
                    let drawn = Plan::default().with_noise(&n.draw());
                    tracer.intervene(&target, id, &req.policy, &drawn, cancel)?
                }
                (None, _) => tracer.observe(&target, id, &req.policy, cancel)?,
            };
            keep.run(id, &rec, ui)?;
        }
    }
    ui.end();
    // Probes are removed when the tracer is dropped: one batch of grace
    // periods, however many functions (~150 ms for 2,000 here).
    if tracer.functions().len() > 64 {
        ui.say(&format!("removing the probes of {} functions", tracer.functions().len()));
    }
    drop(tracer);
    summary.recorded = writer.runs_written();
    summary.interrupted = cancel.load(Ordering::Relaxed);
    Ok(summary)
}

/// What becomes of each run, in the order of their numbers: counted,
/// stored, and (with `--noise`) learnt from.
struct Keep<'a> {
    summary: &'a mut RecordSummary,
    writer: &'a mut Writer,
    functions: Vec<Function>,
    /// The runs carry a plan (`intervene`): each step says what became of
    /// it.
    planned: bool,
    /// `--noise`, and the noise drawn from the first run's calls and
    /// threads, once it is made.
    schedule: Option<Schedule>,
    noise: Option<NoiseSource>,
}

impl Keep<'_> {
    fn run(&mut self, id: u32, rec: &RecordedRun, ui: &mut dyn Progress) -> anyhow::Result<()> {
        if let Some(n) = self.noise.as_mut() {
            n.learn_from(&rec.run, &rec.sync_steps, &self.functions);
        } else if let Some(schedule) = self.schedule {
            let (level, seen) = (schedule.strongest_level(), std::slice::from_ref(&rec.run));
            self.noise = Some(NoiseSource::new(level, schedule, seen, &self.functions, id.into()));
            self.summary.first_failed = Some(rec.run.failed());
        }
        self.summary.count(id, rec, ui);
        let saving = std::time::Instant::now();
        self.writer.append(rec, &self.functions).with_context(|| format!("saving run {id}"))?;
        log::debug!("run {id}: stored in {:.1?}", saving.elapsed());
        let status = if self.planned {
            format!(
                "run {id}: {} ({}); {}/{} intervention(s) applied",
                match rec.run.label {
                    Label::Pass => "pass",
                    Label::Fail => "fail",
                },
                rec.run.outcome.reason,
                rec.run.interventions.iter().filter(|a| a.applied).count(),
                rec.run.interventions.len()
            )
        } else {
            format!("{} pass, {} fail", self.summary.passed, self.summary.failed)
        };
        ui.step(&status);
        Ok(())
    }
}

/// Parallel runs ([`Jobs`]) numbered 1..=`total` as they start, kept in
/// the order of their numbers whatever the order they end in: the
/// session is the one `--jobs 1` writes, run for run. With `--noise`, the
/// first run ends before any other starts (the noise is drawn from it),
/// and each later run's noise is drawn when it starts, from the runs kept
/// by then.
struct InOrder<'a, 'u> {
    keep: Keep<'a>,
    plan: Option<&'a Plan>,
    total: u32,
    started: u32,
    kept: u32,
    /// Runs ended before one with a smaller number.
    ended: std::collections::BTreeMap<u32, RecordedRun>,
    ui: &'u mut dyn Progress,
}

impl Feed for InOrder<'_, '_> {
    fn next(&mut self) -> Option<Job> {
        if self.started == self.total {
            return None;
        }
        let plan = match (self.plan, self.keep.schedule, self.keep.noise.as_mut()) {
            (Some(plan), _, _) => Some(plan.clone()),
            (None, None, _) => None,
            (None, Some(_), None) if self.started == 0 => None,
            // The noise is drawn from the first run, still in flight.
            (None, Some(_), None) => return None,
            (None, Some(_), Some(n)) => Some(Plan::default().with_noise(&n.draw())),
        };
        self.started += 1;
        Some(Job { id: self.started, plan })
    }

    fn done(&mut self, done: Done) -> anyhow::Result<()> {
        let rec = done.run?;
        self.ended.insert(done.id, rec);
        while let Some(rec) = self.ended.remove(&(self.kept + 1)) {
            self.kept += 1;
            self.keep.run(self.kept, &rec, &mut *self.ui)?;
        }
        Ok(())
    }
}
