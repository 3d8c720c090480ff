//! Alg. 2, Branch-Prune: walk the AC-DAG in topological order without
//! intervening while it is a chain; at a junction, build one branch per
//! predicate at that level (the predicate and its descendants that no other
//! predicate of the level reaches) and find the causal branch with GIWP over
//! branches. It reduces the DAG to a chain of potential causes, which
//! Alg. 3 then hands to GIWP.
//!
//! Our reading of line 15: the algorithm adds the whole causal branch to the
//! potential set C, which would end the walk at the first junction and never
//! resolve the junction inside the branch (after P7 in Fig. 4, step 2). We
//! add only the branch's head (the junction predicate) to C, so the walk
//! continues inside the chosen branch and meets its own junctions; Fig. 4's
//! steps 1-2 need exactly this.

use super::{CausalError, Reason, engine::Experiment, giwp::giwp_branches};
use crate::bitset::BitSet;

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    let n = ex.dag.nodes();
    let f = ex.dag.f_index();
    let mut chain = BitSet::new(n);
    loop {
        // V − C, where V has lost every pruned predicate (lines 19-20).
        let mut rem = ex.kb.open().clone();
        rem.union_with(ex.kb.causal());
        rem.remove(f);
        rem.difference_with(&chain);
        if rem.is_empty() {
            return Ok(());
        }
        // Line 4: the lowest topological level of what is left.
        let level: Vec<usize> =
            rem.iter().filter(|&v| !ex.dag.ancestors(v).intersects(&rem)).collect();
        if level.len() == 1 {
            chain.insert(level[0]);
        } else {
            // Lines 8-13: one branch per predicate of the level.
            let branches: Vec<BitSet> = level
                .iter()
                .map(|&p| {
                    let mut b = ex.dag.reach(p).clone();
                    b.intersect_with(&rem);
                    for &q in &level {
                        if q != p {
                            b.difference_with(ex.dag.reach(q));
                        }
                    }
                    b.insert(p);
                    b
                })
                .collect();
            let members: Vec<usize> = (0..branches.len()).collect();
            let before = ex.kb.open().count();
            match giwp_branches(ex, &branches, members, true)? {
                Some(b) => {
                    chain.insert(level[b]);
                }
                None => {
                    // Every branch was pruned; if nothing changed either,
                    // accept the level so the walk cannot stall.
                    if ex.kb.open().count() == before {
                        for &p in &level {
                            chain.insert(p);
                        }
                    }
                }
            }
        }
        // Line 18: drop what no potential cause reaches.
        if !chain.is_empty() {
            let mut reached = chain.clone();
            for c in chain.iter() {
                reached.union_with(ex.dag.reach(c));
            }
            let unreachable: Vec<usize> =
                ex.kb.open().iter().filter(|&u| !reached.contains(u)).collect();
            for u in unreachable {
                ex.prune(u, Reason::Unreachable);
            }
        }
    }
}
