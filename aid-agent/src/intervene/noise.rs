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
//! inside it, which holds at one thread's rank almost never give. In a
//! PCT run those holds are change points too ([`EVERY_PRIORITY`]): each
//! thread is let go once no other can run, so the pool stays inside the
//! window for as long as the rest of the program needs to reach it. The
//! points are those of the functions the runs seen called.
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

pub use super::pool::{
    EVERY_DEMOTE_MAX_US, EVERY_DEMOTE_RUNS, EVERY_HOLDS, EVERY_HOLDS_MAX, EVERY_MAX_US,
    EVERY_PRIORITY, every_demote_us, every_holds,
};
use crate::{
    intervene::plan::{self, Plan},
    model::{
        FuncId, Function, Noise, NoiseAction, NoiseAt, OUTLIVE, Point, Probe, Role, Run, Site,
    },
    predicates::LockOp,
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
    /// Random delays at the ladder's starvation level from the first
    /// noisy run: a thread or two held for 1 ms to 1 s, log-uniformly
    /// (rr's chaos mode), for a window that needs one thread kept off the
    /// CPU far longer than the millisecond levels hold it.
    Starve,
    /// No holds: the target on one CPU, its threads' priorities drawn at
    /// random again and again ([`crate::intervene::one_cpu`]), which
    /// switches threads wherever they are, with no probe there.
    OneCpu,
}

impl Schedule {
    pub fn describe(self) -> String {
        use super::one_cpu::{LONGEST_MS, SHORTEST_MS};
        let text = match self {
            Schedule::Random => "random delays",
            Schedule::Pct => "PCT-style priority change points",
            Schedule::NearMiss => "delays at near misses (random delays until runs show one)",
            Schedule::All => {
                "random delays, PCT-style priority change points and, once runs show near misses, delays at them, run by run"
            }
            Schedule::Starve => "starvation: random holds, log-uniform from 1 ms",
            Schedule::OneCpu => {
                return format!(
                    "one CPU, random thread priorities drawn again every {SHORTEST_MS}-{LONGEST_MS} ms"
                );
            }
        };
        text.to_string()
    }

    /// The level `record --noise` holds every run at: the ladder's
    /// strongest millisecond level (16 points, holds up to 16 ms), or its
    /// starvation level for [`Schedule::Starve`].
    pub fn strongest_level(self) -> Level {
        match self {
            Schedule::Starve => LADDER[LADDER.len() - 1],
            _ => LADDER[LADDER.len() - 2],
        }
    }

    /// The level amplification starts at, and starts again from after
    /// the ladder's top: the first of [`LADDER`], or its starvation level
    /// for [`Schedule::Starve`].
    pub fn first_level(self) -> Level {
        match self {
            Schedule::Starve => LADDER[LADDER.len() - 1],
            _ => Level::START,
        }
    }
}

/// The kind of noise one run gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Random,
    Pct,
    NearMiss,
    OneCpu,
}

/// A near miss of a passing run: two threads entered calls on the same
/// object (the lock a lock call takes, a traced call's first
/// argument when it is an address) `gap_ns` apart, the earlier at `at`,
/// the later at `later`. Holding `at` longer than the gap lets the later
/// go first: the order the runs nearly showed. Holding `later` too, and
/// `at` less than the gap plus that hold, lets the earlier go while the
/// later stands at its entry, after whatever its thread did before the
/// call ([`PAIR_SHARE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct NearMiss {
    gap_ns: u64,
    at: NoiseAt,
    later: NoiseAt,
}

impl NearMiss {
    /// Both entries are lock calls of two threads (sync points: a near
    /// miss on a lock pairs its acquisitions only), the ones
    /// [`PAIR_SHARE`] holds in pairs.
    fn on_a_lock(&self) -> bool {
        matches!((self.at, self.later), (NoiseAt::Sync { role: a, .. }, NoiseAt::Sync { role: b, .. }) if a != b)
    }
}

/// The share of a lock's near misses ([`NearMiss::on_a_lock`]) whose
/// holds hold both of its threads ([`NearMiss::later`]): the later at its
/// entry, the earlier until a moment inside that hold. A thread that
/// publishes work before it takes the lock that guards it (qsort_mt's
/// `allocate_thread` marks a pool thread busy, then locks the thread's
/// mutex, and its caller fills in the work later) races a thread that
/// takes that lock in the window between the two, which the two threads'
/// lock calls bound: the runs seen show them close (the pool thread took
/// the lock first, while the work was not yet published), and turning
/// that order round lets the publisher lock first and finish. Held at
/// both entries, the earlier takes the lock inside the window. Of 4
/// corpus sessions of qsort_mt without it, 2 never provoked its failure
/// in 440 runs; the 2 that did replayed exactly such a pair (the pool
/// thread's first lock held 4.58 ms, the publisher's lock on it 5.75 ms:
/// 8 of 8 replays failed).
///
/// Near misses of traced calls are never held in pairs: the window is the
/// one before a lock call. Held in pairs too, rare.c's near miss (the
/// writer's `publish(&slot)` just before the reader's `consume(&slot)`)
/// was turned round in half as many runs, and "consume starts while
/// prepare runs" became the root cause in 3 of 4 runs of
/// `examples::rare_failures_are_amplified` and in a CI of 2ff8b6c (the
/// noise focused on `prepare` held 1.61 ms instead).
pub const PAIR_SHARE: f64 = 0.5;

/// A first argument below this is a number, not an object's address
/// (the first page of the address space is never mapped).
const LOWEST_ADDRESS: i64 = 0x1_0000;

/// The near misses of the passing runs of `runs`, one per point (its
/// smallest gap), nearest first: for each object, each call on it
/// against the latest call of every other thread on it, when their
/// entries are at most `within_ns` apart. A passing run's order is one
/// that passes; the one it nearly took instead may fail. A failing run's
/// is the failing order already, and turning it round would hold the
/// thread whose lateness the failure may need.
///
/// Calls on a lock are in the order they held it, which is the order of
/// their releases (each lock call is paired with its thread's next
/// release of that lock), not of their entries: a thread that entered
/// first and waited, or was held by noise at its entry, took the lock
/// second, and holding it would only make the order seen surer. Its gap
/// is then 0: the later thread was already there.
fn near_misses(runs: &[Run], functions: &[Function], within_ns: u64) -> Vec<NearMiss> {
    let ops = crate::predicates::lock_ops(functions);
    let op = |func: FuncId| ops.get(func as usize).copied().unwrap_or_default();
    let sync = |func: FuncId| functions.get(func as usize).is_some_and(|f| f.probe.is_sync_point());
    let mut best: BTreeMap<NoiseAt, (u64, NoiseAt)> = BTreeMap::new();
    for run in runs.iter().filter(|r| !r.failed()) {
        // (order, entry, object, thread, point); `order` is the release
        // of a lock call, once seen, and the entry of any other call.
        let mut entries: Vec<(u64, u64, i64, Role, NoiseAt)> = Vec::new();
        let mut holding: BTreeMap<(Role, i64), usize> = BTreeMap::new();
        let mut steps: BTreeMap<Role, u32> = BTreeMap::new();
        let mut calls: Vec<&crate::model::Call> = run.calls.iter().collect();
        calls.sort_by_key(|c| c.entry_ns);
        for c in calls {
            let object = c.args[0];
            if sync(c.func) {
                let step = steps.entry(c.role).or_insert(0);
                *step += 1;
                let at = NoiseAt::Sync { role: c.role, step: *step };
                match op(c.func) {
                    LockOp::Acquire if object != 0 => {
                        holding.insert((c.role, object), entries.len());
                        entries.push((c.entry_ns, c.entry_ns, object, c.role, at));
                    }
                    LockOp::Release | LockOp::Wait => {
                        let lock = if op(c.func) == LockOp::Wait { c.args[1] } else { object };
                        if let Some(i) = holding.remove(&(c.role, lock)) {
                            entries[i].0 = c.entry_ns;
                        }
                    }
                    _ => {}
                }
            } else if object >= LOWEST_ADDRESS {
                let site = Site { func: c.func, role: c.role, instance: c.instance };
                entries.push((c.entry_ns, c.entry_ns, object, c.role, NoiseAt::Call { site }));
            }
        }
        entries.sort_by_key(|e| e.0);
        let mut latest: BTreeMap<i64, BTreeMap<Role, (u64, NoiseAt)>> = BTreeMap::new();
        for (_, t, object, role, at) in entries {
            let on = latest.entry(object).or_default();
            for (_, &(before, earlier)) in on.iter().filter(|(r, _)| **r != role) {
                let gap = t.saturating_sub(before);
                if gap <= within_ns {
                    let g = best.entry(earlier).or_insert((gap, at));
                    *g = (*g).min((gap, at));
                }
            }
            on.insert(role, (t, at));
        }
    }
    let mut out: Vec<NearMiss> =
        best.into_iter().map(|(at, (gap_ns, later))| NearMiss { gap_ns, at, later }).collect();
    out.sort();
    out
}

/// Sync points per thread assumed before any amplified run has counted
/// them.
const GUESSED_STEPS: u32 = 8;

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

/// The most a held `exit` waits for the rest of a run without noise
/// ([`NoiseSource`]'s bound on it: the run's other holds, the level's
/// longest hold, and the longest run seen without noise, up to this).
/// unjoined.c's worker needs 50 lock calls after `main` returned; under
/// a loaded machine (the test suite's other tests beside it) the bound
/// of the other holds and the level's 2 ms let 5 of 15 held runs end
/// before it was done (the CI of d68e1f1's successor,
/// `examples::exit_noise_keeps_a_thread_main_never_joined_alive`).
pub const EXIT_RUN_MAX_US: u64 = 1_000_000;

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
        NoiseAction::Skip | NoiseAction::OneCpu { .. } => 0,
    }
}

/// The longest `n` holds its thread(s) in a run, in microseconds.
fn longest_hold_us(n: &Noise) -> u64 {
    let each = hold_us(n.action);
    match n.at {
        NoiseAt::Every { holds, .. } => each * u64::from(holds),
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
    /// The longest run seen without noise, in microseconds (at most
    /// [`EXIT_RUN_MAX_US`]): what a held `exit` waits beyond the run's
    /// other holds, and the measure of a pool's hold at one point
    /// ([`every_demote_us`]).
    natural_us: u64,
    roles: BTreeSet<Role>,
    /// The most threads one run seen had.
    threads: u32,
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
            natural_us: seen
                .iter()
                .filter(|r| r.noise.is_empty())
                .map(|r| r.outcome.wall_ns / 1000)
                .max()
                .unwrap_or(0)
                .min(EXIT_RUN_MAX_US),
            roles,
            threads: seen.iter().map(|r| r.threads.len() as u32).max().unwrap_or(0),
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
        self.threads = self.threads.max(run.threads.len() as u32);
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
        let mut all: BTreeMap<NoiseAt, (u64, NoiseAt)> =
            self.near.iter().map(|n| (n.at, (n.gap_ns, n.later))).collect();
        for n in found {
            let gap = all.entry(n.at).or_insert((n.gap_ns, n.later));
            *gap = (*gap).min((n.gap_ns, n.later));
        }
        self.near =
            all.into_iter().map(|(at, (gap_ns, later))| NearMiss { gap_ns, at, later }).collect();
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
            Schedule::Random | Schedule::Starve => Kind::Random,
            Schedule::OneCpu => Kind::OneCpu,
            Schedule::Pct => Kind::Pct,
            Schedule::NearMiss if near.is_empty() => Kind::Random,
            Schedule::NearMiss => Kind::NearMiss,
            Schedule::All if near.is_empty() => {
                [Kind::Random, Kind::Pct][(self.drawn % 2) as usize]
            }
            Schedule::All => [Kind::Random, Kind::Pct, Kind::NearMiss][(self.drawn % 3) as usize],
        };
        self.drawn += 1;
        if kind == Kind::OneCpu {
            let cpu = *crate::sys::sched::allowed_cpus().choose(&mut self.rng).unwrap_or(&0);
            let action = NoiseAction::OneCpu { cpu, seed: self.rng.random() };
            return vec![Noise {
                at: NoiseAt::Process,
                action,
                held_ns: 0,
                func: None,
                near_miss: false,
            }];
        }
        let mut noise: Vec<Noise> = if kind == Kind::NearMiss {
            let chosen: Vec<NearMiss> =
                near.choose_multiple(&mut self.rng, self.level.sites).copied().collect();
            self.near_miss_holds(&chosen)
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
            let action = if kind == Kind::Pct || self.level.starve {
                let max_us = every_demote_us(max, self.natural_us);
                NoiseAction::Demote { priority: EVERY_PRIORITY, max_us }
            } else {
                NoiseAction::Delay { us: self.rng.random_range(50..=max.clamp(50, EVERY_MAX_US)) }
            };
            noise.push(Noise {
                at: NoiseAt::Every { func, holds: every_holds(self.threads) },
                action,
                held_ns: 0,
                func: None,
                near_miss: false,
            });
        }
        if let Some(func) = self.exit.filter(|_| self.unjoined)
            && self.rng.random_bool(EXIT_HELD_SHARE)
        {
            // Long enough to outlast every other hold of the run, and
            // then as long as a whole run without noise took.
            let others: u64 = noise.iter().map(longest_hold_us).sum();
            let max_us = others + max + self.natural_us;
            noise.push(Noise {
                at: NoiseAt::Every { func, holds: every_holds(self.threads) },
                action: NoiseAction::Demote { priority: OUTLIVE, max_us },
                held_ns: 0,
                func: None,
                near_miss: false,
            });
        }
        noise
    }

    /// The holds of a near-miss run at the near misses `chosen`: each
    /// earlier entry held longer than its gap, or, in [`PAIR_SHARE`] of
    /// them, the later entry held too and the earlier let go inside that
    /// hold. A point is held once (the first near miss that names it).
    fn near_miss_holds(&mut self, chosen: &[NearMiss]) -> Vec<Noise> {
        let max = self.level.max_delay_us;
        let hold = |at, us| Noise {
            at,
            action: NoiseAction::Delay { us },
            held_ns: 0,
            func: None,
            near_miss: true,
        };
        let mut noise: Vec<Noise> = Vec::new();
        for n in chosen {
            if noise.iter().any(|h| h.at == n.at) {
                continue;
            }
            let gap_us = n.gap_ns / 1000;
            let pair = n.on_a_lock()
                && !noise.iter().any(|h| h.at == n.later)
                && self.rng.random_bool(PAIR_SHARE);
            if pair {
                // The later held; the earlier let go after its gap and
                // before that hold ends.
                let later_us = self.level.delay_us(&mut self.rng);
                let us = self.rng.random_range(gap_us + 1..=gap_us + later_us);
                noise.push(hold(n.at, us));
                noise.push(hold(n.later, later_us));
            } else {
                // Longer than the gap, or the later thread still comes second.
                let least = (gap_us + 50).min(max);
                noise.push(hold(n.at, self.level.delay_us(&mut self.rng).max(least)));
            }
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
        NoiseAt::Every { func, .. } => {
            SiteKey { func, role: EVERY_ROLE, instance: ANY_INSTANCE, point: SitePoint::ENTRY }
        }
        // No site: nothing is installed in the kernel for it.
        NoiseAt::Process => SiteKey { func: u32::MAX, ..SiteKey::default() },
    }
}

impl Plan {
    /// Adds the noise of a run (failure amplification, `noise.rs`): a
    /// delay or a PCT change point at a traced call's entry or at a
    /// thread's k-th synchronisation point, whose probes the run then
    /// needs. Noise is dropped where an intervention already acts, on
    /// that call or on every call it is one of: the kernel looks the
    /// exact call up first, and a delay installed there would stand in
    /// for the intervention. Not where the intervention on every call is
    /// a wait on a group (a serialisation, the wait for a lock's takers):
    /// the agent goes on to it after the noise (the kernel's
    /// `hold_after_noise`), and the run keeps both.
    pub fn with_noise(mut self, noise: &[Noise]) -> Plan {
        self.sync_points = true;
        for n in noise {
            let key = site_key(n.at);
            // An optional action (a held lock's entry wait) yields: the
            // noise takes its key, or its own key is found first.
            self.drop_optional(&key);
            let covering = self.key_of(&key).filter(|k| !self.optional.contains(k));
            if covering.is_some_and(|k| k == key || !self.waits_after_noise(&k)) {
                // Counted whether or not it acts in this run: a focused
                // plan is off in some runs (`Skip`), and passing runs
                // left out only where it is on would leave the runs
                // without noise, which fail less often than the control.
                self.displaced += 1;
                continue;
            }
            // A point left off this run is recorded, not installed.
            if let Some(mut action) = action(n.action) {
                if let NoiseAt::Every { holds, .. } = n.at {
                    action.retries = holds;
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
        NoiseAction::Skip | NoiseAction::OneCpu { .. } => return None,
    };
    Some(Action { kind, value, timeout_us, ..Action::default() })
}

/// Whether a stop at `stopped` (the site the probe reported; for a sync
/// point, the sync function's id with the thread's rank) served noise `at`,
/// given whether the stopped function is a sync point. Noise for every
/// thread at a point is served by each stop there.
pub fn served_by(at: NoiseAt, stopped: SiteKey, sync_function: bool) -> bool {
    match at {
        NoiseAt::Every { func, .. } => stopped.func == func && stopped.point == SitePoint::ENTRY,
        NoiseAt::Call { .. } => !sync_function && stopped == site_key(at),
        NoiseAt::Process => false,
        NoiseAt::Sync { role, step } => {
            sync_function
                && stopped.role == role
                && stopped.instance == step
                && stopped.point == SitePoint::ENTRY
        }
    }
}

#[cfg(test)]
#[path = "noise_tests.rs"]
mod tests;
