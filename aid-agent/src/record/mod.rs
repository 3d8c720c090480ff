//! Recording labelled runs: the tracer that runs a target under the probes
//! (or follows a running one), the recorder that turns kernel events into
//! runs, the units of a live service, the rules that label runs, and the
//! one rule for lost events, runs with hardware watchpoints on named
//! objects; and `record`, `intervene` and `attach` as
//! library calls ([`program::record`], [`attach::attach`]).

pub mod attach;
pub mod census;
pub mod fail;
pub mod follow;
pub mod hang;
pub mod jobs;
pub mod list;
pub mod lost;
pub mod program;
pub mod progress;
pub mod recorder;
mod running;
pub mod start;
pub mod stops;
mod throws;
pub mod tracer;
pub mod units;
pub mod watchpoints;
pub mod window;

/// The user interrupted (Ctrl-C): what was recorded is kept. The command
/// line exits 130 on it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);
