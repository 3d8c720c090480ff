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

use aid_common::{ActionKind, Pending, SiteKey, SitePoint};
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
    #[error(
        "cannot trace pid {pid} with ptrace: {source} (is another debugger attached? is ptrace restricted by yama/ptrace_scope?)"
    )]
    Seize { pid: u32, source: Errno },
    #[error("waiting for the target: {0}")]
    Wait(Errno),
}

/// What happened at one stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopRecord {
    pub site: SiteKey,
    pub tid: u32,
    pub action: ActionKind,
    /// The action was carried out (a hold that gave up is not).
    pub applied: bool,
    pub timed_out: bool,
    /// How long the thread was held.
    pub held_ns: u64,
    /// `CLOCK_MONOTONIC` time the thread was resumed.
    pub released_ns: u64,
    /// `CLOCK_MONOTONIC` time the probe fired (the thread stopped there).
    pub probe_ns: u64,
    /// The thread was held on purpose (a delay or a hold); otherwise the
    /// whole stop was the agent's overhead.
    pub held: bool,
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
    ptrace::seize(Pid::from_raw(pid as i32), options)
        .map_err(|source| ControlError::Seize { pid, source })
}

/// Starts tracing every thread of a running process. Threads created
/// meanwhile by a seized thread are traced automatically; the task list is
/// re-read until no untraced thread is left.
pub fn seize_running(pid: u32) -> Result<std::collections::BTreeSet<Pid>, ControlError> {
    let options = ptrace::Options::PTRACE_O_TRACECLONE;
    let mut traced = std::collections::BTreeSet::new();
    let mut considered = std::collections::BTreeSet::new();
    loop {
        let tids: Vec<Pid> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(|e| ControlError::Seize {
                pid,
                source: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
            })?
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()))
            .map(Pid::from_raw)
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
/// dropped). The process keeps running.
pub fn release_running(
    probes: &mut Probes,
    traced: &std::collections::BTreeSet<Pid>,
    stop_signal: Signal,
) {
    for &tid in traced {
        if ptrace::interrupt(tid).is_err() {
            continue; // gone
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match waitpid(tid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Ok(WaitStatus::Stopped(_, sig)) => {
                    let pass = if sig == stop_signal
                        && probes.take_pending(tid.as_raw() as u32).is_some()
                    {
                        None
                    } else {
                        Some(sig)
                    };
                    let _ = ptrace::detach(tid, pass);
                    break;
                }
                Ok(WaitStatus::PtraceEvent(..)) => {
                    let _ = ptrace::detach(tid, None);
                    break;
                }
                _ => break,
            }
        }
    }
}

pub struct Controller<'a> {
    pub probes: &'a mut Probes,
    pub functions: &'a [Function],
    pub unwinder: &'a mut Unwinder,
    pub stop_signal: Signal,
    /// First bytes of each function, read from its file once.
    pub first_bytes: &'a mut std::collections::HashMap<u32, Vec<u8>>,
}

/// Blocks SIGCHLD in the calling thread (and the threads it creates later)
/// so that [`wait_for_child`] can wait for tracee stops with
/// `sigtimedwait`. Must run before the agent starts any thread: a thread
/// that does not block SIGCHLD would receive it, and its default action
/// discards it.
pub fn block_sigchld() {
    // SAFETY: plain signal-mask manipulation of this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Sleeps until a child or tracee changes state (SIGCHLD) or `timeout`
/// passes, whichever is first. With SIGCHLD not blocked (a library user
/// who did not call [`block_sigchld`]) it degrades to a plain sleep.
fn wait_for_child(timeout: Duration) {
    // SAFETY: plain signal-mask queries and a timed wait on SIGCHLD only.
    unsafe {
        let mut current: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut current);
        if libc::sigismember(&current, libc::SIGCHLD) != 1 {
            std::thread::sleep(timeout.min(Duration::from_micros(200)));
            return;
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        libc::sigtimedwait(&set, std::ptr::null_mut(), &ts);
    }
}

fn release(rec: &mut StopRecord, h: &Hold, now: Instant, done: bool, expired: bool) {
    rec.held_ns = now.duration_since(h.since).as_nanos() as u64;
    rec.released_ns = crate::probe::monotonic_ns();
    rec.applied = done;
    rec.timed_out = expired;
    resume(h.tid, None);
}

fn resume(tid: Pid, signal: Option<Signal>) {
    // The thread may have been killed meanwhile; nothing to do then.
    let _ = ptrace::cont(tid, signal);
}

/// What the loop should do next, decided by the caller at every turn.
pub enum Flow {
    Continue,
    /// Release every held thread and return (live processes).
    Stop,
}

/// How serving ended.
pub struct Served {
    /// The leader's exit status, if the process ended.
    pub status: Option<WaitStatus>,
    pub stops: Vec<StopRecord>,
    /// Every thread traced at the end (for detaching a live process).
    pub traced: std::collections::BTreeSet<Pid>,
}

impl Controller<'_> {
    /// Runs the released target to its end, serving every stop; kills its
    /// process group when `timeout` passes or `cancel` is set.
    pub fn drive(
        &mut self,
        pid: u32,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<Driven, ControlError> {
        let started = Instant::now();
        let mut killed = false;
        let mut timed_out = false;
        let served = self.serve(pid, std::collections::BTreeSet::new(), &mut |_| {
            if !killed && (started.elapsed() >= timeout || cancel.load(Ordering::Relaxed)) {
                timed_out = started.elapsed() >= timeout;
                killed = true;
                // SIGKILL ends even threads held in a ptrace stop.
                runner::kill_group(pid);
            }
            Flow::Continue
        })?;
        Ok(Driven {
            status: served.status.unwrap_or(WaitStatus::StillAlive),
            timed_out,
            stops: served.stops,
        })
    }

    /// Serves every stop of the traced threads of `pid` until the process
    /// ends or `tick` (called every few hundred microseconds) says stop.
    pub fn serve(
        &mut self,
        pid: u32,
        mut traced: std::collections::BTreeSet<Pid>,
        tick: &mut dyn FnMut(&mut Probes) -> Flow,
    ) -> Result<Served, ControlError> {
        let leader = Pid::from_raw(pid as i32);
        let mut holds: Vec<Hold> = Vec::new();
        let mut stops: Vec<StopRecord> = Vec::new();
        loop {
            // Serve every stop that is waiting.
            loop {
                let status = match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                    Ok(s) => s,
                    Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => return Ok(Served { status: None, stops, traced }),
                    Err(e) => return Err(ControlError::Wait(e)),
                };
                match status {
                    WaitStatus::StillAlive => break,
                    WaitStatus::Exited(tid, _) | WaitStatus::Signaled(tid, _, _)
                        if tid == leader =>
                    {
                        return Ok(Served { status: Some(status), stops, traced });
                    }
                    WaitStatus::Exited(tid, _) | WaitStatus::Signaled(tid, _, _) => {
                        traced.remove(&tid);
                    }
                    WaitStatus::PtraceEvent(tid, _, _) => {
                        traced.insert(tid);
                        resume(tid, None);
                    }
                    WaitStatus::Stopped(tid, sig) if sig == self.stop_signal => {
                        traced.insert(tid);
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
                    release(&mut stops[h.record], h, now, done, expired);
                    false
                } else {
                    true
                }
            });
            if let Flow::Stop = tick(self.probes) {
                let now = Instant::now();
                for h in holds.drain(..) {
                    release(&mut stops[h.record], &h, now, false, false);
                }
                return Ok(Served { status: None, stops, traced });
            }
            // Wake at once when a thread stops; otherwise come back for
            // holds waiting on an event (polled), the nearest timed
            // release, or the caller's tick.
            let now = Instant::now();
            let nap = holds
                .iter()
                .map(|h| match h.release {
                    Release::WhenHappened(_) => Duration::from_micros(50),
                    Release::At => h.deadline.saturating_duration_since(now),
                })
                .min()
                .unwrap_or(Duration::from_millis(2))
                .min(Duration::from_millis(2));
            wait_for_child(nap);
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
            probe_ns: p.ts_ns,
            held: false,
            error: None,
        };
        let deadline = now + Duration::from_micros(p.action.timeout_us.max(1));
        // A hold or delay at an entry must come before the function does
        // anything: rewind the thread to its first instruction when that
        // instruction can safely run again.
        if p.site.point == SitePoint::ENTRY
            && matches!(
                p.action.kind,
                ActionKind::DELAY | ActionKind::HOLD_UNTIL | ActionKind::HOLD_WHILE_RUNNING
            )
            && let Err(e) = self.rewind(tid, &p)
        {
            log::debug!(
                "holding {tid} after the first instruction of function {}: {e}",
                p.site.func
            );
        }
        let hold = |release: Release,
                    deadline: Instant,
                    holds: &mut Vec<Hold>,
                    stops: &mut Vec<StopRecord>,
                    mut record: StopRecord| {
            record.held = true;
            holds.push(Hold { tid, release, deadline, since: now, record: stops.len() });
            stops.push(record);
        };
        // A stop that ends at once: all of it was the agent's overhead.
        let done = |mut record: StopRecord, stops: &mut Vec<StopRecord>| {
            record.released_ns = crate::probe::monotonic_ns();
            stops.push(record);
            resume(tid, None);
        };
        match p.action.kind {
            ActionKind::DELAY => {
                hold(
                    Release::At,
                    now + Duration::from_micros(p.action.value),
                    holds,
                    stops,
                    record,
                );
            }
            ActionKind::HOLD_UNTIL => {
                if self.probes.happened(&p.action.other).is_some() {
                    record.applied = true;
                    done(record, stops);
                } else {
                    hold(Release::WhenHappened(p.action.other), deadline, holds, stops, record);
                }
            }
            ActionKind::HOLD_WHILE_RUNNING => {
                let exit = SiteKey { point: SitePoint::EXIT, ..p.action.other };
                if self.probes.happened(&exit).is_some() {
                    record.applied = true;
                    done(record, stops);
                } else {
                    hold(Release::WhenHappened(exit), deadline, holds, stops, record);
                }
            }
            ActionKind::RETURN_EARLY | ActionKind::OVERRIDE_RETURN => {
                match self.edit_registers(tid, &p) {
                    Ok(()) => record.applied = true,
                    Err(e) => record.error = Some(e),
                }
                done(record, stops);
            }
            other => {
                record.error = Some(format!("unknown action {other:?}"));
                done(record, stops);
            }
        }
    }

    /// Puts the thread back at the function's first instruction, with the
    /// registers it had there, and tells the probes the next entry is the
    /// same call.
    fn rewind(&mut self, tid: Pid, p: &Pending) -> Result<(), String> {
        let f = self.functions.get(p.site.func as usize).ok_or("unknown function")?;
        let bytes = match self.first_bytes.get(&f.id) {
            Some(b) => b.clone(),
            None => {
                use std::os::unix::fs::FileExt as _;
                let file = std::fs::File::open(&f.module).map_err(|e| e.to_string())?;
                let mut b = vec![0u8; 16];
                let n = file.read_at(&mut b, f.offset).map_err(|e| e.to_string())?;
                b.truncate(n);
                self.first_bytes.insert(f.id, b.clone());
                b
            }
        };
        if !crate::insn::reexecutable(&bytes) {
            return Err(format!(
                "first instruction {:02x?} may have effects if run twice",
                &bytes[..bytes.len().min(4)]
            ));
        }
        let mut regs = ptrace::getregs(tid).map_err(|e| e.to_string())?;
        let r = &p.regs;
        (regs.r15, regs.r14, regs.r13, regs.r12, regs.rbp, regs.rbx) =
            (r[0], r[1], r[2], r[3], r[4], r[5]);
        (regs.r11, regs.r10, regs.r9, regs.r8, regs.rax, regs.rcx) =
            (r[6], r[7], r[8], r[9], r[10], r[11]);
        (regs.rdx, regs.rsi, regs.rdi) = (r[12], r[13], r[14]);
        (regs.rip, regs.eflags, regs.rsp) = (p.func_ip, r[18], r[19]);
        let replay = aid_common::Replay {
            ip: p.func_ip,
            exit_sp: r[19] + 8,
            func: p.site.func,
            entry_pending: 1,
        };
        self.probes.set_replay(tid.as_raw() as u32, replay).map_err(|e| e.to_string())?;
        ptrace::setregs(tid, regs).map_err(|e| e.to_string())
    }

    fn edit_registers(&mut self, tid: Pid, p: &Pending) -> Result<(), String> {
        let mut regs = ptrace::getregs(tid).map_err(|e| format!("reading registers: {e}"))?;
        if p.action.kind == ActionKind::OVERRIDE_RETURN {
            regs.rax = p.action.value;
        } else {
            let f = self.functions.get(p.site.func as usize).ok_or("unknown function")?;
            let bias = p.func_ip.wrapping_sub(f.address);
            let mut read = |addr: u64| {
                ptrace::read(tid, addr as ptrace::AddressType)
                    .map(|w| w as u64)
                    .map_err(|e| e.to_string())
            };
            self.unwinder
                .return_early(&f.module, bias, &mut regs, p.action.value, &mut read)
                .map_err(|e| format!("returning early from {}: {e}", f.name))?;
        }
        ptrace::setregs(tid, regs).map_err(|e| format!("writing registers: {e}"))
    }
}
