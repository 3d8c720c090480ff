//! Finding a shared library by the name a user gives (`libc`,
//! `libc.so.6`, a path): among the files a running process has mapped, or
//! among the libraries an executable needs, searched the way the dynamic
//! loader would (RUNPATH, LD_LIBRARY_PATH, ld.so.conf, default dirs).

use std::{
    collections::{BTreeSet, VecDeque},
    path::{Path, PathBuf},
};

use super::Module;

const DEFAULT_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];

/// Does file name `file` answer to the user's `name` ("libc" answers for
/// "libc.so.6" and "libc-2.36.so")?
fn answers_to(file: &str, name: &str) -> bool {
    file == name
        || file
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with(".so") || rest.starts_with('-'))
}

pub fn find_library(name: &str, exe: &Module, mapped: &[PathBuf]) -> Option<PathBuf> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return path.exists().then_some(path);
    }
    if let Some(p) = mapped
        .iter()
        .find(|p| p.file_name().is_some_and(|f| answers_to(&f.to_string_lossy(), name)))
    {
        return Some(p.clone());
    }
    if !mapped.is_empty() {
        return None;
    }
    // Breadth-first over DT_NEEDED, as the loader would see them.
    let dirs = search_dirs(exe);
    let mut queue: VecDeque<String> = exe.needed.iter().cloned().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some(needed) = queue.pop_front() {
        if !seen.insert(needed.clone()) || seen.len() > 256 {
            continue;
        }
        let Some(path) = locate(&needed, &dirs) else { continue };
        if answers_to(&needed, name) {
            return Some(path);
        }
        if let Ok(module) = Module::load(&path, None) {
            queue.extend(module.needed.iter().cloned());
        }
    }
    // A library the program dlopen()s: look for it directly.
    dirs.iter().find_map(|d| {
        std::fs::read_dir(d)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().is_some_and(|f| answers_to(&f.to_string_lossy(), name)))
    })
}

fn locate(file: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(file)).find(|p| p.exists())
}

fn search_dirs(exe: &Module) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = exe.runpath.clone();
    if let Ok(paths) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(paths.split(':').filter(|p| !p.is_empty()).map(PathBuf::from));
    }
    dirs.extend(ld_so_conf_dirs(Path::new("/etc/ld.so.conf"), 0));
    dirs.extend(DEFAULT_DIRS.iter().map(PathBuf::from));
    dirs
}

fn ld_so_conf_dirs(conf: &Path, depth: u32) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(conf) else { return Vec::new() };
    let mut dirs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(glob) = line.strip_prefix("include").map(str::trim) {
            if depth > 4 {
                continue;
            }
            let (dir, pattern) = match glob.rsplit_once('/') {
                Some((d, p)) => (PathBuf::from(d), p.to_owned()),
                None => (PathBuf::from("/etc"), glob.to_owned()),
            };
            let Ok(matcher) = globset::Glob::new(&pattern).map(|g| g.compile_matcher()) else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            let mut files: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|f| matcher.is_match(f)))
                .collect();
            files.sort();
            for f in files {
                dirs.extend(ld_so_conf_dirs(&f, depth + 1));
            }
        } else {
            dirs.push(PathBuf::from(line));
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::answers_to;

    #[test]
    fn short_names_answer_for_versioned_files() {
        assert!(answers_to("libc.so.6", "libc"));
        assert!(answers_to("libc.so.6", "libc.so.6"));
        assert!(answers_to("libc-2.36.so", "libc"));
        assert!(!answers_to("libcrypto.so.3", "libc"));
    }
}
