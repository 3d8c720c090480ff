//! Every interval at which the agent looks at something that cannot wake
//! it, with the reason for its value: one place, so the trade-offs between
//! latency and CPU are read (and changed) together.
//!
//! Stops of ptraced threads do wake the agent (SIGCHLD, see
//! [`crate::sys::ptrace`]), and so do the event ring, the programs' log
//! ring and flush requests (the event reader waits on them with epoll,
//! [`crate::bpf::EventStream`]); everything below is polled or paced.

use std::{
    ops::ControlFlow,
    time::{Duration, Instant},
};

/// An observed (not ptraced) run's end: `waitpid(WNOHANG)` between sleeps.
/// Half a millisecond is nothing next to a run and only ~2,000 cheap
/// system calls a second.
pub const RUN_EXIT: Duration = Duration::from_micros(500);

/// A run is looked at for a hang (`sys/hang.rs`) this often (or a tenth
/// of `--hang-after`, when that is shorter): a look reads one `stat`
/// file per thread (more only when every thread is blocked), and a hang
/// is found at most this long after its bound.
pub const HANG_LOOK: Duration = Duration::from_millis(50);

/// The longest the ptrace controller naps when no thread stops: it bounds
/// how late a timed release or the caller's tick can be.
pub const SERVE_NAP: Duration = Duration::from_millis(2);

/// A hold waiting for another call (a forced order, serialisation) looks at
/// the kernel's watch map this often: the kernel cannot signal the event,
/// and the held call should start within tens of microseconds of it.
pub const HOLD_EVENT: Duration = Duration::from_micros(50);

/// A hold waiting for an event is given up as soon as nothing can bring
/// it: every other thread of the target waits in a futex with no timeout,
/// alike at two looks this far apart (`intervene/holds.rs`,
/// `Futility`). Looked at no more often than this either.
pub const FUTILE_LOOK: Duration = Duration::from_millis(5);

/// With SIGCHLD not blocked (a library user who did not call
/// [`crate::sys::ptrace::block_sigchld`]) the controller cannot wait for
/// the signal and sleeps this long instead.
pub const NO_SIGCHLD_NAP: Duration = Duration::from_micros(200);

/// Releasing a live process: each interrupted thread is waited for this
/// often, for at most [`RELEASE_DEADLINE`] (a thread that never stops is
/// left as it is rather than hang the agent).
pub const RELEASE_STOP: Duration = Duration::from_micros(100);
pub const RELEASE_DEADLINE: Duration = Duration::from_secs(2);

/// The target writes its output to files (so that it never depends on the
/// agent to read it); the agent reads what was added this often, keeping
/// a bounded tail in memory and freeing the file's blocks behind it.
pub const OUTPUT_READ: Duration = Duration::from_millis(20);

/// After draining the event ring, the reader lets events gather this long
/// before it waits on the ring again: the kernel wakes it only for an
/// event that finds it caught up, so the traced threads pay for at most
/// one wake-up in this time, and a flush (answered at once) or a look
/// finds events at most this old still in the kernel.
pub const EVENT_STREAM: Duration = Duration::from_millis(10);

/// A live service is looked at this often while units are observed (or
/// recorded by `attach`): the events drained, the lost-event counters
/// read, finished units cut out.
pub const UNIT_LOOK: Duration = Duration::from_millis(50);

/// A unit is cut out once its function returned at least this long ago:
/// its last events may still be in the ring buffer, and an event lost
/// during it is counted at the first look after it. Two looks cover both.
pub const UNIT_SETTLE: Duration = Duration::from_millis(100);

/// While interventions are installed, units are looked at between ptrace
/// stops this often (stops come every few hundred microseconds; a unit
/// only needs a look every few milliseconds)...
pub const INTERVENED_UNIT_LOOK: Duration = Duration::from_millis(5);

/// ...and settle for four looks, so an intervention round waits little
/// beyond the unit it judges.
pub const INTERVENED_UNIT_SETTLE: Duration = Duration::from_millis(20);

/// Calls `look` every `every` (the first time one interval from now) until
/// it breaks, with what it broke with, or until `deadline` passes: `None`
/// then, at the deadline itself rather than at the next look. A look that
/// takes longer than `every` delays the next rather than bunching them.
/// The loop runs on the calling thread (a current-thread tokio runtime with
/// its timer): nothing it touches moves, so a ptrace tracer may call it.
pub fn look_every<T>(
    every: Duration,
    deadline: Option<Instant>,
    mut look: impl FnMut() -> ControlFlow<T>,
) -> std::io::Result<Option<T>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    Ok(rt.block_on(async {
        let start = tokio::time::Instant::now();
        let mut looks = tokio::time::interval_at(start + every, every);
        looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                biased;
                () = &mut deadline => return None,
                _ = looks.tick() => {
                    if let ControlFlow::Break(done) = look() {
                        return Some(done);
                    }
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Looks come one interval apart until one breaks; a deadline ends the
    /// loop when it passes, between looks.
    #[test]
    fn looks_until_done_or_the_deadline() {
        let began = Instant::now();
        let mut n = 0;
        let done = look_every(Duration::from_millis(5), None, || {
            n += 1;
            if n == 4 { ControlFlow::Break(n) } else { ControlFlow::Continue(()) }
        });
        assert_eq!(done.unwrap(), Some(4));
        assert!(began.elapsed() >= Duration::from_millis(20));

        let began = Instant::now();
        let deadline = began + Duration::from_millis(30);
        let mut looks = 0;
        let done: Option<()> = look_every(Duration::from_millis(200), Some(deadline), || {
            looks += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(done, None);
        assert_eq!(looks, 0, "the deadline came before the first look");
        assert!(began.elapsed() >= Duration::from_millis(30));
    }

    /// A unit is judged only after a look that followed its end: loss
    /// accounting and the last events depend on it.
    #[test]
    fn units_settle_longer_than_a_look() {
        assert!(UNIT_SETTLE >= 2 * UNIT_LOOK);
        assert!(INTERVENED_UNIT_SETTLE >= 2 * INTERVENED_UNIT_LOOK);
        assert!(RELEASE_STOP < RELEASE_DEADLINE);
    }
}
