//! What the interventions so far have established about each predicate:
//! open, confirmed causal, or pruned as spurious — and why. Each strategy
//! is allowed a different set of deductions:
//!
//! - the intervened group itself (every strategy, TAGT included): a run
//!   that failed despite the intervention prunes every member; a single
//!   predicate whose intervention stopped the failure is a cause (Alg. 1
//!   lines 6-8, 14-15);
//! - Def. 2 (AID, AID-paper): predicates outside the group that are not
//!   ancestors of a member are pruned on a counterfactual violation;
//! - our extensions (AID only, docs/causal.md), each a consequence of the
//!   paper's assumptions (single root cause, deterministic effects, a unique
//!   causal path that is a chain of the AC-DAG):
//!   * a predicate absent from a failing run is no cause even when it
//!     precedes an intervened one (intervening later cannot hide an earlier
//!     predicate's effect on F when F happened anyway);
//!   * Def. 2's ancestor exemption only protects ancestors of members that
//!     may still be causes;
//!   * a confirmed cause that still held shows the intervention cut the
//!     path below it, so members not after it are no causes ("witness");
//!   * predicates not ordered with a confirmed cause are no causes
//!     (the path is a chain);
//!   * a group that stopped the failure holds a cause; when every other
//!     member is pruned, the last one is it ("elimination").
//!
//! Extended deductions are re-applied to the whole history until nothing
//! changes, because a later confirmation can unlock an earlier round.

use super::{AcDag, Reason};
use crate::bitset::BitSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Open,
    Causal,
    Spurious,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rules {
    /// Def. 2 for predicates outside the group.
    pub def2: bool,
    /// The extensions listed in the module comment.
    pub extended: bool,
}

/// One round, summarised by the sets the rules need.
#[derive(Clone, Debug)]
pub(crate) struct Evidence {
    pub round: usize,
    pub group: BitSet,
    /// No valid run failed.
    pub stopped: bool,
    /// Held in some run that did not fail.
    pub held_no_fail: BitSet,
    /// Absent from some run that failed.
    pub absent_fail: BitSet,
    /// Held in some run.
    pub held_any: BitSet,
}

pub(crate) type Change = (usize, Status, Reason);

pub(crate) struct Knowledge {
    status: Vec<Status>,
    open: BitSet,
    causal: BitSet,
    rules: Rules,
    history: Vec<Evidence>,
    /// Groups known to contain a cause, with the round that showed it.
    facts: Vec<(BitSet, usize)>,
}

impl Knowledge {
    pub fn new(dag: &AcDag, rules: Rules) -> Self {
        let n = dag.nodes();
        let mut open = BitSet::full(n);
        open.remove(dag.f_index());
        Knowledge {
            status: vec![Status::Open; n],
            open,
            causal: BitSet::new(n),
            rules,
            history: Vec::new(),
            facts: Vec::new(),
        }
    }

    pub fn open(&self) -> &BitSet {
        &self.open
    }

    pub fn causal(&self) -> &BitSet {
        &self.causal
    }

    pub fn is_open(&self, i: usize) -> bool {
        self.open.contains(i)
    }

    fn set(&mut self, i: usize, s: Status, reason: Reason, out: &mut Vec<Change>) -> bool {
        if self.status[i] != Status::Open {
            return false;
        }
        self.status[i] = s;
        self.open.remove(i);
        if s == Status::Causal {
            self.causal.insert(i);
        }
        out.push((i, s, reason));
        true
    }

    /// A decision a strategy makes without new evidence (Alg. 2 line 18).
    pub fn prune(&mut self, i: usize, reason: Reason) -> Option<Change> {
        let mut out = Vec::new();
        self.set(i, Status::Spurious, reason, &mut out);
        out.pop()
    }

    /// Applies one round's evidence; returns every status change it caused.
    pub fn absorb(&mut self, dag: &AcDag, ev: Evidence) -> Vec<Change> {
        let mut out = Vec::new();
        let r = ev.round;
        let members: Vec<usize> = ev.group.iter().collect();
        if !ev.stopped {
            for &s in &members {
                self.set(s, Status::Spurious, Reason::FailurePersisted { round: r }, &mut out);
            }
        } else if members.len() == 1 {
            self.set(members[0], Status::Causal, Reason::StoppedFailure { round: r }, &mut out);
        }
        if self.rules.def2 {
            let mut anc = BitSet::new(dag.nodes());
            for &s in &members {
                anc.union_with(dag.ancestors(s));
            }
            let mut cand = self.open.clone();
            cand.difference_with(&ev.group);
            cand.difference_with(&anc);
            for p in cand.iter() {
                if ev.held_no_fail.contains(p) {
                    self.set(
                        p,
                        Status::Spurious,
                        Reason::HeldWithoutFailure { round: r },
                        &mut out,
                    );
                } else if ev.absent_fail.contains(p) {
                    self.set(p, Status::Spurious, Reason::AbsentWithFailure { round: r }, &mut out);
                }
            }
        }
        if self.rules.extended {
            if ev.stopped {
                self.facts.push((ev.group.clone(), r));
            }
            self.history.push(ev);
            self.fixpoint(dag, &mut out);
        }
        out
    }

    fn fixpoint(&mut self, dag: &AcDag, out: &mut Vec<Change>) {
        let mut done_comparability = BitSet::new(dag.nodes());
        loop {
            let before = out.len();
            for h in 0..self.history.len() {
                let ev = &self.history[h];
                let r = ev.round;
                let mut absent = ev.absent_fail.clone();
                absent.intersect_with(&self.open);
                absent.difference_with(&ev.group);
                let mut held = ev.held_no_fail.clone();
                held.intersect_with(&self.open);
                held.difference_with(&ev.group);
                if !held.is_empty() {
                    let mut anc = BitSet::new(dag.nodes());
                    for s in ev.group.iter() {
                        if self.status[s] != Status::Spurious {
                            anc.union_with(dag.ancestors(s));
                        }
                    }
                    held.difference_with(&anc);
                }
                let mut witnesses = ev.held_any.clone();
                witnesses.intersect_with(&self.causal);
                witnesses.difference_with(&ev.group);
                let mut cut = Vec::new();
                for x in witnesses.iter() {
                    for s in ev.group.iter() {
                        if self.open.contains(s) && !dag.reach(x).contains(s) {
                            cut.push((s, x));
                        }
                    }
                }
                for p in absent.iter() {
                    self.set(p, Status::Spurious, Reason::AbsentWithFailure { round: r }, out);
                }
                for p in held.iter() {
                    self.set(p, Status::Spurious, Reason::HeldWithoutFailure { round: r }, out);
                }
                for (s, x) in cut {
                    self.set(
                        s,
                        Status::Spurious,
                        Reason::WitnessHeld { witness: dag.id(x), round: r },
                        out,
                    );
                }
            }
            let fresh: Vec<usize> =
                self.causal.iter().filter(|&x| !done_comparability.contains(x)).collect();
            for x in fresh {
                done_comparability.insert(x);
                let unordered: Vec<usize> =
                    self.open.iter().filter(|&p| !dag.comparable(x, p)).collect();
                for p in unordered {
                    self.set(p, Status::Spurious, Reason::NotOrderedWith { cause: dag.id(x) }, out);
                }
            }
            for f in 0..self.facts.len() {
                let (set, r) = &self.facts[f];
                if set.intersects(&self.causal) {
                    continue;
                }
                let mut left = set.clone();
                left.intersect_with(&self.open);
                if left.count() == 1 {
                    let p = left.iter().next().unwrap_or_default();
                    let r = *r;
                    self.set(p, Status::Causal, Reason::Elimination { round: r }, out);
                }
            }
            if out.len() == before {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicates::PredId;

    fn p(i: u32) -> PredId {
        PredId(i)
    }

    /// 1 → 2 → 3 and 1 → 4 (4 unordered with 2 and 3).
    fn dag() -> AcDag {
        AcDag::from_edges(
            &[p(1), p(2), p(3), p(4)],
            p(0),
            &[(p(1), p(2)), (p(2), p(3)), (p(1), p(4))],
        )
        .unwrap()
    }

    fn set(dag: &AcDag, ids: &[u32]) -> BitSet {
        BitSet::from_iter(dag.nodes(), ids.iter().map(|&i| dag.index_of(p(i)).unwrap()))
    }

    fn ev(dag: &AcDag, round: usize, group: &[u32], stopped: bool, held: &[u32]) -> Evidence {
        let held = set(dag, held);
        let mut absent = BitSet::full(dag.nodes());
        absent.difference_with(&held);
        absent.remove(dag.f_index());
        Evidence {
            round,
            group: set(dag, group),
            stopped,
            held_no_fail: if stopped { held.clone() } else { BitSet::new(dag.nodes()) },
            absent_fail: if stopped { BitSet::new(dag.nodes()) } else { absent },
            held_any: held,
        }
    }

    fn named(dag: &AcDag, changes: &[Change]) -> Vec<(PredId, Status)> {
        changes.iter().map(|&(i, s, _)| (dag.id(i), s)).collect()
    }

    #[test]
    fn def2_spares_ancestors_of_the_group() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: false });
        // Intervening on 3 stops F; 1, 2 and 4 still hold. 4 is pruned;
        // 1 and 2 precede 3 and might be its cause.
        let c = kb.absorb(&d, ev(&d, 0, &[3], true, &[1, 2, 4]));
        assert_eq!(named(&d, &c), vec![(p(3), Status::Causal), (p(4), Status::Spurious)]);
        assert!(kb.is_open(d.index_of(p(1)).unwrap()) && kb.is_open(d.index_of(p(2)).unwrap()));
    }

    #[test]
    fn failure_with_a_predicate_absent_prunes_even_an_ancestor_in_our_rules() {
        let d = dag();
        // Intervening on {3} while F persists and 2 was absent: Def. 2
        // exempts 2 (it precedes 3); our rule does not need to.
        let mut paper = Knowledge::new(&d, Rules { def2: true, extended: false });
        let c = paper.absorb(&d, ev(&d, 0, &[3], false, &[1, 4]));
        assert_eq!(named(&d, &c), vec![(p(3), Status::Spurious)]);
        let mut ours = Knowledge::new(&d, Rules { def2: true, extended: true });
        let c = ours.absorb(&d, ev(&d, 0, &[3], false, &[1, 4]));
        assert_eq!(named(&d, &c), vec![(p(3), Status::Spurious), (p(2), Status::Spurious)]);
    }

    #[test]
    fn causes_prune_what_they_are_not_ordered_with() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        // Round 0: {2, 3} stops F (a cause is among them); nothing held.
        assert!(kb.absorb(&d, ev(&d, 0, &[2, 3], true, &[])).is_empty());
        // Round 1: 1 alone stops F: confirmed; it is ordered with everything.
        let c = kb.absorb(&d, ev(&d, 1, &[1], true, &[]));
        assert_eq!(named(&d, &c), vec![(p(1), Status::Causal)]);
        // Round 2: 2 alone stops F: confirmed, and 4, which is not ordered
        // with 2, cannot be on the same causal path. Round 0 is explained
        // by 2, so nothing follows about 3.
        let c = kb.absorb(&d, ev(&d, 2, &[2], true, &[1]));
        let reasons: Vec<(PredId, Reason)> =
            c.iter().map(|(i, _, r)| (d.id(*i), r.clone())).collect();
        assert_eq!(
            reasons,
            vec![
                (p(2), Reason::StoppedFailure { round: 2 }),
                (p(4), Reason::NotOrderedWith { cause: p(2) })
            ]
        );
        assert!(kb.is_open(d.index_of(p(3)).unwrap()));
    }

    #[test]
    fn elimination_confirms_the_last_member_of_a_stopping_group() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        kb.absorb(&d, ev(&d, 0, &[2, 3], true, &[1, 4]));
        // {3} alone: F persists → 3 pruned, so 2 must be the cause of round 0.
        let c = kb.absorb(&d, ev(&d, 1, &[3], false, &[1, 2, 4]));
        let reasons: Vec<(PredId, Reason)> =
            c.iter().map(|(i, _, r)| (d.id(*i), r.clone())).collect();
        assert_eq!(
            reasons,
            vec![
                (p(3), Reason::FailurePersisted { round: 1 }),
                (p(2), Reason::Elimination { round: 0 })
            ]
        );
    }

    #[test]
    fn a_confirmed_cause_that_still_holds_clears_the_group_above_it() {
        // Chain 1 → 2 → 3 → 4 with 2 confirmed.
        let d = AcDag::from_edges(
            &[p(1), p(2), p(3), p(4)],
            p(0),
            &[(p(1), p(2)), (p(2), p(3)), (p(3), p(4))],
        )
        .unwrap();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        kb.absorb(&d, ev(&d, 0, &[2], true, &[1]));
        // {1, 3} stops F while 2 still held: 1 cannot be on the path (it
        // would have removed 2), so the cause is 3.
        let c = kb.absorb(&d, ev(&d, 1, &[1, 3], true, &[2]));
        let reasons: Vec<(PredId, Reason)> =
            c.iter().map(|(i, _, r)| (d.id(*i), r.clone())).collect();
        assert_eq!(
            reasons,
            vec![
                (p(1), Reason::WitnessHeld { witness: p(2), round: 1 }),
                (p(3), Reason::Elimination { round: 1 })
            ]
        );
    }
}
