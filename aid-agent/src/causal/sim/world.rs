//! A simulated target whose causal structure is known, general enough to
//! break the paper's assumptions on purpose (issue 11), and the brute-force
//! oracle that knows the true causal path.
//!
//! In a run, a nondeterministic *trigger* fires or not. Every predicate is a
//! monotone function of its causes: `Trigger` predicates hold whenever the
//! trigger fires (the root cause, and predicates that merely co-occur with
//! it), `Any` holds when one of its causes holds (one cause: a plain effect;
//! several: redundant causes), `All` when every cause holds (conjunctive
//! causes). F is a predicate like the others. Intervening on a predicate
//! forces it false, and its effects follow. Beyond the paper's model an
//! intervention can also suppress other predicates (a side effect: the
//! confounding of seed 001, Def. 3) and scale the trigger's probability, and
//! observation can miss predicates that held.
//!
//! The truth (Def. 1): the counterfactual causes of F are the predicates
//! whose intervention alone, with the trigger firing and no side effects,
//! stops F. A causal path is a chain of them, each a counterfactual cause of
//! the next, of maximal length. Under the paper's assumptions (single root
//! cause, unique causal path) there is exactly one: the counterfactual
//! causes themselves, in order. With conjunctive causes there can be
//! several; a reported path is right when it is one of them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::causal::{AcDag, CausalError, CausalModel, Observation, Oracle};
use crate::predicates::PredId;

/// How a predicate comes about in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Holds whenever the trigger fires.
    Trigger,
    /// Holds when any of these holds.
    Any(Vec<PredId>),
    /// Holds when all of these hold.
    All(Vec<PredId>),
}

#[derive(Clone, Debug)]
pub struct World {
    failure: PredId,
    /// Causes before effects; F is one of them.
    nodes: Vec<(PredId, Rule)>,
    index: HashMap<PredId, usize>,
    /// Predicates an intervention on the key also suppresses.
    side_effects: BTreeMap<PredId, Vec<PredId>>,
    /// Factor an intervention on the key applies to the trigger's probability.
    rate_factors: BTreeMap<PredId, f64>,
}

/// What the brute-force oracle says about a reported path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Right,
    Wrong,
}

impl World {
    /// `nodes`: every predicate with its rule, causes listed before their
    /// effects; `failure` must be among them.
    pub fn new(failure: PredId, nodes: Vec<(PredId, Rule)>) -> Result<World, CausalError> {
        let mut index = HashMap::new();
        for (k, (p, rule)) in nodes.iter().enumerate() {
            let causes: &[PredId] = match rule {
                Rule::Trigger => &[],
                Rule::Any(c) | Rule::All(c) => c,
            };
            if matches!(rule, Rule::Any(c) | Rule::All(c) if c.is_empty()) {
                return Err(CausalError::Model(format!("{p} has an empty list of causes")));
            }
            for c in causes {
                if !index.contains_key(c) {
                    return Err(CausalError::Model(format!(
                        "{p} is caused by {c}, which is not listed before it"
                    )));
                }
            }
            if index.insert(*p, k).is_some() {
                return Err(CausalError::Model(format!("{p} is listed twice")));
            }
        }
        if !index.contains_key(&failure) {
            return Err(CausalError::Model(format!("the failure {failure} is not listed")));
        }
        Ok(World {
            failure,
            nodes,
            index,
            side_effects: BTreeMap::new(),
            rate_factors: BTreeMap::new(),
        })
    }

    pub fn failure(&self) -> PredId {
        self.failure
    }

    pub fn rule(&self, p: PredId) -> Option<&Rule> {
        self.index.get(&p).map(|&k| &self.nodes[k].1)
    }

    /// Predicates other than F, causes first.
    pub fn predicates(&self) -> impl Iterator<Item = PredId> + '_ {
        self.nodes.iter().map(|(p, _)| *p).filter(|&p| p != self.failure)
    }

    /// Intervening on `on` will also suppress `victim`.
    pub fn add_side_effect(&mut self, on: PredId, victim: PredId) {
        self.side_effects.entry(on).or_default().push(victim);
    }

    pub fn side_effects(&self) -> &BTreeMap<PredId, Vec<PredId>> {
        &self.side_effects
    }

    /// Intervening on `on` scales the trigger's probability by `factor`.
    pub fn set_rate_factor(&mut self, on: PredId, factor: f64) {
        self.rate_factors.insert(on, factor);
    }

    /// The trigger's probability when `group` is intervened on, from its
    /// probability `p` without intervention. Factors multiply, within
    /// [1/4, 4], and the result stays at most 0.95 (or p if higher).
    pub fn shifted_rate(&self, group: &BTreeSet<PredId>, p: f64) -> f64 {
        let f: f64 = group.iter().filter_map(|g| self.rate_factors.get(g)).product();
        (p * f.clamp(0.25, 4.0)).min(p.max(0.95))
    }

    /// Which predicates hold, and whether F does, in a run where the
    /// trigger fires or not, with `group` intervened on (and their side
    /// effects, if `side_effects`).
    pub fn evaluate(
        &self,
        group: &BTreeSet<PredId>,
        trigger: bool,
        side_effects: bool,
    ) -> (BTreeSet<PredId>, bool) {
        let mut forced: BTreeSet<PredId> = group.clone();
        if side_effects {
            for g in group {
                if let Some(v) = self.side_effects.get(g) {
                    forced.extend(v.iter().copied());
                }
            }
        }
        let mut on = vec![false; self.nodes.len()];
        for (k, (p, rule)) in self.nodes.iter().enumerate() {
            if forced.contains(p) {
                continue;
            }
            on[k] = match rule {
                Rule::Trigger => trigger,
                Rule::Any(c) => c.iter().any(|c| on[self.index[c]]),
                Rule::All(c) => c.iter().all(|c| on[self.index[c]]),
            };
        }
        let failed = on[self.index[&self.failure]];
        let held = self
            .nodes
            .iter()
            .enumerate()
            .filter(|&(k, (p, _))| on[k] && *p != self.failure)
            .map(|(_, (p, _))| *p)
            .collect();
        (held, failed)
    }

    /// Counterfactual causes of F among `candidates`: intervening on one
    /// alone, with the trigger firing and no side effects, stops F.
    pub fn causes(&self, candidates: &[PredId]) -> Vec<PredId> {
        candidates
            .iter()
            .copied()
            .filter(|&p| p != self.failure && !self.evaluate(&BTreeSet::from([p]), true, false).1)
            .collect()
    }

    /// `a` is a counterfactual cause of `b`: intervening on `a` alone
    /// removes `b` (trigger firing, no side effects).
    pub fn cf(&self, a: PredId, b: PredId) -> bool {
        !self.evaluate(&BTreeSet::from([a]), true, false).0.contains(&b)
    }

    /// The unique causal path when the counterfactual causes of F form a
    /// chain (each a counterfactual cause of every later one): the paper's
    /// Assumption 2. None otherwise.
    pub fn unique_path(&self, dag: &AcDag) -> Option<Vec<PredId>> {
        let mut t = self.causes(&dag.topological());
        // Order by how many of the others each one causes: in a chain the
        // first causes all the others.
        let counts: HashMap<PredId, usize> = t
            .iter()
            .map(|&a| (a, t.iter().filter(|&&b| b != a && self.cf(a, b)).count()))
            .collect();
        t.sort_by_key(|p| std::cmp::Reverse(counts[p]));
        for (i, &a) in t.iter().enumerate() {
            for &b in &t[i + 1..] {
                if !self.cf(a, b) || !dag.precedes(a, b) {
                    return None;
                }
            }
        }
        Some(t)
    }

    /// Whether `path` is a causal path of Def. 1: counterfactual causes of
    /// F, each one a counterfactual cause of the next and preceding it in
    /// the AC-DAG, and no such chain longer.
    pub fn judge(&self, dag: &AcDag, path: &[PredId]) -> Verdict {
        let t = self.causes(&dag.topological());
        let in_t: BTreeSet<PredId> = t.iter().copied().collect();
        let link = |a: PredId, b: PredId| self.cf(a, b) && dag.precedes(a, b);
        if path.iter().any(|p| !in_t.contains(p)) || path.windows(2).any(|w| !link(w[0], w[1])) {
            return Verdict::Wrong;
        }
        // Longest chain of links over T (T in topological order of the DAG).
        let mut longest: Vec<usize> = vec![1; t.len()];
        for j in 0..t.len() {
            for i in 0..j {
                if link(t[i], t[j]) {
                    longest[j] = longest[j].max(longest[i] + 1);
                }
            }
        }
        let best = longest.iter().copied().max().unwrap_or(0);
        if path.len() == best { Verdict::Right } else { Verdict::Wrong }
    }
}

impl From<&CausalModel> for World {
    /// The tree model of the easy study: the root cause fires with the
    /// trigger, every other predicate follows its one parent.
    fn from(m: &CausalModel) -> World {
        let mut nodes = vec![(m.root(), Rule::Trigger)];
        for (c, p) in m.edges() {
            nodes.push((c, Rule::Any(vec![p])));
        }
        World::new(m.failure(), nodes)
            .unwrap_or_else(|e| unreachable!("a causal model lists parents first: {e}"))
    }
}

/// When the trigger fires.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// With probability p per run (shifted by interventions if enabled).
    Random(f64),
    /// In the first run and every other run after it, whatever the
    /// intervention: the statistics can never be fooled, so a wrong answer
    /// is the algorithm's (property tests).
    Alternate,
}

/// Noise beyond the paper's model.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Noise {
    /// Probability that a predicate that held is not observed.
    pub dropout: f64,
    /// Interventions have their side effects.
    pub side_effects: bool,
    /// Interventions scale the trigger's probability.
    pub rate_shifts: bool,
}

/// Runs a [`World`].
#[derive(Clone, Debug)]
pub struct WorldOracle {
    world: World,
    schedule: Schedule,
    noise: Noise,
    rng: ChaCha8Rng,
    runs: u64,
}

impl WorldOracle {
    pub fn new(world: World, schedule: Schedule, noise: Noise, seed: u64) -> Self {
        WorldOracle { world, schedule, noise, rng: ChaCha8Rng::seed_from_u64(seed), runs: 0 }
    }

    pub fn runs(&self) -> u64 {
        self.runs
    }
}

impl Oracle for WorldOracle {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        self.runs += 1;
        let trigger = match self.schedule {
            Schedule::Alternate => self.runs % 2 == 1,
            Schedule::Random(p) => {
                let p = if self.noise.rate_shifts { self.world.shifted_rate(group, p) } else { p };
                self.rng.random_bool(p.clamp(0.0, 1.0))
            }
        };
        let (mut held, failed) = self.world.evaluate(group, trigger, self.noise.side_effects);
        if self.noise.dropout > 0.0 {
            let dropout = self.noise.dropout;
            held.retain(|_| !self.rng.random_bool(dropout));
        }
        Ok(Observation { failed, held, valid: true, ..Default::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u32) -> PredId {
        PredId(i)
    }

    /// R → A → {X, Y, Z}, C2 = X ∨ Y, F = C2 (the redundant causes).
    fn redundant() -> World {
        World::new(
            p(0),
            vec![
                (p(1), Rule::Trigger),
                (p(2), Rule::Any(vec![p(1)])),
                (p(3), Rule::Any(vec![p(2)])),
                (p(4), Rule::Any(vec![p(2)])),
                (p(5), Rule::Any(vec![p(2)])),
                (p(6), Rule::Any(vec![p(3), p(4)])),
                (p(0), Rule::Any(vec![p(6)])),
            ],
        )
        .unwrap()
    }

    fn redundant_dag() -> AcDag {
        let e = [(1, 2), (2, 3), (2, 4), (2, 5), (3, 6), (4, 6)];
        let edges: Vec<_> = e.iter().map(|&(a, b)| (p(a), p(b))).collect();
        AcDag::from_edges(&(1..=6).map(p).collect::<Vec<_>>(), p(0), &edges).unwrap()
    }

    #[test]
    fn redundant_causes_are_not_counterfactual() {
        let w = redundant();
        let dag = redundant_dag();
        assert_eq!(w.causes(&dag.topological()), vec![p(1), p(2), p(6)]);
        assert_eq!(w.unique_path(&dag), Some(vec![p(1), p(2), p(6)]));
        assert_eq!(w.judge(&dag, &[p(1), p(2), p(6)]), Verdict::Right);
        assert_eq!(w.judge(&dag, &[p(1), p(2), p(4), p(6)]), Verdict::Wrong);
        assert_eq!(w.judge(&dag, &[p(1), p(6)]), Verdict::Wrong, "not maximal");
        let (held, failed) = w.evaluate(&BTreeSet::from([p(3), p(4)]), true, false);
        assert!(!failed && held == BTreeSet::from([p(1), p(2), p(5)]));
    }

    #[test]
    fn conjunctive_causes_have_two_paths() {
        // R → {X, Y}, F = X ∧ Y.
        let w = World::new(
            p(0),
            vec![
                (p(1), Rule::Trigger),
                (p(2), Rule::Any(vec![p(1)])),
                (p(3), Rule::Any(vec![p(1)])),
                (p(0), Rule::All(vec![p(2), p(3)])),
            ],
        )
        .unwrap();
        let dag =
            AcDag::from_edges(&[p(1), p(2), p(3)], p(0), &[(p(1), p(2)), (p(1), p(3))]).unwrap();
        assert_eq!(w.unique_path(&dag), None);
        assert_eq!(w.judge(&dag, &[p(1), p(2)]), Verdict::Right);
        assert_eq!(w.judge(&dag, &[p(1), p(3)]), Verdict::Right);
        assert_eq!(w.judge(&dag, &[p(1), p(2), p(3)]), Verdict::Wrong);
    }

    #[test]
    fn side_effects_shifts_and_dropout_are_noise_on_top() {
        let mut w = redundant();
        w.add_side_effect(p(5), p(2));
        w.set_rate_factor(p(5), 0.5);
        let g = BTreeSet::from([p(5)]);
        assert!(w.evaluate(&g, true, false).1, "5 is no cause");
        assert!(!w.evaluate(&g, true, true).1, "but its side effect removes A");
        assert!((w.shifted_rate(&g, 0.4) - 0.2).abs() < 1e-12);
        let mut o = WorldOracle::new(
            w,
            Schedule::Alternate,
            Noise { dropout: 1.0, side_effects: false, rate_shifts: false },
            1,
        );
        let first = o.run(&BTreeSet::new()).unwrap();
        assert!(first.failed && first.held.is_empty(), "everything dropped, F still seen");
        assert!(!o.run(&BTreeSet::new()).unwrap().failed, "the trigger alternates");
    }

    #[test]
    fn worlds_must_list_causes_first() {
        let bad = World::new(p(0), vec![(p(0), Rule::Any(vec![p(1)])), (p(1), Rule::Trigger)]);
        assert!(bad.is_err());
        assert!(World::new(p(0), vec![(p(1), Rule::Trigger)]).is_err());
        assert!(World::new(p(0), vec![(p(0), Rule::All(vec![]))]).is_err());
    }
}
