//! `aid-bench`, the binary behind `cargo xtask bench synthetic|extract`,
//! run end to end on inputs small enough for the test suite: what each
//! benchmark prints, and a one-line error with exit code 2 on bad input.
//! The timings are not checked (speed is measured, never asserted).

use std::process::{Command, Output};

fn aid_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aid-bench")).args(args).output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The extraction benchmark on 20 runs: the generated session's size is
/// fixed by the seed, and the analysis finds the generated failure (a
/// stall, an overlap, an error return and the handler's call, at least
/// four fully discriminative predicates, as extract.rs's unit test checks
/// kind by kind) and orders candidates.
#[test]
fn extract_measures_the_generated_session() {
    let v = json(&aid_bench(&["extract", "--runs", "20", "--events", "400", "--json"]));
    assert_eq!(v["runs"], 20);
    assert_eq!(v["events_per_run"], 400);
    assert_eq!(v["events"], EXTRACT_EVENTS);
    let fd = v["fully_discriminative"].as_u64().unwrap();
    assert!(fd >= 4, "{v}");
    assert!(v["predicates"].as_u64().unwrap() > fd, "{v}");
    assert!(v["candidates"].as_u64().unwrap() >= 1, "{v}");
    for key in ["learn_s", "evaluate_s", "statistics_s", "dag_s", "total_s", "events_per_s"] {
        assert!(v[key].as_f64().is_some_and(|x| x >= 0.0), "{key}: {}", v[key]);
    }
}

/// Entry and exit events of `extract --runs 20 --events 400` (seed 1): 20
/// runs of 4 roles × 50 calls, and the handler's call in the 3 failing
/// runs where worker#2 collided, two events a call.
const EXTRACT_EVENTS: u64 = 2 * (20 * 4 * 50 + 3);

/// A small sensitivity study: one row per MAXt, every application within
/// the paper's assumptions, and no strategy reports a wrong path there
/// (the binary exits non-zero if one does).
#[test]
fn synthetic_runs_a_small_study() {
    let v = json(&aid_bench(&[
        "synthetic",
        "--apps",
        "4",
        "--maxt",
        "2,6",
        "--strategies",
        "aid,tagt",
        "--json",
    ]));
    let settings = v.as_array().unwrap();
    let maxt: Vec<u64> = settings.iter().map(|s| s["max_threads"].as_u64().unwrap()).collect();
    assert_eq!(maxt, [2, 6]);
    for s in settings {
        assert_eq!(s["apps"], 4);
        let strategies = s["conditions"][0]["strategies"].as_array().unwrap();
        let names: Vec<&str> = strategies.iter().map(|x| x["strategy"].as_str().unwrap()).collect();
        assert_eq!(names, ["aid", "tagt"]);
        for x in strategies {
            assert_eq!(x["wrong_within_assumptions"], 0, "{x}");
        }
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, message) in [
        (
            &["synthetic", "--maxt", "1,4"][..],
            "aid-bench: --maxt 1: applications need at least 2 threads\n",
        ),
        (
            &["extract", "--runs", "1"][..],
            "aid-bench: extract needs --runs ≥ 2, --events ≥ 20 and --threads ≥ 3 (the failure involves two workers)\n",
        ),
    ] {
        let out = aid_bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), message, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
