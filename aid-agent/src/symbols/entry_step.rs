//! Where a synchronisation point's probe goes: at the first instruction
//! of the C library's function that the kernel's x86 uprobes emulate, when
//! the ones before it cannot matter.
//!
//! A uprobe runs the instruction it replaced either by emulating it (a
//! relative jump, call or conditional jump, a push of a register) or by
//! single-stepping a copy of it, which costs a debug trap. On this
//! machine kind that trap is the whole cost: a probe on
//! `pthread_mutex_lock`'s first instruction (`mov 0x10(%rdi),%eax`) cost
//! about 15 µs a call, one on its first conditional jump, 14 bytes on,
//! about 0.4 µs (BENCHMARKS.md, "Where a lock probe sits"). Locks are
//! the calls a program makes most often, and a probe that slows each by
//! 15 µs changes the schedule it is meant to watch.
//!
//! The probe moves only across instructions that change nothing the
//! probe or the call could tell: register moves and arithmetic, reads of
//! memory, with no write to memory, to the stack pointer or to a register
//! the probe reads (the function's arguments: [`args_read`]), no lock or
//! repeat prefix and no jump before the chosen one. Straight-line from
//! the entry, the instruction it moves to runs once in every call, before
//! anything the call does to a lock; the recorded entry is that
//! instruction's moment, a few instructions later.

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    Register,
};

/// Instructions looked at from the entry.
const LOOK_AHEAD: usize = 8;

/// Longest function whose code is read to look for jumps into its first
/// instructions; a longer one keeps its probe at the entry.
const MAX_CODE: u64 = 64 * 1024;

/// [`probe_step`] for the function at file offset `offset` of `path`
/// (ELF address `address`, `size` bytes of code); 0 when its code cannot
/// be read or its size is not known.
pub fn step_of(path: &std::path::Path, offset: u64, address: u64, size: u64, args: usize) -> u64 {
    use std::os::unix::fs::FileExt as _;
    if size == 0 || size > MAX_CODE {
        return 0;
    }
    let Ok(file) = std::fs::File::open(path) else { return 0 };
    let mut code = vec![0; size as usize];
    if file.read_exact_at(&mut code, offset).is_err() {
        return 0;
    }
    probe_step(&code, address, args)
}

/// How many argument registers (rdi, rsi, rdx) sync point `name` takes:
/// what its entry records (arg0..arg2) and what the agent reads of it (a
/// lock's address, a condition wait's mutex) stay the caller's. Any name
/// not listed keeps all three.
pub fn args_read(name: &str) -> usize {
    const ONE: &[&str] = &[
        "pthread_mutex_lock",
        "pthread_mutex_trylock",
        "pthread_mutex_unlock",
        "pthread_cond_signal",
        "pthread_cond_broadcast",
        "pthread_rwlock_rdlock",
        "pthread_rwlock_tryrdlock",
        "pthread_rwlock_wrlock",
        "pthread_rwlock_trywrlock",
        "pthread_rwlock_unlock",
        "pthread_spin_unlock",
        "pthread_barrier_wait",
        "sem_wait",
        "sem_trywait",
        "sem_post",
        "sched_yield",
        "usleep",
        "pthread_exit",
        "exit",
    ];
    const TWO: &[&str] = &[
        "pthread_mutex_timedlock",
        "pthread_rwlock_timedrdlock",
        "pthread_rwlock_timedwrlock",
        "pthread_cond_wait",
        "sem_timedwait",
        "nanosleep",
        "pthread_join",
    ];
    let name = name.split('@').next().unwrap_or(name);
    if ONE.contains(&name) {
        1
    } else if TWO.contains(&name) {
        2
    } else {
        3
    }
}

/// Bytes from the function's entry (`code`, all of its code, at ELF
/// address `address`) to the instruction its probe should sit on: 0 when
/// the first is emulated or no later one can be reached safely (nor when
/// a jump inside the function lands on or before it).
pub fn probe_step(code: &[u8], address: u64, args: usize) -> u64 {
    let keep = [Register::RDI, Register::RSI, Register::RDX];
    let keep = &keep[..args.min(3)];
    let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut ins = Instruction::default();
    for _ in 0..LOOK_AHEAD {
        if !decoder.can_decode() {
            return 0;
        }
        decoder.decode_out(&mut ins);
        if ins.is_invalid() {
            return 0;
        }
        if emulated(&ins, code, address) {
            let step = ins.ip() - address;
            return if step == 0 || jumped_into(code, address, step) { 0 } else { step };
        }
        if !skippable(&ins, &mut info, keep) {
            return 0;
        }
    }
    0
}

/// Whether a jump or call anywhere in the function (`code`, all of it)
/// lands past its entry and at or before `step`: the probe there would
/// run again inside one call.
fn jumped_into(code: &[u8], address: u64, step: u64) -> bool {
    let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
    decoder.iter().any(|ins| {
        matches!(
            ins.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call
        ) && (address + 1..=address + step).contains(&ins.near_branch_target())
    })
}

/// Whether the kernel emulates `ins` rather than single-stepping it: a
/// relative `jmp`, `call` or conditional jump, or a push of a 64-bit
/// register, with no prefix (byte forms the kernel's decoder takes as
/// they are).
fn emulated(ins: &Instruction, code: &[u8], address: u64) -> bool {
    let at = (ins.ip() - address) as usize;
    let bytes = &code[at..at + ins.len()];
    matches!(
        bytes,
        [0xeb | 0x70..=0x7f, _]
            | [0xe9 | 0xe8, _, _, _, _]
            | [0x0f, 0x80..=0x8f, _, _, _, _]
            | [0x50..=0x57]
            | [0x41, 0x50..=0x57]
    )
}

/// Whether the probe may move past `ins`: it goes on to the next
/// instruction, touches no lock, writes no memory, and leaves the stack
/// pointer and the registers in `keep` alone.
fn skippable(ins: &Instruction, info: &mut InstructionInfoFactory, keep: &[Register]) -> bool {
    const PLAIN: &[Mnemonic] = &[
        Mnemonic::Mov,
        Mnemonic::Movzx,
        Mnemonic::Movsx,
        Mnemonic::Movsxd,
        Mnemonic::Lea,
        Mnemonic::And,
        Mnemonic::Or,
        Mnemonic::Xor,
        Mnemonic::Add,
        Mnemonic::Sub,
        Mnemonic::Test,
        Mnemonic::Cmp,
        Mnemonic::Shl,
        Mnemonic::Shr,
        Mnemonic::Sar,
        Mnemonic::Nop,
        Mnemonic::Endbr64,
    ];
    if ins.flow_control() != FlowControl::Next
        || !PLAIN.contains(&ins.mnemonic())
        || ins.has_lock_prefix()
        || ins.has_rep_prefix()
        || ins.has_repne_prefix()
    {
        return false;
    }
    let used = info.info(ins);
    let writes =
        |a: OpAccess| !matches!(a, OpAccess::Read | OpAccess::NoMemAccess | OpAccess::None);
    if used.used_memory().iter().any(|m| writes(m.access())) {
        return false;
    }
    !used.used_registers().iter().any(|r| {
        let full = r.register().full_register();
        writes(r.access()) && (full == Register::RSP || keep.contains(&full))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc 2.36's `pthread_mutex_lock`: three moves and masks, then a
    /// conditional jump 14 bytes on, which the kernel emulates.
    const MUTEX_LOCK: &[u8] = &[
        0x8b, 0x47, 0x10, // mov 0x10(%rdi),%eax
        0x89, 0xc2, // mov %eax,%edx
        0x81, 0xe2, 0x7f, 0x01, 0x00, 0x00, // and $0x17f,%edx
        0x83, 0xe0, 0x7c, // and $0x7c,%eax
        0x0f, 0x85, 0xac, 0x00, 0x00, 0x00, // jne +0xac
        0x53, // push %rbx
    ];

    #[test]
    fn a_lock_probe_moves_to_the_first_emulated_instruction() {
        assert_eq!(probe_step(MUTEX_LOCK, 0x8c370, 1), 14);
        assert_eq!(args_read("pthread_mutex_lock@@GLIBC_2.2.5"), 1);
        assert_eq!(args_read("pthread_cond_wait"), 2);
        assert_eq!(args_read("pthread_cond_clockwait"), 3);
    }

    /// `mov %eax,%edx` writes the third argument's register: a probe
    /// that reads it stays at the entry.
    #[test]
    fn a_probe_does_not_move_past_a_write_to_an_argument_it_reads() {
        assert_eq!(probe_step(MUTEX_LOCK, 0x8c370, 3), 0);
    }

    /// glibc's `pthread_mutex_unlock`: `mov $1,%esi` then a jump; read by
    /// its first argument alone, its probe goes to the jump.
    #[test]
    fn an_unlock_probe_moves_past_a_write_to_an_argument_it_does_not_read() {
        let unlock = [0xbe, 0x01, 0x00, 0x00, 0x00, 0xe9, 0xf6, 0xfe, 0xff, 0xff];
        assert_eq!(probe_step(&unlock, 0x8dd50, 1), 5);
        assert_eq!(probe_step(&unlock, 0x8dd50, 2), 0);
    }

    #[test]
    fn an_emulated_first_instruction_or_a_write_to_memory_keeps_the_probe_at_the_entry() {
        // push %r14 first (pthread_cond_wait).
        assert_eq!(probe_step(&[0x41, 0x57, 0x41, 0x56], 0x883f0, 3), 0);
        // mov %eax,(%rdi); jmp: a store before the jump.
        assert_eq!(probe_step(&[0x89, 0x07, 0xeb, 0x00], 0x1000, 1), 0);
        // lock cmpxchg first (a spin lock).
        assert_eq!(probe_step(&[0xf0, 0x0f, 0xb1, 0x17, 0xeb, 0x00], 0x1000, 1), 0);
        // sub $8,%rsp, then a call: the stack pointer moved.
        assert_eq!(probe_step(&[0x48, 0x83, 0xec, 0x08, 0xe8, 0, 0, 0, 0], 0x1000, 1), 0);
        // Nothing emulated within reach, or bytes that do not decode.
        assert_eq!(probe_step(&[0x89, 0xc2].repeat(9), 0x1000, 1), 0);
        assert_eq!(probe_step(&[0x0f], 0x1000, 1), 0);
    }

    /// A loop that jumps back to the conditional jump would run a probe
    /// there twice in one call: the probe stays at the entry.
    #[test]
    fn a_probe_does_not_move_to_an_instruction_a_jump_lands_on() {
        let mut looped = MUTEX_LOCK.to_vec();
        // jmp back to +14 from +21 (rel8 = 14 - 23 = -9).
        looped.extend([0xeb, 0xf7]);
        assert_eq!(probe_step(&looped, 0x8c370, 1), 0);
        // One to +3, between the entry and the jump: refused too.
        let mut near = MUTEX_LOCK.to_vec();
        near.extend([0xeb, 0xec]); // 3 - 23 = -20
        assert_eq!(probe_step(&near, 0x8c370, 1), 0);
        let mut after = MUTEX_LOCK.to_vec();
        after.extend([0xeb, 0xfe]); // jmp to itself, at +21: after the probe
        assert_eq!(probe_step(&after, 0x8c370, 1), 14);
    }
}
