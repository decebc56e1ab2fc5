//! Content types by file extension.
//!
//! Text types carry `; charset=utf-8`: files are assumed to be UTF-8, which
//! is what every current editor writes. Unknown extensions are served as
//! `application/octet-stream` so a browser never guesses.

/// Served when the extension is unknown or missing.
pub(crate) const OCTET_STREAM: &str = "application/octet-stream";

/// The longest extension in the table.
const MAX_EXT: usize = 11;

/// The content type for a file name, from its extension (case-insensitive).
pub(crate) fn content_type(name: &[u8]) -> &'static str {
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return OCTET_STREAM;
    };
    let ext = &name[dot + 1..];
    if ext.is_empty() || ext.len() > MAX_EXT {
        return OCTET_STREAM;
    }
    let mut lower = [0u8; MAX_EXT];
    let lower = &mut lower[..ext.len()];
    lower.copy_from_slice(ext);
    lower.make_ascii_lowercase();
    by_extension(lower)
}

/// The table. Its order follows kinds (text, code, images, fonts, media,
/// archives) for reading; a `match` on byte strings needs no sorting.
fn by_extension(ext: &[u8]) -> &'static str {
    match ext {
        b"html" | b"htm" => "text/html; charset=utf-8",
        b"css" => "text/css; charset=utf-8",
        b"txt" | b"text" | b"log" => "text/plain; charset=utf-8",
        b"md" | b"markdown" => "text/markdown; charset=utf-8",
        b"csv" => "text/csv; charset=utf-8",
        b"xml" => "text/xml; charset=utf-8",
        b"ics" => "text/calendar; charset=utf-8",
        b"js" | b"mjs" => "text/javascript; charset=utf-8",
        b"json" | b"map" => "application/json",
        b"webmanifest" => "application/manifest+json",
        b"wasm" => "application/wasm",
        b"pdf" => "application/pdf",
        b"rss" => "application/rss+xml",
        b"atom" => "application/atom+xml",
        b"svg" => "image/svg+xml",
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"ico" => "image/x-icon",
        b"bmp" => "image/bmp",
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"ttf" => "font/ttf",
        b"otf" => "font/otf",
        b"mp4" => "video/mp4",
        b"webm" => "video/webm",
        b"mp3" => "audio/mpeg",
        b"ogg" | b"oga" => "audio/ogg",
        b"wav" => "audio/wav",
        b"flac" => "audio/flac",
        b"zip" => "application/zip",
        b"gz" => "application/gzip",
        b"tar" => "application/x-tar",
        b"zst" => "application/zstd",
        _ => OCTET_STREAM,
    }
}

#[cfg(test)]
mod tests {
    use super::{OCTET_STREAM, content_type};

    #[test]
    fn by_extension() {
        let table: &[(&str, &str)] = &[
            ("index.html", "text/html; charset=utf-8"),
            ("INDEX.HTM", "text/html; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
            ("app.min.js", "text/javascript; charset=utf-8"),
            ("notes.txt", "text/plain; charset=utf-8"),
            ("data.json", "application/json"),
            ("logo.SVG", "image/svg+xml"),
            ("photo.JPeG", "image/jpeg"),
            ("font.woff2", "font/woff2"),
            ("site.webmanifest", "application/manifest+json"),
            ("archive.tar.gz", "application/gzip"),
            ("Makefile", OCTET_STREAM),
            ("trailing.", OCTET_STREAM),
            (".bashrc", OCTET_STREAM),
            ("x.averyveryverylongext", OCTET_STREAM),
            ("x.exe", OCTET_STREAM),
        ];
        for (name, want) in table {
            assert_eq!(content_type(name.as_bytes()), *want, "{name}");
        }
    }
}
