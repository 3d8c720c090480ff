//! The amplification ladder's unit tests, on hand-built runs.

use super::*;
use crate::{
    intervene::noise::STARVE_FROM_US,
    model::{
        Label, Outcome,
        testing::{call, function, run},
    },
};

/// Says "failures are rare" after the natural runs whose failures are
/// at `failing` (0-based), at the run it says so; None if never.
fn judged_rare_at(failing: &[u32], runs: u32) -> Option<u32> {
    let functions = vec![function(0, "read")];
    let (mut a, _) = Amplifier::new(0.05, 40, Schedule::Random, 1, "run", None, &functions);
    for i in 0..runs {
        let label = if failing.contains(&i) { Label::Fail } else { Label::Pass };
        let r = run(i + 1, label, vec![call(0, 0, 1, 10, Some(20), Some(0))], 100);
        let v = a.learn(&r, &[], &functions);
        if v.say.iter().any(|l| l.starts_with("failures are rare (")) {
            return Some(i + 1);
        }
    }
    None
}

/// The ladder on a program that never fails, until it is done (at
/// most 1000 runs): the runs made, what it said at which run, and the
/// runs from which noise acts at the statement points.
fn never_failing(functions: &[Function]) -> Ladder {
    never_failing_drawn(functions, Schedule::Random).0
}

/// Runs made, lines said (at run), runs the statements turned on at.
type Ladder = (u32, Vec<(u32, String)>, Vec<u32>);

/// The same, with each run's noise.
fn never_failing_drawn(functions: &[Function], schedule: Schedule) -> (Ladder, Vec<Vec<Noise>>) {
    let (mut a, _) = Amplifier::new(0.05, 40, schedule, 1, "run", None, functions);
    let (mut said, mut turned, mut drawn) = (Vec::new(), Vec::new(), Vec::new());
    let mut n = 0;
    while !a.exhausted() && n < 1000 {
        n += 1;
        drawn.push(a.draw());
        let r = run(n, Label::Pass, vec![call(0, 0, 1, 10, Some(20), Some(0))], 100);
        let v = a.learn(&r, &[], functions);
        if v.statements {
            turned.push(n);
        }
        said.extend(v.say.into_iter().map(|l| (n, l)));
    }
    ((n, said, turned), drawn)
}

/// A program that never fails: the ladder's five levels, then around
/// again from its start while the search's budget holds a level (the
/// 400 runs of [`SEARCH_RUNS`]: twice), then nothing more to try.
#[test]
fn the_ladder_is_climbed_again_while_the_budget_holds_a_level() {
    let (n, said, _) = never_failing(&[function(0, "read")]);
    assert_eq!(n, 40 + SEARCH_RUNS, "{said:#?}");
    let again: Vec<u32> =
        said.iter().filter(|(_, l)| l.contains("the ladder again")).map(|e| e.0).collect();
    assert_eq!(again, vec![240], "{said:#?}");
    assert_eq!(
        said.iter().find(|(at, _)| *at == 240).map(|e| e.1.as_str()),
        Some(
            "still rare with that noise (0 of 40 runs): the ladder again from its start, with new random draws (2 per run, holds up to 2 ms)"
        )
    );
    assert_eq!(said.len(), 1 + 9, "rare, 4 stronger, again, 4 stronger: {said:#?}");
}

/// A program that failed once, in a run without noise: the failure
/// happens under the probes, so when the 400 runs of [`SEARCH_RUNS`] are
/// spent the ladder goes around twice more ([`MORE_SEARCH_RUNS`]), said
/// once; a program that never failed stops at 440 (above).
#[test]
fn a_session_that_saw_the_failure_searches_longer() {
    let (n, said, a) = searching(Some(5), 0);
    assert_eq!(n, 40 + SEARCH_RUNS + MORE_SEARCH_RUNS, "{said:#?}");
    assert_eq!(
        went_on(&said),
        [(
            40 + SEARCH_RUNS,
            "1 run of this session failed so far: the failure happens under aid's probes, so the search goes on for up to 400 runs more"
        )]
    );
    assert_eq!(a.more_runs(), MORE_SEARCH_RUNS);
    let again: Vec<u32> =
        said.iter().filter(|(_, l)| l.contains("the ladder again")).map(|e| e.0).collect();
    assert_eq!(again, vec![240, 440, 640], "{said:#?}");
}

/// The ladder until it is done (at most 2000 runs) on a program whose
/// run `fails` (1-based) alone fails, its runs taking `wall_ns` each (0:
/// not known): the runs made, what was said at which run, and the
/// amplifier.
fn searching(fails: Option<u32>, wall_ns: u64) -> (u32, Vec<(u32, String)>, Amplifier) {
    let functions = [function(0, "read")];
    let (mut a, _) = Amplifier::new(0.05, 40, Schedule::Random, 1, "run", None, &functions);
    let (mut n, mut said) = (0, Vec::new());
    while !a.exhausted() && n < 2000 {
        n += 1;
        let _ = a.draw();
        let label = if fails == Some(n) { Label::Fail } else { Label::Pass };
        let r = run(n, label, vec![call(0, 0, 1, 10, Some(20), Some(0))], 100)
            .with_outcome(Outcome { wall_ns, ..Outcome::default() });
        said.extend(a.learn(&r, &[], &functions).say.into_iter().map(|l| (n, l)));
    }
    (n, said, a)
}

/// What was said, at which run, of the search going on.
fn went_on(said: &[(u32, String)]) -> Vec<(u32, &str)> {
    said.iter()
        .filter(|(_, l)| l.contains("the search goes on"))
        .map(|(n, l)| (*n, l.as_str()))
        .collect()
}

/// A program that never fails, its runs short (5 ms, at most
/// [`SHORT_RUN_NS`]): when the 400 runs of [`SEARCH_RUNS`] are spent the
/// ladder goes around twice more ([`MORE_SEARCH_RUNS`]), said once; with
/// runs of 150 ms, or of no known wall time (the other tests here), it
/// stops at 440.
#[test]
fn a_session_of_short_runs_searches_longer_without_a_failure() {
    let (n, said, _) = searching(None, 5_000_000);
    assert_eq!(n, 40 + SEARCH_RUNS + MORE_SEARCH_RUNS, "{said:#?}");
    assert_eq!(
        went_on(&said),
        [(
            40 + SEARCH_RUNS,
            "no run has failed yet, and they are short (5 ms on average): the search goes on for up to 400 runs more"
        )]
    );
    let (n, said, _) = searching(None, 150_000_000);
    assert_eq!(n, 40 + SEARCH_RUNS, "{said:#?}");
    assert!(went_on(&said).is_empty(), "{said:#?}");
}

/// With statement points in the session, the ladder's second pass
/// also acts at them, said once, and the verdict tells the source
/// (it attaches them to the noisy runs from then on).
#[test]
fn the_second_pass_adds_the_statement_points() {
    let mut point = function(1, "read at r.c:12");
    point.internal = true;
    point.probe = Probe::Statement;
    let ((_, said, turned), drawn) =
        never_failing_drawn(&[function(0, "read"), point], Schedule::Random);
    assert_eq!(turned, vec![240]);
    assert_eq!(
        said.iter().find(|(at, _)| *at == 240).map(|e| e.1.as_str()),
        Some(
            "still rare with that noise (0 of 40 runs): the ladder again from its start, now also at 1 statement inside the traced functions (a window between two statements of one function has no call or lock to hold a thread at), and each run holding every thread that reaches one of them, with new random draws (2 per run, holds up to 2 ms)"
        )
    );
    // Runs 41 to 240 (the first pass, noisy): no point holds every
    // thread; from run 241 on, each run has one, at the statement.
    let every = |noise: &Vec<Noise>| {
        noise.iter().filter(|n| matches!(n.at, NoiseAt::Every { func: 1, .. })).count()
    };
    assert!(drawn[40..240].iter().all(|n| every(n) == 0));
    assert!(drawn[240..].iter().all(|n| every(n) == 1), "{:?}", &drawn[240..242]);
}

/// Asked to act at the statement points from the start (the campaign's
/// session after one that provoked the failure without them), the first
/// noisy level already holds every thread at one of them, and the ladder
/// never says it adds them (nor tells the source again).
#[test]
fn statements_from_the_start_are_in_the_first_noisy_level() {
    let mut point = function(1, "read at r.c:12");
    point.internal = true;
    point.probe = Probe::Statement;
    let functions = [function(0, "read"), point];
    let (mut a, _) = Amplifier::new(0.05, 40, Schedule::Random, 1, "run", None, &functions);
    assert!(!a.at_statements());
    assert!(a.at_statements_from_start(&functions));
    assert!(a.at_statements());
    let (mut drawn, mut said, mut turned) = (Vec::new(), Vec::new(), 0);
    for n in 1..=440 {
        drawn.push(a.draw());
        let r = run(n, Label::Pass, vec![call(0, 0, 1, 10, Some(20), Some(0))], 100);
        let v = a.learn(&r, &[], &functions);
        turned += u32::from(v.statements);
        said.extend(v.say);
    }
    let every = |noise: &Vec<Noise>| {
        noise.iter().filter(|n| matches!(n.at, NoiseAt::Every { func: 1, .. })).count()
    };
    assert!(drawn[..40].iter().all(Vec::is_empty), "the natural runs carry no noise");
    assert!(drawn[40..].iter().all(|n| every(n) == 1), "{:?}", &drawn[40..42]);
    assert_eq!(turned, 0);
    assert!(!said.iter().any(|l| l.contains("now also at")), "{said:#?}");
    // Without statement points there is nothing to act at.
    let (mut b, _) =
        Amplifier::new(0.05, 40, Schedule::Random, 1, "run", None, &[function(0, "read")]);
    assert!(!b.at_statements_from_start(&[function(0, "read")]));
    assert!(!b.at_statements());
}

/// Every thread is held at statements of the functions the runs seen
/// called: twostage_100_bad's points in `lock`, `unlock` and the
/// `gnu_dev_*` helpers (never called) were 14 of its 40 and held
/// nothing; with no run calling any, all of them.
#[test]
fn statement_points_are_those_of_the_functions_called() {
    let point = |id, symbol: &str| {
        let mut f = function(id, symbol);
        f.internal = true;
        f.probe = Probe::Statement;
        f
    };
    let functions = [
        function(0, "funcA"),
        function(1, "gnu_dev_major"),
        point(2, "funcA+0x8"),
        point(3, "gnu_dev_major+0x4"),
        point(4, "funcA+0x10"),
    ];
    let seen = run(1, Label::Pass, vec![call(0, 0, 1, 10, Some(20), None)], 100);
    assert_eq!(statement_points(&functions, std::slice::from_ref(&seen)), vec![2, 4]);
    assert_eq!(statement_points(&functions, &[]), vec![2, 3, 4]);
}

/// A program that fails only under one plan of noise, first drawn at
/// run `first` (and, when `natural` is given, once in that run of the
/// natural ones, which carries no noise): what was said at which run,
/// and the runs made, until the ladder is done or focused (at most 2000
/// runs). `replays_fail`: whether the plan fails when replayed.
fn fails_late(natural: Option<u32>, first: u32, replays_fail: bool) -> (u32, Vec<(u32, String)>) {
    let functions = [function(0, "read")];
    let (mut a, _) = Amplifier::new(0.05, 40, Schedule::Random, 1, "run", None, &functions);
    let (mut said, mut plan, mut n) = (Vec::new(), None::<Vec<Noise>>, 0);
    while !a.exhausted() && n < 2000 {
        n += 1;
        let drawn: Vec<Noise> = a
            .draw()
            .into_iter()
            .map(|p| Noise { held_ns: hold_us(p.action) * 1000 + 1, ..p })
            .collect();
        if n == first {
            plan = Some(drawn.clone());
        }
        let failed = n == first
            || natural == Some(n)
            || (replays_fail && n > first && plan.as_ref() == Some(&drawn));
        let label = if failed { Label::Fail } else { Label::Pass };
        let mut r = run(n, label, vec![call(0, 0, 1, 10, Some(20), Some(0))], 100);
        r.noise = drawn;
        let v = a.learn(&r, &[], &functions);
        let focused = v.say.iter().any(|l| l.starts_with("focusing the noise on"));
        said.extend(v.say.into_iter().map(|l| (n, l)));
        if focused {
            break;
        }
    }
    (n, said)
}

/// A failure in the ladder's last block, with no budget left for a
/// replay: its noise is replayed on the reserve
/// ([`LAST_REPLAY_RUNS`]), and focused on when it reproduces; when it
/// does not, the ladder ends after the replay, not a level later. The
/// session failed once before, without noise, so its search had
/// [`MORE_SEARCH_RUNS`] too and its last block ends at run 840.
#[test]
fn a_failure_in_the_last_block_is_replayed_on_the_reserve() {
    let last = 40 + SEARCH_RUNS + MORE_SEARCH_RUNS;
    let (n, said) = fails_late(Some(5), last - 3, true);
    let at = |text: &str| said.iter().find(|(_, l)| l.starts_with(text)).map(|e| e.0);
    assert_eq!(
        at(
            "the failure showed in 1 of 40 runs with that noise: replaying the noise of 1 failing run"
        ),
        Some(last),
        "{said:#?}"
    );
    assert_eq!(at("focusing the noise on"), Some(n));
    assert!(n > last && n <= last + LAST_REPLAY_RUNS, "{n} runs: {said:#?}");
    let (n, said) = fails_late(Some(5), last - 3, false);
    assert_eq!(n, last + REPLAYS, "{said:#?}");
    assert_eq!(
        said.last().map(|e| e.1.as_str()),
        Some("no replayed noise failed in 2 or more of 8 runs: the failures were not its doing")
    );
}

/// The first failure of a session in the last block of [`SEARCH_RUNS`]:
/// the search goes on ([`MORE_SEARCH_RUNS`]), its noise is replayed on
/// those runs and the reserve is kept for the end; when the replays do
/// not reproduce it, the ladder goes around again.
#[test]
fn a_first_failure_in_the_last_block_makes_the_search_go_on() {
    let last = 40 + SEARCH_RUNS;
    let (n, said) = fails_late(None, last - 3, false);
    let at = |text: &str| said.iter().find(|(_, l)| l.starts_with(text)).map(|e| e.0);
    assert_eq!(
        at(
            "1 run of this session failed so far: the failure happens under aid's probes, so the search goes on for up to 400 runs more"
        ),
        Some(last),
        "{said:#?}"
    );
    assert_eq!(at("the failure showed in 1 of 40 runs with that noise"), Some(last));
    assert_eq!(at("no replayed noise failed"), Some(last + REPLAYS));
    assert_eq!(
        at("still rare with that noise (1 of 40 runs): the ladder again from its start"),
        Some(last + REPLAYS),
        "{said:#?}"
    );
    // The replay's 8 runs, then ten levels of 40 (the last one begun
    // with 32 runs of the budget left, and made whole); the reserve was
    // not drawn on.
    assert_eq!(n, last + REPLAYS + MORE_SEARCH_RUNS, "{said:#?}");
}

/// `--amplify starve`: the first noisy runs already starve a thread
/// or two (holds of 1 ms to 1 s), and around the ladder again it
/// starts from starvation too; no millisecond level is tried.
#[test]
fn starving_noise_starts_at_the_starvation_level() {
    let ((n, said, _), drawn) = never_failing_drawn(&[function(0, "read")], Schedule::Starve);
    assert!(n > 80, "{said:#?}");
    assert_eq!(
        said.first().map(|e| e.1.as_str()),
        Some(
            "failures are rare (0 of 40 runs): injecting noise at synchronisation points and traced calls (starvation: random holds, log-uniform from 1 ms; 2 points per run starving their thread for 1 ms to 1 s) to make them more frequent; the runs record it"
        )
    );
    assert!(said.iter().all(|(_, l)| !l.contains("holds up to")), "{said:#?}");
    let holds: Vec<u64> = drawn
        .iter()
        .flatten()
        .filter_map(|n| match n.action {
            NoiseAction::Delay { us } => Some(us),
            _ => None,
        })
        .collect();
    assert!(!holds.is_empty());
    assert!(holds.iter().all(|&us| (STARVE_FROM_US..=1_000_000).contains(&us)), "{holds:?}");
}

/// One or no failure in 40 runs: rare at once. Two (5 %) is not
/// rare yet: rare when the first 80 runs had fewer than 4, not when
/// they had 4. Four in the first 40 (10 %) and none after them: rare
/// once all runs so far fail less than 5 % of the time (4 of 120),
/// judged only at the end of a block (not at run 81). A failure that
/// keeps its rate is never rare.
#[test]
fn natural_runs_are_judged_rare_at_every_block() {
    assert_eq!(judged_rare_at(&[5], 200), Some(40));
    assert_eq!(judged_rare_at(&[5, 30], 200), Some(80));
    assert_eq!(judged_rare_at(&[5, 30, 50], 200), Some(80));
    assert_eq!(judged_rare_at(&[5, 30, 50, 70], 200), Some(120));
    assert_eq!(judged_rare_at(&[1, 2, 3, 4], 200), Some(120));
    let every_tenth: Vec<u32> = (0..400).step_by(10).collect();
    assert_eq!(judged_rare_at(&every_tenth, 400), None);
    let every_twentieth: Vec<u32> = (0..400).step_by(20).collect();
    assert_eq!(judged_rare_at(&every_twentieth, 400), None, "5 % is not below 5 %");
}
