//! A consumer ahead of its producer: some call of C starts when no more
//! calls of P (on another thread) have returned than calls of C have
//! started before it. A stack popped before the push it needs has
//! returned, a buffer read before its slot is written: each C takes what
//! one P made, so the k-th C needs k finished Ps, and it is their count,
//! not the order of any one pair of calls, that fails the run (the k-th
//! pop of one run is the 3rd, of another the 7th).
//!
//! Learned over pairs of groups (function, thread class, caller) on two
//! different thread classes, C called at least twice in a failing run
//! that shows it, when no passing run shows it and some passing run calls
//! both, C at least twice (and so, not showing it, P at least twice).
//! Every C is counted, the first too: a pair whose first C starts before
//! any P has returned in passing runs is no producer and consumer, and is
//! not learned.
//!
//! The negating intervention acts where the two sides synchronise: every
//! lock the outermost traced call around C takes on its thread waits while
//! the outermost traced call around P runs on another thread. A hold at
//! C's entry could not do it: C runs inside a critical section of the lock
//! P needs, so P could not return while C waited. The hold is the
//! predicate's intervention only where, in every failing run that showed
//! it, the call of C that ran ahead began while its thread held a lock it
//! had taken inside that outermost call: elsewhere it would leave C as it
//! was (a pool of checkers that take no lock, ahead of a pool of setters,
//! is no producer and consumer to wait on), and the predicate is learned
//! with no intervention, untested.

use super::{
    Anchor, Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned, LockOp},
    calls::call_set,
    index::{GroupKey, RunIndex, enclosing},
};
use crate::model::{FuncId, Intervention, Role, Run};
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
    first_ahead(&returns(idx, producer), idx.group_calls(consumer).map(|c| c.entry_ns))
        .map(|(_, at)| at)
}

/// The returns of a group's calls, in time order (a call the run ended
/// inside never returned).
fn returns(idx: &RunIndex<'_>, g: &GroupKey) -> Vec<u64> {
    let mut exits: Vec<u64> = idx.group_calls(g).filter_map(|c| c.exit_ns).collect();
    exits.sort_unstable();
    exits
}

/// [`outrun_at`] over the producer's sorted returns and the consumer's
/// entries in order: the position of the consumer's call that ran ahead,
/// and its entry.
fn first_ahead(exits: &[u64], entries: impl Iterator<Item = u64>) -> Option<(usize, u64)> {
    let mut done = 0;
    for (k, at) in entries.enumerate() {
        while done < exits.len() && exits[done] < at {
            done += 1;
        }
        if done <= k {
            return Some((k, at));
        }
    }
    None
}

/// Pairs the failing runs show, with where their intervention acts (the
/// outermost calls around C and around P; None when failing runs
/// disagreed), and how many passing runs called both; and each group's
/// innermost traced caller, when every call of it the failing runs made
/// had the same one.
#[derive(Default)]
pub(super) struct Candidates {
    found: FxMap<Pair, (Option<Pair>, u32)>,
    caller: FxMap<GroupKey, Option<FuncId>>,
}

pub(super) fn candidates(idx: &RunIndex<'_>, funcs: &Funcs, out: &mut Candidates) {
    let run = idx.run;
    let up = enclosing(run, |f| funcs.keep(f));
    let all: Vec<(&GroupKey, &Vec<u32>)> = idx.by_group.iter().collect();
    // The outermost traced call around call `i` on its thread (`i` when
    // none encloses it).
    let top = |mut i: u32| {
        while let Some(j) = up[i as usize].filter(|&j| idx.group[j as usize].is_some()) {
            i = j;
        }
        i
    };
    let held = latest_held(run, &funcs.lock_ops);
    for &(g, calls) in &all {
        let mut by = calls.iter().map(|&i| up[i as usize].map(|j| run.calls[j as usize].func));
        let first = by.next().flatten();
        let same = if by.all(|f| f == first) { first } else { None };
        let e = out.caller.entry(*g).or_insert(same);
        if *e != same {
            *e = None;
        }
    }
    for &(p, pcalls) in &all {
        let exits = returns(idx, p);
        let ep = idx.group[top(pcalls[0]) as usize];
        // A consumer called twice at least: ahead at its first call is
        // the order of two calls (`order`), not a count.
        for &(c, ccalls) in all.iter().filter(|(c, calls)| c.1 != p.1 && calls.len() >= 2) {
            let entries = ccalls.iter().map(|&i| run.calls[i as usize].entry_ns);
            let Some((k, _)) = first_ahead(&exits, entries) else { continue };
            let (i, t) = (ccalls[k], top(ccalls[k]));
            // Where the hold acts: only a call of C its thread's outer
            // call made holding a lock it took can be made to wait there.
            let locked = held[i as usize].is_some_and(|at| at >= run.calls[t as usize].entry_ns);
            let around = ep.zip(idx.group[t as usize].filter(|_| locked));
            let e = out.found.entry((*p, *c)).or_insert((around, 0));
            if e.0 != around {
                e.0 = None;
            }
        }
    }
}

/// Per call of the run: the latest entry of a lock call whose exclusive
/// lock the call's thread held when the call began (None: it held none).
/// A call of C began under a lock its outer call took when that entry is
/// no earlier than the outer call's: the lock calls a
/// [`Intervention::HoldLocks`] on the outer call's function makes wait.
/// A run without lock events shows none.
fn latest_held(run: &Run, ops: &[LockOp]) -> Vec<Option<u64>> {
    let mut held: FxMap<Role, Vec<(i64, u64)>> = FxMap::default();
    run.calls
        .iter()
        .map(|d| {
            let mine = held.entry(d.role).or_default();
            let latest = mine.iter().map(|h| h.1).max();
            match ops.get(d.func as usize) {
                Some(LockOp::Acquire) => mine.push((d.args[0], d.entry_ns)),
                Some(LockOp::Release) => {
                    if let Some(k) = mine.iter().rposition(|h| h.0 == d.args[0]) {
                        mine.remove(k);
                    }
                }
                _ => {}
            }
            latest
        })
        .collect()
}

/// Drops the pairs a passing run shows; counts the passing runs that
/// called both, C at least twice: only there did a passing run keep a
/// count (its 2nd C after two Ps had returned), and a pair no passing
/// run kept one for is not learned (a function called once per run,
/// `empty` before the first enqueue, is no producer of dequeues because
/// the passing runs dequeued once).
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: &mut Candidates) {
    for run in passing {
        if cands.found.is_empty() {
            break;
        }
        let idx = funcs.index(run);
        cands.found.retain(|(p, c), (_, co)| {
            let twice = idx.by_group.get(c).is_some_and(|calls| calls.len() >= 2);
            if !idx.by_group.contains_key(p) || !twice {
                return true;
            }
            *co += 1;
            outrun_at(&idx, p, c).is_none()
        });
    }
    cands.found.retain(|_, (_, co)| *co > 0);
}

/// Whether another pair names, in place of one side, the traced call
/// every call of that side ran inside (same thread class): "pop runs
/// ahead of push" says what "pop runs ahead of inc_top" (push's last
/// step) says, in the words of the program's interface, and is kept.
fn has_outer(cands: &Candidates, (p, c): Pair) -> bool {
    let outer = |g: &GroupKey| match cands.caller.get(g) {
        Some(Some(f)) => Some((*f, g.1)),
        _ => None,
    };
    let any = |test: &dyn Fn(&Pair) -> bool| cands.found.keys().any(test);
    outer(&p).is_some_and(|(f, class)| any(&|k| k.1 == c && (k.0.0, k.0.1) == (f, class)))
        || outer(&c).is_some_and(|(f, class)| any(&|k| k.0 == p && (k.1.0, k.1.1) == (f, class)))
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    let mut found: Vec<_> = cands.found.iter().filter(|(k, _)| !has_outer(cands, **k)).collect();
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
