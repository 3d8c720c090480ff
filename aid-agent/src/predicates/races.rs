//! The data-race predicate: an overlap of two calls on different threads
//! on the same object (Fig. 2 row 1) where one of them *writes* the
//! object. Arguments only show that both calls were passed the object;
//! what each did to it is seen by hardware watchpoints in targeted
//! re-runs (`debug::races` makes them, `model::memory` attributes the
//! accesses). This file turns what they saw into the catalog's words: an
//! overlap shown to involve a write becomes a [`Kind::DataRace`]; one
//! where both calls only read keeps its kind and says so.
//!
//! The writes are a property of the calls' code paths, seen in the
//! re-runs; in every other run (observed or intervened) the predicate is
//! evaluated as the overlap on the object it is, so its truth in the runs
//! it was learned from does not change, and neither do its scores or its
//! place in the AC-DAG. Its intervention stays the overlap's: run the two
//! calls one after the other.

use serde::{Deserialize, Serialize};

use super::{Catalog, Condition, Kind, PredId, describe::Names};
use crate::model::{Session, Site};

/// What watched re-runs showed of an overlap predicate's two calls on its
/// object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceEvidence {
    /// The object's canonical name (`events`, `main:make_cell#1.ret`).
    pub object: String,
    /// The first call of the predicate (its key's site) wrote the object
    /// in some re-run; likewise the second (the key's other site).
    pub a_writes: bool,
    pub b_writes: bool,
    /// Re-runs in which both calls ran with the object watched.
    pub runs: u32,
    /// The whole object was watched (a global of at most 8 bytes, or the
    /// one word of a larger global that the executable's code touches
    /// outside its lock calls); else only its first word (a heap object,
    /// whose size is not known).
    pub whole: bool,
}

/// What became of an overlap predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RaceVerdict {
    /// One side writes: now a data race.
    DataRace,
    /// Both only read: an overlap, not a data race.
    ReadOnly,
}

impl Catalog {
    /// The site-pair overlap predicates among `ids`: (id, first call,
    /// second call). Group overlaps are left out: which call of a pool
    /// raced is a different one in every run.
    pub fn site_overlaps(&self, ids: &[PredId]) -> Vec<(PredId, Site, Site)> {
        ids.iter()
            .filter_map(|&id| {
                let p = self.get(id)?;
                if p.key.kind != Kind::Overlap || p.condition != Condition::OverlapSamePointer {
                    return None;
                }
                Some((id, p.key.site()?, p.key.other_site()?))
            })
            .collect()
    }

    /// Rewrites overlap predicate `id` with what watched re-runs showed
    /// (`session`: for the words). None when `id` is not a site-pair
    /// overlap or no re-run saw both calls.
    pub fn decide_race(
        &mut self,
        session: &Session,
        id: PredId,
        e: &RaceEvidence,
    ) -> Option<RaceVerdict> {
        if e.runs == 0 || self.site_overlaps(&[id]).is_empty() {
            return None;
        }
        let names = Names::new(session, &self.classes);
        let p = &mut self.predicates[id.0 as usize];
        let verdict = if e.a_writes || e.b_writes {
            p.key.kind = Kind::DataRace;
            p.condition = Condition::DataRace {
                object: e.object.clone(),
                a_writes: e.a_writes,
                b_writes: e.b_writes,
                runs: e.runs,
            };
            p.description = names.describe(&p.key, &p.condition, None);
            RaceVerdict::DataRace
        } else if e.whole {
            p.description = format!(
                "{}; hardware watchpoints ({} re-run(s)) saw both only read {}: not a data race",
                p.description, e.runs, e.object
            );
            RaceVerdict::ReadOnly
        } else {
            // Only the first word was watched: a write elsewhere in the
            // object would not have been seen.
            p.description = format!(
                "{}; hardware watchpoints ({} re-run(s)) saw neither write the first 8 bytes of {}",
                p.description, e.runs, e.object
            );
            RaceVerdict::ReadOnly
        };
        p.described = names.structured(&p.key, &p.condition);
        self.reindex();
        Some(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        model::{
            Label, Session,
            testing::{call, function, run, thread},
        },
        predicates::{ExtractConfig, PredKey, learn},
    };

    /// Two workers each `update(obj)`; the failing runs are those where the
    /// two updates overlap. The overlap predicate becomes a data race when
    /// one side writes, keeps its kind when both only read, and evaluates
    /// the same on every run either way.
    fn session() -> Session {
        let obj = 0x5555_0000_1000;
        let mk = |id: u32, label: Label, second_at: u64| {
            run(
                id,
                label,
                vec![
                    call(0, 1, 1, 100, Some(300), Some(0)).with_args([obj, 0, 0]),
                    call(0, 2, 1, second_at, Some(second_at + 200), Some(0)).with_args([obj, 0, 0]),
                ],
                1000,
            )
            .with_threads(vec![
                thread(0, "main"),
                thread(1, "first"),
                thread(2, "second"),
            ])
        };
        Session {
            functions: vec![function(0, "update")],
            runs: vec![
                mk(1, Label::Fail, 200),
                mk(2, Label::Fail, 150),
                mk(3, Label::Pass, 400),
                mk(4, Label::Pass, 500),
            ],
        }
    }

    fn overlap(cat: &Catalog) -> PredId {
        let a = Site { func: 0, role: 1, instance: 1 };
        let b = Site { func: 0, role: 2, instance: 1 };
        cat.find(&PredKey::pair(Kind::Overlap, a, b)).expect("the overlap is learned")
    }

    #[test]
    fn an_overlap_where_one_side_writes_is_a_data_race() {
        let s = session();
        let mut cat = learn(&s, &ExtractConfig::default()).unwrap();
        let id = overlap(&cat);
        let before: Vec<bool> = s.runs.iter().map(|r| cat.evaluate(r).holds(id)).collect();
        assert_eq!(before, [true, true, false, false]);
        let e = RaceEvidence {
            object: "events".into(),
            a_writes: false,
            b_writes: true,
            runs: 3,
            whole: true,
        };
        assert_eq!(cat.decide_race(&s, id, &e), Some(RaceVerdict::DataRace));
        let p = cat.get(id).unwrap();
        assert_eq!(p.key.kind, Kind::DataRace);
        assert_eq!(
            p.description,
            "call 1 of update on first and call 1 of update on second run at the same time on the same object, which no passing run shows: a data race on events, which call 1 of update on second writes (hardware watchpoints, 3 re-run(s))"
        );
        assert_eq!(p.described.kind, "data_race");
        assert_eq!(
            p.intervention_text,
            "run call 1 of update on first and call 1 of update on second one after the other"
        );
        // The key's new kind is found; the truth on every run is the same.
        assert_eq!(cat.find(&p.key.clone()), Some(id));
        let after: Vec<bool> = s.runs.iter().map(|r| cat.evaluate(r).holds(id)).collect();
        assert_eq!(after, before);
        // Decided once: a data race is no longer an overlap to decide.
        assert_eq!(cat.decide_race(&s, id, &e), None);
    }

    #[test]
    fn an_overlap_of_two_readers_stays_an_overlap() {
        let s = session();
        let mut cat = learn(&s, &ExtractConfig::default()).unwrap();
        let id = overlap(&cat);
        let none = RaceEvidence {
            object: "events".into(),
            a_writes: false,
            b_writes: false,
            runs: 0,
            whole: true,
        };
        assert_eq!(cat.decide_race(&s, id, &none), None, "no re-run saw both calls");
        let e = RaceEvidence { runs: 2, ..none };
        assert_eq!(cat.decide_race(&s, id, &e), Some(RaceVerdict::ReadOnly));
        let p = cat.get(id).unwrap();
        assert_eq!(p.key.kind, Kind::Overlap);
        assert_eq!(
            p.description,
            "call 1 of update on first and call 1 of update on second run at the same time on the same object, which no passing run shows; hardware watchpoints (2 re-run(s)) saw both only read events: not a data race"
        );
        // A heap object is watched on its first word only: no claim about
        // the rest of it.
        let mut cat = learn(&s, &ExtractConfig::default()).unwrap();
        let heap = RaceEvidence { object: "main:make#1.ret".into(), whole: false, ..e };
        assert_eq!(cat.decide_race(&s, id, &heap), Some(RaceVerdict::ReadOnly));
        assert_eq!(
            cat.get(id).unwrap().description,
            "call 1 of update on first and call 1 of update on second run at the same time on the same object, which no passing run shows; hardware watchpoints (2 re-run(s)) saw neither write the first 8 bytes of main:make#1.ret"
        );
    }
}
