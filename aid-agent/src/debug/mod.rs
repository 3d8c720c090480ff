//! The one debug pipeline, over any run source (a program aid starts, or
//! the units of a running service): observe runs until there are enough
//! passing and failing ones (amplifying a rare failure with noise at
//! synchronisation points and traced calls where the source allows), learn the predicates and the AC-DAG, discover
//! the causal path with interventions, and estimate what TAGT would have
//! needed on the same session.

pub mod oracle;
pub mod program;
pub mod service;
pub mod source;

use std::{
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use self::{
    oracle::{OracleRun, SourceOracle},
    source::RunSource,
};
pub use crate::record::progress::{Progress, Quiet};
use crate::{
    analysis::{self, Analysis},
    causal::{self, Config, Discovery, Strategy, TagtEstimate},
    intervene::{
        Reach, SafeList,
        noise::{Level, NoiseSource, Schedule},
    },
    model::{Label, Run, Session},
    predicates::ExtractConfig,
    store::Writer,
};

/// How `debug` observes, which interventions it may use, and how sure it
/// must be.
#[derive(Clone, Debug)]
pub struct DebugOptions {
    pub strategy: Strategy,
    /// Probability that a round in which a cause is still present shows the
    /// failure at least once (chooses runs per round).
    pub confidence: f64,
    /// Observation stops once this many failing and passing runs exist...
    pub min_failing: u32,
    pub min_passing: u32,
    /// ...or after this many runs.
    pub max_runs: u32,
    /// Below this failure rate (after `amplify_after` runs), noise is
    /// injected to make the failure more frequent.
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
}

impl Default for DebugOptions {
    fn default() -> Self {
        DebugOptions {
            strategy: Strategy::Aid,
            confidence: 0.99,
            min_failing: 10,
            min_passing: 10,
            max_runs: 200,
            amplify_below: 0.05,
            amplify_after: 40,
            schedule: Schedule::default(),
            hold_timeout: Duration::from_secs(1),
            safe: SafeList::default(),
            extract: ExtractConfig::default(),
            seed: 1,
            tagt_seeds: 20,
        }
    }
}

/// How the observation phase went.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Observed {
    pub runs: u32,
    pub failing: u32,
    pub passing: u32,
    /// Runs dropped because events were lost.
    pub incomplete: u32,
    /// The noise level the analysed runs were made with, if failures had
    /// to be amplified.
    pub amplified: Option<(usize, u64)>,
    /// Runs the analysis used (those of the final noise level).
    pub analysed: u32,
}

/// What `debug` found: how observation went, the analysis, and the causal
/// path with the runs that confirmed it.
pub struct Diagnosis {
    pub observed: Observed,
    pub analysis: Analysis,
    pub discovery: Option<Discovery>,
    pub tagt: Option<TagtEstimate>,
    pub oracle_runs: Vec<OracleRun>,
}

/// A finished `debug`: the diagnosis, and the session directory holding
/// every run it made.
pub struct Debugged {
    pub diagnosis: Diagnosis,
    pub out: PathBuf,
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
    let (observed, basis, noise) = observe(source, writer, opts, cancel, ui)?;
    let session = Session { functions: source.functions().to_vec(), runs: basis };
    let analysis = analyse(&session, opts, source.reach(), ui)?;
    if analysis.candidates.is_empty() || cancel.load(Ordering::Relaxed) {
        return Ok(Diagnosis {
            observed,
            analysis,
            discovery: None,
            tagt: None,
            oracle_runs: Vec::new(),
        });
    }
    let config = engine_config(&analysis, opts, ui)?;
    source.begin_interventions()?;
    ui.begin("intervening", None);
    let mut oracle = SourceOracle {
        source: &mut *source,
        catalog: &analysis.catalog,
        writer,
        hold_timeout: opts.hold_timeout,
        noise,
        cancel,
        log: Vec::new(),
        ui: &mut *ui,
    };
    let discovery = causal::discover(&analysis.dag, opts.strategy, &mut oracle, &config);
    let oracle_runs = std::mem::take(&mut oracle.log);
    drop(oracle);
    ui.end();
    source.end_interventions();
    let (discovery, tagt) = conclude(&analysis, discovery, &config, opts)?;
    Ok(Diagnosis { observed, analysis, discovery: Some(discovery), tagt, oracle_runs })
}

/// Predicates, statistics and the AC-DAG of the observed runs, keeping as
/// candidates only what the source can intervene on, with a line for the
/// user.
fn analyse(
    session: &Session,
    opts: &DebugOptions,
    reach: Reach,
    ui: &mut dyn Progress,
) -> anyhow::Result<Analysis> {
    let options =
        analysis::AnalysisOptions { extract: opts.extract.clone(), safe: opts.safe.clone(), reach };
    let analysis = analysis::analyze(session, &options).context("analysing the observed runs")?;
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
    Ok(analysis)
}

/// The engine's settings for this session: k runs per round from the
/// observed failure rate.
fn engine_config(
    analysis: &Analysis,
    opts: &DebugOptions,
    ui: &mut dyn Progress,
) -> anyhow::Result<Config> {
    let config = Config {
        failure_rate: analysis.failure_rate,
        confidence: opts.confidence,
        seed: opts.seed,
        ..Config::default()
    };
    ui.say(&format!(
        "intervening with {} (up to {} runs per round: failure rate {:.0}%, confidence {})",
        opts.strategy,
        config.runs_per_round()?,
        analysis.failure_rate * 100.0,
        opts.confidence
    ));
    Ok(config)
}

/// The engine's answer, and what TAGT would have needed on the same AC-DAG
/// against the causal path found.
fn conclude(
    analysis: &Analysis,
    discovery: Result<Discovery, causal::CausalError>,
    config: &Config,
    opts: &DebugOptions,
) -> anyhow::Result<(Discovery, Option<TagtEstimate>)> {
    let discovery = discovery.context("causal path discovery")?;
    let tagt = if discovery.path.is_empty() {
        None
    } else {
        Some(causal::estimate_tagt(&analysis.dag, &discovery.path, config, opts.tagt_seeds)?)
    };
    Ok((discovery, tagt))
}

/// Takes runs from the source until enough failing and passing ones exist.
/// Returns the runs to analyse and, when the failure had to be amplified,
/// the noise to keep injecting during interventions (so the failure rate
/// they are judged against stays the same).
#[allow(clippy::type_complexity, reason = "a private helper returning three results at once")]
fn observe(
    source: &mut dyn RunSource,
    writer: &mut Writer,
    opts: &DebugOptions,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(Observed, Vec<Run>, Option<NoiseSource>)> {
    let noun = source.noun();
    let mut observed = Observed::default();
    let mut basis: Vec<Run> = Vec::new();
    let mut plain: Vec<Run> = Vec::new();
    let mut noise: Option<NoiseSource> = None;
    let counts = |runs: &[Run]| {
        let failing = runs.iter().filter(|r| r.label == Label::Fail).count() as u32;
        (failing, runs.len() as u32 - failing)
    };
    ui.begin(&format!("observing {noun}s"), Some(u64::from(opts.max_runs)));
    while observed.runs < opts.max_runs && !cancel.load(Ordering::Relaxed) {
        let (failing, passing) = counts(&basis);
        if failing >= opts.min_failing && passing >= opts.min_passing {
            break;
        }
        // Amplify a rare failure, or raise the noise if it is still rare.
        if source.can_amplify()
            && basis.len() as u32 >= opts.amplify_after
            && f64::from(failing) < opts.amplify_below * basis.len() as f64
        {
            let level = match &noise {
                None => Some(Level::START),
                Some(n) => n.level.stronger(),
            };
            let Some(level) = level else { break };
            ui.say(&format!(
                "failures are rare ({failing} of {} {noun}s): injecting noise at synchronisation points and traced calls ({}; {} per {noun}, holds up to {} µs) to make them more frequent; the {noun}s record it",
                basis.len(),
                opts.schedule.describe(),
                level.sites,
                level.max_delay_us
            ));
            match noise.as_mut() {
                Some(n) => n.raise(level),
                None => {
                    let seen = if plain.is_empty() { &basis } else { &plain };
                    noise = Some(NoiseSource::new(level, opts.schedule, seen, opts.seed));
                }
            }
            basis.clear();
        }
        let delays = noise.as_mut().map(NoiseSource::draw).unwrap_or_default();
        let Some(rec) = source.observe(&delays, cancel)? else { break };
        if let Some(n) = noise.as_mut() {
            n.learn(&rec.sync_steps);
        }
        writer.append(&rec, source.functions())?;
        observed.runs += 1;
        if !rec.run.complete {
            observed.incomplete += 1;
            let (f, p) = counts(&basis);
            ui.step(&format!("{f} failing, {p} passing"));
            continue;
        }
        match rec.run.label {
            Label::Fail => observed.failing += 1,
            Label::Pass => observed.passing += 1,
        }
        if noise.is_none() {
            plain.push(rec.run.clone());
        }
        basis.push(rec.run);
        let (f, p) = counts(&basis);
        ui.step(&format!("{f} failing, {p} passing"));
    }
    ui.end();
    if cancel.load(Ordering::Relaxed) {
        bail!(
            "interrupted by the user during observation; the {} {noun}(s) so far are saved",
            observed.runs
        );
    }
    if observed.incomplete > 0 {
        ui.say(&format!(
            "warning: {} {noun}(s) lost events (ring buffer full) and are left out; a larger --ring-size helps",
            observed.incomplete
        ));
    }
    let (failing, passing) = counts(&basis);
    if failing == 0 {
        bail!("no {noun} failed in {} {noun}s{}", observed.runs, source.hint_no_failure());
    }
    if passing == 0 {
        bail!(
            "every one of {} {noun}s failed: aid needs passing {noun}s to compare with{}",
            observed.runs,
            source.hint_all_failed()
        );
    }
    observed.amplified = noise.as_ref().map(|n| (n.level.sites, n.level.max_delay_us));
    observed.analysed = basis.len() as u32;
    ui.say(&format!(
        "observed {} {noun}s: {failing} failing and {passing} passing {noun}s analysed",
        observed.runs
    ));
    Ok((observed, basis, noise))
}
