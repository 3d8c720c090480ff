//! The report on a whole in-memory debug session (a cache test whose
//! fetcher sometimes overruns and whose reader then sees an empty cache):
//! golden terminal output at widths 80 and 200 and as plain lines, the
//! structured predicates of report.json, the DOT picture, the HTML page's
//! parts, and the exported traces.
//!
//! Golden files live in `aid-agent/tests/golden/`; after an intended
//! change, `AID_BLESS=1 cargo test -p aid-agent --lib report::` rewrites
//! them (review the diff).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::{
    analysis::{AnalysisOptions, analyze},
    causal::{Config, Observation, Oracle, Strategy, discover, estimate_tagt},
    debug::{
        Diagnosis, MAX_FIRST_ROUND_RUNS, Observed,
        beside::{Beside, Chain, Fate, Shape, TestedAs, TopPattern},
        oracle::{Control, NotStarted, OracleRun},
    },
    intervene::SafeList,
    model::{
        AppliedIntervention, Function, Intervention, Label, Outcome, Run, Session, Site, ValueKind,
        testing::{call, function, run, thread},
    },
    predicates::Catalog,
};

const CACHE: i64 = 0x7f00_0000_1000;
const US: u64 = 1000;

fn functions() -> Vec<Function> {
    let f = |id: u32, name: &str, ret, params: &[ValueKind]| {
        function(id, name)
            .in_module("/bin/cachetest", 0x1000 + u64::from(id) * 16)
            .with_ret(ret)
            .with_params(params)
    };
    vec![
        f(0, "init_cache", ValueKind::Signed, &[ValueKind::Pointer]),
        f(1, "fetch", ValueKind::Signed, &[ValueKind::Pointer]),
        f(2, "use_cache", ValueKind::Signed, &[ValueKind::Pointer]),
    ]
}

fn site(func: u32, role: u32) -> Site {
    Site { func, role, instance: 1 }
}

/// One run: `slow` is the nondeterministic root cause. Times in µs.
fn execute(id: u32, slow: bool, ivs: &[Intervention], rng: &mut ChaCha8Rng) -> Run {
    let mut j = || rng.random_range(0..40u64) * US;
    let (init_s, init_e) = (j(), 100 * US + j());
    let fetch_s = 110 * US + j();
    let mut fetch_e = if slow { 9_000 * US + j() * 20 } else { 200 * US + j() };
    let mut use_s = 3_000 * US + j();
    let use_len = 20 * US + j();
    for iv in ivs {
        match *iv {
            Intervention::ReturnEarly { site: s, .. } if s == site(1, 1) => fetch_e = fetch_s + US,
            Intervention::Serialize { .. } if use_s < fetch_e => use_s = fetch_e + US,
            _ => {}
        }
    }
    let ret = if fetch_e <= use_s { 3 } else { 4 };
    let calls = vec![
        call(0, 0, 1, init_s, Some(init_e), Some(0)).with_args([CACHE, 0, 0]),
        call(1, 1, 1, fetch_s, Some(fetch_e), Some(0)).with_args([CACHE, 0, 0]),
        call(2, 2, 1, use_s, Some(use_s + use_len), Some(ret)).with_args([CACHE, 0, 0]),
    ];
    let label = if ret == 4 { Label::Fail } else { Label::Pass };
    let end = use_s.max(fetch_e) + 50 * US;
    let mut r = run(id, label, calls, end)
        .with_threads(vec![thread(0, "main"), thread(1, "fetcher"), thread(2, "reader")])
        .with_outcome(Outcome {
            exit_code: Some(if label == Label::Fail { 1 } else { 0 }),
            reason: if label == Label::Fail { "exit code 1".into() } else { "exit code 0".into() },
            ..Outcome::default()
        });
    r.interventions = ivs
        .iter()
        .map(|iv| AppliedIntervention {
            intervention: iv.clone(),
            applied: true,
            timed_out: false,
            held_at_end: false,
            acted_ns: None,
        })
        .collect();
    r
}

/// Re-runs the program under the group's interventions, logging each run
/// as the live oracle does.
struct Replay<'a> {
    catalog: &'a Catalog,
    rng: ChaCha8Rng,
    next_id: u32,
    log: Vec<OracleRun>,
    runs: Vec<Run>,
}

impl Oracle for Replay<'_> {
    fn run(&mut self, group: &BTreeSet<PredId>) -> anyhow::Result<Observation> {
        let ivs = self.catalog.interventions(group);
        self.next_id += 1;
        let slow = self.rng.random_bool(0.4);
        let run = execute(self.next_id, slow, &ivs, &mut self.rng);
        let truth = self.catalog.evaluate(&run);
        let obs = Observation::from_truth(&truth, self.catalog.failure(), true);
        self.log.push(OracleRun {
            run: run.id,
            group: group.clone(),
            failed: obs.failed,
            valid: true,
            held: obs.held.clone(),
        });
        self.runs.push(run);
        Ok(obs)
    }
}

/// A whole debug session in memory, and the intervened runs it made.
fn diagnosis() -> (Diagnosis, Vec<Run>) {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let runs: Vec<Run> = (1..=40)
        .map(|i| {
            let slow = rng.random_bool(0.4);
            execute(i, slow, &[], &mut rng)
        })
        .collect();
    let session = Session { functions: functions(), runs };
    let safe = SafeList::new(&["fetch"]).unwrap();
    let analysis = analyze(&session, &AnalysisOptions { safe, ..AnalysisOptions::default() })
        .expect("analysis");
    let config = Config {
        baseline: crate::causal::Baseline {
            failing: analysis.totals.failing,
            passing: analysis.totals.passing,
        },
        confidence: 0.99,
        seed: 3,
        ..Config::default()
    };
    let mut oracle = Replay {
        catalog: &analysis.catalog,
        rng: ChaCha8Rng::seed_from_u64(5),
        next_id: 40,
        log: Vec::new(),
        runs: Vec::new(),
    };
    let discovery = discover(&analysis.dag, Strategy::Aid, &mut oracle, &config).unwrap();
    let (oracle_runs, intervened) = (oracle.log, oracle.runs);
    let tagt = estimate_tagt(&analysis.dag, &discovery.path, &config, 20, &|_| true).unwrap();
    let failing = session.runs.iter().filter(|r| r.failed()).count() as u32;
    let observed = Observed {
        noun: "run".into(),
        runs: 40,
        failing,
        passing: 40 - failing,
        incomplete: 0,
        amplified: None,
        noise: None,
        analysed: 40,
        statements: false,
        tracer: None,
        provoked: None,
        jobs: 0,
        fleet: None,
    };
    let d = Diagnosis {
        observed,
        session,
        analysis,
        discovery: Some(discovery),
        tagt: Some(tagt),
        oracle_runs,
        interrupted: None,
        control: None,
        not_started: None,
    };
    (d, intervened)
}

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("AID_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing: run with AID_BLESS=1", path.display()));
    assert_eq!(actual, expected, "{name} differs from the golden file (AID_BLESS=1 rewrites it)");
}

#[test]
fn terminal_report_is_golden_at_80_200_and_plain() {
    let (d, _) = diagnosis();
    let r = build(&d);
    for (name, width) in [("report-80.txt", Some(80)), ("report-200.txt", Some(200))] {
        let layout = Layout { width, color: false, verbose: false, explain: false };
        let text = render(&r, &layout);
        let w = width.unwrap();
        for line in text.lines() {
            assert!(line.chars().count() <= w, "{name}: line longer than {w}: {line}");
        }
        golden(name, &text);
    }
    let plain = Layout { width: None, color: false, verbose: false, explain: false };
    golden("report-plain.txt", &render(&r, &plain));
    let full = Layout { width: Some(80), color: false, verbose: true, explain: true };
    golden("report-80-verbose-explain.txt", &render(&r, &full));
}

/// What the issue asked of the words: actual values, rounded durations,
/// no debug dumps, the jargon said in words, colour only on request.
#[test]
fn the_words_show_values_and_no_jargon_or_dumps() {
    let (d, _) = diagnosis();
    let r = build(&d);
    let plain = render(&r, &Layout { width: None, color: false, verbose: false, explain: false });
    assert!(plain.contains("Root cause: call 1 of fetch on fetcher runs too slow: "), "{plain}");
    assert!(
        plain.contains(
            "call 1 of use_cache on reader returns 4 in every failing run, 3 in every passing run"
        ),
        "{plain}"
    );
    for jargon in ["TAGT", "fully discriminative", "intervenable", "Some(", "None", "{", "µs."] {
        assert!(!plain.contains(jargon), "`{jargon}` in the default report:\n{plain}");
    }
    let verbose = render(&r, &Layout { width: None, color: false, verbose: true, explain: false });
    assert!(verbose.contains("Traditional adaptive group testing (TAGT: "), "{verbose}");
    assert!(
        verbose.contains("fully discriminative (held in every failing run and in no passing one)"),
        "{verbose}"
    );
    let explain = render(&r, &Layout { width: None, color: false, verbose: false, explain: true });
    let guide: Vec<&str> = explain.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(guide.len(), 5, "{explain}");
    assert!(!plain.contains('\x1b'));
    let color =
        render(&r, &Layout { width: Some(80), color: true, verbose: false, explain: false });
    assert!(color.contains("\x1b[1m"));
}

#[test]
fn report_json_has_structured_predicates_next_to_the_prose() {
    let (d, _) = diagnosis();
    let r = build(&d);
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["format"], "aid-report");
    assert_eq!(json["version"], 1);
    let root = &json["path"][0]["structured"];
    assert_eq!(root["kind"], "too_slow");
    assert_eq!(root["function"], "fetch");
    assert_eq!(root["role"], "fetcher");
    assert_eq!(root["role_id"], 1);
    assert_eq!(root["instance"], 1);
    assert_eq!(root["values"]["measure"], "duration_ns");
    assert!(root["values"]["failing"]["min"].as_i64().unwrap() > 8_000_000);
    assert!(json["path"][0]["predicate"].as_str().unwrap().starts_with("call 1 of fetch"));
    let wrong = &json["untested"][0];
    assert_eq!(wrong["why"], "unsafe");
    assert_eq!(wrong["predicate"]["kind"], "ret_differs");
    assert_eq!(
        wrong["predicate"]["values"]["failing"]["values"],
        serde_json::json!([[4, r.analysis.failing_runs]])
    );
    assert_eq!(
        wrong["predicate"]["values"]["passing"]["values"],
        serde_json::json!([[3, r.analysis.passing_runs]])
    );
    let overlap = json["predicates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "overlap")
        .expect("the overlap predicate");
    assert_eq!(overlap["other"]["function"], "use_cache");
    assert_eq!(overlap["other"]["role"], "reader");
    assert_eq!(
        json["failure_reasons"],
        serde_json::json!([["exit code 1", r.analysis.failing_runs]])
    );
}

#[path = "tests_pictures.rs"]
mod pictures;

mod unused {
    use std::collections::BTreeSet;

    use super::super::unused_words;
    use crate::{
        causal::{Phase, Round, Unused},
        predicates::PredId,
    };

    fn round(unused: Option<Unused>) -> Round {
        Round {
            index: 2,
            phase: Phase::Giwp,
            group: BTreeSet::from([PredId(3)]),
            runs: 9,
            invalid_runs: 20,
            invalid_streak: 20,
            witnessed: 3,
            failing_runs: 0,
            failure_stopped: true,
            risk: None,
            unused,
            confirmed: Vec::new(),
            pruned: Vec::new(),
            set_aside: Vec::new(),
        }
    }

    #[test]
    fn unused_rounds_are_explained_in_words() {
        let desc = |p: PredId| format!("P{}", p.0);
        let confounded = round(Some(Unused::Confounded { changed: vec![PredId(1), PredId(2)] }));
        assert_eq!(
            unused_words(&confounded, &desc, "run"),
            "round 3 (intervening on P3) was confounded and not used: it also changed P1; P2, which come before the intervened predicates or are unordered with them, so the intervention did more than it was meant to"
        );
        assert_eq!(
            unused_words(&round(Some(Unused::NoWitness)), &desc, "run"),
            "round 3 (intervening on P3) was not used: in 9 runs nothing upstream of the intervention held, so nothing shows the failure was ever under way"
        );
        assert_eq!(
            unused_words(&round(Some(Unused::TooLong { needed: 380_783 })), &desc, "run"),
            "round 3 (intervening on P3) was not used: its 9 runs went without the failure, but nothing upstream of the intervention could show the failure was under way in them, so only the round's length could show the failure gone, and that needs 380783 runs in a row without it, more than a round may take (the failure is that rare where rounds are made), so the predicate was left untested"
        );
        assert_eq!(
            unused_words(&round(Some(Unused::NotApplied)), &desc, "run"),
            "round 3 (intervening on P3) was not used: the intervention did not take effect in 20 runs in a row (its call site was not reached, the predicate held in spite of it, the run was cut short, or it acted where the noise that provokes the failure would have and the run passed), so the predicate was left untested"
        );
        // Runs where it took effect came between: the words say so.
        let gaps =
            Round { invalid_runs: 181, invalid_streak: 20, ..round(Some(Unused::NotApplied)) };
        assert_eq!(
            unused_words(&gaps, &desc, "run"),
            "round 3 (intervening on P3) was not used: the intervention did not take effect in 181 of the round's 190 runs, the last 20 in a row (its call site was not reached, the predicate held in spite of it, the run was cut short, or it acted where the noise that provokes the failure would have and the run passed), so the predicate was left untested"
        );
        let pair = Round {
            group: BTreeSet::from([PredId(3), PredId(4)]),
            ..round(Some(Unused::NotApplied))
        };
        assert!(
            unused_words(&pair, &desc, "run")
                .contains("could not all be applied in the same run (20 tries)")
        );
    }
}

/// A session that ran to its end without confirming a cause printed
/// The tracer's effect on the failure rate, when the session found one,
/// is said right after the runs observed, in the text and the page.
#[test]
fn the_tracer_effect_is_said_under_observed() {
    let (mut d, _) = diagnosis();
    let line = "the failure is more frequent under aid's probes: 0 of 40 runs made without them before the session failed, 10 of the first 20 traced runs without noise (Fisher's exact test, p = 2.5e-6): the probes provoke part of it, and what the traced runs show is about the failure as it is under them";
    d.observed.tracer = Some(line.into());
    let r = build(&d);
    let layout = Layout { width: None, color: false, verbose: false, explain: false };
    let text = render(&r, &layout);
    let said = format!("passing.\nT{}.\n", &line[1..]);
    assert!(text.contains(&said), "{text}");
    let page = html::render(&r, &d, None, &Beside::default());
    assert!(
        page.contains("<p class=\"sub\" id=\"tracer\">the failure is more frequent under aid&#39;s probes: 0 of 40 "),
        "{page}"
    );
}

/// "Confidence that the whole path is right: 99.50 %" about a path it
/// never found: the line is there only when a root cause was confirmed.
#[test]
fn no_confidence_line_without_a_confirmed_cause() {
    let layout = Layout { width: None, color: false, verbose: true, explain: false };
    let line = "Confidence that the whole path is right: 99.18% (asked for 99.00%).";
    let (confirmed, _) = diagnosis();
    let text = render(&build(&confirmed), &layout);
    assert_eq!(text.matches(line).count(), 1, "{text}");
    let (mut d, _) = diagnosis();
    let discovery = d.discovery.as_mut().unwrap();
    discovery.root_cause = None;
    discovery.path.clear();
    let r = build(&d);
    assert!(r.confidence.is_some(), "the report's data keeps the number");
    let text = render(&r, &layout);
    assert!(text.contains("No cause was confirmed"), "{text}");
    assert!(!text.contains("Confidence that"), "{text}");
    assert!(!text.contains("round concluded from their runs"), "{text}");
    assert!(!text.contains("rounds concluded from their runs"), "{text}");
}

/// Ctrl-C before any round concluded (while the control was measured):
/// the report says so and lists the candidates that were to be tested —
/// not "no predicate could be intervened on", not a confidence in a path
/// that was never looked for.
#[test]
fn an_interrupted_session_lists_what_was_to_be_tested() {
    let (mut d, _) = diagnosis();
    d.discovery = None;
    d.tagt = None;
    d.oracle_runs.clear();
    d.interrupted = Some("measuring the control");
    let r = build(&d);
    assert_eq!(r.candidates_untested.len(), d.analysis.candidates.len());
    let text = render(&r, &Layout { width: None, color: false, verbose: false, explain: false });
    assert!(
        text.contains("Interrupted while measuring the control, before any intervention concluded; the candidates that were to be tested:\n  • call 1 of fetch on fetcher runs too slow"),
        "{text}"
    );
    for wrong in ["No predicate both held", "No cause was confirmed", "Confidence that"] {
        assert!(!text.contains(wrong), "`{wrong}`:\n{text}");
    }
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["interrupted"], "measuring the control");
    // A session that ran to its end has neither field.
    let (done, _) = diagnosis();
    let json = serde_json::to_value(build(&done)).unwrap();
    assert!(json.get("interrupted").is_none() && json.get("candidates_untested").is_none());
}

/// No round started, the failure too rare under the agent's control: the
/// report says why with the numbers and lists the candidates that were to
/// be tested — not "no predicate could be intervened on", not "no
/// intervention stopped the failure", not a confidence.
#[test]
fn a_session_that_started_no_round_says_why() {
    let (mut d, _) = diagnosis();
    d.discovery = None;
    d.tagt = None;
    d.oracle_runs.clear();
    let control = Control { runs: 200, failing: 1 };
    d.not_started =
        Some(NotStarted { control, needed: Some(380_783), limit: MAX_FIRST_ROUND_RUNS });
    d.control = Some(control);
    let r = build(&d);
    assert_eq!(r.candidates_untested.len(), d.analysis.candidates.len());
    let text = render(&r, &Layout { width: None, color: false, verbose: false, explain: false });
    assert!(
        text.contains("No cause was tested: no intervention round was started, the failure being too rare under the agent's control to judge one. 1 of 200 control runs (made as intervened runs are, nothing intervened on) failed (0.5%): a round would need about 380783 runs in a row without the failure to conclude, and aid starts none that needs more than 2000; the candidates that were to be tested:\n  • call 1 of fetch on fetcher runs too slow"),
        "{text}"
    );
    for wrong in
        ["No predicate both held", "No cause was confirmed", "Confidence that", "Interrupted"]
    {
        assert!(!text.contains(wrong), "`{wrong}`:\n{text}");
    }
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["not_started"]["needed"], 380_783);
    assert_eq!(json["not_started"]["control"]["failing"], 1);
    let html = html::render(&r, &d, None, &Beside::default());
    assert!(html.contains("No intervention round was started"), "{html}");
    // A session that ran its rounds has no such field.
    let (done, _) = diagnosis();
    assert!(serde_json::to_value(build(&done)).unwrap().get("not_started").is_none());
}

/// A chain whose first link is reported as the timing the second needs
/// (`analysis::triggers`): the second is the root cause and the path's
/// first link, the first is shown above the path with its own evidence,
/// and the graph still marks the whole chain.
#[test]
fn timing_in_front_of_the_root_cause_is_shown_apart_with_its_evidence() {
    let (mut d, intervened) = diagnosis();
    let chain = d.discovery.as_ref().unwrap().path.clone();
    assert_eq!(chain.len(), 2, "the session's path: {chain:?}");
    d.discovery.as_mut().unwrap().lead_with(1);
    let r = build(&d);
    let plain = render(&r, &Layout { width: None, color: false, verbose: false, explain: false });
    let timing = plain
        .split("It happens with this timing, confirmed as well")
        .nth(1)
        .unwrap_or_else(|| panic!("no timing section:\n{plain}"));
    assert!(
        plain.contains("Root cause: call 1 of fetch on fetcher and call 1 of use_cache on reader run at the same time on the same object"),
        "{plain}"
    );
    assert!(
        timing.contains(
            "  • call 1 of fetch on fetcher runs too slow: 8.92 ms to 9.66 ms in failing runs"
        ),
        "{plain}"
    );
    assert!(
        timing.contains(
            "evidence: intervening on it alone stopped the failure: all 29 runs of round 1 passed"
        ),
        "{plain}"
    );
    let path = plain.split("Causal path, from the root cause to the failure:").nth(1).unwrap();
    assert!(path.contains("  2. the run fails"), "{plain}");
    assert!(!path.contains("runs too slow"), "{plain}");
    let json: serde_json::Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["root_cause_id"], chain[1].0);
    assert_eq!(json["path"][0]["id"], chain[1].0);
    assert_eq!(json["triggers"][0]["id"], chain[0].0);
    assert_eq!(json["triggers"][0]["round"], 0);
    let shown = intervened.iter().find(|x| x.label == Label::Pass);
    let page = html::render(&r, &d, shown, &Beside::default());
    assert!(page.contains("id=\"timing\""), "no timing section in the page");
    let graph = dot::render(&d.analysis, &d.discovery.as_ref().unwrap().chain(), "run");
    let last = chain.last().unwrap();
    assert!(graph.contains(&format!("n{} -> n0 [color=red, penwidth=2.5];", last.0)), "{graph}");
}

/// The facts' view of the first predicate learnt from `session` that
/// `pick` chooses; panics naming `what` (and the catalog) when none is.
fn view_of(
    session: &Session,
    what: &str,
    pick: impl Fn(&crate::predicates::Predicate) -> bool,
) -> PredicateView {
    keyed_view_of(session, what, pick).1
}

/// [`view_of`], with the predicate's key.
fn keyed_view_of(
    session: &Session,
    what: &str,
    pick: impl Fn(&crate::predicates::Predicate) -> bool,
) -> (crate::predicates::PredKey, PredicateView) {
    let catalog = crate::predicates::learn(session, &Default::default()).unwrap();
    let p = catalog
        .predicates
        .iter()
        .find(|p| pick(p))
        .unwrap_or_else(|| panic!("no predicate {what}: {:?}", catalog.predicates));
    (p.key, Facts::new(session, &catalog).view(p.id).unwrap())
}

/// Chooses the too-slow predicate on call 1 of `func` on `role`.
fn too_slow_at(func: u32, role: u32) -> impl Fn(&crate::predicates::Predicate) -> bool {
    move |p| {
        p.key.kind == crate::predicates::Kind::TooSlow
            && p.key.site() == Some(Site { func, role, instance: 1 })
    }
}

/// A cause stated on a helper names the traced functions it is called
/// within: `lock_slot` (called by `push` on the pusher, by `pop` within
/// `popper` on the popper) is slow on the popper in failing runs.
#[test]
fn a_helper_in_a_predicate_is_named_with_its_callers() {
    let functions = vec![
        function(0, "push"),
        function(1, "pop"),
        function(2, "lock_slot"),
        function(3, "popper"),
    ];
    let runs: Vec<Run> = (1..=20u32)
        .map(|i| {
            let fail = i % 2 == 0;
            let slow = if fail { 5_000 * US } else { 10 * US };
            let calls = vec![
                call(0, 1, 1, 0, Some(100 * US), Some(0)),
                call(2, 1, 1, 10 * US, Some(20 * US), Some(0)),
                call(3, 2, 1, 150 * US, Some(350 * US + slow), Some(0)),
                call(1, 2, 1, 200 * US, Some(300 * US + slow), Some(0)),
                call(2, 2, 1, 210 * US, Some(220 * US + slow), Some(0)),
            ];
            let label = if fail { Label::Fail } else { Label::Pass };
            run(i, label, calls, 400 * US + slow).with_threads(vec![
                thread(0, "main"),
                thread(1, "pusher"),
                thread(2, "popper"),
            ])
        })
        .collect();
    let session = Session { functions, runs };
    let view = |func: u32| view_of(&session, "too-slow on the popper", too_slow_at(func, 2));
    let helper = view(2);
    assert_eq!(
        helper.callers,
        vec![facts::CallerView {
            function: "lock_slot".into(),
            callers: vec!["pop".into(), "popper".into()]
        }]
    );
    assert_eq!(helper.functions, ["lock_slot", "pop", "popper"]);
    assert_eq!(helper.called().as_deref(), Some("lock_slot from pop, from popper"));
    // `popper` is its thread's outermost traced call: no caller to name.
    let outer = view(3);
    assert!(outer.callers.is_empty(), "{:?}", outer.callers);
    assert_eq!(outer.functions, ["popper"]);
}

/// A predicate naming one function on both of its sides names that
/// function's callers on each: `read_v` is called by `push` on main and by
/// `steal` on the thief, and the two calls overlap in failing runs only.
/// Before, the function was named once, with the first side's callers
/// only, so the cause never named `steal`.
#[test]
fn a_function_on_both_sides_of_a_predicate_is_named_with_each_sides_callers() {
    let functions = vec![function(0, "push"), function(1, "steal"), function(2, "read_v")];
    let runs: Vec<Run> = (1..=20u32)
        .map(|i| {
            let fail = i % 2 == 0;
            // The thief's read_v runs inside main's in failing runs, after
            // it in passing ones.
            let at = if fail { 130 * US } else { 400 * US };
            let calls = vec![
                call(0, 0, 1, 100 * US, Some(300 * US), Some(0)),
                call(2, 0, 1, 110 * US, Some(200 * US), Some(0)),
                call(1, 1, 1, at - 10 * US, Some(at + 50 * US), Some(0)),
                call(2, 1, 1, at, Some(at + 20 * US), Some(0)),
            ];
            let label = if fail { Label::Fail } else { Label::Pass };
            run(i, label, calls, 600 * US).with_threads(vec![thread(0, "main"), thread(1, "thief")])
        })
        .collect();
    let session = Session { functions, runs };
    let view = view_of(&session, "on both read_v calls", |p| {
        p.key.func == 2
            && p.key.other.is_some_and(|o| o.func == 2)
            && p.key.site().is_some_and(|s| s.role == 0)
            && p.key.other_site().is_some_and(|s| s.role == 1)
    });
    assert_eq!(
        view.callers,
        vec![
            facts::CallerView { function: "read_v".into(), callers: vec!["push".into()] },
            facts::CallerView { function: "read_v".into(), callers: vec!["steal".into()] },
        ]
    );
    assert_eq!(view.functions, ["read_v", "push", "steal"]);
    assert_eq!(view.called().as_deref(), Some("read_v from push; read_v from steal"));
}

/// A cause stated on a class of threads names the callers its calls have
/// on those threads, although the function is called elsewhere from
/// another: `lock_slot`, called by `setup` on main and by `work` on three
/// `worker` threads, is slow on one of the workers (a different one each
/// time) in failing runs.
#[test]
fn a_helper_called_on_a_pool_is_named_with_its_callers_there() {
    let functions = vec![function(0, "setup"), function(1, "work"), function(2, "lock_slot")];
    let runs: Vec<Run> = (1..=30u32)
        .map(|i| {
            let fail = i % 2 == 0;
            let mut calls = vec![
                call(0, 0, 1, 0, Some(100 * US), Some(0)),
                call(2, 0, 1, 10 * US, Some(20 * US), Some(0)),
            ];
            for w in 1..=3u32 {
                let slow = if fail && w == 1 + i % 3 { 5_000 * US } else { 10 * US };
                let start = 1_000 * US * u64::from(w);
                calls.push(call(1, w, 1, start, Some(start + 100 * US + slow), Some(0)));
                calls.push(call(2, w, 1, start + 10 * US, Some(start + 20 * US + slow), Some(0)));
            }
            let label = if fail { Label::Fail } else { Label::Pass };
            run(i, label, calls, 10_000 * US).with_threads(vec![
                thread(0, "main"),
                thread(1, "worker"),
                thread(2, "worker"),
                thread(3, "worker"),
            ])
        })
        .collect();
    let session = Session { functions, runs };
    let (key, view) = keyed_view_of(&session, "too-slow on lock_slot", |p| {
        p.key.kind == crate::predicates::Kind::TooSlow && p.key.func == 2
    });
    assert!(key.is_group(), "{key:?}");
    assert_eq!(
        view.callers,
        vec![facts::CallerView { function: "lock_slot".into(), callers: vec!["work".into()] }]
    );
    assert_eq!(view.functions, ["lock_slot", "work"]);
    assert_eq!(view.called().as_deref(), Some("lock_slot from work"));
}

/// A call with no traced caller is named within the untraced function its
/// thread runs when the executable runs no code of its own outside it:
/// `main` on the main thread, the start routine (`worker`, untraced) on
/// another. The same session over an executable with a constructor names
/// neither: code of the program's may run on the main thread before
/// `main`.
#[test]
fn an_outermost_call_is_named_within_main_or_its_start_routine() {
    let program = |extra: &str| {
        let source = format!(
            "#include <pthread.h>\n{extra}\nint push(int x) {{ return x; }}\nint pop(void) {{ return 0; }}\n\
             void *worker(void *a) {{ pop(); return a; }}\n\
             int main(void) {{ pthread_t t; pthread_create(&t, 0, worker, 0); push(1); pthread_join(t, 0); return 0; }}\n"
        );
        crate::symbols::compiled("cc", "p.c", &source, &["-O0", "-pthread"])
            .expect("cc is needed (`cargo xtask setup` installs it)")
    };
    let (_plain_dir, plain) = program("");
    let (_ctor_dir, with_ctor) = program("__attribute__((constructor)) static void early(void) {}");
    let views = |exe: &Path| {
        let module = exe.to_str().unwrap();
        let functions = vec![
            function(0, "push").in_module(module, 0x1000),
            function(1, "pop").in_module(module, 0x1010),
        ];
        let runs: Vec<Run> = (1..=20u32)
            .map(|i| {
                let fail = i % 2 == 0;
                let slow = if fail { 5_000 * US } else { 10 * US };
                let calls = vec![
                    call(0, 0, 1, 10 * US, Some(20 * US + slow), Some(0)),
                    call(1, 1, 1, 30 * US, Some(40 * US + slow), Some(0)),
                ];
                let label = if fail { Label::Fail } else { Label::Pass };
                run(i, label, calls, 100 * US + slow)
                    .with_threads(vec![thread(0, "main"), thread(1, "worker")])
            })
            .collect();
        let session = Session { functions, runs };
        let view = |func, role| view_of(&session, "too-slow", too_slow_at(func, role));
        (view(0, 0), view(1, 1))
    };
    let (push, pop) = views(&plain);
    assert_eq!(push.called().as_deref(), Some("push from main"));
    assert_eq!(push.functions, ["push", "main"]);
    assert_eq!(pop.called().as_deref(), Some("pop from worker"));
    assert_eq!(pop.functions, ["pop", "worker"]);
    let (push, pop) = views(&with_ctor);
    assert_eq!(push.called(), None);
    assert_eq!(push.functions, ["push"]);
    // A constructor runs on the main thread only: threads are unaffected.
    assert_eq!(pop.called().as_deref(), Some("pop from worker"));
}

/// A link that removed many effects lists the first `EFFECTS_SHOWN` and
/// says how many more; `-v` (and report.txt) lists every one.
#[test]
fn a_link_with_many_effects_lists_a_few_and_counts_the_rest() {
    let (d, _) = diagnosis();
    let mut r = build(&d);
    let link = r.path.first_mut().expect("a causal path");
    let one = link.effects.first().cloned().unwrap_or_else(|| link.structured.clone());
    link.effects = (0..11)
        .map(|i| {
            let mut e = one.clone();
            e.headline = format!("effect number {i}");
            e
        })
        .collect();
    let plain = render(&r, &Layout { width: None, color: false, verbose: false, explain: false });
    assert!(plain.contains("effect number 7"), "{plain}");
    assert!(!plain.contains("effect number 8"), "{plain}");
    assert!(plain.contains("and 3 more (listed in report.txt, and here with -v)"), "{plain}");
    let verbose = render(&r, &Layout { width: None, color: false, verbose: true, explain: false });
    assert!(verbose.contains("effect number 10"), "{verbose}");
    assert!(!verbose.contains("more (listed in report.txt"), "{verbose}");
}

/// The run-method words of the "Observed" line: nothing for runs made one
/// at a time, N and what stays one at a time otherwise.
#[test]
fn the_observed_line_says_how_many_runs_were_made_at_once() {
    let at_once = |jobs| jobs_words(&crate::debug::Observed { jobs, ..Default::default() }, "run");
    assert_eq!(at_once(0), "");
    assert_eq!(at_once(1), "");
    assert_eq!(
        at_once(2),
        "; made 2 at a time (interventions and their control runs one at a time)"
    );
}

/// A fleet's observed runs: the server and how many each worker made
/// (the workers' `--jobs` change as they come and go; each run's count
/// does not).
#[test]
fn the_observed_line_names_the_fleet_and_what_each_worker_made() {
    let fleet = crate::store::FleetMark {
        url: "nats://10.0.0.5:4222".into(),
        workers: [("w2".to_owned(), 8), ("w3".to_owned(), 4)].into(),
    };
    let ob = crate::debug::Observed { jobs: 1, fleet: Some(fleet), ..Default::default() };
    assert_eq!(
        jobs_words(&ob, "run"),
        "; made by a fleet's workers through nats://10.0.0.5:4222 (w2: 8, w3: 4 runs in all), as were the interventions and their control runs"
    );
}
