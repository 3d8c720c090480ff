//! Hangs, as `/proc` shows them: every thread of a process waiting for
//! another thread of it (a futex wait with no timeout: a mutex, a
//! condition variable, a join, a semaphore), and none making progress
//! (CPU time and context switches unchanged) for longer than a bound —
//! or, sooner, for [`CYCLE_CONFIRM`] when the waits form a cycle that can
//! never end by itself: each thread waiting for a mutex the next one owns
//! (the mutex says so) or for the next one to exit, the last for the
//! first. Such a cycle is a deadlock for good; waiting out the whole bound
//! would only cost time (a session of a program that deadlocks under
//! noise makes dozens of such runs).
//!
//! A thread that sleeps (`nanosleep`), waits for I/O or for a child, or
//! waits on a futex with a timeout will go on by itself, and one that
//! runs or is stopped (by aid's ptrace holds, or a debugger) is not
//! waiting for the process: any such thread means no hang. What each
//! waiting thread waits on is read with it — the futex's address and the
//! words there (`pthread_mutex_t` keeps its owner's tid at offset 8; a
//! join waits on the exiting thread's tid) — for the wait-for graph
//! ([`crate::model::WaitGraph`], built by the recorder).

use std::time::{Duration, Instant};

use crate::sys::poll;

/// One thread as `/proc` showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadLook {
    pub tid: u32,
    /// The `stat` state letter: `R` running, `S` sleeping, `D` in
    /// uninterruptible sleep, `t` stopped by a tracer, `Z` a zombie...
    pub state: char,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Voluntary and involuntary context switches.
    pub switches: u64,
    /// The futex it waits on with no timeout, if it does.
    pub waits: Option<FutexWait>,
}

/// A futex wait with no timeout, and what its memory held when seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FutexWait {
    pub addr: u64,
    /// The 32-bit word at `addr` (a mutex's lock word, the tid a join
    /// waits on).
    pub word: Option<u32>,
    /// The 32-bit word at `addr + 8`: a `pthread_mutex_t`'s owner tid.
    pub owner: Option<u32>,
}

impl ThreadLook {
    /// Gone, or going: it waits for nothing and runs nothing.
    fn gone(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// A process all of whose threads waited for another of its threads, with
/// no progress, for `waited`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hung {
    pub waited: Duration,
    /// Its live threads, as seen last.
    pub threads: Vec<ThreadLook>,
}

/// A cycle of waits (see the module's doc) is a hang once it has lasted
/// this long with no progress (or the bound, when that is shorter): two
/// looks apart at least.
pub const CYCLE_CONFIRM: Duration = Duration::from_millis(100);

/// `futex(2)` operations that wait (with the private and clock flags
/// masked off): FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET,
/// FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2.
const FUTEX_WAITS: [u64; 5] = [0, 6, 9, 11, 13];
const FUTEX_CMD_MASK: u64 = 0x7f;

/// What `/proc/PID/task/TID/syscall` says: the futex address when the
/// thread is blocked in a futex wait without a timeout (the timeout is
/// the fourth argument).
fn futex_wait_of(syscall: &str) -> Option<u64> {
    let mut words = syscall.split_whitespace();
    let nr: i64 = words.next()?.parse().ok()?;
    if nr != libc::SYS_futex {
        return None;
    }
    let hex = |w: Option<&str>| u64::from_str_radix(w?.trim_start_matches("0x"), 16).ok();
    let addr = hex(words.next())?;
    let op = hex(words.next())?;
    let _value = words.next();
    let timeout = hex(words.next())?;
    (FUTEX_WAITS.contains(&(op & FUTEX_CMD_MASK)) && timeout == 0).then_some(addr)
}

/// The state letter and utime + stime from a `stat` line (the name, in
/// parentheses, may hold spaces and parentheses: fields are counted after
/// the last `)`).
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is the first after the name; utime and stime are
    // fields 14 and 15.
    let state = fields.first()?.chars().next()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((state, utime + stime))
}

/// Voluntary + involuntary context switches from a `status` file.
fn parse_switches(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Reads 4 bytes of `pid`'s memory at `addr`.
fn read_u32(pid: u32, addr: u64) -> Option<u32> {
    use std::os::unix::fs::FileExt as _;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut b = [0u8; 4];
    mem.read_exact_at(&mut b, addr).ok()?;
    Some(u32::from_ne_bytes(b))
}

/// Every thread of `pid` as `/proc` shows it now; `deep`: with what a
/// futex-waiting thread waits on (its syscall and status files, and the
/// futex's memory), which only matters when no thread runs. None when the
/// process is gone.
fn look(pid: u32, deep: bool) -> Option<Vec<ThreadLook>> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let path = entry.path();
        let Some((state, cpu_ticks)) =
            std::fs::read_to_string(path.join("stat")).ok().as_deref().and_then(parse_stat)
        else {
            continue;
        };
        let mut t = ThreadLook { tid, state, cpu_ticks, switches: 0, waits: None };
        if deep && matches!(state, 'S' | 'D') {
            t.switches =
                std::fs::read_to_string(path.join("status")).map_or(0, |s| parse_switches(&s));
            t.waits = std::fs::read_to_string(path.join("syscall"))
                .ok()
                .as_deref()
                .and_then(futex_wait_of)
                .map(|addr| FutexWait {
                    addr,
                    word: read_u32(pid, addr),
                    owner: read_u32(pid, addr.wrapping_add(8)),
                });
        }
        out.push(t);
    }
    out.sort_by_key(|t| t.tid);
    Some(out)
}

/// The thread a waiting thread waits for, as the futex's memory says: the
/// owner of a locked mutex (word 1 or 2, its owner's tid at offset 8), or
/// the thread whose tid the word holds (a join waits for the kernel to
/// clear the joined thread's tid). None when the wait names no thread of
/// the process.
fn waits_for(t: &ThreadLook, tids: &[u32]) -> Option<u32> {
    let w = t.waits?;
    let other = |x: u32| x != t.tid && tids.contains(&x);
    match (w.word, w.owner) {
        (Some(x), _) if other(x) => Some(x),
        (Some(1 | 2), Some(o)) if other(o) => Some(o),
        _ => None,
    }
}

/// Whether the waits form a cycle (each thread waiting for the next).
fn wait_cycle(threads: &[ThreadLook]) -> bool {
    let tids: Vec<u32> = threads.iter().filter(|t| !t.gone()).map(|t| t.tid).collect();
    let next = |tid: u32| threads.iter().find(|t| t.tid == tid).and_then(|t| waits_for(t, &tids));
    tids.iter().any(|&start| {
        let mut at = start;
        for _ in 0..tids.len() {
            match next(at) {
                Some(n) if n == start => return true,
                Some(n) => at = n,
                None => return false,
            }
        }
        false
    })
}

/// Whether every live thread waits for another (and some thread is
/// live).
fn all_waiting(threads: &[ThreadLook]) -> bool {
    let mut live = threads.iter().filter(|t| !t.gone()).peekable();
    live.peek().is_some() && live.all(|t| t.waits.is_some())
}

/// What progress looks like: each live thread's CPU time and context
/// switches.
fn progress(threads: &[ThreadLook]) -> Progress {
    threads.iter().filter(|t| !t.gone()).map(|t| (t.tid, t.cpu_ticks, t.switches)).collect()
}

/// Each thread's (tid, CPU ticks, context switches) at one look.
pub type Progress = Vec<(u32, u64, u64)>;

/// Watches one process for a hang: looked at every [`poll::HANG_LOOK`]
/// (or a tenth of the bound, when that is shorter), cheaply while some
/// thread runs.
#[derive(Debug)]
pub struct HangCheck {
    bound: Duration,
    /// How long a cycle of waits must last: [`CYCLE_CONFIRM`], at most
    /// the bound.
    confirm: Duration,
    every: Duration,
    next: Option<Instant>,
    /// Since when every thread has waited with no progress, and the
    /// progress then.
    since: Option<(Instant, Progress)>,
}

impl HangCheck {
    /// A hang is every thread waiting, with no progress, for longer than
    /// `bound`.
    pub fn new(bound: Duration) -> HangCheck {
        let every = (bound / 10).clamp(Duration::from_millis(1), poll::HANG_LOOK);
        HangCheck { bound, confirm: CYCLE_CONFIRM.min(bound), every, next: None, since: None }
    }

    /// Looks at `pid` when it is time (the first look one interval after
    /// the first call): the hang, once it has lasted longer than the
    /// bound.
    pub fn look(&mut self, pid: u32) -> Option<Hung> {
        let now = Instant::now();
        let next = *self.next.get_or_insert(now + self.every);
        if now < next {
            return None;
        }
        self.next = Some(now + self.every);
        self.judge(now, look(pid, false).filter(|t| all_blocked(t)).and_then(|_| look(pid, true)))
    }

    /// One look's verdict (`threads`: None when some thread runs).
    fn judge(&mut self, now: Instant, threads: Option<Vec<ThreadLook>>) -> Option<Hung> {
        let Some(threads) = threads.filter(|t| all_waiting(t)) else {
            self.since = None;
            return None;
        };
        let seen = progress(&threads);
        match &self.since {
            Some((start, before)) if *before == seen => {
                let waited = now.duration_since(*start);
                let over = waited > self.bound || (waited >= self.confirm && wait_cycle(&threads));
                over.then(|| Hung {
                    waited,
                    threads: threads.into_iter().filter(|t| !t.gone()).collect(),
                })
            }
            _ => {
                self.since = Some((now, seen));
                None
            }
        }
    }
}

/// When every live thread of `pid` but those in `except` (threads the
/// agent holds) waits in a futex with no timeout, each one's progress
/// (tid, CPU ticks, context switches): none of them goes on before one
/// of `except` does, short of a signal. Two such looks alike some time
/// apart say that none ran in between. None when one of them runs, is
/// runnable, sleeps with a deadline or waits for anything else, or when
/// there is none.
pub fn waiting_but(pid: u32, except: &[u32]) -> Option<Progress> {
    waiting_after(pid, look(pid, false)?, except)
}

/// [`waiting_but`] from a cheap look already taken (`first`).
fn waiting_after(pid: u32, first: Vec<ThreadLook>, except: &[u32]) -> Option<Progress> {
    let others = |threads: Vec<ThreadLook>| -> Vec<ThreadLook> {
        threads.into_iter().filter(|t| !except.contains(&t.tid)).collect()
    };
    if !all_blocked(&others(first)) {
        return None;
    }
    let threads = others(look(pid, true)?);
    all_waiting(&threads).then(|| progress(&threads))
}

/// When no live thread of `pid` but those in `except` is left (an empty
/// progress), or each waits in a futex with no timeout
/// ([`waiting_but`]): nothing but one of `except` can make them go on.
pub fn done_but(pid: u32, except: &[u32]) -> Option<Progress> {
    let threads = look(pid, false)?;
    if threads.iter().all(|t| t.gone() || except.contains(&t.tid)) {
        return Some(Vec::new());
    }
    waiting_after(pid, threads, except)
}

/// The cheap first look: every live thread blocked (`S` or `D`); only then
/// is each one's wait read.
fn all_blocked(threads: &[ThreadLook]) -> bool {
    let mut live = threads.iter().filter(|t| !t.gone()).peekable();
    live.peek().is_some() && live.all(|t| matches!(t.state, 'S' | 'D'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futex_waits_without_a_timeout_are_read_from_syscall() {
        let nr = libc::SYS_futex;
        // pthread_mutex_lock: FUTEX_WAIT | FUTEX_PRIVATE_FLAG, no timeout.
        let lock = format!("{nr} 0x5555e000 0x80 0x2 0x0 0x0 0x0 0x7ffd1000 0x7f001234");
        assert_eq!(futex_wait_of(&lock), Some(0x5555_e000));
        // pthread_join: FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME.
        let join = format!("{nr} 0x7f0000a910 0x189 0x4d2 0x0 0x0 0xffffffff 0x7ffd 0x7f00");
        assert_eq!(futex_wait_of(&join), Some(0x7f_0000_a910));
        // A timed wait goes on by itself.
        let timed = format!("{nr} 0x5555e000 0x89 0x0 0x7ffd2000 0x0 0xffffffff 0x7ffd 0x7f00");
        assert_eq!(futex_wait_of(&timed), None);
        // A wake is no wait; nanosleep is no futex.
        assert_eq!(futex_wait_of(&format!("{nr} 0x5555e000 0x81 0x1 0x0 0x0 0x0 0x1 0x2")), None);
        let sleep = format!("{} 0x7ffd3000 0x0 0x0 0x0 0x0 0x0 0x1 0x2", libc::SYS_nanosleep);
        assert_eq!(futex_wait_of(&sleep), None);
        assert_eq!(futex_wait_of("running"), None);
        assert_eq!(futex_wait_of("-1 0x7ffd 0x7f00"), None);
    }

    #[test]
    fn stat_and_status_give_state_cpu_and_switches() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 2 0 123";
        assert_eq!(parse_stat(stat), Some(('S', 10)));
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_switches(status), 15);
    }

    fn waiting(tid: u32, cpu: u64, switches: u64) -> ThreadLook {
        let waits = Some(FutexWait { addr: 0x1000, word: Some(2), owner: Some(7) });
        ThreadLook { tid, state: 'S', cpu_ticks: cpu, switches, waits }
    }

    /// The rule: every live thread waiting, with nothing changed, for
    /// longer than the bound; any progress, or a thread that is not
    /// waiting, starts it again.
    #[test]
    fn a_hang_is_every_thread_waiting_without_progress_past_the_bound() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut w = HangCheck::new(Duration::from_millis(100));
        let all = |switches: u64| Some(vec![waiting(1, 5, switches), waiting(2, 1, 4)]);
        assert_eq!(w.judge(ms(0), all(9)), None);
        assert_eq!(w.judge(ms(60), all(9)), None);
        // Progress: the bound counts again from here.
        assert_eq!(w.judge(ms(90), all(10)), None);
        assert_eq!(w.judge(ms(180), all(10)), None);
        let hung = w.judge(ms(200), all(10)).expect("hung");
        assert_eq!(hung.waited, Duration::from_millis(110));
        assert_eq!(hung.threads.len(), 2);

        // A sleeping thread (no futex wait) is no hang, however long.
        let mut w = HangCheck::new(Duration::from_millis(100));
        let mut sleeper = waiting(2, 1, 4);
        sleeper.waits = None;
        let some = || Some(vec![waiting(1, 5, 9), sleeper.clone()]);
        assert_eq!(w.judge(ms(0), some()), None);
        assert_eq!(w.judge(ms(500), some()), None);
        // Nor is a thread that runs (the cheap look found one: None).
        assert_eq!(w.judge(ms(900), None), None);

        // A zombie (a thread that ended, its main thread gone first) is
        // left out; a process with only zombies is not hung.
        let mut w = HangCheck::new(Duration::from_millis(100));
        let mut zombie = waiting(3, 0, 0);
        zombie.state = 'Z';
        zombie.waits = None;
        let z = || Some(vec![waiting(1, 5, 9), zombie.clone()]);
        assert_eq!(w.judge(ms(0), z()), None);
        assert_eq!(w.judge(ms(150), z()).map(|h| h.threads.len()), Some(1));
        assert!(!all_waiting(&[zombie.clone()]));
    }

    /// Two threads each waiting for a mutex the other owns (and main
    /// joining the first) can never go on: a hang after
    /// [`CYCLE_CONFIRM`], not the whole bound. A wait that names no
    /// thread (a condition) breaks the cycle: then only the bound counts.
    #[test]
    fn a_cycle_of_waits_is_a_hang_before_the_bound() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let lock = |tid: u32, owner: u32| ThreadLook {
            waits: Some(FutexWait {
                addr: 0x1000 + u64::from(tid),
                word: Some(2),
                owner: Some(owner),
            }),
            ..waiting(tid, 1, 1)
        };
        let join = |tid: u32, joined: u32| ThreadLook {
            waits: Some(FutexWait { addr: 0x7f00, word: Some(joined), owner: Some(0) }),
            ..waiting(tid, 1, 1)
        };
        let deadlock = || Some(vec![join(10, 11), lock(11, 12), lock(12, 11)]);
        let mut w = HangCheck::new(Duration::from_secs(1));
        assert_eq!(w.judge(ms(0), deadlock()), None);
        assert_eq!(w.judge(ms(60), deadlock()), None);
        let hung = w.judge(ms(120), deadlock()).expect("a cycle of lock waits");
        assert_eq!(hung.waited, Duration::from_millis(120));
        assert!(wait_cycle(&[join(10, 11), lock(11, 10)]));

        // thread 12 waits on a condition: no cycle, the bound counts.
        let mut cond = lock(12, 11);
        cond.waits = Some(FutexWait { addr: 0x6028, word: Some(0), owner: Some(0) });
        let lost_wakeup = || Some(vec![join(10, 11), lock(11, 12), cond.clone()]);
        let mut w = HangCheck::new(Duration::from_secs(1));
        assert_eq!(w.judge(ms(0), lost_wakeup()), None);
        assert_eq!(w.judge(ms(500), lost_wakeup()), None);
        assert!(w.judge(ms(1_001), lost_wakeup()).is_some());
        // A bound shorter than the confirmation is the bound.
        assert_eq!(HangCheck::new(Duration::from_millis(40)).confirm, Duration::from_millis(40));
    }
}
