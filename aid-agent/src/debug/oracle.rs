//! The live oracle: the causal engine's "run once with these predicates
//! forced to their passing value" carried out on the real program. Each
//! call starts the target under the group's interventions (plus the noise
//! used to amplify a rare failure, if any), stores the run in the session,
//! and judges it with the same catalog the predicates were learned with.

use std::{
    collections::BTreeSet,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::bail;
use rand::SeedableRng as _;
use serde::{Deserialize, Serialize};

use crate::{
    causal::{Observation, Oracle},
    intervene::Plan,
    intervene::noise::{self, Level},
    model::{Intervention, Run},
    predicates::{Catalog, PredId},
    record::tracer::{RunPolicy, Tracer},
    store::Writer,
    sys::spawn::Target,
};

/// Random delays drawn for every run, from call sites seen before.
pub struct NoiseSource {
    pub level: Level,
    pub seen: Vec<Run>,
    pub rng: rand_chacha::ChaCha8Rng,
}

impl NoiseSource {
    pub fn new(level: Level, seen: Vec<Run>, seed: u64) -> NoiseSource {
        NoiseSource { level, seen, rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed) }
    }

    pub fn draw(&mut self) -> Vec<crate::model::Noise> {
        let seen: Vec<&Run> = self.seen.iter().collect();
        noise::draw(&seen, self.level, &mut self.rng)
    }
}

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

pub struct LiveOracle<'a> {
    pub tracer: &'a mut Tracer,
    pub target: &'a Target,
    pub policy: &'a RunPolicy,
    pub catalog: &'a Catalog,
    pub writer: &'a mut Writer,
    pub hold_timeout: Duration,
    pub noise: Option<NoiseSource>,
    pub cancel: &'a AtomicBool,
    /// Id of the next run in the session.
    pub next_id: u32,
    /// Every run made, in order (rounds are consecutive slices of it).
    pub log: Vec<OracleRun>,
    pub progress: indicatif::ProgressBar,
}

impl LiveOracle<'_> {
    fn interventions(&self, group: &BTreeSet<PredId>) -> Vec<Intervention> {
        group.iter().filter_map(|p| self.catalog.get(*p)?.intervention.clone()).collect()
    }
}

impl Oracle for LiveOracle<'_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let mut plan = Plan::new(&self.interventions(group), self.hold_timeout);
        if let Some(noise) = self.noise.as_mut() {
            plan = plan.with_noise(&noise.draw());
        }
        let id = self.next_id;
        self.next_id += 1;
        let rec = self.tracer.intervene(self.target, id, self.policy, &plan, self.cancel)?;
        self.writer.append(&rec, &self.tracer.functions)?;
        let truth = self.catalog.evaluate(&rec.run);
        // Evidence only if everything due was done: a hold that timed out or
        // a frame we could not unwind leaves the predicate as it was.
        let valid = rec.run.complete
            && !self.cancel.load(Ordering::Relaxed)
            && rec.run.interventions.iter().all(|a| a.applied && !a.timed_out);
        let obs = Observation::from_truth(&truth, self.catalog.failure(), valid);
        self.log.push(OracleRun {
            run: id,
            group: group.clone(),
            failed: obs.failed,
            valid,
            held: obs.held.clone(),
        });
        self.progress.inc(1);
        self.progress.set_message(format!(
            "run {id}: {} with {} intervention(s)",
            if obs.failed { "failed" } else { "passed" },
            plan.interventions.len()
        ));
        Ok(obs)
    }
}
