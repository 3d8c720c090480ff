//! `cargo xtask bench synthetic`: the sensitivity study (AID Sec. 7.2,
//! Fig. 8) on the paper's easy model or on the adversarial one (issue 11),
//! run by the library's simulator (`aid::causal::synthetic`, which stays in
//! the library because the causal engine's unit tests run it). Prints a
//! table (or JSON) to stdout, and fails if any approach reports a wrong
//! causal path where the paper's assumptions hold.

use std::process::ExitCode;

use aid::{
    causal::{
        Strategy,
        synthetic::{Condition, Model, SettingResult, StudyConfig, Threads, run_study},
    },
    cli::args::StrategyArg,
};
use anyhow::{Context, bail};

#[derive(Debug, clap::Args)]
pub struct SyntheticArgs {
    /// Seed of the generator and of every simulated run.
    #[arg(long, default_value_t = 2020)]
    pub seed: u64,
    /// Applications per MAXt setting.
    #[arg(long, default_value_t = 500)]
    pub apps: u32,
    /// MAXt values: a list ("2,4,8") or an inclusive range with a step
    /// ("2..40:2").
    #[arg(long, default_value = "2..40:2")]
    pub maxt: String,
    /// Approaches to run (default: all).
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<StrategyArg>,
    /// Threads per application: up to MAXt (the paper's wording) or exactly MAXt.
    #[arg(long, value_enum, default_value_t = ThreadsArg::UpTo)]
    pub threads: ThreadsArg,
    /// Generator: the paper's easy setting, or the adversarial one (run
    /// exactly and with noise).
    #[arg(long, value_enum, default_value_t = ModelArg::Easy)]
    pub model: ModelArg,
    /// Failure rate of every application (default: drawn in [0.2, 0.8)).
    #[arg(long, value_name = "P")]
    pub failure_rate: Option<f64>,
    /// Session-level confidence of every discovery, as `debug --confidence`.
    #[arg(long, default_value_t = 0.99)]
    pub confidence: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--threads` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ThreadsArg {
    /// Uniform in 2..=MAXt: MAXt is the maximum, as the paper words it.
    UpTo,
    /// Exactly MAXt: a heavier variant with larger applications.
    Exactly,
}

impl From<ThreadsArg> for Threads {
    fn from(t: ThreadsArg) -> Threads {
        match t {
            ThreadsArg::UpTo => Threads::UpTo,
            ThreadsArg::Exactly => Threads::Exactly,
        }
    }
}

/// `--model` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelArg {
    Easy,
    Adversarial,
}

/// Parses "2,4,8" or "2..40:2" (step optional, default 1).
pub fn parse_maxt(s: &str) -> anyhow::Result<Vec<u32>> {
    let s = s.trim();
    let out: Vec<u32> = if let Some((lo, rest)) = s.split_once("..") {
        let (hi, step) = match rest.split_once(':') {
            Some((hi, step)) => (
                hi,
                step.trim().parse::<u32>().with_context(|| format!("bad step in --maxt {s:?}"))?,
            ),
            None => (rest, 1),
        };
        let lo: u32 = lo.trim().parse().with_context(|| format!("bad start in --maxt {s:?}"))?;
        let hi: u32 = hi.trim().parse().with_context(|| format!("bad end in --maxt {s:?}"))?;
        if step == 0 || lo > hi {
            bail!("--maxt {s:?}: expected START..END[:STEP] with START ≤ END and STEP ≥ 1");
        }
        (lo..=hi).step_by(step as usize).collect()
    } else {
        s.split(',')
            .map(|x| {
                x.trim().parse::<u32>().with_context(|| {
                    format!("bad value {x:?} in --maxt: expected numbers like 2,4,8")
                })
            })
            .collect::<Result<_, _>>()?
    };
    if let Some(&bad) = out.iter().find(|&&t| t < 2) {
        bail!("--maxt {bad}: applications need at least 2 threads");
    }
    Ok(out)
}

/// Runs the study and prints its tables; fails on a wrong path where the
/// paper's assumptions hold.
pub fn run(a: SyntheticArgs) -> anyhow::Result<ExitCode> {
    let max_threads = parse_maxt(&a.maxt)?;
    if a.apps == 0 {
        bail!("--apps 0: need at least one application per setting");
    }
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        bail!("--confidence {}: must be between 0 and 1 (exclusive)", a.confidence);
    }
    if let Some(p) = a.failure_rate
        && !(p > 0.0 && p < 1.0)
    {
        bail!("--failure-rate {p}: must be between 0 and 1 (exclusive)");
    }
    let strategies = if a.strategies.is_empty() {
        Strategy::ALL.to_vec()
    } else {
        a.strategies.iter().map(|&s| s.into()).collect()
    };
    // The observation phase is debug's: the same stopping rule.
    let debug = aid::debug::DebugOptions::default();
    let cfg = StudyConfig {
        seed: a.seed,
        apps: a.apps,
        max_threads,
        strategies,
        threads: a.threads.into(),
        model: match a.model {
            ModelArg::Easy => Model::Easy,
            ModelArg::Adversarial => Model::Adversarial,
        },
        confidence: a.confidence,
        failure_rate: a.failure_rate,
        observe_min: debug.min_failing.max(debug.min_passing),
        observe_max: debug.max_runs,
    };
    let results = run_study(&cfg, |r| {
        eprintln!("aid: MAXt {} done ({} applications)", r.max_threads, r.apps);
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", tables(&results));
    }
    let wrong: u32 = results
        .iter()
        .flat_map(|r| &r.conditions)
        .flat_map(|c| &c.strategies)
        .map(|s| s.wrong_within_assumptions)
        .sum();
    if wrong > 0 {
        eprintln!(
            "aid: {wrong} wrong causal path(s) where the paper's assumptions hold, not explained by chance: every approach is claimed sound there"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn condition_name(c: Condition) -> &'static str {
    match c {
        Condition::Exact => "exact observation",
        Condition::Noisy => "noise: 1% dropout, a confounding side effect, shifted failure rates",
    }
}

/// One table per condition: per MAXt and strategy, mean/worst
/// interventions and wrong paths; then a summary over all settings.
fn tables(results: &[SettingResult]) -> String {
    let Some(first) = results.first() else { return String::new() };
    let mut out = String::new();
    for (ci, cond) in first.conditions.iter().enumerate() {
        out.push_str(&format!("\n## {}\n", condition_name(cond.condition)));
        let mut h =
            format!("{:>5} {:>5} {:>7} {:>5} {:>6}", "MAXt", "apps", "N avg", "N max", "D avg");
        for s in &cond.strategies {
            h.push_str(&format!(" {:>18}", format!("{} avg/max !wrong", s.strategy)));
        }
        out.push_str(&h);
        out.push('\n');
        for r in results {
            let mut line = format!(
                "{:>5} {:>5} {:>7.1} {:>5} {:>6.1}",
                r.max_threads, r.apps, r.mean_predicates, r.max_predicates, r.mean_causal
            );
            for s in &r.conditions[ci].strategies {
                let wrong = if s.wrong > 0 { format!(" !{}", s.wrong) } else { String::new() };
                line.push_str(&format!(
                    " {:>18}",
                    format!("{:.1}/{}{}", s.mean_interventions, s.max_interventions, wrong)
                ));
            }
            out.push_str(&line);
            out.push('\n');
        }
        if cond.condition == Condition::Noisy {
            let hit: u32 = results.iter().map(|r| r.cause_confounded).sum();
            out.push_str(&format!(
                "{hit} applications where a true cause's own intervention has the side effect: no strategy can confirm that cause\n"
            ));
        }
        out.push_str(&summary(results, ci));
    }
    out
}

fn summary(results: &[SettingResult], ci: usize) -> String {
    let apps: u32 = results.iter().map(|r| r.apps).sum();
    let within: u32 = results.iter().map(|r| r.within_assumptions).sum();
    let skipped: u32 = results.iter().map(|r| r.no_failure_observed).sum();
    let capped: u32 = results.iter().map(|r| r.capped).sum();
    let mut out = format!(
        "{apps} applications ({within} where the paper's assumptions hold; {skipped} skipped: no failure in the observation phase; {capped} with the causal count capped)\n{:<10} {:>7} {:>6} {:>9} {:>14} {:>8} {:>9} {:>12} {:>10}\n",
        "approach",
        "mean",
        "worst",
        "runs/app",
        "wrong",
        "flagged",
        "by chance",
        "unsound (A)",
        "confidence"
    );
    let Some(first) = results.first() else { return out };
    for (k, s) in first.conditions[ci].strategies.iter().enumerate() {
        let st = |r: &SettingResult| r.conditions[ci].strategies[k].clone();
        let weight = |r: &SettingResult| f64::from(r.apps);
        let mean_of = |f: &dyn Fn(&SettingResult) -> f64| {
            results.iter().map(|r| f(r) * weight(r)).sum::<f64>() / f64::from(apps.max(1))
        };
        let max = results.iter().map(|r| st(r).max_interventions).max().unwrap_or(0);
        let mean = mean_of(&|r| st(r).mean_interventions);
        let runs = mean_of(&|r| st(r).mean_runs);
        let conf = mean_of(&|r| st(r).mean_confidence);
        let wrong: u32 = results.iter().map(|r| st(r).wrong).sum();
        let flagged: u32 = results.iter().map(|r| st(r).flagged).sum();
        let chance: u32 = results.iter().map(|r| st(r).by_chance).sum();
        let within_wrong: u32 = results.iter().map(|r| st(r).wrong_within_assumptions).sum();
        out.push_str(&format!(
            "{:<10} {:>7.2} {:>6} {:>9.0} {:>14} {:>8} {:>9} {:>12} {:>10.4}\n",
            s.strategy.to_string(),
            mean,
            max,
            runs,
            format!("{wrong} ({:.2}%)", 100.0 * f64::from(wrong) / f64::from(apps.max(1))),
            flagged,
            chance,
            within_wrong,
            conf
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxt_lists_and_ranges() {
        assert_eq!(parse_maxt("2,4, 8").unwrap(), vec![2, 4, 8]);
        assert_eq!(parse_maxt("2..10:4").unwrap(), vec![2, 6, 10]);
        assert_eq!(parse_maxt("3..5").unwrap(), vec![3, 4, 5]);
        assert!(parse_maxt("1,2").is_err());
        assert!(parse_maxt("5..2").is_err());
        assert!(parse_maxt("2..x").is_err());
    }
}
