//! Tests of `plan.rs`: interventions as kernel actions.

use super::*;
use crate::model::{
    Label, Probe, ValueType,
    testing::{call, function, run},
};

fn site(func: u32, role: u32, instance: u32) -> Site {
    Site { func, role, instance }
}

fn plan(ivs: &[Intervention]) -> Plan {
    Plan::new(ivs, Duration::from_millis(500), &[])
}

/// A run that made no traced call.
fn no_calls() -> Run {
    run(1, Label::Pass, Vec::new(), 0)
}

fn stop(site: SiteKey, applied: bool, timed_out: bool) -> StopRecord {
    StopRecord {
        site,
        tid: 7,
        action: ActionKind::HOLD_UNTIL,
        applied,
        timed_out,
        held_ns: 0,
        released_ns: 0,
        probe_ns: 0,
        held: true,
        cut_short: false,
        rewound: false,
        value: None,
        error: None,
    }
}

#[test]
fn serialize_installs_two_holds_and_stamps_four_sites() {
    let plan = plan(&[Intervention::Serialize { a: site(0, 1, 1), b: site(0, 2, 1) }]);
    assert_eq!(plan.actions.len(), 2);
    assert!(plan.actions.iter().all(|(_, a, _)| a.kind == ActionKind::HOLD_WHILE_RUNNING
        && a.timeout_us == 500_000
        && a.value == 1));
    assert_eq!(plan.stamp.len(), 4);
}

/// Each pair of calls is decided on its own key; the same two calls
/// named in the other order are the same pair, and share its holds.
#[test]
fn serialized_pairs_are_numbered_by_their_two_calls() {
    let ser = |a, b| Intervention::Serialize { a, b };
    let (a1, b1, a2, b2) = (site(0, 1, 1), site(0, 2, 1), site(0, 1, 2), site(0, 2, 2));
    let plan = plan(&[ser(a1, b1), ser(a2, b2), ser(b1, a1)]);
    assert!(plan.conflicts.is_empty());
    let pair_at = |s: Site| {
        let key = site_key(s, Point::Entry);
        plan.actions.iter().find(|(k, _, _)| *k == key).unwrap().1.value
    };
    assert_eq!([pair_at(a1), pair_at(b1), pair_at(a2), pair_at(b2)], [1, 1, 2, 2]);
    assert_eq!(plan.actions.len(), 4);
    assert_eq!(plan.shared.len(), 2);
}

/// Holds that wait on each other's roles cannot share a run; a hold
/// and a serialisation of other roles can, and two serialisations
/// are left to the holds' own way out.
#[test]
fn holds_waiting_on_each_other_are_told_apart() {
    let calls = |func, role| CallSet { func, roles: vec![role], instance: 0, within: None };
    // stringbuffer-jdk1.4's pair: erase (role 1) waits while append
    // (role 0) runs; length (role 0) waits until erase has returned.
    let locks = Intervention::HoldLocks { calls: calls(9, 1), while_running: calls(7, 0) };
    let until = Intervention::HoldUntil {
        site: site(5, 0, 1),
        point: Point::Entry,
        until: site(9, 1, 1),
        until_point: Point::Exit,
    };
    assert!(wait_on_each_other(&[locks.clone(), until.clone()]));
    assert!(wait_on_each_other(&[until.clone(), Intervention::All { each: vec![locks] }]));
    // Both wait on role 1: neither holds what the other waits for.
    let same_way = Intervention::HoldUntil {
        site: site(6, 0, 1),
        point: Point::Entry,
        until: site(8, 1, 1),
        until_point: Point::Entry,
    };
    assert!(!wait_on_each_other(&[until.clone(), same_way]));
    let ser =
        |role_a, role_b| Intervention::Serialize { a: site(2, role_a, 1), b: site(3, role_b, 1) };
    assert!(wait_on_each_other(&[until.clone(), ser(0, 1)]));
    assert!(!wait_on_each_other(&[until.clone(), ser(2, 3)]));
    assert!(!wait_on_each_other(&[ser(0, 1), ser(0, 1)]));
    assert!(!wait_on_each_other(&[until]));
    // A ring of three: role 0 waits on 1, 1 on 2, 2 on 0.
    let hold = |held, on| Intervention::HoldUntil {
        site: site(1, held, 1),
        point: Point::Entry,
        until: site(2, on, 1),
        until_point: Point::Exit,
    };
    assert!(wait_on_each_other(&[hold(0, 1), hold(1, 2), hold(2, 0)]));
    assert!(!wait_on_each_other(&[hold(0, 1), hold(1, 2), hold(0, 2)]));
    assert!(wait_on_each_other(&[hold(0, 1), ser(1, 2), hold(2, 0)]));
}

#[test]
fn conflicting_interventions_are_not_installed() {
    let s = site(3, 0, 2);
    let plan = plan(&[
        Intervention::OverrideReturn { site: s, value: 1 },
        Intervention::DelayExit { site: s, delay_us: 10 },
    ]);
    assert_eq!(plan.conflicts, vec![1]);
    let outcome = plan.outcome(&[], 0, &no_calls());
    assert!(outcome[0].applied && !outcome[1].applied);
}

#[test]
fn timed_out_hold_is_not_applied() {
    let iv = Intervention::HoldUntil {
        site: site(1, 2, 1),
        point: Point::Entry,
        until: site(0, 1, 1),
        until_point: Point::Exit,
    };
    let plan = plan(&[iv]);
    let o =
        plan.outcome(&[stop(site_key(site(1, 2, 1), Point::Entry), false, true)], 0, &no_calls());
    assert!(!o[0].applied && o[0].timed_out);
}

/// An intervention acts from its first stop, on the run's clock; one
/// whose site was never reached never acted; one that changes a value
/// may act in the kernel without a stop: it counts from the return it
/// overrides, or from the run's start when events were lost.
#[test]
fn an_intervention_acts_from_its_first_stop() {
    let hold = Intervention::HoldUntil {
        site: site(1, 2, 1),
        point: Point::Entry,
        until: site(0, 1, 1),
        until_point: Point::Exit,
    };
    let value = Intervention::OverrideReturn { site: site(3, 0, 1), value: 0 };
    let plan = plan(&[hold, value]);
    let at = |probe_ns| StopRecord {
        probe_ns,
        ..stop(site_key(site(1, 2, 1), Point::Entry), true, false)
    };
    // Function 3's first call on main returns at 900, its second at 700
    // (an earlier entry of another instance is not the one overridden).
    let calls =
        vec![call(3, 0, 2, 100, Some(700), Some(1)), call(3, 0, 1, 400, Some(900), Some(1))];
    let made = run(1, Label::Pass, calls, 1_000);
    let o = plan.outcome(&[at(1_500), at(1_200)], 1_000, &made);
    assert_eq!((o[0].acted_ns, o[1].acted_ns), (Some(200), Some(900)));
    assert_eq!(plan.outcome(&[], 1_000, &made)[0].acted_ns, None);
    // The overridden call never made: it never acted.
    assert_eq!(plan.outcome(&[], 1_000, &no_calls())[1].acted_ns, None);
    let lost = Run { complete: false, lost_events: 3, ..made };
    assert_eq!(plan.outcome(&[], 1_000, &lost)[1].acted_ns, Some(0));
}

/// A premature return and a re-execution act from the entry of the first
/// call they act on; an override of every call, from the first return;
/// several at once, from the earliest of them.
#[test]
fn a_value_change_acts_from_the_first_call_it_changes() {
    let calls = [call(3, 1, 1, 100, Some(300), Some(0)), call(3, 1, 2, 500, Some(600), Some(0))];
    let every = Site { func: 3, role: 1, instance: 0 };
    let second = Site { func: 3, role: 1, instance: 2 };
    let at = |iv: Intervention| iv.changes_values_from(&calls);
    assert_eq!(at(Intervention::OverrideReturn { site: every, value: 1 }), Some(300));
    assert_eq!(at(Intervention::ReturnEarly { site: second, value: 1 }), Some(500));
    let again = Intervention::Reexecute {
        calls: CallSet::site(second),
        test: ValueTest::NotEqual { value: 1 },
        retries: 1,
        fallback: None,
    };
    assert_eq!(at(again.clone()), Some(500));
    let both = Intervention::All {
        each: vec![again, Intervention::OverrideReturn { site: every, value: 1 }],
    };
    assert_eq!(at(both), Some(300));
    assert_eq!(at(Intervention::DelayExit { site: every, delay_us: 1 }), None);
    // Another role's calls are not its calls.
    let other = Site { func: 3, role: 2, instance: 0 };
    assert_eq!(at(Intervention::OverrideReturn { site: other, value: 1 }), None);
}

/// A class of threads gets one key per role, for every instance, in
/// the calling context, with the test at the return type's width.
#[test]
fn reexecution_on_a_class_is_one_wildcard_key_per_role() {
    let int = ValueType { kind: ValueKind::Signed, size: 4 };
    let functions = vec![function(0, "norm"), function(1, "fetch").with_types(int, vec![])];
    let iv = Intervention::Reexecute {
        calls: CallSet { func: 1, roles: vec![1, 2, 3], instance: 0, within: Some(0) },
        test: ValueTest::Error { negative: true, zero: false },
        retries: crate::model::REEXECUTE_RETRIES,
        fallback: None,
    };
    let plan = Plan::new(&[iv], Duration::from_secs(1), &functions);
    let keys: Vec<SiteKey> = plan.actions.iter().map(|(k, _, _)| *k).collect();
    assert_eq!(
        keys,
        (1..=3)
            .map(|role| SiteKey { func: 1, role, instance: ANY_INSTANCE, point: SitePoint::EXIT })
            .collect::<Vec<_>>()
    );
    let a = plan.actions[0].1;
    assert_eq!((a.kind, a.within, a.retries), (ActionKind::REEXECUTE, 1, 8));
    // An int -1 in rax is 0x0000_0000_ffff_ffff: negative at 4 bytes.
    assert!(a.test.passes(0xffff_ffff, a.test_value));
    assert!(!a.test.passes(5, a.test_value));
    assert!(!a.test.contains(RetTest::FALLBACK));
    // A stop of instance 7 on role 2 belongs to it.
    let s = SiteKey { func: 1, role: 2, instance: 7, point: SitePoint::EXIT };
    assert_eq!(plan.owner(&s), Some(0));
}

#[test]
fn reexecution_with_a_fallback_overrides_when_retries_run_out() {
    let iv = Intervention::Reexecute {
        calls: CallSet::site(site(0, 0, 4)),
        test: ValueTest::NotEqual { value: 1430 },
        retries: 2,
        fallback: Some(1430),
    };
    let a = plan(&[iv]).actions[0].1;
    assert!(a.test.contains(RetTest::FALLBACK) && a.test.contains(RetTest::NOT_EQUAL));
    assert_eq!((a.value, a.test_value), (1430, 1430));
    assert!(a.test.passes((-1i64) as u64, a.test_value) && !a.test.passes(1430, 1430));
}

/// An aggregate order negated call by call: two holds of the same call
/// until two calls of one function on one thread wait for the later.
#[test]
fn holds_of_one_intervention_at_one_site_wait_for_the_later_call() {
    let hold = |k| Intervention::HoldUntil {
        site: site(5, 1, 1),
        point: Point::Entry,
        until: site(5, 0, k),
        until_point: Point::Exit,
    };
    let plan = plan(&[Intervention::All { each: vec![hold(1), hold(2)] }]);
    assert!(plan.conflicts.is_empty());
    assert_eq!(plan.actions.len(), 1);
    assert_eq!(plan.actions[0].1.other, site_key(site(5, 0, 2), Point::Exit));
    // Across two interventions the same site is shared the same way,
    // and a stop there serves both.
    let two = self::plan(&[hold(1), hold(2)]);
    assert!(two.conflicts.is_empty());
    assert_eq!(two.actions.len(), 1);
    assert_eq!(two.actions[0].1.other, site_key(site(5, 0, 2), Point::Exit));
    let mut held = stop(site_key(site(5, 1, 1), Point::Entry), false, true);
    held.action = ActionKind::HOLD_UNTIL;
    let o = two.outcome(&[held], 0, &no_calls());
    assert!(o.iter().all(|a| !a.applied && a.timed_out));
}

#[test]
fn group_serialisation_counts_both_groups_and_holds_both_ways() {
    let a = CallSet { func: 1, roles: vec![1, 2], instance: 0, within: None };
    let b = CallSet { func: 2, roles: vec![1, 2], instance: 0, within: Some(3) };
    let plan =
        plan(&[Intervention::SerializeGroups { a: a.clone(), b: b.clone(), object: Some((1, 1)) }]);
    assert_eq!(plan.groups.len(), 4);
    assert!(plan.groups.iter().all(|(_, s)| s.arg == 1));
    let b_slot = plan.groups.iter().find(|(m, _)| m.func == 2).unwrap().1;
    assert_eq!((b_slot.group, b_slot.within), (2, 4));
    assert_eq!(plan.actions.len(), 4);
    let on_a = plan.actions.iter().find(|(k, _, _)| k.func == 1).unwrap().1;
    assert_eq!(on_a.kind, ActionKind::HOLD_WHILE_GROUP_RUNNING);
    // a waits for group 2 (b), on the same object, its argument 1.
    assert_eq!((on_a.other.func, on_a.other.role, on_a.other.instance), (2, 1, 1));
}

/// Two traced functions, send and recv, and the C library's lock calls
/// (ids 2 to 5): a lock, its unlock, a condition wait, a write lock.
fn send_recv() -> Vec<Function> {
    let sync = |id, name| Function { probe: Probe::Sync, internal: true, ..function(id, name) };
    vec![
        function(0, "send"),
        function(1, "recv"),
        sync(2, "pthread_mutex_lock"),
        sync(3, "pthread_mutex_unlock"),
        sync(4, "pthread_cond_wait"),
        sync(5, "pthread_rwlock_wrlock"),
    ]
}

/// Every lock a call of send takes waits while a call of recv runs:
/// one action per role of send at each C library function that takes
/// a mutex or write lock, applying inside send only, waiting on recv's
/// group; a mark at each unlock and condition wait of those roles (the
/// thread no longer takes a lock); and at recv's entry, a wait while a
/// thread of send that found recv idle has not let its lock go. A stop
/// at a lock function, at any rank, is the intervention's.
#[test]
fn held_locks_wait_at_every_acquisition_inside_the_calls() {
    let functions = send_recv();
    let calls = CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None };
    let while_running = CallSet { func: 1, roles: vec![3], instance: 0, within: None };
    let iv = Intervention::HoldLocks { calls, while_running };
    let plan = Plan::new(std::slice::from_ref(&iv), Duration::from_millis(500), &functions);
    assert!(plan.conflicts.is_empty());
    assert_eq!(plan.groups.len(), 1);
    let (member, slot) = plan.groups[0];
    assert_eq!((member.func, member.role, slot.group, slot.arg), (1, 3, 1, 0));
    let mut keys: Vec<(u32, u32, u32, ActionKind)> =
        plan.actions.iter().map(|(k, a, _)| (k.func, k.role, k.instance, a.kind)).collect();
    keys.sort_unstable_by_key(|&(f, r, i, _)| (f, r, i));
    let (hold, released, wait) = (
        ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING,
        ActionKind::LOCKERS_RELEASE,
        ActionKind::HOLD_WHILE_LOCKERS,
    );
    assert_eq!(
        keys,
        [
            (1, 3, 0, wait),
            (2, 1, 0, hold),
            (2, 2, 0, hold),
            (3, 1, 0, released),
            (3, 2, 0, released),
            (4, 1, 0, released),
            (4, 2, 0, released),
            (5, 1, 0, hold),
            (5, 2, 0, hold),
        ]
    );
    for (k, a, owner) in &plan.actions {
        assert_eq!(*owner, 0);
        if a.kind == hold {
            // Inside send (id 0 + 1); recv's group 1, any object;
            // recv's id, whose own call does not count.
            assert_eq!((a.within, a.other.func, a.other.role, a.value), (1, 1, 0, 1));
        } else if a.kind == wait {
            // recv's group's lockers, at every call of recv.
            assert_eq!((a.within, a.other.func), (0, 1));
            assert_eq!(plan.optional, [*k]);
        }
    }
    let stop = StopRecord {
        site: SiteKey { func: 5, role: 2, instance: 7, point: SitePoint::ENTRY },
        ..stop(SiteKey::default(), false, true)
    };
    let out = plan.outcome(&[stop], 0, &no_calls());
    assert!(!out[0].applied && out[0].timed_out);
    // With no lock function traced there is nothing to hold at: the
    // intervention is never installed as if it had been.
    let none = Plan::new(&[iv], Duration::from_millis(500), &functions[..2]);
    assert_eq!(none.conflicts, [0]);
    assert!(!none.outcome(&[], 0, &no_calls())[0].applied);
}

/// A try-lock of the held calls is held like the other lock calls, but
/// its thread is not counted among the lockers: it never waits for the
/// lock, and one that fails has none to let go.
#[test]
fn a_try_lock_is_held_but_not_counted_among_the_lockers() {
    let mut functions = send_recv();
    let sync = |id, name| Function { probe: Probe::Sync, internal: true, ..function(id, name) };
    functions.push(sync(6, "pthread_mutex_trylock"));
    let calls = CallSet { func: 0, roles: vec![1], instance: 0, within: None };
    let while_running = CallSet { func: 1, roles: vec![3], instance: 0, within: None };
    let iv = Intervention::HoldLocks { calls, while_running };
    let plan = Plan::new(&[iv], Duration::from_millis(500), &functions);
    let mut held: Vec<(u32, u32)> = plan
        .actions
        .iter()
        .filter(|(_, a, _)| a.kind == ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING)
        .map(|(k, a, _)| (k.func, a.retries))
        .collect();
    held.sort_unstable();
    assert_eq!(held, [(2, 0), (5, 0), (6, aid_common::LOCK_DOES_NOT_WAIT)]);
}

/// Noise delaying the call at `site` by `us`.
fn delay_at(site: Site, us: u64) -> Noise {
    use crate::model::{NoiseAction, NoiseAt};
    Noise {
        at: NoiseAt::Call { site },
        action: NoiseAction::Delay { us },
        held_ns: 0,
        func: None,
        near_miss: false,
    }
}

#[test]
fn noise_is_told_apart_from_interventions() {
    let s = site(2, 1, 1);
    let noise = |site| delay_at(site, 9);
    // The intervention holds s at its entry, where the first noise
    // would act.
    let hold = Intervention::ReturnEarly { site: s, value: 0 };
    let plan = plan(&[hold]).with_noise(&[noise(s), noise(site(2, 1, 2))]);
    assert_eq!(plan.noise.len(), 1, "no noise where an intervention acts");
    assert!(plan.is_noise(&site_key(site(2, 1, 2), Point::Entry)));
    assert!(!plan.is_noise(&site_key(s, Point::Entry)));
}

/// Noise focused on one call of a function a serialisation of two groups
/// holds at every call is kept: the kernel finds the delay at the call's
/// own key first and goes on to the serialisation after it
/// (`hold_after_noise`), so the intervened run keeps the noise the
/// control runs had. The wait that follows the noise at that call is the
/// intervention's (it gave up: the intervention timed out); the noise's
/// own stop is not. Noise where an intervention on every call does not
/// wait on a group (a hold until another call) is dropped: installed
/// there, it would stand in for the intervention.
#[test]
fn noise_on_one_call_of_a_serialised_group_comes_before_the_serialisation() {
    let noise = |site| delay_at(site, 1860);
    let a = CallSet { func: 1, roles: vec![1], instance: 0, within: None };
    let b = CallSet { func: 1, roles: vec![2], instance: 0, within: None };
    let serialise = Intervention::SerializeGroups { a, b, object: None };
    let plan = plan(&[serialise]).with_noise(&[
        noise(site(1, 1, 1)),
        noise(site(1, 2, 3)),
        noise(site(1, 3, 1)),
    ]);
    assert_eq!((plan.noise.len(), plan.displaced), (3, 0));
    let own = site_key(site(1, 1, 1), Point::Entry);
    let at = |key: SiteKey| plan.actions.iter().filter(|(k, _, _)| *k == key).count();
    let every = SiteKey { instance: ANY_INSTANCE, ..own };
    assert_eq!((at(own), at(every)), (1, 1));
    assert!(plan.is_noise(&own));
    let noise_stop = StopRecord { action: ActionKind::DELAY, ..stop(own, true, false) };
    let gave_up =
        StopRecord { action: ActionKind::HOLD_WHILE_GROUP_RUNNING, ..stop(own, false, true) };
    assert!(!plan.outcome(std::slice::from_ref(&noise_stop), 0, &no_calls())[0].timed_out);
    assert!(plan.outcome(&[noise_stop, gave_up], 0, &no_calls())[0].timed_out);

    let every_call = Site { func: 1, role: 1, instance: 0 };
    let until = Point::Exit;
    let hold = Intervention::HoldUntil {
        site: every_call,
        point: Point::Entry,
        until: site(2, 2, 1),
        until_point: until,
    };
    let held = self::plan(&[hold]).with_noise(&[noise(site(1, 1, 1)), noise(site(1, 3, 1))]);
    assert_eq!((held.noise.len(), held.displaced), (1, 1));
    assert_eq!(held.actions.iter().filter(|(k, _, _)| *k == own).count(), 0);
}

/// The entry wait of held locks is optional: another intervention that
/// acts at the same entry, before it or after it in the plan, keeps its
/// action and no conflict is made; noise on one call of the waiting
/// function is installed (the kernel finds the call's own key first) and
/// displaces nothing.
#[test]
fn the_entry_wait_of_held_locks_yields_to_any_other_action() {
    let functions = send_recv();
    let calls = CallSet { func: 0, roles: vec![1], instance: 0, within: None };
    let while_running = CallSet { func: 1, roles: vec![3], instance: 0, within: None };
    let locks = Intervention::HoldLocks { calls, while_running };
    let every_recv = Site { func: 1, role: 3, instance: 0 };
    let hold = Intervention::HoldUntil {
        site: every_recv,
        point: Point::Entry,
        until: site(0, 1, 1),
        until_point: Point::Exit,
    };
    let entry = site_key(every_recv, Point::Entry);
    for (ivs, owner) in [([locks.clone(), hold.clone()], 1), ([hold, locks.clone()], 0)] {
        let plan = Plan::new(&ivs, Duration::from_millis(500), &functions);
        assert!(plan.conflicts.is_empty(), "{ivs:?}");
        let at: Vec<_> = plan.actions.iter().filter(|(k, _, _)| *k == entry).collect();
        assert_eq!(at.len(), 1);
        assert_eq!((at[0].1.kind, at[0].2), (ActionKind::HOLD_UNTIL, owner));
        assert!(plan.optional.is_empty());
    }
    let alone = Plan::new(std::slice::from_ref(&locks), Duration::from_millis(500), &functions);
    assert_eq!(alone.optional, [entry]);
    let noisy = alone.with_noise(&[delay_at(site(1, 3, 2), 9)]);
    assert_eq!((noisy.noise.len(), noisy.displaced), (1, 0));
    assert!(noisy.is_noise(&site_key(site(1, 3, 2), Point::Entry)));
    assert_eq!(noisy.owner(&site_key(site(1, 3, 1), Point::Entry)), Some(0));
}
