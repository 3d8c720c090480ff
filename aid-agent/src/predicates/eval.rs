//! Evaluating learned predicates on one run: the same conditions for the
//! labelled runs (statistical debugging) and for intervened runs (the live
//! oracle), so a key means the same thing in both.

use std::collections::BTreeSet;

use super::{
    Catalog, Condition, Kind, PredId, Predicate, RunTruth,
    index::{RunIndex, end_of, share_pointer},
};
use crate::{bitset::BitSet, model::Run};

/// `only`: evaluate just these ids (F always).
pub(super) fn evaluate(cat: &Catalog, run: &Run, only: Option<&BTreeSet<PredId>>) -> RunTruth {
    let idx = RunIndex::new(run, |f| !cat.internal.contains(&f));
    let mut held = Vec::new();
    let mut observed = BitSet::new(cat.predicates.len());
    let mut check = |p: &Predicate| {
        let (seen, at) = test(cat, &idx, p);
        if seen {
            observed.insert(p.id.0 as usize);
        }
        if let Some(t) = at {
            held.push((p.id, t));
        }
    };
    match only {
        None => cat.predicates.iter().for_each(&mut check),
        Some(ids) => {
            let f = cat.failure();
            let mut ids: Vec<PredId> = ids.iter().copied().filter(|&i| i != f).collect();
            ids.insert(0, f);
            for id in ids {
                if let Some(p) = cat.get(id) {
                    check(p);
                }
            }
        }
    }
    held.sort_unstable_by_key(|&(p, _)| p);
    RunTruth { run: run.id, failed: run.failed(), held, observed }
}

/// (observed, Some(anchor) when it held).
fn test(cat: &Catalog, idx: &RunIndex<'_>, p: &Predicate) -> (bool, Option<u64>) {
    let run = idx.run;
    let key = &p.key;
    match &p.condition {
        Condition::Failure => (true, run.failed().then_some(run.end_ns)),
        Condition::CountAbove { max } => {
            let n = idx.count(key.func, key.role);
            let at = (n > *max)
                .then(|| idx.nth(key.func, key.role, max + 1).map_or(run.end_ns, |c| c.entry_ns));
            (true, at)
        }
        Condition::CountBelow { min } => {
            let n = idx.count(key.func, key.role);
            (true, (n >= 1 && n < *min).then_some(run.end_ns))
        }
        Condition::NoCall => (true, (idx.count(key.func, key.role) == 0).then_some(run.end_ns)),
        Condition::EndsBefore | Condition::OverlapSamePointer => {
            let Some(other) = key.other else {
                return (false, None);
            };
            let (Some(a), Some(b)) = (idx.call(key.site()), idx.call(other)) else {
                return (false, None);
            };
            if p.key.kind == Kind::Order {
                let exit = a.exit_ns.filter(|&x| x < b.entry_ns);
                (true, exit)
            } else {
                let (ea, eb) = (end_of(a, run), end_of(b, run));
                let overlap = a.entry_ns < eb && b.entry_ns < ea;
                let mask = |f: u32| cat.pointer_args.get(f as usize).copied().unwrap_or(0b111);
                let holds = overlap && share_pointer(a, mask(a.func), b, mask(b.func));
                (true, holds.then_some(a.entry_ns.max(b.entry_ns)))
            }
        }
        cond => {
            let Some(c) = idx.call(key.site()) else {
                return (false, None);
            };
            let mut at = c.exit_ns.unwrap_or(run.end_ns);
            let holds = match *cond {
                Condition::RetNot { value } => c.ret.is_some_and(|v| v != value),
                Condition::ErrorValue { negative, zero } => {
                    c.ret.is_some_and(|v| (negative && v < 0) || (zero && v == 0))
                }
                Condition::LongerThan { max_ns, passing_ns, .. } => {
                    // Anchored when it became slower than every passing run.
                    at = c.entry_ns.saturating_add(passing_ns).saturating_add(1);
                    c.active_ns(end_of(c, run)) > max_ns
                }
                Condition::ShorterThan { min_ns, .. } => {
                    c.duration_ns().is_some_and(|d| d < min_ns)
                }
                _ => false,
            };
            (true, holds.then_some(at))
        }
    }
}
