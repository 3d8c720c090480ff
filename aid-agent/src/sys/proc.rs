//! Everything aid reads from `/proc`, through the `procfs` crate: whether a
//! process exists, its executable, the files it maps executable, its
//! threads in creation order and which of them can run, and this
//! process' capabilities.

use std::path::PathBuf;

use procfs::process::{MMPermissions, MMapPath, MemoryMaps, Process};

fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

/// True while a process (or a thread) with this id exists, zombies
/// included.
pub fn exists(pid: u32) -> bool {
    process(pid).is_some()
}

/// The link to the running executable: reading the ELF file through it
/// still finds what is running after the file was replaced or deleted.
pub fn exe_link(pid: u32) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/exe"))
}

/// The path of the running executable, as the kernel reports it.
pub fn executable(pid: u32) -> std::io::Result<PathBuf> {
    std::fs::read_link(exe_link(pid))
}

/// Files the process has mapped executable (its executable and shared
/// libraries), each once, in address order.
pub fn mapped_executables(pid: u32) -> Vec<PathBuf> {
    process(pid).and_then(|p| p.maps().ok()).map(executable_files).unwrap_or_default()
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

/// Thread ids of a running process, None when it is gone.
pub fn thread_ids(pid: u32) -> Option<Vec<u32>> {
    let tasks = process(pid)?.tasks().ok()?;
    Some(tasks.flatten().filter_map(|t| u32::try_from(t.tid).ok()).collect())
}

/// Threads of a process that are running or waiting for a CPU (state
/// `R`): not blocked, sleeping, stopped or gone. Polled while a thread is
/// held at a PCT change point, so it reads the `stat` files directly.
pub fn runnable_threads(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The state follows the parenthesised name, which may hold spaces.
        if stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) == Some('R')
        {
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
    }
}
