//! Thread roles named so that the same thread has the same name in every
//! run: the role class is the thread's name (its start routine, the name it
//! gave itself, or `main`), and a class with several threads numbers them
//! in creation order (`worker#1`, `worker#2`). Role numbers alone are
//! creation order across the whole program, which shifts as soon as one
//! thread is created a little earlier; names by class do not.

use std::collections::BTreeMap;

use crate::model::{Role, Run};

/// The name of every role of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleNames {
    names: BTreeMap<Role, String>,
}

impl RoleNames {
    pub fn of(run: &Run) -> RoleNames {
        let mut threads: Vec<(Role, &str)> =
            run.threads.iter().map(|t| (t.role, t.name.as_str())).collect();
        threads.sort_unstable();
        let mut count: BTreeMap<&str, u32> = BTreeMap::new();
        for (_, name) in &threads {
            *count.entry(name).or_default() += 1;
        }
        let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
        let mut names = BTreeMap::new();
        for (role, name) in threads {
            let n = seen.entry(name).or_default();
            *n += 1;
            let key = if count[name] == 1 { name.to_owned() } else { format!("{name}#{n}") };
            names.insert(role, key);
        }
        // Calls on a role the thread list does not know (a lost creation
        // record): named by number, which is the best that can be done.
        for c in &run.calls {
            names.entry(c.role).or_insert_with(|| format!("thread@{}", c.role));
        }
        RoleNames { names }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Label, Outcome, Thread};

    fn run(names: &[&str]) -> Run {
        Run {
            id: 1,
            label: Label::Pass,
            outcome: Outcome::default(),
            lost_events: 0,
            lost_thread_records: 0,
            complete: true,
            threads: names
                .iter()
                .enumerate()
                .map(|(i, n)| Thread {
                    role: i as Role,
                    tid: 100 + i as u32,
                    name: (*n).into(),
                    parent: None,
                    created_ns: 0,
                })
                .collect(),
            calls: vec![],
            end_ns: 0,
            interventions: vec![],
            noise: vec![],
            pauses: vec![],
        }
    }

    #[test]
    fn unique_names_stay_plain_and_classes_are_numbered_in_creation_order() {
        let names = RoleNames::of(&run(&["main", "worker", "logger", "worker"]));
        let all: Vec<(Role, &str)> = names.iter().collect();
        assert_eq!(all, vec![(0, "main"), (1, "worker#1"), (2, "logger"), (3, "worker#2")]);
        assert_eq!(names.role("worker#2"), Some(3));
    }
}
