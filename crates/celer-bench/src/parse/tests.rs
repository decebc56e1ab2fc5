//! Response parser tests: every input is fed whole, byte by byte and at every split point.

use super::*;

/// Feeds `input` growing one byte at a time: every strict prefix must be
/// incomplete or fail exactly as the whole input does.
fn check_head(input: &[u8], request_was_head: bool, expected: Result<Option<Head>, Malformed>) {
    assert_eq!(parse_head(input, request_was_head), expected, "whole input");
    for end in 0..input.len() {
        let prefix = parse_head(&input[..end], request_was_head);
        match (prefix, expected) {
            (Ok(None), _) => {}
            (Err(e), Err(want)) if e == want => {}
            (got, _) => panic!("prefix of {end} bytes gave {got:?}, expected partial"),
        }
    }
}

fn head(len: usize, status: u16, framing: Framing, close: bool) -> Result<Option<Head>, Malformed> {
    Ok(Some(Head {
        len,
        status,
        framing,
        close,
    }))
}

#[test]
fn content_length_response_is_parsed() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\n";
    check_head(
        input,
        false,
        head(input.len(), 200, Framing::Length(5), false),
    );
}

#[test]
fn trailing_body_bytes_are_not_part_of_the_head() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    assert_eq!(
        parse_head(input, false),
        head(input.len() - 5, 200, Framing::Length(5), false)
    );
}

#[test]
fn chunked_response_is_parsed() {
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    check_head(
        input,
        false,
        head(input.len(), 200, Framing::Chunked, false),
    );
}

#[test]
fn final_coding_other_than_chunked_reads_until_close() {
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n";
    check_head(input, false, head(input.len(), 200, Framing::Close, true));
}

#[test]
fn missing_length_reads_until_close() {
    let input = b"HTTP/1.1 200 OK\r\n\r\n";
    check_head(input, false, head(input.len(), 200, Framing::Close, true));
}

#[test]
fn connection_close_is_seen() {
    let input = b"HTTP/1.1 200 OK\r\nConnection: foo, Close\r\nContent-Length: 0\r\n\r\n";
    check_head(
        input,
        false,
        head(input.len(), 200, Framing::Length(0), true),
    );
}

#[test]
fn http_1_0_closes_unless_keep_alive() {
    let input = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
    check_head(
        input,
        false,
        head(input.len(), 200, Framing::Length(0), true),
    );
    let input = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
    check_head(
        input,
        false,
        head(input.len(), 200, Framing::Length(0), false),
    );
}

#[test]
fn bodiless_statuses_and_head_responses_have_no_body() {
    let input = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
    check_head(input, false, head(input.len(), 304, Framing::Empty, false));
    let input = b"HTTP/1.1 204 No Content\r\n\r\n";
    check_head(input, false, head(input.len(), 204, Framing::Empty, false));
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    check_head(input, true, head(input.len(), 200, Framing::Empty, false));
}

#[test]
fn interim_responses_are_recognised() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\n";
    let parsed = parse_head(input, false).unwrap().unwrap();
    assert!(parsed.is_interim());
    let input = b"HTTP/1.1 101 Switching Protocols\r\n\r\n";
    assert!(!parse_head(input, false).unwrap().unwrap().is_interim());
}

#[test]
fn malformed_heads_are_rejected() {
    let cases: &[(&[u8], Malformed)] = &[
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            Malformed::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
            Malformed::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            Malformed::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            Malformed::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            Malformed::TransferEncoding,
        ),
        (b"HTTP/1.1 099 Odd\r\n\r\n", Malformed::Status),
        (b"HTTP/1.1 600 Odd\r\n\r\n", Malformed::Status),
        (b"HTTP/2.0 200 OK\r\n\r\n", Malformed::Head),
        (b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", Malformed::Head),
        (
            b"HTTP/1.1 200 OK\r\nFolded: a\r\n b\r\n\r\n",
            Malformed::Head,
        ),
        (b"garbage\r\n\r\n", Malformed::Head),
    ];
    for (input, want) in cases {
        check_head(input, false, Err(*want));
    }
}

#[test]
fn too_many_headers_are_rejected() {
    let mut input = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        input.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    input.extend_from_slice(b"\r\n");
    assert_eq!(parse_head(&input, false), Err(Malformed::TooManyHeaders));
}

/// Decodes `input` cut at `cuts`, returning the bytes consumed and whether the
/// body completed.
fn decode_in_pieces(
    framing: Framing,
    input: &[u8],
    cuts: &[usize],
) -> Result<(usize, bool), Malformed> {
    let mut decoder = BodyDecoder::new(framing);
    let mut consumed = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        // Bytes the decoder did not consume stay in front of the next piece.
        let progress = decoder.decode(&input[consumed..cut])?;
        consumed += progress.consumed;
        if progress.done {
            return Ok((consumed, true));
        }
    }
    Ok((consumed, false))
}

/// Feeds a body whole, byte by byte and split at every point.
fn check_body(framing: Framing, input: &[u8], expected: Result<(usize, bool), Malformed>) {
    assert_eq!(
        decode_in_pieces(framing, input, &[]),
        expected,
        "whole input"
    );
    let every: Vec<usize> = (1..input.len()).collect();
    assert_eq!(
        decode_in_pieces(framing, input, &every),
        expected,
        "byte by byte"
    );
    for split in 0..=input.len() {
        assert_eq!(
            decode_in_pieces(framing, input, &[split]),
            expected,
            "split at {split}"
        );
    }
}

#[test]
fn content_length_body_stops_at_its_length() {
    check_body(Framing::Length(5), b"helloHTTP/1.1", Ok((5, true)));
    check_body(Framing::Length(5), b"hel", Ok((3, false)));
    check_body(Framing::Length(0), b"x", Ok((0, true)));
    check_body(Framing::Empty, b"x", Ok((0, true)));
}

#[test]
fn close_delimited_body_takes_everything() {
    check_body(Framing::Close, b"abc", Ok((3, false)));
}

#[test]
fn chunked_body_is_decoded() {
    let input = b"5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\n\r\nNEXT";
    check_body(Framing::Chunked, input, Ok((input.len() - 4, true)));
}

#[test]
fn chunked_body_with_trailers_is_decoded() {
    let input = b"3 ;x\r\nabc\r\n0\r\nTrailer: one\r\nTwo: 2\r\n\r\n";
    check_body(Framing::Chunked, input, Ok((input.len(), true)));
}

#[test]
fn incomplete_chunked_body_waits_for_more() {
    let input = b"5\r\nhel";
    check_body(Framing::Chunked, input, Ok((input.len(), false)));
}

#[test]
fn malformed_chunked_bodies_are_rejected() {
    let cases: &[&[u8]] = &[
        b"\r\n",
        b"g\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhelloX\r\n0\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\n",
        b"5 \r\nhello\r\n0\r\n\r\n",
        b"11111111111111111\r\n",
        b"0\r\nTrailer: x\n\r\n",
    ];
    for input in cases {
        let input: &[u8] = input;
        check_body(Framing::Chunked, input, Err(Malformed::Chunk));
    }
}
