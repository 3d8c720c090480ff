//! Alg. 2, Branch-Prune: walk the AC-DAG in topological order without
//! intervening while it is a chain; at a junction, build one branch per
//! predicate at that level (the predicate and its descendants that no other
//! predicate of the level reaches) and find the causal branch with GIWP over
//! branches. It reduces the DAG to a chain of potential causes, which
//! Alg. 3 then hands to GIWP.
//!
//! Nothing is ever pruned on the strength of a branch no round has tested.
//! Alg. 2 adds the outcome of branch GIWP to the *potential* causal set C
//! and prunes what C cannot reach (line 18). Fig. 4 takes the last branch
//! of a junction without intervening on it (step 1: B1 fails, so B2 is
//! walked into); that is fine for the walk, but such a branch is only a
//! potential cause, and pruning what it cannot reach can prune the root
//! cause (issue 11: a→r, b→r, c unordered; {a, b} fails, c is taken, r is
//! pruned). So:
//!
//! - a round on a group of branches that fails prunes them (Alg. 1);
//! - a round on a group S of branches that stops the failure shows that
//!   every causal route to F passes through S's predicates; branches at a
//!   junction are unordered, so nothing at the junction that S's heads
//!   cannot reach can be on the path: that is pruned (line 18, with C the
//!   tested branches); S is then searched further;
//! - the last untested branch of a pool is walked into without a round
//!   (Fig. 4's step 1) and prunes nothing.
//!
//! Our reading of line 15: the algorithm adds the whole causal branch to the
//! potential set C, which would end the walk at the first junction and never
//! resolve the junction inside the branch (after P7 in Fig. 4, step 2). We
//! add only the branch's head (the junction predicate) to C, so the walk
//! continues inside the chosen branch and meets its own junctions.

use super::{
    CausalError, Phase, Reason,
    engine::{Experiment, Outcome},
    knowledge::Status,
};
use crate::bitset::BitSet;

pub(crate) fn run(ex: &mut Experiment<'_>) -> Result<(), CausalError> {
    let n = ex.dag.nodes();
    let f = ex.dag.f_index();
    let mut chain = BitSet::new(n);
    loop {
        // V − C, where V has lost every pruned predicate (line 19).
        let mut rem = BitSet::new(n);
        for i in 0..n {
            if i != f && ex.kb.status(i) != Status::Spurious && !chain.contains(i) {
                rem.insert(i);
            }
        }
        if rem.is_empty() {
            return Ok(());
        }
        // Line 4: the lowest topological level of what is left.
        let level: Vec<usize> =
            rem.iter().filter(|&v| !ex.dag.ancestors(v).intersects(&rem)).collect();
        if level.len() == 1 {
            chain.insert(level[0]);
            continue;
        }
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
        let junction = Junction { heads: &level, branches: &branches, rem: &rem };
        let mut found = Found::default();
        junction.giwp(ex, (0..branches.len()).collect(), &mut found)?;
        let before = chain.count();
        match found.causal {
            Some(b) => {
                chain.insert(level[b]);
            }
            None => {
                for b in found.untested {
                    chain.insert(level[b]);
                }
            }
        }
        let mut left = BitSet::new(n);
        for i in rem.iter() {
            if ex.kb.status(i) != Status::Spurious {
                left.insert(i);
            }
        }
        if chain.count() == before && left == rem {
            // Nothing was learnt (every round was confounded): accept the
            // level so the walk cannot stall; GIWP will test it.
            for &p in &level {
                chain.insert(p);
            }
        }
    }
}

/// What GIWP over the branches of a junction established.
#[derive(Default)]
struct Found {
    /// A branch whose intervention alone stopped the failure.
    causal: Option<usize>,
    /// Branches walked into without a round (the last of a pool, or one
    /// whose own round was confounded): potential causes only.
    untested: Vec<usize>,
}

struct Junction<'j> {
    heads: &'j [usize],
    branches: &'j [BitSet],
    /// Everything left at the junction.
    rem: &'j BitSet,
}

impl Junction<'_> {
    /// GIWP over the branches in `pool` (Alg. 2 line 14). Branches at a
    /// junction are pairwise unordered and the causal path is a chain, so at
    /// most one holds causes (Sec. 6.3.1, "log B interventions per
    /// junction"): the search ends at the first branch shown causal.
    fn giwp(
        &self,
        ex: &mut Experiment<'_>,
        mut pool: Vec<usize>,
        found: &mut Found,
    ) -> Result<(), CausalError> {
        loop {
            if found.causal.is_some() {
                return Ok(());
            }
            // A branch leaves the pool once no predicate in it is open.
            pool.retain(|&b| self.branches[b].intersects(ex.kb.open()));
            match pool.len() {
                0 => return Ok(()),
                1 => {
                    // Fig. 4, step 1: the last branch is walked into untested.
                    found.untested.push(pool[0]);
                    return Ok(());
                }
                _ => {}
            }
            let mut keyed: Vec<(usize, usize, u64)> = pool
                .iter()
                .map(|&b| {
                    let depth = self.branches[b].iter().map(|i| ex.dag.depth(i)).min().unwrap_or(0);
                    (b, depth, ex.tie_key(&self.branches[b]))
                })
                .collect();
            keyed.sort_by_key(|&(_, d, t)| (d, t));
            let half = keyed.len().div_ceil(2);
            let first: Vec<usize> = keyed[..half].iter().map(|&(b, _, _)| b).collect();
            let mut group = BitSet::new(ex.dag.nodes());
            for &b in &first {
                let mut live = self.branches[b].clone();
                live.intersect_with(ex.kb.open());
                group.union_with(&live);
            }
            let round = ex.next_round();
            match ex.intervene(&group, Phase::BranchPrune)? {
                Outcome::Stopped => {
                    self.prune_outside(ex, &first, round);
                    if first.len() == 1 {
                        found.causal = Some(first[0]);
                    } else {
                        self.giwp(ex, first, found)?;
                    }
                    return Ok(());
                }
                // The half was pruned by the round; go on with the rest.
                Outcome::Persisted => {}
                Outcome::Unused if first.len() == 1 => found.untested.push(first[0]),
                Outcome::Unused => self.giwp(ex, first.clone(), found)?,
            }
            pool.retain(|b| !first.contains(b));
        }
    }

    /// The branches `stopped` hold every causal route to F (their round
    /// stopped the failure): prune what is left at the junction that their
    /// heads cannot reach.
    fn prune_outside(&self, ex: &mut Experiment<'_>, stopped: &[usize], round: usize) {
        let mut keep = BitSet::new(ex.dag.nodes());
        for &b in stopped {
            keep.insert(self.heads[b]);
            keep.union_with(ex.dag.reach(self.heads[b]));
        }
        let outside: Vec<usize> =
            self.rem.iter().filter(|&u| !keep.contains(u) && ex.kb.is_open(u)).collect();
        for u in outside {
            ex.prune(u, Reason::OutsideStoppedBranches { round });
        }
    }
}
