//! Shared plumbing: the error type, JSON field accessors that name the field they
//! complain about, and Unicode general-category tests.

use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

/// Everything that can go wrong loading or running a tokenizer.
///
/// The message names the file part (e.g. `model.merges[12]`) or the input at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerError {
    message: String,
}

impl TokenizerError {
    /// An error with the given message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message without any prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prefixes the message with `context: `.
    pub fn context(self, context: &str) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
        }
    }
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TokenizerError {}

/// Result alias of the tokenizer module.
pub type Result<T> = std::result::Result<T, TokenizerError>;

/// Builds an error from a format string.
macro_rules! tok_err {
    ($($arg:tt)*) => { $crate::tokenizer::TokenizerError::new(format!($($arg)*)) };
}
pub(crate) use tok_err;

/// The object at `v`, or an error naming `path`.
pub(crate) fn obj<'a>(v: &'a Value, path: &str) -> Result<&'a serde_json::Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| tok_err!("{path}: expected a JSON object"))
}

/// `v[key]` if present and not null.
pub(crate) fn opt<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key).filter(|x| !x.is_null())
}

/// The string `v[key]`, or an error naming `path.key`.
pub(crate) fn req_str<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str> {
    opt(v, key)
        .ok_or_else(|| tok_err!("{path}.{key}: missing"))?
        .as_str()
        .ok_or_else(|| tok_err!("{path}.{key}: expected a string"))
}

/// The array `v[key]` parsed item by item with `parse(item, "path.key[i]")`: the
/// members of a `Sequence` normalizer, pre-tokenizer, post-processor or decoder.
pub(crate) fn sequence<T>(
    v: &Value,
    key: &str,
    path: &str,
    parse: impl Fn(&Value, &str) -> Result<T>,
) -> Result<Vec<T>> {
    let list = opt(v, key)
        .and_then(Value::as_array)
        .ok_or_else(|| tok_err!("{path}.{key}: expected an array"))?;
    list.iter()
        .enumerate()
        .map(|(i, item)| parse(item, &format!("{path}.{key}[{i}]")))
        .collect()
}

/// The optional string `v[key]`.
pub(crate) fn opt_str<'a>(v: &'a Value, key: &str, path: &str) -> Result<Option<&'a str>> {
    match opt(v, key) {
        None => Ok(None),
        Some(x) => x
            .as_str()
            .map(Some)
            .ok_or_else(|| tok_err!("{path}.{key}: expected a string")),
    }
}

/// The boolean `v[key]`, `default` when absent or null.
pub(crate) fn bool_or(v: &Value, key: &str, default: bool, path: &str) -> Result<bool> {
    match opt(v, key) {
        None => Ok(default),
        Some(x) => x
            .as_bool()
            .ok_or_else(|| tok_err!("{path}.{key}: expected a boolean")),
    }
}

/// The unsigned integer `v[key]`, `default` when absent or null.
pub(crate) fn usize_or(v: &Value, key: &str, default: usize, path: &str) -> Result<usize> {
    match opt(v, key) {
        None => Ok(default),
        Some(x) => x
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| tok_err!("{path}.{key}: expected a non-negative integer")),
    }
}

/// A token id from a JSON number, or an error naming `path`.
pub(crate) fn as_id(v: &Value, path: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| tok_err!("{path}: expected a token id (u32)"))
}

/// The `type` tag of a component object.
pub(crate) fn type_tag<'a>(v: &'a Value, path: &str) -> Result<&'a str> {
    obj(v, path)?;
    req_str(v, "type", path)
}

/// The single character of `s`, or an error naming `path`.
pub(crate) fn one_char(s: &str, path: &str) -> Result<char> {
    let mut it = s.chars();
    match (it.next(), it.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(tok_err!(
            "{path}: expected exactly one character, got {s:?}"
        )),
    }
}

/// Sorted code point ranges of one Unicode class.
struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    fn of(class: &str) -> Self {
        use regex_syntax::hir::{Class, HirKind};
        let mut ranges = Vec::new();
        // The class strings below are fixed and valid; a parse failure would leave the
        // class empty, which the tests would catch.
        if let Ok(hir) = regex_syntax::Parser::new().parse(class)
            && let HirKind::Class(Class::Unicode(cls)) = hir.kind()
        {
            ranges.extend(
                cls.ranges()
                    .iter()
                    .map(|r| (r.start() as u32, r.end() as u32)),
            );
        }
        Self(ranges)
    }

    fn contains(&self, c: char) -> bool {
        let c = c as u32;
        self.0
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }
}

fn class(cell: &'static OnceLock<Ranges>, name: &str, c: char) -> bool {
    cell.get_or_init(|| Ranges::of(name)).contains(c)
}

/// `\p{L}`: general category Letter.
pub(crate) fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    static L: OnceLock<Ranges> = OnceLock::new();
    class(&L, r"\p{L}", c)
}

/// `\p{N}`: general category Number.
pub(crate) fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    static N: OnceLock<Ranges> = OnceLock::new();
    class(&N, r"\p{N}", c)
}

/// `\p{P}`: general category Punctuation.
pub(crate) fn is_punctuation(c: char) -> bool {
    static P: OnceLock<Ranges> = OnceLock::new();
    class(&P, r"\p{P}", c)
}

/// `\p{C}`: general category Other (control, format, private use, unassigned, …).
pub(crate) fn is_other(c: char) -> bool {
    static C: OnceLock<Ranges> = OnceLock::new();
    class(&C, r"\p{C}", c)
}

/// `\p{Mn}`: nonspacing marks.
pub(crate) fn is_mark_nonspacing(c: char) -> bool {
    static MN: OnceLock<Ranges> = OnceLock::new();
    class(&MN, r"\p{Mn}", c)
}

/// `\p{M}`: all marks.
pub(crate) fn is_mark(c: char) -> bool {
    static M: OnceLock<Ranges> = OnceLock::new();
    class(&M, r"\p{M}", c)
}

/// `\w`: Unicode word characters (Alphabetic, marks, decimal digits, connector
/// punctuation, join controls), as the reference's Whitespace pre-tokenizer sees them.
pub(crate) fn is_word(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    static W: OnceLock<Ranges> = OnceLock::new();
    class(&W, r"\w", c)
}

/// `\s`: Unicode White_Space.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(is_letter('é') && is_letter('漢') && !is_letter('1') && !is_letter('\u{301}'));
        assert!(is_number('٣') && is_number('½') && !is_number('a'));
        assert!(is_punctuation('、') && !is_punctuation('a'));
        assert!(is_other('\u{200d}') && is_other('\u{7}') && !is_other('a'));
        assert!(is_mark_nonspacing('\u{301}') && is_mark('\u{301}'));
    }
}
