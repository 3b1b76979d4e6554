//! Fuzzes the safetensors reader: any bytes must parse or fail with an error, never
//! panic, hang or allocate without bound. Whatever parses must hand out every tensor,
//! and rml's writer must reproduce a file that reads back with the same tensors.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rml_host::Tensor;
use rml_host::formats::safetensors::{self, SafeTensors};

fuzz_target!(|data: &[u8]| {
    let Ok(st) = SafeTensors::from_bytes(data) else {
        return;
    };
    let all = st
        .load_all()
        .expect("a validated file hands out every tensor");
    for (info, (_, t)) in st.tensors().iter().zip(&all) {
        assert_eq!(t.nbytes(), info.nbytes());
        assert_eq!(t.to_bytes().len(), info.nbytes());
    }
    let named: Vec<(&str, &Tensor)> = all.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let meta = st.header().has_metadata.then(|| st.metadata().clone());
    let bytes = safetensors::serialize(&named, meta.as_ref()).expect("rml writes what it read");
    let again = SafeTensors::from_bytes(&bytes).expect("rml reads what it wrote");
    assert_eq!(again.len(), st.len());
    assert_eq!(again.metadata(), st.metadata());
    for (name, t) in &all {
        let u = again.get(name).expect("same names");
        assert_eq!(u.dtype(), t.dtype());
        assert_eq!(u.dims(), t.dims());
        assert_eq!(u.to_bytes(), t.to_bytes());
    }
});
