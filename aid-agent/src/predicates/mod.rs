//! Predicates over recorded runs (AID Sec. 3.1, Fig. 2, plus CBI and
//! concurrency predicates): what they are, how they are learned from
//! labelled runs, and how they are evaluated on any run — the original ones
//! for statistical debugging, or a new intervened run for the live oracle.
//!
//! A predicate is learned once, from the passing runs (the baseline: return
//! values, duration range, call counts, orders and overlaps they showed) and
//! the failing runs (where a behaviour departs from that baseline). Its
//! [`PredKey`] names a call site by function, thread role and instance, so
//! the same key means the same thing in every run. Its [`Condition`] carries
//! the baseline numbers, so a [`Catalog`] evaluates new runs on its own.
//! docs/predicates.md lists each kind with its extraction rule, time anchor
//! (Sec. 4) and negating intervention (Fig. 2, column 3).

use std::{
    collections::{BTreeSet, HashMap},
    fmt,
};

use serde::{Deserialize, Serialize};

use crate::{
    bitset::BitSet,
    model::{FuncId, Intervention, Role, Run, Session, Site},
};

mod describe;
mod eval;
mod index;
mod learn;

pub use learn::learn;

/// Index of a predicate in a [`Catalog`]; also the node id in the causal
/// engine.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct PredId(pub u32);

impl fmt::Display for PredId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "P{}", self.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PredicateError {
    #[error(
        "no passing runs: predicates compare failing runs with passing ones, record runs until some pass"
    )]
    NoPassingRuns,
    #[error("no failing runs: record runs until the failure shows up at least once")]
    NoFailingRuns,
    #[error(
        "run {run} calls function id {func}, which the session does not define: the session is inconsistent"
    )]
    UnknownFunction { run: u32, func: FuncId },
}

/// What a predicate is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The failure predicate F.
    Failure,
    /// Returned a value other than the one every passing run returned.
    RetDiffers,
    /// Returned an error-class value (negative, NULL, ...; [`ErrorClass`]).
    ErrorReturn,
    /// Ran longer than the longest passing run of this instance.
    TooSlow,
    /// Ran shorter than the shortest passing run of this instance.
    TooFast,
    /// Called on a role more often than any passing run did.
    CountAbove,
    /// Called, but less often than every passing run did.
    CountBelow,
    /// Never called on a role where every passing run called it.
    NeverCalled,
    /// One call ended before another on a different role started, which no
    /// passing run showed.
    Order,
    /// Two calls on different roles overlapped in time while receiving the
    /// same pointer argument (a data race, Fig. 2 row 1), which no passing
    /// run showed.
    Overlap,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Failure => "failure",
            Kind::RetDiffers => "ret_differs",
            Kind::ErrorReturn => "error_return",
            Kind::TooSlow => "too_slow",
            Kind::TooFast => "too_fast",
            Kind::CountAbove => "count_above",
            Kind::CountBelow => "count_below",
            Kind::NeverCalled => "never_called",
            Kind::Order => "order",
            Kind::Overlap => "overlap",
        }
    }

    /// The start-or-end rule for temporal precedence (Sec. 4).
    pub fn anchor(self) -> Anchor {
        match self {
            Kind::RetDiffers | Kind::ErrorReturn | Kind::TooFast => Anchor::Exit,
            Kind::TooSlow => Anchor::Overrun,
            Kind::CountAbove => Anchor::ExcessCall,
            Kind::CountBelow | Kind::NeverCalled | Kind::Failure => Anchor::RunEnd,
            Kind::Order => Anchor::FirstExit,
            Kind::Overlap => Anchor::LaterEntry,
        }
    }
}

/// A stable name for a predicate: the same key means the same behaviour of
/// the same call site in every run of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PredKey {
    pub kind: Kind,
    pub func: FuncId,
    pub role: Role,
    /// 1-based instance (k-th call of `func` on `role`); 0 for per-function
    /// kinds (counts) and for F.
    pub instance: u32,
    /// The second call of pairwise kinds: for `Order`, the call that started
    /// after this one ended; for `Overlap`, the other call.
    pub other: Option<Site>,
}

impl PredKey {
    pub fn failure() -> PredKey {
        PredKey { kind: Kind::Failure, func: 0, role: 0, instance: 0, other: None }
    }

    pub fn site(&self) -> Site {
        Site { func: self.func, role: self.role, instance: self.instance }
    }
}

impl fmt::Display for PredKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let site = |s: Site| format!("f{}/r{}/#{}", s.func, s.role, s.instance);
        match (self.kind, self.other) {
            (Kind::Failure, _) => f.write_str("failure"),
            (Kind::CountAbove | Kind::CountBelow | Kind::NeverCalled, _) => {
                write!(f, "{}:f{}/r{}", self.kind.name(), self.func, self.role)
            }
            (_, Some(o)) => write!(f, "{}:{}+{}", self.kind.name(), site(self.site()), site(o)),
            (_, None) => write!(f, "{}:{}", self.kind.name(), site(self.site())),
        }
    }
}

/// Which moment of a run a predicate is placed at for precedence (Sec. 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Anchor {
    /// The call's exit (end-time rule, Sec. 4 case 1).
    Exit,
    /// The moment the call ran past the longest passing duration (entry +
    /// passing maximum + 1 ns): the earliest time "too slow" is true. The
    /// paper's end-time rule would place a slow call after the effects it
    /// has on other threads while it is still running (a reader racing
    /// ahead of a slow writer), dropping a true causal edge; the overrun
    /// moment precedes them and, being ≤ the exit, still orders nested slow
    /// calls as case 1 wants whenever the outer call's passing maximum
    /// covers the inner one's.
    Overrun,
    /// The entry of the call that took the count past the passing maximum.
    ExcessCall,
    /// The end of the run: a shortfall is only known when the run is over.
    RunEnd,
    /// The exit of the first call: "A ended before B started" is settled
    /// the moment A ends while B has not started. Anchoring at B's entry
    /// instead would place the flipped order after the effects it already
    /// had by then (a reader that ran before the writer has returned its
    /// wrong value long before the writer starts), losing the true edge.
    FirstExit,
    /// The later of the two entries: the moment the overlap begins.
    LaterEntry,
}

/// Which values count as errors for [`Kind::ErrorReturn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorClass {
    /// Negative values of signed (or untyped) returns.
    pub negative: bool,
    /// NULL from functions DWARF says return a pointer.
    pub null_pointer: bool,
    /// Zero (false) from integer and bool returns, for APIs where 0 means
    /// failure.
    pub zero: bool,
}

impl Default for ErrorClass {
    fn default() -> Self {
        ErrorClass { negative: true, null_pointer: true, zero: false }
    }
}

/// Knobs of extraction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExtractConfig {
    pub error: ErrorClass,
    /// Order candidates: each call of a failing run is paired with this many
    /// calls per other role that ended just before it started, and with as
    /// many that started just after it ended. Pairs far apart in time are
    /// ordered the same way in every run and never discriminate, so looking
    /// near each call keeps the search linear.
    pub order_window: usize,
}

impl Default for ExtractConfig {
    fn default() -> Self {
        ExtractConfig { error: ErrorClass::default(), order_window: 2 }
    }
}

/// The test a predicate applies to a run, with the baseline it compares to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "test")]
pub enum Condition {
    Failure,
    /// ret ≠ value.
    RetNot {
        value: i64,
    },
    /// ret < 0 (when `negative`) or ret = 0 (when `zero`).
    ErrorValue {
        negative: bool,
        zero: bool,
    },
    /// duration > max_ns (a call still running at the end counts from its
    /// entry to the end of the run).
    ///
    /// The threshold lies halfway between the slowest passing run
    /// (`passing_ns`) and the fastest failing run slower than that
    /// (`failing_ns`): on the recorded runs that is the same test as
    /// "slower than every passing run", but a later passing run that is a
    /// little slower than any seen before is not taken for a failing one.
    LongerThan {
        max_ns: u64,
        passing_ns: u64,
        failing_ns: u64,
    },
    /// duration < min_ns, halfway between the fastest passing run and the
    /// slowest failing run faster than that.
    ShorterThan {
        min_ns: u64,
        passing_ns: u64,
        failing_ns: u64,
    },
    /// more than `max` calls.
    CountAbove {
        max: u32,
    },
    /// at least one call, fewer than `min`.
    CountBelow {
        min: u32,
    },
    /// no call at all.
    NoCall,
    /// the first call's exit precedes the second call's entry.
    EndsBefore,
    /// the two calls' intervals intersect and they share a pointer-like
    /// argument.
    OverlapSamePointer,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Predicate {
    pub id: PredId,
    pub key: PredKey,
    /// Plain words, with function and role names.
    pub description: String,
    pub anchor: Anchor,
    pub condition: Condition,
    /// What forces the predicate to its passing value (Fig. 2, column 3);
    /// None when nothing can (counts, F).
    pub intervention: Option<Intervention>,
    /// The intervention in plain words (empty when there is none).
    #[serde(default)]
    pub intervention_text: String,
}

/// Every predicate learned from a session, F first.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Catalog {
    pub predicates: Vec<Predicate>,
    /// Passing and failing runs the baseline and candidates came from.
    pub passing_runs: u32,
    pub failing_runs: u32,
    /// Functions hidden from analysis (`Function::internal`), by id.
    pub internal: BTreeSet<FuncId>,
    /// Pointer-like argument positions per function (bit i = argument i),
    /// for the overlap test on new runs.
    pub pointer_args: Vec<u8>,
    #[serde(skip)]
    index: HashMap<PredKey, PredId>,
}

/// Which predicates held in one run, and when.
#[derive(Clone, Debug)]
pub struct RunTruth {
    pub run: u32,
    pub failed: bool,
    /// Predicates that held with their anchor time (ns since the run
    /// started), sorted by id; F is among them when the run failed.
    pub held: Vec<(PredId, u64)>,
    observed: BitSet,
}

impl RunTruth {
    pub fn holds(&self, id: PredId) -> bool {
        self.held.binary_search_by_key(&id, |&(p, _)| p).is_ok()
    }

    pub fn anchor(&self, id: PredId) -> Option<u64> {
        self.held.binary_search_by_key(&id, |&(p, _)| p).ok().map(|i| self.held[i].1)
    }

    /// The predicate's site was reached, so it was true or false (CBI's
    /// "observed": Context counts these runs).
    pub fn observed(&self, id: PredId) -> bool {
        self.observed.contains(id.0 as usize)
    }

    pub fn held_ids(&self) -> BTreeSet<PredId> {
        self.held.iter().map(|&(p, _)| p).collect()
    }
}

impl Catalog {
    /// The failure predicate F (always id 0).
    pub fn failure(&self) -> PredId {
        PredId(0)
    }

    pub fn len(&self) -> usize {
        self.predicates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.predicates.is_empty()
    }

    pub fn get(&self, id: PredId) -> Option<&Predicate> {
        self.predicates.get(id.0 as usize)
    }

    /// The predicate with this key, if it was learned.
    pub fn find(&self, key: &PredKey) -> Option<PredId> {
        if self.index.is_empty() && !self.predicates.is_empty() {
            return self.predicates.iter().find(|p| &p.key == key).map(|p| p.id);
        }
        self.index.get(key).copied()
    }

    /// Rebuilds the key index (after deserialising).
    pub fn reindex(&mut self) {
        self.index = self.predicates.iter().map(|p| (p.key, p.id)).collect();
    }

    fn from_parts(
        predicates: Vec<Predicate>,
        passing_runs: u32,
        failing_runs: u32,
        session: &Session,
    ) -> Catalog {
        let internal = session.functions.iter().filter(|f| f.internal).map(|f| f.id).collect();
        let pointer_args = session.functions.iter().map(index::pointer_mask).collect();
        let mut c = Catalog {
            predicates,
            passing_runs,
            failing_runs,
            internal,
            pointer_args,
            index: HashMap::new(),
        };
        c.reindex();
        c
    }

    /// Evaluates every predicate on `run` against the learned baseline.
    pub fn evaluate(&self, run: &Run) -> RunTruth {
        eval::evaluate(self, run, None)
    }

    /// Evaluates only `ids` (and F) — the live oracle's question "which of
    /// these candidates held in this intervened run, and did it fail?".
    pub fn evaluate_only(&self, run: &Run, ids: &BTreeSet<PredId>) -> RunTruth {
        eval::evaluate(self, run, Some(ids))
    }
}

#[cfg(test)]
mod tests;
