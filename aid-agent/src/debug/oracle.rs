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
    pub source: &'a mut dyn RunSource,
    pub catalog: &'a Catalog,
    pub writer: &'a mut Writer,
    pub hold_timeout: Duration,
    pub noise: Option<NoiseSource>,
    pub cancel: &'a AtomicBool,
    /// Every run made, in order (rounds are consecutive slices of it).
    pub log: Vec<OracleRun>,
    pub ui: &'a mut dyn Progress,
}

impl SourceOracle<'_> {
    fn interventions(&self, group: &BTreeSet<PredId>) -> Vec<Intervention> {
        group.iter().filter_map(|p| self.catalog.get(*p)?.intervention.clone()).collect()
    }
}

impl Oracle for SourceOracle<'_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let mut plan =
            Plan::new(&self.interventions(group), self.hold_timeout, self.source.functions());
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
        self.ui.step(&format!(
            "{} {id}: {} with {} intervention(s)",
            self.source.noun(),
            if obs.failed { "failed" } else { "passed" },
            plan.interventions.len()
        ));
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
