//! What every kind's learner starts from: per-function facts and the
//! session's thread classes ([`Funcs`]), the passing runs' baseline per
//! call site ([`Baseline`]), the error test of a return type, and the
//! learned predicate before it gets its id and words.

use serde::{Deserialize, Serialize};

use super::{Anchor, Condition, ExtractConfig, PredKey, index::RunIndex};
use crate::model::identity::{ClassId, Classes, looks_like_address};
use crate::{
    model::{FuncId, Intervention, Role, Run, Site, ValueKind, ValueType},
    util::fxhash::{FxMap, FxSet},
};

/// What the passing runs showed for one call site.
#[derive(Clone, Debug, Default)]
pub(super) struct SiteStats {
    /// Passing runs that returned from this instance.
    pub returned: u32,
    /// Distinct return values with counts (capped; only the most common
    /// matter for interventions).
    pub values: Vec<(i64, u32)>,
    /// More distinct values than `values` keeps.
    pub many_values: bool,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Some passing run ended inside this call: its longest duration is
    /// unknown, so "too slow" cannot be decided.
    pub unfinished: bool,
    /// Per argument: the value every passing run passed, if they agreed.
    pub args: [Option<i64>; 3],
    /// Per argument: passing runs passed different values.
    pub args_varied: [bool; 3],
}

const MAX_VALUES: usize = 8;

impl SiteStats {
    pub fn uniform(&self) -> Option<i64> {
        match (self.values.as_slice(), self.many_values) {
            ([(v, _)], false) => Some(*v),
            _ => None,
        }
    }

    /// The most common passing value that is not an error.
    pub fn usual(&self, is_error: impl Fn(i64) -> bool) -> Option<i64> {
        self.values
            .iter()
            .filter(|(v, _)| !is_error(*v))
            .max_by_key(|&&(v, n)| (n, std::cmp::Reverse(v)))
            .map(|&(v, _)| v)
    }

    pub fn add_value(&mut self, v: i64) {
        if let Some(e) = self.values.iter_mut().find(|(x, _)| *x == v) {
            e.1 += 1;
        } else if self.values.len() < MAX_VALUES {
            self.values.push((v, 1));
        } else {
            self.many_values = true;
        }
    }

    /// The uniform value of argument `i`, when passing runs agreed.
    pub fn arg(&self, i: usize) -> Option<i64> {
        if self.args_varied[i] { None } else { self.args[i] }
    }
}

pub(super) struct Baseline {
    pub sites: FxMap<Site, SiteStats>,
    /// (func, role) → (min, max) calls over passing runs (0 where absent).
    pub counts: FxMap<(FuncId, Role), (u32, u32)>,
}

/// Per-function facts extraction needs, and the session's classes.
pub(super) struct Funcs {
    pub keep: Vec<bool>,
    pub masks: Vec<u8>,
    pub ret: Vec<ValueType>,
    pub params: Vec<[ValueType; 3]>,
    /// Return values that would restate the failure.
    pub restates: Vec<bool>,
    pub classes: Classes,
    /// (function, class) pairs whose calls are told apart by caller.
    pub by_caller: FxSet<(FuncId, ClassId)>,
    /// What aid's sync-point probes do to locks (`sections.rs`).
    pub lock_ops: Vec<LockOp>,
    /// Lock acquisitions (1) and releases (2) among them, for cycles.
    pub lock_calls: Vec<u8>,
    /// aid's statement points among them (`statements.rs`).
    pub points: Points,
    /// What each function's entry reads of an argument's pointee.
    pub pointees: Vec<Option<crate::model::Pointee>>,
}

impl Funcs {
    pub fn keep(&self, f: FuncId) -> bool {
        self.keep.get(f as usize).copied().unwrap_or(false)
    }

    pub fn mask(&self, f: FuncId) -> u8 {
        self.masks.get(f as usize).copied().unwrap_or(0)
    }

    pub fn pointee(&self, f: FuncId) -> Option<&crate::model::Pointee> {
        self.pointees.get(f as usize).and_then(Option::as_ref)
    }

    pub fn ret(&self, f: FuncId) -> ValueType {
        self.ret.get(f as usize).copied().unwrap_or_default()
    }

    /// Whether argument `i` of `f` carries a value (not an address).
    pub fn value_arg(&self, f: FuncId, i: usize) -> bool {
        self.params.get(f as usize).is_some_and(|p| {
            matches!(p[i].kind, ValueKind::Signed | ValueKind::Unsigned | ValueKind::Bool)
        })
    }

    /// Value predicates make sense: the value is not an address, and is
    /// not the failure itself.
    pub fn value_ret(&self, f: FuncId) -> bool {
        !self.restates.get(f as usize).copied().unwrap_or(false)
            && !matches!(self.ret(f).kind, ValueKind::Void | ValueKind::Float)
    }

    /// Whether the role's calls get per-call keys.
    pub fn single(&self, idx: &RunIndex<'_>, role: Role) -> bool {
        idx.class.get(&role).is_some_and(|&c| self.classes.single(c) == Some(role))
    }

    pub fn index<'r>(&self, run: &'r Run) -> RunIndex<'r> {
        RunIndex::with_groups(run, |f| self.keep(f), &self.classes, &self.by_caller)
    }
}

/// Which error test applies to a return type: (negative, zero), or None
/// when the type has no error values we can recognise.
pub(super) fn error_test(config: &ExtractConfig, t: ValueType) -> Option<(bool, bool)> {
    let e = config.error;
    let (negative, zero) = match t.kind {
        ValueKind::Void | ValueKind::Float => return None,
        ValueKind::Pointer => (false, e.null_pointer),
        ValueKind::Signed | ValueKind::Unknown => (e.negative, e.zero),
        ValueKind::Unsigned | ValueKind::Bool => (false, e.zero),
    };
    (negative || zero).then_some((negative, zero))
}

/// A value that may be an address in this run only: never forced into
/// another run (ASLR moves everything).
pub(super) fn run_local(t: ValueType, v: i64) -> bool {
    t.may_be_pointer() && v != 0 && looks_like_address(v)
}

/// A learned predicate before it gets its id and words.
pub(super) type Learned = (PredKey, Condition, Anchor, Option<Intervention>);

/// What a synchronisation-point function does to a lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockOp {
    /// Nothing to a lock (a traced function, a semaphore, a sleep).
    #[default]
    None,
    /// Takes the lock its first argument points to, exclusively.
    Acquire,
    /// Lets go of the lock its first argument points to.
    Release,
    /// A condition wait: lets go of the mutex its second argument points
    /// to, and takes it again before it returns.
    Wait,
}

/// aid's statement points of a session (`statements.rs`): for each function id, the traced
/// function it lies in (by the point's symbol, `parent+0x12`), or None.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Points {
    parent: Vec<Option<FuncId>>,
}

impl Points {
    pub fn new(functions: &[crate::model::Function]) -> Points {
        let parent = functions
            .iter()
            .map(|f| {
                if f.probe != crate::model::Probe::Statement {
                    return None;
                }
                let (base, _) = f.symbol.rsplit_once('+')?;
                functions
                    .iter()
                    .find(|g| {
                        g.probe == crate::model::Probe::Call && !g.internal && g.symbol == base
                    })
                    .map(|g| g.id)
            })
            .collect();
        Points { parent }
    }

    pub fn is_point(&self, f: FuncId) -> bool {
        self.parent.get(f as usize).is_some_and(Option::is_some)
    }

    /// The traced function statement point `f` lies in.
    pub fn parent(&self, f: FuncId) -> Option<FuncId> {
        self.parent.get(f as usize).copied().flatten()
    }

    pub fn any(&self) -> bool {
        self.parent.iter().any(Option::is_some)
    }

    /// Its rank among the points of its function (0-based).
    pub fn rank(&self, point: FuncId) -> u8 {
        let Some(Some(p)) = self.parent.get(point as usize) else { return 0 };
        self.parent[..point as usize].iter().filter(|q| **q == Some(*p)).count() as u8
    }

    /// The point of `func` of that rank.
    pub fn of_rank(&self, func: FuncId, rank: u8) -> Option<FuncId> {
        self.parent
            .iter()
            .enumerate()
            .filter(|(_, q)| **q == Some(func))
            .nth(rank as usize)
            .map(|(i, _)| i as FuncId)
    }
}
