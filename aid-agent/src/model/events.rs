//! A run as the recorder produces it and the session stores it: one row
//! per entry or exit, and the one place calls are built from rows, so a
//! session read back from disk yields exactly the calls the recorder saw.

use std::collections::HashMap;

use super::{Call, FuncId, Pause, Point, Role, Run};

/// One recorded entry or exit, as stored in `events.csv`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventRow {
    /// Nanoseconds since the run started.
    pub t_ns: u64,
    pub tid: u32,
    pub role: Role,
    pub func: FuncId,
    pub point: Point,
    /// 1-based k-th call of `func` on `role`; an exit carries its entry's.
    pub instance: u32,
    /// Entry only: first three integer arguments, normalised.
    pub args: [i64; 3],
    /// Exit only: return value, normalised; None when the call ended
    /// without returning (an exception or a panic unwound through it).
    pub ret: Option<i64>,
    /// Entry only: what the function's pointee argument pointed to.
    pub content: Option<super::Content>,
}

/// A finished run with everything the session stores about it (and what
/// a fleet's worker sends its coordinator, `fleet/`).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RecordedRun {
    pub run: Run,
    pub rows: Vec<EventRow>,
    pub start_ns: u64,
    pub orphan_exits: u64,
    pub stdout: String,
    pub stderr: String,
    /// Probe bodies that failed in the kernel during this run.
    pub probe_errors: u64,
    /// What the run's record says in words about what was not traced
    /// (child processes the target started), stored with it.
    pub notes: Vec<String>,
    /// Amplified runs: how many synchronisation points each thread role
    /// entered (what noise at sync points is drawn from; not stored).
    pub sync_steps: Vec<(Role, u32)>,
    /// A run that hung: what each thread waited for when aid ended it.
    pub hang: Option<super::WaitGraph>,
    /// The host that made the run when it was not this one (a fleet's
    /// worker, `fleet/`): the `host` of its tables and its record.
    #[serde(default)]
    pub host: Option<String>,
}

/// Takes the agent's pauses out of the durations of the calls their thread
/// was in at the time.
pub fn apply_pauses(calls: &mut [Call], pauses: &[Pause]) {
    for p in pauses {
        for c in calls.iter_mut().filter(|c| {
            c.role == p.role && c.entry_ns <= p.at_ns && c.exit_ns.is_none_or(|x| x >= p.at_ns)
        }) {
            c.paused_ns += p.dur_ns;
        }
    }
}

/// A run's calls as the tracer makes them and the session's reader and a
/// fleet's coordinator make them again: its rows paired, with the agent's
/// `pauses` taken out.
pub fn paired_calls(rows: &[EventRow], pauses: &[Pause]) -> Vec<Call> {
    let mut calls = calls_from_rows(rows);
    apply_pauses(&mut calls, pauses);
    calls
}

/// Pairs entry and exit rows into calls, sorted by entry time.
pub fn calls_from_rows(rows: &[EventRow]) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    let mut index: HashMap<(Role, FuncId, u32), usize> = HashMap::new();
    for r in rows {
        match r.point {
            Point::Entry => {
                index.insert((r.role, r.func, r.instance), calls.len());
                calls.push(Call {
                    func: r.func,
                    role: r.role,
                    instance: r.instance,
                    entry_ns: r.t_ns,
                    exit_ns: None,
                    args: r.args,
                    ret: None,
                    unwound: false,
                    content: r.content,
                    paused_ns: 0,
                });
            }
            Point::Exit => {
                if let Some(&i) = index.get(&(r.role, r.func, r.instance)) {
                    calls[i].exit_ns = Some(r.t_ns);
                    calls[i].ret = r.ret;
                    calls[i].unwound = r.ret.is_none();
                }
            }
        }
    }
    calls.sort_by_key(|c| (c.entry_ns, c.role));
    calls
}
