//! `aid-agent bench ...`: benchmarks that need the agent's internals.
//! `synthetic` reproduces the sensitivity study (AID Sec. 7.2, Fig. 8,
//! [`crate::causal::synthetic`]); `extract` times predicate extraction,
//! scoring and the AC-DAG over generated runs ([`crate::bench::extract`]).
//! Both print a table (or JSON) to stdout.

use std::process::ExitCode;

use anyhow::{Context, bail};

use super::args::{StrategyArg, ThreadsArg};
use crate::{
    bench::extract::{Workload, measure},
    causal::{
        Strategy,
        synthetic::{SettingResult, StudyConfig, run_study},
    },
};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub bench: Bench,
}

#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Sensitivity study on generated applications (Fig. 8); fails if any
    /// approach misses the true causal path.
    Synthetic(SyntheticArgs),
    /// Extraction + statistics + AC-DAG throughput over generated runs.
    Extract(ExtractArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExtractArgs {
    /// Runs in the session.
    #[arg(long, default_value_t = 1000)]
    pub runs: u32,
    /// Events per run (two per call: entry and exit).
    #[arg(long, default_value_t = 10_000)]
    pub events: u32,
    /// Thread roles per run (main + workers).
    #[arg(long, default_value_t = 4)]
    pub threads: u32,
    /// Calls between barriers where all workers meet (0: no barriers, so a
    /// stall shifts a worker's whole later timeline — the stress case).
    #[arg(long, default_value_t = 50)]
    pub barrier: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

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
    /// Confidence of "the failure stopped" per round.
    #[arg(long, default_value_t = 1.0 - 1e-9)]
    pub confidence: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.bench {
        Bench::Synthetic(a) => synthetic(a),
        Bench::Extract(a) => extract(&a),
    }
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

fn synthetic(a: SyntheticArgs) -> anyhow::Result<ExitCode> {
    let max_threads = parse_maxt(&a.maxt)?;
    if a.apps == 0 {
        bail!("--apps 0: need at least one application per setting");
    }
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        bail!("--confidence {}: must be between 0 and 1 (exclusive)", a.confidence);
    }
    let strategies = if a.strategies.is_empty() {
        Strategy::ALL.to_vec()
    } else {
        a.strategies.iter().map(|&s| s.into()).collect()
    };
    let cfg = StudyConfig {
        seed: a.seed,
        apps: a.apps,
        max_threads,
        strategies,
        threads: a.threads.into(),
        confidence: a.confidence,
    };
    if !a.json {
        println!("{}", header(&cfg.strategies));
    }
    let results = run_study(&cfg, |r| {
        if !a.json {
            println!("{}", row(r));
        }
    })?;
    let misses: u32 = results.iter().flat_map(|r| &r.strategies).map(|s| s.misses).sum();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", summary(&results));
    }
    if misses > 0 {
        eprintln!(
            "aid: {misses} application(s) where an approach did not find the true causal path"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn extract(a: &ExtractArgs) -> anyhow::Result<ExitCode> {
    let w = Workload {
        runs: a.runs,
        events: a.events,
        threads: a.threads,
        barrier: a.barrier,
        seed: a.seed,
    };
    let m = measure(&w)?;
    let t = &m.time;
    let total = t.total().as_secs_f64();
    let rate = m.events as f64 / total;
    if a.json {
        let v = serde_json::json!({
            "runs": a.runs, "events_per_run": a.events, "threads": a.threads, "barrier": a.barrier, "seed": a.seed,
            "events": m.events, "generate_s": m.generate.as_secs_f64(),
            "learn_s": t.learn.as_secs_f64(), "evaluate_s": t.evaluate.as_secs_f64(),
            "statistics_s": t.statistics.as_secs_f64(), "dag_s": t.dag.as_secs_f64(),
            "total_s": total, "events_per_s": rate,
            "predicates": m.predicates, "fully_discriminative": m.fully_discriminative,
            "candidates": m.candidates, "dag_edges": m.dag_edges,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "extract benchmark: {} runs × {} events ({:.1} M events), {} roles, {} functions, barrier {}, seed {}",
            a.runs,
            a.events,
            m.events as f64 / 1e6,
            a.threads,
            m.functions,
            a.barrier,
            a.seed
        );
        println!(
            "  generate    {:>8.2} s  (not part of the measurement)",
            m.generate.as_secs_f64()
        );
        println!("  learn       {:>8.2} s", t.learn.as_secs_f64());
        println!("  evaluate    {:>8.2} s", t.evaluate.as_secs_f64());
        println!("  statistics  {:>8.2} s", t.statistics.as_secs_f64());
        println!("  ac-dag      {:>8.2} s", t.dag.as_secs_f64());
        println!("  total       {:>8.2} s  = {:.2} M events/s", total, rate / 1e6);
        println!(
            "  {} predicates, {} fully discriminative, {} AC-DAG candidates, {} reduced edges",
            m.predicates, m.fully_discriminative, m.candidates, m.dag_edges
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn header(strategies: &[Strategy]) -> String {
    let mut h = format!("{:>5} {:>7} {:>5} {:>6}", "MAXt", "N avg", "N max", "D avg");
    for s in strategies {
        h.push_str(&format!(" {:>16}", format!("{s} avg/max")));
    }
    h
}

fn row(r: &SettingResult) -> String {
    let mut line = format!(
        "{:>5} {:>7.1} {:>5} {:>6.1}",
        r.max_threads, r.mean_predicates, r.max_predicates, r.mean_causal
    );
    for s in &r.strategies {
        let miss = if s.misses > 0 { format!("!{}", s.misses) } else { String::new() };
        line.push_str(&format!(
            " {:>16}",
            format!("{:.1}/{}{}", s.mean_interventions, s.max_interventions, miss)
        ));
    }
    line
}

fn summary(results: &[SettingResult]) -> String {
    let Some(first) = results.first() else { return String::new() };
    let apps: u32 = results.iter().map(|r| r.apps).sum();
    let capped: u32 = results.iter().map(|r| r.capped).sum();
    let mut out = format!(
        "{apps} applications, {capped} with the causal count capped\n{:<10} {:>10} {:>6} {:>14} {:>7}\n",
        "approach", "mean", "worst", "runs per app", "misses"
    );
    for (k, s) in first.strategies.iter().enumerate() {
        let per = |f: &dyn Fn(&SettingResult) -> f64| {
            results.iter().map(f).sum::<f64>() / results.len() as f64
        };
        let max = results.iter().map(|r| r.strategies[k].max_interventions).max().unwrap_or(0);
        let mean = per(&|r| r.strategies[k].mean_interventions);
        let runs = per(&|r| r.strategies[k].mean_runs);
        let misses: u32 = results.iter().map(|r| r.strategies[k].misses).sum();
        out.push_str(&format!(
            "{:<10} {:>10.2} {:>6} {:>14.0} {:>7}\n",
            s.strategy.to_string(),
            mean,
            max,
            runs,
            misses
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
