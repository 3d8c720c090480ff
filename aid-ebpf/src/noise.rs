//! Synchronisation points (libc locks, condition variables, semaphores,
//! yields, sleeps): entry-only probes. In an intervened run, and in an
//! observation run the agent asked for them in (`SYNC_EVENTS`: the
//! default set's measured budget had room), each thread counts the sync
//! points it enters and records the first `SYNC_EVENTS_PER_THREAD` (which
//! lock, which thread, when: what the lock predicates read). In an
//! intervened run, when the agent installed noise at a thread's k-th one
//! (a delay, or a PCT priority change point) the thread stops for the
//! agent there; so does every thread at a point the agent put noise on for
//! all of them ([`EVERY_ROLE`]).

use aid_common::{
    ANY_INSTANCE, EVERY_ROLE, EventKind, ProbeErrorKind, SYNC_EVENTS_PER_THREAD, SYNC_SITE_FUNC,
    SiteKey, SitePoint, TargetFlags,
};
use aya_ebpf::bindings::pt_regs;

use crate::{
    intervene::{replayed_entry, stop_for_agent},
    maps::{AID_ACTIONS, AID_ROLES, AID_SYNC_STEPS},
    record::{emit, now},
};

/// Entry of sync point `func` (its id, the cookie's flag removed).
#[inline(always)]
pub fn try_sync_point(
    pid_tgid: u64,
    func: u32,
    flags: TargetFlags,
    regs: &pt_regs,
) -> Result<(), ProbeErrorKind> {
    let intervene = flags.contains(TargetFlags::INTERVENE);
    if !intervene && !flags.contains(TargetFlags::SYNC_EVENTS) {
        return Ok(());
    }
    let tid = pid_tgid as u32;
    // The agent rewound the thread to the first instruction: the same entry.
    if intervene && replayed_entry(tid, regs.rip) {
        return Ok(());
    }
    // SAFETY: a read of a map value.
    let Some(role) = (unsafe { AID_ROLES.get(tid) }).copied() else { return Ok(()) };
    let step = match AID_SYNC_STEPS.get_ptr_mut(tid) {
        // SAFETY: a map value pointer; only this thread touches its entry.
        Some(n) => unsafe {
            *n += 1;
            *n
        },
        None => {
            AID_SYNC_STEPS.insert(tid, 1, 0).map_err(|_| ProbeErrorKind::MapFull)?;
            1
        }
    };
    if step <= SYNC_EVENTS_PER_THREAD {
        emit(now(), pid_tgid, func, EventKind::ENTRY, [regs.rdi, regs.rsi, regs.rdx], regs.rip);
    }
    if !intervene {
        return Ok(());
    }
    let key = SiteKey { func: SYNC_SITE_FUNC, role, instance: step, point: SitePoint::ENTRY };
    // Noise at this thread's rank, else noise for every thread at this
    // point (a statement point's own id).
    let every = SiteKey { func, role: EVERY_ROLE, instance: ANY_INSTANCE, point: SitePoint::ENTRY };
    // SAFETY: reads of map values, copied out at once.
    let action = unsafe {
        match AID_ACTIONS.get(key) {
            Some(a) => *a,
            None => match AID_ACTIONS.get(every) {
                Some(a) => *a,
                None => return Ok(()),
            },
        }
    };
    // The agent learns which sync function it was from the site.
    let site = SiteKey { func, ..key };
    stop_for_agent(tid, action, site, regs.rip, now(), Some(regs))
}
