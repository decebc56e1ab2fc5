//! Compile-fail tests of the three usual handler mistakes: each case in
//! `tests/compile-fail/` is checked as a program of its own and must fail
//! with the messages its `//~ expect:` lines name. The assertions are on
//! our `#[diagnostic::on_unimplemented]` text (and the names of types in
//! the compiler's own note), not on the compiler's whole output, which
//! changes between versions.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A first check compiles the framework and its dependencies.
const CHECK_TIMEOUT: Duration = Duration::from_secs(900);

fn project() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-fail");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let celer = env!("CARGO_MANIFEST_DIR");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"compile-fail\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             publish = false\n\n[dependencies]\nceler = {{ path = {celer:?} }}\n\n[workspace]\n"
        ),
    )
    .unwrap();
    // The workspace's lock file: the same versions, and no registry access.
    let lock = Path::new(celer).join("../../Cargo.lock");
    std::fs::copy(lock, dir.join("Cargo.lock")).unwrap();
    dir
}

/// `cargo check` of `source` as the project's `main.rs`: its stderr, and
/// whether it failed.
fn check(dir: &Path, source: &str) -> (bool, String) {
    std::fs::write(dir.join("src/main.rs"), source).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut child = Command::new(cargo)
        .args(["check", "--offline", "--color", "never"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env("CARGO_INCREMENTAL", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cargo");
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(CHECK_TIMEOUT) {
        Ok(status) => status.expect("cargo check ran"),
        Err(_) => {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            panic!("cargo check took more than {CHECK_TIMEOUT:?}");
        }
    };
    (!status.success(), reader.join().unwrap())
}

#[test]
fn the_three_handler_mistakes_should_be_explained() {
    let dir = project();
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compile-fail");
    let mut names: Vec<_> = std::fs::read_dir(&cases)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    for case in names {
        let source = std::fs::read_to_string(&case).unwrap();
        let expected: Vec<&str> = source
            .lines()
            .filter_map(|line| line.strip_prefix("//~ expect: "))
            .collect();
        assert!(!expected.is_empty(), "{case:?} expects nothing");
        let (failed, stderr) = check(&dir, &source);
        assert!(failed, "{case:?} compiled:\n{stderr}");
        for message in expected {
            assert!(
                stderr.contains(message),
                "{case:?}: no {message:?} in:\n{stderr}"
            );
        }
    }
}
