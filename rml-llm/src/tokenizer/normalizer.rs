//! Normalizers: text-to-text rewrites applied before pre-tokenization.

use base64::Engine;
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use super::charsmap::Charsmap;
use super::pattern::Pattern;
use super::util::{
    Result, bool_or, is_mark, is_mark_nonspacing, is_other, obj, opt, req_str, sequence, tok_err,
    type_tag,
};

/// One normalizer of a `tokenizer.json`.
#[derive(Debug, Clone)]
pub enum Normalizer {
    /// Unicode NFC.
    Nfc,
    /// Unicode NFD.
    Nfd,
    /// Unicode NFKC.
    Nfkc,
    /// Unicode NFKD.
    Nfkd,
    /// Per-character lowercase.
    Lowercase,
    /// Trims whitespace on the chosen sides.
    Strip {
        /// Trim the start.
        left: bool,
        /// Trim the end.
        right: bool,
    },
    /// Removes combining marks.
    StripAccents,
    /// Replaces every match of a pattern with `content`.
    Replace {
        /// What to find.
        pattern: Pattern,
        /// What to put instead.
        content: String,
    },
    /// Prepends a string to non-empty text.
    Prepend(String),
    /// BERT's cleanup: control characters, CJK spacing, accents, lowercase.
    Bert {
        /// Drop control characters and map whitespace to a space.
        clean_text: bool,
        /// Surround CJK ideographs with spaces.
        handle_chinese_chars: bool,
        /// Strip accents (NFD, then drop nonspacing marks).
        strip_accents: bool,
        /// Lowercase.
        lowercase: bool,
    },
    /// SentencePiece NMT cleanup of control characters and odd spaces.
    Nmt,
    /// Maps every byte to its byte-level character.
    ByteLevel,
    /// SentencePiece's precompiled character map (T5, XLM-R, ALBERT files).
    Precompiled(Box<Charsmap>),
    /// Runs several normalizers in order.
    Sequence(Vec<Normalizer>),
}

/// CJK ideograph blocks as BERT defines them.
pub(crate) fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// Parses a Replace/Split `pattern` object: `{"String": s}` or `{"Regex": r}`.
pub(crate) fn parse_pattern(v: &Value, path: &str) -> Result<Pattern> {
    let o = obj(v, path)?;
    if let Some(s) = o.get("String").and_then(Value::as_str) {
        Ok(Pattern::Literal(s.to_string()))
    } else if let Some(r) = o.get("Regex").and_then(Value::as_str) {
        Pattern::regex(r).map_err(|e| e.context(path))
    } else {
        Err(tok_err!(
            "{path}: expected {{\"String\": …}} or {{\"Regex\": …}}"
        ))
    }
}

/// Replaces every match of `pattern` in `s` by `content`.
pub(crate) fn replace_all(pattern: &Pattern, s: &str, content: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (a, b) in pattern.find_all(s) {
        out.push_str(&s[last..a]);
        out.push_str(content);
        last = b;
    }
    out.push_str(&s[last..]);
    out
}

impl Normalizer {
    /// Parses a normalizer object.
    pub fn from_json(v: &Value, path: &str) -> Result<Self> {
        let tag = type_tag(v, path)?;
        Ok(match tag {
            "NFC" => Self::Nfc,
            "NFD" => Self::Nfd,
            "NFKC" => Self::Nfkc,
            "NFKD" => Self::Nfkd,
            "Lowercase" => Self::Lowercase,
            "StripAccents" => Self::StripAccents,
            "Nmt" => Self::Nmt,
            "ByteLevel" => Self::ByteLevel,
            "Strip" => Self::Strip {
                left: bool_or(v, "strip_left", true, path)?,
                right: bool_or(v, "strip_right", true, path)?,
            },
            "Replace" => Self::Replace {
                pattern: parse_pattern(
                    opt(v, "pattern").ok_or_else(|| tok_err!("{path}.pattern: missing"))?,
                    &format!("{path}.pattern"),
                )?,
                content: req_str(v, "content", path)?.to_string(),
            },
            "Prepend" => Self::Prepend(req_str(v, "prepend", path)?.to_string()),
            "BertNormalizer" => {
                let lowercase = bool_or(v, "lowercase", true, path)?;
                Self::Bert {
                    clean_text: bool_or(v, "clean_text", true, path)?,
                    handle_chinese_chars: bool_or(v, "handle_chinese_chars", true, path)?,
                    strip_accents: bool_or(v, "strip_accents", lowercase, path)?,
                    lowercase,
                }
            }
            "Sequence" => Self::Sequence(sequence(v, "normalizers", path, Self::from_json)?),
            "Precompiled" => {
                let blob = match opt(v, "precompiled_charsmap") {
                    None => Vec::new(),
                    Some(Value::String(text)) => base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .map_err(|e| tok_err!("{path}.precompiled_charsmap: not base64: {e}"))?,
                    Some(_) => {
                        return Err(tok_err!("{path}.precompiled_charsmap: expected a string"));
                    }
                };
                let map = Charsmap::from_bytes(&blob).map_err(|e| e.context(path))?;
                Self::Precompiled(Box::new(map))
            }
            other => return Err(tok_err!("{path}: unknown normalizer type {other:?}")),
        })
    }

    /// Normalizes `s`.
    pub fn normalize(&self, s: &str) -> String {
        match self {
            Self::Nfc => s.nfc().collect(),
            Self::Nfd => s.nfd().collect(),
            Self::Nfkc => s.nfkc().collect(),
            Self::Nfkd => s.nfkd().collect(),
            Self::Lowercase => s.chars().flat_map(char::to_lowercase).collect(),
            Self::Strip { left, right } => {
                let mut t = s;
                if *left {
                    t = t.trim_start();
                }
                if *right {
                    t = t.trim_end();
                }
                t.to_string()
            }
            Self::StripAccents => s.chars().filter(|&c| !is_mark(c)).collect(),
            Self::Replace { pattern, content } => replace_all(pattern, s, content),
            Self::Prepend(p) => {
                if s.is_empty() {
                    String::new()
                } else {
                    format!("{p}{s}")
                }
            }
            Self::Bert { clean_text, handle_chinese_chars, strip_accents, lowercase } => {
                let mut t: String = s.to_string();
                if *clean_text {
                    t = t
                        .chars()
                        .filter(|&c| {
                            !(c == '\0'
                                || c == '\u{fffd}'
                                || (!matches!(c, '\t' | '\n' | '\r') && is_other(c)))
                        })
                        .map(|c| if c.is_whitespace() { ' ' } else { c })
                        .collect();
                }
                if *handle_chinese_chars {
                    let mut u = String::with_capacity(t.len());
                    for c in t.chars() {
                        if is_chinese_char(c) {
                            u.push(' ');
                            u.push(c);
                            u.push(' ');
                        } else {
                            u.push(c);
                        }
                    }
                    t = u;
                }
                if *strip_accents {
                    t = t.nfd().filter(|&c| !is_mark_nonspacing(c)).collect();
                }
                if *lowercase {
                    t = t.chars().flat_map(char::to_lowercase).collect();
                }
                t
            }
            Self::Nmt => s
                .chars()
                .filter(|&c| {
                    !matches!(c as u32, 0x0001..=0x0008 | 0x000B | 0x000E..=0x001F | 0x007F | 0x008F | 0x009F)
                })
                .map(|c| match c as u32 {
                    0x0009 | 0x000A | 0x000C | 0x000D | 0x1680 | 0x200B..=0x200F | 0x2028 | 0x2029
                    | 0x2581 | 0xFEFF | 0xFFFD => ' ',
                    _ => c,
                })
                .collect(),
            Self::ByteLevel => super::bytelevel::encode_bytes(s.as_bytes()),
            Self::Precompiled(map) => map.normalize(s),
            Self::Sequence(items) => {
                let mut t = s.to_string();
                for n in items {
                    t = n.normalize(&t);
                }
                t
            }
        }
    }
}
