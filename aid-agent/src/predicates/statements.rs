//! Windows between two statements of one call, and the statements of
//! another thread that ran inside them, read from aid's statement points
//! ([`crate::model::Probe::Statement`]: where source lines begin inside
//! traced functions, attached to the runs that carry noise once the
//! amplification ladder's first pass provoked nothing).
//!
//! A pair published by two plain stores (`a = 1; b = -1;`) and read by a
//! checker on another thread is torn only when the read runs after the
//! first store and before the second: no call and no lock marks that
//! moment, but the statement points do. A statement point's window runs
//! from its event to its thread's next statement event (or the call's
//! return): the thread was past the statements before it and had not
//! begun the next one. Two windows of two threads that overlap say that
//! the statements they hold ran at the same time: "call 1 of check_pair
//! runs two_stores.c:16 while call 1 of set_pair is between two_stores.c:11
//! and its next statement", when failing runs show it and no passing run
//! does. Negated by holding the other call's thread at its entry until
//! the call has returned: it then runs after every statement of the call.
//!
//! A side of the pair is a call where its thread is one of its class
//! (per-call keys, as for the order of first sections in `sections.rs`),
//! and "some call of f on the f threads" where the thread is one of a
//! pool: four setters each storing `a = 1; b = -1;` leave the pair torn
//! while any of them is between the two stores, whichever it is. A pair
//! with a pool side is negated by serialising the two sides' calls (no
//! call of one runs while a call of the other does), as the other pool
//! relations are. A thread that is one of its class stands for "some
//! call of f on its thread" too, in a pair of two such sides, where the
//! failing runs show the pair at two or more pairs of calls
//! ([`grouped`]). A key names the first window's statement point in
//! `callee` and the second's by its rank among its function's points in
//! `arg` ([`Points`]).

use super::{
    Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned, Points},
    calls::{call_set, site_of},
    index::{RunIndex, end_of},
};
use crate::model::{CallSet, FuncId, Intervention, Point, Role, Run, Site};
use crate::util::fxhash::{FxMap, FxSet};

/// Windows of other threads paired with one window (those still open when
/// it begins, one a thread, the latest begun first): keeps the pairs
/// linear in the statement events.
const PER_WINDOW: usize = 8;

/// Two overlapping statement windows: (the call whose window began
/// first, its statement point, the other call, its statement point, the
/// first window's form: [`POOL`], [`WIDE`] or neither), by index in
/// `run.calls` for the calls. A pool's window at a point runs from the
/// first of its calls reaching the point to the first leaving it (to its
/// next statement or its return): while it lasts, some thread of the
/// pool is past the point and none is past the statement after it (four
/// setters of `a = 1; b = -1;`: some stored `a`, none stored `b`); its
/// call is the first to reach the point. A wide window is a call's window at a point
/// and its next one in the same call, one after the other: a read at one
/// statement and its check at the next ("x = v; v++; if (v != x + 1)")
/// leave a gap that a write of another thread lands in on either side
/// of the statement between them, and the failing runs are then split
/// between two narrow pairs, neither of which holds in all of them.
pub(super) type Window = (u32, FuncId, u32, FuncId, u8);

/// [`PredKey::arg`] bit of a pair whose first window is a pool's (the
/// rest of `arg` is the second point's rank).
pub const POOL: u8 = 0x80;

/// [`PredKey::arg`] bit of a pair whose first window is a wide one: from
/// its point to the end of the call's next window (a function has at
/// most [`crate::symbols::STATEMENTS_PER_FUNCTION`] points, so a rank
/// never reaches this bit).
pub const WIDE: u8 = 0x40;

/// The form bits of [`PredKey::arg`].
pub const FORM: u8 = POOL | WIDE;

/// [`Window`] bit of a wide pair whose other window began in the second
/// of its two windows (never in a key's `arg`).
const SECOND: u8 = 0x20;

/// Pairs kept per pool window (the first windows of other threads to
/// begin inside it).
const PER_POOL_WINDOW: usize = 4 * PER_WINDOW;

/// One statement window: its call, point, thread, and times.
#[derive(Clone, Copy)]
struct Span {
    call: u32,
    point: FuncId,
    role: Role,
    from: u64,
    until: u64,
}

/// Every [`Window`] pair of the run, with when it first held (the later
/// window's start).
pub(super) fn windows(
    idx: &RunIndex<'_>,
    points: &Points,
    single: &dyn Fn(Role) -> bool,
) -> Vec<(Window, u64)> {
    let run = idx.run;
    let traced =
        |i: usize| idx.group.get(i).is_some_and(Option::is_some) && run.calls[i].instance > 0;
    // One pass in entry order, as `sections::sections` does: per thread,
    // the traced calls running; each statement event opens a window in
    // the innermost one, and closes its thread's previous window.
    let mut stacks: FxMap<Role, Vec<usize>> = FxMap::default();
    let mut open: FxMap<Role, usize> = FxMap::default();
    let mut spans: Vec<Span> = Vec::new();
    for (i, c) in run.calls.iter().enumerate() {
        let point = points.is_point(c.func);
        if !(point || traced(i)) {
            continue;
        }
        let stack = stacks.entry(c.role).or_default();
        while stack.last().is_some_and(|&j| end_of(&run.calls[j], run) < c.entry_ns) {
            stack.pop();
        }
        if !point {
            stack.push(i);
            continue;
        }
        if let Some(k) = open.remove(&c.role) {
            spans[k].until = spans[k].until.min(c.entry_ns);
        }
        if let Some(&a) = stack.last() {
            let until = end_of(&run.calls[a], run);
            open.insert(c.role, spans.len());
            spans.push(Span {
                call: a as u32,
                point: c.func,
                role: c.role,
                from: c.entry_ns,
                until,
            });
        }
    }
    spans.sort_by_key(|s| s.from);
    let mut out = Vec::new();
    // Each window's predecessor in its call, where it began as that one
    // ended: the two make a wide window.
    let mut prev: Vec<Option<usize>> = vec![None; spans.len()];
    let mut next: Vec<Option<usize>> = vec![None; spans.len()];
    let mut last: FxMap<Role, usize> = FxMap::default();
    for (i, sp) in spans.iter().enumerate() {
        if let Some(k) = last.insert(sp.role, i)
            && spans[k].call == sp.call
            && spans[k].until == sp.from
        {
            prev[i] = Some(k);
            next[k] = Some(i);
        }
    }
    // A thread's window ends where its next one begins, so the windows of
    // other threads that still hold when one begins are, each, their
    // thread's latest: one held by a thread stopped at a statement (a
    // hold, a preemption) stays among them however many short windows
    // other threads open and close meanwhile.
    let mut latest: Vec<(Role, usize)> = Vec::new();
    let mut holding: Vec<usize> = Vec::new();
    for (i, b) in spans.iter().enumerate() {
        holding.clear();
        holding.extend(
            latest
                .iter()
                .filter(|&&(r, k)| r != b.role && spans[k].until > b.from)
                .map(|&(_, k)| k),
        );
        // The latest begun first, as many as a window keeps.
        holding.sort_unstable_by(|x, y| y.cmp(x));
        for &k in holding.iter().take(PER_WINDOW) {
            let a = &spans[k];
            out.push(((a.call, a.point, b.call, b.point, 0), b.from));
            // The wide windows that hold: from the one before (b began
            // in its second), and from this one when the call went on to
            // a next.
            let wide = [prev[k].map(|w| (w, WIDE | SECOND)), next[k].map(|_| (k, WIDE))];
            for (w, form) in wide.into_iter().flatten() {
                let a = &spans[w];
                out.push(((a.call, a.point, b.call, b.point, form), b.from));
            }
        }
        match latest.iter_mut().find(|(r, _)| *r == b.role) {
            Some(slot) => slot.1 = i,
            None => latest.push((b.role, i)),
        }
    }
    // Pools' windows: per group of calls on threads that are not one
    // each, and point, from the first arrival to the first departure.
    let mut pools: FxMap<(super::index::GroupKey, FuncId), Span> = FxMap::default();
    for sp in spans.iter().filter(|sp| !single(sp.role)) {
        let Some(g) = idx.group.get(sp.call as usize).copied().flatten() else { continue };
        let pool = pools.entry((g, sp.point)).or_insert(Span { until: u64::MAX, ..*sp });
        pool.until = pool.until.min(sp.until);
    }
    let mut pools: Vec<((super::index::GroupKey, FuncId), Span)> = pools.into_iter().collect();
    pools.sort_unstable_by_key(|(k, sp)| (sp.from, *k));
    for ((g, _), pool) in &pools {
        for b in spans
            .iter()
            .filter(|b| b.from >= pool.from && b.from < pool.until)
            .filter(|b| idx.group.get(b.call as usize).copied().flatten() != Some(*g))
            .take(PER_POOL_WINDOW)
        {
            out.push(((pool.call, pool.point, b.call, b.point, POOL), b.from));
        }
    }
    out
}

/// One side of a window pair: a call, or some call of a pool.
pub(super) type Side = (FuncId, Calls);

/// A window pair by its sides: (calls, its point, other calls, its point,
/// the first window's form, [`FORM`] bits).
type Key = (Side, FuncId, Side, FuncId, u8);

/// The side call `i` stands on: itself on a thread that is one of its
/// class, its group on a pool's.
pub(super) fn side(idx: &RunIndex<'_>, single: &dyn Fn(Role) -> bool, i: u32) -> Option<Side> {
    let c = idx.run.calls.get(i as usize)?;
    if single(c.role) {
        let s = site_of(c);
        return Some((s.func, Calls::Site { role: s.role, instance: s.instance }));
    }
    grouped(idx, i)
}

fn keys(idx: &RunIndex<'_>, funcs: &Funcs) -> FxSet<Key> {
    keyed(idx, funcs).into_iter().map(|(k, _)| k).collect()
}

/// The run's window pairs by their sides ([`keys`]), each with the two
/// calls behind it where it is a pair of [`grouped`] sides.
fn keyed(idx: &RunIndex<'_>, funcs: &Funcs) -> Vec<(Key, Option<(Site, Site)>)> {
    let single = |r: Role| funcs.single(idx, r);
    let mut out = Vec::new();
    for ((a, pa, b, pb, form), _) in windows(idx, &funcs.points, &single) {
        let (Some(sa), Some(sb)) = (side(idx, &single, a), side(idx, &single, b)) else {
            continue;
        };
        out.push(((sa, pa, sb, pb, form), None));
        if form & POOL == 0
            && let (Some(ga), Some(gb)) = (grouped(idx, a), grouped(idx, b))
            && (ga != sa || gb != sb)
        {
            // The calls of one thread's side, told apart; a pool's side is
            // one group whichever thread it was.
            let own = |i: u32| {
                let c = &idx.run.calls[i as usize];
                let s = site_of(c);
                if single(c.role) { s } else { Site { func: s.func, role: 0, instance: 0 } }
            };
            out.push(((ga, pa, gb, pb, form), Some((own(a), own(b)))));
        }
    }
    out
}

/// The side "some call of f on its threads" call `i` is one of, for a
/// thread that is one of its class as for a pool's: a read of one
/// thread's that lands between two statements of another's at one call
/// in some failing runs and at another call in others (a stealer's
/// `Steal` against the owner's third `Push` in some runs, its fourth in
/// others, SCTBench's WorkStealQueue) holds in every failing run only
/// said of some call. Kept only where the failing runs show it at two or
/// more pairs of calls (`predicates`): with one, the per-call pair says
/// the same more precisely, as for the group overlaps (`pairs.rs`).
fn grouped(idx: &RunIndex<'_>, i: u32) -> Option<Side> {
    let g = idx.group.get(i as usize).copied().flatten()?;
    Some((g.0, Calls::Group { class: g.1, within: g.2 }))
}

/// Whether call `i` stands on `on`: its own [`side`], or the [`grouped`]
/// side of its group.
pub(super) fn stands_on(
    idx: &RunIndex<'_>,
    single: &dyn Fn(Role) -> bool,
    i: u32,
    on: Side,
) -> bool {
    match on.1 {
        Calls::Site { .. } => side(idx, single, i) == Some(on),
        Calls::Group { .. } => grouped(idx, i) == Some(on),
    }
}

/// Whether the run has a call on `side`.
fn has(idx: &RunIndex<'_>, (func, calls): Side) -> bool {
    match calls {
        Calls::Site { role, instance } => idx.index_of(Site { func, role, instance }).is_some(),
        Calls::Group { class, within } => idx.group_calls(&(func, class, within)).next().is_some(),
    }
}

/// The window pairs passing runs showed.
#[derive(Default)]
pub(super) struct StatementBase {
    seen: FxSet<Key>,
}

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut StatementBase) {
    if funcs.points.any() {
        base.seen.extend(keys(idx, funcs).into_iter().map(|k| (k.0, k.1, k.2, k.3, k.4 & FORM)));
    }
}

/// Window pairs of failing runs no passing run shows.
#[derive(Default)]
pub(super) struct Candidates {
    found: FxSet<Key>,
    /// Per wide pair, which of its two windows the other window began in,
    /// over the failing runs (bit 1 the first, 2 the second): one that
    /// was always the same says no more than the narrow pair there.
    halves: FxMap<Key, u8>,
    /// Per pair of [`grouped`] sides, the pairs of calls (up to 2) the
    /// failing runs showed it at.
    grouped: FxMap<Key, FxSet<(Site, Site)>>,
}

pub(super) fn candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &StatementBase,
    out: &mut Candidates,
) {
    if funcs.points.any() {
        for (k, sites) in keyed(idx, funcs) {
            let key = (k.0, k.1, k.2, k.3, k.4 & FORM);
            if let Some(sites) = sites {
                let set = out.grouped.entry(key).or_default();
                if set.len() < 2 {
                    set.insert(sites);
                }
            }
            if key.4 & WIDE != 0 {
                *out.halves.entry(key).or_default() |= if k.4 & SECOND != 0 { 2 } else { 1 };
            }
            if !base.seen.contains(&key) {
                out.found.insert(key);
            }
        }
    }
}

/// Keeps the window pairs whose calls and statement points some passing
/// run made too (there is a passing order to restore).
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: &mut Candidates) {
    if cands.found.is_empty() {
        return;
    }
    let mut made: FxSet<Key> = FxSet::default();
    for run in passing {
        let idx = funcs.index(run);
        let reached: FxSet<FuncId> =
            run.calls.iter().map(|c| c.func).filter(|&f| funcs.points.is_point(f)).collect();
        for k in &cands.found {
            if reached.contains(&k.1) && reached.contains(&k.3) && has(&idx, k.0) && has(&idx, k.2)
            {
                made.insert(*k);
            }
        }
    }
    cands.found.retain(|k| made.contains(k));
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    // A pair of grouped sides where a side is one thread's: only where it
    // stands for two or more pairs of calls.
    let one_thread = |(_, calls): Side| match calls {
        Calls::Group { class, .. } => funcs.classes.single(class).is_some(),
        Calls::Site { .. } => false,
    };
    let worth = |k: &Key| {
        !(one_thread(k.0) || one_thread(k.2)) || cands.grouped.get(k).is_some_and(|s| s.len() > 1)
    };
    let mut found: Vec<&Key> = cands
        .found
        .iter()
        .filter(|k| k.4 & WIDE == 0 || cands.halves.get(k) == Some(&3))
        .filter(|k| worth(k))
        .collect();
    found.sort_unstable();
    found
        .into_iter()
        .map(|&((fa, ca), pa, (fb, cb), pb, form)| {
            let key = PredKey {
                kind: Kind::BetweenStatements,
                func: fa,
                calls: ca,
                other: Some(Other { func: fb, calls: cb }),
                arg: funcs.points.rank(pb) | form,
                callee: Some(pa),
            };
            let iv = match (key.site(), key.other_site()) {
                // B runs after A has returned: after every statement of A.
                (Some(a), Some(b)) => Intervention::HoldUntil {
                    site: b,
                    point: Point::Entry,
                    until: a,
                    until_point: Point::Exit,
                },
                // No call of one side runs while one of the other does.
                _ => Intervention::SerializeGroups {
                    a: side_calls(funcs, (fa, ca)),
                    b: side_calls(funcs, (fb, cb)),
                    object: None,
                },
            };
            (key, Condition::RunsBetweenStatements, super::Anchor::LaterEntry, Some(iv))
        })
        .collect()
}

/// The calls a side names, for serialisation.
fn side_calls(funcs: &Funcs, (func, calls): Side) -> CallSet {
    match calls {
        Calls::Site { role, instance } => CallSet::site(Site { func, role, instance }),
        Calls::Group { class, within } => call_set(funcs, &(func, class, within)),
    }
}

#[cfg(test)]
#[path = "statements_tests.rs"]
mod tests;
