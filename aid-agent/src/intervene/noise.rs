//! Failure amplification: when failures are rare, `debug` injects noise
//! where the order of threads is decided, so more runs fail — at the
//! entries of the C library's synchronisation points (locks, unlocks,
//! condition variables, semaphores, yields, sleeps; aid's own entry-only
//! probes, attached to amplified runs only) and of traced calls. Each run
//! draws its own noise, of one of two kinds, side by side:
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
//!   serialised (they share the CPUs); only the change points are enforced.
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

use aid_common::{Action, ActionKind, SYNC_SITE_FUNC, SiteKey, SitePoint};
use rand::{Rng as _, SeedableRng as _, seq::IndexedRandom as _};

use crate::{
    intervene::plan,
    model::{FuncId, Function, Noise, NoiseAction, NoiseAt, Point, Probe, Role, Run, Site},
};

/// How much noise to inject per run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// Noise points per run: delayed points, or PCT change points (d − 1).
    pub sites: usize,
    /// Longest delay or PCT hold, in microseconds.
    pub max_delay_us: u64,
}

impl Level {
    pub const START: Level = Level { sites: 2, max_delay_us: 2_000 };

    /// The next, stronger level (more points, longer holds), up to a cap.
    pub fn stronger(self) -> Option<Level> {
        let next = Level {
            sites: (self.sites * 2).min(16),
            max_delay_us: (self.max_delay_us * 2).min(50_000),
        };
        (next != self).then_some(next)
    }
}

/// Which kind of noise the runs get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Random delays only.
    Random,
    /// PCT-style change points only.
    Pct,
    /// Alternating run by run: random delays, then PCT, then random...
    #[default]
    Both,
}

impl Schedule {
    pub fn describe(self) -> &'static str {
        match self {
            Schedule::Random => "random delays",
            Schedule::Pct => "PCT-style priority change points",
            Schedule::Both => "random delays and PCT-style priority change points, run by run",
        }
    }
}

/// Sync points per thread assumed before any amplified run has counted
/// them.
const GUESSED_STEPS: u32 = 8;

/// The noise drawn for every run at one level: the call sites of the runs
/// seen before amplification began, and the synchronisation points each
/// thread reached in those runs (when they recorded them) and in
/// amplified runs.
pub struct NoiseSource {
    pub level: Level,
    pub schedule: Schedule,
    calls: Vec<Site>,
    roles: BTreeSet<Role>,
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
            |func: FuncId| functions.get(func as usize).is_some_and(|f| f.probe == Probe::Sync);
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
            calls,
            roles,
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

    /// The noise for the next run.
    pub fn draw(&mut self) -> Vec<Noise> {
        let pct = match self.schedule {
            Schedule::Random => false,
            Schedule::Pct => true,
            Schedule::Both => self.drawn % 2 == 1,
        };
        self.drawn += 1;
        let points = self.points();
        let chosen: Vec<NoiseAt> =
            points.choose_multiple(&mut self.rng, self.level.sites).copied().collect();
        let max = self.level.max_delay_us;
        chosen
            .into_iter()
            .enumerate()
            .map(|(i, at)| {
                let action = if pct {
                    NoiseAction::Demote { priority: i as u32 + 1, max_us: max }
                } else {
                    NoiseAction::Delay { us: self.rng.random_range(50..=max) }
                };
                Noise { at, action, held_ns: 0, func: None }
            })
            .collect()
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

/// Where the kernel looks noise up.
pub fn site_key(at: NoiseAt) -> SiteKey {
    match at {
        NoiseAt::Call { site } => plan::site_key(site, Point::Entry),
        NoiseAt::Sync { role, step } => {
            SiteKey { func: SYNC_SITE_FUNC, role, instance: step, point: SitePoint::ENTRY }
        }
    }
}

/// The kernel action that carries it out.
pub fn action(action: NoiseAction) -> Action {
    let (kind, value, timeout_us) = match action {
        NoiseAction::Delay { us } => (ActionKind::DELAY, us, us),
        NoiseAction::Demote { priority, max_us } => {
            (ActionKind::YIELD, u64::from(priority), max_us)
        }
    };
    Action { kind, value, timeout_us, ..Action::default() }
}

/// Whether a stop at `stopped` (the site the probe reported; for a sync
/// point, the sync function's id with the thread's rank) served noise `at`,
/// given whether the stopped function is a sync point.
pub fn served_by(at: NoiseAt, stopped: SiteKey, sync_function: bool) -> bool {
    match at {
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
        Label,
        testing::{call, function, run},
    };

    fn seen() -> Run {
        let calls = (1..=10).map(|i| call(0, 0, i, 0, Some(1), Some(0))).collect();
        run(1, Label::Pass, calls, 1)
    }

    #[test]
    fn random_delays_are_distinct_points_within_bounds() {
        let level = Level { sites: 4, max_delay_us: 300 };
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
                }
                assert!(matches!(n.action, NoiseAction::Delay { us } if (50..=300).contains(&us)));
            }
        }
        assert_eq!(Level::START.stronger(), Some(Level { sites: 4, max_delay_us: 4_000 }));
    }

    #[test]
    fn both_alternates_random_delays_and_pct_change_points() {
        let mut source = NoiseSource::new(Level::START, Schedule::Both, &[seen()], &[], 3);
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
                NoiseAction::Delay { .. } => panic!("a delay in a PCT run"),
            })
            .collect();
        assert_eq!(priorities, vec![1, 2], "change point i gets priority i");
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
        assert_eq!((act.kind, act.value, act.timeout_us), (ActionKind::YIELD, 2, 900));
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
                NoiseAt::Call { .. } => None,
            })
            .collect();
        // The most each role reached in one run: 2 on role 1, 1 on role 2,
        // none on main.
        assert_eq!(syncs, vec![(1, 1), (1, 2), (2, 1)]);
    }
}
