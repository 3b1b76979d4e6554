//! [`GgufError`]: everything that can be wrong with a GGUF file, or with a request
//! made of one, each variant saying *what* was wrong and *where* (key name, tensor
//! name, byte offset, file path).

#![forbid(unsafe_code)]

use std::fmt;
use std::path::PathBuf;

use rml_core::GgmlType;

/// Result alias of the GGUF module.
pub type Result<T> = std::result::Result<T, GgufError>;

/// An error reading, validating, querying or writing GGUF.
///
/// Byte offsets (`offset`) are absolute positions in the file where the offending
/// field starts. `what` strings name the field (`"tensor_count"`, `"key #3"`,
/// `"tensor info #0 name"`, `"value of key general.name"`).
#[derive(Debug)]
#[non_exhaustive]
pub enum GgufError {
    /// Opening or mapping a file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An error inside one file of a set; wraps the error with the file's path.
    InFile {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        source: Box<GgufError>,
    },
    /// The file ends before a field does.
    Truncated {
        /// The field being read.
        what: String,
        /// Where the field starts.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },
    /// The first four bytes are not `GGUF`.
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// The version field is not 2 or 3.
    UnsupportedVersion {
        /// The version read (little-endian).
        version: u32,
    },
    /// The file looks byte-swapped (a big-endian GGUF); rml reads little-endian only.
    ByteSwapped {
        /// The version field as read little-endian.
        version_le: u32,
    },
    /// A count (tensors, keys, array elements) claims more items than the bytes left
    /// in the file could hold, even at the smallest encoding of each.
    CountTooLarge {
        /// The counted field.
        what: String,
        /// Where the count is stored.
        offset: u64,
        /// The count read.
        count: u64,
        /// The most items the remaining bytes could hold.
        max: u64,
    },
    /// A string's length prefix exceeds the bytes left.
    StringTooLong {
        /// The string field.
        what: String,
        /// Where the length prefix is stored.
        offset: u64,
        /// The length read.
        len: u64,
        /// Bytes left after the prefix.
        available: u64,
    },
    /// A string is not UTF-8.
    InvalidUtf8 {
        /// The string field.
        what: String,
        /// Where the string bytes start.
        offset: u64,
    },
    /// A metadata key is empty.
    EmptyKey {
        /// Where the key starts.
        offset: u64,
    },
    /// A metadata value type id is not one of the 13 GGUF defines.
    UnknownValueType {
        /// The key whose value (or array element type) it is.
        key: String,
        /// Where the type id is stored.
        offset: u64,
        /// The id read.
        type_id: u32,
    },
    /// Arrays nest deeper than [`super::MAX_ARRAY_DEPTH`].
    NestingTooDeep {
        /// The key holding the array.
        key: String,
        /// Where the too-deep array starts.
        offset: u64,
    },
    /// A metadata key appears twice.
    DuplicateKey {
        /// The key.
        key: String,
        /// Where its second occurrence starts.
        offset: u64,
    },
    /// `general.alignment` is zero or not a power of two.
    BadAlignment {
        /// The value read.
        alignment: u64,
    },
    /// A tensor has more than four dimensions.
    TooManyDims {
        /// The tensor.
        tensor: String,
        /// The `n_dims` read.
        n_dims: u32,
    },
    /// A tensor has a zero-sized dimension (rml rejects empty tensors; see the docs).
    ZeroDim {
        /// The tensor.
        tensor: String,
        /// Which dimension (ggml order, 0 = contiguous axis).
        axis: usize,
    },
    /// A tensor's element count or byte size overflows.
    SizeOverflow {
        /// The tensor.
        tensor: String,
        /// Its dimensions (ggml order).
        dims: Vec<u64>,
    },
    /// A tensor's type id is not one ggml defines.
    UnknownTensorType {
        /// The tensor.
        tensor: String,
        /// The id read.
        type_id: u32,
    },
    /// A tensor's type id is one ggml has removed (Q4_2, Q4_3, the `_4_4` repacks).
    RemovedTensorType {
        /// The tensor.
        tensor: String,
        /// The removed type.
        ty: GgmlType,
    },
    /// A tensor's type is valid GGUF but rml cannot compute with it (IQ*, TQ*, MXFP4…).
    UnsupportedTensorType {
        /// The tensor.
        tensor: String,
        /// The type.
        ty: GgmlType,
    },
    /// A tensor's first dimension is not a whole number of its type's blocks.
    RowNotBlockMultiple {
        /// The tensor.
        tensor: String,
        /// `dims[0]`.
        ne0: u64,
        /// The type's block size.
        block: usize,
    },
    /// Two tensors share a name.
    DuplicateTensor {
        /// The name.
        tensor: String,
    },
    /// A tensor's offset is not a multiple of the alignment.
    MisalignedTensor {
        /// The tensor.
        tensor: String,
        /// Its offset relative to the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor's bytes reach past the end of the file.
    TensorOutOfBounds {
        /// The tensor.
        tensor: String,
        /// Absolute start of its data.
        start: u64,
        /// Its size in bytes.
        size: u64,
        /// The file length.
        file_len: u64,
    },
    /// Two tensors' byte ranges overlap.
    OverlappingTensors {
        /// The tensor that starts first.
        first: String,
        /// The tensor that starts inside it.
        second: String,
    },
    /// The data section starts past the end of the file.
    DataOutOfBounds {
        /// Absolute start of the data section.
        data_offset: u64,
        /// The file length.
        file_len: u64,
    },
    /// A metadata key that was asked for is absent.
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata value has a different type than asked for.
    WrongType {
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The type stored.
        found: String,
    },
    /// An integer value does not fit the type asked for.
    OutOfRange {
        /// The key.
        key: String,
        /// The value stored.
        value: i128,
        /// The type asked for.
        target: &'static str,
    },
    /// A tensor that was asked for is absent.
    MissingTensor {
        /// The name.
        tensor: String,
    },
    /// A split set is inconsistent (missing part, wrong `split.no`, counts disagree).
    BadSplit {
        /// What is wrong.
        reason: String,
    },
    /// A value or tensor handed to the writer cannot be written.
    InvalidWrite {
        /// The key or tensor concerned.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Writing the output failed.
    Write(std::io::Error),
}

impl GgufError {
    /// The error with any [`GgufError::InFile`] wrappers removed, for matching on kind.
    pub fn root(&self) -> &GgufError {
        match self {
            GgufError::InFile { source, .. } => source.root(),
            other => other,
        }
    }

    pub(crate) fn in_file(self, path: &std::path::Path) -> GgufError {
        GgufError::InFile {
            path: path.to_path_buf(),
            source: Box::new(self),
        }
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            GgufError::InFile { path, source } => write!(f, "{}: {source}", path.display()),
            GgufError::Truncated {
                what,
                offset,
                needed,
                available,
            } => write!(
                f,
                "file ends inside {what} at byte {offset}: needs {needed} bytes, {available} left"
            ),
            GgufError::BadMagic { found } => write!(
                f,
                "not a GGUF file: magic is {found:02x?} ({:?}), expected \"GGUF\"",
                String::from_utf8_lossy(found)
            ),
            GgufError::UnsupportedVersion { version } => match version {
                1 => f.write_str(
                    "GGUF version 1 is not supported (32-bit lengths; re-convert the model)",
                ),
                v => write!(
                    f,
                    "unsupported GGUF version {v} (rml reads versions 2 and 3)"
                ),
            },
            GgufError::ByteSwapped { version_le } => write!(
                f,
                "file appears to be byte-swapped (big-endian GGUF; version field reads \
                 {version_le:#010x}); rml reads little-endian GGUF only"
            ),
            GgufError::CountTooLarge {
                what,
                offset,
                count,
                max,
            } => write!(
                f,
                "{what} at byte {offset} is {count}, but the rest of the file can hold at most {max}"
            ),
            GgufError::StringTooLong {
                what,
                offset,
                len,
                available,
            } => write!(
                f,
                "{what} at byte {offset} claims {len} bytes, but only {available} are left"
            ),
            GgufError::InvalidUtf8 { what, offset } => {
                write!(f, "{what} at byte {offset} is not valid UTF-8")
            }
            GgufError::EmptyKey { offset } => write!(f, "empty metadata key at byte {offset}"),
            GgufError::UnknownValueType {
                key,
                offset,
                type_id,
            } => write!(
                f,
                "key {key}: unknown metadata value type {type_id} at byte {offset}"
            ),
            GgufError::NestingTooDeep { key, offset } => write!(
                f,
                "key {key}: arrays nested deeper than {} levels at byte {offset}",
                super::MAX_ARRAY_DEPTH
            ),
            GgufError::DuplicateKey { key, offset } => {
                write!(f, "duplicate metadata key {key} at byte {offset}")
            }
            GgufError::BadAlignment { alignment } => write!(
                f,
                "key general.alignment: {alignment} is not a non-zero power of two"
            ),
            GgufError::TooManyDims { tensor, n_dims } => write!(
                f,
                "tensor {tensor}: n_dims is {n_dims}, at most 4 are allowed"
            ),
            GgufError::ZeroDim { tensor, axis } => write!(
                f,
                "tensor {tensor}: dimension {axis} is 0 (empty tensors are rejected)"
            ),
            GgufError::SizeOverflow { tensor, dims } => write!(
                f,
                "tensor {tensor}: element count or byte size of dims {dims:?} overflows"
            ),
            GgufError::UnknownTensorType { tensor, type_id } => {
                write!(f, "tensor {tensor}: unknown ggml type id {type_id}")
            }
            GgufError::RemovedTensorType { tensor, ty } => write!(
                f,
                "tensor {tensor}: ggml type {} (id {}) has been removed from ggml",
                ty.name(),
                ty.id()
            ),
            GgufError::UnsupportedTensorType { tensor, ty } => write!(
                f,
                "tensor {tensor}: type {} is not supported by rml",
                ty.name()
            ),
            GgufError::RowNotBlockMultiple { tensor, ne0, block } => write!(
                f,
                "tensor {tensor}: dims[0] = {ne0} is not a multiple of the block size {block}"
            ),
            GgufError::DuplicateTensor { tensor } => write!(f, "duplicate tensor name {tensor}"),
            GgufError::MisalignedTensor {
                tensor,
                offset,
                alignment,
            } => write!(
                f,
                "tensor {tensor}: offset {offset} is not a multiple of the alignment {alignment}"
            ),
            GgufError::TensorOutOfBounds {
                tensor,
                start,
                size,
                file_len,
            } => write!(
                f,
                "tensor {tensor}: {size} bytes at byte {start} reach past the end of the \
                 file ({file_len} bytes)"
            ),
            GgufError::OverlappingTensors { first, second } => {
                write!(f, "tensors {first} and {second} overlap")
            }
            GgufError::DataOutOfBounds {
                data_offset,
                file_len,
            } => write!(
                f,
                "tensor data section starts at byte {data_offset}, past the end of the file \
                 ({file_len} bytes)"
            ),
            GgufError::MissingKey { key } => write!(f, "key {key}: missing"),
            GgufError::WrongType {
                key,
                expected,
                found,
            } => write!(f, "key {key}: expected {expected}, found {found}"),
            GgufError::OutOfRange { key, value, target } => {
                write!(f, "key {key}: value {value} does not fit in {target}")
            }
            GgufError::MissingTensor { tensor } => write!(f, "tensor {tensor}: missing"),
            GgufError::BadSplit { reason } => write!(f, "invalid split GGUF set: {reason}"),
            GgufError::InvalidWrite { name, reason } => {
                write!(f, "cannot write {name}: {reason}")
            }
            GgufError::Write(e) => write!(f, "writing GGUF failed: {e}"),
        }
    }
}

impl std::error::Error for GgufError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GgufError::Io { source, .. } | GgufError::Write(source) => Some(source),
            GgufError::InFile { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
