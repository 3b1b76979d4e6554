//! Opening a multi-gigabyte safetensors file reads only its header: the data is mapped,
//! not read. The test builds a sparse 3 GiB file with `set_len` (no disk blocks are
//! written for the zeros) and checks that the tensors come out right; the time it takes
//! is printed, not asserted (timing belongs to benchmarks, not unit tests).

use std::io::{Seek, SeekFrom, Write};
use std::time::Instant;

use rml_host::StorageKind;
use rml_host::formats::safetensors::SafeTensors;

#[test]
fn a_sparse_multi_gigabyte_file_opens_without_reading_its_data() {
    let big_elems: u64 = 3 << 28; // 3 GiB of F32
    let big_bytes = big_elems * 4;
    let mut header = format!(
        r#"{{"big":{{"dtype":"F32","shape":[{big_elems}],"data_offsets":[0,{big_bytes}]}},"tail":{{"dtype":"F32","shape":[2,2],"data_offsets":[{big_bytes},{}]}}}}"#,
        big_bytes + 16
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let data_start = 8 + header.len() as u64;
    let path = std::env::temp_dir().join(format!("rml-large-{}.safetensors", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
        f.write_all(header.as_bytes()).unwrap();
        f.set_len(data_start + big_bytes + 16).unwrap();
        f.write_all(&1.5f32.to_le_bytes()).unwrap();
        f.seek(SeekFrom::Start(data_start + big_bytes - 4)).unwrap();
        f.write_all(&(-2.0f32).to_le_bytes()).unwrap();
        for v in [1.0f32, 2.0, 3.0, 4.0] {
            f.write_all(&v.to_le_bytes()).unwrap();
        }
    }
    let start = Instant::now();
    let st = SafeTensors::open(&path).unwrap();
    let opened = start.elapsed();
    let big = st.get("big").unwrap();
    let tail = st.get("tail").unwrap();
    eprintln!(
        "opened a {:.1} GiB safetensors file in {opened:?}",
        (data_start + big_bytes + 16) as f64 / (1u64 << 30) as f64
    );
    assert_eq!(big.dims(), &[big_elems as usize]);
    assert_eq!(big.storage_kind(), StorageKind::Mapped);
    let view = big.view::<f32>().unwrap();
    let last = big_elems as usize - 1;
    assert_eq!(view.get(&[0]).unwrap(), 1.5);
    assert_eq!(view.get(&[1]).unwrap(), 0.0);
    assert_eq!(view.get(&[last]).unwrap(), -2.0);
    assert_eq!(tail.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    let window = big.slice(0, 0, 3, 1).unwrap();
    assert!(window.shares_storage_with(&big));
    assert_eq!(window.to_vec::<f32>().unwrap(), vec![1.5, 0.0, 0.0]);
    drop((st, big, tail, window));
    std::fs::remove_file(&path).unwrap();
}
