//! Decoders: turn token strings back into text, and post-processors: add the special
//! tokens a model expects around an encoded sequence.

use std::collections::HashMap;

use serde_json::Value;

use super::bytelevel;
use super::model::parse_byte_token;
use super::normalizer::{parse_pattern, replace_all};
use super::pattern::Pattern;
use super::pretokenizer::PrependScheme;
use super::util::{
    Result, as_id, bool_or, obj, one_char, opt, opt_str, req_str, sequence, tok_err, type_tag,
    usize_or,
};

/// One decoder of a `tokenizer.json`.
#[derive(Debug, Clone)]
pub enum Decoder {
    /// Byte-level characters back to bytes, then UTF-8 (lossy).
    ByteLevel,
    /// `replacement` back to spaces; the first token loses its leading one.
    Metaspace {
        /// The space replacement, usually `▁`.
        replacement: char,
        /// Whether encoding prepended a replacement.
        prepend_scheme: PrependScheme,
    },
    /// Joins WordPiece continuations, spaces between words, optional cleanup.
    WordPiece {
        /// The continuation prefix, usually `##`.
        prefix: String,
        /// Undo the spaces BERT puts before punctuation and contractions.
        cleanup: bool,
    },
    /// `<0xNN>` runs back to text (invalid UTF-8 becomes one U+FFFD per byte).
    ByteFallback,
    /// Concatenates all tokens into one.
    Fuse,
    /// Removes up to `start` leading and `stop` trailing `content` characters per token.
    Strip {
        /// The character to strip.
        content: char,
        /// At most this many from the start.
        start: usize,
        /// At most this many from the end.
        stop: usize,
    },
    /// Replaces a pattern in every token.
    Replace {
        /// What to find.
        pattern: Pattern,
        /// What to put instead.
        content: String,
    },
    /// Classic BPE end-of-word suffix: becomes a space (nothing on the last token).
    Bpe {
        /// The suffix.
        suffix: String,
    },
    /// Several decoders in order.
    Sequence(Vec<Decoder>),
}

fn wordpiece_cleanup(s: &str) -> String {
    s.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" do not", " don't")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
}

impl Decoder {
    /// Parses a decoder object.
    pub fn from_json(v: &Value, path: &str) -> Result<Self> {
        let tag = type_tag(v, path)?;
        Ok(match tag {
            "ByteLevel" => Self::ByteLevel,
            "Metaspace" => Self::Metaspace {
                replacement: one_char(
                    opt_str(v, "replacement", path)?.unwrap_or("\u{2581}"),
                    &format!("{path}.replacement"),
                )?,
                prepend_scheme: PrependScheme::from_json(v, path)?,
            },
            "WordPiece" => Self::WordPiece {
                prefix: opt_str(v, "prefix", path)?.unwrap_or("##").to_string(),
                cleanup: bool_or(v, "cleanup", true, path)?,
            },
            "ByteFallback" => Self::ByteFallback,
            "Fuse" => Self::Fuse,
            "Strip" => Self::Strip {
                content: one_char(req_str(v, "content", path)?, &format!("{path}.content"))?,
                start: usize_or(v, "start", 0, path)?,
                stop: usize_or(v, "stop", 0, path)?,
            },
            "Replace" => Self::Replace {
                pattern: parse_pattern(
                    opt(v, "pattern").ok_or_else(|| tok_err!("{path}.pattern: missing"))?,
                    &format!("{path}.pattern"),
                )?,
                content: req_str(v, "content", path)?.to_string(),
            },
            "BPEDecoder" => Self::Bpe {
                suffix: opt_str(v, "suffix", path)?.unwrap_or("</w>").to_string(),
            },
            "Sequence" => Self::Sequence(sequence(v, "decoders", path, Self::from_json)?),
            other => return Err(tok_err!("{path}: unsupported decoder type {other:?}")),
        })
    }

    /// Rewrites the token strings; the decoded text is their concatenation.
    pub fn decode_chain(&self, tokens: Vec<String>) -> Vec<String> {
        match self {
            Self::ByteLevel => {
                let mut bytes = Vec::new();
                for t in &tokens {
                    bytelevel::decode_chars(t, &mut bytes);
                }
                vec![String::from_utf8_lossy(&bytes).into_owned()]
            }
            Self::Metaspace {
                replacement,
                prepend_scheme,
            } => tokens
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    t.chars()
                        .filter_map(|c| {
                            if c == *replacement {
                                if i == 0 && *prepend_scheme != PrependScheme::Never {
                                    None
                                } else {
                                    Some(' ')
                                }
                            } else {
                                Some(c)
                            }
                        })
                        .collect()
                })
                .collect(),
            Self::WordPiece { prefix, cleanup } => tokens
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    let t = if i == 0 {
                        t
                    } else if let Some(rest) = t.strip_prefix(prefix.as_str()) {
                        rest.to_string()
                    } else {
                        format!(" {t}")
                    };
                    if *cleanup { wordpiece_cleanup(&t) } else { t }
                })
                .collect(),
            Self::ByteFallback => {
                let mut out = Vec::with_capacity(tokens.len());
                let mut pending: Vec<u8> = Vec::new();
                let flush = |pending: &mut Vec<u8>, out: &mut Vec<String>| {
                    if pending.is_empty() {
                        return;
                    }
                    match String::from_utf8(std::mem::take(pending)) {
                        Ok(s) => out.push(s),
                        Err(e) => {
                            for _ in 0..e.as_bytes().len() {
                                out.push("\u{fffd}".to_string());
                            }
                        }
                    }
                };
                for t in tokens {
                    if let Some(b) = parse_byte_token(&t) {
                        pending.push(b);
                    } else {
                        flush(&mut pending, &mut out);
                        out.push(t);
                    }
                }
                flush(&mut pending, &mut out);
                out
            }
            Self::Fuse => vec![tokens.concat()],
            Self::Strip {
                content,
                start,
                stop,
            } => tokens
                .into_iter()
                .map(|t| {
                    let chars: Vec<char> = t.chars().collect();
                    let lead = chars
                        .iter()
                        .take(*start)
                        .take_while(|&&c| c == *content)
                        .count();
                    let trail = chars[lead..]
                        .iter()
                        .rev()
                        .take(*stop)
                        .take_while(|&&c| c == *content)
                        .count();
                    chars[lead..chars.len() - trail].iter().collect()
                })
                .collect(),
            Self::Replace { pattern, content } => tokens
                .iter()
                .map(|t| replace_all(pattern, t, content))
                .collect(),
            Self::Bpe { suffix } => {
                let n = tokens.len();
                tokens
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| t.replace(suffix.as_str(), if i + 1 == n { "" } else { " " }))
                    .collect()
            }
            Self::Sequence(items) => {
                let mut cur = tokens;
                for d in items {
                    cur = d.decode_chain(cur);
                }
                cur
            }
        }
    }
}

/// One item of a post-processing template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateItem {
    /// The ids of a special token.
    Special(Vec<u32>),
    /// The first sequence.
    A,
    /// The second sequence (pair templates only).
    B,
}

/// One post-processor of a `tokenizer.json`.
#[derive(Debug, Clone)]
pub enum PostProcessor {
    /// Templates of special tokens around one sequence and around a pair.
    Template {
        /// The single-sequence template.
        single: Vec<TemplateItem>,
        /// The pair template.
        pair: Vec<TemplateItem>,
    },
    /// Changes offsets only; ids pass through (a pair is concatenated).
    Passthrough,
    /// Several post-processors in order.
    Sequence(Vec<PostProcessor>),
}

fn parse_template(
    v: &Value,
    key: &str,
    specials: &HashMap<String, Vec<u32>>,
    path: &str,
) -> Result<Vec<TemplateItem>> {
    let Some(items) = opt(v, key) else {
        return Ok(Vec::new());
    };
    let items = items
        .as_array()
        .ok_or_else(|| tok_err!("{path}.{key}: expected an array"))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if let Some(sp) = item.get("SpecialToken") {
            let id = req_str(sp, "id", &format!("{path}.{key}[{i}].SpecialToken"))?;
            let ids = specials.get(id).ok_or_else(|| {
                tok_err!("{path}.{key}[{i}]: special token {id:?} is not in special_tokens")
            })?;
            out.push(TemplateItem::Special(ids.clone()));
        } else if let Some(seq) = item.get("Sequence") {
            match req_str(seq, "id", &format!("{path}.{key}[{i}].Sequence"))? {
                "A" => out.push(TemplateItem::A),
                "B" => out.push(TemplateItem::B),
                other => return Err(tok_err!("{path}.{key}[{i}]: unknown sequence {other:?}")),
            }
        } else {
            return Err(tok_err!(
                "{path}.{key}[{i}]: expected SpecialToken or Sequence"
            ));
        }
    }
    Ok(out)
}

fn apply(template: &[TemplateItem], a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len() + template.len());
    for item in template {
        match item {
            TemplateItem::Special(sp) => out.extend_from_slice(sp),
            TemplateItem::A => out.extend_from_slice(a),
            TemplateItem::B => out.extend_from_slice(b),
        }
    }
    out
}

impl PostProcessor {
    /// Parses a post-processor object.
    pub fn from_json(v: &Value, path: &str) -> Result<Self> {
        use TemplateItem::{A, B, Special};
        let tag = type_tag(v, path)?;
        let pair_id = |key: &str| -> Result<u32> {
            match opt(v, key).and_then(Value::as_array).map(Vec::as_slice) {
                Some([_, id]) => as_id(id, &format!("{path}.{key}[1]")),
                _ => Err(tok_err!("{path}.{key}: expected [token, id]")),
            }
        };
        Ok(match tag {
            "ByteLevel" => Self::Passthrough,
            "BertProcessing" => {
                let (cls, sep) = (pair_id("cls")?, pair_id("sep")?);
                Self::Template {
                    single: vec![Special(vec![cls]), A, Special(vec![sep])],
                    pair: vec![
                        Special(vec![cls]),
                        A,
                        Special(vec![sep]),
                        B,
                        Special(vec![sep]),
                    ],
                }
            }
            "RobertaProcessing" => {
                let (cls, sep) = (pair_id("cls")?, pair_id("sep")?);
                Self::Template {
                    single: vec![Special(vec![cls]), A, Special(vec![sep])],
                    pair: vec![
                        Special(vec![cls]),
                        A,
                        Special(vec![sep]),
                        Special(vec![sep]),
                        B,
                        Special(vec![sep]),
                    ],
                }
            }
            "TemplateProcessing" => {
                let specials: HashMap<String, Vec<u32>> = match opt(v, "special_tokens") {
                    None => HashMap::new(),
                    Some(s) => {
                        let mut map = HashMap::new();
                        for (k, entry) in obj(s, &format!("{path}.special_tokens"))? {
                            let ids =
                                entry.get("ids").and_then(Value::as_array).ok_or_else(|| {
                                    tok_err!("{path}.special_tokens[{k:?}].ids: expected an array")
                                })?;
                            let ids = ids
                                .iter()
                                .map(|i| as_id(i, &format!("{path}.special_tokens[{k:?}].ids")))
                                .collect::<Result<Vec<u32>>>()?;
                            map.insert(k.clone(), ids);
                        }
                        map
                    }
                };
                if opt(v, "single").is_none() {
                    return Err(tok_err!("{path}.single: missing"));
                }
                let single = parse_template(v, "single", &specials, path)?;
                let mut pair = parse_template(v, "pair", &specials, path)?;
                if pair.is_empty() {
                    pair = single.clone();
                    pair.push(B);
                }
                Self::Template { single, pair }
            }
            "Sequence" => Self::Sequence(sequence(v, "processors", path, Self::from_json)?),
            other => {
                return Err(tok_err!(
                    "{path}: unsupported post-processor type {other:?}"
                ));
            }
        })
    }

    /// Adds the special tokens around `ids`.
    pub fn process(&self, ids: Vec<u32>) -> Vec<u32> {
        match self {
            Self::Passthrough => ids,
            Self::Template { single, .. } => apply(single, &ids, &[]),
            Self::Sequence(items) => {
                let mut cur = ids;
                for p in items {
                    cur = p.process(cur);
                }
                cur
            }
        }
    }

    /// Joins a pair of encoded sequences with the pair template (the first template of a
    /// sequence of processors; plain concatenation when there is none).
    pub fn process_pair(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        match self {
            Self::Passthrough => [a, b].concat(),
            Self::Template { pair, .. } => apply(pair, a, b),
            Self::Sequence(items) => match items.iter().find(|p| !matches!(p, Self::Passthrough)) {
                Some(p) => p.process_pair(a, b),
                None => [a, b].concat(),
            },
        }
    }

    /// Every id this processor can add.
    pub fn added_ids(&self) -> Vec<u32> {
        match self {
            Self::Passthrough => Vec::new(),
            Self::Template { single, pair } => single
                .iter()
                .chain(pair)
                .filter_map(|t| match t {
                    TemplateItem::Special(ids) => Some(ids.iter().copied()),
                    _ => None,
                })
                .flatten()
                .collect(),
            Self::Sequence(items) => items.iter().flat_map(Self::added_ids).collect(),
        }
    }
}
