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

use std::{collections::BTreeSet, path::Path};

use anyhow::Context as _;
use serde::Serialize;

use super::Diagnosis;
use crate::{
    analysis::{Analysis, Exclusion},
    causal::{Discovery, Reason},
    explain::{
        AccessSpec, Substrate,
        access::{Access, ObjId},
        compare::{self, Inputs, Options as CompareOptions, Target, minimize::Offline},
        mine::{
            self, Dataset, Options as MineOptions,
            predicates::{FORMAT, MinedPredicate, PatternEvent, PatternFile, VERSION},
        },
        objects::Globals,
    },
    intervene::SafeList,
    model::{FuncId, Session},
    predicates::{Kind, PredId},
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
    /// How its threads meet on an object (None: no two of its threads
    /// touch one object).
    pub shape: Option<Shape>,
    /// The predicates that state how its calls meet, with what the
    /// rounds did with each, best decided first.
    pub tested: Vec<TestedAs>,
    /// "run" or "unit", for the words.
    #[serde(skip)]
    pub noun: &'static str,
}

/// How the threads of a mined pattern meet on an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Another thread's accesses come between two of one thread's.
    Between,
    /// An atomicity violation: another thread writes an object between
    /// one thread's read of it and its write (R … remote W … W), as the
    /// declared access types say (without them every call reads at its
    /// entry and writes at its exit, and any `Between` would look so).
    Atomicity,
    /// One thread's accesses come before another thread's.
    Before,
}

/// A predicate of the session about the calls of the top pattern, and what
/// became of it (issue 23: what is shown beside the causal path is tested
/// or says why it was not).
#[derive(Clone, Debug, Serialize)]
pub struct TestedAs {
    pub pred: PredId,
    pub description: String,
    pub fate: Fate,
}

/// What became of a predicate: its rounds' verdict, or why none tested it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "fate")]
pub enum Fate {
    /// Confirmed, the first link of the path.
    RootCause,
    /// Confirmed, a later link (or a timing in front of the root cause).
    OnPath,
    /// Ruled out by a round.
    Pruned { reason: Reason },
    /// Every round that could test it was confounded.
    SetAside,
    /// Contradictory evidence left it undecided.
    Unresolved,
    /// A candidate that no round decided (no round started, or the session
    /// ended first).
    NotReached,
    /// Fully discriminative, but not a node of the AC-DAG.
    Excluded { why: Exclusion },
    /// It held in the same runs as a predicate that stands for it.
    SameRunsAs { id: PredId },
    /// It does not separate the failing runs from the passing ones.
    NotSeparating { failing_true: u32, failing: u32, passing_true: u32, passing: u32 },
}

impl Fate {
    /// A round decided it (or found its evidence contradictory).
    pub fn tested(&self) -> bool {
        matches!(self, Fate::RootCause | Fate::OnPath | Fate::Pruned { .. } | Fate::Unresolved)
    }

    /// Decided ones first: what the rounds said, then why none could.
    fn rank(&self) -> u8 {
        match self {
            Fate::RootCause => 0,
            Fate::OnPath => 1,
            Fate::Pruned { .. } => 2,
            Fate::SetAside => 3,
            Fate::Unresolved => 4,
            Fate::NotReached => 5,
            Fate::Excluded { .. } => 6,
            Fate::SameRunsAs { .. } => 7,
            Fate::NotSeparating { .. } => 8,
        }
    }
}

/// At most this many predicates are kept per pattern in `beside.json`.
const TESTED_KEPT: usize = 20;

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
    /// How its threads meet on an object, read from the session's own
    /// access traces as for the top pattern ([`meetings`]); None when no
    /// two of them touch one object, or when an event of the pattern is
    /// in none of the session's traces.
    pub shape: Option<Shape>,
    /// The session's predicates that state that meeting, with what became
    /// of each (as the top pattern's).
    pub tested: Vec<TestedAs>,
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

/// The parts beside the causal path, on the observation runs of the
/// diagnosis's session (complete, made without interventions), the top
/// pattern with what the diagnosis did with the predicates on its calls.
pub fn beside(
    diagnosis: &Diagnosis,
    program: &Path,
    safe: &SafeList,
    patterns: Option<(&Path, &PatternFile)>,
) -> Beside {
    let session = &diagnosis.session;
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
        b.pattern = top_pattern(&substrate, &spec, typed, diagnosis);
    }
    match chain(session, globals.as_ref(), &spec, safe) {
        Ok(c) => b.chain = c,
        Err(e) => b.notes.push(format!("no comparison chain: {e:#}")),
    }
    if let Some((path, file)) = patterns {
        b.patterns_file = Some(path.display().to_string());
        match pattern_truth(diagnosis, globals.as_ref(), file) {
            Ok(t) => b.pattern_predicates = t,
            Err(e) => b.notes.push(format!("pattern predicates not evaluated: {e:#}")),
        }
    }
    b
}

/// The top group's first pattern; its dependences only when the access
/// types were declared (a call typed read-write shows a write at its exit
/// whether or not it wrote, so dependence kinds mean little without); the
/// predicates on its calls with what `diagnosis` did with each.
fn top_pattern(
    substrate: &Substrate,
    spec: &AccessSpec,
    typed: bool,
    diagnosis: &Diagnosis,
) -> Option<TopPattern> {
    let failing_total = substrate.runs.iter().filter(|r| r.failed).count();
    let passing_total = substrate.runs.len() - failing_total;
    if failing_total == 0 {
        return None;
    }
    let data = Dataset::from_substrate(substrate, spec);
    let mined = mine::mine(&data, &MineOptions::default());
    let group = mined.groups.first()?;
    let found = group.patterns.first()?;
    let (shape, pairs) = meetings(&data, &found.macros, typed);
    let tested = shape.map_or_else(Vec::new, |shape| {
        tested_as(shape, &pairs, &diagnosis.analysis, diagnosis.discovery.as_ref())
    });
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
        shape,
        tested,
        noun: if diagnosis.observed.noun == "unit" { "unit" } else { "run" },
    })
}

/// How the threads of a pattern (its macros, each on one thread) meet on
/// an object, and the pairs of their functions (each access's function
/// and its traced caller) that do: another thread's
/// macro between two macros of one thread ([`Shape::Between`]) where one
/// exists, else one thread's macro before another's ([`Shape::Before`]);
/// a pair counts only when the two macros touch a common object. With
/// declared access types (`typed`), a read, another thread's write and the
/// first thread's write of one object make it [`Shape::Atomicity`].
fn meetings(
    data: &Dataset,
    macros: &[Vec<u32>],
    typed: bool,
) -> (Option<Shape>, BTreeSet<(FuncId, FuncId)>) {
    let key = |e: &u32| &data.keys[*e as usize];
    let role = |m: &Vec<u32>| m.first().map(|e| key(e).role);
    // An access made inside a traced callee is made during its caller
    // too: both calls meet the other thread's (stringbuffer-jdk1.4's
    // `length` inside `append(StringBuffer*)`, the call that erase's
    // lock section comes between).
    let funcs = |m: &Vec<u32>| {
        m.iter().flat_map(|e| [Some(key(e).func), key(e).caller]).flatten().collect::<BTreeSet<_>>()
    };
    let objects = |m: &Vec<u32>| m.iter().map(|e| key(e).object).collect::<BTreeSet<_>>();
    let share = |a: &Vec<u32>, b: &Vec<u32>| !objects(a).is_disjoint(&objects(b));
    let touches = |m: &Vec<u32>, access: Access, object: ObjId| {
        m.iter().any(|e| key(e).access == access && key(e).object == object)
    };
    let violates = |a: &Vec<u32>, b: &Vec<u32>, c: &Vec<u32>| {
        objects(a).into_iter().any(|o| {
            touches(a, Access::R, o) && touches(b, Access::W, o) && touches(c, Access::W, o)
        })
    };
    let mut between = BTreeSet::new();
    let mut atomicity = false;
    for (i, a) in macros.iter().enumerate() {
        for (k, c) in macros.iter().enumerate().skip(i + 2) {
            if role(a) != role(c) {
                continue;
            }
            for b in &macros[i + 1..k] {
                if role(b) == role(a) || !(share(a, b) || share(c, b)) {
                    continue;
                }
                atomicity |= typed && violates(a, b, c);
                for f in funcs(a).union(&funcs(c)) {
                    for g in funcs(b) {
                        between.insert(((*f).min(g), (*f).max(g)));
                    }
                }
            }
        }
    }
    if !between.is_empty() {
        let shape = if atomicity { Shape::Atomicity } else { Shape::Between };
        return (Some(shape), between);
    }
    let mut before = BTreeSet::new();
    for (i, a) in macros.iter().enumerate() {
        for b in &macros[i + 1..] {
            if role(a) != role(b) && share(a, b) {
                for f in funcs(a) {
                    for g in funcs(b) {
                        before.insert((f, g));
                    }
                }
            }
        }
    }
    if before.is_empty() { (None, before) } else { (Some(Shape::Before), before) }
}

/// The kinds that state a pattern's shape between two calls on different
/// threads: for [`Shape::Between`], one call's work meeting the other's
/// while it runs; for [`Shape::Before`], one call (or its section) before
/// the other.
fn states(shape: Shape, kind: Kind) -> bool {
    match shape {
        Shape::Between | Shape::Atomicity => matches!(
            kind,
            Kind::Overlap
                | Kind::DataRace
                | Kind::Concurrent
                | Kind::Interleaved
                | Kind::BetweenStatements
                | Kind::BeforeFirstSection
        ),
        Shape::Before => {
            matches!(kind, Kind::Order | Kind::StartsBefore | Kind::SectionOrder | Kind::Outruns)
        }
    }
}

/// The session's predicates that state a pattern's `shape` between one of
/// its function `pairs` ([`meetings`]), each with what became of it,
/// decided ones first, then in ranking order.
fn tested_as(
    shape: Shape,
    pairs: &BTreeSet<(FuncId, FuncId)>,
    a: &Analysis,
    d: Option<&Discovery>,
) -> Vec<TestedAs> {
    let about = |f: FuncId, g: FuncId| match shape {
        Shape::Between | Shape::Atomicity => pairs.contains(&(f.min(g), f.max(g))),
        Shape::Before => pairs.contains(&(f, g)),
    };
    let position = |id: PredId| a.ranking.iter().position(|&r| r == id).unwrap_or(usize::MAX);
    let mut out: Vec<(u8, usize, TestedAs)> = a
        .catalog
        .predicates
        .iter()
        .filter(|x| states(shape, x.key.kind))
        .filter(|x| x.key.other.is_some_and(|o| about(x.key.func, o.func)))
        .map(|x| {
            let fate = fate(x.id, a, d);
            (
                fate.rank(),
                position(x.id),
                TestedAs { pred: x.id, description: x.description.clone(), fate },
            )
        })
        .collect();
    out.sort_by_key(|(rank, position, t)| (*rank, *position, t.pred));
    out.into_iter().take(TESTED_KEPT).map(|(_, _, t)| t).collect()
}

/// What became of predicate `id`: the rounds' verdict where a round
/// decided it, else why no round did.
fn fate(id: PredId, a: &Analysis, d: Option<&Discovery>) -> Fate {
    if let Some(d) = d {
        if d.root_cause == Some(id) {
            return Fate::RootCause;
        }
        if d.chain().contains(&id) {
            return Fate::OnPath;
        }
        if let Some(x) = d.rounds.iter().flat_map(|r| &r.pruned).find(|x| x.pred == id) {
            return Fate::Pruned { reason: x.reason.clone() };
        }
        if d.untestable.contains(&id) {
            return Fate::SetAside;
        }
        if d.unresolved.contains(&id) {
            return Fate::Unresolved;
        }
    }
    if a.candidates.contains(&id) {
        return Fate::NotReached;
    }
    if let Some((_, why)) = a.excluded.iter().find(|(p, _)| *p == id) {
        return Fate::Excluded { why: *why };
    }
    if let Some(&(_, rep)) = a.merged.iter().find(|(p, _)| *p == id) {
        return Fate::SameRunsAs { id: rep };
    }
    let c = a.scores.get(id.0 as usize).map(|s| s.counts).unwrap_or_default();
    Fate::NotSeparating {
        failing_true: c.failing_true,
        failing: a.totals.failing,
        passing_true: c.passing_true,
        passing: a.totals.passing,
    }
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
    diagnosis: &Diagnosis,
    globals: Option<&Globals>,
    file: &PatternFile,
) -> anyhow::Result<Vec<PatternTruth>> {
    let spec = AccessSpec::new(&file.reads, &file.writes)?;
    let substrate = Substrate::build(&diagnosis.session, globals, &spec, &[]);
    let totals = Totals {
        failing: substrate.runs.iter().filter(|r| r.failed).count() as u32,
        passing: substrate.runs.iter().filter(|r| !r.failed).count() as u32,
    };
    let data = Dataset::from_substrate(&substrate, &spec);
    let named: Vec<PatternEvent> =
        (0..data.keys.len() as u32).map(|e| PatternEvent::of(&data, e)).collect();
    let typed = !file.reads.is_empty() || !file.writes.is_empty();
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
            let (shape, tested) = match linked(&data, &named, p, typed) {
                Some((shape, pairs)) => (
                    Some(shape),
                    tested_as(shape, &pairs, &diagnosis.analysis, diagnosis.discovery.as_ref()),
                ),
                None => (None, Vec::new()),
            };
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
                shape,
                tested,
            }
        })
        .collect())
}

/// How a loaded pattern's threads meet, and the pairs of functions that
/// do ([`meetings`]), with its events found among `data`'s by their
/// names (`named`: `data`'s events by id, [`PatternEvent::of`]); None
/// when one of them is in no trace of these runs or no two of its
/// threads touch one object.
fn linked(
    data: &Dataset,
    named: &[PatternEvent],
    p: &MinedPredicate,
    typed: bool,
) -> Option<(Shape, BTreeSet<(FuncId, FuncId)>)> {
    let id_of = |e: &PatternEvent| named.iter().position(|n| n == e).map(|i| i as u32);
    let ids: Vec<u32> = p.events.iter().map(id_of).collect::<Option<_>>()?;
    let mut macros = Vec::with_capacity(p.macro_lengths.len());
    let mut at = 0;
    for &n in &p.macro_lengths {
        macros.push(ids.get(at..at + n)?.to_vec());
        at += n;
    }
    let (shape, pairs) = meetings(data, &macros, typed);
    Some((shape?, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::mine::EventKey;

    /// Events (role, func, access, object) as a dataset, and the macros
    /// of a pattern over them: each macro a list of event ids.
    fn dataset(events: &[(u32, FuncId, Access, u32)]) -> Dataset {
        Dataset {
            keys: events
                .iter()
                .map(|&(role, func, access, object)| EventKey {
                    role,
                    func,
                    caller: None,
                    access,
                    object,
                })
                .collect(),
            ..Dataset::default()
        }
    }

    /// Another thread between two of one thread's accesses to a common
    /// object: the pairs are unordered, and only the between-thread's
    /// functions pair with the surrounding thread's.
    #[test]
    fn a_thread_between_two_of_another_s_accesses() {
        use Access::{R, W};
        // 0: T0 f1 reads o1; 1: T1 f2 writes o1; 2: T0 f3 writes o1;
        // 3: T1 f4 writes o9 (no common object).
        let d = dataset(&[(0, 1, R, 1), (1, 2, W, 1), (0, 3, W, 1), (1, 4, W, 9)]);
        let (shape, pairs) = meetings(&d, &[vec![0], vec![1], vec![2]], false);
        assert_eq!(shape, Some(Shape::Between));
        assert_eq!(pairs, BTreeSet::from([(1, 2), (2, 3)]));
        // Typed, that is a read, a remote write and a write: an atomicity
        // violation, on the same pairs.
        let (shape, typed) = meetings(&d, &[vec![0], vec![1], vec![2]], true);
        assert_eq!((shape, typed), (Some(Shape::Atomicity), pairs));
        // Not when the outer thread writes first and reads after.
        let d2 = dataset(&[(0, 1, W, 1), (1, 2, W, 1), (0, 3, R, 1)]);
        let (shape, _) = meetings(&d2, &[vec![0], vec![1], vec![2]], true);
        assert_eq!(shape, Some(Shape::Between));
        // Nor when the remote thread only reads.
        let d3 = dataset(&[(0, 1, R, 1), (1, 2, R, 1), (0, 3, W, 1)]);
        let (shape, _) = meetings(&d3, &[vec![0], vec![1], vec![2]], true);
        assert_eq!(shape, Some(Shape::Between));
        // The middle thread touching none of the objects: no meeting
        // between, and none before either.
        let (shape, pairs) = meetings(&d, &[vec![0], vec![3], vec![2]], true);
        assert_eq!((shape, pairs.len()), (None, 0));
    }

    /// A loaded pattern's events are found among the session's by their
    /// names and cut into macros by their lengths; an event no trace has,
    /// or lengths past its events, leave it unlinked.
    #[test]
    fn a_loaded_pattern_is_linked_by_its_event_names() {
        use Access::{R, W};
        let mut d = dataset(&[(0, 1, R, 0), (1, 2, W, 0), (0, 3, W, 0)]);
        d.role_names = vec!["t0".into(), "t1".into()];
        d.func_names = vec!["f0".into(), "load".into(), "store".into(), "save".into()];
        d.object_names = vec!["c".into()];
        let named: Vec<PatternEvent> =
            (0..d.keys.len() as u32).map(|i| PatternEvent::of(&d, i)).collect();
        let event = |i: u32| named[i as usize].clone();
        let p = MinedPredicate {
            id: "mine:1.1".into(),
            description: "pattern occurs".into(),
            rel_supp: 1.0,
            events: vec![event(0), event(1), event(2)],
            macro_lengths: vec![1, 1, 1],
            deps: Vec::new(),
            failing_runs: Vec::new(),
            passing_runs: Vec::new(),
        };
        let atomicity = Some((Shape::Atomicity, BTreeSet::from([(1, 2), (2, 3)])));
        assert_eq!(linked(&d, &named, &p, true), atomicity);
        let untyped = Some((Shape::Between, BTreeSet::from([(1, 2), (2, 3)])));
        assert_eq!(linked(&d, &named, &p, false), untyped);
        let mut absent = p.clone();
        absent.events[1].function = "other".into();
        assert_eq!(linked(&d, &named, &absent, true), None);
        let mut long = p.clone();
        long.macro_lengths = vec![1, 1, 2];
        assert_eq!(linked(&d, &named, &long, true), None);
    }

    /// One thread's accesses before another's: ordered pairs, earlier
    /// thread first; the same thread twice is no meeting.
    #[test]
    fn one_thread_before_another() {
        use Access::{R, W};
        let d = dataset(&[(0, 5, R, 1), (1, 6, W, 1), (0, 7, W, 1)]);
        let (shape, pairs) = meetings(&d, &[vec![1], vec![0]], false);
        assert_eq!(shape, Some(Shape::Before));
        assert_eq!(pairs, BTreeSet::from([(6, 5)]));
        let (shape, _) = meetings(&d, &[vec![0], vec![2]], false);
        assert_eq!(shape, None);
        // A macro of two calls pairs each of them.
        let (shape, pairs) = meetings(&d, &[vec![0, 2], vec![1]], false);
        assert_eq!(shape, Some(Shape::Before));
        assert_eq!(pairs, BTreeSet::from([(5, 6), (7, 6)]));
        // An access inside a traced callee pairs its caller as well.
        let mut d = d;
        d.keys[1].caller = Some(8);
        let (_, pairs) = meetings(&d, &[vec![0], vec![1]], false);
        assert_eq!(pairs, BTreeSet::from([(5, 6), (5, 8)]));
    }

    /// Each shape is stated by the kinds that say it, and by no other.
    #[test]
    fn the_kinds_that_state_each_shape() {
        assert!(states(Shape::Between, Kind::Overlap));
        assert!(states(Shape::Between, Kind::Interleaved));
        assert!(states(Shape::Atomicity, Kind::DataRace));
        assert!(!states(Shape::Atomicity, Kind::Order));
        assert!(!states(Shape::Between, Kind::Order));
        assert!(states(Shape::Before, Kind::Order));
        assert!(states(Shape::Before, Kind::SectionOrder));
        assert!(!states(Shape::Before, Kind::Overlap));
        assert!(!states(Shape::Before, Kind::TooSlow));
        assert!(!states(Shape::Between, Kind::RetDiffers));
    }
}
