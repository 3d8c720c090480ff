//! The operating system side of a target: starting it held before exec,
//! what `/proc` says about it, ptrace control of its threads, and what a stopped thread needs (is its
//! first instruction safe to rerun, how to unwind out of a function).

pub mod poll;
pub mod proc;
pub mod ptrace;
pub mod rewind;
pub mod spawn;
pub mod unwind;
