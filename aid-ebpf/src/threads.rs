//! Process and thread bookkeeping from scheduler tracepoints (raw
//! tracepoints: attached by name, with no tracefs): roles for new threads
//! of the target, its child processes, its exec (time zero of a run), and
//! the final names of its threads.

use aid_common::{EventKind, ProbeErrorKind, TargetFlags};
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_probe_read_kernel},
    programs::RawTracePointContext,
};

use crate::{
    maps::{AID_ROLE_POOL, AID_ROLES, AID_TARGET, AID_TASK_PID, global},
    record::{emit, is_target, live_target, now},
};

const CLONE_THREAD: u64 = 0x0001_0000;

/// A new task created by a task of the target (`task_newtask(struct
/// task_struct *task, unsigned long clone_flags)`, run by the creator):
/// give threads the next role and report the creation; report child
/// processes, which are not traced.
#[inline(always)]
pub fn try_thread_new(ctx: &RawTracePointContext) -> Result<(), ProbeErrorKind> {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_target((pid_tgid >> 32) as u32) {
        return Ok(());
    }
    let task: u64 = ctx.arg(0);
    let flags: u64 = ctx.arg(1);
    let field = task.wrapping_add(u64::from(global(&AID_TASK_PID))) as *const i32;
    // SAFETY: reads 4 bytes of the new task through the helper, which
    // checks the address; the offset comes from the kernel's BTF.
    let child: i32 =
        unsafe { bpf_probe_read_kernel(field) }.map_err(|_| ProbeErrorKind::TracepointRead)?;
    if flags & CLONE_THREAD == 0 {
        // A child process: its calls are not traced, and the run says so.
        if live_target(pid_tgid).is_some() {
            emit(now(), pid_tgid, child as u32, EventKind::CHILD, [0, flags, 0], 0);
        }
        return Ok(());
    }
    // Roles are handed out in creation order from a queue the agent fills
    // with 1, 2, 3, ...: popping is atomic, and the BPF ISA v1 we build for
    // has no fetch-add.
    let role = AID_ROLE_POOL
        .pop()
        .map_err(|_| ProbeErrorKind::NoRoleLeft)?
        .ok_or(ProbeErrorKind::NoRoleLeft)?;
    AID_ROLES.insert(child as u32, role, 0).map_err(|_| ProbeErrorKind::MapFull)?;
    emit(now(), pid_tgid, child as u32, EventKind::THREAD, [u64::from(role), flags, 0], 0);
    Ok(())
}

/// The target replaced its image: it is live from now on.
#[inline(always)]
pub fn try_exec_seen() -> Result<(), ProbeErrorKind> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let Some(state) = AID_TARGET.get_ptr_mut(0) else {
        return Err(ProbeErrorKind::MapLookup);
    };
    // SAFETY: a map value pointer; only the agent (between runs) and this
    // program write the target slot.
    unsafe {
        if (*state).tgid != tgid {
            return Ok(());
        }
        (*state).flags = (*state).flags.with(TargetFlags::LIVE);
    }
    emit(now(), pid_tgid, 0, EventKind::EXEC, [0; 3], 0);
    Ok(())
}

/// A thread of the target exits: report its final name (and forget its
/// shadow stack and its place among the lockers of a lock hold).
#[inline(always)]
pub fn try_thread_exit() -> Result<(), ProbeErrorKind> {
    let pid_tgid = bpf_get_current_pid_tgid();
    if live_target(pid_tgid).is_none() {
        return Ok(());
    }
    crate::shadow::forget(pid_tgid as u32);
    // A lock it took under a lock hold is no longer being taken.
    crate::intervene::leave_lockers(pid_tgid as u32);
    let Ok(comm) = bpf_get_current_comm() else { return Ok(()) };
    let mut words = [0u64; 3];
    words[0] = u64::from_le_bytes([
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]);
    words[1] = u64::from_le_bytes([
        comm[8], comm[9], comm[10], comm[11], comm[12], comm[13], comm[14], comm[15],
    ]);
    emit(now(), pid_tgid, 0, EventKind::THREAD_EXIT, words, 0);
    Ok(())
}
