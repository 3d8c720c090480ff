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

use super::{
    Anchor, Calls, Condition, Kind, Other, PairMember, PredKey,
    base::{Funcs, Learned},
    calls::site_of,
    index::RunIndex,
    pairs::{Passing, hold},
};
use crate::model::{Run, Site};
use crate::util::fxhash::FxMap;

/// Calls of a function on one thread looked at, from its first.
pub const MAX_INSTANCE: u32 = 4;
/// Calls of a run looked at; a failing run with more: none is learned.
pub const MAX_CALLS: usize = 128;
/// Parts a conjunction may start from (bits of a mask).
const MAX_PARTS: usize = 64;

/// Per later call B, the calls every failing run so far ended before B
/// started.
#[derive(Default)]
pub(super) struct Candidates {
    started: bool,
    /// A failing run had too many calls: nothing is learned.
    skip: bool,
    after: FxMap<Site, Vec<Site>>,
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
    let mut here: FxMap<Site, Vec<Site>> = FxMap::default();
    for b in &calls {
        let mut before: Vec<Site> = calls
            .iter()
            .filter(|a| a.role != b.role && a.exit_ns.is_some_and(|x| x < b.entry_ns))
            .map(|a| site_of(a))
            .collect();
        if before.len() >= 2 {
            before.sort_unstable();
            here.insert(site_of(b), before);
        }
    }
    if !out.started {
        out.started = true;
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
}

/// What the passing runs showed of one B's parts.
struct Vetting {
    parts: Vec<Site>,
    /// Per passing run with B: the parts that held (bit i: `parts[i]`).
    masks: Vec<u64>,
    seen: Vec<Passing>,
}

/// The conjunctions no passing run shows whole, reduced to the fewest
/// parts, with the hold that negates each.
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: Candidates) -> Vec<Learned> {
    let mut vetting: Vec<(Site, Vetting)> = cands
        .after
        .into_iter()
        .filter(|(_, parts)| parts.len() <= MAX_PARTS)
        .map(|(b, parts)| {
            let seen = vec![Passing::NONE; parts.len()];
            (b, Vetting { parts, masks: Vec::new(), seen })
        })
        .collect();
    vetting.sort_unstable_by_key(|v| v.0);
    if vetting.is_empty() {
        return Vec::new();
    }
    for run in passing {
        let idx = funcs.index(run);
        for (b, v) in &mut vetting {
            let Some(cb) = idx.call(*b) else { continue };
            let mut mask = 0u64;
            for (i, a) in v.parts.iter().enumerate() {
                let Some(ca) = idx.call(*a) else { continue };
                if ca.exit_ns.is_some_and(|x| x < cb.entry_ns) {
                    mask |= 1 << i;
                }
                v.seen[i].see(ca, cb);
            }
            v.masks.push(mask);
        }
    }
    let mut out = Vec::new();
    for (b, v) in vetting {
        let order = removal_order(&v.parts, &cands.first);
        if let Some(learned) = conjunction(b, &v, &order) {
            out.push(learned);
        }
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
/// `order`, as a predicate.
fn conjunction(b: Site, v: &Vetting, order: &[usize]) -> Option<Learned> {
    if v.masks.is_empty() {
        return None;
    }
    let shown = |set: u64| v.masks.iter().any(|m| m & set == set);
    // Parts every passing run with B also showed tell nothing apart.
    let mut set: u64 = 0;
    for i in 0..v.parts.len() {
        if v.masks.iter().any(|m| m & (1 << i) == 0) {
            set |= 1 << i;
        }
    }
    if set.count_ones() < 2 || shown(set) {
        return None;
    }
    for &i in order {
        let fewer = set & !(1 << i);
        if set & (1 << i) != 0 && fewer.count_ones() >= 2 && !shown(fewer) {
            set = fewer;
        }
    }
    let chosen: Vec<usize> = (0..v.parts.len()).filter(|&i| set & (1 << i) != 0).collect();
    // One part alone separating the runs is an order of its own.
    if chosen.iter().any(|&i| !shown(1 << i)) {
        return None;
    }
    let pairs: Vec<PairMember> = chosen
        .iter()
        .map(|&i| PairMember { a: v.parts[i], b, at_entry: false, reversed: v.seen[i].reversed })
        .collect();
    // Undo a part some passing run had the other way round (B ran to its
    // end before that call started): holding that call's entry restores
    // a passing order.
    let undo = chosen.iter().copied().find(|&i| v.seen[i].reversed).unwrap_or(chosen[0]);
    let (_, iv) = hold(Kind::Order, v.parts[undo], b, v.seen[undo]);
    let first = v.parts[chosen[0]];
    let key = PredKey {
        other: Some(Other {
            func: first.func,
            calls: Calls::Site { role: first.role, instance: first.instance },
        }),
        arg: chosen.len().min(usize::from(u8::MAX)) as u8,
        ..PredKey::at(Kind::AfterAll, b)
    };
    Some((key, Condition::AfterAll { pairs }, Anchor::FirstExit, Some(iv)))
}
