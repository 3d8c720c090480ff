//! What language runtimes and the C library put around a program's own
//! code, and what aid probes there for its own purposes: the
//! synchronisation points where noise amplifies a rare failure, and the
//! thread bodies that tell which user function a thread started through a
//! runtime's trampoline runs.

use super::{Module, Symbol};

/// The C library's synchronisation points: where the order of threads is
/// decided, so where scheduling noise reaches real races (as rr's chaos
/// mode and PCT act at scheduling points). Entries only.
pub const SYNC_POINTS: &[&str] = &[
    "pthread_mutex_lock",
    "pthread_mutex_trylock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_mutex_unlock",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "pthread_cond_signal",
    "pthread_cond_broadcast",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_tryrdlock",
    "pthread_rwlock_timedrdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_trywrlock",
    "pthread_rwlock_timedwrlock",
    "pthread_rwlock_unlock",
    // Not `pthread_spin_lock`: it starts with a `lock`-prefixed
    // instruction, which the kernel refuses to probe (ENOTSUPP).
    "pthread_spin_unlock",
    "pthread_barrier_wait",
    "sem_wait",
    "sem_trywait",
    "sem_timedwait",
    "sem_clockwait",
    "sem_post",
    "sched_yield",
    "usleep",
    "nanosleep",
    "clock_nanosleep",
    // Where threads start, are waited for and where the process ends:
    // a thread held before it creates the next one reorders their
    // starts; the main thread held at `exit` (which its return from
    // `main` calls) keeps threads it never joined alive — a check that
    // fails only when it runs after every updater and before the process
    // ends needs exactly that.
    "pthread_create",
    "pthread_join",
    "pthread_exit",
    "exit",
];

/// Start routines that every thread of a runtime shares, and so say nothing
/// about the thread (Rust's std, libstdc++'s `std::thread`).
pub fn is_trampoline(name: &str) -> bool {
    name.contains("::thread_start")
        || name == "execute_native_thread_routine"
        || name.starts_with("std::thread")
        || name.starts_with("<std::sys::")
}

/// If `sym` is a thread body — the function a runtime's trampoline calls
/// once per thread with the user's function, one instance per user
/// function — the name of that user function:
///
/// - libstdc++: `std::thread::_State_impl<_Invoker<tuple<F, Args...>>>::_M_run()`
///   runs `F`, a lambda (`app::Client::connect::{lambda()#1}`) or a
///   function object; a plain function pointer (`void (*)(int)`) names no
///   function, and gives none;
/// - Rust std: `std::sys::backtrace::__rust_begin_short_backtrace<F, T>`
///   runs the closure `F` given to `thread::spawn`
///   (`app::main::{closure#0}`). Its generic arguments come from the v0
///   mangled name or, with the legacy mangling, from DWARF. The main
///   thread's instance runs `fn()`, which names nothing.
pub fn thread_body(module: &Module, sym: &Symbol) -> Option<String> {
    if sym.name.starts_with("std::thread::_State_impl<") && sym.name.contains("::_M_run(") {
        let inner = after(&sym.name, "std::tuple<")?;
        let callable = first_argument(inner)?;
        if callable.contains("(*)") || callable.contains("(&)") {
            return None;
        }
        return Some(strip_enclosing_params(callable));
    }
    if sym.name.contains("__rust_begin_short_backtrace") {
        let generic = if sym.name.contains("__rust_begin_short_backtrace::<") {
            sym.name.as_str()
        } else {
            module.generic_name(sym.address)?
        };
        let args = after(generic, "__rust_begin_short_backtrace")?;
        let args = args.trim_start_matches("::").strip_prefix('<')?;
        return user_closure(first_argument(args)?);
    }
    None
}

/// The user's closure in a generic argument: the argument itself, or — when
/// it is one of std's own wrappers around it
/// (`std::thread::lifecycle::spawn_unchecked::{closure#1}<app::main::{closure#0}, T>`)
/// — the first argument of that wrapper, and so on. A function pointer
/// (`fn()`, the main thread's) names nothing.
fn user_closure(mut arg: &str) -> Option<String> {
    for _ in 0..8 {
        if arg.starts_with("fn(") || arg.starts_with("fn ") || arg.starts_with('&') {
            return None;
        }
        let runtime = ["std::", "core::", "alloc::"].iter().any(|p| arg.starts_with(p));
        if !runtime {
            return Some(arg.replace("{closure_env#", "{closure#"));
        }
        arg = first_argument(after(arg, "<")?)?;
    }
    None
}

fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.find(marker).map(|i| &text[i + marker.len()..])
}

/// The first argument of a template/generic argument list whose opening
/// bracket has been consumed: up to the first `,` or closing `>` at depth
/// zero.
fn first_argument(args: &str) -> Option<&str> {
    let mut depth = 0i32;
    for (i, c) in args.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if depth == 0 => return Some(args[..i].trim()).filter(|a| !a.is_empty()),
            '>' => depth -= 1,
            ',' if depth == 0 => return Some(args[..i].trim()).filter(|a| !a.is_empty()),
            _ => {}
        }
    }
    None
}

/// `ns::Client::connect(std::chrono::duration<long>)::{lambda()#1}` →
/// `ns::Client::connect::{lambda()#1}`: the parameter lists of the
/// enclosing functions say nothing a reader needs.
fn strip_enclosing_params(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0i32;
    let mut start = 0usize;
    for (i, c) in name.char_indices() {
        match c {
            '(' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            ')' => {
                depth -= 1;
                if depth == 0 {
                    let group = &name[start..=i];
                    // A lambda's own `()` stays; a list followed by `::` goes.
                    let enclosing =
                        name[i + 1..].starts_with("::") && !name[..start].ends_with("{lambda");
                    if !enclosing {
                        out.push_str(group);
                    }
                }
            }
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambda_of_a_std_thread_is_named_without_enclosing_parameters() {
        let run = "std::thread::_State_impl<std::thread::_Invoker<std::tuple<session::Client::connect(std::chrono::duration<long, std::ratio<1l, 1000l> >)::{lambda()#1}> > >::_M_run()";
        let inner = after(run, "std::tuple<").unwrap();
        let callable = first_argument(inner).unwrap();
        assert_eq!(
            callable,
            "session::Client::connect(std::chrono::duration<long, std::ratio<1l, 1000l> >)::{lambda()#1}"
        );
        assert_eq!(strip_enclosing_params(callable), "session::Client::connect::{lambda()#1}");
    }

    #[test]
    fn function_pointers_and_rust_main_name_nothing() {
        let ptr = "void (*)(int), int> > >::_M_run()";
        assert_eq!(first_argument(ptr), Some("void (*)(int)"));
        let rust = "<fn(), ()>";
        assert_eq!(first_argument(rust.strip_prefix('<').unwrap()), Some("fn()"));
        let closure = "rust_spawn_closures::main::{closure#0}::{closure_env#0}, alloc::vec::Vec<rust_spawn_closures::Ticket, alloc::alloc::Global>>";
        assert_eq!(
            first_argument(closure),
            Some("rust_spawn_closures::main::{closure#0}::{closure_env#0}")
        );
        assert_eq!(
            user_closure(first_argument(closure).unwrap()).as_deref(),
            Some("rust_spawn_closures::main::{closure#0}::{closure#0}")
        );
        let wrapped = "std::thread::lifecycle::spawn_unchecked::{closure#1}::{closure#0}::{closure#0}<rust_spawn_closures::main::{closure#0}::{closure#0}, alloc::vec::Vec<rust_spawn_closures::Ticket, alloc::alloc::Global>>";
        assert_eq!(
            user_closure(wrapped).as_deref(),
            Some("rust_spawn_closures::main::{closure#0}::{closure#0}")
        );
        assert_eq!(user_closure("fn()"), None);
    }
}
