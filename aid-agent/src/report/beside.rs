//! The report's section on what the other explainers add beside the
//! causal path (`debug::beside`): the top mined pattern, the comparison
//! chain of one failing/passing pair, and the loaded pattern predicates.
//! Kept apart from the rest of the report so that the two can change
//! independently; empty when there is nothing to add.

use std::{fmt::Write as _, path::Path};

use anyhow::Context as _;

use crate::debug::beside::Beside;

/// The section's lines, each at its depth (0: an item, 1: its detail),
/// for the words and for report.html alike (empty: nothing to add).
pub fn lines(b: &Beside) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    if let Some(p) = &b.pattern {
        out.push((
            0,
            format!(
                "Mined pattern (in {} of {} failing and {} of {} passing runs), {UNTESTED_PATTERN}: {}",
                p.failing_runs, p.failing_total, p.passing_runs, p.passing_total, p.text
            ),
        ));
        if let Some(d) = p.deps.first() {
            let more = match p.deps.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            out.push((1, format!("dependence: {d}{more}")));
        }
    }
    if let Some(c) = &b.chain {
        out.push((
            0,
            format!(
                "Run {} (failed) against run {} (passed), from the dual slice, untested (`aid-agent compare --fail {} --pass {}` tests the links it can force, with re-runs):",
                c.fail, c.pass, c.fail, c.pass
            ),
        ));
        out.push((1, shown_chain(&c.steps)));
    }
    if let Some(file) = &b.patterns_file {
        out.push((0, format!("Pattern predicates from {file}:")));
        for p in &b.pattern_predicates {
            let tag = if p.fully_discriminative { ", fully discriminative" } else { "" };
            out.push((
                1,
                format!(
                    "{} holds in {} of {} failing and {} of {} passing runs (precision {:.2}, recall {:.2}{tag}): {}",
                    p.id,
                    p.failing_true,
                    p.failing,
                    p.passing_true,
                    p.passing,
                    p.precision,
                    p.recall,
                    p.description
                ),
            ));
        }
    }
    for n in &b.notes {
        out.push((0, format!("({n})")));
    }
    out
}

/// Why a mined pattern beside the path was not tested (issue 23: what is
/// shown beside the causal path is tested or says why it was not).
pub const UNTESTED_PATTERN: &str = "untested (aid has no intervention that keeps a pattern of accesses from occurring; the predicates of its calls are what the rounds test)";

/// The section's heading, in words and in report.html.
pub const HEADING: &str = "Beside the causal path";

/// The section in words, to follow the report (empty: nothing to add).
pub fn render(b: &Beside) -> String {
    let lines = lines(b);
    if lines.is_empty() {
        return String::new();
    }
    let mut s = format!("\n{HEADING}:\n");
    for (depth, line) in lines {
        let _ = writeln!(s, "{}{line}", "  ".repeat(depth + 1));
    }
    s
}

/// Steps of a comparison chain shown at most, and differences per step:
/// a program with thousands of calls can give a chain of hundreds of
/// steps, each joining hundreds of differences (one line of half a
/// megabyte on inventory-sixty); `beside.json` keeps the whole chain.
const SHOWN_STEPS: usize = 8;
const SHOWN_PARTS: usize = 3;

/// The chain in one line, long steps and long chains shortened.
fn shown_chain(steps: &[String]) -> String {
    let step = |t: &String| -> String {
        let parts: Vec<&str> = t.split(" + ").collect();
        if parts.len() <= SHOWN_PARTS {
            return t.clone();
        }
        format!("{} (+{} more)", parts[..SHOWN_PARTS].join(" + "), parts.len() - SHOWN_PARTS)
    };
    if steps.len() <= SHOWN_STEPS {
        return steps.iter().map(step).collect::<Vec<_>>().join(" ⇒ ");
    }
    let (head, tail) = (SHOWN_STEPS / 2, SHOWN_STEPS / 2 - 1);
    let mut out: Vec<String> = steps[..head].iter().map(step).collect();
    out.push(format!("… {} more steps (beside.json has them all) …", steps.len() - head - tail));
    out.extend(steps[steps.len() - tail..].iter().map(step));
    out.join(" ⇒ ")
}

/// Writes `beside.json` into the session directory, and the section at
/// the end of its `report.txt` (written before, by `report::save`).
pub fn save(dir: &Path, b: &Beside) -> anyhow::Result<()> {
    let p = dir.join("beside.json");
    std::fs::write(&p, serde_json::to_string_pretty(b)? + "\n")
        .with_context(|| format!("writing {}", p.display()))?;
    crate::store::hand_over(&p);
    let section = render(b);
    let txt = dir.join("report.txt");
    if section.is_empty() || !txt.exists() {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&txt)
        .with_context(|| format!("opening {}", txt.display()))?;
    std::io::Write::write_all(&mut file, section.as_bytes())
        .with_context(|| format!("writing {}", txt.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debug::beside::{Chain, PatternTruth, TopPattern};

    /// The section, exactly; nothing at all when there is nothing to add.
    #[test]
    fn the_section_in_words() {
        assert_eq!(render(&Beside::default()), "");
        let b = Beside {
            pattern: Some(TopPattern {
                text: "⟨w2:load(c) | w1:store(c)⟩".into(),
                deps: vec!["R w2:load(c) → W w1:store(c) (anti)".into()],
                rel_supp: 1.0,
                failing_runs: 9,
                failing_total: 10,
                passing_runs: 0,
                passing_total: 12,
            }),
            chain: Some(Chain {
                fail: 4,
                pass: 1,
                steps: vec![
                    "order w2.load#1 ≺ w1.store#1 (FAIL) vs ≻ (PASS)".into(),
                    "the run fails".into(),
                ],
            }),
            patterns_file: Some("p.json".into()),
            pattern_predicates: vec![PatternTruth {
                id: "mine:1.1".into(),
                description: "pattern ⟨…⟩ occurs".into(),
                failing_true: 10,
                failing: 10,
                passing_true: 0,
                passing: 12,
                precision: 1.0,
                recall: 1.0,
                importance: 1.0,
                fully_discriminative: true,
            }],
            notes: vec!["no comparison chain: why".into()],
        };
        assert_eq!(
            render(&b),
            "\nBeside the causal path:\n\
             \x20 Mined pattern (in 9 of 10 failing and 0 of 12 passing runs), untested (aid has no intervention that keeps a pattern of accesses from occurring; the predicates of its calls are what the rounds test): ⟨w2:load(c) | w1:store(c)⟩\n\
             \x20   dependence: R w2:load(c) → W w1:store(c) (anti)\n\
             \x20 Run 4 (failed) against run 1 (passed), from the dual slice, untested (`aid-agent compare --fail 4 --pass 1` tests the links it can force, with re-runs):\n\
             \x20   order w2.load#1 ≺ w1.store#1 (FAIL) vs ≻ (PASS) ⇒ the run fails\n\
             \x20 Pattern predicates from p.json:\n\
             \x20   mine:1.1 holds in 10 of 10 failing and 0 of 12 passing runs (precision 1.00, recall 1.00, fully discriminative): pattern ⟨…⟩ occurs\n\
             \x20 (no comparison chain: why)\n"
        );
    }

    /// A long chain of long steps is shortened to a readable line.
    #[test]
    fn a_long_chain_is_shortened() {
        let many = |n: usize| (1..=n).map(|i| format!("d{i}")).collect::<Vec<_>>().join(" + ");
        let steps: Vec<String> =
            (1..=20).map(|i| if i == 1 { many(5) } else { format!("s{i}") }).collect();
        assert_eq!(
            shown_chain(&steps),
            "d1 + d2 + d3 (+2 more) ⇒ s2 ⇒ s3 ⇒ s4 ⇒ … 13 more steps (beside.json has them all) … ⇒ s18 ⇒ s19 ⇒ s20"
        );
        let short = vec!["a + b".to_owned(), "the run fails".to_owned()];
        assert_eq!(shown_chain(&short), "a + b ⇒ the run fails");
    }

    /// Regression: `report.txt` lacked the section the terminal showed.
    #[test]
    fn report_txt_ends_with_the_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.txt"), "Root cause: x\n").unwrap();
        let b = Beside { notes: vec!["why".into()], ..Beside::default() };
        save(dir.path(), &b).unwrap();
        let txt = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
        assert_eq!(txt, "Root cause: x\n\nBeside the causal path:\n  (why)\n");
        assert!(dir.path().join("beside.json").exists());
    }
}
