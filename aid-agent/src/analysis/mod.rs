//! The offline half of AID on a recorded session: predicates (Sec. 3.1),
//! statistical debugging (Sec. 2), the fully-discriminative and safe
//! filters (Sec. 3.2) and the AC-DAG (Sec. 4). `aid-agent analyze` prints
//! it; `debug` continues from it with interventions.

mod aside;
mod implied;
pub mod triggers;

pub use aside::AsideTally;

use std::{
    collections::BTreeSet,
    fmt::Write as _,
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};

use crate::{
    causal::{AcDag, CausalError},
    intervene::{Reach, SafeList},
    model::{Intervention, Run, Session, Site},
    predicates::{
        Catalog, Condition, ExtractConfig, Kind, PredId, Predicate, PredicateError, RunTruth,
        learn, merge,
    },
    stats::{self, Scores, Totals, rank, score_all, tally},
};

#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error("cannot extract predicates")]
    Predicates(#[from] PredicateError),
    #[error("cannot build the approximate causal DAG")]
    Causal(#[from] CausalError),
}

#[derive(Clone, Debug, Default)]
pub struct AnalysisOptions {
    pub extract: ExtractConfig,
    pub safe: SafeList,
    /// What the run source can carry out: predicates whose intervention it
    /// cannot apply are left out.
    pub reach: Reach,
}

/// Why a fully-discriminative predicate is not a node of the AC-DAG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "why")]
pub enum Exclusion {
    /// Nothing can force it to its passing value (counts, never called).
    NoIntervention,
    /// Its intervention changes a value and the function is not declared
    /// safe (Sec. 3.2).
    Unsafe,
    /// Same intervention, or the same moment in every failing run, as a
    /// better-ranked candidate (being fully discriminative, it also holds
    /// in the same runs): one event seen twice.
    SameAs { id: PredId },
    /// The run source cannot carry out its intervention (another thread or
    /// a hold, on the units of a live service).
    OutOfReach,
    /// Its intervention acts only once a live unit's outcome is decided
    /// (a delay before the unit function returns: [`Reach::after_outcome`]),
    /// so it cannot stop the failure.
    AfterOutcome,
    /// Its intervention delays a call's return, and predicate `id` says
    /// that call returned an error in every failing run: the delay
    /// comes after the value is decided and cannot make the call behave
    /// as in passing runs (issue 23: "a delay at the return of a call
    /// whose value is already wrong" is not testable by that
    /// intervention).
    ValueDecided { id: PredId },
    /// It held in no analysed passing run, but among the session's
    /// observed runs that were not analysed (made without noise, or with
    /// noise the amplifier left) in `failing` failing and `passing`
    /// passing ones: more passing ones beyond chance
    /// ([`stats::mostly_passing`], `aside.rs`).
    Contradicted { failing: u32, passing: u32 },
}

impl Exclusion {
    /// Its name in report.json and `analyze`'s rows.
    pub fn tag(self) -> &'static str {
        match self {
            Exclusion::NoIntervention => "no_intervention",
            Exclusion::Unsafe => "unsafe",
            Exclusion::SameAs { .. } => "same_as",
            Exclusion::OutOfReach => "not_live",
            Exclusion::AfterOutcome => "after_outcome",
            Exclusion::ValueDecided { .. } => "value_decided",
            Exclusion::Contradicted { .. } => "contradicted",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Analysis {
    pub catalog: Catalog,
    /// Indexed by predicate id.
    pub scores: Vec<Scores>,
    /// Predicates other than F, best first.
    pub ranking: Vec<PredId>,
    pub totals: Totals,
    /// Runs left out because events were lost.
    pub runs_skipped: u32,
    /// Fraction of analysed runs that failed (p for the intervention rounds).
    pub failure_rate: f64,
    /// Fully-discriminative, intervenable, safe predicates: the AC-DAG's
    /// nodes besides F, in ranking order.
    pub candidates: Vec<PredId>,
    /// The candidates that are necessary but not sufficient: they held in
    /// every failing run and in some passing ones (`stats::necessary`).
    pub necessary: Vec<PredId>,
    /// The candidates that are sufficient but not necessary: they held in
    /// no passing run and in most failing runs, not all
    /// (`stats::sufficient`); made only when no fully-discriminative
    /// predicate could be intervened on.
    pub sufficient: Vec<PredId>,
    /// Predicates that would be necessary-only or sufficient-only
    /// candidates but for too few runs (`stats::undecided`,
    /// `stats::sufficient_undecided`): `debug` observes more runs for them.
    pub undecided: Vec<PredId>,
    pub excluded: Vec<(PredId, Exclusion)>,
    /// (merged, representative): predicates that are not fully
    /// discriminative and held in exactly the same runs as a more general
    /// or better-ranked one (`predicates::merge::same_runs`).
    pub merged: Vec<(PredId, PredId)>,
    pub dag: AcDag,
    /// The session's observed runs that were not analysed: how many, by
    /// label, and how often the candidates held in them.
    pub aside: AsideTally,
    /// How the traced calls of the learning runs nest, thread by thread.
    nesting: implied::Nesting,
}

/// Wall time of each stage of [`analyze`] (for `cargo xtask bench extract`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Timings {
    pub learn: Duration,
    pub evaluate: Duration,
    pub statistics: Duration,
    pub dag: Duration,
}

impl Timings {
    pub fn total(&self) -> Duration {
        self.learn + self.evaluate + self.statistics + self.dag
    }
}

/// Leaves out the runs `debug` made under interventions: they are
/// experiments, not observations of the program, and the statistics are
/// about the program. Returns how many were left out.
pub fn keep_observations(session: &mut Session) -> usize {
    let before = session.runs.len();
    session.runs.retain(|r| r.interventions.is_empty());
    before - session.runs.len()
}

pub fn analyze(session: &Session, opts: &AnalysisOptions) -> Result<Analysis, AnalysisError> {
    analyze_timed(session, opts).map(|(a, _)| a)
}

/// [`analyze`], timing each stage.
pub fn analyze_timed(
    session: &Session,
    opts: &AnalysisOptions,
) -> Result<(Analysis, Timings), AnalysisError> {
    analyze_beside(session, opts, &[])
}

/// [`analyze_timed`], checking the candidates against the session's
/// observed runs that are not analysed (`aside`): one that held in a
/// passing run among them is not a candidate
/// ([`Exclusion::Contradicted`]).
pub fn analyze_beside(
    session: &Session,
    opts: &AnalysisOptions,
    aside: &[Run],
) -> Result<(Analysis, Timings), AnalysisError> {
    let mut time = Timings::default();
    let t = Instant::now();
    let catalog = learn(session, &opts.extract)?;
    time.learn = t.elapsed();
    let t = Instant::now();
    let runs: Vec<_> = session.runs.iter().filter(|r| r.complete).collect();
    let runs_skipped = (session.runs.len() - runs.len()) as u32;
    let truths: Vec<RunTruth> = runs.iter().map(|r| catalog.evaluate(r)).collect();
    time.evaluate = t.elapsed();
    let t = Instant::now();
    let (counts, totals) = tally(catalog.len(), &truths);
    let scores = score_all(&counts, totals);
    let f = catalog.failure();
    let ranking: Vec<PredId> = rank(&scores).into_iter().filter(|&p| p != f).collect();
    let fd = |p: PredId| scores[p.0 as usize].fully_discriminative;
    let merged = merge::same_runs(&catalog, &truths, &ranking, fd);
    let aside = AsideTally::of(&catalog, aside, &ranking, &scores);
    let decided = wrong_values(&catalog, &scores, &ranking, totals);
    let mut candidates = Vec::new();
    let mut excluded = Vec::new();
    let mut seen: Vec<(&Intervention, PredId)> = Vec::new();
    for &id in &ranking {
        if !scores[id.0 as usize].fully_discriminative {
            continue;
        }
        let Some(p) = catalog.get(id) else { continue };
        let Some(iv) = p.intervention.as_ref() else {
            excluded.push((id, Exclusion::NoIntervention));
            continue;
        };
        if let Some(why) = left_out(iv, opts, session, &decided).or_else(|| aside.contradicts(id)) {
            excluded.push((id, why));
            continue;
        }
        admit_fully(
            &catalog,
            Admitted { seen: &mut seen, excluded: &mut excluded },
            &mut candidates,
            iv,
            id,
        );
    }
    // Necessary-only candidates, after every fully-discriminative one, so
    // that one stands for both where they are the same event; then
    // sufficient-only ones when no fully-discriminative one.
    let pick = Pick {
        catalog: &catalog,
        scores: &scores,
        ranking: &ranking,
        totals,
        opts,
        session,
        aside: &aside,
        decided: &decided,
    };
    let mut undecided = Vec::new();
    let mut necessary =
        pick.necessary(Admitted { seen: &mut seen, excluded: &mut excluded }, &mut undecided);
    candidates.extend(&necessary);
    let mut sufficient = Vec::new();
    if !candidates.iter().any(|&id| scores[id.0 as usize].fully_discriminative) {
        let admitted = Admitted { seen: &mut seen, excluded: &mut excluded };
        sufficient = pick.sufficient(admitted, &mut undecided);
        candidates.extend(&sufficient);
    }
    let failing: Vec<&RunTruth> = truths.iter().filter(|t| t.failed).collect();
    let lists = [&mut candidates, &mut necessary, &mut sufficient];
    merge_same_events(&catalog, lists, &failing, &mut excluded);
    time.statistics = t.elapsed();
    let t = Instant::now();
    let nesting = implied::Nesting::of(&session.runs, &|f| {
        session.functions.get(f as usize).is_some_and(|x| x.internal)
    });
    let acting = acting_anchors(&failing, &excluded);
    let dag = AcDag::build(&candidates, f, acting.iter().map(Vec::as_slice))?
        .with_necessary(&necessary)
        .with_sufficient(&sufficient)
        .with_says(candidates.iter().filter_map(|&id| Some((id, catalog.get(id)?.key.kind.says()))))
        .with_implied(&implied::implied(
            &candidates
                .iter()
                .filter_map(|&id| {
                    catalog.get(id).map(|p| (id, p.key.kind, p.intervention.as_ref()))
                })
                .collect::<Vec<_>>(),
            &nesting,
        ));
    time.dag = t.elapsed();
    let failure_rate =
        if truths.is_empty() { 0.0 } else { f64::from(totals.failing) / truths.len() as f64 };
    Ok((
        Analysis {
            catalog,
            scores,
            ranking,
            totals,
            runs_skipped,
            failure_rate,
            candidates,
            necessary,
            sufficient,
            undecided,
            excluded,
            merged,
            dag,
            aside,
            nesting,
        },
        time,
    ))
}

/// Why a candidate with intervention `iv` is left out whatever the runs
/// say, if it is: the function is not --safe, the source cannot carry the
/// intervention out, or it acts after the outcome it should change is
/// decided (a live unit's, or its call's value: `decided`).
fn left_out(
    iv: &Intervention,
    opts: &AnalysisOptions,
    session: &Session,
    decided: &[(Site, PredId)],
) -> Option<Exclusion> {
    if !opts.safe.allows(iv, &session.functions) {
        return Some(Exclusion::Unsafe);
    }
    if !opts.reach.allows(iv) {
        return Some(Exclusion::OutOfReach);
    }
    if opts.reach.after_outcome(iv) {
        return Some(Exclusion::AfterOutcome);
    }
    match iv {
        Intervention::DelayExit { site, .. } => {
            decided.iter().find(|(s, _)| s == site).map(|&(_, id)| Exclusion::ValueDecided { id })
        }
        _ => None,
    }
}

/// The calls that returned an error in every failing run
/// ([`Exclusion::ValueDecided`]), with the predicate that says so (the
/// best-ranked first). A value that merely differs from the passing runs'
/// is not enough: a call that returns how long it waited may fail the run
/// by its timing, which a delay at its return does change.
fn wrong_values(
    catalog: &Catalog,
    scores: &[Scores],
    ranking: &[PredId],
    totals: Totals,
) -> Vec<(Site, PredId)> {
    ranking
        .iter()
        .filter_map(|&id| catalog.get(id))
        .filter(|p| p.key.kind == Kind::ErrorReturn)
        .filter(|p| {
            totals.failing > 0 && scores[p.id.0 as usize].counts.failing_true == totals.failing
        })
        .filter_map(|p| Some((p.key.site()?, p.id)))
        .collect()
}

/// The failing runs' anchors as the AC-DAG places them: a candidate that
/// stands for others (`excluded` as the same: same intervention, or same
/// moment) is at the earliest of its own anchor and theirs in each run. Their
/// intervention is one, and it acts no later than the earliest of them
/// (docs/predicates.md, "Anchors and intervention points"): rare.c's
/// "consume ends before publish starts" is anchored at consume's exit, but
/// its hold, the same as "consume starts before publish starts", acts at
/// consume's entry. Placed at the exit, it had "consume starts while
/// prepare runs", anchored at that entry, for an ancestor; the hold made
/// that ancestor impossible, so no round on it could be used, and the
/// overlap with `prepare` was confirmed the root cause.
fn acting_anchors(
    failing: &[&RunTruth],
    excluded: &[(PredId, Exclusion)],
) -> Vec<Vec<(PredId, u64)>> {
    let folded: Vec<(PredId, PredId)> = excluded
        .iter()
        .filter_map(|&(dup, why)| match why {
            Exclusion::SameAs { id } => Some((dup, id)),
            _ => None,
        })
        .collect();
    let acting = |t: &RunTruth| {
        let mut held = t.held.clone();
        for &(dup, rep) in &folded {
            let at = held.binary_search_by_key(&rep, |&(p, _)| p);
            if let (Some(d), Ok(i)) = (t.anchor(dup), at) {
                held[i].1 = held[i].1.min(d);
            }
        }
        held
    };
    failing.iter().map(|t| acting(t)).collect()
}

/// What the candidates beyond the fully-discriminative ones are chosen
/// from.
struct Pick<'a> {
    catalog: &'a Catalog,
    scores: &'a [Scores],
    ranking: &'a [PredId],
    totals: Totals,
    opts: &'a AnalysisOptions,
    session: &'a Session,
    aside: &'a AsideTally,
    decided: &'a [(Site, PredId)],
}

impl<'a> Pick<'a> {
    /// The ranked predicates with an intervention the source may apply,
    /// in time to change the outcome ([`left_out`]).
    fn applicable(
        &self,
    ) -> impl Iterator<Item = (PredId, &'a Scores, &'a Predicate, &'a Intervention)> + '_ {
        self.ranking.iter().filter_map(|&id| {
            let p = self.catalog.get(id)?;
            let iv = p.intervention.as_ref()?;
            left_out(iv, self.opts, self.session, self.decided)
                .is_none()
                .then(|| (id, &self.scores[id.0 as usize], p, iv))
        })
    }

    /// Necessary-only candidates (`stats::necessary`): a wrong value held
    /// in every failing run and, less often, in passing ones, on a function
    /// the user declared --safe, or two calls of one function overlapping
    /// for the same key (serialised, which needs no --safe). Those more
    /// runs may decide go to `undecided`.
    fn necessary(&self, admitted: Admitted<'_, 'a>, undecided: &mut Vec<PredId>) -> Vec<PredId> {
        let eligible = |p: &Predicate, s: &Scores| {
            let same_key = matches!(p.condition, Condition::GroupOverlap { same: Some(_), .. });
            !s.fully_discriminative
                && (matches!(p.key.kind, Kind::ErrorReturn | Kind::RetDiffers) || same_key)
        };
        self.choose(admitted, undecided, eligible, stats::necessary, stats::undecided)
    }

    /// Sufficient-only candidates (`stats::sufficient`): held in no
    /// passing run and in most failing runs, for when no
    /// fully-discriminative predicate could be intervened on. Each is
    /// still confirmed by its intervention alone; the failing runs it
    /// missed failed another way. Those more runs may decide go to
    /// `undecided`.
    fn sufficient(&self, admitted: Admitted<'_, 'a>, undecided: &mut Vec<PredId>) -> Vec<PredId> {
        let eligible = |_: &Predicate, _: &Scores| true;
        self.choose(admitted, undecided, eligible, stats::sufficient, stats::sufficient_undecided)
    }

    /// The applicable predicates `eligible` allows that `decided` keeps,
    /// admitted in rank order; those `pending` says more runs may decide
    /// go to `undecided`.
    fn choose(
        &self,
        admitted: Admitted<'_, 'a>,
        undecided: &mut Vec<PredId>,
        eligible: impl Fn(&Predicate, &Scores) -> bool,
        decided: fn(&Scores, Totals) -> bool,
        pending: fn(&Scores, Totals) -> bool,
    ) -> Vec<PredId> {
        let mut out = Vec::new();
        for (id, s, p, iv) in self.applicable() {
            if !eligible(p, s) {
                continue;
            }
            if !decided(s, self.totals) {
                if pending(s, self.totals) {
                    undecided.push(id);
                }
                continue;
            }
            if let Some(why) = self.aside.contradicts(id) {
                admitted.excluded.push((id, why));
                continue;
            }
            if admit(admitted.seen, admitted.excluded, iv, id) {
                out.push(id);
            }
        }
        out
    }
}

/// What [`admit`] keeps: the interventions admitted, and what was left out.
struct Admitted<'s, 'a> {
    seen: &'s mut Vec<(&'a Intervention, PredId)>,
    excluded: &'s mut Vec<(PredId, Exclusion)>,
}

/// [`admit`] for a fully-discriminative predicate, into `candidates`. One
/// with the same intervention as a candidate admitted before it that says
/// more about the same calls ([`crate::predicates::PredKey::narrows`])
/// takes that candidate's place and stands for both: being fully
/// discriminative, both held in the same runs (every failing one, no
/// passing one), so the narrower one is as well supported and tells more.
fn admit_fully<'a>(
    catalog: &Catalog,
    admitted: Admitted<'_, 'a>,
    candidates: &mut Vec<PredId>,
    iv: &'a Intervention,
    id: PredId,
) {
    let narrows = |first: PredId| {
        catalog.get(id).zip(catalog.get(first)).is_some_and(|(p, q)| p.key.narrows(&q.key))
    };
    let Some(slot) = admitted.seen.iter_mut().find(|(x, first)| *x == iv && narrows(*first)) else {
        if admit(admitted.seen, admitted.excluded, iv, id) {
            candidates.push(id);
        }
        return;
    };
    let first = std::mem::replace(&mut slot.1, id);
    for c in candidates.iter_mut().filter(|c| **c == first) {
        *c = id;
    }
    for (_, why) in admitted.excluded.iter_mut() {
        if let Exclusion::SameAs { id: rep } = why
            && *rep == first
        {
            *rep = id;
        }
    }
    admitted.excluded.push((first, Exclusion::SameAs { id }));
}

/// Sets aside the candidates anchored at the same moment as a better one
/// about the same calls (`merge::same_moment`), then names each overlap
/// by the interleaving that stands for it ([`named_by_interleavings`]);
/// `lists` are the candidates, then the necessary and sufficient ones
/// among them.
fn merge_same_events(
    catalog: &Catalog,
    lists: [&mut Vec<PredId>; 3],
    failing: &[&RunTruth],
    excluded: &mut Vec<(PredId, Exclusion)>,
) {
    let [candidates, necessary, sufficient] = lists;
    for (dup, rep) in merge::same_moment(catalog, candidates, failing) {
        for list in [&mut *candidates, &mut *necessary, &mut *sufficient] {
            list.retain(|&c| c != dup);
        }
        excluded.push((dup, Exclusion::SameAs { id: rep }));
    }
    for (old, new) in named_by_interleavings(catalog, candidates, excluded) {
        for c in necessary.iter_mut().chain(sufficient.iter_mut()).filter(|c| **c == old) {
            *c = new;
        }
    }
}

/// Each of `candidates` that is the plain overlap of two groups' calls,
/// where an interleaving of the same calls' critical sections was set
/// aside as the same event ([`Exclusion::SameAs`]) with the same
/// intervention, is replaced by that interleaving, which stands for it
/// and for what it stood for: the runs could not tell them apart, one
/// round tests both, and the interleaving says how the calls met (a
/// check and an act of one call on either side of the other's section)
/// where the overlap says only that they did. Returns (replaced, by).
fn named_by_interleavings(
    catalog: &Catalog,
    candidates: &mut [PredId],
    excluded: &mut [(PredId, Exclusion)],
) -> Vec<(PredId, PredId)> {
    let mut replaced = Vec::new();
    let iv = |id: PredId| catalog.get(id).and_then(|p| p.intervention.as_ref());
    for c in candidates.iter_mut() {
        let Some(general) = catalog.get(*c) else { continue };
        let narrower = excluded.iter().find_map(|&(d, ref why)| {
            let same = matches!(why, Exclusion::SameAs { id } if id == c);
            let p = catalog.get(d)?;
            (same && p.key.interleaves(&general.key) && iv(d).is_some() && iv(d) == iv(*c))
                .then_some(d)
        });
        let Some(d) = narrower else { continue };
        let old = std::mem::replace(c, d);
        for (x, why) in excluded.iter_mut() {
            if let Exclusion::SameAs { id } = why
                && *id == old
            {
                // The interleaving's own entry now sets the overlap aside.
                if *x == d {
                    *x = old;
                }
                *id = d;
            }
        }
        replaced.push((old, d));
    }
    replaced
}

/// same intervention (then `id` is excluded as the same event seen twice).
fn admit<'a>(
    seen: &mut Vec<(&'a Intervention, PredId)>,
    excluded: &mut Vec<(PredId, Exclusion)>,
    iv: &'a Intervention,
    id: PredId,
) -> bool {
    if let Some(&(_, first)) = seen.iter().find(|(x, _)| *x == iv) {
        excluded.push((id, Exclusion::SameAs { id: first }));
        return false;
    }
    seen.push((iv, id));
    true
}

/// One row of the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RankedRow {
    pub rank: usize,
    pub id: PredId,
    pub key: String,
    pub kind: Kind,
    pub description: String,
    pub scores: Scores,
    /// "candidate", an [`Exclusion::tag`] ("contradicted" in `debug`
    /// only: `analyze` analyses every observed run), or
    /// "not_discriminative".
    pub status: String,
    pub intervention: Option<Intervention>,
    /// Predicates that held in exactly the same runs, folded into this row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_runs: Vec<PredId>,
}

/// The machine-readable form of `analyze --json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AnalysisReport {
    pub failing_runs: u32,
    pub passing_runs: u32,
    pub runs_skipped: u32,
    pub failure_rate: f64,
    pub predicates: usize,
    /// Rows after folding predicates that held in the same runs.
    #[serde(default)]
    pub rows_after_merging: usize,
    pub fully_discriminative: usize,
    pub candidates: Vec<PredId>,
    pub rows: Vec<RankedRow>,
    /// Transitive reduction of the AC-DAG, F included.
    pub dag_edges: Vec<(PredId, PredId)>,
    pub failure: PredId,
}

impl Analysis {
    fn status(&self, id: PredId) -> String {
        if self.candidates.contains(&id) {
            return "candidate".into();
        }
        match self.excluded.iter().find(|(p, _)| *p == id) {
            Some((_, why)) => why.tag().into(),
            None => "not_discriminative".into(),
        }
    }

    /// The ranking with predicates that held in the same runs folded into
    /// their representative.
    pub fn shown(&self) -> Vec<PredId> {
        let folded: BTreeSet<PredId> = self.merged.iter().map(|&(m, _)| m).collect();
        self.ranking.iter().copied().filter(|p| !folded.contains(p)).collect()
    }

    /// The top `top` rows of the ranking (all when `top` is 0), with
    /// predicates that held in the same runs folded into one row.
    pub fn report(&self, top: usize) -> AnalysisReport {
        let shown = self.shown();
        let n = if top == 0 { shown.len() } else { top.min(shown.len()) };
        let rows = shown[..n]
            .iter()
            .enumerate()
            .filter_map(|(i, &id)| {
                let p = self.catalog.get(id)?;
                Some(RankedRow {
                    rank: i + 1,
                    id,
                    key: p.key.to_string(),
                    kind: p.key.kind,
                    description: p.description.clone(),
                    scores: self.scores[id.0 as usize],
                    status: self.status(id),
                    intervention: p.intervention.clone(),
                    same_runs: self
                        .merged
                        .iter()
                        .filter(|&&(_, rep)| rep == id)
                        .map(|&(m, _)| m)
                        .collect(),
                })
            })
            .collect();
        AnalysisReport {
            failing_runs: self.totals.failing,
            passing_runs: self.totals.passing,
            runs_skipped: self.runs_skipped,
            failure_rate: self.failure_rate,
            predicates: self.ranking.len(),
            rows_after_merging: shown.len(),
            fully_discriminative: self
                .scores
                .iter()
                .filter(|s| s.fully_discriminative && s.id != self.catalog.failure())
                .count(),
            candidates: self.candidates.clone(),
            rows,
            dag_edges: self.dag.reduction(),
            failure: self.catalog.failure(),
        }
    }

    /// DOT of the AC-DAG with descriptions as labels.
    pub fn dot(&self, highlight: &BTreeSet<PredId>) -> String {
        self.dag.to_dot(
            |p| match self.catalog.get(p) {
                Some(x) if x.key.kind == Kind::Failure => "F: the run fails".to_string(),
                Some(x) => format!("{p}: {}", x.description),
                None => p.to_string(),
            },
            highlight,
        )
    }
}

/// The ranked table of `aid-agent analyze`.
pub fn render_table(a: &Analysis, top: usize) -> String {
    let r = a.report(top);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} runs ({} failing, {} passing{}), {} predicates, {} fully discriminative, {} candidates for intervention",
        r.failing_runs + r.passing_runs,
        r.failing_runs,
        r.passing_runs,
        if r.runs_skipped > 0 {
            format!(", {} skipped for lost events", r.runs_skipped)
        } else {
            String::new()
        },
        r.predicates,
        r.fully_discriminative,
        r.candidates.len()
    );
    if r.rows_after_merging < r.predicates {
        let _ = writeln!(
            s,
            "{} of them held in exactly the same runs as another and are folded into its row: {} rows",
            r.predicates - r.rows_after_merging,
            r.rows_after_merging
        );
    }
    if r.rows.is_empty() {
        s.push_str("no predicate separates failing from passing runs: trace more functions (--trace) or record more runs\n");
        return s;
    }
    let _ = writeln!(
        s,
        "{:>4} {:>5} {:>10} {:>8} {:>7} {:>7} {:>6} {:>5} {:>5}  {:<18} predicate",
        "rank",
        "id",
        "importance",
        "increase",
        "failure",
        "context",
        "recall",
        "F(P)",
        "S(P)",
        "status"
    );
    for row in &r.rows {
        let sc = &row.scores;
        let _ = writeln!(
            s,
            "{:>4} {:>5} {:>10.3} {:>8.3} {:>7.3} {:>7.3} {:>6.3} {:>5} {:>5}  {:<18} {}",
            row.rank,
            row.id.to_string(),
            sc.importance,
            sc.increase,
            sc.failure,
            sc.context,
            sc.recall,
            sc.counts.failing_true,
            sc.counts.passing_true,
            match a.excluded.iter().find(|(p, _)| *p == row.id) {
                Some((_, Exclusion::SameAs { id })) => format!("same as {id}"),
                _ => row.status.clone(),
            },
            row.description
        );
        if !row.same_runs.is_empty() {
            let _ = writeln!(
                s,
                "{:>83}  ↳ and {} more true in the same runs: {}",
                "",
                row.same_runs.len(),
                row.same_runs
                    .iter()
                    .take(5)
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if (row.status == "candidate" || row.status == "unsafe")
            && let Some(p) = a.catalog.get(row.id)
            && !p.intervention_text.is_empty()
        {
            let _ = writeln!(s, "{:>83}  ↳ intervention: {}", "", p.intervention_text);
        }
    }
    if !r.candidates.is_empty() {
        let _ = writeln!(s, "AC-DAG (transitive reduction):");
        for (a_, b) in &r.dag_edges {
            let name = |p: &PredId| {
                if *p == r.failure { "F".to_string() } else { p.to_string() }
            };
            let _ = writeln!(s, "  {} -> {}", name(a_), name(b));
        }
    }
    s
}

#[cfg(test)]
mod tests;
