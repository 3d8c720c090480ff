//! Building this crate depends on the `bpf-linker` binary on PATH, which
//! cargo cannot see: rebuild when it changes.
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
