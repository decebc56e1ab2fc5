//! Rules: the parsed form of `/users/<int:id>/posts/<slug>` and of regex routes.
//!
//! Grammar (one rule is empty or starts with `/`):
//!
//! ```text
//! rule    = *( "/" segment )
//! segment = *( literal | param )
//! param   = "<" [ type ":" ] name ">"        ; type defaults to `string`
//! ```
//!
//! A segment that is one `param` is a typed segment; a segment mixing
//! literals and params (`<name>.<ext>`, `v<int:n>`) is matched with a regex
//! built from the parameter types. `<path:name>` takes the rest of the path
//! and must be the last segment.

use std::fmt;
use std::sync::Arc;

use regex::Regex;

use super::types::{ParamKind, TypeRegistry};
use super::{MAX_PARAMS, RuleError};

/// A parsed, typed rule, ready to be inserted in a [`Router`](super::Router).
///
/// ```
/// let router = celer::router::Router::<()>::new();
/// let rule = router.parse("/users/<int:id>/posts/<slug>").unwrap();
/// assert_eq!(rule.param_names().collect::<Vec<_>>(), ["id", "slug"]);
/// assert_eq!(rule.to_string(), "/users/<int:id>/posts/<slug>");
/// ```
#[derive(Clone)]
pub struct Rule {
    source: Box<str>,
    pub(crate) segments: Vec<Segment>,
    pub(crate) tail: Option<Tail>,
    pub(crate) names: Arc<[Box<str>]>,
}

#[derive(Clone)]
pub(crate) enum Segment {
    Static(Box<str>),
    Param { name: Box<str>, kind: ParamKind },
    Mixed(Arc<Mixed>),
}

/// A segment mixing literals and parameters, matched by a regex.
pub(crate) struct Mixed {
    pub(crate) source: Box<str>,
    pub(crate) regex: Regex,
    pub(crate) pieces: Vec<Piece>,
}

pub(crate) enum Piece {
    Literal(Box<str>),
    Param { name: Box<str>, kind: ParamKind },
}

#[derive(Clone)]
pub(crate) enum Tail {
    /// `<path:name>`: the rest of the path.
    Path { name: Box<str> },
    /// A regex matched against the rest of the path, leading `/` included.
    Regex(Arc<Regex>),
}

// ===== impl Rule =====

impl Rule {
    pub(crate) fn parse(source: &str, types: &TypeRegistry) -> Result<Rule, RuleError> {
        if !(source.is_empty() || source.starts_with('/')) {
            return Err(RuleError::new(
                source,
                "a rule must be empty or start with '/'",
            ));
        }
        let mut rule = Rule::empty(source);
        let mut names = Vec::new();
        for part in source.split('/').skip(1) {
            if rule.tail.is_some() {
                return Err(RuleError::new(
                    source,
                    "<path:...> must be the last segment",
                ));
            }
            let pieces = parse_segment(source, part, types)?;
            let segment = into_segment(source, pieces, &mut names, &mut rule.tail)?;
            rule.segments.extend(segment);
        }
        rule.finish(names)
    }

    pub(crate) fn regex(source: &str) -> Result<Rule, RuleError> {
        let regex = Regex::new(&format!(r"\A(?:{source})\z"))
            .map_err(|_| RuleError::new(source, "invalid regular expression"))?;
        let names = regex.capture_names().flatten().map(Box::from).collect();
        let mut rule = Rule::empty(source);
        rule.tail = Some(Tail::Regex(Arc::new(regex)));
        rule.finish(names)
    }

    fn empty(source: &str) -> Rule {
        Rule {
            source: source.into(),
            segments: Vec::new(),
            tail: None,
            names: Arc::from(Vec::new()),
        }
    }

    fn finish(mut self, names: Vec<Box<str>>) -> Result<Rule, RuleError> {
        if names.len() > MAX_PARAMS {
            return Err(RuleError::new(&self.source, "too many parameters"));
        }
        for (idx, name) in names.iter().enumerate() {
            if names[..idx].contains(name) {
                return Err(RuleError::new(&self.source, "duplicate parameter name"));
            }
        }
        self.names = names.into();
        Ok(self)
    }

    /// Prefixes this rule with `prefix` (a scope or a mount point).
    pub(crate) fn prefixed(&self, prefix: &Rule) -> Result<Rule, RuleError> {
        if prefix.tail.is_some() {
            return Err(RuleError::new(
                &prefix.source,
                "a prefix cannot end with a catch-all",
            ));
        }
        let source = format!("{}{}", prefix.source, self.source);
        let mut rule = Rule::empty(&source);
        rule.segments = prefix
            .segments
            .iter()
            .chain(&self.segments)
            .cloned()
            .collect();
        rule.tail = self.tail.clone();
        let names = prefix
            .names
            .iter()
            .chain(self.names.iter())
            .cloned()
            .collect();
        rule.finish(names)
    }

    /// The source text of the rule.
    ///
    /// ```
    /// let router = celer::router::Router::<()>::new();
    /// assert_eq!(router.parse("/a/<b>").unwrap().as_str(), "/a/<b>");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The names of the rule's parameters, in order.
    ///
    /// ```
    /// let router = celer::router::Router::<()>::new();
    /// let rule = router.parse("/files/<path:rest>").unwrap();
    /// assert_eq!(rule.param_names().collect::<Vec<_>>(), ["rest"]);
    /// ```
    pub fn param_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.names.iter().map(|name| &**name)
    }

    /// The type of a parameter, by name.
    pub(crate) fn kind_of(&self, name: &str) -> Option<&ParamKind> {
        self.segments
            .iter()
            .find_map(|segment| match segment {
                Segment::Param { name: n, kind } if &**n == name => Some(kind),
                Segment::Mixed(mixed) => mixed.pieces.iter().find_map(|piece| match piece {
                    Piece::Param { name: n, kind } if &**n == name => Some(kind),
                    _ => None,
                }),
                _ => None,
            })
            .or(match &self.tail {
                Some(Tail::Path { name: n }) if &**n == name => Some(&ParamKind::Path),
                _ => None,
            })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Rule").field(&self.source).finish()
    }
}

/// Refuses the parameter syntaxes of other routers, which would otherwise
/// be taken as literal text and never match what their author meant:
/// `{id}` and `{*rest}` (axum, matchit), `:id` and `*rest` (Express,
/// Rails).
fn foreign_syntax(rule: &str, part: &str) -> Result<(), RuleError> {
    if let Some(open) = part.find('{') {
        let inner = part[open + 1..].split('}').next().unwrap_or("");
        let suggestion = match inner.strip_prefix('*') {
            Some(rest) => format!("<path:{rest}>"),
            None => format!("<{inner}>"),
        };
        return Err(RuleError::new(
            rule,
            format!(
                "`{{{inner}}}` is not a parameter here: Celer's rules write parameters \
                 as `<name>` or `<type:name>`; write `{suggestion}` (or a typed \
                 `<int:{name}>`, `<uint:{name}>`)",
                name = inner.trim_start_matches('*'),
            ),
        ));
    }
    if part.contains('}') {
        return Err(RuleError::new(
            rule,
            "unexpected '}': parameters are written `<name>` or `<type:name>`",
        ));
    }
    for (sigil, kind) in [(':', ""), ('*', "path:")] {
        if let Some(name) = part.strip_prefix(sigil) {
            if is_identifier(name) {
                return Err(RuleError::new(
                    rule,
                    format!(
                        "`{part}` is not a parameter here: Celer's rules write parameters \
                         as `<name>` or `<type:name>`; write `<{kind}{name}>`"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn parse_segment(rule: &str, part: &str, types: &TypeRegistry) -> Result<Vec<Piece>, RuleError> {
    foreign_syntax(rule, part)?;
    let mut pieces = Vec::new();
    let mut rest = part;
    while !rest.is_empty() {
        let Some(open) = rest.find('<') else {
            pieces.push(Piece::Literal(rest.into()));
            break;
        };
        if open > 0 {
            pieces.push(Piece::Literal(rest[..open].into()));
        }
        let close = rest[open..].find('>').ok_or_else(|| {
            RuleError::new(
                rule,
                format!(
                    "unclosed '<' in segment {part:?}: close the parameter with '>', \
                         as in `<name>` or `<int:name>`"
                ),
            )
        })?;
        let inner = &rest[open + 1..open + close];
        let (type_name, name) = inner.split_once(':').unwrap_or(("string", inner));
        if !is_identifier(name) {
            return Err(RuleError::new(
                rule,
                format!(
                    "invalid parameter name {name:?} in `<{inner}>`: a name is letters, \
                     digits and '_', not starting with a digit"
                ),
            ));
        }
        let kind = types.lookup(type_name).ok_or_else(|| {
            RuleError::new(
                rule,
                format!(
                    "unknown parameter type {type_name:?} in `<{inner}>`: the types are \
                         int, uint, string, uuid, path and those added with register_type"
                ),
            )
        })?;
        pieces.push(Piece::Param {
            name: name.into(),
            kind,
        });
        rest = &rest[open + close + 1..];
    }
    if pieces
        .iter()
        .any(|p| matches!(p, Piece::Literal(l) if l.contains('>')))
    {
        return Err(RuleError::new(
            rule,
            "unexpected '>' without its '<': parameters are written `<name>` or `<type:name>`",
        ));
    }
    Ok(pieces)
}

fn into_segment(
    rule: &str,
    mut pieces: Vec<Piece>,
    names: &mut Vec<Box<str>>,
    tail: &mut Option<Tail>,
) -> Result<Option<Segment>, RuleError> {
    if pieces.len() == 1 {
        match pieces.pop() {
            Some(Piece::Param { name, kind }) => {
                names.push(name.clone());
                if let ParamKind::Path = kind {
                    *tail = Some(Tail::Path { name });
                    return Ok(None);
                }
                return Ok(Some(Segment::Param { name, kind }));
            }
            Some(Piece::Literal(literal)) => return Ok(Some(Segment::Static(literal))),
            None => {}
        }
    }
    if pieces.is_empty() {
        return Ok(Some(Segment::Static("".into())));
    }
    let mut pattern = String::from("^");
    for piece in &pieces {
        match piece {
            Piece::Literal(literal) => pattern.push_str(&regex::escape(literal)),
            Piece::Param {
                kind: ParamKind::Path,
                ..
            } => {
                return Err(RuleError::new(rule, "<path:...> must be a whole segment"));
            }
            Piece::Param { name, kind } => {
                names.push(name.clone());
                pattern.push_str(&format!("({})", wrap_groups(kind.pattern())));
            }
        }
    }
    pattern.push('$');
    let regex = Regex::new(&pattern).map_err(|_| RuleError::new(rule, "invalid segment"))?;
    let source = pieces.iter().map(piece_source).collect::<String>().into();
    Ok(Some(Segment::Mixed(Arc::new(Mixed {
        source,
        regex,
        pieces,
    }))))
}

/// Turns capturing groups of a type pattern into non-capturing ones, so the
/// regex of a mixed segment has exactly one group per parameter.
fn wrap_groups(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut escaped = false;
    while let Some(c) = chars.next() {
        out.push(c);
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '(' && chars.peek() != Some(&'?') {
            out.push_str("?:");
        } else if c == '(' && chars.peek() == Some(&'?') {
            // A named group `(?P<n>...)` or `(?<n>...)` becomes non-capturing.
            let ahead: String = chars.clone().take(3).collect();
            if ahead.starts_with("?P<")
                || (ahead.starts_with("?<")
                    && !ahead.starts_with("?<=")
                    && !ahead.starts_with("?<!"))
            {
                out.push_str("?:");
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                }
            }
        }
    }
    out
}

fn piece_source(piece: &Piece) -> String {
    match piece {
        Piece::Literal(literal) => literal.to_string(),
        Piece::Param { name, kind } => format!("<{}:{name}>", kind.name()),
    }
}

pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
