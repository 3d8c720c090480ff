//! The process being traced, as the kernel side sees it.

/// [`TargetState::flags`]: a set of bits. A newtype: the agent writes it
/// and the probes read it as raw map bytes.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TargetFlags(u64);

impl TargetFlags {
    pub const NONE: TargetFlags = TargetFlags(0);
    /// Running the target's image (after its exec, or attached while
    /// running). Before that the process is the agent's forked child, and
    /// its calls are not recorded.
    pub const LIVE: TargetFlags = TargetFlags(1);
    /// This run is intervened on: number instances and consult the action
    /// map.
    pub const INTERVENE: TargetFlags = TargetFlags(2);
    /// The synchronisation points are attached and record their events
    /// (and count each thread's) in this run even without interventions:
    /// an observation run whose lock events the analysis reads.
    pub const SYNC_EVENTS: TargetFlags = TargetFlags(4);
    /// The target throws: keep each thread's shadow stack of return
    /// slots, and stop a thread that starts to unwind through them so the
    /// agent repairs them (`crate::ShadowStack`). The agent is then the
    /// ptrace tracer of every thread, in every run.
    pub const REPAIR_UNWIND: TargetFlags = TargetFlags(8);

    pub const fn contains(self, other: TargetFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn with(self, other: TargetFlags) -> TargetFlags {
        TargetFlags(self.0 | other.0)
    }

    pub const fn without(self, other: TargetFlags) -> TargetFlags {
        TargetFlags(self.0 & !other.0)
    }
}

impl core::fmt::Debug for TargetFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let live = if self.contains(TargetFlags::LIVE) { "LIVE" } else { "-" };
        let intervene = if self.contains(TargetFlags::INTERVENE) { "INTERVENE" } else { "-" };
        let sync = if self.contains(TargetFlags::SYNC_EVENTS) { "SYNC_EVENTS" } else { "-" };
        let repair = if self.contains(TargetFlags::REPAIR_UNWIND) { "REPAIR_UNWIND" } else { "-" };
        write!(f, "TargetFlags({live}|{intervene}|{sync}|{repair})")
    }
}

/// The target process. The probes only record it (and, with per-run
/// scoped probes, only fire in it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetState {
    /// Process id (tgid); 0 when there is no target.
    pub tgid: u32,
    pub _pad: u32,
    pub flags: TargetFlags,
}
const _: () = assert!(size_of::<TargetState>() == 16);
