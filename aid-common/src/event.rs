//! What the probes report: one fixed-size [`Event`] per function entry or
//! exit, thread creation or exit, and exec, through the ring buffer; and
//! the slots in which they count what they could not report.

/// What an [`Event`] records. A newtype rather than an enum: it arrives
/// as bytes from the kernel, and every bit pattern must be a valid value.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventKind(u32);

impl EventKind {
    /// A traced function was entered.
    pub const ENTRY: EventKind = EventKind(0);
    /// A traced function returned.
    pub const EXIT: EventKind = EventKind(1);
    /// A thread of a traced process created a thread. `tid` is the creator,
    /// `func` the new thread's tid, `args[0]` the role the kernel assigned
    /// to it, `args[1]` the clone flags.
    pub const THREAD: EventKind = EventKind(2);
    /// A traced process completed an `execve`; events of that process
    /// before this one belong to the agent's forked child, not to the
    /// target, and mark time zero of the run.
    pub const EXEC: EventKind = EventKind(3);
    /// A thread of the target exited. `args[0..2]` hold its name (`comm`,
    /// 16 bytes, NUL-padded), final by then: runtimes that name threads
    /// (Rust's `thread::Builder::name`) do it after the start routine.
    pub const THREAD_EXIT: EventKind = EventKind(4);
    /// A thread of the target created a child process (fork, vfork, or
    /// clone without `CLONE_THREAD`). `func` is the child's pid, `args[1]`
    /// the clone flags. The child is not traced.
    pub const CHILD: EventKind = EventKind(5);
    /// A traced call ended without returning: a C++ exception (or a Rust
    /// panic) unwound through it. `func` is its function; `ts_ns` is when
    /// a handler caught the exception (the entry of `__cxa_begin_catch`),
    /// one event per frame below the handler, deepest first.
    /// Only in a target that throws, whose frames with return probes the
    /// probes keep on a shadow stack ([`crate::ShadowStack`]).
    pub const UNWOUND: EventKind = EventKind(6);

    /// Entries and exits, returns or unwinds (the calls themselves), as
    /// opposed to thread and exec records.
    pub const fn is_call(self) -> bool {
        self.0 == Self::ENTRY.0 || self.0 == Self::EXIT.0 || self.0 == Self::UNWOUND.0
    }

    /// The slot a dropped event of this kind is counted in.
    pub const fn lost_slot(self) -> LostSlot {
        if self.is_call() { LostSlot::Calls } else { LostSlot::ThreadRecords }
    }
}

impl core::fmt::Debug for EventKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            EventKind::ENTRY => f.write_str("Entry"),
            EventKind::EXIT => f.write_str("Exit"),
            EventKind::THREAD => f.write_str("Thread"),
            EventKind::EXEC => f.write_str("Exec"),
            EventKind::THREAD_EXIT => f.write_str("ThreadExit"),
            EventKind::CHILD => f.write_str("Child"),
            EventKind::UNWOUND => f.write_str("Unwound"),
            EventKind(other) => write!(f, "EventKind({other})"),
        }
    }
}

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
    /// table. For [`EventKind::THREAD`], the new thread's tid.
    pub func: u32,
    pub kind: EventKind,
    /// Entry: the first three integer arguments (`rdi`, `rsi`, `rdx`).
    pub args: [u64; 3],
    /// Exit: the return value (`rax`). Entry: the function's runtime
    /// address, from which the agent learns where each module is loaded.
    pub ret: u64,
    /// Entry of a function with a [`PointeeSpec`]: the bytes its argument
    /// points to, as read at entry (a string up to its NUL, or the first
    /// bytes of a small record). Zero elsewhere.
    pub pointee: [u8; POINTEE_BYTES],
    /// How many bytes of `pointee` were read; 0 when none were (no spec,
    /// or the argument pointed nowhere readable).
    pub pointee_len: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<Event>() == 80);

/// Bytes an entry probe reads from what an argument points to.
pub const POINTEE_BYTES: usize = 16;

/// What the entry probe of one function reads from memory an argument
/// points to (the map `AID_POINTEE`, keyed by function id): the agent
/// chooses it from DWARF (a pointer to characters, or to a small record
/// of scalar members), so two calls can be compared by content, not only
/// by address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PointeeSpec {
    /// Which integer argument register (0 = `rdi`, 1 = `rsi`, 2 = `rdx`).
    pub arg: u8,
    /// 1: read a NUL-terminated string; 0: read `len` bytes.
    pub text: u8,
    /// Bytes to read, 1 to [`POINTEE_BYTES`].
    pub len: u8,
    pub _pad: [u8; 5],
}
const _: () = assert!(size_of::<PointeeSpec>() == 8);

/// Slots of the lost-event counter map: events dropped because the ring
/// buffer was full, counted apart so the agent knows whether calls or the
/// thread bookkeeping are incomplete.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostSlot {
    /// Function entries and exits.
    Calls = 0,
    /// Thread creation, thread exit and exec records.
    ThreadRecords = 1,
}

impl LostSlot {
    /// Number of slots (the map's size).
    pub const COUNT: u32 = 2;
}
