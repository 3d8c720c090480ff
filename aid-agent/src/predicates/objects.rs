//! Objects that mean the same thing across runs. A pointer argument's value
//! changes with every run (ASLR, allocation order), so "the same object" is
//! named by where it first appeared in the run: the first call, in entry
//! order, that received it, by function, thread class and argument
//! position ("the object first passed as argument 1 of dict_init on
//! main"). A table created once by `dict_init` and then passed to every
//! lookup has the same name in every run, whichever thread touched it
//! first after that. (The explainers name globals by module + symbol +
//! offset; this layer names every object by first appearance, which is
//! what a global's address also reduces to within a run: see
//! docs/predicates.md.)

use serde::{Deserialize, Serialize};

use super::{
    classes::ClassId,
    index::{RunIndex, pointers},
};
use crate::model::FuncId;
use crate::util::fxhash::FxMap;

/// A pointer argument's name across runs: where it first appeared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectName {
    pub func: FuncId,
    pub class: ClassId,
    /// 0-based argument position.
    pub arg: u8,
}

/// The canonical names of every pointer argument of a run's calls.
pub(crate) fn names(idx: &RunIndex<'_>, masks: &[u8]) -> FxMap<i64, ObjectName> {
    let mut out: FxMap<i64, ObjectName> = FxMap::default();
    for c in &idx.run.calls {
        let Some(&class) = idx.class.get(&c.role) else { continue };
        let mask = masks.get(c.func as usize).copied().unwrap_or(0);
        for p in pointers(c, mask) {
            out.entry(p).or_insert_with(|| {
                let arg = (0..3).find(|&i| c.args[i] == p).unwrap_or(0) as u8;
                ObjectName { func: c.func, class, arg }
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        model::{
            Label,
            testing::{call, run, thread},
        },
        predicates::classes::Classes,
    };

    /// Two runs place the table at different addresses and touch it from
    /// different workers first; its name is the same.
    #[test]
    fn an_object_is_named_by_its_first_appearance() {
        let r = |table: i64, first_worker: u32| {
            run(
                1,
                Label::Pass,
                vec![
                    call(0, 0, 1, 10, Some(20), None).with_args([table, 0, 0]),
                    call(1, first_worker, 1, 30, Some(40), None).with_args([0, table, 0]),
                    call(1, 3 - first_worker, 1, 50, Some(60), None).with_args([0, table, 0]),
                ],
                100,
            )
            .with_threads(vec![
                thread(0, "main"),
                thread(1, "worker"),
                thread(2, "worker"),
            ])
        };
        let (a, b) = (r(0x5555_0000_1000, 1), r(0x7f00_0000_2000, 2));
        let classes = Classes::learn([&a, &b]);
        let masks = [0b111, 0b111];
        let name = |run: &crate::model::Run, p| {
            let idx = RunIndex::with_groups(run, |_| true, &classes, &Default::default());
            names(&idx, &masks)[&p]
        };
        let expected = ObjectName { func: 0, class: 0, arg: 0 };
        assert_eq!(name(&a, 0x5555_0000_1000), expected);
        assert_eq!(name(&b, 0x7f00_0000_2000), expected);
    }
}
