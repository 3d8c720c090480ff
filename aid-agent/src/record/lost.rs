//! The one rule for events the kernel dropped (ring buffer full): a run is
//! incomplete, and never evidence, if events may have been lost while it
//! ran. The agent reads the kernel's counters now and then; a loss is
//! known to lie between two reads, so a run is charged with every loss
//! counted in an interval that overlaps it (an upper bound, never an
//! undercount). A program run is read once, at its end, so its interval
//! is the run itself.

use crate::{bpf::Lost, model::Run};

/// Losses by the interval (ns on one clock) in which they were counted.
#[derive(Clone, Debug, Default)]
pub struct LossLog {
    intervals: Vec<(u64, u64, Lost)>,
}

impl LossLog {
    /// `lost` were counted between `from_ns` and `to_ns`.
    pub fn record(&mut self, from_ns: u64, to_ns: u64, lost: Lost) {
        if lost.total() > 0 {
            self.intervals.push((from_ns, to_ns, lost));
        }
    }

    /// Losses counted in intervals that overlap `start_ns..=end_ns`.
    pub fn during(&self, start_ns: u64, end_ns: u64) -> Lost {
        self.intervals.iter().filter(|(lo, hi, _)| *lo <= end_ns && *hi >= start_ns).fold(
            Lost::default(),
            |sum, (_, _, l)| Lost {
                calls: sum.calls + l.calls,
                thread_records: sum.thread_records + l.thread_records,
            },
        )
    }

    /// Every event lost so far.
    pub fn total(&self) -> u64 {
        self.intervals.iter().map(|(_, _, l)| l.total()).sum()
    }
}

/// Charges `run` with `lost`: a run that may miss events is incomplete.
pub fn charge(run: &mut Run, lost: Lost) {
    run.lost_events = lost.total();
    run.lost_thread_records = lost.thread_records;
    run.complete = lost.total() == 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Label, testing::run};

    #[test]
    fn a_run_is_charged_with_every_overlapping_interval() {
        let mut log = LossLog::default();
        log.record(0, 100, Lost { calls: 3, thread_records: 0 });
        log.record(100, 200, Lost::default());
        log.record(200, 300, Lost { calls: 1, thread_records: 2 });
        assert_eq!(log.during(150, 180), Lost::default());
        assert_eq!(log.during(50, 250), Lost { calls: 4, thread_records: 2 });
        assert_eq!(log.during(300, 400), Lost { calls: 1, thread_records: 2 });
        assert_eq!(log.total(), 6);
        let mut r = run(1, Label::Pass, vec![], 10);
        charge(&mut r, log.during(50, 250));
        assert_eq!((r.lost_events, r.lost_thread_records, r.complete), (6, 2, false));
        charge(&mut r, Lost::default());
        assert!(r.complete);
    }
}
