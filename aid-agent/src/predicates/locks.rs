//! Interleaved critical sections: a call takes a lock, releases it, and
//! takes it again later (a check, then an act), and a call on another
//! thread holds the same lock in between — the unserializable
//! interleaving of an atomicity violation (AVIO's "local, remote, local"
//! accesses, read at the granularity of lock sections).
//!
//! What it reads: the releases of exclusive locks (`pthread_mutex_unlock`,
//! `pthread_spin_unlock`) that aid's synchronisation-point probes record in
//! runs that carry noise (amplified runs, and the intervened runs of an
//! amplified session), with the lock's address. Releases alone
//! suffice: a lock has one holder at a time, so a release by thread B
//! between two releases by thread A of the same lock means that B held it
//! after A's first section ended and let it go before A's second one
//! began. Each release is charged to the innermost traced call running on
//! its thread; A's two releases to the innermost traced call that contains
//! both, so that a call whose two sections are in two helpers still counts
//! as one call with two sections.
//!
//! Learned per pair of groups (function, thread class, caller) like the
//! group overlaps: "some call of B takes a lock between two critical
//! sections of some call of A on it", when failing runs show it and no
//! passing run does. The negating intervention serialises the two groups
//! (on the same object, when the failing runs agree on the argument both
//! calls pass), which leaves no room between A's sections. Runs without
//! sync-point events (observation runs, before any amplification) show no
//! interleaving: the predicate is false there, never guessed.

use super::{
    Anchor, Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned},
    calls::{call_set, shared_arg},
    index::{GroupKey, RunIndex, end_of},
};
use crate::model::{Function, Intervention, Probe, Role, Run};
use crate::util::fxhash::{FxMap, FxSet};

/// Functions that release a lock only one thread can hold.
const EXCLUSIVE_RELEASES: &[&str] = &["pthread_mutex_unlock", "pthread_spin_unlock"];

/// Whether `f` is one of aid's sync-point probes on an exclusive release
/// (bit per function id, for [`interleavings`]).
pub(super) fn releases(functions: &[Function]) -> Vec<bool> {
    functions
        .iter()
        .map(|f| {
            f.internal
                && f.probe == Probe::Sync
                && EXCLUSIVE_RELEASES.contains(&f.name.split('@').next().unwrap_or(&f.name))
        })
        .collect()
}

/// (A's group, B's group): a call of B held a lock between two critical
/// sections of a call of A on it.
pub(super) type Interleaving = (GroupKey, GroupKey);

/// What one run shows of an interleaving: the earliest moment (the later
/// of the two calls' entries, where serialising acts) and, when the two
/// calls shared a pointer argument, its positions (A's, B's; 0-based).
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub at_ns: u64,
    pub shared: Option<(u8, u8)>,
}

/// One release of an exclusive lock: when, on which thread, and the traced
/// calls running on that thread then (outermost first, call indices).
struct Release {
    t_ns: u64,
    role: Role,
    stack: Vec<u32>,
}

/// Every interleaving of the run, with what it showed first.
pub(super) fn interleavings(
    idx: &RunIndex<'_>,
    releases: &[bool],
    mask: &dyn Fn(u32) -> u8,
) -> FxMap<Interleaving, Seen> {
    let run = idx.run;
    let mut out: FxMap<Interleaving, Seen> = FxMap::default();
    let by_lock = releases_by_lock(run, idx, releases);
    for list in by_lock.values() {
        // Each thread's releases of this lock, in order.
        let mut mine: FxMap<Role, Vec<usize>> = FxMap::default();
        for (i, r) in list.iter().enumerate() {
            mine.entry(r.role).or_default().push(i);
        }
        for own in mine.values() {
            for w in own.windows(2) {
                let (first, second) = (&list[w[0]], &list[w[1]]);
                let Some(a) = innermost_common(&first.stack, &second.stack) else { continue };
                let Some(ga) = idx.group[a as usize] else { continue };
                for other in &list[w[0] + 1..w[1]] {
                    let Some(&b) = other.stack.last() else { continue };
                    let Some(gb) = idx.group[b as usize] else { continue };
                    let (ca, cb) = (&run.calls[a as usize], &run.calls[b as usize]);
                    let at_ns = ca.entry_ns.max(cb.entry_ns);
                    let shared =
                        shared_arg(ca, mask(ca.func), cb, mask(cb.func)).map(|(x, y, _)| (x, y));
                    let e = out.entry((ga, gb)).or_insert(Seen { at_ns, shared });
                    if at_ns < e.at_ns {
                        *e = Seen { at_ns, shared };
                    }
                }
            }
        }
    }
    out
}

/// The releases of each lock (by address), in time order, each with the
/// traced calls its thread was in.
fn releases_by_lock(run: &Run, idx: &RunIndex<'_>, releases: &[bool]) -> FxMap<i64, Vec<Release>> {
    let is_release = |f: u32| releases.get(f as usize).copied().unwrap_or(false);
    let mut by_lock: FxMap<i64, Vec<Release>> = FxMap::default();
    if !run.calls.iter().any(|c| is_release(c.func)) {
        return by_lock;
    }
    // Per thread, a stack of the traced calls running (calls nest on a
    // thread); `run.calls` is in entry order.
    let mut stacks: FxMap<Role, Vec<u32>> = FxMap::default();
    for (i, c) in run.calls.iter().enumerate() {
        let traced = idx.group[i].is_some();
        if !traced && !is_release(c.func) {
            continue;
        }
        let stack = stacks.entry(c.role).or_default();
        while stack.last().is_some_and(|&j| end_of(&run.calls[j as usize], run) < c.entry_ns) {
            stack.pop();
        }
        if traced {
            stack.push(i as u32);
        } else {
            by_lock.entry(c.args[0]).or_default().push(Release {
                t_ns: c.entry_ns,
                role: c.role,
                stack: stack.clone(),
            });
        }
    }
    for list in by_lock.values_mut() {
        list.sort_by_key(|r| r.t_ns);
    }
    by_lock
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

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut LockBase) {
    base.seen.extend(interleavings(idx, &funcs.releases, &|f| funcs.mask(f)).into_keys());
}

pub(super) fn candidates(idx: &RunIndex<'_>, funcs: &Funcs, base: &LockBase, out: &mut Candidates) {
    for (k, seen) in interleavings(idx, &funcs.releases, &|f| funcs.mask(f)) {
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
    let mut found: Vec<_> = cands.found.iter().collect();
    found.sort_unstable_by_key(|e| e.0);
    found
        .into_iter()
        .map(|(&(ga, gb), &shared)| {
            let key = PredKey {
                kind: Kind::Interleaved,
                func: ga.0,
                calls: Calls::Group { class: ga.1, within: ga.2 },
                other: Some(Other {
                    func: gb.0,
                    calls: Calls::Group { class: gb.1, within: gb.2 },
                }),
                arg: 0,
                callee: None,
            };
            let iv = Intervention::SerializeGroups {
                a: call_set(funcs, &ga),
                b: call_set(funcs, &gb),
                object: shared.map(|(a, b)| (a + 1, b + 1)),
            };
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
