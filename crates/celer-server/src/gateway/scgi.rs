//! SCGI (the SCGI protocol specification, Neil Schemenauer, 2006): the
//! request header parser, sans IO, and the connection driver.
//!
//! A request is a netstring (`LEN:` + LEN bytes + `,`) of NUL-terminated
//! names and values, `CONTENT_LENGTH` first and `SCGI` = `1` among them,
//! then the body; the response is the CGI response format, and the
//! connection closes after it.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::stream;
use crate::common::ConnConfig;
use crate::serve::HttpService;
use crate::shutdown::Watch;
use crate::transport::Transport;

/// A request's variables, names and values, in the order received.
pub type Vars = Vec<(Bytes, Bytes)>;

/// Why a request header is not SCGI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScgiError {
    /// The netstring length is not decimal digits followed by `:`, or has a
    /// leading zero.
    BadLength,
    /// The header is longer than `Limits::gateway_max_params_bytes`.
    TooLarge,
    /// The netstring does not end with `,`.
    MissingComma,
    /// The header is not NUL-terminated names and values in pairs, or a
    /// name is empty.
    BadLayout,
    /// The first variable is not `CONTENT_LENGTH`, or its value not digits.
    BadContentLength,
    /// There is no `SCGI` variable of value `1`.
    NotScgi,
    /// A variable appears twice.
    Duplicate,
    /// More variables than `Limits::gateway_max_params`.
    TooMany,
}

impl std::fmt::Display for ScgiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ScgiError::BadLength => "netstring length is not digits followed by ':'",
            ScgiError::TooLarge => "header longer than the limit",
            ScgiError::MissingComma => "netstring not ended by ','",
            ScgiError::BadLayout => "header is not NUL-terminated name and value pairs",
            ScgiError::BadContentLength => "CONTENT_LENGTH is not first or not digits",
            ScgiError::NotScgi => "no SCGI=1 variable",
            ScgiError::Duplicate => "a variable is repeated",
            ScgiError::TooMany => "more variables than the limit",
        })
    }
}

/// Parses the request header at the front of `buf`: `None` while it is
/// incomplete, else its variables and the bytes it took (the body follows).
pub fn parse(
    buf: &[u8],
    max_bytes: usize,
    max_vars: usize,
) -> Result<Option<(Vars, usize)>, ScgiError> {
    // The length: digits only, no leading zero, bounded before it is read
    // whole (so a long run of digits cannot overflow or be waited for).
    let max_digits = max_bytes.max(1).ilog10() as usize + 1;
    let mut len = 0usize;
    let mut at = 0;
    loop {
        let Some(&b) = buf.get(at) else {
            return Ok(None);
        };
        match b {
            b'0'..=b'9' if at < max_digits => {
                if at == 1 && buf[0] == b'0' {
                    return Err(ScgiError::BadLength);
                }
                len = len * 10 + usize::from(b - b'0');
                at += 1;
            }
            b'0'..=b'9' => return Err(ScgiError::TooLarge),
            b':' if at > 0 => break,
            _ => return Err(ScgiError::BadLength),
        }
    }
    if len > max_bytes {
        return Err(ScgiError::TooLarge);
    }
    let start = at + 1;
    let end = start + len;
    let Some(&comma) = buf.get(end) else {
        return Ok(None);
    };
    if comma != b',' {
        return Err(ScgiError::MissingComma);
    }
    let block = Bytes::copy_from_slice(&buf[start..end]);
    let vars = split(&block, max_vars)?;
    Ok(Some((vars, end + 1)))
}

/// Splits the header block into its variables, checking the layout.
fn split(block: &Bytes, max_vars: usize) -> Result<Vars, ScgiError> {
    if block.last() != Some(&0) {
        return Err(ScgiError::BadLayout);
    }
    let mut fields = Vec::new();
    let mut from = 0;
    for (i, &b) in block.iter().enumerate() {
        if b == 0 {
            fields.push(block.slice(from..i));
            from = i + 1;
        }
    }
    if fields.len() % 2 != 0 {
        return Err(ScgiError::BadLayout);
    }
    if fields.len() / 2 > max_vars {
        return Err(ScgiError::TooMany);
    }
    let mut vars: Vec<(Bytes, Bytes)> = Vec::with_capacity(fields.len() / 2);
    let mut it = fields.into_iter();
    while let (Some(name), Some(value)) = (it.next(), it.next()) {
        if name.is_empty() {
            return Err(ScgiError::BadLayout);
        }
        if vars.iter().any(|(n, _)| *n == name) {
            return Err(ScgiError::Duplicate);
        }
        vars.push((name, value));
    }
    match vars.first() {
        Some((n, v))
            if &n[..] == b"CONTENT_LENGTH"
                && !v.is_empty()
                && v.len() <= 19
                && v.iter().all(u8::is_ascii_digit) => {}
        _ => return Err(ScgiError::BadContentLength),
    }
    if !vars
        .iter()
        .any(|(n, v)| &n[..] == b"SCGI" && &v[..] == b"1")
    {
        return Err(ScgiError::NotScgi);
    }
    Ok(vars)
}

/// Serves the one request of an SCGI connection, then closes it. A
/// malformed header closes the connection with one log line.
pub(crate) async fn serve<I: Transport, S: HttpService>(
    io: I,
    service: S,
    config: Arc<ConnConfig>,
    shutdown: Watch,
) {
    let limits = &config.limits;
    let (max_bytes, max_vars) = (limits.gateway_max_params_bytes, limits.gateway_max_params);
    let mut io = io;
    let mut rbuf = BytesMut::with_capacity(4096);
    let read_head = async {
        loop {
            match parse(&rbuf, max_bytes, max_vars) {
                Ok(Some((vars, used))) => {
                    let _ = rbuf.split_to(used);
                    return Some(vars);
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::info!(target: "celer::gateway", error = %err, "malformed SCGI request, closing the connection");
                    return None;
                }
            }
            rbuf.reserve(4096);
            match tokio::io::AsyncReadExt::read_buf(&mut io, &mut rbuf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    };
    let vars = tokio::select! {
        biased;
        () = std::future::poll_fn(|cx| shutdown.poll_started(cx)) => return,
        vars = tokio::time::timeout(config.limits.head_timeout, read_head) => match vars {
            Ok(Some(vars)) => vars,
            Ok(None) => return,
            Err(_) => {
                tracing::debug!(target: "celer::gateway", "SCGI request head timed out");
                return;
            }
        },
    };
    let (rd, wr) = tokio::io::split(io);
    let mut service = service;
    stream::serve_one(&vars, rbuf, rd, wr, &mut service, &config).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(vars: &[(&str, &str)]) -> Vec<u8> {
        let mut block = Vec::new();
        for (n, v) in vars {
            block.extend_from_slice(n.as_bytes());
            block.push(0);
            block.extend_from_slice(v.as_bytes());
            block.push(0);
        }
        let mut out = format!("{}:", block.len()).into_bytes();
        out.extend_from_slice(&block);
        out.push(b',');
        out
    }

    #[test]
    fn a_header_parses_once_whole_and_leaves_the_body() {
        let mut wire = header(&[
            ("CONTENT_LENGTH", "5"),
            ("SCGI", "1"),
            ("REQUEST_METHOD", "POST"),
        ]);
        let head_len = wire.len();
        wire.extend_from_slice(b"hello");
        for cut in 0..head_len {
            assert_eq!(parse(&wire[..cut], 1024, 10), Ok(None), "cut at {cut}");
        }
        let (vars, used) = parse(&wire, 1024, 10).unwrap().unwrap();
        assert_eq!(used, head_len);
        assert_eq!(vars.len(), 3);
        assert_eq!(&vars[2].1[..], b"POST");
    }

    #[test]
    fn malformed_headers_are_refused() {
        let ok = [("CONTENT_LENGTH", "0"), ("SCGI", "1")];
        let err = |bytes: &[u8]| parse(bytes, 1024, 10).unwrap_err();
        assert_eq!(err(b"x:"), ScgiError::BadLength);
        assert_eq!(err(b":"), ScgiError::BadLength);
        assert_eq!(err(b"01:"), ScgiError::BadLength);
        assert_eq!(err(b"+1:"), ScgiError::BadLength);
        assert_eq!(err(b"99999:"), ScgiError::TooLarge);
        assert_eq!(err(b"2000:"), ScgiError::TooLarge);
        let mut no_comma = header(&ok);
        *no_comma.last_mut().unwrap() = b';';
        assert_eq!(err(&no_comma), ScgiError::MissingComma);
        assert_eq!(err(b"3:a\0b,"), ScgiError::BadLayout);
        assert_eq!(err(b"5:a\0b\0\0,"), ScgiError::BadLayout);
        assert_eq!(
            err(&header(&[("SCGI", "1"), ("CONTENT_LENGTH", "0")])),
            ScgiError::BadContentLength
        );
        assert_eq!(
            err(&header(&[("CONTENT_LENGTH", "-1"), ("SCGI", "1")])),
            ScgiError::BadContentLength
        );
        assert_eq!(err(&header(&[("CONTENT_LENGTH", "0")])), ScgiError::NotScgi);
        assert_eq!(
            err(&header(&[("CONTENT_LENGTH", "0"), ("SCGI", "2")])),
            ScgiError::NotScgi
        );
        assert_eq!(
            err(&header(&[
                ("CONTENT_LENGTH", "0"),
                ("SCGI", "1"),
                ("SCGI", "1")
            ])),
            ScgiError::Duplicate
        );
        assert_eq!(
            err(&header(&[
                ("CONTENT_LENGTH", "0"),
                ("", "x"),
                ("SCGI", "1")
            ])),
            ScgiError::BadLayout
        );
        let many: Vec<(String, String)> =
            (0..10).map(|i| (format!("V{i}"), String::new())).collect();
        let mut vars: Vec<(&str, &str)> = ok.to_vec();
        vars.extend(many.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        assert_eq!(err(&header(&vars)), ScgiError::TooMany);
    }
}
