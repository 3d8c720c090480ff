//! Thread classes: the threads of a run grouped by what they are, so that
//! predicates about "the workers of a pool" mean the same thing in every
//! run, whichever worker took which job. A thread's class is its name
//! (the recorder names threads by start routine, or by the name the thread
//! gave itself) without a trailing instance number ("worker-3" and
//! "worker-4" are one class, "worker"); the main thread is always the
//! class "main". A class that had exactly one thread, with the same role,
//! in every learning run is *single*: its calls keep per-call keys
//! (instance k on that role), because instances line up across runs there.

use serde::{Deserialize, Serialize};

use crate::model::{Role, Run};
use crate::util::fxhash::FxMap;

/// Index into [`Classes::names`]; "main" is class 0.
pub type ClassId = u32;

/// The classes of the learning runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classes {
    /// Class names (id = index).
    pub names: Vec<String>,
    /// Roles the class's threads had in the learning runs (sorted).
    pub roles: Vec<Vec<Role>>,
    /// The role of a single class (one thread, always the same role).
    pub single: Vec<Option<Role>>,
}

/// A thread's class name: its name without a trailing instance number and
/// the separator before it ("worker-3", "pool_7"). Digits with no
/// separator are part of the name: a thread named after its start routine
/// `t1` or `thread2` runs a different function from `t2` or `thread1`
/// (the corpus' queue and deadlock programs), and one class for both made
/// their calls group keys, which no call order can be stated on.
pub fn class_name(role: Role, thread_name: &str) -> String {
    if role == 0 {
        return "main".into();
    }
    let digits = thread_name.trim_end_matches(|c: char| c.is_ascii_digit());
    if digits.len() == thread_name.len() || digits.is_empty() {
        return thread_name.to_owned();
    }
    let base = digits.trim_end_matches(['-', '_', '.', '#', ':', ' ']);
    if base.is_empty() || base.len() == digits.len() {
        thread_name.to_owned()
    } else {
        base.to_owned()
    }
}

impl Classes {
    /// The classes of `runs` (roles seen, whether each is single).
    pub fn learn<'a>(runs: impl IntoIterator<Item = &'a Run>) -> Classes {
        let mut c =
            Classes { names: vec!["main".into()], roles: vec![vec![0]], single: vec![Some(0)] };
        let mut multi: Vec<bool> = vec![false];
        for run in runs {
            let mut seen: FxMap<ClassId, u32> = FxMap::default();
            for t in &run.threads {
                let name = class_name(t.role, &t.name);
                let id = match c.names.iter().position(|n| *n == name) {
                    Some(i) => i as ClassId,
                    None => {
                        c.names.push(name);
                        c.roles.push(Vec::new());
                        c.single.push(Some(t.role));
                        multi.push(false);
                        (c.names.len() - 1) as ClassId
                    }
                };
                let i = id as usize;
                if let Err(at) = c.roles[i].binary_search(&t.role) {
                    c.roles[i].insert(at, t.role);
                }
                *seen.entry(id).or_default() += 1;
            }
            for (&id, &n) in &seen {
                if n > 1 {
                    multi[id as usize] = true;
                }
            }
        }
        for (i, s) in c.single.iter_mut().enumerate() {
            if multi[i] || c.roles[i].len() != 1 {
                *s = None;
            }
        }
        c
    }

    pub fn id(&self, name: &str) -> Option<ClassId> {
        self.names.iter().position(|n| n == name).map(|i| i as ClassId)
    }

    pub fn name(&self, class: ClassId) -> &str {
        self.names.get(class as usize).map_or("?", String::as_str)
    }

    /// The role of a single class.
    pub fn single(&self, class: ClassId) -> Option<Role> {
        self.single.get(class as usize).copied().flatten()
    }

    /// The roles of a class in the learning runs.
    pub fn roles(&self, class: ClassId) -> &[Role] {
        self.roles.get(class as usize).map_or(&[], Vec::as_slice)
    }

    /// The class of each role of `run` (threads whose class no learning
    /// run had have none).
    pub(crate) fn of_run(&self, run: &Run) -> FxMap<Role, ClassId> {
        run.threads
            .iter()
            .filter_map(|t| Some((t.role, self.id(&class_name(t.role, &t.name))?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        testing::{run, thread},
    };

    #[test]
    fn instance_numbers_are_not_part_of_a_class() {
        assert_eq!(class_name(3, "worker-3"), "worker");
        assert_eq!(class_name(2, "pool_7"), "pool");
        assert_eq!(class_name(1, "worker"), "worker");
        assert_eq!(class_name(1, "1234"), "1234");
        assert_eq!(class_name(1, "thread1"), "thread1");
        assert_eq!(class_name(2, "t2"), "t2");
        assert_eq!(class_name(0, "anything"), "main");
    }

    #[test]
    fn a_pool_is_one_class_and_a_lone_thread_is_single() {
        let pool = |id| {
            run(id, Label::Pass, vec![], 10).with_threads(vec![
                thread(0, "main"),
                thread(1, "worker"),
                thread(2, "worker"),
                thread(3, "flusher"),
            ])
        };
        let c = Classes::learn(&[pool(1), pool(2)]);
        assert_eq!(c.names, vec!["main", "worker", "flusher"]);
        assert_eq!(c.roles(1), &[1, 2]);
        assert_eq!((c.single(0), c.single(1), c.single(2)), (Some(0), None, Some(3)));
        let r = pool(3);
        let of = c.of_run(&r);
        assert_eq!((of[&1], of[&2], of[&3]), (1, 1, 2));
    }
}
