//! What hardware watchpoints saw of a run: each read or write of a watched
//! object by a thread, attributed to the traced call active on that
//! thread, and the data races they show — two calls on different roles
//! that overlapped in time and touched the same object, at least one of
//! them writing (Fig. 2 row 1 of the AID paper, with the write observed
//! rather than guessed from a shared pointer argument).
//!
//! Here because the predicates layer may test "this overlap is a data
//! race" as a fact of the run, and `mine`, `slice` and `compare` type
//! their access events with it.

use serde::{Deserialize, Serialize};

use super::{Role, Run};

/// One access to a watched object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemAccess {
    /// Ns since the run started (the kernel's time of the access).
    pub t_ns: u64,
    pub tid: u32,
    pub role: Role,
    /// The object's canonical name (a global by symbol, else its first
    /// appearance; see `explain::objects`).
    pub object: String,
    /// The watched address.
    pub addr: u64,
    pub write: bool,
    /// Index into the run's `calls` of the innermost traced call active on
    /// the thread then; None when no traced call was.
    pub call: Option<usize>,
    /// The instruction after the access (data breakpoints trap after it).
    pub ip: u64,
}

/// Two calls on different roles that overlapped in time and touched the
/// same watched object, at least one of them writing it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataRace {
    pub object: String,
    /// Indexes into the run's `calls`: the one entered first, then the
    /// other.
    pub first: usize,
    pub second: usize,
    pub first_writes: bool,
    pub second_writes: bool,
}

/// The data races of `run` shown by `accesses` (its watched accesses), in
/// the order of their calls' entries.
pub fn data_races(run: &Run, accesses: &[MemAccess]) -> Vec<DataRace> {
    use std::collections::BTreeMap;
    // (object, call) → writes?
    let mut touched: BTreeMap<(&str, usize), bool> = BTreeMap::new();
    for a in accesses {
        if let Some(c) = a.call {
            *touched.entry((a.object.as_str(), c)).or_default() |= a.write;
        }
    }
    let end = |i: usize| run.calls[i].exit_ns.unwrap_or(run.end_ns);
    let mut races = Vec::new();
    let list: Vec<(&(&str, usize), &bool)> = touched.iter().collect();
    for (i, ((obj, a), aw)) in list.iter().enumerate() {
        for ((obj2, b), bw) in &list[i + 1..] {
            if obj != obj2 || !(**aw || **bw) {
                continue;
            }
            let (ca, cb) = (&run.calls[*a], &run.calls[*b]);
            if ca.role == cb.role {
                continue;
            }
            let overlap = ca.entry_ns <= end(*b) && cb.entry_ns <= end(*a);
            if !overlap {
                continue;
            }
            let (first, second, fw, sw) = if (ca.entry_ns, *a) <= (cb.entry_ns, *b) {
                (*a, *b, **aw, **bw)
            } else {
                (*b, *a, **bw, **aw)
            };
            races.push(DataRace {
                object: (*obj).to_owned(),
                first,
                second,
                first_writes: fw,
                second_writes: sw,
            });
        }
    }
    races.sort_by_key(|r| (run.calls[r.first].entry_ns, r.first, r.second));
    races
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        testing::{call, run},
    };

    fn access(t_ns: u64, role: Role, call: usize, write: bool) -> MemAccess {
        MemAccess {
            t_ns,
            tid: 100 + role,
            role,
            object: "cell".into(),
            addr: 0x1000,
            write,
            call: Some(call),
            ip: 0,
        }
    }

    /// Two overlapping readers are no race; a reader overlapping a writer
    /// is; a writer that ended before the reader began is not.
    #[test]
    fn an_overlap_is_a_race_only_where_one_side_writes() {
        let r = run(
            1,
            Label::Fail,
            vec![
                call(0, 1, 1, 10, Some(50), Some(0)), // reader on role 1
                call(0, 2, 1, 20, Some(60), Some(0)), // reader on role 2
                call(1, 3, 1, 40, Some(70), Some(0)), // writer on role 3
                call(1, 4, 1, 80, Some(90), Some(0)), // writer on role 4, after all
            ],
            100,
        );
        let accesses = vec![
            access(15, 1, 0, false),
            access(25, 2, 1, false),
            access(45, 3, 2, true),
            access(85, 4, 3, true),
        ];
        let races = data_races(&r, &accesses);
        let pairs: Vec<(usize, usize, bool, bool)> =
            races.iter().map(|r| (r.first, r.second, r.first_writes, r.second_writes)).collect();
        assert_eq!(pairs, vec![(0, 2, false, true), (1, 2, false, true)]);
    }
}
