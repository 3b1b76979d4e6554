//! Strided matrix descriptors over caller slices: [`MatRef`] (read) and [`MatMut`]
//! (write). Constructors check that every addressed element lies in the slice, so the
//! GEMM drivers can hand sub-slices to the SIMD kernels after cheap extent checks.

use core::ops::Range;

use rml_core::{Error, Result};

/// Offset of the last element of a `rows × cols` layout plus one (0 when empty).
fn extent(rows: usize, cols: usize, rs: usize, cs: usize) -> Result<usize> {
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    let r = (rows - 1).checked_mul(rs).ok_or(Error::Overflow)?;
    let c = (cols - 1).checked_mul(cs).ok_or(Error::Overflow)?;
    r.checked_add(c)
        .and_then(|v| v.checked_add(1))
        .ok_or(Error::Overflow)
}

fn check_range(r: &Range<usize>, len: usize) -> Result<()> {
    if r.start > r.end || r.end > len {
        return Err(Error::IndexOutOfRange {
            index: r.end.max(r.start) as i64,
            len,
        });
    }
    Ok(())
}

/// A read-only `rows × cols` matrix: element `(i, j)` is `data[i * rs + j * cs]`.
///
/// Any non-negative strides are allowed (including 0 for broadcasting); a transposed
/// operand is just [`MatRef::t`].
#[derive(Debug)]
pub struct MatRef<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl<T> Clone for MatRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for MatRef<'_, T> {}

impl<'a, T> MatRef<'a, T> {
    /// A view with explicit row and column strides (in elements); an error if an
    /// addressed element lies past the end of `data`.
    pub fn new(data: &'a [T], rows: usize, cols: usize, rs: usize, cs: usize) -> Result<Self> {
        let needed = extent(rows, cols, rs, cs)?;
        if needed > data.len() {
            return Err(Error::BufferTooSmall {
                needed,
                got: data.len(),
            });
        }
        Ok(MatRef {
            data,
            rows,
            cols,
            rs,
            cs,
        })
    }

    /// A dense row-major view (`rs = cols`, `cs = 1`).
    pub fn row_major(data: &'a [T], rows: usize, cols: usize) -> Result<Self> {
        Self::new(data, rows, cols, cols, 1)
    }

    /// A dense column-major view (`rs = 1`, `cs = rows`).
    pub fn col_major(data: &'a [T], rows: usize, cols: usize) -> Result<Self> {
        Self::new(data, rows, cols, 1, rows)
    }

    /// The transpose (swaps rows with columns; no data moves).
    pub fn t(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// The sub-matrix `rows × cols` of this view.
    pub fn sub(self, rows: Range<usize>, cols: Range<usize>) -> Result<Self> {
        check_range(&rows, self.rows)?;
        check_range(&cols, self.cols)?;
        let (nr, nc) = (rows.end - rows.start, cols.end - cols.start);
        let start = if nr == 0 || nc == 0 {
            0
        } else {
            rows.start * self.rs + cols.start * self.cs
        };
        Ok(MatRef {
            data: &self.data[start..],
            rows: nr,
            cols: nc,
            rs: self.rs,
            cs: self.cs,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Step between rows, in elements.
    pub fn row_stride(&self) -> usize {
        self.rs
    }
    /// Step between columns, in elements.
    pub fn col_stride(&self) -> usize {
        self.cs
    }
    /// The underlying slice (element `(0, 0)` first).
    pub fn data(&self) -> &'a [T] {
        self.data
    }
}

impl<T: Copy> MatRef<'_, T> {
    /// Element `(i, j)`, or `None` outside the matrix.
    pub fn get(&self, i: usize, j: usize) -> Option<T> {
        (i < self.rows && j < self.cols).then(|| self.data[i * self.rs + j * self.cs])
    }
}

/// A writable `rows × cols` matrix of `f32`: element `(i, j)` is `data[i * rs + j * cs]`.
///
/// The constructor rejects layouts where two elements share a slot (for example a
/// zero stride), so every output element is written exactly once.
#[derive(Debug)]
pub struct MatMut<'a> {
    pub(crate) data: &'a mut [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl<'a> MatMut<'a> {
    /// A writable view with explicit strides; errors if it does not fit in `data` or
    /// if distinct elements would overlap.
    pub fn new(
        data: &'a mut [f32],
        rows: usize,
        cols: usize,
        rs: usize,
        cs: usize,
    ) -> Result<Self> {
        let needed = extent(rows, cols, rs, cs)?;
        if needed > data.len() {
            return Err(Error::BufferTooSmall {
                needed,
                got: data.len(),
            });
        }
        if rows == 0 || cols == 0 {
            // Empty: nothing is ever written.
        } else if rows > 1 && cols > 1 {
            // Non-overlap: the inner stride is ≥ 1 and the outer one steps over a whole
            // inner run.
            let ((inner, n_inner), outer) = if cs <= rs {
                ((cs, cols), rs)
            } else {
                ((rs, rows), cs)
            };
            if inner == 0 || outer < inner.saturating_mul(n_inner) {
                return Err(Error::InvalidArgument("output matrix strides overlap"));
            }
        } else if (rows > 1 && rs == 0) || (cols > 1 && cs == 0) {
            return Err(Error::InvalidArgument("output matrix strides overlap"));
        }
        Ok(MatMut {
            data,
            rows,
            cols,
            rs,
            cs,
        })
    }

    /// A dense row-major writable view.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Result<Self> {
        Self::new(data, rows, cols, cols, 1)
    }

    /// A shorter-lived writable view of the same matrix.
    pub fn rb(&mut self) -> MatMut<'_> {
        MatMut {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// A read-only view of the same matrix.
    pub fn as_ref(&self) -> MatRef<'_, f32> {
        MatRef {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// The writable sub-matrix `rows × cols`.
    pub fn sub(self, rows: Range<usize>, cols: Range<usize>) -> Result<MatMut<'a>> {
        check_range(&rows, self.rows)?;
        check_range(&cols, self.cols)?;
        let (nr, nc) = (rows.end - rows.start, cols.end - cols.start);
        let start = if nr == 0 || nc == 0 {
            0
        } else {
            rows.start * self.rs + cols.start * self.cs
        };
        Ok(MatMut {
            data: &mut self.data[start..],
            rows: nr,
            cols: nc,
            rs: self.rs,
            cs: self.cs,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
}
