//! Predicate descriptions in plain words, with the function names of the
//! session and the role names of its threads ("call 2 of flush on
//! worker#1 runs too slow: longer than 1.25 ms, the slowest passing run").

use std::collections::HashMap;

use super::{Condition, Kind, PredKey};
use crate::model::{Intervention, Point, Role, Session, Site};

pub(super) struct Names {
    funcs: Vec<String>,
    roles: HashMap<Role, String>,
}

impl Names {
    pub fn new(session: &Session) -> Names {
        let funcs = session.functions.iter().map(|f| f.name.clone()).collect();
        let mut roles = HashMap::new();
        for run in &session.runs {
            for t in &run.threads {
                roles.entry(t.role).or_insert_with(|| run.role_name(t.role));
            }
        }
        Names { funcs, roles }
    }

    fn func(&self, f: u32) -> String {
        self.funcs.get(f as usize).cloned().unwrap_or_else(|| format!("function#{f}"))
    }

    fn role(&self, r: Role) -> String {
        self.roles
            .get(&r)
            .cloned()
            .unwrap_or_else(|| if r == 0 { "main".into() } else { format!("thread#{r}") })
    }

    fn call(&self, s: Site) -> String {
        format!("call {} of {} on {}", s.instance, self.func(s.func), self.role(s.role))
    }

    /// An intervention in words: "hold call 1 of close on main at its entry
    /// until call 1 of commit on committer#1 has returned".
    pub fn intervention(&self, iv: &Intervention) -> String {
        let at = |p: Point| match p {
            Point::Entry => "at its entry",
            Point::Exit => "before it returns",
        };
        let done = |p: Point| match p {
            Point::Entry => "has started",
            Point::Exit => "has returned",
        };
        match *iv {
            Intervention::ReturnEarly { site, value } => {
                format!("make {} return {value} at once, skipping its body", self.call(site))
            }
            Intervention::OverrideReturn { site, value } => {
                format!("force {} to return {value}", self.call(site))
            }
            Intervention::DelayExit { site, delay_us } => {
                format!(
                    "delay {} by {} before it returns",
                    self.call(site),
                    duration(delay_us * 1000)
                )
            }
            Intervention::HoldUntil { site, point, until, until_point } => format!(
                "hold {} {} until {} {}",
                self.call(site),
                at(point),
                self.call(until),
                done(until_point)
            ),
            Intervention::Serialize { a, b } => {
                format!("run {} and {} one after the other", self.call(a), self.call(b))
            }
        }
    }

    pub fn describe(
        &self,
        key: &PredKey,
        cond: &Condition,
        count_range: Option<(u32, u32)>,
    ) -> String {
        let site = key.site();
        let range = |r: Option<(u32, u32)>| match r {
            Some((lo, hi)) if lo == hi => format!("{lo}"),
            Some((lo, hi)) => format!("{lo}-{hi}"),
            None => "?".into(),
        };
        match (key.kind, cond) {
            (Kind::Failure, _) => "the run fails".into(),
            (_, Condition::RetNot { value }) => format!(
                "{} returns a value other than {value}, which every passing run returned",
                self.call(site)
            ),
            (_, Condition::ErrorValue { negative, zero }) => {
                let what = match (negative, zero) {
                    (true, true) => "a negative value or 0",
                    (true, false) => "a negative value",
                    (false, true) => "0 (NULL or false)",
                    (false, false) => "an error value",
                };
                format!("{} returns an error: {what}", self.call(site))
            }
            (_, Condition::LongerThan { max_ns, passing_ns, failing_ns }) => format!(
                "{} runs too slow: longer than {} (slowest passing run {}, fastest failing run {})",
                self.call(site),
                duration(*max_ns),
                duration(*passing_ns),
                duration(*failing_ns)
            ),
            (_, Condition::ShorterThan { min_ns, passing_ns, failing_ns }) => format!(
                "{} runs too fast: shorter than {} (fastest passing run {}, slowest failing run {})",
                self.call(site),
                duration(*min_ns),
                duration(*passing_ns),
                duration(*failing_ns)
            ),
            (_, Condition::CountAbove { max: 0 }) => format!(
                "{} is called on {}, which no passing run does",
                self.func(key.func),
                self.role(key.role)
            ),
            (_, Condition::CountAbove { max }) => {
                format!(
                    "{} is called more than {max} times on {} (passing runs: {})",
                    self.func(key.func),
                    self.role(key.role),
                    range(count_range)
                )
            }
            (_, Condition::CountBelow { min }) => {
                format!(
                    "{} is called fewer than {min} times on {} (passing runs: {})",
                    self.func(key.func),
                    self.role(key.role),
                    range(count_range)
                )
            }
            (_, Condition::NoCall) => {
                format!(
                    "{} is never called on {} (passing runs call it {} times)",
                    self.func(key.func),
                    self.role(key.role),
                    range(count_range)
                )
            }
            (_, Condition::EndsBefore) => match key.other {
                Some(o) => format!(
                    "{} ends before {} starts, which no passing run shows",
                    self.call(site),
                    self.call(o)
                ),
                None => format!("{} ends early", self.call(site)),
            },
            (_, Condition::OverlapSamePointer) => match key.other {
                Some(o) => format!(
                    "{} and {} run at the same time on the same object, which no passing run shows",
                    self.call(site),
                    self.call(o)
                ),
                None => format!("{} overlaps another call", self.call(site)),
            },
            (_, Condition::Failure) => "the run fails".into(),
        }
    }
}

/// A duration for people ("792 µs", "8.2 ms"): [`crate::util::human::duration`].
pub(crate) fn duration(ns: u64) -> String {
    crate::util::human::duration(ns)
}
