//! Hardware watchpoints (perf breakpoint events with a BPF program): what
//! the program reports for each access to a watched address, and the
//! delay the agent may ask for right after one (failure amplification).
//!
//! x86 has no read-only data breakpoint, so the agent opens two per
//! address on every thread of the target: one that fires on writes and
//! one on reads or writes. A write fires both within the same debug
//! exception; a read fires the second alone. Each program reports which
//! one it is, and the agent pairs them.

/// [`WatchHit::kind`]: which of an address' two breakpoints fired.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HitKind(u32);

impl HitKind {
    /// The read-or-write breakpoint: a read, or one half of a write.
    pub const READ_WRITE: HitKind = HitKind(0);
    /// The write breakpoint.
    pub const WRITE: HitKind = HitKind(1);
}

impl core::fmt::Debug for HitKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            HitKind::READ_WRITE => f.write_str("ReadWrite"),
            HitKind::WRITE => f.write_str("Write"),
            HitKind(other) => write!(f, "HitKind({other})"),
        }
    }
}

/// One breakpoint hit: a thread of the target touched a watched address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchHit {
    /// `CLOCK_MONOTONIC` nanoseconds (`bpf_ktime_get_ns`), the clock of
    /// [`crate::Event`].
    pub ts_ns: u64,
    /// The watched address (the breakpoint's, not the byte touched).
    pub addr: u64,
    /// The instruction after the access (data breakpoints trap after it).
    pub ip: u64,
    pub tid: u32,
    pub kind: HitKind,
}
const _: () = assert!(size_of::<WatchHit>() == 32);

/// [`WatchConfig::delay_on`]: after which accesses a thread is delayed.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DelayOn(u32);

impl DelayOn {
    /// Never (only record).
    pub const NEVER: DelayOn = DelayOn(0);
    /// After each write.
    pub const WRITES: DelayOn = DelayOn(1);
    /// After each read or write.
    pub const ANY: DelayOn = DelayOn(2);
}

impl core::fmt::Debug for DelayOn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            DelayOn::NEVER => f.write_str("Never"),
            DelayOn::WRITES => f.write_str("Writes"),
            DelayOn::ANY => f.write_str("Any"),
            DelayOn(other) => write!(f, "DelayOn({other})"),
        }
    }
}

/// Value of the watch configuration map (one slot), written by the agent
/// before a run. A delay stops the thread for the agent, which holds it
/// like any other delay intervention (the thread must be traced).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchConfig {
    pub delay_us: u64,
    pub delay_on: DelayOn,
    /// Delays left in this run; the program counts it down (not
    /// atomically: two threads touching at the same instant may both take
    /// the last one).
    pub delays_left: u32,
}
const _: () = assert!(size_of::<WatchConfig>() == 16);

/// The function id of the site a watchpoint delay reports to the agent
/// (no traced function has it), with the point `EXIT`: the agent then
/// holds the thread where it is, without rewinding it.
pub const WATCH_DELAY_FUNC: u32 = u32::MAX;

/// The function id of the events "watched object `role` is armed" (the
/// site `(WATCH_ARMED_FUNC, object, 0, ENTRY)`): no probe reaches them;
/// the agent marks one happened once it has armed that object, which lets
/// go of the thread held at the object's arming site. No traced function
/// has the id, nor does any other site the agent or the kernel use.
pub const WATCH_ARMED_FUNC: u32 = u32::MAX - 1;
