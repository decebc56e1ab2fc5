//! A RESP2 codec (the Redis protocol), just what the `redis:` source needs:
//! commands out as arrays of bulk strings, replies in; no IO.
//!
//! Replies are parsed from a buffer and return `Ok(None)` while incomplete.
//! Every length is checked against a limit before anything is buffered
//! for it, so a server (or something posing as one) cannot make the
//! client hold more than the limit.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// Elements of an array reply accepted at most (GET and pub/sub replies
/// have at most 3).
pub(crate) const MAX_ARRAY_ELEMENTS: usize = 16;

/// Bytes of a simple string, error or integer line accepted at most.
pub(crate) const MAX_LINE_BYTES: usize = 4096;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+OK`.
    Simple(String),
    /// `-ERR ...`.
    Error(String),
    /// `:1`.
    Integer(i64),
    /// `$n` and n bytes; `None` for `$-1` (nil).
    Bulk(Option<Bytes>),
    /// `*n` and n replies; `None` for `*-1`.
    Array(Option<Vec<Reply>>),
}

/// Why a reply could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// A type byte RESP2 does not have, or a malformed length or line.
    Protocol(&'static str),
    /// A bulk string longer than the limit, with its length.
    TooLarge { len: usize, max: usize },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Protocol(what) => write!(f, "not a RESP reply: {what}"),
            ParseError::TooLarge { len, max } => {
                write!(f, "value of {len} bytes is over the limit of {max}")
            }
        }
    }
}

/// Appends a command: an array of bulk strings.
pub(crate) fn encode(out: &mut BytesMut, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses one reply from the front of `buf` and removes it; `Ok(None)` when
/// `buf` holds only part of one. `max_bulk` bounds bulk strings.
pub(crate) fn parse(buf: &mut BytesMut, max_bulk: usize) -> Result<Option<Reply>, ParseError> {
    match reply(&buf[..], 0, max_bulk, 0)? {
        Some((reply, used)) => {
            buf.advance(used);
            Ok(Some(reply))
        }
        None => Ok(None),
    }
}

/// The reply starting at `at`, and the offset after it.
fn reply(
    buf: &[u8],
    at: usize,
    max_bulk: usize,
    depth: usize,
) -> Result<Option<(Reply, usize)>, ParseError> {
    let Some((line, next)) = line(buf, at)? else {
        return Ok(None);
    };
    let (kind, rest) = line
        .split_first()
        .ok_or(ParseError::Protocol("empty line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    Ok(Some(match kind {
        b'+' => (Reply::Simple(text()), next),
        b'-' => (Reply::Error(text()), next),
        b':' => (Reply::Integer(integer(rest)?), next),
        b'$' => {
            let len = integer(rest)?;
            if len < 0 {
                return Ok(Some((Reply::Bulk(None), next)));
            }
            let len = usize::try_from(len).map_err(|_| ParseError::Protocol("bulk length"))?;
            if len > max_bulk {
                return Err(ParseError::TooLarge { len, max: max_bulk });
            }
            if buf.len() < next + len + 2 {
                return Ok(None);
            }
            if &buf[next + len..next + len + 2] != b"\r\n" {
                return Err(ParseError::Protocol("bulk string not ended by CRLF"));
            }
            let data = Bytes::copy_from_slice(&buf[next..next + len]);
            (Reply::Bulk(Some(data)), next + len + 2)
        }
        b'*' => {
            let n = integer(rest)?;
            if n < 0 {
                return Ok(Some((Reply::Array(None), next)));
            }
            let n = usize::try_from(n).map_err(|_| ParseError::Protocol("array length"))?;
            if n > MAX_ARRAY_ELEMENTS || depth > 2 {
                return Err(ParseError::Protocol("array too long or too deep"));
            }
            let mut items = Vec::with_capacity(n);
            let mut at = next;
            for _ in 0..n {
                match reply(buf, at, max_bulk, depth + 1)? {
                    Some((item, after)) => {
                        items.push(item);
                        at = after;
                    }
                    None => return Ok(None),
                }
            }
            (Reply::Array(Some(items)), at)
        }
        _ => return Err(ParseError::Protocol("unknown type byte")),
    }))
}

/// The line at `at` without its CRLF, and the offset after the CRLF.
fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>, ParseError> {
    let rest = &buf[at.min(buf.len())..];
    match rest.windows(2).position(|w| w == b"\r\n") {
        Some(end) if end <= MAX_LINE_BYTES => Ok(Some((&rest[..end], at + end + 2))),
        Some(_) => Err(ParseError::Protocol("line too long")),
        None if rest.len() > MAX_LINE_BYTES => Err(ParseError::Protocol("line too long")),
        None => Ok(None),
    }
}

fn integer(digits: &[u8]) -> Result<i64, ParseError> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ParseError::Protocol("not an integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `input` whole and cut at every point: the same reply, and
    /// `Ok(None)` for every proper prefix.
    fn check(input: &[u8], want: Result<Reply, ParseError>) {
        for cut in 0..input.len() {
            let mut buf = BytesMut::from(&input[..cut]);
            match parse(&mut buf, 64) {
                Ok(None) => {}
                Err(err) if want.as_ref().err() == Some(&err) => return,
                other => panic!("prefix {cut} of {input:?}: {other:?}"),
            }
        }
        let mut buf = BytesMut::from(input);
        match (parse(&mut buf, 64), want) {
            (Ok(Some(got)), Ok(want)) => {
                assert_eq!(got, want);
                assert!(buf.is_empty());
            }
            (Err(got), Err(want)) => assert_eq!(got, want),
            (got, want) => panic!("{input:?}: {got:?}, wanted {want:?}"),
        }
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Some(Bytes::copy_from_slice(s.as_bytes())))
    }

    #[test]
    fn replies() {
        check(b"+OK\r\n", Ok(Reply::Simple("OK".into())));
        check(b"-ERR wrong\r\n", Ok(Reply::Error("ERR wrong".into())));
        check(b":42\r\n", Ok(Reply::Integer(42)));
        check(b"$5\r\nhello\r\n", Ok(bulk("hello")));
        check(b"$0\r\n\r\n", Ok(bulk("")));
        check(b"$-1\r\n", Ok(Reply::Bulk(None)));
        check(b"$4\r\na\r\nb\r\n", Ok(bulk("a\r\nb")));
        check(
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nset\r\n",
            Ok(Reply::Array(Some(vec![
                bulk("message"),
                bulk("ch"),
                bulk("set"),
            ]))),
        );
        check(b"*-1\r\n", Ok(Reply::Array(None)));
    }

    #[test]
    fn limits_and_garbage() {
        check(b"$65\r\n", Err(ParseError::TooLarge { len: 65, max: 64 }));
        check(
            b"$2\r\nabXY",
            Err(ParseError::Protocol("bulk string not ended by CRLF")),
        );
        check(b"?1\r\n", Err(ParseError::Protocol("unknown type byte")));
        check(b"$x\r\n", Err(ParseError::Protocol("not an integer")));
        check(
            b"*17\r\n",
            Err(ParseError::Protocol("array too long or too deep")),
        );
        let long = [b"+".as_slice(), &[b'a'; MAX_LINE_BYTES + 1]].concat();
        let mut buf = BytesMut::from(&long[..]);
        assert_eq!(
            parse(&mut buf, 64),
            Err(ParseError::Protocol("line too long"))
        );
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = BytesMut::new();
        encode(&mut out, &[b"GET", b"scores"]);
        assert_eq!(&out[..], b"*2\r\n$3\r\nGET\r\n$6\r\nscores\r\n");
    }
}
