//! From kernel events to a recorded run: drop what happened before the
//! target's exec, give every thread its role (from the kernel's creation
//! order) and a name (its start routine), number call instances per role,
//! normalise values by their DWARF types, and pair entries with exits.
//! The names are what threads are matched across runs by
//! ([`identity`](crate::model::identity)).
//!
//! Its rows ([`EventRow`]) are also what the session stores, and
//! [`calls_from_rows`](crate::model::calls_from_rows) builds the calls from them, so a session read back
//! from disk yields exactly the calls the recorder saw.

use std::{collections::HashMap, path::Path};

use aid_common::{Event, EventKind};

use crate::{
    model::{EventRow, FuncId, Function, Point, Role, Thread, identity::MAIN},
    symbols::{Resolver, runtime::is_trampoline},
};

/// What the recorder needs to know besides the events.
pub struct Context<'a> {
    pub pid: u32,
    pub functions: &'a [Function],
    /// The internal `pthread_create` probe, used to name threads.
    pub pthread_create: Option<FuncId>,
    /// Thread bodies (internal entry-only probes) and the user function
    /// each runs, used to name threads started through a trampoline.
    pub bodies: &'a HashMap<FuncId, String>,
    /// Names start routines of threads.
    pub symbolize: &'a dyn Symbolize,
    /// Monotonic time the run starts at when no exec event marks it (a
    /// process we attached to).
    pub start_ns: Option<u64>,
    /// Threads that existed before tracing began (attach mode), in role
    /// order, as (tid, name).
    pub existing_threads: Vec<(u32, String)>,
}

/// Names the function starting at an ELF virtual address of a module.
pub trait Symbolize {
    fn function_at(&self, module: &Path, address: u64) -> Option<String>;
}

impl Symbolize for Resolver {
    fn function_at(&self, module: &Path, address: u64) -> Option<String> {
        Resolver::function_at(self, module, address).map(str::to_owned)
    }
}

impl Symbolize for crate::symbols::Names {
    fn function_at(&self, module: &Path, address: u64) -> Option<String> {
        crate::symbols::Names::function_at(self, module, address).map(str::to_owned)
    }
}

impl<F: Fn(&Path, u64) -> Option<String>> Symbolize for F {
    fn function_at(&self, module: &Path, address: u64) -> Option<String> {
        self(module, address)
    }
}

/// The rows and threads of one run, and its time origin.
pub struct Recorded {
    pub rows: Vec<EventRow>,
    pub threads: Vec<Thread>,
    /// Monotonic ns of time zero.
    pub start_ns: u64,
    /// Exits whose entry was not seen (attach mode: calls already running).
    pub orphan_exits: u64,
    /// When the last thread seen exiting exited, ns since time zero (the
    /// kernel's clock): for a run that ended, its end, which the agent
    /// learns only later (a process killed by a signal is reaped after the
    /// signal's work, and the agent's wait wakes after that).
    pub last_exit_ns: Option<u64>,
}

/// Turns the events of `ctx.pid` into rows and threads (a whole run).
pub fn record(events: &[Event], ctx: Context<'_>) -> Recorded {
    let mut events: Vec<Event> = events.iter().filter(|e| e.pid == ctx.pid).copied().collect();
    events.sort_by_key(|e| (e.ts_ns, e.kind != EventKind::EXEC));
    let mut recorder = Recorder::new(ctx);
    recorder.push(&events);
    recorder.finish()
}

/// Incremental form of [`record`]: events are pushed as they arrive (in
/// per-thread order, which the ring buffer preserves), rows come out.
pub struct Recorder<'a> {
    ctx: Context<'a>,
    /// Before the exec event only the agent's forked child runs.
    waiting_for_exec: bool,
    start_ns: Option<u64>,
    threads: Vec<Thread>,
    /// Start routine address of threads not yet named.
    unnamed: HashMap<Role, u64>,
    /// The user function each thread's body ran, where a body probe saw it.
    body_of: HashMap<Role, String>,
    /// The first traced function each thread entered.
    first_call: HashMap<Role, FuncId>,
    /// Thread names (`comm`) reported when threads exited.
    comms: HashMap<u32, String>,
    role_of: HashMap<u32, Role>,
    counts: HashMap<(Role, FuncId), u32>,
    /// Per thread, its calls of functions with a return probe that have
    /// not ended, oldest first: (function, instance).
    open: HashMap<u32, Vec<(FuncId, u32)>>,
    /// Start routine of the pthread_create each thread is inside, if any.
    creating: HashMap<u32, u64>,
    /// Where each module is loaded, learnt from entry events (they carry
    /// the function's runtime address).
    bias: HashMap<&'a Path, u64>,
    rows: Vec<EventRow>,
    orphan_exits: u64,
    last_exit_ns: Option<u64>,
    next_unknown_role: Role,
    /// Child processes the target started (pids), not yet taken: their
    /// calls are not traced.
    children: Vec<u32>,
}

impl<'a> Recorder<'a> {
    pub fn new(ctx: Context<'a>) -> Recorder<'a> {
        let mut threads: Vec<Thread> = Vec::new();
        let mut role_of: HashMap<u32, Role> = HashMap::new();
        if ctx.existing_threads.is_empty() {
            threads.push(Thread {
                role: 0,
                tid: ctx.pid,
                name: MAIN.into(),
                parent: None,
                created_ns: 0,
            });
            role_of.insert(ctx.pid, 0);
        } else {
            for (role, (tid, name)) in ctx.existing_threads.iter().enumerate() {
                let name = if role == 0 { MAIN.to_owned() } else { name.clone() };
                threads.push(Thread {
                    role: role as Role,
                    tid: *tid,
                    name,
                    parent: None,
                    created_ns: 0,
                });
                role_of.insert(*tid, role as Role);
            }
        }
        Recorder {
            waiting_for_exec: ctx.start_ns.is_none(),
            start_ns: ctx.start_ns,
            ctx,
            threads,
            unnamed: HashMap::new(),
            body_of: HashMap::new(),
            first_call: HashMap::new(),
            comms: HashMap::new(),
            role_of,
            counts: HashMap::new(),
            open: HashMap::new(),
            creating: HashMap::new(),
            bias: HashMap::new(),
            rows: Vec::new(),
            orphan_exits: 0,
            last_exit_ns: None,
            next_unknown_role: 1 << 20,
            children: Vec::new(),
        }
    }

    pub fn push(&mut self, events: &[Event]) {
        let pid = self.ctx.pid;
        for e in events.iter().filter(|e| e.pid == pid) {
            if self.waiting_for_exec {
                if e.kind != EventKind::EXEC {
                    continue;
                }
                self.waiting_for_exec = false;
                self.start_ns = Some(e.ts_ns);
            }
            self.one(e);
        }
    }

    /// Rows recorded so far (attach mode reads them while tracing goes on).
    pub fn rows(&self) -> &[EventRow] {
        &self.rows
    }

    /// Takes out the rows recorded before `cutoff_ns` (a closed window of
    /// an attach without a unit function); the thread and instance state
    /// stays, so later rows continue where these left off.
    pub fn take_rows_before(&mut self, cutoff_ns: u64) -> Vec<EventRow> {
        let (taken, kept) =
            std::mem::take(&mut self.rows).into_iter().partition(|r| r.t_ns < cutoff_ns);
        self.rows = kept;
        taken
    }

    /// The child processes the target started since the last call (pids).
    pub fn take_children(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.children)
    }

    /// Hands over the rows recorded so far (units are cut from them
    /// elsewhere, and the recorder keeps none: memory stays bounded).
    pub fn take_rows(&mut self) -> Vec<EventRow> {
        std::mem::take(&mut self.rows)
    }

    pub fn threads(&mut self) -> &[Thread] {
        self.name_threads();
        &self.threads
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns.unwrap_or(0)
    }

    pub fn finish(mut self) -> Recorded {
        self.name_threads();
        self.threads.sort_by_key(|t| t.role);
        Recorded {
            rows: self.rows,
            threads: self.threads,
            start_ns: self.start_ns.unwrap_or(0),
            orphan_exits: self.orphan_exits,
            last_exit_ns: self.last_exit_ns,
        }
    }

    /// A thread is named after the user function it runs: its start
    /// routine; when that is a language runtime's trampoline (every Rust or
    /// C++ std thread starts in one) or unknown, the name the thread gave
    /// itself if it gave itself one (an explicit choice of the program),
    /// else the user function its runtime's thread body ran (the lambda
    /// of a `std::thread`, the closure given to `thread::spawn`), else the
    /// first traced function it entered (its first non-runtime frame we
    /// see), else "thread".
    fn name_threads(&mut self) {
        let ctx = &self.ctx;
        let bias = &self.bias;
        let main_comm = self.comms.get(&ctx.pid).cloned();
        for t in &mut self.threads {
            if t.role == 0 {
                continue;
            }
            if let Some(addr) = self.unnamed.get(&t.role)
                && let Some(name) = bias
                    .iter()
                    .find_map(|(m, b)| ctx.symbolize.function_at(m, addr.wrapping_sub(*b)))
            {
                t.name = name;
                self.unnamed.remove(&t.role);
            }
            if !(t.name == "thread" || is_trampoline(&t.name)) {
                continue;
            }
            if let Some(comm) = self.comms.get(&t.tid)
                && !comm.is_empty()
                && Some(comm) != main_comm.as_ref()
            {
                t.name = comm.clone();
            } else if let Some(body) = self.body_of.get(&t.role) {
                t.name = body.clone();
            } else if let Some(f) =
                self.first_call.get(&t.role).and_then(|f| ctx.functions.get(*f as usize))
            {
                t.name = f.name.clone();
            }
        }
    }

    /// A thread exited: its final name (`comm`), and the latest exit so
    /// far.
    fn thread_exited(&mut self, e: &Event, t_ns: u64) {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&e.args[0].to_le_bytes());
        bytes[8..].copy_from_slice(&e.args[1].to_le_bytes());
        let end = bytes.iter().position(|b| *b == 0).unwrap_or(16);
        self.comms.insert(e.tid, String::from_utf8_lossy(&bytes[..end]).into_owned());
        self.last_exit_ns = self.last_exit_ns.max(Some(t_ns));
    }

    /// Long (about 130 lines): one arm per kind of kernel event.
    fn one(&mut self, e: &Event) {
        let t_ns = e.ts_ns.saturating_sub(self.start_ns.unwrap_or(0));
        match e.kind {
            EventKind::THREAD => {
                let child = e.func;
                let role = e.args[0] as Role;
                let parent = self.role_of.get(&e.tid).copied();
                if let Some(addr) = self.creating.get(&e.tid) {
                    self.unnamed.insert(role, *addr);
                }
                self.role_of.insert(child, role);
                self.threads.push(Thread {
                    role,
                    tid: child,
                    name: "thread".into(),
                    parent,
                    created_ns: t_ns,
                });
            }
            EventKind::THREAD_EXIT => self.thread_exited(e, t_ns),
            EventKind::ENTRY | EventKind::EXIT | EventKind::UNWOUND => {
                let Some(func) = self.ctx.functions.get(e.func as usize) else { return };
                let role = match self.role_of.get(&e.tid) {
                    Some(r) => *r,
                    None => {
                        // A thread we never saw created (should not happen
                        // when recording from exec): a role of its own.
                        self.next_unknown_role += 1;
                        let role = self.next_unknown_role;
                        self.role_of.insert(e.tid, role);
                        self.threads.push(Thread {
                            role,
                            tid: e.tid,
                            name: "thread".into(),
                            parent: None,
                            created_ns: t_ns,
                        });
                        role
                    }
                };
                if e.kind == EventKind::ENTRY {
                    self.bias
                        .entry(func.module.as_path())
                        .or_insert(e.ret.wrapping_sub(func.address));
                    if let Some(runs) = self.ctx.bodies.get(&func.id) {
                        self.body_of.entry(role).or_insert_with(|| runs.clone());
                    } else if !func.internal {
                        self.first_call.entry(role).or_insert(func.id);
                    }
                    let n = self.counts.entry((role, func.id)).or_insert(0);
                    *n += 1;
                    let instance = *n;
                    // A synchronisation point, or a function probed at its
                    // entry only, has no return probe: its entry is all
                    // there is.
                    if !func.probe.is_sync_point() && crate::bpf::wants_return(func) {
                        self.open.entry(e.tid).or_default().push((func.id, instance));
                    }
                    if Some(func.id) == self.ctx.pthread_create {
                        self.creating.insert(e.tid, e.args[2]);
                    }
                    let mut args = [0i64; 3];
                    for (i, ty) in func.params.iter().take(3).enumerate() {
                        args[i] = ty.normalize(e.args[i]);
                    }
                    self.rows.push(EventRow {
                        t_ns,
                        tid: e.tid,
                        role,
                        func: func.id,
                        point: Point::Entry,
                        instance,
                        args,
                        ret: None,
                        content: pointee_content(func, e),
                    });
                } else {
                    let newest = self.open.get_mut(&e.tid).and_then(|open| {
                        let at = open.iter().rposition(|(f, _)| *f == func.id)?;
                        Some((open, at))
                    });
                    let Some((open, at)) = newest else {
                        self.orphan_exits += 1;
                        return;
                    };
                    // Calls entered after this one that have not ended
                    // cannot outlive it: an unwind the catch did not see
                    // as crossing them (a Rust panic caught below their
                    // frames) or a `longjmp` went past them. They end
                    // here, without returning: a bound on when.
                    let mut ended: Vec<(FuncId, u32)> = open.drain(at..).collect();
                    let (_, instance) = ended.remove(0);
                    for (f, k) in ended.into_iter().rev() {
                        self.rows.push(EventRow {
                            t_ns,
                            tid: e.tid,
                            role,
                            func: f,
                            point: Point::Exit,
                            instance: k,
                            args: [0; 3],
                            ret: None,
                            content: None,
                        });
                    }
                    if Some(func.id) == self.ctx.pthread_create {
                        self.creating.remove(&e.tid);
                    }
                    let ret = (e.kind == EventKind::EXIT).then(|| func.ret.normalize(e.ret));
                    self.rows.push(EventRow {
                        t_ns,
                        tid: e.tid,
                        role,
                        func: func.id,
                        point: Point::Exit,
                        instance,
                        args: [0; 3],
                        ret,
                        content: None,
                    });
                }
            }
            EventKind::CHILD => self.children.push(e.func),
            _ => {}
        }
    }
}

/// What an entry read of the function's pointee, the bytes past what it
/// asked for zeroed (the probe reads a fixed size; what follows a small
/// record is whatever was next to it).
fn pointee_content(func: &Function, e: &Event) -> Option<crate::model::Content> {
    let p = func.pointee.as_ref()?;
    if e.pointee_len == 0 {
        return None;
    }
    let mut c = e.pointee;
    let keep = usize::from(p.len).min(e.pointee_len as usize).min(c.len());
    c[keep..].fill(0);
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ValueKind, ValueType, calls_from_rows, testing::function};

    fn func(id: FuncId, name: &str) -> Function {
        let int = ValueType { kind: ValueKind::Signed, size: 4 };
        function(id, name).in_module("/bin/x", 0).with_types(int, vec![int])
    }

    fn ev(ts: u64, tid: u32, func: u32, kind: EventKind, args: [u64; 3], ret: u64) -> Event {
        Event { ts_ns: ts, pid: 100, tid, func, kind, args, ret, ..Event::default() }
    }

    /// The recording of process 100's `events`, which trace f (0) and g (1).
    fn record_f_g(events: &[Event]) -> Recorded {
        let functions = vec![func(0, "f"), func(1, "g")];
        let ctx = Context {
            pid: 100,
            functions: &functions,
            pthread_create: None,
            bodies: &HashMap::new(),
            symbolize: &|_: &Path, _: u64| None::<String>,
            start_ns: None,
            existing_threads: Vec::new(),
        };
        record(events, ctx)
    }

    /// How one recorded call ended: (function, instance, value, exit,
    /// unwound).
    type End = (FuncId, u32, Option<i64>, Option<u64>, bool);

    fn ends(rec: &Recorded) -> Vec<End> {
        let calls = calls_from_rows(&rec.rows);
        calls.iter().map(|c| (c.func, c.instance, c.ret, c.exit_ns, c.unwound)).collect()
    }

    #[test]
    fn roles_instances_and_recursion_are_exact() {
        let events = vec![
            ev(5, 100, 0, EventKind::ENTRY, [9, 0, 0], 0), // before exec: dropped
            ev(10, 100, 0, EventKind::EXEC, [0; 3], 0),
            ev(20, 100, 0, EventKind::ENTRY, [1, 0, 0], 0),
            ev(21, 100, 0, EventKind::ENTRY, [2, 0, 0], 0), // recursion
            ev(22, 100, 0, EventKind::EXIT, [0; 3], 0xffff_ffff),
            ev(23, 100, 0, EventKind::EXIT, [0; 3], 7),
            ev(30, 100, 101, EventKind::THREAD, [1, 0x3d0f00, 0], 0),
            ev(40, 101, 1, EventKind::ENTRY, [0xffff_fffe, 0, 0], 0),
            ev(41, 101, 1, EventKind::EXIT, [0; 3], 3),
        ];
        let rec = record_f_g(&events);
        assert_eq!(rec.start_ns, 10);
        assert_eq!(rec.threads.len(), 2);
        assert_eq!(
            (rec.threads[1].role, rec.threads[1].tid, rec.threads[1].parent),
            (1, 101, Some(0))
        );
        let calls = calls_from_rows(&rec.rows);
        let summary: Vec<_> = calls
            .iter()
            .map(|c| (c.func, c.role, c.instance, c.args[0], c.ret, c.entry_ns, c.exit_ns))
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, 0, 1, 1, Some(7), 10, Some(13)),
                (0, 0, 2, 2, Some(-1), 11, Some(12)),
                (1, 1, 1, -2, Some(3), 30, Some(31)),
            ]
        );
    }

    /// An exception thrown in g, through f, caught in f's caller: the
    /// probes report each crossed frame's function at the catch
    /// (`UNWOUND`). The newest open call of that function on that thread
    /// ends there, without a return value; the next call returns.
    #[test]
    fn a_call_an_exception_crossed_ends_at_the_catch_without_a_value() {
        let events = vec![
            ev(10, 100, 0, EventKind::EXEC, [0; 3], 0),
            ev(20, 100, 0, EventKind::ENTRY, [1, 0, 0], 0),
            ev(21, 100, 1, EventKind::ENTRY, [2, 0, 0], 0),
            ev(25, 100, 1, EventKind::UNWOUND, [0; 3], 0),
            ev(25, 100, 0, EventKind::UNWOUND, [0; 3], 0),
            ev(30, 100, 0, EventKind::ENTRY, [3, 0, 0], 0),
            ev(31, 100, 0, EventKind::EXIT, [0; 3], 4),
        ];
        let rec = record_f_g(&events);
        assert_eq!(
            ends(&rec),
            vec![
                (0, 1, None, Some(15), true),
                (1, 1, None, Some(15), true),
                (0, 2, Some(4), Some(21), false),
            ]
        );
        assert_eq!(rec.orphan_exits, 0);
    }

    /// A Rust panic caught below the frames it crossed (its catch point
    /// lies deeper than they did), or a `longjmp`: no `UNWOUND` reports
    /// them, but when f returns, the g it called that never returned
    /// cannot still be running. It ends there, without a value.
    #[test]
    fn a_call_still_open_when_its_caller_returns_ends_there_without_a_value() {
        let events = vec![
            ev(10, 100, 0, EventKind::EXEC, [0; 3], 0),
            ev(20, 100, 0, EventKind::ENTRY, [1, 0, 0], 0),
            ev(21, 100, 1, EventKind::ENTRY, [2, 0, 0], 0),
            ev(22, 100, 1, EventKind::ENTRY, [3, 0, 0], 0),
            ev(30, 100, 0, EventKind::EXIT, [0; 3], 5),
        ];
        let rec = record_f_g(&events);
        assert_eq!(
            ends(&rec),
            vec![
                (0, 1, Some(5), Some(20), false),
                (1, 1, None, Some(20), true),
                (1, 2, None, Some(20), true),
            ]
        );
        assert_eq!(rec.orphan_exits, 0);
    }

    /// A run ends when its last thread exits, as the kernel dated it: a
    /// thread blocked in f when another one aborted cannot be in f after
    /// that, however late the agent's wait woke.
    #[test]
    fn the_last_thread_exit_dates_the_end_of_the_run() {
        let exit = |ts, tid| ev(ts, tid, 0, EventKind::THREAD_EXIT, [0x31_74, 0, 0], 0);
        let events = vec![
            ev(10, 100, 0, EventKind::EXEC, [0; 3], 0),
            ev(20, 100, 101, EventKind::THREAD, [1, 0x3d0f00, 0], 0),
            ev(30, 101, 0, EventKind::ENTRY, [1, 0, 0], 0),
            exit(50, 101),
            exit(45, 100),
        ];
        let rec = record_f_g(&events);
        assert_eq!(rec.last_exit_ns, Some(40));
        assert_eq!(ends(&rec), vec![(0, 1, None, None, false)]);
        assert_eq!(record_f_g(&events[..3]).last_exit_ns, None);
    }
}
