//! The report's section on what the other explainers add beside the
//! causal path (`debug::beside`): the top mined pattern, the comparison
//! chain of one failing/passing pair, and the loaded pattern predicates.
//! Kept apart from the rest of the report so that the two can change
//! independently; empty when there is nothing to add.

use std::{fmt::Write as _, path::Path};

use anyhow::Context as _;

use super::{confirmed_because, exclusion_words};
use crate::{
    analysis::Exclusion,
    causal::Reason,
    debug::beside::{Beside, Fate, Shape, TestedAs},
};

/// The section's lines, each at its depth (0: an item, 1: its detail),
/// for the words and for report.html alike (empty: nothing to add).
pub fn lines(b: &Beside) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    if let Some(p) = &b.pattern {
        out.push((
            0,
            format!(
                "Mined pattern (in {} of {} failing and {} of {} passing runs), {}: {}",
                p.failing_runs,
                p.failing_total,
                p.passing_runs,
                p.passing_total,
                how_tested(p.shape, &p.tested),
                p.text
            ),
        ));
        if let Some(d) = p.deps.first() {
            let more = match p.deps.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            out.push((1, format!("dependence: {d}{more}")));
        }
        tested_lines(&p.tested, p.noun, 1, &mut out);
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
                    "{} holds in {} of {} failing and {} of {} passing runs (precision {:.2}, recall {:.2}{tag}): {}; {}",
                    p.id,
                    p.failing_true,
                    p.failing,
                    p.passing_true,
                    p.passing,
                    p.precision,
                    p.recall,
                    p.description,
                    how_tested(p.shape, &p.tested)
                ),
            ));
            tested_lines(&p.tested, "run", 2, &mut out);
        }
    }
    for n in &b.notes {
        out.push((0, format!("({n})")));
    }
    out
}

/// Whether a mined pattern was tested, through the predicates of the
/// session that state how its calls meet (`tested`), in words.
fn how_tested(shape: Option<Shape>, tested: &[TestedAs]) -> String {
    match shape {
        None => format!("{UNTESTED_PATTERN}; no two of its threads touch one object"),
        Some(_) if tested.is_empty() => {
            format!("{UNTESTED_PATTERN}; no predicate of the session states how its calls meet")
        }
        Some(shape) if tested.iter().any(|t| t.fate.tested()) => {
            format!("{}, {TESTED_PATTERN}", shape_words(shape))
        }
        Some(shape) => format!("{}, {UNREACHED_PATTERN}", shape_words(shape)),
    }
}

/// The predicates that test a pattern, each with what became of it, at
/// `depth` (the first [`TESTED_SHOWN`], then how many more).
fn tested_lines(tested: &[TestedAs], noun: &str, depth: usize, out: &mut Vec<(usize, String)>) {
    for t in tested.iter().take(TESTED_SHOWN) {
        out.push((depth, format!("{} {}: {}", t.pred, t.description, fate_words(&t.fate, noun))));
    }
    if tested.len() > TESTED_SHOWN {
        out.push((depth, format!("(and {} more in beside.json)", tested.len() - TESTED_SHOWN)));
    }
}

/// Why a mined pattern beside the path was not tested (issue 23: what is
/// shown beside the causal path is tested or says why it was not).
pub const UNTESTED_PATTERN: &str = "untested (aid has no intervention that keeps a pattern of accesses from occurring; the predicates of its calls are what the rounds test)";

/// How a mined pattern was tested: through the session's predicates that
/// state how its calls meet, listed under it with their verdicts.
pub const TESTED_PATTERN: &str =
    "tested through the predicates that state how its calls meet (below, with what became of each)";

/// How a mined pattern was not tested although predicates state how its
/// calls meet: no round decided any of them.
pub const UNREACHED_PATTERN: &str =
    "untested: no round decided a predicate that states how its calls meet (below, with why)";

/// The predicates shown under a mined pattern (`beside.json` keeps more).
const TESTED_SHOWN: usize = 3;

/// How a pattern's threads meet, in words.
fn shape_words(shape: Shape) -> &'static str {
    match shape {
        Shape::Between => "another thread's accesses come between two of one thread's",
        Shape::Atomicity => {
            "an atomicity violation: another thread writes an object between one thread's read of it and its write"
        }
        Shape::Before => "one thread's accesses come before another thread's",
    }
}

/// What became of a predicate under a mined pattern, in words.
fn fate_words(fate: &Fate, noun: &str) -> String {
    match fate {
        Fate::RootCause => "the root cause, confirmed".into(),
        Fate::OnPath => "confirmed, on the causal path".into(),
        // A round that stopped the failure confirms; a pruned predicate
        // never carries that reason, but the words stay true if one did.
        Fate::Pruned { reason: Reason::StoppedFailure { round } } => {
            format!("round {}: intervening on it stopped the failure", round + 1)
        }
        Fate::Pruned { reason } => format!("ruled out ({})", confirmed_because(reason, &[], noun)),
        Fate::SetAside => "set aside: every round that could test it was confounded".into(),
        Fate::Unresolved => "left undecided by contradictory evidence".into(),
        Fate::NotReached => "a candidate that no round decided before the session ended".into(),
        Fate::Excluded { why: Exclusion::SameAs { id } } => {
            format!("not tested on its own: the same event as the better-ranked {id}")
        }
        Fate::Excluded { why } => {
            format!(
                "not tested ({})",
                exclusion_words(*why).map_or(String::new(), |(_, hint)| hint)
            )
        }
        Fate::SameRunsAs { id } => format!("not a candidate: it held in the same {noun}s as {id}"),
        Fate::NotSeparating { failing_true, failing, passing_true, passing } => format!(
            "not a candidate: it held in {failing_true} of {failing} failing and {passing_true} of {passing} passing {noun}s"
        ),
    }
}

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
    use crate::{
        debug::beside::{Chain, PatternTruth, TestedAs, TopPattern},
        predicates::PredId,
    };

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
                shape: None,
                tested: Vec::new(),
                noun: "run",
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
                shape: None,
                tested: Vec::new(),
            }],
            notes: vec!["no comparison chain: why".into()],
        };
        assert_eq!(
            render(&b),
            "\nBeside the causal path:\n\
             \x20 Mined pattern (in 9 of 10 failing and 0 of 12 passing runs), untested (aid has no intervention that keeps a pattern of accesses from occurring; the predicates of its calls are what the rounds test); no two of its threads touch one object: ⟨w2:load(c) | w1:store(c)⟩\n\
             \x20   dependence: R w2:load(c) → W w1:store(c) (anti)\n\
             \x20 Run 4 (failed) against run 1 (passed), from the dual slice, untested (`aid-agent compare --fail 4 --pass 1` tests the links it can force, with re-runs):\n\
             \x20   order w2.load#1 ≺ w1.store#1 (FAIL) vs ≻ (PASS) ⇒ the run fails\n\
             \x20 Pattern predicates from p.json:\n\
             \x20   mine:1.1 holds in 10 of 10 failing and 0 of 12 passing runs (precision 1.00, recall 1.00, fully discriminative): pattern ⟨…⟩ occurs; untested (aid has no intervention that keeps a pattern of accesses from occurring; the predicates of its calls are what the rounds test); no two of its threads touch one object\n\
             \x20 (no comparison chain: why)\n"
        );
    }

    /// A pattern's line says whether a round tested a predicate stating
    /// how its calls meet, and each such predicate says what became of it.
    #[test]
    fn a_pattern_says_how_it_was_tested() {
        let tested = |pred: u32, fate: Fate| TestedAs {
            pred: PredId(pred),
            description: format!("d{pred}"),
            fate,
        };
        let mut p = TopPattern {
            text: "⟨a | b | a⟩".into(),
            deps: Vec::new(),
            rel_supp: 1.0,
            failing_runs: 5,
            failing_total: 5,
            passing_runs: 1,
            passing_total: 8,
            shape: Some(Shape::Between),
            tested: vec![
                tested(3, Fate::RootCause),
                tested(4, Fate::Pruned { reason: Reason::HeldWithoutFailure { round: 1 } }),
                tested(5, Fate::Excluded { why: Exclusion::SameAs { id: PredId(3) } }),
                tested(6, Fate::SetAside),
            ],
            noun: "unit",
        };
        let b = |p: &TopPattern| Beside { pattern: Some(p.clone()), ..Beside::default() };
        assert_eq!(
            render(&b(&p)),
            "\nBeside the causal path:\n\
             \x20 Mined pattern (in 5 of 5 failing and 1 of 8 passing runs), another thread's accesses come between two of one thread's, tested through the predicates that state how its calls meet (below, with what became of each): ⟨a | b | a⟩\n\
             \x20   P3 d3: the root cause, confirmed\n\
             \x20   P4 d4: ruled out (round 2: it held in a unit that did not fail)\n\
             \x20   P5 d5: not tested on its own: the same event as the better-ranked P3\n\
             \x20   (and 1 more in beside.json)\n"
        );
        // No round decided any: the pattern is untested, and each says why.
        p.shape = Some(Shape::Before);
        p.noun = "run";
        p.tested = vec![
            tested(7, Fate::NotReached),
            tested(8, Fate::Excluded { why: Exclusion::NoIntervention }),
            tested(9, Fate::SameRunsAs { id: PredId(2) }),
        ];
        assert_eq!(
            render(&b(&p)),
            "\nBeside the causal path:\n\
             \x20 Mined pattern (in 5 of 5 failing and 1 of 8 passing runs), one thread's accesses come before another thread's, untested: no round decided a predicate that states how its calls meet (below, with why): ⟨a | b | a⟩\n\
             \x20   P7 d7: a candidate that no round decided before the session ended\n\
             \x20   P8 d8: not tested (no intervention can force it)\n\
             \x20   P9 d9: not a candidate: it held in the same runs as P2\n"
        );
        p.tested = vec![tested(
            1,
            Fate::NotSeparating { failing_true: 4, failing: 5, passing_true: 2, passing: 8 },
        )];
        assert!(render(&b(&p)).ends_with(
            "P1 d1: not a candidate: it held in 4 of 5 failing and 2 of 8 passing runs\n"
        ));
        p.shape = Some(Shape::Atomicity);
        assert!(render(&b(&p)).contains(
            "runs), an atomicity violation: another thread writes an object between one thread's read of it and its write, untested: no round decided"
        ));
        p.tested.clear();
        assert!(render(&b(&p)).contains(
            "untested (aid has no intervention that keeps a pattern of accesses from occurring; the predicates of its calls are what the rounds test); no predicate of the session states how its calls meet: ⟨"
        ));
    }

    /// A loaded pattern predicate says how it was tested, and lists the
    /// predicates that state how its calls meet under it.
    #[test]
    fn a_loaded_pattern_predicate_says_how_it_was_tested() {
        let b = Beside {
            patterns_file: Some("p.json".into()),
            pattern_predicates: vec![PatternTruth {
                id: "mine:1.1".into(),
                description: "pattern ⟨a | b | a⟩ occurs".into(),
                failing_true: 5,
                failing: 5,
                passing_true: 0,
                passing: 8,
                precision: 1.0,
                recall: 1.0,
                importance: 1.0,
                fully_discriminative: true,
                shape: Some(Shape::Between),
                tested: vec![TestedAs {
                    pred: PredId(3),
                    description: "d3".into(),
                    fate: Fate::RootCause,
                }],
            }],
            ..Beside::default()
        };
        assert_eq!(
            render(&b),
            "\nBeside the causal path:\n\
             \x20 Pattern predicates from p.json:\n\
             \x20   mine:1.1 holds in 5 of 5 failing and 0 of 8 passing runs (precision 1.00, recall 1.00, fully discriminative): pattern ⟨a | b | a⟩ occurs; another thread's accesses come between two of one thread's, tested through the predicates that state how its calls meet (below, with what became of each)\n\
             \x20     P3 d3: the root cause, confirmed\n"
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
