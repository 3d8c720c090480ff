//! Session-level error control: how many runs a round needs before "the
//! failure stopped" is believed, so that the probability that *any* round of
//! the session wrongly believed it stays below 1 − confidence.
//!
//! A round can only err one way: it sees no failure although its group
//! holds no cause. (A failing run is never a statistical accident: under the
//! paper's deterministic effects a group that holds a cause stops every
//! failure, Sec. 5.1.) Two kinds of evidence bound that error:
//!
//! - **witnessed runs** — runs in which some candidate predicate held. Every
//!   candidate is fully discriminative, so such a run is one in which the
//!   failure was under way; with no cause in the group it fails with a
//!   probability q close to 1. The posterior for q starts from the failing
//!   baseline runs (all witnessed, all failed) and gains every witnessed run
//!   of a round that failed (its group held no cause). It does not depend on
//!   the failure rate, so an intervention that makes the failure rarer
//!   cannot fool it.
//! - **all runs** — with no cause in the group each run fails with the
//!   failure rate p. The posterior for p starts from the baseline runs and
//!   gains every run of a round that failed. Only used when the group hides
//!   every predicate that could witness (nothing upstream of it is left).
//!
//! Both posteriors are Beta distributions from a uniform prior, and the risk
//! of a round is the posterior predictive probability of its failure-free
//! runs under "no cause in the group". The session spends its error budget
//! δ = 1 − confidence over the rounds that stopped the failure with
//! α_j = δ·6/(π²j²) for the j-th (Σ α_j = δ): a union bound over rounds whose
//! number is not known in advance. As evidence accumulates the posteriors
//! sharpen, so later rounds need fewer runs for the same α.

use std::f64::consts::PI;

use serde::{Deserialize, Serialize};

/// The achieved session confidence, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionConfidence {
    /// What the user asked for (`--confidence`).
    pub requested: f64,
    /// 1 − Σ of the risks actually taken by the rounds that stopped the
    /// failure: the posterior probability that every one of them was right.
    pub achieved: f64,
    /// Rounds whose "the failure stopped" was a statistical conclusion.
    pub stopped_rounds: u32,
}

/// The session's evidence about p and q, and the budget spent so far.
#[derive(Clone, Debug)]
pub(crate) struct Ledger {
    delta: f64,
    /// Beta(a, b) for p: a = failing runs + 1, b = passing runs + 1.
    p_fail: f64,
    p_pass: f64,
    /// Beta(a, b) for q, over witnessed runs of groups without a cause.
    q_fail: f64,
    q_pass: f64,
    stops: u32,
    spent: f64,
}

impl Ledger {
    /// `failing`/`passing`: the baseline runs without intervention.
    pub fn new(confidence: f64, failing: u32, passing: u32) -> Ledger {
        Ledger {
            delta: 1.0 - confidence,
            p_fail: f64::from(failing) + 1.0,
            p_pass: f64::from(passing) + 1.0,
            // Every failing baseline run was witnessed (all candidates held)
            // and failed; passing ones held no candidate.
            q_fail: f64::from(failing) + 1.0,
            q_pass: 1.0,
            stops: 0,
            spent: 0.0,
        }
    }

    /// α for the next round that stops the failure.
    pub fn alpha(&self) -> f64 {
        let j = f64::from(self.stops + 1);
        self.delta * 6.0 / (PI * PI * j * j)
    }

    /// Posterior mean of the failure rate.
    #[cfg(test)]
    pub fn rate(&self) -> f64 {
        self.p_fail / (self.p_fail + self.p_pass)
    }

    /// Probability, under "no cause in the group", of `runs` valid runs
    /// without a failure of which `witnessed` had a candidate holding. With
    /// `blind` false only witnessed runs count (something upstream of the
    /// group must show up in any run where the failure was under way).
    pub fn risk(&self, runs: u32, witnessed: u32, blind: bool) -> f64 {
        let w = predictive_zeros(self.q_fail, self.q_pass, witnessed);
        if blind { w.min(predictive_zeros(self.p_fail, self.p_pass, runs)) } else { w }
    }

    /// Runs the all-runs rule needs for the next α (for messages and caps).
    pub fn blind_runs_needed(&self) -> u32 {
        let alpha = self.alpha();
        let mut n = 0u32;
        let mut r = 1.0;
        while r > alpha && n < 1_000_000 {
            r *= (self.p_pass + f64::from(n)) / (self.p_fail + self.p_pass + f64::from(n));
            n += 1;
        }
        n
    }

    /// A round stopped the failure with `risk` ≤ α: spend it.
    pub fn accept_stop(&mut self, risk: f64) {
        self.stops += 1;
        self.spent += risk;
    }

    /// A round failed, so its group held no cause: its runs are evidence
    /// about p (`passing` runs, then `failing`), and its witnessed runs
    /// about q.
    pub fn learn_from_failed_round(
        &mut self,
        passing: u32,
        failing: u32,
        witnessed_passing: u32,
        witnessed_failing: u32,
    ) {
        self.p_pass += f64::from(passing);
        self.p_fail += f64::from(failing);
        self.q_pass += f64::from(witnessed_passing);
        self.q_fail += f64::from(witnessed_failing);
    }

    pub fn summary(&self, requested: f64) -> SessionConfidence {
        SessionConfidence {
            requested,
            achieved: (1.0 - self.spent).max(0.0),
            stopped_rounds: self.stops,
        }
    }
}

/// P(n Bernoulli trials all fail to fail) when the failure probability is
/// Beta(a, b): E[(1 − x)^n] = Π_{i<n} (b + i) / (a + b + i).
fn predictive_zeros(a: f64, b: f64, n: u32) -> f64 {
    let mut r = 1.0;
    for i in 0..n {
        let i = f64::from(i);
        r *= (b + i) / (a + b + i);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_sums_to_delta() {
        let mut l = Ledger::new(0.99, 20, 20);
        let mut total = 0.0;
        for _ in 0..10_000 {
            total += l.alpha();
            l.accept_stop(0.0);
        }
        assert!(total < 0.01 && total > 0.0099, "{total}");
    }

    #[test]
    fn witnessed_runs_need_no_failure_rate() {
        // 20 failing baseline runs: q ~ Beta(21, 1); one witnessed run
        // without failure has predictive probability 1/22.
        let l = Ledger::new(0.99, 20, 20);
        assert!((l.risk(100, 1, false) - 1.0 / 22.0).abs() < 1e-12);
        // Unwitnessed runs count only in a blind round.
        assert!((l.risk(100, 0, false) - 1.0).abs() < 1e-12);
        assert!(l.risk(100, 0, true) < 1e-10);
        // The same number of witnessed runs is enough at any failure rate.
        let rare = Ledger::new(0.99, 20, 980);
        assert_eq!(rare.risk(7, 3, false), l.risk(7, 3, false));
    }

    #[test]
    fn blind_rounds_follow_the_uncertainty_of_p() {
        // p̂ = 0.5 from 40 runs: about the point estimate's 7 runs, a bit more.
        let l = Ledger::new(0.99, 20, 20);
        let n = l.blind_runs_needed();
        assert!((8..=11).contains(&n), "{n}");
        // A failed round of 3 runs (2 passing, 1 failing) is more evidence.
        let mut m = l.clone();
        m.learn_from_failed_round(2, 1, 0, 1);
        assert!((m.rate() - 22.0 / 45.0).abs() < 1e-12);
        // 2% from 200 runs: far more than the point estimate's 228.
        let rare = Ledger::new(0.99, 4, 196);
        assert!(rare.blind_runs_needed() > 300, "{}", rare.blind_runs_needed());
    }
}
