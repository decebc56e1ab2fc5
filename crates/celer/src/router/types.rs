//! Parameter types of rules: the built-ins and user-registered ones.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use regex::Regex;

use super::RuleError;

/// The type of one rule parameter.
#[derive(Clone)]
pub(crate) enum ParamKind {
    /// `int`: an optional `-` and decimal digits that fit an `i64`.
    Int,
    /// `uint`: decimal digits that fit a `u64`.
    Uint,
    /// `string`: one non-empty path segment.
    Str,
    /// `uuid`: `8-4-4-4-12` hexadecimal digits.
    Uuid,
    /// `path`: the rest of the path, slashes included; last in a rule.
    Path,
    /// A type registered with `register_type`.
    Custom(Arc<CustomType>),
}

/// A user-registered parameter type: a pattern plus a conversion check.
pub(crate) struct CustomType {
    name: Box<str>,
    pattern: Box<str>,
    /// `^(?:pattern)$`, for matching one whole segment.
    anchored: Regex,
    /// Whether the target type's `FromStr` accepts the value.
    converts: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

// ===== impl ParamKind =====

impl ParamKind {
    pub(crate) fn name(&self) -> &str {
        match self {
            ParamKind::Int => "int",
            ParamKind::Uint => "uint",
            ParamKind::Str => "string",
            ParamKind::Uuid => "uuid",
            ParamKind::Path => "path",
            ParamKind::Custom(custom) => &custom.name,
        }
    }

    /// The regular expression of the type, used inside mixed segments.
    pub(crate) fn pattern(&self) -> &str {
        match self {
            ParamKind::Int => "-?[0-9]+",
            ParamKind::Uint => "[0-9]+",
            ParamKind::Str => "[^/]+",
            ParamKind::Uuid => {
                "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            }
            ParamKind::Path => ".*",
            ParamKind::Custom(custom) => &custom.pattern,
        }
    }

    /// Whether a raw (still percent-encoded) path segment is of this type.
    #[inline]
    pub(crate) fn accepts_raw(&self, segment: &str) -> bool {
        match self {
            // A non-empty raw segment decodes to a non-empty value.
            ParamKind::Str => !segment.is_empty(),
            _ if segment.bytes().any(|b| b == b'%') => self.accepts(&super::decode(segment)),
            _ => self.accepts(segment),
        }
    }

    /// Whether a (percent-decoded) value is of this type.
    pub(crate) fn accepts(&self, value: &str) -> bool {
        match self {
            ParamKind::Int => match value.strip_prefix('-') {
                // i64::MIN has one more unit of magnitude than i64::MAX.
                Some(digits) => parse_digits(digits).is_some_and(|n| n <= i64::MAX as u64 + 1),
                None => parse_digits(value).is_some_and(|n| n <= i64::MAX as u64),
            },
            ParamKind::Uint => parse_digits(value).is_some(),
            ParamKind::Str => !value.is_empty(),
            ParamKind::Uuid => is_uuid(value),
            ParamKind::Path => true,
            ParamKind::Custom(custom) => {
                custom.anchored.is_match(value) && (custom.converts)(value)
            }
        }
    }

    /// Priority class at one node: lower is tried first.
    ///
    /// Constrained types (int, uint, uuid, user types, mixed segments) come
    /// before `string`, which accepts any segment.
    pub(crate) fn class(&self) -> u8 {
        match self {
            ParamKind::Str => 1,
            ParamKind::Path => 2,
            _ => 0,
        }
    }

    pub(crate) fn same(&self, other: &ParamKind) -> bool {
        match (self, other) {
            (ParamKind::Custom(a), ParamKind::Custom(b)) => Arc::ptr_eq(a, b),
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl fmt::Debug for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses ASCII decimal digits (no sign) into a `u64`, refusing overflow.
#[inline]
fn parse_digits(value: &str) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.bytes().try_fold(0u64, |n, b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn is_uuid(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(idx, b)| match idx {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// The parameter types known to a router: the five built-ins plus the ones
/// registered by the application.
#[derive(Clone, Default)]
pub(crate) struct TypeRegistry {
    custom: Vec<Arc<CustomType>>,
}

impl TypeRegistry {
    pub(crate) fn lookup(&self, name: &str) -> Option<ParamKind> {
        let builtin = match name {
            "int" => ParamKind::Int,
            "uint" => ParamKind::Uint,
            "string" => ParamKind::Str,
            "uuid" => ParamKind::Uuid,
            "path" => ParamKind::Path,
            _ => {
                let custom = self.custom.iter().rev().find(|c| &*c.name == name)?;
                return Some(ParamKind::Custom(custom.clone()));
            }
        };
        Some(builtin)
    }

    pub(crate) fn register<T: FromStr>(
        &mut self,
        name: &str,
        pattern: &str,
    ) -> Result<(), RuleError> {
        if !super::rule::is_identifier(name) || self.lookup(name).is_some() {
            return Err(RuleError::new(
                name,
                "type name is invalid or already registered",
            ));
        }
        let anchored = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|_| RuleError::new(pattern, "invalid type pattern"))?;
        self.custom.push(Arc::new(CustomType {
            name: name.into(),
            pattern: pattern.into(),
            anchored,
            converts: Box::new(|value| T::from_str(value).is_ok()),
        }));
        Ok(())
    }

    pub(crate) fn merge(&mut self, other: &TypeRegistry) {
        for custom in &other.custom {
            if !self.custom.iter().any(|c| Arc::ptr_eq(c, custom)) {
                self.custom.push(custom.clone());
            }
        }
    }
}
