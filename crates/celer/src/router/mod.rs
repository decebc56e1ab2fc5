//! The router: typed rules, a lookup tree and reverse routing.
//!
//! [`Router`] maps paths to values; [`App`](crate::App) uses it with route
//! ids and adds methods, handlers and names on top. It is public so it can be
//! used and measured on its own.
//!
//! # Rules
//!
//! A rule is a path with typed parameters, in Valum's syntax:
//! `/users/<int:id>/posts/<slug>`. The built-in types are:
//!
//! | type     | matches                                         |
//! |----------|-------------------------------------------------|
//! | `int`    | an optional `-` and digits that fit an `i64`    |
//! | `uint`   | digits that fit a `u64`                         |
//! | `string` | one non-empty segment (the default type)        |
//! | `path`   | the rest of the path, `/` included; last only   |
//! | `uuid`   | `8-4-4-4-12` hexadecimal digits                 |
//!
//! More types are added with [`Router::register_type`] (or
//! [`App::register_type`](crate::App::register_type)): a regular
//! expression for one segment plus a Rust type whose `FromStr` must accept
//! the value. A parameter can also sit inside a segment: `/<name>.<ext>`.
//! Regex routes ([`Router::parse_regex`]) match the rest of the path with a
//! regular expression whose named groups are the parameters.
//!
//! # Priority
//!
//! At each segment, children are tried in this order, backtracking when a
//! branch has no match further down:
//!
//! 1. static segments (`/users/new`),
//! 2. constrained typed segments: `int`, `uint`, `uuid`, user types and
//!    mixed segments, in registration order,
//! 3. `string` segments,
//! 4. catch-alls: `<path:...>` and regex routes, in registration order.
//!
//! Several values on the same rule are kept in registration order.
//!
//! ```
//! use celer::router::Router;
//!
//! let mut router = Router::new();
//! router.insert("/users/new", "new").unwrap();
//! router.insert("/users/<int:id>", "by id").unwrap();
//! router.insert("/users/<name>", "by name").unwrap();
//! router.insert("/users/<path:rest>", "catch-all").unwrap();
//!
//! assert_eq!(*router.at("/users/new").unwrap().value(), "new");
//! let m = router.at("/users/42").unwrap();
//! assert_eq!((*m.value(), m.params().get("id")), ("by id", Some("42")));
//! assert_eq!(*router.at("/users/bob").unwrap().value(), "by name");
//! assert_eq!(*router.at("/users/a/b").unwrap().value(), "catch-all");
//! ```

mod exact;
mod method;
mod rule;
mod tree;
mod types;
mod url;

use std::fmt;
use std::ops::ControlFlow;
use std::str::FromStr;

pub use self::method::MethodSet;
pub use self::rule::Rule;
pub use self::url::{UrlError, UrlParams};

pub(crate) use self::exact::ExactIndex;
pub(crate) use self::method::{N_STANDARD, standard_index, standard_method};
#[cfg(feature = "openapi")]
pub(crate) use self::rule::{Piece, Segment, Tail};
use self::tree::Node;
pub(crate) use self::tree::{RawParams, decode};
pub(crate) use self::types::ParamKind;
pub(crate) use self::types::TypeRegistry;

/// The most parameters one rule can have.
pub const MAX_PARAMS: usize = 16;

/// The longest path, in bytes, that the router matches; longer paths match
/// no rule (servers refuse such request targets long before this).
pub const MAX_PATH: usize = u16::MAX as usize;

/// Maps request paths to values through typed rules.
///
/// ```
/// let mut router = celer::router::Router::new();
/// router.insert("/files/<path:file>", 1).unwrap();
/// let m = router.at("/files/a/b.txt").unwrap();
/// assert_eq!(m.params().get("file"), Some("a/b.txt"));
/// ```
#[derive(Clone)]
pub struct Router<T> {
    root: Node<T>,
    types: TypeRegistry,
    len: usize,
}

/// A value found by [`Router::at`], with its parameters.
pub struct Match<'r, 'p, T> {
    value: &'r T,
    params: Params<'r, 'p>,
}

/// The parameters of a match, as raw (still percent-encoded) slices of the
/// path.
#[derive(Clone, Copy)]
pub struct Params<'r, 'p> {
    names: &'r [Box<str>],
    path: &'p str,
    raw: RawParams,
}

/// An invalid rule, regex or type registration.
///
/// ```
/// let router = celer::router::Router::<()>::new();
/// assert!(router.parse("/a/<nope:x>").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    rule: String,
    reason: std::borrow::Cow<'static, str>,
}

// ===== impl Router =====

impl<T> Router<T> {
    /// Creates an empty router with the built-in parameter types.
    ///
    /// ```
    /// let router = celer::router::Router::<u32>::new();
    /// assert!(router.at("/").is_none());
    /// ```
    pub fn new() -> Self {
        Router {
            root: Node::default(),
            types: TypeRegistry::default(),
            len: 0,
        }
    }

    /// Registers a parameter type: `pattern` is a regular expression for
    /// one segment, and `P::from_str` must accept the value as well.
    ///
    /// Register a type before the rules that use it.
    ///
    /// ```
    /// use std::str::FromStr;
    /// struct Hex(u32);
    /// impl FromStr for Hex {
    ///     type Err = std::num::ParseIntError;
    ///     fn from_str(s: &str) -> Result<Self, Self::Err> { u32::from_str_radix(s, 16).map(Hex) }
    /// }
    ///
    /// let mut router = celer::router::Router::new();
    /// router.register_type::<Hex>("hex", "[0-9a-f]+").unwrap();
    /// router.insert("/color/<hex:rgb>", ()).unwrap();
    /// assert!(router.at("/color/ff00aa").is_some());
    /// assert!(router.at("/color/zz").is_none());
    /// ```
    pub fn register_type<P: FromStr + 'static>(
        &mut self,
        name: &str,
        pattern: &str,
    ) -> Result<(), RuleError> {
        self.types.register::<P>(name, pattern)
    }

    /// Parses a rule with this router's types.
    ///
    /// ```
    /// let router = celer::router::Router::<()>::new();
    /// assert!(router.parse("/a/<int:id>").is_ok());
    /// assert!(router.parse("/a/<path:p>/b").is_err());
    /// ```
    pub fn parse(&self, rule: &str) -> Result<Rule, RuleError> {
        Rule::parse(rule, &self.types)
    }

    /// Parses a regex route: the regex must match the whole path (the rest
    /// of the path under a scope), and its named groups are the parameters.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// let rule = router.parse_regex(r"/v(?P<major>\d+)\.(?P<minor>\d+)").unwrap();
    /// router.insert_rule(&rule, ());
    /// let m = router.at("/v1.2").unwrap();
    /// assert_eq!(m.params().get("minor"), Some("2"));
    /// ```
    pub fn parse_regex(&self, regex: &str) -> Result<Rule, RuleError> {
        Rule::regex(regex)
    }

    /// Parses `rule` and inserts `value` under it.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// router.insert("/", "root").unwrap();
    /// assert_eq!(*router.at("/").unwrap().value(), "root");
    /// ```
    pub fn insert(&mut self, rule: &str, value: T) -> Result<(), RuleError> {
        let rule = self.parse(rule)?;
        self.insert_rule(&rule, value);
        Ok(())
    }

    /// Inserts `value` under an already parsed rule.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// let rule = router.parse("/a").unwrap();
    /// router.insert_rule(&rule, 1);
    /// assert_eq!(router.len(), 1);
    /// ```
    pub fn insert_rule(&mut self, rule: &Rule, value: T) {
        self.root.insert(rule, value);
        self.len += 1;
    }

    /// The number of values inserted.
    ///
    /// ```
    /// assert_eq!(celer::router::Router::<()>::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no value was inserted.
    ///
    /// ```
    /// assert!(celer::router::Router::<()>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Finds the first value, in priority order, whose rule matches `path`.
    ///
    /// Does not allocate.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// router.insert("/a/<int:n>", 1).unwrap();
    /// assert!(router.at("/a/x").is_none());
    /// ```
    pub fn at<'r, 'p>(&'r self, path: &'p str) -> Option<Match<'r, 'p, T>> {
        self.find(path, |_| true)
    }

    /// Finds the first value that matches `path` and satisfies `accept`.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// router.insert("/a", 1).unwrap();
    /// router.insert("/a", 2).unwrap();
    /// assert_eq!(*router.find("/a", |v| *v == 2).unwrap().value(), 2);
    /// ```
    pub fn find<'r, 'p>(
        &'r self,
        path: &'p str,
        mut accept: impl FnMut(&T) -> bool,
    ) -> Option<Match<'r, 'p, T>> {
        let mut found = None;
        let mut raw = RawParams::EMPTY;
        let _ = self.root.walk(path, &mut raw, &mut |leaf, _| {
            if !accept(&leaf.value) {
                return ControlFlow::Continue(());
            }
            found = Some(leaf);
            ControlFlow::Break(())
        });
        found.map(|leaf| Match {
            value: &leaf.value,
            params: Params {
                names: &leaf.names,
                path,
                raw,
            },
        })
    }

    /// Calls `visit` on every match of `path`, in priority order, until it
    /// returns `ControlFlow::Break`.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// let mut router = celer::router::Router::new();
    /// router.insert("/a/<x>", 1).unwrap();
    /// router.insert("/a/<path:p>", 2).unwrap();
    /// let mut all = Vec::new();
    /// router.for_each_match("/a/b", |m| { all.push(*m.value()); ControlFlow::Continue(()) });
    /// assert_eq!(all, [1, 2]);
    /// ```
    pub fn for_each_match<'r, 'p>(
        &'r self,
        path: &'p str,
        mut visit: impl FnMut(Match<'r, 'p, T>) -> ControlFlow<()>,
    ) {
        let mut raw_params = RawParams::EMPTY;
        let _ = self.root.walk(path, &mut raw_params, &mut |leaf, raw| {
            visit(Match {
                value: &leaf.value,
                params: Params {
                    names: &leaf.names,
                    path,
                    raw: *raw,
                },
            })
        });
    }

    pub(crate) fn types(&self) -> &TypeRegistry {
        &self.types
    }

    pub(crate) fn merge_types(&mut self, other: &TypeRegistry) {
        self.types.merge(other);
    }
}

impl<T> Default for Router<T> {
    fn default() -> Self {
        Router::new()
    }
}

impl<T> fmt::Debug for Router<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router").field("len", &self.len).finish()
    }
}

// ===== impl Match =====

impl<'r, 'p, T> Match<'r, 'p, T> {
    /// The value inserted under the matching rule.
    pub fn value(&self) -> &'r T {
        self.value
    }

    /// The parameters of the matching rule.
    pub fn params(&self) -> Params<'r, 'p> {
        self.params
    }

    pub(crate) fn into_raw(self) -> (&'r T, RawParams) {
        (self.value, self.params.raw)
    }
}

impl<T: fmt::Debug> fmt::Debug for Match<'_, '_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Match")
            .field("value", self.value)
            .field("params", &self.params)
            .finish()
    }
}

// ===== impl Params =====

impl<'r, 'p> Params<'r, 'p> {
    /// The raw value of a parameter, by name.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// router.insert("/<a>/<b>", ()).unwrap();
    /// let m = router.at("/x%20y/z").unwrap();
    /// assert_eq!(m.params().get("a"), Some("x%20y"));
    /// ```
    pub fn get(&self, name: &str) -> Option<&'p str> {
        let idx = self.names.iter().position(|n| &**n == name)?;
        let (start, end) = self.raw.range(idx)?;
        self.path.get(start..end)
    }

    /// The number of parameters.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.raw.len() == 0
    }

    /// The parameters as `(name, raw value)` pairs, in rule order.
    ///
    /// ```
    /// let mut router = celer::router::Router::new();
    /// router.insert("/<a>/<int:b>", ()).unwrap();
    /// let m = router.at("/x/1").unwrap();
    /// assert_eq!(m.params().iter().collect::<Vec<_>>(), [("a", "x"), ("b", "1")]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&'r str, &'p str)> + '_ {
        let path = self.path;
        (0..self.raw.len()).filter_map(move |idx| {
            let (start, end) = self.raw.range(idx)?;
            Some((&*self.names[idx], path.get(start..end)?))
        })
    }
}

impl fmt::Debug for Params<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

// ===== impl RuleError =====

impl RuleError {
    pub(crate) fn new(rule: &str, reason: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        RuleError {
            rule: rule.to_owned(),
            reason: reason.into(),
        }
    }

    /// What is wrong with the rule, with a suggestion when there is one.
    ///
    /// ```
    /// let router = celer::router::Router::<()>::new();
    /// let err = router.parse("/notes/{id}").unwrap_err();
    /// assert!(err.reason().contains("<id>"));
    /// ```
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for RuleError {
    /// The wording is not part of the API.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid rule {:?}: {}", self.rule, self.reason)
    }
}

impl std::error::Error for RuleError {}
