//! Fuzzes the `.npy` reader: any bytes must parse or fail with an error, never panic,
//! hang or allocate without bound. Whatever parses must survive a write/read round
//! trip through rml's writer with the same dtype, shape and elements.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rml_host::formats::npy;

fuzz_target!(|data: &[u8]| {
    let Ok(t) = npy::from_bytes(data) else {
        return;
    };
    let logical = t.to_bytes();
    assert_eq!(logical.len(), t.nbytes());
    let bytes = npy::to_bytes(&t).expect("rml writes what it read");
    let again = npy::from_bytes(&bytes).expect("rml reads what it wrote");
    assert_eq!(again.dtype(), t.dtype());
    assert_eq!(again.dims(), t.dims());
    assert_eq!(again.to_bytes(), logical);
});
