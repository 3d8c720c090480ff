//! Interleaved critical sections: a call takes a lock, releases it, and
//! takes it again later (a check, then an act), and a call on another
//! thread holds the same lock in between — the unserializable
//! interleaving of an atomicity violation (AVIO's "local, remote, local"
//! accesses, read at the granularity of lock sections).
//!
//! What it reads: the critical sections of the run (`sections.rs`: aid's
//! synchronisation-point probes on the lock and unlock calls of
//! exclusive locks, in runs that carry them). A lock has one holder at
//! a time, so a section of thread B released between the releases of
//! two consecutive sections of thread A on the same lock means that B
//! held it after A's first section ended and before A's second one did.
//! A second section the run ended inside (an assertion that fails while
//! it holds the lock, after the other thread's section) counts as
//! released at the end of the run. A section taken again by a
//! condition wait is not a second section: letting the mutex go while
//! waiting is the protocol. A's two sections are charged to the
//! innermost traced call that contains both, so that a call whose two
//! sections are in two helpers (`length`, then `getChars`, both called
//! by `append`) still counts as one call with two sections.
//!
//! Learned per pair of groups (function, thread class, caller) like the
//! group overlaps: "some call of B takes a lock between two critical
//! sections of some call of A on it", when failing runs show it and no
//! passing run does. When passing runs show that too, a narrower form
//! may still separate them: B's was the *last* section between A's two,
//! the one whose state A's second section found (a remote section that
//! a later one undid — an `erase` followed by an `append` — leaves A's
//! check true). It is learned only where the wide form is not ([`LAST`]
//! in the key's `arg`). Where neither form is, the narrowest one may:
//! B's call's n-th section on the lock (n up to [`NTH_SECTIONS`]) was
//! between A's two — a producer whose first hand-off falls between two
//! polls of the consumer, while its later, empty sections come between
//! the consumer's polls in passing runs too ([`nth`] in `arg`). And,
//! where the wide form is not, B a turn ahead: calls of B took the lock at
//! least twice between A's two sections ([`TWICE`]), which threads meant
//! to take turns (a hand-off for every poll) never do in passing runs;
//! or A out of turn: B took the lock between A's two sections, the first
//! of which A took with no section of B since its own previous one
//! ([`OUT_OF_TURN`]) — A polled twice running and polls again after B's
//! hand-off, where passing runs that end one loop with turns of its own
//! never poll again.
//! The negating intervention makes every lock B's calls take wait while
//! a call of A runs on another thread ([`hold_sections`]), which leaves
//! no room between A's sections; for two calls of one function, it
//! serialises the two groups (on the same object, when the failing runs
//! agree on the argument both calls pass). Runs without
//! sync-point events (observation runs, before any amplification) show no
//! interleaving: the predicate is false there, never guessed.

use super::{
    Anchor, Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned},
    index::{GroupKey, RunIndex},
    sections::{Section, Seen, hold_sections, sections},
};
use crate::model::Role;
use crate::util::fxhash::{FxMap, FxSet};

/// (A's group, B's group, form): a call of B held a lock between two
/// critical sections of a call of A on it; the form, a key's `arg`, says
/// which of B's sections did: any (0), the last to hold it before A took
/// it again ([`LAST`]), or B's call's n-th on that lock ([`nth`]).
pub(super) type Interleaving = (GroupKey, GroupKey, u8);

/// The `arg` of an [`Kind::Interleaved`] key in its narrow form (B's was
/// the last section between A's two); 0 is the wide form.
pub(super) const LAST: u8 = 1;

/// How many of a call's first sections on a lock are told apart by their
/// place (the first, the second, ...): a hand-off is among a loop's first
/// few turns, and each place is a predicate more to rank.
pub(super) const NTH_SECTIONS: u8 = 4;

/// The `arg` of an [`Kind::Interleaved`] key whose B section was its
/// call's `n`-th on the lock (1-based, at most [`NTH_SECTIONS`]).
pub(super) const fn nth(n: u8) -> u8 {
    LAST + n
}

/// The `arg` of an [`Kind::Interleaved`] key whose B calls took the lock
/// at least twice between A's two sections: B a turn ahead of A, in a
/// protocol that wants them to take turns (a pop for every push).
pub(super) const TWICE: u8 = 0x40;

/// The `arg` of an [`Kind::Interleaved`] key whose A took the first of
/// its two sections with no section of B's calls since its own previous
/// one (or since the run began), and B took the lock before A's second:
/// A took two turns running and went on after B's — a poll out of turn
/// in a protocol of turns, whose next poll finds B's hand-off with its
/// own counter a turn ahead. Passing runs where one side ends its loop
/// with turns of its own, the other no longer polling, do not show it.
pub(super) const OUT_OF_TURN: u8 = 0x20;

/// The place of an `arg` made by [`nth`], if it is one.
pub(super) fn nth_of(arg: u8) -> Option<u8> {
    (arg > LAST && arg - LAST <= NTH_SECTIONS).then(|| arg - LAST)
}

/// Every interleaving of the run, with what it showed first.
pub(super) fn interleavings(
    idx: &RunIndex<'_>,
    sections: &[Section],
    mask: &dyn Fn(u32) -> u8,
) -> FxMap<Interleaving, Seen> {
    let run = idx.run;
    let mut out: FxMap<Interleaving, Seen> = FxMap::default();
    let mut by_lock: FxMap<i64, Vec<&Section>> = FxMap::default();
    for s in sections {
        by_lock.entry(s.lock).or_default().push(s);
    }
    for list in by_lock.values_mut() {
        list.sort_by_key(|s| s.release_ns);
        // Each thread's sections of this lock, in order, and each
        // section's place among its call's sections of it.
        let mut mine: FxMap<Role, Vec<usize>> = FxMap::default();
        let mut taken: FxMap<u32, u8> = FxMap::default();
        let mut place = Vec::with_capacity(list.len());
        for (i, s) in list.iter().enumerate() {
            mine.entry(s.role).or_default().push(i);
            let n = taken.entry(s.call).or_default();
            *n = n.saturating_add(1);
            place.push(*n);
        }
        for own in mine.values() {
            for (j, w) in own.windows(2).enumerate() {
                let (first, second) = (list[w[0]], list[w[1]]);
                if second.after_wait {
                    continue;
                }
                let Some(a) = innermost_common(&first.stack, &second.stack) else { continue };
                let Some(ga) = idx.group[a as usize] else { continue };
                let between = &list[w[0] + 1..w[1]];
                // The sections of other threads since this thread's
                // previous one on the lock (since the run began, before
                // its first).
                let since = &list[if j == 0 { 0 } else { own[j - 1] + 1 }..w[0]];
                // Whether `since` has a section of a group, looked up once
                // per group of the window (a window has one or two).
                let mut since_has: Vec<(GroupKey, bool)> = Vec::new();
                for (k, other) in between.iter().enumerate() {
                    if other.open {
                        continue;
                    }
                    let last = k + 1 == between.len();
                    let b = other.call;
                    let Some(gb) = idx.group[b as usize] else { continue };
                    let seen = Seen::of(&run.calls[a as usize], &run.calls[b as usize], mask);
                    seen.keep(&mut out, (ga, gb, 0));
                    if last {
                        seen.keep(&mut out, (ga, gb, LAST));
                    }
                    let had = match since_has.iter().find(|(g, _)| *g == gb) {
                        Some(&(_, had)) => had,
                        None => {
                            let had = since.iter().any(|o| idx.group[o.call as usize] == Some(gb));
                            since_has.push((gb, had));
                            had
                        }
                    };
                    if !had {
                        seen.keep(&mut out, (ga, gb, OUT_OF_TURN));
                    }
                    let n = place[w[0] + 1 + k];
                    if n <= NTH_SECTIONS {
                        seen.keep(&mut out, (ga, gb, nth(n)));
                    }
                }
                // Turns: B's sections per group in the window, the ones
                // the run ended inside (taken after A let go) included
                // when A's second section is one too.
                let open_after = list.iter().filter(|o| {
                    second.open && o.open && o.role != first.role && o.acquire_ns > first.release_ns
                });
                let mut turns: FxMap<GroupKey, (u32, u32)> = FxMap::default();
                for other in between.iter().filter(|o| !o.open).chain(open_after) {
                    if let Some(gb) = idx.group[other.call as usize] {
                        turns.entry(gb).or_insert((0, other.call)).0 += 1;
                    }
                }
                for (gb, (n, b)) in turns {
                    if n >= 2 {
                        let seen = Seen::of(&run.calls[a as usize], &run.calls[b as usize], mask);
                        seen.keep(&mut out, (ga, gb, TWICE));
                    }
                }
            }
        }
    }
    out
}

/// The innermost call both stacks are in.
fn innermost_common(a: &[u32], b: &[u32]) -> Option<u32> {
    a.iter().zip(b).take_while(|(x, y)| x == y).last().map(|(x, _)| *x)
}

/// What the passing runs showed.
#[derive(Default)]
pub(super) struct LockBase {
    seen: FxSet<Interleaving>,
}

/// Interleavings of failing runs no passing run shows, with the shared
/// argument positions where the failing runs agree.
#[derive(Default)]
pub(super) struct Candidates {
    found: FxMap<Interleaving, Option<(u8, u8)>>,
}

fn run_interleavings(idx: &RunIndex<'_>, funcs: &Funcs) -> FxMap<Interleaving, Seen> {
    interleavings(idx, &sections(idx, &funcs.lock_ops), &|f| funcs.mask(f))
}

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut LockBase) {
    base.seen.extend(run_interleavings(idx, funcs).into_keys());
}

pub(super) fn candidates(idx: &RunIndex<'_>, funcs: &Funcs, base: &LockBase, out: &mut Candidates) {
    for (k, seen) in run_interleavings(idx, funcs) {
        if base.seen.contains(&k) {
            continue;
        }
        let have = out.found.entry(k).or_insert(seen.shared);
        if *have != seen.shared {
            *have = None;
        }
    }
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    let mut found: Vec<_> = cands
        .found
        .iter()
        // A narrow form only where the wider ones are no candidates
        // (where one is, it holds in every failing run the narrow one
        // does): the last section where the wide form is not, a place
        // where neither is.
        .filter(|(k, _)| {
            let has = |form| cands.found.contains_key(&(k.0, k.1, form));
            match k.2 {
                0 => true,
                LAST | TWICE | OUT_OF_TURN => !has(0),
                _ => !has(0) && !has(LAST),
            }
        })
        .collect();
    found.sort_unstable_by_key(|e| e.0);
    found
        .into_iter()
        .map(|(&(ga, gb, form), &shared)| {
            let key = PredKey {
                kind: Kind::Interleaved,
                func: ga.0,
                calls: Calls::Group { class: ga.1, within: ga.2 },
                other: Some(Other {
                    func: gb.0,
                    calls: Calls::Group { class: gb.1, within: gb.2 },
                }),
                arg: form,
                callee: None,
            };
            let iv = hold_sections(funcs, &ga, &gb, shared);
            (key, Condition::InterleavedSections, Anchor::LaterEntry, Some(iv))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn innermost_common_is_the_deepest_shared_call() {
        assert_eq!(innermost_common(&[1, 4, 7], &[1, 4, 9]), Some(4));
        assert_eq!(innermost_common(&[1, 4], &[1, 4]), Some(4));
        assert_eq!(innermost_common(&[1], &[2]), None);
        assert_eq!(innermost_common(&[], &[2]), None);
    }
}
