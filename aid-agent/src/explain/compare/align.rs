//! Aligning two runs (seed 001 §III: "we assume we can properly align the
//! control flow and the variables of the two executions"). An aligned
//! point is (role, function, k, entry|exit), with roles named by class so
//! that the same thread has the same name in both runs; a key present in
//! one run only is an omission. Values are compared as the program sees
//! them: numbers as numbers, pointers by canonical object name.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::{
    explain::{
        access::{Access, AccessSpec, Objects, RunAccesses, accesses_watched},
        objects::Globals,
        slice::{EdgeKind, data_sources},
        watch::Watched,
    },
    model::{FuncId, Function, Point, Run, ValueKind, identity::Slot},
};

/// A call, the same in every run: the k-th call of a function on a role.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CallKey {
    pub role: String,
    pub func: FuncId,
    pub instance: u32,
}

/// A value as the program sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Val {
    Num(i64),
    Obj(String),
    /// The call never returned.
    Missing,
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::Num(n) => write!(f, "{n}"),
            Val::Obj(o) => f.write_str(o),
            Val::Missing => f.write_str("(no return)"),
        }
    }
}

/// Which value of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Arg(u8),
    Ret,
}

/// A (function-level) data dependence of one run, between aligned calls.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataDep {
    pub from: CallKey,
    pub to: CallKey,
    pub kind: EdgeKind,
    /// Canonical object name, for `raw` and `rmw`.
    pub object: Option<String>,
}

/// A write an aligned read took its value from: (call, point), or none
/// (the value before the run's first traced write).
pub type Source = Option<(CallKey, Point)>;

/// One run seen through its keys.
#[derive(Clone, Debug)]
pub struct View {
    pub id: u32,
    pub failed: bool,
    pub reason: String,
    pub acc: RunAccesses,
    /// Traced (not internal) calls by key.
    pub index: BTreeMap<CallKey, usize>,
    keys: Vec<Option<CallKey>>,
    pub values: BTreeMap<CallKey, BTreeMap<Field, Val>>,
    /// The run's ds dependences, by target key.
    pub deps: BTreeMap<CallKey, Vec<DataDep>>,
    /// For each read (reader, object): its source.
    pub reads_from: BTreeMap<(CallKey, String), Source>,
    /// Position of each access event (call, point, access, object) in time order.
    pub order: HashMap<(CallKey, Point, Access, String), usize>,
    /// Entry time of each call, for ordering steps.
    pub entry_ns: BTreeMap<CallKey, u64>,
    pub end_ns: u64,
}

impl View {
    pub fn new(
        run: &Run,
        functions: &[Function],
        globals: Option<&Globals>,
        spec: &AccessSpec,
        objects: &mut Objects,
    ) -> View {
        View::watched(run, functions, globals, spec, objects, None)
    }

    /// [`View::new`], with the watched objects of a watched run typed by
    /// what the hardware saw (reads-from edges from real writes).
    pub fn watched(
        run: &Run,
        functions: &[Function],
        globals: Option<&Globals>,
        spec: &AccessSpec,
        objects: &mut Objects,
        watched: Option<&Watched>,
    ) -> View {
        let acc = accesses_watched(run, functions, globals, spec, objects, watched);
        let user: Vec<bool> = run
            .calls
            .iter()
            .map(|c| functions.get(c.func as usize).is_some_and(|f| !f.internal))
            .collect();
        let keys: Vec<Option<CallKey>> = run
            .calls
            .iter()
            .zip(&user)
            .map(|(c, &u)| {
                u.then(|| CallKey {
                    role: acc.roles.name(c.role).to_owned(),
                    func: c.func,
                    instance: c.instance,
                })
            })
            .collect();
        let mut index = BTreeMap::new();
        let mut values = BTreeMap::new();
        let mut entry_ns = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            let Some(k) = k else { continue };
            index.insert(k.clone(), i);
            values.insert(k.clone(), call_values(run, &acc, functions, objects, i));
            entry_ns.insert(k.clone(), run.calls[i].entry_ns);
        }
        let mut deps: BTreeMap<CallKey, Vec<DataDep>> = BTreeMap::new();
        let mut reads_from = BTreeMap::new();
        let ev = &acc.events;
        for (i, k) in keys.iter().enumerate() {
            let Some(k) = k else { continue };
            let sources = data_sources(run, &acc, functions, &user, i);
            let list = deps.entry(k.clone()).or_default();
            for (d, kind, object) in sources.edges {
                if let Some(from) = &keys[d] {
                    list.push(DataDep {
                        from: from.clone(),
                        to: k.clone(),
                        kind,
                        object: object.map(|o| objects.name(o).to_owned()),
                    });
                }
            }
            for (r, w) in sources.reads {
                let source = w.and_then(|w| keys[ev[w].call].clone().map(|key| (key, ev[w].point)));
                reads_from.insert((k.clone(), objects.name(ev[r].object).to_owned()), source);
            }
        }
        let order = ev
            .iter()
            .enumerate()
            .filter_map(|(p, e)| {
                keys[e.call]
                    .clone()
                    .map(|k| ((k, e.point, e.access, objects.name(e.object).to_owned()), p))
            })
            .collect();
        View {
            id: run.id,
            failed: run.failed(),
            reason: run.outcome.reason.clone(),
            acc,
            index,
            keys,
            values,
            deps,
            reads_from,
            order,
            entry_ns,
            end_ns: run.end_ns,
        }
    }

    pub fn key(&self, call: usize) -> Option<&CallKey> {
        self.keys.get(call).and_then(Option::as_ref)
    }

    /// Every key with a given role/function/instance, for resolving targets.
    pub fn keys(&self) -> impl Iterator<Item = &CallKey> {
        self.index.keys()
    }
}

/// The values of call `i` that can be compared across runs.
fn call_values(
    run: &Run,
    acc: &RunAccesses,
    functions: &[Function],
    objects: &Objects,
    i: usize,
) -> BTreeMap<Field, Val> {
    let c = &run.calls[i];
    let f = &functions[c.func as usize];
    let ptr = |slot| acc.pointers[i].iter().find(|(s, _)| *s == slot).map(|(_, o)| *o);
    let mut out = BTreeMap::new();
    for a in 0..f.params.len().min(3) {
        let v = match ptr(Slot::Arg(a as u8)) {
            Some(o) => Val::Obj(objects.name(o).to_owned()),
            None => Val::Num(c.args[a]),
        };
        out.insert(Field::Arg(a as u8), v);
    }
    if f.ret.kind != ValueKind::Void {
        let v = match (c.ret, ptr(Slot::Ret)) {
            (None, _) => Val::Missing,
            (Some(_), Some(o)) => Val::Obj(objects.name(o).to_owned()),
            (Some(r), None) => Val::Num(r),
        };
        out.insert(Field::Ret, v);
    }
    out
}

/// The fields of `key` whose values differ between the two views
/// (`None` when the call is in one run only).
pub fn differing_fields(a: &View, b: &View, key: &CallKey) -> Option<Vec<(Field, Val, Val)>> {
    let (va, vb) = (a.values.get(key)?, b.values.get(key)?);
    let fields: BTreeSet<&Field> = va.keys().chain(vb.keys()).collect();
    Some(
        fields
            .into_iter()
            .filter_map(|f| {
                let (x, y) = (
                    va.get(f).cloned().unwrap_or(Val::Missing),
                    vb.get(f).cloned().unwrap_or(Val::Missing),
                );
                (x != y).then_some((*f, x, y))
            })
            .collect(),
    )
}
