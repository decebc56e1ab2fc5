//! The lookup tree: one node per path segment, no IO, no allocation on lookup.
//!
//! Each node has three kinds of children, tried in this order (the match
//! priority): static segments (a hash lookup once a node has many), typed
//! segments (constrained types, then `string`), and tails (`<path:...>`
//! catch-alls and regex routes, in registration order). A failed branch
//! backtracks, so `/a/new/edit` still reaches `/a/<string:x>/edit` when a
//! static `/a/new` exists. The cost of a lookup depends on the depth of the
//! path and on the children tried per segment, not on the number of routes.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::Arc;

use percent_encoding::percent_decode_str;

use super::rule::{Mixed, Piece, Rule, Segment, Tail};
use super::types::ParamKind;
use super::{MAX_PARAMS, MAX_PATH};

/// Static children are indexed by a hash map beyond this many.
const LINEAR_STATICS: usize = 8;

#[derive(Clone)]
pub(crate) struct Node<T> {
    statics: Vec<(Box<str>, Node<T>)>,
    static_index: Option<StaticIndex>,
    typed: Vec<(Matcher, Node<T>)>,
    tails: Vec<(Tail, Leaf<T>)>,
    leaves: Vec<Leaf<T>>,
}

/// A value stored at the end of a rule, with the names of its parameters.
#[derive(Clone)]
pub(crate) struct Leaf<T> {
    pub(crate) names: Arc<[Box<str>]>,
    pub(crate) value: T,
}

#[derive(Clone)]
enum Matcher {
    Kind(ParamKind),
    Mixed(Arc<Mixed>),
}

/// Byte ranges of parameter values in the matched path, in rule order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawParams {
    len: u8,
    ranges: [(u16, u16); MAX_PARAMS],
}

// ===== impl RawParams =====

impl RawParams {
    pub(crate) const EMPTY: RawParams = RawParams {
        len: 0,
        ranges: [(0, 0); MAX_PARAMS],
    };

    fn push(&mut self, start: usize, end: usize) -> bool {
        let idx = usize::from(self.len);
        if idx == MAX_PARAMS {
            return false;
        }
        // `walk` refuses paths longer than `MAX_PATH`, so both fit.
        self.ranges[idx] = (start as u16, end as u16);
        self.len += 1;
        true
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub(crate) fn range(&self, idx: usize) -> Option<(usize, usize)> {
        let (start, end) = *self.ranges[..self.len()].get(idx)?;
        Some((start as usize, end as usize))
    }
}

// ===== impl Node =====

impl<T> Default for Node<T> {
    fn default() -> Self {
        Node {
            statics: Vec::new(),
            static_index: None,
            typed: Vec::new(),
            tails: Vec::new(),
            leaves: Vec::new(),
        }
    }
}

impl<T> Node<T> {
    pub(crate) fn insert(&mut self, rule: &Rule, value: T) {
        let mut node = self;
        for segment in &rule.segments {
            node = match segment {
                Segment::Static(literal) => node.static_child(literal),
                Segment::Param { kind, .. } => node.typed_child(Matcher::Kind(kind.clone())),
                Segment::Mixed(mixed) => node.typed_child(Matcher::Mixed(mixed.clone())),
            };
        }
        let leaf = Leaf {
            names: rule.names.clone(),
            value,
        };
        match &rule.tail {
            Some(tail) => node.tails.push((tail.clone(), leaf)),
            None => node.leaves.push(leaf),
        }
    }

    fn static_child(&mut self, literal: &str) -> &mut Node<T> {
        let idx = match self.find_static(literal) {
            Some(idx) => idx,
            None => {
                self.statics.push((literal.into(), Node::default()));
                let idx = self.statics.len() - 1;
                if self.statics.len() > LINEAR_STATICS {
                    self.static_index =
                        Some(StaticIndex::build(self.statics.iter().map(|(k, _)| &**k)));
                }
                idx
            }
        };
        &mut self.statics[idx].1
    }

    fn typed_child(&mut self, matcher: Matcher) -> &mut Node<T> {
        let idx = match self.typed.iter().position(|(m, _)| m.same(&matcher)) {
            Some(idx) => idx,
            None => {
                let class = matcher.class();
                let idx = self.typed.partition_point(|(m, _)| m.class() <= class);
                self.typed.insert(idx, (matcher, Node::default()));
                idx
            }
        };
        &mut self.typed[idx].1
    }

    #[inline]
    fn find_static(&self, segment: &str) -> Option<usize> {
        match &self.static_index {
            Some(index) => index.get(segment, |idx| &*self.statics[idx].0),
            None => self
                .statics
                .iter()
                .position(|(key, _)| same_key(key, segment)),
        }
    }

    /// Visits every leaf whose rule matches `path`, in priority order, until
    /// `visit` breaks. `path` must start with `/`.
    ///
    /// When `visit` breaks, `params` holds the parameters of that match.
    pub(crate) fn walk<'r, F>(
        &'r self,
        path: &str,
        params: &mut RawParams,
        visit: &mut F,
    ) -> ControlFlow<()>
    where
        F: FnMut(&'r Leaf<T>, &RawParams) -> ControlFlow<()>,
    {
        if !path.starts_with('/') || path.len() > MAX_PATH {
            return ControlFlow::Continue(());
        }
        self.walk_from(path, 1, params, visit)
    }

    fn walk_from<'r, F>(
        &'r self,
        path: &str,
        start: usize,
        params: &mut RawParams,
        visit: &mut F,
    ) -> ControlFlow<()>
    where
        F: FnMut(&'r Leaf<T>, &RawParams) -> ControlFlow<()>,
    {
        let bytes = path.as_bytes();
        let slash = bytes[start..].iter().position(|&b| b == b'/');
        let end = slash.map_or(path.len(), |offset| start + offset);
        let segment = &path[start..end];
        let next = slash.map(|_| end + 1);

        if let Some(idx) = self.find_static(segment) {
            self.statics[idx].1.descend(path, next, params, visit)?;
        }
        for (matcher, child) in &self.typed {
            let mark = params.len;
            if matcher.matches(path, start, end, params) {
                child.descend(path, next, params, visit)?;
            }
            params.len = mark;
        }
        self.visit_tails(path, start - 1, params, visit)
    }

    #[inline]
    fn descend<'r, F>(
        &'r self,
        path: &str,
        next: Option<usize>,
        params: &mut RawParams,
        visit: &mut F,
    ) -> ControlFlow<()>
    where
        F: FnMut(&'r Leaf<T>, &RawParams) -> ControlFlow<()>,
    {
        match next {
            Some(start) => self.walk_from(path, start, params, visit),
            None => {
                for leaf in &self.leaves {
                    visit(leaf, params)?;
                }
                self.visit_tails(path, path.len(), params, visit)
            }
        }
    }

    /// Tries the tails of this node on `path[rest..]`, which is empty or
    /// starts with the `/` before the current segment.
    fn visit_tails<'r, F>(
        &'r self,
        path: &str,
        rest: usize,
        params: &mut RawParams,
        visit: &mut F,
    ) -> ControlFlow<()>
    where
        F: FnMut(&'r Leaf<T>, &RawParams) -> ControlFlow<()>,
    {
        for (tail, leaf) in &self.tails {
            let mark = params.len;
            let matched = match tail {
                Tail::Path { .. } => rest < path.len() && params.push(rest + 1, path.len()),
                Tail::Regex(regex) => match regex.captures(&path[rest..]) {
                    Some(captures) => regex
                        .capture_names()
                        .enumerate()
                        .filter(|(_, name)| name.is_some())
                        .all(|(idx, _)| {
                            let (start, end) =
                                captures.get(idx).map_or((0, 0), |m| (m.start(), m.end()));
                            params.push(rest + start, rest + end)
                        }),
                    None => false,
                },
            };
            if matched {
                visit(leaf, params)?;
            }
            params.len = mark;
        }
        ControlFlow::Continue(())
    }
}

// ===== impl Matcher =====

impl Matcher {
    fn class(&self) -> u8 {
        match self {
            Matcher::Kind(kind) => kind.class(),
            Matcher::Mixed(_) => 0,
        }
    }

    fn same(&self, other: &Matcher) -> bool {
        match (self, other) {
            (Matcher::Kind(a), Matcher::Kind(b)) => a.same(b),
            (Matcher::Mixed(a), Matcher::Mixed(b)) => a.source == b.source,
            _ => false,
        }
    }

    #[inline]
    fn matches(&self, path: &str, start: usize, end: usize, params: &mut RawParams) -> bool {
        let segment = &path[start..end];
        match self {
            Matcher::Kind(kind) => kind.accepts_raw(segment) && params.push(start, end),
            Matcher::Mixed(mixed) => {
                let Some(captures) = mixed.regex.captures(segment) else {
                    return false;
                };
                let kinds = mixed.pieces.iter().filter_map(|piece| match piece {
                    Piece::Param { kind, .. } => Some(kind),
                    Piece::Literal(_) => None,
                });
                kinds
                    .enumerate()
                    .all(|(idx, kind)| match captures.get(idx + 1) {
                        Some(m) => {
                            kind.accepts(&decode(m.as_str()))
                                && params.push(start + m.start(), start + m.end())
                        }
                        None => false,
                    })
            }
        }
    }
}

/// Compares short keys inline; `==` on `str` calls memcmp.
#[inline]
fn same_key(key: &str, segment: &str) -> bool {
    key.len() == segment.len() && key.bytes().zip(segment.bytes()).all(|(a, b)| a == b)
}

/// Percent-decodes a path piece; borrows when there is nothing to decode.
pub(crate) fn decode(raw: &str) -> Cow<'_, str> {
    if raw.bytes().any(|b| b == b'%') {
        percent_decode_str(raw).decode_utf8_lossy()
    } else {
        Cow::Borrowed(raw)
    }
}

/// An open-addressing hash index over a node's static children.
///
/// Slots hold the child's index and the high bits of its hash, so a probe
/// compares key bytes only on a likely hit. The load factor stays at or
/// below one half; the index is rebuilt when a child is added, which only
/// happens while routes are registered.
#[derive(Clone)]
struct StaticIndex {
    /// `(low bits of the hash, child index + 1)`; index 0 marks an empty slot.
    slots: Box<[(u32, u32)]>,
    mask: usize,
    /// `64 - log2(slots.len())`: the slot comes from the best-mixed top bits.
    shift: u32,
}

impl StaticIndex {
    fn build<'a>(keys: impl ExactSizeIterator<Item = &'a str>) -> StaticIndex {
        let capacity = (keys.len() * 2).next_power_of_two();
        let mut slots = vec![(0u32, 0u32); capacity].into_boxed_slice();
        let mask = capacity - 1;
        let shift = 64 - capacity.trailing_zeros();
        for (idx, key) in keys.enumerate() {
            let hash = fx_hash(key.as_bytes());
            let mut slot = (hash >> shift) as usize & mask;
            while slots[slot].1 != 0 {
                slot = (slot + 1) & mask;
            }
            slots[slot] = (hash as u32, idx as u32 + 1);
        }
        StaticIndex { slots, mask, shift }
    }

    #[inline]
    fn get<'a>(&self, segment: &str, key_of: impl Fn(usize) -> &'a str) -> Option<usize> {
        let hash = fx_hash(segment.as_bytes());
        let tag = hash as u32;
        let mut slot = (hash >> self.shift) as usize & self.mask;
        loop {
            let (slot_tag, idx) = self.slots[slot];
            if idx == 0 {
                return None;
            }
            let idx = idx as usize - 1;
            if slot_tag == tag && same_key(key_of(idx), segment) {
                return Some(idx);
            }
            slot = (slot + 1) & self.mask;
        }
    }
}

/// The Fx hash (as used by rustc) with a final multiply, so that the top
/// bits, which pick the slot, depend on every input byte.
#[inline]
fn fx_hash(bytes: &[u8]) -> u64 {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let add = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    let mut hash = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        hash = add(hash, u64::from_le_bytes(word));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // A byte loop, not a `copy_from_slice`, which would call memcpy.
        let word = rest
            .iter()
            .enumerate()
            .fold(0u64, |word, (idx, b)| word | u64::from(*b) << (idx * 8));
        hash = add(hash, word);
    }
    (hash ^ (hash >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}
