//! aid: explains intermittent failures of unmodified native programs.
//!
//! The modules follow the data (ARCHITECTURE.md at the repository root has
//! one line per module): the operating system ([`sys`]), symbol resolution
//! ([`symbols`]), the eBPF probes ([`bpf`]), recording labelled runs
//! ([`record`]) and storing them ([`store`]), predicates that separate
//! failing from passing runs ([`predicates`], [`stats`], [`analysis`]), the
//! causal engine ([`causal`]) and the interventions it asks for
//! ([`intervene`]), the one debug pipeline ([`debug`]), its report
//! ([`report`]), the explainers beside it — pattern mining, slicing and
//! run comparison ([`explain`]) — and the command line ([`cli`]). [`model`] is the shared
//! vocabulary.

pub mod analysis;
pub mod bpf;
pub mod causal;
pub mod cli;
pub mod debug;
pub mod explain;
pub mod fleet;
pub mod intervene;
pub mod model;
pub mod predicates;
pub mod record;
pub mod report;
pub mod stats;
pub mod store;
pub mod symbols;
pub mod sys;
mod util;

/// The causal engine and the predicate tables name the bitset by this path.
pub(crate) use util::bitset;
