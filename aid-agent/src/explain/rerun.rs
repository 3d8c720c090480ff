//! Starting the program a session was recorded from again, for the
//! explainers that re-run it (`compare`, `slice --verify`, watchpoint
//! runs): the same command, failure rules and traced functions, which
//! must still be where they were recorded.

use std::{ffi::OsString, path::Path, time::Duration};

use anyhow::bail;

use crate::{
    bpf::{LoadOptions, Programs},
    model::Function,
    record::{
        fail::RunPolicy,
        start::{self, ProgramSession},
    },
    store::{Loaded, Mode},
    symbols::Module,
};

/// A session that re-runs the program `loaded` was recorded from, with
/// the same functions traced (and aid's own probes), stored in `out`.
pub fn restart(
    loaded: &Loaded,
    out: &Path,
    timeout: Duration,
    load: LoadOptions,
) -> anyhow::Result<(ProgramSession, RunPolicy)> {
    let header = &loaded.header;
    if header.mode == Mode::Attach || header.command.is_empty() {
        bail!(
            "the session was recorded by attaching to a running process, which aid cannot restart: record it with `aid-agent record` instead"
        );
    }
    let argv: Vec<OsString> = header.command.iter().map(OsString::from).collect();
    let policy = RunPolicy::new(&header.fail_rules, timeout)?;
    let user: Vec<Function> =
        loaded.session.functions.iter().filter(|f| !f.internal).cloned().collect();
    let session = start::program(
        Mode::Debug,
        &argv,
        &policy.texts,
        load,
        Some(out),
        &crate::store::Destination::Session,
        Programs::Record,
        &crate::symbols::DebugSearch::default(),
        &mut crate::record::progress::Quiet,
        |r, _| {
            unchanged(r.executable(), &user)?;
            Ok(user.clone())
        },
        |_, _, _| Ok(()),
    )?;
    Ok((session, policy))
}

/// The session's functions must still be where they were recorded.
fn unchanged(exe: &Module, functions: &[Function]) -> anyhow::Result<()> {
    for (i, f) in functions.iter().enumerate() {
        anyhow::ensure!(f.id as usize == i, "session function ids are not in order");
        if f.module == exe.path {
            let same = exe.symbols.iter().any(|s| s.raw == f.symbol && s.offset == f.offset);
            anyhow::ensure!(
                same,
                "{} changed since the session was recorded ({} is not where it was): record a new session",
                exe.path.display(),
                f.name
            );
        } else {
            anyhow::ensure!(
                Path::new(&f.module).exists(),
                "{} (of {}) is gone: record a new session",
                f.module.display(),
                f.name
            );
        }
    }
    Ok(())
}
