//! Learning the catalog from labelled runs, in streaming passes so that
//! only one run's index lives at a time:
//!
//! 0. every run → the thread classes, and which functions' calls on a
//!    class are told apart by their traced caller;
//! 1. passing runs → the baseline: per call site, the return values, the
//!    duration range, the argument values and whether it ever ran to the
//!    end of a run; per (function, role), the call-count range; per group,
//!    the same over all its calls ([`super::groups`]); the pairs of calls
//!    that ever overlapped ([`super::pairs`]);
//! 2. failing runs → candidates: every departure from that baseline, plus
//!    pairs of calls on different threads near each other in time (the
//!    order candidates, [`super::ExtractConfig::order_window`]);
//! 3. passing runs again → pair candidates that some passing run also
//!    showed are dropped ("differs from every passing run");
//! 4. the catalog: conditions, anchors, interventions and descriptions.
//!
//! Per-call keys (instance k on a role) are only made for threads whose
//! class is single (one thread, the same role in every run): in a pool,
//! "call 9 of lookup on worker#3" names a different job in every run,
//! and only group keys mean something.

use super::{
    Anchor, Calls, Catalog, Condition, ExtractConfig, Kind, PredId, PredKey, Predicate,
    PredicateError, after_all,
    base::{Baseline, Funcs, Learned, SiteStats, error_test, run_local},
    calls::site_of,
    deadlock::{self, CycleBase},
    describe::Names,
    groups::{self, GroupBase},
    index::{RunIndex, callers, end_of, pointer_mask},
    locks::{self, LockBase},
    outrun,
    pairs::{self, PairBase},
    sections::{self, SectionBase},
    statements::{self, StatementBase},
};
use crate::model::identity::{ClassId, Classes};
use crate::model::{
    CallSet, FuncId, Intervention, Label, REEXECUTE_RETRIES as RETRIES, Role, Run, Session, Site,
    ValueKind, ValueTest, ValueType,
};
use crate::util::fxhash::{FxMap, FxSet};

/// The session's complete runs, (passing, failing); an error when a run
/// calls a function the table does not have, or either label is missing.
fn split_runs(session: &Session) -> Result<(Vec<&Run>, Vec<&Run>), PredicateError> {
    for run in &session.runs {
        if let Some(c) = run.calls.iter().find(|c| c.func as usize >= session.functions.len()) {
            return Err(PredicateError::UnknownFunction { run: run.id, func: c.func });
        }
    }
    // Incomplete runs have holes in their call lists; the caller excludes
    // them, and so do we.
    let passing: Vec<&Run> =
        session.runs.iter().filter(|r| r.complete && r.label == Label::Pass).collect();
    let failing: Vec<&Run> =
        session.runs.iter().filter(|r| r.complete && r.label == Label::Fail).collect();
    if passing.is_empty() {
        return Err(PredicateError::NoPassingRuns);
    }
    if failing.is_empty() {
        return Err(PredicateError::NoFailingRuns);
    }
    Ok((passing, failing))
}

/// Long (about 125 lines): the four passes over the runs in order, each a
/// call per predicate family, sharing their bases and candidates.
pub fn learn(session: &Session, config: &ExtractConfig) -> Result<Catalog, PredicateError> {
    let (passing, failing) = split_runs(session)?;
    let funcs = functions(session, config, &passing, &failing);

    // Pass 1.
    let mut base = Baseline { sites: FxMap::default(), counts: FxMap::default() };
    let mut counts: FxMap<(FuncId, Role), (u32, u32, u32)> = FxMap::default();
    let mut gbase = GroupBase::default();
    let mut pbase = PairBase::default();
    let mut lbase = LockBase::default();
    let mut sbase = SectionBase::default();
    let mut stbase = StatementBase::default();
    let mut cbase = CycleBase::default();
    for run in &passing {
        let idx = funcs.index(run);
        site_baseline(&idx, &funcs, &mut base.sites);
        for (f, r, n) in idx.groups() {
            let e = counts.entry((f, r)).or_insert((u32::MAX, 0, 0));
            e.0 = e.0.min(n);
            e.1 = e.1.max(n);
            e.2 += 1;
        }
        groups::baseline(&idx, &funcs, config, &mut gbase);
        pairs::baseline(&idx, &funcs, &mut pbase);
        locks::baseline(&idx, &funcs, &mut lbase);
        sections::baseline(&idx, &funcs, &mut sbase);
        statements::baseline(&idx, &funcs, &mut stbase);
        deadlock::baseline(&idx, &funcs, &mut cbase);
    }
    let n = passing.len() as u32;
    base.counts = counts
        .into_iter()
        .map(|(k, (lo, hi, seen))| (k, (if seen < n { 0 } else { lo }, hi)))
        .collect();
    gbase.finish(n);

    // Pass 2.
    let mut keys: FxSet<PredKey> = FxSet::default();
    let mut extremes = Extremes::default();
    let mut gcands = groups::Candidates::default();
    let mut pcands = pairs::Candidates::default();
    let mut lcands = locks::Candidates::default();
    let mut scands = sections::Candidates::default();
    let mut stcands = statements::Candidates::default();
    let mut ccands = deadlock::Candidates::default();
    let mut acands = after_all::Candidates::default();
    let mut ocands = outrun::Candidates::default();
    for run in &failing {
        let idx = funcs.index(run);
        site_candidates(&idx, &funcs, &base, config, &mut keys, &mut extremes);
        groups::candidates(&idx, &funcs, &base, &gbase, config, &mut gcands);
        pairs::candidates(&idx, &funcs, &pbase, config, &mut pcands);
        locks::candidates(&idx, &funcs, &lbase, &mut lcands);
        sections::candidates(&idx, &funcs, &sbase, &mut scands);
        statements::candidates(&idx, &funcs, &stbase, &mut stcands);
        deadlock::candidates(&idx, &funcs, &cbase, &mut ccands);
        after_all::candidates(&idx, &funcs, &mut acands);
        outrun::candidates(&idx, &funcs, &mut ocands);
    }

    // Pass 3.
    let pairs = pairs::filter(&passing, &funcs, pcands);
    sections::vet(&passing, &funcs, &mut scands);
    statements::vet(&passing, &funcs, &mut stcands);
    outrun::vet(&passing, &funcs, &mut ocands);
    let after = after_all::vet(&passing, &funcs, acands);

    // Pass 4.
    let names = Names::new(session, &funcs.classes);
    let mut out = Vec::new();
    let mut keys: Vec<PredKey> = keys.into_iter().collect();
    keys.sort_unstable();
    for key in keys {
        if let Some(p) = site_predicate(key, &funcs, &base, &extremes, config) {
            out.push(p);
        }
    }
    out.extend(groups::predicates(&funcs, &base, &gbase, &gcands, config));
    out.extend(pairs::predicates(&funcs, &pairs));
    out.extend(locks::predicates(&funcs, &lcands));
    out.extend(sections::predicates(&funcs, &scands));
    out.extend(statements::predicates(&funcs, &stcands));
    out.extend(deadlock::predicates(&funcs, &ccands));
    out.extend(outrun::predicates(&funcs, &ocands));
    out.extend(after);
    out.sort_by_key(|a| a.0);
    out.dedup_by(|a, b| a.0 == b.0);

    let mut predicates = vec![Predicate {
        id: PredId(0),
        key: PredKey::failure(),
        description: "the run fails".into(),
        described: names.structured(&PredKey::failure(), &Condition::Failure),
        anchor: Anchor::RunEnd,
        condition: Condition::Failure,
        intervention: None,
        intervention_text: String::new(),
    }];
    for (key, condition, anchor, intervention) in out {
        let counts = match key.calls {
            Calls::Site { role, .. } => base.counts.get(&(key.func, role)).copied(),
            Calls::Group { class, within } => gbase.class_counts(key.func, class, within),
        };
        let id = PredId(predicates.len() as u32);
        let intervention_text =
            intervention.as_ref().map(|iv| names.intervention(iv)).unwrap_or_default();
        predicates.push(Predicate {
            id,
            key,
            description: names.describe(&key, &condition, counts),
            described: names.structured(&key, &condition),
            anchor,
            condition,
            intervention,
            intervention_text,
        });
    }
    let classes = funcs.classes.clone();
    let mut catalog = Catalog::from_parts(
        predicates,
        passing.len() as u32,
        failing.len() as u32,
        session,
        classes,
    );
    catalog.by_caller = funcs.by_caller.iter().copied().collect();
    Ok(catalog)
}

/// What the passes need to know of each function (its pointee, pointer
/// masks, value types, whether it restates the failure, its lock
/// operations) and the thread classes and callers learned from all
/// complete runs: built once, before the passes.
pub(super) fn functions(
    session: &Session,
    config: &ExtractConfig,
    passing: &[&Run],
    failing: &[&Run],
) -> Funcs {
    let keep: Vec<bool> = session.functions.iter().map(|f| !f.internal).collect();
    let classes = Classes::learn(passing.iter().chain(failing).copied());
    let by_caller = split_by_caller(passing.iter().chain(failing).copied(), &keep, &classes);
    Funcs {
        pointees: session.functions.iter().map(|f| f.pointee.clone()).collect(),
        masks: session.functions.iter().map(pointer_mask).collect(),
        ret: session.functions.iter().map(|f| f.ret).collect(),
        params: session
            .functions
            .iter()
            .map(|f| {
                let p = |i: usize| f.params.get(i).copied().unwrap_or(ValueType::UNKNOWN);
                [p(0), p(1), p(2)]
            })
            .collect(),
        restates: session
            .functions
            .iter()
            .map(|f| {
                f.name == "main" || f.symbol == "main" || config.restates_failure.contains(&f.id)
            })
            .collect(),
        keep,
        classes,
        by_caller,
        lock_ops: sections::lock_ops(&session.functions),
        lock_calls: deadlock::lock_calls(&session.functions),
        points: super::base::Points::new(&session.functions),
    }
}

/// Which (function, class) pairs have calls from more than one traced
/// caller (counting "no traced caller" as one): their groups are split by
/// caller, so "lookup from norm" and "lookup from intern" are told apart.
fn split_by_caller<'a>(
    runs: impl Iterator<Item = &'a Run>,
    keep: &[bool],
    classes: &Classes,
) -> FxSet<(FuncId, ClassId)> {
    let keep = |f: FuncId| keep.get(f as usize).copied().unwrap_or(false);
    let mut seen: FxMap<(FuncId, ClassId), Option<FuncId>> = FxMap::default();
    let mut split = FxSet::default();
    for run in runs {
        let class: FxMap<Role, ClassId> = classes.of_run(run);
        for (c, caller) in run.calls.iter().zip(callers(run, keep)) {
            let Some(&cl) = class.get(&c.role) else { continue };
            if !keep(c.func) {
                continue;
            }
            let first = *seen.entry((c.func, cl)).or_insert(caller);
            if first != caller {
                split.insert((c.func, cl));
            }
        }
    }
    split
}

fn site_baseline(idx: &RunIndex<'_>, funcs: &Funcs, sites: &mut FxMap<Site, SiteStats>) {
    for c in idx.run.calls.iter().filter(|c| funcs.keep(c.func) && c.instance > 0) {
        if !funcs.single(idx, c.role) {
            continue;
        }
        let fresh = !sites.contains_key(&site_of(c));
        let st = sites
            .entry(site_of(c))
            .or_insert_with(|| SiteStats { min_ns: u64::MAX, ..Default::default() });
        for i in 0..3 {
            if !funcs.value_arg(c.func, i) {
                continue;
            }
            match st.args[i] {
                _ if fresh => st.args[i] = Some(c.args[i]),
                Some(v) if v != c.args[i] => st.args_varied[i] = true,
                _ => {}
            }
        }
        match (c.ret, c.duration_ns()) {
            // No duration nor value: an exception ended it.
            _ if c.unwound => {}
            (ret, Some(d)) => {
                st.min_ns = st.min_ns.min(d);
                st.max_ns = st.max_ns.max(d);
                st.returned += 1;
                if let Some(v) = ret {
                    st.add_value(v);
                }
            }
            (_, None) => st.unfinished = true,
        }
    }
}

/// Per site, the failing durations closest to the passing range: the
/// fastest one clearly above the passing maximum, the slowest one clearly
/// below the passing minimum.
#[derive(Default)]
pub(super) struct Extremes {
    pub slow: FxMap<Site, u64>,
    pub fast: FxMap<Site, u64>,
}

/// Departures of one failing run's single-thread calls from the baseline.
fn site_candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &Baseline,
    config: &ExtractConfig,
    keys: &mut FxSet<PredKey>,
    extremes: &mut Extremes,
) {
    let run = idx.run;
    for c in run.calls.iter().filter(|c| funcs.keep(c.func) && c.instance > 0) {
        if !funcs.single(idx, c.role) {
            continue;
        }
        let site = site_of(c);
        if let Some(v) = c.ret
            && funcs.value_ret(c.func)
            && let Some((neg, zero)) = error_test(config, funcs.ret(c.func))
            && ((neg && v < 0) || (zero && v == 0))
        {
            keys.insert(PredKey::at(Kind::ErrorReturn, site));
        }
        let Some(st) = base.sites.get(&site) else {
            continue;
        };
        for i in 0..3 {
            if let Some(x) = st.arg(i)
                && c.args[i] != x
            {
                keys.insert(PredKey { arg: i as u8, ..PredKey::at(Kind::ArgDiffers, site) });
            }
        }
        if st.returned == 0 {
            continue;
        }
        if let (Some(v), Some(x)) = (c.ret, st.uniform())
            && v != x
            && funcs.value_ret(c.func)
        {
            keys.insert(PredKey::at(Kind::RetDiffers, site));
        }
        if c.unwound {
            continue;
        }
        let active = c.active_ns(end_of(c, run));
        if !st.unfinished && active > st.max_ns + config.margin.gap(st.max_ns) {
            keys.insert(PredKey::at(Kind::TooSlow, site));
            let e = extremes.slow.entry(site).or_insert(u64::MAX);
            *e = (*e).min(active);
        }
        if let Some(d) = c.duration_ns().filter(|&d| d + config.margin.gap(st.min_ns) < st.min_ns) {
            keys.insert(PredKey::at(Kind::TooFast, site));
            let e = extremes.fast.entry(site).or_insert(0);
            *e = (*e).max(d);
        }
    }
    let count_key = |kind: Kind, f: FuncId, r: Role| PredKey {
        kind,
        func: f,
        calls: Calls::Site { role: r, instance: 0 },
        other: None,
        arg: 0,
        callee: None,
    };
    for (f, r, n) in idx.groups() {
        if !funcs.single(idx, r) {
            continue;
        }
        let (lo, hi) = base.counts.get(&(f, r)).copied().unwrap_or((0, 0));
        if n > hi {
            keys.insert(count_key(Kind::CountAbove, f, r));
        }
        if n < lo {
            keys.insert(count_key(Kind::CountBelow, f, r));
        }
    }
    for (&(f, r), &(lo, _)) in &base.counts {
        if lo >= 1 && idx.count(f, r) == 0 && funcs.single(idx, r) {
            keys.insert(count_key(Kind::NeverCalled, f, r));
        }
    }
}

/// Condition, anchor and intervention of a per-site key (None: the
/// baseline does not support it after all).
fn site_predicate(
    key: PredKey,
    funcs: &Funcs,
    base: &Baseline,
    extremes: &Extremes,
    config: &ExtractConfig,
) -> Option<Learned> {
    let site = key.site()?;
    let st = base.sites.get(&site);
    let counts = base.counts.get(&(key.func, site.role)).copied();
    let ret = funcs.ret(key.func);
    let (condition, anchor, intervention) = match key.kind {
        Kind::RetDiffers => {
            let v = st.and_then(SiteStats::uniform)?;
            // A passing run's address means nothing in another run.
            let iv =
                (!run_local(ret, v)).then_some(Intervention::OverrideReturn { site, value: v });
            (Condition::RetNot { value: v }, Anchor::Exit, iv)
        }
        Kind::ErrorReturn => {
            let (negative, zero) = error_test(config, ret)?;
            let is_error = |v: i64| (negative && v < 0) || (zero && v == 0);
            let fallback = st.and_then(|s| s.usual(is_error)).filter(|&v| !run_local(ret, v));
            let iv = Intervention::Reexecute {
                calls: CallSet::site(site),
                test: ValueTest::Error { negative, zero },
                retries: RETRIES,
                fallback,
            };
            (Condition::ErrorValue { negative, zero }, Anchor::Exit, Some(iv))
        }
        Kind::TooSlow => {
            let st = st?;
            // Premature return needs the value every passing run returned;
            // a void function needs none; an address from another run is
            // no value to return.
            let void = ret.kind == ValueKind::Void;
            let value = if void { Some(0) } else { st.uniform().filter(|&v| !run_local(ret, v)) };
            let failing_ns = extremes.slow.get(&site).copied()?;
            let max_ns = st.max_ns + (failing_ns - st.max_ns) / 2;
            (
                Condition::LongerThan { max_ns, passing_ns: st.max_ns, failing_ns },
                Anchor::Overrun,
                value.map(|value| Intervention::ReturnEarly { site, value }),
            )
        }
        Kind::TooFast => {
            let st = st?;
            let delay_us = st.min_ns.div_ceil(1000).max(1);
            let failing_ns = extremes.fast.get(&site).copied()?;
            let min_ns = st.min_ns - (st.min_ns - failing_ns).div_ceil(2);
            (
                Condition::ShorterThan { min_ns, passing_ns: st.min_ns, failing_ns },
                Anchor::Exit,
                Some(Intervention::DelayExit { site, delay_us }),
            )
        }
        Kind::ArgDiffers => {
            let v = st?.arg(key.arg as usize)?;
            (Condition::ArgNot { value: v }, Anchor::Entry, None)
        }
        Kind::CountAbove => {
            (Condition::CountAbove { max: counts.map_or(0, |c| c.1) }, Anchor::ExcessCall, None)
        }
        Kind::CountBelow => {
            (Condition::CountBelow { min: counts.map_or(0, |c| c.0) }, Anchor::RunEnd, None)
        }
        Kind::NeverCalled => (Condition::NoCall, Anchor::RunEnd, None),
        _ => return None,
    };
    Some((key, condition, anchor, intervention))
}
