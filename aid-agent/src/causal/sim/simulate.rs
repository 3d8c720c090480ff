//! A simulated target that obeys the paper's assumptions (Sec. 5.1): one
//! root cause that occurs in a run with probability p (nondeterminism),
//! deterministic effects (a predicate occurs iff its causal parent occurred
//! and it was not intervened on), and a unique causal path from the root
//! cause to F. It answers the engine exactly as the live oracle would, so
//! the unit tests and the synthetic study exercise the real algorithms.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::causal::{CausalError, Observation, Oracle};
use crate::predicates::PredId;

/// The true causal structure: a tree rooted at the root cause. Every other
/// predicate, F included, has one causal parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CausalModel {
    root: PredId,
    failure: PredId,
    parent: BTreeMap<PredId, PredId>,
    /// Every predicate except the root, parents before children.
    order: Vec<PredId>,
}

impl CausalModel {
    /// `parents`: (effect, cause) pairs. Errors unless they form a tree
    /// rooted at `root` that reaches `failure`.
    pub fn new(
        root: PredId,
        failure: PredId,
        parents: impl IntoIterator<Item = (PredId, PredId)>,
    ) -> Result<Self, CausalError> {
        let mut parent = BTreeMap::new();
        for (child, p) in parents {
            if child == root {
                return Err(CausalError::Model(format!(
                    "the root cause {root} cannot have a cause"
                )));
            }
            if parent.insert(child, p).is_some() {
                return Err(CausalError::Model(format!("{child} has two causal parents")));
            }
        }
        let mut children: BTreeMap<PredId, Vec<PredId>> = BTreeMap::new();
        for (&c, &p) in &parent {
            children.entry(p).or_default().push(c);
        }
        let mut order = Vec::with_capacity(parent.len());
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            for &c in children.get(&p).map_or(&[][..], Vec::as_slice) {
                order.push(c);
                stack.push(c);
            }
        }
        if order.len() != parent.len() {
            return Err(CausalError::Model(
                "some predicates are not caused, directly or not, by the root cause".into(),
            ));
        }
        if !parent.contains_key(&failure) {
            return Err(CausalError::Model(format!("the failure {failure} has no cause")));
        }
        Ok(CausalModel { root, failure, parent, order })
    }

    pub fn root(&self) -> PredId {
        self.root
    }

    pub fn failure(&self) -> PredId {
        self.failure
    }

    /// (effect, cause) pairs, causes before their effects.
    pub fn edges(&self) -> impl Iterator<Item = (PredId, PredId)> + '_ {
        self.order.iter().map(|&c| (c, self.parent[&c]))
    }

    /// The true causal path: root cause .. F's parent.
    pub fn path(&self) -> Vec<PredId> {
        let mut path = Vec::new();
        let mut at = self.failure;
        while let Some(&p) = self.parent.get(&at) {
            path.push(p);
            at = p;
        }
        path.reverse();
        path
    }

    /// Which predicates occur, and whether F does, when the root cause
    /// occurs (`root_occurs`) and `group` is intervened on.
    pub fn evaluate(&self, group: &BTreeSet<PredId>, root_occurs: bool) -> Observation {
        let mut held = BTreeSet::new();
        let root = root_occurs && !group.contains(&self.root);
        if root {
            held.insert(self.root);
        }
        let mut failed = false;
        for &c in &self.order {
            let p = self.parent[&c];
            if held.contains(&p) && !group.contains(&c) {
                if c == self.failure {
                    failed = true;
                } else {
                    held.insert(c);
                }
            }
        }
        Observation { failed, held, valid: true, ..Default::default() }
    }
}

/// Runs the [`CausalModel`] with the root cause occurring at random.
#[derive(Clone, Debug)]
pub struct SimulatedOracle {
    model: CausalModel,
    failure_rate: f64,
    rng: ChaCha8Rng,
    runs: u64,
}

impl SimulatedOracle {
    pub fn new(model: CausalModel, failure_rate: f64, seed: u64) -> Self {
        SimulatedOracle { model, failure_rate, rng: ChaCha8Rng::seed_from_u64(seed), runs: 0 }
    }

    pub fn model(&self) -> &CausalModel {
        &self.model
    }

    pub fn runs(&self) -> u64 {
        self.runs
    }
}

impl Oracle for SimulatedOracle {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        self.runs += 1;
        let occurs = self.rng.random_bool(self.failure_rate.clamp(0.0, 1.0));
        Ok(self.model.evaluate(group, occurs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u32) -> PredId {
        PredId(i)
    }

    #[test]
    fn effects_follow_the_tree_and_stop_at_interventions() {
        // 1 → 2 → F, 1 → 3.
        let m = CausalModel::new(p(1), p(0), [(p(2), p(1)), (p(0), p(2)), (p(3), p(1))]).unwrap();
        assert_eq!(m.path(), vec![p(1), p(2)]);
        let o = m.evaluate(&BTreeSet::new(), true);
        assert!(o.failed);
        assert_eq!(o.held, BTreeSet::from([p(1), p(2), p(3)]));
        let o = m.evaluate(&BTreeSet::from([p(2)]), true);
        assert!(!o.failed);
        assert_eq!(o.held, BTreeSet::from([p(1), p(3)]));
        let o = m.evaluate(&BTreeSet::new(), false);
        assert!(!o.failed && o.held.is_empty());
    }

    #[test]
    fn models_must_be_trees_rooted_at_the_root_cause() {
        assert!(CausalModel::new(p(1), p(0), [(p(0), p(2)), (p(2), p(3))]).is_err());
        assert!(CausalModel::new(p(1), p(0), [(p(2), p(1))]).is_err());
        assert!(CausalModel::new(p(1), p(0), [(p(1), p(2)), (p(0), p(1))]).is_err());
    }
}
