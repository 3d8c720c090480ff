//! Critical sections as events: a lock taken and released inside a traced
//! call, on one thread, read from aid's synchronisation-point probes (the
//! entries of `pthread_mutex_lock`, `pthread_mutex_unlock`,
//! `pthread_cond_wait`, … with the lock's address), each charged to the
//! innermost traced call running on its thread when it took the lock.
//!
//! The predicate kind this file learns is the unlocked check of a
//! check-then-act: a call does something, then takes a lock to act on
//! it, and a call on another thread holds that lock in between — it ran
//! after the first call began and released the lock before the first
//! call's own section on it did ("some call of IoDecrement on the
//! PnpStop threads takes the lock after IoIncrement on main has started
//! and before IoIncrement takes it"). What the first call saw before its
//! lock (a flag, a state field) may no longer hold when it acts. Learned
//! per pair of groups, when failing runs show it and no passing run
//! does; negated by making every lock the other call takes wait while
//! the first call runs ([`hold_sections`]): the other call's sections
//! then cannot come inside the first. Where that is no candidate, the same for the
//! first call's n-th lock alone (by the order it first took them): a
//! two-stage update read between its sections on two locks, when passing
//! runs show the reader taking the first lock early.
//!
//! A second kind orders sections of two calls on the same lock, for
//! threads that are one each (per-call keys): "the first critical
//! section of t2 on a lock came before t1's first section on it", when
//! failing runs show it and no passing run does (a consumer that polled
//! before the producer's first hand-off). A call's first section is the
//! first one it took or ran in: a call its caller made holding the lock
//! (the producer's second `enqueue`, inside its loop's section) is
//! ordered by that section. Sections of one lock are ordered by their
//! releases. Negated by holding the second call's thread at its entry
//! until the first call has returned.
//!
//! A section's time is known from its two probes only: taking the lock
//! is dated at the lock call's entry (it may have waited after), letting
//! it go at the unlock's entry. A lock is held by one thread at a time,
//! so a section released before another section on the same lock was
//! released came wholly before it. A condition wait lets its mutex go
//! and takes it again before it returns: its entry ends the section, and
//! a new one is taken no earlier than that. A section never released
//! (the run ended inside it: an abort while holding it, a hang) ends
//! with the run. Exclusive locks only: a read lock's sections overlap.

use super::{
    Anchor, Calls, Condition, Kind, Other, PredKey,
    base::{Funcs, Learned, LockOp},
    calls::{call_set, shared_arg, site_of},
    index::{GroupKey, RunIndex, end_of},
};
use crate::model::{Call, Function, Intervention, Point, Probe, Role, Run, Site};
use crate::util::fxhash::{FxMap, FxSet};

/// What one run shows of an interleaving or an early section: the earliest moment (the later
/// of the two calls' entries, where serialising acts) and, when the two
/// calls shared a pointer argument, its positions (A's, B's; 0-based).
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub at_ns: u64,
    pub shared: Option<(u8, u8)>,
}

impl Seen {
    /// What calls `a` and `b` show together (`mask`: each function's
    /// pointer-like arguments).
    pub(super) fn of(a: &Call, b: &Call, mask: &dyn Fn(u32) -> u8) -> Seen {
        Seen {
            at_ns: a.entry_ns.max(b.entry_ns),
            shared: shared_arg(a, mask(a.func), b, mask(b.func)).map(|(x, y, _)| (x, y)),
        }
    }

    /// Records it under `key`, unless the run showed `key` earlier.
    pub(super) fn keep<K: Eq + std::hash::Hash>(self, out: &mut FxMap<K, Seen>, key: K) {
        let e = out.entry(key).or_insert(self);
        if self.at_ns < e.at_ns {
            *e = self;
        }
    }
}

const ACQUIRES: &[&str] = &[
    "pthread_mutex_lock",
    "pthread_mutex_trylock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_trywrlock",
    "pthread_rwlock_timedwrlock",
];
const RELEASES: &[&str] = &["pthread_mutex_unlock", "pthread_rwlock_unlock"];
const WAITS: &[&str] = &["pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait"];

/// The acquisitions that never wait for the lock: they take it at once or
/// fail.
const TRIES: &[&str] = &["pthread_mutex_trylock", "pthread_rwlock_trywrlock"];

/// The C library function `f` is, without its symbol version, when it is
/// one of aid's own sync-point probes.
pub(super) fn sync_name(f: &Function) -> Option<&str> {
    (f.internal && f.probe == Probe::Sync).then(|| f.name.split('@').next().unwrap_or(&f.name))
}

/// Whether `f` is one of aid's sync points that takes a lock without
/// waiting for it (a try-lock).
pub fn takes_without_waiting(f: &Function) -> bool {
    sync_name(f).is_some_and(|name| TRIES.contains(&name))
}

/// What each function of the session does to a lock (by id): only aid's
/// own sync-point probes do anything.
pub fn lock_ops(functions: &[Function]) -> Vec<LockOp> {
    functions
        .iter()
        .map(|f| {
            let Some(name) = sync_name(f) else { return LockOp::None };
            if ACQUIRES.contains(&name) {
                LockOp::Acquire
            } else if RELEASES.contains(&name) {
                LockOp::Release
            } else if WAITS.contains(&name) {
                LockOp::Wait
            } else {
                LockOp::None
            }
        })
        .collect()
}

/// One critical section of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Section {
    /// The innermost traced call running on the thread when it took the
    /// lock (index in `run.calls`).
    pub call: u32,
    /// Every traced call running on the thread then, outermost first
    /// (`call` last).
    pub stack: Vec<u32>,
    pub role: Role,
    /// The lock's address in this run.
    pub lock: i64,
    /// Entry of the call that took it.
    pub acquire_ns: u64,
    /// Entry of the call that let it go; the run's end when it never did.
    pub release_ns: u64,
    /// The run ended while it was held.
    pub open: bool,
    /// Taken again by a condition wait (the wait let it go in between,
    /// as the protocol wants).
    pub after_wait: bool,
    /// Traced calls that began on its thread while it was held (an
    /// `enqueue` its caller made holding the lock), in order.
    pub inner: Vec<u32>,
}

impl Section {
    /// The calls that ran in it: the one that took it, then those that
    /// began inside it.
    pub(super) fn ran_in(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::once(self.call).chain(self.inner.iter().copied())
    }
}

/// Every critical section of the run that a traced call took, in the
/// order they were taken.
pub(super) fn sections(idx: &RunIndex<'_>, ops: &[LockOp]) -> Vec<Section> {
    let run = idx.run;
    let op = |f: u32| ops.get(f as usize).copied().unwrap_or_default();
    let mut out: Vec<Section> = Vec::new();
    if !run.calls.iter().any(|c| op(c.func) != LockOp::None) {
        return out;
    }
    let traced = |i: usize| idx.group.get(i).is_some_and(Option::is_some);
    // Per thread, the traced calls running (outermost first); per (thread,
    // lock), the section it holds.
    let mut stacks: FxMap<Role, Vec<u32>> = FxMap::default();
    let mut held: FxMap<(Role, i64), usize> = FxMap::default();
    for (i, c) in run.calls.iter().enumerate() {
        let kind = op(c.func);
        if !traced(i) && kind == LockOp::None {
            continue;
        }
        let stack = stacks.entry(c.role).or_default();
        while stack.last().is_some_and(|&j| end_of(&run.calls[j as usize], run) < c.entry_ns) {
            stack.pop();
        }
        // A section taken by a traced call (none outside one).
        let take = |stack: Vec<u32>, lock: i64, after_wait: bool, out: &mut Vec<Section>| {
            let call = *stack.last()?;
            out.push(Section {
                call,
                stack,
                role: c.role,
                lock,
                acquire_ns: c.entry_ns,
                release_ns: run.end_ns,
                open: true,
                after_wait,
                inner: Vec::new(),
            });
            Some(out.len() - 1)
        };
        match kind {
            LockOp::None => {
                stack.push(i as u32);
                for (_, &s) in held.iter().filter(|((role, _), _)| *role == c.role) {
                    out[s].inner.push(i as u32);
                }
            }
            LockOp::Acquire => {
                if let Some(s) = take(stack.clone(), c.args[0], false, &mut out) {
                    held.insert((c.role, c.args[0]), s);
                }
            }
            LockOp::Release => {
                if let Some(s) = held.remove(&(c.role, c.args[0])) {
                    out[s].release_ns = c.entry_ns;
                    out[s].open = false;
                }
            }
            LockOp::Wait => {
                let lock = c.args[1];
                if let Some(s) = held.remove(&(c.role, lock)) {
                    out[s].release_ns = c.entry_ns;
                    out[s].open = false;
                    // Taken again before the wait returns, charged to the
                    // same calls as the section it ended.
                    let stack = out[s].stack.clone();
                    if let Some(again) = take(stack, lock, true, &mut out) {
                        held.insert((c.role, lock), again);
                    }
                }
            }
        }
    }
    exclusive(&mut out);
    out
}

/// Moves each section's start to when its thread can first have held
/// the lock. The probes see a lock call's entry, not its return: a call
/// that entered while another thread held the lock (blocked in it, or
/// held there by noise) took it only once that thread let it go, as the
/// lock is exclusive. Per lock, in release order, a section starts no
/// earlier than the latest release of another thread's section before
/// it (a section the run ended inside releases nothing). Without this a
/// reader that blocked on a writer's lock counted as taking it before
/// the writer's call began, although it read what the writer wrote.
fn exclusive(sections: &mut [Section]) {
    let mut by_lock: FxMap<i64, Vec<usize>> = FxMap::default();
    for (i, s) in sections.iter().enumerate() {
        by_lock.entry(s.lock).or_default().push(i);
    }
    for mut list in by_lock.into_values() {
        list.sort_by_key(|&i| (sections[i].release_ns, sections[i].acquire_ns));
        // The two latest releases so far, of two different threads.
        let mut latest: [Option<(u64, Role)>; 2] = [None, None];
        for i in list {
            let s = &mut sections[i];
            let other = latest.iter().flatten().find(|(_, role)| *role != s.role);
            if let Some(&(release, _)) = other {
                s.acquire_ns = s.acquire_ns.max(release);
            }
            if s.open {
                continue;
            }
            let mine = (s.release_ns, s.role);
            latest = match latest {
                [Some(a), b] if a.1 == s.role => [Some(mine), b],
                [a, _] => [Some(mine), a],
            };
        }
    }
}

/// (the first call's group, the other call's group, place): a call of
/// the other group held the lock of the first call's first section on it
/// after the first call had begun and before that section. `place`:
/// which of the first call's locks it was, by the order the call first
/// took them (1-based, at most [`NTH_LOCK`]); 0: any of them.
pub(super) type Early = (GroupKey, GroupKey, u8);

/// Locks of a call told apart by their place: a call that writes under
/// one lock and then another (a two-stage update) is read between the
/// two by a call that takes both, and passing runs where that call took
/// only the first lock early say nothing of the second.
pub(super) const NTH_LOCK: u8 = 4;

/// Every [`Early`] pair of the run, with what it showed first (as for
/// interleavings: the later entry, the shared argument).
pub(super) fn early_sections(
    idx: &RunIndex<'_>,
    sections: &[Section],
    mask: &dyn Fn(u32) -> u8,
) -> FxMap<Early, Seen> {
    let run = idx.run;
    let mut out: FxMap<Early, Seen> = FxMap::default();
    // Sections by lock, in release order.
    let mut by_lock: FxMap<i64, Vec<&Section>> = FxMap::default();
    for s in sections {
        by_lock.entry(s.lock).or_default().push(s);
    }
    for list in by_lock.values_mut() {
        list.sort_by_key(|s| s.release_ns);
    }
    // Each call's first section on each lock, and the lock's place among
    // the call's.
    let mut firsts: FxSet<(u32, i64)> = FxSet::default();
    let mut locks: FxMap<u32, u8> = FxMap::default();
    for first in sections {
        if !firsts.insert((first.call, first.lock)) {
            continue;
        }
        let place = locks.entry(first.call).or_default();
        *place = place.saturating_add(1);
        let place = *place;
        let x = &run.calls[first.call as usize];
        let Some(gx) = idx.group[first.call as usize] else { continue };
        let list = &by_lock[&first.lock];
        // Sections released after the call began and before its own.
        let lo = list.partition_point(|s| s.release_ns <= x.entry_ns);
        for s in &list[lo..] {
            if s.release_ns >= first.release_ns {
                break;
            }
            if s.role == first.role || s.acquire_ns <= x.entry_ns || s.open {
                continue;
            }
            let Some(gy) = idx.group[s.call as usize] else { continue };
            let seen = Seen::of(x, &run.calls[s.call as usize], mask);
            for p in std::iter::once(0).chain((place <= NTH_LOCK).then_some(place)) {
                seen.keep(&mut out, (gx, gy, p));
            }
        }
    }
    out
}

/// Calls (by index) of single-class threads whose first sections on one
/// lock came one before the other: (earlier, later). A call's first
/// section is the first one it took or ran in ([`Section::ran_in`]: an
/// `enqueue` made while its caller held the lock runs in its caller's
/// section). Per lock, each call is paired with the calls of the
/// [`ORDER_WINDOW`] sections of other threads that came last before its
/// own, which keeps it linear.
pub(super) fn ordered_firsts(
    idx: &RunIndex<'_>,
    sections: &[Section],
    single: &dyn Fn(Role) -> bool,
) -> Vec<(u32, u32)> {
    // Per lock: (release, role, call) of each call's first section.
    let mut by_lock: FxMap<i64, Vec<(u64, Role, u32)>> = FxMap::default();
    let mut firsts: FxSet<(u32, i64)> = FxSet::default();
    for s in sections {
        for call in s.ran_in() {
            let c = &idx.run.calls[call as usize];
            if c.instance > 0 && single(s.role) && firsts.insert((call, s.lock)) {
                by_lock.entry(s.lock).or_default().push((s.release_ns, s.role, call));
            }
        }
    }
    let mut out = Vec::new();
    for list in by_lock.values_mut() {
        list.sort_unstable();
        for (i, &(release, role, later)) in list.iter().enumerate() {
            // Sections of other threads released before this one, the
            // nearest first; every call whose first section one was.
            let mut window: Vec<u64> = Vec::new();
            for &(r, other, earlier) in list[..i].iter().rev() {
                if other == role || r == release {
                    continue;
                }
                if !window.contains(&r) {
                    if window.len() == ORDER_WINDOW {
                        break;
                    }
                    window.push(r);
                }
                out.push((earlier, later));
            }
        }
    }
    out
}

/// Sections of other threads each call's first section is ordered
/// against.
pub(super) const ORDER_WINDOW: usize = 3;

/// Each call's first critical section on each lock it took or ran in
/// ([`Section::ran_in`]): (lock, release), in the order the call's
/// sections were taken.
pub(super) struct Firsts(FxMap<u32, Vec<(i64, u64)>>);

impl Firsts {
    pub(super) fn of(sections: &[Section]) -> Firsts {
        let mut out: FxMap<u32, Vec<(i64, u64)>> = FxMap::default();
        for s in sections {
            for call in s.ran_in() {
                let list = out.entry(call).or_default();
                match list.iter_mut().find(|(lock, _)| *lock == s.lock) {
                    Some((_, release)) => *release = (*release).min(s.release_ns),
                    None => list.push((s.lock, s.release_ns)),
                }
            }
        }
        Firsts(out)
    }

    /// Whether call `a`'s first section on a lock both calls took or ran
    /// in came before `b`'s first section on it (the first such lock in
    /// `b`'s order), with the release of `a`'s; None when they share no
    /// lock.
    pub(super) fn before(&self, a: u32, b: u32) -> Option<(bool, u64)> {
        let (fa, fb) = (self.0.get(&a)?, self.0.get(&b)?);
        fb.iter().find_map(|&(lock, tb)| {
            let &(_, ta) = fa.iter().find(|(l, _)| *l == lock)?;
            Some((ta < tb, ta))
        })
    }
}

/// The pairs passing runs showed.
#[derive(Default)]
pub(super) struct SectionBase {
    seen: FxSet<Early>,
}

/// Pairs of failing runs no passing run shows, with the shared argument
/// positions where the failing runs agree; site pairs whose first
/// sections came in an order the passing runs are still to vet.
#[derive(Default)]
pub(super) struct Candidates {
    found: FxMap<Early, Option<(u8, u8)>>,
    orders: FxSet<(Site, Site)>,
}

fn run_pairs(idx: &RunIndex<'_>, funcs: &Funcs) -> FxMap<Early, Seen> {
    let sections = sections(idx, &funcs.lock_ops);
    early_sections(idx, &sections, &|f| funcs.mask(f))
}

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut SectionBase) {
    base.seen.extend(run_pairs(idx, funcs).into_keys());
}

pub(super) fn candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &SectionBase,
    out: &mut Candidates,
) {
    let sections = sections(idx, &funcs.lock_ops);
    let single = |r: Role| funcs.single(idx, r);
    for (a, b) in ordered_firsts(idx, &sections, &single) {
        let (ca, cb) = (&idx.run.calls[a as usize], &idx.run.calls[b as usize]);
        out.orders.insert((site_of(ca), site_of(cb)));
    }
    for (k, seen) in early_sections(idx, &sections, &|f| funcs.mask(f)) {
        if base.seen.contains(&k) {
            continue;
        }
        let have = out.found.entry(k).or_insert(seen.shared);
        if *have != seen.shared {
            *have = None;
        }
    }
}

/// Drops the order candidates some passing run also showed, and those no
/// passing run made both calls of (nothing to restore). A passing run
/// that ended inside the later call is left out (it is not observed
/// there either: [`super::eval`]).
pub(super) fn vet(passing: &[&Run], funcs: &Funcs, cands: &mut Candidates) {
    let mut left: FxMap<(Site, Site), u32> = cands.orders.drain().map(|p| (p, 0)).collect();
    for run in passing {
        if left.is_empty() {
            break;
        }
        let idx = funcs.index(run);
        let firsts = Firsts::of(&sections(&idx, &funcs.lock_ops));
        left.retain(|&(a, b), co| {
            let (Some(ia), Some(ib)) = (idx.index_of(a), idx.index_of(b)) else { return true };
            // A passing run that ended inside B (main returned while B
            // ran) does not say what B would have done: it cannot drop
            // the candidate, but it can show the passing order.
            let censored = run.calls[ib as usize].exit_ns.is_none();
            match firsts.before(ia, ib) {
                Some((true, _)) => censored,
                Some((false, _)) => {
                    *co += 1;
                    true
                }
                None => true,
            }
        });
    }
    cands.orders = left.into_iter().filter(|(_, co)| *co > 0).map(|(p, _)| p).collect();
}

pub(super) fn predicates(funcs: &Funcs, cands: &Candidates) -> Vec<Learned> {
    let mut orders: Vec<&(Site, Site)> = cands.orders.iter().collect();
    orders.sort_unstable();
    let mut out: Vec<Learned> = orders
        .into_iter()
        .map(|&(a, b)| {
            // Restore the passing order: B first, by holding A's thread
            // at A's entry until B has returned.
            let iv = Intervention::HoldUntil {
                site: a,
                point: Point::Entry,
                until: b,
                until_point: Point::Exit,
            };
            (
                PredKey::pair(Kind::SectionOrder, a, b),
                Condition::SectionsInOrder,
                Anchor::Entry,
                Some(iv),
            )
        })
        .collect();
    // A lock's place only where "any lock" is no candidate (where it is,
    // it holds in every failing run the narrow one does).
    let mut found: Vec<_> = cands
        .found
        .iter()
        .filter(|(k, _)| k.2 == 0 || !cands.found.contains_key(&(k.0, k.1, 0)))
        .collect();
    found.sort_unstable_by_key(|e| e.0);
    out.extend(found.into_iter().map(|(&(gx, gy, place), &shared)| {
        let key = PredKey {
            kind: Kind::BeforeFirstSection,
            func: gx.0,
            calls: Calls::Group { class: gx.1, within: gx.2 },
            other: Some(Other { func: gy.0, calls: Calls::Group { class: gy.1, within: gy.2 } }),
            arg: place,
            callee: None,
        };
        let iv = hold_sections(funcs, &gx, &gy, shared);
        (key, Condition::TakenBeforeFirstSection, Anchor::LaterEntry, Some(iv))
    }));
    out
}

/// The intervention on "calls of `taker` take a lock inside a window of
/// calls of `window`": every lock the taker's calls take waits while a
/// call of the window's function runs on another thread, which keeps
/// their critical sections out of the window wherever the two calls run
/// (a call that runs for its thread's whole life has no entry to hold).
/// Two calls of one function (the window and the taker alike) are kept
/// apart whole instead: both inside, each taking a lock would wait for
/// the other (`shared`: the 0-based arguments carrying their object).
pub(super) fn hold_sections(
    funcs: &Funcs,
    window: &GroupKey,
    taker: &GroupKey,
    shared: Option<(u8, u8)>,
) -> Intervention {
    if window.0 == taker.0 {
        return Intervention::SerializeGroups {
            a: call_set(funcs, window),
            b: call_set(funcs, taker),
            object: shared.map(|(a, b)| (a + 1, b + 1)),
        };
    }
    Intervention::HoldLocks {
        calls: call_set(funcs, taker),
        while_running: call_set(funcs, window),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        model::{
            Label, ValueKind,
            testing::{call, function, run, thread},
        },
        predicates::Classes,
        util::fxhash::FxSet,
    };

    const US: u64 = 1_000;
    const LOCK: i64 = 0x5000;

    fn functions() -> Vec<Function> {
        let sync = |id: u32, name: &str| {
            let mut f = function(id, name);
            f.internal = true;
            f.probe = Probe::Sync;
            f
        };
        vec![
            function(0, "check").with_ret(ValueKind::Signed),
            function(1, "stop"),
            sync(2, "pthread_mutex_lock"),
            sync(3, "pthread_mutex_unlock"),
            sync(4, "pthread_cond_wait"),
        ]
    }

    #[test]
    fn sections_are_charged_to_the_innermost_traced_call_and_end_with_the_run() {
        let ops = lock_ops(&functions());
        assert_eq!(
            ops[..5],
            [LockOp::None, LockOp::None, LockOp::Acquire, LockOp::Release, LockOp::Wait]
        );
        let calls = vec![
            call(0, 0, 1, 10 * US, Some(60 * US), Some(0)),
            call(2, 0, 1, 12 * US, None, None).with_args([LOCK, 0, 0]),
            call(4, 0, 1, 15 * US, None, None).with_args([0x6000, LOCK, 0]),
            call(3, 0, 1, 30 * US, None, None).with_args([LOCK, 0, 0]),
            call(1, 1, 1, 20 * US, None, None),
            call(2, 1, 1, 25 * US, None, None).with_args([LOCK, 0, 0]),
        ];
        let r = run(1, Label::Fail, calls, 90 * US)
            .with_threads(vec![thread(0, "main"), thread(1, "stop")]);
        let classes = Classes::learn([&r]);
        let keep = |f: u32| f < 2;
        let idx = RunIndex::with_groups(&r, keep, &classes, &FxSet::default());
        let s = sections(&idx, &ops);
        let got: Vec<(u32, u64, u64, bool)> =
            s.iter().map(|s| (s.call, s.acquire_ns / US, s.release_ns / US, s.open)).collect();
        // check: taken at 12, let go by the wait at 15, taken again after
        // it and let go at 30; stop: asked for at 25 while check held it,
        // so taken at 30, and held until the end (90).
        assert_eq!(got, vec![(0, 12, 15, false), (0, 15, 30, false), (3, 30, 90, true)]);
    }

    /// A two-stage update: `stop` writes under LOCK and then under a
    /// second lock; `check` entered first and asked for LOCK before
    /// `stop` began, but got it only when `stop` let it go (so it read
    /// the first stage), and then read the second stage before `stop`
    /// wrote it. Its section on LOCK starts at `stop`'s release, inside
    /// `stop`'s call, before `stop`'s section on the second lock.
    #[test]
    fn a_lock_call_that_waited_takes_the_lock_when_the_other_thread_lets_it_go() {
        const SECOND: i64 = 0x5100;
        let ops = lock_ops(&functions());
        let calls = vec![
            call(0, 1, 1, 5 * US, Some(40 * US), Some(0)),
            call(2, 1, 1, 6 * US, None, None).with_args([LOCK, 0, 0]),
            call(1, 0, 1, 10 * US, Some(50 * US), None),
            call(2, 0, 1, 11 * US, None, None).with_args([LOCK, 0, 0]),
            call(3, 0, 1, 20 * US, None, None).with_args([LOCK, 0, 0]),
            call(3, 1, 1, 25 * US, None, None).with_args([LOCK, 0, 0]),
            call(2, 1, 1, 26 * US, None, None).with_args([SECOND, 0, 0]),
            call(3, 1, 1, 27 * US, None, None).with_args([SECOND, 0, 0]),
            call(2, 0, 1, 30 * US, None, None).with_args([SECOND, 0, 0]),
            call(3, 0, 1, 31 * US, None, None).with_args([SECOND, 0, 0]),
        ];
        let r = run(1, Label::Fail, calls, 90 * US)
            .with_threads(vec![thread(0, "stop"), thread(1, "check")]);
        let classes = Classes::learn([&r]);
        let idx = RunIndex::with_groups(&r, |f| f < 2, &classes, &FxSet::default());
        let s = sections(&idx, &ops);
        let got: Vec<(u32, i64, u64, u64)> =
            s.iter().map(|s| (s.call, s.lock, s.acquire_ns / US, s.release_ns / US)).collect();
        assert_eq!(
            got,
            vec![(0, LOCK, 20, 25), (2, LOCK, 11, 20), (0, SECOND, 26, 27), (2, SECOND, 30, 31)]
        );
        let early = early_sections(&idx, &s, &|_| 0);
        let (gs, gc) = (idx.group[2].unwrap(), idx.group[0].unwrap());
        // check's section came inside stop's call before stop's first
        // section on the second lock (its 2nd), not before its 1st; and
        // stop took LOCK inside check's call before check first did.
        let mut keys: Vec<Early> = early.into_keys().collect();
        keys.sort_unstable();
        let mut want = vec![(gs, gc, 0), (gs, gc, 2), (gc, gs, 0), (gc, gs, 1)];
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    /// A producer that hands over under its caller's lock (`stop` calls
    /// `check` holding it) and a consumer that polled first: `check` ran
    /// in the producer's second section, so the consumer's first section
    /// is ordered before `check`'s, though `check` took no lock itself.
    #[test]
    fn a_call_made_under_its_callers_lock_is_ordered_by_that_section() {
        let ops = lock_ops(&functions());
        let calls = vec![
            // The producer (role 0): stop, two sections, check in the 2nd.
            call(1, 0, 1, 10 * US, Some(80 * US), None),
            call(2, 0, 1, 11 * US, None, None).with_args([LOCK, 0, 0]),
            call(3, 0, 1, 12 * US, None, None).with_args([LOCK, 0, 0]),
            // The consumer (role 1) polls at 20-22 µs.
            call(0, 1, 1, 19 * US, Some(40 * US), Some(0)),
            call(2, 1, 1, 20 * US, None, None).with_args([LOCK, 0, 0]),
            call(3, 1, 1, 22 * US, None, None).with_args([LOCK, 0, 0]),
            call(2, 0, 1, 30 * US, None, None).with_args([LOCK, 0, 0]),
            call(0, 0, 1, 31 * US, Some(32 * US), Some(0)),
            call(3, 0, 1, 33 * US, None, None).with_args([LOCK, 0, 0]),
        ];
        let r = run(1, Label::Fail, calls, 90 * US)
            .with_threads(vec![thread(0, "producer"), thread(1, "consumer")]);
        let classes = Classes::learn([&r]);
        let idx = RunIndex::with_groups(&r, |f| f < 2, &classes, &FxSet::default());
        let s = sections(&idx, &ops);
        let inner: Vec<(u32, Vec<u32>)> = s.iter().map(|s| (s.call, s.inner.clone())).collect();
        assert_eq!(inner, vec![(0, vec![]), (3, vec![]), (0, vec![7])]);
        // The consumer's call (3) first held the lock before check (7);
        // stop's first section (0) came before the consumer's.
        let pairs = ordered_firsts(&idx, &s, &|_| true);
        assert!(pairs.contains(&(3, 7)) && pairs.contains(&(0, 3)), "{pairs:?}");
        assert!(!pairs.contains(&(7, 3)) && !pairs.contains(&(0, 7)), "{pairs:?}");
        let firsts = Firsts::of(&s);
        let first_before = |a, b| firsts.before(a, b).map(|(before, _)| before);
        assert_eq!(first_before(3, 7), Some(true));
        assert_eq!(first_before(7, 3), Some(false));
        assert_eq!(first_before(0, 3), Some(true));
    }
}
