//! Fuzz target bodies for the gateway parsers, re-exported by `fuzzing`.
//!
//! - [`fastcgi_session`]: the FastCGI record decoder and [`Session`]. The
//!   records are the same whole, byte by byte and at every split; each
//!   re-encodes to a record that decodes to itself; the session keeps
//!   within its limits, and everything it writes is whole, padded records.
//! - [`scgi_header`]: the SCGI header parser. Every prefix of an input is
//!   incomplete or fails as the whole does; an accepted header has
//!   `CONTENT_LENGTH` first, `SCGI` = `1`, no repeated or empty names, and
//!   re-encodes to exactly the bytes it was read from (never a misread).

use bytes::BytesMut;

use super::fastcgi::{self, Event, MAX_CONTENT, Record, Session, SessionLimits};
use super::scgi;

/// Inputs longer than this are split at a few points only.
const EVERY_SPLIT_MAX: usize = 512;

fn records(
    pieces: &mut dyn Iterator<Item = &[u8]>,
    max: usize,
) -> (Vec<Record>, Option<fastcgi::ProtocolError>) {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match fastcgi::decode(&mut buf, max) {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

/// Decodes `data` (after a first byte choosing the limits) as FastCGI
/// records in several splits and drives a [`Session`] with them.
pub fn fastcgi_session(data: &[u8]) {
    let Some((&flags, stream)) = data.split_first() else {
        return;
    };
    let limits = SessionLimits {
        max_record: if flags & 1 != 0 { 64 } else { MAX_CONTENT },
        max_params_bytes: if flags & 2 != 0 { 48 } else { 32 * 1024 },
        max_params: if flags & 4 != 0 { 3 } else { 200 },
        max_requests: usize::from(flags >> 5) + 1,
        max_conns: 10,
    };
    let whole = records(&mut std::iter::once(stream), limits.max_record);
    let bytewise = records(&mut stream.chunks(1), limits.max_record);
    assert_eq!(whole, bytewise, "byte by byte");
    let splits: Vec<usize> = if stream.len() <= EVERY_SPLIT_MAX {
        (0..=stream.len()).collect()
    } else {
        vec![1, 7, stream.len() / 2, stream.len() - 1]
    };
    for at in splits {
        let (a, b) = stream.split_at(at);
        assert_eq!(
            records(&mut [a, b].into_iter(), limits.max_record),
            whole,
            "split at {at}"
        );
    }
    let mut session = Session::new(limits);
    let mut out = BytesMut::new();
    for record in whole.0 {
        // Encoded again, a record decodes to itself, padded to 8 bytes.
        let mut again = BytesMut::new();
        fastcgi::encode(&mut again, record.kind, record.id, &record.content);
        assert_eq!(again.len() % 8, 0);
        assert_eq!(
            fastcgi::decode(&mut again, MAX_CONTENT),
            Ok(Some(record.clone()))
        );
        let id = record.id;
        match session.handle(record, &mut out) {
            Err(_) => break,
            Ok(Event::Start {
                id: started,
                params,
            }) => {
                assert_eq!(started, id);
                assert!(params.len() <= limits.max_params);
                let bytes: usize = params.iter().map(|(n, v)| n.len() + v.len()).sum();
                assert!(bytes <= limits.max_params_bytes);
            }
            Ok(Event::Stdin { id: got, data }) => assert!(got == id && !data.is_empty()),
            Ok(
                Event::BadParams { id: got, .. }
                | Event::StdinEnd { id: got }
                | Event::Abort { id: got },
            ) => {
                assert_eq!(got, id);
            }
            Ok(Event::None) => {}
        }
        assert!(session.in_flight() <= limits.max_requests);
    }
    // What the session wrote is whole, padded records of types a responder
    // sends.
    assert_eq!(out.len() % 8, 0);
    while !out.is_empty() {
        let r = fastcgi::decode(&mut out, MAX_CONTENT)
            .expect("valid")
            .expect("whole");
        assert!(matches!(
            r.kind,
            fastcgi::kind::END_REQUEST
                | fastcgi::kind::GET_VALUES_RESULT
                | fastcgi::kind::UNKNOWN_TYPE
        ));
    }
}

/// Parses `data` (after a first byte choosing the limits) as an SCGI
/// request header, whole and at every prefix, and checks what it accepts.
pub fn scgi_header(data: &[u8]) {
    let Some((&flags, input)) = data.split_first() else {
        return;
    };
    let (max_bytes, max_vars) = if flags & 1 != 0 {
        (64, 4)
    } else {
        (32 * 1024, 200)
    };
    let whole = scgi::parse(input, max_bytes, max_vars);
    let prefixes: Vec<usize> = if input.len() <= EVERY_SPLIT_MAX {
        (0..input.len()).collect()
    } else {
        vec![0, 1, 7, input.len() / 2, input.len() - 1]
    };
    for at in prefixes {
        match scgi::parse(&input[..at], max_bytes, max_vars) {
            Ok(None) => {}
            Ok(Some((_, used))) => assert_eq!(
                Ok(Some(used)),
                whole.clone().map(|w| w.map(|(_, u)| u)),
                "prefix {at}"
            ),
            Err(e) => assert_eq!(
                whole.clone().err(),
                Some(e),
                "prefix {at} fails as the whole"
            ),
        }
    }
    if let Ok(Some((vars, used))) = whole {
        assert!(used <= input.len());
        assert!(vars.len() <= max_vars);
        assert_eq!(&vars[0].0[..], b"CONTENT_LENGTH");
        assert!(
            vars.iter()
                .any(|(n, v)| &n[..] == b"SCGI" && &v[..] == b"1")
        );
        let mut block = Vec::new();
        for (i, (n, v)) in vars.iter().enumerate() {
            assert!(!n.is_empty() && !n.contains(&0) && !v.contains(&0));
            assert!(vars[..i].iter().all(|(m, _)| m != n), "no repeated name");
            block.extend_from_slice(n);
            block.push(0);
            block.extend_from_slice(v);
            block.push(0);
        }
        assert!(block.len() <= max_bytes);
        let mut again = format!("{}:", block.len()).into_bytes();
        again.extend_from_slice(&block);
        again.push(b',');
        assert_eq!(&again[..], &input[..used], "re-encodes to what was read");
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// Seeds of the fuzz corpus, mutated: a short stable-Rust run of the
    /// same properties.
    fn seeds(target: &str) -> Vec<Vec<u8>> {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target);
        let mut out: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    fn mutated(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
        let seeds = seeds(target);
        (
            0..seeds.len().max(1),
            proptest::collection::vec((any::<u16>(), any::<u8>(), 0u8..3), 0..8),
        )
            .prop_map(move |(i, edits)| {
                let mut input = seeds.get(i).cloned().unwrap_or_default();
                for (at, byte, op) in edits {
                    let at = usize::from(at) % (input.len() + 1);
                    match op {
                        0 if at < input.len() => input[at] = byte,
                        1 => input.insert(at, byte),
                        _ if at < input.len() => {
                            input.remove(at);
                        }
                        _ => {}
                    }
                }
                input
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn fastcgi_properties_hold_on_mutated_seeds(input in mutated("fastcgi_session")) {
            super::fastcgi_session(&input);
        }

        #[test]
        fn scgi_properties_hold_on_mutated_seeds(input in mutated("scgi_header")) {
            super::scgi_header(&input);
        }

        #[test]
        fn fastcgi_properties_hold_on_random_bytes(input in proptest::collection::vec(any::<u8>(), 0..200)) {
            super::fastcgi_session(&input);
        }

        #[test]
        fn scgi_properties_hold_on_random_bytes(input in proptest::collection::vec(any::<u8>(), 0..120)) {
            super::scgi_header(&input);
        }
    }
}
