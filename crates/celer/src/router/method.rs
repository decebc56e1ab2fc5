//! Method sets: which HTTP methods a route answers.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

use http::Method;

/// A set of HTTP methods, for example `MethodSet::GET | MethodSet::POST`.
///
/// The nine standard methods of RFC 9110 and PATCH (RFC 5789) are bits;
/// extension methods (`PURGE`, `PROPFIND`, ...) are listed by name, and
/// [`MethodSet::ANY`] accepts every method, extension methods included.
///
/// ```
/// use celer::MethodSet;
/// use http::Method;
///
/// let set = MethodSet::GET | MethodSet::POST;
/// assert!(set.contains(&Method::POST));
/// assert!(!set.contains(&Method::PUT));
/// let purge = MethodSet::from(Method::from_bytes(b"PURGE").unwrap());
/// assert!(purge.contains(&Method::from_bytes(b"PURGE").unwrap()));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MethodSet {
    bits: u16,
    extensions: Vec<Method>,
}

const STANDARD: [(u16, Method); 9] = [
    (1 << 0, Method::GET),
    (1 << 1, Method::HEAD),
    (1 << 2, Method::POST),
    (1 << 3, Method::PUT),
    (1 << 4, Method::DELETE),
    (1 << 5, Method::CONNECT),
    (1 << 6, Method::OPTIONS),
    (1 << 7, Method::TRACE),
    (1 << 8, Method::PATCH),
];

const ANY_BIT: u16 = 1 << 15;

// ===== impl MethodSet =====

impl MethodSet {
    /// No method at all.
    pub const NONE: MethodSet = MethodSet::bits(0);
    /// `GET`.
    pub const GET: MethodSet = MethodSet::bits(1 << 0);
    /// `HEAD`.
    pub const HEAD: MethodSet = MethodSet::bits(1 << 1);
    /// `POST`.
    pub const POST: MethodSet = MethodSet::bits(1 << 2);
    /// `PUT`.
    pub const PUT: MethodSet = MethodSet::bits(1 << 3);
    /// `DELETE`.
    pub const DELETE: MethodSet = MethodSet::bits(1 << 4);
    /// `CONNECT`.
    pub const CONNECT: MethodSet = MethodSet::bits(1 << 5);
    /// `OPTIONS`.
    pub const OPTIONS: MethodSet = MethodSet::bits(1 << 6);
    /// `TRACE`.
    pub const TRACE: MethodSet = MethodSet::bits(1 << 7);
    /// `PATCH`.
    pub const PATCH: MethodSet = MethodSet::bits(1 << 8);
    /// All standard methods (not extension methods).
    pub const ALL: MethodSet = MethodSet::bits(0x1ff);
    /// Every method, extension methods included.
    pub const ANY: MethodSet = MethodSet::bits(0x1ff | ANY_BIT);

    const fn bits(bits: u16) -> MethodSet {
        MethodSet {
            bits,
            extensions: Vec::new(),
        }
    }

    /// Whether `method` is in the set.
    ///
    /// ```
    /// assert!(celer::MethodSet::ANY.contains(&http::Method::DELETE));
    /// ```
    #[inline]
    pub fn contains(&self, method: &Method) -> bool {
        if self.bits & ANY_BIT != 0 {
            return true;
        }
        match standard_bit(method) {
            Some(bit) => self.bits & bit != 0,
            None => self.extensions.contains(method),
        }
    }

    /// Whether the set is empty.
    ///
    /// ```
    /// assert!(celer::MethodSet::NONE.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.bits == 0 && self.extensions.is_empty()
    }

    /// Whether the set accepts every method.
    ///
    /// ```
    /// assert!(celer::MethodSet::ANY.is_any());
    /// assert!(!celer::MethodSet::ALL.is_any());
    /// ```
    pub fn is_any(&self) -> bool {
        self.bits & ANY_BIT != 0
    }

    /// The methods of the set in the canonical order used for `Allow`:
    /// standard methods first, then extension methods in insertion order.
    ///
    /// ```
    /// use celer::MethodSet;
    /// let set = MethodSet::POST | MethodSet::GET;
    /// assert_eq!(set.iter().map(|m| m.as_str()).collect::<Vec<_>>(), ["GET", "POST"]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = &Method> + '_ {
        STANDARD
            .iter()
            .filter(|(bit, _)| self.bits & bit != 0)
            .map(|(_, method)| method)
            .chain(self.extensions.iter())
    }

    /// Formats the set as an `Allow` header value, e.g. `GET, HEAD, OPTIONS`.
    ///
    /// ```
    /// use celer::MethodSet;
    /// assert_eq!((MethodSet::GET | MethodSet::HEAD).to_allow(), "GET, HEAD");
    /// ```
    pub fn to_allow(&self) -> String {
        let mut allow = String::new();
        for method in self.iter() {
            if !allow.is_empty() {
                allow.push_str(", ");
            }
            allow.push_str(method.as_str());
        }
        allow
    }

    pub(crate) fn insert(&mut self, method: &Method) {
        match standard_bit(method) {
            Some(bit) => self.bits |= bit,
            None if !self.extensions.contains(method) => self.extensions.push(method.clone()),
            None => {}
        }
    }
}

/// How many standard methods a [`MethodSet`] keeps as bits.
pub(crate) const N_STANDARD: usize = STANDARD.len();

/// The index of a standard method (GET is 0), `None` for extension methods.
#[inline]
pub(crate) fn standard_index(method: &Method) -> Option<usize> {
    STANDARD.iter().position(|(_, standard)| standard == method)
}

/// The standard method at `idx`, the inverse of [`standard_index`].
pub(crate) fn standard_method(idx: usize) -> Option<&'static Method> {
    STANDARD.get(idx).map(|(_, method)| method)
}

#[inline]
fn standard_bit(method: &Method) -> Option<u16> {
    STANDARD
        .iter()
        .find(|(_, standard)| standard == method)
        .map(|(bit, _)| *bit)
}

impl From<Method> for MethodSet {
    fn from(method: Method) -> Self {
        let mut set = MethodSet::NONE;
        set.insert(&method);
        set
    }
}

impl BitOr for MethodSet {
    type Output = MethodSet;

    fn bitor(mut self, rhs: MethodSet) -> MethodSet {
        self |= rhs;
        self
    }
}

impl BitOrAssign for MethodSet {
    fn bitor_assign(&mut self, rhs: MethodSet) {
        self.bits |= rhs.bits;
        for method in &rhs.extensions {
            self.insert(method);
        }
    }
}

impl fmt::Debug for MethodSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("MethodSet(ANY)");
        }
        write!(f, "MethodSet({})", self.to_allow())
    }
}
