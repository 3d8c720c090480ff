//! Interventions on a live service, in the form its kernel side can carry
//! out (docs/services.md). In live-unit mode the probes number the calls
//! of the thread running a unit from the unit's entry (role 0), but the
//! calls of every other thread only by their function: a unit's "call 1 of
//! compact_segment on the compactor" is whichever compaction was running
//! when the unit began, a different one of the process every time. So
//! actions on other threads act on every call of the function on that
//! thread — only while a unit is in flight, which the probes check — and a
//! serialisation of two calls becomes one of the two functions on their
//! threads (group serialisation: whichever enters while the other runs
//! waits for it, each hold bounded by the hold timeout).

use crate::model::{CallSet, Intervention, Site};

/// `iv` as it is installed in a live service.
pub fn for_units(iv: &Intervention) -> Intervention {
    match iv {
        Intervention::DelayExit { site, delay_us } if site.role != 0 => {
            Intervention::DelayExit { site: every(*site), delay_us: *delay_us }
        }
        Intervention::Serialize { a, b } if a.role != 0 || b.role != 0 => {
            Intervention::SerializeGroups { a: calls(*a), b: calls(*b), object: None }
        }
        // The probes of a live service hold no lock calls: the calls
        // whose locks would wait are kept apart from the others whole.
        Intervention::HoldLocks { calls, while_running } => Intervention::SerializeGroups {
            a: while_running.clone(),
            b: calls.clone(),
            object: None,
        },
        Intervention::All { each } => {
            Intervention::All { each: each.iter().map(for_units).collect() }
        }
        other => other.clone(),
    }
}

/// Every call of the site's function on its thread.
fn every(site: Site) -> Site {
    Site { instance: 0, ..site }
}

/// The unit's own call stays itself; another thread's is every call.
fn calls(site: Site) -> CallSet {
    CallSet::site(if site.role == 0 { site } else { every(site) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(func: u32, role: u32, instance: u32) -> Site {
        Site { func, role, instance }
    }

    #[test]
    fn other_threads_are_named_by_function_and_two_calls_serialise_as_groups() {
        let overlap = Intervention::Serialize { a: s(2, 2, 1), b: s(1, 0, 1) };
        assert_eq!(
            for_units(&overlap),
            Intervention::SerializeGroups {
                a: CallSet { func: 2, roles: vec![2], instance: 0, within: None },
                b: CallSet { func: 1, roles: vec![0], instance: 1, within: None },
                object: None,
            }
        );
        let delay = Intervention::DelayExit { site: s(3, 1, 4), delay_us: 7 };
        assert_eq!(for_units(&delay), Intervention::DelayExit { site: s(3, 1, 0), delay_us: 7 });
        let own = Intervention::DelayExit { site: s(3, 0, 4), delay_us: 7 };
        assert_eq!(for_units(&own), own);
        let all = Intervention::All { each: vec![overlap, own.clone()] };
        let Intervention::All { each } = for_units(&all) else { panic!("not All") };
        assert!(matches!(each[0], Intervention::SerializeGroups { .. }));
        assert_eq!(each[1], own);
    }
}
