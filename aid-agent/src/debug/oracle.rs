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
/// of it was lost or cut short (it is complete) and none of the
/// predicates intervened on held in it — the intervention did what it is
/// for, forcing them to their passing value, judged by the same catalog
/// that defined them.
///
/// It is the predicates that decide, not the bookkeeping of the actions:
/// a hold that timed out because the call it waited for never came (the
/// run took the failing path before it) still left "A ends before B
/// starts" false, and a failure then is evidence against the predicate;
/// discarding such runs would keep only the runs that passed and confirm
/// a spurious cause. Conversely a re-execution that gave up, or a frame
/// that could not be unwound, leaves the predicate true, and the run says
/// nothing about it.
pub fn is_evidence(run: &Run, truth: &RunTruth, group: &BTreeSet<PredId>) -> bool {
    run.complete && group.iter().all(|&p| !truth.holds(p))
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
        let valid = is_evidence(&rec.run, &truth, group);
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

    /// A run is evidence when it is complete and the intervened predicates
    /// did not hold, whatever the actions' bookkeeping says.
    #[test]
    fn evidence_is_a_complete_run_where_the_intervened_predicates_are_false() {
        use crate::{
            model::{
                Function, Session, ValueKind,
                testing::{call, function},
            },
            predicates::{ExtractConfig, learn},
        };
        let functions: Vec<Function> = vec![function(0, "read").with_ret(ValueKind::Signed)];
        let r = |id, label, v| run(id, label, vec![call(0, 0, 1, 10, Some(20), Some(v))], 100);
        let s = Session {
            functions,
            runs: vec![r(1, Label::Pass, 0), r(2, Label::Pass, 0), r(3, Label::Fail, -1)],
        };
        let catalog = learn(&s, &ExtractConfig::default()).unwrap();
        let group = BTreeSet::from([PredId(1)]);
        let iv =
            Intervention::DelayExit { site: Site { func: 0, role: 0, instance: 1 }, delay_us: 1 };
        let judged = |mut run: Run, applied, timed_out| {
            run.interventions =
                vec![AppliedIntervention { intervention: iv.clone(), applied, timed_out }];
            let truth = catalog.evaluate(&run);
            is_evidence(&run, &truth, &group)
        };
        // Negated, failing anyway: evidence, even though a hold timed out.
        assert!(judged(r(4, Label::Fail, 0), true, true));
        // Negated and passing.
        assert!(judged(r(5, Label::Pass, 0), true, false));
        // Still held (the action "applied", the value still wrong): no.
        assert!(!judged(r(6, Label::Fail, -1), true, false));
        // Lost events: no.
        let mut cut = r(7, Label::Pass, 0);
        cut.complete = false;
        assert!(!judged(cut, true, false));
    }
}
