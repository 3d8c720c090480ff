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
