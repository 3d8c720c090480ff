//! The live executor: a [`Rerun`] that re-runs the program under the
//! tracer with each replacement turned into one of the interventions the
//! kernel side already carries out (`intervene::Plan`):
//!
//! - `Return` → `OverrideReturn` at the call's exit (ptrace register edit);
//! - `Order { first, then }` → `HoldUntil` `then` at entry until `first`
//!   has exited.
//!
//! What the existing interventions cannot express, and `compare`
//! therefore never asks for: writing an argument (an argument difference
//! is traced back to the return or order that produced it), replacing a
//! pointer return (the other run's object does not exist in this one),
//! making a call that the run would not make, or preventing one it would
//! (omissions are reported, not replaced), and re-running *the same* run
//! (there is no replay: each re-run is a fresh run; see `minimize.rs` for
//! why the symmetric test still holds).
//!
//! Sites are (function, role number, k): role names are mapped to numbers
//! through the base run, so this assumes threads are created in the same
//! order in the re-run.
//!
//! [`compare_program`] is the library entry point of `compare` with
//! re-runs: it starts a session of its own for them (`record::start`) and
//! reports each re-run through [`Progress`].

use std::{
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::{Context as _, bail};

use super::{
    Comparison, Inputs, Options,
    align::CallKey,
    dual::Side,
    minimize::{Observed, Replacement, Rerun},
};
use crate::{
    bpf::LoadOptions,
    explain::{
        rerun,
        watch::{self, WatchRecord},
    },
    intervene::Plan,
    model::{Intervention, Point, Site, identity::RoleNames},
    record::{
        fail::RunPolicy,
        progress::Progress,
        tracer::Tracer,
        watchpoints::{WatchObject, Watcher, watched_run},
    },
    store::{Loaded, Writer},
    sys::spawn::Target,
};

pub struct LiveRerun<'a> {
    pub tracer: &'a mut Tracer,
    pub target: &'a Target,
    pub policy: &'a RunPolicy,
    /// Where the re-runs are stored (a session of their own).
    pub writer: &'a mut Writer,
    pub hold_timeout: Duration,
    pub cancel: &'a AtomicBool,
    /// Role names of the failing and the passing run.
    pub fail_roles: RoleNames,
    pub pass_roles: RoleNames,
    pub next_id: u32,
    pub ui: &'a mut dyn Progress,
    /// `--access watch`: every re-run watches these objects, and its
    /// accesses go to `watch.jsonl` beside the re-runs.
    pub watch: Option<(&'a Watcher, PathBuf)>,
}

fn site(k: &CallKey, roles: &RoleNames) -> anyhow::Result<Site> {
    let role = roles
        .role(&k.role)
        .with_context(|| format!("no thread named {} in the base run", k.role))?;
    Ok(Site { func: k.func, role, instance: k.instance })
}

/// The intervention that carries out a replacement.
pub fn intervention(r: &Replacement, roles: &RoleNames) -> anyhow::Result<Intervention> {
    Ok(match r {
        Replacement::Return { call, value } => {
            Intervention::OverrideReturn { site: site(call, roles)?, value: *value }
        }
        Replacement::Order { first, then } => Intervention::HoldUntil {
            site: site(then, roles)?,
            point: Point::Entry,
            until: site(first, roles)?,
            until_point: Point::Exit,
        },
    })
}

impl Rerun for LiveRerun<'_> {
    fn rerun(&mut self, base: Side, replacements: &[Replacement]) -> anyhow::Result<Observed> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted by the user");
        }
        let roles = if base == Side::Fail { &self.fail_roles } else { &self.pass_roles };
        let interventions: Vec<Intervention> =
            replacements.iter().map(|r| intervention(r, roles)).collect::<anyhow::Result<_>>()?;
        let plan = Plan::new(&interventions, self.hold_timeout, self.tracer.functions());
        let id = self.next_id;
        self.next_id += 1;
        let (rec, watched) = match &self.watch {
            None => {
                (self.tracer.intervene(self.target, id, self.policy, &plan, self.cancel)?, None)
            }
            Some((watcher, path)) => {
                let w = watched_run(
                    self.tracer,
                    self.target,
                    id,
                    self.policy,
                    &plan,
                    watcher,
                    self.cancel,
                )?;
                let (rec, record) = watch::split_watched(id, &watcher.objects, w);
                watch::append_record(path, &record)?;
                (rec, Some(record))
            }
        };
        self.writer.append(&rec, self.tracer.functions())?;
        // A watched re-run is usable only when every object was watched
        // throughout: a missed write would look like another reads-from.
        let valid = rec.run.complete
            && !self.cancel.load(Ordering::Relaxed)
            && rec.run.interventions.iter().all(|a| a.applied && !a.timed_out)
            && watched.as_ref().is_none_or(WatchRecord::complete);
        self.ui.step(&format!(
            "run {id} ({} base): {}",
            if base == Side::Fail { "failing" } else { "passing" },
            if rec.run.failed() { "failed" } else { "passed" }
        ));
        Ok(Observed { run: rec.run, valid, watched: watched.map(|r| r.watched()) })
    }
}

/// How the program is re-run.
#[derive(Clone, Debug)]
pub struct LiveSettings {
    /// Longest any hold may last.
    pub hold_timeout: Duration,
    /// A re-run still going after this long is killed (and failed).
    pub timeout: Duration,
    /// The session directory the re-runs are stored in.
    pub out: PathBuf,
    pub load: LoadOptions,
    /// `--access watch`: the objects every re-run watches.
    pub watch: Vec<WatchObject>,
}

/// `compare` with re-runs of the session's program: checks the session
/// was recorded from a command aid can start again and that its
/// functions are still where they were, starts a session of re-runs in
/// `settings.out`, and tests each link of the chain. Cut short by
/// `cancel`, it returns the error of the interrupted re-run; the re-runs
/// made so far are kept.
pub fn compare_program(
    loaded: &Loaded,
    inputs: &Inputs<'_>,
    opts: &Options,
    settings: &LiveSettings,
    cancel: &AtomicBool,
    ui: &mut dyn Progress,
) -> anyhow::Result<Comparison> {
    let (mut session, policy) =
        rerun::restart(loaded, &settings.out, settings.timeout, settings.load)?;
    let role_names = |id: u32| {
        inputs.session.runs.iter().find(|r| r.id == id).map(RoleNames::of).unwrap_or_default()
    };
    let watcher = match settings.watch.is_empty() {
        true => None,
        false => Some(Watcher::new(&loaded.header.program, settings.watch.clone(), None)?),
    };
    ui.begin("re-running", None);
    let live = LiveRerun {
        tracer: &mut session.tracer,
        target: &session.target,
        policy: &policy,
        writer: &mut session.writer,
        hold_timeout: settings.hold_timeout,
        cancel,
        fail_roles: role_names(inputs.fail),
        pass_roles: inputs.pass.map(role_names).unwrap_or_default(),
        next_id: 1,
        ui: &mut *ui,
        watch: watcher.as_ref().map(|w| (w, settings.out.join(watch::WATCH_FILE))),
    };
    let result = super::compare(inputs, opts, live);
    ui.end();
    result
}
