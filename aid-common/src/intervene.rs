//! Interventions as the kernel sees them: sites (the entry or exit of the
//! k-th call of a function on a thread role), the action wanted there,
//! the record a probe leaves for the agent when it stops a thread, and the
//! per-thread bookkeeping that numbers calls.

/// [`SiteKey::point`]: entry or exit. A newtype: it is part of map keys
/// written by one side and read by the other.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SitePoint(u32);

impl SitePoint {
    /// At function entry.
    pub const ENTRY: SitePoint = SitePoint(0);
    /// At function exit.
    pub const EXIT: SitePoint = SitePoint(1);
}

impl core::fmt::Debug for SitePoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SitePoint::ENTRY => f.write_str("Entry"),
            SitePoint::EXIT => f.write_str("Exit"),
            SitePoint(other) => write!(f, "SitePoint({other})"),
        }
    }
}

/// One point in an execution: the entry or exit of the `instance`-th call
/// (1-based) of `func` on thread `role`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey {
    pub func: u32,
    pub role: u32,
    pub instance: u32,
    pub point: SitePoint,
}
const _: () = assert!(size_of::<SiteKey>() == 16);

/// [`Action::kind`]: what the agent wants done at a site. A newtype: the
/// agent writes it into a map and reads it back from [`Pending`].
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ActionKind(u32);

impl ActionKind {
    /// No action (an empty map slot).
    pub const NONE: ActionKind = ActionKind(0);
    /// Stop the thread and hold it for `value` microseconds.
    pub const DELAY: ActionKind = ActionKind(1);
    /// Stop the thread and hold it until `other` has happened (or
    /// `timeout_us` passed). Only stops when `other` has not happened yet.
    pub const HOLD_UNTIL: ActionKind = ActionKind(2);
    /// Hold the thread while the call named by `other` (its entry site) is
    /// in progress, until that call's exit (serialisation). Only stops when
    /// `other` has been entered and has not exited.
    pub const HOLD_WHILE_RUNNING: ActionKind = ActionKind(3);
    /// At entry, return `value` immediately without running the function.
    pub const RETURN_EARLY: ActionKind = ActionKind(4);
    /// At exit, replace the return value with `value`.
    pub const OVERRIDE_RETURN: ActionKind = ActionKind(5);
    /// Hold the thread until no other thread of the process can run (each
    /// is blocked, sleeping, stopped or gone), or `timeout_us` passed;
    /// among several, the highest `value` resumes first (a PCT priority
    /// change point, failure amplification).
    pub const YIELD: ActionKind = ActionKind(6);

    /// Holds the thread (as opposed to editing its registers).
    pub const fn is_hold(self) -> bool {
        self.0 == Self::DELAY.0
            || self.0 == Self::HOLD_UNTIL.0
            || self.0 == Self::HOLD_WHILE_RUNNING.0
            || self.0 == Self::YIELD.0
    }
}

impl core::fmt::Debug for ActionKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ActionKind::NONE => f.write_str("None"),
            ActionKind::DELAY => f.write_str("Delay"),
            ActionKind::HOLD_UNTIL => f.write_str("HoldUntil"),
            ActionKind::HOLD_WHILE_RUNNING => f.write_str("HoldWhileRunning"),
            ActionKind::RETURN_EARLY => f.write_str("ReturnEarly"),
            ActionKind::OVERRIDE_RETURN => f.write_str("OverrideReturn"),
            ActionKind::YIELD => f.write_str("Yield"),
            ActionKind(other) => write!(f, "ActionKind({other})"),
        }
    }
}

/// Value of the action map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub kind: ActionKind,
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

/// Value of the pending map: written by a probe just before it signals its
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

/// Value of the replay map.
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

/// Key of the calls map.
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

/// Value of the calls map: how many times a thread entered a function, and
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

/// Value of the unit-state map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitState {
    /// Incremented at each outermost entry of the unit function.
    pub epoch: u32,
    /// Nesting depth of the unit function on this thread.
    pub depth: u32,
}
const _: () = assert!(size_of::<UnitState>() == 8);
