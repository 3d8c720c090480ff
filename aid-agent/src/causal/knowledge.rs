//! What the interventions so far have established about each predicate:
//! open, confirmed causal, pruned as spurious, or untestable (every round
//! that could test it was confounded) — and why. Each strategy is allowed a
//! different set of deductions; docs/causal.md proves each one and states
//! the assumptions it needs:
//!
//! - the intervened group itself (every strategy, TAGT included): a run
//!   that failed despite the intervention prunes every member; a single
//!   predicate whose intervention stopped the failure is a cause (Alg. 1
//!   lines 6-8, 14-15);
//! - Def. 2 (AID, AID-paper): a predicate outside the group that is not an
//!   ancestor of a member is pruned when it held in a run that did not fail,
//!   or was absent from the failing runs while F happened anyway (the round
//!   runner only reports absences of descendants of the group, seen in
//!   every failing run of the round: anything else is noise or confounding);
//! - our extensions (AID only), each a consequence of the unique causal
//!   path being a chain of the AC-DAG whose members each counterfactually
//!   cause the next (Def. 1, Assumption 2):
//!   * a confirmed cause that still held shows the intervention cut the
//!     path below it, so members not after it are no causes ("witness");
//!   * predicates not ordered with a confirmed cause are no causes
//!     (the path is a chain).
//!
//! There is no elimination ("a group that stopped the failure holds a
//! cause, so its last unpruned member is one"): with redundant causes
//! (C = X ∨ Y) the group {X, Y} stops the failure while neither member is a
//! cause, so a cause is only ever confirmed by a round on it alone.
//!
//! The witness rule is re-applied to the whole history until nothing
//! changes, because a later confirmation can unlock an earlier round.

use super::{AcDag, Reason};
use crate::bitset::BitSet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Open,
    Causal,
    Spurious,
    /// Every round that could test it was confounded: neither confirmed
    /// nor pruned, and no longer a candidate for intervention.
    Untestable,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rules {
    /// Def. 2 for predicates outside the group.
    pub def2: bool,
    /// The extensions listed in the module comment.
    pub extended: bool,
}

/// One round that the round runner judged usable (not confounded),
/// summarised by the sets the rules need.
#[derive(Clone, Debug)]
pub(crate) struct Evidence {
    pub round: usize,
    pub group: BitSet,
    /// No valid run failed.
    pub stopped: bool,
    /// Held in some run that did not fail.
    pub held_no_fail: BitSet,
    /// Descendants of the group absent from every failing run of the round
    /// (at least the configured number of them).
    pub absent_fail: BitSet,
    /// Held in some run.
    pub held_any: BitSet,
}

pub(crate) type Change = (usize, Status, Reason);

pub(crate) struct Knowledge {
    status: Vec<Status>,
    open: BitSet,
    causal: BitSet,
    untestable: BitSet,
    rules: Rules,
    history: Vec<Evidence>,
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
            untestable: BitSet::new(n),
            rules,
            history: Vec::new(),
        }
    }

    pub fn open(&self) -> &BitSet {
        &self.open
    }

    pub fn causal(&self) -> &BitSet {
        &self.causal
    }

    pub fn untestable(&self) -> &BitSet {
        &self.untestable
    }

    pub fn is_open(&self, i: usize) -> bool {
        self.open.contains(i)
    }

    /// Whether absences from failing runs can prune anything (Def. 2).
    pub fn uses_absences(&self) -> bool {
        self.rules.def2
    }

    pub fn status(&self, i: usize) -> Status {
        self.status[i]
    }

    fn set(&mut self, i: usize, s: Status, reason: Reason, out: &mut Vec<Change>) -> bool {
        if self.status[i] != Status::Open {
            return false;
        }
        self.status[i] = s;
        self.open.remove(i);
        match s {
            Status::Causal => {
                self.causal.insert(i);
            }
            Status::Untestable => {
                self.untestable.insert(i);
            }
            Status::Open | Status::Spurious => {}
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

    /// Sets an open predicate aside: its rounds were confounded.
    pub fn set_untestable(&mut self, i: usize, reason: Reason) -> Option<Change> {
        let mut out = Vec::new();
        self.set(i, Status::Untestable, reason, &mut out);
        out.pop()
    }

    /// Applies one usable round's evidence; returns every status change it
    /// caused.
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
                // Necessary-only candidates hold without the failure by
                // definition: that is no evidence against them.
                if ev.held_no_fail.contains(p) && !dag.necessary().contains(p) {
                    self.set(
                        p,
                        Status::Spurious,
                        Reason::HeldWithoutFailure { round: r },
                        &mut out,
                    );
                } else if ev.absent_fail.contains(p) && !dag.sufficient().contains(p) {
                    self.set(p, Status::Spurious, Reason::AbsentWithFailure { round: r }, &mut out);
                }
            }
        }
        if self.rules.extended {
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
                let mut witnesses = ev.held_any.clone();
                witnesses.intersect_with(&self.causal);
                // Only a sufficient cause that held shows the failure was
                // under way in that round.
                witnesses.difference_with(dag.necessary());
                witnesses.difference_with(&ev.group);
                let mut cut = Vec::new();
                for x in witnesses.iter() {
                    for s in ev.group.iter() {
                        if self.open.contains(s) && !dag.reach(x).contains(s) {
                            cut.push((s, x));
                        }
                    }
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
                // Conjuncts of one cause need not be ordered: a necessary
                // candidate neither prunes nor is pruned by this rule.
                if dag.necessary().contains(x) {
                    continue;
                }
                let unordered: Vec<usize> = self
                    .open
                    .iter()
                    .filter(|&p| !dag.comparable(x, p) && !dag.necessary().contains(p))
                    .collect();
                for p in unordered {
                    self.set(p, Status::Spurious, Reason::NotOrderedWith { cause: dag.id(x) }, out);
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

    /// A round on `group`; `held`: what held in its runs; `absent`: the
    /// confirmed absences of a failing round.
    fn ev(
        dag: &AcDag,
        round: usize,
        group: &[u32],
        stopped: bool,
        held: &[u32],
        absent: &[u32],
    ) -> Evidence {
        let held = set(dag, held);
        Evidence {
            round,
            group: set(dag, group),
            stopped,
            held_no_fail: if stopped { held.clone() } else { BitSet::new(dag.nodes()) },
            absent_fail: set(dag, absent),
            held_any: held,
        }
    }

    fn named(dag: &AcDag, changes: &[Change]) -> Vec<(PredId, Status)> {
        changes.iter().map(|&(i, s, _)| (dag.id(i), s)).collect()
    }

    fn reasons(dag: &AcDag, changes: &[Change]) -> Vec<(PredId, Reason)> {
        changes.iter().map(|(i, _, r)| (dag.id(*i), r.clone())).collect()
    }

    #[test]
    fn def2_spares_ancestors_of_the_group() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: false });
        // Intervening on 3 stops F; 1, 2 and 4 still hold. 4 is pruned;
        // 1 and 2 precede 3 and might be its cause.
        let c = kb.absorb(&d, ev(&d, 0, &[3], true, &[1, 2, 4], &[]));
        assert_eq!(named(&d, &c), vec![(p(3), Status::Causal), (p(4), Status::Spurious)]);
        assert!(kb.is_open(d.index_of(p(1)).unwrap()) && kb.is_open(d.index_of(p(2)).unwrap()));
    }

    /// A necessary-only candidate (a conjunct of a conjunctive cause)
    /// holds without the failure by definition: Def. 2 spares it; it need
    /// not be ordered with another cause; and as a confirmed cause it is no
    /// witness against a group it does not precede.
    #[test]
    fn necessary_candidates_are_neither_pruned_for_holding_nor_witnesses() {
        // 4 is necessary-only and unordered with 2 and 3.
        let d = dag().with_necessary(&[p(4)]);
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        let c = kb.absorb(&d, ev(&d, 0, &[3], true, &[1, 2, 4], &[]));
        assert_eq!(named(&d, &c), vec![(p(3), Status::Causal)]);
        assert!(kb.is_open(d.index_of(p(4)).unwrap()), "4 held without the failure, and stays");
        // Without the mark, the same round prunes it.
        let plain = dag();
        let mut kb = Knowledge::new(&plain, Rules { def2: true, extended: false });
        let c = kb.absorb(&plain, ev(&plain, 0, &[3], true, &[1, 2, 4], &[]));
        assert!(named(&plain, &c).contains(&(p(4), Status::Spurious)));
        // Confirmed, 4 held in a round on 2 (which it does not precede)
        // that stopped the failure: no witness against 2.
        let d = AcDag::from_edges(&[p(2), p(4)], p(0), &[]).unwrap().with_necessary(&[p(4)]);
        let mut kb = Knowledge::new(&d, Rules { def2: false, extended: true });
        kb.absorb(&d, ev(&d, 0, &[4], true, &[], &[]));
        let c = kb.absorb(&d, ev(&d, 1, &[2], true, &[4], &[]));
        assert_eq!(named(&d, &c), vec![(p(2), Status::Causal)]);
    }

    #[test]
    fn absence_with_failure_prunes_what_vanished_with_the_group() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: false });
        // {2} fails and 3 vanished with it: neither causes F.
        let c = kb.absorb(&d, ev(&d, 0, &[2], false, &[1, 4], &[3]));
        assert_eq!(named(&d, &c), vec![(p(2), Status::Spurious), (p(3), Status::Spurious)]);
    }

    /// A sufficient-only candidate is missing from the failing runs that
    /// fail another way: its absence with the failure prunes nothing.
    #[test]
    fn absence_with_failure_spares_a_sufficient_candidate() {
        let d = dag().with_sufficient(&[p(3)]);
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: false });
        let c = kb.absorb(&d, ev(&d, 0, &[2], false, &[1, 4], &[3]));
        assert_eq!(named(&d, &c), vec![(p(2), Status::Spurious)]);
        assert!(kb.is_open(d.index_of(p(3)).unwrap()));
        // Holding without the failure still prunes it: a sufficient
        // cause does not hold in a passing run.
        let c = kb.absorb(&d, ev(&d, 1, &[4], true, &[1, 3], &[]));
        assert!(named(&d, &c).contains(&(p(3), Status::Spurious)), "{c:?}");
    }

    /// Bug: the old "exemption only for live suspects" rule pruned A once
    /// the redundant X and Y it precedes were pruned, although A is the
    /// cause of C = X ∨ Y. Def. 2's exemption must stand for ancestors of
    /// every intervened predicate, pruned or not.
    #[test]
    fn an_ancestor_of_redundant_causes_keeps_its_exemption_after_they_are_pruned() {
        // A → X, A → Y (X, Y unordered).
        let (a, x, y) = (1, 2, 3);
        let d =
            AcDag::from_edges(&[p(a), p(x), p(y)], p(0), &[(p(a), p(x)), (p(a), p(y))]).unwrap();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        assert!(kb.absorb(&d, ev(&d, 0, &[x, y], true, &[a], &[])).is_empty());
        kb.absorb(&d, ev(&d, 1, &[x], false, &[a, y], &[]));
        kb.absorb(&d, ev(&d, 2, &[y], false, &[a, x], &[]));
        assert!(kb.is_open(d.index_of(p(a)).unwrap()), "A is still a suspect");
    }

    #[test]
    fn causes_prune_what_they_are_not_ordered_with() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        // Round 0: {2, 3} stops F (a cause is among them); nothing held.
        assert!(kb.absorb(&d, ev(&d, 0, &[2, 3], true, &[], &[])).is_empty());
        // Round 1: 1 alone stops F: confirmed; it is ordered with everything.
        let c = kb.absorb(&d, ev(&d, 1, &[1], true, &[], &[]));
        assert_eq!(named(&d, &c), vec![(p(1), Status::Causal)]);
        // Round 2: 2 alone stops F: confirmed, and 4, which is not ordered
        // with 2, cannot be on the same causal path. Nothing follows about 3.
        let c = kb.absorb(&d, ev(&d, 2, &[2], true, &[1], &[]));
        assert_eq!(
            reasons(&d, &c),
            vec![
                (p(2), Reason::StoppedFailure { round: 2 }),
                (p(4), Reason::NotOrderedWith { cause: p(2) })
            ]
        );
        assert!(kb.is_open(d.index_of(p(3)).unwrap()));
    }

    /// Bug: elimination confirmed the last unpruned member of a group that
    /// stopped the failure. With C = X ∨ Y the group {X, Y} stops it while
    /// neither is a cause; only a round on a predicate alone confirms it.
    #[test]
    fn a_stopping_group_confirms_nothing_by_elimination() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules { def2: true, extended: true });
        kb.absorb(&d, ev(&d, 0, &[2, 3], true, &[1, 4], &[]));
        let c = kb.absorb(&d, ev(&d, 1, &[3], false, &[1, 2, 4], &[]));
        assert_eq!(reasons(&d, &c), vec![(p(3), Reason::FailurePersisted { round: 1 })]);
        assert!(kb.is_open(d.index_of(p(2)).unwrap()));
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
        kb.absorb(&d, ev(&d, 0, &[2], true, &[1], &[]));
        // {1, 3} stops F while 2 still held: 1 cannot be on the path (it
        // would have removed 2). 3 stays open: the group's stop is no proof
        // that 3 is a cause.
        let c = kb.absorb(&d, ev(&d, 1, &[1, 3], true, &[2], &[]));
        assert_eq!(reasons(&d, &c), vec![(p(1), Reason::WitnessHeld { witness: p(2), round: 1 })]);
        assert!(kb.is_open(d.index_of(p(3)).unwrap()));
    }

    #[test]
    fn untestable_predicates_leave_the_open_set() {
        let d = dag();
        let mut kb = Knowledge::new(&d, Rules::default());
        let i = d.index_of(p(4)).unwrap();
        assert!(kb.set_untestable(i, Reason::Confounded { round: 0 }).is_some());
        assert!(!kb.is_open(i) && kb.untestable().contains(i));
        assert_eq!(kb.status(i), Status::Untestable);
    }
}
