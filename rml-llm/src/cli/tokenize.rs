//! `rml-llm tokenize`: the ids and pieces of a text.

use std::path::PathBuf;

use clap::Args;
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};

/// Encode a text and print its token ids and pieces.
#[derive(Args)]
pub struct TokenizeCommand {
    /// A tokenizer.json file, or a .gguf model file (its vocabulary is used).
    #[arg(long)]
    tokenizer: PathBuf,
    /// Do not add the post-processor's special tokens (BOS/EOS).
    #[arg(long)]
    no_special: bool,
    /// Treat special tokens written in the text as plain text.
    #[arg(long)]
    no_parse_special: bool,
    /// The text to encode.
    text: String,
}

impl TokenizeCommand {
    /// Prints the ids, one line per piece, and the decoded text.
    pub fn run(self) -> Result<(), String> {
        let is_gguf = self
            .tokenizer
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
        let tok = if is_gguf {
            Tokenizer::from_gguf_file(&self.tokenizer)
        } else {
            Tokenizer::from_file(&self.tokenizer)
        }
        .map_err(|e| e.to_string())?;
        let options = EncodeOptions {
            add_special_tokens: !self.no_special,
            parse_special: !self.no_parse_special,
        };
        let ids = tok
            .encode_with(&self.text, options)
            .map_err(|e| e.to_string())?;
        let joined: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("ids ({}): [{}]", ids.len(), joined.join(", "));
        for id in &ids {
            let piece = tok.id_to_token(*id).unwrap_or("");
            let mark = if tok.is_special(*id) {
                " (special)"
            } else {
                ""
            };
            println!("{id:>8}  {piece:?}{mark}");
        }
        println!("decoded: {:?}", tok.decode(&ids, false));
        Ok(())
    }
}
