//! Where and how eagerly the target's threads run: pinned to one CPU,
//! each thread's nice value set (the single-CPU noise of `--amplify
//! one-cpu`, `intervene/one_cpu.rs`). Only the target's own threads are
//! touched, by pid and thread id.

use nix::{
    sched::{CpuSet, sched_getaffinity, sched_setaffinity},
    unistd::Pid,
};

/// The CPUs the agent may run on (the target's are chosen among them).
pub fn allowed_cpus() -> Vec<u32> {
    cpus_of(0).filter(|c| !c.is_empty()).unwrap_or_else(|| vec![0])
}

/// The CPUs thread `tid` may run on (0: the calling thread), None when it
/// is gone.
fn cpus_of(tid: u32) -> Option<Vec<u32>> {
    let set = sched_getaffinity(Pid::from_raw(tid as i32)).ok()?;
    Some((0..CpuSet::count() as u32).filter(|&c| set.is_set(c as usize).unwrap_or(false)).collect())
}

/// Pins process `pid` (held before its exec: its one thread, which every
/// thread it starts inherits the set from) to `cpu`.
pub fn pin(pid: u32, cpu: u32) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu as usize).map_err(std::io::Error::from)?;
    sched_setaffinity(Pid::from_raw(pid as i32), &set).map_err(std::io::Error::from)
}

/// Sets thread `tid`'s nice value (0: the default; 19: the least CPU time
/// when others want it). A thread gone meanwhile is no error.
pub fn set_nice(tid: u32, nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority takes plain integers and touches no memory of
    // ours.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) { Ok(()) } else { Err(e) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child of ours pinned to one CPU and made nice runs there, at
    /// that nice value, and says so through the kernel's own records.
    #[test]
    fn a_child_is_pinned_and_made_nice() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let pid = child.id();
        let cpu = *allowed_cpus().last().unwrap();
        pin(pid, cpu).unwrap();
        set_nice(pid, 19).unwrap();
        assert_eq!(cpus_of(pid), Some(vec![cpu]));
        let nice = procfs::process::Process::new(pid as i32).unwrap().stat().unwrap().nice;
        assert_eq!(nice, 19);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
