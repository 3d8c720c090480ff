//! Noise for every thread at one point ([`NoiseAt::Every`](crate::model::NoiseAt::Every)): how many
//! arrivals a run holds there, how long a delay there lasts, and how long
//! a thread demoted there with the rest of its pool waits for the others
//! (`noise.rs` draws it).

/// The least holds per run of noise for every thread at one point
/// ([`NoiseAt::Every`](crate::model::NoiseAt::Every)): a point inside a loop is reached thousands of
/// times, and each hold stops a thread. A run holds as many arrivals as
/// the most threads a run seen had, between this and
/// [`EVERY_HOLDS_MAX`] ([`every_holds`]).
pub const EVERY_HOLDS: u32 = 8;

/// The most holds per run of noise for every thread at one point.
pub const EVERY_HOLDS_MAX: u32 = 128;

/// How many arrivals noise for every thread at one point holds in a run,
/// in a program whose runs had at most `threads` threads: each thread of
/// a pool once (a window that any thread of the pool may close, as a
/// setter that stores both values closes the window between another's
/// two stores, needs every one of them held), and at least
/// [`EVERY_HOLDS`] for a point inside a loop of a few threads.
pub fn every_holds(threads: u32) -> u32 {
    threads.clamp(EVERY_HOLDS, EVERY_HOLDS_MAX)
}

/// The longest delay of noise for every thread at one point, whatever the
/// level: its holds add up over the threads that reach it.
pub const EVERY_MAX_US: u64 = 16_000;

/// The priority of the threads noise for every thread at one point holds
/// in a PCT run, and in every run of the starvation level
/// ([`NoiseAction::Demote`](crate::model::NoiseAction::Demote)): the lowest of a change point.
/// Each is let go only when no other thread of the target can run (or
/// after [`every_demote_us`]), so the whole pool stands inside the
/// window while the rest of the program goes as far as it can without it:
/// a reader that checks a two-stage update needs every one of a hundred
/// writers held between their stages until it has read, however long
/// starting it takes, which a delay of a fixed length gives only when it
/// outlasts all of that.
pub const EVERY_PRIORITY: u32 = 1;

/// How many whole runs without noise a thread held at one point with the
/// rest of its pool ([`EVERY_PRIORITY`]) waits at most for the others to
/// go as far as they can, beyond the level's longest hold.
///
/// twostage_100_bad (SCTBench, outside the corpus) fails only when its
/// reader runs while each of a hundred writers stands between its two
/// stages; `main` starts the reader after the hundred writers. Traced
/// without noise a run took 7.7 ms; in the 6 runs of a session that held
/// every writer at the point between the stages, the reader began 8.6 to
/// 65 ms into the run (the stops slow `main` down), after the first writer
/// had been let go (a delay of at most 16 ms, or a demotion bound by the
/// level's longest hold): none failed, and 3 sessions in 4 saw no failure
/// in 440 runs (2026-12-07, on e74a29d).
pub const EVERY_DEMOTE_RUNS: u64 = 8;

/// The longest a pool's hold at one point lasts below the starvation
/// level: that level's longest hold (1 s, the last of `noise::LADDER`).
pub const EVERY_DEMOTE_MAX_US: u64 = 1_000_000;

/// The most a thread held with the rest of its pool at one point waits
/// (its [`NoiseAction::Demote`](crate::model::NoiseAction::Demote) bound) at a level whose longest hold is
/// `level_max_us`, after runs without noise of at most `natural_us`:
/// [`EVERY_DEMOTE_RUNS`] such runs beyond the level's longest hold, and
/// no more than the longer of that hold and [`EVERY_DEMOTE_MAX_US`]. A hold is
/// let go sooner once no other thread can run, so the bound costs time only
/// in a program whose threads spin.
pub fn every_demote_us(level_max_us: u64, natural_us: u64) -> u64 {
    let bound = level_max_us.max(EVERY_DEMOTE_MAX_US);
    (level_max_us + EVERY_DEMOTE_RUNS * natural_us).min(bound)
}
