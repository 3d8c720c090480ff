//! Reporting to the agent: events into the ring buffer, and the per-kind
//! counters of what could not be reported or done.

use aid_common::{Event, EventKind, POINTEE_BYTES, PointeeSpec, ProbeErrorKind, TargetFlags};
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_attach_cookie, bpf_ktime_get_ns, bpf_probe_read_user_buf,
        bpf_probe_read_user_str_bytes,
    },
    maps::PerCpuArray,
};

use crate::maps::{AID_ERRORS, AID_EVENTS, AID_LOST, AID_POINTEE, AID_READING, AID_TARGET};

/// Submit with the kernel's adaptive wake-up (flags 0): the reader is woken
/// only by an event that finds it caught up (the ring empty before it).
/// After each drain the reader lets events gather for 10 ms before it waits
/// again, so a traced thread pays for at most one wake-up per 10 ms however
/// fast it calls, and an idle session costs no timer (the agent's
/// `EventStream`).
const ADAPTIVE_WAKEUP: u64 = 0;

/// Adds one to a per-CPU counter slot.
#[inline(always)]
fn bump(counter: &PerCpuArray<u64>, slot: u32) {
    if let Some(n) = counter.get_ptr_mut(slot) {
        // SAFETY: a per-CPU slot: no other writer runs on this CPU while
        // this program does.
        unsafe { *n += 1 };
    }
}

/// Counts a failed probe body in its kind's slot.
#[inline(always)]
pub fn count_error(kind: ProbeErrorKind) {
    bump(&AID_ERRORS, kind as u32);
}

/// `CLOCK_MONOTONIC` nanoseconds.
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: the helper takes no arguments and only reads the clock.
    unsafe { bpf_ktime_get_ns() }
}

/// Writes one event to the ring buffer, or counts it as lost.
#[inline(always)]
pub fn emit(ts_ns: u64, pid_tgid: u64, func: u32, kind: EventKind, args: [u64; 3], ret: u64) {
    emit_reading(ts_ns, pid_tgid, func, kind, args, ret, None);
}

/// [`emit`], and for an entry whose function has a [`PointeeSpec`], the
/// bytes its argument points to, read into the event in the ring (the
/// BPF stack has no room for a second copy). A pointer that cannot be
/// read leaves `pointee_len` 0.
#[inline(always)]
pub fn emit_reading(
    ts_ns: u64,
    pid_tgid: u64,
    func: u32,
    kind: EventKind,
    args: [u64; 3],
    ret: u64,
    spec: Option<PointeeSpec>,
) {
    match AID_EVENTS.reserve::<Event>(0) {
        Some(mut slot) => {
            let ev = slot.write(Event {
                ts_ns,
                pid: (pid_tgid >> 32) as u32,
                tid: pid_tgid as u32,
                func,
                kind,
                args,
                ret,
                pointee: [0; POINTEE_BYTES],
                pointee_len: 0,
                _pad: 0,
            });
            if let Some(spec) = spec {
                set_reading(1);
                ev.pointee_len = read_pointee(&spec, &args, &mut ev.pointee);
                set_reading(0);
            }
            slot.submit(ADAPTIVE_WAKEUP);
        }
        None => bump(&AID_LOST, kind.lost_slot() as u32),
    }
}

/// Marks this CPU as reading a pointee for the probe (`AID_READING`).
#[inline(always)]
fn set_reading(on: u32) {
    if let Some(flag) = AID_READING.get_ptr_mut(0) {
        // SAFETY: this CPU's slot; the program runs with migration
        // disabled, and a watchpoint hit it causes runs on this CPU too.
        unsafe { *flag = on };
    }
}

/// Whether this CPU is inside an entry probe's pointee read: a
/// watchpoint hit now is the probe's access, not the program's.
#[inline(always)]
pub fn reading_pointee() -> bool {
    // SAFETY: as in `set_reading`.
    AID_READING.get_ptr(0).is_some_and(|flag| unsafe { *flag } != 0)
}

/// The pointee spec of a function, if the agent gave it one.
#[inline(always)]
pub fn pointee_spec(func: u32) -> Option<PointeeSpec> {
    // SAFETY: a plain-old-data value copied out of the map at once.
    unsafe { AID_POINTEE.get(func).copied() }
}

/// Reads what argument `spec.arg` points to into `out`; the bytes read.
#[inline(always)]
fn read_pointee(spec: &PointeeSpec, args: &[u64; 3], out: &mut [u8; POINTEE_BYTES]) -> u32 {
    let ptr = match spec.arg {
        0 => args[0],
        1 => args[1],
        _ => args[2],
    } as *const u8;
    if ptr.is_null() {
        return 0;
    }
    if spec.text != 0 {
        // SAFETY: the helper reads user memory with fault handling; `out`
        // is ours.
        // The bytes with the NUL: an empty string is read too.
        return match unsafe { bpf_probe_read_user_str_bytes(ptr, out) } {
            Ok(s) => s.len() as u32 + 1,
            Err(_) => 0,
        };
    }
    // SAFETY: as above.
    match unsafe { bpf_probe_read_user_buf(ptr, out) } {
        Ok(()) => u32::from(spec.len).min(POINTEE_BYTES as u32),
        Err(_) => 0,
    }
}

/// The attach cookie: the function's id.
#[inline(always)]
pub fn cookie(ctx: &impl EbpfContext) -> u32 {
    full_cookie(ctx) as u32
}

/// The whole attach cookie: the function's id in the low 32 bits, the
/// unwinding flags above (`aid_common::RETURN_COOKIE_BIT`, ...).
#[inline(always)]
pub fn full_cookie(ctx: &impl EbpfContext) -> u64 {
    // SAFETY: the helper only reads the cookie of the running program's
    // attachment, from its own context.
    unsafe { bpf_get_attach_cookie(ctx.as_ptr()) }
}

/// The flags of the current process if it is a live target.
#[inline(always)]
pub fn live_target(pid_tgid: u64) -> Option<TargetFlags> {
    let tgid = (pid_tgid >> 32) as u32;
    match AID_TARGET.get(0) {
        Some(t) if t.tgid == tgid && t.flags.contains(TargetFlags::LIVE) => Some(t.flags),
        _ => None,
    }
}

/// Whether the current process is the target (live or not yet).
#[inline(always)]
pub fn is_target(tgid: u32) -> bool {
    AID_TARGET.get(0).is_some_and(|t| t.tgid == tgid)
}
