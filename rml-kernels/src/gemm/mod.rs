//! Packed SIMD GEMM, `C ← alpha·op(A)·op(B) + beta·C` in f32, with fused epilogues,
//! pre-packed and f16/bf16 weights, row/column range entry points, and the GEMV /
//! small-M paths for decode.
//!
//! Design (details and measurements in `docs/kernels.md`):
//! * Goto/BLIS loop nest: `NC` columns of B → `KC` rows of K (B block packed once,
//!   L3-resident) → `MC` rows of A (A block packed, L2-resident) → `NR`-wide B
//!   micro-panel (L1-resident) → `MR`-high micro-tile in registers.
//! * One packed layout (`MR = 6`, `NR = 16`) for every ISA, so weights pre-packed
//!   once ([`pack_b`]) work whichever kernel runs: AVX2+FMA keeps the 6×16 tile in
//!   12 ymm accumulators, NEON in 24 q registers, the scalar path in an array.
//! * Small M (≤ [`SMALL_M`]) skips packing A (and B when it is row-contiguous f32,
//!   unless two row tiles would walk B rows a multiple of 4 KiB apart: that B is
//!   packed 256 columns at a time): the same micro-kernels read the caller's
//!   strides, and rows are split into balanced tiles (8 = 4 + 4, not 6 + 2; one
//!   tile of eight for AVX-512's tile pairs). A row-major A of up to 256 KiB with
//!   `k ≤ KC`, and a row-contiguous f32 B of up to 16 KiB, are read in place at any
//!   M too (see docs/kernels.md for the measurements).
//! * Operands are [`MatRef`]/[`MatMut`] over caller slices with any strides;
//!   `op(A)` is expressed by passing `a.t()`.
//!
//! Nothing here allocates: scratch comes from the caller
//! ([`gemm_scratch_len`]), and every call checks every length before touching data.

mod driver;
mod epilogue;
mod gemv;
mod mat;
mod pack;
mod tile;

#[cfg(target_arch = "aarch64")]
mod aarch64_neon;
#[cfg(target_arch = "x86_64")]
mod x86_avx2;
#[cfg(target_arch = "x86_64")]
mod x86_avx512;

#[cfg(all(test, feature = "std"))]
mod tests;

use core::ops::Range;

use rml_core::{DType, Error, Result};

use crate::isa::{self, Isa};

pub use epilogue::{Activation, Epilogue};
pub use gemv::{gemv_kn, gemv_nk};
pub use mat::{MatMut, MatRef};

/// Rows of the register tile (micro-kernel height).
pub const MR: usize = 6;
/// Columns of the register tile (micro-kernel width) and of a packed B panel.
pub const NR: usize = 16;
/// K block: a packed `KC × NR` B micro-panel is 16 KiB, half of a 32 KiB L1d.
pub const KC: usize = 256;
/// M block: a packed `MC × KC` A block is 144 KiB, well inside a 512 KiB L2.
pub const MC: usize = 144;
/// N block: a packed `KC × NC` B block is 3 MiB, a slice of the 32 MiB L3.
pub const NC: usize = 3072;
/// Largest M served without packing A (and, for row-contiguous f32 B, without
/// packing B): the small-M / decode path.
pub const SMALL_M: usize = 8;

/// Above this many bytes of B, a small-M product neither walks 16-column strips of
/// a row-contiguous B down all of K (past the L3 share a strip walk defeats the
/// hardware prefetcher) nor packs it in narrow column blocks (whose rows of 512
/// bytes do too): up to [`GEMV_KN_MAX_M`] rows of a row-contiguous A stream B rows
/// ([`gemv_kn`]), more pack B in whole `NC`-wide blocks. Zen 3, 4096 × 4096
/// row-major f32 B, GFLOP/s in runs minutes apart: 2 rows 14.5–16.5 streamed
/// against 5.8 packed, 4 rows 13.6–15.4 against 9.8 (26 and 35 since, with four B
/// rows at a time). The AVX2 kernels stream more (`Kernel::streams_b_rows`).
pub(crate) const STREAMED_B_MIN_BYTES: usize = 16 << 20;

/// Most rows of A for which a product with a B over [`STREAMED_B_MIN_BYTES`] streams
/// B rows on every ISA. Zen 3: 8 rows 17.2 streamed in one pass against 19.1–25.5
/// packed in `NC`-wide blocks; the Zen 4 of session 38, on 32 registers: 34–41
/// against 44–47. Streaming loads and stores every y row's vector per four or
/// eight B rows, which more rows than four in one pass make the bottleneck (five
/// to eight now run as two passes, measured on AVX2 only).
pub(crate) const GEMV_KN_MAX_M: usize = 4;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// An element type allowed for the B (weight) operand: `f32`, `f16` or `bf16`.
/// Accumulation is always f32; f16/bf16 are converted while packing.
pub trait Weight: bytemuck::Pod + sealed::Sealed {
    /// The dtype tag.
    const DTYPE: DType;
    /// Converts one value to f32 (exact for all three types).
    fn to_f32(self) -> f32;
    /// Converts a contiguous run (`src.len() == dst.len()`), vectorized where the ISA
    /// allows.
    fn convert(isa: Isa, src: &[Self], dst: &mut [f32]);
    /// The slice itself when `Self` is f32 (lets the small-M path read B in place).
    fn as_f32(src: &[Self]) -> Option<&[f32]>;
}

impl Weight for f32 {
    const DTYPE: DType = DType::F32;
    fn to_f32(self) -> f32 {
        self
    }
    fn convert(_: Isa, src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn as_f32(src: &[f32]) -> Option<&[f32]> {
        Some(src)
    }
}

impl Weight for half::f16 {
    const DTYPE: DType = DType::F16;
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    fn convert(isa: Isa, src: &[half::f16], dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = x86_avx2::Avx2::new(isa) {
            return k.f16_to_f32(src, dst);
        }
        let _ = isa;
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    fn as_f32(_: &[half::f16]) -> Option<&[f32]> {
        None
    }
}

impl Weight for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f32(self) -> f32 {
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    fn convert(_: Isa, src: &[half::bf16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits((s.to_bits() as u32) << 16);
        }
    }
    fn as_f32(_: &[half::bf16]) -> Option<&[f32]> {
        None
    }
}

/// B packed once into the micro-kernel layout: `ceil(n / NR)` panels of `k × NR`
/// f32 values (columns past `n` are zero). Build the data with [`pack_b`].
#[derive(Clone, Copy, Debug)]
pub struct PackedB<'a> {
    data: &'a [f32],
    k: usize,
    n: usize,
}

impl<'a> PackedB<'a> {
    /// Wraps data written by [`pack_b`] for a `k × n` B; checks its length.
    pub fn new(data: &'a [f32], k: usize, n: usize) -> Result<Self> {
        check_len(packed_b_len(k, n)?, data.len())?;
        Ok(PackedB { data, k, n })
    }

    /// Rows of B (the K dimension).
    pub fn k(&self) -> usize {
        self.k
    }
    /// Columns of B (the N dimension).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Columns `cols` of this B; `cols.start` must be a multiple of [`NR`].
    pub fn sub_cols(&self, cols: Range<usize>) -> Result<PackedB<'a>> {
        if cols.start > cols.end || cols.end > self.n {
            return Err(Error::IndexOutOfRange {
                index: cols.end.max(cols.start) as i64,
                len: self.n,
            });
        }
        if !cols.start.is_multiple_of(NR) {
            return Err(Error::InvalidArgument(
                "pre-packed B column ranges must start at a multiple of NR",
            ));
        }
        let start = (cols.start / NR) * NR * self.k;
        Ok(PackedB {
            data: &self.data[start.min(self.data.len())..],
            k: self.k,
            n: cols.end - cols.start,
        })
    }
}

/// A packed once into the micro-kernel layout: `ceil(m / MR)` panels of `MR × k`
/// f32 values (rows past `m` are zero), so a constant left operand (a
/// convolution's weights) is not packed again on every call. Build the data with
/// [`pack_a`].
#[derive(Clone, Copy, Debug)]
pub struct PackedA<'a> {
    data: &'a [f32],
    m: usize,
    k: usize,
}

impl<'a> PackedA<'a> {
    /// Wraps data produced by [`pack_a`] for an `m × k` A.
    pub fn new(data: &'a [f32], m: usize, k: usize) -> Result<Self> {
        check_len(packed_a_full_len(m, k)?, data.len())?;
        Ok(PackedA { data, m, k })
    }

    /// Rows.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Inner size.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Rows `rows` of A, which must start at a panel edge (a multiple of [`MR`]).
    pub fn sub_rows(&self, rows: Range<usize>) -> Result<PackedA<'a>> {
        if !rows.start.is_multiple_of(MR) || rows.start > rows.end || rows.end > self.m {
            return Err(Error::InvalidArgument(
                "packed A rows must start at a multiple of MR and lie inside A",
            ));
        }
        Ok(PackedA {
            data: &self.data[rows.start * self.k..],
            m: rows.end - rows.start,
            k: self.k,
        })
    }
}

/// Length in f32 of a pre-packed `m × k` A.
pub fn packed_a_full_len(m: usize, k: usize) -> Result<usize> {
    panels_len(m, MR, k)
}

/// Length in f32 of `ceil(count / width)` panels of `width × k` values.
fn panels_len(count: usize, width: usize, k: usize) -> Result<usize> {
    count
        .div_ceil(width)
        .checked_mul(width)
        .and_then(|v| v.checked_mul(k))
        .ok_or(Error::Overflow)
}

/// Packs an `m × k` f32 A (any strides) into `out`, which must hold
/// [`packed_a_full_len`] values; wrap the result with [`PackedA::new`].
pub fn pack_a(a: MatRef<'_, f32>, out: &mut [f32]) -> Result<()> {
    let needed = packed_a_full_len(a.rows, a.cols)?;
    check_len(needed, out.len())?;
    pack::pack_a(&a, 0, a.rows, 0, a.cols, &mut out[..needed]);
    Ok(())
}

/// Length in f32 of a pre-packed `k × n` B.
pub fn packed_b_len(k: usize, n: usize) -> Result<usize> {
    panels_len(n, NR, k)
}

/// Packs a `k × n` B (f32, f16 or bf16, any strides) into `out`, which must hold
/// [`packed_b_len`] values; wrap the result with [`PackedB::new`].
pub fn pack_b<T: Weight>(b: MatRef<'_, T>, out: &mut [f32]) -> Result<()> {
    let needed = packed_b_len(b.rows, b.cols)?;
    check_len(needed, out.len())?;
    let isa = isa::active();
    let k = b.rows;
    if k == 0 {
        return Ok(());
    }
    for (t, j0) in (0..b.cols).step_by(NR).enumerate() {
        let nr = NR.min(b.cols - j0);
        pack::pack_b_panel(
            isa,
            &b,
            0,
            k,
            j0,
            nr,
            &mut out[t * k * NR..(t + 1) * k * NR],
        );
    }
    Ok(())
}

/// Scratch (in f32) that [`gemm`] / [`gemm_ex`] / [`gemm_range`] need for an
/// `m × k` by `k × n` product: one packed A block and one packed B block.
pub fn gemm_scratch_len(m: usize, n: usize, k: usize) -> usize {
    gemm_packed_scratch_len(m, k) + n.min(NC).div_ceil(NR) * NR * k.min(KC)
}

/// Scratch (in f32) that [`gemm_packed`] needs: one packed A block (plus slack to
/// align it to 64 bytes).
pub fn gemm_packed_scratch_len(m: usize, k: usize) -> usize {
    if m == 0 || k == 0 {
        return 0;
    }
    packed_a_len(m, k) + ALIGN_F32
}

/// Packing alignment of the scratch blocks, in f32 (64 bytes, one cache line).
pub(crate) const ALIGN_F32: usize = 16;

/// Length of one packed A block, rounded up so the B block after it stays aligned.
pub(crate) fn packed_a_len(m: usize, k: usize) -> usize {
    (m.min(MC).div_ceil(MR) * MR * k.min(KC)).next_multiple_of(ALIGN_F32)
}

fn check_shapes(a: (usize, usize), b: (usize, usize), c: (usize, usize)) -> Result<()> {
    if a.0 != c.0 || a.1 != b.0 || b.1 != c.1 {
        return Err(Error::ShapeMismatch { op: "gemm" });
    }
    Ok(())
}

/// `Err(BufferTooSmall)` unless a buffer of `got` values holds the `needed` ones.
fn check_len(needed: usize, got: usize) -> Result<()> {
    if got < needed {
        return Err(Error::BufferTooSmall { needed, got });
    }
    Ok(())
}

/// `C ← alpha·A·B + beta·C` in f32 (`A` is `m × k`, `B` is `k × n`, `C` is `m × n`;
/// pass `a.t()` / `b.t()` for transposed operands). With `beta == 0`, C is not read.
/// `scratch` must hold [`gemm_scratch_len`]`(m, n, k)` values.
pub fn gemm(
    alpha: f32,
    a: MatRef<'_, f32>,
    b: MatRef<'_, f32>,
    beta: f32,
    c: MatMut<'_>,
    scratch: &mut [f32],
) -> Result<()> {
    gemm_ex(alpha, a, b, beta, c, &Epilogue::default(), scratch)
}

/// [`gemm`] with f32/f16/bf16 B and a fused [`Epilogue`].
pub fn gemm_ex<T: Weight>(
    alpha: f32,
    a: MatRef<'_, f32>,
    b: MatRef<'_, T>,
    beta: f32,
    c: MatMut<'_>,
    epi: &Epilogue<'_>,
    scratch: &mut [f32],
) -> Result<()> {
    check_shapes((a.rows, a.cols), (b.rows, b.cols), (c.rows, c.cols))?;
    epi.check(c.rows, c.cols)?;
    check_len(gemm_scratch_len(a.rows, b.cols, a.cols), scratch.len())?;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if (1..=SMALL_M).contains(&m) && k > 1 && n > 1 && a.cs == 1 {
        // Decode shapes: stream the weight once instead of packing it.
        if b.rs == 1 {
            // Weight rows ([N, K] storage seen as a transposed B).
            return gemv_nk(alpha, a, b.t(), beta, c, epi);
        }
        let b_bytes = k
            .saturating_mul(n)
            .saturating_mul(core::mem::size_of::<T>());
        if b.cs == 1 && driver::Kernel::new(isa::active()).streams_b_rows(m, b_bytes) {
            return gemv_kn(alpha, a, b, beta, c, epi);
        }
    }
    driver::run(
        isa::active(),
        alpha,
        driver::ASrc::Plain(a),
        driver::BSrc::Plain(b),
        beta,
        c,
        epi,
        scratch,
    );
    Ok(())
}

/// Computes only the block `rows × cols` of [`gemm_ex`]'s result (the other
/// elements of C are untouched), so a host can split one GEMM across threads.
/// `a`, `b`, `c` and `epi` describe the whole problem. `scratch` must hold
/// [`gemm_scratch_len`] of the block.
#[allow(clippy::too_many_arguments)]
pub fn gemm_range<T: Weight>(
    alpha: f32,
    a: MatRef<'_, f32>,
    b: MatRef<'_, T>,
    beta: f32,
    c: MatMut<'_>,
    epi: &Epilogue<'_>,
    rows: Range<usize>,
    cols: Range<usize>,
    scratch: &mut [f32],
) -> Result<()> {
    check_shapes((a.rows, a.cols), (b.rows, b.cols), (c.rows, c.cols))?;
    epi.check(c.rows, c.cols)?;
    let k = a.cols;
    let a = a.sub(rows.clone(), 0..k)?;
    let b = b.sub(0..k, cols.clone())?;
    let epi = epi.sub(rows.clone(), cols.clone())?;
    let c = c.sub(rows, cols)?;
    gemm_ex(alpha, a, b, beta, c, &epi, scratch)
}

/// `C ← epilogue(alpha·A·B + beta·C)` with B pre-packed by [`pack_b`]. `scratch` must
/// hold [`gemm_packed_scratch_len`]`(m, k)` values.
pub fn gemm_packed(
    alpha: f32,
    a: MatRef<'_, f32>,
    b: PackedB<'_>,
    beta: f32,
    c: MatMut<'_>,
    epi: &Epilogue<'_>,
    scratch: &mut [f32],
) -> Result<()> {
    check_shapes((a.rows, a.cols), (b.k, b.n), (c.rows, c.cols))?;
    epi.check(c.rows, c.cols)?;
    check_len(gemm_packed_scratch_len(a.rows, a.cols), scratch.len())?;
    driver::run::<f32>(
        isa::active(),
        alpha,
        driver::ASrc::Plain(a),
        driver::BSrc::Packed(b),
        beta,
        c,
        epi,
        scratch,
    );
    Ok(())
}

/// `C ← epilogue(alpha·A·B + beta·C)` with A pre-packed by [`pack_a`] and B by
/// [`pack_b`]: nothing is packed, so no scratch is needed. The same bits as
/// [`gemm_packed`] on the unpacked A.
pub fn gemm_prepacked(
    alpha: f32,
    a: PackedA<'_>,
    b: PackedB<'_>,
    beta: f32,
    c: MatMut<'_>,
    epi: &Epilogue<'_>,
) -> Result<()> {
    check_shapes((a.m, a.k), (b.k, b.n), (c.rows, c.cols))?;
    epi.check(c.rows, c.cols)?;
    driver::run::<f32>(
        isa::active(),
        alpha,
        driver::ASrc::Packed(a),
        driver::BSrc::Packed(b),
        beta,
        c,
        epi,
        &mut [],
    );
    Ok(())
}

/// The block `rows × cols` of [`gemm_packed`]'s result; `cols.start` must be a
/// multiple of [`NR`]. `scratch` must hold [`gemm_packed_scratch_len`] of the block.
#[allow(clippy::too_many_arguments)]
pub fn gemm_packed_range(
    alpha: f32,
    a: MatRef<'_, f32>,
    b: PackedB<'_>,
    beta: f32,
    c: MatMut<'_>,
    epi: &Epilogue<'_>,
    rows: Range<usize>,
    cols: Range<usize>,
    scratch: &mut [f32],
) -> Result<()> {
    check_shapes((a.rows, a.cols), (b.k, b.n), (c.rows, c.cols))?;
    epi.check(c.rows, c.cols)?;
    let k = a.cols;
    let a = a.sub(rows.clone(), 0..k)?;
    let b = b.sub_cols(cols.clone())?;
    let epi = epi.sub(rows.clone(), cols.clone())?;
    let c = c.sub(rows, cols)?;
    gemm_packed(alpha, a, b, beta, c, &epi, scratch)
}
