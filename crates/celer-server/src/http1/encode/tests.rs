//! Unit tests of `encode`: every input whole, byte by byte and at every split.
use super::*;
use http::header::HeaderName;

fn head(
    status: u16,
    headers: &[(&str, &str)],
    exact: Option<u64>,
    req: ReqFacts,
) -> (String, Framed) {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let mut buf = WriteBuf::default();
    let framed = encode_head(
        StatusCode::from_u16(status).unwrap(),
        &map,
        exact,
        req,
        &None,
        None,
        &mut buf,
    );
    let text = String::from_utf8(buf.flat().unwrap().to_vec()).unwrap();
    // Drop the date line: it changes every second.
    let text = text
        .lines()
        .filter(|l| !l.starts_with("date: "))
        .collect::<Vec<_>>()
        .join("\n");
    (text, framed)
}

const GET11: ReqFacts = ReqFacts {
    version: Version::HTTP_11,
    is_head: false,
    keep_alive: true,
};
const HEAD11: ReqFacts = ReqFacts {
    version: Version::HTTP_11,
    is_head: true,
    keep_alive: true,
};
const GET10: ReqFacts = ReqFacts {
    version: Version::HTTP_10,
    is_head: false,
    keep_alive: false,
};
const GET10_KA: ReqFacts = ReqFacts {
    version: Version::HTTP_10,
    is_head: false,
    keep_alive: true,
};

#[test]
fn status_lines() {
    for code in [
        100, 101, 200, 201, 204, 206, 301, 302, 304, 400, 404, 405, 418, 500, 599,
    ] {
        let status = StatusCode::from_u16(code).unwrap();
        let mut out = BytesMut::new();
        let (line, reason) = status_line(status);
        out.extend_from_slice(line);
        if let Some(reason) = reason {
            out.extend_from_slice(format!("{} {reason}\r\n", status.as_str()).as_bytes());
        }
        let want = format!(
            "HTTP/1.1 {} {}\r\n",
            status.as_str(),
            status.canonical_reason().unwrap_or("Unknown")
        );
        assert_eq!(out, want.as_bytes());
    }
}

#[test]
fn known_length() {
    let (text, f) = head(200, &[("content-type", "text/plain")], Some(5), GET11);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\ncontent-type: text/plain\ncontent-length: 5\n"
    );
    assert_eq!(f.encoder, Encoder::Length(5));
    assert!(f.keep_alive);
}

#[test]
fn unknown_length_is_chunked_on_11_and_close_delimited_on_10() {
    let (text, f) = head(200, &[], None, GET11);
    assert_eq!(text, "HTTP/1.1 200 OK\ntransfer-encoding: chunked\n");
    assert_eq!(f.encoder, Encoder::Chunked);
    let (text, f) = head(200, &[], None, GET10_KA);
    assert_eq!(text, "HTTP/1.1 200 OK\nconnection: close\n");
    assert_eq!((f.encoder, f.keep_alive), (Encoder::Close, false));
}

#[test]
fn http10_keep_alive_is_announced() {
    let (text, f) = head(200, &[], Some(0), GET10_KA);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\ncontent-length: 0\nconnection: keep-alive\n"
    );
    assert!(f.keep_alive);
    let (_, f) = head(200, &[], Some(0), GET10);
    assert!(!f.keep_alive);
}

#[test]
fn service_framing_headers_are_replaced() {
    let (text, f) = head(
        200,
        &[("content-length", "99"), ("transfer-encoding", "chunked")],
        Some(3),
        GET11,
    );
    assert_eq!(text, "HTTP/1.1 200 OK\ncontent-length: 3\n");
    assert_eq!(f.encoder, Encoder::Length(3));
    // A declared length with a streaming body is trusted and enforced.
    let (_, f) = head(200, &[("content-length", "7")], None, GET11);
    assert_eq!(f.encoder, Encoder::Length(7));
}

#[test]
fn no_body_statuses_and_head() {
    let (text, f) = head(204, &[("content-length", "3")], Some(3), GET11);
    assert_eq!(text, "HTTP/1.1 204 No Content\n");
    assert_eq!(f.encoder, Encoder::Skip);
    let (text, f) = head(304, &[("etag", "\"x\"")], Some(0), GET11);
    assert_eq!(text, "HTTP/1.1 304 Not Modified\netag: \"x\"\n");
    assert_eq!(f.encoder, Encoder::Skip);
    let (text, f) = head(200, &[], Some(13), HEAD11);
    assert_eq!(text, "HTTP/1.1 200 OK\ncontent-length: 13\n");
    assert_eq!(f.encoder, Encoder::Skip);
}

#[test]
fn connection_close_from_the_service_ends_keep_alive() {
    let (text, f) = head(200, &[("connection", "close")], Some(0), GET11);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\ncontent-length: 0\nconnection: close\n"
    );
    assert!(!f.keep_alive);
}

#[test]
fn chunked_data_and_trailers() {
    let mut enc = Encoder::Chunked;
    let mut buf = WriteBuf::default();
    enc.data(Bytes::from_static(b"hello"), &mut buf).unwrap();
    enc.data(Bytes::new(), &mut buf).unwrap();
    enc.data(Bytes::from(vec![b'x'; 26]), &mut buf).unwrap();
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("1"));
    enc.finish(Some(&trailers), &mut buf).unwrap();
    let want = format!(
        "5\r\nhello\r\n1a\r\n{}\r\n0\r\nx-sum: 1\r\n\r\n",
        "x".repeat(26)
    );
    assert_eq!(buf.flat().unwrap(), want.as_bytes());
}

#[test]
fn length_is_enforced() {
    let mut buf = WriteBuf::default();
    let mut enc = Encoder::Length(3);
    assert_eq!(
        enc.data(Bytes::from_static(b"abcd"), &mut buf),
        Err(FrameError::TooLong)
    );
    assert_eq!(buf.flat().unwrap(), b"abc");
    let mut enc = Encoder::Length(3);
    enc.data(Bytes::from_static(b"ab"), &mut buf).unwrap();
    assert_eq!(enc.finish(None, &mut buf), Err(FrameError::TooShort));
}

#[test]
fn large_data_is_queued_not_copied() {
    let mut buf = WriteBuf::default();
    buf.put(b"head");
    let big = Bytes::from(vec![7u8; 100_000]);
    buf.put_bytes(big.clone());
    buf.put(b"tail");
    assert!(buf.flat().is_none());
    let mut slices = [std::io::IoSlice::new(&[]); 8];
    let n = buf.slices(&mut slices);
    assert_eq!(n, 3);
    assert_eq!(slices[1].as_ptr(), big.as_ptr());
    assert_eq!(buf.len(), 100_008);
    buf.advance(5);
    assert_eq!(buf.len(), 100_003);
    buf.advance(100_000);
    assert_eq!(buf.flat().unwrap(), b"ail");
}

#[test]
fn a_head_past_the_buffer_grows_it_and_follows_what_was_queued() {
    // Fields longer than a pooled buffer, after bytes already queued and
    // with the server's own fields: each piece lands in order.
    let mut map = HeaderMap::new();
    let long = "x".repeat(3 * crate::http1::io::BUF_SIZE);
    for name in ["x-one", "x-two", "x-three"] {
        map.append(
            http::header::HeaderName::from_static(name),
            HeaderValue::from_str(&long).unwrap(),
        );
    }
    map.append(header::DATE, HeaderValue::from_static("then"));
    let mut buf = WriteBuf::default();
    buf.put(b"earlier");
    let server = Some(HeaderValue::from_static("celer"));
    let hsts = HeaderValue::from_static("max-age=60");
    let framed = encode_head(
        StatusCode::IM_A_TEAPOT,
        &map,
        Some(0),
        GET11,
        &server,
        Some(&hsts),
        &mut buf,
    );
    let want = format!(
        "earlierHTTP/1.1 418 I'm a teapot\r\nserver: celer\r\n\
         strict-transport-security: max-age=60\r\nx-one: {long}\r\n\
         x-two: {long}\r\nx-three: {long}\r\ndate: then\r\ncontent-length: 0\r\n\r\n"
    );
    assert_eq!(buf.flat().unwrap(), want.as_bytes());
    assert_eq!(framed.encoder, Encoder::Length(0));
}

#[test]
fn one_pass_writes_what_two_passes_write() {
    // Every combination of the fields that steer the head, with and
    // without the server's own fields: the one-pass head is byte for byte
    // the two-pass head, or is declined with nothing written.
    let fields: [(HeaderName, &str); 7] = [
        (header::DATE, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (header::SERVER, "theirs"),
        (header::STRICT_TRANSPORT_SECURITY, "max-age=1"),
        (header::CONTENT_LENGTH, "7"),
        (header::TRANSFER_ENCODING, "chunked"),
        (header::CONNECTION, "close"),
        (header::ETAG, "\"a\""),
    ];
    let hsts = HeaderValue::from_static("max-age=60");
    let mut declined = 0;
    for mask in 0u32..1 << fields.len() {
        let mut map = HeaderMap::new();
        for (i, (name, value)) in fields.iter().enumerate() {
            if mask & (1 << i) != 0 {
                map.append(name.clone(), HeaderValue::from_static(value));
                map.append(header::VARY, HeaderValue::from_static("accept"));
            }
        }
        for status in [200, 204, 304, 418] {
            let status = StatusCode::from_u16(status).unwrap();
            for req in [GET11, HEAD11, GET10, GET10_KA] {
                for exact in [None, Some(3)] {
                    for server in [None, Some(HeaderValue::from_static("celer"))] {
                        for hsts in [None, Some(&hsts)] {
                            let mut one = BytesMut::with_capacity(1024);
                            one.extend_from_slice(b"before");
                            let mut two = one.clone();
                            let server = server.as_ref();
                            let Some(a) =
                                one_pass(status, &map, exact, req, server, hsts, &mut one)
                            else {
                                assert_eq!(one, &b"before"[..]);
                                declined += 1;
                                continue;
                            };
                            let b = two_passes(status, &map, exact, req, server, hsts, &mut two);
                            assert_eq!(one, two, "{status} {mask:b} {req:?} {exact:?}");
                            assert_eq!((a.encoder, a.keep_alive), (b.encoder, b.keep_alive));
                        }
                    }
                }
            }
        }
    }
    // A status without a line of its own, or a Connection field, declines.
    assert!(declined > 0);
}

#[test]
fn one_pass_declines_a_head_past_the_room() {
    let mut map = HeaderMap::new();
    map.append(header::ETAG, HeaderValue::from_static("\"a\""));
    let mut out = BytesMut::with_capacity(16);
    out.extend_from_slice(b"before");
    assert!(one_pass(StatusCode::OK, &map, Some(1), GET11, None, None, &mut out).is_none());
    assert_eq!(out, &b"before"[..]);
}
