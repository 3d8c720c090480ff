//! Data races, decided before the interventions: for each candidate that
//! says two calls on different threads ran at the same time on the same
//! object (an overlap, Fig. 2 row 1), targeted re-runs with hardware
//! watchpoints on that object (`record::watchpoints`) show which of the
//! two calls read it and which wrote it — what their arguments cannot
//! show. An overlap where one side writes becomes a data-race predicate;
//! one where both only read says so (`predicates::races`). Either way its
//! intervention is the overlap's: run the two calls one after the other.
//!
//! Only sources that start the program can make watched runs; the others
//! leave overlaps as they are. Nothing here can fail `debug`: an object
//! that cannot be watched is a note in `races.json` and on the terminal.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
};

use serde::Serialize;

use super::source::RunSource;
use crate::{
    analysis::Analysis,
    explain::{
        objects::{Globals, name_pointers},
        watch,
    },
    model::{Call, Run, Session, Site, identity::RoleNames},
    predicates::{PredId, RaceEvidence, RaceVerdict},
    record::{
        progress::Progress,
        watchpoints::{MAX_OBJECTS, WatchObject, WatchedRun, Watcher},
    },
};

/// Watched re-runs per batch of objects (at most [`MAX_OBJECTS`] a run).
pub const RUNS: u32 = 3;

/// Most objects watched per session: 2 batches.
const MAX_WATCHED: usize = 2 * MAX_OBJECTS;

/// The file beside the session's runs that says what was decided.
pub const FILE: &str = "races.json";

/// What became of one overlap candidate.
#[derive(Clone, Debug, Serialize)]
pub struct RaceCheck {
    pub predicate: PredId,
    /// The object the two calls shared, by its canonical name.
    pub object: Option<String>,
    pub verdict: Option<RaceVerdict>,
    pub evidence: Option<RaceEvidence>,
    /// Re-runs in which the two calls overlapped and one of them wrote.
    pub raced: u32,
    /// Why it was not decided, when it was not.
    pub note: Option<String>,
}

/// One overlap candidate: its calls, and the object they share.
struct Pending {
    id: PredId,
    a: Site,
    b: Site,
    object: String,
    evidence: RaceEvidence,
    raced: u32,
}

/// Decides the site-pair overlap candidates of `analysis` with watched
/// re-runs from `source`, rewrites them in its catalog, and writes
/// [`FILE`] into `dir`. Returns what became of each.
pub fn decide(
    analysis: &mut Analysis,
    session: &Session,
    source: &mut dyn RunSource,
    dir: &Path,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> Vec<RaceCheck> {
    let overlaps = analysis.catalog.site_overlaps(&analysis.candidates);
    let Some(program) = source.watchable().map(Path::to_path_buf) else { return Vec::new() };
    if overlaps.is_empty() {
        return Vec::new();
    }
    let globals = Globals::load(&program);
    let mut checks: Vec<RaceCheck> = Vec::new();
    let (list, mut pending) = plan(session, globals.as_ref(), overlaps, &mut checks);
    watch_all(&program, &list, &mut pending, &mut checks, source, cancel, ui);
    for p in pending {
        let verdict = analysis.catalog.decide_race(session, p.id, &p.evidence);
        let note = verdict.is_none().then(|| {
            "no watched re-run saw both calls with the object watched (complete, armed in time)"
                .to_owned()
        });
        if let Some(pred) = analysis.catalog.get(p.id) {
            ui.say(&format!("{}: {}", p.id, pred.description));
        }
        checks.push(RaceCheck {
            predicate: p.id,
            object: Some(p.object),
            verdict,
            evidence: Some(p.evidence),
            raced: p.raced,
            note,
        });
    }
    checks.sort_by_key(|c| c.predicate);
    for c in &checks {
        if let Some(n) = &c.note {
            ui.say(&format!("{}: not decided read or write: {n}", c.predicate));
        }
    }
    let path = dir.join(FILE);
    let text = serde_json::to_string_pretty(&checks).expect("race checks serialize") + "\n";
    match std::fs::write(&path, text) {
        Ok(()) => crate::store::hand_over(&path),
        Err(e) => ui.say(&format!("warning: cannot write {}: {e}", path.display())),
    }
    checks
}

/// The first phase of [`decide`]: the object each overlap candidate's
/// calls share, resolved to what a watchpoint covers. Candidates whose
/// object cannot be named or watched whole get an undecided check in
/// `checks`; the others wait, with the objects to watch.
fn plan(
    session: &Session,
    globals: Option<&Globals>,
    overlaps: Vec<(PredId, Site, Site)>,
    checks: &mut Vec<RaceCheck>,
) -> (Vec<WatchObject>, Vec<Pending>) {
    let mut pending: Vec<Pending> = Vec::new();
    // Object name → what to watch.
    let mut objects: BTreeMap<String, WatchObject> = BTreeMap::new();
    let mut whole: BTreeMap<String, bool> = BTreeMap::new();
    for (id, a, b) in overlaps {
        let undecided = |object: Option<String>, note: String| RaceCheck {
            predicate: id,
            object,
            verdict: None,
            evidence: None,
            raced: 0,
            note: Some(note),
        };
        let Some((base, object)) = shared_object(session, globals, a, b) else {
            checks.push(undecided(None, "no failing run names the object both calls share".into()));
            continue;
        };
        if !objects.contains_key(&object) {
            if objects.len() == MAX_WATCHED {
                checks.push(undecided(
                    Some(object),
                    format!("not watched: at most {MAX_WATCHED} objects are watched per session"),
                ));
                continue;
            }
            let resolved =
                watch::resolve(&session.functions, base, globals, std::slice::from_ref(&object));
            match resolved.map(|mut v| v.remove(0)) {
                Ok(o) if o.partial() => {
                    checks.push(undecided(
                        Some(object),
                        format!(
                            "{} bytes, of which a watchpoint covers {}: its other fields would go unseen",
                            o.size.unwrap_or(0),
                            o.len
                        ),
                    ));
                    continue;
                }
                Ok(o) => {
                    whole.insert(object.clone(), o.touched || o.size.is_some_and(|s| s <= o.len));
                    objects.insert(object.clone(), o);
                }
                Err(e) => {
                    checks.push(undecided(Some(object), format!("cannot be watched: {e}")));
                    continue;
                }
            }
        }
        let evidence = RaceEvidence {
            object: object.clone(),
            a_writes: false,
            b_writes: false,
            runs: 0,
            whole: whole.get(&object).copied().unwrap_or(false),
        };
        pending.push(Pending { id, a, b, object, evidence, raced: 0 });
    }
    (objects.into_values().collect(), pending)
}

/// The second phase of [`decide`]: the watched re-runs, at most
/// [`MAX_OBJECTS`] objects at a time, each teaching the waiting candidates
/// which of their calls read and which write. Candidates whose objects
/// cannot be watched leave `pending` with a note in `checks`.
fn watch_all(
    program: &Path,
    list: &[WatchObject],
    pending: &mut Vec<Pending>,
    checks: &mut Vec<RaceCheck>,
    source: &mut dyn RunSource,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) {
    let mut id = 0;
    for batch in list.chunks(MAX_OBJECTS) {
        let names: Vec<&str> = batch.iter().map(|o| o.object.as_str()).collect();
        ui.say(&format!(
            "watching {} in {RUNS} re-run(s) with hardware breakpoints: which of the overlapping calls read and which write",
            names.join(" and ")
        ));
        let watcher = match Watcher::new(program, batch.to_vec(), None) {
            Ok(w) => w,
            Err(e) => {
                for p in pending.iter_mut().filter(|p| names.contains(&p.object.as_str())) {
                    p.evidence.runs = 0;
                    checks.push(note_for(p, format!("cannot be watched: {e}")));
                }
                pending.retain(|p| !names.contains(&p.object.as_str()));
                continue;
            }
        };
        for _ in 0..RUNS {
            if cancel.load(Ordering::Relaxed) {
                break;
            }
            id += 1;
            match source.watched(id, &watcher, cancel) {
                Ok(w) => {
                    for p in pending.iter_mut() {
                        learn(p, &watcher, &w);
                    }
                }
                Err(e) => {
                    ui.say(&format!("warning: a watched re-run failed: {e:#}"));
                    break;
                }
            }
        }
    }
}

fn note_for(p: &Pending, note: String) -> RaceCheck {
    RaceCheck {
        predicate: p.id,
        object: Some(p.object.clone()),
        verdict: None,
        evidence: None,
        raced: 0,
        note: Some(note),
    }
}

/// The first failing run in which calls `a` and `b` both ran, and the
/// canonical name of the first object they were both passed.
fn shared_object<'s>(
    session: &'s Session,
    globals: Option<&Globals>,
    a: Site,
    b: Site,
) -> Option<(&'s Run, String)> {
    session.runs.iter().filter(|r| r.failed() && r.complete).find_map(|run| {
        let (ia, ib) = (call_index(run, a)?, call_index(run, b)?);
        let names = name_pointers(run, &session.functions, &RoleNames::of(run), globals);
        let object = names[ia].iter().find(|(_, n)| names[ib].iter().any(|(_, m)| m == n))?;
        Some((run, object.1.clone()))
    })
}

fn call_index(run: &Run, s: Site) -> Option<usize> {
    run.calls.iter().position(|c| c.func == s.func && c.role == s.role && c.instance == s.instance)
}

/// What watched run `w` shows of `p`'s two calls: each call's writes of
/// the object (its nested calls' included: they are on the same thread,
/// inside it in time), when both ran while the object was watched.
fn learn(p: &mut Pending, watcher: &Watcher, w: &WatchedRun) {
    let Some(slot) = watcher.objects.iter().position(|o| o.object == p.object) else { return };
    let run = &w.rec.run;
    let armed = &w.armed[slot];
    if !run.complete || w.lost_hits > 0 || !armed.errors.is_empty() || armed.addr.is_none() {
        return;
    }
    let (Some(ia), Some(ib)) = (call_index(run, p.a), call_index(run, p.b)) else { return };
    let (a, b) = (&run.calls[ia], &run.calls[ib]);
    // The object must be watched before either call began, unless the
    // call is where it is armed (held there while the agent arms it).
    let site = watcher.objects[slot].arm_at;
    let in_time = |c: &Call, s: Site| s == site || armed.at_ns.is_some_and(|t| t <= c.entry_ns);
    if !in_time(a, p.a) || !in_time(b, p.b) {
        return;
    }
    let end = |c: &Call| c.exit_ns.unwrap_or(run.end_ns);
    let writes = |c: &Call| {
        w.accesses.iter().any(|x| {
            x.write
                && x.object == p.object
                && x.role == c.role
                && (c.entry_ns..=end(c)).contains(&x.t_ns)
        })
    };
    let (wa, wb) = (writes(a), writes(b));
    p.evidence.a_writes |= wa;
    p.evidence.b_writes |= wb;
    p.evidence.runs += 1;
    let overlap = a.entry_ns < end(b) && b.entry_ns < end(a);
    if overlap && (wa || wb) {
        p.raced += 1;
    }
}
