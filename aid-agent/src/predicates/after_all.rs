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
    /// Sections: some passing run had B's first section before the
    /// part's.
    flipped: Vec<bool>,
}

/// The conjunctions no passing run shows whole, reduced to the fewest
/// parts, with the hold that negates each.
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: Candidates) -> Vec<Learned> {
    let mut vetting: Vec<(Later, Vetting)> = cands
        .after
        .into_iter()
        .filter(|(_, parts)| parts.len() <= MAX_PARTS)
        .map(|(b, parts)| {
            let (seen, flipped) = (vec![Passing::NONE; parts.len()], vec![false; parts.len()]);
            (b, Vetting { parts, masks: Vec::new(), seen, flipped })
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
            let ib = idx.index_of(*b);
            let mut mask = 0u64;
            for (i, a) in v.parts.iter().enumerate() {
                let Some(ca) = idx.call(*a) else { continue };
                let held = match (&firsts, *in_sections) {
                    (Some(firsts), true) => {
                        let order =
                            idx.index_of(*a).zip(ib).and_then(|(ia, ib)| firsts.before(ia, ib));
                        v.flipped[i] |= order.is_some_and(|(before, _)| !before);
                        order.is_some_and(|(before, _)| before)
                    }
                    _ => ca.exit_ns.is_some_and(|x| x < cb.entry_ns),
                };
                if held {
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
fn conjunction((b, sections): Later, v: &Vetting, order: &[usize]) -> Option<Learned> {
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
        .map(|&i| PairMember {
            a: v.parts[i],
            b,
            at_entry: false,
            reversed: v.seen[i].reversed,
            sections,
        })
        .collect();
    // Undo a part some passing run had the other way round (B ran to its
    // end before that call started; for sections, B's section came
    // first): holding that call's entry restores a passing order.
    let flipped = |i: usize| if sections { v.flipped[i] } else { v.seen[i].reversed };
    let undo = chosen.iter().copied().find(|&i| flipped(i)).unwrap_or(chosen[0]);
    let iv = if sections {
        let until = b;
        Intervention::HoldUntil {
            site: v.parts[undo],
            point: Point::Entry,
            until,
            until_point: Point::Exit,
        }
    } else {
        hold(Kind::Order, v.parts[undo], b, v.seen[undo]).1
    };
    let first = v.parts[chosen[0]];
    let key = PredKey {
        other: Some(Other {
            func: first.func,
            calls: Calls::Site { role: first.role, instance: first.instance },
        }),
        arg: chosen.len().min(usize::from(!SECTIONS)) as u8 | if sections { SECTIONS } else { 0 },
        ..PredKey::at(Kind::AfterAll, b)
    };
    Some((key, Condition::AfterAll { pairs }, Anchor::FirstExit, Some(iv)))
}
