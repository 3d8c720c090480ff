//! `aid-agent slice [SESSION] --fail N`: the calls of one failing run that
//! carry its failure, at a chosen level of dependences (seed 003;
//! [`crate::explain::slice`]), optionally typed by hardware watchpoints
//! and verified by re-running the program
//! ([`crate::explain::watched::slice_command`]).

use std::{path::PathBuf, process::ExitCode, sync::atomic::Ordering};

use super::{
    args::{load_options, parse_duration, session_dir},
    mine::{AccessArgs, AccessMode, RerunArgs, refuse_idle_out},
    out::emit,
    terminal::{Terminal, interrupt_flag},
};
use crate::explain::{
    self,
    slice::{self, Criterion, Levels},
    verify::{self, VerifySettings},
    watched::{SliceRequest, slice_command},
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`
    /// (default: the newest in aid-sessions/).
    pub session: Option<PathBuf>,
    /// The failing run to slice (`--fail`, as in `compare`; `--run` is
    /// the same option).
    #[arg(long, visible_alias = "run", value_name = "N")]
    pub fail: u32,
    /// Where the slice starts: `exit` (the call the run crashed in, else
    /// the last call that returned, preferring calls on shared objects) or
    /// `[role:]function#k`.
    #[arg(long, default_value = "exit", value_name = "CALL")]
    pub criterion: String,
    /// Dependences followed: ds (data), plus any of cs (control, locks),
    /// war and waw (hazards).
    #[arg(long, default_value = "ds,war,waw", value_name = "LIST")]
    pub deps: String,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub rerun: RerunArgs,
    /// Re-run the program forcing the slice's happens-before edges between
    /// threads, then flipping each hazard edge alone.
    #[arg(long)]
    pub verify: bool,
    /// With --verify: re-runs per experiment.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub repeat: u32,
    /// With --verify: fraction of the usable re-runs that must fail (forced)
    /// or pass (a flip).
    #[arg(long, default_value_t = 0.8, value_name = "FRACTION")]
    pub theta: f64,
    /// With --verify: longest any hold may last.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print Graphviz DOT instead of text.
    #[arg(long)]
    pub dot: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let levels = Levels::parse(&args.deps)?;
    let criterion = Criterion::parse(&args.criterion)?;
    let spec = args.access.spec()?;
    anyhow::ensure!(
        args.theta > 0.0 && args.theta <= 1.0,
        "--theta {} must be in (0, 1]",
        args.theta
    );
    anyhow::ensure!(args.repeat > 0, "--repeat must be at least 1");
    if !args.verify && args.rerun.access != AccessMode::Watch {
        refuse_idle_out(args.rerun.out.as_deref(), "slice", "with --verify or --access watch")?;
    }
    let dir = session_dir(args.session.as_deref())?;
    let verify = if args.verify {
        Some(VerifySettings {
            repeat: args.repeat,
            theta: args.theta,
            hold_timeout: parse_duration(&args.hold_timeout)?,
            timeout: parse_duration(&args.rerun.timeout)?,
            out: args.rerun.dir(&dir, "verify"),
            load: load_options(64 << 20, crate::bpf::MAX_FUNCTIONS)?,
        })
    } else {
        None
    };
    let (loaded, globals) = explain::load(&dir)?;
    let req = SliceRequest {
        dir: &dir,
        run: args.fail,
        criterion: &criterion,
        levels,
        spec: &spec,
        watch: args.rerun.watch(&dir, args.rerun.watch_runs)?,
        verify,
    };
    let cancel = interrupt_flag()?;
    let out = slice_command(&loaded, globals.as_ref(), &req, &cancel, &mut Terminal::default())?;
    if let Some(note) = &out.watch {
        eprintln!("aid: {}", note.text());
    }
    if args.json {
        // The slice's fields, and beside them what the re-runs found.
        let mut json = serde_json::to_value(&out.slice)?;
        json["watch"] = serde_json::to_value(&out.watch)?;
        json["verify"] = serde_json::to_value(&out.verify)?;
        emit(&(serde_json::to_string_pretty(&json)? + "\n"))?;
    } else if args.dot {
        emit(&slice::render_dot(&out.slice))?;
    } else {
        let mut text = slice::render_text(&out.slice);
        if let Some(v) = &out.verify {
            text.push_str(&verify::render_text(v));
        }
        emit(&text)?;
    }
    Ok(if cancel.load(Ordering::Relaxed) { ExitCode::from(130) } else { ExitCode::SUCCESS })
}
