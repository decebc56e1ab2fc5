//! One version of a feed's document: its bytes, content hash, validators
//! and the compressed variants, all made once when the version is made.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

use super::limits::{BROTLI_LG_WINDOW, levels};
use crate::files::conditional::Validators;
use crate::files::encoding::Coding;

/// The document's media type (also the status document's).
pub(super) const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Answers vary with Accept-Encoding (RFC 9110 §12.5.5).
const VARY: HeaderValue = HeaderValue::from_static("accept-encoding");

/// Hex digits of the content hash used in ids and ETags (128 bits of
/// SHA-256).
const HASH_HEX_DIGITS: usize = 32;

/// Room each map keeps for the fields an engine adds to an answer over
/// HTTP/2 (Date, Server, Strict-Transport-Security): a clone keeps the
/// map's index table, so those inserts find room instead of rebuilding
/// the table for every answer (decision 169).
const ENGINE_FIELDS: usize = 3;

/// One version of a feed's document, immutable once made; cloning an
/// `Arc<Version>` is how every request and subscriber shares it.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let feed = celer::feed::Feed::new("scores");
/// feed.update(&br#"{"home": 1, "away": 0}"#[..]).unwrap();
/// let version = feed.current().unwrap();
/// assert_eq!(version.number(), 1);
/// assert_eq!(version.id().len(), 32);
/// assert_eq!(version.etag(), format!("\"{}\"", version.id()));
/// assert_eq!(&version.bytes()[..], br#"{"home": 1, "away": 0}"#);
/// # });
/// ```
#[derive(Debug)]
pub struct Version {
    /// Counts the feed's versions from 1, in this process.
    number: u64,
    /// The content hash in hex: the SSE event id and the ETag's opaque tag.
    id: Box<str>,
    /// When this version replaced the one before it.
    updated: SystemTime,
    /// The document as received.
    pub(crate) identity: Rep,
    /// Compressed variants, each kept only when smaller than the document;
    /// in the order of [`Coding::ALL`] (br, zstd, gzip).
    pub(crate) variants: [Option<Rep>; 3],
}

/// One representation: its bytes and their headers.
#[derive(Debug)]
pub(crate) struct Rep {
    pub(crate) body: Bytes,
    /// A strong ETag and Last-Modified. The identity's tag is `"<hash>"`,
    /// a variant's `"<hash>.<coding>"` (RFC 9110 §8.8.3: each content
    /// coding is a representation of its own).
    pub(crate) validators: Validators,
    /// The fields of a `200` (and of a `HEAD`): Content-Type,
    /// Content-Length, ETag, Last-Modified, Cache-Control, Vary and a
    /// variant's Content-Encoding. Made once; an answer clones the map,
    /// which costs about a third of inserting its fields one by one
    /// (each insert hashes its name and probes).
    pub(crate) ok_fields: HeaderMap,
    /// The fields of a `304`: the ETag, Cache-Control and Vary a `200`
    /// would have (RFC 9110 §15.4.5). Not Last-Modified: the section
    /// advises against other metadata when an ETag is there, and every
    /// poll that matches pays for each field (decision 168).
    pub(crate) not_modified_fields: HeaderMap,
}

impl Version {
    /// Makes version `number` of `doc`: hashes it and compresses it three
    /// times (the only place the feed compresses).
    #[cfg(test)]
    pub(crate) fn new(number: u64, doc: Bytes, updated: SystemTime) -> Version {
        let id = hash_hex(&doc);
        let cache_control = HeaderValue::from_static("max-age=1");
        Version::with_id(number, doc, id, updated, &cache_control)
    }

    /// [`Version::new`] with the content hash already made
    /// ([`hash_hex`] of `doc`), answered with `cache_control`.
    pub(crate) fn with_id(
        number: u64,
        doc: Bytes,
        id: String,
        updated: SystemTime,
        cache_control: &HeaderValue,
    ) -> Version {
        let secs = updated
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let updated_secs = UNIX_EPOCH + Duration::from_secs(secs);
        let last_modified = HeaderValue::try_from(httpdate::fmt_http_date(updated_secs))
            .expect("an HTTP-date is a valid header value");
        let modified = (updated_secs, last_modified);
        let variants = Coding::ALL.map(|coding| {
            let body = compress(coding, &doc)?;
            (body.len() < doc.len())
                .then(|| Rep::new(body, &id, Some(coding), modified.clone(), cache_control))
        });
        Version {
            number,
            identity: Rep::new(doc, &id, None, modified, cache_control),
            id: id.into(),
            updated,
            variants,
        }
    }

    /// The version's number: 1 for the first document this feed served,
    /// counted in this process.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The content hash, 32 hex digits (128 bits of SHA-256): the same for
    /// the same bytes on every instance. It is the SSE event id and the
    /// ETag's tag.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The strong ETag of the uncompressed document, quotes included.
    pub fn etag(&self) -> &str {
        self.identity.validators.etag.to_str().unwrap_or_default()
    }

    /// The document, as received.
    pub fn bytes(&self) -> &Bytes {
        &self.identity.body
    }

    /// When this version replaced the one before it.
    pub fn updated_at(&self) -> SystemTime {
        self.updated
    }

    /// Sizes of the compressed variants that were kept (smaller than the
    /// document), by content-coding token (`br`, `zstd`, `gzip`).
    pub fn variant_sizes(&self) -> Vec<(&'static str, usize)> {
        Coding::ALL
            .iter()
            .zip(&self.variants)
            .filter_map(|(coding, rep)| rep.as_ref().map(|rep| (coding.token(), rep.body.len())))
            .collect()
    }

    /// The variant for `coding`, if one was kept.
    pub(crate) fn variant(&self, coding: Coding) -> Option<&Rep> {
        let index = Coding::ALL.iter().position(|c| *c == coding)?;
        self.variants[index].as_ref()
    }
}

impl Rep {
    fn new(
        body: Bytes,
        id: &str,
        coding: Option<Coding>,
        modified: (SystemTime, HeaderValue),
        cache_control: &HeaderValue,
    ) -> Rep {
        let etag = match coding {
            None => format!("\"{id}\""),
            Some(coding) => format!("\"{id}.{}\"", coding.token()),
        };
        let etag = HeaderValue::try_from(etag).expect("hex digits are a valid header value");
        let mut not_modified_fields = HeaderMap::with_capacity(3 + ENGINE_FIELDS);
        not_modified_fields.insert(header::ETAG, etag.clone());
        not_modified_fields.insert(header::CACHE_CONTROL, cache_control.clone());
        not_modified_fields.insert(header::VARY, VARY);
        let mut ok_fields = HeaderMap::with_capacity(7 + ENGINE_FIELDS);
        ok_fields.insert(header::CONTENT_TYPE, JSON);
        ok_fields.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        ok_fields.extend(not_modified_fields.clone());
        // A live feed's Last-Modified changes as often as the date, so
        // over HTTP/2 it goes as a literal HPACK never indexes, as the
        // engine's Date does: indexed, each version would add an entry to
        // every connection's table, and each 200 would look for its value
        // among the stale ones (decision 169).
        let mut last_modified = modified.1.clone();
        last_modified.set_sensitive(true);
        ok_fields.insert(header::LAST_MODIFIED, last_modified);
        if let Some(coding) = coding {
            ok_fields.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(coding.token()),
            );
        }
        Rep {
            validators: Validators {
                etag,
                modified: Some(modified),
            },
            ok_fields,
            not_modified_fields,
            body,
        }
    }
}

/// The first 128 bits of the SHA-256 of `doc`, in lowercase hex.
pub(crate) fn hash_hex(doc: &[u8]) -> String {
    let digest = Sha256::digest(doc);
    let mut hex = String::with_capacity(HASH_HEX_DIGITS);
    for byte in &digest[..HASH_HEX_DIGITS / 2] {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// `doc` compressed with `coding` at the level for its size
/// ([`levels`]); `None` if the compressor failed (it cannot on a `Vec`,
/// but the error is not hidden behind a panic).
fn compress(coding: Coding, doc: &[u8]) -> Option<Bytes> {
    let (gzip_level, brotli_quality, zstd_level) = levels(doc.len());
    let out = match coding {
        Coding::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(doc.len() / 4),
                flate2::Compression::new(gzip_level),
            );
            enc.write_all(doc).ok()?;
            enc.finish().ok()?
        }
        Coding::Br => {
            let mut out = Vec::with_capacity(doc.len() / 4);
            {
                let mut enc =
                    brotli::CompressorWriter::new(&mut out, 4096, brotli_quality, BROTLI_LG_WINDOW);
                enc.write_all(doc).ok()?;
                enc.flush().ok()?;
            }
            out
        }
        Coding::Zstd => zstd::bulk::compress(doc, zstd_level).ok()?,
    };
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// A document of each size tier (decision 162: faster levels past
    /// 64 KiB and past 1 MiB) gets every variant, and each decodes to it.
    #[test]
    fn variants_of_every_size_tier_decode_to_the_document() {
        use crate::feed::limits::{DEFAULT_MAX_DOCUMENT_BYTES, SMALL_DOCUMENT_BYTES};
        for len in [SMALL_DOCUMENT_BYTES + 1, DEFAULT_MAX_DOCUMENT_BYTES + 1] {
            let mut text = String::from("[0");
            let mut n = 1u64;
            while text.len() < len - 1 {
                // Varied numbers, so the compressors have work to do.
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text.push_str(&format!(",{}", n >> 44));
            }
            text.truncate(len - 1);
            while !text.ends_with(|c: char| c.is_ascii_digit()) {
                text.pop();
            }
            text.push(']');
            let doc = Bytes::from(text);
            let version = Version::new(1, doc.clone(), UNIX_EPOCH);
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&version.variant(Coding::Gzip).unwrap().body[..])
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, doc, "gzip, {len} bytes");
            let zst = &version.variant(Coding::Zstd).unwrap().body;
            assert_eq!(
                zstd::decode_all(&zst[..]).unwrap(),
                doc,
                "zstd, {len} bytes"
            );
            let mut out = Vec::new();
            brotli::Decompressor::new(&version.variant(Coding::Br).unwrap().body[..], 4096)
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, doc, "br, {len} bytes");
        }
    }

    #[test]
    fn variants_decode_to_the_document_and_share_the_hash() {
        let doc = Bytes::from(format!("{{\"rows\": [{}]}}", "1, ".repeat(2000) + "1"));
        let version = Version::new(7, doc.clone(), UNIX_EPOCH + Duration::from_secs(1));
        let gz = version.variant(Coding::Gzip).unwrap();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz.body[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, doc);
        let zst = version.variant(Coding::Zstd).unwrap();
        assert_eq!(zstd::decode_all(&zst.body[..]).unwrap(), doc);
        let br = version.variant(Coding::Br).unwrap();
        let mut out = Vec::new();
        brotli::Decompressor::new(&br.body[..], 4096)
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, doc);
        assert_eq!(gz.validators.etag, format!("\"{}.gzip\"", version.id()));
        for rep in [&version.identity, gz] {
            for fields in [&rep.ok_fields, &rep.not_modified_fields] {
                // A clone (what each answer gets) still has room for the
                // engine's fields.
                assert!(fields.clone().capacity() >= fields.len() + ENGINE_FIELDS);
                assert_eq!(fields[header::ETAG], rep.validators.etag);
                assert_eq!(fields[header::CACHE_CONTROL], "max-age=1");
                assert_eq!(fields[header::VARY], "accept-encoding");
            }
            assert_eq!(
                rep.ok_fields[header::LAST_MODIFIED],
                "Thu, 01 Jan 1970 00:00:01 GMT"
            );
            assert!(rep.ok_fields[header::LAST_MODIFIED].is_sensitive());
            // A 304 carries the ETag, so not Last-Modified (RFC 9110
            // §15.4.5).
            assert!(!rep.not_modified_fields.contains_key(header::LAST_MODIFIED));
            assert_eq!(rep.ok_fields[header::CONTENT_TYPE], "application/json");
            assert_eq!(
                rep.ok_fields[header::CONTENT_LENGTH],
                rep.body.len().to_string()
            );
            assert!(
                !rep.not_modified_fields
                    .contains_key(header::CONTENT_ENCODING)
            );
        }
        assert_eq!(gz.ok_fields[header::CONTENT_ENCODING], "gzip");
        assert!(
            !version
                .identity
                .ok_fields
                .contains_key(header::CONTENT_ENCODING)
        );
    }

    #[test]
    fn a_variant_not_smaller_than_the_document_is_not_kept() {
        let version = Version::new(1, Bytes::from_static(b"1"), UNIX_EPOCH);
        assert!(version.variants.iter().all(Option::is_none));
        assert!(version.variant_sizes().is_empty());
    }

    #[test]
    fn the_hash_is_sha256_truncated() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(hash_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223");
    }
}
