//! Which confirmed link the report calls the root cause, when the chain
//! begins with the timing that a mechanism needs.
//!
//! The engine confirms a chain of counterfactual causes and its first link
//! is AID's root cause. A chain can begin with links that say only *when*
//! two threads ran ("call 1 of StringBuffer() on main ends before call 1 of
//! thread_main starts", "check_pair starts while set_pair runs") in front
//! of a confirmed link that says *what* those same threads did to each
//! other (an interleaving of critical sections, a race on one object, a
//! lock-order cycle, two statement windows at once: `Kind::is_mechanism`).
//! Each such timing link is a cause: forcing it to its passing value
//! stopped the failure in a round of its own. But its intervention stops
//! the failure by moving one thread's work away from the other's, which
//! the mechanism's own intervention does with less change, and the call
//! it names on one side is often only a landmark: the last traced call
//! before the window (stringbuffer-jdk1.4 of the corpus, whose bug is the
//! non-atomic `append`, was reported as "the constructor ends before
//! thread_main starts" in 1 of 6 sessions on 5f80310, and 1 of 15 on
//! dd7f2ff, when focused noise made that order separate the runs).
//!
//! So the leading timing links of such a chain are reported as the
//! *timing the root cause needs* (`Discovery::triggers`), confirmed as
//! they were, and the mechanism is named the root cause. Only when every
//! link before the first mechanism is a timing link between threads the
//! mechanism itself relates, and between calls of functions the mechanism
//! does not name (landmarks), or between a landmark and one of the
//! mechanism's own calls (race_window.c: "serve on late ends while
//! withdraw on early runs", in front of the race of the two withdrawals,
//! was its root cause on e18191c): a duration, a value or an error in front of
//! it stays the root cause, as does timing that involves another thread,
//! and timing of the mechanism's own calls — another statement of the
//! same interaction (counter-atomicity: "increment on second_worker starts
//! before store_counter on first_worker starts", in front of the race of
//! first_worker's increment with second_worker's load_counter), unless a
//! root of landmarks only leads the chain: then what follows it up to the
//! mechanism is timing that landmark led to (stringbuffer-jdk1.4 beside a
//! CPU hog on 23354a3: "the constructor ends before thread_main's append
//! starts", then "append(StringBuffer*) starts before append(char*)
//! starts" and "length() ends before erase starts", then the confirmed
//! interleaving, was reported with the constructor as root cause). A
//! lock-order cycle is the exception: it forms whichever of its two calls
//! started first, so timing of its own calls is timing it happens with
//! (lock_order.c, under focused noise that delayed one thread's
//! `move_money` entry: "refund starts before payroll's move_money starts"
//! and "refund's move_money starts before payroll's" confirmed in front
//! of the cycle, 1 session of 10). A link whose round held one thread
//! until a call of another had returned, in front of a link whose round
//! acted on a later call of that thread against the very same call, is
//! timing the later one needs, mechanism or not (`earlier_hold`: a
//! statement window of WorkStealQueue's `Pop` against a stealer's `Steal`
//! window, in front of `Push`'s against the same one).
//! Nothing is confirmed or pruned here: every link keeps the round that
//! confirmed it, so the rule cannot make a non-cause look confirmed.

use std::collections::BTreeSet;

use super::Analysis;
use crate::{
    model::{Call, CallSet, FuncId, Intervention, Point, Role, Run, Site},
    predicates::{Calls, ClassId, Kind, PredId, PredKey},
};

/// Kinds that say only when calls of two threads ran, relative to each
/// other.
fn timing(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Order | Kind::StartsBefore | Kind::EndsFirst | Kind::Concurrent | Kind::Overlap
    )
}

/// How many links at the front of `path` (a confirmed chain, root first)
/// are timing the first mechanism on it needs, or holds a later link of
/// the chain narrows (`earlier_hold`); 0 when the chain's first link
/// stays its root cause. `runs` are the runs the predicates were learned
/// from.
pub fn leading(analysis: &Analysis, runs: &[Run], path: &[PredId]) -> usize {
    let catalog = &analysis.catalog;
    let links: Option<Vec<Link>> =
        path.iter().map(|&p| catalog.get(p).map(|x| (x.key, x.intervention.clone()))).collect();
    let class_roles = |c| catalog.classes.roles(c).to_vec();
    let nested = |r, f, g| analysis.nesting.nested(r, f, g);
    let after =
        |early, point, later, at, against| reaches_after(runs, early, point, later, at, against);
    links.map_or(0, |links| {
        leading_links(
            &links,
            &Threads { class_roles: &class_roles, nested: &nested, after: &after },
        )
    })
}

/// A link of the chain: its predicate's key and the intervention its
/// round applied.
type Link = (PredKey, Option<Intervention>);

/// What the learning runs say of threads: the roles a class had, whether
/// two functions' calls nest on a thread
/// ([`super::implied::Nesting::nested`]), and whether one call of a
/// thread reaches a point only once another has reached one
/// ([`reaches_after`]).
struct Threads<'a> {
    class_roles: &'a dyn Fn(ClassId) -> Vec<Role>,
    nested: &'a dyn Fn(Role, FuncId, FuncId) -> bool,
    after: &'a dyn Fn(Site, Point, Site, Point, Site) -> bool,
}

/// [`leading`] on the chain's links.
fn leading_links(links: &[Link], threads_of: &Threads<'_>) -> usize {
    let class_roles = threads_of.class_roles;
    let keys: Vec<PredKey> = links.iter().map(|l| l.0).collect();
    let superseded = |i: usize| {
        links[i + 1..]
            .iter()
            .any(|(_, iv)| earlier_hold(links[i].1.as_ref(), iv.as_ref(), threads_of.after))
    };
    let Some(m) = (0..keys.len()).find(|&i| keys[i].kind.is_mechanism() && !superseded(i)) else {
        // No mechanism: the holds a later link narrows, if they lead.
        return (0..keys.len()).take_while(|&i| superseded(i)).count();
    };
    let threads = roles(&keys[m], class_roles);
    let acting = functions(&keys[m]);
    // A cycle has no order of its own calls to restate; nor has a chain
    // whose root is timing of landmarks only: what follows it up to the
    // mechanism is timing that landmark led to.
    let landmark = |k: &PredKey| functions(k).is_disjoint(&acting);
    let symmetric = keys[m].kind == Kind::LockCycle || keys[..m].first().is_some_and(landmark);
    let mechanism = sides(&keys[m]);
    let all_timing = keys[..m].iter().enumerate().all(|(i, k)| {
        let own = roles(k, class_roles);
        superseded(i)
            || timing(k.kind)
                && !own.is_empty()
                && own.is_subset(&threads)
                && (symmetric || landmark(k) || landmark_to(k, &mechanism, &acting, threads_of))
    });
    if all_timing { m } else { (0..m).take_while(|&i| superseded(i)).count() }
}

/// Whether `early`'s round held a thread that `later`'s round, further
/// down the chain, acted on at a later point against the very same call of
/// another thread: `early` held a call on thread T (at its entry or its
/// return) until a call C of another thread had returned, and `later`
/// held another call of T, at a point T reaches after that one, until C
/// had returned too, or ran that call and C one after the other (acting
/// at its entry). Holding T until C has returned also holds T's later
/// points, `later`'s among them, so `early`'s round stops the failure
/// whenever `later`'s does; `later`'s round left T alone up to its own
/// point, after `early`'s had come and gone inside C, and the failure
/// still stopped. So `early` says only that C was already running, and
/// `later` where T met it. "After" is what the runs show
/// ([`reaches_after`]), not the chain's order alone. A round of several
/// holds (a link of "some pair of calls of f and g": `Intervention::All`)
/// is narrowed when each of `later`'s holds has such a hold of `early`
/// in front of it. SCTBench's WorkStealQueue (chess): on 3b7d55e `Pop`'s
/// statement window against a stealer's `Steal` window, then `Push`'s
/// (calls 3 and 4) against the same one; on 8f39df9 "`ObjType::Operation`
/// on main ends while a stealer's `Steal` runs", then "call 7 of `readV`
/// (in `Push`) on main ends while that `Steal` runs", then a data race of
/// that `Steal` with call 8 of `readV` (in `Push`); on
/// InterlockedWorkStealQueue "some call of `writeV` on main ends while
/// `Steal` runs", then "call 3 or 4 of `Push` ends while it runs". Each
/// link was confirmed by its own round; the bug (`BUG3`) is `Push`'s
/// bound, which reads the head `Steal` moves, and the root cause was
/// the first link.
fn earlier_hold(
    early: Option<&Intervention>,
    later: Option<&Intervention>,
    after: &dyn Fn(Site, Point, Site, Point, Site) -> bool,
) -> bool {
    let (Some(early), Some(later)) = (early, later) else { return false };
    let holds: Vec<(Site, Point, Site)> = early
        .parts()
        .into_iter()
        .filter_map(|iv| match *iv {
            Intervention::HoldUntil { site, point, until, until_point: Point::Exit }
                if site.role != until.role =>
            {
                Some((site, point, until))
            }
            _ => None,
        })
        .collect();
    let acts = |iv: &Intervention| -> Option<Vec<(Site, Point, Site)>> {
        match *iv {
            Intervention::HoldUntil { site, point, until, until_point: Point::Exit } => {
                Some(vec![(site, point, until)])
            }
            Intervention::Serialize { a, b } => {
                Some(vec![(a, Point::Entry, b), (b, Point::Entry, a)])
            }
            // Every call of one side waits at its entry while one of the
            // other's runs: instance 0 for "every call".
            Intervention::SerializeGroups { ref a, ref b, .. } => {
                let every = |c: &CallSet| -> Vec<Site> {
                    c.roles.iter().map(|&role| Site { func: c.func, role, instance: 0 }).collect()
                };
                let mut ways = Vec::new();
                for (x, y) in [(a, b), (b, a)] {
                    for site in every(x) {
                        ways.extend(every(y).into_iter().map(|until| (site, Point::Entry, until)));
                    }
                }
                Some(ways)
            }
            _ => None,
        }
    };
    let parts = later.parts();
    !holds.is_empty()
        && !parts.is_empty()
        && parts.into_iter().all(|iv| {
            acts(iv).is_some_and(|ways| {
                ways.into_iter().any(|(site, point, until)| {
                    holds.iter().any(|&(held, at, shared)| {
                        until.covers(shared)
                            && held.role == site.role
                            && held != site
                            && (site.instance != 0 || held.func != site.func)
                            && after(held, at, site, point, until)
                    })
                })
            })
        })
}

/// Whether call `later` reaches `later_point` (its entry or its return)
/// only once call `early` of the same thread has reached `point`, in
/// every failing run of `runs` that has both, and at least one has. A
/// `later` of instance 0 stands for every call of its function on its
/// thread that ran while a call `against` names did (instance 0: any
/// call of its function on its role): each entered once `early` had
/// reached `point` (the calls a serialisation of the two functions acted
/// on, in the runs the predicates were learned from). False for an
/// `early` that is not one call.
pub fn reaches_after(
    runs: &[Run],
    early: Site,
    point: Point,
    later: Site,
    later_point: Point,
    against: Site,
) -> bool {
    let at = |c: &Call, p: Point| match p {
        Point::Entry => Some(c.entry_ns),
        Point::Exit => c.exit_ns,
    };
    if early.instance == 0 || early.role != later.role {
        return false;
    }
    let end = |c: &Call| c.exit_ns.unwrap_or(u64::MAX);
    let mut seen = false;
    for run in runs.iter().filter(|r| r.failed()) {
        let Some(e) = run.call(early) else { continue };
        let acted: Vec<&Call> = if later.instance == 0 {
            let others: Vec<&Call> = run.calls.iter().filter(|c| against.names(c)).collect();
            let met = |l: &Call| others.iter().any(|o| o.entry_ns < end(l) && l.entry_ns < end(o));
            run.calls.iter().filter(|c| later.names(c) && met(c)).collect()
        } else {
            run.call(later).into_iter().collect()
        };
        for l in acted {
            match (at(e, point), at(l, later_point)) {
                (Some(a), Some(b)) if b >= a => seen = true,
                _ => return false,
            }
        }
    }
    seen
}

/// Whether a timing link relates a landmark to one of the mechanism's
/// own calls: one side is exactly a side of the mechanism (its function
/// and calls), the other a call of a function the mechanism does not
/// name. race_window.c's "serve on late ends while withdraw on early
/// runs", in front of the race of early's and late's withdrawals, says
/// when late's landmark came against a call of the race: timing the
/// race needs. Timing between calls of the mechanism's functions at
/// another grain (counter-atomicity's "increment on second_worker starts
/// before store_counter on first_worker starts", in front of the race of
/// first_worker's increment with second_worker's load_counter) has
/// neither side a landmark nor a side of the mechanism, and stays the
/// root cause.
fn landmark_to(
    key: &PredKey,
    mechanism: &[(FuncId, Calls)],
    acting: &BTreeSet<FuncId>,
    threads_of: &Threads<'_>,
) -> bool {
    let [a, b] = sides(key)[..] else { return false };
    let anchored = |own: (FuncId, Calls), far: (FuncId, Calls)| {
        mechanism.contains(&own)
            && !acting.contains(&far.0)
            && !nested_with(far, mechanism, threads_of)
    };
    anchored(a, b) || anchored(b, a)
}

/// Whether the calls of `far` nest with a side of the mechanism on a
/// thread they share: inside the mechanism's call there, or around it. A
/// landmark is a call of its own on its thread.
fn nested_with(
    (g, calls): (FuncId, Calls),
    mechanism: &[(FuncId, Calls)],
    threads_of: &Threads<'_>,
) -> bool {
    let far = side_roles(calls, threads_of.class_roles);
    mechanism.iter().any(|&(f, on)| {
        let on = side_roles(on, threads_of.class_roles);
        far.iter().any(|&r| on.contains(&r) && (threads_of.nested)(r, f, g))
    })
}

/// A pairwise predicate's two sides: (function, calls).
fn sides(key: &PredKey) -> Vec<(FuncId, Calls)> {
    std::iter::once((key.func, key.calls)).chain(key.other.map(|o| (o.func, o.calls))).collect()
}

/// The functions a predicate's calls are calls of (both sides).
fn functions(key: &PredKey) -> BTreeSet<FuncId> {
    sides(key).into_iter().map(|(f, _)| f).collect()
}

/// The thread roles a predicate's calls run on (both sides of a pairwise
/// one); a class stands for the roles it had in the learning runs.
fn roles(key: &PredKey, class_roles: &dyn Fn(ClassId) -> Vec<Role>) -> BTreeSet<Role> {
    sides(key).into_iter().flat_map(|(_, calls)| side_roles(calls, class_roles)).collect()
}

/// The thread roles one side's calls run on.
fn side_roles(calls: Calls, class_roles: &dyn Fn(ClassId) -> Vec<Role>) -> Vec<Role> {
    match calls {
        Calls::Site { role, .. } => vec![role],
        Calls::Group { class, .. } => class_roles(class),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicates::Other;

    fn site(role: Role) -> Calls {
        Calls::Site { role, instance: 1 }
    }

    /// Timing kinds between calls of functions 1 and 2 (landmarks), the
    /// mechanism kinds between calls of functions 3 and 4.
    fn key(kind: Kind, a: Calls, b: Calls) -> PredKey {
        let (f, g) = if kind.is_mechanism() { (3, 4) } else { (1, 2) };
        PredKey {
            kind,
            func: f,
            calls: a,
            other: Some(Other { func: g, calls: b }),
            arg: 0,
            callee: None,
        }
    }

    /// Class 7 is the pool of roles 1 and 2.
    /// length() (5) is only ever called inside append(StringBuffer*) (3)
    /// on thread 0. A statement window's round holds as `statements.rs`
    /// has it; the other keys' interventions play no part here.
    fn leading_of(keys: &[PredKey]) -> usize {
        let links: Vec<Link> = keys
            .iter()
            .map(|k| {
                let iv = match (k.kind, k.site(), k.other_site()) {
                    (Kind::BetweenStatements, Some(a), Some(b)) => Some(Intervention::HoldUntil {
                        site: b,
                        point: Point::Entry,
                        until: a,
                        until_point: Point::Exit,
                    }),
                    _ => None,
                };
                (*k, iv)
            })
            .collect();
        links_of(&links)
    }

    /// Main's calls (role 0) entering and returning in the order
    /// WorkStealQueue.cpp makes them: Push (5) twice, Pop (4), Operation
    /// (6), then Push twice more, the third with readV (8) calls 7 and 8
    /// and writeV (9) call 6 in it, the fourth with writeV call 7.
    const MAIN: [(FuncId, u32, Point); 20] = [
        (5, 1, Point::Entry),
        (5, 1, Point::Exit),
        (5, 2, Point::Entry),
        (5, 2, Point::Exit),
        (4, 1, Point::Entry),
        (4, 1, Point::Exit),
        (6, 1, Point::Entry),
        (6, 1, Point::Exit),
        (5, 3, Point::Entry),
        (8, 7, Point::Entry),
        (8, 7, Point::Exit),
        (8, 8, Point::Entry),
        (8, 8, Point::Exit),
        (9, 6, Point::Entry),
        (9, 6, Point::Exit),
        (5, 3, Point::Exit),
        (5, 4, Point::Entry),
        (9, 7, Point::Entry),
        (9, 7, Point::Exit),
        (5, 4, Point::Exit),
    ];

    fn links_of(links: &[Link]) -> usize {
        let class_roles = |c| if c == 7 { vec![1, 2] } else { Vec::new() };
        let nested = |r, f, g| r == 0 && matches!((f, g), (3, 5) | (5, 3));
        let at = |s: Site, p| MAIN.iter().position(|&c| c == (s.func, s.instance, p));
        let after = |e: Site, p, l: Site, lp, _: Site| {
            e.role == 0
                && l.role == 0
                && matches!((at(e, p), at(l, lp)), (Some(x), Some(y)) if y > x)
        };
        leading_links(links, &Threads { class_roles: &class_roles, nested: &nested, after: &after })
    }

    #[test]
    fn an_order_of_the_threads_a_mechanism_relates_is_its_timing() {
        let c = [key(Kind::Order, site(0), site(1)), key(Kind::Interleaved, site(1), site(0))];
        assert_eq!(leading_of(&c), 1);
    }

    #[test]
    fn a_pool_on_one_side_of_the_mechanism_stands_for_its_threads() {
        let pool = Calls::Group { class: 7, within: None };
        let c = [key(Kind::Order, site(0), site(2)), key(Kind::Interleaved, pool, site(0))];
        assert_eq!(leading_of(&c), 1);
        let c = [key(Kind::Order, site(0), site(3)), key(Kind::Interleaved, pool, site(0))];
        assert_eq!(leading_of(&c), 0);
    }

    #[test]
    fn timing_of_the_mechanisms_own_calls_stays_the_root_cause() {
        let own = PredKey { func: 3, ..key(Kind::StartsBefore, site(1), site(0)) };
        let c = [own, key(Kind::DataRace, site(0), site(1))];
        assert_eq!(leading_of(&c), 0);
        let other = Other { func: 4, calls: site(0) };
        let own = PredKey { other: Some(other), ..key(Kind::Order, site(1), site(0)) };
        let c = [own, key(Kind::DataRace, site(0), site(1))];
        assert_eq!(leading_of(&c), 0);
    }

    /// lock_order.c's chain: the landmark refund (function 1) starts
    /// before payroll's move_money (3), refund's move_money before
    /// payroll's, then the cycle of the two move_money calls. In front of
    /// a race of the same calls the same timing stays the root cause.
    #[test]
    fn timing_of_a_lock_cycles_own_calls_is_its_timing() {
        let payroll = Other { func: 3, calls: site(0) };
        let landmark =
            PredKey { other: Some(payroll), ..key(Kind::StartsBefore, site(1), site(0)) };
        let own = PredKey { func: 3, ..landmark };
        let refund = Other { func: 3, calls: site(1) };
        let cycle =
            PredKey { func: 3, other: Some(refund), ..key(Kind::LockCycle, site(0), site(1)) };
        assert_eq!(leading_of(&[landmark, own, cycle]), 2);
        let race = PredKey { kind: Kind::DataRace, ..cycle };
        assert_eq!(leading_of(&[own, race]), 0);
    }

    /// stringbuffer-jdk1.4's chain beside a CPU hog (23354a3): the
    /// landmarks StringBuffer() on main (1) ends before append(char*) on
    /// thread_main (2) starts; then append(StringBuffer*) (3) starts
    /// before append(char*), length() (5) ends before erase (4) starts;
    /// then the interleaving of erase with append(StringBuffer*). Behind
    /// a root of landmarks only, the timing of the mechanism's own calls
    /// is timing too; without that root it stays the root cause.
    #[test]
    fn behind_a_root_of_landmarks_the_mechanisms_own_timing_is_timing_too() {
        let landmark = key(Kind::Order, site(0), site(1));
        let append = PredKey { func: 3, ..key(Kind::StartsBefore, site(0), site(1)) };
        let erase = Other { func: 4, calls: site(1) };
        let length = PredKey { func: 5, other: Some(erase), ..key(Kind::Order, site(0), site(1)) };
        let mechanism = key(Kind::Interleaved, site(0), site(1));
        assert_eq!(leading_of(&[landmark, append, length, mechanism]), 3);
        assert_eq!(leading_of(&[append, length, mechanism]), 0);
        let race = PredKey { kind: Kind::DataRace, ..mechanism };
        assert_eq!(leading_of(&[landmark, append, race]), 2);
        // Timing that involves another thread still keeps the root.
        let third = key(Kind::StartsBefore, site(0), site(2));
        assert_eq!(leading_of(&[landmark, third, mechanism]), 0);
    }

    /// race_window.c's chain: serve on late (function 1) ends while
    /// withdraw on early (3) runs, then the race of early's and late's
    /// withdrawals (3 and 3). One side is a call of the race, the other a
    /// landmark: timing the race needs. A side that is the mechanism's
    /// function on another thread, or a landmark against a call of the
    /// mechanism's functions that is not one of its sides, keeps the
    /// root.
    #[test]
    fn a_landmark_against_one_of_the_mechanisms_own_calls_is_its_timing() {
        let early = Other { func: 3, calls: site(0) };
        let race = PredKey { func: 3, other: Some(early), ..key(Kind::DataRace, site(1), site(0)) };
        let serve_ends = PredKey { other: Some(early), ..key(Kind::EndsFirst, site(1), site(0)) };
        assert_eq!(leading_of(&[serve_ends, race]), 1);
        let late = Other { func: 3, calls: site(1) };
        let against_late = PredKey { other: Some(late), ..key(Kind::Order, site(0), site(1)) };
        assert_eq!(leading_of(&[against_late, race]), 1);
        // Withdraw's second call on early is not a side of the race.
        let later = Other { func: 3, calls: Calls::Site { role: 0, instance: 2 } };
        let not_a_side = PredKey { other: Some(later), ..serve_ends };
        assert_eq!(leading_of(&[not_a_side, race]), 0);
        // counter-atomicity: increment (3) on second_worker (1) starts
        // before store_counter (5) on first_worker (0), in front of the
        // race of first_worker's increment with second_worker's
        // load_counter (4).
        let load = Other { func: 4, calls: site(1) };
        let counter =
            PredKey { func: 3, other: Some(load), ..key(Kind::DataRace, site(0), site(1)) };
        let store = Other { func: 5, calls: site(0) };
        let grain =
            PredKey { func: 3, other: Some(store), ..key(Kind::StartsBefore, site(1), site(0)) };
        assert_eq!(leading_of(&[grain, counter]), 0);
    }

    /// WorkStealQueue's chain: while a stealer's Steal (function 3 on
    /// role 1) is between statement point 218 and its next, main's Pop
    /// (function 4, its call 1) at point 248, then main's Push (function
    /// 5, its calls 3 and 4) at point 305. The last window is the root
    /// cause; the earlier ones say the stealer's window was already open.
    /// Another stealer's window, or pools, keep the root.
    #[test]
    fn earlier_windows_of_one_thread_against_the_same_window_are_its_timing() {
        let steal = |role| Calls::Site { role, instance: 1 };
        let window = |f, instance, rank| PredKey {
            kind: Kind::BetweenStatements,
            func: 3,
            calls: steal(1),
            other: Some(Other { func: f, calls: Calls::Site { role: 0, instance } }),
            arg: rank,
            callee: Some(218),
        };
        let (pop, push3, push4) = (window(4, 1, 10), window(5, 3, 20), window(5, 4, 20));
        assert_eq!(leading_of(&[pop, push3, push4]), 2);
        assert_eq!(leading_of(&[pop, push3]), 1);
        // The shared window on the held side, the thread on the other.
        let flip = |k: PredKey| PredKey {
            func: k.other.unwrap().func,
            calls: k.other.unwrap().calls,
            callee: Some(u32::from(k.arg)),
            other: Some(Other { func: 3, calls: steal(1) }),
            arg: 7,
            ..k
        };
        // The held side's windows are then the shared one's: the later
        // link's hold (the stealer until main's Push returns) moves both,
        // and the earlier stays the root.
        assert_eq!(leading_of(&[flip(pop), flip(push3)]), 0);
        // A pool on the shared side is serialised, not held.
        let pool_steal =
            |k: PredKey| PredKey { calls: Calls::Group { class: 7, within: None }, ..k };
        assert_eq!(leading_of(&[pool_steal(pop), pool_steal(push3)]), 0);
        // Another stealer's window is another window.
        let other_stealer = PredKey { calls: steal(2), ..push3 };
        assert_eq!(leading_of(&[pop, other_stealer]), 0);
        // Main's window against the same Steal window, and a pool's: not
        // one thread's.
        let pool = Calls::Group { class: 7, within: None };
        let pooled =
            |k: PredKey| PredKey { other: Some(Other { calls: pool, ..k.other.unwrap() }), ..k };
        assert_eq!(leading_of(&[pooled(pop), pooled(push3)]), 0);
        // The same window twice is not an earlier one.
        assert_eq!(leading_of(&[push3, push3]), 0);
        // Timing before a superseded window stays the root as before when
        // it involves a third thread.
        let third = key(Kind::StartsBefore, site(0), site(2));
        assert_eq!(leading_of(&[third, pop, push3]), 0);
        // A window the runs do not show after the other is not a later one.
        assert_eq!(leading_of(&[push3, pop]), 0);
    }

    /// WorkStealQueue's chain on 8f39df9: main's Operation (6) ends while
    /// the stealer's Steal (3, role 1) runs, then main's readV call 7 (8)
    /// ends while it runs (each held at its return until Steal returned),
    /// then that Steal races readV's call 8 (serialised). The race is the
    /// root cause, the two ends its timing; without the race, the last
    /// end. The runs decide what is later: a hold that does not come
    /// before the later call on its thread, a held side on the shared
    /// call's own thread, another Steal, the same call held twice, or a
    /// hold until the shared call only starts keep the root.
    #[test]
    fn a_hold_of_one_thread_in_front_of_a_later_call_against_the_same_call_is_its_timing() {
        let on_main = |func, instance| Site { func, role: 0, instance };
        let steal = Site { func: 3, role: 1, instance: 1 };
        let ends = |held: Site, until: Site| {
            let other = Other {
                func: until.func,
                calls: Calls::Site { role: until.role, instance: until.instance },
            };
            let key = PredKey {
                kind: Kind::EndsFirst,
                func: held.func,
                calls: Calls::Site { role: held.role, instance: held.instance },
                other: Some(other),
                arg: 0,
                callee: None,
            };
            let iv = Intervention::HoldUntil {
                site: held,
                point: Point::Exit,
                until,
                until_point: Point::Exit,
            };
            (key, Some(iv))
        };
        let race = |a: Site, b: Site| {
            let key = PredKey {
                kind: Kind::DataRace,
                func: a.func,
                calls: Calls::Site { role: a.role, instance: a.instance },
                other: Some(Other {
                    func: b.func,
                    calls: Calls::Site { role: b.role, instance: b.instance },
                }),
                arg: 0,
                callee: None,
            };
            (key, Some(Intervention::Serialize { a, b }))
        };
        let (operation, read7, read8) = (on_main(6, 1), on_main(8, 7), on_main(8, 8));
        let chain = [ends(operation, steal), ends(read7, steal), race(steal, read8)];
        assert_eq!(links_of(&chain), 2);
        assert_eq!(links_of(&chain[..2]), 1);
        assert_eq!(links_of(&[ends(operation, steal), race(read8, steal)]), 1);
        // Pop (4) comes before Operation on main: no later call.
        assert_eq!(links_of(&[ends(operation, steal), ends(on_main(4, 1), steal)]), 0);
        // Held on the stealer's own thread.
        let on_stealer = Site { func: 9, role: 1, instance: 1 };
        assert_eq!(links_of(&[ends(on_stealer, steal), race(steal, on_stealer)]), 0);
        // Against another Steal.
        let other = Site { instance: 2, ..steal };
        assert_eq!(links_of(&[ends(operation, steal), race(other, read8)]), 0);
        // The same call held twice.
        assert_eq!(links_of(&[ends(read7, steal), race(steal, read7)]), 0);
        // Held only until the Steal started.
        let (key, _) = ends(operation, steal);
        let until_start = Intervention::HoldUntil {
            site: operation,
            point: Point::Exit,
            until: steal,
            until_point: Point::Entry,
        };
        assert_eq!(links_of(&[(key, Some(until_start)), ends(read7, steal)]), 0);
        // InterlockedWorkStealQueue: some call of writeV (6 or 7) ends
        // while the Steal runs, then Push's call 3 or 4 does: each of the
        // later holds is at a return main reaches after one of the
        // earlier's. With Push's first call among them it is not.
        let all = |links: &[Link]| {
            let each = links.iter().filter_map(|l| l.1.clone()).collect();
            (links[0].0, Some(Intervention::All { each }))
        };
        let writes = all(&[ends(on_main(9, 6), steal), ends(on_main(9, 7), steal)]);
        let pushes = all(&[ends(on_main(5, 3), steal), ends(on_main(5, 4), steal)]);
        assert_eq!(links_of(&[writes.clone(), pushes]), 1);
        let first = all(&[ends(on_main(5, 3), steal), ends(on_main(5, 1), steal)]);
        assert_eq!(links_of(&[writes, first]), 0);
    }

    /// WorkStealQueue with two stealer calls: main's `Pop` (4) held at
    /// its entry until `Steal` (3) call 1 has returned, in front of a
    /// serialisation of every `Push` (5) on main with every `Steal`
    /// ("some call of Push is between two statements while some call of
    /// Steal is": `Push` 3 met `Steal` 1 in one failing run, `Push` 4
    /// met `Steal` 2 in the other). The calls the serialisation acted on
    /// entered after `Pop`'s entry in every failing run: the hold is its
    /// timing. Where a `Push` before the `Pop` met a `Steal`, or the hold
    /// is on a `Push` itself, it keeps the root.
    #[test]
    fn a_hold_in_front_of_a_serialisation_of_later_calls_against_its_call_is_its_timing() {
        use crate::model::{
            Label,
            testing::{call, run},
        };
        let us = 1_000;
        let wsq = |id, label, steals: [(u64, u64); 2]| {
            let mut calls = vec![
                call(5, 0, 1, 0, Some(10 * us), None),
                call(5, 0, 2, 10 * us, Some(20 * us), None),
                call(4, 0, 1, 20 * us, Some(30 * us), None),
                call(5, 0, 3, 30 * us, Some(40 * us), None),
                call(5, 0, 4, 40 * us, Some(50 * us), None),
            ];
            for (k, (from, to)) in steals.into_iter().enumerate() {
                calls.push(call(3, 1, k as u32 + 1, from * us, Some(to * us), None));
            }
            calls.sort_by_key(|c| c.entry_ns);
            run(id, label, calls, 100 * us)
        };
        let runs = vec![
            wsq(0, Label::Fail, [(32, 38), (60, 70)]),
            wsq(1, Label::Fail, [(25, 28), (42, 48)]),
            wsq(2, Label::Pass, [(1, 5), (60, 70)]),
        ];
        let (pop, steal) =
            (Site { func: 4, role: 0, instance: 1 }, Site { func: 3, role: 1, instance: 1 });
        let window =
            |a: Site, b: Site| PredKey { arg: 0, ..PredKey::pair(Kind::BetweenStatements, a, b) };
        let hold = |held: Site| {
            (
                window(held, steal),
                Some(Intervention::HoldUntil {
                    site: held,
                    point: Point::Entry,
                    until: steal,
                    until_point: Point::Exit,
                }),
            )
        };
        let every = |func| CallSet {
            func,
            roles: vec![if func == 3 { 1 } else { 0 }],
            instance: 0,
            within: None,
        };
        let serialise = (
            window(Site { instance: 3, ..pop }, steal),
            Some(Intervention::SerializeGroups { a: every(5), b: every(3), object: None }),
        );
        let leading = |runs: &[Run], links: &[Link]| {
            let after = |e, p, l, lp, against| reaches_after(runs, e, p, l, lp, against);
            let threads =
                Threads { class_roles: &|_| Vec::new(), nested: &|_, _, _| false, after: &after };
            leading_links(links, &threads)
        };
        assert_eq!(leading(&runs, &[hold(pop), serialise.clone()]), 1);
        // Push 2 met a Steal in a failing run: it entered before Pop.
        let mut early = runs.clone();
        early.push(wsq(3, Label::Fail, [(15, 18), (60, 70)]));
        assert_eq!(leading(&early, &[hold(pop), serialise.clone()]), 0);
        // The hold on a call the serialisation acts on too.
        assert_eq!(leading(&runs, &[hold(Site { func: 5, role: 0, instance: 3 }), serialise]), 0);
    }

    #[test]
    fn a_chain_that_begins_with_the_mechanism_keeps_it() {
        let c = [key(Kind::Interleaved, site(1), site(0)), key(Kind::Order, site(0), site(1))];
        assert_eq!(leading_of(&c), 0);
    }

    #[test]
    fn timing_that_involves_another_thread_stays_the_root_cause() {
        let c =
            [key(Kind::StartsBefore, site(0), site(2)), key(Kind::Interleaved, site(1), site(0))];
        assert_eq!(leading_of(&c), 0);
    }

    #[test]
    fn a_duration_in_front_of_the_mechanism_stays_the_root_cause() {
        let slow = PredKey {
            kind: Kind::TooSlow,
            func: 3,
            calls: site(0),
            other: None,
            arg: 0,
            callee: None,
        };
        let c =
            [slow, key(Kind::Concurrent, site(0), site(1)), key(Kind::DataRace, site(0), site(1))];
        assert_eq!(leading_of(&c), 0);
    }

    #[test]
    fn a_chain_without_a_mechanism_keeps_its_first_link() {
        let c = [key(Kind::Order, site(0), site(1)), key(Kind::Concurrent, site(0), site(1))];
        assert_eq!(leading_of(&c), 0);
    }

    #[test]
    fn every_timing_link_in_front_of_the_mechanism_is_its_timing() {
        let c = [
            key(Kind::StartsBefore, site(1), site(0)),
            key(Kind::Concurrent, site(0), site(1)),
            key(Kind::BetweenStatements, site(0), site(1)),
            key(Kind::Order, site(0), site(1)),
        ];
        assert_eq!(leading_of(&c), 2);
    }
}
