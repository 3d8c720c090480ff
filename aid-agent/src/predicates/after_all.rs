//! `AfterAll`: "call B starts only after calls A1, A2, … on other threads
//! have all ended", a conjunction of order relations that every failing
//! run shows and no passing run shows whole, although each part alone
//! some passing run shows. A check that fails only once every updater has
//! run (a checker thread that reads a total after both the deposit and the
//! withdrawal, a reader that sees the sum of two writers) has no single
//! order that separates the runs: a passing run where only one updater ran
//! first shows that one's order too.
//!
//! Explosion control: the calls are those of threads of single classes,
//! the first [`MAX_INSTANCE`] of each function on a thread, and at most
//! [`MAX_CALLS`] of them in a run (a failing run with more: the session
//! learns no conjunction); the parts every failing run shows shrink with
//! each run.
//! The parts are the orders every failing run shows; those every passing
//! run with the calls also shows say nothing and are left out, and the
//! rest is reduced, part by part, to the fewest parts that no passing run
//! shows together (at least two: one alone is an [`Kind::Order`]). The
//! parts said last are kept: on each thread the innermost call that ended
//! last (the work a thread body did, rather than the body or an earlier
//! step), as the first failing run showed them.
//!
//! Negated by holding one part's earlier call until B has ended (the hold
//! of that part's order, [`super::pairs`]), a part some passing run had
//! reversed first: if the conjunction is what makes the run fail, undoing
//! any one part keeps the failure away.
//!
//! When every such conjunction is also shown by some passing run, one
//! order *between two of the parts* that every failing run shows may
//! complete it: "B came only after A1, A2 and A3, and A2 before A1". A
//! check that fails only when it runs after every updater *and* the
//! updaters ran in the wrong order has no conjunction of orders before B
//! that separates the runs (SCTBench's token ring: t4 checks the three
//! values once t1, t2 and t3 have each passed theirs on, which holds only
//! if t1 went first; passing runs show t4 after all three, in the right
//! order, and the wrong order with t4 never running). Bounded: only for a
//! B with at most [`INNER_PARTS`] parts, and one such order. Negated, when
//! some passing run had it the other way round, by restoring that order.
//! The same for "A1 was not the first of the parts" (some other part came
//! before it, in every failing run; `Condition::AfterAll::any`): the
//! token ring fails whichever of t2 and t3 goes before t1, and holding
//! only t2 until t1 has returned leaves t3 to go first; holding every
//! other part until A1 has returned does not.
//!
//! A passing run that ended inside B (main returned while B still ran,
//! before B's check could fail) says nothing of what B would have done:
//! it is left out of the vetting, and the predicate is not observed in
//! it ([`super::eval`]); a failing run that ended inside B is B's failure.
//!
//! The same conjunction is learned over critical sections: "B's first
//! critical section on a lock came only after those of A1, A2, …"
//! ([`super::sections::Firsts`]), for a checker that starts first and
//! waits for the lock (SCTBench's account: the check, created before the
//! deposit and the withdrawal, fails only when its section comes after
//! both of theirs). Each part is negated as a section order is, by holding
//! A's thread at A's entry until B has returned.

use super::{
    Anchor, Calls, Condition, Kind, Other, PairMember, PredKey,
    base::{Funcs, Learned},
    calls::site_of,
    index::RunIndex,
    pairs::{Passing, hold},
    sections::{Firsts, sections},
};
use crate::model::{Intervention, Point, Run, Site};
use crate::util::fxhash::FxMap;

/// Calls of a function on one thread looked at, from its first.
pub const MAX_INSTANCE: u32 = 4;
/// Calls of a run looked at; a failing run with more: none is learned.
pub const MAX_CALLS: usize = 128;
/// Parts a conjunction may start from (bits of a mask).
const MAX_PARTS: usize = 64;
/// The bit of an [`Kind::AfterAll`] key's `arg` (beside its count of
/// parts) that says its parts are critical sections.
pub const SECTIONS: u8 = 0x80;
/// The bit of an [`Kind::AfterAll`] key's `arg` that says its last part is
/// an order between two of the others' earlier calls.
pub const INNER: u8 = 0x40;
/// The bit of an [`Kind::AfterAll`] key's `arg` that says it has a part
/// that was not the first of them (`Condition::AfterAll::any`).
pub const LATE: u8 = 0x20;
/// Most parts of one B for which orders between them are looked at.
pub const INNER_PARTS: usize = 8;

/// A later call B and whether its parts are orders of calls (false) or of
/// their first critical sections (true).
type Later = (Site, bool);

/// Per later call B, the calls every failing run so far ended before B
/// started, or whose first critical sections came before B's.
#[derive(Default)]
pub(super) struct Candidates {
    started: bool,
    /// A failing run had too many calls: nothing is learned.
    skip: bool,
    after: FxMap<Later, Vec<Site>>,
    /// Per later call B with at most [`INNER_PARTS`] parts, the pairs
    /// (x, y) of them every failing run so far showed x before y (in the
    /// same sense as the parts: x ended before y started, or x's first
    /// section came first).
    inner: FxMap<Later, Vec<(Site, Site)>>,
    /// The same B's parts that were not the first of them (some part of
    /// another thread came before) in every failing run so far.
    late: FxMap<Later, Vec<Site>>,
    /// Every bounded call of the first failing run: (entry, exit).
    first: FxMap<Site, (u64, u64)>,
}

/// The calls of single-class threads a run has, within the bounds; None
/// when it has more than [`MAX_CALLS`].
fn bounded<'r>(idx: &RunIndex<'r>, funcs: &Funcs) -> Option<Vec<&'r crate::model::Call>> {
    let calls: Vec<&crate::model::Call> = idx
        .run
        .calls
        .iter()
        .filter(|c| {
            funcs.keep(c.func)
                && (1..=MAX_INSTANCE).contains(&c.instance)
                && funcs.single(idx, c.role)
        })
        .collect();
    (calls.len() <= MAX_CALLS).then_some(calls)
}

/// Narrows the candidates to what this failing run also shows.
pub(super) fn candidates(idx: &RunIndex<'_>, funcs: &Funcs, out: &mut Candidates) {
    if out.skip {
        return;
    }
    let Some(calls) = bounded(idx, funcs) else {
        out.skip = true;
        out.after.clear();
        return;
    };
    let mut here: FxMap<Later, Vec<Site>> = FxMap::default();
    let mut keep = |b: Later, mut before: Vec<Site>| {
        if before.len() >= 2 {
            before.sort_unstable();
            here.insert(b, before);
        }
    };
    for b in &calls {
        let before = calls
            .iter()
            .filter(|a| a.role != b.role && a.exit_ns.is_some_and(|x| x < b.entry_ns))
            .map(|a| site_of(a))
            .collect();
        keep((site_of(b), false), before);
    }
    let firsts = Firsts::of(&sections(idx, &funcs.lock_ops));
    let index = |c: &crate::model::Call| idx.index_of(site_of(c));
    // x before y, in the sense of the parts.
    let ahead = |x: &crate::model::Call, y: &crate::model::Call, in_sections: bool| {
        if in_sections {
            index(x).zip(index(y)).and_then(|(ix, iy)| firsts.before(ix, iy)).is_some_and(|o| o.0)
        } else {
            x.exit_ns.is_some_and(|t| t < y.entry_ns)
        }
    };
    for b in &calls {
        let Some(ib) = index(b) else { continue };
        let before = calls
            .iter()
            .filter(|a| a.role != b.role)
            .filter(|a| {
                index(a).and_then(|ia| firsts.before(ia, ib)).is_some_and(|(before, _)| before)
            })
            .map(|a| site_of(a))
            .collect();
        keep((site_of(b), true), before);
    }
    let mut inner: FxMap<Later, Vec<(Site, Site)>> = FxMap::default();
    let mut lates: FxMap<Later, Vec<Site>> = FxMap::default();
    for (&(b, in_sections), parts) in &here {
        if parts.len() > INNER_PARTS {
            continue;
        }
        let mut pairs = Vec::new();
        for x in parts {
            for y in parts {
                let (Some(cx), Some(cy)) = (idx.call(*x), idx.call(*y)) else { continue };
                if x.role != y.role && ahead(cx, cy, in_sections) {
                    pairs.push((*x, *y));
                }
            }
        }
        pairs.sort_unstable();
        let mut late: Vec<Site> = pairs.iter().map(|p| p.1).collect();
        late.sort_unstable();
        late.dedup();
        lates.insert((b, in_sections), late);
        inner.insert((b, in_sections), pairs);
    }
    if !out.started {
        out.started = true;
        out.inner = inner;
        out.late = lates;
        out.after = here;
        out.first =
            calls.iter().filter_map(|c| Some((site_of(c), (c.entry_ns, c.exit_ns?)))).collect();
        return;
    }
    out.after.retain(|b, before| {
        let Some(now) = here.get(b) else { return false };
        before.retain(|a| now.binary_search(a).is_ok());
        before.len() >= 2
    });
    out.inner.retain(|b, pairs| {
        let Some(now) = inner.get(b) else { return false };
        pairs.retain(|p| now.binary_search(p).is_ok());
        !pairs.is_empty()
    });
    out.late.retain(|b, late| {
        let Some(now) = lates.get(b) else { return false };
        late.retain(|p| now.binary_search(p).is_ok());
        !late.is_empty()
    });
}

/// What the passing runs showed of one B's parts.
struct Vetting {
    parts: Vec<Site>,
    /// Per passing run with B: the parts that held (bit i: `parts[i]`).
    masks: Vec<u64>,
    seen: Vec<Passing>,
    /// Sections: some passing run had B's first section before the
    /// part's.
    flipped: Vec<bool>,
    /// Orders between two parts every failing run showed (indices into
    /// `parts`), with, per passing run with B, those that held (bit k:
    /// `inner[k]`), what the passing runs showed of the two calls, and
    /// whether some passing run had the order the other way round.
    inner: Vec<(usize, usize)>,
    inner_masks: Vec<u64>,
    inner_seen: Vec<Passing>,
    inner_flipped: Vec<bool>,
    /// Parts that were not the first of them in every failing run
    /// (indices into `parts`), with, per passing run with B, those that
    /// were not there either (bit k: `late[k]`).
    late: Vec<usize>,
    late_masks: Vec<u64>,
}

/// The conjunctions no passing run shows whole, reduced to the fewest
/// parts, with the hold that negates each.
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: Candidates) -> Vec<Learned> {
    let mut inner_of = cands.inner;
    let mut late_of = cands.late;
    let mut vetting: Vec<(Later, Vetting)> = cands
        .after
        .into_iter()
        .filter(|(_, parts)| parts.len() <= MAX_PARTS)
        .map(|(b, parts)| {
            let (seen, flipped) = (vec![Passing::NONE; parts.len()], vec![false; parts.len()]);
            let at = |s: &Site| parts.iter().position(|p| p == s);
            let inner: Vec<(usize, usize)> = inner_of
                .remove(&b)
                .unwrap_or_default()
                .iter()
                .filter_map(|(x, y)| Some((at(x)?, at(y)?)))
                .collect();
            let n = inner.len();
            let late: Vec<usize> =
                late_of.remove(&b).unwrap_or_default().iter().filter_map(at).collect();
            let v = Vetting {
                parts,
                masks: Vec::new(),
                seen,
                flipped,
                inner,
                inner_masks: Vec::new(),
                inner_seen: vec![Passing::NONE; n],
                inner_flipped: vec![false; n],
                late,
                late_masks: Vec::new(),
            };
            (b, v)
        })
        .collect();
    vetting.sort_unstable_by_key(|v| v.0);
    if vetting.is_empty() {
        return Vec::new();
    }
    let any_sections = vetting.iter().any(|((_, sections), _)| *sections);
    for run in passing {
        let idx = funcs.index(run);
        let firsts = any_sections.then(|| Firsts::of(&sections(&idx, &funcs.lock_ops)));
        for ((b, in_sections), v) in &mut vetting {
            // A passing run that ended inside B (the process exited while
            // B ran) does not say what B would have done: left out.
            let Some(cb) = idx.call(*b).filter(|c| c.exit_ns.is_some()) else { continue };
            // Whether x came before y (Some(false): the other way round;
            // None: not both there, or no shared lock).
            let order = |x: &crate::model::Call, y: &crate::model::Call| match &firsts {
                Some(firsts) if *in_sections => {
                    let (ix, iy) = (idx.index_of(site_of(x))?, idx.index_of(site_of(y))?);
                    firsts.before(ix, iy).map(|(before, _)| before)
                }
                _ => Some(x.exit_ns.is_some_and(|t| t < y.entry_ns)),
            };
            // Whether x came before y, noting in `flipped` (sections) and
            // `seen` what this passing run showed of the two.
            let look = |x: &crate::model::Call,
                        y: &crate::model::Call,
                        flipped: &mut bool,
                        seen: &mut Passing| {
                let held = order(x, y);
                if *in_sections {
                    *flipped |= held == Some(false);
                }
                seen.see(x, y);
                held == Some(true)
            };
            let mut mask = 0u64;
            for (i, a) in v.parts.iter().enumerate() {
                let Some(ca) = idx.call(*a) else { continue };
                if look(ca, cb, &mut v.flipped[i], &mut v.seen[i]) {
                    mask |= 1 << i;
                }
            }
            v.masks.push(mask);
            let mut inner = 0u64;
            for (k, &(x, y)) in v.inner.iter().enumerate() {
                let (Some(cx), Some(cy)) = (idx.call(v.parts[x]), idx.call(v.parts[y])) else {
                    continue;
                };
                if look(cx, cy, &mut v.inner_flipped[k], &mut v.inner_seen[k]) {
                    inner |= 1 << k;
                }
            }
            v.inner_masks.push(inner);
            let mut late = 0u64;
            for (k, &y) in v.late.iter().enumerate() {
                let Some(cy) = idx.call(v.parts[y]) else { continue };
                let behind = v.parts.iter().enumerate().any(|(x, part)| {
                    x != y
                        && part.role != v.parts[y].role
                        && idx.call(*part).is_some_and(|cx| order(cx, cy) == Some(true))
                });
                if behind {
                    late |= 1 << k;
                }
            }
            v.late_masks.push(late);
        }
    }
    let mut out = Vec::new();
    for (b, v) in vetting {
        let order = removal_order(&v.parts, &cands.first);
        out.extend(conjunction(b, &v, &order));
    }
    out
}

/// The order in which parts are tried for removal: first those that
/// enclose another part on their thread (a thread body around its work),
/// then by when they ended, earliest first, in the first failing run.
fn removal_order(parts: &[Site], first: &FxMap<Site, (u64, u64)>) -> Vec<usize> {
    let span = |s: &Site| first.get(s).copied().unwrap_or((0, 0));
    let encloses = |i: usize| {
        let (e, x) = span(&parts[i]);
        parts.iter().enumerate().any(|(j, o)| {
            let (oe, ox) = span(o);
            j != i && o.role == parts[i].role && e <= oe && ox <= x
        })
    };
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| (!encloses(i), span(&parts[i]).1, i));
    order
}

/// The fewest parts of `v` that no passing run showed together (two or
/// more, none of which alone no passing run showed), removing them in
/// `order`, as a predicate; when every passing run's parts leave that
/// impossible, the same completed by one order between two parts, and by
/// one part that was not the first of them.
fn conjunction(later: Later, v: &Vetting, order: &[usize]) -> Vec<Learned> {
    if v.masks.is_empty() {
        return Vec::new();
    }
    // Parts every passing run with B also showed tell nothing apart.
    let mut set: u64 = 0;
    for i in 0..v.parts.len() {
        if v.masks.iter().any(|m| m & (1 << i) == 0) {
            set |= 1 << i;
        }
    }
    let plain = |set: u64| v.masks.iter().any(|m| m & set == set);
    if set.count_ones() >= 2 && !plain(set) {
        let set = reduce(set, order, 2, &plain);
        return learned(later, v, set, Completion::None).into_iter().collect();
    }
    // Every passing run with B showed every part: what completes them is
    // what tells the runs apart.
    if set == 0 {
        set = (0..v.parts.len()).fold(0, |s, i| s | 1 << i);
    }
    let mut out = Vec::new();
    // The first completion of each form, in the parts' order. An order
    // between two parts no passing run showed alone is an order of its
    // own (`section_order`, `order`); "not the first of them" is not, and
    // is learned even when no passing run showed it: beside an order of
    // one part before it that separates the runs too, it is what holds
    // whichever part went first (the token ring's runs analysed may all
    // have t2 before t1; holding t2 alone lets t3 go first).
    // Per form: its bits per passing run, how many, the completion, and
    // whether it must be shown alone.
    type Form<'a> = (&'a [u64], usize, fn(usize) -> Completion, bool);
    let forms: [Form<'_>; 2] = [
        (&v.inner_masks, v.inner.len(), Completion::Inner, true),
        (&v.late_masks, v.late.len(), Completion::Late, false),
    ];
    for (extra, n, completion, shown_alone) in forms {
        for k in 0..n {
            let bit = 1u64 << k;
            if shown_alone && !extra.iter().any(|m| m & bit != 0) {
                continue;
            }
            let with =
                |set: u64| v.masks.iter().zip(extra).any(|(m, e)| m & set == set && e & bit != 0);
            if !with(set) {
                let set = reduce(set, order, 1, &with);
                out.extend(learned(later, v, set, completion(k)));
                break;
            }
        }
    }
    out
}

/// What completes a conjunction of parts that passing runs also show.
#[derive(Clone, Copy)]
enum Completion {
    None,
    /// `Vetting::inner[k]`: an order between two parts.
    Inner(usize),
    /// `Vetting::late[k]`: a part that was not the first of them.
    Late(usize),
}

/// Removes parts of `set` in `order` while at least `least` remain and
/// no passing run shows what is left (`shown`).
fn reduce(mut set: u64, order: &[usize], least: u32, shown: &dyn Fn(u64) -> bool) -> u64 {
    for &i in order {
        let fewer = set & !(1 << i);
        if set & (1 << i) != 0 && fewer.count_ones() >= least && !shown(fewer) {
            set = fewer;
        }
    }
    set
}

/// The predicate of the parts in `set`, completed, unless one part alone
/// separates the runs: that is an order of its own.
fn learned((b, sections): Later, v: &Vetting, set: u64, completion: Completion) -> Option<Learned> {
    let chosen: Vec<usize> = (0..v.parts.len()).filter(|&i| set & (1 << i) != 0).collect();
    let alone = |i: usize| v.masks.iter().any(|m| m & (1 << i) != 0);
    if chosen.is_empty() || chosen.iter().any(|&i| !alone(i)) {
        return None;
    }
    let member =
        |a: Site, b: Site, reversed: bool| PairMember { a, b, at_entry: false, reversed, sections };
    let mut pairs: Vec<PairMember> =
        chosen.iter().map(|&i| member(v.parts[i], b, v.seen[i].reversed)).collect();
    let mut any = Vec::new();
    // Holding `x` at its entry until `y` has returned puts y first.
    let first = |x: Site, y: Site| Intervention::HoldUntil {
        site: x,
        point: Point::Entry,
        until: y,
        until_point: Point::Exit,
    };
    let flipped = |i: usize| if sections { v.flipped[i] } else { v.seen[i].reversed };
    // Undo a part some passing run had the other way round (B ran to its
    // end before that call started; for sections, B's section came
    // first): holding that call's entry restores a passing order.
    let undo_part = || {
        let undo = chosen.iter().copied().find(|&i| flipped(i)).unwrap_or(chosen[0]);
        if sections {
            first(v.parts[undo], b)
        } else {
            hold(Kind::Order, v.parts[undo], b, v.seen[undo]).1
        }
    };
    let (iv, bit) = match completion {
        Completion::None => (undo_part(), 0),
        Completion::Inner(k) => {
            let (x, y) = (v.parts[v.inner[k].0], v.parts[v.inner[k].1]);
            pairs.push(member(x, y, v.inner_seen[k].reversed));
            // Restoring the order between the two, when a passing run had
            // it the other way round: what a passing run with every part
            // did.
            let back = if sections { v.inner_flipped[k] } else { v.inner_seen[k].reversed };
            let iv = match (back, sections) {
                (false, _) => undo_part(),
                (true, true) => first(x, y),
                (true, false) => hold(Kind::Order, x, y, v.inner_seen[k]).1,
            };
            (iv, INNER)
        }
        Completion::Late(k) => {
            // Every other part of another thread waits until y has
            // returned: y comes first.
            let y = v.parts[v.late[k]];
            let others: Vec<Site> =
                v.parts.iter().copied().filter(|x| *x != y && x.role != y.role).collect();
            any = others.iter().map(|&x| member(x, y, false)).collect();
            let each: Vec<Intervention> = others.iter().map(|&x| first(x, y)).collect();
            let iv =
                if each.len() == 1 { each.into_iter().next()? } else { Intervention::All { each } };
            (iv, LATE)
        }
    };
    let head = v.parts[chosen[0]];
    let count = (pairs.len() + any.len()).min(0x1f) as u8;
    let key = PredKey {
        other: Some(Other {
            func: head.func,
            calls: Calls::Site { role: head.role, instance: head.instance },
        }),
        arg: count | if sections { SECTIONS } else { 0 } | bit,
        ..PredKey::at(Kind::AfterAll, b)
    };
    Some((key, Condition::AfterAll { pairs, any }, Anchor::FirstExit, Some(iv)))
}
