//! Incremental UTF-8 validation of text messages (RFC 6455 §8.1): bytes
//! arrive in pieces split anywhere, even inside a code point, and an
//! invalid sequence is reported as soon as its first wrong byte arrives.

/// The validator's state between pieces: the bytes of a code point whose
/// end has not arrived yet.
#[derive(Debug, Default, Clone)]
pub(crate) struct Utf8 {
    partial: [u8; 4],
    len: u8,
}

/// A byte sequence that is not UTF-8 whatever follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid;

impl Utf8 {
    /// Validates the next piece; an error means no continuation can make
    /// the text valid.
    pub(crate) fn feed(&mut self, mut input: &[u8]) -> Result<(), Invalid> {
        if self.len > 0 {
            let need = width(self.partial[0]);
            let have = self.len as usize;
            let take = (need - have).min(input.len());
            self.partial[have..have + take].copy_from_slice(&input[..take]);
            self.len += take as u8;
            input = &input[take..];
            match std::str::from_utf8(&self.partial[..self.len as usize]) {
                Ok(_) => self.len = 0,
                Err(e) if e.error_len().is_some() => return Err(Invalid),
                Err(_) => return Ok(()), // still incomplete: `input` is empty
            }
        }
        match std::str::from_utf8(input) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_some() => Err(Invalid),
            Err(e) => {
                let rest = &input[e.valid_up_to()..];
                self.partial[..rest.len()].copy_from_slice(rest);
                self.len = rest.len() as u8;
                Ok(())
            }
        }
    }

    /// Ends the text: an unfinished code point makes it invalid.
    pub(crate) fn finish(&mut self) -> Result<(), Invalid> {
        let done = self.len == 0;
        self.len = 0;
        if done { Ok(()) } else { Err(Invalid) }
    }
}

/// The length of the sequence a lead byte starts (`1` for bytes that cannot
/// lead one: `from_utf8` then rejects them).
fn width(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_everywhere(text: &[u8]) -> Vec<Result<(), Invalid>> {
        (0..=text.len())
            .map(|i| {
                let mut v = Utf8::default();
                v.feed(&text[..i])
                    .and_then(|()| v.feed(&text[i..]))
                    .and_then(|()| v.finish())
            })
            .collect()
    }

    #[test]
    fn valid_text_split_anywhere_is_valid() {
        let text = "κόσμε 𝄞 €".as_bytes();
        assert!(split_everywhere(text).iter().all(Result::is_ok));
    }

    #[test]
    fn invalid_sequences_fail_split_anywhere() {
        for bad in [
            &b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited"[..],
            b"\xf4\x90\x80\x80",
            b"\xc0\xaf",
            b"ab\xff",
        ] {
            assert!(split_everywhere(bad).iter().all(Result::is_err), "{bad:?}");
        }
    }

    #[test]
    fn fails_fast_on_the_first_wrong_byte() {
        let mut v = Utf8::default();
        v.feed(b"\xf4").unwrap();
        assert_eq!(
            v.feed(b"\x90"),
            Err(Invalid),
            "U+110000 and above are rejected at once"
        );
        let mut v = Utf8::default();
        assert!(
            v.feed(b"\xed\xa0").is_err(),
            "a surrogate is rejected before its last byte"
        );
    }

    #[test]
    fn an_unfinished_code_point_fails_at_the_end() {
        let mut v = Utf8::default();
        v.feed(b"a\xe2\x82").unwrap();
        assert_eq!(v.finish(), Err(Invalid));
    }
}
