//! Tokenizers from GGUF vocabularies (`tokenizer.ggml.*` metadata).
//!
//! A GGUF reader fills a [`GgufVocab`]; [`GgufVocab::build`] turns it into a
//! [`Tokenizer`] that follows llama.cpp's rules:
//!
//! - `tokenizer.ggml.model = "llama"` (SentencePiece): score-driven merges ([`Spm`]),
//!   spaces as `▁`, a `▁` prefix at the start of the text and after every special token
//!   when `add_space_prefix` (default true), `<0xNN>` byte fallback, BOS by default;
//! - `tokenizer.ggml.model = "gpt2"` (byte-level BPE): ranked merges, the Split regex
//!   chosen by `tokenizer.ggml.pre`; for the Llama 3 family (`llama3`, `llama-v3`,
//!   `llama-bpe`, `falcon3`, `pixtral`) `ignore_merges` and BOS are forced on, as
//!   llama.cpp does. An unknown `pre` is an error rather than a silent default.
//!
//! Control (3) and user-defined (4) tokens become added tokens matched before the model;
//! control tokens are special.
//!
//! [`GgufVocab::from_gguf`] reads the keys from an `rml_host` GGUF reader;
//! [`Tokenizer::from_gguf_file`] does both steps for a path.

use std::path::Path;

use rml_host::formats::gguf::Gguf;

use super::decoder::{Decoder, PostProcessor, TemplateItem};
use super::model::{Bpe, BpeOptions, Model, Spm, Vocab, Wpm};
use super::normalizer::Normalizer;
use super::pattern::{GPT2_PATTERN, LLAMA3_PATTERN, Pattern, QWEN2_PATTERN, QWEN35_PATTERN};
use super::pretokenizer::{PreTokenizer, SplitBehavior};
use super::util::{Result, tok_err};
use super::{AddedToken, Tokenizer};

/// GGUF token type: normal.
pub const TOKEN_NORMAL: i32 = 1;
/// GGUF token type: unknown.
pub const TOKEN_UNKNOWN: i32 = 2;
/// GGUF token type: control (BOS, EOS, chat markers).
pub const TOKEN_CONTROL: i32 = 3;
/// GGUF token type: user-defined (added, matched in text).
pub const TOKEN_USER_DEFINED: i32 = 4;
/// GGUF token type: unused.
pub const TOKEN_UNUSED: i32 = 5;
/// GGUF token type: byte (`<0xNN>`).
pub const TOKEN_BYTE: i32 = 6;

/// The tokenizer metadata of a GGUF file, as a reader extracts it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model`: `llama` or `gpt2`.
    pub model: String,
    /// `tokenizer.ggml.pre`.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores`.
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type`.
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges` ("left right", rank order).
    pub merges: Option<Vec<String>>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos_token_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unknown_token_id: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub padding_token_id: Option<u32>,
    /// `tokenizer.ggml.cls_token_id` (BERT's BOS).
    pub cls_token_id: Option<u32>,
    /// `tokenizer.ggml.seperator_token_id` (sic; BERT's EOS).
    pub separator_token_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos_token: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos_token: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.chat_template` (the Jinja source), if the file has one.
    pub chat_template: Option<String>,
}

/// llama.cpp's GPT-2 split regex (the GPT-2 pattern without its final `\s+`).
const LLAMACPP_GPT2: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";

/// The letters class of llama.cpp's `deepseek-llm` pre-tokenizer (cased letters; code
/// points with canonical singleton decompositions are written as escapes so that no
/// normalization of this source file can change them).
const DEEPSEEK_LLM_LETTERS: &str = r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

/// Whether llama.cpp cleans up spaces (`a , b` → `a, b`) when detokenizing a byte-level
/// BPE vocabulary with this `tokenizer.ggml.pre`: on by default, off for the families
/// whose Hugging Face tokenizers do not clean up.
pub fn pre_cleans_spaces(pre: &str) -> bool {
    !matches!(
        pre,
        "deepseek-llm"
            | "deepseek-coder"
            | "deepseek-v3"
            | "command-r"
            | "qwen2"
            | "qwen35"
            | "deepseek-r1-qwen"
            | "poro-chat"
            | "viking"
            | "tekken"
            | "smollm"
            | "chameleon"
            | "gpt-4o"
            | "llama4"
            | "superbpe"
            | "trillion"
            | "bailingmoe"
            | "llada-moe"
            | "seed-coder"
            | "hunyuan"
            | "hunyuan-dense"
            | "kimi-k2"
            | "grok-2"
    )
}

/// The Split regexes (applied in turn, each isolating its matches) for a
/// `tokenizer.ggml.pre` value, and whether llama.cpp forces `ignore_merges` and BOS.
/// The lists are llama.cpp's (`llm_tokenizer_bpe`), which quote the `tokenizer.json`
/// originals.
pub fn pre_patterns(pre: &str) -> Result<(Vec<&'static str>, bool)> {
    const NOT_PUNCT: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";
    Ok(match pre {
        "default" => (
            vec![
                r"[\p{P}\$\+<=>\^~\|]+",
                LLAMACPP_GPT2,
                r"\p{N}+",
                "[0-9][0-9][0-9]",
            ],
            false,
        ),
        "gpt-2" | "gpt2" | "phi-2" | "mpt" | "olmo" | "jais" | "trillion" | "granite-docling" => {
            (vec![GPT2_PATTERN], false)
        }
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" => {
            (vec![r"\p{N}", GPT2_PATTERN], false)
        }
        "falcon" => (
            vec![r"[\p{P}\$\+<=>\^~\|`]+", LLAMACPP_GPT2, "[0-9][0-9][0-9]"],
            false,
        ),
        "deepseek-coder" => (
            vec![
                "[\r\n]",
                r"\s?\p{L}+",
                r"\s?\p{P}+",
                "[\u{4E00}-\u{9FA5}\u{0800}-\u{4E00}\u{AC00}-\u{D7FF}]+",
                r"\p{N}",
            ],
            false,
        ),
        "deepseek-llm" => (
            vec![
                "[\r\n]",
                DEEPSEEK_LLM_LETTERS,
                r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
                r"\s+$",
                "[\u{4E00}-\u{9FA5}\u{0800}-\u{4E00}\u{AC00}-\u{D7FF}]+",
                r"\p{N}+",
            ],
            false,
        ),
        "poro-chat" | "bloom" | "gpt3-finnish" => (vec![NOT_PUNCT], false),
        "viking" => (vec![NOT_PUNCT, r"\p{N}"], false),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => (vec![LLAMA3_PATTERN], true),
        "dbrx" | "smaug-bpe" | "chatglm-bpe" => (vec![LLAMA3_PATTERN], false),
        "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "hunyuan" | "grok-2" => {
            (vec![QWEN2_PATTERN], false)
        }
        "qwen35" => (vec![QWEN35_PATTERN], false),
        other => {
            return Err(tok_err!(
                "tokenizer.ggml.pre {other:?} is not supported (known: default, gpt-2, phi-2, mpt, olmo, jais, \
                 trillion, granite-docling, starcoder, refact, command-r, smollm, codeshell, exaone, falcon, \
                 deepseek-coder, deepseek-llm, poro-chat, bloom, gpt3-finnish, viking, llama3, llama-v3, \
                 llama-bpe, falcon3, pixtral, dbrx, smaug-bpe, chatglm-bpe, qwen2, deepseek-r1-qwen, \
                 stablelm2, hunyuan, grok-2, qwen35)"
            ));
        }
    })
}

impl GgufVocab {
    fn check_id(&self, id: Option<u32>, key: &str) -> Result<Option<u32>> {
        match id {
            Some(i) if i as usize >= self.tokens.len() => Err(tok_err!(
                "tokenizer.ggml.{key} = {i} is out of range ({} tokens)",
                self.tokens.len()
            )),
            other => Ok(other),
        }
    }

    fn added_tokens(&self) -> Result<Vec<AddedToken>> {
        let Some(types) = &self.token_types else {
            return Ok(Vec::new());
        };
        if types.len() != self.tokens.len() {
            return Err(tok_err!(
                "tokenizer.ggml.token_type has {} entries for {} tokens",
                types.len(),
                self.tokens.len()
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (i, (t, &ty)) in self.tokens.iter().zip(types).enumerate() {
            if (ty == TOKEN_CONTROL || ty == TOKEN_USER_DEFINED)
                && !t.is_empty()
                && seen.insert(t.clone())
            {
                let mut a = AddedToken::special(i as u32, t);
                a.special = ty == TOKEN_CONTROL;
                out.push(a);
            }
        }
        Ok(out)
    }

    /// Builds the tokenizer, validating ids, scores, merges and the `pre` name.
    pub fn build(&self) -> Result<Tokenizer> {
        if self.tokens.is_empty() {
            return Err(tok_err!("tokenizer.ggml.tokens is empty"));
        }
        let bos = self.check_id(self.bos_token_id, "bos_token_id")?;
        let eos = self.check_id(self.eos_token_id, "eos_token_id")?;
        let unk = self.check_id(self.unknown_token_id, "unknown_token_id")?;
        self.check_id(self.padding_token_id, "padding_token_id")?;
        let added = self.added_tokens()?;
        let (model, normalizer, pre, decoder, default_bos) = match self.model.as_str() {
            "llama" => {
                let scores = self.scores.clone().ok_or_else(|| {
                    tok_err!("tokenizer.ggml.scores is required for model \"llama\"")
                })?;
                let model = Model::Spm(Spm::new(&self.tokens, scores, unk)?);
                let mut norms = Vec::new();
                if self.add_space_prefix.unwrap_or(true) {
                    norms.push(Normalizer::Prepend(" ".to_string()));
                }
                norms.push(Normalizer::Replace {
                    pattern: Pattern::Literal(" ".to_string()),
                    content: "\u{2581}".to_string(),
                });
                let mut decoders = vec![
                    Decoder::Replace {
                        pattern: Pattern::Literal("\u{2581}".to_string()),
                        content: " ".to_string(),
                    },
                    Decoder::ByteFallback,
                    Decoder::Fuse,
                ];
                if self.add_space_prefix.unwrap_or(true) {
                    decoders.push(Decoder::Strip {
                        content: ' ',
                        start: 1,
                        stop: 0,
                    });
                }
                (
                    model,
                    Some(Normalizer::Sequence(norms)),
                    None,
                    Decoder::Sequence(decoders),
                    false,
                )
            }
            "gpt2" => {
                let pre_name = self.pre.as_deref().unwrap_or("default");
                let (regexes, llama3) = pre_patterns(pre_name)?;
                let mut vocab = Vocab::with_capacity(self.tokens.len());
                for (i, t) in self.tokens.iter().enumerate() {
                    vocab.entry(t.clone()).or_insert(i as u32);
                }
                let merges = self.merges.as_ref().ok_or_else(|| {
                    tok_err!("tokenizer.ggml.merges is required for model \"gpt2\"")
                })?;
                let mut pairs = Vec::with_capacity(merges.len());
                for (i, m) in merges.iter().enumerate() {
                    match m.split_once(' ') {
                        Some((a, b)) => pairs.push((a.to_string(), b.to_string())),
                        None => {
                            return Err(tok_err!(
                                "tokenizer.ggml.merges[{i}] = {m:?} is not \"left right\""
                            ));
                        }
                    }
                }
                let options = BpeOptions {
                    ignore_merges: llama3,
                    ..BpeOptions::default()
                };
                let model =
                    Model::Bpe(Bpe::new(vocab, &pairs, options).map_err(|e| e.context("gguf"))?);
                let mut steps = Vec::with_capacity(regexes.len() + 1);
                for regex in regexes {
                    steps.push(PreTokenizer::Split {
                        pattern: Pattern::regex(regex)?,
                        behavior: SplitBehavior::Isolated,
                        invert: false,
                    });
                }
                steps.push(PreTokenizer::ByteLevel {
                    add_prefix_space: false,
                    use_regex: false,
                });
                let pre = PreTokenizer::Sequence(steps);
                (model, None, Some(pre), Decoder::ByteLevel, llama3)
            }
            "bert" => {
                let model = Model::Wpm(Wpm::new(&self.tokens, unk));
                let decoder = Decoder::Sequence(vec![
                    Decoder::Replace {
                        pattern: Pattern::Literal("\u{2581}".to_string()),
                        content: " ".to_string(),
                    },
                    // llama.cpp keeps the phantom space of the first word.
                    Decoder::Fuse,
                ]);
                (model, None, Some(PreTokenizer::Wpm), decoder, false)
            }
            other => {
                return Err(tok_err!(
                    "tokenizer.ggml.model {other:?} is not supported (supported: llama, gpt2, bert)"
                ));
            }
        };
        // llama: BOS unless the file says otherwise; gpt2: only when asked, except the
        // Llama 3 family where llama.cpp forces it.
        let add_bos = match self.model.as_str() {
            "llama" => self.add_bos_token.unwrap_or(true),
            "bert" => self.add_bos_token.unwrap_or(true),
            _ => default_bos || self.add_bos_token.unwrap_or(false),
        };
        let add_eos = self.add_eos_token.unwrap_or(self.model == "bert");
        // BERT files name their BOS/EOS as CLS/SEP.
        let (bos, eos) = if self.model == "bert" {
            (
                bos.or(self.check_id(self.cls_token_id, "cls_token_id")?),
                eos.or(self.check_id(self.separator_token_id, "seperator_token_id")?),
            )
        } else {
            (bos, eos)
        };
        let mut single = Vec::new();
        let mut pair = Vec::new();
        if add_bos {
            let b = bos.ok_or_else(|| {
                tok_err!("add_bos_token is set but tokenizer.ggml.bos_token_id is missing")
            })?;
            single.push(TemplateItem::Special(vec![b]));
            pair.push(TemplateItem::Special(vec![b]));
        }
        single.push(TemplateItem::A);
        pair.push(TemplateItem::A);
        if add_eos {
            let e = eos.ok_or_else(|| {
                tok_err!("add_eos_token is set but tokenizer.ggml.eos_token_id is missing")
            })?;
            single.push(TemplateItem::Special(vec![e]));
            pair.push(TemplateItem::Special(vec![e]));
        }
        pair.push(TemplateItem::B);
        if let (true, Some(e)) = (add_eos, eos) {
            pair.push(TemplateItem::Special(vec![e]));
        }
        let post = PostProcessor::Template { single, pair };
        let clean_spaces = match self.model.as_str() {
            "llama" => false,
            "bert" => true,
            _ => pre_cleans_spaces(self.pre.as_deref().unwrap_or("default")),
        };
        Tokenizer::from_parts(model, normalizer, pre, Some(post), Some(decoder), added)
            .map(|t| t.with_clean_spaces(clean_spaces))
    }
}

fn gguf_err(e: impl std::fmt::Display) -> super::TokenizerError {
    tok_err!("{e}")
}

impl GgufVocab {
    /// Reads the `tokenizer.ggml.*` keys of a parsed GGUF file.
    pub fn from_gguf<B: AsRef<[u8]>>(g: &Gguf<B>) -> Result<Self> {
        const P: &str = "tokenizer.ggml.";
        let key = |k: &str| format!("{P}{k}");
        let id = |k: &str| -> Result<Option<u32>> {
            if g.contains_key(&key(k)) {
                g.get_int::<u32>(&key(k)).map(Some).map_err(gguf_err)
            } else {
                Ok(None)
            }
        };
        let flag = |k: &str| -> Result<Option<bool>> {
            if g.contains_key(&key(k)) {
                g.get_bool(&key(k)).map(Some).map_err(gguf_err)
            } else {
                Ok(None)
            }
        };
        let model = g.get_str(&key("model")).map_err(gguf_err)?.to_string();
        let pre = if g.contains_key(&key("pre")) {
            Some(g.get_str(&key("pre")).map_err(gguf_err)?.to_string())
        } else {
            None
        };
        let tokens = g
            .get_str_array(&key("tokens"))
            .map_err(gguf_err)?
            .into_iter()
            .map(str::to_string)
            .collect();
        let scores = if g.contains_key(&key("scores")) {
            Some(g.get_f32_array(&key("scores")).map_err(gguf_err)?)
        } else {
            None
        };
        let token_types = if g.contains_key(&key("token_type")) {
            let raw = g.get_int_array(&key("token_type")).map_err(gguf_err)?;
            let mut out = Vec::with_capacity(raw.len());
            for (i, t) in raw.into_iter().enumerate() {
                out.push(
                    i32::try_from(t)
                        .map_err(|_| tok_err!("{P}token_type[{i}] = {t} is out of range"))?,
                );
            }
            Some(out)
        } else {
            None
        };
        let merges = if g.contains_key(&key("merges")) {
            Some(
                g.get_str_array(&key("merges"))
                    .map_err(gguf_err)?
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
            )
        } else {
            None
        };
        Ok(Self {
            model,
            pre,
            tokens,
            scores,
            token_types,
            merges,
            bos_token_id: id("bos_token_id")?,
            eos_token_id: id("eos_token_id")?,
            unknown_token_id: id("unknown_token_id")?,
            padding_token_id: id("padding_token_id")?,
            cls_token_id: id("cls_token_id")?,
            separator_token_id: match id("seperator_token_id")? {
                Some(x) => Some(x),
                None => id("separator_token_id")?,
            },
            add_bos_token: flag("add_bos_token")?,
            add_eos_token: flag("add_eos_token")?,
            add_space_prefix: flag("add_space_prefix")?,
            chat_template: if g.contains_key("tokenizer.chat_template") {
                Some(
                    g.get_str("tokenizer.chat_template")
                        .map_err(gguf_err)?
                        .to_string(),
                )
            } else {
                None
            },
        })
    }
}

impl Tokenizer {
    /// Loads the tokenizer stored in a GGUF file's metadata.
    pub fn from_gguf_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let g = Gguf::open(path).map_err(gguf_err)?;
        GgufVocab::from_gguf(&g)
            .and_then(|v| v.build())
            .map_err(|e| e.context(&path.display().to_string()))
    }
}
