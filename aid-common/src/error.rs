//! Why a probe body failed. The eBPF programs never panic: their fallible
//! bodies return one of these, and the entry point counts it in the error
//! map (one per-CPU slot per kind), which the agent reads after each run.

/// A kind of probe failure; its discriminant is its slot in the error map.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeErrorKind {
    /// A map refused an insertion (it is full).
    MapFull = 0,
    /// A map value that was just inserted could not be found.
    MapLookup = 1,
    /// A new thread found no role left in the role pool.
    NoRoleLeft = 2,
    /// A tracepoint field could not be read.
    TracepointRead = 3,
    /// `bpf_send_signal_thread` refused to stop the thread.
    SendSignal = 4,
}

impl ProbeErrorKind {
    /// Number of kinds (the error map's size).
    pub const COUNT: u32 = 5;

    /// Every kind, in slot order.
    pub const ALL: [ProbeErrorKind; Self::COUNT as usize] = [
        ProbeErrorKind::MapFull,
        ProbeErrorKind::MapLookup,
        ProbeErrorKind::NoRoleLeft,
        ProbeErrorKind::TracepointRead,
        ProbeErrorKind::SendSignal,
    ];

    /// What went wrong, for the agent's warnings.
    pub const fn describe(self) -> &'static str {
        match self {
            ProbeErrorKind::MapFull => "a kernel map was full",
            ProbeErrorKind::MapLookup => "a kernel map lost a value",
            ProbeErrorKind::NoRoleLeft => "a new thread found no role left",
            ProbeErrorKind::TracepointRead => "a tracepoint field could not be read",
            ProbeErrorKind::SendSignal => "a thread could not be stopped for an intervention",
        }
    }
}
// Each kind sits at the slot its discriminant names.
const _: () = {
    let mut i = 0;
    while i < ProbeErrorKind::ALL.len() {
        assert!(ProbeErrorKind::ALL[i] as usize == i);
        i += 1;
    }
};
