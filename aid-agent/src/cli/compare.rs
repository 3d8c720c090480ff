//! `aid-agent compare SESSION --fail B [--pass A]`: the causal chain from a
//! difference between a failing and a passing run to the failure, each
//! link tested by re-running the program both ways (seed 001;
//! [`crate::explain::compare`]).

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::atomic::Ordering,
};

use super::{
    common::{self, RunArgs},
    mine::{AccessArgs, emit, load},
};
use crate::{
    explain::{
        compare::{self, Inputs, Options, Target, live::LiveRerun, minimize::Offline},
        roles::RoleNames,
    },
    model::Function,
    probe::Programs,
    runner,
    session::{self, Mode},
    stats::SafeList,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record` or `debug`.
    pub session: PathBuf,
    /// The failing run.
    #[arg(long, value_name = "N")]
    pub fail: u32,
    /// The passing run to compare with, or `auto`: the one most like the
    /// failing run.
    #[arg(long, default_value = "auto", value_name = "N|auto")]
    pub pass: String,
    /// What the chain explains: `exit` (how the runs ended) or
    /// `[role:]function#k.ret`.
    #[arg(long, default_value = "exit", value_name = "TARGET")]
    pub target: String,
    /// Re-runs per side of each symmetric test; 0 = do not re-run (the
    /// chain is then untested).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub repeat: u32,
    /// Fraction of the usable re-runs of a side that must show the effect.
    #[arg(long, default_value_t = 0.8, value_name = "FRACTION")]
    pub theta: f64,
    /// In every re-run, force the returns (of --safe functions) that were
    /// equal in both runs.
    #[arg(long)]
    pub pin: bool,
    /// Functions whose return value may be forced (globs, repeatable).
    #[arg(long = "safe", value_name = "GLOB")]
    pub safe: Vec<String>,
    /// Longest any hold may last.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    /// Kill a re-run (and count it as failed) after this long.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// Where re-runs are stored (default: SESSION/compare-FAIL-vs-PASS-TIME).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub access: AccessArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.theta > 0.0 && args.theta <= 1.0,
        "--theta {} must be in (0, 1]",
        args.theta
    );
    let target = Target::parse(&args.target)?;
    let spec = args.access.spec()?;
    let safe = SafeList::new(&args.safe)?;
    let hold_timeout = runner::parse_duration(&args.hold_timeout)?;
    let pass_arg: Option<u32> = match args.pass.as_str() {
        "auto" => None,
        n => Some(
            n.parse().map_err(|_| anyhow::anyhow!("--pass {n}: give a run number or `auto`"))?,
        ),
    };
    let (loaded, globals) = load(&args.session)?;
    let session = &loaded.session;
    compare::check_runs(session, args.fail, pass_arg)?;
    let pass = match pass_arg {
        Some(p) => p,
        None => compare::pick_pass(session, args.fail, globals.as_ref(), &spec)?,
    };
    let inputs = Inputs {
        session,
        globals: globals.as_ref(),
        spec: &spec,
        fail: args.fail,
        pass: Some(pass),
        target,
    };
    let opts = Options { repeat: args.repeat, theta: args.theta, pin: args.pin, safe };
    let functions = session.functions.clone();
    if args.repeat == 0 {
        let c = compare::compare(&inputs, &opts, Offline)?;
        return print(&c, &functions, &opts, args.json);
    }
    anyhow::ensure!(
        loaded.header.mode != Mode::Attach,
        "{} was recorded by attaching to a running process, which compare cannot restart: use --repeat 0 for the untested chain",
        args.session.display()
    );
    let argv: Vec<OsString> = loaded.header.command.iter().map(OsString::from).collect();
    let out = args.out.clone().unwrap_or_else(|| {
        args.session.join(format!("compare-{}-vs-{pass}-{}", args.fail, session::now_unix()))
    });
    let run_args = RunArgs {
        fail_on: loaded.header.fail_rules.clone(),
        timeout: args.timeout.clone(),
        out: Some(out.clone()),
        ring_size: 64 << 20,
    };
    let user: Vec<Function> = session.functions.iter().filter(|f| !f.internal).cloned().collect();
    let common::Started { target, mut tracer, mut writer, interrupted, .. } =
        common::start(Mode::Debug, &argv, &run_args, Programs::Record, |resolver| {
            unchanged(resolver.executable(), &user)?;
            Ok(user.clone())
        })?;
    let policy = run_args.policy()?;
    let role_names =
        |id: u32| session.runs.iter().find(|r| r.id == id).map(RoleNames::of).unwrap_or_default();
    let progress = common::progress(0, "re-running");
    let live = LiveRerun {
        tracer: &mut tracer,
        target: &target,
        policy: &policy,
        writer: &mut writer,
        hold_timeout,
        cancel: &interrupted,
        fail_roles: role_names(args.fail),
        pass_roles: role_names(pass),
        next_id: 1,
        progress: progress.clone(),
    };
    let result = compare::compare(&inputs, &opts, live);
    progress.finish_and_clear();
    if interrupted.load(Ordering::Relaxed) {
        eprintln!("aid: interrupted; the re-runs made so far are saved in {}", out.display());
        return Ok(ExitCode::from(130));
    }
    let c = result?;
    eprintln!("aid: {} re-run(s) saved in {}", c.reruns, out.display());
    print(&c, &functions, &opts, args.json)
}

/// The session's functions must still be where they were recorded.
fn unchanged(exe: &crate::symbols::Module, functions: &[Function]) -> anyhow::Result<()> {
    for (i, f) in functions.iter().enumerate() {
        anyhow::ensure!(f.id as usize == i, "session function ids are not in order");
        if f.module == exe.path {
            let same = exe.symbols.iter().any(|s| s.raw == f.symbol && s.offset == f.offset);
            anyhow::ensure!(
                same,
                "{} changed since the session was recorded ({} is not where it was): record a new session",
                exe.path.display(),
                f.name
            );
        } else {
            anyhow::ensure!(
                Path::new(&f.module).exists(),
                "{} (of {}) is gone: record a new session",
                f.module.display(),
                f.name
            );
        }
    }
    Ok(())
}

fn print(
    c: &compare::Comparison,
    functions: &[Function],
    opts: &Options,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if json {
        emit(&(serde_json::to_string_pretty(&compare::report(c, functions))? + "\n"))?;
    } else {
        emit(&compare::render_text(c, functions, opts))?;
    }
    Ok(ExitCode::SUCCESS)
}
