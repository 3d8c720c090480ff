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
    intervene::{Plan, noise::NoiseSource},
    model::{Intervention, Run},
    predicates::{Catalog, PredId},
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
/// of it was lost or cut short (it is complete) and everything due in it
/// was done — a hold that timed out, or a frame that could not be
/// unwound, leaves the predicate as it was.
pub fn is_evidence(run: &Run) -> bool {
    run.complete && run.interventions.iter().all(|a| a.applied && !a.timed_out)
}

pub struct SourceOracle<'a> {
    source: &'a mut dyn RunSource,
    catalog: &'a Catalog,
    writer: &'a mut Writer,
    hold_timeout: Duration,
    noise: Option<NoiseSource>,
    cancel: &'a AtomicBool,
    /// Every run made, in order (rounds are consecutive slices of it).
    log: Vec<OracleRun>,
    ui: &'a mut dyn Progress,
    /// Valid runs of the round under way (None between rounds).
    round: Option<u32>,
    rounds: u32,
}

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

    fn interventions(&self, group: &BTreeSet<PredId>) -> Vec<Intervention> {
        group.iter().filter_map(|p| self.catalog.get(*p)?.intervention.clone()).collect()
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
}

impl Oracle for SourceOracle<'_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let mut plan = Plan::new(&self.interventions(group), self.hold_timeout);
        if let Some(noise) = self.noise.as_mut() {
            plan = plan.with_noise(&noise.draw());
        }
        let rec = self.source.intervene(&plan, self.cancel)?;
        self.writer.append(&rec, self.source.functions())?;
        let truth = self.catalog.evaluate(&rec.run);
        let valid = is_evidence(&rec.run);
        let obs = Observation::from_truth(&truth, self.catalog.failure(), valid);
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
    use crate::model::{AppliedIntervention, Label, Site, testing::run};

    #[test]
    fn evidence_needs_a_complete_run_with_everything_applied() {
        let iv =
            Intervention::DelayExit { site: Site { func: 0, role: 0, instance: 1 }, delay_us: 1 };
        let with = |applied, timed_out, complete| {
            let mut r = run(1, Label::Pass, vec![], 1);
            r.complete = complete;
            r.interventions =
                vec![AppliedIntervention { intervention: iv.clone(), applied, timed_out }];
            r
        };
        assert!(is_evidence(&with(true, false, true)));
        assert!(!is_evidence(&with(false, false, true)));
        assert!(!is_evidence(&with(true, true, true)));
        assert!(!is_evidence(&with(true, false, false)));
    }
}
