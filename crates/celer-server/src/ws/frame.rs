//! The RFC 6455 frame codec, sans IO: [`Decoder`] turns the client's bytes
//! into messages and control frames, [`encode`] frames what the server
//! sends. Neither reads nor writes a socket.
//!
//! The decoder takes bytes as they arrive and keeps only what a message
//! needs: a frame's payload is unmasked and moved into the message as it
//! comes, and text is validated as it comes, so invalid UTF-8 closes the
//! connection at its first wrong byte (RFC 6455 §8.1).

use bytes::{BufMut, Bytes, BytesMut};

use super::deflate::Inflater;
use super::utf8::Utf8;
use super::{CloseCode, CloseFrame, Message};

/// A frame's opcode (RFC 6455 §5.2, §11.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    /// `0x0`: a continuation of a fragmented message.
    Continuation,
    /// `0x1`: a text message (UTF-8).
    Text,
    /// `0x2`: a binary message.
    Binary,
    /// `0x8`: close.
    Close,
    /// `0x9`: ping.
    Ping,
    /// `0xA`: pong.
    Pong,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// Why the client's bytes end the connection: the close code to send and a
/// reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError {
    /// 1002 (protocol error), 1007 (invalid payload) or 1009 (too big).
    pub code: CloseCode,
    /// What was wrong, sent as the close reason.
    pub reason: &'static str,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.reason, self.code.0)
    }
}

impl std::error::Error for ProtocolError {}

fn protocol(reason: &'static str) -> ProtocolError {
    ProtocolError {
        code: CloseCode::PROTOCOL,
        reason,
    }
}

fn invalid_utf8() -> ProtocolError {
    ProtocolError {
        code: CloseCode::INVALID_PAYLOAD,
        reason: "text is not UTF-8",
    }
}

fn too_big(reason: &'static str) -> ProtocolError {
    ProtocolError {
        code: CloseCode::TOO_BIG,
        reason,
    }
}

/// What one call to [`Decoder::decode`] produced.
#[derive(Debug)]
pub enum Decoded {
    /// A whole data message.
    Message(Message),
    /// A ping with its application data (to be answered by a pong).
    Ping(Bytes),
    /// A pong.
    Pong(Bytes),
    /// A close frame, with its code and reason when it carried one.
    Close(Option<CloseFrame>),
}

/// The result of feeding bytes to the decoder.
#[derive(Debug)]
pub enum Status {
    /// This many bytes were used and produced an item; feed the rest again.
    Complete(usize, Decoded),
    /// Every byte was used; more are needed for the next item.
    Partial,
}

/// The decoder's limits and extensions.
#[derive(Debug, Clone, Copy)]
pub struct DecodeConfig {
    /// Largest frame payload; a larger frame is refused with 1009.
    pub max_frame_bytes: u64,
    /// Largest message (decompressed); a larger one is refused with 1009.
    pub max_message_bytes: usize,
    /// permessage-deflate was negotiated: RSV1 marks compressed messages.
    pub deflate: bool,
    /// The client resets its compression context after each message
    /// (`client_no_context_takeover`), so the server's inflater need not be
    /// kept between messages.
    pub client_no_context_takeover: bool,
}

/// The frame being read.
#[derive(Debug, Clone, Copy)]
struct Frame {
    fin: bool,
    opcode: Opcode,
    mask: [u8; 4],
    /// Payload bytes read so far; also the masking offset.
    read: u64,
    len: u64,
}

/// The data message being assembled.
#[derive(Debug, Clone, Copy)]
struct Assembling {
    text: bool,
    compressed: bool,
}

/// The stateful frame decoder of one connection.
///
/// Holds no buffer while idle: the message buffer is taken out whole when a
/// message completes.
#[derive(Debug)]
pub struct Decoder {
    config: DecodeConfig,
    head: [u8; 14],
    head_len: u8,
    frame: Option<Frame>,
    message: Option<Assembling>,
    payload: BytesMut,
    control: BytesMut,
    utf8: Utf8,
    inflater: Option<Box<Inflater>>,
}

impl Decoder {
    /// A decoder for a new connection.
    pub fn new(config: DecodeConfig) -> Decoder {
        Decoder {
            config,
            head: [0; 14],
            head_len: 0,
            frame: None,
            message: None,
            payload: BytesMut::new(),
            control: BytesMut::new(),
            utf8: Utf8::default(),
            inflater: None,
        }
    }

    /// True when no frame or message is half read.
    pub fn is_idle(&self) -> bool {
        self.head_len == 0 && self.frame.is_none() && self.message.is_none()
    }

    /// Feeds the client's bytes. On `Complete(n, _)`, bytes after `n` were
    /// not looked at.
    pub fn decode(&mut self, input: &[u8]) -> Result<Status, ProtocolError> {
        let mut used = 0;
        loop {
            let frame = match self.frame {
                Some(frame) => frame,
                None => match self.header(&input[used..])? {
                    (n, Some(frame)) => {
                        used += n;
                        self.frame = Some(frame);
                        frame
                    }
                    (_, None) => return Ok(Status::Partial),
                },
            };
            let want = (frame.len - frame.read).min((input.len() - used) as u64) as usize;
            let chunk = &input[used..used + want];
            used += want;
            self.payload_chunk(frame, chunk)?;
            let frame = self.frame.as_mut().expect("a frame is being read");
            frame.read += want as u64;
            if frame.read < frame.len {
                return Ok(Status::Partial);
            }
            let frame = *frame;
            self.frame = None;
            if let Some(item) = self.end_frame(frame)? {
                return Ok(Status::Complete(used, item));
            }
            if used == input.len() {
                return Ok(Status::Partial);
            }
        }
    }

    /// Reads a frame header (RFC 6455 §5.2), from bytes kept from earlier
    /// calls and `input`; returns the bytes of `input` it used.
    fn header(&mut self, input: &[u8]) -> Result<(usize, Option<Frame>), ProtocolError> {
        let kept = self.head_len as usize;
        let take = (14 - kept).min(input.len());
        let mut head = self.head;
        head[kept..kept + take].copy_from_slice(&input[..take]);
        let avail = kept + take;
        if avail < 2 {
            self.head = head;
            self.head_len = avail as u8;
            return Ok((take, None));
        }
        let (b0, b1) = (head[0], head[1]);
        let fin = b0 & 0x80 != 0;
        let rsv1 = b0 & 0x40 != 0;
        if b0 & 0x30 != 0 {
            // §5.2: RSV2 and RSV3 are only for negotiated extensions; none uses them.
            return Err(protocol("reserved bits set"));
        }
        let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(protocol("reserved opcode"))?;
        if b1 & 0x80 == 0 {
            // §5.1: a server closes the connection on an unmasked frame.
            return Err(protocol("client frame not masked"));
        }
        let len7 = b1 & 0x7F;
        if opcode.is_control() {
            // §5.5: control frames carry at most 125 bytes and are never fragmented.
            if len7 > 125 {
                return Err(protocol("control frame over 125 bytes"));
            }
            if !fin {
                return Err(protocol("fragmented control frame"));
            }
            if rsv1 {
                return Err(protocol("RSV1 set on a control frame"));
            }
        } else {
            match (opcode, self.message) {
                (Opcode::Continuation, None) => {
                    return Err(protocol("continuation without a message"));
                }
                (Opcode::Continuation, Some(_)) if rsv1 => {
                    // RFC 7692 §6.1: RSV1 is set on the first frame only.
                    return Err(protocol("RSV1 set on a continuation frame"));
                }
                (Opcode::Text | Opcode::Binary, Some(_)) => {
                    return Err(protocol("new message inside a fragmented one"));
                }
                _ => {}
            }
            if rsv1 && !self.config.deflate {
                return Err(protocol("RSV1 set without permessage-deflate"));
            }
        }
        let ext = match len7 {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        if avail < 2 + ext {
            self.head = head;
            self.head_len = avail as u8;
            return Ok((take, None));
        }
        let len = match ext {
            2 => u16::from_be_bytes([head[2], head[3]]) as u64,
            8 => {
                let len = u64::from_be_bytes(head[2..10].try_into().expect("8 bytes"));
                if len >> 63 != 0 {
                    // §5.2: the most significant bit of a 64-bit length is 0.
                    return Err(protocol("64-bit length with the high bit set"));
                }
                len
            }
            _ => len7 as u64,
        };
        if !opcode.is_control() && len > self.config.max_frame_bytes {
            return Err(too_big("frame too big"));
        }
        // The message's bytes on the wire count against the limit as well
        // as its inflated bytes.
        if !opcode.is_control()
            && self.payload.len() as u64 + len > self.config.max_message_bytes as u64
        {
            return Err(too_big("message too big"));
        }
        let size = 2 + ext + 4;
        if avail < size {
            self.head = head;
            self.head_len = avail as u8;
            return Ok((take, None));
        }
        let mask = head[2 + ext..size].try_into().expect("4 bytes");
        self.head_len = 0;
        if !opcode.is_control() {
            self.message.get_or_insert(Assembling {
                text: opcode == Opcode::Text,
                compressed: rsv1,
            });
        }
        Ok((
            size - kept,
            Some(Frame {
                fin,
                opcode,
                mask,
                read: 0,
                len,
            }),
        ))
    }

    fn payload_chunk(&mut self, frame: Frame, chunk: &[u8]) -> Result<(), ProtocolError> {
        if chunk.is_empty() {
            return Ok(());
        }
        let dest = if frame.opcode.is_control() {
            &mut self.control
        } else {
            &mut self.payload
        };
        let start = dest.len();
        // A frame's length reserves at most 64 KiB ahead: the client has to
        // send the bytes to make the buffer grow past that.
        dest.reserve(if frame.read == 0 {
            (frame.len as usize).min(64 * 1024)
        } else {
            chunk.len()
        });
        dest.put_slice(chunk);
        apply_mask(&mut dest[start..], frame.mask, frame.read as usize);
        if let Some(Assembling {
            text: true,
            compressed: false,
        }) = self.message
        {
            if !frame.opcode.is_control() {
                self.utf8
                    .feed(&self.payload[start..])
                    .map_err(|_| invalid_utf8())?;
            }
        }
        Ok(())
    }

    fn end_frame(&mut self, frame: Frame) -> Result<Option<Decoded>, ProtocolError> {
        match frame.opcode {
            Opcode::Ping => Ok(Some(Decoded::Ping(self.control.split().freeze()))),
            Opcode::Pong => Ok(Some(Decoded::Pong(self.control.split().freeze()))),
            Opcode::Close => {
                let body = self.control.split().freeze();
                parse_close(&body).map(|c| Some(Decoded::Close(c)))
            }
            _ if !frame.fin => Ok(None),
            _ => {
                let message = self.message.take().expect("a message is being assembled");
                let mut data = std::mem::take(&mut self.payload).freeze();
                if message.compressed {
                    let inflater = self
                        .inflater
                        .get_or_insert_with(|| Box::new(Inflater::new()));
                    data = inflater
                        .inflate(&data, self.config.max_message_bytes)
                        .map_err(|e| match e {
                            super::deflate::InflateError::TooBig => too_big("message too big"),
                            super::deflate::InflateError::Corrupt => ProtocolError {
                                code: CloseCode::INVALID_PAYLOAD,
                                reason: "invalid compressed data",
                            },
                        })?;
                    if self.config.client_no_context_takeover {
                        self.inflater = None;
                    }
                    if message.text {
                        self.utf8.feed(&data).map_err(|_| invalid_utf8())?;
                    }
                }
                if message.text {
                    self.utf8.finish().map_err(|_| invalid_utf8())?;
                    Ok(Some(Decoded::Message(Message::Text(data))))
                } else {
                    Ok(Some(Decoded::Message(Message::Binary(data))))
                }
            }
        }
    }
}

/// Parses a close frame's body (RFC 6455 §5.5.1, §7.4).
fn parse_close(body: &[u8]) -> Result<Option<CloseFrame>, ProtocolError> {
    match body.len() {
        0 => Ok(None),
        1 => Err(protocol("close frame of one byte")),
        _ => {
            let code = CloseCode(u16::from_be_bytes([body[0], body[1]]));
            if !code.is_valid_on_wire() {
                return Err(protocol("invalid close code"));
            }
            let reason = std::str::from_utf8(&body[2..]).map_err(|_| invalid_utf8())?;
            Ok(Some(CloseFrame {
                code,
                reason: reason.into(),
            }))
        }
    }
}

/// XORs `data` with the masking key (RFC 6455 §5.3); `offset` is the
/// position of `data[0]` in the frame's payload.
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    let mut key = [0u8; 4];
    for (i, k) in key.iter_mut().enumerate() {
        *k = mask[(offset + i) % 4];
    }
    let word = u32::from_ne_bytes(key);
    let wide = u64::from(word) | (u64::from(word) << 32);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let v = u64::from_ne_bytes((&*chunk).try_into().expect("8 bytes")) ^ wide;
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// Appends the header of an unmasked server frame (RFC 6455 §5.2).
pub fn encode_header(out: &mut BytesMut, fin: bool, rsv1: bool, opcode: Opcode, len: usize) {
    let b0 = (u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode.bits();
    out.put_u8(b0);
    if len < 126 {
        out.put_u8(len as u8);
    } else if len <= u16::MAX as usize {
        out.put_u8(126);
        out.put_u16(len as u16);
    } else {
        out.put_u8(127);
        out.put_u64(len as u64);
    }
}

/// One whole server frame: header and payload in one buffer.
pub fn encode(fin: bool, rsv1: bool, opcode: Opcode, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 10);
    encode_header(&mut out, fin, rsv1, opcode, payload.len());
    out.put_slice(payload);
    out.freeze()
}

/// A close frame's payload: the code and a reason cut to fit 125 bytes on a
/// character boundary.
pub fn close_payload(code: CloseCode, reason: &str) -> BytesMut {
    let mut cut = reason.len().min(123);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = BytesMut::with_capacity(2 + cut);
    out.put_u16(code.0);
    out.put_slice(&reason.as_bytes()[..cut]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn masked(fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        let b0 = (u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode;
        out.put_u8(b0);
        let len = payload.len();
        if len < 126 {
            out.put_u8(0x80 | len as u8);
        } else if len <= 0xFFFF {
            out.put_u8(0x80 | 126);
            out.put_u16(len as u16);
        } else {
            out.put_u8(0x80 | 127);
            out.put_u64(len as u64);
        }
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        out.put_slice(&mask);
        let start = out.len();
        out.put_slice(payload);
        apply_mask(&mut out[start..], mask, 0);
        out.to_vec()
    }

    fn config() -> DecodeConfig {
        DecodeConfig {
            max_frame_bytes: 1 << 20,
            max_message_bytes: 1 << 20,
            deflate: false,
            client_no_context_takeover: false,
        }
    }

    fn decode_all(d: &mut Decoder, mut input: &[u8]) -> Result<Vec<Decoded>, ProtocolError> {
        let mut out = Vec::new();
        loop {
            match d.decode(input)? {
                Status::Complete(n, item) => {
                    out.push(item);
                    input = &input[n..];
                }
                Status::Partial => return Ok(out),
            }
        }
    }

    #[test]
    fn masking_matches_the_bytewise_definition_at_every_offset() {
        let data: Vec<u8> = (0..=255).collect();
        for offset in 0..8 {
            let mut fast = data.clone();
            apply_mask(&mut fast, [1, 2, 3, 4], offset);
            let slow: Vec<u8> = data
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ [1, 2, 3, 4][(offset + i) % 4])
                .collect();
            assert_eq!(fast, slow);
        }
    }

    #[test]
    fn fragments_fed_byte_by_byte_make_one_message() {
        let mut wire = masked(false, false, 1, "héllo ".as_bytes());
        wire.extend(masked(true, false, 9, b"ping"));
        wire.extend(masked(true, false, 0, "wörld".as_bytes()));
        let mut d = Decoder::new(config());
        let mut items = Vec::new();
        for b in &wire {
            match d.decode(std::slice::from_ref(b)).unwrap() {
                Status::Complete(1, item) => items.push(item),
                Status::Complete(n, _) => panic!("used {n} of 1"),
                Status::Partial => {}
            }
        }
        assert!(matches!(&items[0], Decoded::Ping(p) if &p[..] == b"ping"));
        assert!(
            matches!(&items[1], Decoded::Message(Message::Text(t)) if &t[..] == "héllo wörld".as_bytes())
        );
        assert!(d.is_idle());
    }

    #[test]
    fn hostile_frames_get_their_close_codes() {
        let cases: Vec<(Vec<u8>, u16)> = vec![
            (vec![0x81, 0x02, b'h', b'i'], 1002), // unmasked
            ([vec![0x82, 0xFF], vec![0x80; 8], vec![0; 4]].concat(), 1002), // 2^63 length
            (masked(false, false, 9, b"x"), 1002), // fragmented ping
            (masked(true, false, 9, &[0; 126]), 1002), // oversized ping
            (masked(true, false, 3, b""), 1002),  // reserved opcode
            (masked(true, false, 0xB, b""), 1002), // reserved control opcode
            (masked(true, true, 1, b"x"), 1002),  // RSV1 without deflate
            ([0xA1u8, 0x80, 0, 0, 0, 0].to_vec(), 1002), // RSV2
            (masked(true, false, 0, b"x"), 1002), // continuation first
            (masked(true, false, 8, &[0x03]), 1002), // one-byte close
            (masked(true, false, 8, &[0x03, 0xE7]), 1002), // close 999
            (masked(true, false, 8, &[0x03, 0xEE]), 1002), // close 1006
            (masked(true, false, 8, &[0x13, 0x88]), 1002), // close 5000
            (masked(true, false, 8, &[0x03, 0xE8, 0xFF]), 1007), // bad reason
            (
                [masked(false, false, 1, b"a"), masked(true, false, 2, b"b")].concat(),
                1002,
            ),
            (
                [
                    masked(false, false, 1, b"\xce"),
                    masked(true, false, 0, b"\xff"),
                ]
                .concat(),
                1007,
            ),
            (
                [
                    masked(false, false, 1, b"ok\xe2"),
                    masked(true, false, 0, b"\x82"),
                ]
                .concat(),
                1007,
            ),
        ];
        for (wire, code) in cases {
            let mut d = Decoder::new(config());
            let err = decode_all(&mut d, &wire).expect_err(&format!("{wire:x?}"));
            assert_eq!(err.code.0, code, "{wire:x?}: {err}");
        }
    }

    #[test]
    fn limits_refuse_with_1009_at_the_edge() {
        let mut c = config();
        c.max_frame_bytes = 10;
        c.max_message_bytes = 15;
        let mut d = Decoder::new(c);
        assert_eq!(
            decode_all(&mut d, &masked(true, false, 2, &[0; 10]))
                .unwrap()
                .len(),
            1
        );
        let err = decode_all(&mut d, &masked(true, false, 2, &[0; 11])[..4]).unwrap_err();
        assert_eq!(err.code.0, 1009);
        let mut d = Decoder::new(c);
        let wire = [
            masked(false, false, 2, &[0; 10]),
            masked(true, false, 0, &[0; 5]),
        ]
        .concat();
        assert_eq!(decode_all(&mut d, &wire).unwrap().len(), 1);
        let wire = [
            masked(false, false, 2, &[0; 10]),
            masked(true, false, 0, &[0; 6]),
        ]
        .concat();
        assert_eq!(decode_all(&mut d, &wire).unwrap_err().code.0, 1009);
    }
}
