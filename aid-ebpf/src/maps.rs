//! Every map of the object and the globals the loader patches. Each
//! static's name is the map's name in the object (`aid_common::MAP_*`).

use aid_common::{
    Action, CallKey, CallStack, EntryRegs, GroupMember, GroupSlot, LostSlot, OpenMember, Pending,
    PointeeSpec, ProbeErrorKind, Replay, RunningKey, ShadowStack, SiteKey, TargetState, UnitState,
};
use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, Queue, RingBuf},
};

/// Signal used to stop a thread for the agent; patched by the loader.
#[unsafe(no_mangle)]
pub static AID_STOP_SIGNAL: u32 = 23; // SIGURG

/// Offset of `pid` in `struct task_struct`; patched by the loader from
/// the kernel's BTF (0 if it was not).
#[unsafe(no_mangle)]
pub static AID_TASK_PID: u32 = 0;

/// Reads a global the loader patched. Volatile, so the compiler does not
/// fold the default value in.
#[inline(always)]
pub fn global(value: &'static u32) -> u32 {
    // SAFETY: a valid, aligned reference to an immutable static.
    unsafe { core::ptr::read_volatile(value) }
}

#[map]
pub static AID_EVENTS: RingBuf = RingBuf::with_byte_size(64 * 1024 * 1024, 0);
#[map]
pub static AID_LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(LostSlot::COUNT, 0);
#[map]
pub static AID_ERRORS: PerCpuArray<u64> = PerCpuArray::with_max_entries(ProbeErrorKind::COUNT, 0);
#[map]
pub static AID_TARGET: Array<TargetState> = Array::with_max_entries(1, 0);
#[map]
pub static AID_ROLE_POOL: Queue<u32> = Queue::with_max_entries(2048, 0);
#[map]
pub static AID_ROLES: HashMap<u32, u32> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_CALLS: HashMap<CallKey, CallStack> = HashMap::with_max_entries(65536, 0);
#[map]
pub static AID_ACTIONS: HashMap<SiteKey, Action> = HashMap::with_max_entries(4096, 0);
#[map]
pub static AID_STAMPS: HashMap<SiteKey, u64> = HashMap::with_max_entries(4096, 0);
#[map]
pub static AID_PENDING: HashMap<u32, Pending> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_LIVE_UNIT: Array<u32> = Array::with_max_entries(1, 0);
#[map]
pub static AID_REPLAY: HashMap<u32, Replay> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_UNIT_STATE: HashMap<u32, UnitState> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_SYNC_STEPS: HashMap<u32, u32> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_SCRATCH: PerCpuArray<Pending> = PerCpuArray::with_max_entries(1, 0);
#[map]
pub static AID_ENTRY_REGS: HashMap<CallKey, EntryRegs> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_REG_SCRATCH: PerCpuArray<EntryRegs> = PerCpuArray::with_max_entries(1, 0);
#[map]
pub static AID_GROUPS: HashMap<GroupMember, GroupSlot> = HashMap::with_max_entries(4096, 0);
#[map]
pub static AID_RUNNING: HashMap<RunningKey, u64> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_OPEN_MEMBER: HashMap<OpenMember, RunningKey> = HashMap::with_max_entries(16384, 0);
#[map]
pub static AID_READING: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);
#[map]
pub static AID_POINTEE: HashMap<u32, PointeeSpec> = HashMap::with_max_entries(4096, 0);
#[map]
pub static AID_SHADOW: HashMap<u32, ShadowStack> = HashMap::with_max_entries(4096, 0);
#[map]
pub static AID_SHADOW_NEW: PerCpuArray<ShadowStack> = PerCpuArray::with_max_entries(1, 0);
