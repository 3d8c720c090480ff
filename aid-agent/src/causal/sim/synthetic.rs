//! Synthetic applications with known root causes for the sensitivity study
//! (AID Sec. 7.2, Fig. 8), and the study itself. docs/synthetic.md
//! describes the generator; the numbers are in BENCHMARKS.md.
//!
//! An application has t threads (2..=MAXt), each a chain of 2..=7
//! predicates in program order. Every predicate has a window of time in
//! which it occurs; windows on one thread follow each other, threads start
//! at staggered times, so chains interleave into junctions. The AC-DAG is
//! built by [`AcDag::build`] from 50 failing runs whose anchors are drawn
//! inside the windows. The root cause R is the first predicate of the main
//! thread, before every thread starts; the causal path is a walk from R
//! along immediate-precedence edges; every other predicate is an effect of
//! one of its immediate predecessors. R occurs with probability p per run.

use rand::{
    Rng, SeedableRng,
    seq::{IndexedRandom, SliceRandom},
};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::causal::{
    AcDag, CausalError, CausalModel, Config, SimulatedOracle, Strategy, Ties, discover,
};
use crate::{bitset::BitSet, predicates::PredId};

/// Predicates per thread.
pub const THREAD_PREDICATES: (u32, u32) = (2, 7);
/// Failing runs the AC-DAG is built from (the paper's case studies log 50).
pub const FAILING_RUNS: usize = 50;

/// One generated application.
#[derive(Clone, Debug)]
pub struct App {
    pub dag: AcDag,
    pub model: CausalModel,
    /// Probability that the root cause occurs (the failure rate).
    pub failure_rate: f64,
    pub threads: u32,
    /// N: predicates (F not counted).
    pub predicates: usize,
    /// Causal predicates drawn for the path (D), before any cap.
    pub causal_drawn: usize,
    /// Length of the generated causal path (D, or the longest possible
    /// path from R when that is shorter).
    pub causal: usize,
}

/// The failure predicate of every generated application.
pub const F: PredId = PredId(0);

/// Upper end of the causal-predicate count for N predicates: N / log2 N,
/// where adaptive binary splitting stops beating one-by-one testing
/// (AID Sec. 2: D log N < N).
pub fn max_causal(n: usize) -> usize {
    if n < 2 {
        return 1;
    }
    let n = n as f64;
    ((n / n.log2()).floor() as usize).max(1)
}

/// How many threads an application of a MAXt setting has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Threads {
    /// Uniform in 2..=MAXt: MAXt is the maximum, as the paper words it.
    #[default]
    UpTo,
    /// Exactly MAXt: a heavier variant with larger applications.
    Exactly,
}

pub fn generate(
    max_threads: u32,
    threads: Threads,
    rng: &mut ChaCha8Rng,
) -> Result<App, CausalError> {
    let max_threads = max_threads.max(2);
    let threads = match threads {
        Threads::UpTo => rng.random_range(2..=max_threads),
        Threads::Exactly => max_threads,
    };
    // Windows [lo, hi]: R first, alone, on the main thread.
    let mut windows: Vec<(f64, f64)> = vec![(0.0, 1.0)];
    for t in 0..threads {
        let count = rng.random_range(THREAD_PREDICATES.0..=THREAD_PREDICATES.1);
        // Threads are created at a steady rate over the run, so about the
        // same number are alive at any time whatever t is.
        let (mut at, count) = if t == 0 {
            (1.0, count - 1)
        } else {
            (rng.random_range(1.0..1.0 + 2.0 * f64::from(threads)), count)
        };
        for _ in 0..count {
            let lo = at + rng.random_range(0.05..1.0);
            let hi = lo + rng.random_range(0.5..2.0);
            windows.push((lo, hi));
            at = hi;
        }
    }
    let n = windows.len();
    // Ids are shuffled so that nothing can read the time order from them.
    let mut ids: Vec<u32> = (1..=n as u32).collect();
    ids.shuffle(rng);
    let id = |i: usize| PredId(ids[i]);

    // Precedence that holds in every run: the windows do not overlap.
    let mut after: Vec<BitSet> = vec![BitSet::new(n); n];
    for i in 0..n {
        for j in 0..n {
            if windows[i].1 < windows[j].0 {
                after[i].insert(j);
            }
        }
    }
    let mut before: Vec<BitSet> = vec![BitSet::new(n); n];
    for (i, a) in after.iter().enumerate() {
        for j in a.iter() {
            before[j].insert(i);
        }
    }
    let immediate = |rel: &Vec<BitSet>, i: usize| {
        let mut d = rel[i].clone();
        for k in rel[i].iter() {
            d.difference_with(&rel[k]);
        }
        d
    };
    let succ: Vec<BitSet> = (0..n).map(|i| immediate(&after, i)).collect();
    let pred: Vec<BitSet> = (0..n).map(|i| immediate(&before, i)).collect();
    // Longest chain (in predicates) starting at each node; sorting by the
    // window end is a topological order of the precedence.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| windows[a].1.total_cmp(&windows[b].1));
    let mut height = vec![1usize; n];
    for &i in order.iter().rev() {
        height[i] = 1 + succ[i].iter().map(|j| height[j]).max().unwrap_or(0);
    }

    let causal_drawn = rng.random_range(1..=max_causal(n));
    let causal = causal_drawn.min(height[0]);
    let mut path = vec![0usize];
    while path.len() < causal {
        let need = causal - path.len();
        let at = *path.last().unwrap_or(&0);
        let options: Vec<usize> = succ[at].iter().filter(|&s| height[s] >= need).collect();
        let Some(&next) = options.choose(rng) else {
            return Err(CausalError::Model(
                "no immediate successor can extend the causal path".into(),
            ));
        };
        path.push(next);
    }
    let on_path = BitSet::from_iter(n, path.iter().copied());
    let mut parents: Vec<(PredId, PredId)> =
        path.windows(2).map(|w| (id(w[1]), id(w[0]))).collect();
    parents.push((F, id(*path.last().unwrap_or(&0))));
    for (q, before_q) in pred.iter().enumerate().skip(1) {
        if on_path.contains(q) {
            continue;
        }
        let options: Vec<usize> = before_q.iter().collect();
        let Some(&p) = options.choose(rng) else {
            return Err(CausalError::Model("a predicate precedes the root cause".into()));
        };
        parents.push((id(q), id(p)));
    }
    let model = CausalModel::new(id(0), F, parents)?;

    // The AC-DAG AID would see: precedence in every one of the failing runs.
    let mut runs: Vec<Vec<(PredId, u64)>> = Vec::with_capacity(FAILING_RUNS);
    for _ in 0..FAILING_RUNS {
        let mut run: Vec<(PredId, u64)> = windows
            .iter()
            .enumerate()
            .map(|(i, &(lo, hi))| (id(i), (rng.random_range(lo..=hi) * 1e6) as u64))
            .collect();
        run.sort_unstable();
        runs.push(run);
    }
    let all: Vec<PredId> = (0..n).map(id).collect();
    let dag = AcDag::build(&all, F, runs.iter().map(Vec::as_slice))?;
    let failure_rate = rng.random_range(0.2..0.8);
    Ok(App { dag, model, failure_rate, threads, predicates: n, causal_drawn, causal })
}

/// Parameters of the sensitivity study.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StudyConfig {
    pub seed: u64,
    pub apps: u32,
    pub max_threads: Vec<u32>,
    pub strategies: Vec<Strategy>,
    pub threads: Threads,
    /// Round confidence. The study runs millions of rounds, so it needs a
    /// far higher confidence than a live session to get every path right.
    pub confidence: f64,
}

impl Default for StudyConfig {
    fn default() -> Self {
        StudyConfig {
            seed: 2020,
            apps: 500,
            max_threads: (1..=20).map(|i| 2 * i).collect(),
            strategies: Strategy::ALL.to_vec(),
            threads: Threads::UpTo,
            confidence: 1.0 - 1e-9,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StrategyStats {
    pub strategy: Strategy,
    pub mean_interventions: f64,
    pub max_interventions: u32,
    pub mean_runs: f64,
    /// Applications where the path found differs from the true one.
    pub misses: u32,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SettingResult {
    pub max_threads: u32,
    pub apps: u32,
    pub mean_predicates: f64,
    pub min_predicates: usize,
    pub max_predicates: usize,
    pub mean_causal: f64,
    pub max_causal: usize,
    /// Applications whose drawn causal count exceeded the longest possible
    /// path and was capped.
    pub capped: u32,
    pub strategies: Vec<StrategyStats>,
}

fn mix(a: u64, b: u64, c: u64) -> u64 {
    // SplitMix-style mixing so neighbouring settings get unrelated streams.
    let mut z = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs every strategy on `apps` generated applications per MAXt setting.
/// `progress` sees each setting as it completes.
pub fn run_study(
    cfg: &StudyConfig,
    mut progress: impl FnMut(&SettingResult),
) -> Result<Vec<SettingResult>, CausalError> {
    let mut out = Vec::new();
    for &maxt in &cfg.max_threads {
        let mut res = SettingResult {
            max_threads: maxt,
            apps: cfg.apps,
            min_predicates: usize::MAX,
            ..Default::default()
        };
        let mut stats: Vec<StrategyStats> = cfg
            .strategies
            .iter()
            .map(|&s| StrategyStats { strategy: s, ..Default::default() })
            .collect();
        for app_no in 0..cfg.apps {
            let mut rng =
                ChaCha8Rng::seed_from_u64(mix(cfg.seed, u64::from(maxt), u64::from(app_no)));
            let app = generate(maxt, cfg.threads, &mut rng)?;
            res.mean_predicates += app.predicates as f64;
            res.min_predicates = res.min_predicates.min(app.predicates);
            res.max_predicates = res.max_predicates.max(app.predicates);
            res.mean_causal += app.causal as f64;
            res.max_causal = res.max_causal.max(app.causal);
            if app.causal < app.causal_drawn {
                res.capped += 1;
            }
            let truth = app.model.path();
            for (k, st) in stats.iter_mut().enumerate() {
                let seed =
                    mix(cfg.seed ^ 0x5eed, u64::from(maxt) << 32 | u64::from(app_no), k as u64);
                let mut oracle = SimulatedOracle::new(app.model.clone(), app.failure_rate, seed);
                let config = Config {
                    failure_rate: app.failure_rate,
                    confidence: cfg.confidence,
                    seed,
                    ties: Ties::Random,
                    max_invalid_runs: 1,
                };
                let d = discover(&app.dag, st.strategy, &mut oracle, &config)?;
                st.mean_interventions += f64::from(d.interventions);
                st.max_interventions = st.max_interventions.max(d.interventions);
                st.mean_runs += d.runs as f64;
                if d.path != truth || !d.unresolved.is_empty() {
                    st.misses += 1;
                }
            }
        }
        let apps = f64::from(cfg.apps.max(1));
        res.mean_predicates /= apps;
        res.mean_causal /= apps;
        for st in &mut stats {
            st.mean_interventions /= apps;
            st.mean_runs /= apps;
        }
        res.strategies = stats;
        progress(&res);
        out.push(res);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_apps_respect_the_paper_ranges_and_assumptions() {
        for maxt in [2, 10, 40] {
            for app in 0..30 {
                let mut rng = ChaCha8Rng::seed_from_u64(mix(1, maxt, app));
                let a = generate(maxt as u32, Threads::UpTo, &mut rng).unwrap();
                assert!((4..=284).contains(&a.predicates), "N = {}", a.predicates);
                assert!((2..=maxt as u32).contains(&a.threads));
                assert!(a.causal >= 1 && a.causal <= max_causal(a.predicates));
                let path = a.model.path();
                assert_eq!(path.len(), a.causal);
                // The causal path is a chain of AC-DAG edges (Def. 1) and
                // the root cause precedes every other predicate.
                for w in path.windows(2) {
                    assert!(a.dag.precedes(w[0], w[1]));
                }
                for p in a.dag.topological() {
                    assert!(p == path[0] || a.dag.precedes(path[0], p));
                }
                assert!((0.2..0.8).contains(&a.failure_rate));
            }
        }
    }

    #[test]
    fn max_causal_uses_log2() {
        assert_eq!(max_causal(4), 2);
        assert_eq!(max_causal(16), 4);
        assert_eq!(max_causal(284), 34);
    }

    #[test]
    fn small_study_finds_every_path() {
        let cfg =
            StudyConfig { seed: 3, apps: 12, max_threads: vec![2, 8], ..StudyConfig::default() };
        let res = run_study(&cfg, |_| {}).unwrap();
        assert_eq!(res.len(), 2);
        for s in &res {
            for st in &s.strategies {
                assert_eq!(st.misses, 0, "{} at MAXt={}", st.strategy, s.max_threads);
                assert!(st.mean_interventions >= 1.0);
            }
        }
    }
}
