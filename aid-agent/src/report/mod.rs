//! Explaining a `debug` outcome in words (terminal and `report.txt`) and
//! as data (`report.json`): the root cause, the causal path with the
//! evidence for each link, what it cost, and what TAGT would have needed.

use std::{collections::BTreeSet, fmt::Write as _, path::Path};

use anyhow::Context as _;

use serde::Serialize;

use crate::{
    analysis::{AnalysisReport, Exclusion},
    causal::{Discovery, Reason, Round, TagtEstimate},
    debug::oracle::OracleRun,
    debug::{Diagnosis, Observed},
    predicates::PredId,
};

/// One link of the causal path with its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Link {
    pub id: PredId,
    pub predicate: String,
    pub intervention: String,
    /// Why it was confirmed, in words.
    pub evidence: String,
    /// Predicates that no longer held while it was intervened on.
    pub effects_gone: Vec<String>,
}

#[derive(Serialize)]
pub struct DebugReport<'a> {
    pub observed: &'a Observed,
    pub root_cause: Option<&'a str>,
    pub path: Vec<Link>,
    pub failure: String,
    pub interventions: Option<u32>,
    pub runs: Option<u64>,
    pub tagt: Option<&'a TagtEstimate>,
    pub not_tested: Vec<String>,
    pub analysis: AnalysisReport,
    pub discovery: Option<&'a Discovery>,
    pub oracle_runs: &'a [OracleRun],
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

pub fn build(outcome: &Diagnosis) -> DebugReport<'_> {
    let a = &outcome.analysis;
    let desc =
        |p: PredId| a.catalog.get(p).map_or_else(|| p.to_string(), |x| x.description.clone());
    let mut path = Vec::new();
    if let Some(d) = &outcome.discovery {
        let per_round = round_runs(&d.rounds, &outcome.oracle_runs);
        let candidates: BTreeSet<PredId> = a.candidates.iter().copied().collect();
        for &p in &d.path {
            let decision = d.rounds.iter().flat_map(|r| r.confirmed.iter()).find(|c| c.pred == p);
            let (evidence, round) = match decision.map(|c| &c.reason) {
                Some(Reason::StoppedFailure { round }) => {
                    let r = &d.rounds[*round];
                    let discarded = match r.invalid_runs {
                        0 => String::new(),
                        n => format!(
                            " ({n} more not counted: the intervention could not be applied)"
                        ),
                    };
                    (
                        format!(
                            "intervening on it alone stopped the failure: round {} passed all {} runs{discarded}",
                            round + 1,
                            r.runs
                        ),
                        Some(*round),
                    )
                }
                Some(Reason::Elimination { round }) => (
                    format!(
                        "round {} (a group containing it) stopped the failure, and every other member was ruled out",
                        round + 1
                    ),
                    Some(*round),
                ),
                Some(other) => (format!("{other:?}"), None),
                None => ("confirmed".into(), None),
            };
            // Candidates that held in no valid run of that round, besides
            // the intervened ones: its effects.
            let effects_gone = round
                .and_then(|i| per_round.get(i).map(|runs| (i, *runs)))
                .map(|(i, runs)| {
                    let valid: Vec<&OracleRun> = runs.iter().filter(|r| r.valid).collect();
                    candidates
                        .iter()
                        .filter(|c| !d.rounds[i].group.contains(c))
                        .filter(|c| !valid.is_empty() && valid.iter().all(|r| !r.held.contains(c)))
                        .map(|&c| desc(c))
                        .collect()
                })
                .unwrap_or_default();
            let intervention =
                a.catalog.get(p).map(|x| x.intervention_text.clone()).unwrap_or_default();
            path.push(Link { id: p, predicate: desc(p), intervention, evidence, effects_gone });
        }
    }
    let not_tested = a
        .excluded
        .iter()
        .filter_map(|(p, why)| match why {
            Exclusion::Unsafe => Some(format!("{} (needs a return-value intervention: declare the function --safe if forcing it is harmless)", desc(*p))),
            Exclusion::NoIntervention => Some(format!("{} (no intervention can force it)", desc(*p))),
            Exclusion::OutOfReach => Some(format!("{} (its intervention needs another thread or a hold: not possible on a live service's units; reproduce with `aid-agent debug -- CMD`)", desc(*p))),
            Exclusion::SameAs { .. } => None,
        })
        .collect();
    let root_cause = outcome
        .discovery
        .as_ref()
        .and_then(|d| d.root_cause)
        .and_then(|p| a.catalog.get(p).map(|x| x.description.as_str()));
    let analysis = a.report(0);
    let failure = format!(
        "the run fails ({} of {} analysed runs)",
        analysis.failing_runs,
        analysis.failing_runs + analysis.passing_runs
    );
    DebugReport {
        observed: &outcome.observed,
        root_cause,
        path,
        failure,
        interventions: outcome.discovery.as_ref().map(|d| d.interventions),
        runs: outcome.discovery.as_ref().map(|d| d.runs),
        tagt: outcome.tagt.as_ref(),
        not_tested,
        analysis,
        discovery: outcome.discovery.as_ref(),
        oracle_runs: &outcome.oracle_runs,
    }
}

/// The report in words.
pub fn render(r: &DebugReport<'_>) -> String {
    let mut s = String::new();
    let o = r.observed;
    let _ = writeln!(
        s,
        "Observed {} runs: {} failing, {} passing{}.",
        o.runs,
        o.failing,
        o.passing,
        match o.amplified {
            Some((sites, us)) => format!(
                " (failures amplified with noise: {sites} points per run, holds up to {us} µs)"
            ),
            None => String::new(),
        }
    );
    let _ = writeln!(
        s,
        "Statistical debugging: {} predicates, {} fully discriminative, {} intervenable.",
        r.analysis.predicates,
        r.analysis.fully_discriminative,
        r.analysis.candidates.len()
    );
    match (r.root_cause, r.discovery) {
        (Some(root), Some(_)) => {
            let _ = writeln!(s, "\nRoot cause: {root}\n\nCausal path:");
            for (i, link) in r.path.iter().enumerate() {
                let _ = writeln!(s, "  {}. {}", i + 1, link.predicate);
                let _ = writeln!(s, "     evidence: {}", link.evidence);
                let _ = writeln!(s, "     intervention: {}", link.intervention);
                if !link.effects_gone.is_empty() {
                    let _ = writeln!(
                        s,
                        "     with it, these no longer happened: {}",
                        link.effects_gone.join("; ")
                    );
                }
            }
            let _ = writeln!(s, "  {}. {}", r.path.len() + 1, r.failure);
        }
        (None, Some(d)) => {
            let _ = writeln!(
                s,
                "\nNo cause was confirmed: no intervention on the candidates stopped the failure."
            );
            if !d.unresolved.is_empty() {
                let _ = writeln!(
                    s,
                    "Unresolved: {}",
                    d.unresolved.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                );
            }
        }
        (_, None) => {
            let _ = writeln!(
                s,
                "\nNo predicate both separates every failing run from every passing one and can be intervened on, so no cause could be tested. The ranking above (aid-agent analyze SESSION) is the statistical evidence."
            );
        }
    }
    if let (Some(n), Some(runs)) = (r.interventions, r.runs) {
        let _ = write!(s, "\nIt took {n} interventions ({runs} runs).");
        if let Some(t) = r.tagt {
            let _ = write!(
                s,
                " TAGT on the same session would need about {:.1} (mean of {} replays against the causal path found, worst {}).",
                t.mean_interventions, t.seeds, t.max_interventions
            );
        }
        let _ = writeln!(s);
    }
    if !r.not_tested.is_empty() {
        let _ = writeln!(s, "\nAlso in every failing run, but not tested:");
        for t in &r.not_tested {
            let _ = writeln!(s, "  - {t}");
        }
    }
    s
}

/// Writes `report.txt` (the words, `text`), `report.json` and `dag.dot`
/// (the AC-DAG, causal path highlighted) into the session directory.
pub fn save(
    dir: &Path,
    text: &str,
    report: &DebugReport<'_>,
    diagnosis: &Diagnosis,
) -> anyhow::Result<()> {
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    write("report.txt", text.as_bytes())?;
    write("report.json", serde_json::to_string_pretty(report)?.as_bytes())?;
    let highlight =
        diagnosis.discovery.as_ref().map(|d| d.path.iter().copied().collect()).unwrap_or_default();
    write("dag.dot", diagnosis.analysis.dot(&highlight).as_bytes())?;
    Ok(())
}
