//! permessage-deflate (RFC 7692) for the client: compress outgoing messages,
//! inflate incoming ones, on flate2's raw DEFLATE streams.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The empty stored block every message ends with, removed on the wire (RFC 7692 section 7.2.1).
const TAIL: [u8; 4] = [0x00, 0x00, 0xFF, 0xFF];

/// Bytes the inflater produces per call; the output grows by this much.
const STEP: usize = 16 * 1024;

/// One connection's compression state.
pub(crate) struct Deflate {
    compress: Compress,
    decompress: Decompress,
    /// Reset the compressor after every message (client_no_context_takeover).
    reset_compressor: bool,
    /// Reset the inflater after every message (server_no_context_takeover).
    reset_decompressor: bool,
}

impl std::fmt::Debug for Deflate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deflate").finish_non_exhaustive()
    }
}

impl Deflate {
    /// Compression state for the parameters the server agreed to.
    pub(crate) fn new(
        client_no_context_takeover: bool,
        server_no_context_takeover: bool,
    ) -> Deflate {
        Deflate {
            compress: Compress::new(Compression::fast(), false),
            decompress: Decompress::new(false),
            reset_compressor: client_no_context_takeover,
            reset_decompressor: server_no_context_takeover,
        }
    }

    /// Compresses one message into `out` (cleared first), ready to frame with RSV1.
    pub(crate) fn compress(&mut self, message: &[u8], out: &mut Vec<u8>) -> Result<(), ()> {
        out.clear();
        let base = self.compress.total_in();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(STEP.max(message.len() / 2));
            }
            let consumed = (self.compress.total_in() - base) as usize;
            // Section 7.2.1: a sync flush ends the message on a byte boundary.
            self.compress
                .compress_vec(&message[consumed..], out, FlushCompress::Sync)
                .map_err(|_| ())?;
            let consumed = (self.compress.total_in() - base) as usize;
            // The flush is complete once it left room in the output.
            if consumed == message.len() && out.len() < out.capacity() {
                break;
            }
        }
        if !out.ends_with(&TAIL) {
            return Err(());
        }
        out.truncate(out.len() - TAIL.len());
        if self.reset_compressor {
            self.compress.reset();
        }
        Ok(())
    }

    /// Inflates one message's payload (all its frames, joined) into `out`
    /// (cleared first), refusing to produce more than `limit` bytes.
    pub(crate) fn decompress(
        &mut self,
        payload: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), ()> {
        out.clear();
        // Section 7.2.2: append the removed tail before inflating.
        for input in [payload, &TAIL[..]] {
            let base = self.decompress.total_in();
            loop {
                if out.capacity() - out.len() < 64 {
                    if out.len() > limit {
                        return Err(());
                    }
                    out.reserve(STEP);
                }
                let consumed = (self.decompress.total_in() - base) as usize;
                let produced = out.len();
                let status = self
                    .decompress
                    .decompress_vec(&input[consumed..], out, FlushDecompress::Sync)
                    .map_err(|_| ())?;
                let now_consumed = (self.decompress.total_in() - base) as usize;
                if now_consumed == input.len() && out.len() < out.capacity() {
                    break;
                }
                let stuck = now_consumed == consumed && out.len() == produced;
                if status == Status::StreamEnd || stuck {
                    return Err(());
                }
            }
        }
        if out.len() > limit {
            return Err(());
        }
        if self.reset_decompressor {
            self.decompress.reset(false);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_and_without_context_takeover() {
        for reset in [false, true] {
            let mut client = Deflate::new(reset, reset);
            let mut server = Deflate::new(reset, reset);
            let (mut wire, mut back) = (Vec::new(), Vec::new());
            for round in 0..3 {
                let message = format!(
                    "{{\"round\":{round},\"text\":\"{}\"}}",
                    "hello ".repeat(500)
                );
                client.compress(message.as_bytes(), &mut wire).unwrap();
                assert!(wire.len() < message.len() / 4);
                assert!(!wire.ends_with(&TAIL));
                server.decompress(&wire, &mut back, 1 << 20).unwrap();
                assert_eq!(back, message.as_bytes());
            }
        }
    }

    #[test]
    fn inflating_past_the_limit_is_an_error() {
        let mut client = Deflate::new(false, false);
        let mut wire = Vec::new();
        client.compress(&vec![b'a'; 100_000], &mut wire).unwrap();
        let mut out = Vec::new();
        assert!(
            Deflate::new(false, false)
                .decompress(&wire, &mut out, 10_000)
                .is_err()
        );
        assert!(
            Deflate::new(false, false)
                .decompress(b"\xff\xff\xff", &mut out, 10_000)
                .is_err()
        );
    }
}
