//! Alg. 1, Group Intervention With Pruning: divide and conquer over the
//! candidate predicates in topological order. Intervene on the first half;
//! if the failure stops, the half is searched recursively; if it persists,
//! the half is pruned. Pruning of other predicates (lines 17-20, Def. 2)
//! happens in the knowledge store after every round, against the whole DAG
//! rather than only the current recursion's pool — the illustrative example
//! (Sec. 5.2, step 6) prunes P7, which is outside the recursive call's
//! pool, so the pool of line 22 must shrink by global decisions.
//!
//! A round that is no evidence (confounded) is treated like one that
//! stopped the failure — its half is searched in smaller groups — except
//! that a single predicate is then set aside as untestable.

use super::{
    CausalError, Phase,
    engine::{Experiment, Outcome},
};
use crate::bitset::BitSet;

/// Alg. 3 line 4: GIWP over every predicate still open.
pub(crate) fn run_all(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    let pool = ex.kb.open().clone();
    giwp(ex, pool)
}

/// Alg. 1 on a pool of predicates (node indices).
pub(crate) fn giwp(ex: &mut Experiment<'_>, mut pool: BitSet) -> Result<(), CausalError> {
    loop {
        // Line 22: drop confirmed and spurious predicates, wherever the
        // decision came from.
        pool.intersect_with(ex.kb.open());
        if pool.is_empty() {
            return Ok(());
        }
        let mut order: Vec<usize> = pool.iter().collect();
        ex.topo_sort(&mut order);
        // Line 4: the first half, rounded up ({P1,P2,P3} of six, {P1,P2} of
        // three in Fig. 4).
        let half = order.len().div_ceil(2);
        let first = BitSet::from_iter(ex.dag.nodes(), order[..half].iter().copied());
        match ex.intervene(&first, Phase::Giwp)? {
            // Lines 9-12: the half may hold a cause; find it (and any others).
            Outcome::Stopped | Outcome::Unused if half > 1 => giwp(ex, first)?,
            Outcome::Unused => ex.set_untestable(order[0]),
            // Lines 7-8 and 14-15 (single cause confirmed, or the half
            // pruned) are applied by the knowledge store.
            Outcome::Stopped | Outcome::Persisted => {}
        }
    }
}
