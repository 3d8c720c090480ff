//! The agent's half of interventions (docs/interventions.md): serving the
//! stops the probes ask for.
//!
//! The agent is the tracer of every thread of an intervened run. When a
//! probe decides an action is due, it records it in the `PENDING` map and
//! sends its own thread the stop signal; that thread alone enters a
//! signal-delivery stop, where the agent holds it (a delay, or until
//! another event, always with a deadline), or edits its registers (return
//! early at entry, override the return value at exit), then resumes it with
//! the signal suppressed. Every other thread keeps running.
//! The ptrace primitives it uses are [`crate::sys::ptrace`].

use std::{
    collections::HashMap,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use aid_common::{
    Action, ActionKind, LOCKER_MEMBER, Pending, RunningKey, SiteKey, SitePoint, lockers,
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

use crate::{
    bpf::Probes,
    intervene::{
        holds::{Futility, Hold, Release, backing_off, next_alone},
        returns::{self, Repairs, Traced},
    },
    model::{FuncId, Function},
    sys::{
        poll,
        ptrace::{ControlError, resume, wait_for_child},
        spawn,
        unwind::Unwinder,
    },
};

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
    /// The target ended while the thread was held here.
    pub cut_short: bool,
    /// The thread was put back at the probed instruction before it was
    /// held (`Controller::rewind`): it ran that instruction again when let
    /// go, not before the hold.
    pub rewound: bool,
    /// The value a return was forced to, if one was.
    pub value: Option<u64>,
    pub error: Option<String>,
}

impl StopRecord {
    /// The record of a stop as it begins: nothing applied, held or timed
    /// out yet; [`Controller::act`] fills in what the action did.
    fn new(tid: Pid, p: &Pending) -> StopRecord {
        StopRecord {
            site: p.site,
            tid: tid.as_raw() as u32,
            action: p.action.kind,
            applied: false,
            timed_out: false,
            held_ns: 0,
            released_ns: 0,
            probe_ns: p.ts_ns,
            held: false,
            cut_short: false,
            rewound: false,
            value: None,
            error: None,
        }
    }
}

/// How an intervened run ended.
pub struct Driven {
    pub status: WaitStatus,
    pub timed_out: bool,
    pub stops: Vec<StopRecord>,
}

/// A group hold let go because it waited on held threads only
/// ([`Controller::stuck_group_hold`]); `kept`: the order still holds.
#[derive(Clone, Copy)]
struct Unstuck {
    tid: Pid,
    kept: bool,
}

/// What the agent keeps between stops: the signal its probes stop threads
/// with, the call-frame tables for premature returns, and the first bytes
/// of each function (read from its file once) for rewinds.
pub struct StopState {
    stop_signal: Signal,
    unwinder: Unwinder,
    first_bytes: HashMap<FuncId, Vec<u8>>,
    repairs: Repairs,
}

impl StopState {
    pub fn new(stop_signal: Signal) -> StopState {
        StopState {
            stop_signal,
            unwinder: Unwinder::default(),
            first_bytes: HashMap::new(),
            repairs: Repairs::default(),
        }
    }

    /// Forgets what the last run's threads left (a new run begins).
    pub fn new_run(&mut self) {
        self.repairs.clear();
    }

    /// See [`Repairs::unhijack`].
    pub fn unhijack(
        &mut self,
        tid: u32,
        sp: u64,
        shadow: &aid_common::ShadowStack,
        trampoline: u64,
        stack: &mut Traced,
    ) -> Result<usize, String> {
        self.repairs.unhijack(tid, sp, shadow, trampoline, stack)
    }

    pub fn stop_signal(&self) -> Signal {
        self.stop_signal
    }
}

/// Serves the stops of a traced process: the probes that ask for them, the
/// functions they are in, and the state kept between stops.
pub struct Controller<'a> {
    pub probes: &'a mut Probes,
    pub functions: &'a [Function],
    pub state: &'a mut StopState,
}

/// The group whose running calls a hold of kind `action` waits out, for
/// the call a thread stopped at: the takers of a lock, or the group's
/// calls (those on the call's object, when the hold is on one).
fn awaited_group(action: &Action, p: &Pending) -> RunningKey {
    if action.kind == ActionKind::HOLD_WHILE_LOCKERS {
        return lockers(action.other.func);
    }
    let on_object = action.other.role != 0;
    let object = if on_object { argument(p, action.other.instance) } else { 0 };
    RunningKey { group: action.other.func, _pad: 0, object }
}

/// Argument `position` (1-based) of the call a stopped thread entered.
fn argument(p: &Pending, position: u32) -> u64 {
    match position {
        1 => p.regs[14],
        2 => p.regs[13],
        3 => p.regs[12],
        _ => 0,
    }
}

fn release(
    probes: &mut Probes,
    rec: &mut StopRecord,
    h: &Hold,
    now: Instant,
    done: bool,
    expired: bool,
) {
    rec.held_ns = now.duration_since(h.since).as_nanos() as u64;
    rec.released_ns = crate::bpf::monotonic_ns();
    rec.applied = done;
    rec.timed_out = expired;
    proceed(probes, rec, h.tid);
}

/// Noise has let its thread go where an intervention holds it while the
/// calls of a group run ([`Hold::then`]: at a lock call, or at the entry
/// of a call the intervention serialises): when one runs on another
/// thread now (it may have begun during the noise), the thread stays
/// held, now for the intervention, under a stop record of its own (the
/// noise's ends here). True when it stays.
fn hold_after_noise(
    probes: &Probes,
    members: &[(u32, RunningKey)],
    h: &mut Hold,
    (then, key): (Action, RunningKey),
    stops: &mut Vec<StopRecord>,
    now: Instant,
) -> bool {
    let mine = counted(members, h.tid, key);
    if probes.running(&key) <= mine {
        return false;
    }
    let released_ns = crate::bpf::monotonic_ns();
    let noise = &mut stops[h.record];
    noise.held_ns = now.duration_since(h.since).as_nanos() as u64;
    noise.released_ns = released_ns;
    noise.applied = true;
    let record = StopRecord {
        action: then.kind,
        applied: false,
        timed_out: false,
        held_ns: 0,
        released_ns: 0,
        probe_ns: released_ns,
        held: true,
        ..noise.clone()
    };
    stops.push(record);
    h.record = stops.len() - 1;
    h.release = Release::WhenIdle { key, mine };
    h.deadline = now + Duration::from_micros(then.timeout_us.max(1));
    h.since = now;
    true
}

/// The target ended while these threads were held: each hold kept what
/// it was there for until the run's end, so it was applied. A run that
/// failed while an intervention held a thread failed under that
/// intervention, and is evidence against its candidate; counted as "not
/// applied" it was left out, and only the runs the intervention did not
/// touch were left to judge it (every failing run of a gated pool, whose
/// assertion fired while the serialised calls were held, was so).
fn held_to_the_end(holds: &[Hold], stops: &mut [StopRecord]) {
    for h in holds {
        if let Some(rec) = stops.get_mut(h.record) {
            rec.applied = true;
            rec.cut_short = true;
            rec.held_ns = h.since.elapsed().as_nanos() as u64;
        }
    }
}

/// Resumes a stopped thread, and marks the site it stopped at as happened
/// now: a call held at its entry begins, and a held return returns, when
/// let go, not when the probe fired (so a hold until "B has started" does
/// not let A go while B is itself held at its entry). The probe marked the
/// site as held ([`aid_common::HELD_MARK`]); a call about to run again
/// from its entry (re-execution) was not marked: it has not returned.
fn proceed(probes: &mut Probes, rec: &StopRecord, tid: Pid) {
    resume(tid, None);
    probes.let_go(&rec.site, rec.released_ns);
}

/// How many of `tid`'s calls are counted under `key`, of the open group
/// members ([`Probes::open_members`]).
fn counted(members: &[(u32, RunningKey)], tid: Pid, key: RunningKey) -> u64 {
    members.iter().filter(|(t, k)| *t == tid.as_raw() as u32 && *k == key).count() as u64
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
                spawn::kill_group(pid);
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
        let mut futility = Futility::default();
        let mut exit_look = None;
        loop {
            // Serve every stop that is waiting.
            loop {
                // Only this thread's children and tracees (`__WNOTHREAD`):
                // another thread of the agent serving a run of its own
                // (`--jobs`) must not reap its stops. A ptrace tracer is one
                // thread, and a forked child belongs to the thread that
                // forked it, so a run is served on the thread that started
                // and seized it.
                let flags = WaitPidFlag::WNOHANG | WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD;
                let status = match waitpid(None, Some(flags)) {
                    Ok(s) => s,
                    Err(Errno::EINTR) => continue,
                    Err(Errno::ECHILD) => {
                        held_to_the_end(&holds, &mut stops);
                        return Ok(Served { status: None, stops, traced });
                    }
                    Err(e) => return Err(ControlError::Wait(e)),
                };
                match status {
                    WaitStatus::StillAlive => break,
                    WaitStatus::Exited(tid, _) | WaitStatus::Signaled(tid, _, _)
                        if tid == leader =>
                    {
                        held_to_the_end(&holds, &mut stops);
                        return Ok(Served { status: Some(status), stops, traced });
                    }
                    WaitStatus::Exited(tid, _) | WaitStatus::Signaled(tid, _, _) => {
                        traced.remove(&tid);
                    }
                    WaitStatus::PtraceEvent(tid, _, _) => {
                        traced.insert(tid);
                        resume(tid, None);
                    }
                    WaitStatus::Stopped(tid, sig) if sig == self.state.stop_signal => {
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
            let stuck = self.stuck_group_hold(&holds);
            let alone = next_alone(pid, &holds, &mut exit_look);
            // Group holds waiting on each other are settled first.
            let futile = if stuck.is_none() { futility.hold(pid, &holds, now) } else { None };
            let members = if holds.iter().any(|h| h.then.is_some()) {
                self.probes.open_members()
            } else {
                Vec::new()
            };
            holds.retain_mut(|h| {
                let unblocked = stuck.is_some_and(|s| s.tid == h.tid);
                let done = match h.release {
                    Release::At => now >= h.deadline,
                    Release::WhenHappened(site) => self.probes.happened(&site).is_some(),
                    Release::WhenIdle { key, mine } => {
                        self.probes.running(&key) <= mine
                            || stuck.is_some_and(|s| s.tid == h.tid && s.kept)
                    }
                    Release::WhenAlone(_) => alone == Some(h.tid),
                };
                let expired = !done && (now >= h.deadline || futile == Some(h.tid));
                if (done || expired || unblocked)
                    && let Some(then) = h.then.take()
                    && hold_after_noise(self.probes, &members, h, then, &mut stops, now)
                {
                    true
                } else if done || expired || unblocked {
                    release(self.probes, &mut stops[h.record], h, now, done, expired);
                    if let Release::WhenHappened(site) = h.release {
                        self.probes.forget_event(site);
                    }
                    false
                } else {
                    true
                }
            });
            if let Flow::Stop = tick(self.probes) {
                let now = Instant::now();
                for h in holds.drain(..) {
                    release(self.probes, &mut stops[h.record], &h, now, false, false);
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
                    Release::WhenHappened(_) | Release::WhenIdle { .. } | Release::WhenAlone(_) => {
                        poll::HOLD_EVENT
                    }
                    Release::At => h.deadline.saturating_duration_since(now),
                })
                .min()
                .unwrap_or(poll::SERVE_NAP)
                .min(poll::SERVE_NAP);
            wait_for_child(nap);
        }
    }

    /// Group holds can wait for each other: calls of A held until no call
    /// of B runs while the running calls of B are held until no call of A
    /// runs. When every running call a hold waits for is on a thread that
    /// is itself held, the oldest such hold is let go. If each of those
    /// threads is held at the very call that counts it (its body not yet
    /// begun), the others keep waiting for the one let go and the groups
    /// still run one at a time: the order is kept. If one is held inside
    /// a call of the group it entered before (A called from within B on
    /// two threads, both inside B), no order can keep them apart in this
    /// run: the hold let go is not applied.
    fn stuck_group_hold(&self, holds: &[Hold]) -> Option<Unstuck> {
        if !holds.iter().any(|h| matches!(h.release, Release::WhenIdle { .. })) {
            return None;
        }
        let members = self.probes.open_members();
        holds
            .iter()
            .filter_map(|h| {
                let Release::WhenIdle { key, mine } = h.release else { return None };
                let mut held = 0;
                let mut kept = true;
                // A thread delayed inside B goes on by itself: only one
                // held at its counted call, or waiting on a group too, is
                // stuck.
                let stuck = |g: &&Hold| {
                    g.tid != h.tid
                        && (g.own == Some(key) || matches!(g.release, Release::WhenIdle { .. }))
                };
                for g in holds.iter().filter(stuck) {
                    let inside = counted(&members, g.tid, key);
                    held += inside;
                    kept &= inside == 0 || (inside == 1 && g.own == Some(key));
                }
                (self.probes.running(&key).saturating_sub(mine) <= held).then_some((h, kept))
            })
            .min_by_key(|(h, _)| h.since)
            .map(|(h, kept)| Unstuck { tid: h.tid, kept })
    }

    /// Carries out the action a stopped thread asked for.
    /// Long (about 120 lines): one arm per action a stopped thread asks for.
    fn act(&mut self, tid: Pid, p: Pending, holds: &mut Vec<Hold>, stops: &mut Vec<StopRecord>) {
        let now = Instant::now();
        let mut record = StopRecord::new(tid, &p);
        let deadline = now + Duration::from_micros(p.action.timeout_us.max(1));
        // A hold or delay at an entry must come before the function does
        // anything: rewind the thread to its first instruction when that
        // instruction can safely run again.
        if p.site.point == SitePoint::ENTRY && p.action.kind.is_hold() {
            match self.rewind(tid, &p) {
                Ok(()) => record.rewound = true,
                Err(e) => log::debug!(
                    "holding {tid} after the first instruction of function {}: {e}",
                    p.site.func
                ),
            }
        }
        let own = self.own(tid, &p);
        let then = (p.then.kind == ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING
            || p.then.kind.waits_after_noise())
        .then(|| (p.then, awaited_group(&p.then, &p)));
        let hold = |release: Release,
                    deadline: Instant,
                    holds: &mut Vec<Hold>,
                    stops: &mut Vec<StopRecord>,
                    mut record: StopRecord| {
            record.held = true;
            holds.push(Hold { tid, release, deadline, since: now, record: stops.len(), own, then });
            stops.push(record);
        };
        // A stop that ends at once: all of it was the agent's overhead.
        let done = |probes: &mut Probes, mut record: StopRecord, stops: &mut Vec<StopRecord>| {
            record.released_ns = crate::bpf::monotonic_ns();
            proceed(probes, &record, tid);
            stops.push(record);
        };
        match p.action.kind {
            ActionKind::DELAY if p.action.retries > 0 => match self.every_hold(&p, stops) {
                Some(until) => hold(Release::At, until, holds, stops, record),
                None => done(self.probes, record, stops),
            },
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
                    done(self.probes, record, stops);
                } else {
                    hold(Release::WhenHappened(p.action.other), deadline, holds, stops, record);
                }
            }
            ActionKind::HOLD_WHILE_RUNNING => {
                let exit = SiteKey { point: SitePoint::EXIT, ..p.action.other };
                if self.probes.happened(&exit).is_some() {
                    record.applied = true;
                    done(self.probes, record, stops);
                } else {
                    hold(Release::WhenHappened(exit), deadline, holds, stops, record);
                }
            }
            ActionKind::RELEASE_WAITERS => self.release_waiters(tid, record, holds, stops),
            ActionKind::HOLD_WHILE_GROUP_RUNNING
            | ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING
            | ActionKind::HOLD_WHILE_LOCKERS => {
                let key = awaited_group(&p.action, &p);
                // The thread's own calls counted there (the held call, or
                // one it is inside): a hold waits for other threads' calls.
                let mine = counted(&self.probes.open_members(), tid, key);
                if self.probes.running(&key) <= mine {
                    record.applied = true;
                    done(self.probes, record, stops);
                } else {
                    hold(Release::WhenIdle { key, mine }, deadline, holds, stops, record);
                }
            }
            ActionKind::YIELD => {
                hold(Release::WhenAlone(p.action.value), deadline, holds, stops, record);
            }
            ActionKind::RETURN_EARLY | ActionKind::OVERRIDE_RETURN => {
                match self.edit_registers(tid, &p) {
                    Ok(()) => record.applied = true,
                    Err(e) => record.error = Some(e),
                }
                if p.action.kind == ActionKind::OVERRIDE_RETURN {
                    record.value = Some(p.action.value);
                }
                done(self.probes, record, stops);
            }
            ActionKind::REEXECUTE => match self.reexecute(tid, &p) {
                Ok(()) => {
                    record.applied = true;
                    holds.push(backing_off(tid, &p, now, stops.len(), own));
                    stops.push(record);
                }
                Err(e) => {
                    record.error = Some(e);
                    done(self.probes, record, stops);
                }
            },
            ActionKind::REPAIR_RETURNS | ActionKind::REARM_RETURNS => {
                record.error = self.unwinding(tid, &p).err();
                record.applied = record.error.is_none();
                done(self.probes, record, stops);
            }
            ActionKind::REEXECUTE_EXHAUSTED => {
                // The call still returned a value the intervention exists
                // to avoid, every time: the predicate stays as it was.
                done(self.probes, record, stops);
            }
            other => {
                record.error = Some(format!("unknown action {other:?}"));
                done(self.probes, record, stops);
            }
        }
    }

    /// Where a stopped call is counted: its group, or, at a lock call a
    /// lock hold acts at, the lockers it was counted among before its
    /// check ([`aid_common::lockers`]).
    fn own(&self, tid: Pid, p: &Pending) -> Option<RunningKey> {
        let tid = tid.as_raw() as u32;
        let at_lock = |a: &Action| a.kind == ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING;
        self.probes.open_member(tid, p.site.func).or_else(|| {
            (at_lock(&p.action) || at_lock(&p.then))
                .then(|| self.probes.open_member(tid, LOCKER_MEMBER))
                .flatten()
        })
    }

    /// A thread stopped where threads wait for it to be
    /// ([`ActionKind::RELEASE_WAITERS`]): the event happens now, dated
    /// first; then the threads waiting for it go on, then this one. A
    /// waiting thread's call is thus dated after the event, and begins
    /// before the thread that made it goes on.
    fn release_waiters(
        &mut self,
        tid: Pid,
        mut record: StopRecord,
        holds: &mut Vec<Hold>,
        stops: &mut Vec<StopRecord>,
    ) {
        let site = record.site;
        self.probes.forget_event(site);
        record.released_ns = crate::bpf::monotonic_ns();
        self.probes.let_go(&site, record.released_ns);
        let now = Instant::now();
        holds.retain(|h| {
            let waits = matches!(h.release, Release::WhenHappened(s) if s == site);
            let go = waits && h.then.is_none();
            if go {
                release(self.probes, &mut stops[h.record], h, now, true, false);
            }
            !go
        });
        resume(tid, None);
        stops.push(record);
    }

    /// Noise for every thread at a point: each arrival is held until the
    /// time this returns, [`aid_common::Action::retries`] of them per run;
    /// the last one takes the action out of the map, and any arrival that
    /// was already on its way goes on at once (None).
    fn every_hold(&mut self, p: &Pending, stops: &[StopRecord]) -> Option<Instant> {
        let every = SiteKey {
            func: p.site.func,
            role: aid_common::EVERY_ROLE,
            instance: aid_common::ANY_INSTANCE,
            point: SitePoint::ENTRY,
        };
        let before = stops
            .iter()
            .filter(|s| s.held && s.site.func == p.site.func && s.action == p.action.kind)
            .count() as u32;
        if before + 1 >= p.action.retries
            && let Err(e) = self.probes.remove_action(every)
        {
            log::debug!("removing the noise at function {}: {e}", p.site.func);
        }
        (before < p.action.retries).then(|| Instant::now() + Duration::from_micros(p.action.value))
    }

    /// Puts the thread back at the function's first instruction, with the
    /// registers it had there, and tells the probes the next entry is the
    /// same call.
    fn rewind(&mut self, tid: Pid, p: &Pending) -> Result<(), String> {
        let f = self.functions.get(p.site.func as usize).ok_or("unknown function")?;
        let bytes = match self.state.first_bytes.get(&f.id) {
            Some(b) => b.clone(),
            None => {
                use std::os::unix::fs::FileExt as _;
                let file = std::fs::File::open(&f.module).map_err(|e| e.to_string())?;
                let mut b = vec![0u8; 16];
                let n = file.read_at(&mut b, f.offset).map_err(|e| e.to_string())?;
                b.truncate(n);
                self.state.first_bytes.insert(f.id, b.clone());
                b
            }
        };
        if !crate::sys::rewind::reexecutable(&bytes) {
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
            dup_exit: 1,
            _pad: 0,
        };
        self.probes.set_replay(tid.as_raw() as u32, replay).map_err(|e| e.to_string())?;
        ptrace::setregs(tid, regs).map_err(|e| e.to_string())
    }

    /// Runs a call that has just returned again from its entry: the
    /// registers its entry had (saved by the probe), its stack pointer, and
    /// its return address put back in the stack slot the return consumed.
    /// The probes ignore the repeated entry, so the call keeps its
    /// instance, and report only the return of the last attempt.
    fn reexecute(&mut self, tid: Pid, p: &Pending) -> Result<(), String> {
        let mut regs = ptrace::getregs(tid).map_err(|e| format!("reading registers: {e}"))?;
        let r = &p.regs;
        let entry_sp = r[19];
        // Where the thread stopped depends on how the kernel returns from
        // a uretprobe. Through an int3 trampoline, the thread is at the
        // return address with the frame popped (rsp = entry + 8). Through
        // the uretprobe syscall trampoline (x86-64, Linux 6.11 and later),
        // it is inside the trampoline, which has pushed rax, rcx and r11
        // (rsp = entry - 16), and the kernel has put the real return address
        // in rax's slot — the very slot the call's return address had.
        let return_address = if regs.rsp == entry_sp.wrapping_add(8) {
            let ret = regs.rip;
            ptrace::write(tid, entry_sp as ptrace::AddressType, ret as i64)
                .map_err(|e| format!("restoring the return address: {e}"))?;
            ret
        } else if regs.rsp == entry_sp.wrapping_sub(16) {
            ptrace::read(tid, entry_sp as ptrace::AddressType)
                .map(|w| w as u64)
                .map_err(|e| format!("reading the return address: {e}"))?
        } else {
            return Err(format!(
                "the stack at the return (rsp {:#x}) is not the call's (entry rsp {:#x}): not re-executing",
                regs.rsp, entry_sp
            ));
        };
        log::debug!(
            "re-executing function {} of thread {tid}, returning to {return_address:#x}",
            p.site.func
        );
        (regs.r15, regs.r14, regs.r13, regs.r12, regs.rbp, regs.rbx) =
            (r[0], r[1], r[2], r[3], r[4], r[5]);
        (regs.r11, regs.r10, regs.r9, regs.r8, regs.rax, regs.rcx) =
            (r[6], r[7], r[8], r[9], r[10], r[11]);
        (regs.rdx, regs.rsi, regs.rdi, regs.orig_rax) = (r[12], r[13], r[14], r[15]);
        (regs.rip, regs.eflags, regs.rsp) = (p.func_ip, r[18], entry_sp);
        let replay = aid_common::Replay {
            ip: p.func_ip,
            exit_sp: entry_sp + 8,
            func: p.site.func,
            entry_pending: 1,
            dup_exit: 0,
            _pad: 0,
        };
        self.probes.set_replay(tid.as_raw() as u32, replay).map_err(|e| e.to_string())?;
        ptrace::setregs(tid, regs).map_err(|e| format!("writing registers: {e}"))
    }

    /// A thread of a target that throws entered an unwinder (repair the
    /// return slots it will cross) or a catch point (re-arm the live ones):
    /// `returns.rs`.
    fn unwinding(&mut self, tid: Pid, p: &Pending) -> Result<(), String> {
        let (raw, sp) = (tid.as_raw() as u32, returns::stack_pointer(p));
        let mut stack = Traced(tid);
        if p.action.kind == ActionKind::REARM_RETURNS {
            let n = self.state.repairs.rearm(raw, sp, &mut stack)?;
            log::debug!("thread {tid} caught: {n} return probe(s) re-armed");
            return Ok(());
        }
        let shadow = self.probes.shadow(raw).ok_or("its shadow stack is gone")?;
        let trampoline = returns::trampoline(raw).ok_or("no [uprobes] area in its maps")?;
        let n = self.state.repairs.repair(raw, sp, &shadow, trampoline, &mut stack)?;
        log::debug!("thread {tid} unwinds: {n} return address(es) put back");
        Ok(())
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
            self.state
                .unwinder
                .return_early(&f.module, bias, &mut regs, p.action.value, &mut read)
                .map_err(|e| format!("returning early from {}: {e}", f.name))?;
        }
        ptrace::setregs(tid, regs).map_err(|e| format!("writing registers: {e}"))
    }
}
