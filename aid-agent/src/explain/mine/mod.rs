//! `aid-agent mine`: bug explanation patterns mined from failing runs
//! (Tabaei Befrouei, Wang, Weissenbacher, FMSD 2016; seed 002, spec §1).
//!
//! Algorithm 2 over the access traces of a session: derive macros from all
//! traces and abstract them (α); mine the closed patterns of the failing
//! abstract traces (Alg. 1, at most `max_len` abstract events); drop
//! abstract patterns of one thread; concretise (γ); drop spurious macro
//! patterns (not a subsequence of any failing macro trace); keep those in
//! which, on some instance in a failing run (Def. 4), every macro has a
//! dependence with another macro (Def. 3); keep relative support > 0.5;
//! group by (relative support, dependence set) and rank. `min_supp` starts
//! at 100 % and is lowered by `step` until some group explains the
//! failure (§2.4, "we gradually decrease the threshold").

pub mod macros;
pub mod predicates;
pub mod prefixspan;
pub mod report;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    time::Instant,
};

use serde::Serialize;

use super::access::{Access, AccessClass, AccessSpec, Dep, DepKind, ObjId, Substrate, dependences};
use crate::model::FuncId;

/// Parameters of Alg. 2.
#[derive(Clone, Debug)]
pub struct Options {
    /// First support threshold, as a fraction of the failing runs.
    pub min_supp: f64,
    /// How much to lower it each time nothing explains.
    pub step: f64,
    /// Longest abstract pattern mined (the paper's `max_pattern_len`, 4).
    pub max_len: usize,
    /// Drop the macro prefix and suffix common to all traces (§3.3).
    pub prune: bool,
    /// Count a run for the relative support only if the pattern occurs in
    /// it *with* related dependences (Def. 3's condition), in passing runs
    /// as in failing ones. Not the paper's definition (which counts
    /// occurrences): on long looping traces every short pattern occurs as
    /// a gapped subsequence of every run, and occurrence support cannot
    /// tell failing from passing runs.
    pub witnessed: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { min_supp: 1.0, step: 0.1, max_len: 4, prune: true, witnessed: false }
    }
}

/// At most this many macro patterns per abstract pattern (γ multiplies
/// the class sizes) and this many instances per pattern and run in the
/// dependence check; hitting either is reported.
const CONCRETE_CAP: usize = 10_000;
const INSTANCE_CAP: usize = 1_000;
/// At most this many trace positions are examined to enumerate the
/// instances of one pattern in one run, and this many in one [`mine`]
/// call: the instance cap bounds complete instances only, and a pattern
/// whose last slot rarely fits can otherwise try billions of partial ones
/// (inventory-sixty's `stock_item` traces: minutes, before this cap).
/// Hitting either is reported like the others.
const STEP_CAP: usize = 2_000_000;
const TOTAL_STEP_CAP: usize = 200_000_000;

/// An event id (seed 002 Def. 1, `⟨tid, line, type, addr⟩`) at function
/// level: which role, which function, read or write, which object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventKey {
    pub role: u32,
    pub func: FuncId,
    pub caller: Option<FuncId>,
    pub access: Access,
    pub object: ObjId,
}

/// One run as mining sees it.
#[derive(Clone, Debug)]
pub struct TraceData {
    pub run: u32,
    pub failed: bool,
    /// Event ids in time order.
    pub seq: Vec<u32>,
    pub deps: Vec<Dep>,
}

/// The traces to mine, with the names needed to print them.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    pub keys: Vec<EventKey>,
    pub role_names: Vec<String>,
    pub func_names: Vec<String>,
    /// Functions classed read-write (R at entry, W at exit).
    pub read_write: Vec<bool>,
    pub object_names: Vec<String>,
    pub traces: Vec<TraceData>,
    /// Functions traced calls of which come from more than one caller:
    /// their events print with the caller (`account_fee>account_get`).
    pub ambiguous: BTreeSet<FuncId>,
}

impl Dataset {
    pub fn from_substrate(s: &Substrate, spec: &AccessSpec) -> Dataset {
        let mut d = Dataset {
            func_names: s.functions.iter().map(|f| f.name.clone()).collect(),
            read_write: s
                .functions
                .iter()
                .map(|f| spec.class(f) == AccessClass::ReadWrite)
                .collect(),
            object_names: s.objects.names().to_vec(),
            ..Dataset::default()
        };
        let mut roles: HashMap<String, u32> = HashMap::new();
        let mut keys: HashMap<EventKey, u32> = HashMap::new();
        for r in &s.runs {
            let seq = r
                .events
                .iter()
                .map(|e| {
                    let name = r.roles.name(e.role);
                    let role = *roles.entry(name.to_owned()).or_insert_with(|| {
                        d.role_names.push(name.to_owned());
                        (d.role_names.len() - 1) as u32
                    });
                    let key = EventKey {
                        role,
                        func: e.func,
                        caller: e.caller,
                        access: e.access,
                        object: e.object,
                    };
                    *keys.entry(key.clone()).or_insert_with(|| {
                        d.keys.push(key);
                        (d.keys.len() - 1) as u32
                    })
                })
                .collect();
            d.traces.push(TraceData {
                run: r.run,
                failed: r.failed,
                seq,
                deps: dependences(&r.events),
            });
        }
        let mut callers: BTreeMap<FuncId, BTreeSet<Option<FuncId>>> = BTreeMap::new();
        for k in &d.keys {
            callers.entry(k.func).or_default().insert(k.caller);
        }
        d.ambiguous = callers.into_iter().filter(|(_, c)| c.len() > 1).map(|(f, _)| f).collect();
        d
    }
}

/// A dependence between two events of a pattern, by event id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DepEdge {
    pub from: u32,
    pub to: u32,
    pub kind: DepKind,
}

/// One macro pattern that explains.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Found {
    /// The macros, each a list of event ids.
    pub macros: Vec<Vec<u32>>,
    /// Failing runs whose macro trace contains the pattern.
    pub failing: Vec<u32>,
    pub passing: Vec<u32>,
    /// Failing runs with an instance whose macros are all dependence-related.
    pub witnessed: Vec<u32>,
}

impl Found {
    pub fn len(&self) -> usize {
        self.macros.len()
    }

    pub fn is_empty(&self) -> bool {
        self.macros.is_empty()
    }
}

/// Patterns with the same relative support and dependence set: "intuitively,
/// they refer to the same bug" (§4.1).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    pub rel_supp: f64,
    /// supp in failing runs / number of failing runs.
    pub s_fail: f64,
    pub s_pass: f64,
    pub deps: Vec<DepEdge>,
    pub patterns: Vec<Found>,
}

/// What one support threshold gave.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Level {
    pub min_supp: f64,
    /// As a number of failing runs.
    pub min_count: usize,
    pub closed: usize,
    pub groups: usize,
}

/// Sizes and times, for BENCHMARKS.md (the paper's table).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    pub failing_runs: usize,
    pub passing_runs: usize,
    /// Mean access events per failing trace, before and after abstraction.
    pub mean_len: f64,
    pub mean_abstract_len: f64,
    pub distinct_events: usize,
    pub macros: usize,
    pub classes: usize,
    pub pruned_prefix: usize,
    pub pruned_suffix: usize,
    /// Per step of Alg. 2, at the last threshold tried.
    pub closed: usize,
    pub multi_thread: usize,
    pub macro_patterns: usize,
    pub spurious: usize,
    pub without_deps: usize,
    pub not_discriminating: usize,
    /// γ or the instance enumeration hit its cap.
    pub capped: bool,
    pub abstraction_ms: f64,
    pub mine_ms: f64,
    pub post_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mined {
    /// The threshold that explained (or the last one tried).
    pub min_supp: f64,
    pub levels: Vec<Level>,
    pub groups: Vec<Group>,
    pub stats: Stats,
}

/// A failing trace prepared for the dependence check.
struct Prepared<'a> {
    run: u32,
    macros: &'a [usize],
    /// Dependences between macros: (macro position, macro position, edge).
    deps: Vec<(usize, usize, DepEdge)>,
    /// (earlier macro, later macro) of every dependence, to reject a
    /// pattern for this trace without looking at its instances.
    pairs: HashSet<(usize, usize)>,
    /// For each macro position, the positions it has a dependence with.
    partners: Vec<Vec<usize>>,
}

/// Alg. 2 on `data`.
pub fn mine(data: &Dataset, opts: &Options) -> Mined {
    let started = Instant::now();
    let seqs: Vec<Vec<u32>> = data.traces.iter().map(|t| t.seq.clone()).collect();
    let m = macros::derive(&seqs, |e| data.keys[e as usize].role, opts.prune);
    let fail: Vec<usize> = (0..data.traces.len()).filter(|&t| data.traces[t].failed).collect();
    let pass: Vec<usize> = (0..data.traces.len()).filter(|&t| !data.traces[t].failed).collect();
    let abs_db: Vec<Vec<u32>> = fail.iter().map(|&t| m.abstract_trace(t)).collect();
    let class_role: Vec<u32> =
        m.classes.iter().map(|c| data.keys[m.macros[c[0]][0] as usize].role).collect();
    let fail_traces: Vec<Prepared<'_>> = fail.iter().map(|&t| prepare(data, &m, t)).collect();
    let pass_traces: Vec<Prepared<'_>> = pass.iter().map(|&t| prepare(data, &m, t)).collect();
    let mut stats = Stats {
        failing_runs: fail.len(),
        passing_runs: pass.len(),
        mean_len: mean(fail.iter().map(|&t| data.traces[t].seq.len())),
        mean_abstract_len: mean(abs_db.iter().map(Vec::len)),
        distinct_events: data.keys.len(),
        macros: m.traces.iter().flatten().collect::<BTreeSet<_>>().len(),
        classes: m.classes.len(),
        pruned_prefix: m.pruned.0,
        pruned_suffix: m.pruned.1,
        abstraction_ms: ms(started),
        ..Stats::default()
    };
    let mut levels = Vec::new();
    let mut check = Check { witnessed: opts.witnessed, steps_left: TOTAL_STEP_CAP };
    let mut min_supp = opts.min_supp.min(1.0);
    let step = if opts.step > 0.0 { opts.step } else { 1.0 };
    loop {
        let min_count = ((min_supp * fail.len() as f64) - 1e-9).ceil().max(1.0) as usize;
        let t = Instant::now();
        let closed = prefixspan::closed(&prefixspan::frequent(&abs_db, min_count, opts.max_len));
        stats.mine_ms += ms(t);
        let t = Instant::now();
        let groups = post_process(
            &m,
            &closed,
            &class_role,
            &fail_traces,
            &pass_traces,
            &mut check,
            &mut stats,
        );
        stats.post_ms += ms(t);
        levels.push(Level { min_supp, min_count, closed: closed.len(), groups: groups.len() });
        let next = min_supp - step;
        if !groups.is_empty() || min_count <= 1 || next <= 1e-9 {
            return Mined { min_supp, levels, groups, stats };
        }
        min_supp = (next * 1e6).round() / 1e6;
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn mean(it: impl Iterator<Item = usize>) -> f64 {
    let (n, s) = it.fold((0usize, 0usize), |(n, s), x| (n + 1, s + x));
    if n == 0 { 0.0 } else { s as f64 / n as f64 }
}

fn prepare<'a>(data: &Dataset, m: &'a macros::Macros, t: usize) -> Prepared<'a> {
    let trace = &data.traces[t];
    let mut pos_of = vec![usize::MAX; trace.seq.len()];
    for (p, &(a, b)) in m.spans[t].iter().enumerate() {
        pos_of[a..b].fill(p);
    }
    let deps = trace
        .deps
        .iter()
        .filter_map(|d| {
            let (a, b) = (pos_of[d.from], pos_of[d.to]);
            (a != usize::MAX && b != usize::MAX && a != b).then(|| {
                (a, b, DepEdge { from: trace.seq[d.from], to: trace.seq[d.to], kind: d.kind })
            })
        })
        .collect::<Vec<(usize, usize, DepEdge)>>();
    let macros = &m.traces[t];
    let pairs = deps.iter().map(|&(a, b, _)| (macros[a.min(b)], macros[a.max(b)])).collect();
    let mut partners = vec![Vec::new(); macros.len()];
    for &(a, b, _) in &deps {
        partners[a].push(b);
        partners[b].push(a);
    }
    Prepared { run: trace.run, macros, deps, pairs, partners }
}

/// How the dependence check counts support, and the positions its
/// instance enumeration may still examine in this [`mine`] call.
struct Check {
    witnessed: bool,
    steps_left: usize,
}

/// Steps 3–8 of Alg. 2 for one threshold.
fn post_process(
    m: &macros::Macros,
    closed: &[prefixspan::Pattern],
    class_role: &[u32],
    fail: &[Prepared<'_>],
    pass: &[Prepared<'_>],
    check: &mut Check,
    stats: &mut Stats,
) -> Vec<Group> {
    let witnessed_support = check.witnessed;
    let steps_left = &mut check.steps_left;
    stats.closed = closed.len();
    // Step 3: at least two threads.
    let multi: Vec<&prefixspan::Pattern> = closed
        .iter()
        .filter(|p| {
            p.items.iter().map(|&c| class_role[c as usize]).collect::<BTreeSet<_>>().len() >= 2
        })
        .collect();
    stats.multi_thread = multi.len();
    // Step 4: γ.
    let mut concrete: BTreeSet<Vec<usize>> = BTreeSet::new();
    for p in multi {
        let (all, capped) = macros::concretize(m, &p.items, CONCRETE_CAP);
        stats.capped |= capped;
        concrete.extend(all);
    }
    stats.macro_patterns = concrete.len();
    stats.spurious = 0;
    stats.without_deps = 0;
    stats.not_discriminating = 0;
    let mut groups: BTreeMap<(i64, Vec<DepEdge>), Group> = BTreeMap::new();
    for pat in concrete {
        // Step 5: spurious patterns occur in no failing macro trace.
        let failing: Vec<&Prepared<'_>> =
            fail.iter().filter(|f| prefixspan::is_subsequence(&pat, f.macros)).collect();
        if failing.is_empty() {
            stats.spurious += 1;
            continue;
        }
        // Step 6: dependences on instances (Def. 3, Def. 4).
        let mut deps: BTreeSet<DepEdge> = BTreeSet::new();
        let mut witnessed = Vec::new();
        for f in &failing {
            let (found, capped) = related_instances(&pat, f, &mut deps, steps_left);
            stats.capped |= capped;
            if found {
                witnessed.push(f.run);
            }
        }
        if witnessed.is_empty() {
            stats.without_deps += 1;
            continue;
        }
        // Step 7: relative support.
        let passing: Vec<u32> = pass
            .iter()
            .filter(|p| prefixspan::is_subsequence(&pat, p.macros))
            .filter(|p| {
                !witnessed_support || related_instances(&pat, p, &mut BTreeSet::new(), steps_left).0
            })
            .map(|p| p.run)
            .collect();
        let in_fail = if witnessed_support { witnessed.len() } else { failing.len() };
        let s_fail = in_fail as f64 / fail.len() as f64;
        let s_pass = if pass.is_empty() { 0.0 } else { passing.len() as f64 / pass.len() as f64 };
        let rel_supp = s_fail / (s_fail + s_pass);
        if rel_supp <= 0.5 {
            stats.not_discriminating += 1;
            continue;
        }
        // Step 8: group by (rel_supp, dependence set).
        let deps: Vec<DepEdge> = deps.into_iter().collect();
        let key = ((rel_supp * 1e9).round() as i64, deps.clone());
        let g = groups.entry(key).or_insert_with(|| Group {
            rel_supp,
            s_fail,
            s_pass,
            deps,
            patterns: Vec::new(),
        });
        g.s_fail = g.s_fail.max(s_fail);
        g.patterns.push(Found {
            macros: pat.iter().map(|&i| m.macros[i].clone()).collect(),
            failing: failing.iter().map(|f| f.run).collect(),
            passing,
            witnessed,
        });
    }
    let mut groups: Vec<Group> = groups.into_values().collect();
    for g in &mut groups {
        g.patterns.sort_by(|a, b| {
            a.len()
                .cmp(&b.len())
                .then_with(|| b.failing.len().cmp(&a.failing.len()))
                .then_with(|| a.macros.cmp(&b.macros))
        });
    }
    groups
        .sort_by(|a, b| rank_key(a).partial_cmp(&rank_key(b)).unwrap_or(std::cmp::Ordering::Equal));
    groups
}

/// Highest relative support first; then (spec [R]) higher failing support,
/// shorter patterns; then groups whose dependences were seen in more
/// failing runs, and seen first.
fn rank_key(g: &Group) -> (f64, f64, usize, i64, u32, Vec<Vec<u32>>) {
    let witnessed: BTreeSet<u32> =
        g.patterns.iter().flat_map(|p| p.witnessed.iter().copied()).collect();
    (
        -g.rel_supp,
        -g.s_fail,
        g.patterns.first().map_or(0, Found::len),
        -(witnessed.len() as i64),
        witnessed.first().copied().unwrap_or(u32::MAX),
        g.patterns.first().map(|p| p.macros.clone()).unwrap_or_default(),
    )
}

/// Enumerates the instances of `pat` in `f` (at most [`INSTANCE_CAP`],
/// examining at most [`STEP_CAP`] positions and what is left of the
/// call's [`TOTAL_STEP_CAP`], which it uses up); true if on some instance
/// every macro has a dependence with another macro of the instance. The
/// dependences of those instances are added to `deps`. The second value
/// says whether a cap was hit.
///
/// Only positions that could be related are tried: a slot's position must
/// have a dependence with a position holding another slot's macro, on the
/// right side of it. That is necessary for the condition, so nothing is
/// lost, and it is what keeps the check (which "dominates the running
/// time", §5) from enumerating every instance of long traces.
fn related_instances(
    pat: &[usize],
    f: &Prepared<'_>,
    deps: &mut BTreeSet<DepEdge>,
    steps_left: &mut usize,
) -> (bool, bool) {
    // Each slot needs a dependence partner among the other slots' macros.
    let partner_exists = |i: usize| {
        (0..pat.len()).any(|j| {
            (j < i && f.pairs.contains(&(pat[j], pat[i])))
                || (j > i && f.pairs.contains(&(pat[i], pat[j])))
        })
    };
    if !(0..pat.len()).all(partner_exists) {
        return (false, false);
    }
    let eligible = |i: usize, p: usize| {
        f.partners[p].iter().any(|&q| {
            (0..pat.len()).any(|j| j != i && f.macros[q] == pat[j] && ((q < p) == (j < i)))
        })
    };
    let mut found = false;
    let mut work = Work { seen: 0, steps: 0, limit: STEP_CAP.min(*steps_left) };
    let mut pos = Vec::with_capacity(pat.len());
    let mut check = |inst: &[usize]| {
        let mut related = vec![false; inst.len()];
        let mut mine = Vec::new();
        for &(a, b, edge) in &f.deps {
            let (Some(i), Some(j)) =
                (inst.iter().position(|&p| p == a), inst.iter().position(|&p| p == b))
            else {
                continue;
            };
            related[i] = true;
            related[j] = true;
            mine.push(edge);
        }
        if related.iter().all(|&r| r) {
            found = true;
            deps.extend(mine);
        }
    };
    let capped = !walk(pat, f.macros, &eligible, 0, &mut pos, &mut work, &mut check);
    *steps_left -= work.steps.min(*steps_left);
    (found, capped)
}

/// What one enumeration has done: complete instances seen, positions
/// examined, and how many it may examine.
struct Work {
    seen: usize,
    steps: usize,
    limit: usize,
}

/// Depth-first enumeration of index tuples; false when a cap stopped it.
fn walk(
    pat: &[usize],
    trace: &[usize],
    eligible: &impl Fn(usize, usize) -> bool,
    from: usize,
    pos: &mut Vec<usize>,
    work: &mut Work,
    check: &mut impl FnMut(&[usize]),
) -> bool {
    if pos.len() == pat.len() {
        work.seen += 1;
        check(pos);
        return work.seen < INSTANCE_CAP;
    }
    let slot = pos.len();
    let want = pat[slot];
    for p in from..trace.len() {
        work.steps += 1;
        if work.steps > work.limit {
            return false;
        }
        if trace[p] == want && eligible(slot, p) {
            pos.push(p);
            let go_on = walk(pat, trace, eligible, p + 1, pos, work, check);
            pos.pop();
            if !go_on {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests;
