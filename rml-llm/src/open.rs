//! Opening a model together with its tokenizer from one path, and the token ids that
//! end a reply: what the `rml-llm` CLI and the C ABI (`rml-capi`) share.

use std::path::Path;

use crate::model::Model;
use crate::tokenizer::Tokenizer;

/// Whether `path` names a single model file (a `.gguf`) rather than a Hugging Face
/// directory.
pub fn is_gguf(path: &Path) -> bool {
    path.is_file()
}

/// The model at `path` and its tokenizer: a GGUF file's vocabulary, or a directory's
/// `tokenizer.json`. The error names the path (and `tokenizer:` when the tokenizer
/// failed).
pub fn load(path: &Path) -> Result<(Model, Tokenizer), String> {
    let model = Model::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((model, load_tokenizer(path)?))
}

/// The tokenizer of a model path: a GGUF file's vocabulary, or a directory's
/// `tokenizer.json`.
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer, String> {
    if is_gguf(path) {
        Tokenizer::from_gguf_file(path)
    } else {
        Tokenizer::from_file(path.join("tokenizer.json"))
    }
    .map_err(|e| format!("{}: tokenizer: {e}", path.display()))
}

/// End-of-sequence plus the end-of-turn tokens the vocabulary knows.
pub fn stop_tokens(tok: &Tokenizer) -> Vec<u32> {
    let mut ids: Vec<u32> = tok.eos_id().into_iter().collect();
    for name in ["<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|endoftext|>"] {
        if let Some(id) = tok.token_to_id(name).filter(|id| !ids.contains(id)) {
            ids.push(id);
        }
    }
    ids
}
