//! Intervened runs only: numbering call instances per thread role, marking
//! watched sites as happened, and stopping a thread for the agent when the
//! action installed at its site is due.

use aid_common::{
    Action, ActionKind, CALL_STACK_DEPTH, CallKey, CallStack, PT_REGS_WORDS, Pending,
    ProbeErrorKind, SiteKey, SitePoint, UnitState,
};
use aya_ebpf::{bindings::pt_regs, helpers::bpf_send_signal_thread};

use crate::maps::{
    AID_ACTIONS, AID_CALLS, AID_LIVE_UNIT, AID_PENDING, AID_REPLAY, AID_ROLES, AID_SCRATCH,
    AID_STOP_SIGNAL, AID_UNIT_STATE, AID_WATCH, global,
};

/// The same call entered again after the agent rewound the thread: ignore.
#[inline(always)]
pub fn replayed_entry(tid: u32, ip: u64) -> bool {
    match AID_REPLAY.get_ptr_mut(tid) {
        // SAFETY: a map value pointer; only this thread touches its entry.
        Some(r) => unsafe {
            if (*r).entry_pending != 0 && (*r).ip == ip {
                (*r).entry_pending = 0;
                true
            } else {
                false
            }
        },
        None => false,
    }
}

/// The first of the two returns the kernel reports for a rewound call.
#[inline(always)]
pub fn replayed_exit(tid: u32, func: u32, sp: u64) -> bool {
    // SAFETY: a read of a map value; only this thread writes its entry.
    match unsafe { AID_REPLAY.get(tid) } {
        Some(r) if r.entry_pending == 0 && r.func == func && r.exit_sp == sp => {
            let _ = AID_REPLAY.remove(tid);
            true
        }
        _ => false,
    }
}

/// Numbers the instance this entry/exit belongs to, marks it as happened if
/// someone waits for it, and stops the thread when its action is due.
/// `regs` are the entry breakpoint's registers (None at exit).
#[inline(always)]
pub fn try_intervene(
    ts: u64,
    pid_tgid: u64,
    func: u32,
    point: SitePoint,
    ip: u64,
    regs: Option<&pt_regs>,
) -> Result<(), ProbeErrorKind> {
    let tid = pid_tgid as u32;
    let unit = AID_LIVE_UNIT.get(0).copied().unwrap_or(0);
    let (role, epoch) = if unit == 0 {
        // SAFETY: a read of a map value.
        match unsafe { AID_ROLES.get(tid) } {
            Some(r) => (*r, 0),
            None => return Ok(()),
        }
    } else {
        // Live-unit mode: only the thread running the unit is intervened
        // on, as role 0, with instances counted from the unit's entry.
        match unit_epoch(tid, func + 1 == unit, point)? {
            Some(epoch) => (0, epoch),
            None => return Ok(()),
        }
    };
    let key = CallKey { tid, func };
    if point == SitePoint::ENTRY && AID_CALLS.get_ptr_mut(key).is_none() {
        AID_CALLS.insert(key, CallStack::default(), 0).map_err(|_| ProbeErrorKind::MapFull)?;
    }
    let stack = AID_CALLS.get_ptr_mut(key).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: a map value pointer; only this thread touches its own
    // (tid, func) entry.
    let instance = unsafe {
        let stack = &mut *stack;
        if stack.epoch != epoch {
            *stack = CallStack { epoch, ..CallStack::default() };
        }
        if point == SitePoint::ENTRY {
            stack.count += 1;
            let slot = (stack.depth as usize) % CALL_STACK_DEPTH;
            stack.open[slot] = stack.count;
            stack.depth += 1;
            stack.count
        } else {
            if stack.depth == 0 {
                return Ok(()); // exit of a call entered before tracing began
            }
            stack.depth -= 1;
            stack.open[(stack.depth as usize) % CALL_STACK_DEPTH]
        }
    };
    if unit != 0 && func + 1 == unit && point == SitePoint::EXIT {
        leave_unit(tid);
    }
    let site = SiteKey { func, role, instance, point };
    if let Some(seen) = AID_WATCH.get_ptr_mut(site) {
        // SAFETY: a store into a map value.
        unsafe { *seen = ts };
    }
    // SAFETY: a read of a map value, copied out at once.
    let Some(action) = (unsafe { AID_ACTIONS.get(site) }).copied() else {
        return Ok(());
    };
    if !due(&action) {
        return Ok(());
    }
    stop_for_agent(tid, action, site, ip, ts, regs)
}

/// Whether the action at a site applies now.
#[inline(always)]
fn due(action: &Action) -> bool {
    match action.kind {
        ActionKind::DELAY
        | ActionKind::YIELD
        | ActionKind::RETURN_EARLY
        | ActionKind::OVERRIDE_RETURN => true,
        ActionKind::HOLD_UNTIL => happened(&action.other) == Some(0),
        ActionKind::HOLD_WHILE_RUNNING => {
            let exit = SiteKey { point: SitePoint::EXIT, ..action.other };
            happened(&action.other).is_some_and(|t| t != 0) && happened(&exit) == Some(0)
        }
        _ => false,
    }
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
    // By reference, from the scratch slot: a copy would not fit the stack.
    let record: &Pending = pending;
    AID_PENDING.insert(tid, record, 0).map_err(|_| ProbeErrorKind::MapFull)?;
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
        unsafe {
            if (*state).depth == 0 {
                (*state).epoch += 1;
            }
            (*state).depth += 1;
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
        unsafe {
            if (*state).depth > 0 {
                (*state).depth -= 1;
            }
        }
    }
}

#[inline(always)]
fn happened(site: &SiteKey) -> Option<u64> {
    // SAFETY: a read of a map value, copied out at once.
    unsafe { AID_WATCH.get(site) }.copied()
}
