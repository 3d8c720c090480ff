//! Predicates over recorded runs (AID Sec. 3.1, Fig. 2, plus CBI and
//! concurrency predicates): what they are, how they are learned from
//! labelled runs, and how they are evaluated on any run — the original ones
//! for statistical debugging, or a new intervened run for the live oracle.
//!
//! A predicate is learned once, from the passing runs (the baseline: return
//! values, duration range, call counts, orders and overlaps they showed) and
//! the failing runs (where a behaviour departs from that baseline). Its
//! [`PredKey`] names the calls it is about so that the same key means the
//! same thing in every run: one call site (function, thread role,
//! instance), or a *group* — every call of a function on the threads of a
//! class (threads grouped by name, e.g. the workers of a pool), optionally
//! only the calls made from one traced caller — for programs whose threads
//! and call counts vary from run to run. Its [`Condition`] carries the
//! baseline numbers, so a [`Catalog`] evaluates new runs on its own.
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

mod after_all;
mod base;
mod calls;
mod condition;
mod deadlock;
mod describe;
mod eval;
mod groups;
mod index;
mod learn;
mod locks;
pub mod merge;
mod objects;
mod outrun;
mod pairs;
mod races;
mod sections;
mod statements;

pub use crate::model::identity::{ClassId, Classes, ObjectName, class_name};
pub use base::{LockOp, Points};
pub use condition::{Condition, Expected, SameField};
pub use describe::{Described, duration};
pub(crate) use index::callers;
pub use learn::learn;
pub use pairs::PairMember;
pub use races::{RaceEvidence, RaceVerdict};
pub use sections::{lock_ops, takes_without_waiting};

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
    /// Returned a value other than the one every passing run returned for
    /// that call.
    RetDiffers,
    /// Returned an error-class value (negative, NULL, ...; [`ErrorClass`]).
    ErrorReturn,
    /// Ran longer than every passing run of that call (or group of calls),
    /// by a clear margin.
    TooSlow,
    /// Ran shorter than every passing run, by a clear margin.
    TooFast,
    /// Called on a role (or class) more often than any passing run did.
    CountAbove,
    /// Called, but less often than every passing run did.
    CountBelow,
    /// Never called on a role (or class) where every passing run called it.
    NeverCalled,
    /// Received an argument value other than the one every passing run
    /// passed to that call.
    ArgDiffers,
    /// One call ended before another on a different thread started, which
    /// no passing run showed.
    Order,
    /// One call started before another on a different thread started,
    /// which no passing run showed.
    StartsBefore,
    /// Two calls on different threads overlapped in time while receiving
    /// the same object (a data race, Fig. 2 row 1), which no passing run
    /// showed.
    Overlap,
    /// Two calls on different threads that share no object overlapped in
    /// time (one started while the other ran), which no passing run showed.
    Concurrent,
    /// An [`Kind::Overlap`] where one side writes the object: hardware
    /// watchpoints in targeted re-runs saw which of the two calls write it
    /// (`races.rs`).
    DataRace,
    /// A call on another thread held a lock between two critical sections
    /// of one call on that lock (an atomicity violation between lock
    /// sections, `locks.rs`), which no passing run showed.
    Interleaved,
    /// A call on another thread held the lock of a call's first critical
    /// section on it after the call had begun and before that section
    /// (the unlocked check of a check-then-act, `sections.rs`), which no
    /// passing run showed.
    BeforeFirstSection,
    /// Call A's first critical section on a lock came before call B's
    /// first section on it (B on another thread), which no passing run
    /// showed (`sections.rs`).
    SectionOrder,
    /// A call on another thread was between two of its statements (from
    /// its statement point of rank `arg`) while a call was between two of
    /// its own (from the statement point in `callee`), which no passing
    /// run showed (`statements.rs`).
    BetweenStatements,
    /// A call on one thread held a lock and asked for a second one while a
    /// call on another thread held the second and asked for the first (a
    /// lock-order cycle: a deadlock, `deadlock.rs`), which no passing run
    /// showed.
    LockCycle,
    /// A call started only after calls on other threads had all ended
    /// (a conjunction of [`Kind::Order`]s), which no passing run showed
    /// whole although each part alone some passing run showed
    /// (`after_all.rs`).
    AfterAll,
    /// Two calls of a function on the threads of a class were for the
    /// same key (equal contents in one field of what an argument pointed
    /// to: the same SKU added twice); learned when a failing run shows it
    /// and not every passing run does.
    RepeatedKey,
    /// Some call of a function started when no more calls of a function
    /// on another thread had returned than calls of the first had started
    /// before it (a consumer ahead of its producer: a pop before the push
    /// it needs has returned, `outrun.rs`), which no passing run showed.
    Outruns,
    /// One call ended before another on a different thread ended, the
    /// other still running (a thread that goes on past its call, to a
    /// check, before another thread has finished its own: `main` asserts
    /// what a worker it never joined has not yet done), which no passing
    /// run showed.
    EndsFirst,
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
            Kind::ArgDiffers => "arg_differs",
            Kind::Order => "order",
            Kind::StartsBefore => "starts_before",
            Kind::Overlap => "overlap",
            Kind::Concurrent => "concurrent",
            Kind::DataRace => "data_race",
            Kind::Interleaved => "interleaved",
            Kind::BeforeFirstSection => "before_first_section",
            Kind::SectionOrder => "section_order",
            Kind::BetweenStatements => "between_statements",
            Kind::LockCycle => "lock_cycle",
            Kind::RepeatedKey => "repeated_key",
            Kind::AfterAll => "after_all",
            Kind::Outruns => "outruns",
            Kind::EndsFirst => "ends_first",
        }
    }

    /// Kinds that say how the failure comes about (a lock-order cycle,
    /// an interleaving inside a critical section, a race on one object, a
    /// check before its lock) rather than only when or how often calls
    /// ran; the causal search tries them first among unordered candidates
    /// ([`crate::causal::AcDag::says`]).
    pub fn is_mechanism(self) -> bool {
        matches!(
            self,
            Kind::LockCycle
                | Kind::DataRace
                | Kind::Interleaved
                | Kind::BeforeFirstSection
                | Kind::SectionOrder
                | Kind::BetweenStatements
        )
    }

    /// How much a kind says about how the failure comes about, for the
    /// order in which the causal search tries unordered candidates of
    /// equal depth ([`crate::causal::AcDag::says`]), lowest first: 0 a
    /// mechanism ([`Kind::is_mechanism`]); 1 two calls at once on one
    /// object (`overlap`: the object is named); 2 when or how often calls
    /// ran, a value, and the rest; 3 two calls that share no object at
    /// once (`concurrent`: neither an object nor which call came first).
    pub fn says(self) -> u8 {
        match self {
            k if k.is_mechanism() => 0,
            Kind::Overlap => 1,
            Kind::Concurrent => 3,
            _ => 2,
        }
    }

    /// Kinds about a pair of calls.
    pub fn is_pairwise(self) -> bool {
        matches!(
            self,
            Kind::Order
                | Kind::StartsBefore
                | Kind::Overlap
                | Kind::Concurrent
                | Kind::DataRace
                | Kind::Interleaved
                | Kind::BeforeFirstSection
                | Kind::SectionOrder
                | Kind::BetweenStatements
                | Kind::LockCycle
                | Kind::AfterAll
                | Kind::Outruns
                | Kind::EndsFirst
        )
    }
}

/// Which calls of a function a predicate is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "scope")]
pub enum Calls {
    /// The `instance`-th call (1-based) on thread `role`; instance 0: every
    /// call on the role (counts).
    Site { role: Role, instance: u32 },
    /// Every call on the threads of `class`; with `within`, only the calls
    /// whose innermost traced caller on the same thread is that function.
    Group {
        class: ClassId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within: Option<FuncId>,
    },
}

/// The second calls of a pairwise predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Other {
    pub func: FuncId,
    pub calls: Calls,
}

/// A stable name for a predicate: the same key means the same behaviour of
/// the same calls in every run of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PredKey {
    pub kind: Kind,
    pub func: FuncId,
    pub calls: Calls,
    /// The second calls of pairwise kinds: for `Order`, the call that
    /// started after this one ended; for the others, the other call.
    pub other: Option<Other>,
    /// Argument kinds: the argument (0-based). Overlaps for the same key
    /// and repeated keys: the field of the pointee, 1-based.
    #[serde(default)]
    pub arg: u8,
    /// Overlaps for the same key: a traced function both calls went on to
    /// call (both inserted the key they had both looked up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<FuncId>,
}

impl PredKey {
    pub fn failure() -> PredKey {
        PredKey {
            kind: Kind::Failure,
            func: 0,
            calls: Calls::Site { role: 0, instance: 0 },
            other: None,
            arg: 0,
            callee: None,
        }
    }

    /// A key about one call site.
    pub fn at(kind: Kind, site: Site) -> PredKey {
        PredKey {
            kind,
            func: site.func,
            calls: Calls::Site { role: site.role, instance: site.instance },
            other: None,
            arg: 0,
            callee: None,
        }
    }

    /// A pairwise key about two call sites.
    pub fn pair(kind: Kind, a: Site, b: Site) -> PredKey {
        PredKey {
            other: Some(Other {
                func: b.func,
                calls: Calls::Site { role: b.role, instance: b.instance },
            }),
            ..PredKey::at(kind, a)
        }
    }

    /// The call site, for site keys.
    pub fn site(&self) -> Option<Site> {
        match self.calls {
            Calls::Site { role, instance } => Some(Site { func: self.func, role, instance }),
            Calls::Group { .. } => None,
        }
    }

    /// The other call site, for pairwise site keys.
    pub fn other_site(&self) -> Option<Site> {
        match self.other? {
            Other { func, calls: Calls::Site { role, instance } } => {
                Some(Site { func, role, instance })
            }
            _ => None,
        }
    }

    pub fn is_group(&self) -> bool {
        matches!(self.calls, Calls::Group { .. })
    }

    /// Whether this key says all that `general` says about the same calls
    /// and more: an overlap of two groups' calls on one object that adds
    /// "both for the same field" to the plain overlap, or "and both call
    /// g" to the same field. Whenever this one holds, `general` holds.
    pub fn narrows(&self, general: &PredKey) -> bool {
        let same_calls = self.kind == Kind::Overlap
            && general.kind == Kind::Overlap
            && self.is_group()
            && (self.func, self.calls, self.other) == (general.func, general.calls, general.other);
        let adds_field = general.arg == 0 && general.callee.is_none() && self.arg > 0;
        let adds_callee = general.arg > 0
            && general.arg == self.arg
            && general.callee.is_none()
            && self.callee.is_some();
        same_calls && (adds_field || adds_callee)
    }

    /// Whether this key, an interleaving of two groups' critical sections
    /// (a call of one took the lock between two sections of a call of
    /// the other), says all that `general` says and more: `general` is
    /// the plain overlap of the same two groups' calls (at the same time,
    /// or on the same object, with no field or callee added). A call that
    /// holds the lock between two sections of another call runs while
    /// that call runs.
    pub fn interleaves(&self, general: &PredKey) -> bool {
        let ends = |k: &PredKey| {
            let o = k.other?;
            let (a, b) = ((k.func, k.calls), (o.func, o.calls));
            Some(if a <= b { (a, b) } else { (b, a) })
        };
        self.kind == Kind::Interleaved
            && matches!(general.kind, Kind::Overlap | Kind::Concurrent)
            && self.is_group()
            && general.arg == 0
            && general.callee.is_none()
            && ends(self).is_some_and(|e| Some(e) == ends(general))
    }
}

impl fmt::Display for Calls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Calls::Site { role, instance: 0 } => write!(f, "r{role}"),
            Calls::Site { role, instance } => write!(f, "r{role}/#{instance}"),
            Calls::Group { class, within: None } => write!(f, "c{class}"),
            Calls::Group { class, within: Some(w) } => write!(f, "c{class}<f{w}"),
        }
    }
}

impl fmt::Display for PredKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == Kind::Failure {
            return f.write_str("failure");
        }
        write!(f, "{}:f{}/{}", self.kind.name(), self.func, self.calls)?;
        if self.kind == Kind::ArgDiffers {
            write!(f, "/a{}", self.arg)?;
        }
        if let Some(o) = self.other {
            write!(f, "+f{}/{}", o.func, o.calls)?;
        }
        if matches!(self.kind, Kind::Overlap | Kind::RepeatedKey) && self.arg > 0 {
            write!(f, "/k{}", self.arg)?;
        }
        if let Some(g) = self.callee {
            write!(f, "/calls:f{g}")?;
        }
        Ok(())
    }
}

/// Which moment of a run a predicate is placed at for precedence (Sec. 4).
/// Each kind's anchor is never later than the moment its intervention acts
/// (docs/predicates.md has the two side by side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Anchor {
    /// The call's exit (end-time rule, Sec. 4 case 1).
    Exit,
    /// The call's entry (start-time rule, Sec. 4 case 2).
    Entry,
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

/// How far outside the passing range a duration must lie to count as too
/// slow or too fast: beyond the passing extreme by the larger of `abs_ns`
/// and `rel` times that extreme. A duration a few nanoseconds past the
/// passing maximum is noise, not a behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Margin {
    pub abs_ns: u64,
    pub rel: f64,
}

impl Default for Margin {
    fn default() -> Self {
        Margin { abs_ns: 20_000, rel: 0.25 }
    }
}

impl Margin {
    /// The gap a duration needs beyond the passing extreme `ns`.
    pub fn gap(self, ns: u64) -> u64 {
        self.abs_ns.max((ns as f64 * self.rel) as u64)
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
    /// Duration predicates need this margin.
    #[serde(default)]
    pub margin: Margin,
    /// Functions whose return value *is* the failure (`main` always; the
    /// functions of `--fail-if` rules): their return-value predicates
    /// would restate F, so none are learned.
    #[serde(default)]
    pub restates_failure: BTreeSet<FuncId>,
}

impl Default for ExtractConfig {
    fn default() -> Self {
        ExtractConfig {
            error: ErrorClass::default(),
            order_window: 2,
            margin: Margin::default(),
            restates_failure: BTreeSet::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Predicate {
    pub id: PredId,
    pub key: PredKey,
    /// Plain words, with function and role names.
    pub description: String,
    /// The same, structured, for reports.
    #[serde(default)]
    pub described: Described,
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
    /// Per function: what aid's sync-point probes do to a lock, for the
    /// critical-section tests on new runs.
    #[serde(default)]
    pub lock_ops: Vec<LockOp>,
    /// Per function: 1 when it is aid's sync-point probe on an exclusive
    /// lock's acquisition, 2 on its release, for the lock-cycle test on new
    /// runs.
    #[serde(default)]
    pub lock_calls: Vec<u8>,
    /// aid's statement points ([`crate::model::Probe::Statement`]), for
    /// the window tests on new runs.
    #[serde(default)]
    pub points: Points,
    /// Thread classes by name (class id = index), with the roles each had
    /// in the learning runs.
    #[serde(default)]
    pub classes: Classes,
    /// (function, class) pairs whose calls form one group per traced
    /// caller.
    #[serde(default)]
    pub by_caller: Vec<(FuncId, ClassId)>,
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
    /// Predicates the run left undecided rather than false: an order
    /// "A ends (starts) before B starts" whose A had ended (started) while
    /// B had not started by the run's end. Such an order is settled when A
    /// ends (its anchor, [`Anchor::FirstExit`]); B missing only says the
    /// run stopped first, or something later on B's thread kept B from
    /// starting. Learning treats it as unobserved, as before; the engine's
    /// confounding guard does not count it as changed.
    undecided: BitSet,
}

impl RunTruth {
    /// Whether the run left the predicate undecided ([`RunTruth`]'s
    /// `undecided`).
    pub fn undecided(&self, id: PredId) -> bool {
        self.undecided.contains(id.0 as usize)
    }

    /// The predicates the run left undecided.
    pub fn undecided_ids(&self) -> BTreeSet<PredId> {
        self.undecided.iter().map(|i| PredId(i as u32)).collect()
    }

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

    /// The interventions that negate the predicates of `group` (those that
    /// have one): what a round on the group installs.
    pub fn interventions(&self, group: &BTreeSet<PredId>) -> Vec<Intervention> {
        group.iter().filter_map(|&p| self.get(p)?.intervention.clone()).collect()
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
        classes: Classes,
    ) -> Catalog {
        let internal = session.functions.iter().filter(|f| f.internal).map(|f| f.id).collect();
        let pointer_args = session.functions.iter().map(index::pointer_mask).collect();
        let lock_ops = lock_ops(&session.functions);
        let lock_calls = deadlock::lock_calls(&session.functions);
        let points = Points::new(&session.functions);
        let mut c = Catalog {
            predicates,
            passing_runs,
            failing_runs,
            internal,
            pointer_args,
            lock_ops,
            lock_calls,
            points,
            classes,
            by_caller: Vec::new(),
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
#[cfg(test)]
mod tests_deadlock;
#[cfg(test)]
pub(crate) mod tests_groups;
#[cfg(test)]
mod tests_outrun;
#[cfg(test)]
mod tests_pairs;
#[cfg(test)]
pub(crate) mod tests_sections;
#[cfg(test)]
mod tests_turns;
