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
    /// Valid runs a round takes when the failure does not show (k).
    per_round: u32,
    /// The round being shown: its number (from 1) and valid runs so far;
    /// None between rounds.
    round: Option<(u32, u32)>,
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
        per_round: u32,
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
            per_round,
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

    /// Progress of the rounds, by the engine's rule (a round ends at its
    /// first valid failing run, or after k valid runs): display only.
    fn show(&mut self, group: &BTreeSet<PredId>, valid: bool, failed: bool, id: u32) {
        let noun = self.source.noun();
        let (number, mut done) = match self.round {
            Some(r) => r,
            None => {
                self.rounds += 1;
                const SHOWN: usize = 3;
                let mut what =
                    group.iter().take(SHOWN).map(ToString::to_string).collect::<Vec<_>>().join(",");
                if group.len() > SHOWN {
                    what.push_str(&format!(" +{}", group.len() - SHOWN));
                }
                // The bar's length is the round's most runs (k).
                self.ui.begin(
                    &format!("round {} on {what}", self.rounds),
                    Some(u64::from(self.per_round)),
                );
                (self.rounds, 0)
            }
        };
        let status = if !valid {
            format!("{noun} {id}: not applied, not counted")
        } else {
            done += 1;
            format!("{noun} {id} {}", if failed { "failed" } else { "passed" })
        };
        self.ui.step_to(u64::from(done), &status);
        if valid && (failed || done >= self.per_round) {
            self.round = None;
            self.ui.end();
        } else {
            self.round = Some((number, done));
        }
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
        self.show(group, valid, obs.failed, id);
        Ok(obs)
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
