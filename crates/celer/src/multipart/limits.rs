//! The limits on a `multipart/form-data` body: each a named default that
//! [`Limits`] overrides per route or per handler.

/// The most parts a body may have: 1,000 (a part is a field or a file).
pub const MAX_PARTS: usize = 1000;

/// The most bytes of one part's header block: 8 KiB, CRLFs included.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// The most bytes before the first boundary (the preamble, RFC 2046
/// §5.1.1): 4 KiB. A boundary that never comes ends here.
pub const MAX_PREAMBLE_BYTES: usize = 4 * 1024;

/// The most bytes of a text field read into memory
/// ([`Part::text`](super::Part::text), [`Part::bytes`](super::Part::bytes)):
/// 64 KiB.
pub const MAX_FIELD_BYTES: usize = 64 * 1024;

/// The most bytes of one part streamed to a handler or to disk: 8 GiB.
/// The body limit of the route bounds the whole body
/// as well (set it with `.body_limit(..)` on a route taking uploads).
pub const MAX_PART_BYTES: u64 = 8 * 1024 * 1024 * 1024;

/// The limits one [`Multipart`](super::Multipart) enforces; the total is
/// the route's body limit ([`Request::body_limit`](crate::Request::body_limit)).
///
/// ```
/// let limits = celer::multipart::Limits { parts: 10, ..Default::default() };
/// assert_eq!(limits.head_bytes, celer::multipart::MAX_HEAD_BYTES);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Parts per body ([`MAX_PARTS`]); past it: 413.
    pub parts: usize,
    /// Bytes of a part's header block ([`MAX_HEAD_BYTES`]); past it: 400.
    pub head_bytes: usize,
    /// Bytes before the first boundary ([`MAX_PREAMBLE_BYTES`]); past it: 400.
    pub preamble_bytes: usize,
    /// Bytes of a field read into memory ([`MAX_FIELD_BYTES`]); past it: 413.
    pub field_bytes: usize,
    /// Bytes of any one part ([`MAX_PART_BYTES`]); past it: 413.
    pub part_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            parts: MAX_PARTS,
            head_bytes: MAX_HEAD_BYTES,
            preamble_bytes: MAX_PREAMBLE_BYTES,
            field_bytes: MAX_FIELD_BYTES,
            part_bytes: MAX_PART_BYTES,
        }
    }
}
