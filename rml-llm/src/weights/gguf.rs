//! GGUF files as a [`WeightSource`] (GGUF convention) and as configuration
//! [`Metadata`], over the `rml-host` GGUF reader.
//!
//! Tensors are handed out in row-major shape (the reverse of ggml's dims), so a
//! projection is `[out, in]` as in Hugging Face files; quantized tensors keep their
//! GGML block dtype.

use std::path::Path;

use rml_host::Tensor;
use rml_host::formats::gguf::{GgufFile, Value};

use super::{Convention, WeightSource};
use crate::config::{MetaValue, Metadata};
use crate::error::{Error, Result};

/// A memory-mapped GGUF file.
#[derive(Debug)]
pub struct GgufSource {
    file: GgufFile,
}

impl GgufSource {
    /// Opens and validates a GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufSource> {
        Ok(GgufSource {
            file: GgufFile::open(path).map_err(Error::Gguf)?,
        })
    }

    /// The parsed file.
    pub fn file(&self) -> &GgufFile {
        &self.file
    }
}

impl WeightSource for GgufSource {
    fn convention(&self) -> Convention {
        Convention::Gguf
    }

    fn tensor(&self, name: &str) -> Result<Option<Tensor>> {
        let Some(t) = self.file.tensor(name) else {
            return Ok(None);
        };
        let dtype = t.info.dtype().map_err(Error::Gguf)?;
        Ok(Some(Tensor::from_raw(dtype, &t.info.shape(), t.data)?))
    }
}

impl Metadata for GgufSource {
    fn value(&self, key: &str) -> Option<MetaValue> {
        Some(match self.file.get(key)? {
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
