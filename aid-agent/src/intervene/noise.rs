//! Failure amplification: when failures are rare, `debug` injects random
//! delays at traced call sites (chaos-style noise) so more runs fail. The
//! sites come from calls seen in earlier runs; each run draws its own, and
//! the delays are stored with the run.
//!
//! Delays go before a call's first instruction, never before its return: a
//! late return would move the recorded end of a call whose effect has
//! already happened, and blur the "A ended before B started" orders the
//! predicates look for.

use rand::{SeedableRng as _, seq::IndexedRandom as _};

use crate::model::{Noise, Point, Run, Site};

/// How much noise to inject per run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// Delayed call sites per run.
    pub sites: usize,
    /// Longest delay, in microseconds.
    pub max_delay_us: u64,
}

impl Level {
    pub const START: Level = Level { sites: 2, max_delay_us: 2_000 };

    /// The next, stronger level (more sites, longer delays), up to a cap.
    pub fn stronger(self) -> Option<Level> {
        let next = Level {
            sites: (self.sites * 2).min(16),
            max_delay_us: (self.max_delay_us * 2).min(50_000),
        };
        (next != self).then_some(next)
    }
}

/// Random delays drawn for every run at one level, from the call sites of
/// the runs seen before amplification began.
pub struct NoiseSource {
    pub level: Level,
    seen: Vec<Run>,
    rng: rand_chacha::ChaCha8Rng,
}

impl NoiseSource {
    pub fn new(level: Level, seen: Vec<Run>, seed: u64) -> NoiseSource {
        NoiseSource { level, seen, rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed) }
    }

    /// The delays for the next run.
    pub fn draw(&mut self) -> Vec<Noise> {
        let seen: Vec<&Run> = self.seen.iter().collect();
        draw(&seen, self.level, &mut self.rng)
    }
}

/// Draws the noise for one run from the call sites of `seen` runs.
pub fn draw(seen: &[&Run], level: Level, rng: &mut impl rand::Rng) -> Vec<Noise> {
    let mut sites: Vec<Site> = seen
        .iter()
        .flat_map(|r| {
            r.calls.iter().map(|c| Site { func: c.func, role: c.role, instance: c.instance })
        })
        .collect();
    sites.sort();
    sites.dedup();
    let mut out: Vec<Noise> = Vec::new();
    for site in sites.choose_multiple(rng, level.sites) {
        out.push(Noise {
            site: *site,
            point: Point::Entry,
            delay_us: rng.random_range(50..=level.max_delay_us),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        testing::{call, run},
    };

    #[test]
    fn draws_distinct_seen_sites_within_bounds() {
        let calls = (1..=10).map(|i| call(0, 0, i, 0, Some(1), Some(0))).collect();
        let run = run(1, Label::Pass, calls, 1);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let noise = draw(&[&run], Level { sites: 4, max_delay_us: 300 }, &mut rng);
        assert_eq!(noise.len(), 4);
        // Distinct: a set keeps one of each, in any order.
        let sites: std::collections::BTreeSet<Site> = noise.iter().map(|n| n.site).collect();
        assert_eq!(sites.len(), 4);
        assert!(noise.iter().all(|n| (50..=300).contains(&n.delay_us) && n.site.instance <= 10));
        assert!(noise.iter().all(|n| n.point == Point::Entry));
        assert_eq!(Level::START.stronger(), Some(Level { sites: 4, max_delay_us: 4_000 }));
    }
}
