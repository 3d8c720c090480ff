//! Writing a command's output to stdout. A reader that went away (`aid-agent
//! analyze S | head`) ends the output, it is not an error, and never a
//! panic as `print!` would make it.

use std::io::Write as _;

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
