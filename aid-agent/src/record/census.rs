//! The default set of functions, chosen by what tracing them would cost
//! (docs/probes.md, "Default mode"). A uprobe and its return probe cost
//! microseconds per call, so a helper called a million times per run
//! slows the program a thousandfold — and a slowed program may no longer
//! fail. Before the session starts, `debug` without `--trace` measures
//! the program: a few runs without any probe (its own wall time), and one
//! run with an entry-only probe on every candidate (how often each is
//! called, and what a probe costs here). It then traces the candidates
//! cheapest first while the estimated cost stays within 15 % of the
//! untraced wall time (at least 1 ms), and names the ones it left out.
//! (15 %, not the 30 % a 1.3× goal would allow: aid's own probes cost
//! about 7 % of a run, and a traced call in a real run costs more than the
//! counting run's estimate — BENCHMARKS.md, "Default mode".)

use std::{
    collections::{HashMap, HashSet},
    sync::atomic::AtomicBool,
    time::Duration,
};

use crate::{
    model::{FuncId, Function, Label, Point, Probe},
    record::{
        fail::{self, RunPolicy},
        tracer::Tracer,
    },
    sys::spawn::{self, Target},
};

/// Untraced runs measured; the fastest passing one is the reference (the
/// one least disturbed by whatever else the machine runs: a busy moment
/// must not buy a larger budget; [`reference_ns`]).
pub const UNTRACED_RUNS: usize = 5;
/// Untraced runs made when they are cheap, so that the failure rate
/// without aid is known and can be compared with the traced one (a
/// tracer changes the schedule, both ways): up to this many, while
/// they take at most [`UNTRACED_TIME_NS`] in all (one more is made only
/// while the slowest so far would still fit). 100: a failure in a
/// quarter of the untraced runs against 1 of the first 40 traced ones is
/// beyond chance then (Fisher's exact test, p = 1.3e-3); with 40 it
/// barely is (10 of 40 against 1 of 40: p = 6.9e-3), and a session of the
/// `probe_hidden` test fixture whose 40 untraced runs had 8 failing never
/// said that its probes hid the failure (8 of 40 against 1 of 40 would be
/// p = 0.029).
pub const UNTRACED_FOR_RATE: usize = 100;
/// What the untraced runs beyond [`UNTRACED_RUNS`] may take in all.
pub const UNTRACED_TIME_NS: u64 = 2_000_000_000;
/// Share of the untraced wall time the default set's calls may add.
pub const BUDGET_SHARE: f64 = 0.15;
/// The budget is never below this (fork and exec alone take about that).
pub const BUDGET_FLOOR_NS: u64 = 1_000_000;
/// A widened budget is never below this: a run of a few milliseconds is
/// mostly process start-up, whose measured time varies several-fold
/// (rust-spawn-closures: 1.2 to 4.3 ms untraced in `debug`'s measurement,
/// 1–2 ms from outside), so "its own time" is no stable yardstick there;
/// such a run may take up to this much longer.
pub const WIDENED_FLOOR_NS: u64 = 5_000_000;
/// Most functions in the default set: two probes each, within the probe
/// budget with room for aid's own probes.
pub const MAX_FUNCTIONS: usize = 200;
/// Cost of one traced call (entry and return probe, two events) assumed
/// when the counting run had too few calls to measure it
/// (docs/probes.md: 5.4–7.8 µs on this machine kind).
pub const DEFAULT_CALL_NS: f64 = 6_000.0;

/// Counting runs at most: each one that is cut short leaves out the
/// functions already too hot to trace, and the next runs without them.
pub const MAX_COUNTING_RUNS: usize = 4;

/// Sessions at most that trace the functions the default set left out
/// for cost, when it confirmed no cause ([`left_out_sessions`]).
pub const MAX_LEFT_OUT_SESSIONS: usize = 4;
/// A function left out for cost whose calls cost more than a left-out
/// session's room, but at most this many times it, is traced in a session
/// of its own, after those that fit: the budget is a rule of thumb for
/// keeping the schedule as it is, and that session measures its probes'
/// effect on the failure as every session does (`debug/observe.rs`).
/// Without it, a function a few percent over the room (the per-call cost
/// measured on a busy machine: 10.6 µs against 8.5 µs a run before) was
/// never traced and the search ended with nothing said.
pub const LONE_ROOM: f64 = 2.0;
/// Functions of the default set called at most this often per run are
/// traced again in those sessions: start routines and the program's
/// phases cost next to nothing, and name the threads and the moments.
pub const CARRY_CALLS: u64 = 16;

/// What the measuring runs found.
#[derive(Clone, Debug)]
pub struct Census {
    /// Wall time of the fastest untraced run.
    pub untraced_ns: u64,
    /// Untraced runs made, and how many of them failed.
    pub untraced_runs: u32,
    pub untraced_failed: u32,
    /// Wall time of the last counting run.
    pub counted_ns: u64,
    /// Counting runs made.
    pub counting_runs: usize,
    /// Calls of each candidate (by index in the candidate list) in the
    /// last counting run that probed it.
    pub calls: Vec<u64>,
    /// Candidates whose counting run was cut short while they were already
    /// too hot to trace: their counts are lower bounds, and they are hot.
    pub cut: Vec<bool>,
    /// Threads that called each candidate in that run.
    pub threads: Vec<u32>,
    /// Estimated cost of one traced call.
    pub call_ns: f64,
}

impl Census {
    /// What the default set may add to a run.
    pub fn budget_ns(&self) -> f64 {
        (self.untraced_ns as f64 * BUDGET_SHARE).max(BUDGET_FLOOR_NS as f64)
    }

    /// What it may add when no function that is called fits the budget
    /// ([`choose`]): the untraced run's own wall time (a run at most about
    /// twice as long), never less than the budget nor than
    /// [`WIDENED_FLOOR_NS`].
    pub fn widened_ns(&self) -> f64 {
        (self.untraced_ns as f64).max(self.budget_ns()).max(WIDENED_FLOOR_NS as f64)
    }
}

/// The default set and what was left out.
#[derive(Clone, Debug)]
pub struct Choice {
    /// Indices into the candidate list, in address order.
    pub traced: Vec<usize>,
    /// Left out for cost, most frequent first: index, calls per run (a
    /// lower bound where [`Census::cut`]), estimated cost per run.
    pub hot: Vec<(usize, u64, f64)>,
    /// Left out because the set was full.
    pub over_cap: Vec<usize>,
    /// Estimated cost of the chosen set per run.
    pub cost_ns: f64,
    /// Chosen within [`Census::widened_ns`], not the budget: no function
    /// that is called fitted the budget.
    pub widened: bool,
}

/// The reference wall time of untraced runs, (wall, passed) each: the
/// fastest passing run's. A failing run may have ended early (a crash, a
/// check that gave up, a program that could not start), and would make
/// every later estimate too small; only when none passed is the fastest
/// of all taken.
pub fn reference_ns(runs: &[(u64, bool)]) -> u64 {
    let passing = runs.iter().filter(|r| r.1).map(|r| r.0).min();
    passing.or_else(|| runs.iter().map(|r| r.0).min()).unwrap_or(0)
}

/// Measures `candidates` (the program's own functions): runs `target`
/// untraced [`UNTRACED_RUNS`] times (the fastest passing one is the
/// reference, [`reference_ns`]), then
/// with an entry-only probe on each
/// candidate. A hot helper can make that run very slow, so it is stopped
/// after 50× the untraced time (at least 5 s); the functions whose count
/// by then already exceeds the budget are hot, and the run is repeated
/// without them, up to [`MAX_COUNTING_RUNS`] times. The tracer's function
/// table is the last counting run's afterwards; the caller replaces it
/// with its choice.
pub fn measure(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    candidates: &[Function],
    cancel: &AtomicBool,
) -> anyhow::Result<Census> {
    let mut walls: Vec<(u64, bool)> = Vec::with_capacity(UNTRACED_FOR_RATE);
    let mut spent: u64 = 0;
    // Another run only while the slowest so far would still fit: the
    // fastest (the reference) let one slow run overrun the time.
    let slowest = |walls: &[(u64, bool)]| walls.iter().map(|w| w.0).max().unwrap_or(0);
    while walls.len() < UNTRACED_RUNS
        || (walls.len() < UNTRACED_FOR_RATE && spent + slowest(&walls) <= UNTRACED_TIME_NS)
    {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let mut child = spawn::spawn_held(target)?;
        child.release()?;
        let exit = child.wait(policy.timeout, policy.hang_after, cancel)?;
        let passed = fail::judge(&exit, &policy.rules).0 == Label::Pass;
        walls.push((exit.wall_ns, passed));
        if walls.len() > UNTRACED_RUNS {
            spent += exit.wall_ns;
        }
    }
    let untraced_ns = reference_ns(&walls);
    let short = counting_policy(untraced_ns, policy);
    let budget = (untraced_ns as f64 * BUDGET_SHARE).max(BUDGET_FLOOR_NS as f64);
    let mut census = Census {
        untraced_ns,
        untraced_runs: walls.len() as u32,
        untraced_failed: walls.iter().filter(|w| !w.1).count() as u32,
        counted_ns: 0,
        counting_runs: 0,
        calls: vec![0; candidates.len()],
        cut: vec![false; candidates.len()],
        threads: vec![0; candidates.len()],
        call_ns: DEFAULT_CALL_NS,
    };
    for _ in 0..MAX_COUNTING_RUNS {
        // Candidates still counted, by their index in `candidates`.
        let probed: Vec<usize> = (0..candidates.len()).filter(|&i| !census.cut[i]).collect();
        let counting: Vec<Function> = probed
            .iter()
            .map(|&i| Function { probe: Probe::Entry, ..candidates[i].clone() })
            .collect();
        tracer.set_user_functions(counting)?;
        let rec = tracer.observe(target, 0, &short, cancel)?;
        census.counting_runs += 1;
        let mut counts: HashMap<FuncId, (u64, HashSet<u32>)> = HashMap::new();
        for row in rec.rows.iter().filter(|r| r.point == Point::Entry) {
            let (n, tids) = counts.entry(row.func).or_default();
            *n += 1;
            tids.insert(row.tid);
        }
        for (k, &i) in probed.iter().enumerate() {
            let (n, tids) = counts.get(&(k as FuncId)).cloned().unwrap_or_default();
            census.calls[i] = n;
            census.threads[i] = tids.len() as u32;
        }
        census.counted_ns = rec.run.outcome.wall_ns;
        let complete = !rec.run.outcome.timed_out && rec.run.lost_events == 0;
        if complete {
            let total: u64 = probed.iter().map(|&i| census.calls[i]).sum();
            // An entry probe and its event per call; a traced call has two.
            if total >= 1_000 && census.counted_ns > untraced_ns {
                census.call_ns = (2.0 * (census.counted_ns - untraced_ns) as f64 / total as f64)
                    .clamp(1_000.0, 20_000.0);
            }
            break;
        }
        // Cut short: what is already too hot for the budget stays out.
        let mut newly: Vec<usize> = probed
            .iter()
            .copied()
            .filter(|&i| census.calls[i] as f64 * DEFAULT_CALL_NS > budget)
            .collect();
        if newly.is_empty() {
            // Nothing is over the budget yet: leave out the most called.
            newly.extend(probed.iter().copied().max_by_key(|&i| census.calls[i]));
        }
        for i in newly {
            census.cut[i] = true;
        }
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
    }
    Ok(census)
}

/// A measuring run's policy: stopped after 50× the untraced time (at
/// least 5 s, at most the run timeout), where a hot probe has shown enough.
fn counting_policy(untraced_ns: u64, policy: &RunPolicy) -> RunPolicy {
    let limit = Duration::from_nanos(untraced_ns.saturating_mul(50))
        .max(Duration::from_secs(5))
        .min(policy.timeout);
    RunPolicy { timeout: limit, ..policy.clone() }
}

/// What recording the C library's synchronisation points in every run
/// would cost, measured with one run.
#[derive(Clone, Copy, Debug)]
pub struct SyncCost {
    /// Synchronisation points the threads entered in the measuring run.
    pub entries: u64,
    /// Estimated cost per run: an entry-only probe and one event each.
    pub cost_ns: f64,
    /// Whether the measuring run ended on its own with every event.
    pub complete: bool,
}

impl SyncCost {
    /// Whether it fits in what the default set left of the budget.
    pub fn fits(&self, left_ns: f64) -> bool {
        self.complete && self.cost_ns <= left_ns
    }
}

/// Measures what the synchronisation points (already in the tracer's
/// function table) cost: one run with them recorded, the chosen functions
/// traced as they will be, stopped like a counting run. Each entry costs
/// about half a traced call (`call_ns`: entry and return probe). The
/// tracer keeps recording them in every run only if the caller says so.
pub fn measure_sync(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    census: &Census,
    cancel: &AtomicBool,
) -> anyhow::Result<SyncCost> {
    let short = counting_policy(census.untraced_ns, policy);
    let before = tracer.sync_in_every_run();
    tracer.set_sync_in_every_run(true);
    let rec = tracer.observe(target, 0, &short, cancel);
    tracer.set_sync_in_every_run(before);
    let rec = rec?;
    let entries: u64 = rec.sync_steps.iter().map(|&(_, n)| u64::from(n)).sum();
    Ok(SyncCost {
        entries,
        cost_ns: entries as f64 * census.call_ns / 2.0,
        complete: !rec.run.outcome.timed_out && rec.run.lost_events == 0,
    })
}

/// The default set: candidates cheapest first (fewest calls per run, then
/// address order) while the estimated cost stays within the budget and
/// the set within [`MAX_FUNCTIONS`]. Functions never called in the
/// counting run cost nothing and are always in (up to the cap); those cut
/// short are always out.
///
/// A short program whose every function is called a few hundred times
/// (a 4 ms run, 360 calls of its one function: ~2 ms of probes against a
/// 1 ms budget) would otherwise be traced with no probe that fires. So
/// when no function that is called fits the budget, the set is chosen
/// again within the untraced run's own wall time ([`Census::widened_ns`]):
/// a run about twice as long at most, where a helper called a million
/// times would make it a thousand times longer and still stays out.
pub fn choose(census: &Census, addresses: &[u64]) -> Choice {
    let choice = choose_within(census, addresses, census.budget_ns());
    if choice.cost_ns > 0.0 || choice.hot.is_empty() {
        return choice;
    }
    Choice { widened: true, ..choose_within(census, addresses, census.widened_ns()) }
}

fn choose_within(census: &Census, addresses: &[u64], budget: f64) -> Choice {
    let mut order: Vec<usize> = (0..census.calls.len()).collect();
    order
        .sort_by_key(|&i| (census.cut[i], census.calls[i], addresses.get(i).copied().unwrap_or(0)));
    let mut traced = Vec::new();
    let mut hot = Vec::new();
    let mut over_cap = Vec::new();
    let mut cost = 0.0;
    for i in order {
        let c = census.calls[i] as f64 * census.call_ns;
        if census.cut[i] || cost + c > budget {
            hot.push((i, census.calls[i], c));
        } else if traced.len() >= MAX_FUNCTIONS {
            over_cap.push(i);
        } else {
            cost += c;
            traced.push(i);
        }
    }
    traced.sort_by_key(|&i| addresses.get(i).copied().unwrap_or(0));
    hot.sort_by_key(|h| std::cmp::Reverse(h.1));
    Choice { traced, hot, over_cap, cost_ns: cost, widened: false }
}

/// Sessions that trace, a share at a time, the functions the default set
/// left out for cost but that fit the budget on their own.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeftOut {
    /// Of the default set, those traced again in each session (called at
    /// most [`CARRY_CALLS`] times), in address order.
    pub carried: Vec<usize>,
    /// What each session adds, in address order.
    pub sessions: Vec<Vec<usize>>,
    /// Would have had a session, but beyond [`MAX_LEFT_OUT_SESSIONS`].
    pub beyond: Vec<usize>,
}

/// When the default set confirmed no cause, the functions it left out are
/// traced in sessions of their own, each within the budget beside the
/// carried functions: those called on more than one thread first (where
/// threads race), then the least called, then in address order; each goes
/// into the first session with room for it. Then, each in a session of
/// its own, those that cost up to [`LONE_ROOM`] times the room. A function
/// hotter than that, or cut short, is in none.
pub fn left_out_sessions(census: &Census, addresses: &[u64], choice: &Choice) -> LeftOut {
    let cost = |i: usize| census.calls[i] as f64 * census.call_ns;
    let address = |i: usize| addresses.get(i).copied().unwrap_or(0);
    let carried: Vec<usize> =
        choice.traced.iter().copied().filter(|&i| census.calls[i] <= CARRY_CALLS).collect();
    let room = census.budget_ns() - carried.iter().map(|&i| cost(i)).sum::<f64>();
    let mut order: Vec<usize> = choice
        .hot
        .iter()
        .map(|h| h.0)
        .filter(|&i| !census.cut[i] && cost(i) <= LONE_ROOM * room)
        .collect();
    order.sort_by_key(|&i| (cost(i) > room, census.threads[i] < 2, census.calls[i], address(i)));
    let mut sessions: Vec<(Vec<usize>, f64)> = Vec::new();
    let mut beyond = Vec::new();
    for i in order {
        if cost(i) > room {
            // Alone: nothing joins it (`f64::INFINITY` used).
            if sessions.len() < MAX_LEFT_OUT_SESSIONS {
                sessions.push((vec![i], f64::INFINITY));
            } else {
                beyond.push(i);
            }
        } else if let Some((set, used)) =
            sessions.iter_mut().find(|(_, used)| used + cost(i) <= room)
        {
            set.push(i);
            *used += cost(i);
        } else if sessions.len() < MAX_LEFT_OUT_SESSIONS {
            sessions.push((vec![i], cost(i)));
        } else {
            beyond.push(i);
        }
    }
    let sessions = sessions
        .into_iter()
        .map(|(mut set, _)| {
            set.sort_by_key(|&i| address(i));
            set
        })
        .collect();
    LeftOut { carried, sessions, beyond }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn census(calls: Vec<u64>, untraced_ms: u64) -> Census {
        Census {
            untraced_ns: untraced_ms * 1_000_000,
            untraced_runs: 5,
            untraced_failed: 0,
            counted_ns: 0,
            counting_runs: 1,
            cut: vec![false; calls.len()],
            threads: vec![1; calls.len()],
            calls,
            call_ns: 5_000.0,
        }
    }

    #[test]
    fn the_reference_is_the_fastest_passing_untraced_run() {
        let ms = |n: u64| n * 1_000_000;
        // A failing run that ended early does not set the budget.
        let runs = [(ms(4), true), (ms(1), false), (ms(5), true), (ms(6), false)];
        assert_eq!(reference_ns(&runs), ms(4));
        // With no passing run, the fastest of all.
        assert_eq!(reference_ns(&[(ms(3), false), (ms(2), false)]), ms(2));
        assert_eq!(reference_ns(&[]), 0);
    }

    #[test]
    fn cheapest_first_within_the_budget() {
        // 14 ms untraced: 2.1 ms of budget, 420 calls at 5 µs.
        let c = census(vec![427_000, 2, 0, 6_000, 300, 500, 1], 14);
        let addresses: Vec<u64> = (0..7).map(|i| 0x1000 + 16 * i).collect();
        let choice = choose(&c, &addresses);
        assert_eq!(choice.traced, vec![1, 2, 4, 6], "300 + 2 + 1 calls fit, 500 more do not");
        let hot: Vec<(usize, u64)> = choice.hot.iter().map(|h| (h.0, h.1)).collect();
        assert_eq!(hot, vec![(0, 427_000), (3, 6_000), (5, 500)]);
        assert!(choice.cost_ns <= c.budget_ns());
        assert!(choice.over_cap.is_empty());
    }

    #[test]
    fn the_budget_has_a_floor_and_the_set_a_cap() {
        let c = census(vec![150; MAX_FUNCTIONS + 5], 0);
        assert_eq!(c.budget_ns(), BUDGET_FLOOR_NS as f64);
        let choice = choose(&c, &[]);
        // 1 ms at 5 µs a call: 200 calls, so one function of 150 calls.
        assert_eq!(choice.traced.len(), 1);
        let free = census(vec![0; MAX_FUNCTIONS + 5], 10);
        let choice = choose(&free, &[]);
        assert_eq!((choice.traced.len(), choice.over_cap.len()), (MAX_FUNCTIONS, 5));
    }

    /// A short run whose functions are all called a few hundred times:
    /// nothing called fits the 1 ms floor, so the set is chosen again
    /// within the untraced run's 3 ms; a million-call helper stays out.
    #[test]
    fn a_short_run_widens_to_its_own_time() {
        // 1,700 and 1,500 calls at 5 µs: 8.5 and 7.5 ms; one fits in 8 ms.
        let c = census(vec![1_700, 1_500, 0], 8);
        let choice = choose(&c, &[0x10, 0x20, 0x30]);
        assert!(choice.widened);
        assert_eq!(choice.traced, vec![1, 2], "the cheaper one and the uncalled one");
        assert_eq!(choice.hot.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0]);
        assert_eq!(choice.cost_ns, 1_500.0 * 5_000.0);
        // A run of 1 ms widens to 5 ms, not 1: 364 and 360 calls (1.8 ms
        // each) both fit.
        let c = census(vec![364, 360], 1);
        let choice = choose(&c, &[0x10, 0x20]);
        assert!(choice.widened);
        assert_eq!(choice.traced, vec![0, 1]);
        // 1,100 and 1,000 calls: only the second fits in 5 ms.
        let c = census(vec![1_100, 1_000], 3);
        assert_eq!(choose(&c, &[0x10, 0x20]).traced, vec![1]);
        // Within the budget nothing widens.
        let c = census(vec![150, 160], 4);
        let choice = choose(&c, &[0x10, 0x20]);
        assert_eq!((choice.traced.clone(), choice.widened), (vec![0], false));
        // A hot helper stays out, and nothing is chosen.
        let c = census(vec![1_000_000], 1);
        let choice = choose(&c, &[0x10]);
        assert!(choice.widened && choice.traced.is_empty() && choice.cost_ns == 0.0);
    }

    /// A function cut short is hot whatever its (partial) count says.
    #[test]
    fn functions_cut_short_are_always_left_out() {
        let mut c = census(vec![0, 10, 40_000], 14);
        c.cut[0] = true;
        c.cut[2] = true;
        let choice = choose(&c, &[0x10, 0x20, 0x30]);
        assert_eq!(choice.traced, vec![1]);
        let hot: Vec<usize> = choice.hot.iter().map(|h| h.0).collect();
        assert_eq!(hot, vec![2, 0]);
    }

    /// inventory-sixty's census once: the default set held the functions
    /// called a few times and `free_item`; the insert (`stock_add`, on
    /// both importers) and the others of ~150 calls were left out.
    #[test]
    fn the_left_out_functions_get_sessions_of_their_own() {
        // 13 ms untraced: 1.95 ms of budget; 6.7 µs a call.
        //               0  1    2   3    4    5    6      7    8
        let calls = vec![2, 152, 10, 151, 151, 156, 5_630, 250, 1];
        let mut c = census(calls, 13);
        c.call_ns = 6_700.0;
        c.threads = vec![2, 3, 1, 1, 2, 1, 2, 1, 1];
        c.cut[8] = true;
        let addresses: Vec<u64> = (0..9).map(|i| 0x1000 + 16 * i).collect();
        let choice = choose(&c, &addresses);
        assert_eq!(choice.traced, vec![0, 2, 3], "2 + 10 + 151 calls fit, 152 more do not");
        let left = left_out_sessions(&c, &addresses, &choice);
        // 151 calls is not carried; 1.95 - 0.08 ms of room: one function of
        // ~150 calls (1 ms) a session, those on two threads or more first;
        // 250 calls (1.7 ms) fits alone, 5,630 never, nor the one cut short.
        assert_eq!(left.carried, vec![0, 2]);
        assert_eq!(left.sessions, vec![vec![4], vec![1], vec![5], vec![7]]);
        assert!(left.beyond.is_empty());
        // Costlier calls (11.5 µs): 1.81 ms of room beside the carried;
        // ~150 calls (1.7-1.8 ms) still fit one a session; 250 calls (2.9
        // ms) no longer fits, but is within twice the room: a session of
        // its own, after them.
        c.call_ns = 11_500.0;
        let choice = choose(&c, &addresses);
        assert_eq!(choice.traced, vec![0, 2, 3]);
        let left = left_out_sessions(&c, &addresses, &choice);
        assert_eq!(left.sessions, vec![vec![4], vec![1], vec![5], vec![7]]);
        assert!(left.beyond.is_empty());
        // 400 calls (4.6 ms): hotter than twice the room, in none.
        c.calls[1] = 400;
        let left = left_out_sessions(&c, &addresses, &choice);
        assert_eq!(left.sessions, vec![vec![4], vec![5], vec![7]]);
        // Room for three a session, and a cap on the sessions: 10 ms
        // untraced, 1.5 ms of budget; 90 calls cost 0.45 ms.
        let mut calls = vec![0];
        calls.extend([90; 16]);
        calls.push(40);
        let c2 = census(calls, 10);
        let addresses: Vec<u64> = (0..18).map(|i| 0x1000 + 16 * i).collect();
        let choice = choose(&c2, &addresses);
        assert_eq!(choice.traced, vec![0, 1, 2, 17], "0, 40, 90 and 90 calls: 1.1 ms");
        let left = left_out_sessions(&c2, &addresses, &choice);
        assert_eq!(left.carried, vec![0], "40 calls is not carried");
        let three = |a: usize| vec![a, a + 1, a + 2];
        assert_eq!(left.sessions, vec![three(3), three(6), three(9), three(12)]);
        assert_eq!(left.beyond, vec![15, 16]);
    }
}
