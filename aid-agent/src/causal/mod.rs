//! The causal engine (AID Sec. 4-5): the approximate causal DAG, the
//! intervention algorithms that refine it into the causal path — GIWP
//! (Alg. 1) with interventional pruning (Def. 2), Branch-Prune (Alg. 2),
//! Causal-Path-Discovery (Alg. 3) — the TAGT baseline, and the oracles they
//! query. It knows nothing about BPF: an [`Oracle`] re-runs the target with a
//! group of predicates forced to their passing value and reports what held.
//!
//! Entry point: [`discover`]. Every strategy shares the round runner
//! (`engine`), which decides how many runs an intervention needs under
//! nondeterminism, and the evidence store (`knowledge`), which applies the
//! pruning rules a strategy is allowed to use.

use std::{collections::BTreeSet, fmt};

use serde::{Deserialize, Serialize};

use crate::predicates::PredId;

mod aid;
mod branch_prune;
pub mod dag;
mod engine;
mod giwp;
mod knowledge;
pub mod oracle;
mod replay;
pub mod sim;
mod tagt;

pub use dag::{AcDag, RunAnchors};
pub use oracle::{Observation, Oracle};
pub use replay::{TagtEstimate, estimate_tagt};
pub use sim::{example, simulate, synthetic};
pub use simulate::{CausalModel, SimulatedOracle};

#[derive(Debug, thiserror::Error)]
pub enum CausalError {
    #[error("no failing runs to order predicates by: record runs until at least one fails")]
    NoFailingRuns,
    #[error("predicate {0} is not a node of the AC-DAG")]
    UnknownPredicate(PredId),
    #[error("predicate {0} lies on a cycle: precedence edges must form a DAG")]
    Cycle(PredId),
    #[error(
        "failure rate {0} is outside (0, 1]: the target must fail sometimes without intervention"
    )]
    BadFailureRate(f64),
    #[error("confidence {0} is outside (0, 1)")]
    BadConfidence(f64),
    #[error("the failure predicate {0} cannot be intervened on")]
    FailureIntervened(PredId),
    #[error("causal model: {0}")]
    Model(String),
    #[error(
        "intervention on {group} could not be applied in {runs} consecutive runs: check that the target reaches those call sites"
    )]
    NoValidRuns { group: String, runs: u32 },
    #[error("oracle failed")]
    Oracle(#[source] anyhow::Error),
}

/// Which intervention algorithm to run.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Our default: a frontier walk down the AC-DAG with every sound
    /// deduction (docs/causal.md): Def. 2 and its extensions, elimination.
    #[default]
    Aid,
    /// Alg. 3 with branch pruning, exactly as the paper defines it.
    AidPaper,
    /// AID without predicate pruning (no Def. 2 for non-intervened predicates).
    AidP,
    /// AID without predicate or branch pruning: GIWP in topological order only.
    AidPB,
    /// Traditional adaptive group testing: random groups, decisions only
    /// about intervened predicates.
    Tagt,
}

impl Strategy {
    pub const ALL: [Strategy; 5] =
        [Strategy::Tagt, Strategy::Aid, Strategy::AidPaper, Strategy::AidP, Strategy::AidPB];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Aid => "AID",
            Strategy::AidPaper => "AID-paper",
            Strategy::AidP => "AID-P",
            Strategy::AidPB => "AID-P-B",
            Strategy::Tagt => "TAGT",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How ties in topological order (and TAGT's grouping) are broken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ties {
    /// At random from `Config::seed`, as the paper says (Sec. 5.4).
    #[default]
    Random,
    /// By predicate id: reproducible walk-throughs such as Fig. 4.
    ById,
}

/// Knobs shared by every strategy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Fraction of runs that fail without intervention (p).
    pub failure_rate: f64,
    /// Probability that a round with a still-present cause shows the
    /// failure at least once; k is the smallest count with 1-(1-p)^k ≥ this.
    pub confidence: f64,
    /// Seed for random tie-breaking and TAGT's groups.
    pub seed: u64,
    pub ties: Ties,
    /// Consecutive runs in which the intervention could not be applied
    /// before the round is abandoned with an error.
    pub max_invalid_runs: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            failure_rate: 0.5,
            confidence: 0.99,
            seed: 0,
            ties: Ties::Random,
            max_invalid_runs: 20,
        }
    }
}

impl Config {
    /// k: runs without failure needed before "the failure stopped" is
    /// believed. One failing run ends a round early (Def. 2, footnote).
    pub fn runs_per_round(&self) -> Result<u32, CausalError> {
        runs_per_round(self.failure_rate, self.confidence)
    }
}

/// Smallest k with 1-(1-p)^k ≥ confidence.
pub fn runs_per_round(p: f64, confidence: f64) -> Result<u32, CausalError> {
    if !(p > 0.0 && p <= 1.0) {
        return Err(CausalError::BadFailureRate(p));
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(CausalError::BadConfidence(confidence));
    }
    if p >= 1.0 {
        return Ok(1);
    }
    let k = ((1.0 - confidence).ln() / (1.0 - p).ln()).ceil();
    let mut k = k.max(1.0) as u32;
    // Guard against rounding just below the target.
    while 1.0 - (1.0 - p).powi(k as i32) < confidence {
        k += 1;
    }
    Ok(k)
}

/// Which part of the algorithm a round belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Alg. 2: intervening on whole branches at a junction.
    BranchPrune,
    /// Alg. 1: group intervention with pruning on predicates (also the
    /// frontier search of `Aid`).
    Giwp,
    /// TAGT's random groups.
    Tagt,
}

/// Why a predicate was confirmed causal or pruned. Round numbers index
/// [`Discovery::rounds`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum Reason {
    /// Intervening on it alone stopped the failure in every run of `round`.
    StoppedFailure { round: usize },
    /// The group of `round` stopped the failure, so it holds a cause; every
    /// other member has since been shown not to be one.
    Elimination { round: usize },
    /// Intervened on in `round` and the failure still happened (Def. 2).
    FailurePersisted { round: usize },
    /// Held in a run of `round` that did not fail, and precedes no
    /// intervened predicate that could be the cause (Def. 2).
    HeldWithoutFailure { round: usize },
    /// Absent from a run of `round` that failed (Def. 2).
    AbsentWithFailure { round: usize },
    /// The confirmed cause `witness` still held in `round`, so no
    /// intervened predicate that does not follow it can be on the path.
    WitnessHeld { witness: PredId, round: usize },
    /// Not ordered with the confirmed cause `cause`; the causal path is a
    /// chain of the AC-DAG (Def. 1, Assumption 2).
    NotOrderedWith { cause: PredId },
    /// Another branch at the same junction was shown in `round` to hold a
    /// cause; branches are unordered, so only one can be on the path
    /// (Sec. 6.3.1).
    OtherBranchCausal { round: usize },
    /// Alg. 2 line 18: no longer reachable from the potential causal chain.
    Unreachable,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub pred: PredId,
    pub reason: Reason,
}

/// One intervention: the group forced to its passing value, the runs it
/// took, and what the engine concluded from them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    pub index: usize,
    pub phase: Phase,
    pub group: BTreeSet<PredId>,
    /// Valid runs (the intervention was applied).
    pub runs: u32,
    /// Runs where the intervention could not be applied (not evidence).
    pub invalid_runs: u32,
    /// No run of the round failed.
    pub failure_stopped: bool,
    pub confirmed: Vec<Decision>,
    pub pruned: Vec<Decision>,
}

/// The result of causal path discovery (Def. 1).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Discovery {
    pub strategy: Strategy,
    /// The first predicate of the path; None when no cause was confirmed.
    pub root_cause: Option<PredId>,
    /// Confirmed causes in topological order: root cause .. last before F.
    pub path: Vec<PredId>,
    /// Rounds of intervention (group tests).
    pub interventions: u32,
    /// Executions of the target, valid or not.
    pub runs: u64,
    /// Runs per round when the failure stopped (k).
    pub runs_per_round: u32,
    pub rounds: Vec<Round>,
    /// Predicates neither confirmed nor pruned (empty unless evidence was
    /// contradictory, e.g. a cause that did not show in k runs).
    pub unresolved: Vec<PredId>,
}

/// Finds the causal path from the root cause to F (Alg. 3) with the chosen
/// strategy, querying `oracle` once per run.
pub fn discover(
    dag: &AcDag,
    strategy: Strategy,
    oracle: &mut dyn Oracle,
    config: &Config,
) -> Result<Discovery, CausalError> {
    discover_or_partial(dag, strategy, oracle, config).map_err(|(e, _)| e)
}

/// [`discover`]; when it stops part way (the oracle failed: the user
/// interrupted, the target went away), the error comes back with what the
/// rounds made so far had established (None if it failed before any).
pub fn discover_or_partial(
    dag: &AcDag,
    strategy: Strategy,
    oracle: &mut dyn Oracle,
    config: &Config,
) -> Result<Discovery, (CausalError, Option<Box<Discovery>>)> {
    let mut ex = engine::Experiment::new(dag, oracle, config, strategy).map_err(|e| (e, None))?;
    let ran = match strategy {
        Strategy::Aid => aid::run(&mut ex),
        Strategy::AidPaper | Strategy::AidP => {
            branch_prune::run(&mut ex).and_then(|()| giwp::run_all(&mut ex))
        }
        Strategy::AidPB => giwp::run_all(&mut ex),
        Strategy::Tagt => tagt::run(&mut ex),
    };
    match ran {
        Ok(()) => Ok(ex.finish(strategy)),
        Err(e) => Err((e, Some(Box::new(ex.finish(strategy))))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_per_round_reaches_the_confidence() {
        // p = 0.5: 1 - 0.5^7 = 0.992 ≥ 0.99 > 1 - 0.5^6.
        assert_eq!(runs_per_round(0.5, 0.99).unwrap(), 7);
        // p = 0.1: 44 runs give 0.9903.
        assert_eq!(runs_per_round(0.1, 0.99).unwrap(), 44);
        assert_eq!(runs_per_round(1.0, 0.99).unwrap(), 1);
        assert!(matches!(runs_per_round(0.0, 0.99), Err(CausalError::BadFailureRate(_))));
        assert!(matches!(runs_per_round(0.5, 1.0), Err(CausalError::BadConfidence(_))));
    }
}
