//! Which functions are the program's own — not the C runtime's start-up
//! code, not a language runtime or a library compiled into the executable —
//! and which of those are worth tracing when the user names none
//! (docs/probes.md, "Default mode").

use super::{Module, Symbol, elf::is_rust_symbol};

/// Why one of the program's own functions is not a default candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// `main`: returning non-zero restates the failure; it is never a cause.
    Main,
    /// Never returns: declared so (`DW_AT_noreturn`), or named as the
    /// error exits of C programs are (`die`, `fatal`, `panic`, `bail`,
    /// `usage`, `die_*`, `fatal_*`). Calling it ends the program, so "it is
    /// called" restates the failure.
    NoReturn,
    /// A sleep or clock helper (`sleep_us`, `elapsed_ms`, `now_ns`): it
    /// waits or measures, and its duration is the time it was asked for.
    Timing,
    /// A stub of at most 5 bytes (a `ret`, a tail jump).
    Trivial,
}

impl Skipped {
    pub fn reason(self) -> &'static str {
        match self {
            Skipped::Main => "its return restates the failure",
            Skipped::NoReturn => "never returns: calling it ends the program",
            Skipped::Timing => "sleep/clock helper",
            Skipped::Trivial => "stub of at most 5 bytes",
        }
    }
}

/// The executable's own functions. In a Rust program (one with a
/// `CRATE::main`), those of that crate; otherwise everything but start-up
/// code, compiler helpers and the Rust runtime.
pub fn own_functions(exe: &Module) -> Vec<&Symbol> {
    let rust_crate = exe.symbols.iter().find_map(|s| {
        let krate = s.name.strip_suffix("::main").filter(|_| is_rust_symbol(&s.raw))?;
        (!krate.contains("::") && !is_runtime_crate(krate) && !krate.is_empty()).then_some(krate)
    });
    exe.symbols
        .iter()
        .filter(|s| match rust_crate {
            Some(krate) => crate_of(&s.name) == Some(krate),
            None => is_own_function(s),
        })
        .collect()
}

/// Whether an own function of `module` is left out of the default set,
/// and why.
pub fn skipped(module: &Module, sym: &Symbol) -> Option<Skipped> {
    by_name(sym).or_else(|| module.noreturn(sym.address).then_some(Skipped::NoReturn))
}

/// The rules that need only the symbol.
fn by_name(sym: &Symbol) -> Option<Skipped> {
    let last = last_segment(&sym.name);
    if last == "main" {
        return Some(Skipped::Main);
    }
    const EXITS: &[&str] = &["die", "fatal", "panic", "bail", "usage", "fatal_error"];
    if EXITS.contains(&last) || last.starts_with("die_") || last.starts_with("fatal_") {
        return Some(Skipped::NoReturn);
    }
    if is_timing_helper(last) {
        return Some(Skipped::Timing);
    }
    if sym.size > 0 && sym.size <= 5 {
        return Some(Skipped::Trivial);
    }
    None
}

/// The name without its path and parameter list: `app::Cache::get(int)`
/// → `get`.
fn last_segment(name: &str) -> &str {
    let mut depth = 0i32;
    let mut end = name.len();
    for (i, c) in name.char_indices() {
        match c {
            '(' if depth == 0 => {
                end = i;
                break;
            }
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            _ => {}
        }
    }
    let head = &name[..end];
    head.rsplit("::").next().unwrap_or(head)
}

/// Sleep and clock helpers, by the words of their name: any of `sleep`,
/// `usleep`, `nanosleep`, `msleep`, `nap`, `elapsed`; or only clock words
/// (`now`, `clock`, `time`, `timestamp`, `monotonic`, `tick(s)`) with
/// units and `get`/`current`/`wall`.
fn is_timing_helper(name: &str) -> bool {
    const WAITS: &[&str] = &["sleep", "usleep", "nanosleep", "msleep", "nap", "elapsed"];
    const CLOCKS: &[&str] = &["now", "clock", "time", "timestamp", "monotonic", "tick", "ticks"];
    const FILLERS: &[&str] = &["ns", "us", "ms", "sec", "secs", "get", "current", "wall"];
    let words = words(name);
    if words.iter().any(|w| WAITS.contains(&w.as_str())) {
        return true;
    }
    words.iter().any(|w| CLOCKS.contains(&w.as_str()))
        && words.iter().all(|w| CLOCKS.contains(&w.as_str()) || FILLERS.contains(&w.as_str()))
}

/// `sleep_until_us` → sleep, until, us; `elapsedMs` → elapsed, ms.
fn words(name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The crate a Rust path starts with (`<app::Venue>::is_taken` → `app`).
fn crate_of(name: &str) -> Option<&str> {
    let trimmed = name.trim_start_matches(['<', '&', '*']).trim_start_matches("mut ");
    let end = trimmed.find("::")?;
    Some(&trimmed[..end])
}

fn is_runtime_crate(krate: &str) -> bool {
    matches!(krate, "std" | "core" | "alloc" | "proc_macro" | "test")
}

/// Start-up code, compiler helpers and language runtimes.
fn is_own_function(sym: &Symbol) -> bool {
    const C_RUNTIME: &[&str] = &[
        "_start",
        "_init",
        "_fini",
        "frame_dummy",
        "register_tm_clones",
        "deregister_tm_clones",
        "__do_global_dtors_aux",
        "__libc_csu_init",
        "__libc_csu_fini",
        "_dl_relocate_static_pie",
    ];
    const RUST_RUNTIME: &[&str] = &[
        "std::",
        "core::",
        "alloc::",
        "<std::",
        "<core::",
        "<alloc::",
        "<&",
        "<[",
        "<(",
        "<*",
        "std_detect::",
        "compiler_builtins::",
        "panic_unwind::",
        "panic_abort::",
        "gimli::",
        "addr2line::",
        "miniz_oxide::",
        "hashbrown::",
        "object::",
        "memchr::",
        "rustc_demangle::",
        "adler",
        "__rust",
        "rust_",
        "_<",
    ];
    const CPP_RUNTIME: &[&str] = &["std::", "__gnu_cxx::", "__cxxabiv1::", "__gnu_debug::"];
    let name = sym.name.as_str();
    let qualified = without_return_type(name);
    !(C_RUNTIME.contains(&name)
        || name.starts_with('_')
        || name.starts_with('.')
        || RUST_RUNTIME.iter().any(|p| name.starts_with(p))
        || CPP_RUNTIME.iter().any(|p| qualified.starts_with(p)))
}

/// A demangled C++ function template instance starts with its return type
/// (`void std::vector<int>::_M_realloc_insert<int>(...)`): the qualified
/// name is what follows the last space before the first `::`, outside
/// template arguments.
fn without_return_type(name: &str) -> &str {
    let mut depth = 0i32;
    let mut start = 0usize;
    let bytes = name.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth -= 1,
            b' ' if depth == 0 => start = i + 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => break,
            _ => {}
        }
    }
    &name[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, size: u64) -> Symbol {
        Symbol {
            raw: name.into(),
            name: name.into(),
            short: None,
            address: 0x1000,
            offset: 0x1000,
            size,
            aliases: vec![name.into()],
        }
    }

    #[test]
    fn main_sleep_and_clock_helpers_and_stubs_are_skipped() {
        let cases = [
            ("main", Some(Skipped::Main)),
            ("app::main", Some(Skipped::Main)),
            ("sleep_us", Some(Skipped::Timing)),
            ("sleep_until_us", Some(Skipped::Timing)),
            ("elapsed_ms", Some(Skipped::Timing)),
            ("now_ns", Some(Skipped::Timing)),
            ("monotonic_ns", Some(Skipped::Timing)),
            ("Clock::now()", Some(Skipped::Timing)),
            ("timeout_expired", None),
            ("die", Some(Skipped::NoReturn)),
            ("fatal_errno", Some(Skipped::NoReturn)),
            ("died_at", None),
            ("compute_backoff_delay", None),
            ("stock_item", None),
            ("session::Client::login(session::Credentials const&)", None),
        ];
        for (name, want) in cases {
            assert_eq!(by_name(&sym(name, 64)), want, "{name}");
        }
        assert_eq!(by_name(&sym("noop", 1)), Some(Skipped::Trivial));
    }

    #[test]
    fn rust_crates_and_last_segments() {
        assert_eq!(crate_of("<rust_spawn_closures::Venue>::is_taken"), Some("rust_spawn_closures"));
        assert_eq!(crate_of("<rustc_demangle::v0::Printer>::print_type"), Some("rustc_demangle"));
        assert_eq!(last_segment("ns::Cache<int>::get(int) const"), "get");
        assert_eq!(words("elapsedMs_total"), vec!["elapsed", "ms", "total"]);
        let template = "void std::__cxx11::basic_string<char, std::char_traits<char> >::_M_construct<char const*>(char const*, char const*)";
        assert!(without_return_type(template).starts_with("std::__cxx11::basic_string<"));
        assert!(!is_own_function(&sym(template, 64)));
        assert!(is_own_function(&sym(
            "session::Server::handle(unsigned int, session::Frame const&)",
            64
        )));
    }
}
