//! Sizes and durations as written on the command line: `16MiB`, `512k`,
//! `30s`, `500ms`; the same in a `--config` file, where a bare number may
//! also be a TOML integer (bytes, seconds) or float (seconds).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A byte count: a number with an optional binary unit (`k`/`KiB`,
/// `M`/`MiB`, `G`/`GiB`; case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Size(pub(crate) u64);

/// A duration: seconds as a number (`30`, `0.5`) or with a unit (`30s`,
/// `500ms`, `2m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Secs(pub(crate) Duration);

const UNITS: [(&str, u64); 4] = [
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("", 1),
];

impl FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Size, String> {
        let (num, unit) = split_number(s);
        let n: u64 = num
            .parse()
            .map_err(|_| format!("{s:?} is not a size (such as 4096, 64k, 16MiB)"))?;
        let scale = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            _ => {
                return Err(format!(
                    "unknown unit {unit:?} (use k, M, G or KiB, MiB, GiB)"
                ));
            }
        };
        n.checked_mul(scale)
            .map(Size)
            .ok_or_else(|| format!("{s:?} is too large"))
    }
}

impl fmt::Display for Size {
    /// The largest unit that divides the size exactly: `16MiB`, `1000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (unit, scale) = UNITS
            .iter()
            .find(|(_, scale)| self.0 != 0 && self.0.is_multiple_of(*scale))
            .copied()
            .unwrap_or(("", 1));
        write!(f, "{}{unit}", self.0 / scale)
    }
}

impl FromStr for Secs {
    type Err = String;

    fn from_str(s: &str) -> Result<Secs, String> {
        let (num, unit) = split_number(s);
        let bad = || format!("{s:?} is not a duration (such as 30, 0.5, 500ms, 2m)");
        let n: f64 = num.parse().map_err(|_| bad())?;
        let secs = match unit {
            "" | "s" => n,
            "ms" => n / 1000.0,
            "m" | "min" => n * 60.0,
            "h" => n * 3600.0,
            _ => return Err(bad()),
        };
        Duration::try_from_secs_f64(secs)
            .map(Secs)
            .map_err(|_| bad())
    }
}

impl fmt::Display for Secs {
    /// Whole seconds as `30s`, anything else in milliseconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == 0 {
            write!(f, "{}s", d.as_secs())
        } else {
            write!(f, "{}ms", d.as_millis())
        }
    }
}

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Size, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: a number of bytes, or a string with a unit such as \"64k\" or \"16MiB\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n)
                    .map(Size)
                    .map_err(|_| E::custom(format!("{n} is not a size: it is negative")))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Size, E> {
                s.parse().map_err(E::custom)
            }
        }
        de.deserialize_any(Visitor)
    }
}

impl<'de> serde::Deserialize<'de> for Secs {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Secs, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Secs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration: a number of seconds, or a string with a unit such as \"500ms\" or \"2m\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Secs, E> {
                Ok(Secs(Duration::from_secs(n)))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Secs, E> {
                u64::try_from(n)
                    .map(|n| Secs(Duration::from_secs(n)))
                    .map_err(|_| E::custom(format!("{n} is not a duration: it is negative")))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Secs, E> {
                Duration::try_from_secs_f64(n).map(Secs).map_err(|_| {
                    E::custom(format!(
                        "{n} is not a duration (such as 30, 0.5, \"500ms\")"
                    ))
                })
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Secs, E> {
                s.parse().map_err(E::custom)
            }
        }
        de.deserialize_any(Visitor)
    }
}

/// Splits `"16MiB"` into `("16", "MiB")`, trimming space between them.
fn split_number(s: &str) -> (&str, &str) {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim_start())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Secs, Size};

    #[test]
    fn sizes() {
        let table: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("4096", Some(4096)),
            ("64k", Some(64 << 10)),
            ("64K", Some(64 << 10)),
            ("64KiB", Some(64 << 10)),
            ("16M", Some(16 << 20)),
            ("16 MiB", Some(16 << 20)),
            ("2g", Some(2 << 30)),
            ("12b", Some(12)),
            ("", None),
            ("k", None),
            ("1.5M", None),
            ("-1", None),
            ("10 parsecs", None),
            ("64kb", None),
            ("99999999999999999999G", None),
        ];
        for (input, want) in table {
            assert_eq!(input.parse::<Size>().ok().map(|s| s.0), *want, "{input:?}");
        }
    }

    #[test]
    fn sizes_display_round_trip() {
        for (n, shown) in [
            (16 << 20, "16MiB"),
            (16 << 10, "16KiB"),
            (1000, "1000"),
            (0, "0"),
        ] {
            assert_eq!(Size(n).to_string(), shown);
            assert_eq!(shown.parse::<Size>().unwrap(), Size(n));
        }
    }

    #[test]
    fn durations() {
        let table: &[(&str, Option<Duration>)] = &[
            ("30", Some(Duration::from_secs(30))),
            ("30s", Some(Duration::from_secs(30))),
            ("0.5", Some(Duration::from_millis(500))),
            ("250ms", Some(Duration::from_millis(250))),
            ("2m", Some(Duration::from_secs(120))),
            ("1h", Some(Duration::from_secs(3600))),
            ("0", Some(Duration::ZERO)),
            ("", None),
            ("-1", None),
            ("ten", None),
            ("5 days", None),
        ];
        for (input, want) in table {
            assert_eq!(input.parse::<Secs>().ok().map(|s| s.0), *want, "{input:?}");
        }
    }

    #[test]
    fn durations_display_round_trip() {
        for (d, shown) in [
            (Duration::from_secs(30), "30s"),
            (Duration::from_millis(1500), "1500ms"),
        ] {
            assert_eq!(Secs(d).to_string(), shown);
            assert_eq!(shown.parse::<Secs>().unwrap(), Secs(d));
        }
    }
}
