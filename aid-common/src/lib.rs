//! Types that cross the kernel/user boundary: the event record the eBPF
//! programs write to the ring buffer, the intervention map's keys and
//! actions, and the names of maps and globals.
//!
//! Everything here is `#[repr(C)]`, `Copy`, built from fixed-width fields
//! with no implicit padding, and checked by a `const` size assertion, so the
//! eBPF object and the agent agree on layout without a shared compiler.
#![no_std]

/// Name of the ring buffer that carries [`Event`]s.
pub const MAP_EVENTS: &str = "EVENTS";
/// Per-CPU count of events dropped because the ring buffer was full.
pub const MAP_LOST: &str = "LOST";
/// Per-CPU count of probe bodies that failed (a map update refused, ...).
pub const MAP_ERRORS: &str = "ERRORS";
/// Array of one [`TargetState`]: the process being traced (an agent traces
/// one target at a time; a one-slot array keeps the per-event check to a
/// compare).
pub const MAP_TARGET: &str = "TARGET";
/// Queue of role numbers (1, 2, ...) the agent fills before a run; each new
/// thread of the target pops the next one.
pub const MAP_ROLE_POOL: &str = "ROLE_POOL";
/// `tid -> role`: the stable thread role of every traced thread.
pub const MAP_ROLES: &str = "ROLES";
/// `(tid, function) -> CallStack`: instance numbering in the kernel.
pub const MAP_CALLS: &str = "CALLS";
/// `SiteKey -> Action`: what to do when a given instance is reached.
pub const MAP_ACTIONS: &str = "ACTIONS";
/// `SiteKey -> timestamp`: sites whose occurrence somebody waits for, and
/// when they happened (0 = not yet).
pub const MAP_WATCH: &str = "WATCH";
/// `tid -> Pending`: the action a stopped thread wants from the agent.
pub const MAP_PENDING: &str = "PENDING";

/// Global patched by the loader: the signal used to stop a thread for the
/// agent (`bpf_send_signal_thread`).
pub const GLOBAL_STOP_SIGNAL: &str = "STOP_SIGNAL";

/// [`Event::kind`]: a traced function was entered.
pub const KIND_ENTRY: u32 = 0;
/// [`Event::kind`]: a traced function returned.
pub const KIND_EXIT: u32 = 1;
/// [`Event::kind`]: a thread of a traced process created a thread.
/// `tid` is the creator, `func` the new thread's tid, `args[0]` the role the
/// kernel assigned to it, `args[1]` the clone flags.
pub const KIND_THREAD: u32 = 2;
/// [`Event::kind`]: a traced process completed an `execve`; events of that
/// process before this one belong to the agent's forked child, not to the
/// target, and mark time zero of the run.
pub const KIND_EXEC: u32 = 3;
/// [`Event::kind`]: a thread of the target exited. `args[0..2]` hold its
/// name (`comm`, 16 bytes, NUL-padded), final by then: runtimes that name
/// threads (Rust's `thread::Builder::name`) do it after the start routine.
pub const KIND_THREAD_EXIT: u32 = 4;

/// One entry or exit of a traced function, or one thread creation.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// `CLOCK_MONOTONIC` nanoseconds (`bpf_ktime_get_ns`).
    pub ts_ns: u64,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Function id: the attach cookie, an index into the session's function
    /// table. For [`KIND_THREAD`], the new thread's tid.
    pub func: u32,
    /// [`KIND_ENTRY`], [`KIND_EXIT`] or [`KIND_THREAD`].
    pub kind: u32,
    /// Entry: the first three integer arguments (`rdi`, `rsi`, `rdx`).
    pub args: [u64; 3],
    /// Exit: the return value (`rax`). Entry: the function's runtime
    /// address, from which the agent learns where each module is loaded.
    pub ret: u64,
}
const _: () = assert!(size_of::<Event>() == 56);

/// [`TargetState::flags`]: running the target's image (after its exec, or
/// attached while running). Before that the process is the agent's forked
/// child, and its calls are not recorded.
pub const TARGET_LIVE: u64 = 1;
/// [`TargetState::flags`]: this run is intervened on: number instances and
/// consult the action map.
pub const TARGET_INTERVENE: u64 = 2;

/// The target process, as the kernel side sees it. Probes fire for every
/// process running the traced code; only the target is recorded.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetState {
    /// Process id (tgid); 0 when there is no target.
    pub tgid: u32,
    pub _pad: u32,
    /// [`TARGET_LIVE`] | [`TARGET_INTERVENE`].
    pub flags: u64,
}
const _: () = assert!(size_of::<TargetState>() == 16);

/// Key of [`MAP_CALLS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub tid: u32,
    pub func: u32,
}
const _: () = assert!(size_of::<CallKey>() == 8);

/// Maximum recursion depth for which the kernel tracks which instance an
/// exit belongs to. Deeper frames share a slot (documented limitation).
pub const CALL_STACK_DEPTH: usize = 16;

/// Value of [`MAP_CALLS`]: how many times a thread entered a function, and
/// the instance numbers of the frames still open.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStack {
    pub count: u32,
    pub depth: u32,
    /// Live-unit mode: the unit epoch the count belongs to; a new unit on
    /// the thread restarts the count.
    pub epoch: u32,
    pub _pad: u32,
    pub open: [u32; CALL_STACK_DEPTH],
}
const _: () = assert!(size_of::<CallStack>() == 16 + 4 * CALL_STACK_DEPTH);

/// Array of one `u32`: in live-unit mode, the unit function's id + 1 (0
/// otherwise). Interventions then only act inside a unit, on the thread
/// running it (role 0), with instances counted from the unit's entry.
pub const MAP_LIVE_UNIT: &str = "LIVE_UNIT";
/// `tid -> UnitState`: live-unit mode bookkeeping.
pub const MAP_UNIT_STATE: &str = "UNIT_STATE";

/// Value of [`MAP_UNIT_STATE`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitState {
    /// Incremented at each outermost entry of the unit function.
    pub epoch: u32,
    /// Nesting depth of the unit function on this thread.
    pub depth: u32,
}
const _: () = assert!(size_of::<UnitState>() == 8);

/// [`SiteKey::point`]: at function entry.
pub const POINT_ENTRY: u32 = 0;
/// [`SiteKey::point`]: at function exit.
pub const POINT_EXIT: u32 = 1;

/// One point in an execution: the entry or exit of the `instance`-th call
/// (1-based) of `func` on thread `role`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey {
    pub func: u32,
    pub role: u32,
    pub instance: u32,
    pub point: u32,
}
const _: () = assert!(size_of::<SiteKey>() == 16);

/// [`Action::kind`]: stop the thread and hold it for `value` microseconds.
pub const ACTION_DELAY: u32 = 1;
/// [`Action::kind`]: stop the thread and hold it until `other` has happened
/// (or `timeout_us` passed). Only stops when `other` has not happened yet.
pub const ACTION_HOLD_UNTIL: u32 = 2;
/// [`Action::kind`]: hold the thread while the call named by `other` (its
/// entry site) is in progress, until that call's exit (serialisation).
/// Only stops when `other` has been entered and has not exited.
pub const ACTION_HOLD_WHILE_RUNNING: u32 = 3;
/// [`Action::kind`]: at entry, return `value` immediately without running
/// the function.
pub const ACTION_RETURN_EARLY: u32 = 4;
/// [`Action::kind`]: at exit, replace the return value with `value`.
pub const ACTION_OVERRIDE_RETURN: u32 = 5;

/// Value of [`MAP_ACTIONS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub kind: u32,
    pub _pad: u32,
    /// Delay in microseconds, or the value to return.
    pub value: u64,
    /// Longest hold, in microseconds.
    pub timeout_us: u64,
    /// The site waited for by the hold kinds.
    pub other: SiteKey,
}
const _: () = assert!(size_of::<Action>() == 40);

/// Number of general registers in x86-64 `struct pt_regs` (r15 .. ss).
pub const PT_REGS_WORDS: usize = 21;

/// Value of [`MAP_PENDING`]: written by a probe just before it signals its
/// own thread, read by the agent at the resulting signal stop.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub action: Action,
    /// Where the thread stopped.
    pub site: SiteKey,
    /// Entry address of the function (user virtual address), to locate the
    /// frame for a premature return.
    pub func_ip: u64,
    pub ts_ns: u64,
    /// Entry only: the registers at the breakpoint, before the probed first
    /// instruction ran (the kernel runs it before the signal stops the
    /// thread), in `struct pt_regs` order. Lets the agent rewind the thread
    /// to the function's first instruction.
    pub regs: [u64; PT_REGS_WORDS],
}
const _: () = assert!(size_of::<Pending>() == 40 + 16 + 16 + 8 * PT_REGS_WORDS);

impl Default for Pending {
    fn default() -> Self {
        Pending {
            action: Action::default(),
            site: SiteKey::default(),
            func_ip: 0,
            ts_ns: 0,
            regs: [0; PT_REGS_WORDS],
        }
    }
}

/// `tid -> Replay`: a thread the agent rewound to the first instruction of
/// a function. Its next entry probe hit there is the same call again and is
/// ignored; the kernel then reports that call's return twice (the frame's
/// return address was already redirected), and the first of the two is
/// ignored too.
pub const MAP_REPLAY: &str = "REPLAY";

/// Value of [`MAP_REPLAY`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// Address of the function's first instruction.
    pub ip: u64,
    /// Stack pointer right after the call returns (entry rsp + 8): where
    /// the duplicate return is reported, unlike a recursive inner call's.
    pub exit_sp: u64,
    pub func: u32,
    /// 1 until the repeated entry has been seen.
    pub entry_pending: u32,
}
const _: () = assert!(size_of::<Replay>() == 24);

#[cfg(feature = "user")]
mod user {
    // SAFETY: this and each type below is `repr(C)`, `Copy`, made of
    // integers, with no padding (its size is asserted above), so any bit
    // pattern is a valid value.
    unsafe impl aya::Pod for super::Event {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TargetState {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::CallKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::CallStack {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SiteKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Action {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Pending {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::UnitState {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Replay {}
}
