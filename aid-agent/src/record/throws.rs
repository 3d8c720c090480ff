//! Programs that throw (C++ exceptions, Rust panics that unwind): whether
//! their runs get the return addresses an exception unwinds through put
//! back (`intervene/returns.rs`), and what the user is told about it
//! before the first run.

use crate::{
    bpf::Scope,
    model::{Function, Probe},
    symbols::Resolver,
};

/// Whether the runs of a program get their return addresses repaired when
/// an exception unwinds through a pending return probe
/// (`intervene/returns.rs`): it throws (aid found where its unwinds begin)
/// and some function has a return probe. Runs of a program, and a process
/// aid attaches to (it is then its ptrace tracer for the whole session).
pub(super) fn repairs_unwind(functions: &[Function], scope: Scope) -> bool {
    scope != Scope::AllProcesses
        && functions.iter().any(|f| f.probe == Probe::Throw)
        && functions.iter().any(crate::bpf::wants_return)
}

/// When the program throws C++ exceptions and some traced function has a
/// return probe: an exception that unwinds through such a function while
/// its return probe is pending meets the kernel's trampoline where the
/// unwinder expects a return address. Where aid found the unwinder it
/// puts the addresses back (`intervene/returns.rs`) and says what that
/// costs the recording; where it did not, the program is terminated
/// (SIGABRT) and aid says so before the first run.
pub(super) fn exceptions_notice(
    resolver: &Resolver,
    functions: &[Function],
    scope: Scope,
) -> Option<String> {
    let returns: Vec<&str> = functions
        .iter()
        .filter(|f| !f.internal && crate::bpf::wants_return(f))
        .map(|f| f.name.as_str())
        .collect();
    if returns.is_empty() {
        return None;
    }
    let (module, entry) = resolver.thrower(functions)?;
    let name = module
        .file_name()
        .map_or_else(|| module.display().to_string(), |n| n.to_string_lossy().into_owned());
    let what = if entry.starts_with("__cxa") || entry.starts_with("std::") {
        "throws C++ exceptions"
    } else {
        "unwinds its stack on a panic or an exception"
    };
    if repairs_unwind(functions, scope) {
        return Some(format!(
            "{name} {what} (it calls {entry}): aid puts back the return addresses an exception unwinds through, so the program runs as untraced; a traced call an exception leaves ends where the exception is caught, without a return value (docs/probes.md, \"Exceptions\")"
        ));
    }
    Some(format!(
        "{name} {what} (it calls {entry}): one that unwinds through a traced function while its return probe is pending ends the program with SIGABRT, which aid cannot prevent where it does not find the unwinder; trace only functions that no exception crosses (docs/probes.md, \"Exceptions\"); traced with return probes: {}",
        crate::util::human::summarize(&returns)
    ))
}
