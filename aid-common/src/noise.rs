//! Synchronisation points and the noise served at them (failure
//! amplification): how a sync-point probe is told apart from a traced
//! call's, and the site the agent keys noise at.

/// Set in the attach cookie of a synchronisation point (`pthread_mutex_lock`,
/// `sem_wait`, `nanosleep`, ...): the entry probe then records nothing; in
/// an intervened run it counts the thread's sync points and stops the
/// thread where the agent installed noise. Function ids stay below it.
pub const SYNC_COOKIE_BIT: u32 = 1 << 31;

/// [`crate::SiteKey::func`] of noise at a synchronisation point: the action
/// map is looked up at `(SYNC_SITE_FUNC, role, k, ENTRY)` when a thread of
/// that role enters its k-th sync point, whichever function that is.
pub const SYNC_SITE_FUNC: u32 = SYNC_COOKIE_BIT - 1;
