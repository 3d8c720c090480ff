//! A fleet on this machine: a real nats-server on 127.0.0.1 (JetStream
//! on, its store in a temporary directory), workers (`aid-agent worker`)
//! and a coordinator (`debug --fleet`), each stopped by its pid.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::common::*;

/// A nats-server of the test's own, killed when dropped.
pub struct Server {
    pub url: String,
    _process: Background,
    _dir: tempfile::TempDir,
}

/// Starts nats-server with JetStream on a port of 127.0.0.1 it chooses
/// itself (`-p -1`) and names in its ports file: two tests that start one
/// at once never share a port.
pub fn nats_server() -> Server {
    let exe = which::which("nats-server")
        .or_else(|_| which::which("/usr/sbin/nats-server"))
        .expect("nats-server is not installed: `cargo xtask setup` installs it");
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(exe)
        .args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
        .arg(dir.path().join("js"))
        .arg("--ports_file_dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting nats-server");
    let ports = dir.path().join(format!("nats-server_{}.ports", child.id()));
    let process = Background(child);
    let mut url = None;
    assert!(
        wait_for(10, || {
            let read = std::fs::read_to_string(&ports).ok();
            let v: Option<serde_json::Value> = read.and_then(|t| serde_json::from_str(&t).ok());
            url = v.and_then(|v| v["nats"][0].as_str().map(str::to_owned));
            url.is_some()
        }),
        "nats-server wrote no ports file at {}",
        ports.display()
    );
    Server { url: url.unwrap(), _process: process, _dir: dir }
}

/// `aid-agent worker --connect URL --name NAME`, its standard error in
/// `log` (a few lines a session).
pub fn worker(url: &str, name: &str, log: &Path) -> Background {
    let err = std::fs::File::create(log).unwrap();
    let child = agent()
        .args(["worker", "--connect", url, "--name", name])
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("starting a worker");
    let w = Background(child);
    assert!(
        wait_for(20, || std::fs::read_to_string(log).is_ok_and(|t| t.contains("Ctrl-C stops"))),
        "worker {name} did not connect: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    w
}

/// Whether a process has `pid` for parent: a child of any of its
/// threads (a worker starts its runs from a thread of its own).
fn has_children(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("children")).is_ok_and(|c| !c.trim().is_empty())
    })
}

/// `debug --fleet URL -v` of the fixture's `step` for `runs` observed runs
/// and no more (no amplification), into `out`; its standard error in `log`.
fn coordinator(url: &str, runs: u32, out: &Path, exe: &Path, log: &Path) -> Background {
    let runs = runs.to_string();
    Background(
        agent()
            .args(["-v", "debug", "--fleet", url, "-t", "step", "--runs", &runs])
            .args(["--amplify-below", "0", "--max-runs", &runs, "--out"])
            .arg(out)
            .arg("--")
            .arg(exe)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

/// How `process` ended, within `secs` (the test fails otherwise, with
/// what it said in `log`).
fn ended(process: &mut Background, secs: u64, log: &Path) -> std::process::ExitStatus {
    let mut status = None;
    let done = wait_for(secs, || {
        status = process.0.try_wait().unwrap();
        status.is_some()
    });
    assert!(
        done,
        "still running after {secs} s:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    status.unwrap()
}

/// `runs.jsonl`'s records: (id, phase, host, label).
fn records(out: &Path) -> Vec<(u64, String, Option<String>, String)> {
    std::fs::read_to_string(out.join("runs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_u64().unwrap(),
                v["phase"].as_str().unwrap_or_default().to_owned(),
                v.get("host").and_then(|h| h.as_str()).map(str::to_owned),
                v["label"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A worker killed with SIGKILL while it makes a run loses nothing: its
/// batch is delivered again after the server's acknowledgement wait, to
/// another worker, and every run of the session is stored exactly once
/// (runs.jsonl, and the Parquet tables read with DuckDB); the session is
/// read back by `analyze`.
#[test]
#[ignore = "needs root, eBPF, nats-server and Python with duckdb: `cargo xtask test` runs it"]
fn a_worker_killed_mid_batch_loses_no_run_and_none_counts_twice() {
    let _bpf = require_bpf();
    let exe = c_fixture("fleet.c", "fleet", &[]);
    let server = nats_server();
    let (tmp, out) = temp_session();
    let logs: Vec<PathBuf> = (1..=3).map(|i| tmp.path().join(format!("w{i}.log"))).collect();
    let mut workers: Vec<Option<Background>> =
        (1..=3).map(|i| Some(worker(&server.url, &format!("w{i}"), &logs[i - 1]))).collect();
    let coordinator_log = tmp.path().join("debug.log");
    let mut debug = coordinator(&server.url, 12, &out, &exe, &coordinator_log);
    // w1 in the middle of a run: its target is its child.
    let w1 = workers[0].as_ref().unwrap().pid();
    assert!(
        wait_for(60, || has_children(w1)),
        "worker w1 never made a run:\n{}\n{}",
        std::fs::read_to_string(&coordinator_log).unwrap_or_default(),
        std::fs::read_to_string(&logs[0]).unwrap_or_default()
    );
    signal(w1, nix::sys::signal::Signal::SIGKILL);
    workers[0].take();
    let status = ended(&mut debug, 300, &coordinator_log);
    let said = std::fs::read_to_string(&coordinator_log).unwrap();
    // Exit 2 would be "no run failed": the fixture fails a run on a coin,
    // so 12 runs all pass once in 4096 sessions (`fleet.c`).
    assert!(
        status.success() || status.code() == Some(1),
        "debug --fleet ended with {status:?}:\n{said}"
    );
    assert!(said.contains("runs go to 3 workers"), "{said}");
    assert!(said.contains("worker w1 stopped answering"), "{said}");
    assert!(said.contains("delivered again"), "{said}");
    // Every observed run once, numbered from 1 with no gap.
    let all = records(&out);
    let observed: Vec<_> = all.iter().filter(|r| r.1 == "observe").collect();
    let ids: Vec<u64> = observed.iter().map(|r| r.0).collect();
    assert_eq!(ids, (1..=12).collect::<Vec<u64>>(), "{said}");
    // Made by the workers, on this host: its name in each record.
    let host = aid::store::host_name();
    assert!(observed.iter().all(|r| r.2.as_deref() == Some(host.as_str())), "{all:?}");
    let failing = observed.iter().filter(|r| r.3 == "fail").count();
    let script = r#"
import duckdb
rows = duckdb.sql("""
    select run, host, count(distinct filename)
    from read_parquet('parquet/threads/*.parquet', filename = true)
    where run <= 12 group by all order by run""").fetchall()
for r in rows:
    print(*r)
"#;
    let output =
        Command::new("python3").arg("-c").arg(script).current_dir(&out).output().expect("python3");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let want: Vec<String> = (1..=12).map(|i| format!("{i} {host} 1")).collect();
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().collect::<Vec<_>>(), want);
    // Only observed runs: no candidate, so no round on this host.
    assert_eq!(all.len(), 12, "{all:?}");
    // session.json and the report name the fleet and what each worker made.
    let header: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("session.json")).unwrap()).unwrap();
    assert_eq!(header["fleet"]["url"], server.url.as_str(), "{header}");
    let made: Vec<(String, u64)> = header["fleet"]["workers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(w, n)| (w.clone(), n.as_u64().unwrap()))
        .collect();
    assert!(made.iter().all(|(w, _)| ["w1", "w2", "w3"].contains(&w.as_str())), "{header}");
    assert_eq!(made.iter().map(|(_, n)| n).sum::<u64>(), 12, "{header}");
    let by: Vec<String> = made.iter().map(|(w, n)| format!("{w}: {n}")).collect();
    let report = std::fs::read_to_string(out.join("report.txt")).unwrap();
    let line = format!(
        "made by a fleet's workers through {} ({} runs in all),",
        server.url,
        by.join(", ")
    );
    assert!(report.contains(&line), "{line}\n{report}");
    let analyzed = run_ok(agent().arg("analyze").arg(&out));
    let first = format!("12 runs ({failing} failing, {} passing), ", 12 - failing);
    let text = String::from_utf8_lossy(&analyzed.stdout);
    assert!(text.starts_with(&first), "{text}");
}

/// A batch that every worker it goes to gives back unfinished (each is
/// stopped with Ctrl-C in the middle of a run) is delivered five times at
/// most; the server then says so and the coordinator ends, naming the
/// runs not made, instead of waiting for them while workers are alive.
#[test]
#[ignore = "needs root, eBPF and nats-server: `cargo xtask test` runs it"]
fn a_batch_given_back_five_times_ends_the_session_in_one_line() {
    let _bpf = require_bpf();
    let exe = c_fixture("fleet.c", "fleet", &[]);
    let server = nats_server();
    let (tmp, out) = temp_session();
    let log = |i: u32| tmp.path().join(format!("w{i}.log"));
    let mut current = worker(&server.url, "w1", &log(1));
    let coordinator_log = tmp.path().join("debug.log");
    let mut debug = coordinator(&server.url, 4, &out, &exe, &coordinator_log);
    for i in 1..=5 {
        let pid = current.pid();
        assert!(
            wait_for(60, || has_children(pid)),
            "worker w{i} never made a run:\n{}\n{}",
            std::fs::read_to_string(&coordinator_log).unwrap_or_default(),
            std::fs::read_to_string(log(i)).unwrap_or_default()
        );
        signal(pid, nix::sys::signal::Signal::SIGINT);
        let status = current.0.wait().unwrap();
        assert_eq!(status.code(), Some(130), "w{i}: {}", std::fs::read_to_string(log(i)).unwrap());
        if i == 1 {
            // Long enough for the coordinator to look at its workers
            // (every 2 s) with none connected.
            std::thread::sleep(std::time::Duration::from_secs(3));
        }
        // The next worker takes the batch back (the sixth finds it dropped).
        current = worker(&server.url, &format!("w{}", i + 1), &log(i + 1));
    }
    // Without the server's word the coordinator would wait on: w6 is alive.
    let status = ended(&mut debug, 60, &coordinator_log);
    let said = std::fs::read_to_string(&coordinator_log).unwrap();
    assert_eq!(status.code(), Some(2), "{said}");
    let last = said.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("aid: ")
            && last.contains(" not made: a batch went to workers 5 times and each stopped, or lost the server, before reporting it (runs "),
        "{said}"
    );
    // Each worker stopped with Ctrl-C left the fleet; none stopped
    // answering.
    assert!(said.contains("worker w1 left the fleet"), "{said}");
    assert!(!said.contains("stopped answering"), "{said}");
    // The sixth worker made none of it.
    assert!(!std::fs::read_to_string(log(6)).unwrap().contains("session "), "{said}");
    // No run was recorded, so none is claimed.
    let recorded = std::fs::read_to_string(out.join("runs.jsonl")).unwrap_or_default();
    assert_eq!(recorded.lines().filter(|l| l.contains("\"observe\"")).count(), 0, "{recorded}");
}

/// A worker and a coordinator given an address where no server listens
/// say so in one line, with how to start one, and exit 2.
#[test]
#[ignore = "needs root (the worker checks its privileges first): `cargo xtask test` runs it"]
fn no_server_at_the_address_is_one_line() {
    let _bpf = require_bpf();
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("nats://127.0.0.1:{port}");
    let want = format!(
        "aid: cannot reach the NATS server at {url}: nothing answered there: start one with JetStream on (`nats-server -js -a 127.0.0.1`) or give its nats://HOST:PORT\n"
    );
    let out = agent().args(["worker", "--connect", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), want);
    let exe = c_fixture("fleet.c", "fleet_no_server", &[]);
    let (_tmp, session, out) = debug_session(&exe, &["--fleet", &url, "-t", "step"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.ends_with(&want), "{stderr}");
    drop(session);
}

/// `attach --fleet` on one service and `attach --join` on another make one
/// session: every unit of both, each numbered once in the order written,
/// the joined host's tagged with its host and counted under its name in
/// session.json; the joined host stops when the session does and none of
/// the units it said it sent is missing; both services serve on.
#[test]
#[ignore = "needs root, eBPF and nats-server: `cargo xtask test` runs it"]
fn units_of_two_services_attached_from_two_agents_are_one_session() {
    let _bpf = require_bpf();
    let exe = c_fixture("ship_service.c", "ship_service", &[]);
    let server = nats_server();
    let (tmp, out) = temp_session();
    // A request every ~21 ms: about 50 units a second each.
    let service =
        |name: &str| serving(Command::new(&exe).arg(tmp.path().join(name)).arg("20000")).0;
    let (first, second) = (service("a.count"), service("b.count"));
    let log = tmp.path().join("first.log");
    let mut started = Background(
        agent()
            .args(["attach", "-p", &first.pid().to_string(), "--fleet", &server.url])
            .args(["--unit", "handle_request", "--fail-if", "handle_request ret < 0", "-d", "6s"])
            .arg("-o")
            .arg(&out)
            .stdout(std::fs::File::create(tmp.path().join("first.out")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut session = None;
    assert!(
        wait_for(30, || {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            session = said.lines().find_map(|l| {
                l.split_once("--join ").map(|(_, s)| s.trim_end_matches('`').to_owned())
            });
            session.is_some()
        }),
        "no session name:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let session = session.unwrap();
    // A name that is no session, and a process that runs another program:
    // one line each, nothing traced.
    let other = Background(Command::new("sleep").arg("60").spawn().unwrap());
    for (pid, name, want) in [
        (second.pid(), "nosuch", "aid: no session nosuch on ".to_owned()),
        (other.pid(), session.as_str(), format!("aid: pid {}: it does not run ", other.pid())),
    ] {
        let refused = agent()
            .args(["attach", "-p", &pid.to_string(), "--fleet", &server.url, "--join", name])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{err}");
        assert!(err.starts_with(&want) && err.lines().count() == 1, "{err}");
    }
    let joined = agent()
        .args(["attach", "-p", &second.pid().to_string(), "--fleet", &server.url])
        .args(["--join", &session, "--name", "b"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = ended(&mut started, 90, &log);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{status:?}:\n{said}");
    let joined = joined.wait_with_output().unwrap();
    let (sent, why) = (
        String::from_utf8_lossy(&joined.stdout).into_owned(),
        String::from_utf8_lossy(&joined.stderr).into_owned(),
    );
    assert!(joined.status.success(), "{sent}{why}");
    assert!(sent.contains("(the session ended)"), "{sent}{why}");
    assert!(
        said.contains("b joined: pid ") && said.contains("b left (the session ended)"),
        "{said}"
    );
    let n_sent: usize = sent.split_whitespace().nth(1).unwrap().parse().unwrap();
    let loaded = aid::store::load_full(&out).unwrap();
    assert!(loaded.skipped.is_empty());
    let s = &loaded.session;
    let f = s.functions.iter().position(|f| f.name == "handle_request").unwrap();
    let host = aid::store::host_name();
    let mut requests: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
    for (i, (run, rec)) in s.runs.iter().zip(&loaded.records).enumerate() {
        assert_eq!(run.id as usize, i + 1, "runs are numbered in the order written");
        let from = match rec.host.as_deref() {
            None => 0,
            Some(h) => {
                assert_eq!(h, host, "run {}", run.id);
                1
            }
        };
        let calls: Vec<_> = run.calls.iter().filter(|c| c.func as usize == f).collect();
        assert_eq!(calls.len(), 1, "run {} is one unit", run.id);
        let (id, ret) = (calls[0].args[0], calls[0].ret.unwrap());
        assert_eq!(ret, if id % 3 == 2 { -1 } else { id * 2 }, "request {id}");
        assert_eq!(run.label == aid::model::Label::Fail, ret < 0, "run {}", run.id);
        requests[from].push(id);
    }
    for (who, ids) in ["the first host", "the joined host"].iter().zip(&requests) {
        assert!(ids.len() >= 20, "{who}: {} units\n{said}", ids.len());
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{who}: a unit is missing: {ids:?}");
    }
    assert_eq!(requests[1].len(), n_sent, "every unit sent is in the session:\n{sent}");
    let header: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("session.json")).unwrap()).unwrap();
    assert_eq!(header["fleet"]["url"], server.url.as_str(), "{header}");
    assert_eq!(header["fleet"]["workers"]["b"], n_sent as u64, "{header}");
    let printed = std::fs::read_to_string(tmp.path().join("first.out")).unwrap();
    let all = s.runs.len();
    assert!(
        printed.starts_with(&format!("recorded {all} unit(s) of pid {} (duration reached), {n_sent} of them from other hosts: ", first.pid())),
        "{printed}"
    );
    assert!(alive(first.pid()) && alive(second.pid()));
}

/// The coordinator's look at the workers sees the keys put after it
/// connected, and a key purged (a worker that left) no more: the look
/// reads the bucket as it is now, not as it was when opened.
#[test]
fn the_look_at_the_workers_sees_the_bucket_as_it_is_now() {
    use aid::fleet::{Bus, WorkerInfo, coordinator::Fleet};
    let server = nats_server();
    let mut fleet = Fleet::connect(&server.url).unwrap();
    assert!(fleet.workers().is_empty());
    let keys = Bus::connect(&server.url, "aid-test workers").unwrap();
    let members = keys.queues().unwrap().members;
    for i in 0..3u32 {
        let info = WorkerInfo { name: format!("w{i}"), host: "test".into(), pid: i, jobs: 2 };
        let body = serde_json::to_vec(&info).unwrap();
        let m = members.clone();
        keys.request("a worker's key", async move {
            m.put(format!("w{i}"), body.into()).await.map(drop).map_err(|e| e.to_string())
        })
        .unwrap();
    }
    let names = |w: Vec<WorkerInfo>| w.into_iter().map(|w| w.name).collect::<Vec<_>>();
    let mut seen = names(fleet.workers());
    seen.sort();
    assert_eq!(seen, ["w0", "w1", "w2"]);
    assert_eq!(fleet.jobs(), 6);
    let m = members.clone();
    keys.request("a purge", async move { m.purge("w1").await.map_err(|e| e.to_string()) }).unwrap();
    let mut seen = names(fleet.workers());
    seen.sort();
    assert_eq!(seen, ["w0", "w2"]);
}
