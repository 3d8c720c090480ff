//! The worked examples of spec §1 that go through the whole pipeline.

use super::*;
use crate::explain::{
    access::Substrate,
    testkit::{
        bank::{self, A, CHECK, GET, SET},
        scripted,
    },
};

/// `g1 g2 s1 s2`-style orders: each letter pair is (role, get|set).
fn bank_run(id: u32, failed: bool, order: &str) -> crate::model::Run {
    let mut steps = Vec::new();
    let b = order.as_bytes();
    for pair in b.chunks(2) {
        let role = u32::from(pair[1] - b'0');
        let func = if pair[0] == b'g' { GET } else { SET };
        steps.push((role, func, [A, 100, 0], 100));
    }
    steps.push((0, CHECK, [A, 0, 0], if failed { -1 } else { 0 }));
    scripted(id, failed, bank::NAMES, &steps)
}

fn bank_dataset() -> Dataset {
    let mut runs = Vec::new();
    for (i, o) in ["g1s1g2s2", "g1s1g2s2", "g2s2g1s1", "g2s2g1s1"].iter().enumerate() {
        runs.push(bank_run(i as u32 + 1, false, o));
    }
    for (i, o) in ["g1g2s1s2", "g2g1s2s1", "g1g2s2s1", "g2g1s1s2"].iter().enumerate() {
        runs.push(bank_run(i as u32 + 5, true, o));
    }
    let session = bank::session(runs);
    let spec = bank::spec();
    let s = Substrate::build(&session, Some(&bank::globals()), &spec, &[]);
    Dataset::from_substrate(&s, &spec)
}

#[test]
fn bank_account_gives_exactly_two_groups_at_rel_supp_two_thirds() {
    let data = bank_dataset();
    let mined = mine(&data, &Options::default());
    assert_eq!(mined.min_supp, 1.0);
    let got: Vec<(String, Vec<String>, Vec<String>)> = mined
        .groups
        .iter()
        .map(|g| {
            (
                format!("{:.3}", g.rel_supp),
                g.deps.iter().map(|d| data.dep_text(d)).collect(),
                g.patterns.iter().map(|p| data.pattern_text(p)).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "0.667".to_owned(),
                vec!["R T2:get(A) → W T1:set(A) (anti)".to_owned()],
                vec!["⟨T2:get(A) | T1:set(A)⟩".to_owned()]
            ),
            (
                "0.667".to_owned(),
                vec!["R T1:get(A) → W T2:set(A) (anti)".to_owned()],
                vec!["⟨T1:get(A) | T2:set(A)⟩".to_owned()]
            ),
        ]
    );
    // Both occur in every failing run; the dependence shows where the
    // interleaving makes it immediate.
    assert_eq!(mined.groups[0].patterns[0].failing, vec![5, 6, 7, 8]);
    assert_eq!(mined.groups[0].patterns[0].witnessed, vec![5, 8]);
    assert_eq!(mined.groups[1].patterns[0].witnessed, vec![6, 7]);
    assert_eq!(mined.groups[0].patterns[0].passing, vec![3, 4]);
    // check(A) closes every run: the common suffix is pruned.
    assert_eq!((mined.stats.pruned_prefix, mined.stats.pruned_suffix), (0, 1));
    assert_eq!(mined.stats.mean_len, 5.0);
    assert_eq!(mined.stats.mean_abstract_len, 4.0);
}

#[test]
fn min_supp_is_lowered_until_something_explains() {
    let mut data = bank_dataset();
    // Two more failing runs in serial orders: no racing pattern occurs in
    // all 6 failing runs any more; each of the two occurs in 5.
    let extra = bank::session(vec![bank_run(9, true, "g1s1g2s2"), bank_run(10, true, "g2s2g1s1")]);
    let spec = bank::spec();
    let s = Substrate::build(&extra, Some(&bank::globals()), &spec, &[]);
    let more = Dataset::from_substrate(&s, &spec);
    for t in more.traces {
        let seq = t
            .seq
            .iter()
            .map(|&e| {
                let k = &more.keys[e as usize];
                let role = data
                    .role_names
                    .iter()
                    .position(|r| *r == more.role_names[k.role as usize])
                    .unwrap();
                let key = EventKey { role: role as u32, ..k.clone() };
                data.keys.iter().position(|x| *x == key).unwrap() as u32
            })
            .collect();
        data.traces.push(TraceData { seq, ..t });
    }
    let mined = mine(&data, &Options::default());
    let tried: Vec<(f64, usize)> = mined.levels.iter().map(|l| (l.min_supp, l.min_count)).collect();
    assert_eq!(tried, vec![(1.0, 6), (0.9, 6), (0.8, 5)]);
    let got: Vec<(String, String)> = mined
        .groups
        .iter()
        .map(|g| (data.pattern_text(&g.patterns[0]), format!("{:.3}", g.rel_supp)))
        .collect();
    assert_eq!(
        got,
        vec![
            ("⟨T2:get(A) | T1:set(A)⟩".to_owned(), "0.625".to_owned()),
            ("⟨T1:get(A) | T2:set(A)⟩".to_owned(), "0.625".to_owned()),
        ]
    );
}

#[test]
fn emitted_predicates_hold_exactly_where_the_pattern_occurs() {
    let data = bank_dataset();
    let mined = mine(&data, &Options::default());
    let file = predicates::export(&data, &mined, &["get".into(), "check".into()], &["set".into()]);
    assert_eq!(file.predicates.len(), 2);
    assert_eq!(file.predicates[0].id, "mine:1.1");
    assert_eq!(file.predicates[0].description, "pattern ⟨T2:get(A) | T1:set(A)⟩ occurs");
    let json = serde_json::to_string(&file).unwrap();
    let back: predicates::PatternFile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, file);
    // Re-evaluated on the runs, it holds in the runs mining found it in.
    let mut runs = Vec::new();
    for (i, o) in ["g1s1g2s2", "g1s1g2s2", "g2s2g1s1", "g2s2g1s1"].iter().enumerate() {
        runs.push(bank_run(i as u32 + 1, false, o));
    }
    for (i, o) in ["g1g2s1s2", "g2g1s2s1", "g1g2s2s1", "g2g1s1s2"].iter().enumerate() {
        runs.push(bank_run(i as u32 + 5, true, o));
    }
    let spec = bank::spec();
    let s = Substrate::build(&bank::session(runs), Some(&bank::globals()), &spec, &[]);
    let holds: Vec<u32> =
        s.runs.iter().filter(|r| back.predicates[0].holds(&s, r)).map(|r| r.run).collect();
    assert_eq!(holds, vec![3, 4, 5, 6, 7, 8]);
}

#[test]
fn witnessed_support_counts_runs_where_the_dependences_show() {
    let data = bank_dataset();
    let mined = mine(&data, &Options { witnessed: true, ..Options::default() });
    let got: Vec<(String, String, String)> = mined
        .groups
        .iter()
        .map(|g| {
            (
                data.pattern_text(&g.patterns[0]),
                format!("{:.2}", g.s_fail),
                format!("{:.2}", g.s_pass),
            )
        })
        .collect();
    // Each interleaving is witnessed in 2 of 4 failing runs and in no
    // passing run (a serial order has no cross-thread anti-dependence).
    assert_eq!(
        got,
        vec![
            ("⟨T2:get(A) | T1:set(A)⟩".to_owned(), "0.50".to_owned(), "0.00".to_owned()),
            ("⟨T1:get(A) | T2:set(A)⟩".to_owned(), "0.50".to_owned(), "0.00".to_owned()),
        ]
    );
    assert!(mined.groups.iter().all(|g| g.rel_supp == 1.0));
}

/// The instance enumeration stops after [`STEP_CAP`] examined positions
/// even when no tuple is ever complete: three slots that fit anywhere in
/// 3,000 positions and a fourth that fits nowhere are 4.5 billion partial
/// tuples, which it used to try one by one (minutes on inventory-sixty).
#[test]
fn the_instance_enumeration_is_bounded_by_the_positions_it_examines() {
    let trace = vec![7usize; 3_000];
    let mut work = Work { seen: 0, steps: 0, limit: STEP_CAP };
    let mut complete = 0;
    let whole =
        walk(&[7, 7, 7, 8], &trace, &|_, _| true, 0, &mut Vec::new(), &mut work, &mut |_| {
            complete += 1;
        });
    assert!(!whole, "capped");
    assert_eq!((work.steps, complete), (STEP_CAP + 1, 0));
    // A walk that fits finishes and says so.
    let mut work = Work { seen: 0, steps: 0, limit: STEP_CAP };
    let whole = walk(&[7, 8], &[7, 7, 8], &|_, _| true, 0, &mut Vec::new(), &mut work, &mut |_| {
        complete += 1;
    });
    assert!(whole);
    assert_eq!(complete, 2);
}
