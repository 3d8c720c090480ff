//! Traditional adaptive group testing (TAGT), the paper's baseline
//! (Sec. 2, 6, 7): predicates are independent items in random order, and
//! each round decides only about the predicates it intervened on. Binary
//! splitting: test the whole remaining pool; if the failure persists,
//! every item is cleared and the search ends; if it stops, halve it down to
//! one cause (⌈log2 n⌉ rounds: a half that fails is cleared and the other
//! half is known to hold the cause), remove it, and start again. That is
//! the paper's "log N group interventions are sufficient to reveal each
//! causal predicate", D·log N in all.
//!
//! One departure, for soundness: a half inferred to hold a cause (its
//! sibling failed) is not proof of one when causes are redundant
//! (C = X ∨ Y: {X, Y} stops the failure, {X} does not, and neither does
//! {Y}). So a predicate reached by inference is confirmed by a round on it
//! alone. At most one extra round per cause: D·(⌈log2 N⌉ + 2) + 1 rounds
//! in all (the last round shows the pool holds no more causes).

use rand::seq::SliceRandom;

use super::{
    CausalError, Phase, Ties,
    engine::{Experiment, Outcome},
};
use crate::bitset::BitSet;

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    let mut pool: Vec<usize> = ex.kb.open().iter().collect();
    match ex.ties {
        Ties::Random => pool.shuffle(&mut ex.rng),
        Ties::ById => pool.sort_by_key(|&i| ex.dag.id(i)),
    }
    resolve(ex, pool)
}

fn group(ex: &Experiment<'_>, items: &[usize]) -> BitSet {
    BitSet::from_iter(ex.dag.nodes(), items.iter().copied())
}

/// Finds every cause in `pool`, kept in its random order.
fn resolve(ex: &mut Experiment<'_>, mut pool: Vec<usize>) -> Result<(), CausalError> {
    loop {
        pool.retain(|&i| ex.kb.is_open(i));
        if pool.is_empty() {
            return Ok(());
        }
        match ex.intervene(&group(ex, &pool), Phase::Tagt)? {
            // Every item cleared.
            Outcome::Persisted => {}
            Outcome::Stopped => find_one(ex, pool.clone())?,
            Outcome::Unused if pool.len() == 1 => ex.set_untestable(pool[0]),
            Outcome::Unused => {
                // No evidence about the whole: resolve the halves apart.
                let (a, b) = pool.split_at(pool.len() / 2);
                let (a, b) = (a.to_vec(), b.to_vec());
                resolve(ex, a)?;
                resolve(ex, b)?;
                return Ok(());
            }
        }
    }
}

/// Binary search for one cause in `set`, whose round stopped the failure.
fn find_one(ex: &mut Experiment<'_>, mut set: Vec<usize>) -> Result<(), CausalError> {
    let mut inferred = false;
    loop {
        set.retain(|&i| ex.kb.is_open(i));
        if set.len() <= 1 {
            break;
        }
        let half = set.len().div_ceil(2);
        let first: Vec<usize> = set[..half].to_vec();
        match ex.intervene(&group(ex, &first), Phase::Tagt)? {
            Outcome::Stopped => {
                set = first;
                inferred = false;
            }
            Outcome::Persisted => {
                set.drain(..half);
                inferred = true;
            }
            Outcome::Unused => {
                // Decide the half on its own; the rest is where the cause
                // would be if the half holds none.
                resolve(ex, first)?;
                set.drain(..half);
                inferred = true;
            }
        }
    }
    // A single predicate whose own round stopped the failure is confirmed
    // by it; one reached by inference needs that round.
    if let [last] = set[..]
        && inferred
    {
        match ex.intervene(&group(ex, &[last]), Phase::Tagt)? {
            Outcome::Unused => ex.set_untestable(last),
            Outcome::Stopped | Outcome::Persisted => {}
        }
    }
    Ok(())
}
