//! The holds the agent keeps stopped threads in (`control.rs` serves the
//! stops): what each waits for before it is let go, the back-off before a
//! call runs again from its entry, the thread a PCT change point resumes
//! once no other can run (the one held at `exit` last), and holds nothing
//! can satisfy.

use std::time::{Duration, Instant};

use aid_common::{Action, Pending, RunningKey, SiteKey};
use nix::unistd::Pid;

use crate::{
    model::OUTLIVE,
    sys::{hang, poll},
};

pub(super) enum Release {
    At,
    WhenHappened(SiteKey),
    /// No call of a group runs on the key but (when `mine`) the held call.
    WhenIdle {
        key: RunningKey,
        mine: u64,
    },
    /// When no other thread of the process can run (a PCT change point,
    /// `noise.rs`); among several, the highest priority first.
    WhenAlone(u64),
}

pub(super) struct Hold {
    pub(super) tid: Pid,
    pub(super) release: Release,
    pub(super) deadline: Instant,
    pub(super) since: Instant,
    pub(super) record: usize,
    /// Where the held call is itself counted in a serialised group.
    pub(super) own: Option<RunningKey>,
    /// Noise where an intervention holds the thread too (a lock call, or
    /// a call of a serialised group): its hold and the group it waits on,
    /// to go on with when the noise ends, if due then ([`Pending::then`]).
    pub(super) then: Option<(Action, RunningKey)>,
}

/// A thread whose call runs again from its entry backs off first, as
/// code that retries a transient failure does: 50 µs before the first
/// retry, doubling (12.75 ms over eight). The wait is the agent's, not the
/// program's: a pause (the stop record is not `held`).
pub(super) fn backing_off(
    tid: Pid,
    p: &Pending,
    now: Instant,
    record: usize,
    own: Option<RunningKey>,
) -> Hold {
    let backoff = Duration::from_micros(50 << p.action.retries.clamp(1, 8).saturating_sub(1));
    Hold { tid, release: Release::At, deadline: now + backoff, since: now, record, own, then: None }
}

/// The thread held at a PCT change point that may resume now: the one of
/// highest priority, once no other thread of `pid` can run (each is
/// blocked, sleeping, stopped — held ones included — or gone). A thread
/// held at `exit` ([`OUTLIVE`]) goes once no other thread is held and
/// every other one is gone or waits in a futex with no timeout, alike at
/// two looks (`last`: the previous one): a thread that only paused (in a
/// write, a page fault, a timed sleep) would have been cut short by the
/// exit.
pub(super) fn next_alone(
    pid: u32,
    holds: &[Hold],
    last: &mut Option<hang::Progress>,
) -> Option<Pid> {
    let Some((priority, tid)) = first_alone(holds) else {
        *last = None;
        return None;
    };
    if priority == u64::from(OUTLIVE) {
        let held: Vec<u32> = holds.iter().map(|h| h.tid.as_raw() as u32).collect();
        let now = hang::done_but(pid, &held);
        let done = now.as_ref().is_some_and(|p| p.is_empty() || last.as_ref() == Some(p));
        *last = now;
        return done.then_some(tid);
    }
    *last = None;
    let held: Vec<u32> = holds.iter().map(|h| h.tid.as_raw() as u32).collect();
    let runnable = crate::sys::proc::runnable_threads(pid, &held);
    runnable.iter().all(|t| *t == tid.as_raw() as u32).then_some(tid)
}

/// Of the threads held at PCT change points, the one to resume first once
/// no other thread can run, with its priority: the highest priority; one
/// held at `exit` ([`OUTLIVE`]) only when no thread is held otherwise.
fn first_alone(holds: &[Hold]) -> Option<(u64, Pid)> {
    let waiting = holds.iter().filter_map(|h| match h.release {
        Release::WhenAlone(priority) => Some((priority, h.tid)),
        _ => None,
    });
    let (priority, tid) = waiting.max_by_key(|(priority, _)| *priority)?;
    let outlives = |h: &Hold| matches!(h.release, Release::WhenAlone(p) if p == u64::from(OUTLIVE));
    (priority != u64::from(OUTLIVE) || holds.iter().all(outlives)).then_some((priority, tid))
}

/// Holds nothing can satisfy: when every hold waits for an event (none
/// ends by itself, as a delay or a PCT change point does) and every other
/// thread of the target waits in a futex with no timeout
/// ([`hang::waiting_but`]), alike at two looks [`poll::FUTILE_LOOK`]
/// apart, nothing runs that could bring the events before the deadlines:
/// a thread held inside a critical section until a call ends that waits
/// for that very lock, a pool held until a group goes idle whose threads
/// all wait for work. Waiting out the hold timeout would end the same way,
/// later; the oldest hold is given up now, as at its deadline (not
/// applied, timed out), and the others wait on for what it does.
#[derive(Default)]
pub(super) struct Futility {
    /// The last look: when, the holds then (their stop records), and the
    /// other threads' progress.
    last: Option<(Instant, Vec<usize>, hang::Progress)>,
}

impl Futility {
    /// The thread of the hold to give up now, if any.
    pub(super) fn hold(&mut self, pid: u32, holds: &[Hold], now: Instant) -> Option<Pid> {
        let waiting =
            |h: &Hold| matches!(h.release, Release::WhenHappened(_) | Release::WhenIdle { .. });
        if holds.is_empty() || !holds.iter().all(waiting) {
            self.last = None;
            return None;
        }
        if self.last.as_ref().is_some_and(|(at, ..)| now.duration_since(*at) < poll::FUTILE_LOOK) {
            return None;
        }
        let held: Vec<u32> = holds.iter().map(|h| h.tid.as_raw() as u32).collect();
        let Some(seen) = hang::waiting_but(pid, &held) else {
            self.last = None;
            return None;
        };
        let records: Vec<usize> = holds.iter().map(|h| h.record).collect();
        if self.last.as_ref().is_some_and(|(_, r, p)| *r == records && *p == seen) {
            self.last = None;
            return holds.iter().min_by_key(|h| h.since).map(|h| h.tid);
        }
        self.last = Some((now, records, seen));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(tid: i32, release: Release) -> Hold {
        let now = Instant::now();
        Hold {
            tid: Pid::from_raw(tid),
            release,
            deadline: now,
            since: now,
            record: 0,
            own: None,
            then: None,
        }
    }

    /// PCT change points resume highest priority first; the thread held
    /// at `exit` goes last, once no other thread is held at all (a delay
    /// still running keeps it).
    #[test]
    fn the_exit_held_thread_goes_after_every_other_hold() {
        let outlive = u64::from(OUTLIVE);
        let first = |holds: &[Hold]| first_alone(holds).map(|(_, tid)| tid.as_raw());
        let pct = [held(1, Release::WhenAlone(1)), held(2, Release::WhenAlone(2))];
        assert_eq!(first(&pct), Some(2));
        let with_exit = [held(3, Release::WhenAlone(outlive)), held(1, Release::WhenAlone(1))];
        assert_eq!(first(&with_exit), Some(1));
        let delayed = [held(3, Release::WhenAlone(outlive)), held(4, Release::At)];
        assert_eq!(first(&delayed), None);
        assert_eq!(first(&[held(3, Release::WhenAlone(outlive))]), Some(3));
        assert_eq!(first(&[held(4, Release::At)]), None);
    }
}
