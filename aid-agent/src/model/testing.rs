//! Builders for the model's records: the one place, besides the recorder
//! and the session reader, that spells out every field of a [`Function`],
//! [`Run`], [`Call`] or [`Thread`]. Unit tests, integration tests and the
//! generated benchmark workloads build their data here, so a new field is
//! added in one file.

use std::path::PathBuf;

use super::{
    Call, EventRow, FuncId, Function, Label, Outcome, Point, RecordedRun, Role, Run, Session,
    Thread, ValueKind, ValueType,
};

/// A value of `kind`, 8 bytes wide (0 for `Void`).
pub fn ty(kind: ValueKind) -> ValueType {
    ValueType { kind, size: if kind == ValueKind::Void { 0 } else { 8 } }
}

/// Function `id` named `name` (also its symbol) in `/bin/target`, at
/// 0x1000 + 16·id, with unknown types; refine it with the `with_*` methods.
pub fn function(id: FuncId, name: &str) -> Function {
    let address = 0x1000 + u64::from(id) * 16;
    Function {
        id,
        name: name.into(),
        symbol: name.into(),
        module: PathBuf::from("/bin/target"),
        address,
        offset: address,
        source: None,
        ret: ValueType::UNKNOWN,
        params: Vec::new(),
        internal: false,
        probe: crate::model::Probe::Call,
        pointee: None,
    }
}

impl Function {
    /// Returns a value of `kind` (8 bytes, none for `Void`).
    #[must_use]
    pub fn with_ret(mut self, kind: ValueKind) -> Function {
        self.ret = ty(kind);
        self
    }

    /// Takes parameters of these kinds (8 bytes each).
    #[must_use]
    pub fn with_params(mut self, kinds: &[ValueKind]) -> Function {
        self.params = kinds.iter().map(|&k| ty(k)).collect();
        self
    }

    /// Its entry reads what argument `arg` points to, split into `fields`
    /// (name, offset, size).
    #[must_use]
    pub fn with_pointee(mut self, arg: u8, len: u8, fields: &[(&str, u8, u8)]) -> Function {
        let fields = fields
            .iter()
            .map(|&(name, offset, size)| crate::model::PointeeField {
                name: name.into(),
                offset,
                size,
                text: false,
            })
            .collect();
        self.pointee = Some(crate::model::Pointee { arg, text: false, len, fields });
        self
    }

    #[must_use]
    pub fn with_types(mut self, ret: ValueType, params: Vec<ValueType>) -> Function {
        self.ret = ret;
        self.params = params;
        self
    }

    #[must_use]
    pub fn with_symbol(mut self, symbol: &str) -> Function {
        self.symbol = symbol.into();
        self
    }

    /// Defined in `module` at `address` (also its file offset).
    #[must_use]
    pub fn in_module(mut self, module: &str, address: u64) -> Function {
        self.module = PathBuf::from(module);
        self.address = address;
        self.offset = address;
        self
    }
}

/// The `instance`-th call of `func` on `role`, entered at `entry`, with no
/// arguments; `exit` and `ret` None for a call that never returned.
pub fn call(
    func: FuncId,
    role: Role,
    instance: u32,
    entry: u64,
    exit: Option<u64>,
    ret: Option<i64>,
) -> Call {
    Call {
        func,
        role,
        instance,
        entry_ns: entry,
        exit_ns: exit,
        args: [0; 3],
        ret,
        unwound: false,
        content: None,
        paused_ns: 0,
    }
}

impl Call {
    #[must_use]
    pub fn with_args(mut self, args: [i64; 3]) -> Call {
        self.args = args;
        self
    }

    /// It ended without returning, at its `exit` (an exception crossed it).
    #[must_use]
    pub fn unwound(mut self) -> Call {
        self.ret = None;
        self.unwound = true;
        self
    }

    /// Its pointee read these bytes (the rest zero).
    #[must_use]
    pub fn with_content(mut self, bytes: &[u8]) -> Call {
        let mut c = crate::model::Content::default();
        c[..bytes.len()].copy_from_slice(bytes);
        self.content = Some(c);
        self
    }
}

/// Thread `role` named `name`, tid 100 + role, created by main (role 0 has
/// no parent) at time 0.
pub fn thread(role: Role, name: &str) -> Thread {
    Thread {
        role,
        tid: 100 + role,
        name: name.into(),
        parent: (role > 0).then_some(0),
        created_ns: 0,
    }
}

/// A complete run of `calls` (sorted here by entry) ending at `end_ns`:
/// "main" plus a "worker" thread for every other role that calls
/// something, no lost events, no interventions.
pub fn run(id: u32, label: Label, mut calls: Vec<Call>, end_ns: u64) -> Run {
    calls.sort_by_key(|c| c.entry_ns);
    let mut roles: Vec<Role> = calls.iter().map(|c| c.role).collect();
    roles.push(0);
    roles.sort_unstable();
    roles.dedup();
    let threads =
        roles.iter().map(|&r| thread(r, if r == 0 { "main" } else { "worker" })).collect();
    Run {
        id,
        label,
        outcome: Outcome::default(),
        lost_events: 0,
        lost_thread_records: 0,
        complete: true,
        threads,
        calls,
        end_ns,
        interventions: Vec::new(),
        noise: Vec::new(),
        pauses: Vec::new(),
    }
}

impl Run {
    #[must_use]
    pub fn with_threads(mut self, threads: Vec<Thread>) -> Run {
        self.threads = threads;
        self
    }

    #[must_use]
    pub fn with_outcome(mut self, outcome: Outcome) -> Run {
        self.outcome = outcome;
        self
    }
}

/// `run` as the recorder hands it to the session writer: an entry row and
/// (for calls that ended) an exit row per call, in time order.
pub fn recorded(run: Run) -> RecordedRun {
    let mut rows = Vec::new();
    for c in &run.calls {
        let tid = run.threads.iter().find(|t| t.role == c.role).map_or(100 + c.role, |t| t.tid);
        let row = |t_ns, point, ret| EventRow {
            t_ns,
            tid,
            role: c.role,
            func: c.func,
            point,
            instance: c.instance,
            args: if point == Point::Entry { c.args } else { [0; 3] },
            ret,
            content: if point == Point::Entry { c.content } else { None },
        };
        rows.push(row(c.entry_ns, Point::Entry, None));
        if let Some(x) = c.exit_ns {
            // A void function's return value is whatever was in the
            // register: 0 here.
            rows.push(row(x, Point::Exit, (!c.unwound).then(|| c.ret.unwrap_or(0))));
        }
    }
    rows.sort_by_key(|r| (r.t_ns, r.point == Point::Entry));
    RecordedRun {
        host: None,
        run,
        rows,
        start_ns: 0,
        orphan_exits: 0,
        stdout: String::new(),
        stderr: String::new(),
        probe_errors: 0,
        notes: Vec::new(),
        sync_steps: Vec::new(),
        hang: None,
    }
}

/// Clerks (a pool) book seats of one venue: `book(venue, req)`, the
/// request a record {customer, seat} read at entry. Two bookings always
/// overlap on the venue; in failing runs the two are for the same seat
/// (both find it free), in passing runs for different seats — except in
/// the runs listed in `same_seat_passing`, where the second finds the seat
/// taken — and the same seat is booked again only after both ended. The
/// customers always differ. Runs `3k + 2` fail.
pub fn clerks(runs: u32, same_seat_passing: &[u32]) -> Session {
    clerks_with(runs, same_seat_passing, &[])
}

/// [`clerks`], where the failing runs of `other_seat_failing` booked two
/// different seats (they failed another way).
pub fn clerks_with(runs: u32, same_seat_passing: &[u32], other_seat_failing: &[u32]) -> Session {
    let functions = vec![
        function(0, "book")
            .with_ret(ValueKind::Signed)
            .with_params(&[ValueKind::Pointer, ValueKind::Pointer])
            .with_pointee(1, 8, &[("req.customer", 0, 4), ("req.seat", 4, 4)]),
    ];
    let venue = 0x5555_0000_1000;
    let req = |customer: u32, seat: u32| [customer.to_le_bytes(), seat.to_le_bytes()].concat();
    let r = |id: u32, label| {
        let same = (label == Label::Fail && !other_seat_failing.contains(&id))
            || same_seat_passing.contains(&id);
        let (a, b) = (1 + id % 3, 1 + (id + 1) % 3);
        let calls = vec![
            call(0, a, 1, 100 * 1000, Some(110 * 1000), Some(1))
                .with_args([venue, 0x7000, 0])
                .with_content(&req(1, 12)),
            call(0, b, 1, 104 * 1000, Some(114 * 1000), Some(1))
                .with_args([venue, 0x7100, 0])
                .with_content(&req(2, if same { 12 } else { 13 })),
            // The same seat again, after both: found taken.
            call(0, a, 2, 150 * 1000, Some(152 * 1000), Some(0))
                .with_args([venue, 0x7000, 0])
                .with_content(&req(3, 12)),
        ];
        run(id, label, calls, 200 * 1000).with_threads(vec![
            thread(0, "main"),
            thread(1, "worker"),
            thread(2, "worker"),
            thread(3, "worker"),
        ])
    };
    Session {
        functions,
        runs: (0..runs).map(|i| r(i, if i % 3 == 2 { Label::Fail } else { Label::Pass })).collect(),
    }
}

/// [`clerks`] where a booking that sells the seat calls `sell` (function 1)
/// inside it, 2 µs after its entry: both overlapping bookings sell in
/// failing runs and in passing runs for different seats; in the runs of
/// `same_seat_passing` the second finds the seat taken and does not.
pub fn selling_clerks(runs: u32, same_seat_passing: &[u32]) -> Session {
    let mut s = clerks(runs, same_seat_passing);
    s.functions.push(function(1, "sell"));
    for r in &mut s.runs {
        let taken = same_seat_passing.contains(&r.id);
        let sells: Vec<Call> = r
            .calls
            .iter()
            .filter(|c| c.instance == 1 && !(taken && c.entry_ns == 104 * 1000))
            .map(|c| call(1, c.role, 1, c.entry_ns + 2_000, Some(c.entry_ns + 3_000), None))
            .collect();
        r.calls.extend(sells);
        r.calls.sort_by_key(|c| c.entry_ns);
    }
    s
}
