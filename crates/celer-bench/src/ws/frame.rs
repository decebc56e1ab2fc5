//! The client side of RFC 6455 framing: masked frames out, unmasked frames in.
//!
//! This module performs no IO. `encode` appends one complete, masked frame
//! to a buffer; `parse_head` reads a frame head from the bytes received so
//! far and answers "complete", "need more" or a protocol error.

/// Opcodes of RFC 6455 section 5.2.
pub(crate) mod opcode {
    /// A continuation frame of a fragmented message.
    pub(crate) const CONTINUATION: u8 = 0x0;
    /// A text frame (UTF-8).
    pub(crate) const TEXT: u8 = 0x1;
    /// A binary frame.
    pub(crate) const BINARY: u8 = 0x2;
    /// The close frame (section 5.5.1).
    pub(crate) const CLOSE: u8 = 0x8;
    /// A ping (section 5.5.2).
    pub(crate) const PING: u8 = 0x9;
    /// A pong (section 5.5.3).
    pub(crate) const PONG: u8 = 0xA;
}

/// Largest payload of a control frame (RFC 6455 section 5.5).
pub(crate) const MAX_CONTROL_PAYLOAD: u64 = 125;

/// The RSV1 bit: a compressed message under permessage-deflate (RFC 7692 section 6).
const RSV1: u8 = 0x40;

/// A frame head sent by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// Bytes taken by the head.
    pub(crate) len: usize,
    /// The FIN bit.
    pub(crate) fin: bool,
    /// The RSV1 bit (compressed, when permessage-deflate was agreed).
    pub(crate) rsv1: bool,
    /// The opcode.
    pub(crate) opcode: u8,
    /// Payload length in bytes.
    pub(crate) payload_len: u64,
}

/// Why a server frame breaks RFC 6455.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// RSV2 or RSV3 set, or RSV1 set without permessage-deflate (section 5.2).
    Reserved,
    /// An opcode RFC 6455 does not define (section 5.2).
    Opcode,
    /// A masked frame from the server (section 5.1: the client must close).
    Masked,
    /// A control frame that is fragmented or longer than 125 bytes (section 5.5).
    Control,
    /// A 64-bit length with its most significant bit set (section 5.2).
    Length,
}

/// Parses the frame head at the start of `buf`; `Ok(None)` while incomplete.
///
/// `rsv1_allowed` is true when permessage-deflate was negotiated.
pub(crate) fn parse_head(buf: &[u8], rsv1_allowed: bool) -> Result<Option<Head>, FrameError> {
    let [first, second, ..] = *buf else {
        return Ok(None);
    };
    let rsv1 = first & RSV1 != 0;
    if first & 0x30 != 0 || (rsv1 && !rsv1_allowed) {
        return Err(FrameError::Reserved);
    }
    let opcode = first & 0x0F;
    let fin = first & 0x80 != 0;
    match opcode {
        opcode::CONTINUATION | opcode::TEXT | opcode::BINARY => {}
        opcode::CLOSE | opcode::PING | opcode::PONG => {
            // Section 5.5: control frames are never fragmented; RFC 7692
            // section 6 allows RSV1 only on the first frame of a data message.
            if !fin || rsv1 {
                return Err(FrameError::Control);
            }
        }
        _ => return Err(FrameError::Opcode),
    }
    if second & 0x80 != 0 {
        return Err(FrameError::Masked);
    }
    let (len, payload_len) = match second & 0x7F {
        126 => match buf.get(2..4) {
            Some(bytes) => (4, u64::from(u16::from_be_bytes([bytes[0], bytes[1]]))),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(bytes) => {
                let n = u64::from_be_bytes(bytes.try_into().unwrap_or([0xFF; 8]));
                if n >> 63 != 0 {
                    return Err(FrameError::Length);
                }
                (10, n)
            }
            None => return Ok(None),
        },
        n => (2, u64::from(n)),
    };
    if opcode >= opcode::CLOSE && payload_len > MAX_CONTROL_PAYLOAD {
        return Err(FrameError::Control);
    }
    Ok(Some(Head {
        len,
        fin,
        rsv1,
        opcode,
        payload_len,
    }))
}

/// Appends one complete frame with FIN set, masked with `mask` as every
/// client frame must be (RFC 6455 section 5.3).
pub(crate) fn encode(out: &mut Vec<u8>, opcode: u8, rsv1: bool, payload: &[u8], mask: [u8; 4]) {
    let first = 0x80 | if rsv1 { RSV1 } else { 0 } | opcode;
    out.push(first);
    // Section 5.2: 7-bit, 16-bit or 64-bit payload length, with the MASK bit.
    match payload.len() {
        n @ 0..=125 => out.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask);
}

/// XORs `data` with the masking key (RFC 6455 section 5.3), eight bytes at a time.
pub(crate) fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes((&*chunk).try_into().unwrap_or([0; 8])) ^ wide;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    for (idx, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= mask[idx % 4];
    }
}

/// Masking keys from a per-connection xorshift generator seeded by the OS.
///
/// RFC 6455 section 10.3 asks for unpredictable keys so that a script cannot
/// choose the bytes on the wire; the load generator chooses its own payloads,
/// so a fast generator seeded from the OS keeps the keys varied without a
/// system call per frame.
#[derive(Debug, Clone)]
pub(crate) struct Masks {
    state: u64,
}

impl Masks {
    /// A generator with a random seed.
    pub(crate) fn new() -> Masks {
        let mut seed = [0u8; 8];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed);
        Masks {
            state: u64::from_ne_bytes(seed) | 1,
        }
    }

    /// The next masking key.
    pub(crate) fn next_key(&mut self) -> [u8; 4] {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let bytes = self.state.to_ne_bytes();
        [bytes[0], bytes[1], bytes[2], bytes[3]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `bytes` whole and at every split point; all must agree.
    fn check(bytes: &[u8], expected: Result<Option<Head>, FrameError>) {
        assert_eq!(parse_head(bytes, true), expected);
        for split in 0..bytes.len() {
            match parse_head(&bytes[..split], true) {
                Ok(None) => {}
                partial if expected.is_err() => assert_eq!(partial, expected),
                other => panic!("split {split}: {other:?}"),
            }
        }
    }

    #[test]
    fn heads_of_every_length_form_are_parsed() {
        let head = |len, payload_len| {
            Ok(Some(Head {
                len,
                fin: true,
                rsv1: false,
                opcode: opcode::TEXT,
                payload_len,
            }))
        };
        check(b"\x81\x05", head(2, 5));
        check(b"\x81\x7e\x01\x00", head(4, 256));
        check(b"\x81\x7f\x00\x00\x00\x00\x00\x01\x00\x00", head(10, 65536));
    }

    #[test]
    fn protocol_violations_are_errors() {
        check(b"\x81\x85", Err(FrameError::Masked));
        check(b"\xa1\x00", Err(FrameError::Reserved));
        check(b"\x83\x00", Err(FrameError::Opcode));
        check(b"\x09\x00", Err(FrameError::Control));
        check(b"\x89\x7e\x00\x7e", Err(FrameError::Control));
        check(
            b"\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00",
            Err(FrameError::Length),
        );
        assert_eq!(parse_head(b"\xc1\x00", false), Err(FrameError::Reserved));
    }

    #[test]
    fn encoded_frames_are_masked_and_unmask_to_the_payload() {
        let payload: Vec<u8> = (0..300u32).map(|n| n as u8).collect();
        let mask = [1, 2, 3, 4];
        let mut out = Vec::new();
        encode(&mut out, opcode::BINARY, false, &payload, mask);
        assert_eq!(&out[..4], b"\x82\xfe\x01\x2c");
        assert_eq!(&out[4..8], &mask);
        let mut body = out[8..].to_vec();
        apply_mask(&mut body, mask);
        assert_eq!(body, payload);
        let mut small = Vec::new();
        encode(&mut small, opcode::PING, false, b"", mask);
        assert_eq!(small, b"\x89\x80\x01\x02\x03\x04");
    }

    #[test]
    fn mask_keys_vary() {
        let mut masks = Masks::new();
        let first = masks.next_key();
        assert!((0..8).any(|_| masks.next_key() != first));
    }
}
