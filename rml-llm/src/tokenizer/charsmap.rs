//! SentencePiece's precompiled character map: the `Precompiled` normalizer of
//! `tokenizer.json` files converted from SentencePiece models (T5, XLM-R, ALBERT, mBART).
//!
//! The blob holds a little-endian `u32` byte length of a *double-array trie*
//! (darts-clone's layout: one `u32` unit per node packing a label, a child offset, a
//! has-leaf flag or a value), followed by a pool of NUL-terminated replacement strings.
//! A key's trie value is the pool offset of its replacement. Normalization walks the
//! text by extended grapheme clusters, as Hugging Face's implementation does: a cluster
//! shorter than 6 bytes whose start matches a rule is replaced whole; otherwise each
//! character is looked up on its own and kept when no rule matches. The shortest
//! matching prefix wins.

use unicode_segmentation::UnicodeSegmentation;

use super::util::{Result, tok_err};

/// A parsed `precompiled_charsmap`.
#[derive(Debug, Clone, Default)]
pub struct Charsmap {
    /// The double-array trie units.
    units: Vec<u32>,
    /// NUL-terminated replacement strings.
    pool: Vec<u8>,
}

impl Charsmap {
    /// Parses the raw blob (after base64 decoding); an empty blob has no rules.
    pub fn from_bytes(blob: &[u8]) -> Result<Self> {
        if blob.is_empty() {
            return Ok(Self::default());
        }
        let size: [u8; 4] = blob
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                tok_err!(
                    "precompiled_charsmap: {} bytes, shorter than its header",
                    blob.len()
                )
            })?;
        let trie_len = u32::from_le_bytes(size) as usize;
        let trie_end = 4usize
            .checked_add(trie_len)
            .filter(|&end| end <= blob.len() && trie_len.is_multiple_of(4))
            .ok_or_else(|| {
                tok_err!(
                    "precompiled_charsmap: trie of {trie_len} bytes does not fit the {}-byte blob in whole units",
                    blob.len()
                )
            })?;
        let units = blob[4..trie_end]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let pool = blob[trie_end..].to_vec();
        std::str::from_utf8(&pool).map_err(|e| {
            tok_err!("precompiled_charsmap: replacement strings are not UTF-8: {e}")
        })?;
        Ok(Self { units, pool })
    }

    /// The pool offset of the shortest rule that is a prefix of `key`.
    fn shortest_prefix_value(&self, key: &[u8]) -> Option<usize> {
        let mut node = offset(*self.units.first()?);
        for &byte in key {
            node ^= usize::from(byte);
            let unit = *self.units.get(node)?;
            if label(unit) != u32::from(byte) {
                return None;
            }
            node ^= offset(unit);
            if has_leaf(unit) {
                return self.units.get(node).map(|&u| value(u) as usize);
            }
        }
        None
    }

    /// The replacement of the shortest rule matching a prefix of `chunk`.
    pub fn transform(&self, chunk: &str) -> Option<&str> {
        let start = self.shortest_prefix_value(chunk.as_bytes())?;
        let rest = self.pool.get(start..)?;
        let len = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..len]).ok()
    }

    /// Applies the rules to `text`.
    pub fn normalize(&self, text: &str) -> String {
        if self.units.is_empty() {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        for grapheme in text.graphemes(true) {
            if grapheme.len() < 6
                && let Some(replacement) = self.transform(grapheme)
            {
                out.push_str(replacement);
                continue;
            }
            for (i, c) in grapheme.char_indices() {
                let one = &grapheme[i..i + c.len_utf8()];
                out.push_str(self.transform(one).unwrap_or(one));
            }
        }
        out
    }
}

/// darts-clone: whether the node has a leaf child holding a value.
fn has_leaf(unit: u32) -> bool {
    (unit >> 8) & 1 == 1
}

/// darts-clone: the value stored in a leaf unit.
fn value(unit: u32) -> u32 {
    unit & ((1 << 31) - 1)
}

/// darts-clone: the label of a node (with the leaf bit, so a leaf never matches a byte).
fn label(unit: u32) -> u32 {
    unit & ((1 << 31) | 0xFF)
}

/// darts-clone: the XOR offset from a node to its children.
fn offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize
}

#[cfg(test)]
mod tests {
    use super::Charsmap;

    #[test]
    fn malformed_blobs_are_errors() {
        assert!(Charsmap::from_bytes(&[1, 0]).is_err());
        assert!(Charsmap::from_bytes(&[8, 0, 0, 0, 1, 2, 3, 4]).is_err());
        assert!(Charsmap::from_bytes(&[3, 0, 0, 0, 1, 2, 3]).is_err());
        assert!(Charsmap::from_bytes(&[0, 0, 0, 0, 0xff]).is_err());
        let empty = Charsmap::from_bytes(&[]).unwrap();
        assert_eq!(empty.normalize("ｆ x"), "ｆ x");
    }

    #[test]
    fn garbage_trie_never_panics() {
        let mut blob = vec![16, 0, 0, 0];
        blob.extend([0xffu8; 16]);
        blob.extend(b"a\0");
        let map = Charsmap::from_bytes(&blob).unwrap();
        assert_eq!(map.normalize("abc ☃"), "abc ☃");
    }
}
