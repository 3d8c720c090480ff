//! `aid-agent record`: run a program N times under the tracer and store
//! every run, labelled pass or fail, in a session directory.

use std::{ffi::OsString, process::ExitCode, sync::atomic::Ordering};

use anyhow::Context as _;

use super::common::{self, RunArgs};
use crate::{bpf::Programs, model::Label, store::Mode};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Functions to trace: a glob over (demangled) names, optionally in a
    /// library: 'cache_*', 'Cache::*', 'libc:pthread_mutex_*'. Repeatable.
    #[arg(long = "trace", short = 't', value_name = "PATTERN", required = true)]
    pub trace: Vec<String>,
    /// How many times to run the program.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    #[command(flatten)]
    pub run: RunArgs,
    /// Attach programs that record nothing (benchmark floor).
    #[arg(long, hide = true)]
    pub empty_probes: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let policy = args.run.policy()?;
    let programs = if args.empty_probes { Programs::Empty } else { Programs::Record };
    let common::Started { target, mut tracer, mut writer, out, interrupted } =
        common::start(Mode::Record, &args.command, &args.run, programs, |r| {
            Ok(r.resolve(&args.trace)?)
        })?;
    let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
    eprintln!(
        "aid: tracing {} function(s) of {}: {}",
        names.len(),
        target.program.display(),
        summarize(&names)
    );

    let bar = common::progress(u64::from(args.runs), "recording");
    let (mut passed, mut failed, mut events, mut lost_runs, mut lost_total) =
        (0, 0, 0usize, 0, 0u64);
    for id in 1..=args.runs {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let mut rec = tracer.observe(&target, id, &policy, &interrupted)?;
        if interrupted.load(Ordering::Relaxed) {
            // Killed by us mid-run: keep it, but never as evidence.
            rec.run.complete = false;
            rec.run.outcome.reason = "interrupted by the user".into();
        }
        if rec.probe_errors > 0 {
            log::warn!(
                "run {id}: {} probe error(s) in the kernel (a map was full)",
                rec.probe_errors
            );
        }
        match rec.run.label {
            Label::Pass => passed += 1,
            Label::Fail => failed += 1,
        }
        if rec.run.lost_events > 0 {
            lost_runs += 1;
            lost_total += rec.run.lost_events;
        }
        events += rec.rows.len();
        writer.append(&rec, &tracer.functions).with_context(|| format!("saving run {id}"))?;
        bar.inc(1);
        bar.set_message(format!("{passed} pass, {failed} fail"));
    }
    bar.finish_and_clear();
    let recorded = writer.runs_written();
    println!(
        "recorded {recorded} run(s) of {}: {passed} pass, {failed} fail, {events} events -> {}",
        target.display(),
        out.display()
    );
    if lost_runs > 0 {
        eprintln!(
            "aid: warning: {lost_runs} run(s) lost {lost_total} event(s) (ring buffer full) and are marked incomplete; analysis excludes them. Use a larger --ring-size."
        );
    }
    if interrupted.load(Ordering::Relaxed) {
        eprintln!("aid: interrupted; the {recorded} run(s) recorded so far are saved");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn summarize(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut s = names.iter().take(SHOWN).copied().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(", and {} more", names.len() - SHOWN));
    }
    s
}
