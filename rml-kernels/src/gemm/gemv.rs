//! GEMV and small-M products that stream the weight once: decode-time
//! `y = x·Wᵀ` with weight rows `W: [N, K]` (the LLM layout, [`gemv_nk`]) and
//! `y = x·B` with `B: [K, N]` ([`gemv_kn`]), f32/f16/bf16 weights, f32 accumulation,
//! any number of x rows (processed in groups of [`SMALL_M`]; the weight is re-read
//! once per group).

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use rml_core::DType as D;
use rml_core::{Error, Result};

use super::driver::Kernel;
use super::epilogue::Epilogue;
use super::mat::{MatMut, MatRef};
use super::{SMALL_M, Weight};
use crate::isa;

/// One [N, K] GEMV call on at most `SMALL_M` x rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NkSpec {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub rs_x: usize,
    pub rs_w: usize,
    pub rs_y: usize,
    pub cs_y: usize,
    pub alpha: f32,
    pub beta: f32,
}

impl NkSpec {
    /// Panics unless every addressed element lies in the slices (the memory-safety
    /// fence in front of the SIMD kernels).
    pub fn assert_fits(&self, x: usize, w: usize, y: usize) {
        assert!((1..=SMALL_M).contains(&self.m) && self.k >= 1 && self.n >= 1);
        assert!(
            (self.m - 1) * self.rs_x + self.k <= x,
            "gemv x out of bounds"
        );
        assert!(
            (self.n - 1) * self.rs_w + self.k <= w,
            "gemv w out of bounds"
        );
        assert!(
            (self.m - 1) * self.rs_y + (self.n - 1) * self.cs_y < y,
            "gemv y out of bounds"
        );
    }
}

/// One [K, N] GEMV column chunk on at most `SMALL_M` x rows, accumulated into a
/// dense `m × cw` buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KnSpec {
    pub m: usize,
    pub k: usize,
    pub cw: usize,
    pub rs_x: usize,
    pub rs_b: usize,
    /// Step between the rows of the y buffer.
    pub rs_y: usize,
    pub alpha: f32,
}

impl KnSpec {
    /// Panics unless every addressed element lies in the slices.
    pub fn assert_fits(&self, x: usize, b: usize, ybuf: usize) {
        assert!((1..=SMALL_M).contains(&self.m) && self.k >= 1 && self.cw >= 1);
        assert!(
            (self.m - 1) * self.rs_x + self.k <= x,
            "gemv x out of bounds"
        );
        assert!(
            (self.k - 1) * self.rs_b + self.cw <= b,
            "gemv b out of bounds"
        );
        assert!(self.rs_y >= self.cw, "gemv y rows overlap");
        assert!(
            (self.m - 1) * self.rs_y + self.cw <= ybuf,
            "gemv y buffer out of bounds"
        );
    }
}

fn nk_scalar<T: Weight>(d: &NkSpec, x: &[f32], w: &[T], y: &mut [f32]) {
    d.assert_fits(x.len(), w.len(), y.len());
    for j in 0..d.n {
        let wr = &w[j * d.rs_w..j * d.rs_w + d.k];
        for i in 0..d.m {
            let xr = &x[i * d.rs_x..i * d.rs_x + d.k];
            let s: f32 = xr.iter().zip(wr).map(|(a, b)| a * b.to_f32()).sum();
            let v = &mut y[i * d.rs_y + j * d.cs_y];
            *v = if d.beta == 0.0 {
                d.alpha * s
            } else {
                d.alpha * s + d.beta * *v
            };
        }
    }
}

fn kn_scalar<T: Weight>(d: &KnSpec, x: &[f32], b: &[T], ybuf: &mut [f32]) {
    d.assert_fits(x.len(), b.len(), ybuf.len());
    for p in 0..d.k {
        let br = &b[p * d.rs_b..p * d.rs_b + d.cw];
        for i in 0..d.m {
            let a = d.alpha * x[i * d.rs_x + p];
            for (yv, bv) in ybuf[i * d.rs_y..i * d.rs_y + d.cw].iter_mut().zip(br) {
                *yv += a * bv.to_f32();
            }
        }
    }
}

/// Calls `$k.$method::<W>(d, x, w, y)` with `W` the concrete weight type behind `T`
/// (the SIMD kernels are generic over their own load traits, not over `Weight`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! by_weight {
    ($T:ty, $k:expr, $method:ident, $d:expr, $x:expr, $w:expr, $y:expr) => {
        match <$T>::DTYPE {
            D::F16 => $k.$method::<half::f16>($d, $x, bytemuck::cast_slice($w), $y),
            D::BF16 => $k.$method::<half::bf16>($d, $x, bytemuck::cast_slice($w), $y),
            _ => $k.$method::<f32>($d, $x, bytemuck::cast_slice($w), $y),
        }
    };
}

fn nk_call<T: Weight>(kern: Kernel, d: &NkSpec, x: &[f32], w: &[T], y: &mut [f32]) {
    match kern {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2(k) => by_weight!(T, k, gemv_nk, d, x, w, y),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512(k) => by_weight!(T, k, gemv_nk, d, x, w, y),
        #[cfg(target_arch = "aarch64")]
        Kernel::Neon(k) => by_weight!(T, k, gemv_nk, d, x, w, y),
        _ => nk_scalar(d, x, w, y),
    }
}

fn kn_call<T: Weight>(kern: Kernel, d: &KnSpec, x: &[f32], b: &[T], y: &mut [f32]) {
    match kern {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2(k) => by_weight!(T, k, gemv_kn, d, x, b, y),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512(k) => by_weight!(T, k, gemv_kn, d, x, b, y),
        #[cfg(target_arch = "aarch64")]
        Kernel::Neon(k) => by_weight!(T, k, gemv_kn, d, x, b, y),
        _ => kn_scalar(d, x, b, y),
    }
}

/// Floats [`unshared_stride`] may add to a row of the on-stack y chunk.
const YBUF_PAD_MAX: usize = 64;

/// Whether two of `rows` y rows `rs` floats apart start within a cache line of a
/// multiple of 4 KiB of each other, so that a column of y falls into one L1 set
/// (the 8-way 32 KiB L1d of x86 cores) together with the B rows streamed beside
/// it, which then evict each other. Zen 3, 4096 × 4096 weights, y rows 16 KiB
/// apart, GFLOP/s: 8 x rows in one pass ran at 12–13 in place, 28–34 with the rows
/// 24 floats further apart, 19–23 through the padded chunk of `gemv_kn`; 4 x rows
/// with four B rows at a time run in place as fast as unaliased (22–31), which is
/// why passes of at most [`KN_PASS_MAX_M`] rows accumulate in place. The padded
/// chunk now serves a y with strided columns.
fn rows_share_sets(rs: usize, rows: usize) -> bool {
    (1..rows).any(|i| {
        let off = (rs * i * 4) % 4096;
        off.min(4096 - off) < 64
    })
}

/// The least row stride of at least `cw` floats, a multiple of 8, at which `rows`
/// rows share no sets ([`rows_share_sets`]); at most [`YBUF_PAD_MAX`] more than
/// `cw` rounded up to 8.
fn unshared_stride(cw: usize, rows: usize) -> usize {
    let rs = cw.next_multiple_of(8);
    (rs..=rs + YBUF_PAD_MAX)
        .step_by(8)
        .find(|&s| !rows_share_sets(s, rows))
        .unwrap_or(rs)
}

fn check_common(x: &MatRef<'_, f32>, y: &MatMut<'_>, epi: &Epilogue<'_>) -> Result<()> {
    if x.rows != y.rows {
        return Err(Error::ShapeMismatch { op: "gemv" });
    }
    if x.cs != 1 && x.cols > 1 {
        return Err(Error::NotContiguous);
    }
    epi.check(y.rows, y.cols)
}

/// Most x rows in one pass of the [N, K] kernels. Up to six rows keep two or more
/// weight rows' accumulators in registers (`R·M ≤ 12`); seven or eight would take one
/// weight row at a time against all their x rows, which for long rows come from L2
/// at every step (eight rows of 4096 f32 are 128 KiB), so they run as two passes
/// over each block of weight rows, the second reading the block from L2. Zen 3,
/// 4096 × 4096 f32 weights, alternated builds, GFLOP/s: 8 rows 32.6–33.9 in one
/// pass, 46.8–47.5 in two; 5 and 6 rows were slower in two (32–39 against 37–48).
const NK_PASS_MAX_M: usize = 6;

/// Bytes of weight that two passes share through L2 (seven or eight x rows over
/// [N, K] weights, five to eight over a [K, N] B): half of a 512 KiB L2, leaving
/// room for the x and y rows.
const L2_SHARE_BYTES: usize = 256 << 10;

/// Most x rows in one pass of the [K, N] kernel: more run as two passes over each
/// block of B ([`kn_blocks`]), the second reading it from L2. The kernel loads and
/// stores each y row's vector once per four (AVX2) or eight B rows, and eight y
/// rows at once are too many: their vectors, B's and the broadcasts of x overflow
/// the registers, and y rows a multiple of 4 KiB apart evict the B rows' lines
/// from L1 (see [`rows_share_sets`]). Zen 2, 4096 × 4096 f32 B, GFLOP/s over
/// alternated builds: eight rows 29 through the padded chunk in one pass (and
/// `gemm`'s packing 34) against 40–46 in two passes; five to seven rows 26–31
/// (packing) against 38–41; an f16 B 14.5 against 47–53.
const KN_PASS_MAX_M: usize = 4;

/// Least B rows in a block that two [K, N] passes share: its columns are cut to
/// fit [`L2_SHARE_BYTES`] at this many rows.
const KN_BLOCK_MIN_ROWS: usize = 16;

/// The `(first row, rows)` passes of a group of `mg` x rows: one pass up to
/// `max_m` rows, else two halves (the larger first).
fn row_passes(mg: usize, max_m: usize) -> impl Iterator<Item = (usize, usize)> {
    let first = if mg <= max_m { mg } else { mg.div_ceil(2) };
    [(0, first), (first, mg - first)]
        .into_iter()
        .filter(|&(_, rows)| rows > 0)
}

/// `y ← epi(alpha·x·Wᵀ + beta·y)`: `x` is `m × k`, the weight `w` is `n × k` (one row
/// per output, as stored by PyTorch `Linear` and LLM checkpoints), `y` is `m × n`.
/// `x` and `w` need unit column stride. Each weight row is read from memory once per
/// group of [`SMALL_M`] x rows, at memory bandwidth (seven or eight rows read it a
/// second time from L2, see `NK_PASS_MAX_M`).
pub fn gemv_nk<T: Weight>(
    alpha: f32,
    x: MatRef<'_, f32>,
    w: MatRef<'_, T>,
    beta: f32,
    mut y: MatMut<'_>,
    epi: &Epilogue<'_>,
) -> Result<()> {
    check_common(&x, &y, epi)?;
    if w.cols != x.cols || w.rows != y.cols {
        return Err(Error::ShapeMismatch { op: "gemv_nk" });
    }
    if w.cs != 1 && w.cols > 1 {
        return Err(Error::NotContiguous);
    }
    let (m, k, n) = (x.rows, x.cols, w.rows);
    if m == 0 || n == 0 {
        return Ok(());
    }
    let kern = Kernel::new(isa::active());
    // Weight rows per block: the epilogue runs on a block of y while it is hot.
    const NB: usize = 64;
    for i0 in (0..m).step_by(SMALL_M) {
        let mg = SMALL_M.min(m - i0);
        for j0 in (0..n).step_by(NB) {
            let nb = NB.min(n - j0);
            if k == 0 {
                for i in i0..i0 + mg {
                    for j in j0..j0 + nb {
                        let v = &mut y.data[i * y.rs + j * y.cs];
                        *v = if beta == 0.0 { 0.0 } else { beta * *v };
                    }
                }
            } else {
                // Weight rows per sub-block: with two passes, as many as fill
                // L2_SHARE_BYTES.
                let sub = if mg > NK_PASS_MAX_M {
                    (L2_SHARE_BYTES / (k * core::mem::size_of::<T>())).clamp(1, nb)
                } else {
                    nb
                };
                for jb in (j0..j0 + nb).step_by(sub) {
                    let nsub = sub.min(j0 + nb - jb);
                    for (p0, pm) in row_passes(mg, NK_PASS_MAX_M) {
                        let d = NkSpec {
                            m: pm,
                            k,
                            n: nsub,
                            rs_x: x.rs,
                            rs_w: w.rs,
                            rs_y: y.rs,
                            cs_y: y.cs,
                            alpha,
                            beta,
                        };
                        let xs = &x.data[(i0 + p0) * x.rs..];
                        let ws = &w.data[jb * w.rs..];
                        let ys = &mut y.data[(i0 + p0) * y.rs + jb * y.cs..];
                        nk_call(kern, &d, xs, ws, ys);
                    }
                }
            }
            if !epi.is_identity() {
                epi.apply_tile(&mut y, i0, mg, j0, nb);
            }
        }
    }
    Ok(())
}

/// `y ← epi(alpha·x·B + beta·y)`: `x` is `m × k`, `B` is `k × n` with unit column
/// stride (rows streamed front to back, four or eight at a time), `y` is `m × n`.
pub fn gemv_kn<T: Weight>(
    alpha: f32,
    x: MatRef<'_, f32>,
    b: MatRef<'_, T>,
    beta: f32,
    mut y: MatMut<'_>,
    epi: &Epilogue<'_>,
) -> Result<()> {
    check_common(&x, &y, epi)?;
    if b.rows != x.cols || b.cols != y.cols {
        return Err(Error::ShapeMismatch { op: "gemv_kn" });
    }
    if b.cs != 1 && b.cols > 1 {
        return Err(Error::NotContiguous);
    }
    let (m, k, n) = (x.rows, x.cols, b.cols);
    if m == 0 || n == 0 {
        return Ok(());
    }
    let kern = Kernel::new(isa::active());
    if y.cs == 1 || n == 1 {
        // Row-contiguous y: accumulate in place over whole B rows (the longest
        // sequential runs, which the prefetchers like best), or over blocks of them
        // in two passes.
        for i0 in (0..m).step_by(SMALL_M) {
            let mg = SMALL_M.min(m - i0);
            for i in i0..i0 + mg {
                let row = &mut y.data[i * y.rs..i * y.rs + n];
                if beta == 0.0 {
                    row.fill(0.0);
                } else {
                    row.iter_mut().for_each(|v| *v *= beta);
                }
            }
            if k > 0 {
                kn_in_place(kern, alpha, &x, &b, &mut y, (i0, mg));
            }
            if !epi.is_identity() {
                for i in i0..i0 + mg {
                    epi.apply_row(&mut y.data[i * y.rs..i * y.rs + n], i, 0);
                }
            }
        }
        return Ok(());
    }
    // Strided y: accumulate a column chunk on the stack (8 KiB, L1-resident), its
    // rows apart by a stride that shares no sets.
    let mut ybuf = [0.0f32; 2048];
    for i0 in (0..m).step_by(SMALL_M) {
        let mg = SMALL_M.min(m - i0);
        let cw_max = (ybuf.len() / mg - YBUF_PAD_MAX) / 8 * 8;
        for j0 in (0..n).step_by(cw_max) {
            let cw = cw_max.min(n - j0);
            let rs = unshared_stride(cw, mg);
            for i in 0..mg {
                for j in 0..cw {
                    let v = y.data[(i0 + i) * y.rs + (j0 + j) * y.cs];
                    ybuf[i * rs + j] = if beta == 0.0 { 0.0 } else { beta * v };
                }
            }
            if k > 0 {
                let d = KnSpec {
                    m: mg,
                    k,
                    cw,
                    rs_x: x.rs,
                    rs_b: b.rs,
                    rs_y: rs,
                    alpha,
                };
                kn_call(kern, &d, &x.data[i0 * x.rs..], &b.data[j0..], &mut ybuf);
            }
            for i in 0..mg {
                let row = &mut ybuf[i * rs..i * rs + cw];
                if !epi.is_identity() {
                    epi.apply_row(row, i0 + i, j0);
                }
                for (j, v) in row.iter().enumerate() {
                    y.data[(i0 + i) * y.rs + (j0 + j) * y.cs] = *v;
                }
            }
        }
    }
    Ok(())
}

/// The blocks `(first B row, rows, first column, columns)` that the passes of
/// `mg` x rows walk in turn: all of a `k × n` B at once in one pass; with two
/// passes, blocks of about [`L2_SHARE_BYTES`], whole rows of B while at least
/// [`KN_BLOCK_MIN_ROWS`] of them fit, and a multiple of eight rows (the kernels
/// take four or eight B rows at a time).
fn kn_blocks(
    mg: usize,
    k: usize,
    n: usize,
    size: usize,
) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    let (cb, kb) = if mg > KN_PASS_MAX_M {
        let cb = n.min(L2_SHARE_BYTES / (KN_BLOCK_MIN_ROWS * size));
        (cb, (L2_SHARE_BYTES / (cb * size) / 8 * 8).max(8))
    } else {
        (n, k)
    };
    (0..n).step_by(cb).flat_map(move |j0| {
        (0..k)
            .step_by(kb)
            .map(move |p0| (p0, kb.min(k - p0), j0, cb.min(n - j0)))
    })
}

/// `y[i0..i0 + mg] += alpha·x[i0..i0 + mg]·B` on a row-contiguous y, in place:
/// one pass of the [K, N] kernel over all of B for up to [`KN_PASS_MAX_M`] x rows,
/// else two passes over each block of B ([`kn_blocks`]).
fn kn_in_place<T: Weight>(
    kern: Kernel,
    alpha: f32,
    x: &MatRef<'_, f32>,
    b: &MatRef<'_, T>,
    y: &mut MatMut<'_>,
    (i0, mg): (usize, usize),
) {
    let size = core::mem::size_of::<T>();
    for (p0, kc, j0, cw) in kn_blocks(mg, x.cols, b.cols, size) {
        for (r0, rm) in row_passes(mg, KN_PASS_MAX_M) {
            let d = KnSpec {
                m: rm,
                k: kc,
                cw,
                rs_x: x.rs,
                rs_b: b.rs,
                rs_y: if rm > 1 { y.rs } else { cw },
                alpha,
            };
            let xs = &x.data[(i0 + r0) * x.rs + p0..];
            let bs = &b.data[p0 * b.rs + j0..];
            let ys = &mut y.data[(i0 + r0) * y.rs + j0..];
            kn_call(kern, &d, xs, bs, ys);
        }
    }
}
