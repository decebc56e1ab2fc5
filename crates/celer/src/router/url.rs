//! Reverse routing: building a URL from a rule and parameter values.

use std::fmt::{self, Write as _};

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::rule::{Piece, Rule, Segment, Tail};
use super::types::ParamKind;

/// Characters escaped in a segment value: everything that is not allowed in
/// a path segment (RFC 3986 §3.3), plus `%` and `/`.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Characters escaped in a `<path:...>` value: as for a segment, but `/` is
/// kept.
const PATH: &AsciiSet = &SEGMENT.remove(b'/');

/// Why [`App::url_for`](crate::App::url_for) could not build a URL.
///
/// ```
/// let mut app = celer::App::new();
/// app.get("/users/<int:id>", |_req: celer::Request| async { "user" }).name("user");
/// let err = app.url_for("user", &[("id", &"abc")]).unwrap_err();
/// assert!(err.is_invalid_param());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError {
    kind: UrlErrorKind,
    detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UrlErrorKind {
    UnknownRoute,
    MissingParam,
    InvalidParam,
    UnexpectedParam,
    NotReversible,
}

// ===== impl UrlError =====

impl UrlError {
    pub(crate) fn new_unknown_route(name: &str) -> Self {
        UrlError::new(UrlErrorKind::UnknownRoute, name)
    }

    fn new(kind: UrlErrorKind, detail: &str) -> Self {
        UrlError {
            kind,
            detail: detail.to_owned(),
        }
    }

    /// No route has this name.
    pub fn is_unknown_route(&self) -> bool {
        self.kind == UrlErrorKind::UnknownRoute
    }

    /// A parameter of the rule was not given.
    pub fn is_missing_param(&self) -> bool {
        self.kind == UrlErrorKind::MissingParam
    }

    /// A value does not match the type of its parameter.
    pub fn is_invalid_param(&self) -> bool {
        self.kind == UrlErrorKind::InvalidParam
    }

    /// A parameter was given that the rule does not have.
    pub fn is_unexpected_param(&self) -> bool {
        self.kind == UrlErrorKind::UnexpectedParam
    }

    /// The route is a regex route, which cannot be reversed.
    pub fn is_not_reversible(&self) -> bool {
        self.kind == UrlErrorKind::NotReversible
    }
}

impl fmt::Display for UrlError {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            UrlErrorKind::UnknownRoute => "no route named",
            UrlErrorKind::MissingParam => "missing parameter",
            UrlErrorKind::InvalidParam => "ill-typed value for parameter",
            UrlErrorKind::UnexpectedParam => "unexpected parameter",
            UrlErrorKind::NotReversible => "regex routes cannot be reversed:",
        };
        write!(f, "{what} {}", self.detail)
    }
}

impl std::error::Error for UrlError {}

/// Parameter values for reverse routing: name and value pairs.
pub type UrlParams<'a> = [(&'a str, &'a dyn fmt::Display)];

impl Rule {
    /// Builds the path of this rule with `params`, percent-encoding values.
    ///
    /// Every parameter must be given, each value must be of its parameter's
    /// type, and no other parameter may be given.
    ///
    /// ```
    /// let router = celer::router::Router::<()>::new();
    /// let rule = router.parse("/users/<int:id>/posts/<slug>").unwrap();
    /// let url = rule.url(&[("id", &7), ("slug", &"hello world")]).unwrap();
    /// assert_eq!(url, "/users/7/posts/hello%20world");
    /// ```
    pub fn url(&self, params: &UrlParams<'_>) -> Result<String, UrlError> {
        if matches!(self.tail, Some(Tail::Regex(_))) {
            return Err(UrlError::new(UrlErrorKind::NotReversible, self.as_str()));
        }
        if let Some((name, _)) = params.iter().find(|(n, _)| self.kind_of(n).is_none()) {
            return Err(UrlError::new(UrlErrorKind::UnexpectedParam, name));
        }
        let mut url = String::with_capacity(self.as_str().len() + 16);
        let mut value = String::new();
        for segment in &self.segments {
            url.push('/');
            match segment {
                Segment::Static(literal) => url.push_str(literal),
                Segment::Param { name, kind } => {
                    push_value(&mut url, &mut value, params, name, kind)?;
                }
                Segment::Mixed(mixed) => {
                    let start = url.len();
                    for piece in &mixed.pieces {
                        match piece {
                            Piece::Literal(literal) => url.push_str(literal),
                            Piece::Param { name, kind } => {
                                push_value(&mut url, &mut value, params, name, kind)?;
                            }
                        }
                    }
                    // A mixed segment can be ambiguous (`<a>.<b>` with a
                    // dot in `a`): check that it parses back the same.
                    if !mixed_round_trips(&url[start..], mixed, params) {
                        return Err(UrlError::new(UrlErrorKind::InvalidParam, &mixed.source));
                    }
                }
            }
        }
        if let Some(Tail::Path { name }) = &self.tail {
            url.push('/');
            push_value(&mut url, &mut value, params, name, &ParamKind::Path)?;
        }
        if url.is_empty() {
            url.push('/');
        }
        Ok(url)
    }
}

fn push_value(
    url: &mut String,
    scratch: &mut String,
    params: &UrlParams<'_>,
    name: &str,
    kind: &ParamKind,
) -> Result<(), UrlError> {
    let (_, display) = params
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| UrlError::new(UrlErrorKind::MissingParam, name))?;
    scratch.clear();
    // Writing into a String cannot fail.
    let _ = write!(scratch, "{display}");
    if !kind.accepts(scratch) {
        return Err(UrlError::new(UrlErrorKind::InvalidParam, name));
    }
    let set = if let ParamKind::Path = kind {
        PATH
    } else {
        SEGMENT
    };
    url.extend(utf8_percent_encode(scratch, set));
    Ok(())
}

fn mixed_round_trips(segment: &str, mixed: &super::rule::Mixed, params: &UrlParams<'_>) -> bool {
    let Some(captures) = mixed.regex.captures(segment) else {
        return false;
    };
    let names = mixed.pieces.iter().filter_map(|piece| match piece {
        Piece::Param { name, .. } => Some(name),
        Piece::Literal(_) => None,
    });
    names.enumerate().all(|(idx, name)| {
        let expected = params
            .iter()
            .find(|(n, _)| *n == &**name)
            .map(|(_, v)| v.to_string());
        let got = captures
            .get(idx + 1)
            .map(|m| super::tree::decode(m.as_str()).into_owned());
        expected.is_some() && expected == got
    })
}
