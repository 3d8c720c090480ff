//! Who owns what aid writes for a session. Under `sudo` aid runs as root,
//! and a session root owns (its directories are 0700) is one the user who
//! asked for it cannot open: every directory and file aid creates for a
//! session is given to the user and group in `SUDO_UID` and `SUDO_GID`.
//! Without them, or when they are not numbers, or when aid is not root,
//! files keep the owner that created them.

use std::{path::Path, sync::OnceLock};

use nix::{
    fcntl::{AT_FDCWD, AtFlags},
    unistd::{Gid, Uid},
};

/// Gives `path` (a link itself, never what it points to) to the user who
/// ran aid through `sudo`; does nothing otherwise. A failure (a file
/// system that refuses) leaves the file as it was: the session is still
/// written, as it would be without `sudo`.
pub fn hand_over(path: &Path) {
    let Some((uid, gid)) = invoker() else { return };
    if let Err(e) =
        nix::unistd::fchownat(AT_FDCWD, path, Some(uid), Some(gid), AtFlags::AT_SYMLINK_NOFOLLOW)
    {
        log::debug!("cannot give {} to uid {uid}: {e}", path.display());
    }
}

/// The user and group `sudo` ran aid for, read once.
fn invoker() -> Option<(Uid, Gid)> {
    static INVOKER: OnceLock<Option<(Uid, Gid)>> = OnceLock::new();
    *INVOKER.get_or_init(|| {
        let var = |name| std::env::var(name).ok();
        invoker_from(nix::unistd::geteuid(), var("SUDO_UID").as_deref(), var("SUDO_GID").as_deref())
    })
}

/// `SUDO_UID` and `SUDO_GID` when aid runs as root and both are numbers,
/// the user not root (nothing to give) and neither -1 (which `chown`
/// reads as "leave unchanged").
fn invoker_from(euid: Uid, uid: Option<&str>, gid: Option<&str>) -> Option<(Uid, Gid)> {
    if !euid.is_root() {
        return None;
    }
    let number = |text: Option<&str>| text?.parse::<u32>().ok().filter(|&n| n != u32::MAX);
    let uid = number(uid).filter(|&n| n != 0)?;
    Some((Uid::from_raw(uid), Gid::from_raw(number(gid)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_sudo_ids_of_a_root_agent_are_used() {
        let root = Uid::from_raw(0);
        let user = Some((Uid::from_raw(1000), Gid::from_raw(100)));
        assert_eq!(invoker_from(root, Some("1000"), Some("100")), user);
        assert_eq!(invoker_from(Uid::from_raw(1000), Some("1000"), Some("100")), None);
        let root_group = Some((Uid::from_raw(1000), Gid::from_raw(0)));
        assert_eq!(invoker_from(root, Some("1000"), Some("0")), root_group);
        for (uid, gid) in [
            (None, Some("100")),
            (Some("1000"), None),
            (Some(""), Some("100")),
            (Some("alice"), Some("100")),
            (Some("1000"), Some("-1")),
            (Some("-5"), Some("100")),
            (Some("4294967295"), Some("100")),
            (Some("99999999999"), Some("100")),
            (Some("0"), Some("0")),
            (Some(" 1000"), Some("100")),
        ] {
            assert_eq!(invoker_from(root, uid, gid), None, "{uid:?} {gid:?}");
        }
    }
}
