//! Noise with no probe at the racing statement (`--amplify one-cpu`,
//! [`NoiseAction::OneCpu`]): the target runs on one CPU, and its threads
//! get random priorities, drawn again 1 to 50 ms apart (log-uniform).
//! On one CPU only one thread runs at a time, and a thread of nice 19
//! gets the CPU only when no thread of nice 0 wants it (1.5 % of the
//! time when one does): each new draw switches the running thread
//! wherever it is, between two statements of one function as well as at
//! a call, and a thread drawn low stays starved until the next draw —
//! rr's chaos mode, carried out by the kernel's scheduler. Only the
//! target's threads are touched (by the tids of `/proc/PID/task`).

use std::time::{Duration, Instant};

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use crate::{model::NoiseAction, sys::sched};

/// The shortest time between two draws of the priorities.
pub const SHORTEST_MS: f64 = 1.0;
/// The longest time between two draws of the priorities.
pub const LONGEST_MS: f64 = 50.0;
/// The nice value of a thread drawn low.
pub const LOW_NICE: i32 = 19;

/// One run's single-CPU noise, as it goes.
pub struct Shuffler {
    rng: ChaCha8Rng,
    next: Instant,
    /// How many times the priorities were drawn.
    pub draws: u32,
}

impl Shuffler {
    /// For a run whose noise includes `action` (a [`NoiseAction::OneCpu`]):
    /// pins `pid`, held before its exec, to the action's CPU. None for
    /// any other noise.
    pub fn start(pid: u32, action: NoiseAction) -> Option<std::io::Result<Shuffler>> {
        let NoiseAction::OneCpu { cpu, seed } = action else { return None };
        Some(sched::pin(pid, cpu).map(|()| Shuffler {
            rng: ChaCha8Rng::seed_from_u64(seed),
            next: Instant::now(),
            draws: 0,
        }))
    }

    /// Draws the priorities of `pid`'s threads again when it is time.
    pub fn tick(&mut self, pid: u32) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        for tid in crate::sys::proc::thread_ids(pid).unwrap_or_default() {
            let nice = if self.rng.random_bool(0.5) { 0 } else { LOW_NICE };
            if let Err(e) = sched::set_nice(tid, nice) {
                log::debug!("thread {tid}: nice {nice}: {e}");
            }
        }
        self.draws += 1;
        let ms = (self.rng.random_range(SHORTEST_MS.ln()..=LONGEST_MS.ln())).exp();
        self.next = now + Duration::from_secs_f64(ms / 1e3);
    }
}
