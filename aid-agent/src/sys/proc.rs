//! Everything aid reads from `/proc`, through the `procfs` crate: whether a
//! process exists, its executable, the files it maps executable, its
//! threads in creation order and which of them can run, where it maps a
//! file, and this process' capabilities.
//!
//! Paths a process reports (its executable, its maps) are as *it* sees
//! them. A process in another mount namespace (a container) sees other
//! files under the same names, so its paths are handed out through
//! `/proc/PID/root`, where the agent finds the files the process sees.

use std::path::{Path, PathBuf};

use procfs::process::{MMPermissions, MMapPath, MemoryMaps, Process};

fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

/// True while a process (or a thread) with this id exists, zombies
/// included.
pub fn exists(pid: u32) -> bool {
    process(pid).is_some()
}

/// Why a pid cannot be traced.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("pid {0} not found: is the process still running?")]
    NotFound(u32),
    #[error(
        "pid {pid} is a kernel thread ({name}): aid traces user-space programs; give the pid of one"
    )]
    KernelThread { pid: u32, name: String },
    #[error(
        "pid {pid} ({name}) is a zombie: it has exited and only waits for its parent to collect it; nothing is left to trace"
    )]
    Zombie { pid: u32, name: String },
    #[error("pid {pid} is a thread of process {tgid}: give --pid {tgid}")]
    Thread { pid: u32, tgid: u32 },
}

/// Checks that `pid` is a live user-space process (not a kernel thread, a
/// zombie, or one thread of a process).
pub fn traceable(pid: u32) -> Result<(), ProcError> {
    const PF_KTHREAD: u32 = 0x0020_0000;
    let p = process(pid).ok_or(ProcError::NotFound(pid))?;
    let stat = p.stat().map_err(|_| ProcError::NotFound(pid))?;
    let name = stat.comm.clone();
    if stat.flags & PF_KTHREAD != 0 {
        return Err(ProcError::KernelThread { pid, name });
    }
    if stat.state == 'Z' || stat.state == 'X' {
        return Err(ProcError::Zombie { pid, name });
    }
    if let Ok(status) = p.status()
        && status.tgid != pid as i32
        && status.tgid > 0
    {
        return Err(ProcError::Thread { pid, tgid: status.tgid as u32 });
    }
    Ok(())
}

/// The real user id a process runs as.
pub fn owner(pid: u32) -> Option<u32> {
    process(pid)?.uid().ok()
}

/// The link to the running executable: reading the ELF file through it
/// still finds what is running after the file was replaced or deleted.
pub fn exe_link(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/exe"))
}

/// The path of the running executable, as the agent can open it.
pub fn executable(pid: u32) -> std::io::Result<PathBuf> {
    std::fs::read_link(exe_link(pid)).map(|p| seen_from_here(pid, p))
}

/// Files the process has mapped executable (its executable and shared
/// libraries), each once, in address order, as the agent can open them.
pub fn mapped_executables(pid: u32) -> Vec<PathBuf> {
    let files = process(pid).and_then(|p| p.maps().ok()).map(executable_files).unwrap_or_default();
    files.into_iter().map(|p| seen_from_here(pid, p)).collect()
}

/// Whether the process runs in another mount namespace than the agent
/// (a container): its paths name other files here.
pub fn other_mount_namespace(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    match (ns("self"), ns(&pid.to_string())) {
        (Some(mine), Some(theirs)) => mine != theirs,
        _ => false,
    }
}

/// A path the process reports, as the agent can open it: through
/// `/proc/PID/root` when the process is in another mount namespace.
fn seen_from_here(pid: u32, path: PathBuf) -> PathBuf {
    if other_mount_namespace(pid) {
        root_of(pid).join(path.strip_prefix("/").unwrap_or(&path))
    } else {
        path
    }
}

/// `/proc/PID/root`: the process' root directory, its mount namespace's
/// files seen from the agent.
pub fn root_of(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root"))
}

/// A path as the process names it (the reverse of what [`executable`]
/// and [`mapped_executables`] hand out).
pub fn as_the_process_sees(pid: u32, path: &Path) -> PathBuf {
    match path.strip_prefix(root_of(pid)) {
        Ok(inside) => Path::new("/").join(inside),
        Err(_) => path.to_owned(),
    }
}

/// Whether two paths name the same file (device and inode).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn executable_files(maps: MemoryMaps) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for map in maps {
        if let MMapPath::Path(path) = map.pathname
            && map.perms.contains(MMPermissions::EXECUTE)
            && path.is_absolute()
            && !out.contains(&path)
        {
            out.push(path);
        }
    }
    out
}

/// The mappings of `file` in a process: (start address, file offset), in
/// address order; empty when the process is gone.
pub fn mappings_of(pid: u32, file: &Path) -> Vec<(u64, u64)> {
    let Some(maps) = process(pid).and_then(|p| p.maps().ok()) else { return Vec::new() };
    let file = as_the_process_sees(pid, file);
    maps.into_iter()
        .filter(|m| matches!(&m.pathname, MMapPath::Path(p) if *p == file))
        .map(|m| (m.address.0, m.offset))
        .collect()
}

/// Thread ids of a running process, None when it is gone.
pub fn thread_ids(pid: u32) -> Option<Vec<u32>> {
    let tasks = process(pid)?.tasks().ok()?;
    Some(tasks.flatten().filter_map(|t| u32::try_from(t.tid).ok()).collect())
}

/// Threads of a process that can run: running or waiting for a CPU
/// (state `R`), in a short wait inside the kernel (`D`: a page fault, the
/// address-space lock while a thread is created), or stopped by the
/// tracer and not in `held` (`t`: a thread the agent stopped for an event
/// — a thread created, a probe reached — and is about to resume); not
/// blocked, sleeping, held or gone. Polled while a thread is held at a
/// PCT change point, so it reads the `stat` files directly.
pub fn runnable_threads(pid: u32, held: &[u32]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The state follows the parenthesised name, which may hold spaces.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        if matches!(state, Some('R' | 'D')) || (state == Some('t') && !held.contains(&tid)) {
            out.push(tid);
        }
    }
    out
}

/// Threads of a running process in creation order (start time, then tid),
/// the main thread first, with the names they gave themselves.
pub fn threads(pid: u32) -> Vec<(u32, String)> {
    let Some(tasks) = process(pid).and_then(|p| p.tasks().ok()) else { return Vec::new() };
    let mut threads: Vec<(u64, u32, String)> = tasks
        .flatten()
        .filter_map(|task| {
            let tid = u32::try_from(task.tid).ok()?;
            let stat = task.stat().ok();
            let start = stat.as_ref().map_or(u64::MAX, |s| s.starttime);
            let name = stat.map(|s| s.comm).unwrap_or_default();
            Some((if tid == pid { 0 } else { start }, tid, name))
        })
        .collect();
    threads.sort();
    threads.into_iter().map(|(_, tid, name)| (tid, name)).collect()
}

/// This process' effective capability set, as a bit mask.
pub fn effective_capabilities() -> Option<u64> {
    Process::myself().ok()?.status().ok().map(|s| s.capeff)
}

#[cfg(test)]
mod tests {
    use procfs::FromBufRead as _;

    use super::*;

    /// Regression: the hand-written parser split lines at whitespace and
    /// cut `/opt/my app/lib x.so` at its first space.
    #[test]
    fn maps_paths_with_spaces_are_whole() {
        let maps = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 08:01 1234 /opt/my app/bin/server
55d0c0a02000-55d0c0a05000 r-xp 00002000 08:01 1234 /opt/my app/bin/server
7f1e2a000000-7f1e2a020000 r-xp 00000000 08:01 99 /opt/my app/lib x.so
7f1e2a020000-7f1e2a021000 rw-p 00020000 08:01 99 /opt/my app/lib x.so
7f1e2b000000-7f1e2b100000 r-xp 00000000 08:01 7 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]
7ffd1c1ee000-7ffd1c1f0000 r-xp 00000000 00:00 0                          [vdso]
";
        let parsed = MemoryMaps::from_buf_read(maps.as_bytes()).unwrap();
        assert_eq!(
            executable_files(parsed),
            vec![
                PathBuf::from("/opt/my app/bin/server"),
                PathBuf::from("/opt/my app/lib x.so"),
                PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            ]
        );
    }

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id();
        assert!(exists(me));
        assert_eq!(threads(me).first().map(|t| t.0), Some(me));
        assert!(thread_ids(me).unwrap().contains(&me));
        assert!(mapped_executables(me).contains(&executable(me).unwrap()));
        assert!(!exists(u32::MAX));
        traceable(me).unwrap();
        assert_eq!(owner(me), Some(nix::unistd::getuid().as_raw()));
    }

    #[test]
    fn kernel_threads_zombies_and_threads_are_refused() {
        assert_eq!(
            traceable(2).unwrap_err().to_string(),
            "pid 2 is a kernel thread (kthreadd): aid traces user-space programs; give the pid of one"
        );
        // A child that exited and was not waited for yet.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while traceable(pid).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            traceable(pid).unwrap_err().to_string(),
            format!(
                "pid {pid} (true) is a zombie: it has exited and only waits for its parent to collect it; nothing is left to trace"
            )
        );
        child.wait().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
            let _ = done_rx.recv();
        });
        let live = rx.recv().unwrap();
        let me = std::process::id();
        assert_eq!(
            traceable(live).unwrap_err().to_string(),
            format!("pid {live} is a thread of process {me}: give --pid {me}")
        );
        drop(done_tx);
        t.join().unwrap();
    }
}
