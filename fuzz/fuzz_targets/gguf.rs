//! Fuzzes the GGUF reader: any bytes must parse or fail with an error, never panic,
//! hang or allocate without bound; whatever parses must be fully walkable and must
//! survive a write/read round trip through rml's writer unchanged.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rml_host::formats::gguf::{Gguf, GgufWriter, ReadOptions};

fuzz_target!(|data: &[u8]| {
    let options = ReadOptions {
        allow_unsupported_types: true,
    };
    let Ok(g) = Gguf::parse_with(data, options) else {
        return;
    };
    let mut w = GgufWriter::new();
    let _ = w.set_version(g.version());
    let mut writable = true;
    for (key, value) in g.metadata() {
        let _ = value.to_string();
        writable &= w.add_kv(key, value.to_owned_value()).is_ok();
    }
    for t in g.tensors() {
        assert_eq!(t.data.len() as u64, t.info.size_bytes());
        assert_eq!(g.tensor(t.info.name()).map(|r| r.data), Some(t.data));
        writable &= w
            .add_tensor(t.info.name(), t.info.ggml_type(), t.info.dims(), t.data)
            .is_ok();
    }
    if !writable || g.alignment() > 1 << 16 {
        // Readable but not writable (tensor names longer than ggml allows), or an
        // alignment so large that the rewritten file would be gigabytes of padding.
        return;
    }
    let bytes = w.to_bytes().expect("writing to memory");
    let again = Gguf::parse_with(&bytes[..], options).expect("rml must read what it wrote");
    assert_eq!(again.alignment(), g.alignment());
    // Compared through Debug so that NaN values compare equal to themselves.
    let dump = |g: &Gguf<&[u8]>| -> Vec<String> {
        g.metadata()
            .map(|(k, v)| format!("{k}={:?}", v.to_owned_value()))
            .collect()
    };
    assert_eq!(dump(&again), dump(&g));
    assert!(
        again
            .tensors()
            .map(|t| (t.info.name(), t.info.dims(), t.data))
            .eq(g.tensors().map(|t| (t.info.name(), t.info.dims(), t.data)))
    );
});
