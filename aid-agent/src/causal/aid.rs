//! Our default strategy, `Aid`: a frontier walk down the AC-DAG with every
//! deduction of the knowledge store. The paper's Alg. 3 (Branch-Prune, then
//! GIWP over topological halves) stays available as `AidPaper`.
//!
//! Why a frontier: the causal path is a chain of the AC-DAG (Def. 1), so of
//! the open predicates that no other open predicate precedes (the
//! frontier, an antichain) at most one is a cause — the topmost open one,
//! if any remain. Intervening there is what the paper's topological order
//! aims at, but without paying log N rounds to find the root cause: GIWP's
//! first half always contains the root of the DAG, so its early rounds
//! stop the failure and teach nothing while every effect vanishes with the
//! root. A frontier of one predicate is tested alone; a larger one is split
//! in halves (binary search, the stopped half is searched further and the
//! last candidate of a stopped group is taken by elimination).
//!
//! Each round on a true cause prunes, through Def. 2 and our extensions,
//! everything that still held and does not precede it and everything not
//! ordered with it; each round on a spurious predicate prunes it and every
//! predicate that vanished with it while F still happened. In the synthetic
//! study (BENCHMARKS.md) this needs about the path length plus a few
//! rounds for spurious predicates that precede later causes.

use super::{CausalError, Phase, engine::Experiment};
use crate::bitset::BitSet;

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    loop {
        let open = ex.kb.open().clone();
        if open.is_empty() {
            return Ok(());
        }
        let frontier: Vec<usize> =
            open.iter().filter(|&v| !ex.dag.ancestors(v).intersects(&open)).collect();
        search(ex, frontier)?;
    }
}

/// Binary search for the cause in an antichain of candidates. Returns after
/// the first group that stops the failure has been searched: the rest of
/// the antichain cannot hold another cause and is left to the pruning rules
/// (or to the next frontier, if the evidence did not reach it).
fn search(ex: &mut Experiment<'_>, mut cands: Vec<usize>) -> Result<(), CausalError> {
    loop {
        cands.retain(|&i| ex.kb.is_open(i));
        if cands.is_empty() {
            return Ok(());
        }
        ex.topo_sort(&mut cands);
        let half = cands.len().div_ceil(2);
        let first: Vec<usize> = cands[..half].to_vec();
        let group = BitSet::from_iter(ex.dag.nodes(), first.iter().copied());
        let stopped = ex.intervene(&group, Phase::Giwp)?;
        if stopped {
            if half > 1 {
                search(ex, first)?;
            }
            return Ok(());
        }
    }
}
