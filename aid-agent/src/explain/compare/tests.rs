//! The worked example of spec §3, with a simulated executor: the bank
//! account where T1 deposits 50 and T2 withdraws 30 with no lock, and main
//! checks the balance is 120.

use std::collections::BTreeMap;

use super::{minimize::Observed, *};
use crate::{
    explain::testkit::{
        bank::{self, A, CHECK, GET, SET},
        call, function, scripted,
    },
    model::{Role, Run, ValueKind},
};

/// One step of a schedule: (role, function).
type Op = (Role, crate::model::FuncId);

const PASS_ORDER: &[Op] = &[(1, GET), (1, SET), (2, GET), (2, SET), (0, CHECK)];
const FAIL_ORDER: &[Op] = &[(1, GET), (2, GET), (1, SET), (2, SET), (0, CHECK)];

/// Runs the bank program along `order`, with `returns` forced, and
/// records it as a run.
fn execute(id: u32, order: &[Op], returns: &BTreeMap<(Role, crate::model::FuncId), i64>) -> Run {
    let mut a = 100;
    let mut local: BTreeMap<Role, i64> = BTreeMap::new();
    let mut steps = Vec::new();
    let mut failed = false;
    for &(role, func) in order {
        match func {
            GET => {
                let v = returns.get(&(role, func)).copied().unwrap_or(a);
                local.insert(role, v);
                steps.push((role, GET, [A, 0, 0], v));
            }
            SET => {
                let v = local[&role] + if role == 1 { 50 } else { -30 };
                a = v;
                steps.push((role, SET, [A, v, 0], 0));
            }
            _ => {
                let r = if a == 120 { 0 } else { -1 };
                failed = r != 0;
                steps.push((role, CHECK, [A, 0, 0], r));
            }
        }
    }
    scripted(id, failed, bank::NAMES, &steps)
}

/// Re-executes the bank program: from the base schedule, a step whose
/// call must wait (`Order`) is postponed until the call it waits for has
/// run; `Return` forces a get's result.
struct Simulator {
    next_id: u32,
    log: Vec<(Side, Vec<Replacement>, Run)>,
}

impl Rerun for Simulator {
    fn rerun(&mut self, base: Side, replacements: &[Replacement]) -> anyhow::Result<Observed> {
        let role = |k: &CallKey| bank::NAMES.iter().position(|n| *n == k.role).unwrap() as Role;
        let mut returns = BTreeMap::new();
        let mut waits: Vec<(Op, Op)> = Vec::new();
        for r in replacements {
            match r {
                Replacement::Return { call, value } => {
                    returns.insert((role(call), call.func), *value);
                }
                Replacement::Order { first, then } => {
                    waits.push(((role(first), first.func), (role(then), then.func)));
                }
            }
        }
        let mut pending: Vec<Op> =
            if base == Side::Fail { FAIL_ORDER } else { PASS_ORDER }.to_vec();
        let mut done: Vec<Op> = Vec::new();
        while !pending.is_empty() {
            let next = pending.iter().position(|op| {
                let in_order = !pending.iter().take_while(|o| *o != op).any(|o| o.0 == op.0);
                let free = waits.iter().all(|(first, then)| then != op || done.contains(first));
                in_order && free
            });
            let Some(i) = next else { anyhow::bail!("simulated schedule deadlocks") };
            done.push(pending.remove(i));
        }
        self.next_id += 1;
        let run = execute(self.next_id, &done, &returns);
        self.log.push((base, replacements.to_vec(), run.clone()));
        Ok(Observed { run, valid: true, watched: None })
    }
}

fn session() -> Session {
    bank::session(vec![
        execute(1, PASS_ORDER, &BTreeMap::new()),
        execute(2, FAIL_ORDER, &BTreeMap::new()),
    ])
}

fn run_compare(safe: &[&str], target: &str) -> (Comparison, Simulator, Session) {
    let s = session();
    let globals = bank::globals();
    let spec = bank::spec();
    let inputs = Inputs {
        session: &s,
        globals: Some(&globals),
        spec: &spec,
        fail: 2,
        pass: Some(1),
        target: Target::parse(target).unwrap(),
        watched: None,
    };
    let opts = Options { repeat: 3, theta: 0.8, pin: false, safe: SafeList::new(safe).unwrap() };
    let mut sim = Simulator { next_id: 100, log: Vec::new() };
    let c = compare(&inputs, &opts, &mut sim).unwrap();
    (c, sim, s)
}

#[test]
fn the_runs_of_the_example_are_what_the_spec_says() {
    let s = session();
    let vals =
        |r: &Run| r.calls.iter().map(|c| (c.role, c.func, c.args[1], c.ret)).collect::<Vec<_>>();
    assert_eq!(
        vals(&s.runs[0]),
        vec![
            (1, GET, 0, Some(100)),
            (1, SET, 150, Some(0)),
            (2, GET, 0, Some(150)),
            (2, SET, 120, Some(0)),
            (0, CHECK, 0, Some(0)),
        ]
    );
    assert_eq!(
        vals(&s.runs[1]),
        vec![
            (1, GET, 0, Some(100)),
            (2, GET, 0, Some(100)),
            (1, SET, 150, Some(0)),
            (2, SET, 70, Some(0)),
            (0, CHECK, 0, Some(-1)),
        ]
    );
}

#[test]
fn dual_slice_excludes_t1_get_whose_value_is_the_same() {
    let (c, _, s) = run_compare(&["get"], "check#1.ret");
    let calls: Vec<String> = c.slice.calls.iter().map(|k| call_text(k, &s.functions)).collect();
    assert_eq!(calls, ["T1.set#1", "T2.get#1", "T2.set#1", "check#1"]);
}

#[test]
fn chain_runs_from_the_order_to_the_check_with_both_symmetric_tests() {
    let (c, sim, s) = run_compare(&["get"], "check#1.ret");
    assert_eq!(
        c.chain_line(),
        "order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS) ⇒ T2.get#1 ret 100 vs 150 ⇒ T2.set#1 arg 70 vs 120 ⇒ check#1 ret -1 vs 0"
    );
    assert!(c.stopped.is_none());
    // The order link: FAIL with T1.set#1 forced before T2.get#1 checks 0;
    // PASS with T1 held at set#1 until T2.get#1 exits checks -1.
    let key = |role: &str, func| CallKey { role: role.into(), func, instance: 1 };
    let order_cure = Replacement::Order { first: key("T1", SET), then: key("T2", GET) };
    let order_induce = Replacement::Order { first: key("T2", GET), then: key("T1", SET) };
    let check_of = |r: &Run| r.calls.iter().find(|c| c.func == CHECK).and_then(|c| c.ret);
    for (base, rep, check) in [(Side::Fail, &order_cure, 0), (Side::Pass, &order_induce, -1)] {
        let runs: Vec<&Run> = sim
            .log
            .iter()
            .filter(|(b, r, _)| *b == base && r == &vec![rep.clone()])
            .map(|(_, _, r)| r)
            .collect();
        assert_eq!(runs.len(), 3, "{base:?} {rep:?}");
        assert!(runs.iter().all(|r| check_of(r) == Some(check)));
    }
    // Two tested links, each 3 re-runs per side.
    let tested: Vec<(&str, bool)> = c
        .chain
        .iter()
        .filter_map(|st| st.test.as_ref().map(|t| (st.text.as_str(), t.passed)))
        .collect();
    assert_eq!(
        tested,
        vec![
            ("order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS)", true),
            ("T2.get#1 ret 100 vs 150", true)
        ]
    );
    assert_eq!(c.reruns, 12);
    let text = render_text(
        &c,
        &s.functions,
        &Options { repeat: 3, theta: 0.8, pin: false, safe: SafeList::default() },
    );
    assert!(
        text.contains(
            "     order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS)   [cure 3/3, induce 3/3]\n"
        ),
        "{text}"
    );
    assert!(text.contains("   ⇒ check#1 ret -1 vs 0\n"), "{text}");
}

#[test]
fn without_a_safe_get_the_order_is_tested_against_the_check_directly() {
    let (c, _, _) = run_compare(&[], "exit");
    assert_eq!(
        c.chain_line(),
        "order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS) ⇒ T2.get#1 ret 100 vs 150 ⇒ T2.set#1 arg 70 vs 120 ⇒ check#1 ret -1 vs 0 ⇒ the run fails: exit code 1 vs exit code 0"
    );
    let tested: Vec<&str> =
        c.chain.iter().filter(|s| s.test.is_some()).map(|s| s.text.as_str()).collect();
    assert_eq!(tested, ["order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS)"]);
    assert_eq!(c.reruns, 6);
}

#[test]
fn repeat_zero_gives_the_untested_chain_without_re_running() {
    let s = session();
    let (globals, spec) = (bank::globals(), bank::spec());
    let inputs = Inputs {
        session: &s,
        globals: Some(&globals),
        spec: &spec,
        fail: 2,
        pass: None,
        target: Target::Exit,
        watched: None,
    };
    let opts =
        Options { repeat: 0, theta: 0.8, pin: false, safe: SafeList::new(&["get"]).unwrap() };
    let mut sim = Simulator { next_id: 100, log: Vec::new() };
    let c = compare(&inputs, &opts, &mut sim).unwrap();
    assert!(sim.log.is_empty());
    assert_eq!(c.pass.id, 1);
    assert!(
        c.chain_line().starts_with("order T2.get#1 ≺ T1.set#1 (FAIL) vs ≻ (PASS) ⇒ T2.get#1 ret")
    );
}

#[test]
fn confounded_reruns_are_discarded() {
    let s = session();
    let (globals, spec) = (bank::globals(), bank::spec());
    let mut objects = Objects::default();
    let view = |r: &Run, o: &mut Objects| View::new(r, &s.functions, Some(&globals), &spec, o);
    let (pass, fail) = (view(&s.runs[0], &mut objects), view(&s.runs[1], &mut objects));
    // T2 reads A after T1's set but before... nothing new: the passing run.
    assert!(!minimize::confounded(&pass, &fail, &pass));
    // T1 reads A after T2 wrote it: a reads-from edge neither run had.
    let odd = execute(9, &[(2, GET), (2, SET), (1, GET), (1, SET), (0, CHECK)], &BTreeMap::new());
    assert!(minimize::confounded(&view(&odd, &mut objects), &fail, &pass));
    // A call neither run made.
    let extra = execute(
        10,
        &[(1, GET), (1, SET), (2, GET), (2, SET), (0, CHECK), (0, CHECK)],
        &BTreeMap::new(),
    );
    assert!(minimize::confounded(&view(&extra, &mut objects), &fail, &pass));
}

#[test]
fn bad_run_choices_are_one_line_errors() {
    let s = session();
    assert_eq!(
        check_runs(&s, 1, None).unwrap_err().to_string(),
        "run 1 passed: --fail needs a failing run (failing runs: 2)"
    );
    assert_eq!(
        check_runs(&s, 2, Some(2)).unwrap_err().to_string(),
        "run 2 failed: --pass needs a passing run (passing runs: 1)"
    );
    assert_eq!(
        check_runs(&s, 7, None).unwrap_err().to_string(),
        "run 7 is not in the session (it has runs 1, 2)"
    );
    assert!(Target::parse("check#1").is_err());
}

/// The bank runs, and a third (passing) one, each ending with a call on
/// main of `init`, an `int` function with no return statement: what it
/// returns is whatever its register held, `returned[k]` in run k + 1.
fn with_garbage(returned: [i64; 3]) -> Session {
    let mut s = session();
    s.runs.push(execute(3, PASS_ORDER, &BTreeMap::new()));
    s.functions.push(function(3, "init", &[], ValueKind::Signed));
    for (run, ret) in s.runs.iter_mut().zip(returned) {
        run.calls.push(call(3, 0, 1, 60, 65, [0; 3], ret));
        run.end_ns = 70;
    }
    s
}

/// `compare --fail 2 --pass 1` with the exit as the target, untested.
fn exit_chain(s: &Session) -> anyhow::Result<Comparison> {
    let (globals, spec) = (bank::globals(), bank::spec());
    let inputs = Inputs {
        session: s,
        globals: Some(&globals),
        spec: &spec,
        fail: 2,
        pass: Some(1),
        target: Target::Exit,
        watched: None,
    };
    let opts =
        Options { repeat: 0, theta: 0.8, pin: false, safe: SafeList::new::<&str>(&[]).unwrap() };
    compare(&inputs, &opts, &mut Simulator { next_id: 100, log: Vec::new() })
}

/// The last call on main that differs between the two runs is `init`,
/// whose value differs between the two passing runs too: it tells
/// nothing of the failure, and the exit target is the check before it.
/// When the passing runs agree on init's value, init is the target.
#[test]
fn a_value_the_passing_runs_disagree_on_is_not_the_exit_target() {
    let c = exit_chain(&with_garbage([1_947_308_320, -19_742_432, 286_617_888])).unwrap();
    assert!(
        c.chain_line()
            .ends_with("⇒ check#1 ret -1 vs 0 ⇒ the run fails: exit code 1 vs exit code 0"),
        "{}",
        c.chain_line()
    );
    assert!(!c.chain_line().contains("init"), "{}", c.chain_line());
    let c = exit_chain(&with_garbage([7, -1, 7])).unwrap();
    assert_eq!(c.chain_line(), "init#1 ret -1 vs 7 ⇒ the run fails: exit code 1 vs exit code 0");
}

/// The failing run's `init` on main never returned: another thread's
/// assertion ended the process while it ran. That says the run ended, not
/// why: the exit target is the check before it. When aid ended the run
/// (it timed out, or hung), what its calls still waited for is what it
/// failed by, and `init` is the target.
#[test]
fn a_call_the_failing_runs_end_cut_short_is_not_the_exit_target() {
    let cut_short = |reason: &str| {
        let mut s = with_garbage([7, 7, 7]);
        let fail = s.runs.iter_mut().find(|r| r.id == 2).unwrap();
        let init = fail.calls.last_mut().unwrap();
        (init.exit_ns, init.ret) = (None, None);
        fail.outcome.reason = reason.to_owned();
        s
    };
    let c = exit_chain(&cut_short("killed by SIGABRT")).unwrap();
    assert!(
        c.chain_line()
            .ends_with("⇒ check#1 ret -1 vs 0 ⇒ the run fails: killed by SIGABRT vs exit code 0"),
        "{}",
        c.chain_line()
    );
    assert!(!c.chain_line().contains("init"), "{}", c.chain_line());
    for reason in [TIMED_OUT, HANG] {
        let c = exit_chain(&cut_short(reason)).unwrap();
        let want = format!("init#1 ret (no return) vs 7 ⇒ the run fails: {reason} vs exit code 0");
        assert_eq!(c.chain_line(), want);
    }
}
