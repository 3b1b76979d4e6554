//! Models: turn one pre-tokenized piece into token ids.
//!
//! - [`Bpe`]: merge loop over a rank heap, with byte fallback, unknown-token fusing and
//!   `ignore_merges`;
//! - [`WordPiece`]: greedy longest match with a continuation prefix;
//! - [`Unigram`]: Viterbi over every vocabulary piece that matches;
//! - [`WordLevel`]: whole-piece lookup;
//! - [`Spm`]: SentencePiece's score-driven BPE, as GGUF `llama` vocabularies need.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use serde_json::Value;

use super::util::{Result, as_id, bool_or, obj, opt, opt_str, tok_err, type_tag, usize_or};

/// Token-to-id map.
pub type Vocab = HashMap<String, u32>;

/// A tokenizer model.
#[derive(Debug, Clone)]
pub enum Model {
    /// Byte-pair encoding with ranked merges.
    Bpe(Bpe),
    /// WordPiece.
    WordPiece(WordPiece),
    /// Unigram language model.
    Unigram(Unigram),
    /// Direct lookup.
    WordLevel(WordLevel),
    /// SentencePiece BPE driven by piece scores.
    Spm(Spm),
    /// llama.cpp's WordPiece for GGUF `bert` vocabularies (`▁` marks word starts).
    Wpm(Wpm),
}

/// WordPiece as llama.cpp runs GGUF `bert` vocabularies: word-initial pieces carry a `▁`
/// prefix, continuations none; greedy longest match, the whole word becomes unknown if
/// any position fails.
#[derive(Debug, Clone)]
pub struct Wpm {
    vocab: Vocab,
    unk: Option<u32>,
    max_len: usize,
}

impl Wpm {
    /// Builds the model from pieces (id = position).
    pub fn new(tokens: &[String], unk: Option<u32>) -> Self {
        let mut vocab = Vocab::with_capacity(tokens.len());
        let mut max_len = 1;
        for (i, t) in tokens.iter().enumerate() {
            max_len = max_len.max(t.len());
            vocab.entry(t.clone()).or_insert(i as u32);
        }
        Self {
            vocab,
            unk,
            max_len,
        }
    }

    /// Tokenizes one word.
    pub fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        let w = format!("\u{2581}{word}");
        let mark = out.len();
        let mut i = 0;
        while i < w.len() {
            let mut j = (i + self.max_len).min(w.len());
            let mut found = None;
            while j > i {
                if w.is_char_boundary(j)
                    && let Some(&id) = self.vocab.get(&w[i..j])
                {
                    found = Some((id, j));
                    break;
                }
                j -= 1;
            }
            match found {
                Some((id, end)) => {
                    out.push(id);
                    i = end;
                }
                None => {
                    out.truncate(mark);
                    break;
                }
            }
        }
        if out.len() == mark
            && let Some(u) = self.unk
        {
            out.push(u);
        }
    }
}

/// Byte-pair encoding.
#[derive(Debug, Clone)]
pub struct Bpe {
    vocab: Vocab,
    /// (left, right) → (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    unk: Option<u32>,
    continuing_subword_prefix: Option<String>,
    end_of_word_suffix: Option<String>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    /// Byte-fallback ids `<0x00>`…`<0xFF>` when all are present.
    byte_ids: Option<Box<[u32; 256]>>,
}

/// The token `<0xNN>` of a byte.
pub fn byte_token(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// The byte of a `<0xNN>` token.
pub fn parse_byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn byte_ids(vocab: &Vocab) -> Option<Box<[u32; 256]>> {
    let mut ids = Box::new([0u32; 256]);
    for b in 0..=255u8 {
        ids[usize::from(b)] = *vocab.get(&byte_token(b))?;
    }
    Some(ids)
}

/// Options of a [`Bpe`] model beyond its vocabulary and merges.
#[derive(Debug, Clone, Default)]
pub struct BpeOptions {
    /// The unknown token.
    pub unk_token: Option<String>,
    /// Prefix of non-initial pieces of a word.
    pub continuing_subword_prefix: Option<String>,
    /// Suffix of the last piece of a word.
    pub end_of_word_suffix: Option<String>,
    /// Merge runs of unknown characters into one unknown token.
    pub fuse_unk: bool,
    /// Emit `<0xNN>` tokens for characters outside the vocabulary.
    pub byte_fallback: bool,
    /// Emit a piece that is already in the vocabulary without merging.
    pub ignore_merges: bool,
}

impl Bpe {
    /// Builds a BPE model, checking that merges name vocabulary tokens.
    pub fn new(vocab: Vocab, merges: &[(String, String)], options: BpeOptions) -> Result<Self> {
        let mut table = HashMap::with_capacity(merges.len());
        for (rank, (a, b)) in merges.iter().enumerate() {
            let get = |t: &str| {
                vocab.get(t).copied().ok_or_else(|| {
                    tok_err!(
                        "model.merges[{rank}]: token {t:?} of merge \"{a} {b}\" is not in the vocab"
                    )
                })
            };
            let (ia, ib) = (get(a)?, get(b)?);
            let mut merged = String::with_capacity(a.len() + b.len());
            merged.push_str(a);
            let right = match &options.continuing_subword_prefix {
                Some(p) => b.strip_prefix(p.as_str()).unwrap_or(b),
                None => b,
            };
            merged.push_str(right);
            let id = get(&merged)?;
            table.insert((ia, ib), (rank as u32, id));
        }
        let unk = match &options.unk_token {
            Some(u) => Some(
                *vocab
                    .get(u)
                    .ok_or_else(|| tok_err!("model.unk_token {u:?} is not in the vocab"))?,
            ),
            None => None,
        };
        let bytes = byte_ids(&vocab);
        if options.byte_fallback && bytes.is_none() {
            return Err(tok_err!(
                "model.byte_fallback is true but the vocab lacks some of the 256 tokens <0x00>…<0xFF>"
            ));
        }
        Ok(Self {
            vocab,
            merges: table,
            unk,
            continuing_subword_prefix: options.continuing_subword_prefix,
            end_of_word_suffix: options.end_of_word_suffix,
            fuse_unk: options.fuse_unk,
            byte_fallback: options.byte_fallback,
            ignore_merges: options.ignore_merges,
            byte_ids: bytes,
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        let vocab = parse_vocab_map(opt(v, "vocab"), "model.vocab")?;
        let merges = match opt(v, "merges") {
            None => Vec::new(),
            Some(m) => {
                let list = m
                    .as_array()
                    .ok_or_else(|| tok_err!("model.merges: expected an array"))?;
                let mut out = Vec::with_capacity(list.len());
                for (i, item) in list.iter().enumerate() {
                    let pair = if let Some(s) = item.as_str() {
                        let mut parts = s.splitn(2, ' ');
                        match (parts.next(), parts.next()) {
                            (Some(a), Some(b)) if !b.contains(' ') => {
                                (a.to_string(), b.to_string())
                            }
                            _ => {
                                return Err(tok_err!(
                                    "model.merges[{i}]: {s:?} is not \"left right\""
                                ));
                            }
                        }
                    } else if let Some([a, b]) = item.as_array().map(Vec::as_slice) {
                        match (a.as_str(), b.as_str()) {
                            (Some(a), Some(b)) => (a.to_string(), b.to_string()),
                            _ => return Err(tok_err!("model.merges[{i}]: expected two strings")),
                        }
                    } else {
                        return Err(tok_err!(
                            "model.merges[{i}]: expected \"a b\" or [\"a\", \"b\"]"
                        ));
                    };
                    out.push(pair);
                }
                out
            }
        };
        if opt(v, "dropout")
            .and_then(Value::as_f64)
            .is_some_and(|d| d > 0.0)
        {
            return Err(tok_err!(
                "model.dropout: BPE dropout is not supported (inference only)"
            ));
        }
        let options = BpeOptions {
            unk_token: opt_str(v, "unk_token", "model")?.map(str::to_string),
            continuing_subword_prefix: opt_str(v, "continuing_subword_prefix", "model")?
                .map(str::to_string),
            end_of_word_suffix: opt_str(v, "end_of_word_suffix", "model")?.map(str::to_string),
            fuse_unk: bool_or(v, "fuse_unk", false, "model")?,
            byte_fallback: bool_or(v, "byte_fallback", false, "model")?,
            ignore_merges: bool_or(v, "ignore_merges", false, "model")?,
        };
        Self::new(vocab, &merges, options)
    }

    /// Tokenizes one piece.
    pub fn tokenize(&self, piece: &str, out: &mut Vec<u32>) {
        if piece.is_empty() {
            return;
        }
        if self.ignore_merges
            && let Some(&id) = self.vocab.get(piece)
        {
            out.push(id);
            return;
        }
        // Initial symbols: one per character (or bytes / unknowns).
        let mut symbols: Vec<u32> = Vec::with_capacity(piece.len());
        let mut unk: Option<u32> = None;
        let mut chars = piece.char_indices().peekable();
        let mut buf = String::new();
        while let Some((i, c)) = chars.next() {
            let is_last = chars.peek().is_none();
            buf.clear();
            if i > 0
                && let Some(p) = &self.continuing_subword_prefix
            {
                buf.push_str(p);
            }
            buf.push(c);
            if is_last && let Some(s) = &self.end_of_word_suffix {
                buf.push_str(s);
            }
            if let Some(&id) = self.vocab.get(buf.as_str()) {
                if let Some(u) = unk.take() {
                    symbols.push(u);
                }
                symbols.push(id);
                continue;
            }
            if self.byte_fallback
                && let Some(ids) = &self.byte_ids
            {
                symbols.extend(buf.bytes().map(|b| ids[usize::from(b)]));
                continue;
            }
            if let Some(u) = self.unk {
                match unk {
                    Some(_) if self.fuse_unk => {}
                    Some(prev) => {
                        symbols.push(prev);
                        unk = Some(u);
                    }
                    None => unk = Some(u),
                }
            }
        }
        if let Some(u) = unk {
            symbols.push(u);
        }
        self.merge_all(&mut symbols);
        out.extend_from_slice(&symbols);
    }

    /// Applies merges lowest rank first (leftmost on ties) until none applies.
    fn merge_all(&self, symbols: &mut Vec<u32>) {
        let n = symbols.len();
        if n < 2 {
            return;
        }
        // Doubly linked list over positions; `alive[i]` false once merged into its left.
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut alive = vec![true; n];
        // Min-heap on (rank, position); the entry remembers the merged id it expects.
        let mut heap: BinaryHeap<Reverse<(u32, usize, u32)>> = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some(&(rank, id)) = self.merges.get(&(symbols[i], symbols[i + 1])) {
                heap.push(Reverse((rank, i, id)));
            }
        }
        while let Some(Reverse((_, pos, id))) = heap.pop() {
            if !alive[pos] || next[pos] >= n {
                continue;
            }
            let right = next[pos];
            // Skip stale entries: the pair at `pos` must still merge into `id`.
            match self.merges.get(&(symbols[pos], symbols[right])) {
                Some(&(_, m)) if m == id => {}
                _ => continue,
            }
            symbols[pos] = id;
            alive[right] = false;
            next[pos] = next[right];
            if next[right] < n {
                prev[next[right]] = pos;
            }
            if prev[pos] < n
                && let Some(&(rank, m)) = self.merges.get(&(symbols[prev[pos]], id))
            {
                heap.push(Reverse((rank, prev[pos], m)));
            }
            if next[pos] < n
                && let Some(&(rank, m)) = self.merges.get(&(id, symbols[next[pos]]))
            {
                heap.push(Reverse((rank, pos, m)));
            }
        }
        let mut w = 0;
        for i in 0..n {
            if alive[i] {
                symbols[w] = symbols[i];
                w += 1;
            }
        }
        symbols.truncate(w);
    }
}

/// WordPiece: greedy longest match.
#[derive(Debug, Clone)]
pub struct WordPiece {
    vocab: Vocab,
    unk: u32,
    prefix: String,
    max_input_chars_per_word: usize,
}

impl WordPiece {
    fn from_json(v: &Value) -> Result<Self> {
        let vocab = parse_vocab_map(opt(v, "vocab"), "model.vocab")?;
        let unk_token = opt_str(v, "unk_token", "model")?.unwrap_or("[UNK]");
        let unk = *vocab
            .get(unk_token)
            .ok_or_else(|| tok_err!("model.unk_token {unk_token:?} is not in the vocab"))?;
        Ok(Self {
            vocab,
            unk,
            prefix: opt_str(v, "continuing_subword_prefix", "model")?
                .unwrap_or("##")
                .to_string(),
            max_input_chars_per_word: usize_or(v, "max_input_chars_per_word", 100, "model")?,
        })
    }

    /// Tokenizes one piece.
    pub fn tokenize(&self, piece: &str, out: &mut Vec<u32>) {
        if piece.chars().count() > self.max_input_chars_per_word {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut start = 0;
        let mut buf = String::new();
        while start < piece.len() {
            let mut end = piece.len();
            let mut found = None;
            while start < end {
                buf.clear();
                if start > 0 {
                    buf.push_str(&self.prefix);
                }
                buf.push_str(&piece[start..end]);
                if let Some(&id) = self.vocab.get(buf.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= piece[start..end]
                    .chars()
                    .next_back()
                    .map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// Unigram language model, decoded with Viterbi.
#[derive(Debug, Clone)]
pub struct Unigram {
    vocab: Vocab,
    scores: Vec<f64>,
    unk: Option<u32>,
    byte_fallback: bool,
    min_score: f64,
    max_piece_len: usize,
}

const UNK_PENALTY: f64 = 10.0;

impl Unigram {
    /// Builds a Unigram model from `(piece, log-probability)` pairs (id = position).
    pub fn new(pieces: Vec<(String, f64)>, unk: Option<u32>, byte_fallback: bool) -> Result<Self> {
        let mut vocab = Vocab::with_capacity(pieces.len());
        let mut scores = Vec::with_capacity(pieces.len());
        let mut min_score = f64::INFINITY;
        let mut max_piece_len = 1;
        for (i, (p, s)) in pieces.into_iter().enumerate() {
            min_score = min_score.min(s);
            max_piece_len = max_piece_len.max(p.len());
            vocab.insert(p, i as u32);
            scores.push(s);
        }
        if let Some(u) = unk
            && u as usize >= scores.len()
        {
            return Err(tok_err!(
                "model.unk_id {u} is out of range (vocab size {})",
                scores.len()
            ));
        }
        if byte_fallback && byte_ids(&vocab).is_none() {
            return Err(tok_err!(
                "model.byte_fallback is true but the vocab lacks some of the 256 tokens <0x00>…<0xFF>"
            ));
        }
        Ok(Self {
            vocab,
            scores,
            unk,
            byte_fallback,
            min_score,
            max_piece_len,
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        let list = opt(v, "vocab")
            .and_then(Value::as_array)
            .ok_or_else(|| tok_err!("model.vocab: expected an array of [piece, score]"))?;
        let mut pieces = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            match item.as_array().map(Vec::as_slice) {
                Some([p, s]) => match (p.as_str(), s.as_f64()) {
                    (Some(p), Some(s)) => pieces.push((p.to_string(), s)),
                    _ => return Err(tok_err!("model.vocab[{i}]: expected [string, number]")),
                },
                _ => return Err(tok_err!("model.vocab[{i}]: expected [piece, score]")),
            }
        }
        let unk = match opt(v, "unk_id") {
            Some(x) => Some(as_id(x, "model.unk_id")?),
            None => None,
        };
        Self::new(pieces, unk, bool_or(v, "byte_fallback", false, "model")?)
    }

    /// Tokenizes one piece; fails only if an unknown character meets a model without unk.
    pub fn tokenize(&self, piece: &str, out: &mut Vec<u32>) -> Result<()> {
        let len = piece.len();
        if len == 0 {
            return Ok(());
        }
        // best[e] = (score, start, id) of the best path ending at byte e.
        let mut best: Vec<Option<(f64, usize, u32)>> = vec![None; len + 1];
        best[0] = Some((0.0, 0, 0));
        let unk_score = self.min_score - UNK_PENALTY;
        let mut start = 0;
        while start < len {
            let mblen = piece[start..].chars().next().map_or(1, char::len_utf8);
            // Every character boundary is reachable (an unknown piece always is), but
            // step by whole characters regardless.
            let Some((here, _, _)) = best[start] else {
                start += mblen;
                continue;
            };
            let mut single = false;
            let limit = (start + self.max_piece_len).min(len);
            for end in start + 1..=limit {
                if !piece.is_char_boundary(end) {
                    continue;
                }
                if let Some(&id) = self.vocab.get(&piece[start..end]) {
                    let cand = here + self.scores[id as usize];
                    if best[end].is_none_or(|(s, _, _)| cand > s) {
                        best[end] = Some((cand, start, id));
                    }
                    if end - start == mblen {
                        single = true;
                    }
                }
            }
            if !single {
                let end = start + mblen;
                let cand = here + unk_score;
                if best[end].is_none_or(|(s, _, _)| cand > s) {
                    best[end] = Some((cand, start, self.unk.unwrap_or(u32::MAX)));
                }
            }
            start += mblen;
        }
        // Walk back, fusing runs of unknown pieces.
        let mut spans: Vec<(usize, usize, u32)> = Vec::new();
        let mut end = len;
        while end > 0 {
            let Some((_, s, id)) = best[end] else { break };
            let is_unk = id == u32::MAX || Some(id) == self.unk;
            match spans.last_mut() {
                Some(last) if is_unk && last.2 == u32::MAX => last.0 = s,
                _ => spans.push((s, end, if is_unk { u32::MAX } else { id })),
            }
            end = s;
        }
        spans.reverse();
        for (s, e, id) in spans {
            if id != u32::MAX {
                out.push(id);
                continue;
            }
            let text = &piece[s..e];
            if let Some(&id) = self.vocab.get(text) {
                out.push(id);
            } else if self.byte_fallback {
                for b in text.bytes() {
                    let id = self.vocab.get(&byte_token(b)).copied().or(self.unk);
                    out.extend(id);
                }
            } else {
                out.push(self.unk.ok_or_else(|| {
                    tok_err!("unigram model has no unk_id and cannot encode {text:?}")
                })?);
            }
        }
        Ok(())
    }
}

/// Whole-piece lookup.
#[derive(Debug, Clone)]
pub struct WordLevel {
    vocab: Vocab,
    unk: Option<u32>,
}

/// SentencePiece BPE as llama.cpp runs GGUF `llama` vocabularies: characters merge by
/// highest piece score (leftmost on ties); leftovers become `<0xNN>` byte tokens.
#[derive(Debug, Clone)]
pub struct Spm {
    vocab: Vocab,
    scores: Vec<f32>,
    unk: Option<u32>,
    byte_ids: Option<Box<[u32; 256]>>,
}

impl Spm {
    /// Builds the model from pieces (id = position) and their scores.
    pub fn new(tokens: &[String], scores: Vec<f32>, unk: Option<u32>) -> Result<Self> {
        if scores.len() != tokens.len() {
            return Err(tok_err!(
                "tokenizer.ggml.scores has {} entries for {} tokens",
                scores.len(),
                tokens.len()
            ));
        }
        let mut vocab = Vocab::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            vocab.entry(t.clone()).or_insert(i as u32);
        }
        let byte_ids = byte_ids(&vocab);
        Ok(Self {
            vocab,
            scores,
            unk,
            byte_ids,
        })
    }

    /// Tokenizes one piece (already with spaces replaced by `▁`).
    pub fn tokenize(&self, piece: &str, out: &mut Vec<u32>) {
        // Symbols as byte ranges of `piece`, linked.
        let starts: Vec<usize> = piece.char_indices().map(|(i, _)| i).collect();
        let n = starts.len();
        if n == 0 {
            return;
        }
        let mut range: Vec<(usize, usize)> = (0..n)
            .map(|i| (starts[i], starts.get(i + 1).copied().unwrap_or(piece.len())))
            .collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        // Max-heap on score, then leftmost position; entries carry the expected length.
        #[derive(PartialEq)]
        struct Cand(f32, usize, usize);
        impl Eq for Cand {}
        impl PartialOrd for Cand {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Cand {
            fn cmp(&self, o: &Self) -> Ordering {
                self.0.total_cmp(&o.0).then_with(|| o.1.cmp(&self.1))
            }
        }
        let mut heap = BinaryHeap::new();
        let try_pair =
            |heap: &mut BinaryHeap<Cand>, l: usize, r: usize, range: &[(usize, usize)]| {
                let text = &piece[range[l].0..range[r].1];
                if let Some(&id) = self.vocab.get(text) {
                    heap.push(Cand(self.scores[id as usize], l, text.len()));
                }
            };
        for i in 0..n - 1 {
            try_pair(&mut heap, i, i + 1, &range);
        }
        while let Some(Cand(_, l, size)) = heap.pop() {
            if !alive[l] || next[l] >= n {
                continue;
            }
            let r = next[l];
            if range[r].1 - range[l].0 != size {
                continue;
            }
            range[l].1 = range[r].1;
            alive[r] = false;
            next[l] = next[r];
            if next[r] < n {
                prev[next[r]] = l;
            }
            if prev[l] < n {
                try_pair(&mut heap, prev[l], l, &range);
            }
            if next[l] < n {
                try_pair(&mut heap, l, next[l], &range);
            }
        }
        for i in (0..n).filter(|&i| alive[i]) {
            let text = &piece[range[i].0..range[i].1];
            if let Some(&id) = self.vocab.get(text) {
                out.push(id);
            } else if let Some(ids) = &self.byte_ids {
                out.extend(text.bytes().map(|b| ids[usize::from(b)]));
            } else if let Some(u) = self.unk {
                out.push(u);
            }
        }
    }
}

/// Parses a `{token: id}` object.
pub(crate) fn parse_vocab_map(v: Option<&Value>, path: &str) -> Result<Vocab> {
    let map = obj(v.ok_or_else(|| tok_err!("{path}: missing"))?, path)?;
    let mut vocab = Vocab::with_capacity(map.len());
    for (k, id) in map {
        vocab.insert(k.clone(), as_id(id, &format!("{path}[{k:?}]"))?);
    }
    Ok(vocab)
}

impl Model {
    /// Parses the `model` object.
    pub fn from_json(v: &Value) -> Result<Self> {
        obj(v, "model")?;
        // Older files omit `type`; guess from the fields as the reference does.
        let tag = match type_tag(v, "model") {
            Ok(t) => t,
            Err(_) if v.get("merges").is_some() => "BPE",
            Err(_) if v.get("vocab").is_some_and(Value::is_array) => "Unigram",
            Err(e) => return Err(e),
        };
        Ok(match tag {
            "BPE" => Self::Bpe(Bpe::from_json(v)?),
            "WordPiece" => Self::WordPiece(WordPiece::from_json(v)?),
            "Unigram" => Self::Unigram(Unigram::from_json(v)?),
            "WordLevel" => {
                let vocab = parse_vocab_map(opt(v, "vocab"), "model.vocab")?;
                let unk =
                    match opt_str(v, "unk_token", "model")? {
                        Some(u) => Some(*vocab.get(u).ok_or_else(|| {
                            tok_err!("model.unk_token {u:?} is not in the vocab")
                        })?),
                        None => None,
                    };
                Self::WordLevel(WordLevel { vocab, unk })
            }
            other => return Err(tok_err!("model: unknown model type {other:?}")),
        })
    }

    /// Tokenizes one pre-tokenized piece, appending ids.
    pub fn tokenize(&self, piece: &str, out: &mut Vec<u32>) -> Result<()> {
        match self {
            Self::Bpe(m) => m.tokenize(piece, out),
            Self::WordPiece(m) => m.tokenize(piece, out),
            Self::Unigram(m) => m.tokenize(piece, out)?,
            Self::Spm(m) => m.tokenize(piece, out),
            Self::Wpm(m) => m.tokenize(piece, out),
            Self::WordLevel(m) => match m.vocab.get(piece).copied().or(m.unk) {
                Some(id) => out.push(id),
                None => {
                    return Err(tok_err!(
                        "word-level model has no unk_token and cannot encode {piece:?}"
                    ));
                }
            },
        }
        Ok(())
    }

    /// The id of a token string.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.vocab().get(token).copied()
    }

    /// The model's token-to-id map.
    pub fn vocab(&self) -> &Vocab {
        match self {
            Self::Bpe(m) => &m.vocab,
            Self::WordPiece(m) => &m.vocab,
            Self::Unigram(m) => &m.vocab,
            Self::WordLevel(m) => &m.vocab,
            Self::Spm(m) => &m.vocab,
            Self::Wpm(m) => &m.vocab,
        }
    }
}
