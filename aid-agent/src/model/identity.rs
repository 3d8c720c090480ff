//! Identity across runs: which thread of one run is "the same thread" as
//! which thread of another, and which address "the same object". Role
//! numbers are creation order across the whole program and addresses change
//! with every run (ASLR, a heap that depends on timing), so neither can be
//! compared between runs; names built from what each run did can. This is
//! the one place those names are made; predicates and the explainers each
//! pick the grain they need.
//!
//! Threads, from the name the recorder gave each (`record/recorder.rs`: its
//! start routine, the name it gave itself, or [`MAIN`] for role 0), at two
//! grains:
//!
//! - a **class** ([`class_name`], [`Classes`]): the name without a trailing
//!   instance number, so the workers of a pool are one class whichever
//!   worker took which job (predicates' groups);
//! - a **role name** ([`RoleNames`]): the name itself, numbered in creation
//!   order when several threads share it (`worker#1`, `worker#2`), so
//!   each thread is matched on its own: the one way aid writes a thread,
//!   in predicates, reports and the explainers alike.
//!
//! Objects: an address is named by its **first appearance**
//! ([`FirstAppearances`]): the first call that passed or returned it, and
//! where ([`Slot`]), until a call frees it ([`frees`]); the same address
//! seen after that is a new object. What a first appearance is called is
//! each caller's: predicates say (function, class, argument)
//! ([`ObjectName`]); the explainers say `role:function#k.argN`, and name a
//! global by its symbol first (`explain/objects.rs`), which is what a
//! global's address also reduces to within one run.

use std::{
    collections::{BTreeMap, HashMap},
    hash::{BuildHasher, RandomState},
};

use serde::{Deserialize, Serialize};

use super::{FuncId, Function, Role, Run, ValueKind, ValueType};

/// The name of role 0, the thread that exec'd the program, in every run.
pub const MAIN: &str = "main";

/// The name of a role the run has no thread record of (its creation
/// record was lost): [`MAIN`] for role 0, else `thread@N` with its role
/// number, which no recorded thread's name (`worker#2`) is mistaken for.
pub fn unrecorded(role: Role) -> String {
    if role == 0 { MAIN.to_owned() } else { format!("thread@{role}") }
}

/// Index into [`Classes::names`]; [`MAIN`] is class 0.
pub type ClassId = u32;

/// Thread classes: the threads of a run grouped by what they are, so that
/// predicates about "the workers of a pool" mean the same thing in every
/// run. A class that had exactly one thread, with the same role, in every
/// learning run is *single*: its calls keep per-call keys (instance k on
/// that role), because instances line up across runs there.
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
/// the separator before it ("worker-3", "pool_7"); role 0 is always
/// [`MAIN`]. Digits with no separator are part of the name: a thread named
/// after its start routine `t1` or `thread2` runs a different function from
/// `t2` or `thread1` (the corpus' queue and deadlock programs), and one
/// class for both made their calls group keys, which no call order can be
/// stated on.
pub fn class_name(role: Role, thread_name: &str) -> String {
    if role == 0 {
        return MAIN.into();
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
            Classes { names: vec![MAIN.into()], roles: vec![vec![0]], single: vec![Some(0)] };
        let mut multi: Vec<bool> = vec![false];
        for run in runs {
            // Threads of each class in this run (id = index).
            let mut seen: Vec<u32> = vec![0; c.names.len()];
            for t in &run.threads {
                let name = class_name(t.role, &t.name);
                let id = match c.names.iter().position(|n| *n == name) {
                    Some(i) => i as ClassId,
                    None => {
                        c.names.push(name);
                        c.roles.push(Vec::new());
                        c.single.push(Some(t.role));
                        multi.push(false);
                        seen.push(0);
                        (c.names.len() - 1) as ClassId
                    }
                };
                let i = id as usize;
                if let Err(at) = c.roles[i].binary_search(&t.role) {
                    c.roles[i].insert(at, t.role);
                }
                seen[i] += 1;
            }
            for (i, &n) in seen.iter().enumerate() {
                if n > 1 {
                    multi[i] = true;
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
    /// run had have none), in the map the caller keeps.
    pub fn of_run<M: FromIterator<(Role, ClassId)>>(&self, run: &Run) -> M {
        run.threads
            .iter()
            .filter_map(|t| Some((t.role, self.id(&class_name(t.role, &t.name))?)))
            .collect()
    }
}

/// The role name of every role of a run or a session: the thread's name,
/// numbered in creation order (`worker#1`, `worker#2`) when several roles
/// share it. This is the one notation for a thread in everything aid
/// prints (predicates, reports, explainers, hang graphs, noise plans);
/// `worker#2` is always the second `worker`, never role 2. Predicates and
/// reports name the session's roles ([`RoleNames::of_runs`]); the
/// explainers and a hang's wait-for graph, which see one run, that run's
/// ([`RoleNames::of`]): the two agree whenever the runs had the same
/// threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleNames {
    names: BTreeMap<Role, String>,
}

impl RoleNames {
    /// Names for the given (role, thread name) pairs; a role given twice
    /// keeps its first name.
    pub fn new<'a>(threads: impl IntoIterator<Item = (Role, &'a str)>) -> RoleNames {
        let mut by_role: BTreeMap<Role, &str> = BTreeMap::new();
        for (role, name) in threads {
            by_role.entry(role).or_insert(name);
        }
        let mut count: BTreeMap<&str, u32> = BTreeMap::new();
        for name in by_role.values() {
            *count.entry(name).or_default() += 1;
        }
        let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
        let mut names = BTreeMap::new();
        for (role, name) in by_role {
            let n = seen.entry(name).or_default();
            *n += 1;
            let key = if count[name] == 1 { name.to_owned() } else { format!("{name}#{n}") };
            names.insert(role, key);
        }
        RoleNames { names }
    }

    /// The names of one run's roles.
    pub fn of(run: &Run) -> RoleNames {
        RoleNames::of_runs([run])
    }

    /// The names of the roles of several runs (a session's): a role keeps
    /// the name of the first run that has it, and is numbered among every
    /// role of that name in any of the runs, so that one name means one
    /// role in all the runs.
    pub fn of_runs<'a>(runs: impl IntoIterator<Item = &'a Run>) -> RoleNames {
        let runs: Vec<&Run> = runs.into_iter().collect();
        let threads = runs.iter().flat_map(|r| r.threads.iter().map(|t| (t.role, t.name.as_str())));
        let mut names = RoleNames::new(threads);
        // Calls on a role the thread list does not know (a lost creation
        // record): named by number, which is the best that can be done.
        for c in runs.iter().flat_map(|r| &r.calls) {
            names.names.entry(c.role).or_insert_with(|| unrecorded(c.role));
        }
        names
    }

    /// A role's name, [`unrecorded`] for a role none of the runs knew.
    pub fn label(&self, role: Role) -> String {
        self.names.get(&role).cloned().unwrap_or_else(|| unrecorded(role))
    }

    pub fn name(&self, role: Role) -> &str {
        self.names.get(&role).map_or("?", String::as_str)
    }

    /// The role that has `name` in this run.
    pub fn role(&self, name: &str) -> Option<Role> {
        self.names.iter().find(|(_, n)| n.as_str() == name).map(|(r, _)| *r)
    }

    pub fn iter(&self) -> impl Iterator<Item = (Role, &str)> {
        self.names.iter().map(|(r, n)| (*r, n.as_str()))
    }
}

/// Where in a call an address was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Slot {
    Arg(u8),
    Ret,
}

/// Predicates' name of an object across runs: where it first appeared
/// ("the object first passed as argument 1 of dict_init on main").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectName {
    pub func: FuncId,
    pub class: ClassId,
    /// 0-based argument position.
    pub arg: u8,
}

/// The objects of one run as its sightings of addresses name them, fed in
/// the order the run made them: each address has the name given at its
/// first sighting, until it is freed.
#[derive(Clone, Debug)]
pub struct FirstAppearances<N, S = RandomState> {
    live: HashMap<i64, N, S>,
}

impl<N, S: BuildHasher + Default> Default for FirstAppearances<N, S> {
    fn default() -> Self {
        FirstAppearances { live: HashMap::default() }
    }
}

impl<N, S: BuildHasher + Default> FirstAppearances<N, S> {
    /// Room for `n` objects before the table grows.
    pub fn with_capacity(n: usize) -> Self {
        FirstAppearances { live: HashMap::with_capacity_and_hasher(n, S::default()) }
    }
}

impl<N, S: BuildHasher> FirstAppearances<N, S> {
    /// The name of the object at `address`; `first` names it when this is
    /// its first sighting since it was last freed.
    pub fn see(&mut self, address: i64, first: impl FnOnce() -> N) -> &N {
        self.live.entry(address).or_insert_with(first)
    }

    /// The object at `address` ends: the address seen again is a new one.
    pub fn free(&mut self, address: i64) {
        self.live.remove(&address);
    }

    /// Every live object's name, by address.
    pub fn into_names(self) -> HashMap<i64, N, S> {
        self.live
    }
}

/// The lowest and highest user-space addresses a value of unknown type is
/// believed to be (below `mmap_min_addr` is a small integer): the
/// explainers' bound ([`is_pointer`]).
const USER_LOW: i64 = 0x1_0000;
pub(crate) const USER_HIGH: i64 = 0x7fff_ffff_ffff;

/// The explainers' rule: `value`, of type `ty`, is taken for the address of
/// an object.
pub fn is_pointer(ty: ValueType, value: i64) -> bool {
    match ty.kind {
        ValueKind::Pointer => value != 0,
        ValueKind::Unknown => (USER_LOW..=USER_HIGH).contains(&value),
        _ => false,
    }
}

/// Predicates' rule: looks like a user-space address: above the first page
/// (so not NULL, a small integer or a file descriptor) and below the 47-bit
/// canonical limit. (Its lower bound is below [`is_pointer`]'s for values
/// of unknown type.)
pub fn looks_like_address(v: i64) -> bool {
    (0x1000..0x0000_8000_0000_0000).contains(&v)
}

/// Functions that end the life of the object passed as their first argument.
pub fn frees(f: &Function) -> bool {
    matches!(f.name.as_str(), "free" | "cfree" | "__libc_free" | "realloc")
        || f.name.starts_with("operator delete")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label,
        testing::{call, run, thread},
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
        let of: HashMap<Role, ClassId> = c.of_run(&r);
        assert_eq!((of[&1], of[&2], of[&3]), (1, 1, 2));
    }

    fn named(names: &[&str]) -> Run {
        let threads = names.iter().enumerate().map(|(i, n)| thread(i as Role, n)).collect();
        run(1, Label::Pass, vec![], 0).with_threads(threads)
    }

    #[test]
    fn unique_names_stay_plain_and_classes_are_numbered_in_creation_order() {
        let names = RoleNames::of(&named(&["main", "worker", "logger", "worker"]));
        let all: Vec<(Role, &str)> = names.iter().collect();
        assert_eq!(all, vec![(0, "main"), (1, "worker#1"), (2, "logger"), (3, "worker#2")]);
        assert_eq!(names.role("worker#2"), Some(3));
    }

    /// A session's names number every role of a name in any run, so a run
    /// that lacks the first worker still calls the second `worker#2`.
    #[test]
    fn a_session_names_each_role_once_for_all_its_runs() {
        let runs = [named(&["main", "worker"]), named(&["main", "worker", "worker"])];
        // On its own the first run has one worker, plainly named...
        assert_eq!(RoleNames::of(&runs[0]).label(1), "worker");
        // ...in the session it is the first of two.
        let names = RoleNames::of_runs(&runs);
        assert_eq!((names.label(1), names.label(2)), ("worker#1".into(), "worker#2".into()));
        assert_eq!(names.role("worker#2"), Some(2));
    }

    /// A role with calls but no thread record is `thread@N` in the
    /// explainers' names and in the run's display names alike.
    #[test]
    fn a_role_without_a_thread_record_is_named_by_its_number_everywhere() {
        let calls = vec![call(0, 7, 1, 10, Some(20), Some(0))];
        let r = run(1, Label::Pass, calls, 30).with_threads(vec![thread(0, "main")]);
        assert_eq!(RoleNames::of(&r).name(7), "thread@7");
        assert_eq!(RoleNames::of(&r).label(7), "thread@7");
        assert_eq!(RoleNames::new([]).label(0), "main");
        assert_eq!(RoleNames::new([]).label(9), "thread@9");
        assert_eq!(unrecorded(0), MAIN);
    }

    #[test]
    fn unknown_types_take_only_user_space_addresses_for_pointers() {
        assert!(!is_pointer(ValueType::UNKNOWN, 2));
        assert!(!is_pointer(ValueType::UNKNOWN, -1));
        assert!(is_pointer(ValueType::UNKNOWN, 0x7ffd_1234_5678));
        assert!(!is_pointer(ValueType { kind: ValueKind::Signed, size: 8 }, 0x7ffd_1234_5678));
    }
}
