//! Tokenizers: Hugging Face `tokenizer.json` files and GGUF vocabularies.
//!
//! Encoding runs the reference pipeline: added/special tokens are split out first (those
//! with `normalized: false` on the raw text, the others after normalization), then the
//! normalizer, the pre-tokenizer and the model run on the text between them, and the
//! post-processor adds BOS/EOS-style tokens when asked. Decoding maps ids to token
//! strings and runs the decoder chain; [`DecodeStream`] does it incrementally, emitting
//! only complete UTF-8.
//!
//! Everything a file can get wrong is reported as a [`TokenizerError`] naming the field;
//! nothing here panics on user input.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

pub mod bytelevel;
pub mod charsmap;
mod cleanup;
pub mod decoder;
pub mod gguf;
pub mod model;
pub mod normalizer;
pub mod pattern;
pub mod pretokenizer;
mod stream;
mod util;

pub use decoder::{Decoder, PostProcessor, TemplateItem};
pub use model::Model;
pub use normalizer::Normalizer;
pub use pretokenizer::{Piece, PreTokenizer};
pub use stream::DecodeStream;
pub use util::{Result, TokenizerError};

use util::{as_id, bool_or, obj, opt, req_str, tok_err};

/// A token added on top of the model vocabulary (special tokens, chat markers, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedToken {
    /// Its id.
    pub id: u32,
    /// Its text.
    pub content: String,
    /// Match only when not inside a word.
    pub single_word: bool,
    /// Swallow whitespace on its left.
    pub lstrip: bool,
    /// Swallow whitespace on its right.
    pub rstrip: bool,
    /// Match in normalized text (after the normalizer) rather than raw text.
    pub normalized: bool,
    /// A special token (skipped by `skip_special_tokens`, not parsed when parsing is off).
    pub special: bool,
}

impl AddedToken {
    /// A special, non-normalized token without strip flags.
    pub fn special(id: u32, content: &str) -> Self {
        Self {
            id,
            content: content.to_string(),
            single_word: false,
            lstrip: false,
            rstrip: false,
            normalized: false,
            special: true,
        }
    }
}

/// Leftmost-longest matcher over a set of added tokens.
#[derive(Debug, Clone, Default)]
struct AddedMatcher {
    /// Per first byte: (pattern, token index), longest pattern first.
    by_first: HashMap<u8, Vec<(String, usize)>>,
}

impl AddedMatcher {
    fn new(patterns: impl Iterator<Item = (String, usize)>) -> Self {
        let mut by_first: HashMap<u8, Vec<(String, usize)>> = HashMap::new();
        for (p, i) in patterns {
            if let Some(&b) = p.as_bytes().first() {
                by_first.entry(b).or_default().push((p, i));
            }
        }
        for v in by_first.values_mut() {
            v.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        }
        Self { by_first }
    }

    fn is_empty(&self) -> bool {
        self.by_first.is_empty()
    }

    /// The leftmost-longest match at or after `from`: (start, end, token index).
    fn find(
        &self,
        s: &str,
        from: usize,
        skip: &dyn Fn(usize) -> bool,
    ) -> Option<(usize, usize, usize)> {
        let bytes = s.as_bytes();
        for i in from..bytes.len() {
            if let Some(cands) = self.by_first.get(&bytes[i]) {
                for (p, idx) in cands {
                    if !skip(*idx) && bytes[i..].starts_with(p.as_bytes()) {
                        return Some((i, i + p.len(), *idx));
                    }
                }
            }
        }
        None
    }
}

/// A stretch of the input during encoding.
#[derive(Debug, Clone)]
enum Segment {
    /// An added token, already an id.
    Token(u32),
    /// Text still to tokenize; `first` when it starts the input.
    Text(String, bool),
}

/// Options of [`Tokenizer::encode_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Run the post-processor (BOS/EOS templates).
    pub add_special_tokens: bool,
    /// Recognise special tokens written in the text. Turn off for untrusted text: special
    /// tokens are then tokenized as plain text.
    pub parse_special: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            add_special_tokens: true,
            parse_special: true,
        }
    }
}

/// A loaded tokenizer.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    added: Vec<AddedToken>,
    raw_matcher: AddedMatcher,
    normalized_matcher: AddedMatcher,
    normalizer: Option<Normalizer>,
    pre_tokenizer: Option<PreTokenizer>,
    model: Model,
    post_processor: Option<PostProcessor>,
    decoder: Option<Decoder>,
    /// id → token string (model vocab overridden by added tokens).
    id_to_token: Vec<Option<String>>,
    special_contents: HashSet<String>,
    special_ids: HashSet<u32>,
    added_ids: HashMap<String, u32>,
    /// Ids a BOS-adding post-processor puts first, if any.
    bos: Option<u32>,
    eos: Option<u32>,
    /// Apply llama.cpp's `clean_spaces` rules after a one-shot decode (GGUF vocabularies).
    clean_spaces: bool,
}

impl Tokenizer {
    /// Loads a `tokenizer.json` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| tok_err!("{}: cannot read: {e}", path.display()))?;
        Self::from_json_str(&text).map_err(|e| e.context(&path.display().to_string()))
    }

    /// Parses the text of a `tokenizer.json`.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text).map_err(|e| tok_err!("not valid JSON: {e}"))?;
        obj(&v, "tokenizer.json")?;
        let model = Model::from_json(opt(&v, "model").ok_or_else(|| tok_err!("model: missing"))?)?;
        let normalizer = opt(&v, "normalizer")
            .map(|n| Normalizer::from_json(n, "normalizer"))
            .transpose()?;
        let pre_tokenizer = opt(&v, "pre_tokenizer")
            .map(|p| PreTokenizer::from_json(p, "pre_tokenizer"))
            .transpose()?;
        let post_processor = opt(&v, "post_processor")
            .map(|p| PostProcessor::from_json(p, "post_processor"))
            .transpose()?;
        let decoder = opt(&v, "decoder")
            .map(|d| Decoder::from_json(d, "decoder"))
            .transpose()?;
        let mut added = Vec::new();
        if let Some(list) = opt(&v, "added_tokens") {
            let list = list
                .as_array()
                .ok_or_else(|| tok_err!("added_tokens: expected an array"))?;
            for (i, t) in list.iter().enumerate() {
                let path = format!("added_tokens[{i}]");
                added.push(AddedToken {
                    id: as_id(t.get("id").unwrap_or(&Value::Null), &format!("{path}.id"))?,
                    content: req_str(t, "content", &path)?.to_string(),
                    single_word: bool_or(t, "single_word", false, &path)?,
                    lstrip: bool_or(t, "lstrip", false, &path)?,
                    rstrip: bool_or(t, "rstrip", false, &path)?,
                    normalized: bool_or(t, "normalized", true, &path)?,
                    special: bool_or(t, "special", false, &path)?,
                });
            }
        }
        Self::from_parts(
            model,
            normalizer,
            pre_tokenizer,
            post_processor,
            decoder,
            added,
        )
    }

    /// Assembles a tokenizer from its parts, validating ids.
    pub fn from_parts(
        model: Model,
        normalizer: Option<Normalizer>,
        pre_tokenizer: Option<PreTokenizer>,
        post_processor: Option<PostProcessor>,
        decoder: Option<Decoder>,
        added: Vec<AddedToken>,
    ) -> Result<Self> {
        let vocab = model.vocab();
        let max_id = vocab
            .values()
            .copied()
            .chain(added.iter().map(|a| a.id))
            .max()
            .unwrap_or(0);
        // Ids index a table: refuse ids far beyond the number of tokens (a corrupt or
        // hostile file would otherwise make it allocate gigabytes).
        let count = vocab.len() + added.len();
        if max_id as usize >= count.saturating_mul(2) + 1024 {
            return Err(tok_err!(
                "token id {max_id} is far beyond the {count} tokens of the vocabulary"
            ));
        }
        let mut id_to_token: Vec<Option<String>> = vec![None; max_id as usize + 1];
        for (tok, &id) in vocab {
            let slot = &mut id_to_token[id as usize];
            if let Some(other) = slot {
                // Keep the choice deterministic whatever the hash order.
                let (a, b) = if other.as_str() < tok.as_str() {
                    (other.clone(), tok.clone())
                } else {
                    (tok.clone(), other.clone())
                };
                return Err(tok_err!(
                    "model.vocab: id {id} is used by both {a:?} and {b:?}"
                ));
            }
            *slot = Some(tok.clone());
        }
        let mut seen = HashSet::new();
        for (i, a) in added.iter().enumerate() {
            if a.content.is_empty() {
                return Err(tok_err!("added_tokens[{i}]: empty content"));
            }
            if !seen.insert(a.content.clone()) {
                return Err(tok_err!(
                    "added_tokens[{i}]: {:?} is listed twice",
                    a.content
                ));
            }
            // The reference reports (and decodes) a normalized token by its normalized form.
            let shown = match (&normalizer, a.normalized) {
                (Some(n), true) => n.normalize(&a.content),
                _ => a.content.clone(),
            };
            id_to_token[a.id as usize] = Some(shown);
        }
        if let Some(p) = &post_processor {
            for id in p.added_ids() {
                if id_to_token.get(id as usize).is_none_or(Option::is_none) {
                    return Err(tok_err!(
                        "post_processor: special token id {id} is not in the vocabulary"
                    ));
                }
            }
        }
        let raw_matcher = AddedMatcher::new(
            added
                .iter()
                .enumerate()
                .filter(|(_, a)| !a.normalized)
                .map(|(i, a)| (a.content.clone(), i)),
        );
        let normalized_matcher =
            AddedMatcher::new(added.iter().enumerate().filter(|(_, a)| a.normalized).map(
                |(i, a)| {
                    let content = match &normalizer {
                        Some(n) => n.normalize(&a.content),
                        None => a.content.clone(),
                    };
                    (content, i)
                },
            ));
        let special_contents: HashSet<String> = added
            .iter()
            .filter(|a| a.special)
            .map(|a| a.content.clone())
            .collect();
        let special_ids = added.iter().filter(|a| a.special).map(|a| a.id).collect();
        let added_ids = added.iter().map(|a| (a.content.clone(), a.id)).collect();
        let (bos, eos) = match &post_processor {
            Some(p) => {
                let probe = p.process(vec![u32::MAX]);
                let pos = probe.iter().position(|&x| x == u32::MAX).unwrap_or(0);
                (
                    probe[..pos].first().copied(),
                    probe[pos + 1..].last().copied(),
                )
            }
            None => (None, None),
        };
        Ok(Self {
            added,
            raw_matcher,
            normalized_matcher,
            normalizer,
            pre_tokenizer,
            model,
            post_processor,
            decoder,
            id_to_token,
            special_contents,
            special_ids,
            added_ids,
            bos,
            eos,
            clean_spaces: false,
        })
    }

    /// Turns llama.cpp's space clean-up on or off for [`Tokenizer::decode`].
    pub(crate) fn with_clean_spaces(mut self, on: bool) -> Self {
        self.clean_spaces = on;
        self
    }

    /// Encodes `text`, parsing special tokens, with the post-processor when
    /// `add_special_tokens`.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        self.encode_with(
            text,
            EncodeOptions {
                add_special_tokens,
                parse_special: true,
            },
        )
    }

    /// Encodes `text` with explicit options.
    pub fn encode_with(&self, text: &str, options: EncodeOptions) -> Result<Vec<u32>> {
        let skip = |i: usize| !options.parse_special && self.added[i].special;
        let mut segments = Vec::new();
        self.split_added(text, true, &self.raw_matcher, &skip, &mut segments);
        let mut normalized = Vec::with_capacity(segments.len());
        for seg in segments {
            match seg {
                Segment::Text(t, first) => {
                    let n = match &self.normalizer {
                        Some(n) => n.normalize(&t),
                        None => t,
                    };
                    self.split_added(&n, first, &self.normalized_matcher, &skip, &mut normalized);
                }
                tok => normalized.push(tok),
            }
        }
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        for seg in normalized {
            match seg {
                Segment::Token(id) => ids.push(id),
                Segment::Text(t, first) => {
                    let pieces = vec![Piece { text: t, first }];
                    let pieces = match &self.pre_tokenizer {
                        Some(p) => p.pre_tokenize(pieces),
                        None => pieces,
                    };
                    for p in pieces {
                        self.model.tokenize(&p.text, &mut ids)?;
                    }
                }
            }
        }
        if options.add_special_tokens
            && let Some(p) = &self.post_processor
        {
            ids = p.process(ids);
        }
        Ok(ids)
    }

    /// Encodes a rendered chat prompt: special tokens in the text are parsed, and the
    /// post-processor's tokens are added only when the text does not already start with
    /// the BOS token (chat templates usually write `{{ bos_token }}` themselves, and adding
    /// another would give the double BOS users of other runtimes hit).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        let starts_with_bos = self
            .bos
            .and_then(|b| self.id_to_token(b))
            .is_some_and(|b| text.starts_with(b));
        self.encode_with(
            text,
            EncodeOptions {
                add_special_tokens: !starts_with_bos,
                parse_special: true,
            },
        )
    }

    /// Encodes a pair of texts (a query and a passage for a cross-encoder, say), joined by
    /// the post-processor's pair template when `add_special_tokens`.
    pub fn encode_pair(&self, a: &str, b: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let plain = EncodeOptions {
            add_special_tokens: false,
            parse_special: true,
        };
        let (ea, eb) = (self.encode_with(a, plain)?, self.encode_with(b, plain)?);
        Ok(match (&self.post_processor, add_special_tokens) {
            (Some(p), true) => p.process_pair(&ea, &eb),
            _ => [ea, eb].concat(),
        })
    }

    /// Splits `s` around added tokens with the reference's single_word/lstrip/rstrip rules.
    fn split_added(
        &self,
        s: &str,
        first: bool,
        matcher: &AddedMatcher,
        skip: &dyn Fn(usize) -> bool,
        out: &mut Vec<Segment>,
    ) {
        if matcher.is_empty() {
            if !s.is_empty() {
                out.push(Segment::Text(s.to_string(), first));
            }
            return;
        }
        let mut done = 0; // end of the last emitted stretch
        let mut search = 0;
        while let Some((mut start, mut stop, idx)) = matcher.find(s, search, skip) {
            // Matches never overlap: the next search starts after this one, used or not.
            search = stop;
            let tok = &self.added[idx];
            if tok.single_word {
                let before_word = s[..start].chars().next_back().is_some_and(is_word_char);
                let after_word = s[stop..].chars().next().is_some_and(is_word_char);
                if before_word || after_word {
                    continue;
                }
            }
            if tok.lstrip {
                let trimmed = s[..start].trim_end_matches(char::is_whitespace).len();
                start = trimmed.max(done);
            }
            if tok.rstrip {
                stop += s[stop..].len() - s[stop..].trim_start_matches(char::is_whitespace).len();
            }
            if done < start {
                out.push(Segment::Text(
                    s[done..start].to_string(),
                    first && done == 0,
                ));
            }
            out.push(Segment::Token(tok.id));
            done = stop;
        }
        if done < s.len() {
            out.push(Segment::Text(s[done..].to_string(), first && done == 0));
        }
    }

    /// Decodes ids to text; unknown ids are skipped. GGUF vocabularies for which llama.cpp
    /// cleans up spaces (`a , b` → `a, b`) get the same clean-up here.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        let text = self.decode_pieces(ids, skip_special_tokens);
        if self.clean_spaces {
            cleanup::llama_cpp_clean_spaces(&text)
        } else {
            text
        }
    }

    /// Decodes ids through the decoder only, without llama.cpp's final space clean-up:
    /// what a [`DecodeStream`] concatenates to. Equal to [`Tokenizer::decode`] for
    /// `tokenizer.json` files.
    pub fn decode_pieces(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        let tokens: Vec<String> = ids
            .iter()
            .filter_map(|&id| self.id_to_token(id))
            .filter(|t| !skip_special_tokens || !self.special_contents.contains(*t))
            .map(str::to_string)
            .collect();
        match &self.decoder {
            Some(d) => d.decode_chain(tokens).concat(),
            None => tokens.join(" "),
        }
    }

    /// A streaming decoder over this tokenizer.
    pub fn decode_stream(&self, skip_special_tokens: bool) -> DecodeStream<'_> {
        DecodeStream::new(self, skip_special_tokens)
    }

    /// The token string of an id.
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.id_to_token.get(id as usize).and_then(|t| t.as_deref())
    }

    /// The id of a token string (added tokens first).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.added_ids
            .get(token)
            .copied()
            .or_else(|| self.model.token_to_id(token))
    }

    /// One more than the largest id.
    pub fn vocab_size(&self) -> usize {
        self.id_to_token.len()
    }

    /// Whether `id` is a special added token.
    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.contains(&id)
    }

    /// The added tokens.
    pub fn added_tokens(&self) -> &[AddedToken] {
        &self.added
    }

    /// The token the post-processor puts first (BOS), if any.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The token the post-processor puts last (EOS), if any.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}
