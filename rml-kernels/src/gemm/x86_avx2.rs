//! AVX2+FMA (and F16C) GEMM and GEMV kernels.
//!
//! Every kernel is an `unsafe` `#[target_feature]` function over raw pointers, called
//! only through a safe method of [`Avx2`], a token that exists only when the CPU
//! supports AVX2, FMA and F16C; the safe methods check every extent first. Under Miri,
//! which implements no F16C intrinsics, the kernels are compiled without F16C and f16
//! weights are widened in software (`Load8 for f16`), so Miri checks the same loops.
//!
//! The GEMM micro-kernel keeps a `MR × 16` tile (`MR ≤ 6`) in `2·MR` ymm
//! accumulators: per K step it loads two B vectors, broadcasts `MR` A values and issues
//! `2·MR` FMAs (12 for the full tile, enough to hide the 4-cycle FMA latency on two
//! FMA pipes). Ragged columns use masked loads/stores, so edges need no copies.

use core::arch::x86_64::*;

use super::tile::{Column, TileSpec};
use super::{MR, NR};
use crate::isa::Isa;
use crate::simd::prefetch;

/// Proof that this CPU runs AVX2, FMA and F16C, carrying the GEMV prefetch distance
/// of its class of core.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2 {
    /// Bytes ahead of its loads at which a GEMV weight row asks for its lines (0:
    /// never); see [`gemv_ahead`].
    pub(super) gemv_ahead: usize,
}

impl Avx2 {
    /// The token when `isa` runs the AVX2 kernels (AVX2, AVX-512) and the CPU
    /// supports it.
    #[inline]
    pub(crate) fn new(isa: Isa) -> Option<Avx2> {
        (isa.has_avx2() && isa.is_supported()).then(|| Avx2 {
            gemv_ahead: gemv_ahead(),
        })
    }

    /// One GEMM micro-tile (see `tile.rs` for the contract).
    #[inline]
    pub(crate) fn tile(self, spec: &TileSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
        spec.assert_fits(a.len(), b.len(), c.len());
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        // SAFETY: the token proves AVX2+FMA; `assert_fits` proved that every element
        // the tile reads (A: `mr` rows × `kc` steps, B: `kc` rows × `nr` columns, the
        // rest masked off) and writes (C: `mr × nr`) lies inside the three slices.
        unsafe {
            if spec.mr == MR && spec.reads_packed() {
                // Both operands packed: constant strides, constant address offsets.
                tile_mr::<MR, true>(spec, a, b, c)
            } else {
                match spec.mr {
                    1 => tile_mr::<1, false>(spec, a, b, c),
                    2 => tile_mr::<2, false>(spec, a, b, c),
                    3 => tile_mr::<3, false>(spec, a, b, c),
                    4 => tile_mr::<4, false>(spec, a, b, c),
                    5 => tile_mr::<5, false>(spec, a, b, c),
                    _ => tile_mr::<6, false>(spec, a, b, c),
                }
            }
        }
    }

    /// A [`Column`] of full tiles of packed operands: one bounds check
    /// ([`TileSpec::assert_fits_column`]) and one call for the column, where calling
    /// [`Avx2::tile`] per tile costs about 2 % of a 1024×1024×1024 product (Zen 3,
    /// session 32).
    pub(crate) fn tile_column(
        self,
        spec: &TileSpec,
        col: Column,
        a: &[f32],
        b: &[f32],
        c: &mut [f32],
    ) {
        assert!(
            spec.nr == NR && spec.reads_packed(),
            "a tile column reads packed operands"
        );
        spec.assert_fits_column(a.len(), b.len(), c.len(), col);
        // SAFETY: the token proves AVX2+FMA; `assert_fits_column` proved that each
        // tile's A (from `t·a_step`), the B panel and each tile's C rows (from
        // `t·MR·rs_c`) lie inside the three slices.
        unsafe { column_mr(spec, col, a.as_ptr(), b.as_ptr(), c.as_mut_ptr()) }
    }

    /// `pack::pack_b_rows_f32` compiled with AVX2 (32-byte moves).
    pub(crate) fn pack_b_rows_f32(
        self,
        b: &super::pack::B32<'_>,
        kc: usize,
        full: usize,
        out: &mut [f32],
    ) {
        // SAFETY: the token proves AVX2; the callee is safe code (slice copies).
        unsafe { pack_b_rows_f32_avx2(b, kc, full, out) }
    }

    /// Converts f16 to f32 with F16C (`src.len() == dst.len()` is enforced).
    pub(crate) fn f16_to_f32(self, src: &[half::f16], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        let n8 = n - n % 8;
        // SAFETY: the token proves F16C; reads `src[..n8]` and writes `dst[..n8]`.
        unsafe { f16_to_f32_8(src.as_ptr(), dst.as_mut_ptr(), n8) };
        for (d, s) in dst[n8..n].iter_mut().zip(&src[n8..n]) {
            *d = s.to_f32();
        }
    }

    /// Dot products of `m ≤ 8` rows of x with `n` weight rows (GEMV, [N, K] weights):
    /// `y[i·rs_y + j·cs_y] ← alpha·Σ_p x[i·rs_x + p]·w[j·rs_w + p] + beta·y`.
    pub(crate) fn gemv_nk<W: Load8>(
        self,
        d: &super::gemv::NkSpec,
        x: &[f32],
        w: &[W],
        y: &mut [f32],
    ) {
        d.assert_fits(x.len(), w.len(), y.len());
        let ahead = self.gemv_ahead;
        let (x, w, y) = (x.as_ptr(), w.as_ptr(), y.as_mut_ptr());
        // SAFETY: the token proves AVX2+FMA+F16C; `assert_fits` proved every x, w and y
        // element addressed by the spec lies in its slice.
        unsafe {
            by_x_rows!(
                d.m,
                nk_rows::<W>,
                [8, 4, 4, 3, 2, 2, 1, 1],
                (d, x, w, y, ahead)
            )
        }
    }

    /// Accumulates `ybuf[i·rs_y + j] += alpha·Σ_p x[i·rs_x + p]·b[p·rs_b + j]` for
    /// `i < m`, `j < cw`, `p < k` (GEMV with [K, N] weights, one column chunk).
    pub(crate) fn gemv_kn<W: Load8>(
        self,
        d: &super::gemv::KnSpec,
        x: &[f32],
        b: &[W],
        ybuf: &mut [f32],
    ) {
        d.assert_fits(x.len(), b.len(), ybuf.len());
        let ahead = self.gemv_ahead;
        let (x, b, y) = (x.as_ptr(), b.as_ptr(), ybuf.as_mut_ptr());
        // SAFETY: the token proves AVX2+FMA+F16C; `assert_fits` proved every x, B and
        // y-buffer element addressed by the spec lies in its slice.
        unsafe {
            by_x_rows!(
                d.m,
                kn_chunk_m::<W>,
                [8, 4, 4, 4, 8, 8, 8, 8],
                (d, x, b, y, ahead)
            )
        }
    }
}

/// Runs the micro-kernel step macro `$step` `$kc` times, four per loop iteration:
/// the K loop of the AVX2 and AVX-512 tiles (a macro, so each step's intrinsics stay
/// inline in the `#[target_feature]` kernel).
/// The A row and column strides and the B row stride a tile of `M` rows walks: the
/// packed panels' when `PACKED`, else the spec's.
#[inline(always)]
pub(super) fn strides<const M: usize, const PACKED: bool>(
    spec: &TileSpec,
) -> (usize, usize, usize) {
    if PACKED {
        (1, M, NR)
    } else {
        (spec.rs_a, spec.cs_a, spec.rs_b)
    }
}

/// Asks for the first and the `last`-th value of each of the tile's `M` rows of C
/// (a hint; the addresses are computed with wrapping math).
#[inline(always)]
pub(super) fn prefetch_c_rows<const M: usize>(spec: &TileSpec, c: *const f32, last: usize) {
    for i in 0..M {
        prefetch(c.wrapping_add(i * spec.rs_c));
        prefetch(c.wrapping_add(i * spec.rs_c + last));
    }
}

macro_rules! k_steps {
    ($kc:expr, $step:ident) => {{
        let mut p = $kc;
        while p >= 4 {
            $step!();
            $step!();
            $step!();
            $step!();
            p -= 4;
        }
        while p > 0 {
            $step!();
            p -= 1;
        }
    }};
}
pub(super) use k_steps;

/// Lane masks for the first `nr` of 16 columns.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn masks(nr: usize) -> (__m256i, __m256i) {
    let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let n = _mm256_set1_epi32(nr as i32);
    let n8 = _mm256_set1_epi32(nr as i32 - 8);
    (_mm256_cmpgt_epi32(n, idx), _mm256_cmpgt_epi32(n8, idx))
}

/// The `M × 16` micro-kernel. With `PACKED`, the strides are the packed ones
/// (`rs_a = 1`, `cs_a = M`, `rs_b = 16`) known at compile time.
///
/// # Safety
/// AVX2+FMA available; `spec` in bounds for `a`, `b`, `c` as checked by
/// `TileSpec::assert_fits` with `spec.mr == M`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_mr<const M: usize, const PACKED: bool>(
    spec: &TileSpec,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
) {
    let mut acc = [[_mm256_setzero_ps(); 2]; M];
    let (rs_a, cs_a, rs_b) = strides::<M, PACKED>(spec);
    let mut pa = a;
    let mut pb = b;
    prefetch_c_rows::<M>(spec, c, NR - 1);
    if spec.nr == NR {
        macro_rules! step {
            () => {{
                // SAFETY: rows `< kc` of B hold 16 in-bounds values (nr == 16); A
                // rows `< M`, steps `< kc` are in bounds (caller contract).
                let b0 = unsafe { _mm256_loadu_ps(pb) };
                // SAFETY: as above (columns 8..16 of the same row).
                let b1 = unsafe { _mm256_loadu_ps(pb.add(8)) };
                for (i, acc_i) in acc.iter_mut().enumerate() {
                    // SAFETY: as above.
                    let ai = unsafe { _mm256_broadcast_ss(&*pa.add(i * rs_a)) };
                    acc_i[0] = _mm256_fmadd_ps(ai, b0, acc_i[0]);
                    acc_i[1] = _mm256_fmadd_ps(ai, b1, acc_i[1]);
                }
                pa = pa.wrapping_add(cs_a);
                pb = pb.wrapping_add(rs_b);
            }};
        }
        k_steps!(spec.kc, step);
    } else {
        let (m0, m1) = masks(spec.nr);
        for _ in 0..spec.kc {
            // SAFETY: masked-off lanes are not accessed; the enabled ones are the
            // first `nr` columns of an in-bounds B row.
            let b0 = unsafe { _mm256_maskload_ps(pb, m0) };
            // SAFETY: as above (all lanes off when nr ≤ 8).
            let b1 = unsafe { _mm256_maskload_ps(pb.wrapping_add(8), m1) };
            for (i, acc_i) in acc.iter_mut().enumerate() {
                // SAFETY: A rows `< M`, steps `< kc` are in bounds.
                let ai = unsafe { _mm256_broadcast_ss(&*pa.add(i * rs_a)) };
                acc_i[0] = _mm256_fmadd_ps(ai, b0, acc_i[0]);
                acc_i[1] = _mm256_fmadd_ps(ai, b1, acc_i[1]);
            }
            pa = pa.wrapping_add(cs_a);
            pb = pb.wrapping_add(rs_b);
        }
    }
    let alpha = _mm256_set1_ps(spec.alpha);
    let beta = _mm256_set1_ps(spec.beta);
    let (m0, m1) = masks(spec.nr);
    for (i, acc_i) in acc.iter().enumerate() {
        let cr = c.wrapping_add(i * spec.rs_c);
        let mut v0 = _mm256_mul_ps(alpha, acc_i[0]);
        let mut v1 = _mm256_mul_ps(alpha, acc_i[1]);
        if spec.nr == NR {
            // SAFETY: row `i < M` of C holds 16 in-bounds values.
            unsafe {
                if spec.beta != 0.0 {
                    v0 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(cr), v0);
                    v1 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(cr.add(8)), v1);
                }
                _mm256_storeu_ps(cr, v0);
                _mm256_storeu_ps(cr.add(8), v1);
            }
        } else {
            // SAFETY: only the first `nr` (in-bounds) columns are enabled.
            unsafe {
                if spec.beta != 0.0 {
                    v0 = _mm256_fmadd_ps(beta, _mm256_maskload_ps(cr, m0), v0);
                    v1 = _mm256_fmadd_ps(beta, _mm256_maskload_ps(cr.wrapping_add(8), m1), v1);
                }
                _mm256_maskstore_ps(cr, m0, v0);
                _mm256_maskstore_ps(cr.wrapping_add(8), m1, v1);
            }
        }
    }
}

/// The packed `MR × NR` tile down a [`Column`] (see [`Avx2::tile_column`]).
///
/// # Safety
/// AVX2+FMA available; `spec` and `col` in bounds as checked by
/// `TileSpec::assert_fits_column`.
#[target_feature(enable = "avx2,fma")]
unsafe fn column_mr(spec: &TileSpec, col: Column, a: *const f32, b: *const f32, c: *mut f32) {
    for t in 0..col.tiles {
        // SAFETY: tile `t`'s operands are in bounds (caller contract).
        unsafe {
            let (a, c) = (a.add(t * col.a_step), c.add(t * MR * spec.rs_c));
            tile_mr::<MR, true>(spec, a, b, c)
        }
    }
}

/// See [`Avx2::pack_b_rows_f32`].
#[target_feature(enable = "avx2")]
fn pack_b_rows_f32_avx2(b: &super::pack::B32<'_>, kc: usize, full: usize, out: &mut [f32]) {
    super::pack::pack_b_rows_f32(b, kc, full, out)
}

/// # Safety
/// F16C available; `src[..n]` readable, `dst[..n]` writable, `n % 8 == 0`.
#[cfg_attr(not(miri), target_feature(enable = "avx2,fma,f16c"))]
#[cfg_attr(miri, target_feature(enable = "avx2,fma"))]
unsafe fn f16_to_f32_8(src: *const half::f16, dst: *mut f32, n: usize) {
    for i in (0..n).step_by(8) {
        // SAFETY: `i + 8 ≤ n` (caller contract).
        unsafe { _mm256_storeu_ps(dst.add(i), <half::f16 as Load8>::load8(src.add(i))) };
    }
}

/// A weight element that loads 8 at a time as f32.
pub(crate) trait Load8: super::Weight {
    /// Loads 8 consecutive values as f32.
    ///
    /// # Safety
    /// AVX2+F16C available, 8 values readable at `p`.
    unsafe fn load8(p: *const Self) -> __m256;
}

impl Load8 for f32 {
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: caller contract.
        unsafe { _mm256_loadu_ps(p) }
    }
}

impl Load8 for half::f16 {
    #[inline(always)]
    unsafe fn load8(p: *const half::f16) -> __m256 {
        #[cfg(not(miri))]
        // SAFETY: caller contract (F16C available, 16 bytes readable).
        unsafe {
            _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
        }
        #[cfg(miri)]
        // Miri implements no F16C intrinsics: convert lane by lane as `half` does.
        // SAFETY: caller contract (8 values readable at `p`, AVX available).
        unsafe {
            let f: [f32; 8] = core::array::from_fn(|i| (*p.add(i)).to_f32());
            _mm256_loadu_ps(f.as_ptr())
        }
    }
}

impl Load8 for half::bf16 {
    #[inline(always)]
    unsafe fn load8(p: *const half::bf16) -> __m256 {
        // SAFETY: caller contract (AVX2 available, 16 bytes readable).
        unsafe {
            let h = _mm_loadu_si128(p as *const __m128i);
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
        }
    }
}

#[inline(always)]
pub(super) fn hsum(v: __m256) -> f32 {
    // SAFETY: only called from AVX2 functions (inlined into them).
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }
}

/// How far ahead of its loads a GEMV weight row asks for its cache lines on this core
/// (0: never): [`GEMV_AHEAD_ZEN5`] on AMD cores of family 1Ah (Zen 5) and later, none
/// on every other core, whichever ISA runs.
///
/// Measured per core, 4096 × 4096 weights, GB/s of weights, alternated builds:
/// * Zen 5 (session 15, a streaming read 32–35 GB/s in the same runs), none → 1 KiB:
///   f32 [N, K] 33 → 38, f16 [N, K] 28 → 42–46, f32 [K, N] 31–34 → 41. 512 bytes
///   ahead did not help; 4 KiB, or prefetching the whole next group, slowed the f32
///   one; stopping at each row's end cost f16 a quarter.
/// * Zen 3 (session 23, 11 rounds), none / 256 / 512 / 1024 bytes: f32 [N, K] 21.6 /
///   21.2 / 20.9 / 16.3, f32 [K, N] 20.2 / 21.2 / 20.9 / 16.7.
/// * Zen 4 with AVX-512 (session 37, two runs of 3 rounds each, read 31–32),
///   none / 512 / 1024 / 2048 bytes: f32 [N, K] 30–32 / 28–29 / 22–24 / 20–21,
///   f16 [N, K] 31–34 / 30 / 26–31 / 23–28, f32 [K, N] 29–31 / 26–27 / 21–23 / 20–21.
///
/// A software prefetch into L1 holds one of the core's few L1 miss buffers for a
/// whole DRAM round trip, which the L2 prefetcher's requests do not; only the Zen 5
/// gains from it. Other vendors' cores are unmeasured and left to their hardware
/// prefetchers.
fn gemv_ahead() -> usize {
    match crate::isa::amd_family() {
        Some(family) if family >= 0x1A => GEMV_AHEAD_ZEN5,
        _ => 0,
    }
}

/// The GEMV prefetch distance on a Zen 5: 1 KiB, one software prefetch per line,
/// each [N, K] row running on into the next group's (see [`gemv_ahead`]).
const GEMV_AHEAD_ZEN5: usize = 1024;

/// Weight values per 64-byte cache line.
#[inline(always)]
pub(super) const fn weights_per_line<W>() -> usize {
    64 / core::mem::size_of::<W>()
}

/// Asks for the line `ahead_bytes` (none when 0) ahead of column `p` in each of `R`
/// weight rows of `len` values. Near a row's end the stream continues `next` values
/// further on (the row the same stream reads next: the next group's, for [N, K]
/// weights), or stops when `next` is `None` (a [K, N] chunk, whose row goes on into
/// columns another thread may be reading).
#[inline(always)]
pub(super) fn prefetch_rows_ahead<W, const R: usize>(
    rows: &[*const W; R],
    p: usize,
    len: usize,
    next: Option<usize>,
    ahead_bytes: usize,
) {
    if ahead_bytes == 0 {
        return;
    }
    let ahead = p + ahead_bytes / core::mem::size_of::<W>();
    let offset = match next {
        _ if ahead < len => ahead,
        Some(next) => next + ahead - len,
        None => return,
    };
    for row in rows {
        prefetch(row.wrapping_add(offset) as *const f32);
    }
}

/// Calls the GEMV kernel `$kernel::<W, M, R>` with `M = $m` x rows (1 to 8; more
/// run as 8) and the `R` (weight rows a step) listed for that `M`: each ISA's tuning
/// table in one line.
macro_rules! by_x_rows {
    ($m:expr, $kernel:ident::<$w:ty>, [$r1:literal, $r2:literal, $r3:literal, $r4:literal,
     $r5:literal, $r6:literal, $r7:literal, $r8:literal], ($($arg:expr),*)) => {
        match $m {
            1 => $kernel::<$w, 1, $r1>($($arg),*),
            2 => $kernel::<$w, 2, $r2>($($arg),*),
            3 => $kernel::<$w, 3, $r3>($($arg),*),
            4 => $kernel::<$w, 4, $r4>($($arg),*),
            5 => $kernel::<$w, 5, $r5>($($arg),*),
            6 => $kernel::<$w, 6, $r6>($($arg),*),
            7 => $kernel::<$w, 7, $r7>($($arg),*),
            _ => $kernel::<$w, 8, $r8>($($arg),*),
        }
    };
}
pub(super) use by_x_rows;

/// Defines an [N, K] GEMV kernel `$name`: `R` weight rows at a time against `M` rows
/// of x, `M × R` ymm accumulators. A macro so that one loop compiles twice: for
/// AVX2's 16 ymm registers ([`nk_rows`]), and with AVX-512VL, whose EVEX encoding
/// gives the same ymm instructions 32 registers and so room for more weight rows per
/// x row (`x86_avx512::nk_rows_evex`). Paths in the body resolve from the `gemm`
/// submodule that invokes it.
macro_rules! nk_rows_kernel {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        unsafe fn $name<W: super::x86_avx2::Load8, const M: usize, const R: usize>(
            d: &super::gemv::NkSpec,
            x: *const f32,
            w: *const W,
            y: *mut f32,
            ahead: usize,
        ) {
            use super::x86_avx2::{hsum, prefetch_rows_ahead, weights_per_line};
            let k8 = d.k - d.k % 8;
            let mut j = 0;
            while j < d.n {
                let r_here = R.min(d.n - j);
                let mut acc = [[_mm256_setzero_ps(); R]; M];
                let mut wr = [w; R];
                for (r, p) in wr.iter_mut().enumerate() {
                    // Rows past `n` reuse the last valid row (computed, then discarded).
                    *p = w.wrapping_add((j + r.min(r_here - 1)) * d.rs_w);
                }
                let mut p = 0;
                while p < k8 {
                    if p % weights_per_line::<W>() == 0 {
                        prefetch_rows_ahead(&wr, p, d.k, Some(R * d.rs_w), ahead);
                    }
                    let mut wv = [_mm256_setzero_ps(); R];
                    for r in 0..R {
                        // SAFETY: row `j + min(r, r_here-1) < n`, columns `p..p+8 ≤ k`.
                        wv[r] = unsafe { W::load8(wr[r].add(p)) };
                    }
                    for (i, acc_i) in acc.iter_mut().enumerate() {
                        // SAFETY: x row `i < m`, columns `p..p+8 ≤ k`.
                        let xv = unsafe { _mm256_loadu_ps(x.add(i * d.rs_x + p)) };
                        for r in 0..R {
                            acc_i[r] = _mm256_fmadd_ps(xv, wv[r], acc_i[r]);
                        }
                    }
                    p += 8;
                }
                for (i, acc_i) in acc.iter().enumerate() {
                    for (r, acc_ir) in acc_i.iter().enumerate().take(r_here) {
                        let mut s = hsum(*acc_ir);
                        for q in k8..d.k {
                            // SAFETY: in-bounds tail elements of x row `i` and weight row `j+r`.
                            s += unsafe { *x.add(i * d.rs_x + q) * (*wr[r].add(q)).to_f32() };
                        }
                        // SAFETY: output `(i, j + r)` with `i < m`, `j + r < n` is in bounds.
                        let yp = unsafe { y.add(i * d.rs_y + (j + r) * d.cs_y) };
                        // SAFETY: as above.
                        unsafe {
                            *yp = if d.beta == 0.0 {
                                d.alpha * s
                            } else {
                                d.alpha * s + d.beta * *yp
                            };
                        }
                    }
                }
                j += R;
            }
        }
    };
}
pub(super) use nk_rows_kernel;

nk_rows_kernel!(
    /// GEMV over [N, K] weights on AVX2's 16 registers (see [`nk_rows_kernel`]).
    ///
    /// # Safety
    /// AVX2+FMA+F16C available; extents checked by `NkSpec::assert_fits`, `d.m == M`.
    #[cfg_attr(not(miri), target_feature(enable = "avx2,fma,f16c"))]
    #[cfg_attr(miri, target_feature(enable = "avx2,fma"))]
    nk_rows
);

/// Defines a [K, N] GEMV kernel `$name` over one dense column chunk of y (see
/// `Avx2::gemv_kn`): `G` B rows stream at once (eight sequential read streams keep
/// enough cache-line requests in flight), each y vector is loaded and stored once per
/// `G` rows. Compiled twice, as [`nk_rows_kernel`] is: for AVX2's 16 registers
/// ([`kn_chunk_m`]) and with AVX-512VL's 32 (`x86_avx512::kn_chunk_evex`).
macro_rules! kn_chunk_kernel {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        unsafe fn $name<W: super::x86_avx2::Load8, const M: usize, const G: usize>(
            d: &super::gemv::KnSpec,
            x: *const f32,
            b: *const W,
            yb: *mut f32,
            ahead: usize,
        ) {
            use super::x86_avx2::{prefetch_rows_ahead, weights_per_line};
            let cw8 = d.cw - d.cw % 8;
            let kg = d.k - d.k % G;
            let mut p = 0;
            while p < d.k {
                let rows = if p < kg { G } else { 1 };
                let mut br = [b; G];
                let mut xa = [[_mm256_setzero_ps(); G]; M];
                for r in 0..rows {
                    br[r] = b.wrapping_add((p + r) * d.rs_b);
                    for (i, xa_i) in xa.iter_mut().enumerate() {
                        // SAFETY: x row `i < m`, column `p + r < k`.
                        xa_i[r] = _mm256_set1_ps(d.alpha * unsafe { *x.add(i * d.rs_x + p + r) });
                    }
                }
                let mut j = 0;
                while j < cw8 {
                    // SAFETY: rows `p..p+rows ≤ k`, columns `j..j+8 ≤ cw` of B and of each y row
                    // are in bounds; rows past `rows` are never dereferenced.
                    unsafe {
                        if rows == G {
                            if j % weights_per_line::<W>() == 0 {
                                prefetch_rows_ahead(&br, j, d.cw, None, ahead);
                            }
                            let mut wv = [_mm256_setzero_ps(); G];
                            for r in 0..G {
                                wv[r] = W::load8(br[r].add(j));
                            }
                            // Every y row's vector is loaded before any is stored: a load
                            // after the store to the row above would wait for it whenever
                            // the rows lie a multiple of 4 KiB apart ("4K aliasing").
                            let mut yv = [_mm256_setzero_ps(); M];
                            for (i, v) in yv.iter_mut().enumerate() {
                                *v = _mm256_loadu_ps(yb.add(i * d.rs_y + j));
                            }
                            for (i, xa_i) in xa.iter().enumerate() {
                                let yp = yb.add(i * d.rs_y + j);
                                // Two FMA chains of four instead of one of eight.
                                let mut acc0 = yv[i];
                                let mut acc1 = _mm256_mul_ps(xa_i[1], wv[1]);
                                for r in (0..G).step_by(2) {
                                    acc0 = _mm256_fmadd_ps(xa_i[r], wv[r], acc0);
                                    if r > 0 {
                                        acc1 = _mm256_fmadd_ps(xa_i[r + 1], wv[r + 1], acc1);
                                    }
                                }
                                _mm256_storeu_ps(yp, _mm256_add_ps(acc0, acc1));
                            }
                        } else {
                            let w0 = W::load8(br[0].add(j));
                            for (i, xa_i) in xa.iter().enumerate() {
                                let yp = yb.add(i * d.rs_y + j);
                                let sum = _mm256_fmadd_ps(xa_i[0], w0, _mm256_loadu_ps(yp));
                                _mm256_storeu_ps(yp, sum);
                            }
                        }
                    }
                    j += 8;
                }
                for jj in cw8..d.cw {
                    for i in 0..M {
                        let mut s = 0.0;
                        for q in 0..rows {
                            // SAFETY: row `p + q < k`, column `jj < cw`, x row `i < m`.
                            s += unsafe {
                                let bv = (*b.add((p + q) * d.rs_b + jj)).to_f32();
                                *x.add(i * d.rs_x + p + q) * bv
                            };
                        }
                        // SAFETY: `i < m`, `jj < cw`.
                        unsafe { *yb.add(i * d.rs_y + jj) += d.alpha * s };
                    }
                }
                p += rows;
            }
        }
    };
}
pub(super) use kn_chunk_kernel;

kn_chunk_kernel!(
    /// The [K, N] GEMV chunk on AVX2's 16 registers (see [`kn_chunk_kernel`]).
    /// Two to four x rows take four B rows at a time: y rows a multiple of 4 KiB apart
    /// then share their L1 set with the B rows' lines, and y rows beside eight B rows
    /// overflow its eight ways. Zen 3, 4096 × 4096, GFLOP/s in alternated builds: 4 x
    /// rows 17–19 with eight, 22–31 with four (as fast as with unaliased y rows); 2 x
    /// rows 15–20 with eight, 19–24 with four (as fast as the [N, K] kernel in the same
    /// runs, which eight were 0.76–0.81× of); one row and 5–8 rows gained nothing.
    ///
    /// # Safety
    /// AVX2+FMA+F16C available; extents checked by `KnSpec::assert_fits`, `d.m == M`.
    #[cfg_attr(not(miri), target_feature(enable = "avx2,fma,f16c"))]
    #[cfg_attr(miri, target_feature(enable = "avx2,fma"))]
    kn_chunk_m
);
