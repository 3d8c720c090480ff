//! `mine --emit-predicates FILE`: "pattern π occurs" as predicates another
//! stage can load and evaluate on any run (format in docs/explain.md).
//!
//! A predicate holds in a run when the concatenation of its macros is a
//! subsequence of the run's access trace, built with the same access
//! classes (`reads`, `writes`) the patterns were mined with. Roles and
//! objects are the canonical names of [`crate::model::identity::RoleNames`] and
//! [`crate::explain::objects`], so the predicate means the same thing in
//! every run of the program.

use serde::{Deserialize, Serialize};

use super::{Dataset, Mined};
use crate::explain::{
    access::{Access, RunAccesses, Substrate},
    mine::prefixspan::is_subsequence,
};

pub const FORMAT: &str = "aid-mined-patterns";
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternEvent {
    pub role: String,
    pub function: String,
    /// The enclosing traced function (none: called from untraced code).
    pub caller: Option<String>,
    pub access: Access,
    pub object: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PatternDep {
    pub from: PatternEvent,
    pub to: PatternEvent,
    pub kind: String,
}

/// "Pattern π occurs in the run".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MinedPredicate {
    /// `mine:G.P`: pattern P of group G (both from 1, in rank order).
    pub id: String,
    pub description: String,
    pub rel_supp: f64,
    /// The concatenated macros, in order.
    pub events: Vec<PatternEvent>,
    /// How many events each macro has (their sum is `events.len()`).
    pub macro_lengths: Vec<usize>,
    pub deps: Vec<PatternDep>,
    pub failing_runs: Vec<u32>,
    pub passing_runs: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PatternFile {
    pub format: String,
    pub version: u32,
    /// The `--reads` and `--writes` globs the access traces were built with.
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    pub min_supp: f64,
    pub predicates: Vec<MinedPredicate>,
}

impl MinedPredicate {
    /// True when the pattern occurs in `run` (an access trace of a
    /// substrate built with the file's `reads` and `writes`).
    pub fn holds(&self, substrate: &Substrate, run: &RunAccesses) -> bool {
        let trace: Vec<PatternEvent> = run
            .events
            .iter()
            .map(|e| PatternEvent {
                role: run.roles.name(e.role).to_owned(),
                function: substrate.function_name(e.func).to_owned(),
                caller: e.caller.map(|c| substrate.function_name(c).to_owned()),
                access: e.access,
                object: substrate.objects.name(e.object).to_owned(),
            })
            .collect();
        is_subsequence(&self.events, &trace)
    }
}

impl PatternEvent {
    /// Event `e` of `data`, by its names.
    pub fn of(data: &Dataset, e: u32) -> PatternEvent {
        let j = data.event_json(e);
        PatternEvent {
            role: j.role,
            function: j.function,
            caller: j.caller,
            access: j.access,
            object: j.object,
        }
    }
}

/// The predicates of every pattern of every group.
pub fn export(data: &Dataset, mined: &Mined, reads: &[String], writes: &[String]) -> PatternFile {
    let event = |e: u32| PatternEvent::of(data, e);
    let mut predicates = Vec::new();
    for (g, group) in mined.groups.iter().enumerate() {
        for (p, found) in group.patterns.iter().enumerate() {
            predicates.push(MinedPredicate {
                id: format!("mine:{}.{}", g + 1, p + 1),
                description: format!("pattern {} occurs", data.pattern_text(found)),
                rel_supp: group.rel_supp,
                events: found.macros.iter().flatten().map(|&e| event(e)).collect(),
                macro_lengths: found.macros.iter().map(Vec::len).collect(),
                deps: group
                    .deps
                    .iter()
                    .map(|d| PatternDep {
                        from: event(d.from),
                        to: event(d.to),
                        kind: d.kind.as_str().to_owned(),
                    })
                    .collect(),
                failing_runs: found.failing.clone(),
                passing_runs: found.passing.clone(),
            });
        }
    }
    PatternFile {
        format: FORMAT.into(),
        version: VERSION,
        reads: reads.to_vec(),
        writes: writes.to_vec(),
        min_supp: mined.min_supp,
        predicates,
    }
}
