//! Failure amplification: when failures are rare, `debug` injects noise
//! where the order of threads is decided, so more runs fail — at the
//! entries of the C library's synchronisation points (locks, unlocks,
//! condition variables, semaphores, yields, sleeps; aid's own entry-only
//! probes, attached to amplified runs only) and of traced calls. Each run
//! draws its own noise, of one of three kinds, side by side:
//!
//! - **random delays**, as rr's chaos mode perturbs scheduling: a few
//!   points of the run, each chosen uniformly among those seen, hold their
//!   thread for a random time;
//! - **a PCT-style priority schedule** (Burckhardt et al., "A randomized
//!   scheduler with probabilistic guarantees of finding bugs", ASPLOS
//!   2010): d − 1 priority change points chosen uniformly among the steps
//!   of the run; at the i-th, the thread drops to priority i, below every
//!   other thread, which aid emulates by holding it until no other thread
//!   of the target can run (each blocked, sleeping, stopped or gone), the
//!   highest-priority one resuming first. Threads that run are not
//!   serialised (they share the CPUs); only the change points are enforced;
//! - **near-miss delays** (TSVD: Li et al., "Efficient scalable
//!   thread-safety-violation detection", SOSP 2019): the points are chosen
//!   among the near misses of passing runs (seen before amplification, or
//!   amplified but not held at near misses) — two threads entering a call
//!   on the same object (a lock taken, a traced call's pointer argument)
//!   so close together that one of the level's holds at the earlier would
//!   let the later go first — and each hold is longer than the gap it
//!   closes.
//!
//! In a program that leaves a thread unjoined, half the runs, whatever
//! their kind, also hold the thread calling the C library's `exit` (main
//! returning from `main`) until every other thread has ended or waits for
//! it ([`EXIT_HELD_SHARE`], [`OUTLIVE`]): threads `main` never joined
//! then get to finish what the exit would have cut short.
//!
//! Once statement points are attached (the ladder's second pass), each
//! run also holds **every thread at one statement point**, chosen
//! uniformly among them ([`NoiseAt::Every`]): a window between two
//! statements that any thread of a pool may close (four setters each
//! storing `a = 1; b = -1;`) stays open only while all of them stand
//! inside it, which holds at one thread's rank almost never give.
//!
//! A synchronisation point is named by its thread and rank — the k-th one
//! thread `role` enters, whichever function it is — because that is what
//! PCT's steps are; the kernel counts them per thread in amplified runs,
//! and the source learns how many each thread reaches from every run.
//!
//! Noise is never a cause: every hold is stored with the run
//! ([`Noise::held_ns`]) and taken out of the durations of the calls its
//! thread was in (a [`crate::model::Pause`]), and the functions it acts at
//! are aid's own (internal), never predicates. Delays go before a call's
//! first instruction, never before its return: a late return would move
//! the recorded end of a call whose effect has already happened.

use std::collections::{BTreeMap, BTreeSet};

use aid_common::{
    ANY_INSTANCE, Action, ActionKind, EVERY_ROLE, SYNC_SITE_FUNC, SiteKey, SitePoint,
};
use rand::{Rng as _, SeedableRng as _, seq::IndexedRandom as _};

use crate::{
    intervene::plan::{self, Plan},
    model::{
        FuncId, Function, Noise, NoiseAction, NoiseAt, OUTLIVE, Point, Probe, Role, Run, Site,
    },
};

/// How much noise to inject per run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// Noise points per run: delayed points, or PCT change points (d − 1).
    pub sites: usize,
    /// Longest delay or PCT hold, in microseconds.
    pub max_delay_us: u64,
    /// Starvation: delays drawn log-uniformly from [`STARVE_FROM_US`] to
    /// the longest (rr's chaos mode starves a thread for 1 ms to 2 s so),
    /// rather than uniformly from 50 µs.
    pub starve: bool,
}

/// The shortest hold of a starvation level.
pub const STARVE_FROM_US: u64 = 1_000;

/// The widest gap a near miss is kept at: the longest hold of the
/// ladder's millisecond levels (a starvation hold turns round any order,
/// near or not). A level draws among the near misses narrower than its
/// own longest hold.
pub const LONGEST_NEAR_MISS_NS: u64 = 16_000_000;

/// The levels amplification goes through while failures stay rare, each
/// for its own runs: more points and longer holds, then a thread or two
/// starved for up to a second (a window that needs one thread kept off
/// the CPU far beyond a few milliseconds: a worker waking from a timed
/// wait after its owner freed the queue). A run holds for at most
/// `sites × max_delay_us`: 256 ms at the fourth level, 2 s at the last.
pub const LADDER: [Level; 5] = [
    Level { sites: 2, max_delay_us: 2_000, starve: false },
    Level { sites: 4, max_delay_us: 4_000, starve: false },
    Level { sites: 8, max_delay_us: 8_000, starve: false },
    Level { sites: 16, max_delay_us: 16_000, starve: false },
    Level { sites: 2, max_delay_us: 1_000_000, starve: true },
];

impl Level {
    pub const START: Level = LADDER[0];

    /// The next, stronger level of [`LADDER`], if any.
    pub fn stronger(self) -> Option<Level> {
        let at = LADDER.iter().position(|l| *l == self)?;
        LADDER.get(at + 1).copied()
    }

    /// "2 per run, holds up to 2 ms", "2 threads starved per run, 1 ms to 1 s".
    pub fn describe(self, noun: &str) -> String {
        let longest = crate::util::human::duration(self.max_delay_us * 1000);
        if self.starve {
            format!(
                "{} points per {noun} starving their thread for {} to {longest}",
                self.sites,
                crate::util::human::duration(STARVE_FROM_US * 1000)
            )
        } else {
            format!("{} per {noun}, holds up to {longest}", self.sites)
        }
    }

    /// One hold of this level.
    fn delay_us(self, rng: &mut rand_chacha::ChaCha8Rng) -> u64 {
        if self.starve {
            let (lo, hi) = ((STARVE_FROM_US as f64).ln(), (self.max_delay_us as f64).ln());
            rng.random_range(lo..=hi).exp().round() as u64
        } else {
            rng.random_range(50..=self.max_delay_us)
        }
    }
}

/// Which kind of noise the runs get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Random delays only.
    Random,
    /// PCT-style change points only.
    Pct,
    /// Delays at near misses only (random delays while the runs seen
    /// showed none).
    NearMiss,
    /// In turn, run by run: random delays, PCT, near-miss delays (when
    /// the runs seen showed near misses), random delays...
    #[default]
    All,
}

impl Schedule {
    pub fn describe(self) -> &'static str {
        match self {
            Schedule::Random => "random delays",
            Schedule::Pct => "PCT-style priority change points",
            Schedule::NearMiss => "delays at near misses (random delays until runs show one)",
            Schedule::All => {
                "random delays, PCT-style priority change points and, once runs show near misses, delays at them, run by run"
            }
        }
    }
}

/// The kind of noise one run gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Random,
    Pct,
    NearMiss,
}

/// A near miss of a passing run: two threads entered calls on the same
/// object (the lock a lock call takes, a traced call's first
/// argument when it is an address) `gap_ns` apart, the earlier at `at`.
/// Holding `at` longer than the gap lets the later go first: the order
/// the runs nearly showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct NearMiss {
    gap_ns: u64,
    at: NoiseAt,
}

/// A first argument below this is a number, not an object's address
/// (the first page of the address space is never mapped).
const LOWEST_ADDRESS: i64 = 0x1_0000;

/// The near misses of the passing runs of `runs`, one per point (its
/// smallest gap), nearest first: for each object, each entry against the
/// latest entry of every other thread on it, when they are at most
/// `within_ns` apart. A passing run's order is one that passes; the one
/// it nearly took instead may fail. A failing run's is the failing order
/// already, and turning it round would hold the thread whose lateness
/// the failure may need.
fn near_misses(runs: &[Run], functions: &[Function], within_ns: u64) -> Vec<NearMiss> {
    let ops = crate::predicates::lock_ops(functions);
    let sync = |func: FuncId| functions.get(func as usize).is_some_and(|f| f.probe.is_sync_point());
    let mut best: BTreeMap<NoiseAt, u64> = BTreeMap::new();
    for run in runs.iter().filter(|r| !r.failed()) {
        // (entry, object, thread, point), in the order of the entries.
        let mut entries: Vec<(u64, i64, Role, NoiseAt)> = Vec::new();
        let mut steps: BTreeMap<Role, u32> = BTreeMap::new();
        let mut calls: Vec<&crate::model::Call> = run.calls.iter().collect();
        calls.sort_by_key(|c| c.entry_ns);
        for c in calls {
            let object = c.args[0];
            if sync(c.func) {
                let step = steps.entry(c.role).or_insert(0);
                *step += 1;
                let takes = ops.get(c.func as usize) == Some(&crate::predicates::LockOp::Acquire);
                if takes && object != 0 {
                    entries.push((
                        c.entry_ns,
                        object,
                        c.role,
                        NoiseAt::Sync { role: c.role, step: *step },
                    ));
                }
            } else if object >= LOWEST_ADDRESS {
                let site = Site { func: c.func, role: c.role, instance: c.instance };
                entries.push((c.entry_ns, object, c.role, NoiseAt::Call { site }));
            }
        }
        let mut latest: BTreeMap<i64, BTreeMap<Role, (u64, NoiseAt)>> = BTreeMap::new();
        for (t, object, role, at) in entries {
            let on = latest.entry(object).or_default();
            for (_, &(before, earlier)) in on.iter().filter(|(r, _)| **r != role) {
                let gap = t - before;
                if gap <= within_ns {
                    let g = best.entry(earlier).or_insert(gap);
                    *g = (*g).min(gap);
                }
            }
            on.insert(role, (t, at));
        }
    }
    let mut out: Vec<NearMiss> =
        best.into_iter().map(|(at, gap_ns)| NearMiss { gap_ns, at }).collect();
    out.sort();
    out
}

/// Sync points per thread assumed before any amplified run has counted
/// them.
const GUESSED_STEPS: u32 = 8;

/// Holds per run of noise for every thread at one point
/// ([`NoiseAt::Every`]): a point inside a loop is reached thousands of
/// times, and each hold stops a thread.
pub const EVERY_HOLDS: u32 = 8;

/// The longest hold of noise for every thread at one point, whatever the
/// level: its holds add up over the threads that reach it.
pub const EVERY_MAX_US: u64 = 16_000;

/// The share of runs whose thread calling `exit` (the main thread
/// returning from `main`) is held there until every other thread of the
/// target has ended or waits for it ([`OUTLIVE`]), in a program whose
/// runs showed a thread never joined (`leaves_threads`). Threads that
/// `main` never joined are killed at the exit, so a check that fails only
/// when it runs after the threads it checks and before the process ends
/// is never reached while `main` is quick; holding `exit` in only some runs keeps
/// the runs in which the exit comes while threads still work, which a
/// failure (a worker touching what `exit` tears down) may need instead.
pub const EXIT_HELD_SHARE: f64 = 0.5;

/// Whether `run` created more threads than were joined: one may still
/// run when `main` returns, and holding `exit` can keep it alive. Threads
/// are counted at aid's own `pthread_create` probe (every run has it),
/// joins at the `pthread_join` sync point, in a run whose sync points
/// reach its `exit` (recorded in every amplified run, and in the runs
/// seen when the budget had room; the first 4,096 of a thread, so the
/// joins before the exit are all there). In a program that joins every
/// thread it starts, a held exit is let go at once and only costs the run
/// a stop, so it is not drawn there.
fn leaves_threads(run: &Run, functions: &[Function]) -> bool {
    let count = |name: &str, sync: bool| {
        let named = |f: &Function| libc(f, name, sync);
        run.calls.iter().filter(|c| functions.get(c.func as usize).is_some_and(named)).count()
    };
    count("exit", true) > 0 && count("pthread_create", false) > count("pthread_join", true)
}

/// Whether `f` is aid's own probe on the C library's `name` (its version
/// suffix left aside), a sync point (`sync`) or a probed call.
fn libc(f: &Function, name: &str, sync: bool) -> bool {
    f.internal && (f.probe == Probe::Sync) == sync && f.name.split('@').next() == Some(name)
}

/// The longest one stop at a point holds its thread, in microseconds.
pub fn hold_us(a: NoiseAction) -> u64 {
    match a {
        NoiseAction::Delay { us } => us,
        NoiseAction::Demote { max_us, .. } => max_us,
        NoiseAction::Skip => 0,
    }
}

/// The longest `n` holds its thread(s) in a run, in microseconds.
fn longest_hold_us(n: &Noise) -> u64 {
    let each = hold_us(n.action);
    match n.at {
        NoiseAt::Every { .. } => each * u64::from(EVERY_HOLDS),
        _ => each,
    }
}

/// The noise drawn for every run at one level: the call sites of the runs
/// seen before amplification began, and the synchronisation points each
/// thread reached in those runs (when they recorded them) and in
/// amplified runs.
pub struct NoiseSource {
    pub level: Level,
    pub schedule: Schedule,
    /// A plan that provoked the failure, replayed instead of random noise
    /// ([`NoiseSource::focus`]).
    focus: Option<Focused>,
    calls: Vec<Site>,
    /// Points where every thread is held, one per run (the statement
    /// points, once attached).
    every: Vec<FuncId>,
    /// The C library's `exit`, when the runs have its sync point: held in
    /// a share of the runs until every other thread is done
    /// ([`EXIT_HELD_SHARE`]), once a run showed a thread never joined.
    exit: Option<FuncId>,
    /// Some run seen created more threads than were joined
    /// ([`leaves_threads`]).
    unjoined: bool,
    roles: BTreeSet<Role>,
    /// The near misses of the runs seen, nearest first.
    near: Vec<NearMiss>,
    /// Most sync points each role entered in one amplified run.
    steps: BTreeMap<Role, u32>,
    drawn: u64,
    rng: rand_chacha::ChaCha8Rng,
}

impl NoiseSource {
    /// `functions`: the session's table, which says which of the calls the
    /// runs recorded are synchronisation points (counted per thread, not
    /// call sites: the kernel looks noise at them up by rank).
    pub fn new(
        level: Level,
        schedule: Schedule,
        seen: &[Run],
        functions: &[Function],
        seed: u64,
    ) -> NoiseSource {
        let sync =
            |func: FuncId| functions.get(func as usize).is_some_and(|f| f.probe.is_sync_point());
        let mut calls: Vec<Site> = seen
            .iter()
            .flat_map(|r| {
                r.calls.iter().filter(|c| !sync(c.func)).map(|c| Site {
                    func: c.func,
                    role: c.role,
                    instance: c.instance,
                })
            })
            .collect();
        calls.sort();
        calls.dedup();
        let roles = seen.iter().flat_map(|r| r.threads.iter().map(|t| t.role)).collect();
        let mut source = NoiseSource {
            level,
            schedule,
            focus: None,
            calls,
            every: Vec::new(),
            exit: functions.iter().find(|f| libc(f, "exit", true)).map(|f| f.id),
            unjoined: seen.iter().any(|r| leaves_threads(r, functions)),
            roles,
            near: near_misses(seen, functions, LONGEST_NEAR_MISS_NS),
            steps: BTreeMap::new(),
            drawn: 0,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        };
        for r in seen {
            let mut steps: BTreeMap<Role, u32> = BTreeMap::new();
            for c in r.calls.iter().filter(|c| sync(c.func)) {
                *steps.entry(c.role).or_insert(0) += 1;
            }
            source.learn(&steps.into_iter().collect::<Vec<_>>());
        }
        source
    }

    /// From now on each run also holds every thread at one of `points`
    /// ([`NoiseAt::Every`]).
    pub fn hold_every_at(&mut self, points: Vec<FuncId>) {
        self.every = points;
    }

    /// Takes a new level, keeping what was learnt.
    pub fn raise(&mut self, level: Level) {
        self.level = level;
    }

    /// Learns from an amplified run how many sync points each thread
    /// entered (`steps`: role and count).
    pub fn learn(&mut self, steps: &[(Role, u32)]) {
        for &(role, n) in steps {
            self.roles.insert(role);
            let max = self.steps.entry(role).or_insert(0);
            *max = (*max).max(n);
        }
    }

    /// Learns from a finished run: how many sync points each thread
    /// entered (`steps`, counted by the kernel) and its near misses.
    pub fn learn_from(&mut self, run: &Run, steps: &[(Role, u32)], functions: &[Function]) {
        self.learn(steps);
        self.learn_near_misses(run, functions);
        self.unjoined |= leaves_threads(run, functions);
    }

    /// Learns the near misses of a finished run (the runs seen before
    /// amplification record sync points only when the tracing budget has
    /// room for them; amplified runs always do), each kept at its
    /// smallest gap. Not from a run held at near misses: its holds are
    /// aimed at those very pairs, and the thread that overtook one would
    /// be taken for the earlier half of a near miss of the hold's making.
    pub fn learn_near_misses(&mut self, run: &Run, functions: &[Function]) {
        if run.noise.iter().any(|n| n.near_miss) {
            return;
        }
        let found = near_misses(std::slice::from_ref(run), functions, LONGEST_NEAR_MISS_NS);
        if found.is_empty() {
            return;
        }
        let mut all: BTreeMap<NoiseAt, u64> = self.near.iter().map(|n| (n.at, n.gap_ns)).collect();
        for n in found {
            let gap = all.entry(n.at).or_insert(n.gap_ns);
            *gap = (*gap).min(n.gap_ns);
        }
        self.near = all.into_iter().map(|(at, gap_ns)| NearMiss { gap_ns, at }).collect();
        self.near.sort();
    }

    /// From now on every run gets `plan` — the same points, the same
    /// holds — in a share `on` of the runs, and the same points left off
    /// ([`NoiseAction::Skip`]) in the others, instead of random noise.
    pub fn focus(&mut self, plan: &[Noise], on: f64) {
        let plan = plan.iter().map(|n| Noise { held_ns: 0, ..n.clone() }).collect();
        self.focus = Some(Focused { plan, on: on.clamp(0.0, 1.0) });
    }

    /// The focused plan, if any.
    pub fn focused(&self) -> Option<&Focused> {
        self.focus.as_ref()
    }

    /// The noise for the next run.
    pub fn draw(&mut self) -> Vec<Noise> {
        if let Some(f) = &self.focus {
            let on = self.rng.random_bool(f.on);
            return f
                .plan
                .iter()
                .map(|n| Noise {
                    action: if on { n.action } else { NoiseAction::Skip },
                    ..n.clone()
                })
                .collect();
        }
        let max = self.level.max_delay_us;
        // Near misses a hold of this level can turn round.
        let near: Vec<NearMiss> =
            self.near.iter().filter(|n| n.gap_ns < max * 1000).copied().collect();
        let kind = match self.schedule {
            Schedule::Random => Kind::Random,
            Schedule::Pct => Kind::Pct,
            Schedule::NearMiss if near.is_empty() => Kind::Random,
            Schedule::NearMiss => Kind::NearMiss,
            Schedule::All if near.is_empty() => {
                [Kind::Random, Kind::Pct][(self.drawn % 2) as usize]
            }
            Schedule::All => [Kind::Random, Kind::Pct, Kind::NearMiss][(self.drawn % 3) as usize],
        };
        self.drawn += 1;
        let mut noise: Vec<Noise> = if kind == Kind::NearMiss {
            let chosen: Vec<NearMiss> =
                near.choose_multiple(&mut self.rng, self.level.sites).copied().collect();
            chosen
                .into_iter()
                .map(|n| {
                    // Longer than the gap, or the later thread still comes second.
                    let least = (n.gap_ns / 1000 + 50).min(max);
                    let us = self.level.delay_us(&mut self.rng).max(least);
                    Noise {
                        at: n.at,
                        action: NoiseAction::Delay { us },
                        held_ns: 0,
                        func: None,
                        near_miss: true,
                    }
                })
                .collect()
        } else {
            let points = self.points();
            let chosen: Vec<NoiseAt> =
                points.choose_multiple(&mut self.rng, self.level.sites).copied().collect();
            chosen
                .into_iter()
                .enumerate()
                .map(|(i, at)| {
                    let action = if kind == Kind::Pct {
                        NoiseAction::Demote { priority: i as u32 + 1, max_us: max }
                    } else {
                        NoiseAction::Delay { us: self.level.delay_us(&mut self.rng) }
                    };
                    Noise { at, action, held_ns: 0, func: None, near_miss: false }
                })
                .collect()
        };
        if let Some(&func) = self.every.choose(&mut self.rng) {
            let us = self.rng.random_range(50..=max.clamp(50, EVERY_MAX_US));
            noise.push(Noise {
                at: NoiseAt::Every { func },
                action: NoiseAction::Delay { us },
                held_ns: 0,
                func: None,
                near_miss: false,
            });
        }
        if let Some(func) = self.exit.filter(|_| self.unjoined)
            && self.rng.random_bool(EXIT_HELD_SHARE)
        {
            // Long enough to outlast every other hold of the run.
            let others: u64 = noise.iter().map(longest_hold_us).sum();
            noise.push(Noise {
                at: NoiseAt::Every { func },
                action: NoiseAction::Demote { priority: OUTLIVE, max_us: others + max },
                held_ns: 0,
                func: None,
                near_miss: false,
            });
        }
        noise
    }

    /// Every point noise may act at: the traced calls seen, and each
    /// thread's sync points (as many as it reached, or a guess before any
    /// amplified run has counted them).
    fn points(&self) -> Vec<NoiseAt> {
        let mut out: Vec<NoiseAt> = self.calls.iter().map(|&site| NoiseAt::Call { site }).collect();
        for &role in &self.roles {
            let n = if self.steps.is_empty() {
                GUESSED_STEPS
            } else {
                self.steps.get(&role).copied().unwrap_or(0)
            };
            out.extend((1..=n).map(|step| NoiseAt::Sync { role, step }));
        }
        out
    }
}

/// A fixed noise plan and the share of runs it is applied to.
#[derive(Clone, Debug, PartialEq)]
pub struct Focused {
    pub plan: Vec<Noise>,
    pub on: f64,
}

/// Where the kernel looks noise up.
pub fn site_key(at: NoiseAt) -> SiteKey {
    match at {
        NoiseAt::Call { site } => plan::site_key(site, Point::Entry),
        NoiseAt::Sync { role, step } => {
            SiteKey { func: SYNC_SITE_FUNC, role, instance: step, point: SitePoint::ENTRY }
        }
        NoiseAt::Every { func } => {
            SiteKey { func, role: EVERY_ROLE, instance: ANY_INSTANCE, point: SitePoint::ENTRY }
        }
    }
}

impl Plan {
    /// Adds the noise of a run (failure amplification, `noise.rs`): a
    /// delay or a PCT change point at a traced call's entry or at a
    /// thread's k-th synchronisation point, whose probes the run then
    /// needs. Noise is dropped where an intervention already acts.
    pub fn with_noise(mut self, noise: &[Noise]) -> Plan {
        self.sync_points = true;
        for n in noise {
            let key = site_key(n.at);
            if self.actions.iter().any(|(k, _, _)| *k == key) {
                continue;
            }
            // A point left off this run is recorded, not installed.
            if let Some(mut action) = action(n.action) {
                if matches!(n.at, NoiseAt::Every { .. }) {
                    action.retries = EVERY_HOLDS;
                }
                self.actions.push((key, action, usize::MAX));
            }
            self.noise.push(n.clone());
        }
        self
    }
}

/// The kernel action that carries it out (none for a point left off).
pub fn action(action: NoiseAction) -> Option<Action> {
    let (kind, value, timeout_us) = match action {
        NoiseAction::Delay { us } => (ActionKind::DELAY, us, us),
        NoiseAction::Demote { priority, max_us } => {
            (ActionKind::YIELD, u64::from(priority), max_us)
        }
        NoiseAction::Skip => return None,
    };
    Some(Action { kind, value, timeout_us, ..Action::default() })
}

/// Whether a stop at `stopped` (the site the probe reported; for a sync
/// point, the sync function's id with the thread's rank) served noise `at`,
/// given whether the stopped function is a sync point. Noise for every
/// thread at a point is served by each stop there.
pub fn served_by(at: NoiseAt, stopped: SiteKey, sync_function: bool) -> bool {
    match at {
        NoiseAt::Every { func } => stopped.func == func && stopped.point == SitePoint::ENTRY,
        NoiseAt::Call { .. } => !sync_function && stopped == site_key(at),
        NoiseAt::Sync { role, step } => {
            sync_function
                && stopped.role == role
                && stopped.instance == step
                && stopped.point == SitePoint::ENTRY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label, Probe,
        testing::{call, function, run},
    };

    fn seen() -> Run {
        let calls = (1..=10).map(|i| call(0, 0, i, 0, Some(1), Some(0))).collect();
        run(1, Label::Pass, calls, 1)
    }

    #[test]
    fn random_delays_are_distinct_points_within_bounds() {
        let level = Level { sites: 4, max_delay_us: 300, starve: false };
        let mut source = NoiseSource::new(level, Schedule::Random, &[seen()], &[], 7);
        source.learn(&[(0, 5)]);
        for _ in 0..20 {
            let noise = source.draw();
            assert_eq!(noise.len(), 4);
            let points: BTreeSet<NoiseAt> = noise.iter().map(|n| n.at).collect();
            assert_eq!(points.len(), 4, "distinct points");
            for n in &noise {
                match n.at {
                    NoiseAt::Call { site } => assert!(site.instance <= 10 && site.role == 0),
                    NoiseAt::Sync { role, step } => assert!(role == 0 && (1..=5).contains(&step)),
                    NoiseAt::Every { .. } => panic!("no statement points were given"),
                }
                assert!(matches!(n.action, NoiseAction::Delay { us } if (50..=300).contains(&us)));
            }
        }
        assert_eq!(Level::START.stronger(), Some(LADDER[1]));
        assert_eq!(LADDER[3].stronger(), Some(LADDER[4]), "then starvation");
        assert_eq!(LADDER[4].stronger(), None);
    }

    #[test]
    fn starvation_holds_are_log_uniform_from_a_millisecond_to_a_second() {
        let mut source = NoiseSource::new(LADDER[4], Schedule::Random, &[seen()], &[], 5);
        let holds: Vec<u64> = (0..400)
            .flat_map(|_| source.draw())
            .map(|n| match n.action {
                NoiseAction::Delay { us } => us,
                other => panic!("{other:?} in a random-delay run"),
            })
            .collect();
        assert_eq!(holds.len(), 800, "two points per run");
        assert!(holds.iter().all(|&us| (STARVE_FROM_US..=1_000_000).contains(&us)));
        // Log-uniform: each decade (1-10 ms, 10-100 ms, 100 ms-1 s) gets
        // about a third of the holds; uniform would give the first two
        // about 1 % and 9 %.
        for (lo, hi) in [(1_000, 10_000), (10_000, 100_000), (100_000, 1_000_001)] {
            let n = holds.iter().filter(|&&us| (lo..hi).contains(&us)).count();
            assert!((200..=340).contains(&n), "{n} of 800 holds in {lo}..{hi} µs");
        }
    }

    #[test]
    fn a_focused_plan_is_replayed_in_its_share_of_runs_and_left_off_in_the_others() {
        let mut source = NoiseSource::new(Level::START, Schedule::All, &[seen()], &[], 9);
        let plan = vec![Noise {
            at: NoiseAt::Sync { role: 1, step: 3 },
            action: NoiseAction::Delay { us: 1_300 },
            held_ns: 1_300_000,
            func: Some(4),
            near_miss: false,
        }];
        source.focus(&plan, 0.5);
        let runs: Vec<Vec<Noise>> = (0..200).map(|_| source.draw()).collect();
        let on = runs.iter().filter(|r| r[0].action == NoiseAction::Delay { us: 1_300 }).count();
        assert!((70..=130).contains(&on), "{on} of 200 runs with the plan on");
        for r in &runs {
            assert_eq!(r.len(), 1, "the same points every run");
            assert_eq!(r[0].at, NoiseAt::Sync { role: 1, step: 3 });
            assert!(matches!(r[0].action, NoiseAction::Delay { us: 1_300 } | NoiseAction::Skip));
            assert_eq!(r[0].held_ns, 0, "what a run did is its own");
        }
    }

    /// Two runs of a worker (role 1) and a checker (role 2): a lock call
    /// each on one mutex (0x5000) 500 ns and then 3 ms apart, a traced call
    /// each on one object (0x9000) 40 ms apart, and on a small number (7)
    /// 100 ns apart.
    fn near_miss_runs() -> (Vec<Run>, Vec<Function>) {
        let lock =
            Function { internal: true, probe: Probe::Sync, ..function(1, "pthread_mutex_lock") };
        let functions = vec![function(0, "use"), lock];
        let run_with = |id, second_lock: u64| {
            let calls = vec![
                call(1, 1, 1, 1_000, Some(1_200), Some(0)).with_args([0x5000, 0, 0]),
                call(1, 2, 1, second_lock, Some(second_lock + 200), Some(0))
                    .with_args([0x5000, 0, 0]),
                call(0, 1, 1, 10_000_000, Some(10_000_100), Some(0)).with_args([0x9000, 0, 0]),
                call(0, 2, 1, 50_000_000, Some(50_000_100), Some(0)).with_args([0x9000, 0, 0]),
                call(0, 1, 2, 60_000_000, Some(60_000_100), Some(0)).with_args([7, 0, 0]),
                call(0, 2, 2, 60_000_100, Some(60_000_200), Some(0)).with_args([7, 0, 0]),
            ];
            run(id, Label::Pass, calls, 70_000_000)
        };
        (vec![run_with(1, 1_500), run_with(2, 3_001_000)], functions)
    }

    /// A near miss is the earlier of two threads' entries on one object,
    /// kept at its smallest gap: the lock taken 500 ns before the other
    /// thread's, not the object 40 ms apart nor the number 7.
    #[test]
    fn near_misses_are_the_earlier_of_two_threads_close_entries_on_one_object() {
        let (runs, functions) = near_miss_runs();
        let near = near_misses(&runs, &functions, LONGEST_NEAR_MISS_NS);
        let at = NoiseAt::Sync { role: 1, step: 1 };
        assert_eq!(near, vec![NearMiss { gap_ns: 500, at }]);
        // Each run alone: its own gap.
        assert_eq!(near_misses(&runs[1..], &functions, LONGEST_NEAR_MISS_NS)[0].gap_ns, 3_000_000);
        assert_eq!(near_misses(&runs[1..], &functions, 1_000_000), vec![]);
        // A failing run's order is not one to turn round.
        let failed = Run { label: Label::Fail, ..runs[0].clone() };
        assert_eq!(near_misses(&[failed], &functions, LONGEST_NEAR_MISS_NS), vec![]);
    }

    /// Near-miss runs hold only near misses a hold of the level can turn
    /// round, each longer than its gap; with none, they are random delays.
    #[test]
    fn near_miss_noise_holds_the_earlier_entry_longer_than_its_gap() {
        let (runs, functions) = near_miss_runs();
        let at = NoiseAt::Sync { role: 1, step: 1 };
        let mut source = NoiseSource::new(LADDER[1], Schedule::NearMiss, &runs[1..], &functions, 4);
        for _ in 0..50 {
            let noise = source.draw();
            assert_eq!(noise.len(), 1, "one near miss to choose");
            assert_eq!(noise[0].at, at);
            let NoiseAction::Delay { us } = noise[0].action else { panic!("{:?}", noise[0]) };
            assert!((3_050..=4_000).contains(&us), "{us} µs for a 3 ms gap");
        }
        // At 2 ms holds the 3 ms gap cannot be turned round.
        let mut source = NoiseSource::new(LADDER[0], Schedule::NearMiss, &runs[1..], &functions, 4);
        let noise = source.draw();
        assert_eq!(noise.len(), 2, "random delays at the level's two points");
        assert!(noise.iter().all(|n| matches!(n.action, NoiseAction::Delay { us } if us <= 2_000)));
    }

    /// Runs seen without sync points give no near miss on a lock; an
    /// amplified run that records them does.
    #[test]
    fn near_misses_are_learnt_from_amplified_runs() {
        let (runs, functions) = near_miss_runs();
        let mut source = NoiseSource::new(LADDER[1], Schedule::NearMiss, &[seen()], &functions, 4);
        assert!(source.draw().iter().all(|n| !n.near_miss), "none yet: random delays");
        source.learn_near_misses(&runs[1], &functions);
        source.learn_near_misses(&runs[0], &functions);
        assert_eq!(
            source.near,
            vec![NearMiss { gap_ns: 500, at: NoiseAt::Sync { role: 1, step: 1 } }]
        );
        let noise = source.draw();
        assert_eq!((noise.len(), noise[0].near_miss), (1, true));
        // A run held there in which the other thread came first is not
        // one more near miss.
        let mut held = runs[0].clone();
        held.calls.iter_mut().filter(|c| c.role == 2).for_each(|c| c.entry_ns -= 1_000);
        held.calls.sort_by_key(|c| c.entry_ns);
        held.noise = noise;
        source.learn_near_misses(&held, &functions);
        assert_eq!(source.near.len(), 1);
        held.noise[0].near_miss = false;
        source.learn_near_misses(&held, &functions);
        assert_eq!(source.near.len(), 2, "a random delay's run is learnt from");
    }

    #[test]
    fn all_takes_random_delays_pct_and_near_misses_in_turn() {
        let (runs, functions) = near_miss_runs();
        let mut source = NoiseSource::new(Level::START, Schedule::All, &runs, &functions, 6);
        let kinds: Vec<&str> = (0..6)
            .map(|_| {
                let noise = source.draw();
                match noise[0].action {
                    NoiseAction::Demote { .. } => "pct",
                    _ if noise[0].near_miss => "near miss",
                    _ => "random",
                }
            })
            .collect();
        assert_eq!(kinds, ["random", "pct", "near miss", "random", "pct", "near miss"]);
    }

    /// With no near miss in the runs seen, `All` alternates the other two.
    #[test]
    fn all_alternates_random_delays_and_pct_change_points_without_near_misses() {
        let mut source = NoiseSource::new(Level::START, Schedule::All, &[seen()], &[], 3);
        let kinds: Vec<bool> = (0..4)
            .map(|_| {
                let noise = source.draw();
                assert_eq!(noise.len(), 2);
                matches!(noise[0].action, NoiseAction::Demote { .. })
            })
            .collect();
        assert_eq!(kinds, vec![false, true, false, true]);
        let pct = {
            source.draw();
            source.draw()
        };
        let priorities: Vec<u32> = pct
            .iter()
            .map(|n| match n.action {
                NoiseAction::Demote { priority, max_us } => {
                    assert_eq!(max_us, Level::START.max_delay_us);
                    priority
                }
                other => panic!("{other:?} in a PCT run"),
            })
            .collect();
        assert_eq!(priorities, vec![1, 2], "change point i gets priority i");
    }

    /// Once statement points are attached, each run also holds every
    /// thread at one of them: keyed by the point alone, bounded per run,
    /// served by each arrival there and by nothing else.
    #[test]
    fn every_thread_is_held_at_one_statement_point_a_run() {
        let level = Level { sites: 2, max_delay_us: 40_000, starve: false };
        let mut source = NoiseSource::new(level, Schedule::All, &[seen()], &[], 11);
        assert!(source.draw().iter().all(|n| !matches!(n.at, NoiseAt::Every { .. })));
        source.hold_every_at(vec![5, 6, 7]);
        let mut chosen = BTreeSet::new();
        for _ in 0..60 {
            let noise = source.draw();
            assert_eq!(noise.len(), 3, "the level's two points and one for every thread");
            let NoiseAt::Every { func } = noise[2].at else { panic!("{:?}", noise[2]) };
            chosen.insert(func);
            let NoiseAction::Delay { us } = noise[2].action else { panic!("{:?}", noise[2]) };
            assert!((50..=EVERY_MAX_US).contains(&us), "{us} µs");
        }
        assert_eq!(chosen, BTreeSet::from([5, 6, 7]));
        let at = NoiseAt::Every { func: 6 };
        let key = site_key(at);
        assert_eq!((key.func, key.role, key.instance), (6, EVERY_ROLE, ANY_INSTANCE));
        let plan = Plan::default().with_noise(&[Noise {
            at,
            action: NoiseAction::Delay { us: 900 },
            held_ns: 0,
            func: None,
            near_miss: false,
        }]);
        assert_eq!(plan.actions.len(), 1);
        let (k, a, _) = plan.actions[0];
        assert_eq!((k, a.kind, a.value, a.retries), (key, ActionKind::DELAY, 900, EVERY_HOLDS));
        let stop = |func, role, instance| SiteKey { func, role, instance, point: SitePoint::ENTRY };
        assert!(served_by(at, stop(6, 1, 3), true), "any thread, any rank");
        assert!(served_by(at, stop(6, 4, 1), true));
        assert!(!served_by(at, stop(7, 1, 3), true), "another point");
    }

    /// With the C library's `exit` among the sync points and a run seen
    /// that created a thread it never joined, about half the runs (a fixed
    /// seed: 100 of 200) also hold every thread that calls it at the
    /// lowest priority, for at most the run's other holds and one more;
    /// without such a run (seen, or learnt from), or without `exit`, none
    /// do.
    #[test]
    fn exit_is_held_in_half_the_runs_for_longer_than_the_other_holds() {
        let mut exit = function(3, "exit");
        (exit.probe, exit.internal) = (Probe::Sync, true);
        // aid's own probe at thread creation, with its return.
        let mut create = function(4, "pthread_create");
        create.internal = true;
        let functions = vec![function(0, "w"), function(1, "x"), function(2, "y"), exit, create];
        let level = Level { sites: 2, max_delay_us: 2_000, starve: false };
        let joined = NoiseSource::new(level, Schedule::All, &[seen()], &functions, 13);
        let mut unjoined = seen();
        unjoined.calls.push(call(4, 0, 1, 5, Some(6), Some(0)));
        unjoined.calls.push(call(3, 0, 1, 20, None, None));
        let mut source =
            NoiseSource::new(level, Schedule::All, &[unjoined.clone()], &functions, 13);
        let mut with_exit = 0;
        for _ in 0..200 {
            let noise = source.draw();
            let (held, others): (Vec<&Noise>, Vec<&Noise>) =
                noise.iter().partition(|n| n.at == NoiseAt::Every { func: 3 });
            assert_eq!(others.len(), 2, "{noise:?}");
            let Some(h) = held.first() else { continue };
            with_exit += 1;
            let bound: u64 = others.iter().map(|n| hold_us(n.action)).sum::<u64>() + 2_000;
            assert_eq!(h.action, NoiseAction::Demote { priority: OUTLIVE, max_us: bound });
            let (k, a, _) = Plan::default().with_noise(&noise).actions[2];
            assert_eq!((k, a.kind, a.value), (site_key(h.at), ActionKind::YIELD, 0));
        }
        assert_eq!(with_exit, 100);
        // Every thread joined in the runs seen: none, until a run shows one
        // left unjoined.
        let mut learnt = joined;
        assert!((0..50).all(|_| learnt.draw().len() == 2));
        learnt.learn_from(&unjoined, &[], &functions);
        assert!((0..50).any(|_| learnt.draw().len() == 3));
        let mut none = NoiseSource::new(level, Schedule::All, &[unjoined], &functions[..3], 13);
        assert!((0..50).all(|_| none.draw().len() == 2));
    }

    #[test]
    fn sync_points_are_guessed_until_counted_then_learnt() {
        let mut source = NoiseSource::new(Level::START, Schedule::Random, &[seen()], &[], 1);
        let syncs = |s: &NoiseSource| {
            s.points().into_iter().filter(|p| matches!(p, NoiseAt::Sync { .. })).count()
        };
        assert_eq!(syncs(&source), GUESSED_STEPS as usize);
        source.learn(&[(0, 3), (2, 4)]);
        source.learn(&[(0, 2)]);
        assert_eq!(syncs(&source), 3 + 4, "the most each role reached");
        let key = site_key(NoiseAt::Sync { role: 2, step: 4 });
        assert_eq!((key.func, key.role, key.instance), (SYNC_SITE_FUNC, 2, 4));
        let stopped = SiteKey { func: 17, ..key };
        assert!(served_by(NoiseAt::Sync { role: 2, step: 4 }, stopped, true));
        assert!(!served_by(NoiseAt::Sync { role: 2, step: 4 }, stopped, false));
        let act = action(NoiseAction::Demote { priority: 2, max_us: 900 });
        assert_eq!(act.map(|a| (a.kind, a.value, a.timeout_us)), Some((ActionKind::YIELD, 2, 900)));
        assert_eq!(action(NoiseAction::Skip), None, "a point left off installs nothing");
    }

    /// Runs that recorded the synchronisation points (every run, when the
    /// budget had room): their calls of sync functions are not call sites
    /// for noise (the kernel looks noise at a sync point up by rank, never
    /// as a call), and they say how many each thread reached.
    #[test]
    fn recorded_sync_points_are_counted_not_taken_for_call_sites() {
        let mut lock = function(1, "pthread_mutex_lock");
        lock.probe = Probe::Sync;
        let functions = vec![function(0, "withdraw"), lock];
        let calls = vec![
            call(0, 1, 1, 0, Some(10), Some(0)),
            call(1, 1, 1, 1, None, None),
            call(1, 1, 2, 5, None, None),
            call(1, 2, 1, 6, None, None),
        ];
        let a = run(1, Label::Pass, calls, 20);
        let b = run(2, Label::Pass, vec![call(1, 1, 1, 1, None, None)], 20);
        let source = NoiseSource::new(Level::START, Schedule::Random, &[a, b], &functions, 1);
        let points = source.points();
        let sites: Vec<NoiseAt> =
            points.iter().copied().filter(|p| matches!(p, NoiseAt::Call { .. })).collect();
        assert_eq!(sites, vec![NoiseAt::Call { site: Site { func: 0, role: 1, instance: 1 } }]);
        let syncs: Vec<(Role, u32)> = points
            .iter()
            .filter_map(|p| match *p {
                NoiseAt::Sync { role, step } => Some((role, step)),
                NoiseAt::Call { .. } | NoiseAt::Every { .. } => None,
            })
            .collect();
        // The most each role reached in one run: 2 on role 1, 1 on role 2,
        // none on main.
        assert_eq!(syncs, vec![(1, 1), (1, 2), (2, 1)]);
    }
}
