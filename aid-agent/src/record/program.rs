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
    intervene::Plan,
    model::{Intervention, Label},
    record::{
        fail::RunPolicy,
        progress::Progress,
        start::{self, ProgramSession},
    },
    store::Mode,
};

pub struct RecordRequest {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// `--trace` patterns.
    pub trace: Vec<String>,
    pub runs: u32,
    pub policy: RunPolicy,
    /// Session directory (default: `aid-sessions/<time>-<program>`).
    pub out: Option<PathBuf>,
    pub load: LoadOptions,
    pub programs: Programs,
    /// Interventions applied to every run (function ids count from 0 in
    /// the order the patterns match), and the longest any hold may last.
    pub plan: Option<(Vec<Intervention>, Duration)>,
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
    pub interrupted: bool,
}

/// Runs `req.command` `req.runs` times (fewer when `cancel` is set: the
/// runs made so far are kept). Each step of the "recording" phase reports
/// the tally — or, with a plan, what became of that run's interventions.
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
        req.programs,
        |r| {
            let functions = r.resolve(&req.trace)?;
            for iv in req.plan.iter().flat_map(|(ivs, _)| ivs) {
                for site in iv.acting_sites() {
                    ensure!(
                        (site.func as usize) < functions.len(),
                        "plan names function id {} but only {} are traced",
                        site.func,
                        functions.len()
                    );
                }
            }
            Ok(functions)
        },
        |_, _| Ok(()),
    )?;
    let plan = req.plan.as_ref().map(|(ivs, hold)| Plan::new(ivs, *hold));
    if plan.is_none() {
        let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
        ui.say(&format!(
            "tracing {} function(s) of {}: {}",
            names.len(),
            target.program.display(),
            start::summarize(&names)
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
        interrupted: false,
    };
    ui.begin("recording", Some(u64::from(req.runs)));
    for id in 1..=req.runs {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let rec = match &plan {
            None => tracer.observe(&target, id, &req.policy, cancel)?,
            Some(plan) => tracer.intervene(&target, id, &req.policy, plan, cancel)?,
        };
        if rec.probe_errors > 0 {
            log::warn!(
                "run {id}: {} probe error(s) in the kernel (a map was full)",
                rec.probe_errors
            );
        }
        match rec.run.label {
            Label::Pass => summary.passed += 1,
            Label::Fail => summary.failed += 1,
        }
        if rec.run.lost_events > 0 {
            summary.lost_runs += 1;
            summary.lost_events += rec.run.lost_events;
        }
        summary.events += rec.rows.len();
        writer.append(&rec, tracer.functions()).with_context(|| format!("saving run {id}"))?;
        let status = match &plan {
            None => format!("{} pass, {} fail", summary.passed, summary.failed),
            Some(_) => format!(
                "run {id}: {:?} ({}); {}/{} intervention(s) applied",
                rec.run.label,
                rec.run.outcome.reason,
                rec.run.interventions.iter().filter(|a| a.applied).count(),
                rec.run.interventions.len()
            ),
        };
        ui.step(&status);
    }
    ui.end();
    summary.recorded = writer.runs_written();
    summary.interrupted = cancel.load(Ordering::Relaxed);
    Ok(summary)
}
