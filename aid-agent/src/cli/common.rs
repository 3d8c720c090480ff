//! Options and helpers shared by the subcommands that run a target.

use std::{
    ffi::OsString,
    path::PathBuf,
    sync::{Arc, atomic::AtomicBool},
};

use anyhow::Context as _;

use crate::{
    probe::{self, LoadOptions, Programs, Scope},
    runner::{self, FailRule, Target},
    session::{self, Header, Mode, Writer},
    symbols::Resolver,
    trace::{RunPolicy, Tracer},
};

/// How runs are judged, bounded and stored.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// When a run counts as failed (repeatable): nonzero, exit=N, signal,
    /// signal=NAME, timeout, stdout:REGEX, stderr:REGEX, output:REGEX.
    /// Default: nonzero, signal, timeout.
    #[arg(long = "fail-on", value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Kill a run (and count it as failed) after this long.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// Session directory to write (default: aid-sessions/<time>-<program>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Ring buffer size in bytes between the kernel and the agent (a power
    /// of two). Raise it if runs lose events.
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub ring_size: u32,
}

impl RunArgs {
    pub fn policy(&self) -> anyhow::Result<RunPolicy> {
        let rules = if self.fail_on.is_empty() {
            FailRule::defaults()
        } else {
            self.fail_on.iter().map(|r| FailRule::parse(r)).collect::<Result<_, _>>()?
        };
        Ok(RunPolicy { rules, timeout: runner::parse_duration(&self.timeout)? })
    }

    pub fn load_options(&self) -> anyhow::Result<LoadOptions> {
        let size = self.ring_size;
        if !size.is_power_of_two() || size < 4096 {
            anyhow::bail!("--ring-size {size} must be a power of two of at least 4096");
        }
        Ok(LoadOptions { ring_bytes: size, ..LoadOptions::default() })
    }

    pub fn rule_texts(&self) -> Vec<String> {
        if self.fail_on.is_empty() {
            vec!["nonzero".into(), "signal".into(), "timeout".into()]
        } else {
            self.fail_on.clone()
        }
    }
}

/// Set on the first Ctrl-C / SIGTERM; a second one exits immediately.
pub fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))
            .context("installing the Ctrl-C handler")?;
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("installing the Ctrl-C handler")?;
    }
    Ok(flag)
}

pub fn header(
    mode: Mode,
    program: PathBuf,
    command: &[OsString],
    rules: Vec<String>,
    functions: Vec<crate::model::Function>,
) -> Header {
    Header {
        format: session::FORMAT.into(),
        version: session::VERSION,
        tool: format!("aid-agent {}", env!("CARGO_PKG_VERSION")),
        created: session::now_unix(),
        mode,
        program,
        command: command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        pid: None,
        unit: None,
        fail_rules: rules,
        functions,
    }
}

/// A session on a program aid starts itself, ready for its first run.
pub struct Started {
    pub target: Target,
    pub tracer: Tracer,
    pub writer: Writer,
    pub out: PathBuf,
    pub interrupted: Arc<AtomicBool>,
}

/// The start-up shared by `record`, `intervene` and `debug`: resolve the
/// command, check privileges, choose the functions (`choose`), load and
/// attach the probes, and create the session directory.
pub fn start(
    mode: Mode,
    command: &[OsString],
    run: &RunArgs,
    programs: Programs,
    choose: impl FnOnce(&mut Resolver) -> anyhow::Result<Vec<crate::model::Function>>,
) -> anyhow::Result<Started> {
    let load = run.load_options()?;
    let target = Target::from_argv(command)?;
    probe::preflight()?;
    let mut resolver = Resolver::for_executable(&target.program)?;
    let functions = choose(&mut resolver)?;
    let out = run.out.clone().unwrap_or_else(|| session::default_dir(&target.program));
    let interrupted = interrupt_flag()?;
    let tracer = Tracer::new(resolver, functions, load, Scope::Target, programs)?;
    let header =
        header(mode, target.program.clone(), command, run.rule_texts(), tracer.functions.clone());
    let writer = Writer::create(&out, &header)?;
    Ok(Started { target, tracer, writer, out, interrupted })
}

pub fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_owned());
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar
}
