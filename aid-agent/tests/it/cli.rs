//! The command line as a user meets it, without root: shell completions
//! and man pages, `-l/--list` like `bpftrace -l`, every command that
//! reads a session on the newest one, the exported traces parsed back (Chrome JSON,
//! and Perfetto protobuf with Perfetto's own schema), and the session
//! format example of docs/session-format.md run against a session.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::common::*;
use aid::{
    model::{
        AppliedIntervention, Intervention, Label, Noise, Outcome, Site, ValueKind,
        testing::{call, function, recorded, run, thread},
    },
    store::{FORMAT, Header, Mode, VERSION, Writer},
};

/// A small session on disk: `fetch` on fetcher returns a pointer, and
/// `use_cache` on reader returns 4 in failing runs and 3 in passing
/// ones; run 7 is intervened on, run 8 has a random delay.
fn write_session(dir: &Path, created: u64) {
    let f = |id, name: &str, ret, params: &[ValueKind]| {
        function(id, name)
            .in_module("/bin/cachetest", 0x1000 + u64::from(id) * 16)
            .with_ret(ret)
            .with_params(params)
    };
    let functions = vec![
        f(0, "fetch", ValueKind::Pointer, &[ValueKind::Pointer]),
        f(1, "use_cache", ValueKind::Signed, &[ValueKind::Pointer, ValueKind::Signed]),
    ];
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        created,
        created_subsec_ns: 0,
        mode: Mode::Debug,
        program: "/bin/cachetest".into(),
        command: vec!["/bin/cachetest".into()],
        pid: None,
        unit: None,
        fail_rules: vec!["nonzero".into()],
        functions: functions.clone(),
        settings: None,
        jobs: None,
        fleet: None,
    };
    let mut w = Writer::create(dir, &header).unwrap();
    for id in 1..=8u32 {
        let fail = id % 3 == 0;
        let ret = if fail { 4 } else { 3 };
        let calls = vec![
            call(0, 1, 1, 1_000, Some(50_000), Some(0x5555_0000)).with_args([
                0x7f00_0000_1000,
                0,
                0,
            ]),
            call(1, 2, 1, 60_000, Some(61_000), Some(ret)).with_args([0x7f00_0000_1000, 2, 0]),
        ];
        let label = if fail { Label::Fail } else { Label::Pass };
        let mut r = run(id, label, calls, 70_000)
            .with_threads(vec![thread(0, "main"), thread(1, "fetcher"), thread(2, "reader")])
            .with_outcome(Outcome {
                exit_code: Some(i32::from(fail)),
                reason: format!("exit code {}", i32::from(fail)),
                ..Outcome::default()
            });
        let s = Site { func: 1, role: 2, instance: 1 };
        if id == 7 {
            r.interventions = vec![AppliedIntervention {
                intervention: Intervention::OverrideReturn { site: s, value: 3 },
                applied: true,
                timed_out: false,
                held_at_end: false,
                acted_ns: None,
            }];
        }
        if id == 8 {
            r.noise = vec![Noise {
                at: aid::model::NoiseAt::Call { site: s },
                action: aid::model::NoiseAction::Delay { us: 250 },
                held_ns: 250_000,
                func: Some(s.func),
                near_miss: false,
            }];
        }
        let mut rec = recorded(r);
        rec.start_ns = u64::from(id) * 1_000_000;
        w.append(&rec, &functions).unwrap();
    }
}

/// A directory with `aid-sessions/` holding two sessions, the newer one
/// (by creation time) named first.
fn sessions() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("aid-sessions");
    write_session(&root.join("20260101-000000-cachetest"), 200);
    write_session(&root.join("20250101-000000-older"), 100);
    let newest = root.join("20260101-000000-cachetest");
    (tmp, newest)
}

#[test]
fn completions_for_every_shell() {
    for (shell, mark) in [
        ("bash", "_aid__agent()"),
        ("zsh", "#compdef aid-agent"),
        ("fish", "complete -c aid-agent"),
    ] {
        let out = run_ok(agent().args(["completions", shell]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(mark), "{shell}: {text}");
        assert!(text.contains("debug") && text.contains("explain"), "{shell}");
    }
    run_err_clap(agent().args(["completions", "tcsh"]));
}

#[test]
fn man_pages_for_the_command_and_each_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    run_ok(agent().args(["man", "--out"]).arg(tmp.path()));
    for page in ["aid-agent.1", "aid-agent-debug.1", "aid-agent-export.1", "aid-agent-analyze.1"] {
        let text = std::fs::read_to_string(tmp.path().join(page)).unwrap();
        assert!(text.starts_with(".ie \\n(.g .ds Aq") || text.contains(".TH"), "{page}");
        assert!(text.contains(".TH"), "{page}");
    }
    let debug = std::fs::read_to_string(tmp.path().join("aid-agent-debug.1")).unwrap();
    assert!(debug.contains("\\-\\-explain") && debug.contains("\\-\\-list"), "{debug}");
    assert!(!tmp.path().join("aid-agent-intervene.1").exists(), "hidden commands get no page");
}

/// The benchmarks are not the user's: `bench` is no subcommand of the
/// agent (they run through `cargo xtask bench`, from the benchmarks crate
/// `bench/`).
#[test]
fn benchmarks_are_not_a_subcommand() {
    let err = run_err_clap(agent().args(["bench", "synthetic"]));
    assert_eq!(err, "aid: unrecognized subcommand 'bench' (see --help)\n");
}

/// Clap's own usage errors exit 2 too.
fn run_err_clap(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `-l` lines start with the probe as bpftrace takes it,
/// `uprobe:ABSOLUTE_PATH:SYMBOL`, then the address and source position.
#[test]
fn list_shows_what_a_pattern_matches_as_bpftrace_probes() {
    let exe = c_fixture("two_threads.c", "two_threads_list", &[]);
    let exe_name = exe.canonicalize().unwrap();
    // The program given relative to the working directory: the probe names
    // it by its absolute path.
    let relative = format!("./{}", exe.file_name().unwrap().to_string_lossy());
    for cmd in ["debug", "record"] {
        let out = run_ok(
            agent()
                .args([cmd, "-l", "worker_*", &relative, "--some-arg"])
                .current_dir(exe.parent().unwrap()),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for (line, name) in lines.iter().zip(["worker_a", "worker_b"]) {
            let prefix = format!("uprobe:{}:{name}  0x", exe_name.display());
            assert!(line.starts_with(&prefix), "{line} vs {prefix}");
            let fields: Vec<&str> = line.split("  ").collect();
            assert_eq!(fields.len(), 3, "probe, address, source: {line}");
            let (file, at) = fields[2].rsplit_once(':').unwrap();
            assert!(file.ends_with("/two_threads.c"), "source position: {line}");
            assert!(at.parse::<u32>().is_ok_and(|n| n > 0), "source line: {line}");
        }
    }
    // A running process: the executable and its libraries.
    let service = c_fixture("service.c", "service_list", &[]);
    let child =
        Background(Command::new(&service).stdout(std::process::Stdio::null()).spawn().unwrap());
    let pid = child.pid().to_string();
    let out = run_ok(agent().args(["attach", "-p", &pid, "-l", "handle_*"]));
    let text = String::from_utf8_lossy(&out.stdout);
    let prefix = format!("uprobe:{}:handle_request  0x", service.canonicalize().unwrap().display());
    assert!(text.lines().any(|l| l.starts_with(&prefix)), "{text}");
    let out = run_ok(agent().args(["attach", "--pid", &pid, "--list", "libc:usleep"]));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_default();
    let (probe, rest) = line.split_once("  ").unwrap_or_default();
    assert!(probe.starts_with("uprobe:/") && probe.ends_with(":usleep"), "{text}");
    assert!(probe.contains("libc") && rest.starts_with("0x"), "{text}");
}

/// `-l` says how many call sites the compiler inlined a function at (DWARF
/// `DW_TAG_inlined_subroutine`): calls there never reach its probe.
#[test]
fn list_flags_a_function_inlined_at_call_sites() {
    let exe = c_fixture("inlined.c", "inlined_list", &["-O2"]);
    let listed = |pattern: &str| {
        let out = run_ok(agent().args(["debug", "-l", pattern]).arg(&exe));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let scale = listed("scale");
    let prefix = format!("uprobe:{}:scale  0x", exe.canonicalize().unwrap().display());
    assert!(scale.starts_with(&prefix), "{scale}");
    assert!(
        scale.ends_with("/inlined.c:7  inlined at 2 call sites: the probe misses those calls\n"),
        "{scale}"
    );
    let kept = listed("kept");
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert!(kept.trim_end().ends_with("/inlined.c:9"), "never inlined: {kept}");
}

/// A pattern that matches nothing points to aid's own listing (`-l`), not
/// to `nm -C`.
#[test]
fn a_pattern_that_matches_nothing_points_to_the_listing() {
    let exe = c_fixture("two_threads.c", "two_threads_list", &[]);
    let line = run_err(agent().args(["debug", "--list", "nothing_like_this"]).arg(&exe));
    assert_eq!(
        line,
        format!(
            "aid: pattern `nothing_like_this` matches no function in {}; list its functions with `aid-agent debug -l '*' PROGRAM` (or `-p PID -l '*'`), or try a wider glob",
            exe.canonicalize().unwrap().display()
        )
    );
    let line = run_err(agent().args(["record", "-t", "libc:nothing_like_this"]).arg(&exe));
    assert!(line.starts_with("aid: pattern `libc:nothing_like_this` matches no function in /"));
    assert!(
        line.ends_with(
            "; list its functions with `aid-agent debug -l 'libc:*' PROGRAM` (or `-p PID -l 'libc:*'`), or try a wider glob"
        ),
        "{line}"
    );
}

/// `-t a,b` is not a list and is never split: the pattern is used whole
/// (a C++ parameter list has commas, and `store::Cache::put(int, int)`
/// matches),
/// and when it matches nothing the error says to give one pattern per -t,
/// or the brace glob, which matches both.
#[test]
fn a_comma_list_pattern_is_refused_with_advice() {
    let exe = c_fixture("two_threads.c", "two_threads_list", &[]);
    let advice = "aid: pattern `worker_a,worker_b` matches no function: a comma does not separate patterns; give one per -t (-t worker_a -t worker_b), or one brace glob ('{worker_a,worker_b}')";
    let line = run_err(agent().args(["debug", "--list", "worker_a,worker_b"]).arg(&exe));
    assert_eq!(line, advice);
    let line = run_err(agent().args(["record", "-t", "worker_a,worker_b"]).arg(&exe));
    assert_eq!(line, advice);
    let out = run_ok(agent().args(["debug", "--list", "{worker_a,worker_b}"]).arg(&exe));
    let listed = String::from_utf8(out.stdout).unwrap();
    let mut names: Vec<&str> = listed
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().rsplit(':').next().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["worker_a", "worker_b"], "{listed}");
    let cpp = c_fixture("cache.cpp", "cache_cpp", &[]);
    let out = run_ok(agent().args(["debug", "--list", "store::Cache::put(int, int)"]).arg(&cpp));
    let listed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains("  store::Cache::put(int, int)"), "{listed}");
}

/// `debug --help` (and `-h`) groups the options under headings, as perf
/// does: each heading lists exactly its options, in this order.
#[test]
fn debug_help_groups_options_under_headings() {
    for flag in ["--help", "-h"] {
        let out = run_ok(agent().args(["debug", flag]));
        let text = String::from_utf8_lossy(&out.stdout);
        let groups = help_groups(&text);
        let headings: Vec<&str> = groups.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(
            headings,
            [
                "Arguments",
                "Options",
                "What to trace",
                "Runs",
                "Failure",
                "Interventions",
                "Amplification",
                "Services",
                "Output"
            ],
            "{flag}: {text}"
        );
        let of = |heading: &str| groups.iter().find(|(h, _)| h == heading).unwrap().1.clone();
        assert_eq!(of("Options"), ["-v, --verbose", "-h, --help"], "{flag}");
        assert_eq!(
            of("What to trace"),
            ["-t, --trace", "-l, --list", "--ring-size", "--max-probes"],
            "{flag}"
        );
        assert_eq!(
            of("Runs"),
            ["-n, --runs", "--max-runs", "--min-runs", "--seed", "-j, --jobs", "--fleet"],
            "{flag}"
        );
        assert_eq!(of("Failure"), ["--fail-on", "--timeout", "--hang-after"], "{flag}");
        assert_eq!(
            of("Services"),
            ["-p, --pid", "--unit", "--fail-if", "--context", "--unit-timeout"],
            "{flag}"
        );
        assert_eq!(
            of("Output"),
            ["--explain", "--svg", "--patterns", "-o, --out", "--store"],
            "{flag}"
        );
        assert!(of("Amplification").iter().all(|o| o.starts_with("--amplify")), "{flag}");
        assert_eq!(of("Amplification").len(), 6, "{flag}");
    }
}

/// The headings of a `--help` text with the option names under each
/// (`-t, --trace`, `--seed`), in order; value names and the `...` of
/// repeatable flags left out.
fn help_groups(text: &str) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|l| !l.starts_with(' ')) {
            groups.push((heading.to_owned(), Vec::new()));
        } else if let (Some(group), Some(rest)) = (groups.last_mut(), line.strip_prefix("  ")) {
            let rest = rest.trim_start();
            if rest.starts_with('-') && line.len() - rest.len() <= 6 {
                let names: Vec<&str> = rest
                    .split_whitespace()
                    .take_while(|w| w.starts_with('-'))
                    .map(|w| w.trim_end_matches([',', '.']))
                    .collect();
                group.1.push(names.join(", "));
            }
        }
    }
    groups
}

/// A mistyped subcommand or long option gets clap's suggestion on a line
/// of its own after the one-line error; exit 2.
#[test]
fn a_mistyped_subcommand_or_option_gets_claps_suggestion() {
    for (args, expected) in [
        (
            &["debgu"][..],
            "aid: unrecognized subcommand 'debgu' (see --help)\naid: tip: a similar subcommand exists: 'debug'\n",
        ),
        (
            &["analyze", "--explian"][..],
            "aid: unexpected argument '--explian' found (see --help)\naid: tip: a similar argument exists: '--explain'\n",
        ),
        // debug and record take everything from the program on as its
        // command line: a mistyped option is not taken for the program.
        (
            &["debug", "-t", "f", "--trase", "g", "./prog"][..],
            "aid: unexpected argument '--trase' found (see --help)\naid: tip: a similar argument exists: '--trace'\n",
        ),
        (
            &["record", "--runz=3", "./prog"][..],
            "aid: unexpected argument '--runz=3' found (see --help)\naid: tip: a similar argument exists: '--runs'\n",
        ),
        (
            &["debug", "--frobnicate", "./prog"][..],
            "aid: unexpected argument '--frobnicate' found (see --help)\n",
        ),
        // After `--`, a program's name may start with `-`.
        (
            &["debug", "--", "--trase"][..],
            "aid: `--trase` not found: give a path or a program on PATH\n",
        ),
    ] {
        let out = agent().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), expected, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn analyze_and_export_default_to_the_newest_session() {
    let (tmp, _newest) = sessions();
    let out = run_ok(agent().arg("analyze").current_dir(tmp.path()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("7 runs (2 failing, 5 passing)"), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 run(s) made under interventions are left out"), "{stderr}");
    let explained = run_ok(agent().args(["analyze", "--explain"]).current_dir(tmp.path()));
    assert!(
        String::from_utf8_lossy(&explained.stdout).contains("\nHow to read this:\n  importance")
    );
    let trace = tmp.path().join("t.json");
    run_ok(
        agent().args(["export", "--format", "chrome", "-o"]).arg(&trace).current_dir(tmp.path()),
    );
    assert!(trace.exists());
    // `-o -`: the same trace on standard output, in either format, and no
    // file named `-`.
    for format in ["chrome", "perfetto"] {
        let file = tmp.path().join(format!("t.{format}"));
        run_ok(
            agent().args(["export", "--format", format, "-o"]).arg(&file).current_dir(tmp.path()),
        );
        let out =
            run_ok(agent().args(["export", "--format", format, "-o", "-"]).current_dir(tmp.path()));
        assert_eq!(out.stdout, std::fs::read(&file).unwrap(), "{format}");
        assert!(!out.stdout.is_empty());
        assert!(!tmp.path().join("-").exists(), "{format}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("aid: wrote 8 run(s), "), "{stderr}");
        assert!(stderr.ends_with(" to standard output\n"), "{stderr}");
    }
    let empty = tempfile::tempdir().unwrap();
    let line = run_err(agent().arg("analyze").current_dir(empty.path()));
    assert_eq!(
        line,
        "aid: no session given and none in aid-sessions/: give a session directory (written by `aid-agent record`, `attach` or `debug`)"
    );
    let line =
        run_err(agent().args(["export", "--run", "99", "-o", "x.json"]).current_dir(tmp.path()));
    assert!(line.starts_with("aid: the session has no run 99 (runs 1-8)"), "{line}");
}

/// `mine`, `slice` and `compare` read the newest session when none is
/// named, as `analyze` and `export` do (the older one is damaged here, so
/// reading it would fail), and all six commands that read a session say
/// the same line, exit 2, when there is none.
#[test]
fn every_session_reader_defaults_to_the_newest_session() {
    let (tmp, newest) = sessions();
    std::fs::remove_file(tmp.path().join("aid-sessions/20250101-000000-older/runs.jsonl")).unwrap();
    for args in
        [&["mine"][..], &["slice", "--fail", "3"], &["compare", "--fail", "3", "--repeat", "0"]]
    {
        let named = run_ok(agent().args(args).arg(&newest));
        let default = run_ok(agent().args(args).current_dir(tmp.path()));
        assert!(!default.stdout.is_empty(), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&default.stdout),
            String::from_utf8_lossy(&named.stdout),
            "{args:?}"
        );
    }
    let empty = tempfile::tempdir().unwrap();
    for args in [
        &["analyze"][..],
        &["export", "-o", "-"],
        &["mine"],
        &["slice", "--run", "3"],
        &["compare", "--fail", "3"],
        &["watch", "--object", "events"],
    ] {
        let line = run_err(agent().args(args).current_dir(empty.path()));
        assert_eq!(
            line,
            "aid: no session given and none in aid-sessions/: give a session directory (written by `aid-agent record`, `attach` or `debug`)",
            "{args:?}"
        );
    }
}

/// `analyze -o FILE` writes what it would print to FILE, `-o -` to
/// standard output (no file named `-`); `--dot -` prints the DOT instead of
/// the table, which then goes only to `-o FILE`.
#[test]
fn analyze_writes_its_table_where_o_says_and_dot_dash_prints() {
    let (tmp, newest) = sessions();
    let stdout = |out: std::process::Output| String::from_utf8(out.stdout).unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let table = stdout(run_ok(agent().arg("analyze").arg(&newest)));
    assert!(table.starts_with("7 runs (2 failing, 5 passing)"), "{table}");
    let file = tmp.path().join("table.txt");
    assert_eq!(stdout(run_ok(agent().arg("analyze").arg(&newest).arg("-o").arg(&file))), "");
    assert_eq!(read(&file), table);
    let dash = run_ok(agent().args(["analyze", "-o", "-"]).arg(&newest).current_dir(tmp.path()));
    assert_eq!(stdout(dash), table);
    assert!(!tmp.path().join("-").exists());
    let dot_file = tmp.path().join("g.dot");
    assert_eq!(
        stdout(run_ok(agent().arg("analyze").arg(&newest).arg("--dot").arg(&dot_file))),
        table
    );
    let dot = read(&dot_file);
    assert!(dot.starts_with("digraph"), "{dot}");
    assert_eq!(stdout(run_ok(agent().args(["analyze", "--dot", "-"]).arg(&newest))), dot);
    let file2 = tmp.path().join("table2.txt");
    let both = run_ok(agent().args(["analyze", "--dot", "-", "-o"]).arg(&file2).arg(&newest));
    assert_eq!(stdout(both), dot);
    assert_eq!(read(&file2), table);
    assert_eq!(
        run_err(agent().args(["analyze", "--dot", "-", "-o", "-"]).arg(&newest)),
        "aid: --dot - and -o - both write to standard output: give one of them a FILE"
    );
}

/// In `mine`, `slice`, `compare` and `watch`, `-o DIR` is the session
/// directory their re-runs are written to (as in `record` and `debug`);
/// given where no re-run will be made it is refused, saying how to keep
/// the output instead.
#[test]
fn o_names_the_rerun_directory_and_is_refused_without_reruns() {
    let (tmp, newest) = sessions();
    for (args, when) in [
        (&["mine"][..], "mine re-runs the program only with --access watch"),
        (
            &["slice", "--fail", "3"],
            "slice re-runs the program only with --verify or --access watch",
        ),
        (
            &["compare", "--fail", "3", "--repeat", "0"],
            "compare re-runs the program only when --repeat is above 0",
        ),
    ] {
        let line =
            run_err(agent().args(args).args(["-o", "d"]).arg(&newest).current_dir(tmp.path()));
        let command = args[0];
        assert_eq!(
            line,
            format!(
                "aid: -o/--out DIR is where {command}'s re-runs are written, and {when}: to keep what it prints, redirect it (> FILE)"
            )
        );
        assert!(!tmp.path().join("d").exists());
    }
    for (command, option) in [
        ("analyze", "-o, --out <FILE>"),
        ("mine", "-o, --out <DIR>"),
        ("slice", "-o, --out <DIR>"),
        ("compare", "-o, --out <DIR>"),
        ("watch", "-o, --out <DIR>"),
    ] {
        let help = String::from_utf8(run_ok(agent().args([command, "--help"])).stdout).unwrap();
        assert!(help.contains(option), "{command}: {help}");
    }
}

/// The failing run has one name, `--fail N`, in `slice` and `compare`;
/// `--run N` is a visible alias of it in both, giving the same output.
#[test]
fn the_failing_run_is_fail_or_its_alias_run_in_slice_and_compare() {
    let (_tmp, newest) = sessions();
    for command in [&["slice"][..], &["compare", "--repeat", "0"]] {
        let with = |option: &str| {
            let out = run_ok(agent().args(command).args([option, "3"]).arg(&newest));
            String::from_utf8(out.stdout).unwrap()
        };
        let fail = with("--fail");
        assert!(!fail.is_empty(), "{command:?}");
        assert_eq!(with("--run"), fail, "{command:?}");
        let help = String::from_utf8(run_ok(agent().args([command[0], "--help"])).stdout).unwrap();
        assert!(help.contains("--fail <N>"), "{command:?}: {help}");
        assert!(help.contains("[alias: --run]"), "{command:?}: {help}");
        assert!(!help.contains("--run <N>"), "{command:?}: {help}");
    }
}

/// A Perfetto trace is binary: `-o -` refuses to write it to a terminal
/// (a pseudo-terminal here) and says what to do instead.
#[test]
fn export_refuses_a_binary_trace_on_a_terminal() {
    use std::os::fd::{FromRawFd as _, OwnedFd};
    let (tmp, _) = sessions();
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty only writes the two descriptors it opens into the
    // two ints given; name, termios and window size are left null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned
    // by nothing else.
    let (_master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let out = agent()
        .args(["export", "--format", "perfetto", "-o", "-"])
        .current_dir(tmp.path())
        .stdout(std::process::Stdio::from(slave))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "aid: a Perfetto trace is binary and stdout is a terminal: redirect it (`-o - > trace.pftrace`) or give -o FILE\n"
    );
    assert!(!tmp.path().join("-").exists());
}

#[test]
fn chrome_export_has_a_track_per_role_slices_with_args_and_instants() {
    let (tmp, dir) = sessions();
    let trace = tmp.path().join("trace.json");
    run_ok(
        agent()
            .arg("export")
            .arg(&dir)
            .args(["--run", "6,7", "--run", "8", "-f", "chrome", "-o"])
            .arg(&trace),
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let of = |ph: &str| events.iter().filter(|e| e["ph"] == ph).collect::<Vec<_>>();
    let processes: Vec<&str> = of("M")
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        processes,
        [
            "observe 6: fail (exit code 1)",
            "intervene 7: pass (exit code 0)",
            "amplify 8: pass (exit code 0)"
        ]
    );
    let threads: Vec<(u64, u64, &str)> = of("M")
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(&threads[..3], [(6, 1, "main"), (6, 2, "fetcher"), (6, 3, "reader")]);
    let slices = of("X");
    assert_eq!(slices.len(), 6);
    let use_cache = slices.iter().find(|e| e["name"] == "use_cache" && e["pid"] == 6).unwrap();
    assert_eq!(use_cache["tid"], 3);
    assert_eq!(use_cache["ts"].as_f64().unwrap(), 6_060.0);
    assert_eq!(use_cache["dur"].as_f64().unwrap(), 1.0);
    assert_eq!(
        use_cache["args"],
        serde_json::json!({"instance": 1, "arg0": "0x7f0000001000", "arg1": 2, "ret": 4})
    );
    let fetch = slices.iter().find(|e| e["name"] == "fetch" && e["pid"] == 6).unwrap();
    assert_eq!(fetch["args"]["ret"], "0x55550000");
    let instants = of("i");
    let names: Vec<(&str, u64)> = instants
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["pid"].as_u64().unwrap()))
        .collect();
    assert_eq!(names, [("intervention", 7), ("random delay", 8)]);
    assert_eq!(instants[0]["args"]["kind"], "override_return");
    assert_eq!(instants[1]["args"]["delay_us"], 250);
}

/// Parsed with Perfetto's own protobuf schema (the `perfetto` package on
/// PyPI, installed by `cargo xtask setup`). Perfetto's trace processor
/// itself would download its binary at run time, which this network
/// refuses, so the check is the schema, not the processor.
#[test]
#[ignore = "needs Python with the perfetto package: `cargo xtask test` runs it"]
fn perfetto_export_parses_with_perfettos_schema() {
    let (tmp, dir) = sessions();
    let trace = tmp.path().join("trace.pftrace");
    run_ok(agent().arg("export").arg(&dir).args(["--run", "6", "--run", "7", "-o"]).arg(&trace));
    let script = r#"
import sys
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent
t = Trace.FromString(open(sys.argv[1], "rb").read())
names = {}
for p in t.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        if d.HasField("thread"):
            names[d.uuid] = "thread %d/%s" % (d.thread.pid, d.thread.thread_name)
        elif d.HasField("process"):
            names[d.uuid] = "process %d/%s" % (d.process.pid, d.process.process_name)
for u in sorted(names):
    print("track", names[u])
open_slices = {}
for p in t.packet:
    if p.HasField("track_event"):
        e = p.track_event
        assert p.timestamp_clock_id == 3, p
        where = names[e.track_uuid]
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            args = ",".join("%s=%s" % (a.name, a.int_value if a.HasField("int_value") else hex(a.pointer_value) if a.HasField("pointer_value") else a.string_value or a.bool_value) for a in e.debug_annotations)
            open_slices.setdefault(e.track_uuid, []).append((p.timestamp, e.name, args))
        elif e.type == TrackEvent.TYPE_SLICE_END:
            start, name, args = open_slices[e.track_uuid].pop()
            print("slice", where, name, p.timestamp - start, args)
        elif e.type == TrackEvent.TYPE_INSTANT:
            print("instant", where, e.name, ",".join(a.name for a in e.debug_annotations))
assert all(not v for v in open_slices.values())
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(&trace).output().expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "track process 6/observe 6: fail (exit code 1)",
            "track thread 6/main",
            "track thread 6/fetcher",
            "track thread 6/reader",
            "track process 7/intervene 7: pass (exit code 0)",
            "track thread 7/main",
            "track thread 7/fetcher",
            "track thread 7/reader",
            "slice thread 6/fetcher fetch 49000 instance=1,arg0=0x7f0000001000,ret=0x55550000",
            "slice thread 6/reader use_cache 1000 instance=1,arg0=0x7f0000001000,arg1=2,ret=4",
            "slice thread 7/fetcher fetch 49000 instance=1,arg0=0x7f0000001000,ret=0x55550000",
            "instant thread 7/reader intervention applied,timed_out,kind,site,value",
            "slice thread 7/reader use_cache 1000 instance=1,arg0=0x7f0000001000,arg1=2,ret=3",
        ],
        "{text}"
    );
}

/// The pandas/DuckDB example of docs/session-format.md, run as written
/// against a session (DuckDB from PyPI, installed by `cargo xtask setup`).
#[test]
#[ignore = "needs Python with duckdb: `cargo xtask test` runs it"]
fn session_format_example_runs() {
    let (_tmp, dir) = sessions();
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/session-format.md"),
    )
    .unwrap();
    let script = doc
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```python block in docs/session-format.md");
    let out =
        Command::new("python3").arg("-c").arg(script).current_dir(&dir).output().expect("python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/session-format-example.txt"),
    )
    .unwrap();
    assert_eq!(text, expected);
}

/// `record` without `--trace` traces the program's own functions as
/// `debug` does, `-n` runs it exactly that many times, `-o` names the
/// session, and the runs are stored with their phase and `run` column.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn record_defaults_to_the_programs_own_functions() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_record_default", &[]);
    let (_tmp, out) = temp_session();
    let output = run_ok(agent().args(["record", "-n", "2", "-o"]).arg(&out).arg(&exe));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no --trace given: tracing the program's 6 own functions: add3, scale, negate, worker_a, worker_b, main"),
        "{stderr}"
    );
    let loaded = aid::store::load_full(&out).unwrap();
    assert_eq!(loaded.session.runs.len(), 2);
    assert!(loaded.records.iter().all(|r| r.phase == Some(aid::model::RunPhase::Observe)));
    let events = std::fs::read_to_string(out.join("runs/000002/events.csv")).unwrap();
    assert!(events.lines().skip(1).all(|l| l.starts_with("2,")), "{events}");
    // aid's own pthread_create probe (the C library has no DWARF): its
    // three arguments are pointers by the ABI, written in hex.
    let create = events
        .lines()
        .find(|l| l.contains(",pthread_create,entry,"))
        .unwrap_or_else(|| panic!("a pthread_create entry: {events}"));
    let args: Vec<&str> = create.split(',').skip(8).take(3).collect();
    assert!(args.iter().all(|a| a.starts_with("0x")), "{create}");
}

/// With no `--trace`, a program whose only function of its own is called
/// too often to trace within the budget, or within the untraced run's own
/// time (a million calls), is refused at once, with the cost and the flag
/// that traces it anyway (before: every run was observed with no probe at
/// all, and "tracing 0 of them: " was printed).
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn debug_refuses_when_no_own_function_fits_the_budget() {
    let _bpf = require_bpf();
    let exe = c_fixture("hot.c", "hot_default_budget", &[]);
    let (_tmp, out) = temp_session();
    let output =
        agent().args(["debug", "-o"]).arg(&out).arg(&exe).output().expect("running aid-agent");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("aid: ")
            && last.contains("none of the program's own functions fits the tracing budget")
            && last.contains("nor the untraced run's own time (")
            && last.contains("the cheapest, hot, costs ~")
            && last.ends_with("trace it anyway with --trace 'hot'"),
        "{stderr}"
    );
    assert!(!stderr.contains("tracing 0 of them"), "{stderr}");
    assert!(!stderr.contains("observed"), "no run observed: {stderr}");
}

/// Every path under `dir` (itself included), relative, with its owner
/// and group; links are not followed.
fn owners(dir: &Path) -> Vec<(String, u32, u32)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        let rel = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
        out.push((rel, meta.uid(), meta.gid()));
    }
    out.sort();
    out
}

/// Under `sudo` a session was root's and 0700: the user who asked for it
/// could not open it. With `SUDO_UID` and `SUDO_GID` set, `aid-sessions/`,
/// the session directory and every file in it are that user's; with
/// values that are not numbers, they stay root's, and nothing is said.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn a_session_under_sudo_belongs_to_the_invoking_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_sudo", &[]);
    let tmp = tempfile::tempdir().unwrap();
    let record = |uid: &str, gid: &str| {
        run_ok(
            agent()
                .args(["record", "-n", "1", "-t", "worker_a"])
                .arg(&exe)
                .current_dir(tmp.path())
                .env("SUDO_UID", uid)
                .env("SUDO_GID", gid),
        )
    };
    record("65534", "65533");
    let root = tmp.path().join("aid-sessions");
    let sessions: Vec<PathBuf> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let host = host_name();
    let files = [
        String::new(),
        "parquet".into(),
        "parquet/events".into(),
        format!("parquet/events/{host}-run-000001.parquet"),
        "parquet/threads".into(),
        format!("parquet/threads/{host}-run-000001.parquet"),
        "runs".into(),
        "runs.jsonl".into(),
        "runs/000001".into(),
        "runs/000001/events.csv".into(),
        "runs/000001/stderr.txt".into(),
        "runs/000001/stdout.txt".into(),
        "runs/000001/threads.csv".into(),
        "session.json".into(),
    ];
    let name = sessions[0].file_name().unwrap().to_string_lossy().into_owned();
    let mut expected = vec![(String::new(), 65534, 65533)];
    expected.extend(files.iter().map(|f| {
        let rel = if f.is_empty() { name.clone() } else { format!("{name}/{f}") };
        (rel, 65534, 65533)
    }));
    assert_eq!(owners(&root), expected);
    let mode = std::fs::metadata(&sessions[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);

    std::fs::remove_dir_all(&root).unwrap();
    let out = record("nobody", "65533");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("SUDO"), "{stderr}");
    let owned = owners(&root);
    assert_eq!(owned.len(), files.len() + 1, "{owned:?}");
    assert!(owned.iter().all(|&(_, uid, gid)| (uid, gid) == (0, 0)), "{owned:?}");
}

/// This machine's name as the `host` column holds it.
fn host_name() -> String {
    nix::unistd::gethostname().unwrap().to_string_lossy().into_owned()
}

/// A session recorded for real has Parquet tables with exactly the rows
/// of its CSV files (every cell, as text), every run exactly once with
/// its rows, and this host in the `host` column: checked with DuckDB.
#[test]
#[ignore = "needs root, eBPF and Python with duckdb: `cargo xtask test` runs it"]
fn parquet_tables_hold_the_csv_rows_once_per_run() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_parquet", &[]);
    let (_tmp, out) = temp_session();
    run_ok(agent().args(["record", "-n", "3", "-o"]).arg(&out).arg(&exe));
    let loaded = aid::store::load_full(&out).unwrap();
    assert_eq!(loaded.records.len(), 3);
    let host = host_name();
    let script = r#"
import duckdb
for table, cols in [
    ("events", "run, t_ns, tid, role, func, function, point, instance, arg0, arg1, arg2, ret, content"),
    ("threads", "run, role, tid, name, parent_role, created_ns"),
]:
    csv = f"select * from read_csv('runs/*/{table}.csv', all_varchar = true)"
    casts = ", ".join(f"{c}::varchar as {c}" for c in cols.split(", "))
    pq = f"select {casts} from 'parquet/{table}/*.parquet'"
    missing = duckdb.sql(f"select count(*) from ({csv} except all {pq})").fetchall()[0][0]
    extra = duckdb.sql(f"select count(*) from ({pq} except all {csv})").fetchall()[0][0]
    print(table, "missing", missing, "extra", extra)
    for row in duckdb.sql(f"""
        select host, run, count(*), count(distinct filename)
        from read_parquet('parquet/{table}/*.parquet', filename = true)
        group by all order by all""").fetchall():
        print(table, *row)
"#;
    let output =
        Command::new("python3").arg("-c").arg(script).current_dir(&out).output().expect("python3");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut expected = vec![];
    for table in ["events", "threads"] {
        expected.push(format!("{table} missing 0 extra 0"));
        for r in &loaded.records {
            let rows = if table == "events" { r.events.rows } else { r.threads.rows };
            assert!(rows > 0, "run {} has {table}", r.id);
            expected.push(format!("{table} {host} {} {rows} 1", r.id));
        }
    }
    assert_eq!(text.lines().collect::<Vec<_>>(), expected, "{text}");
    for table in ["events", "threads"] {
        let mut names: Vec<String> = std::fs::read_dir(out.join("parquet").join(table))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let want: Vec<String> = (1..=3).map(|i| format!("{host}-run-{i:06}.parquet")).collect();
        assert_eq!(names, want);
    }
}

/// `--store DIR` puts the tables in DIR/<session name>/, not in the
/// session directory, and a file:// URL means the same directory.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn store_puts_the_tables_under_the_session_name() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_store", &[]);
    let (tmp, out) = temp_session();
    let lake = tmp.path().join("lake");
    let url = format!("file://{}", lake.display());
    run_ok(agent().args(["record", "-n", "1", "--store", &url, "-o"]).arg(&out).arg(&exe));
    let name = out.file_name().unwrap();
    let host = host_name();
    for table in ["events", "threads"] {
        let file = lake.join(name).join(table).join(format!("{host}-run-000001.parquet"));
        assert!(std::fs::read(&file).unwrap().starts_with(b"PAR1"), "{}", file.display());
        assert_eq!(
            std::fs::read_dir(out.join("parquet").join(table)).map(Iterator::count).ok(),
            None
        );
    }
}

/// A `--store` aid cannot write to is refused before anything runs, in
/// one line (no root needed: it is checked first).
#[test]
fn bad_store_is_one_line_error() {
    for (store, message) in [
        (
            "s3:///prefix",
            "aid: --store s3:///prefix: name a bucket: s3://BUCKET or s3://BUCKET/PREFIX",
        ),
        ("gs://bucket", "aid: --store gs://bucket: unknown URL scheme"),
        ("file://relative", "aid: --store file://relative: a file:// URL needs an absolute path"),
        ("", "aid: --store is empty"),
    ] {
        let line = run_err(agent().args(["record", "--store", store, "--", "/bin/true"]));
        assert!(line.starts_with(message), "{store}: {line}");
    }
    let line = run_err(agent().args([
        "debug",
        "--pid",
        "1",
        "--unit",
        "f",
        "--fail-if",
        "f ret < 0",
        "--store",
        "/tmp/x",
    ]));
    assert!(line.starts_with("aid: --store is for a program aid starts"), "{line}");
}
