//! Intervened runs only: numbering call instances per thread role, marking
//! stamped sites as happened, counting the running calls of serialised
//! groups, keeping the entry registers of calls that may be re-executed,
//! and stopping a thread for the agent when the action installed at its
//! site is due.
//!
//! An action is found by its exact site first, then by the site's
//! function and role with [`ANY_INSTANCE`] (an action for every call),
//! then by the function alone with [`EVERY_ROLE`] (noise for every
//! thread at that function's entry); an
//! action with a calling context (`within`) applies only while a call of
//! that function runs on the same thread.

use aid_common::{
    ANY_INSTANCE, Action, ActionKind, CALL_STACK_DEPTH, CallKey, CallStack, EVERY_ROLE, EntryRegs,
    GroupMember, HELD_MARK, LOCKER_MEMBER, OpenMember, PT_REGS_WORDS, Pending, ProbeErrorKind,
    RetTest, RunningKey, SiteKey, SitePoint, UNITS_IN_FLIGHT, UnitState, lockers, serialized_pair,
};
use aya_ebpf::{bindings::pt_regs, helpers::bpf_send_signal_thread};

use crate::maps::{
    AID_ACTIONS, AID_CALLS, AID_ENTRY_REGS, AID_GROUPS, AID_LIVE_UNIT, AID_OPEN_MEMBER,
    AID_PENDING, AID_REG_SCRATCH, AID_REPLAY, AID_ROLES, AID_RUNNING, AID_SCRATCH, AID_STAMPS,
    AID_STOP_SIGNAL, AID_UNIT_STATE, global,
};

/// `BPF_NOEXIST`: insert only if the key is new.
const NOEXIST: u64 = 1;

/// The error of a `BPF_NOEXIST` insert of a key already there.
const EEXIST: i32 = 17;

/// The same call entered again after the agent rewound the thread (a hold
/// at its entry) or re-executed it (from its exit): ignore.
#[inline(always)]
pub fn replayed_entry(tid: u32, ip: u64) -> bool {
    match AID_REPLAY.get_ptr_mut(tid) {
        // SAFETY: a map value pointer; only this thread touches its entry.
        Some(r) => unsafe {
            if (*r).entry_pending != 0 && (*r).ip == ip {
                if (*r).dup_exit == 0 {
                    let _ = AID_REPLAY.remove(tid);
                } else {
                    (*r).entry_pending = 0;
                }
                true
            } else {
                false
            }
        },
        None => false,
    }
}

/// The first of the two returns the kernel reports for a call rewound at
/// its entry.
#[inline(always)]
pub fn replayed_exit(tid: u32, func: u32, sp: u64) -> bool {
    // SAFETY: a read of a map value; only this thread writes its entry.
    match unsafe { AID_REPLAY.get(tid) } {
        Some(r) if r.dup_exit != 0 && r.entry_pending == 0 && r.func == func && r.exit_sp == sp => {
            let _ = AID_REPLAY.remove(tid);
            true
        }
        _ => false,
    }
}

/// The thread's role and unit epoch, or None when interventions do not
/// apply to it.
#[inline(always)]
fn identify(tid: u32, func: u32, point: SitePoint) -> Result<Option<(u32, u32)>, ProbeErrorKind> {
    let unit = AID_LIVE_UNIT.get(0).copied().unwrap_or(0);
    if unit == 0 {
        // SAFETY: a read of a map value.
        return Ok(unsafe { AID_ROLES.get(tid) }.map(|r| (*r, 0)));
    }
    // Live-unit mode: the thread running a unit is role 0, with instances
    // counted from the unit's entry...
    if let Some(epoch) = unit_epoch(tid, func + 1 == unit, point)? {
        return Ok(Some((0, epoch)));
    }
    // ...any other thread (and a unit's thread between units) is its
    // process role + 1, as in the units the agent cuts; its calls are not
    // numbered per unit (epoch 0), so only actions for every call of a
    // function, and group counts, reach it.
    // SAFETY: a read of a map value.
    Ok(unsafe { AID_ROLES.get(tid) }.map(|r| (*r + 1, 0)))
}

/// Live-unit mode: whether an action may act on a thread of `role` now.
/// On the unit's own thread, always; on another thread, only while a unit
/// is in flight.
#[inline(always)]
fn acts_now(role: u32) -> bool {
    if role == 0 || AID_LIVE_UNIT.get(0).copied().unwrap_or(0) == 0 {
        return true;
    }
    // SAFETY: a read of a map value.
    unsafe { AID_RUNNING.get(UNITS_IN_FLIGHT) }.is_some_and(|n| (*n as i64) > 0)
}

/// The thread's call stack of `func`, restarted when the unit epoch moved.
#[inline(always)]
fn stack(tid: u32, func: u32, epoch: u32, create: bool) -> Result<*mut CallStack, ProbeErrorKind> {
    let key = CallKey { tid, func };
    if create && AID_CALLS.get_ptr_mut(key).is_none() {
        AID_CALLS.insert(key, CallStack::default(), 0).map_err(|_| ProbeErrorKind::MapFull)?;
    }
    let stack = AID_CALLS.get_ptr_mut(key).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: a map value pointer; only this thread touches its own
    // (tid, func) entry.
    unsafe {
        if (*stack).epoch != epoch {
            *stack = CallStack { epoch, ..CallStack::default() };
        }
    }
    Ok(stack)
}

/// Whether a call of `func` is running on the thread.
#[inline(always)]
fn running(tid: u32, func: u32) -> bool {
    // SAFETY: a read of a map value.
    unsafe { AID_CALLS.get(CallKey { tid, func }) }.is_some_and(|s| s.depth > 0)
}

/// The action for a site: its own, else its function's on its role for
/// every instance; only if its calling context holds.
#[inline(always)]
fn lookup(tid: u32, site: &SiteKey) -> Option<Action> {
    // SAFETY: reads of map values, copied out at once.
    let action = unsafe {
        match AID_ACTIONS.get(site) {
            Some(a) => *a,
            None => match AID_ACTIONS.get(SiteKey { instance: ANY_INSTANCE, ..*site }) {
                Some(a) => *a,
                None => {
                    let every = SiteKey { role: EVERY_ROLE, instance: ANY_INSTANCE, ..*site };
                    *AID_ACTIONS.get(every)?
                }
            },
        }
    };
    if action.within != 0 && !running(tid, action.within - 1) {
        return None;
    }
    Some(action)
}

/// Noise at a call's own key (a delay, or a priority change) hides the
/// action for every call of its function there from [`lookup`]: when that
/// is an intervention's wait on a group (a serialisation, or the wait for
/// lock takers), the agent goes on to it after the noise, if it is due
/// then, so that an intervened run keeps the noise the others have
/// (`Action::default()`: none).
#[inline(always)]
fn hold_after_noise(tid: u32, site: &SiteKey, noise: &Action) -> Action {
    if !noise.kind.is_noise_kind() {
        return Action::default();
    }
    let every_call = SiteKey { instance: ANY_INSTANCE, ..*site };
    // SAFETY: a read of a map value, copied out at once.
    match unsafe { AID_ACTIONS.get(every_call) }.copied() {
        Some(a) if a.kind.waits_after_noise() && (a.within == 0 || running(tid, a.within - 1)) => a,
        _ => Action::default(),
    }
}

/// An entry of a call of an intervened run, before its time is taken and
/// its event emitted.
pub struct Entered {
    tid: u32,
    site: SiteKey,
    /// Where the call is counted in a serialised group, if it is.
    own: Option<RunningKey>,
}

/// An entry, before its time is taken: numbers the instance and counts it
/// in its serialised group. Counted first, the call is running for every
/// other thread before its entry's time: a lock call on another CPU that
/// saw the group idle (so was not held) has a time before this entry's,
/// never one inside the call, as it would if the count came after.
#[inline(always)]
pub fn count_entry(
    pid_tgid: u64,
    func: u32,
    regs: &pt_regs,
) -> Result<Option<Entered>, ProbeErrorKind> {
    let tid = pid_tgid as u32;
    let Some((role, epoch)) = identify(tid, func, SitePoint::ENTRY)? else { return Ok(None) };
    let stack = stack(tid, func, epoch, true)?;
    // SAFETY: a map value pointer of this thread's own entry.
    let instance = unsafe {
        let stack = &mut *stack;
        stack.count += 1;
        let slot = (stack.depth as usize) % CALL_STACK_DEPTH;
        stack.open[slot] = stack.count;
        stack.depth += 1;
        stack.count
    };
    let site = SiteKey { func, role, instance, point: SitePoint::ENTRY };
    let own = count_group_entry(tid, func, role, regs)?;
    Ok(Some(Entered { tid, site, own }))
}

/// An entry counted by [`count_entry`], after its event was emitted at
/// `ts`: marks it as happened (as held, when it stops), stops the thread
/// when its action is due, and keeps its registers when its exit may
/// re-execute it.
#[inline(always)]
pub fn try_enter(ts: u64, entered: Entered, ip: u64, regs: &pt_regs) -> Result<(), ProbeErrorKind> {
    let Entered { tid, site, own } = entered;
    let (func, instance) = (site.func, site.instance);
    if !acts_now(site.role) {
        mark(&site, ts);
        return Ok(());
    }
    // A call that stops for the agent begins when the agent lets it go
    // (a held entry has not started): marked as held, the time is the
    // agent's to set.
    match lookup(tid, &site) {
        Some(action) if due_at_entry(tid, &action, regs, own)? => {
            mark(&site, ts | HELD_MARK);
            announce_wait(&action);
            let then = hold_after_noise(tid, &site, &action);
            stop_with(tid, action, site, ip, ts, Some(regs), then)?;
        }
        _ => mark(&site, ts),
    }
    let exit = SiteKey { point: SitePoint::EXIT, ..site };
    if let Some(action) = lookup(tid, &exit)
        && action.kind == ActionKind::REEXECUTE
    {
        save_entry(tid, func, instance, ip, regs)?;
    }
    Ok(())
}

/// An exit. Emits its event with `emit` unless the call is re-executed
/// (then its first return never happened, as far as the record goes),
/// marks it (as held, when it stops), and stops the thread when its action
/// is due.
#[inline(always)]
pub fn try_exit(
    ts: u64,
    pid_tgid: u64,
    func: u32,
    rax: u64,
    emit: impl FnOnce(),
) -> Result<(), ProbeErrorKind> {
    let tid = pid_tgid as u32;
    let Some((role, epoch)) = identify(tid, func, SitePoint::EXIT)? else {
        emit();
        return Ok(());
    };
    let stack = stack(tid, func, epoch, false);
    let Ok(stack) = stack else {
        emit();
        return Ok(()); // exit of a call entered before tracing began
    };
    // SAFETY: a map value pointer of this thread's own entry.
    let (depth, instance) = unsafe {
        let s = &*stack;
        (s.depth, s.open[(s.depth.wrapping_sub(1) as usize) % CALL_STACK_DEPTH])
    };
    if depth == 0 {
        emit();
        return Ok(());
    }
    let site = SiteKey { func, role, instance, point: SitePoint::EXIT };
    let mut action = if acts_now(role) { lookup(tid, &site) } else { None };
    if let Some(a) = action
        && a.kind == ActionKind::REEXECUTE
    {
        action = None;
        if a.test.passes(rax, a.test_value) {
            if reexecute(tid, func, instance, &a, site, ts)? {
                return Ok(());
            }
            action = Some(if a.test.contains(RetTest::FALLBACK) {
                Action { kind: ActionKind::OVERRIDE_RETURN, test: RetTest::ALWAYS, ..a }
            } else {
                Action { kind: ActionKind::REEXECUTE_EXHAUSTED, ..a }
            });
        }
        let _ = AID_ENTRY_REGS.remove(CallKey { tid, func });
    }
    // SAFETY: as above.
    unsafe { (*stack).depth -= 1 };
    let unit = AID_LIVE_UNIT.get(0).copied().unwrap_or(0);
    if unit != 0 && func + 1 == unit {
        leave_unit(tid);
    }
    emit();
    count_group_exit(tid, func);
    // As at an entry: a return held by the agent happens when released.
    match action {
        Some(action) if due_at_exit(&action, rax) => {
            mark(&site, ts | HELD_MARK);
            announce_wait(&action);
            stop_for_agent(tid, action, site, 0, ts, None)?;
        }
        _ => mark(&site, ts),
    }
    Ok(())
}

/// A thread about to be held until a site happens: the thread reaching
/// that site will stop for the agent too
/// ([`ActionKind::RELEASE_WAITERS`], where no action is), so that the
/// agent lets this one go at once, before that thread goes on. Put there
/// before this thread stops: a site reached after the hold was decided
/// finds it. Not where an action for every call of the site's function
/// is (the call's own would hide it from the probe).
#[inline(always)]
fn announce_wait(action: &Action) {
    let site = match action.kind {
        ActionKind::HOLD_UNTIL => action.other,
        ActionKind::HOLD_WHILE_RUNNING => SiteKey { point: SitePoint::EXIT, ..action.other },
        _ => return,
    };
    // An action for every call there (a group's serialisation, noise for
    // every thread) would be hidden by one for this call: that one's stop
    // is left to the agent's look.
    let any = SiteKey { instance: ANY_INSTANCE, ..site };
    let every = SiteKey { role: EVERY_ROLE, ..any };
    // SAFETY: reads of map values.
    if unsafe { AID_ACTIONS.get(any).is_some() || AID_ACTIONS.get(every).is_some() } {
        return;
    }
    let release = Action { kind: ActionKind::RELEASE_WAITERS, ..Action::default() };
    let _ = AID_ACTIONS.insert(site, release, NOEXIST);
}

#[inline(always)]
fn mark(site: &SiteKey, ts: u64) {
    if let Some(seen) = AID_STAMPS.get_ptr_mut(site) {
        // SAFETY: a store into a map value.
        unsafe { *seen = ts };
    }
}

/// Whether an entry action applies now; `own` is where this call is
/// counted in a serialised group, if it is.
#[inline(always)]
fn due_at_entry(
    tid: u32,
    action: &Action,
    regs: &pt_regs,
    own: Option<RunningKey>,
) -> Result<bool, ProbeErrorKind> {
    Ok(match action.kind {
        ActionKind::DELAY
        | ActionKind::YIELD
        | ActionKind::RETURN_EARLY
        | ActionKind::RELEASE_WAITERS => true,
        ActionKind::HOLD_UNTIL => awaited(&action.other),
        ActionKind::HOLD_WHILE_RUNNING => {
            let exit = SiteKey { point: SitePoint::EXIT, ..action.other };
            !entered_first(action.value)? && awaited(&exit)
        }
        ActionKind::HOLD_WHILE_GROUP_RUNNING => {
            let key = awaited_group(action, regs);
            // This call does not wait for itself.
            let mine = u64::from(own.is_some_and(|k| k == key));
            // SAFETY: a read of a map value.
            unsafe { AID_RUNNING.get(key) }.is_some_and(|n| *n > mine)
        }
        ActionKind::HOLD_WHILE_LOCKERS => {
            let key = lockers(action.other.func);
            let member = OpenMember { tid, func: LOCKER_MEMBER };
            // SAFETY: reads of map values, copied out at once.
            let mine = unsafe { AID_OPEN_MEMBER.get(member) }.copied().is_some_and(|k| k == key);
            // SAFETY: as above.
            unsafe { AID_RUNNING.get(key) }.is_some_and(|n| *n > u64::from(mine))
        }
        _ => false,
    })
}

/// Whether this call is the first of its serialised pair to enter: the
/// first inserts the pair's key, the second finds it there. The map takes
/// the two inserts one after the other, so exactly one call is second even
/// when both probes run at the same moment on two CPUs.
#[inline(always)]
fn entered_first(pair: u64) -> Result<bool, ProbeErrorKind> {
    match AID_RUNNING.insert(serialized_pair(pair), 1, NOEXIST) {
        Ok(()) => Ok(true),
        Err(e) if e == -EEXIST => Ok(false),
        Err(_) => Err(ProbeErrorKind::MapFull),
    }
}

/// The running-calls key a group hold waits on: the group in
/// `other.func`, on this call's argument `other.instance` (1-based) when
/// `other.role` says objects matter.
#[inline(always)]
fn awaited_group(action: &Action, regs: &pt_regs) -> RunningKey {
    let object = if action.other.role != 0 { argument(regs, action.other.instance) } else { 0 };
    RunningKey { group: action.other.func, _pad: 0, object }
}

/// Argument `position` (1-based, the first three) of a probed call. Each
/// register is read at its fixed offset in the context: left to itself,
/// the compiler may turn the match into one load at a computed offset,
/// which the verifier refuses for a probe's context.
#[inline(always)]
fn argument(regs: &pt_regs, position: u32) -> u64 {
    // SAFETY: reads of fields of the probed thread's saved registers,
    // valid for the whole program run (see `regs` in main.rs).
    let (rdi, rsi, rdx) = unsafe {
        (
            core::ptr::read_volatile(&regs.rdi),
            core::ptr::read_volatile(&regs.rsi),
            core::ptr::read_volatile(&regs.rdx),
        )
    };
    match position {
        1 => rdi,
        2 => rsi,
        3 => rdx,
        _ => 0,
    }
}

/// Whether an exit action applies to this return value.
#[inline(always)]
fn due_at_exit(action: &Action, rax: u64) -> bool {
    match action.kind {
        ActionKind::DELAY | ActionKind::OVERRIDE_RETURN => {
            action.test.passes(rax, action.test_value)
        }
        ActionKind::REEXECUTE_EXHAUSTED | ActionKind::RELEASE_WAITERS => true,
        ActionKind::HOLD_UNTIL => awaited(&action.other),
        _ => false,
    }
}

/// Counts an entering call in its serialised group, if it belongs to
/// one; returns the key it is counted under.
#[inline(always)]
fn count_group_entry(
    tid: u32,
    func: u32,
    role: u32,
    regs: &pt_regs,
) -> Result<Option<RunningKey>, ProbeErrorKind> {
    // SAFETY: a read of a map value, copied out at once.
    let Some(slot) = (unsafe { AID_GROUPS.get(GroupMember { func, role }) }).copied() else {
        return Ok(None);
    };
    if slot.within != 0 && !running(tid, slot.within - 1) {
        return Ok(None);
    }
    let key = RunningKey { group: slot.group, _pad: 0, object: argument(regs, slot.arg) };
    add(&key, 1)?;
    AID_OPEN_MEMBER
        .insert(OpenMember { tid, func }, key, 0)
        .map_err(|_| ProbeErrorKind::MapFull)?;
    Ok(Some(key))
}

#[inline(always)]
fn count_group_exit(tid: u32, func: u32) {
    let member = OpenMember { tid, func };
    // SAFETY: a read of a map value, copied out at once.
    if let Some(key) = (unsafe { AID_OPEN_MEMBER.get(member) }).copied() {
        let _ = AID_OPEN_MEMBER.remove(member);
        let _ = add(&key, u64::MAX); // -1, wrapping
    }
}

/// Adds `n` (wrapping) to a running count, atomically: several threads
/// enter and leave a group at once.
#[inline(always)]
fn add(key: &RunningKey, n: u64) -> Result<(), ProbeErrorKind> {
    if AID_RUNNING.get_ptr_mut(key).is_none() {
        // Another thread may create it first; then add to that one.
        let _ = AID_RUNNING.insert(key, 0, NOEXIST);
    }
    let count = AID_RUNNING.get_ptr_mut(key).ok_or(ProbeErrorKind::MapFull)?;
    // SAFETY: a map value pointer, updated atomically (BPF_XADD: the
    // result is not used; core's atomic types have no 64-bit read-modify-
    // write on this target, the instruction set's XADD is all there is).
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            count, n,
        )
    };
    Ok(())
}

/// Keeps the registers of a call's entry for a later re-execution (built
/// in the per-CPU scratch slot: they do not fit the stack).
#[inline(always)]
fn save_entry(
    tid: u32,
    func: u32,
    instance: u32,
    ip: u64,
    regs: &pt_regs,
) -> Result<(), ProbeErrorKind> {
    let scratch = AID_REG_SCRATCH.get_ptr_mut(0).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: the per-CPU scratch slot, fully written before it is read.
    let saved = unsafe { &mut *scratch };
    saved.instance = instance;
    saved.tries = 0;
    saved.ip = ip;
    fill_regs(&mut saved.regs, regs);
    let saved: &EntryRegs = saved;
    AID_ENTRY_REGS.insert(CallKey { tid, func }, saved, 0).map_err(|_| ProbeErrorKind::MapFull)
}

/// Asks the agent to run the call again from its entry, if its entry
/// registers are kept and retries are left; false when it gave up.
#[inline(always)]
fn reexecute(
    tid: u32,
    func: u32,
    instance: u32,
    action: &Action,
    site: SiteKey,
    ts: u64,
) -> Result<bool, ProbeErrorKind> {
    let Some(saved) = AID_ENTRY_REGS.get_ptr_mut(CallKey { tid, func }) else {
        return Ok(false);
    };
    // SAFETY: a map value pointer; only this thread touches its entry.
    let saved = unsafe { &mut *saved };
    if saved.instance != instance || saved.tries >= action.retries {
        return Ok(false);
    }
    saved.tries += 1;
    let scratch = AID_SCRATCH.get_ptr_mut(0).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: the per-CPU scratch slot, fully written before it is read.
    let pending = unsafe { &mut *scratch };
    // The agent backs off longer before each retry: it reads which one
    // this is from `retries`.
    pending.action = Action { retries: saved.tries, ..*action };
    pending.site = site;
    pending.func_ip = saved.ip;
    pending.ts_ns = ts;
    pending.regs = saved.regs;
    signal(tid, pending)?;
    Ok(true)
}

/// Leaves the agent a record of what is wanted (built in the per-CPU
/// scratch slot: it does not fit the stack) and signals the thread, which
/// stops for the agent, its tracer.
#[inline(always)]
pub fn stop_for_agent(
    tid: u32,
    action: Action,
    site: SiteKey,
    ip: u64,
    ts: u64,
    regs: Option<&pt_regs>,
) -> Result<(), ProbeErrorKind> {
    stop_with(tid, action, site, ip, ts, regs, Action::default())
}

/// [`stop_for_agent`] for noise at a lock call, with the action an
/// intervention holds that lock call with, for after the noise.
#[inline(always)]
pub fn stop_for_noise_then(
    tid: u32,
    action: Action,
    site: SiteKey,
    regs: &pt_regs,
    ts: u64,
    then: Action,
) -> Result<(), ProbeErrorKind> {
    stop_with(tid, action, site, regs.rip, ts, Some(regs), then)
}

/// The one body of [`stop_for_agent`] and [`stop_for_noise_then`]: the
/// record, with `then` for after the stop (none: `Action::default()`).
#[inline(always)]
fn stop_with(
    tid: u32,
    action: Action,
    site: SiteKey,
    ip: u64,
    ts: u64,
    regs: Option<&pt_regs>,
    then: Action,
) -> Result<(), ProbeErrorKind> {
    let scratch = AID_SCRATCH.get_ptr_mut(0).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: the per-CPU scratch slot; no other program runs on this CPU
    // while this one does, and it is fully written before it is read.
    let pending = unsafe { &mut *scratch };
    pending.action = action;
    pending.site = site;
    pending.func_ip = ip;
    pending.ts_ns = ts;
    match regs {
        Some(r) => fill_regs(&mut pending.regs, r),
        None => pending.regs = [0; PT_REGS_WORDS],
    }
    pending.then = then;
    signal(tid, pending)
}

#[inline(always)]
fn signal(tid: u32, pending: &Pending) -> Result<(), ProbeErrorKind> {
    // By reference, from the scratch slot: a copy would not fit the stack.
    AID_PENDING.insert(tid, pending, 0).map_err(|_| ProbeErrorKind::MapFull)?;
    // SAFETY: signals only the current thread; the agent is its tracer and
    // suppresses the signal at the resulting stop.
    let rc = unsafe { bpf_send_signal_thread(global(&AID_STOP_SIGNAL)) };
    if rc < 0 { Err(ProbeErrorKind::SendSignal) } else { Ok(()) }
}

/// The registers at an entry breakpoint, in `struct pt_regs` order.
#[inline(always)]
fn fill_regs(out: &mut [u64; PT_REGS_WORDS], r: &pt_regs) {
    *out = [
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss,
    ];
}

/// Live-unit mode: the epoch of the unit `tid` is running, entering a new
/// one at the unit function's outermost entry; None outside any unit.
#[inline(always)]
fn unit_epoch(tid: u32, is_unit: bool, point: SitePoint) -> Result<Option<u32>, ProbeErrorKind> {
    if is_unit && point == SitePoint::ENTRY {
        if AID_UNIT_STATE.get_ptr_mut(tid).is_none() {
            AID_UNIT_STATE
                .insert(tid, UnitState::default(), 0)
                .map_err(|_| ProbeErrorKind::MapFull)?;
        }
        let state = AID_UNIT_STATE.get_ptr_mut(tid).ok_or(ProbeErrorKind::MapLookup)?;
        // SAFETY: a map value pointer; only this thread touches its entry.
        let first = unsafe {
            let first = (*state).depth == 0;
            if first {
                (*state).epoch += 1;
            }
            (*state).depth += 1;
            first
        };
        if first {
            add(&UNITS_IN_FLIGHT, 1)?;
        }
    }
    // SAFETY: a read of a map value.
    match unsafe { AID_UNIT_STATE.get(tid) } {
        Some(s) if s.depth > 0 => Ok(Some(s.epoch)),
        _ => Ok(None),
    }
}

#[inline(always)]
fn leave_unit(tid: u32) {
    if let Some(state) = AID_UNIT_STATE.get_ptr_mut(tid) {
        // SAFETY: a map value pointer; only this thread touches its entry.
        let last = unsafe {
            let open = (*state).depth > 0;
            if open {
                (*state).depth -= 1;
            }
            open && (*state).depth == 0
        };
        if last {
            let _ = add(&UNITS_IN_FLIGHT, u64::MAX); // -1, wrapping
        }
    }
}

/// Whether a stamped site is still to come: not reached, or reached by a
/// thread the agent holds there.
#[inline(always)]
fn awaited(site: &SiteKey) -> bool {
    // SAFETY: a read of a map value, copied out at once.
    unsafe { AID_STAMPS.get(site) }.copied().is_some_and(|t| t == 0 || t & HELD_MARK != 0)
}

/// Whether a lock the thread is about to take must wait
/// ([`ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`]): it is inside a call of
/// the action's function, and a call of the awaited group runs on another
/// thread (this thread's own call of the group, if it is inside one, does
/// not count).
#[inline(always)]
pub fn lock_hold_due(tid: u32, action: &Action) -> bool {
    if !lock_hold_applies(tid, action) {
        return false;
    }
    let key = RunningKey { group: action.other.func, _pad: 0, object: 0 };
    let member = OpenMember { tid, func: action.value as u32 };
    // SAFETY: reads of map values, copied out at once.
    let mine = unsafe { AID_OPEN_MEMBER.get(member) }.copied().is_some_and(|k| k == key);
    // SAFETY: as above.
    unsafe { AID_RUNNING.get(key) }.is_some_and(|n| *n > u64::from(mine))
}

/// A lock call the hold `action` applies to, before its check: the
/// thread counts among the [`lockers`] of the awaited group until its next
/// release or condition wait ([`leave_lockers`]), so that a call of the
/// group entering after the check waits for the lock to be let go
/// ([`ActionKind::HOLD_WHILE_LOCKERS`]). Counted first, the thread is
/// either seen by that call or sees it running: the two counts are
/// atomic adds, each before the other side's read. A thread already
/// counted (a lock inside a lock) is not counted twice.
#[inline(always)]
pub fn enter_lockers(tid: u32, action: &Action) -> Result<(), ProbeErrorKind> {
    let member = OpenMember { tid, func: LOCKER_MEMBER };
    // SAFETY: a read of a map value.
    if unsafe { AID_OPEN_MEMBER.get(member) }.is_some() {
        return Ok(());
    }
    let key = lockers(action.other.func);
    add(&key, 1)?;
    AID_OPEN_MEMBER.insert(member, key, 0).map_err(|_| ProbeErrorKind::MapFull)
}

/// A release or condition wait ([`ActionKind::LOCKERS_RELEASE`]): the
/// thread no longer counts among the lockers it was counted in.
#[inline(always)]
pub fn leave_lockers(tid: u32) {
    let member = OpenMember { tid, func: LOCKER_MEMBER };
    // SAFETY: a read of a map value, copied out at once.
    if let Some(key) = (unsafe { AID_OPEN_MEMBER.get(member) }).copied() {
        let _ = AID_OPEN_MEMBER.remove(member);
        let _ = add(&key, u64::MAX); // -1, wrapping
    }
}

/// Whether a lock hold acts at this thread's lock call at all: the thread
/// is inside a call of the held function.
#[inline(always)]
pub fn lock_hold_applies(tid: u32, action: &Action) -> bool {
    action.kind == ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING
        && (action.within == 0 || running(tid, action.within - 1))
}
