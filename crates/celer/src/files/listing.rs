//! Directory listings: an HTML page of a directory's entries, sorted by
//! name, names HTML-escaped and links percent-encoded.

use std::fmt::Write as _;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use percent_encoding::percent_encode;

use super::path::{SEGMENT, is_hidden};

/// Most entries shown in one listing; past it the page says how many were
/// left out. Bounds the time and memory one request can cost.
pub const MAX_LISTING_ENTRIES: usize = 10_000;

/// The page for directory `dir`, shown at `title` (the request path, not
/// yet escaped). Hidden entries are left out unless `hidden` is true.
pub(crate) fn page(dir: &Path, title: &str, hidden: bool) -> io::Result<String> {
    page_at_most(dir, title, hidden, MAX_LISTING_ENTRIES)
}

/// [`page`] showing at most `max` entries.
fn page_at_most(dir: &Path, title: &str, hidden: bool, max: usize) -> io::Result<String> {
    let mut entries: Vec<(Vec<u8>, bool)> = Vec::new();
    let mut left_out = 0usize;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().as_bytes().to_vec();
        if !hidden && is_hidden(&name) {
            continue;
        }
        if entries.len() == max {
            left_out += 1;
            continue;
        }
        // A symlink is shown as what it points to; a broken one as a file.
        let is_dir = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
        entries.push((name, is_dir));
    }
    entries.sort_unstable();
    Ok(render(title, &entries, left_out))
}

fn render(title: &str, entries: &[(Vec<u8>, bool)], left_out: usize) -> String {
    let mut out = String::with_capacity(256 + entries.len() * 96);
    let title = escape(title);
    let _ = write!(
        out,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">\
         <title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n\
         <li><a href=\"../\">../</a></li>\n"
    );
    for (name, is_dir) in entries {
        let slash = if *is_dir { "/" } else { "" };
        let href = escape(&percent_encode(name, SEGMENT).to_string());
        let text = escape(&String::from_utf8_lossy(name));
        // `./` keeps a name like `a:b` from reading as a URL scheme.
        let _ = writeln!(
            out,
            "<li><a href=\"./{href}{slash}\">{text}{slash}</a></li>"
        );
    }
    out.push_str("</ul>\n");
    if left_out > 0 {
        let _ = writeln!(out, "<p>{left_out} more entries not shown.</p>");
    }
    out.push_str("</body></html>\n");
    out
}

/// Escapes text for HTML content and quoted attributes (also the OpenAPI
/// page's).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_encoded_and_sorted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        for name in ["b.txt", "<script>&\"'.html", "a b", ".hidden"] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        let html = page(&dir, "/x/<y>/", false).unwrap();
        assert!(html.contains("<title>Index of /x/&lt;y&gt;/</title>"));
        assert!(
            html.contains(
                "<a href=\"./%3Cscript%3E&amp;%22%27.html\">&lt;script&gt;&amp;&quot;&#39;.html</a>"
            ),
            "{html}"
        );
        assert!(html.contains("<a href=\"./a%20b\">a b</a>"));
        assert!(html.contains("<a href=\"./sub/\">sub/</a>"));
        assert!(!html.contains("hidden"));
        let order: Vec<usize> = ["./%3Cscript", "./a%20b", "./b.txt", "./sub/"]
            .iter()
            .map(|n| html.find(n).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{html}");
        assert!(page(&dir, "/", true).unwrap().contains(".hidden"));
    }

    #[test]
    fn listings_stop_at_the_limit_and_say_so() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(tmp.path().join(format!("f{i}")), "x").unwrap();
        }
        let html = page_at_most(tmp.path(), "/", false, 3).unwrap();
        assert_eq!(html.matches("<li>").count(), 1 + 3, "{html}");
        assert!(html.contains("<p>2 more entries not shown.</p>"), "{html}");
        let html = page_at_most(tmp.path(), "/", false, 5).unwrap();
        assert!(!html.contains("more entries"), "{html}");
    }
}
