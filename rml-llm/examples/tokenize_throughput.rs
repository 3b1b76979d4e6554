//! Encode throughput of one tokenizer on one text, for `scripts/bench/tokenizers.py`.
//!
//! `tokenize_throughput TOKENIZER.json TEXT_FILE REPEATS` encodes the whole file
//! `REPEATS` times on one thread (no special tokens added, special tokens parsed) and
//! prints one JSON line: the token count, a checksum of the ids (so the bench script can
//! check rml and the reference agree before comparing times) and each run's seconds.

use std::time::Instant;

use rml_llm::tokenizer::{EncodeOptions, Tokenizer};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, tokenizer, text, repeats] = args.as_slice() else {
        return Err("usage: tokenize_throughput TOKENIZER.json TEXT_FILE REPEATS".into());
    };
    let tok = Tokenizer::from_file(tokenizer).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(text).map_err(|e| format!("{text}: {e}"))?;
    let repeats: usize = repeats
        .parse()
        .map_err(|_| format!("REPEATS must be a number, got {repeats:?}"))?;
    let options = EncodeOptions {
        add_special_tokens: false,
        parse_special: true,
    };
    let mut seconds = Vec::with_capacity(repeats);
    let mut ids = Vec::new();
    for _ in 0..repeats {
        let start = Instant::now();
        ids = tok.encode_with(&text, options).map_err(|e| e.to_string())?;
        seconds.push(start.elapsed().as_secs_f64());
    }
    println!(
        "{{\"tokens\": {}, \"checksum\": {}, \"seconds\": {:?}}}",
        ids.len(),
        checksum(&ids),
        seconds
    );
    Ok(())
}

/// Position-weighted sum of the ids modulo 2^61 − 1: equal lists give equal sums, and a
/// swapped or changed id almost surely does not.
fn checksum(ids: &[u32]) -> u64 {
    const P: u64 = (1 << 61) - 1;
    ids.iter().enumerate().fold(0u64, |acc, (i, &id)| {
        let term = ((i as u64 + 1) * (u64::from(id) + 1)) % P;
        (acc + term) % P
    })
}
