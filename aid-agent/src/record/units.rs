//! Execution units of a live service: with `--unit FN`, each invocation of
//! FN is one run. A unit is FN's call plus the world around it
//! (docs/services.md):
//!
//! - on its own thread, what happened from `--context` before FN's entry
//!   (but not before the previous unit on that thread ended) to FN's exit;
//! - on every other thread, every call that overlaps that window, calls
//!   already running when it opened included (a compaction that began
//!   before the request and still runs is in the request's unit).
//!
//! Inside a unit the thread running FN is role 0 and any other thread of
//! process role r is role r + 1; instances count from the window's start
//! per role and function (the call another thread was already in is its
//! call 1); times are relative to the earliest row of the unit. Only the
//! unit's own thread decides its label (`--fail-if 'FN ret < 0'`,
//! [`super::fail`]): a failing request on another worker does not fail
//! this one.
//!
//! Memory is bounded by what open units can still need: rows are kept
//! from the earliest open (or not yet cut) unit's window on, plus the
//! entries of calls still running from before it; everything older is
//! dropped as units are cut. Rows arrive almost in time order (per thread
//! in order, threads interleaved by the ring buffer); each is inserted
//! where it belongs from the back, so nothing is ever re-sorted.

use std::collections::{HashMap, VecDeque};

use crate::{
    model::{
        Call, EventRow, FuncId, Function, Label, Outcome, Point, RecordedRun, Role, Run, Thread,
        calls_from_rows,
    },
    record::fail::{ReturnCheck, failure_reason},
};

/// One unit, ready to be stored as a run.
pub struct Unit {
    pub run: Run,
    pub rows: Vec<EventRow>,
    /// Process-level time (ns since attach) of the unit's time zero: its
    /// earliest row (the window's start, or the entry of a call another
    /// thread was already in).
    pub start_ns: u64,
}

impl Unit {
    /// The unit as a stored run; `attach_ns` is the monotonic time tracing
    /// started at.
    pub fn stored(&self, attach_ns: u64) -> RecordedRun {
        RecordedRun {
            host: None,
            run: self.run.clone(),
            rows: self.rows.clone(),
            start_ns: attach_ns + self.start_ns,
            orphan_exits: 0,
            stdout: String::new(),
            stderr: String::new(),
            probe_errors: 0,
            notes: Vec::new(),
            sync_steps: Vec::new(),
            hang: None,
        }
    }
}

/// A call of the unit function that has not ended yet, on one thread.
#[derive(Clone, Copy, Debug)]
struct Open {
    /// Nesting depth of the unit function (recursion counts once).
    depth: u32,
    start: u64,
    /// When the previous unit on this thread ended (0: none).
    since: u64,
}

/// A call of the unit function that ended, not cut out yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    start: u64,
    end: u64,
    tid: u32,
    since: u64,
}

type CallId = (u32, FuncId, u32);

fn call_id(r: &EventRow) -> CallId {
    (r.tid, r.func, r.instance)
}

/// Cuts units out of the rows of a live process, as they come.
pub struct Splitter {
    unit: FuncId,
    conditions: Vec<ReturnCheck>,
    /// `--context`: how far before the unit's entry its window opens.
    context_ns: u64,
    /// When the last probe was attached: units starting before it were
    /// only partly traced.
    attached_ns: u64,
    /// Units starting before this are not returned (interventions were
    /// installed after they began).
    not_before: u64,
    /// How many units were left out for being partially traced...
    pub partial: u64,
    /// ...of which this many were still running when recording stopped.
    pub partial_at_end: u64,
    /// Rows from the horizon on, in time order.
    rows: VecDeque<EventRow>,
    /// Entries dropped with the rows before the horizon whose exits were
    /// not: calls still running (or running past the horizon).
    carried: HashMap<CallId, EventRow>,
    open: HashMap<u32, Open>,
    ended: Vec<Span>,
    last_end: HashMap<u32, u64>,
}

impl Splitter {
    /// `attached_ns`: when the last probe was attached (process time).
    pub fn new(unit: FuncId, conditions: Vec<ReturnCheck>, attached_ns: u64) -> Splitter {
        Splitter {
            unit,
            conditions,
            context_ns: 0,
            attached_ns,
            not_before: attached_ns,
            partial: 0,
            partial_at_end: 0,
            rows: VecDeque::new(),
            carried: HashMap::new(),
            open: HashMap::new(),
            ended: Vec::new(),
            last_end: HashMap::new(),
        }
    }

    /// `--context`: the window opens this long before the unit's entry.
    pub fn set_context(&mut self, context_ns: u64) {
        self.context_ns = context_ns;
    }

    /// Units starting within `ns` of the probes' attachment are not
    /// returned: calls other threads were already in when the probes were
    /// attached have no entry, so those units would miss them (a
    /// compaction that began before aid attached).
    pub fn warm_up(&mut self, ns: u64) {
        self.not_before = self.not_before.max(self.attached_ns + ns);
    }

    /// From now on only units that start at or after `now_ns` are returned
    /// (the ones running now began before interventions were installed).
    pub fn restart(&mut self, now_ns: u64) {
        self.not_before = now_ns;
        self.ended.retain(|s| s.start >= now_ns);
    }

    /// Rows held now (memory bound: tests and benchmarks read it).
    pub fn held(&self) -> usize {
        self.rows.len() + self.carried.len()
    }

    /// Takes new rows (in the order the recorder produced them).
    pub fn push(&mut self, rows: Vec<EventRow>) {
        for r in rows {
            if r.func == self.unit {
                self.track_unit(&r);
            }
            let mut at = self.rows.len();
            while at > 0 && self.rows[at - 1].t_ns > r.t_ns {
                at -= 1;
            }
            self.rows.insert(at, r);
        }
    }

    fn track_unit(&mut self, r: &EventRow) {
        match r.point {
            // Entered before every probe was attached, the call may have
            // no return probe (entry probes are attached first,
            // `bpf::attach_order`), so its exit may never come: opened, it
            // would hold every later call of the thread inside it, and no
            // unit would end again. Only partly traced either way.
            Point::Entry if r.t_ns < self.attached_ns && !self.open.contains_key(&r.tid) => {
                self.partial += 1;
            }
            Point::Entry => {
                let since = self.last_end.get(&r.tid).copied().unwrap_or(0);
                let open =
                    self.open.entry(r.tid).or_insert(Open { depth: 0, start: r.t_ns, since });
                open.depth += 1;
            }
            Point::Exit => {
                let Some(open) = self.open.get_mut(&r.tid) else { return };
                open.depth -= 1;
                if open.depth > 0 {
                    return;
                }
                let Open { start, since, .. } = *open;
                self.open.remove(&r.tid);
                self.last_end.insert(r.tid, r.t_ns);
                if start >= self.not_before {
                    self.ended.push(Span { start, end: r.t_ns, tid: r.tid, since });
                }
            }
        }
    }

    /// Counts the units that had started (after the probes were attached)
    /// but will never be returned: still running at `cutoff_ns`, when the
    /// probes were removed. Units that began after it, while the probes
    /// were being removed, lie outside the recording and are not counted.
    pub fn count_unfinished(&mut self, cutoff_ns: u64) {
        let open = self
            .open
            .values()
            .filter(|o| o.start >= self.attached_ns && o.start < cutoff_ns)
            .count();
        let late = self.ended.iter().filter(|s| s.start < cutoff_ns && s.end >= cutoff_ns).count();
        self.partial += (open + late) as u64;
        self.partial_at_end += (open + late) as u64;
        self.open.clear();
        self.ended.retain(|s| s.end < cutoff_ns);
    }

    /// Units whose invocation returned before `cutoff_ns` (process time)
    /// and were not returned before, in order of their start; then drops
    /// the rows no unit can need any more.
    pub fn complete(
        &mut self,
        threads: &[Thread],
        functions: &[Function],
        cutoff_ns: u64,
        next_id: &mut u32,
    ) -> Vec<Unit> {
        let mut ready: Vec<Span> = Vec::new();
        self.ended.retain(|s| {
            let done = s.end < cutoff_ns;
            if done {
                ready.push(*s);
            }
            !done
        });
        ready.sort();
        let mut units = Vec::with_capacity(ready.len());
        // Windows open in order: one pass over the rows keeps the calls
        // running at the cursor (every thread), so cutting K units costs
        // their rows, not K times the rows before them.
        let mut running = self.carried.clone();
        let mut cursor = 0;
        for span in ready {
            let lo = span.start.saturating_sub(self.context_ns);
            while let Some(r) = self.rows.get(cursor).filter(|r| r.t_ns < lo) {
                match r.point {
                    Point::Entry => {
                        running.insert(call_id(r), r.clone());
                    }
                    Point::Exit => {
                        running.remove(&call_id(r));
                    }
                }
                cursor += 1;
            }
            let id = *next_id;
            *next_id += 1;
            units.push(self.cut(id, span, cursor, &running, threads, functions));
        }
        self.trim(cutoff_ns);
        units
    }

    /// Drops rows before the earliest window an open or future unit may
    /// have, keeping the entries of calls that run past it.
    fn trim(&mut self, cutoff_ns: u64) {
        let earliest = self
            .open
            .values()
            .map(|o| o.start)
            .chain(self.ended.iter().map(|s| s.start))
            .fold(cutoff_ns, u64::min);
        let horizon = earliest.saturating_sub(self.context_ns);
        while self.rows.front().is_some_and(|r| r.t_ns < horizon) {
            let Some(r) = self.rows.pop_front() else { break };
            match r.point {
                Point::Entry => {
                    self.carried.insert(call_id(&r), r);
                }
                Point::Exit => {
                    self.carried.remove(&call_id(&r));
                }
            }
        }
    }

    /// A unit's label and why, from the calls of its own thread.
    pub fn judge(&self, calls: &[Call], functions: &[Function]) -> (Label, String) {
        let own: Vec<Call> = calls.iter().filter(|c| c.role == 0).cloned().collect();
        match failure_reason(&own, &self.conditions, functions) {
            Some(r) => (Label::Fail, r),
            None => (Label::Pass, "no failure condition held".to_owned()),
        }
    }

    /// The unit of `span`: `first` is the first row of its window, and
    /// `running` the calls running just before it.
    fn cut(
        &self,
        id: u32,
        span: Span,
        first: usize,
        running: &HashMap<CallId, EventRow>,
        threads: &[Thread],
        functions: &[Function],
    ) -> Unit {
        let Span { start, end, tid, since } = span;
        let lo = start.saturating_sub(self.context_ns);
        // Calls other threads were in when the window opened.
        let mut before: Vec<&EventRow> = running.values().filter(|r| r.tid != tid).collect();
        before.sort_by_key(|r| (r.t_ns, r.tid, r.func, r.instance));
        let window = self
            .rows
            .range(first..)
            .take_while(|r| r.t_ns <= end)
            .filter(|r| r.tid != tid || r.t_ns > since);
        let rows: Vec<&EventRow> = before.into_iter().chain(window).collect();
        let origin = rows.first().map_or(lo, |r| r.t_ns.min(lo));
        self.build(id, (origin, start, end), tid, &rows, threads, functions)
    }

    /// The unit from its rows: `times` are (origin, unit entry, unit exit).
    fn build(
        &self,
        id: u32,
        times: (u64, u64, u64),
        tid: u32,
        window: &[&EventRow],
        threads: &[Thread],
        functions: &[Function],
    ) -> Unit {
        let (origin, start, end) = times;
        let role_of = |r: &EventRow| if r.tid == tid { 0 } else { r.role + 1 };
        let mut counts: HashMap<(Role, FuncId), u32> = HashMap::new();
        let mut renumber: HashMap<CallId, u32> = HashMap::new();
        let mut rows = Vec::with_capacity(window.len());
        for r in window {
            let role = role_of(r);
            let instance = match r.point {
                Point::Entry => {
                    let n = counts.entry((role, r.func)).or_insert(0);
                    *n += 1;
                    renumber.insert(call_id(r), *n);
                    *n
                }
                // An exit whose entry is not in the unit (a call the unit's
                // thread was in when the unit began): not part of it.
                Point::Exit => match renumber.get(&call_id(r)) {
                    Some(n) => *n,
                    None => continue,
                },
            };
            rows.push(EventRow { t_ns: r.t_ns - origin, role, instance, ..(*r).clone() });
        }
        let mut roles_seen: Vec<(Role, u32)> = rows.iter().map(|r| (r.role, r.tid)).collect();
        roles_seen.sort_unstable();
        roles_seen.dedup();
        let unit_threads: Vec<Thread> = roles_seen
            .into_iter()
            .map(|(role, t)| Thread {
                role,
                tid: t,
                name: threads
                    .iter()
                    .find(|th| th.tid == t)
                    .map_or_else(|| "thread".into(), |th| th.name.clone()),
                parent: None,
                created_ns: 0,
            })
            .collect();
        let calls = calls_from_rows(&rows);
        let (label, reason) = self.judge(&calls, functions);
        let run = Run {
            id,
            label,
            outcome: Outcome { wall_ns: end - start, reason, ..Default::default() },
            lost_events: 0,
            lost_thread_records: 0,
            complete: true,
            threads: unit_threads,
            calls,
            end_ns: end - origin,
            interventions: Vec::new(),
            noise: Vec::new(),
            pauses: Vec::new(),
        };
        Unit { run, rows, start_ns: origin }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{model::testing::function, record::fail::Comparison};
    use Point::*;

    fn row(
        t: u64,
        tid: u32,
        role: Role,
        func: FuncId,
        point: Point,
        instance: u32,
        ret: i64,
    ) -> EventRow {
        let ret = (point == Exit).then_some(ret);
        EventRow { t_ns: t, tid, role, func, point, instance, args: [0; 3], ret, content: None }
    }

    fn functions() -> Vec<Function> {
        let f = |id: u32, name: &str| function(id, name).in_module("/x", 0);
        vec![f(0, "handle"), f(1, "work"), f(2, "compact")]
    }

    fn splitter() -> Splitter {
        let cond =
            ReturnCheck { funcs: vec![0], cond: Comparison::Lt(0), text: "handle ret < 0".into() };
        Splitter::new(0, vec![cond], 0)
    }

    fn summary(u: &Unit) -> Vec<(FuncId, Role, u32, u64, Option<i64>)> {
        u.run.calls.iter().map(|c| (c.func, c.role, c.instance, c.entry_ns, c.ret)).collect()
    }

    #[test]
    fn units_renumber_roles_and_instances() {
        let functions = functions();
        // Thread 11 (process role 1) handles two requests, thread 12 (role
        // 2) does background work during the second.
        let rows = vec![
            row(10, 11, 1, 0, Entry, 1, 0),
            row(11, 11, 1, 1, Entry, 1, 0),
            row(12, 11, 1, 1, Exit, 1, 5),
            row(13, 11, 1, 0, Exit, 1, 0),
            row(20, 11, 1, 0, Entry, 2, 0),
            row(21, 12, 2, 1, Entry, 7, 0),
            row(22, 11, 1, 1, Entry, 2, 0),
            row(23, 11, 1, 1, Exit, 2, 6),
            row(24, 12, 2, 1, Exit, 7, 9),
            row(25, 11, 1, 0, Exit, 2, -1),
            row(30, 11, 1, 0, Entry, 3, 0), // still running: not complete
        ];
        let mut s = splitter();
        s.push(rows);
        let mut next = 1;
        let units = s.complete(&[], &functions, 100, &mut next);
        assert_eq!(units.len(), 2);
        assert_eq!(units[0].run.label, Label::Pass);
        assert_eq!(units[1].run.label, Label::Fail);
        assert_eq!(units[1].run.outcome.reason, "ret of handle = -1 (handle ret < 0)");
        assert_eq!(
            summary(&units[1]),
            vec![(0, 0, 1, 0, Some(-1)), (1, 3, 1, 1, Some(9)), (1, 0, 1, 2, Some(6))]
        );
        // Nothing is returned twice.
        assert!(s.complete(&[], &functions, 100, &mut next).is_empty());
        s.count_unfinished(100);
        assert_eq!(s.partial, 1);
        // The failing unit judged again once the agent forced its return
        // to 6 (what `debug --pid` does after an override or a
        // re-execution's fallback the probes saw before it).
        let mut calls = units[1].run.calls.clone();
        calls[0].ret = Some(6);
        assert_eq!(s.judge(&calls, &functions), (Label::Pass, "no failure condition held".into()));
    }

    /// A unit call entered while the probes were being attached, whose
    /// exit never came (its return probe was attached after it began), is
    /// left out as partly traced and does not hold the thread's later
    /// calls inside it: `debug -p` on a service whose calls come every
    /// 2 ms waited 30 s for a unit in about 1 session in 20 before.
    #[test]
    fn a_unit_entered_before_the_return_probes_existed_does_not_hold_the_later_ones() {
        let functions = functions();
        let cond =
            ReturnCheck { funcs: vec![0], cond: Comparison::Lt(0), text: "handle ret < 0".into() };
        let mut s = Splitter::new(0, vec![cond], 100);
        s.push(vec![
            row(50, 11, 0, 0, Entry, 1, 0), // no exit: its return probe came later
            row(200, 11, 0, 0, Entry, 2, 0),
            row(210, 11, 0, 0, Exit, 2, 4),
            row(300, 11, 0, 0, Entry, 3, 0),
            row(310, 11, 0, 0, Exit, 3, -2),
        ]);
        let mut next = 1;
        let units = s.complete(&[], &functions, 1000, &mut next);
        let labels: Vec<Label> = units.iter().map(|u| u.run.label).collect();
        assert_eq!(labels, [Label::Pass, Label::Fail]);
        assert_eq!(units[0].start_ns, 200);
        assert_eq!(s.partial, 1);
    }

    /// The cross-thread cause of issue 12: a compaction that began before
    /// the request and still runs is in the request's unit, as call 1 of
    /// the compactor's role, whichever compaction of the process it is.
    #[test]
    fn a_call_another_thread_was_already_in_is_part_of_the_unit() {
        let functions = functions();
        let mut s = splitter();
        s.push(vec![
            row(5, 12, 1, 2, Entry, 40, 0), // compaction 40 of the process
            row(10, 11, 0, 0, Entry, 1, 0),
            row(11, 11, 0, 1, Entry, 1, 0),
            row(12, 11, 0, 1, Exit, 1, -11),
            row(13, 11, 0, 0, Exit, 1, -11),
            row(30, 12, 1, 2, Exit, 40, 0),
        ]);
        let mut next = 1;
        let units = s.complete(&[], &functions, 100, &mut next);
        assert_eq!(units.len(), 1);
        let u = &units[0];
        assert_eq!(u.start_ns, 5, "time zero is the compaction's entry");
        assert_eq!(
            summary(u),
            vec![
                (2, 2, 1, 0, None), // still running when the unit ended
                (0, 0, 1, 5, Some(-11)),
                (1, 0, 1, 6, Some(-11)),
            ]
        );
        assert_eq!((u.run.end_ns, u.run.outcome.wall_ns), (8, 3));
        assert_eq!(u.run.label, Label::Fail);
    }

    /// `--context`: the unit's own thread since its previous unit ended,
    /// other threads' calls that ended within the window; only the unit's
    /// own thread decides its label.
    #[test]
    fn context_opens_the_window_earlier_and_labels_come_from_the_unit_thread() {
        let functions = functions();
        let mut s = splitter();
        s.set_context(50);
        s.push(vec![
            row(100, 11, 0, 0, Entry, 1, 0),
            row(101, 11, 0, 0, Exit, 1, 0), // previous unit on thread 11
            row(110, 11, 0, 1, Entry, 1, 0), // preparing the next request
            row(111, 11, 0, 1, Exit, 1, 3),
            row(112, 12, 1, 0, Entry, 1, 0), // another worker's request...
            row(113, 12, 1, 0, Exit, 1, -5), // ...fails
            row(120, 11, 0, 0, Entry, 2, 0),
            row(121, 11, 0, 0, Exit, 2, 0),
        ]);
        let mut next = 1;
        let units = s.complete(&[], &functions, 1000, &mut next);
        assert_eq!(units.len(), 3);
        let second = &units[2];
        assert_eq!(second.start_ns, 70);
        assert_eq!(
            summary(second),
            vec![(1, 0, 1, 40, Some(3)), (0, 2, 1, 42, Some(-5)), (0, 0, 1, 50, Some(0)),]
        );
        assert_eq!(second.run.label, Label::Pass, "{}", second.run.outcome.reason);
        assert_eq!(units[1].run.label, Label::Fail);
    }

    /// Rows arrive per thread in order, threads interleaved: each lands in
    /// time order without a sort of everything.
    #[test]
    fn late_rows_of_another_thread_land_in_time_order() {
        let functions = functions();
        let mut s = splitter();
        s.push(vec![
            row(10, 11, 0, 0, Entry, 1, 0),
            row(14, 11, 0, 0, Exit, 1, 0),
            row(12, 12, 1, 1, Entry, 1, 0),
            row(13, 12, 1, 1, Exit, 1, 1),
        ]);
        let mut next = 1;
        let units = s.complete(&[], &functions, 100, &mut next);
        assert_eq!(summary(&units[0]), vec![(0, 0, 1, 0, Some(0)), (1, 2, 1, 2, Some(1))]);
    }

    /// Rows no open unit can need are dropped: after 10,000 units the
    /// splitter holds the rows of the unit still open and the entry of the
    /// long call another thread is in, and that call is still seen.
    #[test]
    fn memory_is_bounded_by_what_open_units_need() {
        let functions = functions();
        let mut s = splitter();
        let mut next = 1;
        s.push(vec![row(1, 12, 1, 2, Entry, 1, 0)]); // runs for the whole test
        for k in 0..10_000u64 {
            let t = 10 + k * 10;
            let i = k as u32 + 1;
            s.push(vec![
                row(t, 11, 0, 0, Entry, i, 0),
                row(t + 1, 11, 0, 1, Entry, i, 0),
                row(t + 2, 11, 0, 1, Exit, i, 0),
                row(t + 3, 11, 0, 0, Exit, i, 0),
            ]);
            let units = s.complete(&[], &functions, t + 4, &mut next);
            assert_eq!(units.len(), 1);
            assert_eq!(units[0].run.calls[0].func, 2, "the long call is in every unit");
            assert!(s.held() <= 5, "{} rows held after unit {k}", s.held());
        }
    }

    /// A look that finds many finished units (an agent catching up) cuts
    /// each with the calls running before its own window.
    #[test]
    fn many_units_in_one_look_each_see_what_ran_before_them() {
        let functions = functions();
        let mut s = splitter();
        let mut rows = Vec::new();
        for k in 0..5_000u64 {
            let (t, i) = (10 + k * 10, k as u32 + 1);
            rows.push(row(t, 11, 0, 0, Entry, i, 0));
            // Another thread's call, entered during unit k, returning
            // during unit k + 1.
            rows.push(row(t + 1, 12, 1, 1, Entry, i, 0));
            rows.push(row(t + 3, 11, 0, 0, Exit, i, 0));
            rows.push(row(t + 12, 12, 1, 1, Exit, i, 0));
        }
        s.push(rows);
        let mut next = 1;
        let units = s.complete(&[], &functions, u64::MAX, &mut next);
        assert_eq!(units.len(), 5_000);
        for u in &units[1..] {
            assert_eq!(summary(u)[..2], [(1, 2, 1, 0, Some(0)), (0, 0, 1, 9, Some(0))]);
        }
    }

    /// Units that start just after the probes were attached may miss calls
    /// other threads were already in: with a warm-up they are not returned.
    #[test]
    fn units_of_the_warm_up_are_left_out() {
        let functions = functions();
        let mut s = splitter();
        s.warm_up(100);
        s.push(vec![
            row(50, 11, 0, 0, Entry, 1, 0),
            row(60, 11, 0, 0, Exit, 1, 0),
            row(150, 11, 0, 0, Entry, 2, 0),
            row(160, 11, 0, 0, Exit, 2, 0),
        ]);
        let mut next = 1;
        let units = s.complete(&[], &functions, 1000, &mut next);
        assert_eq!(units.iter().map(|u| u.start_ns).collect::<Vec<_>>(), vec![150]);
        assert_eq!(s.partial, 0);
    }

    /// Interventions apply to units that start after they were installed.
    #[test]
    fn after_a_restart_only_later_units_are_returned() {
        let functions = functions();
        let mut s = splitter();
        s.push(vec![row(10, 11, 0, 0, Entry, 1, 0)]);
        s.restart(15);
        s.push(vec![
            row(20, 11, 0, 0, Exit, 1, 0),
            row(30, 11, 0, 0, Entry, 2, 0),
            row(40, 11, 0, 0, Exit, 2, 0),
        ]);
        let mut next = 1;
        let units = s.complete(&[], &functions, 100, &mut next);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].start_ns, 30);
        assert_eq!(s.partial, 0, "a unit left out for the restart was fully traced");
    }
}
