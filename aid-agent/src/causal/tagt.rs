//! Traditional adaptive group testing (TAGT), the paper's baseline
//! (Sec. 6, 7): predicates are treated as independent items, groups are
//! random halves of the remaining pool (binary splitting), and each round
//! decides only about the predicates it intervened on — a group that still
//! fails is cleared, a group that stops the failure is split further, a
//! single predicate that stops it is a cause. No DAG, no pruning.

use rand::seq::SliceRandom;

use super::{CausalError, Phase, Ties, engine::Experiment};
use crate::bitset::BitSet;

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    let mut pool: Vec<usize> = ex.kb.open().iter().collect();
    match ex.ties {
        Ties::Random => pool.shuffle(&mut ex.rng),
        Ties::ById => pool.sort_by_key(|&i| ex.dag.id(i)),
    }
    split(ex, pool)
}

/// Binary splitting over `pool`, kept in its random order.
fn split(ex: &mut Experiment<'_>, mut pool: Vec<usize>) -> Result<(), CausalError> {
    loop {
        pool.retain(|&i| ex.kb.is_open(i));
        if pool.is_empty() {
            return Ok(());
        }
        let half = pool.len().div_ceil(2);
        let first: Vec<usize> = pool[..half].to_vec();
        let group = BitSet::from_iter(ex.dag.nodes(), first.iter().copied());
        let stopped = ex.intervene(&group, Phase::Tagt)?;
        if stopped && half > 1 {
            split(ex, first)?;
        }
    }
}
