//! `-l/--list PATTERN`, as `bpftrace -l` does for probes: which functions
//! a pattern matches in a program (or a running process and its
//! libraries), with the library and address of each, without attaching
//! anything or needing privileges.

use std::{ffi::OsString, path::PathBuf};

use crate::{
    model::{Function, SourceLoc},
    symbols::Resolver,
    sys::spawn::Target,
};

/// Where the patterns are resolved.
pub enum ListIn<'a> {
    /// The executable of a command line (its libraries by `lib:` prefix).
    Program(&'a [OsString]),
    /// A running process: its executable and mapped libraries.
    Process(u32),
}

/// One matching function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub module: PathBuf,
    /// Demangled, as patterns match it.
    pub name: String,
    /// As written in the ELF file: what a uprobe names.
    pub symbol: String,
    /// ELF virtual address.
    pub address: u64,
    pub source: Option<SourceLoc>,
    /// Copies the compiler inlined into other functions (DWARF): calls
    /// there never reach the probe.
    pub inlined: u32,
}

/// Every function `patterns` match, in pattern order, each once.
pub fn list(target: ListIn<'_>, patterns: &[String]) -> anyhow::Result<Vec<Listed>> {
    let mut resolver = match target {
        ListIn::Program(command) => Resolver::for_executable(&Target::from_argv(command)?.program)?,
        ListIn::Process(pid) => Resolver::for_process(pid)?,
    };
    let functions: Vec<Function> = resolver.resolve(patterns)?;
    Ok(functions
        .into_iter()
        .map(|f| Listed {
            inlined: resolver.inlined(&f.module, f.address),
            module: f.module,
            name: f.name,
            symbol: f.symbol,
            address: f.address,
            source: f.source,
        })
        .collect())
}
