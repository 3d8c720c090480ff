//! Parallel runs of a program on one host (`--jobs N`): up to N runs at
//! once, each made by a tracer of its own ([`Tracer::replica`]: its own
//! BPF object, ring and lost-event counters, its probes attached to its
//! own run's target) on an OS thread of its own, which starts the run,
//! serves its ptrace stops (the tracer of a run is one thread) and
//! records it. What to run next and what becomes of each run is decided
//! on the calling thread, one result at a time ([`Feed`]).

use std::{
    panic::AssertUnwindSafe,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
};

use crate::{
    intervene::Plan,
    model::RecordedRun,
    record::{
        fail::RunPolicy,
        tracer::{TraceError, Tracer},
    },
    symbols::Names,
    sys::spawn::Target,
};

/// One run to make: its number and what it carries.
pub struct Job {
    pub id: u32,
    /// None: observed, as [`Tracer::observe`] makes it.
    pub plan: Option<Plan>,
}

/// A run made, by its number.
pub struct Done {
    pub id: u32,
    pub run: Result<RecordedRun, TraceError>,
}

/// What to run next and what to do with each run made, on the calling
/// thread.
pub trait Feed {
    /// The next run to start; None: no more (for now: it is asked again
    /// after each run ends).
    fn next(&mut self) -> Option<Job>;
    /// A run ended (in the order runs end, not by number). An error stops
    /// the runs: none is started after it, the ones in flight end and
    /// are handed to `done` still.
    fn done(&mut self, done: Done) -> anyhow::Result<()>;
}

/// The tracers of parallel runs: one per run in flight.
pub struct Jobs {
    tracers: Vec<Tracer<Names>>,
}

impl Jobs {
    /// `n` replicas of `tracer` ([`Tracer::replica`]).
    pub fn new(tracer: &Tracer, n: u32) -> Result<Jobs, TraceError> {
        let tracers = (0..n).map(|_| tracer.replica()).collect::<Result<_, _>>()?;
        Ok(Jobs { tracers })
    }

    /// Tracers made elsewhere (a fleet's worker makes them from the
    /// session's spec, [`Tracer::from_spec`]); at least one.
    pub fn from_tracers(tracers: Vec<Tracer<Names>>) -> Jobs {
        Jobs { tracers }
    }

    /// The functions the tracers trace (the first one's: they are alike).
    pub fn functions(&self) -> &[crate::model::Function] {
        self.tracers.first().map_or(&[], |t| t.functions())
    }

    /// Brings the tracers in line with `tracer` as it is now: the same
    /// function table (made again when it changed) and settings
    /// ([`Tracer::follow_settings`]).
    pub fn follow(&mut self, tracer: &Tracer) -> Result<(), TraceError> {
        if self.tracers.iter().any(|t| t.functions() != tracer.functions()) {
            *self = Jobs::new(tracer, self.tracers.len() as u32)?;
        }
        for t in &mut self.tracers {
            t.follow_settings(tracer);
        }
        Ok(())
    }

    /// How many runs may be in flight at once.
    pub fn len(&self) -> usize {
        self.tracers.len()
    }

    /// Never: there is at least one tracer.
    pub fn is_empty(&self) -> bool {
        self.tracers.is_empty()
    }

    /// Makes the runs `feed` asks for, up to [`Jobs::len`] at once, until
    /// it asks for none while none is in flight. Set `cancel` and no run
    /// starts any more; the ones in flight are killed and kept, marked
    /// incomplete ([`Tracer::observe`]). The first error `feed.done`
    /// returns is returned once every run in flight has ended.
    pub fn run(
        &mut self,
        target: &Target,
        policy: &RunPolicy,
        cancel: &AtomicBool,
        feed: &mut dyn Feed,
    ) -> anyhow::Result<()> {
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Mutex::new(job_rx);
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let n = self.tracers.len();
        std::thread::scope(|scope| {
            let mut spawned = Ok(());
            for (i, tracer) in self.tracers.iter_mut().enumerate() {
                let (jobs, done) = (&job_rx, done_tx.clone());
                let worker = move || {
                    // Until the channel closes: no more runs.
                    while let Some(job) = next_job(jobs) {
                        // A panic is this run's error: the calling thread
                        // counts every run in flight back, and would
                        // otherwise wait for this one forever.
                        let made = std::panic::catch_unwind(AssertUnwindSafe(|| match &job.plan {
                            None => tracer.observe(target, job.id, policy, cancel),
                            Some(plan) => tracer.intervene(target, job.id, policy, plan, cancel),
                        }));
                        let run = made.unwrap_or_else(|p| {
                            let what = p
                                .downcast_ref::<&str>()
                                .map(|s| (*s).to_owned())
                                .or_else(|| p.downcast_ref::<String>().cloned())
                                .unwrap_or_else(|| "a panic".to_owned());
                            Err(TraceError::JobPanicked { id: job.id, what })
                        });
                        if done.send(Done { id: job.id, run }).is_err() {
                            break;
                        }
                    }
                };
                let thread = std::thread::Builder::new().name(format!("aid-job-{}", i + 1));
                if let Err(e) = thread.spawn_scoped(scope, worker) {
                    spawned = Err(anyhow::Error::new(e).context("starting the runs' threads"));
                    break;
                }
            }
            drop(done_tx);
            let outcome = spawned.and_then(|()| feed_runs(n, &job_tx, &done_rx, cancel, feed));
            // Every worker ends its run in flight, finds the channel
            // closed and returns; the scope waits for them.
            drop(job_tx);
            outcome
        })
    }
}

/// The next job, or None once the channel is closed.
fn next_job(jobs: &Mutex<mpsc::Receiver<Job>>) -> Option<Job> {
    // A worker that panicked holding the lock took no job with it: the
    // receiver is still sound.
    jobs.lock().unwrap_or_else(PoisonError::into_inner).recv().ok()
}

/// The calling thread's loop: keeps up to `n` runs in flight, hands each
/// result to `feed`, and returns its first error once none is in flight.
fn feed_runs(
    n: usize,
    jobs: &mpsc::Sender<Job>,
    done: &mpsc::Receiver<Done>,
    cancel: &AtomicBool,
    feed: &mut dyn Feed,
) -> anyhow::Result<()> {
    let mut in_flight = 0;
    let mut failed: Option<anyhow::Error> = None;
    loop {
        while failed.is_none() && in_flight < n && !cancel.load(Ordering::Relaxed) {
            let Some(job) = feed.next() else { break };
            jobs.send(job).map_err(|_| anyhow::anyhow!("the runs' threads have ended"))?;
            in_flight += 1;
        }
        if in_flight == 0 {
            return failed.map_or(Ok(()), Err);
        }
        let Ok(d) = done.recv() else {
            anyhow::bail!("the runs' threads ended with {in_flight} run(s) in flight");
        };
        in_flight -= 1;
        if let Err(e) = feed.done(d)
            && failed.is_none()
        {
            failed = Some(e);
        }
    }
}
