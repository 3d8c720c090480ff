//! Reading one ELF file: its function symbols (from `.symtab` and
//! `.dynsym`, and from a separate debug file when the binary is stripped),
//! their file offsets (what a uprobe attaches to), demangled names, and
//! the libraries it needs.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use object::{
    Object as _, ObjectSegment as _, ObjectSymbol as _, SymbolFlags, SymbolKind, elf,
    read::elf::{Dyn as _, ElfFile64},
};

use super::{
    SymbolError,
    debuginfo::{self, DebugSearch, Found, Identity},
    dwarf::DebugInfo,
};
use crate::model::ValueType;

/// A function symbol of one module: one per address, under the name a
/// user would choose among its aliases.
#[derive(Clone, Debug)]
pub struct Symbol {
    /// As written in the ELF file.
    pub raw: String,
    /// Demangled, without Rust's hash; equal to `raw` for C names.
    pub name: String,
    /// C++ names without the parameter list ("Cache::get"), for matching.
    pub short: Option<String>,
    pub address: u64,
    pub offset: u64,
    /// Size of the function's code in bytes (0 when the symbol does not say).
    pub size: u64,
    /// Every name of this address, `raw` included, each also with its
    /// symbol version as `nm -D` prints it (`free@@GLIBC_2.2.5`, hidden
    /// versions with a single `@`): what patterns are matched against.
    pub aliases: Vec<String>,
}

impl Symbol {
    /// Whether `matches` accepts this function under any of its names.
    pub fn matched_by(&self, matches: impl Fn(&str) -> bool) -> bool {
        matches(&self.name)
            || self.short.as_deref().is_some_and(&matches)
            || self.aliases.iter().any(|a| matches(a))
    }
}

/// One executable or shared library, with what we know of its functions.
pub struct Module {
    pub path: PathBuf,
    pub symbols: Vec<Symbol>,
    /// `DT_NEEDED` entries.
    pub needed: Vec<String>,
    /// `DT_RUNPATH` / `DT_RPATH` directories (with `$ORIGIN` expanded).
    pub runpath: Vec<PathBuf>,
    /// Where its symbols and debug information came from.
    pub origin: Origin,
    /// The throw entry it calls or defines (`THROW_ENTRIES`, or one of
    /// libstdc++'s `std::__throw_*` helpers), if any: its code throws
    /// exceptions or unwinds on a panic.
    pub throws: Option<String>,
    debug: Option<DebugInfo>,
}

/// What a C++ `throw` expression (or a rethrow) compiles to a call of,
/// and the unwinder's entry a Rust panic calls (Rust's standard library
/// is linked into the executable): a module that calls or defines one
/// unwinds its stack through its own functions.
pub const THROW_ENTRIES: &[&str] = &["__cxa_throw", "__cxa_rethrow", "_Unwind_RaiseException"];

/// Where the unwinder begins to walk the stack: a throw or a rethrow
/// (`_Unwind_Resume_or_Rethrow` calls `_Unwind_RaiseException` for it, so
/// it is not one of them: one unwind, one repair), a thread's forced
/// unwind (`pthread_exit`, cancellation).
pub const UNWIND_ENTRIES: &[&str] = &["_Unwind_RaiseException", "_Unwind_ForcedUnwind"];

/// Where an unwind has ended in a handler: C++'s catch, and Rust's
/// `catch_unwind` taking the panic's payload (`__rust_panic_cleanup`, by
/// its plain name in older releases and `__rustc::__rust_panic_cleanup`
/// in newer ones). One point per caught exception: the release of the
/// exception (`_Unwind_DeleteException`, at the end of a C++ handler) is
/// not one, as another exception may still be unwinding when a handler
/// inside one of its destructors ends.
pub fn is_catch_entry(name: &str) -> bool {
    name == "__cxa_begin_catch"
        || name == "__rust_panic_cleanup"
        || name.ends_with("::__rust_panic_cleanup")
}

/// Where a module's function names came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its own symbol table (`.symtab`, with `.dynsym`).
    Symtab,
    /// Stripped: only the dynamic symbols it exports (maybe none).
    Dynsym,
    /// A separate debug file, and how it was found.
    Separate { path: PathBuf, how: Found },
}

impl Origin {
    /// In words, for the line a session starts with.
    pub fn describe(&self) -> String {
        match self {
            Origin::Symtab => ".symtab".to_owned(),
            Origin::Dynsym => ".dynsym only (stripped)".to_owned(),
            Origin::Separate { path, how } => {
                let how = match how {
                    Found::BuildId => "build-id".to_owned(),
                    Found::DebugLink => ".gnu_debuglink".to_owned(),
                    Found::Debuginfod(server) => format!("debuginfod {server}"),
                };
                format!("{} (by {how})", path.display())
            }
        }
    }
}

impl Module {
    /// Parses `path`. A binary without debug information gets its names
    /// and DWARF from a separate debug file where `search` finds one; a
    /// stripped one without has only its dynamic symbols, maybe none.
    /// Fails when it is not ELF.
    pub fn load(path: &Path, search: Option<&DebugSearch>) -> Result<Module, SymbolError> {
        let path = canonical(path)
            .map_err(|source| SymbolError::Read { path: path.to_owned(), source })?;
        let data = std::fs::read(&path)
            .map_err(|source| SymbolError::Read { path: path.clone(), source })?;
        if !data.starts_with(b"\x7fELF") {
            return Err(SymbolError::NotElf { path });
        }
        let file = object::File::parse(&*data)
            .map_err(|e| SymbolError::BadElf { path: path.clone(), reason: e.to_string() })?;
        let (needed, runpath) = dynamic_entries(&data, &path);
        let separate = match search {
            Some(search) if file.section_by_name(".debug_info").is_none() => {
                debuginfo::find(search, &path, &Identity::of(&file))
            }
            _ => None,
        };
        let separate_file = separate.as_ref().and_then(|d| object::File::parse(&*d.data).ok());
        let symbols = function_symbols(&file, &data, separate_file.as_ref());
        let throws = throw_entry(&file);
        let debug = match &separate_file {
            Some(f) => DebugInfo::load(f),
            None => DebugInfo::load(&file),
        };
        let origin = match separate {
            Some(d) if separate_file.is_some() => Origin::Separate { path: d.path, how: d.how },
            _ if file.section_by_name(".symtab").is_some() => Origin::Symtab,
            _ => Origin::Dynsym,
        };
        Ok(Module { path, symbols, needed, runpath, origin, throws, debug })
    }

    /// Source position of a function's first instruction, from DWARF.
    pub fn source(&self, address: u64) -> Option<crate::model::SourceLoc> {
        self.debug.as_ref()?.source(address)
    }

    /// Where source lines begin inside the function at `address` of
    /// `size` bytes, after its first instruction (DWARF only).
    pub fn statements(&self, address: u64, size: u64) -> Vec<(u64, crate::model::SourceLoc)> {
        self.debug.as_ref().map_or_else(Vec::new, |d| d.statements(address, address + size))
    }

    /// The DWARF name, with generic arguments, of the generic instance
    /// starting at `address`.
    pub fn generic_name(&self, address: u64) -> Option<&str> {
        self.debug.as_ref()?.generic_name(address)
    }

    /// Whether DWARF declares the function at `address` never to return.
    pub fn noreturn(&self, address: u64) -> bool {
        self.debug.as_ref().is_some_and(|d| d.noreturn(address))
    }

    /// What the entry probe of the function at `address` should read from
    /// memory an argument points to (DWARF only).
    pub fn pointee(&self, address: u64) -> Option<crate::model::Pointee> {
        self.debug.as_ref().and_then(|d| d.pointee(address))
    }

    /// Entry addresses of the functions whose code calls the one at
    /// `address` directly (DWARF call sites; none without them).
    pub fn callers(&self, address: u64) -> &[u64] {
        self.debug.as_ref().map_or(&[], |d| d.callers(address))
    }

    /// How many copies of the function at `address` the compiler inlined
    /// into others (DWARF; 0 without it): calls its probe never sees.
    pub fn inlined(&self, address: u64) -> u32 {
        self.debug.as_ref().map_or(0, |d| d.inlined(address))
    }

    /// Return type and the types of the parameters passed in the first
    /// three integer registers, from DWARF. Without DWARF all three
    /// registers are reported, typed unknown.
    pub fn signature(&self, address: u64) -> (ValueType, Vec<ValueType>) {
        self.debug
            .as_ref()
            .and_then(|d| d.signature(address))
            .unwrap_or((ValueType::UNKNOWN, vec![ValueType::UNKNOWN; 3]))
    }
}

/// The first of [`THROW_ENTRIES`] `file` imports or defines, else the
/// first by name of libstdc++'s throw helpers it imports (a program with no throw
/// expression of its own whose inlined library code throws: `std::stoi`
/// calls `std::__throw_invalid_argument`, `vector::at` calls
/// `std::__throw_out_of_range_fmt`), in one pass over its symbols.
fn throw_entry(file: &object::File<'_>) -> Option<String> {
    let mut seen = [false; THROW_ENTRIES.len()];
    let mut helper = None;
    for name in file.dynamic_symbols().chain(file.symbols()).filter_map(|s| s.name().ok()) {
        if let Some(i) = THROW_ENTRIES.iter().position(|t| *t == name) {
            seen[i] = true;
        } else if let Some(h) = std_throw_helper(name) {
            // The first by name: the same one whatever the symbol order.
            helper = helper.into_iter().chain([h]).min();
        }
    }
    THROW_ENTRIES.iter().zip(seen).find_map(|(t, s)| s.then(|| (*t).to_owned())).or(helper)
}

/// `std::__throw_NAME` for the mangled name of one of libstdc++'s throw
/// helpers (`_ZSt24__throw_invalid_argumentPKc`).
fn std_throw_helper(mangled: &str) -> Option<String> {
    let rest = mangled.strip_prefix("_ZSt")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let len: usize = rest[..digits].parse().ok()?;
    let ident = rest.get(digits..digits + len)?;
    ident.starts_with("__throw_").then(|| format!("std::{ident}"))
}

/// `path` with symbolic links resolved — except under `/proc`, whose
/// `PID/root` and `PID/exe` links lead into another mount namespace that
/// resolving them by name would leave.
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    if path.starts_with("/proc") {
        std::fs::metadata(path)?;
        return Ok(path.to_owned());
    }
    path.canonicalize()
}

/// One name found for an address, before aliases are merged.
struct Name {
    raw: String,
    /// The symbol version, and whether it is hidden (not the default one
    /// a new link would bind to: `name@VER` rather than `name@@VER`).
    version: Option<(String, bool)>,
    size: u64,
}

impl Name {
    /// How a user would name the function: public names before reserved
    /// ones (`free` before `__libc_free`, `getpid` before `__getpid`),
    /// default versions before hidden ones (`pthread_mutex_unlock@@` before
    /// `__pthread_mutex_unlock@`); otherwise the first seen (`.symtab`
    /// before `.dynsym`). Lower is better.
    fn rank(&self) -> (bool, bool) {
        (
            self.raw.starts_with('_') && !self.raw.starts_with("_Z") && !self.raw.starts_with("_R"),
            self.version.as_ref().is_some_and(|(_, hidden)| *hidden),
        )
    }

    /// The raw name, and with its version as `nm -D` prints it.
    fn spellings(&self) -> Vec<String> {
        let mut out = vec![self.raw.clone()];
        if let Some((version, hidden)) = &self.version {
            let at = if *hidden { "@" } else { "@@" };
            out.push(format!("{}{at}{version}", self.raw));
        }
        out
    }
}

/// Defined function symbols (from `.symtab` and `.dynsym`, and the
/// `.symtab` of a separate debug file), one per address, with file offsets
/// (from the binary's segments: a debug file has none with contents).
/// Aliases — several names for one address, as the C library has (`free`,
/// `cfree`, `__libc_free`) — are kept for matching, and the address is
/// shown under its most public name.
fn function_symbols(
    file: &object::File<'_>,
    data: &[u8],
    separate: Option<&object::File<'_>>,
) -> Vec<Symbol> {
    let segments: Vec<(u64, u64, u64)> = file
        .segments()
        .filter_map(|s| {
            let (offset, size) = s.file_range();
            (size > 0).then_some((s.address(), size, offset))
        })
        .collect();
    let file_offset = |address: u64| {
        segments
            .iter()
            .find(|(start, size, _)| address >= *start && address < start + size)
            .map(|(start, _, offset)| address - start + offset)
    };
    let versions = dynamic_versions(data);
    let mut by_address: HashMap<u64, usize> = HashMap::new();
    let mut names: Vec<(u64, Vec<Name>)> = Vec::new();
    let symtab = file.symbols().map(|s| (s, false));
    #[allow(
        clippy::redundant_closure_for_method_calls,
        reason = "the method path cannot unify the two files' lifetimes"
    )]
    let debug_symtab = separate.into_iter().flat_map(|f| f.symbols()).map(|s| (s, false));
    let dynsym = file.dynamic_symbols().map(|s| (s, true));
    for (sym, dynamic) in symtab.chain(debug_symtab).chain(dynsym) {
        if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.address() == 0 {
            continue;
        }
        // An IFUNC symbol names the resolver, not the function users mean.
        if let SymbolFlags::Elf { st_info, .. } = sym.flags()
            && st_info & 0xf == elf::STT_GNU_IFUNC
        {
            continue;
        }
        let Ok(raw) = sym.name() else { continue };
        if raw.is_empty() || file_offset(sym.address()).is_none() {
            continue;
        }
        let (raw, version) =
            if dynamic { (raw, versions.get(&sym.index().0).cloned()) } else { split_version(raw) };
        let name = Name { raw: raw.to_owned(), version, size: sym.size() };
        let slot = *by_address.entry(sym.address()).or_insert_with(|| {
            names.push((sym.address(), Vec::new()));
            names.len() - 1
        });
        let list = &mut names[slot].1;
        match list.iter_mut().find(|n| n.raw == name.raw) {
            // The same name in both tables: keep the version.
            Some(seen) => {
                if seen.version.is_none() {
                    seen.version = name.version;
                }
            }
            None => list.push(name),
        }
    }
    let mut out: Vec<Symbol> = names
        .into_iter()
        .filter_map(|(address, list)| {
            let best = list.iter().enumerate().min_by_key(|(i, n)| (n.rank(), *i))?.1;
            let (name, short) = demangle(&best.raw);
            let mut aliases: Vec<String> = list.iter().flat_map(Name::spellings).collect();
            aliases.extend(name.strip_suffix(DELETING).map(str::to_owned));
            aliases.dedup();
            Some(Symbol {
                raw: best.raw.clone(),
                name,
                short,
                address,
                offset: file_offset(address)?,
                size: list.iter().map(|n| n.size).max().unwrap_or(0),
                aliases,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name).then(a.address.cmp(&b.address)));
    out
}

/// A `.symtab` name with its version written in (`pthread_join@@GLIBC_2.34`,
/// as the C library's symbol table and its debug file have them) split
/// into the name and the version (hidden with a single `@`), so it merges
/// with the same function's `.dynsym` entry.
fn split_version(raw: &str) -> (&str, Option<(String, bool)>) {
    match raw.split_once('@') {
        Some((name, version)) if !name.is_empty() => match version.strip_prefix('@') {
            Some(default) => (name, Some((default.to_owned(), false))),
            None => (name, Some((version.to_owned(), true))),
        },
        _ => (raw, None),
    }
}

/// Symbol versions of `.dynsym` entries by symbol index: the version name
/// and whether it is hidden.
fn dynamic_versions(data: &[u8]) -> HashMap<usize, (String, bool)> {
    let mut out = HashMap::new();
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(data) else { return out };
    let endian = elf.endian();
    let sections = elf.elf_section_table();
    let Ok(Some(table)) = sections.versions(endian, data) else { return out };
    let Ok(symbols) = sections.symbols(endian, data, elf::SHT_DYNSYM) else { return out };
    for index in 0..symbols.len() {
        let v = table.version_index(endian, object::SymbolIndex(index));
        if let Ok(Some(version)) = table.version(v) {
            let name = String::from_utf8_lossy(version.name()).into_owned();
            out.insert(index, (name, v.is_hidden()));
        }
    }
    out
}

/// Demangles Rust (legacy and v0) and C++ names. Returns the display name
/// and, for C++, the name without its parameter list. A C++ deleting
/// destructor is named apart ([`DELETING`]).
pub fn demangle(raw: &str) -> (String, Option<String>) {
    if is_rust_symbol(raw)
        && let Ok(d) = rustc_demangle::try_demangle(raw)
    {
        return (format!("{d:#}"), None);
    }
    if raw.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(raw)
        && let Ok(full) = sym.demangle(&cpp_demangle::DemangleOptions::default())
    {
        let short = strip_params(&full);
        if raw.ends_with("D0Ev") && short.as_deref().is_some_and(is_destructor) {
            return (format!("{full}{DELETING}"), short);
        }
        return (full, short);
    }
    (raw.to_owned(), None)
}

/// What the display name of a C++ deleting destructor (the Itanium ABI's
/// `D0`: the complete destructor, then `operator delete`) ends with.
/// Demangled, it reads like the complete destructor (`D1`) it calls —
/// `Cache::~Cache()` both, as c++filt prints them — so a report naming
/// both could not say which ran, nor that one call is inside the other.
/// Patterns still match it by the plain name (`names_of`, the symbol's
/// aliases): `-t 'Cache::~Cache()'` traces both.
pub const DELETING: &str = " [deleting]";

/// Whether a C++ name without its parameters is a destructor's
/// (`ns::Cache<int>::~Cache`).
fn is_destructor(short: &str) -> bool {
    short.rsplit("::").next().is_some_and(|last| last.starts_with('~'))
}

pub(super) fn is_rust_symbol(raw: &str) -> bool {
    if raw.starts_with("_R") {
        return true;
    }
    // Legacy mangling ends with a 17h<16 hex digits>E hash segment.
    let Some(body) = raw.strip_suffix('E') else { return false };
    body.len() > 19
        && body[body.len() - 19..].starts_with("17h")
        && body[body.len() - 16..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// The names a function of the session's table answers to, as `--trace`
/// matches them: its demangled name, its symbol, and for C++ its name
/// without the parameter list (`handle_request(int)` is also
/// `handle_request`).
pub fn names_of(f: &crate::model::Function) -> Vec<String> {
    let mut names = vec![f.name.clone(), f.symbol.clone()];
    names.extend(f.name.strip_suffix(DELETING).map(str::to_owned));
    names.extend(strip_params(&f.name));
    names
}

/// "ns::Cache::get(int) const" -> "ns::Cache::get" (a deleting
/// destructor's [`DELETING`] left out).
fn strip_params(full: &str) -> Option<String> {
    let full = full.strip_suffix(DELETING).unwrap_or(full);
    let trimmed = full.trim_end_matches(" const").trim_end_matches(" volatile");
    if !trimmed.ends_with(')') {
        return None;
    }
    let mut depth = 0i32;
    for (i, c) in trimmed.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(trimmed[..i].to_owned());
                }
            }
            _ => {}
        }
    }
    None
}

fn dynamic_entries(data: &[u8], path: &Path) -> (Vec<String>, Vec<PathBuf>) {
    let mut needed = Vec::new();
    let mut runpath = Vec::new();
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(data) else {
        return (needed, runpath);
    };
    let endian = elf.endian();
    let sections = elf.elf_section_table();
    let Ok(Some((dyns, link))) = sections.dynamic(endian, data) else {
        return (needed, runpath);
    };
    let Ok(strings) = sections.strings(endian, data, link) else {
        return (needed, runpath);
    };
    let origin = path.parent().unwrap_or(Path::new("/"));
    for d in dyns {
        let tag = d.d_tag(endian);
        if tag != elf::DT_NEEDED && tag != elf::DT_RUNPATH && tag != elf::DT_RPATH {
            continue;
        }
        let Ok(value) = d.string(endian, strings) else { continue };
        let value = String::from_utf8_lossy(value).into_owned();
        if tag == elf::DT_NEEDED {
            needed.push(value);
        } else {
            for dir in value.split(':').filter(|d| !d.is_empty()) {
                let dir = dir.replace("$ORIGIN", &origin.to_string_lossy());
                runpath.push(PathBuf::from(dir.replace("${ORIGIN}", &origin.to_string_lossy())));
            }
        }
    }
    (needed, runpath)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_cpp_with_and_without_params() {
        let (full, short) = demangle("_ZN5Cache3getEi");
        assert_eq!(full, "Cache::get(int)");
        assert_eq!(short.as_deref(), Some("Cache::get"));
    }

    /// The deleting destructor (`D0`) is named apart from the complete
    /// (`D1`) and base (`D2`) ones, and still answers to their name; a
    /// function whose own name ends in `D0` is not a destructor.
    #[test]
    fn a_deleting_destructor_is_named_apart() {
        let plain = |raw: &str| demangle(raw).0;
        assert_eq!(plain("_ZN5CacheD1Ev"), "Cache::~Cache()");
        assert_eq!(plain("_ZN5CacheD2Ev"), "Cache::~Cache()");
        assert_eq!(
            demangle("_ZN5CacheD0Ev"),
            ("Cache::~Cache() [deleting]".to_owned(), Some("Cache::~Cache".to_owned()))
        );
        assert_eq!(plain("_ZN2ns5CacheIiED0Ev"), "ns::Cache<int>::~Cache() [deleting]");
        assert_eq!(demangle("_ZN1a3xD0Ev"), ("a::xD0()".to_owned(), Some("a::xD0".to_owned())));
        let mut f = crate::model::testing::function(0, "Cache::~Cache() [deleting]");
        f.symbol = "_ZN5CacheD0Ev".to_owned();
        assert_eq!(
            names_of(&f),
            ["Cache::~Cache() [deleting]", "_ZN5CacheD0Ev", "Cache::~Cache()", "Cache::~Cache"]
        );
    }

    #[test]
    fn demangles_legacy_rust_without_hash() {
        let (name, short) = demangle("_ZN4core3fmt5write17h0123456789abcdefE");
        assert_eq!(name, "core::fmt::write");
        assert_eq!(short, None);
    }

    #[test]
    fn libstdcxx_throw_helpers_are_named_and_nothing_else_is() {
        assert_eq!(
            std_throw_helper("_ZSt24__throw_invalid_argumentPKc").as_deref(),
            Some("std::__throw_invalid_argument")
        );
        assert_eq!(
            std_throw_helper("_ZSt24__throw_out_of_range_fmtPKcz").as_deref(),
            Some("std::__throw_out_of_range_fmt")
        );
        assert_eq!(std_throw_helper("_ZSt4endlIcSt11char_traitsIcEE"), None);
        assert_eq!(std_throw_helper("_ZSt99__throw_short"), None);
        assert_eq!(std_throw_helper("_ZN3app8__throw_Ev"), None);
        assert_eq!(std_throw_helper("__throw_invalid_argument"), None);
    }

    #[test]
    fn versions_written_into_symtab_names_are_split_off() {
        assert_eq!(
            split_version("pthread_join@@GLIBC_2.34"),
            ("pthread_join", Some(("GLIBC_2.34".to_owned(), false)))
        );
        assert_eq!(
            split_version("pthread_join@GLIBC_2.2.5"),
            ("pthread_join", Some(("GLIBC_2.2.5".to_owned(), true)))
        );
        assert_eq!(split_version("handle_request"), ("handle_request", None));
    }

    #[test]
    fn leaves_c_names_alone() {
        assert_eq!(demangle("cache_get"), ("cache_get".to_owned(), None));
    }
}
