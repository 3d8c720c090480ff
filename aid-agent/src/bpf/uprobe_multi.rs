//! Target-scoped uprobes on `uprobe_multi` links (kernel ≥ 6.6): every
//! traced function of one module behind one BPF link whose pid filter puts
//! breakpoints in the target's address space only, and whose removal waits
//! for one grace period instead of one per probe (docs/probes.md has the
//! measurements).
//!
//! aya 0.14 knows the link type but neither loads a program for it (the
//! kernel wants `expected_attach_type = BPF_TRACE_UPROBE_MULTI` at load
//! time, and aya loads uprobes without one) nor creates the link. So the
//! recorder's programs are loaded a second time here: the same object is
//! parsed with `aya-obj`, its map references are bound to the maps aya
//! already created (both loads share every map), and the instructions go to
//! `BPF_PROG_LOAD` with that attach type. Links are made with a raw
//! `BPF_LINK_CREATE`; closing a link's descriptor detaches it, so the agent
//! dying for any reason removes the probes.

use std::{
    collections::{BTreeMap, HashSet},
    ffi::{CString, c_void},
    io,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
        unix::ffi::OsStrExt,
    },
    path::PathBuf,
};

use aya::{Ebpf, maps::Map};
use aya_obj::generated::{
    BPF_F_UPROBE_MULTI_RETURN, bpf_attach_type, bpf_attr, bpf_cmd, bpf_insn, bpf_prog_info,
    bpf_prog_type,
};

use crate::model::Function;

#[derive(Debug, thiserror::Error)]
pub enum MultiError {
    #[error("parsing the eBPF object again for uprobe_multi")]
    Parse(#[source] aya_obj::ParseError),
    #[error("binding the eBPF object to its maps for uprobe_multi")]
    Relocate(#[source] aya_obj::relocation::EbpfRelocationError),
    #[error("program {0} is not in the eBPF object")]
    MissingProgram(String),
    #[error(
        "this kernel cannot load uprobe_multi programs: it needs Linux 6.6 or later with CONFIG_UPROBES"
    )]
    Unsupported,
    #[error("loading {program} as a uprobe_multi program failed ({source}){log}")]
    Load { program: String, source: io::Error, log: String },
    #[error("attaching {count} {kind} probes in {module} to pid {pid}: {source}")]
    Link { count: usize, kind: &'static str, module: String, pid: u32, source: io::Error },
}

/// A program loaded for `BPF_TRACE_UPROBE_MULTI`.
#[derive(Debug)]
pub struct MultiProgram {
    name: String,
    fd: OwnedFd,
}

impl MultiProgram {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The kernel's id of the program (what `bpf_link_info` names).
    pub fn id(&self) -> io::Result<u32> {
        // SAFETY: all-zero is a valid bpf_prog_info to be filled in.
        let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is the documented initial state of bpf_attr.
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        // BPF_OBJ_GET_INFO_BY_FD reads the union's info member.
        attr.info.bpf_fd = self.fd.as_raw_fd() as u32;
        attr.info.info_len = size_of::<bpf_prog_info>() as u32;
        attr.info.info = std::ptr::from_mut(&mut info) as u64;
        sys_bpf_rc(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
        Ok(info.id)
    }
}

/// Loads the named programs of `object` for uprobe_multi links, bound to
/// the maps of `ebpf` (which must have been loaded from the same object,
/// and still hold every map: call this before taking any map out of it).
pub fn load_programs(
    ebpf: &Ebpf,
    object: &[u8],
    names: &[&str],
) -> Result<Vec<MultiProgram>, MultiError> {
    let mut obj = aya_obj::Object::parse(object).map_err(MultiError::Parse)?;
    let text_sections: HashSet<usize> = obj.functions.keys().map(|(section, _)| *section).collect();
    let definitions = obj.maps.clone();
    let fds: Vec<(&str, RawFd, &aya_obj::Map)> = ebpf
        .maps()
        .filter_map(|(name, map)| {
            let def = definitions.get(name)?;
            Some((name, map_data(map).fd().as_fd().as_raw_fd(), def))
        })
        .collect();
    let relocate = MultiError::Relocate;
    obj.relocate_maps(fds.into_iter(), &text_sections).map_err(relocate)?;
    obj.relocate_calls(&text_sections).map_err(relocate)?;
    let license = obj.license.clone();
    names
        .iter()
        .map(|name| {
            let program = obj
                .programs
                .get(*name)
                .ok_or_else(|| MultiError::MissingProgram(name.to_string()))?;
            let function = obj
                .functions
                .get(&program.function_key())
                .ok_or_else(|| MultiError::MissingProgram(name.to_string()))?;
            let fd = prog_load(name, &function.instructions, &license)?;
            Ok(MultiProgram { name: name.to_string(), fd })
        })
        .collect()
}

/// The map behind any variant of aya's map enum.
fn map_data(map: &Map) -> &aya::maps::MapData {
    match map {
        Map::Array(d)
        | Map::ArrayOfMaps(d)
        | Map::BloomFilter(d)
        | Map::CgroupArray(d)
        | Map::CgroupStorage(d)
        | Map::CgrpStorage(d)
        | Map::CpuMap(d)
        | Map::DevMap(d)
        | Map::DevMapHash(d)
        | Map::HashMap(d)
        | Map::HashOfMaps(d)
        | Map::InodeStorage(d)
        | Map::LpmTrie(d)
        | Map::LruHashMap(d)
        | Map::PerCpuArray(d)
        | Map::PerCpuCgroupStorage(d)
        | Map::PerCpuHashMap(d)
        | Map::PerCpuLruHashMap(d)
        | Map::PerfEventArray(d)
        | Map::ProgramArray(d)
        | Map::Queue(d)
        | Map::ReusePortSockArray(d)
        | Map::RingBuf(d)
        | Map::SockHash(d)
        | Map::SockMap(d)
        | Map::SkStorage(d)
        | Map::Stack(d)
        | Map::StackTraceMap(d)
        | Map::Unsupported(d)
        | Map::XskMap(d) => d,
    }
}

fn sys_bpf_rc(cmd: bpf_cmd, attr: &mut bpf_attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, fully initialised `union bpf_attr` whose
    // pointers (instructions, license, path, arrays, info) outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            std::ptr::from_mut(attr).cast::<c_void>(),
            size_of::<bpf_attr>(),
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// For the commands that return a new descriptor.
fn sys_bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> io::Result<OwnedFd> {
    let fd = sys_bpf_rc(cmd, attr)?;
    // SAFETY: on success these commands return a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn prog_load(name: &str, insns: &[bpf_insn], license: &CString) -> Result<OwnedFd, MultiError> {
    let attempt = |log: Option<&mut Vec<u8>>| {
        // SAFETY: all-zero is the documented initial state of bpf_attr.
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        // SAFETY: BPF_PROG_LOAD reads the union's program-load member.
        let u = unsafe { &mut attr.__bindgen_anon_3 };
        u.prog_type = bpf_prog_type::BPF_PROG_TYPE_KPROBE as u32;
        u.expected_attach_type = bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32;
        u.insn_cnt = insns.len() as u32;
        u.insns = insns.as_ptr() as u64;
        u.license = license.as_ptr() as u64;
        for (dst, src) in u.prog_name.iter_mut().zip(name.bytes().take(15)) {
            *dst = src as libc::c_char;
        }
        if let Some(buf) = log {
            u.log_level = 1;
            u.log_buf = buf.as_mut_ptr() as u64;
            u.log_size = buf.len() as u32;
        }
        sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
    };
    match attempt(None) {
        Ok(fd) => Ok(fd),
        Err(source) => {
            // Again with the verifier's log, for the error message.
            let mut log = vec![0u8; 1 << 20];
            let _ = attempt(Some(&mut log));
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(4).collect();
            let log = if tail.is_empty() {
                String::new()
            } else {
                format!(": {}", tail.into_iter().rev().collect::<Vec<_>>().join(" / "))
            };
            Err(MultiError::Load { program: name.to_owned(), source, log })
        }
    }
}

/// Creates one uprobe_multi link: `program` at every file `offset` of
/// `path` (with the matching `cookie`), at entry or at return, firing only
/// in the process `pid` (all its threads, across its execs).
pub fn link_create(
    program: BorrowedFd<'_>,
    path: &std::path::Path,
    offsets: &[u64],
    cookies: &[u64],
    ret: bool,
    pid: u32,
) -> io::Result<OwnedFd> {
    assert_eq!(offsets.len(), cookies.len());
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: all-zero is the documented initial state of bpf_attr.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: BPF_LINK_CREATE reads the union's link-create member; the
    // uprobe_multi member of its inner union is the one this attach type
    // reads.
    unsafe {
        let l = &mut attr.link_create;
        l.__bindgen_anon_1.prog_fd = program.as_raw_fd() as u32;
        l.attach_type = bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32;
        let m = &mut l.__bindgen_anon_3.uprobe_multi;
        m.path = path.as_ptr() as u64;
        m.offsets = offsets.as_ptr() as u64;
        m.cookies = cookies.as_ptr() as u64;
        m.cnt = offsets.len() as u32;
        m.flags = if ret { BPF_F_UPROBE_MULTI_RETURN } else { 0 };
        m.pid = pid;
    }
    sys_bpf(bpf_cmd::BPF_LINK_CREATE, &mut attr)
}

/// One uprobe_multi link to make: the entries or the returns of the
/// functions of one module.
#[derive(Debug, PartialEq, Eq)]
struct PlannedLink<'a> {
    module: &'a PathBuf,
    ret: bool,
    offsets: Vec<u64>,
    cookies: Vec<u64>,
}

/// The links [`Links::attach`] makes, in order: one per direction and
/// module, every module's entry link before any return link
/// ([`super::attach_order`] says why).
fn link_plan(functions: &[Function]) -> Vec<PlannedLink<'_>> {
    // Per (return, module): offsets and cookies.
    type Points = (Vec<u64>, Vec<u64>);
    let mut links: BTreeMap<(bool, &PathBuf), Points> = BTreeMap::new();
    for (f, ret) in super::attach_order(functions) {
        let (offsets, cookies) = links.entry((ret, &f.module)).or_default();
        offsets.push(f.offset);
        cookies.push(super::cookie(f));
    }
    links
        .into_iter()
        .map(|((ret, module), (offsets, cookies))| PlannedLink { module, ret, offsets, cookies })
        .collect()
}

/// The links of one attachment (one process); dropping it detaches them.
#[derive(Debug, Default)]
pub struct Links {
    fds: Vec<OwnedFd>,
}

impl Links {
    /// Attaches `enter` at the entry and `exit` at the return of every
    /// function (at the entry only, for those without a return probe or
    /// in [`super::entry_only`]), in process `pid` only: one link per module and
    /// direction, every entry link first ([`super::attach_order`]).
    pub fn attach(
        enter: &MultiProgram,
        exit: &MultiProgram,
        functions: &[Function],
        pid: u32,
    ) -> Result<Links, MultiError> {
        let mut links = Links::default();
        for link in link_plan(functions) {
            let (program, kind) = if link.ret { (exit, "return") } else { (enter, "entry") };
            let fd = link_create(
                program.fd.as_fd(),
                link.module,
                &link.offsets,
                &link.cookies,
                link.ret,
                pid,
            )
            .map_err(|source| MultiError::Link {
                count: link.offsets.len(),
                kind,
                module: link.module.display().to_string(),
                pid,
                source,
            })?;
            links.fds.push(fd);
        }
        Ok(links)
    }

    /// Links made elsewhere (the probe check's trial links).
    pub fn from_fds(fds: Vec<OwnedFd>) -> Links {
        Links { fds }
    }

    /// Takes over the links of `other`.
    pub fn extend(&mut self, other: Links) {
        self.fds.extend(other.fds);
    }

    pub fn len(&self) -> usize {
        self.fds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

/// Closes every link of `links`, on up to [`CLOSE_THREADS`] threads so
/// that their grace periods overlap instead of adding up.
pub fn close_in_parallel(links: Links) {
    let mut fds = links.fds;
    if fds.len() <= 1 {
        return;
    }
    let per_thread = fds.len().div_ceil(CLOSE_THREADS);
    std::thread::scope(|s| {
        while fds.len() > per_thread {
            let part = fds.split_off(fds.len() - per_thread);
            s.spawn(move || drop(part));
        }
        drop(std::mem::take(&mut fds));
    });
}

/// Threads that close links at once.
pub const CLOSE_THREADS: usize = 32;

/// Whether this kernel loads uprobe_multi programs at all (a two-instruction
/// program, no map): older kernels refuse the attach type.
pub fn supported() -> bool {
    // r0 = 0; exit
    const RETURN_ZERO: [u8; 16] = [0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    let Ok(insns) = aya_obj::copy_instructions(&RETURN_ZERO) else { return false };
    let license = CString::new("GPL").expect("no NUL");
    prog_load("aid_probe_multi", &insns, &license).is_ok()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::link_plan;
    use crate::model::{Probe, testing::function};

    /// A running process throws while its links are made: no return link
    /// may exist before the unwinder's entry probe (here in a module that
    /// sorts after the program's).
    #[test]
    fn every_entry_link_is_made_before_any_return_link() {
        let mut work = function(0, "work");
        work.module = PathBuf::from("/opt/app/service");
        let mut more = function(1, "more");
        more.module = PathBuf::from("/opt/app/service");
        let mut raise = function(2, "_Unwind_RaiseException");
        raise.module = PathBuf::from("/usr/lib/libgcc_s.so.1");
        raise.probe = Probe::Throw;
        let mut lib = function(3, "helper");
        lib.module = PathBuf::from("/usr/lib/libhelper.so");
        let functions = [work, raise, more, lib];
        let plan: Vec<(&str, bool, Vec<u64>)> = link_plan(&functions)
            .into_iter()
            .map(|l| (l.module.to_str().unwrap_or_default(), l.ret, l.offsets))
            .collect();
        let [w, r, m, h] = [0, 1, 2, 3].map(|i| functions[i].offset);
        assert_eq!(
            plan,
            vec![
                ("/opt/app/service", false, vec![w, m]),
                ("/usr/lib/libgcc_s.so.1", false, vec![r]),
                ("/usr/lib/libhelper.so", false, vec![h]),
                ("/opt/app/service", true, vec![w, m]),
                ("/usr/lib/libhelper.so", true, vec![h]),
            ]
        );
    }
}
