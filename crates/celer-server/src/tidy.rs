//! Tidy checks: the module boundaries of this crate, checked on its source
//! text so that a new edge shows up as a failing test rather than in
//! review (rust-analyzer's `tidy.rs`).
//!
//! Comments are skipped: only code names a module or a crate.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/` but this one, with its path relative to `src/` (`/`
/// separated) and its code lines (comment lines dropped).
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path: PathBuf = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tidy.rs") {
                let rel = path.strip_prefix(&root).unwrap();
                let rel = rel.to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text
                    .lines()
                    .filter(|line| !line.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n");
                files.push((rel, code));
            }
        }
    }
    assert!(files.len() > 20, "found only {} sources", files.len());
    files
}

/// True when `code` names `path` (such as `h2::`) as a path of its own,
/// not as the end of a longer name.
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The files that name `path` and are not allowed to.
fn offenders(path: &str, allowed: impl Fn(&str) -> bool) -> Vec<String> {
    sources()
        .into_iter()
        .filter(|(file, code)| !allowed(file) && names(code, path))
        .map(|(file, _)| file)
        .collect()
}

#[test]
fn http1_and_http2_never_name_each_other() {
    let in_http1 = |file: &str| !file.starts_with("http1/");
    let in_http2 = |file: &str| !file.starts_with("http2/");
    for path in ["http2::", "crate::http2", "super::http2"] {
        assert_eq!(offenders(path, in_http1), Vec::<String>::new(), "{path}");
    }
    for path in ["http1::", "crate::http1", "super::http1"] {
        assert_eq!(offenders(path, in_http2), Vec::<String>::new(), "{path}");
    }
}

#[test]
fn tls_names_no_protocol_engine() {
    let outside_tls = |file: &str| !file.starts_with("tls/");
    for path in [
        "http1::",
        "http2::",
        "crate::http1",
        "crate::http2",
        "crate::proto",
    ] {
        assert_eq!(offenders(path, outside_tls), Vec::<String>::new(), "{path}");
    }
}

#[test]
fn only_tls_names_rustls_and_webpki() {
    for name in ["rustls", "webpki"] {
        let found = offenders(name, |file| file.starts_with("tls/"));
        assert_eq!(found, Vec::<String>::new(), "{name}");
    }
}

#[test]
fn only_http2_names_h2() {
    let found = offenders("h2::", |file| file.starts_with("http2/"));
    assert_eq!(found, Vec::<String>::new());
}

/// httparse parses request heads (`http1::parse`) and the trailer section
/// of a chunked body (`http1::decode`); nothing else names it.
#[test]
fn only_the_http1_codecs_name_httparse() {
    let found = offenders("httparse", |file| {
        file == "http1/parse.rs" || file.starts_with("http1/parse/") || file == "http1/decode.rs"
    });
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert!(names("use h2::server;", "h2::"));
    assert!(!names("use crate::http2::body;", "h2::"));
    assert!(!names("let sh2::x", "h2::"));
    let h2_users = sources()
        .into_iter()
        .filter(|(_, code)| names(code, "h2::"))
        .count();
    assert!(
        h2_users > 0,
        "no file names h2: the check would pass vacuously"
    );
}
