//! Precompressed siblings chosen by Accept-Encoding (RFC 9110 §12.5.3); no
//! IO.

use http::header::{self, HeaderMap};

/// A content coding with a precompressed sibling file (`name.br`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// Brotli, `.br`.
    Br,
    /// Zstandard, `.zst`.
    Zstd,
    /// gzip, `.gz`.
    Gzip,
}

impl Coding {
    /// Server preference on equal q-values: smallest output first.
    pub(crate) const ALL: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    /// The token in Accept-Encoding and Content-Encoding.
    pub(crate) fn token(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The sibling's file-name suffix.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
        }
    }
}

/// The codings the client accepts, best first, each strictly preferred to
/// the identity coding (so trying them in order and falling back to the
/// file itself is the negotiation). At most three entries; no allocation.
pub(crate) fn preferred(headers: &HeaderMap) -> impl Iterator<Item = Coding> {
    let mut q = [0u16; 3];
    // Per RFC 9110 §12.5.3 identity is acceptable unless excluded; it only
    // matters here as the alternative a coding must not be worse than.
    let mut identity: Option<u16> = None;
    let mut star: Option<u16> = None;
    let mut named = [false; 3];
    let mut any = false;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        any = true;
        for element in value.as_bytes().split(|&b| b == b',') {
            let mut parts = element.split(|&b| b == b';');
            let token = parts.next().unwrap_or_default().trim_ascii();
            let weight = parts
                .find_map(|p| {
                    let p = p.trim_ascii();
                    let (k, v) = p.split_at_checked(2)?;
                    k.eq_ignore_ascii_case(b"q=").then(|| qvalue(v))
                })
                .unwrap_or(Some(1000));
            let Some(weight) = weight else { continue };
            if token == b"*" {
                star = Some(weight);
            } else if token.eq_ignore_ascii_case(b"identity") {
                identity = Some(weight);
            } else if let Some(i) = Coding::ALL
                .iter()
                .position(|c| token.eq_ignore_ascii_case(c.token().as_bytes()))
            {
                q[i] = weight;
                named[i] = true;
            } else if token.eq_ignore_ascii_case(b"x-gzip") {
                q[2] = q[2].max(weight);
                named[2] = true;
            }
        }
    }
    if any {
        for i in 0..3 {
            if !named[i] {
                q[i] = star.unwrap_or(0);
            }
        }
    }
    let identity = identity.or(star.filter(|&s| s == 0)).unwrap_or(1);
    let mut order = [0usize, 1, 2];
    // Stable: equal weights keep the server's preference.
    order.sort_by(|a, b| q[*b].cmp(&q[*a]));
    order
        .into_iter()
        .filter(move |&i| q[i] > 0 && q[i] >= identity)
        .map(|i| Coding::ALL[i])
}

/// A qvalue (RFC 9110 §12.4.2) in thousandths; `None` when malformed.
fn qvalue(v: &[u8]) -> Option<u16> {
    let v = v.trim_ascii();
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn check(accept: &[&str], want: &[Coding]) {
        let mut headers = HeaderMap::new();
        for value in accept {
            headers.append(
                header::ACCEPT_ENCODING,
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let got: Vec<Coding> = preferred(&headers).collect();
        assert_eq!(got, want, "{accept:?}");
    }

    use Coding::{Br, Gzip, Zstd};

    #[test]
    fn negotiation() {
        check(&[], &[]);
        check(&[""], &[]);
        check(&["gzip"], &[Gzip]);
        check(&["gzip, deflate, br, zstd"], &[Br, Zstd, Gzip]);
        check(&["gzip;q=1.0, br;q=0.5"], &[Gzip, Br]);
        check(&["br;q=0, gzip"], &[Gzip]);
        check(&["*"], &[Br, Zstd, Gzip]);
        check(&["*;q=0.5, gzip"], &[Gzip, Br, Zstd]);
        check(&["gzip;q=0.5, identity"], &[]);
        check(&["gzip;q=0.5, identity;q=0.5"], &[Gzip]);
        check(&["gzip;q=0.1, identity;q=0"], &[Gzip]);
        check(&["GZIP;Q=0.8"], &[Gzip]);
        check(&["x-gzip"], &[Gzip]);
        check(&["gzip;q=2, br;q=0.x, zstd;q=0.001"], &[Zstd]);
        check(&["br", "gzip"], &[Br, Gzip]);
    }

    #[test]
    fn qvalues() {
        assert_eq!(qvalue(b"1"), Some(1000));
        assert_eq!(qvalue(b"1.000"), Some(1000));
        assert_eq!(qvalue(b"0.5"), Some(500));
        assert_eq!(qvalue(b"0.25"), Some(250));
        assert_eq!(qvalue(b"0"), Some(0));
        assert_eq!(qvalue(b"1.5"), None);
        assert_eq!(qvalue(b"0.1234"), None);
        assert_eq!(qvalue(b""), None);
    }
}
