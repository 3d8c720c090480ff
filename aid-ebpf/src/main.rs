//! The kernel half of aid: records function entries and exits of a traced
//! process into a ring buffer, tracks thread creation so every thread gets
//! a stable role, and — for intervened runs only — numbers call instances
//! and stops a thread for the agent when an intervention is due.
//!
//! The probes are attached once per session and fire for every process
//! running the traced code; the target map says which processes are
//! recorded, and whether a run is intervened on (only then are instances
//! numbered and the action map consulted, so observation runs pay for one
//! map lookup).
#![no_std]
#![no_main]

use aid_common::{
    ACTION_DELAY, ACTION_HOLD_UNTIL, ACTION_HOLD_WHILE_RUNNING, ACTION_OVERRIDE_RETURN,
    ACTION_RETURN_EARLY, Action, CALL_STACK_DEPTH, CallKey, CallStack, Event, KIND_ENTRY,
    KIND_EXEC, KIND_EXIT, KIND_THREAD, KIND_THREAD_EXIT, POINT_ENTRY, POINT_EXIT, PT_REGS_WORDS,
    Pending, Replay, SiteKey, TARGET_INTERVENE, TARGET_LIVE, TargetState, UnitState,
};
use aya_ebpf::{
    EbpfContext,
    bindings::pt_regs,
    helpers::{
        bpf_get_attach_cookie, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns,
        bpf_send_signal_thread,
    },
    macros::{map, tracepoint, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray, Queue, RingBuf},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
};

/// Signal used to stop a thread for the agent; patched by the loader.
#[unsafe(no_mangle)]
static STOP_SIGNAL: u32 = 23; // SIGURG

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(64 * 1024 * 1024, 0);
#[map]
/// [0]: entry/exit events dropped; [1]: thread and exec records dropped.
static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);
#[map]
static ERRORS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
#[map]
static TARGET: Array<TargetState> = Array::with_max_entries(1, 0);
#[map]
static ROLE_POOL: Queue<u32> = Queue::with_max_entries(2048, 0);
#[map]
static ROLES: HashMap<u32, u32> = HashMap::with_max_entries(16384, 0);
#[map]
static CALLS: HashMap<CallKey, CallStack> = HashMap::with_max_entries(65536, 0);
#[map]
static ACTIONS: HashMap<SiteKey, Action> = HashMap::with_max_entries(4096, 0);
#[map]
static WATCH: HashMap<SiteKey, u64> = HashMap::with_max_entries(4096, 0);
#[map]
static PENDING: HashMap<u32, Pending> = HashMap::with_max_entries(16384, 0);
#[map]
static LIVE_UNIT: Array<u32> = Array::with_max_entries(1, 0);
#[map]
static REPLAY: HashMap<u32, Replay> = HashMap::with_max_entries(16384, 0);
#[map]
static UNIT_STATE: HashMap<u32, UnitState> = HashMap::with_max_entries(16384, 0);

const CLONE_THREAD: u64 = 0x0001_0000;
/// Submit without waking the reader: it drains on a timer, and a wake-up
/// from inside the probe would delay the traced thread.
const BPF_RB_NO_WAKEUP: u64 = 1;
/// Offsets in the `task/task_newtask` tracepoint record (see its `format`).
const NEWTASK_PID: usize = 8;
const NEWTASK_CLONE_FLAGS: usize = 32;

fn bump(counter: &PerCpuArray<u64>) {
    bump_at(counter, 0);
}

fn bump_at(counter: &PerCpuArray<u64>, index: u32) {
    if let Some(n) = counter.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU.
        unsafe { *n += 1 };
    }
}

#[inline(always)]
fn emit(ts_ns: u64, pid_tgid: u64, func: u32, kind: u32, args: [u64; 3], ret: u64) {
    match EVENTS.reserve::<Event>(0) {
        Some(mut slot) => {
            slot.write(Event {
                ts_ns,
                pid: (pid_tgid >> 32) as u32,
                tid: pid_tgid as u32,
                func,
                kind,
                args,
                ret,
            });
            slot.submit(BPF_RB_NO_WAKEUP);
        }
        None => bump_at(&LOST, if kind == KIND_ENTRY || kind == KIND_EXIT { 0 } else { 1 }),
    }
}

#[inline(always)]
fn cookie(ctx: &impl EbpfContext) -> u32 {
    // SAFETY: the helper only reads the cookie of the running program.
    unsafe { bpf_get_attach_cookie(ctx.as_ptr()) as u32 }
}

#[inline(always)]
fn entry_args(ctx: &ProbeContext) -> [u64; 3] {
    [ctx.arg::<u64>(0).unwrap_or(0), ctx.arg::<u64>(1).unwrap_or(0), ctx.arg::<u64>(2).unwrap_or(0)]
}

#[inline(always)]
fn entry_ip(ctx: &ProbeContext) -> u64 {
    // SAFETY: the context of a uprobe is the probed thread's saved registers.
    unsafe { (*(ctx.as_ptr() as *const pt_regs)).rip }
}

/// The flags of the current process if it is a live target.
#[inline(always)]
fn target(pid_tgid: u64) -> Option<u64> {
    let tgid = (pid_tgid >> 32) as u32;
    match TARGET.get(0) {
        Some(t) if t.tgid == tgid && t.flags & TARGET_LIVE != 0 => Some(t.flags),
        _ => None,
    }
}

#[uprobe]
pub fn enter_fn(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(flags) = target(pid_tgid) else { return 0 };
    let func = cookie(&ctx);
    let ip = entry_ip(&ctx);
    if flags & TARGET_INTERVENE != 0 && replayed_entry(pid_tgid as u32, ip) {
        return 0;
    }
    let ts = unsafe { bpf_ktime_get_ns() };
    emit(ts, pid_tgid, func, KIND_ENTRY, entry_args(&ctx), ip);
    if flags & TARGET_INTERVENE != 0
        && try_intervene(ts, pid_tgid, func, POINT_ENTRY, ip, regs_of(&ctx)).is_err()
    {
        bump(&ERRORS);
    }
    0
}

#[uretprobe]
pub fn exit_fn(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(flags) = target(pid_tgid) else { return 0 };
    let func = cookie(&ctx);
    if flags & TARGET_INTERVENE != 0 {
        // SAFETY: the context of a uretprobe is the thread's registers.
        let sp = unsafe { (*(ctx.as_ptr() as *const pt_regs)).rsp };
        if replayed_exit(pid_tgid as u32, func, sp) {
            return 0;
        }
    }
    let ts = unsafe { bpf_ktime_get_ns() };
    emit(ts, pid_tgid, func, KIND_EXIT, [0; 3], ctx.ret::<u64>());
    if flags & TARGET_INTERVENE != 0
        && try_intervene(ts, pid_tgid, func, POINT_EXIT, 0, [0; PT_REGS_WORDS]).is_err()
    {
        bump(&ERRORS);
    }
    0
}

/// The registers at an entry breakpoint, in `struct pt_regs` order.
#[inline(always)]
fn regs_of(ctx: &ProbeContext) -> [u64; PT_REGS_WORDS] {
    // SAFETY: the context of a uprobe is the probed thread's saved registers.
    let r = unsafe { &*(ctx.as_ptr() as *const pt_regs) };
    [
        r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx, r.rdx,
        r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss,
    ]
}

/// The same call entered again after the agent rewound the thread: ignore.
#[inline(always)]
fn replayed_entry(tid: u32, ip: u64) -> bool {
    match REPLAY.get_ptr_mut(tid) {
        // SAFETY: only this thread touches its own entry.
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
fn replayed_exit(tid: u32, func: u32, sp: u64) -> bool {
    match unsafe { REPLAY.get(tid) } {
        Some(r) if r.entry_pending == 0 && r.func == func && r.exit_sp == sp => {
            let _ = REPLAY.remove(tid);
            true
        }
        _ => false,
    }
}

/// Numbers the instance this entry/exit belongs to, marks it as happened if
/// someone waits for it, and stops the thread when its action is due.
#[inline(always)]
fn try_intervene(
    ts: u64,
    pid_tgid: u64,
    func: u32,
    point: u32,
    ip: u64,
    regs: [u64; PT_REGS_WORDS],
) -> Result<(), i64> {
    let tid = pid_tgid as u32;
    let unit = LIVE_UNIT.get(0).copied().unwrap_or(0);
    let (role, epoch) = if unit == 0 {
        match unsafe { ROLES.get(tid) } {
            Some(r) => (*r, 0),
            None => return Ok(()),
        }
    } else {
        // Live-unit mode: only the thread running the unit is intervened
        // on, as role 0, with instances counted from the unit's entry.
        match unit_role(tid, func + 1 == unit, point)? {
            Some(epoch) => (0, epoch),
            None => return Ok(()),
        }
    };
    let key = CallKey { tid, func };
    if point == POINT_ENTRY && CALLS.get_ptr_mut(key).is_none() {
        CALLS.insert(key, CallStack::default(), 0)?;
    }
    let stack = CALLS.get_ptr_mut(key).ok_or(-1i64)?;
    // SAFETY: only this thread touches its own (tid, func) entry.
    let instance = unsafe {
        let stack = &mut *stack;
        if stack.epoch != epoch {
            *stack = CallStack { epoch, ..CallStack::default() };
        }
        if point == POINT_ENTRY {
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
    if unit != 0 && func + 1 == unit && point == POINT_EXIT {
        leave_unit(tid);
    }
    let site = SiteKey { func, role, instance, point };
    if let Some(seen) = WATCH.get_ptr_mut(site) {
        // SAFETY: plain store into a map value.
        unsafe { *seen = ts };
    }
    let Some(action) = (unsafe { ACTIONS.get(site) }).copied() else {
        return Ok(());
    };
    let due = match action.kind {
        ACTION_DELAY | ACTION_RETURN_EARLY | ACTION_OVERRIDE_RETURN => true,
        ACTION_HOLD_UNTIL => happened(&action.other) == Some(0),
        ACTION_HOLD_WHILE_RUNNING => {
            let exit = SiteKey { point: POINT_EXIT, ..action.other };
            happened(&action.other).is_some_and(|t| t != 0) && happened(&exit) == Some(0)
        }
        _ => false,
    };
    if !due {
        return Ok(());
    }
    PENDING.insert(tid, Pending { action, site, func_ip: ip, ts_ns: ts, regs }, 0)?;
    // SAFETY: signals only the current thread; the agent is its tracer and
    // suppresses the signal at the resulting stop.
    let signal = unsafe { core::ptr::read_volatile(&STOP_SIGNAL) };
    let rc = unsafe { bpf_send_signal_thread(signal) };
    if rc < 0 { Err(rc) } else { Ok(()) }
}

/// Live-unit mode: the epoch of the unit `tid` is running, entering a new
/// one at the unit function's outermost entry; None outside any unit.
#[inline(always)]
fn unit_role(tid: u32, is_unit: bool, point: u32) -> Result<Option<u32>, i64> {
    if is_unit && point == POINT_ENTRY {
        if UNIT_STATE.get_ptr_mut(tid).is_none() {
            UNIT_STATE.insert(tid, UnitState::default(), 0)?;
        }
        let state = UNIT_STATE.get_ptr_mut(tid).ok_or(-1i64)?;
        // SAFETY: only this thread touches its own entry.
        unsafe {
            if (*state).depth == 0 {
                (*state).epoch += 1;
            }
            (*state).depth += 1;
        }
    }
    match unsafe { UNIT_STATE.get(tid) } {
        Some(s) if s.depth > 0 => Ok(Some(s.epoch)),
        _ => Ok(None),
    }
}

#[inline(always)]
fn leave_unit(tid: u32) {
    if let Some(state) = UNIT_STATE.get_ptr_mut(tid) {
        // SAFETY: only this thread touches its own entry.
        unsafe {
            if (*state).depth > 0 {
                (*state).depth -= 1;
            }
        }
    }
}

#[inline(always)]
fn happened(site: &SiteKey) -> Option<u64> {
    // SAFETY: plain read of a map value.
    unsafe { WATCH.get(site) }.copied()
}

/// A new task was created by a task of a traced process: give threads the
/// next role of their process and report the creation.
#[tracepoint(category = "task", name = "task_newtask")]
pub fn thread_new(ctx: TracePointContext) -> u32 {
    if try_thread_new(&ctx).is_err() {
        bump(&ERRORS);
    }
    0
}

fn try_thread_new(ctx: &TracePointContext) -> Result<(), i64> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !TARGET.get(0).is_some_and(|t| t.tgid == tgid) {
        return Ok(());
    }
    // SAFETY: offsets come from the tracepoint's stable format.
    let child: i32 = unsafe { ctx.read_at(NEWTASK_PID) }?;
    let flags: u64 = unsafe { ctx.read_at(NEWTASK_CLONE_FLAGS) }?;
    if flags & CLONE_THREAD == 0 {
        return Ok(()); // a child process, not one of our threads
    }
    // Roles are handed out in creation order from a queue the agent fills
    // with 1, 2, 3, ...: popping is atomic, and the BPF ISA v1 we build for
    // has no fetch-add.
    let role = ROLE_POOL.pop().map_err(i64::from)?.ok_or(-1i64)?;
    ROLES.insert(child as u32, role, 0)?;
    let ts = unsafe { bpf_ktime_get_ns() };
    emit(ts, pid_tgid, child as u32, KIND_THREAD, [u64::from(role), flags, 0], 0);
    Ok(())
}

/// Empty programs: the floor that `cargo xtask bench tracing` compares the
/// recorders against (the cost of the uprobe mechanism itself).
#[uprobe]
pub fn enter_empty(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn exit_empty(_ctx: RetProbeContext) -> u32 {
    0
}

/// A traced process replaced its image: time zero of the run.
#[tracepoint(category = "sched", name = "sched_process_exec")]
pub fn exec_seen(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if let Some(state) = TARGET.get_ptr_mut(0)
        && unsafe { (*state).tgid } == tgid
    {
        // SAFETY: plain store into a map value.
        unsafe { (*state).flags |= TARGET_LIVE };
        let ts = unsafe { bpf_ktime_get_ns() };
        emit(ts, pid_tgid, 0, KIND_EXEC, [0; 3], 0);
    }
    0
}

/// A thread of the target exits: report its final name.
#[tracepoint(category = "sched", name = "sched_process_exit")]
pub fn thread_exit(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if target(pid_tgid).is_none() {
        return 0;
    }
    let Ok(comm) = bpf_get_current_comm() else { return 0 };
    let mut words = [0u64; 3];
    words[0] = u64::from_le_bytes([
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]);
    words[1] = u64::from_le_bytes([
        comm[8], comm[9], comm[10], comm[11], comm[12], comm[13], comm[14], comm[15],
    ]);
    let ts = unsafe { bpf_ktime_get_ns() };
    emit(ts, pid_tgid, 0, KIND_THREAD_EXIT, words, 0);
    0
}

/// Loaded once at start-up to learn whether this kernel lets uprobe
/// programs write registers (then return overrides need no thread stop).
/// Never attached.
#[uretprobe]
pub fn probe_reg_write(ctx: RetProbeContext) -> u32 {
    // SAFETY: deliberately writes the context; the verifier decides.
    unsafe { (*(ctx.as_ptr() as *mut pt_regs)).rax = 0 };
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
