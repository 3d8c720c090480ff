//! Shared-memory access for real: re-runs of the session's program with
//! hardware watchpoints on objects the explainers name (a pattern's, a
//! slice's), each read and write attributed to the call active on its
//! thread (`record::watchpoints`). `aid-agent watch` shows them; `mine`
//! and `slice` with `--access watch` type their access events with them
//! instead of guessing from the calls' entries and exits; the data races
//! they show are a fact of the run (`model::memory::data_races`); and a
//! delay right after each access amplifies a failure that needs the other
//! thread to come in between.
//!
//! The re-runs are a session of their own; `watch.jsonl` beside its runs
//! holds, per run, what became of each object and every access.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    fs::OpenOptions,
    io::{BufRead as _, Write as _},
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::{ExplainError, objects::Globals, rerun};
use crate::{
    bpf::LoadOptions,
    intervene::Plan,
    model::{
        Function, Intervention, Point, Run, Session, Site,
        identity::RoleNames,
        memory::{DataRace, MemAccess, data_races},
    },
    record::{
        progress::Progress,
        watchpoints::{
            Armed, Locate, MAX_OBJECTS, WatchDelay, WatchObject, WatchedRun, Watcher, watched_run,
        },
    },
    store::Loaded,
};

/// The file of a watched session that holds the accesses.
pub const WATCH_FILE: &str = "watch.jsonl";

/// At most this many accesses of a run are kept (~120 bytes each in
/// `watch.jsonl`): a hot loop on a watched object must not fill the disk.
/// A run that had more keeps its first ones and counts the rest; it is
/// not used for typing.
pub const MAX_ACCESSES: usize = 200_000;

/// One line of `watch.jsonl`: a run's watched accesses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRecord {
    pub run: u32,
    pub objects: Vec<WatchObject>,
    pub armed: Vec<Armed>,
    pub lost_hits: u64,
    pub stray_hits: u64,
    /// Accesses beyond [`MAX_ACCESSES`], not kept.
    #[serde(default)]
    pub dropped: u64,
    /// In time order.
    pub accesses: Vec<MemAccess>,
}

/// What the explainers need of a watched run: which pointer values are
/// the watched objects' starts (by canonical name), and their accesses.
#[derive(Clone, Debug, Default)]
pub struct Watched {
    pub objects: BTreeMap<u64, String>,
    pub accesses: Vec<MemAccess>,
}

impl WatchRecord {
    pub fn watched(&self) -> Watched {
        Watched {
            objects: self
                .armed
                .iter()
                .filter_map(|a| Some((a.base.or(a.addr)?, a.object.clone())))
                .collect(),
            accesses: self.accesses.clone(),
        }
    }

    /// Every object was watched from its arming on, on every thread, and
    /// no hit was lost or left unattributed (a hit of a thread the run
    /// does not know is an access no call can be charged with).
    pub fn complete(&self) -> bool {
        self.lost_hits == 0
            && self.stray_hits == 0
            && self.dropped == 0
            && self.armed.iter().all(|a| a.addr.is_some() && a.errors.is_empty())
    }
}

/// The watch records of a session directory (empty when it has none).
pub fn load_records(dir: &Path) -> anyhow::Result<BTreeMap<u32, WatchRecord>> {
    let path = dir.join(WATCH_FILE);
    let Ok(file) = std::fs::File::open(&path) else { return Ok(BTreeMap::new()) };
    let mut out = BTreeMap::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        let rec: WatchRecord = serde_json::from_str(&line)
            .with_context(|| format!("{} line {} is not a watch record", path.display(), n + 1))?;
        out.insert(rec.run, rec);
    }
    Ok(out)
}

/// What to watch, from canonical object names as the explainers print
/// them: a global (`events`, `plan+0x8`) is armed at the main thread's
/// first traced call of `base`; an object named by its first appearance
/// (`main:make_cell#1.ret`, `worker:fill#2.arg0`) at that call; a lock
/// (`lock@m`) is watched on the lock word itself.
pub fn resolve(
    functions: &[Function],
    base: &Run,
    globals: Option<&Globals>,
    names: &[String],
) -> Result<Vec<WatchObject>, ExplainError> {
    if names.len() > MAX_OBJECTS {
        return Err(ExplainError::Watch(format!(
            "{} objects named; a run can watch at most {MAX_OBJECTS} (2 of a thread's 4 debug registers each)",
            names.len()
        )));
    }
    let roles = RoleNames::of(base);
    names.iter().map(|name| resolve_one(functions, base, &roles, globals, name)).collect()
}

fn resolve_one(
    functions: &[Function],
    base: &Run,
    roles: &RoleNames,
    globals: Option<&Globals>,
    name: &str,
) -> Result<WatchObject, ExplainError> {
    let bad = |reason: String| ExplainError::Object { name: name.to_owned(), reason };
    let plain = name.strip_prefix("lock@").unwrap_or(name);
    // A word inside the object: `object+0x20`.
    let (object, offset) = match plain.rsplit_once('+') {
        Some((o, off)) => {
            let hex = off
                .strip_prefix("0x")
                .ok_or_else(|| bad(format!("`+{off}`: give the offset in hex, `+0x20`")))?;
            let offset = u64::from_str_radix(hex, 16)
                .map_err(|_| bad(format!("`{off}` is not a hex offset")))?;
            (o, offset)
        }
        None => (plain, 0),
    };
    if let Some((role_name, rest)) = object.split_once(':') {
        let (call, slot) =
            rest.rsplit_once('.').ok_or_else(|| bad("no `.argN` or `.ret`".into()))?;
        let (func, k) = call.rsplit_once('#').ok_or_else(|| bad("no `#k`".into()))?;
        let instance: u32 = k.parse().map_err(|_| bad(format!("`{k}` is not a call number")))?;
        let role = roles
            .role(role_name)
            .ok_or_else(|| bad(format!("run {} has no thread named {role_name}", base.id)))?;
        let f = functions
            .iter()
            .find(|f| f.name == func)
            .ok_or_else(|| bad(format!("{func} is not a traced function")))?;
        let (locate, point) = match slot {
            "ret" => (Locate::Ret, Point::Exit),
            a => {
                let arg: u8 = a
                    .strip_prefix("arg")
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n < 3)
                    .ok_or_else(|| bad(format!("`{a}` is not arg0, arg1, arg2 or ret")))?;
                (Locate::Arg { arg }, Point::Entry)
            }
        };
        let arm_at = Site { func: f.id, role, instance };
        if !base.calls.iter().any(|c| c.func == f.id && c.role == role && c.instance == instance) {
            return Err(bad(format!("run {} has no call {role_name}:{func}#{instance}", base.id)));
        }
        if !offset.is_multiple_of(8) {
            return Err(
                bad("the offset of a word in a heap object must be a multiple of 8".into()),
            );
        }
        return Ok(WatchObject {
            name: name.to_owned(),
            object: object.to_owned(),
            offset,
            size: None,
            locate,
            arm_at,
            arm_point: point,
            len: 8,
            touched: false,
            member: None,
        });
    }
    let globals = globals.ok_or_else(|| {
        bad("the executable's symbols cannot be read to place this global".into())
    })?;
    let (elf_addr, size) = globals.place(plain).map_err(bad)?.ok_or_else(|| {
        bad("neither a global of the executable (or a member of one, `savings.balance`) nor `role:function#k.argN|ret`".into())
    })?;
    // The whole object's size, looked up again only when a word of it was
    // named: a member is placed from DWARF, which is read anew each time.
    let object_size = match offset {
        0 => size,
        _ => globals.lookup(object).map_or(size, |(_, s)| s),
    };
    // A larger global named whole (not as a lock, `lock@savings`): the one
    // word its code touches, when there is one (`savings` → its balance,
    // not the mutex it opens with).
    let touched = match (offset, size > 8 && plain == name) {
        (0, true) => globals.touched(plain).ok().flatten().and_then(|t| t.one_word(elf_addr)),
        _ => None,
    };
    let (offset, elf_addr, len) = match touched {
        Some((word, len)) => (word, elf_addr + word, len),
        None => {
            let len = [8, 4, 2, 1]
                .into_iter()
                .find(|l| *l <= size.max(1) && elf_addr.is_multiple_of(*l))
                .unwrap_or(1);
            (offset, elf_addr, len)
        }
    };
    let first = base
        .calls
        .iter()
        .filter(|c| c.role == 0)
        .min_by_key(|c| c.entry_ns)
        .ok_or_else(|| bad(format!("run {} has no traced call on the main thread", base.id)))?;
    Ok(WatchObject {
        name: name.to_owned(),
        object: object.to_owned(),
        offset,
        size: Some(object_size),
        locate: Locate::Global { elf_addr },
        arm_at: Site { func: first.func, role: 0, instance: first.instance },
        arm_point: Point::Entry,
        len,
        touched: touched.is_some(),
        member: touched.and_then(|(word, len)| globals.member_at(plain, word, len)),
    })
}

/// How the watched re-runs are made.
#[derive(Clone, Debug)]
pub struct WatchSettings {
    /// For `mine` and `slice`: the objects (or words, `pool+0x20`) to
    /// watch instead of the ones the analysis names.
    pub names: Vec<String>,
    pub runs: u32,
    /// Stop at the first failing run (what `slice --access watch` needs).
    pub until_failure: bool,
    pub delay: Option<WatchDelay>,
    /// Interventions every run is made under too (`slice --verify`).
    pub interventions: Vec<Intervention>,
    pub hold_timeout: Duration,
    pub timeout: Duration,
    /// The session directory of the re-runs.
    pub out: PathBuf,
    pub load: LoadOptions,
}

/// The watched re-runs.
pub struct WatchOutcome {
    pub out: PathBuf,
    pub runs: Vec<(Run, WatchRecord)>,
    /// Functions of the re-runs' session (the recorded session's, plus
    /// aid's own probes in the same order).
    pub functions: Vec<Function>,
}

/// Re-runs the program `loaded` was recorded from with `objects` watched,
/// stores each run and its accesses in `settings.out`. Stops early when
/// `cancel` is set (the runs so far are kept and returned).
pub fn watch_program(
    loaded: &Loaded,
    objects: Vec<WatchObject>,
    settings: &WatchSettings,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<WatchOutcome> {
    let watcher = Watcher::new(&loaded.header.program, objects.clone(), settings.delay)?;
    let (mut session, policy) =
        rerun::restart(loaded, &settings.out, settings.timeout, settings.load)?;
    let plan =
        Plan::new(&settings.interventions, settings.hold_timeout, session.tracer.functions());
    let path = settings.out.join(WATCH_FILE);
    let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    ui.say(&format!("watching {} with hardware breakpoints", names.join(" and ")));
    ui.begin("watched runs", Some(u64::from(settings.runs)));
    let mut runs = Vec::new();
    for id in 1..=settings.runs {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let w = watched_run(
            &mut session.tracer,
            &session.target,
            id,
            &policy,
            &plan,
            &watcher,
            cancel,
        )?;
        session.writer.append(&w.rec, session.tracer.functions())?;
        let (rec, record) = split_watched(id, &objects, w);
        append_record(&path, &record)?;
        let failed = rec.run.failed();
        ui.step(&format!(
            "run {id}: {}, {} accesses",
            if failed { "failed" } else { "passed" },
            record.accesses.len()
        ));
        runs.push((rec.run, record));
        if failed && settings.until_failure {
            break;
        }
    }
    ui.end();
    Ok(WatchOutcome {
        out: settings.out.clone(),
        runs,
        functions: session.tracer.functions().to_vec(),
    })
}

/// A watched run as the session stores it: the recorded run, and its
/// watch record (at most [`MAX_ACCESSES`] accesses kept, the rest
/// counted).
pub fn split_watched(
    id: u32,
    objects: &[WatchObject],
    w: WatchedRun,
) -> (crate::model::RecordedRun, WatchRecord) {
    let mut accesses = w.accesses;
    let dropped = accesses.len().saturating_sub(MAX_ACCESSES) as u64;
    accesses.truncate(MAX_ACCESSES);
    let record = WatchRecord {
        run: id,
        objects: objects.to_vec(),
        armed: w.armed,
        lost_hits: w.lost_hits,
        stray_hits: w.stray_hits,
        dropped,
        accesses,
    };
    (w.rec, record)
}

/// Appends one record to a session's `watch.jsonl` at `path`.
pub fn append_record(path: &Path, record: &WatchRecord) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    crate::store::hand_over(path);
    let line = serde_json::to_string(record).expect("watch records serialize") + "\n";
    file.write_all(line.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// One call's accesses to one object, in order, repeated accesses of the
/// same kind shown once (`R W`, `R`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallAccesses {
    pub role: String,
    pub function: String,
    pub instance: u32,
    pub object: String,
    /// `R`/`W` in order, consecutive repeats merged; a repeating cycle
    /// once with its count (`(R W)×1000`), a long irregular one cut.
    pub accesses: String,
    /// Reads and writes before merging.
    pub reads: usize,
    pub writes: usize,
}

/// The access kinds of one call in words: `R W`, or `(R W)×1000` for a
/// long one (with repeats merged, reads and writes alternate).
fn sequence_text(kinds: &[char]) -> String {
    let join = |k: &[char]| k.iter().map(char::to_string).collect::<Vec<_>>().join(" ");
    if kinds.len() <= 4 {
        return join(kinds);
    }
    for p in 1..=4 {
        if kinds.iter().enumerate().all(|(i, k)| *k == kinds[i % p]) {
            let rest = &kinds[kinds.len() / p * p..];
            let tail = if rest.is_empty() { String::new() } else { format!(" {}", join(rest)) };
            return format!("({})×{}{tail}", join(&kinds[..p]), kinds.len() / p);
        }
    }
    format!("{} … {}", join(&kinds[..4]), join(&kinds[kinds.len() - 2..]))
}

/// A watched run in words: per call, what it did to each object; the
/// accesses outside traced calls; the data races.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub run: u32,
    pub failed: bool,
    pub outcome: String,
    pub armed: Vec<Armed>,
    pub calls: Vec<CallAccesses>,
    /// Accesses by a thread with no traced call active, per role name.
    pub outside_calls: BTreeMap<String, usize>,
    pub races: Vec<String>,
    pub lost_hits: u64,
    pub dropped: u64,
    /// Objects watched on their first word only: (bytes watched, size).
    pub partial: BTreeMap<String, (u64, u64)>,
    /// Larger globals watched on the one word their code touches outside
    /// lock calls: (offset, bytes watched, size).
    pub touched: BTreeMap<String, (u64, u64, u64)>,
    /// Of those, the member of the global's record that holds that word,
    /// when DWARF names one (`savings` → `balance`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub members: BTreeMap<String, String>,
}

/// The words for one watched run.
pub fn run_report(run: &Run, record: &WatchRecord, functions: &[Function]) -> RunReport {
    let roles = RoleNames::of(run);
    let fname = |c: usize| {
        functions.get(run.calls[c].func as usize).map_or("?", |f| f.name.as_str()).to_owned()
    };
    let mut order: Vec<(usize, String)> = Vec::new();
    // (kinds with consecutive repeats merged, reads, writes) per call/object.
    let mut seqs: BTreeMap<(usize, String), (Vec<char>, usize, usize)> = BTreeMap::new();
    let mut outside: BTreeMap<String, usize> = BTreeMap::new();
    for a in &record.accesses {
        let Some(c) = a.call else {
            *outside.entry(roles.name(a.role).to_owned()).or_default() += 1;
            continue;
        };
        let key = (c, a.object.clone());
        let kind = if a.write { 'W' } else { 'R' };
        let entry = seqs.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            (Vec::new(), 0, 0)
        });
        if entry.0.last() != Some(&kind) {
            entry.0.push(kind);
        }
        if a.write {
            entry.2 += 1;
        } else {
            entry.1 += 1;
        }
    }
    let calls = order
        .iter()
        .map(|key| {
            let c = &run.calls[key.0];
            let (kinds, reads, writes) = &seqs[key];
            CallAccesses {
                role: roles.name(c.role).to_owned(),
                function: fname(key.0),
                instance: c.instance,
                object: key.1.clone(),
                accesses: sequence_text(kinds),
                reads: *reads,
                writes: *writes,
            }
        })
        .collect();
    let call_text = |i: usize| {
        let c = &run.calls[i];
        format!("{}:{}#{}", roles.name(c.role), fname(i), c.instance)
    };
    let rw = |w: bool| if w { "W" } else { "R" };
    let races = data_races(run, &record.accesses)
        .iter()
        .map(|r: &DataRace| {
            format!(
                "{} {} ∥ {} {} on {}",
                call_text(r.first),
                rw(r.first_writes),
                call_text(r.second),
                rw(r.second_writes),
                r.object
            )
        })
        .collect();
    RunReport {
        run: run.id,
        failed: run.failed(),
        outcome: run.outcome.reason.clone(),
        armed: record.armed.clone(),
        calls,
        outside_calls: outside,
        races,
        lost_hits: record.lost_hits,
        dropped: record.dropped,
        partial: record
            .objects
            .iter()
            .filter(|o| o.partial())
            .map(|o| (o.name.clone(), (o.len, o.size.unwrap_or(0))))
            .collect(),
        touched: record
            .objects
            .iter()
            .filter(|o| o.touched)
            .map(|o| (o.name.clone(), (o.offset, o.len, o.size.unwrap_or(0))))
            .collect(),
        members: record
            .objects
            .iter()
            .filter(|o| o.touched)
            .filter_map(|o| Some((o.name.clone(), o.member.clone()?)))
            .collect(),
    }
}

/// Which bytes of a larger object were watched, for the text: nothing
/// when the object was watched whole.
fn watched_part(r: &RunReport, name: &str) -> String {
    if let Some((len, size)) = r.partial.get(name) {
        return format!(" (its first {len} of {size} bytes)");
    }
    r.touched.get(name).map_or_else(String::new, |(offset, len, size)| {
        let member = r.members.get(name).map(|m| format!(", {name}.{m}")).unwrap_or_default();
        format!(
            " (bytes {offset}-{} of {size}{member}: the only ones the program's code touches outside lock calls)",
            offset + len - 1
        )
    })
}

/// `aid-agent watch`'s text.
pub fn render_text(reports: &[RunReport]) -> String {
    let mut s = String::new();
    for r in reports {
        let _ = writeln!(
            s,
            "run {} ({}: {})",
            r.run,
            if r.failed { "failed" } else { "passed" },
            r.outcome
        );
        for a in &r.armed {
            match (a.addr, a.at_ns) {
                (Some(addr), Some(at)) => {
                    let _ = writeln!(
                        s,
                        "  {} at {addr:#x}, watched from {:.3} ms on {} thread(s){}",
                        a.name,
                        at as f64 / 1e6,
                        a.threads,
                        watched_part(r, &a.name)
                    );
                }
                _ => {
                    let _ = writeln!(s, "  {}: not watched", a.name);
                }
            }
            for e in &a.errors {
                let _ = writeln!(s, "    warning: {e}");
            }
        }
        let width = r
            .calls
            .iter()
            .map(|c| c.role.len() + c.function.len() + c.object.len() + 6)
            .max()
            .unwrap_or(0);
        for c in &r.calls {
            let call = format!("{}:{}#{}({})", c.role, c.function, c.instance, c.object);
            let _ = writeln!(s, "    {call:width$}  {}", c.accesses);
        }
        for (role, n) in &r.outside_calls {
            let _ = writeln!(s, "    {role}: {n} access(es) outside traced calls");
        }
        for race in &r.races {
            let _ = writeln!(s, "  race: {race}");
        }
        if r.lost_hits > 0 {
            let _ = writeln!(s, "  warning: {} hits lost (buffer full)", r.lost_hits);
        }
        if r.dropped > 0 {
            let _ = writeln!(
                s,
                "  warning: {} more accesses not kept (over {MAX_ACCESSES})",
                r.dropped
            );
        }
    }
    s
}

/// The objects of `names` whose accesses a session shows, for messages.
pub fn object_names(records: &BTreeMap<u32, WatchRecord>) -> BTreeSet<String> {
    records.values().flat_map(|r| r.objects.iter().map(|o| o.name.clone())).collect()
}

/// Runs of `session` made with `objects` watched, recorded in a session
/// directory by [`watch_program`], as [`Watched`] per run id.
pub fn watched_runs(records: &BTreeMap<u32, WatchRecord>) -> BTreeMap<u32, Watched> {
    records.iter().map(|(id, r)| (*id, r.watched())).collect()
}

/// A session and its watch records, loaded together.
pub fn load_watched(dir: &Path) -> anyhow::Result<(Session, BTreeMap<u32, WatchRecord>)> {
    let session = crate::store::load(dir)?;
    Ok((session, load_records(dir)?))
}

#[cfg(test)]
mod tests {
    use super::sequence_text;

    #[test]
    fn access_sequences_in_words() {
        let k = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(sequence_text(&k("RW")), "R W");
        assert_eq!(sequence_text(&k("RWRWRWR")), "(R W)×3 R");
        assert_eq!(sequence_text(&k("RWRWRW")), "(R W)×3");
        assert_eq!(sequence_text(&k("WRWRW")), "(W R)×2 W");
    }
}
