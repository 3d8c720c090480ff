use super::*;
use crate::explain::{
    access::Substrate,
    testkit::{
        bank::{self, A, CHECK, GET, SET},
        scripted,
    },
};

/// The Fig. 2/5 scenario of the spec: T2 get, T1 get, T1 set(150),
/// T2 set(70), main check → -1.
fn failing() -> (Substrate, Run) {
    let run = scripted(
        1,
        true,
        bank::NAMES,
        &[
            (2, GET, [A, 0, 0], 100),
            (1, GET, [A, 0, 0], 100),
            (1, SET, [A, 150, 0], 0),
            (2, SET, [A, 70, 0], 0),
            (0, CHECK, [A, 0, 0], -1),
        ],
    );
    let session = bank::session(vec![run.clone()]);
    (Substrate::build(&session, Some(&bank::globals()), &bank::spec(), &[]), run)
}

fn kept_and_edges(levels: &str) -> (Vec<usize>, Vec<String>) {
    let (s, run) = failing();
    let acc = &s.runs[0];
    let crit = Criterion::parse("check#1").unwrap().resolve(&run, acc, &s.functions).unwrap();
    let sl = slice(&run, acc, &s.functions, &bank::spec(), crit, Levels::parse(levels).unwrap());
    let j = report(&sl, &run, acc, &s);
    let kept = j.kept.iter().map(|k| k.n).collect();
    let edges =
        j.edges.iter().map(|e| format!("{}({}→{})", e.kind.as_str(), e.from, e.to)).collect();
    (kept, edges)
}

#[test]
fn ds_slice_keeps_1_4_5_and_drops_t1() {
    let (kept, edges) = kept_and_edges("ds");
    assert_eq!(kept, vec![1, 4, 5]);
    let mut edges = edges;
    edges.sort();
    assert_eq!(edges, ["raw(4→5)", "rmw(1→4)"]);
}

#[test]
fn hazard_slice_adds_t1_set_with_waw_and_war_but_not_t1_get() {
    let (kept, edges) = kept_and_edges("ds,war,waw");
    assert_eq!(kept, vec![1, 3, 4, 5]);
    let mut edges = edges;
    edges.sort();
    assert_eq!(edges, ["raw(4→5)", "rmw(1→4)", "war(1→3)", "waw(3→4)"]);
}

#[test]
fn the_text_names_each_kept_call_and_the_reduction() {
    let (s, run) = failing();
    let acc = &s.runs[0];
    let sl = slice(&run, acc, &s.functions, &bank::spec(), 4, Levels::HAZARDS);
    let text = render_text(&report(&sl, &run, acc, &s));
    assert_eq!(
        text,
        "slice of run 1 (exit code 1) at call 5, deps ds,war,waw: kept 4 of 5 calls (20% removed), 3 of 3 roles\n\
         \x20    1  T2:get#1(A) → 100\n\
         \x20    3  T1:set#1(A, 150)  [hazard]\n\
         \x20    4  T2:set#1(A, 70)\n\
         \x20    5  main:check#1(A) → -1  [criterion]\n\
         edges:\n\
         \x20    1 → 3    war A\n\
         \x20    1 → 4    rmw A\n\
         \x20    3 → 4    waw A\n\
         \x20    4 → 5    raw A\n"
    );
    assert!(
        render_dot(&report(&sl, &run, acc, &s))
            .contains("c3 [label=\"3: T1:set#1(A, 150)\", style=dashed];")
    );
}

#[test]
fn criteria_parse_and_resolve_with_one_line_errors() {
    assert_eq!(Criterion::parse("exit").unwrap(), Criterion::Exit);
    assert_eq!(
        Criterion::parse("T2:set#1").unwrap(),
        Criterion::Call { role: Some("T2".into()), function: "set".into(), instance: 1 }
    );
    assert_eq!(
        Criterion::parse("Cache::get#2").unwrap(),
        Criterion::Call { role: None, function: "Cache::get".into(), instance: 2 }
    );
    assert!(Criterion::parse("check").is_err());
    let (s, run) = failing();
    let acc = &s.runs[0];
    assert_eq!(Criterion::Exit.resolve(&run, acc, &s.functions).unwrap(), 4);
    let err = Criterion::parse("set#1").unwrap().resolve(&run, acc, &s.functions).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad criterion `set#1`: several roles made it (T1, T2): write role:set#1"
    );
    assert!(Levels::parse("ds,foo").is_err());
    assert_eq!(Levels::parse("cs,war").unwrap().label(), "ds,cs,war");
}

#[test]
fn cs_adds_the_caller_frame_and_the_previous_call_of_the_role() {
    let (s, run) = failing();
    let acc = &s.runs[0];
    let sl = slice(&run, acc, &s.functions, &bank::spec(), 4, Levels::ALL);
    // T2's set depends on T2's get (previous call): already kept; T1's
    // calls stay hazard-only or out, main's check has no earlier call.
    let kinds: Vec<(usize, usize, &str)> = sl
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Ctrl)
        .map(|e| (e.from, e.to, e.kind.as_str()))
        .collect();
    assert_eq!(kinds, vec![(0, 3, "ctrl")]);
}
