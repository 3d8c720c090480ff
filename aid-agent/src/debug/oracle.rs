//! The causal engine's oracle over any run source: "run once with these
//! predicates forced to their passing value" becomes a run of the source
//! under the group's interventions (plus the noise that amplified a rare
//! failure, if any), stored in the session and judged with the same
//! catalog the predicates were learned with.

use std::{
    collections::BTreeSet,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::source::RunSource;
use crate::{
    causal::{Observation, Oracle},
    intervene::{Plan, noise::NoiseSource, plan::wait_on_each_other},
    model::{Function, RecordedRun, Run},
    predicates::{Catalog, PredId, RunTruth},
    record::progress::Progress,
    store::Writer,
};

/// One run made for the engine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OracleRun {
    pub run: u32,
    pub group: BTreeSet<PredId>,
    pub failed: bool,
    pub valid: bool,
    /// Candidate predicates that held.
    pub held: BTreeSet<PredId>,
}

/// The one validity rule: an intervened run is evidence only if nothing
/// of it was lost or cut short (it is complete), every intervention was
/// installed, and none of the predicates intervened on held in it — the
/// intervention did what it is for, forcing them to their passing value,
/// judged by the same catalog that defined them. A re-execution that gave
/// up, or a frame that could not be unwound, leaves the predicate true,
/// and the run says nothing about it.
///
/// One exception: a run that failed although a hold gave up waiting, or
/// while a hold was still holding its thread (the failure ended the
/// target first), is evidence that the failure persisted. The hold waited for a call that
/// the passing order needs and that never came in time (the program had
/// gone down the failing path without it: a thread that the run's main
/// thread joins was held until a later call of that main thread); leaving
/// such runs out would keep only the runs that passed, and confirm an
/// effect of the failure as its cause.
///
/// The other way round, a run that passed while a hold gave up, or while
/// a thread was still held when the target ended, is not evidence that
/// the candidate causes the failure: the program waited for the held
/// thread (a sort that hands work to a pool thread held until the sort
/// has ended) and went on only when the hold let go, a second later, or
/// the held thread's work never ran at all. The pass is the stall's doing
/// or the missing work's, not the order the hold was for (qsort_mt: every
/// run of a round that serialised the sort with its pool threads passed
/// after a hold of 1 s gave up, and "confirmed" a cause that was not).
pub fn is_evidence(run: &Run, truth: &RunTruth, group: &BTreeSet<PredId>) -> bool {
    let installed = run.interventions.iter().all(|a| a.applied || a.timed_out);
    let negated = group.iter().all(|&p| !truth.holds(p));
    let gave_up = run.interventions.iter().any(|a| a.timed_out || a.held_at_end);
    let evidence = if run.failed() { negated || gave_up } else { negated && !gave_up };
    run.complete && installed && evidence
}

/// Whether a run passed without noise the control runs had: an
/// intervention acted where a point of the amplifying noise would have
/// (the noise focused on a call of a function the intervention holds at
/// every call), so the point was left out ([`Plan::displaced`]). The
/// missing noise alone may have kept the failure away, so such a run is
/// not evidence that the intervention stopped it; an intervention that
/// did nothing but displace the noise would otherwise look confirmed
/// (SCTBench's work-stealing queue: a serialisation of the stealers'
/// `readV` against main's `SyncPop` displaced the hold in the stealer's
/// `readV` that provoked the failure, and 77 runs passed). The point
/// counts in the runs where a focused plan is off too: counting only the
/// runs where it is on would leave the runs without noise, which fail
/// less often than the control (the same queue: 16 such runs passed, and
/// the session confirmed a wrong cause). A run that failed all the same
/// is evidence against it, as any failing run is.
pub fn passed_without_its_noise(plan: &Plan, run: &Run) -> bool {
    plan.displaced > 0 && !run.failed()
}

/// Whether the interventions on `group` can all be installed in one run:
/// none wants an action at a call site where another acts in a way the
/// two cannot share ([`Plan`]'s conflicts, which depend on nothing else),
/// and none hold threads that wait for one another's in a ring
/// ([`wait_on_each_other`]).
pub fn installable(catalog: &Catalog, functions: &[Function], group: &BTreeSet<PredId>) -> bool {
    let ivs = catalog.interventions(group);
    Plan::new(&ivs, Duration::ZERO, functions).conflicts.is_empty() && !wait_on_each_other(&ivs)
}

pub struct SourceOracle<'a> {
    pub(super) source: &'a mut dyn RunSource,
    catalog: &'a Catalog,
    writer: &'a mut Writer,
    hold_timeout: Duration,
    noise: Option<NoiseSource>,
    cancel: &'a AtomicBool,
    /// Every run made, in order (rounds are consecutive slices of it).
    log: Vec<OracleRun>,
    pub(super) ui: &'a mut dyn Progress,
    /// Valid runs of the round under way (None between rounds).
    round: Option<u32>,
    rounds: u32,
}

/// The failure rate of runs made the way intervened runs are (under
/// ptrace, with the noise of amplification), but with nothing intervened
/// on: the baseline an intervention round is judged against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Control {
    pub runs: u32,
    pub failing: u32,
}

impl Control {
    pub fn rate(&self) -> f64 {
        if self.runs == 0 { 0.0 } else { f64::from(self.failing) / f64::from(self.runs) }
    }
}

/// No intervention round was started: under the agent's control the
/// failure was too rare for one to conclude within
/// [`super::MAX_FIRST_ROUND_RUNS`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotStarted {
    pub control: Control,
    /// Runs in a row without the failure the first round nothing can
    /// witness would have needed; None when no control run failed.
    pub needed: Option<u32>,
    /// The most aid starts a round for.
    pub limit: u32,
}

impl NotStarted {
    /// "1 of 200 control runs failed (0.5%): a round would need about
    /// 380783 runs in a row without the failure to conclude, and aid
    /// starts none that needs more than 2000".
    pub fn describe(&self, noun: &str) -> String {
        let c = self.control;
        let rate = c.rate() * 100.0;
        let share =
            if c.failing > 0 && rate < 1.0 { format!("{rate:.1}%") } else { format!("{rate:.0}%") };
        let failed = format!(
            "{} of {} control {noun}s (made as intervened {noun}s are, nothing intervened on) failed ({share})",
            c.failing, c.runs
        );
        match self.needed {
            Some(n) => format!(
                "{failed}: a round would need about {n} {noun}s in a row without the failure to conclude, and aid starts none that needs more than {}",
                self.limit
            ),
            None => format!("{failed}: no round could conclude that the failure stopped"),
        }
    }
}

/// Control runs stop at this many failures...
pub const CONTROL_FAILURES: u32 = 5;

/// ...or at this many runs, when the failure proved rarer under control
/// than observed and a round would otherwise need more than
/// [`super::MAX_FIRST_ROUND_RUNS`]: no session is judged too rare for a
/// round on fewer control runs.
pub const CONTROL_MAX_RUNS: u32 = 200;

impl<'a> SourceOracle<'a> {
    #[allow(
        clippy::too_many_arguments,
        reason = "the oracle's parts, each borrowed from the pipeline"
    )]
    pub fn new(
        source: &'a mut dyn RunSource,
        catalog: &'a Catalog,
        writer: &'a mut Writer,
        hold_timeout: Duration,
        noise: Option<NoiseSource>,
        cancel: &'a AtomicBool,
        ui: &'a mut dyn Progress,
    ) -> Self {
        SourceOracle {
            source,
            catalog,
            writer,
            hold_timeout,
            noise,
            cancel,
            log: Vec::new(),
            ui,
            round: None,
            rounds: 0,
        }
    }

    /// Every run made, in order; ends the progress display.
    pub fn finish(mut self) -> Vec<OracleRun> {
        if self.round.take().is_some() {
            self.ui.end();
        }
        std::mem::take(&mut self.log)
    }

    /// A run's plan: the group's interventions, with the amplifying
    /// noise's next draw.
    fn plan(&mut self, group: &BTreeSet<PredId>) -> Plan {
        let plan = Plan::new(
            &self.catalog.interventions(group),
            self.hold_timeout,
            self.source.functions(),
        );
        match self.noise.as_mut() {
            Some(noise) => plan.with_noise(&noise.draw()),
            None => plan,
        }
    }

    /// An intervened run stored in the session, judged, logged and shown.
    /// A run that came back without the interventions of its `plan` (a
    /// fleet's worker too old to know them made it as observed) is no
    /// evidence, whatever else it shows.
    fn judge(
        &mut self,
        group: &BTreeSet<PredId>,
        rec: &RecordedRun,
        plan: &Plan,
    ) -> anyhow::Result<Observation> {
        self.writer.append(rec, self.source.functions())?;
        let truth = self.catalog.evaluate(&rec.run);
        // One record per intervention of the plan (a service's units
        // record their live form of each: the same count).
        let carried = rec.run.interventions.len() == plan.interventions.len();
        let valid = carried
            && is_evidence(&rec.run, &truth, group)
            && !passed_without_its_noise(plan, &rec.run);
        let acted = rec.run.interventions.iter().filter_map(|a| a.acted_ns).min();
        let obs = Observation::from_truth(&truth, self.catalog.failure(), valid)
            .acted_from(&truth, acted);
        let id = rec.run.id;
        self.log.push(OracleRun {
            run: id,
            group: group.clone(),
            failed: obs.failed,
            valid,
            held: obs.held.clone(),
        });
        self.show(valid, obs.failed, id);
        Ok(obs)
    }

    /// One more run of the round under way, shown.
    fn show(&mut self, valid: bool, failed: bool, id: u32) {
        let noun = self.source.noun();
        let Some(done) = self.round.as_mut() else { return };
        let status = if valid {
            *done += 1;
            format!("{noun} {id} {}", if failed { "failed" } else { "passed" })
        } else {
            format!("{noun} {id}: not applied, not counted")
        };
        let done = u64::from(*done);
        self.ui.step_to(done, &status);
    }

    /// Control runs: as intervened runs, nothing intervened on, until
    /// [`CONTROL_FAILURES`] fail or `max_runs` ran. Being the tracer of
    /// every thread changes the timing (a new thread waits for the agent
    /// before it runs); a round of k runs without failure is only
    /// convincing against the failure rate runs have under those
    /// conditions, which can be well below the observed one (heartbeat-auth:
    /// 16 % observed, 7.5 % under ptrace). Not stored in the session: they
    /// are neither observations of the program nor interventions.
    /// Control runs added to `c` until [`CONTROL_FAILURES`] failed or
    /// `c` has `max_runs` runs.
    pub fn control(&mut self, mut c: Control, max_runs: u32) -> anyhow::Result<Control> {
        // Made as many at once as the rounds' runs are (the load they
        // share is part of how runs are made), every one counted.
        let jobs = self.source.intervene_jobs().max(1);
        while c.runs < max_runs && c.failing < CONTROL_FAILURES {
            if self.cancel.load(Ordering::Relaxed) {
                bail!("interrupted by the user");
            }
            let n = jobs.min(max_runs - c.runs);
            let noise = &mut self.noise;
            let plans: Vec<Plan> = (0..n)
                .map(|_| match noise.as_mut() {
                    Some(noise) => Plan::default().with_noise(&noise.draw()),
                    None => Plan::default(),
                })
                .collect();
            for rec in self.source.intervene_batch(&plans, self.cancel)? {
                if !rec.run.complete {
                    continue;
                }
                c.runs += 1;
                if rec.run.failed() {
                    c.failing += 1;
                }
                self.ui.step(&format!(
                    "control {} {}: {}",
                    self.source.noun(),
                    c.runs,
                    if rec.run.failed() { "failed" } else { "passed" }
                ));
            }
        }
        Ok(c)
    }
}

impl Oracle for SourceOracle<'_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let plan = self.plan(group);
        let rec = self.source.intervene(&plan, self.cancel)?;
        self.judge(group, &rec, &plan)
    }

    fn batch(&self) -> u32 {
        self.source.intervene_jobs()
    }

    fn run_batch(&mut self, group: &BTreeSet<PredId>, n: u32) -> anyhow::Result<Vec<Observation>> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let plans: Vec<Plan> = (0..n).map(|_| self.plan(group)).collect();
        let made = self.source.intervene_batch(&plans, self.cancel)?;
        // Every run made is stored and judged, an interrupted batch's too.
        let judged = (made.iter().zip(&plans))
            .map(|(rec, plan)| self.judge(group, rec, plan))
            .collect::<anyhow::Result<_>>()?;
        if made.len() < plans.len() {
            if self.cancel.load(Ordering::Relaxed) {
                bail!("interrupted by the user");
            }
            bail!("{} of the {} runs asked for at once were not made", plans.len() - made.len(), n);
        }
        Ok(judged)
    }

    fn installable(&mut self, group: &BTreeSet<PredId>) -> bool {
        installable(self.catalog, self.source.functions(), group)
    }

    fn round_begins(&mut self, group: &BTreeSet<PredId>, max_runs: u32) {
        self.rounds += 1;
        const SHOWN: usize = 3;
        let mut what =
            group.iter().take(SHOWN).map(ToString::to_string).collect::<Vec<_>>().join(",");
        if group.len() > SHOWN {
            what.push_str(&format!(" +{}", group.len() - SHOWN));
        }
        // The bar's length is the most runs the round may take; most
        // rounds end far sooner (at a failing run, or once enough runs
        // passed).
        self.ui.begin(&format!("round {} on {what}", self.rounds), Some(u64::from(max_runs)));
        self.round = Some(0);
    }

    fn round_ends(&mut self) {
        if self.round.take().is_some() {
            self.ui.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AppliedIntervention, Intervention, Label, Site, testing::run};

    /// A run of `read`, entered at 10, returning `v` at 20.
    fn read_run(id: u32, label: Label, v: i64) -> Run {
        use crate::model::testing::call;
        run(id, label, vec![call(0, 0, 1, 10, Some(20), Some(v))], 100)
    }

    /// The catalog of two passing runs of `read` returning 0 and one
    /// failing that returns -1: P1 "read returns -1" and its error.
    fn read_catalog() -> Catalog {
        use crate::{
            model::{Session, ValueKind, testing::function},
            predicates::{ExtractConfig, learn},
        };
        let r = read_run;
        let s = Session {
            functions: vec![function(0, "read").with_ret(ValueKind::Signed)],
            runs: vec![r(1, Label::Pass, 0), r(2, Label::Pass, 0), r(3, Label::Fail, -1)],
        };
        learn(&s, &ExtractConfig::default()).unwrap()
    }

    /// A run is evidence when it is complete and the intervened predicates
    /// did not hold, whatever the actions' bookkeeping says.
    #[test]
    fn evidence_is_a_complete_run_where_the_intervened_predicates_are_false() {
        let r = read_run;
        let catalog = read_catalog();
        let group = BTreeSet::from([PredId(1)]);
        let iv =
            Intervention::DelayExit { site: Site { func: 0, role: 0, instance: 1 }, delay_us: 1 };
        let judged = |mut run: Run, applied, timed_out, held_at_end| {
            run.interventions = vec![AppliedIntervention {
                intervention: iv.clone(),
                applied,
                timed_out,
                held_at_end,
                acted_ns: None,
            }];
            let truth = catalog.evaluate(&run);
            is_evidence(&run, &truth, &group)
        };
        // Negated, failing anyway: evidence.
        assert!(judged(r(4, Label::Fail, 0), true, false, false));
        // Negated and passing.
        assert!(judged(r(5, Label::Pass, 0), true, false, false));
        // Still held (the action "applied", the value still wrong): no.
        assert!(!judged(r(6, Label::Fail, -1), true, false, false));
        // The run failed while the intervention still held a thread: it
        // failed under the intervention, whatever the predicate says.
        assert!(judged(r(7, Label::Fail, -1), true, false, true));
        assert!(!judged(r(8, Label::Pass, -1), true, false, true), "a pass proves nothing here");
        // Not installed (a conflict): no, even where it happens to hold.
        assert!(!judged(r(8, Label::Pass, 0), false, false, false));
        // Still held because a hold gave up, and the run failed: the
        // failure persisted.
        assert!(judged(r(9, Label::Fail, -1), false, true, false));
        assert!(!judged(r(10, Label::Pass, -1), false, true, false));
        // Negated and passing, but only after a hold gave up, or with a
        // thread still held at the end: the stall or the missing work
        // passed it, not the order; a pass proves nothing.
        assert!(!judged(r(11, Label::Pass, 0), false, true, false));
        assert!(!judged(r(12, Label::Pass, 0), true, false, true));
        // Negated and failing after a hold gave up: the failure persisted.
        assert!(judged(r(13, Label::Fail, 0), false, true, false));
        // Lost events: no.
        let mut cut = r(7, Label::Pass, 0);
        cut.complete = false;
        assert!(!judged(cut, true, false, false));
    }

    /// A candidate that held is late when the run settled it (its
    /// anchor) no earlier than the moment an intervention first acted:
    /// "read returns -1" is settled at read's return (20).
    #[test]
    fn a_candidate_settled_once_an_intervention_acted_is_late() {
        let catalog = read_catalog();
        let truth = catalog.evaluate(&read_run(4, Label::Fail, -1));
        let late = |acted| {
            Observation::from_truth(&truth, catalog.failure(), true).acted_from(&truth, acted).late
        };
        // The value and the error it is, both at read's return.
        let held: BTreeSet<PredId> =
            truth.held.iter().map(|h| h.0).filter(|&p| p != catalog.failure()).collect();
        assert_eq!(held, BTreeSet::from([PredId(1), PredId(2)]));
        assert!(truth.held.iter().all(|h| h.0 == catalog.failure() || h.1 == 20));
        assert_eq!(late(Some(20)), held);
        assert_eq!(late(Some(10)), held);
        assert!(late(Some(21)).is_empty());
        assert!(late(None).is_empty());
    }

    /// A run made without a noise point because the intervention acts
    /// where it would (the noise held call 1 of `steal` on role 1; the
    /// intervention holds every call of `steal` there until another call
    /// has ended) counts only if it failed: passing, the missing noise may
    /// be why. Without a displaced point, a passing run counts.
    #[test]
    fn a_run_that_passed_without_noise_the_intervention_displaced_is_not_evidence() {
        use crate::model::{Noise, NoiseAction, NoiseAt, Point};
        let noise = |func| Noise {
            at: NoiseAt::Call { site: Site { func, role: 1, instance: 1 } },
            action: NoiseAction::Delay { us: 1_000 },
            held_ns: 0,
            func: None,
            near_miss: false,
        };
        let hold = Intervention::HoldUntil {
            site: Site { func: 0, role: 1, instance: 0 },
            point: Point::Entry,
            until: Site { func: 1, role: 0, instance: 1 },
            until_point: Point::Exit,
        };
        let plan = || Plan::new(std::slice::from_ref(&hold), Duration::from_millis(500), &[]);
        let displacing = plan().with_noise(&[noise(0)]);
        let beside = plan().with_noise(&[noise(2)]);
        assert_eq!((displacing.displaced, beside.displaced), (1, 0));
        // A focused plan off in this run still counts: the round's runs
        // left would be those without the noise.
        let off = plan().with_noise(&[Noise { action: NoiseAction::Skip, ..noise(0) }]);
        assert_eq!(off.displaced, 1);
        let passed = run(1, Label::Pass, Vec::new(), 100);
        let failed = run(2, Label::Fail, Vec::new(), 100);
        assert!(passed_without_its_noise(&displacing, &passed));
        assert!(!passed_without_its_noise(&displacing, &failed));
        assert!(!passed_without_its_noise(&beside, &passed));
    }
}
