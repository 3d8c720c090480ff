//! The engine without a real target: a causal model that answers like the
//! live oracle (unit tests, TAGT replays), the paper's Fig. 4 example, and
//! the synthetic applications of the sensitivity study (run by
//! `cargo xtask bench synthetic` from the benchmarks crate, `bench/`; kept
//! here because their unit tests run every strategy on small studies).

pub mod adversarial;
pub mod apps;
pub mod example;
pub mod simulate;
pub mod synthetic;
pub mod world;
