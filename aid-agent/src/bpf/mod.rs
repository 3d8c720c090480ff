//! Loading the eBPF object, attaching it to one target process, and reading
//! what it reports: the event stream, lost-event and error counters.
//!
//! Everything the kernel holds for us is tied to file descriptors of this
//! process (perf events, links, maps), so probes disappear when the agent
//! exits for any reason, SIGKILL included; nothing is pinned.

use std::{
    os::fd::AsRawFd as _,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::Duration,
};

use aid_common::{
    Action, CallKey, CallStack, EntryRegs, Event, GLOBAL_STOP_SIGNAL, GLOBAL_TASK_PID, GroupMember,
    GroupSlot, HELD_MARK, LostSlot, MAP_ACTIONS, MAP_CALLS, MAP_ENTRY_REGS, MAP_ERRORS, MAP_EVENTS,
    MAP_GROUPS, MAP_LIVE_UNIT, MAP_LOST, MAP_OPEN_MEMBERS, MAP_PENDING, MAP_POINTEE, MAP_REPLAY,
    MAP_ROLE_POOL, MAP_ROLES, MAP_RUNNING, MAP_SYNC_STEPS, MAP_TARGET, MAP_UNIT_STATE, MAP_WATCH,
    OpenMember, Pending, PointeeSpec, ProbeErrorKind, Replay, RunningKey, SiteKey, TargetFlags,
    TargetState, UNITS_IN_FLIGHT, UnitState,
};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, Queue, RingBuf},
    programs::{
        RawTracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLinkId, UProbeScope},
    },
};
use tokio::io::{Interest, unix::AsyncFd};

pub mod btf;
pub mod check;
pub mod entry_only;
mod scope;
pub mod uprobe_multi;
pub mod watch;

pub use scope::{Attachment, Mechanism, Reaper};

use crate::{
    bpf::{
        btf::BtfError,
        uprobe_multi::{MultiError, MultiProgram},
    },
    model::{Function, Probe},
    sys::poll,
};

/// The attach cookie of a function: its id, flagged for synchronisation
/// points (their entry probe counts them, records each thread's first
/// ones and serves noise).
pub fn cookie(f: &Function) -> u64 {
    let flag = if f.probe == Probe::Sync { aid_common::SYNC_COOKIE_BIT } else { 0 };
    u64::from(f.id | flag)
}

/// Whether `f` gets a return probe: it asks for one, and it is not among
/// the functions whose return probe would harm the target
/// ([`entry_only`]).
pub fn wants_return(f: &Function) -> bool {
    f.probes_return() && entry_only::reason(&f.symbol).is_none()
}

/// The eBPF object built by `build.rs`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/aid"));

/// Roles handed to new threads per run (the queue's capacity).
pub const MAX_ROLES: u32 = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "root or the capabilities {needed} are needed{purpose} (missing: {missing}): run aid-agent with sudo, or grant it those capabilities"
    )]
    Privileges { needed: String, purpose: &'static str, missing: String },
    #[error(
        "this kernel has no uprobe support (/sys/bus/event_source/devices/uprobe is missing): it needs CONFIG_UPROBES and CONFIG_UPROBE_EVENTS"
    )]
    NoUprobes,
    #[error(
        "this kernel has no type information ({}): it needs CONFIG_DEBUG_INFO_BTF",
        btf::VMLINUX
    )]
    NoBtf,
    #[error("loading the eBPF object failed: {0}")]
    Load(String),
    #[error("attaching {what} failed: {reason}")]
    Attach { what: String, reason: String },
    #[error("eBPF map {name}: {reason}")]
    Map { name: &'static str, reason: String },
    #[error(transparent)]
    Multi(#[from] MultiError),
    #[error(transparent)]
    Btf(#[from] BtfError),
    #[error(transparent)]
    Check(#[from] check::CheckError),
}

/// Which program pair to attach: the recorder (which also triggers
/// interventions in runs that have them), or programs that do nothing (the
/// benchmark floor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Programs {
    Record,
    Empty,
}

impl Programs {
    /// Names of the entry and exit programs in the eBPF object.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Programs::Record => ("enter_fn", "exit_fn"),
            Programs::Empty => ("enter_empty", "exit_empty"),
        }
    }
}

/// Which processes the probes fire in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every process running the traced code, attached once per session;
    /// the target map filters. Bystanders running the same code trap into
    /// the probes (and may get SIGILL from return probes): kept as the
    /// benchmark baseline only.
    AllProcesses,
    /// One running process (attach mode), for the whole session.
    Process(u32),
    /// The target of each run: attached by [`Probes::begin_target`] to the
    /// child held before its exec (the probes follow it into the new
    /// image), detached in the background by [`Probes::end_target`].
    Target,
}

#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Ring buffer size in bytes (a power of two, at least one page).
    pub ring_bytes: u32,
    /// Signal used to stop a thread for the agent.
    pub stop_signal: i32,
    /// How probes are scoped to one process.
    pub mechanism: Mechanism,
    /// Most functions a session may probe (an entry and a return probe
    /// each): a pattern matching more is refused before anything is
    /// attached (`--max-probes`).
    pub max_functions: usize,
}

/// The default probe budget, bpftrace's default program limit.
pub const MAX_FUNCTIONS: usize = 512;

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            ring_bytes: 64 << 20,
            stop_signal: libc::SIGURG,
            mechanism: Mechanism::Auto,
            max_functions: MAX_FUNCTIONS,
        }
    }
}

/// `CLOCK_MONOTONIC` in ns: the clock of `bpf_ktime_get_ns`, so times the
/// agent takes compare exactly with event times.
pub fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// What a session does that needs privileges beyond an ordinary user's
/// (measured with a capability-only user: `tests/it/privileges.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Load the eBPF programs and maps, attach uprobes and raw tracepoints,
    /// and be the ptrace tracer of the target — a child of the agent, or
    /// a process of the same user (`record`, `debug`, `attach`).
    Trace,
    /// The same for a running process of another user (or one that made
    /// itself undumpable): reading its memory map and tracing it.
    TraceOtherUsers,
}

/// A capability aid may need (bit in the capability sets, name).
struct Capability {
    bit: u32,
    name: &'static str,
}

const CAP_SYS_PTRACE: Capability = Capability { bit: 19, name: "CAP_SYS_PTRACE" };
const CAP_PERFMON: Capability = Capability { bit: 38, name: "CAP_PERFMON" };
const CAP_BPF: Capability = Capability { bit: 39, name: "CAP_BPF" };

impl Needs {
    /// CAP_BPF creates maps and loads programs; CAP_PERFMON lets them be
    /// tracing programs (uprobes, raw tracepoints, reading kernel memory);
    /// CAP_SYS_PTRACE lets the agent read and trace processes of other
    /// users. Nothing else: no tracefs mount (CAP_SYS_ADMIN), no locked
    /// memory limit (maps are charged to the memory cgroup).
    fn capabilities(self) -> &'static [Capability] {
        match self {
            Needs::Trace => &[CAP_BPF, CAP_PERFMON],
            Needs::TraceOtherUsers => &[CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE],
        }
    }

    fn purpose(self) -> &'static str {
        match self {
            Needs::Trace => "",
            Needs::TraceOtherUsers => " to trace a process of another user",
        }
    }
}

/// Checks, before anything is loaded, that this process may do what
/// `needs` says, and that the kernel has uprobes and type information.
/// Nothing is mounted: the probes and tracepoints need no tracefs.
pub fn preflight(needs: Needs) -> Result<(), ProbeError> {
    let missing = missing_capabilities(needs);
    if !missing.is_empty() {
        let all: Vec<&str> = needs.capabilities().iter().map(|c| c.name).collect();
        return Err(ProbeError::Privileges {
            needed: and_list(&all),
            purpose: needs.purpose(),
            missing: and_list(&missing),
        });
    }
    if !Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        return Err(ProbeError::NoUprobes);
    }
    if !Path::new(btf::VMLINUX).exists() {
        return Err(ProbeError::NoBtf);
    }
    Ok(())
}

/// The capabilities `needs` asks for that this process does not have
/// (none for root).
fn missing_capabilities(needs: Needs) -> Vec<&'static str> {
    if nix::unistd::geteuid().is_root() {
        return Vec::new();
    }
    let effective = crate::sys::proc::effective_capabilities().unwrap_or(0);
    needs.capabilities().iter().filter(|c| effective & (1 << c.bit) == 0).map(|c| c.name).collect()
}

fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The loaded eBPF object and the probes currently attached.
pub struct Probes {
    ebpf: Ebpf,
    /// Probes for all processes ([`Scope::AllProcesses`]).
    attached: Vec<(&'static str, UProbeLinkId)>,
    /// The entry/exit programs loaded a second time for uprobe_multi links
    /// (empty when the scoping mechanism is perf events).
    multi: Vec<MultiProgram>,
    mechanism: Mechanism,
    /// [`Scope::Target`]: what to attach to each run's target.
    per_run: Option<(Vec<Function>, Programs)>,
    /// Whether the next runs' targets get the synchronisation points among
    /// `per_run` ([`Probes::set_sync_points`]).
    sync_points: bool,
    /// Probes scoped to one process, and that process.
    scoped: Option<(u32, Attachment)>,
    reaper: Reaper,
    reg_write: bool,
    ring: Option<(RingBuf<MapData>, Logger)>,
}

/// aya-log's reader of the programs' log ring.
type Logger = aya_log::EbpfLogger<&'static dyn log::Log>;

/// How many of the programs' records an agent shows at info level (`-v`);
/// the rest go to debug (`-vv`). A probe that fails for every thread of a
/// big program writes thousands of records: `-v` shows the first few and
/// the per-kind count (always shown), `-vv` every one.
pub const PROBE_RECORDS_AT_INFO: u64 = 10;

/// Forwards the programs' aya-log records to the agent's logger at the
/// level [`PROBE_RECORDS_AT_INFO`] gives them; errors and warnings keep
/// theirs.
struct ProbeLog {
    seen: std::sync::atomic::AtomicU64,
}

static PROBE_LOG: ProbeLog = ProbeLog { seen: std::sync::atomic::AtomicU64::new(0) };

impl log::Log for ProbeLog {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        let floor = if n <= PROBE_RECORDS_AT_INFO { log::Level::Info } else { log::Level::Debug };
        let level = record.level().min(floor);
        let more = if n == PROBE_RECORDS_AT_INFO { " (further records at -vv)" } else { "" };
        log::logger().log(
            &log::Record::builder()
                .args(format_args!("{}{more}", record.args()))
                .level(level)
                .target(record.target())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        log::logger().flush();
    }
}

impl Probes {
    /// Loads every program, attaches the thread and exec tracepoints (they
    /// only act on processes in the target map), and learns whether this
    /// kernel lets BPF write registers.
    pub fn load(options: LoadOptions) -> Result<Probes, ProbeError> {
        let signal = options.stop_signal as u32;
        let task_pid = btf::task_pid_offset()?;
        let mut ebpf = EbpfLoader::new()
            .map_max_entries(MAP_EVENTS, options.ring_bytes)
            .override_global(GLOBAL_STOP_SIGNAL, &signal, true)
            .override_global(GLOBAL_TASK_PID, &task_pid, true)
            .load(OBJECT)
            .map_err(|e| ProbeError::Load(format!("{e:#}")))?;
        for name in ["enter_fn", "exit_fn", "enter_empty", "exit_empty"] {
            let prog: &mut UProbe = program(&mut ebpf, name)?;
            prog.load().map_err(|e| ProbeError::Load(format!("{name}: {}", chain(&e))))?;
        }
        // Raw tracepoints are attached by name: no tracefs, no mount.
        for (name, event) in [
            ("thread_new", "task_newtask"),
            ("exec_seen", "sched_process_exec"),
            ("thread_exit", "sched_process_exit"),
        ] {
            let prog: &mut RawTracePoint = program(&mut ebpf, name)?;
            prog.load().map_err(|e| ProbeError::Load(format!("{name}: {}", chain(&e))))?;
            prog.attach(event).map_err(|e| ProbeError::Attach {
                what: format!("raw tracepoint {event}"),
                reason: chain(&e),
            })?;
        }
        let reg_write = {
            let prog: &mut UProbe = program(&mut ebpf, "probe_reg_write")?;
            prog.load().is_ok()
        };
        // Before any map is taken out of `ebpf`: the second load binds to
        // all of them.
        let (multi, mechanism) = load_multi(&ebpf, options.mechanism)?;
        // The programs' own diagnostics (aya-log: failures only), read
        // beside the events and forwarded to `log` (the first few at `-v`,
        // all at `-vv`).
        let logger = aya_log::EbpfLogger::init_with_logger(&mut ebpf, &PROBE_LOG as &dyn log::Log)
            .map_err(|e| ProbeError::Map { name: "AYA_LOGS", reason: e.to_string() })?;
        let ring = RingBuf::try_from(
            ebpf.take_map(MAP_EVENTS)
                .ok_or(ProbeError::Map { name: MAP_EVENTS, reason: "missing".into() })?,
        )
        .map_err(|e| ProbeError::Map { name: MAP_EVENTS, reason: e.to_string() })?;
        Ok(Probes {
            ebpf,
            attached: Vec::new(),
            multi,
            mechanism,
            per_run: None,
            sync_points: false,
            scoped: None,
            reaper: Reaper::new(),
            reg_write,
            ring: Some((ring, logger)),
        })
    }

    /// Whether uprobe programs may write registers on this kernel (then
    /// return overrides could be done in BPF without stopping the thread).
    pub fn kernel_writes_registers(&self) -> bool {
        self.reg_write
    }

    /// Hands the ring buffer to a reader thread (once).
    pub fn event_stream(&mut self) -> EventStream {
        let (ring, logger) = self.ring.take().expect("event stream taken twice");
        EventStream::spawn(ring, logger)
    }

    /// Names of the maps of the loaded object. The ring buffer is among
    /// them: loading took it out of the object by that name (and fails
    /// without it) to hand it to the event stream.
    pub fn map_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.ebpf.maps().map(|(n, _)| n.to_owned()).collect();
        names.push(MAP_EVENTS.to_owned());
        names.sort();
        names
    }

    /// How probes are scoped to one process on this kernel.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Registers `pid` (held before its exec) as the target of a run: it is
    /// recorded from its exec on, its main thread is role 0, the role pool
    /// is refilled for the threads it will create, and `intervene` says
    /// whether the action map applies. With [`Scope::Target`], the probes
    /// are attached to it here.
    pub fn begin_target(&mut self, pid: u32, intervene: bool) -> Result<(), ProbeError> {
        if let Some((functions, programs)) = self.per_run.take() {
            if let Some((_, old)) = self.scoped.take() {
                self.reaper.detach(old);
            }
            let attached = if self.sync_points {
                self.attach_scoped(&functions, pid, programs)
            } else {
                let calls: Vec<Function> =
                    functions.iter().filter(|f| f.probe != Probe::Sync).cloned().collect();
                self.attach_scoped(&calls, pid, programs)
            };
            self.per_run = Some((functions, programs));
            self.scoped = Some((pid, attached?));
        }
        self.clear_run_state()?;
        let mut pool: Queue<_, u32> = map(&mut self.ebpf, MAP_ROLE_POOL)?;
        while pool.pop(0).is_ok() {}
        for role in 1..=MAX_ROLES {
            pool.push(role, 0).map_err(|e| map_err(MAP_ROLE_POOL, e))?;
        }
        let mut roles: BpfHashMap<_, u32, u32> = map(&mut self.ebpf, MAP_ROLES)?;
        roles.insert(pid, 0, 0).map_err(|e| map_err(MAP_ROLES, e))?;
        let mut flags = if intervene { TargetFlags::INTERVENE } else { TargetFlags::NONE };
        if self.sync_points {
            flags = flags.with(TargetFlags::SYNC_EVENTS);
        }
        self.set_target(TargetState { tgid: pid, _pad: 0, flags })
    }

    fn set_target(&mut self, state: TargetState) -> Result<(), ProbeError> {
        let mut target: aya::maps::Array<_, TargetState> = map(&mut self.ebpf, MAP_TARGET)?;
        target.set(0, state, 0).map_err(|e| map_err(MAP_TARGET, e))
    }

    fn target(&self) -> Result<TargetState, ProbeError> {
        let m = self
            .ebpf
            .map(MAP_TARGET)
            .ok_or(ProbeError::Map { name: MAP_TARGET, reason: "missing".into() })?;
        let target: aya::maps::Array<_, TargetState> = aya::maps::Array::try_from(m)
            .map_err(|e| ProbeError::Map { name: MAP_TARGET, reason: e.to_string() })?;
        target.get(&0, 0).map_err(|e| map_err(MAP_TARGET, e))
    }

    /// Stops recording `pid` (its number may be reused by another process)
    /// and, with [`Scope::Target`], detaches its probes in the background.
    pub fn end_target(&mut self, pid: u32) -> Result<(), ProbeError> {
        if self.per_run.is_some()
            && let Some((owner, attachment)) = self.scoped.take()
        {
            if owner == pid {
                self.reaper.detach(attachment);
            } else {
                self.scoped = Some((owner, attachment));
            }
        }
        if self.target()?.tgid == pid {
            self.set_target(TargetState::default())?;
        }
        Ok(())
    }

    /// Turns interventions on or off for the live target.
    pub fn set_intervene(&mut self, intervene: bool) -> Result<(), ProbeError> {
        let mut state = self.target()?;
        state.flags = if intervene {
            state.flags.with(TargetFlags::INTERVENE)
        } else {
            state.flags.without(TargetFlags::INTERVENE)
        };
        self.set_target(state)
    }

    /// Registers a process that is already running (attach mode): `tids`
    /// are its threads in creation order, the main thread first; they take
    /// roles 0, 1, ... and threads it creates later continue the sequence.
    pub fn begin_running_target(
        &mut self,
        pid: u32,
        tids: &[u32],
        intervene: bool,
    ) -> Result<(), ProbeError> {
        self.clear_run_state()?;
        self.adopt_threads(tids)?;
        let flags = if intervene {
            TargetFlags::LIVE.with(TargetFlags::INTERVENE)
        } else {
            TargetFlags::LIVE
        };
        self.set_target(TargetState { tgid: pid, _pad: 0, flags })?;
        Ok(())
    }

    fn adopt_threads(&mut self, tids: &[u32]) -> Result<(), ProbeError> {
        let mut pool: Queue<_, u32> = map(&mut self.ebpf, MAP_ROLE_POOL)?;
        while pool.pop(0).is_ok() {}
        let existing = tids.len() as u32;
        for role in existing..existing + MAX_ROLES {
            pool.push(role, 0).map_err(|e| map_err(MAP_ROLE_POOL, e))?;
        }
        let mut roles: BpfHashMap<_, u32, u32> = map(&mut self.ebpf, MAP_ROLES)?;
        for (role, tid) in tids.iter().enumerate() {
            roles.insert(*tid, role as u32, 0).map_err(|e| map_err(MAP_ROLES, e))?;
        }
        Ok(())
    }

    /// Forgets everything about previous targets and interventions.
    pub fn clear_run_state(&mut self) -> Result<(), ProbeError> {
        self.set_target(TargetState::default())?;
        clear::<u32, u32>(&mut self.ebpf, MAP_ROLES)?;
        clear::<CallKey, CallStack>(&mut self.ebpf, MAP_CALLS)?;
        clear::<SiteKey, Action>(&mut self.ebpf, MAP_ACTIONS)?;
        clear::<SiteKey, u64>(&mut self.ebpf, MAP_WATCH)?;
        clear::<u32, Pending>(&mut self.ebpf, MAP_PENDING)?;
        clear::<u32, UnitState>(&mut self.ebpf, MAP_UNIT_STATE)?;
        clear::<u32, Replay>(&mut self.ebpf, MAP_REPLAY)?;
        clear::<CallKey, EntryRegs>(&mut self.ebpf, MAP_ENTRY_REGS)?;
        clear::<GroupMember, GroupSlot>(&mut self.ebpf, MAP_GROUPS)?;
        clear::<RunningKey, u64>(&mut self.ebpf, MAP_RUNNING)?;
        clear::<OpenMember, RunningKey>(&mut self.ebpf, MAP_OPEN_MEMBERS)?;
        clear::<u32, u32>(&mut self.ebpf, MAP_SYNC_STEPS)?;
        self.set_live_unit(None)
    }

    /// The functions of `functions` the kernel refuses to probe (errno 524
    /// and friends), found with trial links in the agent's own address
    /// space ([`check`]); the trial links are removed in the background.
    /// Kernels without uprobe_multi are not checked (a refused perf-event
    /// uprobe names its function anyway).
    pub fn check(&mut self, functions: &[Function]) -> Result<Vec<check::Refused>, ProbeError> {
        let Some(program) = self.multi.iter().find(|p| p.name() == "enter_empty") else {
            return Ok(Vec::new());
        };
        let started = std::time::Instant::now();
        let (refused, open) = check::refused(program, functions)?;
        log::info!(
            "checked {} function(s) with {} trial link(s) in {:.1?}: {} refused",
            functions.len(),
            open.len() + refused.len(),
            started.elapsed(),
            refused.len()
        );
        // The trial links hold breakpoints in the agent itself: now.
        self.reaper.detach_soon(Attachment::Multi(uprobe_multi::Links::from_fds(open)));
        Ok(refused)
    }

    /// Attaches an entry and an exit probe to every function: now for
    /// [`Scope::AllProcesses`] and [`Scope::Process`], at each
    /// [`Probes::begin_target`] for [`Scope::Target`].
    pub fn attach(
        &mut self,
        functions: &[Function],
        scope: Scope,
        programs: Programs,
    ) -> Result<(), ProbeError> {
        let (enter, exit) = programs.names();
        self.set_pointees(functions)?;
        match scope {
            Scope::AllProcesses => {}
            Scope::Process(pid) => {
                let attachment = self.attach_scoped(functions, pid, programs)?;
                self.scoped = Some((pid, attachment));
                return Ok(());
            }
            Scope::Target => {
                if self.mechanism == Mechanism::PerfEvents {
                    log::warn!(
                        "this kernel has no uprobe_multi links: probes are attached to each run with perf events, and removing each of them takes ~100 ms (in the background)"
                    );
                }
                self.per_run = Some((functions.to_vec(), programs));
                return Ok(());
            }
        }
        let scope = UProbeScope::AllProcesses;
        for f in functions {
            let names: &[&'static str] = if wants_return(f) { &[enter, exit] } else { &[enter] };
            for &name in names {
                let prog: &mut UProbe = program(&mut self.ebpf, name)?;
                let point = UProbeAttachPoint {
                    location: UProbeAttachLocation::AbsoluteOffset(f.offset),
                    cookie: Some(cookie(f)),
                };
                let link =
                    prog.attach(point, &f.module, scope).map_err(|e| ProbeError::Attach {
                        what: format!("{} probe to {} in {}", name, f.name, f.module.display()),
                        reason: chain(&e),
                    })?;
                self.attached.push((name, link));
            }
        }
        Ok(())
    }

    /// Tells the entry probe which functions read what an argument points
    /// to ([`crate::model::Pointee`]), replacing what an earlier attach said.
    fn set_pointees(&mut self, functions: &[Function]) -> Result<(), ProbeError> {
        clear::<u32, PointeeSpec>(&mut self.ebpf, MAP_POINTEE)?;
        let mut m: BpfHashMap<_, u32, PointeeSpec> = map(&mut self.ebpf, MAP_POINTEE)?;
        for f in functions.iter().filter(|f| f.probe == Probe::Call) {
            let Some(p) = &f.pointee else { continue };
            let spec = PointeeSpec {
                arg: p.arg.min(2),
                text: u8::from(p.text),
                len: p.len.clamp(1, aid_common::POINTEE_BYTES as u8),
                _pad: [0; 5],
            };
            m.insert(f.id, spec, 0).map_err(|e| map_err(MAP_POINTEE, e))?;
        }
        Ok(())
    }

    /// Attaches entry and exit probes to every function in `pid` only,
    /// with this kernel's scoping mechanism. Dropping the result detaches
    /// them (waiting for the kernel); [`Probes::detach_later`] does it in
    /// the background.
    pub fn attach_scoped(
        &mut self,
        functions: &[Function],
        pid: u32,
        programs: Programs,
    ) -> Result<Attachment, ProbeError> {
        self.attach_scoped_with(functions, pid, programs, self.mechanism)
    }

    /// [`Probes::attach_scoped`] with a given mechanism (uprobe_multi only
    /// if this kernel has it; the benchmark compares them).
    pub fn attach_scoped_with(
        &mut self,
        functions: &[Function],
        pid: u32,
        programs: Programs,
        mechanism: Mechanism,
    ) -> Result<Attachment, ProbeError> {
        let (enter, exit) = programs.names();
        if mechanism == Mechanism::UprobeMulti
            || (mechanism == Mechanism::Auto && !self.multi.is_empty())
        {
            let find = |name: &str| {
                self.multi
                    .iter()
                    .find(|p| p.name() == name)
                    .ok_or_else(|| MultiError::MissingProgram(name.to_owned()))
            };
            return Ok(Attachment::multi(find(enter)?, find(exit)?, functions, pid)?);
        }
        Attachment::perf_events(&mut self.ebpf, functions, pid, enter, exit)
            .map_err(|(what, e)| ProbeError::Attach { what, reason: chain(&e) })
    }

    /// The descriptor of a loaded program (for attachments made outside
    /// this module, such as the benchmark's inherited perf events).
    pub fn program_fd(&self, name: &str) -> Result<std::os::fd::RawFd, ProbeError> {
        let prog = self
            .ebpf
            .program(name)
            .ok_or_else(|| ProbeError::Load(format!("program {name} missing from the object")))?;
        let fd = prog.fd().map_err(|e| ProbeError::Load(format!("{name}: {}", chain(&e))))?;
        Ok(std::os::fd::AsFd::as_fd(fd).as_raw_fd())
    }

    /// Kernel ids of the programs loaded for uprobe_multi links (their
    /// links name them).
    pub fn multi_program_ids(&self) -> Vec<u32> {
        self.multi.iter().filter_map(|p| p.id().ok()).collect()
    }

    /// Detaches `attachment` on a background thread.
    pub fn detach_later(&mut self, attachment: Attachment) {
        self.reaper.detach(attachment);
    }

    /// Removes every probe, and waits for the kernel to finish removing
    /// those detached in the background. Each perf-event uprobe removal
    /// waits for a grace period in the kernel (about 100 ms here,
    /// serialised); a uprobe_multi link waits for one for all its probes.
    pub fn detach_all(&mut self) {
        let started = std::time::Instant::now();
        self.per_run = None;
        if let Some((_, attachment)) = self.scoped.take() {
            attachment.detach();
        }
        self.reaper.wait();
        log::info!("probes removed in {:.1?}", started.elapsed());
        for (name, link) in self.attached.drain(..) {
            if let Some(prog) = self.ebpf.program_mut(name)
                && let Ok(prog) = <&mut UProbe>::try_from(prog)
                && let Err(e) = prog.detach(link)
            {
                log::warn!("detaching {name}: {e}");
            }
        }
    }

    /// Whether the targets of the next runs ([`Scope::Target`]) get the
    /// synchronisation points ([`Probe::Sync`]) among the functions too,
    /// recording their events: runs that amplify a failure with noise, and
    /// every run of a session whose budget has room for them.
    pub fn set_sync_points(&mut self, on: bool) {
        self.sync_points = on;
    }

    /// Synchronisation points each thread (by tid) of the last intervened
    /// run entered; read before the next run starts.
    pub fn sync_steps(&self) -> Vec<(u32, u32)> {
        let Some(m) = self.ebpf.map(MAP_SYNC_STEPS) else { return Vec::new() };
        let Ok(steps) = BpfHashMap::<_, u32, u32>::try_from(m) else { return Vec::new() };
        steps.iter().filter_map(Result::ok).collect()
    }

    /// Events dropped because the ring buffer was full, since the last call.
    pub fn take_lost(&mut self) -> Result<Lost, ProbeError> {
        Ok(Lost {
            calls: take_counter(&mut self.ebpf, MAP_LOST, LostSlot::Calls as u32)?,
            thread_records: take_counter(&mut self.ebpf, MAP_LOST, LostSlot::ThreadRecords as u32)?,
        })
    }

    /// Probe bodies that failed (a full map, ...), since the last call;
    /// each kind that occurred is logged as a warning.
    pub fn take_errors(&mut self) -> Result<u64, ProbeError> {
        let counts = self.take_error_counts()?;
        for (kind, n) in &counts {
            if *n > 0 {
                log::warn!("eBPF probes: {n} time(s) {}", kind.describe());
            }
        }
        Ok(counts.iter().map(|(_, n)| n).sum())
    }

    /// Probe failures since the last call, by kind.
    pub fn take_error_counts(&mut self) -> Result<Vec<(ProbeErrorKind, u64)>, ProbeError> {
        ProbeErrorKind::ALL
            .iter()
            .map(|kind| Ok((*kind, take_counter(&mut self.ebpf, MAP_ERRORS, *kind as u32)?)))
            .collect()
    }

    /// Live-unit mode: interventions act only inside invocations of `unit`,
    /// on the thread running it, with unit-relative instances.
    pub fn set_live_unit(&mut self, unit: Option<crate::model::FuncId>) -> Result<(), ProbeError> {
        let mut live: aya::maps::Array<_, u32> = map(&mut self.ebpf, MAP_LIVE_UNIT)?;
        live.set(0, unit.map_or(0, |u| u + 1), 0).map_err(|e| map_err(MAP_LIVE_UNIT, e))
    }

    /// Marks a thread as rewound to the first instruction of a function.
    pub fn set_replay(&mut self, tid: u32, replay: Replay) -> Result<(), ProbeError> {
        let mut m: BpfHashMap<_, u32, Replay> = map(&mut self.ebpf, MAP_REPLAY)?;
        m.insert(tid, replay, 0).map_err(|e| map_err(MAP_REPLAY, e))
    }

    /// Removes every action (the watch marks stay).
    pub fn clear_actions(&mut self) -> Result<(), ProbeError> {
        clear::<SiteKey, Action>(&mut self.ebpf, MAP_ACTIONS)
    }

    /// Removes every serialised group and its running counts (the count
    /// of units in flight stays: the kernel keeps it across rounds).
    pub fn clear_groups(&mut self) -> Result<(), ProbeError> {
        clear::<GroupMember, GroupSlot>(&mut self.ebpf, MAP_GROUPS)?;
        clear::<OpenMember, RunningKey>(&mut self.ebpf, MAP_OPEN_MEMBERS)?;
        let mut m: BpfHashMap<_, RunningKey, u64> = map(&mut self.ebpf, MAP_RUNNING)?;
        let keys: Vec<RunningKey> =
            m.keys().filter_map(Result::ok).filter(|k| *k != UNITS_IN_FLIGHT).collect();
        for k in keys {
            let _ = m.remove(&k);
        }
        Ok(())
    }

    /// Installs an action at a site.
    pub fn set_action(&mut self, site: SiteKey, action: Action) -> Result<(), ProbeError> {
        let mut actions: BpfHashMap<_, SiteKey, Action> = map(&mut self.ebpf, MAP_ACTIONS)?;
        actions.insert(site, action, 0).map_err(|e| map_err(MAP_ACTIONS, e))
    }

    /// Asks the kernel to record when `site` happens.
    pub fn watch(&mut self, site: SiteKey) -> Result<(), ProbeError> {
        let mut watch: BpfHashMap<_, SiteKey, u64> = map(&mut self.ebpf, MAP_WATCH)?;
        if watch.get(&site, 0).is_err() {
            watch.insert(site, 0, 0).map_err(|e| map_err(MAP_WATCH, e))?;
        }
        Ok(())
    }

    /// Marks a watched `site` as happened at `ns` (monotonic) if a thread
    /// is held there ([`HELD_MARK`]): the agent lets it go now. A site
    /// nothing waits for is not in the map.
    pub fn let_go(&mut self, site: &SiteKey, ns: u64) {
        let Ok(mut watch) = map::<BpfHashMap<_, SiteKey, u64>>(&mut self.ebpf, MAP_WATCH) else {
            return;
        };
        if watch.get(site, 0).is_ok_and(|t| t & HELD_MARK != 0) {
            let _ = watch.insert(site, ns, 0);
        }
    }

    /// When `site` happened (monotonic ns), if it has: a thread reached it
    /// and, if the agent held it there, was let go.
    pub fn happened(&self, site: &SiteKey) -> Option<u64> {
        self.watched(site).filter(|t| *t != 0 && t & HELD_MARK == 0)
    }

    /// When a thread reached `site` (monotonic ns), let go or not.
    pub fn reached(&self, site: &SiteKey) -> Option<u64> {
        self.watched(site).filter(|t| *t != 0).map(|t| t & !HELD_MARK)
    }

    fn watched(&self, site: &SiteKey) -> Option<u64> {
        let watch: BpfHashMap<_, SiteKey, u64> =
            BpfHashMap::try_from(self.ebpf.map(MAP_WATCH)?).ok()?;
        watch.get(site, 0).ok()
    }

    /// Counts the calls of `member` while they run, as `slot` says (group
    /// serialisation).
    pub fn set_group(&mut self, member: GroupMember, slot: GroupSlot) -> Result<(), ProbeError> {
        let mut m: BpfHashMap<_, GroupMember, GroupSlot> = map(&mut self.ebpf, MAP_GROUPS)?;
        m.insert(member, slot, 0).map_err(|e| map_err(MAP_GROUPS, e))
    }

    /// Calls of a serialised group running now on `key`'s object.
    pub fn running(&self, key: &RunningKey) -> u64 {
        let Some(m) = self.ebpf.map(MAP_RUNNING) else { return 0 };
        let Ok(m) = BpfHashMap::<_, RunningKey, u64>::try_from(m) else { return 0 };
        m.get(key, 0).unwrap_or(0)
    }

    /// Where the running call of `func` on thread `tid` is counted, if it
    /// belongs to a serialised group.
    pub fn open_member(&self, tid: u32, func: u32) -> Option<RunningKey> {
        let m = BpfHashMap::<_, OpenMember, RunningKey>::try_from(self.ebpf.map(MAP_OPEN_MEMBERS)?)
            .ok()?;
        m.get(&OpenMember { tid, func }, 0).ok()
    }

    /// Every call counted in a serialised group right now: its thread and
    /// the key it is counted under.
    pub fn open_members(&self) -> Vec<(u32, RunningKey)> {
        let Some(m) = self.ebpf.map(MAP_OPEN_MEMBERS) else { return Vec::new() };
        let Ok(m) = BpfHashMap::<_, OpenMember, RunningKey>::try_from(m) else {
            return Vec::new();
        };
        m.iter().filter_map(Result::ok).map(|(member, key)| (member.tid, key)).collect()
    }

    /// The action a stopped thread asked for, removed from the map.
    pub fn take_pending(&mut self, tid: u32) -> Option<Pending> {
        let mut pending: BpfHashMap<_, u32, Pending> = map(&mut self.ebpf, MAP_PENDING).ok()?;
        let value = pending.get(&tid, 0).ok()?;
        let _ = pending.remove(&tid);
        Some(value)
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        self.detach_all();
    }
}

/// Loads the entry/exit programs for uprobe_multi links when `wanted`
/// allows it and the kernel has them; says which mechanism scopes probes.
fn load_multi(
    ebpf: &Ebpf,
    wanted: Mechanism,
) -> Result<(Vec<MultiProgram>, Mechanism), ProbeError> {
    if wanted == Mechanism::PerfEvents {
        return Ok((Vec::new(), Mechanism::PerfEvents));
    }
    if !uprobe_multi::supported() {
        if wanted == Mechanism::Auto {
            log::info!(
                "{}; scoping probes with perf events (slower to remove)",
                MultiError::Unsupported
            );
            return Ok((Vec::new(), Mechanism::PerfEvents));
        }
        return Err(MultiError::Unsupported.into());
    }
    let names = ["enter_fn", "exit_fn", "enter_empty", "exit_empty"];
    Ok((uprobe_multi::load_programs(ebpf, OBJECT, &names)?, Mechanism::UprobeMulti))
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T, ProbeError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program>,
{
    let prog = ebpf
        .program_mut(name)
        .ok_or_else(|| ProbeError::Load(format!("program {name} missing from the object")))?;
    <&mut T>::try_from(prog)
        .map_err(|_| ProbeError::Load(format!("program {name} has the wrong type")))
}

fn map<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<T, ProbeError>
where
    T: TryFrom<&'a mut aya::maps::Map>,
    <T as TryFrom<&'a mut aya::maps::Map>>::Error: std::fmt::Display,
{
    let m = ebpf.map_mut(name).ok_or(ProbeError::Map { name, reason: "missing".into() })?;
    T::try_from(m).map_err(|e| ProbeError::Map { name, reason: e.to_string() })
}

fn map_err(name: &'static str, e: aya::maps::MapError) -> ProbeError {
    ProbeError::Map { name, reason: chain(&e) }
}

fn clear<K: aya::Pod, V: aya::Pod>(ebpf: &mut Ebpf, name: &'static str) -> Result<(), ProbeError> {
    let mut m: BpfHashMap<_, K, V> = map(ebpf, name)?;
    let keys: Vec<K> = m.keys().filter_map(Result::ok).collect();
    for k in keys {
        let _ = m.remove(&k);
    }
    Ok(())
}

fn take_counter(ebpf: &mut Ebpf, name: &'static str, index: u32) -> Result<u64, ProbeError> {
    let mut counter: PerCpuArray<_, u64> = map(ebpf, name)?;
    let values = counter.get(&index, 0).map_err(|e| map_err(name, e))?;
    let total = values.iter().sum();
    let zeros = aya::maps::PerCpuValues::try_from(vec![0u64; values.len()])
        .map_err(|e| ProbeError::Map { name, reason: e.to_string() })?;
    counter.set(index, zeros, 0).map_err(|e| map_err(name, e))?;
    Ok(total)
}

/// Events the kernel dropped because the ring buffer was full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Function entries and exits.
    pub calls: u64,
    /// Thread creation, exit and exec records.
    pub thread_records: u64,
}

impl Lost {
    pub fn total(self) -> u64 {
        self.calls + self.thread_records
    }
}

enum Control {
    /// Drain everything committed so far, then acknowledge.
    Flush(mpsc::SyncSender<()>),
    Stop,
}

/// Events the reader may hold that the consumer has not taken yet in a
/// live session ([`EventStream::set_backlog_cap`]): 262,144 events of 80
/// bytes, 20 MiB. A look takes them every 50 ms; at the 32,000 events a
/// second of BENCHMARKS.md's busy service that is 1,600 a look, so the cap
/// is only reached when the consumer stalls for seconds (a slow disk
/// under the session writer). Then the kernel's ring (64 MiB by default,
/// about 800,000 more events) fills behind it, and what it cannot hold
/// is counted lost by the kernel, never dropped here.
pub const LIVE_BACKLOG: usize = 1 << 18;

/// The events drained but not yet taken, and the cap on them: the reader
/// drains at most [`Backlog::room`] events, and waits on `taken` while
/// there is none.
struct Backlog {
    queued: AtomicUsize,
    /// `usize::MAX`: no cap (program runs, drained only at their end).
    cap: AtomicUsize,
    taken: tokio::sync::Notify,
}

impl Backlog {
    fn new() -> Backlog {
        Backlog {
            queued: AtomicUsize::new(0),
            cap: AtomicUsize::new(usize::MAX),
            taken: tokio::sync::Notify::new(),
        }
    }

    /// How many more events the reader may drain now.
    fn room(&self) -> usize {
        self.cap.load(Ordering::Acquire).saturating_sub(self.queued.load(Ordering::Acquire))
    }

    fn added(&self, n: usize) {
        self.queued.fetch_add(n, Ordering::AcqRel);
    }

    /// The consumer took `n` events: a reader waiting for room is woken
    /// (a permit is kept if it is not waiting yet, so no wake-up is lost).
    fn took(&self, n: usize) {
        if n > 0 {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            self.taken.notify_one();
        }
    }

    fn set_cap(&self, cap: Option<usize>) {
        self.cap.store(cap.unwrap_or(usize::MAX), Ordering::Release);
        self.taken.notify_one();
    }
}

/// A thread ("aid-events") that drains the ring buffer continuously, so the
/// kernel side rarely finds it full, and hands events over in batches. It
/// runs a current-thread tokio runtime: one `select!` waits for the ring
/// and the programs' log ring (aya-log, a record only when a probe body
/// failed) to become readable (`AsyncFd`, epoll), for a request (flush,
/// stop), and — at the backlog cap — for the consumer to take events.
/// After each drain of the ring it rests [`poll::EVENT_STREAM`] so that
/// events come in batches and the kernel wakes it at most once per rest;
/// idle, it waits without a timer.
pub struct EventStream {
    batches: mpsc::Receiver<Vec<Event>>,
    control: tokio::sync::mpsc::UnboundedSender<Control>,
    backlog: Arc<Backlog>,
    thread: Option<JoinHandle<()>>,
}

impl EventStream {
    fn spawn(ring: RingBuf<MapData>, logger: Logger) -> EventStream {
        let (batch_tx, batches) = mpsc::channel();
        let (control, control_rx) = tokio::sync::mpsc::unbounded_channel();
        let backlog = Arc::new(Backlog::new());
        let reader = Reader { batches: batch_tx, backlog: Arc::clone(&backlog) };
        let thread = std::thread::Builder::new()
            .name("aid-events".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .build()
                {
                    Ok(rt) => rt.block_on(reader.run(ring, logger, control_rx)),
                    Err(e) => log::error!(
                        "the event reader cannot wait on the ring ({e}): no event will be read"
                    ),
                }
            })
            .expect("spawn event reader");
        EventStream { batches, control, backlog, thread: Some(thread) }
    }

    /// Every event committed to the ring buffer before this call (the cap
    /// does not apply: everything committed is drained).
    pub fn flush(&self) -> Vec<Event> {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        if self.control.send(Control::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(Duration::from_secs(10));
        }
        self.try_take()
    }

    /// Whatever has been drained so far, without waiting.
    pub fn try_take(&self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Ok(mut batch) = self.batches.try_recv() {
            out.append(&mut batch);
        }
        self.backlog.took(out.len());
        out
    }

    /// Caps the events drained and not yet taken (`None`: no cap). Live
    /// sessions cap them ([`LIVE_BACKLOG`]): at the cap the reader leaves
    /// events in the kernel's ring until some are taken, so a consumer
    /// that falls behind costs events the kernel counts as lost, not
    /// memory. Program runs are drained only at their end and must not
    /// lose what the ring held, so they have none.
    pub fn set_backlog_cap(&self, cap: Option<usize>) {
        self.backlog.set_cap(cap);
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reader's side of an [`EventStream`].
struct Reader {
    batches: mpsc::Sender<Vec<Event>>,
    backlog: Arc<Backlog>,
}

impl Reader {
    async fn run(
        self,
        ring: RingBuf<MapData>,
        logger: Logger,
        mut control: tokio::sync::mpsc::UnboundedReceiver<Control>,
    ) {
        // SAFETY: the ring and the logger own their descriptors (aya's map
        // data and the log ring's buffer), and each is owned by its
        // `AsyncFd` until it is dropped: the descriptor stays open and the
        // same for the `AsyncFd`'s whole life.
        let registered = unsafe {
            (
                AsyncFd::register_with_interest(ring, Interest::READABLE),
                AsyncFd::register_with_interest(logger, Interest::READABLE),
            )
        };
        let (Ok(mut ring), Ok(mut logger)) = registered else {
            log::error!("the event reader cannot wait on the ring (epoll): no event will be read");
            return;
        };
        // After a drain the ring is left alone for EVENT_STREAM: events
        // gather, and the kernel sends no wake-up while the reader has not
        // caught up (the programs submit with adaptive wake-ups).
        let resting = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(resting);
        let mut rested = true;
        loop {
            let room = self.backlog.room();
            tokio::select! {
                biased;
                request = control.recv() => match request {
                    Some(Control::Flush(ack)) => {
                        logger.get_mut().flush();
                        if !self.send(drain(ring.get_mut(), usize::MAX)) {
                            return;
                        }
                        let _ = ack.send(());
                    }
                    Some(Control::Stop) | None => return,
                },
                ready = logger.readable_mut() => {
                    let Ok(mut ready) = ready else { return };
                    ready.clear_ready();
                    ready.get_inner_mut().flush();
                }
                () = &mut resting, if !rested => rested = true,
                ready = ring.readable_mut(), if room > 0 && rested => {
                    let Ok(mut ready) = ready else { return };
                    rested = false;
                    resting.as_mut().reset(tokio::time::Instant::now() + poll::EVENT_STREAM);
                    let batch = drain(ready.get_inner_mut(), room);
                    let emptied = batch.len() < room;
                    if !self.send(batch) {
                        return;
                    }
                    if emptied {
                        // Edge-triggered: readiness is cleared only once the
                        // ring was seen empty; an event committed since then
                        // raises a new edge, and the drain below takes any
                        // that came before the clear.
                        ready.clear_ready();
                        let room = self.backlog.room();
                        if !self.send(drain(ready.get_inner_mut(), room)) {
                            return;
                        }
                    }
                }
                () = self.backlog.taken.notified(), if room == 0 => {}
            }
        }
    }

    /// Hands a batch over; false when the consumer is gone.
    fn send(&self, batch: Vec<Event>) -> bool {
        if batch.is_empty() {
            return true;
        }
        self.backlog.added(batch.len());
        self.batches.send(batch).is_ok()
    }
}

/// Up to `limit` events from the ring, oldest first.
fn drain(ring: &mut RingBuf<MapData>, limit: usize) -> Vec<Event> {
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(item) = ring.next() else { break };
        if item.len() >= size_of::<Event>() {
            // SAFETY: the kernel wrote a whole `Event`; read it unaligned.
            out.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a cap the reader drains everything; with one it drains
    /// only up to the cap, and again as the consumer takes.
    #[test]
    fn the_backlog_cap_bounds_events_not_yet_taken() {
        let b = Backlog::new();
        b.added(5_000_000);
        assert_eq!(b.room(), usize::MAX - 5_000_000);
        b.set_cap(Some(10));
        assert_eq!(b.room(), 0, "over the cap: nothing more is drained");
        b.took(4_999_995);
        assert_eq!(b.room(), 5);
        b.added(5);
        assert_eq!(b.room(), 0);
        b.took(3);
        assert_eq!(b.room(), 3);
        b.set_cap(None);
        assert_eq!(b.room(), usize::MAX - 7);
    }

    /// A reader at the cap is woken when the consumer takes, also when
    /// the take came before the reader began to wait; taking nothing
    /// wakes nobody.
    #[test]
    fn a_take_wakes_the_reader_waiting_at_the_cap() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let b = Arc::new(Backlog::new());
        b.set_cap(Some(2));
        b.added(2);
        // The permit set_cap left.
        rt.block_on(b.taken.notified());
        b.took(0);
        let woken = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), b.taken.notified()).await
        });
        assert!(woken.is_err(), "an empty take woke the reader");
        b.took(1);
        rt.block_on(b.taken.notified());
        assert_eq!(b.room(), 1);
        b.added(1);
        let taker = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                b.took(2);
            })
        };
        let woken = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), b.taken.notified()).await
        });
        taker.join().unwrap();
        assert!(woken.is_ok());
        assert_eq!(b.room(), 2);
    }

    /// The object has exactly the maps aid-common names (the names the
    /// loader looks them up by), and the globals the loader patches.
    #[test]
    fn object_has_every_named_map_and_global() {
        let obj = aya_obj::Object::parse(OBJECT).expect("the eBPF object parses");
        // aya-log's ring is aya-log's to name.
        let mut in_object: Vec<&str> = obj
            .maps
            .keys()
            .map(String::as_str)
            .filter(|m| !m.starts_with('.') && *m != "AYA_LOGS")
            .collect();
        assert!(obj.maps.contains_key("AYA_LOGS"));
        in_object.sort_unstable();
        let mut named: Vec<&str> = aid_common::ALL_MAPS.to_vec();
        named.sort_unstable();
        assert_eq!(in_object, named);
        assert!(named.iter().all(|m| m.starts_with("AID_") && m.len() < 16), "{named:?}");
        let symbols = object::File::parse(OBJECT).expect("ELF");
        use object::{Object as _, ObjectSymbol as _};
        for global in [GLOBAL_STOP_SIGNAL, GLOBAL_TASK_PID] {
            assert!(symbols.symbols().any(|s| s.name() == Ok(global)), "global {global} missing");
        }
    }
}
