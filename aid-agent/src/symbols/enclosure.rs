//! Whether an executable's own code can run on a thread outside the
//! function the thread runs: `main` on the main thread, the start routine
//! on a thread the program created. When it cannot, a call with no traced
//! caller on such a thread was made within that function, and the report
//! can name it as the outermost caller ("SlaveStart from main") although
//! aid never traced it.
//!
//! Read from the ELF file alone, and refused whenever the file leaves a
//! way open: code the loader runs before `main` (`.preinit_array`,
//! `.init_array` and `.ctors` entries other than the compiler's own,
//! `IFUNC` resolvers), code run after `main` returns (`.fini_array` and
//! `.dtors` entries other than the compiler's, exit handlers registered
//! through `atexit`, `__cxa_atexit` or `on_exit`), code run after a start
//! routine returns (thread-specific data destructors, C++ `thread_local`
//! destructors), and functions other objects can call by name (exported
//! ones). A static executable is refused as a whole: its imports cannot be
//! seen. What the file cannot show, a library calling a function pointer
//! it was given after `main` returned, is not checked (docs/report-format.md).

use std::{
    collections::{BTreeSet, HashMap},
    path::Path,
};

use object::{
    Object as _, ObjectSection as _, ObjectSymbol as _, SymbolKind, read::elf::ElfFile64,
};

/// The entries the C runtime's own start files put in the constructor and
/// destructor arrays (crtbegin's `frame_dummy` and
/// `__do_global_dtors_aux`): they call no code of the program's.
const RUNTIME_ENTRIES: [&str; 2] = ["frame_dummy", "__do_global_dtors_aux"];

/// Imports through which a program has code run after `main` returns
/// (glibc's `atexit` is linked into the executable as a call to
/// `__cxa_atexit`), or at `quick_exit`, or for `thread_local` objects.
const AFTER_MAIN: [&str; 7] = [
    "atexit",
    "__cxa_atexit",
    "on_exit",
    "at_quick_exit",
    "__cxa_at_quick_exit",
    "__cxa_thread_atexit",
    "__cxa_thread_atexit_impl",
];

/// Imports through which a program has code run on a thread after its
/// start routine returned.
const AFTER_START_ROUTINE: [&str; 4] =
    ["pthread_key_create", "tss_create", "__cxa_thread_atexit", "__cxa_thread_atexit_impl"];

/// The ELF section arrays the loader and `exit` call entries of.
const ARRAYS: [&str; 5] = [".preinit_array", ".init_array", ".fini_array", ".ctors", ".dtors"];

/// `STT_GNU_IFUNC`: a symbol whose resolver the loader calls before `main`.
const STT_GNU_IFUNC: u8 = 10;

/// What an executable lets run outside its threads' functions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Enclosure {
    /// Every call of the executable's own (unexported) code on the main
    /// thread is made within `main`.
    pub main: bool,
    /// Every call of its own (unexported) code on a thread whose start
    /// routine is one of its functions is made within that routine.
    pub threads: bool,
    /// Its functions other objects can call by name (defined dynamic
    /// symbols), which may be called from anywhere.
    exported: BTreeSet<String>,
    /// Its function symbols, as written in the file and demangled.
    defined: BTreeSet<String>,
}

impl Enclosure {
    /// The executable at `path`; None when it cannot be read or parsed, or
    /// is not one with a `main`.
    pub fn of(path: &Path) -> Option<Enclosure> {
        let data = std::fs::read(path).ok()?;
        let file = ElfFile64::<object::Endianness>::parse(data.as_slice()).ok()?;
        Enclosure::from_file(&file)
    }

    fn from_file(file: &ElfFile64<'_, object::Endianness>) -> Option<Enclosure> {
        let mut by_address: HashMap<u64, String> = HashMap::new();
        let mut defined = BTreeSet::new();
        let mut ifunc = false;
        for s in file.symbols() {
            let Ok(name) = s.name() else { continue };
            ifunc |= s.elf_symbol().st_type() == STT_GNU_IFUNC && !s.is_undefined();
            if s.kind() == SymbolKind::Text && !s.is_undefined() && !name.is_empty() {
                by_address.insert(s.address(), name.to_owned());
                defined.insert(name.to_owned());
                // Threads are named as functions are shown: demangled.
                defined.insert(super::elf::demangle(name).0);
            }
        }
        if !defined.contains("main") {
            return None;
        }
        let mut imports = BTreeSet::new();
        let mut exported = BTreeSet::new();
        for s in file.dynamic_symbols() {
            let Ok(name) = s.name() else { continue };
            ifunc |= s.elf_symbol().st_type() == STT_GNU_IFUNC && !s.is_undefined();
            if s.is_undefined() {
                imports.insert(name.to_owned());
            } else if s.kind() == SymbolKind::Text {
                exported.insert(name.to_owned());
            }
        }
        // A static executable has no dynamic section: its exit handlers
        // and thread destructors cannot be seen.
        let dynamic = file.section_by_name(".dynamic").is_some();
        let relocated: HashMap<u64, u64> = file
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .filter_map(|(at, r)| u64::try_from(r.addend()).ok().map(|a| (at, a)))
            .collect();
        let runtime_only = ARRAYS.iter().all(|name| {
            let Some(section) = file.section_by_name(name) else { return true };
            let Ok(bytes) = section.data() else { return false };
            bytes.chunks(8).enumerate().all(|(i, chunk)| {
                let Ok(raw) = <[u8; 8]>::try_from(chunk) else { return false };
                let mut value = u64::from_le_bytes(raw);
                if value == 0 {
                    // Position-independent: the loader writes the address.
                    let at = section.address() + 8 * i as u64;
                    value = relocated.get(&at).copied().unwrap_or(0);
                }
                // `.ctors` and `.dtors` start with -1 and end with 0.
                value == 0
                    || value == u64::MAX
                    || by_address.get(&value).is_some_and(|n| RUNTIME_ENTRIES.contains(&n.as_str()))
            })
        });
        let imports_any = |names: &[&str]| names.iter().any(|n| imports.contains(*n));
        Some(Enclosure {
            main: dynamic && runtime_only && !ifunc && !imports_any(&AFTER_MAIN),
            threads: dynamic && !imports_any(&AFTER_START_ROUTINE),
            exported,
            defined,
        })
    }

    /// Whether other objects can call `symbol` by name.
    pub fn exported(&self, symbol: &str) -> bool {
        self.exported.contains(symbol)
    }

    /// Whether `symbol` (raw or demangled) is one of the executable's
    /// functions.
    pub fn defines(&self, symbol: &str) -> bool {
        self.defined.contains(symbol)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Compiles `source` (C) with `cc`, `flags` and `-pthread` into a
    /// temporary directory; None when no C compiler is installed.
    fn build(source: &str, flags: &[&str]) -> Option<(tempfile::TempDir, PathBuf)> {
        let flags: Vec<&str> = flags.iter().copied().chain(["-pthread"]).collect();
        crate::symbols::compiled("cc", "p.c", source, &flags)
    }

    const PLAIN: &str = "#include <pthread.h>\n\
        static void *work(void *a) { return a; }\n\
        int main(void) { pthread_t t; pthread_create(&t, 0, work, 0); pthread_join(t, 0); return 0; }\n";

    #[test]
    fn a_plain_program_runs_its_code_within_main_and_its_start_routines() {
        for flags in [&["-O0"][..], &["-O0", "-no-pie"][..]] {
            let Some((_dir, exe)) = build(PLAIN, flags) else {
                panic!("the C compiler (cc) is needed: `cargo xtask setup` installs it")
            };
            let e = Enclosure::of(&exe).expect("an executable with main");
            assert!(e.main, "{flags:?}: {e:?}");
            assert!(e.threads, "{flags:?}");
            assert!(e.defines("work") && e.defines("main"));
            assert!(!e.exported("work"));
        }
    }

    #[test]
    fn constructors_exit_handlers_and_thread_destructors_are_ways_out() {
        let with = |extra: &str| format!("#include <stdlib.h>\n{PLAIN}{extra}\n");
        let ctor = with("__attribute__((constructor)) static void early(void) {}");
        let dtor = with("__attribute__((destructor)) static void late(void) {}");
        let exit = with("static void bye(void) {}\nint reg(void) { return atexit(bye); }");
        let key =
            with("static pthread_key_t k;\nint mk(void) { return pthread_key_create(&k, free); }");
        for (source, main, threads) in
            [(ctor, false, true), (dtor, false, true), (exit, false, true), (key, true, false)]
        {
            let Some((_dir, exe)) = build(&source, &["-O0"]) else {
                panic!("the C compiler (cc) is needed: `cargo xtask setup` installs it")
            };
            let e = Enclosure::of(&exe).expect("an executable with main");
            assert_eq!((e.main, e.threads), (main, threads), "{source}");
        }
    }

    #[test]
    fn exported_functions_may_be_called_from_anywhere_and_static_programs_are_refused() {
        let Some((_dir, exe)) = build(PLAIN, &["-O0", "-rdynamic"]) else {
            panic!("the C compiler (cc) is needed: `cargo xtask setup` installs it")
        };
        let e = Enclosure::of(&exe).expect("an executable with main");
        assert!(e.exported("main"));
        // Static: no imports to read. Skipped where no static libc exists.
        if let Some((_dir, exe)) = build(PLAIN, &["-O0", "-static"]) {
            let e = Enclosure::of(&exe).expect("an executable with main");
            assert!(!e.main && !e.threads, "{e:?}");
        }
    }

    /// A C++ start routine is known by its demangled name, as threads are
    /// named.
    #[test]
    fn a_cpp_start_routine_is_known_demangled() {
        let body = PLAIN.replace("static void *work", "void *work");
        let (_dir, exe) = crate::symbols::compiled("c++", "p.cpp", &body, &["-O0", "-pthread"])
            .expect("the C++ compiler (c++) is needed: `cargo xtask setup` installs it");
        let e = Enclosure::of(&exe).expect("an executable with main");
        assert!(e.defines("work(void*)") && e.defines("_Z4workPv"), "{e:?}");
        assert!(e.main && e.threads, "{e:?}");
    }

    #[test]
    fn a_library_or_a_missing_file_has_no_enclosure() {
        assert_eq!(Enclosure::of(Path::new("/nonexistent/aid")), None);
    }
}
