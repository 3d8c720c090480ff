//! What a run source can carry out: the analysis leaves out the
//! predicates whose intervention it cannot apply. A program aid starts can
//! be intervened on anywhere. A live service's units: values changed only
//! on the thread running the unit (the kernel numbers instances per unit
//! on that thread, and re-executes there); delays and serialisation on any
//! thread ([`super::live`]: other threads by function, while a unit is in
//! flight); no holds until a given call happened (they would need
//! per-unit "has happened" marks). An intervention on a class of threads
//! or several calls needs every part in reach.

use crate::model::Intervention;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    /// Interventions may act on any thread, not only the one running the
    /// unit (role 0).
    pub any_thread: bool,
    /// A thread may be held until another call has happened (forced
    /// orders, serialisation).
    pub holds: bool,
    /// Live units: delays and serialisation may act on any thread, by
    /// function ([`super::live::for_units`]).
    pub live: bool,
    /// Live units: the unit function. The unit ends at its return, so
    /// everything that labels the unit has happened by then.
    pub unit: Option<crate::model::FuncId>,
}

impl Reach {
    /// A program aid starts: everything.
    pub const PROGRAM: Reach = Reach { any_thread: true, holds: true, live: false, unit: None };
    /// The units of a running service.
    pub const LIVE_UNITS: Reach = Reach { any_thread: false, holds: false, live: true, unit: None };

    /// Whether `iv` acts only once the unit's outcome is decided: a delay
    /// before the unit function returns on the unit's thread. Every call
    /// and return value that labels the unit is in the past then, so it
    /// cannot turn a failing unit into a passing one ("handle_request runs
    /// too fast" on a unit that failed by returning early), and a round on
    /// it could only show the failure persist.
    pub fn after_outcome(self, iv: &Intervention) -> bool {
        matches!(iv, Intervention::DelayExit { site, .. }
            if site.role == 0 && Some(site.func) == self.unit)
    }

    /// Can `iv` be carried out?
    pub fn allows(self, iv: &Intervention) -> bool {
        let own = |roles: &[u32]| self.any_thread || roles.iter().all(|&r| r == 0);
        match iv {
            Intervention::ReturnEarly { site, .. } | Intervention::OverrideReturn { site, .. } => {
                own(&[site.role])
            }
            Intervention::DelayExit { site, .. } => self.live || own(&[site.role]),
            Intervention::Reexecute { calls, .. } => own(&calls.roles),
            Intervention::HoldUntil { site, until, .. } => {
                self.holds && own(&[site.role, until.role])
            }
            Intervention::Serialize { a, b } => {
                (self.holds && own(&[a.role, b.role])) || (self.live && a.role != b.role)
            }
            Intervention::SerializeGroups { a, b, .. } => {
                self.live || (self.holds && own(&a.roles) && own(&b.roles))
            }
            // A live unit serialises the two groups instead (`live.rs`).
            Intervention::HoldLocks { calls, while_running } => {
                self.live || (self.holds && own(&calls.roles) && own(&while_running.roles))
            }
            Intervention::All { each } => each.iter().all(|i| self.allows(i)),
        }
    }
}

impl Default for Reach {
    fn default() -> Self {
        Reach::PROGRAM
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CallSet, Point, Site, ValueTest};

    #[test]
    fn a_delay_at_the_unit_functions_return_acts_after_the_units_outcome() {
        let s = |func, role| Site { func, role, instance: 1 };
        let delay = |site| Intervention::DelayExit { site, delay_us: 5 };
        let live = Reach { unit: Some(3), ..Reach::LIVE_UNITS };
        assert!(live.after_outcome(&delay(s(3, 0))));
        assert!(!live.after_outcome(&delay(s(3, 1))), "another thread's call of it");
        assert!(!live.after_outcome(&delay(s(2, 0))), "a call inside the unit");
        assert!(!Reach::PROGRAM.after_outcome(&delay(s(3, 0))));
        let hold = Intervention::HoldUntil {
            site: s(3, 0),
            point: Point::Entry,
            until: s(2, 1),
            until_point: Point::Exit,
        };
        assert!(!live.after_outcome(&hold));
    }

    #[test]
    fn a_service_unit_changes_values_on_its_own_thread_and_serialises_across_threads() {
        let s = |role| Site { func: 0, role, instance: 1 };
        let on = |role| Intervention::DelayExit { site: s(role), delay_us: 5 };
        let hold = Intervention::HoldUntil {
            site: s(0),
            point: Point::Entry,
            until: s(0),
            until_point: Point::Exit,
        };
        let serialize = Intervention::Serialize { a: s(0), b: s(1) };
        let live = Reach::LIVE_UNITS;
        assert!(live.allows(&on(0)) && live.allows(&on(1)), "delays on any thread");
        assert!(!live.allows(&hold), "no per-unit marks for holds until a call happened");
        assert!(live.allows(&serialize), "serialisation across threads");
        assert!(!live.allows(&Intervention::Serialize { a: s(0), b: s(0) }));
        assert!(!live.allows(&Intervention::OverrideReturn { site: s(1), value: 1 }));
        assert!(Reach::PROGRAM.allows(&on(1)) && Reach::PROGRAM.allows(&hold));
        assert!(Reach::PROGRAM.allows(&serialize));
        assert!(Reach::LIVE_UNITS.allows(&Intervention::OverrideReturn { site: s(0), value: 1 }));
        let retry = |roles: Vec<u32>| Intervention::Reexecute {
            calls: CallSet { func: 0, roles, instance: 0, within: None },
            test: ValueTest::Error { negative: true, zero: false },
            retries: 3,
            fallback: None,
        };
        assert!(Reach::LIVE_UNITS.allows(&retry(vec![0])));
        assert!(!Reach::LIVE_UNITS.allows(&retry(vec![0, 1])));
        let all = Intervention::All { each: vec![retry(vec![0]), hold] };
        assert!(!Reach::LIVE_UNITS.allows(&all) && Reach::PROGRAM.allows(&all));
    }
}
