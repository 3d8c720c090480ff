//! The session's other observed runs: those made before the analysed ones
//! (without noise, or with noise the amplifier tried and left), which the
//! analysis does not learn from but which are still runs of the program
//! under the same probes. A candidate the analysed runs found in no
//! passing run, but that held among these in more passing runs than
//! failing ones beyond chance ([`stats::mostly_passing`]), does not
//! separate failing runs from passing ones: it is left out
//! ([`super::Exclusion::Contradicted`]).
//!
//! Why: stringbuffer-jdk1.4 (SCTBench) analysed 20 runs made under noise
//! focused on what provoked its failure. In all 10 passing ones the second
//! thread started before main constructed its buffer, in all 10 failing
//! ones after, so "main's constructor starts before the thread starts" was
//! fully discriminative; held back until the thread had started, main no
//! longer failed (73 runs), and that start order was confirmed the root
//! cause. Among the session's 169 other observed runs (without noise, or
//! with other noise) main had started first in 67 passing runs and 22
//! failing ones; the true interleaving (the erase between append's
//! `length` and `getChars`) held in all 23 failing ones and 10 passing
//! ones (`corpus::a_start_order_held_mostly_in_the_runs_set_aside_is_not_a_candidate`).

use std::collections::BTreeSet;

use crate::{
    model::Run,
    predicates::{Catalog, PredId},
    stats::{self, Scores},
};

/// How often each predicate held in the runs set aside, by label.
#[derive(Clone, Debug, Default)]
pub struct AsideTally {
    /// Complete runs set aside, by label.
    pub failing: u32,
    pub passing: u32,
    /// Indexed by predicate id: (failing runs, passing runs) it held in.
    held: Vec<(u32, u32)>,
}

impl AsideTally {
    /// Evaluates on the complete runs of `aside` the predicates of
    /// `ranking` that held in no analysed passing run and in some failing
    /// one (those that may become fully-discriminative or sufficient-only
    /// candidates).
    pub fn of(
        catalog: &Catalog,
        aside: &[Run],
        ranking: &[PredId],
        scores: &[Scores],
    ) -> AsideTally {
        let ids: BTreeSet<PredId> = ranking
            .iter()
            .copied()
            .filter(|p| {
                let c = scores[p.0 as usize].counts;
                c.passing_true == 0 && c.failing_true > 0
            })
            .collect();
        let mut t = AsideTally { held: vec![(0, 0); catalog.len()], ..AsideTally::default() };
        for run in aside.iter().filter(|r| r.complete) {
            if run.failed() {
                t.failing += 1;
            } else {
                t.passing += 1;
            }
            if ids.is_empty() {
                continue;
            }
            let truth = catalog.evaluate_only(run, &ids);
            for &(p, _) in &truth.held {
                if let Some(h) = t.held.get_mut(p.0 as usize) {
                    if truth.failed {
                        h.0 += 1;
                    } else {
                        h.1 += 1;
                    }
                }
            }
        }
        t
    }

    /// (failing, passing) runs set aside in which `p` held.
    pub fn held(&self, p: PredId) -> (u32, u32) {
        self.held.get(p.0 as usize).copied().unwrap_or_default()
    }

    /// The exclusion of a candidate that held in no analysed passing run
    /// but, among the runs set aside, in more passing runs than failing
    /// ones beyond chance ([`stats::mostly_passing`]), if it did. Only the
    /// predicates [`AsideTally::of`] evaluated can be.
    pub fn contradicts(&self, p: PredId) -> Option<super::Exclusion> {
        let (failing, passing) = self.held(p);
        stats::mostly_passing(failing, passing)
            .then_some(super::Exclusion::Contradicted { failing, passing })
    }
}
