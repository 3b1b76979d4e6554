//! Checkpoints: named tensors plus training metadata, stored as one safetensors file.
//!
//! The `__metadata__` map holds `format = "rml-checkpoint"`, `format_version = "1"`,
//! `step` (decimal), and each user key as `user.KEY`. Any safetensors reader can open
//! a checkpoint; [`Checkpoint::load`] additionally checks the format name and
//! version, so a newer, incompatible checkpoint is refused with a clear error instead
//! of being misread. Saving goes through a temporary file renamed into place.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::formats::safetensors::{self, SafeTensors};
use crate::tensor::Tensor;

/// The `format` metadata value of a checkpoint.
pub const FORMAT_NAME: &str = "rml-checkpoint";
/// The checkpoint format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
const USER_PREFIX: &str = "user.";

/// Named tensors with a training step and free-form string metadata.
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    /// Training step (or any counter the caller keeps).
    pub step: u64,
    /// User metadata (for example the optimizer name or the learning rate).
    pub metadata: BTreeMap<String, String>,
    /// The tensors, by name (sorted).
    pub tensors: BTreeMap<String, Tensor>,
}

fn err(field: impl Into<String>, what: impl Into<String>) -> Error {
    Error::format("checkpoint", field, what)
}

impl Checkpoint {
    /// An empty checkpoint at `step`.
    pub fn new(step: u64) -> Checkpoint {
        Checkpoint {
            step,
            ..Checkpoint::default()
        }
    }

    /// Adds (or replaces) a tensor.
    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor) -> &mut Self {
        self.tensors.insert(name.into(), tensor);
        self
    }

    /// The safetensors `__metadata__` map this checkpoint is saved with.
    pub fn header_metadata(&self) -> BTreeMap<String, String> {
        let mut meta = BTreeMap::new();
        meta.insert("format".to_string(), FORMAT_NAME.to_string());
        meta.insert("format_version".to_string(), FORMAT_VERSION.to_string());
        meta.insert("step".to_string(), self.step.to_string());
        for (k, v) in &self.metadata {
            meta.insert(format!("{USER_PREFIX}{k}"), v.clone());
        }
        meta
    }

    /// The checkpoint as a safetensors image.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let named: Vec<(&str, &Tensor)> =
            self.tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        safetensors::serialize(&named, Some(&self.header_metadata()))
    }

    /// Saves the checkpoint to `path` atomically.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let named: Vec<(&str, &Tensor)> =
            self.tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        safetensors::save(path, &named, Some(&self.header_metadata()))
    }

    /// Loads a checkpoint; tensors are zero-copy windows of the mapped file.
    pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
        let path = path.as_ref();
        let file = SafeTensors::open(path)?;
        Checkpoint::from_safetensors(&file).map_err(|e| e.in_file(path))
    }

    /// Loads a checkpoint from a safetensors image.
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint> {
        Checkpoint::from_safetensors(&SafeTensors::from_bytes(bytes)?)
    }

    /// Interprets an open safetensors file as a checkpoint.
    pub fn from_safetensors(file: &SafeTensors) -> Result<Checkpoint> {
        let meta = file.metadata();
        match meta.get("format").map(String::as_str) {
            Some(FORMAT_NAME) => {}
            Some(other) => {
                return Err(err(
                    "__metadata__.format",
                    format!("{other:?} is not {FORMAT_NAME:?}"),
                ));
            }
            None => return Err(err("__metadata__.format", "missing: not an rml checkpoint")),
        }
        let version = meta
            .get("format_version")
            .ok_or_else(|| err("__metadata__.format_version", "missing"))?;
        if version.parse::<u32>().ok() != Some(FORMAT_VERSION) {
            return Err(err(
                "__metadata__.format_version",
                format!("version {version:?} is not supported (this build reads {FORMAT_VERSION})"),
            ));
        }
        let step = meta
            .get("step")
            .ok_or_else(|| err("__metadata__.step", "missing"))?;
        let step = step.parse::<u64>().map_err(|_| {
            err(
                "__metadata__.step",
                format!("{step:?} is not a step number"),
            )
        })?;
        let metadata = meta
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(USER_PREFIX)?.to_string(), v.clone())))
            .collect();
        let tensors = file.load_all()?.into_iter().collect();
        Ok(Checkpoint {
            step,
            metadata,
            tensors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_tensors_step_and_metadata() {
        let mut ck = Checkpoint::new(1234);
        ck.metadata.insert("optimizer".into(), "adamw".into());
        ck.insert("w", Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap());
        ck.insert("b", Tensor::from_vec(vec![3i64], &[1]).unwrap());
        let back = Checkpoint::from_bytes(&ck.to_bytes().unwrap()).unwrap();
        assert_eq!(back.step, 1234);
        assert_eq!(back.metadata, ck.metadata);
        assert_eq!(back.tensors["w"].to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert_eq!(back.tensors["b"].to_vec::<i64>().unwrap(), vec![3]);
    }

    #[test]
    fn rejects_other_files_and_versions() {
        let t = Tensor::from_vec(vec![1u8], &[1]).unwrap();
        let plain = safetensors::serialize(&[("t", &t)], None).unwrap();
        let e = Checkpoint::from_bytes(&plain).unwrap_err();
        assert_eq!(e.field(), Some("__metadata__.format"));
        let mut meta = Checkpoint::new(1).header_metadata();
        meta.insert("format_version".into(), "2".into());
        let newer = safetensors::serialize(&[("t", &t)], Some(&meta)).unwrap();
        let e = Checkpoint::from_bytes(&newer).unwrap_err();
        assert_eq!(e.field(), Some("__metadata__.format_version"));
    }
}
