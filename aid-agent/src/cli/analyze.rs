//! `aid-agent analyze [SESSION]`: the ranked predicate table (or
//! `--json`), and optionally the AC-DAG as DOT. The session defaults to the
//! newest one in `aid-sessions/`, and is judged with the options `debug`
//! stored in it (`--safe` and the error class) unless given again, and,
//! when its runs are a live service's units, with what interventions can
//! do there, as `debug` judged them. The
//! analysis itself is [`crate::analysis::analyze`]; this file only reads
//! arguments, loads the session and prints.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, bail};

use super::{
    args::session_dir,
    out::{emit, is_stdout, write_to},
};
use crate::{
    analysis::{AnalysisOptions, analyze, keep_observations, render_table},
    intervene::{Reach, SafeList},
    model::Session,
    predicates::{ErrorClass, ExtractConfig},
    record::start::targets,
    report,
    store::{self, Settings},
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`
    /// (default: the newest in aid-sessions/).
    pub session: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Functions whose return value may be forced (glob, repeatable):
    /// only these get premature-return and return-override interventions
    /// (AID Sec. 3.2).
    #[arg(long = "safe", value_name = "GLOB")]
    pub safe: Vec<String>,
    /// Rows to show (0: all).
    #[arg(long, default_value_t = 30)]
    pub top: usize,
    /// Treat a zero (false) return of integer and bool functions as an
    /// error too.
    #[arg(long)]
    pub zero_is_error: bool,
    /// Do not treat negative returns as errors.
    #[arg(long)]
    pub negative_is_ok: bool,
    /// Write the AC-DAG (transitive reduction) as Graphviz DOT to this
    /// file; `-` prints it on standard output instead of the table (the
    /// table then goes only to -o FILE).
    #[arg(long, value_name = "FILE")]
    pub dot: Option<PathBuf>,
    /// Write the table (or the JSON) to FILE instead of standard output;
    /// `-` for standard output.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Explain the table's columns after it.
    #[arg(long)]
    pub explain: bool,
    /// The unit function, when the session's runs are units of a live
    /// service (`session.json`): what an intervention can do is judged as
    /// `debug` judged it there ([`Reach::LIVE_UNITS`]).
    #[arg(skip)]
    pub unit: Option<String>,
}

/// What the columns of the table mean (`--explain`).
pub const COLUMNS: &str = "\
How to read this:
  importance  CBI's harmonic mean of increase and how many failing runs the predicate covers: the ranking key
  increase    failure (below) minus context: how much more often runs fail when it holds than when its call is merely reached
  failure     of the runs where it held, the share that failed
  context     of the runs that reached its call at all, the share that failed
  recall      of the failing runs, the share where it held
  F(P), S(P)  failing and passing runs where it held
  status      candidate: held in every failing run and no passing one (fully discriminative) and aid can force it back
              to its passing behaviour (intervenable); unsafe: that needs forcing a return value, declare it --safe;
              no_intervention: nothing can force it; same as Pn: the same intervention as a better-ranked predicate;
              not_discriminative: not in every failing run, or also in a passing one
";

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    run_with(args, load_session)
}

/// Reads and verifies a session directory (checksums, row counts), with
/// the settings it was analysed with; a damaged run is named in a warning
/// and left out.
fn load_session(path: &Path) -> anyhow::Result<Loaded> {
    let loaded = store::load_full(path)?;
    for skipped in &loaded.skipped {
        eprintln!("aid: warning: {skipped}");
    }
    Ok((loaded.session, loaded.header.settings, loaded.header.unit))
}

/// A session, the settings `debug` stored in it, and its unit function
/// when its runs are a live service's units.
type Loaded = (Session, Option<Settings>, Option<String>);

/// `run` with the loader passed in, so tests drive the command on sessions
/// built in memory.
pub fn run_with(
    mut args: Args,
    load: impl FnOnce(&Path) -> anyhow::Result<Loaded>,
) -> anyhow::Result<ExitCode> {
    let dot_on_stdout = args.dot.as_deref().is_some_and(is_stdout);
    let table_to = args.out.clone().filter(|p| !is_stdout(p));
    if dot_on_stdout && args.out.is_some() && table_to.is_none() {
        bail!("--dot - and -o - both write to standard output: give one of them a FILE");
    }
    let dir = session_dir(args.session.as_deref())?;
    let (mut session, settings, unit) = load(&dir)?;
    args.session = Some(dir);
    args.unit = unit;
    let args = with_settings(args, settings);
    let intervened = keep_observations(&mut session);
    if intervened > 0 {
        eprintln!(
            "aid: {intervened} run(s) made under interventions are left out of the statistics"
        );
    }
    let lost = session.runs.iter().filter(|r| !r.complete).count();
    if lost > 0 {
        eprintln!(
            "aid: warning: {lost} run(s) lost events or were interrupted and are excluded from the analysis; record with a larger --ring-size"
        );
    }
    let mut out = render(&args, &session)?;
    if args.explain && !args.json {
        out.push_str(&format!("\n{COLUMNS}"));
    }
    match table_to {
        Some(file) => write_to(&file, &out)?,
        // The DOT took standard output.
        None if dot_on_stdout => {}
        None => emit(&out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The options `debug` stored in the session, where the command line does
/// not give them again: a predicate `debug` tested is not called unsafe
/// later.
fn with_settings(mut args: Args, settings: Option<Settings>) -> Args {
    if let Some(s) = settings {
        if args.safe.is_empty() {
            args.safe = s.safe;
        }
        args.zero_is_error |= s.zero_is_error;
        args.negative_is_ok |= s.negative_is_ok;
    }
    args
}

/// The command's output for `session`.
pub fn render(args: &Args, session: &Session) -> anyhow::Result<String> {
    let safe = SafeList::new(&args.safe)?;
    let error = ErrorClass {
        negative: !args.negative_is_ok,
        zero: args.zero_is_error,
        ..ErrorClass::default()
    };
    let reach = match &args.unit {
        // A unit name the functions no longer resolve still makes the runs
        // live units: only the unit's own return delay goes unrecognised.
        Some(name) => Reach {
            unit: targets(&session.functions, Some(name), &[]).ok().and_then(|(u, _)| u),
            ..Reach::LIVE_UNITS
        },
        None => Reach::PROGRAM,
    };
    let opts = AnalysisOptions {
        extract: ExtractConfig { error, ..ExtractConfig::default() },
        safe,
        reach,
    };
    let name = args.session.as_deref().unwrap_or(Path::new("the session"));
    let analysis =
        analyze(session, &opts).with_context(|| format!("cannot analyse {}", name.display()))?;
    if let Some(dot) = &args.dot {
        write_to(dot, &report::dot::render(&analysis, &[], "run"))?;
    }
    if args.json {
        Ok(serde_json::to_string_pretty(&analysis.report(args.top))? + "\n")
    } else {
        Ok(render_table(&analysis, args.top))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Label, ValueKind, ValueType,
        testing::{call, function, run},
    };

    fn session() -> Session {
        let int = ValueType { kind: ValueKind::Signed, size: 4 };
        let f = function(0, "parse").in_module("/bin/t", 0).with_types(int, vec![]);
        let run = |id, label, ret| run(id, label, vec![call(0, 0, 1, 5, Some(9), Some(ret))], 20);
        Session {
            functions: vec![f],
            runs: vec![run(0, Label::Pass, 0), run(1, Label::Pass, 0), run(2, Label::Fail, -22)],
        }
    }

    fn args(json: bool, safe: &[&str]) -> Args {
        Args {
            session: Some(PathBuf::from("mem")),
            json,
            safe: safe.iter().map(ToString::to_string).collect(),
            top: 30,
            zero_is_error: false,
            negative_is_ok: false,
            dot: None,
            out: None,
            explain: false,
            unit: None,
        }
    }

    #[test]
    fn table_and_json() {
        let s = session();
        let table = render(&args(false, &["parse"]), &s).unwrap();
        assert!(table.starts_with("3 runs (1 failing, 2 passing), 2 predicates, 2 fully discriminative, 1 candidates for intervention\n"), "{table}");
        assert!(table.contains(
            "call 1 of parse on main returns a value other than 0, which every passing run returned"
        ));
        assert!(
            table.contains("↳ intervention: force call 1 of parse on main to return 0"),
            "{table}"
        );
        assert!(table.contains("  P1 -> F"));
        let json: serde_json::Value =
            serde_json::from_str(&render(&args(true, &[]), &s).unwrap()).unwrap();
        assert_eq!(json["rows"][0]["status"], "unsafe");
        assert_eq!(json["rows"][0]["scores"]["recall"], 1.0);
        assert_eq!(json["candidates"].as_array().unwrap().len(), 0);
    }

    /// The issue-14 regression: `--safe` given to `debug` is stored, so
    /// `analyze` later does not call the predicate it tested unsafe.
    #[test]
    fn stored_safe_list_is_used() {
        let s = session();
        let stored = Settings { safe: vec!["parse".into()], ..Settings::default() };
        let merged = with_settings(args(true, &[]), Some(stored));
        let json: serde_json::Value = serde_json::from_str(&render(&merged, &s).unwrap()).unwrap();
        assert_eq!(json["rows"][0]["status"], "candidate");
        let without = with_settings(args(true, &[]), None);
        let json: serde_json::Value = serde_json::from_str(&render(&without, &s).unwrap()).unwrap();
        assert_eq!(json["rows"][0]["status"], "unsafe");
    }

    /// A service's units that fail by returning at once: for a program,
    /// delaying the unit function's return is a candidate; for the
    /// session `debug -p --unit handle` wrote, it acts after the unit's
    /// outcome and is left out, as `debug` left it out.
    #[test]
    fn a_live_units_session_is_judged_as_debug_judged_it() {
        let f = function(0, "handle").in_module("/bin/t", 0);
        let unit = |id: u32| {
            let (label, took) =
                if id % 3 == 2 { (Label::Fail, 2_000) } else { (Label::Pass, 40_000) };
            run(id, label, vec![call(0, 0, 1, 0, Some(took), None)], took)
        };
        let s = Session { functions: vec![f], runs: (0..30).map(unit).collect() };
        let status = |unit: Option<&str>| {
            let load = |_: &Path| Ok((s.clone(), None, unit.map(str::to_owned)));
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out.json");
            let a = Args { out: Some(out.clone()), ..args(true, &[]) };
            run_with(a, load).unwrap();
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
            (json["rows"][0]["status"].clone(), json["candidates"].as_array().unwrap().len())
        };
        assert_eq!(status(None), (serde_json::json!("candidate"), 1));
        assert_eq!(status(Some("handle")), (serde_json::json!("after_outcome"), 0));
    }

    #[test]
    fn bad_sessions_and_patterns_are_one_line_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_session(dir.path()).unwrap_err();
        assert!(format!("{err:#}").ends_with("is not an aid session (no session.json): give the directory written by `aid-agent record`"), "{err:#}");
        let err = render(&args(false, &["[bad"]), &session()).unwrap_err();
        assert!(format!("{err:#}").starts_with("bad safe-function pattern"));
        let mut only_pass = session();
        only_pass.runs.pop();
        let err = run_with(args(false, &[]), |_| Ok((only_pass, None, None))).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "cannot analyse mem: cannot extract predicates: no failing runs: record runs until the failure shows up at least once"
        );
    }
}
