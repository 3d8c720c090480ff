//! `cargo xtask setup`: make a fresh machine able to build and test aid.
//! Each step checks first and says what it found or did.

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::exec;

/// The nightly that builds the eBPF crate (keep in sync with
/// aid-agent/build.rs).
pub const NIGHTLY: &str = "nightly-2026-05-20";
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";
const BPF_LINKER: &str = "0.13";

pub fn run() -> anyhow::Result<()> {
    nightly()?;
    apt_packages()?;
    bpf_linker()?;
    s3_server()?;
    python_packages()?;
    Ok(())
}

/// Python packages the test suite uses: DuckDB runs the session-format
/// example of the docs, perfetto's protobuf schema parses the exported
/// Perfetto traces (its trace processor would download a binary at run
/// time, so the suite does not use it).
const PYTHON_PACKAGES: &[(&str, &str)] = &[("duckdb", "duckdb"), ("perfetto", "perfetto")];

fn python_packages() -> anyhow::Result<()> {
    let missing: Vec<&str> = PYTHON_PACKAGES
        .iter()
        .filter(|(_, module)| {
            !Command::new("python3")
                .args(["-c", &format!("import {module}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|(package, _)| *package)
        .collect();
    let names: Vec<&str> = PYTHON_PACKAGES.iter().map(|(p, _)| *p).collect();
    if missing.is_empty() {
        say(&format!("python3 with {}: present", names.join(", ")));
        return Ok(());
    }
    say(&format!("installing {} with pip", missing.join(", ")));
    exec(
        Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            // Debian's own python3 refuses installs outside a venv (PEP 668);
            // these are test tools only.
            .arg("--break-system-packages")
            .args(&missing),
    )
    .context("pip install (the tests read sessions with DuckDB and traces with perfetto)")
}

/// The S3-compatible server the `--store s3://` tests write to: s3s-fs,
/// the s3s project's file-system backend (Debian 12 packages no S3
/// server: no MinIO, Garage or moto).
const S3S_FS: &str = "0.14.1";

fn s3_server() -> anyhow::Result<()> {
    let installed = output(Command::new("cargo").args(["install", "--list"]))
        .is_some_and(|list| list.contains(&format!("s3s-fs v{S3S_FS}:")));
    if installed && output(Command::new("s3s-fs").arg("--help")).is_some() {
        say(&format!("s3s-fs {S3S_FS}: present"));
        return Ok(());
    }
    say(&format!(
        "building s3s-fs {S3S_FS}, an S3-compatible server for the tests (a few minutes)"
    ));
    exec(Command::new("cargo").args([
        "install",
        "s3s-fs",
        "--version",
        &format!("={S3S_FS}"),
        "--features",
        "binary",
        "--locked",
    ]))
    .context("building s3s-fs")
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn say(what: &str) {
    eprintln!("setup: {what}");
}

/// Components of the pinned nightly: rust-src for `-Z build-std`, clippy
/// for the eBPF crate's lint gate (`.ci/run`).
const NIGHTLY_COMPONENTS: &[&str] = &["rust-src", "clippy"];

fn nightly() -> anyhow::Result<()> {
    let installed = output(Command::new("rustup").args([
        "component",
        "list",
        "--installed",
        "--toolchain",
        NIGHTLY,
    ]))
    .unwrap_or_default();
    let missing: Vec<&str> = NIGHTLY_COMPONENTS
        .iter()
        .copied()
        .filter(|c| !installed.lines().any(|l| l.starts_with(c)))
        .collect();
    if missing.is_empty() {
        say(&format!("{NIGHTLY} with {}: present", NIGHTLY_COMPONENTS.join(", ")));
        return Ok(());
    }
    if installed.is_empty() {
        say(&format!("installing {NIGHTLY} (minimal) with {}", NIGHTLY_COMPONENTS.join(", ")));
        let mut install = Command::new("rustup");
        install.args(["toolchain", "install", NIGHTLY, "--profile", "minimal"]);
        for c in NIGHTLY_COMPONENTS {
            install.args(["--component", c]);
        }
        return exec(&mut install).context("installing the nightly toolchain for the eBPF build");
    }
    say(&format!("adding {} to {NIGHTLY}", missing.join(", ")));
    exec(Command::new("rustup").args(["component", "add", "--toolchain", NIGHTLY]).args(&missing))
        .context("adding components to the nightly toolchain")
}

fn dpkg_installed(package: &str) -> bool {
    output(Command::new("dpkg-query").args(["-W", "-f=${Status}", package]))
        .is_some_and(|s| s.contains("install ok installed"))
}

fn apt_packages() -> anyhow::Result<()> {
    // llvm-22-dev for bpf-linker; the compilers and binutils the tests use
    // to build fixtures; util-linux for setpriv; chromium to check
    // report.html headless, graphviz for `debug --svg`; python3-pip for
    // the Python packages the tests use; nats-server for the fleet's tests
    // (aid-agent worker, debug --fleet).
    let wanted = [
        "llvm-22-dev",
        "gcc",
        "g++",
        "binutils",
        "util-linux",
        "chromium",
        "graphviz",
        "python3",
        "python3-pip",
        "nats-server",
    ];
    let missing: Vec<&str> = wanted.iter().copied().filter(|p| !dpkg_installed(p)).collect();
    if missing.is_empty() {
        say(&format!("{}: present", wanted.join(", ")));
        return Ok(());
    }
    say(&format!("installing {} with apt-get", missing.join(", ")));
    let sudo = !nix_is_root();
    let apt = |args: &[&str]| {
        let mut c = if sudo { Command::new("sudo") } else { Command::new("apt-get") };
        if sudo {
            c.arg("apt-get");
        }
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    exec(&mut apt(&["update", "-qq"]))?;
    let mut install = apt(&["install", "-y", "-qq"]);
    install.args(&missing);
    exec(&mut install).context("apt-get install")
}

fn nix_is_root() -> bool {
    output(Command::new("id").arg("-u")).is_some_and(|s| s.trim() == "0")
}

fn bpf_linker() -> anyhow::Result<()> {
    if let Some(v) = output(Command::new("bpf-linker").arg("--version"))
        && v.contains(&format!("bpf-linker {BPF_LINKER}"))
    {
        say(&format!("{}: present", v.trim()));
        return Ok(());
    }
    if !std::path::Path::new(LLVM_PREFIX).join("bin/llvm-config").exists() {
        bail!("{LLVM_PREFIX}/bin/llvm-config missing after installing llvm-22-dev");
    }
    say(&format!("building bpf-linker {BPF_LINKER} against LLVM 22 (a few minutes)"));
    exec(
        Command::new("cargo")
            .args(["install", "bpf-linker", "--version", &format!("~{BPF_LINKER}"), "--locked"])
            .args(["--no-default-features", "--features", "llvm-22"])
            .env("LLVM_PREFIX", LLVM_PREFIX),
    )
    .context("building bpf-linker")
}
