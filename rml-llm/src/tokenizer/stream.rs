//! Incremental detokenization for generation loops.

use super::Tokenizer;

/// Decodes ids one at a time, emitting text only once it is complete UTF-8.
///
/// It keeps the ids of the last emitted chunk as context, so decoders that look at
/// neighbours (Metaspace's leading space, WordPiece's `##` joins, byte-level and
/// `<0xNN>` pieces of one character split over several tokens) give the same text as a
/// one-shot [`Tokenizer::decode`] of the whole sequence (before llama.cpp's space clean-up,
/// which looks ahead and, as in llama.cpp, applies to one-shot decoding only).
#[derive(Debug, Clone)]
pub struct DecodeStream<'t> {
    tokenizer: &'t Tokenizer,
    skip_special_tokens: bool,
    /// Context ids followed by pending ids.
    ids: Vec<u32>,
    /// How many of `ids` are context.
    context: usize,
    /// The decoding of the context ids alone.
    prefix: String,
}

impl<'t> DecodeStream<'t> {
    /// A fresh stream.
    pub fn new(tokenizer: &'t Tokenizer, skip_special_tokens: bool) -> Self {
        Self {
            tokenizer,
            skip_special_tokens,
            ids: Vec::new(),
            context: 0,
            prefix: String::new(),
        }
    }

    /// Feeds one id; returns the text it completes, if any.
    pub fn step(&mut self, id: u32) -> Option<String> {
        self.ids.push(id);
        let text = self
            .tokenizer
            .decode_pieces(&self.ids, self.skip_special_tokens);
        if text.len() <= self.prefix.len() || text.ends_with('\u{fffd}') {
            return None;
        }
        Some(self.emit(text))
    }

    /// Flushes what is pending, incomplete characters included (as U+FFFD).
    pub fn finish(&mut self) -> Option<String> {
        if self.ids.len() == self.context {
            return None;
        }
        let text = self
            .tokenizer
            .decode_pieces(&self.ids, self.skip_special_tokens);
        let out = self.emit(text);
        if out.is_empty() { None } else { Some(out) }
    }

    fn emit(&mut self, text: String) -> String {
        // The new text is what follows the context's own decoding; if a decoder rewrote
        // the boundary, fall back on the longest common prefix.
        let cut = if text.starts_with(&self.prefix) {
            self.prefix.len()
        } else {
            let mut n = 0;
            for ((i, a), b) in text.char_indices().zip(self.prefix.chars()) {
                if a != b {
                    break;
                }
                n = i + a.len_utf8();
            }
            n
        };
        let out = text[cut..].to_string();
        self.ids.drain(..self.context);
        self.context = self.ids.len();
        self.prefix = self
            .tokenizer
            .decode_pieces(&self.ids, self.skip_special_tokens);
        out
    }
}
