//! The GGUF reader: [`Gguf`] parses and validates a whole file held in any byte
//! storage (a slice, a `Vec`, an mmap), then serves metadata and zero-copy tensor
//! data from it.

#![forbid(unsafe_code)]

use std::collections::HashMap;

use rml_core::{DType, GgmlType};

use super::cursor::Cursor;
use super::error::{GgufError, Result};
use super::value::{ArrayValue, Value, ValueType, read_value};
use super::{DEFAULT_ALIGNMENT, MAGIC, MAX_DIMS};

/// Fewest bytes one metadata pair can take: key length, one key byte, type id, and
/// a one-byte value.
const MIN_KV_BYTES: usize = 8 + 1 + 4 + 1;
/// Fewest bytes one tensor info can take: name length, n_dims, type id, offset.
const MIN_TENSOR_INFO_BYTES: usize = 8 + 4 + 4 + 8;
/// Upper bound on what is reserved up front for per-key and per-tensor tables; they
/// grow past it only as entries are actually parsed.
const MAX_PRERESERVE: usize = 1024;

/// Options for [`Gguf::parse_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Accept tensors whose type ggml defines but rml cannot compute with (IQ*, TQ*,
    /// MXFP4, …). Tools that only list a file (`inspect`) set this; loaders do not.
    pub allow_unsupported_types: bool,
}

/// One tensor's description from the tensor-info table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    name: String,
    ty: GgmlType,
    n_dims: u32,
    dims: [u64; MAX_DIMS],
    n_elements: u64,
    size: u64,
    offset: u64,
    file_offset: u64,
}

impl TensorInfo {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ggml type.
    pub fn ggml_type(&self) -> GgmlType {
        self.ty
    }

    /// The rml dtype, or [`GgufError::UnsupportedTensorType`] naming the tensor.
    pub fn dtype(&self) -> Result<DType> {
        self.ty
            .to_dtype()
            .map_err(|_| GgufError::UnsupportedTensorType {
                tensor: self.name.clone(),
                ty: self.ty,
            })
    }

    /// The dimensions in ggml order: `dims()[0]` is the contiguous axis.
    pub fn dims(&self) -> &[u64] {
        &self.dims[..self.n_dims as usize]
    }

    /// The shape in row-major order (outermost first, as PyTorch and rml write it):
    /// the reverse of [`dims`](Self::dims).
    pub fn shape(&self) -> Vec<usize> {
        // Every dim is at most the element count, which fits in i64 and was checked
        // against the file length, so it fits in usize on 64-bit hosts.
        self.dims()
            .iter()
            .rev()
            .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect()
    }

    /// The number of elements.
    pub fn n_elements(&self) -> u64 {
        self.n_elements
    }

    /// The data size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size
    }

    /// The offset as stored: relative to the start of the data section.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The absolute offset of the data in the file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }
}

/// A tensor's description together with its bytes.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    /// The description.
    pub info: &'a TensorInfo,
    /// The data, straight from the file (no copy).
    pub data: &'a [u8],
}

#[derive(Clone, Debug)]
struct KvEntry {
    key: String,
    ty: ValueType,
    /// Position of the encoded value (after its type id).
    at: usize,
    /// Position just past the encoded value.
    end: usize,
}

/// A parsed, validated GGUF file over storage `B`.
///
/// Parsing checks everything the format allows to be wrong (see `docs/formats.md`,
/// section GGUF); afterwards metadata reads and tensor slicing cannot fail except by
/// asking for something absent or of another type.
#[derive(Debug)]
pub struct Gguf<B: AsRef<[u8]>> {
    bytes: B,
    version: u32,
    alignment: u64,
    data_offset: u64,
    kvs: Vec<KvEntry>,
    kv_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

/// Rounds `x` up to a multiple of `align` (a power of two), or `None` on overflow.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    x.checked_add(align - 1).map(|v| v & !(align - 1))
}

impl<B: AsRef<[u8]>> Gguf<B> {
    /// Parses and validates `bytes`, rejecting tensor types rml cannot compute with.
    pub fn parse(bytes: B) -> Result<Self> {
        Self::parse_with(bytes, ReadOptions::default())
    }

    /// Parses and validates `bytes` with `options`.
    pub fn parse_with(bytes: B, options: ReadOptions) -> Result<Self> {
        let parsed = parse_tables(bytes.as_ref(), options)?;
        Ok(Gguf {
            bytes,
            version: parsed.version,
            alignment: parsed.alignment,
            data_offset: parsed.data_offset,
            kvs: parsed.kvs,
            kv_index: parsed.kv_index,
            tensors: parsed.tensors,
            tensor_index: parsed.tensor_index,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute offset of the tensor data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The underlying storage.
    pub fn storage(&self) -> &B {
        &self.bytes
    }

    /// The number of metadata pairs.
    pub fn metadata_len(&self) -> usize {
        self.kvs.len()
    }

    /// Metadata pairs in file order.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, Value<'_>)> + '_ {
        self.kvs
            .iter()
            .filter_map(|e| Some((e.key.as_str(), self.decode(e)?)))
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.kv_index.contains_key(key)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<Value<'_>> {
        let e = &self.kvs[*self.kv_index.get(key)?];
        self.decode(e)
    }

    fn decode(&self, e: &KvEntry) -> Option<Value<'_>> {
        let bytes = self.bytes.as_ref();
        let mut c = Cursor::new(bytes, e.at);
        if e.ty == ValueType::Array {
            // The array was validated and measured at parse time: build the view from
            // its recorded extent instead of walking every element again.
            let element_type = ValueType::from_id(c.u32(String::new).ok()?)?;
            let len = c.u64(String::new).ok()?;
            let raw = bytes.get(c.pos()..e.end)?;
            return Some(Value::Array(ArrayValue::from_validated(
                element_type,
                len,
                raw,
                1,
            )));
        }
        read_value(&mut c, e.ty, &String::new, 0).ok()
    }

    /// The value of `key` or [`GgufError::MissingKey`].
    pub fn require(&self, key: &str) -> Result<Value<'_>> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })
    }

    /// An integer of any GGUF integer type converted to `T` when it fits, as
    /// llama.cpp accepts for counts that writers store as u32, u64 or i32.
    pub fn get_int<T: TryFrom<i128>>(&self, key: &str) -> Result<T> {
        let v = self.require(key)?;
        let i = v.as_integer().ok_or_else(|| GgufError::WrongType {
            key: key.to_string(),
            expected: "integer",
            found: v.type_description(),
        })?;
        T::try_from(i).map_err(|_| GgufError::OutOfRange {
            key: key.to_string(),
            value: i,
            target: std::any::type_name::<T>(),
        })
    }

    /// The array at `key`.
    pub fn get_array(&self, key: &str) -> Result<ArrayValue<'_>> {
        match self.require(key)? {
            Value::Array(a) => Ok(a),
            v => Err(wrong(key, "array", &v)),
        }
    }

    /// The array of strings at `key` (a tokenizer vocabulary, merges).
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>> {
        let a = self.get_array(key)?;
        match a.strings() {
            Some(it) => Ok(it.collect()),
            None => Err(wrong(key, "array of string", &Value::Array(a))),
        }
    }

    /// The array of f32 at `key` (tokenizer scores).
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>> {
        let a = self.get_array(key)?;
        if a.element_type() != ValueType::F32 {
            return Err(wrong(key, "array of f32", &Value::Array(a)));
        }
        Ok(a.raw_bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    /// The array at `key` as i64s when its elements are of any integer type that fits
    /// (token types are i32, some writers use other widths).
    pub fn get_int_array(&self, key: &str) -> Result<Vec<i64>> {
        let a = self.get_array(key)?;
        let mut out = Vec::with_capacity(usize::try_from(a.len()).unwrap_or(0));
        for v in a.iter() {
            let i = v
                .as_integer()
                .ok_or_else(|| wrong(key, "array of integers", &Value::Array(a)))?;
            out.push(i64::try_from(i).map_err(|_| GgufError::OutOfRange {
                key: key.to_string(),
                value: i,
                target: "i64",
            })?);
        }
        Ok(out)
    }

    /// The number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// Tensor infos in file order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The info of tensor `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of the tensor described by `info` (an info of this file).
    pub fn tensor_data(&self, info: &TensorInfo) -> &[u8] {
        let bytes = self.bytes.as_ref();
        let start = usize::try_from(info.file_offset).unwrap_or(usize::MAX);
        let len = usize::try_from(info.size).unwrap_or(usize::MAX);
        start
            .checked_add(len)
            .and_then(|end| bytes.get(start..end))
            .unwrap_or(&[])
    }

    /// Tensor `name` with its data, if present.
    pub fn tensor(&self, name: &str) -> Option<TensorRef<'_>> {
        let info = self.tensor_info(name)?;
        Some(TensorRef {
            info,
            data: self.tensor_data(info),
        })
    }

    /// Tensor `name` with its data, or [`GgufError::MissingTensor`].
    pub fn require_tensor(&self, name: &str) -> Result<TensorRef<'_>> {
        self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            tensor: name.to_string(),
        })
    }

    /// All tensors with their data, in file order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorRef<'_>> + '_ {
        self.tensors.iter().map(|info| TensorRef {
            info,
            data: self.tensor_data(info),
        })
    }
}

fn wrong(key: &str, expected: &'static str, found: &Value<'_>) -> GgufError {
    GgufError::WrongType {
        key: key.to_string(),
        expected,
        found: found.type_description(),
    }
}

macro_rules! typed_getters {
    ($($(#[$doc:meta])* $fn:ident -> $t:ty, $variant:ident, $name:literal;)*) => {
        impl<B: AsRef<[u8]>> Gguf<B> {
            $(
                $(#[$doc])*
                pub fn $fn(&self, key: &str) -> Result<$t> {
                    match self.require(key)? {
                        Value::$variant(v) => Ok(v),
                        v => Err(wrong(key, $name, &v)),
                    }
                }
            )*
        }
    };
}

typed_getters! {
    /// The `u8` at `key` (exact type).
    get_u8 -> u8, U8, "u8";
    /// The `i8` at `key` (exact type).
    get_i8 -> i8, I8, "i8";
    /// The `u16` at `key` (exact type).
    get_u16 -> u16, U16, "u16";
    /// The `i16` at `key` (exact type).
    get_i16 -> i16, I16, "i16";
    /// The `u32` at `key` (exact type; see [`Gguf::get_int`] for any width).
    get_u32 -> u32, U32, "u32";
    /// The `i32` at `key` (exact type).
    get_i32 -> i32, I32, "i32";
    /// The `u64` at `key` (exact type).
    get_u64 -> u64, U64, "u64";
    /// The `i64` at `key` (exact type).
    get_i64 -> i64, I64, "i64";
    /// The `f32` at `key` (exact type).
    get_f32 -> f32, F32, "f32";
    /// The `f64` at `key` (exact type).
    get_f64 -> f64, F64, "f64";
    /// The bool at `key`.
    get_bool -> bool, Bool, "bool";
    /// The string at `key`.
    get_str -> &str, String, "string";
}

/// The tables parsed from a file, before they are joined with its storage.
struct Parsed {
    version: u32,
    alignment: u64,
    data_offset: u64,
    kvs: Vec<KvEntry>,
    kv_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

fn parse_tables(bytes: &[u8], options: ReadOptions) -> Result<Parsed> {
    let mut c = Cursor::new(bytes, 0);
    let magic = c.array::<4>(|| "magic".to_string())?;
    if magic != MAGIC {
        let mut swapped = MAGIC;
        swapped.reverse();
        return Err(if magic == swapped {
            GgufError::ByteSwapped {
                version_le: u32::from_le_bytes(
                    bytes
                        .get(4..8)
                        .and_then(|b| b.try_into().ok())
                        .unwrap_or([0; 4]),
                ),
            }
        } else {
            GgufError::BadMagic { found: magic }
        });
    }
    let version = c.u32(|| "version".to_string())?;
    if version != 0 && version & 0xFFFF == 0 {
        return Err(GgufError::ByteSwapped {
            version_le: version,
        });
    }
    if !(2..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }

    let tc_at = c.pos() as u64;
    let tensor_count = c.u64(|| "tensor_count".to_string())?;
    let kc_at = c.pos() as u64;
    let kv_count = c.u64(|| "metadata_kv_count".to_string())?;
    let max_tensors = (c.remaining() / MIN_TENSOR_INFO_BYTES) as u64;
    if tensor_count > max_tensors {
        return Err(GgufError::CountTooLarge {
            what: "tensor_count".to_string(),
            offset: tc_at,
            count: tensor_count,
            max: max_tensors,
        });
    }
    let max_kvs = (c.remaining() / MIN_KV_BYTES) as u64;
    if kv_count > max_kvs {
        return Err(GgufError::CountTooLarge {
            what: "metadata_kv_count".to_string(),
            offset: kc_at,
            count: kv_count,
            max: max_kvs,
        });
    }
    // Both counts are now bounded by the file length.
    let kv_count = kv_count as usize;
    let tensor_count = tensor_count as usize;

    let mut kvs = Vec::with_capacity(kv_count.min(MAX_PRERESERVE));
    let mut kv_index = HashMap::with_capacity(kv_count.min(MAX_PRERESERVE));
    for i in 0..kv_count {
        let key_at = c.pos() as u64;
        let key = c.string(|| format!("key #{i}"))?;
        if key.is_empty() {
            return Err(GgufError::EmptyKey { offset: key_at });
        }
        if kv_index.contains_key(key) {
            return Err(GgufError::DuplicateKey {
                key: key.to_string(),
                offset: key_at,
            });
        }
        let ty_at = c.pos() as u64;
        let type_id = c.u32(|| format!("value type of key {key}"))?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            key: key.to_string(),
            offset: ty_at,
            type_id,
        })?;
        let at = c.pos();
        read_value(&mut c, ty, &|| key.to_string(), 0)?;
        kv_index.insert(key.to_string(), kvs.len());
        kvs.push(KvEntry {
            key: key.to_string(),
            ty,
            at,
            end: c.pos(),
        });
    }

    let alignment = match kv_index.get(super::KEY_ALIGNMENT) {
        None => DEFAULT_ALIGNMENT,
        Some(&i) => {
            let e: &KvEntry = &kvs[i];
            let v = read_value(&mut Cursor::new(bytes, e.at), e.ty, &String::new, 0)?;
            match v {
                Value::U32(a) if a != 0 && a.is_power_of_two() => u64::from(a),
                Value::U32(a) => {
                    return Err(GgufError::BadAlignment {
                        alignment: a.into(),
                    });
                }
                other => return Err(wrong(super::KEY_ALIGNMENT, "u32", &other)),
            }
        }
    };

    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(tensor_count.min(MAX_PRERESERVE));
    let mut tensor_index = HashMap::with_capacity(tensor_count.min(MAX_PRERESERVE));
    for i in 0..tensor_count {
        let name = c.string(|| format!("tensor info #{i} name"))?;
        if tensor_index.contains_key(name) {
            return Err(GgufError::DuplicateTensor {
                tensor: name.to_string(),
            });
        }
        let info = read_tensor_info(&mut c, name, options)?;
        tensor_index.insert(name.to_string(), tensors.len());
        tensors.push(info);
    }

    let file_len = bytes.len() as u64;
    let data_offset = align_up(c.pos() as u64, alignment).ok_or(GgufError::DataOutOfBounds {
        data_offset: u64::MAX,
        file_len,
    })?;
    if !tensors.is_empty() && data_offset > file_len {
        return Err(GgufError::DataOutOfBounds {
            data_offset,
            file_len,
        });
    }
    for t in &mut tensors {
        if t.offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let out_of_bounds = || GgufError::TensorOutOfBounds {
            tensor: t.name.clone(),
            start: data_offset.saturating_add(t.offset),
            size: t.size,
            file_len,
        };
        let start = data_offset
            .checked_add(t.offset)
            .ok_or_else(out_of_bounds)?;
        let end = start.checked_add(t.size).ok_or_else(out_of_bounds)?;
        if end > file_len {
            return Err(out_of_bounds());
        }
        t.file_offset = start;
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (tensors[i].offset, i));
    for pair in order.windows(2) {
        let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
        // Sizes are non-zero, and start + size was checked above.
        if a.offset + a.size > b.offset {
            return Err(GgufError::OverlappingTensors {
                first: a.name.clone(),
                second: b.name.clone(),
            });
        }
    }

    Ok(Parsed {
        version,
        alignment,
        data_offset,
        kvs,
        kv_index,
        tensors,
        tensor_index,
    })
}

fn read_tensor_info(c: &mut Cursor<'_>, name: &str, options: ReadOptions) -> Result<TensorInfo> {
    let tensor = || name.to_string();
    let n_dims = c.u32(|| format!("n_dims of tensor {name}"))?;
    if n_dims as usize > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            tensor: tensor(),
            n_dims,
        });
    }
    let mut dims = [1u64; MAX_DIMS];
    for (j, d) in dims.iter_mut().take(n_dims as usize).enumerate() {
        *d = c.u64(|| format!("dims[{j}] of tensor {name}"))?;
    }
    let type_id = c.u32(|| format!("type of tensor {name}"))?;
    let offset = c.u64(|| format!("offset of tensor {name}"))?;

    let ty = GgmlType::from_id(type_id).map_err(|_| GgufError::UnknownTensorType {
        tensor: tensor(),
        type_id,
    })?;
    if ty.block_size() == 0 {
        return Err(GgufError::RemovedTensorType {
            tensor: tensor(),
            ty,
        });
    }
    if !options.allow_unsupported_types && ty.to_dtype().is_err() {
        return Err(GgufError::UnsupportedTensorType {
            tensor: tensor(),
            ty,
        });
    }
    if let Some(axis) = dims.iter().position(|&d| d == 0) {
        return Err(GgufError::ZeroDim {
            tensor: tensor(),
            axis,
        });
    }
    let overflow = || GgufError::SizeOverflow {
        tensor: tensor(),
        dims: dims[..n_dims as usize].to_vec(),
    };
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(overflow)?;
    let block = ty.block_size() as u64;
    if dims[0] % block != 0 {
        return Err(GgufError::RowNotBlockMultiple {
            tensor: tensor(),
            ne0: dims[0],
            block: ty.block_size(),
        });
    }
    let size = (n_elements / block)
        .checked_mul(ty.type_size() as u64)
        .filter(|&s| s <= i64::MAX as u64)
        .ok_or_else(overflow)?;
    Ok(TensorInfo {
        name: name.to_string(),
        ty,
        n_dims,
        dims,
        n_elements,
        size,
        offset,
        file_offset: 0,
    })
}
