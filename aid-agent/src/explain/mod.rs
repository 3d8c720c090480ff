//! The seed techniques that complement AID:
//! pattern mining over failing runs ([`mine`], seed 002), hazard-sensitive
//! slicing of one failing run ([`slice`](mod@slice), seed 003) and the comparison of a
//! failing run with a passing one ([`compare`], seed 001).
//!
//! All three read the same substrate (spec §0), built here from recorded
//! runs: access events on shared objects with an R/W type
//! ([`access`]), object names that mean the same object in every run
//! ([`objects`]), thread roles named so that they match across runs
//! ([`RoleNames`](crate::model::identity::RoleNames)), and the immediate
//! cross-thread dependences between accesses
//! ([`access::dependences`]).

pub mod access;
pub mod compare;
pub mod mine;
pub mod objects;
pub mod rerun;
pub mod slice;
pub mod verify;
pub mod watch;
pub mod watched;

use std::path::Path;

pub use access::{Access, AccessClass, AccessSpec, Dep, DepKind, Event, RunAccesses, Substrate};

use crate::store::{self, Loaded, SessionError};

/// A session read back for the explainers, with the executable's data
/// symbols for naming globals (`None`, with a warning, when the
/// executable cannot be read: objects are then named by first appearance).
pub fn load(dir: &Path) -> Result<(Loaded, Option<objects::Globals>), SessionError> {
    let loaded = store::load_full(dir)?;
    let globals = objects::Globals::load(&loaded.header.program);
    if globals.is_none() {
        log::warn!(
            "cannot read {}: globals are named by their first appearance",
            loaded.header.program.display()
        );
    }
    Ok((loaded, globals))
}

/// Which runs of `session` the explainers leave out, and why, in words
/// (nothing when every run is used).
pub fn excluded_runs(session: &crate::model::Session) -> Vec<String> {
    let mut lines = Vec::new();
    let intervened = session.runs.iter().filter(|r| !r.interventions.is_empty()).count();
    if intervened > 0 {
        lines.push(format!("{intervened} run(s) made under interventions are left out"));
    }
    let lost = session.runs.iter().filter(|r| !r.complete && r.interventions.is_empty()).count();
    if lost > 0 {
        lines.push(format!(
            "warning: {lost} run(s) lost events or were interrupted and are left out; record with a larger --ring-size"
        ));
    }
    lines
}

/// What can go wrong before any technique runs: bad input, in words.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("bad function pattern `{pattern}` for --{option}: {reason}")]
    Pattern { option: &'static str, pattern: String, reason: String },
    #[error("run {0} is not in the session (it has runs {1})")]
    NoSuchRun(u32, String),
    #[error("run {run} passed: {what} needs a failing run (failing runs: {failing})")]
    NotFailing { run: u32, what: &'static str, failing: String },
    #[error("run {run} failed: --pass needs a passing run (passing runs: {passing})")]
    NotPassing { run: u32, passing: String },
    #[error("the session has no failing runs: record until the failure shows up at least once")]
    NoFailingRuns,
    #[error("the session has no passing runs to compare with: record more runs")]
    NoPassingRuns,
    #[error("bad criterion `{text}`: {reason}")]
    Criterion { text: String, reason: String },
    #[error("bad --deps `{0}`: give a comma-separated subset of ds, cs, war, waw")]
    Deps(String),
    #[error("cannot watch {name}: {reason}")]
    Object { name: String, reason: String },
    #[error("{0}")]
    Watch(String),
}

/// Run ids as a short list for messages ("1, 4, 7 and 12 more").
pub(crate) fn id_list(ids: impl IntoIterator<Item = u32>) -> String {
    const SHOWN: usize = 12;
    let ids: Vec<u32> = ids.into_iter().collect();
    if ids.is_empty() {
        return "none".into();
    }
    let mut s = ids.iter().take(SHOWN).map(u32::to_string).collect::<Vec<_>>().join(", ");
    if ids.len() > SHOWN {
        s.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    s
}

#[cfg(test)]
pub(crate) mod testkit;
