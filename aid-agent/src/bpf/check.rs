//! Which functions the kernel can probe, found once per session before
//! any target runs.
//!
//! The kernel refuses a uprobe on an instruction it cannot single-step out
//! of line (a `lock` prefix, a trap, an undecodable byte: errno 524,
//! `ENOTSUPP`) when it installs the breakpoint in an address space. One
//! uprobe_multi link covers every function of a module, and one refused
//! offset fails the whole link, naming the module only. So each module's
//! functions are tried here on a trial link in the agent's own address
//! space (the module mapped read-only, so that the kernel analyses every
//! instruction), and a refused set is split in halves until the culprits
//! are found. Functions refused are left out with a warning that names
//! them; the rest are attached as usual.

use std::{
    collections::BTreeMap,
    fs::File,
    io,
    os::fd::{AsFd as _, OwnedFd},
    path::{Path, PathBuf},
};

use crate::{
    bpf::uprobe_multi::{self, MultiProgram},
    model::Function,
};

/// A function the kernel would not probe, and its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Index in the list that was checked.
    pub index: usize,
    pub errno: i32,
}

impl Refused {
    /// The kernel's answer in words (524 has no name in libc).
    pub fn reason(&self) -> String {
        match self.errno {
            ENOTSUPP => "the kernel cannot probe its first instruction (ENOTSUPP)".into(),
            libc::ENOEXEC => "the kernel cannot decode its first instruction (ENOEXEC)".into(),
            libc::EINVAL => "its offset is not in the file (EINVAL)".into(),
            e => io::Error::from_raw_os_error(e).to_string(),
        }
    }
}

/// The kernel's `ENOTSUPP`, not exported to user space (it prints as
/// "Unknown error 524").
pub const ENOTSUPP: i32 = 524;

/// Answers that mean "this offset", not "this link": worth splitting.
fn per_offset(errno: i32) -> bool {
    matches!(errno, ENOTSUPP | libc::ENOEXEC | libc::EINVAL | libc::EFAULT)
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot open {} to check its functions: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot map {} to check its functions: {source}", path.display())]
    Map { path: PathBuf, source: nix::Error },
    #[error("checking the probes of {count} function(s) in {}: {source}", path.display())]
    Link { count: usize, path: PathBuf, source: io::Error },
}

/// The functions of `functions` the kernel refuses to probe, trying them
/// with `program` (an entry program loaded for uprobe_multi) in this
/// process. Links that succeed are returned still open, to be closed in
/// the background (closing waits for a grace period).
pub fn refused(
    program: &MultiProgram,
    functions: &[Function],
) -> Result<(Vec<Refused>, Vec<OwnedFd>), CheckError> {
    let mut by_module: BTreeMap<&Path, Vec<usize>> = BTreeMap::new();
    for (i, f) in functions.iter().enumerate() {
        by_module.entry(f.module.as_path()).or_default().push(i);
    }
    let pid = std::process::id();
    let mut refused = Vec::new();
    let mut open = Vec::new();
    for (module, indices) in by_module {
        let _mapping = Mapping::of(module)?;
        let mut trial = |part: &[usize]| -> io::Result<OwnedFd> {
            let offsets: Vec<u64> = part.iter().map(|&i| functions[i].offset).collect();
            let cookies = vec![0u64; part.len()];
            uprobe_multi::link_create(program.fd(), module, &offsets, &cookies, false, pid)
        };
        bisect(&indices, &mut trial, &mut refused, &mut open).map_err(|source| {
            CheckError::Link { count: indices.len(), path: module.to_owned(), source }
        })?;
    }
    refused.sort_by_key(|r| r.index);
    Ok((refused, open))
}

/// Tries `part` as one link; on a per-offset refusal, each half on its own.
fn bisect(
    part: &[usize],
    trial: &mut dyn FnMut(&[usize]) -> io::Result<OwnedFd>,
    refused: &mut Vec<Refused>,
    open: &mut Vec<OwnedFd>,
) -> io::Result<()> {
    match trial(part) {
        Ok(fd) => {
            open.push(fd);
            Ok(())
        }
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(0);
            if !per_offset(errno) {
                return Err(e);
            }
            if let [index] = part {
                refused.push(Refused { index: *index, errno });
                return Ok(());
            }
            let (a, b) = part.split_at(part.len() / 2);
            bisect(a, trial, refused, open)?;
            bisect(b, trial, refused, open)
        }
    }
}

/// A module mapped read-only into the agent, so that trial links have an
/// address space to install (and analyse) their breakpoints in. Nothing
/// runs there.
struct Mapping {
    addr: std::ptr::NonNull<libc::c_void>,
    len: usize,
}

impl Mapping {
    fn of(path: &Path) -> Result<Mapping, CheckError> {
        let file =
            File::open(path).map_err(|source| CheckError::Open { path: path.into(), source })?;
        let len =
            file.metadata().map_err(|source| CheckError::Open { path: path.into(), source })?.len();
        let len = std::num::NonZeroUsize::new(len as usize)
            .ok_or(CheckError::Map { path: path.into(), source: nix::Error::EINVAL })?;
        // SAFETY: a new private read-only mapping of a file we opened; it
        // is only read by the kernel and unmapped on drop.
        let addr = unsafe {
            nix::sys::mman::mmap(
                None,
                len,
                nix::sys::mman::ProtFlags::PROT_READ,
                nix::sys::mman::MapFlags::MAP_PRIVATE,
                file.as_fd(),
                0,
            )
        }
        .map_err(|source| CheckError::Map { path: path.into(), source })?;
        Ok(Mapping { addr, len: len.get() })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, unmapped once.
        let _ = unsafe { nix::sys::mman::munmap(self.addr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bisection finds exactly the refused offsets, with few trials.
    #[test]
    fn halves_find_the_culprits() {
        let bad = [3usize, 17, 18];
        let all: Vec<usize> = (0..32).collect();
        let mut trials = 0;
        let mut trial = |part: &[usize]| -> io::Result<OwnedFd> {
            trials += 1;
            if part.iter().any(|i| bad.contains(i)) {
                Err(io::Error::from_raw_os_error(ENOTSUPP))
            } else {
                Ok(OwnedFd::from(File::open("/dev/null").unwrap()))
            }
        };
        let (mut refused, mut open) = (Vec::new(), Vec::new());
        bisect(&all, &mut trial, &mut refused, &mut open).unwrap();
        let found: Vec<usize> = refused.iter().map(|r| r.index).collect();
        assert_eq!(found, bad);
        assert!(trials <= 2 * bad.len() * 6, "{trials} trials");
        assert!(!open.is_empty());
        assert_eq!(refused[0].reason(), "the kernel cannot probe its first instruction (ENOTSUPP)");
    }

    /// A refusal of the whole link (privileges, a missing file) is an
    /// error, not 32 refused functions.
    #[test]
    fn other_errors_are_not_split() {
        let all: Vec<usize> = (0..32).collect();
        let mut trial =
            |_: &[usize]| -> io::Result<OwnedFd> { Err(io::Error::from_raw_os_error(libc::EPERM)) };
        let (mut refused, mut open) = (Vec::new(), Vec::new());
        let err = bisect(&all, &mut trial, &mut refused, &mut open).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        assert!(refused.is_empty());
    }
}
