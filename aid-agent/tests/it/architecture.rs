//! The invariants ARCHITECTURE.md states, checked on the source tree: the
//! layering, a causal engine that knows nothing of BPF, clap and indicatif
//! only in the CLI, a CLI that only parses and prints, a clean `src` root,
//! no files importing each other in a circle, one home for identity across
//! runs, retired names gone, and an ARCHITECTURE.md that lists exactly the
//! files there are, and files and functions that stay lean.

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
    ("fleet", 6),
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

/// The `.rs` files ARCHITECTURE.md lists in its table rows under the
/// section whose heading starts with `heading`, up to the next section.
fn listed_under(heading: &str) -> BTreeSet<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .unwrap();
    let (_, section) = doc.split_once(heading).unwrap_or_else(|| panic!("no {heading:?}"));
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|f| f.ends_with(".rs"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn architecture_md_matches_the_tree() {
    let listed = listed_under("## Modules of `aid-agent/src`");
    let files: BTreeSet<String> =
        sources().into_keys().filter(|f| !f.ends_with("/tests.rs") || listed.contains(f)).collect();
    let missing: Vec<&String> = files.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&files).collect();
    assert!(missing.is_empty(), "not in ARCHITECTURE.md: {missing:?}");
    assert!(stale.is_empty(), "in ARCHITECTURE.md but not in the tree: {stale:?}");
}

/// A file's module path: `a/b.rs` is `a::b`, `a/mod.rs` is `a`.
fn module_path(file: &str) -> Vec<String> {
    let mut parts: Vec<String> =
        file.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The paths a `use` tree names, in full: `a::{b, c::{d}}` is `a::b` and
/// `a::c::d`.
fn use_paths(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let name = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.to_vec();
        path.extend(name.split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned));
        out.push(path);
        return;
    };
    let mut head = prefix.to_vec();
    head.extend(
        tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned),
    );
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut item) = (0, String::new());
    for ch in inner.chars().chain(std::iter::once(',')) {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                if !item.trim().is_empty() {
                    use_paths(&item, &head, out);
                }
                item.clear();
                continue;
            }
            _ => {}
        }
        item.push(ch);
    }
}

/// The files of `src` each file imports from (`use` trees and inline
/// `crate::`/`super::` paths), tests left out. A `mod.rs` is not said to
/// import the files of its own module: declaring and re-exporting them is
/// what it is for.
fn file_imports() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let by_path: BTreeMap<Vec<String>, String> =
        files.keys().map(|f| (module_path(f), f.clone())).collect();
    let resolve = |path: &[String], own: &[String]| -> Option<String> {
        let (mut full, mut rest) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "super" | "self" => (own.to_vec(), path),
            _ => return None,
        };
        while let Some(step) = rest.first().filter(|s| *s == "super" || *s == "self") {
            if step == "super" {
                full.pop();
            }
            rest = &rest[1..];
        }
        full.extend(rest.iter().cloned());
        (1..=full.len()).rev().find_map(|k| by_path.get(&full[..k]).cloned())
    };
    let mut out = BTreeMap::new();
    for (file, text) in &files {
        let own = module_path(file);
        let text = code(text);
        let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or(&text);
        let mut paths = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("use ") {
            let boundary = !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
            rest = &rest[i + 4..];
            if let Some(end) = rest.find(';').filter(|_| boundary) {
                use_paths(&rest[..end], &[], &mut paths);
            }
        }
        for start in ["crate::", "super::"] {
            for (i, _) in text.match_indices(start) {
                let path: String = text[i..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                paths.push(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
            }
        }
        let deps: BTreeSet<String> = paths
            .iter()
            .filter_map(|p| resolve(p, &own))
            .filter(|dep| dep != file)
            .filter(|dep| {
                let theirs = module_path(dep);
                let declares = (file.ends_with("mod.rs") || file == "lib.rs")
                    && theirs.len() > own.len()
                    && theirs.starts_with(&own);
                !declares
            })
            .collect();
        out.insert(file.clone(), deps);
    }
    out
}

/// No two files import each other, directly or around a circle (issue 26:
/// a circle is one room in two files; open it by moving what both need to
/// the lower one).
#[test]
fn no_files_import_each_other_in_a_circle() {
    let imports = file_imports();
    let mut circles = Vec::new();
    for start in imports.keys() {
        // Depth-first from `start`, keeping the way there; a circle is
        // reported once, from its smallest file.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, way)) = stack.pop() {
            for next in &imports[&at] {
                if next == start {
                    circles.push(way.join(" -> ") + " -> " + start);
                } else if next > start && seen.insert(next.clone()) {
                    let mut w = way.clone();
                    w.push(next.clone());
                    stack.push((next.clone(), w));
                }
            }
        }
    }
    assert!(circles.is_empty(), "files importing each other:\n{}", circles.join("\n"));
}

/// The identity of threads and objects across runs has one home (issue 26:
/// it was solved once in predicates and again in the explainers):
/// `model/identity.rs` alone defines its classes, role names and first
/// appearances. Callers choose a grain and how to write a name, not a rule.
#[test]
fn one_identity_layer() {
    const HOME: &str = "model/identity.rs";
    let items = [
        "struct Classes",
        "fn class_name",
        "struct RoleNames",
        "struct ObjectName",
        "struct FirstAppearances",
        "enum Slot",
        "fn is_pointer",
        "fn looks_like_address",
        "fn frees",
    ];
    let mut found = Vec::new();
    let mut home = Vec::new();
    for (file, text) in sources() {
        let code = code(&text);
        for item in items {
            let defined = code.match_indices(item).any(|(i, _)| {
                let next = code[i + item.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if defined && file == HOME {
                home.push(item);
            } else if defined {
                found.push(format!("{file} defines `{item}`: use {HOME}"));
            }
        }
    }
    assert!(found.is_empty(), "identity outside its home:\n{}", found.join("\n"));
    assert_eq!(home, items, "{HOME} no longer defines them all");
}

/// Names the house gave up, each because it meant two things (issue 26):
/// `watch` is for hardware watchpoints only; `worker#2` is the second
/// `worker` thread everywhere, never role 2 (`Run::role_name` wrote that).
const RETIRED: &[(&str, &str)] = &[
    ("HangWatch", "a hang check is not a watchpoint: HangCheck"),
    ("MAP_WATCH", "kernel-stamped sites are stamps: MAP_STAMPS"),
    ("AID_WATCH", "kernel-stamped sites are stamps: AID_STAMPS"),
    ("plan.watch", "kernel-stamped sites are stamps: Plan::stamp"),
    ("probes.watch(", "kernel-stamped sites are stamps: Probes::stamp"),
    ("record::watched", "no such module: record::watchpoints"),
    ("explain::roles", "role names live in model::identity"),
    ("predicates::classes", "thread classes live in model::identity"),
    ("fn role_name", "a thread is written by model::identity::RoleNames"),
];

#[test]
fn retired_names_stay_retired() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut texts: Vec<(String, String)> =
        sources().into_iter().map(|(f, t)| (format!("aid-agent/src/{f}"), t)).collect();
    for dir in ["aid-common/src", "aid-ebpf/src", "docs"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let path = entry.path();
            if let Ok(text) = std::fs::read_to_string(&path) {
                texts.push((format!("{dir}/{}", entry.file_name().to_string_lossy()), text));
            }
        }
    }
    let mut found = Vec::new();
    for (file, text) in &texts {
        for (name, why) in RETIRED {
            let hit = text.match_indices(name).any(|(i, _)| {
                let next = text[i + name.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if hit {
                found.push(format!("{file}: `{name}` ({why})"));
            }
        }
    }
    assert!(found.is_empty(), "retired names:\n{}", found.join("\n"));
}

/// The benchmarks crate's section lists every `.rs` file of `bench/` (its
/// binary, benches and tests), and the agent has no benchmark module.
#[test]
fn architecture_md_lists_the_benchmarks_crate() {
    let listed = listed_under("## The benchmarks crate");
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench");
    let mut files = BTreeSet::new();
    for dir in ["src", "benches", "tests"] {
        let Ok(entries) = std::fs::read_dir(bench.join(dir)) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".rs") {
                files.insert(format!("bench/{dir}/{name}"));
            }
        }
    }
    assert!(files.contains("bench/src/main.rs"), "no benchmarks crate: {files:?}");
    let missing: Vec<&String> = files.difference(&listed).collect();
    let stale: Vec<&String> = listed.difference(&files).collect();
    assert!(missing.is_empty(), "not in ARCHITECTURE.md: {missing:?}");
    assert!(stale.is_empty(), "in ARCHITECTURE.md but not in the tree: {stale:?}");
    assert!(!src().join("bench").exists() && !src().join("cli/bench.rs").exists());
}

/// A file's lines, at most ("about 800", issue 26).
const FILE_LINES: usize = 850;
/// A function's lines, at most, unless a comment above it says why it is
/// long ("Long (…)").
const FN_LINES: usize = 120;

/// The functions of `text` longer than [`FN_LINES`] with no "Long"
/// reason in the comment lines above them: (name, lines). A function is
/// from its `fn` line to the first line that closes it at its own
/// indentation; a body on the `fn` line itself (`{}`) is one line.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let after_vis = body
            .strip_prefix("pub(crate) ")
            .or_else(|| body.strip_prefix("pub(super) "))
            .or_else(|| body.strip_prefix("pub "))
            .unwrap_or(body);
        let after_kw = after_vis
            .strip_prefix("async ")
            .or_else(|| after_vis.strip_prefix("const "))
            .or_else(|| after_vis.strip_prefix("unsafe "))
            .unwrap_or(after_vis);
        let Some(sig) = after_kw.strip_prefix("fn ") else { continue };
        if line.trim_end().ends_with('}') || line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let close = format!("{indent}}}");
        let Some(end) =
            lines[i + 1..].iter().position(|l| *l == close || l.starts_with(&format!("{close};")))
        else {
            continue;
        };
        // A trait's method without a body ends at `;` on a later line.
        if lines[i..=i + 1 + end].iter().any(|l| {
            l.trim_end().ends_with(';')
                && l.starts_with(indent)
                && !l[indent.len()..].starts_with(' ')
        }) {
            continue;
        }
        let n = end + 2;
        let reason = lines[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with("//") || t.starts_with("#[")
            })
            .any(|l| l.contains("Long ("));
        if n > FN_LINES && !reason {
            out.push((name, n));
        }
    }
    out
}

#[test]
fn files_and_functions_stay_lean() {
    let mut fat = Vec::new();
    for (file, text) in sources() {
        let n = text.lines().count();
        if n > FILE_LINES {
            fat.push(format!("{file}: {n} lines (at most {FILE_LINES})"));
        }
        for (name, n) in long_functions(&text) {
            fat.push(format!("{file}: fn {name}, {n} lines (at most {FN_LINES}, or a \"Long (…)\" reason above it)"));
        }
    }
    assert!(fat.is_empty(), "{}", fat.join("\n"));
}

#[test]
fn a_long_function_is_found_and_a_reason_excuses_it() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let long = format!("fn big() {{\n{}}}\n", body(FN_LINES));
    assert_eq!(long_functions(&long), vec![("big".to_owned(), FN_LINES + 2)]);
    let excused = format!("/// Long (a match).\n{long}");
    assert!(long_functions(&excused).is_empty());
    let short = format!("    pub fn small(&self) {{\n{}    }}\n", body(FN_LINES - 2));
    assert!(long_functions(&short).is_empty());
    assert!(long_functions("trait T {\n    fn f(&self) {}\n    fn g(&self);\n}\n").is_empty());
}
