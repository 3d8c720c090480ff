//! Synchronisation points (libc locks, condition variables, semaphores,
//! yields, sleeps): entry-only probes. In an intervened run, and in an
//! observation run the agent asked for them in (`SYNC_EVENTS`: the
//! default set's measured budget had room), each thread counts the sync
//! points it enters and records the first `SYNC_EVENTS_PER_THREAD` (which
//! lock, which thread, when: what the lock predicates read). In an
//! intervened run, when the agent installed noise at a thread's k-th one
//! (a delay, or a PCT priority change point) the thread stops for the
//! agent there; so does every thread at a point the agent put noise on for
//! all of them ([`EVERY_ROLE`]). Where no noise is, a lock acquisition
//! may wait while another thread's calls of a group run (an intervention
//! on critical sections,
//! [`aid_common::ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`]).

use aid_common::{
    ANY_INSTANCE, ActionKind, EVERY_ROLE, EventKind, LOCK_DOES_NOT_WAIT, ProbeErrorKind,
    SYNC_EVENTS_PER_THREAD, SYNC_SITE_FUNC, SiteKey, SitePoint, TargetFlags,
};
use aya_ebpf::bindings::pt_regs;

use crate::{
    intervene::{
        enter_lockers, leave_lockers, lock_hold_applies, lock_hold_due, replayed_entry,
        stop_for_agent, stop_for_noise_then,
    },
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
    let noise = unsafe {
        match AID_ACTIONS.get(key) {
            Some(a) => Some(*a),
            None => AID_ACTIONS.get(every).copied(),
        }
    };
    // The agent learns which sync function it was from the site.
    let site = SiteKey { func, ..key };
    // A lock the thread's calls take only while another thread's calls
    // are not running (an intervention on critical sections).
    let lock = SiteKey { func, role, instance: ANY_INSTANCE, point: SitePoint::ENTRY };
    // SAFETY: as above.
    let at_lock = unsafe { AID_ACTIONS.get(lock) }.copied();
    if at_lock.is_some_and(|a| a.kind == ActionKind::LOCKERS_RELEASE) {
        leave_lockers(tid);
    }
    let hold = at_lock.filter(|a| lock_hold_applies(tid, a));
    if let Some(action) = hold.filter(|a| a.retries != LOCK_DOES_NOT_WAIT) {
        enter_lockers(tid, &action)?;
    }
    match (noise, hold) {
        // Noise first; the agent holds the thread on after it if the
        // other calls run then (they may have begun during the noise).
        (Some(action), Some(then)) => stop_for_noise_then(tid, action, site, regs, now(), then),
        (Some(action), None) => stop_for_agent(tid, action, site, regs.rip, now(), Some(regs)),
        (None, Some(action)) if lock_hold_due(tid, &action) => {
            stop_for_agent(tid, action, site, regs.rip, now(), Some(regs))
        }
        _ => Ok(()),
    }
}
