//! Packing of A and B panels into the layouts the micro-kernels read.
//!
//! * A is packed in row panels of [`MR`] rows: for each `p` in `0..kc`, the `MR`
//!   values `A[i0..i0+MR, p]` are adjacent (rows past the matrix are zero).
//! * B is packed in column panels of [`NR`] columns: for each `p`, the `NR` values
//!   `B[p, j0..j0+NR]` are adjacent (columns past the matrix are zero).
//!
//! The same B layout serves the per-call packing and the pre-packed weights: a
//! pre-packed panel holds all `k` rows, so a `kc` block of it is the contiguous run
//! starting at row `pc` (see `PackedB`). Element conversion (f16/bf16 → f32) happens
//! here, on contiguous runs, with F16C on x86.

use super::{MR, NR, Weight};
use crate::isa::Isa;

use super::mat::MatRef;

/// Packs rows `i0..i0+mc`, columns `p0..p0+kc` of `a` into `out` as
/// `ceil(mc / MR)` panels of `MR × kc`.
pub(crate) fn pack_a(
    a: &MatRef<'_, f32>,
    i0: usize,
    mc: usize,
    p0: usize,
    kc: usize,
    out: &mut [f32],
) {
    for (t, ip) in (0..mc).step_by(MR).enumerate() {
        let mr = MR.min(mc - ip);
        let dst = &mut out[t * MR * kc..(t + 1) * MR * kc];
        if a.cs == 1 && mr == MR {
            // Row-major A, full panel: six read streams, one sequential write stream,
            // no bounds checks in the loop.
            let row = |i: usize| {
                let s = (i0 + ip + i) * a.rs + p0;
                &a.data[s..s + kc]
            };
            let (r0, r1, r2, r3, r4, r5) = (row(0), row(1), row(2), row(3), row(4), row(5));
            let it = dst
                .chunks_exact_mut(MR)
                .zip(r0)
                .zip(r1)
                .zip(r2)
                .zip(r3)
                .zip(r4)
                .zip(r5);
            for ((((((d, v0), v1), v2), v3), v4), v5) in it {
                d.copy_from_slice(&[*v0, *v1, *v2, *v3, *v4, *v5]);
            }
        } else if a.cs == 1 {
            let mut rows: [&[f32]; MR] = [&[]; MR];
            for (i, row) in rows.iter_mut().enumerate().take(mr) {
                let s = (i0 + ip + i) * a.rs + p0;
                *row = &a.data[s..s + kc];
            }
            for (p, d) in dst.chunks_exact_mut(MR).enumerate() {
                for i in 0..MR {
                    d[i] = if i < mr { rows[i][p] } else { 0.0 };
                }
            }
        } else {
            for (p, d) in dst.chunks_exact_mut(MR).enumerate() {
                for (i, v) in d.iter_mut().enumerate() {
                    *v = if i < mr {
                        a.data[(i0 + ip + i) * a.rs + (p0 + p) * a.cs]
                    } else {
                        0.0
                    };
                }
            }
        }
    }
}

/// Packs rows `p0..p0+kc`, columns `j0..j0+nr` (`nr ≤ NR`) of `b` into one panel
/// `dst` of `kc × NR` values, zero-padding columns `nr..NR`.
pub(crate) fn pack_b_panel<T: Weight>(
    isa: Isa,
    b: &MatRef<'_, T>,
    p0: usize,
    kc: usize,
    j0: usize,
    nr: usize,
    dst: &mut [f32],
) {
    let dst = &mut dst[..kc * NR];
    if b.cs == 1 {
        for (p, d) in dst.chunks_exact_mut(NR).enumerate() {
            let s = (p0 + p) * b.rs + j0;
            T::convert(isa, &b.data[s..s + nr], &mut d[..nr]);
            d[nr..].fill(0.0);
        }
    } else if b.rs == 1 {
        // Column-contiguous B (for example weights stored [N, K]): convert a run of
        // at most NR values of one column at a time through a small buffer.
        let mut buf = [0.0f32; 64];
        for j in 0..NR {
            if j >= nr {
                for d in dst.chunks_exact_mut(NR) {
                    d[j] = 0.0;
                }
                continue;
            }
            let col = &b.data[(j0 + j) * b.cs + p0..];
            for pp in (0..kc).step_by(buf.len()) {
                let len = buf.len().min(kc - pp);
                T::convert(isa, &col[pp..pp + len], &mut buf[..len]);
                for (q, v) in buf[..len].iter().enumerate() {
                    dst[(pp + q) * NR + j] = *v;
                }
            }
        }
    } else {
        for (p, d) in dst.chunks_exact_mut(NR).enumerate() {
            for (j, v) in d.iter_mut().enumerate() {
                *v = if j < nr {
                    b.data[(p0 + p) * b.rs + (j0 + j) * b.cs].to_f32()
                } else {
                    0.0
                };
            }
        }
    }
}

/// Rows per group when packing a row-major B: the group's rows are read front to
/// back (a few sequential streams) and each panel receives a contiguous
/// `PACK_B_ROWS × NR` run. Packing panel by panel instead reads 64 bytes per row at a
/// large stride, and row by row writes to every panel at a 16 KiB stride; both alias
/// in L1 (measured: B packing was 20% of a 64×256×256 product).
const PACK_B_ROWS: usize = 8;

/// A row-major f32 B seen from the block being packed: `B[p0 + p, j0 + j] =
/// data[(p0 + p)·rs + j0 + j]`.
pub(crate) struct B32<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub p0: usize,
    pub j0: usize,
}

/// Packs the `full` whole `NR`-column panels of a `kc`-row block of a row-major f32
/// B into `out`, `PACK_B_ROWS` rows at a time. Written as plain slice copies, so
/// the AVX2 instance (`Avx2::pack_b_rows_f32`) moves each 16-float row piece with
/// two 32-byte loads and stores instead of four 16-byte ones. No software
/// prefetch: asking for each piece's row eight rows on (into L1 or L2) took
/// 8×512×2048 from 45 to 35–37 GFLOP/s and 64×512×2048 from 84 to 80 on the Zen 3
/// and gained nothing measurable at 256³–2048³ (session 24).
#[inline(always)]
pub(crate) fn pack_b_rows_f32(b: &B32<'_>, kc: usize, full: usize, out: &mut [f32]) {
    for pg in (0..kc).step_by(PACK_B_ROWS) {
        let rows = PACK_B_ROWS.min(kc - pg);
        for t in 0..full {
            let dst = &mut out[(t * kc + pg) * NR..(t * kc + pg + rows) * NR];
            for (q, d) in dst.chunks_exact_mut(NR).enumerate() {
                let s = (b.p0 + pg + q) * b.rs + b.j0 + t * NR;
                d.copy_from_slice(&b.data[s..s + NR]);
            }
        }
    }
}

/// Packs columns `j0..j0+nc` (rows `p0..p0+kc`) of `b` as consecutive panels of
/// `kc × NR` into `out`.
pub(crate) fn pack_b_block<T: Weight>(
    isa: Isa,
    b: &MatRef<'_, T>,
    p0: usize,
    kc: usize,
    j0: usize,
    nc: usize,
    out: &mut [f32],
) {
    if b.cs == 1 {
        // Row-major B, in groups of PACK_B_ROWS rows (see there).
        let out = &mut out[..nc.div_ceil(NR) * kc * NR];
        let full = nc / NR;
        let rest = nc - full * NR;
        if let Some(bf) = T::as_f32(b.data) {
            let src = B32 {
                data: bf,
                rs: b.rs,
                p0,
                j0,
            };
            #[cfg(target_arch = "x86_64")]
            if let Some(k) = super::x86_avx2::Avx2::new(isa) {
                k.pack_b_rows_f32(&src, kc, full, out);
            } else {
                pack_b_rows_f32(&src, kc, full, out);
            }
            #[cfg(not(target_arch = "x86_64"))]
            pack_b_rows_f32(&src, kc, full, out);
        }
        for pg in (0..kc).step_by(PACK_B_ROWS) {
            let rows = PACK_B_ROWS.min(kc - pg);
            if T::as_f32(b.data).is_none() {
                for t in 0..full {
                    for p in pg..pg + rows {
                        let s = (p0 + p) * b.rs + j0 + t * NR;
                        let piece = &b.data[s..s + NR];
                        let d = &mut out[(t * kc + p) * NR..(t * kc + p + 1) * NR];
                        T::convert(isa, piece, d);
                    }
                }
            }
            if rest > 0 {
                for p in pg..pg + rows {
                    let s = (p0 + p) * b.rs + j0 + full * NR;
                    let d = &mut out[(full * kc + p) * NR..(full * kc + p + 1) * NR];
                    T::convert(isa, &b.data[s..s + rest], &mut d[..rest]);
                    d[rest..].fill(0.0);
                }
            }
        }
        return;
    }
    for (t, jp) in (0..nc).step_by(NR).enumerate() {
        let nr = NR.min(nc - jp);
        pack_b_panel(
            isa,
            b,
            p0,
            kc,
            j0 + jp,
            nr,
            &mut out[t * kc * NR..(t + 1) * kc * NR],
        );
    }
}
