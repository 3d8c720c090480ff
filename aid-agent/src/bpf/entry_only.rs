//! Functions that get an entry probe only, never a return probe: those
//! that do not return to their caller the normal way.
//!
//! A return probe replaces the return address on the stack with the
//! kernel's trampoline. A function that never returns (`exit`, `longjmp`,
//! `__cxa_throw`) leaves that frame behind, and one that returns twice
//! (`setjmp`, `fork`, `vfork`) comes back through a frame the kernel has
//! already unwound: the kernel then finds its record of the hijacked frame
//! inconsistent and kills the thread with SIGILL, or the program takes a
//! different path (issue 8 measured a setjmp/longjmp program exiting 5
//! instead of 0 in 3 of 3 runs). Unwinders (C++ exceptions, Rust panics)
//! read return addresses from the stack and cannot unwind through the
//! trampoline, so their entry points are here too. The list and the reason
//! for each group are documented in docs/probes.md.

/// Groups of functions with the reason they get no return probe.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "returns twice (setjmp family, fork)",
        &[
            "setjmp",
            "_setjmp",
            "__setjmp",
            "sigsetjmp",
            "__sigsetjmp",
            "__sigsetjmp_cancel",
            "getcontext",
            "savectx",
            "fork",
            "_Fork",
            "__fork",
            "__libc_fork",
            "vfork",
            "__vfork",
            "clone",
            "__clone",
            "clone3",
            "__clone3",
            "__clone_internal",
        ],
    ),
    (
        "jumps elsewhere instead of returning (longjmp family, context switches)",
        &[
            "longjmp",
            "_longjmp",
            "__longjmp",
            "siglongjmp",
            "__libc_longjmp",
            "__libc_siglongjmp",
            "__longjmp_chk",
            "____longjmp_chk",
            "setcontext",
            "swapcontext",
        ],
    ),
    (
        "never returns (process or thread exit, exec, fatal errors)",
        &[
            "exit",
            "_exit",
            "_Exit",
            "quick_exit",
            "abort",
            "execve",
            "execveat",
            "fexecve",
            "execv",
            "execvp",
            "execvpe",
            "execl",
            "execlp",
            "execle",
            "pthread_exit",
            "__pthread_exit",
            "thrd_exit",
            "__pthread_unwind",
            "__pthread_unwind_next",
            "__libc_start_main",
            "__libc_start_call_main",
            "__assert_fail",
            "__assert_perror_fail",
            "__stack_chk_fail",
            "__fortify_fail",
            "__chk_fail",
            "__libc_fatal",
            "err",
            "errx",
            "verr",
            "verrx",
        ],
    ),
    (
        "unwinds the stack (C++ exceptions, Rust panics)",
        &[
            "__cxa_throw",
            "__cxa_rethrow",
            "__cxa_bad_cast",
            "__cxa_bad_typeid",
            "__cxa_throw_bad_array_new_length",
            "_Unwind_RaiseException",
            "_Unwind_Resume",
            "_Unwind_Resume_or_Rethrow",
            "_Unwind_ForcedUnwind",
            "_ZSt9terminatev",
            "rust_panic",
            "__rust_start_panic",
            "rust_begin_unwind",
            "__rust_panic_cleanup",
        ],
    ),
];

/// Why the function with ELF symbol `symbol` gets no return probe, if it
/// gets none. A version suffix (`longjmp@@GLIBC_2.2.5`) is ignored.
pub fn reason(symbol: &str) -> Option<&'static str> {
    let bare = symbol.split('@').next().unwrap_or(symbol);
    GROUPS.iter().find(|(_, names)| names.contains(&bare)).map(|(why, _)| *why)
}

/// Every function name of the list (for the documentation test).
pub fn names() -> impl Iterator<Item = &'static str> {
    GROUPS.iter().flat_map(|(_, names)| names.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_names_are_listed() {
        for name in [
            "setjmp",
            "_setjmp",
            "longjmp",
            "siglongjmp",
            "exit",
            "_exit",
            "fork",
            "vfork",
            "clone",
            "execve",
            "pthread_exit",
            "__libc_start_main",
            "__cxa_throw",
            "_Unwind_RaiseException",
        ] {
            assert!(reason(name).is_some(), "{name}");
        }
        assert_eq!(reason("longjmp@@GLIBC_2.2.5"), reason("longjmp"));
        assert_eq!(reason("malloc"), None);
        assert_eq!(reason("exit_handler"), None);
    }

    /// docs/probes.md lists every name, so the list and its reasons are
    /// documented where users look.
    #[test]
    fn documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/probes.md"))
                .unwrap();
        for name in names() {
            assert!(doc.contains(&format!("`{name}`")), "docs/probes.md does not list `{name}`");
        }
    }
}
