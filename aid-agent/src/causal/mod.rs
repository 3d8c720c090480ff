//! The causal engine (AID Sec. 4-5): the approximate causal DAG, the
//! intervention algorithms that refine it into the causal path — GIWP
//! (Alg. 1) with interventional pruning (Def. 2), Branch-Prune (Alg. 2),
//! Causal-Path-Discovery (Alg. 3) — the TAGT baseline, and the oracles they
//! query. It knows nothing about BPF: an [`Oracle`] re-runs the target with a
//! group of predicates forced to their passing value and reports what held.
//!
//! Entry point: [`discover`]. Every strategy shares the round runner
//! (`engine`), which decides how many runs an intervention needs under
//! nondeterminism (`confidence`: the error budget of the whole session) and
//! sets aside confounded rounds, and the evidence store (`knowledge`), which
//! applies the pruning rules a strategy is allowed to use.

use std::{collections::BTreeSet, fmt};

use serde::{Deserialize, Serialize};

use crate::predicates::PredId;

mod aid;
mod branch_prune;
mod confidence;
pub mod dag;
mod engine;
mod giwp;
mod knowledge;
pub mod oracle;
mod replay;
pub mod sim;
#[cfg(test)]
mod soundness;
mod tagt;

pub use confidence::{RARER_LEVEL, SessionConfidence};
pub use dag::{AcDag, RunAnchors};
pub use engine::{MAX_ROUND_RUNS, some_round_witnessed};
pub use oracle::{Observation, Oracle};
pub use replay::{Installable, TagtEstimate, estimate_tagt};
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
        "no failing run among the {0} runs observed before intervening: the target must fail sometimes without intervention"
    )]
    NoBaselineFailure(u32),
    #[error("confidence {0} is outside (0, 1)")]
    BadConfidence(f64),
    #[error("the failure predicate {0} cannot be intervened on")]
    FailureIntervened(PredId),
    #[error("causal model: {0}")]
    Model(String),
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
    /// deduction (docs/causal.md): Def. 2, witness and order rules.
    #[default]
    Aid,
    /// Alg. 3 with branch pruning, exactly as the paper defines it.
    AidPaper,
    /// AID without predicate pruning (no Def. 2 for non-intervened predicates).
    AidP,
    /// AID without predicate or branch pruning: GIWP in topological order only.
    AidPB,
    /// Traditional adaptive group testing, the paper's baseline: binary
    /// splitting over the predicates in random order (about D·log2 N
    /// rounds), decisions only about intervened predicates.
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

/// The runs observed without intervention before the session: the evidence
/// for the failure rate and for how reliably the candidates announce the
/// failure (every candidate held in every failing one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    pub failing: u32,
    pub passing: u32,
}

impl Baseline {
    /// `runs` runs with a fraction `p` failing (tests, replays).
    pub fn from_rate(p: f64, runs: u32) -> Baseline {
        let failing = (p.clamp(0.0, 1.0) * f64::from(runs)).round() as u32;
        Baseline { failing, passing: runs - failing.min(runs) }
    }

    pub fn runs(&self) -> u32 {
        self.failing + self.passing
    }

    /// The observed failure rate (0 without runs).
    pub fn rate(&self) -> f64 {
        if self.runs() == 0 { 0.0 } else { f64::from(self.failing) / f64::from(self.runs()) }
    }
}

/// Knobs shared by every strategy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Runs observed before intervening (`debug`'s observation phase).
    pub baseline: Baseline,
    /// Probability that the whole session is right: the sum of the risks
    /// taken by every round that believed "the failure stopped" stays
    /// below 1 − confidence (see `confidence`).
    pub confidence: f64,
    /// Seed for random tie-breaking and TAGT's order.
    pub seed: u64,
    pub ties: Ties,
    /// Consecutive runs in which the intervention could not be applied
    /// before the round is given up (`Unused::NotApplied`).
    pub max_invalid_runs: u32,
    /// Failing runs of a round from which a descendant of the group must
    /// be absent before that absence prunes it: 1 trusts one run; 2
    /// tolerates a predicate that held but was not observed.
    pub absence_runs: u32,
    /// Runs with the failure under way from which a predicate the group
    /// cannot affect must be missing before the round counts as
    /// confounded (fewer could be observation dropout).
    pub confound_runs: u32,
    /// Most valid runs one round may take before it is given up as
    /// inconclusive; 0: ten times what a round without witnesses needs at
    /// the start of the session.
    pub max_round_runs: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            baseline: Baseline { failing: 20, passing: 20 },
            confidence: 0.99,
            seed: 0,
            ties: Ties::Random,
            max_invalid_runs: 20,
            absence_runs: 2,
            confound_runs: 3,
            max_round_runs: 0,
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<(), CausalError> {
        if self.baseline.failing == 0 {
            return Err(CausalError::NoBaselineFailure(self.baseline.runs()));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(CausalError::BadConfidence(self.confidence));
        }
        Ok(())
    }

    /// Runs the first round needs when nothing upstream of its group can
    /// witness the failure (for messages: rounds with witnesses usually
    /// need fewer, later rounds fewer still).
    pub fn first_round_runs(&self) -> Result<u32, CausalError> {
        self.validate()?;
        Ok(confidence::Ledger::new(self.confidence, self.baseline.failing, self.baseline.passing)
            .blind_runs_needed())
    }
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
    /// Alg. 2 line 18: not reachable from the branches at a junction whose
    /// intervention in `round` stopped the failure. Every causal route to F
    /// passes through those branches, and branches at a junction are
    /// unordered, so the path cannot run through it (Sec. 6.3.1).
    OutsideStoppedBranches { round: usize },
    /// Every round that could test it alone was confounded (the last one is
    /// `round`): it was set aside, neither confirmed nor pruned.
    Confounded { round: usize },
}

/// Why a round is not evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Unused {
    /// Predicates that precede the group or are unordered with it — which
    /// intervening on the group cannot affect — were missing from every
    /// run in which the failure was under way: the intervention changed
    /// them (confounding, seed 001 Def. 3).
    Confounded { changed: Vec<PredId> },
    /// Predicates upstream of the group never held in any of the round's
    /// runs, so nothing shows the failure was ever under way.
    NoWitness,
    /// The round went without the failure for as many runs as a round may
    /// take (at most [`MAX_ROUND_RUNS`]), but nothing upstream of it can
    /// witness a run, so it was judged by its length, and that needed
    /// `needed` runs in a row: the failure is too rare where rounds are
    /// made for a round to show it gone.
    TooLong { needed: u32 },
    /// A predicate the group cannot affect was missing from the runs with
    /// the failure under way, and the round ended before it could be told
    /// apart from a missed observation.
    Unsettled { missing: Vec<PredId> },
    /// The intervention did not take effect in `max_invalid_runs` runs in
    /// a row: a group's interventions could not all be applied in one run
    /// (one of them kept another's call site from being reached), or a
    /// single one was never installed, never negated its predicate, or the
    /// runs were cut short.
    NotApplied,
    /// The round would have stopped, but `failing_held` of its runs were
    /// left out because the intervened predicate still held in them and
    /// they failed, about as many as an intervention that changed nothing
    /// would leave out: the runs it counted may be those that would have
    /// passed anyway (`Ledger::left_out_failures`).
    Ineffective { failing_held: u32 },
    /// The failure persisted, but in only `failing` of the round's runs,
    /// far fewer than with nothing intervened on
    /// (`confidence::RARER_LEVEL`): the intervention may have brought
    /// about a failure of its own, so the round neither confirms nor
    /// rules out its group.
    Rarer { failing: u32 },
    /// The group's interventions act at one call site in ways a single
    /// stop cannot combine (a delay and a hold, holds until different
    /// calls), or hold threads that wait for one another's in a ring
    /// (`intervene::plan::wait_on_each_other`): known before any run, so
    /// none was made and the round is no intervention.
    NotInstallable,
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
    /// How many of them came last, in a row (a round given up for them
    /// ends on `max_invalid_runs` in a row).
    #[serde(default)]
    pub invalid_streak: u32,
    /// Valid runs in which some candidate held: the failure was under way.
    pub witnessed: u32,
    /// Valid runs that failed.
    pub failing_runs: u32,
    /// No run of the round failed.
    pub failure_stopped: bool,
    /// For a round that stopped the failure: the probability, given all the
    /// evidence so far, of its failure-free runs had the group held no
    /// cause — the share of the session's error budget it spent.
    pub risk: Option<f64>,
    /// Set when the round is not evidence; it then confirmed and pruned
    /// nothing.
    pub unused: Option<Unused>,
    pub confirmed: Vec<Decision>,
    pub pruned: Vec<Decision>,
    /// Predicates set aside as untestable after this round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<Decision>,
}

impl Round {
    /// A round on `group` before any run.
    pub fn empty(index: usize, phase: Phase, group: BTreeSet<PredId>) -> Round {
        Round {
            index,
            phase,
            group,
            runs: 0,
            invalid_runs: 0,
            invalid_streak: 0,
            witnessed: 0,
            failing_runs: 0,
            failure_stopped: false,
            risk: None,
            unused: None,
            confirmed: Vec::new(),
            pruned: Vec::new(),
            set_aside: Vec::new(),
        }
    }
}

/// The result of causal path discovery (Def. 1).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Discovery {
    pub strategy: Strategy,
    /// The first predicate of the path; None when no cause was confirmed.
    pub root_cause: Option<PredId>,
    /// Confirmed causes in topological order: root cause .. last before F.
    pub path: Vec<PredId>,
    /// Confirmed causes in front of the root cause that only say when its
    /// threads ran, in topological order (`analysis::triggers`): the
    /// engine's chain is these, then `path`. Empty as the engine ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<PredId>,
    /// Rounds of intervention (group tests) that ran the target: a group
    /// that could not be installed (`Unused::NotInstallable`) is listed in
    /// `rounds` but is none.
    pub interventions: u32,
    /// Executions of the target, valid or not.
    pub runs: u64,
    pub rounds: Vec<Round>,
    /// Predicates neither confirmed nor pruned (empty unless evidence was
    /// contradictory).
    pub unresolved: Vec<PredId>,
    /// Predicates set aside because every round that could test them was
    /// confounded: the path may be missing one of them.
    pub untestable: Vec<PredId>,
    /// The session-level confidence achieved.
    pub confidence: SessionConfidence,
}

impl Discovery {
    /// The engine's whole confirmed chain: the timing, then the path.
    pub fn chain(&self) -> Vec<PredId> {
        self.triggers.iter().chain(&self.path).copied().collect()
    }

    /// Reports the first `n` links of the path as the timing the next one
    /// needs, and that one as the root cause (`analysis::triggers`).
    pub fn lead_with(&mut self, n: usize) {
        let n = n.min(self.path.len().saturating_sub(1));
        self.triggers.extend(self.path.drain(..n));
        self.root_cause = self.path.first().copied();
    }

    /// Rounds that were not used as evidence.
    pub fn unused_rounds(&self) -> impl Iterator<Item = &Round> {
        self.rounds.iter().filter(|r| r.unused.is_some())
    }
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
    fn baselines_and_bad_configs() {
        assert_eq!(Baseline::from_rate(0.5, 40), Baseline { failing: 20, passing: 20 });
        assert!((Baseline::from_rate(0.1, 200).rate() - 0.1).abs() < 1e-12);
        let none = Config { baseline: Baseline { failing: 0, passing: 9 }, ..Config::default() };
        assert_eq!(
            none.validate().unwrap_err().to_string(),
            "no failing run among the 9 runs observed before intervening: the target must fail sometimes without intervention"
        );
        let bad = Config { confidence: 1.0, ..Config::default() };
        assert!(matches!(bad.validate(), Err(CausalError::BadConfidence(_))));
        assert!(Config::default().first_round_runs().unwrap() >= 7);
    }
}
