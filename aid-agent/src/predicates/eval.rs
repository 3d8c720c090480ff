//! Evaluating learned predicates on one run: the same conditions for the
//! labelled runs (statistical debugging) and for intervened runs (the live
//! oracle), so a key means the same thing in both.

use std::collections::BTreeSet;

use super::{
    Calls, Catalog, Condition, Expected, Kind, ObjectName, PairMember, PredId, PredKey, Predicate,
    RunTruth, SameField, deadlock, groups,
    index::{GroupKey, RunIndex, callees, end_of, pointers, share_pointer},
    locks, objects, outrun, sections, statements,
};
use crate::util::fxhash::{FxMap, FxSet};
use crate::{
    bitset::BitSet,
    model::{Call, FuncId, Run, Site},
};

/// `only`: evaluate just these ids (F always).
pub(super) fn evaluate(cat: &Catalog, run: &Run, only: Option<&BTreeSet<PredId>>) -> RunTruth {
    let keep = |f| !cat.internal.contains(&f);
    // Groups, and the thread classes the section and statement tests ask
    // (which calls are on threads that are one each).
    let groups = cat.predicates.iter().any(|p| {
        p.key.is_group()
            || matches!(p.key.other, Some(o) if matches!(o.calls, Calls::Group { .. }))
            || matches!(p.condition, Condition::SectionsInOrder | Condition::RunsBetweenStatements)
            || matches!(&p.condition, Condition::AfterAll { pairs, .. } if pairs.iter().any(|m| m.sections))
    });
    let idx = if groups {
        let by_caller: FxSet<_> = cat.by_caller.iter().copied().collect();
        RunIndex::with_groups(run, keep, &cat.classes, &by_caller)
    } else {
        RunIndex::new(run, keep)
    };
    let mut ev = Evaluator {
        cat,
        idx,
        names: None,
        sections: None,
        firsts: None,
        interleavings: None,
        early: None,
        cycles: None,
        windows: None,
        inside: None,
    };
    let mut held = Vec::new();
    let mut observed = BitSet::new(cat.predicates.len());
    let mut undecided = BitSet::new(cat.predicates.len());
    let mut check = |p: &Predicate| {
        let (seen, at) = ev.test(p);
        if seen {
            observed.insert(p.id.0 as usize);
        }
        if let Some(t) = at {
            held.push((p.id, t));
        } else if ev.undecided(p) {
            undecided.insert(p.id.0 as usize);
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
    RunTruth { run: run.id, failed: run.failed(), held, observed, undecided }
}

struct Evaluator<'c, 'r> {
    cat: &'c Catalog,
    idx: RunIndex<'r>,
    /// Canonical object names of the run, computed when first needed.
    names: Option<FxMap<i64, ObjectName>>,
    /// The run's critical sections, computed when first needed.
    sections: Option<Vec<sections::Section>>,
    /// Each call's first section per lock, built from `sections` once.
    firsts: Option<sections::Firsts>,
    /// Lock-section interleavings of the run, computed when first needed.
    interleavings: Option<FxMap<locks::Interleaving, sections::Seen>>,
    /// Sections taken before another call's first section on the lock.
    early: Option<FxMap<sections::Early, sections::Seen>>,
    /// Windows between statements of the run, computed when first needed.
    windows: Option<FxMap<statements::Window, u64>>,
    /// Lock-order cycles of the run, computed when first needed.
    cycles: Option<FxMap<deadlock::Cycle, deadlock::Seen>>,
    /// The traced functions each call went on to call, computed when first
    /// needed.
    inside: Option<Vec<Vec<FuncId>>>,
}

fn group_of(func: u32, calls: Calls) -> Option<GroupKey> {
    match calls {
        Calls::Group { class, within } => Some((func, class, within)),
        Calls::Site { .. } => None,
    }
}

/// The groups of a group-pair key: its own calls', then the other's.
fn group_pair(key: &PredKey) -> Option<(GroupKey, GroupKey)> {
    group_of(key.func, key.calls).zip(key.other.and_then(|o| group_of(o.func, o.calls)))
}

fn expected_at(expected: &[Expected], c: &Call) -> Option<i64> {
    expected
        .binary_search_by_key(&(c.role, c.instance), |&(r, i, _)| (r, i))
        .ok()
        .map(|i| expected[i].2)
}

impl Evaluator<'_, '_> {
    fn mask(&self, f: u32) -> u8 {
        self.cat.pointer_args.get(f as usize).copied().unwrap_or(0b111)
    }

    /// (observed, Some(anchor) when it held).
    fn test(&mut self, p: &Predicate) -> (bool, Option<u64>) {
        let run = self.idx.run;
        let key = &p.key;
        match &p.condition {
            Condition::Failure => (true, run.failed().then_some(run.end_ns)),
            Condition::CountAbove { .. } | Condition::CountBelow { .. } | Condition::NoCall => {
                self.count(key, &p.condition)
            }
            Condition::EndsBefore
            | Condition::EntersBefore
            | Condition::ExitsBefore
            | Condition::OverlapSamePointer
            | Condition::DataRace { .. }
            | Condition::Intersect => {
                let (Some(a), Some(b)) = (key.site(), key.other_site()) else {
                    return (false, None);
                };
                let (Some(a), Some(b)) = (self.idx.call(a), self.idx.call(b)) else {
                    return (false, None);
                };
                let at_entry = p.anchor == super::Anchor::Entry;
                (true, self.pair(&p.condition, a, b, at_entry))
            }
            Condition::AnyPair { relation, pairs } => self.any_pair(relation, pairs),
            Condition::AfterAll { pairs, any } => self.after_all(pairs, any),
            Condition::GroupOverlap { shared, object, same } => {
                self.group_overlap(key, *shared, *object, same.as_ref())
            }
            Condition::InterleavedSections => self.interleaved(key),
            Condition::TakenBeforeFirstSection => self.before_first_section(key),
            Condition::SectionsInOrder => self.sections_in_order(key),
            Condition::RunsBetweenStatements => self.between_statements(key),
            Condition::LockCycle { .. } => self.cycle(key),
            Condition::AheadOfProducer => self.ahead(key),
            Condition::KeyRepeats { same } => match group_of(key.func, key.calls) {
                Some(g) => {
                    let seen = self.idx.by_group.contains_key(&g);
                    let again = groups::first_repeat(self.idx.group_calls(&g), &same.field);
                    (seen, again.map(|c| c.entry_ns))
                }
                None => (false, None),
            },
            cond => match group_of(key.func, key.calls) {
                Some(g) => {
                    let mut seen = false;
                    let mut first: Option<u64> = None;
                    for c in self.idx.group_calls(&g) {
                        seen = true;
                        if let Some(t) = one_call(cond, key, c, run)
                            && first.is_none_or(|f| t < f)
                        {
                            first = Some(t);
                        }
                    }
                    (seen, first)
                }
                None => {
                    let Some(c) = key.site().and_then(|s| self.idx.call(s)) else {
                        return (false, None);
                    };
                    (true, one_call(cond, key, c, run))
                }
            },
        }
    }

    fn count(&self, key: &PredKey, cond: &Condition) -> (bool, Option<u64>) {
        let run = self.idx.run;
        let (n, nth): (u32, Box<dyn Fn(u32) -> Option<u64>>) = match key.calls {
            Calls::Site { role, .. } => (
                self.idx.count(key.func, role),
                Box::new(move |k| self.idx.nth(key.func, role, k).map(|c| c.entry_ns)),
            ),
            Calls::Group { class, within } => {
                let g = (key.func, class, within);
                let calls: Vec<&Call> = self.idx.group_calls(&g).collect();
                let n = calls.len() as u32;
                (n, Box::new(move |k| calls.get(k as usize - 1).map(|c| c.entry_ns)))
            }
        };
        let at = match *cond {
            Condition::CountAbove { max } => (n > max).then(|| nth(max + 1).unwrap_or(run.end_ns)),
            Condition::CountBelow { min } => (n >= 1 && n < min).then_some(run.end_ns),
            _ => (n == 0).then_some(run.end_ns),
        };
        (true, at)
    }

    /// A pairwise relation between two calls, and its anchor.
    fn pair(&self, cond: &Condition, a: &Call, b: &Call, at_entry: bool) -> Option<u64> {
        let run = self.idx.run;
        match cond {
            Condition::EndsBefore => {
                a.exit_ns.filter(|&x| x < b.entry_ns).map(|x| if at_entry { a.entry_ns } else { x })
            }
            Condition::EntersBefore => (a.entry_ns < b.entry_ns).then_some(a.entry_ns),
            Condition::ExitsBefore => super::pairs::ends_first(a, b, run),
            Condition::Intersect => {
                (a.entry_ns < b.entry_ns && b.entry_ns < end_of(a, run)).then_some(b.entry_ns)
            }
            // The writes were seen in watched re-runs; in this run, as in
            // every run, the overlap on the object is what is evaluated.
            Condition::OverlapSamePointer | Condition::DataRace { .. } => {
                let (ea, eb) = (end_of(a, run), end_of(b, run));
                let overlap = a.entry_ns < eb && b.entry_ns < ea;
                (overlap && share_pointer(a, self.mask(a.func), b, self.mask(b.func)))
                    .then_some(a.entry_ns.max(b.entry_ns))
            }
            _ => None,
        }
    }

    /// An order that did not hold is undecided when its first call had
    /// ended (for "starts before": started) and its second had not
    /// started by the run's end ([`RunTruth`]'s `undecided`); for a group
    /// form, when some pair is.
    fn undecided(&self, p: &Predicate) -> bool {
        let open = |relation: &Condition, a: Option<Site>, b: Option<Site>| {
            let (Some(a), Some(b)) = (a, b) else { return false };
            let Some(a) = self.idx.call(a) else { return false };
            let first_done = match relation {
                Condition::EndsBefore => a.exit_ns.is_some(),
                Condition::EntersBefore => true,
                _ => false,
            };
            first_done && self.idx.call(b).is_none()
        };
        match &p.condition {
            c @ (Condition::EndsBefore | Condition::EntersBefore) => {
                open(c, p.key.site(), p.key.other_site())
            }
            Condition::AnyPair { relation, pairs } => {
                pairs.iter().any(|m| !m.sections && open(relation, Some(m.a), Some(m.b)))
            }
            _ => false,
        }
    }

    fn any_pair(&self, relation: &Condition, pairs: &[PairMember]) -> (bool, Option<u64>) {
        let mut seen = false;
        let mut first: Option<u64> = None;
        for m in pairs {
            let (Some(a), Some(b)) = (self.idx.call(m.a), self.idx.call(m.b)) else { continue };
            seen = true;
            if let Some(t) = self.pair(relation, a, b, m.at_entry)
                && first.is_none_or(|f| t < f)
            {
                first = Some(t);
            }
        }
        (seen, first)
    }

    /// Every pair ended its first call before its second started (or, for
    /// sections, had its first critical section on a shared lock first),
    /// and, with `any`, at least one of those did; the moment the last of
    /// them ended (of `any`, the first that did). Observed when every call
    /// of `pairs` is there (and, for sections, shares a lock with the
    /// later one), and the later one returned unless the run failed (a
    /// passing run that ended inside it does not say what it would have
    /// done); a call of `any` missing is one that did not come first.
    fn after_all(&mut self, pairs: &[PairMember], any: &[PairMember]) -> (bool, Option<u64>) {
        if pairs.iter().chain(any).any(|m| m.sections) {
            self.run_firsts();
        }
        let mut last: Option<u64> = None;
        for m in pairs {
            match self.part(m) {
                Err(()) => return (false, None),
                Ok(Some(t)) => last = last.max(Some(t)),
                Ok(None) => return (true, None),
            }
        }
        if any.is_empty() {
            return (true, last);
        }
        let mut first: Option<u64> = None;
        for m in any {
            if let Ok(Some(t)) = self.part(m) {
                first = Some(first.map_or(t, |f| f.min(t)));
            }
        }
        match first {
            Some(t) => (true, last.max(Some(t))),
            None => (true, None),
        }
    }

    /// One part of [`Evaluator::after_all`]: Err when it is not observed,
    /// else when it held.
    fn part(&self, m: &PairMember) -> Result<Option<u64>, ()> {
        let (Some(a), Some(b)) = (self.idx.call(m.a), self.idx.call(m.b)) else { return Err(()) };
        // A passing run that ended inside the later call: unknown.
        if b.exit_ns.is_none() && !self.idx.run.failed() {
            return Err(());
        }
        match self.firsts.as_ref() {
            Some(firsts) if m.sections => {
                let (Some(ia), Some(ib)) = (self.idx.index_of(m.a), self.idx.index_of(m.b)) else {
                    return Err(());
                };
                firsts.before(ia, ib).map(|(before, at)| before.then_some(at)).ok_or(())
            }
            _ => Ok(self.pair(&Condition::EndsBefore, a, b, m.at_entry)),
        }
    }

    /// The first moment a call of one group starts while a call of the
    /// other runs on another thread (on a shared object, or on the named
    /// one, when asked).
    fn group_overlap(
        &mut self,
        key: &PredKey,
        shared: bool,
        object: Option<ObjectName>,
        same: Option<&SameField>,
    ) -> (bool, Option<u64>) {
        let Some((ga, gb)) = group_pair(key) else { return (false, None) };
        let idx = &self.idx;
        let run = idx.run;
        let (la, lb) = (idx.by_group.get(&ga), idx.by_group.get(&gb));
        let (Some(la), Some(lb)) = (la, lb) else { return (false, None) };
        if object.is_some() && self.names.is_none() {
            self.names = Some(objects::names(&self.idx, &self.cat.pointer_args));
        }
        if key.callee.is_some() && self.inside.is_none() {
            self.inside = Some(callees(run, |f| !self.cat.internal.contains(&f)));
        }
        let idx = &self.idx;
        let names = self.names.as_ref();
        // Both calls went on to call the key's callee, when it has one.
        let both_call = |i: u32, j: u32| match (key.callee, self.inside.as_ref()) {
            (Some(g), Some(inside)) => {
                inside[i as usize].contains(&g) && inside[j as usize].contains(&g)
            }
            _ => true,
        };
        // Merge the two lists in entry order; (call, side).
        let mut all: Vec<(u32, bool)> = la.iter().map(|&i| (i, false)).collect();
        all.extend(lb.iter().map(|&i| (i, true)));
        all.sort_unstable_by_key(|&(i, _)| (run.calls[i as usize].entry_ns, i));
        let mut active: Vec<(u32, bool)> = Vec::new();
        for &(i, side) in &all {
            let c = &run.calls[i as usize];
            active.retain(|&(j, _)| end_of(&run.calls[j as usize], run) > c.entry_ns);
            let hit = active.iter().any(|&(j, other_side)| {
                let d = &run.calls[j as usize];
                if d.role == c.role || (ga != gb && other_side == side) {
                    return false;
                }
                if !shared {
                    return true;
                }
                if same.is_some_and(|s| !s.field.agrees(c, d)) || !both_call(i, j) {
                    return false;
                }
                let (mc, md) = (self.mask(c.func), self.mask(d.func));
                pointers(c, mc).any(|p| {
                    pointers(d, md).any(|q| q == p)
                        && object.is_none_or(|o| names.and_then(|n| n.get(&p)) == Some(&o))
                })
            });
            if hit {
                return (true, Some(c.entry_ns));
            }
            active.push((i, side));
        }
        let _ = idx;
        (true, None)
    }

    /// The two groups of a pairwise group key, when both have calls in
    /// the run.
    fn both_groups(&self, key: &PredKey) -> Option<(GroupKey, GroupKey)> {
        let ga = group_of(key.func, key.calls)?;
        let gb = key.other.and_then(|o| group_of(o.func, o.calls))?;
        (self.idx.by_group.contains_key(&ga) && self.idx.by_group.contains_key(&gb))
            .then_some((ga, gb))
    }

    fn run_sections(&mut self) -> &[sections::Section] {
        let (idx, ops) = (&self.idx, &self.cat.lock_ops);
        self.sections.get_or_insert_with(|| sections::sections(idx, ops))
    }

    fn run_firsts(&mut self) -> &sections::Firsts {
        let (idx, ops) = (&self.idx, &self.cat.lock_ops);
        let all = &*self.sections.get_or_insert_with(|| sections::sections(idx, ops));
        self.firsts.get_or_insert_with(|| sections::Firsts::of(all))
    }

    /// Some call of the other group held a lock between two critical
    /// sections of some call of the key's group.
    fn interleaved(&mut self, key: &PredKey) -> (bool, Option<u64>) {
        let Some(pair) = self.both_groups(key) else { return (false, None) };
        if self.interleavings.is_none() {
            self.run_sections();
            let masks = &self.cat.pointer_args;
            let mask = |f: u32| masks.get(f as usize).copied().unwrap_or(0b111);
            let all =
                locks::interleavings(&self.idx, self.sections.as_deref().unwrap_or(&[]), &mask);
            self.interleavings = Some(all);
        }
        let key = (pair.0, pair.1, key.arg);
        (true, self.interleavings.as_ref().and_then(|all| all.get(&key)).map(|s| s.at_ns))
    }

    /// The first call's first section on a lock both take came before the
    /// second call's; placed at the first call's entry (where the hold
    /// that negates it acts). Not observed in a passing run that ended
    /// inside the second call.
    fn sections_in_order(&mut self, key: &PredKey) -> (bool, Option<u64>) {
        let (Some(a), Some(b)) = (key.site(), key.other_site()) else { return (false, None) };
        let (Some(ia), Some(ib)) = (self.idx.index_of(a), self.idx.index_of(b)) else {
            return (false, None);
        };
        let run = self.idx.run;
        let entry = run.calls[ia as usize].entry_ns;
        // A passing run that ended inside B: unknown.
        if run.calls[ib as usize].exit_ns.is_none() && !run.failed() {
            return (false, None);
        }
        match self.run_firsts().before(ia, ib) {
            Some((true, _)) => (true, Some(entry)),
            Some((false, _)) => (true, None),
            None => (false, None),
        }
    }

    /// The second call ran while the first was between the key's
    /// statement point and its thread's next; placed where that began.
    /// Not observed in a run without the statement points.
    fn between_statements(&mut self, key: &PredKey) -> (bool, Option<u64>) {
        let (Some(other), Some(pa)) = (key.other, key.callee) else { return (false, None) };
        let form = key.arg & statements::FORM;
        let rank = key.arg & !statements::FORM;
        let Some(pb) = self.cat.points.of_rank(other.func, rank) else { return (false, None) };
        let idx = &self.idx;
        let classes = &self.cat.classes;
        let single = |r: crate::model::Role| {
            idx.class.get(&r).is_some_and(|&c| classes.single(c) == Some(r))
        };
        let (a, b) = ((key.func, key.calls), (other.func, other.calls));
        let observed = |side: statements::Side| match side.1 {
            Calls::Site { role, instance } => {
                idx.index_of(Site { func: side.0, role, instance }).is_some()
            }
            Calls::Group { class, within } => {
                idx.group_calls(&(side.0, class, within)).next().is_some()
            }
        };
        if !observed(a) || !observed(b) || !idx.run.calls.iter().any(|c| c.func == pa) {
            return (false, None);
        }
        if self.windows.is_none() {
            let mut all: FxMap<statements::Window, u64> = FxMap::default();
            for (w, at) in statements::windows(idx, &self.cat.points, &single) {
                let e = all.entry(w).or_insert(at);
                *e = (*e).min(at);
            }
            self.windows = Some(all);
        }
        let at = self.windows.as_ref().and_then(|all| {
            all.iter()
                .filter(|((ia, qa, ib, qb, p), _)| {
                    *qa == pa
                        && *qb == pb
                        && *p & statements::FORM == form
                        && statements::stands_on(idx, &single, *ia, a)
                        && statements::stands_on(idx, &single, *ib, b)
                })
                .map(|(_, &t)| t)
                .min()
        });
        (true, at)
    }

    /// Some call of the other group held the lock of the first section
    /// of some call of the key's group, after that call began and before
    /// that section.
    fn before_first_section(&mut self, key: &PredKey) -> (bool, Option<u64>) {
        let Some(pair) = self.both_groups(key) else { return (false, None) };
        if self.early.is_none() {
            self.run_sections();
            let masks = &self.cat.pointer_args;
            let mask = |f: u32| masks.get(f as usize).copied().unwrap_or(0b111);
            let all =
                sections::early_sections(&self.idx, self.sections.as_deref().unwrap_or(&[]), &mask);
            self.early = Some(all);
        }
        let key = (pair.0, pair.1, key.arg);
        (true, self.early.as_ref().and_then(|all| all.get(&key)).map(|s| s.at_ns))
    }
}

impl Evaluator<'_, '_> {
    /// Some call of the key's group and some call of the other group, on
    /// two threads, each held a lock the other asked for.
    /// [`Condition::AheadOfProducer`]: observed where both groups ran.
    fn ahead(&self, key: &PredKey) -> (bool, Option<u64>) {
        let Some((c, p)) = group_pair(key) else { return (false, None) };
        if !self.idx.by_group.contains_key(&c) || !self.idx.by_group.contains_key(&p) {
            return (false, None);
        }
        (true, outrun::outrun_at(&self.idx, &p, &c))
    }

    fn cycle(&mut self, key: &PredKey) -> (bool, Option<u64>) {
        let Some((ga, gb)) = group_pair(key) else { return (false, None) };
        let seen = self.idx.by_group.contains_key(&ga) && self.idx.by_group.contains_key(&gb);
        if !seen {
            return (false, None);
        }
        if self.cycles.is_none() {
            self.cycles = Some(deadlock::cycles(&self.idx, &self.cat.lock_calls));
        }
        (true, self.cycles.as_ref().and_then(|all| all.get(&(ga, gb))).map(|s| s.at_ns))
    }
}

/// A per-call condition on one call: its anchor when it holds.
fn one_call(cond: &Condition, key: &PredKey, c: &Call, run: &Run) -> Option<u64> {
    let at_exit = c.exit_ns.unwrap_or(run.end_ns);
    match *cond {
        Condition::RetNot { value } => c.ret.is_some_and(|v| v != value).then_some(at_exit),
        Condition::RetNotPerCall { ref expected } => {
            let x = expected_at(expected, c)?;
            c.ret.is_some_and(|v| v != x).then_some(at_exit)
        }
        Condition::ErrorValue { negative, zero } => {
            c.ret.is_some_and(|v| (negative && v < 0) || (zero && v == 0)).then_some(at_exit)
        }
        // Anchored when it became slower than every passing run.
        // An unwound call's end is a bound, not a duration.
        Condition::LongerThan { max_ns, passing_ns, .. } => (!c.unwound
            && c.active_ns(end_of(c, run)) > max_ns)
            .then(|| c.entry_ns.saturating_add(passing_ns).saturating_add(1)),
        Condition::ShorterThan { min_ns, .. } => {
            c.duration_ns().is_some_and(|d| !c.unwound && d < min_ns).then_some(at_exit)
        }
        Condition::ArgNot { value } => {
            (c.args[key.arg as usize % 3] != value).then_some(c.entry_ns)
        }
        Condition::ArgNotPerCall { ref expected } => {
            let x = expected_at(expected, c)?;
            (c.args[key.arg as usize % 3] != x).then_some(c.entry_ns)
        }
        _ => None,
    }
}

impl Kind {
    /// Kinds whose predicates hold per call and can be aggregated "some
    /// call of the group".
    pub fn per_call(self) -> bool {
        matches!(
            self,
            Kind::RetDiffers | Kind::ErrorReturn | Kind::TooSlow | Kind::TooFast | Kind::ArgDiffers
        )
    }
}
