//! The test a predicate applies to a run ([`Condition`]), with the
//! baseline numbers it compares to: what makes a [`super::Catalog`]
//! evaluate new runs on its own.

use serde::{Deserialize, Serialize};

use super::{ObjectName, PairMember};
use crate::model::Role;

/// One call's expected value, for conditions over a group of calls:
/// (role, instance, value every passing run had there).
pub type Expected = (Role, u32, i64);

/// A field of a function's [`crate::model::Pointee`] two calls of it
/// agree on: the argument register it was read through, and the field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SameField {
    pub arg: u8,
    pub field: crate::model::PointeeField,
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
    /// Groups: some call's ret ≠ what every passing run returned for that
    /// call (calls whose passing values varied are not looked at).
    RetNotPerCall {
        expected: Vec<Expected>,
    },
    /// ret < 0 (when `negative`) or ret = 0 (when `zero`); groups: some
    /// call's.
    ErrorValue {
        negative: bool,
        zero: bool,
    },
    /// duration > max_ns (a call still running at the end counts from its
    /// entry to the end of the run); groups: some call's.
    ///
    /// The threshold lies halfway between the slowest passing run
    /// (`passing_ns`) and the fastest failing run slower than that by the
    /// margin (`failing_ns`): on the recorded runs that is the same test as
    /// "clearly slower than every passing run", but a later passing run that
    /// is a little slower than any seen before is not taken for a failing
    /// one.
    LongerThan {
        max_ns: u64,
        passing_ns: u64,
        failing_ns: u64,
    },
    /// duration < min_ns, halfway between the fastest passing run and the
    /// slowest failing run faster than that by the margin.
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
    /// argument ≠ value.
    ArgNot {
        value: i64,
    },
    /// Groups: some call's argument ≠ what every passing run passed there.
    ArgNotPerCall {
        expected: Vec<Expected>,
    },
    /// the first call's exit precedes the second call's entry.
    EndsBefore,
    /// the first call's entry precedes the second call's entry.
    EntersBefore,
    /// the first call's exit comes while the second runs: after its entry
    /// and before its end (its exit, or the run's end when it never
    /// returned), by `pairs::EXIT_TIE_NS` at least.
    ExitsBefore,
    /// the two calls' intervals intersect and they share a pointer-like
    /// argument.
    OverlapSamePointer,
    /// [`Condition::OverlapSamePointer`] on `object` (its canonical name),
    /// which watched re-runs showed the first call (`a_writes`) and/or the
    /// second (`b_writes`) writing, in `runs` re-runs.
    DataRace {
        object: String,
        a_writes: bool,
        b_writes: bool,
        runs: u32,
    },
    /// the two calls' intervals intersect.
    Intersect,
    /// Groups of pairs: any of these site pairs satisfies `relation` (one
    /// of the pairwise conditions above).
    AnyPair {
        relation: Box<Condition>,
        pairs: Vec<PairMember>,
    },
    /// The key's call started after every pair's first call (`a`) had
    /// ended: every pair holds [`Condition::EndsBefore`]; anchored when
    /// the last of them ended. With `any`, also at least one of those
    /// pairs holds (they share their later call: it was not the first of
    /// them, `after_all::LATE`).
    AfterAll {
        pairs: Vec<PairMember>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        any: Vec<PairMember>,
    },
    /// Groups: some call of the first group and some call of the second,
    /// on different threads, overlap in time — on the same object when
    /// `object` names it (its canonical name, [`ObjectName`]), on any
    /// shared object when `shared`, regardless otherwise; and, with
    /// `same`, with equal contents in one field of what an argument of
    /// each pointed to (the same SKU, the same seat).
    GroupOverlap {
        shared: bool,
        object: Option<ObjectName>,
        #[serde(default)]
        same: Option<SameField>,
    },
    /// Groups: some call of the second group held a lock between two
    /// critical sections on it of some call of the first, on another
    /// thread.
    InterleavedSections,
    /// Groups: some call of the second group held the lock of some call
    /// of the first group's first section on it, after that call began
    /// and before that section, on another thread.
    TakenBeforeFirstSection,
    /// The first call's first section on a lock both calls take came
    /// before the second call's first section on it.
    SectionsInOrder,
    /// The second call's window from its statement point of rank
    /// `PredKey::arg` overlapped the first call's from `PredKey::callee`.
    RunsBetweenStatements,
    /// Groups: some call of the first group held a lock and asked for a
    /// second while some call of the second group, on another thread, held
    /// the second and asked for the first; `held` and `takes` name the two
    /// locks by the order the first call took them (1-based; 0 when the
    /// failing runs disagreed).
    LockCycle {
        held: u32,
        takes: u32,
    },
    /// Groups: two calls (on any of the class's threads) read equal
    /// contents for one field of their pointee; anchored at the later
    /// one's entry.
    KeyRepeats {
        same: SameField,
    },
    /// Groups: some call of the first group started when no more calls of
    /// the second group had returned than calls of the first had started
    /// before it.
    AheadOfProducer,
}
