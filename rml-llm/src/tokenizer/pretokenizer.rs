//! Pre-tokenizers: split normalized text into the pieces the model sees one at a time.

use serde_json::Value;

use super::bytelevel;
use super::normalizer::parse_pattern;
use super::pattern::Pattern;
use super::util::{
    Result, bool_or, is_punctuation, one_char, opt, opt_str, req_str, sequence, tok_err, type_tag,
};

/// What a split does with the matched delimiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBehavior {
    /// Drop them.
    Removed,
    /// Keep each as its own piece.
    Isolated,
    /// Glue each to the piece before it.
    MergedWithPrevious,
    /// Glue each to the piece after it.
    MergedWithNext,
    /// Merge runs of consecutive matches into one piece.
    Contiguous,
}

impl SplitBehavior {
    fn parse(s: &str, path: &str) -> Result<Self> {
        Ok(match s {
            "Removed" => Self::Removed,
            "Isolated" => Self::Isolated,
            "MergedWithPrevious" => Self::MergedWithPrevious,
            "MergedWithNext" => Self::MergedWithNext,
            "Contiguous" => Self::Contiguous,
            other => {
                return Err(tok_err!(
                    "{path}.behavior: unknown split behavior {other:?}"
                ));
            }
        })
    }
}

/// Where Metaspace puts its leading replacement character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrependScheme {
    /// Before every piece that lacks one.
    Always,
    /// Only before the piece at the start of the input.
    First,
    /// Never.
    Never,
}

impl PrependScheme {
    /// Parses `prepend_scheme`, falling back on the legacy `add_prefix_space`.
    pub(crate) fn from_json(v: &Value, path: &str) -> Result<Self> {
        match opt_str(v, "prepend_scheme", path)? {
            Some("always") => Ok(Self::Always),
            Some("first") => Ok(Self::First),
            Some("never") => Ok(Self::Never),
            Some(other) => Err(tok_err!("{path}.prepend_scheme: unknown value {other:?}")),
            None => Ok(if bool_or(v, "add_prefix_space", true, path)? {
                Self::Always
            } else {
                Self::Never
            }),
        }
    }
}

/// One pre-tokenizer of a `tokenizer.json`.
#[derive(Debug, Clone)]
pub enum PreTokenizer {
    /// Byte-level: optional prefix space, optional GPT-2 split, bytes to characters.
    ByteLevel {
        /// Prepend a space to a piece that does not start with one.
        add_prefix_space: bool,
        /// Split with the GPT-2 regex first.
        use_regex: bool,
    },
    /// Split on a pattern.
    Split {
        /// The delimiter pattern.
        pattern: Pattern,
        /// What to do with delimiters.
        behavior: SplitBehavior,
        /// Split on what does not match instead.
        invert: bool,
    },
    /// SentencePiece-style: spaces become `replacement`, optional prefix, optional split.
    Metaspace {
        /// The space replacement, usually `▁`.
        replacement: char,
        /// Where to prepend the replacement.
        prepend_scheme: PrependScheme,
        /// Split before each replacement character.
        split: bool,
    },
    /// `\w+|[^\w\s]+`.
    Whitespace,
    /// Split on whitespace, dropping it.
    WhitespaceSplit,
    /// Isolate digits (each one, or runs).
    Digits {
        /// One piece per digit instead of per run.
        individual_digits: bool,
    },
    /// Split off punctuation.
    Punctuation {
        /// What to do with punctuation characters.
        behavior: SplitBehavior,
    },
    /// BERT: split on whitespace, then isolate each punctuation character.
    Bert,
    /// Split on one character, dropping it.
    CharDelimiterSplit(char),
    /// llama.cpp's WPM (GGUF `bert`) preprocessing: NFD, drop accents (nonspacing marks)
    /// and controls, lowercase, split
    /// on whitespace, isolate punctuation, ASCII symbols and CJK ideographs.
    Wpm,
    /// Several pre-tokenizers in order.
    Sequence(Vec<PreTokenizer>),
}

/// A piece of text during pre-tokenization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The text.
    pub text: String,
    /// Whether the piece begins at the start of the original input.
    pub first: bool,
}

/// Splits `s` at `matches` (sorted, non-overlapping byte ranges) following `behavior`;
/// returns the non-empty pieces as byte ranges.
pub(crate) fn split_ranges(
    s: &str,
    matches: &[(usize, usize)],
    behavior: SplitBehavior,
    invert: bool,
) -> Vec<(usize, usize)> {
    // Every stretch of `s`, tagged as delimiter or not.
    let mut parts: Vec<((usize, usize), bool)> = Vec::with_capacity(matches.len() * 2 + 1);
    let mut last = 0;
    for &(a, b) in matches {
        if a > last {
            parts.push(((last, a), invert));
        }
        parts.push(((a, b), !invert));
        last = b;
    }
    if last < s.len() {
        parts.push(((last, s.len()), invert));
    }
    let out: Vec<(usize, usize)> = match behavior {
        SplitBehavior::Removed => parts.into_iter().filter(|p| !p.1).map(|p| p.0).collect(),
        SplitBehavior::Isolated => parts.into_iter().map(|p| p.0).collect(),
        SplitBehavior::MergedWithPrevious => {
            let mut acc: Vec<(usize, usize)> = Vec::new();
            let mut previous_match = false;
            for (r, is_match) in parts {
                match acc.last_mut() {
                    Some(last) if is_match && !previous_match => last.1 = r.1,
                    _ => acc.push(r),
                }
                previous_match = is_match;
            }
            acc
        }
        SplitBehavior::MergedWithNext => {
            let mut acc: Vec<(usize, usize)> = Vec::new();
            let mut previous_match = false;
            for (r, is_match) in parts.into_iter().rev() {
                match acc.last_mut() {
                    Some(last) if is_match && !previous_match => last.0 = r.0,
                    _ => acc.push(r),
                }
                previous_match = is_match;
            }
            acc.reverse();
            acc
        }
        SplitBehavior::Contiguous => {
            let mut acc: Vec<(usize, usize)> = Vec::new();
            let mut previous_match = false;
            for (r, is_match) in parts {
                match acc.last_mut() {
                    Some(last) if is_match == previous_match => last.1 = r.1,
                    _ => acc.push(r),
                }
                previous_match = is_match;
            }
            acc
        }
    };
    out.into_iter().filter(|(a, b)| b > a).collect()
}

fn split_piece(piece: Piece, ranges: Vec<(usize, usize)>, out: &mut Vec<Piece>) {
    for (a, b) in ranges {
        out.push(Piece {
            text: piece.text[a..b].to_string(),
            first: piece.first && a == 0,
        });
    }
}

fn is_bert_punc(c: char) -> bool {
    c.is_ascii_punctuation() || is_punctuation(c)
}

fn is_numeric(c: char) -> bool {
    c.is_numeric()
}

fn is_space(c: char) -> bool {
    c.is_whitespace()
}

impl PreTokenizer {
    /// Parses a pre-tokenizer object.
    pub fn from_json(v: &Value, path: &str) -> Result<Self> {
        let tag = type_tag(v, path)?;
        Ok(match tag {
            "ByteLevel" => Self::ByteLevel {
                add_prefix_space: bool_or(v, "add_prefix_space", true, path)?,
                use_regex: bool_or(v, "use_regex", true, path)?,
            },
            "Split" => Self::Split {
                pattern: parse_pattern(
                    opt(v, "pattern").ok_or_else(|| tok_err!("{path}.pattern: missing"))?,
                    &format!("{path}.pattern"),
                )?,
                behavior: SplitBehavior::parse(req_str(v, "behavior", path)?, path)?,
                invert: bool_or(v, "invert", false, path)?,
            },
            "Metaspace" => Self::Metaspace {
                replacement: one_char(
                    opt_str(v, "replacement", path)?.unwrap_or("\u{2581}"),
                    &format!("{path}.replacement"),
                )?,
                prepend_scheme: PrependScheme::from_json(v, path)?,
                split: bool_or(v, "split", true, path)?,
            },
            "Whitespace" => Self::Whitespace,
            "WhitespaceSplit" => Self::WhitespaceSplit,
            "Digits" => Self::Digits {
                individual_digits: bool_or(v, "individual_digits", false, path)?,
            },
            "Punctuation" => Self::Punctuation {
                behavior: match opt_str(v, "behavior", path)? {
                    Some(b) => SplitBehavior::parse(b, path)?,
                    None => SplitBehavior::Isolated,
                },
            },
            "BertPreTokenizer" => Self::Bert,
            "CharDelimiterSplit" => Self::CharDelimiterSplit(one_char(
                req_str(v, "delimiter", path)?,
                &format!("{path}.delimiter"),
            )?),
            "Sequence" => Self::Sequence(sequence(v, "pretokenizers", path, Self::from_json)?),
            other => return Err(tok_err!("{path}: unsupported pre-tokenizer type {other:?}")),
        })
    }

    /// Splits every piece of `pieces`.
    pub fn pre_tokenize(&self, pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out = Vec::with_capacity(pieces.len());
        match self {
            Self::Sequence(items) => {
                let mut cur = pieces;
                for p in items {
                    cur = p.pre_tokenize(cur);
                }
                return cur;
            }
            Self::ByteLevel {
                add_prefix_space,
                use_regex,
            } => {
                for mut piece in pieces {
                    if *add_prefix_space && !piece.text.starts_with(' ') {
                        piece.text.insert(0, ' ');
                    }
                    let ranges = if *use_regex {
                        let m = Pattern::Gpt2.find_all(&piece.text);
                        split_ranges(&piece.text, &m, SplitBehavior::Isolated, false)
                    } else if piece.text.is_empty() {
                        Vec::new()
                    } else {
                        vec![(0, piece.text.len())]
                    };
                    for (a, b) in ranges {
                        out.push(Piece {
                            text: bytelevel::encode_bytes(&piece.text.as_bytes()[a..b]),
                            first: piece.first && a == 0,
                        });
                    }
                }
            }
            Self::Split {
                pattern,
                behavior,
                invert,
            } => {
                for piece in pieces {
                    let m = pattern.find_all(&piece.text);
                    let r = split_ranges(&piece.text, &m, *behavior, *invert);
                    split_piece(piece, r, &mut out);
                }
            }
            Self::Metaspace {
                replacement,
                prepend_scheme,
                split,
            } => {
                let rep = replacement.to_string();
                for piece in pieces {
                    let mut text = piece.text.replace(' ', &rep);
                    let prepend = match prepend_scheme {
                        PrependScheme::Always => true,
                        PrependScheme::First => piece.first,
                        PrependScheme::Never => false,
                    };
                    if prepend && !text.starts_with(*replacement) {
                        text.insert(0, *replacement);
                    }
                    let piece = Piece {
                        text,
                        first: piece.first,
                    };
                    let r = if *split {
                        let m = Pattern::Literal(rep.clone()).find_all(&piece.text);
                        split_ranges(&piece.text, &m, SplitBehavior::MergedWithNext, false)
                    } else if piece.text.is_empty() {
                        Vec::new()
                    } else {
                        vec![(0, piece.text.len())]
                    };
                    split_piece(piece, r, &mut out);
                }
            }
            Self::Whitespace => {
                for piece in pieces {
                    let r = whitespace_ranges(&piece.text);
                    split_piece(piece, r, &mut out);
                }
            }
            Self::WhitespaceSplit => {
                return Self::char_split(pieces, is_space, SplitBehavior::Removed);
            }
            Self::Digits { individual_digits } => {
                let b = if *individual_digits {
                    SplitBehavior::Isolated
                } else {
                    SplitBehavior::Contiguous
                };
                return Self::char_split(pieces, is_numeric, b);
            }
            Self::Punctuation { behavior } => {
                return Self::char_split(pieces, is_bert_punc, *behavior);
            }
            Self::Bert => {
                let p = Self::char_split(pieces, is_space, SplitBehavior::Removed);
                return Self::char_split(p, is_bert_punc, SplitBehavior::Isolated);
            }
            Self::Wpm => {
                for piece in pieces {
                    for w in wpm_words(&piece.text) {
                        out.push(Piece {
                            text: w,
                            first: false,
                        });
                    }
                }
            }
            Self::CharDelimiterSplit(d) => {
                for piece in pieces {
                    let m = Pattern::Literal(d.to_string()).find_all(&piece.text);
                    let r = split_ranges(&piece.text, &m, SplitBehavior::Removed, false);
                    split_piece(piece, r, &mut out);
                }
            }
        }
        out
    }

    fn char_split(
        pieces: Vec<Piece>,
        pred: fn(char) -> bool,
        behavior: SplitBehavior,
    ) -> Vec<Piece> {
        let mut out = Vec::with_capacity(pieces.len());
        let pattern = Pattern::Char(pred);
        for piece in pieces {
            let m = pattern.find_all(&piece.text);
            let r = split_ranges(&piece.text, &m, behavior, false);
            split_piece(piece, r, &mut out);
        }
        out
    }
}

/// `\w+|[^\w\s]+` as ranges (word runs and symbol runs; whitespace dropped).
fn whitespace_ranges(s: &str) -> Vec<(usize, usize)> {
    use super::util::is_word;
    let mut out = Vec::new();
    let mut cur: Option<(usize, bool)> = None;
    for (i, c) in s.char_indices() {
        let kind = if c.is_whitespace() {
            None
        } else {
            Some(is_word(c))
        };
        match (cur, kind) {
            (Some((_, k)), Some(k2)) if k == k2 => {}
            (Some((start, _)), _) => {
                out.push((start, i));
                cur = kind.map(|k| (i, k));
            }
            (None, _) => cur = kind.map(|k| (i, k)),
        }
    }
    if let Some((start, _)) = cur {
        out.push((start, s.len()));
    }
    out
}

/// The words of llama.cpp's WPM preprocessing.
fn wpm_words(s: &str) -> Vec<String> {
    use unicode_normalization::UnicodeNormalization;
    let mut words = vec![String::new()];
    for c in s.nfd() {
        if c.is_whitespace() {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            continue;
        }
        if c == '\0'
            || c == '\u{fffd}'
            || super::util::is_other(c)
            || super::util::is_mark_nonspacing(c)
        {
            continue;
        }
        let isolated = is_punctuation(c)
            || (c.is_ascii() && c.is_ascii_punctuation())
            || super::normalizer::is_chinese_char(c);
        if isolated {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            if let Some(w) = words.last_mut() {
                w.extend(c.to_lowercase());
            }
            words.push(String::new());
        } else if let Some(w) = words.last_mut() {
            w.extend(c.to_lowercase());
        }
    }
    words.retain(|w| !w.is_empty());
    words
}
