//! A consumer ahead of its producer: some call of C starts when no more
//! calls of P (on another thread) have returned than calls of C have
//! started before it. A stack popped before the push it needs has
//! returned, a buffer read before its slot is written: each C takes what
//! one P made, so the k-th C needs k finished Ps, and it is their count,
//! not the order of any one pair of calls, that fails the run (the k-th
//! pop of one run is the 3rd, of another the 7th).
//!
//! Learned over pairs of groups (function, thread class, caller) on two
//! different thread classes, both called at least twice in a failing run
//! that shows it, when no passing run shows it and some passing run calls
//! both. Every C is counted, the first too: a pair whose first C starts
//! before any P has returned in passing runs is no producer and consumer,
//! and is not learned.
//!
//! The negating intervention acts where the two sides synchronise: every
//! lock the outermost traced call around C takes on its thread waits while
//! the outermost traced call around P runs on another thread. A hold at
//! C's entry could not do it: C runs inside a critical section of the lock
//! P needs, so P could not return while C waited. Where C does not run
//! under a lock its call takes, the hold leaves C as it was, the predicate
//! still holds in the intervened runs, and nothing is confirmed.

use super::{
    Anchor, Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned},
    calls::call_set,
    index::{GroupKey, RunIndex, end_of},
};
use crate::model::{Intervention, Run};
use crate::util::fxhash::FxMap;

/// (producer's group, consumer's group).
pub(super) type Pair = (GroupKey, GroupKey);

/// The entry of the first call of `consumer` that starts when no more
/// calls of `producer` have returned than calls of `consumer` started
/// before it; None when every call of `consumer` had one more.
pub(super) fn outrun_at(
    idx: &RunIndex<'_>,
    producer: &GroupKey,
    consumer: &GroupKey,
) -> Option<u64> {
    let mut exits: Vec<u64> = idx.group_calls(producer).filter_map(|c| c.exit_ns).collect();
    exits.sort_unstable();
    let mut done = 0;
    for (k, c) in idx.group_calls(consumer).enumerate() {
        while done < exits.len() && exits[done] < c.entry_ns {
            done += 1;
        }
        if done <= k {
            return Some(c.entry_ns);
        }
    }
    None
}

/// The group of the outermost traced call on the thread of call `i` that
/// contains it (the call itself when none does).
fn outermost(idx: &RunIndex<'_>, i: u32) -> Option<GroupKey> {
    let run: &Run = idx.run;
    let c = &run.calls[i as usize];
    let end = end_of(c, run);
    run.calls
        .iter()
        .enumerate()
        .filter(|(j, d)| {
            d.role == c.role
                && d.entry_ns <= c.entry_ns
                && end_of(d, run) >= end
                && idx.group[*j].is_some()
        })
        .min_by_key(|(_, d)| d.entry_ns)
        .and_then(|(j, _)| idx.group[j])
}

/// Pairs the failing runs show, with where their intervention acts (the
/// outermost calls around C and around P; None when failing runs
/// disagreed), and how many passing runs called both.
#[derive(Default)]
pub(super) struct Candidates {
    found: FxMap<Pair, (Option<Pair>, u32)>,
}

pub(super) fn candidates(idx: &RunIndex<'_>, out: &mut Candidates) {
    let busy: Vec<(&GroupKey, &Vec<u32>)> =
        idx.by_group.iter().filter(|(_, calls)| calls.len() >= 2).collect();
    for &(p, pcalls) in &busy {
        for &(c, _) in busy.iter().filter(|(c, _)| c.1 != p.1) {
            let Some(at) = outrun_at(idx, p, c) else { continue };
            let first_c =
                idx.by_group[c].iter().copied().find(|&i| idx.run.calls[i as usize].entry_ns == at);
            let around = first_c
                .and_then(|i| outermost(idx, i))
                .zip(outermost(idx, pcalls[0]))
                .map(|(ec, ep)| (ep, ec));
            let e = out.found.entry((*p, *c)).or_insert((around, 0));
            if e.0 != around {
                e.0 = None;
            }
        }
    }
}

/// Drops the pairs a passing run shows; counts the passing runs that
/// called both.
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: &mut Candidates) {
    for run in passing {
        if cands.found.is_empty() {
            break;
        }
        let idx = funcs.index(run);
        cands.found.retain(|(p, c), (_, co)| {
            if !idx.by_group.contains_key(p) || !idx.by_group.contains_key(c) {
                return true;
            }
            *co += 1;
            outrun_at(&idx, p, c).is_none()
        });
    }
    cands.found.retain(|_, (_, co)| *co > 0);
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    let mut found: Vec<_> = cands.found.iter().collect();
    found.sort_unstable_by_key(|e| e.0);
    found
        .into_iter()
        .map(|(&(p, c), &(around, _))| {
            let key = PredKey {
                kind: Kind::Outruns,
                func: c.0,
                calls: Calls::Group { class: c.1, within: c.2 },
                other: Some(Other { func: p.0, calls: Calls::Group { class: p.1, within: p.2 } }),
                arg: 0,
                callee: None,
            };
            let iv = around.map(|(ep, ec)| Intervention::HoldLocks {
                calls: call_set(funcs, &ec),
                while_running: call_set(funcs, &ep),
            });
            (key, Condition::AheadOfProducer, Anchor::Entry, iv)
        })
        .collect()
}
