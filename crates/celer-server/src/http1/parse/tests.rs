//! Unit tests of `parse`: every input whole, byte by byte and at every split.
use super::*;

/// A parsed head with its request, as the tests inspect it.
#[derive(Debug)]
struct Head {
    request: Request<Incoming>,
    body: BodyLen,
    keep_alive: bool,
    expect_continue: bool,
    upgrade: bool,
}

/// `super::Parsed` with the request beside the framing.
#[allow(clippy::large_enum_variant)] // a test helper; size does not matter
enum Parsed {
    Complete(Head),
    Partial,
}

/// `super::parse_head` into a fresh request.
fn parse_head(buf: &mut BytesMut, limits: &Limits) -> Result<Parsed, Reject> {
    let mut request = Request::new(Incoming::empty());
    Ok(match super::parse_head(buf, limits, &mut request)? {
        super::Parsed::Complete(h) => Parsed::Complete(Head {
            request,
            body: h.body,
            keep_alive: h.keep_alive,
            expect_continue: h.expect_continue,
            upgrade: h.upgrade,
        }),
        super::Parsed::Partial => Parsed::Partial,
    })
}

/// Parses `input` whole, byte by byte, and split at every point; all three
/// must agree. Returns the whole-input outcome.
fn check(input: &[u8], limits: &Limits) -> Result<Option<Head>, Reject> {
    let whole = parse_all(input, input.len(), limits);
    for split in 1..input.len() {
        let parts = parse_all(input, split, limits);
        assert_eq!(
            summary(&parts),
            summary(&whole),
            "split at {split} of {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

/// Feeds `input` in pieces of `step` bytes until a head completes.
fn parse_all(input: &[u8], step: usize, limits: &Limits) -> Result<Option<Head>, Reject> {
    let mut buf = BytesMut::new();
    for piece in input.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        if let Parsed::Complete(head) = parse_head(&mut buf, limits)? {
            return Ok(Some(head));
        }
    }
    Ok(None)
}

fn summary(r: &Result<Option<Head>, Reject>) -> String {
    match r {
        Ok(Some(h)) => format!(
            "{} {} {:?} {:?} ka={} ec={} up={} {:?}",
            h.request.method(),
            h.request.uri(),
            h.request.version(),
            h.body,
            h.keep_alive,
            h.expect_continue,
            h.upgrade,
            h.request.headers()
        ),
        Ok(None) => "partial".into(),
        Err(r) => format!("{} {}", r.status, r.reason),
    }
}

fn ok(input: &str) -> Head {
    match check(input.as_bytes(), &Limits::default()) {
        Ok(Some(head)) => head,
        other => panic!("expected a head from {input:?}, got {}", summary(&other)),
    }
}

fn err(input: &str) -> (u16, &'static str) {
    err_with(input, &Limits::default())
}

fn err_with(input: &str, limits: &Limits) -> (u16, &'static str) {
    match check(input.as_bytes(), limits) {
        Err(r) => (r.status.as_u16(), r.reason),
        other => panic!("expected a rejection of {input:?}, got {}", summary(&other)),
    }
}

#[test]
fn simple_get() {
    let h = ok("GET /a?b=c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    assert_eq!(h.request.method(), Method::GET);
    assert_eq!(h.request.uri().path(), "/a");
    assert_eq!(h.request.uri().query(), Some("b=c"));
    assert_eq!(h.request.headers()["accept"], "*/*");
    assert_eq!(h.body, BodyLen::Empty);
    assert!(h.keep_alive);
}

#[test]
fn partial_heads_ask_for_more() {
    let limits = Limits::default();
    for input in [
        "",
        "GET",
        "GET / HTTP/1.1\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n",
    ] {
        let mut buf = BytesMut::from(input);
        assert!(
            matches!(parse_head(&mut buf, &limits), Ok(Parsed::Partial)),
            "{input:?}"
        );
    }
}

#[test]
fn leaves_the_rest_in_the_buffer() {
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\n"[..]);
    let Ok(Parsed::Complete(_)) = parse_head(&mut buf, &Limits::default()) else {
        panic!()
    };
    assert_eq!(&buf[..], b"GET /2 HTTP/1.1\r\n");
}

#[test]
fn framing() {
    let cases: &[(&str, BodyLen)] = &[
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
            BodyLen::Length(5),
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            BodyLen::Empty,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n",
            BodyLen::Length(5),
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            BodyLen::Length(5),
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            BodyLen::Chunked,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n",
            BodyLen::Chunked,
        ),
        ("GET / HTTP/1.0\r\n\r\n", BodyLen::Empty),
    ];
    for (input, want) in cases {
        assert_eq!(ok(input).body, *want, "{input:?}");
    }
}

#[test]
fn connection_semantics() {
    assert!(!ok("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").keep_alive);
    assert!(!ok("GET / HTTP/1.0\r\n\r\n").keep_alive);
    assert!(ok("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    assert!(ok("GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n").upgrade);
    assert!(!ok("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n").upgrade);
    assert!(
        ok("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
            .expect_continue
    );
    assert!(
        !ok("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expect_continue
    );
}

#[test]
fn request_target_forms() {
    assert_eq!(
        ok("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n").request.uri(),
        "*"
    );
    let h = ok("GET http://example.com/p?q HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!(h.request.uri().path(), "/p");
    assert_eq!(h.request.uri().host(), Some("example.com"));
    assert_eq!(
        ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            .request
            .uri()
            .port_u16(),
        Some(443)
    );
}

#[test]
fn rejections() {
    let cases: &[(&str, u16)] = &[
        ("GET / HTTP/1.1\r\n\r\n", 400),                       // no Host
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400), // repeated Host
        ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),          // bad Host
        ("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),           // space before colon
        (
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            400,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\n",
            400,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            400,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n",
            400,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            400,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
            501,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            501,
        ),
        (
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            400,
        ),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("GET / HTTP/3\r\nHost: x\r\n\r\n", 505),
        ("GET / HTTX/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET nope HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET /#frag HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n",
            417,
        ),
        ("GET / HTTP/1.1\r\nHost: x\r\nBad\x01Name: v\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
    ];
    for (input, status) in cases {
        assert_eq!(err(input).0, *status, "{input:?}");
    }
}

#[test]
fn body_over_the_limit_is_413_before_reading_it() {
    let limits = Limits {
        max_body_bytes: Some(10),
        ..Limits::default()
    };
    assert_eq!(
        err_with(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n",
            &limits
        )
        .0,
        413
    );
    let head = check(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
        &limits,
    );
    assert!(matches!(head, Ok(Some(_))));
}

#[test]
fn head_size_limits() {
    let limits = Limits {
        max_head_bytes: 100,
        max_uri_bytes: 40,
        ..Limits::default()
    };
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(40));
    assert_eq!(err_with(&long_uri, &limits).0, 414);
    let fits_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(39));
    assert!(matches!(check(fits_uri.as_bytes(), &limits), Ok(Some(_))));
    let big_headers = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
        "b".repeat(100)
    );
    assert_eq!(err_with(&big_headers, &limits).0, 431);
    let exactly = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n",
        "b".repeat(100 - 32)
    );
    assert_eq!(exactly.len(), 100);
    assert!(matches!(check(exactly.as_bytes(), &limits), Ok(Some(_))));
    let endless_line = format!("GET /{}", "a".repeat(200));
    assert_eq!(err_with(&endless_line, &limits).0, 414);
}

#[test]
fn header_count_limit() {
    let limits = Limits {
        max_headers: 3,
        ..Limits::default()
    };
    assert!(matches!(
        check(
            b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r\n",
            &limits
        ),
        Ok(Some(_))
    ));
    assert_eq!(
        err_with(
            "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
            &limits
        )
        .0,
        431
    );
}

#[test]
fn version_detection() {
    assert_eq!(other_version(b"GET / HTTP/2.0\r\n"), Some(true));
    assert_eq!(other_version(b"GET / HTTP/0.9\r\n"), Some(true));
    assert_eq!(other_version(b"GET / HTTP/2\n"), Some(true));
    assert_eq!(other_version(b"GET / HTTP/1.2\r\n"), Some(false));
    assert_eq!(other_version(b"GET / FOO\r\n"), Some(false));
    // Undecided until the line's end has arrived.
    assert_eq!(other_version(b"GET / HTTP/2"), None);
    assert_eq!(other_version(b"GET / HTTP/2.0\r"), None);
    assert_eq!(other_version(b"GET / HTTP/2.0 "), Some(false));
    assert_eq!(other_version(b"GET / HTTPS"), Some(false));
}

/// Found by the `request_head` fuzz target: a second version after the
/// first got 505 whole and 400 byte by byte.
#[test]
fn a_second_version_field_is_a_bad_request_however_split() {
    let (status, _) = err_with("GET /x HTTP/2.0 HTTP/2.0\r\n\r\n", &Limits::default());
    assert_eq!(status, 400);
    let (status, _) = err_with("GET /x HTTP/2.0\r\nHost: a\r\n\r\n", &Limits::default());
    assert_eq!(status, 505);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Request-like input: mostly HTTP tokens, with the bytes that matter to
    /// framing and smuggling over-represented.
    fn input() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"GET / HTTP/1.1\r\n".to_vec()),
            Just(b"POST /a?b HTTP/1.0\r\n".to_vec()),
            Just(b"Host: x\r\n".to_vec()),
            Just(b"Content-Length: 5\r\n".to_vec()),
            Just(b"Content-Length: 6\r\n".to_vec()),
            Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
            Just(b"Connection: close\r\n".to_vec()),
            Just(b"Expect: 100-continue\r\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n".to_vec()),
            Just(b" ".to_vec()),
            Just(b":".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|p| p.concat())
    }

    proptest! {
        /// Any input gives the same outcome whole as split anywhere, and
        /// never more than the limits allow.
        #[test]
        fn split_invariance_and_limits(bytes in input(), split in 0usize..200) {
            let limits = Limits { max_head_bytes: 256, max_uri_bytes: 64, max_headers: 8, ..Limits::default() };
            let whole = parse_all(&bytes, bytes.len().max(1), &limits);
            let split = split.min(bytes.len()).max(1);
            let parts = parse_all(&bytes, split, &limits);
            prop_assert_eq!(summary(&parts), summary(&whole));
            if let Ok(Some(head)) = &whole {
                prop_assert!(head.request.headers().len() <= 8);
                prop_assert!(head.request.uri().to_string().len() <= 64 + 32);
            }
        }
    }
}

#[test]
fn known_header_names_agree_with_the_general_parser() {
    let names = [
        "Host",
        "host",
        "HOST",
        "User-Agent",
        "user-agent",
        "Accept",
        "accept",
        "Accept-Encoding",
        "accept-encoding",
        "Accept-Language",
        "accept-language",
        "Connection",
        "connection",
        "Content-Length",
        "content-length",
        "Content-Type",
        "content-type",
        "Cookie",
        "cookie",
        "Referer",
        "referer",
        "Cache-Control",
        "cache-control",
        "If-None-Match",
        "if-none-match",
        "If-Modified-Since",
        "if-modified-since",
        "Origin",
        "origin",
        "Authorization",
        "authorization",
        "Range",
        "range",
        "Upgrade-Insecure-Requests",
        "upgrade-insecure-requests",
        "Sec-Fetch-Site",
        "sec-fetch-site",
        "Sec-Fetch-Mode",
        "sec-fetch-mode",
        "Sec-Fetch-User",
        "sec-fetch-user",
        "Sec-Fetch-Dest",
        "sec-fetch-dest",
        "sec-ch-ua",
        "Sec-CH-UA",
        "sec-ch-ua-mobile",
        "Sec-CH-UA-Mobile",
        "sec-ch-ua-platform",
        "Sec-CH-UA-Platform",
        "Priority",
        "priority",
        "X-Forwarded-For",
        "x-forwarded-for",
        "X-Forwarded-Proto",
        "x-forwarded-proto",
        "X-Forwarded-Host",
        "x-forwarded-host",
        "X-Real-IP",
        "x-real-ip",
        "X-Requested-With",
        "x-requested-with",
        "SEC-FETCH-SITE",
        "X-Custom",
        "aCCept",
    ];
    for name in names {
        let fast = super::header_name(name.as_bytes()).unwrap();
        assert_eq!(
            fast,
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            "{name}"
        );
        assert_eq!(fast.as_str(), name.to_ascii_lowercase());
    }
    assert!(super::header_name(b"bad name").is_err());
}

/// The value bytes httparse accepts are exactly those `HeaderValue` allows,
/// which is what lets `parse_head` skip `HeaderValue`'s own check.
#[test]
fn valid_field_bytes() {
    for b in 0..=255u8 {
        if b == b'\r' || b == b'\n' {
            continue;
        }
        let mut input = b"GET / HTTP/1.1\r\nHost: x\r\nX-Probe: a".to_vec();
        input.extend_from_slice(&[b, b'b']);
        input.extend_from_slice(b"\r\n\r\n");
        let parsed = parse_all(&input, input.len(), &Limits::default());
        let allowed = HeaderValue::from_bytes(&[b'a', b, b'b']).is_ok();
        match parsed {
            Ok(Some(head)) => {
                assert!(allowed, "byte {b:#04x} parsed but HeaderValue refuses it");
                assert_eq!(
                    head.request.headers()["x-probe"].as_bytes(),
                    [b'a', b, b'b']
                );
            }
            Ok(None) => panic!("byte {b:#04x}: head incomplete"),
            Err(reject) => {
                assert!(!allowed, "byte {b:#04x} allowed by HeaderValue but refused");
                assert_eq!(reject.status, StatusCode::BAD_REQUEST);
            }
        }
    }
}

#[test]
fn fragments_are_refused_in_every_target_form() {
    for target in ["/#frag", "/p?q#f", "/p?q=#", "#", "/%23ok#no"] {
        let input = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(err(&input).0, 400, "{target}");
    }
    let input = "CONNECT example.com:443#x HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    assert_eq!(err(input).0, 400);
    // an encoded '#' is data, not a fragment
    let h = ok("GET /%23ok?a=%23 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(h.request.uri(), "/%23ok?a=%23");
}

/// Found by the `request_head` fuzz target: a request line longer than
/// the line limit was refused when it came in pieces but parsed (or
/// refused for another reason) when it came whole.
#[test]
fn a_long_request_line_is_refused_however_split() {
    let limits = Limits {
        max_uri_bytes: 64,
        ..Limits::default()
    };
    let method = "A".repeat(100);
    let complete = format!("{method} / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(err_with(&complete, &limits), (414, "request line too long"));
    let bad_later = format!("{method} /\u{1} HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(
        err_with(&bad_later, &limits),
        (414, "request line too long")
    );
    let bad_early = format!("GET /\u{1}{method} HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(err_with(&bad_early, &limits).0, 400);
}

/// Found by the `request_head` fuzz target: a complete request line over
/// the limit followed by an unfinished head waited for more when whole and
/// got 414 byte by byte. Both inputs are in `fuzz/regressions`.
#[test]
fn a_long_complete_request_line_then_an_unfinished_head_is_refused() {
    let limits = Limits {
        max_uri_bytes: 64,
        max_head_bytes: 512,
        ..Limits::default()
    };
    let method = "A".repeat(100);
    for tail in ["\r\nHost: a\r\nX: y", "\nHost: a\nk"] {
        let input = format!("{method} /p HTTP/1.1{tail}");
        assert_eq!(err_with(&input, &limits), (414, "request line too long"));
    }
    // A head limit below the line limit is met first.
    let tight = Limits {
        max_uri_bytes: 64,
        max_head_bytes: 60,
        ..Limits::default()
    };
    let input = format!("GET /{} HTTP/1.1\r\nHost: a\r\n", "b".repeat(40));
    assert_eq!(err_with(&input, &tight).0, 431);
}

/// RFC 9110 §2.5: a later minor version of HTTP/1 is processed as
/// HTTP/1.1; another major version is 505.
#[test]
fn a_later_minor_version_is_handled_as_http11() {
    for version in ["1.2", "1.9"] {
        let head = ok(&format!("GET /a HTTP/{version}\r\nHost: x\r\n\r\n"));
        assert_eq!(head.request.version(), Version::HTTP_11);
        assert_eq!(head.request.uri(), "/a");
        assert!(head.keep_alive);
    }
    let head = ok("GET / HTTP/1.2\nHost: x\n\n");
    assert_eq!(head.request.version(), Version::HTTP_11);
    assert_eq!(err("GET / HTTP/1.2\r\n\r\n").0, 400); // still needs Host
    assert_eq!(err("GET / HTTP/1.10\r\nHost: x\r\n\r\n").0, 400);
    assert_eq!(err("GET / HTTP/2.2\r\nHost: x\r\n\r\n").0, 505);
    assert_eq!(newer_minor(b"GET / HTTP/1.2\r\n"), Some(13));
    assert_eq!(newer_minor(b"GET / HTTP/1.2"), None);
    assert_eq!(newer_minor(b"GET / HTTP/1.1\r\n"), None);
}

/// RFC 9112 §3.2: a Host that is not `uri-host [ ":" port ]` is 400.
#[test]
fn host_values_follow_the_uri_grammar() {
    for good in [
        "",
        "example.com",
        "example.com:8080",
        "example.com:",
        "127.0.0.1:80",
        "[::1]",
        "[::1]:443",
        "[fe80::1%25eth0]:1",
        "[v1.fe]",
        "xn--bcher-kva.example",
        "a%20b",
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
        let head = ok(&input);
        assert_eq!(head.request.headers()["host"], good);
    }
    for bad in [
        "127.0.0.1:abc",
        "[::1",
        "::1",
        "[::1]x",
        "[::1]:8a",
        "a:1:2",
        "[]",
        "[abc]",
        "a]b",
        "a[b",
        "a b",
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
        assert_eq!(err(&input), (400, "invalid host header"), "{bad:?}");
    }
}
