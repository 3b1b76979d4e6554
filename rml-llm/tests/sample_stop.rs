//! Stop handling: stop strings split across chunks at every boundary, overlapping
//! prefixes, multibyte UTF-8, stop tokens and the token budget.

use rml_llm::stop::{StopConfig, StopReason, StopStrings, Stopper};

/// Feeds `chunks` to a matcher for `stops`; checks after every chunk that what has been
/// shown so far is a prefix of `want` (nothing is ever taken back) and returns the
/// final text (flushed if no stop matched) with the stop index.
fn feed(stops: &[&str], chunks: &[&[u8]], want: &str) -> (String, Option<usize>) {
    let mut m = StopStrings::new(stops);
    let mut out = String::new();
    let mut hit = None;
    for chunk in chunks {
        hit = m.push(chunk, &mut out);
        assert!(
            want.starts_with(&out),
            "shown {out:?} is not a prefix of {want:?}"
        );
        if hit.is_some() {
            break;
        }
    }
    if hit.is_none() {
        m.finish(&mut out);
    }
    (out, hit)
}

/// Every way of cutting `text` into two and into three chunks (at every byte,
/// including inside multibyte characters) gives `want` and `stop`.
fn every_split(stops: &[&str], text: &str, want: &str, stop: Option<usize>) {
    let b = text.as_bytes();
    assert_eq!(feed(stops, &[b], want), (want.to_string(), stop));
    for i in 0..=b.len() {
        assert_eq!(
            feed(stops, &[&b[..i], &b[i..]], want),
            (want.to_string(), stop),
            "split at {i}"
        );
        for j in i..=b.len() {
            assert_eq!(
                feed(stops, &[&b[..i], &b[i..j], &b[j..]], want),
                (want.to_string(), stop),
                "split at {i}, {j}"
            );
        }
    }
    let bytes: Vec<&[u8]> = b.chunks(1).collect();
    assert_eq!(feed(stops, &bytes, want), (want.to_string(), stop));
}

#[test]
fn a_split_stop_string_is_caught_and_never_shown() {
    every_split(
        &["<|im_end|>"],
        "Hello there<|im_end|>ignored",
        "Hello there",
        Some(0),
    );
    every_split(&["\n\n"], "one\ntwo\n\nthree", "one\ntwo", Some(0));
}

#[test]
fn a_near_miss_is_released() {
    every_split(
        &["<|im_end|>"],
        "a <|im_en| b <|im",
        "a <|im_en| b <|im",
        None,
    );
    every_split(&["STOP"], "STOSTOPSTOP", "STO", Some(0));
}

#[test]
fn overlapping_prefixes() {
    // the stop starts one byte into a run that looked like its start
    every_split(&["aab"], "xaaab", "xa", Some(0));
    every_split(&["abab"], "abababx", "", Some(0));
    every_split(&["ababc"], "abababc", "ab", Some(0));
    // the match a byte-by-byte stream completes first wins, however the text is cut:
    // the earliest end, then the earliest start, then the first listed
    every_split(&["cd", "bc"], "abcde", "a", Some(1));
    every_split(&["abc", "ab"], "xabcd", "x", Some(1));
    every_split(&["ab", "abc"], "xabcd", "x", Some(0));
    every_split(&["b", "abc"], "xab", "xa", Some(0));
    every_split(&["abcd", "bc"], "abcd", "a", Some(1));
    every_split(&["bc", "abc"], "abcd", "", Some(1));
    every_split(&["ab", "ab"], "xab", "x", Some(0));
}

#[test]
fn multibyte_utf8() {
    every_split(
        &["終わり"],
        "日本語の文、終わりです",
        "日本語の文、",
        Some(0),
    );
    every_split(&["🛑"], "go 🚀 go 🛑 no", "go 🚀 go ", Some(0));
    every_split(&["é!"], "café, cafè, café!", "café, cafè, caf", Some(0));
    every_split(&["🛑"], "ünïcödé 🚀 only", "ünïcödé 🚀 only", None);
}

#[test]
fn an_incomplete_character_waits_for_its_bytes() {
    let mut m = StopStrings::new(&["zz"]);
    let mut out = String::new();
    let rocket = "🚀".as_bytes();
    assert_eq!(m.push(&rocket[..1], &mut out), None);
    assert_eq!(m.push(&rocket[1..3], &mut out), None);
    assert_eq!(out, "");
    m.push(&rocket[3..], &mut out);
    assert_eq!(out, "🚀");
}

#[test]
fn invalid_bytes_become_replacement_characters() {
    let (out, hit) = feed(
        &["!"],
        &[b"a\xffb", b"\xe2\x82", b"c!"],
        "a\u{fffd}b\u{fffd}c",
    );
    assert_eq!((out.as_str(), hit), ("a\u{fffd}b\u{fffd}c", Some(0)));
    // an incomplete character at the very end is flushed as U+FFFD
    let (out, hit) = feed(&["!"], &[b"ok\xf0\x9f"], "ok\u{fffd}");
    assert_eq!((out.as_str(), hit), ("ok\u{fffd}", None));
}

#[test]
fn after_a_stop_nothing_more_is_shown() {
    let mut m = StopStrings::new(&["END"]);
    let mut out = String::new();
    assert_eq!(m.push(b"abEND", &mut out), Some(0));
    assert_eq!(m.push(b"more", &mut out), Some(0));
    m.finish(&mut out);
    assert_eq!(out, "ab");
    assert_eq!(m.stopped(), Some(0));
    m.reset();
    assert_eq!(m.push(b"xy", &mut out), None);
}

#[test]
fn stopper_handles_tokens_strings_and_budget() {
    let config = StopConfig {
        strings: vec!["\nUser:".into()],
        tokens: vec![2],
        max_tokens: Some(4),
    };
    // a stop token: held-back text is flushed, the token's own text is not shown
    let mut s = Stopper::new(&config);
    let mut out = String::new();
    assert_eq!(s.push(10, b"Hi", &mut out), None);
    assert_eq!(s.push(11, b"\nUs", &mut out), None);
    assert_eq!(out, "Hi");
    assert_eq!(s.push(2, b"</s>", &mut out), Some(StopReason::Token(2)));
    assert_eq!(out, "Hi\nUs");
    assert_eq!(s.push(12, b"x", &mut out), Some(StopReason::Token(2)));

    // a stop string across tokens
    let mut s = Stopper::new(&config);
    let mut out = String::new();
    for (t, text) in [(10u32, &b"Hi"[..]), (11, b"\nUs"), (12, b"er:")] {
        let r = s.push(t, text, &mut out);
        if t == 12 {
            assert_eq!(r, Some(StopReason::String(0)));
        }
    }
    assert_eq!(out, "Hi");

    // the budget: the fourth token ends generation and held text is flushed
    let mut s = Stopper::new(&config);
    let mut out = String::new();
    for t in 0..3 {
        assert_eq!(s.push(10 + t, b"a", &mut out), None);
    }
    assert_eq!(s.push(20, b"\nU", &mut out), Some(StopReason::MaxTokens));
    assert_eq!(out, "aaa\nU");
    assert_eq!(s.generated(), 4);
}
