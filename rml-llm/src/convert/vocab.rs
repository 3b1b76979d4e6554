//! A Hugging Face tokenizer (`tokenizer.json` + `tokenizer_config.json`) as GGUF
//! `tokenizer.ggml.*` metadata, in the two forms the GGUF tokenizer loader
//! ([`crate::tokenizer::gguf`]) and llama.cpp read:
//!
//! * **byte-level BPE** (a `ByteLevel` pre-tokenizer or decoder) → model `gpt2`:
//!   tokens, token types, merges, and `pre` from the split regex (`llama-bpe`,
//!   `qwen2`, `qwen35`, or `gpt-2` for ByteLevel's own regex);
//! * **SentencePiece-style BPE** (`▁` spaces, `byte_fallback`) → model `llama`: each
//!   token's score is minus the rank of the merge that makes it, so the score-driven
//!   SentencePiece merge order is the BPE rank order; `<0xNN>` tokens are bytes.
//!
//! Special added tokens become control tokens, other added tokens user-defined ones;
//! ids missing from the vocabulary (and rows up to the model's vocabulary size) are
//! `[PAD<i>]` unused tokens. Unigram, WordPiece and WordLevel tokenizers are refused
//! by name. BOS/EOS come from `tokenizer_config.json` (else `config.json`); BOS is
//! added when `add_bos_token` says so or the post-processor template starts with it
//! (which also names BOS when nothing else does).

use std::path::Path;

use rml_host::formats::gguf::OwnedValue;
use serde_json::Value;

use crate::chat::TokenizerConfig;
use crate::error::{Error, Result};
use crate::tokenizer::gguf::{
    TOKEN_BYTE, TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_UNUSED, TOKEN_USER_DEFINED,
};
use crate::tokenizer::model::parse_byte_token;
use crate::tokenizer::pattern::{LLAMA3_PATTERN, QWEN2_PATTERN, QWEN35_PATTERN};

fn bad(file: &str, what: impl std::fmt::Display) -> Error {
    Error::Input(format!("{file}: {what}"))
}

/// Every object of a `type`d component, descending into `Sequence`s.
fn components<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    if let Some(list) = v
        .get("pretokenizers")
        .or_else(|| v.get("normalizers"))
        .or_else(|| v.get("decoders"))
        .or_else(|| v.get("processors"))
        .and_then(Value::as_array)
    {
        list.iter().for_each(|x| components(x, out));
    } else if v.is_object() {
        out.push(v);
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    let mut all = Vec::new();
    components(v, &mut all);
    all.iter().any(|c| c["type"] == ty)
}

/// The GGUF `pre` name of a byte-level tokenizer's pre-tokenizer.
fn pre_name(pre: &Value) -> Result<&'static str> {
    let mut all = Vec::new();
    components(pre, &mut all);
    let regexes: Vec<&str> = all
        .iter()
        .filter(|c| c["type"] == "Split")
        .filter_map(|c| c["pattern"]["Regex"].as_str())
        .collect();
    match regexes.as_slice() {
        [] if all
            .iter()
            .any(|c| c["type"] == "ByteLevel" && c["use_regex"] != false) =>
        {
            Ok("gpt-2")
        }
        [r] if *r == LLAMA3_PATTERN => Ok("llama-bpe"),
        [r] if *r == QWEN2_PATTERN => Ok("qwen2"),
        [r] if *r == QWEN35_PATTERN => Ok("qwen35"),
        other => Err(bad(
            "tokenizer.json",
            format!(
                "the pre-tokenizer's split {other:?} is not one of the known ones (GPT-2, Llama 3, Qwen2, Qwen3.5)"
            ),
        )),
    }
}

/// The `tokenizer.ggml.*` keys (and `tokenizer.chat_template`) of the tokenizer in
/// `dir`, padded to `vocab_size` tokens; `None` when there is no `tokenizer.json`.
pub fn vocab_metadata(dir: &Path, vocab_size: usize) -> Result<Option<Vec<(String, OwnedValue)>>> {
    let path = dir.join("tokenizer.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    const TJ: &str = "tokenizer.json";
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(TJ, e))?;
    let model = &v["model"];
    match model["type"].as_str() {
        Some("BPE") => {}
        other => {
            return Err(Error::Input(format!(
                "{TJ}: a {} tokenizer cannot be written as a GGUF vocabulary (only BPE: byte-level or SentencePiece-style)",
                other.unwrap_or("typeless")
            )));
        }
    }
    let byte_level =
        has_type(&v["pre_tokenizer"], "ByteLevel") || has_type(&v["decoder"], "ByteLevel");
    let metaspace = has_type(&v["pre_tokenizer"], "Metaspace")
        || model["byte_fallback"] == true
        || text.contains('\u{2581}');
    if !byte_level && !metaspace {
        return Err(bad(
            TJ,
            "a BPE tokenizer that is neither byte-level nor SentencePiece-style",
        ));
    }

    // Tokens by id.
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad(TJ, "model.vocab is not an object"))?;
    let added = v["added_tokens"].as_array().cloned().unwrap_or_default();
    let mut entries: Vec<(usize, String, i32)> = Vec::with_capacity(vocab.len() + added.len());
    for (token, id) in vocab {
        let id = id
            .as_u64()
            .ok_or_else(|| bad(TJ, format!("vocab id of {token:?} is not an integer")))?;
        let ty = if metaspace && parse_byte_token(token).is_some() {
            TOKEN_BYTE
        } else {
            TOKEN_NORMAL
        };
        entries.push((id as usize, token.clone(), ty));
    }
    for a in &added {
        let (Some(id), Some(content)) = (a["id"].as_u64(), a["content"].as_str()) else {
            return Err(bad(TJ, "an added token without id or content"));
        };
        let ty = if a["special"] == true {
            TOKEN_CONTROL
        } else {
            TOKEN_USER_DEFINED
        };
        entries.push((id as usize, content.to_string(), ty));
    }
    let n = entries.iter().map(|e| e.0 + 1).max().unwrap_or(0);
    if n > vocab_size {
        return Err(bad(
            TJ,
            format!(
                "token id {} is beyond the model's {vocab_size} embeddings",
                n - 1
            ),
        ));
    }
    let mut tokens: Vec<Option<(String, i32)>> = vec![None; vocab_size];
    for (id, token, ty) in entries {
        tokens[id] = Some((token, ty));
    }
    let unk = model["unk_token"].as_str();
    let (tokens, mut types): (Vec<String>, Vec<i32>) = tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| match t {
            Some((t, _)) if Some(t.as_str()) == unk => (t, TOKEN_UNKNOWN),
            Some(t) => t,
            None => (format!("[PAD{i}]"), TOKEN_UNUSED),
        })
        .unzip();
    let index: std::collections::HashMap<&str, u32> = tokens
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| (t.as_str(), i as u32))
        .collect();
    let id_of = |t: &str| index.get(t).copied();

    let merges: Vec<String> = model["merges"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|m| match m {
                    Value::String(s) => Ok(s.clone()),
                    Value::Array(p) if p.len() == 2 => Ok(format!(
                        "{} {}",
                        p[0].as_str().unwrap_or_default(),
                        p[1].as_str().unwrap_or_default()
                    )),
                    _ => Err(bad(TJ, "a merge that is neither \"a b\" nor [a, b]")),
                })
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?
        .unwrap_or_default();

    let mut kv: Vec<(String, OwnedValue)> = Vec::new();
    let mut put = |k: &str, v: OwnedValue| kv.push((format!("tokenizer.ggml.{k}"), v));
    if byte_level {
        put("model", "gpt2".into());
        put("pre", pre_name(&v["pre_tokenizer"])?.into());
    } else {
        put("model", "llama".into());
        // Score = −(rank of the merge that makes the token); other tokens 0, or
        // below every merge for bytes.
        let mut scores = vec![0.0f32; tokens.len()];
        for (rank, m) in merges.iter().enumerate().rev() {
            if let Some(id) = id_of(&m.replacen(' ', "", 1)) {
                scores[id as usize] = -(rank as f32) - 1.0;
            }
        }
        for (s, t) in scores.iter_mut().zip(&types) {
            if *t == TOKEN_BYTE || *t == TOKEN_UNUSED {
                *s = -1e9;
            }
        }
        let prepend = v["normalizer"].to_string().contains("\"Prepend\"")
            || v["pre_tokenizer"]
                .to_string()
                .contains("\"prepend_scheme\":\"first\"")
            || v["pre_tokenizer"]
                .to_string()
                .contains("\"prepend_scheme\":\"always\"");
        put("add_space_prefix", OwnedValue::Bool(prepend));
        put("scores", OwnedValue::array(scores));
    }
    // Bytes are marked only in SentencePiece vocabularies.
    if byte_level {
        types.iter_mut().for_each(|t| {
            if *t == TOKEN_BYTE {
                *t = TOKEN_NORMAL;
            }
        });
    }
    put("tokens", OwnedValue::strings(tokens.iter().cloned()));
    put("token_type", OwnedValue::array(types));
    if byte_level {
        put("merges", OwnedValue::strings(merges));
    }

    let tc = match std::fs::read_to_string(dir.join("tokenizer_config.json")) {
        Ok(text) => Some((
            TokenizerConfig::from_json_str(&text).map_err(|e| Error::Input(e.to_string()))?,
            serde_json::from_str::<Value>(&text).unwrap_or_default(),
        )),
        Err(_) => None,
    };
    let config: Value = std::fs::read_to_string(dir.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let special = |name: &str, key: &str| -> Option<u32> {
        let from_tc = tc.as_ref().and_then(|(c, raw)| match name {
            "bos" => c.bos_token.clone(),
            "eos" => c.eos_token.clone(),
            _ => raw[format!("{name}_token")].as_str().map(str::to_string),
        });
        from_tc
            .and_then(|t| id_of(&t))
            .or_else(|| config[key].as_u64().map(|i| i as u32))
    };
    let mut processors = Vec::new();
    components(&v["post_processor"], &mut processors);
    let first_special = processors
        .iter()
        .find_map(|p| p["single"][0]["SpecialToken"]["id"].as_str())
        .and_then(id_of);
    let bos = special("bos", "bos_token_id").or(first_special);
    for (name, id) in [
        ("bos_token_id", bos),
        ("eos_token_id", special("eos", "eos_token_id")),
        ("unknown_token_id", unk.and_then(id_of)),
        ("padding_token_id", special("pad", "pad_token_id")),
    ] {
        if let Some(id) = id {
            put(name, OwnedValue::U32(id));
        }
    }
    let flag = |k: &str| tc.as_ref().and_then(|(_, raw)| raw[k].as_bool());
    let add_bos = flag("add_bos_token").unwrap_or(bos.is_some() && first_special == bos);
    put("add_bos_token", OwnedValue::Bool(add_bos));
    if let Some(add_eos) = flag("add_eos_token") {
        put("add_eos_token", OwnedValue::Bool(add_eos));
    }
    let template = tc
        .and_then(|(c, _)| c.chat_template)
        .or_else(|| std::fs::read_to_string(dir.join("chat_template.jinja")).ok());
    if let Some(t) = template {
        kv.push(("tokenizer.chat_template".into(), t.into()));
    }
    Ok(Some(kv))
}
