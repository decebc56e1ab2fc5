//! `RecordKey` against rustls's ring provider for every suite and both
//! versions: the same records byte for byte, each side opening the other's,
//! several records from several slices in one buffer, and what opening
//! refuses.

use std::io::IoSlice;

use bytes::BytesMut;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::crypto::cipher::{
    AeadKey, InboundOpaqueMessage, Iv, MessageDecrypter, MessageEncrypter, OutboundChunks,
    OutboundPlainMessage,
};
use rustls::crypto::ring::cipher_suite as ring_suites;
use rustls::{
    ConnectionTrafficSecrets, ContentType, Error, PeerMisbehaved, ProtocolVersion,
    SupportedCipherSuite, Tls13CipherSuite,
};

use super::RecordKey;
use crate::tls::record::{self, HEADER_LEN, MAX_FRAGMENT, Plaintext};
use crate::tls::tests::pattern;

// ===== fixtures =====

/// A suite of rustls's ring provider, at one protocol version.
#[derive(Clone, Copy)]
struct Case {
    suite: SupportedCipherSuite,
}

/// Every suite the engine may agree, TLS 1.3 and TLS 1.2.
fn cases() -> [Case; 6] {
    [
        ring_suites::TLS13_AES_128_GCM_SHA256,
        ring_suites::TLS13_AES_256_GCM_SHA384,
        ring_suites::TLS13_CHACHA20_POLY1305_SHA256,
        ring_suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ring_suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ring_suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ]
    .map(|suite| Case { suite })
}

impl Case {
    fn name(self) -> String {
        format!("{:?}", self.suite.suite())
    }

    fn tls13(self) -> bool {
        matches!(self.suite, SupportedCipherSuite::Tls13(_))
    }

    /// The TLS 1.3 suite whose key schedule makes this suite's key (the
    /// same AEAD, so the same key length).
    fn key_suite(self) -> &'static Tls13CipherSuite {
        let name = self.name();
        let twin = if name.contains("CHACHA20") {
            ring_suites::TLS13_CHACHA20_POLY1305_SHA256
        } else if name.contains("AES_128") {
            ring_suites::TLS13_AES_128_GCM_SHA256
        } else {
            ring_suites::TLS13_AES_256_GCM_SHA384
        };
        match twin {
            SupportedCipherSuite::Tls13(suite) => suite,
            SupportedCipherSuite::Tls12(_) => unreachable!(),
        }
    }

    /// A traffic key of the suite's length, the same for the same `seed`
    /// (rustls's `AeadKey` is made only at the length a schedule asks).
    fn key(self, seed: u8) -> AeadKey {
        let suite = self.key_suite();
        let expander = suite.hkdf_provider.extract_from_secret(None, &[seed; 32]);
        rustls::internal::derive_traffic_key(expander.as_ref(), suite.aead_alg)
    }

    /// The IV for `seed`: 12 bytes, for TLS 1.2 AES-GCM the fixed IV and
    /// the explicit nonce's starting point, as rustls's secrets hold them.
    fn iv(self, seed: u8) -> [u8; 12] {
        std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 17))
    }

    fn secrets(self, seed: u8) -> ConnectionTrafficSecrets {
        let (key, iv) = (self.key(seed), Iv::new(self.iv(seed)));
        let name = self.name();
        if name.contains("CHACHA20") {
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv }
        } else if name.contains("AES_128") {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv }
        } else {
            ConnectionTrafficSecrets::Aes256Gcm { key, iv }
        }
    }

    fn ours(self, seed: u8) -> RecordKey {
        RecordKey::new(self.tls13(), self.secrets(seed)).unwrap()
    }

    /// rustls's encrypter for the same key, as the engine built it before.
    fn encrypter(self, seed: u8) -> Box<dyn MessageEncrypter> {
        let (key, iv) = (self.key(seed), self.iv(seed));
        match self.suite {
            SupportedCipherSuite::Tls13(suite) => suite.aead_alg.encrypter(key, Iv::new(iv)),
            SupportedCipherSuite::Tls12(suite) => {
                let shape = suite.aead_alg.key_block_shape();
                let (fixed, explicit) = iv.split_at(shape.fixed_iv_len);
                suite
                    .aead_alg
                    .encrypter(key, fixed, &explicit[..shape.explicit_nonce_len])
            }
        }
    }

    /// rustls's decrypter for the same key.
    fn decrypter(self, seed: u8) -> Box<dyn MessageDecrypter> {
        let (key, iv) = (self.key(seed), self.iv(seed));
        match self.suite {
            SupportedCipherSuite::Tls13(suite) => suite.aead_alg.decrypter(key, Iv::new(iv)),
            SupportedCipherSuite::Tls12(suite) => {
                let shape = suite.aead_alg.key_block_shape();
                suite.aead_alg.decrypter(key, &iv[..shape.fixed_iv_len])
            }
        }
    }
}

/// A record sealed by rustls, encoded as it goes on the wire.
fn rustls_seal(case: Case, seq: u64, typ: ContentType, plain: &[u8]) -> Vec<u8> {
    let message = OutboundPlainMessage {
        typ,
        version: ProtocolVersion::TLSv1_2,
        payload: OutboundChunks::Single(plain),
    };
    case.encrypter(7).encrypt(message, seq).unwrap().encode()
}

/// Opens one record with rustls: its type and plaintext.
fn rustls_open(case: Case, seq: u64, record: &mut [u8]) -> Result<(ContentType, Vec<u8>), Error> {
    let typ = ContentType::from(record[0]);
    let version = ProtocolVersion::from(u16::from_be_bytes([record[1], record[2]]));
    let message = InboundOpaqueMessage::new(typ, version, &mut record[HEADER_LEN..]);
    let plain = case.decrypter(7).decrypt(message, seq)?;
    Ok((plain.typ, plain.payload.to_vec()))
}

/// Sequence numbers from the first to the last the engine uses.
const SEQS: [u64; 5] = [0, 1, 0x1234, 0x0102_0304_0506_0708, 0xffff_ffff_fffe_ffff];

const TYPES: [ContentType; 3] = [
    ContentType::ApplicationData,
    ContentType::Alert,
    ContentType::Handshake,
];

// ===== tests =====

#[test]
fn sealed_records_are_rustls_records_byte_for_byte() {
    for case in cases() {
        let mut key = case.ours(7);
        for seq in SEQS {
            // A released key expands again to the same key.
            key.release();
            assert!(!key.is_expanded());
            for typ in TYPES {
                for len in [0, 1, 140, 1000, MAX_FRAGMENT] {
                    let plain = pattern(len);
                    // Appended after what the buffer already holds.
                    let mut out = BytesMut::from(&b"earlier records"[..]);
                    key.seal(seq, typ, &mut out, |out| out.extend_from_slice(&plain))
                        .unwrap();
                    assert_eq!(&out[..15], b"earlier records");
                    assert!(
                        out[15..] == rustls_seal(case, seq, typ, &plain)[..],
                        "{} seq {seq} {typ:?} {len} bytes",
                        case.name()
                    );
                }
            }
        }
    }
}

#[test]
fn records_open_both_ways() {
    for case in cases() {
        let mut key = case.ours(7);
        for seq in SEQS {
            for typ in TYPES {
                let plain = pattern(333);
                // Ours, opened by rustls.
                let mut out = BytesMut::new();
                key.seal(seq, typ, &mut out, |out| out.extend_from_slice(&plain))
                    .unwrap();
                assert_eq!(
                    rustls_open(case, seq, &mut out).unwrap(),
                    (typ, plain.clone()),
                    "{}",
                    case.name()
                );
                // rustls's, opened by ours, where it lies.
                let mut record = rustls_seal(case, seq, typ, &plain);
                let (opened, range) = key.open(seq, &mut record).unwrap();
                assert_eq!(opened, typ, "{}", case.name());
                assert_eq!(record[range], plain[..], "{}", case.name());
            }
        }
    }
}

#[test]
fn several_slices_fill_records_back_to_back_in_one_buffer() {
    let slices = [
        pattern(3),
        Vec::new(),
        pattern(20_000),
        pattern(1),
        pattern(30_000),
        pattern(MAX_FRAGMENT),
    ];
    let data: Vec<IoSlice<'_>> = slices.iter().map(|s| IoSlice::new(s)).collect();
    let whole = slices.concat();
    for case in cases() {
        let mut key = case.ours(7);
        let mut plaintext = Plaintext::new(&data);
        let mut out = BytesMut::new();
        let mut left = whole.len();
        let mut seq = 40;
        while left > 0 {
            let n = left.min(MAX_FRAGMENT);
            key.seal(seq, ContentType::ApplicationData, &mut out, |out| {
                plaintext.copy_to(n, out);
            })
            .unwrap();
            seq += 1;
            left -= n;
        }
        // The records lie back to back: each opens in turn, with no gap.
        let mut opened = Vec::new();
        let mut lengths = Vec::new();
        let mut seq = 40;
        let mut rest = &mut out[..];
        while !rest.is_empty() {
            let len = record::record_len(rest, case.tls13()).unwrap().unwrap();
            let (record, tail) = rest.split_at_mut(len);
            let (typ, plain) = rustls_open(case, seq, record).unwrap();
            assert_eq!(typ, ContentType::ApplicationData);
            lengths.push(plain.len());
            opened.extend_from_slice(&plain);
            seq += 1;
            rest = tail;
        }
        assert!(opened == whole, "{}", case.name());
        let last = whole.len() - 4 * MAX_FRAGMENT;
        assert_eq!(
            lengths,
            [MAX_FRAGMENT, MAX_FRAGMENT, MAX_FRAGMENT, MAX_FRAGMENT, last]
        );
    }
}

#[test]
fn plaintext_stops_where_the_slices_end() {
    let slices = [IoSlice::new(b"ab"), IoSlice::new(b""), IoSlice::new(b"cde")];
    let mut plaintext = Plaintext::new(&slices);
    let mut out = BytesMut::new();
    plaintext.copy_to(3, &mut out);
    assert_eq!(&out[..], b"abc");
    plaintext.copy_to(10, &mut out);
    assert_eq!(&out[..], b"abcde");
    plaintext.copy_to(1, &mut out);
    assert_eq!(&out[..], b"abcde");
}

#[test]
fn a_plaintext_over_a_record_is_refused_and_leaves_the_buffer() {
    for case in cases() {
        let mut key = case.ours(7);
        let mut out = BytesMut::from(&b"kept"[..]);
        let plain = pattern(MAX_FRAGMENT + 1);
        let sealed = key.seal(3, ContentType::ApplicationData, &mut out, |out| {
            out.extend_from_slice(&plain);
        });
        assert_eq!(sealed, Err(Error::EncryptError));
        assert_eq!(&out[..], b"kept");
    }
}

#[test]
fn a_record_changed_anywhere_fails_to_open() {
    for case in cases() {
        let mut key = case.ours(7);
        let sealed = rustls_seal(case, 9, ContentType::ApplicationData, b"hello");
        // The header's type and version are authenticated in TLS 1.2 (in
        // TLS 1.3 they are not read); every byte after them is.
        let first = if case.tls13() { HEADER_LEN } else { 0 };
        for at in first..sealed.len() {
            if (3..HEADER_LEN).contains(&at) {
                continue;
            }
            let mut record = sealed.clone();
            record[at] ^= 0x40;
            assert_eq!(
                key.open(9, &mut record),
                Err(Error::DecryptError),
                "{} byte {at}",
                case.name()
            );
        }
        // The wrong sequence number, or a record shorter than its tag.
        assert_eq!(key.open(10, &mut sealed.clone()), Err(Error::DecryptError));
        assert_eq!(
            key.open(9, &mut [23, 3, 3, 0, 4, 1, 2, 3, 4]),
            Err(Error::DecryptError)
        );
    }
}

/// A TLS 1.3 record around `inner` (content, type, padding) under the
/// TLS_AES_128_GCM_SHA256 case's key, sealed with ring directly.
fn tls13_record(inner: &[u8]) -> Vec<u8> {
    let case = cases()[0];
    let key = UnboundKey::new(&ring::aead::AES_128_GCM, case.key(7).as_ref()).unwrap();
    let len = (inner.len() + 16) as u16;
    let mut record = vec![23, 3, 3];
    record.extend_from_slice(&len.to_be_bytes());
    let aad: [u8; 5] = record[..].try_into().unwrap();
    let mut body = inner.to_vec();
    let mut nonce = case.iv(7);
    nonce[11] ^= 5;
    LessSafeKey::new(key)
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut body,
        )
        .unwrap();
    record.extend_from_slice(&body);
    record
}

#[test]
fn tls13_padding_is_stripped_and_a_record_of_zeros_refused() {
    let mut key = cases()[0].ours(7);
    // RFC 8446 §5.4: zeros after the type are padding.
    let mut record = tls13_record(b"hi\x17\0\0\0\0\0\0\0\0");
    let (typ, range) = key.open(5, &mut record).unwrap();
    assert_eq!(
        (typ, &record[range]),
        (ContentType::ApplicationData, &b"hi"[..])
    );
    // Padding up to a full record beyond 2^14 bytes of content is allowed.
    let mut inner = pattern(100);
    inner.push(21);
    inner.resize(MAX_FRAGMENT + 1, 0);
    let (typ, range) = key.open(5, &mut tls13_record(&inner)).unwrap();
    assert_eq!((typ, range.len()), (ContentType::Alert, 100));
    assert_eq!(
        key.open(5, &mut tls13_record(&[0; 9])),
        Err(PeerMisbehaved::IllegalTlsInnerPlaintext.into())
    );
    assert_eq!(
        key.open(5, &mut tls13_record(&[1, 20])),
        Err(PeerMisbehaved::IllegalMiddleboxChangeCipherSpec.into())
    );
    let mut inner = pattern(MAX_FRAGMENT + 1);
    inner.push(23);
    assert_eq!(
        key.open(5, &mut tls13_record(&inner)),
        Err(Error::PeerSentOversizedRecord)
    );
}
