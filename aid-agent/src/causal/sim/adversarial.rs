//! The adversarial generator (issue 11): applications on the same timelines
//! as the easy study (docs/synthetic.md), with everything the easy one
//! hides. docs/synthetic.md lists each choice; they were fixed before any
//! strategy was measured on them.
//!
//! - The root cause is any predicate from which a chain of D predicates
//!   remains, not the DAG's first: the predicates before it (and those
//!   unordered with it) cannot descend from it; they co-occur with it.
//! - Every predicate off the causal path co-occurs with the root cause
//!   (holds whenever the failure's trigger fires) with probability 1/4, and
//!   is otherwise an effect of one of its immediate predecessors — which may
//!   itself be a co-occurring predicate, not a descendant of the cause.
//! - Each path member after the root cause gets, with probability 1/5, a
//!   sibling (another effect of the previous member that also precedes the
//!   next); the next member then needs either of the two (redundant, OR) or
//!   both (conjunctive, AND), with even odds.
//! - Noise, applied only in the study's noisy condition: one intervention
//!   per application also suppresses a predicate that precedes it or is
//!   unordered with it in the AC-DAG (confounding); every intervention
//!   scales the trigger's probability by a factor log-uniform in [1/2, 2];
//!   the oracle misses 1 % of the predicates that held.

use rand::{Rng, seq::IndexedRandom};
use rand_chacha::ChaCha8Rng;

use super::{
    apps::{F, Threads, max_causal, timeline, walk},
    world::{Rule, World},
};
use crate::causal::{AcDag, CausalError};
use crate::predicates::PredId;

/// Probability that a predicate off the path co-occurs with the cause.
pub const CO_OCCURRING: f64 = 0.25;
/// Probability that a path member after the root cause gets a sibling.
pub const DOUBLED: f64 = 0.2;
/// Observation dropout in the noisy condition.
pub const DROPOUT: f64 = 0.01;

/// One generated application.
#[derive(Clone, Debug)]
pub struct Adversarial {
    pub dag: AcDag,
    /// The true causal structure, with the side effects and rate factors
    /// the noisy condition turns on.
    pub world: World,
    pub failure_rate: f64,
    pub threads: u32,
    pub predicates: usize,
    pub causal_drawn: usize,
    /// Length of the generated chain from the root cause (before siblings
    /// change which of its members are counterfactual causes).
    pub causal: usize,
    pub root: PredId,
    /// Predicates that precede the root cause or are unordered with it.
    pub not_after_root: usize,
    pub redundant: u32,
    pub conjunctive: u32,
}

pub fn generate(
    max_threads: u32,
    threads: Threads,
    rng: &mut ChaCha8Rng,
) -> Result<Adversarial, CausalError> {
    let tl = timeline(max_threads, threads, rng);
    let n = tl.len();
    let causal_drawn = rng.random_range(1..=max_causal(n));
    let tallest = tl.height.iter().copied().max().unwrap_or(1);
    let d = causal_drawn.min(tallest);
    let roots: Vec<usize> = (0..n).filter(|&i| tl.height[i] >= d).collect();
    let Some(&r) = roots.choose(rng) else {
        return Err(CausalError::Model("no predicate starts a long enough chain".into()));
    };
    let path = walk(&tl, r, d, rng)?;
    let mut rule: Vec<Option<Rule>> = vec![None; n];
    rule[r] = Some(Rule::Trigger);
    for w in path.windows(2) {
        rule[w[1]] = Some(Rule::Any(vec![tl.id(w[0])]));
    }
    let mut f_rule = Rule::Any(vec![tl.id(path[d - 1])]);
    let (mut redundant, mut conjunctive) = (0, 0);
    for i in 1..d {
        if !rng.random_bool(DOUBLED) {
            continue;
        }
        let prev = path[i - 1];
        let next = path.get(i + 1).copied();
        let options: Vec<usize> = tl.succ[prev]
            .iter()
            .filter(|&s| rule[s].is_none() && next.is_none_or(|nx| tl.after[s].contains(nx)))
            .collect();
        let Some(&sib) = options.choose(rng) else { continue };
        rule[sib] = Some(Rule::Any(vec![tl.id(prev)]));
        let pair = vec![tl.id(path[i]), tl.id(sib)];
        let combined = if rng.random_bool(0.5) {
            redundant += 1;
            Rule::Any(pair)
        } else {
            conjunctive += 1;
            Rule::All(pair)
        };
        match next {
            Some(nx) => rule[nx] = Some(combined),
            None => f_rule = combined,
        }
    }
    for (q, slot) in rule.iter_mut().enumerate() {
        if slot.is_some() {
            continue;
        }
        // An immediate predecessor of a predicate not after R is not after
        // R either, so predicates not after R never descend from it.
        let options: Vec<usize> = tl.pred[q].iter().collect();
        *slot = Some(match options.choose(rng) {
            Some(&p) if !rng.random_bool(CO_OCCURRING) => Rule::Any(vec![tl.id(p)]),
            _ => Rule::Trigger,
        });
    }
    // A cause's window ends before its effect's starts: sorting by window
    // end lists causes first.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| tl.windows[a].1.total_cmp(&tl.windows[b].1));
    let mut nodes: Vec<(PredId, Rule)> =
        order.iter().map(|&i| (tl.id(i), rule[i].clone().unwrap_or(Rule::Trigger))).collect();
    nodes.push((F, f_rule));
    let mut world = World::new(F, nodes)?;
    let dag = tl.dag(rng)?;

    // Noise: one leaky intervention, and a rate factor on every one.
    let leaky = tl.id(rng.random_range(0..n));
    let victims: Vec<PredId> =
        (0..n).map(|i| tl.id(i)).filter(|&v| v != leaky && !dag.precedes(leaky, v)).collect();
    if let Some(&v) = victims.choose(rng) {
        world.add_side_effect(leaky, v);
    }
    for i in 0..n {
        let factor = 2f64.powf(rng.random_range(-1.0..=1.0));
        world.set_rate_factor(tl.id(i), factor);
    }
    let failure_rate = rng.random_range(0.2..0.8);
    let not_after_root = (0..n).filter(|&q| q != r && !tl.after[r].contains(q)).count();
    Ok(Adversarial {
        dag,
        world,
        failure_rate,
        threads: tl.threads,
        predicates: n,
        causal_drawn,
        causal: d,
        root: tl.id(r),
        not_after_root,
        redundant,
        conjunctive,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rand::SeedableRng;

    use super::*;

    #[test]
    fn generated_worlds_break_the_easy_assumptions_but_keep_the_dag_complete() {
        let (mut not_source, mut redundant, mut conjunctive, mut chains) = (0, 0, 0, 0);
        for app in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(app);
            let a = generate(12, Threads::UpTo, &mut rng).unwrap();
            let w = &a.world;
            // Completeness (Sec. 4): every causal edge is an AC-DAG edge.
            for p in w.predicates() {
                if let Some(Rule::Any(c) | Rule::All(c)) = w.rule(p) {
                    for &c in c {
                        assert!(a.dag.precedes(c, p), "app {app}: {c} → {p}");
                    }
                }
            }
            // A single root cause: it is a counterfactual cause of F, and
            // nothing else that fires with the trigger is.
            let causes = w.causes(&a.dag.topological());
            assert!(causes.contains(&a.root), "app {app}");
            for &c in &causes {
                assert!(c == a.root || w.rule(c) != Some(&Rule::Trigger), "app {app}");
            }
            // Without noise the root cause alone stops F.
            assert!(!w.evaluate(&BTreeSet::from([a.root]), true, false).1);
            not_source += usize::from(a.not_after_root > 0);
            redundant += a.redundant;
            conjunctive += a.conjunctive;
            chains += usize::from(w.unique_path(&a.dag).is_some());
        }
        assert!(not_source > 150, "{not_source}");
        assert!(redundant > 10 && conjunctive > 10, "{redundant} {conjunctive}");
        assert!(chains > 100 && chains < 200, "{chains}");
    }
}
