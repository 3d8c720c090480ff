//! The shadow stack of return slots in a target that throws
//! (`aid_common::ShadowStack`): pushed at the entry of a function with a
//! return probe, popped at its return, and handed to the agent when the
//! thread starts to unwind (it writes the original return addresses back
//! over the kernel's trampoline) and when it catches (it writes the
//! trampoline back into the frames still live).

use aid_common::{
    Action, ActionKind, EventKind, ProbeErrorKind, SHADOW_DEPTH, ShadowStack, SiteKey, SitePoint,
};
use aya_ebpf::{bindings::pt_regs, helpers::bpf_probe_read_user};

use crate::{
    intervene::stop_for_agent,
    maps::{AID_SHADOW, AID_SHADOW_NEW},
    record::emit,
};

/// `i` (already checked to be below [`SHADOW_DEPTH`]) masked into range
/// in the register the access uses: the verifier bounds the register the
/// compiler indexes with, which is not always the one checked.
#[inline(always)]
fn slot_index(i: usize) -> usize {
    const _: () = assert!(SHADOW_DEPTH.is_power_of_two());
    i & (SHADOW_DEPTH - 1)
}

/// The thread's stack, inserted empty at its first push.
#[inline(always)]
fn stack(tid: u32, create: bool) -> Result<Option<*mut ShadowStack>, ProbeErrorKind> {
    if let Some(s) = AID_SHADOW.get_ptr_mut(tid) {
        return Ok(Some(s));
    }
    if !create {
        return Ok(None);
    }
    let fresh = AID_SHADOW_NEW.get_ptr_mut(0).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: the per-CPU slot; only `depth` and `repaired` are read before
    // a frame is written, and both are set here.
    let fresh: &ShadowStack = unsafe {
        (*fresh).depth = 0;
        (*fresh).repaired = 0;
        &*fresh
    };
    // By reference, from the scratch slot: a copy would not fit the stack.
    AID_SHADOW.insert(tid, fresh, 0).map_err(|_| ProbeErrorKind::MapFull)?;
    AID_SHADOW.get_ptr_mut(tid).map(Some).ok_or(ProbeErrorKind::MapLookup)
}

/// Drops the frames whose slot lies below `sp` (`inclusive`: at `sp` too):
/// they returned, or an unwind or a `longjmp` went past them. `CROSSED`
/// (at a catch only: a loop that reports costs the verifier far more
/// than one that does not, and every probe is verified at each load):
/// each frame dropped is reported as its call's end by the unwind
/// ([`EventKind::UNWOUND`], of the thread `pid_tgid`, at `ts`).
#[inline(always)]
fn drop_below<const CROSSED: bool>(
    s: *mut ShadowStack,
    sp: u64,
    inclusive: bool,
    pid_tgid: u64,
    ts: u64,
) {
    for _ in 0..SHADOW_DEPTH {
        // SAFETY: a map value pointer; only this thread's probes (and the
        // agent, while the thread is stopped) touch its entry.
        unsafe {
            let d = (*s).depth as usize;
            if d == 0 || d > SHADOW_DEPTH {
                return;
            }
            let Some(top) = (*s).frames.get(slot_index(d - 1)) else { return };
            if top.slot > sp || (top.slot == sp && !inclusive) {
                return;
            }
            if CROSSED {
                emit(ts, pid_tgid, top.func, EventKind::UNWOUND, [0; 3], 0);
            }
            (*s).depth -= 1;
        }
    }
}

/// Entry of a function with a return probe: its return slot (the stack
/// pointer) and the address in it, before the kernel replaces it. A frame
/// on top with the same slot stays: a tail call from a traced function
/// finds the trampoline there (the agent then reads the older record),
/// and a call after an unwind or a `longjmp` may reuse a dead frame's
/// slot (the newer record wins).
#[inline(always)]
pub fn push(tid: u32, sp: u64, func: u32) -> Result<(), ProbeErrorKind> {
    // SAFETY: reads user memory with fault handling.
    let Ok(ret) = (unsafe { bpf_probe_read_user(sp as *const u64) }) else { return Ok(()) };
    let Some(s) = stack(tid, true)? else { return Ok(()) };
    drop_below::<false>(s, sp, false, 0, 0);
    // SAFETY: as in `drop_below`.
    unsafe {
        let d = (*s).depth as usize;
        if d >= SHADOW_DEPTH {
            return Ok(());
        }
        if let Some(frame) = (*s).frames.get_mut(slot_index(d)) {
            frame.slot = sp;
            frame.ret = ret;
            frame.func = func;
            (*s).depth += 1;
        }
    }
    Ok(())
}

/// Return of a traced function (the stack pointer is past its slot).
#[inline(always)]
pub fn pop(tid: u32, sp: u64) -> Result<(), ProbeErrorKind> {
    if let Some(s) = stack(tid, false)? {
        drop_below::<false>(s, sp, false, 0, 0);
    }
    Ok(())
}

/// An unwinder's entry: when frames with pending return probes are
/// below, the thread stops for the agent to repair their slots.
#[inline(always)]
pub fn at_throw(tid: u32, func: u32, ts: u64, regs: &pt_regs) -> Result<(), ProbeErrorKind> {
    let Some(s) = stack(tid, false)? else { return Ok(()) };
    drop_below::<false>(s, regs.rsp, true, 0, 0);
    // SAFETY: as in `drop_below`.
    unsafe {
        if (*s).depth == 0 {
            return Ok(());
        }
        (*s).repaired += 1;
    }
    stop(tid, func, ActionKind::REPAIR_RETURNS, ts, regs)
}

/// A catch point: the frames the exception crossed are gone, each
/// reported as its call's end; after a repair, the thread stops for the
/// agent to re-arm the live ones. An exception thrown and caught while
/// another unwinds (in a destructor) nests: each catch answers the latest
/// repair not yet caught.
#[inline(always)]
pub fn at_catch(pid_tgid: u64, func: u32, ts: u64, regs: &pt_regs) -> Result<(), ProbeErrorKind> {
    let tid = pid_tgid as u32;
    let Some(s) = stack(tid, false)? else { return Ok(()) };
    drop_below::<true>(s, regs.rsp, true, pid_tgid, ts);
    // SAFETY: as in `drop_below`.
    unsafe {
        if (*s).repaired == 0 {
            return Ok(());
        }
        (*s).repaired -= 1;
    }
    stop(tid, func, ActionKind::REARM_RETURNS, ts, regs)
}

#[inline(always)]
fn stop(
    tid: u32,
    func: u32,
    kind: ActionKind,
    ts: u64,
    regs: &pt_regs,
) -> Result<(), ProbeErrorKind> {
    let action = Action { kind, ..Action::default() };
    let site = SiteKey { func, role: 0, instance: 0, point: SitePoint::ENTRY };
    stop_for_agent(tid, action, site, regs.rip, ts, Some(regs))
}

/// A thread of the target exits: its stack goes with it.
#[inline(always)]
pub fn forget(tid: u32) {
    let _ = AID_SHADOW.remove(tid);
}
