//! Split patterns: hand-written matchers for the GPT-2, Llama 3 and Qwen2 pre-tokenizer
//! regexes (they need a negative look-ahead the `regex` crate lacks), `fancy-regex` for
//! any other regex, literal strings and character predicates.
//!
//! A pattern yields the non-empty, non-overlapping matches of a string, left to right, as
//! byte ranges.

use super::util::{Result, is_letter, is_mark, is_number, is_space, tok_err};

/// The GPT-2 pattern (also what ByteLevel applies when `use_regex` is true).
pub const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// The Llama 3 pattern (`tokenizer.ggml.pre` = `llama-bpe`).
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen3.5 pattern (`tokenizer.ggml.pre` = `qwen35`): Qwen2 with combining marks
/// counted as letters.
pub const QWEN35_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen2 pattern (`tokenizer.ggml.pre` = `qwen2`): Llama 3 with single digits.
pub const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A compiled split pattern.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// The GPT-2 regex, matched by hand.
    Gpt2,
    /// The Llama 3 regex (`max_digits` = 3), the Qwen2 one (`max_digits` = 1) or the
    /// Qwen3.5 one (also `marks`), by hand.
    Llama3 {
        /// Longest digit run one match takes.
        max_digits: usize,
        /// Combining marks count as letters (Qwen3.5).
        marks: bool,
    },
    /// Any other regex, through `fancy-regex`.
    Regex(Box<fancy_regex::Regex>),
    /// A literal string.
    Literal(String),
    /// Every character for which the predicate holds is one match.
    Char(fn(char) -> bool),
}

impl Pattern {
    /// Compiles a regex, recognising the known pre-tokenizer patterns.
    pub fn regex(source: &str) -> Result<Self> {
        match source {
            GPT2_PATTERN => Ok(Self::Gpt2),
            LLAMA3_PATTERN => Ok(Self::Llama3 {
                max_digits: 3,
                marks: false,
            }),
            QWEN2_PATTERN => Ok(Self::Llama3 {
                max_digits: 1,
                marks: false,
            }),
            QWEN35_PATTERN => Ok(Self::Llama3 {
                max_digits: 1,
                marks: true,
            }),
            _ => fancy_regex::Regex::new(source)
                .map(|r| Self::Regex(Box::new(r)))
                .map_err(|e| tok_err!("regex {source:?} does not compile: {e}")),
        }
    }

    /// Compiles a regex with `fancy-regex` even when a hand matcher exists (for tests
    /// that hold the two together).
    pub fn fancy(source: &str) -> Result<Self> {
        fancy_regex::Regex::new(source)
            .map(|r| Self::Regex(Box::new(r)))
            .map_err(|e| tok_err!("regex {source:?} does not compile: {e}"))
    }

    /// The matches of `s` as byte ranges.
    pub fn find_all(&self, s: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        match self {
            Self::Gpt2 => walk(s, &mut out, gpt2_at),
            Self::Llama3 { max_digits, marks } => {
                walk(s, &mut out, |s, i| llama3_at(s, i, *max_digits, *marks))
            }
            Self::Regex(re) => {
                let mut at = 0;
                while at <= s.len() {
                    match re.find_from_pos(s, at) {
                        Ok(Some(m)) if m.end() > m.start() => {
                            out.push((m.start(), m.end()));
                            at = m.end();
                        }
                        Ok(Some(m)) => {
                            // An empty match: step over one character.
                            at = m.end() + s[m.end()..].chars().next().map_or(1, char::len_utf8);
                        }
                        _ => break,
                    }
                }
            }
            Self::Literal(lit) => {
                if !lit.is_empty() {
                    out.extend(s.match_indices(lit.as_str()).map(|(i, m)| (i, i + m.len())));
                }
            }
            Self::Char(pred) => {
                out.extend(
                    s.char_indices()
                        .filter(|(_, c)| pred(*c))
                        .map(|(i, c)| (i, i + c.len_utf8())),
                );
            }
        }
        out
    }
}

/// Runs a matcher that always matches at least one character at every position.
fn walk(s: &str, out: &mut Vec<(usize, usize)>, at: impl Fn(&str, usize) -> usize) {
    let mut i = 0;
    while i < s.len() {
        let end = at(s, i);
        out.push((i, end));
        i = end;
    }
}

fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|t| t.chars().next())
}

/// End of the run of characters satisfying `pred` from `i`, at most `max` of them.
fn run(s: &str, i: usize, max: usize, pred: impl Fn(char) -> bool) -> usize {
    let mut end = i;
    for (n, c) in s[i..].chars().enumerate() {
        if n == max || !pred(c) {
            break;
        }
        end += c.len_utf8();
    }
    end
}

fn is_symbol(c: char) -> bool {
    !is_space(c) && !is_letter(c) && !is_number(c)
}

/// `\s+(?!\S)|\s+` at `i` (a whitespace character): the whole run when it ends the text
/// or the run is one character long, otherwise the run less its last character.
fn whitespace_at(s: &str, i: usize) -> usize {
    let end = run(s, i, usize::MAX, is_space);
    if end == s.len() {
        return end;
    }
    // Followed by a non-space: give back the last whitespace character if one remains.
    let last = s[i..end].chars().next_back().map_or(0, char::len_utf8);
    if end - last > i { end - last } else { end }
}

/// Contractions `'s|'t|'re|'ve|'m|'ll|'d`, case-insensitively when asked.
fn contraction_at(s: &str, i: usize, fold: bool) -> Option<usize> {
    let rest = &s.as_bytes()[i..];
    if rest.first() != Some(&b'\'') {
        return None;
    }
    for suffix in ["s", "t", "re", "ve", "m", "ll", "d"] {
        let n = suffix.len();
        if rest.len() > n {
            let cand = &rest[1..=n];
            let hit = if fold {
                cand.eq_ignore_ascii_case(suffix.as_bytes())
            } else {
                cand == suffix.as_bytes()
            };
            if hit {
                return Some(i + 1 + n);
            }
        }
    }
    None
}

fn gpt2_at(s: &str, i: usize) -> usize {
    if let Some(end) = contraction_at(s, i, false) {
        return end;
    }
    let c = char_at(s, i).unwrap_or(' ');
    let (start, first) = match (c, char_at(s, i + 1)) {
        (' ', Some(n)) if !is_space(n) => (i + 1, n),
        _ => (i, c),
    };
    if is_letter(first) {
        return run(s, start, usize::MAX, is_letter);
    }
    if is_number(first) {
        return run(s, start, usize::MAX, is_number);
    }
    if is_symbol(first) {
        return run(s, start, usize::MAX, is_symbol);
    }
    whitespace_at(s, i)
}

fn llama3_at(s: &str, i: usize, max_digits: usize, marks: bool) -> usize {
    if let Some(end) = contraction_at(s, i, true) {
        return end;
    }
    let is_let = |c: char| is_letter(c) || (marks && is_mark(c));
    let is_sym = |c: char| !is_space(c) && !is_let(c) && !is_number(c);
    let c = char_at(s, i).unwrap_or(' ');
    // [^\r\n\p{L}\p{N}]?\p{L}+ (letters and, for Qwen3.5, marks)
    if is_let(c) {
        return run(s, i, usize::MAX, is_let);
    }
    let next = char_at(s, i + c.len_utf8());
    if c != '\r' && c != '\n' && !is_number(c) && next.is_some_and(is_let) {
        return run(s, i + c.len_utf8(), usize::MAX, is_let);
    }
    // \p{N}{1,max}
    if is_number(c) {
        return run(s, i, max_digits, is_number);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    let sym_start = if c == ' ' && next.is_some_and(is_sym) {
        i + 1
    } else {
        i
    };
    if char_at(s, sym_start).is_some_and(is_sym) {
        let end = run(s, sym_start, usize::MAX, is_sym);
        return run(s, end, usize::MAX, |c| c == '\r' || c == '\n');
    }
    // `\s*[\r\n]+`: up to the last CR/LF of the whitespace run.
    let ws_end = run(s, i, usize::MAX, is_space);
    if let Some(pos) = s[i..ws_end].rfind(['\r', '\n']) {
        return i + pos + 1;
    }
    whitespace_at(s, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(p: &Pattern, s: &str) -> Vec<String> {
        p.find_all(s)
            .into_iter()
            .map(|(a, b)| s[a..b].to_string())
            .collect()
    }

    #[test]
    fn hand_matchers_agree_with_fancy_regex() {
        let samples = [
            "Hello world, it's 12345 o'clock!!  \n\n  x\t\ty  ",
            "I'LL  say\r\n\r\n  ok... 3.14159 ½ 漢字 😀😀 \u{301}e  ",
            "  leading\n trailing \t",
            " !! ?? \n\n\t",
            "'S 'Re 've",
            "e\u{301}\u{302} \u{301}x !\u{301}? a\u{20dd}\n\u{301}",
        ];
        for (known, source) in [
            (Pattern::Gpt2, GPT2_PATTERN),
            (
                Pattern::Llama3 {
                    max_digits: 3,
                    marks: false,
                },
                LLAMA3_PATTERN,
            ),
            (
                Pattern::Llama3 {
                    max_digits: 1,
                    marks: false,
                },
                QWEN2_PATTERN,
            ),
            (
                Pattern::Llama3 {
                    max_digits: 1,
                    marks: true,
                },
                QWEN35_PATTERN,
            ),
        ] {
            let fancy = Pattern::Regex(Box::new(fancy_regex::Regex::new(source).unwrap()));
            for s in samples {
                assert_eq!(pieces(&known, s), pieces(&fancy, s), "{source} on {s:?}");
            }
        }
    }
}
