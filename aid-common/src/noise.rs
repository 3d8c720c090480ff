//! Synchronisation points and the noise served at them (failure
//! amplification): how a sync-point probe is told apart from a traced
//! call's, and the site the agent keys noise at.

/// Set in the attach cookie of a synchronisation point (`pthread_mutex_lock`,
/// `sem_wait`, `nanosleep`, ...): in an intervened run the entry probe
/// counts the thread's sync points, records the first
/// [`SYNC_EVENTS_PER_THREAD`] of them (entry and arguments, no return), and
/// stops the thread where the agent installed noise. Function ids stay
/// below it.
pub const SYNC_COOKIE_BIT: u32 = 1 << 31;

/// [`crate::SiteKey::func`] of noise at a synchronisation point: the action
/// map is looked up at `(SYNC_SITE_FUNC, role, k, ENTRY)` when a thread of
/// that role enters its k-th sync point, whichever function that is.
pub const SYNC_SITE_FUNC: u32 = SYNC_COOKIE_BIT - 1;

/// [`crate::SiteKey::role`] of noise for every thread at one point: the
/// action map is looked up at `(func, EVERY_ROLE, ANY_INSTANCE, ENTRY)`
/// when a thread enters statement point or traced function `func` and no
/// action of its own (by rank or by call) is there. Every thread that
/// reaches the point is held, so threads of a pool that all run the same
/// code stand at the same place together (a window between two stores
/// that any of them may close). [`crate::Action::retries`] bounds the
/// holds per run; the agent removes the action when they are spent.
pub const EVERY_ROLE: u32 = u32::MAX;

/// Sync points recorded per thread of an intervened run (its first ones):
/// enough for the lock sections of the calls a failure is about, while a
/// thread that takes a lock millions of times cannot flood the event ring.
pub const SYNC_EVENTS_PER_THREAD: u32 = 4096;
