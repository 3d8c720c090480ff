//! Our default strategy, `Aid`: a top-down walk of the AC-DAG that looks
//! for the first open cause, with every deduction of the knowledge store.
//! The paper's Alg. 3 (Branch-Prune, then GIWP over topological halves)
//! stays available as `AidPaper`.
//!
//! The causal path is a chain of the AC-DAG (Def. 1), so every open
//! predicate in front of the topmost open cause — in layers of the open
//! sub-DAG: the frontier (open predicates no open predicate precedes), then
//! the frontier once those are gone, ... — is no cause, and each layer, an
//! antichain, holds at most one. The walk intervenes on a window of leading
//! layers at once: if the failure persists, the whole window is pruned (and
//! everything that vanished with it) and the next window is twice as deep
//! (galloping, so k spurious layers in front of a cause cost about 2·log2 k
//! rounds, not k); if it stops, the window is searched by halves in layer
//! order down to single predicates. A cause is only ever confirmed by a
//! round on it alone: with redundant causes a group can stop the failure
//! without holding one. Right after a cause is confirmed the next one is
//! most often in the new frontier, so the frontier is searched directly
//! first.
//!
//! GIWP's topological halves pay about log N rounds to reach the root cause
//! when it is the DAG's first predicate (its first half always holds it);
//! the walk pays one. Each round on a true cause prunes, through Def. 2 and
//! our extensions, everything that still held and does not precede it and
//! everything not ordered with it; each failing round prunes its group and
//! every predicate that vanished with it while F still happened. A round
//! that is no evidence (confounded) is searched by smaller groups; a single
//! predicate whose own round was confounded is set aside as untestable.

use super::{
    CausalError, Phase,
    engine::{Experiment, Outcome},
};
use crate::bitset::BitSet;

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    // How many layers of open predicates to intervene on at once; 0: search
    // the frontier directly, which pays off right after a cause was
    // confirmed, when the next one is most likely in the frontier.
    let mut window = 1usize;
    loop {
        let layers = layers(ex);
        if layers.is_empty() {
            return Ok(());
        }
        let rank = |i: usize| layers.iter().position(|l| l.contains(&i)).unwrap_or(usize::MAX);
        if window == 0 {
            window = if search(ex, layers[0].clone(), &rank)? { 0 } else { 2 };
            continue;
        }
        let mut cands: Vec<usize> = layers.iter().take(window).flatten().copied().collect();
        ex.topo_sort(&mut cands);
        cands.sort_by_key(|&i| rank(i));
        let group = BitSet::from_iter(ex.dag.nodes(), cands.iter().copied());
        match ex.intervene(&group, Phase::Giwp)? {
            Outcome::Stopped => {
                if cands.len() > 1 {
                    search(ex, cands, &rank)?;
                }
                window = 0;
            }
            // Everything in front held no cause: look twice as far.
            Outcome::Persisted => window = window.saturating_mul(2),
            Outcome::Unused if cands.len() == 1 => ex.set_untestable(cands[0]),
            Outcome::Unused => {
                search(ex, cands, &rank)?;
                window = 0;
            }
        }
    }
}

/// The open predicates in layers: the first is the frontier (no open
/// predicate precedes them), the next the frontier once those are gone...
fn layers(ex: &Experiment<'_>) -> Vec<Vec<usize>> {
    let mut left = ex.kb.open().clone();
    let mut out = Vec::new();
    while !left.is_empty() {
        let layer: Vec<usize> =
            left.iter().filter(|&v| !ex.dag.ancestors(v).intersects(&left)).collect();
        for &v in &layer {
            left.remove(v);
        }
        out.push(layer);
    }
    out
}

/// Binary search for the first cause among `cands` (in layer order), whose
/// round stopped the failure or was no evidence. Returns true once a group
/// that stopped the failure has been searched down to single predicates.
fn search(
    ex: &mut Experiment<'_>,
    mut cands: Vec<usize>,
    rank: &dyn Fn(usize) -> usize,
) -> Result<bool, CausalError> {
    loop {
        cands.retain(|&i| ex.kb.is_open(i));
        if cands.is_empty() {
            return Ok(false);
        }
        ex.topo_sort(&mut cands);
        cands.sort_by_key(|&i| rank(i));
        let half = cands.len().div_ceil(2);
        let first: Vec<usize> = cands[..half].to_vec();
        let group = BitSet::from_iter(ex.dag.nodes(), first.iter().copied());
        match ex.intervene(&group, Phase::Giwp)? {
            Outcome::Stopped => {
                if half > 1 {
                    search(ex, first, rank)?;
                }
                return Ok(true);
            }
            Outcome::Persisted => {}
            Outcome::Unused if half == 1 => ex.set_untestable(first[0]),
            Outcome::Unused => {
                let (a, b) = first.split_at(half / 2);
                if search(ex, a.to_vec(), rank)? || search(ex, b.to_vec(), rank)? {
                    return Ok(true);
                }
            }
        }
    }
}
