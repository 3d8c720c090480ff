//! Predicate extraction over recorded runs (AID Sec. 3.1, Fig. 2).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Index of a predicate in a [`Catalog`]; also the node id in the causal
/// engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PredId(pub u32);

impl fmt::Display for PredId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "P{}", self.0)
    }
}
