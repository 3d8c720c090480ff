//! `aid-agent compare [SESSION] --fail B [--pass A]`: the causal chain from a
//! difference between a failing and a passing run to the failure, each
//! link tested by re-running the program both ways (seed 001;
//! [`crate::explain::compare`]).

use std::{path::PathBuf, process::ExitCode, sync::atomic::Ordering};

use super::{
    args::{load_options, parse_duration, session_dir},
    mine::{AccessArgs, AccessMode, fresh_dir, refuse_idle_out},
    out::emit,
    terminal::{Terminal, interrupt_flag},
};
use crate::{
    explain::{
        self,
        compare::{
            self, Inputs, Options, Target,
            live::{LiveSettings, compare_program},
            minimize::Offline,
        },
        watch::WatchSettings,
        watched::{CompareRequest, compare_watched},
    },
    intervene::SafeList,
    model::Function,
    store,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session directory written by `record`, `attach` or `debug`
    /// (default: the newest in aid-sessions/).
    pub session: Option<PathBuf>,
    /// The failing run (`--fail`, as in `slice`; `--run` is the same
    /// option).
    #[arg(long, visible_alias = "run", value_name = "N")]
    pub fail: u32,
    /// The passing run to compare with, or `auto`: the one most like the
    /// failing run.
    #[arg(long, default_value = "auto", value_name = "N|auto")]
    pub pass: String,
    /// What the chain explains: `exit` (how the runs ended) or
    /// `[role:]function#k.ret`.
    #[arg(long, default_value = "exit", value_name = "TARGET")]
    pub target: String,
    /// Re-runs per side of each symmetric test; 0 = do not re-run (the
    /// chain is then untested).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub repeat: u32,
    /// Fraction of the usable re-runs of a side that must show the effect.
    #[arg(long, default_value_t = 0.8, value_name = "FRACTION")]
    pub theta: f64,
    /// In every re-run, force the returns (of --safe functions) that were
    /// equal in both runs.
    #[arg(long)]
    pub pin: bool,
    /// Functions whose return value may be forced (globs, repeatable).
    #[arg(long = "safe", value_name = "GLOB")]
    pub safe: Vec<String>,
    /// Longest any hold may last.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub hold_timeout: String,
    /// Kill a re-run (and count it as failed) after this long.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub timeout: String,
    /// Session directory the tests' re-runs are written to (default:
    /// SESSION/compare-FAIL-vs-PASS-TIME), as `record -o`; the chain goes
    /// to standard output.
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub access: AccessArgs,
    /// How reads and writes are known: `watch` takes the reads-from edges
    /// from hardware watchpoints in re-runs (see docs/explain.md).
    #[arg(long = "access", value_enum, default_value = "rw")]
    pub mode: AccessMode,
    /// With --access watch: how many watched re-runs to make at most.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub watch_runs: u32,
    /// With --access watch: the objects (at most two), or words of them
    /// (`pool+0x20`), to watch instead of the ones the differences name.
    #[arg(long = "watch-object", value_name = "NAME")]
    pub watch_objects: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.theta > 0.0 && args.theta <= 1.0,
        "--theta {} must be in (0, 1]",
        args.theta
    );
    if args.repeat == 0 {
        refuse_idle_out(args.out.as_deref(), "compare", "when --repeat is above 0")?;
    }
    let target = Target::parse(&args.target)?;
    let spec = args.access.spec()?;
    let safe = SafeList::new(&args.safe)?;
    let hold_timeout = parse_duration(&args.hold_timeout)?;
    let timeout = parse_duration(&args.timeout)?;
    let pass_arg: Option<u32> = match args.pass.as_str() {
        "auto" => None,
        n => Some(
            n.parse().map_err(|_| anyhow::anyhow!("--pass {n}: give a run number or `auto`"))?,
        ),
    };
    let dir = session_dir(args.session.as_deref())?;
    let (loaded, globals) = explain::load(&dir)?;
    let opts = Options { repeat: args.repeat, theta: args.theta, pin: args.pin, safe };
    let load = load_options(64 << 20, crate::bpf::MAX_FUNCTIONS)?;
    if args.mode == AccessMode::Watch {
        let live = (args.repeat > 0).then(|| LiveSettings {
            hold_timeout,
            timeout,
            out: args.out.clone().unwrap_or_else(|| fresh_dir(&dir, "compare")),
            load,
            watch: Vec::new(),
        });
        let settings = WatchSettings {
            names: args.watch_objects.clone(),
            runs: args.watch_runs,
            until_failure: false,
            delay: None,
            interventions: Vec::new(),
            hold_timeout,
            timeout,
            out: fresh_dir(&dir, "watch"),
            load,
        };
        let req = CompareRequest {
            dir: &dir,
            fail: args.fail,
            pass: pass_arg,
            target,
            spec: &spec,
            opts: &opts,
            live: live.clone(),
        };
        let cancel = interrupt_flag()?;
        let result = compare_watched(
            &loaded,
            globals.as_ref(),
            &req,
            &settings,
            &cancel,
            &mut Terminal::default(),
        );
        if cancel.load(Ordering::Relaxed) {
            eprintln!("aid: interrupted; the re-runs made so far are kept");
            return Ok(ExitCode::from(130));
        }
        let out = result?;
        eprintln!("aid: {}", out.watch.text());
        eprintln!(
            "aid: compared watched run {} (failed) with watched run {} (passed)",
            out.fail, out.pass
        );
        if let Some(live) = &live {
            eprintln!("aid: {} re-run(s) saved in {}", out.comparison.reruns, live.out.display());
        }
        return print(&out.comparison, &out.functions, &opts, args.json);
    }
    let session = &loaded.session;
    compare::check_runs(session, args.fail, pass_arg)?;
    let pass = match pass_arg {
        Some(p) => p,
        None => compare::pick_pass(session, args.fail, globals.as_ref(), &spec)?,
    };
    let inputs = Inputs {
        session,
        globals: globals.as_ref(),
        spec: &spec,
        fail: args.fail,
        pass: Some(pass),
        target,
        watched: None,
    };
    let functions = session.functions.clone();
    if args.repeat == 0 {
        let c = compare::compare(&inputs, &opts, Offline)?;
        return print(&c, &functions, &opts, args.json);
    }
    let out = args.out.clone().unwrap_or_else(|| {
        dir.join(format!("compare-{}-vs-{pass}-{}", args.fail, store::now_unix()))
    });
    let settings =
        LiveSettings { hold_timeout, timeout, out: out.clone(), load, watch: Vec::new() };
    let cancel = interrupt_flag()?;
    let result =
        compare_program(&loaded, &inputs, &opts, &settings, &cancel, &mut Terminal::default());
    if cancel.load(Ordering::Relaxed) {
        eprintln!("aid: interrupted; the re-runs made so far are saved in {}", out.display());
        return Ok(ExitCode::from(130));
    }
    let c = result?;
    eprintln!("aid: {} re-run(s) saved in {}", c.reruns, out.display());
    print(&c, &functions, &opts, args.json)
}

fn print(
    c: &compare::Comparison,
    functions: &[Function],
    opts: &Options,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if json {
        emit(&(serde_json::to_string_pretty(&compare::report(c, functions))? + "\n"))?;
    } else {
        emit(&compare::render_text(c, functions, opts))?;
    }
    Ok(ExitCode::SUCCESS)
}
