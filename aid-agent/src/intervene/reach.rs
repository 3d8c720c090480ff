//! What a run source can carry out: the analysis leaves out the
//! predicates whose intervention it cannot apply. A program aid starts can
//! be intervened on anywhere; a live service only on the thread running
//! the unit (the kernel numbers instances per unit on that thread) and
//! without holds (they would need per-unit "has happened" marks).

use crate::model::Intervention;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reach {
    /// Interventions may act on any thread, not only the one running the
    /// unit (role 0).
    pub any_thread: bool,
    /// A thread may be held until another call has happened (forced
    /// orders, serialisation).
    pub holds: bool,
}

impl Reach {
    /// A program aid starts: everything.
    pub const PROGRAM: Reach = Reach { any_thread: true, holds: true };
    /// The units of a running service.
    pub const UNIT_THREAD: Reach = Reach { any_thread: false, holds: false };

    /// Can `iv` be carried out?
    pub fn allows(self, iv: &Intervention) -> bool {
        match iv {
            Intervention::ReturnEarly { site, .. }
            | Intervention::OverrideReturn { site, .. }
            | Intervention::DelayExit { site, .. } => self.any_thread || site.role == 0,
            Intervention::HoldUntil { site, until, .. } => {
                self.holds && (self.any_thread || site.role == 0 && until.role == 0)
            }
            Intervention::Serialize { a, b } => {
                self.holds && (self.any_thread || a.role == 0 && b.role == 0)
            }
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
    use crate::model::{Point, Site};

    #[test]
    fn a_service_unit_allows_only_its_own_thread_and_no_holds() {
        let s = |role| Site { func: 0, role, instance: 1 };
        let on = |role| Intervention::DelayExit { site: s(role), delay_us: 5 };
        let hold = Intervention::HoldUntil {
            site: s(0),
            point: Point::Entry,
            until: s(0),
            until_point: Point::Exit,
        };
        let serialize = Intervention::Serialize { a: s(0), b: s(1) };
        assert!(Reach::UNIT_THREAD.allows(&on(0)));
        assert!(!Reach::UNIT_THREAD.allows(&on(1)));
        assert!(!Reach::UNIT_THREAD.allows(&hold));
        assert!(!Reach::UNIT_THREAD.allows(&serialize));
        assert!(Reach::PROGRAM.allows(&on(1)) && Reach::PROGRAM.allows(&hold));
        assert!(Reach::PROGRAM.allows(&serialize));
        assert!(Reach::UNIT_THREAD.allows(&Intervention::OverrideReturn { site: s(0), value: 1 }));
    }
}
