//! Builds the eBPF object with `aya-build` (pinned nightly, `-Z build-std`)
//! and leaves it in `OUT_DIR`, where the agent embeds it.
use anyhow::{Context as _, anyhow};
use aya_build::Toolchain;

/// The nightly that builds the eBPF crate; `cargo xtask setup` installs it.
const NIGHTLY: &str = "nightly-2026-05-20";

fn main() -> anyhow::Result<()> {
    let metadata =
        cargo_metadata::MetadataCommand::new().no_deps().exec().context("cargo metadata")?;
    let package = metadata
        .packages
        .into_iter()
        .find(|p| p.name.as_str() == "aid-ebpf")
        .ok_or_else(|| anyhow!("aid-ebpf package not found"))?;
    let root = package
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent for {}", package.manifest_path))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: package.name.as_str(),
            root_dir: root.as_str(),
            ..Default::default()
        }],
        Toolchain::Custom(NIGHTLY),
    )
}
