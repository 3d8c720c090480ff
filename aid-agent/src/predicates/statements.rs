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
    let g = idx.group.get(i as usize).copied().flatten()?;
    Some((g.0, Calls::Group { class: g.1, within: g.2 }))
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
            && let (Some(ga), Some(gb)) = (grouped(idx, &single, a), grouped(idx, &single, b))
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
fn grouped(idx: &RunIndex<'_>, single: &dyn Fn(Role) -> bool, i: u32) -> Option<Side> {
    let c = idx.run.calls.get(i as usize)?;
    if !single(c.role) {
        return side(idx, single, i);
    }
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
        Calls::Group { .. } => grouped(idx, single, i) == Some(on),
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
mod tests {
    use super::*;
    use crate::{
        model::{
            Function, Label, Probe, Session,
            testing::{call, function, run, thread},
        },
        predicates::{Anchor, ExtractConfig, learn},
    };

    const US: u64 = 1_000;

    /// set_pair (0) and check_pair (1), with two statement points each:
    /// set_pair's at lines 10 and 11 (2, 3), check_pair's at 16 and 17
    /// (4, 5).
    fn functions() -> Vec<Function> {
        vec![
            function(0, "set_pair"),
            function(1, "check_pair"),
            point(2, "set_pair", 8, 10),
            point(3, "set_pair", 0x12, 11),
            point(4, "check_pair", 8, 16),
            point(5, "check_pair", 0x10, 17),
        ]
    }

    fn point(id: u32, parent: &str, off: u32, line: u32) -> Function {
        let mut f = function(id, &format!("{parent} at t.c:{line}"))
            .with_symbol(&format!("{parent}+{off:#x}"));
        f.internal = true;
        f.probe = Probe::Statement;
        f
    }

    /// A run: set_pair on thread 1 from 10 µs, past line 10 at 12 µs and
    /// line 11 at `line11`; check_pair on thread 2 from `check` µs, at
    /// its lines 2 and 10 µs later.
    fn pair_run(id: u32, label: Label, line11: u64, check: u64) -> Run {
        let set_end = line11 + 2;
        let calls = vec![
            call(0, 1, 1, 10 * US, Some(set_end * US), None),
            call(2, 1, 1, 12 * US, None, None),
            call(3, 1, 1, line11 * US, None, None),
            call(1, 2, 1, check * US, Some((check + 12) * US), None),
            call(4, 2, 1, (check + 2) * US, None, None),
            call(5, 2, 1, (check + 10) * US, None, None),
        ];
        run(id, label, calls, 200 * US).with_threads(vec![
            thread(0, "main"),
            thread(1, "set_pair"),
            thread(2, "check_pair"),
        ])
    }

    /// Four failing runs (set_pair held past line 10 while check_pair
    /// reads) and four passing ones, each through `wrap`, learned with
    /// `functions`; with the predicate "check_pair between line 16 while
    /// set_pair between line 10", and the two calls.
    fn torn_pair(
        functions: Vec<Function>,
        wrap: impl Fn(Run) -> Run,
    ) -> (Session, crate::predicates::Catalog, crate::predicates::PredId, Site, Site) {
        let mut runs = Vec::new();
        for i in 0..4 {
            runs.push(wrap(pair_run(i, Label::Fail, 50, 20 + u64::from(i))));
            runs.push(wrap(pair_run(10 + i, Label::Pass, 14, 70)));
        }
        let s = Session { functions, runs };
        let c = learn(&s, &ExtractConfig::default()).unwrap();
        let a = Site { func: 0, role: 1, instance: 1 };
        let b = Site { func: 1, role: 2, instance: 1 };
        let key =
            PredKey { callee: Some(2), arg: 0, ..PredKey::pair(Kind::BetweenStatements, a, b) };
        let p = c.predicates[c.find(&key).expect("learned").0 as usize].id;
        (s, c, p, a, b)
    }

    #[test]
    fn points_know_their_function_and_rank() {
        let p = Points::new(&functions());
        assert!(!p.is_point(0) && p.is_point(2) && p.is_point(5));
        assert_eq!((p.rank(2), p.rank(3), p.rank(4), p.rank(5)), (0, 1, 0, 1));
        assert_eq!((p.of_rank(0, 1), p.of_rank(1, 0), p.of_rank(1, 2)), (Some(3), Some(4), None));
    }

    /// Failing runs: set_pair held past line 10 (after `a = 1`) while
    /// check_pair reads; passing runs: check_pair before or after. The
    /// predicate is the overlap of set_pair's window from line 10 with
    /// check_pair's from line 16, held where check_pair's window began,
    /// negated by holding check_pair until set_pair has returned; a
    /// window check_pair only touches after line 11 (run 5) is another.
    #[test]
    fn a_read_between_two_stores_is_a_predicate() {
        let (s, c, p, a, b) = torn_pair(functions(), |r| r);
        let p = &c.predicates[p.0 as usize];
        assert_eq!(p.condition, Condition::RunsBetweenStatements);
        assert_eq!(p.anchor, Anchor::LaterEntry);
        assert_eq!(
            p.intervention,
            Some(Intervention::HoldUntil {
                site: b,
                point: Point::Entry,
                until: a,
                until_point: Point::Exit
            })
        );
        assert_eq!(
            p.description,
            "call 1 of check_pair on check_pair is between t.c:16 and its next statement while call 1 of set_pair on set_pair is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
        );
        for r in &s.runs {
            let t = c.evaluate(r);
            assert_eq!(t.holds(p.id), r.failed(), "run {}", r.id);
        }
        // Placed where check_pair's window began (22 µs in run 0).
        assert_eq!(c.evaluate(&s.runs[0]).anchor(p.id), Some(22 * US));
        // check_pair reading after line 11 (set_pair at 12..15 µs, its
        // window from line 11 until its return at 16 µs): not this one.
        let after = pair_run(5, Label::Fail, 14, 13);
        assert!(!c.evaluate(&after).holds(p.id));
        // A run without the statement points does not observe it.
        let mut plain = s.runs[0].clone();
        plain.calls.retain(|c| c.func < 2);
        assert!(!c.evaluate(&plain).observed(p.id));
    }

    /// `run` with 24 bystander threads, each running log_line (6) with a
    /// short window at its line 40 (7), one every 250 ns from 13 µs: all
    /// begun after set_pair's window from line 10 (12 µs) and before
    /// check_pair's from line 16 (from 22 µs).
    fn with_bystanders(mut run: Run) -> Run {
        for k in 0..24u32 {
            let role = 3 + k;
            let at = 13 * US + u64::from(k) * 250;
            run.calls.push(call(6, role, 1, at, Some(at + 200), None));
            run.calls.push(call(7, role, 1, at + 100, None, None));
            run.threads.push(thread(role, "log_line"));
        }
        run.calls.sort_by_key(|c| c.entry_ns);
        run
    }

    /// Bystanders that open and close many short windows while set_pair
    /// is held past line 10 do not hide that check_pair read then: a
    /// thread's window that still holds is its latest, however many
    /// others began since.
    #[test]
    fn a_long_window_is_seen_past_many_short_ones_of_other_threads() {
        let mut fns = functions();
        fns.extend([function(6, "log_line"), point(7, "log_line", 8, 40)]);
        let (s, c, p, ..) = torn_pair(fns, with_bystanders);
        for r in &s.runs {
            assert_eq!(c.evaluate(r).holds(p), r.failed(), "run {}", r.id);
        }
        assert_eq!(c.evaluate(&s.runs[0]).anchor(p), Some(22 * US));
    }

    /// read_check on thread 1 from 10 µs to its return at 40 µs: past
    /// line 19 (`x = v`) at 12 µs, line 20 (`v++`) at 20 µs, line 21
    /// (`v != x + 1`) at 30 µs; bump on thread 2 from `bump` µs for 4 µs,
    /// past its line 32 (`v++`) 1 µs in.
    fn read_check_run(id: u32, label: Label, bump: u64) -> Run {
        let mut calls = vec![
            call(0, 1, 1, 10 * US, Some(40 * US), None),
            call(2, 1, 1, 12 * US, None, None),
            call(3, 1, 1, 20 * US, None, None),
            call(4, 1, 1, 30 * US, None, None),
            call(1, 2, 1, bump * US, Some((bump + 4) * US), None),
            call(5, 2, 1, (bump + 1) * US, None, None),
        ];
        calls.sort_by_key(|c| c.entry_ns);
        run(id, label, calls, 100 * US).with_threads(vec![
            thread(0, "main"),
            thread(1, "read_check"),
            thread(2, "bump"),
        ])
    }

    /// A write that lands between a read and its check fails the run on
    /// either side of the statement between them: half the failing runs
    /// have bump's window begin in read_check's window from line 20, half
    /// in its window from line 21. Each narrow pair holds in half of
    /// them; the wide window from line 20 (it and the next) in all, and
    /// in no passing run (bump before read_check began or after it
    /// returned).
    #[test]
    fn a_write_on_either_side_of_the_statement_between_a_read_and_its_check_is_one_predicate() {
        let fns = vec![
            function(0, "read_check"),
            function(1, "bump"),
            point(2, "read_check", 8, 19),
            point(3, "read_check", 0x10, 20),
            point(4, "read_check", 0x18, 21),
            point(5, "bump", 8, 32),
        ];
        let mut runs = Vec::new();
        for i in 0..4 {
            runs.push(read_check_run(i, Label::Fail, if i % 2 == 0 { 22 } else { 32 }));
            runs.push(read_check_run(10 + i, Label::Pass, if i % 2 == 0 { 2 } else { 50 }));
        }
        let s = Session { functions: fns, runs };
        let c = learn(&s, &ExtractConfig::default()).unwrap();
        let a = Site { func: 0, role: 1, instance: 1 };
        let b = Site { func: 1, role: 2, instance: 1 };
        let at = |point: u32, arg: u8| {
            let key = PredKey {
                callee: Some(point),
                arg,
                ..PredKey::pair(Kind::BetweenStatements, a, b)
            };
            &c.predicates[c.find(&key).expect("learned").0 as usize]
        };
        let wide = at(3, WIDE);
        assert_eq!(
            wide.description,
            "call 1 of bump on bump is between t.c:32 and its next statement while call 1 of read_check on read_check is between t.c:20 and the end of the statement after it (the two ran at the same time), which no passing run shows"
        );
        assert_eq!(
            wide.intervention,
            Some(Intervention::HoldUntil {
                site: b,
                point: Point::Entry,
                until: a,
                until_point: Point::Exit
            })
        );
        let (line20, line21) = (at(3, 0), at(4, 0));
        for r in &s.runs {
            let t = c.evaluate(r);
            assert_eq!(t.holds(wide.id), r.failed(), "run {}", r.id);
            let early = r.failed() && r.id % 2 == 0;
            assert_eq!(t.holds(line20.id), early, "run {}", r.id);
            assert_eq!(t.holds(line21.id), r.failed() && !early, "run {}", r.id);
        }
        // Placed where bump's window began.
        assert_eq!(c.evaluate(&s.runs[2]).anchor(wide.id), Some(33 * US));
        // Where one narrow pair holds in every failing run, the wide one
        // says nothing more and is not learned.
        let narrow: Vec<Run> = (0..4)
            .flat_map(|i| {
                [read_check_run(i, Label::Fail, 22), read_check_run(10 + i, Label::Pass, 50)]
            })
            .collect();
        let s = Session { functions: s.functions, runs: narrow };
        let c = learn(&s, &ExtractConfig::default()).unwrap();
        let wide: Vec<u8> = c
            .predicates
            .iter()
            .filter(|p| p.key.kind == Kind::BetweenStatements && p.key.arg & WIDE != 0)
            .map(|p| p.key.arg)
            .collect();
        assert_eq!(wide, Vec::<u8>::new());
    }

    /// A run of a pool: set_pair on threads 1 and 3 (one class, two
    /// threads), check_pair on thread 2, reading from 60 µs. In failing
    /// runs the setter `torn` (1 or 3, whichever) is held past line 10
    /// (after `a = 1`) while check_pair reads, and the other setter runs
    /// after check_pair, or (`other_first`) before it, both stores done
    /// by 20 µs; in passing runs both setters are done first.
    fn pool_run(id: u32, label: Label, torn: Role, other_first: bool) -> Run {
        let other = if torn == 1 { 3 } else { 1 };
        let setter = |role: Role, from: u64, line11: u64, to: u64| {
            [
                call(0, role, 1, from * US, Some(to * US), None),
                call(2, role, 1, (from + 2) * US, None, None),
                call(3, role, 1, line11 * US, None, None),
            ]
        };
        let mut calls = vec![
            call(1, 2, 1, 60 * US, Some(72 * US), None),
            call(4, 2, 1, 62 * US, None, None),
            call(5, 2, 1, 70 * US, None, None),
        ];
        let first = if other_first || label == Label::Pass { 10 } else { 110 };
        calls.extend(setter(other, first, first + 4, first + 10));
        if label == Label::Fail {
            calls.extend(setter(torn, 40, 98, 100));
        } else {
            calls.extend(setter(torn, 30, 34, 40));
        }
        calls.sort_by_key(|c| c.entry_ns);
        run(id, label, calls, 200 * US).with_threads(vec![
            thread(0, "main"),
            thread(1, "set_pair"),
            thread(2, "check_pair"),
            thread(3, "set_pair"),
        ])
    }

    /// The pair torn by whichever setter of a pool check_pair read in
    /// between is one predicate about some call of the pool: its failing
    /// runs hold it whichever setter it was, and serialising the pool's
    /// calls with check_pair's negates it.
    #[test]
    fn a_read_between_two_stores_of_any_thread_of_a_pool_is_one_predicate() {
        let mut runs = Vec::new();
        for i in 0..4 {
            runs.push(pool_run(i, Label::Fail, if i % 2 == 0 { 1 } else { 3 }, false));
            runs.push(pool_run(10 + i, Label::Pass, if i % 2 == 0 { 1 } else { 3 }, false));
        }
        let s = Session { functions: functions(), runs };
        let c = learn(&s, &ExtractConfig::default()).unwrap();
        let found: Vec<&crate::predicates::Predicate> =
            c.predicates.iter().filter(|p| p.key.kind == Kind::BetweenStatements).collect();
        // check_pair ran both its lines (16 and 17) inside the window: one
        // predicate each, about some setter's window and about the pool's
        // (no setter past line 11 yet).
        let args: Vec<u8> = found.iter().map(|p| p.key.arg).collect();
        assert_eq!(args, vec![0, 1, POOL, POOL | 1], "{found:#?}");
        let p = found[0];
        let class = c.classes.id("set_pair").expect("a class");
        let b = Site { func: 1, role: 2, instance: 1 };
        assert_eq!(p.key.calls, Calls::Group { class, within: None });
        assert_eq!(p.key.other_site(), Some(b));
        assert_eq!((p.key.callee, p.key.arg), (Some(2), 0));
        assert_eq!(
            p.intervention,
            Some(Intervention::SerializeGroups {
                a: CallSet { func: 0, roles: vec![1, 3], instance: 0, within: None },
                b: CallSet::site(b),
                object: None,
            })
        );
        assert_eq!(
            p.description,
            "call 1 of check_pair on check_pair is between t.c:16 and its next statement while some call of set_pair on the set_pair threads is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
        );
        for r in &s.runs {
            assert_eq!(c.evaluate(r).holds(p.id), r.failed(), "run {}", r.id);
        }
        // Placed where check_pair's window began.
        assert_eq!(c.evaluate(&s.runs[0]).anchor(p.id), Some(62 * US));
        let pool = found[2];
        assert_eq!(pool.intervention, p.intervention);
        assert_eq!(
            pool.description,
            "call 1 of check_pair on check_pair is between t.c:16 and its next statement while calls of set_pair on the set_pair threads have reached t.c:10 and none has gone past its next statement (the two ran at the same time), which no passing run shows"
        );
        // One setter past both stores while the other is between them:
        // the pair is whole (the first's `b` is stored), some setter's
        // window holds, the pool's does not.
        let whole = pool_run(20, Label::Fail, 1, true);
        let t = c.evaluate(&whole);
        assert!(t.holds(p.id), "some setter's window");
        assert!(t.observed(pool.id) && !t.holds(pool.id), "the pool's window closed at 14 µs");
    }

    /// One owner thread calls set_pair twice (at 10 and 100 µs); the
    /// checker reads between the stores of its first call in some failing
    /// runs and of its second in others. Neither per-call pair holds in
    /// every failing run; "some call of set_pair on set_pair" does, and
    /// serialising the two functions' calls negates it. With the read
    /// always in the first call, only the per-call pair is made.
    #[test]
    fn a_read_between_two_stores_of_any_call_of_one_thread_is_one_predicate() {
        let owner = |id: u32, label: Label, torn: u32, check: u64| {
            let setter = |instance: u32, from: u64, line11: u64| {
                [
                    call(0, 1, instance, from * US, Some((line11 + 2) * US), None),
                    call(2, 1, instance, (from + 2) * US, None, None),
                    call(3, 1, instance, line11 * US, None, None),
                ]
            };
            let mut calls = vec![
                call(1, 2, 1, check * US, Some((check + 12) * US), None),
                call(4, 2, 1, (check + 2) * US, None, None),
                call(5, 2, 1, (check + 10) * US, None, None),
            ];
            calls.extend(setter(1, 10, if torn == 1 { 50 } else { 14 }));
            calls.extend(setter(2, 100, if torn == 2 { 150 } else { 104 }));
            calls.sort_by_key(|c| c.entry_ns);
            run(id, label, calls, 300 * US).with_threads(vec![
                thread(0, "main"),
                thread(1, "set_pair"),
                thread(2, "check_pair"),
            ])
        };
        let learned = |torn: &dyn Fn(u32) -> u32| {
            let mut runs = Vec::new();
            for i in 0..4 {
                let t = torn(i);
                runs.push(owner(i, Label::Fail, t, if t == 1 { 20 } else { 110 }));
                runs.push(owner(10 + i, Label::Pass, 0, 60));
            }
            let s = Session { functions: functions(), runs };
            let c = learn(&s, &ExtractConfig::default()).unwrap();
            (s, c)
        };
        let (s, c) = learned(&|i| 1 + i % 2);
        let class =
            |name| Calls::Group { class: c.classes.id(name).expect("a class"), within: None };
        let p = c
            .predicates
            .iter()
            .find(|p| {
                p.key.kind == Kind::BetweenStatements
                    && p.key.calls == class("set_pair")
                    && (p.key.callee, p.key.arg) == (Some(2), 0)
            })
            .expect("some call of set_pair");
        assert_eq!(p.key.other.map(|o| o.calls), Some(class("check_pair")));
        assert_eq!(
            p.intervention,
            Some(Intervention::SerializeGroups {
                a: CallSet { func: 0, roles: vec![1], instance: 0, within: None },
                b: CallSet { func: 1, roles: vec![2], instance: 0, within: None },
                object: None,
            })
        );
        assert_eq!(
            p.description,
            "some call of check_pair on check_pair is between t.c:16 and its next statement while some call of set_pair on set_pair is between t.c:10 and its next (the two ran at the same time), which no passing run shows"
        );
        for r in &s.runs {
            assert_eq!(c.evaluate(r).holds(p.id), r.failed(), "run {}", r.id);
        }
        // Each per-call pair holds in two of the four failing runs.
        let first = PredKey {
            callee: Some(2),
            arg: 0,
            ..PredKey::pair(
                Kind::BetweenStatements,
                Site { func: 0, role: 1, instance: 1 },
                Site { func: 1, role: 2, instance: 1 },
            )
        };
        let q = c.find(&first).expect("the first call's pair");
        assert_eq!(s.runs.iter().filter(|r| c.evaluate(r).holds(q)).count(), 2);
        // The read always in the first call: no group pair.
        let setters = class("set_pair");
        let (_, c) = learned(&|_| 1);
        assert!(c.find(&first).is_some());
        let group = |p: &&crate::predicates::Predicate| {
            p.key.kind == Kind::BetweenStatements && p.key.calls == setters
        };
        assert!(!c.predicates.iter().any(|p| group(&p)));
    }
}
