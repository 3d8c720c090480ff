//! `cargo xtask bench fleet`: what limits a fleet's session as hosts are
//! added (docs/fleet.md, "Limits"), measured on this machine against a
//! real nats-server on 127.0.0.1 that this benchmark starts (its store in
//! a temporary directory) and kills by pid at the end:
//!
//! - a run's report: its size and parts, for runs of 1,000 to 100,000
//!   events (a generated session's run, `extract`'s workload, sent as a
//!   worker sends it);
//! - one worker publishing reports (each part stored before the next);
//! - the coordinator reading them back once they are all on the server
//!   (`Fleet::next_report`: the stream read, the parts put together, the
//!   JSON parsed), its thread's CPU, the whole process's, the server's;
//! - the coordinator's look at the workers (`Fleet::workers`, taken every
//!   2 s and before each group of batches) with 10 to 1,000 workers'
//!   keys in the bucket.
//!
//! A benchmark, not a test: it times and prints.

use std::{
    process::{Child, Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use aid::fleet::{Bus, RunReport, WorkerInfo, coordinator::Fleet};
use anyhow::{Context as _, bail};

#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// Events per run of the reports measured (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1_000u32, 10_000, 100_000])]
    pub events: Vec<u32>,
    /// Reports the coordinator reads, at most, for each size.
    #[arg(long, default_value_t = 200)]
    pub reports: u32,
    /// Bytes of reports it reads, at most, for each size (fewer reports
    /// of the larger runs; 5 at least).
    #[arg(long, default_value_t = 256 << 20)]
    pub bytes: u64,
    /// Workers' keys in the bucket for the look at the workers
    /// (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![10u32, 100, 1000])]
    pub workers: Vec<u32>,
    /// Looks timed for each count (the median is printed).
    #[arg(long, default_value_t = 5)]
    pub looks: usize,
}

/// A nats-server of the benchmark's own, killed (by its pid) when dropped.
struct Server {
    url: String,
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts nats-server with JetStream on a port of 127.0.0.1 it chooses
/// and names in its ports file.
fn server() -> anyhow::Result<Server> {
    let exe = ["nats-server", "/usr/sbin/nats-server"]
        .into_iter()
        .find(|e| Command::new(e).arg("--version").output().is_ok_and(|o| o.status.success()))
        .context("nats-server is not installed: `cargo xtask setup` installs it")?;
    let dir = std::env::temp_dir().join(format!("aid-bench-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let child = Command::new(exe)
        .args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
        .arg(dir.join("js"))
        .arg("--ports_file_dir")
        .arg(&dir)
        .arg("-l")
        .arg(dir.join("server.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting nats-server")?;
    let ports = dir.join(format!("nats-server_{}.ports", child.id()));
    let mut s = Server { url: String::new(), child, dir };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let v: Option<serde_json::Value> =
            std::fs::read_to_string(&ports).ok().and_then(|t| serde_json::from_str(&t).ok());
        if let Some(url) = v.as_ref().and_then(|v| v["nats"][0].as_str()) {
            s.url = url.to_owned();
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("nats-server wrote no ports file at {}", ports.display())
}

/// CPU time (user + system), in clock ticks, from a `stat` file of
/// /proc (a process's, or one thread's under `task/`).
fn cpu_ticks(path: &str) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The fields after the command's name, which ends with the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat: 12 and 13 after ')'.
    Ok(f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0))
}

/// The last lines of the server's log (a few hundred bytes).
fn log_tail(srv: &Server) -> String {
    let text = std::fs::read_to_string(srv.dir.join("server.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

fn ms_per(ticks: u64, n: u32) -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks as f64 * 1000.0 / hz / f64::from(n.max(1))
}

pub fn run(a: &FleetArgs) -> anyhow::Result<ExitCode> {
    let srv = server()?;
    let server_stat = format!("/proc/{}/stat", srv.child.id());
    let me = format!("/proc/self/task/{}/stat", nix::unistd::gettid());
    println!("nats-server at {} (pid {})", srv.url, srv.child.id());
    for &events in &a.events {
        let session = crate::extract::generate(1, events, 4, 50, 1);
        let Some(run) = session.runs.into_iter().next() else { bail!("no run generated") };
        let mut report = RunReport {
            id: 0,
            worker: "w1".into(),
            host: "bench".into(),
            run: Ok(aid::model::testing::recorded(run)),
            presence: None,
        };
        let size = report.body()?.len();
        // As protocol 1 sent it: each call also as a call.
        let with_calls = serde_json::to_vec(&report)?.len();
        let mut fleet = Fleet::connect(&srv.url)?;
        let worker = Bus::connect(&srv.url, "aid-bench worker")?;
        let parts = size.div_ceil(worker.part_size());
        let n = (a.bytes / size as u64).clamp(5, u64::from(a.reports.max(5))) as u32;
        let t = Instant::now();
        for id in 1..=n {
            report.id = id;
            worker.publish_report(fleet.session(), 1, &mut report)?;
        }
        let published = t.elapsed();
        let (cpu0, thread0, server0) =
            (cpu_ticks("/proc/self/stat")?, cpu_ticks(&me)?, cpu_ticks(&server_stat)?);
        let t = Instant::now();
        let mut read = 0u32;
        while read < n {
            match fleet.next_report(Duration::from_secs(30))? {
                Some(_) => read += 1,
                None => bail!(
                    "the coordinator read {read} of {n} reports in 30 s; the server's log ends:\n{}",
                    log_tail(&srv)
                ),
            }
        }
        let took = t.elapsed();
        let (cpu, thread, server) = (
            cpu_ticks("/proc/self/stat")? - cpu0,
            cpu_ticks(&me)? - thread0,
            cpu_ticks(&server_stat)? - server0,
        );
        let mb = |d: Duration| size as f64 * f64::from(n) / d.as_secs_f64() / 1e6;
        println!(
            "report of a run of {events} events: {size} bytes ({:.0} per event; {with_calls} with its calls as protocol 1 sent them), {parts} part(s); {n} reports",
            size as f64 / f64::from(events.max(1)),
        );
        println!(
            "  one worker publishes {:.1} reports/s ({:.1} MB/s)",
            f64::from(n) / published.as_secs_f64(),
            mb(published)
        );
        println!(
            "  the coordinator reads {:.1} reports/s ({:.1} MB/s); CPU per report: its thread {:.2} ms, its process {:.2} ms, the server {:.2} ms",
            f64::from(n) / took.as_secs_f64(),
            mb(took),
            ms_per(thread, n),
            ms_per(cpu, n),
            ms_per(server, n)
        );
        let slow = std::fs::read_to_string(srv.dir.join("server.log"))
            .unwrap_or_default()
            .matches("Slow Consumer")
            .count();
        if slow > 0 {
            println!("  the server cut a client off as a slow consumer {slow} time(s) so far");
        }
        // Dropping the fleet purges the session's reports.
        drop(fleet);
    }
    let mut fleet = Fleet::connect(&srv.url)?;
    let keys = Bus::connect(&srv.url, "aid-bench workers")?;
    let members = keys.queues()?.members;
    // Fewest first: the keys of a count are those of the smaller ones and more.
    let mut counts = a.workers.clone();
    counts.sort_unstable();
    for &k in &counts {
        let mut times = Vec::new();
        for _ in 0..a.looks.max(1) {
            // Put again before each look: keys expire 8 s after their put.
            for i in 0..k {
                let info =
                    WorkerInfo { name: format!("w{i}"), host: "bench".into(), pid: i, jobs: 1 };
                let body = serde_json::to_vec(&info)?;
                let m = members.clone();
                keys.request("a worker's key", async move {
                    m.put(format!("w{i}"), body.into()).await.map(drop).map_err(|e| e.to_string())
                })?;
            }
            let t = Instant::now();
            let seen = fleet.workers().len();
            times.push(t.elapsed());
            if seen < k as usize {
                bail!("the look found {seen} of {k} workers");
            }
        }
        times.sort();
        println!(
            "the coordinator's look at {k} connected workers: {:.1} ms (median of {})",
            times[times.len() / 2].as_secs_f64() * 1000.0,
            times.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
