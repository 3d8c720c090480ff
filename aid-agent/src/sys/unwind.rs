//! Returning early from a function a thread has just entered.
//!
//! When the thread stops for a premature return, the probed first
//! instruction (often `push %rbp`, `endbr64` or `sub $n,%rsp`) may already
//! have run. Instead of decoding prologues, we ask the module's `.eh_frame`
//! call-frame information where the frame is at the exact instruction the
//! thread stopped on: the canonical frame address (CFA), the return address
//! at CFA-8, and where callee-saved registers were saved. Returning is then
//! what `ret` would do after the epilogue: restore those registers, set
//! `rsp` to the CFA and `rip` to the return address (x86-64 SysV ABI).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EndianArcSlice, RegisterRule, RunTimeEndian, UnwindContext,
    UnwindSection as _,
};
use object::{Object as _, ObjectSection as _};

// Arc, not Rc: the controller that holds the tables serves the runs of
// one `--jobs` thread.
type Reader = EndianArcSlice<RunTimeEndian>;

#[derive(Debug, thiserror::Error)]
pub enum UnwindError {
    #[error("{}: {reason}", module.display())]
    Module { module: PathBuf, reason: String },
    #[error("no call-frame information for address {0:#x}")]
    NoFde(u64),
    #[error("unsupported call-frame rule at {0:#x}")]
    Unsupported(u64),
    #[error("reading the target's memory: {0}")]
    Memory(String),
}

struct FrameTable {
    eh_frame: EhFrame<Reader>,
    bases: BaseAddresses,
}

/// Call-frame tables of the modules seen so far.
#[derive(Default)]
pub struct Unwinder {
    tables: HashMap<PathBuf, Arc<FrameTable>>,
}

/// Register values of a stopped thread that unwinding reads and writes.
pub type Regs = libc::user_regs_struct;

/// DWARF register numbers (x86-64 psABI) to registers.
fn reg_mut(regs: &mut Regs, dwarf: u16) -> Option<&mut u64> {
    Some(match dwarf {
        0 => &mut regs.rax,
        1 => &mut regs.rdx,
        2 => &mut regs.rcx,
        3 => &mut regs.rbx,
        4 => &mut regs.rsi,
        5 => &mut regs.rdi,
        6 => &mut regs.rbp,
        7 => &mut regs.rsp,
        8 => &mut regs.r8,
        9 => &mut regs.r9,
        10 => &mut regs.r10,
        11 => &mut regs.r11,
        12 => &mut regs.r12,
        13 => &mut regs.r13,
        14 => &mut regs.r14,
        15 => &mut regs.r15,
        16 => &mut regs.rip,
        _ => return None,
    })
}

impl Unwinder {
    fn table(&mut self, module: &Path) -> Result<Arc<FrameTable>, UnwindError> {
        if let Some(t) = self.tables.get(module) {
            return Ok(Arc::clone(t));
        }
        let err = |reason: String| UnwindError::Module { module: module.to_owned(), reason };
        let data = std::fs::read(module).map_err(|e| err(e.to_string()))?;
        let file = object::File::parse(&*data).map_err(|e| err(e.to_string()))?;
        let section =
            file.section_by_name(".eh_frame").ok_or_else(|| err("no .eh_frame section".into()))?;
        let bytes = section.uncompressed_data().map_err(|e| err(e.to_string()))?;
        let mut bases = BaseAddresses::default().set_eh_frame(section.address());
        if let Some(text) = file.section_by_name(".text") {
            bases = bases.set_text(text.address());
        }
        if let Some(got) = file.section_by_name(".got") {
            bases = bases.set_got(got.address());
        }
        let mut eh_frame =
            EhFrame::from(EndianArcSlice::new(Arc::from(&*bytes), RunTimeEndian::Little));
        eh_frame.set_address_size(8);
        let table = Arc::new(FrameTable { eh_frame, bases });
        self.tables.insert(module.to_owned(), Arc::clone(&table));
        Ok(table)
    }

    /// Rewrites `regs` so that the thread, when resumed, continues in the
    /// caller as if the function had returned `value`. `bias` maps the
    /// module's ELF addresses to runtime ones; `read` reads one word of the
    /// target's memory.
    pub fn return_early(
        &mut self,
        module: &Path,
        bias: u64,
        regs: &mut Regs,
        value: u64,
        read: &mut dyn FnMut(u64) -> Result<u64, String>,
    ) -> Result<(), UnwindError> {
        let table = self.table(module)?;
        let pc = regs.rip.wrapping_sub(bias);
        let mut ctx = UnwindContext::new();
        let row = table
            .eh_frame
            .unwind_info_for_address(&table.bases, &mut ctx, pc, EhFrame::cie_from_offset)
            .map_err(|_| UnwindError::NoFde(pc))?;
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => {
                let base =
                    *reg_mut(&mut regs.clone(), register.0).ok_or(UnwindError::Unsupported(pc))?;
                base.wrapping_add_signed(*offset)
            }
            CfaRule::Expression(_) => return Err(UnwindError::Unsupported(pc)),
        };
        let mut out = *regs;
        for (register, rule) in row.registers() {
            match rule {
                RegisterRule::Offset(off) => {
                    let value = read(cfa.wrapping_add_signed(*off)).map_err(UnwindError::Memory)?;
                    if let Some(r) = reg_mut(&mut out, register.0) {
                        *r = value;
                    }
                }
                RegisterRule::SameValue | RegisterRule::Undefined => {}
                _ => return Err(UnwindError::Unsupported(pc)),
            }
        }
        // The return address sits just below the CFA on x86-64.
        out.rip = read(cfa.wrapping_sub(8)).map_err(UnwindError::Memory)?;
        out.rsp = cfa;
        out.rax = value;
        *regs = out;
        Ok(())
    }
}
