//! Recording labelled runs: the tracer that runs a target under the probes,
//! the recorder that turns kernel events into runs, and the units of a live
//! service.

pub mod recorder;
pub mod tracer;
pub mod units;
