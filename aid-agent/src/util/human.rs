//! Numbers for people: durations rounded to what a reader can take in at a
//! glance ("792 µs", "8.2 ms", "1.5 s", "2 min 5 s"), counts with their
//! noun ("1 run", "3 runs"), and lists cut to their first few names.

/// `ns` in the largest unit that keeps the number at least 1, rounded to
/// three significant digits without trailing zeros: 791_975 → "792 µs",
/// 8_200_000 → "8.2 ms", 15_634_000 → "15.6 ms". From a minute on, minutes
/// and whole seconds ("2 min 5 s").
pub fn duration(ns: u64) -> String {
    // From 59.95 s on, "60 s" would be the three-digit rounding: minutes.
    if ns >= 59_950_000_000 {
        let secs = (ns + 500_000_000) / 1_000_000_000;
        return match secs % 60 {
            0 => format!("{} min", secs / 60),
            s => format!("{} min {s} s", secs / 60),
        };
    }
    let (value, unit) = match ns {
        1_000_000_000.. => (ns as f64 / 1e9, "s"),
        1_000_000.. => (ns as f64 / 1e6, "ms"),
        1_000.. => (ns as f64 / 1e3, "µs"),
        _ => return format!("{ns} ns"),
    };
    // Three significant digits; a value that rounds up to 1000 moves to
    // the next unit ("999.9 µs" is "1 ms").
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{value:.decimals$}");
    if text == "1000" {
        let next = match unit {
            "µs" => "ms",
            "ms" => "s",
            _ => return "1 min".into(),
        };
        return format!("1 {next}");
    }
    let text =
        if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text} {unit}")
}

/// "1 run", "2 runs": a count and its noun, plural with an `s`.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// The first few names of a list, for a one-line message.
pub fn summarize<S: AsRef<str>>(names: &[S]) -> String {
    const SHOWN: usize = 8;
    let mut s = names.iter().take(SHOWN).map(AsRef::as_ref).collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(", and {} more", names.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_rounded_for_people() {
        assert_eq!(duration(0), "0 ns");
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_000), "1 µs");
        assert_eq!(duration(1_234), "1.23 µs");
        assert_eq!(duration(791_975), "792 µs");
        assert_eq!(duration(812_000), "812 µs");
        assert_eq!(duration(999_999), "1 ms");
        assert_eq!(duration(8_200_000), "8.2 ms");
        assert_eq!(duration(15_634_000), "15.6 ms");
        assert_eq!(duration(1_500_000_000), "1.5 s");
        assert_eq!(duration(59_999_999_999), "1 min");
        assert_eq!(duration(90_000_000_000), "1 min 30 s");
        assert_eq!(duration(120_000_000_000), "2 min");
    }

    #[test]
    fn counts_take_their_plural() {
        assert_eq!(count(1u32, "run"), "1 run");
        assert_eq!(count(0u32, "run"), "0 runs");
        assert_eq!(count(13u64, "unit"), "13 units");
    }
}
