//! The round runner every strategy drives: it turns "intervene on this
//! group" into repeated runs of the target, decides when "no failure" is
//! believable under nondeterminism, feeds the evidence to the knowledge
//! store, and records each round for the report.
//!
//! A round stops at the first failing run — one counter-example is enough
//! to prune (Def. 2, footnote) — and otherwise takes k valid runs, k chosen
//! from the failure rate without intervention so that a still-present cause
//! would have shown the failure with probability ≥ the configured
//! confidence.

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    AcDag, CausalError, Config, Decision, Discovery, Oracle, Phase, Round, Strategy, Ties,
    knowledge::{Evidence, Knowledge, Rules, Status},
};
use crate::{bitset::BitSet, predicates::PredId};

pub(crate) struct Experiment<'a> {
    pub dag: &'a AcDag,
    oracle: &'a mut dyn Oracle,
    pub kb: Knowledge,
    pub rng: ChaCha8Rng,
    pub ties: Ties,
    k: u32,
    max_invalid: u32,
    rounds: Vec<Round>,
    /// Decisions taken before the first round (none in practice).
    early: Vec<Decision>,
    runs: u64,
}

impl<'a> Experiment<'a> {
    pub fn new(
        dag: &'a AcDag,
        oracle: &'a mut dyn Oracle,
        config: &Config,
        strategy: Strategy,
    ) -> Result<Self, CausalError> {
        let rules = match strategy {
            Strategy::Aid => Rules { def2: true, extended: true },
            Strategy::AidPaper => Rules { def2: true, extended: false },
            Strategy::AidP | Strategy::AidPB | Strategy::Tagt => Rules::default(),
        };
        Ok(Experiment {
            dag,
            oracle,
            kb: Knowledge::new(dag, rules),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            ties: config.ties,
            k: config.runs_per_round()?,
            max_invalid: config.max_invalid_runs.max(1),
            rounds: Vec::new(),
            early: Vec::new(),
            runs: 0,
        })
    }

    pub fn interventions(&self) -> usize {
        self.rounds.len()
    }

    /// Sorts node indices into topological order (depth in the DAG), ties
    /// broken at random or by id as configured (Sec. 5.4).
    pub fn topo_sort(&mut self, nodes: &mut [usize]) {
        let keys: Vec<(usize, usize, u64)> = nodes
            .iter()
            .map(|&i| {
                let tie = match self.ties {
                    Ties::Random => self.rng.random::<u64>(),
                    Ties::ById => u64::from(self.dag.id(i).0),
                };
                (i, self.dag.depth(i), tie)
            })
            .collect();
        let mut keyed = keys;
        keyed.sort_by_key(|&(_, d, t)| (d, t));
        for (slot, (i, _, _)) in nodes.iter_mut().zip(keyed) {
            *slot = i;
        }
    }

    /// A tie-break key for sets of nodes (branches): random or by smallest id.
    pub fn tie_key(&mut self, nodes: &BitSet) -> u64 {
        match self.ties {
            Ties::Random => self.rng.random::<u64>(),
            Ties::ById => {
                nodes.iter().map(|i| u64::from(self.dag.id(i).0)).min().unwrap_or(u64::MAX)
            }
        }
    }

    /// One round of intervention on `group` (node indices). Returns true
    /// when the failure stopped in every one of the k valid runs.
    pub fn intervene(&mut self, group: &BitSet, phase: Phase) -> Result<bool, CausalError> {
        let n = self.dag.nodes();
        let f = self.dag.f_index();
        if group.contains(f) {
            return Err(CausalError::FailureIntervened(self.dag.failure()));
        }
        let ids: BTreeSet<PredId> = group.iter().map(|i| self.dag.id(i)).collect();
        let mut valid = 0u32;
        let mut invalid = 0u32;
        let mut streak = 0u32;
        let mut failed = false;
        let mut held_no_fail = BitSet::new(n);
        let mut absent_fail = BitSet::new(n);
        let mut held_any = BitSet::new(n);
        while valid < self.k {
            let obs = self.oracle.run(&ids).map_err(CausalError::Oracle)?;
            self.runs += 1;
            if !obs.valid {
                invalid += 1;
                streak += 1;
                if streak >= self.max_invalid {
                    return Err(CausalError::NoValidRuns {
                        group: format_group(&ids),
                        runs: streak,
                    });
                }
                continue;
            }
            streak = 0;
            valid += 1;
            let mut held = BitSet::new(n);
            for p in &obs.held {
                if let Some(i) = self.dag.index_of(*p)
                    && i != f
                {
                    held.insert(i);
                }
            }
            held_any.union_with(&held);
            if obs.failed {
                let mut absent = BitSet::full(n);
                absent.difference_with(&held);
                absent.remove(f);
                absent_fail.union_with(&absent);
                failed = true;
                break;
            }
            held_no_fail.union_with(&held);
        }
        let index = self.rounds.len();
        let ev = Evidence {
            round: index,
            group: group.clone(),
            stopped: !failed,
            held_no_fail,
            absent_fail,
            held_any,
        };
        let changes = self.kb.absorb(self.dag, ev);
        let mut round = Round {
            index,
            phase,
            group: ids,
            runs: valid,
            invalid_runs: invalid,
            failure_stopped: !failed,
            confirmed: Vec::new(),
            pruned: Vec::new(),
        };
        for (i, status, reason) in changes {
            let d = Decision { pred: self.dag.id(i), reason };
            match status {
                Status::Causal => round.confirmed.push(d),
                _ => round.pruned.push(d),
            }
        }
        self.rounds.push(round);
        Ok(!failed)
    }

    /// Prunes without new evidence (Alg. 2 line 18); recorded with the
    /// latest round.
    pub fn prune(&mut self, i: usize, reason: super::Reason) {
        if let Some((i, _, reason)) = self.kb.prune(i, reason) {
            let d = Decision { pred: self.dag.id(i), reason };
            match self.rounds.last_mut() {
                Some(r) => r.pruned.push(d),
                None => self.early.push(d),
            }
        }
    }

    pub fn finish(self, strategy: Strategy) -> Discovery {
        let mut path: Vec<usize> = self.kb.causal().iter().collect();
        path.sort_by_key(|&i| (self.dag.depth(i), self.dag.id(i)));
        let path: Vec<PredId> = path.into_iter().map(|i| self.dag.id(i)).collect();
        let unresolved = self.kb.open().iter().map(|i| self.dag.id(i)).collect();
        let mut rounds = self.rounds;
        if let Some(first) = rounds.first_mut() {
            let mut early = self.early;
            early.append(&mut first.pruned);
            first.pruned = early;
        }
        Discovery {
            strategy,
            root_cause: path.first().copied(),
            path,
            interventions: rounds.len() as u32,
            runs: self.runs,
            runs_per_round: self.k,
            rounds,
            unresolved,
        }
    }
}

fn format_group(ids: &BTreeSet<PredId>) -> String {
    let v: Vec<String> = ids.iter().map(ToString::to_string).collect();
    format!("{{{}}}", v.join(", "))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::causal::{Observation, discover};

    /// Replays scripted observations and records the groups asked for.
    struct Script {
        answers: VecDeque<Observation>,
        asked: Vec<BTreeSet<PredId>>,
    }

    impl Oracle for Script {
        fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
            self.asked.push(group.clone());
            self.answers.pop_front().ok_or_else(|| anyhow::anyhow!("script exhausted"))
        }
    }

    fn obs(failed: bool, held: &[u32], valid: bool) -> Observation {
        Observation { failed, held: held.iter().map(|&i| PredId(i)).collect(), valid }
    }

    fn chain() -> AcDag {
        AcDag::from_edges(&[PredId(1), PredId(2)], PredId(0), &[(PredId(1), PredId(2))]).unwrap()
    }

    #[test]
    fn a_round_takes_k_runs_unless_one_fails_and_invalid_runs_do_not_count() {
        // p = 0.5, confidence 0.9: k = 4. AID tests P1 alone (the frontier):
        // an invalid run, then four passing runs → P1 confirmed; then P2:
        // the first run fails → pruned at once.
        let dag = chain();
        let mut o = Script {
            answers: [
                obs(false, &[], false),
                obs(false, &[], true),
                obs(false, &[], true),
                obs(false, &[], true),
                obs(false, &[], true),
                obs(true, &[1], true),
            ]
            .into(),
            asked: vec![],
        };
        let config = Config { failure_rate: 0.5, confidence: 0.9, ..Config::default() };
        let d = discover(&dag, Strategy::Aid, &mut o, &config).unwrap();
        assert_eq!(d.runs_per_round, 4);
        assert_eq!(d.runs, 6);
        assert_eq!(d.interventions, 2);
        assert_eq!(
            (d.rounds[0].runs, d.rounds[0].invalid_runs, d.rounds[0].failure_stopped),
            (4, 1, true)
        );
        assert_eq!((d.rounds[1].runs, d.rounds[1].failure_stopped), (1, false));
        assert_eq!(d.path, vec![PredId(1)]);
        assert_eq!(o.asked[0], BTreeSet::from([PredId(1)]));
        assert_eq!(o.asked[5], BTreeSet::from([PredId(2)]));
    }

    #[test]
    fn runs_that_never_apply_the_intervention_end_in_an_error() {
        let dag = chain();
        let mut o =
            Script { answers: (0..5).map(|_| obs(false, &[], false)).collect(), asked: vec![] };
        let config = Config { max_invalid_runs: 3, ..Config::default() };
        let err = discover(&dag, Strategy::AidPaper, &mut o, &config).unwrap_err();
        assert_eq!(
            err.to_string(),
            "intervention on {P1} could not be applied in 3 consecutive runs: check that the target \
             reaches those call sites"
        );
    }

    #[test]
    fn oracle_errors_and_bad_rates_surface() {
        let dag = chain();
        let mut o = Script { answers: VecDeque::new(), asked: vec![] };
        let err = discover(&dag, Strategy::Tagt, &mut o, &Config::default()).unwrap_err();
        assert!(matches!(err, CausalError::Oracle(_)));
        let bad = Config { failure_rate: 0.0, ..Config::default() };
        assert!(matches!(
            discover(&dag, Strategy::Aid, &mut o, &bad),
            Err(CausalError::BadFailureRate(_))
        ));
    }
}
