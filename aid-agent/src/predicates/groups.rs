//! Predicates over groups of calls: every call of a function on the
//! threads of a class (optionally only from one traced caller). "Some call
//! of lookup from document_norm on the worker threads returns NULL" holds
//! in a failing run whichever worker made that call and how many calls
//! came before it.
//!
//! Per group, from the passing runs: whether any call returned an error,
//! the duration range over all its calls, the most common value, and the
//! count range per run. For single classes (one thread, the same role
//! every run) a group predicate is only made when the failing runs depart
//! at two or more different calls: if one call always does, its per-call
//! predicate says the same more precisely.
//!
//! Also per group, for each field of what the function's argument points
//! to (its [`crate::model::Pointee`]): whether two calls in one run were
//! for the same key. A failing run where they were, and passing runs
//! where they were not, give "stock_add is called twice on the importer
//! threads for the same it.sku": a duplicate insert, whoever made it (a
//! duplicate may also do no harm, so passing runs may show it too).

use super::{
    Anchor, Calls, Condition, Expected, ExtractConfig, Kind, PredKey, SameField,
    base::{Baseline, Funcs, Learned, error_test, run_local},
    calls::{call_set, site_of},
    index::{GroupKey, RunIndex, end_of},
};
use crate::model::identity::ClassId;
use crate::model::{
    Call, CallSet, FuncId, Intervention, PointeeField, REEXECUTE_RETRIES as RETRIES, Site,
    ValueTest,
};
use crate::util::fxhash::{FxMap, FxSet};

/// Above this many calls with a known value, a group gets no per-call
/// value predicate (its condition would carry them all).
const MAX_EXPECTED: usize = 4096;

#[derive(Clone, Debug, Default)]
struct Stats {
    /// Some passing call returned an error-class value.
    errors: bool,
    min_ns: u64,
    max_ns: u64,
    returned: u32,
    /// Some passing run ended inside a call of the group.
    unfinished: bool,
    /// Non-error values with counts (capped), for a fallback value.
    values: Vec<(i64, u32)>,
}

/// What the passing runs showed per group.
#[derive(Default)]
pub(super) struct GroupBase {
    stats: FxMap<GroupKey, Stats>,
    /// (min, max, runs seen) calls per run.
    counts: FxMap<GroupKey, (u32, u32, u32)>,
    /// (group, pointee field index) → passing runs in which two calls
    /// were for the same key.
    repeats: FxMap<(GroupKey, u8), u32>,
    runs: u32,
}

impl GroupBase {
    pub fn finish(&mut self, runs: u32) {
        self.runs = runs;
    }

    /// The count range of a group over the passing runs (0 where a run had
    /// none).
    pub fn class_counts(
        &self,
        func: FuncId,
        class: ClassId,
        within: Option<FuncId>,
    ) -> Option<(u32, u32)> {
        let &(lo, hi, seen) = self.counts.get(&(func, class, within))?;
        Some((if seen < self.runs { 0 } else { lo }, hi))
    }
}

/// The first call, in entry order, whose `field` has the contents of an
/// earlier call's (calls that read nothing are passed over).
pub(super) fn first_repeat<'r>(
    calls: impl Iterator<Item = &'r Call>,
    field: &PointeeField,
) -> Option<&'r Call> {
    let mut calls: Vec<&Call> = calls.filter(|c| c.content.is_some()).collect();
    calls.sort_by_key(|c| c.entry_ns);
    let mut keys: FxSet<&[u8]> = FxSet::default();
    calls.into_iter().find(|c| c.content.as_ref().is_some_and(|b| !keys.insert(field.bytes(b))))
}

/// The pointee fields of `f`, with their index.
fn fields(funcs: &Funcs, f: FuncId) -> impl Iterator<Item = (u8, &PointeeField)> {
    let fields = funcs.pointee(f).map(|p| p.fields.iter());
    fields.into_iter().flatten().enumerate().map(|(k, field)| (k as u8, field))
}

fn is_error(config: &ExtractConfig, funcs: &Funcs, f: FuncId, v: i64) -> bool {
    error_test(config, funcs.ret(f)).is_some_and(|(neg, zero)| (neg && v < 0) || (zero && v == 0))
}

pub(super) fn baseline(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    config: &ExtractConfig,
    base: &mut GroupBase,
) {
    for (g, list) in &idx.by_group {
        let e = base.counts.entry(*g).or_insert((u32::MAX, 0, 0));
        e.0 = e.0.min(list.len() as u32);
        e.1 = e.1.max(list.len() as u32);
        e.2 += 1;
        for (k, field) in fields(funcs, g.0) {
            let calls = list.iter().map(|&i| &idx.run.calls[i as usize]);
            if first_repeat(calls, field).is_some() {
                *base.repeats.entry((*g, k)).or_default() += 1;
            }
        }
        let st =
            base.stats.entry(*g).or_insert_with(|| Stats { min_ns: u64::MAX, ..Stats::default() });
        for &i in list {
            let c = &idx.run.calls[i as usize];
            match c.duration_ns() {
                // No duration nor value: an exception ended it.
                _ if c.unwound => continue,
                Some(d) => {
                    st.min_ns = st.min_ns.min(d);
                    st.max_ns = st.max_ns.max(d);
                    st.returned += 1;
                }
                None => st.unfinished = true,
            }
            let Some(v) = c.ret else { continue };
            if is_error(config, funcs, c.func, v) {
                st.errors = true;
            } else if let Some(e) = st.values.iter_mut().find(|(x, _)| *x == v) {
                e.1 += 1;
            } else if st.values.len() < 8 {
                st.values.push((v, 1));
            }
        }
    }
}

/// Departures seen in the failing runs, with (up to two of) the calls
/// that departed.
#[derive(Default)]
pub(super) struct Candidates {
    error: FxMap<GroupKey, Vec<Site>>,
    per_call: FxMap<GroupKey, Vec<Site>>,
    args: FxMap<(GroupKey, u8), Vec<Site>>,
    /// Fastest failing duration clearly above the passing maximum.
    slow: FxMap<GroupKey, (u64, Vec<Site>)>,
    /// Slowest failing duration clearly below the passing minimum.
    fast: FxMap<GroupKey, (u64, Vec<Site>)>,
    above: FxSet<GroupKey>,
    below: FxSet<GroupKey>,
    never: FxSet<GroupKey>,
    /// (group, pointee field index) with two calls for the same key.
    repeated: FxSet<(GroupKey, u8)>,
}

fn note(sites: &mut Vec<Site>, s: Site) {
    if sites.len() < 2 && !sites.contains(&s) {
        sites.push(s);
    }
}

pub(super) fn candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &Baseline,
    gbase: &GroupBase,
    config: &ExtractConfig,
    out: &mut Candidates,
) {
    let run = idx.run;
    for (g, list) in &idx.by_group {
        let single = funcs.classes.single(g.1).is_some();
        // A key that repeats in every passing run says nothing.
        for (k, field) in fields(funcs, g.0) {
            let passing = gbase.repeats.get(&(*g, k)).copied().unwrap_or(0);
            if passing < gbase.runs
                && first_repeat(list.iter().map(|&i| &run.calls[i as usize]), field).is_some()
            {
                out.repeated.insert((*g, k));
            }
        }
        for &i in list {
            let c = &run.calls[i as usize];
            let site = site_of(c);
            if let Some(v) = c.ret
                && funcs.value_ret(c.func)
                && is_error(config, funcs, c.func, v)
            {
                note(out.error.entry(*g).or_default(), site);
            }
            if single && let Some(st) = base.sites.get(&site) {
                if let (Some(v), Some(x)) = (c.ret, st.uniform())
                    && v != x
                    && funcs.value_ret(c.func)
                {
                    note(out.per_call.entry(*g).or_default(), site);
                }
                for a in 0..3 {
                    if let Some(x) = st.arg(a)
                        && c.args[a] != x
                    {
                        note(out.args.entry((*g, a as u8)).or_default(), site);
                    }
                }
            }
            let Some(st) = gbase.stats.get(g) else { continue };
            if st.returned == 0 || c.unwound {
                continue;
            }
            let active = c.active_ns(end_of(c, run));
            if !st.unfinished && active > st.max_ns + config.margin.gap(st.max_ns) {
                let e = out.slow.entry(*g).or_insert((u64::MAX, Vec::new()));
                e.0 = e.0.min(active);
                note(&mut e.1, site);
            }
            if let Some(d) = c.duration_ns()
                && d + config.margin.gap(st.min_ns) < st.min_ns
            {
                let e = out.fast.entry(*g).or_insert((0, Vec::new()));
                e.0 = e.0.max(d);
                note(&mut e.1, site);
            }
        }
        if !single {
            // A group no passing run had: it is called 0 times there.
            let (lo, hi) = gbase.class_counts(g.0, g.1, g.2).unwrap_or((0, 0));
            let n = list.len() as u32;
            if n > hi {
                out.above.insert(*g);
            }
            if n < lo {
                out.below.insert(*g);
            }
        }
    }
    for g in gbase.counts.keys() {
        let single = funcs.classes.single(g.1).is_some();
        if !single
            && gbase.class_counts(g.0, g.1, g.2).is_some_and(|(lo, _)| lo >= 1)
            && !idx.by_group.contains_key(g)
        {
            out.never.insert(*g);
        }
    }
}

fn key(kind: Kind, g: &GroupKey) -> PredKey {
    PredKey {
        kind,
        func: g.0,
        calls: Calls::Group { class: g.1, within: g.2 },
        other: None,
        arg: 0,
        callee: None,
    }
}

pub(super) fn predicates(
    funcs: &Funcs,
    base: &Baseline,
    gbase: &GroupBase,
    cands: &Candidates,
    config: &ExtractConfig,
) -> Vec<Learned> {
    let mut out = Vec::new();
    value_predicates(funcs, base, gbase, cands, config, &mut out);
    for (g, (failing_ns, sites)) in &cands.slow {
        let Some(st) = gbase.stats.get(g) else { continue };
        if !worth(funcs, g, sites) {
            continue;
        }
        let max_ns = st.max_ns + (failing_ns - st.max_ns) / 2;
        out.push((
            key(Kind::TooSlow, g),
            Condition::LongerThan { max_ns, passing_ns: st.max_ns, failing_ns: *failing_ns },
            Anchor::Overrun,
            None,
        ));
    }
    for (g, (failing_ns, sites)) in &cands.fast {
        let Some(st) = gbase.stats.get(g) else { continue };
        if !worth(funcs, g, sites) {
            continue;
        }
        let min_ns = st.min_ns - (st.min_ns - failing_ns).div_ceil(2);
        out.push((
            key(Kind::TooFast, g),
            Condition::ShorterThan { min_ns, passing_ns: st.min_ns, failing_ns: *failing_ns },
            Anchor::Exit,
            None,
        ));
    }
    for g in &cands.above {
        let (_, hi) = gbase.class_counts(g.0, g.1, g.2).unwrap_or((0, 0));
        out.push((
            key(Kind::CountAbove, g),
            Condition::CountAbove { max: hi },
            Anchor::ExcessCall,
            None,
        ));
    }
    for g in &cands.below {
        let (lo, _) = gbase.class_counts(g.0, g.1, g.2).unwrap_or((0, 0));
        out.push((
            key(Kind::CountBelow, g),
            Condition::CountBelow { min: lo },
            Anchor::RunEnd,
            None,
        ));
    }
    for g in &cands.never {
        out.push((key(Kind::NeverCalled, g), Condition::NoCall, Anchor::RunEnd, None));
    }
    for &(g, k) in &cands.repeated {
        let Some(pointee) = funcs.pointee(g.0) else { continue };
        let Some(field) = pointee.fields.get(usize::from(k)) else { continue };
        // Nothing forces a key not to repeat: the calls that would have to
        // change come before (a lookup that missed), not in these calls.
        out.push((
            PredKey { arg: k + 1, ..key(Kind::RepeatedKey, &g) },
            Condition::KeyRepeats { same: SameField { arg: pointee.arg, field: field.clone() } },
            Anchor::Entry,
            None,
        ));
    }
    out
}

/// A single class's group adds something only when two or more calls
/// departed; a class of many threads has no per-call keys at all.
fn worth(funcs: &Funcs, g: &GroupKey, sites: &[Site]) -> bool {
    funcs.classes.single(g.1).is_none() || sites.len() > 1
}

/// The group predicates on the values calls return and receive (an error
/// return, a return or an argument other than the one passing runs had at
/// that call), into `out`. Apart from [`predicates`] because these are the
/// ones that compare with passing runs call by call; the others compare
/// durations and counts.
fn value_predicates(
    funcs: &Funcs,
    base: &Baseline,
    gbase: &GroupBase,
    cands: &Candidates,
    config: &ExtractConfig,
    out: &mut Vec<Learned>,
) {
    for (g, sites) in &cands.error {
        let ret = funcs.ret(g.0);
        let Some((negative, zero)) = error_test(config, ret) else { continue };
        if !worth(funcs, g, sites) {
            continue;
        }
        let fallback = gbase
            .stats
            .get(g)
            .and_then(|s| s.values.iter().max_by_key(|&&(v, n)| (n, std::cmp::Reverse(v))))
            .map(|&(v, _)| v)
            .filter(|&v| !run_local(ret, v));
        let iv = Intervention::Reexecute {
            calls: call_set(funcs, g),
            test: ValueTest::Error { negative, zero },
            retries: RETRIES,
            fallback,
        };
        out.push((
            key(Kind::ErrorReturn, g),
            Condition::ErrorValue { negative, zero },
            Anchor::Exit,
            Some(iv),
        ));
    }
    for (g, sites) in &cands.per_call {
        if !worth(funcs, g, sites) {
            continue;
        }
        let Some(role) = funcs.classes.single(g.1) else { continue };
        let mut expected: Vec<Expected> = base
            .sites
            .iter()
            .filter(|(s, _)| s.func == g.0 && s.role == role)
            .filter_map(|(s, st)| Some((s.role, s.instance, st.uniform()?)))
            .collect();
        if expected.len() > MAX_EXPECTED {
            continue;
        }
        expected.sort_unstable();
        let ret = funcs.ret(g.0);
        // Re-execute each call that returns something else, so that what
        // it returns is genuine; a call that keeps doing so returns the
        // value passing runs returned for that very call.
        let each: Vec<Intervention> = expected
            .iter()
            .map(|&(role, instance, value)| Intervention::Reexecute {
                calls: CallSet { func: g.0, roles: vec![role], instance, within: g.2 },
                test: ValueTest::NotEqual { value },
                retries: RETRIES,
                fallback: (!run_local(ret, value)).then_some(value),
            })
            .collect();
        out.push((
            key(Kind::RetDiffers, g),
            Condition::RetNotPerCall { expected },
            Anchor::Exit,
            Some(Intervention::All { each }),
        ));
    }
    for ((g, arg), sites) in &cands.args {
        if !worth(funcs, g, sites) {
            continue;
        }
        let Some(role) = funcs.classes.single(g.1) else { continue };
        let a = *arg as usize;
        let mut expected: Vec<Expected> = base
            .sites
            .iter()
            .filter(|(s, _)| s.func == g.0 && s.role == role)
            .filter_map(|(s, st)| Some((s.role, s.instance, st.arg(a)?)))
            .collect();
        if expected.len() > MAX_EXPECTED {
            continue;
        }
        expected.sort_unstable();
        out.push((
            PredKey { arg: *arg, ..key(Kind::ArgDiffers, g) },
            Condition::ArgNotPerCall { expected },
            Anchor::Entry,
            None,
        ));
    }
}
