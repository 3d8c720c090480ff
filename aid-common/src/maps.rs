//! Names of the eBPF object's maps and of the globals the loader patches.
//! The eBPF statics carry exactly these names (a test loads the object
//! and looks each one up), prefixed `AID_` so they are recognisable in
//! `bpftool map` output next to other tools' maps.

/// Ring buffer carrying [`crate::Event`]s.
pub const MAP_EVENTS: &str = "AID_EVENTS";
/// Per-CPU count of events dropped because the ring buffer was full, one
/// slot per [`crate::LostSlot`].
pub const MAP_LOST: &str = "AID_LOST";
/// Per-CPU count of probe bodies that failed, one slot per
/// [`crate::ProbeErrorKind`].
pub const MAP_ERRORS: &str = "AID_ERRORS";
/// Array of one [`crate::TargetState`]: the process being traced (an agent
/// traces one target at a time; a one-slot array keeps the per-event check
/// to a compare).
pub const MAP_TARGET: &str = "AID_TARGET";
/// Queue of role numbers (1, 2, ...) the agent fills before a run; each new
/// thread of the target pops the next one.
pub const MAP_ROLE_POOL: &str = "AID_ROLE_POOL";
/// `tid -> role`: the stable thread role of every traced thread.
pub const MAP_ROLES: &str = "AID_ROLES";
/// `(tid, function) -> CallStack`: instance numbering in the kernel.
pub const MAP_CALLS: &str = "AID_CALLS";
/// `SiteKey -> Action`: what to do when a given instance is reached.
pub const MAP_ACTIONS: &str = "AID_ACTIONS";
/// `SiteKey -> timestamp`: sites whose occurrence somebody waits for, and
/// when they happened (0 = not yet).
pub const MAP_STAMPS: &str = "AID_STAMPS";
/// `tid -> Pending`: the action a stopped thread wants from the agent.
pub const MAP_PENDING: &str = "AID_PENDING";
/// Array of one `u32`: in live-unit mode, the unit function's id + 1 (0
/// otherwise). Interventions then only act inside a unit, on the thread
/// running it (role 0), with instances counted from the unit's entry.
pub const MAP_LIVE_UNIT: &str = "AID_LIVE_UNIT";
/// `tid -> UnitState`: live-unit mode bookkeeping.
pub const MAP_UNIT_STATE: &str = "AID_UNIT_STATE";
/// `tid -> Replay`: a thread the agent rewound to the first instruction of
/// a function. Its next entry probe hit there is the same call again and is
/// ignored; the kernel then reports that call's return twice (the frame's
/// return address was already redirected), and the first of the two is
/// ignored too.
pub const MAP_REPLAY: &str = "AID_REPLAY";
/// Per-CPU array of one [`crate::Pending`]: where a probe builds the record
/// it hands to the agent, which is too large for the 512-byte BPF stack.
pub const MAP_SCRATCH: &str = "AID_SCRATCH";
/// Ring buffer carrying [`crate::WatchHit`]s (hardware watchpoints).
pub const MAP_WATCH_HITS: &str = "AID_WATCH_HITS";
/// Per-CPU count of watchpoint hits dropped because that buffer was full.
pub const MAP_WATCH_LOST: &str = "AID_WATCH_LOST";
/// Array of one [`crate::WatchConfig`].
pub const MAP_WATCH_CONFIG: &str = "AID_WATCH_CONF";
/// `(tid, function) -> EntryRegs`: the entry registers of a running call
/// whose exit may re-execute it.
pub const MAP_ENTRY_REGS: &str = "AID_ENTRY_REGS";
/// Per-CPU array of one [`crate::EntryRegs`], built there before it is
/// stored (too large for the BPF stack).
pub const MAP_REGS_SCRATCH: &str = "AID_REG_SCRATCH";
/// `GroupMember -> GroupSlot`: the (function, role) pairs whose calls are
/// counted for group serialisation.
pub const MAP_GROUPS: &str = "AID_GROUPS";
/// `RunningKey -> count`: calls of a group running now, per object.
pub const MAP_RUNNING: &str = "AID_RUNNING";
/// `OpenMember -> RunningKey`: where a running group call is counted.
pub const MAP_OPEN_MEMBERS: &str = "AID_OPEN_MEMBER";
/// `tid -> count`: synchronisation points each thread of an intervened run
/// has entered (noise at sync points is keyed by that count); the agent
/// reads it when the run is over.
pub const MAP_SYNC_STEPS: &str = "AID_SYNC_STEPS";
/// `function -> PointeeSpec`: the functions whose entry probe reads what
/// an argument points to, and how.
pub const MAP_POINTEE: &str = "AID_POINTEE";
/// Per-CPU array of one `u32`: 1 while an entry probe reads an
/// argument's pointee. A hardware watchpoint on that memory fires for the
/// probe's own read, in the kernel; the watch programs skip such hits, or
/// aid would see (and delay) an access the program never made.
pub const MAP_READING: &str = "AID_READING";
/// `tid -> ShadowStack`: the frames with pending return probes of each
/// thread of a target that throws (`TargetFlags::REPAIR_UNWIND`).
pub const MAP_SHADOW: &str = "AID_SHADOW";
/// Per-CPU array of one [`crate::ShadowStack`], the empty stack a thread's
/// first push inserts (too large for the BPF stack).
pub const MAP_SHADOW_SCRATCH: &str = "AID_SHADOW_NEW";

/// Every map of the eBPF object.
pub const ALL_MAPS: &[&str] = &[
    MAP_EVENTS,
    MAP_LOST,
    MAP_ERRORS,
    MAP_TARGET,
    MAP_ROLE_POOL,
    MAP_ROLES,
    MAP_CALLS,
    MAP_ACTIONS,
    MAP_STAMPS,
    MAP_PENDING,
    MAP_LIVE_UNIT,
    MAP_UNIT_STATE,
    MAP_REPLAY,
    MAP_SCRATCH,
    MAP_WATCH_HITS,
    MAP_WATCH_LOST,
    MAP_WATCH_CONFIG,
    MAP_ENTRY_REGS,
    MAP_REGS_SCRATCH,
    MAP_GROUPS,
    MAP_RUNNING,
    MAP_OPEN_MEMBERS,
    MAP_SYNC_STEPS,
    MAP_POINTEE,
    MAP_READING,
    MAP_SHADOW,
    MAP_SHADOW_SCRATCH,
];

/// Global (`u32`): the signal used to stop a thread for the agent
/// (`bpf_send_signal_thread`).
pub const GLOBAL_STOP_SIGNAL: &str = "AID_STOP_SIGNAL";
/// Global (`u32`): byte offset of `pid` in the kernel's `struct
/// task_struct`, read from the kernel's BTF at load time (the thread
/// tracker reads a new task's id through the raw tracepoint's pointer).
pub const GLOBAL_TASK_PID: &str = "AID_TASK_PID";
