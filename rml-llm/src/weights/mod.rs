//! Where weights come from: the [`WeightSource`] trait (named tensors with dtype,
//! shape and bytes), its safetensors (single file or sharded set), GGUF and in-memory
//! implementations, the Hugging Face ⇄ GGUF naming map ([`names`]) and the
//! conversions the loader applies ([`transform`]: Q/K row permutation, Gemma's
//! `1 + w` norms, fused-projection splits).

pub mod gguf;
pub mod names;
pub mod transform;

use std::collections::BTreeMap;
use std::path::Path;

use rml_host::Tensor;
use rml_host::formats::safetensors::{SafeTensors, ShardedSafeTensors};

pub use gguf::GgufSource;
pub use names::{Convention, Part, Role};

use crate::error::{Error, Result};

/// Named tensors plus the convention their names and layouts follow.
pub trait WeightSource {
    /// The naming / layout convention.
    fn convention(&self) -> Convention;

    /// The tensor called `name` (shape in row-major order, outermost first), or
    /// `None` when the source has no such tensor.
    fn tensor(&self, name: &str) -> Result<Option<Tensor>>;
}

/// A safetensors checkpoint (Hugging Face convention), one file or a sharded set.
#[derive(Debug)]
pub enum SafetensorsSource {
    /// One `model.safetensors`.
    Single(SafeTensors),
    /// A set described by `model.safetensors.index.json`.
    Sharded(ShardedSafeTensors),
}

impl SafetensorsSource {
    /// Opens a `.safetensors` file, a `.index.json` index, or a directory holding
    /// `model.safetensors.index.json` or `model.safetensors`.
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsSource> {
        let path = path.as_ref();
        if path.is_dir() {
            let index = path.join("model.safetensors.index.json");
            if index.is_file() {
                return Self::open(index);
            }
            return Self::open(path.join("model.safetensors"));
        }
        let is_index = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".index.json"));
        Ok(if is_index {
            SafetensorsSource::Sharded(ShardedSafeTensors::open(path)?)
        } else {
            SafetensorsSource::Single(SafeTensors::open(path)?)
        })
    }
}

impl WeightSource for SafetensorsSource {
    fn convention(&self) -> Convention {
        Convention::HuggingFace
    }

    fn tensor(&self, name: &str) -> Result<Option<Tensor>> {
        let found = match self {
            SafetensorsSource::Single(st) => st.info(name).is_some().then(|| st.get(name)),
            SafetensorsSource::Sharded(st) => st.info(name).is_some().then(|| st.get(name)),
        };
        found.transpose().map_err(Error::from)
    }
}

/// Tensors held in memory under a chosen convention (tests, converters).
#[derive(Clone, Debug)]
pub struct MemorySource {
    convention: Convention,
    tensors: BTreeMap<String, Tensor>,
}

impl MemorySource {
    /// An empty source following `convention`.
    pub fn new(convention: Convention) -> MemorySource {
        MemorySource {
            convention,
            tensors: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) a tensor.
    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor) {
        self.tensors.insert(name.into(), tensor);
    }

    /// The names held, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }
}

impl WeightSource for MemorySource {
    fn convention(&self) -> Convention {
        self.convention
    }

    fn tensor(&self, name: &str) -> Result<Option<Tensor>> {
        Ok(self.tensors.get(name).cloned())
    }
}
