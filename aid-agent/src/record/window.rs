//! Time windows of an `attach` without a unit function: the recording is
//! cut every `--window` into runs, each written to the session as soon as
//! it closes, so an agent killed mid-attach loses at most the window it
//! was in. A window holds the rows whose time lies in it: a call that
//! began in an earlier window and returns in this one shows as an exit
//! without an entry (counted as an orphan, as at the start of any attach),
//! a call still running at the window's end has no exit (as at the end of
//! any run). Instances count from the window's start; times are relative
//! to it.

use std::collections::HashMap;

use crate::{
    bpf::Lost,
    model::{
        EventRow, FuncId, Function, Label, Outcome, Point, RecordedRun, Role, Run, Thread,
        calls_from_rows,
    },
    record::{
        fail::{ReturnCheck, failure_reason},
        lost,
    },
};

/// One window: its number (the run id) and its span in process time (ns
/// since the attach began).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub id: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl Window {
    /// The first window of a recording that began at process time 0.
    pub fn first(len_ns: u64) -> Window {
        Window { id: 1, start_ns: 0, end_ns: len_ns }
    }

    /// The window after this one, of the same length.
    pub fn next(&self) -> Window {
        let len = self.end_ns - self.start_ns;
        Window { id: self.id + 1, start_ns: self.end_ns, end_ns: self.end_ns + len }
    }
}

/// What a window needs besides its rows.
pub struct Cut<'a> {
    /// Every thread known when the window closed (process time).
    pub threads: &'a [Thread],
    pub functions: &'a [Function],
    pub checks: &'a [ReturnCheck],
    /// Monotonic ns at which the attach began (process time zero).
    pub attach_ns: u64,
    /// Events the kernel dropped while the window was open.
    pub lost: Lost,
}

/// The window `w` as a run, from `rows` (process time; rows recorded
/// before the window's start, which the ring buffer can deliver late,
/// are placed at its start). Failed when one of the checks holds of a
/// return value in it.
pub fn cut(w: Window, mut rows: Vec<EventRow>, cx: &Cut<'_>) -> RecordedRun {
    rows.sort_by_key(|r| r.t_ns);
    let mut counts: HashMap<(Role, FuncId), u32> = HashMap::new();
    let mut renumber: HashMap<(u32, FuncId, u32), u32> = HashMap::new();
    let mut orphan_exits = 0u64;
    let mut out = Vec::with_capacity(rows.len());
    for mut r in rows {
        let key = (r.tid, r.func, r.instance);
        match r.point {
            Point::Entry => {
                let n = counts.entry((r.role, r.func)).or_insert(0);
                *n += 1;
                renumber.insert(key, *n);
                r.instance = *n;
            }
            Point::Exit => match renumber.remove(&key) {
                Some(n) => r.instance = n,
                None => {
                    orphan_exits += 1;
                    continue;
                }
            },
        }
        r.t_ns = r.t_ns.saturating_sub(w.start_ns);
        out.push(r);
    }
    let len = w.end_ns - w.start_ns;
    let threads: Vec<Thread> = cx
        .threads
        .iter()
        .filter(|t| t.created_ns < w.end_ns)
        .map(|t| Thread { created_ns: t.created_ns.saturating_sub(w.start_ns), ..t.clone() })
        .collect();
    let calls = calls_from_rows(&out);
    let (label, reason) = match failure_reason(&calls, cx.checks, cx.functions) {
        Some(r) => (Label::Fail, r),
        None => (
            Label::Pass,
            format!(
                "window {} ({:.1} s to {:.1} s of the attach)",
                w.id,
                w.start_ns as f64 / 1e9,
                w.end_ns as f64 / 1e9
            ),
        ),
    };
    let mut run = Run {
        id: w.id,
        label,
        outcome: Outcome { wall_ns: len, reason, ..Default::default() },
        lost_events: 0,
        lost_thread_records: 0,
        complete: true,
        threads,
        calls,
        end_ns: len,
        interventions: Vec::new(),
        noise: Vec::new(),
        pauses: Vec::new(),
    };
    lost::charge(&mut run, cx.lost);
    RecordedRun {
        host: None,
        run,
        rows: out,
        start_ns: cx.attach_ns + w.start_ns,
        orphan_exits,
        stdout: String::new(),
        stderr: String::new(),
        probe_errors: 0,
        notes: Vec::new(),
        sync_steps: Vec::new(),
        hang: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        model::{ValueKind, ValueType, testing::function},
        record::fail::FailIf,
    };

    fn row(t_ns: u64, tid: u32, func: FuncId, point: Point, instance: u32, ret: i64) -> EventRow {
        let ret = (point == Point::Exit).then_some(ret);
        EventRow { t_ns, tid, role: 0, func, point, instance, args: [0; 3], ret, content: None }
    }

    fn functions() -> Vec<Function> {
        let int = ValueType { kind: ValueKind::Signed, size: 4 };
        vec![function(0, "f").with_types(int, vec![]), function(1, "g").with_types(int, vec![])]
    }

    #[test]
    fn windows_follow_each_other_without_gaps() {
        let w = Window::first(1_000);
        assert_eq!(w, Window { id: 1, start_ns: 0, end_ns: 1_000 });
        assert_eq!(w.next().next(), Window { id: 3, start_ns: 2_000, end_ns: 3_000 });
    }

    #[test]
    fn calls_across_a_boundary_are_cut_and_instances_restart() {
        let functions = functions();
        let threads =
            vec![Thread { role: 0, tid: 7, name: "main".into(), parent: None, created_ns: 0 }];
        let cx = Cut {
            threads: &threads,
            functions: &functions,
            checks: &[],
            attach_ns: 5_000,
            lost: Lost::default(),
        };
        let w = Window::first(1_000).next();
        // f#3 began in window 1 (exit only here); f#4 whole; g#1 still
        // running at the end; one row delivered late from window 1.
        let rows = vec![
            row(1_100, 7, 0, Point::Exit, 3, 0),
            row(1_200, 7, 0, Point::Entry, 4, 0),
            row(1_300, 7, 0, Point::Exit, 4, 2),
            row(1_900, 7, 1, Point::Entry, 1, 0),
            row(990, 7, 1, Point::Entry, 9, 0),
        ];
        let rec = cut(w, rows, &cx);
        assert_eq!(rec.orphan_exits, 1);
        assert_eq!(rec.start_ns, 6_000);
        assert_eq!(rec.run.id, 2);
        assert_eq!(rec.run.end_ns, 1_000);
        let calls: Vec<_> = rec
            .run
            .calls
            .iter()
            .map(|c| (c.func, c.instance, c.entry_ns, c.exit_ns, c.ret))
            .collect();
        assert_eq!(
            calls,
            vec![(1, 1, 0, None, None), (0, 1, 200, Some(300), Some(2)), (1, 2, 900, None, None)]
        );
        assert_eq!(rec.run.label, Label::Pass);
        assert_eq!(rec.run.outcome.reason, "window 2 (0.0 s to 0.0 s of the attach)");
    }

    #[test]
    fn a_window_fails_when_a_check_holds_and_is_charged_with_losses() {
        let functions = functions();
        let fail = FailIf::parse("f ret < 0").unwrap();
        let checks = vec![ReturnCheck { funcs: vec![0], cond: fail.cond, text: fail.text }];
        let cx = Cut {
            threads: &[],
            functions: &functions,
            checks: &checks,
            attach_ns: 0,
            lost: Lost { calls: 3, thread_records: 0 },
        };
        let rows = vec![row(10, 1, 0, Point::Entry, 1, 0), row(20, 1, 0, Point::Exit, 1, -1)];
        let rec = cut(Window::first(1_000_000_000), rows, &cx);
        assert_eq!(rec.run.label, Label::Fail);
        assert_eq!((rec.run.lost_events, rec.run.complete), (3, false));
    }
}
