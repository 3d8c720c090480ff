//! What the agent's stops did to a run of a program, read back into its
//! record: rows of held threads moved to when they went on, the stops
//! that were overhead or noise as pauses, each noise's hold, and the
//! values forced at returns.

use crate::{
    intervene::{Plan, control::StopRecord, noise},
    model::{EventRow, FuncId, Function, Noise, NoiseAt, Point, Probe},
};

/// A held thread's probe fired before the hold: the call really proceeded
/// (entered its body, or returned to its caller) only when released, at a
/// time taken on the events' own clock. A statement point's row moves only
/// when the agent put the thread back at the probed instruction
/// ([`StopRecord::rewound`]): the kernel stops the thread on its way back
/// to user space, after stepping over the instruction, which then runs
/// again when the thread is let go (a load reads what other threads
/// stored during the hold: measured in BENCHMARKS.md, "A hold at a
/// statement point"). Not rewound (the instruction may not run twice, a
/// store), the thread was past it at the probe's time.
///
/// A stop at a synchronisation point names the thread's rank there (its
/// k-th sync point of any kind), not the call's instance: its row is the
/// thread's k-th sync-point row, of the stop's function.
///
/// A thread still held when the run ended (another thread's assertion
/// killed the process around it) never went on: the agent lets it go
/// only once it notices the death, after the run's end (`end_ns`, on the
/// rows' clock), and its row stays at that end. Moved past it, a lock
/// call held there would fall outside the call that made it (which the
/// run ended inside), and that call's lock would go unseen.
pub(super) fn shift_held_rows(
    rows: &mut [EventRow],
    stops: &[StopRecord],
    start_ns: u64,
    end_ns: u64,
    functions: &[Function],
) {
    let probe = |f: FuncId| functions.get(f as usize).map(|f| f.probe);
    for stop in stops.iter().filter(|s| s.released_ns > 0) {
        let row = match probe(stop.site.func) {
            Some(Probe::Statement) if !stop.rewound => continue,
            Some(Probe::Sync | Probe::Statement) => rows
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    r.tid == stop.tid && probe(r.func).is_some_and(Probe::is_sync_point)
                })
                .nth((stop.site.instance as usize).wrapping_sub(1))
                .filter(|(_, r)| r.func == stop.site.func)
                .map(|(i, _)| i),
            _ => {
                let point = if stop.site.point == aid_common::SitePoint::ENTRY {
                    Point::Entry
                } else {
                    Point::Exit
                };
                rows.iter().position(|r| {
                    r.tid == stop.tid
                        && r.func == stop.site.func
                        && r.instance == stop.site.instance
                        && r.point == point
                })
            }
        };
        if let Some(row) = row.map(|i| &mut rows[i]) {
            row.t_ns = row.t_ns.max(stop.released_ns.saturating_sub(start_ns).min(end_ns));
        }
    }
}

/// Stops that were the agent's overhead (register edits, holds that
/// turned out not to be needed) or noise (`is_noise`: an injected delay is
/// not the program's time), as pauses of the thread's role.
pub(super) fn pauses(
    stops: &[StopRecord],
    threads: &[crate::model::Thread],
    start_ns: u64,
    is_noise: impl Fn(&StopRecord) -> bool,
) -> Vec<crate::model::Pause> {
    stops
        .iter()
        .filter(|s| {
            (!s.held || is_noise(s)) && s.released_ns > s.probe_ns && s.probe_ns >= start_ns
        })
        .filter_map(|s| {
            let role = threads.iter().find(|t| t.tid == s.tid)?.role;
            Some(crate::model::Pause {
                role,
                at_ns: s.probe_ns - start_ns,
                dur_ns: s.released_ns - s.probe_ns,
            })
        })
        .collect()
}

/// The run's noise with what each did: how long its thread was held, and
/// in which function.
pub(super) fn noise_outcome(
    plan: &Plan,
    stops: &[StopRecord],
    functions: &[Function],
) -> Vec<Noise> {
    plan.noise
        .iter()
        .map(|n| {
            let mut n = n.clone();
            // Noise for every thread at a point is served by each
            // arrival held there: its hold is theirs added up, except
            // where the thread's own noise acts at that stop (the kernel
            // looks up the thread's key before the every-thread one).
            let served = stops.iter().filter(|s| {
                let own =
                    || plan.noise.iter().any(|m| !is_every(m.at) && serves(m.at, s, functions));
                serves(n.at, s, functions) && (!is_every(n.at) || (s.held && !own()))
            });
            for s in served.take(if is_every(n.at) { usize::MAX } else { 1 }) {
                // A thread still held when the target ended (a failing run
                // aborted by another thread while this one waited) was
                // held until then: the noise was reached, and a replay of
                // the failing run's noise keeps it.
                n.held_ns +=
                    if s.cut_short { s.held_ns } else { s.released_ns.saturating_sub(s.probe_ns) };
                n.func = Some(s.site.func);
            }
            n
        })
        .collect()
}

/// Whether a stop served noise rather than an intervention.
pub(super) fn is_noise(plan: &Plan, stop: &StopRecord, functions: &[Function]) -> bool {
    plan.noise.iter().any(|n| serves(n.at, stop, functions))
}

/// Whether noise at `at` is what stopped the thread at `stop` (a stop at
/// a synchronisation point is keyed by the thread's rank there).
fn serves(at: NoiseAt, stop: &StopRecord, functions: &[Function]) -> bool {
    // Noise delays or demotes; an intervention's hold after noise at the
    // same stop (a lock call, a serialised call) is not the noise.
    if !stop.action.is_noise_kind() {
        return false;
    }
    let sync = functions.get(stop.site.func as usize).is_some_and(|f| f.probe.is_sync_point());
    noise::served_by(at, stop.site, sync)
}

fn is_every(at: NoiseAt) -> bool {
    matches!(at, NoiseAt::Every { .. })
}

/// The exit probe saw the value the function computed; after an override
/// the caller saw the forced one, and that is what the run records. In a
/// run of a program, the stop's call is the exit row of its thread,
/// function and instance.
pub(super) fn record_forced_returns(
    rows: &mut [EventRow],
    stops: &[StopRecord],
    functions: &[Function],
) {
    write_forced_returns(rows, stops, functions, |rows, stop| {
        rows.iter().position(|r| {
            r.tid == stop.tid
                && r.func == stop.site.func
                && r.instance == stop.site.instance
                && r.point == Point::Exit
        })
    });
}

/// Writes the value each applied stop forced into the exit row
/// `exit_of` finds for it (normalised to the function's return width).
/// True when a row changed.
pub fn write_forced_returns(
    rows: &mut [EventRow],
    stops: &[StopRecord],
    functions: &[Function],
    exit_of: impl Fn(&[EventRow], &StopRecord) -> Option<usize>,
) -> bool {
    let mut changed = false;
    for stop in stops.iter().filter(|s| s.applied) {
        let Some(value) = stop.value else { continue };
        let Some(f) = functions.get(stop.site.func as usize) else { continue };
        if let Some(i) = exit_of(rows, stop) {
            rows[i].ret = Some(f.ret.normalize(value));
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NoiseAction, NoiseAt, Site, testing::function};
    use aid_common::{ActionKind, SiteKey, SitePoint};

    fn stop(func: u32, role: u32, instance: u32, held_ns: u64) -> StopRecord {
        StopRecord {
            site: SiteKey { func, role, instance, point: SitePoint::ENTRY },
            tid: 100 + role,
            action: ActionKind::DELAY,
            applied: true,
            timed_out: false,
            held_ns,
            released_ns: 1_000 + held_ns,
            probe_ns: 1_000,
            held: true,
            cut_short: false,
            rewound: true,
            value: None,
            error: None,
        }
    }

    /// An entry row of thread `tid` (role `tid` − 100, as [`stop`]'s).
    fn entry_row(t_ns: u64, tid: u32, func: u32, instance: u32) -> EventRow {
        EventRow {
            t_ns,
            tid,
            role: tid - 100,
            func,
            point: Point::Entry,
            instance,
            args: [0; 3],
            ret: None,
            content: None,
        }
    }

    /// A hold at a thread's 3rd synchronisation point (its 2nd lock, after
    /// a lock and an unlock) moves that lock's row, not its 3rd lock's
    /// (it has none) nor another thread's: a stop at a sync point names
    /// the thread's rank there. A call's own stop names its instance.
    #[test]
    fn a_hold_at_a_sync_point_moves_the_threads_row_of_that_rank() {
        let sync = |id, name| Function { probe: Probe::Sync, internal: true, ..function(id, name) };
        let functions = vec![function(0, "work"), sync(1, "lock"), sync(2, "unlock")];
        let row = entry_row;
        let mut rows = vec![
            row(10, 101, 0, 1),
            row(20, 101, 1, 1),
            row(30, 101, 2, 1),
            row(35, 102, 1, 1),
            row(40, 101, 1, 2),
            row(50, 101, 0, 2),
        ];
        // Released at 1,900 ns, 900 ns after the run's start.
        let held = StopRecord { released_ns: 1_900, ..stop(1, 1, 3, 0) };
        let call = StopRecord { released_ns: 1_950, ..stop(0, 1, 2, 0) };
        shift_held_rows(&mut rows, &[held, call], 1_000, 2_000, &functions);
        let times: Vec<u64> = rows.iter().map(|r| r.t_ns).collect();
        assert_eq!(times, [10, 20, 30, 35, 900, 950]);
        // A rank whose row is of another function moves nothing.
        let wrong = StopRecord { released_ns: 5_000, ..stop(1, 1, 2, 0) };
        shift_held_rows(&mut rows, &[wrong], 1_000, 2_000, &functions);
        assert_eq!(rows.iter().map(|r| r.t_ns).collect::<Vec<_>>(), times);
        // Let go only after the run ended at 1,200 ns (the agent noticed
        // the process had died): the row stays at the run's end.
        let mut rows = vec![row(10, 101, 0, 1), row(20, 101, 1, 1)];
        let died = StopRecord { released_ns: 4_000, ..stop(1, 1, 1, 0) };
        shift_held_rows(&mut rows, &[died], 1_000, 1_200, &functions);
        assert_eq!(rows.iter().map(|r| r.t_ns).collect::<Vec<_>>(), [10, 1_200]);
    }

    /// A hold at a statement point (the thread's 2nd point of any kind)
    /// moves its row to the release only when the thread was put back at
    /// the probed instruction: it ran that instruction after the hold.
    /// Not put back, the instruction ran before the hold and the row
    /// keeps the probe's time.
    #[test]
    fn a_statement_row_moves_when_its_hold_was_rewound() {
        let at = |id, name, probe| Function { probe, internal: true, ..function(id, name) };
        let functions =
            vec![function(0, "check"), at(1, "lock", Probe::Sync), at(2, "stmt", Probe::Statement)];
        let row = |t_ns, func, instance| entry_row(t_ns, 101, func, instance);
        let rows = vec![row(10, 0, 1), row(20, 1, 1), row(30, 2, 1), row(600, 0, 2)];
        let held = StopRecord { released_ns: 1_500, ..stop(2, 1, 2, 0) };
        let mut moved = rows.clone();
        shift_held_rows(&mut moved, std::slice::from_ref(&held), 1_000, 2_000, &functions);
        assert_eq!(moved.iter().map(|r| r.t_ns).collect::<Vec<_>>(), [10, 20, 500, 600]);
        let mut kept = rows.clone();
        let past = StopRecord { rewound: false, ..held };
        shift_held_rows(&mut kept, &[past], 1_000, 2_000, &functions);
        assert_eq!(kept.iter().map(|r| r.t_ns).collect::<Vec<_>>(), [10, 20, 30, 600]);
    }

    /// A statement point with both a thread's own noise (its 2nd arrival
    /// there) and every-thread noise: the kernel serves that thread's stop
    /// with its own noise, so the hold is the own noise's only, and the
    /// every-thread noise adds up the other arrivals.
    #[test]
    fn a_stop_served_by_a_threads_own_noise_is_not_the_every_thread_noises() {
        let functions = vec![function(0, "stmt")];
        let delay = NoiseAction::Delay { us: 5 };
        let own = Noise {
            at: NoiseAt::Call { site: Site { func: 0, role: 1, instance: 2 } },
            action: delay,
            held_ns: 0,
            func: None,
            near_miss: false,
        };
        let every = Noise {
            at: NoiseAt::Every { func: 0, holds: 8 },
            action: delay,
            held_ns: 0,
            func: None,
            near_miss: false,
        };
        let plan = Plan { noise: vec![own, every], ..Plan::default() };
        let stops = [stop(0, 1, 1, 10), stop(0, 1, 2, 700), stop(0, 2, 1, 30)];
        let out = noise_outcome(&plan, &stops, &functions);
        assert_eq!(out[0].held_ns, 700, "the thread's own noise");
        assert_eq!(out[1].held_ns, 40, "every other arrival, added up");
        assert_eq!(out[1].func, Some(0));
    }

    /// A failing run that ended while noise held threads (reorder_10_bad:
    /// the check aborted the process while the setters waited at their
    /// first store): the holds count until the end, not as "never
    /// reached", so the failing run's replay keeps that noise.
    #[test]
    fn noise_holding_a_thread_when_the_target_ended_was_reached() {
        let functions = vec![function(0, "stmt"), function(1, "setter")];
        let delay = NoiseAction::Delay { us: 2_000 };
        let noise = |at| Noise { at, action: delay, held_ns: 0, func: None, near_miss: false };
        let plan = Plan {
            noise: vec![
                noise(NoiseAt::Every { func: 0, holds: 11 }),
                noise(NoiseAt::Call { site: Site { func: 1, role: 3, instance: 1 } }),
            ],
            ..Plan::default()
        };
        let cut =
            |s: StopRecord, held_ns| StopRecord { released_ns: 0, cut_short: true, held_ns, ..s };
        let stops =
            [cut(stop(0, 1, 1, 0), 1_500_000), stop(0, 2, 1, 300), cut(stop(1, 3, 1, 0), 900_000)];
        let out = noise_outcome(&plan, &stops, &functions);
        assert_eq!(out[0].held_ns, 1_500_300, "held to the end, and a released arrival");
        assert_eq!(out[1].held_ns, 900_000);
    }
}
