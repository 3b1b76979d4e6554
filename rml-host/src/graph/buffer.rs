//! [`Buffer`] and [`DenseTensor`]: the plain owned data the reference interpreter
//! reads and writes — f32 for float values, i64 for integer indices, one byte per
//! `BOOL` (0 or 1, as rml-core's comparisons write it).

use rml_core::{DType, Shape};

/// The elements of one value, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Buffer {
    /// `F32` elements.
    F32(Vec<f32>),
    /// `I64` elements.
    I64(Vec<i64>),
    /// `BOOL` elements, 0 or 1.
    Bool(Vec<u8>),
}

impl Buffer {
    /// The dtype these elements have.
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::F32(_) => DType::F32,
            Buffer::I64(_) => DType::I64,
            Buffer::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Buffer::F32(v) => v.len(),
            Buffer::I64(v) => v.len(),
            Buffer::Bool(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A zero-filled buffer of `len` elements of `dtype`, or `None` for a dtype the
    /// interpreter does not hold.
    pub fn zeros(dtype: DType, len: usize) -> Option<Buffer> {
        Some(match dtype {
            DType::F32 => Buffer::F32(vec![0.0; len]),
            DType::I64 => Buffer::I64(vec![0; len]),
            DType::Bool => Buffer::Bool(vec![0; len]),
            _ => return None,
        })
    }
}

/// An owned dense tensor: a shape and its row-major elements.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseTensor {
    /// The shape.
    pub shape: Shape,
    /// The elements.
    pub data: Buffer,
}

/// Rust element types a [`Buffer`] holds, for code generic over them.
pub trait BufferElement: Copy + Default + PartialOrd + 'static {
    /// The elements as this type, if the buffer holds it.
    fn slice(buffer: &Buffer) -> Option<&[Self]>;
    /// A buffer of these elements.
    fn wrap(data: Vec<Self>) -> Buffer;
    /// A float attribute (a pad value) as this type: truncated for `I64`, `!= 0`
    /// for `BOOL`.
    fn from_f32(x: f32) -> Self;
}

impl BufferElement for f32 {
    fn slice(buffer: &Buffer) -> Option<&[f32]> {
        match buffer {
            Buffer::F32(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(data: Vec<f32>) -> Buffer {
        Buffer::F32(data)
    }
    fn from_f32(x: f32) -> f32 {
        x
    }
}

impl BufferElement for i64 {
    fn slice(buffer: &Buffer) -> Option<&[i64]> {
        match buffer {
            Buffer::I64(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(data: Vec<i64>) -> Buffer {
        Buffer::I64(data)
    }
    fn from_f32(x: f32) -> i64 {
        x as i64
    }
}

impl BufferElement for u8 {
    fn slice(buffer: &Buffer) -> Option<&[u8]> {
        match buffer {
            Buffer::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(data: Vec<u8>) -> Buffer {
        Buffer::Bool(data)
    }
    fn from_f32(x: f32) -> u8 {
        u8::from(x != 0.0)
    }
}
