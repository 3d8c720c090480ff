//! `aid-agent compare`: why one failing run differs from one passing run
//! (Sumner & Zhang, Comparative Causality, ICSE 2013; seed 001, spec §3).
//!
//! Align the two runs by (role, function, k, entry|exit) ([`align`]); take
//! the dual slice of the target difference and its differences: values,
//! reads-from and order on shared objects, omissions ([`dual`]); then,
//! from the target backwards, cut at the cause point — the nearest
//! differences a re-run can replace (a return value of a function declared
//! safe, an order) — and minimise the cut with the symmetric test
//! ([`minimize`]). The minimal causes become the next effect, until no
//! replaceable difference remains upstream (§IV, "iterate until no
//! differences remain"). The chain reads "at X: v1 vs v2 ⇒ …", ending at
//! the failure.
//!
//! An argument difference cannot be replaced (no intervention writes
//! arguments), so the chain passes through it to the return or order that
//! produced it; so does a return of a function not declared `--safe`.

pub mod align;
pub mod dual;
pub mod live;
pub mod minimize;

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use serde::Serialize;

use self::{
    align::{CallKey, Field, Val, View, differing_fields},
    dual::{Diff, DualSlice, Graph, Side},
    minimize::{Context, Replacement, Rerun, Test, Tester},
};
use super::{
    ExplainError,
    access::{AccessSpec, Objects},
    id_list,
    objects::Globals,
    slice::Criterion,
    watch::Watched,
};
use crate::{
    intervene::SafeList,
    model::{Function, Run, Session},
    record::fail::{HANG, TIMED_OUT},
};

/// What the chain ends at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// How the runs ended, through the last differing call (on the main
    /// thread when it has one).
    Exit,
    /// `[role:]function#k.ret`.
    Ret(Criterion),
}

impl Target {
    pub fn parse(text: &str) -> Result<Target, ExplainError> {
        if text == "exit" {
            return Ok(Target::Exit);
        }
        let call = text.strip_suffix(".ret").ok_or_else(|| ExplainError::Criterion {
            text: text.to_owned(),
            reason: "give `exit` or `function#k.ret`, e.g. `check_total#1.ret`".into(),
        })?;
        Ok(Target::Ret(Criterion::parse(call)?))
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Re-runs per side of each symmetric test; 0 = no re-execution (the
    /// chain is then the dual slice's, untested).
    pub repeat: u32,
    pub theta: f64,
    /// Force returns equal in both runs (of safe functions) in re-runs.
    pub pin: bool,
    pub safe: SafeList,
}

/// One step of the chain: differences at one point, and, when it was the
/// cause set of a tested link, the test.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub diffs: Vec<usize>,
    pub text: String,
    pub test: Option<Test>,
}

/// The result of `compare`.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub fail: View,
    pub pass: View,
    pub slice: DualSlice,
    pub graph: Graph,
    pub target: usize,
    /// Root cause first, the target last.
    pub chain: Vec<Step>,
    /// The last link upstream could not be shown sufficient.
    pub stopped: Option<Test>,
    pub tests: Vec<Test>,
    pub reruns: usize,
}

/// The passing run most like `fail`: fewest calls in one run only, then
/// fewest calls with different values, then the lowest id.
pub fn closest_pass(views: &[View], fail: &View) -> Option<usize> {
    views
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.failed)
        .min_by_key(|(_, v)| {
            let keys: BTreeSet<&CallKey> = v.index.keys().chain(fail.index.keys()).collect();
            let omitted = keys
                .iter()
                .filter(|k| !v.index.contains_key(*k) || !fail.index.contains_key(*k))
                .count();
            let differ = keys
                .iter()
                .filter(|k| differing_fields(fail, v, k).is_some_and(|f| !f.is_empty()))
                .count();
            (omitted, differ, v.id)
        })
        .map(|(i, _)| i)
}

/// The id of the passing run most like run `fail` ([`closest_pass`]).
pub fn pick_pass(
    session: &Session,
    fail: u32,
    globals: Option<&Globals>,
    spec: &AccessSpec,
) -> Result<u32, ExplainError> {
    pick_pass_watched(session, fail, globals, spec, &BTreeMap::new())
}

/// [`pick_pass`], with the runs in `watched` typed by watchpoints.
pub fn pick_pass_watched(
    session: &Session,
    fail: u32,
    globals: Option<&Globals>,
    spec: &AccessSpec,
    watched: &BTreeMap<u32, Watched>,
) -> Result<u32, ExplainError> {
    let mut objects = Objects::default();
    let f =
        session.runs.iter().filter(|r| usable(r)).find(|r| r.id == fail).ok_or_else(|| {
            ExplainError::NoSuchRun(fail, id_list(session.runs.iter().map(|r| r.id)))
        })?;
    let view = |r: &Run, objects: &mut Objects| {
        View::watched(r, &session.functions, globals, spec, objects, watched.get(&r.id))
    };
    let fv = view(f, &mut objects);
    let views: Vec<View> = session
        .runs
        .iter()
        .filter(|r| usable(r) && !r.failed())
        .map(|r| view(r, &mut objects))
        .collect();
    closest_pass(&views, &fv).map(|i| views[i].id).ok_or(ExplainError::NoPassingRuns)
}

/// A run `compare` may use: complete, and made without interventions.
fn usable(r: &Run) -> bool {
    r.complete && r.interventions.is_empty()
}

/// Checks the runs: `fail` must be a failing run and `pass`, if given, a
/// passing one (both complete and made without interventions).
pub fn check_runs(session: &Session, fail: u32, pass: Option<u32>) -> Result<(), ExplainError> {
    let runs = || session.runs.iter().filter(|r| usable(r));
    let find = |id: u32| {
        runs()
            .find(|r| r.id == id)
            .ok_or_else(|| ExplainError::NoSuchRun(id, id_list(runs().map(|r| r.id))))
    };
    if !find(fail)?.failed() {
        return Err(ExplainError::NotFailing {
            run: fail,
            what: "--fail",
            failing: id_list(runs().filter(|r| r.failed()).map(|r| r.id)),
        });
    }
    match pass {
        Some(p) if find(p)?.failed() => Err(ExplainError::NotPassing {
            run: p,
            passing: id_list(runs().filter(|r| !r.failed()).map(|r| r.id)),
        }),
        Some(_) => Ok(()),
        None if !runs().any(|r| !r.failed()) => Err(ExplainError::NoPassingRuns),
        None => Ok(()),
    }
}

/// The exit target: the last call that differs in a value the passing
/// runs agree on ([`Steady`]), on the main thread when it has one; the
/// outcome follows it. A call the failing run's end cut short (it had not
/// returned when an assertion, in it or on another thread, ended the
/// process) differs because the run ended, not as a cause of it, unless
/// aid ended the run itself: a run that timed out or hung failed by what
/// its calls still waited for.
fn exit_target(
    fail: &View,
    pass: &View,
    steady: &Steady<'_>,
) -> Result<(CallKey, bool), ExplainError> {
    let waited = fail.reason == TIMED_OUT || fail.reason == HANG;
    let differs = |k: &&CallKey| {
        differing_fields(fail, pass, k).is_some_and(|f| {
            f.iter().any(|(field, x, _)| (waited || *x != Val::Missing) && !steady.varies(k, field))
        })
    };
    let last = |main: bool| {
        fail.keys()
            .filter(differs)
            .filter(|k| !main || fail.acc.roles.role(&k.role) == Some(0))
            .max_by_key(|k| (fail.entry_ns.get(*k).copied().unwrap_or(0), (*k).clone()))
            .cloned()
    };
    last(true).or_else(|| last(false)).map(|k| (k, true)).ok_or_else(|| ExplainError::Criterion {
        text: "exit".into(),
        reason: format!(
            "no traced call differs between runs {} and {} in a value the passing runs agree on: trace the functions on the failure's path",
            fail.id, pass.id
        ),
    })
}

/// Everything `compare` needs besides the executor.
pub struct Inputs<'a> {
    pub session: &'a Session,
    pub globals: Option<&'a Globals>,
    pub spec: &'a AccessSpec,
    pub fail: u32,
    pub pass: Option<u32>,
    pub target: Target,
    /// Runs of the session typed by watchpoints (`--access watch`); the
    /// others guess.
    pub watched: Option<&'a BTreeMap<u32, Watched>>,
}

/// Compares the runs and, when `opts.repeat > 0`, tests the chain with
/// `exec`.
pub fn compare<R: Rerun>(
    inputs: &Inputs<'_>,
    opts: &Options,
    exec: R,
) -> anyhow::Result<Comparison> {
    let session = inputs.session;
    let functions = &session.functions;
    check_runs(session, inputs.fail, inputs.pass)?;
    let mut objects = Objects::default();
    let view = |r: &Run, objects: &mut Objects| {
        let w = inputs.watched.and_then(|w| w.get(&r.id));
        View::watched(r, functions, inputs.globals, inputs.spec, objects, w)
    };
    let run = |id: u32| session.runs.iter().find(|r| r.id == id).expect("checked run exists");
    let fail = view(run(inputs.fail), &mut objects);
    // Only the exit target asks which values the passing runs agree on:
    // up to `WITNESSES` passing runs besides the chosen one, in id order.
    let exit = matches!(inputs.target, Target::Exit | Target::Ret(Criterion::Exit));
    let keep = if exit { WITNESSES } else { 0 };
    let passing = session.runs.iter().filter(|r| usable(r) && !r.failed());
    let (pass, witnesses) = match inputs.pass {
        Some(p) => {
            let pass = view(run(p), &mut objects);
            let others = passing.filter(|r| r.id != p).take(keep);
            let others = others.map(|r| view(r, &mut objects)).collect();
            (pass, others)
        }
        None => {
            let mut views: Vec<View> = passing.map(|r| view(r, &mut objects)).collect();
            let i = closest_pass(&views, &fail).ok_or(ExplainError::NoPassingRuns)?;
            let pass = views.remove(i);
            views.truncate(keep);
            (pass, views)
        }
    };
    let steady = Steady { pass: &pass, witnesses: &witnesses };
    let (key, outcome) = target_call_named(&fail, &pass, &inputs.target, functions, &steady)?;
    let slice = dual::dual_slice(&fail, &pass, &key);
    let (graph, target) = dual::graph(&fail, &pass, &slice, &key, outcome);
    let pins = if opts.pin { pins(&fail, &pass, functions, &opts.safe) } else { Vec::new() };
    let ctx = Context {
        fail: &fail,
        pass: &pass,
        graph: &graph,
        functions,
        globals: inputs.globals,
        spec: inputs.spec,
        safe: &opts.safe,
        repeat: opts.repeat,
        theta: opts.theta,
        pins,
    };
    let mut tester = Tester::new(ctx, exec, objects);
    let (chain, stopped) = chain(&mut tester, target)?;
    let tests = tester.tests.clone();
    let reruns = tester.reruns;
    drop(tester);
    Ok(Comparison { fail, pass, slice, graph, target, chain, stopped, tests, reruns })
}

/// How many passing runs besides the chosen one say which values vary
/// among passing runs ([`Steady`]).
const WITNESSES: usize = 8;

/// Which values the passing runs agree on: a value of the chosen passing
/// run that another passing run's same call does not share (a return
/// value no statement sets, a clock read) tells nothing of the failure,
/// so a call that differs only in such values is not the exit target.
struct Steady<'v> {
    pass: &'v View,
    witnesses: &'v [View],
}

impl Steady<'_> {
    fn varies(&self, key: &CallKey, field: &Field) -> bool {
        let value = |v: &View| v.values.get(key).and_then(|f| f.get(field)).cloned();
        let Some(mine) = value(self.pass) else { return false };
        self.witnesses.iter().any(|w| value(w).is_some_and(|x| x != mine))
    }
}

/// `target_call` with function names resolved.
fn target_call_named(
    fail: &View,
    pass: &View,
    target: &Target,
    functions: &[Function],
    steady: &Steady<'_>,
) -> Result<(CallKey, bool), ExplainError> {
    match target {
        Target::Exit | Target::Ret(Criterion::Exit) => exit_target(fail, pass, steady),
        Target::Ret(Criterion::Call { role, function, instance }) => {
            let hits: Vec<CallKey> = fail
                .keys()
                .filter(|k| {
                    k.instance == *instance
                        && functions.get(k.func as usize).is_some_and(|f| f.name == *function)
                        && role.as_ref().is_none_or(|r| *r == k.role)
                })
                .cloned()
                .collect();
            let text = format!(
                "{}{function}#{instance}.ret",
                role.as_ref().map(|r| format!("{r}:")).unwrap_or_default()
            );
            let key = match hits.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(ExplainError::Criterion {
                        text,
                        reason: format!("run {} has no such call", fail.id),
                    });
                }
                many => {
                    return Err(ExplainError::Criterion {
                        text,
                        reason: format!(
                            "several roles made it ({}): write role:{function}#{instance}.ret",
                            many.iter().map(|k| k.role.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            };
            match differing_fields(fail, pass, &key) {
                Some(f) if f.iter().any(|(f, _, _)| *f == Field::Ret) => Ok((key, false)),
                _ => Err(ExplainError::Criterion {
                    text,
                    reason: format!(
                        "its return value is the same in runs {} and {}",
                        fail.id, pass.id
                    ),
                }),
            }
        }
    }
}

/// `--pin`: every safe function's return that is the same number in both
/// runs is forced to it in re-runs.
fn pins(fail: &View, pass: &View, functions: &[Function], safe: &SafeList) -> Vec<Replacement> {
    fail.values
        .iter()
        .filter(|(k, _)| functions.get(k.func as usize).is_some_and(|f| safe.is_safe(f)))
        .filter_map(|(k, vals)| {
            let v = vals.get(&Field::Ret)?;
            (pass.values.get(k)?.get(&Field::Ret) == Some(v)).then_some(())?;
            match v {
                Val::Num(n) => Some(Replacement::Return { call: k.clone(), value: *n }),
                _ => None,
            }
        })
        .collect()
}

/// True when a re-run can replace the difference.
fn replaceable<R: Rerun>(t: &Tester<'_, R>, d: usize) -> bool {
    minimize::replacement(&t.ctx.graph.diffs[d], Side::Pass, t.ctx.safe, t.ctx.functions).is_some()
}

/// Builds the chain from the target backwards (see the module comment).
fn chain<R: Rerun>(
    t: &mut Tester<'_, R>,
    target: usize,
) -> anyhow::Result<(Vec<Step>, Option<Test>)> {
    let mut steps_rev: Vec<Step> = vec![step(t, &[target], None)];
    let mut effects = vec![target];
    let mut seen: BTreeSet<usize> = BTreeSet::from([target]);
    loop {
        // The region behind the effects that no re-run can replace, and
        // the replaceable differences bordering it: the cut.
        let mut region: BTreeSet<usize> = BTreeSet::new();
        let mut cut: BTreeSet<usize> = BTreeSet::new();
        let mut work: Vec<usize> = effects.clone();
        while let Some(e) = work.pop() {
            for &c in &t.ctx.graph.causes[e] {
                if seen.contains(&c) {
                    continue;
                }
                if replaceable(t, c) {
                    cut.insert(c);
                } else if region.insert(c) {
                    work.push(c);
                }
            }
        }
        let cut: Vec<usize> = cut.into_iter().collect();
        if cut.is_empty() {
            push_region(t, &mut steps_rev, &region);
            break;
        }
        let chosen =
            if t.ctx.repeat == 0 { Some(cut.clone()) } else { t.minimize(&cut, &effects)? };
        let Some(causes) = chosen else {
            // Not sufficient: show what was tried, stop.
            let failed =
                t.tests.iter().rev().find(|x| x.causes == cut && x.effects == effects).cloned();
            push_region(t, &mut steps_rev, &region);
            let mut s = step(t, &cut, None);
            s.test.clone_from(&failed);
            steps_rev.push(s);
            steps_rev.reverse();
            return Ok((steps_rev, failed));
        };
        // The region nodes downstream of the chosen causes.
        let downstream = reachable_from(t.ctx.graph, &causes, &region);
        push_region(t, &mut steps_rev, &downstream);
        let test =
            t.tests.iter().rev().find(|x| x.causes == causes && x.effects == effects).cloned();
        steps_rev.push(step(t, &causes, test));
        seen.extend(region.iter().copied());
        seen.extend(causes.iter().copied());
        effects = causes;
    }
    steps_rev.reverse();
    Ok((steps_rev, None))
}

/// Region nodes that a path from `causes` reaches.
fn reachable_from(g: &Graph, causes: &[usize], region: &BTreeSet<usize>) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut changed = true;
    while changed {
        changed = false;
        for &r in region {
            if !out.contains(&r)
                && g.causes[r].iter().any(|c| causes.contains(c) || out.contains(c))
            {
                out.insert(r);
                changed = true;
            }
        }
    }
    out
}

/// Adds region nodes as untested steps, latest first (the chain is built
/// backwards).
fn push_region<R: Rerun>(t: &Tester<'_, R>, steps_rev: &mut Vec<Step>, region: &BTreeSet<usize>) {
    let mut nodes: Vec<usize> = region.iter().copied().collect();
    nodes.sort_by_key(|&d| std::cmp::Reverse((time(t.ctx.fail, &t.ctx.graph.diffs[d]), d)));
    for d in nodes {
        steps_rev.push(step(t, &[d], None));
    }
}

/// When a difference happened in the failing run (its call's entry).
fn time(v: &View, d: &Diff) -> u64 {
    let at = |k: &CallKey| v.entry_ns.get(k).copied().unwrap_or(0);
    match d {
        Diff::Value { call, .. } | Diff::Omitted { call, .. } => at(call),
        Diff::Order { read, write, .. } => at(read).max(at(&write.0)),
        Diff::ReadsFrom { reader, .. } => at(reader),
        Diff::Outcome { .. } => v.end_ns,
    }
}

fn step<R: Rerun>(t: &Tester<'_, R>, diffs: &[usize], test: Option<Test>) -> Step {
    let text = diffs
        .iter()
        .map(|&d| diff_text(&t.ctx.graph.diffs[d], t.ctx.functions))
        .collect::<Vec<_>>()
        .join(" + ");
    Step { diffs: diffs.to_vec(), text, test }
}

/// A call as the chain prints it: `T2.get#1`, calls of the main thread
/// without their role (`check#1`).
pub fn call_text(k: &CallKey, functions: &[Function]) -> String {
    let f = functions.get(k.func as usize).map_or("?", |f| f.name.as_str());
    if k.role == "main" {
        format!("{f}#{}", k.instance)
    } else {
        format!("{}.{f}#{}", k.role, k.instance)
    }
}

/// `T2.get#1 ret 100 vs 150`, `order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS)`.
pub fn diff_text(d: &Diff, functions: &[Function]) -> String {
    match d {
        Diff::Value { call, fields } => {
            let args: Vec<&(Field, Val, Val)> =
                fields.iter().filter(|(f, _, _)| *f != Field::Ret).collect();
            let mut parts = Vec::new();
            if args.len() == 1 {
                parts.push(format!("arg {} vs {}", args[0].1, args[0].2));
            } else if !args.is_empty() {
                for (f, a, b) in args {
                    if let Field::Arg(i) = f {
                        parts.push(format!("arg{} {a} vs {b}", i + 1));
                    }
                }
            }
            if let Some((_, a, b)) = fields.iter().find(|(f, _, _)| *f == Field::Ret) {
                parts.push(format!("ret {a} vs {b}"));
            }
            format!("{} {}", call_text(call, functions), parts.join(", "))
        }
        Diff::Order { read, write, read_first, .. } => {
            let (a, b) = (call_text(read, functions), call_text(&write.0, functions));
            if *read_first {
                format!("order {a} ≺ {b} (FAIL) vs ≻ (PASS)")
            } else {
                format!("order {b} ≺ {a} (FAIL) vs ≻ (PASS)")
            }
        }
        Diff::ReadsFrom { reader, object, fail, pass } => {
            let src = |s: &align::Source| {
                s.as_ref()
                    .map_or_else(|| "its first value".to_owned(), |(k, _)| call_text(k, functions))
            };
            format!(
                "{} reads {object} from {} vs {}",
                call_text(reader, functions),
                src(fail),
                src(pass)
            )
        }
        Diff::Omitted { call, present_in } => match present_in {
            Side::Fail => format!("{} happens (FAIL) vs not (PASS)", call_text(call, functions)),
            Side::Pass => {
                format!("{} does not happen (FAIL) vs does (PASS)", call_text(call, functions))
            }
        },
        Diff::Outcome { fail, pass } => format!("the run fails: {fail} vs {pass}"),
    }
}

impl Comparison {
    /// The chain as one line: `a ⇒ b ⇒ c`.
    pub fn chain_line(&self) -> String {
        self.chain.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ⇒ ")
    }
}

pub fn render_text(c: &Comparison, functions: &[Function], opts: &Options) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compare run {} ({}) with run {} ({})",
        c.fail.id, c.fail.reason, c.pass.id, c.pass.reason
    );
    let keys: BTreeSet<&CallKey> = c.fail.index.keys().chain(c.pass.index.keys()).collect();
    let omitted = keys
        .iter()
        .filter(|k| !c.fail.index.contains_key(*k) || !c.pass.index.contains_key(*k))
        .count();
    let differ = keys
        .iter()
        .filter(|k| differing_fields(&c.fail, &c.pass, k).is_some_and(|f| !f.is_empty()))
        .count();
    let reads = c
        .fail
        .reads_from
        .iter()
        .filter(|(r, s)| c.pass.reads_from.get(*r).is_some_and(|p| p != *s))
        .count();
    let _ = writeln!(
        out,
        "aligned {} calls: {differ} differ in value, {reads} read a shared object from another write, {omitted} happen in one run only",
        keys.len()
    );
    let _ = writeln!(
        out,
        "dual slice: {}",
        c.slice.calls.iter().map(|k| call_text(k, functions)).collect::<Vec<_>>().join(", ")
    );
    if opts.repeat == 0 {
        let _ = writeln!(out, "causal chain (from the dual slice; not tested: --repeat 0):");
    } else {
        let _ = writeln!(
            out,
            "causal chain (each tested link: cure the failing run and induce in the passing one, {} re-runs each, θ = {}):",
            opts.repeat, opts.theta
        );
    }
    for (i, s) in c.chain.iter().enumerate() {
        let lead = if i == 0 { "     " } else { "   ⇒ " };
        let test = s.test.as_ref().map_or_else(String::new, |t| {
            format!(
                "   [cure {}/{}, induce {}/{}{}]",
                t.cure.reproduced,
                t.cure.usable,
                t.induce.reproduced,
                t.induce.usable,
                if t.passed { "" } else { ": not sufficient" }
            )
        });
        let _ = writeln!(out, "{lead}{}{test}", s.text);
    }
    if let Some(t) = &c.stopped {
        let _ = writeln!(
            out,
            "the chain stops here: replacing {} did not both cure the failing run ({} of {} usable re-runs) and induce the passing one ({} of {}); what lies upstream is not shown to be a cause",
            t.causes
                .iter()
                .map(|&d| diff_text(&c.graph.diffs[d], functions))
                .collect::<Vec<_>>()
                .join(" + "),
            t.cure.reproduced,
            t.cure.usable,
            t.induce.reproduced,
            t.induce.usable
        );
    }
    if opts.repeat > 0 {
        let confounded: u32 = c.tests.iter().map(|t| t.cure.confounded + t.induce.confounded).sum();
        let _ = writeln!(
            out,
            "re-executions: {} in {} symmetric test(s); {confounded} confounded and discarded",
            c.reruns,
            c.tests.len()
        );
    }
    out
}

#[derive(Serialize)]
pub struct ComparisonJson<'a> {
    pub fail: u32,
    pub pass: u32,
    pub dual_slice: Vec<String>,
    pub differences: Vec<DiffJson<'a>>,
    pub chain: &'a [Step],
    pub chain_text: String,
    pub stopped: bool,
    pub tests: &'a [Test],
    pub reruns: usize,
}

#[derive(Serialize)]
pub struct DiffJson<'a> {
    pub id: usize,
    pub text: String,
    pub diff: &'a Diff,
    pub causes: Vec<usize>,
}

pub fn report<'a>(c: &'a Comparison, functions: &[Function]) -> ComparisonJson<'a> {
    ComparisonJson {
        fail: c.fail.id,
        pass: c.pass.id,
        dual_slice: c.slice.calls.iter().map(|k| call_text(k, functions)).collect(),
        differences: c
            .graph
            .diffs
            .iter()
            .enumerate()
            .map(|(id, d)| DiffJson {
                id,
                text: diff_text(d, functions),
                diff: d,
                causes: c.graph.causes[id].iter().copied().collect(),
            })
            .collect(),
        chain: &c.chain,
        chain_text: c.chain_line(),
        stopped: c.stopped.is_some(),
        tests: &c.tests,
        reruns: c.reruns,
    }
}

#[cfg(test)]
mod tests;
