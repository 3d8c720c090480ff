//! `cargo xtask bench extract`: throughput of the offline pipeline —
//! predicate extraction, evaluation of every run, statistics and the AC-DAG
//! — over a generated session held in memory. A benchmark, not a test: it
//! times, and prints the times and events per second for BENCHMARKS.md.
//!
//! The workload is a worker pool: main plus `threads − 1` workers, each
//! calling functions from its own repertoire in a fixed cycle (so
//! instances line up across runs) with jittered durations, some of them on
//! a shared object, meeting at a barrier every 50 calls. In a failing run
//! (30%) one call of worker#1 stalls; worker#2 then uses the shared object while the stalled call still holds
//! it, gets an error back and calls an error handler. Rare slow calls in
//! every run add non-discriminative predicates, as real traces have.

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use aid::{
    analysis::{AnalysisOptions, Timings, analyze_timed},
    intervene::SafeList,
    model::{
        Call, Function, Label, Outcome, Run, Session, ValueKind,
        testing::{self, function},
    },
};
use anyhow::bail;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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

/// The generated workload.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Runs in the session.
    pub runs: u32,
    /// Events per run (two per call: entry and exit).
    pub events: u32,
    /// Thread roles per run (main + workers).
    pub threads: u32,
    /// Calls between barriers where all workers meet (0: no barriers, so
    /// a stall shifts a worker's whole later timeline — the stress case).
    pub barrier: u32,
    pub seed: u64,
}

/// Functions per role in the generated program.
const FUNCS_PER_ROLE: u32 = 10;
/// Where worker#1 stalls and worker#2 collides with it in failing runs.
const STALL_AT: u32 = 40;

/// What one measurement found.
#[derive(Clone, Debug)]
pub struct Measured {
    pub functions: usize,
    /// Entry and exit events in the session.
    pub events: u64,
    /// Generating the session (not part of the measurement).
    pub generate: Duration,
    pub time: Timings,
    pub predicates: usize,
    pub fully_discriminative: usize,
    pub candidates: usize,
    pub dag_edges: usize,
}

/// Measures the workload `a` describes and prints the times.
pub fn run(a: &ExtractArgs) -> anyhow::Result<ExitCode> {
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

/// Generates the workload's session and times its analysis.
pub fn measure(w: &Workload) -> anyhow::Result<Measured> {
    if w.runs < 2 || w.events < 20 || w.threads < 3 {
        bail!(
            "extract needs --runs ≥ 2, --events ≥ 20 and --threads ≥ 3 (the failure involves two workers)"
        );
    }
    let t = Instant::now();
    let session = generate(w.runs, w.events, w.threads, w.barrier, w.seed);
    let generate = t.elapsed();
    let events: u64 = session.runs.iter().map(|r| 2 * r.calls.len() as u64).sum();
    let opts = AnalysisOptions { safe: SafeList::new(&["*"])?, ..AnalysisOptions::default() };
    let (analysis, time) = analyze_timed(&session, &opts)?;
    Ok(Measured {
        functions: session.functions.len(),
        events,
        generate,
        time,
        predicates: analysis.catalog.len() - 1,
        fully_discriminative: analysis.scores.iter().filter(|s| s.fully_discriminative).count() - 1,
        candidates: analysis.candidates.len(),
        dag_edges: analysis.dag.reduction().len(),
    })
}

/// The generated session: `runs` runs of about `events` events each.
pub fn generate(runs: u32, events: u32, threads: u32, barrier: u32, seed: u64) -> Session {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nfuncs = threads * FUNCS_PER_ROLE + 1;
    let handler = nfuncs - 1;
    let functions: Vec<Function> = (0..nfuncs)
        .map(|id| {
            let (ret, params) = match id % 4 {
                _ if id == handler => (ValueKind::Void, vec![]),
                0 => (ValueKind::Signed, vec![ValueKind::Pointer, ValueKind::Signed]),
                1 => (ValueKind::Void, vec![ValueKind::Pointer, ValueKind::Signed]),
                2 => (ValueKind::Pointer, vec![ValueKind::Pointer, ValueKind::Unsigned]),
                _ => (ValueKind::Signed, vec![ValueKind::Pointer]),
            };
            let name = if id == handler { "on_error".into() } else { format!("fn_{id}") };
            function(id, &name)
                .with_symbol(&format!("fn_{id}"))
                .in_module("/bench/pool", 0x1000 + u64::from(id) * 64)
                .with_ret(ret)
                .with_params(&params)
        })
        .collect();
    // Per-function base duration (ns).
    let base: Vec<u64> = (0..nfuncs).map(|_| rng.random_range(2_000..50_000)).collect();
    let calls_per_role = (events / 2 / threads).max(STALL_AT + 2);
    let runs = (0..runs)
        .map(|id| {
            let fail = rng.random_bool(0.3);
            one_run(id, fail, threads, calls_per_role, barrier, &base, handler, &mut rng)
        })
        .collect();
    Session { functions, runs }
}

#[allow(clippy::too_many_arguments, reason = "one parameter per column of the benchmark table")]
fn one_run(
    id: u32,
    fail: bool,
    threads: u32,
    per_role: u32,
    barrier: u32,
    base: &[u64],
    handler: u32,
    rng: &mut ChaCha8Rng,
) -> Run {
    // The shared object lives at a different heap address in every run.
    let shared = 0x5555_0000_0000 + i64::from(id) * 0x1000;
    let mut calls = Vec::with_capacity((threads * per_role + 1) as usize);
    let mut stall_end = 0u64;
    let mut stall_entry = u64::MAX;
    let mut t: Vec<u64> =
        (0..threads).map(|r| u64::from(r) * 1_000 + rng.random_range(0..500)).collect();
    let mut instance = vec![vec![0u32; base.len()]; threads as usize];
    for k in 0..per_role {
        // Workers meet at a barrier every `barrier` steps, as pools that
        // hand out batches do; a stall delays everyone once, not forever.
        if barrier > 0 && k > 0 && k % barrier == 0 {
            let m = t.iter().copied().max().unwrap_or(0);
            for x in &mut t {
                *x = m + rng.random_range(0..500);
            }
        }
        for role in 0..threads {
            let r = role as usize;
            let func = role * FUNCS_PER_ROLE + k % FUNCS_PER_ROLE;
            instance[r][func as usize] += 1;
            let mut d = base[func as usize] * rng.random_range(90..111) / 100;
            // Rare slowness anywhere: noise the statistics must see through.
            if rng.random_bool(0.0005) {
                d *= 3;
            }
            let stall = fail && role == 1 && k == STALL_AT;
            if stall {
                d = d * 20 + 400_000;
            }
            // Worker#2's call at the stall step uses the shared object after
            // worker#1's call at that step has released it; in a failing run
            // it does not wait and starts while the stalled call holds it.
            let mut entry = t[r] + rng.random_range(500..1_500);
            if role == 2 && k == STALL_AT && stall_entry != u64::MAX {
                // Never before the worker's own previous call returned: a
                // thread runs one call at a time.
                entry = if fail {
                    (stall_entry + 100_000).max(t[r] + 1)
                } else {
                    entry.max(stall_end + 1_000)
                };
            }
            let exit = entry + d;
            if role == 1 && k == STALL_AT {
                stall_entry = entry;
                stall_end = exit;
            }
            let shares = role >= 1 && k == STALL_AT;
            // Other calls get the shared object (every fourth function) or
            // an object of their own.
            let own = 0x6000_0000_0000 + (i64::from(role) << 32) + i64::from(k) * 64;
            let ptr_arg = if shares || func.is_multiple_of(4) { shared } else { own };
            let collided = fail && role == 2 && k == STALL_AT && entry < stall_end;
            let ret = match func % 4 {
                1 => None,
                2 => Some(0x7f00_0000_0000 + i64::from(id) * 0x100 + i64::from(k)),
                _ if collided => Some(-11),
                _ => Some(0),
            };
            calls.push(Call {
                func,
                role,
                instance: instance[r][func as usize],
                entry_ns: entry,
                exit_ns: Some(exit),
                args: [ptr_arg, i64::from(k), 0],
                ret,
                unwound: false,
                content: None,
                paused_ns: 0,
            });
            if collided {
                let h = exit + 200;
                calls.push(Call {
                    func: handler,
                    role,
                    instance: 1,
                    entry_ns: h,
                    exit_ns: Some(h + 3_000),
                    args: [0; 3],
                    ret: None,
                    unwound: false,
                    content: None,
                    paused_ns: 0,
                });
                t[r] = h + 3_000;
            } else {
                t[r] = exit;
            }
        }
    }
    let end = calls.iter().filter_map(|c| c.exit_ns).max().unwrap_or(0) + 1_000;
    let label = if fail { Label::Fail } else { Label::Pass };
    testing::run(id, label, calls, end)
        .with_outcome(Outcome { exit_code: Some(i32::from(fail)), ..Outcome::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aid::{analysis::analyze, predicates::Kind};

    /// The workload has the failure it claims: a stall on worker#1, an
    /// overlap with worker#2 on the shared object, an error return and the
    /// handler call, all fully discriminative.
    #[test]
    fn generated_workload_contains_its_failure() {
        let s = generate(40, 400, 4, 50, 7);
        assert!(s.runs.iter().any(Run::failed) && s.runs.iter().any(|r| !r.failed()));
        let a = analyze(
            &s,
            &AnalysisOptions { safe: SafeList::new(&["*"]).unwrap(), ..AnalysisOptions::default() },
        )
        .unwrap();
        let fd: Vec<Kind> = a
            .scores
            .iter()
            .filter(|x| x.fully_discriminative)
            .filter_map(|x| a.catalog.get(x.id))
            .map(|p| p.key.kind)
            .collect();
        for kind in [Kind::TooSlow, Kind::Overlap, Kind::ErrorReturn, Kind::CountAbove] {
            assert!(fd.contains(&kind), "{kind:?} missing from {fd:?}");
        }
        assert!(!a.candidates.is_empty());
    }
}
