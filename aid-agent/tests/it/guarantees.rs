//! docs/guarantees.md names, for every promise, the test that keeps it:
//! each name it gives must be a test that exists.

use std::path::Path;

#[test]
fn every_test_named_in_guarantees_md_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/guarantees.md")).unwrap();
    let mut checked = 0;
    for name in doc.split('`').skip(1).step_by(2) {
        let parts: Vec<&str> = name.split("::").collect();
        if parts.len() < 2
            || !parts.iter().all(|p| p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            continue;
        }
        let (test, path) = parts.split_last().unwrap();
        let file = if path.last() == Some(&"tests") {
            // A unit test: `module::path::tests::name`, in the module's
            // file or in its own `tests.rs` beside it.
            let module = path[..path.len() - 1].join("/");
            let candidates = [
                root.join(format!("src/{module}/tests.rs")),
                root.join(format!("src/{module}.rs")),
                root.join(format!("src/{module}/mod.rs")),
            ];
            let has = |p: &std::path::PathBuf| {
                std::fs::read_to_string(p).is_ok_and(|t| t.contains(&format!("fn {test}()")))
            };
            candidates.iter().find(|p| has(p)).or(candidates.iter().find(|p| p.exists())).cloned()
        } else {
            Some(root.join(format!("tests/it/{}.rs", path.join("/"))))
        };
        let file = file.unwrap_or_else(|| panic!("`{name}`: no such module"));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|_| panic!("`{name}`: no {}", file.display()));
        assert!(
            text.contains(&format!("fn {test}()")),
            "`{name}`: no test `{test}` in {}",
            file.display()
        );
        checked += 1;
    }
    assert!(checked > 40, "only {checked} test names found");
}
