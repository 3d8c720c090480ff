//! Following a process that is already running: the event stream drained
//! into the recorder at every look, the kernel's lost-event counters read
//! into the loss log, and — with a unit function — each finished
//! invocation cut out as a run. `attach` records with it and the service
//! run source of `debug` observes and intervenes with it.

use std::time::Duration;

use aid_common::Event;

use crate::{
    bpf::{EventStream, Lost, ProbeError, Probes, monotonic_ns},
    model::{
        EventRow, FuncId, Function, Label, Outcome, RecordedRun, Run, Thread, calls_from_rows,
    },
    record::{
        fail::{ReturnCheck, failure_reason},
        lost::{self, LossLog},
        recorder::Recorder,
        units::Splitter,
    },
};

pub struct Follower<'t> {
    recorder: Recorder<'t>,
    stream: &'t EventStream,
    functions: &'t [Function],
    /// Monotonic ns at which tracing began: time zero of the process.
    start_ns: u64,
    losses: LossLog,
    last_look_ns: u64,
    /// A unit (or the whole recording) failed when one of these holds of
    /// a return value in it.
    checks: Vec<ReturnCheck>,
    splitter: Option<Splitter>,
    next_id: u32,
    /// Events taken from the stream and not recorded yet (at most a step
    /// and a batch, [`EventStream::take_upto`]), and the next one to record.
    pending: Vec<Event>,
    next: usize,
    /// Events the look under way still has to take from the stream: those
    /// drained before it began, so that a consumer behind the probes
    /// records a backlog step by step and a look still ends.
    owed: usize,
    /// The last event recorded (monotonic ns).
    last_ts: u64,
    /// Events taken from the stream in all.
    taken: u64,
    /// When the probes began to be removed (process time): a unit or a
    /// window that ends later may lack the calls of probes removed first.
    detached_ns: Option<u64>,
}

/// Events recorded in one step of a look. A look that took a large
/// backlog records it step by step, and `attach` takes the units (or
/// windows) finished after each step, so what is held at once beside the
/// backlog is one step's rows, not the backlog's: under a stall, with the
/// whole backlog recorded at once, an attach on the busy service reached
/// 145 MiB of anonymous memory (CPU-bound programs on both cores), against
/// 17 MiB unloaded (`services::a_busy_attach_keeps_agent_memory_bounded`).
pub const LOOK_STEP: usize = 16_384;

impl<'t> Follower<'t> {
    /// `start_ns`: monotonic time zero of the recording; `attached_ns`: when
    /// the last probe was attached (process time), before which units are
    /// only partly traced. Without a `unit` the whole recording is one run.
    pub fn new(
        recorder: Recorder<'t>,
        stream: &'t EventStream,
        functions: &'t [Function],
        start_ns: u64,
        attached_ns: u64,
        unit: Option<FuncId>,
        checks: Vec<ReturnCheck>,
    ) -> Follower<'t> {
        let splitter = unit.map(|u| Splitter::new(u, checks.clone(), attached_ns));
        Follower {
            recorder,
            stream,
            functions,
            start_ns,
            losses: LossLog::default(),
            last_look_ns: 0,
            checks,
            splitter,
            next_id: 1,
            pending: Vec::new(),
            next: 0,
            owed: 0,
            last_ts: 0,
            taken: 0,
            detached_ns: None,
        }
    }

    /// Judges a unit again from its calls, after values the agent forced
    /// its calls to return were written into them (the unit was judged on
    /// the values the probes saw, before the agent changed them).
    pub fn rejudge(&self, run: &mut Run) {
        if let Some(s) = &self.splitter {
            let (label, reason) = s.judge(&run.calls, self.functions);
            run.label = label;
            run.outcome.reason = reason;
        }
    }

    /// Monotonic ns of the process' time zero.
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Now, in process time.
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.start_ns)
    }

    /// `--context`: a unit's window opens this long before its entry.
    pub fn set_context(&mut self, context: Duration) {
        if let Some(s) = self.splitter.as_mut() {
            s.set_context(context.as_nanos() as u64);
        }
    }

    /// Units starting within `d` of the attachment are left out (see
    /// [`Splitter::warm_up`]).
    pub fn warm_up(&mut self, d: Duration) {
        if let Some(s) = self.splitter.as_mut() {
            s.warm_up(d.as_nanos() as u64);
        }
    }

    /// Rows held for units that may still need them (0 without a unit
    /// function).
    pub fn held_rows(&self) -> usize {
        self.splitter.as_ref().map_or(0, Splitter::held)
    }

    /// Drains the events delivered so far and the lost-event counters;
    /// with a unit function the rows go to the splitter at once.
    pub fn look(&mut self, probes: &mut Probes) -> Result<(), ProbeError> {
        while self.look_step(probes)? {}
        Ok(())
    }

    /// One step of a look: up to [`LOOK_STEP`] events recorded (a step's
    /// worth taken from the stream when none taken is left), and the
    /// lost-event counters read. True while taken events remain or the
    /// look still owes some drained before it began: the caller takes
    /// what is finished ([`Follower::settled_ns`] stays behind the events
    /// recorded) and steps again.
    pub fn look_step(&mut self, probes: &mut Probes) -> Result<bool, ProbeError> {
        if self.next >= self.pending.len() {
            if self.owed == 0 {
                self.owed = self.stream.queued();
            }
            self.pending = self.stream.take_upto(LOOK_STEP);
            self.owed = if self.pending.is_empty() {
                0
            } else {
                self.owed.saturating_sub(self.pending.len())
            };
            self.next = 0;
            self.taken += self.pending.len() as u64;
        }
        let end = (self.next + LOOK_STEP).min(self.pending.len());
        self.recorder.push(&self.pending[self.next..end]);
        if let Some(last) = self.pending[self.next..end].last() {
            self.last_ts = last.ts_ns;
        }
        self.next = end;
        if self.next >= self.pending.len() {
            self.pending = Vec::new();
            self.next = 0;
        }
        let more = self.next < self.pending.len() || self.owed > 0;
        if let Some(s) = self.splitter.as_mut() {
            s.push(self.recorder.take_rows());
        }
        let lost = probes.take_lost()?;
        // After the read: every loss counted lies before `now`.
        let now = self.now_ns();
        self.losses.record(self.last_look_ns, now, lost);
        self.last_look_ns = now;
        Ok(more)
    }

    /// Events taken from the stream so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// `settle` before the moment up to which everything taken is
    /// recorded (process time): before now, or while taken events remain,
    /// before the last one recorded; never after the probes began to be
    /// removed ([`Follower::detached`]).
    pub fn settled_ns(&self, settle: Duration) -> u64 {
        let now = self.now_ns();
        let owing = self.owed > 0 || self.next < self.pending.len();
        let upto = if owing { self.last_ts.saturating_sub(self.start_ns).min(now) } else { now };
        let settled = upto.saturating_sub(settle.as_nanos() as u64);
        self.detached_ns.map_or(settled, |d| settled.min(d))
    }

    /// The probes began to be removed at `ns` (process time): what ends
    /// later is cut only by [`Follower::finish`] (units still running then
    /// count as partial).
    pub fn detached(&mut self, ns: u64) {
        self.detached_ns = Some(ns);
    }

    /// Units whose function returned at least `settle` ago and were not
    /// returned before, in order of their start, charged with the events
    /// lost while they ran.
    pub fn finished_units(&mut self, settle: Duration) -> Vec<RecordedRun> {
        let cutoff = self.settled_ns(settle);
        self.units_before(cutoff)
    }

    fn units_before(&mut self, cutoff_ns: u64) -> Vec<RecordedRun> {
        let Some(splitter) = self.splitter.as_mut() else { return Vec::new() };
        let threads = self.recorder.threads().to_vec();
        let units = splitter.complete(&threads, self.functions, cutoff_ns, &mut self.next_id);
        units
            .into_iter()
            .map(|mut u| {
                let lost = self.losses.during(u.start_ns, u.start_ns + u.run.end_ns);
                lost::charge(&mut u.run, lost);
                u.stored(self.start_ns)
            })
            .collect()
    }

    /// From now on only units that start after this moment count (those
    /// running now began before the interventions were installed).
    pub fn restart_units(&mut self) {
        let now = self.now_ns();
        if let Some(s) = self.splitter.as_mut() {
            s.restart(now);
        }
    }

    /// Units left out for being only partly traced.
    pub fn partial(&self) -> u64 {
        self.splitter.as_ref().map_or(0, |s| s.partial)
    }

    /// Without a unit function, a time window closed at `cutoff_ns`
    /// (process time): the rows recorded before it, taken out of the
    /// recorder, and the threads known now.
    pub fn take_rows_before(&mut self, cutoff_ns: u64) -> (Vec<EventRow>, Vec<Thread>) {
        let rows = self.recorder.take_rows_before(cutoff_ns);
        (rows, self.recorder.threads().to_vec())
    }

    /// Losses counted in intervals that overlap `start_ns..=end_ns`.
    pub fn lost_during(&self, start_ns: u64, end_ns: u64) -> Lost {
        self.losses.during(start_ns, end_ns)
    }

    /// The child processes the followed process started since the last
    /// call (pids): aid traces the process it attached to only.
    pub fn take_children(&mut self) -> Vec<u32> {
        self.recorder.take_children()
    }

    /// Every event lost so far.
    pub fn lost_total(&self) -> u64 {
        self.losses.total()
    }

    /// The end, once the probes are detached at `detach_ns` (process time):
    /// the last events and counters, then every unit that finished before
    /// it (units still running count as partial) — or, without a unit
    /// function, the whole recording as one run, labelled by the checks.
    pub fn finish(
        mut self,
        probes: &mut Probes,
        detach_ns: u64,
        ended: &str,
    ) -> Result<Finished, ProbeError> {
        // What was taken first, then the rest of the ring, in steps.
        self.look(probes)?;
        for step in self.stream.flush().chunks(LOOK_STEP) {
            self.recorder.push(step);
            if let Some(s) = self.splitter.as_mut() {
                s.push(self.recorder.take_rows());
            }
        }
        self.look(probes)?;
        let end = self.last_look_ns;
        if self.splitter.is_some() {
            let units = self.units_before(detach_ns);
            if let Some(splitter) = self.splitter.as_mut() {
                splitter.count_unfinished(detach_ns);
            }
            return Ok(Finished {
                runs: units,
                partial: self.partial(),
                partial_at_end: self.splitter.as_ref().map_or(0, |s| s.partial_at_end),
                lost: self.losses.total(),
            });
        }
        let total = self.losses.total();
        let lost = self.losses.during(0, end);
        let start_ns = self.start_ns;
        let recorded = self.recorder.finish();
        let calls = calls_from_rows(&recorded.rows);
        let (label, reason) = match failure_reason(&calls, &self.checks, self.functions) {
            Some(r) => (Label::Fail, r),
            None => (Label::Pass, format!("traced for {:.1} s ({ended})", end as f64 / 1e9)),
        };
        let mut run = Run {
            id: 1,
            label,
            outcome: Outcome { wall_ns: end, reason, ..Default::default() },
            lost_events: 0,
            lost_thread_records: 0,
            complete: true,
            threads: recorded.threads,
            calls,
            end_ns: end,
            interventions: Vec::new(),
            noise: Vec::new(),
            pauses: Vec::new(),
        };
        lost::charge(&mut run, lost);
        let whole = RecordedRun {
            host: None,
            run,
            rows: recorded.rows,
            start_ns,
            orphan_exits: recorded.orphan_exits,
            stdout: String::new(),
            stderr: String::new(),
            probe_errors: 0,
            notes: Vec::new(),
            sync_steps: Vec::new(),
            hang: None,
        };
        Ok(Finished { runs: vec![whole], partial: 0, partial_at_end: 0, lost: total })
    }
}

/// What was left when following ended.
pub struct Finished {
    /// The last units (or the whole recording as one run).
    pub runs: Vec<RecordedRun>,
    /// Units left out for being only partly traced...
    pub partial: u64,
    /// ...of which this many were still running when the probes were
    /// removed (the others began before every probe was attached).
    pub partial_at_end: u64,
    /// Every event lost while following.
    pub lost: u64,
}
