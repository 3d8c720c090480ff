//! rust-config-race — an order violation: the server reads its configuration
//! before the loader thread has published it and silently runs on defaults.
//!
//! main spawns thread 1 "loader" (reads and parses the config file, then
//! publishes it in a shared registry) and thread 2 "server" (binds its socket,
//! then sizes its request queue from the registry). Nothing makes the server
//! wait for the loader: when its bind finishes first, `lookup_config` finds
//! no configuration, `capacity` falls back to the built-in default, the
//! request burst does not fit and the program exits 1.
//!
//! Timing: counted from a common origin (so thread start-up latency plays no
//! part), reading the file ends at 2, 6, 10 or 14 ms and binding at 4, 8, 12,
//! 16 or 20 ms. The lookup is thus always ~2 ms before or after the publish:
//! a run races clearly or not at all, and neither tracing overhead nor
//! scheduling noise below ~2 ms changes that.
//!
//! Build: rustc -g -C opt-level=1 --edition 2021 --crate-name rust_config_race \
//!            -o /tmp/examples-build/rust-config-race main.rs

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const CONFIG_FILE: &str = "workers = 4\nqueue_depth = 64\n";
/// Requests that arrive in the first burst; the queue must hold all of them.
const BURST: usize = 200;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub workers: usize,
    pub queue_depth: usize,
}

impl Default for Config {
    /// Built-in fallback: one worker, which cannot absorb the burst.
    fn default() -> Self {
        Config { workers: 1, queue_depth: 64 }
    }
}

/// Where the loader publishes the configuration for everyone else.
#[derive(Default)]
pub struct Registry {
    current: OnceLock<Config>,
}

/// Timing noise, drawn by main before any thread starts. It is the only
/// source of nondeterminism; `FLAKY_SEED=n` replays one schedule.
#[derive(Clone, Copy)]
struct Plan {
    /// Common origin of both threads' clocks, a few ms after main starts them.
    origin: Instant,
    read_file: Duration,
    bind_socket: Duration,
}

impl Plan {
    fn draw() -> Plan {
        let seed = std::env::var("FLAKY_SEED").ok().and_then(|s| s.parse().ok());
        let mut s: u64 = seed.unwrap_or_else(|| RandomState::new().build_hasher().finish());
        s = s.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
        let mut between = |lo: u64, hi: u64| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + s % (hi - lo + 1)
        };
        Plan {
            origin: Instant::now() + Duration::from_millis(5),
            read_file: Duration::from_millis(4 * between(0, 3) + 2),
            bind_socket: Duration::from_millis(4 * between(1, 5)),
        }
    }

    /// Sleeps until `offset` after the common origin.
    fn sleep_until(&self, offset: Duration) {
        thread::sleep((self.origin + offset).saturating_duration_since(Instant::now()));
    }
}

#[inline(never)]
pub fn parse_config(text: &str) -> Config {
    let mut cfg = Config::default();
    for (key, value) in text.lines().filter_map(|l| l.split_once('=')) {
        let value = value.trim().parse().unwrap_or(0);
        match key.trim() {
            "workers" => cfg.workers = value,
            "queue_depth" => cfg.queue_depth = value,
            _ => {}
        }
    }
    cfg
}

/// Makes `cfg` visible to other threads; returns its worker count.
#[inline(never)]
pub fn publish_config(registry: &Registry, cfg: Config) -> usize {
    let workers = cfg.workers;
    let _ = registry.current.set(cfg); // only the loader ever publishes
    workers
}

/// Thread 1: read the file (slow, variable), parse it, publish it.
#[inline(never)]
fn load_config(registry: &Registry, plan: Plan) -> usize {
    plan.sleep_until(plan.read_file);
    publish_config(registry, parse_config(CONFIG_FILE))
}

/// The published configuration, or `None` if nothing is published yet.
#[inline(never)]
pub fn lookup_config(registry: &Registry) -> Option<&Config> {
    registry.current.get()
}

/// Queue capacity the server provisions: workers x queue depth.
#[inline(never)]
pub fn capacity(registry: &Registry) -> usize {
    // ORDER: nothing guarantees the loader has published by now; the silent
    // fallback to defaults turns the early read into a wrong capacity.
    let cfg = lookup_config(registry).cloned().unwrap_or_default();
    cfg.workers * cfg.queue_depth
}

/// Accepts the first burst: 0, or minus the number of rejected requests.
#[inline(never)]
pub fn admit_burst(capacity: usize) -> i64 {
    if capacity >= BURST {
        0
    } else {
        -((BURST - capacity) as i64)
    }
}

/// Thread 2: bind the socket (variable), size the queue, take the burst.
#[inline(never)]
fn serve(registry: &Registry, plan: Plan) -> i64 {
    plan.sleep_until(plan.bind_socket);
    admit_burst(capacity(registry))
}

fn main() -> ExitCode {
    let plan = Plan::draw();
    let registry = Arc::new(Registry::default());

    let reg = Arc::clone(&registry);
    let loader = thread::Builder::new()
        .name("loader".into())
        .spawn(move || load_config(&reg, plan))
        .expect("spawn loader");
    let reg = Arc::clone(&registry);
    let server = thread::Builder::new()
        .name("server".into())
        .spawn(move || serve(&reg, plan))
        .expect("spawn server");

    loader.join().expect("loader panicked");
    let admitted = server.join().expect("server panicked");
    if admitted < 0 {
        eprintln!("rust-config-race: {} of {BURST} requests rejected (default config)", -admitted);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
