#![no_std]
//! Library target so the agent can declare this crate as a build-dependency
//! (cargo then rebuilds the agent when the eBPF sources change).
