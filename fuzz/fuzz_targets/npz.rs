//! Fuzzes the `.npz` reader (zip container, stored and deflated members, CRC-32, the
//! `.npy` inside): any bytes must parse or fail with an error, never panic, hang or
//! allocate without bound.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rml_host::formats::npy::Npz;

fuzz_target!(|data: &[u8]| {
    let Ok(npz) = Npz::from_bytes(data) else {
        return;
    };
    for m in npz.members() {
        if let Ok(t) = npz.get(&m.name) {
            assert_eq!(t.to_bytes().len(), t.nbytes());
            let h = npz.header(&m.name).expect("a readable member has a header");
            assert_eq!(h.shape.as_slice(), t.dims());
        }
    }
});
