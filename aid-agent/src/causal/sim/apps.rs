//! Synthetic applications with known root causes for the sensitivity study
//! (AID Sec. 7.2, Fig. 8): the generator of the paper's easy model, whose
//! pieces the adversarial one reuses. docs/synthetic.md describes it; the
//! study that runs the strategies on them is `synthetic.rs`.
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
    Rng,
    seq::{IndexedRandom, SliceRandom},
};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::causal::{AcDag, CausalError, CausalModel};
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

/// The time structure every generated application shares: predicates on
/// threads, each in a window of time, and the precedence that holds in
/// every run (windows that do not overlap).
pub(crate) struct Timeline {
    pub threads: u32,
    pub windows: Vec<(f64, f64)>,
    /// Shuffled ids: `ids[i]` is predicate i's id.
    ids: Vec<u32>,
    /// `after[i]`: every predicate whose window starts after i's ends.
    pub after: Vec<BitSet>,
    /// Immediate successors and predecessors (Hasse edges of `after`).
    pub succ: Vec<BitSet>,
    pub pred: Vec<BitSet>,
    /// Longest chain (in predicates) starting at each predicate.
    pub height: Vec<usize>,
}

impl Timeline {
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn id(&self, i: usize) -> PredId {
        PredId(self.ids[i])
    }

    /// The AC-DAG AID would see: precedence in every one of
    /// [`FAILING_RUNS`] failing runs whose anchors are drawn inside the
    /// windows, built by the production code.
    pub fn dag(&self, rng: &mut ChaCha8Rng) -> Result<AcDag, CausalError> {
        let mut runs: Vec<Vec<(PredId, u64)>> = Vec::with_capacity(FAILING_RUNS);
        for _ in 0..FAILING_RUNS {
            let mut run: Vec<(PredId, u64)> = self
                .windows
                .iter()
                .enumerate()
                .map(|(i, &(lo, hi))| (self.id(i), (rng.random_range(lo..=hi) * 1e6) as u64))
                .collect();
            run.sort_unstable();
            runs.push(run);
        }
        let all: Vec<PredId> = (0..self.len()).map(|i| self.id(i)).collect();
        AcDag::build(&all, F, runs.iter().map(Vec::as_slice))
    }
}

/// Threads, windows and precedence (steps 1-3 of docs/synthetic.md).
/// Predicate 0 is the main thread's first, before every thread starts.
pub(crate) fn timeline(max_threads: u32, threads: Threads, rng: &mut ChaCha8Rng) -> Timeline {
    let max_threads = max_threads.max(2);
    let threads = match threads {
        Threads::UpTo => rng.random_range(2..=max_threads),
        Threads::Exactly => max_threads,
    };
    // Windows [lo, hi]: predicate 0 first, alone, on the main thread.
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
    // Sorting by the window end is a topological order of the precedence.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| windows[a].1.total_cmp(&windows[b].1));
    let mut height = vec![1usize; n];
    for &i in order.iter().rev() {
        height[i] = 1 + succ[i].iter().map(|j| height[j]).max().unwrap_or(0);
    }
    Timeline { threads, windows, ids, after, succ, pred, height }
}

/// A random walk of `len` predicates from `start` along immediate
/// successors, each step among those from which a long enough chain
/// remains (`len` ≤ `height[start]`).
pub(crate) fn walk(
    tl: &Timeline,
    start: usize,
    len: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<usize>, CausalError> {
    let mut path = vec![start];
    while path.len() < len {
        let need = len - path.len();
        let at = *path.last().unwrap_or(&start);
        let options: Vec<usize> = tl.succ[at].iter().filter(|&s| tl.height[s] >= need).collect();
        let Some(&next) = options.choose(rng) else {
            return Err(CausalError::Model(
                "no immediate successor can extend the causal path".into(),
            ));
        };
        path.push(next);
    }
    Ok(path)
}

pub fn generate(
    max_threads: u32,
    threads: Threads,
    rng: &mut ChaCha8Rng,
) -> Result<App, CausalError> {
    let tl = timeline(max_threads, threads, rng);
    let n = tl.len();
    let id = |i: usize| tl.id(i);
    let causal_drawn = rng.random_range(1..=max_causal(n));
    let causal = causal_drawn.min(tl.height[0]);
    let path = walk(&tl, 0, causal, rng)?;
    let on_path = BitSet::from_iter(n, path.iter().copied());
    let mut parents: Vec<(PredId, PredId)> =
        path.windows(2).map(|w| (id(w[1]), id(w[0]))).collect();
    parents.push((F, id(*path.last().unwrap_or(&0))));
    for (q, before_q) in tl.pred.iter().enumerate().skip(1) {
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
    let dag = tl.dag(rng)?;
    let failure_rate = rng.random_range(0.2..0.8);
    Ok(App { dag, model, failure_rate, threads: tl.threads, predicates: n, causal_drawn, causal })
}

pub(crate) fn mix(a: u64, b: u64, c: u64) -> u64 {
    // SplitMix-style mixing so neighbouring settings get unrelated streams.
    let mut z = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng as _;

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
}
