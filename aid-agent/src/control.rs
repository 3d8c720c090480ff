//! The ptrace half of interventions (shared/DESIGN.md, "How an
//! intervention reaches the target").
//!
//! The agent is the tracer of every thread of an intervened run. When a
//! probe decides an action is due, it records it in the `PENDING` map and
//! sends its own thread the stop signal; that thread alone enters a
//! signal-delivery stop, where the agent holds it (a delay, or until
//! another event, always with a deadline), or edits its registers (return
//! early at entry, override the return value at exit), then resumes it with
//! the signal suppressed. Every other thread keeps running.
//!
//! If the agent dies, the kernel detaches its tracees; a thread it was
//! holding resumes, and the stop signal (ignored by default) is harmless.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use aid_common::{
    ACTION_DELAY, ACTION_HOLD_UNTIL, ACTION_HOLD_WHILE_RUNNING, ACTION_OVERRIDE_RETURN, ACTION_RETURN_EARLY,
    POINT_EXIT, Pending, SiteKey,
};
use nix::{
    errno::Errno,
    sys::{
        ptrace,
        signal::Signal,
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};

use crate::{model::Function, probe::Probes, runner, unwind::Unwinder};

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot trace pid {pid} with ptrace: {source} (is another debugger attached? is ptrace restricted by yama/ptrace_scope?)")]
    Seize { pid: u32, source: Errno },
    #[error("waiting for the target: {0}")]
    Wait(Errno),
}

/// What happened at one stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopRecord {
    pub site: SiteKey,
    pub tid: u32,
    pub action: u32,
    /// The action was carried out (a hold that gave up is not).
    pub applied: bool,
    pub timed_out: bool,
    /// How long the thread was held.
    pub held_ns: u64,
    /// `CLOCK_MONOTONIC` time the thread was resumed (0 if never held).
    pub released_ns: u64,
    pub error: Option<String>,
}

/// How an intervened run ended.
pub struct Driven {
    pub status: WaitStatus,
    pub timed_out: bool,
    pub stops: Vec<StopRecord>,
}

enum Release {
    At,
    WhenHappened(SiteKey),
}

struct Hold {
    tid: Pid,
    release: Release,
    deadline: Instant,
    since: Instant,
    record: usize,
}

/// Starts tracing a held child (before it execs): every thread it will
/// have is traced, and the exec is reported as an event rather than a
/// SIGTRAP.
pub fn seize(pid: u32) -> Result<(), ControlError> {
    let options = ptrace::Options::PTRACE_O_TRACECLONE | ptrace::Options::PTRACE_O_TRACEEXEC;
    ptrace::seize(Pid::from_raw(pid as i32), options).map_err(|source| ControlError::Seize { pid, source })
}

pub struct Controller<'a> {
    pub probes: &'a mut Probes,
    pub functions: &'a [Function],
    pub unwinder: &'a mut Unwinder,
    pub stop_signal: Signal,
}

fn resume(tid: Pid, signal: Option<Signal>) {
    // The thread may have been killed meanwhile; nothing to do then.
    let _ = ptrace::cont(tid, signal);
}

impl Controller<'_> {
    /// Runs the released target to its end, serving every stop.
    pub fn drive(&mut self, pid: u32, timeout: Duration, cancel: &AtomicBool) -> Result<Driven, ControlError> {
        let leader = Pid::from_raw(pid as i32);
        let started = Instant::now();
        let mut holds: Vec<Hold> = Vec::new();
        let mut stops: Vec<StopRecord> = Vec::new();
        let mut timed_out = false;
        let mut killed = false;
        loop {
            // Serve every stop that is waiting.
            loop {
                let status = match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                    Ok(s) => s,
                    Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => {
                        return Ok(Driven { status: WaitStatus::StillAlive, timed_out, stops });
                    }
                    Err(e) => return Err(ControlError::Wait(e)),
                };
                match status {
                    WaitStatus::StillAlive => break,
                    WaitStatus::Exited(tid, _) | WaitStatus::Signaled(tid, _, _) if tid == leader => {
                        return Ok(Driven { status, timed_out, stops });
                    }
                    WaitStatus::Exited(..) | WaitStatus::Signaled(..) => {}
                    WaitStatus::PtraceEvent(tid, _, _) => resume(tid, None),
                    WaitStatus::Stopped(tid, sig) if sig == self.stop_signal => {
                        match self.probes.take_pending(tid.as_raw() as u32) {
                            Some(p) => self.act(tid, p, &mut holds, &mut stops),
                            // Not ours: the program's own use of the signal.
                            None => resume(tid, Some(sig)),
                        }
                    }
                    WaitStatus::Stopped(tid, sig) => resume(tid, Some(sig)),
                    _ => {}
                }
            }
            // Release holds whose time has come or whose event happened.
            let now = Instant::now();
            holds.retain(|h| {
                let done = match h.release {
                    Release::At => now >= h.deadline,
                    Release::WhenHappened(site) => self.probes.happened(&site).is_some(),
                };
                let expired = !done && now >= h.deadline;
                if done || expired {
                    let rec = &mut stops[h.record];
                    rec.held_ns = now.duration_since(h.since).as_nanos() as u64;
                    rec.released_ns = crate::probe::monotonic_ns();
                    rec.applied = done;
                    rec.timed_out = expired;
                    resume(h.tid, None);
                    false
                } else {
                    true
                }
            });
            if !killed && (started.elapsed() >= timeout || cancel.load(Ordering::Relaxed)) {
                timed_out = started.elapsed() >= timeout;
                killed = true;
                runner::kill_group(pid);
                for h in holds.drain(..) {
                    resume(h.tid, None);
                }
            }
            std::thread::sleep(Duration::from_micros(if holds.is_empty() { 200 } else { 50 }));
        }
    }

    /// Carries out the action a stopped thread asked for.
    fn act(&mut self, tid: Pid, p: Pending, holds: &mut Vec<Hold>, stops: &mut Vec<StopRecord>) {
        let now = Instant::now();
        let mut record = StopRecord {
            site: p.site,
            tid: tid.as_raw() as u32,
            action: p.action.kind,
            applied: false,
            timed_out: false,
            held_ns: 0,
            released_ns: 0,
            error: None,
        };
        let deadline = now + Duration::from_micros(p.action.timeout_us.max(1));
        let hold = |release: Release, deadline: Instant, holds: &mut Vec<Hold>, stops: &mut Vec<StopRecord>, record| {
            holds.push(Hold { tid, release, deadline, since: now, record: stops.len() });
            stops.push(record);
        };
        match p.action.kind {
            ACTION_DELAY => {
                hold(Release::At, now + Duration::from_micros(p.action.value), holds, stops, record);
            }
            ACTION_HOLD_UNTIL => {
                if self.probes.happened(&p.action.other).is_some() {
                    record.applied = true;
                    stops.push(record);
                    resume(tid, None);
                } else {
                    hold(Release::WhenHappened(p.action.other), deadline, holds, stops, record);
                }
            }
            ACTION_HOLD_WHILE_RUNNING => {
                let exit = SiteKey { point: POINT_EXIT, ..p.action.other };
                if self.probes.happened(&exit).is_some() {
                    record.applied = true;
                    stops.push(record);
                    resume(tid, None);
                } else {
                    hold(Release::WhenHappened(exit), deadline, holds, stops, record);
                }
            }
            ACTION_RETURN_EARLY | ACTION_OVERRIDE_RETURN => {
                match self.edit_registers(tid, &p) {
                    Ok(()) => record.applied = true,
                    Err(e) => record.error = Some(e),
                }
                stops.push(record);
                resume(tid, None);
            }
            other => {
                record.error = Some(format!("unknown action {other}"));
                stops.push(record);
                resume(tid, None);
            }
        }
    }

    fn edit_registers(&mut self, tid: Pid, p: &Pending) -> Result<(), String> {
        let mut regs = ptrace::getregs(tid).map_err(|e| format!("reading registers: {e}"))?;
        if p.action.kind == ACTION_OVERRIDE_RETURN {
            regs.rax = p.action.value;
        } else {
            let f = self.functions.get(p.site.func as usize).ok_or("unknown function")?;
            let bias = p.func_ip.wrapping_sub(f.address);
            let mut read = |addr: u64| {
                ptrace::read(tid, addr as ptrace::AddressType).map(|w| w as u64).map_err(|e| e.to_string())
            };
            self.unwinder
                .return_early(&f.module, bias, &mut regs, p.action.value, &mut read)
                .map_err(|e| format!("returning early from {}: {e}", f.name))?;
        }
        ptrace::setregs(tid, regs).map_err(|e| format!("writing registers: {e}"))
    }
}
