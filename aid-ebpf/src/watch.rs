//! Hardware watchpoints: the programs the agent attaches to the two perf
//! breakpoint events it opens per watched address on each thread of the
//! target (a write breakpoint and a read-or-write one; x86 has no
//! read-only kind). Each hit is reported with the thread, the time and
//! the instruction after the access; the agent pairs the two halves of a
//! write and attributes every access to the call active on that thread.
//!
//! When the agent asks for it (failure amplification), a thread is also
//! stopped right after the access, through the same pending-stop record
//! and signal as a delay intervention, and the agent holds it.

use aid_common::{
    Action, ActionKind, DelayOn, HitKind, PT_REGS_WORDS, Pending, ProbeErrorKind, SiteKey,
    SitePoint, TargetFlags, WATCH_DELAY_FUNC, WatchConfig, WatchHit,
};
use aya_ebpf::{
    EbpfContext,
    bindings::bpf_perf_event_data,
    helpers::{bpf_get_current_pid_tgid, bpf_send_signal_thread},
    macros::{map, perf_event},
    maps::{Array, PerCpuArray, RingBuf},
    programs::PerfEventContext,
};

use crate::{
    done,
    maps::{AID_PENDING, AID_ROLES, AID_SCRATCH, AID_STOP_SIGNAL, global},
    record::{live_target, now, reading_pointee},
};

#[map]
pub static AID_WATCH_HITS: RingBuf = RingBuf::with_byte_size(4 * 1024 * 1024, 0);
#[map]
pub static AID_WATCH_LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
#[map]
pub static AID_WATCH_CONF: Array<WatchConfig> = Array::with_max_entries(1, 0);

/// The read-or-write breakpoint of a watched address fired.
#[perf_event]
pub fn watch_read_write(ctx: PerfEventContext) -> u32 {
    done(&ctx, try_watch_hit(&ctx, HitKind::READ_WRITE))
}

/// The write breakpoint of a watched address fired.
#[perf_event]
pub fn watch_write(ctx: PerfEventContext) -> u32 {
    done(&ctx, try_watch_hit(&ctx, HitKind::WRITE))
}

#[inline(always)]
fn try_watch_hit(ctx: &PerfEventContext, kind: HitKind) -> Result<(), ProbeErrorKind> {
    let pid_tgid = bpf_get_current_pid_tgid();
    // The events exist only on the target's threads; this also drops hits
    // after the run ended (the thread exiting).
    let Some(flags) = live_target(pid_tgid) else { return Ok(()) };
    // aid's own entry probe reading an argument's pointee: not an access
    // of the program's.
    if reading_pointee() {
        return Ok(());
    }
    // SAFETY: the context of a perf_event program is the kernel's
    // `struct bpf_perf_event_data`, valid for the whole program run; for a
    // breakpoint `addr` is the breakpoint's address.
    let (addr, ip) = unsafe {
        let data = &*(ctx.as_ptr() as *const bpf_perf_event_data);
        (data.addr, data.regs.rip)
    };
    let ts_ns = now();
    let tid = pid_tgid as u32;
    match AID_WATCH_HITS.reserve::<WatchHit>(0) {
        Some(mut slot) => {
            slot.write(WatchHit { ts_ns, addr, ip, tid, kind });
            slot.submit(0);
        }
        None => {
            if let Some(n) = AID_WATCH_LOST.get_ptr_mut(0) {
                // SAFETY: this CPU's slot; nothing else runs on it now.
                unsafe { *n += 1 };
            }
        }
    }
    if flags.contains(TargetFlags::INTERVENE) {
        delay_if_asked(tid, kind, ts_ns)?;
    }
    Ok(())
}

/// Stops the thread for the agent when a delay after this kind of access
/// is configured and some are left.
#[inline(always)]
fn delay_if_asked(tid: u32, kind: HitKind, ts_ns: u64) -> Result<(), ProbeErrorKind> {
    let Some(config) = AID_WATCH_CONF.get_ptr_mut(0) else { return Ok(()) };
    // SAFETY: the one slot of an array map; see `WatchConfig::delays_left`
    // for the race this accepts.
    let config = unsafe { &mut *config };
    // A write fires both breakpoints: it is delayed by the write one only.
    let wanted = match config.delay_on {
        DelayOn::WRITES => kind == HitKind::WRITE,
        DelayOn::ANY => kind == HitKind::READ_WRITE,
        _ => false,
    };
    if !wanted || config.delays_left == 0 {
        return Ok(());
    }
    config.delays_left -= 1;
    // SAFETY: a read of a map value.
    let role = unsafe { AID_ROLES.get(tid) }.copied().unwrap_or(u32::MAX);
    let scratch = AID_SCRATCH.get_ptr_mut(0).ok_or(ProbeErrorKind::MapLookup)?;
    // SAFETY: the per-CPU scratch slot; no other program runs on this CPU
    // while this one does, and it is fully written before it is read.
    let pending = unsafe { &mut *scratch };
    pending.action = Action {
        kind: ActionKind::DELAY,
        within: 0,
        value: config.delay_us,
        timeout_us: config.delay_us,
        other: SiteKey::default(),
        test: aid_common::RetTest::ALWAYS,
        retries: 0,
        test_value: 0,
    };
    pending.site = SiteKey { func: WATCH_DELAY_FUNC, role, instance: 0, point: SitePoint::EXIT };
    pending.func_ip = 0;
    pending.ts_ns = ts_ns;
    pending.regs = [0; PT_REGS_WORDS];
    let record: &Pending = pending;
    AID_PENDING.insert(tid, record, 0).map_err(|_| ProbeErrorKind::MapFull)?;
    // SAFETY: signals only the current thread; the agent is its tracer and
    // suppresses the signal at the resulting stop.
    let rc = unsafe { bpf_send_signal_thread(global(&AID_STOP_SIGNAL)) };
    if rc < 0 { Err(ProbeErrorKind::SendSignal) } else { Ok(()) }
}
