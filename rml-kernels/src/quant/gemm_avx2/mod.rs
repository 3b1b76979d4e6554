//! Register-blocked AVX2 small-M quantized GEMM (prompt processing).
//!
//! The GEMV row kernels unpack every weight block and convert its scales once per
//! activation row. Here a panel of `8·NV` weight rows × a chunk of K is unpacked
//! once into a stack buffer — quants as `u8`, 8 rows interleaved 4 bytes at a
//! time, scales as per-lane vectors — and every activation row then runs an integer
//! micro-kernel over it: 4 activation bytes broadcast to all lanes, one `maddubs`
//! per 8 weight rows × 4 elements, i16 sums widened only once per block (or
//! sub-block), one f32 FMA per block and 8 rows. docs/kernels.md has the µop count.
//!
//! Q8_0 runs on `vpdpbusd` where the CPU has AVX512-VNNI ([`vnni`]), with identical
//! results.
//!
//! The packing and the micro-kernels are compiled twice ([`dual_compiled`]): for
//! AVX2 and, for the `avx512` ISA, with AVX-512VL, whose EVEX encoding gives the same
//! ymm instructions 32 registers instead of 16 (fewer spills of the micro-kernels'
//! accumulators and constants). [`Tile`]'s methods take the choice as `const EVEX`.
//!
//! Loops (outside in): `MC` activation rows, `KC` elements of K, the panels of
//! weight rows, groups of `MR` activation rows. Output is written for the first K
//! chunk and accumulated for the others.

mod b32;
mod kquant;
pub(super) mod vnni;

use core::arch::x86_64::*;

use rml_core::DType;

use super::block_bytes;
use crate::isa::Isa;

/// Activation rows per chunk (bounds the activation table of [`b32`], 48 KiB).
const MC: usize = 128;
/// Elements of K per chunk: a multiple of every block size, so a packed panel of
/// 16 rows stays within [`PANEL_VECS`].
const KC: usize = 1024;
/// Most activation rows per micro-kernel call, over every weight type.
const MAX_MR: usize = 4;
/// Most weight rows per panel, over every weight type.
const MAX_ROWS: usize = 16;
/// 32-byte vectors of the panel buffer; every type asserts that its panel fits.
const PANEL_VECS: usize = 720;

/// A packed weight panel, aligned for vector loads.
#[repr(C, align(32))]
struct Panel([[u8; 32]; PANEL_VECS]);

/// One output tile: `MAX_MR` activation rows × `MAX_ROWS` weight rows.
type OutTile = [[f32; MAX_ROWS]; MAX_MR];

/// A weight format's packing and micro-kernel.
trait Tile {
    /// Weight rows per panel (8 per vector of accumulators).
    const ROWS: usize;
    /// Activation rows per micro-kernel call.
    const MR: usize;
    /// Per-chunk activation data the micro-kernel reads besides the blocks.
    type Table: Default;

    /// Fills `table` for activation rows `rows` (each `arb` bytes at `acts`) and
    /// weight blocks `blocks` of the chunk.
    fn table(
        table: &mut Self::Table,
        acts: &[u8],
        arb: usize,
        rows: core::ops::Range<usize>,
        blocks: core::ops::Range<usize>,
    );

    /// Packs blocks `blocks` of the `n` (≤ ROWS) weight rows at `w` (`rb` bytes
    /// apart) into `panel`; missing rows are zero. `EVEX` picks the AVX-512VL copy.
    ///
    /// # Safety
    /// AVX2/FMA/F16C present, and AVX-512F/VL for `EVEX`; `w` holds `n` rows of `rb`
    /// bytes covering `blocks`.
    unsafe fn pack<const EVEX: bool>(
        w: *const u8,
        rb: usize,
        n: usize,
        blocks: core::ops::Range<usize>,
        panel: &mut Panel,
    );

    /// `out[i][r]` = activation row `i0 + i` · panel row `r` over the packed blocks,
    /// for `i < mr` (≤ MR). `acts` points at the first block of the chunk of
    /// activation row `i0`; rows are `arb` bytes apart; `ti` is row `i0`'s index in
    /// the table. `EVEX` picks the AVX-512VL copy.
    ///
    /// # Safety
    /// AVX2/FMA/F16C present, and AVX-512F/VL for `EVEX`; `panel` was packed with `nb`
    /// blocks, the `mr` rows at `acts` hold those blocks.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const EVEX: bool>(
        mr: usize,
        panel: &Panel,
        nb: usize,
        acts: *const u8,
        arb: usize,
        table: &Self::Table,
        ti: usize,
        out: &mut OutTile,
    );
}

/// Runs the register-blocked GEMM when `isa` runs the AVX2 kernels on this CPU and
/// `weight` has a kernel here (the AVX-512VL copy for [`Isa::Avx512`]); returns false
/// otherwise (the caller runs the row kernels). `w` holds the computed weight rows
/// only; lengths were checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(
    isa: Isa,
    weight: DType,
    w: &[u8],
    k: usize,
    acts: &[u8],
    m: usize,
    out: &mut [f32],
    ldo: usize,
) -> bool {
    if !isa.has_avx2() || !isa.is_supported() {
        return false;
    }
    let args = Args { w, k, acts, m, ldo };
    let evex = isa == Isa::Avx512;
    // SAFETY: the CPU runs `isa` (checked above): AVX2/FMA/F16C, and for `evex` (the
    // avx512 ISA) AVX-512F/VL besides.
    unsafe {
        match weight {
            DType::Q4_0 => blocked::<b32::B32<b32::Q4_0>>(&args, weight, out, evex),
            DType::Q8_0 if vnni::supported() => blocked::<vnni::Q8Vnni>(&args, weight, out, evex),
            DType::Q8_0 => blocked::<b32::B32<b32::Q8_0>>(&args, weight, out, evex),
            DType::Q5_0 => blocked::<b32::B32<b32::Q5_0>>(&args, weight, out, evex),
            DType::Q4_1 => blocked::<b32::B32<b32::Q4_1>>(&args, weight, out, evex),
            DType::Q5_1 => blocked::<b32::B32<b32::Q5_1>>(&args, weight, out, evex),
            DType::Q4K => blocked::<kquant::KQuant<kquant::Q4K>>(&args, weight, out, evex),
            DType::Q6K => blocked::<kquant::KQuant<kquant::Q6K>>(&args, weight, out, evex),
            DType::Q5K => blocked::<kquant::KQuant<kquant::Q5K>>(&args, weight, out, evex),
            DType::Q2K => blocked::<kquant::KQuant<kquant::Q2K>>(&args, weight, out, evex),
            DType::Q3K => blocked::<kquant::KQuant<kquant::Q3K>>(&args, weight, out, evex),
            _ => return false,
        }
    }
    true
}

/// [`run`] on the AVX-512VL copies of the kernels when `evex`, else on the AVX2 ones.
///
/// # Safety
/// AVX2/FMA/F16C present, and AVX-512F/VL for `evex`.
unsafe fn blocked<T: Tile>(a: &Args<'_>, weight: DType, out: &mut [f32], evex: bool) {
    // SAFETY: forwarded from the caller.
    unsafe {
        if evex {
            run::<T, true>(a, weight, out)
        } else {
            run::<T, false>(a, weight, out)
        }
    }
}

/// Compiles the packing and micro-kernel functions given twice, into a module `avx2`
/// (`#[target_feature(enable = "avx2,fma,f16c")]`) and a module `evex` (with
/// `avx512f,avx512vl` besides: the same ymm instructions, EVEX-encoded, on 32
/// registers); [`dual_call`] calls one copy.
///
/// Each function is stamped whole rather than `#[inline(always)]` code inlined into
/// two `#[target_feature]` wrappers: compiled without the features and inlined
/// afterwards, the micro-kernels came out with spills (Q4_0 at 8 rows 420 µs against
/// 395 for the stamped copy, Zen 4).
macro_rules! dual_compiled {
    ($($item:item)*) => {
        /// The AVX2 copies (16 ymm registers).
        mod avx2 {
            #[allow(clippy::wildcard_imports)]
            use super::*;
            $(
                #[inline]
                #[target_feature(enable = "avx2,fma,f16c")]
                $item
            )*
        }

        /// The AVX-512VL copies (32 ymm registers).
        mod evex {
            #[allow(clippy::wildcard_imports)]
            use super::*;
            $(
                #[inline]
                #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
                $item
            )*
        }
    };
}
use dual_compiled;

/// `dual_call!(evex, f::<…>(args))` calls the [`dual_compiled`] function `f` of the
/// `evex` module when `evex`, else that of the `avx2` module.
macro_rules! dual_call {
    ($evex:expr, $($call:tt)*) => {
        if $evex { evex::$($call)* } else { avx2::$($call)* }
    };
}
use dual_call;

/// The operands of one call.
struct Args<'a> {
    w: &'a [u8],
    k: usize,
    acts: &'a [u8],
    m: usize,
    ldo: usize,
}

/// The blocked loop over activation rows, K chunks, weight panels and micro-kernel
/// calls, on the `EVEX` copies of the kernels or the AVX2 ones.
///
/// Out of line, so each copy has its own stack frame (one panel): inlined into
/// [`gemm`] beside the other copy, the AVX2 copy of Q4_0/Q4_1 ran 3–10 % slower.
///
/// # Safety
/// AVX2/FMA/F16C present, and AVX-512F/VL for `EVEX`.
#[inline(never)]
unsafe fn run<T: Tile, const EVEX: bool>(a: &Args<'_>, weight: DType, out: &mut [f32]) {
    let be = weight.block_size();
    let nbk = a.k / be;
    let rb = nbk * block_bytes(weight);
    let arb = a.acts.len() / a.m;
    let nr = a.w.len() / rb;
    let kcb = KC / be;
    let mut table = T::Table::default();
    let mut panel = Panel([[0; 32]; PANEL_VECS]);
    let mut tile: OutTile = [[0.0; MAX_ROWS]; MAX_MR];
    for m0 in (0..a.m).step_by(MC) {
        let m1 = (m0 + MC).min(a.m);
        for b0 in (0..nbk).step_by(kcb) {
            let b1 = (b0 + kcb).min(nbk);
            T::table(&mut table, a.acts, arb, m0..m1, b0..b1);
            for n0 in (0..nr).step_by(T::ROWS) {
                let n = (nr - n0).min(T::ROWS);
                // SAFETY: the CPU has the copy's features (the caller's contract);
                // rows n0..n0+n of `rb` bytes lie in `w`, b0..b1 < nbk blocks a row.
                unsafe { T::pack::<EVEX>(a.w.as_ptr().add(n0 * rb), rb, n, b0..b1, &mut panel) };
                for i0 in (m0..m1).step_by(T::MR) {
                    let mr = (m1 - i0).min(T::MR);
                    let off = i0 * arb + b0 * (arb / nbk);
                    // SAFETY: the panel holds b1 − b0 blocks; activation rows
                    // i0..i0+mr hold blocks b0..b1 at `off` + i·arb.
                    unsafe {
                        T::tile::<EVEX>(
                            mr,
                            &panel,
                            b1 - b0,
                            a.acts.as_ptr().add(off),
                            arb,
                            &table,
                            i0 - m0,
                            &mut tile,
                        )
                    };
                    for (i, t) in tile.iter().enumerate().take(mr) {
                        let o = &mut out[(i0 + i) * a.ldo + n0..][..n];
                        if b0 == 0 {
                            o.copy_from_slice(&t[..n]);
                        } else {
                            o.iter_mut().zip(t).for_each(|(o, t)| *o += t);
                        }
                    }
                }
            }
        }
    }
}

/// Transposes 8 rows of 8 dwords: output `j` holds dword `j` of rows 0..8, i.e. 4
/// consecutive elements of each of the 8 rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
    let t = [
        _mm256_unpacklo_epi32(r[0], r[1]),
        _mm256_unpackhi_epi32(r[0], r[1]),
        _mm256_unpacklo_epi32(r[2], r[3]),
        _mm256_unpackhi_epi32(r[2], r[3]),
        _mm256_unpacklo_epi32(r[4], r[5]),
        _mm256_unpackhi_epi32(r[4], r[5]),
        _mm256_unpacklo_epi32(r[6], r[7]),
        _mm256_unpackhi_epi32(r[6], r[7]),
    ];
    let u = [
        _mm256_unpacklo_epi64(t[0], t[2]),
        _mm256_unpackhi_epi64(t[0], t[2]),
        _mm256_unpacklo_epi64(t[1], t[3]),
        _mm256_unpackhi_epi64(t[1], t[3]),
        _mm256_unpacklo_epi64(t[4], t[6]),
        _mm256_unpackhi_epi64(t[4], t[6]),
        _mm256_unpacklo_epi64(t[5], t[7]),
        _mm256_unpackhi_epi64(t[5], t[7]),
    ];
    [
        _mm256_permute2x128_si256::<0x20>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x20>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x20>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x20>(u[3], u[7]),
        _mm256_permute2x128_si256::<0x31>(u[0], u[4]),
        _mm256_permute2x128_si256::<0x31>(u[1], u[5]),
        _mm256_permute2x128_si256::<0x31>(u[2], u[6]),
        _mm256_permute2x128_si256::<0x31>(u[3], u[7]),
    ]
}

/// Stores 8 rows' 32 quants (element order) at `dst`, interleaved: vector `j` (at
/// `dst + j·stride` vectors) holds elements `4j..4j+4` of each row.
///
/// # Safety
/// `dst + j·stride` is writable for 32 bytes, j < 8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_interleaved(rows: [__m256i; 8], dst: *mut [u8; 32], stride: usize) {
    for (j, v) in transpose8(rows).into_iter().enumerate() {
        // SAFETY: forwarded from the caller.
        unsafe { _mm256_storeu_si256(dst.add(j * stride).cast(), v) };
    }
}

/// Broadcasts the 4 bytes at `p` to all 8 dword lanes.
///
/// # Safety
/// 4 readable bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast4(p: *const u8) -> __m256i {
    // SAFETY: forwarded from the caller.
    _mm256_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}

/// Loads the 32-byte vector at `p` (the panel is 32-byte aligned).
///
/// # Safety
/// `p` lies in a [`Panel`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ldv(p: *const [u8; 32]) -> __m256i {
    // SAFETY: forwarded from the caller; every panel vector is 32-byte aligned.
    unsafe { _mm256_load_si256(p.cast()) }
}
