//! Tests of the HPACK codec: RFC 7541 Appendix C's examples, the Huffman
//! code, the encoder through the decoder, and each of the decoder's
//! refusals.

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::huffman;
use super::{
    DEFAULT_TABLE_SIZE, DecodeError, Decoded, Decoder, Encoder, Field, MAX_INTEGER, Pseudo,
    STATIC_TABLE, decode_integer, encode_integer, static_name_index,
};

// ===== helpers =====

/// The bytes of a hex dump as RFC 7541 prints them (spaces ignored).
fn hex(dump: &str) -> Vec<u8> {
    let digits: Vec<u8> = dump.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// A field as text, for comparisons.
fn text(field: &Field) -> (String, String) {
    match field {
        Field::Pseudo(pseudo, value) => (
            pseudo.name().to_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ),
        Field::Header(name, value) => (
            name.as_str().to_owned(),
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        ),
    }
}

/// Owned text pairs from string pairs.
fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// Decodes `block` with no list limit, returning the fields handed over.
fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<(Vec<Field>, Decoded), DecodeError> {
    decode_limited(decoder, block, usize::MAX)
}

/// Decodes `block` under a list limit, returning the fields handed over.
fn decode_limited(
    decoder: &mut Decoder,
    block: &[u8],
    max_list_size: usize,
) -> Result<(Vec<Field>, Decoded), DecodeError> {
    let mut fields = Vec::new();
    let decoded = decoder.decode(Bytes::copy_from_slice(block), max_list_size, &mut |field| {
        fields.push(field)
    })?;
    Ok((fields, decoded))
}

/// Decodes `block`, which must be valid with nothing malformed, as text.
fn decode_text(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
    let (fields, decoded) = decode(decoder, block).expect("a valid block");
    assert_eq!(decoded, Decoded::default());
    fields.iter().map(text).collect()
}

/// One block of an Appendix C example: its dump, the fields it decodes
/// to, and the dynamic table after it (newest first) with its size.
struct Example {
    /// The block, as the RFC dumps it.
    dump: &'static str,
    /// The fields it decodes to.
    fields: List,
    /// The dynamic table after it, newest entry first.
    table: List,
    /// The dynamic table's size after it, in bytes.
    table_size: usize,
}

/// Decodes a sequence of blocks on one decoder with a table of
/// `table_size` bytes, checking each block's fields and the table after it.
fn check_examples(table_size: usize, examples: &[Example]) {
    let mut decoder = Decoder::new(table_size);
    for (n, example) in examples.iter().enumerate() {
        let fields = decode_text(&mut decoder, &hex(example.dump));
        assert_eq!(fields, pairs(example.fields), "fields of block {n}");
        assert_eq!(
            decoder.table_entries(),
            pairs(example.table),
            "table after block {n}"
        );
        assert_eq!(
            decoder.table_size(),
            example.table_size,
            "table size after block {n}"
        );
    }
}

/// Encodes an integer with no flag bits.
fn integer_bytes(value: usize, prefix_bits: u32) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_integer(value, prefix_bits, 0, &mut out);
    out.to_vec()
}

/// A header map from name and value pairs, in order.
fn map(list: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in list {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    headers
}

/// What a decoder should make of `headers` as a response: `:status`, then
/// the map's fields in its iteration order.
fn expected_response(status: StatusCode, headers: &HeaderMap) -> Vec<(String, String)> {
    let mut want = vec![(":status".to_owned(), status.as_str().to_owned())];
    for (name, value) in headers {
        want.push((
            name.as_str().to_owned(),
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        ));
    }
    want
}

/// Encodes a response and returns the block.
fn encode_response(encoder: &mut Encoder, status: StatusCode, headers: &HeaderMap) -> Vec<u8> {
    let mut out = BytesMut::new();
    encoder.encode_response(status, headers, &mut out);
    out.to_vec()
}

/// A small deterministic generator (xorshift64), so the "random" tests
/// need no dependency and fail the same way every run.
struct Rng(u64);

impl Rng {
    /// The next 64 bits.
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number from 0 to `n - 1`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Decodes a Huffman string into a fresh buffer.
fn huffman_decode(src: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = vec![0; src.len() * 8 / 5];
    let len = huffman::decode(src, &mut out)?;
    out.truncate(len);
    Ok(out)
}

/// Encodes a Huffman string into a fresh buffer.
fn huffman_encode(src: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    huffman::encode(src, &mut out);
    assert_eq!(out.len(), huffman::encoded_len(src));
    out.to_vec()
}

// ===== integers (RFC 7541 §5.1, Appendix C.1) =====

#[test]
fn integers_encode_as_appendix_c_1_shows() {
    // C.1.1: 10 on a 5-bit prefix; C.1.2: 1337 on a 5-bit prefix; C.1.3:
    // 42 at an octet boundary (an 8-bit prefix).
    assert_eq!(integer_bytes(10, 5), [0b0000_1010]);
    assert_eq!(
        integer_bytes(1337, 5),
        [0b0001_1111, 0b1001_1010, 0b0000_1010]
    );
    assert_eq!(integer_bytes(42, 8), [0b0010_1010]);
    for (bytes, prefix_bits, want) in [
        (&[0x0a][..], 5, 10),
        (&[0x1f, 0x9a, 0x0a][..], 5, 1337),
        (&[0x2a][..], 8, 42),
    ] {
        let mut pos = 0;
        assert_eq!(decode_integer(bytes, &mut pos, prefix_bits), Ok(want));
        assert_eq!(pos, bytes.len());
    }
}

#[test]
fn integers_round_trip_on_every_prefix() {
    for prefix_bits in 1..=8 {
        let prefix_max = (1usize << prefix_bits) - 1;
        for value in [
            0,
            1,
            prefix_max - 1,
            prefix_max,
            prefix_max + 1,
            127,
            128,
            4096,
            MAX_INTEGER,
        ] {
            let mut out = BytesMut::new();
            // Flag bits above the prefix must not leak into the value.
            let flags = if prefix_bits == 8 {
                0
            } else {
                0xff << prefix_bits
            };
            encode_integer(value, prefix_bits, flags, &mut out);
            let mut pos = 0;
            assert_eq!(decode_integer(&out, &mut pos, prefix_bits), Ok(value));
            assert_eq!(pos, out.len(), "{value} on {prefix_bits} bits");
        }
    }
}

#[test]
fn integers_past_the_bound_or_the_block_are_refused() {
    let mut at_bound = BytesMut::new();
    encode_integer(MAX_INTEGER, 5, 0, &mut at_bound);
    let mut over = BytesMut::new();
    encode_integer(MAX_INTEGER + 1, 5, 0, &mut over);
    for (bytes, want) in [
        (&at_bound[..], Ok(MAX_INTEGER)),
        (&over[..], Err(DecodeError)),
        // Continuation bytes without end, and a zero group too many.
        (
            &[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f][..],
            Err(DecodeError),
        ),
        (&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x00][..], Err(DecodeError)),
        // A zero group more than needed, within four bytes: accepted.
        (&[0x1f, 0x81, 0x80, 0x00][..], Ok(32)),
        // Cut short.
        (&[0x1f][..], Err(DecodeError)),
        (&[0x1f, 0x9a][..], Err(DecodeError)),
        (&[][..], Err(DecodeError)),
    ] {
        let mut pos = 0;
        assert_eq!(decode_integer(bytes, &mut pos, 5), want, "{bytes:02x?}");
    }
}

// ===== the static table (Appendix A) =====

#[test]
fn static_table_sizes_and_name_indices_agree_with_its_text() {
    for (at, entry) in STATIC_TABLE.iter().enumerate() {
        let (name, value) = match (&entry.name, &entry.value) {
            (super::Name::Pseudo(pseudo), super::Value::Pseudo(value)) => {
                (pseudo.name(), value.len())
            }
            (super::Name::Header(name), super::Value::Header(value)) => {
                // The first entry with this name is the one the encoder names.
                let first = STATIC_TABLE
                    .iter()
                    .position(|e| matches!(&e.name, super::Name::Header(n) if n == name))
                    .unwrap();
                assert_eq!(static_name_index(name), Some(first + 1));
                (name.as_str(), value.len())
            }
            other => panic!("static entry {} is {other:?}", at + 1),
        };
        assert_eq!(entry.size, name.len() + value + 32, "entry {}", at + 1);
    }
    assert_eq!(static_name_index(&header::CACHE_CONTROL), Some(24));
    assert_eq!(static_name_index(&header::SET_COOKIE), Some(55));
    assert_eq!(static_name_index(&header::WWW_AUTHENTICATE), Some(61));
    assert_eq!(
        static_name_index(&HeaderName::from_static("x-custom")),
        None
    );
    assert_eq!(static_name_index(&header::ACCESS_CONTROL_MAX_AGE), None);
}

// ===== the decoder on Appendix C =====

#[test]
fn appendix_c_2_single_representations() {
    // C.2.1: a literal with indexing, literal name.
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    assert_eq!(
        decode_text(&mut decoder, &block),
        pairs(&[("custom-key", "custom-header")])
    );
    assert_eq!(decoder.table_size(), 55);
    // C.2.2: without indexing, indexed name.
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = hex("040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(
        decode_text(&mut decoder, &block),
        pairs(&[(":path", "/sample/path")])
    );
    assert_eq!(decoder.table_size(), 0);
    // C.2.3: never indexed, literal name; the value comes out sensitive.
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
    let (fields, _) = decode(&mut decoder, &block).unwrap();
    assert_eq!(
        fields.iter().map(text).collect::<Vec<_>>(),
        pairs(&[("password", "secret")])
    );
    assert!(matches!(&fields[0], Field::Header(_, value) if value.is_sensitive()));
    assert_eq!(decoder.table_size(), 0);
    // C.2.4: indexed.
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode_text(&mut decoder, &[0x82]),
        pairs(&[(":method", "GET")])
    );
}

/// A list of fields, or of table entries, as text.
type List = &'static [(&'static str, &'static str)];

/// The request lists of C.3 and C.4 (the same, coded without and with
/// Huffman), with the table after each.
const REQUESTS: [(List, List, usize); 3] = [
    (
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ],
        &[(":authority", "www.example.com")],
        57,
    ),
    (
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ],
        &[
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
        110,
    ),
    (
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ],
        &[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
        164,
    ),
];

/// The response lists of C.5 and C.6, on a 256-byte table.
const RESPONSES: [(List, List, usize); 3] = [
    (
        &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ],
        &[
            ("location", "https://www.example.com"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("cache-control", "private"),
            (":status", "302"),
        ],
        222,
    ),
    (
        &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ],
        &[
            (":status", "307"),
            ("location", "https://www.example.com"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("cache-control", "private"),
        ],
        222,
    ),
    (
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            (
                "set-cookie",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ],
        &[
            (
                "set-cookie",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
            ("content-encoding", "gzip"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ],
        215,
    ),
];

/// The three blocks of an example, each with its list and table.
fn examples(dumps: [&'static str; 3], lists: &[(List, List, usize); 3]) -> Vec<Example> {
    dumps
        .iter()
        .zip(lists)
        .map(|(dump, (fields, table, table_size))| Example {
            dump,
            fields,
            table,
            table_size: *table_size,
        })
        .collect()
}

#[test]
fn appendix_c_3_requests_without_huffman() {
    let dumps = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ];
    check_examples(DEFAULT_TABLE_SIZE, &examples(dumps, &REQUESTS));
}

#[test]
fn appendix_c_4_requests_with_huffman() {
    let dumps = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ];
    check_examples(DEFAULT_TABLE_SIZE, &examples(dumps, &REQUESTS));
}

#[test]
fn appendix_c_5_responses_without_huffman() {
    let dumps = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ];
    check_examples(256, &examples(dumps, &RESPONSES));
}

#[test]
fn appendix_c_6_responses_with_huffman() {
    let dumps = [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ];
    check_examples(256, &examples(dumps, &RESPONSES));
}

// ===== Huffman (Appendix B) =====

#[test]
fn huffman_codes_match_appendix_b() {
    // A sample across the lengths, as Appendix B lists them (code
    // right-aligned, length in bits).
    for (symbol, code, len) in [
        (0, 0x1ff8, 13),
        (1, 0x7fffd8, 23),
        (10, 0x3ffffffc, 30),
        (22, 0x3ffffffe, 30),
        (b' ' as usize, 0x14, 6),
        (b'!' as usize, 0x3f8, 10),
        (b'&' as usize, 0xf8, 8),
        (b'0' as usize, 0x0, 5),
        (b'9' as usize, 0x1f, 6),
        (b':' as usize, 0x5c, 7),
        (b'<' as usize, 0x7ffc, 15),
        (b'\\' as usize, 0x7fff0, 19),
        (b'a' as usize, 0x3, 5),
        (b't' as usize, 0x9, 5),
        (b'z' as usize, 0x7b, 7),
        (b'~' as usize, 0x1ffd, 13),
        (127, 0xffffffc, 28),
        (128, 0xfffe6, 20),
        (153, 0x1fffdc, 21),
        (199, 0x1ffffec, 25),
        (203, 0x7ffffde, 27),
        (255, 0x3ffffee, 26),
        (256, 0x3fffffff, 30),
    ] {
        assert_eq!(huffman::code_of(symbol), (code, len), "symbol {symbol}");
    }
}

#[test]
fn huffman_encodes_the_appendix_c_strings() {
    for (text, dump) in [
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("private", "aec3 771a 4b"),
        ("gzip", "9bd9 ab"),
    ] {
        assert_eq!(huffman_encode(text.as_bytes()), hex(dump), "{text}");
        assert_eq!(
            huffman_decode(&hex(dump)).unwrap(),
            text.as_bytes(),
            "{text}"
        );
    }
}

#[test]
fn huffman_round_trips_every_byte_value() {
    for byte in 0..=255u8 {
        let coded = huffman_encode(&[byte]);
        assert_eq!(huffman_decode(&coded).unwrap(), [byte], "byte {byte}");
    }
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(huffman_decode(&huffman_encode(&all)).unwrap(), all);
    let all_reversed: Vec<u8> = (0..=255).rev().collect();
    assert_eq!(
        huffman_decode(&huffman_encode(&all_reversed)).unwrap(),
        all_reversed
    );
}

#[test]
fn huffman_round_trips_random_strings() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..2000 {
        let len = rng.below(80);
        // Half the strings are header-like text, half any bytes.
        let text: Vec<u8> = (0..len)
            .map(|_| {
                if round % 2 == 0 {
                    b"abcdefghijklmnopqrstuvwxyz0123456789-_./:;=, \"'"[rng.below(47)]
                } else {
                    rng.next() as u8
                }
            })
            .collect();
        let coded = huffman_encode(&text);
        assert_eq!(huffman_decode(&coded).unwrap(), text, "{text:02x?}");
    }
}

#[test]
fn huffman_refuses_bad_padding_and_eos() {
    for (coded, why) in [
        // 'a' (00011), then three zero bits.
        (&[0b0001_1000][..], "padding of zeros"),
        // 'a', then padding of 1 and 0 bits mixed.
        (&[0b0001_1101][..], "padding not all ones"),
        // 'a' and three bits of ones, then a whole byte of ones: 11 bits.
        (&[0b0001_1111, 0xff][..], "padding over 7 bits"),
        // A byte of ones alone: 8 bits of padding.
        (&[0xff][..], "padding over 7 bits"),
        // EOS (30 ones) and two bits of padding.
        (&[0xff, 0xff, 0xff, 0xff][..], "EOS"),
        // 'a', then EOS, then padding.
        (
            &[0b0001_1111, 0xff, 0xff, 0xff, 0xfe][..],
            "EOS after a symbol",
        ),
    ] {
        assert_eq!(huffman_decode(coded), Err(DecodeError), "{why}");
    }
    // 'a' and 3 ones of padding; '0', '1' (00001) and 6 ones.
    assert_eq!(huffman_decode(&[0b0001_1111]).unwrap(), b"a");
    // '0' and then 11 bits: ones only, or ones with a zero near the end.
    assert_eq!(
        huffman_decode(&[0b0000_0111, 0b1111_1111]),
        Err(DecodeError)
    );
    assert_eq!(
        huffman_decode(&[0b0000_0111, 0b1111_1110]),
        Err(DecodeError)
    );
    assert_eq!(huffman_decode(&[0b0000_0000, 0b0111_1111]).unwrap(), b"01");
    assert_eq!(huffman_decode(&[]).unwrap(), b"");
}

// ===== the decoder's refusals =====

#[test]
fn decoder_refuses_what_rfc_7541_forbids() {
    for (block, why) in [
        (&[0x80][..], "index 0"),
        (&[0xbe][..], "index 62 of an empty dynamic table"),
        (&[0xff, 0x00][..], "index 127 of an empty dynamic table"),
        (&[0x7e, 0x01, b'a'][..], "a name index past both tables"),
        (
            &[0x0f, 0x2f, 0x01, b'a'][..],
            "a name index past both tables (4-bit prefix)",
        ),
        (&[0x82, 0x20][..], "a size update after a field"),
        (&[0x82, 0x3f, 0xe1, 0x1f][..], "a size update after a field"),
        (
            &[0x3f, 0xe2, 0x1f][..],
            "a size update over the advertised 4096",
        ),
        (
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x0f][..],
            "an integer past the bound",
        ),
        (&[0x04, 0x05, b'a'][..], "a value longer than the block"),
        (
            &[0x40, 0x05, b'a', b'b'][..],
            "a name longer than the block",
        ),
        (&[0x40, 0x01, b'a'][..], "a literal cut before its value"),
        (&[0x40][..], "a literal cut before its name"),
        (&[0x3f][..], "a size update cut short"),
        (
            &[0x04, 0x81, 0x00][..],
            "a Huffman value with padding of zeros",
        ),
        (
            &[0x04, 0x84, 0xff, 0xff, 0xff, 0xff][..],
            "a Huffman value holding EOS",
        ),
        (
            &[0x40, 0x81, 0xff, 0x00][..],
            "a Huffman name with 8 bits of padding",
        ),
        (
            &[0x04, 0xff, 0xff, 0xff, 0xff, 0x0f][..],
            "a string length past the bound",
        ),
    ] {
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        assert_eq!(
            decode(&mut decoder, block).unwrap_err(),
            DecodeError,
            "{why}"
        );
    }
    // Under a smaller advertised size, that is the bound.
    let mut decoder = Decoder::new(256);
    assert_eq!(
        decode(&mut decoder, &[0x3f, 0xe2, 0x01]).unwrap_err(),
        DecodeError
    );
    assert_eq!(decode_text(&mut decoder, &[0x3f, 0xe1, 0x01]), pairs(&[]));
}

#[test]
fn size_updates_at_the_start_evict_and_set_the_size() {
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    // C.2.1's entry (55 bytes), then an update to 0 and back to 4096 in
    // the next block: the table is emptied, and stays usable.
    let entry = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    decode_text(&mut decoder, &entry);
    assert_eq!(decoder.table_size(), 55);
    let mut block = vec![0x20, 0x3f, 0xe1, 0x1f, 0x82];
    assert_eq!(
        decode_text(&mut decoder, &block),
        pairs(&[(":method", "GET")])
    );
    assert_eq!(decoder.table_size(), 0);
    assert_eq!(decode(&mut decoder, &[0xbe]).unwrap_err(), DecodeError);
    // An update to 54 leaves no room for the 55-byte entry: adding it
    // empties the table and does not keep it (RFC 7541 §4.4).
    block = vec![0x3f, 0x17];
    block.extend_from_slice(&entry);
    decode_text(&mut decoder, &block);
    assert_eq!(decoder.table_size(), 0);
    // An update to 55 keeps exactly one.
    block = vec![0x3f, 0x18];
    block.extend_from_slice(&entry);
    decode_text(&mut decoder, &block);
    assert_eq!(decoder.table_size(), 55);
    decode_text(&mut decoder, &entry);
    assert_eq!(decoder.table_entries().len(), 1);
}

// ===== malformed fields (RFC 9113 §8.2.1) =====

/// A literal field without indexing and with a literal name.
fn literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_integer(0, 4, 0x00, &mut out);
    encode_integer(name.len(), 7, 0, &mut out);
    out.extend_from_slice(name);
    encode_integer(value.len(), 7, 0, &mut out);
    out.extend_from_slice(value);
    out.to_vec()
}

/// A literal field with incremental indexing and a literal name.
fn indexed_literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_integer(0, 6, 0x40, &mut out);
    encode_integer(name.len(), 7, 0, &mut out);
    out.extend_from_slice(name);
    encode_integer(value.len(), 7, 0, &mut out);
    out.extend_from_slice(value);
    out.to_vec()
}

#[test]
fn malformed_fields_are_reported_and_skipped() {
    for (name, value, why) in [
        (&b"Content-Type"[..], &b"a"[..], "an uppercase name"),
        (b"x-fOo", b"a", "an uppercase letter inside"),
        (b"", b"a", "an empty name"),
        (b"x foo", b"a", "a space in the name"),
        (b"x\0foo", b"a", "NUL in the name"),
        (b"x:foo", b"a", "a colon inside the name"),
        (b"x\xc3\xa9", b"a", "a non-ASCII name"),
        (b":foo", b"a", "an unknown pseudo-header"),
        (b":Method", b"GET", "an uppercase pseudo-header"),
        (b"x-foo", b"a\0b", "NUL in the value"),
        (b"x-foo", b"a\rb", "CR in the value"),
        (b"x-foo", b"a\nb", "LF in the value"),
        (b"x-foo", b"a\x7fb", "DEL in the value"),
        (b"x-foo", b"a\x01b", "a control byte in the value"),
        (b"x-foo", b" a", "a leading space"),
        (b"x-foo", b"a\t", "a trailing tab"),
        (b"x-foo", b" ", "a value of one space"),
        (b":path", b"/a\nb", "LF in a pseudo-header value"),
        (b":authority", b"a\0", "NUL in a pseudo-header value"),
    ] {
        for representation in [literal(name, value), indexed_literal(name, value)] {
            let mut block = vec![0x82];
            block.extend_from_slice(&representation);
            block.push(0x84);
            let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
            let (fields, decoded) = decode(&mut decoder, &block).expect(why);
            // The field is left out; the ones around it are not.
            assert_eq!(
                fields.iter().map(text).collect::<Vec<_>>(),
                pairs(&[(":method", "GET"), (":path", "/")]),
                "{why}"
            );
            assert_eq!(
                decoded,
                Decoded {
                    oversize: false,
                    malformed: true
                },
                "{why}"
            );
        }
    }
}

#[test]
fn allowed_edge_cases_are_not_malformed() {
    for (name, value) in [
        (&b"x-foo"[..], &b""[..]),
        (b"x-foo", b"a b\tc"),
        (b"x-foo", b"\x80\xff obs-text"),
        (b"x-foo", b"a\"\\"),
        (b"!#$%&'*+-.^_`|~09az", b"token name"),
        (b":path", b" /leading space is the engine's concern"),
        (b":protocol", b"websocket"),
        (b":status", b"200"),
    ] {
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        let block = literal(name, value);
        let (fields, decoded) = decode(&mut decoder, &block).unwrap();
        assert_eq!(decoded, Decoded::default(), "{name:?}");
        let (got_name, got_value) = match &fields[..] {
            [Field::Pseudo(pseudo, value)] => (pseudo.name().as_bytes().to_vec(), value.to_vec()),
            [Field::Header(name, value)] => {
                (name.as_str().as_bytes().to_vec(), value.as_bytes().to_vec())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!((&got_name[..], &got_value[..]), (name, value));
    }
}

#[test]
fn a_malformed_entry_stays_malformed_when_referred_to() {
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let (fields, decoded) = decode(&mut decoder, &indexed_literal(b"X-Up", b"v")).unwrap();
    assert!(fields.is_empty() && decoded.malformed);
    // It still counts in the table (4 + 1 + 32 bytes), as the peer's does.
    assert_eq!(decoder.table_size(), 37);
    // Referred to whole, or by name with a fine value: malformed again.
    for block in [
        vec![0xbe],
        vec![0x0f, 0x2f, 0x01, b'v'],
        vec![0x7e, 0x01, b'w'],
    ] {
        let (fields, decoded) = decode(&mut decoder, &block).unwrap();
        assert!(fields.is_empty() && decoded.malformed, "{block:02x?}");
    }
    // A good name with a bad value: the name is still good for others.
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let (_, decoded) = decode(&mut decoder, &indexed_literal(b"x-up", b" v")).unwrap();
    assert!(decoded.malformed);
    let (fields, decoded) = decode(&mut decoder, &[0xbe]).unwrap();
    assert!(fields.is_empty() && decoded.malformed);
    assert_eq!(
        decode_text(&mut decoder, &[0x0f, 0x2f, 0x01, b'v']),
        pairs(&[("x-up", "v")])
    );
}

// ===== the header list limit (RFC 9113 §6.5.2) =====

#[test]
fn oversize_lists_stop_the_sink_but_still_fill_the_table() {
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    // `:method: GET` is 42 bytes; `x-a: aaaa` (incrementally indexed) 39;
    // `x-b: bbbb` 39. A limit of 80 is crossed by the second field.
    let mut block = vec![0x82];
    block.extend_from_slice(&indexed_literal(b"x-a", b"aaaa"));
    block.extend_from_slice(&indexed_literal(b"x-b", b"bbbb"));
    // A malformed field after the crossing is not looked at.
    block.extend_from_slice(&literal(b"X-Bad", b"c"));
    let (fields, decoded) = decode_limited(&mut decoder, &block, 80).unwrap();
    assert_eq!(
        fields.iter().map(text).collect::<Vec<_>>(),
        pairs(&[(":method", "GET")])
    );
    assert_eq!(
        decoded,
        Decoded {
            oversize: true,
            malformed: false
        }
    );
    // Both indexed fields made it to the table: the next block refers to
    // them.
    assert_eq!(
        decode_text(&mut decoder, &[0xbe, 0xbf]),
        pairs(&[("x-b", "bbbb"), ("x-a", "aaaa")])
    );
    // A list exactly at the limit is not over it.
    let (fields, decoded) = decode_limited(&mut decoder, &[0x82, 0xbe], 42 + 39).unwrap();
    assert_eq!((fields.len(), decoded), (2, Decoded::default()));
    let (fields, decoded) = decode_limited(&mut decoder, &[0x82, 0xbe], 42 + 38).unwrap();
    assert_eq!((fields.len(), decoded.oversize), (1, true));
    // Malformed before the crossing is still reported.
    let mut block = literal(b"X-Bad", b"c");
    block.extend_from_slice(&[0x82, 0x82, 0x82]);
    let (_, decoded) = decode_limited(&mut decoder, &block, 100).unwrap();
    assert_eq!(
        decoded,
        Decoded {
            oversize: true,
            malformed: true
        }
    );
}

// ===== zero copy =====

#[test]
fn raw_values_are_slices_of_the_block_and_huffman_values_share_a_buffer() {
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = Bytes::from(literal(b"x-raw", b"plain value"));
    let mut fields = Vec::new();
    decoder
        .decode(block.clone(), usize::MAX, &mut |field| fields.push(field))
        .unwrap();
    let Field::Header(_, value) = &fields[0] else {
        panic!("{fields:?}")
    };
    let block_range = block.as_ptr_range();
    assert!(block_range.contains(&value.as_bytes().as_ptr()));
    // Two Huffman-coded values: the second starts where the first ends.
    let mut out = BytesMut::new();
    for value in [&b"first-value"[..], b"second-value"] {
        out.extend_from_slice(&[0x00, 0x01, b'x']);
        super::encode_string(value, &mut out);
    }
    assert!(out[3] & 0x80 != 0, "Huffman-coded");
    let mut values = Vec::new();
    decoder
        .decode(out.freeze(), usize::MAX, &mut |field| values.push(field))
        .unwrap();
    let [Field::Header(_, first), Field::Header(_, second)] = &values[..] else {
        panic!("{values:?}")
    };
    assert_eq!(first.as_bytes(), b"first-value");
    assert_eq!(second.as_bytes(), b"second-value");
    assert_eq!(
        first.as_bytes().as_ptr_range().end,
        second.as_bytes().as_ptr()
    );
}

#[test]
fn static_names_come_out_in_their_standard_form() {
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    // `cache-control` by static name index (24), then `content-type` (31).
    let (fields, _) = decode(&mut decoder, &[0x58, 0x01, b'a', 0x0f, 0x10, 0x01, b'b']).unwrap();
    let names: Vec<HeaderName> = fields
        .into_iter()
        .map(|field| match field {
            Field::Header(name, _) => name,
            Field::Pseudo(..) => panic!("a pseudo-header"),
        })
        .collect();
    assert_eq!(names, [header::CACHE_CONTROL, header::CONTENT_TYPE]);
    // The pseudo-headers are their enum.
    let (fields, _) = decode(&mut decoder, &[0x82, 0x87, 0x85, 0x81]).unwrap();
    let kinds: Vec<Pseudo> = fields
        .iter()
        .map(|field| match field {
            Field::Pseudo(pseudo, _) => *pseudo,
            Field::Header(..) => panic!("a regular field"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            Pseudo::Method,
            Pseudo::Scheme,
            Pseudo::Path,
            Pseudo::Authority
        ]
    );
}

// ===== the encoder =====

#[test]
fn encoder_round_trips_a_sequence_of_responses() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let statuses = [200, 404, 304, 201, 500, 418, 200, 204, 302, 206];
    let content_types = ["text/html; charset=utf-8", "application/json", "image/png"];
    for n in 0..24 {
        let status = StatusCode::from_u16(statuses[n % statuses.len()]).unwrap();
        let mut headers = map(&[
            ("server", "celer"),
            ("content-type", content_types[n % 3]),
            ("cache-control", "max-age=3600, public"),
            ("vary", "accept-encoding"),
            ("date", &format!("Mon, 21 Oct 2013 20:13:{:02} GMT", n / 4)),
        ]);
        headers.append(
            "etag",
            HeaderValue::from_str(&format!("\"{n:x}-etag\"")).unwrap(),
        );
        headers.append("content-length", HeaderValue::from(n * 100));
        if n % 5 == 0 {
            headers.append("set-cookie", HeaderValue::from_static("a=1; Path=/"));
            headers.append("set-cookie", HeaderValue::from_static("b=2"));
        }
        if n % 7 == 0 {
            headers.append("x-large", HeaderValue::from_str(&"x".repeat(5000)).unwrap());
        }
        if n % 3 == 0 {
            headers.append(
                "x-request-id",
                HeaderValue::from_str(&format!("req-{n}")).unwrap(),
            );
        }
        let block = encode_response(&mut encoder, status, &headers);
        assert_eq!(
            decode_text(&mut decoder, &block),
            expected_response(status, &headers),
            "response {n}"
        );
        assert_eq!(encoder.table_size(), decoder.table_size(), "response {n}");
        assert!(encoder.table_size() <= DEFAULT_TABLE_SIZE);
    }
}

#[test]
fn a_repeated_response_is_mostly_indexes() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let headers = map(&[
        ("server", "celer"),
        ("content-type", "text/html; charset=utf-8"),
        ("cache-control", "no-cache"),
        ("vary", "accept-encoding"),
        ("etag", "\"5f1b-3c\""),
        ("x-frame-options", "DENY"),
    ]);
    let first = encode_response(&mut encoder, StatusCode::OK, &headers);
    let second = encode_response(&mut encoder, StatusCode::OK, &headers);
    // `:status: 200` and each field: one byte each.
    assert_eq!(second.len(), 1 + headers.len(), "{second:02x?}");
    assert!(first.len() > 5 * second.len());
    for block in [first, second] {
        assert_eq!(
            decode_text(&mut decoder, &block),
            expected_response(StatusCode::OK, &headers)
        );
    }
}

#[test]
fn statuses_outside_the_static_table_are_literals_without_indexing() {
    let mut encoder = Encoder::new();
    let empty = HeaderMap::new();
    for (code, index) in [
        (200, 8),
        (204, 9),
        (206, 10),
        (304, 11),
        (400, 12),
        (404, 13),
        (500, 14),
    ] {
        let status = StatusCode::from_u16(code).unwrap();
        assert_eq!(
            encode_response(&mut encoder, status, &empty),
            [0x80 | index]
        );
    }
    let block = encode_response(&mut encoder, StatusCode::IM_A_TEAPOT, &empty);
    // Without indexing, name index 8, then "418" as it is (its Huffman
    // code takes 17 bits, so 3 bytes: no shorter).
    assert_eq!(block[0], 0x08);
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode_text(&mut decoder, &block),
        pairs(&[(":status", "418")])
    );
    assert_eq!(encoder.table_size(), 0);
}

#[test]
fn sensitive_values_and_credentials_are_never_indexed() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut secret = HeaderValue::from_static("s3cr3t");
    secret.set_sensitive(true);
    let cases = [
        (HeaderName::from_static("x-api-key"), secret.clone(), None),
        (header::ETAG, secret, Some(34)),
        (
            header::SET_COOKIE,
            HeaderValue::from_static("id=1"),
            Some(55),
        ),
        (header::COOKIE, HeaderValue::from_static("id=1"), Some(32)),
        (
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic eA=="),
            Some(23),
        ),
        (
            header::PROXY_AUTHORIZATION,
            HeaderValue::from_static("Basic eA=="),
            Some(49),
        ),
    ];
    for (name, value, static_index) in cases {
        let mut headers = HeaderMap::new();
        headers.insert(name.clone(), value.clone());
        for _ in 0..2 {
            let mut out = BytesMut::new();
            encoder.encode_fields(&headers, &mut out);
            // 0001xxxx: never indexed (RFC 7541 §6.2.3), with the static
            // name index when there is one.
            assert_eq!(out[0] & 0xf0, 0x10, "{name}: {out:02x?}");
            let mut pos = 0;
            let index = decode_integer(&out, &mut pos, 4).unwrap();
            assert_eq!(index, static_index.unwrap_or(0), "{name}");
            let (fields, _) = decode(&mut decoder, &out).unwrap();
            let [Field::Header(got_name, got_value)] = &fields[..] else {
                panic!("{fields:?}")
            };
            assert_eq!((got_name, got_value), (&name, &value));
            assert!(got_value.is_sensitive(), "{name}");
        }
    }
    assert_eq!(encoder.table_size(), 0);
    assert_eq!(decoder.table_size(), 0);
}

#[test]
fn content_length_is_a_literal_without_indexing() {
    let mut encoder = Encoder::new();
    let headers = map(&[("content-length", "1234")]);
    for _ in 0..2 {
        let mut out = BytesMut::new();
        encoder.encode_fields(&headers, &mut out);
        // 0000 + index 28 on 4 bits (15 + 13), then the value.
        assert_eq!(&out[..2], [0x0f, 0x0d]);
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        assert_eq!(
            decode_text(&mut decoder, &out),
            pairs(&[("content-length", "1234")])
        );
    }
    assert_eq!(encoder.table_size(), 0);
}

#[test]
fn a_new_value_of_a_custom_name_refers_to_its_earlier_entry() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut out = BytesMut::new();
    encoder.encode_fields(&map(&[("x-custom", "one")]), &mut out);
    assert_eq!(out[0], 0x40, "a literal name the first time");
    decode_text(&mut decoder, &out);
    let mut out = BytesMut::new();
    encoder.encode_fields(&map(&[("x-custom", "two")]), &mut out);
    // With incremental indexing, name index 62: the entry just added.
    assert_eq!(out[0], 0x40 | 62);
    assert_eq!(
        decode_text(&mut decoder, &out),
        pairs(&[("x-custom", "two")])
    );
    assert_eq!(encoder.table_size(), decoder.table_size());
}

#[test]
fn strings_are_huffman_coded_only_when_shorter() {
    // Lowercase text shrinks; bytes with long codes do not.
    for (value, huffman) in [("no-cache", true), ("\u{80}\u{81}", false)] {
        let mut encoder = Encoder::new();
        let mut out = BytesMut::new();
        let headers = map(&[("x-v", value)]);
        encoder.encode_fields(&headers, &mut out);
        // 0x40, the name "x-v" (3 bytes Huffman-coded to 3: kept raw), the
        // value's length byte.
        let value_at = 1 + 1 + 3;
        assert_eq!(out[value_at] & 0x80 != 0, huffman, "{value:?}: {out:02x?}");
    }
}

#[test]
fn a_table_size_of_zero_starts_the_next_block_with_an_update() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    let headers = map(&[("server", "celer"), ("vary", "accept")]);
    decode_text(
        &mut decoder,
        &encode_response(&mut encoder, StatusCode::OK, &headers),
    );
    assert!(decoder.table_size() > 0);
    encoder.set_max_table_size(0);
    assert_eq!(encoder.table_size(), 0);
    for _ in 0..3 {
        let before = decoder.table_size();
        let block = encode_response(&mut encoder, StatusCode::OK, &headers);
        // Only the first block after the change carries the update.
        assert_eq!(block[0] == 0x20, before > 0, "{block:02x?}");
        assert_eq!(
            decode_text(&mut decoder, &block),
            expected_response(StatusCode::OK, &headers)
        );
        assert_eq!(decoder.table_size(), 0);
        assert_eq!(encoder.table_size(), 0);
    }
}

/// The size updates at the start of `block`.
fn leading_size_updates(block: &[u8]) -> Vec<usize> {
    let mut pos = 0;
    let mut sizes = Vec::new();
    while pos < block.len() && block[pos] & 0xe0 == 0x20 {
        sizes.push(decode_integer(block, &mut pos, 5).unwrap());
    }
    sizes
}

#[test]
fn a_table_that_shrank_and_grew_signals_both_sizes() {
    let headers = map(&[
        ("server", "celer"),
        ("content-type", "text/plain"),
        ("x-long", &"y".repeat(200)),
    ]);
    for (settings, want) in [
        // Shrank, then grew back: the minimum, then the final size.
        (&[100, 4096][..], &[100, 4096][..]),
        (&[0, 65536][..], &[0, 4096][..]),
        (&[50, 3000, 2000][..], &[50, 2000][..]),
        // Only shrank: the final size once.
        (&[3000, 2000][..], &[2000][..]),
        // Grew past 4096, or came back to where it was: nothing to say.
        (&[65536][..], &[][..]),
        (&[4096][..], &[][..]),
    ] {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        decode_text(
            &mut decoder,
            &encode_response(&mut encoder, StatusCode::OK, &headers),
        );
        for &size in settings {
            encoder.set_max_table_size(size);
        }
        for (n, block_want) in [want, &[]].into_iter().enumerate() {
            let block = encode_response(&mut encoder, StatusCode::OK, &headers);
            assert_eq!(
                leading_size_updates(&block),
                block_want,
                "{settings:?}, block {n}"
            );
            assert_eq!(
                decode_text(&mut decoder, &block),
                expected_response(StatusCode::OK, &headers)
            );
            assert_eq!(encoder.table_size(), decoder.table_size(), "{settings:?}");
        }
    }
}

#[test]
fn a_field_larger_than_the_table_is_not_indexed_and_evicts_nothing() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    encoder.set_max_table_size(100);
    let small = map(&[("server", "celer")]);
    decode_text(
        &mut decoder,
        &encode_response(&mut encoder, StatusCode::OK, &small),
    );
    let kept = encoder.table_size();
    assert_eq!(kept, 6 + 5 + 32);
    let large = map(&[("x-large", &"z".repeat(100))]);
    let mut out = BytesMut::new();
    encoder.encode_fields(&large, &mut out);
    assert_eq!(out[0] & 0xf0, 0x00, "without indexing: {out:02x?}");
    decode_text(&mut decoder, &out);
    assert_eq!((encoder.table_size(), decoder.table_size()), (kept, kept));
    // The small entry is still one byte away.
    let block = encode_response(&mut encoder, StatusCode::OK, &small);
    assert_eq!(block, [0x88, 0xbe]);
}

#[test]
fn the_encoder_evicts_oldest_first_as_the_decoder_does() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
    encoder.set_max_table_size(200);
    let mut rng = Rng(42);
    for n in 0..200 {
        let mut headers = HeaderMap::new();
        for _ in 0..rng.below(6) {
            let name = format!("x-h{}", rng.below(8));
            let value = format!("v{}", "w".repeat(rng.below(40)));
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(&value).unwrap(),
            );
        }
        let mut out = BytesMut::new();
        encoder.encode_fields(&headers, &mut out);
        let want: Vec<(String, String)> = expected_response(StatusCode::OK, &headers)
            .into_iter()
            .skip(1)
            .collect();
        assert_eq!(decode_text(&mut decoder, &out), want, "block {n}");
        assert_eq!(encoder.table_size(), decoder.table_size(), "block {n}");
        assert!(encoder.table_size() <= 200);
    }
}
