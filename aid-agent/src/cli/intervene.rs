//! `aid-agent intervene` (hidden): run a program under an explicit list of
//! interventions and store the runs. For testing the intervention machinery
//! and for trying an intervention by hand; `debug` chooses interventions
//! itself.

use std::{ffi::OsString, path::PathBuf, process::ExitCode, sync::atomic::Ordering};

use anyhow::Context as _;

use super::common::{self, RunArgs};
use crate::{bpf::Programs, intervene::Plan, model::Intervention, store::Mode};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace; function ids in the plan count from 0 in the
    /// order these patterns match.
    #[arg(long = "trace", short = 't', value_name = "PATTERN", required = true)]
    pub trace: Vec<String>,
    /// JSON file: a list of interventions (see model::Intervention).
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// Longest any hold may last.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    #[command(flatten)]
    pub run: RunArgs,
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = args.run.policy()?;
    let hold_timeout = super::args::parse_duration(&args.hold_timeout)?;
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("reading {}", args.plan.display()))?;
    let interventions: Vec<Intervention> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a list of interventions", args.plan.display()))?;
    let common::Started { target, mut tracer, mut writer, interrupted, .. } =
        common::start(Mode::Debug, &args.command, &args.run, Programs::Record, |r| {
            let functions = r.resolve(&args.trace)?;
            for iv in &interventions {
                for site in iv.acting_sites() {
                    anyhow::ensure!(
                        (site.func as usize) < functions.len(),
                        "plan names function id {} but only {} are traced",
                        site.func,
                        functions.len()
                    );
                }
            }
            Ok(functions)
        })?;
    let plan = Plan::new(&interventions, hold_timeout);
    for id in 1..=args.runs {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let rec = tracer.intervene(&target, id, &policy, &plan, &interrupted)?;
        let applied = rec.run.interventions.iter().filter(|a| a.applied).count();
        println!(
            "run {id}: {:?} ({}); {applied}/{} intervention(s) applied",
            rec.run.label,
            rec.run.outcome.reason,
            rec.run.interventions.len()
        );
        writer.append(&rec, &tracer.functions)?;
    }
    Ok(ExitCode::SUCCESS)
}
