//! [`ConstantSource`]: what the loader asks of a weights file, and
//! [`ConstantValues`]: what the reference interpreter reads. The safetensors reader
//! implements them; [`MemoryConstants`] does for tests and for graphs built in
//! memory.

use std::collections::BTreeMap;

use rml_core::DType;

use super::buffer::Buffer;

/// Describes the tensors a graph's constants name.
pub trait ConstantSource {
    /// The dtype and shape of the tensor called `name`, or `None` when there is none.
    fn describe(&self, name: &str) -> Option<(DType, Vec<usize>)>;
}

/// Gives the interpreter a constant's elements.
pub trait ConstantValues {
    /// The elements of the tensor called `name` (row-major), or `None`.
    fn values(&self, name: &str) -> Option<&Buffer>;
}

/// Constants held in memory, with their elements or as bare descriptions.
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
    /// The elements, or `None` for a description without data.
    pub data: Option<Buffer>,
}

impl MemoryConstants {
    /// No constants.
    pub fn new() -> MemoryConstants {
        MemoryConstants::default()
    }

    /// Adds (or replaces) a described constant without data.
    pub fn describe_tensor(&mut self, name: &str, dtype: DType, shape: &[usize]) -> &mut Self {
        self.put(name, dtype, shape, None)
    }

    /// Adds (or replaces) a constant with its elements (which give its dtype).
    pub fn insert(&mut self, name: &str, shape: &[usize], data: Buffer) -> &mut Self {
        self.put(name, data.dtype(), shape, Some(data))
    }

    /// Stores one constant.
    fn put(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Option<Buffer>,
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

impl ConstantValues for MemoryConstants {
    fn values(&self, name: &str) -> Option<&Buffer> {
        self.tensors.get(name).and_then(|t| t.data.as_ref())
    }
}
