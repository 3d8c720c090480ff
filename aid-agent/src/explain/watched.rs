//! `mine`, `slice` and `compare` with `--access watch` (the access events
//! of the objects they name typed by hardware watchpoints instead of
//! guessed from the calls' entries and exits), and `slice` as one entry
//! point, `--verify` included.
//!
//! A session that already holds watched runs (`aid-agent watch` wrote
//! it, or an earlier `--access watch`) is analysed as it is. Otherwise the
//! command first runs as usual to find its objects — the top pattern's,
//! the slice's — then re-runs the program with them watched (a session of
//! its own) and analyses those re-runs: `mine` all of them, `slice` the
//! first that fails.

use std::{collections::BTreeMap, path::PathBuf, sync::atomic::AtomicBool};

use anyhow::{Context as _, bail};

use super::{
    AccessSpec, ExplainError, Substrate,
    compare::{
        self, Comparison, Inputs, Options as CompareOptions, Target,
        dual::Diff,
        live::{LiveSettings, compare_program},
        minimize::Offline,
    },
    id_list,
    mine::{self, Dataset, Mined, Options},
    objects::Globals,
    slice::{self, Criterion, Levels, SliceJson},
    verify::{Verification, VerifySettings, orders, verify_program},
    watch::{self, WatchRecord, WatchSettings, Watched},
};
use crate::{
    model::Session,
    record::{progress::Progress, watchpoints::MAX_OBJECTS},
    store::{self, Loaded},
};

/// Where the watched runs analysed came from.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WatchNote {
    /// The session directory of the watched runs.
    pub session: PathBuf,
    pub objects: Vec<String>,
    /// Re-runs made now (0: the session already had them).
    pub made: usize,
}

impl WatchNote {
    pub fn text(&self) -> String {
        let made = if self.made == 0 {
            "recorded earlier".to_owned()
        } else {
            format!("{} re-run(s) made now", self.made)
        };
        format!(
            "accesses of {} typed by hardware watchpoints ({made}, in {})",
            self.objects.join(" and "),
            self.session.display()
        )
    }
}

/// The first objects (at most two) of `names`, in order, that a watchpoint
/// can watch: locks are typed exactly already.
fn watchable(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !n.starts_with("lock@") && !out.contains(&n) && out.len() < MAX_OBJECTS {
            out.push(n);
        }
    }
    out
}

/// The objects to watch: `settings.names` if given, else `found` (the
/// analysis' objects); refused when one would be watched only in part.
fn to_watch(
    functions: &[crate::model::Function],
    base: &crate::model::Run,
    globals: Option<&Globals>,
    found: Vec<String>,
    settings: &WatchSettings,
) -> anyhow::Result<Vec<crate::record::watchpoints::WatchObject>> {
    let names = if settings.names.is_empty() { found } else { settings.names.clone() };
    if names.is_empty() {
        bail!("no object a watchpoint can watch (locks are typed exactly already)");
    }
    let objects = watch::resolve(functions, base, globals, &names)?;
    if let Some(o) = objects.iter().find(|o| o.partial()) {
        bail!(
            "{} is {} bytes and a watchpoint covers {}: name the word to watch, --watch-object {}+0xOFFSET (the offset of the field the threads race on)",
            o.name,
            o.size.unwrap_or(0),
            o.len,
            o.name
        );
    }
    Ok(objects)
}

/// A session and its watch records (runs with none are left out).
struct WatchedSession {
    dir: PathBuf,
    session: Session,
    records: BTreeMap<u32, WatchRecord>,
}

impl WatchedSession {
    fn load(dir: PathBuf) -> anyhow::Result<WatchedSession> {
        let session = store::load(&dir)?;
        let records = watch::load_records(&dir)?;
        Ok(WatchedSession { dir, session, records })
    }

    fn watched(&self) -> BTreeMap<u32, Watched> {
        watch::watched_runs(&self.records)
    }

    fn objects(&self) -> Vec<String> {
        watch::object_names(&self.records).into_iter().collect()
    }
}

/// What to mine, and how.
#[derive(Clone, Copy)]
pub struct MineRequest<'a> {
    /// The session directory (it may hold watched runs already).
    pub dir: &'a std::path::Path,
    pub spec: &'a AccessSpec,
    pub opts: &'a Options,
}

/// `mine --access watch`: mines the watched runs. Without any, mines the
/// session as usual, watches the objects of the top pattern in
/// `settings.runs` re-runs, and mines those.
pub fn mine_watched(
    loaded: &Loaded,
    globals: Option<&Globals>,
    req: &MineRequest<'_>,
    settings: &WatchSettings,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(Dataset, Mined, WatchNote)> {
    let MineRequest { dir, spec, opts } = *req;
    let existing = watch::load_records(dir)?;
    let (ws, made) = if existing.is_empty() {
        let substrate = Substrate::build(&loaded.session, globals, spec, &[]);
        if !substrate.runs.iter().any(|r| r.failed) {
            return Err(ExplainError::NoFailingRuns.into());
        }
        let data = Dataset::from_substrate(&substrate, spec);
        let mined = mine::mine(&data, opts);
        let Some(top) = mined.groups.first().and_then(|g| g.patterns.first()) else {
            bail!("no pattern explains the failing runs, so there is nothing to watch");
        };
        let names =
            watchable(top.macros.iter().flatten().map(|&e| data.event_json(e).object.clone()));
        let base_id = top.failing.first().copied().context("the top pattern has no failing run")?;
        let base = loaded.session.runs.iter().find(|r| r.id == base_id).expect("mined run");
        let objects = to_watch(&loaded.session.functions, base, globals, names, settings)?;
        let outcome = watch::watch_program(loaded, objects, settings, cancel, ui)?;
        let made = outcome.runs.len();
        (WatchedSession::load(outcome.out)?, made)
    } else {
        (WatchedSession::load(dir.to_owned())?, 0)
    };
    let ids: Vec<u32> = ws
        .session
        .runs
        .iter()
        .filter(|r| {
            r.complete
                && r.interventions.is_empty()
                && ws.records.get(&r.id).is_some_and(WatchRecord::complete)
        })
        .map(|r| r.id)
        .collect();
    let note = WatchNote { session: ws.dir.clone(), objects: ws.objects(), made };
    if ids.is_empty() {
        bail!(
            "none of the watched runs in {} is usable (complete, every object watched)",
            ws.dir.display()
        );
    }
    let substrate = Substrate::build_watched(&ws.session, globals, spec, &ids, &ws.watched());
    if !substrate.runs.iter().any(|r| r.failed) {
        bail!(
            "none of the {} watched runs in {} failed: make more with --watch-runs",
            ids.len(),
            ws.dir.display()
        );
    }
    let data = Dataset::from_substrate(&substrate, spec);
    let mined = mine::mine(&data, opts);
    Ok((data, mined, note))
}

/// What to slice, and how.
pub struct SliceRequest<'a> {
    pub dir: &'a std::path::Path,
    pub run: u32,
    pub criterion: &'a Criterion,
    pub levels: Levels,
    pub spec: &'a AccessSpec,
    /// Type the slice's objects with watchpoints (`--access watch`).
    pub watch: Option<WatchSettings>,
    /// Re-run forcing the slice's orders (`--verify`).
    pub verify: Option<VerifySettings>,
}

/// What `slice` found.
pub struct SliceOutput {
    pub slice: SliceJson,
    pub watch: Option<WatchNote>,
    pub verify: Option<Verification>,
}

/// `slice`: the run as recorded, or typed by watchpoints (its own watch
/// record when the session has one; otherwise the slice's objects are
/// watched in re-runs until one fails, and that run is sliced), then
/// verified when asked.
pub fn slice_command(
    loaded: &Loaded,
    globals: Option<&Globals>,
    req: &SliceRequest<'_>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<SliceOutput> {
    let session = &loaded.session;
    let Some(run) = session.runs.iter().find(|r| r.id == req.run) else {
        return Err(
            ExplainError::NoSuchRun(req.run, id_list(session.runs.iter().map(|r| r.id))).into()
        );
    };
    if !run.failed() {
        return Err(ExplainError::NotFailing {
            run: run.id,
            what: "slice",
            failing: id_list(session.runs.iter().filter(|r| r.failed()).map(|r| r.id)),
        }
        .into());
    }
    if !run.complete {
        ui.say(&format!("warning: run {} lost events; the slice may miss dependences", run.id));
    }
    let substrate = Substrate::build(session, globals, req.spec, &[run.id]);
    let acc = &substrate.runs[0];
    let crit = req.criterion.resolve(run, acc, &session.functions)?;
    let s = slice::slice(run, acc, &session.functions, req.spec, crit, req.levels);
    let Some(settings) = &req.watch else {
        let verify = match &req.verify {
            Some(v) => {
                Some(verify_program(loaded, &orders(&s, run, acc, &substrate), v, cancel, ui)?)
            }
            None => None,
        };
        return Ok(SliceOutput {
            slice: slice::report(&s, run, acc, &substrate),
            watch: None,
            verify,
        });
    };
    let existing = watch::load_records(req.dir)?;
    let (ws, id, made) = if existing.contains_key(&req.run) {
        (WatchedSession::load(req.dir.to_owned())?, req.run, 0)
    } else {
        // The criterion's objects first, then the others the slice keeps.
        let mut events: Vec<&super::Event> =
            acc.events.iter().filter(|e| s.kept.contains(&e.call)).collect();
        events.sort_by_key(|e| (e.call != crit, e.t_ns));
        let names = watchable(events.iter().map(|e| substrate.objects.name(e.object).to_owned()));
        let objects = to_watch(&session.functions, run, globals, names, settings)?;
        let settings = WatchSettings { until_failure: true, ..settings.clone() };
        let outcome = watch::watch_program(loaded, objects, &settings, cancel, ui)?;
        let made = outcome.runs.len();
        let Some((failed, _)) = outcome.runs.iter().find(|(r, _)| r.failed()) else {
            bail!(
                "none of the {made} watched re-runs failed (in {}): make more with --watch-runs",
                outcome.out.display()
            );
        };
        let id = failed.id;
        (WatchedSession::load(outcome.out)?, id, made)
    };
    let note = WatchNote { session: ws.dir.clone(), objects: ws.objects(), made };
    let wrun = ws.session.runs.iter().find(|r| r.id == id).context("the watched run")?;
    let substrate = Substrate::build_watched(&ws.session, globals, req.spec, &[id], &ws.watched());
    let wacc = &substrate.runs[0];
    let crit = req.criterion.resolve(wrun, wacc, &ws.session.functions)?;
    let ws_slice = slice::slice(wrun, wacc, &ws.session.functions, req.spec, crit, req.levels);
    let verify = match &req.verify {
        Some(v) => {
            let wloaded = store::load_full(&ws.dir)?;
            let o = orders(&ws_slice, wrun, wacc, &substrate);
            Some(verify_program(&wloaded, &o, v, cancel, ui)?)
        }
        None => None,
    };
    Ok(SliceOutput {
        slice: slice::report(&ws_slice, wrun, wacc, &substrate),
        watch: Some(note),
        verify,
    })
}

/// What to compare, and how (`compare --access watch`).
pub struct CompareRequest<'a> {
    pub dir: &'a std::path::Path,
    pub fail: u32,
    pub pass: Option<u32>,
    pub target: Target,
    pub spec: &'a AccessSpec,
    pub opts: &'a CompareOptions,
    /// Re-runs for the symmetric tests (None with `--repeat 0`); every one
    /// watches the same objects.
    pub live: Option<LiveSettings>,
}

/// What `compare --access watch` compared.
pub struct CompareOutput {
    pub comparison: Comparison,
    pub functions: Vec<crate::model::Function>,
    pub watch: WatchNote,
    /// The failing and passing runs compared (of the watched session).
    pub fail: u32,
    pub pass: u32,
}

/// `compare --access watch`: the two runs' reads-from edges come from what
/// watchpoints saw, not from the read-write guess. A session with watched
/// runs compares two of them (`--fail` must be one); otherwise the
/// objects of the differences the dual slice finds between `--fail` and
/// `--pass` are watched in `settings.runs` re-runs, and the first failing
/// one is compared with the passing one most like it. The symmetric tests'
/// re-runs watch the same objects, so that their reads-from edges are
/// judged (confounding) the way the two runs' are.
pub fn compare_watched(
    loaded: &Loaded,
    globals: Option<&Globals>,
    req: &CompareRequest<'_>,
    settings: &WatchSettings,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<CompareOutput> {
    let existing = watch::load_records(req.dir)?;
    let (ws, fail, pass, made) = if existing.is_empty() {
        let objects = compared_objects(loaded, globals, req, settings)?;
        let outcome = watch::watch_program(loaded, objects, settings, cancel, ui)?;
        let made = outcome.runs.len();
        let ws = WatchedSession::load(outcome.out)?;
        let usable = usable_watched(&ws);
        let Some(fail) = usable.iter().copied().find(|id| failed(&ws.session, *id)) else {
            bail!(
                "none of the {made} watched re-runs in {} failed with every object watched: make more with --watch-runs",
                ws.dir.display()
            );
        };
        if !usable.iter().any(|id| !failed(&ws.session, *id)) {
            bail!(
                "none of the {made} watched re-runs in {} passed with every object watched: make more with --watch-runs",
                ws.dir.display()
            );
        }
        (ws, fail, None, made)
    } else {
        let ws = WatchedSession::load(req.dir.to_owned())?;
        let usable = usable_watched(&ws);
        for id in std::iter::once(req.fail).chain(req.pass) {
            if !usable.contains(&id) {
                bail!(
                    "run {id} of {} has no complete watch record (every object watched, nothing lost); runs that have one: {}",
                    ws.dir.display(),
                    id_list(usable.iter().copied())
                );
            }
        }
        (ws, req.fail, req.pass, 0)
    };
    let usable = usable_watched(&ws);
    // Only the watched runs take part: a run that guesses would differ
    // from them in its reads-from edges alone.
    let session = Session {
        functions: ws.session.functions.clone(),
        runs: ws.session.runs.iter().filter(|r| usable.contains(&r.id)).cloned().collect(),
    };
    let watched = ws.watched();
    let objects = ws.records.get(&fail).map(|r| r.objects.clone()).unwrap_or_default();
    let note = WatchNote { session: ws.dir.clone(), objects: ws.objects(), made };
    let pass = match pass {
        Some(p) => p,
        None => compare::pick_pass_watched(&session, fail, globals, req.spec, &watched)?,
    };
    let inputs = Inputs {
        session: &session,
        globals,
        spec: req.spec,
        fail,
        pass: Some(pass),
        target: req.target.clone(),
        watched: Some(&watched),
    };
    let comparison = match &req.live {
        None => compare::compare(&inputs, req.opts, Offline)?,
        Some(live) => {
            let wloaded = store::load_full(&ws.dir)?;
            let live = LiveSettings { watch: objects, ..live.clone() };
            compare_program(&wloaded, &inputs, req.opts, &live, cancel, ui)?
        }
    };
    Ok(CompareOutput { comparison, functions: session.functions, watch: note, fail, pass })
}

fn failed(session: &Session, id: u32) -> bool {
    session.runs.iter().any(|r| r.id == id && r.failed())
}

/// Runs of a watched session made without interventions, complete, with
/// a complete watch record, in id order.
fn usable_watched(ws: &WatchedSession) -> Vec<u32> {
    ws.session
        .runs
        .iter()
        .filter(|r| {
            r.complete
                && r.interventions.is_empty()
                && ws.records.get(&r.id).is_some_and(WatchRecord::complete)
        })
        .map(|r| r.id)
        .collect()
}

/// The objects to watch for `compare`: `--watch-object`, else those of
/// the order and reads-from differences the dual slice finds between the
/// two runs as recorded (at most two, in chain order).
fn compared_objects(
    loaded: &Loaded,
    globals: Option<&Globals>,
    req: &CompareRequest<'_>,
    settings: &WatchSettings,
) -> anyhow::Result<Vec<crate::record::watchpoints::WatchObject>> {
    let session = &loaded.session;
    compare::check_runs(session, req.fail, req.pass)?;
    let pass = match req.pass {
        Some(p) => p,
        None => compare::pick_pass(session, req.fail, globals, req.spec)?,
    };
    let inputs = Inputs {
        session,
        globals,
        spec: req.spec,
        fail: req.fail,
        pass: Some(pass),
        target: req.target.clone(),
        watched: None,
    };
    let offline = CompareOptions { repeat: 0, ..req.opts.clone() };
    let c = compare::compare(&inputs, &offline, Offline)?;
    let found = c.graph.diffs.iter().filter_map(|d| match d {
        Diff::Order { object, .. } | Diff::ReadsFrom { object, .. } => Some(object.clone()),
        _ => None,
    });
    let base = session.runs.iter().find(|r| r.id == req.fail).expect("checked above");
    to_watch(&session.functions, base, globals, watchable(found), settings)
}
