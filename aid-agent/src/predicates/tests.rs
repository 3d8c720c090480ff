//! Extraction on hand-built runs: one test per per-call predicate kind,
//! each asserting the exact catalog learned, its conditions, interventions
//! and anchors (pairwise kinds: `tests_pairs.rs`, which uses the helpers
//! here; group kinds: `tests_groups.rs`). Durations are in
//! microseconds: predicates need a real gap ([`Margin`]).

use super::*;
use crate::model::{
    Call, CallSet, Function, Label, REEXECUTE_RETRIES as RETRIES, ValueKind, ValueTest,
    testing::{call, function, run},
};

/// Microseconds.
pub(super) const US: u64 = 1000;

pub(super) fn func(id: u32, name: &str, ret: ValueKind, params: &[ValueKind]) -> Function {
    function(id, name).with_ret(ret).with_params(params)
}

pub(super) fn with_args(c: Call, args: [i64; 3]) -> Call {
    c.with_args(args)
}

pub(super) fn learn_default(s: &Session) -> Catalog {
    learn(s, &ExtractConfig::default()).unwrap()
}

pub(super) fn keys(c: &Catalog) -> Vec<PredKey> {
    c.predicates.iter().map(|p| p.key).collect()
}

pub(super) fn site(func: u32, role: u32, instance: u32) -> Site {
    Site { func, role, instance }
}

fn key(kind: Kind, func: u32, role: u32, instance: u32) -> PredKey {
    PredKey::at(kind, site(func, role, instance))
}

fn retry(site: Site, negative: bool, zero: bool, fallback: Option<i64>) -> Intervention {
    Intervention::Reexecute {
        calls: CallSet::site(site),
        test: ValueTest::Error { negative, zero },
        retries: RETRIES,
        fallback,
    }
}

#[test]
fn wrong_and_error_returns() {
    let functions = vec![func(0, "read_config", ValueKind::Signed, &[])];
    let ok = |id, label| run(id, label, vec![call(0, 0, 1, 10, Some(20), Some(0))], 100);
    let s = Session {
        functions,
        runs: vec![
            ok(0, Label::Pass),
            ok(1, Label::Pass),
            run(2, Label::Fail, vec![call(0, 0, 1, 10, Some(20), Some(-5))], 100),
        ],
    };
    let c = learn_default(&s);
    assert_eq!(
        keys(&c),
        vec![PredKey::failure(), key(Kind::RetDiffers, 0, 0, 1), key(Kind::ErrorReturn, 0, 0, 1)]
    );
    let ret = &c.predicates[1];
    assert_eq!(ret.condition, Condition::RetNot { value: 0 });
    assert_eq!(
        ret.intervention,
        Some(Intervention::OverrideReturn { site: site(0, 0, 1), value: 0 })
    );
    assert_eq!(ret.anchor, Anchor::Exit);
    assert_eq!(
        ret.description,
        "call 1 of read_config on main returns a value other than 0, which every passing run returned"
    );
    let err = &c.predicates[2];
    assert_eq!(err.condition, Condition::ErrorValue { negative: true, zero: false });
    // An error: run the call again (its value is then genuine), falling
    // back to the value passing runs returned.
    assert_eq!(err.intervention, Some(retry(site(0, 0, 1), true, false, Some(0))));
    assert_eq!(
        err.intervention_text,
        "re-execute call 1 of read_config on main whenever it returns a negative value (up to 8 times, then make it return 0)"
    );
    let t = c.evaluate(&s.runs[2]);
    assert_eq!(t.held, vec![(PredId(0), 100), (PredId(1), 20), (PredId(2), 20)]);
    assert!(c.evaluate(&s.runs[0]).held.is_empty());
}

#[test]
fn null_pointer_is_an_error_and_varying_values_give_no_ret_predicate() {
    let functions = vec![func(0, "lookup", ValueKind::Pointer, &[])];
    let r = |id, label, v| run(id, label, vec![call(0, 0, 1, 10, Some(20), Some(v))], 100);
    let s = Session {
        functions,
        runs: vec![r(0, Label::Pass, 0x5000), r(1, Label::Pass, 0x6000), r(2, Label::Fail, 0)],
    };
    let c = learn_default(&s);
    // Passing runs returned different addresses: no "the value every
    // passing run returned", so only the NULL predicate. Its negation
    // re-executes the call and never falls back to an address another run
    // returned: pointers do not travel between runs (ASLR).
    assert_eq!(keys(&c), vec![PredKey::failure(), key(Kind::ErrorReturn, 0, 0, 1)]);
    assert_eq!(c.predicates[1].condition, Condition::ErrorValue { negative: false, zero: true });
    assert_eq!(c.predicates[1].intervention, Some(retry(site(0, 0, 1), false, true, None)));
}

#[test]
fn too_slow_and_too_fast() {
    let functions =
        vec![func(0, "flush", ValueKind::Void, &[]), func(1, "poll", ValueKind::Signed, &[])];
    // flush takes 100-120 µs and poll 50-60 µs when the run passes.
    let r = |id, label, flush: u64, poll: u64| {
        run(
            id,
            label,
            vec![
                call(0, 1, 1, 1000 * US, Some((1000 + flush) * US), None),
                call(1, 1, 1, 2000 * US, Some((2000 + poll) * US), Some(1)),
            ],
            5000 * US,
        )
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, 100, 60),
            r(1, Label::Pass, 120, 50),
            r(2, Label::Fail, 200, 10),
        ],
    };
    let c = learn_default(&s);
    assert_eq!(
        keys(&c),
        vec![PredKey::failure(), key(Kind::TooSlow, 0, 1, 1), key(Kind::TooFast, 1, 1, 1)]
    );
    let slow = &c.predicates[1];
    // Halfway between the slowest passing run (120) and the failing one (200).
    assert_eq!(
        slow.condition,
        Condition::LongerThan { max_ns: 160 * US, passing_ns: 120 * US, failing_ns: 200 * US }
    );
    // Void: premature return needs no value.
    assert_eq!(
        slow.intervention,
        Some(Intervention::ReturnEarly { site: site(0, 1, 1), value: 0 })
    );
    assert_eq!(
        slow.description,
        "call 1 of flush on worker runs too slow: longer than 160 µs (slowest passing run 120 µs, fastest failing run 200 µs)"
    );
    let fast = &c.predicates[2];
    assert_eq!(
        fast.condition,
        Condition::ShorterThan { min_ns: 30 * US, passing_ns: 50 * US, failing_ns: 10 * US }
    );
    assert_eq!(
        fast.intervention,
        Some(Intervention::DelayExit { site: site(1, 1, 1), delay_us: 50 })
    );
    let t = c.evaluate(&s.runs[2]);
    assert_eq!(
        t.held,
        vec![(PredId(0), 5000 * US), (PredId(1), 1120 * US + 1), (PredId(2), 2010 * US)]
    );
    assert_eq!(slow.anchor, Anchor::Overrun);
}

/// A call an exception ended has no duration: its end is when the
/// exception was caught, or a bound. Slow in the failing run only because
/// of that, it is no "runs too slow"; ended early in a passing run, it
/// neither sets the passing minimum nor makes the site unfinished; and
/// the failing run's call that returned fast is still "too fast".
#[test]
fn a_call_an_exception_ended_has_no_duration() {
    let functions = vec![func(0, "parse", ValueKind::Signed, &[])];
    let r = |id, label, calls| run(id, label, calls, 5000 * US);
    let parse = |k: u32, d: u64| {
        call(0, 0, k, 1000 * u64::from(k) * US, Some((1000 * u64::from(k) + d) * US), Some(1))
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, vec![parse(1, 100), parse(2, 5).unwound()]),
            r(1, Label::Pass, vec![parse(1, 120), parse(2, 100)]),
            r(2, Label::Fail, vec![parse(1, 900).unwound(), parse(2, 10)]),
        ],
    };
    let c = learn_default(&s);
    assert_eq!(keys(&c), vec![PredKey::failure(), key(Kind::TooFast, 0, 0, 2)]);
}

/// A duration a hair outside the passing range is noise, not a
/// behaviour: the margin is the larger of 20 µs and 25 % of the passing
/// extreme.
#[test]
fn durations_need_a_real_gap() {
    let functions = vec![func(0, "hash", ValueKind::Signed, &[])];
    let r = |id, label, d: u64| run(id, label, vec![call(0, 0, 1, 0, Some(d), Some(0))], 10 * US);
    // 3.151 µs vs 3.156 µs: the 5 ns of the issue that motivated this.
    let tiny = Session {
        functions: functions.clone(),
        runs: vec![r(0, Label::Pass, 3156), r(1, Label::Pass, 3300), r(2, Label::Fail, 3151)],
    };
    assert_eq!(keys(&learn_default(&tiny)), vec![PredKey::failure()]);
    // 25 % over a 1 ms maximum is needed: 1.2 ms is not, 1.3 ms is.
    let ms = |d| r(0, Label::Pass, d);
    let close = Session {
        functions: functions.clone(),
        runs: vec![ms(900 * US), ms(1000 * US), r(2, Label::Fail, 1200 * US)],
    };
    assert_eq!(keys(&learn_default(&close)), vec![PredKey::failure()]);
    let far = Session {
        functions,
        runs: vec![ms(900 * US), ms(1000 * US), r(2, Label::Fail, 1300 * US)],
    };
    assert_eq!(keys(&learn_default(&far)), vec![PredKey::failure(), key(Kind::TooSlow, 0, 0, 1)]);
}

/// An injected delay is never a cause: the agent records the random
/// delays it injects (and its own stops) as pauses of the thread, and
/// durations leave them out.
#[test]
fn an_injected_delay_never_becomes_a_predicate() {
    let functions = vec![func(0, "withdraw", ValueKind::Signed, &[])];
    let r = |id, label, pause: Option<u64>| {
        let mut run = run(id, label, vec![call(0, 0, 1, 0, Some(100 * US), Some(0))], 10_000 * US);
        if let Some(d) = pause {
            // 5 ms of noise inside the call (the call took 5.1 ms).
            run.calls[0].exit_ns = Some(100 * US + d);
            run.pauses = vec![crate::model::Pause { role: 0, at_ns: 50 * US, dur_ns: d }];
            crate::model::apply_pauses(&mut run.calls, &run.pauses);
        }
        run
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, None),
            r(1, Label::Pass, None),
            r(2, Label::Fail, Some(5_000 * US)),
        ],
    };
    assert_eq!(keys(&learn_default(&s)), vec![PredKey::failure()]);
}

#[test]
fn a_call_cut_off_by_the_end_of_the_run_is_too_slow_from_its_entry() {
    let functions = vec![func(0, "wait", ValueKind::Signed, &[])];
    let done =
        |id| run(id, Label::Pass, vec![call(0, 0, 1, 10 * US, Some(50 * US), Some(0))], 100 * US);
    let cut = run(2, Label::Fail, vec![call(0, 0, 1, 10 * US, None, None)], 500 * US);
    let s = Session { functions, runs: vec![done(0), done(1), cut] };
    let c = learn_default(&s);
    assert_eq!(keys(&c), vec![PredKey::failure(), key(Kind::TooSlow, 0, 0, 1)]);
    // Passing runs all returned 0: premature return with 0.
    assert_eq!(
        c.predicates[1].intervention,
        Some(Intervention::ReturnEarly { site: site(0, 0, 1), value: 0 })
    );
    assert_eq!(c.evaluate(&s.runs[2]).anchor(PredId(1)), Some(50 * US + 1));
}

#[test]
fn passing_runs_that_end_inside_a_call_disable_too_slow() {
    let functions = vec![func(0, "wait", ValueKind::Signed, &[])];
    let s = Session {
        functions,
        runs: vec![
            run(0, Label::Pass, vec![call(0, 0, 1, 10 * US, Some(50 * US), Some(0))], 100 * US),
            run(1, Label::Pass, vec![call(0, 0, 1, 10 * US, None, None)], 100 * US),
            run(2, Label::Fail, vec![call(0, 0, 1, 10 * US, Some(900 * US), Some(0))], 1000 * US),
        ],
    };
    assert_eq!(keys(&learn_default(&s)), vec![PredKey::failure()]);
}

#[test]
fn call_counts_outside_the_passing_range() {
    let functions = vec![
        func(0, "retry", ValueKind::Signed, &[]),
        func(1, "log", ValueKind::Void, &[]),
        func(2, "panic_hook", ValueKind::Void, &[]),
    ];
    let calls = |n: u32, log: bool, hook: bool| {
        let mut v: Vec<Call> = (1..=n)
            .map(|i| call(0, 1, i, u64::from(i) * 100, Some(u64::from(i) * 100 + 10), Some(0)))
            .collect();
        if log {
            v.push(call(1, 0, 1, 5, Some(6), None));
        }
        if hook {
            v.push(call(2, 0, 1, 900, Some(910), None));
        }
        v
    };
    let s = Session {
        functions,
        runs: vec![
            run(0, Label::Pass, calls(2, true, false), 1000),
            run(1, Label::Pass, calls(3, true, false), 1000),
            run(2, Label::Fail, calls(5, true, false), 1000),
            run(3, Label::Fail, calls(1, false, true), 1000),
        ],
    };
    let c = learn_default(&s);
    let count = |kind, f, r| PredKey::at(kind, site(f, r, 0));
    assert_eq!(
        keys(&c),
        vec![
            PredKey::failure(),
            count(Kind::CountAbove, 0, 1),
            count(Kind::CountAbove, 2, 0),
            count(Kind::CountBelow, 0, 1),
            count(Kind::NeverCalled, 1, 0),
        ]
    );
    assert_eq!(c.predicates[1].condition, Condition::CountAbove { max: 3 });
    assert_eq!(
        c.predicates[1].description,
        "retry is called more than 3 times on worker (passing runs: 2-3)"
    );
    assert_eq!(c.predicates[2].condition, Condition::CountAbove { max: 0 });
    assert_eq!(
        c.predicates[2].description,
        "panic_hook is called on main, which no passing run does"
    );
    assert_eq!(c.predicates[3].condition, Condition::CountBelow { min: 2 });
    assert_eq!(
        c.predicates[4].description,
        "log is never called on main (passing runs call it 1 times)"
    );
    assert!(c.predicates.iter().all(|p| p.intervention.is_none()));
    // Anchors: the 4th call (first one past the maximum) and the run's end.
    let t = c.evaluate(&s.runs[2]);
    assert_eq!(t.held, vec![(PredId(0), 1000), (PredId(1), 400)]);
    let t = c.evaluate(&s.runs[3]);
    assert_eq!(
        t.held,
        vec![(PredId(0), 1000), (PredId(2), 900), (PredId(3), 1000), (PredId(4), 1000)]
    );
}

#[test]
fn evaluating_a_new_run_uses_the_learned_baseline() {
    let functions = vec![func(0, "flush", ValueKind::Signed, &[])];
    let r = |id, label, d: u64, v| {
        run(id, label, vec![call(0, 0, 1, 0, Some(d * US), Some(v))], 1000 * US)
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, 100, 0),
            r(1, Label::Pass, 120, 0),
            r(2, Label::Fail, 300, -1),
        ],
    };
    let c = learn_default(&s);
    let slow = c.find(&key(Kind::TooSlow, 0, 0, 1)).unwrap();
    let err = c.find(&key(Kind::ErrorReturn, 0, 0, 1)).unwrap();
    // An intervened run: the override fixed the value, the call is still slow.
    let mut new = r(9, Label::Pass, 500, 0);
    new.calls[0].ret = Some(0);
    let t = c.evaluate_only(&new, &BTreeSet::from([slow, err]));
    assert!(!t.failed);
    assert_eq!(t.held_ids(), BTreeSet::from([slow]));
    assert!(t.observed(err) && !t.holds(err));
    // A run that never reaches the site: unobserved, not held.
    let empty = run(10, Label::Fail, vec![], 50);
    let t = c.evaluate(&empty);
    assert!(!t.observed(slow));
    assert_eq!(t.held_ids(), BTreeSet::from([c.failure()]));
}

#[test]
fn internal_functions_and_incomplete_runs_are_ignored() {
    let mut functions = vec![
        func(0, "work", ValueKind::Signed, &[]),
        func(1, "pthread_create", ValueKind::Signed, &[]),
    ];
    functions[1].internal = true;
    let r = |id, label, v| {
        run(
            id,
            label,
            vec![call(0, 0, 1, 0, Some(10), Some(0)), call(1, 0, 1, 20, Some(30), Some(v))],
            100,
        )
    };
    let mut broken = r(3, Label::Fail, -1);
    broken.complete = false;
    broken.calls[0].ret = Some(7);
    let s = Session {
        functions,
        runs: vec![r(0, Label::Pass, 0), r(1, Label::Pass, 0), r(2, Label::Fail, -1), broken],
    };
    let c = learn_default(&s);
    assert_eq!(keys(&c), vec![PredKey::failure()]);
    assert_eq!((c.passing_runs, c.failing_runs), (2, 1));
}

#[test]
fn bad_sessions_are_one_line_errors() {
    let functions = vec![func(0, "work", ValueKind::Signed, &[])];
    let pass = run(0, Label::Pass, vec![call(0, 0, 1, 0, Some(10), Some(0))], 100);
    let fail = run(1, Label::Fail, vec![call(0, 0, 1, 0, Some(10), Some(0))], 100);
    let only_pass = Session { functions: functions.clone(), runs: vec![pass.clone()] };
    assert!(matches!(
        learn(&only_pass, &ExtractConfig::default()),
        Err(PredicateError::NoFailingRuns)
    ));
    let only_fail = Session { functions: functions.clone(), runs: vec![fail.clone()] };
    let err = learn(&only_fail, &ExtractConfig::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no passing runs: predicates compare failing runs with passing ones, record runs until some pass"
    );
    let mut bad = fail.clone();
    bad.calls[0].func = 7;
    let s = Session { functions, runs: vec![pass, bad] };
    assert!(matches!(
        learn(&s, &ExtractConfig::default()),
        Err(PredicateError::UnknownFunction { run: 1, func: 7 })
    ));
}

#[test]
fn zero_as_error_is_configurable() {
    let functions = vec![func(0, "try_lock", ValueKind::Bool, &[])];
    let r = |id, label, v| run(id, label, vec![call(0, 0, 1, 0, Some(10), Some(v))], 100);
    let s = Session {
        functions,
        runs: vec![r(0, Label::Pass, 1), r(1, Label::Pass, 1), r(2, Label::Fail, 0)],
    };
    assert_eq!(keys(&learn_default(&s)), vec![PredKey::failure(), key(Kind::RetDiffers, 0, 0, 1)]);
    let cfg = ExtractConfig {
        error: ErrorClass { zero: true, ..ErrorClass::default() },
        ..ExtractConfig::default()
    };
    let c = learn(&s, &cfg).unwrap();
    assert_eq!(
        keys(&c),
        vec![PredKey::failure(), key(Kind::RetDiffers, 0, 0, 1), key(Kind::ErrorReturn, 0, 0, 1)]
    );
    assert_eq!(c.predicates[2].intervention, Some(retry(site(0, 0, 1), false, true, Some(1))));
}

#[test]
fn keys_are_stable_across_learning_and_serialise() {
    let functions = vec![func(0, "flush", ValueKind::Signed, &[])];
    let r = |id, label, v| run(id, label, vec![call(0, 0, 1, 0, Some(10), Some(v))], 100);
    let s = Session { functions, runs: vec![r(0, Label::Pass, 0), r(1, Label::Fail, 3)] };
    let a = learn_default(&s);
    let json = serde_json::to_string(&a).unwrap();
    let mut b: Catalog = serde_json::from_str(&json).unwrap();
    b.reindex();
    assert_eq!(keys(&a), keys(&b));
    assert_eq!(b.find(&key(Kind::RetDiffers, 0, 0, 1)), Some(PredId(1)));
    assert_eq!(key(Kind::RetDiffers, 0, 0, 1).to_string(), "ret_differs:f0/r0/#1");
}

/// `main`'s return value is the exit status the run is judged by: a
/// predicate on it would restate the failure, never explain it.
#[test]
fn the_failure_restated_is_no_predicate() {
    let functions =
        vec![func(0, "main", ValueKind::Signed, &[]), func(1, "check", ValueKind::Signed, &[])];
    let r = |id, label, v: i64| {
        run(
            id,
            label,
            vec![call(0, 0, 1, 0, Some(100), Some(v)), call(1, 0, 1, 10, Some(20), Some(v))],
            200,
        )
    };
    let s = Session {
        functions,
        runs: vec![r(0, Label::Pass, 0), r(1, Label::Pass, 0), r(2, Label::Fail, 1)],
    };
    assert_eq!(keys(&learn_default(&s)), vec![PredKey::failure(), key(Kind::RetDiffers, 1, 0, 1)]);
    let cfg = ExtractConfig { restates_failure: [1].into(), ..ExtractConfig::default() };
    assert_eq!(keys(&learn(&s, &cfg).unwrap()), vec![PredKey::failure()]);
}

/// Arguments that carry meaning: a call that receives a value no passing
/// run passed to it. Pointer arguments are addresses and never compared.
#[test]
fn argument_differs_from_every_passing_run() {
    let functions =
        vec![func(0, "set_mode", ValueKind::Void, &[ValueKind::Signed, ValueKind::Pointer])];
    let r = |id, label, mode: i64, p: i64| {
        run(id, label, vec![call(0, 0, 1, 10, Some(20), None).with_args([mode, p, 0])], 100)
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, 2, 0x5000_0000),
            r(1, Label::Pass, 2, 0x6000_0000),
            r(2, Label::Fail, 3, 0x7000_0000),
        ],
    };
    let c = learn_default(&s);
    let k = PredKey { arg: 0, ..key(Kind::ArgDiffers, 0, 0, 1) };
    assert_eq!(keys(&c), vec![PredKey::failure(), k]);
    let p = &c.predicates[1];
    assert_eq!(p.condition, Condition::ArgNot { value: 2 });
    assert_eq!((p.anchor, p.intervention.as_ref()), (Anchor::Entry, None));
    assert_eq!(
        p.description,
        "call 1 of set_mode on main receives argument 1 other than 2, which every passing run passed"
    );
    assert_eq!(c.evaluate(&s.runs[2]).anchor(PredId(1)), Some(10));
}
