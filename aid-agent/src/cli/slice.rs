//! `aid-agent slice SESSION --run N`: the calls of one failing run that
//! carry its failure, at a chosen level of dependences (seed 003;
//! [`crate::explain::slice`]).

use std::{path::PathBuf, process::ExitCode};

use super::{mine::AccessArgs, out::emit};
use crate::explain::{
    self, ExplainError, Substrate, id_list,
    slice::{self, Criterion, Levels},
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`.
    pub session: PathBuf,
    /// The failing run to slice.
    #[arg(long, value_name = "N")]
    pub run: u32,
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
    let (loaded, globals) = explain::load(&args.session)?;
    let session = &loaded.session;
    let Some(run) = session.runs.iter().find(|r| r.id == args.run) else {
        return Err(
            ExplainError::NoSuchRun(args.run, id_list(session.runs.iter().map(|r| r.id))).into()
        );
    };
    if !run.failed() {
        return Err(ExplainError::NotFailing {
            run: run.id,
            what: "slice",
            failing: id_list(session.runs.iter().filter(|r| r.failed()).map(|r| r.id)),
        }
        .into());
    }
    if !run.complete {
        eprintln!("aid: warning: run {} lost events; the slice may miss dependences", run.id);
    }
    let substrate = Substrate::build(session, globals.as_ref(), &spec, &[run.id]);
    let acc = &substrate.runs[0];
    let crit = criterion.resolve(run, acc, &session.functions)?;
    let s = slice::slice(run, acc, &session.functions, &spec, crit, levels);
    let report = slice::report(&s, run, acc, &substrate);
    if args.json {
        emit(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else if args.dot {
        emit(&slice::render_dot(&report))?;
    } else {
        emit(&slice::render_text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}
