//! Interventions (AID Fig. 2, column 3) as kernel actions: which site of
//! which call gets which action, what the kernel must watch for, and —
//! after the run — whether each intervention was carried out.

use std::time::Duration;

use aid_common::{Action, ActionKind, SiteKey, SitePoint};

use crate::{
    intervene::control::StopRecord,
    model::{AppliedIntervention, Intervention, Noise, Point, Site},
};

pub fn site_key(site: Site, point: Point) -> SiteKey {
    SiteKey {
        func: site.func,
        role: site.role,
        instance: site.instance,
        point: match point {
            Point::Entry => SitePoint::ENTRY,
            Point::Exit => SitePoint::EXIT,
        },
    }
}

/// The kernel actions for a set of interventions.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub interventions: Vec<Intervention>,
    /// (site, action, index of the intervention it serves).
    pub actions: Vec<(SiteKey, Action, usize)>,
    /// Sites whose occurrence the kernel must time-stamp.
    pub watch: Vec<SiteKey>,
    /// Interventions that could not be installed: another one already acts
    /// at the same site.
    pub conflicts: Vec<usize>,
    /// Noise installed (its actions carry index `usize::MAX`).
    pub noise: Vec<Noise>,
    /// The run needs the synchronisation-point probes (it amplifies).
    pub sync_points: bool,
}

impl Plan {
    /// `hold_timeout` bounds every hold, so a forced order that cannot be
    /// satisfied never hangs the target.
    pub fn new(interventions: &[Intervention], hold_timeout: Duration) -> Plan {
        let timeout_us = hold_timeout.as_micros() as u64;
        let mut plan = Plan { interventions: interventions.to_vec(), ..Plan::default() };
        for (i, iv) in interventions.iter().enumerate() {
            let mut wanted: Vec<(SiteKey, Action)> = Vec::new();
            let action = |kind, value, other| Action { kind, _pad: 0, value, timeout_us, other };
            let none = SiteKey::default();
            match *iv {
                Intervention::ReturnEarly { site, value } => {
                    wanted.push((
                        site_key(site, Point::Entry),
                        action(ActionKind::RETURN_EARLY, value as u64, none),
                    ));
                }
                Intervention::OverrideReturn { site, value } => {
                    wanted.push((
                        site_key(site, Point::Exit),
                        action(ActionKind::OVERRIDE_RETURN, value as u64, none),
                    ));
                }
                Intervention::DelayExit { site, delay_us } => {
                    wanted.push((
                        site_key(site, Point::Exit),
                        action(ActionKind::DELAY, delay_us, none),
                    ));
                }
                Intervention::HoldUntil { site, point, until, until_point } => {
                    let other = site_key(until, until_point);
                    plan.watch.push(other);
                    wanted.push((site_key(site, point), action(ActionKind::HOLD_UNTIL, 0, other)));
                }
                Intervention::Serialize { a, b } => {
                    for s in [a, b] {
                        plan.watch.push(site_key(s, Point::Entry));
                        plan.watch.push(site_key(s, Point::Exit));
                    }
                    wanted.push((
                        site_key(a, Point::Entry),
                        action(ActionKind::HOLD_WHILE_RUNNING, 0, site_key(b, Point::Entry)),
                    ));
                    wanted.push((
                        site_key(b, Point::Entry),
                        action(ActionKind::HOLD_WHILE_RUNNING, 0, site_key(a, Point::Entry)),
                    ));
                }
            }
            if wanted.iter().any(|(k, _)| plan.actions.iter().any(|(taken, _, _)| taken == k)) {
                plan.conflicts.push(i);
                continue;
            }
            plan.actions.extend(wanted.into_iter().map(|(k, a)| (k, a, i)));
        }
        plan.watch.sort();
        plan.watch.dedup();
        plan
    }

    /// Adds the noise of a run (failure amplification, `noise.rs`): a
    /// delay or a PCT change point at a traced call's entry or at a
    /// thread's k-th synchronisation point, whose probes the run then
    /// needs. Noise is dropped where an intervention already acts.
    pub fn with_noise(mut self, noise: &[Noise]) -> Plan {
        self.sync_points = true;
        for n in noise {
            let key = super::noise::site_key(n.at);
            if self.actions.iter().any(|(k, _, _)| *k == key) {
                continue;
            }
            self.actions.push((key, super::noise::action(n.action), usize::MAX));
            self.noise.push(n.clone());
        }
        self
    }

    /// What became of each intervention, given the stops the run had. An
    /// intervention whose site was never reached, or whose wanted order
    /// already held (no stop was needed), counts as applied.
    pub fn outcome(&self, stops: &[StopRecord]) -> Vec<AppliedIntervention> {
        self.interventions
            .iter()
            .enumerate()
            .map(|(i, iv)| {
                if self.conflicts.contains(&i) {
                    return AppliedIntervention {
                        intervention: iv.clone(),
                        applied: false,
                        timed_out: false,
                    };
                }
                let mine: Vec<&StopRecord> = stops
                    .iter()
                    .filter(|s| {
                        self.actions.iter().any(|(k, _, owner)| *owner == i && *k == s.site)
                    })
                    .collect();
                AppliedIntervention {
                    intervention: iv.clone(),
                    applied: mine.iter().all(|s| s.applied),
                    timed_out: mine.iter().any(|s| s.timed_out),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(func: u32, role: u32, instance: u32) -> Site {
        Site { func, role, instance }
    }

    #[test]
    fn serialize_installs_two_holds_and_watches_four_sites() {
        let plan = Plan::new(
            &[Intervention::Serialize { a: site(0, 1, 1), b: site(0, 2, 1) }],
            Duration::from_millis(500),
        );
        assert_eq!(plan.actions.len(), 2);
        assert!(
            plan.actions.iter().all(
                |(_, a, _)| a.kind == ActionKind::HOLD_WHILE_RUNNING && a.timeout_us == 500_000
            )
        );
        assert_eq!(plan.watch.len(), 4);
    }

    #[test]
    fn conflicting_interventions_are_not_installed() {
        let s = site(3, 0, 2);
        let plan = Plan::new(
            &[
                Intervention::OverrideReturn { site: s, value: 1 },
                Intervention::DelayExit { site: s, delay_us: 10 },
            ],
            Duration::from_secs(1),
        );
        assert_eq!(plan.conflicts, vec![1]);
        let outcome = plan.outcome(&[]);
        assert!(outcome[0].applied && !outcome[1].applied);
    }

    #[test]
    fn timed_out_hold_is_not_applied() {
        let iv = Intervention::HoldUntil {
            site: site(1, 2, 1),
            point: Point::Entry,
            until: site(0, 1, 1),
            until_point: Point::Exit,
        };
        let plan = Plan::new(&[iv], Duration::from_millis(10));
        let stop = StopRecord {
            site: site_key(site(1, 2, 1), Point::Entry),
            tid: 7,
            action: ActionKind::HOLD_UNTIL,
            applied: false,
            timed_out: true,
            held_ns: 10_000_000,
            released_ns: 0,
            probe_ns: 0,
            held: true,
            error: None,
        };
        let o = plan.outcome(&[stop]);
        assert!(!o[0].applied && o[0].timed_out);
    }
}
