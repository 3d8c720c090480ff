//! Symbol resolution: turns `--trace` patterns into the functions to probe.
//!
//! A pattern is a glob over function names (`cache_*`, `Cache::*`,
//! `app::worker::*`), optionally prefixed by a library and a single colon
//! (`libc.so.6:pthread_mutex_*`, `libc:malloc`, `/opt/lib/libx.so:x_*`).
//! Names are matched demangled (C++ with and without the parameter list,
//! Rust without the hash) and raw, under every alias of an address and
//! with or without the symbol version, as bpftrace does:
//! `libc:pthread_mutex_unlock` matches `pthread_mutex_unlock@@GLIBC_2.2.5`,
//! `libc:free` the address `free`, `cfree` and `__libc_free` share.
//! Addresses become file offsets, which is what uprobes attach to, so PIE
//! and non-PIE executables are handled alike.

pub mod debuginfo;
mod dwarf;
mod elf;
pub mod enclosure;
pub mod entry_step;
mod libs;
pub mod own;
pub mod returns;
pub mod runtime;
pub mod touches;

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
};

pub use debuginfo::DebugSearch;
pub use dwarf::{member_at, member_of};
pub use elf::{Module, Origin, Symbol, demangle, names_of};
use globset::{Glob, GlobMatcher};

use crate::{
    model::{FuncId, Function, Probe, ValueKind, ValueType},
    sys::proc,
};

#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is not an ELF file: aid traces native executables and shared libraries", path.display())]
    NotElf { path: PathBuf },
    #[error("{} is not a valid ELF file: {reason}", path.display())]
    BadElf { path: PathBuf, reason: String },
    #[error(
        "{} has no function symbols (stripped, and no debug file found by build-id or .gnu_debuglink under {}): install its debug symbols or pass --debug-root DIR; library functions can still be traced ('libc:PATTERN')",
        path.display(), root.display()
    )]
    NoSymbols { path: PathBuf, root: PathBuf },
    #[error(
        "library `{name}` not found among the libraries {} loads or in the library search path: give its path instead (--trace /path/to/{name}:PATTERN)",
        exe.display()
    )]
    LibraryNotFound { name: String, exe: PathBuf },
    #[error("invalid pattern `{pattern}`: {reason}")]
    BadPattern { pattern: String, reason: String },
    #[error(
        "pattern `{pattern}` matches no function in {}{}",
        module.display(), suggest(library.as_deref(), close)
    )]
    NoMatch { pattern: String, library: Option<String>, module: PathBuf, close: Vec<String> },
    /// A pattern that matched nothing (or named no library) as a whole and
    /// has commas outside brackets: a list, as bpftrace and uftrace users
    /// write it. It is not split: one part matching by chance would trace
    /// functions nobody asked for.
    #[error(
        "pattern `{pattern}` matches no function: a comma does not separate patterns; give one per -t ({}){}",
        each.join(" "), brace.as_ref().map_or_else(String::new, |b| format!(", or one brace glob ('{b}')"))
    )]
    List { pattern: String, each: Vec<String>, brace: Option<String> },
}

/// The advice for a pattern with commas outside brackets (`a,b,c`, not
/// `f(int, int)` or `{a,b}`), or None. Each part without a library of its
/// own gets the first part's (`libc:malloc,free`: `-t libc:malloc -t
/// libc:free`); the brace glob is offered when all parts share one.
fn list_advice(text: &str) -> Option<SymbolError> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' | '>' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let parsed: Vec<Pattern> =
        parts.iter().map(|p| Pattern::parse(p)).collect::<Result<_, _>>().ok()?;
    let first = parsed[0].library.clone();
    let libs: Vec<Option<String>> =
        parsed.iter().map(|p| p.library.clone().or_else(|| first.clone())).collect();
    let with = |lib: &Option<String>, glob: &str| match lib {
        Some(l) => format!("{l}:{glob}"),
        None => glob.to_owned(),
    };
    let each = parsed.iter().zip(&libs).map(|(p, l)| format!("-t {}", with(l, &p.glob))).collect();
    let brace = libs.iter().all(|l| *l == libs[0]).then(|| {
        let globs: Vec<&str> = parsed.iter().map(|p| p.glob.as_str()).collect();
        with(&libs[0], &format!("{{{}}}", globs.join(",")))
    });
    Some(SymbolError::List { pattern: text.to_owned(), each, brace })
}

/// Names close to a pattern that matched nothing, or aid's own listing of
/// the module's functions (`-l`, as `bpftrace -l`).
fn suggest(library: Option<&str>, close: &[String]) -> String {
    if close.is_empty() {
        let all = library.map_or_else(|| "*".to_owned(), |lib| format!("{lib}:*"));
        format!(
            "; list its functions with `aid-agent debug -l '{all}' PROGRAM` (or `-p PID -l '{all}'`), or try a wider glob"
        )
    } else {
        format!("; close matches: {}", close.join(", "))
    }
}

/// A parsed `--trace` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Library part, if any ("libc", "libc.so.6", "/path/lib.so").
    pub library: Option<String>,
    pub glob: String,
}

impl Pattern {
    /// Splits at a single colon; `::` belongs to C++/Rust names.
    pub fn parse(text: &str) -> Result<Pattern, SymbolError> {
        let bytes = text.as_bytes();
        let split = (0..bytes.len()).find(|&i| {
            bytes[i] == b':' && bytes.get(i + 1) != Some(&b':') && (i == 0 || bytes[i - 1] != b':')
        });
        let (library, glob) = match split {
            Some(i) => (Some(text[..i].to_owned()), text[i + 1..].to_owned()),
            None => (None, text.to_owned()),
        };
        let bad = |reason: &str| SymbolError::BadPattern {
            pattern: text.to_owned(),
            reason: reason.to_owned(),
        };
        if glob.is_empty() {
            return Err(bad("nothing to match after the library name"));
        }
        if library.as_deref() == Some("") {
            return Err(bad("empty library name before `:`"));
        }
        Ok(Pattern { library, glob })
    }

    fn matcher(&self, text: &str) -> Result<GlobMatcher, SymbolError> {
        Glob::new(&self.glob).map(|g| g.compile_matcher()).map_err(|e| SymbolError::BadPattern {
            pattern: text.to_owned(),
            reason: e.kind().to_string(),
        })
    }
}

/// Resolves patterns against an executable and the libraries it loads.
pub struct Resolver {
    exe: Module,
    /// Mapped files of a running process (attach mode), else empty.
    mapped: Vec<PathBuf>,
    libs: HashMap<PathBuf, Module>,
    /// Where separate debug files are looked for.
    search: DebugSearch,
}

impl Resolver {
    /// For a program about to be started, debug files looked for where
    /// they usually are.
    pub fn for_executable(exe: &Path) -> Result<Resolver, SymbolError> {
        Resolver::for_executable_with(exe, &DebugSearch::default())
    }

    /// For a program about to be started, debug files looked for per
    /// `search`.
    pub fn for_executable_with(exe: &Path, search: &DebugSearch) -> Result<Resolver, SymbolError> {
        Ok(Resolver {
            exe: Module::load(exe, Some(search))?,
            mapped: Vec::new(),
            libs: HashMap::new(),
            search: search.clone(),
        })
    }

    /// For a running process: its executable and the files it has mapped.
    pub fn for_process(pid: u32) -> Result<Resolver, SymbolError> {
        Resolver::for_process_with(pid, &DebugSearch::default())
    }

    /// For a running process, debug files looked for per `search`. Paths
    /// are the ones the agent can open: in another mount namespace (a
    /// container) through `/proc/PID/root`.
    pub fn for_process_with(pid: u32, search: &DebugSearch) -> Result<Resolver, SymbolError> {
        let exe = proc::executable(pid)
            .map_err(|source| SymbolError::Read { path: proc::exe_link(pid), source })?;
        let mapped = proc::mapped_executables(pid);
        // Read the executable through its path when it is the running
        // file (a `.gnu_debuglink` is looked for next to it), else through
        // /proc so a deleted or replaced file still resolves to what is
        // running.
        let read_at = if proc::same_file(&exe, &proc::exe_link(pid)) {
            exe.clone()
        } else {
            proc::exe_link(pid)
        };
        let mut exe_module = Module::load(&read_at, Some(search)).map_err(|e| match e {
            SymbolError::NotElf { .. } => SymbolError::NotElf { path: exe.clone() },
            other => other,
        })?;
        exe_module.path = exe;
        Ok(Resolver { exe: exe_module, mapped, libs: HashMap::new(), search: search.clone() })
    }

    /// Where the symbols of the modules of `functions` came from, one
    /// entry per module: "server: /dbg/.build-id/ab/cd.debug (by
    /// build-id)".
    pub fn symbol_sources(&self, functions: &[Function]) -> Vec<String> {
        let mut seen: Vec<&Path> = Vec::new();
        let mut out = Vec::new();
        for f in functions.iter().filter(|f| !f.internal) {
            if seen.contains(&f.module.as_path()) {
                continue;
            }
            seen.push(&f.module);
            let module =
                if f.module == self.exe.path { Some(&self.exe) } else { self.libs.get(&f.module) };
            if let Some(m) = module {
                let name = m.path.file_name().map_or_else(
                    || m.path.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                out.push(format!("{name}: {}", m.origin.describe()));
            }
        }
        out
    }

    pub fn executable(&self) -> &Module {
        &self.exe
    }

    /// The executable, or a library some of `functions` are in, whose
    /// code throws C++ exceptions or unwinds on a Rust panic, with the
    /// throw entry it calls (`__cxa_throw`, `__cxa_rethrow`,
    /// `_Unwind_RaiseException`, a `std::__throw_*` helper).
    pub fn thrower(&self, functions: &[Function]) -> Option<(&Path, &str)> {
        let modules: BTreeSet<&PathBuf> = functions.iter().map(|f| &f.module).collect();
        let libs = modules.into_iter().filter_map(|m| self.libs.get(m));
        std::iter::once(&self.exe)
            .chain(libs)
            .find_map(|m| Some((m.path.as_path(), m.throws.as_deref()?)))
    }

    /// Finds (and loads) the module a pattern refers to.
    pub fn module(&mut self, library: Option<&str>) -> Result<&Module, SymbolError> {
        let Some(name) = library else { return Ok(&self.exe) };
        let path = libs::find_library(name, &self.exe, &self.mapped).ok_or_else(|| {
            SymbolError::LibraryNotFound { name: name.to_owned(), exe: self.exe.path.clone() }
        })?;
        let path = elf::canonical(&path).unwrap_or(path);
        if path == self.exe.path {
            return Ok(&self.exe);
        }
        if !self.libs.contains_key(&path) {
            // A library's own tables only: its debug file (glibc's, from
            // libc6-dbg) would change what patterns match and the types of
            // traced arguments, and costs seconds to parse
            // (docs/probes.md, "Binaries as they ship").
            let module = Module::load(&path, None)?;
            self.libs.insert(path.clone(), module);
        }
        Ok(&self.libs[&path])
    }

    /// All functions matched by the patterns, each once, in pattern order.
    /// Every pattern must match something.
    pub fn resolve(&mut self, patterns: &[String]) -> Result<Vec<Function>, SymbolError> {
        let mut out: Vec<Function> = Vec::new();
        let mut seen: BTreeSet<(PathBuf, u64)> = BTreeSet::new();
        for text in patterns {
            let pattern = Pattern::parse(text)?;
            let matcher = pattern.matcher(text)?;
            let root = self.search.root.clone();
            let module = match self.module(pattern.library.as_deref()) {
                Err(e @ SymbolError::LibraryNotFound { .. }) => {
                    return Err(list_advice(text).unwrap_or(e));
                }
                m => m?,
            };
            if module.symbols.is_empty() {
                return Err(SymbolError::NoSymbols { path: module.path.clone(), root });
            }
            let matched: Vec<&Symbol> =
                module.symbols.iter().filter(|s| s.matched_by(|n| matcher.is_match(n))).collect();
            if matched.is_empty() {
                if let Some(e) = list_advice(text) {
                    return Err(e);
                }
                return Err(SymbolError::NoMatch {
                    pattern: text.clone(),
                    library: pattern.library.clone(),
                    module: module.path.clone(),
                    close: close_matches(&pattern.glob, module),
                });
            }
            for sym in matched {
                if seen.insert((module.path.clone(), sym.address)) {
                    out.push(function(module, sym, out.len() as FuncId, false));
                }
            }
        }
        Ok(out)
    }

    /// `pthread_create` in the executable or the C library, traced by aid
    /// itself to name threads after their start routine.
    pub fn pthread_create(&mut self, id: FuncId) -> Option<Function> {
        for lib in [None, Some("libc")] {
            let Ok(module) = self.module(lib) else { continue };
            if let Some(sym) =
                module.symbols.iter().find(|s| s.matched_by(|n| n == "pthread_create"))
            {
                let mut f = function(module, sym, id, true);
                if f.ret.kind == ValueKind::Unknown {
                    // The C library has no DWARF here; its ABI is fixed:
                    // int pthread_create(pthread_t *, const pthread_attr_t *,
                    // void *(*)(void *), void *) — so the session shows
                    // the three pointers in hex like any other pointer.
                    f.ret = ValueType { kind: ValueKind::Signed, size: 4 };
                    f.params = vec![ValueType::POINTER; 3];
                }
                return Some(f);
            }
        }
        None
    }

    /// The executable's own functions — not the C runtime's start-up code,
    /// not a language runtime — for tracing when no pattern is given.
    pub fn own_functions(&self) -> Vec<&Symbol> {
        own::own_functions(&self.exe)
    }

    /// The C library's synchronisation points ([`runtime::SYNC_POINTS`]),
    /// wherever the program has them (the C library, or the executable if
    /// it is static), numbered from `first`: aid's own entry-only probes
    /// for noise. Every address of a name counts (older symbol versions
    /// too: `pthread_cond_wait@GLIBC_2.2.5`).
    pub fn sync_points(&mut self, first: FuncId) -> Vec<Function> {
        let mut out: Vec<Function> = Vec::new();
        let mut seen: BTreeSet<(PathBuf, u64)> = BTreeSet::new();
        for lib in [None, Some("libc")] {
            let Ok(module) = self.module(lib) else { continue };
            for sym in module
                .symbols
                .iter()
                .filter(|s| s.matched_by(|n| runtime::SYNC_POINTS.contains(&n)))
            {
                if seen.insert((module.path.clone(), sym.address)) {
                    let mut f = function(module, sym, first + out.len() as FuncId, true);
                    f.probe = Probe::Sync;
                    let args = entry_step::args_read(&sym.name);
                    f.offset +=
                        entry_step::step_of(&module.path, sym.offset, sym.address, sym.size, args);
                    if f.params.iter().all(|p| p.kind == ValueKind::Unknown)
                        && sym.matched_by(|n| n.starts_with("pthread_") || n.starts_with("sem_"))
                    {
                        // No DWARF in the C library; by the ABI the first
                        // argument of these is the lock, condition
                        // variable or semaphore: shown in hex.
                        f.params = vec![ValueType::POINTER, ValueType::UNKNOWN, ValueType::UNKNOWN];
                    }
                    out.push(f);
                }
            }
        }
        out
    }

    /// Where the executable's own code resumes after a join or a
    /// condition wait ([`returns::return_sites`]), numbered from `first`:
    /// aid's own entry-only probes on the instruction after each call,
    /// synchronisation points like the C library's ([`Probe::Sync`],
    /// named "pthread_join returned to main at prog.c:42"), at most
    /// [`MAX_RETURN_POINTS`]. One whose instruction a uprobe may not take
    /// is left out, as a statement point is.
    pub fn return_points(&self, first: FuncId) -> Vec<Function> {
        let mut out: Vec<Function> = Vec::new();
        let Ok(bytes) = std::fs::read(&self.exe.path) else { return out };
        let Ok(file) = object::File::parse(&*bytes) else { return out };
        for site in returns::return_sites(&file) {
            if out.len() == MAX_RETURN_POINTS {
                break;
            }
            let Some(sym) = self
                .exe
                .symbols
                .iter()
                .find(|s| s.address <= site.call && site.call < s.address + s.size)
            else {
                continue;
            };
            let offset = sym.offset + (site.after - sym.address);
            if bytes.get(offset as usize).is_none_or(|b| NOT_PROBED.contains(b)) {
                continue;
            }
            let source = self.exe.source(site.call);
            let at = source.as_ref().map_or_else(String::new, |loc| {
                let file = loc.file.rsplit('/').next().unwrap_or(&loc.file);
                format!(" at {file}:{}", loc.line)
            });
            out.push(Function {
                id: first + out.len() as FuncId,
                name: format!("{} returned to {}{at}", site.callee, sym.name),
                symbol: format!("{}+{:#x}", sym.raw, site.after - sym.address),
                module: self.exe.path.clone(),
                address: site.after,
                offset,
                source,
                ret: ValueType::UNKNOWN,
                params: vec![ValueType::UNKNOWN; 3],
                internal: true,
                probe: Probe::Sync,
                pointee: None,
            });
        }
        out
    }

    /// Where the program's exceptions begin to unwind ([`Probe::Throw`]:
    /// `UNWIND_ENTRIES`) and where they are caught ([`Probe::Catch`]:
    /// `is_catch_entry`), in the executable (linked statically) or
    /// the unwinder's and C++ runtime's libraries, numbered from `first`.
    pub fn unwind_points(&mut self, first: FuncId) -> Vec<Function> {
        let mut out: Vec<Function> = Vec::new();
        let mut seen: BTreeSet<(PathBuf, u64)> = BTreeSet::new();
        for lib in [None, Some("libgcc_s"), Some("libstdc++"), Some("libc++abi"), Some("libunwind")]
        {
            let Ok(module) = self.module(lib) else { continue };
            for sym in &module.symbols {
                let probe = if sym.matched_by(|n| elf::UNWIND_ENTRIES.contains(&n)) {
                    Probe::Throw
                } else if sym.matched_by(elf::is_catch_entry) {
                    Probe::Catch
                } else {
                    continue;
                };
                if seen.insert((module.path.clone(), sym.address)) {
                    let mut f = function(module, sym, first + out.len() as FuncId, true);
                    f.probe = probe;
                    out.push(f);
                }
            }
        }
        out
    }

    /// Statement points ([`Probe::Statement`]) inside the executable's
    /// traced functions among `traced`, numbered from 0: where each
    /// source line after the first begins (DWARF), at most
    /// [`STATEMENTS_PER_FUNCTION`] a function and [`MAX_STATEMENTS`] in
    /// all. A line whose first instruction a uprobe may not take (a lock
    /// prefix, a VEX or EVEX encoding, a trap) is left out.
    pub fn statement_points(&self, traced: &[Function]) -> Vec<Function> {
        let mut out: Vec<Function> = Vec::new();
        let Ok(bytes) = std::fs::read(&self.exe.path) else { return out };
        for f in traced.iter().filter(|f| f.probe == Probe::Call && !f.internal) {
            if f.module != self.exe.path {
                continue;
            }
            let Some(sym) = self.exe.symbols.iter().find(|s| s.address == f.address) else {
                continue;
            };
            let lines = self.exe.statements(sym.address, sym.size);
            for (addr, loc) in lines.into_iter().take(STATEMENTS_PER_FUNCTION) {
                if out.len() == MAX_STATEMENTS {
                    return out;
                }
                let offset = f.offset + (addr - f.address);
                let first_byte = bytes.get(offset as usize).copied();
                if first_byte.is_none_or(|b| NOT_PROBED.contains(&b)) {
                    continue;
                }
                let file = loc.file.rsplit('/').next().unwrap_or(&loc.file).to_owned();
                out.push(Function {
                    id: out.len() as FuncId,
                    name: format!("{} at {file}:{}", f.name, loc.line),
                    symbol: format!("{}+{:#x}", f.symbol, addr - f.address),
                    module: f.module.clone(),
                    address: addr,
                    offset,
                    source: Some(loc),
                    ret: ValueType::UNKNOWN,
                    params: vec![ValueType::UNKNOWN; 3],
                    internal: true,
                    probe: Probe::Statement,
                    pointee: None,
                });
            }
        }
        out
    }

    /// The thread bodies of the executable ([`runtime::thread_body`]),
    /// numbered from `first`, each with the user function it runs: aid's
    /// own entry-only probes to name threads started through a runtime's
    /// trampoline.
    pub fn thread_bodies(&self, first: FuncId) -> Vec<(Function, String)> {
        let mut out: Vec<(Function, String)> = Vec::new();
        for sym in &self.exe.symbols {
            if let Some(runs) = runtime::thread_body(&self.exe, sym) {
                let mut f = function(&self.exe, sym, first + out.len() as FuncId, true);
                f.probe = Probe::Entry;
                out.push((f, runs));
            }
        }
        out
    }

    /// Name of the function starting at ELF virtual address `address` of
    /// `module` (the executable or a library already loaded).
    pub fn function_at(&self, module: &Path, address: u64) -> Option<&str> {
        let m = if module == self.exe.path { &self.exe } else { self.libs.get(module)? };
        m.symbols.iter().find(|s| s.address == address).map(|s| s.name.as_str())
    }

    /// How many inlined copies of the function at `address` of `module`
    /// DWARF lists (0 without DWARF: libraries are read without theirs).
    pub fn inlined(&self, module: &Path, address: u64) -> u32 {
        let m = if module == self.exe.path { Some(&self.exe) } else { self.libs.get(module) };
        m.map_or(0, |m| m.inlined(address))
    }

    /// The function names of the executable and the libraries loaded so
    /// far, by address: what [`Resolver::function_at`] answers, in a form
    /// another thread can own (the resolver's debug information cannot
    /// leave its thread).
    pub fn names(&self) -> Names {
        let modules = std::iter::once(&self.exe)
            .chain(self.libs.values())
            .map(|m| {
                let mut by_address: HashMap<u64, String> = HashMap::new();
                for s in &m.symbols {
                    // The first symbol at an address, as `function_at` finds it.
                    by_address.entry(s.address).or_insert_with(|| s.name.clone());
                }
                (m.path.clone(), by_address)
            })
            .collect();
        Names { modules }
    }
}

/// Function names by module and address ([`Resolver::names`]): what the
/// tracers of parallel runs (`--jobs`) name thread start routines with.
#[derive(Clone, Debug, Default)]
pub struct Names {
    modules: HashMap<PathBuf, HashMap<u64, String>>,
}

impl Names {
    /// Name of the function starting at ELF virtual address `address` of
    /// `module`, as [`Resolver::function_at`] names it.
    pub fn function_at(&self, module: &Path, address: u64) -> Option<&str> {
        self.modules.get(module)?.get(&address).map(String::as_str)
    }
}

/// Statement points per traced function ([`Resolver::statement_points`]).
pub const STATEMENTS_PER_FUNCTION: usize = 16;
/// Statement points in all.
pub const MAX_STATEMENTS: usize = 128;
/// Return points in all ([`Resolver::return_points`]).
pub const MAX_RETURN_POINTS: usize = 64;
/// First bytes of instructions a statement point is not put at: the lock
/// prefix, VEX (0xc4, 0xc5), EVEX (0x62) and XOP (0x8f) encodings, and
/// traps (int3, int n, int1, hlt), which x86 uprobes refuse or which
/// should not be single-stepped.
const NOT_PROBED: &[u8] = &[0xf0, 0xc4, 0xc5, 0x62, 0x8f, 0xcc, 0xcd, 0xf1, 0xf4];

/// Builds the session's record of one symbol.
pub fn function(module: &Module, sym: &Symbol, id: FuncId, internal: bool) -> Function {
    let (ret, params) = module.signature(sym.address);
    Function {
        id,
        name: sym.name.clone(),
        symbol: sym.raw.clone(),
        module: module.path.clone(),
        address: sym.address,
        offset: sym.offset,
        source: module.source(sym.address),
        ret,
        params,
        internal,
        probe: Probe::Call,
        pointee: if internal { None } else { module.pointee(sym.address) },
    }
}

/// Up to five names that look like what the user meant.
fn close_matches(glob: &str, module: &Module) -> Vec<String> {
    let needle: String = glob.chars().filter(|c| !matches!(c, '*' | '?' | '[' | ']')).collect();
    let needle = needle.to_lowercase();
    let mut scored: Vec<(f64, &str)> = module
        .symbols
        .iter()
        .map(|s| {
            let name = s.short.as_deref().unwrap_or(&s.name);
            let lower = name.to_lowercase();
            let mut score = strsim::jaro_winkler(&needle, &lower);
            if !needle.is_empty() && (lower.contains(&needle) || needle.contains(&lower)) {
                score += 0.5;
            }
            (score, s.name.as_str())
        })
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, n)| n.to_owned()).collect()
}

/// Writes `source` to `file` in a temporary directory and compiles it
/// there with `compiler` and `flags` into an executable; None when the
/// compiler is missing or fails. For tests that read real executables.
#[cfg(test)]
pub(crate) fn compiled(
    compiler: &str,
    file: &str,
    source: &str,
    flags: &[&str],
) -> Option<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir().ok()?;
    let src = dir.path().join(file);
    std::fs::write(&src, source).ok()?;
    let exe = dir.path().join("p");
    let status =
        std::process::Command::new(compiler).args(flags).arg("-o").arg(&exe).arg(&src).status();
    status.ok()?.success().then_some((dir, exe))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class's destructors, compiled: the deleting one (`D0`) is
    /// listed apart from the complete and base ones (one address at
    /// `-O0`), and the plain name traces both.
    #[test]
    fn a_deleting_destructor_is_listed_apart_and_traced_by_the_plain_name() {
        let source = "#include <cstdio>\n\
             struct Base { virtual ~Base() { std::puts(\"base\"); } };\n\
             struct Cache : Base { ~Cache() override { std::puts(\"cache\"); } };\n\
             int main() { Base *b = new Cache(); delete b; return 0; }\n";
        let (_dir, exe) = compiled("c++", "d.cpp", source, &["-O0"])
            .expect("the C++ compiler (c++) is needed: `cargo xtask setup` installs it");
        let mut r = Resolver::for_executable(&exe).unwrap();
        let traced = |r: &mut Resolver, p: &str| {
            let mut names: Vec<String> =
                r.resolve(&[p.to_owned()]).unwrap().into_iter().map(|f| f.name).collect();
            names.sort();
            names
        };
        let both = ["Cache::~Cache()", "Cache::~Cache() [deleting]"];
        assert_eq!(traced(&mut r, "Cache::~Cache()"), both);
        assert_eq!(traced(&mut r, "Cache::~Cache"), both);
        assert_eq!(traced(&mut r, "_ZN5CacheD0Ev"), ["Cache::~Cache() [deleting]"]);
    }

    /// Commas outside brackets get the advice (never a split: a part
    /// matching by chance would trace what nobody asked for); commas of a
    /// C++ parameter or template list, or of a brace glob, are the name's.
    #[test]
    fn a_comma_list_gets_advice_and_is_never_split() {
        let advice = |t: &str| list_advice(t).map(|e| e.to_string());
        assert_eq!(
            advice("a,b,c").as_deref(),
            Some(
                "pattern `a,b,c` matches no function: a comma does not separate patterns; give one per -t (-t a -t b -t c), or one brace glob ('{a,b,c}')"
            )
        );
        assert_eq!(
            advice("libc:malloc, free").as_deref(),
            Some(
                "pattern `libc:malloc, free` matches no function: a comma does not separate patterns; give one per -t (-t libc:malloc -t libc:free), or one brace glob ('libc:{malloc,free}')"
            )
        );
        assert_eq!(
            advice("libc:malloc,libm:cos").as_deref(),
            Some(
                "pattern `libc:malloc,libm:cos` matches no function: a comma does not separate patterns; give one per -t (-t libc:malloc -t libm:cos)"
            )
        );
        for name in ["f(int, int)", "Map<int, int>::get", "{a,b}", "cache_[a,b]", "a,", ",a", "a"] {
            assert_eq!(advice(name), None, "{name}");
        }
    }

    #[test]
    fn pattern_splits_on_single_colon_only() {
        assert_eq!(
            Pattern::parse("libc.so.6:pthread_mutex_*").unwrap(),
            Pattern { library: Some("libc.so.6".into()), glob: "pthread_mutex_*".into() }
        );
        assert_eq!(
            Pattern::parse("Cache::get").unwrap(),
            Pattern { library: None, glob: "Cache::get".into() }
        );
        assert_eq!(
            Pattern::parse("libfoo:ns::Cache::*").unwrap(),
            Pattern { library: Some("libfoo".into()), glob: "ns::Cache::*".into() }
        );
        assert!(Pattern::parse("libc:").is_err());
        assert!(Pattern::parse(":foo").is_err());
    }
}
