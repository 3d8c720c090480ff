//! The dual slice (seed 001 Alg. 1) and the differences it is made of.
//!
//! From the target, follow each run's data dependences backwards and add a
//! dependence only where it can carry a difference: its source exists in
//! one run only, its source's values differ, or the dependence itself
//! exists in one run only (the read took its value from another write —
//! a reads-from difference, which for threads is an order difference).
//! Dependences whose source is present and equal in both runs "cannot
//! induce the criterion" and stop the walk.
//!
//! The differences found become the nodes of a graph, cause → effect,
//! that the chain is read from: value differences of calls, order flips,
//! reads-from changes without a flip, omissions, and the outcome.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::align::{CallKey, DataDep, Field, Source, Val, View, differing_fields};
use crate::{
    explain::{access::Access, slice::EdgeKind},
    model::Point,
};

/// The failing (`Fail`) or the passing (`Pass`) run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Fail,
    Pass,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Fail => Side::Pass,
            Side::Pass => Side::Fail,
        }
    }
}

/// One difference between the runs. Values are (failing, passing).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Diff {
    Value {
        call: CallKey,
        fields: Vec<(Field, Val, Val)>,
    },
    /// `read` (at its entry) and the write `write` of `object` came in one
    /// order in the failing run (`read_first`: the read first) and in the
    /// other in the passing run.
    Order {
        read: CallKey,
        write: (CallKey, Point),
        object: String,
        read_first: bool,
    },
    /// The read took its value from another write, with no order flip
    /// between the two.
    ReadsFrom {
        reader: CallKey,
        object: String,
        fail: Source,
        pass: Source,
    },
    /// The call happened in one run only.
    Omitted {
        call: CallKey,
        present_in: Side,
    },
    /// How the runs ended.
    Outcome {
        fail: String,
        pass: String,
    },
}

/// The dual slice: the dependences, of either run, that carry differences.
#[derive(Clone, Debug, Default)]
pub struct DualSlice {
    pub calls: BTreeSet<CallKey>,
    pub deps: BTreeSet<(Side, DataDep)>,
}

/// Differences, and which cause which.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub diffs: Vec<Diff>,
    /// `causes[d]`: the differences `d` was derived from.
    pub causes: Vec<BTreeSet<usize>>,
}

impl Graph {
    fn node(&mut self, d: Diff) -> usize {
        if let Some(i) = self.diffs.iter().position(|x| *x == d) {
            return i;
        }
        self.diffs.push(d);
        self.causes.push(BTreeSet::new());
        self.diffs.len() - 1
    }

    fn edge(&mut self, cause: usize, effect: usize) {
        if cause != effect {
            self.causes[effect].insert(cause);
        }
    }
}

/// Alg. 1 from `target` over the two runs.
pub fn dual_slice(fail: &View, pass: &View, target: &CallKey) -> DualSlice {
    let mut out = DualSlice::default();
    let mut work = vec![target.clone()];
    while let Some(k) = work.pop() {
        if !out.calls.insert(k.clone()) {
            continue;
        }
        for (side, v, o) in [(Side::Fail, fail, pass), (Side::Pass, pass, fail)] {
            for dep in v.deps.get(&k).into_iter().flatten() {
                let exclusive_source = !o.index.contains_key(&dep.from);
                let exclusive_dep = !o.deps.get(&k).is_some_and(|ds| ds.contains(dep));
                let values_differ =
                    differing_fields(fail, pass, &dep.from).is_some_and(|f| !f.is_empty());
                if exclusive_source || exclusive_dep || values_differ {
                    out.deps.insert((side, dep.clone()));
                    work.push(dep.from.clone());
                }
            }
        }
    }
    out
}

/// The differences of the dual slice as a cause → effect graph. With
/// `outcome`, the target call's difference is itself a cause of the
/// outcome difference, which is then the graph's sink.
pub fn graph(
    fail: &View,
    pass: &View,
    slice: &DualSlice,
    target: &CallKey,
    outcome: bool,
) -> (Graph, usize) {
    let mut g = Graph::default();
    let mut effect_of: BTreeMap<CallKey, usize> = BTreeMap::new();
    for k in &slice.calls {
        match differing_fields(fail, pass, k) {
            Some(f) if f.is_empty() => {}
            Some(fields) => {
                effect_of.insert(k.clone(), g.node(Diff::Value { call: k.clone(), fields }));
            }
            None => {
                let present_in = if fail.index.contains_key(k) { Side::Fail } else { Side::Pass };
                effect_of.insert(k.clone(), g.node(Diff::Omitted { call: k.clone(), present_in }));
            }
        }
    }
    for (side, dep) in &slice.deps {
        let Some(&effect) = effect_of.get(&dep.to) else { continue };
        let other = if *side == Side::Fail { pass } else { fail };
        let exclusive_dep = !other.deps.get(&dep.to).is_some_and(|ds| ds.contains(dep));
        if dep.kind == EdgeKind::Raw
            && exclusive_dep
            && let Some(object) = &dep.object
        {
            for d in reads_from_diffs(fail, pass, &dep.to, object) {
                let cause = g.node(d);
                g.edge(cause, effect);
            }
        }
        if let Some(&cause) = effect_of.get(&dep.from) {
            g.edge(cause, effect);
        }
    }
    let target_node = match effect_of.get(target) {
        Some(&t) if outcome => {
            let o = g.node(Diff::Outcome { fail: fail.reason.clone(), pass: pass.reason.clone() });
            g.edge(t, o);
            o
        }
        Some(&t) => t,
        None => g.node(Diff::Outcome { fail: fail.reason.clone(), pass: pass.reason.clone() }),
    };
    (g, target_node)
}

/// Why `reader` read `object` from another write: an order flip between
/// the read and one of the two sources, else a bare reads-from change.
fn reads_from_diffs(fail: &View, pass: &View, reader: &CallKey, object: &str) -> Vec<Diff> {
    let key = (reader.clone(), object.to_owned());
    let (Some(sf), Some(sp)) = (fail.reads_from.get(&key), pass.reads_from.get(&key)) else {
        return Vec::new();
    };
    if sf == sp {
        return Vec::new();
    }
    let read = (reader.clone(), Point::Entry, Access::R, object.to_owned());
    let pos = |v: &View, w: &(CallKey, Point)| {
        v.order.get(&(w.0.clone(), w.1, Access::W, object.to_owned())).copied()
    };
    let mut out = Vec::new();
    // The passing run's source came after the read in the failing run.
    if let Some(w) = sp
        && let (Some(r), Some(wp)) = (fail.order.get(&read), pos(fail, w))
        && *r < wp
    {
        out.push(Diff::Order {
            read: reader.clone(),
            write: w.clone(),
            object: object.to_owned(),
            read_first: true,
        });
    }
    // The failing run's source came after the read in the passing run.
    if let Some(w) = sf
        && let (Some(r), Some(wp)) = (pass.order.get(&read), pos(pass, w))
        && *r < wp
    {
        out.push(Diff::Order {
            read: reader.clone(),
            write: w.clone(),
            object: object.to_owned(),
            read_first: false,
        });
    }
    if out.is_empty() {
        out.push(Diff::ReadsFrom {
            reader: reader.clone(),
            object: object.to_owned(),
            fail: sf.clone(),
            pass: sp.clone(),
        });
    }
    out
}
