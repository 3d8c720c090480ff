//! The noise sources (`noise.rs`) on hand-built runs: random delays and
//! starvation holds within their bounds, a focused plan replayed, near
//! misses found and held longer than their gap, the kinds taken in turn,
//! every thread held at a statement point, `exit` held in half the runs,
//! and sync points guessed, then counted.

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
                NoiseAt::Every { .. } | NoiseAt::Process => panic!("{n:?}: no such noise drawn"),
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
    let lock = Function { internal: true, probe: Probe::Sync, ..function(1, "pthread_mutex_lock") };
    let functions = vec![function(0, "use"), lock];
    let run_with = |id, second_lock: u64| {
        let calls = vec![
            call(1, 1, 1, 1_000, Some(1_200), Some(0)).with_args([0x5000, 0, 0]),
            call(1, 2, 1, second_lock, Some(second_lock + 200), Some(0)).with_args([0x5000, 0, 0]),
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
    let (at, later) = (NoiseAt::Sync { role: 1, step: 1 }, NoiseAt::Sync { role: 2, step: 1 });
    assert_eq!(near, vec![NearMiss { gap_ns: 500, at, later }]);
    // Each run alone: its own gap.
    assert_eq!(near_misses(&runs[1..], &functions, LONGEST_NEAR_MISS_NS)[0].gap_ns, 3_000_000);
    assert_eq!(near_misses(&runs[1..], &functions, 1_000_000), vec![]);
    // A failing run's order is not one to turn round.
    let failed = Run { label: Label::Fail, ..runs[0].clone() };
    assert_eq!(near_misses(&[failed], &functions, LONGEST_NEAR_MISS_NS), vec![]);
}

/// Calls on a lock are in the order they held it: a thread that entered
/// its lock call first but released after the other (it waited, or noise
/// held it at the entry) took the lock second, and the near miss is the
/// other thread's, with a gap of 0.
#[test]
fn near_misses_on_a_lock_are_in_the_order_it_was_held() {
    let lock = Function { internal: true, probe: Probe::Sync, ..function(1, "pthread_mutex_lock") };
    let unlock =
        Function { internal: true, probe: Probe::Sync, ..function(2, "pthread_mutex_unlock") };
    let functions = vec![function(0, "use"), lock, unlock];
    let calls = vec![
        // Role 2 enters first and waits; role 1 takes the lock, lets it
        // go, and role 2 then has it.
        call(1, 2, 1, 1_000, None, None).with_args([0x5000, 0, 0]),
        call(1, 1, 1, 1_300, None, None).with_args([0x5000, 0, 0]),
        call(2, 1, 1, 1_500, None, None).with_args([0x5000, 0, 0]),
        call(2, 2, 1, 9_000, None, None).with_args([0x5000, 0, 0]),
    ];
    let runs = vec![run(1, Label::Pass, calls, 10_000)];
    let near = near_misses(&runs, &functions, LONGEST_NEAR_MISS_NS);
    let (at, later) = (NoiseAt::Sync { role: 1, step: 1 }, NoiseAt::Sync { role: 2, step: 1 });
    assert_eq!(near, vec![NearMiss { gap_ns: 0, at, later }]);
}

/// Near-miss runs hold only near misses a hold of the level can turn
/// round: the earlier entry longer than its gap, or, in [`PAIR_SHARE`]
/// of them, the later entry too and the earlier until a moment inside
/// that hold (after the gap, before the later is let go); with none,
/// they are random delays.
#[test]
fn near_miss_noise_holds_the_earlier_entry_longer_than_its_gap_or_inside_the_later_s_hold() {
    let (runs, functions) = near_miss_runs();
    let (at, later) = (NoiseAt::Sync { role: 1, step: 1 }, NoiseAt::Sync { role: 2, step: 1 });
    let mut source = NoiseSource::new(LADDER[1], Schedule::NearMiss, &runs[1..], &functions, 4);
    let delay = |n: &Noise| match n.action {
        NoiseAction::Delay { us } if n.near_miss => us,
        _ => panic!("{n:?}"),
    };
    let mut pairs = 0;
    for _ in 0..200 {
        let noise = source.draw();
        assert_eq!(noise[0].at, at, "one near miss to choose");
        match noise.len() {
            1 => assert!((3_050..=4_000).contains(&delay(&noise[0])), "{noise:?} for a 3 ms gap"),
            2 => {
                pairs += 1;
                assert_eq!(noise[1].at, later);
                let (earlier_us, later_us) = (delay(&noise[0]), delay(&noise[1]));
                assert!((50..=4_000).contains(&later_us), "{noise:?}");
                assert!((3_001..=3_000 + later_us).contains(&earlier_us), "{noise:?}");
            }
            _ => panic!("{noise:?}"),
        }
    }
    // 200 draws of a fair coin: outside 70..=130 with probability < 1e-5.
    assert!((70..=130).contains(&pairs), "{pairs} pairs of 200");
    // At 2 ms holds the 3 ms gap cannot be turned round.
    let mut source = NoiseSource::new(LADDER[0], Schedule::NearMiss, &runs[1..], &functions, 4);
    let noise = source.draw();
    assert_eq!(noise.len(), 2, "random delays at the level's two points");
    assert!(noise.iter().all(|n| matches!(n.action, NoiseAction::Delay { us } if us <= 2_000)));
}

/// A near miss of two traced calls on one object is held the first way
/// only: pairs are for locks ([`NearMiss::on_a_lock`]).
#[test]
fn a_near_miss_of_traced_calls_is_never_held_in_pairs() {
    let (runs, functions) = near_miss_runs();
    let mut close = runs[1].clone();
    // The two calls on 0x9000 500 ns apart, not 40 ms, and on an address
    // (0x9000 is below the lowest one: a number).
    for c in close.calls.iter_mut().filter(|c| c.func == 0 && c.args[0] == 0x9000) {
        c.args[0] = 0x9_0000;
        if c.role == 2 {
            (c.entry_ns, c.exit_ns) = (10_000_500, Some(10_000_600));
        }
    }
    close.calls.sort_by_key(|c| c.entry_ns);
    let call = NoiseAt::Call { site: Site { func: 0, role: 1, instance: 1 } };
    let mut source = NoiseSource::new(LADDER[1], Schedule::NearMiss, &[close], &functions, 4);
    assert_eq!(source.near.len(), 2, "{:?}", source.near);
    let mut lock_pairs = 0;
    for _ in 0..200 {
        let noise = source.draw();
        assert!(noise.iter().all(|n| n.near_miss), "{noise:?}");
        let at: Vec<NoiseAt> = noise.iter().map(|n| n.at).collect();
        assert!(!at.contains(&NoiseAt::Call { site: Site { func: 0, role: 2, instance: 1 } }));
        assert!(at.contains(&call), "both near misses held, at 4 points a run: {noise:?}");
        lock_pairs += usize::from(at.contains(&NoiseAt::Sync { role: 2, step: 1 }));
    }
    assert!((70..=130).contains(&lock_pairs), "{lock_pairs} lock pairs of 200");
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
    let (at, later) = (NoiseAt::Sync { role: 1, step: 1 }, NoiseAt::Sync { role: 2, step: 1 });
    assert_eq!(source.near, vec![NearMiss { gap_ns: 500, at, later }]);
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
    for i in 0..60 {
        let noise = source.draw();
        assert_eq!(noise.len(), 3, "the level's two points and one for every thread");
        let NoiseAt::Every { func, holds } = noise[2].at else { panic!("{:?}", noise[2]) };
        assert_eq!(holds, EVERY_HOLDS, "a run of {} threads", seen().threads.len());
        chosen.insert(func);
        // Random delays and PCT in turn: a delay of at most 16 ms in the
        // one, the pool demoted below every change point (at most the
        // level's longest hold) in the other.
        let pct = matches!(noise[0].action, NoiseAction::Demote { .. });
        assert_eq!(pct, i % 2 == 0, "run {i} (after one random): {:?}", noise[0]);
        match noise[2].action {
            NoiseAction::Delay { us } if !pct => {
                assert!((50..=EVERY_MAX_US).contains(&us), "{us} µs");
            }
            NoiseAction::Demote { priority, max_us } if pct => {
                assert_eq!((priority, max_us), (EVERY_PRIORITY, 40_000));
            }
            other => panic!("run {i}: {other:?}"),
        }
    }
    assert_eq!(chosen, BTreeSet::from([5, 6, 7]));
    let at = NoiseAt::Every { func: 6, holds: 12 };
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
    assert_eq!((k, a.kind, a.value, a.retries), (key, ActionKind::DELAY, 900, 12));
    let stop = |func, role, instance| SiteKey { func, role, instance, point: SitePoint::ENTRY };
    assert!(served_by(at, stop(6, 1, 3), true), "any thread, any rank");
    assert!(served_by(at, stop(6, 4, 1), true));
    assert!(!served_by(at, stop(7, 1, 3), true), "another point");
}

/// A thread held with its pool at one point in a PCT run waits for the
/// others at most eight runs without noise beyond the level's longest
/// hold (twostage_100_bad's reader starts 8.6 to 65 ms into a run of
/// 7.7 ms without noise, once every writer is held), and never longer than
/// a starvation level's hold.
#[test]
fn a_pool_held_at_one_point_waits_runs_not_the_levels_hold() {
    assert_eq!(every_demote_us(2_000, 7_700), 2_000 + 8 * 7_700);
    assert_eq!(every_demote_us(16_000, 500_000), EVERY_DEMOTE_MAX_US);
    assert_eq!(EVERY_DEMOTE_MAX_US, LADDER[4].max_delay_us, "the starvation level's hold");
    assert_eq!(every_demote_us(1_000_000, 7_700), 1_000_000, "the starvation level's own");
    assert_eq!(every_demote_us(2_000, 0), 2_000, "no run seen without noise");
    let level = Level { sites: 1, max_delay_us: 2_000, starve: false };
    let mut natural = seen();
    natural.outcome.wall_ns = 7_700_000;
    let mut source = NoiseSource::new(level, Schedule::Pct, &[natural], &[], 5);
    source.hold_every_at(vec![5]);
    for _ in 0..10 {
        let noise = source.draw();
        let [change, every] = &noise[..] else { panic!("{noise:?}") };
        assert_eq!(change.action, NoiseAction::Demote { priority: 1, max_us: 2_000 });
        let max_us = 2_000 + 8 * 7_700;
        assert_eq!(every.action, NoiseAction::Demote { priority: EVERY_PRIORITY, max_us });
    }
}

/// Noise for every thread at one point holds each thread of the largest
/// pool a run showed once: reorder_10_bad's nine setters all stand
/// before their stores (with eight, the ninth stores both values and no
/// check can see a torn pair again), bounded for a program of hundreds
/// of threads, and eight for a point in the loop of a few threads.
#[test]
fn every_thread_of_the_largest_pool_is_held_once() {
    assert_eq!((every_holds(0), every_holds(3), every_holds(8)), (8, 8, 8));
    assert_eq!((every_holds(11), every_holds(101), every_holds(300)), (11, 101, 128));
    let level = Level { sites: 1, max_delay_us: 2_000, starve: false };
    let pool = |n: u32| {
        let calls = (1..=n).map(|role| call(0, role, 1, 0, Some(1), Some(0))).collect();
        run(2, Label::Pass, calls, 1)
    };
    let holds = |source: &mut NoiseSource| match source.draw().last().map(|n| n.at) {
        Some(NoiseAt::Every { holds, .. }) => holds,
        other => panic!("{other:?}"),
    };
    let mut source = NoiseSource::new(level, Schedule::Random, &[seen(), pool(10)], &[], 3);
    source.hold_every_at(vec![5]);
    assert_eq!(holds(&mut source), 11, "ten workers and main");
    source.learn_from(&pool(30), &[], &[]);
    assert_eq!(holds(&mut source), 31);
    source.learn_from(&pool(5), &[], &[]);
    assert_eq!(holds(&mut source), 31, "the largest pool seen");
}

/// With the C library's `exit` among the sync points and a run seen
/// that created a thread it never joined, about half the runs (a fixed
/// seed: 100 of 200) also hold every thread that calls it at the
/// lowest priority, for at most the run's other holds, one more, and
/// the longest run seen without noise (7 ms here; at most
/// [`EXIT_RUN_MAX_US`]); without such a run (seen, or learnt from), or
/// without `exit`, none do.
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
    unjoined.outcome.wall_ns = 7_000_000;
    let mut source = NoiseSource::new(level, Schedule::All, &[unjoined.clone()], &functions, 13);
    let mut with_exit = 0;
    for _ in 0..200 {
        let noise = source.draw();
        let (held, others): (Vec<&Noise>, Vec<&Noise>) =
            noise.iter().partition(|n| matches!(n.at, NoiseAt::Every { func: 3, .. }));
        assert_eq!(others.len(), 2, "{noise:?}");
        let Some(h) = held.first() else { continue };
        with_exit += 1;
        let bound: u64 = others.iter().map(|n| hold_us(n.action)).sum::<u64>() + 2_000 + 7_000;
        assert_eq!(h.action, NoiseAction::Demote { priority: OUTLIVE, max_us: bound });
        let (k, a, _) = Plan::default().with_noise(&noise).actions[2];
        assert_eq!((k, a.kind, a.value), (site_key(h.at), ActionKind::YIELD, 0));
    }
    assert_eq!(with_exit, 100);
    unjoined.outcome.wall_ns = 5_000_000_000;
    let mut slow = NoiseSource::new(level, Schedule::All, &[unjoined.clone()], &functions, 13);
    let bounds: Vec<u64> = (0..20)
        .flat_map(|_| slow.draw())
        .filter_map(|n| match (n.at, n.action) {
            (NoiseAt::Every { func: 3, .. }, NoiseAction::Demote { max_us, .. }) => Some(max_us),
            _ => None,
        })
        .collect();
    assert!(!bounds.is_empty() && bounds.iter().all(|&b| b <= 4_000 + 2_000 + EXIT_RUN_MAX_US));
    assert!(bounds.iter().all(|&b| b >= EXIT_RUN_MAX_US), "{bounds:?}");
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
            NoiseAt::Call { .. } | NoiseAt::Every { .. } | NoiseAt::Process => None,
        })
        .collect();
    // The most each role reached in one run: 2 on role 1, 1 on role 2,
    // none on main.
    assert_eq!(syncs, vec![(1, 1), (1, 2), (2, 1)]);
}

/// Single-CPU noise is one entry a run, for the whole process: a CPU the
/// agent may use, a new seed each run, nothing installed in the kernel
/// and no stop served by it; however strong the level, it holds nothing.
#[test]
fn one_cpu_noise_is_the_process_on_one_of_the_cpus() {
    let allowed = crate::sys::sched::allowed_cpus();
    let mut source =
        NoiseSource::new(Schedule::OneCpu.strongest_level(), Schedule::OneCpu, &[seen()], &[], 5);
    source.hold_every_at(vec![5]);
    let mut seeds = BTreeSet::new();
    for _ in 0..20 {
        let noise = source.draw();
        let [n] = &noise[..] else { panic!("{noise:?}") };
        let NoiseAction::OneCpu { cpu, seed } = n.action else { panic!("{n:?}") };
        assert_eq!(n.at, NoiseAt::Process);
        assert!(allowed.contains(&cpu), "{cpu} of {allowed:?}");
        assert_eq!(hold_us(n.action), 0);
        seeds.insert(seed);
        let plan = Plan::default().with_noise(&noise);
        assert!(plan.actions.is_empty() && plan.sync_points);
        assert_eq!(plan.noise, noise, "recorded with the run");
        let stop = SiteKey { func: u32::MAX, role: 0, instance: 0, point: SitePoint::ENTRY };
        assert!(!served_by(n.at, stop, false) && !served_by(n.at, stop, true));
    }
    assert_eq!(seeds.len(), 20);
}
