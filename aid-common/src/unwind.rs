//! Unwinding through return probes (C++ exceptions, forced unwinds).
//!
//! A return probe replaces the return address on the stack with the
//! kernel's trampoline; an unwinder that reads it finds no unwind table
//! for that address and terminates the program. In a target that throws,
//! the entry probe of every function with a return probe pushes the
//! frame's return slot and the address it held onto the thread's
//! [`ShadowStack`]; at an unwinder's entry the thread stops for the agent,
//! which writes the original addresses back over the trampoline, and at
//! the catch it writes the trampoline back into the slots of the frames
//! still live, so their returns are still seen. Frames the exception
//! crossed are dropped from the stack, each reported as its call's end
//! ([`crate::EventKind::UNWOUND`]); the kernel drops its own record of
//! them as it does after a `longjmp`.

/// Set in the attach cookie of a traced function that has a return probe:
/// its entry pushes onto the shadow stack when the target throws. Above
/// the function id and [`crate::SYNC_COOKIE_BIT`] (the cookie is 64 bits;
/// the probes read the id from the low 32).
pub const RETURN_COOKIE_BIT: u64 = 1 << 32;
/// Set in the cookie of an unwinder's entry point
/// (`_Unwind_RaiseException` and its siblings).
pub const THROW_COOKIE_BIT: u64 = 1 << 33;
/// Set in the cookie of a catch point (`__cxa_begin_catch`).
pub const CATCH_COOKIE_BIT: u64 = 1 << 34;

/// Frames a shadow stack holds: the kernel's own limit of pending return
/// probes per thread (`MAX_URETPROBE_DEPTH`), past which it hijacks no
/// more return addresses.
pub const SHADOW_DEPTH: usize = 64;

/// One frame with a pending return probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShadowFrame {
    /// Address of the return slot (the stack pointer at entry).
    pub slot: u64,
    /// The return address it held before the kernel hijacked it.
    pub ret: u64,
    /// The traced function the frame is a call of: a frame a catch finds
    /// crossed is reported as that function's call ended by the unwind
    /// ([`crate::EventKind::UNWOUND`]).
    pub func: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<ShadowFrame>() == 24);

/// The frames of one thread with pending return probes, oldest first.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShadowStack {
    pub depth: u32,
    /// Unwinds under way whose slots were handed to the agent for repair
    /// and that no catch has ended yet (an exception thrown and caught in
    /// a destructor while another unwinds nests): each catch point while
    /// it is above 0 stops the thread so the agent re-arms the frames the
    /// latest repair restored that are still live, and takes one off.
    pub repaired: u32,
    pub frames: [ShadowFrame; SHADOW_DEPTH],
}
const _: () = assert!(size_of::<ShadowStack>() == 8 + 24 * SHADOW_DEPTH);

impl Default for ShadowStack {
    fn default() -> Self {
        ShadowStack { depth: 0, repaired: 0, frames: [ShadowFrame::default(); SHADOW_DEPTH] }
    }
}
