//! Starting a session, shared by every entry point (`record`, `intervene`,
//! `attach`, `debug`): resolve the target and the functions to trace,
//! check privileges and the probe budget up front, create the session
//! directory (so an unusable `--out` is found before any probe exists),
//! load and attach the probes, and write the session's header.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
};

use anyhow::bail;

use crate::{
    bpf::{self, LoadOptions, Programs, Scope},
    model::{FuncId, Function},
    record::{
        fail::{FailIf, ReturnCheck},
        progress::Progress,
        tracer::Tracer,
    },
    store::{self, Header, Mode, Writer},
    symbols::{self, Resolver, Symbol},
    sys::{proc, spawn::Target},
};

/// With no --trace, at most this many of the program's own functions are
/// traced (each costs two probes).
pub const DEFAULT_FUNCTIONS: usize = 32;

/// A session on a program aid starts itself, ready for its first run.
pub struct ProgramSession {
    pub target: Target,
    pub tracer: Tracer,
    pub writer: Writer,
}

/// Resolves `command`, checks privileges, lets `choose` pick the functions
/// (within the probe budget), creates the session directory (`out`, or
/// `aid-sessions/<time>-<program>`), loads the probes (attached to each
/// run's target), lets `prepare` adjust the tracer before any run is
/// stored (measure the program, settle the function table), and writes the
/// header. What the user should know about the probes is said on `ui`.
#[allow(clippy::too_many_arguments, reason = "the entry points' shared start-up")]
pub fn program(
    mode: Mode,
    command: &[OsString],
    rules: &[String],
    load: LoadOptions,
    out: Option<&Path>,
    store: &store::Destination,
    programs: Programs,
    debug: &symbols::DebugSearch,
    ui: &mut dyn Progress,
    choose: impl FnOnce(&mut Resolver, &mut dyn Progress) -> anyhow::Result<Vec<Function>>,
    prepare: impl FnOnce(&mut Tracer, &Target, &mut dyn Progress) -> anyhow::Result<()>,
) -> anyhow::Result<ProgramSession> {
    let mut target = Target::from_argv(command)?;
    // The target is the agent's own child: no privilege over other users'
    // processes is needed.
    bpf::preflight(bpf::Needs::Trace)?;
    let mut resolver = Resolver::for_executable_with(&target.program, debug)?;
    let functions = choose(&mut resolver, ui)?;
    within_budget(&functions, load.max_functions)?;
    let (out, existed) = match out {
        Some(out) => (out.to_owned(), out.exists()),
        None => (store::create_default_dir(&target.program)?, false),
    };
    store::prepare(&out, store)?;
    let sources = symbol_sources(&resolver, &functions);
    say_checking(ui, &functions);
    let mut tracer = Tracer::new(resolver, functions, load, Scope::Target, programs)
        .inspect_err(|_| forget(&out, existed))?;
    ui.say(&sources);
    for notice in tracer.notices() {
        ui.say(notice);
    }
    prepare(&mut tracer, &target, ui).inspect_err(|_| forget(&out, existed))?;
    let args: Vec<String> = command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let header = header(mode, target.program.clone(), args, rules, tracer.functions());
    let writer = Writer::create_with(&out, &header, store)?;
    target.output_dir = Some(writer.dir().to_owned());
    Ok(ProgramSession { target, tracer, writer })
}

/// The session directory made for a session that could not start goes
/// again (only if aid created it and it is still empty).
fn forget(out: &Path, existed: bool) {
    if !existed {
        let _ = std::fs::remove_dir(out);
    }
}

/// Which symbols came from where: the line a session starts with, said
/// once the probes are loaded (an error before stays the only line).
fn symbol_sources(resolver: &Resolver, functions: &[Function]) -> String {
    format!("symbols: {}", resolver.symbol_sources(functions).join("; "))
}

/// Checking many functions takes a moment (about a second for 2,000):
/// say so first.
fn say_checking(ui: &mut dyn Progress, functions: &[Function]) {
    if functions.len() > 64 {
        ui.say(&format!("checking that the kernel can probe all {} functions", functions.len()));
    }
}

/// The probe budget: more than `max` functions is refused before anything
/// is loaded, saying how many matched.
pub fn within_budget(functions: &[Function], max: usize) -> anyhow::Result<()> {
    let n = functions.iter().filter(|f| !f.internal).count();
    if n > max {
        bail!(
            "the patterns match {n} functions, more than the limit of {max} (each costs two probes): narrow --trace, or raise --max-probes"
        );
    }
    Ok(())
}

/// What to trace in a process that is already running.
pub struct ProcessSpec<'a> {
    pub mode: Mode,
    pub pid: u32,
    /// `--trace` patterns.
    pub trace: &'a [String],
    /// The function each invocation of which is one run.
    pub unit: Option<&'a str>,
    /// `--fail-if` conditions, as given.
    pub fail_if: &'a [String],
    /// `--safe` patterns, each of which must name a traced function.
    pub safe: &'a [String],
    pub out: Option<&'a Path>,
    pub load: LoadOptions,
    /// Where separate debug information is looked for.
    pub debug: &'a symbols::DebugSearch,
}

/// A session on a running process, ready to watch it.
pub struct ProcessSession {
    pub tracer: Tracer,
    pub writer: Writer,
    /// The running executable.
    pub program: PathBuf,
    pub unit: Option<FuncId>,
    pub checks: Vec<ReturnCheck>,
}

/// Checks the process, resolves the patterns (the unit function and the
/// functions of the failure conditions are traced too) against its
/// executable and mapped libraries, creates the session directory,
/// attaches the probes to that process only, and writes the header.
pub fn process(spec: &ProcessSpec<'_>, ui: &mut dyn Progress) -> anyhow::Result<ProcessSession> {
    let pid = spec.pid;
    let conditions: Vec<FailIf> =
        spec.fail_if.iter().map(|t| FailIf::parse(t)).collect::<Result<_, _>>()?;
    proc::traceable(pid)?;
    if pid == std::process::id() {
        bail!("pid {pid} is aid-agent itself: give the pid of the program to trace");
    }
    let mut patterns = spec.trace.to_vec();
    patterns.extend(spec.unit.map(str::to_owned));
    patterns.extend(conditions.iter().map(|c| c.function.clone()));
    if patterns.is_empty() {
        bail!("nothing to trace: give --trace PATTERN (and/or --unit FN)");
    }
    let own = proc::owner(pid).is_none_or(|uid| uid == nix::unistd::geteuid().as_raw());
    bpf::preflight(if own { bpf::Needs::Trace } else { bpf::Needs::TraceOtherUsers })?;
    let mut resolver = Resolver::for_process_with(pid, spec.debug)?;
    let functions = resolver.resolve(&patterns)?;
    check_safe(spec.safe, &functions)?;
    let (unit, checks) = targets(&functions, spec.unit, &conditions)?;
    within_budget(&functions, spec.load.max_functions)?;
    let program = resolver.executable().path.clone();
    let (out, existed) = match spec.out {
        Some(out) => (out.to_owned(), out.exists()),
        None => (store::create_default_dir(&program)?, false),
    };
    store::prepare(&out, &store::Destination::Session)?;
    let sources = symbol_sources(&resolver, &functions);
    say_checking(ui, &functions);
    let tracer = Tracer::new(resolver, functions, spec.load, Scope::Process(pid), Programs::Record)
        .inspect_err(|_| forget(&out, existed))?;
    ui.say(&sources);
    for notice in tracer.notices() {
        ui.say(notice);
    }
    let mut header =
        header(spec.mode, program.clone(), Vec::new(), spec.fail_if, tracer.functions());
    header.pid = Some(pid);
    header.unit = spec.unit.map(str::to_owned);
    let writer = Writer::create(&out, &header)?;
    Ok(ProcessSession { tracer, writer, program, unit, checks })
}

/// The unit function and the `--fail-if` checks among `functions`, named
/// as `--trace` names them (C++ with or without its parameter list):
/// exactly, else as a glob.
pub fn targets(
    functions: &[Function],
    unit: Option<&str>,
    conditions: &[FailIf],
) -> anyhow::Result<(Option<FuncId>, Vec<ReturnCheck>)> {
    let names: Vec<(FuncId, Vec<String>)> =
        functions.iter().map(|f| (f.id, symbols::names_of(f))).collect();
    let named = |name: &str| -> anyhow::Result<Vec<FuncId>> {
        let ids: Vec<FuncId> =
            names.iter().filter(|(_, n)| n.iter().any(|n| n == name)).map(|(id, _)| *id).collect();
        if !ids.is_empty() {
            return Ok(ids);
        }
        let matcher = globset::Glob::new(name)?.compile_matcher();
        Ok(names
            .iter()
            .filter(|(_, n)| n.iter().any(|n| matcher.is_match(n)))
            .map(|(id, _)| *id)
            .collect())
    };
    let unit = match unit {
        Some(name) => match named(name)?.as_slice() {
            [id] => Some(*id),
            ids => bail!("--unit `{name}` names {} functions: give exactly one", ids.len()),
        },
        None => None,
    };
    let checks: Vec<ReturnCheck> = conditions
        .iter()
        .map(|c| {
            let funcs = named(&c.function)?;
            if funcs.is_empty() {
                bail!(
                    "--fail-if `{}` names no traced function: `{}` matches none",
                    c.text,
                    c.function
                );
            }
            Ok(ReturnCheck { funcs, cond: c.cond, text: c.text.clone() })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((unit, checks))
}

/// Every `--safe` pattern must name a traced function: a typo would
/// otherwise silently forbid the intervention it meant to allow.
pub fn check_safe(safe: &[String], functions: &[Function]) -> anyhow::Result<()> {
    for pattern in safe {
        let matcher = globset::Glob::new(pattern)?.compile_matcher();
        if !functions.iter().any(|f| matcher.is_match(&f.name) || matcher.is_match(&f.symbol)) {
            bail!(
                "--safe `{pattern}` matches none of the traced functions: trace it too, or fix the pattern"
            );
        }
    }
    Ok(())
}

fn header(
    mode: Mode,
    program: PathBuf,
    command: Vec<String>,
    rules: &[String],
    functions: &[Function],
) -> Header {
    let (created, created_subsec_ns) = store::now();
    Header {
        format: store::FORMAT.into(),
        version: store::VERSION,
        tool: format!("aid-agent {}", env!("CARGO_PKG_VERSION")),
        created,
        created_subsec_ns,
        mode,
        program,
        command,
        pid: None,
        unit: None,
        fail_rules: rules.to_vec(),
        functions: functions.to_vec(),
        settings: None,
        jobs: None,
        fleet: None,
    }
}

/// The program's own functions (not start-up code or libraries), in
/// address order: what is traced when no --trace is given; an error that
/// says what to do when there are none.
pub fn own_by_address(resolver: &Resolver) -> anyhow::Result<Vec<&Symbol>> {
    let mut own = resolver.own_functions();
    if own.is_empty() {
        bail!(
            "{} has no functions of its own to trace (only start-up code and libraries): pass --trace PATTERN",
            resolver.executable().path.display()
        );
    }
    own.sort_by_key(|s| s.address);
    Ok(own)
}

/// The program's own functions, first ones in address order, capped.
pub fn default_functions(
    resolver: &Resolver,
    ui: &mut dyn Progress,
) -> anyhow::Result<Vec<Function>> {
    let mut own = own_by_address(resolver)?;
    let total = own.len();
    own.truncate(DEFAULT_FUNCTIONS);
    let functions: Vec<Function> = own
        .iter()
        .enumerate()
        .map(|(i, s)| symbols::function(resolver.executable(), s, i as u32, false))
        .collect();
    let names: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();
    if total > DEFAULT_FUNCTIONS {
        ui.say(&format!(
            "no --trace given: tracing the first {DEFAULT_FUNCTIONS} of the program's {total} own functions (in address order): {}; pass --trace to choose",
            names.join(", ")
        ));
    } else {
        ui.say(&format!(
            "no --trace given: tracing the program's {total} own functions: {}",
            names.join(", ")
        ));
    }
    Ok(functions)
}
