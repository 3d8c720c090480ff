//! Debugging a program aid starts itself: every run is a fresh process,
//! observed or intervened on from its exec to its end, so any thread can
//! be intervened on and a rare failure can be amplified.

use std::{collections::BTreeMap, sync::atomic::AtomicBool};

use super::source::RunSource;
use crate::explain::{objects::Globals, watch};
use crate::{
    fleet::coordinator::Fleet,
    intervene::{Plan, Reach},
    model::{Function, Noise, RecordedRun},
    record::{
        fail::RunPolicy,
        jobs::{Done, Feed, Job, Jobs},
        tracer::Tracer,
        watchpoints::{WatchDelay, WatchedRun, Watcher, watched_run},
    },
    sys::spawn::Target,
};

/// Runs of a program, one process each.
pub struct ProgramSource<'t> {
    tracer: &'t mut Tracer,
    target: &'t Target,
    policy: &'t RunPolicy,
    next_id: u32,
    /// (failed, made) of the untraced runs before the session.
    untraced: Option<(u32, u32)>,
    /// The campaign can debug again with fewer functions traced when the
    /// probes hide the failure ([`RunSource::may_trace_fewer`]).
    fewer: bool,
    makers: Makers<'t>,
}

/// Who makes the runs: one of three for a whole session, so that no
/// method has to ask which of the others is also there.
enum Makers<'t> {
    /// This host: observed runs `jobs` at once (`--jobs`), by the tracers
    /// of `parallel` (made at the first batch); intervened runs one at a
    /// time (`intervene_jobs` below says why).
    Here { jobs: u32, parallel: Option<Jobs> },
    /// `--fleet`: observed runs and rounds' batches made by the fleet's
    /// workers, as many at once as they make together ([`Fleet::jobs`]).
    Fleet(&'t mut Fleet),
    /// `--amplify-watch`: one run at a time on this host, watched by the
    /// agent's own watchpoints, which the workers of a fleet and the
    /// tracers of `--jobs` do not have.
    Watched(Amplify),
}

/// Failure amplification with a watchpoint: a thread is held right after
/// it touches the object (`--amplify-watch`).
#[derive(Clone, Debug)]
pub struct WatchAmplify {
    /// The object, named as `watch` names it (`account`, `pool+0x20`,
    /// `main:make_cell#1.ret`).
    pub object: String,
    pub delay: WatchDelay,
}

/// Where `--amplify-watch` stands: the object is located with the first
/// run (made without), then watched in every later run, observed or
/// intervened on, so that rounds are judged under the conditions the
/// observations were made in.
enum Amplify {
    Pending(WatchAmplify),
    Ready(Box<Watcher>),
}

impl<'t> ProgramSource<'t> {
    pub fn new(tracer: &'t mut Tracer, target: &'t Target, policy: &'t RunPolicy) -> Self {
        ProgramSource {
            tracer,
            target,
            policy,
            next_id: 1,
            untraced: None,
            fewer: false,
            makers: Makers::Here { jobs: 1, parallel: None },
        }
    }

    /// Who makes the runs: `fleet`'s workers (`--fleet`), this host one
    /// run at a time watched for amplification (`--amplify-watch`, with
    /// a delay after each access of `watch.object`, from the second run
    /// on), or this host with `jobs` observed runs at once (`--jobs`).
    /// The first two exclude each other and `--jobs` (the command line
    /// says so first, in its own words).
    pub fn made_by(
        mut self,
        jobs: u32,
        fleet: Option<&'t mut Fleet>,
        watch: Option<WatchAmplify>,
    ) -> anyhow::Result<Self> {
        self.makers = match (fleet, watch) {
            (Some(_), Some(_)) => {
                anyhow::bail!("--amplify-watch watches runs on this host: not with --fleet")
            }
            (None, Some(_)) if jobs > 1 => {
                anyhow::bail!("--amplify-watch watches one run at a time: not with --jobs")
            }
            (Some(fleet), None) => Makers::Fleet(fleet),
            (None, Some(watch)) => Makers::Watched(Amplify::Pending(watch)),
            (None, None) => Makers::Here { jobs: jobs.max(1), parallel: None },
        };
        Ok(self)
    }

    /// Observed runs with `noises` made on the fleet, kept by number.
    fn on_fleet(
        &mut self,
        noises: &[Vec<Noise>],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Option<Vec<RecordedRun>>> {
        let Makers::Fleet(fleet) = &mut self.makers else { return Ok(None) };
        let mut batch = Batch::observed(self.next_id, noises);
        fleet.run(self.tracer, self.target, self.policy, cancel, &mut batch)?;
        self.next_id += batch.started;
        Ok(Some(batch.ended.into_values().collect()))
    }

    /// The untraced runs made before the session: (failed, made).
    #[must_use]
    pub fn with_untraced(mut self, untraced: Option<(u32, u32)>) -> Self {
        self.untraced = untraced.filter(|&(_, n)| n > 0);
        self
    }

    /// Observing ends, for a session with fewer functions traced, when
    /// the probes hide the failure.
    #[must_use]
    pub fn with_fewer(mut self, fewer: bool) -> Self {
        self.fewer = fewer;
        self
    }

    /// After the first run: the object located in it, the watcher ready.
    fn locate(&mut self, base: &RecordedRun) -> anyhow::Result<()> {
        let Makers::Watched(Amplify::Pending(a)) = &self.makers else { return Ok(()) };
        let globals = Globals::load(&self.target.program);
        let objects = watch::resolve(
            self.tracer.functions(),
            &base.run,
            globals.as_ref(),
            std::slice::from_ref(&a.object),
        )
        .map_err(|e| anyhow::anyhow!("--amplify-watch {}: {e}", a.object))?;
        let watcher = Watcher::new(&self.target.program, objects, Some(a.delay))?;
        self.makers = Makers::Watched(Amplify::Ready(Box::new(watcher)));
        Ok(())
    }

    /// One run with `plan`, watched for amplification when asked.
    fn run(&mut self, id: u32, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        match &self.makers {
            Makers::Watched(Amplify::Ready(w)) => {
                Ok(watched_run(self.tracer, self.target, id, self.policy, plan, w, cancel)?.rec)
            }
            _ => Ok(self.tracer.intervene(self.target, id, self.policy, plan, cancel)?),
        }
    }

    fn next_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

impl RunSource for ProgramSource<'_> {
    fn noun(&self) -> &'static str {
        "run"
    }

    fn functions(&self) -> &[Function] {
        self.tracer.functions()
    }

    fn reach(&self) -> Reach {
        Reach::PROGRAM
    }

    fn can_amplify(&self) -> bool {
        true
    }

    fn noise_at_statements(&mut self) -> bool {
        self.tracer.set_noise_at_statements() > 0
    }

    fn untraced(&self) -> Option<(u32, u32)> {
        // Made on this host, while the fleet's workers make the traced
        // runs on theirs: the two rates say nothing of the probes.
        if matches!(self.makers, Makers::Fleet(_)) {
            return None;
        }
        self.untraced
    }

    fn may_trace_fewer(&self) -> bool {
        self.fewer
    }

    fn hint_no_failure(&self) -> String {
        format!(
            " (a run fails on: {}): aid needs to see the failure; try more --max-runs or check --fail-on",
            self.policy.texts.join(", ")
        )
    }

    fn hint_all_failed(&self) -> &'static str {
        "; check --fail-on and --timeout"
    }

    fn observe(
        &mut self,
        noise: &[Noise],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Option<RecordedRun>> {
        if let Some(mut runs) = self.on_fleet(&[noise.to_vec()], cancel)? {
            return Ok(runs.pop());
        }
        let id = self.next_id();
        let rec = if noise.is_empty() && !matches!(self.makers, Makers::Watched(Amplify::Ready(_)))
        {
            self.tracer.observe(self.target, id, self.policy, cancel)?
        } else {
            let plan = Plan::default().with_noise(noise);
            self.run(id, &plan, cancel)?
        };
        self.locate(&rec)?;
        Ok(Some(rec))
    }

    fn jobs(&self) -> u32 {
        match &self.makers {
            Makers::Here { jobs, .. } => *jobs,
            Makers::Fleet(fleet) => fleet.jobs(),
            Makers::Watched(_) => 1,
        }
    }

    fn observe_batch(
        &mut self,
        noises: &[Vec<Noise>],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Vec<RecordedRun>> {
        if let Some(runs) = self.on_fleet(noises, cancel)? {
            return Ok(runs);
        }
        let (jobs, parallel) = match &mut self.makers {
            Makers::Here { jobs, parallel } if *jobs > 1 && noises.len() > 1 => (*jobs, parallel),
            _ => return super::source::one_at_a_time(self, noises, cancel),
        };
        let parallel = match parallel {
            Some(p) => p,
            None => parallel.insert(Jobs::new(self.tracer, jobs)?),
        };
        parallel.follow(self.tracer)?;
        let mut batch = Batch::observed(self.next_id, noises);
        parallel.run(self.target, self.policy, cancel, &mut batch)?;
        self.next_id += batch.started;
        Ok(batch.ended.into_values().collect())
    }

    fn begin_interventions(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    fn intervene(&mut self, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        let id = self.next_id();
        self.run(id, plan, cancel)
    }

    /// The fleet's workers' together; one at a time on this host, even
    /// with `--jobs`: on this 2-core machine a round's runs two at a time
    /// took 1.10 times the wall time of one at a time, and the others'
    /// load on the same cores changed the mechanism (2 of 12 sessions of
    /// commit-after-close confirmed only the path's second link, after
    /// 584 and 1494 runs; BENCHMARKS.md). Workers are other hosts.
    fn intervene_jobs(&self) -> u32 {
        match &self.makers {
            Makers::Fleet(fleet) => fleet.jobs(),
            Makers::Here { .. } | Makers::Watched(_) => 1,
        }
    }

    fn intervene_batch(
        &mut self,
        plans: &[Plan],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Vec<RecordedRun>> {
        let Makers::Fleet(fleet) = &mut self.makers else {
            return super::source::plans_in_turn(self, plans, cancel);
        };
        let mut batch = Batch::new(self.next_id, plans.iter().cloned().map(Some).collect());
        fleet.run(self.tracer, self.target, self.policy, cancel, &mut batch)?;
        self.next_id += batch.started;
        Ok(batch.ended.into_values().collect())
    }

    fn end_interventions(&mut self) {}

    fn watchable(&self) -> Option<&std::path::Path> {
        Some(&self.target.program)
    }

    fn watched(
        &mut self,
        id: u32,
        watcher: &Watcher,
        cancel: &AtomicBool,
    ) -> anyhow::Result<WatchedRun> {
        let plan = Plan::default();
        Ok(watched_run(self.tracer, self.target, id, self.policy, &plan, watcher, cancel)?)
    }
}

/// Runs made at once, one per plan (None: observed), numbered from
/// `first` in their order, kept by number.
struct Batch {
    plans: Vec<Option<Plan>>,
    first: u32,
    started: u32,
    ended: BTreeMap<u32, RecordedRun>,
}

impl Batch {
    fn new(first: u32, plans: Vec<Option<Plan>>) -> Batch {
        Batch { plans, first, started: 0, ended: BTreeMap::new() }
    }

    /// Observed runs, with each entry of `noises` (none: plain).
    fn observed(first: u32, noises: &[Vec<Noise>]) -> Batch {
        let plan = |n: &Vec<Noise>| (!n.is_empty()).then(|| Plan::default().with_noise(n));
        Batch::new(first, noises.iter().map(plan).collect())
    }
}

impl Feed for Batch {
    fn next(&mut self) -> Option<Job> {
        let plan = self.plans.get_mut(self.started as usize)?.take();
        let id = self.first + self.started;
        self.started += 1;
        Some(Job { id, plan })
    }

    fn done(&mut self, done: Done) -> anyhow::Result<()> {
        self.ended.insert(done.id, done.run?);
        Ok(())
    }
}
