//! What a long operation tells its user while it runs, as events a front
//! end renders as it likes (the command line draws bars; tests stay
//! quiet). The library never draws anything itself.

/// Receives progress events; every method does nothing unless overridden.
pub trait Progress {
    /// A line for the user ("tracing 4 functions of ...").
    fn say(&mut self, _line: &str) {}
    /// A phase of `total` steps (None: open-ended) begins: "recording",
    /// "observing", "intervening".
    fn begin(&mut self, _what: &str, _total: Option<u64>) {}
    /// One step of the current phase is done; `status` sums up where it
    /// stands ("3 pass, 1 fail").
    fn step(&mut self, _status: &str) {}
    /// The current phase is over.
    fn end(&mut self) {}
}

/// Says nothing.
pub struct Quiet;

impl Progress for Quiet {}
