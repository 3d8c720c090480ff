//! Where fields of kernel structures lie, read from the kernel's own type
//! information (BTF, `/sys/kernel/btf/vmlinux`) at load time instead of
//! being compiled in: layouts move between kernel versions and
//! configurations. The thread tracker reads `pid` of a new task through
//! the pointer its raw tracepoint passes, at the offset found here.
//!
//! Only what that needs is decoded: the header, every type's size (to walk
//! the type section), and the members of structures. The format is the
//! kernel's `include/uapi/linux/btf.h`.

use std::path::Path;

/// The running kernel's BTF.
pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error(
        "cannot read the kernel's type information {path}: {source} (aid needs a kernel built with CONFIG_DEBUG_INFO_BTF)"
    )]
    Read { path: String, source: std::io::Error },
    #[error("the kernel's type information is malformed: {0}")]
    Malformed(&'static str),
    #[error(
        "the kernel has no field `{field}` in struct {structure}: this kernel is not supported"
    )]
    NoField { structure: String, field: String },
}

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;

/// Byte offset of `field` in `struct structure` of the running kernel.
pub fn kernel_field_offset(structure: &str, field: &str) -> Result<u32, BtfError> {
    let data = std::fs::read(Path::new(VMLINUX))
        .map_err(|source| BtfError::Read { path: VMLINUX.into(), source })?;
    field_offset(&data, structure, field)
}

/// Byte offset of `field` in the first `struct structure` of the BTF blob
/// `data` (native byte order, as the kernel exposes it).
pub fn field_offset(data: &[u8], structure: &str, field: &str) -> Result<u32, BtfError> {
    let u16_at = |at: usize| -> Result<u16, BtfError> {
        data.get(at..at + 2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
            .ok_or(BtfError::Malformed("truncated"))
    };
    let u32_at = |at: usize| -> Result<u32, BtfError> {
        data.get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or(BtfError::Malformed("truncated"))
    };
    if u16_at(0)? != MAGIC {
        return Err(BtfError::Malformed("bad magic (or foreign byte order)"));
    }
    let hdr_len = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
    let strings = data
        .get(hdr_len + str_off..hdr_len + str_off + str_len)
        .ok_or(BtfError::Malformed("string section out of bounds"))?;
    let name = |off: u32| -> &[u8] {
        let rest = strings.get(off as usize..).unwrap_or(&[]);
        &rest[..rest.iter().position(|b| *b == 0).unwrap_or(rest.len())]
    };
    let mut at = hdr_len + type_off;
    let end = at + type_len;
    while at < end {
        let (name_off, info) = (u32_at(at)?, u32_at(at + 4)?);
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let kind_flag = info >> 31 == 1;
        at += 12;
        if kind == KIND_STRUCT && name(name_off) == structure.as_bytes() {
            for m in 0..vlen {
                let member = at + 12 * m;
                if name(u32_at(member)?) == field.as_bytes() {
                    let offset = u32_at(member + 8)?;
                    // With kind_flag, the high byte is a bitfield's size.
                    let bits = if kind_flag { offset & 0x00ff_ffff } else { offset };
                    return Ok(bits / 8);
                }
            }
            return Err(no_field(structure, field));
        }
        at += match kind {
            1 | 14 | 17 => 4,          // int, var, decl_tag
            3 => 12,                   // array
            4 | 5 => 12 * vlen,        // struct, union: members
            6 | 13 => 8 * vlen,        // enum, func_proto
            15 | 19 => 12 * vlen,      // datasec, enum64
            2 | 7..=12 | 16 | 18 => 0, // ptr, fwd, typedef, qualifiers, func, float, type_tag
            _ => return Err(BtfError::Malformed("unknown type kind")),
        };
    }
    Err(no_field(structure, field))
}

fn no_field(structure: &str, field: &str) -> BtfError {
    BtfError::NoField { structure: structure.into(), field: field.into() }
}

/// Offset of `pid` in `struct task_struct`.
pub fn task_pid_offset() -> Result<u32, BtfError> {
    kernel_field_offset("task_struct", "pid")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-type blob: `int` and `struct s { int a; int b; }` with b at
    /// byte 4 (bit 32).
    fn blob(kind_flag: bool) -> Vec<u8> {
        let strings = b"\0int\0s\0a\0b\0";
        let mut types = Vec::new();
        let mut word = |w: u32| types.extend_from_slice(&w.to_ne_bytes());
        // int: name "int", kind 1, size 4, encoding word
        word(1);
        word(1 << 24);
        word(4);
        word(32);
        // struct s, 2 members
        word(5);
        word((4 << 24) | 2 | if kind_flag { 1 << 31 } else { 0 });
        word(8);
        for (name, bits) in [(7u32, 0u32), (9, 32)] {
            word(name);
            word(1);
            word(bits);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_ne_bytes());
        out.extend_from_slice(&[1, 0]);
        for w in [24u32, 0, types.len() as u32, types.len() as u32, strings.len() as u32] {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.extend_from_slice(&types);
        out.extend_from_slice(strings);
        out
    }

    #[test]
    fn member_offsets_in_bytes() {
        assert_eq!(field_offset(&blob(false), "s", "b").unwrap(), 4);
        assert_eq!(field_offset(&blob(true), "s", "b").unwrap(), 4);
        assert_eq!(field_offset(&blob(false), "s", "a").unwrap(), 0);
        assert_eq!(
            field_offset(&blob(false), "s", "c").unwrap_err().to_string(),
            "the kernel has no field `c` in struct s: this kernel is not supported"
        );
        assert!(field_offset(&blob(false)[..20], "s", "a").is_err());
        assert!(field_offset(b"not btf at all", "s", "a").is_err());
    }

    /// The running kernel's task_struct has a pid, well inside the struct.
    #[test]
    fn this_kernel_has_task_pid() {
        if !Path::new(VMLINUX).exists() {
            eprintln!("skipped: no {VMLINUX}");
            return;
        }
        let off = task_pid_offset().unwrap();
        assert!(off > 0 && off < 16384, "{off}");
    }
}
