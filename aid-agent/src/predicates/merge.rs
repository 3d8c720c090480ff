//! Explosion control: predicates that say the same thing about the runs
//! are shown (and tested) once.
//!
//! - **Same runs** (for the ranking): predicates that are not fully
//!   discriminative and held in exactly the same analysed runs are one
//!   row; the representative is the most general one (a group over a
//!   single call), then the better ranked, and the rest are listed with
//!   it. In a thread pool this is what folds "call 9 of lookup on
//!   worker#3" and its siblings, each true in one failing run, into a few
//!   rows. Fully-discriminative predicates all hold in the same runs by
//!   definition (every failing run, no passing one), so they are never
//!   merged this way: their timing is what tells them apart.
//! - **Same moment** (for the AC-DAG): fully-discriminative candidates
//!   about the same calls, anchored at the very same time in every
//!   failing run, are one event seen twice (a call's wrong value and its
//!   error value; "ends before" and "starts before" of the same two calls
//!   when both are placed at the same call's start); the better ranked one
//!   stands for both. Predicates about different calls that happen at one
//!   instant stay apart: they are different facts, and interventions may
//!   tell them apart.

use std::collections::HashMap;

use super::{Catalog, PredId, RunTruth};
use crate::bitset::BitSet;

/// (merged, representative) for the non-fully-discriminative predicates
/// in `ranking` that held in exactly the same runs as another.
pub fn same_runs(
    catalog: &Catalog,
    truths: &[RunTruth],
    ranking: &[PredId],
    fully_discriminative: impl Fn(PredId) -> bool,
) -> Vec<(PredId, PredId)> {
    let n = catalog.len();
    let mut runs: Vec<BitSet> = vec![BitSet::new(truths.len()); n];
    for (r, t) in truths.iter().enumerate() {
        for &(p, _) in &t.held {
            if let Some(b) = runs.get_mut(p.0 as usize) {
                b.insert(r);
            }
        }
    }
    // Representatives first: groups before single calls, then by rank.
    let mut order: Vec<(usize, PredId)> = ranking.iter().copied().enumerate().collect();
    order.sort_by_key(|&(rank, p)| {
        let group = catalog.get(p).is_some_and(|x| x.key.is_group());
        (!group, rank)
    });
    let mut first: HashMap<Vec<usize>, PredId> = HashMap::new();
    let mut out = Vec::new();
    for (_, p) in order {
        if fully_discriminative(p) {
            continue;
        }
        let set: Vec<usize> = runs[p.0 as usize].iter().collect();
        if set.is_empty() {
            continue;
        }
        match first.get(&set) {
            Some(&rep) => out.push((p, rep)),
            None => {
                first.insert(set, p);
            }
        }
    }
    out.sort_unstable();
    out
}

/// (duplicate, representative) among `candidates` (best first): those
/// about the same calls as a better one and anchored at the same time in
/// every failing run.
pub fn same_moment(
    catalog: &Catalog,
    candidates: &[PredId],
    failing: &[&RunTruth],
) -> Vec<(PredId, PredId)> {
    type Calls = (u32, super::Calls, Option<super::Other>, u8);
    let mut first: HashMap<(Option<Calls>, Vec<Option<u64>>), PredId> = HashMap::new();
    let mut out = Vec::new();
    for &p in candidates {
        let calls = catalog.get(p).map(|x| (x.key.func, x.key.calls, x.key.other, x.key.arg));
        let moments: Vec<Option<u64>> = failing.iter().map(|t| t.anchor(p)).collect();
        match first.get(&(calls, moments.clone())) {
            Some(&rep) => out.push((p, rep)),
            None => {
                first.insert((calls, moments), p);
            }
        }
    }
    out
}
