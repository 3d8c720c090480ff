//! Lock-order cycles between threads: a call on one thread holds lock L1
//! and takes L2 while a call on another thread holds L2 and takes L1 — the
//! two locks held at once, each thread about to wait for the other's: a
//! deadlock (a `hang`, `sys/hang.rs`), or one that a timed lock call or a
//! timeout cut short.
//!
//! What it reads: the entries of `pthread_mutex_lock` and
//! `pthread_mutex_unlock` that aid's synchronisation-point probes record
//! with the lock's address (in amplified runs, the intervened runs of an
//! amplified session, and every run of a default-mode session whose budget
//! had room for them). A thread that entered `lock(L2)` after `lock(L1)`,
//! with no `unlock(L1)` between, held L1 when it asked for L2 (it got past
//! `lock(L1)`); from that request until its next unlock of either lock
//! (or the run's end) it held L1 and had not let L2 go. Two such nested
//! requests on two threads, for the same two locks in opposite orders,
//! whose spans intersect, are a deadlock: at the later request T, thread
//! A holds L1 and B holds L2; A cannot have L2 then (B has it, and A has
//! released nothing since asking), so A waits for L2, and B for L1. Only
//! that moment separates runs: the opposite orders alone (Goodlock's
//! lock-order graph) are in every run of a program like this, deadlocked
//! or not, and so is one thread taking L2 just after the other released
//! it while still holding L1.
//!
//! Each nested request is charged to the innermost traced call that
//! contains both of its lock calls (as `locks.rs` charges sections), and
//! learned per pair of groups (function, thread class, caller) — the key
//! is the same whichever thread took its first lock first — when failing
//! runs show it and no passing run does. The locks are named in the
//! condition by the order the first call took them ("its 1st and its 2nd
//! lock"), stable across runs where the addresses are not. The negating
//! intervention serialises the two groups: with one call wholly before
//! the other, the two locks are never held by both at once.

use super::{
    Anchor, Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned},
    calls::call_set,
    index::{GroupKey, RunIndex, end_of},
};
use crate::model::{Function, Intervention, Role, Run};
use crate::util::fxhash::{FxMap, FxSet};

/// Functions that wait until they hold an exclusive lock (a `trylock` or a
/// timed lock may give up: not counted).
const TAKES: &[&str] = &["pthread_mutex_lock"];
/// Functions that release one.
const RELEASES: &[&str] = &["pthread_mutex_unlock"];

/// What a function is to lock cycles, by function id: 1 takes a lock, 2
/// releases one, 0 neither. Only aid's sync-point probes count (a traced
/// function of the same name is the user's).
pub(super) fn lock_calls(functions: &[Function]) -> Vec<u8> {
    functions
        .iter()
        .map(|f| match super::sections::sync_name(f) {
            Some(name) if TAKES.contains(&name) => 1,
            Some(name) if RELEASES.contains(&name) => 2,
            _ => 0,
        })
        .collect()
}

/// (first call's group, second call's group), in key order.
pub(super) type Cycle = (GroupKey, GroupKey);

/// What one run shows of a cycle: the later of the two calls' entries
/// (where serialising acts), and which of the first call's locks (by the
/// order it took them, 1-based) it held and which it asked for.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub at_ns: u64,
    pub held: u32,
    pub takes: u32,
}

/// One nested request: a thread asked for `takes` while holding `held`, at
/// `from_ns`; it held `held` without having let `takes` go until `until_ns`
/// (its next unlock of either, or the run's end); inside call `call`.
struct Nested {
    role: Role,
    held: i64,
    takes: i64,
    from_ns: u64,
    until_ns: u64,
    call: u32,
}

/// A lock a thread holds: its address, when it asked for it, and the
/// traced calls it was in then.
struct Holding {
    addr: i64,
    stack: Vec<u32>,
}

/// Every lock-order cycle of the run, with what it showed first.
pub(super) fn cycles(idx: &RunIndex<'_>, lock_calls: &[u8]) -> FxMap<Cycle, Seen> {
    let run = idx.run;
    let mut out: FxMap<Cycle, Seen> = FxMap::default();
    let nested = nested_requests(run, idx, lock_calls);
    if nested.len() < 2 {
        return out;
    }
    // By (held, takes): the other side of a cycle is (takes, held).
    let mut by_pair: FxMap<(i64, i64), Vec<usize>> = FxMap::default();
    for (i, n) in nested.iter().enumerate() {
        by_pair.entry((n.held, n.takes)).or_default().push(i);
    }
    for (i, a) in nested.iter().enumerate() {
        let Some(others) = by_pair.get(&(a.takes, a.held)) else { continue };
        for &j in others.iter().filter(|&&j| j > i) {
            let b = &nested[j];
            if a.role == b.role || a.from_ns >= b.until_ns || b.from_ns >= a.until_ns {
                continue;
            }
            let (Some(ga), Some(gb)) = (idx.group[a.call as usize], idx.group[b.call as usize])
            else {
                continue;
            };
            // The key in group order; the first call's locks are named by
            // the order it took them.
            let (first, second, ga, gb) = if ga <= gb { (a, b, ga, gb) } else { (b, a, gb, ga) };
            let (ca, cb) = (&run.calls[first.call as usize], &run.calls[second.call as usize]);
            let at_ns = ca.entry_ns.max(cb.entry_ns);
            let order = taken_order(run, first.role, ca.entry_ns, end_of(ca, run), lock_calls);
            let ordinal =
                |addr: i64| order.iter().position(|&x| x == addr).map_or(0, |k| k as u32 + 1);
            let seen = Seen { at_ns, held: ordinal(first.held), takes: ordinal(first.takes) };
            let e = out.entry((ga, gb)).or_insert(seen);
            if at_ns < e.at_ns {
                *e = seen;
            }
        }
    }
    out
}

/// The distinct locks `role` asked for between `from` and `to`, in the
/// order it first asked.
fn taken_order(run: &Run, role: Role, from: u64, to: u64, lock_calls: &[u8]) -> Vec<i64> {
    let mut order: Vec<i64> = Vec::new();
    for c in run.calls.iter().filter(|c| c.role == role && c.entry_ns >= from && c.entry_ns <= to) {
        if lock_calls.get(c.func as usize) == Some(&1) && !order.contains(&c.args[0]) {
            order.push(c.args[0]);
        }
    }
    order
}

/// Every request for a lock made while holding another, on every thread,
/// charged to the innermost traced call containing both lock calls.
fn nested_requests(run: &Run, idx: &RunIndex<'_>, lock_calls: &[u8]) -> Vec<Nested> {
    let kind = |f: u32| lock_calls.get(f as usize).copied().unwrap_or(0);
    let mut out: Vec<Nested> = Vec::new();
    if !run.calls.iter().any(|c| kind(c.func) == 1) {
        return out;
    }
    // Per thread, the traced calls running (calls nest on a thread;
    // `run.calls` is in entry order) and the locks held.
    let mut stacks: FxMap<Role, Vec<u32>> = FxMap::default();
    let mut held: FxMap<Role, Vec<Holding>> = FxMap::default();
    // Nested requests still holding their first lock, per thread.
    let mut open: FxMap<Role, Vec<usize>> = FxMap::default();
    for (i, c) in run.calls.iter().enumerate() {
        let traced = idx.group[i].is_some();
        let k = kind(c.func);
        if !traced && k == 0 {
            continue;
        }
        let stack = stacks.entry(c.role).or_default();
        while stack.last().is_some_and(|&j| end_of(&run.calls[j as usize], run) < c.entry_ns) {
            stack.pop();
        }
        if traced {
            stack.push(i as u32);
            continue;
        }
        let addr = c.args[0];
        let mine = held.entry(c.role).or_default();
        if k == 2 {
            // The release ends what the thread held of this lock.
            if let Some(p) = mine.iter().rposition(|h| h.addr == addr) {
                mine.remove(p);
            }
            if let Some(list) = open.get_mut(&c.role) {
                list.retain(|&n| {
                    let close = out[n].held == addr || out[n].takes == addr;
                    if close {
                        out[n].until_ns = c.entry_ns;
                    }
                    !close
                });
            }
            continue;
        }
        for h in mine.iter().filter(|h| h.addr != addr) {
            let Some(call) = innermost_common(&h.stack, stack) else { continue };
            open.entry(c.role).or_default().push(out.len());
            out.push(Nested {
                role: c.role,
                held: h.addr,
                takes: addr,
                from_ns: c.entry_ns,
                until_ns: run.end_ns.max(c.entry_ns + 1),
                call,
            });
        }
        mine.push(Holding { addr, stack: stack.clone() });
    }
    out
}

/// The innermost call both stacks are in.
fn innermost_common(a: &[u32], b: &[u32]) -> Option<u32> {
    a.iter().zip(b).take_while(|(x, y)| x == y).last().map(|(x, _)| *x)
}

/// What the passing runs showed.
#[derive(Default)]
pub(super) struct CycleBase {
    seen: FxSet<Cycle>,
}

/// Cycles of failing runs no passing run shows, with the lock ordinals
/// where the failing runs agree (0 where they do not).
#[derive(Default)]
pub(super) struct Candidates {
    found: FxMap<Cycle, (u32, u32)>,
}

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut CycleBase) {
    base.seen.extend(cycles(idx, &funcs.lock_calls).into_keys());
}

pub(super) fn candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &CycleBase,
    out: &mut Candidates,
) {
    for (k, seen) in cycles(idx, &funcs.lock_calls) {
        if base.seen.contains(&k) {
            continue;
        }
        let have = out.found.entry(k).or_insert((seen.held, seen.takes));
        if *have != (seen.held, seen.takes) {
            *have = (0, 0);
        }
    }
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    let mut found: Vec<_> = cands.found.iter().collect();
    found.sort_unstable_by_key(|e| e.0);
    found
        .into_iter()
        .map(|(&(ga, gb), &(held, takes))| {
            let key = PredKey {
                kind: Kind::LockCycle,
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
                object: None,
            };
            (key, Condition::LockCycle { held, takes }, Anchor::LaterEntry, Some(iv))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn innermost_common_is_the_deepest_shared_call() {
        assert_eq!(innermost_common(&[1, 4, 7], &[1, 4, 9]), Some(4));
        assert_eq!(innermost_common(&[1], &[2]), None);
    }
}
