//! Layouts of the tracepoint records the eBPF programs read, taken from
//! the kernel's own description (`events/<category>/<name>/format` in
//! tracefs) at load time instead of being compiled in: field offsets move
//! between kernel versions and configurations.

use std::path::Path;

/// Where tracefs is mounted (the agent mounts it privately when it is not).
const TRACEFS: &str = "/sys/kernel/tracing";

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("cannot read the format of tracepoint {tracepoint} ({path}): {source}")]
    Read { tracepoint: String, path: String, source: std::io::Error },
    #[error(
        "tracepoint {tracepoint} has no field `{field}` of {size} bytes in its format: this kernel's layout is not supported"
    )]
    Field { tracepoint: String, field: &'static str, size: u32 },
}

/// One field of a tracepoint record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: u32,
    pub size: u32,
}

/// The fields of a `format` file, by name. Lines look like
/// `field:pid_t pid;<TAB>offset:8;<TAB>size:4;<TAB>signed:1;`.
pub fn parse(format: &str) -> Vec<(String, Field)> {
    format
        .lines()
        .filter_map(|line| {
            let mut decl = None;
            let (mut offset, mut size) = (None, None);
            for part in line.trim().split(';') {
                let part = part.trim();
                if let Some(d) = part.strip_prefix("field:") {
                    decl = Some(d);
                } else if let Some(o) = part.strip_prefix("offset:") {
                    offset = o.parse().ok();
                } else if let Some(s) = part.strip_prefix("size:") {
                    size = s.parse().ok();
                }
            }
            // The name is the declaration's last word, without an array
            // suffix (`char comm[16]`).
            let name = decl?.split_whitespace().last()?.split('[').next()?.to_owned();
            Some((name, Field { offset: offset?, size: size? }))
        })
        .collect()
}

/// The offset of `field` (of `size` bytes) in the record of `tracepoint`
/// (`category/name`), as described by `format`.
pub fn offset_in(
    format: &str,
    tracepoint: &str,
    field: &'static str,
    size: u32,
) -> Result<u32, FormatError> {
    parse(format)
        .into_iter()
        .find(|(name, f)| name == field && f.size == size)
        .map(|(_, f)| f.offset)
        .ok_or_else(|| FormatError::Field { tracepoint: tracepoint.to_owned(), field, size })
}

/// Reads the format of `tracepoint` (`category/name`) from tracefs.
pub fn format(tracepoint: &str) -> Result<String, FormatError> {
    let path = Path::new(TRACEFS).join("events").join(tracepoint).join("format");
    std::fs::read_to_string(&path).map_err(|source| FormatError::Read {
        tracepoint: tracepoint.to_owned(),
        path: path.display().to_string(),
        source,
    })
}

/// Offsets of `pid` and `clone_flags` in `task/task_newtask` records.
pub fn newtask_offsets() -> Result<(u32, u32), FormatError> {
    const TP: &str = "task/task_newtask";
    let text = format(TP)?;
    Ok((offset_in(&text, TP, "pid", 4)?, offset_in(&text, TP, "clone_flags", 8)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `task/task_newtask` on Linux 6.18 (x86-64).
    const NEWTASK: &str = "name: task_newtask
ID: 205
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:pid_t pid;\toffset:8;\tsize:4;\tsigned:1;
\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;
\tfield:u64 clone_flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:short oom_score_adj;\toffset:40;\tsize:2;\tsigned:1;

print fmt: \"pid=%d comm=%s clone_flags=%llx oom_score_adj=%hd\", REC->pid, REC->comm, REC->clone_flags, REC->oom_score_adj
";

    #[test]
    fn newtask_fields_of_this_kernel() {
        assert_eq!(offset_in(NEWTASK, "task/task_newtask", "pid", 4).unwrap(), 8);
        assert_eq!(offset_in(NEWTASK, "task/task_newtask", "clone_flags", 8).unwrap(), 32);
        let fields = parse(NEWTASK);
        assert_eq!(fields.len(), 8);
        assert_eq!(fields[5], ("comm".to_owned(), Field { offset: 12, size: 16 }));
    }

    #[test]
    fn moved_field_is_followed() {
        // A kernel that put clone_flags elsewhere (older kernels had no
        // oom_score_adj; others may add fields before it).
        let moved = NEWTASK.replace("offset:32;\tsize:8", "offset:40;\tsize:8");
        assert_eq!(offset_in(&moved, "t", "clone_flags", 8).unwrap(), 40);
    }

    #[test]
    fn missing_or_resized_field_is_refused() {
        let err = offset_in(NEWTASK, "task/task_newtask", "clone_flags", 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tracepoint task/task_newtask has no field `clone_flags` of 4 bytes in its format: this kernel's layout is not supported"
        );
        assert!(offset_in(NEWTASK, "t", "flags", 8).is_err());
    }
}
