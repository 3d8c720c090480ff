//! Alg. 1, Group Intervention With Pruning: divide and conquer over the
//! candidate predicates in topological order. Intervene on the first half;
//! if the failure stops, the half holds a cause and is searched recursively;
//! if it persists, the half is pruned. Pruning of other predicates (lines
//! 17-20, Def. 2) happens in the knowledge store after every round, against
//! the whole DAG rather than only the current recursion's pool — the
//! illustrative example (Sec. 5.2, step 6) prunes P7, which is outside the
//! recursive call's pool, so the pool of line 22 must shrink by global
//! decisions.
//!
//! The same routine runs over branches (sets of predicates) when
//! Branch-Prune resolves a junction (Alg. 2 line 14).

use super::{CausalError, Phase, Reason, engine::Experiment};
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
        let stopped = ex.intervene(&first, Phase::Giwp)?;
        if stopped && half > 1 {
            // Lines 9-12: the half holds a cause; find it (and any others).
            giwp(ex, first)?;
        }
        // Lines 7-8 and 14-15 (single cause confirmed, or the half pruned)
        // are applied by the knowledge store from the round's evidence.
    }
}

/// GIWP over the branches at a junction (Alg. 2 line 14); returns the
/// branch found to continue the causal path, if any.
///
/// Branches at one junction are pairwise unordered, and the causal path is
/// a chain, so at most one holds causes (Sec. 6.3.1, "log B interventions
/// per junction"): once one is shown causal the others are pruned, and when
/// `holds_cause` says the set continues the path, the last branch left is
/// taken without an intervention — the paper's steps 1 and 2 of Fig. 4
/// ("AID prunes the entire branch of B1, resolving the junction").
pub(crate) fn giwp_branches(
    ex: &mut Experiment<'_>,
    branches: &[BitSet],
    members: Vec<usize>,
    holds_cause: bool,
) -> Result<Option<usize>, CausalError> {
    let mut pool = members;
    loop {
        // A branch leaves the pool once every predicate in it is decided;
        // one with a confirmed cause inside is the causal one.
        if let Some(&b) = pool.iter().find(|&&b| branches[b].intersects(ex.kb.causal())) {
            prune_others(ex, branches, &pool, b);
            return Ok(Some(b));
        }
        pool.retain(|&b| branches[b].intersects(ex.kb.open()));
        match pool.len() {
            0 => return Ok(None),
            1 if holds_cause => return Ok(Some(pool[0])),
            _ => {}
        }
        let mut keyed: Vec<(usize, usize, u64)> = pool
            .iter()
            .map(|&b| {
                let depth = branches[b].iter().map(|i| ex.dag.depth(i)).min().unwrap_or(0);
                (b, depth, ex.tie_key(&branches[b]))
            })
            .collect();
        keyed.sort_by_key(|&(_, d, t)| (d, t));
        let half = keyed.len().div_ceil(2);
        let first: Vec<usize> = keyed[..half].iter().map(|&(b, _, _)| b).collect();
        let mut group = BitSet::new(ex.dag.nodes());
        for &b in &first {
            let mut live = branches[b].clone();
            live.intersect_with(ex.kb.open());
            group.union_with(&live);
        }
        let round = ex.interventions();
        let stopped = ex.intervene(&group, Phase::BranchPrune)?;
        if stopped {
            let found = if first.len() == 1 {
                Some(first[0])
            } else {
                giwp_branches(ex, branches, first.clone(), true)?
            };
            if let Some(b) = found {
                let rest: Vec<usize> = pool.iter().copied().filter(|&o| o != b).collect();
                prune_others_at(ex, branches, &rest, round);
            }
            return Ok(found);
        }
        // The half was pruned by the round; go on with the rest.
        pool.retain(|b| !first.contains(b));
    }
}

fn prune_others(ex: &mut Experiment<'_>, branches: &[BitSet], pool: &[usize], causal: usize) {
    let rest: Vec<usize> = pool.iter().copied().filter(|&o| o != causal).collect();
    let round = ex.interventions().saturating_sub(1);
    prune_others_at(ex, branches, &rest, round);
}

fn prune_others_at(ex: &mut Experiment<'_>, branches: &[BitSet], rest: &[usize], round: usize) {
    for &o in rest {
        let live: Vec<usize> = branches[o].iter().filter(|&i| ex.kb.is_open(i)).collect();
        for i in live {
            ex.prune(i, Reason::OtherBranchCausal { round });
        }
    }
}
