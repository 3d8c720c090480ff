//! Learning the catalog from labelled runs, in four streaming passes so
//! that only one run's index lives at a time:
//!
//! 1. passing runs → the baseline: per instance, the return values, the
//!    duration range and whether it ever ran to the end of a run; per
//!    (function, role), the call-count range; the pairs of calls that ever
//!    overlapped on the same object;
//! 2. failing runs → candidates: every departure from that baseline, plus
//!    pairs of calls on different roles that ended just before one another
//!    started (the order candidates, [`super::ExtractConfig::order_window`]);
//! 3. passing runs again → order candidates that some passing run also
//!    showed are dropped ("differs from every passing run");
//! 4. the catalog: conditions, anchors, interventions and descriptions.

use super::{
    Catalog, Condition, ExtractConfig, Kind, PredId, PredKey, Predicate, PredicateError,
    describe::Names,
    index::{FxMap, FxSet, RunIndex, end_of, pointer_mask, pointers},
};
use crate::model::{
    FuncId, Intervention, Label, Point, Role, Run, Session, Site, ValueKind, ValueType,
};

/// What the passing runs showed for one call site.
#[derive(Clone, Debug, Default)]
struct SiteStats {
    /// Passing runs that returned from this instance.
    returned: u32,
    /// Distinct return values with counts (capped; only the most common
    /// matter for interventions).
    values: Vec<(i64, u32)>,
    /// More distinct values than `values` keeps.
    many_values: bool,
    min_ns: u64,
    max_ns: u64,
    /// Some passing run ended inside this call: its longest duration is
    /// unknown, so "too slow" cannot be decided.
    unfinished: bool,
}

const MAX_VALUES: usize = 8;

impl SiteStats {
    fn uniform(&self) -> Option<i64> {
        match (self.values.as_slice(), self.many_values) {
            ([(v, _)], false) => Some(*v),
            _ => None,
        }
    }

    /// The most common passing value that is not an error.
    fn usual(&self, is_error: impl Fn(i64) -> bool) -> Option<i64> {
        self.values
            .iter()
            .filter(|(v, _)| !is_error(*v))
            .max_by_key(|&&(v, n)| (n, std::cmp::Reverse(v)))
            .map(|&(v, _)| v)
    }
}

struct Baseline {
    sites: FxMap<Site, SiteStats>,
    /// (func, role) → (min, max) calls over passing runs (0 where absent).
    counts: FxMap<(FuncId, Role), (u32, u32)>,
    overlaps: FxSet<(Site, Site)>,
}

/// Per-function facts extraction needs.
struct Funcs {
    keep: Vec<bool>,
    masks: Vec<u8>,
    ret: Vec<ValueType>,
}

impl Funcs {
    fn keep(&self, f: FuncId) -> bool {
        self.keep.get(f as usize).copied().unwrap_or(false)
    }
}

pub fn learn(session: &Session, config: &ExtractConfig) -> Result<Catalog, PredicateError> {
    let funcs = Funcs {
        keep: session.functions.iter().map(|f| !f.internal).collect(),
        masks: session.functions.iter().map(pointer_mask).collect(),
        ret: session.functions.iter().map(|f| f.ret).collect(),
    };
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
    let base = baseline(&passing, &funcs);
    let (mut keys, order_cands, extremes) = candidates(&failing, &funcs, &base, config);
    let orders = filter_orders(&passing, &funcs, order_cands);
    keys.extend(orders.keys().map(|&(a, b)| order_key(a, b)));
    let mut keys: Vec<PredKey> = keys.into_iter().collect();
    keys.sort_unstable();

    let names = Names::new(session);
    let error_test =
        |f: FuncId| error_test(config, funcs.ret.get(f as usize).copied().unwrap_or_default());
    let mut predicates = vec![Predicate {
        id: PredId(0),
        key: PredKey::failure(),
        description: names.describe(&PredKey::failure(), &Condition::Failure, None),
        anchor: Kind::Failure.anchor(),
        condition: Condition::Failure,
        intervention: None,
        intervention_text: String::new(),
    }];
    for key in keys {
        let site = key.site();
        let st = base.sites.get(&site);
        let counts = base.counts.get(&(key.func, key.role)).copied();
        let (condition, intervention) = match key.kind {
            Kind::Failure => continue,
            Kind::RetDiffers => {
                let Some(v) = st.and_then(SiteStats::uniform) else {
                    continue;
                };
                (
                    Condition::RetNot { value: v },
                    Some(Intervention::OverrideReturn { site, value: v }),
                )
            }
            Kind::ErrorReturn => {
                let Some((negative, zero)) = error_test(key.func) else {
                    continue;
                };
                let usual = st.and_then(|s| s.usual(|v| (negative && v < 0) || (zero && v == 0)));
                (
                    Condition::ErrorValue { negative, zero },
                    usual.map(|value| Intervention::OverrideReturn { site, value }),
                )
            }
            Kind::TooSlow => {
                let Some(st) = st else { continue };
                // Premature return needs the value every passing run
                // returned; a void function needs none.
                let void =
                    funcs.ret.get(key.func as usize).is_some_and(|t| t.kind == ValueKind::Void);
                let value = if void { Some(0) } else { st.uniform() };
                let failing_ns = extremes.slow.get(&site).copied().unwrap_or(st.max_ns + 1);
                let max_ns = st.max_ns + (failing_ns - st.max_ns) / 2;
                (
                    Condition::LongerThan { max_ns, passing_ns: st.max_ns, failing_ns },
                    value.map(|value| Intervention::ReturnEarly { site, value }),
                )
            }
            Kind::TooFast => {
                let Some(st) = st else { continue };
                let delay_us = st.min_ns.div_ceil(1000).max(1);
                let failing_ns =
                    extremes.fast.get(&site).copied().unwrap_or(st.min_ns.saturating_sub(1));
                let min_ns = st.min_ns - (st.min_ns - failing_ns).div_ceil(2);
                (
                    Condition::ShorterThan { min_ns, passing_ns: st.min_ns, failing_ns },
                    Some(Intervention::DelayExit { site, delay_us }),
                )
            }
            Kind::CountAbove => (Condition::CountAbove { max: counts.map_or(0, |c| c.1) }, None),
            Kind::CountBelow => (Condition::CountBelow { min: counts.map_or(0, |c| c.0) }, None),
            Kind::NeverCalled => (Condition::NoCall, None),
            Kind::Order => {
                let Some(other) = key.other else { continue };
                let reversed = orders.get(&(site, other)).copied().unwrap_or(false);
                let hold = if reversed {
                    // Passing runs ran `other` to completion before this
                    // call started: restore that.
                    Intervention::HoldUntil {
                        site,
                        point: Point::Entry,
                        until: other,
                        until_point: Point::Exit,
                    }
                } else {
                    // Passing runs had `other` start before this call
                    // ended: hold the exit until it has.
                    Intervention::HoldUntil {
                        site,
                        point: Point::Exit,
                        until: other,
                        until_point: Point::Entry,
                    }
                };
                (Condition::EndsBefore, Some(hold))
            }
            Kind::Overlap => {
                let Some(other) = key.other else { continue };
                (Condition::OverlapSamePointer, Some(Intervention::Serialize { a: site, b: other }))
            }
        };
        let id = PredId(predicates.len() as u32);
        let intervention_text =
            intervention.as_ref().map(|iv| names.intervention(iv)).unwrap_or_default();
        predicates.push(Predicate {
            id,
            key,
            description: names.describe(&key, &condition, counts),
            anchor: key.kind.anchor(),
            condition,
            intervention,
            intervention_text,
        });
    }
    Ok(Catalog::from_parts(predicates, passing.len() as u32, failing.len() as u32, session))
}

/// Which error test applies to a return type: (negative, zero), or None
/// when the type has no error values we can recognise.
fn error_test(config: &ExtractConfig, t: ValueType) -> Option<(bool, bool)> {
    let e = config.error;
    let (negative, zero) = match t.kind {
        ValueKind::Void | ValueKind::Float => return None,
        ValueKind::Pointer => (false, e.null_pointer),
        ValueKind::Signed | ValueKind::Unknown => (e.negative, e.zero),
        ValueKind::Unsigned | ValueKind::Bool => (false, e.zero),
    };
    (negative || zero).then_some((negative, zero))
}

fn order_key(a: Site, b: Site) -> PredKey {
    PredKey { kind: Kind::Order, func: a.func, role: a.role, instance: a.instance, other: Some(b) }
}

fn site_of(c: &crate::model::Call) -> Site {
    Site { func: c.func, role: c.role, instance: c.instance }
}

fn baseline(passing: &[&Run], funcs: &Funcs) -> Baseline {
    let mut sites: FxMap<Site, SiteStats> = FxMap::default();
    let mut counts: FxMap<(FuncId, Role), (u32, u32, u32)> = FxMap::default();
    let mut overlaps = FxSet::default();
    for run in passing {
        let idx = RunIndex::new(run, |f| funcs.keep(f));
        for c in run.calls.iter().filter(|c| funcs.keep(c.func) && c.instance > 0) {
            let st = sites
                .entry(site_of(c))
                .or_insert_with(|| SiteStats { min_ns: u64::MAX, ..Default::default() });
            match (c.ret, c.duration_ns()) {
                (ret, Some(d)) => {
                    st.min_ns = st.min_ns.min(d);
                    st.max_ns = st.max_ns.max(d);
                    st.returned += 1;
                    if let Some(v) = ret {
                        if let Some(e) = st.values.iter_mut().find(|(x, _)| *x == v) {
                            e.1 += 1;
                        } else if st.values.len() < MAX_VALUES {
                            st.values.push((v, 1));
                        } else {
                            st.many_values = true;
                        }
                    }
                }
                (_, None) => st.unfinished = true,
            }
        }
        for (f, r, n) in idx.groups() {
            let e = counts.entry((f, r)).or_insert((u32::MAX, 0, 0));
            e.0 = e.0.min(n);
            e.1 = e.1.max(n);
            e.2 += 1;
        }
        overlaps.extend(overlap_pairs(run, funcs));
    }
    let n = passing.len() as u32;
    let counts = counts
        .into_iter()
        .map(|(k, (lo, hi, seen))| (k, (if seen < n { 0 } else { lo }, hi)))
        .collect();
    Baseline { sites, counts, overlaps }
}

/// Departures from the baseline in the failing runs, and order candidates.
/// Per site, the failing durations closest to the passing range: the
/// fastest one above the passing maximum, the slowest one below the
/// passing minimum.
#[derive(Default)]
struct Extremes {
    slow: FxMap<Site, u64>,
    fast: FxMap<Site, u64>,
}

fn candidates(
    failing: &[&Run],
    funcs: &Funcs,
    base: &Baseline,
    config: &ExtractConfig,
) -> (FxSet<PredKey>, FxSet<(Site, Site)>, Extremes) {
    let mut extremes = Extremes::default();
    let mut keys: FxSet<PredKey> = FxSet::default();
    let mut orders: FxSet<(Site, Site)> = FxSet::default();
    let key = |kind: Kind, s: Site| PredKey {
        kind,
        func: s.func,
        role: s.role,
        instance: s.instance,
        other: None,
    };
    for run in failing {
        let idx = RunIndex::new(run, |f| funcs.keep(f));
        for c in run.calls.iter().filter(|c| funcs.keep(c.func) && c.instance > 0) {
            let site = site_of(c);
            if let Some(v) = c.ret {
                let t = funcs.ret.get(c.func as usize).copied().unwrap_or_default();
                if let Some((neg, zero)) = error_test(config, t)
                    && ((neg && v < 0) || (zero && v == 0))
                {
                    keys.insert(key(Kind::ErrorReturn, site));
                }
            }
            let Some(st) = base.sites.get(&site) else {
                continue;
            };
            if st.returned == 0 {
                continue;
            }
            if let (Some(v), Some(x)) = (c.ret, st.uniform())
                && v != x
            {
                keys.insert(key(Kind::RetDiffers, site));
            }
            let active = c.active_ns(end_of(c, run));
            if !st.unfinished && active > st.max_ns {
                keys.insert(key(Kind::TooSlow, site));
                let e = extremes.slow.entry(site).or_insert(u64::MAX);
                *e = (*e).min(active);
            }
            if let Some(d) = c.duration_ns().filter(|&d| d < st.min_ns) {
                keys.insert(key(Kind::TooFast, site));
                let e = extremes.fast.entry(site).or_insert(0);
                *e = (*e).max(d);
            }
        }
        let count_key = |kind: Kind, f: FuncId, r: Role| PredKey {
            kind,
            func: f,
            role: r,
            instance: 0,
            other: None,
        };
        for (f, r, n) in idx.groups() {
            let (lo, hi) = base.counts.get(&(f, r)).copied().unwrap_or((0, 0));
            if n > hi {
                keys.insert(count_key(Kind::CountAbove, f, r));
            }
            if n < lo {
                keys.insert(count_key(Kind::CountBelow, f, r));
            }
        }
        for (&(f, r), &(lo, _)) in &base.counts {
            if lo >= 1 && idx.count(f, r) == 0 {
                keys.insert(count_key(Kind::NeverCalled, f, r));
            }
        }
        for (a, b) in overlap_pairs(run, funcs) {
            if !base.overlaps.contains(&(a, b)) {
                keys.insert(PredKey {
                    kind: Kind::Overlap,
                    func: a.func,
                    role: a.role,
                    instance: a.instance,
                    other: Some(b),
                });
            }
        }
        near_orders(run, funcs, config.order_window, &mut orders);
    }
    (keys, orders, extremes)
}

/// Pairs (a, b), a before b, of calls on different roles that overlap in
/// time while sharing a pointer-like argument. Canonical order: a < b.
fn overlap_pairs(run: &Run, funcs: &Funcs) -> Vec<(Site, Site)> {
    let mut by_ptr: FxMap<i64, Vec<u32>> = FxMap::default();
    for (i, c) in run.calls.iter().enumerate() {
        if !funcs.keep(c.func) || c.instance == 0 {
            continue;
        }
        let mask = funcs.masks.get(c.func as usize).copied().unwrap_or(0);
        for p in pointers(c, mask) {
            by_ptr.entry(p).or_default().push(i as u32);
        }
    }
    let mut out = Vec::new();
    let mut active: Vec<u32> = Vec::new();
    for list in by_ptr.values_mut().filter(|l| l.len() > 1) {
        list.sort_by_key(|&i| run.calls[i as usize].entry_ns);
        active.clear();
        for &i in list.iter() {
            let c = &run.calls[i as usize];
            active.retain(|&j| end_of(&run.calls[j as usize], run) > c.entry_ns);
            for &j in &active {
                let d = &run.calls[j as usize];
                if d.role != c.role {
                    let (x, y) = (site_of(c), site_of(d));
                    out.push(if x < y { (x, y) } else { (y, x) });
                }
            }
            active.push(i);
        }
    }
    out
}

/// Order candidates of one failing run: for each call, the `w` calls per
/// other role that ended last before it started and the `w` that started
/// first after it ended.
fn near_orders(run: &Run, funcs: &Funcs, w: usize, out: &mut FxSet<(Site, Site)>) {
    if w == 0 {
        return;
    }
    let mut roles: Vec<Role> =
        run.calls.iter().filter(|c| funcs.keep(c.func)).map(|c| c.role).collect();
    roles.sort_unstable();
    roles.dedup();
    let slot = |r: Role| roles.binary_search(&r).unwrap_or(0);
    let mut exits: Vec<Vec<(u64, u32)>> = vec![Vec::new(); roles.len()];
    let mut entries: Vec<Vec<(u64, u32)>> = vec![Vec::new(); roles.len()];
    for (i, c) in run.calls.iter().enumerate() {
        if !funcs.keep(c.func) || c.instance == 0 {
            continue;
        }
        entries[slot(c.role)].push((c.entry_ns, i as u32));
        if let Some(x) = c.exit_ns {
            exits[slot(c.role)].push((x, i as u32));
        }
    }
    for v in exits.iter_mut().chain(entries.iter_mut()) {
        v.sort_unstable();
    }
    for c in run.calls.iter().filter(|c| funcs.keep(c.func) && c.instance > 0) {
        let me = slot(c.role);
        for other in 0..roles.len() {
            if other == me {
                continue;
            }
            let ex = &exits[other];
            let p = ex.partition_point(|e| e.0 < c.entry_ns);
            for e in &ex[p.saturating_sub(w)..p] {
                out.insert((site_of(&run.calls[e.1 as usize]), site_of(c)));
            }
            if let Some(x) = c.exit_ns {
                let en = &entries[other];
                let q = en.partition_point(|e| e.0 <= x);
                for e in &en[q..(q + w).min(en.len())] {
                    out.insert((site_of(c), site_of(&run.calls[e.1 as usize])));
                }
            }
        }
    }
}

/// Keeps the order candidates no passing run shows, that co-occur in at
/// least one passing run; the value says whether every passing run had the
/// strict reverse order.
fn filter_orders(
    passing: &[&Run],
    funcs: &Funcs,
    cands: FxSet<(Site, Site)>,
) -> FxMap<(Site, Site), bool> {
    // (pair, co-occurrences, always reversed)
    let mut live: Vec<((Site, Site), u32, bool)> =
        cands.into_iter().map(|p| (p, 0, true)).collect();
    live.sort_unstable_by_key(|e| e.0);
    for run in passing {
        if live.is_empty() {
            break;
        }
        let idx = RunIndex::new(run, |f| funcs.keep(f));
        live.retain_mut(|(pair, co, reversed)| {
            let (Some(a), Some(b)) = (idx.call(pair.0), idx.call(pair.1)) else {
                return true;
            };
            *co += 1;
            if a.exit_ns.is_some_and(|x| x < b.entry_ns) {
                return false;
            }
            if b.exit_ns.is_none_or(|x| x >= a.entry_ns) {
                *reversed = false;
            }
            true
        });
    }
    live.into_iter().filter(|e| e.1 > 0).map(|(p, _, rev)| (p, rev)).collect()
}
