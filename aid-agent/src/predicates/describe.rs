//! Predicates and interventions in plain words, with the function names of
//! the session and the names of its threads ("call 2 of flush on worker#1
//! runs too slow: longer than 1.25 ms, the slowest passing run"; "some call
//! of lookup from norm on the worker threads returns an error: NULL"), and
//! the same facts structured ([`Described`]) for reports to lay out as
//! they like.

use serde::{Deserialize, Serialize};

use super::{Calls, Condition, Kind, PredKey};
use crate::model::identity::{ClassId, Classes, RoleNames};
use crate::model::{CallSet, FuncId, Intervention, Point, Role, Session, Site, ValueTest};

/// One side of a predicate, structured: which calls of which function.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRef {
    pub function: String,
    /// The thread class (groups), or the thread (sites).
    pub thread: String,
    /// Calls of one site: the instance (0: every call on the thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<u32>,
    /// Groups: only calls from this traced caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// A group (some call of ...) rather than one call site.
    pub group: bool,
}

/// A predicate's parts, for reports: its kind, the calls it is about, the
/// other calls of pairwise kinds, and its named numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Described {
    pub kind: String,
    pub calls: CallRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<CallRef>,
    /// (name, value) pairs: passing value, threshold, counts, argument...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<(String, String)>,
}

pub(super) struct Names<'c> {
    funcs: Vec<String>,
    roles: RoleNames,
    classes: &'c Classes,
    points: super::base::Points,
}

impl<'c> Names<'c> {
    pub fn new(session: &Session, classes: &'c Classes) -> Names<'c> {
        let funcs = session.functions.iter().map(|f| f.name.clone()).collect();
        let roles = RoleNames::of_runs(&session.runs);
        Names { funcs, roles, classes, points: super::base::Points::new(&session.functions) }
    }

    fn func(&self, f: FuncId) -> String {
        self.funcs.get(f as usize).cloned().unwrap_or_else(|| format!("function#{f}"))
    }

    fn role(&self, r: Role) -> String {
        self.roles.label(r)
    }

    /// "main", "thread#1" for single classes; "the worker threads".
    fn class(&self, c: ClassId) -> String {
        match self.classes.single(c) {
            Some(role) => self.role(role),
            None => format!("the {} threads", self.classes.name(c)),
        }
    }

    fn call(&self, s: Site) -> String {
        format!("call {} of {} on {}", s.instance, self.func(s.func), self.role(s.role))
    }

    /// "call 2 of f on main" or "some call of f from g on the worker threads".
    fn calls(&self, func: FuncId, calls: Calls, some: &str) -> String {
        match calls {
            Calls::Site { role, instance } => self.call(Site { func, role, instance }),
            Calls::Group { class, within } => format!(
                "{some} call of {}{} on {}",
                self.func(func),
                within.map(|w| format!(" from {}", self.func(w))).unwrap_or_default(),
                self.class(class)
            ),
        }
    }

    /// ("f", "main") or ("f from g", "the worker threads"): who is called
    /// where, for counts.
    fn function_on(&self, func: FuncId, calls: Calls) -> (String, String) {
        match calls {
            Calls::Site { role, .. } => (self.func(func), self.role(role)),
            Calls::Group { class, within } => (
                format!(
                    "{}{}",
                    self.func(func),
                    within.map(|w| format!(" from {}", self.func(w))).unwrap_or_default()
                ),
                self.class(class),
            ),
        }
    }

    /// The threads `roles` stand for: a class, when they are all of one.
    fn roles_words(&self, roles: &[Role]) -> String {
        let class = (0..self.classes.names.len() as ClassId)
            .find(|&c| self.classes.roles(c) == roles && self.classes.single(c).is_none());
        match (class, roles) {
            (Some(c), _) => self.class(c),
            (None, [r]) => self.role(*r),
            (None, rs) => rs.iter().map(|&r| self.role(r)).collect::<Vec<_>>().join(", "),
        }
    }

    fn call_set(&self, c: &CallSet) -> String {
        let within = c.within.map(|w| format!(" from {}", self.func(w))).unwrap_or_default();
        match (c.instance, c.roles.as_slice()) {
            (0, _) => format!(
                "every call of {}{within} on {}",
                self.func(c.func),
                self.roles_words(&c.roles)
            ),
            (k, [r]) => {
                format!("{}{within}", self.call(Site { func: c.func, role: *r, instance: k }))
            }
            (k, rs) => format!(
                "call {k} of {}{within} on {}",
                self.func(c.func),
                rs.iter().map(|&r| self.role(r)).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// An intervention in words: "hold call 1 of close on main at its entry
    /// until call 1 of commit on committer has returned".
    pub fn intervention(&self, iv: &Intervention) -> String {
        let at = |p: Point| match p {
            Point::Entry => "at its entry",
            Point::Exit => "before it returns",
        };
        let done = |p: Point| match p {
            Point::Entry => "has started",
            Point::Exit => "has returned",
        };
        match iv {
            Intervention::ReturnEarly { site, value } => {
                format!("make {} return {value} at once, skipping its body", self.call(*site))
            }
            Intervention::OverrideReturn { site, value } => {
                format!("force {} to return {value}", self.call(*site))
            }
            Intervention::DelayExit { site, delay_us } => {
                format!(
                    "delay {} by {} before it returns",
                    self.call(*site),
                    duration(delay_us * 1000)
                )
            }
            Intervention::HoldUntil { site, point, until, until_point } => format!(
                "hold {} {} until {} {}",
                self.call(*site),
                at(*point),
                self.call(*until),
                done(*until_point)
            ),
            Intervention::Serialize { a, b } => {
                format!("run {} and {} one after the other", self.call(*a), self.call(*b))
            }
            Intervention::Reexecute { calls, test, retries, fallback } => {
                let when = match test {
                    ValueTest::Error { negative: true, zero: true } => {
                        "a negative value or 0".to_string()
                    }
                    ValueTest::Error { negative: true, .. } => "a negative value".into(),
                    ValueTest::Error { .. } => "0 (NULL or false)".into(),
                    ValueTest::NotEqual { value } => format!("a value other than {value}"),
                };
                let then = match fallback {
                    Some(v) => format!(", then make it return {v}"),
                    None => String::new(),
                };
                format!(
                    "re-execute {} whenever it returns {when} (up to {retries} times{then})",
                    self.call_set(calls)
                )
            }
            Intervention::SerializeGroups { a, b, object } => {
                let first = match self.some_call(a).strip_prefix("a ") {
                    Some(rest) => format!("no {rest}"),
                    None => format!("{} not", self.some_call(a)),
                };
                format!(
                    "let {first} start while {} runs{}, and the other way round",
                    self.some_call(b),
                    if object.is_some() { " on the same object" } else { "" }
                )
            }
            Intervention::HoldLocks { calls, while_running } => format!(
                "let every lock {} takes wait while {} runs on another thread",
                self.some_call(calls),
                self.some_call(while_running)
            ),
            Intervention::All { each } => self.all(each),
        }
    }

    /// "a call of f on the f threads", or the one call named.
    fn some_call(&self, c: &CallSet) -> String {
        match self.call_set(c).strip_prefix("every call of ") {
            Some(rest) => format!("a call of {rest}"),
            None => self.call_set(c),
        }
    }

    /// Several interventions: one line when they re-execute calls of one
    /// function against per-call values.
    fn all(&self, each: &[Intervention]) -> String {
        let per_call: Option<Vec<(&CallSet, i64)>> = each
            .iter()
            .map(|iv| match iv {
                Intervention::Reexecute {
                    calls,
                    test: ValueTest::NotEqual { value },
                    fallback: Some(f),
                    ..
                } if f == value => Some((calls, *value)),
                _ => None,
            })
            .collect();
        if let Some(list) = per_call
            && let Some((first, _)) = list.first()
            && list.iter().all(|(c, _)| c.func == first.func && c.roles == first.roles)
        {
            let retries = match each.first() {
                Some(Intervention::Reexecute { retries, .. }) => *retries,
                _ => 0,
            };
            return format!(
                "re-execute each call of {}{} on {} that returns a value other than the one every passing run returned for that call (up to {retries} times, then make it return that value; {} calls)",
                self.func(first.func),
                first.within.map(|w| format!(" from {}", self.func(w))).unwrap_or_default(),
                self.roles_words(&first.roles),
                list.len()
            );
        }
        let mut parts: Vec<String> = each.iter().take(3).map(|iv| self.intervention(iv)).collect();
        if each.len() > 3 {
            parts.push(format!("{} more", each.len() - 3));
        }
        parts.join("; and ")
    }

    /// "B is between L2 and its next statement while A is between L1 and
    /// its next (the two ran at the same time)".
    fn between_statements(&self, key: &PredKey, some: &str, other: &str) -> String {
        let line = |p: Option<u32>| {
            p.map_or_else(
                || "?".into(),
                |s| {
                    let name = self.func(s);
                    name.rsplit(" at ").next().unwrap_or(&name).to_owned()
                },
            )
        };
        let pool = key.arg & super::statements::POOL != 0;
        let wide = key.arg & super::statements::WIDE != 0;
        let rank = key.arg & !super::statements::FORM;
        let at_a = line(key.callee);
        let at_b = line(key.other.and_then(|o| self.points.of_rank(o.func, rank)));
        if pool {
            let (who, on) = self.function_on(key.func, key.calls);
            return format!(
                "{other} is between {at_b} and its next statement while calls of {who} on {on} have reached {at_a} and none has gone past its next statement (the two ran at the same time), which no passing run shows"
            );
        }
        let until = if wide { "the end of the statement after it" } else { "its next" };
        format!(
            "{other} is between {at_b} and its next statement while {some} is between {at_a} and {until} (the two ran at the same time), which no passing run shows"
        )
    }

    /// Long (about 120 lines): one arm per kind of predicate.
    pub fn describe(
        &self,
        key: &PredKey,
        cond: &Condition,
        count_range: Option<(u32, u32)>,
    ) -> String {
        let some = self.calls(key.func, key.calls, "some");
        let range = |r: Option<(u32, u32)>| match r {
            Some((lo, hi)) if lo == hi => format!("{lo}"),
            Some((lo, hi)) => format!("{lo}-{hi}"),
            None => "?".into(),
        };
        let other = key.other.map(|o| self.calls(o.func, o.calls, "some"));
        let other = other.unwrap_or_default();
        let passing = if key.is_group() { "passing call" } else { "passing run" };
        let failing = if key.is_group() { "failing call" } else { "failing run" };
        let (who, on) = self.function_on(key.func, key.calls);
        match (key.kind, cond) {
            (Kind::Failure, _) | (_, Condition::Failure) => "the run fails".into(),
            (_, Condition::RetNot { value }) => {
                format!(
                    "{some} returns a value other than {value}, which every passing run returned"
                )
            }
            (_, Condition::RetNotPerCall { .. }) => format!(
                "{some} returns a value other than the one every passing run returned for that call"
            ),
            (_, Condition::ErrorValue { negative, zero }) => {
                let what = match (negative, zero) {
                    (true, true) => "a negative value or 0",
                    (true, false) => "a negative value",
                    (false, true) => "0 (NULL or false)",
                    (false, false) => "an error value",
                };
                format!("{some} returns an error: {what}")
            }
            (_, Condition::LongerThan { max_ns, passing_ns, failing_ns }) => format!(
                "{some} runs too slow: longer than {} (slowest {passing} {}, fastest {failing} {})",
                duration(*max_ns),
                duration(*passing_ns),
                duration(*failing_ns)
            ),
            (_, Condition::ShorterThan { min_ns, passing_ns, failing_ns }) => format!(
                "{some} runs too fast: shorter than {} (fastest {passing} {}, slowest {failing} {})",
                duration(*min_ns),
                duration(*passing_ns),
                duration(*failing_ns)
            ),
            (_, Condition::ArgNot { value }) => format!(
                "{some} receives argument {} other than {value}, which every passing run passed",
                key.arg + 1
            ),
            (_, Condition::ArgNotPerCall { .. }) => format!(
                "{some} receives argument {} other than the one every passing run passed to that call",
                key.arg + 1
            ),
            (_, Condition::CountAbove { max: 0 }) => {
                format!("{who} is called on {on}, which no passing run does")
            }
            (_, Condition::CountAbove { max }) => format!(
                "{who} is called more than {max} times on {on} (passing runs: {})",
                range(count_range)
            ),
            (_, Condition::CountBelow { min }) => format!(
                "{who} is called fewer than {min} times on {on} (passing runs: {})",
                range(count_range)
            ),
            (_, Condition::KeyRepeats { same }) => {
                format!("{who} is called twice on {on} for the same {}", same.field.name)
            }
            (_, Condition::NoCall) => format!(
                "{who} is never called on {on} (passing runs call it {} times)",
                range(count_range)
            ),
            (_, Condition::EndsBefore) => {
                format!("{some} ends before {other} starts, which no passing run shows")
            }
            (_, Condition::EntersBefore) => {
                format!("{some} starts before {other} starts, which no passing run shows")
            }
            (_, Condition::ExitsBefore) => {
                format!("{some} ends while {other} runs, which no passing run shows")
            }
            (_, Condition::Intersect) => {
                format!("{other} starts while {some} runs, which no passing run shows")
            }
            (_, Condition::OverlapSamePointer) => format!(
                "{some} and {other} run at the same time on the same object, which no passing run shows"
            ),
            (_, Condition::DataRace { object, a_writes, b_writes, runs }) => {
                // The overlap's words first: a data race is that overlap.
                let writers = match (a_writes, b_writes) {
                    (true, true) => "both write".to_owned(),
                    (true, false) => format!("{some} writes"),
                    (false, true) => format!("{other} writes"),
                    (false, false) => "neither writes".to_owned(),
                };
                format!(
                    "{some} and {other} run at the same time on the same object, which no passing run shows: a data race on {object}, which {writers} (hardware watchpoints, {runs} re-run(s))"
                )
            }
            (_, Condition::AnyPair { relation, pairs }) => self.any_pair(relation, pairs),
            (_, Condition::AfterAll { pairs, any }) => self.after_all(&some, pairs, any),
            (_, Condition::InterleavedSections) => self.interleaved(key, &some, &other),
            (_, Condition::RunsBetweenStatements) => self.between_statements(key, &some, &other),
            (_, Condition::SectionsInOrder) => format!(
                "the first critical section of {some} on a lock (one it takes or runs in) comes before the first section of {other} on it, which no passing run shows"
            ),
            (_, Condition::TakenBeforeFirstSection) => {
                let which = match key.arg {
                    0 => String::new(),
                    n => format!("the {} lock that call takes; ", ordinal(n.into())),
                };
                format!(
                    "{other} takes a lock after {some} has started and before that call first takes it ({which}what it did before taking the lock may no longer hold when it does), which no passing run shows"
                )
            }
            (_, Condition::LockCycle { held, takes }) => {
                self.lock_cycle(key, &some, &other, *held, *takes)
            }
            (_, Condition::AheadOfProducer) => self.ahead_of_producer(key, &some, &who, &on),
            (_, Condition::GroupOverlap { shared, object, same }) => {
                self.group_overlap(key, &some, &other, *shared, object.as_ref(), same.as_ref())
            }
        }
    }

    /// A [`Condition::AheadOfProducer`] in words: the consumer's calls
    /// (`some`, `who` on `on`) against the producer's (`key.other`).
    fn ahead_of_producer(&self, key: &PredKey, some: &str, who: &str, on: &str) -> String {
        let (p, p_on) = key.other.map(|o| self.function_on(o.func, o.calls)).unwrap_or_default();
        format!(
            "{some} starts when no more calls of {p} on {p_on} have returned than calls of {who} on {on} have started before it: {who} runs ahead of {p}, which no passing run shows"
        )
    }

    /// An [`Condition::InterleavedSections`] in words; its form (`arg`,
    /// `locks.rs`) says which of the other call's sections came between.
    fn interleaved(&self, key: &PredKey, some: &str, other: &str) -> String {
        let split = self.second(key, some);
        let last = match key.arg {
            super::locks::LAST => ", the last to hold it before that call took it again",
            super::locks::OUT_OF_TURN => {
                ", the first of the two taken with no section of the other's since its own previous one or its start (a turn out of order)"
            }
            _ => "",
        };
        let takes = match super::locks::nth_of(key.arg) {
            Some(n) => format!("takes a lock for the {} time in its call", ordinal(n.into())),
            None if key.arg == super::locks::TWICE => "takes a lock twice".to_owned(),
            None => "takes a lock".to_owned(),
        };
        format!(
            "{other} {takes} while {split} is between two critical sections on it (released it, to take it again){last}, which no passing run shows"
        )
    }

    /// The second call of a pair in words: "another call of f" when it is
    /// a call of the same function on the same threads as the first (the
    /// pair is two such calls), else `named`, its own words.
    fn second(&self, key: &PredKey, named: &str) -> String {
        match key.other {
            Some(o) if o.func == key.func && o.calls == key.calls => {
                self.calls(key.func, key.calls, "another")
            }
            _ => named.to_owned(),
        }
    }

    /// An any-pair predicate in words: up to three of its pairs as
    /// alternatives, then how many more. Apart from [`Names::describe`]
    /// because it lists pairs of calls rather than naming one or two.
    fn any_pair(&self, relation: &Condition, pairs: &[super::PairMember]) -> String {
        let (verb, then) = match *relation {
            Condition::EntersBefore => ("starts before", "starts"),
            Condition::ExitsBefore => ("ends while", "runs"),
            _ => ("ends before", "starts"),
        };
        let mut alts: Vec<String> = pairs
            .iter()
            .take(3)
            .map(|m| format!("{} {verb} {} {then}", self.call(m.a), self.call(m.b)))
            .collect();
        if pairs.len() > 3 {
            alts.push(format!("{} more such pairs", pairs.len() - 3));
        }
        format!("{}, which no passing run shows", alts.join(", or "))
    }

    /// "B starts only after A1, A2 and A3 have all ended", with the
    /// earlier calls in the order of the pairs. Apart from
    /// [`Names::describe`] because it names a list of calls.
    fn after_all(
        &self,
        some: &str,
        pairs: &[super::PairMember],
        any: &[super::PairMember],
    ) -> String {
        // The parts before B share B; an order between two of them
        // (`after_all::INNER`) comes last.
        let b = pairs.first().map(|m| m.b);
        let (outer, inner): (Vec<&super::PairMember>, Vec<&super::PairMember>) =
            pairs.iter().partition(|m| Some(m.b) == b);
        let list = |calls: Vec<String>, and: &str| {
            let mut calls = calls;
            let last = calls.pop().unwrap_or_default();
            if calls.is_empty() { last } else { format!("{} {and} {last}", calls.join(", ")) }
        };
        let n = outer.len();
        let all = list(outer.iter().map(|m| self.call(m.a)).collect(), "and");
        let sections = pairs.first().is_some_and(|m| m.sections);
        let (have, each) = if n == 1 { ("has", "") } else { ("have", " each") };
        let head = if sections {
            format!("{some} takes a lock only after {all} {have}{each} held it and let it go")
        } else {
            let all_ = if n == 1 { "" } else { " all" };
            format!("{some} starts only after {all} {have}{all_} ended")
        };
        let tail = "which no passing run shows (each of these orders alone, some do)";
        if let Some(m) = inner.first() {
            let (x, y) = (self.call(m.a), self.call(m.b));
            return if sections {
                format!(
                    "{head}, and {x} held it before {y} did (the order of their first critical sections on it), {tail}"
                )
            } else {
                format!("{head}, and {x} ended before {y} started, {tail}")
            };
        }
        if let Some(m) = any.first() {
            let y = self.call(m.b);
            let xs = list(any.iter().map(|m| self.call(m.a)).collect(), "or");
            return if sections {
                format!(
                    "{head}, and {y} was not the first to hold it: {xs} did before it (their first critical sections on it), {tail}"
                )
            } else {
                format!(
                    "{head}, and {y} was not the first to end: {xs} ended before it started, {tail}"
                )
            };
        }
        if sections {
            format!(
                "{head} (their first critical sections on it came before its own), which no passing run shows (each of them alone coming first, some do)"
            )
        } else {
            format!("{head}, which no passing run shows (each of them alone ending first, some do)")
        }
    }

    /// A lock-order cycle in words: which lock each call holds and which
    /// it waits for, by the order the first call took them (`held` and
    /// `takes` count from 1; 0 when the failing runs disagreed). Apart from
    /// [`Names::describe`] because it is the one description that names
    /// four things.
    fn lock_cycle(&self, key: &PredKey, some: &str, other: &str, held: u32, takes: u32) -> String {
        let other = self.second(key, other);
        let (holds, waits, again, first) = if held > 0 && takes > 0 {
            let (h, t) = (ordinal(held), ordinal(takes));
            (format!("its {h} lock"), format!("its {t}"), format!("that {t} lock"), h)
        } else {
            ("a lock".into(), "a second".into(), "the second".into(), "first".into())
        };
        format!(
            "{some} holds {holds} and waits for {waits} while {other} holds {again} and waits for the {first}: a lock-order cycle (deadlock), which no passing run shows"
        )
    }

    /// Two groups' calls overlapping in time, in words: on which object,
    /// and whether for the same key (a necessary condition, learned whether
    /// or not passing runs show it). Apart from [`Names::describe`] because
    /// it is the one description built of three optional parts.
    fn group_overlap(
        &self,
        key: &PredKey,
        some: &str,
        other: &str,
        shared: bool,
        object: Option<&super::ObjectName>,
        same: Option<&super::SameField>,
    ) -> String {
        let on = match (shared, object) {
            (true, Some(o)) => format!(
                " on the same object (first passed as argument {} of {} on {})",
                o.arg + 1,
                self.func(o.func),
                self.class(o.class)
            ),
            (true, None) => " on the same object".into(),
            (false, _) => String::new(),
        };
        // Learned whether or not passing runs show it (a necessary
        // condition): the evidence says which.
        let (asked, unseen) = match same {
            Some(s) => {
                let calls = key
                    .callee
                    .map(|g| format!(", and both call {}", self.func(g)))
                    .unwrap_or_default();
                (format!(", both for the same {}{calls}", s.field.name), "")
            }
            None => (String::new(), ", which no passing run shows"),
        };
        let other = self.second(key, other);
        format!("{some} and {other} run at the same time{on}{asked}{unseen}")
    }

    /// The structured form of a predicate.
    pub fn structured(&self, key: &PredKey, cond: &Condition) -> Described {
        let side = |func: FuncId, calls: Calls| match calls {
            Calls::Site { role, instance } => CallRef {
                function: self.func(func),
                thread: self.role(role),
                instance: Some(instance),
                within: None,
                group: false,
            },
            Calls::Group { class, within } => CallRef {
                function: self.func(func),
                thread: self.class(class),
                instance: None,
                within: within.map(|w| self.func(w)),
                group: true,
            },
        };
        let values = match cond {
            Condition::RetNot { value } => vec![("passing_value".into(), value.to_string())],
            Condition::ArgNot { value } => vec![
                ("argument".into(), (key.arg + 1).to_string()),
                ("passing_value".into(), value.to_string()),
            ],
            Condition::ErrorValue { negative, zero } => {
                vec![("negative".into(), negative.to_string()), ("zero".into(), zero.to_string())]
            }
            Condition::LongerThan { max_ns, passing_ns, failing_ns }
            | Condition::ShorterThan { min_ns: max_ns, passing_ns, failing_ns } => vec![
                ("threshold_ns".into(), max_ns.to_string()),
                ("passing_ns".into(), passing_ns.to_string()),
                ("failing_ns".into(), failing_ns.to_string()),
            ],
            Condition::CountAbove { max } => vec![("passing_max".into(), max.to_string())],
            Condition::CountBelow { min } => vec![("passing_min".into(), min.to_string())],
            Condition::RetNotPerCall { expected } | Condition::ArgNotPerCall { expected } => {
                vec![("calls_with_a_passing_value".into(), expected.len().to_string())]
            }
            Condition::AnyPair { pairs, .. } | Condition::AfterAll { pairs, .. } => {
                vec![("pairs".into(), pairs.len().to_string())]
            }
            Condition::GroupOverlap { shared, same, .. } => {
                let mut v = vec![("same_object".into(), shared.to_string())];
                if let Some(s) = same {
                    v.push(("same_field".into(), s.field.name.clone()));
                }
                if let Some(g) = key.callee {
                    v.push(("both_call".into(), self.func(g)));
                }
                v
            }
            Condition::LockCycle { held, takes } => vec![
                ("held_lock".into(), held.to_string()),
                ("waited_lock".into(), takes.to_string()),
            ],
            Condition::DataRace { object, a_writes, b_writes, runs } => vec![
                ("object".into(), object.clone()),
                ("first_writes".into(), a_writes.to_string()),
                ("second_writes".into(), b_writes.to_string()),
                ("watched_runs".into(), runs.to_string()),
            ],
            _ => Vec::new(),
        };
        Described {
            kind: key.kind.name().into(),
            calls: if key.kind == Kind::Failure {
                CallRef::default()
            } else {
                side(key.func, key.calls)
            },
            other: key.other.map(|o| side(o.func, o.calls)),
            values,
        }
    }
}

/// 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st.
fn ordinal(k: u32) -> String {
    let suffix = match (k % 10, k % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{k}{suffix}")
}

/// A duration for people ("792 µs", "8.2 ms"): [`crate::util::human::duration`].
pub fn duration(ns: u64) -> String {
    crate::util::human::duration(ns)
}
