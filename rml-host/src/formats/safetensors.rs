//! safetensors: reader (by mmap, zero-copy, validated completely before use), writer
//! (byte-identical to the official one), and sharded sets (`*.safetensors.index.json`).
//!
//! Layout: an 8-byte little-endian header length `N`, `N` bytes of UTF-8 JSON, then
//! the data buffer. The reader checks, before any tensor is handed out:
//! `N ≤ 100,000,000` and `8 + N ≤` file length; the header is UTF-8 and a JSON object;
//! every entry has a known, supported dtype, a shape of at most [`rml_core::MAX_RANK`]
//! non-negative dims whose element and byte counts do not overflow, and two
//! `data_offsets` inside the data buffer whose difference is exactly shape × dtype
//! bytes; the tensors tile the buffer (first at 0, no gaps, no overlaps) and the last
//! one ends exactly at the end of the file; `__metadata__` is an object of strings;
//! no tensor name or metadata key appears twice. Anything else is an
//! [`Error::Format`] whose `field` names the part (`header_length`, `header`,
//! `tensors."w".dtype`, `tensors."w".shape`, `tensors."w".data_offsets`,
//! `__metadata__`, `file_length`).
//!
//! Nothing is allocated from a number in the file before it has been checked against
//! the file's size: the header is read only after `N` is bounded by the file length.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use rml_core::{DType, MAX_RANK};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::buffer::Buffer;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Largest header the reader accepts (the official limit), in bytes.
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// The reserved header key of the metadata map.
pub const METADATA_KEY: &str = "__metadata__";

const FORMAT: &str = "safetensors";

fn err(field: impl Into<String>, what: impl Into<String>) -> Error {
    Error::format(FORMAT, field, what)
}

fn tensor_field(name: &str, part: &str) -> String {
    if part.is_empty() {
        format!("tensors.{name:?}")
    } else {
        format!("tensors.{name:?}.{part}")
    }
}

/// One tensor's entry in a safetensors header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Axis sizes.
    pub shape: Vec<usize>,
    /// Begin and end (exclusive) byte offsets, relative to the data buffer.
    pub data_offsets: [usize; 2],
}

impl TensorInfo {
    /// Bytes of data.
    pub fn nbytes(&self) -> usize {
        self.data_offsets[1] - self.data_offsets[0]
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A validated safetensors header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// `N`: bytes of JSON (including padding) after the 8-byte length.
    pub header_len: usize,
    /// The tensors, in data-offset order.
    pub tensors: Vec<TensorInfo>,
    /// The `__metadata__` map (empty when absent).
    pub metadata: BTreeMap<String, String>,
    /// True when the header had a `__metadata__` entry (possibly empty).
    pub has_metadata: bool,
}

impl Header {
    /// Byte offset in the file where the data buffer starts (`8 + N`).
    pub fn data_start(&self) -> usize {
        8 + self.header_len
    }

    /// Total bytes of tensor data.
    pub fn data_len(&self) -> usize {
        self.tensors.last().map_or(0, |t| t.data_offsets[1])
    }
}

/// A JSON object read as its entries in file order, duplicates kept.
struct Entries<V>(Vec<(String, V)>);

struct EntriesVisitor<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
    type Value = Entries<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Entries<V>, A::Error> {
        let mut out = Vec::new();
        while let Some(entry) = map.next_entry::<String, V>()? {
            out.push(entry);
        }
        Ok(Entries(out))
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// Parses and validates the header of a complete safetensors file image `file`.
pub fn parse_header(file: &[u8]) -> Result<Header> {
    let file_len = file.len();
    let Some(len_bytes) = file.get(..8) else {
        return Err(err(
            "header_length",
            format!("file has {file_len} bytes; the 8-byte header length is missing"),
        ));
    };
    let n = u64::from_le_bytes(len_bytes.try_into().unwrap_or([0xff; 8]));
    if n > MAX_HEADER_LEN {
        return Err(err(
            "header_length",
            format!("{n} bytes exceeds the limit of {MAX_HEADER_LEN}"),
        ));
    }
    let n = n as usize;
    if n > file_len - 8 {
        return Err(err(
            "header_length",
            format!("a {n}-byte header runs past the end of the {file_len}-byte file"),
        ));
    }
    let json = std::str::from_utf8(&file[8..8 + n]).map_err(|e| {
        err(
            "header",
            format!("not valid UTF-8 (at header byte {})", e.valid_up_to()),
        )
    })?;
    let entries: Entries<&RawValue> =
        serde_json::from_str(json).map_err(|e| err("header", format!("invalid JSON: {e}")))?;
    let data_len = file_len - 8 - n;

    let mut header = Header {
        header_len: n,
        ..Header::default()
    };
    let mut seen: HashMap<&str, ()> = HashMap::new();
    for (name, raw) in &entries.0 {
        if seen.insert(name.as_str(), ()).is_some() {
            let field = if name == METADATA_KEY {
                METADATA_KEY.to_string()
            } else {
                tensor_field(name, "")
            };
            return Err(err(field, "appears twice in the header"));
        }
        if name == METADATA_KEY {
            header.metadata = parse_metadata(raw.get())?;
            header.has_metadata = true;
        } else {
            header.tensors.push(parse_entry(name, raw.get(), data_len)?);
        }
    }
    check_tiling(&mut header.tensors, data_len)?;
    Ok(header)
}

fn parse_metadata(raw: &str) -> Result<BTreeMap<String, String>> {
    let entries: Entries<String> = serde_json::from_str(raw).map_err(|e| {
        err(
            METADATA_KEY,
            format!("must be an object of string values: {e}"),
        )
    })?;
    let mut map = BTreeMap::new();
    for (key, value) in entries.0 {
        if map.contains_key(&key) {
            return Err(err(format!("{METADATA_KEY}.{key:?}"), "appears twice"));
        }
        map.insert(key, value);
    }
    Ok(map)
}

fn as_u64(value: &serde_json::Value) -> Option<u64> {
    value.as_u64()
}

fn parse_entry(name: &str, raw: &str, data_len: usize) -> Result<TensorInfo> {
    let value: serde_json::Value = serde_json::from_str(raw)
        .map_err(|e| err(tensor_field(name, ""), format!("invalid JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(err(tensor_field(name, ""), "entry is not a JSON object"));
    };
    let dtype_name = obj
        .get("dtype")
        .ok_or_else(|| err(tensor_field(name, "dtype"), "missing"))?
        .as_str()
        .ok_or_else(|| err(tensor_field(name, "dtype"), "not a string"))?;
    let dtype = DType::from_safetensors_name(dtype_name).map_err(|e| match e {
        rml_core::Error::UnsupportedDTypeName(known) => err(
            tensor_field(name, "dtype"),
            format!("dtype {known} is not supported by rml"),
        ),
        _ => err(
            tensor_field(name, "dtype"),
            format!("unknown dtype {dtype_name:?}"),
        ),
    })?;

    let shape_value = obj
        .get("shape")
        .ok_or_else(|| err(tensor_field(name, "shape"), "missing"))?;
    let dims = shape_value
        .as_array()
        .ok_or_else(|| err(tensor_field(name, "shape"), "not an array"))?;
    if dims.len() > MAX_RANK {
        return Err(err(
            tensor_field(name, "shape"),
            format!("rank {} exceeds rml's maximum rank {MAX_RANK}", dims.len()),
        ));
    }
    let mut shape = Vec::with_capacity(dims.len());
    for d in dims {
        let d = as_u64(d)
            .and_then(|d| usize::try_from(d).ok())
            .ok_or_else(|| {
                err(
                    tensor_field(name, "shape"),
                    format!("dimension {d} is not a non-negative integer"),
                )
            })?;
        shape.push(d);
    }
    let numel = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| err(tensor_field(name, "shape"), "element count overflows"))?;
    let nbytes = dtype
        .storage_bytes(numel)
        .map_err(|_| err(tensor_field(name, "shape"), "byte size overflows"))?;

    let offsets = obj
        .get("data_offsets")
        .ok_or_else(|| err(tensor_field(name, "data_offsets"), "missing"))?
        .as_array()
        .ok_or_else(|| err(tensor_field(name, "data_offsets"), "not an array"))?;
    let [begin, end] = offsets.as_slice() else {
        return Err(err(
            tensor_field(name, "data_offsets"),
            format!("has {} entries, expected 2", offsets.len()),
        ));
    };
    let (Some(begin), Some(end)) = (as_u64(begin), as_u64(end)) else {
        return Err(err(
            tensor_field(name, "data_offsets"),
            "offsets must be non-negative integers",
        ));
    };
    if end < begin {
        return Err(err(
            tensor_field(name, "data_offsets"),
            format!("end {end} is before begin {begin}"),
        ));
    }
    if end > data_len as u64 {
        return Err(err(
            tensor_field(name, "data_offsets"),
            format!("end {end} is past the end of the {data_len}-byte data buffer"),
        ));
    }
    let (begin, end) = (begin as usize, end as usize);
    if end - begin != nbytes {
        return Err(err(
            tensor_field(name, "data_offsets"),
            format!(
                "span of {} bytes does not match shape {shape:?} of {dtype} ({nbytes} bytes)",
                end - begin
            ),
        ));
    }
    Ok(TensorInfo {
        name: name.to_string(),
        dtype,
        shape,
        data_offsets: [begin, end],
    })
}

/// Sorts tensors by offset and checks that they tile `0..data_len` exactly.
fn check_tiling(tensors: &mut [TensorInfo], data_len: usize) -> Result<()> {
    tensors.sort_by(|a, b| {
        a.data_offsets
            .cmp(&b.data_offsets)
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut expected = 0usize;
    let mut previous: Option<&str> = None;
    for t in tensors.iter() {
        let [begin, end] = t.data_offsets;
        if begin < expected {
            return Err(err(
                tensor_field(&t.name, "data_offsets"),
                format!(
                    "bytes {begin}..{end} overlap tensor {:?}",
                    previous.unwrap_or("")
                ),
            ));
        }
        if begin > expected {
            return Err(err(
                tensor_field(&t.name, "data_offsets"),
                format!(
                    "leaves a gap of {} unused bytes before it",
                    begin - expected
                ),
            ));
        }
        expected = end;
        previous = Some(&t.name);
    }
    if expected != data_len {
        return Err(err(
            "file_length",
            format!(
                "{} bytes after the last tensor's data (the file must end there)",
                data_len - expected
            ),
        ));
    }
    Ok(())
}

/// A validated safetensors file whose tensors are zero-copy windows of its buffer.
#[derive(Clone, Debug)]
pub struct SafeTensors {
    buffer: Buffer,
    header: Header,
    index: HashMap<String, usize>,
}

impl SafeTensors {
    /// Maps and validates the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<SafeTensors> {
        let path = path.as_ref();
        let buffer = Buffer::map_file(path)?;
        SafeTensors::from_buffer(buffer).map_err(|e| e.in_file(path))
    }

    /// Validates a file image held in `buffer`.
    pub fn from_buffer(buffer: Buffer) -> Result<SafeTensors> {
        let header = parse_header(buffer.as_bytes())?;
        let index = header
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(SafeTensors {
            buffer,
            header,
            index,
        })
    }

    /// Validates a copy of the file image `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Result<SafeTensors> {
        SafeTensors::from_buffer(Buffer::from_bytes(bytes))
    }

    /// The validated header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The `__metadata__` map.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.header.metadata
    }

    /// The tensors' entries, in data-offset order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// Tensor names, in data-offset order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.header.tensors.iter().map(|t| t.name.as_str())
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.header.tensors.len()
    }

    /// True when the file holds no tensors.
    pub fn is_empty(&self) -> bool {
        self.header.tensors.is_empty()
    }

    /// The entry of tensor `name`.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.header.tensors[i])
    }

    /// The underlying buffer (the file's mapping).
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// Tensor `name` as a zero-copy window of the buffer.
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let info = self.info(name).ok_or_else(|| Error::NotFound {
            kind: "tensor",
            name: name.to_string(),
        })?;
        self.tensor(info)
    }

    /// The tensor described by `info` (an entry of this file).
    pub fn tensor(&self, info: &TensorInfo) -> Result<Tensor> {
        let start = self.header.data_start() + info.data_offsets[0];
        Tensor::from_buffer(
            self.buffer.clone(),
            start,
            info.nbytes(),
            info.dtype,
            &info.shape,
        )
    }

    /// Every tensor, in data-offset order, as `(name, tensor)`.
    pub fn load_all(&self) -> Result<Vec<(String, Tensor)>> {
        self.header
            .tensors
            .iter()
            .map(|info| Ok((info.name.clone(), self.tensor(info)?)))
            .collect()
    }
}

/// The official writer's order key: dtypes in the format's declared alignment order.
fn dtype_rank(dtype: DType) -> Result<u8> {
    Ok(match dtype {
        DType::Bool => 0,
        DType::U8 => 4,
        DType::I8 => 5,
        DType::I16 => 11,
        DType::F16 => 13,
        DType::BF16 => 14,
        DType::I32 => 15,
        DType::F32 => 17,
        DType::F64 => 19,
        DType::I64 => 20,
        other => {
            return Err(Error::InvalidArgument(format!(
                "safetensors cannot store dtype {other}"
            )));
        }
    })
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// Serializes named tensors (and optional metadata) into a safetensors image, laid
/// out as the official writer does: tensors sorted by descending dtype alignment then
/// name, header padded with spaces to a multiple of 8. Metadata keys are written in
/// sorted order. Non-contiguous tensors are written in row-major order.
pub fn serialize<N: AsRef<str>>(
    tensors: &[(N, &Tensor)],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    write(&mut out, tensors, metadata)?;
    Ok(out)
}

/// Writes a safetensors image to `w` (see [`serialize`]).
pub fn write<N: AsRef<str>, W: Write>(
    mut w: W,
    tensors: &[(N, &Tensor)],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let mut order: Vec<(u8, &str, &Tensor)> = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let name = name.as_ref();
        if name == METADATA_KEY {
            return Err(Error::InvalidArgument(format!(
                "{METADATA_KEY} cannot be a tensor name"
            )));
        }
        order.push((dtype_rank(t.dtype())?, name, t));
    }
    order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    if let Some(pair) = order.windows(2).find(|p| p[0].1 == p[1].1) {
        return Err(Error::InvalidArgument(format!(
            "tensor name {:?} appears twice",
            pair[0].1
        )));
    }
    let mut json = String::from("{");
    let mut first = true;
    if let Some(metadata) = metadata {
        json.push_str(&json_string(METADATA_KEY));
        json.push_str(":{");
        for (i, (k, v)) in metadata.iter().enumerate() {
            if i > 0 {
                json.push(',');
            }
            json.push_str(&json_string(k));
            json.push(':');
            json.push_str(&json_string(v));
        }
        json.push('}');
        first = false;
    }
    let mut offset = 0usize;
    for (_, name, t) in &order {
        if !first {
            json.push(',');
        }
        first = false;
        let end = offset + t.nbytes();
        let dims: Vec<String> = t.dims().iter().map(|d| d.to_string()).collect();
        json.push_str(&format!(
            "{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            json_string(name),
            t.dtype().name(),
            dims.join(",")
        ));
        offset = end;
    }
    json.push('}');
    let pad = (8 - json.len() % 8) % 8;
    json.extend(std::iter::repeat_n(' ', pad));
    let io = |e| Error::InvalidArgument(format!("write failed: {e}"));
    w.write_all(&(json.len() as u64).to_le_bytes())
        .map_err(io)?;
    w.write_all(json.as_bytes()).map_err(io)?;
    for (_, _, t) in &order {
        match t.contiguous_bytes() {
            Ok(bytes) => w.write_all(bytes).map_err(io)?,
            Err(_) => w.write_all(&t.to_bytes()).map_err(io)?,
        }
    }
    Ok(())
}

/// Writes a safetensors file at `path` (through a temporary file in the same folder,
/// renamed into place, so a crash never leaves a half-written file under `path`).
pub fn save<N: AsRef<str>>(
    path: impl AsRef<Path>,
    tensors: &[(N, &Tensor)],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    crate::formats::write_atomically(path, |w| write(w, tensors, metadata))
}

/// The index of a sharded safetensors set (`model.safetensors.index.json`).
#[derive(Clone, Debug)]
pub struct ShardedSafeTensors {
    index_path: PathBuf,
    metadata: serde_json::Map<String, serde_json::Value>,
    shards: Vec<(String, SafeTensors)>,
    weight_map: BTreeMap<String, usize>,
}

impl ShardedSafeTensors {
    /// Opens a sharded set from its index file: every shard the `weight_map` names is
    /// opened and validated, and every tensor must be in the shard the map names.
    pub fn open(index_path: impl AsRef<Path>) -> Result<ShardedSafeTensors> {
        let index_path = index_path.as_ref();
        let text =
            std::fs::read_to_string(index_path).map_err(|e| Error::io(index_path, "read", e))?;
        let fmt_err = |field: &str, what: String| {
            Error::format("safetensors index", field, what).in_file(index_path)
        };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| fmt_err("index", format!("invalid JSON: {e}")))?;
        let metadata = match value.get("metadata") {
            None | Some(serde_json::Value::Null) => serde_json::Map::new(),
            Some(serde_json::Value::Object(m)) => m.clone(),
            Some(_) => return Err(fmt_err("metadata", "not an object".to_string())),
        };
        let map = value
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| fmt_err("weight_map", "missing or not an object".to_string()))?;
        let dir = index_path.parent().unwrap_or(Path::new("."));
        let mut shards: Vec<(String, SafeTensors)> = Vec::new();
        let mut weight_map = BTreeMap::new();
        for (tensor, file) in map {
            let file = file.as_str().ok_or_else(|| {
                fmt_err(
                    &format!("weight_map.{tensor:?}"),
                    "not a string".to_string(),
                )
            })?;
            if file.contains('/') || file.contains('\\') || file == ".." {
                return Err(fmt_err(
                    &format!("weight_map.{tensor:?}"),
                    format!("shard {file:?} is not a file name in the index's folder"),
                ));
            }
            let shard = match shards.iter().position(|(f, _)| f == file) {
                Some(i) => i,
                None => {
                    shards.push((file.to_string(), SafeTensors::open(dir.join(file))?));
                    shards.len() - 1
                }
            };
            if shards[shard].1.info(tensor).is_none() {
                return Err(fmt_err(
                    &format!("weight_map.{tensor:?}"),
                    format!("shard {file:?} has no tensor of that name"),
                ));
            }
            weight_map.insert(tensor.clone(), shard);
        }
        Ok(ShardedSafeTensors {
            index_path: index_path.to_path_buf(),
            metadata,
            shards,
            weight_map,
        })
    }

    /// The index file's path.
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// The index's `metadata` object (for example `total_size`).
    pub fn metadata(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.metadata
    }

    /// The shards, as `(file name, reader)`, in the order the index first names them.
    pub fn shards(&self) -> &[(String, SafeTensors)] {
        &self.shards
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.weight_map.keys().map(String::as_str)
    }

    /// Number of tensors in the set.
    pub fn len(&self) -> usize {
        self.weight_map.len()
    }

    /// True when the set has no tensors.
    pub fn is_empty(&self) -> bool {
        self.weight_map.is_empty()
    }

    /// The entry of tensor `name`.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        let &shard = self.weight_map.get(name)?;
        self.shards[shard].1.info(name)
    }

    /// Tensor `name`, a zero-copy window of its shard's mapping.
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let &shard = self.weight_map.get(name).ok_or_else(|| Error::NotFound {
            kind: "tensor",
            name: name.to_string(),
        })?;
        self.shards[shard].1.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn round_trips_and_orders_like_the_official_writer() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let b = Tensor::from_vec(vec![7i64], &[]).unwrap();
        let c = Tensor::from_bools(&[true, false], &[2]).unwrap();
        let mut meta = BTreeMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        let bytes = serialize(&[("a", &a), ("c", &c), ("b", &b)], Some(&meta)).unwrap();
        let st = SafeTensors::from_bytes(&bytes).unwrap();
        assert_eq!(st.names().collect::<Vec<_>>(), vec!["b", "a", "c"]);
        assert_eq!(st.metadata(), &meta);
        assert_eq!(
            st.get("a").unwrap().to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, 3.0]
        );
        assert_eq!(st.get("b").unwrap().dims(), &[] as &[usize]);
        assert_eq!((bytes.len() - 8 - st.header().data_len()) % 8, 0);
        assert!(st.get("zz").is_err());
    }

    #[test]
    fn validation_names_fields() {
        let cases: &[(&str, &[u8], &str)] = &[
            (
                r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                &[0; 4],
                "data_offsets",
            ),
            (
                r#"{"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}"#,
                &[0; 2],
                "dtype",
            ),
            (
                r#"{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#,
                &[0; 4],
                "shape",
            ),
            (
                r#"{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#,
                &[0; 3],
                "file_length",
            ),
            (r#"{"__metadata__":{"a":1}}"#, &[], "__metadata__"),
            (
                r#"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
                &[0; 1],
                "tensors.\"w\"",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#,
                &[0; 3],
                "data_offsets",
            ),
            ("[]", &[], "header"),
        ];
        for (header, data, field) in cases {
            let e = SafeTensors::from_bytes(&image(header, data)).unwrap_err();
            assert!(
                e.field().is_some_and(|f| f.contains(field)),
                "{header}: expected field {field}, got {e}"
            );
        }
    }

    #[test]
    fn empty_header_and_zero_sized_tensors_are_fine() {
        assert!(
            SafeTensors::from_bytes(&image("{}", &[]))
                .unwrap()
                .is_empty()
        );
        let st = SafeTensors::from_bytes(&image(
            r#"{"z":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"s":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}"#,
            &[5],
        ))
        .unwrap();
        assert_eq!(st.get("z").unwrap().numel(), 0);
        assert_eq!(st.get("s").unwrap().to_vec::<u8>().unwrap(), vec![5]);
    }

    #[test]
    fn every_prefix_of_a_valid_file_is_an_error() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let bytes = serialize(&[("a", &a)], None).unwrap();
        for cut in 0..bytes.len() {
            assert!(
                SafeTensors::from_bytes(&bytes[..cut]).is_err(),
                "prefix {cut}"
            );
        }
    }
}
