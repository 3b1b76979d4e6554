//! Tensors at the boundary: the dtypes C can pass ([`RmlDtype`]), the description of
//! an input buffer the caller owns ([`RmlTensor`]), the description the library
//! fills in ([`RmlTensorInfo`]), and the checked conversions between those and the
//! graph stack's [`DenseTensor`].
//!
//! Data is row-major, native-endian and needs no alignment (it is copied in and
//! out); `BOOL` is one byte per element, any non-zero byte meaning true.

use std::ffi::{CStr, c_char, c_void};

use rml_core::{DType, Shape};
use rml_host::graph::{Buffer, DenseTensor, Dim};

use crate::args;
use crate::status::{Outcome, RmlStatus, fail};

/// The largest rank a tensor may have.
pub const RML_MAX_RANK: usize = 8;
const _: () = assert!(RML_MAX_RANK == rml_core::MAX_RANK);

/// Element types of graph inputs and outputs.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmlDtype {
    /// 32-bit IEEE float.
    F32 = 0,
    /// 64-bit signed integer.
    I64 = 1,
    /// One byte per element: 0 is false, anything else true (outputs are 0 or 1).
    Bool = 2,
}

impl RmlDtype {
    /// The dtype with this code.
    fn from_code(code: u32, what: &str) -> Outcome<RmlDtype> {
        [RmlDtype::F32, RmlDtype::I64, RmlDtype::Bool]
            .into_iter()
            .find(|d| *d as u32 == code)
            .ok_or_else(|| {
                fail(
                    RmlStatus::Dtype,
                    format!("{what}: unknown dtype code {code} (F32 = 0, I64 = 1, BOOL = 2)"),
                )
            })
    }

    /// The C dtype of a graph value's dtype, if it has one.
    pub(crate) fn of(dtype: DType) -> Option<RmlDtype> {
        match dtype {
            DType::F32 => Some(RmlDtype::F32),
            DType::I64 => Some(RmlDtype::I64),
            DType::Bool => Some(RmlDtype::Bool),
            _ => None,
        }
    }

    /// Bytes per element.
    fn size(self) -> usize {
        match self {
            RmlDtype::F32 => 4,
            RmlDtype::I64 => 8,
            RmlDtype::Bool => 1,
        }
    }
}

/// A caller-owned tensor passed as a graph input. The library reads it during the
/// call only and copies what it needs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RmlTensor {
    /// The graph input's name (NUL-terminated UTF-8).
    pub name: *const c_char,
    /// An [`RmlDtype`] value; it must be the input's declared dtype.
    pub dtype: u32,
    /// Number of dims (0 for a scalar, at most `RML_MAX_RANK`).
    pub rank: usize,
    /// `rank` dims, each `>= 0` (may be null when `rank` is 0).
    pub dims: *const i64,
    /// The elements, row-major, native-endian, no alignment needed (may be null when
    /// `byte_len` is 0).
    pub data: *const c_void,
    /// Size of `data` in bytes: the product of `dims` times the dtype's size.
    pub byte_len: usize,
}

/// A tensor's description, filled in by the library.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RmlTensorInfo {
    /// The value's name, owned by the graph handle: valid until `rml_graph_free`.
    pub name: *const c_char,
    /// The element type.
    pub dtype: RmlDtype,
    /// Number of dims used in `dims`.
    pub rank: usize,
    /// The dims; `-1` for a declared dim that is symbolic (bound per run), `0` past
    /// `rank`.
    pub dims: [i64; RML_MAX_RANK],
    /// Bytes the data takes (0 when a dim is symbolic).
    pub byte_len: usize,
}

impl RmlTensorInfo {
    /// The description of `name` with these dims (`None` = symbolic).
    pub(crate) fn new(name: &CStr, dtype: RmlDtype, dims: &[Option<usize>]) -> RmlTensorInfo {
        let mut out = [0i64; RML_MAX_RANK];
        for (o, d) in out.iter_mut().zip(dims) {
            *o = d.map_or(-1, |d| i64::try_from(d).unwrap_or(i64::MAX));
        }
        let known: Option<usize> = dims.iter().try_fold(1usize, |n, d| n.checked_mul((*d)?));
        RmlTensorInfo {
            name: name.as_ptr(),
            dtype,
            rank: dims.len(),
            dims: out,
            byte_len: known.map_or(0, |n| n.saturating_mul(dtype.size())),
        }
    }

    /// The declared type of a graph value.
    pub(crate) fn declared(name: &CStr, dtype: DType, shape: &[Dim]) -> Outcome<RmlTensorInfo> {
        let dims: Vec<Option<usize>> = shape.iter().map(Dim::fixed).collect();
        Ok(RmlTensorInfo::new(name, c_dtype(dtype, name)?, &dims))
    }

    /// The description of a computed tensor.
    pub(crate) fn computed(name: &CStr, t: &DenseTensor) -> Outcome<RmlTensorInfo> {
        let dims: Vec<Option<usize>> = t.shape.dims().iter().map(|&d| Some(d)).collect();
        Ok(RmlTensorInfo::new(
            name,
            c_dtype(t.data.dtype(), name)?,
            &dims,
        ))
    }
}

/// The C dtype of `dtype`, or an error naming the value.
fn c_dtype(dtype: DType, name: &CStr) -> Outcome<RmlDtype> {
    RmlDtype::of(dtype).ok_or_else(|| {
        fail(
            RmlStatus::Dtype,
            format!("value {name:?} has dtype {dtype}, which the C API does not carry"),
        )
    })
}

/// Reads a caller tensor: its name and its data as a [`DenseTensor`].
///
/// # Safety
/// `t`'s pointers satisfy the promises documented on [`RmlTensor`].
pub(crate) unsafe fn read<'a>(t: &RmlTensor, what: &str) -> Outcome<(&'a str, DenseTensor)> {
    // SAFETY: the caller's promise on `name`.
    let name = unsafe { args::string(t.name, &format!("{what}.name"))? };
    let what = format!("{what} ({name:?})");
    let dtype = RmlDtype::from_code(t.dtype, &what)?;
    if t.rank > RML_MAX_RANK {
        return Err(fail(
            RmlStatus::Shape,
            format!(
                "{what}: rank {} is above the maximum {RML_MAX_RANK}",
                t.rank
            ),
        ));
    }
    // SAFETY: the caller's promise on `dims`.
    let dims = unsafe { args::slice(t.dims, t.rank, &format!("{what}.dims"))? };
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            fail(
                RmlStatus::Shape,
                format!("{what}: negative dim in {dims:?}"),
            )
        })?;
    let shape = Shape::new(&dims).map_err(|e| fail(RmlStatus::Shape, format!("{what}: {e}")))?;
    let need = dims
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| fail(RmlStatus::Shape, format!("{what}: dims {dims:?} overflow")))?;
    if need != t.byte_len {
        return Err(fail(
            RmlStatus::Shape,
            format!(
                "{what}: dims {dims:?} of {dtype:?} need {need} bytes, byte_len is {}",
                t.byte_len
            ),
        ));
    }
    // SAFETY: the caller's promise on `data` (`byte_len` readable bytes).
    let bytes = unsafe { args::slice(t.data.cast::<u8>(), t.byte_len, &format!("{what}.data"))? };
    let data = match dtype {
        RmlDtype::F32 => Buffer::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        ),
        RmlDtype::I64 => Buffer::I64(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        RmlDtype::Bool => Buffer::Bool(bytes.iter().map(|&b| u8::from(b != 0)).collect()),
    };
    Ok((name, DenseTensor { shape, data }))
}

/// Copies `data`'s elements, row-major and native-endian, to the start of `out`
/// (which holds at least as many bytes as they take).
pub(crate) fn write_bytes(data: &Buffer, out: &mut [u8]) {
    match data {
        Buffer::F32(v) => {
            for (o, x) in out.chunks_exact_mut(4).zip(v) {
                o.copy_from_slice(&x.to_ne_bytes());
            }
        }
        Buffer::I64(v) => {
            for (o, x) in out.chunks_exact_mut(8).zip(v) {
                o.copy_from_slice(&x.to_ne_bytes());
            }
        }
        Buffer::Bool(v) => out[..v.len()].copy_from_slice(v),
    }
}
