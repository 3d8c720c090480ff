//! Writing a command's output to stdout, or to the file `-o FILE` names
//! (`-` being stdout). A reader that went away (`aid-agent analyze S |
//! head`) ends the output, it is not an error, and never a panic as
//! `print!` would make it.

use std::{io::Write as _, path::Path};

use anyhow::Context as _;

/// Whether an output argument (`-o`, `--dot`) means standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Writes `text` to `path`, or to stdout for `-`.
pub fn write_to(path: &Path, text: &str) -> anyhow::Result<()> {
    if is_stdout(path) {
        return emit(text);
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `text` to stdout; a closed pipe ends it quietly.
pub fn emit(text: &str) -> anyhow::Result<()> {
    emit_bytes(text.as_bytes())
}

/// Writes `bytes` (a binary trace, say) to stdout; a closed pipe ends it
/// quietly.
pub fn emit_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing to stdout"))
        }
        _ => Ok(()),
    }
}
