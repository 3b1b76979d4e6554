//! [`ConstantSource`]: what the loader asks of a weights file. The safetensors
//! reader implements it; [`MemoryConstants`] does for tests and for graphs built in
//! memory.

use std::collections::BTreeMap;

use rml_core::DType;

/// Describes the tensors a graph's constants name.
pub trait ConstantSource {
    /// The dtype and shape of the tensor called `name`, or `None` when there is none.
    fn describe(&self, name: &str) -> Option<(DType, Vec<usize>)>;
}

/// Constants held in memory as f32 data or as bare descriptions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryConstants {
    tensors: BTreeMap<String, MemoryTensor>,
}

/// One in-memory constant.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryTensor {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// The elements as f32 (integer constants are stored exactly as f32 when they
    /// fit), or empty for a description without data.
    pub data: Vec<f32>,
}

impl MemoryConstants {
    /// No constants.
    pub fn new() -> MemoryConstants {
        MemoryConstants::default()
    }

    /// Adds (or replaces) a described constant without data.
    pub fn describe_tensor(&mut self, name: &str, dtype: DType, shape: &[usize]) -> &mut Self {
        self.insert(name, dtype, shape, Vec::new())
    }

    /// Adds (or replaces) a constant with its elements.
    pub fn insert(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Vec<f32>,
    ) -> &mut Self {
        let tensor = MemoryTensor {
            dtype,
            shape: shape.to_vec(),
            data,
        };
        self.tensors.insert(name.to_string(), tensor);
        self
    }

    /// The constant called `name`.
    pub fn get(&self, name: &str) -> Option<&MemoryTensor> {
        self.tensors.get(name)
    }
}

impl ConstantSource for MemoryConstants {
    fn describe(&self, name: &str) -> Option<(DType, Vec<usize>)> {
        self.tensors.get(name).map(|t| (t.dtype, t.shape.clone()))
    }
}
