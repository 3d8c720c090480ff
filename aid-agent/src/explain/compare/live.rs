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

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::{Context as _, bail};

use super::{
    align::CallKey,
    dual::Side,
    minimize::{Observed, Replacement, Rerun},
};
use crate::{
    explain::roles::RoleNames,
    intervene::Plan,
    model::{Intervention, Point, Site},
    runner::Target,
    session::Writer,
    trace::{RunPolicy, Tracer},
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
    pub progress: indicatif::ProgressBar,
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
        let plan = Plan::new(&interventions, self.hold_timeout);
        let id = self.next_id;
        self.next_id += 1;
        let rec = self.tracer.intervene(self.target, id, self.policy, &plan, self.cancel)?;
        self.writer.append(&rec, &self.tracer.functions)?;
        let valid = rec.run.complete
            && !self.cancel.load(Ordering::Relaxed)
            && rec.run.interventions.iter().all(|a| a.applied && !a.timed_out);
        self.progress.inc(1);
        self.progress.set_message(format!(
            "run {id} ({} base): {}",
            if base == Side::Fail { "failing" } else { "passing" },
            if rec.run.failed() { "failed" } else { "passed" }
        ));
        Ok(Observed { run: rec.run, valid })
    }
}
