//! Workloads that exist only to be measured (`aid-agent bench`), kept out
//! of the modules a debugging session runs. The synthetic sensitivity
//! study lives with the simulator it drives, in `causal::sim`.

pub mod extract;
