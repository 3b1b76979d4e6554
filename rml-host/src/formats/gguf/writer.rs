//! The GGUF writer: [`GgufWriter`] lays a file out the way ggml requires — header,
//! metadata, tensor infos, padding to the alignment, then each tensor's data in info
//! order, each padded to the alignment — so llama.cpp and `gguf.GGUFReader` read it.

#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use rml_core::GgmlType;

use super::error::{GgufError, Result};
use super::reader::align_up;
use super::value::OwnedValue;
use super::{DEFAULT_ALIGNMENT, KEY_ALIGNMENT, MAGIC, MAX_DIMS, MAX_TENSOR_NAME_LEN};

#[derive(Clone, Debug)]
struct PendingTensor<'a> {
    name: String,
    ty: GgmlType,
    dims: Vec<u64>,
    data: &'a [u8],
}

/// Builds a GGUF file from metadata and borrowed tensor bytes.
///
/// ```
/// use rml_core::GgmlType;
/// use rml_host::formats::gguf::{Gguf, GgufWriter};
///
/// let weights: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// let mut w = GgufWriter::new();
/// w.add_kv("general.architecture", "llama")?;
/// w.add_tensor("w", GgmlType::F32, &[3], &weights)?;
/// let bytes = w.to_bytes()?;
/// let file = Gguf::parse(&bytes[..])?;
/// assert_eq!(file.get_str("general.architecture")?, "llama");
/// assert_eq!(file.tensor("w").unwrap().data, &weights[..]);
/// # Ok::<(), rml_host::formats::gguf::GgufError>(())
/// ```
#[derive(Clone, Debug)]
pub struct GgufWriter<'a> {
    version: u32,
    alignment: u64,
    kvs: Vec<(String, OwnedValue)>,
    keys: HashSet<String>,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty GGUF v3 file with the default alignment (32).
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            kvs: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Selects the version written (2 or 3; the layouts are identical).
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if !(2..=3).contains(&version) {
            return Err(GgufError::InvalidWrite {
                name: "version".into(),
                reason: format!("{version} is not 2 or 3"),
            });
        }
        self.version = version;
        Ok(())
    }

    /// Sets the data alignment (a non-zero power of two) and records it as the
    /// `general.alignment` u32 key, as ggml requires.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<()> {
        self.add_kv(KEY_ALIGNMENT, alignment)
    }

    /// Adds a metadata pair. Keys must be non-empty and unique; `general.alignment`
    /// must be a u32 power of two and sets the alignment.
    pub fn add_kv(&mut self, key: &str, value: impl Into<OwnedValue>) -> Result<()> {
        let value = value.into();
        let invalid = |reason: String| GgufError::InvalidWrite {
            name: format!("key {key}"),
            reason,
        };
        if key.is_empty() {
            return Err(invalid("empty key".into()));
        }
        if self.keys.contains(key) {
            return Err(invalid("duplicate key".into()));
        }
        if key == KEY_ALIGNMENT {
            match value {
                OwnedValue::U32(a) if a != 0 && a.is_power_of_two() => {
                    self.alignment = u64::from(a);
                }
                OwnedValue::U32(a) => {
                    return Err(invalid(format!("{a} is not a non-zero power of two")));
                }
                ref v => {
                    return Err(invalid(format!("must be u32, found {}", v.value_type())));
                }
            }
        }
        // Validate arrays now, so errors name the key when it is added.
        value.encode(&mut Vec::new(), 0).map_err(invalid)?;
        self.keys.insert(key.to_string());
        self.kvs.push((key.to_string(), value));
        Ok(())
    }

    /// Adds a tensor. `dims` are in ggml order (`dims[0]` contiguous); `data` must
    /// hold exactly the bytes the type and dims need. Tensors are written in the
    /// order they are added.
    pub fn add_tensor(
        &mut self,
        name: &str,
        ty: GgmlType,
        dims: &[u64],
        data: &'a [u8],
    ) -> Result<()> {
        let invalid = |reason: String| GgufError::InvalidWrite {
            name: format!("tensor {name}"),
            reason,
        };
        if name.len() > MAX_TENSOR_NAME_LEN {
            return Err(invalid(format!(
                "name is {} bytes, ggml allows at most {MAX_TENSOR_NAME_LEN}",
                name.len()
            )));
        }
        if self.names.contains(name) {
            return Err(invalid("duplicate tensor name".into()));
        }
        if dims.len() > MAX_DIMS {
            return Err(invalid(format!("{} dims, at most {MAX_DIMS}", dims.len())));
        }
        if dims.contains(&0) {
            return Err(invalid("a dimension is 0".into()));
        }
        let block = ty.block_size() as u64;
        if block == 0 {
            return Err(invalid(format!("type {} has been removed", ty.name())));
        }
        if dims.first().copied().unwrap_or(1) % block != 0 {
            return Err(invalid(format!(
                "dims[0] is not a multiple of the {} block size {block}",
                ty.name()
            )));
        }
        let size = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| (n / block).checked_mul(ty.type_size() as u64))
            .ok_or_else(|| invalid("size overflows".into()))?;
        if data.len() as u64 != size {
            return Err(invalid(format!(
                "data is {} bytes, type and dims need {size}",
                data.len()
            )));
        }
        self.names.insert(name.to_string());
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            ty,
            dims: dims.to_vec(),
            data,
        });
        Ok(())
    }

    /// Writes the file to `out`; returns the number of bytes written.
    pub fn write_to<W: Write>(&self, mut out: W) -> Result<u64> {
        let head = self.encode_head()?;
        out.write_all(&head).map_err(GgufError::Write)?;
        let mut written = head.len() as u64;
        written += write_zeros(&mut out, padding(written, self.alignment))?;
        for t in &self.tensors {
            out.write_all(t.data).map_err(GgufError::Write)?;
            let len = t.data.len() as u64;
            written += len + write_zeros(&mut out, padding(len, self.alignment))?;
        }
        out.flush().map_err(GgufError::Write)?;
        Ok(written)
    }

    /// The file as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        Ok(out)
    }

    /// Writes the file to `path` (created or truncated).
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        let file = std::fs::File::create(path).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.write_to(std::io::BufWriter::new(file))
    }

    /// Header, metadata and tensor infos (without the padding before the data).
    fn encode_head(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for (key, value) in &self.kvs {
            OwnedValue::String(key.clone())
                .encode(&mut out, 0)
                .map_err(|reason| GgufError::InvalidWrite {
                    name: format!("key {key}"),
                    reason,
                })?;
            out.extend_from_slice(&value.value_type().id().to_le_bytes());
            value
                .encode(&mut out, 0)
                .map_err(|reason| GgufError::InvalidWrite {
                    name: format!("key {key}"),
                    reason,
                })?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            out.extend_from_slice(&(t.name.len() as u64).to_le_bytes());
            out.extend_from_slice(t.name.as_bytes());
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset += t.data.len() as u64 + padding(t.data.len() as u64, self.alignment);
        }
        Ok(out)
    }
}

/// Writes `n` zero bytes from a small fixed buffer (alignments can be up to 2^31);
/// returns `n`.
fn write_zeros<W: Write>(out: &mut W, n: u64) -> Result<u64> {
    const ZEROS: [u8; 4096] = [0; 4096];
    let mut left = n;
    while left > 0 {
        let chunk = left.min(ZEROS.len() as u64) as usize;
        out.write_all(&ZEROS[..chunk]).map_err(GgufError::Write)?;
        left -= chunk as u64;
    }
    Ok(n)
}

/// Zero bytes needed after `len` to reach a multiple of `align`.
fn padding(len: u64, align: u64) -> u64 {
    align_up(len, align).map_or(0, |a| a - len)
}
