//! From kernel events to a recorded run: drop what happened before the
//! target's exec, give every thread its role (from the kernel's creation
//! order) and a name (its start routine), number call instances per role,
//! normalise values by their DWARF types, and pair entries with exits.
//!
//! [`Row`] is also the on-disk event record, and [`calls_from_rows`] is the
//! one place calls are built, so a session read back from disk yields
//! exactly the calls the recorder saw.

use std::collections::HashMap;

use aid_common::{Event, KIND_ENTRY, KIND_EXEC, KIND_EXIT, KIND_THREAD};

use crate::model::{Call, FuncId, Function, Point, Role, Thread};

/// One recorded entry or exit, as stored in `events.csv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
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
    /// Exit only: return value, normalised.
    pub ret: i64,
}

/// What the recorder needs to know besides the events.
pub struct Context<'a> {
    pub pid: u32,
    pub functions: &'a [Function],
    /// The internal `pthread_create` probe, used to name threads.
    pub pthread_create: Option<FuncId>,
    /// Names the function starting at an ELF virtual address of a module
    /// (start routines of threads).
    pub symbolize: &'a dyn Fn(&std::path::Path, u64) -> Option<String>,
    /// Monotonic time the run starts at when no exec event marks it (a
    /// process we attached to).
    pub start_ns: Option<u64>,
    /// Threads that existed before tracing began (attach mode), in role
    /// order, as (tid, name).
    pub existing_threads: &'a [(u32, String)],
}

/// The rows and threads of one run, and its time origin.
pub struct Recorded {
    pub rows: Vec<Row>,
    pub threads: Vec<Thread>,
    /// Monotonic ns of time zero.
    pub start_ns: u64,
    /// Exits whose entry was not seen (attach mode: calls already running).
    pub orphan_exits: u64,
}

/// Turns the events of `ctx.pid` into rows and threads.
pub fn record(events: &[Event], ctx: &Context<'_>) -> Recorded {
    let mut events: Vec<&Event> = events.iter().filter(|e| e.pid == ctx.pid).collect();
    events.sort_by_key(|e| (e.ts_ns, e.kind != KIND_EXEC));
    // Everything before the exec ran in the agent's forked child.
    if let Some(i) = events.iter().position(|e| e.kind == KIND_EXEC) {
        events.drain(..i);
    }
    let start_ns = ctx
        .start_ns
        .or_else(|| events.first().filter(|e| e.kind == KIND_EXEC).map(|e| e.ts_ns))
        .or_else(|| events.first().map(|e| e.ts_ns))
        .unwrap_or(0);

    // Entry events carry the function's runtime address: where each module
    // is loaded in this run, to name start routines.
    let mut bias: HashMap<&std::path::Path, u64> = HashMap::new();
    for e in events.iter().filter(|e| e.kind == KIND_ENTRY) {
        if let Some(f) = ctx.functions.get(e.func as usize) {
            bias.entry(f.module.as_path()).or_insert(e.ret.wrapping_sub(f.address));
        }
    }
    let name_of = |addr: u64| {
        bias.iter().find_map(|(module, b)| (ctx.symbolize)(module, addr.wrapping_sub(*b)))
    };

    let mut threads: Vec<Thread> = Vec::new();
    let mut role_of: HashMap<u32, Role> = HashMap::new();
    if ctx.existing_threads.is_empty() {
        threads.push(Thread { role: 0, tid: ctx.pid, name: "main".into(), parent: None, created_ns: 0 });
        role_of.insert(ctx.pid, 0);
    } else {
        for (role, (tid, name)) in ctx.existing_threads.iter().enumerate() {
            let name = if role == 0 { "main".to_owned() } else { name.clone() };
            threads.push(Thread { role: role as Role, tid: *tid, name, parent: None, created_ns: 0 });
            role_of.insert(*tid, role as Role);
        }
    }

    let mut rows = Vec::with_capacity(events.len());
    let mut counts: HashMap<(Role, FuncId), u32> = HashMap::new();
    let mut open: HashMap<(u32, FuncId), Vec<u32>> = HashMap::new();
    // Start routine of the pthread_create each thread is inside, if any.
    let mut creating: HashMap<u32, u64> = HashMap::new();
    let mut orphan_exits = 0;
    let mut next_unknown_role: Role = 1 << 20;
    for e in events {
        let t_ns = e.ts_ns.saturating_sub(start_ns);
        match e.kind {
            KIND_THREAD => {
                let child = e.func;
                let role = e.args[0] as Role;
                let parent = role_of.get(&e.tid).copied();
                let name = creating
                    .get(&e.tid)
                    .and_then(|addr| name_of(*addr))
                    .unwrap_or_else(|| "thread".to_owned());
                role_of.insert(child, role);
                threads.push(Thread { role, tid: child, name, parent, created_ns: t_ns });
            }
            KIND_ENTRY | KIND_EXIT => {
                let Some(func) = ctx.functions.get(e.func as usize) else { continue };
                let role = *role_of.entry(e.tid).or_insert_with(|| {
                    // A thread we never saw created (should not happen when
                    // recording from exec); give it a role of its own.
                    next_unknown_role += 1;
                    threads.push(Thread {
                        role: next_unknown_role,
                        tid: e.tid,
                        name: "thread".into(),
                        parent: None,
                        created_ns: t_ns,
                    });
                    next_unknown_role
                });
                if e.kind == KIND_ENTRY {
                    let n = counts.entry((role, func.id)).or_insert(0);
                    *n += 1;
                    open.entry((e.tid, func.id)).or_default().push(*n);
                    if Some(func.id) == ctx.pthread_create {
                        creating.insert(e.tid, e.args[2]);
                    }
                    let mut args = [0i64; 3];
                    for (i, ty) in func.params.iter().take(3).enumerate() {
                        args[i] = ty.normalize(e.args[i]);
                    }
                    rows.push(Row { t_ns, tid: e.tid, role, func: func.id, point: Point::Entry, instance: *n, args, ret: 0 });
                } else {
                    let Some(instance) = open.get_mut(&(e.tid, func.id)).and_then(Vec::pop) else {
                        orphan_exits += 1;
                        continue;
                    };
                    if Some(func.id) == ctx.pthread_create {
                        creating.remove(&e.tid);
                    }
                    let ret = func.ret.normalize(e.ret);
                    rows.push(Row { t_ns, tid: e.tid, role, func: func.id, point: Point::Exit, instance, args: [0; 3], ret });
                }
            }
            _ => {}
        }
    }
    threads.sort_by_key(|t| t.role);
    Recorded { rows, threads, start_ns, orphan_exits }
}

/// Pairs entry and exit rows into calls, sorted by entry time.
pub fn calls_from_rows(rows: &[Row]) -> Vec<Call> {
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
                });
            }
            Point::Exit => {
                if let Some(&i) = index.get(&(r.role, r.func, r.instance)) {
                    calls[i].exit_ns = Some(r.t_ns);
                    calls[i].ret = Some(r.ret);
                }
            }
        }
    }
    calls.sort_by_key(|c| (c.entry_ns, c.role));
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ValueKind, ValueType};

    fn func(id: FuncId, name: &str) -> Function {
        Function {
            id,
            name: name.into(),
            symbol: name.into(),
            module: "/bin/x".into(),
            address: 0,
            offset: 0,
            source: None,
            ret: ValueType { kind: ValueKind::Signed, size: 4 },
            params: vec![ValueType { kind: ValueKind::Signed, size: 4 }],
            internal: false,
        }
    }

    fn ev(ts: u64, tid: u32, func: u32, kind: u32, args: [u64; 3], ret: u64) -> Event {
        Event { ts_ns: ts, pid: 100, tid, func, kind, args, ret }
    }

    #[test]
    fn roles_instances_and_recursion_are_exact() {
        let functions = vec![func(0, "f"), func(1, "g")];
        let events = vec![
            ev(5, 100, 0, KIND_ENTRY, [9, 0, 0], 0), // before exec: dropped
            ev(10, 100, 0, KIND_EXEC, [0; 3], 0),
            ev(20, 100, 0, KIND_ENTRY, [1, 0, 0], 0),
            ev(21, 100, 0, KIND_ENTRY, [2, 0, 0], 0), // recursion
            ev(22, 100, 0, KIND_EXIT, [0; 3], 0xffff_ffff),
            ev(23, 100, 0, KIND_EXIT, [0; 3], 7),
            ev(30, 100, 101, KIND_THREAD, [1, 0x3d0f00, 0], 0),
            ev(40, 101, 1, KIND_ENTRY, [0xffff_fffe, 0, 0], 0),
            ev(41, 101, 1, KIND_EXIT, [0; 3], 3),
        ];
        let ctx = Context {
            pid: 100,
            functions: &functions,
            pthread_create: None,
            symbolize: &|_, _| None,
            start_ns: None,
            existing_threads: &[],
        };
        let rec = record(&events, &ctx);
        assert_eq!(rec.start_ns, 10);
        assert_eq!(rec.threads.len(), 2);
        assert_eq!((rec.threads[1].role, rec.threads[1].tid, rec.threads[1].parent), (1, 101, Some(0)));
        let calls = calls_from_rows(&rec.rows);
        let summary: Vec<_> = calls.iter().map(|c| (c.func, c.role, c.instance, c.args[0], c.ret, c.entry_ns, c.exit_ns)).collect();
        assert_eq!(
            summary,
            vec![
                (0, 0, 1, 1, Some(7), 10, Some(13)),
                (0, 0, 2, 2, Some(-1), 11, Some(12)),
                (1, 1, 1, -2, Some(3), 30, Some(31)),
            ]
        );
    }
}
