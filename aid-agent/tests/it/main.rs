//! The integration tests: one binary with a module per area (as aya and
//! ripgrep do), so the suite links once instead of once per area. A module
//! runs alone with `cargo test -p aid-agent --test it -- MODULE::` (its eBPF
//! tests with `--include-ignored`). Which eBPF tests may run at the same
//! time is `common`'s rule (`require_bpf`, `alone`).

mod architecture;
mod attach;
#[path = "../../../examples/cases.rs"]
mod cases;
mod cli;
mod common;
mod corpus;
#[path = "../../../xtask/src/corpus_rule.rs"]
mod corpus_rule;
mod ebpf_log;
mod examples;
mod explain;
mod faults;
mod fleet;
mod guarantees;
mod hangs;
mod interventions;
mod jobs;
mod object;
mod one_cpu;
mod orders;
mod privileges;
mod s3;
mod scope;
mod services;
mod shipped;
mod statements;
mod symbols;
mod tracer;
mod tracer_effect;
mod watch;
