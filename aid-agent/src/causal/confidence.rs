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
//!   probability q, 1 under the paper's assumptions. Its posterior (Beta,
//!   uniform prior) starts from the failing baseline runs (all witnessed,
//!   all failed) and gains every witnessed run of a round that failed (its
//!   group held no cause); a round's risk is the posterior predictive
//!   probability of its witnessed runs without a failure. It does not
//!   depend on the failure rate, so an intervention that makes the failure
//!   rarer cannot fool it.
//! - **all runs** — only when the group hides every predicate that could
//!   witness (nothing upstream of it is left): each run fails with the
//!   failure rate p if the group holds no cause. Here the bound is
//!   frequentist, valid whatever p is: a Clopper–Pearson lower bound p_lo on
//!   p from every run whose outcome is evidence about it (the baseline and
//!   the rounds that failed), and the round's risk is (1 − p_lo)^n. The
//!   bounds are recomputed as evidence accumulates, the u-th at level
//!   δ_p·6/(π²u²), so that all of them hold at once with probability
//!   1 − δ_p (δ_p = δ/2, spent only if such a round is used).
//!
//! The rounds that stop the failure share the rest of the budget, α_j =
//! δ_r·6/(π²j²) for the j-th (Σ α_j = δ_r = δ/2, or δ when no round was
//! blind): a union bound over rounds whose number is not known in advance.

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
    /// Lower bounds on p computed so far (each spends part of δ_p).
    p_bounds: u32,
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
            p_bounds: 0,
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
        self.delta / 2.0 * 6.0 / (PI * PI * j * j)
    }

    /// Posterior mean of the failure rate.
    #[cfg(test)]
    pub fn rate(&self) -> f64 {
        self.p_fail / (self.p_fail + self.p_pass)
    }

    /// Probability, under "no cause in the group", of `witnessed` runs
    /// with a candidate holding and no failure.
    pub fn witnessed_risk(&self, witnessed: u32) -> f64 {
        predictive_zeros(self.q_fail, self.q_pass, witnessed)
    }

    /// A new lower bound on p for a round nothing can witness: spends the
    /// next share of δ_p. The round then needs (1 − p_lo)^n ≤ α.
    pub fn rate_lower_bound(&mut self) -> f64 {
        self.p_bounds += 1;
        let u = f64::from(self.p_bounds);
        let level = self.delta / 2.0 * 6.0 / (PI * PI * u * u);
        let failing = (self.p_fail - 1.0).round() as u64;
        let runs = failing + (self.p_pass - 1.0).round() as u64;
        clopper_pearson_lower(failing, runs, level)
    }

    /// A round's runs left out because the intervened predicate still held
    /// and the run failed (`failed_held`), beside its `valid` runs: the
    /// probability of so few (at most that many of the `failed_held +
    /// valid` runs) if the intervention changed nothing, so that the
    /// predicate held — and the run failed — as often as the failure
    /// comes at all; and that rate, a low estimate of it
    /// (Clopper–Pearson at [`NULL_RATE_LEVEL`], spending nothing: the test
    /// only ever keeps a round from stopping). A round whose left-out
    /// failing runs are that likely says nothing: its counted runs may be
    /// the ones that would have passed anyway.
    pub fn left_out_failures(&self, failed_held: u32, valid: u32) -> (f64, f64) {
        let n = u64::from(failed_held) + u64::from(valid);
        self.at_most(failed_held, n)
    }

    /// A round's `fails` failing runs among its `valid` ones: the
    /// probability of so few if the intervention changed nothing (the
    /// failure as frequent as it comes at all, the low estimate of
    /// [`Ledger::left_out_failures`]), and that rate. Spends nothing: it
    /// only ever keeps a round from ruling its group out
    /// ([`RARER_LEVEL`]).
    pub fn failures_as_rare(&self, fails: u32, valid: u32) -> (f64, f64) {
        self.at_most(fails, u64::from(valid))
    }

    /// P(at most `k` failing runs of `n`) at the low estimate of the
    /// failure rate, and that rate.
    fn at_most(&self, k: u32, n: u64) -> (f64, f64) {
        let failing = (self.p_fail - 1.0).round() as u64;
        let runs = failing + (self.p_pass - 1.0).round() as u64;
        let rate = clopper_pearson_lower(failing, runs, NULL_RATE_LEVEL);
        (1.0 - upper_tail(u64::from(k) + 1, n, rate), rate)
    }

    /// Runs a round nothing can witness needs at the next α, with the
    /// current evidence (for messages and caps; spends nothing).
    pub fn blind_runs_needed(&self) -> u32 {
        let mut probe = self.clone();
        runs_for(probe.rate_lower_bound(), self.alpha())
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
        // δ_p is only at stake if some round relied on a bound on p.
        let p_part = if self.p_bounds > 0 { self.delta / 2.0 } else { 0.0 };
        SessionConfidence {
            requested,
            achieved: (1.0 - self.spent - p_part).max(0.0),
            stopped_rounds: self.stops,
        }
    }
}

/// Smallest n with (1 − p)^n ≤ alpha (capped).
pub(crate) fn runs_for(p: f64, alpha: f64) -> u32 {
    if p <= 0.0 {
        return u32::MAX;
    }
    if p >= 1.0 {
        return 1;
    }
    let n = (alpha.ln() / (1.0 - p).ln()).ceil().max(1.0);
    if n > f64::from(u32::MAX) { u32::MAX } else { n as u32 }
}

/// The level of the low estimate of the failure rate a round's left-out
/// failing runs are judged against ([`Ledger::left_out_failures`]).
pub const NULL_RATE_LEVEL: f64 = 0.05;

/// A round whose failing runs are this unlikely to be so few with nothing
/// intervened on ([`Ledger::failures_as_rare`]) is no evidence against its
/// group: the intervention made the failure far rarer without stopping
/// it, as a true cause's does when forcing it brings a failure of its own
/// (counter-atomicity: the stale read forced to 1 while worker 1 has not
/// stored yet, and worker 1 delayed past worker 2's whole increment,
/// overwrites worker 2's 2 with its 1: 1 run of 722, against 10 % with
/// nothing intervened on). A group with no cause fails as often as the
/// failure comes: its first failing run comes so late with probability
/// at most this, so it is left untested rather than ruled out that
/// rarely. Nothing is ever confirmed by it.
pub const RARER_LEVEL: f64 = 0.001;

/// One-sided Clopper–Pearson lower bound on a binomial proportion: the p
/// at which `k` or more successes in `n` trials have probability `level`.
fn clopper_pearson_lower(k: u64, n: u64, level: f64) -> f64 {
    if k == 0 || n == 0 {
        return 0.0;
    }
    // P(X ≥ k) grows with p: bisect.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if upper_tail(k, n, mid) < level {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// P(X ≥ k) for X ~ Binomial(n, p), summed in log space.
fn upper_tail(k: u64, n: u64, p: f64) -> f64 {
    if p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    // 1 − P(X < k); terms by the recurrence pmf(i+1) = pmf(i)·(n−i)/(i+1)·p/(1−p).
    let ratio = (p / (1.0 - p)).ln();
    let mut log_pmf = n as f64 * (1.0 - p).ln();
    let mut below = 0.0f64;
    for i in 0..k {
        below += log_pmf.exp();
        log_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + ratio;
    }
    (1.0 - below).clamp(0.0, 1.0)
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
        assert!(total < 0.005 && total > 0.00499, "{total}");
    }

    #[test]
    fn witnessed_runs_need_no_failure_rate() {
        // 20 failing baseline runs: q ~ Beta(21, 1); one witnessed run
        // without failure has predictive probability 1/22.
        let l = Ledger::new(0.99, 20, 20);
        assert!((l.witnessed_risk(1) - 1.0 / 22.0).abs() < 1e-12);
        assert!((l.witnessed_risk(0) - 1.0).abs() < 1e-12);
        // The same number of witnessed runs is enough at any failure rate.
        let rare = Ledger::new(0.99, 20, 980);
        assert_eq!(rare.witnessed_risk(3), l.witnessed_risk(3));
    }

    #[test]
    fn clopper_pearson_matches_known_values() {
        // k = n: the lower bound is level^(1/n).
        assert!((clopper_pearson_lower(10, 10, 0.05) - 0.05f64.powf(0.1)).abs() < 1e-9);
        // 10 of 20, one-sided 95 %: 0.3020 (0.2720 is the two-sided bound).
        assert!((clopper_pearson_lower(10, 20, 0.05) - 0.3020).abs() < 1e-3);
        assert_eq!(clopper_pearson_lower(0, 20, 0.05), 0.0);
        assert_eq!(runs_for(0.5, 0.01), 7);
        assert_eq!(runs_for(0.1, 0.01), 44);
    }

    #[test]
    fn blind_rounds_follow_the_uncertainty_of_p() {
        let mut l = Ledger::new(0.99, 20, 20);
        let n = l.blind_runs_needed();
        // p_lo ≈ 0.30 at level 0.003 from 20 of 40: about 17 runs for α ≈ 0.003.
        assert!((14..=20).contains(&n), "{n}");
        // Evidence from failed rounds tightens the bound.
        let before = l.rate_lower_bound();
        l.learn_from_failed_round(100, 100, 0, 100);
        assert!((l.rate() - 121.0 / 242.0).abs() < 1e-12);
        assert!(l.rate_lower_bound() > before);
        // 2 % from 200 runs: far more than the point estimate's 228.
        let rare = Ledger::new(0.99, 4, 196);
        assert!(rare.blind_runs_needed() > 1000, "{}", rare.blind_runs_needed());
    }
}
