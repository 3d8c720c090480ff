//! What the user sees and presses: progress rendered with indicatif (a bar
//! where the length is known, a spinner where it is not, nothing when
//! stderr is not a terminal), the report's layout for stdout (wrapped to
//! the terminal's width, colour unless `NO_COLOR` is set, plain when
//! redirected), and Ctrl-C turned into a flag the library polls.

use std::{
    io::IsTerminal as _,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{record::progress::Progress, report::Layout};

/// Lines on stderr prefixed `aid: `, phases as progress bars or spinners
/// (only on a terminal).
pub struct Terminal {
    bar: Option<ProgressBar>,
    draw: bool,
}

impl Default for Terminal {
    fn default() -> Self {
        Terminal { bar: None, draw: std::io::stderr().is_terminal() }
    }
}

/// `NO_COLOR` (no-color.org): set to anything but the empty string, no
/// colour anywhere.
pub fn color_allowed() -> bool {
    no_color_allows(std::env::var_os("NO_COLOR"))
}

/// The `NO_COLOR` rule on the variable's value.
fn no_color_allows(value: Option<std::ffi::OsString>) -> bool {
    value.is_none_or(|v| v.is_empty())
}

/// How the report is laid out on stdout: the terminal's width and colour
/// when stdout is a terminal, plain lines otherwise.
pub fn report_layout(verbose: bool, explain: bool) -> Layout {
    let out = std::io::stdout();
    let tty = out.is_terminal();
    let width = if tty {
        Some(terminal_size::terminal_size_of(&out).map_or(80, |(w, _)| usize::from(w.0)))
    } else {
        None
    };
    Layout { width, color: tty && color_allowed(), verbose, explain }
}

impl Progress for Terminal {
    fn say(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("aid: {line}")),
            None => eprintln!("aid: {line}"),
        }
    }

    fn begin(&mut self, what: &str, total: Option<u64>) {
        if let Some(old) = self.bar.take() {
            old.finish_and_clear();
        }
        if !self.draw {
            return;
        }
        // The target is given at creation: a bar moved to another target
        // leaves its first drawing behind on the screen.
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        let template = match total {
            Some(_) => "{prefix} [{bar:25}] {pos}/{len} {wide_msg}",
            None => "{spinner} {prefix} {wide_msg}",
        };
        bar.set_style(
            ProgressStyle::with_template(template).expect("valid template").progress_chars("=> "),
        );
        bar.set_prefix(what.to_owned());
        if total.is_none() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        self.bar = Some(bar);
    }

    fn step(&mut self, status: &str) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(status.to_owned());
        }
    }

    fn step_to(&mut self, pos: u64, status: &str) {
        if let Some(bar) = &self.bar {
            bar.set_position(pos);
            bar.set_message(status.to_owned());
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// What the n-th Ctrl-C / SIGTERM of a command does (n from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnInterrupt {
    /// Set the flag: the command stops gracefully and writes what it has.
    Stop,
    /// Say that the graceful stop goes on (GNU `timeout` and impatient
    /// users send a second signal soon after the first).
    Note,
    /// Exit at once with 130.
    Quit,
}

fn on_interrupt(n: usize) -> OnInterrupt {
    match n {
        1 => OnInterrupt::Stop,
        2 => OnInterrupt::Note,
        _ => OnInterrupt::Quit,
    }
}

/// The line a second Ctrl-C prints.
const STOPPING: &[u8] =
    b"aid: stopping, writing what was recorded (Ctrl-C again to quit at once)\n";

/// Set on the first Ctrl-C / SIGTERM; a second one is noted on stderr and
/// the stop goes on, so the partial report is still written; a third exits
/// at once (130). Installed once, as the command line starts (so a Ctrl-C
/// during start-up is seen too); later calls return the same flag.
pub fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    if let Some(flag) = FLAG.get() {
        return Ok(Arc::clone(flag));
    }
    let flag = Arc::new(AtomicBool::new(false));
    // SIGINT and SIGTERM count together: one stop, whichever asked.
    let count = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let (flag, count) = (Arc::clone(&flag), Arc::clone(&count));
        let action = move || match on_interrupt(count.fetch_add(1, Ordering::SeqCst) + 1) {
            OnInterrupt::Stop => flag.store(true, Ordering::SeqCst),
            OnInterrupt::Note => {
                // SAFETY: write(2) is async-signal-safe; the buffer is a
                // static of the length given. A short or failed write
                // loses only the note.
                let _ = unsafe { libc::write(2, STOPPING.as_ptr().cast(), STOPPING.len()) };
            }
            OnInterrupt::Quit => signal_hook::low_level::exit(i32::from(super::EXIT_INTERRUPTED)),
        };
        // SAFETY: the action is async-signal-safe: atomic operations,
        // write(2) and _exit(2) only; it allocates and locks nothing.
        unsafe { signal_hook::low_level::register(sig, action) }
            .context("installing the Ctrl-C handler")?;
    }
    Ok(Arc::clone(FLAG.get_or_init(|| flag)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_is_honoured() {
        assert!(no_color_allows(None));
        assert!(no_color_allows(Some("".into())));
        assert!(!no_color_allows(Some("1".into())));
    }

    /// The first signal stops, the second only says so, every later one
    /// quits.
    #[test]
    fn a_second_interrupt_lets_the_stop_finish_and_a_third_quits() {
        let seen: Vec<OnInterrupt> = (1..=5).map(on_interrupt).collect();
        use OnInterrupt::*;
        assert_eq!(seen, [Stop, Note, Quit, Quit, Quit]);
    }
}
