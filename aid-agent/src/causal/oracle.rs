//! The boundary between the causal engine and whatever executes the target:
//! "run once with these predicates forced to their passing value; tell me
//! whether it failed and which candidate predicates held". The live oracle
//! (run orchestration) re-runs the process under ptrace/BPF interventions;
//! [`super::SimulatedOracle`] answers from a known causal model.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::predicates::{PredId, RunTruth};

/// What one execution under intervention showed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The failure predicate F held.
    pub failed: bool,
    /// Candidate predicates that held (F excluded; intervened ones normally
    /// absent, since the intervention negates them).
    pub held: BTreeSet<PredId>,
    /// False when the intervention could not be applied (a site was never
    /// reached, a hold timed out): the run is no evidence and is repeated.
    pub valid: bool,
    /// Candidates the run left undecided rather than false
    /// ([`RunTruth::undecided`]): their absence is no sign that the
    /// intervention changed them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub undecided: BTreeSet<PredId>,
    /// Candidates of `held` settled (anchored) only once an intervention
    /// had acted in the run: it may have made them hold, so they do not
    /// show that the failure was under way (they witness nothing).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub late: BTreeSet<PredId>,
}

impl Observation {
    /// The observation of an intervened run judged by the catalog
    /// (`Catalog::evaluate` or `evaluate_only`): F decides `failed`, the
    /// other predicates that held are `held`. `valid` is the caller's: every
    /// intervention due in the run was applied and no hold timed out.
    pub fn from_truth(truth: &RunTruth, failure: PredId, valid: bool) -> Observation {
        let held = truth.held.iter().map(|&(p, _)| p).filter(|&p| p != failure).collect();
        Observation {
            failed: truth.failed,
            held,
            valid,
            undecided: truth.undecided_ids(),
            late: BTreeSet::new(),
        }
    }

    /// Marks `late` the held candidates whose anchor in the run is not
    /// before `acted`, the moment an intervention first acted in it
    /// (None: none did). A hold at B's entry makes "A ends before B
    /// starts" true for any A that ends while B waits; anchored at A's
    /// exit, that order stands upstream of the hold in the failing runs,
    /// and held in a passing round it would look like a failure under way
    /// that the intervention stopped.
    pub fn acted_from(mut self, truth: &RunTruth, acted: Option<u64>) -> Observation {
        if let Some(acted) = acted {
            self.late = truth
                .held
                .iter()
                .filter(|&&(p, at)| at >= acted && self.held.contains(&p))
                .map(|&(p, _)| p)
                .collect();
        }
        self
    }
}

/// Executes the target once per call.
pub trait Oracle {
    /// One run with every predicate of `group` intervened on.
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation>;

    /// How many runs it makes at once (a fleet's workers together): the
    /// engine asks for that many runs of a round together
    /// ([`Oracle::run_batch`]).
    fn batch(&self) -> u32 {
        1
    }

    /// `n` runs with every predicate of `group` intervened on, made at
    /// once where the oracle can, in the order of their numbers. Made one
    /// after another unless overridden.
    fn run_batch(&mut self, group: &BTreeSet<PredId>, n: u32) -> anyhow::Result<Vec<Observation>> {
        (0..n).map(|_| self.run(group)).collect()
    }

    /// Whether the interventions of `group` can be installed together in
    /// one run (two that act at one call site in ways a single stop cannot
    /// combine cannot). A group that cannot is split without a run.
    fn installable(&mut self, _group: &BTreeSet<PredId>) -> bool {
        true
    }

    /// A round on `group` begins; it takes at most `max_runs` valid runs
    /// (most end far sooner). For progress displays; does nothing unless
    /// overridden.
    fn round_begins(&mut self, _group: &BTreeSet<PredId>, _max_runs: u32) {}

    /// The round that began last is over.
    fn round_ends(&mut self) {}
}

impl<O: Oracle + ?Sized> Oracle for &mut O {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        (**self).run(group)
    }

    fn batch(&self) -> u32 {
        (**self).batch()
    }

    fn run_batch(&mut self, group: &BTreeSet<PredId>, n: u32) -> anyhow::Result<Vec<Observation>> {
        (**self).run_batch(group, n)
    }

    fn installable(&mut self, group: &BTreeSet<PredId>) -> bool {
        (**self).installable(group)
    }

    fn round_begins(&mut self, group: &BTreeSet<PredId>, max_runs: u32) {
        (**self).round_begins(group, max_runs);
    }

    fn round_ends(&mut self) {
        (**self).round_ends();
    }
}
