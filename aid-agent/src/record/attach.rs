//! `attach` as a library call: trace a process that is already running,
//! for a while or until cancelled. With a unit function every invocation
//! of it is one run, stored as soon as it has settled; without, the whole
//! recording is one run.

use std::{
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    bpf::LoadOptions,
    model::{Label, RecordedRun},
    record::{
        progress::Progress,
        start::{self, ProcessSpec},
    },
    store::{Mode, Writer},
    sys::{poll, proc},
};

pub struct AttachRequest {
    pub pid: u32,
    /// `--trace` patterns.
    pub trace: Vec<String>,
    /// Each invocation of this function is one run.
    pub unit: Option<String>,
    /// `--fail-if` conditions.
    pub fail_if: Vec<String>,
    /// Stop after this long (default: when cancelled or the process exits).
    pub duration: Option<Duration>,
    pub out: Option<PathBuf>,
    pub load: LoadOptions,
}

/// What was recorded.
#[derive(Clone, Debug)]
pub struct AttachSummary {
    pub out: PathBuf,
    pub recorded: usize,
    pub passed: u32,
    pub failed: u32,
    /// Why recording stopped: "stopped", "duration reached", "process exited".
    pub ended: &'static str,
    /// Units running while probes were attached or removed (not recorded).
    pub partial: u64,
    /// Events the kernel dropped.
    pub lost: u64,
    pub interrupted: bool,
}

pub fn attach(
    req: &AttachRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<AttachSummary> {
    let spec = ProcessSpec {
        mode: Mode::Attach,
        pid: req.pid,
        trace: &req.trace,
        unit: req.unit.as_deref(),
        fail_if: &req.fail_if,
        safe: &[],
        out: req.out.as_deref(),
        load: req.load,
    };
    let start::ProcessSession { mut tracer, mut writer, program, unit, checks } =
        start::process(&spec, &mut *ui)?;
    let names: Vec<String> = tracer.user_functions().map(|f| f.name.clone()).collect();
    let mut running = tracer.watch(req.pid, unit, checks)?;
    ui.say(&format!(
        "attached to pid {} ({}), {} thread(s); tracing {}; Ctrl-C to stop",
        req.pid,
        program.display(),
        running.threads(),
        start::summarize(&names)
    ));
    let functions = running.functions();
    let mut tally = (0u32, 0u32);
    let mut store = |rec: &RecordedRun, writer: &mut Writer| -> anyhow::Result<()> {
        match rec.run.label {
            Label::Pass => tally.0 += 1,
            Label::Fail => tally.1 += 1,
        }
        writer.append(rec, functions).with_context(|| format!("saving run {}", rec.run.id))?;
        Ok(())
    };
    let began = Instant::now();
    // Open-ended (or as long as --duration): a spinner with the count.
    let noun = if unit.is_some() { "unit" } else { "run" };
    ui.begin(&format!("tracing pid {}", req.pid), None);
    let mut seen = 0u64;
    let ended = loop {
        std::thread::sleep(poll::UNIT_LOOK);
        running.look()?;
        for rec in running.watcher().finished_units(poll::UNIT_SETTLE) {
            store(&rec, &mut writer)?;
            seen += 1;
            ui.step_to(seen, &format!("{seen} {noun}(s) recorded"));
        }
        if cancel.load(Ordering::Relaxed) {
            break "stopped";
        }
        if req.duration.is_some_and(|d| began.elapsed() >= d) {
            break "duration reached";
        }
        if !proc::exists(req.pid) {
            break "process exited";
        }
    };
    ui.end();
    if running.functions().len() > 64 {
        ui.say(&format!("removing the probes of {} functions", running.functions().len()));
    }
    let finished = running.finish(ended)?;
    for rec in &finished.runs {
        store(rec, &mut writer)?;
    }
    Ok(AttachSummary {
        out: writer.dir().to_owned(),
        recorded: writer.runs_written(),
        passed: tally.0,
        failed: tally.1,
        ended,
        partial: finished.partial,
        lost: finished.lost,
        interrupted: cancel.load(Ordering::Relaxed),
    })
}
