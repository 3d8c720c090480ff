//! The safe-intervention allowlist (AID Sec. 3.2): return-value overrides
//! and premature returns change what the program computes, so AID only
//! applies them to functions the user declared free of side effects.
//! Predicates whose intervention would need an unsafe one are removed
//! before the AC-DAG is built; delays and orderings are always allowed.

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::model::{Function, Intervention};

#[derive(Debug, thiserror::Error)]
pub enum SafeListError {
    #[error("bad safe-function pattern {pattern:?}: use a glob such as 'get_*' or 'cache::lookup'")]
    BadPattern {
        pattern: String,
        #[source]
        source: globset::Error,
    },
}

/// Glob patterns over function names (demangled or as in the ELF symbol
/// table) that are safe to force a return value on.
#[derive(Clone, Debug)]
pub struct SafeList {
    patterns: Vec<String>,
    set: GlobSet,
}

impl Default for SafeList {
    fn default() -> Self {
        SafeList { patterns: Vec::new(), set: GlobSet::empty() }
    }
}

impl SafeList {
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<SafeList, SafeListError> {
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let p = p.as_ref();
            let g = Glob::new(p)
                .map_err(|source| SafeListError::BadPattern { pattern: p.to_string(), source })?;
            b.add(g);
        }
        let set = b.build().map_err(|source| SafeListError::BadPattern {
            pattern: patterns.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(","),
            source,
        })?;
        Ok(SafeList { patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(), set })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Matched as `--trace` matches (C++ with or without its parameter
    /// list).
    pub fn is_safe(&self, f: &Function) -> bool {
        crate::symbols::names_of(f).iter().any(|n| self.set.is_match(n))
    }

    /// The intervention may be applied: it changes no value, or every
    /// function it acts on is declared safe.
    pub fn allows(&self, intervention: &Intervention, functions: &[Function]) -> bool {
        !intervention.changes_values()
            || intervention
                .acting_sites()
                .iter()
                .all(|s| functions.get(s.func as usize).is_some_and(|f| self.is_safe(f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Point, Site, testing::function};

    fn f(id: u32, name: &str, symbol: &str) -> Function {
        function(id, name).with_symbol(symbol).in_module("/bin/x", 0)
    }

    #[test]
    fn only_value_changes_need_the_allowlist() {
        let funcs = vec![
            f(0, "cache::lookup", "_ZN5cache6lookupE"),
            f(1, "update_salary", "update_salary"),
        ];
        let safe = SafeList::new(&["cache::*"]).unwrap();
        let s = |func| Site { func, role: 0, instance: 1 };
        assert!(safe.allows(&Intervention::OverrideReturn { site: s(0), value: 50 }, &funcs));
        assert!(!safe.allows(&Intervention::OverrideReturn { site: s(1), value: 0 }, &funcs));
        assert!(!safe.allows(&Intervention::ReturnEarly { site: s(1), value: 0 }, &funcs));
        assert!(safe.allows(&Intervention::DelayExit { site: s(1), delay_us: 5 }, &funcs));
        assert!(safe.allows(
            &Intervention::HoldUntil {
                site: s(1),
                point: Point::Entry,
                until: s(0),
                until_point: Point::Exit
            },
            &funcs
        ));
        assert!(SafeList::new(&["_ZN5cache*"]).unwrap().is_safe(&funcs[0]), "symbols match too");
        let cpp = f(2, "handle_request(int)", "_Z14handle_requesti");
        assert!(SafeList::new(&["handle_request"]).unwrap().is_safe(&cpp), "without parameters");
        assert!(SafeList::new(&["handle_request(int)"]).unwrap().is_safe(&cpp));
        assert!(!SafeList::new(&["handle"]).unwrap().is_safe(&cpp));
        assert!(!SafeList::default().is_safe(&funcs[0]));
        let err = SafeList::new(&["get_[a"]).unwrap_err();
        assert!(err.to_string().starts_with("bad safe-function pattern \"get_[a\""));
    }
}
