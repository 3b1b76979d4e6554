//! llama.cpp's `clean_spaces` rules, applied after a one-shot decode of a GGUF vocabulary.
//!
//! llama.cpp's `llama_detokenize` undoes the spaces that word-level tokenizers put around
//! punctuation, in three passes over the bytes (a removed space may be the very first character):
//!
//! 1. a space before `?`, `!`, `.` or `,` is removed;
//! 2. an apostrophe between two spaces loses both (`a ' b` → `a'b`);
//! 3. a space before `'s`, `'m`, `'re` or `'ve` is removed (`'t`, `'d`, `'ll` keep theirs).
//!
//! Only ASCII spaces are removed, so the result stays valid UTF-8. Which vocabularies use
//! it is decided by [`super::gguf`]: WordPiece and most byte-level BPE pre-tokenizers.

/// Applies llama.cpp's three clean-up passes to `text`.
pub fn llama_cpp_clean_spaces(text: &str) -> String {
    let pass1 = drop_space_before_punctuation(text.as_bytes());
    let pass2 = join_lone_apostrophes(pass1);
    let pass3 = join_contractions(&pass2);
    // Removing ASCII spaces between characters cannot split a UTF-8 sequence.
    String::from_utf8(pass3).expect("only ASCII spaces were removed")
}

fn drop_space_before_punctuation(t: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len());
    for (i, &x) in t.iter().enumerate() {
        if i > 0 && t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            out.pop();
        }
        out.push(x);
    }
    out
}

fn join_lone_apostrophes(mut t: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        let x = t[i];
        if i > 0 && x == b'\'' && i + 1 < t.len() && t[i - 1] == b' ' && t[i + 1] == b' ' {
            out.pop();
            // The following space is consumed; llama.cpp blanks it in place, so it no
            // longer counts as the space before a later apostrophe.
            t[i + 1] = 0;
            out.push(x);
            i += 2;
            continue;
        }
        out.push(x);
        i += 1;
    }
    out
}

fn join_contractions(t: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len());
    for (i, &x) in t.iter().enumerate() {
        if i > 0 && t[i - 1] == b' ' && x == b'\'' {
            let next = t.get(i + 1).copied();
            let after = t.get(i + 2).copied();
            let joins = matches!(
                (next, after),
                (Some(b's' | b'm'), _) | (Some(b'r' | b'v'), Some(b'e'))
            );
            if joins {
                out.pop();
            }
        }
        out.push(x);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::llama_cpp_clean_spaces as clean;

    #[test]
    fn punctuation_and_contractions() {
        assert_eq!(clean("hello , world !"), "hello, world!");
        assert_eq!(clean("how ' s it"), "how's it");
        assert_eq!(
            clean("it 's we 're I 'm they 've"),
            "it's we're I'm they've"
        );
        assert_eq!(clean("don 't we 'd they 'll"), "don 't we 'd they 'll");
        assert_eq!(clean(" .x"), ".x");
        assert_eq!(clean("3 . 14"), "3. 14");
        assert_eq!(clean("a ' ' b"), "a'' b");
        assert_eq!(clean("日本 。 x ?"), "日本 。 x?");
    }
}
