//! Fuzz target: the `Cookie` request header parser and the jar's limits,
//! and the signed and encrypted value readers on hostile input. Nothing
//! panics; the jar holds at most `MAX_COOKIES` pairs, each with a
//! non-empty name free of `;` and edge whitespace; a value nobody signed
//! or sealed never reads as present; what is signed reads back; a lookup
//! by name agrees with the full parse.
#![no_main]

use celer::cookie::{
    Algorithm, CookieJar, EncryptionKeys, MAX_COOKIE_HEADER_BYTES, MAX_COOKIES, SigningKeys,
    parse_pairs,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let signing = SigningKeys::new(Algorithm::Sha256, [[1u8; 32]])
        .unwrap()
        .and(Algorithm::Sha512, [2u8; 32])
        .unwrap();
    let sealing = EncryptionKeys::new([[3u8; 32]]).unwrap();

    // The whole input as one or more `Cookie` fields (split at NUL).
    let mut headers = http::HeaderMap::new();
    for field in data.split(|&b| b == 0) {
        if let Ok(value) = http::HeaderValue::from_bytes(field) {
            headers.append(http::header::COOKIE, value);
        }
    }
    let total: usize = headers.get_all(http::header::COOKIE).iter().map(|v| v.len()).sum();
    match CookieJar::from_headers(&headers) {
        Ok(jar) => {
            assert!(total <= MAX_COOKIE_HEADER_BYTES);
            assert!(jar.len() <= MAX_COOKIES);
            for (name, value) in jar.iter() {
                assert!(!name.is_empty() && !name.contains(';') && !value.contains(';'));
                assert_eq!(name, name.trim_matches([' ', '\t']));
                // The lookup by name (a scan for the name alone) finds
                // what the full parse finds first under that name.
                let first = jar.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
                assert_eq!(jar.get(name), first);
                assert_eq!(jar.get_signed(&signing, name), None);
                assert_eq!(jar.get_private(&sealing, name), None);
            }
        }
        Err(_) => {
            let pairs: usize = headers
                .get_all(http::header::COOKIE)
                .iter()
                .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
                .map(|v| parse_pairs(v).count())
                .sum();
            assert!(total > MAX_COOKIE_HEADER_BYTES || pairs > MAX_COOKIES);
        }
    }

    // Any text signs and reads back under its name only.
    if let Ok(text) = std::str::from_utf8(data) {
        let signed = signing.sign("n", text);
        assert_eq!(signing.verify("n", &signed).as_deref(), Some(text));
        assert_eq!(signing.verify("m", &signed), None);
        assert_eq!(signing.verify("n", text), None);
        assert_eq!(sealing.decrypt("n", text), None);
    }
});
