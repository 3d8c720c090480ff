//! Where the debug pipeline's runs come from: a program aid starts once
//! per run ([`super::program::ProgramSource`]), or the units of a service
//! that keeps running ([`super::service::ServiceSource`]). The pipeline
//! asks a source for observed runs, then for runs under interventions;
//! everything that differs between the two lives behind this trait.

use std::{
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::{
    intervene::{Plan, Reach},
    model::{Function, Noise, RecordedRun},
    record::watchpoints::{WatchedRun, Watcher},
};

pub trait RunSource {
    /// What one run is called in messages: "run" or "unit".
    fn noun(&self) -> &'static str;

    /// Every traced function: the session's function table.
    fn functions(&self) -> &[Function];

    /// The interventions this source can carry out.
    fn reach(&self) -> Reach;

    /// Whether noise can be injected into observed runs to make a
    /// rare failure more frequent.
    fn can_amplify(&self) -> bool;

    /// From now on, noise may act at statements inside the traced
    /// functions (their probes go to the runs that carry noise); false
    /// when the source has none.
    fn noise_at_statements(&mut self) -> bool {
        false
    }

    /// (failed, made) of the runs made without aid before the session (the
    /// default set's cost census), when there were any: the failure rate
    /// without tracing, which the traced one is compared with.
    fn untraced(&self) -> Option<(u32, u32)> {
        None
    }

    /// Whether observing should end when aid's probes hide the failure
    /// (the traced runs fail less often than the untraced ones beyond
    /// chance): the campaign then debugs again with fewer functions
    /// traced ([`super::ProbesHideIt`]).
    fn may_trace_fewer(&self) -> bool {
        false
    }

    /// What to check when no run failed, after "no run failed in N runs".
    fn hint_no_failure(&self) -> String;

    /// What to check when every run failed, after "...to compare with".
    fn hint_all_failed(&self) -> &'static str;

    /// The next observed run, with `noise` injected (empty unless
    /// [`RunSource::can_amplify`]); None when `cancel` was set before one
    /// completed.
    fn observe(
        &mut self,
        noise: &[Noise],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Option<RecordedRun>>;

    /// How many runs it makes at once (`--jobs`): 1 unless it can make
    /// several ([`RunSource::observe_batch`]).
    fn jobs(&self) -> u32 {
        1
    }

    /// One observed run per entry of `noises`, made at once (up to
    /// [`RunSource::jobs`]), in the order of their numbers; fewer when
    /// `cancel` was set. Made one after another unless the source can do
    /// better.
    fn observe_batch(
        &mut self,
        noises: &[Vec<Noise>],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Vec<RecordedRun>> {
        one_at_a_time(self, noises, cancel)
    }

    /// Readies the source for interventions.
    fn begin_interventions(&mut self) -> anyhow::Result<()>;

    /// One run with the plan's interventions installed, and what became of
    /// each.
    fn intervene(&mut self, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun>;

    /// How many intervened runs it makes at once: 1 unless it can make
    /// several ([`RunSource::intervene_batch`]: a program's runs on a
    /// fleet).
    fn intervene_jobs(&self) -> u32 {
        1
    }

    /// One run per plan, made at once (up to [`RunSource::intervene_jobs`]),
    /// in the order of their numbers; fewer when `cancel` was set. Made one
    /// after another unless the source can do better.
    fn intervene_batch(
        &mut self,
        plans: &[Plan],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Vec<RecordedRun>> {
        plans_in_turn(self, plans, cancel)
    }

    /// Undoes [`RunSource::begin_interventions`]; does nothing if there is
    /// nothing to undo, so it may be called again on the way out of an
    /// error.
    fn end_interventions(&mut self);

    /// The executable, when this source can make runs with hardware
    /// watchpoints (it starts the program; `debug/races.rs`).
    fn watchable(&self) -> Option<&Path> {
        None
    }

    /// A run with `watcher`'s objects watched and nothing intervened on,
    /// numbered `id` apart from the session's runs (it is not one of them).
    fn watched(
        &mut self,
        _id: u32,
        _watcher: &Watcher,
        _cancel: &AtomicBool,
    ) -> anyhow::Result<WatchedRun> {
        anyhow::bail!("this run source cannot make runs with hardware watchpoints")
    }
}

/// One observed run per entry of `noises`, one after another, until
/// `cancel` stops one: [`RunSource::observe_batch`] where runs are not
/// made at once.
pub(super) fn one_at_a_time<S: RunSource + ?Sized>(
    source: &mut S,
    noises: &[Vec<Noise>],
    cancel: &AtomicBool,
) -> anyhow::Result<Vec<RecordedRun>> {
    let mut runs = Vec::new();
    for noise in noises {
        match source.observe(noise, cancel)? {
            Some(rec) => runs.push(rec),
            None => break,
        }
    }
    Ok(runs)
}

/// One intervened run per plan, one after another, until `cancel` is set:
/// [`RunSource::intervene_batch`] where runs are not made at once.
pub(super) fn plans_in_turn<S: RunSource + ?Sized>(
    source: &mut S,
    plans: &[Plan],
    cancel: &AtomicBool,
) -> anyhow::Result<Vec<RecordedRun>> {
    let mut runs = Vec::with_capacity(plans.len());
    for plan in plans {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        runs.push(source.intervene(plan, cancel)?);
    }
    Ok(runs)
}
