//! Execution units of a live service: with `--unit FN`, each invocation of
//! FN is one run. A unit holds the events that happen between FN's entry
//! and exit, on its thread and on every other thread. Inside a unit, the
//! thread running FN is role 0 and any other thread of process role r is
//! role r + 1; instances count from the unit's start; times are relative to
//! FN's entry. `--fail-if 'FN ret < 0'` labels units ([`super::fail`]).

use std::collections::{HashMap, HashSet};

use crate::{
    model::{
        EventRow, FuncId, Function, Label, Outcome, Point, RecordedRun, Role, Run, Thread,
        calls_from_rows,
    },
    record::fail::{ReturnCheck, failure_reason},
};

/// One unit, ready to be stored as a run.
pub struct Unit {
    pub run: Run,
    pub rows: Vec<EventRow>,
    /// Process-level time (ns since attach) of the unit's start.
    pub start_ns: u64,
}

impl Unit {
    /// The unit as a stored run; `attach_ns` is the monotonic time tracing
    /// started at.
    pub fn stored(&self, attach_ns: u64) -> RecordedRun {
        RecordedRun {
            run: self.run.clone(),
            rows: self.rows.clone(),
            start_ns: attach_ns + self.start_ns,
            orphan_exits: 0,
            stdout: String::new(),
            stderr: String::new(),
            probe_errors: 0,
            notes: Vec::new(),
            sync_steps: Vec::new(),
        }
    }
}

/// Cuts units out of the rows recorded so far.
pub struct Splitter {
    unit: FuncId,
    conditions: Vec<ReturnCheck>,
    done: HashSet<(u32, u32)>,
    /// Units starting before this (process ns) began while probes were
    /// still being attached: partially traced, never returned.
    not_before: u64,
    /// How many units were left out for being partially traced...
    pub partial: u64,
    /// ...of which this many were still running when recording stopped.
    pub partial_at_end: u64,
}

impl Splitter {
    /// `not_before`: when the last probe was attached.
    pub fn new(unit: FuncId, conditions: Vec<ReturnCheck>, not_before: u64) -> Splitter {
        Splitter {
            unit,
            conditions,
            done: HashSet::new(),
            not_before,
            partial: 0,
            partial_at_end: 0,
        }
    }

    /// Counts the units that had started by `cutoff_ns` but will never be
    /// returned (probes were removed before they ended). Units that began
    /// after it, while the probes were being removed, lie outside the
    /// recording and are not counted.
    pub fn count_unfinished(&mut self, rows: &[EventRow], cutoff_ns: u64) {
        let mut open: HashSet<(u32, u32)> = HashSet::new();
        for r in rows
            .iter()
            .filter(|r| r.func == self.unit && r.t_ns >= self.not_before && r.t_ns < cutoff_ns)
        {
            match r.point {
                Point::Entry => {
                    open.insert((r.tid, r.instance));
                }
                Point::Exit if r.t_ns < cutoff_ns => {
                    open.remove(&(r.tid, r.instance));
                }
                Point::Exit => {}
            }
        }
        let unfinished = open.iter().filter(|k| !self.done.contains(k)).count() as u64;
        self.partial += unfinished;
        self.partial_at_end += unfinished;
    }

    /// Units whose invocation returned before `cutoff_ns` (process time)
    /// and were not returned before, in order of their start.
    pub fn complete(
        &mut self,
        rows: &[EventRow],
        threads: &[Thread],
        functions: &[Function],
        cutoff_ns: u64,
        next_id: &mut u32,
    ) -> Vec<Unit> {
        let mut sorted: Vec<&EventRow> = rows.iter().collect();
        sorted.sort_by_key(|r| r.t_ns);
        // Pair the unit function's entries and exits (per thread, instance).
        let mut entries: HashMap<(u32, u32), u64> = HashMap::new();
        let mut spans: Vec<(u64, u64, u32, Role)> = Vec::new();
        for r in sorted.iter().filter(|r| r.func == self.unit) {
            match r.point {
                Point::Entry => {
                    entries.insert((r.tid, r.instance), r.t_ns);
                }
                Point::Exit => {
                    if let Some(start) = entries.remove(&(r.tid, r.instance))
                        && r.t_ns < cutoff_ns
                        && self.done.insert((r.tid, r.instance))
                    {
                        if start < self.not_before {
                            self.partial += 1;
                        } else {
                            spans.push((start, r.t_ns, r.tid, r.role));
                        }
                    }
                }
            }
        }
        spans.sort();
        let mut units = Vec::new();
        for (start, end, tid, _) in spans {
            let lo = sorted.partition_point(|r| r.t_ns < start);
            let window: Vec<&EventRow> =
                sorted[lo..].iter().take_while(|r| r.t_ns <= end).copied().collect();
            let id = *next_id;
            *next_id += 1;
            units.push(self.build(id, start, end, tid, &window, threads, functions));
        }
        units
    }

    #[allow(clippy::too_many_arguments, reason = "to be replaced by a run request struct")]
    fn build(
        &self,
        id: u32,
        start: u64,
        end: u64,
        tid: u32,
        window: &[&EventRow],
        threads: &[Thread],
        functions: &[Function],
    ) -> Unit {
        let role_of = |r: &EventRow| if r.tid == tid { 0 } else { r.role + 1 };
        let mut counts: HashMap<(Role, FuncId), u32> = HashMap::new();
        let mut renumber: HashMap<(u32, FuncId, u32), u32> = HashMap::new();
        let mut rows = Vec::new();
        for r in window {
            let role = role_of(r);
            let instance = match r.point {
                Point::Entry => {
                    let n = counts.entry((role, r.func)).or_insert(0);
                    *n += 1;
                    renumber.insert((r.tid, r.func, r.instance), *n);
                    *n
                }
                // An exit whose entry came before the unit started: not part
                // of this unit.
                Point::Exit => match renumber.get(&(r.tid, r.func, r.instance)) {
                    Some(n) => *n,
                    None => continue,
                },
            };
            rows.push(EventRow { t_ns: r.t_ns - start, role, instance, ..(*r).clone() });
        }
        let mut unit_threads: Vec<Thread> = Vec::new();
        let mut roles_seen: Vec<(Role, u32)> = rows.iter().map(|r| (r.role, r.tid)).collect();
        roles_seen.sort();
        roles_seen.dedup();
        for (role, t) in roles_seen {
            let process = threads.iter().find(|th| th.tid == t);
            unit_threads.push(Thread {
                role,
                tid: t,
                name: process.map_or_else(|| "thread".into(), |th| th.name.clone()),
                parent: None,
                created_ns: 0,
            });
        }
        let calls = calls_from_rows(&rows);
        let reason = failure_reason(&calls, &self.conditions, functions);
        let (label, reason) = match reason {
            Some(r) => (Label::Fail, r),
            None => (Label::Pass, "no failure condition held".to_owned()),
        };
        let run = Run {
            id,
            label,
            outcome: Outcome { wall_ns: end - start, reason, ..Default::default() },
            lost_events: 0,
            lost_thread_records: 0,
            complete: true,
            threads: unit_threads,
            calls,
            end_ns: end - start,
            interventions: Vec::new(),
            noise: Vec::new(),
            pauses: Vec::new(),
        };
        Unit { run, rows, start_ns: start }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{model::testing::function, record::fail::Comparison};

    fn row(
        t: u64,
        tid: u32,
        role: Role,
        func: FuncId,
        point: Point,
        instance: u32,
        ret: i64,
    ) -> EventRow {
        EventRow { t_ns: t, tid, role, func, point, instance, args: [0; 3], ret }
    }

    #[test]
    fn units_renumber_roles_and_instances() {
        use Point::*;
        let f = |id: u32, name: &str| function(id, name).in_module("/x", 0);
        let functions = vec![f(0, "handle"), f(1, "work")];
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
        let cond =
            ReturnCheck { funcs: vec![0], cond: Comparison::Lt(0), text: "handle ret < 0".into() };
        let mut s = Splitter::new(0, vec![cond], 0);
        let mut next = 1;
        let units = s.complete(&rows, &[], &functions, 100, &mut next);
        assert_eq!(units.len(), 2);
        assert_eq!(units[0].run.label, Label::Pass);
        assert_eq!(units[1].run.label, Label::Fail);
        assert_eq!(units[1].run.outcome.reason, "ret of handle = -1 (handle ret < 0)");
        let calls: Vec<_> = units[1]
            .run
            .calls
            .iter()
            .map(|c| (c.func, c.role, c.instance, c.entry_ns, c.ret))
            .collect();
        assert_eq!(
            calls,
            vec![(0, 0, 1, 0, Some(-1)), (1, 3, 1, 1, Some(9)), (1, 0, 1, 2, Some(6))]
        );
        // Nothing is returned twice.
        assert!(s.complete(&rows, &[], &functions, 100, &mut next).is_empty());
    }
}
