//! How predicates name objects across runs: by first appearance
//! ([`FirstAppearances`]), as (function, thread class, argument position)
//! ([`ObjectName`]): "the object first passed as argument 1 of dict_init on
//! main". A table created once by `dict_init` and then passed to every
//! lookup has the same name in every run, whichever thread touched it
//! first after that. Only arguments are sightings here, in entry order, and
//! nothing is freed; the explainers also name globals by symbol and see
//! returned pointers and frees (`explain/objects.rs`; see
//! docs/predicates.md).

use super::index::{RunIndex, pointers};
use crate::model::identity::{FirstAppearances, ObjectName};
use crate::util::fxhash::FxMap;

/// The most objects the name table has room for before it grows.
const NAMES_ROOM: usize = 1 << 16;

/// The canonical names of every pointer argument of a run's calls.
pub(crate) fn names(idx: &RunIndex<'_>, masks: &[u8]) -> FxMap<i64, ObjectName> {
    // A run passes about one new object per call or fewer: sized for
    // that (up to a bound), the table is not rebuilt as it grows.
    let mut objects = FirstAppearances::with_capacity(idx.run.calls.len().min(NAMES_ROOM));
    for c in &idx.run.calls {
        let Some(&class) = idx.class.get(&c.role) else { continue };
        let mask = masks.get(c.func as usize).copied().unwrap_or(0);
        for p in pointers(c, mask) {
            objects.see(p, || {
                let arg = (0..3).find(|&i| c.args[i] == p).unwrap_or(0) as u8;
                ObjectName { func: c.func, class, arg }
            });
        }
    }
    objects.into_names()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        identity::Classes,
        testing::{call, run, thread},
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
