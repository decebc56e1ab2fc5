//! Request paths to relative paths: a table of inputs and what they become.

use std::path::Path;

use super::{Malformed, SafePath, has_hidden};

/// What a request path should become: the relative path, whether it names
/// a directory and whether it is hidden; or refused.
enum Want {
    Ok(&'static str, bool),
    Hidden(&'static str),
    Err(Malformed),
}

use Want::{Err, Hidden, Ok};

fn check(raw: &str, want: Want) {
    let got = SafePath::parse(raw);
    match (want, got) {
        (Ok(rel, dir), Result::Ok(p)) => {
            assert_eq!(p.relative(), Path::new(rel), "relative path of {raw:?}");
            assert_eq!(p.dir_form, dir, "dir_form of {raw:?}");
            assert!(!p.hidden, "{raw:?} is not hidden");
        }
        (Hidden(rel), Result::Ok(p)) => {
            assert_eq!(p.relative(), Path::new(rel), "relative path of {raw:?}");
            assert!(p.hidden, "{raw:?} is hidden");
        }
        (Err(refusal), Result::Err(got)) => assert_eq!(got, refusal, "refusal of {raw:?}"),
        (_, Result::Err(got)) => panic!("{raw:?} refused with {got:?}, want accepted"),
        (Err(refusal), Result::Ok(p)) => {
            panic!("{raw:?} accepted as {p:?}, want {refusal:?}")
        }
    }
}

#[test]
fn plain_paths() {
    check("/", Ok("", true));
    check("/index.html", Ok("index.html", false));
    check("/a/b/c.txt", Ok("a/b/c.txt", false));
    check("/docs", Ok("docs", false));
    check("/docs/", Ok("docs", true));
    check("//a//b", Ok("a/b", false));
    check("/./a/./b/.", Ok("a/b", false));
    check("/a/b/./", Ok("a/b", true));
    check("/a..b", Ok("a..b", false));
}

#[test]
fn percent_decoding() {
    check("/hello%20world.txt", Ok("hello world.txt", false));
    check("/caf%C3%A9", Ok("café", false));
    check("/a%2fb", Ok("a/b", false));
    check("/a%2Fb%2F", Ok("a/b", true));
    check("/100%", Ok("100%", false));
    check("/%zz", Ok("%zz", false));
    check("/%2e", Ok("", false));
}

#[test]
fn traversal_is_refused() {
    check("/..", Err(Malformed));
    check("/../etc/passwd", Err(Malformed));
    check("/a/../../etc/passwd", Err(Malformed));
    check("/a/..", Err(Malformed));
    check("/a/../b", Err(Malformed));
    check("/%2e%2e/etc/passwd", Err(Malformed));
    check("/%2E%2E/", Err(Malformed));
    check("/.%2e/", Err(Malformed));
    check("/%2e./", Err(Malformed));
    check("/..%2f", Err(Malformed));
    check("/..%2fetc%2fpasswd", Err(Malformed));
    check("/a%2f..%2f..%2fetc", Err(Malformed));
    check("/%252e%252e/", Ok("%2e%2e", true));
}

#[test]
fn backslash_and_nul_are_refused() {
    check("/a\\..\\", Err(Malformed));
    check("/a%5c..%5c", Err(Malformed));
    check("/a%5Cb", Err(Malformed));
    check("/file%00.html", Err(Malformed));
    check("/%00", Err(Malformed));
    check("/\0", Err(Malformed));
}

#[test]
fn not_absolute_is_refused() {
    check("", Err(Malformed));
    check("*", Err(Malformed));
    check("a/b", Err(Malformed));
}

#[test]
fn hidden_segments_are_flagged() {
    check("/.env", Hidden(".env"));
    check("/.git/config", Hidden(".git/config"));
    check("/a/.ssh/", Hidden("a/.ssh"));
    check("/%2egit/config", Hidden(".git/config"));
    check("/...", Hidden("..."));
    check(
        "/.well-known/security.txt",
        Ok(".well-known/security.txt", false),
    );
    // Malformed wins over hidden, whatever the order.
    check("/.git/../x", Err(Malformed));
}

#[test]
fn decoded_paths_are_not_decoded_again() {
    let p = SafePath::from_decoded(b"%2e%2e/x").unwrap();
    assert_eq!(p.relative(), Path::new("%2e%2e/x"));
    assert_eq!(SafePath::from_decoded(b"a/../x"), Result::Err(Malformed));
    assert_eq!(
        SafePath::from_decoded(b"/a/b/").unwrap().relative(),
        Path::new("a/b")
    );
}

#[test]
fn file_name_is_the_last_segment() {
    let name = |raw| {
        SafePath::parse(raw)
            .unwrap()
            .file_name()
            .map(<[u8]>::to_vec)
    };
    assert_eq!(name("/"), None);
    assert_eq!(name("/a.css"), Some(b"a.css".to_vec()));
    assert_eq!(name("/d/b.js/"), Some(b"b.js".to_vec()));
}

#[test]
fn dir_href_is_encoded_and_never_protocol_relative() {
    let href = |raw| SafePath::parse(raw).unwrap().dir_href("");
    assert_eq!(href("/docs"), "/docs/");
    assert_eq!(href("//evil.example"), "/evil.example/");
    assert_eq!(href("/a%20b/c%3Fd"), "/a%20b/c%3Fd/");
    assert_eq!(href("/caf%C3%A9"), "/caf%C3%A9/");
    assert_eq!(href("/"), "/");
    let p = SafePath::parse("/a").unwrap();
    assert_eq!(p.dir_href("/static/"), "/static/a/");
}

#[test]
fn hidden_components_after_resolution() {
    assert!(has_hidden(Path::new("a/.git/config")));
    assert!(has_hidden(Path::new(".env")));
    assert!(!has_hidden(Path::new(".well-known/x")));
    assert!(!has_hidden(Path::new("a/b.c")));
    assert!(!has_hidden(Path::new("")));
}
