//! The Huffman code of HPACK's string literals (RFC 7541 §5.2, Appendix B).
//!
//! The code is canonical: within each length, codes are assigned in
//! symbol order, and each length's first code follows the last of the
//! length before it, shifted left by one. So the 257 code lengths alone
//! rebuild it, and the tables below are built from them at compile time:
//! the code of each symbol for encoding, and for decoding the symbols in
//! code order with each length's first code and bound.
//!
//! Decoding looks at the next 8 bits first: a code of 8 bits or fewer
//! (which covers letters, digits and the common punctuation of header
//! text) is found with one table load. Longer codes are found by comparing
//! the next 30 bits, left-aligned, with each length's bound, shortest
//! first.

use bytes::{BufMut, BytesMut};

use super::DecodeError;

/// The code's length in bits, by symbol: bytes 0 to 255, then EOS
/// (RFC 7541 Appendix B).
#[rustfmt::skip]
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

/// The end-of-string symbol: never part of a string; its code's leading
/// bits are what pads a string to a whole byte.
const EOS: usize = 256;

/// The shortest code, in bits.
const MIN_LEN: u32 = 5;

/// The longest code, in bits (EOS's, and a few control bytes').
const MAX_LEN: u32 = 30;

/// The longest code the first-byte table holds, in bits.
const FAST_LEN: u32 = 8;

/// The code, built from [`CODE_LENGTHS`] for both directions.
struct Code {
    /// Each symbol's code, right-aligned, and its length in bits.
    by_symbol: [(u32, u8); 257],
    /// The symbols in code order: by length, then by symbol.
    in_code_order: [u16; 257],
    /// Per length: its first code, right-aligned (meaningless when no code
    /// has this length).
    first: [u32; MAX_LEN as usize + 1],
    /// Per length: where its symbols start in `in_code_order`.
    start: [u16; MAX_LEN as usize + 1],
    /// Per length: one past its last code, left-aligned to 30 bits. A
    /// length with no codes has the bound of the length before it, so a
    /// search by bound never stops there.
    bound: [u32; MAX_LEN as usize + 1],
    /// Per value of the next 8 bits: the symbol whose code of 8 bits or
    /// fewer they start with, as `length << 8 | symbol`, or 0 when the
    /// code they start is longer.
    fast: [u16; 256],
}

/// The code, built at compile time.
static CODE: Code = build_code();

/// Assigns the canonical codes from the code lengths, and fills the
/// decoding tables on the way.
const fn build_code() -> Code {
    let mut code = Code {
        by_symbol: [(0, 0); 257],
        in_code_order: [0; 257],
        first: [0; MAX_LEN as usize + 1],
        start: [0; MAX_LEN as usize + 1],
        bound: [0; MAX_LEN as usize + 1],
        fast: [0; 256],
    };
    let mut next_code: u32 = 0;
    let mut placed = 0;
    let mut len = MIN_LEN;
    while len <= MAX_LEN {
        code.first[len as usize] = next_code;
        code.start[len as usize] = placed as u16;
        let mut symbol = 0;
        while symbol < 257 {
            if CODE_LENGTHS[symbol] as u32 == len {
                code.by_symbol[symbol] = (next_code, len as u8);
                code.in_code_order[placed] = symbol as u16;
                if len <= FAST_LEN {
                    // Every 8-bit value that starts with this code.
                    let spare_bits = FAST_LEN - len;
                    let mut low = 0;
                    while low < 1 << spare_bits {
                        let at = (next_code << spare_bits | low) as usize;
                        code.fast[at] = (len as u16) << 8 | symbol as u16;
                        low += 1;
                    }
                }
                next_code += 1;
                placed += 1;
            }
            symbol += 1;
        }
        code.bound[len as usize] = next_code << (MAX_LEN - len);
        next_code <<= 1;
        len += 1;
    }
    code
}

/// Decodes the Huffman-coded `src` into the front of `dst`, which must
/// hold `src.len() * 8 / 5` bytes (every code being at least 5 bits
/// long), and returns the decoded length.
///
/// An error when EOS appears, or when the bits after the last symbol are
/// not a padding of at most 7 one bits (RFC 7541 §5.2).
pub(super) fn decode(src: &[u8], dst: &mut [u8]) -> Result<usize, DecodeError> {
    // Bits not yet decoded sit at the low end of `acc`, `bits` of them;
    // those above are already decoded and ignored.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut input = src.iter();
    let mut written = 0;
    loop {
        while bits <= 56 {
            let Some(&byte) = input.next() else { break };
            acc = acc << 8 | u64::from(byte);
            bits += 8;
        }
        if bits == 0 {
            return Ok(written);
        }
        let (symbol, len) = match fast_symbol(acc, bits) {
            Some(found) => found,
            None => {
                let window = window(acc, bits);
                // After a miss in the first-byte table, the code is longer
                // than 8 bits; at the end of the input, it may be shorter.
                let mut len = if bits >= FAST_LEN {
                    FAST_LEN + 1
                } else {
                    MIN_LEN
                };
                while window >= CODE.bound[len as usize] {
                    len += 1;
                }
                if len > bits {
                    // The bits left are shorter than the code they start
                    // (padded with ones, as `window` is): they are the
                    // padding, which must be at most 7 bits of ones.
                    let left = acc & ((1 << bits) - 1);
                    return if bits <= 7 && left == (1 << bits) - 1 {
                        Ok(written)
                    } else {
                        Err(DecodeError)
                    };
                }
                let offset = (window >> (MAX_LEN - len)) - CODE.first[len as usize];
                let at = usize::from(CODE.start[len as usize]) + offset as usize;
                (usize::from(CODE.in_code_order[at]), len)
            }
        };
        if symbol == EOS {
            return Err(DecodeError);
        }
        *dst.get_mut(written).ok_or(DecodeError)? = symbol as u8;
        written += 1;
        bits -= len;
    }
}

/// The symbol and length of a code of 8 bits or fewer at the front of the
/// `bits` undecoded bits of `acc`, when there are 8 bits to look at.
fn fast_symbol(acc: u64, bits: u32) -> Option<(usize, u32)> {
    if bits < FAST_LEN {
        return None;
    }
    let next_byte = (acc >> (bits - FAST_LEN)) as u8;
    match CODE.fast[usize::from(next_byte)] {
        0 => None,
        entry => Some((usize::from(entry & 0xff), u32::from(entry >> 8))),
    }
}

/// The next 30 undecoded bits of `acc`, left-aligned; past the end of the
/// input, one bits (the start of EOS), so that a short tail never matches
/// a code that would need bits that are not there.
fn window(acc: u64, bits: u32) -> u32 {
    let mask = (1u32 << MAX_LEN) - 1;
    if bits >= MAX_LEN {
        (acc >> (bits - MAX_LEN)) as u32 & mask
    } else {
        let missing = MAX_LEN - bits;
        ((acc << missing) as u32 | ((1 << missing) - 1)) & mask
    }
}

/// The length of `src` Huffman-coded, in whole bytes.
pub(super) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&byte| usize::from(CODE.by_symbol[usize::from(byte)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded, padded to a whole byte with the leading
/// one bits of EOS.
pub(super) fn encode(src: &[u8], out: &mut BytesMut) {
    out.reserve(encoded_len(src));
    // Bits not yet written sit at the low end of `acc`, `bits` of them
    // (fewer than 8 between symbols, so a 30-bit code always fits).
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &byte in src {
        let (code, len) = CODE.by_symbol[usize::from(byte)];
        acc = acc << len | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.put_u8((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.put_u8((acc << (8 - bits)) as u8 | 0xff >> bits);
    }
}

/// Each symbol's code, right-aligned, and its length in bits, for the
/// tests that compare them with RFC 7541 Appendix B.
#[cfg(test)]
pub(super) fn code_of(symbol: usize) -> (u32, u8) {
    CODE.by_symbol[symbol]
}
