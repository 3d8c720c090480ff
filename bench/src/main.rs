//! aid's benchmarks that run in-process on the library (crate `aid`):
//! `synthetic`, the sensitivity study on generated applications, and
//! `extract`, the throughput of the offline analysis. The front door is
//! `cargo xtask bench synthetic|extract ...`; this crate is outside the
//! default build, so neither the agent nor its command line carries them.
//! The eBPF benchmarks that load probes themselves are this crate's
//! `benches/` (`cargo xtask bench probes|amplify`).

mod extract;
mod fleet;
mod synthetic;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "aid-bench", about = "aid's in-process benchmarks (cargo xtask bench ...).")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// Sensitivity study on generated applications (Fig. 8); fails if any
    /// approach reports a wrong causal path where the paper's assumptions
    /// hold.
    Synthetic(synthetic::SyntheticArgs),
    /// Extraction + statistics + AC-DAG throughput over generated runs.
    Extract(extract::ExtractArgs),
    /// What limits a fleet as hosts are added: report sizes, the
    /// coordinator's reading and its look at the workers (a nats-server
    /// of its own on 127.0.0.1).
    Fleet(fleet::FleetArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().bench {
        Bench::Synthetic(a) => synthetic::run(a),
        Bench::Extract(a) => extract::run(&a),
        Bench::Fleet(a) => fleet::run(&a),
    };
    result.unwrap_or_else(|err| {
        eprintln!("aid-bench: {err:#}");
        ExitCode::from(2)
    })
}
