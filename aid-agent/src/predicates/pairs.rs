//! Time relations between two calls on different threads, and their
//! aggregates:
//!
//! - `Order`: A ends before B starts;
//! - `StartsBefore`: A starts before B starts (B starting while A runs);
//! - `EndsFirst`: A ends while B runs (B started before A ended and ends
//!   after it);
//! - `Concurrent`: B starts while A runs, the two sharing no object;
//! - `Overlap`: A and B run at the same time on the same object (a data
//!   race, Fig. 2 row 1).
//!
//! Per call site (threads of single classes), each learned when a failing
//! run shows it and no passing run does. Candidates come from near each
//! call in time ([`super::ExtractConfig::order_window`]), which keeps the
//! search linear. Sites pairs of the same two functions and classes that
//! each hold in some failing runs are also joined into one "any of these
//! pairs" predicate (the heartbeat before HELLO in some runs, before AUTH
//! in others). The overlap relations are also learned between groups:
//! "some resize overlaps some lookup
//! on the same table", and for single classes too, where the call that
//! overlaps is another one in every run.

use super::{
    Anchor, Calls, Condition, ExtractConfig, Kind, ObjectName, Other, PredKey, SameField,
    base::{Funcs, Learned},
    calls::{call_set, shared_arg, site_of},
    index::{GroupKey, RunIndex, callees, end_of, pointers},
    objects,
};
use crate::model::identity::ClassId;
use crate::model::{Call, FuncId, Intervention, Point, Role, Run, Site};
use crate::util::{
    bitset::BitSet,
    fxhash::{FxMap, FxSet},
};

/// One member of an aggregate pair predicate: sites A and B, whether it
/// is anchored at A's entry, and whether some passing run ran B to
/// completion before A started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PairMember {
    pub a: Site,
    pub b: Site,
    pub at_entry: bool,
    #[serde(default)]
    pub reversed: bool,
    /// The relation is between the two calls' first critical sections on
    /// a lock both took or ran in (`sections::Firsts`), not
    /// between the calls.
    #[serde(default)]
    pub sections: bool,
}

/// What the passing runs that made both calls A and B showed of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Passing {
    /// Some passing run ran B to completion before A started (so B's start
    /// does not wait for anything A's body does).
    pub reversed: bool,
    /// Every passing run had B return before A returned.
    pub b_returns_first: bool,
}

impl Passing {
    /// Before any passing run was looked at.
    pub const NONE: Passing = Passing { reversed: false, b_returns_first: true };

    /// What one passing run's calls `a` and `b` add.
    pub fn see(&mut self, a: &Call, b: &Call) {
        if b.exit_ns.is_some_and(|x| x < a.entry_ns) {
            self.reversed = true;
        }
        if b.exit_ns.is_none_or(|x| a.exit_ns.is_some_and(|y| x >= y)) {
            self.b_returns_first = false;
        }
    }
}

/// What the passing runs showed.
#[derive(Default)]
pub(super) struct PairBase {
    /// Site pairs that overlapped on a shared object (a < b).
    overlaps: FxSet<(Site, Site)>,
    /// Group pairs that overlapped (a ≤ b), and whether on a shared object.
    groups: FxSet<GroupPair>,
}

/// Two groups whose calls overlapped on different threads (a ≤ b), and
/// what the two calls had in common.
type GroupPair = (GroupKey, GroupKey, Share);

/// What two overlapping calls had in common.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Share {
    /// Nothing known: they merely ran at the same time.
    Nothing,
    /// A pointer argument (the same object).
    Object,
    /// The same object, and field `k` of the function's pointee equal
    /// (two calls of one function asked about the same thing).
    Field(u8),
    /// As `Field(k)`, and both calls went on to call function `g` (both
    /// inserted the key they had both found missing).
    FieldCalls(u8, FuncId),
}
/// A pointer argument two calls share: (a's position, b's, the value).
type SharedArg = Option<(u8, u8, i64)>;
/// The two functions and classes of an aggregate pair predicate (A's, B's).
type GroupFuncs = (u32, ClassId, u32, ClassId);
/// For a shared object: the argument positions (a's, b's) and the object's
/// name where the failing runs agree.
type SharedAt = Option<(u8, u8, Option<ObjectName>)>;

/// Pairs seen in failing runs, before the passing runs vet them.
#[derive(Default)]
pub(super) struct Candidates {
    overlaps: FxSet<(Site, Site)>,
    /// (A, B): A ended just before B started.
    orders: FxSet<(Site, Site)>,
    /// (A, B): B started while A ran.
    during: FxSet<(Site, Site)>,
    /// (A, B): A ended while B ran, B ending later.
    ends: FxSet<(Site, Site)>,
    /// Group overlaps: shared object or not, and for shared ones the
    /// argument positions and the object's name where the failing runs
    /// agree (None when they do not).
    groups: FxMap<GroupPair, SharedAt>,
    /// For two single classes: the site pairs (up to 2) behind each group
    /// pair. One pair only means the per-call overlap says the same more
    /// precisely, and the group pair is dropped.
    single_sites: FxMap<GroupPair, FxSet<(Site, Site)>>,
}

/// Pairs that survived the passing runs.
pub(super) struct Vetted {
    overlaps: Vec<(Site, Site)>,
    orders: Vec<(Site, Site, Passing)>,
    starts: Vec<(Site, Site, Passing)>,
    ends: Vec<(Site, Site, Passing)>,
    concurrent: Vec<(Site, Site)>,
    groups: Vec<(GroupPair, SharedAt)>,
}

pub(super) fn baseline(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut PairBase) {
    baseline_within(idx, funcs, base, DENSE_GROUPS);
}

/// [`baseline`], with a table for runs of up to `dense_groups` groups.
fn baseline_within(idx: &RunIndex<'_>, funcs: &Funcs, base: &mut PairBase, dense_groups: usize) {
    base.overlaps.extend(site_overlaps(idx, funcs));
    // A passing run shows each pair of groups overlapping many times: the
    // first sighting of a (group, group, shared or not) in the run is
    // noted in a table of the run's groups by number, and only it reaches
    // the set. Runs with more groups than the table holds go straight to
    // the set.
    let n = idx.by_group.len();
    let table = n <= dense_groups;
    let mut dense = vec![u32::MAX; if table { idx.run.calls.len() } else { 0 }];
    if table {
        for (g, calls) in idx.by_group.values().enumerate() {
            for &i in calls {
                dense[i as usize] = g as u32;
            }
        }
    }
    let mut seen = BitSet::new(if table { n * n * 2 } else { 0 });
    group_overlaps(idx, funcs, &mut |k, _, _, (a, b)| {
        let plain = match k.2 {
            Share::Nothing => Some(0),
            Share::Object => Some(1),
            Share::Field(_) | Share::FieldCalls(..) => None,
        };
        let first = match (plain, dense.get(a as usize), dense.get(b as usize)) {
            (Some(s), Some(&ga), Some(&gb)) => seen.insert((ga as usize * n + gb as usize) * 2 + s),
            _ => true,
        };
        if first {
            base.groups.insert(k);
        }
    });
}

/// The most groups a run may have for [`baseline`]'s table of the pairs
/// it saw (n² × 2 bits: 256 KiB at this bound).
const DENSE_GROUPS: usize = 1024;

pub(super) fn candidates(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    base: &PairBase,
    config: &ExtractConfig,
    out: &mut Candidates,
) {
    for p in site_overlaps(idx, funcs) {
        if !base.overlaps.contains(&p) {
            out.overlaps.insert(p);
        }
    }
    near(idx, funcs, config.order_window, out);
    let mut names: Option<FxMap<i64, ObjectName>> = None;
    group_overlaps(idx, funcs, &mut |k, shared, sites, _| {
        // An overlap for the same key is kept even when passing runs show
        // it: two calls that both find the key already there are harmless,
        // so a check-then-act race on a key is a necessary condition of
        // the failure, not a separating one (docs/causal.md, "Necessary
        // candidates"); the statistics decide.
        if base.groups.contains(&k) && !matches!(k.2, Share::Field(_) | Share::FieldCalls(..)) {
            return;
        }
        let seen = shared.map(|(ai, bi, p)| {
            let names = names.get_or_insert_with(|| objects::names(idx, &funcs.masks));
            (ai, bi, names.get(&p).copied())
        });
        if funcs.classes.single(k.0.1).is_some() && funcs.classes.single(k.1.1).is_some() {
            let set = out.single_sites.entry(k).or_default();
            if set.len() < 2 {
                set.insert(sites);
            }
        }
        let have = out.groups.entry(k).or_insert(seen);
        if let (Some((a, b, o)), Some((a2, b2, o2))) = (have.as_mut(), seen)
            && ((*a, *b) != (a2, b2) || *o != o2)
        {
            *o = None;
        }
    });
}

/// Whether the role's calls get per-call keys in this run.
fn single(idx: &RunIndex<'_>, funcs: &Funcs, role: Role) -> bool {
    funcs.single(idx, role)
}

/// Pairs (a, b), a < b, of calls on different roles of single classes that
/// overlap in time while sharing a pointer-like argument.
fn site_overlaps(idx: &RunIndex<'_>, funcs: &Funcs) -> Vec<(Site, Site)> {
    let run = idx.run;
    let mut by_ptr: FxMap<i64, Vec<u32>> = FxMap::default();
    for (i, c) in run.calls.iter().enumerate() {
        if !funcs.keep(c.func) || c.instance == 0 || !single(idx, funcs, c.role) {
            continue;
        }
        for p in pointers(c, funcs.mask(c.func)) {
            by_ptr.entry(p).or_default().push(i as u32);
        }
    }
    let mut out = Vec::new();
    let mut active: Vec<u32> = Vec::new();
    for list in by_ptr.values_mut().filter(|l| l.len() > 1) {
        list.sort_by_key(|&i| run.calls[i as usize].entry_ns);
        active.clear();
        for &i in list.iter() {
            let c = &run.calls[i as usize];
            active.retain(|&j| end_of(&run.calls[j as usize], run) > c.entry_ns);
            for &j in &active {
                let d = &run.calls[j as usize];
                if d.role != c.role {
                    let (x, y) = (site_of(c), site_of(d));
                    out.push(if x < y { (x, y) } else { (y, x) });
                }
            }
            active.push(i);
        }
    }
    out
}

/// Every pair of groups whose calls overlap in time on different threads;
/// `f` gets the pair (a ≤ b), and for a shared object the argument
/// positions (a's, b's) and the pointer. Two calls for the same key also
/// give one pair per traced function both went on to call. Single classes
/// (one thread) have groups too: "some call of deposit overlaps
/// apply_interest on the same object" holds in every failing run of a
/// lost update whose lost deposit is another call each run, where each
/// per-call pair ("call 2 of deposit ...") holds in a few. For two single
/// classes the group pair is kept only when the failing runs show it at
/// two or more pairs of calls: with one, its per-call pair says the same
/// more precisely.
fn group_overlaps(
    idx: &RunIndex<'_>,
    funcs: &Funcs,
    f: &mut dyn FnMut(GroupPair, SharedArg, (Site, Site), (u32, u32)),
) {
    let run = idx.run;
    if idx.group.is_empty() {
        return;
    }
    let mut active: Vec<u32> = Vec::new();
    let mut inside: Option<Vec<Vec<FuncId>>> = None;
    for (i, c) in run.calls.iter().enumerate() {
        let Some(gc) = idx.group[i] else { continue };
        active.retain(|&j| end_of(&run.calls[j as usize], run) > c.entry_ns);
        for &j in &active {
            let d = &run.calls[j as usize];
            let Some(gd) = idx.group[j as usize] else { continue };
            if d.role == c.role {
                continue;
            }
            let shared = shared_arg(d, funcs.mask(d.func), c, funcs.mask(c.func));
            let share = if shared.is_some() { Share::Object } else { Share::Nothing };
            let (k, s, sites, at) = if gd <= gc {
                ((gd, gc, share), shared, (site_of(d), site_of(c)), (j, i as u32))
            } else {
                let s = shared.map(|(a, b, p)| (b, a, p));
                ((gc, gd, share), s, (site_of(c), site_of(d)), (i as u32, j))
            };
            f(k, s, sites, at);
            if shared.is_some() {
                // Sharing an object implies overlapping at all.
                f((k.0, k.1, Share::Nothing), None, sites, at);
                for field in same_fields(funcs, d, c, shared.map_or(0, |x| x.0)) {
                    f((k.0, k.1, Share::Field(field)), s, sites, at);
                    let inside = inside.get_or_insert_with(|| callees(run, |g| funcs.keep(g)));
                    let (ci, di) = (&inside[i], &inside[j as usize]);
                    for &g in ci.iter().filter(|g| di.contains(g)) {
                        f((k.0, k.1, Share::FieldCalls(field, g)), s, sites, at);
                    }
                }
            }
        }
        active.push(i as u32);
    }
}

/// The fields of its pointee two calls of one function agree on, where
/// the pointee is not the shared object itself (argument `object`).
fn same_fields<'a>(
    funcs: &'a Funcs,
    a: &'a Call,
    b: &'a Call,
    object: u8,
) -> impl Iterator<Item = u8> + 'a {
    let fields = funcs.pointee(a.func).filter(|p| p.arg != object).map(|p| p.fields.iter());
    fields.into_iter().flatten().enumerate().filter(|(_, f)| f.agrees(a, b)).map(|(k, _)| k as u8)
}

/// How much earlier one call's return must come than another's for
/// "ends before" to hold: a return is dated when its probe fires, and
/// the thread is back in its caller a few microseconds later (the probe's
/// own cost), so two returns closer than this are not ordered by their
/// dates. FFT of SPLASH-2 (outside the corpus): 9 failing runs had
/// main's `SlaveStart` return 6–28 µs before the worker's; one passing
/// run had it return first by under 1 µs (the worker counted itself done
/// while main's return probe ran) and, counted, kept the order from
/// being learned.
pub const EXIT_TIE_NS: u64 = 2_000;

/// When call `a` returned while `b` ran: `b` had started and ended
/// later ([`EXIT_TIE_NS`] later at least; a call that never returned ends
/// with the run), its return. Not when `b` started only after `a`
/// returned: that is `order`, whose hold acts elsewhere. Counted as one,
/// the two made rare.c's reader, ended before the writer's publish in 9
/// failing runs and inside it in 1, "ends before publish ends" in all
/// 10: a candidate whose hold of the reader's return (after its read)
/// could only fail, tested instead of observing the runs that decide
/// the order.
pub(super) fn ends_first(a: &Call, b: &Call, run: &Run) -> Option<u64> {
    a.exit_ns.filter(|&x| b.entry_ns < x && x.saturating_add(EXIT_TIE_NS) < end_of(b, run))
}

/// Calls of another role that end after one ended, looked at per call
/// for the `w` that ran through its end ([`near`]): the calls begun
/// after its end and ended before those (a loop of short calls inside
/// them) are passed over up to this many.
const ENDS_SCAN: usize = 64;

/// Order and start candidates of one failing run: for each call of a
/// single class, the `w` calls per other single role that ended last
/// before it started, the `w` that started first after it ended, the
/// `w` that started first while it ran, and the `w` that ran through its
/// end and ended first after it (a call that never returned ends with
/// the run).
fn near(idx: &RunIndex<'_>, funcs: &Funcs, w: usize, out: &mut Candidates) {
    let run = idx.run;
    if w == 0 {
        return;
    }
    let ok = |c: &Call| funcs.keep(c.func) && c.instance > 0 && single(idx, funcs, c.role);
    let mut roles: Vec<Role> = run.calls.iter().filter(|c| ok(c)).map(|c| c.role).collect();
    roles.sort_unstable();
    roles.dedup();
    let slot = |r: Role| roles.binary_search(&r).unwrap_or(0);
    let mut exits: Vec<Vec<(u64, u32)>> = vec![Vec::new(); roles.len()];
    let mut entries: Vec<Vec<(u64, u32)>> = vec![Vec::new(); roles.len()];
    for (i, c) in run.calls.iter().enumerate() {
        if !ok(c) {
            continue;
        }
        entries[slot(c.role)].push((c.entry_ns, i as u32));
        exits[slot(c.role)].push((end_of(c, run), i as u32));
    }
    for v in exits.iter_mut().chain(entries.iter_mut()) {
        v.sort_unstable();
    }
    for c in run.calls.iter().filter(|c| ok(c)) {
        let me = slot(c.role);
        let end = end_of(c, run);
        for other in 0..roles.len() {
            if other == me {
                continue;
            }
            let ex = &exits[other];
            let p = ex.partition_point(|e| e.0 < c.entry_ns);
            // A call that never returned ends with the run: never before
            // another call started.
            for e in &ex[p.saturating_sub(w)..p] {
                out.orders.insert((site_of(&run.calls[e.1 as usize]), site_of(c)));
            }
            if let Some(x) = c.exit_ns {
                let q = ex.partition_point(|e| e.0 <= x.saturating_add(EXIT_TIE_NS));
                let through = ex[q..(q + ENDS_SCAN).min(ex.len())]
                    .iter()
                    .map(|e| &run.calls[e.1 as usize])
                    .filter(|b| ends_first(c, b, run).is_some())
                    .take(w);
                for b in through {
                    out.ends.insert((site_of(c), site_of(b)));
                }
            }
            let en = &entries[other];
            if let Some(x) = c.exit_ns {
                let q = en.partition_point(|e| e.0 <= x);
                for e in &en[q..(q + w).min(en.len())] {
                    out.orders.insert((site_of(c), site_of(&run.calls[e.1 as usize])));
                }
            }
            let q = en.partition_point(|e| e.0 <= c.entry_ns);
            for e in en[q..(q + w).min(en.len())].iter().take_while(|e| e.0 < end) {
                out.during.insert((site_of(c), site_of(&run.calls[e.1 as usize])));
            }
        }
    }
}

/// Keeps the candidates no passing run shows, that co-occur in at least
/// one passing run.
pub(super) fn filter(passing: &[&Run], funcs: &Funcs, cands: Candidates) -> Vetted {
    // (pair, co-occurrences, what the passing runs with both showed)
    type Live = Vec<((Site, Site), u32, Passing)>;
    let live = |set: FxSet<(Site, Site)>| -> Live {
        let mut v: Live = set.into_iter().map(|p| (p, 0, Passing::NONE)).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    };
    // "A starts before B starts" holds for pairs that overlap and for pairs
    // that follow each other: both are candidates (a failing run may show
    // one and another failing run the other, which only the aggregate
    // over pairs catches).
    let mut starts = live(cands.during.iter().chain(&cands.orders).copied().collect());
    let mut orders = live(cands.orders);
    let mut concurrent = live(cands.during);
    let mut ends = live(cands.ends);
    for run in passing {
        if orders.is_empty() && starts.is_empty() && concurrent.is_empty() && ends.is_empty() {
            break;
        }
        let idx = funcs.index(run);
        let vet = |list: &mut Live, shows: &dyn Fn(&Call, &Call) -> bool| {
            list.retain_mut(|(pair, co, seen)| {
                let (Some(a), Some(b)) = (idx.call(pair.0), idx.call(pair.1)) else {
                    return true;
                };
                *co += 1;
                if shows(a, b) {
                    return false;
                }
                seen.see(a, b);
                true
            });
        };
        vet(&mut orders, &|a, b| a.exit_ns.is_some_and(|x| x < b.entry_ns));
        vet(&mut starts, &|a, b| a.entry_ns < b.entry_ns);
        vet(&mut concurrent, &|a, b| a.entry_ns < b.entry_ns && b.entry_ns < end_of(a, run));
        vet(&mut ends, &|a, b| ends_first(a, b, run).is_some());
    }
    let kept = |l: Live| -> Vec<(Site, Site, Passing)> {
        l.into_iter().filter(|e| e.1 > 0).map(|(p, _, seen)| (p.0, p.1, seen)).collect()
    };
    let overlaps: FxSet<(Site, Site)> = cands.overlaps;
    let mut overlaps: Vec<(Site, Site)> = overlaps.into_iter().collect();
    overlaps.sort_unstable();
    // A pair that shares an object is an overlap, not a mere concurrency.
    let concurrent = kept(concurrent)
        .into_iter()
        .map(|(a, b, _)| (a, b))
        .filter(|(a, b)| {
            let k = if a < b { (*a, *b) } else { (*b, *a) };
            overlaps.binary_search(&k).is_err()
        })
        .collect();
    let single_sites = cands.single_sites;
    let mut groups: Vec<_> = cands
        .groups
        .into_iter()
        .filter(|(k, _)| single_sites.get(k).is_none_or(|sites| sites.len() > 1))
        .collect();
    groups.sort_unstable_by_key(|g| g.0);
    Vetted {
        overlaps,
        orders: kept(orders),
        starts: kept(starts),
        ends: kept(ends),
        concurrent,
        groups,
    }
}

/// The hold that negates "A ends before B starts" (or "starts before"),
/// and where the predicate is placed.
///
/// When some passing run ran B to completion before A started, A's entry
/// waits for B's exit: that restores a passing order, and moves what A's
/// body does (holding A's return instead would come after A did it: a
/// read before the write it needed stays a read before the write). One
/// passing run where A merely started first is not the rule: a thread
/// preempted right after its entry (a loaded machine) starts "first" and
/// does its work later. "A starts before B starts" is then placed at A's
/// entry, where the hold acts. "A ends before B starts" keeps its place
/// at A's exit even so: at A's entry it would tie with the overlap that
/// begins at that same entry ("A starts while C runs on the same object"),
/// and a causal chain needs the two ordered (docs/predicates.md, "anchors
/// and intervention points").
/// When no passing run had B before A, B may start only after something
/// A's body does: holding A's entry could wait for B in vain. Then, for
/// "A ends before B starts", A's return waits: for B's return when every
/// passing run had B return before A did (B ran inside A; releasing A as
/// B merely starts would let what follows A on its thread run beside B's
/// body, which no passing run showed), else for B's start. For "A starts
/// before B starts", A's start waits for B's.
///
/// "A ends while B runs" is negated by A's return waiting for B's: what
/// A's thread does after A then comes after all of B, as in the passing
/// runs; what A's body did stays where it was (the predicate says
/// nothing of it). Placed at A's exit, where it is settled.
pub(super) fn hold(kind: Kind, a: Site, b: Site, seen: Passing) -> (Anchor, Intervention) {
    let at = |point, until_point| Intervention::HoldUntil { site: a, point, until: b, until_point };
    if kind == Kind::EndsFirst {
        return (Anchor::FirstExit, at(Point::Exit, Point::Exit));
    }
    match (kind, seen.reversed) {
        (Kind::Order, true) => (Anchor::FirstExit, at(Point::Entry, Point::Exit)),
        (Kind::Order, false) if seen.b_returns_first => {
            (Anchor::FirstExit, at(Point::Exit, Point::Exit))
        }
        (Kind::Order, false) => (Anchor::FirstExit, at(Point::Exit, Point::Entry)),
        (_, true) => (Anchor::Entry, at(Point::Entry, Point::Exit)),
        _ => (Anchor::Entry, at(Point::Entry, Point::Entry)),
    }
}

pub(super) fn predicates(funcs: &Funcs, v: &Vetted) -> Vec<Learned> {
    let mut out = Vec::new();
    for &(a, b) in &v.overlaps {
        out.push((
            PredKey::pair(Kind::Overlap, a, b),
            Condition::OverlapSamePointer,
            Anchor::LaterEntry,
            Some(Intervention::Serialize { a, b }),
        ));
    }
    for (kind, list, relation) in [
        (Kind::Order, &v.orders, Condition::EndsBefore),
        (Kind::StartsBefore, &v.starts, Condition::EntersBefore),
        (Kind::EndsFirst, &v.ends, Condition::ExitsBefore),
    ] {
        // Each member with the hold that negates it, for the aggregate's.
        let mut by_groups: FxMap<GroupFuncs, Vec<(PairMember, Intervention)>> = FxMap::default();
        for &(a, b, seen) in list {
            let (anchor, iv) = hold(kind, a, b, seen);
            out.push((PredKey::pair(kind, a, b), relation.clone(), anchor, Some(iv.clone())));
            if let (Some(ca), Some(cb)) = (class_of(funcs, a.role), class_of(funcs, b.role)) {
                let member = PairMember {
                    a,
                    b,
                    at_entry: anchor == Anchor::Entry,
                    reversed: seen.reversed,
                    sections: false,
                };
                by_groups.entry((a.func, ca, b.func, cb)).or_default().push((member, iv));
            }
        }
        for ((fa, ca, fb, cb), mut members) in by_groups {
            if members.len() < 2 {
                continue;
            }
            members.sort_unstable_by_key(|(p, _)| (p.a, p.b));
            let (pairs, each): (Vec<PairMember>, Vec<Intervention>) = members.into_iter().unzip();
            let key = PredKey {
                kind,
                func: fa,
                calls: Calls::Group { class: ca, within: None },
                other: Some(Other { func: fb, calls: Calls::Group { class: cb, within: None } }),
                arg: 0,
                callee: None,
            };
            let anchor =
                if pairs.iter().all(|p| p.at_entry) { Anchor::Entry } else { Anchor::FirstExit };
            out.push((
                key,
                Condition::AnyPair { relation: Box::new(relation.clone()), pairs },
                anchor,
                Some(Intervention::All { each }),
            ));
        }
    }
    for &(a, b) in &v.concurrent {
        out.push((
            PredKey::pair(Kind::Concurrent, a, b),
            Condition::Intersect,
            Anchor::LaterEntry,
            Some(Intervention::HoldUntil {
                site: b,
                point: Point::Entry,
                until: a,
                until_point: Point::Exit,
            }),
        ));
    }
    for ((ga, gb, share), seen) in &v.groups {
        let shared = *share != Share::Nothing;
        let kind = if shared { Kind::Overlap } else { Kind::Concurrent };
        let (field, callee) = match *share {
            Share::Field(k) => (Some(k), None),
            Share::FieldCalls(k, g) => (Some(k), Some(g)),
            _ => (None, None),
        };
        let same = field.and_then(|k| {
            let p = funcs.pointee(ga.0)?;
            let field = p.fields.get(usize::from(k))?.clone();
            Some(SameField { arg: p.arg, field })
        });
        if field.is_some() && same.is_none() {
            continue;
        }
        let key = PredKey {
            kind,
            func: ga.0,
            calls: Calls::Group { class: ga.1, within: ga.2 },
            other: Some(Other { func: gb.0, calls: Calls::Group { class: gb.1, within: gb.2 } }),
            // One overlap predicate per field the calls agree on (and per
            // function both then called).
            arg: field.map_or(0, |k| k + 1),
            callee,
        };
        let (object, args) = match seen {
            Some((ai, bi, o)) => (*o, Some((ai + 1, bi + 1))),
            None => (None, None),
        };
        // Serialising the two groups' calls on the object also keeps
        // apart the calls that asked about the same thing.
        let iv = Intervention::SerializeGroups {
            a: call_set(funcs, ga),
            b: call_set(funcs, gb),
            object: if shared { args } else { None },
        };
        out.push((
            key,
            Condition::GroupOverlap { shared, object, same },
            Anchor::LaterEntry,
            Some(iv),
        ));
    }
    out
}

/// The class of a role, when it is the role of a single class.
fn class_of(funcs: &Funcs, role: Role) -> Option<ClassId> {
    (0..funcs.classes.names.len() as ClassId).find(|&c| funcs.classes.single(c) == Some(role))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Session;

    /// The table of the group pairs a passing run showed only spares the
    /// set repeated sightings: the set is the one every sighting makes,
    /// for overlaps on a shared object and overlaps at all.
    #[test]
    fn a_passing_runs_table_of_group_pairs_keeps_every_pair_it_saw() {
        let mut s: Session = super::super::tests_groups::pool_session();
        for c in s.runs.iter_mut().flat_map(|r| r.calls.iter_mut()) {
            c.args = [0x7f00_0000_1000 + i64::from(c.func % 2) * 0x100, 0, 0];
        }
        let runs: Vec<&Run> = s.runs.iter().collect();
        let funcs = super::super::learn::functions(&s, &ExtractConfig::default(), &runs, &[]);
        let mut shares = FxSet::default();
        for run in &s.runs {
            let idx = funcs.index(run);
            let (mut table, mut direct) = (PairBase::default(), PairBase::default());
            baseline_within(&idx, &funcs, &mut table, DENSE_GROUPS);
            baseline_within(&idx, &funcs, &mut direct, 0);
            assert_eq!(table.groups, direct.groups);
            shares.extend(direct.groups.iter().map(|k| k.2));
        }
        assert_eq!(shares, [Share::Nothing, Share::Object].into_iter().collect());
    }
}
