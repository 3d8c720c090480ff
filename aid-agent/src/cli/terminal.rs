//! What the user sees and presses: progress rendered with indicatif (a bar
//! where the length is known, a spinner where it is not) on a terminal,
//! and as a one-line note every [`NOTE_EVERY`] when stderr is not one (a
//! log or CI must see that a long phase goes on), the report's layout for stdout (wrapped to
//! the terminal's width, colour unless `NO_COLOR` is set, plain when
//! redirected), and Ctrl-C turned into a flag the library polls.

use std::{
    io::IsTerminal as _,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{record::progress::Progress, report::Layout};

/// Lines on stderr prefixed `aid: `, phases as progress bars or spinners
/// on a terminal, as [`Notes`] otherwise.
pub struct Terminal {
    bar: Option<ProgressBar>,
    draw: bool,
    notes: Notes,
    /// The clock the notes are timed by.
    start: Instant,
}

impl Default for Terminal {
    fn default() -> Self {
        Terminal {
            bar: None,
            draw: std::io::stderr().is_terminal(),
            notes: Notes::new(NOTE_EVERY),
            start: Instant::now(),
        }
    }
}

/// How often a phase's progress is noted when stderr is not a terminal:
/// `slice --verify` once ran 98 s redirected with nothing printed.
pub const NOTE_EVERY: Duration = Duration::from_secs(5);

/// Progress for a stderr that is not a terminal: at a step, a line such as
/// "verifying: 12 of 40 (forced: 3 of 12 usable re-runs failed)" when at
/// least `period` went by since the last line (or since the first phase
/// began: a short command prints none). The clock runs across phases, so
/// many short phases (debug's rounds) are noted too. Times are given by
/// the caller, so a test drives it with a clock of its own.
struct Notes {
    period: Duration,
    what: String,
    total: Option<u64>,
    pos: u64,
    /// When the last line was printed, or the first phase began.
    last: Option<Duration>,
}

impl Notes {
    fn new(period: Duration) -> Self {
        Notes { period, what: String::new(), total: None, pos: 0, last: None }
    }

    fn begin(&mut self, what: &str, total: Option<u64>, now: Duration) {
        self.what = what.to_owned();
        self.total = total;
        self.pos = 0;
        self.last.get_or_insert(now);
    }

    /// The phase reached `pos`: the line to print, if one is due.
    fn step_to(&mut self, pos: u64, status: &str, now: Duration) -> Option<String> {
        self.pos = pos;
        let last = *self.last.get_or_insert(now);
        if now.saturating_sub(last) < self.period {
            return None;
        }
        self.last = Some(now);
        let at = match self.total {
            Some(total) => format!("{pos} of {total}"),
            None => pos.to_string(),
        };
        let status = if status.is_empty() { String::new() } else { format!(" ({status})") };
        Some(format!("{}: {at}{status}", self.what))
    }

    fn step(&mut self, status: &str, now: Duration) -> Option<String> {
        self.step_to(self.pos + 1, status, now)
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
            self.notes.begin(what, total, self.start.elapsed());
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
        } else if !self.draw
            && let Some(line) = self.notes.step(status, self.start.elapsed())
        {
            eprintln!("aid: {line}");
        }
    }

    fn step_to(&mut self, pos: u64, status: &str) {
        if let Some(bar) = &self.bar {
            bar.set_position(pos);
            bar.set_message(status.to_owned());
        } else if !self.draw
            && let Some(line) = self.notes.step_to(pos, status, self.start.elapsed())
        {
            eprintln!("aid: {line}");
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

    /// Regression: `slice --verify` ran 98 s printing nothing when stderr
    /// was not a terminal. A line at the first step 5 s or more after the
    /// last one (or the first phase's start), none before, the clock
    /// running on across phases.
    #[test]
    fn a_long_phase_is_noted_every_few_seconds_off_a_terminal() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let mut n = Notes::new(NOTE_EVERY);
        n.begin("verifying", Some(40), s(100));
        assert_eq!(n.step("forced: 0 of 1 usable re-runs failed", s(102)), None);
        assert_eq!(n.step("forced: 1 of 2 usable re-runs failed", ms(104_999)), None);
        assert_eq!(
            n.step("forced: 2 of 3 usable re-runs failed", s(105)).as_deref(),
            Some("verifying: 3 of 40 (forced: 2 of 3 usable re-runs failed)")
        );
        assert_eq!(n.step("x", s(109)), None);
        assert_eq!(n.step_to(9, "", s(111)).as_deref(), Some("verifying: 9 of 40"));
        // A new phase keeps the clock: 4 s after the last line, none; at 5 s, one.
        n.begin("re-running", None, s(112));
        assert_eq!(n.step("1 failing", s(115)), None);
        assert_eq!(n.step("2 failing", s(116)).as_deref(), Some("re-running: 2 (2 failing)"));
        // A step of a phase that began long after the last line is noted.
        n.begin("round 2 on P3", Some(20), s(200));
        assert_eq!(
            n.step_to(0, "no usable run yet", s(201)).as_deref(),
            Some("round 2 on P3: 0 of 20 (no usable run yet)")
        );
    }

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
