//! The tracer: the probes attached once for a whole session, the event
//! stream, the resolver that names what they report, and the state the
//! ptrace controller keeps between stops. It runs a program once at a
//! time — observed, or intervened on as the ptrace tracer of all its
//! threads — and records the run; or it follows a process that is already
//! running ([`Running`]).

use std::collections::{BTreeSet, HashMap};

use nix::sys::signal::Signal;

use crate::{
    bpf::{
        EventStream, LIVE_BACKLOG, LoadOptions, ProbeError, Probes, Programs, Scope, SyncProbes,
        entry_only, monotonic_ns,
    },
    intervene::control::StopState,
    model::{FuncId, Function, Probe},
    record::{
        fail::ReturnCheck,
        follow::Follower,
        recorder::{self, Recorder, Symbolize},
        throws::{exceptions_notice, repairs_unwind},
    },
    symbols::{Names, Resolver},
    sys::{
        proc,
        ptrace::{self, ControlError},
        spawn::RunError,
    },
};

pub use super::running::Running;

mod runs;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error(
        "the kernel can probe none of the {count} function(s) matched ({why}): choose other functions with --trace"
    )]
    NothingProbeable { count: usize, why: String },
    #[error(
        "the process unwinds its stack (C++ exceptions or Rust panics) and aid must be its ptrace tracer to keep that working under return probes: {0}"
    )]
    Repair(ControlError),
    /// A thread making a run (`--jobs`) panicked: a bug in aid, reported
    /// as the run's error so the others are not waited for in vain.
    #[error("the thread making run {id} stopped on an internal error (a bug in aid): {what}")]
    JobPanicked { id: u32, what: String },
    /// A fleet's worker could not make a run (`fleet/`): its words.
    #[error("worker {worker}: {what}")]
    Remote { worker: String, what: String },
}

/// What an intervened run does besides intervening (hardware watchpoints,
/// [`crate::record::watchpoints`]): told, with the probes, when the target has been
/// started (held before its exec), at every turn of the loop serving its
/// stops (every few hundred microseconds, and right after a stop was
/// served), and once it has ended.
pub trait RunHook {
    fn started(&mut self, _probes: &mut Probes, _pid: u32) -> Result<(), ProbeError> {
        Ok(())
    }
    fn tick(&mut self, _probes: &mut Probes, _pid: u32) {}
    fn ended(&mut self, _probes: &mut Probes) {}
}

/// `S` names thread start routines: the session's [`Resolver`], or the
/// [`Names`] snapshot a replica carries to its own thread
/// ([`Tracer::replica`]).
pub struct Tracer<S = Resolver> {
    /// User functions first, then aid's internal ones.
    functions: Vec<Function>,
    pthread_create: Option<FuncId>,
    /// Thread bodies (aid's entry-only probes) and the user function each
    /// runs: names threads started through a runtime's trampoline.
    bodies: HashMap<FuncId, String>,
    scope: Scope,
    programs: Programs,
    probes: Probes,
    stream: EventStream,
    resolver: S,
    /// How the probes were loaded: what a replica loads its own with.
    load: LoadOptions,
    stops: StopState,
    /// What the user should know about the probes (functions skipped,
    /// entry-only probes), one line each.
    notices: Vec<String>,
    /// Every run, observed or intervened on, gets the synchronisation
    /// points and records their events ([`Tracer::set_sync_in_every_run`]).
    sync_in_every_run: bool,
    /// The runs that carry noise get the statement points too
    /// ([`Tracer::set_noise_at_statements`]).
    statements: bool,
}

impl Tracer {
    /// Loads the eBPF object and attaches it to `functions` (resolved by
    /// `resolver`), plus aid's own `pthread_create` probe to name threads:
    /// for the whole session, or to each run's target with
    /// [`Scope::Target`].
    pub fn new(
        mut resolver: Resolver,
        mut functions: Vec<Function>,
        load: LoadOptions,
        scope: Scope,
        programs: Programs,
    ) -> Result<Tracer, TraceError> {
        if let Some(f) = resolver.pthread_create(functions.len() as FuncId) {
            functions.push(f);
        }
        let mut probes = Probes::load(load)?;
        let mut notices = Vec::new();
        let refused = probes.check(&functions)?;
        if !refused.is_empty() {
            let user = functions.iter().filter(|f| !f.internal).count();
            let skipped: Vec<String> = refused
                .iter()
                .map(|r| format!("{} ({})", functions[r.index].name, r.reason()))
                .collect();
            let gone: BTreeSet<usize> = refused.iter().map(|r| r.index).collect();
            if functions.iter().enumerate().all(|(i, f)| f.internal || gone.contains(&i)) {
                return Err(TraceError::NothingProbeable {
                    count: user,
                    why: crate::util::human::summarize(&skipped),
                });
            }
            notices.push(format!(
                "skipping {} function(s) the kernel cannot probe: {}",
                refused.len(),
                crate::util::human::summarize(&skipped)
            ));
            functions = functions
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !gone.contains(i))
                .map(|(_, f)| f)
                .collect();
            for (id, f) in functions.iter_mut().enumerate() {
                f.id = id as FuncId;
            }
        }
        let pthread_create = functions.iter().position(|f| f.internal).map(|i| i as FuncId);
        // Thread bodies after the check: their ids follow the functions
        // that are left.
        let mut bodies = HashMap::new();
        for (mut f, runs) in resolver.thread_bodies(functions.len() as FuncId) {
            if !traced(&functions, &f) {
                f.id = functions.len() as FuncId;
                bodies.insert(f.id, runs);
                functions.push(f);
            }
        }
        let entry_only: Vec<&str> = functions
            .iter()
            .filter(|f| !f.internal && entry_only::reason(&f.symbol).is_some())
            .map(|f| f.name.as_str())
            .collect();
        if !entry_only.is_empty() {
            notices.push(format!(
                "entry probes only (no return value or duration) for {}: they return twice or never return normally (docs/probes.md)",
                crate::util::human::summarize(&entry_only)
            ));
        }
        if resolver.thrower(&functions).is_some() {
            let points = resolver.unwind_points(functions.len() as FuncId);
            append_probeable(&mut probes, &mut functions, points)?;
        }
        if let Some(notice) = exceptions_notice(&resolver, &functions, scope) {
            notices.push(notice);
        }
        if probes.kernel_writes_registers() {
            log::info!(
                "this kernel lets BPF write registers: return overrides need no thread stop"
            );
        } else {
            log::info!(
                "this kernel refuses BPF register writes: return overrides use ptrace stops"
            );
        }
        let stream = probes.event_stream();
        probes.set_repair_unwind(repairs_unwind(&functions, scope));
        probes.attach(&functions, scope, programs)?;
        let stop_signal = Signal::try_from(load.stop_signal).unwrap_or(Signal::SIGURG);
        Ok(Tracer {
            functions,
            pthread_create,
            bodies,
            scope,
            programs,
            probes,
            stream,
            resolver,
            load,
            stops: StopState::new(stop_signal),
            notices,
            sync_in_every_run: false,
            statements: false,
        })
    }

    /// Adds the C library's synchronisation points (aid's entry-only
    /// probes for noise, `intervene/noise.rs`) to the function table,
    /// with the points where the executable resumes after a join or a
    /// condition wait ([`Resolver::return_points`]).
    /// Runs of a program only ([`Scope::Target`]): they are attached to the
    /// runs whose plan amplifies, and to every run once
    /// [`Tracer::set_sync_in_every_run`] says so. Returns how many were
    /// found.
    pub fn add_sync_points(&mut self) -> Result<usize, TraceError> {
        if self.scope != Scope::Target || self.functions.iter().any(|f| f.probe == Probe::Sync) {
            return Ok(0);
        }
        let sync = self.resolver.sync_points(self.functions.len() as FuncId);
        let mut n = 0;
        for mut f in sync {
            // One the user traces keeps its own probe (and gets noise as a call).
            if !traced(&self.functions, &f) {
                f.id = self.functions.len() as FuncId;
                self.functions.push(f);
                n += 1;
            }
        }
        // Where the executable resumes after a join or a condition wait:
        // sync points of their own (the C library's are entry-only).
        let returns = self.resolver.return_points(self.functions.len() as FuncId);
        n += append_probeable(&mut self.probes, &mut self.functions, returns)?;
        let statements = self.resolver.statement_points(&self.functions);
        let kept = append_probeable(&mut self.probes, &mut self.functions, statements)?;
        log::info!("{kept} statement points inside the traced functions ready for amplification");
        self.probes.attach(&self.functions, self.scope, self.programs)?;
        Ok(n)
    }

    /// Another tracer of the same functions, with a BPF object of its own
    /// (its own maps, ring and counters): one of the tracers of parallel
    /// runs (`--jobs`). Its probes are attached to the target of each of
    /// its runs only, and the programs act only on that target
    /// (`live_target`), so two tracers' runs never see each other's
    /// events. It carries the settings this one has now; changing them
    /// later does not change it.
    pub fn replica(&self) -> Result<Tracer<Names>, TraceError> {
        Tracer::from_spec(self.spec(), self.resolver.names())
    }
}

/// Everything another tracer of the same functions is made from but its
/// probes and the names of thread start routines: what a replica
/// ([`Tracer::replica`]) is made from on this host, and what a fleet's
/// workers make theirs from (`fleet/`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TracerSpec {
    pub functions: Vec<Function>,
    pub pthread_create: Option<FuncId>,
    pub bodies: HashMap<FuncId, String>,
    pub scope: Scope,
    pub programs: Programs,
    pub load: LoadOptions,
    pub repair_unwind: bool,
    pub sync_in_every_run: bool,
    pub statements: bool,
}

impl Tracer<Names> {
    /// A tracer of `spec`'s functions, with a BPF object of its own, naming
    /// thread start routines with `names`.
    pub fn from_spec(spec: TracerSpec, names: Names) -> Result<Tracer<Names>, TraceError> {
        let mut probes = Probes::load(spec.load)?;
        let stream = probes.event_stream();
        probes.set_repair_unwind(spec.repair_unwind);
        probes.attach(&spec.functions, spec.scope, spec.programs)?;
        let stop_signal = Signal::try_from(spec.load.stop_signal).unwrap_or(Signal::SIGURG);
        Ok(Tracer {
            functions: spec.functions,
            pthread_create: spec.pthread_create,
            bodies: spec.bodies,
            scope: spec.scope,
            programs: spec.programs,
            probes,
            stream,
            resolver: names,
            load: spec.load,
            stops: StopState::new(stop_signal),
            notices: Vec::new(),
            sync_in_every_run: spec.sync_in_every_run,
            statements: spec.statements,
        })
    }
}

impl<S: Symbolize> Tracer<S> {
    /// What the user should know about the probes, one line each.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// What another tracer of these functions is made from, with the
    /// settings this one has now ([`Tracer::from_spec`]).
    pub fn spec(&self) -> TracerSpec {
        TracerSpec {
            functions: self.functions.clone(),
            pthread_create: self.pthread_create,
            bodies: self.bodies.clone(),
            scope: self.scope,
            programs: self.programs,
            load: self.load,
            repair_unwind: self.probes.repairs_unwind(),
            sync_in_every_run: self.sync_in_every_run,
            statements: self.statements,
        }
    }

    /// From now on the runs that carry noise get the statement points
    /// ([`Probe::Statement`]) too, and noise may act at them. Returns how
    /// many there are (none: nothing changes).
    pub fn set_noise_at_statements(&mut self) -> usize {
        let n = self.functions.iter().filter(|f| f.probe == Probe::Statement).count();
        self.statements = n > 0;
        n
    }

    /// Which synchronisation-point probes a run gets: with noise, the C
    /// library's and (once [`Tracer::set_noise_at_statements`]) the
    /// statement points; without, the C library's when every run records
    /// them.
    fn sync_probes(&self, noise: bool) -> SyncProbes {
        match (noise, self.statements, self.sync_in_every_run) {
            (true, true, _) => SyncProbes::All,
            (true, false, _) | (false, _, true) => SyncProbes::Library,
            (false, _, false) => SyncProbes::None,
        }
    }

    /// Replaces the user functions (ids from 0, in order; aid's internal
    /// ones follow them again). Before the first run only: a session's
    /// function table never changes once runs refer to it.
    pub fn set_user_functions(&mut self, user: Vec<Function>) -> Result<(), TraceError> {
        let internal: Vec<Function> =
            self.functions.iter().filter(|f| f.internal).cloned().collect();
        let offset = user.len() as FuncId;
        let old_first = self.functions.len() as FuncId - internal.len() as FuncId;
        let mut functions: Vec<Function> =
            user.into_iter().enumerate().map(|(i, f)| Function { id: i as FuncId, ..f }).collect();
        for f in internal {
            functions.push(Function { id: f.id - old_first + offset, ..f });
        }
        let shift = |id: FuncId| id - old_first + offset;
        self.pthread_create = self.pthread_create.map(shift);
        self.bodies =
            std::mem::take(&mut self.bodies).into_iter().map(|(id, n)| (shift(id), n)).collect();
        self.functions = functions;
        self.probes.set_repair_unwind(repairs_unwind(&self.functions, self.scope));
        self.probes.attach(&self.functions, self.scope, self.programs)?;
        Ok(())
    }

    /// Every traced function, aid's internal ones last: a session's
    /// function table.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Probes attached to a run (an entry and, for traced calls, an exit
    /// probe per function; `amplified`: with the synchronisation points).
    pub fn probe_count(&self, amplified: bool) -> usize {
        self.functions
            .iter()
            .filter(|f| self.sync_probes(amplified).attaches(f.probe))
            .map(|f| if crate::bpf::wants_return(f) { 2 } else { 1 })
            .sum()
    }

    /// Whether every run, observed or intervened on, gets the
    /// synchronisation points and records their events (the lock events
    /// the lock predicates read), not only the runs that amplify. Intervened
    /// runs then get them too, so that they run under the conditions the
    /// observations were made in.
    pub fn set_sync_in_every_run(&mut self, on: bool) {
        self.sync_in_every_run = on;
    }

    /// Whether every run gets the synchronisation points.
    pub fn sync_in_every_run(&self) -> bool {
        self.sync_in_every_run
    }

    /// Takes `from`'s settings for the runs ([`Tracer::set_sync_in_every_run`],
    /// [`Tracer::set_noise_at_statements`]): a replica follows the
    /// session's tracer.
    pub fn follow_settings<T>(&mut self, from: &Tracer<T>) {
        self.sync_in_every_run = from.sync_in_every_run;
        self.statements = from.statements;
    }

    /// Functions the user asked for (not aid's internal probes).
    pub fn user_functions(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| !f.internal)
    }
}

impl<S: Symbolize> Tracer<S> {
    /// Starts recording a process that is already running: its threads
    /// take roles 0, 1, ... in creation order (main first), threads it
    /// creates later continue the sequence. With a `unit`, each invocation
    /// of it is one run, failed when one of `checks` holds in it.
    pub fn follow(
        &mut self,
        pid: u32,
        unit: Option<FuncId>,
        checks: Vec<ReturnCheck>,
    ) -> Result<Running<'_>, TraceError> {
        let threads = proc::threads(pid);
        let tids: Vec<u32> = threads.iter().map(|t| t.0).collect();
        // Looked at every few milliseconds: a consumer that falls behind
        // leaves events in the kernel's ring, counted lost if it fills.
        self.stream.set_backlog_cap(Some(LIVE_BACKLOG));
        // A process that throws is aid's tracee from now on, before any
        // return address is hijacked (its probes are attached by
        // `begin_running_target`): its threads stop to have their return
        // addresses repaired.
        let repairing = if self.probes.repairs_unwind() {
            Some(ptrace::seize_running(pid).map_err(TraceError::Repair)?)
        } else {
            None
        };
        let start_ns = monotonic_ns();
        if let Err(e) = self.probes.begin_running_target(pid, &tids, false) {
            if let Some(traced) = &repairing {
                ptrace::release_running(traced, self.stops.stop_signal(), &mut |_| false);
            }
            return Err(e.into());
        }
        // Units are only whole between the moment every probe is attached
        // and the moment the first one is removed.
        let attached_ns = monotonic_ns() - start_ns;
        let ctx = recorder::Context {
            pid,
            functions: &self.functions,
            pthread_create: self.pthread_create,
            bodies: &self.bodies,
            symbolize: &self.resolver,
            start_ns: Some(start_ns),
            existing_threads: threads,
        };
        let follower = Follower::new(
            Recorder::new(ctx),
            &self.stream,
            &self.functions,
            start_ns,
            attached_ns,
            unit,
            checks,
        );
        Ok(Running {
            pid,
            threads: tids.len(),
            probes: &mut self.probes,
            stops: &mut self.stops,
            functions: &self.functions,
            follower,
            repairing,
            detached_ns: None,
        })
    }
}

/// Appends to `functions` those of aid's own `points` the kernel can
/// probe, numbered after them; returns how many.
fn append_probeable(
    probes: &mut Probes,
    functions: &mut Vec<Function>,
    points: Vec<Function>,
) -> Result<usize, ProbeError> {
    let refused: BTreeSet<usize> = probes.check(&points)?.into_iter().map(|r| r.index).collect();
    let mut kept = 0;
    for (i, mut f) in points.into_iter().enumerate() {
        if !refused.contains(&i) {
            f.id = functions.len() as FuncId;
            functions.push(f);
            kept += 1;
        }
    }
    Ok(kept)
}

/// Whether `functions` already has a probe at `f`'s address.
fn traced(functions: &[Function], f: &Function) -> bool {
    functions.iter().any(|g| g.module == f.module && g.address == f.address)
}
