//! What a hung run was waiting for: its wait-for graph, saved with the
//! run (`runs.jsonl`, `hang`). Every thread of the target waited for
//! another one (a lock, a join, a condition, a futex) with no progress
//! for longer than `--hang-after`; each thread says what it waited for,
//! who held it, and which locks it held itself. Addresses are the
//! target's, in hex: they mean something within the run only.

use serde::{Deserialize, Serialize};

use super::Role;

/// The wait-for graph of a hung run, as the run was ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitGraph {
    /// How long every thread had been waiting with no progress when aid
    /// ended the run.
    pub waited_ns: u64,
    /// Every live thread, by tid.
    pub threads: Vec<Waiter>,
    /// A cycle of waits, as tids: each waits for a lock the next holds,
    /// or for the next to exit, and the last for the first (empty when
    /// the waits form no cycle: a lost wake-up, a join on a thread that
    /// waits for a condition nobody signals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle: Vec<u32>,
}

/// One thread of a hung run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    pub tid: u32,
    /// Its role in the run (None: a thread the recorder never saw).
    pub role: Option<Role>,
    /// The role's name in the run ("main", "thread1#1").
    pub name: String,
    pub waits: Wait,
    /// Locks it held: taken (aid's probe saw the lock call, and the thread
    /// went on past it) and not released, or named its owner by the lock
    /// itself; oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// The innermost traced call it was in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_call: Option<String>,
}

/// What a thread of a hung run waited for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Wait {
    /// A mutex (`addr`), held by thread `holder` when known.
    Lock {
        addr: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        holder: Option<u32>,
        /// With no live holder: the thread that took it last and exited
        /// without releasing it, as the run's lock and unlock calls show.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        left_by: Option<String>,
    },
    /// Thread `thread` to exit (`pthread_join`).
    Join { thread: u32 },
    /// A condition variable whose futex is at `addr`.
    Condition { addr: String },
    /// Another futex wait (a semaphore, a barrier, a runtime's own lock).
    Futex { addr: String },
}

impl Wait {
    /// The thread this wait is for, when one is known.
    pub fn on_thread(&self) -> Option<u32> {
        match self {
            Wait::Lock { holder, .. } => *holder,
            Wait::Join { thread } => Some(*thread),
            Wait::Condition { .. } | Wait::Futex { .. } => None,
        }
    }
}

impl WaitGraph {
    fn name(&self, tid: u32) -> String {
        self.threads
            .iter()
            .find(|w| w.tid == tid)
            .map_or_else(|| format!("thread {tid}"), |w| w.name.clone())
    }

    /// The graph in words, one clause per thread: "thread1 holds lock
    /// 0x…060 and waits for lock 0x…0a0, held by thread2; …".
    pub fn describe(&self) -> String {
        let clauses: Vec<String> = self
            .threads
            .iter()
            .map(|w| {
                let holds = if w.holds.is_empty() {
                    String::new()
                } else {
                    format!(" holds lock {} and", w.holds.join(", "))
                };
                let waits = match &w.waits {
                    Wait::Lock { addr, holder: Some(h), .. } => {
                        format!("waits for lock {addr}, held by {}", self.name(*h))
                    }
                    Wait::Lock { addr, holder: None, left_by: Some(t) } => format!(
                        "waits for lock {addr}, which {t} took and never released before it exited"
                    ),
                    Wait::Lock { addr, holder: None, left_by: None } => {
                        format!("waits for lock {addr}")
                    }
                    Wait::Join { thread } => format!("waits for {} to exit", self.name(*thread)),
                    Wait::Condition { addr } => format!("waits on a condition ({addr})"),
                    Wait::Futex { addr } => format!("waits on futex {addr}"),
                };
                let inside = w.in_call.as_ref().map(|c| format!(" (in {c})")).unwrap_or_default();
                format!("{}{inside}{holds} {waits}", w.name)
            })
            .collect();
        let cycle = if self.cycle.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = self.cycle.iter().map(|&t| self.name(t)).collect();
            format!("; a cycle: {} wait for each other", names.join(" and "))
        };
        format!("{}{cycle}", clauses.join("; "))
    }
}
