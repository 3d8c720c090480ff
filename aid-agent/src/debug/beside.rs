//! What the other explainers add beside `debug`'s causal path, computed
//! on the runs `debug` observed (no extra runs): the top mined pattern
//! (seed 002), the comparison chain of one failing run with the passing
//! run most like it (seed 001, from the dual slice, untested), and the
//! truth of "pattern π occurs" predicates loaded with `--patterns`
//! (written by `mine --emit-predicates`), scored as AID scores its own
//! predicates.
//!
//! Each part is left out where it has nothing to say (no pattern
//! explains, the runs do not differ in a traced call); none of them can
//! fail `debug`: a part that cannot be computed says why in one line.

use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use crate::{
    explain::{
        AccessSpec, Substrate,
        compare::{self, Inputs, Options as CompareOptions, Target, minimize::Offline},
        mine::{
            self, Dataset, Options as MineOptions,
            predicates::{FORMAT, PatternFile, VERSION},
        },
        objects::Globals,
    },
    intervene::SafeList,
    model::Session,
    predicates::PredId,
    stats::{Counts, Totals, score},
};

/// Mining is skipped above this many access events over all runs (its
/// post-processing grows fast with trace length).
const MINE_EVENT_CAP: usize = 200_000;

/// Nothing is computed beside the path above this many traced calls over
/// the analysed runs: the access substrate and the dual slice hold every
/// call several times over (pool-table-race, ~190,000 calls per run, grew
/// the agent past 10 GB here).
const CALL_CAP: usize = 1_000_000;

/// The top group's first pattern.
#[derive(Clone, Debug, Serialize)]
pub struct TopPattern {
    pub text: String,
    /// Its dependence edges, in words (only with declared access types).
    pub deps: Vec<String>,
    pub rel_supp: f64,
    pub failing_runs: usize,
    pub failing_total: usize,
    pub passing_runs: usize,
    pub passing_total: usize,
}

/// One failing run against the passing run most like it.
#[derive(Clone, Debug, Serialize)]
pub struct Chain {
    pub fail: u32,
    pub pass: u32,
    /// Root cause first, the failure last.
    pub steps: Vec<String>,
}

/// A loaded "pattern occurs" predicate on the observed runs.
#[derive(Clone, Debug, Serialize)]
pub struct PatternTruth {
    pub id: String,
    pub description: String,
    pub failing_true: u32,
    pub failing: u32,
    pub passing_true: u32,
    pub passing: u32,
    pub precision: f64,
    pub recall: f64,
    pub importance: f64,
    pub fully_discriminative: bool,
}

/// Everything beside the causal path; `notes` say why a part is missing
/// when it could not be computed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Beside {
    pub pattern: Option<TopPattern>,
    pub chain: Option<Chain>,
    /// The file the pattern predicates came from, and their truth.
    pub patterns_file: Option<String>,
    pub pattern_predicates: Vec<PatternTruth>,
    pub notes: Vec<String>,
}

/// Reads a `mine --emit-predicates` file.
pub fn load_patterns(path: &Path) -> anyhow::Result<PatternFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --patterns {}", path.display()))?;
    let file: PatternFile = serde_json::from_str(&text).with_context(|| {
        format!("{} is not a pattern file written by `mine --emit-predicates`", path.display())
    })?;
    anyhow::ensure!(
        file.format == FORMAT && file.version <= VERSION,
        "{} is not a pattern file this aid reads (format `{}`, version {}): write it again with `mine --emit-predicates`",
        path.display(),
        file.format,
        file.version
    );
    Ok(file)
}

/// The parts beside the causal path, on the observation runs of `session`
/// (complete, made without interventions).
pub fn beside(
    session: &Session,
    program: &Path,
    safe: &SafeList,
    patterns: Option<(&Path, &PatternFile)>,
) -> Beside {
    let mut b = Beside::default();
    let calls: usize = session.runs.iter().map(|r| r.calls.len()).sum();
    if calls > CALL_CAP {
        b.notes.push(format!(
            "nothing beside the causal path: the analysed runs have {calls} traced calls, more than the {CALL_CAP} mining and the dual slice handle in memory here; run `aid-agent mine` or `aid-agent compare` on the session with fewer runs"
        ));
        return b;
    }
    let globals = Globals::load(program);
    // The pattern file's access typing, where one is given: its patterns
    // were mined with it, and it says which calls only read or write.
    let declared = patterns.map(|(_, f)| (f.reads.clone(), f.writes.clone()));
    let spec = match &declared {
        Some((r, w)) => AccessSpec::new(r, w).unwrap_or_default(),
        None => AccessSpec::default(),
    };
    let typed = declared.is_some_and(|(r, w)| !r.is_empty() || !w.is_empty());
    let substrate = Substrate::build(session, globals.as_ref(), &spec, &[]);
    let events: usize = substrate.runs.iter().map(|r| r.events.len()).sum();
    if events > MINE_EVENT_CAP {
        b.notes.push(format!(
            "no mined pattern: {events} access events are more than mining handles quickly; run `aid-agent mine` on the session"
        ));
    } else {
        b.pattern = top_pattern(&substrate, &spec, typed);
    }
    match chain(session, globals.as_ref(), &spec, safe) {
        Ok(c) => b.chain = c,
        Err(e) => b.notes.push(format!("no comparison chain: {e:#}")),
    }
    if let Some((path, file)) = patterns {
        b.patterns_file = Some(path.display().to_string());
        match pattern_truth(session, globals.as_ref(), file) {
            Ok(t) => b.pattern_predicates = t,
            Err(e) => b.notes.push(format!("pattern predicates not evaluated: {e:#}")),
        }
    }
    b
}

/// The top group's first pattern; its dependences only when the access
/// types were declared (a call typed read-write shows a write at its exit
/// whether or not it wrote, so dependence kinds mean little without).
fn top_pattern(substrate: &Substrate, spec: &AccessSpec, typed: bool) -> Option<TopPattern> {
    let failing_total = substrate.runs.iter().filter(|r| r.failed).count();
    let passing_total = substrate.runs.len() - failing_total;
    if failing_total == 0 {
        return None;
    }
    let data = Dataset::from_substrate(substrate, spec);
    let mined = mine::mine(&data, &MineOptions::default());
    let group = mined.groups.first()?;
    let found = group.patterns.first()?;
    Some(TopPattern {
        text: data.pattern_text(found),
        deps: if typed {
            group.deps.iter().map(|d| data.dep_text(d)).collect()
        } else {
            Vec::new()
        },
        rel_supp: group.rel_supp,
        failing_runs: found.failing.len(),
        failing_total,
        passing_runs: found.passing.len(),
        passing_total,
    })
}

/// The dual slice's chain (no re-runs) from the first failing observation
/// run to the passing run most like it; None when no traced call differs.
fn chain(
    session: &Session,
    globals: Option<&Globals>,
    spec: &AccessSpec,
    safe: &SafeList,
) -> anyhow::Result<Option<Chain>> {
    let usable = |failed: bool| {
        session
            .runs
            .iter()
            .find(|r| r.complete && r.interventions.is_empty() && r.failed() == failed)
    };
    let (Some(fail), Some(_)) = (usable(true), usable(false)) else { return Ok(None) };
    let pass = compare::pick_pass(session, fail.id, globals, spec)?;
    let inputs = Inputs {
        session,
        globals,
        spec,
        fail: fail.id,
        pass: Some(pass),
        target: Target::Exit,
        watched: None,
    };
    let opts = CompareOptions { repeat: 0, theta: 0.8, pin: false, safe: safe.clone() };
    let c = match compare::compare(&inputs, &opts, Offline) {
        Ok(c) => c,
        // Nothing differs in a traced call: nothing to add.
        Err(e) if e.to_string().contains("no traced call differs") => return Ok(None),
        Err(e) => return Err(e),
    };
    if c.chain.len() < 2 {
        return Ok(None);
    }
    Ok(Some(Chain { fail: fail.id, pass, steps: c.chain.iter().map(|s| s.text.clone()).collect() }))
}

/// "Pattern π occurs" on every observation run, with AID's scores.
fn pattern_truth(
    session: &Session,
    globals: Option<&Globals>,
    file: &PatternFile,
) -> anyhow::Result<Vec<PatternTruth>> {
    let spec = AccessSpec::new(&file.reads, &file.writes)?;
    let substrate = Substrate::build(session, globals, &spec, &[]);
    let totals = Totals {
        failing: substrate.runs.iter().filter(|r| r.failed).count() as u32,
        passing: substrate.runs.iter().filter(|r| !r.failed).count() as u32,
    };
    Ok(file
        .predicates
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut c = Counts {
                failing_observed: totals.failing,
                passing_observed: totals.passing,
                ..Counts::default()
            };
            for run in &substrate.runs {
                if p.holds(&substrate, run) {
                    if run.failed {
                        c.failing_true += 1;
                    } else {
                        c.passing_true += 1;
                    }
                }
            }
            let s = score(PredId(i as u32), c, totals);
            PatternTruth {
                id: p.id.clone(),
                description: p.description.clone(),
                failing_true: c.failing_true,
                failing: totals.failing,
                passing_true: c.passing_true,
                passing: totals.passing,
                precision: s.precision,
                recall: s.recall,
                importance: s.importance,
                fully_discriminative: s.fully_discriminative,
            }
        })
        .collect())
}
