//! Predicates over groups of calls, on hand-built runs shaped like the
//! programs that need them: a thread pool whose workers take different
//! jobs every run, a transient fault whose right value depends on the
//! call, a heartbeat that reaches the server before one of two login
//! messages, a resize racing lookups on a shared table. Each asserts the
//! exact key, condition, intervention and truth.

use super::*;
use crate::model::{
    Call, CallSet, Function, Label, Point, REEXECUTE_RETRIES as RETRIES, Run, Thread, ValueKind,
    ValueTest,
    testing::{call, function, run, thread},
};

const US: u64 = 1000;

fn func(id: u32, name: &str, ret: ValueKind, params: &[ValueKind]) -> Function {
    function(id, name).with_ret(ret).with_params(params)
}

fn site(func: u32, role: u32, instance: u32) -> Site {
    Site { func, role, instance }
}

fn pool_threads() -> Vec<Thread> {
    vec![thread(0, "main"), thread(1, "worker"), thread(2, "worker"), thread(3, "worker")]
}

/// The predicates that hold in every failing run and no passing one.
fn fd(c: &Catalog, s: &Session) -> Vec<PredKey> {
    let truths: Vec<RunTruth> = s.runs.iter().map(|r| c.evaluate(r)).collect();
    c.predicates
        .iter()
        .filter(|p| p.id.0 != 0 && truths.iter().all(|t| t.holds(p.id) == t.failed))
        .map(|p| p.key)
        .collect()
}

/// The key of `kind` over every call of function `func` on the worker
/// threads (class 1), with no second calls, argument or callee.
fn on_workers(kind: Kind, func: u32) -> PredKey {
    PredKey {
        kind,
        func,
        calls: Calls::Group { class: 1, within: None },
        other: None,
        arg: 0,
        callee: None,
    }
}

/// A pool: every job is a `norm` (which looks words up: never NULL in a
/// passing run) or an `intern` (which looks up first: NULL for new words,
/// in every run). Which worker takes which job, and how many, varies. A
/// failing run has one lookup from `norm` return NULL, on some worker.
fn pool_run(id: u32, seed: u64, fail: bool) -> Run {
    let mut calls: Vec<Call> = Vec::new();
    let mut counts = [[0u32; 3]; 4];
    let mut t = [0u64; 4];
    let bad_job = 2 * ((seed % 5) as usize + 1);
    for job in 0..12usize {
        let role = 1 + ((job as u64 + seed) % 3) as u32;
        let r = role as usize;
        let start = t[r] + 5 * US;
        let (outer, results): (u32, Vec<i64>) = if job % 2 == 0 {
            (0, vec![0x5000, 0x5010, if fail && job == bad_job { 0 } else { 0x5020 }])
        } else {
            (2, vec![0, 0x5030])
        };
        counts[r][outer as usize] += 1;
        let end = start + (results.len() as u64 + 1) * 10 * US;
        calls.push(call(outer, role, counts[r][outer as usize], start, Some(end), Some(0x6000)));
        for (k, v) in results.iter().enumerate() {
            counts[r][1] += 1;
            let s = start + (k as u64 + 1) * 10 * US;
            calls.push(call(1, role, counts[r][1], s, Some(s + 2 * US), Some(*v)));
        }
        t[r] = end;
    }
    let end = t.iter().copied().max().unwrap_or(0) + 10 * US;
    let label = if fail { Label::Fail } else { Label::Pass };
    run(id, label, calls, end).with_threads(pool_threads())
}

fn pool_session() -> Session {
    let functions = vec![
        func(0, "norm", ValueKind::Float, &[ValueKind::Pointer]),
        func(1, "lookup", ValueKind::Pointer, &[ValueKind::Pointer]),
        func(2, "intern", ValueKind::Pointer, &[ValueKind::Pointer]),
    ];
    let runs = (0..16).map(|i| pool_run(i, u64::from(i), i % 4 == 1)).collect();
    Session { functions, runs }
}

#[test]
fn a_pool_gets_group_keys_told_apart_by_caller() {
    let s = pool_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    assert_eq!(c.classes.names, vec!["main", "worker"]);
    // No per-call key for the workers: call k on worker#2 is a different
    // job in every run.
    assert!(c.predicates.iter().all(|p| p.key.is_group() || p.key.kind == Kind::Failure));
    let from_norm = PredKey {
        kind: Kind::ErrorReturn,
        func: 1,
        calls: Calls::Group { class: 1, within: Some(0) },
        other: None,
        arg: 0,
        callee: None,
    };
    assert_eq!(fd(&c, &s), vec![from_norm]);
    let p = &c.predicates[c.find(&from_norm).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::ErrorValue { negative: false, zero: true });
    assert_eq!(
        p.description,
        "some call of lookup from norm on the worker threads returns an error: 0 (NULL or false)"
    );
    // Re-execute every lookup from norm, on every worker, that returns
    // NULL: a pointer, so no value from another run to fall back on.
    assert_eq!(
        p.intervention,
        Some(Intervention::Reexecute {
            calls: CallSet { func: 1, roles: vec![1, 2, 3], instance: 0, within: Some(0) },
            test: ValueTest::Error { negative: false, zero: true },
            retries: RETRIES,
            fallback: None,
        })
    );
    assert_eq!(
        p.intervention_text,
        "re-execute every call of lookup from norm on the worker threads whenever it returns 0 (NULL or false) (up to 8 times)"
    );
    // The lookups from intern return NULL in every run: a predicate, not a
    // discriminating one.
    let from_intern = PredKey { calls: Calls::Group { class: 1, within: Some(2) }, ..from_norm };
    assert!(c.find(&from_intern).is_some());
    // Anchor: the NULL lookup's exit, on whichever worker it was.
    let failing = &s.runs[1];
    let null = failing
        .calls
        .iter()
        .find(|x| {
            x.func == 1
                && x.ret == Some(0)
                && x.exit_ns.is_some_and(|e| {
                    failing.calls.iter().any(|o| {
                        o.func == 0
                            && o.role == x.role
                            && o.entry_ns < x.entry_ns
                            && o.exit_ns.unwrap() > e
                    })
                })
        })
        .unwrap();
    assert_eq!(c.evaluate(failing).anchor(p.id), null.exit_ns);
    let structured = &p.described;
    assert_eq!(
        (
            structured.kind.as_str(),
            structured.calls.thread.as_str(),
            structured.calls.within.as_deref()
        ),
        ("error_return", "the worker threads", Some("norm"))
    );
}

/// A fetch whose right value depends on the call: 6 calls on main, each
/// with its own price. A timeout on call 5 is harmless (its fallback is
/// right), on calls 2 or 3 it makes the run fail.
#[test]
fn some_call_returns_a_value_other_than_passing_runs_returned_for_it() {
    let functions = vec![func(0, "fetch", ValueKind::Signed, &[ValueKind::Pointer])];
    let prices = [100, 205, 310, 415, 520, 625];
    let r = |id, label, timeout: Option<usize>| {
        let calls = prices
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                let v = if timeout == Some(k) { -1 } else { p };
                let s = k as u64 * 100 * US;
                call(0, 0, k as u32 + 1, s, Some(s + 10 * US), Some(v))
            })
            .collect();
        run(id, label, calls, 1000 * US)
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, None),
            r(1, Label::Pass, Some(4)),
            r(2, Label::Pass, None),
            r(3, Label::Fail, Some(1)),
            r(4, Label::Fail, Some(2)),
        ],
    };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let group = PredKey {
        kind: Kind::RetDiffers,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: None,
        arg: 0,
        callee: None,
    };
    assert_eq!(fd(&c, &s), vec![group]);
    let p = &c.predicates[c.find(&group).unwrap().0 as usize];
    // Call 5's passing values varied (a harmless timeout): not looked at.
    let expected: Vec<Expected> = [(1, 100), (2, 205), (3, 310), (4, 415), (6, 625)]
        .iter()
        .map(|&(k, v)| (0, k, v))
        .collect();
    assert_eq!(p.condition, Condition::RetNotPerCall { expected: expected.clone() });
    assert_eq!(
        p.description,
        "some call of fetch on main returns a value other than the one every passing run returned for that call"
    );
    // Each call re-executed when it returns anything else, falling back to
    // its own passing value: no single constant repairs them all.
    let each: Vec<Intervention> = expected
        .iter()
        .map(|&(role, instance, value)| Intervention::Reexecute {
            calls: CallSet { func: 0, roles: vec![role], instance, within: None },
            test: ValueTest::NotEqual { value },
            retries: RETRIES,
            fallback: Some(value),
        })
        .collect();
    assert_eq!(p.intervention, Some(Intervention::All { each }));
    assert!(p.intervention_text.starts_with(
        "re-execute each call of fetch on main that returns a value other than the one every passing run returned for that call"
    ));
    // Any error at all is not discriminative (the harmless timeout).
    let errors = PredKey { kind: Kind::ErrorReturn, ..group };
    assert!(c.find(&errors).is_some() && !fd(&c, &s).contains(&errors));
    assert_eq!(c.evaluate(&s.runs[4]).anchor(p.id), Some(210 * US));
}

/// The heartbeat reaches the server before main's second message in some
/// failing runs and before its first in others: no single pair of calls is
/// in every failing run, the pair of groups is.
#[test]
fn pairs_of_calls_of_two_single_threads_are_joined() {
    let functions = vec![func(0, "handle", ValueKind::Signed, &[])];
    // (main's messages' start times; the heartbeat's)
    let r = |id, label, main: &[u64], beat: u64| {
        let mut calls: Vec<Call> = main
            .iter()
            .enumerate()
            .map(|(k, &s)| call(0, 0, k as u32 + 1, s * US, Some((s + 1) * US), Some(0)))
            .collect();
        calls.push(call(0, 1, 1, beat * US, Some((beat + 1) * US), Some(0)));
        run(id, label, calls, 100 * US).with_threads(vec![thread(0, "main"), thread(1, "beat")])
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, &[10, 20, 30], 25),
            r(1, Label::Pass, &[10, 21, 40], 35),
            r(2, Label::Pass, &[12, 22, 32], 24),
            // Before main's second message.
            r(3, Label::Fail, &[10, 30], 15),
            // Before its first.
            r(4, Label::Fail, &[10], 5),
        ],
    };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let group = PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 0, within: None } }),
        ..on_workers(Kind::Order, 0)
    };
    assert!(fd(&c, &s).contains(&group), "{:?}", fd(&c, &s));
    let p = &c.predicates[c.find(&group).unwrap().0 as usize];
    let member =
        |k| PairMember { a: site(0, 1, 1), b: site(0, 0, k), at_entry: false, reversed: true };
    assert_eq!(
        p.condition,
        Condition::AnyPair {
            relation: Box::new(Condition::EndsBefore),
            pairs: vec![member(1), member(2)]
        }
    );
    assert_eq!(p.anchor, Anchor::FirstExit);
    assert_eq!(
        p.description,
        "call 1 of handle on beat#1 ends before call 1 of handle on main starts, or call 1 of handle on beat#1 ends before call 2 of handle on main starts, which no passing run shows"
    );
    // Hold the heartbeat until main's messages that passing runs always
    // handled first have been handled (the plan merges the two holds into
    // one that waits for the later call: `intervene::plan`'s tests).
    let hold = |k| Intervention::HoldUntil {
        site: site(0, 1, 1),
        point: Point::Entry,
        until: site(0, 0, k),
        until_point: Point::Exit,
    };
    assert_eq!(p.intervention, Some(Intervention::All { each: vec![hold(1), hold(2)] }));
    assert_eq!(c.evaluate(&s.runs[4]).anchor(p.id), Some(6 * US));
    assert_eq!(c.evaluate(&s.runs[3]).anchor(p.id), Some(16 * US));
    // The same two groups, by start: the heartbeat started before one of
    // main's messages, placed (and held) at the heartbeat's start.
    let starts = PredKey { kind: Kind::StartsBefore, ..group };
    assert!(fd(&c, &s).contains(&starts));
    let q = &c.predicates[c.find(&starts).unwrap().0 as usize];
    assert_eq!(q.anchor, Anchor::Entry);
    assert_eq!(c.evaluate(&s.runs[4]).anchor(q.id), Some(5 * US));
}

/// Workers resize and look up a table main created. A resize overlapping
/// a lookup on the table (on another worker) is the race; passing runs
/// never show one.
#[test]
fn some_call_of_one_group_overlaps_some_call_of_another_on_the_same_object() {
    let functions = vec![
        func(0, "table_new", ValueKind::Pointer, &[]),
        func(1, "resize", ValueKind::Void, &[ValueKind::Pointer]),
        func(2, "lookup", ValueKind::Pointer, &[ValueKind::Pointer, ValueKind::Pointer]),
    ];
    let r = |id: u32, label, race: bool| {
        let table = 0x5555_0000_0000 + i64::from(id) * 0x1000;
        let resizer = 1 + id % 3;
        let reader = 1 + (id + 1) % 3;
        let lookup_at = if race { 105 } else { 150 };
        let calls =
            vec![
                call(0, 0, 1, 0, Some(10 * US), Some(table)),
                call(1, resizer, 1, 100 * US, Some(120 * US), None).with_args([table, 0, 0]),
                call(2, reader, 1, lookup_at * US, Some((lookup_at + 2) * US), Some(0x6000))
                    .with_args([0x7000, table, 0]),
                // Lookups of another table always overlap the resize.
                call(2, 6 - resizer - reader, 1, 101 * US, Some(103 * US), Some(0x6000))
                    .with_args([0x7000, 0x9999_0000, 0]),
            ];
        run(id, label, calls, 200 * US).with_threads(pool_threads())
    };
    let s = Session {
        functions,
        runs: (0..9)
            .map(|i| r(i, if i % 3 == 2 { Label::Fail } else { Label::Pass }, i % 3 == 2))
            .collect(),
    };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let overlap = PredKey {
        other: Some(Other { func: 2, calls: Calls::Group { class: 1, within: None } }),
        ..on_workers(Kind::Overlap, 1)
    };
    assert_eq!(fd(&c, &s), vec![overlap]);
    let p = &c.predicates[c.find(&overlap).unwrap().0 as usize];
    // The table is named by where it first appeared as an argument: the
    // resize's (table_new returns it; return values are not arguments).
    assert_eq!(
        p.condition,
        Condition::GroupOverlap {
            shared: true,
            object: Some(ObjectName { func: 1, class: 1, arg: 0 }),
            same: None,
        }
    );
    assert_eq!(
        p.description,
        "some call of resize on the worker threads and some call of lookup on the worker threads run at the same time on the same object (first passed as argument 1 of resize on the worker threads), which no passing run shows"
    );
    let iv = Intervention::SerializeGroups {
        a: CallSet { func: 1, roles: vec![1, 2, 3], instance: 0, within: None },
        b: CallSet { func: 2, roles: vec![1, 2, 3], instance: 0, within: None },
        object: Some((1, 2)),
    };
    assert_eq!(p.intervention, Some(iv));
    assert_eq!(c.evaluate(&s.runs[2]).anchor(p.id), Some(105 * US));
    assert!(!c.evaluate(&s.runs[0]).holds(p.id));
}

/// The key of "another book on the worker threads runs at the same time,
/// for the same req.seat" in [`crate::model::testing::clerks`] sessions.
pub(crate) fn same_seat() -> PredKey {
    PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 1, within: None } }),
        arg: 2,
        ..on_workers(Kind::Overlap, 0)
    }
}

/// The condition of the same-seat overlaps in [`crate::model::testing::clerks`]
/// sessions: on the venue (argument 1 of `book`), the same `req.seat`.
fn same_seat_condition() -> Condition {
    let seat =
        crate::model::PointeeField { name: "req.seat".into(), offset: 4, size: 4, text: false };
    Condition::GroupOverlap {
        shared: true,
        object: Some(ObjectName { func: 0, class: 1, arg: 0 }),
        same: Some(SameField { arg: 1, field: seat }),
    }
}

/// Their intervention: the clerks' `book` calls serialised on the venue.
fn serialise_clerks() -> Intervention {
    let clerks = CallSet { func: 0, roles: vec![1, 2, 3], instance: 0, within: None };
    Intervention::SerializeGroups { a: clerks.clone(), b: clerks, object: Some((1, 1)) }
}

/// Only the overlap for the same `req.seat` separates: the plain overlap
/// on the venue holds in every run, the customers never agree, and
/// without the requests' contents nothing separates.
#[test]
fn overlapping_calls_that_ask_about_the_same_thing() {
    let s = crate::model::testing::clerks(9, &[]);
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    assert_eq!(fd(&c, &s), vec![same_seat()]);
    let p = &c.predicates[c.find(&same_seat()).unwrap().0 as usize];
    assert_eq!(p.condition, same_seat_condition());
    assert_eq!(
        p.description,
        "some call of book on the worker threads and another call of book on the worker threads run at the same time on the same object (first passed as argument 1 of book on the worker threads), both for the same req.seat"
    );
    assert_eq!(p.intervention, Some(serialise_clerks()));
    assert_eq!(c.evaluate(&s.runs[2]).anchor(p.id), Some(104 * US));
    assert!(!c.evaluate(&s.runs[0]).holds(p.id));
    let blind = Session {
        functions: s.functions.iter().map(|f| Function { pointee: None, ..f.clone() }).collect(),
        runs: s.runs.clone(),
    };
    assert_eq!(fd(&learn(&blind, &ExtractConfig::default()).unwrap(), &blind), vec![]);
}

/// Two bookings for the same seat that both go on to sell it: in the
/// passing runs where two bookings for one seat overlap, the second finds
/// it taken and does not sell, so "for the same req.seat" holds in passing
/// runs too and only "..., and both call sell" separates (inventory-sixty:
/// two `stock_item` calls for one SKU that both call `stock_add`).
#[test]
fn overlapping_calls_for_the_same_key_that_both_insert() {
    let s = crate::model::testing::selling_clerks(9, &[0, 1, 3]);
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let both_sell = PredKey { callee: Some(1), ..same_seat() };
    assert_eq!(fd(&c, &s), vec![both_sell]);
    let p = &c.predicates[c.find(&both_sell).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "some call of book on the worker threads and another call of book on the worker threads run at the same time on the same object (first passed as argument 1 of book on the worker threads), both for the same req.seat, and both call sell"
    );
    assert_eq!(p.condition, same_seat_condition());
    assert_eq!(p.intervention, Some(serialise_clerks()));
    assert_eq!(c.evaluate(&s.runs[2]).anchor(p.id), Some(104 * US));
    // Same seat, one sale: the key's overlap holds, the insert's does not.
    let same = c.find(&same_seat()).unwrap();
    assert!(c.evaluate(&s.runs[0]).holds(same) && !c.evaluate(&s.runs[0]).holds(p.id));
    assert!(!c.evaluate(&s.runs[4]).holds(same) && !c.evaluate(&s.runs[4]).holds(p.id));
    assert_eq!(both_sell.to_string(), "overlap:f0/c1+f0/c1/k2/calls:f1");
}

/// A duplicate insert: two workers each add an item for a SKU (a
/// character array at the start of the item, read at entry), and in the
/// failing runs two adds, on different workers, carry the same SKU. The
/// buffers hold different bytes after the SKU's NUL, which do not count.
/// No add overlaps another, and which worker adds what changes run by run.
/// A passing run may hold a harmless duplicate too (the predicate is then
/// not fully discriminative, but still learned); a key that repeats in
/// every passing run gives no predicate.
#[test]
fn two_calls_for_the_same_key_in_a_failing_run() {
    let sku = |text: &[u8], junk: u8| {
        let mut b = [junk; aid_common::POINTEE_BYTES];
        b[..text.len()].copy_from_slice(text);
        b[text.len()] = 0;
        b
    };
    let functions = vec![
        func(0, "stock_add", ValueKind::Pointer, &[ValueKind::Pointer, ValueKind::Pointer])
            .with_pointee(1, 16, &[("it.sku", 0, 16)]),
    ];
    let r = |id: u32, fail: bool, dup: bool| {
        let keys: [&[u8]; 3] =
            [b"BRG-101-M", b"CAB-7-S", if dup { b"BRG-101-M" } else { b"DSK-2-L" }];
        let calls: Vec<Call> = keys
            .iter()
            .enumerate()
            .map(|(k, key)| {
                let role = 1 + (id + k as u32) % 2;
                let at = (10 + 10 * k as u64) * US;
                let mut c = call(0, role, 1 + k as u32 / 2, at, Some(at + US), Some(0x5000));
                c.args = [0x1000, 0x2000 + 0x100 * k as i64, 0];
                c.content = Some(sku(key, k as u8 + 0x41));
                c
            })
            .collect();
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 100 * US).with_threads(pool_threads())
    };
    let session = |dup: &dyn Fn(u32) -> bool| {
        let runs = (0..8).map(|i| r(i, i % 4 == 1, dup(i))).collect();
        let mut s = Session { functions: functions.clone(), runs };
        s.functions[0].pointee.as_mut().unwrap().fields[0].text = true;
        s
    };
    let s = session(&|i| i % 4 == 1);
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let repeated = PredKey { arg: 1, ..on_workers(Kind::RepeatedKey, 0) };
    assert_eq!(fd(&c, &s), vec![repeated]);
    let p = &c.predicates[c.find(&repeated).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "stock_add is called twice on the worker threads for the same it.sku"
    );
    assert_eq!(p.intervention, None);
    assert_eq!(p.anchor, Anchor::Entry);
    // At the second add of the SKU, the third call.
    assert_eq!(c.evaluate(&s.runs[1]).anchor(p.id), Some(30 * US));
    assert_eq!(repeated.to_string(), "repeated_key:f0/c1/k1");
    // The bytes after the NUL count when the field is not text: every
    // call's differ, so no key repeats.
    let mut raw = s.clone();
    raw.functions[0].pointee.as_mut().unwrap().fields[0].text = false;
    let c = learn(&raw, &ExtractConfig::default()).unwrap();
    assert!(fd(&c, &raw).is_empty());
    // A harmless duplicate in passing run 2: learned, holds in every
    // failing run and in that passing one.
    let harmless = session(&|i| i % 4 == 1 || i == 2);
    let c = learn(&harmless, &ExtractConfig::default()).unwrap();
    let id = c.find(&repeated).unwrap();
    let held: Vec<u32> =
        harmless.runs.iter().filter(|r| c.evaluate(r).holds(id)).map(|r| r.id).collect();
    assert_eq!(held, vec![1, 2, 5]);
    // A duplicate in every run: nothing learned.
    let always = session(&|_| true);
    let c = learn(&always, &ExtractConfig::default()).unwrap();
    assert_eq!(c.find(&repeated), None);
}

/// Counts over a class: an error handler that only failing runs call, on
/// whichever worker.
#[test]
fn counts_over_a_class() {
    let functions =
        vec![func(0, "job", ValueKind::Signed, &[]), func(1, "on_error", ValueKind::Void, &[])];
    let r = |id: u32, fail: bool| {
        let w = 1 + id % 3;
        let mut calls: Vec<Call> = (1..=3)
            .map(|role| {
                call(0, role, 1, u64::from(role) * US, Some(u64::from(role) * US + 10), Some(0))
            })
            .collect();
        if fail {
            calls.push(call(1, w, 1, 50 * US, Some(51 * US), None));
        }
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 100 * US).with_threads(pool_threads())
    };
    let s = Session { functions, runs: (0..6).map(|i| r(i, i % 2 == 1)).collect() };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let above = on_workers(Kind::CountAbove, 1);
    assert_eq!(fd(&c, &s), vec![above]);
    let p = &c.predicates[c.find(&above).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "on_error is called on the worker threads, which no passing run does"
    );
    assert_eq!(c.evaluate(&s.runs[1]).anchor(p.id), Some(50 * US));
}

/// Explosion control: in a pool, non-discriminative predicates true in
/// exactly the same runs are one row of the ranking (the most general one
/// stands for the rest); fully-discriminative ones anchored at the same
/// moment in every failing run are one node of the AC-DAG.
#[test]
fn predicates_true_in_the_same_runs_are_merged() {
    let functions = vec![func(0, "read", ValueKind::Signed, &[])];
    let r = |id, label, v: [i64; 2]| {
        run(
            id,
            label,
            vec![call(0, 0, 1, 0, Some(10), Some(v[0])), call(0, 0, 2, 20, Some(30), Some(v[1]))],
            100,
        )
    };
    let s = Session {
        functions,
        runs: vec![
            r(0, Label::Pass, [1, 2]),
            r(1, Label::Pass, [1, 2]),
            // Calls 1 and 2 both go wrong in run 2 only: same runs.
            r(2, Label::Fail, [-1, -2]),
            r(3, Label::Fail, [1, -2]),
        ],
    };
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let truths: Vec<RunTruth> = s.runs.iter().map(|r| c.evaluate(r)).collect();
    let ranking: Vec<PredId> = c.predicates.iter().skip(1).map(|p| p.id).collect();
    let discriminative = |p: PredId| truths.iter().all(|t| t.holds(p) == t.failed);
    let merged = merge::same_runs(&c, &truths, &ranking, discriminative);
    let id = |k: PredKey| c.find(&k).unwrap();
    let site_err = |k| PredKey::at(Kind::ErrorReturn, site(0, 0, k));
    let site_ret = |k| PredKey::at(Kind::RetDiffers, site(0, 0, k));
    let group = |kind| PredKey {
        kind,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: None,
        arg: 0,
        callee: None,
    };
    // Call 1 went wrong in run 2 only; its two predicates are one row,
    // and the group version holds in both failing runs (fully
    // discriminative: never merged).
    assert!(
        merged.contains(&(id(site_ret(1)), id(site_err(1))))
            || merged.contains(&(id(site_err(1)), id(site_ret(1))))
    );
    assert!(
        merged
            .iter()
            .all(|&(m, r)| m != id(group(Kind::ErrorReturn)) && r != id(group(Kind::ErrorReturn)))
    );
    // Call 2's wrong value and error value, and the group's, are fully
    // discriminative; call 2's two are the same moment in every failing
    // run (its exit), the group's is earlier in run 2 (call 1's exit).
    let failing: Vec<&RunTruth> = truths.iter().filter(|t| t.failed).collect();
    let cands = vec![id(site_ret(2)), id(site_err(2)), id(group(Kind::ErrorReturn))];
    assert_eq!(merge::same_moment(&c, &cands, &failing), vec![(id(site_err(2)), id(site_ret(2)))]);
}

/// Two clients withdraw from one account; a withdrawal checks the balance
/// in one critical section and debits it in a second one. Runs fail when
/// the other client's check comes between the two sections (both see the
/// balance cover the amount). The calls overlap in passing runs too (a
/// client delayed before its first lock lets the other run its whole
/// withdrawal inside its call), so no overlap predicate separates the
/// runs: the interleaving of the lock sections does. Times in µs; the
/// releases are aid's sync-point probes on `pthread_mutex_unlock`.
fn withdraw_session() -> Session {
    let sync = |id: u32, name: &str| {
        let mut f = func(id, name, ValueKind::Signed, &[ValueKind::Pointer]);
        f.internal = true;
        f.probe = crate::model::Probe::Sync;
        f
    };
    let functions = vec![
        func(0, "withdraw", ValueKind::Signed, &[ValueKind::Pointer, ValueKind::Signed]),
        func(1, "balance", ValueKind::Signed, &[ValueKind::Pointer]),
        sync(2, "pthread_mutex_unlock"),
        sync(3, "pthread_mutex_lock"),
    ];
    const ACCT: i64 = 0x7000;
    // One withdrawal on `role`: its calls, given when it enters, where its
    // sections end (unlocks) and when it returns what.
    let withdraw = |role: u32, enter: u64, unlocks: &[u64], exit: u64, ret: i64| -> Vec<Call> {
        let mut v =
            vec![call(0, role, 1, enter * US, Some(exit * US), Some(ret)).with_args([ACCT, 60, 0])];
        for (k, &u) in unlocks.iter().enumerate() {
            let k = k as u32;
            v.push(call(3, role, k + 1, (u - 2) * US, None, None).with_args([ACCT, 0, 0]));
            v.push(call(2, role, k + 1, u * US, None, None).with_args([ACCT, 0, 0]));
        }
        v
    };
    let threads = vec![thread(0, "main"), thread(1, "client"), thread(2, "client")];
    let mk = |id: u32, fail: bool, mut calls: Vec<Call>| {
        calls.push(call(1, 0, 1, 200 * US, Some(201 * US), Some(if fail { -20 } else { 40 })));
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 210 * US).with_threads(threads.clone())
    };
    let runs = vec![
        // One after the other.
        mk(0, false, [withdraw(1, 10, &[15, 35], 40, 0), withdraw(2, 50, &[55], 60, -1)].concat()),
        // Overlapping calls, the second one's only section after both of
        // the first's.
        mk(1, false, [withdraw(1, 10, &[15, 35], 40, 0), withdraw(2, 20, &[50], 70, -1)].concat()),
        mk(2, false, [withdraw(2, 10, &[15, 35], 40, 0), withdraw(1, 12, &[60], 70, -1)].concat()),
        // The other client's check between the two sections.
        mk(
            3,
            true,
            [withdraw(1, 10, &[15, 55], 60, 0), withdraw(2, 12, &[20, 45], 50, 0)].concat(),
        ),
        mk(
            4,
            true,
            [withdraw(2, 10, &[15, 65], 70, 0), withdraw(1, 30, &[40, 50], 52, 0)].concat(),
        ),
    ];
    Session { functions, runs }
}

#[test]
fn a_lock_taken_between_two_critical_sections_of_one_call_is_a_predicate() {
    let s = withdraw_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 1, within: None } }),
        ..on_workers(Kind::Interleaved, 0)
    };
    assert!(fd(&c, &s).contains(&key), "{:?}", fd(&c, &s));
    let p = &c.predicates[c.find(&key).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::InterleavedSections);
    assert_eq!(p.anchor, Anchor::LaterEntry);
    assert_eq!(
        p.description,
        "some call of withdraw on the client threads takes a lock while another call of withdraw on the client threads is between two critical sections on it (released it, to take it again), which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups {
            a: CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None },
            b: CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None },
            object: Some((1, 1)),
        })
    );
    // Anchored where serialising acts: the later of the two entries.
    let t = c.evaluate(&s.runs[4]);
    assert_eq!(t.anchor(p.id), Some(30 * US));
    // The overlap itself is no predicate: passing runs overlap too.
    assert!(c.predicates.iter().all(|p| p.key.kind != Kind::Overlap), "{:?}", c.predicates);
    // Sync points are never predicates themselves.
    assert!(c.predicates.iter().all(|p| p.key.func < 2));
    // A run without sync-point events shows no interleaving: false, not
    // guessed.
    let mut bare = s.runs[3].clone();
    bare.calls.retain(|c| c.func < 2);
    assert!(!c.evaluate(&bare).holds(p.id));
}

/// A check-then-act whose check is not under the lock: `incr` (main)
/// tests a flag and only then takes the lock to count itself in; `stop`
/// (one thread) sets the flag and counts down under the same lock, in
/// its helper `decr`. Runs fail when `decr`'s section comes after `incr`
/// began and before `incr`'s own section. Passing runs have `stop` wholly
/// first (then `incr` takes no lock at all) or wholly after. Times in
/// µs; both calls pass the device (0x7000).
fn check_then_act_session() -> Session {
    let sync = |id: u32, name: &str| {
        let mut f = func(id, name, ValueKind::Signed, &[ValueKind::Pointer]);
        f.internal = true;
        f.probe = crate::model::Probe::Sync;
        f
    };
    let functions = vec![
        func(0, "incr", ValueKind::Signed, &[ValueKind::Pointer]),
        func(1, "decr", ValueKind::Void, &[ValueKind::Pointer]),
        sync(2, "pthread_mutex_lock"),
        sync(3, "pthread_mutex_unlock"),
    ];
    const DEV: i64 = 0x7000;
    const LOCK: i64 = 0x9000;
    // A call on `role` from `enter` to `exit`, with its section (lock and
    // unlock times), if it takes one.
    let with_section = |f: u32, role: u32, enter: u64, exit: u64, section: Option<(u64, u64)>| {
        let mut v =
            vec![call(f, role, 1, enter * US, Some(exit * US), Some(0)).with_args([DEV, 0, 0])];
        if let Some((l, u)) = section {
            v.push(call(2, role, 1, l * US, None, None).with_args([LOCK, 0, 0]));
            v.push(call(3, role, 1, u * US, None, None).with_args([LOCK, 0, 0]));
        }
        v
    };
    let threads = vec![thread(0, "main"), thread(1, "stop")];
    let mk = |id: u32, fail: bool, calls: Vec<Vec<Call>>| {
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls.concat(), 100 * US).with_threads(threads.clone())
    };
    let runs = vec![
        // stop wholly first: incr sees the flag and takes no lock.
        mk(
            0,
            false,
            vec![with_section(1, 1, 5, 15, Some((8, 12))), with_section(0, 0, 20, 25, None)],
        ),
        // stop wholly after incr.
        mk(
            1,
            false,
            vec![
                with_section(0, 0, 10, 20, Some((12, 15))),
                with_section(1, 1, 30, 40, Some((32, 35))),
            ],
        ),
        mk(
            2,
            false,
            vec![
                with_section(0, 0, 10, 20, Some((14, 16))),
                with_section(1, 1, 22, 30, Some((24, 26))),
            ],
        ),
        // decr's section between incr's check and incr's section.
        mk(
            3,
            true,
            vec![
                with_section(0, 0, 10, 40, Some((30, 35))),
                with_section(1, 1, 15, 25, Some((18, 22))),
            ],
        ),
        mk(
            4,
            true,
            vec![
                with_section(0, 0, 10, 50, Some((45, 48))),
                with_section(1, 1, 12, 30, Some((20, 28))),
            ],
        ),
    ];
    Session { functions, runs }
}

#[test]
fn a_lock_taken_after_a_call_began_and_before_its_first_section_is_a_predicate() {
    let s = check_then_act_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        kind: Kind::BeforeFirstSection,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: Some(Other { func: 1, calls: Calls::Group { class: 1, within: None } }),
        arg: 0,
        callee: None,
    };
    let found = fd(&c, &s);
    assert!(found.contains(&key), "{found:?}");
    let p = &c.predicates[c.find(&key).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::TakenBeforeFirstSection);
    assert_eq!(p.anchor, Anchor::LaterEntry);
    assert_eq!(
        p.description,
        "some call of decr on stop#1 takes a lock after some call of incr on main has started and before that call first takes it (what it did before taking the lock may no longer hold when it does), which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups {
            a: CallSet { func: 0, roles: vec![0], instance: 0, within: None },
            b: CallSet { func: 1, roles: vec![1], instance: 0, within: None },
            object: Some((1, 1)),
        })
    );
    // Anchored at the later entry: decr's (12 µs) in run 4.
    assert_eq!(c.evaluate(&s.runs[4]).anchor(p.id), Some(12 * US));
    // A section that began before incr did is not counted: its reads may
    // have come first.
    let mut early = s.runs[3].clone();
    for call in early.calls.iter_mut().filter(|c| c.role == 1) {
        call.entry_ns -= 10 * US;
    }
    early.calls.sort_by_key(|c| c.entry_ns);
    assert!(!c.evaluate(&early).holds(p.id));
}

#[test]
fn which_thread_took_the_lock_first_is_a_predicate() {
    let s = check_then_act_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey::pair(Kind::SectionOrder, site(1, 1, 1), site(0, 0, 1));
    let found = fd(&c, &s);
    assert!(found.contains(&key), "{found:?}");
    let p = &c.predicates[c.find(&key).unwrap().0 as usize];
    assert_eq!(p.condition, Condition::SectionsInOrder);
    assert_eq!(p.anchor, Anchor::Entry);
    assert_eq!(
        p.description,
        "the first critical section of call 1 of decr on stop#1 on a lock (one it takes or runs in) comes before the first section of call 1 of incr on main on it, which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::HoldUntil {
            site: site(1, 1, 1),
            point: Point::Entry,
            until: site(0, 0, 1),
            until_point: Point::Exit,
        })
    );
    // Placed at decr's entry.
    assert_eq!(c.evaluate(&s.runs[3]).anchor(p.id), Some(15 * US));
    // Not observed where the two calls share no lock (run 0: incr took
    // none).
    assert!(!c.evaluate(&s.runs[0]).observed(p.id));
}

/// A call's second section never released — the run aborted inside it —
/// still ends a window another thread's section fell in: the other
/// thread released the lock after the first section and before the end.
#[test]
fn a_second_section_the_run_ended_inside_still_closes_an_interleaving() {
    let s = withdraw_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let key = PredKey {
        other: Some(Other { func: 0, calls: Calls::Group { class: 1, within: None } }),
        ..on_workers(Kind::Interleaved, 0)
    };
    let p = c.find(&key).unwrap();
    // Run 3, with client 1's second unlock (55 µs) gone: it aborted while
    // holding the lock, after client 2's sections (released at 20, 45).
    let mut aborted = s.runs[3].clone();
    aborted.calls.retain(|c| !(c.role == 1 && c.func == 2 && c.entry_ns == 55 * US));
    assert!(c.evaluate(&aborted).holds(p));
}

/// A StringBuffer-style atomicity violation: `append_sb` (main) reads the
/// other buffer's length in one critical section and copies that many
/// characters in a second one; a worker `erase`s the buffer and then
/// `append_str`s to it again, each in its own section. A run fails when
/// the erase is the last section between the two (the copy finds the
/// buffer short); when the append follows it inside the window the length
/// is right again and the run passes. So passing runs show the erase
/// between the two sections too: only "the last one between" separates.
fn erase_session() -> Session {
    let sync = |id: u32, name: &str| {
        let mut f = func(id, name, ValueKind::Signed, &[ValueKind::Pointer]);
        f.internal = true;
        f.probe = crate::model::Probe::Sync;
        f
    };
    let functions = vec![
        func(0, "append_sb", ValueKind::Pointer, &[ValueKind::Pointer, ValueKind::Pointer]),
        func(1, "erase", ValueKind::Pointer, &[ValueKind::Pointer]),
        func(2, "append_str", ValueKind::Pointer, &[ValueKind::Pointer, ValueKind::Pointer]),
        sync(3, "pthread_mutex_unlock"),
        sync(4, "pthread_mutex_lock"),
    ];
    const SB: i64 = 0x5000;
    const BUF: i64 = 0x6000;
    const STR: i64 = 0x7000;
    // A section on BUF taken at `at` by the `k`-th lock call of `role`,
    // let go 2 µs later unless `open` (the run ended inside it).
    let section = |role: u32, k: u32, at: u64, open: bool| -> Vec<Call> {
        let mut v = vec![call(4, role, k, at * US, None, None).with_args([BUF, 0, 0])];
        if !open {
            v.push(call(3, role, k, (at + 2) * US, None, None).with_args([BUF, 0, 0]));
        }
        v
    };
    // main: append_sb from 10 µs, its sections at 12 and `copy`; the
    // worker: erase at `erase`, append_str 5 µs later (its section open
    // when the run ended inside main's copy).
    let mk = |id: u32, fail: bool, copy: u64, erase: u64| {
        let end = if fail { None } else { Some((copy + 4) * US) };
        let mut calls = vec![call(0, 0, 1, 10 * US, end, Some(SB)).with_args([SB, BUF, 0])];
        calls.extend(section(0, 1, 12, false));
        calls.extend(section(0, 2, copy, fail));
        let append = erase + 5;
        calls.push(
            call(1, 1, 1, erase * US, Some((erase + 4) * US), Some(BUF)).with_args([BUF, 0, 3]),
        );
        calls.extend(section(1, 1, erase + 1, false));
        let stuck = fail && append > copy;
        let ret = if stuck { None } else { Some((append + 4) * US) };
        calls.push(call(2, 1, 1, append * US, ret, ret.map(|_| BUF)).with_args([BUF, STR, 0]));
        calls.extend(section(1, 2, append + 1, stuck));
        calls.sort_by_key(|c| c.entry_ns);
        let label = if fail { Label::Fail } else { Label::Pass };
        run(id, label, calls, 100 * US).with_threads(vec![thread(0, "main"), thread(1, "worker")])
    };
    let runs = vec![
        // The worker after both sections, before both, inside the window
        // with both its sections, after a quick copy.
        mk(0, false, 40, 50),
        mk(1, false, 40, 60),
        mk(2, false, 40, 16),
        mk(3, false, 45, 18),
        mk(4, false, 20, 30),
        // The erase last in the window.
        mk(5, true, 20, 16),
        mk(6, true, 21, 17),
    ];
    Session { functions, runs }
}

#[test]
fn the_last_section_between_two_is_a_predicate_when_any_section_between_is_not() {
    let s = erase_session();
    let c = learn(&s, &ExtractConfig::default()).unwrap();
    let interleaved = |func: u32, last: bool| PredKey {
        kind: Kind::Interleaved,
        func: 0,
        calls: Calls::Group { class: 0, within: None },
        other: Some(Other { func, calls: Calls::Group { class: 1, within: None } }),
        arg: u8::from(last),
        callee: None,
    };
    let fd = fd(&c, &s);
    assert!(fd.contains(&interleaved(1, true)), "{fd:?}");
    // The wide form is seen in passing runs 2 and 3: no predicate; nor is
    // the append, which is never the last one in a failing run.
    for key in [interleaved(1, false), interleaved(2, false), interleaved(2, true)] {
        assert!(c.find(&key).is_none(), "{key:?}");
    }
    let p = &c.predicates[c.find(&interleaved(1, true)).unwrap().0 as usize];
    assert_eq!(
        p.description,
        "some call of erase on worker#1 takes a lock while some call of append_sb on main is between two critical sections on it (released it, to take it again), the last to hold it before that call took it again, which no passing run shows"
    );
    assert_eq!(
        p.intervention,
        Some(Intervention::SerializeGroups {
            a: CallSet { func: 0, roles: vec![0], instance: 0, within: None },
            b: CallSet { func: 1, roles: vec![1], instance: 0, within: None },
            object: Some((2, 1)),
        })
    );
    // Anchored at the later entry: the erase's.
    assert_eq!(c.evaluate(&s.runs[5]).anchor(p.id), Some(16 * US));
}
