//! Observing: taking runs from the source until enough failing and
//! passing ones exist (amplifying a rare failure on the way, `amplify.rs`),
//! more of them when a predicate is undecided, what observing ends with,
//! and the line that says when aid's probes change the failure's rate.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::bail;

use super::{DebugOptions, Observed, Progress, amplify, source::RunSource};
use crate::{
    analysis::Analysis,
    intervene::noise::NoiseSource,
    model::{Label, Noise, RecordedRun, Run},
    record::Interrupted,
    store::Writer,
};

/// What `debug` says before it observes more runs for the first
/// undecided predicate.
pub(super) fn undecided_line(analysis: &Analysis, opts: &DebugOptions, noun: &str) -> String {
    let id = analysis.undecided[0];
    let c = analysis.scores[id.0 as usize].counts;
    let why = if c.passing_true == 0 {
        format!(
            "P{} held in {} of {} failing {noun}s and in no passing one: too few {noun}s to tell whether it covers most failing {noun}s",
            id.0, c.failing_true, analysis.totals.failing,
        )
    } else {
        format!(
            "P{} held in every failing {noun} and in {} of {} passing ones: too few {noun}s to tell whether failing {noun}s are more common where it holds",
            id.0, c.passing_true, analysis.totals.passing,
        )
    };
    format!("{why}; observing until {} failing {noun}s", UNDECIDED_FAILING * opts.min_failing)
}

/// When a predicate is [`Analysis::undecided`], `debug` observes until
/// this many times `--min-failing` failing runs (at most `--max-runs` runs
/// more), once. More runs only decide whether it is tested: what it is
/// tested by, the interventions, is the same.
pub const UNDECIDED_FAILING: u32 = 3;

/// Observes more runs the way the analysed ones were made (the same
/// noise), for [`UNDECIDED_FAILING`]. Returns whether any was added.
#[allow(clippy::too_many_arguments, reason = "the observation's state, passed through")]
pub(super) fn observe_more(
    source: &mut dyn RunSource,
    writer: &mut Writer,
    opts: &DebugOptions,
    observed: &mut Observed,
    runs: &mut Vec<Run>,
    mut noise: Option<&mut NoiseSource>,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<bool> {
    let noun = source.noun();
    let want = UNDECIDED_FAILING * opts.min_failing;
    let failing = |runs: &[Run]| runs.iter().filter(|r| r.label == Label::Fail).count() as u32;
    let before = runs.len();
    ui.begin(&format!("observing more {noun}s"), Some(u64::from(opts.max_runs)));
    let mut made = 0;
    while made < opts.max_runs {
        if failing(runs) >= want || cancel.load(Ordering::Relaxed) {
            break;
        }
        // Made as the analysed runs were: `--jobs` at a time.
        let n = source.jobs().min(opts.max_runs - made).max(1);
        let mut draw = || noise.as_deref_mut().map(NoiseSource::draw).unwrap_or_default();
        let recs: Vec<RecordedRun> = if n == 1 {
            source.observe(&draw(), cancel)?.into_iter().collect()
        } else {
            let plans: Vec<Vec<Noise>> = (0..n).map(|_| draw()).collect();
            source.observe_batch(&plans, cancel)?
        };
        if recs.is_empty() {
            break;
        }
        for rec in recs {
            made += 1;
            writer.append(&rec, source.functions())?;
            if observed.count(&rec.run) {
                runs.push(rec.run);
            }
            let f = failing(runs);
            ui.step(&format!(
                "{f} failing, {} passing (until {want} failing)",
                runs.len() as u32 - f
            ));
        }
    }
    ui.end();
    observed.analysed = runs.len() as u32;
    let f = failing(runs);
    ui.say(&format!(
        "observed {} {noun}s: {f} failing and {} passing {noun}s analysed",
        observed.runs,
        runs.len() as u32 - f
    ));
    Ok(runs.len() > before)
}

/// What observing ends with: a warning about runs that lost events, and
/// an error when the runs to analyse cannot separate failing from passing
/// (no failure at all, none with the last noise, or no passing run).
/// `basis` is how many runs are to be analysed, `failing` and `passing`
/// how many of them failed and passed.
fn enough(
    observed: &Observed,
    failing: u32,
    passing: u32,
    basis: usize,
    Ends { early, hung }: Ends<'_>,
    source: &dyn RunSource,
    ui: &mut dyn Progress,
) -> anyhow::Result<()> {
    let noun = source.noun();
    if observed.incomplete > 0 {
        ui.say(&format!(
            "warning: {} {noun}(s) lost events (ring buffer full) and are left out; a larger --ring-size helps",
            observed.incomplete
        ));
    }
    // Every count aid prints is true: runs made without it count too.
    let census = source.untraced();
    let untraced = match census {
        Some((f, n)) if f > 0 => {
            format!(
                " with aid's probes ({f} of the {n} runs made without them before the session did)"
            )
        }
        _ => String::new(),
    };
    if observed.failing == 0 {
        bail!(
            "no {noun} failed in {} {noun}s{untraced}{}",
            observed.runs,
            source.hint_no_failure()
        );
    }
    if failing == 0 {
        bail!(
            "{} of {} {noun}s failed{untraced}, but none of the {basis} {noun}s made with the last noise tried, so there is nothing to learn from: the failure is too rare for aid to provoke{}",
            observed.failing,
            observed.runs,
            source.hint_no_failure()
        );
    }
    if passing == 0 {
        let rare = early.unwrap_or_default();
        let all_untraced = match census {
            Some((f, n)) if f == n && n > 0 => {
                format!(" (and every one of the {n} made without aid's probes)")
            }
            _ => String::new(),
        };
        // A hang in every run is not intermittent: what it waited for is
        // the lead, not the failure condition or the timeout.
        let hint = hung.map_or_else(
            || source.hint_all_failed().to_owned(),
            |graph| format!("; every one of them hung, the first this way: {graph} (each hung {noun}'s record keeps its wait-for graph)"),
        );
        bail!(
            "every one of {basis} {noun}s failed{all_untraced}: aid needs passing {noun}s to compare with{rare}{hint}"
        );
    }
    Ok(())
}

/// How observing ended, for [`enough`]'s words: why it ended early with
/// every run failing, and, when every failing run hung, the first one's
/// wait-for graph in words.
struct Ends<'a> {
    early: Option<&'a str>,
    hung: Option<&'a str>,
}

/// Observing stops early when every run so far failed and passing runs,
/// were they as common as this one-sided confidence level still allows
/// (`pass_rate_bound`), would not come to even one in the runs
/// `--max-runs` leaves ([`all_failed_early`]): a program that fails on
/// every schedule (a deadlock in each run, an assertion no order passes)
/// ends in 150 runs (`--max-runs` 200), not in the 600 the search for a
/// rare failure may take. One passing run is what observing needs to go
/// on (`enough`), so that is what the stop is measured against, not
/// `--min-runs`: a program whose runs pass at 4 % (inventory-sixty traced
/// on an idle machine, 15 of 400 runs) stops this way in 0.2 % of
/// sessions (0.96^150), at 2 % in 5 % (0.98^150), at 6 % in about 1 in
/// 10 000 (0.94^150 = 9e-5). Measured against `--min-runs` 10 instead, it
/// stopped at 45 runs, and at 4 % in 16 % of sessions.
pub const ALL_FAILED_CONFIDENCE: f64 = 0.95;

/// The highest rate of passing runs that `n` failing runs in `n` leave
/// plausible at [`ALL_FAILED_CONFIDENCE`] (one-sided, exact: the rate at
/// which `n` failures in a row have probability 5 %).
pub fn pass_rate_bound(n: u32) -> f64 {
    1.0 - (1.0 - ALL_FAILED_CONFIDENCE).powf(1.0 / f64::from(n.max(1)))
}

/// When all of the `failed` runs made so far failed: `Some((k, left))`,
/// passing runs being rarer than 1 in `k` (95 %) and `left` runs being
/// all `max_runs` leaves, when at that bound they would not give even one
/// passing run; None while they still might.
pub fn all_failed_early(failed: u32, max_runs: u32) -> Option<(u32, u32)> {
    let left = max_runs.saturating_sub(failed);
    let bound = pass_rate_bound(failed);
    (failed > 0 && f64::from(left) * bound < 1.0).then(|| ((1.0 / bound).floor() as u32, left))
}

/// A difference between the failure rates with and without aid's probes
/// is said when Fisher's exact test puts it beyond chance at this level
/// (3 failures in 40 untraced runs against none in 40 traced ones is
/// chance, p = 0.24; none in 40 untraced against 14 in 24 traced is not,
/// p = 4e-8).
pub const TRACER_EFFECT_P: f64 = 0.01;

/// "the failure is rarer under aid's probes: ..." when the untraced runs
/// before the session (failed, made) and the first block of traced runs
/// without noise differ beyond chance ([`TRACER_EFFECT_P`]).
pub fn tracer_effect(untraced: (u32, u32), traced: (u32, u32), noun: &str) -> Option<String> {
    let ((uf, un), (tf, tn)) = (untraced, traced);
    if uf > un || tf > tn {
        return None;
    }
    let p = crate::stats::fisher_two_sided(uf, un - uf, tf, tn - tf);
    if p >= TRACER_EFFECT_P {
        return None;
    }
    let (how, what) = if rarer_traced(untraced, traced) {
        ("rarer", "the probes hide part of it")
    } else {
        ("more frequent", "the probes provoke part of it")
    };
    Some(format!(
        "the failure is {how} under aid's probes: {uf} of {un} {noun}s made without them before the session failed, {tf} of the first {tn} traced {noun}s without noise (Fisher's exact test, p = {p:.1e}): {what}, and what the traced {noun}s show is about the failure as it is under them"
    ))
}

/// Whether the traced runs (failed, made) failed less often than the
/// untraced ones.
fn rarer_traced(untraced: (u32, u32), traced: (u32, u32)) -> bool {
    u64::from(traced.0) * u64::from(untraced.1) < u64::from(untraced.0) * u64::from(traced.1)
}

/// Observing ended because aid's probes hide the failure (the traced runs
/// failed less often than the untraced ones, beyond chance) and the
/// source may trace fewer functions ([`RunSource::may_trace_fewer`]): the
/// campaign debugs the program again without the functions called most
/// often. Its text is [`tracer_effect`]'s.
#[derive(Debug)]
pub struct ProbesHideIt {
    pub line: String,
    /// The untraced runs and the traced ones compared: (failed, made).
    pub untraced: (u32, u32),
    pub traced: (u32, u32),
}

impl std::fmt::Display for ProbesHideIt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for ProbesHideIt {}

/// Says how the failure rate under the probes differs from the untraced
/// one, when it does beyond chance, and keeps it in `observed`; an error
/// when the probes hide the failure — it is rarer under them beyond
/// chance, and rare (below `rare_below`, `--amplify-below`: what the
/// session would have to provoke with noise) — and the source may trace
/// fewer functions. A failure the probes make less frequent but not rare
/// is debugged as it is under them: lazy01_bad (SCTBench) failed in 99 of
/// 100 untraced runs and 26 of 36 traced ones, and the session without
/// its two thread functions (one call a run each) could no longer name
/// them.
fn compare_untraced(
    source: &dyn RunSource,
    traced: (u32, u32),
    rare_below: f64,
    observed: &mut Observed,
    ui: &mut dyn Progress,
) -> anyhow::Result<()> {
    let Some(untraced) = source.untraced() else { return Ok(()) };
    if source.jobs() > 1 {
        // The untraced runs were made one at a time, the traced ones
        // `--jobs` at a time: the load differs, and so may the rate.
        log::info!("the failure rates with and without the probes are not compared under --jobs");
        return Ok(());
    }
    observed.tracer = tracer_effect(untraced, traced, source.noun());
    let rarer = rarer_traced(untraced, traced);
    observed.provoked = (observed.tracer.is_some() && !rarer).then_some((untraced, traced));
    let Some(line) = &observed.tracer else { return Ok(()) };
    ui.say(line);
    let rare = f64::from(traced.0) < rare_below * f64::from(traced.1);
    if rarer && rare && source.may_trace_fewer() {
        return Err(ProbesHideIt { line: line.clone(), untraced, traced }.into());
    }
    Ok(())
}

/// The runs without noise before the first with noise.
struct Plain {
    /// (failed, made); None once the amplifier has judged its first block
    /// of them, or when this is observing again (the first runs were
    /// counted then).
    counts: Option<(u32, u32)>,
    noisy: bool,
}

impl Plain {
    fn add(&mut self, run: &Run) {
        self.noisy |= !run.noise.is_empty();
        if let Some((f, n)) = self.counts.as_mut().filter(|_| !self.noisy) {
            *f += u32::from(run.failed());
            *n += 1;
        }
    }
}

/// (failing, passing) of `runs`.
fn counts(runs: &[Run]) -> (u32, u32) {
    let failing = runs.iter().filter(|r| r.label == Label::Fail).count() as u32;
    (failing, runs.len() as u32 - failing)
}

/// What is said once per observation: the first hung run, the first run
/// with notes.
#[derive(Default)]
struct SaidOnce {
    /// The first hung run's wait-for graph in words, and how many runs
    /// hung.
    first_hang: Option<String>,
    hangs: u32,
    noted: bool,
}

/// The observed runs that are not analysed (made without noise before
/// the analysed ones were made with it, or with noise the amplifier tried
/// and left): the analysis checks its candidates against them
/// (`analysis/aside.rs`). Kept up to [`ASIDE_CALLS`] calls in all.
#[derive(Clone, Debug, Default)]
pub struct Aside {
    pub runs: Vec<Run>,
    calls: usize,
    /// Complete runs not kept, past the bound.
    pub dropped: u32,
}

/// The most calls the runs kept [`Aside`] may hold together (a call is
/// about 130 bytes in memory, so about 130 MB): the default set of
/// functions is chosen to cost about a millisecond a run, a few hundred
/// calls, and a session observes at most `--max-runs` runs and the
/// amplifier's search. The observed runs of the corpus's sessions held
/// at most 22,001 calls (wronglock_bad), of the larger SCTBench programs
/// 831,343 (radbench bug2, 440 runs). Runs past it are not kept; the
/// analysis checks its candidates against those that are.
pub const ASIDE_CALLS: usize = 1_000_000;

impl Aside {
    pub fn push(&mut self, run: Run) {
        if !run.complete {
            return;
        }
        if self.calls + run.calls.len() > ASIDE_CALLS {
            self.dropped += 1;
            return;
        }
        self.calls += run.calls.len();
        self.runs.push(run);
    }

    pub fn extend(&mut self, runs: impl IntoIterator<Item = Run>) {
        for run in runs {
            self.push(run);
        }
    }
}

/// What observing ends with: how it went, the runs to analyse, the runs
/// set aside, and the noise to keep injecting (when the failure had to be
/// amplified).
pub(super) struct Observation {
    pub observed: Observed,
    pub basis: Vec<Run>,
    pub aside: Aside,
    pub noise: Option<NoiseSource>,
}

/// The observation's state, as one run made is taken in.
struct Taking<'a> {
    observed: &'a mut Observed,
    basis: &'a mut Vec<Run>,
    aside: &'a mut Aside,
    amp: &'a mut amplify::Amplifier,
    plain: &'a mut Plain,
    said: &'a mut SaidOnce,
    /// Why observing ended before its limit with every run failing.
    early: &'a mut Option<String>,
}

impl Taking<'_> {
    /// Stores the run, counts it, lets the ladder learn from it; true when
    /// observing ends with it (every run so far failed, and passing runs
    /// could no longer come to enough).
    fn take(
        &mut self,
        rec: RecordedRun,
        source: &mut dyn RunSource,
        writer: &mut Writer,
        opts: &DebugOptions,
        wanted: &str,
        ui: &mut dyn Progress,
    ) -> anyhow::Result<bool> {
        let noun = source.noun();
        writer.append(&rec, source.functions())?;
        if let Some(graph) = rec.hang.as_ref() {
            self.said.hangs += 1;
            if self.said.first_hang.is_none() {
                let words = graph.describe();
                ui.say(&format!(
                    "{noun} {} hung (every thread waited for another, with no progress, for {}) and was ended: {words} (said once; each hung {noun}'s record keeps its wait-for graph)",
                    rec.run.id,
                    crate::util::human::duration(graph.waited_ns),
                ));
                self.said.first_hang = Some(words);
            }
        }
        if !rec.notes.is_empty() && !self.said.noted {
            self.said.noted = true;
            for note in &rec.notes {
                ui.say(&format!(
                    "{noun} {}: {note} (said once; each run's record keeps it)",
                    rec.run.id
                ));
            }
        }
        if !self.observed.count(&rec.run) {
            let (f, p) = counts(self.basis);
            ui.step(&format!("{f} failing, {p} passing{wanted}"));
            return Ok(false);
        }
        self.plain.add(&rec.run);
        let verdict = self.amp.learn(&rec.run, &rec.sync_steps, source.functions());
        // Said once: on the amplifier's first block of runs without noise,
        // or on those before observing ended, when it ended before.
        if let Some(traced) = verdict.natural.inspect(|_| self.plain.counts = None) {
            compare_untraced(source, traced, opts.amplify_below, self.observed, ui)?;
        }
        for line in &verdict.say {
            ui.say(line);
        }
        if verdict.statements {
            source.noise_at_statements();
        }
        if verdict.restart {
            self.aside.extend(self.basis.drain(..));
            self.aside.push(rec.run);
        } else if verdict.basis {
            self.basis.push(rec.run);
        } else {
            self.aside.push(rec.run);
        }
        let (f, p) = counts(self.basis);
        ui.step(&format!("{f} failing, {p} passing{wanted}"));
        if opts.runs.is_none()
            && self.observed.failing == self.observed.runs
            && let Some((k, left)) = all_failed_early(self.observed.failing, opts.max_runs)
        {
            *self.early = Some(format!(
                ", and if any pass they are rarer than 1 in {k} (95 % bound), too rare to give one in the {left} {noun}s --max-runs leaves"
            ));
            return Ok(true);
        }
        Ok(false)
    }
}

/// Takes runs from the source until enough failing and passing ones exist.
/// Returns the runs to analyse, those set aside (`aside`: the runs of an
/// earlier observation, then every run not analysed) and, when the
/// failure had to be amplified, the noise to keep injecting during
/// interventions (so the failure rate they are judged against stays the
/// same). How the noise is chosen: `amplify.rs`.
pub(super) fn observe(
    source: &mut dyn RunSource,
    writer: &mut Writer,
    opts: &DebugOptions,
    amplified_from: Option<Vec<Run>>,
    mut aside: Aside,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Observation> {
    let noun = source.noun();
    let mut observed = Observed::default();
    let mut basis: Vec<Run> = Vec::new();
    let first = amplified_from.is_none();
    let (mut amp, said) = amplify::Amplifier::new(
        if source.can_amplify() { opts.amplify_below } else { 0.0 },
        opts.amplify_after,
        opts.schedule,
        opts.seed,
        noun,
        amplified_from,
        source.functions(),
    );
    if let Some(line) = said {
        ui.say(&line);
    }
    if opts.statements_from_start && amp.at_statements_from_start(source.functions()) {
        source.noise_at_statements();
    }
    let mut said_once = SaidOnce::default();
    let mut plain = Plain { counts: first.then_some((0, 0)), noisy: false };
    // Why observing ended before its limit with every run failing.
    let mut early: Option<String> = None;
    // The search for a noise that provokes the failure has runs of its
    // own beyond `max_runs`; `--runs N` is exactly N, whatever they are.
    // It grows when the search draws on more runs (`Amplifier::more_runs`).
    let base = opts.max_runs + if source.can_amplify() { amplify::SEARCH_RUNS } else { 0 };
    let mut limit = opts.runs.unwrap_or(base);
    observed.noun = noun.to_owned();
    observed.jobs = source.jobs();
    // The bar's length is the most runs it may take.
    ui.begin(&format!("observing {noun}s"), Some(u64::from(limit)));
    let wanted = match opts.runs {
        Some(_) => String::new(),
        None => format!(" (until {} and {})", opts.min_failing, opts.min_passing),
    };
    while observed.runs < limit && !cancel.load(Ordering::Relaxed) {
        let (failing, passing) = counts(&basis);
        if opts.runs.is_none() && failing >= opts.min_failing && passing >= opts.min_passing {
            break;
        }
        if amp.exhausted() && opts.runs.is_none() && basis.len() as u32 >= opts.amplify_after {
            break;
        }
        // Runs made at once (`--jobs`) are drawn together and learnt from
        // in the order of their numbers, never across the ladder's
        // judgement of a block (`Amplifier::block_left`).
        let n = source.jobs().min(limit - observed.runs).min(amp.block_left()).max(1);
        let recs: Vec<RecordedRun> = if n == 1 {
            let noise = amp.draw();
            source.observe(&noise, cancel)?.into_iter().collect()
        } else {
            let noises: Vec<Vec<Noise>> = (0..n).map(|_| amp.draw()).collect();
            source.observe_batch(&noises, cancel)?
        };
        if recs.is_empty() {
            break;
        }
        let mut stop = false;
        for rec in recs {
            let mut t = Taking {
                observed: &mut observed,
                basis: &mut basis,
                aside: &mut aside,
                amp: &mut amp,
                plain: &mut plain,
                said: &mut said_once,
                early: &mut early,
            };
            stop |= t.take(rec, source, writer, opts, &wanted, ui)?;
        }
        if stop {
            break;
        }
        if opts.runs.is_none() && base + amp.more_runs() > limit {
            limit = base + amp.more_runs();
            ui.begin(&format!("observing {noun}s"), Some(u64::from(limit)));
            ui.step_to(u64::from(observed.runs), "");
        }
    }
    ui.end();
    if cancel.load(Ordering::Relaxed) {
        let (failing, passing) = counts(&basis);
        return Err(Interrupted(format!(
            "interrupted while observing: the {} {noun}(s) so far ({failing} failing, {passing} passing, nothing confirmed yet) are saved in {}; `aid-agent analyze` reads them",
            observed.runs,
            writer.dir().display()
        ))
        .into());
    }
    if let Some(traced @ (_, 1..)) = plain.counts {
        compare_untraced(source, traced, opts.amplify_below, &mut observed, ui)?;
    }
    let (failing, passing) = counts(&basis);
    let hung = said_once.first_hang.as_deref().filter(|_| said_once.hangs >= observed.failing);
    let ends = Ends { early: early.as_deref(), hung };
    enough(&observed, failing, passing, basis.len(), ends, source, ui)?;
    observed.amplified = amp.amplified();
    observed.noise = amp.words();
    observed.statements = amp.at_statements();
    observed.analysed = basis.len() as u32;
    ui.say(&format!(
        "observed {} {noun}s: {failing} failing and {passing} passing {noun}s analysed",
        observed.runs
    ));
    Ok(Observation { observed, basis, aside, noise: amp.into_noise() })
}

#[cfg(test)]
mod early_tests {
    use super::*;

    /// The bound: 1 failing run in 1 leaves 95 %, 150 in 150 about 2 %;
    /// with --max-runs 200 the 150th failing run is the first at which not
    /// even one passing run fits in the runs left at that bound.
    #[test]
    fn every_run_failing_ends_observing_when_not_even_one_passing_run_can_come() {
        assert!((pass_rate_bound(1) - 0.95).abs() < 1e-12);
        assert!((pass_rate_bound(150) - 0.01978).abs() < 1e-5, "{}", pass_rate_bound(150));
        assert_eq!(all_failed_early(0, 200), None);
        assert_eq!(all_failed_early(45, 200), None);
        assert_eq!(all_failed_early(149, 200), None);
        assert_eq!(all_failed_early(150, 200), Some((50, 50)));
        assert_eq!(all_failed_early(200, 200), Some((67, 0)));
        assert_eq!(all_failed_early(150, 1000), None, "more runs allowed");
    }
}
