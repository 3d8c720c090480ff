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

pub(super) const US: u64 = 1000;

pub(super) fn func(id: u32, name: &str, ret: ValueKind, params: &[ValueKind]) -> Function {
    function(id, name).with_ret(ret).with_params(params)
}

pub(super) fn site(func: u32, role: u32, instance: u32) -> Site {
    Site { func, role, instance }
}

fn pool_threads() -> Vec<Thread> {
    vec![thread(0, "main"), thread(1, "worker"), thread(2, "worker"), thread(3, "worker")]
}

/// The predicates that hold in every failing run and no passing one.
pub(super) fn fd(c: &Catalog, s: &Session) -> Vec<PredKey> {
    let truths: Vec<RunTruth> = s.runs.iter().map(|r| c.evaluate(r)).collect();
    c.predicates
        .iter()
        .filter(|p| p.id.0 != 0 && truths.iter().all(|t| t.holds(p.id) == t.failed))
        .map(|p| p.key)
        .collect()
}

/// The key of `kind` over every call of function `func` on the worker
/// threads (class 1), with no second calls, argument or callee.
pub(super) fn on_workers(kind: Kind, func: u32) -> PredKey {
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

pub(super) fn pool_session() -> Session {
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
    // No per-call key for the workers: call k on worker is a different
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
    let member = |k| PairMember {
        a: site(0, 1, 1),
        b: site(0, 0, k),
        at_entry: false,
        reversed: true,
        sections: false,
    };
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
        "call 1 of handle on beat ends before call 1 of handle on main starts, or call 1 of handle on beat ends before call 2 of handle on main starts, which no passing run shows"
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
