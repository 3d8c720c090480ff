//! Types that cross the kernel/user boundary: the event record the eBPF
//! programs write to the ring buffer, the intervention map's keys and
//! actions, the error and lost-event slots, and the names of maps and
//! globals.
//!
//! Everything here is `#[repr(C)]`, `Copy`, built from fixed-width fields
//! with no implicit padding, and checked by a `const` size assertion, so the
//! eBPF object and the agent agree on layout without a shared compiler.
//! Kinds stored in shared structs are newtypes over `u32` with named
//! constants (any bit pattern the other side writes is a valid value);
//! kinds used only as map slots are `repr(u32)` enums.
#![no_std]

mod error;
mod event;
mod intervene;
mod maps;
mod noise;
mod target;
mod unwind;
#[cfg(feature = "user")]
mod user;
mod watch;

pub use error::ProbeErrorKind;
pub use event::{Event, EventKind, LostSlot, POINTEE_BYTES, PointeeSpec};
pub use intervene::{
    ANY_INSTANCE, Action, ActionKind, CALL_STACK_DEPTH, CallKey, CallStack, EntryRegs, GroupMember,
    GroupSlot, HELD_MARK, LOCK_DOES_NOT_WAIT, LOCKER_MEMBER, OpenMember, PT_REGS_WORDS, Pending,
    Replay, RetTest, RunningKey, SERIALIZED_PAIRS, SiteKey, SitePoint, UNITS_IN_FLIGHT, UnitState,
    lockers, serialized_pair,
};
pub use maps::*;
pub use noise::{EVERY_ROLE, SYNC_COOKIE_BIT, SYNC_EVENTS_PER_THREAD, SYNC_SITE_FUNC};
pub use target::{TargetFlags, TargetState};
pub use unwind::{
    CATCH_COOKIE_BIT, RETURN_COOKIE_BIT, SHADOW_DEPTH, ShadowFrame, ShadowStack, THROW_COOKIE_BIT,
};
pub use watch::{DelayOn, HitKind, WATCH_ARMED_FUNC, WATCH_DELAY_FUNC, WatchConfig, WatchHit};
