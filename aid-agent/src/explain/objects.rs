//! The explainers' object names, which mean the same object in every run
//! (spec §0). Seed 002 assumes addresses are stable across runs; ours are
//! not (ASLR, a heap that depends on timing), so every pointer a traced
//! call passes or returns is named, by the identity rules of
//! [`identity`](crate::model::identity):
//!
//! - a global by `symbol+offset`, when the address falls inside a data
//!   symbol of the executable (the module is implicit: only the
//!   executable's symbols are read);
//! - anything else by its first appearance in the run,
//!   `role:function#k.argN` (or `.ret` for a returned pointer), the role by
//!   its [`RoleNames`] name;
//! - a `free` (or `realloc`'s old pointer) ends the object: the same
//!   address seen later is a new object, named by its new first appearance.
//!
//! Globals need the executable's load address in each run, which a session
//! does not store. It is recovered from aid's own `pthread_create` probe:
//! the start routine passed to it is a runtime address of a function whose
//! name the thread carries, so their difference is the load bias. A program
//! that creates no threads from its own functions (or is not PIE) gets bias
//! 0, and for a PIE that means globals fall back to first-appearance names.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use object::{Object as _, ObjectKind, ObjectSymbol as _, SymbolKind};

use crate::model::{
    Call, Function, Run, ValueKind,
    identity::{FirstAppearances, RoleNames, Slot, USER_HIGH, frees, is_pointer},
};
use crate::symbols::touches::{Touches, touches};

/// Data symbols of the traced executable, for naming globals.
#[derive(Clone, Debug, Default)]
pub struct Globals {
    /// Position-independent: runtime addresses are ELF addresses + bias.
    pie: bool,
    /// (ELF address, size, name), sorted by address.
    data: Vec<(u64, u64, String)>,
    /// Function name → ELF address, to find the load bias.
    text: HashMap<String, u64>,
    /// The executable, whose DWARF places a member (`savings.balance`)
    /// when one is asked for.
    program: Option<PathBuf>,
}

impl Globals {
    /// Reads the executable's symbol table. `None` when it cannot be read
    /// (moved, deleted): every object is then named by first appearance.
    pub fn load(program: &Path) -> Option<Globals> {
        let bytes = std::fs::read(program).ok()?;
        let file = object::File::parse(&*bytes).ok()?;
        let mut data = Vec::new();
        let mut text = HashMap::new();
        for sym in file.symbols() {
            let Ok(name) = sym.name() else { continue };
            if name.is_empty() || !sym.is_definition() {
                continue;
            }
            match sym.kind() {
                SymbolKind::Data => data.push((sym.address(), sym.size(), name.to_owned())),
                SymbolKind::Text => {
                    text.entry(name.to_owned()).or_insert(sym.address());
                }
                _ => {}
            }
        }
        data.sort_unstable();
        let pie = file.kind() != ObjectKind::Executable;
        Some(Globals { pie, data, text, program: Some(program.to_owned()) })
    }

    /// The executable's load bias in `run`, when it can be known.
    pub fn bias(&self, run: &Run, functions: &[Function]) -> Option<u64> {
        if !self.pie {
            return Some(0);
        }
        let creates: Vec<&Call> = run
            .calls
            .iter()
            .filter(|c| {
                functions
                    .get(c.func as usize)
                    .is_some_and(|f| f.internal && f.name == "pthread_create")
            })
            .collect();
        for t in &run.threads {
            let Some(&elf) = self.text.get(&t.name) else { continue };
            for c in &creates {
                let bias = (c.args[2] as u64).wrapping_sub(elf);
                if bias.is_multiple_of(4096) && bias < USER_HIGH as u64 {
                    return Some(bias);
                }
            }
        }
        None
    }

    /// `symbol+offset` for a runtime address inside a data symbol.
    pub fn name(&self, address: u64, bias: u64) -> Option<String> {
        let elf = address.checked_sub(bias)?;
        let i = self.data.partition_point(|(a, _, _)| *a <= elf);
        let (start, size, name) = self.data.get(i.checked_sub(1)?)?;
        let off = elf - start;
        if off >= (*size).max(1) {
            return None;
        }
        Some(if off == 0 { name.clone() } else { format!("{name}+{off:#x}") })
    }

    /// The ELF address and remaining size of a global named as [`Globals::name`]
    /// names it (`symbol` or `symbol+0x10`), or by a member of it
    /// ([`Globals::place`]).
    pub fn lookup(&self, name: &str) -> Option<(u64, u64)> {
        self.place(name).ok().flatten()
    }

    /// [`Globals::lookup`], saying why a member cannot be placed:
    /// `symbol`, `symbol+0x10`, or a member of the symbol's record, as C
    /// writes it (`savings.balance`, `savings.stats.count+0x8`), from the
    /// executable's DWARF. `Ok(None)` when there is no such symbol.
    pub fn place(&self, name: &str) -> Result<Option<(u64, u64)>, String> {
        let (base, off) = match name.split_once('+') {
            Some((s, o)) => {
                let off = o.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok());
                (s, off.ok_or_else(|| format!("`+{o}`: give the offset in hex, `+0x20`"))?)
            }
            None => (name, 0),
        };
        let symbol = |s: &str| self.data.iter().find(|(_, _, n)| n == s).map(|(a, z, _)| (*a, *z));
        // A symbol's own name may hold a dot (a static local: `count.0`).
        let (addr, size) = match (symbol(base), base.split_once('.')) {
            (Some(whole), _) => whole,
            (None, Some((var, members))) => {
                let Some((addr, _)) = symbol(var) else { return Ok(None) };
                let path: Vec<&str> = members.split('.').collect();
                let (at, size) = self.member(var, &path)?;
                (addr + at, size)
            }
            (None, None) => return Ok(None),
        };
        if off >= size.max(1) {
            return Err(format!("{base} is {size} bytes: +{off:#x} is past its end"));
        }
        Ok(Some((addr + off, size - off)))
    }

    /// Where `path` lies in global `var`: (offset, size), from DWARF.
    fn member(&self, var: &str, path: &[&str]) -> Result<(u64, u64), String> {
        self.with_file(|file| crate::symbols::member_of(file, var, path))?
    }

    /// Which bytes of the global symbol `name` the executable's own code
    /// reads and writes, from its instructions ([`touches`]); `Ok(None)`
    /// when there is no such symbol.
    pub fn touched(&self, name: &str) -> Result<Option<Touches>, String> {
        let Some(&(addr, size, _)) = self.data.iter().find(|(_, _, n)| n == name) else {
            return Ok(None);
        };
        self.with_file(|file| Some(touches(file, addr, size)))
    }

    /// The member of global `var` that holds bytes `offset` to `offset +
    /// len`, from DWARF ([`crate::symbols::member_at`]).
    pub fn member_at(&self, var: &str, offset: u64, len: u64) -> Option<String> {
        self.with_file(|file| crate::symbols::member_at(file, var, offset, len)).ok().flatten()
    }

    /// `f` over the executable, read and parsed anew.
    fn with_file<T>(&self, f: impl FnOnce(&object::File<'_>) -> T) -> Result<T, String> {
        let program = self.program.as_deref().ok_or("the executable is not known")?;
        let bytes = std::fs::read(program).map_err(|e| format!("{}: {e}", program.display()))?;
        let file =
            object::File::parse(&*bytes).map_err(|e| format!("{}: {e}", program.display()))?;
        Ok(f(&file))
    }

    /// Data symbols given directly (tests, and callers that read the
    /// symbol table themselves): (ELF address, size, name).
    pub fn new(pie: bool, data: Vec<(u64, u64, String)>) -> Globals {
        let mut data = data;
        data.sort_unstable();
        Globals { pie, data, text: HashMap::new(), program: None }
    }
}

/// The canonical name of every pointer each call of `run` passed or
/// returned: `names[call][slot]`.
pub fn name_pointers(
    run: &Run,
    functions: &[Function],
    roles: &RoleNames,
    globals: Option<&Globals>,
) -> Vec<Vec<(Slot, String)>> {
    let bias = globals.and_then(|g| g.bias(run, functions));
    // (time, order, call, what): appearances and frees in time order; at
    // equal times entries come before exits, as in the run.
    enum What {
        Seen(Slot, i64),
        Free(i64),
    }
    let mut steps: Vec<(u64, u8, usize, What)> = Vec::new();
    for (i, c) in run.calls.iter().enumerate() {
        let Some(f) = functions.get(c.func as usize) else { continue };
        if f.internal {
            continue;
        }
        for (a, ty) in f.params.iter().take(3).enumerate() {
            if is_pointer(*ty, c.args[a]) {
                steps.push((c.entry_ns, 0, i, What::Seen(Slot::Arg(a as u8), c.args[a])));
            }
        }
        if frees(f) && c.args[0] != 0 {
            steps.push((c.entry_ns, 1, i, What::Free(c.args[0])));
        }
        if let (Some(x), Some(r)) = (c.exit_ns, c.ret)
            && f.ret.kind == ValueKind::Pointer
            && r != 0
        {
            steps.push((x, 2, i, What::Seen(Slot::Ret, r)));
        }
    }
    steps.sort_by_key(|(t, order, call, _)| (*t, *order, *call));
    let mut objects: FirstAppearances<String> = FirstAppearances::default();
    let mut names: Vec<Vec<(Slot, String)>> = vec![Vec::new(); run.calls.len()];
    for (_, _, i, what) in steps {
        match what {
            What::Seen(slot, value) => {
                let name = objects
                    .see(value, || {
                        if let (Some(g), Some(b)) = (globals, bias)
                            && let Some(n) = g.name(value as u64, b)
                        {
                            return n;
                        }
                        let c = &run.calls[i];
                        let f = &functions[c.func as usize];
                        let at = match slot {
                            Slot::Arg(a) => format!("arg{a}"),
                            Slot::Ret => "ret".into(),
                        };
                        format!("{}:{}#{}.{at}", roles.name(c.role), f.name, c.instance)
                    })
                    .clone();
                names[i].push((slot, name));
            }
            What::Free(value) => objects.free(value),
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::testkit::{call, function, run_with};

    #[test]
    fn heap_objects_are_named_by_first_appearance_and_free_starts_a_new_one() {
        let fs = vec![
            function(0, "alloc_buf", &[], ValueKind::Pointer),
            function(1, "fill", &[ValueKind::Pointer, ValueKind::Signed], ValueKind::Signed),
            function(2, "free", &[ValueKind::Pointer], ValueKind::Void),
        ];
        let p = 0x5555_0000_1000;
        let run = run_with(
            &["main", "filler"],
            vec![
                call(0, 0, 1, 10, 20, [0, 0, 0], p),
                call(1, 1, 1, 30, 40, [p, 7, 0], 0),
                call(2, 0, 1, 50, 60, [p, 0, 0], 0),
                call(1, 1, 2, 70, 80, [p, 8, 0], 0),
            ],
        );
        let roles = RoleNames::of(&run);
        let names = name_pointers(&run, &fs, &roles, None);
        assert_eq!(names[0], vec![(Slot::Ret, "main:alloc_buf#1.ret".to_owned())]);
        assert_eq!(names[1], vec![(Slot::Arg(0), "main:alloc_buf#1.ret".to_owned())]);
        assert_eq!(names[2], vec![(Slot::Arg(0), "main:alloc_buf#1.ret".to_owned())]);
        // After the free the same address is another object.
        assert_eq!(names[3], vec![(Slot::Arg(0), "filler:fill#2.arg0".to_owned())]);
    }

    #[test]
    fn globals_are_named_by_symbol_and_offset_with_the_load_bias() {
        let g = Globals {
            pie: true,
            data: vec![(0x40c0, 8, "events".into()), (0x4100, 16, "plan".into())],
            text: [("first_worker".to_owned(), 0x1357)].into(),
            program: None,
        };
        let fs = vec![Function {
            internal: true,
            ..function(0, "pthread_create", &[ValueKind::Unknown; 3], ValueKind::Signed)
        }];
        let bias = 0x560d_1fd3_a000_u64;
        let mut run = run_with(
            &["main", "first_worker"],
            vec![call(0, 0, 1, 1, 2, [0x7ffc_0000_0010, 0, (bias + 0x1357) as i64], 0)],
        );
        run.threads[1].name = "first_worker".into();
        assert_eq!(g.bias(&run, &fs), Some(bias));
        assert_eq!(g.name(bias + 0x40c0, bias).as_deref(), Some("events"));
        assert_eq!(g.name(bias + 0x4108, bias).as_deref(), Some("plan+0x8"));
        assert_eq!(g.name(bias + 0x40c8, bias), None);
    }
}
