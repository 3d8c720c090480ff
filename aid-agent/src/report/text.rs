//! The report in words, for the terminal and `report.txt`: wrapped to the
//! terminal's width with hanging indents (plain lines when not a
//! terminal), one bullet per effect, the values the runs showed, rounded
//! durations; statistics and the TAGT comparison with `-v`, a short guide
//! with `--explain`. The jargon is said in words where it appears.

use std::fmt::Write as _;

use super::{DebugReport, facts::PredicateView};
use crate::util::human::{count, duration};

/// How the words are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Wrap to this many columns; None: one line per paragraph.
    pub width: Option<usize>,
    /// ANSI bold for headings.
    pub color: bool,
    /// Statistics and the TAGT comparison.
    pub verbose: bool,
    /// The "how to read this" guide.
    pub explain: bool,
}

/// The guide `--explain` prints first: five lines, each under 80 columns
/// with its indent.
pub const HOW_TO_READ: [&str; 5] = [
    "A predicate: something one call did in every failing run and no passing one.",
    "aid orders them in time, then reruns with one forced back (an intervention).",
    "If that stops the failure, it is a cause; the first cause is the root cause.",
    "\"call 2 of f on worker#1\": the 2nd call of f on the 1st thread named worker.",
    "Evidence counts runs; report.html shows the graph and a timeline of two runs.",
];

struct Out<'l> {
    s: String,
    layout: &'l Layout,
}

impl Out<'_> {
    /// A paragraph: `first` before its first line, `rest` before the
    /// others, wrapped to the width.
    fn para(&mut self, first: &str, rest: &str, text: &str) {
        match self.layout.width {
            Some(w) => {
                let opts = textwrap::Options::new(w.max(40))
                    .initial_indent(first)
                    .subsequent_indent(rest)
                    .break_words(false);
                for line in textwrap::wrap(text, opts) {
                    let _ = writeln!(self.s, "{}", line.trim_end());
                }
            }
            None => {
                let _ = writeln!(self.s, "{first}{text}");
            }
        }
    }

    fn heading(&mut self, text: &str) {
        if self.layout.color {
            let _ = writeln!(self.s, "\x1b[1m{text}\x1b[0m");
        } else {
            let _ = writeln!(self.s, "{text}");
        }
    }

    fn blank(&mut self) {
        if !self.s.is_empty() && !self.s.ends_with("\n\n") {
            self.s.push('\n');
        }
    }
}

/// Statistics of one predicate in words (for `-v`).
fn scores(link: &super::Link) -> Option<String> {
    let s = link.scores?;
    Some(format!(
        "statistics: held in {} of {} failing runs and {} passing runs; CBI importance {:.2}, increase {:.2}",
        s.counts.failing_true,
        s.counts.failing_observed.max(s.counts.failing_true),
        s.counts.passing_true,
        s.importance,
        s.increase
    ))
}

/// The report in words.
pub fn render(r: &DebugReport<'_>, layout: &Layout) -> String {
    let mut o = Out { s: String::new(), layout };
    if layout.explain {
        o.heading("How to read this");
        for line in HOW_TO_READ {
            o.para("  ", "  ", line);
        }
        o.blank();
    }
    observed(&mut o, r);
    o.blank();
    match (&r.root_cause_id, r.discovery) {
        (Some(_), Some(_)) => causal_path(&mut o, r),
        (None, _) if r.interrupted.is_some() => interrupted(&mut o, r),
        (None, _) if r.not_started.is_some() => not_started(&mut o, r),
        (None, Some(_)) => {
            o.para(
                "",
                "",
                "No cause was confirmed: no intervention on the candidates stopped the failure.",
            );
            if !r.unresolved.is_empty() {
                o.para("", "", "Left undecided by contradictory evidence:");
                bullets(&mut o, &r.unresolved);
            }
        }
        (_, None) => {
            let noun = r.noun;
            o.para(
                "",
                "",
                &format!(
                    "No predicate both held in every failing {noun} and in no passing one and could be intervened on, so no cause could be tested. `aid-agent analyze` ranks what the {noun}s showed; tracing more functions (--trace) often helps."
                ),
            );
        }
    }
    cost(&mut o, r);
    left_out(&mut o, r);
    o.s
}

/// The first paragraph: how many runs were observed and how (noise,
/// lost events), with the predicate statistics under `-v`. Its own
/// function because it is the one part of the report every outcome shares.
fn observed(o: &mut Out<'_>, r: &DebugReport<'_>) {
    let noun = r.noun;
    let ob = r.observed;
    let amplified = match (&ob.noise, ob.amplified) {
        (Some(words), _) => format!(" (failures made more frequent with {words})"),
        (None, Some((sites, us))) => format!(
            " (failures made more frequent with noise at synchronisation points and traced calls: {sites} points per {noun}, holds up to {})",
            duration(us * 1000)
        ),
        (None, None) => String::new(),
    };
    let incomplete = match ob.incomplete {
        0 => String::new(),
        n => format!("; {} lost events and were left out", count(n, noun)),
    };
    let jobs = super::jobs_words(ob, noun);
    o.para(
        "",
        "",
        &format!(
            "Observed {}: {} failing, {} passing{amplified}{incomplete}{jobs}.",
            count(ob.runs, noun),
            ob.failing,
            ob.passing
        ),
    );
    if let Some(line) = &ob.tracer {
        o.para("", "", &format!("{}{}.", line[..1].to_uppercase(), &line[1..]));
    }
    if o.layout.verbose {
        let a = &r.analysis;
        o.para(
            "",
            "  ",
            &format!(
                "Statistics: {} predicates; {} fully discriminative (held in every failing {noun} and in no passing one); {} of those can be intervened on (aid can force them back to their passing behaviour).",
                a.predicates,
                a.fully_discriminative,
                a.candidates.len()
            ),
        );
    }
}

/// The confirmed root cause and the numbered path from it to the failure,
/// each link with its evidence, intervention and effects. Apart from
/// `render` because it is the body of one outcome, as long as the others
/// together.
fn causal_path(o: &mut Out<'_>, r: &DebugReport<'_>) {
    let root = r.path.first().map_or("", |l| l.structured.headline.as_str());
    o.para("", "  ", &format!("Root cause: {root}"));
    o.blank();
    if !r.triggers.is_empty() {
        o.heading(
            "It happens with this timing, confirmed as well (forcing it back also stopped the failure, by moving one thread's calls away from the other's):",
        );
        for link in &r.triggers {
            o.para("  • ", "    ", &link.structured.headline);
            link_details(o, link, "    ");
        }
        o.blank();
    }
    o.heading("Causal path, from the root cause to the failure:");
    for (i, link) in r.path.iter().enumerate() {
        let n = format!("  {}. ", i + 1);
        let pad = " ".repeat(n.len());
        o.para(&n, &pad, &link.structured.headline);
        link_details(o, link, &pad);
    }
    let n = format!("  {}. ", r.path.len() + 1);
    let pad = " ".repeat(n.len());
    o.para(&n, &pad, &failure_line(r));
}

/// How many effects of a link the report lists without `-v`: a fix that
/// removes one race removes every symptom of it, often dozens of pairs.
const EFFECTS_SHOWN: usize = 8;

/// A confirmed link's evidence, intervention, scores (`-v`) and effects,
/// indented by `pad`.
fn link_details(o: &mut Out<'_>, link: &super::Link, pad: &str) {
    if let Some(called) = link.structured.called() {
        o.para(&format!("{pad}called: "), &format!("{pad}  "), &called);
    }
    o.para(&format!("{pad}evidence: "), &format!("{pad}  "), &link.evidence);
    if !link.intervention.is_empty() {
        o.para(&format!("{pad}intervention: "), &format!("{pad}  "), &link.intervention);
    }
    if o.layout.verbose
        && let Some(line) = scores(link)
    {
        o.para(pad, &format!("{pad}  "), &line);
    }
    if !link.effects.is_empty() {
        o.para(pad, pad, "with it, these no longer happened:");
        let shown = if o.layout.verbose { link.effects.len() } else { EFFECTS_SHOWN };
        for e in link.effects.iter().take(shown) {
            o.para(&format!("{pad}  • "), &format!("{pad}    "), &e.headline);
        }
        if link.effects.len() > shown {
            let more = link.effects.len() - shown;
            o.para(
                &format!("{pad}  • "),
                &format!("{pad}    "),
                &format!("and {more} more (listed in report.txt, and here with -v)"),
            );
        }
    }
}

/// The outcome of a session stopped before a cause was confirmed: what was
/// still undecided, or the candidates that were to be tested.
fn interrupted(o: &mut Out<'_>, r: &DebugReport<'_>) {
    let phase = r.interrupted.unwrap_or_default();
    if r.candidates_untested.is_empty() {
        o.para("", "", &format!("Interrupted while {phase}: no cause confirmed yet."));
        if !r.unresolved.is_empty() {
            o.para("", "", "Not decided yet:");
            bullets(o, &r.unresolved);
        }
    } else {
        o.para(
            "",
            "",
            &format!(
                "Interrupted while {phase}, before any intervention concluded; the candidates that were to be tested:"
            ),
        );
        bullets(o, &r.candidates_untested);
    }
}

/// The outcome of a session that started no round: why, with the
/// numbers, and the candidates that were to be tested.
fn not_started(o: &mut Out<'_>, r: &DebugReport<'_>) {
    let Some(n) = r.not_started else { return };
    o.para(
        "",
        "",
        &format!(
            "No cause was tested: no intervention round was started, the failure being too rare under the agent's control to judge one. {}; the candidates that were to be tested:",
            n.describe(r.noun)
        ),
    );
    bullets(o, &r.candidates_untested);
}

/// What the search cost (interventions, runs, the TAGT comparison under
/// `-v`) and how sure the path is: the numbers after the outcome.
fn cost(o: &mut Out<'_>, r: &DebugReport<'_>) {
    let noun = r.noun;
    if let (Some(n), Some(runs)) = (r.interventions, r.runs) {
        o.blank();
        o.para("", "", &format!("It took {} ({}).", count(n, "intervention"), count(runs, noun)));
        if o.layout.verbose
            && let Some(t) = r.tagt
        {
            o.para(
                "",
                "",
                &format!(
                    "Traditional adaptive group testing (TAGT: halving the candidates without their order in time) would need about {:.1} interventions on the same graph (mean of {} replays, worst {}).",
                    t.mean_interventions, t.seeds, t.max_interventions
                ),
            );
        }
    }
    // A confidence in a path only means something when a cause was
    // confirmed: without one there is no path to be right about.
    if let Some(c) = r.confidence.filter(|_| r.root_cause_id.is_some()) {
        o.para(
            "",
            "",
            &format!(
                "Confidence that the whole path is right: {} (asked for {}).",
                percent(c.achieved),
                percent(c.requested)
            ),
        );
        if o.layout.verbose {
            o.para(
                "",
                "",
                &format!(
                    "{} concluded from their {noun}s that the failure stopped; their risks of being wrong add up to the rest.",
                    count(c.stopped_rounds, "round")
                ),
            );
        }
    }
}

/// The closing lists of what the path may be missing: predicates that
/// could not be tested, rounds not used as evidence, and discriminative
/// predicates left untested.
fn left_out(o: &mut Out<'_>, r: &DebugReport<'_>) {
    if !r.untestable.is_empty() {
        o.blank();
        o.para(
            "",
            "",
            "Could not be tested (no round on it alone could be used as evidence, as the rounds below say, so it was neither confirmed nor ruled out; the path may be missing it):",
        );
        for t in &r.untestable {
            o.para("  • ", "    ", t);
        }
    }
    if !r.unused_rounds.is_empty() {
        o.blank();
        o.para("", "", "Rounds not used as evidence:");
        for t in &r.unused_rounds {
            o.para("  • ", "    ", t);
        }
    }
    if !r.untested.is_empty() {
        o.blank();
        o.para("", "", &format!("Also in every failing {}, but not tested:", r.noun));
        for u in &r.untested {
            o.para("  • ", "    ", &format!("{} ({})", u.predicate.headline, u.hint));
        }
    }
}

fn bullets(o: &mut Out<'_>, views: &[PredicateView]) {
    for v in views {
        o.para("  • ", "    ", &v.headline);
    }
}

/// "the run fails: exit code 1 (10 of 32 analysed runs)".
fn failure_line(r: &DebugReport<'_>) -> String {
    let a = &r.analysis;
    let total = a.failing_runs + a.passing_runs;
    let noun = r.noun;
    let why = match r.failure_reasons.as_slice() {
        [] => String::new(),
        [(reason, _)] => format!(": {reason}"),
        many => format!(
            ": {}",
            many.iter()
                .take(3)
                .map(|(t, n)| format!("{t} ({})", count(*n, noun)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!("the {noun} fails{why} ({} of {total} analysed {noun}s)", a.failing_runs)
}

/// "99.12%": two decimals, enough to tell 99% from 99.5%.
fn percent(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}
