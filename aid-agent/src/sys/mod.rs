//! The operating system side of a target, nothing aid-specific: starting it
//! held before exec, what `/proc` says about it (whether it hangs), ptrace primitives, what a
//! stopped thread needs (is its first instruction safe to rerun, how to
//! unwind out of a function), and every polling interval of the agent.

pub mod hang;
pub mod poll;
pub mod proc;
pub mod ptrace;
pub mod rewind;
pub mod sched;
pub mod spawn;
pub mod unwind;
