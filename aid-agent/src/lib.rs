//! aid: explains intermittent failures of unmodified native programs.
//!
//! The pipeline (shared/DESIGN.md): resolve and probe functions
//! ([`symbols`], [`probe`]), record labelled runs ([`runner`], [`recorder`],
//! [`session`]), extract predicates that separate failing from passing runs
//! ([`predicates`], [`stats`]), order them into an approximate causal DAG and
//! confirm the causal path with interventions ([`causal`]).

pub mod analysis;
mod bitset;
pub mod causal;
pub mod cli;
pub mod control;
pub mod debugger;
pub mod explain;
pub mod insn;
pub mod intervene;
pub mod live;
pub mod live_unit;
pub mod model;
pub mod noise;
pub mod predicates;
pub mod probe;
pub mod recorder;
pub mod report;
pub mod runner;
pub mod session;
pub mod stats;
pub mod symbols;
pub mod trace;
pub mod units;
pub mod unwind;
