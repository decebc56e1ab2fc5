//! The three encoders behind one interface: write a piece, flush, finish,
//! and take what came out so far.

use std::io::{self, Write};

use bytes::Bytes;

use super::Coding;

/// Brotli window: 2^19 bytes (512 KiB, as nginx's brotli module). The
/// format's default of 2^22 would let the encoder hold about 8 MiB per
/// response for a gain that on-the-fly levels do not reach; at 2^19 it
/// holds about 1 MiB.
pub(super) const BROTLI_LG_WINDOW: u32 = 19;

/// Brotli's internal input buffer, in bytes.
const BROTLI_BUFFER: usize = 4096;

/// An encoder writing into a buffer that [`Encoder::take`] empties.
pub(super) enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    pub(super) fn new(coding: Coding, level: u32) -> io::Result<Encoder> {
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(level),
            )),
            Coding::Brotli => Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                BROTLI_BUFFER,
                level,
                BROTLI_LG_WINDOW,
            ))),
            Coding::Zstd => {
                let level = i32::try_from(level).unwrap_or(i32::MAX);
                Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), level)?)
            }
        })
    }

    pub(super) fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Encoder::Gzip(enc) => enc.write_all(data),
            Encoder::Brotli(enc) => enc.write_all(data),
            Encoder::Zstd(enc) => enc.write_all(data),
        }
    }

    /// Emits everything written so far as a decodable prefix (a sync flush).
    pub(super) fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Gzip(enc) => enc.flush(),
            Encoder::Brotli(enc) => enc.flush(),
            Encoder::Zstd(enc) => enc.flush(),
        }
    }

    /// Takes the output produced so far.
    pub(super) fn take(&mut self) -> Bytes {
        let out = match self {
            Encoder::Gzip(enc) => enc.get_mut(),
            Encoder::Brotli(enc) => enc.get_mut(),
            Encoder::Zstd(enc) => enc.get_mut(),
        };
        Bytes::from(std::mem::take(out))
    }

    /// Ends the stream and returns the remaining output.
    pub(super) fn finish(self) -> io::Result<Bytes> {
        let out = match self {
            Encoder::Gzip(enc) => enc.finish()?,
            Encoder::Brotli(enc) => enc.into_inner(),
            Encoder::Zstd(enc) => enc.finish()?,
        };
        Ok(Bytes::from(out))
    }
}
