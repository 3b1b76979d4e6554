//! The owned [`Tensor`]: a dtype, a strided layout and shared storage.
//!
//! Storage is a window of a [`Buffer`] — an aligned heap allocation or a read-only
//! memory map of a file — held by `Arc`, so a tensor taken out of a safetensors file
//! is zero-copy and keeps the mapping alive, and every view (`slice`, `transpose`,
//! `permute`, `reshape`, `unsqueeze`) shares its storage with the tensor it came from.
//!
//! [`Tensor::view`] lends an `rml-core` [`TensorView`] over the storage after checking
//! the dtype and the alignment. Files written by third parties can put a tensor at an
//! address that is not a multiple of its element size (safetensors allows it); such a
//! tensor refuses `view` with [`Error::Unaligned`] and [`Tensor::aligned`] makes the
//! one copy, counted by [`alignment_copies`] so that a loader can report it.
//!
//! Block-quantized dtypes (`Q4_0`, `Q4_K`, …) are stored whole: their layout is always
//! contiguous, `reshape` works when the last axis stays a whole number of blocks, and
//! the other layout changes return an error.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

use rml_core::dtype::Element;
use rml_core::view::Layout;
use rml_core::{DType, Shape, TensorView};

use crate::buffer::{Buffer, HeapBytes};
use crate::error::{Error, Result};

static ALIGNMENT_COPIES: AtomicUsize = AtomicUsize::new(0);
static ALIGNMENT_COPY_BYTES: AtomicUsize = AtomicUsize::new(0);

/// How many copies [`Tensor::aligned`] has made in this process (tensors whose storage
/// was not aligned for their dtype), and how many bytes they held.
pub fn alignment_copies() -> (usize, usize) {
    (
        ALIGNMENT_COPIES.load(Ordering::Relaxed),
        ALIGNMENT_COPY_BYTES.load(Ordering::Relaxed),
    )
}

/// An n-dimensional array with an owned (shared) storage.
#[derive(Clone, Debug)]
pub struct Tensor {
    dtype: DType,
    layout: Layout,
    buffer: Buffer,
    /// Byte offset in `buffer` of element offset 0 of `layout`.
    start: usize,
    /// Bytes of the storage window that starts at `start`.
    len: usize,
}

/// Where a tensor's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// An aligned heap allocation.
    Heap,
    /// A read-only memory map of a file.
    Mapped,
}

fn shape_of(dims: &[usize]) -> Result<Shape> {
    Shape::new(dims).map_err(|e| Error::core("tensor shape", e))
}

impl Tensor {
    /// A tensor over `len` bytes of `buffer` starting at byte `start`, holding a dense
    /// row-major array of `dims`. No bytes are copied. The window must lie inside the
    /// buffer and be exactly as long as `dims` × `dtype` needs.
    pub fn from_buffer(
        buffer: Buffer,
        start: usize,
        len: usize,
        dtype: DType,
        dims: &[usize],
    ) -> Result<Tensor> {
        let shape = shape_of(dims)?;
        let needed = storage_bytes(dtype, &shape)?;
        if needed != len {
            return Err(Error::InvalidArgument(format!(
                "{dtype} tensor of shape {dims:?} needs {needed} bytes, window has {len}"
            )));
        }
        let end = start
            .checked_add(len)
            .ok_or_else(|| Error::InvalidArgument("tensor window end overflows".to_string()))?;
        if end > buffer.len() {
            return Err(Error::InvalidArgument(format!(
                "tensor window {start}..{end} is outside a buffer of {} bytes",
                buffer.len()
            )));
        }
        if dtype.is_quantized()
            && !dims
                .last()
                .copied()
                .unwrap_or(0)
                .is_multiple_of(dtype.block_size())
        {
            return Err(Error::InvalidArgument(format!(
                "{dtype}: last axis of {dims:?} is not a whole number of {}-element blocks",
                dtype.block_size()
            )));
        }
        Ok(Tensor {
            dtype,
            layout: Layout::contiguous(shape),
            buffer,
            start,
            len,
        })
    }

    /// A heap tensor holding a copy of `bytes` (little-endian, row-major).
    pub fn from_raw(dtype: DType, dims: &[usize], bytes: &[u8]) -> Result<Tensor> {
        let buffer = Buffer::from_bytes(bytes);
        Tensor::from_buffer(buffer, 0, bytes.len(), dtype, dims)
    }

    /// A heap tensor of zeros.
    pub fn zeros(dtype: DType, dims: &[usize]) -> Result<Tensor> {
        let len = storage_bytes(dtype, &shape_of(dims)?)?;
        Tensor::from_buffer(
            Buffer::from_heap(HeapBytes::zeroed(len)),
            0,
            len,
            dtype,
            dims,
        )
    }

    /// A heap tensor from typed elements in row-major order.
    pub fn from_slice<T: Element>(data: &[T], dims: &[usize]) -> Result<Tensor> {
        Tensor::from_raw(T::DTYPE, dims, bytemuck::cast_slice(data))
    }

    /// A heap tensor from typed elements in row-major order (the vector is copied once
    /// into aligned storage).
    pub fn from_vec<T: Element>(data: Vec<T>, dims: &[usize]) -> Result<Tensor> {
        Tensor::from_slice(&data, dims)
    }

    /// A `BOOL` heap tensor (one byte per element, 0 or 1).
    pub fn from_bools(data: &[bool], dims: &[usize]) -> Result<Tensor> {
        let bytes: Vec<u8> = data.iter().map(|&b| u8::from(b)).collect();
        Tensor::from_raw(DType::Bool, dims, &bytes)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.layout.shape
    }

    /// The axis sizes.
    pub fn dims(&self) -> &[usize] {
        self.layout.shape.dims()
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.layout.shape.rank()
    }

    /// Element strides, one per axis (in elements, not bytes).
    pub fn strides(&self) -> &[usize] {
        self.layout.strides.steps()
    }

    /// The layout (shape, strides and element offset into the storage window).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.shape.numel()
    }

    /// Bytes the viewed elements occupy when dense.
    pub fn nbytes(&self) -> usize {
        self.dtype.storage_bytes(self.numel()).unwrap_or(usize::MAX)
    }

    /// True when the elements are dense and row-major in storage.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// Where the bytes live.
    pub fn storage_kind(&self) -> StorageKind {
        if self.buffer.is_mapped() {
            StorageKind::Mapped
        } else {
            StorageKind::Heap
        }
    }

    /// The shared buffer that holds the storage.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// True when both tensors read the same buffer (one is a view of the other, or
    /// both come from the same file).
    pub fn shares_storage_with(&self, other: &Tensor) -> bool {
        self.buffer.same_as(&other.buffer)
    }

    /// The storage window (all bytes this tensor may address, whatever its layout).
    pub fn storage_bytes(&self) -> &[u8] {
        &self.buffer.as_bytes()[self.start..self.start + self.len]
    }

    /// True when the storage is aligned for the dtype's element type.
    pub fn is_aligned(&self) -> bool {
        self.misalignment() == 0
    }

    fn elem_align(&self) -> usize {
        if self.dtype.is_quantized() {
            1
        } else {
            self.dtype.type_size()
        }
    }

    fn misalignment(&self) -> usize {
        self.storage_bytes().as_ptr() as usize % self.elem_align()
    }

    /// The bytes of the viewed elements, for a contiguous tensor.
    pub fn contiguous_bytes(&self) -> Result<&[u8]> {
        if !self.is_contiguous() {
            return Err(Error::core(
                "Tensor::contiguous_bytes",
                rml_core::Error::NotContiguous,
            ));
        }
        let size = self.dtype.type_size();
        let begin = self.layout.offset * size;
        Ok(&self.storage_bytes()[begin..begin + self.nbytes()])
    }

    /// The viewed elements' bytes in row-major order (a copy; works for any layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        if let Ok(bytes) = self.contiguous_bytes() {
            return bytes.to_vec();
        }
        let size = self.dtype.type_size();
        let storage = self.storage_bytes();
        let mut out = Vec::with_capacity(self.nbytes());
        for offset in self.layout.offsets() {
            out.extend_from_slice(&storage[offset * size..(offset + 1) * size]);
        }
        out
    }

    /// This tensor if it is contiguous, else a dense heap copy.
    pub fn contiguous(&self) -> Tensor {
        if self.is_contiguous() {
            return self.clone();
        }
        let bytes = self.to_bytes();
        let len = bytes.len();
        Tensor {
            dtype: self.dtype,
            layout: Layout::contiguous(self.layout.shape),
            buffer: Buffer::from_bytes(&bytes),
            start: 0,
            len,
        }
    }

    /// This tensor if its storage is aligned for its dtype; otherwise a heap copy of
    /// its storage window, counted by [`alignment_copies`].
    pub fn aligned(&self) -> Tensor {
        if self.is_aligned() {
            return self.clone();
        }
        ALIGNMENT_COPIES.fetch_add(1, Ordering::Relaxed);
        ALIGNMENT_COPY_BYTES.fetch_add(self.len, Ordering::Relaxed);
        Tensor {
            buffer: Buffer::from_bytes(self.storage_bytes()),
            start: 0,
            ..self.clone()
        }
    }

    /// Borrows the tensor as an `rml-core` view of `T`, without copying. Fails with
    /// [`Error::DTypeMismatch`] when `T` is not the dtype and with [`Error::Unaligned`]
    /// when the storage is not aligned for `T` (see [`Tensor::aligned`]).
    pub fn view<T: Element>(&self) -> Result<TensorView<'_, T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                expected: T::DTYPE,
                got: self.dtype,
            });
        }
        let misalignment = self.misalignment();
        if misalignment != 0 {
            return Err(Error::Unaligned {
                align: self.elem_align(),
                misalignment,
            });
        }
        let data: &[T] = bytemuck::try_cast_slice(self.storage_bytes()).map_err(|_| {
            Error::core(
                "Tensor::view",
                rml_core::Error::Misaligned {
                    align: self.elem_align(),
                },
            )
        })?;
        TensorView::with_layout(data, self.layout).map_err(|e| Error::core("Tensor::view", e))
    }

    /// Mutable access to the elements of a dense heap tensor that shares its storage
    /// with no other tensor.
    pub fn data_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                expected: T::DTYPE,
                got: self.dtype,
            });
        }
        if !self.is_contiguous() || self.layout.offset != 0 || self.len != self.nbytes() {
            return Err(Error::InvalidArgument(
                "data_mut needs a dense tensor that covers its whole storage".to_string(),
            ));
        }
        let (start, len) = (self.start, self.len);
        let bytes = self.buffer.unique_heap_mut().ok_or_else(|| {
            Error::InvalidArgument(
                "data_mut needs heap storage that no other tensor shares".to_string(),
            )
        })?;
        bytemuck::try_cast_slice_mut(&mut bytes[start..start + len]).map_err(|_| {
            Error::core(
                "Tensor::data_mut",
                rml_core::Error::Misaligned {
                    align: align_of::<T>(),
                },
            )
        })
    }

    /// The elements in row-major order as `T` (a copy; works for any layout and for
    /// unaligned storage).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(Error::DTypeMismatch {
                expected: T::DTYPE,
                got: self.dtype,
            });
        }
        let size = size_of::<T>();
        let storage = self.storage_bytes();
        Ok(self
            .layout
            .offsets()
            .map(|o| bytemuck::pod_read_unaligned(&storage[o * size..(o + 1) * size]))
            .collect())
    }

    /// The elements in row-major order converted to `f64` (any scalar dtype; `BOOL`
    /// gives 0 or 1; `I64` beyond 2^53 rounds). Block-quantized dtypes are an error.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        if self.dtype.is_quantized() {
            return Err(Error::core(
                "Tensor::to_f64_vec",
                rml_core::Error::UnsupportedDType(self.dtype),
            ));
        }
        let size = self.dtype.type_size();
        let storage = self.storage_bytes();
        Ok(self
            .layout
            .offsets()
            .map(|o| scalar_to_f64(self.dtype, &storage[o * size..(o + 1) * size]))
            .collect())
    }

    fn relayout(&self, op: &str, layout: rml_core::Result<Layout>) -> Result<Tensor> {
        if self.dtype.is_quantized() {
            return Err(Error::core(
                format!("Tensor::{op}"),
                rml_core::Error::UnsupportedDType(self.dtype),
            ));
        }
        Ok(Tensor {
            layout: layout.map_err(|e| Error::core(format!("Tensor::{op}"), e))?,
            ..self.clone()
        })
    }

    /// Restricts `axis` to `start..end` (stepping by `step`), sharing storage.
    pub fn slice(&self, axis: isize, start: usize, end: usize, step: usize) -> Result<Tensor> {
        self.relayout("slice", self.layout.slice(axis, start, end, step))
    }

    /// Swaps two axes, sharing storage.
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        self.relayout("transpose", self.layout.transpose(a, b))
    }

    /// Reorders axes (axis `i` of the result is axis `order[i]`), sharing storage.
    pub fn permute(&self, order: &[usize]) -> Result<Tensor> {
        self.relayout("permute", self.layout.permute(order))
    }

    /// Inserts a size-1 axis, sharing storage.
    pub fn unsqueeze(&self, axis: usize) -> Result<Tensor> {
        self.relayout("unsqueeze", self.layout.unsqueeze(axis))
    }

    /// A new shape over the same elements. Shares storage when the tensor is
    /// contiguous; copies (see [`Tensor::contiguous`]) otherwise.
    pub fn reshape(&self, dims: &[usize]) -> Result<Tensor> {
        let source = self.contiguous();
        let layout = source
            .layout
            .reshape(dims)
            .map_err(|e| Error::core("Tensor::reshape", e))?;
        let block = self.dtype.block_size();
        if block > 1 && !dims.last().copied().unwrap_or(0).is_multiple_of(block) {
            return Err(Error::core(
                "Tensor::reshape",
                rml_core::Error::InvalidArgument("last axis must be a whole number of blocks"),
            ));
        }
        Ok(Tensor { layout, ..source })
    }
}

/// Bytes a dense tensor of `dtype` and `shape` needs, with overflow checks.
pub(crate) fn storage_bytes(dtype: DType, shape: &Shape) -> Result<usize> {
    let n = shape
        .numel_checked()
        .map_err(|e| Error::core("tensor size", e))?;
    dtype
        .storage_bytes(n)
        .map_err(|e| Error::core("tensor size", e))
}

/// One little-endian scalar of `dtype` as `f64`.
fn scalar_to_f64(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::F64 => f64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        DType::F32 => f64::from(f32::from_le_bytes(b.try_into().unwrap_or([0; 4]))),
        DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::I64 => i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f64,
        DType::I32 => f64::from(i32::from_le_bytes(b.try_into().unwrap_or([0; 4]))),
        DType::I16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
        DType::I8 => f64::from(b[0] as i8),
        DType::U8 | DType::Bool => f64::from(b[0]),
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arange(n: usize, dims: &[usize]) -> Tensor {
        Tensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<_>>(), dims).unwrap()
    }

    #[test]
    fn views_share_storage_and_see_the_right_elements() {
        let t = arange(6, &[2, 3]);
        let tt = t.transpose(0, 1).unwrap();
        assert!(tt.shares_storage_with(&t));
        assert_eq!(tt.dims(), &[3, 2]);
        assert_eq!(tt.to_vec::<f32>().unwrap(), vec![0., 3., 1., 4., 2., 5.]);
        let s = t.slice(1, 1, 3, 1).unwrap();
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![1., 2., 4., 5.]);
        assert!(!s.is_contiguous());
        let r = t.reshape(&[3, 2]).unwrap();
        assert!(r.shares_storage_with(&t));
        let r2 = tt.reshape(&[6]).unwrap();
        assert!(!r2.shares_storage_with(&t));
        assert_eq!(r2.to_vec::<f32>().unwrap(), vec![0., 3., 1., 4., 2., 5.]);
        let v = tt.view::<f32>().unwrap();
        assert_eq!(v.get(&[2, 1]).unwrap(), 5.0);
        assert_eq!(t.unsqueeze(0).unwrap().dims(), &[1, 2, 3]);
        assert_eq!(t.permute(&[1, 0]).unwrap().dims(), &[3, 2]);
    }

    #[test]
    fn view_checks_dtype_and_alignment() {
        let t = arange(4, &[4]);
        assert!(matches!(
            t.view::<i32>(),
            Err(Error::DTypeMismatch {
                expected: DType::I32,
                got: DType::F32
            })
        ));
        // An F32 tensor one byte into a buffer is unaligned.
        let mut bytes = vec![0u8; 17];
        bytes[1..].copy_from_slice(bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]));
        let buf = Buffer::from_bytes(&bytes);
        let u = Tensor::from_buffer(buf, 1, 16, DType::F32, &[4]).unwrap();
        assert!(!u.is_aligned());
        assert!(matches!(
            u.view::<f32>(),
            Err(Error::Unaligned {
                align: 4,
                misalignment: 1
            })
        ));
        assert_eq!(u.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        let before = alignment_copies().0;
        let a = u.aligned();
        assert!(alignment_copies().0 > before);
        assert_eq!(
            a.view::<f32>().unwrap().as_slice().unwrap(),
            &[1.0, 2.0, 3.0, 4.0]
        );
        assert!(t.aligned().shares_storage_with(&t));
    }

    #[test]
    fn constructors_check_sizes() {
        assert!(Tensor::from_raw(DType::F32, &[2, 3], &[0u8; 20]).is_err());
        assert!(Tensor::from_buffer(Buffer::from_bytes(&[0; 8]), 4, 8, DType::U8, &[8]).is_err());
        assert!(Tensor::zeros(DType::F32, &[usize::MAX, 2]).is_err());
        let q = Tensor::zeros(DType::Q4_0, &[2, 64]).unwrap();
        assert_eq!(q.nbytes(), 2 * 2 * 18);
        assert!(q.transpose(0, 1).is_err());
        assert!(q.reshape(&[1, 128]).is_ok());
        assert!(q.reshape(&[128, 1]).is_err());
        assert!(Tensor::zeros(DType::Q4_0, &[2, 3]).is_err());
    }

    #[test]
    fn data_mut_needs_unique_heap_storage() {
        let mut t = arange(3, &[3]);
        t.data_mut::<f32>().unwrap()[1] = 9.0;
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0, 9.0, 2.0]);
        let view = t.clone();
        assert!(t.data_mut::<f32>().is_err());
        drop(view);
        assert!(t.data_mut::<f32>().is_ok());
    }

    #[test]
    fn scalars_convert_to_f64() {
        let b = Tensor::from_bools(&[true, false], &[2]).unwrap();
        assert_eq!(b.to_f64_vec().unwrap(), vec![1.0, 0.0]);
        let h = Tensor::from_vec(vec![half::bf16::from_f32(1.5)], &[]).unwrap();
        assert_eq!(h.to_f64_vec().unwrap(), vec![1.5]);
        let i = Tensor::from_vec(vec![-3i8, 4], &[2]).unwrap();
        assert_eq!(i.to_f64_vec().unwrap(), vec![-3.0, 4.0]);
    }
}
