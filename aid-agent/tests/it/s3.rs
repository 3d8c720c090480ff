//! `--store s3://BUCKET/PREFIX`: a session's Parquet tables written to an
//! S3 bucket, on a real S3-compatible server of the test's own (s3s-fs,
//! which `cargo xtask setup` installs) listening on 127.0.0.1.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::common::*;

/// The credentials the test's server accepts.
const ACCESS_KEY: &str = "aid-test";
const SECRET_KEY: &str = "aid-test-secret";

/// An s3s-fs server on 127.0.0.1 keeping its buckets as directories of
/// `root`: stopped (by pid) when dropped.
struct S3Server {
    _process: Background,
    endpoint: String,
    root: PathBuf,
}

fn s3_server(root: &Path) -> S3Server {
    let exe =
        which::which("s3s-fs").expect("s3s-fs is not installed: `cargo xtask setup` installs it");
    // A port nothing listens on: bound, then let go for the server.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let process = Background(
        Command::new(exe)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let up = wait_for(30, || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    assert!(up, "s3s-fs did not listen on 127.0.0.1:{port}");
    S3Server { _process: process, endpoint: format!("http://127.0.0.1:{port}"), root: root.into() }
}

/// `aid-agent` with the environment S3 clients read, for `endpoint`.
fn agent_for(endpoint: &str) -> Command {
    let mut cmd = agent();
    cmd.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE");
    cmd
}

/// `record --store s3://lake/aid` puts each run's tables in the bucket
/// under `aid/<session name>/`, with exactly the rows of the session's CSV
/// files (checked with DuckDB on the server's own files), and nothing in
/// the session directory.
#[test]
#[ignore = "needs root, eBPF, s3s-fs and Python with duckdb: `cargo xtask test` runs it"]
fn record_puts_the_tables_in_an_s3_bucket() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_s3", &[]);
    let (tmp, out) = temp_session();
    let root = tmp.path().join("s3");
    // s3s-fs keeps a bucket as a directory.
    std::fs::create_dir_all(root.join("lake")).unwrap();
    let server = s3_server(&root);
    let output = agent_for(&server.endpoint)
        .args(["record", "-n", "2", "--store", "s3://lake/aid", "-o"])
        .arg(&out)
        .arg(&exe)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let name = out.file_name().unwrap().to_string_lossy().into_owned();
    let tables = server.root.join("lake/aid").join(&name);
    let host = aid::store::host_name();
    for table in ["events", "threads"] {
        let mut names: Vec<String> = std::fs::read_dir(tables.join(table))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".parquet"))
            .collect();
        names.sort();
        let want: Vec<String> = (1..=2).map(|i| format!("{host}-run-{i:06}.parquet")).collect();
        assert_eq!(names, want, "{table}");
        assert!(!out.join("parquet").join(table).exists());
    }
    let script = r#"
import duckdb, sys
lake = sys.argv[1]
for table, cols in [
    ("events", "run, t_ns, tid, role, func, function, point, instance, arg0, arg1, arg2, ret, content"),
    ("threads", "run, role, tid, name, parent_role, created_ns"),
]:
    csv = f"select * from read_csv('runs/*/{table}.csv', all_varchar = true)"
    casts = ", ".join(f"{c}::varchar as {c}" for c in cols.split(", "))
    pq = f"select {casts} from '{lake}/{table}/*.parquet'"
    missing = duckdb.sql(f"select count(*) from ({csv} except all {pq})").fetchall()[0][0]
    extra = duckdb.sql(f"select count(*) from ({pq} except all {csv})").fetchall()[0][0]
    rows = duckdb.sql(f"select count(*) from ({pq})").fetchall()[0][0]
    print(table, "missing", missing, "extra", extra, "rows", rows > 0)
"#;
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&tables)
        .current_dir(&out)
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["events missing 0 extra 0 rows True", "threads missing 0 extra 0 rows True"],
        "{text}"
    );
}

/// A bucket that does not exist, or a server that refuses these
/// credentials, is a one-line error before any run (exit 2), and leaves
/// no session behind it.
#[test]
#[ignore = "needs root and s3s-fs: `cargo xtask test` runs it"]
fn an_unusable_bucket_is_one_line_before_any_run() {
    let _bpf = require_bpf();
    let exe = c_fixture("two_threads.c", "two_threads_s3_refused", &[]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("s3");
    std::fs::create_dir_all(&root).unwrap();
    let server = s3_server(&root);
    let endpoint = server.endpoint.clone();
    // `record` of `exe` into `tmp/<session>` with `store`: its exit code
    // must be 2; its stderr.
    let refused = |cmd: &mut Command, store: &str, session: &str| -> String {
        let output = cmd
            .args(["record", "-n", "1", "--store", store, "-o"])
            .arg(tmp.path().join(session))
            .arg(&exe)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        stderr
    };
    let last = |stderr: &str| stderr.lines().last().unwrap_or_default().to_owned();
    let stderr = refused(&mut agent_for(&endpoint), "s3://missing/aid", "session");
    assert_eq!(
        last(&stderr),
        "aid: cannot write s3://missing/aid/session: the server answered 404 Not Found (NoSuchBucket): check the bucket's name, AWS_ENDPOINT_URL and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
        "{stderr}"
    );
    // Nothing but what was chosen to trace is said before it.
    assert!(
        stderr.lines().rev().skip(1).all(|l| l.starts_with("aid: no --trace given")),
        "{stderr}"
    );
    assert!(!tmp.path().join("session/runs.jsonl").exists(), "{stderr}");
    let mut wrong = agent_for(&endpoint);
    wrong.env("AWS_SECRET_ACCESS_KEY", "wrong");
    let stderr = refused(&mut wrong, "s3://missing/aid", "session2");
    assert!(
        last(&stderr).starts_with(
            "aid: cannot write s3://missing/aid/session2: the server answered 403 Forbidden"
        ),
        "{stderr}"
    );
    // No server: what the network said.
    drop(server);
    let stderr = refused(&mut agent_for(&endpoint), "s3://lake/aid", "session3");
    assert!(
        last(&stderr).starts_with("aid: cannot write s3://lake/aid/session3: Connection refused"),
        "{stderr}"
    );
}
