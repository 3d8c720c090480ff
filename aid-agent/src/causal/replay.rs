//! After a live session, how many interventions would TAGT have needed?
//! Replays TAGT against a simulated target whose causal path is the one AID
//! confirmed (the only thing TAGT's decisions depend on: whether a group
//! contains a cause), over several seeds, so the report can show AID's
//! saving next to the baseline as the paper's Fig. 7 does. The replayed
//! TAGT meets the same target: a group whose interventions the session
//! could not install together cannot be installed in the replay either.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{
    AcDag, CausalError, CausalModel, Config, Observation, Oracle, SimulatedOracle, Strategy,
    discover,
};
use crate::predicates::PredId;

/// Which groups of predicates can be intervened on in one run.
pub type Installable<'a> = &'a dyn Fn(&BTreeSet<PredId>) -> bool;

/// The simulated target, with the real one's limits on which groups can
/// be installed together.
struct Limited<'a> {
    sim: SimulatedOracle,
    installable: Installable<'a>,
}

impl Oracle for Limited<'_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        self.sim.run(group)
    }

    fn installable(&mut self, group: &BTreeSet<PredId>) -> bool {
        (self.installable)(group)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TagtEstimate {
    pub seeds: u32,
    pub mean_interventions: f64,
    pub max_interventions: u32,
    pub mean_runs: f64,
    /// Seeds on which TAGT found a different path (0 unless the confidence
    /// is so low that a round wrongly believed the failure stopped).
    pub disagreements: u32,
}

/// Replays TAGT on `dag` for `seeds` seeds (`config.seed`, +1, ...),
/// against a target whose causal path is `causal_path` (root cause first)
/// and on which only the groups `installable` accepts can be intervened on
/// together.
pub fn estimate_tagt(
    dag: &AcDag,
    causal_path: &[PredId],
    config: &Config,
    seeds: u32,
    installable: Installable<'_>,
) -> Result<TagtEstimate, CausalError> {
    let Some(&root) = causal_path.first() else {
        return Err(CausalError::Model("no causal path to replay".into()));
    };
    for &p in causal_path {
        if !dag.contains(p) || p == dag.failure() {
            return Err(CausalError::UnknownPredicate(p));
        }
    }
    let f = dag.failure();
    // The path is a chain; every other predicate is an effect of the root
    // cause that leads nowhere. TAGT only looks at F, so how the other
    // predicates hang does not change its count.
    let mut parents: Vec<(PredId, PredId)> = causal_path.windows(2).map(|w| (w[1], w[0])).collect();
    parents.push((f, *causal_path.last().unwrap_or(&root)));
    for p in dag.topological() {
        if !causal_path.contains(&p) {
            parents.push((p, root));
        }
    }
    let model = CausalModel::new(root, f, parents)?;
    let seeds = seeds.max(1);
    let mut sum = 0u64;
    let mut max = 0u32;
    let mut runs = 0u64;
    let mut disagreements = 0;
    for s in 0..seeds {
        let seed = config.seed.wrapping_add(u64::from(s));
        let sim = SimulatedOracle::new(model.clone(), config.baseline.rate(), seed);
        let mut oracle = Limited { sim, installable };
        let cfg = Config { seed, ..config.clone() };
        let d = discover(dag, Strategy::Tagt, &mut oracle, &cfg)?;
        sum += u64::from(d.interventions);
        max = max.max(d.interventions);
        runs += d.runs;
        if d.path != causal_path {
            disagreements += 1;
        }
    }
    Ok(TagtEstimate {
        seeds,
        mean_interventions: sum as f64 / f64::from(seeds),
        max_interventions: max,
        mean_runs: runs as f64 / f64::from(seeds),
        disagreements,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::causal::{Baseline, example::figure4_dag};

    #[test]
    fn tagt_estimate_on_figure4_needs_more_than_aid() {
        let dag = figure4_dag();
        let path = [PredId(1), PredId(2), PredId(11)];
        let config = Config {
            baseline: Baseline::from_rate(0.5, 40),
            confidence: 0.999_999,
            seed: 7,
            ..Config::default()
        };
        let est = estimate_tagt(&dag, &path, &config, 50, &|_| true).unwrap();
        assert_eq!(est.seeds, 50);
        assert_eq!(est.disagreements, 0);
        assert!(est.mean_interventions > 8.0, "{est:?}");
        assert!(est.max_interventions >= est.mean_interventions.ceil() as u32);
        assert!(estimate_tagt(&dag, &[], &config, 3, &|_| true).is_err());
        assert!(estimate_tagt(&dag, &[PredId(99)], &config, 3, &|_| true).is_err());
        // Where no two predicates can be intervened on together, every
        // group TAGT tries is split without a run, down to single
        // predicates: one round on each of figure 4's 11.
        let single = estimate_tagt(&dag, &path, &config, 50, &|g| g.len() == 1).unwrap();
        assert_eq!(single.disagreements, 0);
        assert_eq!((single.mean_interventions, single.max_interventions), (11.0, 11));
    }
}
