//! The session format written and read back: round trips, verification,
//! damaged and hostile sessions.

use sha2::{Digest as _, Sha256};

use super::{lines::*, reader::*, writer::*, *};
use crate::model::{
    EventRow, Label, Point, RecordedRun, Run, ValueType, calls_from_rows,
    testing::{self, function, thread},
};

fn header() -> Header {
    test_header(
        Mode::Record,
        vec![function(0, "f(int, int)").with_symbol("_Z1fii").in_module("/bin/x", 0x1000)],
    )
}

fn stored(run: &Run, rows: &[EventRow], stdout: &str, stderr: &str) -> RecordedRun {
    RecordedRun {
        host: None,
        run: run.clone(),
        rows: rows.to_vec(),
        start_ns: 100,
        orphan_exits: 0,
        stdout: stdout.into(),
        stderr: stderr.into(),
        probe_errors: 0,
        notes: Vec::new(),
        sync_steps: Vec::new(),
        hang: None,
    }
}

fn run(id: u32) -> (Run, Vec<EventRow>) {
    let rows = vec![
        EventRow {
            t_ns: 5,
            tid: 7,
            role: 0,
            func: 0,
            point: Point::Entry,
            instance: 1,
            args: [1, -2, 3],
            ret: None,
            content: Some(*b"SKU-7\0\0\0\0\0\0\0\0\0\0\0"),
        },
        EventRow {
            t_ns: 9,
            tid: 7,
            role: 0,
            func: 0,
            point: Point::Exit,
            instance: 1,
            args: [0; 3],
            ret: Some(-1),
            content: None,
        },
    ];
    let outcome =
        Outcome { exit_code: Some(1), reason: "exit code 1".into(), ..Default::default() };
    let mut main = thread(0, "main");
    main.tid = 7;
    let run = testing::run(id, Label::Fail, calls_from_rows(&rows), 12)
        .with_threads(vec![main])
        .with_outcome(outcome);
    (run, rows)
}

#[test]
fn round_trip_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let h = header();
    let mut w = Writer::create(dir.path(), &h).unwrap();
    let (r, rows) = run(1);
    w.append(&stored(&r, &rows, "out", "err"), &h.functions).unwrap();
    let s = load(dir.path()).unwrap();
    assert_eq!(s.runs, vec![r]);
    assert_eq!(s.functions, h.functions);
}

/// A call an exception ended is an exit row with no return value: an
/// empty `ret` cell in events.csv, read back as the same unwound call.
#[test]
fn an_unwound_call_round_trips_as_an_exit_without_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let h = header();
    let mut w = Writer::create(dir.path(), &h).unwrap();
    let (_, mut rows) = run(1);
    rows[1].ret = None;
    let mut main = thread(0, "main");
    main.tid = 7;
    let r = testing::run(1, Label::Fail, calls_from_rows(&rows), 12).with_threads(vec![main]);
    assert!(r.calls[0].unwound && r.calls[0].exit_ns == Some(9), "{:?}", r.calls[0]);
    w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
    let csv = fs::read_to_string(dir.path().join("runs/000001/events.csv")).unwrap();
    assert!(csv.lines().nth(2).unwrap().ends_with(",exit,1,,,,,"), "{csv}");
    let s = load(dir.path()).unwrap();
    assert_eq!(s.runs, vec![r]);
}

/// A session of three identical runs, 1 to 3.
fn three_runs() -> (tempfile::TempDir, Header) {
    let dir = tempfile::tempdir().unwrap();
    let h = header();
    let mut w = Writer::create(&dir.path().join("s"), &h).unwrap();
    for id in 1..=3 {
        let (r, rows) = run(id);
        w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
    }
    (dir, h)
}

fn ids(loaded: &Loaded) -> Vec<u32> {
    loaded.session.runs.iter().map(|r| r.id).collect()
}

#[test]
fn truncated_or_flipped_events_file_skips_that_run() {
    let (dir, _) = three_runs();
    let s = dir.path().join("s");
    let events = s.join("runs/000002/events.csv");
    let text = fs::read_to_string(&events).unwrap();
    fs::write(&events, &text[..text.len() - 3]).unwrap();
    let mut bytes = fs::read(s.join("runs/000003/threads.csv")).unwrap();
    bytes[20] ^= 0x01;
    fs::write(s.join("runs/000003/threads.csv"), bytes).unwrap();
    let loaded = load_full(&s).unwrap();
    assert_eq!(ids(&loaded), vec![1]);
    let why: Vec<String> = loaded.skipped.iter().map(ToString::to_string).collect();
    assert_eq!(why.len(), 2);
    assert!(why[0].starts_with("run 2 skipped: session file "), "{why:?}");
    assert!(why[0].ends_with("runs/000002/events.csv is corrupt: checksum mismatch (truncated or modified after recording)"), "{why:?}");
    assert!(why[1].contains("runs/000003/threads.csv is corrupt: checksum mismatch"), "{why:?}");
}

#[test]
fn cut_short_or_damaged_record_and_missing_file_skip_their_runs() {
    let (dir, _) = three_runs();
    let s = dir.path().join("s");
    let runs = s.join("runs.jsonl");
    let text = fs::read_to_string(&runs).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[0] = lines[0].replacen("\"label\"", "\"lab\u{1}el\"", 1);
    let last = lines.pop().unwrap();
    let cut = format!("{}\n{}", lines.join("\n"), &last[..last.len() - 10]);
    fs::write(&runs, cut).unwrap();
    fs::remove_file(s.join("runs/000002/events.csv")).unwrap();
    let loaded = load_full(&s).unwrap();
    assert_eq!(ids(&loaded), Vec::<u32>::new());
    let why: Vec<String> = loaded.skipped.iter().map(ToString::to_string).collect();
    assert_eq!(why.len(), 3, "{why:?}");
    assert!(why[0].contains("runs.jsonl line 1 is damaged"), "{why:?}");
    assert!(why[1].contains("runs.jsonl line 3 is cut short"), "{why:?}");
    assert!(why[2].starts_with("run 2 skipped: session file "), "{why:?}");
    assert!(why[2].contains("runs/000002/events.csv is missing (run 2)"), "{why:?}");
}

#[test]
fn a_file_outside_the_session_is_refused() {
    for bad in ["/etc/shadow", "../outside.csv", "runs/../../outside.csv", "link/events.csv"] {
        let (dir, _) = three_runs();
        let s = dir.path().join("s");
        fs::write(dir.path().join("outside.csv"), "t_ns\n").unwrap();
        std::os::unix::fs::symlink(dir.path(), s.join("link")).unwrap();
        let runs = s.join("runs.jsonl");
        let text = fs::read_to_string(&runs).unwrap();
        fs::write(&runs, text.replacen("runs/000002/events.csv", bad, 1)).unwrap();
        let Err(err) = load(&s) else { panic!("{bad} was read") };
        let err = err.to_string();
        assert_eq!(
            err,
            format!(
                "{} names `{bad}`, outside the session directory: refusing to read it (the session was tampered with)",
                runs.display()
            )
        );
    }
}

/// A session's own files are never read through a symbolic link: a
/// `runs.jsonl` or `session.json` pointing elsewhere is refused, in one
/// line, before anything of the target is read.
#[test]
fn a_session_file_that_is_a_symlink_is_refused() {
    for name in ["runs.jsonl", "session.json"] {
        let (dir, _) = three_runs();
        let s = dir.path().join("s");
        let elsewhere = dir.path().join("elsewhere");
        fs::rename(s.join(name), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, s.join(name)).unwrap();
        let Err(err) = load(&s) else { panic!("{name} was read through its link") };
        assert_eq!(
            err.to_string(),
            format!(
                "{} is a symbolic link: refusing to follow it (the session was tampered with)",
                s.join(name).display()
            )
        );
    }
}

#[test]
fn session_directories_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, _) = three_runs();
    let s = dir.path().join("s");
    for d in [s.clone(), s.join("runs"), s.join("runs/000001")] {
        assert_eq!(fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700, "{d:?}");
    }
    let fresh = dir.path().join("a/b");
    prepare(&fresh, &Destination::Session).unwrap();
    assert_eq!(fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(fs::read_dir(&fresh).unwrap().count(), 0, "prepare leaves nothing behind");
    Writer::create(&fresh, &header()).unwrap();
}

/// A run that cannot be written (here: its directory is taken by a
/// file) leaves no trace, and the runs before it stay readable.
#[test]
fn a_failed_append_leaves_the_session_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    let h = header();
    let mut w = Writer::create(&s, &h).unwrap();
    let (r, rows) = run(1);
    w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
    let before = fs::read(s.join("runs.jsonl")).unwrap();
    fs::write(s.join("runs/000002"), "in the way").unwrap();
    let (r2, rows2) = run(2);
    let err = w.append(&stored(&r2, &rows2, "", ""), &h.functions).unwrap_err().to_string();
    assert!(err.starts_with("cannot write "), "{err}");
    assert!(err.ends_with(": choose another --out"), "{err}");
    assert_eq!(fs::read(s.join("runs.jsonl")).unwrap(), before);
    assert_eq!(ids(&load_full(&s).unwrap()), vec![1]);
}

#[test]
fn not_a_session_and_existing_dir() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(load(dir.path()), Err(SessionError::NotASession(_))));
    fs::write(dir.path().join("x"), "").unwrap();
    assert!(matches!(Writer::create(dir.path(), &header()), Err(SessionError::Exists(_))));
}

/// The columns the reader checks are the fields the writer fills, in
/// the same order.
#[test]
fn csv_columns_are_the_line_fields() {
    fn header<L: Serialize>(line: &L) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(line).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        text.lines().next().unwrap().to_owned()
    }
    let (r, rows) = run(1);
    assert_eq!(header(&EventLine::new(1, &rows[0], &[])), EVENT_COLUMNS.join(","));
    assert_eq!(header(&ThreadLine::new(1, &r.threads[0])), THREAD_COLUMNS.join(","));
}

/// Version 2 files: a `run` column, pointers in hex, a phase per run,
/// the settings in session.json; version 3: the pointee content of an
/// entry in hex (trailing zeros left out); all read back exactly.
#[test]
fn run_column_hex_pointers_phase_and_settings() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header();
    let ptr = ValueType::POINTER;
    h.functions[0] = h.functions[0].clone().with_types(ptr, vec![ptr, ValueType::UNKNOWN]);
    let mut w = Writer::create(dir.path(), &h).unwrap();
    let settings = Settings { safe: vec!["f*".into()], confidence: 0.99, ..Settings::default() };
    w.set_settings(settings.clone()).unwrap();
    let (mut r, mut rows) = run(3);
    rows[0].args = [0x7ffd_1234, -2, 0];
    rows[1].ret = Some(0x5555_0000);
    r.calls = calls_from_rows(&rows);
    w.append(&stored(&r, &rows, "", ""), &h.functions).unwrap();
    let events = fs::read_to_string(dir.path().join("runs/000003/events.csv")).unwrap();
    assert_eq!(
        events,
        "run,t_ns,tid,role,func,function,point,instance,arg0,arg1,arg2,ret,content\n\
         3,5,7,0,0,\"f(int, int)\",entry,1,0x7ffd1234,-2,0,,534b552d37\n\
         3,9,7,0,0,\"f(int, int)\",exit,1,,,,0x55550000,\n"
    );
    let threads = fs::read_to_string(dir.path().join("runs/000003/threads.csv")).unwrap();
    assert_eq!(threads, "run,role,tid,name,parent_role,created_ns\n3,0,7,main,,0\n");
    let loaded = load_full(dir.path()).unwrap();
    assert_eq!(loaded.session.runs, vec![r]);
    assert_eq!(loaded.records[0].phase, Some(RunPhase::Observe));
    assert_eq!(loaded.header.settings, Some(settings));
}

/// Pointee content that is all zeros stays apart from none read; a cell
/// that is not hex, or longer than what a probe reads, is refused.
#[test]
fn content_cells() {
    let zeros = crate::model::Content::default();
    assert_eq!(content_cell(&zeros), "00");
    assert_eq!(parse_content("00"), Ok(zeros));
    let mut c = zeros;
    c[..3].copy_from_slice(b"a\0b");
    assert_eq!(content_cell(&c), "610062");
    assert_eq!(parse_content("610062"), Ok(c));
    for bad in ["6", "zz", &"00".repeat(17)] {
        assert!(parse_content(bad).is_err(), "{bad}");
    }
    assert_eq!(event_columns(2).last(), Some(&"ret"));
    assert_eq!(event_columns(1).first(), Some(&"t_ns"));
}

/// A version 1 session (no `run` column, decimal pointers, no phase)
/// is still read.
#[test]
fn version_1_sessions_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header();
    h.version = 1;
    fs::create_dir_all(dir.path().join("runs/000001")).unwrap();
    fs::write(dir.path().join("session.json"), serde_json::to_string(&h).unwrap()).unwrap();
    let events = "t_ns,tid,role,func,function,point,instance,arg0,arg1,arg2,ret\n\
                  5,7,0,0,f,entry,1,140724908732980,-2,3,\n9,7,0,0,f,exit,1,,,,-1\n";
    let threads = "role,tid,name,parent_role,created_ns\n0,7,main,,0\n";
    let file = |name: &str, text: &str| {
        fs::write(dir.path().join("runs/000001").join(name), text).unwrap();
        FileRef {
            path: format!("runs/000001/{name}"),
            rows: 2 - u64::from(name == "threads.csv"),
            sha256: hex(&Sha256::digest(text.as_bytes())),
        }
    };
    let mut record = serde_json::json!({
        "id": 1, "label": "fail", "outcome": {"exit_code": 1, "signal": null,
        "timed_out": false, "wall_ns": 10, "reason": "exit code 1"},
        "lost_events": 0, "complete": true, "end_ns": 12, "start_monotonic_ns": 100,
        "orphan_exits": 0,
    });
    record["events"] = serde_json::to_value(file("events.csv", events)).unwrap();
    record["threads"] = serde_json::to_value(file("threads.csv", threads)).unwrap();
    fs::write(dir.path().join("runs.jsonl"), format!("{record}\n")).unwrap();
    let loaded = load_full(dir.path()).unwrap();
    assert_eq!(loaded.records[0].phase, None);
    let call = &loaded.session.runs[0].calls[0];
    assert_eq!((call.args, call.ret), ([140_724_908_732_980, -2, 3], Some(-1)));
    assert_eq!(loaded.session.runs[0].phase(), RunPhase::Observe);
}

#[test]
fn latest_is_the_newest_session() {
    let root = tempfile::tempdir().unwrap();
    let err = latest(&root.path().join("none")).unwrap_err().to_string();
    assert!(err.starts_with("no session given and none in "), "{err}");
    for (name, created) in [("b", 20), ("a", 30), ("c", 10)] {
        let mut h = header();
        h.created = created;
        Writer::create(&root.path().join(name), &h).unwrap();
    }
    fs::create_dir(root.path().join("not-a-session")).unwrap();
    assert_eq!(latest(root.path()).unwrap(), root.path().join("a"));
}

/// Two sessions of one program started in the same second shared one
/// default directory (its name has second resolution): each gets its
/// own, and the newest-session lookup picks the one created later even
/// where the names sort the other way (`prog-10` before `prog-9`).
#[test]
fn sessions_started_in_the_same_second_get_their_own_directories() {
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("aid-sessions");
    let second = 1_795_000_000;
    let dirs: Vec<PathBuf> = (0..10)
        .map(|_| create_default_in(&sessions, Path::new("/usr/bin/prog"), second).unwrap())
        .collect();
    let names: Vec<String> =
        dirs.iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let mut expected = vec!["20261118-110640-prog".to_owned()];
    expected.extend((2..=10).map(|n| format!("20261118-110640-prog-{n}")));
    assert_eq!(names, expected);
    for (i, dir) in dirs.iter().enumerate() {
        let mut h = header();
        h.created = second;
        h.created_subsec_ns = 1_000 * i as u32;
        Writer::create(dir, &h).unwrap();
    }
    assert_eq!(latest(&sessions).unwrap(), dirs[9]);
    // Created in the same second, later: another program's session whose
    // name sorts first.
    let other = create_default_in(&sessions, Path::new("/bin/a"), second).unwrap();
    assert_eq!(other.file_name().unwrap(), "20261118-110640-a");
    let mut h = header();
    h.created = second;
    h.created_subsec_ns = 999_999_999;
    Writer::create(&other, &h).unwrap();
    assert_eq!(latest(&sessions).unwrap(), other);
}

#[test]
fn utc_stamp_is_right() {
    assert_eq!(utc_stamp(0), "19700101-000000");
    assert_eq!(utc_stamp(1_795_000_000), "20261118-110640");
}
