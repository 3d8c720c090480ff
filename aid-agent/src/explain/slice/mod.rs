//! `aid-agent slice`: the part of one failing run that carries the failure
//! (Holzer et al., Error Invariants for Concurrent Traces; seed 003,
//! spec §2).
//!
//! The paper computes error invariants from interpolants over the
//! statements' semantics, which we do not have at function level. What we
//! keep is the dependency closure those invariants must respect, from the
//! criterion (the failing call, or the run's last event) backwards:
//!
//! - **ds**: a value-relevant read pulls in its last writer (`raw`); a
//!   value-relevant write by role ρ pulls in ρ's latest read of the same
//!   object (`rmw`, read-modify-write pairing) or, failing that, an earlier
//!   call of ρ whose return value is one of its arguments (`val`; calls
//!   that only read get `val` edges too: their arguments are inputs);
//! - **hazards** (Eq. 7, `raw ∧ ⋀ₘ waw(m, w) ∨ war(r, m)`): for each
//!   value-relevant read r of x with source w, every write m to x by
//!   another role is kept as `waw(m, w)` if it came before w and
//!   `war(r, m)` if it came after r. Such an m is hazard-only: its own
//!   inputs are not pulled in;
//! - **cs**: a call also depends on its caller frame and on the previous
//!   call of its role at the same depth (`ctrl`: their results decided
//!   that it was made), and on the lock its role holds (`lock`).
//!
//! `--verify` (`verify.rs`) re-runs the program to force the slice's
//! happens-before edges ([`Slice::hb_edges`]) over n re-runs, then flips
//! each hazard edge alone. How a slice is shown (JSON, words, DOT):
//! `report.rs`.

mod report;

pub(crate) use report::numbers;
pub use report::{EdgeJson, KeptJson, SliceJson, call_text, render_dot, render_text, report};

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{
    ExplainError,
    access::{Access, AccessClass, AccessSpec, ObjId, RunAccesses},
};
use crate::model::{Call, Function, Run, ValueKind, identity::Slot};

/// Which dependences the closure follows (the lattice of §3.3 over
/// {cs, war, waw}; the empty set is plain `ds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Levels {
    pub cs: bool,
    pub war: bool,
    pub waw: bool,
}

impl Levels {
    pub const DS: Levels = Levels { cs: false, war: false, waw: false };
    pub const HAZARDS: Levels = Levels { cs: false, war: true, waw: true };
    pub const ALL: Levels = Levels { cs: true, war: true, waw: true };

    /// `ds`, `ds,war,waw`, `ds,cs,war,waw`, ... (`ds` may be left out).
    pub fn parse(text: &str) -> Result<Levels, ExplainError> {
        let mut l = Levels::DS;
        for part in text.split(',').map(str::trim) {
            match part {
                "ds" => {}
                "cs" => l.cs = true,
                "war" => l.war = true,
                "waw" => l.waw = true,
                "hs" => (l.war, l.waw) = (true, true),
                _ => return Err(ExplainError::Deps(text.to_owned())),
            }
        }
        Ok(l)
    }

    pub fn label(self) -> String {
        let mut s = vec!["ds"];
        if self.cs {
            s.push("cs");
        }
        if self.war {
            s.push("war");
        }
        if self.waw {
            s.push("waw");
        }
        s.join(",")
    }
}

/// Where the slice starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Criterion {
    /// `[role:]function#k`.
    Call { role: Option<String>, function: String, instance: u32 },
    /// The call the run crashed in, else the call that returned last
    /// among those touching a shared object (else among all).
    Exit,
}

impl Criterion {
    pub fn parse(text: &str) -> Result<Criterion, ExplainError> {
        if text == "exit" {
            return Ok(Criterion::Exit);
        }
        let bad =
            |reason: &str| ExplainError::Criterion { text: text.to_owned(), reason: reason.into() };
        let (call, k) = text
            .rsplit_once('#')
            .ok_or_else(|| bad("give `exit` or `function#k`, e.g. `check_total#1`"))?;
        let instance: u32 =
            k.parse().ok().filter(|&k| k > 0).ok_or_else(|| bad("k is the call number, from 1"))?;
        // A role name never contains ':'; C++ and Rust names do ("A::f").
        let (role, function) = match call.split_once(':') {
            Some((r, f)) if !r.is_empty() && !f.starts_with(':') && !r.ends_with(':') => {
                (Some(r.to_owned()), f.to_owned())
            }
            _ => (None, call.to_owned()),
        };
        if function.is_empty() {
            return Err(bad("no function name"));
        }
        Ok(Criterion::Call { role, function, instance })
    }

    /// The index (in `run.calls`) of the call this criterion names.
    pub fn resolve(
        &self,
        run: &Run,
        acc: &RunAccesses,
        functions: &[Function],
    ) -> Result<usize, ExplainError> {
        let user = |c: &Call| functions.get(c.func as usize).is_some_and(|f| !f.internal);
        match self {
            Criterion::Exit => {
                let crashed = run
                    .calls
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| user(c) && c.exit_ns.is_none())
                    .max_by_key(|(i, c)| (c.entry_ns, *i));
                // The last call that returned, among those that touch a
                // shared object if any do (a program's final check reads
                // its state; a lock taken inside pthread_join does not).
                let touches = |i: usize| {
                    acc.events.iter().any(|e| e.call == i && acc.shared.contains(&e.object))
                };
                let last = |shared: bool| {
                    run.calls
                        .iter()
                        .enumerate()
                        .filter(|(i, c)| user(c) && (!shared || touches(*i)))
                        .max_by_key(|(i, c)| (c.exit_ns.unwrap_or(c.entry_ns), *i))
                };
                crashed.or_else(|| last(true)).or_else(|| last(false)).map(|(i, _)| i).ok_or_else(
                    || ExplainError::Criterion {
                        text: "exit".into(),
                        reason: format!("run {} made no traced calls", run.id),
                    },
                )
            }
            Criterion::Call { role, function, instance } => {
                let hits: Vec<usize> = run
                    .calls
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| {
                        user(c)
                            && c.instance == *instance
                            && functions[c.func as usize].name == *function
                            && role.as_ref().is_none_or(|r| acc.roles.name(c.role) == r)
                    })
                    .map(|(i, _)| i)
                    .collect();
                let text = format!(
                    "{}{function}#{instance}",
                    role.as_ref().map(|r| format!("{r}:")).unwrap_or_default()
                );
                match hits.as_slice() {
                    [one] => Ok(*one),
                    [] => Err(ExplainError::Criterion {
                        text,
                        reason: format!("run {} has no such call", run.id),
                    }),
                    many => Err(ExplainError::Criterion {
                        text,
                        reason: format!(
                            "several roles made it ({}): write role:{function}#{instance}",
                            many.iter()
                                .map(|&i| acc.roles.name(run.calls[i].role))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }),
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// The read's last writer.
    Raw,
    /// The write's role read the object before writing it.
    Rmw,
    /// An argument equals an earlier return value of the same role.
    Val,
    /// A write by another role before the read's source.
    Waw,
    /// A write by another role after the read.
    War,
    /// The caller frame, or the previous call of the role.
    Ctrl,
    /// The lock the role holds.
    Lock,
}

impl EdgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Raw => "raw",
            EdgeKind::Rmw => "rmw",
            EdgeKind::Val => "val",
            EdgeKind::Waw => "waw",
            EdgeKind::War => "war",
            EdgeKind::Ctrl => "ctrl",
            EdgeKind::Lock => "lock",
        }
    }
}

/// `from` → `to` between calls (indices into the run's calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
    pub object: Option<ObjId>,
}

/// The slice of one run.
#[derive(Clone, Debug)]
pub struct Slice {
    pub run: u32,
    pub criterion: usize,
    pub levels: Levels,
    /// Calls kept, by index into the run's calls.
    pub kept: BTreeSet<usize>,
    /// Of those, the ones kept only as hazards.
    pub hazard_only: BTreeSet<usize>,
    pub edges: Vec<Edge>,
    /// Traced calls of the run (aid's own probes left out).
    pub total_calls: usize,
    pub total_roles: usize,
}

impl Slice {
    pub fn kept_roles(&self, run: &Run) -> usize {
        self.kept.iter().map(|&c| run.calls[c].role).collect::<BTreeSet<_>>().len()
    }

    /// Fraction of the run's calls the slice removed.
    pub fn reduction(&self) -> f64 {
        if self.total_calls == 0 {
            0.0
        } else {
            1.0 - self.kept.len() as f64 / self.total_calls as f64
        }
    }

    /// The happens-before edges between different roles that a verifying
    /// re-run would force (source before target).
    pub fn hb_edges<'a>(&'a self, run: &'a Run) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges.iter().filter(move |e| run.calls[e.from].role != run.calls[e.to].role)
    }
}

/// Slices `run` (whose access trace is `acc`) from call `criterion`.
pub fn slice(
    run: &Run,
    acc: &RunAccesses,
    functions: &[Function],
    spec: &AccessSpec,
    criterion: usize,
    levels: Levels,
) -> Slice {
    let user: Vec<bool> = run
        .calls
        .iter()
        .map(|c| functions.get(c.func as usize).is_some_and(|f| !f.internal))
        .collect();
    let mut edges: BTreeSet<Edge> = BTreeSet::new();
    let mut relevant: BTreeSet<usize> = BTreeSet::from([criterion]);
    let mut work = vec![criterion];
    // (read event position, source event position) of relevant reads.
    let mut reads: Vec<(usize, Option<usize>)> = Vec::new();
    let ev = &acc.events;
    let add = |from: usize, to: usize, kind, object, edges: &mut BTreeSet<Edge>| {
        edges.insert(Edge { from, to, kind, object });
    };
    while let Some(c) = work.pop() {
        let mut pulled: Vec<usize> = Vec::new();
        let sources = data_sources(run, acc, functions, &user, c);
        reads.extend(sources.reads);
        for (d, kind, object) in sources.edges {
            add(d, c, kind, object, &mut edges);
            pulled.push(d);
        }
        if levels.cs {
            for (d, kind) in control_sources(run, acc, functions, spec, &user, c) {
                add(d, c, kind, None, &mut edges);
                pulled.push(d);
            }
        }
        for d in pulled {
            if relevant.insert(d) {
                work.push(d);
            }
        }
    }
    let mut hazard_only = BTreeSet::new();
    if levels.war || levels.waw {
        // A write can matter if its call started before the criterion did:
        // without watchpoints, a call's write may be anywhere inside it.
        let horizon = run.calls[criterion].entry_ns;
        for &(r, w) in &reads {
            let reader = ev[r];
            for (m, e) in ev.iter().enumerate() {
                if e.access != Access::W
                    || e.object != reader.object
                    || e.role == reader.role
                    || Some(m) == w
                    || run.calls[e.call].entry_ns > horizon
                {
                    continue;
                }
                let hazard = match w {
                    Some(w) if levels.waw && m < w && e.role != ev[w].role => Some(Edge {
                        from: e.call,
                        to: ev[w].call,
                        kind: EdgeKind::Waw,
                        object: Some(e.object),
                    }),
                    _ if levels.war && m > r => Some(Edge {
                        from: reader.call,
                        to: e.call,
                        kind: EdgeKind::War,
                        object: Some(e.object),
                    }),
                    _ => None,
                };
                if let Some(h) = hazard {
                    edges.insert(h);
                    if !relevant.contains(&e.call) {
                        hazard_only.insert(e.call);
                    }
                }
            }
        }
    }
    let kept: BTreeSet<usize> = relevant.union(&hazard_only).copied().collect();
    let total_roles = run
        .calls
        .iter()
        .zip(&user)
        .filter(|(_, u)| **u)
        .map(|(c, _)| c.role)
        .collect::<BTreeSet<_>>()
        .len();
    Slice {
        run: run.id,
        criterion,
        levels,
        kept,
        hazard_only,
        edges: edges.into_iter().collect(),
        total_calls: user.iter().filter(|u| **u).count(),
        total_roles,
    }
}

/// The ds dependences of one call.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// (source call, kind, object) for `raw`, `rmw` and `val`.
    pub edges: Vec<(usize, EdgeKind, Option<ObjId>)>,
    /// (position of each of the call's reads, position of its last writer).
    pub reads: Vec<(usize, Option<usize>)>,
}

/// The ds rules for call `c`: each read's last writer (`raw`); for each
/// write, the role's latest earlier read of the object (`rmw`), or, failing
/// that, an earlier return value of the role equal to one of its
/// arguments (`val`; also for calls that only read, or touch no shared
/// object: their arguments are inputs as well).
pub fn data_sources(
    run: &Run,
    acc: &RunAccesses,
    functions: &[Function],
    user: &[bool],
    c: usize,
) -> Sources {
    let ev = &acc.events;
    let mut out = Sources::default();
    let mine: Vec<usize> = (0..ev.len()).filter(|&p| ev[p].call == c).collect();
    let mut paired = false;
    for &p in &mine {
        let e = ev[p];
        match e.access {
            Access::R => {
                let w =
                    (0..p).rev().find(|&q| ev[q].object == e.object && ev[q].access == Access::W);
                out.reads.push((p, w));
                if let Some(q) = w {
                    out.edges.push((ev[q].call, EdgeKind::Raw, Some(e.object)));
                }
            }
            Access::W => {
                let r = (0..p).rev().find(|&q| {
                    ev[q].object == e.object
                        && ev[q].access == Access::R
                        && ev[q].role == e.role
                        && ev[q].call != c
                });
                if let Some(q) = r {
                    out.edges.push((ev[q].call, EdgeKind::Rmw, Some(e.object)));
                    paired = true;
                }
            }
        }
    }
    // Arguments are inputs too: unless a write was paired with the read
    // it modifies, an argument that an earlier call of the role returned
    // came from that call.
    if !paired && let Some(d) = value_source(run, acc, functions, user, c) {
        out.edges.push((d, EdgeKind::Val, None));
    }
    out
}

/// The latest earlier call of the same role whose return value equals one
/// of `c`'s non-pointer, non-zero arguments.
fn value_source(
    run: &Run,
    acc: &RunAccesses,
    functions: &[Function],
    user: &[bool],
    c: usize,
) -> Option<usize> {
    let call = &run.calls[c];
    let f = functions.get(call.func as usize)?;
    let values: Vec<i64> = (0..f.params.len().min(3))
        .filter(|&a| {
            !acc.pointers[c].iter().any(|(s, _)| *s == Slot::Arg(a as u8))
                && f.params[a].kind != ValueKind::Void
        })
        .map(|a| call.args[a])
        // Zero (null, false, success) is everywhere; it says nothing.
        .filter(|&v| v != 0)
        .collect();
    (0..c).rev().find(|&d| {
        let e = &run.calls[d];
        user[d]
            && e.role == call.role
            && e.exit_ns.is_some_and(|x| x <= call.entry_ns)
            && e.ret.is_some_and(|r| values.contains(&r))
            && functions.get(e.func as usize).is_some_and(|g| g.ret.kind != ValueKind::Void)
    })
}

/// The cs dependences of call `c`: its caller frame, the previous call of
/// its role at the same depth, and the acquisitions its role holds.
fn control_sources(
    run: &Run,
    acc: &RunAccesses,
    functions: &[Function],
    spec: &AccessSpec,
    user: &[bool],
    c: usize,
) -> Vec<(usize, EdgeKind)> {
    let call = &run.calls[c];
    let encloses = |d: usize| {
        let e = &run.calls[d];
        e.role == call.role
            && e.entry_ns <= call.entry_ns
            && e.exit_ns.is_none_or(|x| x >= call.exit_ns.unwrap_or(call.entry_ns))
            && d != c
    };
    let mut out = Vec::new();
    let parent = (0..c).rev().find(|&d| user[d] && encloses(d));
    if let Some(p) = parent {
        out.push((p, EdgeKind::Ctrl));
    }
    let sibling = (0..c).rev().find(|&d| {
        let e = &run.calls[d];
        user[d]
            && e.role == call.role
            && e.exit_ns.is_some_and(|x| x <= call.entry_ns)
            && (0..d).rev().find(|&q| {
                let pe = &run.calls[q];
                user[q]
                    && pe.role == e.role
                    && pe.entry_ns <= e.entry_ns
                    && pe.exit_ns.is_none_or(|x| x >= e.exit_ns.unwrap_or(0))
            }) == parent
    });
    if let Some(s) = sibling {
        out.push((s, EdgeKind::Ctrl));
    }
    // Locks held: acquisitions of this role not released before the call.
    let class = |d: usize| functions.get(run.calls[d].func as usize).map(|f| spec.class(f));
    let mut held: BTreeMap<ObjId, usize> = BTreeMap::new();
    for (d, e) in run.calls.iter().enumerate().take(c) {
        if !user[d] || e.role != call.role || e.entry_ns > call.entry_ns {
            continue;
        }
        let Some(&(_, obj)) = acc.pointers[d].iter().find(|(s, _)| *s == Slot::Arg(0)) else {
            continue;
        };
        match class(d) {
            Some(AccessClass::Acquire) if e.exit_ns.is_some_and(|x| x <= call.entry_ns) => {
                held.insert(obj, d);
            }
            Some(AccessClass::Release) => {
                held.remove(&obj);
            }
            _ => {}
        }
    }
    out.extend(held.into_values().map(|d| (d, EdgeKind::Lock)));
    out
}

#[cfg(test)]
mod tests;
