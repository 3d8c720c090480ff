//! What a session needs beyond an ordinary user's privileges, checked
//! before anything is loaded: the capabilities, uprobe support and the
//! kernel's type information.

use std::path::Path;

use crate::bpf::{ProbeError, btf};

/// What a session does that needs privileges beyond an ordinary user's
/// (measured with a capability-only user: `tests/it/privileges.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Load the eBPF programs and maps, attach uprobes and raw tracepoints,
    /// and be the ptrace tracer of the target — a child of the agent, or
    /// a process of the same user (`record`, `debug`, `attach`).
    Trace,
    /// The same for a running process of another user (or one that made
    /// itself undumpable): reading its memory map and tracing it.
    TraceOtherUsers,
}

/// A capability aid may need (bit in the capability sets, name).
struct Capability {
    bit: u32,
    name: &'static str,
}

const CAP_SYS_PTRACE: Capability = Capability { bit: 19, name: "CAP_SYS_PTRACE" };
const CAP_PERFMON: Capability = Capability { bit: 38, name: "CAP_PERFMON" };
const CAP_BPF: Capability = Capability { bit: 39, name: "CAP_BPF" };

impl Needs {
    /// CAP_BPF creates maps and loads programs; CAP_PERFMON lets them be
    /// tracing programs (uprobes, raw tracepoints, reading kernel memory);
    /// CAP_SYS_PTRACE lets the agent read and trace processes of other
    /// users. Nothing else: no tracefs mount (CAP_SYS_ADMIN), no locked
    /// memory limit (maps are charged to the memory cgroup).
    fn capabilities(self) -> &'static [Capability] {
        match self {
            Needs::Trace => &[CAP_BPF, CAP_PERFMON],
            Needs::TraceOtherUsers => &[CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE],
        }
    }

    fn purpose(self) -> &'static str {
        match self {
            Needs::Trace => "",
            Needs::TraceOtherUsers => " to trace a process of another user",
        }
    }
}

/// Checks, before anything is loaded, that this process may do what
/// `needs` says, and that the kernel has uprobes and type information.
/// Nothing is mounted: the probes and tracepoints need no tracefs.
pub fn preflight(needs: Needs) -> Result<(), ProbeError> {
    let missing = missing_capabilities(needs);
    if !missing.is_empty() {
        let all: Vec<&str> = needs.capabilities().iter().map(|c| c.name).collect();
        return Err(ProbeError::Privileges {
            needed: and_list(&all),
            purpose: needs.purpose(),
            missing: and_list(&missing),
        });
    }
    if !Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        return Err(ProbeError::NoUprobes);
    }
    if !Path::new(btf::VMLINUX).exists() {
        return Err(ProbeError::NoBtf);
    }
    Ok(())
}

/// The capabilities `needs` asks for that this process does not have
/// (none for root).
fn missing_capabilities(needs: Needs) -> Vec<&'static str> {
    if nix::unistd::geteuid().is_root() {
        return Vec::new();
    }
    let effective = crate::sys::proc::effective_capabilities().unwrap_or(0);
    needs.capabilities().iter().filter(|c| effective & (1 << c.bit) == 0).map(|c| c.name).collect()
}

fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
