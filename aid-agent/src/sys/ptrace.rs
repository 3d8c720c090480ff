//! ptrace primitives: tracing a held child or every thread of a running
//! process, letting go of it, resuming a stopped thread, and waiting for
//! tracee stops without polling. What the agent does at a stop is
//! [`crate::intervene::control`].
//!
//! If the agent dies, the kernel detaches its tracees; a thread it was
//! holding resumes, and the stop signal (ignored by default) is harmless.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::{
        ptrace,
        signal::{SigSet, Signal},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};

use crate::sys::{poll, proc};

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "cannot trace pid {pid} with ptrace: {source} (is another debugger attached? is ptrace restricted by yama/ptrace_scope?)"
    )]
    Seize { pid: u32, source: Errno },
    #[error("waiting for the target: {0}")]
    Wait(Errno),
}

/// Starts tracing a held child (before it execs): every thread it will
/// have is traced, and the exec is reported as an event rather than a
/// SIGTRAP.
pub fn seize(pid: u32) -> Result<(), ControlError> {
    let options = ptrace::Options::PTRACE_O_TRACECLONE | ptrace::Options::PTRACE_O_TRACEEXEC;
    ptrace::seize(Pid::from_raw(pid as i32), options)
        .map_err(|source| ControlError::Seize { pid, source })
}

/// Starts tracing every thread of a running process. Threads created
/// meanwhile by a seized thread are traced automatically; the task list is
/// re-read until no untraced thread is left.
pub fn seize_running(pid: u32) -> Result<BTreeSet<Pid>, ControlError> {
    let options = ptrace::Options::PTRACE_O_TRACECLONE;
    let mut traced = BTreeSet::new();
    let mut considered = BTreeSet::new();
    loop {
        let tids: Vec<Pid> = proc::thread_ids(pid)
            .ok_or(ControlError::Seize { pid, source: Errno::ESRCH })?
            .into_iter()
            .map(|t| Pid::from_raw(t as i32))
            .filter(|t| !considered.contains(t))
            .collect();
        if tids.is_empty() {
            return Ok(traced);
        }
        for tid in tids {
            considered.insert(tid);
            match ptrace::seize(tid, options) {
                Ok(()) => {
                    traced.insert(tid);
                }
                Err(Errno::ESRCH) => {} // exited meanwhile
                // Created by a thread we already trace: ours through
                // TRACECLONE (it reports itself with its first stop).
                Err(Errno::EPERM) if !traced.is_empty() => {}
                Err(source) => {
                    return Err(ControlError::Seize { pid: tid.as_raw() as u32, source });
                }
            }
        }
    }
}

/// Stops tracing a live process: each thread is interrupted, waited for
/// and detached, passing on any signal it was about to receive (ours are
/// dropped: `ours` says whether a thread stopped by `stop_signal` was
/// asked to by the agent). The process keeps running.
pub fn release_running(
    traced: &BTreeSet<Pid>,
    stop_signal: Signal,
    ours: &mut dyn FnMut(u32) -> bool,
) {
    for &tid in traced {
        if let Some(pass) = stop_thread(tid, stop_signal, ours) {
            let _ = ptrace::detach(tid, pass);
        }
    }
}

/// Stops traced thread `tid` (it may already be stopped) and returns the
/// signal to pass on when it is let go (None for ours, or an event stop);
/// None when the thread is gone or did not stop in time.
pub fn stop_thread(
    tid: Pid,
    stop_signal: Signal,
    ours: &mut dyn FnMut(u32) -> bool,
) -> Option<Option<Signal>> {
    if ptrace::interrupt(tid).is_err() {
        return None; // gone
    }
    let deadline = Instant::now() + poll::RELEASE_DEADLINE;
    loop {
        match waitpid(tid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                std::thread::sleep(poll::RELEASE_STOP);
            }
            Ok(WaitStatus::Stopped(_, sig)) => {
                let pass =
                    if sig == stop_signal && ours(tid.as_raw() as u32) { None } else { Some(sig) };
                return Some(pass);
            }
            Ok(WaitStatus::PtraceEvent(..)) => return Some(None),
            _ => return None,
        }
    }
}

/// Blocks SIGCHLD in the calling thread (and the threads it creates later)
/// so that [`wait_for_child`] can wait for tracee stops with
/// `sigtimedwait`. Must run before the agent starts any thread: a thread
/// that does not block SIGCHLD would receive it, and its default action
/// discards it.
pub fn block_sigchld() {
    // Blocking one signal in the calling thread cannot fail.
    let _ = sigchld().thread_block();
}

fn sigchld() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    set
}

/// Sleeps until a child or tracee changes state (SIGCHLD) or `timeout`
/// passes, whichever is first. With SIGCHLD not blocked (a library user
/// who did not call [`block_sigchld`]) it degrades to a plain sleep.
pub fn wait_for_child(timeout: Duration) {
    if !SigSet::thread_get_mask().is_ok_and(|m| m.contains(Signal::SIGCHLD)) {
        std::thread::sleep(timeout.min(poll::NO_SIGCHLD_NAP));
        return;
    }
    let set = sigchld();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    // nix has no sigtimedwait. SAFETY: `set` and `ts` are valid for the
    // call, no siginfo is asked for, and SIGCHLD is blocked in this thread,
    // so the wait consumes it instead of its (default: ignore) action.
    unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &ts) };
}

/// Resumes a stopped thread, delivering `signal` if any.
pub fn resume(tid: Pid, signal: Option<Signal>) {
    // The thread may have been killed meanwhile; nothing to do then.
    let _ = ptrace::cont(tid, signal);
}
