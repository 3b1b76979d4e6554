//! GGUF files as a [`WeightSource`] (GGUF convention) and as configuration
//! [`Metadata`], over the `rml-host` GGUF reader.
//!
//! The file is mapped once into an `rml_host::Buffer`; tensors are zero-copy
//! windows of it, handed out in row-major shape (the reverse of ggml's dims), so a
//! projection is `[out, in]` as in Hugging Face files. Quantized tensors keep their
//! GGML block dtype.

use std::path::Path;

use rml_host::formats::gguf::{Gguf, Value};
use rml_host::{Buffer, Tensor};

use super::{Convention, WeightSource};
use crate::config::{MetaValue, Metadata};
use crate::error::{Error, Result};

/// The mapped bytes of a GGUF file, as the reader's storage.
#[derive(Clone, Debug)]
pub struct MappedBytes(Buffer);

impl AsRef<[u8]> for MappedBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A memory-mapped GGUF file.
#[derive(Debug)]
pub struct GgufSource {
    gguf: Gguf<MappedBytes>,
}

impl GgufSource {
    /// Maps and validates a GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufSource> {
        let buffer = Buffer::map_file(path)?;
        Ok(GgufSource {
            gguf: Gguf::parse(MappedBytes(buffer)).map_err(Error::Gguf)?,
        })
    }

    /// The parsed file.
    pub fn file(&self) -> &Gguf<MappedBytes> {
        &self.gguf
    }
}

impl WeightSource for GgufSource {
    fn convention(&self) -> Convention {
        Convention::Gguf
    }

    fn tensor(&self, name: &str) -> Result<Option<Tensor>> {
        let Some(t) = self.gguf.tensor(name) else {
            return Ok(None);
        };
        let dtype = t.info.dtype().map_err(Error::Gguf)?;
        let start = usize::try_from(t.info.file_offset())
            .map_err(|_| Error::Input(format!("tensor {name:?} lies past the address space")))?;
        let buffer = self.gguf.storage().0.clone();
        Ok(Some(Tensor::from_buffer(
            buffer,
            start,
            t.data.len(),
            dtype,
            &t.info.shape(),
        )?))
    }
}

impl Metadata for GgufSource {
    fn value(&self, key: &str) -> Option<MetaValue> {
        Some(match self.gguf.get(key)? {
            Value::U8(v) => MetaValue::U64(v.into()),
            Value::U16(v) => MetaValue::U64(v.into()),
            Value::U32(v) => MetaValue::U64(v.into()),
            Value::U64(v) => MetaValue::U64(v),
            Value::I8(v) => MetaValue::I64(v.into()),
            Value::I16(v) => MetaValue::I64(v.into()),
            Value::I32(v) => MetaValue::I64(v.into()),
            Value::I64(v) => MetaValue::I64(v),
            Value::F32(v) => MetaValue::F64(v.into()),
            Value::F64(v) => MetaValue::F64(v),
            Value::Bool(v) => MetaValue::Bool(v),
            Value::String(s) => MetaValue::Str(s.to_owned()),
            Value::Array(a) => MetaValue::ArrayLen(usize::try_from(a.len()).ok()?),
        })
    }
}
