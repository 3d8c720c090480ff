//! Explaining a `debug` outcome: the root cause, the causal path with the
//! evidence for each link, what it cost and what TAGT would have needed —
//! as data ([`DebugReport`], `report.json`, documented in
//! docs/report-format.md), in words for the terminal and `report.txt`
//! ([`text`]), as a graph (`dag.dot`, [`dot`]), as one self-contained web
//! page (`report.html`, [`html`]), and as a trace for Perfetto
//! ([`trace`], `aid-agent export`).

pub mod beside;
pub mod dot;
pub mod facts;
pub mod html;
pub mod text;
pub mod trace;

use std::{collections::BTreeSet, path::Path};

use anyhow::Context as _;
use serde::Serialize;

use self::facts::{Facts, PredicateView};
pub use self::text::{Layout, render};
use crate::{
    analysis::{Analysis, AnalysisReport, Exclusion},
    causal::{Discovery, Reason, Round, SessionConfidence, TagtEstimate, Unused},
    debug::{
        Diagnosis, Observed,
        oracle::{NotStarted, OracleRun},
    },
    model::{Intervention, Label},
    predicates::PredId,
    stats::Scores,
    util::human::count,
};

/// `report.json`'s `format` and `version`.
pub const FORMAT: &str = "aid-report";
pub const VERSION: u32 = 1;

/// One link of the causal path with its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Link {
    pub id: PredId,
    /// The catalog's description.
    pub predicate: String,
    /// The predicate in structured form, with the values runs showed.
    pub structured: PredicateView,
    /// The intervention that forced it to its passing behaviour, in words
    /// and as data.
    pub intervention: String,
    pub intervention_detail: Option<Intervention>,
    /// Why it was confirmed, in words.
    pub evidence: String,
    /// The round (index into `discovery.rounds`) that confirmed it.
    pub round: Option<usize>,
    /// Predicates that no longer held while it was intervened on, in words
    /// and structured.
    pub effects_gone: Vec<String>,
    pub effects: Vec<PredicateView>,
    pub scores: Option<Scores>,
}

/// A fully-discriminative predicate no intervention was tried on.
#[derive(Clone, Debug, Serialize)]
pub struct Untested {
    pub predicate: PredicateView,
    /// `unsafe`, `no_intervention`, `not_live` or `contradicted`.
    pub why: &'static str,
    /// What to do about it, in words.
    pub hint: String,
}

#[derive(Serialize)]
pub struct DebugReport<'a> {
    pub format: &'static str,
    pub version: u32,
    /// What one run is called: `run`, or `unit` for a live service.
    pub noun: &'static str,
    pub observed: &'a Observed,
    /// The root cause's description, and its id.
    pub root_cause: Option<&'a str>,
    pub root_cause_id: Option<PredId>,
    /// Confirmed links in front of the root cause that only say when its
    /// threads ran: the timing it needs (`analysis::triggers`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Link>,
    pub path: Vec<Link>,
    /// The failure in words, and why the failing runs were labelled so
    /// (reason, runs).
    pub failure: String,
    pub failure_reasons: Vec<(String, u32)>,
    pub interventions: Option<u32>,
    pub runs: Option<u64>,
    pub tagt: Option<&'a TagtEstimate>,
    /// Confidence that the whole path is right, as achieved.
    pub confidence: Option<SessionConfidence>,
    /// Rounds that were not used as evidence, in words.
    pub unused_rounds: Vec<String>,
    /// Predicates set aside because their rounds were confounded.
    pub untestable: Vec<String>,
    pub not_tested: Vec<String>,
    pub untested: Vec<Untested>,
    /// Predicates left undecided by contradictory evidence.
    pub unresolved: Vec<PredicateView>,
    /// Every fully-discriminative predicate, in ranking order, structured.
    pub predicates: Vec<PredicateView>,
    pub analysis: AnalysisReport,
    pub discovery: Option<&'a Discovery>,
    pub oracle_runs: &'a [OracleRun],
    /// The phase the user interrupted (Ctrl-C): `analysing`,
    /// `measuring the control` or `intervening`; absent when the session
    /// ran to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<&'static str>,
    /// Why no round was started: the control runs, and the runs a round
    /// would have needed; absent when rounds were started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_started: Option<NotStarted>,
    /// Candidates not tested, in words: every candidate when the session
    /// was interrupted before its first intervention concluded, or started
    /// none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates_untested: Vec<PredicateView>,
}

/// The oracle runs of each round (rounds use consecutive runs).
fn round_runs<'a>(rounds: &[Round], runs: &'a [OracleRun]) -> Vec<&'a [OracleRun]> {
    let mut out = Vec::new();
    let mut start = 0usize;
    for r in rounds {
        let n = (r.runs + r.invalid_runs) as usize;
        let end = (start + n).min(runs.len());
        out.push(&runs[start..end]);
        start = end;
    }
    out
}

/// Why a predicate was confirmed, in words.
fn confirmed_because(reason: &Reason, rounds: &[Round], noun: &str) -> String {
    let round = |i: usize| {
        let r = &rounds[i];
        let skipped = match r.invalid_runs {
            0 => String::new(),
            n => format!(
                " ({} more not counted: the intervention could not be applied, or it acted where the noise that provokes the failure would have and the {noun} passed)",
                count(n, noun)
            ),
        };
        (r.runs, skipped)
    };
    match *reason {
        Reason::StoppedFailure { round: i } => {
            let (n, skipped) = round(i);
            format!(
                "intervening on it alone stopped the failure: all {} of round {} passed{skipped}",
                count(n, noun),
                i + 1
            )
        }
        Reason::FailurePersisted { round: i } => {
            format!("round {}: the failure still happened with it intervened on", i + 1)
        }
        Reason::HeldWithoutFailure { round: i } => {
            format!("round {}: it held in a {noun} that did not fail", i + 1)
        }
        Reason::AbsentWithFailure { round: i } => {
            format!("round {}: a {noun} failed without it", i + 1)
        }
        Reason::WitnessHeld { witness, round: i } => {
            format!("round {}: the confirmed cause {witness} still held", i + 1)
        }
        Reason::NotOrderedWith { cause } => {
            format!("not ordered in time with the confirmed cause {cause}")
        }
        Reason::OutsideStoppedBranches { round: i } => format!(
            "round {}: the branches of the graph whose intervention stopped the failure cannot reach it",
            i + 1
        ),
        Reason::Confounded { round: i } => format!(
            "every round that could test it alone was confounded (the last: round {})",
            i + 1
        ),
    }
}

pub fn build(outcome: &Diagnosis) -> DebugReport<'_> {
    let a = &outcome.analysis;
    let noun = if outcome.observed.noun == "unit" { "unit" } else { "run" };
    let facts = Facts::new(&outcome.session, &a.catalog);
    let view = |p: PredId| facts.view(p);
    let desc = |p: PredId| description(a, p);
    let (path, triggers) = match &outcome.discovery {
        Some(d) => (
            causal_links(outcome, d, &d.path, &facts, noun),
            causal_links(outcome, d, &d.triggers, &facts, noun),
        ),
        None => (Vec::new(), Vec::new()),
    };
    let untested = untested(a, &facts);
    let not_tested =
        untested.iter().map(|u| format!("{} ({})", u.predicate.text, u.hint)).collect();
    let root_cause_id = outcome.discovery.as_ref().and_then(|d| d.root_cause);
    let root_cause = root_cause_id.and_then(|p| a.catalog.get(p).map(|x| x.description.as_str()));
    let (unused_rounds, untestable) = match &outcome.discovery {
        Some(d) => (
            d.unused_rounds().map(|r| unused_words(r, &desc, noun)).collect(),
            d.untestable.iter().map(|&p| desc(p)).collect(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    let analysis = a.report(0);
    let failure = format!(
        "the {noun} fails ({} of {} analysed {noun}s)",
        analysis.failing_runs,
        analysis.failing_runs + analysis.passing_runs
    );
    let reasons = failure_reasons(outcome);
    const LISTED: usize = 100;
    let predicates = a
        .ranking
        .iter()
        .filter(|p| a.scores.get(p.0 as usize).is_some_and(|s| s.fully_discriminative))
        .take(LISTED)
        .filter_map(|&p| view(p))
        .collect();
    let unresolved = outcome
        .discovery
        .as_ref()
        .map(|d| d.unresolved.iter().filter_map(|&p| view(p)).collect())
        .unwrap_or_default();
    let concluded = outcome.discovery.as_ref().is_some_and(|d| !d.rounds.is_empty());
    let stopped = outcome.interrupted.is_some() || outcome.not_started.is_some();
    let candidates_untested = if stopped && !concluded {
        a.candidates.iter().filter_map(|&p| view(p)).collect()
    } else {
        Vec::new()
    };
    DebugReport {
        format: FORMAT,
        version: VERSION,
        noun,
        observed: &outcome.observed,
        root_cause,
        root_cause_id,
        triggers,
        path,
        failure,
        failure_reasons: reasons,
        interventions: outcome.discovery.as_ref().map(|d| d.interventions),
        runs: outcome.discovery.as_ref().map(|d| d.runs),
        tagt: outcome.tagt.as_ref(),
        confidence: outcome.discovery.as_ref().map(|d| d.confidence),
        unused_rounds,
        untestable,
        not_tested,
        untested,
        unresolved,
        predicates,
        analysis,
        discovery: outcome.discovery.as_ref(),
        oracle_runs: &outcome.oracle_runs,
        interrupted: outcome.interrupted,
        not_started: outcome.not_started,
        candidates_untested,
    }
}

/// A predicate's description in the catalog, or its id when the catalog
/// has none: the one wording of a predicate in the report's plain lists.
fn description(a: &Analysis, p: PredId) -> String {
    a.catalog.get(p).map_or_else(|| p.to_string(), |x| x.description.clone())
}

/// The links of the confirmed causal path, each with the evidence that
/// confirmed it and the candidates its intervention made disappear (its
/// effects). Apart from `build` because it is the one part of the report
/// that reads the rounds and the oracle's runs.
fn causal_links(
    outcome: &Diagnosis,
    d: &Discovery,
    links: &[PredId],
    facts: &Facts<'_>,
    noun: &str,
) -> Vec<Link> {
    let a = &outcome.analysis;
    let view = |p: PredId| facts.view(p);
    let desc = |p: PredId| description(a, p);
    let mut path = Vec::new();
    let per_round = round_runs(&d.rounds, &outcome.oracle_runs);
    let candidates: BTreeSet<PredId> = a.candidates.iter().copied().collect();
    for &p in links {
        let decision = d.rounds.iter().flat_map(|r| r.confirmed.iter()).find(|c| c.pred == p);
        let (evidence, round) = match decision.map(|c| &c.reason) {
            Some(r) => (
                confirmed_because(r, &d.rounds, noun),
                match *r {
                    Reason::StoppedFailure { round } => Some(round),
                    _ => None,
                },
            ),
            None => ("confirmed".into(), None),
        };
        let evidence = match a.scores.get(p.0 as usize) {
            Some(s) if a.necessary.contains(&p) => format!(
                "{evidence}; it also held in {} of the {} passing {noun}s observed: necessary for the failure, not sufficient on its own: what else a failing {noun} needs is not among the predicates",
                s.counts.passing_true, a.totals.passing
            ),
            Some(s) if a.sufficient.contains(&p) => format!(
                "{evidence}; it held in {} of the {} failing {noun}s observed and in no passing one: the other {} failed another way, which no predicate separates",
                s.counts.failing_true,
                a.totals.failing,
                a.totals.failing - s.counts.failing_true
            ),
            _ => evidence,
        };
        // Candidates that held in no valid run of that round, besides
        // the intervened ones: its effects.
        let effects: Vec<PredId> = round
            .and_then(|i| per_round.get(i).map(|runs| (i, *runs)))
            .map(|(i, runs)| {
                let valid: Vec<&OracleRun> = runs.iter().filter(|r| r.valid).collect();
                candidates
                    .iter()
                    .copied()
                    .filter(|c| !d.rounds[i].group.contains(c))
                    .filter(|c| !valid.is_empty() && valid.iter().all(|r| !r.held.contains(c)))
                    .collect()
            })
            .unwrap_or_default();
        let predicate = a.catalog.get(p);
        let Some(structured) = view(p) else { continue };
        path.push(Link {
            id: p,
            predicate: desc(p),
            structured,
            intervention: predicate.map(|x| x.intervention_text.clone()).unwrap_or_default(),
            intervention_detail: predicate.and_then(|x| x.intervention.clone()),
            evidence,
            round,
            effects_gone: effects.iter().map(|&c| desc(c)).collect(),
            effects: effects.iter().filter_map(|&c| view(c)).collect(),
            scores: a.scores.get(p.0 as usize).copied(),
        });
    }
    path
}

/// Why a fully-discriminative predicate was not tested, as a tag and a
/// hint of what would make it testable; None for one excluded as the same
/// as another (its twin speaks for it).
pub(crate) fn exclusion_words(why: Exclusion) -> Option<(&'static str, String)> {
    let hint = match why {
        Exclusion::Unsafe => {
            "needs a return-value intervention: declare the function --safe if forcing it is harmless".to_owned()
        }
        Exclusion::NoIntervention => "no intervention can force it".to_owned(),
        Exclusion::OutOfReach => "its intervention needs another thread or a hold, not possible on a live service's units; reproduce with `aid-agent debug ./prog`".to_owned(),
        Exclusion::AfterOutcome => "its intervention, a delay before the unit function returns, acts after the unit's outcome is decided and cannot stop the failure".to_owned(),
        Exclusion::ValueDecided { id } => format!(
            "its intervention, a delay before the call returns, comes after the call's return value is decided, and P{} says it returned an error in every failing run: the delay cannot make the call behave as in passing runs (declare the function --safe to test its value instead)",
            id.0
        ),
        Exclusion::Contradicted { failing, passing } => format!(
            "of the runs observed apart from the analysed ones, without noise or with other noise, it held in {passing} that passed and {failing} that failed: it separates failing runs from passing ones only under the analysed runs' noise, so it was not tested"
        ),
        Exclusion::SameAs { .. } => return None,
    };
    Some((why.tag(), hint))
}

/// The fully-discriminative predicates no intervention was tried on, with
/// why and a hint of what would make them testable; predicates excluded as
/// the same as another are left out (their twin speaks for them).
fn untested(a: &Analysis, facts: &Facts<'_>) -> Vec<Untested> {
    let mut untested = Vec::new();
    for &(p, why) in &a.excluded {
        let Some((why, hint)) = exclusion_words(why) else { continue };
        if let Some(v) = facts.view(p) {
            untested.push(Untested { predicate: v, why, hint });
        }
    }
    untested
}

/// The reasons the complete failing runs gave, each with how many runs
/// gave it, most frequent first (ties by text, so the order is stable).
fn failure_reasons(outcome: &Diagnosis) -> Vec<(String, u32)> {
    let mut reasons: Vec<(String, u32)> = Vec::new();
    for r in outcome.session.runs.iter().filter(|r| r.complete && r.label == Label::Fail) {
        match reasons.iter_mut().find(|(t, _)| *t == r.outcome.reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((r.outcome.reason.clone(), 1)),
        }
    }
    reasons.sort_by_key(|(t, n)| (std::cmp::Reverse(*n), t.clone()));
    reasons
}

/// How the session's runs were made when several at once (`--jobs`, a
/// fleet): the others' load is part of their conditions. Empty for one
/// at a time.
pub(crate) fn jobs_words(ob: &Observed, noun: &str) -> String {
    if let Some(fleet) = &ob.fleet {
        let made: Vec<String> = fleet.workers.iter().map(|(w, n)| format!("{w}: {n}")).collect();
        return format!(
            "; made by a fleet's workers through {} ({} {noun}s in all), as were the interventions and their control {noun}s",
            fleet.url,
            crate::util::human::summarize(&made)
        );
    }
    if ob.jobs <= 1 {
        return String::new();
    }
    format!("; made {} at a time (interventions and their control {noun}s one at a time)", ob.jobs)
}

/// Noise injected into a run, in words.
pub(crate) fn noise_words(n: &crate::model::Noise) -> String {
    match n.action {
        crate::model::NoiseAction::Delay { us } => {
            format!("random delay of {}", crate::util::human::duration(us * 1000))
        }
        crate::model::NoiseAction::Demote { priority: crate::model::OUTLIVE, max_us } => format!(
            "held until every other thread was done (up to {})",
            crate::util::human::duration(max_us * 1000)
        ),
        crate::model::NoiseAction::Demote { priority, max_us } => format!(
            "priority change point (priority {priority}, held up to {})",
            crate::util::human::duration(max_us * 1000)
        ),
        crate::model::NoiseAction::Skip => {
            "a point of the focused noise, left off in this run".into()
        }
        crate::model::NoiseAction::OneCpu { cpu, .. } => format!(
            "on CPU {cpu} alone, its threads' priorities drawn at random every {}-{} ms",
            crate::intervene::one_cpu::SHORTEST_MS,
            crate::intervene::one_cpu::LONGEST_MS
        ),
    }
}

/// Why a round was not used as evidence, in words.
fn unused_words(r: &Round, desc: &dyn Fn(PredId) -> String, noun: &str) -> String {
    let group: Vec<String> = r.group.iter().map(|&p| desc(p)).collect();
    let what = format!("round {} (intervening on {})", r.index + 1, group.join("; "));
    match &r.unused {
        Some(Unused::Confounded { changed }) => {
            let changed: Vec<String> = changed.iter().map(|&p| desc(p)).collect();
            format!(
                "{what} was confounded and not used: it also changed {}, which come before the intervened predicates or are unordered with them, so the intervention did more than it was meant to",
                changed.join("; ")
            )
        }
        Some(Unused::NoWitness) => format!(
            "{what} was not used: in {} nothing upstream of the intervention held, so nothing shows the failure was ever under way",
            count(r.runs, noun)
        ),
        Some(Unused::TooLong { needed }) => format!(
            "{what} was not used: its {} went without the failure, but nothing upstream of the intervention could show the failure was under way in them, so only the round's length could show the failure gone, and that needs {} in a row without it, more than a round may take (the failure is that rare where rounds are made), so the predicate was left untested",
            count(r.runs, noun),
            count(*needed, noun)
        ),
        Some(Unused::Unsettled { missing }) => {
            let missing: Vec<String> = missing.iter().map(|&p| desc(p)).collect();
            format!(
                "{what} was not used: {} went missing in the {noun}s where the failure was under way, and {} were not enough to tell a changed predicate from a missed observation",
                missing.join("; "),
                count(r.runs, noun)
            )
        }
        Some(Unused::NotInstallable) => format!(
            "{what} was not run: its interventions cannot work in one run (they act at one call site in ways a single stop cannot combine, or hold threads that wait for one another's), so its predicates were tested in smaller groups (not counted as an intervention)"
        ),
        Some(Unused::NotApplied) if r.group.len() > 1 => format!(
            "{what} was not used: its interventions could not all be applied in the same {noun} ({} tries), so its predicates were tested in smaller groups",
            r.invalid_runs
        ),
        Some(Unused::NotApplied) => {
            // Runs where it took effect may have come between: the last
            // ones in a row ended the round.
            let runs = if r.invalid_streak >= r.invalid_runs {
                format!("{} in a row", count(r.invalid_runs, noun))
            } else {
                format!(
                    "{} of the round's {}, the last {} in a row",
                    r.invalid_runs,
                    count(r.runs + r.invalid_runs, noun),
                    r.invalid_streak
                )
            };
            format!(
                "{what} was not used: the intervention did not take effect in {runs} (its call site was not reached, the predicate held in spite of it, the {noun} was cut short, or it acted where the noise that provokes the failure would have and the {noun} passed), so the predicate was left untested"
            )
        }
        Some(Unused::Ineffective { failing_held }) => format!(
            "{what} was not used: the predicate still held in {} that failed, beside {} where it did not, about as often as it would with nothing intervened on, so the {noun}s without it may be those that would have passed anyway and the predicate was left untested",
            count(*failing_held, noun),
            count(r.runs, noun)
        ),
        Some(Unused::Rarer { failing }) => format!(
            "{what} was not used: the failure still came, but in only {failing} of its {}, and with nothing intervened on so few would come less than once in {} rounds; the intervention may have brought about a failure of its own (a forced value the rest of the {noun} does not match, a thread held into another schedule), so the predicate was neither confirmed nor ruled out",
            count(r.runs, noun),
            (1.0 / crate::causal::RARER_LEVEL).round()
        ),
        None => what,
    }
}

/// What [`save`] wrote.
pub struct Saved {
    /// `dag.svg`, when asked for and Graphviz' `dot` was there to draw it.
    pub svg: Option<std::path::PathBuf>,
    /// `--svg` was asked for but Graphviz is not installed.
    pub no_graphviz: bool,
}

/// Writes `report.txt` (the words, plain), `report.json`, `dag.dot` (the
/// AC-DAG, causal path highlighted and joined to the failure),
/// `report.html` (with what lies `beside` the path), and with `svg`
/// `dag.svg` (when Graphviz is installed) into the session directory.
pub fn save(
    dir: &Path,
    report: &DebugReport<'_>,
    diagnosis: &Diagnosis,
    beside: &crate::debug::beside::Beside,
    svg: bool,
) -> anyhow::Result<Saved> {
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))?;
        crate::store::hand_over(&p);
        anyhow::Ok(())
    };
    let plain = Layout { width: None, color: false, verbose: true, explain: false };
    write("report.txt", render(report, &plain).as_bytes())?;
    write("report.json", serde_json::to_string_pretty(report)?.as_bytes())?;
    let path = diagnosis.discovery.as_ref().map(Discovery::chain).unwrap_or_default();
    let graph = dot::render(&diagnosis.analysis, &path, report.noun);
    write("dag.dot", graph.as_bytes())?;
    let mut saved = Saved { svg: None, no_graphviz: false };
    if svg {
        match dot::svg(&graph)? {
            Some(image) => {
                write("dag.svg", image.as_bytes())?;
                saved.svg = Some(dir.join("dag.svg"));
            }
            None => saved.no_graphviz = true,
        }
    }
    // The intervened run the timeline shows next to a failing one: the
    // first passing run of the round that confirmed the root cause.
    let shown = report.path.first().and_then(|l| l.round).and_then(|round| {
        let runs = round_runs(&diagnosis.discovery.as_ref()?.rounds, &diagnosis.oracle_runs);
        runs.get(round)?.iter().find(|r| r.valid && !r.failed).map(|r| r.run)
    });
    let intervened = match shown {
        Some(id) => crate::store::load(dir)
            .with_context(|| format!("reading {} back for the report", dir.display()))?
            .runs
            .into_iter()
            .find(|r| r.id == id),
        None => None,
    };
    let page = html::render(report, diagnosis, intervened.as_ref(), beside);
    write("report.html", page.as_bytes())?;
    Ok(saved)
}

#[cfg(test)]
mod tests;
