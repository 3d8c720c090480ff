//! Starting a session, shared by every entry point (`record`, `intervene`,
//! `attach`, `debug`): resolve the target and the functions to trace,
//! check privileges up front, load and attach the probes, and create the
//! session directory with its header.

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
        tracer::Tracer,
    },
    store::{self, Header, Mode, Writer},
    symbols::Resolver,
    sys::{proc, spawn::Target},
};

/// A session on a program aid starts itself, ready for its first run.
pub struct ProgramSession {
    pub target: Target,
    pub tracer: Tracer,
    pub writer: Writer,
}

/// Resolves `command`, checks privileges, lets `choose` pick the functions,
/// loads the probes (attached to each run's target), lets `prepare` adjust
/// the tracer before any run is stored (measure the program, settle the
/// function table), and creates the session directory (`out`, or
/// `aid-sessions/<time>-<program>`).
#[allow(clippy::too_many_arguments, reason = "to be replaced by a session request struct")]
pub fn program(
    mode: Mode,
    command: &[OsString],
    rules: &[String],
    load: LoadOptions,
    out: Option<&Path>,
    programs: Programs,
    choose: impl FnOnce(&mut Resolver) -> anyhow::Result<Vec<Function>>,
    prepare: impl FnOnce(&mut Tracer, &Target) -> anyhow::Result<()>,
) -> anyhow::Result<ProgramSession> {
    let target = Target::from_argv(command)?;
    bpf::preflight()?;
    let mut resolver = Resolver::for_executable(&target.program)?;
    let functions = choose(&mut resolver)?;
    let out = out.map_or_else(|| store::default_dir(&target.program), Path::to_owned);
    let mut tracer = Tracer::new(resolver, functions, load, Scope::Target, programs)?;
    prepare(&mut tracer, &target)?;
    let args: Vec<String> = command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let header = header(mode, target.program.clone(), args, rules, tracer.functions());
    let writer = Writer::create(&out, &header)?;
    Ok(ProgramSession { target, tracer, writer })
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
/// executable and mapped libraries, attaches the probes to that process
/// only, and creates the session directory.
pub fn process(spec: &ProcessSpec<'_>) -> anyhow::Result<ProcessSession> {
    let pid = spec.pid;
    let conditions: Vec<FailIf> =
        spec.fail_if.iter().map(|t| FailIf::parse(t)).collect::<Result<_, _>>()?;
    if !proc::exists(pid) {
        bail!("pid {pid} not found: is the process still running?");
    }
    if pid == std::process::id() {
        bail!("pid {pid} is aid-agent itself");
    }
    let mut patterns = spec.trace.to_vec();
    patterns.extend(spec.unit.map(str::to_owned));
    patterns.extend(conditions.iter().map(|c| c.function.clone()));
    if patterns.is_empty() {
        bail!("nothing to trace: give --trace PATTERN (and/or --unit FN)");
    }
    bpf::preflight()?;
    let mut resolver = Resolver::for_process(pid)?;
    let functions = resolver.resolve(&patterns)?;
    check_safe(spec.safe, &functions)?;
    let named = |name: &str| -> anyhow::Result<Vec<FuncId>> {
        let ids: Vec<FuncId> =
            functions.iter().filter(|f| f.name == name || f.symbol == name).map(|f| f.id).collect();
        if !ids.is_empty() {
            return Ok(ids);
        }
        let matcher = globset::Glob::new(name)?.compile_matcher();
        Ok(functions.iter().filter(|f| matcher.is_match(&f.name)).map(|f| f.id).collect())
    };
    let unit = match spec.unit {
        Some(name) => match named(name)?.as_slice() {
            [id] => Some(*id),
            ids => bail!("--unit `{name}` names {} functions: give exactly one", ids.len()),
        },
        None => None,
    };
    let checks: Vec<ReturnCheck> = conditions
        .iter()
        .map(|c| Ok(ReturnCheck { funcs: named(&c.function)?, cond: c.cond, text: c.text.clone() }))
        .collect::<anyhow::Result<_>>()?;
    let program = resolver.executable().path.clone();
    let out = spec.out.map_or_else(|| store::default_dir(&program), Path::to_owned);
    let tracer =
        Tracer::new(resolver, functions, spec.load, Scope::Process(pid), Programs::Record)?;
    let mut header =
        header(spec.mode, program.clone(), Vec::new(), spec.fail_if, tracer.functions());
    header.pid = Some(pid);
    header.unit = spec.unit.map(str::to_owned);
    let writer = Writer::create(&out, &header)?;
    Ok(ProcessSession { tracer, writer, program, unit, checks })
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
    Header {
        format: store::FORMAT.into(),
        version: store::VERSION,
        tool: format!("aid-agent {}", env!("CARGO_PKG_VERSION")),
        created: store::now_unix(),
        mode,
        program,
        command,
        pid: None,
        unit: None,
        fail_rules: rules.to_vec(),
        functions: functions.to_vec(),
    }
}

/// The first few names of a list, for a one-line message.
pub fn summarize<S: AsRef<str>>(names: &[S]) -> String {
    const SHOWN: usize = 8;
    let mut s = names.iter().take(SHOWN).map(AsRef::as_ref).collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(", and {} more", names.len() - SHOWN));
    }
    s
}
