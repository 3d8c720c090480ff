//! Loading the eBPF object, attaching it to one target process, and reading
//! what it reports: the event stream, lost-event and error counters.
//!
//! Everything the kernel holds for us is tied to file descriptors of this
//! process (perf events, links, maps), so probes disappear when the agent
//! exits for any reason, SIGKILL included; nothing is pinned.

use aid_common::{
    GLOBAL_STOP_SIGNAL, GLOBAL_TASK_PID, MAP_EVENTS, MAP_POINTEE, MAP_ROLE_POOL, MAP_ROLES,
    PointeeSpec, TargetFlags, TargetState,
};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap as BpfHashMap, MapData, Queue, RingBuf},
    programs::{
        RawTracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLinkId, UProbeScope},
    },
};

pub mod btf;
pub mod check;
pub mod entry_only;
mod events;
mod maps;
mod privileges;
mod probe_log;
mod scope;
pub mod uprobe_multi;
pub mod watch;

pub use events::{EventStream, LIVE_BACKLOG, PROGRAM_BACKLOG};
pub use maps::Lost;
pub use privileges::{Needs, preflight};
pub use probe_log::PROBE_RECORDS_AT_INFO;
pub use scope::{Attachment, Mechanism, Reaper};

use crate::{
    bpf::{
        btf::BtfError,
        maps::{clear, map, map_err},
        probe_log::{Logger, PROBE_LOG},
        uprobe_multi::{MultiError, MultiProgram},
    },
    model::{Function, Probe},
    util::error_chain,
};

/// The attach cookie of a function: its id, flagged for synchronisation
/// points (their entry probe counts them, records each thread's first
/// ones and serves noise), for functions with a return probe (their entry
/// keeps the shadow stack of a program that throws) and for the unwinder's
/// throw and catch points (`aid_common::ShadowStack`).
pub fn cookie(f: &Function) -> u64 {
    let sync = if f.probe.is_sync_point() { aid_common::SYNC_COOKIE_BIT } else { 0 };
    let unwind = match f.probe {
        Probe::Throw => aid_common::THROW_COOKIE_BIT,
        Probe::Catch => aid_common::CATCH_COOKIE_BIT,
        _ if wants_return(f) => aid_common::RETURN_COOKIE_BIT,
        _ => 0,
    };
    u64::from(f.id | sync) | unwind
}

/// Which of aid's synchronisation-point probes a run of a program gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncProbes {
    None,
    /// The C library's ([`Probe::Sync`]).
    Library,
    /// Those and the statement points ([`Probe::Statement`]).
    All,
}

impl SyncProbes {
    /// Whether a probe of this kind is attached (calls always are).
    pub fn attaches(self, probe: Probe) -> bool {
        match probe {
            Probe::Sync => self != SyncProbes::None,
            Probe::Statement => self == SyncProbes::All,
            Probe::Call | Probe::Entry | Probe::Throw | Probe::Catch => true,
        }
    }
}

/// The probes of `functions`, in the order they are attached: every entry
/// probe (true: a return probe) before any return probe. A process
/// already running (attach mode) runs while they are attached: a return
/// probe hijacks return addresses from the moment it exists, and a throw
/// through a hijacked frame needs the unwinder's entry probe (in another
/// module: libgcc_s, libstdc++) to stop the thread for the repair, or the
/// unwinder finds no handler and the program ends in `std::terminate`.
pub fn attach_order(functions: &[Function]) -> impl Iterator<Item = (&Function, bool)> {
    let entries = functions.iter().map(|f| (f, false));
    entries.chain(functions.iter().filter(|f| wants_return(f)).map(|f| (f, true)))
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
    #[error("loading the eBPF object failed")]
    Object(#[source] Box<aya::EbpfError>),
    #[error("loading the eBPF program {program} failed")]
    Load {
        program: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error(
        "the eBPF object has no program {0} of the expected type (a build of aid-ebpf that does not match the agent)"
    )]
    MissingProgram(&'static str),
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
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
    sync_points: SyncProbes,
    /// Probes scoped to one process, and that process.
    scoped: Option<(u32, Attachment)>,
    reaper: Reaper,
    reg_write: bool,
    /// The next runs' targets throw: their threads keep shadow stacks and
    /// stop for the agent when they unwind ([`Probes::set_repair_unwind`]).
    repair_unwind: bool,
    /// [`Scope::Process`] with [`Probes::set_repair_unwind`]: the probes
    /// wait for [`Probes::begin_running_target`], so that no return
    /// address is hijacked before the process is registered (its threads
    /// then keep shadow stacks) and traced by the agent.
    deferred: Option<(u32, Vec<Function>, Programs)>,
    ring: Option<(RingBuf<MapData>, Logger)>,
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
            .map_err(|e| ProbeError::Object(Box::new(e)))?;
        for name in ["enter_fn", "exit_fn", "enter_empty", "exit_empty"] {
            let prog: &mut UProbe = program(&mut ebpf, name)?;
            prog.load().map_err(|source| ProbeError::Load { program: name, source })?;
        }
        // Raw tracepoints are attached by name: no tracefs, no mount.
        for (name, event) in [
            ("thread_new", "task_newtask"),
            ("exec_seen", "sched_process_exec"),
            ("thread_exit", "sched_process_exit"),
        ] {
            let prog: &mut RawTracePoint = program(&mut ebpf, name)?;
            prog.load().map_err(|source| ProbeError::Load { program: name, source })?;
            prog.attach(event).map_err(|e| ProbeError::Attach {
                what: format!("raw tracepoint {event}"),
                reason: error_chain(&e),
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
            sync_points: SyncProbes::None,
            scoped: None,
            reaper: Reaper::new(),
            reg_write,
            repair_unwind: false,
            deferred: None,
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
            let attached = if self.sync_points == SyncProbes::All {
                self.attach_scoped(&functions, pid, programs)
            } else {
                let some: Vec<Function> = functions
                    .iter()
                    .filter(|f| self.sync_points.attaches(f.probe))
                    .cloned()
                    .collect();
                self.attach_scoped(&some, pid, programs)
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
        if self.sync_points != SyncProbes::None {
            flags = flags.with(TargetFlags::SYNC_EVENTS);
        }
        if self.repair_unwind {
            flags = flags.with(TargetFlags::REPAIR_UNWIND);
        }
        self.set_target(TargetState { tgid: pid, _pad: 0, flags })
    }

    /// Whether the next runs' targets get their return addresses repaired
    /// when an exception unwinds through them (`aid_common::ShadowStack`).
    /// The agent must then be the ptrace tracer of every thread.
    pub fn set_repair_unwind(&mut self, on: bool) {
        self.repair_unwind = on;
    }

    /// Whether the targets' return addresses are repaired
    /// ([`Probes::set_repair_unwind`]).
    pub fn repairs_unwind(&self) -> bool {
        self.repair_unwind
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
            Scope::Process(pid) if self.repair_unwind => {
                self.deferred = Some((pid, functions.to_vec(), programs));
                return Ok(());
            }
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
                        reason: error_chain(&e),
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
            .map_err(|(what, e)| ProbeError::Attach { what, reason: error_chain(&e) })
    }

    /// The descriptor of a loaded program (for attachments made outside
    /// this module, such as the benchmark's inherited perf events).
    pub fn program_fd(&self, name: &'static str) -> Result<std::os::fd::RawFd, ProbeError> {
        let prog = self.ebpf.program(name).ok_or(ProbeError::MissingProgram(name))?;
        let fd = prog.fd().map_err(|source| ProbeError::Load { program: name, source })?;
        Ok(std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(fd)))
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
        self.deferred = None;
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
    pub fn set_sync_points(&mut self, which: SyncProbes) {
        self.sync_points = which;
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

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T, ProbeError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program>,
{
    let prog = ebpf.program_mut(name).ok_or(ProbeError::MissingProgram(name))?;
    <&mut T>::try_from(prog).map_err(|_| ProbeError::MissingProgram(name))
}

#[cfg(test)]
mod tests {
    use super::*;

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
