//! The malformed corpus (`tests/malformed/{safetensors,npy}`, written by
//! `scripts/fixtures/malformed_*.py`): every file must fail with a typed format error
//! whose field names what is wrong, and every prefix of every valid fixture must fail
//! cleanly — an error, never a panic.

use std::path::{Path, PathBuf};

use rml_host::Error;
use rml_host::formats::npy::{self, Npz};
use rml_host::formats::safetensors::SafeTensors;

fn dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(sub)
}

/// Reads a file the way a user would: open it, then read every tensor in it.
fn read_fully(path: &Path) -> Result<usize, Error> {
    let name = path.to_string_lossy();
    if name.ends_with(".safetensors") {
        let st = SafeTensors::open(path)?;
        for info in st.tensors() {
            st.tensor(info)?.to_bytes();
        }
        Ok(st.len())
    } else if name.ends_with(".npz") {
        let npz = Npz::open(path)?;
        for m in npz.names() {
            npz.get(&m)?.to_bytes();
        }
        Ok(npz.len())
    } else {
        Ok(npy::open(path)?.numel())
    }
}

fn check_corpus(sub: &str) -> usize {
    let root = dir(sub);
    let expected = std::fs::read_to_string(root.join("expected.tsv")).unwrap();
    let mut listed = Vec::new();
    for line in expected.lines() {
        let mut parts = line.split('\t');
        let (file, field) = (parts.next().unwrap(), parts.next().unwrap());
        listed.push(file.to_string());
        let path = root.join(file);
        match read_fully(&path) {
            Ok(n) => panic!("{sub}/{file}: accepted ({n} tensors), expected an error in {field}"),
            Err(e) => {
                let Error::Format {
                    file: Some(ref at),
                    field: ref got,
                    ..
                } = e
                else {
                    panic!("{sub}/{file}: expected a format error naming the file, got {e:?}");
                };
                assert_eq!(at, &path);
                assert!(
                    got.contains(field),
                    "{sub}/{file}: field {got:?} does not name {field:?} ({e})"
                );
                let message = e.to_string();
                assert!(
                    !message.contains('\n') && message.contains(file),
                    "{message}"
                );
            }
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "expected.tsv")
        .collect();
    on_disk.sort();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "{sub}: every corpus file must be listed in expected.tsv"
    );
    listed.len()
}

#[test]
fn malformed_safetensors_files_fail_naming_the_field() {
    assert!(check_corpus("malformed/safetensors") >= 25);
}

#[test]
fn malformed_npy_and_npz_files_fail_naming_the_field() {
    assert!(check_corpus("malformed/npy") >= 25);
}

#[test]
fn every_prefix_of_every_valid_fixture_is_an_error() {
    let root = dir("fixtures/host_formats");
    let mut files = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let name = path.to_string_lossy().into_owned();
        if !(name.ends_with(".safetensors") || name.ends_with(".npy") || name.ends_with(".npz")) {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let parse = |b: &[u8]| -> Result<(), Error> {
            if name.ends_with(".safetensors") {
                SafeTensors::from_bytes(b).map(drop)
            } else if name.ends_with(".npy") {
                npy::from_bytes(b).map(drop)
            } else {
                let npz = Npz::from_bytes(b)?;
                for m in npz.names() {
                    npz.get(&m)?;
                }
                Ok(())
            }
        };
        parse(&bytes).unwrap();
        for cut in 0..bytes.len() {
            assert!(
                parse(&bytes[..cut]).is_err(),
                "{name}: prefix of {cut} bytes accepted"
            );
        }
        files += 1;
    }
    assert!(files >= 20);
}

/// Deterministic mutations of every valid fixture: each byte set to 0x00, 0xff and
/// flipped in its top bit. Any outcome but a panic is fine (many mutations still
/// parse: a changed tensor value is valid data); whatever parses must hand out every
/// tensor.
#[test]
fn byte_mutations_of_valid_fixtures_never_panic() {
    let root = dir("fixtures/host_formats");
    let mut parsed = 0usize;
    let mut rejected = 0usize;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let name = path.to_string_lossy().into_owned();
        let kind = if name.ends_with(".safetensors") {
            0
        } else if name.ends_with(".npy") {
            1
        } else if name.ends_with(".npz") {
            2
        } else {
            continue;
        };
        let bytes = std::fs::read(&path).unwrap();
        for at in 0..bytes.len() {
            for new in [0x00, 0xff, bytes[at] ^ 0x80] {
                let mut b = bytes.clone();
                b[at] = new;
                let result: Result<(), Error> = match kind {
                    0 => SafeTensors::from_bytes(&b).and_then(|st| {
                        st.load_all()?.iter().for_each(|(_, t)| drop(t.to_bytes()));
                        Ok(())
                    }),
                    1 => npy::from_bytes(&b).map(|t| drop(t.to_bytes())),
                    _ => Npz::from_bytes(&b).and_then(|z| {
                        z.names()
                            .iter()
                            .try_for_each(|n| z.get(n).map(|t| drop(t.to_bytes())))
                    }),
                };
                if result.is_ok() {
                    parsed += 1;
                } else {
                    rejected += 1;
                }
            }
        }
    }
    assert!(
        parsed > 0 && rejected > 0,
        "{parsed} parsed, {rejected} rejected"
    );
}
