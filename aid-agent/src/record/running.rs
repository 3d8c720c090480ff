//! A process already running, followed by the tracer
//! ([`super::tracer::Tracer::follow`]): its follower, the return address
//! repairs its threads stop for when it throws, the stops of interventions
//! served, and its threads let go.

use std::collections::BTreeSet;

use nix::unistd::Pid;

use crate::{
    bpf::{ProbeError, Probes},
    intervene::control::{Controller, Flow, Served, StopState},
    model::Function,
    record::follow::{Finished, Follower},
    sys::ptrace::{self, ControlError},
};

/// A running process being recorded: the follower of its events and units,
/// and the probes and stop state to intervene on it with.
pub struct Running<'t> {
    pub(super) pid: u32,
    pub(super) threads: usize,
    pub(super) probes: &'t mut Probes,
    pub(super) stops: &'t mut StopState,
    pub(super) functions: &'t [Function],
    pub(super) follower: Follower<'t>,
    /// The process throws: its threads, traced with ptrace since
    /// following began, whose stops for return address repairs each look
    /// serves (`intervene/returns.rs`). Taken while interventions serve
    /// them instead.
    pub(super) repairing: Option<BTreeSet<Pid>>,
    /// When every probe was removed ([`Running::detach`]).
    pub(super) detached_ns: Option<u64>,
}

impl<'t> Running<'t> {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Threads the process had when following it began.
    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn functions(&self) -> &'t [Function] {
        self.functions
    }

    pub fn probes(&mut self) -> &mut Probes {
        self.probes
    }

    pub fn follower(&mut self) -> &mut Follower<'t> {
        &mut self.follower
    }

    /// Serves the threads waiting for a return address repair, then
    /// drains events and lost-event counters.
    pub fn look(&mut self) -> Result<(), ProbeError> {
        self.serve_repairs();
        self.follower.look(self.probes)
    }

    /// One step of a look ([`Follower::look_step`]): true while events
    /// taken remain to be recorded.
    pub fn look_step(&mut self) -> Result<bool, ProbeError> {
        self.serve_repairs();
        self.follower.look_step(self.probes)
    }

    /// How often to look: often enough, when the process throws, that a
    /// thread stopped for a repair waits no longer than an intervened
    /// unit's look.
    pub fn look_every(&self) -> std::time::Duration {
        if self.repairing.is_some() {
            crate::sys::poll::INTERVENED_UNIT_LOOK
        } else {
            crate::sys::poll::UNIT_LOOK
        }
    }

    /// Serves every stop waiting now, without waiting for more.
    fn serve_repairs(&mut self) {
        let Some(traced) = self.repairing.take() else { return };
        let mut controller =
            Controller { probes: self.probes, functions: self.functions, state: self.stops };
        match controller.serve(self.pid, traced.clone(), &mut |_| Flow::Stop) {
            Ok(served) => self.repairing = Some(served.traced),
            Err(e) => {
                log::warn!("serving the repairs of pid {}: {e}", self.pid);
                self.repairing = Some(traced);
            }
        }
    }

    /// Ends the repairs of a process that throws. Every thread is
    /// stopped, the probes are removed while none runs, and each slot that
    /// still holds the trampoline gets its return address back for good,
    /// so no exception meets the trampoline once aid lets the threads go
    /// (the returns of those frames are not reported). Nothing to do for a
    /// process that does not throw.
    pub fn stop_repairs(&mut self) {
        self.serve_repairs();
        let Some(traced) = self.repairing.take() else { return };
        let signal = self.stops.stop_signal();
        let probes = &mut *self.probes;
        let mut stopped = Vec::new();
        for &tid in &traced {
            let ours = &mut |t| probes.take_pending(t).is_some();
            if let Some(pass) = ptrace::stop_thread(tid, signal, ours) {
                stopped.push((tid, pass));
            }
        }
        let trampoline = crate::intervene::returns::trampoline(self.pid);
        // The shadow stacks are read before the maps go with the probes.
        let shadows: Vec<_> =
            stopped.iter().map(|(tid, _)| probes.shadow(tid.as_raw() as u32)).collect();
        probes.detach_all();
        for ((tid, pass), shadow) in stopped.into_iter().zip(shadows) {
            if let (Some(shadow), Some(trampoline), Ok(regs)) =
                (shadow, trampoline, nix::sys::ptrace::getregs(tid))
            {
                let mut stack = crate::intervene::returns::Traced(tid);
                let raw = tid.as_raw() as u32;
                if let Err(e) = self.stops.unhijack(raw, regs.rsp, &shadow, trampoline, &mut stack)
                {
                    log::warn!("thread {tid}: putting its return addresses back: {e}");
                }
            }
            let _ = nix::sys::ptrace::detach(tid, pass);
        }
    }

    /// The threads traced for repairs, for interventions to serve (None:
    /// the process does not throw, interventions seize it themselves).
    pub fn take_traced(&mut self) -> Option<BTreeSet<Pid>> {
        self.repairing.take()
    }

    /// After interventions: whether the threads they served go back to
    /// serving repairs (the process throws) rather than being released.
    pub fn keeps_traced(&mut self, traced: BTreeSet<Pid>) -> Option<BTreeSet<Pid>> {
        if self.probes.repairs_unwind() {
            self.repairing = Some(traced);
            None
        } else {
            Some(traced)
        }
    }

    /// Serves the stops of the `traced` threads until the process ends or
    /// `tick` (given the follower and the probes) says stop.
    pub fn serve(
        &mut self,
        traced: BTreeSet<Pid>,
        tick: &mut dyn FnMut(&mut Follower<'t>, &mut Probes) -> Flow,
    ) -> Result<Served, ControlError> {
        let follower = &mut self.follower;
        let mut controller =
            Controller { probes: self.probes, functions: self.functions, state: self.stops };
        controller.serve(self.pid, traced, &mut |probes| tick(follower, probes))
    }

    /// Stops tracing the `traced` threads with ptrace; the process keeps
    /// running.
    pub fn release(&mut self, traced: &BTreeSet<Pid>) {
        let probes = &mut *self.probes;
        ptrace::release_running(traced, self.stops.stop_signal(), &mut |tid| {
            probes.take_pending(tid).is_some()
        });
    }

    /// Removes every probe, then collects what is left (see
    /// [`Follower::finish`]); `ended` says why, for a whole-recording run.
    pub fn finish(mut self, ended: &str) -> Result<Finished, ProbeError> {
        let detach_ns = self.detach();
        self.follower.finish(self.probes, detach_ns, ended)
    }

    /// Removes every probe (once: later calls change nothing); when it
    /// was done, in process time. Events still in the ring are taken by
    /// later looks and by [`Running::finish`].
    pub fn detach(&mut self) -> u64 {
        self.detach_by(None)
    }

    /// [`Running::detach`], with the recording ending at `end_ns` (process
    /// time) when that came first: a `-d` deadline that the looks noticed
    /// late. What ends after it is cut as if still running then.
    pub fn detach_by(&mut self, end_ns: Option<u64>) -> u64 {
        if let Some(ns) = self.detached_ns {
            return ns;
        }
        let now = self.follower.now_ns();
        let ns = end_ns.map_or(now, |e| e.min(now));
        self.follower.detached(ns);
        self.stop_repairs();
        self.probes.detach_all();
        self.detached_ns = Some(ns);
        ns
    }
}
