//! Debugging a program aid starts itself: every run is a fresh process,
//! observed or intervened on from its exec to its end, so any thread can
//! be intervened on and a rare failure can be amplified.

use std::{ffi::OsString, path::PathBuf, sync::atomic::AtomicBool};

use super::{DebugOptions, Debugged, beside, debug, source::RunSource};
use crate::{
    bpf::{LoadOptions, Programs},
    intervene::{Plan, Reach},
    model::{Function, Noise, RecordedRun},
    record::{
        fail::RunPolicy,
        progress::Progress,
        start::{self, ProgramSession},
        tracer::Tracer,
    },
    store::Mode,
    sys::spawn::Target,
};

/// Runs of a program, one process each.
pub struct ProgramSource<'t> {
    tracer: &'t mut Tracer,
    target: &'t Target,
    policy: &'t RunPolicy,
    next_id: u32,
}

impl<'t> ProgramSource<'t> {
    pub fn new(tracer: &'t mut Tracer, target: &'t Target, policy: &'t RunPolicy) -> Self {
        ProgramSource { tracer, target, policy, next_id: 1 }
    }

    fn next_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

impl RunSource for ProgramSource<'_> {
    fn noun(&self) -> &'static str {
        "run"
    }

    fn functions(&self) -> &[Function] {
        self.tracer.functions()
    }

    fn reach(&self) -> Reach {
        Reach::PROGRAM
    }

    fn can_amplify(&self) -> bool {
        true
    }

    fn hint_no_failure(&self) -> String {
        format!(
            " (a run fails on: {}): aid needs to see the failure; try more --max-runs or check --fail-on",
            self.policy.texts.join(", ")
        )
    }

    fn hint_all_failed(&self) -> &'static str {
        "; check --fail-on and --timeout"
    }

    fn observe(
        &mut self,
        noise: &[Noise],
        cancel: &AtomicBool,
    ) -> anyhow::Result<Option<RecordedRun>> {
        let id = self.next_id();
        let rec = if noise.is_empty() {
            self.tracer.observe(self.target, id, self.policy, cancel)?
        } else {
            let plan = Plan::default().with_noise(noise);
            self.tracer.intervene(self.target, id, self.policy, &plan, cancel)?
        };
        Ok(Some(rec))
    }

    fn begin_interventions(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    fn intervene(&mut self, plan: &Plan, cancel: &AtomicBool) -> anyhow::Result<RecordedRun> {
        let id = self.next_id();
        Ok(self.tracer.intervene(self.target, id, self.policy, plan, cancel)?)
    }

    fn end_interventions(&mut self) {}
}

/// `debug -- CMD`.
pub struct ProgramRequest {
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// `--trace` patterns; none: the program's own functions, up to
    /// [`start::DEFAULT_FUNCTIONS`].
    pub trace: Vec<String>,
    /// `--safe` patterns (also in `options.safe`), each of which must name
    /// a traced function.
    pub safe: Vec<String>,
    pub policy: RunPolicy,
    pub out: Option<PathBuf>,
    pub load: LoadOptions,
    pub options: DebugOptions,
    /// `--patterns`: a `mine --emit-predicates` file whose "pattern
    /// occurs" predicates are evaluated on the observed runs.
    pub patterns: Option<PathBuf>,
}

/// Starts the session, debugs the program, and removes the probes.
pub fn debug_program(
    req: &ProgramRequest,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Debugged> {
    let patterns = match &req.patterns {
        Some(p) => Some((p.clone(), beside::load_patterns(p)?)),
        None => None,
    };
    let ProgramSession { target, mut tracer, mut writer } = start::program(
        Mode::Debug,
        &req.command,
        &req.policy.texts,
        req.load,
        req.out.as_deref(),
        Programs::Record,
        &mut *ui,
        |r, ui| {
            let functions = if req.trace.is_empty() {
                start::default_functions(r, &mut *ui)?
            } else {
                r.resolve(&req.trace)?
            };
            start::check_safe(&req.safe, &functions)?;
            Ok(functions)
        },
    )?;
    let names: Vec<&str> = tracer.user_functions().map(|f| f.name.as_str()).collect();
    ui.say(&format!(
        "debugging {} ({} traced functions: {})",
        target.display(),
        names.len(),
        start::summarize(&names)
    ));
    let mut source = ProgramSource::new(&mut tracer, &target, &req.policy);
    let diagnosis = debug(&mut source, &mut writer, &req.options, cancel, ui)?;
    drop(tracer);
    let beside =
        beside::for_session(writer.dir(), &target.program, &req.options.safe, patterns.as_ref());
    Ok(Debugged { diagnosis, out: writer.dir().to_owned(), beside })
}
