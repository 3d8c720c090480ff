//! Debugging a program in sessions: the first with the functions asked
//! for (or the default set), then, while no cause is confirmed, the
//! functions the default set left out for cost, a share per session, and
//! the callers of a function that saw a key twice, a level per session.

use std::{
    cell::RefCell,
    collections::BTreeMap,
    ffi::OsString,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
};

use anyhow::bail;

use super::{
    DebugOptions, Debugged, beside, debug,
    default_set::{
        Candidates, LeftOutNames, choose_by_cost, default_candidates, record_sync_if_cheap,
    },
    program::{ProgramSource, WatchAmplify},
};
use crate::{
    bpf::{LoadOptions, Programs},
    fleet::coordinator::Fleet,
    model::Function,
    record::{
        census,
        fail::RunPolicy,
        progress::Progress,
        start::{self, ProgramSession},
    },
    store::Mode,
    symbols::{self, Resolver},
};

/// `debug -- CMD`.
#[derive(Clone)]
pub struct ProgramRequest {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// `--trace` patterns; none: the program's own functions that are
    /// cheap enough to trace (`record/census.rs`).
    pub trace: Vec<String>,
    /// `--safe` patterns (also in `options.safe`), each of which must name
    /// a traced function.
    pub safe: Vec<String>,
    pub policy: RunPolicy,
    pub out: Option<PathBuf>,
    /// Where the runs' Parquet tables go (`--store`).
    pub store: crate::store::Destination,
    pub load: LoadOptions,
    pub options: DebugOptions,
    /// `--patterns`: a `mine --emit-predicates` file whose "pattern
    /// occurs" predicates are evaluated on the observed runs.
    pub patterns: Option<PathBuf>,
    /// `--amplify-watch`: hold a thread right after it touches an object.
    pub amplify_watch: Option<WatchAmplify>,
    /// `--jobs`: runs made this many at once.
    pub jobs: u32,
    /// `--fleet`: the NATS server the runs go to workers through.
    pub fleet: Option<String>,
}

/// `--fleet`: this session's link to the fleet's workers, once one has
/// joined.
fn join_fleet(
    req: &ProgramRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Option<Fleet>> {
    let Some(url) = &req.fleet else { return Ok(None) };
    let mut f = Fleet::connect(url)?;
    let workers = f.wait_for_workers(cancel)?;
    ui.say(&format!(
        "runs go to {} on {} ({} at once)",
        crate::util::human::count(workers.len() as u64, "worker"),
        f.url(),
        f.jobs()
    ));
    Ok(Some(f))
}

/// Levels of callers [`debug_program`] climbs at most.
pub const CALLER_LEVELS: usize = 3;

/// Starts the session, debugs the program, and removes the probes.
///
/// Without `--trace`, when the default set confirmed no cause and nothing
/// in it points further, the functions it left out for cost but that fit
/// the budget on their own are traced next, a share at a time, each share
/// in a session of its own under the first one's directory (beside the
/// default set's functions called a handful of times per run;
/// [`census::left_out_sessions`]), until one confirms a cause or points
/// to a caller.
///
/// When no cause was confirmed and what separates the runs is a key used
/// twice by a traced function (a `repeated_key` predicate: nothing in
/// that function can be intervened on), the decision that led to it was
/// made before, in a caller: the program is debugged again with the
/// callers DWARF's call sites name traced too, in a session of its own;
/// while no cause is confirmed, the callers of the functions added last
/// are added next (through callers traced already, to theirs), up to
/// [`CALLER_LEVELS`] levels.
pub fn debug_program(
    req: &ProgramRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Debugged> {
    if let Some(url) = &req.fleet {
        crate::fleet::check(url)?;
    }
    let measured = RefCell::new(Measured::default());
    let (mut done, first_phase) = first_session(req, &measured, cancel, ui)?;
    let Phase { mut callers, left_out } = first_phase;
    let first = done.out.clone();
    if let Some((next, phase)) = provoked_again(req, &done, &first, &measured, cancel, ui) {
        if confirmed(&done) && !confirmed(&next) {
            // The cause confirmed under the probes stands, said to be
            // theirs; the session without them is reported after it.
            done.later.push(next);
        } else {
            done = next_session(done, next);
            callers = phase.callers;
        }
    }
    if let Some((next, phase)) = at_statements(req, &done, &first, &measured, cancel, ui) {
        done = next_session(done, next);
        callers = phase.callers;
    }
    // The functions to climb from: those that saw a key twice, then the
    // callers added last.
    let mut from = repeated_keys(&done.diagnosis);
    let shares = left_out.sessions.len();
    for (k, share) in left_out.sessions.iter().enumerate() {
        if !from.is_empty() || settled(&done, cancel) {
            break;
        }
        let out = first.join(format!("left-out-{}", k + 1));
        ui.say(&format!(
            "no cause confirmed: debugging again with {} traced, left out of the default set for cost (share {} of {shares}: each within the budget beside the functions called at most {} times a run, or one function alone that costs up to twice the room), in {}",
            crate::util::human::summarize(&share.iter().map(String::as_str).collect::<Vec<_>>()),
            k + 1,
            census::CARRY_CALLS,
            out.display()
        ));
        let names: Vec<&String> = left_out.carried.iter().chain(share).collect();
        let trace = names.iter().map(|n| globset::escape(n)).collect();
        let safe = safe_within(&req.safe, &names);
        let req = ProgramRequest { safe, ..again(req, trace, out) };
        match debug_phase(&req, false, None, &measured, cancel, ui) {
            Ok((next, phase)) => {
                done = next_session(done, next);
                callers = phase.callers;
                from = repeated_keys(&done.diagnosis);
            }
            Err(e) => {
                ui.say(&format!("tracing the functions left out stopped: {e:#}"));
                break;
            }
        }
    }
    if from.is_empty() && !settled(&done, cancel) && !left_out.beyond.is_empty() {
        ui.say(&format!(
            "no cause confirmed; never traced, beyond the {} sessions of functions left out: {}; name them with --trace to trace them",
            census::MAX_LEFT_OUT_SESSIONS,
            left_out.beyond.join(", ")
        ));
    }
    for level in 1..=CALLER_LEVELS {
        if settled(&done, cancel) {
            break;
        }
        let traced = traced_names(&done.diagnosis);
        let added = callers_of_named(&from, &callers, &traced);
        if added.is_empty() {
            break;
        }
        let out = first.join(format!("callers-{level}"));
        ui.say(&format!(
            "no cause confirmed; {}: debugging again with {} traced too (their callers in the code, from DWARF's call sites; what they cost was not measured first), in {}",
            if level == 1 {
                format!(
                    "what separates the runs is a key used twice by {}, which nothing in it can change",
                    crate::util::human::summarize(&from.iter().map(String::as_str).collect::<Vec<_>>())
                )
            } else {
                "climbing one caller further".to_owned()
            },
            crate::util::human::summarize(&added.iter().map(String::as_str).collect::<Vec<_>>()),
            out.display()
        ));
        let trace = traced.iter().copied().chain(added.iter().map(String::as_str));
        let trace = trace.map(globset::escape).collect();
        // A session that cannot be made (a caller that cannot be probed)
        // ends the climb; what was found so far is reported.
        match debug_phase(&again(req, trace, out), false, None, &measured, cancel, ui) {
            Ok((next, phase)) => {
                done = next_session(done, next);
                callers = phase.callers;
            }
            Err(e) => {
                ui.say(&format!("climbing to callers stopped: {e:#}"));
                break;
            }
        }
        from = added;
    }
    Ok(done)
}

/// Sessions with fewer functions traced at most, after a first one whose
/// probes hid the failure: each leaves out the functions called most
/// often in the set before it (at least half of its calls).
pub const FEWER_PROBE_SESSIONS: usize = 2;

/// Functions by name, each with its calls in a run.
type Calls = Vec<(String, u64)>;

/// What the default set's census measured, for the sessions after the
/// first.
#[derive(Default)]
struct Measured {
    /// The untraced runs before the first session: (failed, made).
    untraced: Option<(u32, u32)>,
    /// Each function of the default set with its calls in the counting
    /// run.
    calls: Calls,
    /// The directory of the session started last.
    out: Option<PathBuf>,
}

/// The first session. Without `--trace`, when its traced runs fail less
/// often than the untraced runs of the census beyond chance (aid's probes
/// hide the failure: [`super::ProbesHideIt`]), it ends after observing and
/// the program is debugged again without the functions called most often
/// (those that make up at least half of the set's calls), in a session
/// of its own under the first one's directory; up to
/// [`FEWER_PROBE_SESSIONS`] times, the last of which goes on whatever the
/// probes do.
fn first_session(
    req: &ProgramRequest,
    measured: &RefCell<Measured>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(Debugged, Phase)> {
    let mut this = req.clone();
    let mut first_out: Option<PathBuf> = None;
    // What the sessions before found of the probes, for the next one's
    // report.
    let mut note: Option<String> = None;
    // The functions the session just made traced, with their calls (the
    // default set's, for the first).
    let mut traced: Option<Calls> = None;
    for k in 0..FEWER_PROBE_SESSIONS {
        let hid =
            match debug_phase(&this, req.trace.is_empty(), note.as_deref(), measured, cancel, ui) {
                Err(e) => e.downcast::<super::ProbesHideIt>()?,
                done => return done,
            };
        let m = measured.borrow();
        let (keep, dropped) =
            without_most_called(&traced.take().unwrap_or_else(|| m.calls.clone()));
        if keep.is_empty() {
            return Err(hid.into());
        }
        let first = first_out.get_or_insert_with(|| m.out.clone().unwrap_or_default()).clone();
        let out = first.join(format!("fewer-probes-{}", k + 1));
        this = without_them(req, &keep, &dropped, out, "aid's probes hide the failure", ui);
        let earlier = note.map(|n| format!("; before that, {n}")).unwrap_or_default();
        note =
            Some(left_out_note(&dropped, "rarer", "run", hid.untraced, hid.traced, "", &earlier));
        traced = Some(keep);
    }
    debug_phase(&this, false, note.as_deref(), measured, cancel, ui)
}

/// Without `--trace`, when the first session's failure was more frequent
/// under aid's probes than without them beyond chance (they provoke part
/// of it: SCTBench's circular_buffer_bad failed in 0 of 100 untraced runs
/// and 14 of 24 traced ones, in more ways than its bug, and no predicate
/// separated the runs), the program is debugged again without the
/// functions called most often, in a session of its own (`fewer-probes-1`
/// under the first one's directory), so that the failure is closer to
/// what it is untraced, made more frequent by noise if it is rare. This
/// happens whether or not the first session confirmed a cause: one
/// confirmed under those probes may be a timing they make (the order of
/// a call against call 149 of a helper whose probes slow its thread), and
/// the caller prefers a cause confirmed without them. None when the
/// first session [`stopped`], nothing is left to trace or that session
/// could not be made (said).
fn provoked_again(
    req: &ProgramRequest,
    done: &Debugged,
    first: &std::path::Path,
    measured: &RefCell<Measured>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> Option<(Debugged, Phase)> {
    let observed = &done.diagnosis.observed;
    let noun = if observed.noun.is_empty() { "run" } else { observed.noun.as_str() };
    let (untraced, traced) = observed.provoked?;
    if !req.trace.is_empty() || stopped(done, cancel) {
        return None;
    }
    let (keep, dropped) = without_most_called(&measured.borrow().calls);
    if keep.is_empty() {
        return None;
    }
    let out = first.join("fewer-probes-1");
    let (why, also) = if confirmed(done) {
        (
            "a cause is confirmed, but aid's probes provoke part of the failure",
            ", and the cause confirmed with them is the failure's as they make it",
        )
    } else {
        (
            "no cause confirmed, and aid's probes provoke part of the failure",
            " and no cause was confirmed",
        )
    };
    let this = without_them(req, &keep, &dropped, out, why, ui);
    let note = left_out_note(&dropped, "more frequent", noun, untraced, traced, also, "");
    session_or_said(&this, Some(&note), "with fewer probes", measured, cancel, ui)
}

/// When a session provoked the failure with noise at calls and locks only
/// (its analysed runs carry noise, none of it at statements) and confirmed
/// no cause, the program is debugged again with the same functions traced
/// and the noise acting at the statements inside them from its first level
/// on, in a session of its own (`statements-1` under the first one's
/// directory). A window between two statements of one function ("a call
/// of f is between f.c:352 and its next statement while a call of g is
/// between g.c:325 and its next") is a predicate only of runs that carry
/// the statement probes, which the ladder adds only once its first pass
/// provoked nothing; a race between statements of two functions has no
/// call or lock to state it by. None when the session ran no noise, had
/// it at statements already, has no statement points, or could not be
/// made (said).
fn at_statements(
    req: &ProgramRequest,
    done: &Debugged,
    first: &std::path::Path,
    measured: &RefCell<Measured>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> Option<(Debugged, Phase)> {
    let d = &done.diagnosis;
    let o = &d.observed;
    if settled(done, cancel) || o.amplified.is_none() || o.statements || o.failing == 0 {
        return None;
    }
    let functions = &d.session.functions;
    let points = functions.iter().filter(|f| f.probe == crate::model::Probe::Statement).count();
    if points == 0 {
        return None;
    }
    let traced = traced_names(d);
    let out = first.join("statements-1");
    ui.say(&format!(
        "no cause confirmed: debugging again with the same {} traced and the noise also at the {} inside them from its first level on (a window between two statements of one function is a predicate only of runs that carry their probes), in {}",
        crate::util::human::count(traced.len() as u64, "function"),
        crate::util::human::count(points as u64, "statement"),
        out.display()
    ));
    let trace = traced.iter().copied().map(globset::escape).collect();
    let mut this = again(req, trace, out);
    this.options.statements_from_start = true;
    session_or_said(&this, None, "with noise at statements", measured, cancel, ui)
}

/// The functions a session traced, by name: those it was asked for, not
/// the library functions it records on its own.
fn traced_names(d: &super::Diagnosis) -> Vec<&str> {
    d.session.functions.iter().filter(|f| !f.internal).map(|f| f.name.as_str()).collect()
}

/// One more session of `req`, or None when it could not be made, said as
/// "debugging {what} stopped: ...".
fn session_or_said(
    req: &ProgramRequest,
    note: Option<&str>,
    what: &str,
    measured: &RefCell<Measured>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> Option<(Debugged, Phase)> {
    match debug_phase(req, false, note, measured, cancel, ui) {
        Ok(next) => Some(next),
        Err(e) => {
            ui.say(&format!("debugging {what} stopped: {e:#}"));
            None
        }
    }
}

/// `req` again, tracing `keep` (without `dropped`, the functions called
/// most often) in `out`, said to the user after `why`.
fn without_them(
    req: &ProgramRequest,
    keep: &Calls,
    dropped: &Calls,
    out: PathBuf,
    why: &str,
    ui: &mut dyn Progress,
) -> ProgramRequest {
    ui.say(&format!(
        "{why}: debugging again without the functions called most often ({}), so that the probes change the schedule less: {} traced, in {}",
        dropped.iter().map(|(n, c)| format!("{n}: {} a run", crate::util::human::count(*c, "call"))).collect::<Vec<_>>().join(", "),
        crate::util::human::summarize(&keep.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()),
        out.display()
    ));
    let trace = keep.iter().map(|(n, _)| globset::escape(n)).collect();
    let names: Vec<&String> = keep.iter().map(|(n, _)| n).collect();
    ProgramRequest { safe: safe_within(&req.safe, &names), ..again(req, trace, out) }
}

/// What the report of a session without `dropped` says of why: the
/// failure was `how` (rarer, more frequent) under aid's probes, with the
/// counts (failed, made) of the `noun`s made without them and of the first
/// traced ones; `also` after the counts, `earlier` at the end.
fn left_out_note(
    dropped: &Calls,
    how: &str,
    noun: &str,
    (uf, un): (u32, u32),
    (tf, tn): (u32, u32),
    also: &str,
    earlier: &str,
) -> String {
    let left: Vec<&str> = dropped.iter().map(|(n, _)| n.as_str()).collect();
    format!(
        "with {} traced too, the failure was {how} under aid's probes ({uf} of {un} {noun}s made without them failed, {tf} of the first {tn} traced ones, beyond chance){also}: this session leaves {} out{earlier}",
        crate::util::human::summarize(&left),
        if left.len() == 1 { "it" } else { "them" }
    )
}

/// `traced` (function, calls per run) split into what stays and what is
/// left out: the most called functions that make up at least half of all
/// calls (at least one), never all of them.
fn without_most_called(traced: &[(String, u64)]) -> (Calls, Calls) {
    let mut order: Calls = traced.to_vec();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: u64 = order.iter().map(|(_, c)| c).sum();
    let mut dropped = Vec::new();
    let mut sum = 0;
    while order.len() > 1 && (dropped.is_empty() || 2 * sum < total) {
        let (n, c) = order.remove(0);
        sum += c;
        dropped.push((n, c));
    }
    let mut keep = order;
    keep.sort_by_key(|(n, _)| traced.iter().position(|(m, _)| m == n));
    (keep, dropped)
}

/// Whether the session confirmed a root cause.
fn confirmed(done: &Debugged) -> bool {
    done.diagnosis.discovery.as_ref().is_some_and(|x| x.root_cause.is_some())
}

/// Whether the search ends here: a cause confirmed, or [`stopped`].
fn settled(done: &Debugged, cancel: &AtomicBool) -> bool {
    confirmed(done) || stopped(done, cancel)
}

/// Whether the session was cut short, or the failure was too rare under
/// the agent's control for any round (another traced set is judged the
/// same way).
fn stopped(done: &Debugged, cancel: &AtomicBool) -> bool {
    let d = &done.diagnosis;
    d.interrupted.is_some() || d.not_started.is_some() || cancel.load(Ordering::Relaxed)
}

/// The `--safe` patterns that name one of `names`: a share of the
/// functions left out is traced without most of the default set, and a
/// pattern for a function it does not trace does not apply to it (the
/// first session checked them against the default set).
fn safe_within(safe: &[String], names: &[&String]) -> Vec<String> {
    let names_one = |p: &String| {
        globset::Glob::new(p)
            .map(|g| g.compile_matcher())
            .is_ok_and(|m| names.iter().any(|n| m.is_match(n.as_str())))
    };
    safe.iter().filter(|p| names_one(p)).cloned().collect()
}

/// `req` again, with `trace` for its functions and its own directory.
fn again(req: &ProgramRequest, trace: Vec<String>, out: PathBuf) -> ProgramRequest {
    ProgramRequest { trace, out: Some(out), ..req.clone() }
}

/// `next`, with `done` and the sessions before it as its earlier ones.
fn next_session(mut done: Debugged, mut next: Debugged) -> Debugged {
    next.earlier = std::mem::take(&mut done.earlier);
    next.earlier.push(done);
    next
}

/// What a session leaves for the next ones besides its diagnosis.
struct Phase {
    callers: Callers,
    /// Default mode: the functions left out for cost, by name.
    left_out: LeftOutNames,
}

/// Traced function → the program's own functions (default candidates)
/// whose code calls it directly, by name.
type Callers = BTreeMap<String, Vec<String>>;

/// The functions named by `repeated_key` predicates (which have no
/// intervention) that hold in every failing run: in no passing run (fully
/// discriminative), or clearly less often in passing runs (necessary, as
/// `stats::necessary` decides: a duplicate may do no harm).
fn repeated_keys(d: &super::Diagnosis) -> Vec<String> {
    let a = &d.analysis;
    let mut out: Vec<String> = Vec::new();
    for p in &a.catalog.predicates {
        let Some(s) = a.scores.get(p.id.0 as usize) else { continue };
        if p.key.kind == crate::predicates::Kind::RepeatedKey
            && (s.fully_discriminative || crate::stats::necessary(s, a.totals))
            && let Some(f) = d.session.functions.get(p.key.func as usize)
            && !out.contains(&f.name)
        {
            out.push(f.name.clone());
        }
    }
    out
}

/// The callers of `from` that are not `traced` yet, once each. A caller
/// that is traced already was in the session that found nothing: the
/// climb goes on through it to its own callers (each function once).
fn callers_of_named(from: &[String], callers: &Callers, traced: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = from.iter().map(String::as_str).collect();
    let mut next: Vec<&str> = seen.clone();
    let mut i = 0;
    while let Some(&f) = next.get(i) {
        i += 1;
        for c in callers.get(f).into_iter().flatten() {
            if seen.contains(&c.as_str()) {
                continue;
            }
            seen.push(c);
            if traced.contains(&c.as_str()) {
                next.push(c);
            } else {
                out.push(c.clone());
            }
        }
    }
    out
}

/// One session: starts the program, debugs it, removes the probes; with
/// the callers of each traced function and the functions the default set
/// left out, for the sessions [`debug_program`] makes next.
/// Long (about 130 lines): one session's steps in order, sharing the
/// tracer, the writer and the cells the function chooser fills.
fn debug_phase(
    req: &ProgramRequest,
    fewer: bool,
    hid: Option<&str>,
    measured: &RefCell<Measured>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(Debugged, Phase)> {
    let patterns = match &req.patterns {
        Some(p) => Some((p.clone(), beside::load_patterns(p)?)),
        None => None,
    };
    let candidates: RefCell<Option<Candidates>> = RefCell::new(None);
    let callers: RefCell<Callers> = RefCell::new(Callers::new());
    let left_out: RefCell<LeftOutNames> = RefCell::new(LeftOutNames::default());
    // The functions to trace: the cheap ones by default, or `--trace`'s;
    // with their callers among the program's own functions.
    let choose_functions = |r: &mut Resolver| -> anyhow::Result<(Vec<Function>, Callers)> {
        if req.trace.is_empty() {
            let found = default_candidates(r)?;
            if found.functions.len() > req.load.max_functions {
                bail!(
                    "{} has {} functions of its own, more than the limit of {} probes that measuring them needs: name the functions to trace with --trace, or raise --max-probes",
                    r.executable().path.display(),
                    found.functions.len(),
                    req.load.max_functions
                );
            }
            let functions = found.functions.clone();
            let callers = callers_of(r, &found.functions, &functions);
            *candidates.borrow_mut() = Some(found);
            return Ok((functions, callers));
        }
        let functions = r.resolve(&req.trace)?;
        start::check_safe(&req.safe, &functions)?;
        let own = default_candidates(r).map(|c| c.functions).unwrap_or_default();
        let callers = callers_of(r, &own, &functions);
        Ok((functions, callers))
    };
    let ProgramSession { target, mut tracer, mut writer } = start::program(
        Mode::Debug,
        &req.command,
        &req.policy.texts,
        req.load,
        req.out.as_deref(),
        &req.store,
        Programs::Record,
        &symbols::DebugSearch::default(),
        &mut *ui,
        |r, _| {
            let (functions, found) = choose_functions(r)?;
            *callers.borrow_mut() = found;
            Ok(functions)
        },
        |tracer, target, ui| {
            let measured = candidates
                .borrow_mut()
                .take()
                .map(|found| {
                    choose_by_cost(tracer, target, &req.policy, &req.safe, found, cancel, ui)
                })
                .transpose()?
                .map(|(census, left_ns, names)| {
                    let mut m = measured.borrow_mut();
                    m.untraced = Some((census.untraced_failed, census.untraced_runs));
                    m.calls.clone_from(&names.chosen);
                    *left_out.borrow_mut() = names;
                    (census, left_ns)
                });
            let sync = tracer.add_sync_points()?;
            log::info!(
                "{sync} synchronisation points (the C library's, and where the program resumes after a join or a condition wait) ready for amplification"
            );
            if let Some((census, left_ns)) = measured
                && sync > 0
            {
                record_sync_if_cheap(tracer, target, &req.policy, &census, left_ns, cancel, ui)?;
            }
            Ok(())
        },
    )?;
    let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
    let several = names.len() >= 2;
    ui.say(&format!(
        "debugging {} ({} traced functions: {})",
        target.display(),
        names.len(),
        crate::util::human::summarize(&names)
    ));
    if let Some(a) = &req.amplify_watch {
        ui.say(&format!(
            "amplifying with a watchpoint on {}: a thread is held {} right after it {} it (at most {} per run), from the second run on (the first locates it)",
            a.object,
            crate::util::human::duration(a.delay.delay_us * 1000),
            if a.delay.writes_only { "writes" } else { "reads or writes" },
            a.delay.max
        ));
    }
    measured.borrow_mut().out = Some(writer.dir().to_owned());
    let mut fleet = join_fleet(req, cancel, ui)?;
    if req.jobs > 1 {
        writer.set_jobs(req.jobs)?;
    }
    let mut source = ProgramSource::new(&mut tracer, &target, &req.policy)
        .made_by(req.jobs, fleet.as_mut(), req.amplify_watch.clone())?
        .with_untraced(measured.borrow().untraced)
        .with_fewer(fewer && several);
    let mut diagnosis = debug(&mut source, &mut writer, &req.options, cancel, ui)?;
    if let Some(f) = &fleet {
        let mark = f.mark();
        writer.set_fleet(mark.clone())?;
        diagnosis.observed.fleet = Some(mark);
    }
    if diagnosis.observed.tracer.is_none() {
        diagnosis.observed.tracer = hid.map(str::to_owned);
    }
    drop(tracer);
    // Beside the path, from the runs the analysis used (already in memory;
    // the session on disk also holds every intervened run).
    let beside = beside::beside(
        &diagnosis,
        &target.program,
        &req.options.safe,
        patterns.as_ref().map(|(p, f)| (p.as_path(), f)),
    );
    let out = writer.dir().to_owned();
    let phase = Phase { callers: callers.into_inner(), left_out: left_out.into_inner() };
    Ok((Debugged { diagnosis, out, beside, earlier: Vec::new(), later: Vec::new() }, phase))
}

/// For each of `functions` in the executable, those of `own` (the
/// program's default candidates: not `main`, not sleep helpers) whose code
/// calls it directly.
fn callers_of(r: &Resolver, own: &[Function], functions: &[Function]) -> Callers {
    let exe = r.executable();
    let by_address: BTreeMap<u64, &str> =
        own.iter().map(|o| (o.address, o.name.as_str())).collect();
    let name_of = |a: &u64| by_address.get(a).map(|n| (*n).to_owned());
    functions
        .iter()
        .filter(|f| f.module == exe.path)
        .map(|f| (f.name.clone(), exe.callers(f.address).iter().filter_map(name_of).collect()))
        .filter(|(_, c): &(String, Vec<String>)| !c.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callers(edges: &[(&str, &[&str])]) -> Callers {
        edges
            .iter()
            .map(|(f, c)| ((*f).to_owned(), c.iter().map(|s| (*s).to_owned()).collect()))
            .collect()
    }

    #[test]
    fn safe_patterns_apply_to_the_shares_that_trace_them() {
        let safe: Vec<String> = ["pricing_*", "validate_invoice"].map(str::to_owned).to_vec();
        let (a, b, c) = ("pricing_fetch".to_owned(), "unit_price".to_owned(), "main2".to_owned());
        assert_eq!(safe_within(&safe, &[&a, &b]), ["pricing_*"]);
        assert!(safe_within(&safe, &[&b, &c]).is_empty());
    }

    fn named(calls: &[(&str, u64)]) -> Vec<(String, u64)> {
        calls.iter().map(|&(n, c)| (n.to_owned(), c)).collect()
    }

    #[test]
    fn the_most_called_functions_are_left_out_first() {
        // probe_hidden.c: mix alone makes up most of the calls.
        let set = named(&[("meet", 1), ("mix", 150), ("publish", 1), ("setup", 1)]);
        let (keep, dropped) = without_most_called(&set);
        assert_eq!(keep, named(&[("meet", 1), ("publish", 1), ("setup", 1)]));
        assert_eq!(dropped, named(&[("mix", 150)]));
        // Even calls: the first two by name make up half.
        let (keep, dropped) = without_most_called(&named(&[("z", 10), ("x", 10), ("y", 10)]));
        assert_eq!((keep, dropped), (named(&[("z", 10)]), named(&[("x", 10), ("y", 10)])));
        // Never every function.
        let (keep, dropped) = without_most_called(&named(&[("only", 99)]));
        assert_eq!((keep, dropped), (named(&[("only", 99)]), Vec::new()));
    }

    #[test]
    fn the_climb_goes_through_callers_already_traced() {
        // inventory-sixty's default set once held catalog_find and both its
        // callers: the climb must reach stock_item, one level further.
        let c = callers(&[
            ("catalog_find", &["catalog_describe", "report_render"]),
            ("catalog_describe", &["stock_item"]),
            ("report_render", &[]),
            ("stock_item", &["catalog_find"]),
        ]);
        let from = vec!["catalog_find".to_owned()];
        let traced = ["catalog_find", "catalog_describe", "report_render"];
        assert_eq!(callers_of_named(&from, &c, &traced), ["stock_item"]);
        // An untraced caller is added, and not climbed through.
        let traced = ["catalog_find"];
        assert_eq!(callers_of_named(&from, &c, &traced), ["catalog_describe", "report_render"]);
        // Everything traced and a cycle: nothing to add, and it ends.
        let traced = ["catalog_find", "catalog_describe", "report_render", "stock_item"];
        assert!(callers_of_named(&from, &c, &traced).is_empty());
    }
}
