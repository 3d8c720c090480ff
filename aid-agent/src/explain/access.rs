//! Access events (spec §0): what mining, slicing and comparison see of a
//! recorded run. A traced call that passes a *shared* object (one passed as
//! a pointer argument by at least two roles in the run) becomes reads and
//! writes of that object, and sync calls become writes of their lock:
//!
//! - without watchpoints we do not know what a call does to the object, so
//!   a call is R at entry and W at exit (read-modify-write) unless the user
//!   says it only reads (`--reads`) or only writes (`--writes`); two
//!   overlapping `upd(A)` from two roles then look like the paper's lost
//!   update `R1 R2 W1 W2`;
//! - a lock acquisition is W(m) at its exit (when it holds the lock), a
//!   release W(m) at its entry (as both papers model locks); the lock is
//!   the object `lock@<name>`, apart from data at the same address;
//! - a call is the innermost traced frame that touches the object: when a
//!   traced call inside it (same thread, nested in time) passes the same
//!   object, the inner calls carry the accesses and the outer one carries
//!   none (`increment(c)` is `load(c)` then `store(c)`).
//!
//! Dependences between accesses of different roles are *immediate*
//! (seed 002 §2.2, seed 003 Eq. 4): flow when the write is the last one
//! before the read, anti when it is the first one after the read, output
//! for two consecutive writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use super::{
    ExplainError,
    objects::{self, Globals},
    watch::Watched,
};
use crate::model::{
    FuncId, Function, Point, Role, Run, Session,
    identity::{RoleNames, Slot},
};

/// Index into [`Substrate::objects`].
pub type ObjId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Access {
    R,
    W,
}

/// What a function does to the objects it is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessClass {
    Read,
    Write,
    ReadWrite,
    /// Takes a lock, semaphore or similar (W at exit).
    Acquire,
    /// Releases one (W at entry).
    Release,
}

/// How functions are classed: sync calls by name, the rest read-write
/// unless the user declared them pure reads or pure writes.
#[derive(Clone, Debug, Default)]
pub struct AccessSpec {
    reads: Option<GlobSet>,
    writes: Option<GlobSet>,
}

fn globs(option: &'static str, patterns: &[String]) -> Result<Option<GlobSet>, ExplainError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        for one in p.split(',').filter(|s| !s.is_empty()) {
            let g = Glob::new(one).map_err(|e| ExplainError::Pattern {
                option,
                pattern: one.to_owned(),
                reason: e.kind().to_string(),
            })?;
            b.add(g);
        }
    }
    b.build().map(Some).map_err(|e| ExplainError::Pattern {
        option,
        pattern: p(patterns),
        reason: e.to_string(),
    })
}

fn p(patterns: &[String]) -> String {
    patterns.join(",")
}

const ACQUIRE: &[&str] = &[
    "pthread_mutex_lock",
    "pthread_mutex_trylock",
    "pthread_mutex_timedlock",
    "pthread_spin_lock",
    "pthread_spin_trylock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_tryrdlock",
    "pthread_rwlock_trywrlock",
    "pthread_rwlock_timedrdlock",
    "pthread_rwlock_timedwrlock",
    "sem_wait",
    "sem_trywait",
    "sem_timedwait",
    "mtx_lock",
    "mtx_trylock",
    "mtx_timedlock",
];
const RELEASE: &[&str] = &[
    "pthread_mutex_unlock",
    "pthread_spin_unlock",
    "pthread_rwlock_unlock",
    "sem_post",
    "mtx_unlock",
];

impl AccessSpec {
    /// `reads` and `writes` are globs over function names (comma-separated
    /// lists allowed), as given to `--reads` and `--writes`.
    pub fn new(reads: &[String], writes: &[String]) -> Result<AccessSpec, ExplainError> {
        Ok(AccessSpec { reads: globs("reads", reads)?, writes: globs("writes", writes)? })
    }

    pub fn class(&self, f: &Function) -> AccessClass {
        let name = f.name.as_str();
        // glibc's aliases (`__pthread_mutex_unlock`) are the same calls.
        let base = name.trim_start_matches('_');
        if ACQUIRE.contains(&base) || name.ends_with("::lock") || name.ends_with("::try_lock") {
            return AccessClass::Acquire;
        }
        if RELEASE.contains(&base) || name.ends_with("::unlock") {
            return AccessClass::Release;
        }
        let matches = |set: &Option<GlobSet>| set.as_ref().is_some_and(|s| s.is_match(name));
        match (matches(&self.reads), matches(&self.writes)) {
            (true, false) => AccessClass::Read,
            (false, true) => AccessClass::Write,
            _ => AccessClass::ReadWrite,
        }
    }
}

/// One read or write of a shared object by a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Index into the run's `calls`.
    pub call: usize,
    pub role: Role,
    pub func: FuncId,
    /// The function of the enclosing traced call, if any: with `func`,
    /// where in the program the access comes from (the "line" of seed 002
    /// Def. 1 at function level).
    pub caller: Option<FuncId>,
    pub instance: u32,
    pub point: Point,
    pub access: Access,
    pub object: ObjId,
    pub t_ns: u64,
}

/// The access trace of one run.
#[derive(Clone, Debug)]
pub struct RunAccesses {
    pub run: u32,
    pub failed: bool,
    pub roles: RoleNames,
    /// In time order.
    pub events: Vec<Event>,
    /// Every pointer each call passed or returned, by canonical name.
    pub pointers: Vec<Vec<(Slot, ObjId)>>,
    /// Objects passed by at least two roles.
    pub shared: BTreeSet<ObjId>,
}

/// Object names shared by every run of a session.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    names: Vec<String>,
    index: HashMap<String, ObjId>,
}

impl Objects {
    pub fn intern(&mut self, name: &str) -> ObjId {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as ObjId;
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), id);
        id
    }

    pub fn name(&self, id: ObjId) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }

    pub fn id(&self, name: &str) -> Option<ObjId> {
        self.index.get(name).copied()
    }

    /// Every name, indexed by id.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// The access traces of a session's runs.
#[derive(Clone, Debug)]
pub struct Substrate {
    pub functions: Vec<Function>,
    pub objects: Objects,
    pub runs: Vec<RunAccesses>,
}

impl Substrate {
    /// Access traces of `runs` (ids; all complete runs made without
    /// interventions when empty).
    pub fn build(
        session: &Session,
        globals: Option<&Globals>,
        spec: &AccessSpec,
        runs: &[u32],
    ) -> Substrate {
        Substrate::build_watched(session, globals, spec, runs, &BTreeMap::new())
    }

    /// [`Substrate::build`], with the runs in `watched` typed by what
    /// hardware watchpoints saw of their watched objects.
    pub fn build_watched(
        session: &Session,
        globals: Option<&Globals>,
        spec: &AccessSpec,
        runs: &[u32],
        watched: &BTreeMap<u32, Watched>,
    ) -> Substrate {
        let mut objects = Objects::default();
        let chosen = session.runs.iter().filter(|r| {
            if runs.is_empty() {
                r.complete && r.interventions.is_empty()
            } else {
                runs.contains(&r.id)
            }
        });
        let runs = chosen
            .map(|r| {
                let w = watched.get(&r.id);
                accesses_watched(r, &session.functions, globals, spec, &mut objects, w)
            })
            .collect();
        Substrate { functions: session.functions.clone(), objects, runs }
    }

    pub fn function_name(&self, id: FuncId) -> &str {
        self.functions.get(id as usize).map_or("?", |f| f.name.as_str())
    }
}

/// The access trace of one run.
pub fn accesses(
    run: &Run,
    functions: &[Function],
    globals: Option<&Globals>,
    spec: &AccessSpec,
    objects: &mut Objects,
) -> RunAccesses {
    accesses_watched(run, functions, globals, spec, objects, None)
}

/// [`accesses`], with the watched objects of a watched run typed by the
/// accesses the hardware saw: each is an R or W event of the call it was
/// attributed to, at its own time (repeats of the same kind by the same
/// call shown once), and calls passing a watched object no longer guess.
pub fn accesses_watched(
    run: &Run,
    functions: &[Function],
    globals: Option<&Globals>,
    spec: &AccessSpec,
    objects: &mut Objects,
    watched: Option<&Watched>,
) -> RunAccesses {
    let roles = RoleNames::of(run);
    let named = objects::name_pointers(run, functions, &roles, globals);
    // A pointer to a watched address is that object, by the name it was
    // watched under (the run may name it otherwise).
    let watched_name = |i: usize, slot: Slot| -> Option<&str> {
        let w = watched?;
        let c = &run.calls[i];
        let raw = match slot {
            Slot::Arg(a) => c.args[a as usize],
            Slot::Ret => c.ret?,
        };
        w.objects.get(&(raw as u64)).map(String::as_str)
    };
    let pointers: Vec<Vec<(Slot, ObjId)>> = named
        .iter()
        .enumerate()
        .map(|(i, slots)| {
            slots
                .iter()
                .map(|(s, n)| (*s, objects.intern(watched_name(i, *s).unwrap_or(n))))
                .collect()
        })
        .collect();
    let watched_ids: BTreeSet<ObjId> = watched
        .map(|w| w.objects.values().map(|n| objects.intern(n)).collect())
        .unwrap_or_default();
    let mut passed_by: BTreeMap<ObjId, BTreeSet<Role>> = BTreeMap::new();
    for (c, slots) in run.calls.iter().zip(&pointers) {
        for (slot, obj) in slots {
            if matches!(slot, Slot::Arg(_)) {
                passed_by.entry(*obj).or_default().insert(c.role);
            }
        }
    }
    let mut shared: BTreeSet<ObjId> =
        passed_by.iter().filter(|(_, r)| r.len() >= 2).map(|(o, _)| *o).collect();
    shared.extend(watched_ids.iter().copied());
    let classes: Vec<AccessClass> = functions.iter().map(|f| spec.class(f)).collect();
    // Objects each call passes that its accesses are about.
    // A lock is its own object even where it shares its address with the
    // data it protects (a mutex as a struct's first member): `lock@acct`.
    let mut touched: Vec<Vec<ObjId>> = Vec::with_capacity(run.calls.len());
    for (c, slots) in run.calls.iter().zip(&pointers) {
        let class = classes.get(c.func as usize).copied().unwrap_or(AccessClass::ReadWrite);
        let sync = matches!(class, AccessClass::Acquire | AccessClass::Release);
        let mut objs: Vec<ObjId> = Vec::new();
        for (slot, o) in slots {
            match slot {
                Slot::Arg(0) if sync => {
                    let name = format!("lock@{}", objects.name(*o));
                    objs.push(objects.intern(&name));
                }
                Slot::Arg(_) if !sync && shared.contains(o) && !watched_ids.contains(o) => {
                    objs.push(*o);
                }
                _ => {}
            }
        }
        objs.sort_unstable();
        objs.dedup();
        touched.push(objs);
    }
    let parent = parents(run, functions);
    let inner = touched_inside(&parent, &touched);
    let mut events = Vec::new();
    for (i, c) in run.calls.iter().enumerate() {
        let class = classes.get(c.func as usize).copied().unwrap_or(AccessClass::ReadWrite);
        let sync = matches!(class, AccessClass::Acquire | AccessClass::Release);
        for &object in &touched[i] {
            if !sync && inner[i].contains(&object) {
                continue;
            }
            let caller = parent[i].map(|p| run.calls[p].func);
            let ev = |point, access, t_ns| Event {
                call: i,
                role: c.role,
                func: c.func,
                caller,
                instance: c.instance,
                point,
                access,
                object,
                t_ns,
            };
            let (read, write_at_exit, write_at_entry) = match class {
                AccessClass::Read => (true, false, false),
                AccessClass::Write | AccessClass::Acquire => (false, true, false),
                AccessClass::ReadWrite => (true, true, false),
                AccessClass::Release => (false, false, true),
            };
            if read {
                events.push(ev(Point::Entry, Access::R, c.entry_ns));
            }
            if write_at_entry {
                events.push(ev(Point::Entry, Access::W, c.entry_ns));
            }
            if write_at_exit && let Some(x) = c.exit_ns {
                events.push(ev(Point::Exit, Access::W, x));
            }
        }
    }
    if let Some(w) = watched {
        watched_events(run, w, &parent, objects, &mut events);
    }
    events.sort_by_key(|e| (e.t_ns, e.point == Point::Exit, e.call));
    RunAccesses { run: run.id, failed: run.failed(), roles, events, pointers, shared }
}

/// The accesses the hardware saw in a watched run, as R and W events of
/// the calls they were attributed to, at their own times; repeats of the
/// same kind by the same call on the same object are shown once. Apart
/// from [`accesses_watched`] because these events are observed, not
/// inferred from the calls' classes like the others.
fn watched_events(
    run: &Run,
    w: &Watched,
    parent: &[Option<usize>],
    objects: &mut Objects,
    events: &mut Vec<Event>,
) {
    let mut last: Option<(usize, ObjId, Access)> = None;
    for a in &w.accesses {
        let Some(i) = a.call else { continue };
        let c = &run.calls[i];
        let object = objects.intern(&a.object);
        let access = if a.write { Access::W } else { Access::R };
        if last == Some((i, object, access)) {
            continue;
        }
        last = Some((i, object, access));
        events.push(Event {
            call: i,
            role: c.role,
            func: c.func,
            caller: parent[i].map(|p| run.calls[p].func),
            instance: c.instance,
            point: if a.write { Point::Exit } else { Point::Entry },
            access,
            object,
            t_ns: a.t_ns,
        });
    }
}

/// Each call's innermost enclosing traced call on the same role (its
/// caller frame, as far as tracing shows), from the calls' nesting in time.
pub fn parents(run: &Run, functions: &[Function]) -> Vec<Option<usize>> {
    let mut parent = vec![None; run.calls.len()];
    let mut by_role: BTreeMap<Role, Vec<usize>> = BTreeMap::new();
    for (i, c) in run.calls.iter().enumerate() {
        if functions.get(c.func as usize).is_some_and(|f| !f.internal) {
            by_role.entry(c.role).or_default().push(i);
        }
    }
    for calls in by_role.values() {
        // Calls are in entry order; a stack of the open ones gives each
        // call its enclosing frames.
        let mut open: Vec<usize> = Vec::new();
        for &i in calls {
            let c = &run.calls[i];
            while let Some(&top) = open.last() {
                if run.calls[top].exit_ns.is_some_and(|x| x < c.entry_ns) {
                    open.pop();
                } else {
                    break;
                }
            }
            parent[i] = open.last().copied();
            open.push(i);
        }
    }
    parent
}

/// For each call, the objects that traced calls nested inside it touch.
fn touched_inside(parent: &[Option<usize>], touched: &[Vec<ObjId>]) -> Vec<BTreeSet<ObjId>> {
    let mut inside: Vec<BTreeSet<ObjId>> = vec![BTreeSet::new(); parent.len()];
    for (i, objs) in touched.iter().enumerate() {
        let mut up = parent[i];
        while let Some(p) = up {
            inside[p].extend(objs.iter().copied());
            up = parent[p];
        }
    }
    inside
}

/// Kind of an immediate cross-thread dependence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DepKind {
    /// The write is the last one before the read.
    Flow,
    /// The write is the first one after the read.
    Anti,
    /// Two consecutive writes.
    Output,
}

impl DepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::Flow => "flow",
            DepKind::Anti => "anti",
            DepKind::Output => "output",
        }
    }
}

/// A dependence between the events at positions `from` < `to` of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dep {
    pub from: usize,
    pub to: usize,
    pub kind: DepKind,
}

/// The immediate cross-thread dependences of an access trace.
pub fn dependences(events: &[Event]) -> Vec<Dep> {
    dependences_of(events.iter().map(|e| (e.role, e.object, e.access)))
}

/// [`dependences`] over (role, object, access) triples in trace order.
pub fn dependences_of(touches: impl IntoIterator<Item = (Role, ObjId, Access)>) -> Vec<Dep> {
    #[derive(Default)]
    struct State {
        last_write: Option<(usize, Role)>,
        reads_since: Vec<(usize, Role)>,
    }
    let mut state: HashMap<ObjId, State> = HashMap::new();
    let mut deps = Vec::new();
    for (i, (role, object, access)) in touches.into_iter().enumerate() {
        let s = state.entry(object).or_default();
        match access {
            Access::R => {
                if let Some((w, wr)) = s.last_write
                    && wr != role
                {
                    deps.push(Dep { from: w, to: i, kind: DepKind::Flow });
                }
                s.reads_since.push((i, role));
            }
            Access::W => {
                for &(r, rr) in &s.reads_since {
                    if rr != role {
                        deps.push(Dep { from: r, to: i, kind: DepKind::Anti });
                    }
                }
                if let Some((w, wr)) = s.last_write
                    && wr != role
                {
                    deps.push(Dep { from: w, to: i, kind: DepKind::Output });
                }
                s.reads_since.clear();
                s.last_write = Some((i, role));
            }
        }
    }
    deps.sort_unstable();
    deps
}

/// Positions `i` where events `i-1` and `i` come from different roles.
pub fn context_switches(roles: impl IntoIterator<Item = Role>) -> Vec<usize> {
    let mut out = Vec::new();
    let mut prev = None;
    for (i, r) in roles.into_iter().enumerate() {
        if prev.is_some_and(|p| p != r) {
            out.push(i);
        }
        prev = Some(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        explain::testkit::{call, function, run_with},
        model::ValueKind,
    };

    /// The paper's 4-trace sample (seed 002 §2.4), one object x.
    pub(crate) fn sample() -> Vec<Vec<(Role, ObjId, Access)>> {
        use Access::{R, W};
        let t = |s: &[(Role, Access)]| s.iter().map(|&(r, a)| (r, 0, a)).collect();
        vec![
            t(&[(1, R), (1, W), (2, R), (2, W), (1, R), (1, W)]),
            t(&[(1, R), (1, W), (1, R), (1, W), (2, R), (2, W)]),
            t(&[(1, R), (2, R), (1, W), (2, W), (1, R), (1, W)]),
            t(&[(2, R), (1, R), (2, W), (1, W), (1, R), (1, W)]),
        ]
    }

    #[test]
    fn r1_w2_is_anti_dependent_only_in_trace_4_at_positions_2_3() {
        let traces = sample();
        let mut found = Vec::new();
        for (n, t) in traces.iter().enumerate() {
            for d in dependences_of(t.iter().copied()) {
                let (from, to) = (t[d.from], t[d.to]);
                if from.0 == 1 && from.2 == Access::R && to.0 == 2 && to.2 == Access::W {
                    found.push((n + 1, d.from + 1, d.to + 1, d.kind));
                }
            }
        }
        assert_eq!(found, vec![(4, 2, 3, DepKind::Anti)]);
    }

    #[test]
    fn dependences_are_immediate_and_cross_thread() {
        // R1 W1 R2 W2 R1 W1 (trace 1).
        let deps = dependences_of(sample()[0].iter().copied());
        let got: Vec<(usize, usize, DepKind)> =
            deps.iter().map(|d| (d.from, d.to, d.kind)).collect();
        assert_eq!(
            got,
            vec![
                (1, 2, DepKind::Flow),
                (1, 3, DepKind::Output),
                (3, 4, DepKind::Flow),
                (3, 5, DepKind::Output)
            ]
        );
    }

    #[test]
    fn a_call_is_r_at_entry_and_w_at_exit_and_inner_calls_carry_the_accesses() {
        let ptr = ValueKind::Pointer;
        let fs = vec![
            function(0, "increment", &[ptr, ValueKind::Signed], ValueKind::Signed),
            function(1, "load_counter", &[ptr], ValueKind::Signed),
            function(2, "store_counter", &[ptr, ValueKind::Signed], ValueKind::Signed),
            function(3, "check_total", &[ptr], ValueKind::Signed),
            function(4, "pthread_mutex_lock", &[ptr], ValueKind::Signed),
        ];
        let c = 0x5600_0000_40c0;
        let m = 0x5600_0000_4200;
        let run = run_with(
            &["main", "first_worker", "second_worker"],
            vec![
                call(0, 1, 1, 10, 60, [c, 1, 0], 1),
                call(1, 1, 1, 11, 12, [c, 0, 0], 0),
                call(1, 2, 1, 20, 21, [c, 0, 0], 0),
                call(2, 1, 1, 50, 51, [c, 1, 0], 1),
                call(4, 0, 1, 90, 91, [m, 0, 0], 0),
                call(3, 0, 1, 100, 101, [c, 0, 0], 1),
            ],
        );
        let spec = AccessSpec::new(&["check_*".into()], &[]).unwrap();
        let mut objects = Objects::default();
        let acc = accesses(&run, &fs, None, &spec, &mut objects);
        let got: Vec<(&str, Role, Access, &str)> = acc
            .events
            .iter()
            .map(|e| (fs[e.func as usize].name.as_str(), e.role, e.access, objects.name(e.object)))
            .collect();
        let obj = "first_worker:increment#1.arg0";
        let lock = "lock@main:pthread_mutex_lock#1.arg0";
        assert_eq!(
            got,
            vec![
                ("load_counter", 1, Access::R, obj),
                ("load_counter", 1, Access::W, obj),
                ("load_counter", 2, Access::R, obj),
                ("load_counter", 2, Access::W, obj),
                ("store_counter", 1, Access::R, obj),
                ("store_counter", 1, Access::W, obj),
                ("pthread_mutex_lock", 0, Access::W, lock),
                ("check_total", 0, Access::R, obj),
            ]
        );
        assert_eq!(context_switches(acc.events.iter().map(|e| e.role)), vec![2, 4, 6]);
        // The enclosing traced call is kept as the access's caller.
        let callers: Vec<Option<FuncId>> = acc.events.iter().map(|e| e.caller).collect();
        assert_eq!(callers, vec![Some(0), Some(0), None, None, Some(0), Some(0), None, None]);
        let data = crate::explain::mine::Dataset::from_substrate(
            &Substrate { functions: fs.clone(), objects: objects.clone(), runs: vec![acc] },
            &spec,
        );
        let both: Vec<String> = data
            .keys
            .iter()
            .enumerate()
            .filter(|(_, k)| k.func == 1)
            .map(|(e, _)| data.event_text(e as u32))
            .collect();
        assert_eq!(
            both,
            [
                "R first_worker:increment>load_counter(first_worker:increment#1.arg0)",
                "W first_worker:increment>load_counter(first_worker:increment#1.arg0)",
                "R second_worker:(top)>load_counter(first_worker:increment#1.arg0)",
                "W second_worker:(top)>load_counter(first_worker:increment#1.arg0)",
            ]
        );
    }
}
