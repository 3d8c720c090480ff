//! Is a function's first instruction safe to execute twice?
//!
//! A thread stopped at a function's entry has already run the probed first
//! instruction (the kernel single-steps it before delivering our stop
//! signal). To hold the thread *before* the function does anything, the
//! agent rewinds it to that instruction, which then runs again. That is
//! only harmless when the instruction changes nothing but registers and
//! the thread's own stack below its stack pointer: register moves and
//! arithmetic, loads, pushes, stack adjustments. A store to memory or a
//! read-modify-write on memory could be seen by other threads (or count
//! twice), so anything not recognised here is treated as unsafe and the
//! thread is held after it instead.

/// `bytes`: the function's first bytes, from the file on disk.
pub fn reexecutable(bytes: &[u8]) -> bool {
    let mut i = 0;
    // endbr64
    if bytes.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
        return true;
    }
    // Prefixes: operand size and REX only (LOCK, segments, rep: no).
    while let Some(&b) = bytes.get(i) {
        match b {
            0x66 | 0x40..=0x4f => i += 1,
            _ => break,
        }
    }
    let Some(&op) = bytes.get(i) else { return false };
    let modrm = bytes.get(i + 1).copied();
    let register_form = modrm.is_some_and(|m| m >> 6 == 3);
    let reg_field = modrm.map(|m| (m >> 3) & 7);
    match op {
        0x50..=0x57 => true,                                               // push reg
        0x90 => true,                                                      // nop
        0xb8..=0xbf => true,                                               // mov imm, reg
        0xc3 => true,                                                      // ret
        0x8b | 0x8a | 0x8d => modrm.is_some(), // mov r <- r/m (load), lea
        0x03 | 0x0b | 0x13 | 0x1b | 0x23 | 0x2b | 0x33 => modrm.is_some(), // op r <- r/m
        0x38..=0x3b | 0x84 | 0x85 => modrm.is_some(), // cmp, test: read only
        // op r/m <- r, mov r/m <- r: only between registers.
        0x01 | 0x09 | 0x11 | 0x19 | 0x21 | 0x29 | 0x31 | 0x88 | 0x89 => register_form,
        // group 1 with an immediate: registers, or cmp on memory.
        0x80 | 0x81 | 0x83 => register_form || reg_field == Some(7),
        0xc7 => register_form, // mov imm, r/m
        0x0f => match bytes.get(i + 1) {
            Some(0xb6 | 0xb7 | 0xbe | 0xbf) => true, // movzx, movsx (loads)
            Some(0x1f) => true,                      // nop r/m
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::reexecutable;

    #[test]
    fn prologues_and_loads_are_safe() {
        assert!(reexecutable(&[0x55])); // push %rbp
        assert!(reexecutable(&[0x41, 0x54])); // push %r12
        assert!(reexecutable(&[0xf3, 0x0f, 0x1e, 0xfa])); // endbr64
        assert!(reexecutable(&[0x48, 0x83, 0xec, 0x18])); // sub $0x18,%rsp
        assert!(reexecutable(&[0x48, 0x8b, 0x47, 0x20])); // mov 0x20(%rdi),%rax
        assert!(reexecutable(&[0x48, 0x89, 0xf8])); // mov %rdi,%rax
        assert!(reexecutable(&[0x31, 0xc0])); // xor %eax,%eax
        assert!(reexecutable(&[0x83, 0x3f, 0x00])); // cmpl $0,(%rdi)
        assert!(reexecutable(&[0x0f, 0xb6, 0x07])); // movzbl (%rdi),%eax
    }

    #[test]
    fn stores_and_read_modify_writes_are_not() {
        assert!(!reexecutable(&[0x48, 0x89, 0x3d, 0, 0, 0, 0])); // mov %rdi,g(%rip)
        assert!(!reexecutable(&[0x83, 0x07, 0x01])); // addl $1,(%rdi)
        assert!(!reexecutable(&[0xf0, 0x48, 0x0f, 0xc1, 0x07])); // lock xadd
        assert!(!reexecutable(&[0x48, 0x01, 0x07])); // add %rax,(%rdi)
        assert!(!reexecutable(&[0xe8, 0, 0, 0, 0])); // call
        assert!(!reexecutable(&[]));
    }
}
