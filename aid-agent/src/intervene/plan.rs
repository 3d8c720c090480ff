//! Interventions (AID Fig. 2, column 3) as kernel actions: which site of
//! which call gets which action, what the kernel must time-stamp or count,
//! and — after the run — whether each intervention was carried out.
//!
//! An action key names one call (function, role, instance, entry|exit) or,
//! with instance [`ANY_INSTANCE`], every call of the function on the role;
//! an intervention on a class of threads installs one key per role of the
//! class. The probes prefer a call's own key to its function's.

use std::{collections::BTreeSet, time::Duration};

use aid_common::{
    ANY_INSTANCE, Action, ActionKind, GroupMember, GroupSlot, RetTest, SiteKey, SitePoint,
};

use crate::{
    intervene::control::StopRecord,
    model::{
        AppliedIntervention, CallSet, Function, Intervention, Noise, Point, Role, Site, ValueKind,
        ValueTest,
    },
};

pub fn site_key(site: Site, point: Point) -> SiteKey {
    SiteKey {
        func: site.func,
        role: site.role,
        instance: site.instance,
        point: match point {
            Point::Entry => SitePoint::ENTRY,
            Point::Exit => SitePoint::EXIT,
        },
    }
}

/// The kernel actions for a set of interventions.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub interventions: Vec<Intervention>,
    /// (site, action, index of the intervention it serves).
    pub actions: Vec<(SiteKey, Action, usize)>,
    /// Sites whose occurrence the kernel must time-stamp.
    pub stamp: Vec<SiteKey>,
    /// Calls the kernel counts while they run, for group serialisation.
    pub groups: Vec<(GroupMember, GroupSlot)>,
    /// Interventions that could not be installed: another one already acts
    /// at the same site, in a way the two cannot share.
    pub conflicts: Vec<usize>,
    /// Actions one intervention shares with another that installed them
    /// first (the two wanted compatible actions at the same site: a hold
    /// until two calls of one thread waits for the later): (site, the
    /// intervention sharing it).
    pub shared: Vec<(SiteKey, usize)>,
    /// Noise installed (its actions carry index `usize::MAX`).
    pub noise: Vec<Noise>,
    /// Noise points left out because an intervention acts where they
    /// would (`Plan::with_noise`), acting in this run or not (a focused
    /// plan off in this run): the round's runs are made without noise the
    /// control runs had, so a passing one may pass for that alone
    /// (`debug/oracle.rs` does not count it).
    pub displaced: usize,
    /// The run needs the synchronisation-point probes (it amplifies).
    pub sync_points: bool,
    /// The longest hold of its interventions (what it was made with).
    pub hold_timeout: Duration,
}

/// Builds the kernel's form of one intervention.
struct Builder<'a> {
    functions: &'a [Function],
    timeout_us: u64,
    wanted: Vec<(SiteKey, Action)>,
    stamp: Vec<SiteKey>,
    groups: Vec<(GroupMember, GroupSlot)>,
    /// The plan's groups so far (id = index + 1), by the calls they count
    /// and the argument carrying the object.
    known_groups: &'a mut Vec<(CallSet, u8)>,
    /// The plan's serialised pairs of calls so far (id = index + 1), by
    /// their two entries in order.
    known_pairs: &'a mut Vec<(SiteKey, SiteKey)>,
    clash: bool,
}

impl Builder<'_> {
    fn action(&self, kind: ActionKind, value: u64, other: SiteKey) -> Action {
        Action { kind, value, timeout_us: self.timeout_us, other, ..Action::default() }
    }

    /// Adds an action, merging it with one this intervention already wants
    /// at the same key where both can hold at once.
    fn want(&mut self, key: SiteKey, action: Action) {
        match self.wanted.iter_mut().find(|(k, _)| *k == key) {
            None => self.wanted.push((key, action)),
            Some((_, have)) => match merge(have, &action) {
                Some(m) => *have = m,
                None => self.clash = true,
            },
        }
    }

    fn test(&self, func: u32, test: ValueTest) -> (RetTest, u64) {
        let width = self.functions.get(func as usize).map_or(8, |f| match f.ret.kind {
            ValueKind::Unknown | ValueKind::Pointer => 8,
            _ => f.ret.size,
        });
        let (t, v) = match test {
            ValueTest::Error { negative, zero } => {
                let mut t = RetTest::ALWAYS;
                if negative {
                    t = t.with(RetTest::NEGATIVE);
                }
                if zero {
                    t = t.with(RetTest::ZERO);
                }
                (t, 0)
            }
            ValueTest::NotEqual { value } => (RetTest::NOT_EQUAL, value as u64),
        };
        (t.width(width), v)
    }

    /// The group counting `calls` (on argument `arg`, 0: no object).
    fn group(&mut self, calls: &CallSet, arg: u8) -> u32 {
        if let Some(i) = self.known_groups.iter().position(|(c, a)| c == calls && *a == arg) {
            return i as u32 + 1;
        }
        self.known_groups.push((calls.clone(), arg));
        let id = self.known_groups.len() as u32;
        for &role in &calls.roles {
            let slot = GroupSlot {
                group: id,
                arg: u32::from(arg),
                within: calls.within.map_or(0, |w| w + 1),
                _pad: 0,
            };
            self.groups.push((GroupMember { func: calls.func, role }, slot));
        }
        id
    }

    /// The id of the serialised pair of the calls entering at `a` and `b`
    /// (in either order: the same two calls are one pair).
    fn pair(&mut self, a: SiteKey, b: SiteKey) -> u64 {
        let key = (a.min(b), a.max(b));
        let i = match self.known_pairs.iter().position(|p| *p == key) {
            Some(i) => i,
            None => {
                self.known_pairs.push(key);
                self.known_pairs.len() - 1
            }
        };
        i as u64 + 1
    }

    fn add(&mut self, iv: &Intervention) {
        let none = SiteKey::default();
        match iv {
            Intervention::ReturnEarly { site, value } => {
                let a = self.action(ActionKind::RETURN_EARLY, *value as u64, none);
                self.want(site_key(*site, Point::Entry), a);
            }
            Intervention::OverrideReturn { site, value } => {
                let a = self.action(ActionKind::OVERRIDE_RETURN, *value as u64, none);
                self.want(site_key(*site, Point::Exit), a);
            }
            Intervention::DelayExit { site, delay_us } => {
                let a = self.action(ActionKind::DELAY, *delay_us, none);
                self.want(site_key(*site, Point::Exit), a);
            }
            Intervention::HoldUntil { site, point, until, until_point } => {
                let other = site_key(*until, *until_point);
                self.stamp.push(other);
                let a = self.action(ActionKind::HOLD_UNTIL, 0, other);
                self.want(site_key(*site, *point), a);
            }
            Intervention::Serialize { a, b } => {
                for s in [a, b] {
                    self.stamp.push(site_key(*s, Point::Entry));
                    self.stamp.push(site_key(*s, Point::Exit));
                }
                let (entry_a, entry_b) = (site_key(*a, Point::Entry), site_key(*b, Point::Entry));
                let pair = self.pair(entry_a, entry_b);
                let ha = self.action(ActionKind::HOLD_WHILE_RUNNING, pair, entry_b);
                let hb = self.action(ActionKind::HOLD_WHILE_RUNNING, pair, entry_a);
                self.want(entry_a, ha);
                self.want(entry_b, hb);
            }
            Intervention::Reexecute { calls, test, retries, fallback } => {
                let (t, test_value) = self.test(calls.func, *test);
                let t = if fallback.is_some() { t.with(RetTest::FALLBACK) } else { t };
                let action = Action {
                    kind: ActionKind::REEXECUTE,
                    within: calls.within.map_or(0, |w| w + 1),
                    value: fallback.unwrap_or(0) as u64,
                    timeout_us: self.timeout_us,
                    other: none,
                    test: t,
                    retries: *retries,
                    test_value,
                };
                for site in calls.sites() {
                    self.want(site_key(site, Point::Exit), action);
                }
            }
            Intervention::SerializeGroups { a, b, object } => {
                let (arg_a, arg_b) = object.unwrap_or((0, 0));
                let ga = self.group(a, arg_a);
                let gb = self.group(b, arg_b);
                let same = u32::from(object.is_some());
                for (calls, awaited, arg) in [(a, gb, arg_a), (b, ga, arg_b)] {
                    let other = SiteKey {
                        func: awaited,
                        role: same,
                        instance: u32::from(arg),
                        point: SitePoint::ENTRY,
                    };
                    let action = Action {
                        within: calls.within.map_or(0, |w| w + 1),
                        ..self.action(ActionKind::HOLD_WHILE_GROUP_RUNNING, 0, other)
                    };
                    for site in calls.sites() {
                        self.want(site_key(site, Point::Entry), action);
                    }
                }
            }
            Intervention::HoldLocks { calls, while_running } => {
                self.hold_locks(calls, while_running);
            }
            Intervention::All { each } => {
                for part in each {
                    self.add(part);
                }
            }
        }
    }

    /// [`Intervention::HoldLocks`]: an action at every lock acquisition
    /// (each C library function that takes a mutex or write lock) of
    /// `calls`' roles, applying inside calls of its function, waiting on
    /// the group of `while_running`. Without any such function the
    /// intervention could do nothing: a clash, never installed as if it
    /// had.
    fn hold_locks(&mut self, calls: &CallSet, while_running: &CallSet) {
        let group = self.group(while_running, 0);
        let other = SiteKey { func: group, role: 0, instance: 0, point: SitePoint::ENTRY };
        let action = Action {
            within: calls.func + 1,
            ..self.action(
                ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING,
                u64::from(while_running.func),
                other,
            )
        };
        let ops = crate::predicates::lock_ops(self.functions);
        let locks: Vec<u32> = (0..ops.len() as u32)
            .filter(|&f| ops[f as usize] == crate::predicates::LockOp::Acquire)
            .collect();
        if locks.is_empty() {
            self.clash = true;
        }
        for func in locks {
            for &role in &calls.roles {
                let key = SiteKey { func, role, instance: ANY_INSTANCE, point: SitePoint::ENTRY };
                self.want(key, action);
            }
        }
    }
}

/// Two actions one intervention wants at the same key, as one, when that
/// keeps the meaning of both: holds until two calls of the same function
/// on the same role happen wait for the later one; re-executions on
/// error tests retry on either error.
fn merge(have: &Action, new: &Action) -> Option<Action> {
    if have == new {
        return Some(*have);
    }
    if have.kind != new.kind || have.within != new.within {
        return None;
    }
    match have.kind {
        ActionKind::HOLD_UNTIL
            if have.other.func == new.other.func
                && have.other.role == new.other.role
                && have.other.point == new.other.point =>
        {
            let later = if new.other.instance > have.other.instance { new } else { have };
            Some(*later)
        }
        ActionKind::REEXECUTE
            if !have.test.contains(RetTest::NOT_EQUAL)
                && !new.test.contains(RetTest::NOT_EQUAL)
                && have.value == new.value
                && have.test.contains(RetTest::FALLBACK)
                    == new.test.contains(RetTest::FALLBACK) =>
        {
            let bits = |t: RetTest| {
                [RetTest::NEGATIVE, RetTest::ZERO].into_iter().filter(move |b| t.contains(*b))
            };
            let mut test = have.test;
            for b in bits(new.test) {
                test = test.with(b);
            }
            Some(Action { test, retries: have.retries.max(new.retries), ..*have })
        }
        _ => None,
    }
}

/// The roles an intervention's parts hold threads of while they wait for
/// calls on other roles, and those roles: a hold until an event (the
/// held role waits on the event's), locks held while a group runs (the
/// takers' roles wait on the group's); a serialisation waits both ways.
/// `directed`: some part waits one way only (a hold, not a
/// serialisation).
struct Waits {
    held: BTreeSet<Role>,
    on: BTreeSet<Role>,
    directed: bool,
}

fn waits(iv: &Intervention) -> Waits {
    let mut w = Waits { held: BTreeSet::new(), on: BTreeSet::new(), directed: false };
    for part in iv.parts() {
        match part {
            Intervention::HoldUntil { site, until, .. } => {
                w.held.insert(site.role);
                w.on.insert(until.role);
                w.directed = true;
            }
            Intervention::HoldLocks { calls, while_running } => {
                w.held.extend(&calls.roles);
                w.on.extend(&while_running.roles);
                w.directed = true;
            }
            Intervention::Serialize { a, b } => {
                w.held.extend([a.role, b.role]);
                w.on.extend([a.role, b.role]);
            }
            Intervention::SerializeGroups { a, b, .. } => {
                let roles = a.roles.iter().chain(&b.roles);
                w.held.extend(roles.clone());
                w.on.extend(roles);
            }
            _ => {}
        }
    }
    w
}

/// Whether some of `interventions` can hold threads that wait for one
/// another's in a ring: each waits on a role whose threads the next holds
/// back, and one of them waits one way only (a hold until an event, locks
/// held while a group runs). Run together, a thread held until a call
/// that another hold keeps back waits out its timeout, and the round
/// would count a failure that the holds, not the program, decided
/// (stringbuffer-jdk1.4: "erase's locks wait while append runs" and
/// "append's `length` waits until erase has returned" held each other's
/// thread). A ring of serialisations alone is left to the holds' own way
/// out (`control.rs`: a group hold waiting on held threads only is let
/// go), and an intervention that holds a role it waits on itself (a
/// pool kept apart from its own class) is its own matter.
pub fn wait_on_each_other(interventions: &[Intervention]) -> bool {
    let w: Vec<Waits> = interventions.iter().map(waits).collect();
    // next[i]: the j whose held threads i's held threads wait on.
    let next: Vec<Vec<usize>> = (0..w.len())
        .map(|i| (0..w.len()).filter(|&j| j != i && !w[i].on.is_disjoint(&w[j].held)).collect())
        .collect();
    (0..w.len()).filter(|&d| w[d].directed).any(|d| {
        let mut seen = vec![false; w.len()];
        let mut stack = next[d].clone();
        while let Some(j) = stack.pop() {
            if j == d {
                return true;
            }
            if !std::mem::replace(&mut seen[j], true) {
                stack.extend(&next[j]);
            }
        }
        false
    })
}

impl Plan {
    /// `hold_timeout` bounds every hold, so a forced order that cannot be
    /// satisfied never hangs the target; `functions` give the widths of
    /// the return values the tests read.
    pub fn new(
        interventions: &[Intervention],
        hold_timeout: Duration,
        functions: &[Function],
    ) -> Plan {
        let timeout_us = hold_timeout.as_micros() as u64;
        let mut plan =
            Plan { interventions: interventions.to_vec(), hold_timeout, ..Plan::default() };
        let mut known_groups = Vec::new();
        let mut known_pairs = Vec::new();
        for (i, iv) in interventions.iter().enumerate() {
            let mut b = Builder {
                functions,
                timeout_us,
                wanted: Vec::new(),
                stamp: Vec::new(),
                groups: Vec::new(),
                known_groups: &mut known_groups,
                known_pairs: &mut known_pairs,
                clash: false,
            };
            b.add(iv);
            let member_taken = |m: &GroupMember, s: &GroupSlot| {
                plan.groups.iter().any(|(t, ts)| t == m && ts != s)
            };
            // Sites another intervention already acts at: shared when the
            // two actions merge, else a conflict.
            let mut merged: Vec<(usize, Action)> = Vec::new();
            let mut clash = b.clash || b.groups.iter().any(|(m, s)| member_taken(m, s));
            for (k, a) in &b.wanted {
                if let Some(j) = plan.actions.iter().position(|(t, _, _)| t == k) {
                    match merge(&plan.actions[j].1, a) {
                        Some(m) => merged.push((j, m)),
                        None => clash = true,
                    }
                }
            }
            if clash {
                plan.conflicts.push(i);
                continue;
            }
            for (j, m) in merged {
                plan.actions[j].1 = m;
                plan.shared.push((plan.actions[j].0, i));
            }
            let taken: Vec<SiteKey> = plan.actions.iter().map(|(k, _, _)| *k).collect();
            plan.actions.extend(
                b.wanted.into_iter().filter(|(k, _)| !taken.contains(k)).map(|(k, a)| (k, a, i)),
            );
            plan.stamp.extend(b.stamp);
            for g in b.groups {
                if !plan.groups.contains(&g) {
                    plan.groups.push(g);
                }
            }
        }
        plan.stamp.sort();
        plan.stamp.dedup();
        // Held locks are held at the synchronisation points.
        plan.sync_points = plan
            .actions
            .iter()
            .any(|(_, a, _)| a.kind == ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING);
        plan
    }

    /// The key of the action a stop at `site` served (the one the kernel
    /// finds for a call there): the stop's own, else its function's for
    /// every instance.
    pub(super) fn key_of(&self, site: &SiteKey) -> Option<SiteKey> {
        let own = self.actions.iter().find(|(k, _, _)| k == site);
        let any = || {
            let wild = SiteKey { instance: ANY_INSTANCE, ..*site };
            self.actions.iter().find(|(k, _, _)| *k == wild)
        };
        own.or_else(any).map(|(k, _, _)| *k)
    }

    /// The intervention a stop served (the one that installed its action).
    pub fn owner(&self, site: &SiteKey) -> Option<usize> {
        let key = self.key_of(site)?;
        self.actions.iter().find(|(k, _, _)| *k == key).map(|(_, _, owner)| *owner)
    }

    /// Whether a stop at `site` served intervention `i` (its own action,
    /// or one it shares).
    fn served(&self, site: &SiteKey, i: usize) -> bool {
        let Some(key) = self.key_of(site) else { return false };
        self.owner(site) == Some(i) || self.shared.contains(&(key, i))
    }

    /// Whether a stop at `site` served one of the random delays.
    pub fn is_noise(&self, site: &SiteKey) -> bool {
        self.owner(site) == Some(usize::MAX)
    }

    /// What became of each intervention, given the stops the run had. An
    /// intervention whose site was never reached, or whose wanted order
    /// already held (no stop was needed), counts as applied.
    pub fn outcome(&self, stops: &[StopRecord]) -> Vec<AppliedIntervention> {
        self.interventions
            .iter()
            .enumerate()
            .map(|(i, iv)| {
                if self.conflicts.contains(&i) {
                    return AppliedIntervention {
                        intervention: iv.clone(),
                        applied: false,
                        timed_out: false,
                        held_at_end: false,
                    };
                }
                let mine: Vec<&StopRecord> =
                    stops.iter().filter(|s| self.served(&s.site, i)).collect();
                AppliedIntervention {
                    intervention: iv.clone(),
                    applied: mine.iter().all(|s| s.applied),
                    timed_out: mine.iter().any(|s| s.timed_out),
                    held_at_end: mine.iter().any(|s| s.cut_short),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Probe, ValueType, testing::function};

    fn site(func: u32, role: u32, instance: u32) -> Site {
        Site { func, role, instance }
    }

    fn plan(ivs: &[Intervention]) -> Plan {
        Plan::new(ivs, Duration::from_millis(500), &[])
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
        let ser = |role_a, role_b| Intervention::Serialize {
            a: site(2, role_a, 1),
            b: site(3, role_b, 1),
        };
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
        let outcome = plan.outcome(&[]);
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
        let o = plan.outcome(&[stop(site_key(site(1, 2, 1), Point::Entry), false, true)]);
        assert!(!o[0].applied && o[0].timed_out);
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
                .map(|role| SiteKey {
                    func: 1,
                    role,
                    instance: ANY_INSTANCE,
                    point: SitePoint::EXIT
                })
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
        let o = two.outcome(&[held]);
        assert!(o.iter().all(|a| !a.applied && a.timed_out));
    }

    #[test]
    fn group_serialisation_counts_both_groups_and_holds_both_ways() {
        let a = CallSet { func: 1, roles: vec![1, 2], instance: 0, within: None };
        let b = CallSet { func: 2, roles: vec![1, 2], instance: 0, within: Some(3) };
        let plan = plan(&[Intervention::SerializeGroups {
            a: a.clone(),
            b: b.clone(),
            object: Some((1, 1)),
        }]);
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

    /// Every lock a call of send takes waits while a call of recv runs:
    /// one action per role of send at each C library function that takes
    /// a mutex or write lock (not at unlocks or condition waits), applying
    /// inside send only, waiting on recv's group; a stop at one of those
    /// functions, at any rank, is the intervention's.
    #[test]
    fn held_locks_wait_at_every_acquisition_inside_the_calls() {
        let sync = |id, name| Function { probe: Probe::Sync, internal: true, ..function(id, name) };
        let functions = vec![
            function(0, "send"),
            function(1, "recv"),
            sync(2, "pthread_mutex_lock"),
            sync(3, "pthread_mutex_unlock"),
            sync(4, "pthread_cond_wait"),
            sync(5, "pthread_rwlock_wrlock"),
        ];
        let calls = CallSet { func: 0, roles: vec![1, 2], instance: 0, within: None };
        let while_running = CallSet { func: 1, roles: vec![3], instance: 0, within: None };
        let iv = Intervention::HoldLocks { calls, while_running };
        let plan = Plan::new(std::slice::from_ref(&iv), Duration::from_millis(500), &functions);
        assert!(plan.conflicts.is_empty());
        assert_eq!(plan.groups.len(), 1);
        let (member, slot) = plan.groups[0];
        assert_eq!((member.func, member.role, slot.group, slot.arg), (1, 3, 1, 0));
        let mut keys: Vec<(u32, u32, u32)> =
            plan.actions.iter().map(|(k, _, _)| (k.func, k.role, k.instance)).collect();
        keys.sort_unstable();
        assert_eq!(keys, [(2, 1, 0), (2, 2, 0), (5, 1, 0), (5, 2, 0)]);
        for (_, a, owner) in &plan.actions {
            assert_eq!(a.kind, ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING);
            // Inside send (id 0 + 1); recv's group 1, any object; recv's
            // id, whose own call does not count.
            assert_eq!((a.within, a.other.func, a.other.role, a.value), (1, 1, 0, 1));
            assert_eq!(*owner, 0);
        }
        let stop = StopRecord {
            site: SiteKey { func: 5, role: 2, instance: 7, point: SitePoint::ENTRY },
            ..stop(SiteKey::default(), false, true)
        };
        let out = plan.outcome(&[stop]);
        assert!(!out[0].applied && out[0].timed_out);
        // With no lock function traced there is nothing to hold at: the
        // intervention is never installed as if it had been.
        let none = Plan::new(&[iv], Duration::from_millis(500), &functions[..2]);
        assert_eq!(none.conflicts, [0]);
        assert!(!none.outcome(&[])[0].applied);
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

    /// Noise focused on one call of a function an intervention acts on at
    /// every call (a serialisation of two groups) is dropped: installed at
    /// that call, the kernel would find the delay first and the call would
    /// not be serialised (a lock-order cycle then still formed under its
    /// own intervention, in 22 failing runs of a CI round). Noise on another
    /// role's calls of the function stays.
    #[test]
    fn noise_on_one_call_of_an_intervened_group_is_dropped() {
        let noise = |site| delay_at(site, 1860);
        let a = CallSet { func: 1, roles: vec![1], instance: 0, within: None };
        let b = CallSet { func: 1, roles: vec![2], instance: 0, within: None };
        let serialise = Intervention::SerializeGroups { a, b, object: None };
        let plan = plan(&[serialise]).with_noise(&[
            noise(site(1, 1, 1)),
            noise(site(1, 2, 3)),
            noise(site(1, 3, 1)),
        ]);
        assert_eq!(plan.noise.len(), 1);
        assert_eq!(plan.displaced, 2);
        assert!(plan.is_noise(&site_key(site(1, 3, 1), Point::Entry)));
        let at = |role, instance| {
            let key = site_key(site(1, role, instance), Point::Entry);
            plan.actions.iter().filter(|(k, _, _)| *k == key).count()
        };
        assert_eq!((at(1, 1), at(2, 3), at(3, 1)), (0, 0, 1));
    }
}
