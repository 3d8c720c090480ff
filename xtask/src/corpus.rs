//! `cargo xtask corpus`: the scoreboard on programs nobody here wrote.
//!
//! Every program of the corpus (`../shared/corpus/` next to the project,
//! or `--corpus DIR`; its `manifest.json` gives the build command, the
//! command line, the true cause and the functions it involves) is copied
//! under `target/corpus/`, built there with its own command (the corpus is
//! never written to), and debugged with **no flags at all** from its own
//! folder, as a new user would: `aid-agent debug <its command line>`. Each
//! session is judged from its `report.json`:
//!
//! - **right**: the confirmed root cause names at least two of the cause's
//!   functions (the one, when only one is listed);
//! - **wrong**: a root cause was confirmed that does not: worse than none;
//! - **no cause**: nothing was confirmed, or the session ended without a
//!   report (the reason is printed).
//!
//! The functions a root cause names are its structured `functions`
//! (docs/report-format.md), never words matched in its prose; a C++ name
//! in the manifest (`StringBuffer::append(StringBuffer*)`) matches with or
//! without its parameter list. Each session is bounded by
//! `--session-timeout` (SIGINT first, so aid writes what it knows; then
//! SIGKILL); its output goes to `target/corpus/<name>/session-<i>.log`.
//! The next session empties `aid-sessions/`; a wrong session's directory is
//! kept as `target/corpus/<name>/wrong-session-<i>`.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::{
    agent_binary,
    corpus_rule::{last_report, names_cause, printed_report, root_cause_functions},
    root,
};

#[derive(clap::Args)]
pub struct Args {
    /// Sessions per program.
    #[arg(long, default_value_t = 1)]
    sessions: usize,
    /// Only these programs (comma-separated names from the manifest).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The corpus folder (default: ../shared/corpus next to the project).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Longest one session may take before it is interrupted (seconds).
    #[arg(long, default_value_t = 900)]
    session_timeout: u64,
}

/// One program of the manifest.
struct Program {
    name: String,
    dir: String,
    build: String,
    run: String,
    cause_functions: Vec<String>,
}

/// How one session ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Right,
    NoCause,
    Wrong,
}

struct Outcome {
    verdict: Verdict,
    runs: u64,
    wall: Duration,
    /// The root cause, or why there is none.
    what: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let corpus = match &args.corpus {
        Some(c) => c.clone(),
        None => root().join("../shared/corpus"),
    };
    let corpus = corpus
        .canonicalize()
        .with_context(|| format!("corpus folder {}: pass --corpus DIR", corpus.display()))?;
    let programs = manifest(&corpus)?;
    if let Some(bad) = args.only.iter().find(|o| !programs.iter().any(|p| &p.name == *o)) {
        let names: Vec<&str> = programs.iter().map(|p| p.name.as_str()).collect();
        bail!("--only {bad}: not in the manifest; one of {}", names.join(", "));
    }
    let work = root().join("target/corpus");
    std::fs::create_dir_all(&work)?;
    let agent = agent_binary();
    println!(
        "corpus: {} ({} sessions per program, no flags, at most {} s each); agent: {}",
        corpus.display(),
        args.sessions,
        args.session_timeout,
        agent.display()
    );
    let mut table: Vec<(String, Vec<Outcome>)> = Vec::new();
    for p in programs.iter().filter(|p| args.only.is_empty() || args.only.contains(&p.name)) {
        let dir = work.join(&p.dir);
        copy_program(&corpus.join(&p.dir), &dir)?;
        build(p, &dir)?;
        let mut outcomes = Vec::new();
        for i in 1..=args.sessions {
            let o = session(&agent, p, &dir, i, args.session_timeout)?;
            println!(
                "{} session {i}: {} in {:.0} s, {} runs: {}",
                p.name,
                verdict_word(o.verdict),
                o.wall.as_secs_f64(),
                o.runs,
                o.what
            );
            outcomes.push(o);
        }
        table.push((p.name.clone(), outcomes));
    }
    print_table(&table);
    if table.iter().flat_map(|(_, o)| o).any(|o| o.verdict == Verdict::Wrong) {
        bail!("a session confirmed a wrong root cause");
    }
    Ok(())
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Right => "right",
        Verdict::NoCause => "no cause",
        Verdict::Wrong => "WRONG",
    }
}

fn manifest(corpus: &Path) -> anyhow::Result<Vec<Program>> {
    let path = corpus.join("manifest.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let items = json.as_array().context("manifest.json: expected a list of programs")?;
    items
        .iter()
        .map(|p| {
            let field = |k: &str| {
                p[k].as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("manifest.json: a program without `{k}`"))
            };
            Ok(Program {
                name: field("name")?,
                dir: field("dir")?,
                build: field("build")?,
                run: field("run")?,
                cause_functions: p["cause_functions"]
                    .as_array()
                    .context("manifest.json: a program without `cause_functions`")?
                    .iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect(),
            })
        })
        .collect()
}

/// A fresh copy of the program's folder (sources only: what an earlier
/// build or session left there is gone).
fn copy_program(from: &Path, to: &Path) -> anyhow::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("removing {}", to.display()))?;
    }
    let status = Command::new("cp").arg("-r").arg(from).arg(to).status()?;
    if !status.success() {
        bail!("copying {} to {} failed", from.display(), to.display());
    }
    Ok(())
}

fn build(p: &Program, dir: &Path) -> anyhow::Result<()> {
    let log = std::fs::File::create(dir.join("build.log"))?;
    let status = Command::new("timeout")
        .args(["300", "sh", "-c", &p.build])
        .current_dir(dir)
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .with_context(|| format!("building {}", p.name))?;
    if !status.success() {
        bail!("building {} failed ({status}): see {}", p.name, dir.join("build.log").display());
    }
    Ok(())
}

/// One `aid-agent debug` with no flags, from the program's folder.
fn session(
    agent: &Path,
    p: &Program,
    dir: &Path,
    i: usize,
    timeout_s: u64,
) -> anyhow::Result<Outcome> {
    let sessions = dir.join("aid-sessions");
    if sessions.exists() {
        std::fs::remove_dir_all(&sessions)?;
    }
    let log_path = dir.join(format!("session-{i}.log"));
    let log = std::fs::File::create(&log_path)?;
    let words: Vec<&str> = p.run.split_whitespace().collect();
    let started = Instant::now();
    let status = Command::new("timeout")
        .args(["-s", "INT", "-k", "60", &timeout_s.to_string()])
        .arg(agent)
        .arg("debug")
        .args(&words)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .with_context(|| format!("running {}", agent.display()))?;
    let wall = started.elapsed();
    // The session aid wrote: the one directory under aid-sessions/ (the
    // folder was emptied before); its answer is the report of the session
    // the log names as reported, else of the last climbing session.
    let made = std::fs::read_dir(&sessions)
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok().map(|e| e.path())));
    let runs = made.as_deref().map_or(0, count_runs);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let report = printed_report(&log, dir).or_else(|| made.as_deref().and_then(last_report));
    let Some(report) = report else {
        let why = last_line(&log).unwrap_or_else(|| format!("no report ({status})"));
        return Ok(Outcome { verdict: Verdict::NoCause, runs, wall, what: why });
    };
    let root_cause = report["root_cause"].as_str().map(str::to_owned);
    let Some(text) = root_cause else {
        let why = if status.code() == Some(130) { "interrupted" } else { "nothing confirmed" };
        return Ok(Outcome { verdict: Verdict::NoCause, runs, wall, what: why.into() });
    };
    let named: Vec<String> = root_cause_functions(&report).into_iter().map(str::to_owned).collect();
    let verdict = judge(&named, &p.cause_functions);
    if verdict == Verdict::Wrong {
        // The next session empties aid-sessions/: a wrong answer's session
        // is kept for whoever looks into it.
        let kept = dir.join(format!("wrong-session-{i}"));
        if kept.exists() {
            std::fs::remove_dir_all(&kept)?;
        }
        std::fs::rename(&sessions, &kept)?;
    }
    Ok(Outcome { verdict, runs, wall, what: text })
}

/// Right when the root cause names at least two of the cause's functions
/// (the one, when only one is listed).
fn judge(named: &[String], cause: &[String]) -> Verdict {
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    if names_cause(&strs(named), &strs(cause)) { Verdict::Right } else { Verdict::Wrong }
}

/// Runs of the program the session made: lines of every `runs.jsonl`
/// under it (the climbing sessions' included).
fn count_runs(session: &Path) -> u64 {
    let mut n = 0;
    let Ok(entries) = std::fs::read_dir(session) else { return 0 };
    for e in entries.flatten() {
        let path = e.path();
        if path.file_name().is_some_and(|f| f == "runs.jsonl") {
            n += std::fs::read_to_string(&path).map_or(0, |t| t.lines().count() as u64);
        } else if path.is_dir() && path.file_name().is_some_and(|f| f != "runs") {
            n += count_runs(&path);
        }
    }
    n
}

fn last_line(text: &str) -> Option<String> {
    text.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_owned)
}

fn print_table(table: &[(String, Vec<Outcome>)]) {
    println!();
    println!("| program | right | no cause | wrong | runs (mean) | wall time (s, mean) |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let count = |o: &[Outcome], v: Verdict| o.iter().filter(|x| x.verdict == v).count();
    let mean = |xs: Vec<f64>| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    let mut all: Vec<&Outcome> = Vec::new();
    for (name, o) in table {
        println!(
            "| {name} | {} | {} | {} | {:.0} | {:.0} |",
            count(o, Verdict::Right),
            count(o, Verdict::NoCause),
            count(o, Verdict::Wrong),
            mean(o.iter().map(|x| x.runs as f64).collect()),
            mean(o.iter().map(|x| x.wall.as_secs_f64()).collect()),
        );
        all.extend(o);
    }
    let n = all.len();
    let of = |v: Verdict| all.iter().filter(|x| x.verdict == v).count();
    let pct = |k: usize| 100.0 * k as f64 / n.max(1) as f64;
    println!(
        "| **all ({n} sessions)** | {} ({:.0} %) | {} ({:.0} %) | {} ({:.0} %) | {:.0} | {:.0} |",
        of(Verdict::Right),
        pct(of(Verdict::Right)),
        of(Verdict::NoCause),
        pct(of(Verdict::NoCause)),
        of(Verdict::Wrong),
        pct(of(Verdict::Wrong)),
        mean(all.iter().map(|x| x.runs as f64).collect()),
        mean(all.iter().map(|x| x.wall.as_secs_f64()).collect()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_root_cause_is_right_when_it_names_two_of_the_cause_functions() {
        let cause = names(&["StringBuffer::append(StringBuffer*)", "StringBuffer::erase", "main"]);
        assert!(
            judge(&names(&["StringBuffer::erase", "StringBuffer::append"]), &cause)
                == Verdict::Right
        );
        assert!(judge(&names(&["StringBuffer::erase"]), &cause) == Verdict::Wrong);
        assert!(judge(&names(&["t1", "t2"]), &cause) == Verdict::Wrong);
        // One cause function: naming it is enough.
        assert!(judge(&names(&["setThread"]), &names(&["setThread"])) == Verdict::Right);
        assert!(judge(&[], &names(&["setThread"])) == Verdict::Wrong);
    }

    /// The answer is read from the session `debug` made last, in the
    /// order its campaign makes them, whatever the order on disk.
    #[test]
    fn the_report_of_the_last_session_debug_went_on_to_is_read() -> anyhow::Result<()> {
        let top = std::env::temp_dir().join(format!("xtask-last-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let report = |dir: &str, cause: &str| -> anyhow::Result<()> {
            let d = top.join(dir);
            std::fs::create_dir_all(&d)?;
            std::fs::write(d.join("report.json"), format!("{{\"root_cause\": \"{cause}\"}}"))?;
            Ok(())
        };
        let read = || last_report(&top).and_then(|r| r["root_cause"].as_str().map(str::to_owned));
        report("", "first")?;
        assert_eq!(read().as_deref(), Some("first"));
        report("statements-1", "statements")?;
        report("fewer-probes-1", "fewer")?;
        assert_eq!(read().as_deref(), Some("statements"));
        report("left-out-1", "left out 1")?;
        report("left-out-2", "left out 2")?;
        assert_eq!(read().as_deref(), Some("left out 2"));
        report("callers-1", "callers")?;
        assert_eq!(read().as_deref(), Some("callers"));
        std::fs::remove_dir_all(&top)?;
        Ok(())
    }

    /// The session debug printed is read, wherever it is among those it
    /// made; a log with no such line names none.
    #[test]
    fn the_report_debug_printed_is_read() -> anyhow::Result<()> {
        let top = std::env::temp_dir().join(format!("xtask-printed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        for (dir, cause) in [("s", "first"), ("s/fewer-probes-1", "none")] {
            std::fs::create_dir_all(top.join(dir))?;
            std::fs::write(
                top.join(dir).join("report.json"),
                format!("{{\"root_cause\": \"{cause}\"}}"),
            )?;
        }
        let log = "Root cause: first\n\nSession and report (report.html, report.json, dag.dot): s\nDebugged again with fewer probes ...\n";
        assert_eq!(printed_report(log, &top).unwrap()["root_cause"], "first");
        assert!(printed_report("aid: no report\n", &top).is_none());
        std::fs::remove_dir_all(&top)?;
        Ok(())
    }
}
