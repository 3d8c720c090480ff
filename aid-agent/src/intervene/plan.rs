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
        AppliedIntervention, CallSet, Function, Intervention, Noise, Point, Role, Run, Site,
        ValueKind, ValueTest,
    },
    predicates::LockOp,
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
    /// Keys of actions that yield to any other wanted at the same key
    /// (an intervention's or noise's): the entry waits of held locks.
    pub optional: Vec<SiteKey>,
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
    /// Actions installed only where nothing else acts (the wait of
    /// [`Builder::hold_locks`]).
    optional: Vec<(SiteKey, Action)>,
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
    ///
    /// A lock call is checked at its entry and takes the lock a little
    /// later; a call of the group entering in between (the taker
    /// preempted there) would have the lock taken inside it. So the
    /// takers' releases and condition waits are marked
    /// ([`ActionKind::LOCKERS_RELEASE`]), and each call of the group waits
    /// at its entry while a taker that found the group idle has not let
    /// its lock go ([`ActionKind::HOLD_WHILE_LOCKERS`]). That wait is
    /// optional: where another action wants the same entry, it yields. A
    /// try-lock is held but not counted among the takers
    /// ([`aid_common::LOCK_DOES_NOT_WAIT`]): one that fails has no lock to
    /// let go.
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
        let ops = &crate::predicates::lock_ops(self.functions);
        let with = |op: LockOp| (0..ops.len() as u32).filter(move |&f| ops[f as usize] == op);
        let locks: Vec<u32> = with(LockOp::Acquire).collect();
        if locks.is_empty() {
            self.clash = true;
        }
        let lets_go: Vec<u32> = with(LockOp::Release).chain(with(LockOp::Wait)).collect();
        let released = Action { kind: ActionKind::LOCKERS_RELEASE, ..Action::default() };
        for &role in &calls.roles {
            let at = |func| SiteKey { func, role, instance: ANY_INSTANCE, point: SitePoint::ENTRY };
            for &func in &locks {
                let f = &self.functions[func as usize];
                let tries = crate::predicates::takes_without_waiting(f);
                let retries = if tries { aid_common::LOCK_DOES_NOT_WAIT } else { 0 };
                self.want(at(func), Action { retries, ..action });
            }
            for &func in &lets_go {
                self.want(at(func), released);
            }
        }
        let wait = Action {
            within: while_running.within.map_or(0, |w| w + 1),
            ..self.action(ActionKind::HOLD_WHILE_LOCKERS, 0, other)
        };
        for site in while_running.sites() {
            self.optional.push((site_key(site, Point::Entry), wait));
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
                optional: Vec::new(),
                clash: false,
            };
            b.add(iv);
            // An optional action yields to one this intervention wants.
            for (k, _) in &b.wanted {
                plan.drop_optional(k);
            }
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
            for (k, a) in b.optional {
                if !plan.actions.iter().any(|(t, _, _)| *t == k) {
                    plan.actions.push((k, a, i));
                    plan.optional.push(k);
                }
            }
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

    /// Takes the optional action at `key` out, if one is there: another
    /// (an intervention's, or noise's) wants that key.
    pub(super) fn drop_optional(&mut self, key: &SiteKey) {
        if let Some(j) = self.optional.iter().position(|o| o == key) {
            self.optional.swap_remove(j);
            self.actions.retain(|(t, _, _)| t != key);
        }
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

    /// Whether the action at `key` is a wait on a group that the kernel
    /// goes on to after noise at one of its calls (`hold_after_noise`).
    pub(super) fn waits_after_noise(&self, key: &SiteKey) -> bool {
        key.instance == ANY_INSTANCE
            && self.actions.iter().any(|(k, a, _)| k == key && a.kind.waits_after_noise())
    }

    /// The intervention a stop served (the one that installed its action).
    pub fn owner(&self, site: &SiteKey) -> Option<usize> {
        let key = self.key_of(site)?;
        self.owner_at(&key)
    }

    fn owner_at(&self, key: &SiteKey) -> Option<usize> {
        self.actions.iter().find(|(k, _, _)| k == key).map(|(_, _, owner)| *owner)
    }

    /// Whether `stop` served intervention `i` (its own action, or one it
    /// shares). A wait on a group after noise at the same call was
    /// installed for every call of its function.
    fn served(&self, stop: &StopRecord, i: usize) -> bool {
        let Some(mut key) = self.key_of(&stop.site) else { return false };
        let every_call = SiteKey { instance: ANY_INSTANCE, ..key };
        if self.owner_at(&key) == Some(usize::MAX)
            && !stop.action.is_noise_kind()
            && self.waits_after_noise(&every_call)
        {
            key = every_call;
        }
        self.owner_at(&key) == Some(i) || self.shared.contains(&(key, i))
    }

    /// Whether a stop at `site` served one of the random delays.
    pub fn is_noise(&self, site: &SiteKey) -> bool {
        self.owner(site) == Some(usize::MAX)
    }

    /// What became of each intervention, given the stops the run had
    /// (`start_ns`: the run's start, on the stops' clock). An
    /// intervention whose site was never reached, or whose wanted order
    /// already held (no stop was needed), counts as applied. One acts
    /// from its first stop. One that changes a value may do so in the
    /// kernel without a stop: it acts from the first call of `run` it
    /// changes ([`Intervention::changes_values_from`]), or from the start
    /// when the run lost events (that call may be among them).
    pub fn outcome(
        &self,
        stops: &[StopRecord],
        start_ns: u64,
        run: &Run,
    ) -> Vec<AppliedIntervention> {
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
                        acted_ns: None,
                    };
                }
                let mine: Vec<&StopRecord> = stops.iter().filter(|s| self.served(s, i)).collect();
                let first_stop = mine.iter().map(|s| s.probe_ns.saturating_sub(start_ns)).min();
                AppliedIntervention {
                    intervention: iv.clone(),
                    applied: mine.iter().all(|s| s.applied),
                    timed_out: mine.iter().any(|s| s.timed_out),
                    held_at_end: mine.iter().any(|s| s.cut_short),
                    acted_ns: if !iv.changes_values() {
                        first_stop
                    } else if run.complete {
                        first_stop.into_iter().chain(iv.changes_values_from(&run.calls)).min()
                    } else {
                        Some(0)
                    },
                }
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
