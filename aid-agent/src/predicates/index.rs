//! Per-run lookup of calls by site and by group, the one structure every
//! pass over a run needs. Calls are grouped by (function, role) and placed
//! by instance, so a site lookup is one hash probe and an index; with the
//! session's thread classes, each call also has its class and its
//! innermost traced caller, and calls are listed by group. Built once per
//! run and dropped, so memory stays flat however many runs a session has.

use crate::{
    model::{
        Call, FuncId, Function, Role, Run, Site,
        identity::{ClassId, Classes, looks_like_address},
    },
    util::fxhash::{FxMap, FxSet},
};

/// Call indices of one (function, role) by instance (None where an
/// instance is missing), and how many calls there were.
type Slots = (Vec<Option<u32>>, u32);

/// A group of calls: (function, class, caller) — the caller only for
/// functions whose calls on that class are told apart by caller.
pub(crate) type GroupKey = (FuncId, ClassId, Option<FuncId>);

/// Calls of one run by site.
pub(crate) struct RunIndex<'r> {
    pub run: &'r Run,
    by_fr: FxMap<(FuncId, Role), Slots>,
    /// Class of each role (threads whose class no learning run had have
    /// none); empty when not asked for.
    pub class: FxMap<Role, ClassId>,
    /// Per call: its group, when classes were asked for.
    pub group: Vec<Option<GroupKey>>,
    /// Call indices by group, in entry order.
    pub by_group: FxMap<GroupKey, Vec<u32>>,
}

impl<'r> RunIndex<'r> {
    /// Indexes the calls whose function passes `keep`, by site and — with
    /// `classes` — by group, telling calls apart by caller for the
    /// (function, class) pairs in `by_caller`.
    pub fn with_groups(
        run: &'r Run,
        keep: impl Fn(FuncId) -> bool,
        classes: &Classes,
        by_caller: &FxSet<(FuncId, ClassId)>,
    ) -> Self {
        let mut idx = RunIndex::new(run, &keep);
        idx.class = classes.of_run(run);
        // Callers matter only where calls are told apart by them.
        let callers = if by_caller.is_empty() { Vec::new() } else { callers(run, &keep) };
        idx.group = run
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if !keep(c.func) || c.instance == 0 {
                    return None;
                }
                let class = *idx.class.get(&c.role)?;
                let split = !callers.is_empty() && by_caller.contains(&(c.func, class));
                Some((c.func, class, if split { callers[i] } else { None }))
            })
            .collect();
        for (i, g) in idx.group.iter().enumerate() {
            if let Some(g) = g {
                idx.by_group.entry(*g).or_default().push(i as u32);
            }
        }
        idx
    }

    /// Indexes the calls whose function passes `keep`.
    pub fn new(run: &'r Run, keep: impl Fn(FuncId) -> bool) -> Self {
        let mut by_fr: FxMap<(FuncId, Role), Slots> = FxMap::default();
        for (i, c) in run.calls.iter().enumerate() {
            if !keep(c.func) || c.instance == 0 {
                continue;
            }
            let e = by_fr.entry((c.func, c.role)).or_default();
            let slot = c.instance as usize - 1;
            if e.0.len() <= slot {
                e.0.resize(slot + 1, None);
            }
            if e.0[slot].is_none() {
                e.0[slot] = Some(i as u32);
                e.1 += 1;
            }
        }
        RunIndex {
            run,
            by_fr,
            class: FxMap::default(),
            group: Vec::new(),
            by_group: FxMap::default(),
        }
    }

    /// The calls of a group, in entry order.
    pub fn group_calls(&self, g: &GroupKey) -> impl Iterator<Item = &'r Call> + '_ {
        let run = self.run;
        self.by_group.get(g).into_iter().flatten().map(move |&i| &run.calls[i as usize])
    }

    pub fn call(&self, site: Site) -> Option<&'r Call> {
        Some(&self.run.calls[self.index_of(site)? as usize])
    }

    /// The index in `run.calls` of the call at `site`.
    pub fn index_of(&self, site: Site) -> Option<u32> {
        let (slots, _) = self.by_fr.get(&(site.func, site.role))?;
        *slots.get(site.instance.checked_sub(1)? as usize)?
    }

    /// Calls of `func` on `role` in this run.
    pub fn count(&self, func: FuncId, role: Role) -> u32 {
        self.by_fr.get(&(func, role)).map_or(0, |e| e.1)
    }

    /// The call that is the `k`-th (1-based) present instance, for the
    /// count anchor.
    pub fn nth(&self, func: FuncId, role: Role, k: u32) -> Option<&'r Call> {
        let (slots, _) = self.by_fr.get(&(func, role))?;
        let i = slots.iter().flatten().nth(k.checked_sub(1)? as usize)?;
        Some(&self.run.calls[*i as usize])
    }

    pub fn groups(&self) -> impl Iterator<Item = (FuncId, Role, u32)> + '_ {
        self.by_fr.iter().map(|(&(f, r), e)| (f, r, e.1))
    }
}

/// The innermost traced caller of every call on its own thread (None for
/// calls no kept call encloses), by index in `run.calls`.
pub(crate) fn callers(run: &Run, keep: impl Fn(FuncId) -> bool) -> Vec<Option<FuncId>> {
    enclosing(run, keep).into_iter().map(|e| e.map(|j| run.calls[j as usize].func)).collect()
}

/// The kept functions called inside each call on its own thread, at any
/// depth, each once, by index in `run.calls` (empty for calls not kept).
pub(crate) fn callees(run: &Run, keep: impl Fn(FuncId) -> bool) -> Vec<Vec<FuncId>> {
    let up = enclosing(run, &keep);
    let mut out: Vec<Vec<FuncId>> = vec![Vec::new(); run.calls.len()];
    for (i, c) in run.calls.iter().enumerate() {
        let mut at = up[i];
        while let Some(j) = at {
            let list = &mut out[j as usize];
            if !list.contains(&c.func) {
                list.push(c.func);
            }
            at = up[j as usize];
        }
    }
    out
}

/// The innermost kept call that encloses each kept call on its own
/// thread, by index in `run.calls`.
pub(crate) fn enclosing(run: &Run, keep: impl Fn(FuncId) -> bool) -> Vec<Option<u32>> {
    let mut stacks: FxMap<Role, Vec<(u64, u32)>> = FxMap::default();
    run.calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if !keep(c.func) {
                return None;
            }
            let stack = stacks.entry(c.role).or_default();
            while stack.last().is_some_and(|&(end, _)| end <= c.entry_ns) {
                stack.pop();
            }
            // A caller encloses the call; one that returns first does not
            // (a thread runs one call at a time, so that is a broken trace).
            let end = end_of(c, run);
            let outer = stack.last().filter(|&&(e, _)| e >= end).map(|&(_, j)| j);
            stack.push((end, i as u32));
            outer
        })
        .collect()
}

/// End of a call for interval tests: its exit, or the run's end.
pub(crate) fn end_of(call: &Call, run: &Run) -> u64 {
    call.exit_ns.unwrap_or(run.end_ns).max(call.entry_ns)
}

/// Bit i set when argument i may carry an object address: DWARF says it is
/// a pointer, or there is no type information (missing entries count as
/// unknown).
pub(crate) fn pointer_mask(f: &Function) -> u8 {
    let mut m = 0u8;
    for i in 0..3 {
        let may = f.params.get(i).is_none_or(|t| t.may_be_pointer());
        if may {
            m |= 1 << i;
        }
    }
    m
}

/// The pointer-like argument values of a call, deduplicated.
pub(crate) fn pointers(call: &Call, mask: u8) -> impl Iterator<Item = i64> + '_ {
    (0..3).filter_map(move |i| {
        let v = call.args[i];
        let dup = call.args[..i].iter().enumerate().any(|(j, &w)| w == v && mask & (1 << j) != 0);
        (mask & (1 << i) != 0 && looks_like_address(v) && !dup).then_some(v)
    })
}

/// Two calls share an object: some pointer-like argument value in common.
pub(crate) fn share_pointer(a: &Call, ma: u8, b: &Call, mb: u8) -> bool {
    pointers(a, ma).any(|p| pointers(b, mb).any(|q| q == p))
}
