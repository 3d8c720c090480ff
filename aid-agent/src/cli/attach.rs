//! `aid-agent attach --pid PID`: trace a process that is already running,
//! for a while or until Ctrl-C. With `--unit FN` every invocation of FN is
//! one run, written to the session as soon as it completes.

use std::{
    path::PathBuf,
    process::ExitCode,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::common;
use crate::{
    bpf::{self, LoadOptions, Programs, Scope, monotonic_ns},
    model::{FuncId, Label, Run},
    record::recorder::{self, RecordedRun, Recorder},
    record::tracer::Tracer,
    record::units::{FailIf, ReturnCheck, Splitter, failure_reason},
    store::{self, Mode, Writer},
    symbols::Resolver,
    sys::proc,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to trace (all its threads, existing and future).
    #[arg(long)]
    pub pid: u32,
    /// Functions to trace (globs, optionally 'lib:glob'). Repeatable.
    #[arg(long = "trace", short = 't', value_name = "PATTERN")]
    pub trace: Vec<String>,
    /// Stop after this long (default: until Ctrl-C or the process exits).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Each invocation of this function is one run (execution unit).
    #[arg(long, value_name = "FN")]
    pub unit: Option<String>,
    /// Label a run failed when a call returns such a value:
    /// 'FN ret < 0', 'FN ret == -1', 'FN ret != 0', 'FN ret null'.
    #[arg(long = "fail-if", value_name = "CONDITION")]
    pub fail_if: Vec<String>,
    /// Session directory to write (default: aid-sessions/<time>-<program>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Ring buffer size in bytes (a power of two).
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub ring_size: u32,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let conditions: Vec<FailIf> =
        args.fail_if.iter().map(|t| FailIf::parse(t)).collect::<Result<_, _>>()?;
    let duration = args.duration.as_deref().map(super::args::parse_duration).transpose()?;
    if !proc::exists(args.pid) {
        bail!("pid {} not found: is the process still running?", args.pid);
    }
    if args.pid == std::process::id() {
        bail!("pid {} is aid-agent itself", args.pid);
    }
    let mut patterns = args.trace.clone();
    patterns.extend(args.unit.iter().cloned());
    patterns.extend(conditions.iter().map(|c| c.function.clone()));
    if patterns.is_empty() {
        bail!("nothing to trace: give --trace PATTERN (and/or --unit FN)");
    }
    let size = args.ring_size;
    if !size.is_power_of_two() || size < 4096 {
        bail!("--ring-size {size} must be a power of two of at least 4096");
    }
    bpf::preflight()?;
    let mut resolver = Resolver::for_process(args.pid)?;
    let functions = resolver.resolve(&patterns)?;
    let one = |name: &str| -> anyhow::Result<Vec<FuncId>> {
        let ids: Vec<FuncId> =
            functions.iter().filter(|f| f.name == name || f.symbol == name).map(|f| f.id).collect();
        if ids.is_empty() {
            let matcher = globset::Glob::new(name)?.compile_matcher();
            return Ok(functions
                .iter()
                .filter(|f| matcher.is_match(&f.name))
                .map(|f| f.id)
                .collect());
        }
        Ok(ids)
    };
    let unit = match &args.unit {
        Some(name) => match one(name)?.as_slice() {
            [id] => Some(*id),
            ids => bail!("--unit `{name}` names {} functions: give exactly one", ids.len()),
        },
        None => None,
    };
    let conditions: Vec<ReturnCheck> = conditions
        .iter()
        .map(|c| Ok(ReturnCheck { funcs: one(&c.function)?, cond: c.cond, text: c.text.clone() }))
        .collect::<anyhow::Result<_>>()?;
    let program = resolver.executable().path.clone();
    let interrupted = common::interrupt_flag()?;
    let load = LoadOptions { ring_bytes: size, ..LoadOptions::default() };
    let mut tracer =
        Tracer::new(resolver, functions, load, Scope::Process(args.pid), Programs::Record)?;
    let threads = proc::threads(args.pid);
    let tids: Vec<u32> = threads.iter().map(|t| t.0).collect();

    let out = args.out.clone().unwrap_or_else(|| store::default_dir(&program));
    let mut header = common::header(
        Mode::Attach,
        program.clone(),
        &[],
        args.fail_if.clone(),
        tracer.functions.clone(),
    );
    header.pid = Some(args.pid);
    header.unit = args.unit.clone();
    let mut writer = Writer::create(&out, &header)?;

    let start_ns = monotonic_ns();
    let Tracer { functions, pthread_create, probes, stream, resolver, .. } = &mut tracer;
    probes.begin_running_target(args.pid, &tids, false)?;
    let names: Vec<&str> =
        functions.iter().filter(|f| !f.internal).map(|f| f.name.as_str()).collect();
    eprintln!(
        "aid: attached to pid {} ({}), {} thread(s); tracing {}; Ctrl-C to stop",
        args.pid,
        program.display(),
        tids.len(),
        super::record::summarize(&names)
    );

    let resolver = &*resolver;
    let symbolize = resolver.symbolizer();
    let ctx = recorder::Context {
        pid: args.pid,
        functions,
        pthread_create: *pthread_create,
        symbolize: &symbolize,
        start_ns: Some(start_ns),
        existing_threads: &threads,
    };
    let mut rec = Recorder::new(&ctx);
    // Units are only whole between the moment every probe is attached and
    // the moment the first one is removed.
    let attached_ns = monotonic_ns() - start_ns;
    let mut splitter = unit.map(|u| Splitter::new(u, conditions.clone(), attached_ns));
    let mut next_id = 1u32;
    let (mut passed, mut failed) = (0u32, 0u32);
    // Intervals (process ns) during which the kernel dropped events.
    let mut losses: Vec<(u64, u64, u64)> = Vec::new();
    let began = Instant::now();
    let mut last_poll = 0u64;
    let mut ended = "stopped";
    loop {
        std::thread::sleep(Duration::from_millis(100));
        rec.push(&stream.try_take());
        let now = monotonic_ns() - start_ns;
        let lost = probes.take_lost()?.total();
        if lost > 0 {
            losses.push((last_poll, now, lost));
        }
        last_poll = now;
        if let Some(splitter) = splitter.as_mut() {
            let threads = rec.threads().to_vec();
            let units = splitter.complete(
                rec.rows(),
                &threads,
                functions,
                now.saturating_sub(200_000_000),
                &mut next_id,
            );
            for mut u in units {
                mark_losses(&mut u.run, u.start_ns, &losses);
                count(&u.run, &mut passed, &mut failed);
                writer.append(&u.stored(start_ns), functions)?;
            }
        }
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        if duration.is_some_and(|d| began.elapsed() >= d) {
            ended = "duration reached";
            break;
        }
        if !proc::exists(args.pid) {
            ended = "process exited";
            break;
        }
    }
    let detach_ns = monotonic_ns() - start_ns;
    probes.detach_all();
    rec.push(&stream.flush());
    let lost = probes.take_lost()?.total();
    let end = monotonic_ns() - start_ns;
    if lost > 0 {
        losses.push((last_poll, end, lost));
    }
    let threads = rec.threads().to_vec();
    match splitter.as_mut() {
        Some(splitter) => {
            splitter.count_unfinished(rec.rows(), detach_ns);
            for mut u in splitter.complete(rec.rows(), &threads, functions, detach_ns, &mut next_id)
            {
                mark_losses(&mut u.run, u.start_ns, &losses);
                count(&u.run, &mut passed, &mut failed);
                writer.append(&u.stored(start_ns), functions)?;
            }
        }
        None => {
            let recorded = rec.finish();
            let calls = recorder::calls_from_rows(&recorded.rows);
            let (label, reason) = match failure_reason(&calls, &conditions, functions) {
                Some(r) => (Label::Fail, r),
                None => (Label::Pass, format!("traced for {:.1} s ({ended})", end as f64 / 1e9)),
            };
            let total_lost: u64 = losses.iter().map(|l| l.2).sum();
            let run = Run {
                id: 1,
                label,
                outcome: crate::model::Outcome { wall_ns: end, reason, ..Default::default() },
                lost_events: total_lost,
                lost_thread_records: 0,
                complete: total_lost == 0,
                threads: recorded.threads,
                calls,
                end_ns: end,
                interventions: Vec::new(),
                noise: Vec::new(),
                pauses: Vec::new(),
            };
            count(&run, &mut passed, &mut failed);
            let rec = RecordedRun {
                run,
                rows: recorded.rows,
                start_ns,
                orphan_exits: recorded.orphan_exits,
                stdout: String::new(),
                stderr: String::new(),
                probe_errors: 0,
            };
            writer.append(&rec, functions).context("saving the run")?;
        }
    }
    let what = if unit.is_some() { "unit(s)" } else { "run" };
    println!(
        "recorded {} {what} of pid {} ({ended}): {passed} pass, {failed} fail -> {}",
        writer.runs_written(),
        args.pid,
        out.display()
    );
    if let Some(s) = splitter.as_ref().filter(|s| s.partial > 0) {
        eprintln!(
            "aid: {} unit(s) running while probes were attached or removed were not recorded (partially traced)",
            s.partial
        );
    }
    let total_lost: u64 = losses.iter().map(|l| l.2).sum();
    if total_lost > 0 {
        eprintln!(
            "aid: warning: the kernel dropped {total_lost} event(s) (ring buffer full); affected runs are marked incomplete and excluded from analysis. Use a larger --ring-size."
        );
    }
    Ok(if interrupted.load(Ordering::Relaxed) { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

fn count(run: &Run, passed: &mut u32, failed: &mut u32) {
    match run.label {
        Label::Pass => *passed += 1,
        Label::Fail => *failed += 1,
    }
}

/// A unit that overlaps an interval in which events were dropped may miss
/// some: it is incomplete (the interval's count is an upper bound).
fn mark_losses(run: &mut Run, start_ns: u64, losses: &[(u64, u64, u64)]) {
    let end = start_ns + run.end_ns;
    let lost: u64 =
        losses.iter().filter(|(lo, hi, _)| *lo <= end && *hi >= start_ns).map(|l| l.2).sum();
    if lost > 0 {
        run.lost_events = lost;
        run.complete = false;
    }
}
