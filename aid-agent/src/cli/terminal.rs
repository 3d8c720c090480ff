//! What the user sees and presses: progress rendered with indicatif, and
//! Ctrl-C turned into a flag the library polls.

use std::sync::{Arc, OnceLock, atomic::AtomicBool};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::record::progress::Progress;

/// Lines on stderr prefixed `aid: `, phases as progress bars.
#[derive(Default)]
pub struct Terminal {
    bar: Option<ProgressBar>,
}

impl Progress for Terminal {
    fn say(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("aid: {line}")),
            None => eprintln!("aid: {line}"),
        }
    }

    fn begin(&mut self, what: &str, total: Option<u64>) {
        let bar = ProgressBar::new(total.unwrap_or(0));
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(what.to_owned());
        bar.set_draw_target(ProgressDrawTarget::stderr());
        self.bar = Some(bar);
    }

    fn step(&mut self, status: &str) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(status.to_owned());
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Set on the first Ctrl-C / SIGTERM; a second one exits at once (130).
/// Installed once, as the command line starts (so a Ctrl-C during start-up
/// is seen too); later calls return the same flag.
pub fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    if let Some(flag) = FLAG.get() {
        return Ok(Arc::clone(flag));
    }
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))
            .context("installing the Ctrl-C handler")?;
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("installing the Ctrl-C handler")?;
    }
    Ok(Arc::clone(FLAG.get_or_init(|| flag)))
}
