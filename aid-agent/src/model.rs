//! The recorded-run model: what one execution of the target looked like, in
//! the shape every later stage consumes (predicates, statistics, the causal
//! engine, reports). The recorder produces it from kernel events; the
//! session store persists it and reads it back.
//!
//! Times inside a [`Run`] are nanoseconds since the run started (the moment
//! the target was released after exec, or the unit function was entered).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod events;
mod hang;
pub mod identity;
pub mod memory;
pub mod testing;

pub use events::{EventRow, RecordedRun, apply_pauses, calls_from_rows, paired_calls};
pub use hang::{Wait, WaitGraph, Waiter};

/// Index into [`Session::functions`]; also the attach cookie in the kernel.
pub type FuncId = u32;
/// Stable thread role: 0 is the main thread, then threads in creation order.
pub type Role = u32;

/// How a raw 64-bit register value should be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// No type information (no DWARF): the register as a signed 64-bit value.
    #[default]
    Unknown,
    Void,
    Signed,
    Unsigned,
    Pointer,
    Bool,
    Float,
}

/// Type of an argument or return value, as far as DWARF tells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueType {
    pub kind: ValueKind,
    /// Size in bytes (0 when unknown).
    pub size: u8,
}

impl ValueType {
    pub const UNKNOWN: ValueType = ValueType { kind: ValueKind::Unknown, size: 0 };
    /// An address (8 bytes on x86-64).
    pub const POINTER: ValueType = ValueType { kind: ValueKind::Pointer, size: 8 };

    /// Reads a register value the way the x86-64 ABI defines it for this
    /// type: only the low `size` bytes are meaningful, sign-extended for
    /// signed integers, zero-extended otherwise.
    pub fn normalize(self, raw: u64) -> i64 {
        let bits = u32::from(self.size) * 8;
        match self.kind {
            ValueKind::Signed if (1..64).contains(&bits) => {
                let shift = 64 - bits;
                ((raw << shift) as i64) >> shift
            }
            ValueKind::Unsigned | ValueKind::Bool if (1..64).contains(&bits) => {
                (raw & ((1u64 << bits) - 1)) as i64
            }
            // Nothing is returned in rax (void) or the value travels in an
            // xmm register we do not read (float): record 0, not leftovers.
            ValueKind::Void | ValueKind::Float => 0,
            _ => raw as i64,
        }
    }

    /// True when values of this type are (or may be) addresses of objects.
    pub fn may_be_pointer(self) -> bool {
        matches!(self.kind, ValueKind::Pointer | ValueKind::Unknown)
    }
}

/// Bytes an entry probe read from what an argument pointed to
/// ([`aid_common::POINTEE_BYTES`]; zero past what was read).
pub type Content = [u8; aid_common::POINTEE_BYTES];

/// What the entry probe of a function reads from memory one argument
/// points to, chosen from DWARF: a pointer to characters (a C string), or
/// to a record whose first bytes hold scalar members. Two calls can then
/// be compared by what they were asked about (the same SKU, the same
/// seat), not only by the address they were passed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointee {
    /// The argument register (0-based), as in [`Call::args`].
    pub arg: u8,
    /// Read as a NUL-terminated string (the whole string is one field).
    pub text: bool,
    /// Bytes read, at most [`aid_common::POINTEE_BYTES`].
    pub len: u8,
    /// The fields the bytes are compared by.
    pub fields: Vec<PointeeField>,
}

/// One field of a [`Pointee`]: a named byte range of what was read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PointeeField {
    /// As people write it: `sku` (the string itself), `req.seat`,
    /// `it.sku` (a character array inside a record).
    pub name: String,
    pub offset: u8,
    pub size: u8,
    /// A character array inside a record: its bytes count up to the first
    /// NUL (what follows it is whatever the buffer held before). A string
    /// read on its own is already zero after its NUL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text: bool,
}

impl PointeeField {
    /// This field's bytes in `content` (up to the first NUL for text).
    pub fn bytes<'a>(&self, content: &'a Content) -> &'a [u8] {
        let start = usize::from(self.offset).min(content.len());
        let end = (start + usize::from(self.size)).min(content.len());
        let bytes = &content[start..end];
        match bytes.iter().position(|&b| b == 0) {
            Some(nul) if self.text => &bytes[..nul],
            _ => bytes,
        }
    }

    /// Whether two calls of one function read the same bytes for this
    /// field at entry (false when either read nothing).
    pub fn agrees(&self, a: &Call, b: &Call) -> bool {
        match (a.content, b.content) {
            (Some(x), Some(y)) => a.func == b.func && self.bytes(&x) == self.bytes(&y),
            _ => false,
        }
    }
}

/// A source position from DWARF.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceLoc {
    pub file: String,
    pub line: u32,
}

/// One traced function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Function {
    pub id: FuncId,
    /// Demangled name without the hash (Rust) — what users match and read.
    pub name: String,
    /// The symbol as it appears in the ELF file.
    pub symbol: String,
    /// The executable or shared library that defines it.
    pub module: PathBuf,
    /// Symbol value (ELF virtual address, before relocation).
    pub address: u64,
    /// File offset of the first instruction: the uprobe attach point.
    pub offset: u64,
    pub source: Option<SourceLoc>,
    /// Return type; `Void` when the function returns nothing.
    pub ret: ValueType,
    /// Types of the parameters passed in the first three integer
    /// registers: as many as the function has when DWARF says so (argument
    /// registers beyond them are recorded as 0), else three unknowns.
    pub params: Vec<ValueType>,
    /// Traced by aid itself (e.g. `pthread_create` to name threads), not
    /// asked for by the user; hidden from analysis.
    pub internal: bool,
    /// How it is probed.
    #[serde(default)]
    pub probe: Probe,
    /// What its entry probe reads from memory an argument points to.
    #[serde(default)]
    pub pointee: Option<Pointee>,
}

impl Function {
    /// Whether a return probe is attached too.
    pub fn probes_return(&self) -> bool {
        self.probe == Probe::Call
    }
}

/// How a function is probed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    /// Entry and return recorded: a traced call.
    #[default]
    Call,
    /// Entry recorded, no return probe: functions whose return is not
    /// wanted, or not safe to probe (a thread's body, which a panic or
    /// `pthread_exit` may unwind through).
    Entry,
    /// A synchronisation point (a lock, a condition variable, a sleep):
    /// entry only, attached in runs that carry noise (amplified), and in
    /// every run of a session whose budget has room for them, where each
    /// thread counts the ones it enters and records the first
    /// `SYNC_EVENTS_PER_THREAD` (no exit), and noise may stop it at one of
    /// them.
    Sync,
    /// A statement inside a traced function (where a source line begins,
    /// from DWARF): aid's own entry-only probe, counted and served like a
    /// synchronisation point, attached only to the runs that carry noise
    /// once the amplification ladder's first pass found nothing (a window
    /// between two statements of one function, where no call or lock is:
    /// `debug/amplify.rs`).
    Statement,
    /// Where an unwind begins (`_Unwind_RaiseException` and its
    /// siblings): aid's own entry-only probe in a program that throws,
    /// which hands the thread's pending return slots to the agent for
    /// repair (`aid_common::ShadowStack`). Records nothing.
    Throw,
    /// Where an exception is caught (`__cxa_begin_catch`): the agent
    /// re-arms the repaired return slots of the frames still live.
    /// Records nothing.
    Catch,
}

impl Probe {
    /// Counted per thread with the synchronisation points, where noise
    /// may stop a thread by rank (entry only).
    pub fn is_sync_point(self) -> bool {
        matches!(self, Probe::Sync | Probe::Statement)
    }
}

/// How a run was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Pass,
    Fail,
}

/// How the process (or unit) ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub wall_ns: u64,
    /// Why the run was labelled as it was, in words ("exit code 3",
    /// "stderr matched 'assertion'", "ret of handle_request = -1").
    pub reason: String,
}

/// One thread of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub role: Role,
    pub tid: u32,
    /// "main", or the start routine's name where known, else "thread".
    pub name: String,
    /// Role of the creating thread (None for the main thread).
    pub parent: Option<Role>,
    /// When it was created (0 for the main thread).
    pub created_ns: u64,
}

/// One call of a traced function: its entry and, if it returned while we
/// watched, its exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub func: FuncId,
    pub role: Role,
    /// 1-based: the k-th call of `func` on `role` in this run.
    pub instance: u32,
    pub entry_ns: u64,
    /// None when the run ended (crash, kill, timeout) inside the call.
    /// When it ended without returning (`unwound`), the moment a
    /// handler caught the exception that unwound through it, or, when the
    /// handler lies below the frame (a Rust panic caught by
    /// `catch_unwind`) or a `longjmp` went past it, the return of a
    /// traced call its thread entered before it: a bound, not a
    /// measurement.
    pub exit_ns: Option<u64>,
    /// First three integer arguments, normalised by the parameter types; 0
    /// for registers the function does not use as parameters.
    pub args: [i64; 3],
    /// Return value, normalised by the return type; None when the call
    /// did not return (see `exit_ns`).
    pub ret: Option<i64>,
    /// The call ended without returning: an exception, a panic or a
    /// `longjmp` went past its frame. `exit_ns` bounds when; its duration
    /// is not a measurement of it.
    #[serde(default)]
    pub unwound: bool,
    /// What the function's [`Pointee`] argument pointed to at entry.
    #[serde(default)]
    pub content: Option<Content>,
    /// Time the agent kept this call's thread stopped inside the call for
    /// its own work (a register edit), not part of the program's timing.
    /// Derived from [`Run::pauses`].
    #[serde(default)]
    pub paused_ns: u64,
}

impl Call {
    /// How long the call ran, without the agent's pauses.
    pub fn duration_ns(&self) -> Option<u64> {
        self.exit_ns.map(|x| self.active_ns(x))
    }

    /// Time from entry to `end`, without the agent's pauses.
    pub fn active_ns(&self, end: u64) -> u64 {
        end.saturating_sub(self.entry_ns).saturating_sub(self.paused_ns)
    }
}

/// The agent stopped a thread for its own work (not an intentional delay
/// or hold): that time is taken out of the durations of the calls the
/// thread was in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub role: Role,
    /// When the thread stopped, ns since the run started.
    pub at_ns: u64,
    pub dur_ns: u64,
}

/// One execution of the target (or one unit of a live service).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub id: u32,
    pub label: Label,
    pub outcome: Outcome,
    /// Events the kernel could not deliver (ring buffer full).
    pub lost_events: u64,
    /// Of those, thread creation/exit and exec records (the rest are
    /// function entries and exits).
    #[serde(default)]
    pub lost_thread_records: u64,
    /// False when events were lost: the call list has holes.
    pub complete: bool,
    pub threads: Vec<Thread>,
    /// Sorted by `entry_ns`.
    pub calls: Vec<Call>,
    /// Time of the last thing known about the run (its exit).
    pub end_ns: u64,
    /// Interventions that were due in this run, and whether each was applied.
    #[serde(default)]
    pub interventions: Vec<AppliedIntervention>,
    /// Random delays injected to make a rare failure more frequent.
    #[serde(default)]
    pub noise: Vec<Noise>,
    /// Agent overhead stops (intervened runs).
    #[serde(default)]
    pub pauses: Vec<Pause>,
}

impl Run {
    pub fn failed(&self) -> bool {
        self.label == Label::Fail
    }

    /// The call `site` names in this run (its function, thread and
    /// instance), if the run made it.
    pub fn call(&self, site: Site) -> Option<&Call> {
        self.calls
            .iter()
            .find(|c| c.func == site.func && c.role == site.role && c.instance == site.instance)
    }

    /// Which part of a session the run belongs to: intervened runs are
    /// experiments, runs with random delays amplified a rare failure, the
    /// rest are plain observations.
    pub fn phase(&self) -> RunPhase {
        if !self.interventions.is_empty() {
            RunPhase::Intervene
        } else if !self.noise.is_empty() {
            RunPhase::Amplify
        } else {
            RunPhase::Observe
        }
    }
}

/// What a run was made for (the `phase` of `runs.jsonl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunPhase {
    /// The program as it is.
    Observe,
    /// With random delays that make a rare failure more frequent.
    Amplify,
    /// Under interventions chosen by the causal engine (or `intervene`).
    Intervene,
}

impl RunPhase {
    pub fn name(self) -> &'static str {
        match self {
            RunPhase::Observe => "observe",
            RunPhase::Amplify => "amplify",
            RunPhase::Intervene => "intervene",
        }
    }
}

/// A recorded session: the functions traced and every run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub functions: Vec<Function>,
    pub runs: Vec<Run>,
}

impl Session {
    pub fn function(&self, id: FuncId) -> Option<&Function> {
        self.functions.get(id as usize)
    }
}

/// A point in an execution that interventions refer to: the
/// `instance`-th call of `func` on thread `role`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Site {
    pub func: FuncId,
    pub role: Role,
    pub instance: u32,
}

impl Site {
    /// Whether `other` is a call this site names: the same function on
    /// the same thread, the same call or, with instance 0, any.
    pub fn covers(self, other: Site) -> bool {
        self.func == other.func
            && self.role == other.role
            && (self.instance == 0 || self.instance == other.instance)
    }

    /// Whether call `c` is one this site names ([`Site::covers`]).
    pub fn names(self, c: &Call) -> bool {
        self.covers(Site { func: c.func, role: c.role, instance: c.instance })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    Entry,
    Exit,
}

/// Which calls an intervention acts on: calls of `func` on any of `roles`
/// (the threads of a class), the `instance`-th or every one (0), and only
/// those made while a call of `within` runs on the same thread, if set.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallSet {
    pub func: FuncId,
    /// Sorted, no duplicates.
    pub roles: Vec<Role>,
    /// 1-based; 0: every call.
    pub instance: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<FuncId>,
}

impl CallSet {
    /// Exactly one call.
    pub fn site(site: Site) -> CallSet {
        CallSet { func: site.func, roles: vec![site.role], instance: site.instance, within: None }
    }

    /// The sites it names, instance 0 standing for every call.
    pub fn sites(&self) -> Vec<Site> {
        self.roles
            .iter()
            .map(|&role| Site { func: self.func, role, instance: self.instance })
            .collect()
    }
}

/// Most re-executions of one call before a re-execution gives up
/// ([`Intervention::Reexecute`]).
pub const REEXECUTE_RETRIES: u32 = 8;

/// Which return values a value-changing intervention applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "test")]
pub enum ValueTest {
    /// Error-class values: negative (when `negative`), zero (when `zero`).
    Error { negative: bool, zero: bool },
    /// Any value other than `value`.
    NotEqual { value: i64 },
}

impl ValueTest {
    pub fn passes(self, v: i64) -> bool {
        match self {
            ValueTest::Error { negative, zero } => (negative && v < 0) || (zero && v == 0),
            ValueTest::NotEqual { value } => v != value,
        }
    }
}

/// A change to one execution that forces a predicate to the value it has in
/// passing runs (AID Fig. 2, column 3). The causal engine chooses them; the
/// live oracle turns them into kernel map entries and ptrace actions.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Intervention {
    /// At entry, return `value` without running the function ("runs too
    /// slow" → premature return). Safe functions only.
    ReturnEarly { site: Site, value: i64 },
    /// At exit, replace the return value ("returns a wrong value").
    /// Safe functions only.
    OverrideReturn { site: Site, value: i64 },
    /// Hold the thread just before the call returns ("runs too fast").
    DelayExit { site: Site, delay_us: u64 },
    /// Hold `site` at `point` until `until` at `until_point` has happened
    /// ("order flipped" → restore the passing order).
    HoldUntil { site: Site, point: Point, until: Site, until_point: Point },
    /// Whichever of the two calls enters second waits until the other has
    /// exited ("overlap on the same object" → serialise them).
    Serialize { a: Site, b: Site },
    /// Every call in `calls` whose return value passes `test` is run again
    /// from its entry with the registers it had there, up to `retries`
    /// times, so that the value it returns is genuine ("returns an error"
    /// of a transient fault); if it still passes the test, it returns
    /// `fallback` (None: the genuine value stays, and the intervention
    /// counts as not applied). Safe functions only.
    Reexecute { calls: CallSet, test: ValueTest, retries: u32, fallback: Option<i64> },
    /// Whichever call of `a` or `b` enters while a call of the other is
    /// running waits until none is ("some A overlaps some B" → serialise
    /// the two groups). With `object`, only calls on the same object wait:
    /// the 1-based argument of `a`'s calls and of `b`'s that carries it.
    SerializeGroups { a: CallSet, b: CallSet, object: Option<(u8, u8)> },
    /// Every lock a call of `calls` takes (a mutex or write lock acquired
    /// while it runs) waits while a call of `while_running` runs on
    /// another thread ("B takes a lock inside A's window" → B's critical
    /// sections come before or after A's calls, not within them). It acts
    /// at the lock calls only, not at the calls' entries: a call that
    /// runs for its thread's whole life may still be held where it locks.
    HoldLocks { calls: CallSet, while_running: CallSet },
    /// Several interventions at once (an aggregate predicate negated call
    /// by call).
    All { each: Vec<Intervention> },
}

impl Intervention {
    /// True for the kinds that change a value the program computes; AID
    /// only allows those on functions the user declared safe (Sec. 3.2).
    pub fn changes_values(&self) -> bool {
        match self {
            Intervention::ReturnEarly { .. }
            | Intervention::OverrideReturn { .. }
            | Intervention::Reexecute { .. } => true,
            Intervention::All { each } => each.iter().any(Intervention::changes_values),
            _ => false,
        }
    }

    /// The sites the intervention acts on (not the ones it waits for);
    /// instance 0 stands for every call of the function on that role.
    pub fn acting_sites(&self) -> Vec<Site> {
        match self {
            Intervention::ReturnEarly { site, .. }
            | Intervention::OverrideReturn { site, .. }
            | Intervention::DelayExit { site, .. }
            | Intervention::HoldUntil { site, .. } => vec![*site],
            Intervention::Serialize { a, b } => vec![*a, *b],
            Intervention::Reexecute { calls, .. } | Intervention::HoldLocks { calls, .. } => {
                calls.sites()
            }
            Intervention::SerializeGroups { a, b, .. } => {
                a.sites().into_iter().chain(b.sites()).collect()
            }
            Intervention::All { each } => {
                each.iter().flat_map(Intervention::acting_sites).collect()
            }
        }
    }

    /// The earliest moment a value-changing intervention can have acted
    /// in a run with `calls` (ns from the run's start): the return of the
    /// first call whose value it overrides, the entry of the first call it
    /// returns from early or runs again. None when it changes no value or
    /// none of its calls was made (or, for an override, returned).
    pub fn changes_values_from(&self, calls: &[Call]) -> Option<u64> {
        let first = |sites: &[Site], at: fn(&Call) -> Option<u64>| {
            calls.iter().filter(|c| sites.iter().any(|s| s.names(c))).filter_map(at).min()
        };
        match self {
            Intervention::OverrideReturn { site, .. } => first(&[*site], |c| c.exit_ns),
            Intervention::ReturnEarly { site, .. } => first(&[*site], |c| Some(c.entry_ns)),
            Intervention::Reexecute { calls: set, .. } => first(&set.sites(), |c| Some(c.entry_ns)),
            Intervention::All { each } => {
                each.iter().filter_map(|iv| iv.changes_values_from(calls)).min()
            }
            _ => None,
        }
    }

    /// The interventions it is made of (itself, unless it is `All`).
    pub fn parts(&self) -> Vec<&Intervention> {
        match self {
            Intervention::All { each } => each.iter().flat_map(Intervention::parts).collect(),
            other => vec![other],
        }
    }
}

/// What happened to one intervention in one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedIntervention {
    pub intervention: Intervention,
    /// The site was reached and the action was carried out.
    pub applied: bool,
    /// A hold gave up waiting (the run does not count as evidence).
    pub timed_out: bool,
    /// A thread was still held for it when the target ended: it kept what
    /// it was there for until the run's end (a failing run is evidence
    /// against its candidate, whatever the predicates say).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_at_end: bool,
    /// When it first acted in the run, on the run's clock: a thread
    /// stopped for it (a value it changes, from the run's start). None:
    /// it never did. What the run showed before then, the intervention
    /// cannot have caused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acted_ns: Option<u64>,
}

/// Noise injected into a run to make a rare failure more frequent
/// (failure amplification, `intervene/noise.rs`): where, what, and — once
/// the run is over — what it did. Never a cause: the time a thread was
/// held for it is a [`Pause`] of that thread, and the functions it acts at
/// are aid's own (synchronisation points are internal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Noise {
    pub at: NoiseAt,
    pub action: NoiseAction,
    /// How long the thread was held there (0: never reached).
    #[serde(default)]
    pub held_ns: u64,
    /// The function it stopped in, when reached (for a synchronisation
    /// point: which one, e.g. `pthread_mutex_lock`).
    #[serde(default)]
    pub func: Option<FuncId>,
    /// Chosen as a near miss of earlier runs (the run's noise is
    /// near-miss delays), not drawn among all points.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub near_miss: bool,
}

/// Where noise acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NoiseAt {
    /// Before the first instruction of a traced call.
    Call { site: Site },
    /// At the entry of the `step`-th synchronisation point (counting all
    /// of them: locks, unlocks, waits, sleeps) thread `role` enters.
    Sync { role: Role, step: u32 },
    /// At statement point or traced function `func`, on every thread that
    /// reaches it (each arrival held, at most `holds` a run): the threads
    /// of a pool running the same code all stand there together.
    Every {
        func: FuncId,
        /// Most arrivals held in one run (sessions written before it was
        /// recorded held 8).
        #[serde(default = "every_holds_before")]
        holds: u32,
    },
    /// The whole process, at no point: where it runs and how its threads
    /// are prioritised ([`NoiseAction::OneCpu`]).
    Process,
}

/// The bound of [`NoiseAt::Every`] before the bound followed the threads.
fn every_holds_before() -> u32 {
    8
}

/// The priority of a thread held at `exit` ([`NoiseAction::Demote`]):
/// below every PCT change point, and let go only when no other thread is
/// held by the agent and every other thread of the target has ended or
/// waits in a futex with no timeout — the threads `main` never joined
/// finish first.
pub const OUTLIVE: u32 = 0;

/// What noise does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NoiseAction {
    /// Hold the thread this long (random delays, as rr's chaos mode).
    Delay { us: u64 },
    /// A PCT priority change point: the thread drops below every other
    /// thread — it is held until no other thread of the target can run
    /// (each is blocked, sleeping, stopped or gone), then resumes in
    /// `priority` order (higher first) among those demoted; at most
    /// `max_us`.
    /// Priority [`OUTLIVE`] (the thread calling `exit`) is let go only
    /// when every other thread has ended or waits for one the agent
    /// holds, and none is held.
    Demote { priority: u32, max_us: u64 },
    /// Nothing this run: a point of a focused plan left off in this run
    /// (`debug/amplify.rs`), so that runs with and without it are made
    /// alike — under the agent's control, the sync-point probes attached —
    /// and only the plan differs.
    Skip,
    /// Every thread of the target on CPU `cpu`, each given a random
    /// priority (nice 0 or 19) again and again, at times drawn from
    /// `seed`, 1 to 50 ms apart (log-uniform): the one that runs is
    /// switched at whatever instruction it is at, with no probe there
    /// (rr's chaos mode, with the kernel's scheduler; `--amplify
    /// one-cpu`). At [`NoiseAt::Process`] only.
    OneCpu { cpu: u32, seed: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_sign_extends_32_bit_ints() {
        let int = ValueType { kind: ValueKind::Signed, size: 4 };
        assert_eq!(int.normalize(0x0000_0000_ffff_ffff), -1);
        assert_eq!(int.normalize(0xdead_beef_0000_0007), 7);
        let uint = ValueType { kind: ValueKind::Unsigned, size: 4 };
        assert_eq!(uint.normalize(0x1234_5678_ffff_ffff), 0xffff_ffff);
        let b = ValueType { kind: ValueKind::Bool, size: 1 };
        assert_eq!(b.normalize(0xffff_ff01), 1);
        assert_eq!(ValueType::UNKNOWN.normalize(u64::MAX), -1);
        assert_eq!(ValueType { kind: ValueKind::Void, size: 0 }.normalize(0x7fff_1234), 0);
    }
}
