//! Runs with hardware watchpoints on named objects: which calls really
//! read or wrote them, where function arguments only say a call was
//! passed the object.
//!
//! An object's address is only known in the run itself (address space
//! randomisation, a heap that depends on timing), so each object names
//! where to learn it — the entry or exit of a call of the base run — and
//! the run is an intervened one: that call's thread is stopped there (a
//! hold, the intervention mechanism's) until the agent has read
//! the address from its registers (an argument, the return value) or added
//! the load bias to a global's ELF address, and opened the two breakpoints
//! of the address on every thread of the target. Threads created later
//! inherit them. A global is armed at the first traced call of the main
//! thread, before other threads exist.
//!
//! Limits: 4 debug registers per thread and 2 breakpoints per address (x86
//! has no read-only data breakpoint; a write fires the write and the
//! read-or-write breakpoint, a read only the latter) make at most
//! [`MAX_OBJECTS`] objects per run; a breakpoint covers at most 8 aligned
//! bytes, so an object is watched on its first word; accesses before the
//! object is armed are not seen; and a thread created during the arming
//! itself (tens of microseconds) may be missed.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::atomic::AtomicBool,
    time::{Duration, Instant},
};

use aid_common::{ActionKind, DelayOn, HitKind, WatchConfig, WatchHit};
use nix::{sys::ptrace, unistd::Pid};
use object::{Object as _, ObjectKind, ObjectSegment as _};
use serde::{Deserialize, Serialize};

use crate::{
    bpf::{
        Probes,
        watch::{Breakpoints, WatchError},
    },
    intervene::{Plan, site_key},
    model::{Point, RecordedRun, Run, Site, memory::MemAccess},
    record::{
        fail::RunPolicy,
        tracer::{RunHook, TraceError, Tracer},
    },
    sys::{proc, spawn::Target},
};

/// Objects one run can watch: 4 debug registers, 2 per address.
pub const MAX_OBJECTS: usize = 2;

/// Longest hold of the thread that learns an address: it is let go as
/// soon as the agent has armed the object (microseconds, tens on a busy
/// machine); this only bounds a hold the agent cannot end (it is stuck).
const ARM_HOLD_MAX_US: u64 = 1_000_000;

/// How often hits are drained during the run (the buffer holds ~130,000).
const DRAIN_EVERY: Duration = Duration::from_millis(5);

/// Where the address of a watched object comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Locate {
    /// A global of the executable at this ELF virtual address.
    Global { elf_addr: u64 },
    /// Argument `arg` (0, 1 or 2) at the arming site, an entry.
    Arg { arg: u8 },
    /// The return value at the arming site, an exit.
    Ret,
}

/// One object to watch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchObject {
    /// As named: the object, or a word in it (`pool+0x20`).
    pub name: String,
    /// The object's canonical name (`events`, `main:make_cell#1.ret`):
    /// accesses are accesses of it.
    pub object: String,
    /// Bytes from the object's start to the watched word (an argument or
    /// return value locates the object's start; a global's ELF address
    /// already includes it).
    pub offset: u64,
    /// The object's size, when known (globals): more than `len` means only
    /// a part of it is watched.
    pub size: Option<u64>,
    pub locate: Locate,
    /// The call where the address is learned and the breakpoints opened
    /// (roles as numbered in the base run).
    pub arm_at: Site,
    pub arm_point: Point,
    /// Bytes watched from `offset`: 1, 2, 4 or 8.
    pub len: u64,
    /// The watched word holds every byte of the object that the
    /// executable's code touches outside its lock calls
    /// ([`touches`](crate::symbols::touches)): the object is watched whole
    /// as far as the program's code goes, though `len` < `size`.
    #[serde(default)]
    pub touched: bool,
    /// When `touched`: the member of the object's record that holds the
    /// watched bytes, from DWARF (`balance`, `stats.count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

impl WatchObject {
    /// Only the first `len` bytes of a larger object are watched, and it
    /// was named as a whole (not as one of its words).
    pub fn partial(&self) -> bool {
        !self.touched
            && self.offset == 0
            && self.name == self.object
            && self.size.is_some_and(|s| s > self.len)
    }
}

/// A delay right after each access of a kind (failure amplification).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchDelay {
    /// After writes only, or after every access.
    pub writes_only: bool,
    pub delay_us: u64,
    /// At most this many delays per run.
    pub max: u32,
}

/// What to watch in each run, and the executable's layout to place
/// globals with.
#[derive(Clone, Debug)]
pub struct Watcher {
    pub objects: Vec<WatchObject>,
    pub delay: Option<WatchDelay>,
    program: PathBuf,
    /// Position-independent: globals move with the load bias.
    pie: bool,
    /// (file offset, file size, ELF address) of each segment.
    segments: Vec<(u64, u64, u64)>,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchSetupError {
    #[error(
        "{0} objects to watch, at most {MAX_OBJECTS} fit a thread's 4 debug registers (2 per object): name fewer"
    )]
    TooMany(usize),
    #[error("nothing to watch")]
    Nothing,
    #[error("cannot read {}: {reason}", path.display())]
    Program { path: PathBuf, reason: String },
    #[error("{name}: a breakpoint covers 1, 2, 4 or 8 bytes, not {len}")]
    Len { name: String, len: u64 },
}

impl Watcher {
    /// Checks the objects fit one run and reads `program`'s segments.
    pub fn new(
        program: &Path,
        objects: Vec<WatchObject>,
        delay: Option<WatchDelay>,
    ) -> Result<Watcher, WatchSetupError> {
        if objects.is_empty() {
            return Err(WatchSetupError::Nothing);
        }
        if objects.len() > MAX_OBJECTS {
            return Err(WatchSetupError::TooMany(objects.len()));
        }
        if let Some(o) = objects.iter().find(|o| ![1, 2, 4, 8].contains(&o.len)) {
            return Err(WatchSetupError::Len { name: o.name.clone(), len: o.len });
        }
        let fail = |reason: String| WatchSetupError::Program { path: program.to_owned(), reason };
        let bytes = std::fs::read(program).map_err(|e| fail(e.to_string()))?;
        let file = object::File::parse(&*bytes).map_err(|e| fail(e.to_string()))?;
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        Ok(Watcher {
            objects,
            delay,
            program: program.canonicalize().unwrap_or_else(|_| program.to_owned()),
            pie: file.kind() != ObjectKind::Executable,
            segments,
        })
    }

    /// The executable's load bias in process `pid`, from its mappings.
    fn bias(&self, pid: u32) -> Option<u64> {
        if !self.pie {
            return Some(0);
        }
        proc::mappings_of(pid, &self.program).into_iter().find_map(|(start, offset)| {
            let (off, _, addr) = self
                .segments
                .iter()
                .find(|(off, size, _)| offset >= *off && offset < off + size.max(&1))?;
            Some(start.wrapping_sub(addr + (offset - off)) & !0xfff)
        })
    }

    /// `plan` plus the holds that arm each object (not interventions: the
    /// run records none for them): the thread that reaches an object's
    /// arming site is held until the agent marks the object armed
    /// (`armed_site`).
    pub fn plan(&self, plan: &Plan) -> Plan {
        let mut plan = plan.clone();
        for (i, o) in self.objects.iter().enumerate() {
            let key = site_key(o.arm_at, o.arm_point);
            for site in [key, armed_site(i)] {
                if !plan.stamp.contains(&site) {
                    plan.stamp.push(site);
                }
            }
            if plan.actions.iter().any(|(k, _, _)| *k == key) {
                continue;
            }
            let action = aid_common::Action {
                kind: ActionKind::HOLD_UNTIL,
                other: armed_site(i),
                timeout_us: ARM_HOLD_MAX_US,
                ..aid_common::Action::default()
            };
            plan.actions.push((key, action, usize::MAX));
        }
        plan.stamp.sort();
        plan
    }
}

/// The event "object `i` is armed" ([`aid_common::WATCH_ARMED_FUNC`]):
/// the agent marks it happened once it has armed the object (or given
/// up), which lets go of the thread held at the arming site.
fn armed_site(i: usize) -> aid_common::SiteKey {
    aid_common::SiteKey {
        func: aid_common::WATCH_ARMED_FUNC,
        role: i as u32,
        instance: 0,
        point: aid_common::SitePoint::ENTRY,
    }
}

/// What became of one object in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Armed {
    /// As named (`pool+0x20`), and the object it is in (`pool`).
    pub name: String,
    #[serde(default)]
    pub object: String,
    /// The address watched, once known.
    pub addr: Option<u64>,
    /// The object's start (the watched address less the offset).
    #[serde(default)]
    pub base: Option<u64>,
    /// When the breakpoints were in place (ns since the run started).
    pub at_ns: Option<u64>,
    /// Threads it was opened on (threads created later inherit it).
    pub threads: u32,
    /// Why it was not watched, or not on every thread.
    pub errors: Vec<String>,
}

/// A run with watchpoints: the run, the accesses the breakpoints saw, and
/// what became of each object.
pub struct WatchedRun {
    pub rec: RecordedRun,
    /// In time order.
    pub accesses: Vec<MemAccess>,
    pub armed: Vec<Armed>,
    /// Hits dropped because the buffer was full.
    pub lost_hits: u64,
    /// Hits of threads the run does not know (none expected).
    pub stray_hits: u64,
}

/// Runs the target once with `plan`'s interventions and the watcher's
/// objects watched.
pub fn watched_run(
    tracer: &mut Tracer,
    target: &Target,
    id: u32,
    policy: &RunPolicy,
    plan: &Plan,
    watcher: &Watcher,
    cancel: &AtomicBool,
) -> Result<WatchedRun, TraceError> {
    let plan = watcher.plan(plan);
    let mut hook = Arming {
        watcher,
        armed: watcher
            .objects
            .iter()
            .map(|o| Armed { name: o.name.clone(), object: o.object.clone(), ..Armed::default() })
            .collect(),
        armed_ns: vec![None; watcher.objects.len()],
        not_stopped: vec![None; watcher.objects.len()],
        breakpoints: Vec::new(),
        hits: Vec::new(),
        lost: 0,
        drained: Instant::now(),
    };
    let rec = tracer.intervene_hooked(target, id, policy, &plan, cancel, &mut hook)?;
    let Arming { mut armed, armed_ns, hits, lost, .. } = hook;
    for (a, t) in armed.iter_mut().zip(&armed_ns) {
        a.at_ns = t.map(|t| t.saturating_sub(rec.start_ns));
    }
    let addrs: BTreeMap<u64, String> =
        armed.iter().filter_map(|a| Some((a.addr?, a.object.clone()))).collect();
    let (accesses, stray_hits) = attribute(&hits, &rec.run, rec.start_ns, &addrs);
    Ok(WatchedRun { rec, accesses, armed, lost_hits: lost, stray_hits })
}

/// Why an object's address is not known (yet).
enum Unlocated {
    /// Its thread is not stopped at the arming site: it may still be on
    /// its way to the stop.
    NotStopped(String),
    Never(String),
}

/// The run hook that arms the objects.
struct Arming<'w> {
    watcher: &'w Watcher,
    armed: Vec<Armed>,
    /// Monotonic time each object was armed.
    armed_ns: Vec<Option<u64>>,
    /// Why the thread at an object's reached site could not be read yet.
    not_stopped: Vec<Option<String>>,
    breakpoints: Vec<Breakpoints>,
    hits: Vec<WatchHit>,
    lost: u64,
    drained: Instant,
}

impl Arming<'_> {
    fn drain(&mut self, probes: &mut Probes) {
        match probes.take_watch_hits() {
            Ok((mut hits, lost)) => {
                self.hits.append(&mut hits);
                self.lost += lost;
            }
            Err(e) => log::warn!("reading watchpoint hits: {e}"),
        }
        self.drained = Instant::now();
    }

    /// Arms object `i` if its site has been reached: its thread is held
    /// there now, and let go once the object is armed (or cannot be).
    fn arm(&mut self, i: usize, probes: &mut Probes, pid: u32) {
        let o = &self.watcher.objects[i];
        let site = site_key(o.arm_at, o.arm_point);
        if probes.reached(&site).is_none() {
            return;
        }
        let started = crate::bpf::monotonic_ns();
        let addr = match self.locate(i, probes, pid) {
            Ok(a) => a,
            // The probe marks the site before its thread stops for the
            // agent: until the thread is let go (the site happened), a
            // thread not stopped yet is on its way to the stop.
            Err(Unlocated::NotStopped(e)) if probes.happened(&site).is_none() => {
                self.not_stopped[i] = Some(e);
                return;
            }
            Err(Unlocated::NotStopped(e) | Unlocated::Never(e)) => {
                self.armed_ns[i] = Some(started);
                self.armed[i].errors.push(e);
                probes.set_happened(&armed_site(i), crate::bpf::monotonic_ns());
                return;
            }
        };
        self.armed_ns[i] = Some(started);
        self.armed[i].addr = Some(addr);
        self.armed[i].base = Some(addr.wrapping_sub(o.offset));
        let len = o.len;
        for tid in proc::thread_ids(pid).unwrap_or_default() {
            match probes.watch_address(tid, addr, len) {
                Ok(b) => {
                    self.breakpoints.push(b);
                    self.armed[i].threads += 1;
                }
                // The thread ended meanwhile.
                Err(WatchError::Open { reason, .. }) if reason.contains("No such process") => {}
                Err(e) => self.armed[i].errors.push(e.to_string()),
            }
        }
        probes.set_happened(&armed_site(i), crate::bpf::monotonic_ns());
    }

    /// The object's address, read from the held thread's registers or
    /// placed with the load bias.
    fn locate(&self, i: usize, probes: &Probes, pid: u32) -> Result<u64, Unlocated> {
        let o = &self.watcher.objects[i];
        if let Locate::Global { elf_addr } = o.locate {
            let bias = self
                .watcher
                .bias(pid)
                .ok_or_else(|| Unlocated::Never("the executable is not mapped".into()))?;
            return Ok(elf_addr.wrapping_add(bias));
        }
        let tid = probes.thread_of_role(o.arm_at.role).ok_or_else(|| {
            Unlocated::Never(format!("no thread has role {} in this run", o.arm_at.role))
        })?;
        // Only a stopped thread's registers can be read: this also checks
        // the thread is held at the site.
        let regs = ptrace::getregs(Pid::from_raw(tid as i32)).map_err(|e| {
            Unlocated::NotStopped(format!("thread {tid} was not stopped at the arming site (it ran on: {e}); its accesses until then are not seen"))
        })?;
        let start = match o.locate {
            Locate::Arg { arg: 0 } => regs.rdi,
            Locate::Arg { arg: 1 } => regs.rsi,
            Locate::Arg { arg: 2 } => regs.rdx,
            Locate::Arg { arg } => {
                return Err(Unlocated::Never(format!("argument {arg} is not recorded")));
            }
            Locate::Ret => regs.rax,
            Locate::Global { .. } => unreachable!("handled above"),
        };
        Ok(start.wrapping_add(o.offset))
    }
}

impl RunHook for Arming<'_> {
    fn started(&mut self, probes: &mut Probes, _pid: u32) -> Result<(), crate::bpf::ProbeError> {
        probes.load_watch_programs()?;
        // Hits of an earlier run are not this one's.
        let _ = probes.take_watch_hits()?;
        let config = match self.watcher.delay {
            Some(d) => WatchConfig {
                delay_us: d.delay_us,
                delay_on: if d.writes_only { DelayOn::WRITES } else { DelayOn::ANY },
                delays_left: d.max,
            },
            None => WatchConfig::default(),
        };
        probes.set_watch_config(config)
    }

    fn tick(&mut self, probes: &mut Probes, pid: u32) {
        for i in 0..self.watcher.objects.len() {
            if self.armed_ns[i].is_none() {
                self.arm(i, probes, pid);
            }
        }
        if self.drained.elapsed() >= DRAIN_EVERY {
            self.drain(probes);
        }
    }

    fn ended(&mut self, probes: &mut Probes) {
        self.drain(probes);
        self.breakpoints.clear();
        let _ = probes.set_watch_config(WatchConfig::default());
        for ((a, t), why) in self.armed.iter_mut().zip(&self.armed_ns).zip(&mut self.not_stopped) {
            if t.is_none() && a.errors.is_empty() {
                let why = why.take().unwrap_or_else(|| "its arming site was not reached".into());
                a.errors.push(why);
            }
        }
    }
}

/// Accesses from raw hits: the two hits of a write (same thread, address
/// and instruction, one after the other) are one write, a lone
/// read-or-write hit a read; each is attributed to the innermost traced
/// call active on its thread, and named by `objects` (watched address →
/// the object it is in). Returns them in time order, with the number of
/// hits of threads the run does not know.
pub fn attribute(
    hits: &[WatchHit],
    run: &Run,
    start_ns: u64,
    objects: &BTreeMap<u64, String>,
) -> (Vec<MemAccess>, u64) {
    let role_of: BTreeMap<u32, u32> = run.threads.iter().map(|t| (t.tid, t.role)).collect();
    let mut by_tid: BTreeMap<u32, Vec<&WatchHit>> = BTreeMap::new();
    for h in hits {
        by_tid.entry(h.tid).or_default().push(h);
    }
    let mut stray = 0;
    let mut out = Vec::new();
    for (tid, mut list) in by_tid {
        let Some(&role) = role_of.get(&tid) else {
            stray += list.len() as u64;
            continue;
        };
        list.sort_by_key(|h| h.ts_ns);
        let mut i = 0;
        while i < list.len() {
            let h = list[i];
            let pair = list
                .get(i + 1)
                .is_some_and(|n| n.addr == h.addr && n.ip == h.ip && n.kind != h.kind);
            let write = pair || h.kind == HitKind::WRITE;
            i += if pair { 2 } else { 1 };
            let Some(object) = objects.get(&h.addr) else { continue };
            let t_ns = h.ts_ns.saturating_sub(start_ns);
            out.push(MemAccess {
                t_ns,
                tid,
                role,
                object: object.clone(),
                addr: h.addr,
                write,
                call: active_call(run, role, t_ns),
                ip: h.ip,
            });
        }
    }
    out.sort_by_key(|a| (a.t_ns, a.tid));
    (out, stray)
}

/// The innermost call on `role` active at `t_ns`: the latest-entered one
/// that had not returned.
pub fn active_call(run: &Run, role: u32, t_ns: u64) -> Option<usize> {
    run.calls
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.role == role && c.entry_ns <= t_ns && c.exit_ns.is_none_or(|x| x >= t_ns)
        })
        .max_by_key(|(i, c)| (c.entry_ns, *i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label, Thread,
        testing::{call, run},
    };

    fn hit(ts_ns: u64, tid: u32, ip: u64, kind: HitKind) -> WatchHit {
        WatchHit { ts_ns, addr: 0x5000, ip, tid, kind }
    }

    /// A write's two hits are one write, wherever the kernel put them;
    /// a lone read-or-write hit is a read; each goes to the innermost call
    /// open on its thread, or to none.
    #[test]
    fn hits_become_reads_and_writes_of_the_innermost_call() {
        let mut r = run(
            1,
            Label::Pass,
            vec![
                call(0, 0, 1, 100, Some(900), Some(0)), // outer on main
                call(1, 0, 1, 200, Some(300), Some(0)), // inner on main
                call(2, 1, 1, 400, Some(500), Some(0)), // on the worker
            ],
            1000,
        );
        r.threads = vec![
            Thread { role: 0, tid: 10, name: "main".into(), parent: None, created_ns: 0 },
            Thread { role: 1, tid: 11, name: "worker".into(), parent: Some(0), created_ns: 50 },
        ];
        let start = 1_000_000;
        let hits = vec![
            hit(start + 250, 10, 0x10, HitKind::READ_WRITE), // read in inner
            hit(start + 260, 10, 0x20, HitKind::WRITE),      // write in inner
            hit(start + 260, 10, 0x20, HitKind::READ_WRITE),
            hit(start + 450, 11, 0x30, HitKind::READ_WRITE), // write on the worker,
            hit(start + 450, 11, 0x30, HitKind::WRITE),      // halves the other way
            hit(start + 600, 10, 0x10, HitKind::READ_WRITE), // read in outer
            hit(start + 950, 10, 0x10, HitKind::READ_WRITE), // read outside any call
            hit(start + 960, 99, 0x10, HitKind::READ_WRITE), // unknown thread
        ];
        let objects = BTreeMap::from([(0x5000, "cell".to_owned())]);
        let (acc, stray) = attribute(&hits, &r, start, &objects);
        let got: Vec<(u64, u32, bool, Option<usize>)> =
            acc.iter().map(|a| (a.t_ns, a.role, a.write, a.call)).collect();
        assert_eq!(
            got,
            vec![
                (250, 0, false, Some(1)),
                (260, 0, true, Some(1)),
                (450, 1, true, Some(2)),
                (600, 0, false, Some(0)),
                (950, 0, false, None),
            ]
        );
        assert_eq!(stray, 1);
    }
}
