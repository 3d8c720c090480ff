//! The report's section on what the other explainers add beside the
//! causal path (`debug::beside`): the top mined pattern, the comparison
//! chain of one failing/passing pair, and the loaded pattern predicates.
//! Kept apart from the rest of the report so that the two can change
//! independently; empty when there is nothing to add.

use std::{fmt::Write as _, path::Path};

use anyhow::Context as _;

use crate::debug::beside::Beside;

/// The section in words, to follow the report (empty: nothing to add).
pub fn render(b: &Beside) -> String {
    let mut s = String::new();
    if let Some(p) = &b.pattern {
        let _ = writeln!(
            s,
            "  Mined pattern (in {} of {} failing and {} of {} passing runs): {}",
            p.failing_runs, p.failing_total, p.passing_runs, p.passing_total, p.text
        );
        if let Some(d) = p.deps.first() {
            let more = match p.deps.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            let _ = writeln!(s, "    dependence: {d}{more}");
        }
    }
    if let Some(c) = &b.chain {
        let _ = writeln!(
            s,
            "  Run {} (failed) against run {} (passed), from the dual slice, untested:",
            c.fail, c.pass
        );
        let _ = writeln!(s, "    {}", c.steps.join(" ⇒ "));
    }
    if let Some(file) = &b.patterns_file {
        let _ = writeln!(s, "  Pattern predicates from {file}:");
        for p in &b.pattern_predicates {
            let tag = if p.fully_discriminative { ", fully discriminative" } else { "" };
            let _ = writeln!(
                s,
                "    {} holds in {} of {} failing and {} of {} passing runs (precision {:.2}, recall {:.2}{tag}): {}",
                p.id,
                p.failing_true,
                p.failing,
                p.passing_true,
                p.passing,
                p.precision,
                p.recall,
                p.description
            );
        }
    }
    for n in &b.notes {
        let _ = writeln!(s, "  ({n})");
    }
    if s.is_empty() { s } else { format!("\nBeside the causal path:\n{s}") }
}

/// Writes `beside.json` into the session directory.
pub fn save(dir: &Path, b: &Beside) -> anyhow::Result<()> {
    let p = dir.join("beside.json");
    std::fs::write(&p, serde_json::to_string_pretty(b)? + "\n")
        .with_context(|| format!("writing {}", p.display()))
}
