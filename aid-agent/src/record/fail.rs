//! When a run counts as failed: `--fail-on` rules on how a program ended
//! (exit code, signal, timeout, output), and `--fail-if` checks on return
//! values for the units of a live service.

use std::time::Duration;

use nix::sys::signal::Signal;
use regex::Regex;

use crate::{
    model::{Call, FuncId, Function, Label},
    sys::spawn::Exit,
};

#[derive(Debug, thiserror::Error)]
pub enum FailError {
    #[error(
        "invalid --fail-on rule `{rule}`: {reason} (rules: nonzero, exit=N, signal, signal=NAME, timeout, hang, stdout:REGEX, stderr:REGEX, output:REGEX)"
    )]
    BadRule { rule: String, reason: String },
    #[error(
        "invalid --fail-if `{text}`: {reason} (form: 'FN ret < 0', 'FN ret == -1', 'FN ret != 0', 'FN ret > 5', 'FN ret null')"
    )]
    BadCondition { text: String, reason: String },
    #[error("--timeout 0s would kill every run at once: give a positive duration, e.g. 60s")]
    ZeroTimeout,
}

/// How runs of a program are judged and bounded.
#[derive(Clone, Debug)]
pub struct RunPolicy {
    pub rules: Vec<FailRule>,
    /// The rules as the user gave them (the session header keeps them).
    pub texts: Vec<String>,
    /// A run still going after this long is killed and counts as failed.
    pub timeout: Duration,
    /// A run all of whose threads have waited for one another, with no
    /// progress, for longer than this is killed and counts as failed with
    /// the reason `hang` (`sys/hang.rs`); None: not watched.
    pub hang_after: Option<Duration>,
}

/// `--hang-after` unless given: a deadlock is recognised a second after
/// the last thread started waiting.
pub const HANG_AFTER: Duration = Duration::from_secs(1);

impl RunPolicy {
    /// The rules parsed from `texts`; none given means the defaults:
    /// nonzero exit, a signal, a timeout, a hang. Hangs are watched for
    /// [`HANG_AFTER`] ([`RunPolicy::with_hang_after`] changes it).
    pub fn new(texts: &[String], timeout: Duration) -> Result<RunPolicy, FailError> {
        if timeout.is_zero() {
            return Err(FailError::ZeroTimeout);
        }
        let texts: Vec<String> = if texts.is_empty() {
            vec!["nonzero".into(), "signal".into(), "timeout".into(), "hang".into()]
        } else {
            texts.to_vec()
        };
        let rules = texts.iter().map(|t| FailRule::parse(t)).collect::<Result<_, _>>()?;
        Ok(RunPolicy { rules, texts, timeout, hang_after: Some(HANG_AFTER) })
    }

    /// Hangs recognised after `bound` (zero: not watched for, a hanging
    /// run lasts until the timeout).
    #[must_use]
    pub fn with_hang_after(mut self, bound: Duration) -> RunPolicy {
        self.hang_after = (!bound.is_zero()).then_some(bound);
        self
    }
}

/// One way a run can count as failed.
#[derive(Clone, Debug)]
pub enum FailRule {
    NonZero,
    Exit(i32),
    Signal(Option<i32>),
    Timeout,
    /// Every thread waited for another past `--hang-after`.
    Hang,
    Stdout(Regex),
    Stderr(Regex),
    Output(Regex),
}

impl FailRule {
    pub fn defaults() -> Vec<FailRule> {
        vec![FailRule::NonZero, FailRule::Signal(None), FailRule::Timeout, FailRule::Hang]
    }

    pub fn parse(rule: &str) -> Result<FailRule, FailError> {
        let bad =
            |reason: &str| FailError::BadRule { rule: rule.to_owned(), reason: reason.to_owned() };
        // The regex crate draws a caret under the pattern over several
        // lines; its last line says what is wrong.
        let regex = |r: &str| {
            Regex::new(r).map_err(|e| {
                let text = e.to_string();
                let last = text.lines().last().unwrap_or_default();
                bad(&format!("invalid regex: {}", last.trim_start_matches("error: ")))
            })
        };
        Ok(match rule {
            "nonzero" | "exit" => FailRule::NonZero,
            "signal" => FailRule::Signal(None),
            "timeout" => FailRule::Timeout,
            "hang" => FailRule::Hang,
            _ if rule.starts_with("exit=") => {
                FailRule::Exit(rule[5..].parse().map_err(|_| bad("exit code must be a number"))?)
            }
            _ if rule.starts_with("signal=") => {
                let s = &rule[7..];
                let num = s
                    .parse::<i32>()
                    .ok()
                    .or_else(|| signal_number(s))
                    .ok_or_else(|| bad("unknown signal"))?;
                FailRule::Signal(Some(num))
            }
            _ if rule.starts_with("stdout:") => FailRule::Stdout(regex(&rule[7..])?),
            _ if rule.starts_with("stderr:") => FailRule::Stderr(regex(&rule[7..])?),
            _ if rule.starts_with("output:") => FailRule::Output(regex(&rule[7..])?),
            _ => return Err(bad("unknown rule")),
        })
    }

    /// Why this rule says the run failed, or None.
    fn verdict(&self, exit: &Exit) -> Option<String> {
        match self {
            FailRule::NonZero => exit.code.filter(|c| *c != 0).map(|c| format!("exit code {c}")),
            FailRule::Exit(n) => (exit.code == Some(*n)).then(|| format!("exit code {n}")),
            FailRule::Signal(want) => exit
                .signal
                .filter(|s| want.is_none_or(|w| w == *s))
                .map(|s| format!("killed by {}", signal_name(s))),
            FailRule::Timeout => exit.timed_out.then(|| TIMED_OUT.to_owned()),
            FailRule::Hang => exit.hung.is_some().then(|| HANG.to_owned()),
            FailRule::Stdout(r) => {
                r.is_match(&exit.stdout.text).then(|| format!("stdout matched /{r}/"))
            }
            FailRule::Stderr(r) => {
                r.is_match(&exit.stderr.text).then(|| format!("stderr matched /{r}/"))
            }
            FailRule::Output(r) => (r.is_match(&exit.stdout.text) || r.is_match(&exit.stderr.text))
                .then(|| format!("output matched /{r}/")),
        }
    }
}

pub fn signal_number(name: &str) -> Option<i32> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
    full.parse::<Signal>().ok().map(|s| s as i32)
}

pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_owned())
}

/// The reason of a run labelled failing because it hung.
pub const HANG: &str = "hang";

/// The reason of a run labelled failing because it reached `--timeout`.
pub const TIMED_OUT: &str = "timed out";

/// Judges a finished run: fail if any rule says so (the first one's reason
/// is kept), pass otherwise.
pub fn judge(exit: &Exit, rules: &[FailRule]) -> (Label, String) {
    // A timed-out or hung run is killed by us; it never counts as a clean
    // pass.
    if exit.timed_out {
        return (Label::Fail, TIMED_OUT.to_owned());
    }
    if exit.hung.is_some() {
        return (Label::Fail, HANG.to_owned());
    }
    for rule in rules {
        if let Some(reason) = rule.verdict(exit) {
            return (Label::Fail, reason);
        }
    }
    let reason = match (exit.code, exit.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (_, Some(s)) => format!("killed by {}", signal_name(s)),
        _ => String::new(),
    };
    (Label::Pass, reason)
}

/// A comparison of a return value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Lt(i64),
    Le(i64),
    Gt(i64),
    Ge(i64),
    Eq(i64),
    Ne(i64),
    Null,
    NonNull,
}

impl Comparison {
    pub fn holds(self, v: i64) -> bool {
        match self {
            Comparison::Lt(x) => v < x,
            Comparison::Le(x) => v <= x,
            Comparison::Gt(x) => v > x,
            Comparison::Ge(x) => v >= x,
            Comparison::Eq(x) => v == x,
            Comparison::Ne(x) => v != x,
            Comparison::Null => v == 0,
            Comparison::NonNull => v != 0,
        }
    }
}

/// `FN ret < 0` and friends, with the function still to be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailIf {
    pub function: String,
    pub cond: Comparison,
    pub text: String,
}

impl FailIf {
    pub fn parse(text: &str) -> Result<FailIf, FailError> {
        let bad = |reason: &str| FailError::BadCondition {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let words: Vec<&str> = text.split_whitespace().collect();
        let (function, rest) = match words.as_slice() {
            [f, "ret" | "returns", rest @ ..] => (*f, rest),
            _ => return Err(bad("expected a function name followed by `ret`")),
        };
        let value = |s: &str| -> Result<i64, FailError> {
            let (neg, digits) = s.strip_prefix('-').map_or((false, s), |d| (true, d));
            let v = match digits.strip_prefix("0x") {
                Some(h) => i64::from_str_radix(h, 16),
                None => digits.parse(),
            }
            .map_err(|_| bad("the value must be an integer"))?;
            Ok(if neg { -v } else { v })
        };
        let cond = match rest {
            ["null" | "NULL"] => Comparison::Null,
            ["nonnull" | "!null"] => Comparison::NonNull,
            ["<", v] => Comparison::Lt(value(v)?),
            ["<=", v] => Comparison::Le(value(v)?),
            [">", v] => Comparison::Gt(value(v)?),
            [">=", v] => Comparison::Ge(value(v)?),
            ["==" | "=", v] => Comparison::Eq(value(v)?),
            ["!=", v] => Comparison::Ne(value(v)?),
            _ => {
                return Err(bad(
                    "expected an operator (<, <=, >, >=, ==, !=) and a value, or `null`",
                ));
            }
        };
        Ok(FailIf { function: function.to_owned(), cond, text: text.to_owned() })
    }
}

/// A resolved failure condition.
#[derive(Clone, Debug)]
pub struct ReturnCheck {
    pub funcs: Vec<FuncId>,
    pub cond: Comparison,
    pub text: String,
}

/// Why a set of calls counts as failed, if it does.
pub fn failure_reason(
    calls: &[Call],
    conditions: &[ReturnCheck],
    functions: &[Function],
) -> Option<String> {
    for c in calls {
        let Some(ret) = c.ret else { continue };
        for cond in conditions {
            if cond.funcs.contains(&c.func) && cond.cond.holds(ret) {
                let name = functions.get(c.func as usize).map_or("?", |f| f.name.as_str());
                return Some(format!("ret of {name} = {ret} ({})", cond.text));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_judge() {
        let rules =
            vec![FailRule::parse("exit=3").unwrap(), FailRule::parse("stderr:assert").unwrap()];
        let mut exit = Exit { code: Some(0), ..Default::default() };
        assert_eq!(judge(&exit, &rules).0, Label::Pass);
        exit.stderr.text = "x: assertion failed".into();
        assert_eq!(judge(&exit, &rules), (Label::Fail, "stderr matched /assert/".into()));
        let exit = Exit { code: Some(3), ..Default::default() };
        assert_eq!(judge(&exit, &rules), (Label::Fail, "exit code 3".into()));
        assert_eq!(
            FailRule::parse("signal=SEGV")
                .unwrap()
                .verdict(&Exit { signal: Some(11), ..Default::default() }),
            Some("killed by SIGSEGV".into())
        );
        assert!(FailRule::parse("exit=abc").is_err());
        assert!(FailRule::parse("whatever").is_err());
    }

    /// Regression (issue 8): an invalid regex printed four lines.
    #[test]
    fn bad_regex_and_zero_timeout_are_one_line() {
        let err = FailRule::parse("stdout:(unclosed").unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(
            err.starts_with(
                "invalid --fail-on rule `stdout:(unclosed`: invalid regex: unclosed group ("
            ),
            "{err}"
        );
        let err = RunPolicy::new(&[], Duration::ZERO).unwrap_err().to_string();
        assert_eq!(
            err,
            "--timeout 0s would kill every run at once: give a positive duration, e.g. 60s"
        );
    }

    #[test]
    fn fail_if_parses() {
        assert_eq!(FailIf::parse("handle_request ret < 0").unwrap().cond, Comparison::Lt(0));
        assert_eq!(FailIf::parse("f ret == -1").unwrap().cond, Comparison::Eq(-1));
        assert_eq!(FailIf::parse("f ret != 0x10").unwrap().cond, Comparison::Ne(16));
        assert_eq!(FailIf::parse("lookup ret null").unwrap().cond, Comparison::Null);
        assert!(FailIf::parse("f < 0").is_err());
        assert!(FailIf::parse("f ret < zero").is_err());
        assert!(Comparison::Lt(0).holds(-1) && !Comparison::Lt(0).holds(0));
        assert!(
            Comparison::Ne(3).holds(4) && Comparison::Eq(3).holds(3) && Comparison::Null.holds(0)
        );
    }
}
