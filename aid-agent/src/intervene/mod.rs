//! Interventions as the kernel and the agent carry them out: plans of kernel
//! actions, the agent serving the stops they cause, noise that amplifies a
//! rare failure, the list of functions whose return values may be forced,
//! what a run source can carry out at all, the form interventions
//! take on a live service, and the return addresses an exception unwinds
//! through, repaired.

pub mod control;
mod holds;
pub mod live;
pub mod noise;
pub mod one_cpu;
pub mod plan;
mod pool;
mod reach;
pub mod returns;
mod safe;

pub use plan::{Plan, site_key};
pub use reach::Reach;
pub use safe::{SafeList, SafeListError};
