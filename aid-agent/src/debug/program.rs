//! Debugging a program aid starts itself: every run is a fresh process,
//! observed or intervened on from its exec to its end, so any thread can
//! be intervened on and a rare failure can be amplified.

use std::{
    cell::RefCell,
    collections::BTreeMap,
    ffi::OsString,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
};

use anyhow::bail;

use super::{DebugOptions, Debugged, beside, debug, source::RunSource};
use crate::explain::{objects::Globals, watch};
use crate::{
    bpf::{LoadOptions, Programs},
    intervene::{Plan, Reach},
    model::{FuncId, Function, Noise, RecordedRun},
    record::{
        census,
        fail::RunPolicy,
        progress::Progress,
        start::{self, ProgramSession},
        tracer::Tracer,
        watchpoints::{WatchDelay, WatchedRun, Watcher, watched_run},
    },
    store::Mode,
    symbols::{
        self, Resolver,
        own::{self, Skipped},
    },
    sys::spawn::Target,
};

/// Runs of a program, one process each.
pub struct ProgramSource<'t> {
    tracer: &'t mut Tracer,
    target: &'t Target,
    policy: &'t RunPolicy,
    next_id: u32,
    amplify: Amplify,
}

/// Failure amplification with a watchpoint: a thread is held right after
/// it touches the object (`--amplify-watch`).
#[derive(Clone, Debug)]
pub struct WatchAmplify {
    /// The object, named as `watch` names it (`account`, `pool+0x20`,
    /// `main:make_cell#1.ret`).
    pub object: String,
    pub delay: WatchDelay,
}

/// Where `--amplify-watch` stands: the object is located with the first
/// run (made without), then watched in every later run, observed or
/// intervened on, so that rounds are judged under the conditions the
/// observations were made in.
enum Amplify {
    Off,
    Pending(WatchAmplify),
    Ready(Box<Watcher>),
}

impl<'t> ProgramSource<'t> {
    pub fn new(tracer: &'t mut Tracer, target: &'t Target, policy: &'t RunPolicy) -> Self {
        ProgramSource { tracer, target, policy, next_id: 1, amplify: Amplify::Off }
    }

    /// Amplifies with a delay after each access of `a.object` (up to
    /// `a.delay.max` per run), from the second run on.
    #[must_use]
    pub fn with_watch_amplify(mut self, a: Option<WatchAmplify>) -> Self {
        self.amplify = a.map_or(Amplify::Off, Amplify::Pending);
        self
    }

    /// After the first run: the object located in it, the watcher ready.
    fn locate(&mut self, base: &RecordedRun) -> anyhow::Result<()> {
        let Amplify::Pending(a) = &self.amplify else { return Ok(()) };
        let globals = Globals::load(&self.target.program);
        let objects = watch::resolve(
            self.tracer.functions(),
            &base.run,
            globals.as_ref(),
            std::slice::from_ref(&a.object),
        )
        .map_err(|e| anyhow::anyhow!("--amplify-watch {}: {e}", a.object))?;
        let watcher = Watcher::new(&self.target.program, objects, Some(a.delay))?;
        self.amplify = Amplify::Ready(Box::new(watcher));
        Ok(())
    }

    /// One run with `plan`, watched for amplification when asked.
    fn run(&mut self, id: u32, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        match &self.amplify {
            Amplify::Ready(w) => {
                Ok(watched_run(self.tracer, self.target, id, self.policy, plan, w, cancel)?.rec)
            }
            _ => Ok(self.tracer.intervene(self.target, id, self.policy, plan, cancel)?),
        }
    }

    fn next_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

impl RunSource for ProgramSource<'_> {
    fn noun(&self) -> &'static str {
        "run"
    }

    fn functions(&self) -> &[Function] {
        self.tracer.functions()
    }

    fn reach(&self) -> Reach {
        Reach::PROGRAM
    }

    fn can_amplify(&self) -> bool {
        true
    }

    fn hint_no_failure(&self) -> String {
        format!(
            " (a run fails on: {}): aid needs to see the failure; try more --max-runs or check --fail-on",
            self.policy.texts.join(", ")
        )
    }

    fn hint_all_failed(&self) -> &'static str {
        "; check --fail-on and --timeout"
    }

    fn observe(
        &mut self,
        noise: &[Noise],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Option<RecordedRun>> {
        let id = self.next_id();
        let rec = if noise.is_empty() && !matches!(self.amplify, Amplify::Ready(_)) {
            self.tracer.observe(self.target, id, self.policy, cancel)?
        } else {
            let plan = Plan::default().with_noise(noise);
            self.run(id, &plan, cancel)?
        };
        self.locate(&rec)?;
        Ok(Some(rec))
    }

    fn begin_interventions(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    fn intervene(&mut self, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        let id = self.next_id();
        self.run(id, plan, cancel)
    }

    fn end_interventions(&mut self) {}

    fn watchable(&self) -> Option<&std::path::Path> {
        Some(&self.target.program)
    }

    fn watched(
        &mut self,
        id: u32,
        watcher: &Watcher,
        cancel: &AtomicBool,
    ) -> anyhow::Result<WatchedRun> {
        let plan = Plan::default();
        Ok(watched_run(self.tracer, self.target, id, self.policy, &plan, watcher, cancel)?)
    }
}

/// `debug -- CMD`.
#[derive(Clone)]
pub struct ProgramRequest {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// `--trace` patterns; none: the program's own functions that are
    /// cheap enough to trace (`record/census.rs`).
    pub trace: Vec<String>,
    /// `--safe` patterns (also in `options.safe`), each of which must name
    /// a traced function.
    pub safe: Vec<String>,
    pub policy: RunPolicy,
    pub out: Option<PathBuf>,
    pub load: LoadOptions,
    pub options: DebugOptions,
    /// `--patterns`: a `mine --emit-predicates` file whose "pattern
    /// occurs" predicates are evaluated on the observed runs.
    pub patterns: Option<PathBuf>,
    /// `--amplify-watch`: hold a thread right after it touches an object.
    pub amplify_watch: Option<WatchAmplify>,
}

/// Levels of callers [`debug_program`] climbs at most.
pub const CALLER_LEVELS: usize = 3;

/// Starts the session, debugs the program, and removes the probes.
///
/// Without `--trace`, when the default set confirmed no cause and nothing
/// in it points further, the functions it left out for cost but that fit
/// the budget on their own are traced next, a share at a time, each share
/// in a session of its own under the first one's directory (beside the
/// default set's functions called a handful of times per run;
/// [`census::left_out_sessions`]), until one confirms a cause or points
/// to a caller.
///
/// When no cause was confirmed and what separates the runs is a key used
/// twice by a traced function (a `repeated_key` predicate: nothing in
/// that function can be intervened on), the decision that led to it was
/// made before, in a caller: the program is debugged again with the
/// callers DWARF's call sites name traced too, in a session of its own;
/// while no cause is confirmed, the callers of the functions added last
/// are added next (through callers traced already, to theirs), up to
/// [`CALLER_LEVELS`] levels.
pub fn debug_program(
    req: &ProgramRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Debugged> {
    let (mut done, first_phase) = debug_phase(req, cancel, ui)?;
    let Phase { mut callers, left_out } = first_phase;
    let first = done.out.clone();
    // The functions to climb from: those that saw a key twice, then the
    // callers added last.
    let mut from = repeated_keys(&done.diagnosis);
    let shares = left_out.sessions.len();
    for (k, share) in left_out.sessions.iter().enumerate() {
        if !from.is_empty() || settled(&done, cancel) {
            break;
        }
        let out = first.join(format!("left-out-{}", k + 1));
        ui.say(&format!(
            "no cause confirmed: debugging again with {} traced, left out of the default set for cost (share {} of {shares}, each within the budget beside the functions called at most {} times a run), in {}",
            start::summarize(&share.iter().map(String::as_str).collect::<Vec<_>>()),
            k + 1,
            census::CARRY_CALLS,
            out.display()
        ));
        let names: Vec<&String> = left_out.carried.iter().chain(share).collect();
        let trace = names.iter().map(|n| globset::escape(n)).collect();
        let safe = safe_within(&req.safe, &names);
        match debug_phase(&ProgramRequest { safe, ..again(req, trace, out) }, cancel, ui) {
            Ok((next, phase)) => {
                done = next_session(done, next);
                callers = phase.callers;
                from = repeated_keys(&done.diagnosis);
            }
            Err(e) => {
                ui.say(&format!("tracing the functions left out stopped: {e:#}"));
                break;
            }
        }
    }
    if from.is_empty() && !settled(&done, cancel) && !left_out.beyond.is_empty() {
        ui.say(&format!(
            "no cause confirmed; never traced, beyond the {} sessions of functions left out: {}; name them with --trace to trace them",
            census::MAX_LEFT_OUT_SESSIONS,
            left_out.beyond.join(", ")
        ));
    }
    for level in 1..=CALLER_LEVELS {
        if settled(&done, cancel) {
            break;
        }
        let d = &done.diagnosis;
        let traced: Vec<&str> =
            d.session.functions.iter().filter(|f| !f.internal).map(|f| f.name.as_str()).collect();
        let added = callers_of_named(&from, &callers, &traced);
        if added.is_empty() {
            break;
        }
        let out = first.join(format!("callers-{level}"));
        ui.say(&format!(
            "no cause confirmed; {}: debugging again with {} traced too (their callers in the code, from DWARF's call sites; what they cost was not measured first), in {}",
            if level == 1 {
                format!(
                    "what separates the runs is a key used twice by {}, which nothing in it can change",
                    start::summarize(&from.iter().map(String::as_str).collect::<Vec<_>>())
                )
            } else {
                "climbing one caller further".to_owned()
            },
            start::summarize(&added.iter().map(String::as_str).collect::<Vec<_>>()),
            out.display()
        ));
        let trace = traced.iter().copied().chain(added.iter().map(String::as_str));
        let trace = trace.map(globset::escape).collect();
        // A session that cannot be made (a caller that cannot be probed)
        // ends the climb; what was found so far is reported.
        match debug_phase(&again(req, trace, out), cancel, ui) {
            Ok((next, phase)) => {
                done = next_session(done, next);
                callers = phase.callers;
            }
            Err(e) => {
                ui.say(&format!("climbing to callers stopped: {e:#}"));
                break;
            }
        }
        from = added;
    }
    Ok(done)
}

/// Whether the search ends here: a cause confirmed, or the session cut
/// short.
fn settled(done: &Debugged, cancel: &AtomicBool) -> bool {
    let d = &done.diagnosis;
    d.discovery.as_ref().is_some_and(|x| x.root_cause.is_some())
        || d.interrupted.is_some()
        || cancel.load(Ordering::Relaxed)
}

/// The `--safe` patterns that name one of `names`: a share of the
/// functions left out is traced without most of the default set, and a
/// pattern for a function it does not trace does not apply to it (the
/// first session checked them against the default set).
fn safe_within(safe: &[String], names: &[&String]) -> Vec<String> {
    let names_one = |p: &String| {
        globset::Glob::new(p)
            .map(|g| g.compile_matcher())
            .is_ok_and(|m| names.iter().any(|n| m.is_match(n.as_str())))
    };
    safe.iter().filter(|p| names_one(p)).cloned().collect()
}

/// `req` again, with `trace` for its functions and its own directory.
fn again(req: &ProgramRequest, trace: Vec<String>, out: PathBuf) -> ProgramRequest {
    ProgramRequest { trace, out: Some(out), ..req.clone() }
}

/// `next`, with `done` and the sessions before it as its earlier ones.
fn next_session(mut done: Debugged, mut next: Debugged) -> Debugged {
    next.earlier = std::mem::take(&mut done.earlier);
    next.earlier.push(done);
    next
}

/// What a session leaves for the next ones besides its diagnosis.
struct Phase {
    callers: Callers,
    /// Default mode: the functions left out for cost, by name.
    left_out: LeftOutNames,
}

/// [`census::LeftOut`] by name.
#[derive(Clone, Debug, Default)]
pub struct LeftOutNames {
    pub carried: Vec<String>,
    pub sessions: Vec<Vec<String>>,
    pub beyond: Vec<String>,
}

/// Traced function → the program's own functions (default candidates)
/// whose code calls it directly, by name.
type Callers = BTreeMap<String, Vec<String>>;

/// The functions named by `repeated_key` predicates (which have no
/// intervention) that hold in every failing run: in no passing run (fully
/// discriminative), or clearly less often in passing runs (necessary, as
/// `stats::necessary` decides: a duplicate may do no harm).
fn repeated_keys(d: &super::Diagnosis) -> Vec<String> {
    let a = &d.analysis;
    let mut out: Vec<String> = Vec::new();
    for p in &a.catalog.predicates {
        let Some(s) = a.scores.get(p.id.0 as usize) else { continue };
        if p.key.kind == crate::predicates::Kind::RepeatedKey
            && (s.fully_discriminative || crate::stats::necessary(s, a.totals))
            && let Some(f) = d.session.functions.get(p.key.func as usize)
            && !out.contains(&f.name)
        {
            out.push(f.name.clone());
        }
    }
    out
}

/// The callers of `from` that are not `traced` yet, once each. A caller
/// that is traced already was in the session that found nothing: the
/// climb goes on through it to its own callers (each function once).
fn callers_of_named(from: &[String], callers: &Callers, traced: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = from.iter().map(String::as_str).collect();
    let mut next: Vec<&str> = seen.clone();
    let mut i = 0;
    while let Some(&f) = next.get(i) {
        i += 1;
        for c in callers.get(f).into_iter().flatten() {
            if seen.contains(&c.as_str()) {
                continue;
            }
            seen.push(c);
            if traced.contains(&c.as_str()) {
                next.push(c);
            } else {
                out.push(c.clone());
            }
        }
    }
    out
}

/// One session: starts the program, debugs it, removes the probes; with
/// the callers of each traced function and the functions the default set
/// left out, for the sessions [`debug_program`] makes next.
fn debug_phase(
    req: &ProgramRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(Debugged, Phase)> {
    let patterns = match &req.patterns {
        Some(p) => Some((p.clone(), beside::load_patterns(p)?)),
        None => None,
    };
    let candidates: RefCell<Option<Candidates>> = RefCell::new(None);
    let callers: RefCell<Callers> = RefCell::new(Callers::new());
    let left_out: RefCell<LeftOutNames> = RefCell::new(LeftOutNames::default());
    // The functions to trace: the cheap ones by default, or `--trace`'s;
    // with their callers among the program's own functions.
    let choose_functions = |r: &mut Resolver| -> anyhow::Result<(Vec<Function>, Callers)> {
        if req.trace.is_empty() {
            let found = default_candidates(r)?;
            if found.functions.len() > req.load.max_functions {
                bail!(
                    "{} has {} functions of its own, more than the limit of {} probes that measuring them needs: name the functions to trace with --trace, or raise --max-probes",
                    r.executable().path.display(),
                    found.functions.len(),
                    req.load.max_functions
                );
            }
            let functions = found.functions.clone();
            let callers = callers_of(r, &found.functions, &functions);
            *candidates.borrow_mut() = Some(found);
            return Ok((functions, callers));
        }
        let functions = r.resolve(&req.trace)?;
        start::check_safe(&req.safe, &functions)?;
        let own = default_candidates(r).map(|c| c.functions).unwrap_or_default();
        let callers = callers_of(r, &own, &functions);
        Ok((functions, callers))
    };
    let ProgramSession { target, mut tracer, mut writer } = start::program(
        Mode::Debug,
        &req.command,
        &req.policy.texts,
        req.load,
        req.out.as_deref(),
        Programs::Record,
        &symbols::DebugSearch::default(),
        &mut *ui,
        |r, _| {
            let (functions, found) = choose_functions(r)?;
            *callers.borrow_mut() = found;
            Ok(functions)
        },
        |tracer, target, ui| {
            let measured = candidates
                .borrow_mut()
                .take()
                .map(|found| {
                    choose_by_cost(tracer, target, &req.policy, &req.safe, found, cancel, ui)
                })
                .transpose()?
                .map(|(census, left_ns, names)| {
                    *left_out.borrow_mut() = names;
                    (census, left_ns)
                });
            let sync = tracer.add_sync_points()?;
            log::info!("{sync} synchronisation points of the C library ready for amplification");
            if let Some((census, left_ns)) = measured
                && sync > 0
            {
                record_sync_if_cheap(tracer, target, &req.policy, &census, left_ns, cancel, ui)?;
            }
            Ok(())
        },
    )?;
    let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
    ui.say(&format!(
        "debugging {} ({} traced functions: {})",
        target.display(),
        names.len(),
        start::summarize(&names)
    ));
    if let Some(a) = &req.amplify_watch {
        ui.say(&format!(
            "amplifying with a watchpoint on {}: a thread is held {} right after it {} it (at most {} per run), from the second run on (the first locates it)",
            a.object,
            crate::util::human::duration(a.delay.delay_us * 1000),
            if a.delay.writes_only { "writes" } else { "reads or writes" },
            a.delay.max
        ));
    }
    let mut source = ProgramSource::new(&mut tracer, &target, &req.policy)
        .with_watch_amplify(req.amplify_watch.clone());
    let diagnosis = debug(&mut source, &mut writer, &req.options, cancel, ui)?;
    drop(tracer);
    // Beside the path, from the runs the analysis used (already in memory;
    // the session on disk also holds every intervened run).
    let beside = beside::beside(
        &diagnosis.session,
        &target.program,
        &req.options.safe,
        patterns.as_ref().map(|(p, f)| (p.as_path(), f)),
    );
    let out = writer.dir().to_owned();
    let phase = Phase { callers: callers.into_inner(), left_out: left_out.into_inner() };
    Ok((Debugged { diagnosis, out, beside, earlier: Vec::new() }, phase))
}

/// For each of `functions` in the executable, those of `own` (the
/// program's default candidates: not `main`, not sleep helpers) whose code
/// calls it directly.
fn callers_of(r: &Resolver, own: &[Function], functions: &[Function]) -> Callers {
    let exe = r.executable();
    let by_address: BTreeMap<u64, &str> =
        own.iter().map(|o| (o.address, o.name.as_str())).collect();
    let name_of = |a: &u64| by_address.get(a).map(|n| (*n).to_owned());
    functions
        .iter()
        .filter(|f| f.module == exe.path)
        .map(|f| (f.name.clone(), exe.callers(f.address).iter().filter_map(name_of).collect()))
        .filter(|(_, c): &(String, Vec<String>)| !c.is_empty())
        .collect()
}

/// The program's own functions that are candidates for the default set,
/// and those left out by rule.
pub struct Candidates {
    pub functions: Vec<Function>,
    pub skipped: Vec<(String, Skipped)>,
}

/// The program's own functions in address order, without `main`, sleep
/// and clock helpers and stubs ([`own::skipped`]).
pub fn default_candidates(resolver: &Resolver) -> anyhow::Result<Candidates> {
    let mut own = resolver.own_functions();
    if own.is_empty() {
        bail!(
            "{} has no functions of its own to trace (only start-up code and libraries): pass --trace PATTERN",
            resolver.executable().path.display()
        );
    }
    own.sort_by_key(|s| s.address);
    let mut skipped = Vec::new();
    let mut functions = Vec::new();
    for sym in own {
        match own::skipped(resolver.executable(), sym) {
            Some(why) => skipped.push((sym.name.clone(), why)),
            None => functions.push(symbols::function(
                resolver.executable(),
                sym,
                functions.len() as FuncId,
                false,
            )),
        }
    }
    if functions.is_empty() {
        bail!(
            "{} has no functions of its own worth tracing by default (left out: {}): pass --trace PATTERN",
            resolver.executable().path.display(),
            skipped.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(Candidates { functions, skipped })
}

/// Measures the candidates' call rates and makes the tracer's user
/// functions those cheap enough to trace (`record/census.rs`), saying which
/// were left out, why, and how to trace them anyway. Every `safe` pattern
/// must name a chosen function. Returns the census, what the set left of
/// the budget, and the shares of the functions it left out, for the
/// sessions after it.
pub fn choose_by_cost(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    safe: &[String],
    found: Candidates,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<(census::Census, f64, LeftOutNames)> {
    let Candidates { functions, skipped } = found;
    let mut why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, reason) in &skipped {
        why.entry(reason.reason()).or_default().push(name);
    }
    let left: Vec<String> =
        why.iter().map(|(reason, names)| format!("{}: {reason}", names.join(", "))).collect();
    ui.say(&format!(
        "no --trace given: measuring how often the program's {} own functions are called{}",
        functions.len(),
        if left.is_empty() {
            String::new()
        } else {
            format!("; not candidates: {}", left.join("; "))
        }
    ));
    let census = census::measure(tracer, target, policy, &functions, cancel)?;
    let addresses: Vec<u64> = functions.iter().map(|f| f.address).collect();
    let choice = census::choose(&census, &addresses);
    let ms = |ns: f64| ns / 1e6;
    let cut = census.cut.iter().filter(|c| **c).count();
    ui.say(&format!(
        "untraced run {:.1} ms (fastest of {}); counting run {:.1} ms{}; a traced call costs ~{:.1} µs here; budget {:.1} ms per run",
        ms(census.untraced_ns as f64),
        census::UNTRACED_RUNS,
        ms(census.counted_ns as f64),
        if cut > 0 {
            format!(
                " (the last of {}: the ones before were cut short, and {cut} function(s) too hot by then were left out of the next)",
                census.counting_runs
            )
        } else {
            String::new()
        },
        census.call_ns / 1e3,
        ms(census.budget_ns()),
    ));
    if !choice.hot.is_empty() {
        let hot: Vec<String> = choice
            .hot
            .iter()
            .map(|&(i, calls, cost)| {
                let at_least = if census.cut[i] { "at least " } else { "" };
                format!(
                    "{} ({at_least}{calls} calls, ~{:.1} ms per run)",
                    functions[i].name,
                    ms(cost)
                )
            })
            .collect();
        let within = if choice.widened {
            format!(
                "within the budget, nor within the untraced run's own time (at least 5 ms: {:.1} ms)",
                ms(census.widened_ns())
            )
        } else {
            "within the budget".to_string()
        };
        ui.say(&format!(
            "left out {} function(s) called too often to trace {within}: {}; to trace one anyway, name every function to trace with --trace (it replaces the default set), e.g. --trace '{}'",
            hot.len(),
            hot.join(", "),
            functions[choice.hot[0].0].name
        ));
    }
    if !choice.over_cap.is_empty() {
        let names: Vec<&str> =
            choice.over_cap.iter().map(|&i| functions[i].name.as_str()).collect();
        ui.say(&format!(
            "left out {} function(s) beyond the default set's {} (the most called first): {}; name them with --trace to trace them",
            names.len(),
            census::MAX_FUNCTIONS,
            names.join(", ")
        ));
    }
    let chosen: Vec<Function> = choice.traced.iter().map(|&i| functions[i].clone()).collect();
    if chosen.is_empty() {
        // Observing runs with no probe at all could only restate the
        // failure: say what it would cost and how to trace anyway.
        let cheapest = choice.hot.iter().min_by(|a, b| a.2.total_cmp(&b.2));
        let hint = match cheapest {
            Some(&(i, _, cost)) => format!(
                "the cheapest, {}, costs ~{:.1} ms per run: trace it anyway with --trace '{}'",
                functions[i].name,
                ms(cost),
                functions[i].name
            ),
            None => "name the functions to trace with --trace".to_string(),
        };
        bail!(
            "none of the program's own functions fits the tracing budget ({:.1} ms per run), nor the untraced run's own time (at least 5 ms: {:.1} ms); {hint}",
            ms(census.budget_ns()),
            ms(census.widened_ns())
        );
    }
    start::check_safe(safe, &chosen)?;
    let widened = if choice.widened {
        format!(
            ", more than the budget: nothing called fitted it, so the set was chosen within the untraced run's own time (at least 5 ms: {:.1} ms), and a traced run takes about {:.1}× as long",
            ms(census.widened_ns()),
            1.0 + choice.cost_ns / census.untraced_ns.max(1) as f64
        )
    } else {
        String::new()
    };
    ui.say(&format!(
        "tracing {} of them (~{:.2} ms per run{widened}): {}",
        chosen.len(),
        ms(choice.cost_ns),
        chosen.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
    ));
    tracer.set_user_functions(chosen)?;
    let left = census.budget_ns() - choice.cost_ns;
    let later = census::left_out_sessions(&census, &addresses, &choice);
    let names = |set: &[usize]| set.iter().map(|&i| functions[i].name.clone()).collect();
    let later = LeftOutNames {
        carried: names(&later.carried),
        sessions: later.sessions.iter().map(|s| names(s)).collect(),
        beyond: names(&later.beyond),
    };
    Ok((census, left, later))
}

/// After the default set was chosen: records the C library's
/// synchronisation points (whose events the lock predicates read) in every
/// run if what they cost, measured with one run, fits in what the set
/// left of the budget; otherwise only runs that amplify a rare failure
/// record them.
fn record_sync_if_cheap(
    tracer: &mut Tracer,
    target: &Target,
    policy: &RunPolicy,
    census: &census::Census,
    left_ns: f64,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<()> {
    let cost = census::measure_sync(tracer, target, policy, census, cancel)?;
    let ms = |ns: f64| ns / 1e6;
    let fits = cost.fits(left_ns);
    tracer.set_sync_in_every_run(fits);
    let measured = if cost.complete {
        format!("{} per run, ~{:.2} ms", cost.entries, ms(cost.cost_ns))
    } else {
        format!("at least {} per run (the measuring run was cut short)", cost.entries)
    };
    ui.say(&if fits {
        format!(
            "recording the C library's lock, unlock and wait calls in every run ({measured}; {:.2} ms of the budget left)",
            ms(left_ns.max(0.0))
        )
    } else {
        format!(
            "recording the C library's lock, unlock and wait calls only in runs that amplify a rare failure: {measured} is more than the {:.2} ms of the budget left",
            ms(left_ns.max(0.0))
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callers(edges: &[(&str, &[&str])]) -> Callers {
        edges
            .iter()
            .map(|(f, c)| ((*f).to_owned(), c.iter().map(|s| (*s).to_owned()).collect()))
            .collect()
    }

    #[test]
    fn safe_patterns_apply_to_the_shares_that_trace_them() {
        let safe: Vec<String> = ["pricing_*", "validate_invoice"].map(str::to_owned).to_vec();
        let (a, b, c) = ("pricing_fetch".to_owned(), "unit_price".to_owned(), "main2".to_owned());
        assert_eq!(safe_within(&safe, &[&a, &b]), ["pricing_*"]);
        assert!(safe_within(&safe, &[&b, &c]).is_empty());
    }

    #[test]
    fn the_climb_goes_through_callers_already_traced() {
        // inventory-sixty's default set once held catalog_find and both its
        // callers: the climb must reach stock_item, one level further.
        let c = callers(&[
            ("catalog_find", &["catalog_describe", "report_render"]),
            ("catalog_describe", &["stock_item"]),
            ("report_render", &[]),
            ("stock_item", &["catalog_find"]),
        ]);
        let from = vec!["catalog_find".to_owned()];
        let traced = ["catalog_find", "catalog_describe", "report_render"];
        assert_eq!(callers_of_named(&from, &c, &traced), ["stock_item"]);
        // An untraced caller is added, and not climbed through.
        let traced = ["catalog_find"];
        assert_eq!(callers_of_named(&from, &c, &traced), ["catalog_describe", "report_render"]);
        // Everything traced and a cycle: nothing to add, and it ends.
        let traced = ["catalog_find", "catalog_describe", "report_render", "stock_item"];
        assert!(callers_of_named(&from, &c, &traced).is_empty());
    }
}
