//! Return addresses an unwind crosses, repaired (`aid_common::ShadowStack`).
//!
//! A return probe replaces a frame's return address with the kernel's
//! trampoline (the first slot of the `[uprobes]` area of the process).
//! An unwinder (a C++ `throw`, a forced unwind) reads return addresses to
//! find each caller's unwind table; the trampoline has none, and the
//! program is terminated. When a thread of a target that throws enters an
//! unwinder with frames on its shadow stack, it stops here and each of
//! those slots that holds the trampoline gets its original address back.
//! At the catch, the slots of the frames still live get the trampoline
//! again, so their returns are still reported; the kernel drops its
//! record of the frames the exception crossed, as after a `longjmp`.
//!
//! Only a slot that holds the trampoline is written, with the address the
//! newest frame recorded for that slot, and only above the stack pointer:
//! a stale record can never overwrite a live value.

use std::collections::{BTreeSet, HashMap};

use aid_common::{Pending, ShadowStack};
use nix::{sys::ptrace, unistd::Pid};

/// The stack pointer of a thread stopped for the agent (`rsp` in
/// [`Pending::regs`], `struct pt_regs` order).
pub fn stack_pointer(p: &Pending) -> u64 {
    p.regs[19]
}

/// One slot written back: where, its original address, and the
/// trampoline it held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Restored {
    slot: u64,
    ret: u64,
    trampoline: u64,
}

/// The slots each thread has restored and not yet re-armed, one set per
/// unwind under way, the latest last: an exception thrown and caught in a
/// destructor while another unwinds re-arms only its own slots, and the
/// outer unwind goes on over the addresses it needs.
#[derive(Debug, Default)]
pub struct Repairs {
    restored: HashMap<u32, Vec<Vec<Restored>>>,
}

/// Reads and writes one stopped thread's stack.
pub trait Stack {
    fn read(&mut self, addr: u64) -> Result<u64, String>;
    fn write(&mut self, addr: u64, value: u64) -> Result<(), String>;
}

/// A thread in a ptrace stop.
pub struct Traced(pub Pid);

impl Stack for Traced {
    fn read(&mut self, addr: u64) -> Result<u64, String> {
        ptrace::read(self.0, addr as ptrace::AddressType)
            .map(|w| w as u64)
            .map_err(|e| e.to_string())
    }

    fn write(&mut self, addr: u64, value: u64) -> Result<(), String> {
        ptrace::write(self.0, addr as ptrace::AddressType, value as i64).map_err(|e| e.to_string())
    }
}

/// Where the kernel's return trampoline is mapped in process (or thread)
/// `tid`: the start of its `[uprobes]` area.
pub fn trampoline(tid: u32) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{tid}/maps")).ok()?;
    let line = maps.lines().find(|l| l.ends_with("[uprobes]"))?;
    u64::from_str_radix(line.split('-').next()?, 16).ok()
}

impl Repairs {
    /// The thread entered an unwinder: each live frame of `shadow` whose
    /// slot holds `trampoline` gets its return address back. Returns how
    /// many slots were written.
    pub fn repair(
        &mut self,
        tid: u32,
        sp: u64,
        shadow: &ShadowStack,
        trampoline: u64,
        stack: &mut impl Stack,
    ) -> Result<usize, String> {
        let depth = (shadow.depth as usize).min(shadow.frames.len());
        let mut seen = BTreeSet::new();
        let unwinds = self.restored.entry(tid).or_default();
        unwinds.push(Vec::new());
        let Some(restored) = unwinds.last_mut() else { return Ok(0) };
        let mut n = 0;
        // Newest first: a slot reused by a newer frame is that frame's,
        // unless the newer frame found the trampoline there (a tail call
        // from a traced function: the older record has the address).
        for frame in shadow.frames[..depth].iter().rev() {
            if frame.slot <= sp || frame.ret == trampoline || !seen.insert(frame.slot) {
                continue;
            }
            if stack.read(frame.slot)? != trampoline {
                continue;
            }
            stack.write(frame.slot, frame.ret)?;
            restored.push(Restored { slot: frame.slot, ret: frame.ret, trampoline });
            n += 1;
        }
        Ok(n)
    }

    /// The thread reached a catch point: the slots the latest unwind
    /// restored that are still live (above the stack pointer, still
    /// holding the address written there) get the trampoline back.
    /// Returns how many.
    pub fn rearm(&mut self, tid: u32, sp: u64, stack: &mut impl Stack) -> Result<usize, String> {
        let mut n = 0;
        let latest = self.restored.get_mut(&tid).and_then(Vec::pop).unwrap_or_default();
        for r in latest {
            if r.slot > sp && stack.read(r.slot)? == r.ret {
                stack.write(r.slot, r.trampoline)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// The probes are gone and aid lets the process go: every live frame
    /// of `shadow` whose slot holds `trampoline` gets its return address
    /// back for good (its return is no longer reported; the kernel drops
    /// its record of the frame). Returns how many slots were written.
    pub fn unhijack(
        &mut self,
        tid: u32,
        sp: u64,
        shadow: &ShadowStack,
        trampoline: u64,
        stack: &mut impl Stack,
    ) -> Result<usize, String> {
        let n = self.repair(tid, sp, shadow, trampoline, stack);
        self.restored.remove(&tid);
        n
    }

    /// Forgets every thread (a new run).
    pub fn clear(&mut self) {
        self.restored.clear();
    }
}

#[cfg(test)]
mod tests {
    use aid_common::ShadowFrame;

    use super::*;

    const TRAMPOLINE: u64 = 0x7fff_f000;

    #[derive(Default)]
    struct Memory(std::collections::BTreeMap<u64, u64>);

    impl Stack for Memory {
        fn read(&mut self, addr: u64) -> Result<u64, String> {
            self.0.get(&addr).copied().ok_or_else(|| format!("{addr:#x} unmapped"))
        }
        fn write(&mut self, addr: u64, value: u64) -> Result<(), String> {
            self.0.insert(addr, value);
            Ok(())
        }
    }

    fn shadow(frames: &[(u64, u64)]) -> ShadowStack {
        let mut s = ShadowStack::default();
        for (i, (slot, ret)) in frames.iter().enumerate() {
            s.frames[i] = ShadowFrame { slot: *slot, ret: *ret, ..ShadowFrame::default() };
        }
        s.depth = frames.len() as u32;
        s
    }

    /// outer (slot 0x1000) calls middle (0x0f00) calls parse (0x0e00),
    /// which throws; the catch is in outer (stack pointer 0x0f80 there).
    #[test]
    fn a_throw_gets_the_addresses_back_and_the_catch_rearms_only_live_frames() {
        let mut mem = Memory::default();
        for slot in [0x1000, 0x0f00, 0x0e00] {
            mem.0.insert(slot, TRAMPOLINE);
        }
        let frames = shadow(&[(0x1000, 0x401010), (0x0f00, 0x402020), (0x0e00, 0x403030)]);
        let mut repairs = Repairs::default();
        let n = repairs.repair(7, 0x0d00, &frames, TRAMPOLINE, &mut mem).unwrap();
        assert_eq!(n, 3);
        assert_eq!(mem.0[&0x1000], 0x401010);
        assert_eq!(mem.0[&0x0f00], 0x402020);
        assert_eq!(mem.0[&0x0e00], 0x403030);
        // The crossed frames' stack is reused by the handler.
        mem.0.insert(0x0f00, 0x1234);
        assert_eq!(repairs.rearm(7, 0x0f80, &mut mem).unwrap(), 1);
        assert_eq!(mem.0[&0x1000], TRAMPOLINE);
        assert_eq!(mem.0[&0x0f00], 0x1234);
        assert_eq!(mem.0[&0x0e00], 0x403030);
        // Nothing is left to re-arm.
        assert_eq!(repairs.rearm(7, 0x0f80, &mut mem).unwrap(), 0);
    }

    /// outer (0x1000) calls inner (0x0f00), which throws; a destructor
    /// run in inner's frame during the unwind throws again from leaf
    /// (0x0d00) and catches at once (stack pointer 0x0e00). That catch
    /// re-arms leaf's slot only if live (it is not); outer's and inner's
    /// slots keep their addresses for the unwind that goes on, until its
    /// own catch in outer (0x0f80).
    #[test]
    fn a_throw_caught_during_another_unwind_rearms_only_its_own_slots() {
        let mut mem = Memory::default();
        mem.0.insert(0x1000, TRAMPOLINE);
        mem.0.insert(0x0f00, TRAMPOLINE);
        let mut repairs = Repairs::default();
        let first = shadow(&[(0x1000, 0x401010), (0x0f00, 0x402020)]);
        assert_eq!(repairs.repair(7, 0x0e80, &first, TRAMPOLINE, &mut mem).unwrap(), 2);
        mem.0.insert(0x0d00, TRAMPOLINE);
        let second = shadow(&[(0x1000, 0x401010), (0x0f00, 0x402020), (0x0d00, 0x403030)]);
        assert_eq!(repairs.repair(7, 0x0c00, &second, TRAMPOLINE, &mut mem).unwrap(), 1);
        assert_eq!(repairs.rearm(7, 0x0e00, &mut mem).unwrap(), 0);
        assert_eq!(mem.0[&0x1000], 0x401010);
        assert_eq!(mem.0[&0x0f00], 0x402020);
        assert_eq!(repairs.rearm(7, 0x0f80, &mut mem).unwrap(), 1);
        assert_eq!(mem.0[&0x1000], TRAMPOLINE);
        assert_eq!(mem.0[&0x0f00], 0x402020);
    }

    /// A record below the stack pointer, one whose slot does not hold the
    /// trampoline, and an older record of a reused slot are never written;
    /// a record of the trampoline itself (a tail call) defers to the older
    /// record of its slot.
    #[test]
    fn only_live_slots_that_hold_the_trampoline_are_written() {
        let mut mem = Memory::default();
        mem.0.insert(0x2000, TRAMPOLINE);
        mem.0.insert(0x1f00, 0x5555);
        mem.0.insert(0x1e00, TRAMPOLINE);
        mem.0.insert(0x0800, TRAMPOLINE);
        mem.0.insert(0x1d00, TRAMPOLINE);
        let frames = shadow(&[
            (0x1e00, 0x111),
            (0x2000, 0x401010),
            (0x1f00, 0x402020),
            (0x1e00, 0x403030),
            (0x1d00, 0x405050),
            (0x1d00, TRAMPOLINE),
            (0x0800, 0x404040),
        ]);
        let mut repairs = Repairs::default();
        let n = repairs.repair(7, 0x1000, &frames, TRAMPOLINE, &mut mem).unwrap();
        assert_eq!(n, 3);
        assert_eq!(mem.0[&0x1d00], 0x405050);
        assert_eq!(mem.0[&0x2000], 0x401010);
        assert_eq!(mem.0[&0x1f00], 0x5555);
        assert_eq!(mem.0[&0x1e00], 0x403030);
        assert_eq!(mem.0[&0x0800], TRAMPOLINE);
    }
}
