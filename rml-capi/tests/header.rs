//! `include/rml.h` is what cbindgen generates from the crate today: the test
//! regenerates it and fails when the committed header is stale. With `RML_BLESS=1`
//! it rewrites the header instead.

use std::path::PathBuf;

#[test]
fn committed_header_is_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = dir.join("include/rml.h");
    if std::env::var_os("RML_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/rml.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/rml.h is stale: regenerate it with `RML_BLESS=1 cargo test -p rml-capi --test header`"
    );
}
