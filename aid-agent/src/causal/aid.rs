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
//! in halves (binary search: the half that stops the failure is searched
//! further, down to single predicates — a cause is only ever confirmed by a
//! round on it alone, since with redundant causes a group can stop the
//! failure without holding one).
//!
//! Each round on a true cause prunes, through Def. 2 and our extensions,
//! everything that still held and does not precede it and everything not
//! ordered with it; each round on a spurious predicate prunes it and every
//! predicate that vanished with it while F still happened. A round that is
//! no evidence (confounded) is split further; a single predicate whose own
//! round was confounded is set aside as untestable.

use super::{
    CausalError, Phase,
    engine::{Experiment, Outcome},
};
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

/// Binary search for the cause in an antichain of candidates. Returns true
/// once a group that stopped the failure has been searched: the rest of the
/// antichain cannot hold another cause and is left to the pruning rules (or
/// to the next frontier, if the evidence did not reach it).
fn search(ex: &mut Experiment<'_>, mut cands: Vec<usize>) -> Result<bool, CausalError> {
    loop {
        cands.retain(|&i| ex.kb.is_open(i));
        if cands.is_empty() {
            return Ok(false);
        }
        ex.topo_sort(&mut cands);
        let half = cands.len().div_ceil(2);
        let first: Vec<usize> = cands[..half].to_vec();
        let group = BitSet::from_iter(ex.dag.nodes(), first.iter().copied());
        match ex.intervene(&group, Phase::Giwp)? {
            Outcome::Stopped => {
                if half > 1 {
                    search(ex, first)?;
                }
                return Ok(true);
            }
            Outcome::Persisted => {}
            Outcome::Unused if half == 1 => ex.set_untestable(first[0]),
            Outcome::Unused => {
                let (a, b) = first.split_at(half / 2);
                if search(ex, a.to_vec())? || search(ex, b.to_vec())? {
                    return Ok(true);
                }
            }
        }
    }
}
