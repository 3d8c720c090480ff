//! The one debug pipeline, over any run source (a program aid starts, or
//! the units of a running service): observe runs until there are enough
//! passing and failing ones (amplifying a rare failure with noise at
//! synchronisation points and traced calls where the source allows), learn the predicates and the AC-DAG, discover
//! the causal path with interventions, and estimate what TAGT would have
//! needed on the same session.

pub mod amplify;
pub mod beside;
pub mod campaign;
pub mod default_set;
pub mod observe;
pub mod oracle;
pub mod program;
pub mod races;
pub mod service;
pub mod source;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_probes;

use std::{
    collections::BTreeSet,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

pub use self::observe::{ProbesHideIt, TRACER_EFFECT_P, UNDECIDED_FAILING, tracer_effect};
use self::{
    observe::{Aside, Observation, observe, observe_more, undecided_line},
    oracle::{CONTROL_FAILURES, CONTROL_MAX_RUNS, Control, NotStarted, OracleRun, SourceOracle},
    source::RunSource,
};
pub use crate::record::progress::{Progress, Quiet};
use crate::{
    analysis::{self, Analysis, triggers},
    causal::{self, Config, Discovery, Strategy, TagtEstimate},
    intervene::{Reach, SafeList, noise::Schedule},
    model::{Label, Run, Session},
    predicates::{ExtractConfig, PredId},
    store::{Settings, Writer},
};

/// How `debug` observes, which interventions it may use, and how sure it
/// must be.
#[derive(Clone, Debug)]
pub struct DebugOptions {
    pub strategy: Strategy,
    /// Probability that the whole session reports a right path: bounds the
    /// risk summed over every round that believed the failure stopped.
    pub confidence: f64,
    /// Observation stops once this many failing and passing runs exist...
    pub min_failing: u32,
    pub min_passing: u32,
    /// ...or after this many runs.
    pub max_runs: u32,
    /// `--runs N`: observe exactly N runs, as `record --runs N` records N
    /// (no early stop; `max_runs` is then ignored).
    pub runs: Option<u32>,
    /// Below this failure rate (of the runs so far, judged every
    /// `amplify_after` runs), noise is injected to make the failure more
    /// frequent.
    pub amplify_below: f64,
    pub amplify_after: u32,
    /// Which noise amplified runs get (`intervene/noise.rs`).
    pub schedule: Schedule,
    pub hold_timeout: Duration,
    pub safe: SafeList,
    pub extract: ExtractConfig,
    pub seed: u64,
    /// TAGT replays for the comparison.
    pub tagt_seeds: u32,
    /// Noise acts at the statements inside the traced functions from its
    /// first level on, not only once the ladder's first pass provoked
    /// nothing (the campaign's session after one that provoked the failure
    /// without them and confirmed nothing: `campaign.rs`).
    pub statements_from_start: bool,
}

impl Default for DebugOptions {
    fn default() -> Self {
        DebugOptions {
            strategy: Strategy::Aid,
            confidence: 0.99,
            min_failing: 10,
            min_passing: 10,
            max_runs: 200,
            runs: None,
            amplify_below: 0.05,
            amplify_after: 40,
            schedule: Schedule::default(),
            hold_timeout: Duration::from_secs(1),
            safe: SafeList::default(),
            extract: ExtractConfig::default(),
            seed: 1,
            tagt_seeds: 20,
            statements_from_start: false,
        }
    }
}

impl DebugOptions {
    /// The options as `session.json` stores them, so that `analyze` judges
    /// the session the way `debug` did.
    pub fn settings(&self) -> Settings {
        Settings {
            safe: self.safe.patterns().to_vec(),
            zero_is_error: self.extract.error.zero,
            negative_is_ok: !self.extract.error.negative,
            // The --strategy value ("aid", "aid-paper", ...).
            strategy: serde_json::to_value(self.strategy)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            confidence: self.confidence,
            min_runs: self.min_failing.min(self.min_passing),
            max_runs: self.runs.unwrap_or(self.max_runs),
            hold_timeout_ms: self.hold_timeout.as_millis() as u64,
            seed: self.seed,
        }
    }
}

/// How the observation phase went.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Observed {
    /// What one run is called: "run", or "unit" for a live service.
    #[serde(default)]
    pub noun: String,
    pub runs: u32,
    pub failing: u32,
    pub passing: u32,
    /// Runs dropped because events were lost.
    pub incomplete: u32,
    /// The noise level the analysed runs were made with, if failures had
    /// to be amplified: (points per run, longest hold in µs).
    pub amplified: Option<(usize, u64)>,
    /// That noise in words (`amplify.rs`): a level of random noise, or the
    /// plan it was focused on.
    #[serde(default)]
    pub noise: Option<String>,
    /// Runs the analysis used (those of the final noise level).
    pub analysed: u32,
    /// The noise acted at the statements inside the traced functions too,
    /// and the noisy runs carry their probes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub statements: bool,
    /// How the failure rate under aid's probes differs from the one
    /// without them, when it does beyond chance ([`tracer_effect`]).
    #[serde(default)]
    pub tracer: Option<String>,
    /// When the failure was more frequent under aid's probes than without
    /// them, beyond chance (what [`Observed::tracer`] says then): the
    /// untraced runs and the traced ones compared, (failed, made) each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provoked: Option<((u32, u32), (u32, u32))>,
    /// Observed runs made at once (`--jobs`), when more than one (0 or 1:
    /// one at a time). Interventions and their control runs are made one
    /// at a time.
    #[serde(default, skip_serializing_if = "one_at_a_time")]
    pub jobs: u32,
    /// `--fleet`: the workers that made the observed runs, and through
    /// which server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::store::FleetMark>,
}

/// Whether [`Observed::jobs`] says one run at a time.
fn one_at_a_time(jobs: &u32) -> bool {
    *jobs <= 1
}

impl Observed {
    /// Counts one observed run; false when it lost events (incomplete), so
    /// that it is left out of the analysis.
    fn count(&mut self, run: &Run) -> bool {
        self.runs += 1;
        if !run.complete {
            self.incomplete += 1;
            return false;
        }
        match run.label {
            Label::Fail => self.failing += 1,
            Label::Pass => self.passing += 1,
        }
        true
    }

    /// Share of the complete runs that failed.
    fn rate(&self) -> f64 {
        f64::from(self.failing) / f64::from((self.failing + self.passing).max(1))
    }

    /// Counts the runs of an earlier observation too (made before this
    /// one had to start over with noise; stored, not analysed).
    fn add_earlier(&mut self, earlier: &Observed) {
        self.runs += earlier.runs;
        self.failing += earlier.failing;
        self.passing += earlier.passing;
        self.incomplete += earlier.incomplete;
        if self.tracer.is_none() {
            self.tracer.clone_from(&earlier.tracer);
            self.provoked = earlier.provoked;
        }
    }
}

/// What `debug` found: how observation went, the analysis, and the causal
/// path with the runs that confirmed it.
pub struct Diagnosis {
    pub observed: Observed,
    /// The runs the analysis was made from.
    pub session: Session,
    pub analysis: Analysis,
    pub discovery: Option<Discovery>,
    pub tagt: Option<TagtEstimate>,
    pub oracle_runs: Vec<OracleRun>,
    /// The phase the user interrupted (Ctrl-C), if they did: the discovery
    /// then holds only what was confirmed before.
    pub interrupted: Option<&'static str>,
    /// The control runs the rounds were judged against.
    pub control: Option<Control>,
    /// Why no round was started although there were candidates: the
    /// failure too rare under the agent's control.
    pub not_started: Option<NotStarted>,
}

impl Diagnosis {
    /// A diagnosis with no intervention concluded: nothing to test, or
    /// interrupted before the engine ran (`interrupted`: the phase).
    fn untested(
        observed: Observed,
        session: Session,
        analysis: Analysis,
        oracle_runs: Vec<OracleRun>,
        interrupted: Option<&'static str>,
    ) -> Diagnosis {
        Diagnosis {
            observed,
            session,
            analysis,
            discovery: None,
            tagt: None,
            oracle_runs,
            interrupted,
            control: None,
            not_started: None,
        }
    }
}

/// A finished `debug`: the diagnosis, the session directory holding
/// every run it made, and what the other explainers add beside the causal
/// path.
pub struct Debugged {
    pub diagnosis: Diagnosis,
    pub out: PathBuf,
    pub beside: beside::Beside,
    /// Sessions made before this one, first first, when `debug` went on
    /// to trace callers (`campaign::debug_program`): each keeps its runs
    /// in its own directory, and its report is written there too.
    pub earlier: Vec<Debugged>,
    /// Sessions made after this one that confirmed no cause, when this
    /// one's stands (`campaign::debug_program`: one with fewer probes
    /// after a cause confirmed under probes that provoke the failure).
    pub later: Vec<Debugged>,
}

/// Observe, analyse, intervene, conclude. Every run is stored with
/// `writer`; `cancel` stops it between runs (the runs so far are kept).
pub fn debug(
    source: &mut dyn RunSource,
    writer: &mut Writer,
    opts: &DebugOptions,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Diagnosis> {
    writer.set_settings(opts.settings())?;
    let mut observed = observe(source, writer, opts, None, Aside::default(), cancel, ui)?;
    // The runs observed without noise, kept while the ones observed again
    // with noise are analysed (see below).
    let mut natural: Option<(Observed, Vec<Run>)> = None;
    // At most three times: observed again, the runs carry noise, and the
    // control runs are never taken for rare again; back to the runs
    // observed without noise, amplification is not tried again either.
    let mut may_amplify = true;
    loop {
        match debug_observed(source, writer, opts, observed, may_amplify, cancel, ui)? {
            Debugging::Done(d, noisy_aside) => {
                // With noise, no predicate could be intervened on, where
                // the runs observed without it had one: that one is
                // tested after all, its rounds judged against control
                // runs as on any source that cannot amplify (rounds take
                // longer where the failure is rare; none is confirmed on
                // fewer runs than the control's rate demands).
                let untestable = d.discovery.is_none()
                    && d.not_started.is_none()
                    && d.analysis.candidates.is_empty()
                    && d.interrupted.is_none();
                match natural.take() {
                    Some((earlier, plain)) if untestable && !cancel.load(Ordering::Relaxed) => {
                        let noun = source.noun();
                        ui.say(&format!(
                            "with noise no predicate could be intervened on ({} {noun}s, {} failing): back to the {} {noun}s observed without it, whose predicates are tested against control {noun}s made as the rounds are",
                            d.observed.runs.saturating_sub(earlier.runs),
                            d.observed.failing.saturating_sub(earlier.failing),
                            plain.len(),
                        ));
                        // The runs observed with noise are set aside now,
                        // and those without it are analysed again.
                        let analysed: BTreeSet<u32> = plain.iter().map(|r| r.id).collect();
                        let mut aside = Aside::default();
                        aside.extend(
                            noisy_aside.runs.into_iter().filter(|r| !analysed.contains(&r.id)),
                        );
                        aside.extend(d.session.runs);
                        observed =
                            Observation { observed: earlier, basis: plain, aside, noise: None };
                        may_amplify = false;
                    }
                    _ => return Ok(*d),
                }
            }
            Debugging::RareUnderControl { observed: earlier, plain, aside, control } => {
                natural = Some(((*earlier).clone(), plain.clone()));
                let noun = source.noun();
                ui.say(&format!(
                    "under the agent's control the failure is rare ({} of {} control {noun}s failed, against {:.0}% of observed {noun}s): observing again with noise, so that interventions are judged where the failure is frequent",
                    control.failing,
                    control.runs,
                    earlier.rate() * 100.0
                ));
                // The runs observed without noise are set aside now.
                let mut aside = aside;
                aside.extend(plain.iter().cloned());
                let mut again = observe(source, writer, opts, Some(plain), aside, cancel, ui)?;
                again.observed.add_earlier(&earlier);
                observed = again;
            }
        }
    }
}

/// Where [`debug_observed`] ended.
enum Debugging {
    /// The diagnosis, and the runs observed but not analysed.
    Done(Box<Diagnosis>, Aside),
    /// The control runs showed the failure rare, though observed runs
    /// made without noise did not: observe again with noise (`plain`: the
    /// runs observed so far, which the noise is planned from). Never
    /// returned for runs that carry noise.
    RareUnderControl { observed: Box<Observed>, plain: Vec<Run>, aside: Aside, control: Control },
}

/// Analyse the observed runs, intervene, conclude.
/// Long (about 125 lines): the analysis's steps in order over one
/// session and its writer.
fn debug_observed(
    source: &mut dyn RunSource,
    writer: &mut Writer,
    opts: &DebugOptions,
    Observation { mut observed, basis, aside, mut noise }: Observation,
    may_amplify: bool,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Debugging> {
    let mut session = Session { functions: source.functions().to_vec(), runs: basis };
    ui.begin(&format!("learning predicates from {} {}s", session.runs.len(), source.noun()), None);
    let analysis = analyse(&session, &aside, opts, source.reach(), ui);
    ui.end();
    let mut analysis = analysis?;
    if analysis.candidates.is_empty() && !analysis.undecided.is_empty() && opts.runs.is_none() {
        ui.say(&undecided_line(&analysis, opts, source.noun()));
        if observe_more(
            source,
            writer,
            opts,
            &mut observed,
            &mut session.runs,
            noise.as_mut(),
            cancel,
            ui,
        )? {
            ui.begin(
                &format!("learning predicates from {} {}s", session.runs.len(), source.noun()),
                None,
            );
            let again = analyse(&session, &aside, opts, source.reach(), ui);
            ui.end();
            analysis = again?;
        }
    }
    // Overlaps on an object: which side writes it, from watched re-runs.
    races::decide(&mut analysis, &session, &mut *source, writer.dir(), cancel, ui);
    let interrupted = cancel.load(Ordering::Relaxed).then_some("analysing");
    if analysis.candidates.is_empty() || interrupted.is_some() {
        let d = Diagnosis::untested(observed, session, analysis, Vec::new(), interrupted);
        return Ok(Debugging::Done(Box::new(d), aside));
    }
    let mut config = engine_config(&analysis, opts, source.noun(), ui)?;
    let may_amplify = may_amplify && noise.is_none() && source.can_amplify();
    source.begin_interventions()?;
    let mut oracle = SourceOracle::new(
        &mut *source,
        &analysis.catalog,
        writer,
        opts.hold_timeout,
        noise,
        cancel,
        &mut *ui,
    );
    let witnessed = causal::some_round_witnessed(&analysis.dag, &analysis.candidates);
    let amplify_below = may_amplify.then_some(opts.amplify_below);
    let control = match calibrate(&mut oracle, &mut config, amplify_below, witnessed) {
        Ok(Calibration::Judged(c)) => c,
        Ok(Calibration::Rare(control)) => {
            let _ = oracle.finish();
            source.end_interventions();
            return Ok(Debugging::RareUnderControl {
                observed: Box::new(observed),
                plain: session.runs,
                aside,
                control,
            });
        }
        Ok(Calibration::TooRare(not_started)) => {
            let oracle_runs = oracle.finish();
            source.end_interventions();
            let mut d = Diagnosis::untested(observed, session, analysis, oracle_runs, None);
            d.control = Some(not_started.control);
            d.not_started = Some(not_started);
            return Ok(Debugging::Done(Box::new(d), aside));
        }
        Err(e) => {
            let oracle_runs = oracle.finish();
            source.end_interventions();
            if !cancel.load(Ordering::Relaxed) {
                return Err(e);
            }
            // Interrupted: what the analysis found, untested.
            let interrupted = Some("measuring the control");
            let d = Diagnosis::untested(observed, session, analysis, oracle_runs, interrupted);
            return Ok(Debugging::Done(Box::new(d), aside));
        }
    };
    let discovery = causal::discover_or_partial(&analysis.dag, opts.strategy, &mut oracle, &config);
    let oracle_runs = oracle.finish();
    source.end_interventions();
    let discovery = match discovery {
        Ok(d) => d,
        // Interrupted: what the finished rounds established.
        Err((_, Some(partial))) if cancel.load(Ordering::Relaxed) => {
            let partial = timing_apart(&analysis, &session.runs, *partial);
            let d = Diagnosis {
                observed,
                session,
                analysis,
                discovery: Some(partial),
                tagt: None,
                oracle_runs,
                interrupted: Some("intervening"),
                control: Some(control),
                not_started: None,
            };
            return Ok(Debugging::Done(Box::new(d), aside));
        }
        Err((e, _)) => return Err(anyhow::Error::new(e).context("causal path discovery")),
    };
    ui.begin("replaying TAGT on the same graph for the comparison", None);
    let functions = source.functions();
    let installable = |g: &BTreeSet<PredId>| oracle::installable(&analysis.catalog, functions, g);
    let concluded = conclude(&analysis, discovery, &config, opts, &installable);
    ui.end();
    let (discovery, tagt) = concluded?;
    let discovery = timing_apart(&analysis, &session.runs, discovery);
    let d = Diagnosis {
        observed,
        session,
        analysis,
        discovery: Some(discovery),
        tagt,
        oracle_runs,
        interrupted: None,
        control: Some(control),
        not_started: None,
    };
    Ok(Debugging::Done(Box::new(d), aside))
}

/// What the control runs decided.
enum Calibration {
    /// Rounds are judged against this control.
    Judged(Control),
    /// The failure is rarer than the amplification threshold under the
    /// agent's control: amplify first.
    Rare(Control),
    /// So rare under the agent's control, with the runs already carrying
    /// noise, that no round could conclude within [`MAX_FIRST_ROUND_RUNS`]
    /// (none could be witnessed), or no control run failed: none is
    /// started.
    TooRare(NotStarted),
}

/// The most runs the first round may need, when no round can be
/// witnessed, before any round is started. A round nothing upstream can
/// witness is judged by how many runs in a row go without the failure,
/// against a lower bound on the control's failure rate: with 1 failing
/// control run in 200 that is 380,783 runs. The first rounds of the other
/// corpus sessions on this machine needed at most 295. Below the most any
/// round takes ([`causal::MAX_ROUND_RUNS`]).
pub const MAX_FIRST_ROUND_RUNS: u32 = 2_000;

/// Judges intervention rounds against the failure rate of control runs
/// (made as intervened runs are, nothing intervened on) when that is lower
/// than the observed one: "no failure in k runs" must be unlikely for a
/// round that changed nothing. Control runs go on until
/// [`oracle::CONTROL_FAILURES`] fail, at most 15 / (observed rate) runs
/// (20 to 200). With `amplify_below` (runs observed without noise, on a
/// source that can amplify), a control failure rate below it is
/// [`Calibration::Rare`]: as rare as a failure the observation would have
/// amplified (a thread pool whose workers start staggered under ptrace
/// overlaps less), on the first control runs or once the control has
/// gone on. Otherwise, with no control run failing, or the first
/// round needing more than [`MAX_FIRST_ROUND_RUNS`] when no round can be
/// witnessed (`witnessed`), [`Calibration::TooRare`] — once the control
/// has [`oracle::CONTROL_FAILURES`] failures or [`oracle::CONTROL_MAX_RUNS`]
/// runs; with fewer, it goes on first.
fn calibrate(
    oracle: &mut SourceOracle<'_>,
    config: &mut Config,
    amplify_below: Option<f64>,
    witnessed: bool,
) -> anyhow::Result<Calibration> {
    let observed_baseline = config.baseline;
    let observed = observed_baseline.rate();
    let max = ((15.0 / observed.max(1e-3)).ceil() as u32).clamp(20, 200);
    let mut control = oracle.control(Control::default(), max)?;
    let noun = oracle.source.noun();
    if amplify_below.is_some_and(|below| control.rate() < below) {
        return Ok(Calibration::Rare(control));
    }
    let needed = loop {
        // The control runs are the evidence for the failure rate when they
        // show it lower: the rate under the conditions rounds are made in.
        config.baseline = if control.rate() < observed {
            causal::Baseline { failing: control.failing, passing: control.runs - control.failing }
        } else {
            observed_baseline
        };
        let needed = if control.failing == 0 { None } else { Some(config.first_round_runs()?) };
        let too_rare = needed.is_none_or(|n| n > MAX_FIRST_ROUND_RUNS && !witnessed);
        // Sized by the observed rate, the control may have stopped after
        // a few dozen runs and 2 failures: judged on those, a failure 5%
        // of control runs show would need 2,787 runs where 100 control
        // runs make it 594.
        if !too_rare || control.runs >= CONTROL_MAX_RUNS || control.failing >= CONTROL_FAILURES {
            break needed;
        }
        control = oracle.control(control, CONTROL_MAX_RUNS)?;
        // Gone on, the control can show the failure as rare as one the
        // observation would have amplified, where its first runs did not
        // (a deadlock under ptrace: 2 of the first 39 control runs failed,
        // then none of the next 161): amplify first, as when the first
        // runs say so, rather than start no round.
        if amplify_below.is_some_and(|below| control.rate() < below) {
            return Ok(Calibration::Rare(control));
        }
    };
    if needed.is_none_or(|n| n > MAX_FIRST_ROUND_RUNS && !witnessed) {
        let not_started = NotStarted { control, needed, limit: MAX_FIRST_ROUND_RUNS };
        oracle.ui.say(&format!(
            "no intervention round is started, the failure being too rare under the agent's control (it showed in {:.0}% of observed {noun}s): {}",
            observed * 100.0,
            not_started.describe(noun)
        ));
        return Ok(Calibration::TooRare(not_started));
    }
    oracle.ui.say(&format!(
        "control: {} of {} {noun}s failed with nothing intervened on ({:.0}%); rounds are judged against {:.0}%: {} {noun}s without failure for the first conclusion",
        control.failing,
        control.runs,
        control.rate() * 100.0,
        config.baseline.rate() * 100.0,
        config.first_round_runs()?
    ));
    Ok(Calibration::Judged(control))
}

/// Predicates, statistics and the AC-DAG of the observed runs, keeping as
/// candidates only what the source can intervene on, with a line for the
/// user.
fn analyse(
    session: &Session,
    aside: &Aside,
    opts: &DebugOptions,
    reach: Reach,
    ui: &mut dyn Progress,
) -> anyhow::Result<Analysis> {
    let options =
        analysis::AnalysisOptions { extract: opts.extract.clone(), safe: opts.safe.clone(), reach };
    let (analysis, _) = analysis::analyze_beside(session, &options, &aside.runs)
        .context("analysing the observed runs")?;
    let fd = analysis
        .scores
        .iter()
        .filter(|s| s.fully_discriminative && s.id != analysis.catalog.failure())
        .count();
    ui.say(&format!(
        "{} predicates, {fd} separate every failing run from every passing one, {} can be intervened on",
        analysis.catalog.len() - 1,
        analysis.candidates.len()
    ));
    let contradicted: Vec<String> = analysis
        .excluded
        .iter()
        .filter_map(|&(p, why)| match why {
            analysis::Exclusion::Contradicted { failing, passing } => {
                Some(format!("P{} ({passing} passing, {failing} failing)", p.0))
            }
            _ => None,
        })
        .collect();
    if !contradicted.is_empty() {
        let unkept = match aside.dropped {
            0 => String::new(),
            n => format!(
                "; {n} more observed runs were not kept, past {} calls",
                observe::ASIDE_CALLS
            ),
        };
        ui.say(&format!(
            "not candidates: {} held in no analysed passing run, but in more passing runs than failing ones beyond chance among the {} observed apart from them ({} passing){unkept}",
            crate::util::human::summarize(&contradicted),
            analysis.aside.failing + analysis.aside.passing,
            analysis.aside.passing,
        ));
    }
    Ok(analysis)
}

/// The engine's settings for this session: the observed runs are the
/// evidence for the failure rate; runs per round follow from it and from the
/// session's error budget.
fn engine_config(
    analysis: &Analysis,
    opts: &DebugOptions,
    noun: &str,
    ui: &mut dyn Progress,
) -> anyhow::Result<Config> {
    let config = Config {
        baseline: causal::Baseline {
            failing: analysis.totals.failing,
            passing: analysis.totals.passing,
        },
        confidence: opts.confidence,
        seed: opts.seed,
        ..Config::default()
    };
    ui.say(&format!(
        "intervening with {}: the failure showed in {:.0}% of {}s; a round that nothing upstream of it can witness takes about {} {}s in a row without the failure to be sure at {}% for the whole session (fewer for most)",
        opts.strategy,
        analysis.failure_rate * 100.0,
        noun,
        config.first_round_runs()?,
        noun,
        opts.confidence * 100.0
    ));
    Ok(config)
}

/// The engine's answer, and what TAGT would have needed on the same AC-DAG
/// against the causal path found, with the same groups installable.
fn conclude(
    analysis: &Analysis,
    discovery: Discovery,
    config: &Config,
    opts: &DebugOptions,
    installable: causal::Installable<'_>,
) -> anyhow::Result<(Discovery, Option<TagtEstimate>)> {
    let tagt = if discovery.path.is_empty() {
        None
    } else {
        Some(causal::estimate_tagt(
            &analysis.dag,
            &discovery.path,
            config,
            opts.tagt_seeds,
            installable,
        )?)
    };
    Ok((discovery, tagt))
}

/// The discovery with the timing in front of its first mechanism told
/// apart from the root cause (`analysis::triggers`); `runs` are the runs
/// the analysis learned from.
fn timing_apart(analysis: &Analysis, runs: &[Run], mut discovery: Discovery) -> Discovery {
    discovery.lead_with(triggers::leading(analysis, runs, &discovery.path));
    discovery
}
