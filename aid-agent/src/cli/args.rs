//! Arguments shared by several subcommands, and the library's enums as
//! clap values (the library itself never sees clap).

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::bail;

use super::out::emit;

use crate::{
    bpf::LoadOptions,
    causal::Strategy,
    intervene::noise::Schedule,
    record::{
        fail::RunPolicy,
        list::{ListIn, Listed, list},
    },
    store,
};

/// The headings `--help` groups options under, as perf's do.
pub mod heading {
    pub const TRACE: &str = "What to trace";
    pub const RUNS: &str = "Runs";
    pub const FAILURE: &str = "Failure";
    pub const INTERVENTIONS: &str = "Interventions";
    pub const AMPLIFICATION: &str = "Amplification";
    pub const SERVICES: &str = "Services";
    pub const OUTPUT: &str = "Output";
}

/// The session a command reads: the one given, or the newest in
/// aid-sessions/ (by creation time, [`store::latest`]). Every command that
/// reads a session (`analyze`, `export`, `mine`, `slice`, `compare`,
/// `watch`) takes it this way, so they share the rule and the message when
/// there is none.
pub fn session_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_owned()),
        None => Ok(store::latest(Path::new(store::SESSIONS_DIR))?),
    }
}

/// How runs of a program are traced, judged and bounded.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Ring buffer size in bytes between the kernel and the agent (a power
    /// of two). Raise it if runs lose events.
    #[arg(help_heading = heading::TRACE, long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub ring_size: u32,
    /// Most functions to probe (an entry and a return probe each); a
    /// pattern matching more is refused.
    #[arg(help_heading = heading::TRACE, long, default_value_t = crate::bpf::MAX_FUNCTIONS, value_name = "N")]
    pub max_probes: usize,
    /// When a run counts as failed (repeatable): nonzero, exit=N, signal,
    /// signal=NAME, timeout, hang, stdout:REGEX, stderr:REGEX, output:REGEX.
    /// Default: nonzero, signal, timeout, hang.
    #[arg(help_heading = heading::FAILURE, long = "fail-on", value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Kill a run (and count it as failed) after this long (30s, 1m30s,
    /// 500ms).
    #[arg(help_heading = heading::FAILURE, long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// End a run that hangs (every thread waiting for another — a lock, a
    /// join, a condition — with no progress) after this long, and count it
    /// as failed with the reason `hang` (0s: never; it then lasts until
    /// --timeout).
    #[arg(help_heading = heading::FAILURE, long, default_value = "1s", value_name = "DURATION")]
    pub hang_after: String,
    /// Make up to N runs of the program at once, each with probes of its
    /// own. The others' load changes a timing bug's failure rate: the
    /// session records N, and its runs are compared only with runs made
    /// with the same N.
    #[arg(help_heading = heading::RUNS, short = 'j', long, default_value_t = 1, value_name = "N")]
    pub jobs: u32,
}

/// Where a program's session is written; flattened last, under "Output".
#[derive(Debug, clap::Args)]
pub struct SessionOut {
    /// Session directory to write (default: aid-sessions/<time>-<program>).
    #[arg(help_heading = heading::OUTPUT, short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where the runs' Parquet tables go: a directory, a file:///path URL
    /// or s3://BUCKET/PREFIX (endpoint and credentials from AWS_*), under
    /// which they are in <session name>/events/ and threads/ (default:
    /// parquet/ in the session directory).
    #[arg(help_heading = heading::OUTPUT, long, value_name = "URL")]
    pub store: Option<String>,
}

impl SessionOut {
    /// `--store`, checked.
    pub fn store(&self) -> anyhow::Result<store::Destination> {
        Ok(self.store.as_deref().map(store::Destination::parse).transpose()?.unwrap_or_default())
    }
}

impl RunArgs {
    pub fn policy(&self) -> anyhow::Result<RunPolicy> {
        let policy = RunPolicy::new(&self.fail_on, parse_duration(&self.timeout)?)?;
        Ok(policy.with_hang_after(parse_duration(&self.hang_after)?))
    }

    /// `--jobs`, checked: at least 1.
    pub fn jobs(&self) -> anyhow::Result<u32> {
        if self.jobs == 0 {
            anyhow::bail!("--jobs 0 makes no runs: give at least 1 (runs made at once)");
        }
        Ok(self.jobs)
    }

    pub fn load_options(&self) -> anyhow::Result<LoadOptions> {
        load_options(self.ring_size, self.max_probes)
    }
}

/// `--ring-size` and `--max-probes` checked: the kernel wants a power of
/// two of at least a page.
pub fn load_options(ring_size: u32, max_probes: usize) -> anyhow::Result<LoadOptions> {
    if !ring_size.is_power_of_two() || ring_size < 4096 {
        bail!("--ring-size {ring_size} must be a power of two of at least 4096");
    }
    if max_probes == 0 {
        bail!("--max-probes 0 allows no function: give at least 1");
    }
    Ok(LoadOptions { ring_bytes: ring_size, max_functions: max_probes, ..LoadOptions::default() })
}

/// Every `--trace` pattern must say something.
pub fn check_patterns(trace: &[String]) -> anyhow::Result<()> {
    if trace.iter().any(|t| t.trim().is_empty()) {
        bail!("--trace '' is empty: give a function name or a glob such as 'cache_*'");
    }
    Ok(())
}

/// A duration option that must not be zero.
pub fn positive(option: &str, d: Duration) -> anyhow::Result<Duration> {
    if d.is_zero() {
        bail!("{option} 0s allows no time at all: give a positive duration");
    }
    Ok(d)
}

/// Parses a duration as humantime writes them ("500ms", "30s", "2m",
/// "1h 30m", "1.5s"), or a bare number of seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let bad = || anyhow::anyhow!("invalid duration `{text}`: use e.g. 500ms, 30s, 2m");
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    humantime::parse_duration(t).map_err(|_| bad())
}

/// Parses a share given in percent ("5%", "5", "0.5%") as a fraction of
/// one, between 0 and 100 %.
pub fn parse_percent(option: &str, text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim();
    match number.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        _ => bail!("{option} `{text}`: give a percentage between 0 and 100, e.g. 5%"),
    }
}

/// Prints what `-l/--list` patterns match, one function a line, as
/// `bpftrace -l` lists probes, so the first column pastes into bpftrace:
/// `uprobe:MODULE:SYMBOL  address  [demangled name]  [file:line]`, and
/// how many call sites the compiler inlined it at (calls the probe misses).
pub fn print_list(target: ListIn<'_>, patterns: &[String]) -> anyhow::Result<ExitCode> {
    let mut text = String::new();
    for f in list(target, patterns)? {
        text.push_str(&list_line(&f));
        text.push('\n');
    }
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// One listed function: its bpftrace probe (the symbol as the ELF file has
/// it, which bpftrace takes for C++ and Rust too), the address, the
/// demangled name when it differs, the source position.
fn list_line(f: &Listed) -> String {
    let mut line = format!("uprobe:{}:{}  {:#x}", f.module.display(), f.symbol, f.address);
    if f.name != f.symbol {
        line.push_str(&format!("  {}", f.name));
    }
    if let Some(s) = &f.source {
        line.push_str(&format!("  {}:{}", s.file, s.line));
    }
    if f.inlined > 0 {
        line.push_str(&format!(
            "  inlined at {}: the probe misses those calls",
            crate::util::human::count(f.inlined, "call site")
        ));
    }
    line
}

/// `--strategy` values; [`Strategy`] is the library's name for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    /// Our default: a frontier walk down the AC-DAG with every sound
    /// deduction (docs/causal.md): Def. 2 and its extensions, elimination.
    Aid,
    /// Alg. 3 with branch pruning, exactly as the paper defines it.
    AidPaper,
    /// AID without predicate pruning (no Def. 2 for non-intervened predicates).
    AidP,
    /// AID without predicate or branch pruning: GIWP in topological order only.
    AidPB,
    /// Traditional adaptive group testing: random groups, decisions only
    /// about intervened predicates.
    Tagt,
}

impl From<StrategyArg> for Strategy {
    fn from(s: StrategyArg) -> Strategy {
        match s {
            StrategyArg::Aid => Strategy::Aid,
            StrategyArg::AidPaper => Strategy::AidPaper,
            StrategyArg::AidP => Strategy::AidP,
            StrategyArg::AidPB => Strategy::AidPB,
            StrategyArg::Tagt => Strategy::Tagt,
        }
    }
}

/// `debug --amplify` values: the noise amplified runs get.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AmplifyArg {
    /// Random delays, PCT-style priority change points and near-miss
    /// delays, run by run (`both`, its name before near misses, is
    /// accepted).
    #[value(alias = "both")]
    All,
    /// Random delays at synchronisation points and traced calls (rr's chaos
    /// mode).
    Random,
    /// PCT-style priority change points (Burckhardt et al., ASPLOS 2010).
    Pct,
    /// Delays where two threads entered calls on the same object (a lock,
    /// a pointer argument) a hold apart in a passing run, at the earlier
    /// one, so that the later may go first (TSVD, Li et al., SOSP 2019).
    /// Random delays until a run shows a near miss.
    NearMiss,
    /// A thread or two starved for 1 ms to 1 s (log-uniform, as rr's
    /// chaos mode does) from the first noisy run, instead of climbing to
    /// it through the millisecond levels.
    Starve,
    /// No holds: the target on one CPU, its threads given random
    /// priorities again every 1 to 50 ms, so the thread that runs is
    /// switched wherever it is, between two statements as well as at a
    /// call (rr's chaos mode, with the kernel's scheduler).
    OneCpu,
}

impl From<AmplifyArg> for Schedule {
    fn from(a: AmplifyArg) -> Schedule {
        match a {
            AmplifyArg::All => Schedule::All,
            AmplifyArg::Random => Schedule::Random,
            AmplifyArg::Pct => Schedule::Pct,
            AmplifyArg::NearMiss => Schedule::NearMiss,
            AmplifyArg::Starve => Schedule::Starve,
            AmplifyArg::OneCpu => Schedule::OneCpu,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum as _;

    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("-1").unwrap_err().to_string(),
            "invalid duration `-1`: use e.g. 500ms, 30s, 2m"
        );
    }

    /// The first column is the probe bpftrace takes: the ELF symbol (the
    /// mangled one for C++), the demangled name after the address.
    #[test]
    fn list_lines_start_with_the_bpftrace_probe() {
        let mut f = Listed {
            module: "/opt/app/bin/cache".into(),
            name: "Cache::get(int)".into(),
            symbol: "_ZN5Cache3getEi".into(),
            address: 0x1a2b,
            source: Some(crate::model::SourceLoc { file: "/src/cache.cc".into(), line: 42 }),
            inlined: 0,
        };
        assert_eq!(
            list_line(&f),
            "uprobe:/opt/app/bin/cache:_ZN5Cache3getEi  0x1a2b  Cache::get(int)  /src/cache.cc:42"
        );
        f.name = f.symbol.clone();
        f.source = None;
        assert_eq!(list_line(&f), "uprobe:/opt/app/bin/cache:_ZN5Cache3getEi  0x1a2b");
        f.inlined = 2;
        assert_eq!(
            list_line(&f),
            "uprobe:/opt/app/bin/cache:_ZN5Cache3getEi  0x1a2b  inlined at 2 call sites: the probe misses those calls"
        );
    }

    #[test]
    fn percentages_parse() {
        assert_eq!(parse_percent("--x", "5%").unwrap(), 0.05);
        assert_eq!(parse_percent("--x", " 50 ").unwrap(), 0.5);
        assert_eq!(parse_percent("--x", "0").unwrap(), 0.0);
        assert_eq!(parse_percent("--x", "100%").unwrap(), 1.0);
        for bad in ["101%", "-1", "often", "", "NaN"] {
            assert_eq!(
                parse_percent("--x", bad).unwrap_err().to_string(),
                format!("--x `{bad}`: give a percentage between 0 and 100, e.g. 5%")
            );
        }
    }

    /// Every library strategy has a command-line name, the one clap
    /// derived from the library enum before it moved here.
    #[test]
    fn every_strategy_has_its_name() {
        let names: Vec<(String, Strategy)> = StrategyArg::value_variants()
            .iter()
            .map(|v| (v.to_possible_value().unwrap().get_name().to_owned(), Strategy::from(*v)))
            .collect();
        assert_eq!(
            names,
            vec![
                ("aid".into(), Strategy::Aid),
                ("aid-paper".into(), Strategy::AidPaper),
                ("aid-p".into(), Strategy::AidP),
                ("aid-pb".into(), Strategy::AidPB),
                ("tagt".into(), Strategy::Tagt),
            ]
        );
        for s in Strategy::ALL {
            assert!(names.iter().any(|(_, x)| *x == s), "{s} has no name");
        }
    }
}
