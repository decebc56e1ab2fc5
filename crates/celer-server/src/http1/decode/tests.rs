//! Unit tests of `decode`: every input whole, byte by byte and at every split.
use super::*;

/// What decoding `input` to the end yields: the data, the trailers, or the
/// rejection. Checked to be the same whole, byte by byte and at every split.
#[derive(Debug, PartialEq)]
enum Outcome {
    Done {
        data: Vec<u8>,
        trailers: Vec<(String, String)>,
        rest: Vec<u8>,
    },
    Partial {
        data: Vec<u8>,
    },
    Err(u16, &'static str),
}

fn check(mut make: impl FnMut() -> Decoder, input: &[u8], limits: &Limits) -> Outcome {
    let whole = run(make(), input, input.len(), limits);
    for step in 1..input.len() {
        assert_eq!(
            run(make(), input, step, limits),
            whole,
            "step {step} of {:?}",
            String::from_utf8_lossy(input)
        );
    }
    whole
}

fn run(mut dec: Decoder, input: &[u8], step: usize, limits: &Limits) -> Outcome {
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    let mut trailers = Vec::new();
    let mut pieces = input.chunks(step.max(1));
    loop {
        match dec.decode(&mut buf, limits) {
            Ok(Decoded::Data(d)) => data.extend_from_slice(&d),
            Ok(Decoded::Trailers(t)) => {
                trailers = t
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
                    .collect();
            }
            Ok(Decoded::End) => {
                let mut rest = buf.to_vec();
                for p in pieces {
                    rest.extend_from_slice(p);
                }
                return Outcome::Done {
                    data,
                    trailers,
                    rest,
                };
            }
            Ok(Decoded::Partial) => match pieces.next() {
                Some(p) => buf.extend_from_slice(p),
                None => return Outcome::Partial { data },
            },
            Err(r) => return Outcome::Err(r.status.as_u16(), r.reason),
        }
    }
}

fn chunked(input: &str) -> Outcome {
    check(Decoder::chunked, input.as_bytes(), &Limits::default())
}

fn done(data: &str, rest: &str) -> Outcome {
    Outcome::Done {
        data: data.into(),
        trailers: vec![],
        rest: rest.into(),
    }
}

#[test]
fn length() {
    let limits = Limits::default();
    assert_eq!(
        check(|| Decoder::length(5), b"helloGET", &limits),
        done("hello", "GET")
    );
    assert_eq!(
        check(|| Decoder::length(5), b"hel", &limits),
        Outcome::Partial {
            data: b"hel".to_vec()
        }
    );
    assert_eq!(check(|| Decoder::length(0), b"x", &limits), done("", "x"));
}

#[test]
fn chunked_bodies() {
    assert_eq!(chunked("5\r\nhello\r\n0\r\n\r\n"), done("hello", ""));
    assert_eq!(
        chunked("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT"),
        done("hello world", "NEXT")
    );
    assert_eq!(
        chunked("A\r\n0123456789\r\n0\r\n\r\n"),
        done("0123456789", "")
    );
    assert_eq!(
        chunked("a\r\n0123456789\r\n0\r\n\r\n"),
        done("0123456789", "")
    );
    assert_eq!(chunked("005\r\nhello\r\n000\r\n\r\n"), done("hello", ""));
    assert_eq!(
        chunked("5;name=value\r\nhello\r\n0;x\r\n\r\n"),
        done("hello", "")
    );
    assert_eq!(
        chunked("5 ;name=\"q v\"\r\nhello\r\n0\r\n\r\n"),
        done("hello", "")
    );
    assert_eq!(chunked("0\r\n\r\n"), done("", ""));
}

#[test]
fn trailers() {
    assert_eq!(
        chunked("3\r\nabc\r\n0\r\nX-Sum: 42\r\nX-Other: a b\r\n\r\nrest"),
        Outcome::Done {
            data: b"abc".to_vec(),
            trailers: vec![
                ("x-sum".into(), "42".into()),
                ("x-other".into(), "a b".into())
            ],
            rest: b"rest".to_vec(),
        }
    );
}

#[test]
fn malformed_chunks() {
    let cases = [
        "\r\nhello\r\n0\r\n\r\n",               // no size
        "x\r\nhello\r\n0\r\n\r\n",              // not hex
        "-5\r\nhello\r\n0\r\n\r\n",             // sign
        "0x5\r\nhello\r\n0\r\n\r\n",            // prefix
        "5\nhello\r\n0\r\n\r\n",                // bare LF after size
        "5\r\nhelloXX0\r\n\r\n",                // no CRLF after data
        "5\r\nhello\n0\r\n\r\n",                // bare LF after data
        "5;a\x01b\r\nhello\r\n0\r\n\r\n",       // control byte in extension
        "5\rxhello\r\n0\r\n\r\n",               // CR not followed by LF
        "10000000000000000\r\n",                // 17 significant hex digits
        "3\r\nabc\r\n0\r\nBad Name: v\r\n\r\n", // invalid trailer
    ];
    for input in cases {
        match chunked(input) {
            Outcome::Err(400, _) => {}
            other => panic!("{input:?} gave {other:?}"),
        }
    }
}

#[test]
fn chunk_size_digits_are_bounded() {
    let zeros = format!("{}5\r\nhello\r\n0\r\n\r\n", "0".repeat(31));
    assert_eq!(chunked(&zeros), done("hello", ""));
    let too_many = format!("{}5\r\nhello\r\n0\r\n\r\n", "0".repeat(32));
    assert!(matches!(
        chunked(&too_many),
        Outcome::Err(400, "chunk size too large")
    ));
}

#[test]
fn body_limit_counts_chunked_data() {
    let limits = Limits {
        max_body_bytes: Some(10),
        ..Limits::default()
    };
    let at_limit = check(
        Decoder::chunked,
        b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n",
        &limits,
    );
    assert_eq!(at_limit, done("helloworld", ""));
    let over = check(
        Decoder::chunked,
        b"5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n",
        &limits,
    );
    assert_eq!(over, Outcome::Err(413, "request body too large"));
}

#[test]
fn extension_bytes_are_bounded() {
    let limits = Limits {
        max_chunk_ext_bytes: 8,
        ..Limits::default()
    };
    let fits = check(Decoder::chunked, b"1;1234567\r\na\r\n0\r\n\r\n", &limits);
    assert_eq!(fits, done("a", ""));
    let over = check(Decoder::chunked, b"1;12345678\r\na\r\n0\r\n\r\n", &limits);
    assert_eq!(over, Outcome::Err(400, "chunk extensions too large"));
    let summed = check(
        Decoder::chunked,
        b"1;1234\r\na\r\n1;1234\r\nb\r\n0\r\n\r\n",
        &limits,
    );
    assert_eq!(summed, Outcome::Err(400, "chunk extensions too large"));
}

#[test]
fn trailer_section_is_bounded() {
    let limits = Limits {
        max_head_bytes: 32,
        ..Limits::default()
    };
    let big = format!("0\r\nX: {}\r\n\r\n", "v".repeat(40));
    assert!(matches!(
        check(Decoder::chunked, big.as_bytes(), &limits),
        Outcome::Err(431, _)
    ));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn chunky() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"5\r\nhello\r\n".to_vec()),
            Just(b"0\r\n\r\n".to_vec()),
            Just(b"0\r\nX: y\r\n\r\n".to_vec()),
            Just(b"a;ext=1\r\n0123456789\r\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..6),
        ];
        proptest::collection::vec(piece, 0..10).prop_map(|p| p.concat())
    }

    proptest! {
        /// The chunked decoder agrees with itself at every split, never
        /// panics, and never yields more than the body limit.
        #[test]
        fn chunked_split_invariance(bytes in chunky()) {
            let limits = Limits { max_body_bytes: Some(40), max_chunk_ext_bytes: 16, ..Limits::default() };
            let out = check(Decoder::chunked, &bytes, &limits);
            if let Outcome::Done { data, .. } | Outcome::Partial { data } = &out {
                prop_assert!(data.len() <= 40);
            }
        }
    }
}
