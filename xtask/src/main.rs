//! Project tasks: `cargo xtask setup | test | demo | bench | corpus | man`.
//!
//! Every task that builds starts with `setup`, which installs what a fresh
//! machine lacks (pinned nightly with rust-src, llvm-22-dev, bpf-linker
//! built against LLVM 22, the C toolchain the tests use) and does nothing
//! for what is already there.

mod bench;
#[path = "../../examples/cases.rs"]
mod cases;
mod corpus;
mod corpus_rule;
mod setup;

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install the build prerequisites (idempotent).
    Setup,
    /// Set up, build, and run the whole test suite, the eBPF tests that a
    /// plain `cargo test` leaves ignored included.
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter);
        /// after `--`, for the test binaries.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Set up, build, and run `aid-agent debug` on a bundled example.
    Demo {
        /// Example under examples/ to debug.
        #[arg(default_value = "commit-after-close")]
        example: String,
    },
    /// Benchmarks; each prints the table rows for BENCHMARKS.md.
    Bench {
        #[command(subcommand)]
        which: bench::Which,
    },
    /// The scoreboard on programs nobody here wrote: build every program
    /// of ../shared/corpus, debug each with no flags, and count the
    /// sessions whose root cause is right, none, or wrong.
    Corpus(corpus::Args),
    /// Write the man pages (aid-agent.1 and one per subcommand) into
    /// target/man; `man -l target/man/aid-agent-debug.1` reads one.
    Man,
}

/// The packages `cargo xtask test` builds and tests, as `.ci/run`'s clippy
/// checks them.
const SUITE: &[&str] = &["--workspace", "--exclude", "aid-ebpf"];

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Setup => setup::run(),
        Task::Test { args } => {
            setup::run()?;
            // The whole workspace but aid-ebpf (built for the BPF target by
            // aya-build, from aid-agent's build script, never for the host):
            // the benchmarks crate is outside the default build, but what it
            // ships is tested here. One selection for the build and the
            // tests, the one clippy checks, so that features unify once and
            // nothing is built twice (building the benchmarks crate on its
            // own built aid-agent again: 5 min 48 s of a fresh-clone CI).
            cargo(&[&["build"], SUITE, &["--all-targets"]].concat())?;
            // The eBPF tests are #[ignore]d so that a plain `cargo test`
            // never counts them as passed without running them; here they
            // run, and fail on a machine that cannot run them.
            let (cargo_args, test_args) = match args.iter().position(|a| a == "--") {
                Some(i) => (&args[..i], &args[i + 1..]),
                None => (&args[..], &[][..]),
            };
            let mut test = vec!["test"];
            test.extend(SUITE);
            test.extend(cargo_args.iter().map(String::as_str));
            test.extend(["--", "--include-ignored"]);
            test.extend(test_args.iter().map(String::as_str));
            cargo(&test)
        }
        Task::Demo { example } => {
            setup::run()?;
            cargo(&["build", "--release", "--package", "aid-agent"])?;
            demo(&example)
        }
        Task::Bench { which } => {
            setup::run()?;
            if which.runs_the_agent() {
                cargo(&["build", "--release", "--package", "aid-agent"])?;
            }
            bench::run(which)
        }
        Task::Corpus(args) => {
            setup::run()?;
            cargo(&["build", "--release", "--package", "aid-agent"])?;
            corpus::run(args)
        }
        Task::Man => {
            cargo(&["build", "--release", "--package", "aid-agent"])?;
            let out = root().join("target/man");
            exec(Command::new(agent_binary()).arg("man").arg("--out").arg(&out))
        }
    }
}

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

/// The agent the benchmarks and the demo run: this workspace's release
/// build, or the binary `AID_AGENT_BIN` names (an earlier build, to
/// measure a change side by side in the same time window).
pub fn agent_binary() -> PathBuf {
    std::env::var_os("AID_AGENT_BIN")
        .map_or_else(|| root().join("target/release/aid-agent"), PathBuf::from)
}

pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    exec(Command::new("cargo").args(args).current_dir(root()))
}

pub fn exec(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// Builds an example and debugs it with the command its README gives.
fn demo(example: &str) -> anyhow::Result<()> {
    let dir = root().join("examples").join(example);
    if !dir.is_dir() {
        bail!("no example `{example}` under examples/");
    }
    let out = std::env::temp_dir().join("aid-demo");
    std::fs::create_dir_all(&out)?;
    let exe = cases::build(example, &out).map_err(anyhow::Error::msg)?;
    let args = cases::readme_args(example).map_err(anyhow::Error::msg)?;
    let session = out.join(format!("{example}-session"));
    let _ = std::fs::remove_dir_all(&session);
    eprintln!(
        "xtask: aid-agent debug {} -o {} {}",
        args.join(" "),
        session.display(),
        exe.display()
    );
    exec(Command::new(agent_binary()).arg("debug").args(&args).arg("-o").arg(&session).arg(&exe))
}
