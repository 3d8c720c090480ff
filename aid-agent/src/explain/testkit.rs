//! Builders for the small hand-made sessions the unit tests use.

use std::path::PathBuf;

use crate::model::{
    Call, FuncId, Function, Label, Outcome, Role, Run, Thread, ValueKind, ValueType,
};

pub fn function(id: FuncId, name: &str, params: &[ValueKind], ret: ValueKind) -> Function {
    let ty = |kind| ValueType { kind, size: if kind == ValueKind::Void { 0 } else { 8 } };
    Function {
        id,
        name: name.into(),
        symbol: name.into(),
        module: PathBuf::from("/bin/test"),
        address: 0x1000 + u64::from(id) * 0x10,
        offset: 0x1000 + u64::from(id) * 0x10,
        source: None,
        ret: ty(ret),
        params: params.iter().map(|k| ty(*k)).collect(),
        internal: false,
        probe: crate::model::Probe::Call,
        pointee: None,
    }
}

pub fn call(
    func: FuncId,
    role: Role,
    instance: u32,
    entry_ns: u64,
    exit_ns: u64,
    args: [i64; 3],
    ret: i64,
) -> Call {
    Call {
        func,
        role,
        instance,
        entry_ns,
        exit_ns: Some(exit_ns),
        args,
        ret: Some(ret),
        unwound: false,
        content: None,
        paused_ns: 0,
    }
}

/// A passing run with threads named `names` (role = position) and `calls`
/// (sorted by entry here).
pub fn run_with(names: &[&str], mut calls: Vec<Call>) -> Run {
    calls.sort_by_key(|c| c.entry_ns);
    let end_ns = calls.iter().filter_map(|c| c.exit_ns).max().unwrap_or(0);
    Run {
        id: 1,
        label: Label::Pass,
        outcome: Outcome::default(),
        lost_events: 0,
        lost_thread_records: 0,
        complete: true,
        threads: names
            .iter()
            .enumerate()
            .map(|(i, n)| Thread {
                role: i as Role,
                tid: 1000 + i as u32,
                name: (*n).into(),
                parent: (i > 0).then_some(0),
                created_ns: 0,
            })
            .collect(),
        calls,
        end_ns,
        interventions: vec![],
        noise: vec![],
        pauses: vec![],
    }
}

/// `run_with` with an id and a label.
pub fn labelled(id: u32, failed: bool, names: &[&str], calls: Vec<Call>) -> Run {
    let mut r = run_with(names, calls);
    r.id = id;
    if failed {
        r.label = Label::Fail;
        r.outcome.exit_code = Some(1);
        r.outcome.reason = "exit code 1".into();
    } else {
        r.outcome.exit_code = Some(0);
        r.outcome.reason = "exit code 0".into();
    }
    r
}

/// A run made of `steps` (role, function, args, ret), one after the
/// other: step i is a call entered at 10·(i+1) ns and left 5 ns later,
/// numbered per (role, function).
pub fn scripted(
    id: u32,
    failed: bool,
    names: &[&str],
    steps: &[(Role, FuncId, [i64; 3], i64)],
) -> Run {
    let mut count: std::collections::HashMap<(Role, FuncId), u32> = Default::default();
    let calls = steps
        .iter()
        .enumerate()
        .map(|(i, &(role, func, args, ret))| {
            let k = count.entry((role, func)).or_default();
            *k += 1;
            let t = 10 * (i as u64 + 1);
            call(func, role, *k, t, t + 5, args, ret)
        })
        .collect();
    labelled(id, failed, names, calls)
}

/// The bank account of the spec's worked examples: `get(A)` reads,
/// `set(A, v)` writes, `check(A)` reads; main is role 0, T1 role 1, T2
/// role 2; A is the global `A` at 0x4000.
pub mod bank {
    use super::*;
    use crate::{
        explain::{AccessSpec, objects::Globals},
        model::Session,
    };

    pub const A: i64 = 0x4000;
    pub const GET: FuncId = 0;
    pub const SET: FuncId = 1;
    pub const CHECK: FuncId = 2;
    pub const NAMES: &[&str] = &["main", "T1", "T2"];

    pub fn functions() -> Vec<Function> {
        use ValueKind::{Pointer, Signed, Void};
        vec![
            function(GET, "get", &[Pointer], Signed),
            function(SET, "set", &[Pointer, Signed], Void),
            function(CHECK, "check", &[Pointer], Signed),
        ]
    }

    pub fn globals() -> Globals {
        Globals::new(false, vec![(A as u64, 8, "A".into())])
    }

    pub fn spec() -> AccessSpec {
        AccessSpec::new(&["get".into(), "check".into()], &["set".into()]).unwrap()
    }

    pub fn session(runs: Vec<Run>) -> Session {
        Session { functions: functions(), runs }
    }
}
