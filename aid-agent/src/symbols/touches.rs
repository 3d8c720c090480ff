//! Which bytes of a global the executable's own code reads and writes,
//! from its instructions: so that `watch --object savings` watches the
//! balance the calls race on, not the mutex that opens the record.
//!
//! Every executable section is decoded in one linear sweep (what
//! compilers emit: code and padding, no data). An instruction whose
//! memory operand lands inside the object (`mov rax, [rip+savings+40]`,
//! or a register that holds the object's address, `[rax+40]`) touches
//! those bytes. Taking the object's address (`lea`, an absolute `mov`)
//! puts it in a register; the register may then be copied, be the base
//! of an access, or be passed to a synchronisation call of the C library
//! (`pthread_mutex_lock(&savings.lock)`: the lock's bytes, whose order
//! aid records from the calls themselves). Any other use — stored to
//! memory, passed to another function, returned, arithmetic on it, kept
//! across a jump — lets the address escape, and then which bytes are
//! touched is not known ([`Touches::escapes`]): the caller watches what
//! it would have without this analysis. The rule never leaves out a byte
//! the code reaches directly, so a watch of the bytes it names sees every
//! access of the program's own code to the object.

use std::collections::{BTreeSet, HashMap};

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};
use object::{
    Object as _, ObjectSection as _, ObjectSymbol as _, ObjectSymbolTable as _, RelocationTarget,
    SectionKind,
};

/// What the executable's code does with one global's bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touches {
    /// (offset from the object's start, length) of each access.
    pub words: BTreeSet<(u64, u64)>,
    /// Offsets whose address goes to a synchronisation call (a lock).
    pub locks: BTreeSet<u64>,
    /// The object's address escaped somewhere: which bytes are touched
    /// through it is not known.
    pub escapes: bool,
}

impl Touches {
    /// The one aligned word of 1, 2, 4 or 8 bytes (offset, length) that
    /// covers every byte the code touches, when the address never
    /// escaped and the touched bytes fit in one; `at` is the object's
    /// address (alignment is the address's, not the offset's).
    pub fn one_word(&self, at: u64) -> Option<(u64, u64)> {
        if self.escapes {
            return None;
        }
        let start = self.words.iter().map(|(o, _)| *o).min()?;
        let end = self.words.iter().map(|(o, l)| o + l).max()?;
        [1u64, 2, 4, 8].into_iter().find_map(|len| {
            // A word that would begin before the object is no word of it.
            let from = ((at + start) / len * len).checked_sub(at)?;
            (from + len >= end).then_some((from, len))
        })
    }
}

/// Function names whose pointer arguments are synchronisation objects.
const SYNC_PREFIXES: [&str; 8] = [
    "pthread_mutex_",
    "pthread_rwlock_",
    "pthread_spin_",
    "pthread_cond_",
    "pthread_barrier_",
    "sem_",
    "mtx_",
    "cnd_",
];

/// The bytes of the object at ELF address `at`, `size` bytes long, that
/// the code of `file` touches.
pub fn touches(file: &object::File<'_>, at: u64, size: u64) -> Touches {
    let calls = Callees::new(file);
    let mut out = Touches {
        escapes: file.architecture() != object::Architecture::X86_64
            || exported(file, at, size)
            || stored(file, at, size),
        ..Touches::default()
    };
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if section.kind() != SectionKind::Text || name.starts_with(".plt") {
            continue;
        }
        let Ok(bytes) = section.data() else {
            out.escapes = true;
            continue;
        };
        sweep(bytes, section.address(), (at, size), &calls, &mut out);
    }
    out
}

/// The object is in the dynamic symbol table: a shared library may reach
/// it by name.
fn exported(file: &object::File<'_>, at: u64, size: u64) -> bool {
    file.dynamic_symbols()
        .any(|s| s.is_definition() && s.address() >= at && s.address() < at + size.max(1))
}

/// The object's address is held in data: a pointer initialised to it
/// (`struct account *p = &savings`), a GOT slot (code built with `-fPIC`
/// reaches globals through one), found as a dynamic relocation that
/// resolves inside the object or as an aligned 8-byte value inside it in
/// any data section. A coincidental value only costs the analysis.
fn stored(file: &object::File<'_>, at: u64, size: u64) -> bool {
    let inside = |a: u64| a >= at && a < at + size.max(1);
    let dynsyms = file.dynamic_symbol_table();
    let relocated =
        file.dynamic_relocations().into_iter().flatten().any(|(_, r)| match r.target() {
            RelocationTarget::Absolute => inside(r.addend() as u64),
            RelocationTarget::Symbol(i) => {
                dynsyms.as_ref().and_then(|t| t.symbol_by_index(i).ok()).is_some_and(|s| {
                    s.is_definition() && inside(s.address().wrapping_add(r.addend() as u64))
                })
            }
            _ => false,
        });
    relocated
        || file.sections().any(|s| {
            let data = matches!(
                s.kind(),
                SectionKind::Data | SectionKind::ReadOnlyData | SectionKind::ReadOnlyDataWithRel
            ) || s.name().is_ok_and(|n| n.starts_with(".got") || n.ends_with("_array"));
            data && s.data().is_ok_and(|bytes| {
                let skip = (8 - s.address() % 8) % 8;
                bytes
                    .get(skip as usize..)
                    .unwrap_or(&[])
                    .chunks_exact(8)
                    .any(|w| inside(u64::from_le_bytes(w.try_into().expect("8 bytes"))))
            })
        })
}

/// One linear sweep over a section's instructions.
fn sweep(bytes: &[u8], ip: u64, (at, size): (u64, u64), calls: &Callees, out: &mut Touches) {
    let inside = |a: u64| a >= at && a < at + size.max(1);
    let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut ins = Instruction::default();
    // Full register → offset into the object of the address it holds.
    let mut held: HashMap<Register, u64> = HashMap::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut ins);
        // The register read as an access's base: not an escape.
        let mut based = None;
        let mut gained: Option<(Register, u64)> = None;
        for i in 0..ins.op_count() {
            if ins.op_kind(i) != OpKind::Memory {
                continue;
            }
            let lea = ins.mnemonic() == Mnemonic::Lea;
            let base = ins.memory_base().full_register();
            let (target, index) = if ins.is_ip_rel_memory_operand() {
                (Some(ins.ip_rel_memory_address()), false)
            } else if let Some(o) = held.get(&base) {
                based = Some(base);
                (Some(at + o).map(|a| a.wrapping_add(ins.memory_displacement64())), true)
            } else if ins.memory_base() == Register::None {
                (Some(ins.memory_displacement64()), true)
            } else {
                (None, false)
            };
            let Some(target) = target.filter(|t| inside(*t)) else {
                if based.is_some() {
                    // Beyond the object through its address: not known.
                    out.escapes = true;
                }
                continue;
            };
            let indexed = index && ins.memory_index() != Register::None;
            if lea && !indexed {
                gained = Some((ins.op0_register().full_register(), target - at));
            } else if lea || indexed || ins.memory_size().size() == 0 {
                out.escapes = true;
            } else {
                out.words.insert((target - at, ins.memory_size().size() as u64));
            }
        }
        if ins.op_count() == 2
            && ins.mnemonic() == Mnemonic::Mov
            && ins.op0_kind() == OpKind::Register
            && matches!(
                ins.op1_kind(),
                OpKind::Immediate32 | OpKind::Immediate32to64 | OpKind::Immediate64
            )
            && inside(ins.immediate64())
        {
            gained = Some((ins.op0_register().full_register(), ins.immediate64() - at));
        }
        let copy = (ins.mnemonic() == Mnemonic::Mov
            && ins.op0_kind() == OpKind::Register
            && ins.op1_kind() == OpKind::Register
            && ins.op0_register().size() == 8)
            .then(|| (ins.op0_register().full_register(), ins.op1_register().full_register()));
        let call = ins.flow_control() == FlowControl::Call;
        // The arguments of a synchronisation call that are its objects.
        let sync = if call { calls.sync_args(ins.near_branch_target()) } else { &[][..] };
        let used_registers = info.info(&ins).used_registers();
        for used in used_registers {
            let reg = used.register().full_register();
            let Some(&o) = held.get(&reg) else { continue };
            let reads = matches!(
                used.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::ReadWrite | OpAccess::ReadCondWrite
            );
            if !reads || Some(reg) == based {
                continue;
            }
            match copy {
                Some((to, from)) if from == reg => gained = Some((to, o)),
                _ => out.escapes = true,
            }
        }
        if call {
            called(&mut held, sync, out);
        } else {
            for used in used_registers {
                if matches!(
                    used.access(),
                    OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite
                ) {
                    held.remove(&used.register().full_register());
                }
            }
        }
        if !matches!(ins.flow_control(), FlowControl::Next | FlowControl::Call) && !held.is_empty()
        {
            // Kept across a jump or returned: where it is used is not
            // followed.
            out.escapes = true;
            held.clear();
        }
        if let Some((reg, o)) = gained {
            held.insert(reg, o);
        }
    }
}

/// A call with `held` registers holding the object's address: arguments
/// go in registers, and a held one passed to anything but a
/// synchronisation call (`sync`: its object arguments) escapes; the call
/// then overwrites the caller-saved ones.
fn called(held: &mut HashMap<Register, u64>, sync: &[Register], out: &mut Touches) {
    for arg in
        [Register::RDI, Register::RSI, Register::RDX, Register::RCX, Register::R8, Register::R9]
    {
        if let Some(&o) = held.get(&arg) {
            if sync.contains(&arg) {
                out.locks.insert(o);
            } else {
                out.escapes = true;
            }
        }
    }
    for r in CALLER_SAVED {
        held.remove(&r);
    }
}

/// Registers a call may overwrite (System V x86-64).
const CALLER_SAVED: [Register; 9] = [
    Register::RAX,
    Register::RCX,
    Register::RDX,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
];

/// Names of call targets: the executable's functions, and its PLT stubs
/// by the relocation of the GOT slot each jumps through.
pub(super) struct Callees {
    /// GOT slot → imported name.
    slots: HashMap<u64, String>,
    /// (start, end) of the PLT sections, with their bytes.
    plt: Vec<(u64, Vec<u8>)>,
    /// Address → the executable's own function name.
    own: HashMap<u64, String>,
}

impl Callees {
    pub(super) fn new(file: &object::File<'_>) -> Callees {
        let mut slots = HashMap::new();
        if let (Some(relocs), Some(dynsyms)) =
            (file.dynamic_relocations(), file.dynamic_symbol_table())
        {
            for (slot, r) in relocs {
                if let RelocationTarget::Symbol(i) = r.target()
                    && let Ok(name) =
                        dynsyms.symbol_by_index(i).and_then(|s| s.name().map(str::to_owned))
                {
                    slots.insert(slot, name);
                }
            }
        }
        let plt = file
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".plt")))
            .filter_map(|s| Some((s.address(), s.data().ok()?.to_vec())))
            .collect();
        let own = file
            .symbols()
            .filter(|s| s.is_definition() && s.kind() == object::SymbolKind::Text)
            .filter_map(|s| Some((s.address(), s.name().ok()?.to_owned())))
            .collect();
        Callees { slots, plt, own }
    }

    /// The imported name whose GOT slot is at `slot` (a `call [rip+slot]`
    /// of code built without a PLT).
    pub(super) fn slot(&self, slot: u64) -> Option<&str> {
        self.slots.get(&slot).map(String::as_str)
    }

    /// The name of the function a call to `target` reaches.
    pub(super) fn name(&self, target: u64) -> Option<&str> {
        if let Some(n) = self.own.get(&target) {
            return Some(n);
        }
        let (start, bytes) =
            self.plt.iter().find(|(s, b)| target >= *s && target < s + b.len() as u64)?;
        let from = (target - start) as usize;
        let mut decoder = Decoder::with_ip(64, &bytes[from..], target, DecoderOptions::NONE);
        // A stub: `endbr64`, maybe `bnd`, then `jmp [rip+slot]`.
        for _ in 0..3 {
            let ins = decoder.decode();
            if ins.flow_control() == FlowControl::IndirectBranch && ins.is_ip_rel_memory_operand() {
                return self.slots.get(&ins.ip_rel_memory_address()).map(String::as_str);
            }
        }
        None
    }

    /// The argument registers of a call to `target` that hold its
    /// synchronisation objects: the first argument of a synchronisation
    /// call, and a condition wait's mutex (the second). Any other
    /// argument (`sem_getvalue`'s `int *`, an attribute) is not a lock.
    fn sync_args(&self, target: u64) -> &'static [Register] {
        let Some(name) = self.name(target).map(|n| n.split('@').next().unwrap_or(n)) else {
            return &[];
        };
        if ["pthread_cond_", "cnd_"].iter().any(|p| name.starts_with(p)) && name.contains("wait") {
            &[Register::RDI, Register::RSI]
        } else if SYNC_PREFIXES.iter().any(|p| name.starts_with(p)) {
            &[Register::RDI]
        } else {
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_word_covers_the_touched_bytes_when_they_fit() {
        let t = |words: &[(u64, u64)]| Touches {
            words: words.iter().copied().collect(),
            ..Touches::default()
        };
        assert_eq!(t(&[(40, 8)]).one_word(0x1000), Some((40, 8)));
        assert_eq!(t(&[(40, 4), (44, 4)]).one_word(0x1000), Some((40, 8)));
        assert_eq!(t(&[(42, 2)]).one_word(0x1000), Some((42, 2)));
        // Bytes 6 and 7 of one word and 0 of the next: no aligned word.
        assert_eq!(t(&[(6, 2), (8, 1)]).one_word(0x1000), None);
        assert_eq!(t(&[(40, 8), (48, 8)]).one_word(0x1000), None);
        assert_eq!(t(&[]).one_word(0x1000), None);
        // Bytes 0 and 1 of an object at an odd address: the 8-byte word
        // that covers them begins before the object.
        assert_eq!(t(&[(0, 1), (1, 1)]).one_word(0x1003), None);
        let escaped = Touches { escapes: true, ..t(&[(40, 8)]) };
        assert_eq!(escaped.one_word(0x1000), None);
    }
}
