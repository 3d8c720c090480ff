//! The round runner every strategy drives: it turns "intervene on this
//! group" into repeated runs of the target, decides when "no failure" is
//! believable under nondeterminism, sets aside rounds that are no evidence,
//! feeds the rest to the knowledge store, and records each round for the
//! report.
//!
//! A round ends at its first failing run — one counter-example is enough
//! to prune (Def. 2, footnote) — unless that run leaves something unsettled
//! (below). Otherwise it runs until the session's error control
//! (`confidence`) accepts "the failure stopped": enough *witnessed* runs
//! (some candidate held, so the failure was under way) without a failure, or,
//! when the group hides every predicate that could witness, enough runs.
//!
//! Confounding guard (seed 001, Def. 3). Intervening on a group cannot
//! change a predicate that precedes it or is unordered with it in the
//! AC-DAG (causes precede effects, Sec. 4), and every candidate held in
//! every failing run. So in each run where the failure was under way, all
//! of those upstream predicates must hold. One that is missing from every
//! such run of a round (at least `confound_runs` of them, so a single
//! missed observation is not mistaken for it) was changed by the
//! intervention: the round is confounded and is not used to prune or to
//! confirm. A round whose upstream predicates never held at all is not
//! used either: nothing shows the failure was ever under way.
//!
//! An upstream order the run left *undecided* ("A ends before B starts"
//! with A over and B not started when the run ended,
//! `RunTruth::undecided`) is not missing either: it is settled at A's end,
//! and B not starting is what the intervention did later on B's thread or
//! the run ending first (stringbuffer-jdk1.4 beside a CPU hog: holding
//! `erase`'s locks until main's `append` returned let main exit before
//! thread_main's `append(char*)`, and every round on the interleaving was
//! set aside as having changed "the constructor ends before
//! append(char*) starts", which the session then named as root cause).
//!
//! A predicate *tied* with the group (anchored at the very same time in
//! every failing run, `AcDag::tied`) is left out of that check: the
//! intervention acts at that instant, so it changes both whichever is the
//! cause; two facets of one instant cannot be told apart by intervening,
//! and docs/causal.md says what the report then claims.
//!
//! Absences prune only when seen in `absence_runs` failing runs of the
//! round, and only for descendants of the group (for any other predicate an
//! absence is a missed observation or confounding).

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    AcDag, CausalError, Config, Decision, Discovery, Oracle, Phase, Reason, Round, Strategy, Ties,
    Unused,
    confidence::{self, Ledger, RARER_LEVEL},
    knowledge::{Evidence, Knowledge, Rules, Status},
};
use crate::{bitset::BitSet, predicates::PredId};

/// The most valid runs a round takes when [`Config::max_round_runs`] is 0
/// (otherwise ten times what the session's first blind round needs, when
/// less). A round nothing upstream can witness is judged by its length,
/// against a lower bound on the failure rate: with 1 failing run in 200
/// under the agent's control that is 380,783 runs, which no session
/// finishes (one on a program outside the corpus ran 9,000 of them in
/// 140 s and was interrupted with nothing tested). Past this the round
/// ends unused, [`Unused::TooLong`] or [`Unused::NoWitness`], and the
/// search goes on; a failure in its runs still rules its group out, as
/// in any round. A blind round at 2 % with few failures seen needs up to
/// about 4,000 (docs/causal.md); the corpus's longest rounds on this
/// machine took about 400 runs.
pub const MAX_ROUND_RUNS: u32 = 5_000;

/// What a round showed, as far as the strategies are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// No failure, and the session's error control believes it.
    Stopped,
    /// A run failed despite the intervention.
    Persisted,
    /// Confounded or inconclusive: no evidence either way.
    Unused,
}

pub(crate) struct Experiment<'a> {
    pub dag: &'a AcDag,
    oracle: &'a mut dyn Oracle,
    pub kb: Knowledge,
    pub rng: ChaCha8Rng,
    pub ties: Ties,
    ledger: Ledger,
    confidence: f64,
    max_invalid: u32,
    absence_runs: u32,
    confound_runs: u32,
    max_round_runs: u32,
    rounds: Vec<Round>,
    /// Decisions taken before the first round (none in practice).
    early: Vec<Decision>,
    runs: u64,
}

impl<'a> Experiment<'a> {
    pub fn new(
        dag: &'a AcDag,
        oracle: &'a mut dyn Oracle,
        config: &Config,
        strategy: Strategy,
    ) -> Result<Self, CausalError> {
        config.validate()?;
        let rules = match strategy {
            Strategy::Aid => Rules { def2: true, extended: true },
            Strategy::AidPaper => Rules { def2: true, extended: false },
            Strategy::AidP | Strategy::AidPB | Strategy::Tagt => Rules::default(),
        };
        Ok(Experiment {
            dag,
            oracle,
            kb: Knowledge::new(dag, rules),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            ties: config.ties,
            ledger: Ledger::new(
                config.confidence,
                config.baseline.failing,
                config.baseline.passing,
            ),
            confidence: config.confidence,
            max_invalid: config.max_invalid_runs.max(1),
            absence_runs: config.absence_runs.max(1),
            confound_runs: config.confound_runs.max(1),
            max_round_runs: config.max_round_runs,
            rounds: Vec::new(),
            early: Vec::new(),
            runs: 0,
        })
    }

    /// The index the next round will have.
    pub fn next_round(&self) -> usize {
        self.rounds.len()
    }

    /// Sorts node indices into topological order (depth in the DAG), ties
    /// broken by what each says, most first ([`AcDag::says`]), then at
    /// random or by id as configured (Sec. 5.4).
    pub fn topo_sort(&mut self, nodes: &mut [usize]) {
        let keys: Vec<(usize, (usize, u8, u64))> = nodes
            .iter()
            .map(|&i| {
                let tie = match self.ties {
                    Ties::Random => self.rng.random::<u64>(),
                    Ties::ById => u64::from(self.dag.id(i).0),
                };
                (i, (self.dag.depth(i), self.dag.says(i), tie))
            })
            .collect();
        let mut keyed = keys;
        keyed.sort_by_key(|&(_, key)| key);
        for (slot, (i, _)) in nodes.iter_mut().zip(keyed) {
            *slot = i;
        }
    }

    /// A tie-break key for sets of nodes (branches): random or by smallest id.
    pub fn tie_key(&mut self, nodes: &BitSet) -> u64 {
        match self.ties {
            Ties::Random => self.rng.random::<u64>(),
            Ties::ById => {
                nodes.iter().map(|i| u64::from(self.dag.id(i).0)).min().unwrap_or(u64::MAX)
            }
        }
    }

    /// One round of intervention on `group` (node indices): runs until one
    /// of the stopping rules of [`Experiment::verdict`] decides, then
    /// records the round and what its evidence settles.
    pub fn intervene(&mut self, group: &BitSet, phase: Phase) -> Result<Outcome, CausalError> {
        let f = self.dag.f_index();
        if group.contains(f) {
            return Err(CausalError::FailureIntervened(self.dag.failure()));
        }
        let ids: BTreeSet<PredId> = group.iter().map(|i| self.dag.id(i)).collect();
        if ids.len() > 1 && !self.oracle.installable(&ids) {
            let mut round = Round::empty(self.rounds.len(), phase, ids);
            round.unused = Some(Unused::NotInstallable);
            self.rounds.push(round);
            return Ok(Outcome::Unused);
        }
        let scope = self.scope(group);
        let alpha = self.ledger.alpha();
        let cap = if self.max_round_runs > 0 {
            self.max_round_runs
        } else {
            self.ledger.blind_runs_needed().max(10).saturating_mul(10).min(MAX_ROUND_RUNS)
        };
        // A blind round is judged by its number of runs, against a lower
        // bound on the failure rate. One whose upstream candidates held
        // only once its intervention had acted (they witness nothing) is
        // judged by the number of those runs (the ones that were witnessed
        // before that rule), from the first on, while no run is
        // witnessed: in a round with upstream candidates, a run in which
        // none held shows nothing, as before.
        let mut p_lo = scope.blind.then(|| self.ledger.rate_lower_bound());
        let mut t = Tally::new(self.dag.nodes());
        self.oracle.round_begins(&ids, cap);
        // Runs made at once (a fleet's workers) are all counted, in the
        // order of their numbers, before the stopping rules are asked: a
        // run left out because the round had already decided could be the
        // one that failed.
        let batch = self.oracle.batch().max(1);
        let (outcome, unused, risk) = loop {
            let made =
                match self.oracle.run_batch(&ids, batch.min(cap.saturating_sub(t.valid).max(1))) {
                    Ok(made) => made,
                    Err(e) => {
                        self.oracle.round_ends();
                        return Err(CausalError::Oracle(e));
                    }
                };
            let mut counted = false;
            for obs in made {
                self.runs += 1;
                if !obs.valid {
                    t.invalid += 1;
                    t.streak += 1;
                    t.failed_held += u32::from(obs.failed);
                    continue;
                }
                t.streak = 0;
                t.valid += 1;
                counted = true;
                let bits = |ids: &BTreeSet<PredId>| {
                    BitSet::from_iter(self.dag.nodes(), self.dag.nodes_of(ids.iter().copied()))
                };
                let (held, undecided) = (bits(&obs.held), bits(&obs.undecided));
                t.count(&held, &undecided, &bits(&obs.late), obs.failed, &scope, self.dag);
            }
            if p_lo.is_none() && t.late_only > 0 && t.witnessed_pass + t.witnessed_fail == 0 {
                p_lo = Some(self.ledger.rate_lower_bound());
            }
            let p = p_lo.map(|p| (p, if scope.blind { t.valid } else { t.late_only }));
            if counted && let Some(verdict) = self.verdict(&t, cap, alpha, p) {
                break verdict;
            }
            if t.streak >= self.max_invalid {
                // Interventions that cannot all be applied in one run
                // (one skips another's call site) may still work apart;
                // one that never takes effect alone is left untested,
                // and the search goes on without it.
                break (Outcome::Unused, Some(Unused::NotApplied), None);
            }
        };
        self.oracle.round_ends();
        if t.fails < self.absence_runs {
            t.absent_all.clear();
        }
        match outcome {
            Outcome::Stopped => self.ledger.accept_stop(risk.unwrap_or(alpha)),
            Outcome::Persisted => self.ledger.learn_from_failed_round(
                t.valid - t.fails,
                t.fails,
                t.witnessed_pass,
                t.witnessed_fail,
            ),
            Outcome::Unused => {}
        }
        self.record(group, phase, ids, t, outcome, unused, risk);
        Ok(outcome)
    }

    /// What may change when `group` is intervened on ([`scope_of`]).
    fn scope(&self, group: &BitSet) -> Scope {
        scope_of(self.dag, group)
    }

    /// The stopping rules, after each valid run of a round: confounded,
    /// the failure persisted, it stopped (at the risk the round then
    /// carries), or the round's cap reached. None: run again. `by_length`
    /// (p_lo, n): the round is judged by its length too, n runs against
    /// that lower bound on the failure rate.
    fn verdict(
        &self,
        t: &Tally,
        cap: u32,
        alpha: f64,
        by_length: Option<(f64, u32)>,
    ) -> Option<(Outcome, Option<Unused>, Option<f64>)> {
        if !t.missing_all.is_empty() && t.evident >= self.confound_runs {
            let changed = t.missing_all.iter().map(|i| self.dag.id(i)).collect();
            return Some((Outcome::Unused, Some(Unused::Confounded { changed }), None));
        }
        if t.fails > 0 {
            // Absences are only worth confirming if a rule will use them.
            let mut pending = t.absent_all.clone();
            pending.intersect_with(self.kb.open());
            let settled =
                t.fails >= self.absence_runs || pending.is_empty() || !self.kb.uses_absences();
            if t.missing_all.is_empty() && settled {
                return Some(self.persisted(t));
            }
        } else if t.missing_all.is_empty() {
            let mut risk = self.ledger.witnessed_risk(t.witnessed_pass);
            if let Some((p_lo, n)) = by_length {
                risk = risk.min((1.0 - p_lo).powf(f64::from(n)));
            }
            if risk <= alpha {
                // Failing runs left out because the predicate still held:
                // only when fewer than an intervention that changed
                // nothing would leave out.
                if t.failed_held == 0 {
                    return Some((Outcome::Stopped, None, Some(risk)));
                }
                let (chance, rate) = self.ledger.left_out_failures(t.failed_held, t.valid);
                if chance <= alpha {
                    return Some((Outcome::Stopped, None, Some(risk)));
                }
                let held = f64::from(t.failed_held) / f64::from(t.failed_held + t.valid);
                if held >= rate {
                    let failing_held = t.failed_held;
                    return Some((
                        Outcome::Unused,
                        Some(Unused::Ineffective { failing_held }),
                        None,
                    ));
                }
            }
        }
        if t.valid >= cap {
            if !t.missing_all.is_empty() {
                let missing = t.missing_all.iter().map(|i| self.dag.id(i)).collect();
                return Some((Outcome::Unused, Some(Unused::Unsettled { missing }), None));
            }
            if t.fails > 0 {
                return Some(self.persisted(t));
            }
            if t.failed_held > 0 {
                let failing_held = t.failed_held;
                return Some((Outcome::Unused, Some(Unused::Ineffective { failing_held }), None));
            }
            // Judged by the length of all its runs (blind), the round
            // could not have gone on long enough: the failure is too rare
            // for a round to show it gone.
            if let Some((p_lo, n)) = by_length
                && n == t.valid
            {
                let needed = confidence::runs_for(p_lo, alpha);
                return Some((Outcome::Unused, Some(Unused::TooLong { needed }), None));
            }
            return Some((Outcome::Unused, Some(Unused::NoWitness), None));
        }
        None
    }

    /// A round in which the failure persisted: evidence against its
    /// group, unless its failing runs were far fewer than with nothing
    /// intervened on ([`RARER_LEVEL`]).
    fn persisted(&self, t: &Tally) -> (Outcome, Option<Unused>, Option<f64>) {
        let (chance, _) = self.ledger.failures_as_rare(t.fails, t.valid);
        if chance <= RARER_LEVEL {
            return (Outcome::Unused, Some(Unused::Rarer { failing: t.fails }), None);
        }
        (Outcome::Persisted, None, None)
    }

    /// Records a finished round, with what its evidence confirmed and
    /// pruned when it was used.
    #[expect(clippy::too_many_arguments, reason = "the parts of one finished round")]
    fn record(
        &mut self,
        group: &BitSet,
        phase: Phase,
        ids: BTreeSet<PredId>,
        t: Tally,
        outcome: Outcome,
        unused: Option<Unused>,
        risk: Option<f64>,
    ) {
        let index = self.rounds.len();
        let mut round = Round::empty(index, phase, ids);
        round.runs = t.valid;
        round.invalid_runs = t.invalid;
        round.invalid_streak = t.streak;
        round.witnessed = t.witnessed_pass + t.witnessed_fail;
        round.failing_runs = t.fails;
        round.failure_stopped = t.fails == 0;
        round.risk = risk;
        round.unused = unused;
        if outcome != Outcome::Unused {
            let ev = Evidence {
                round: index,
                group: group.clone(),
                stopped: outcome == Outcome::Stopped,
                held_no_fail: t.held_no_fail,
                absent_fail: t.absent_all,
                held_any: t.held_any,
            };
            for (i, status, reason) in self.kb.absorb(self.dag, ev) {
                let d = Decision { pred: self.dag.id(i), reason };
                match status {
                    Status::Causal => round.confirmed.push(d),
                    _ => round.pruned.push(d),
                }
            }
        }
        self.rounds.push(round);
    }

    /// Prunes without new evidence (Alg. 2 line 18); recorded with the
    /// latest round.
    pub fn prune(&mut self, i: usize, reason: Reason) {
        if let Some((i, _, reason)) = self.kb.prune(i, reason) {
            let d = Decision { pred: self.dag.id(i), reason };
            match self.rounds.last_mut() {
                Some(r) => r.pruned.push(d),
                None => self.early.push(d),
            }
        }
    }

    /// Sets `i` aside after the latest round, on it alone, was not evidence.
    pub fn set_untestable(&mut self, i: usize) {
        let round = self.rounds.len().saturating_sub(1);
        if let Some((i, _, reason)) = self.kb.set_untestable(i, Reason::Confounded { round }) {
            let d = Decision { pred: self.dag.id(i), reason };
            if let Some(r) = self.rounds.last_mut() {
                r.set_aside.push(d);
            }
        }
    }

    pub fn finish(self, strategy: Strategy) -> Discovery {
        let mut path: Vec<usize> = self.kb.causal().iter().collect();
        path.sort_by_key(|&i| (self.dag.depth(i), self.dag.id(i)));
        let path: Vec<PredId> = path.into_iter().map(|i| self.dag.id(i)).collect();
        let unresolved = self.kb.open().iter().map(|i| self.dag.id(i)).collect();
        let untestable = self.kb.untestable().iter().map(|i| self.dag.id(i)).collect();
        let confidence = self.ledger.summary(self.confidence);
        let mut rounds = self.rounds;
        if let Some(first) = rounds.first_mut() {
            let mut early = self.early;
            early.append(&mut first.pruned);
            first.pruned = early;
        }
        Discovery {
            strategy,
            root_cause: path.first().copied(),
            path,
            triggers: Vec::new(),
            interventions: rounds
                .iter()
                .filter(|r| r.unused != Some(Unused::NotInstallable))
                .count() as u32,
            runs: self.runs,
            rounds,
            unresolved,
            untestable,
            confidence,
        }
    }
}

/// What may change when `group` is intervened on: its descendants
/// (they may vanish with it), and what is upstream of it (nothing there
/// may change, or the round is confounded).
fn scope_of(dag: &AcDag, group: &BitSet) -> Scope {
    let n = dag.nodes();
    let f = dag.f_index();
    // Descendants of the group may vanish with it; nothing else may.
    let mut below = BitSet::new(n);
    for g in group.iter() {
        below.union_with(dag.reach(g));
    }
    below.remove(f);
    below.difference_with(group);
    let mut upstream = BitSet::full(n);
    upstream.remove(f);
    upstream.difference_with(group);
    upstream.difference_with(&below);
    // Predicates tied with the group (anchored at the very instant its
    // intervention acts, in every failing run) change with it whatever
    // the cause: their change is no sign of confounding.
    // So are those its intervention makes impossible: they cannot witness
    // anything, and their absence is the intervention itself.
    for g in group.iter() {
        upstream.difference_with(dag.tied(g));
        upstream.difference_with(dag.implied(g));
    }
    // Only a sufficient predicate upstream can witness that the failure
    // was under way; with none, the round is judged by its length.
    let mut witnessing = upstream.clone();
    witnessing.difference_with(dag.necessary());
    Scope { below, upstream, blind: witnessing.is_empty() }
}

/// Whether some round on one of `candidates` alone could be witnessed: a
/// sufficient predicate outside it, its descendants and what is tied to
/// it would show, run by run, that the failure was under way. When none
/// can, every round is judged by its length alone.
pub fn some_round_witnessed(dag: &AcDag, candidates: &[PredId]) -> bool {
    let f = dag.f_index();
    candidates.iter().filter_map(|&p| dag.index_of(p)).filter(|&i| i != f).any(|i| {
        let mut one = BitSet::new(dag.nodes());
        one.insert(i);
        !scope_of(dag, &one).blind
    })
}

/// What an intervention on a group may change ([`scope_of`]).
struct Scope {
    /// Descendants of the group: they may vanish with it.
    below: BitSet,
    /// Everything else but the failure and what is tied to the group:
    /// nothing here may change.
    upstream: BitSet,
    /// No sufficient predicate upstream can witness that the failure was
    /// under way: the round is judged by its length.
    blind: bool,
}

/// The counts of one round so far.
struct Tally {
    valid: u32,
    invalid: u32,
    /// Invalid runs in a row.
    streak: u32,
    /// Invalid runs that failed (the intervened predicate still held, or
    /// the run was incomplete or the intervention not installed).
    failed_held: u32,
    fails: u32,
    witnessed_pass: u32,
    witnessed_fail: u32,
    /// Runs in which nothing witnessed and some upstream candidate held,
    /// only once the intervention had acted.
    late_only: u32,
    /// Runs in which the failure was under way (it failed, or a
    /// sufficient predicate held).
    evident: u32,
    held_no_fail: BitSet,
    held_any: BitSet,
    /// Descendants absent from every failing run so far.
    absent_all: BitSet,
    /// Upstream predicates missing from every run with the failure under way.
    missing_all: BitSet,
}

impl Tally {
    fn new(n: usize) -> Tally {
        Tally {
            valid: 0,
            invalid: 0,
            streak: 0,
            failed_held: 0,
            fails: 0,
            witnessed_pass: 0,
            witnessed_fail: 0,
            late_only: 0,
            evident: 0,
            held_no_fail: BitSet::new(n),
            held_any: BitSet::new(n),
            absent_all: BitSet::new(n),
            missing_all: BitSet::new(n),
        }
    }

    /// Counts one valid run, in which `held` held (`late` of them only
    /// after the intervention acted), `undecided` were left undecided
    /// (neither held nor missing) and the failure showed or not.
    fn count(
        &mut self,
        held: &BitSet,
        undecided: &BitSet,
        late: &BitSet,
        failed: bool,
        scope: &Scope,
        dag: &AcDag,
    ) {
        self.held_any.union_with(held);
        // A necessary-only candidate holds in passing runs too: its
        // holding does not show that the failure was under way; nor does
        // one the intervention may have brought about.
        let mut witness = held.clone();
        witness.difference_with(dag.necessary());
        let mut late_upstream = witness.clone();
        late_upstream.intersect_with(late);
        late_upstream.intersect_with(&scope.upstream);
        witness.difference_with(late);
        if witness.is_empty() && !late_upstream.is_empty() {
            self.late_only += 1;
        }
        if failed || !witness.is_empty() {
            self.evident += 1;
            let mut missing = scope.upstream.clone();
            missing.difference_with(held);
            missing.difference_with(undecided);
            if self.evident == 1 {
                self.missing_all = missing;
            } else {
                self.missing_all.intersect_with(&missing);
            }
            if failed {
                self.witnessed_fail += 1;
            } else {
                self.witnessed_pass += 1;
            }
        }
        if failed {
            self.fails += 1;
            let mut absent = scope.below.clone();
            absent.difference_with(held);
            // A sufficient-only candidate is missing from the failing runs
            // that fail another way: its absence is no evidence.
            absent.difference_with(dag.sufficient());
            if self.fails == 1 {
                self.absent_all = absent;
            } else {
                self.absent_all.intersect_with(&absent);
            }
        } else {
            self.held_no_fail.union_with(held);
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
