//! Resolving `--trace` patterns against the real C library: versioned
//! dynamic symbols and aliases at one address (issue 10). `nm -D` is the
//! independent witness of where each symbol is. And which functions call
//! which, from DWARF.

use std::process::Command;

use crate::common::*;
use aid::{explain::objects::Globals, symbols::Resolver};

/// The address `nm -D` gives for `symbol` (e.g. `free@@GLIBC_2.2.5`,
/// matched on the name before the version) in the C library the fixture
/// uses, with the full versioned name.
fn nm_default_version(libc: &std::path::Path, name: &str) -> (u64, String) {
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(libc).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (addr, _, sym) = (parts.next()?, parts.next()?, parts.next()?);
            let (bare, _) = sym.split_once("@@")?;
            (bare == name).then(|| (u64::from_str_radix(addr, 16).unwrap(), sym.to_owned()))
        })
        .next()
        .unwrap_or_else(|| panic!("nm -D lists no default version of {name}"))
}

fn resolve_one(r: &mut Resolver, pattern: &str) -> aid::model::Function {
    let found = r.resolve(&[pattern.to_owned()]).unwrap_or_else(|e| panic!("{pattern}: {e}"));
    assert_eq!(
        found.len(),
        1,
        "{pattern} matched {:?}",
        found.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    found.into_iter().next().unwrap()
}

#[test]
fn libc_names_match_their_versioned_symbols() {
    let exe = c_fixture("noise_only.c", "noise_only_symbols", &[]);
    let mut r = Resolver::for_executable(&exe).unwrap();
    for name in ["pthread_mutex_unlock", "pthread_mutex_lock", "free", "getpid"] {
        let f = resolve_one(&mut r, &format!("libc:{name}"));
        let (address, versioned) = nm_default_version(&f.module, name);
        assert_eq!(f.address, address, "libc:{name} resolved to {} at {:#x}", f.name, f.address);
        // Shown under the public name, not an alias (`__getpid`, `cfree`).
        assert_eq!(f.name, name);
        // The versioned spelling names the same function.
        let again = resolve_one(&mut r, &format!("libc:{versioned}"));
        assert_eq!(again.address, address, "libc:{versioned}");
    }
}

/// Every alias of an address still matches it: `__libc_free` is `free`.
#[test]
fn aliases_match_the_function_they_name() {
    let exe = c_fixture("noise_only.c", "noise_only_aliases", &[]);
    let mut r = Resolver::for_executable(&exe).unwrap();
    let free = resolve_one(&mut r, "libc:free");
    let alias = resolve_one(&mut r, "libc:__libc_free");
    assert_eq!((alias.address, alias.name.as_str()), (free.address, "free"));
}

/// Which functions call which, from DWARF's call-site entries (an
/// optimised build has them): in pointee.c at `-O1`, `main` calls `find`,
/// `book`, `issue` and `stock` directly, and nothing else calls them; an
/// unoptimised build has no call sites, so no callers.
#[test]
fn callers_come_from_dwarf_call_sites() {
    let optimised = c_fixture("pointee.c", "pointee_o1", &["-O1"]);
    let mut r = Resolver::for_executable(&optimised).unwrap();
    let main = resolve_one(&mut r, "main").address;
    for name in ["find", "book", "issue", "stock"] {
        let f = resolve_one(&mut r, name);
        assert_eq!(r.executable().callers(f.address), [main], "{name}");
    }
    assert!(r.executable().callers(main).is_empty());
    let plain = c_fixture("pointee.c", "pointee_o0", &[]);
    let mut r = Resolver::for_executable(&plain).unwrap();
    let find = resolve_one(&mut r, "find");
    assert!(r.executable().callers(find.address).is_empty());
}

/// A member of a global, as C writes it (`ledger.balance`), is placed from
/// the executable's DWARF (issue 23: `watch --object savings` watched the
/// mutex at the start of the record, never the balance). In lock_order.c
/// `struct account { pthread_mutex_t lock; long balance; }`: on x86-64
/// glibc the mutex is 40 bytes, so the balance lies at +40, 8 bytes.
#[test]
fn a_member_of_a_global_is_placed_from_dwarf() {
    let exe = c_fixture("lock_order.c", "lock_order", &[]);
    let g = Globals::load(&exe).unwrap();
    let (ledger, size) = g.lookup("ledger").unwrap();
    assert_eq!(size, 48);
    assert_eq!(g.place("ledger.balance"), Ok(Some((ledger + 40, 8))));
    assert_eq!(g.lookup("vault.balance"), Some((g.lookup("vault").unwrap().0 + 40, 8)));
    assert_eq!(g.place("ledger.lock"), Ok(Some((ledger, 40))));
    assert_eq!(g.place("ledger.lock+0x8"), Ok(Some((ledger + 8, 32))));
    // Through the mutex's union: `__size` is its `char [40]`.
    assert_eq!(g.place("ledger.lock.__size"), Ok(Some((ledger, 40))));
    assert_eq!(
        g.place("ledger.nope"),
        Err("ledger has no member nope (its members: lock, balance)".to_owned())
    );
    assert_eq!(
        g.place("ledger.balance+0x8"),
        Err("ledger.balance is 8 bytes: +0x8 is past its end".to_owned())
    );
    assert_eq!(g.place("nowhere.balance"), Ok(None));
}

/// The reverse: which member holds some bytes of a global, for `watch`'s
/// words about the word it chose (ledger_fields.c: `savings` = {lock,
/// balance}, `totals` = {count, sum}). Bytes that span two members, or a
/// global that is no record, have no member.
#[test]
fn the_member_that_holds_some_bytes_of_a_global_comes_from_dwarf() {
    let exe = c_fixture("ledger_fields.c", "ledger_fields", &[]);
    let g = Globals::load(&exe).unwrap();
    assert_eq!(g.member_at("savings", 40, 8).as_deref(), Some("balance"));
    assert_eq!(g.member_at("savings", 44, 4).as_deref(), Some("balance"));
    assert_eq!(g.member_at("savings", 36, 8), None, "half the mutex, half the balance");
    // Down to the smallest member: the mutex's union, then its `__data`.
    assert_eq!(g.member_at("savings", 0, 40).as_deref(), Some("lock.__data"));
    assert_eq!(g.member_at("totals", 8, 8).as_deref(), Some("sum"));
    assert_eq!(g.member_at("totals", 4, 8), None);
    assert_eq!(g.member_at("nowhere", 0, 8), None);
}

/// Which bytes of a global the executable's code touches, from its
/// instructions, at -O0 and -O2 (ledger_fields.c): `savings`' balance
/// (+40, 8 bytes) read and written directly, its mutex (+0) only passed to
/// pthread_mutex_lock/unlock; `totals`' two fields, more than one word;
/// `shared`, whose address is passed to bump(), not known.
#[test]
fn the_bytes_a_global_s_code_touches_come_from_its_instructions() {
    for flags in [&[][..], &["-O2"][..]] {
        let exe = c_fixture("ledger_fields.c", "ledger_fields", flags);
        let g = Globals::load(&exe).unwrap();
        let savings = g.touched("savings").unwrap().unwrap();
        assert_eq!(savings.words.iter().copied().collect::<Vec<_>>(), [(40, 8)], "{flags:?}");
        assert_eq!(savings.locks.iter().copied().collect::<Vec<_>>(), [0], "{flags:?}");
        assert!(!savings.escapes, "{flags:?}");
        let at = g.lookup("savings").unwrap().0;
        assert_eq!(savings.one_word(at), Some((40, 8)), "{flags:?}");
        let totals = g.touched("totals").unwrap().unwrap();
        assert!(!totals.escapes, "{flags:?}");
        assert_eq!(totals.one_word(g.lookup("totals").unwrap().0), None, "{flags:?}: {totals:?}");
        let shared = g.touched("shared").unwrap().unwrap();
        assert!(shared.escapes, "{flags:?}");
        assert_eq!(g.touched("nowhere"), Ok(None));
    }
}
