//! Tidy checks: the architecture invariants of ARCHITECTURE.md and the
//! style rules that `grep` can check, run as tests over the source tree.

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines of `path` that are code, not comments.
fn code_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(str::to_owned)
        .collect()
}

/// Files under `crates/CRATE/src` whose code names `needle`, relative to
/// that `src`.
fn naming(krate: &str, needle: &str) -> Vec<String> {
    let src = root().join("crates").join(krate).join("src");
    rust_files(&src)
        .into_iter()
        .filter(|p| code_lines(p).iter().any(|l| l.contains(needle)))
        .map(|p| p.strip_prefix(&src).unwrap().display().to_string())
        .collect()
}

fn all_under(files: &[String], allowed: &[&str]) -> Vec<String> {
    files
        .iter()
        .filter(|f| !allowed.iter().any(|a| f.starts_with(a)))
        .cloned()
        .collect()
}

#[test]
fn every_module_starts_with_a_doc_line() {
    let mut missing = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        for file in rust_files(&krate.unwrap().path().join("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            if !text.starts_with("//!") {
                missing.push(file.display().to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules without a `//!` line: {missing:#?}"
    );
}

#[test]
fn no_trailing_whitespace_in_sources() {
    let mut found = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        for file in rust_files(&krate) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.ends_with(' ') || line.ends_with('\t') {
                    found.push(format!("{}:{}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "trailing whitespace: {found:#?}");
}

#[test]
fn the_engine_never_names_the_framework() {
    // Tracing targets are strings such as "celer::http1"; paths are not.
    let src = root().join("crates/celer-server/src");
    let stray: Vec<_> = rust_files(&src)
        .into_iter()
        .filter(|p| {
            code_lines(p)
                .iter()
                .any(|l| l.replace("\"celer::", "").contains("celer::"))
        })
        .collect();
    assert!(stray.is_empty(), "celer-server names celer: {stray:?}");
    let manifest = std::fs::read_to_string(root().join("crates/celer-server/Cargo.toml")).unwrap();
    assert!(
        !manifest
            .lines()
            .any(|l| l.starts_with("celer ") || l.starts_with("celer.")),
        "celer-server depends on celer"
    );
}

#[test]
fn framework_layers_do_not_import_the_engine() {
    let stray = all_under(
        &naming("celer", "celer_server"),
        // `ws/` is the WebSocket upgrade glue, which hands the engine's
        // upgraded connection to the app (style.md §8.1, invariant 2).
        &["serve.rs", "files/body.rs", "ws/"],
    );
    assert!(stray.is_empty(), "celer_server named in: {stray:?}");
}

#[test]
fn dependency_edges_follow_the_layers() {
    let manifest = |krate: &str| {
        std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap()
    };
    // The load generator does not depend on the server.
    assert!(!manifest("celer-bench").contains("celer-server"));
    // Test support is a dev-dependency only.
    for krate in [
        "celer-server",
        "celer",
        "celer-apps",
        "celer-cli",
        "celer-bench",
    ] {
        let text = manifest(krate);
        let normal = text.split("[dev-dependencies]").next().unwrap();
        assert!(
            !normal.contains("celer-test-support"),
            "{krate} depends on celer-test-support outside [dev-dependencies]"
        );
    }
}
