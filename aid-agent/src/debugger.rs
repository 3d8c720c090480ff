//! The `debug` pipeline on a program aid starts itself: observe runs until
//! there are enough passing and failing ones (amplifying a rare failure
//! with random delays), learn the predicates and the AC-DAG, discover the
//! causal path with live interventions, and estimate what TAGT would have
//! needed on the same session.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

use crate::{
    analysis::{self, Analysis},
    causal::{self, Config, Discovery, Strategy, TagtEstimate},
    live::{LiveOracle, NoiseSource, OracleRun},
    model::{Label, Run, Session},
    noise::Level,
    predicates::ExtractConfig,
    runner::Target,
    session::Writer,
    stats::SafeList,
    trace::{RunPolicy, Tracer},
};

#[derive(Clone, Debug)]
pub struct Options {
    pub strategy: Strategy,
    /// Probability that the whole session reports a right path: bounds the
    /// risk summed over every round that believed the failure stopped.
    pub confidence: f64,
    /// Observation stops once this many failing and passing runs exist...
    pub min_failing: u32,
    pub min_passing: u32,
    /// ...or after this many runs.
    pub max_runs: u32,
    /// Below this failure rate (after `amplify_after` runs), random delays
    /// are injected to make the failure more frequent.
    pub amplify_below: f64,
    pub amplify_after: u32,
    pub hold_timeout: Duration,
    pub safe: SafeList,
    pub extract: ExtractConfig,
    pub seed: u64,
    /// TAGT replays for the comparison.
    pub tagt_seeds: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            strategy: Strategy::Aid,
            confidence: 0.99,
            min_failing: 10,
            min_passing: 10,
            max_runs: 200,
            amplify_below: 0.05,
            amplify_after: 40,
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

pub struct Outcome {
    pub observed: Observed,
    pub analysis: Analysis,
    pub discovery: Option<Discovery>,
    pub tagt: Option<TagtEstimate>,
    pub oracle_runs: Vec<OracleRun>,
}

/// Messages for the user while the pipeline runs.
pub trait Progress {
    fn say(&mut self, line: &str);
    fn bar(&mut self, len: u64, what: &str) -> indicatif::ProgressBar;
}

pub fn debug(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    writer: &mut Writer,
    opts: &Options,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Outcome> {
    let (observed, basis, noise) = observe(tracer, target, policy, writer, opts, cancel, ui)?;
    let session = Session { functions: tracer.functions.clone(), runs: basis };
    let analysis = analyse(&session, opts, false, ui)?;
    if analysis.candidates.is_empty() || cancel.load(Ordering::Relaxed) {
        return Ok(Outcome {
            observed,
            analysis,
            discovery: None,
            tagt: None,
            oracle_runs: Vec::new(),
        });
    }
    let config = engine_config(&analysis, opts, ui)?;
    let progress = ui.bar(0, "intervening");
    let mut oracle = LiveOracle {
        tracer,
        target,
        policy,
        catalog: &analysis.catalog,
        writer,
        hold_timeout: opts.hold_timeout,
        noise,
        cancel,
        next_id: observed.runs + 1,
        log: Vec::new(),
        progress: progress.clone(),
    };
    let discovery = causal::discover(&analysis.dag, opts.strategy, &mut oracle, &config);
    progress.finish_and_clear();
    let oracle_runs = std::mem::take(&mut oracle.log);
    let (discovery, tagt) = conclude(&analysis, discovery, &config, opts)?;
    Ok(Outcome { observed, analysis, discovery: Some(discovery), tagt, oracle_runs })
}

/// Predicates, statistics and the AC-DAG of the observed runs, with a line
/// for the user.
pub(crate) fn analyse(
    session: &Session,
    opts: &Options,
    live_unit: bool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Analysis> {
    let options =
        analysis::Options { extract: opts.extract.clone(), safe: opts.safe.clone(), live_unit };
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

/// The engine's settings for this session: the observed runs are the
/// evidence for the failure rate; runs per round follow from it and from the
/// session's error budget.
pub(crate) fn engine_config(
    analysis: &Analysis,
    opts: &Options,
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
        "intervening with {} (failure rate {:.0}%; confidence {} for the whole session: about {} runs for a round that nothing upstream of it can witness, fewer for most)",
        opts.strategy,
        analysis.failure_rate * 100.0,
        opts.confidence,
        config.first_round_runs()?,
    ));
    Ok(config)
}

/// The engine's answer, and what TAGT would have needed on the same AC-DAG
/// against the causal path found.
pub(crate) fn conclude(
    analysis: &Analysis,
    discovery: Result<Discovery, causal::CausalError>,
    config: &Config,
    opts: &Options,
) -> anyhow::Result<(Discovery, Option<TagtEstimate>)> {
    let discovery = discovery.context("causal path discovery")?;
    let tagt = if discovery.path.is_empty() {
        None
    } else {
        Some(causal::estimate_tagt(&analysis.dag, &discovery.path, config, opts.tagt_seeds)?)
    };
    Ok((discovery, tagt))
}

/// Runs the target until enough failing and passing runs exist. Returns
/// the runs to analyse and, when the failure had to be amplified, the noise
/// to keep injecting during interventions (so the failure rate they are
/// judged against stays the same).
#[allow(clippy::type_complexity, reason = "a private helper returning three results at once")]
fn observe(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    writer: &mut Writer,
    opts: &Options,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(Observed, Vec<Run>, Option<NoiseSource>)> {
    let mut observed = Observed::default();
    let mut basis: Vec<Run> = Vec::new();
    let mut plain: Vec<Run> = Vec::new();
    let mut noise: Option<NoiseSource> = None;
    let bar = ui.bar(u64::from(opts.max_runs), "observing");
    let counts = |runs: &[Run]| {
        let failing = runs.iter().filter(|r| r.label == Label::Fail).count() as u32;
        (failing, runs.len() as u32 - failing)
    };
    while observed.runs < opts.max_runs && !cancel.load(Ordering::Relaxed) {
        let (failing, passing) = counts(&basis);
        if failing >= opts.min_failing && passing >= opts.min_passing {
            break;
        }
        // Amplify a rare failure, or raise the noise if it is still rare.
        if basis.len() as u32 >= opts.amplify_after
            && f64::from(failing) < opts.amplify_below * basis.len() as f64
        {
            let level = match &noise {
                None => Some(Level::START),
                Some(n) => n.level.stronger(),
            };
            let Some(level) = level else { break };
            ui.say(&format!(
                "failures are rare ({failing} of {} runs): injecting random delays at traced calls ({} per run, up to {} µs) to make them more frequent; the runs record them",
                basis.len(),
                level.sites,
                level.max_delay_us
            ));
            let seen = if plain.is_empty() { basis.clone() } else { plain.clone() };
            noise = Some(NoiseSource::new(level, seen, opts.seed));
            basis.clear();
        }
        let id = observed.runs + 1;
        let rec = match noise.as_mut() {
            None => tracer.observe(target, id, policy, cancel)?,
            Some(n) => {
                let plan = crate::intervene::Plan::default().with_noise(&n.draw());
                tracer.intervene(target, id, policy, &plan, cancel)?
            }
        };
        writer.append(&rec, &tracer.functions)?;
        observed.runs += 1;
        bar.inc(1);
        if !rec.run.complete || cancel.load(Ordering::Relaxed) {
            observed.incomplete += 1;
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
        bar.set_message(format!("{f} failing, {p} passing"));
    }
    bar.finish_and_clear();
    if cancel.load(Ordering::Relaxed) {
        bail!(
            "interrupted by the user during observation; the {} run(s) so far are saved",
            observed.runs
        );
    }
    if observed.incomplete > 0 {
        ui.say(&format!(
            "warning: {} run(s) lost events (ring buffer full) and are left out; a larger --ring-size helps",
            observed.incomplete
        ));
    }
    let (failing, passing) = counts(&basis);
    if failing == 0 {
        bail!(
            "no run failed in {} runs (rules: {}): aid needs to see the failure; try more --runs or check --fail-on",
            observed.runs,
            policy.rules.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join(", ")
        );
    }
    if passing == 0 {
        bail!(
            "every one of {} runs failed: aid needs passing runs to compare with; check --fail-on and --timeout",
            observed.runs
        );
    }
    observed.amplified = noise.as_ref().map(|n| (n.level.sites, n.level.max_delay_us));
    observed.analysed = basis.len() as u32;
    ui.say(&format!(
        "observed {} runs: {failing} failing and {passing} passing runs analysed",
        observed.runs
    ));
    Ok((observed, basis, noise))
}
