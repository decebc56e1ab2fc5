//! An exact-path index over fully static rules, consulted before the tree.
//!
//! A path such as `/plaintext` that equals a rule made of static segments
//! only is found with one hash and one key comparison instead of a walk. The
//! walk visits the leaves of such a rule before any typed or catch-all
//! branch (static children come first at every node), so answering from
//! this index first keeps the router's match priority.

use super::MAX_PATH;
use super::rule::{Rule, Segment};

/// Up to this many paths are compared one by one, without hashing.
const LINEAR_ENTRIES: usize = 8;

/// Maps a static path to the values of its rules, in registration order.
#[derive(Clone)]
pub(crate) struct ExactIndex<V> {
    entries: Vec<(Box<str>, Vec<V>)>,
    /// `(low bits of the hash, entry index + 1)`; index 0 marks an empty slot.
    /// The load factor stays at or below one half.
    slots: Box<[(u32, u32)]>,
    /// `64 - log2(slots.len())`: the slot comes from the top bits of the hash.
    shift: u32,
}

// ===== impl ExactIndex =====

impl<V> ExactIndex<V> {
    pub(crate) fn new() -> Self {
        ExactIndex {
            entries: Vec::new(),
            slots: Box::new([]),
            shift: 64,
        }
    }

    /// Adds `value` under the path of `rule` if the rule is fully static,
    /// and returns the index of that path (see [`index`](Self::index));
    /// other rules are left to the tree.
    pub(crate) fn insert(&mut self, rule: &Rule, value: V) -> Option<usize> {
        let path = static_path(rule)?;
        if let Some(idx) = self.position(&path) {
            self.entries[idx].1.push(value);
            return Some(idx);
        }
        self.entries.push((path.into(), vec![value]));
        let idx = self.entries.len() - 1;
        if self.entries.len() <= LINEAR_ENTRIES {
            return Some(idx);
        }
        if self.entries.len() * 2 > self.slots.len() {
            self.rebuild();
        } else {
            self.place(idx);
        }
        Some(idx)
    }

    /// The index of `path` among the indexed paths: 0 for the first path
    /// inserted, 1 for the next, and so on.
    #[inline]
    pub(crate) fn index(&self, path: &str) -> Option<usize> {
        self.position(path)
    }

    /// The values of the rules whose path is exactly `path`.
    #[inline]
    pub(crate) fn get(&self, path: &str) -> &[V] {
        match self.position(path) {
            Some(idx) => &self.entries[idx].1,
            None => &[],
        }
    }

    #[inline]
    fn position(&self, path: &str) -> Option<usize> {
        if self.entries.len() <= LINEAR_ENTRIES {
            // Mostly a length comparison per entry; cheaper than hashing.
            return self
                .entries
                .iter()
                .position(|(key, _)| same_path(key.as_bytes(), path.as_bytes()));
        }
        self.hashed_position(path)
    }

    fn hashed_position(&self, path: &str) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let hash = path_hash(path.as_bytes());
        let tag = hash as u32;
        let mut slot = (hash >> self.shift) as usize & mask;
        loop {
            let (slot_tag, idx) = self.slots[slot];
            if idx == 0 {
                return None;
            }
            let idx = idx as usize - 1;
            if slot_tag == tag && same_path(self.entries[idx].0.as_bytes(), path.as_bytes()) {
                return Some(idx);
            }
            slot = (slot + 1) & mask;
        }
    }

    fn rebuild(&mut self) {
        let capacity = (self.entries.len() * 2).next_power_of_two().max(8);
        self.slots = vec![(0, 0); capacity].into_boxed_slice();
        self.shift = 64 - capacity.trailing_zeros();
        for idx in 0..self.entries.len() {
            self.place(idx);
        }
    }

    fn place(&mut self, idx: usize) {
        let mask = self.slots.len() - 1;
        let hash = path_hash(self.entries[idx].0.as_bytes());
        let mut slot = (hash >> self.shift) as usize & mask;
        while self.slots[slot].1 != 0 {
            slot = (slot + 1) & mask;
        }
        self.slots[slot] = (hash as u32, idx as u32 + 1);
    }
}

/// Reads 8 bytes at `at` as a little-endian word; `at + 8 <= bytes.len()`.
#[inline]
fn word(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|chunk| <[u8; 8]>::try_from(chunk).ok())
        .map_or(0, u64::from_le_bytes)
}

/// Reads the bytes of a short slice (under 8 bytes) into one word, two
/// overlapping 4-byte loads when it has at least 4 bytes.
#[inline]
fn short_word(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let load4 = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|chunk| <[u8; 4]>::try_from(chunk).ok())
            .map_or(0, |chunk| u64::from(u32::from_le_bytes(chunk)))
    };
    if len >= 4 {
        load4(0) | load4(len - 4) << 32
    } else {
        bytes
            .iter()
            .enumerate()
            .fold(0, |word, (idx, b)| word | u64::from(*b) << (idx * 8))
    }
}

/// A hash of every byte of `bytes`, a word at a time: full words, then a
/// last word that overlaps the one before, so no byte loop runs for paths
/// of 8 bytes or more.
#[inline]
fn path_hash(bytes: &[u8]) -> u64 {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let add = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    let len = bytes.len();
    let mut hash = len as u64;
    if len < 8 {
        hash = add(hash, short_word(bytes));
    } else {
        let mut at = 0;
        while at + 8 < len {
            hash = add(hash, word(bytes, at));
            at += 8;
        }
        hash = add(hash, word(bytes, len - 8));
    }
    (hash ^ (hash >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// `a == b`, a word at a time, without a call to `memcmp`.
#[inline]
fn same_path(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    if len < 8 {
        return short_word(a) == short_word(b);
    }
    let mut at = 0;
    while at + 8 < len {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    word(a, len - 8) == word(b, len - 8)
}

/// The one path a rule of static segments matches; `None` for rules with
/// parameters, a tail, or no segment at all (the walk never ends at the
/// root, so such a rule matches nothing), and for paths over `MAX_PATH`,
/// which the walk refuses.
fn static_path(rule: &Rule) -> Option<String> {
    if rule.tail.is_some() || rule.segments.is_empty() {
        return None;
    }
    let mut path = String::new();
    for segment in &rule.segments {
        let Segment::Static(literal) = segment else {
            return None;
        };
        path.push('/');
        path.push_str(literal);
    }
    (path.len() <= MAX_PATH).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::Router;

    fn index(rules: &[&str]) -> ExactIndex<usize> {
        let router = Router::<()>::new();
        let mut index = ExactIndex::new();
        for (id, rule) in rules.iter().enumerate() {
            index.insert(&router.parse(rule).unwrap(), id);
        }
        index
    }

    #[test]
    fn static_rules_are_found_by_their_exact_path() {
        let index = index(&["/", "/a", "/a/b", "/a/", "/a", "/<x>", "/a/<path:p>", ""]);
        assert_eq!(index.get("/"), [0]);
        assert_eq!(index.get("/a"), [1, 4]);
        assert_eq!(index.get("/a/b"), [2]);
        assert_eq!(index.get("/a/"), [3]);
        assert!(index.get("/b").is_empty());
        assert!(index.get("").is_empty());
        assert!(index.get("/a/b/").is_empty());
    }

    #[test]
    fn paths_compare_equal_only_when_every_byte_does() {
        let paths = [
            "",
            "/",
            "/a",
            "/ab",
            "/abc",
            "/abcd",
            "/abcdef",
            "/abcdefg",
            "/abcdefgh",
            "/abcdefghijklmnop",
            "/abcdefghijklmnopq",
            "/abcdefghijklmnoq",
        ];
        for a in paths {
            assert!(same_path(a.as_bytes(), a.as_bytes()));
            assert_eq!(path_hash(a.as_bytes()), path_hash(a.to_owned().as_bytes()));
            for b in paths {
                assert_eq!(same_path(a.as_bytes(), b.as_bytes()), a == b, "{a:?} {b:?}");
            }
            // Changing any one byte changes the comparison.
            for idx in 0..a.len() {
                let mut changed = a.as_bytes().to_vec();
                changed[idx] ^= 1;
                assert!(!same_path(a.as_bytes(), &changed), "{a:?} at {idx}");
            }
        }
    }

    #[test]
    fn many_static_rules_survive_growth() {
        let rules: Vec<String> = (0..1000).map(|n| format!("/r{n}/x")).collect();
        let refs: Vec<&str> = rules.iter().map(String::as_str).collect();
        let index = index(&refs);
        for (id, rule) in refs.iter().enumerate() {
            assert_eq!(index.get(rule), [id]);
        }
        assert!(index.get("/r1000/x").is_empty());
    }
}
