//! Interventions as the kernel sees them: sites (the entry or exit of the
//! k-th call of a function on a thread role), the action wanted there,
//! the record a probe leaves for the agent when it stops a thread, and the
//! per-thread bookkeeping that numbers calls.

/// [`SiteKey::point`]: entry or exit. A newtype: it is part of map keys
/// written by one side and read by the other.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SitePoint(u32);

impl SitePoint {
    /// At function entry.
    pub const ENTRY: SitePoint = SitePoint(0);
    /// At function exit.
    pub const EXIT: SitePoint = SitePoint(1);
}

impl core::fmt::Debug for SitePoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SitePoint::ENTRY => f.write_str("Entry"),
            SitePoint::EXIT => f.write_str("Exit"),
            SitePoint(other) => write!(f, "SitePoint({other})"),
        }
    }
}

/// One point in an execution: the entry or exit of the `instance`-th call
/// (1-based) of `func` on thread `role`. As an action key, instance
/// [`ANY_INSTANCE`] matches every call of `func` on `role` that has no
/// action of its own.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey {
    pub func: u32,
    pub role: u32,
    pub instance: u32,
    pub point: SitePoint,
}
const _: () = assert!(size_of::<SiteKey>() == 16);

/// [`SiteKey::instance`] of an action that applies to every call of the
/// function on the role (instances are numbered from 1).
pub const ANY_INSTANCE: u32 = 0;

/// Set in a stamped site's time (`AID_STAMPS`) while the thread that
/// reached it is stopped there for the agent: reached, not yet let go. The
/// agent replaces it with the time it resumes the thread: a call held at
/// its entry has not begun, nor a held return returned, until then.
pub const HELD_MARK: u64 = 1 << 63;

/// [`Action::kind`]: what the agent wants done at a site. A newtype: the
/// agent writes it into a map and reads it back from [`Pending`].
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ActionKind(u32);

impl ActionKind {
    /// No action (an empty map slot).
    pub const NONE: ActionKind = ActionKind(0);
    /// Stop the thread and hold it for `value` microseconds.
    pub const DELAY: ActionKind = ActionKind(1);
    /// Stop the thread and hold it until `other` has happened (or
    /// `timeout_us` passed). Only stops when `other` has not happened yet.
    pub const HOLD_UNTIL: ActionKind = ActionKind(2);
    /// Serialisation of two calls, installed at both entries, each naming
    /// the other's entry in `other` and their pair in `value`
    /// ([`serialized_pair`]): the call that enters second is held until the
    /// other's exit. Only stops when this call is the second to enter and
    /// the other has not exited.
    pub const HOLD_WHILE_RUNNING: ActionKind = ActionKind(3);
    /// At entry, return `value` immediately without running the function.
    pub const RETURN_EARLY: ActionKind = ActionKind(4);
    /// At exit, replace the return value with `value`.
    pub const OVERRIDE_RETURN: ActionKind = ActionKind(5);
    /// At exit, when the return value passes [`Action::test`]: run the
    /// call again from its entry, with the registers saved there, at most
    /// [`Action::retries`] times; if it still passes the test, return
    /// `value` instead when [`RetTest::FALLBACK`] is set.
    pub const REEXECUTE: ActionKind = ActionKind(6);
    /// At entry: hold the thread while any call of the group in `other`
    /// ([`SiteKey::func`] = group id, [`SiteKey::role`] = 1 when only calls
    /// on the same object count) is running (group serialisation).
    pub const HOLD_WHILE_GROUP_RUNNING: ActionKind = ActionKind(7);
    /// Reported to the agent, never installed: a re-execution gave up
    /// (the return value still passed the test after every retry and there
    /// was no fallback value).
    pub const REEXECUTE_EXHAUSTED: ActionKind = ActionKind(8);
    /// Hold the thread until no other thread of the process can run (each
    /// is blocked, sleeping, stopped or gone), or `timeout_us` passed;
    /// among several, the highest `value` resumes first (a PCT priority
    /// change point, failure amplification).
    pub const YIELD: ActionKind = ActionKind(9);
    /// Not an intervention: the thread entered an unwinder with frames on
    /// its shadow stack; write their original return addresses back over
    /// the kernel's trampoline (`crate::ShadowStack`).
    pub const REPAIR_RETURNS: ActionKind = ActionKind(10);
    /// Not an intervention: the thread reached a catch point after a
    /// repair; write the trampoline back into the frames still live.
    pub const REARM_RETURNS: ActionKind = ActionKind(11);
    /// At a lock acquisition (a synchronisation point, every one the
    /// thread makes while a call of function `within` - 1 runs on it):
    /// hold the thread while a call of the group in `other` ([`SiteKey::func`]
    /// = group id) runs on another thread; `value` is the group's function,
    /// whose call on this thread, if it is inside one, does not count.
    pub const HOLD_LOCK_WHILE_GROUP_RUNNING: ActionKind = ActionKind(12);
    /// At entry, beside [`ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`] on
    /// the calls of its group: hold the thread while a thread whose locks
    /// that action holds has begun to take one unheld (its lock call
    /// found no call of the group running) and has not let it go
    /// ([`lockers`] of the group in `other`'s [`SiteKey::func`]). The lock
    /// call's check and its acquisition are apart: a thread preempted in
    /// between would otherwise take the lock inside a call that entered
    /// meanwhile.
    pub const HOLD_WHILE_LOCKERS: ActionKind = ActionKind(13);
    /// At a lock's release or a condition wait, on the threads whose locks
    /// [`ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`] holds: the thread no
    /// longer counts among the [`lockers`] it was counted in. Never stops.
    pub const LOCKERS_RELEASE: ActionKind = ActionKind(14);
    /// Installed by the agent at the site a held thread waits for
    /// ([`ActionKind::HOLD_UNTIL`], a serialisation's exit), while it
    /// waits: the thread reaching it stops, so that the agent dates the
    /// event, lets the waiting threads go and only then this one. Without
    /// it, the agent sees the event when it next looks, and the thread
    /// that made it has gone on meanwhile.
    pub const RELEASE_WAITERS: ActionKind = ActionKind(15);

    /// A kind noise installs (a delay, or a PCT priority demotion); an
    /// intervention's delay is one too.
    pub const fn is_noise_kind(self) -> bool {
        self.0 == Self::DELAY.0 || self.0 == Self::YIELD.0
    }

    /// A wait on a group that the kernel goes on to after noise at the
    /// same entry (`Pending::then`): a serialisation's, or the wait for a
    /// lock's takers.
    pub const fn waits_after_noise(self) -> bool {
        self.0 == Self::HOLD_WHILE_GROUP_RUNNING.0 || self.0 == Self::HOLD_WHILE_LOCKERS.0
    }

    /// Holds the thread (as opposed to editing its registers).
    pub const fn is_hold(self) -> bool {
        self.0 == Self::DELAY.0
            || self.0 == Self::HOLD_UNTIL.0
            || self.0 == Self::HOLD_WHILE_RUNNING.0
            || self.0 == Self::HOLD_WHILE_GROUP_RUNNING.0
            || self.0 == Self::HOLD_LOCK_WHILE_GROUP_RUNNING.0
            || self.0 == Self::HOLD_WHILE_LOCKERS.0
            || self.0 == Self::YIELD.0
    }
}

impl core::fmt::Debug for ActionKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ActionKind::NONE => f.write_str("None"),
            ActionKind::DELAY => f.write_str("Delay"),
            ActionKind::HOLD_UNTIL => f.write_str("HoldUntil"),
            ActionKind::HOLD_WHILE_RUNNING => f.write_str("HoldWhileRunning"),
            ActionKind::RETURN_EARLY => f.write_str("ReturnEarly"),
            ActionKind::OVERRIDE_RETURN => f.write_str("OverrideReturn"),
            ActionKind::REEXECUTE => f.write_str("Reexecute"),
            ActionKind::HOLD_WHILE_GROUP_RUNNING => f.write_str("HoldWhileGroupRunning"),
            ActionKind::REEXECUTE_EXHAUSTED => f.write_str("ReexecuteExhausted"),
            ActionKind::YIELD => f.write_str("Yield"),
            ActionKind::REPAIR_RETURNS => f.write_str("RepairReturns"),
            ActionKind::REARM_RETURNS => f.write_str("RearmReturns"),
            ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING => f.write_str("HoldLockWhileGroupRunning"),
            ActionKind::HOLD_WHILE_LOCKERS => f.write_str("HoldWhileLockers"),
            ActionKind::LOCKERS_RELEASE => f.write_str("LockersRelease"),
            ActionKind::RELEASE_WAITERS => f.write_str("ReleaseWaiters"),
            ActionKind(other) => write!(f, "ActionKind({other})"),
        }
    }
}

/// [`Action::test`]: which return values an exit action applies to: a
/// set of bits in the low byte ([`RetTest::ALWAYS`], no bit, applies to
/// every value) and the width of the value in bytes in the next byte
/// (0: all 8 bytes of `rax`; an `int` return leaves the upper half
/// undefined, so its tests read the low 4 bytes, sign-extended).
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RetTest(u32);

impl RetTest {
    /// Every return value.
    pub const ALWAYS: RetTest = RetTest(0);
    /// Negative values.
    pub const NEGATIVE: RetTest = RetTest(1);
    /// Zero (NULL, false).
    pub const ZERO: RetTest = RetTest(2);
    /// Any value other than [`Action::test_value`].
    pub const NOT_EQUAL: RetTest = RetTest(4);
    /// A re-execution that gives up returns [`Action::value`] instead.
    pub const FALLBACK: RetTest = RetTest(16);

    pub const fn contains(self, other: RetTest) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn with(self, other: RetTest) -> RetTest {
        RetTest(self.0 | other.0)
    }

    /// The same test on a value `bytes` wide (1, 2, 4; anything else is 8).
    pub const fn width(self, bytes: u8) -> RetTest {
        let b = match bytes {
            1 | 2 | 4 => bytes as u32,
            _ => 0,
        };
        RetTest((self.0 & 0xff) | (b << 8))
    }

    /// `raw` read at the test's width, sign-extended.
    pub const fn read(self, raw: u64) -> i64 {
        match (self.0 >> 8) & 0xff {
            1 => raw as u8 as i8 as i64,
            2 => raw as u16 as i16 as i64,
            4 => raw as u32 as i32 as i64,
            _ => raw as i64,
        }
    }

    /// Whether the raw `rax` value passes the test.
    pub const fn passes(self, rax: u64, test_value: u64) -> bool {
        let any = RetTest::NEGATIVE.0 | RetTest::ZERO.0 | RetTest::NOT_EQUAL.0;
        if self.0 & any == 0 {
            return true;
        }
        let v = self.read(rax);
        (self.contains(RetTest::NEGATIVE) && v < 0)
            || (self.contains(RetTest::ZERO) && v == 0)
            || (self.contains(RetTest::NOT_EQUAL) && v != self.read(test_value))
    }
}

impl core::fmt::Debug for RetTest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "RetTest({:#x})", self.0)
    }
}

/// Value of the action map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub kind: ActionKind,
    /// 0, or a function id + 1: the action applies only while a call of
    /// that function is running on the same thread (a calling context).
    pub within: u32,
    /// Delay in microseconds, the value to return, a re-execution's
    /// fallback value, or the id of a serialised pair.
    pub value: u64,
    /// Longest hold, in microseconds.
    pub timeout_us: u64,
    /// The site waited for by the hold kinds (for
    /// [`ActionKind::HOLD_WHILE_GROUP_RUNNING`], the group).
    pub other: SiteKey,
    /// Exit actions: which return values they apply to.
    pub test: RetTest,
    /// [`ActionKind::REEXECUTE`]: most re-executions of one call;
    /// [`ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`]: [`LOCK_DOES_NOT_WAIT`]
    /// or 0.
    pub retries: u32,
    /// The reference value of [`RetTest::NOT_EQUAL`].
    pub test_value: u64,
}
const _: () = assert!(size_of::<Action>() == 56);

/// Number of general registers in x86-64 `struct pt_regs` (r15 .. ss).
pub const PT_REGS_WORDS: usize = 21;

/// Value of the pending map: written by a probe just before it signals its
/// own thread, read by the agent at the resulting signal stop.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub action: Action,
    /// Where the thread stopped.
    pub site: SiteKey,
    /// Entry address of the function (user virtual address), to locate the
    /// frame for a premature return.
    pub func_ip: u64,
    pub ts_ns: u64,
    /// Entry only: the registers at the breakpoint, before the probed first
    /// instruction ran (the kernel runs it before the signal stops the
    /// thread), in `struct pt_regs` order. Lets the agent rewind the thread
    /// to the function's first instruction.
    pub regs: [u64; PT_REGS_WORDS],
    /// Noise at a lock call that an intervention also holds there
    /// ([`ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`], inside the held
    /// calls): that action, for the agent to hold the thread on when the
    /// noise lets it go, if due then. [`ActionKind::NONE`] otherwise.
    pub then: Action,
}
const _: () = assert!(size_of::<Pending>() == 56 + 16 + 16 + 8 * PT_REGS_WORDS + 56);

impl Default for Pending {
    fn default() -> Self {
        Pending {
            action: Action::default(),
            site: SiteKey::default(),
            func_ip: 0,
            ts_ns: 0,
            regs: [0; PT_REGS_WORDS],
            then: Action::default(),
        }
    }
}

/// Value of the replay map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// Address of the function's first instruction.
    pub ip: u64,
    /// Stack pointer right after the call returns (entry rsp + 8): where
    /// the duplicate return is reported, unlike a recursive inner call's.
    pub exit_sp: u64,
    pub func: u32,
    /// 1 until the repeated entry has been seen.
    pub entry_pending: u32,
    /// 1 when the kernel will report the call's return twice (a thread
    /// rewound at its entry: the return address was redirected before);
    /// 0 for a call re-executed from its exit (its first return is gone).
    pub dup_exit: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<Replay>() == 32);

/// Value of the entry-registers map: the registers of a call's entry,
/// kept while it runs when its exit may re-execute it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRegs {
    /// The instance the registers belong to (a recursive inner call of
    /// the same function overwrites them; the exit then cannot re-execute).
    pub instance: u32,
    /// Re-executions of this call so far.
    pub tries: u32,
    /// Address of the function's first instruction.
    pub ip: u64,
    /// In `struct pt_regs` order, as [`Pending::regs`].
    pub regs: [u64; PT_REGS_WORDS],
}
const _: () = assert!(size_of::<EntryRegs>() == 16 + 8 * PT_REGS_WORDS);

impl Default for EntryRegs {
    fn default() -> Self {
        EntryRegs { instance: 0, tries: 0, ip: 0, regs: [0; PT_REGS_WORDS] }
    }
}

/// Key of the group-membership map: which (function, role) pairs belong
/// to a serialised group.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupMember {
    pub func: u32,
    pub role: u32,
}
const _: () = assert!(size_of::<GroupMember>() == 8);

/// Value of the group-membership map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupSlot {
    /// The group's id (1-based).
    pub group: u32,
    /// 0, or the argument (1-based, up to 3) that names the object calls
    /// are serialised on.
    pub arg: u32,
    /// 0, or a function id + 1: only calls made while a call of it runs
    /// on the same thread belong to the group.
    pub within: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<GroupSlot>() == 16);

/// Key of the running-calls map: a group and the object its calls ran on
/// (0 when objects do not matter).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RunningKey {
    pub group: u32,
    pub _pad: u32,
    pub object: u64,
}
const _: () = assert!(size_of::<RunningKey>() == 16);

/// Live-unit mode: the running-calls key under which the kernel counts
/// the units in flight (group ids start at 1, so no group uses it). Actions
/// on threads other than a unit's own apply only while it is non-zero.
pub const UNITS_IN_FLIGHT: RunningKey = RunningKey { group: u32::MAX, _pad: 0, object: 0 };

/// [`RunningKey::group`] of the serialised pairs of calls
/// ([`ActionKind::HOLD_WHILE_RUNNING`]; group ids are counted from 1 and
/// never reach it).
pub const SERIALIZED_PAIRS: u32 = u32::MAX - 1;

/// The running-calls key a serialised pair (id >= 1, [`Action::value`])
/// is decided on: the first of its two calls to enter inserts it, and the
/// second, finding it there, knows it came second. One insert decides, as
/// the map serialises two inserts of one key: a probe that looked at the
/// other call's entry mark and then set its own could see the other
/// entered while the other saw it entered too (both held, each until the
/// other's exit, until the hold timeout), or neither.
pub const fn serialized_pair(id: u64) -> RunningKey {
    RunningKey { group: SERIALIZED_PAIRS, _pad: 0, object: id }
}

/// The running-calls key counting the threads that took a lock unheld
/// while a hold of their locks waits on `group`
/// ([`ActionKind::HOLD_WHILE_LOCKERS`]): counted at the lock call, before
/// its check, and until the thread's next release or condition wait. No
/// group's calls run on this object (a pointer argument of all ones).
pub const fn lockers(group: u32) -> RunningKey {
    RunningKey { group, _pad: 0, object: u64::MAX }
}

/// [`OpenMember::func`] of a thread counted among [`lockers`] (function
/// ids never reach it): its key says which.
pub const LOCKER_MEMBER: u32 = u32::MAX;

/// [`Action::retries`] of an [`ActionKind::HOLD_LOCK_WHILE_GROUP_RUNNING`]
/// at a lock call that does not wait for the lock (a try-lock): held like
/// the others, but not counted among the [`lockers`]. It takes the lock
/// at once or fails, so no call of the group can begin between its check
/// and its acquisition but by a preemption a few instructions long, and
/// one that fails holds no lock to let go: counted, the thread would
/// stay among the lockers until its next release, and every call of the
/// group would wait for it.
pub const LOCK_DOES_NOT_WAIT: u32 = 1;

/// Key of the open-member map: one group call running on a thread, so its
/// exit can find the object its entry counted it under.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpenMember {
    pub tid: u32,
    pub func: u32,
}
const _: () = assert!(size_of::<OpenMember>() == 8);

/// Key of the calls map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub tid: u32,
    pub func: u32,
}
const _: () = assert!(size_of::<CallKey>() == 8);

/// Maximum recursion depth for which the kernel tracks which instance an
/// exit belongs to. Deeper frames share a slot (documented limitation).
pub const CALL_STACK_DEPTH: usize = 16;

/// Value of the calls map: how many times a thread entered a function, and
/// the instance numbers of the frames still open.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStack {
    pub count: u32,
    pub depth: u32,
    /// Live-unit mode: the unit epoch the count belongs to; a new unit on
    /// the thread restarts the count.
    pub epoch: u32,
    pub _pad: u32,
    pub open: [u32; CALL_STACK_DEPTH],
}
const _: () = assert!(size_of::<CallStack>() == 16 + 4 * CALL_STACK_DEPTH);

/// Value of the unit-state map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitState {
    /// Incremented at each outermost entry of the unit function.
    pub epoch: u32,
    /// Nesting depth of the unit function on this thread.
    pub depth: u32,
}
const _: () = assert!(size_of::<UnitState>() == 8);
