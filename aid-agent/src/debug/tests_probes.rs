//! The failure rate under aid's probes against the one without them, on
//! the scripted run source of `tests.rs`: said only beyond chance, and
//! what observing does when the probes provoke or hide the failure.

use std::sync::atomic::AtomicBool;

use super::{
    tests::{Program, Scripted, make_read_run},
    *,
};
use crate::{
    intervene::Plan,
    model::{AppliedIntervention, Function, Noise, RecordedRun, ValueKind, testing::function},
    store::{Mode, test_header},
};

/// The failure rate without aid's probes against the first traced block:
/// said only beyond chance ([`TRACER_EFFECT_P`]), each way.
#[test]
fn a_failure_rate_changed_by_the_probes_is_said_only_beyond_chance() {
    // The downloader of issue 24: 3 of 40 untraced, 0 of 40 traced.
    assert_eq!(tracer_effect((3, 40), (0, 40), "run"), None, "p = 0.24: chance");
    assert_eq!(tracer_effect((0, 5), (0, 40), "run"), None);
    assert_eq!(
        tracer_effect((0, 40), (14, 40), "run").as_deref(),
        Some(
            "the failure is more frequent under aid's probes: 0 of 40 runs made without them before the session failed, 14 of the first 40 traced runs without noise (Fisher's exact test, p = 3.1e-5): the probes provoke part of it, and what the traced runs show is about the failure as it is under them"
        )
    );
    let rarer = tracer_effect((12, 40), (0, 40), "run").expect("beyond chance");
    assert!(rarer.starts_with("the failure is rarer under aid's probes: 12 of 40 "), "{rarer}");
    assert!(rarer.contains("the probes hide part of it"), "{rarer}");
    assert_eq!(tracer_effect((41, 40), (0, 40), "run"), None, "impossible counts");
}

/// A program whose traced runs fail when `fails` says so (by the number
/// of runs before; an intervened run never fails), with `untraced` (failed,
/// made) among the runs made without aid's probes before the session, and
/// `fewer` for whether it could be traced with fewer functions.
struct UntracedRate {
    functions: Vec<Function>,
    runs: u32,
    fails: fn(u32) -> bool,
    untraced: (u32, u32),
    fewer: bool,
}

impl Program for UntracedRate {
    fn functions(&self) -> &[Function] {
        &self.functions
    }

    fn observed(&mut self, _: &[Noise]) -> RecordedRun {
        let fails = (self.fails)(self.runs);
        make_read_run(&mut self.runs, fails, Vec::new())
    }

    fn intervened(&mut self, _: &Plan, applied: Vec<AppliedIntervention>) -> RecordedRun {
        make_read_run(&mut self.runs, false, applied)
    }

    fn untraced(&self) -> Option<(u32, u32)> {
        Some(self.untraced)
    }

    fn may_trace_fewer(&self) -> bool {
        self.fewer
    }
}

/// [`UntracedRate`] for a failure aid's probes provoke: every other
/// traced run fails, none of the 40 made without them.
fn provoked_by_the_probes(functions: &[Function]) -> UntracedRate {
    UntracedRate {
        functions: functions.to_vec(),
        runs: 0,
        fails: |n| n.is_multiple_of(2),
        untraced: (0, 40),
        fewer: false,
    }
}

/// [`UntracedRate`] for a failure aid's probes hide: no traced run fails,
/// half of the 100 made without them do.
fn hidden_by_the_probes(functions: &[Function], fewer: bool) -> UntracedRate {
    UntracedRate {
        functions: functions.to_vec(),
        runs: 0,
        fails: |_| false,
        untraced: (50, 100),
        fewer,
    }
}

/// Observing that ends before the amplifier's first block of runs
/// without noise is over (here it would be at 100) still compares the
/// failure rate with the untraced one: 10 of the first 20 traced runs
/// against 0 of 40 untraced is said and kept for the report
/// (`report::tests::the_tracer_effect_is_said_under_observed`), also when
/// the control runs send it back to observe with noise.
#[test]
fn a_failure_the_probes_provoke_is_said_when_observing_ends_early() {
    let functions = vec![function(0, "read").with_ret(ValueKind::Signed)];
    let mut source = Scripted(provoked_by_the_probes(&functions));
    let dir = tempfile::tempdir().unwrap();
    let mut writer =
        Writer::create(&dir.path().join("s"), &test_header(Mode::Debug, functions.clone()))
            .unwrap();
    let opts = DebugOptions {
        safe: SafeList::new(&["read"]).unwrap(),
        amplify_after: 100,
        ..DebugOptions::default()
    };
    let d = debug(&mut source, &mut writer, &opts, &AtomicBool::new(false), &mut Quiet).unwrap();
    assert_eq!((d.observed.runs, d.observed.failing, d.observed.passing), (40, 20, 20));
    assert_eq!(
        d.observed.tracer.as_deref(),
        Some(
            "the failure is more frequent under aid's probes: 0 of 40 runs made without them before the session failed, 10 of the first 20 traced runs without noise (Fisher's exact test, p = 2.5e-6): the probes provoke part of it, and what the traced runs show is about the failure as it is under them"
        )
    );
    // Kept for the campaign, which debugs again with fewer probes when no
    // cause is confirmed (`campaign.rs`, `provoked_again`).
    assert_eq!(d.observed.provoked, Some(((0, 40), (10, 20))));
}

/// Where fewer functions could be traced, observing ends with
/// [`ProbesHideIt`] at the first block of 40 runs without noise (0 of 40
/// failing against 50 of 100 untraced), before any noise; where they
/// could not, it goes on to amplify.
#[test]
fn observing_ends_when_the_probes_hide_the_failure_and_fewer_could_be_traced() {
    let functions = vec![function(0, "read").with_ret(ValueKind::Signed)];
    let dir = tempfile::tempdir().unwrap();
    let mut writer =
        Writer::create(&dir.path().join("s"), &test_header(Mode::Debug, functions.clone()))
            .unwrap();
    let mut source = Scripted(hidden_by_the_probes(&functions, true));
    let opts = DebugOptions::default();
    let Err(err) = debug(&mut source, &mut writer, &opts, &AtomicBool::new(false), &mut Quiet)
    else {
        panic!("a diagnosis of a failure no traced run showed")
    };
    let hid = err.downcast_ref::<ProbesHideIt>().expect("ended for the probes");
    assert_eq!((hid.untraced, hid.traced), ((50, 100), (0, 40)));
    assert_eq!(source.0.runs, 40);
    assert!(
        hid.line.starts_with("the failure is rarer under aid's probes: 50 of 100 "),
        "{}",
        hid.line
    );
    let mut writer =
        Writer::create(&dir.path().join("t"), &test_header(Mode::Debug, functions.clone()))
            .unwrap();
    let mut source = Scripted(hidden_by_the_probes(&functions, false));
    let err = debug(&mut source, &mut writer, &opts, &AtomicBool::new(false), &mut Quiet)
        .err()
        .expect("no run failed");
    assert!(err.downcast_ref::<ProbesHideIt>().is_none(), "{err}");
    assert!(source.0.runs > 40, "amplified after the first block: {} runs", source.0.runs);
}

/// A failure the probes make less frequent but not rare (lazy01_bad: 99
/// of 100 untraced runs, 26 of the first 36 traced ones) is debugged as
/// it is under them, even where fewer functions could be traced: the
/// difference is said, and observing goes on to analysis.
#[test]
fn a_failure_the_probes_make_less_frequent_but_not_rare_is_debugged_as_it_is() {
    let functions = vec![function(0, "read").with_ret(ValueKind::Signed)];
    let dir = tempfile::tempdir().unwrap();
    let mut writer =
        Writer::create(&dir.path().join("s"), &test_header(Mode::Debug, functions.clone()))
            .unwrap();
    let mut source = Scripted(UntracedRate {
        functions: functions.clone(),
        runs: 0,
        fails: |n| !n.is_multiple_of(4),
        untraced: (99, 100),
        fewer: true,
    });
    let opts = DebugOptions { safe: SafeList::new(&["read"]).unwrap(), ..DebugOptions::default() };
    let d = debug(&mut source, &mut writer, &opts, &AtomicBool::new(false), &mut Quiet).unwrap();
    let said = d.observed.tracer.as_deref().unwrap_or_default();
    assert!(said.starts_with("the failure is rarer under aid's probes: 99 of 100 "), "{said}");
    // Rarer is not provoked: no session with fewer probes follows for it.
    assert_eq!(d.observed.provoked, None);
    assert!(d.analysis.totals.passing > 0 && d.analysis.totals.failing > 0);
}
