//! The wait-for graph of a hung run ([`WaitGraph`]), from what `/proc`
//! showed when the hang was recognised (each thread's futex, and the
//! words there: `sys/hang.rs`) and from the run's synchronisation-point
//! events so far (lock and unlock entries carry the lock's address):
//! which lock each thread waits for, which thread holds it, which locks
//! each thread holds, and the cycle of waits, if there is one.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    model::{Call, Function, Role, Run, Wait, WaitGraph, Waiter, identity::RoleNames},
    sys::hang::{FutexWait, Hung},
};

/// Calls that take an exclusive lock (a `trylock` may fail: not counted).
const TAKES: &[&str] =
    &["pthread_mutex_lock", "pthread_mutex_timedlock", "pthread_mutex_clocklock"];
const RELEASES: &[&str] = &["pthread_mutex_unlock"];
const COND_WAITS: &[&str] =
    &["pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait"];
/// `pthread_cond_t` is 48 bytes; its futexes lie inside it.
const COND_BYTES: u64 = 48;

fn hex(addr: u64) -> String {
    format!("{addr:#x}")
}

/// The C library function a function is, by its name without a symbol
/// version (`pthread_mutex_lock@@GLIBC_2.2.5`).
fn base(f: &Function) -> &str {
    f.name.split('@').next().unwrap_or(&f.name)
}

/// Per role: the locks it took and had not released at the end (oldest
/// first), from its lock and unlock entries. A role whose sync points
/// ran past what the probes record ([`aid_common::SYNC_EVENTS_PER_THREAD`])
/// may have released what the events show taken: it gets none.
fn taken(run: &Run, functions: &[Function]) -> BTreeMap<Role, Vec<u64>> {
    let name = |c: &Call| functions.get(c.func as usize).map(base);
    let mut out: BTreeMap<Role, Vec<u64>> = BTreeMap::new();
    let mut counted: BTreeMap<Role, u32> = BTreeMap::new();
    for c in &run.calls {
        let Some(n) = name(c) else { continue };
        if functions.get(c.func as usize).is_some_and(|f| f.probe.is_sync_point()) {
            *counted.entry(c.role).or_default() += 1;
        }
        let addr = c.args[0] as u64;
        if TAKES.contains(&n) {
            out.entry(c.role).or_default().push(addr);
        } else if RELEASES.contains(&n)
            && let Some(held) = out.get_mut(&c.role)
            && let Some(i) = held.iter().rposition(|&a| a == addr)
        {
            held.remove(i);
        }
    }
    for (role, n) in counted {
        if n >= aid_common::SYNC_EVENTS_PER_THREAD {
            out.remove(&role);
        }
    }
    out
}

/// The wait-for graph of `run`, which `hung` ended.
pub fn graph(hung: &Hung, run: &Run, functions: &[Function]) -> WaitGraph {
    let roles: BTreeMap<u32, Role> = run.threads.iter().map(|t| (t.tid, t.role)).collect();
    let names = RoleNames::of(run);
    let tids: BTreeSet<u32> = hung.threads.iter().map(|t| t.tid).collect();
    let name = |f: u32| functions.get(f as usize).map(base);
    let locks: BTreeSet<u64> = run
        .calls
        .iter()
        .filter(|c| name(c.func).is_some_and(|n| TAKES.contains(&n)))
        .map(|c| c.args[0] as u64)
        .collect();
    let conds: Vec<u64> = run
        .calls
        .iter()
        .filter(|c| name(c.func).is_some_and(|n| COND_WAITS.contains(&n)))
        .map(|c| c.args[0] as u64)
        .collect();
    let mut taken = taken(run, functions);
    // A thread that waits for a lock has not taken it, though its lock
    // call was seen.
    for t in &hung.threads {
        if let (Some(w), Some(role)) = (t.waits, roles.get(&t.tid))
            && let Some(held) = taken.get_mut(role)
            && held.last() == Some(&w.addr)
        {
            held.pop();
        }
    }
    let holds_of = |tid: u32| -> Vec<u64> {
        roles.get(&tid).and_then(|r| taken.get(r)).cloned().unwrap_or_default()
    };
    let holder = |addr: u64, me: u32, w: &FutexWait| -> Option<u32> {
        let by_events = tids.iter().copied().find(|&t| t != me && holds_of(t).contains(&addr));
        let by_owner = w.owner.filter(|o| *o != me && tids.contains(o));
        by_events.or(by_owner)
    };
    // A thread no longer there (it exited) that took the lock and did
    // not release it.
    let live: BTreeSet<Role> = tids.iter().filter_map(|t| roles.get(t).copied()).collect();
    let left_by = |addr: u64| -> Option<String> {
        taken
            .iter()
            .find(|(role, held)| !live.contains(role) && held.contains(&addr))
            .map(|(&role, _)| names.label(role))
    };
    let mut threads: Vec<Waiter> = hung
        .threads
        .iter()
        .map(|t| {
            let role = roles.get(&t.tid).copied();
            let waits = match t.waits {
                Some(w) => classify(&w, t.tid, &tids, &locks, &conds, &holder, &left_by),
                // Not waiting: cannot be in a hang's list, but say so.
                None => Wait::Futex { addr: String::new() },
            };
            let in_call = role.and_then(|r| {
                run.calls
                    .iter()
                    .rev()
                    .find(|c| {
                        c.role == r
                            && c.exit_ns.is_none()
                            && functions.get(c.func as usize).is_some_and(|f| {
                                // The call it waits in (a traced
                                // `pthread_mutex_lock`) is the wait itself:
                                // the call it is in is its caller.
                                !f.internal
                                    && !crate::symbols::runtime::SYNC_POINTS
                                        .contains(&f.name.split('@').next().unwrap_or(&f.name))
                            })
                    })
                    .and_then(|c| functions.get(c.func as usize))
                    .map(|f| f.name.clone())
            });
            Waiter {
                tid: t.tid,
                role,
                name: role.map_or_else(|| format!("thread {}", t.tid), |r| names.label(r)),
                waits,
                holds: holds_of(t.tid).into_iter().map(hex).collect(),
                in_call,
            }
        })
        .collect();
    // A lock's owner named by the lock itself, which the events did not
    // show taking it, holds it too.
    let owned: Vec<(u32, String)> = threads
        .iter()
        .filter_map(|w| match &w.waits {
            Wait::Lock { addr, holder: Some(h), .. } => Some((*h, addr.clone())),
            _ => None,
        })
        .collect();
    for (h, addr) in owned {
        if let Some(w) = threads.iter_mut().find(|w| w.tid == h)
            && !w.holds.contains(&addr)
        {
            w.holds.push(addr);
        }
    }
    let cycle = cycle(&threads);
    WaitGraph { waited_ns: hung.waited.as_nanos() as u64, threads, cycle }
}

/// What one futex wait is: a join (the word is another thread's tid), a
/// lock (the address is one the run's lock calls took, or the word says
/// locked and the owner field names another thread), a condition (inside
/// one the run waited on), or a futex.
fn classify(
    w: &FutexWait,
    me: u32,
    tids: &BTreeSet<u32>,
    locks: &BTreeSet<u64>,
    conds: &[u64],
    holder: &dyn Fn(u64, u32, &FutexWait) -> Option<u32>,
    left_by: &dyn Fn(u64) -> Option<String>,
) -> Wait {
    if let Some(t) = w.word.filter(|t| *t != me && tids.contains(t)) {
        return Wait::Join { thread: t };
    }
    let owner_says = matches!(w.word, Some(1 | 2)) && w.owner.is_some_and(|o| tids.contains(&o));
    if locks.contains(&w.addr) || owner_says {
        let holder = holder(w.addr, me, w);
        let left_by = if holder.is_none() { left_by(w.addr) } else { None };
        return Wait::Lock { addr: hex(w.addr), holder, left_by };
    }
    if conds.iter().any(|&c| (c..c + COND_BYTES).contains(&w.addr)) {
        return Wait::Condition { addr: hex(w.addr) };
    }
    Wait::Futex { addr: hex(w.addr) }
}

/// The first cycle of waits (each thread waiting for the next), starting
/// at its smallest tid; empty when there is none.
fn cycle(threads: &[Waiter]) -> Vec<u32> {
    let next = |tid: u32| threads.iter().find(|w| w.tid == tid)?.waits.on_thread();
    for start in threads.iter().map(|w| w.tid) {
        let mut path = vec![start];
        let mut at = start;
        while let Some(n) = next(at) {
            if let Some(i) = path.iter().position(|&t| t == n) {
                let mut c = path.split_off(i);
                let min = c.iter().enumerate().min_by_key(|(_, t)| **t).map_or(0, |(i, _)| i);
                c.rotate_left(min);
                return c;
            }
            if path.len() > threads.len() {
                break;
            }
            path.push(n);
            at = n;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        model::{
            Label, Probe,
            testing::{call, function, run, thread},
        },
        sys::hang::ThreadLook,
    };

    const A: i64 = 0x5581_a022_3060;
    const B: i64 = 0x5581_a022_30a0;

    fn look(tid: u32, addr: i64, word: u32, owner: u32) -> ThreadLook {
        let waits = Some(FutexWait { addr: addr as u64, word: Some(word), owner: Some(owner) });
        ThreadLook { tid, state: 'S', cpu_ticks: 1, switches: 2, waits }
    }

    /// deadlock01's hang as aid records it: main joins thread1; thread1
    /// took a and waits for b; thread2 took b and waits for a.
    #[test]
    fn a_lock_order_deadlock_is_a_cycle_with_holders() {
        let sync = |id, name| Function { internal: true, probe: Probe::Sync, ..function(id, name) };
        let functions = vec![
            function(0, "thread1"),
            function(1, "thread2"),
            sync(2, "pthread_mutex_lock@@GLIBC_2.2.5"),
            sync(3, "pthread_mutex_unlock@@GLIBC_2.2.5"),
        ];
        let r = run(
            7,
            Label::Fail,
            vec![
                call(0, 1, 1, 10, None, None),
                call(2, 1, 1, 11, None, None).with_args([A, 0, 0]),
                call(1, 2, 1, 12, None, None),
                call(2, 2, 1, 13, None, None).with_args([B, 0, 0]),
                call(2, 1, 2, 14, None, None).with_args([B, 0, 0]),
                call(2, 2, 2, 15, None, None).with_args([A, 0, 0]),
            ],
            1_000,
        )
        .with_threads(vec![
            crate::model::Thread { tid: 100, ..thread(0, "main") },
            crate::model::Thread { tid: 101, ..thread(1, "thread1") },
            crate::model::Thread { tid: 102, ..thread(2, "thread2") },
        ]);
        let hung = Hung {
            waited: Duration::from_millis(1_050),
            threads: vec![
                // main's join waits on thread1's tid.
                look(100, 0x7f00_0000_0910, 101, 0),
                look(101, B, 2, 102),
                look(102, A, 2, 101),
            ],
        };
        let g = graph(&hung, &r, &functions);
        assert_eq!(g.waited_ns, 1_050_000_000);
        assert_eq!(g.cycle, vec![101, 102]);
        assert_eq!(g.threads[0].waits, Wait::Join { thread: 101 });
        assert_eq!(
            g.threads[1].waits,
            Wait::Lock { addr: "0x5581a02230a0".into(), holder: Some(102), left_by: None }
        );
        assert_eq!(g.threads[1].holds, vec!["0x5581a0223060".to_owned()]);
        assert_eq!(g.threads[2].holds, vec!["0x5581a02230a0".to_owned()]);
        assert_eq!(g.threads[1].in_call.as_deref(), Some("thread1"));
        assert_eq!(
            g.describe(),
            "main waits for thread1 to exit; thread1 (in thread1) holds lock 0x5581a0223060 and waits for lock 0x5581a02230a0, held by thread2; thread2 (in thread2) holds lock 0x5581a02230a0 and waits for lock 0x5581a0223060, held by thread1; a cycle: thread1 and thread2 wait for each other"
        );

        // Without sync-point events (an observed run of a session without
        // them), the locks' owner fields still name the holders.
        let bare = run(7, Label::Fail, vec![], 1_000).with_threads(r.threads.clone());
        let g = graph(&hung, &bare, &functions);
        assert_eq!(g.cycle, vec![101, 102]);
        assert_eq!(g.threads[1].holds, vec!["0x5581a0223060".to_owned()]);
    }

    /// phase01_bad's hang: thread1#1 takes x, lets it go, takes it again
    /// and exits holding it; thread1#2 waits for x; main joins thread1#2.
    /// The lock's owner is no longer there: the events name who left it.
    #[test]
    fn a_lock_left_taken_by_a_thread_that_exited_is_named() {
        let sync = |id, name| Function { internal: true, probe: Probe::Sync, ..function(id, name) };
        let functions = vec![
            function(0, "thread1"),
            sync(1, "pthread_mutex_lock"),
            sync(2, "pthread_mutex_unlock"),
        ];
        let r = run(
            3,
            Label::Fail,
            vec![
                call(0, 1, 1, 10, Some(20), None),
                call(1, 1, 1, 11, Some(12), None).with_args([A, 0, 0]),
                call(2, 1, 1, 13, Some(14), None).with_args([A, 0, 0]),
                call(1, 1, 2, 15, Some(16), None).with_args([A, 0, 0]),
                call(0, 2, 1, 30, None, None),
                call(1, 2, 1, 31, None, None).with_args([A, 0, 0]),
            ],
            1_000,
        )
        .with_threads(vec![
            crate::model::Thread { tid: 100, ..thread(0, "main") },
            crate::model::Thread { tid: 101, ..thread(1, "thread1") },
            crate::model::Thread { tid: 102, ..thread(2, "thread1") },
        ]);
        let hung = Hung {
            waited: Duration::from_secs(1),
            threads: vec![look(100, 0x7f00_0000_0910, 102, 0), look(102, A, 2, 101)],
        };
        let g = graph(&hung, &r, &functions);
        assert!(g.cycle.is_empty());
        assert_eq!(
            g.threads[1].waits,
            Wait::Lock {
                addr: "0x5581a0223060".into(),
                holder: None,
                left_by: Some("thread1#1".into())
            }
        );
        assert_eq!(
            g.describe(),
            "main waits for thread1#2 to exit; thread1#2 (in thread1) waits for lock 0x5581a0223060, which thread1#1 took and never released before it exited"
        );
    }

    /// A lost wake-up: a thread waits on a condition nobody will signal,
    /// main joins it. No cycle.
    #[test]
    fn a_wait_nobody_ends_is_no_cycle() {
        let sync = |id, name| Function { internal: true, probe: Probe::Sync, ..function(id, name) };
        let functions = vec![sync(0, "pthread_cond_wait")];
        const COND: i64 = 0x6000;
        let r = run(1, Label::Fail, vec![call(0, 1, 1, 5, None, None).with_args([COND, 0, 0])], 9)
            .with_threads(vec![
                crate::model::Thread { tid: 10, ..thread(0, "main") },
                crate::model::Thread { tid: 11, ..thread(1, "waiter") },
            ]);
        let hung = Hung {
            waited: Duration::from_secs(2),
            threads: vec![look(10, 0x7f00, 11, 0), look(11, COND + 40, 0, 0)],
        };
        let g = graph(&hung, &r, &functions);
        assert!(g.cycle.is_empty());
        assert_eq!(g.threads[1].waits, Wait::Condition { addr: "0x6028".into() });
        assert_eq!(
            g.describe(),
            "main waits for waiter to exit; waiter waits on a condition (0x6028)"
        );
    }
}
