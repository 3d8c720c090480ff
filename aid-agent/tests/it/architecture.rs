//! The invariants ARCHITECTURE.md states, checked on the source tree: the
//! layering, a causal engine that knows nothing of BPF, clap and indicatif
//! only in the CLI, a CLI that only parses and prints, a clean `src` root,
//! and an ARCHITECTURE.md that lists exactly the files there are.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// Layer of each top-level module (ARCHITECTURE.md, "Layers").
const LAYERS: &[(&str, u32)] = &[
    ("model", 0),
    ("util", 0),
    ("bitset", 0),
    ("sys", 1),
    ("bpf", 2),
    ("symbols", 2),
    ("store", 2),
    ("predicates", 2),
    ("stats", 3),
    ("causal", 3),
    ("intervene", 4),
    ("analysis", 5),
    ("record", 5),
    ("explain", 6),
    ("bench", 6),
    ("debug", 7),
    ("report", 8),
    ("cli", 9),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src`, relative to it, with its text.
fn sources() -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&src(), &src(), &mut out);
    out
}

/// The top-level module a file belongs to.
fn module_of(file: &str) -> &str {
    file.split('/').next().unwrap().trim_end_matches(".rs")
}

/// Code without comments (doc comments name other modules freely).
fn code(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// Top-level crate modules a file uses: `crate::x` paths, and the items of
/// `use crate::{...}` groups.
fn crate_deps(text: &str) -> BTreeSet<String> {
    let text = code(text);
    let mut deps = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let (mut depth, mut item, mut items) = (1, String::new(), Vec::new());
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => items.push(std::mem::take(&mut item)),
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 && ch != ',' {
                    item.push(ch);
                }
            }
            items.push(item);
            for it in items {
                let name: String =
                    it.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                deps.insert(name);
            }
        } else {
            let name: String =
                rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            deps.insert(name);
        }
    }
    deps.retain(|d| !d.is_empty() && d != "self");
    deps
}

#[test]
fn modules_import_only_lower_layers() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for (file, text) in sources() {
        let module = module_of(&file);
        if module == "lib" || module == "main" {
            continue;
        }
        let own = *layer.get(module).unwrap_or_else(|| panic!("{file}: module not in LAYERS"));
        for dep in crate_deps(&text) {
            if dep == module {
                continue;
            }
            let theirs = *layer.get(dep.as_str()).unwrap_or_else(|| panic!("{file}: uses {dep}"));
            if theirs >= own {
                wrong.push(format!("{file} (layer {own}) uses {dep} (layer {theirs})"));
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
}

#[test]
fn causal_engine_knows_nothing_of_bpf() {
    for (file, text) in sources().iter().filter(|(f, _)| f.starts_with("causal/")) {
        let deps = crate_deps(text);
        let outside: Vec<&String> = deps
            .iter()
            .filter(|d| !["causal", "predicates", "bitset"].contains(&d.as_str()))
            .collect();
        assert!(outside.is_empty(), "{file} uses {outside:?}");
        for forbidden in ["aya", "aid_common", "nix::", "libc::"] {
            assert!(!code(text).contains(forbidden), "{file} mentions {forbidden}");
        }
    }
}

#[test]
fn only_the_cli_knows_clap_and_indicatif() {
    for (file, text) in sources() {
        if file.starts_with("cli/") {
            continue;
        }
        for name in ["clap", "indicatif"] {
            assert!(!text.contains(name), "{file} mentions {name}");
        }
    }
}

#[test]
fn the_cli_only_parses_and_prints() {
    let machinery =
        ["Tracer", "Probes", "Writer", "Follower", "Running", "Splitter", "Recorder", "Controller"];
    for (file, text) in sources().iter().filter(|(f, _)| f.starts_with("cli/")) {
        let code = code(text);
        for word in machinery {
            let used = code.match_indices(word).any(|(i, _)| {
                let next = code[i + word.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            assert!(!used, "{file} drives the {word} itself: move that into the library");
        }
    }
}

#[test]
fn no_module_in_the_root() {
    let root: Vec<String> = sources().into_keys().filter(|f| !f.contains('/')).collect();
    assert_eq!(root, ["lib.rs", "main.rs", "model.rs"]);
}

#[test]
fn architecture_md_matches_the_tree() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .unwrap();
    let listed: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|f| f.ends_with(".rs"))
        .map(str::to_owned)
        .collect();
    let files: BTreeSet<String> =
        sources().into_keys().filter(|f| !f.ends_with("/tests.rs") || listed.contains(f)).collect();
    let missing: Vec<&String> = files.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&files).collect();
    assert!(missing.is_empty(), "not in ARCHITECTURE.md: {missing:?}");
    assert!(stale.is_empty(), "in ARCHITECTURE.md but not in the tree: {stale:?}");
}
