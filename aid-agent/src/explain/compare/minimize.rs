//! Minimal sufficient causes by re-execution (seed 001 Alg. 2): delta
//! debugging over the differences cut at the cause point, keeping a subset
//! only if the **symmetric** test passes — copying it into the failing run
//! cures the effect (the passing run's values appear) *and* copying it into
//! the passing run induces it (Def. 2).
//!
//! The paper assumes deterministic replay; our runs are not deterministic
//! and a re-run is a fresh run, so each side of a test is repeated `repeat`
//! times and passes when at least half of them are usable and at least
//! `theta` of the usable ones show the effect. A run is unusable when an
//! intervention could not be applied, or when it is *confounded* (Def. 3):
//! it shows a call or a reads-from edge that neither original run had.
//!
//! Why this is a sound test without replay: a replacement that does
//! nothing passes the curing side with the program's natural pass rate q
//! and the inducing side with its failure rate 1 − q, so it passes both
//! with probability P(Bin(r, q) ≥ θr) · P(Bin(r, 1 − q) ≥ θr); one of the
//! two factors has a rate ≤ 0.5 < θ. For r = 10, θ = 0.8 that is at most
//! 0.055² ≈ 0.003 (at q = 0.5), and less the further q is from 0.5.
//!
//! Re-execution goes through [`Rerun`], so the algorithm is tested with a
//! simulated executor; `live.rs` implements it with the tracer's
//! interventions.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    align::{CallKey, View},
    dual::{Diff, Graph, Side},
};
use crate::{
    explain::{
        access::{Access, AccessSpec, Objects},
        objects::Globals,
        watch::Watched,
    },
    intervene::SafeList,
    model::{Function, Point, Run},
};

/// A change a re-run makes to the program's execution.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Replacement {
    /// The call returns `value` (to its caller) instead of what it computed.
    Return { call: CallKey, value: i64 },
    /// `then` does not start before `first` has returned.
    Order { first: CallKey, then: CallKey },
}

/// A re-run: the recorded run, and whether every replacement was carried
/// out (reached, applied, no hold timed out, no events lost).
#[derive(Clone, Debug)]
pub struct Observed {
    pub run: Run,
    pub valid: bool,
    /// What watchpoints saw of the re-run (`compare --access watch`).
    pub watched: Option<Watched>,
}

/// Runs the program once more, starting from the side `base` stands for
/// (with replay: that run; without: a fresh run) with `replacements`.
pub trait Rerun {
    fn rerun(&mut self, base: Side, replacements: &[Replacement]) -> anyhow::Result<Observed>;
}

impl<R: Rerun + ?Sized> Rerun for &mut R {
    fn rerun(&mut self, base: Side, replacements: &[Replacement]) -> anyhow::Result<Observed> {
        (**self).rerun(base, replacements)
    }
}

/// The executor of `compare --repeat 0`: nothing is re-run, the chain is
/// the dual slice's.
pub struct Offline;

impl Rerun for Offline {
    fn rerun(&mut self, _: Side, _: &[Replacement]) -> anyhow::Result<Observed> {
        anyhow::bail!("re-execution is off (--repeat 0)")
    }
}

/// How differences become replacements, toward one side.
pub fn replacement(
    d: &Diff,
    toward: Side,
    safe: &SafeList,
    functions: &[Function],
) -> Option<Replacement> {
    match d {
        Diff::Value { call, fields } => {
            let f = functions.get(call.func as usize)?;
            if !safe.is_safe(f) {
                return None;
            }
            let (_, fail, pass) = fields.iter().find(|(f, _, _)| *f == super::align::Field::Ret)?;
            let value = match (toward, fail, pass) {
                (Side::Pass, _, super::align::Val::Num(v))
                | (Side::Fail, super::align::Val::Num(v), _) => *v,
                _ => return None,
            };
            Some(Replacement::Return { call: call.clone(), value })
        }
        Diff::Order { read, write, read_first, .. } => {
            // The order of the side we copy from.
            let read_first = *read_first == (toward == Side::Fail);
            let (first, then) = if read_first { (read, &write.0) } else { (&write.0, read) };
            Some(Replacement::Order { first: first.clone(), then: then.clone() })
        }
        Diff::ReadsFrom { .. } | Diff::Omitted { .. } | Diff::Outcome { .. } => None,
    }
}

/// One side of a symmetric test.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SideResult {
    pub runs: Vec<u32>,
    /// Usable runs (applied and not confounded).
    pub usable: u32,
    pub not_applied: u32,
    pub confounded: u32,
    /// Usable runs that showed the other run's effect.
    pub reproduced: u32,
    pub passed: bool,
}

/// A symmetric test of a set of causes against a set of effects.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Test {
    pub causes: Vec<usize>,
    pub effects: Vec<usize>,
    /// The failing run with the passing run's causes: effects cured?
    pub cure: SideResult,
    /// The passing run with the failing run's causes: effects induced?
    pub induce: SideResult,
    pub passed: bool,
}

/// What the tests need to know about the two runs.
pub struct Context<'a> {
    pub fail: &'a View,
    pub pass: &'a View,
    pub graph: &'a Graph,
    pub functions: &'a [Function],
    pub globals: Option<&'a Globals>,
    pub spec: &'a AccessSpec,
    pub safe: &'a SafeList,
    pub repeat: u32,
    pub theta: f64,
    /// Returns equal in both runs, forced in every re-run (`--pin`).
    pub pins: Vec<Replacement>,
}

/// Runs the symmetric tests, remembering each result.
pub struct Tester<'a, R: Rerun> {
    pub ctx: Context<'a>,
    pub exec: R,
    pub objects: Objects,
    pub tests: Vec<Test>,
    pub reruns: usize,
    cache: BTreeMap<(Vec<usize>, Vec<usize>), bool>,
}

impl<'a, R: Rerun> Tester<'a, R> {
    pub fn new(ctx: Context<'a>, exec: R, objects: Objects) -> Tester<'a, R> {
        Tester { ctx, exec, objects, tests: Vec::new(), reruns: 0, cache: BTreeMap::new() }
    }

    /// Whether `causes` (difference ids) are sufficient for `effects`,
    /// both ways.
    pub fn symmetric(&mut self, causes: &[usize], effects: &[usize]) -> anyhow::Result<bool> {
        let key = (causes.to_vec(), effects.to_vec());
        if let Some(&r) = self.cache.get(&key) {
            return Ok(r);
        }
        let cure = self.side(causes, effects, Side::Fail)?;
        // No need to induce what cannot even be cured.
        let induce = if cure.passed {
            self.side(causes, effects, Side::Pass)?
        } else {
            SideResult::default()
        };
        let passed = cure.passed && induce.passed;
        self.tests.push(Test {
            causes: causes.to_vec(),
            effects: effects.to_vec(),
            cure,
            induce,
            passed,
        });
        self.cache.insert(key, passed);
        Ok(passed)
    }

    /// Re-runs `base` with the causes copied from the other run.
    fn side(
        &mut self,
        causes: &[usize],
        effects: &[usize],
        base: Side,
    ) -> anyhow::Result<SideResult> {
        let toward = base.other();
        let mut reps: Vec<Replacement> = causes
            .iter()
            .filter_map(|&c| {
                replacement(&self.ctx.graph.diffs[c], toward, self.ctx.safe, self.ctx.functions)
            })
            .collect();
        reps.extend(self.ctx.pins.iter().cloned());
        let mut out = SideResult::default();
        for _ in 0..self.ctx.repeat {
            let obs = self.exec.rerun(base, &reps)?;
            self.reruns += 1;
            out.runs.push(obs.run.id);
            if !obs.valid {
                out.not_applied += 1;
                continue;
            }
            let view = View::watched(
                &obs.run,
                self.ctx.functions,
                self.ctx.globals,
                self.ctx.spec,
                &mut self.objects,
                obs.watched.as_ref(),
            );
            if confounded(&view, self.ctx.fail, self.ctx.pass) {
                out.confounded += 1;
                continue;
            }
            out.usable += 1;
            if effects.iter().all(|&e| shows(&view, &self.ctx.graph.diffs[e], toward)) {
                out.reproduced += 1;
            }
        }
        let enough = 2 * out.usable >= self.ctx.repeat;
        out.passed = enough
            && out.usable > 0
            && f64::from(out.reproduced) >= self.ctx.theta * f64::from(out.usable);
        Ok(out)
    }

    /// ddmin over `cut`: a smallest subset (1-minimal) that passes the
    /// symmetric test, or `None` when the whole cut does not.
    pub fn minimize(
        &mut self,
        cut: &[usize],
        effects: &[usize],
    ) -> anyhow::Result<Option<Vec<usize>>> {
        let mut c: Vec<usize> = cut.to_vec();
        if !self.symmetric(&c, effects)? {
            return Ok(None);
        }
        let mut n = 2;
        while c.len() >= 2 {
            let chunks = split(&c, n);
            let mut reduced = false;
            for part in &chunks {
                if self.symmetric(part, effects)? {
                    c = part.clone();
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
            if !reduced && n > 2 {
                for part in &chunks {
                    let rest: Vec<usize> =
                        c.iter().copied().filter(|x| !part.contains(x)).collect();
                    if self.symmetric(&rest, effects)? {
                        c = rest;
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= c.len() {
                    break;
                }
                n = (2 * n).min(c.len());
            }
        }
        Ok(Some(c))
    }
}

fn split(c: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.min(c.len()).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..n {
        let end = start + (c.len() - start) / (n - i);
        out.push(c[start..end].to_vec());
        start = end;
    }
    out
}

/// Def. 3: the re-run has a call, or a read from a write, that neither
/// original run had.
pub fn confounded(r: &View, fail: &View, pass: &View) -> bool {
    let new_call =
        r.index.keys().any(|k| !fail.index.contains_key(k) && !pass.index.contains_key(k));
    let new_read = r.reads_from.iter().any(|(read, src)| {
        fail.reads_from.get(read) != Some(src) && pass.reads_from.get(read) != Some(src)
    });
    new_call || new_read
}

/// True when the re-run shows difference `d` with `side`'s value.
pub fn shows(r: &View, d: &Diff, side: Side) -> bool {
    let pick = |f: &super::align::Val, p: &super::align::Val| {
        if side == Side::Fail { f.clone() } else { p.clone() }
    };
    match d {
        Diff::Value { call, fields } => r.values.get(call).is_some_and(|vals| {
            fields.iter().all(|(field, f, p)| vals.get(field) == Some(&pick(f, p)))
        }),
        Diff::Order { read, write, object, read_first } => {
            let r_pos = r.order.get(&(read.clone(), Point::Entry, Access::R, object.clone()));
            let w_pos = r.order.get(&(write.0.clone(), write.1, Access::W, object.clone()));
            let (Some(a), Some(b)) = (r_pos, w_pos) else { return false };
            (a < b) == (*read_first == (side == Side::Fail))
        }
        Diff::ReadsFrom { reader, object, fail, pass } => {
            r.reads_from.get(&(reader.clone(), object.clone()))
                == Some(if side == Side::Fail { fail } else { pass })
        }
        Diff::Omitted { call, present_in } => r.index.contains_key(call) == (*present_in == side),
        Diff::Outcome { .. } => r.failed == (side == Side::Fail),
    }
}
