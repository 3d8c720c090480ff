//! Interventions as the kernel and the agent carry them out: plans of kernel
//! actions, random delays that amplify a rare failure, and the list of
//! functions whose return values may be forced.

pub mod noise;
pub mod plan;
mod safe;

pub use plan::{Plan, site_key};
pub use safe::{SafeList, SafeListError};
