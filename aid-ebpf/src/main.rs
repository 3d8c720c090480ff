//! The kernel half of aid: records function entries and exits of a traced
//! process into a ring buffer, tracks thread creation so every thread gets
//! a stable role, and — for intervened runs only — numbers call instances
//! and stops a thread for the agent when an intervention is due. Entry
//! probes whose cookie carries `SYNC_COOKIE_BIT` are synchronisation
//! points: they record nothing and only serve noise (`noise.rs`).
//!
//! The target map says which process is recorded and whether a run is
//! intervened on (only then are instances numbered and the action map
//! consulted, so observation runs pay for one map lookup). The agent
//! attaches the probes to the target only; the check also covers probes
//! attached for all processes (the benchmark baseline).
//!
//! Each entry point is thin: it calls a fallible `try_*` body and counts a
//! failure in the error map by kind; nothing panics.
#![no_std]
#![no_main]
// BPF_XADD for the group counters (intervene.rs): core's atomics have no
// 64-bit read-modify-write on this target.
#![allow(internal_features, reason = "core::intrinsics::atomic_xadd, see below")]
#![feature(core_intrinsics)]

mod intervene;
mod maps;
mod noise;
mod record;
mod shadow;
mod threads;
mod watch;

use aid_common::{
    CATCH_COOKIE_BIT, EventKind, ProbeErrorKind, RETURN_COOKIE_BIT, SYNC_COOKIE_BIT,
    THROW_COOKIE_BIT, TargetFlags,
};
use aya_ebpf::{
    EbpfContext,
    bindings::pt_regs,
    helpers::bpf_get_current_pid_tgid,
    macros::{raw_tracepoint, uprobe, uretprobe},
    programs::{ProbeContext, RawTracePointContext, RetProbeContext},
};

use crate::record::{
    cookie, count_error, emit, emit_reading, full_cookie, live_target, now, pointee_spec,
};

/// Counts the failure of a probe body, and says what failed through
/// aya-log (the agent shows the first few at `-v`, all at `-vv`); probes
/// always return 0. Only failures reach the log ring: a probe that works
/// writes nothing to it.
#[inline(always)]
fn done(ctx: &impl EbpfContext, result: Result<(), ProbeErrorKind>) -> u32 {
    if let Err(kind) = result {
        count_error(kind);
        let tid = bpf_get_current_pid_tgid() as u32;
        aya_log_ebpf::debug!(ctx, "probe failed in thread {}: {}", tid, kind.describe());
    }
    0
}

/// The saved registers of the probed thread.
#[inline(always)]
fn regs(ctx: &impl EbpfContext) -> &pt_regs {
    // SAFETY: the context of a uprobe or uretprobe program is the probed
    // thread's `struct pt_regs`, valid for the whole program run.
    unsafe { &*(ctx.as_ptr() as *const pt_regs) }
}

#[uprobe]
pub fn enter_fn(ctx: ProbeContext) -> u32 {
    done(&ctx, try_enter_fn(&ctx))
}

#[inline(always)]
fn try_enter_fn(ctx: &ProbeContext) -> Result<(), ProbeErrorKind> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(flags) = live_target(pid_tgid) else { return Ok(()) };
    let bits = full_cookie(ctx);
    let func = bits as u32;
    let regs = regs(ctx);
    if func & SYNC_COOKIE_BIT != 0 {
        return noise::try_sync_point(pid_tgid, func & !SYNC_COOKIE_BIT, flags, regs);
    }
    if flags.contains(TargetFlags::REPAIR_UNWIND) {
        if bits & THROW_COOKIE_BIT != 0 {
            return shadow::at_throw(pid_tgid as u32, func, now(), regs);
        }
        if bits & CATCH_COOKIE_BIT != 0 {
            return shadow::at_catch(pid_tgid, func, now(), regs);
        }
        if bits & RETURN_COOKIE_BIT != 0 {
            shadow::push(pid_tgid as u32, regs.rsp, func)?;
        }
    } else if bits & (THROW_COOKIE_BIT | CATCH_COOKIE_BIT) != 0 {
        return Ok(());
    }
    let intervene = flags.contains(TargetFlags::INTERVENE);
    if intervene && intervene::replayed_entry(pid_tgid as u32, regs.rip) {
        return Ok(());
    }
    // Counted in its serialised group before its time is taken (see
    // `count_entry`); the event is emitted even when counting failed.
    let entered = if intervene { intervene::count_entry(pid_tgid, func, regs) } else { Ok(None) };
    let ts = now();
    let args = [regs.rdi, regs.rsi, regs.rdx];
    emit_reading(ts, pid_tgid, func, EventKind::ENTRY, args, regs.rip, pointee_spec(func));
    if let Some(entered) = entered? {
        intervene::try_enter(ts, entered, regs.rip, regs)?;
    }
    Ok(())
}

#[uretprobe]
pub fn exit_fn(ctx: RetProbeContext) -> u32 {
    done(&ctx, try_exit_fn(&ctx))
}

#[inline(always)]
fn try_exit_fn(ctx: &RetProbeContext) -> Result<(), ProbeErrorKind> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(flags) = live_target(pid_tgid) else { return Ok(()) };
    let func = cookie(ctx);
    let regs = regs(ctx);
    let intervene = flags.contains(TargetFlags::INTERVENE);
    if intervene && intervene::replayed_exit(pid_tgid as u32, func, regs.rsp) {
        return Ok(());
    }
    if flags.contains(TargetFlags::REPAIR_UNWIND) {
        shadow::pop(pid_tgid as u32, regs.rsp)?;
    }
    let ts = now();
    let report = || emit(ts, pid_tgid, func, EventKind::EXIT, [0; 3], regs.rax);
    if intervene {
        // A call re-executed from its exit reports only its last return.
        intervene::try_exit(ts, pid_tgid, func, regs.rax, report)?;
    } else {
        report();
    }
    Ok(())
}

/// A new task was created by a task of a traced process.
#[raw_tracepoint(tracepoint = "task_newtask")]
pub fn thread_new(ctx: RawTracePointContext) -> u32 {
    done(&ctx, threads::try_thread_new(&ctx))
}

/// A traced process replaced its image: time zero of the run.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn exec_seen(ctx: RawTracePointContext) -> u32 {
    done(&ctx, threads::try_exec_seen())
}

/// A thread of the target exits.
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn thread_exit(ctx: RawTracePointContext) -> u32 {
    done(&ctx, threads::try_thread_exit())
}

/// Empty programs: the floor that `cargo xtask bench tracing` compares the
/// recorders against (the cost of the uprobe mechanism itself).
#[uprobe]
pub fn enter_empty(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn exit_empty(_ctx: RetProbeContext) -> u32 {
    0
}

/// Loaded once at start-up to learn whether this kernel lets uprobe
/// programs write registers (then return overrides need no thread stop).
/// Never attached.
#[uretprobe]
pub fn probe_reg_write(ctx: RetProbeContext) -> u32 {
    // SAFETY: deliberately writes the context; the verifier decides.
    unsafe { (*(ctx.as_ptr() as *mut pt_regs)).rax = 0 };
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
