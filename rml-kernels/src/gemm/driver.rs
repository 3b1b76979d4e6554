//! The blocked loop nest shared by every ISA. Inputs are already validated by the
//! public functions in `mod.rs`; the micro-kernel wrappers re-check each tile's
//! extents before any SIMD load or store.

use super::epilogue::Epilogue;
use super::mat::{MatMut, MatRef};
use super::pack::{pack_a, pack_b_block};
use super::tile::{Column, TileSpec, tile_scalar};
use super::{
    ALIGN_F32, GEMV_KN_MAX_M, KC, MC, MR, NC, NR, PackedA, PackedB, SMALL_M, STREAMED_B_MIN_BYTES,
    Weight,
};
use crate::isa::Isa;

/// Largest row-major A (in bytes) read in place by the micro-kernels (when `k ≤ KC`;
/// longer rows alias a tile's A rows with the B micro-panel in L1). A quarter of L2:
/// packing it would copy as much as the product reads.
const DIRECT_A_MAX_BYTES: usize = 256 << 10;

/// Largest row-contiguous f32 B (in bytes) read in place by the micro-kernels at any
/// M: half of L1, where packing it costs more than its reuse saves. Small M reads
/// larger ones in place too (see `run`).
const DIRECT_B_MAX_BYTES: usize = 16 << 10;

/// One way of the 8-way 32 KiB L1d, in f32: addresses this far apart share a set.
const L1_WAY_FLOATS: usize = 1024;

/// Columns of B packed at a time when small M packs B (a 256 KiB block at `KC`
/// rows, read from L2 by both row tiles). 8×512×2048 with B rows 8 KiB apart,
/// Zen 3, session 24: 256 columns 45–47 GFLOP/s against 128's 44–46 (and 2–7 %
/// ahead at 8×1024×1024, 8×512×4096, 8×4096×1024), once B packing no longer
/// prefetched (docs/kernels.md); with that prefetch, 128 columns had been best.
const SMALL_M_NC: usize = 256;

/// Above this many bytes of B, up to [`GEMV_KN_MAX_M`] rows stream B rows on AVX2:
/// past the 512 KiB L2, where the tiles of so few rows (at most eight accumulators,
/// too few to hide the FMA latency) read B in place down 16-column strips.
#[cfg(target_arch = "x86_64")]
const AVX2_STREAMED_FEW_ROWS_MIN_BYTES: usize = 512 << 10;

/// From this many bytes of B, every small M streams B rows on AVX2 (five to eight
/// rows in two passes): half of a 16 MiB L3, past which the one row tile of five or
/// six rows, walking its strips down K in place, runs at 15–20 GFLOP/s.
#[cfg(target_arch = "x86_64")]
const AVX2_STREAMED_B_MIN_BYTES: usize = 8 << 20;

/// Where A comes from.
pub(crate) enum ASrc<'a> {
    /// A plain matrix, read in place or packed block by block into scratch.
    Plain(MatRef<'a, f32>),
    /// Pre-packed by `pack_a`.
    Packed(PackedA<'a>),
}

/// Where B comes from.
pub(crate) enum BSrc<'a, T> {
    /// A plain matrix, packed block by block into scratch (or read in place).
    Plain(MatRef<'a, T>),
    /// Pre-packed by `pack_b`.
    Packed(PackedB<'a>),
}

/// The micro-kernel chosen for this call (an ISA proven available).
#[derive(Clone, Copy)]
pub(crate) enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2(super::x86_avx2::Avx2),
    #[cfg(target_arch = "x86_64")]
    Avx512(super::x86_avx512::Avx512),
    #[cfg(target_arch = "aarch64")]
    Neon(super::aarch64_neon::Neon),
}

impl Kernel {
    pub(crate) fn new(isa: Isa) -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = super::x86_avx512::Avx512::new(isa) {
            return Kernel::Avx512(k);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = super::x86_avx2::Avx2::new(isa) {
            return Kernel::Avx2(k);
        }
        #[cfg(target_arch = "aarch64")]
        if let Some(k) = super::aarch64_neon::Neon::new(isa) {
            return Kernel::Neon(k);
        }
        let _ = isa;
        Kernel::Scalar
    }

    #[inline]
    pub(crate) fn tile(self, spec: &TileSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
        match self {
            Kernel::Scalar => tile_scalar(spec, a, b, c),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2(k) => k.tile(spec, a, b, c),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512(k) => k.avx2().tile(spec, a, b, c),
            #[cfg(target_arch = "aarch64")]
            Kernel::Neon(k) => k.tile(spec, a, b, c),
        }
    }

    /// A [`Column`] of tiles: one call on AVX2 and AVX-512 (whose single-panel
    /// tiles are AVX2's) for full tiles of packed operands, a call per tile
    /// otherwise.
    fn tile_column(self, spec: &TileSpec, col: Column, a: &[f32], b: &[f32], c: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        let full_packed = spec.mr == MR && spec.nr == NR && spec.reads_packed();
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2(k) if full_packed => k.tile_column(spec, col, a, b, c),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512(k) if full_packed => k.avx2().tile_column(spec, col, a, b, c),
            _ => {
                for t in 0..col.tiles {
                    let (a, c) = (&a[t * col.a_step..], &mut c[t * spec.mr * spec.rs_c..]);
                    self.tile(spec, a, b, c);
                }
            }
        }
    }

    /// Columns one kernel call covers when at least that many are left and C's
    /// columns are contiguous: two B panels for AVX-512, one otherwise.
    fn width(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512(_) => 2 * NR,
            _ => NR,
        }
    }

    /// Whether `m ≤ SMALL_M` rows of a row-contiguous A over a row-contiguous B of
    /// `b_bytes` stream B rows ([`super::gemv_kn`]) instead of running the tiles.
    /// One row always does. On AVX2 (Zen 2, session 53; streamed against the tiles'
    /// GFLOP/s with B hot in cache / cold, B of 1 KiB to 16 MiB): two to four rows
    /// 0.92–4.9× / 1.6–3.6× once B outgrows the 512 KiB L2 (0.63–2.4× hot below it,
    /// where a B stays hot), five to eight rows 0.85–1.05× / 1.3–2.4× at 8 MiB and
    /// 0.91–2.7× / 1.3–2.9× past it (0.64–1.09× / 1.1–2.8× at 0.25–4 MiB). Other
    /// ISAs keep the rule measured on them (AVX-512's pair tiles hold twice the
    /// accumulators): up to [`GEMV_KN_MAX_M`] rows over a B past
    /// [`STREAMED_B_MIN_BYTES`].
    pub(crate) fn streams_b_rows(self, m: usize, b_bytes: usize) -> bool {
        m == 1
            || match self {
                #[cfg(target_arch = "x86_64")]
                Kernel::Avx2(_) => {
                    (m <= GEMV_KN_MAX_M && b_bytes > AVX2_STREAMED_FEW_ROWS_MIN_BYTES)
                        || b_bytes >= AVX2_STREAMED_B_MIN_BYTES
                }
                _ => m <= GEMV_KN_MAX_M && b_bytes > STREAMED_B_MIN_BYTES,
            }
    }

    /// Most rows of a tile pair on an A read in place: eight (`tile::PAIR_MR`)
    /// where the kernel takes two panels, `MR` otherwise.
    fn pair_rows(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512(_) => super::tile::PAIR_MR,
            _ => MR,
        }
    }

    /// A [`Column`] of side-by-side full tile pairs, the second B panel `b_step`
    /// floats after the first, into `2·NR` columns of C: one call where the kernel
    /// takes two panels ([`Kernel::width`]), two per tile otherwise.
    fn pair_column(
        self,
        spec: &TileSpec,
        col: Column,
        a: &[f32],
        b: &[f32],
        b_step: usize,
        c: &mut [f32],
    ) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512(k) => k.pair_column(spec, col, a, b, b_step, c),
            _ => {
                self.tile_column(spec, col, a, b, c);
                self.tile_column(spec, col, a, &b[b_step..], &mut c[NR..]);
            }
        }
    }
}

/// `C ← beta·C` (zero when `beta == 0`, ignoring what C held), then the epilogue:
/// the whole GEMM when `k == 0`.
fn scale_only(beta: f32, c: &mut MatMut<'_>, epi: &Epilogue<'_>) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            let v = &mut c.data[i * c.rs + j * c.cs];
            *v = if beta == 0.0 { 0.0 } else { beta * *v };
        }
    }
    if !epi.is_identity() {
        epi.apply_tile(c, 0, c.rows, 0, c.cols);
    }
}

/// Runs the product; all shapes, lengths and the scratch size are checked.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<T: Weight>(
    isa: Isa,
    alpha: f32,
    a: ASrc<'_>,
    b: BSrc<'_, T>,
    beta: f32,
    mut c: MatMut<'_>,
    epi: &Epilogue<'_>,
    scratch: &mut [f32],
) {
    let (m, n) = (c.rows, c.cols);
    let k = match &a {
        ASrc::Plain(a) => a.cols,
        ASrc::Packed(a) => a.k,
    };
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        return scale_only(beta, &mut c, epi);
    }
    let kern = Kernel::new(isa);
    // A small enough to be reused from L1/L2 with short rows is read in place
    // (packing it would cost as much as it saves); a large A is packed so the
    // kernel streams it contiguously from L2.
    // A pre-packed A is read in its panels.
    // A product one B panel wide uses each A value once: packing A would copy as
    // much as the product reads, so a row-contiguous A is read in place.
    let direct_a = match &a {
        ASrc::Plain(a) => {
            m <= SMALL_M || (a.cs == 1 && (n <= NR || (k <= KC && m * k * 4 <= DIRECT_A_MAX_BYTES)))
        }
        ASrc::Packed(_) => false,
    };
    // Small M, or a B of at most half of L1, reads a row-contiguous f32 B in place:
    // each B element is used by at most two row tiles, or B stays in L1 anyway, so
    // packing it would cost more than it saves. Not so for small M of two row
    // tiles (more rows than `Kernel::pair_rows`: six, or eight for AVX-512's pairs)
    // when B's rows lie a multiple of 4 KiB apart: a strip walk down K then hits
    // one L1 set (and a few L2 sets) row after row, so the second row tile fetches
    // the strip from L3 again; such a B is packed in narrow column blocks.
    // A small-M product over a B past the L3 share (`STREAMED_B_MIN_BYTES`) packs it
    // in whole `NC`-wide blocks, whose long row runs keep the prefetchers streaming.
    let small_m = m <= SMALL_M && k * n * core::mem::size_of::<T>() <= STREAMED_B_MIN_BYTES;
    let direct_b: Option<(&[f32], usize)> = match &b {
        BSrc::Plain(bm)
            if bm.cs == 1
                && (k * n * 4 <= DIRECT_B_MAX_BYTES
                    || (small_m
                        && (m <= kern.pair_rows() || !bm.rs.is_multiple_of(L1_WAY_FLOATS)))) =>
        {
            T::as_f32(bm.data).map(|d| (d, bm.rs))
        }
        _ => None,
    };
    let nc_block = if small_m { SMALL_M_NC } else { NC };
    // A plain A not read in place is packed block by block into scratch.
    let packs_a = matches!(a, ASrc::Plain(_)) && !direct_a;
    let a_len = if packs_a {
        super::packed_a_len(m, k)
    } else {
        0
    };
    // Start the packed blocks on a 64-byte boundary: with the caller's 4-byte (or
    // 16-byte) aligned scratch, half of the kernel's 32-byte B loads would straddle
    // cache lines. `*_scratch_len` include the slack.
    let skip = scratch.as_ptr().align_offset(64);
    let skip = if skip < ALIGN_F32 { skip } else { 0 };
    let start = skip.min(scratch.len());
    let scratch = &mut scratch[start..];
    let (sa, sb) = scratch.split_at_mut(a_len);
    let fuse = !epi.is_identity();

    for jc in (0..n).step_by(nc_block) {
        let nc = nc_block.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            // (buffer, offset of this block, step between NR panels, B row stride)
            let (bbuf, b_off, b_step, rs_b): (&[f32], usize, usize, usize) = match &b {
                BSrc::Packed(p) => (p.data, (jc / NR) * p.k * NR + pc * NR, p.k * NR, NR),
                BSrc::Plain(bm) => match direct_b {
                    Some((d, rs)) => (d, pc * rs + jc, NR, rs),
                    None => {
                        pack_b_block(isa, bm, pc, kc, jc, nc, sb);
                        (&*sb, 0, kc * NR, NR)
                    }
                },
            };
            let beta_k = if pc == 0 { beta } else { 1.0 };
            let last = pc + kc == k;
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                if let (ASrc::Plain(a), true) = (&a, packs_a) {
                    pack_a(a, ic, mc, pc, kc, sa);
                }
                let a_block = ABlock {
                    a: &a,
                    packed: sa,
                    direct: direct_a,
                    ic,
                    pc,
                    kc,
                };
                let (rs_a, cs_a) = a_block.strides();
                let mut jr = 0;
                while jr < nc {
                    // A pair of full panels where the kernel takes two, else one.
                    let pair = kern.width() > NR && c.cs == 1 && nc - jr >= 2 * NR;
                    let nr = if pair { 2 * NR } else { NR.min(nc - jr) };
                    let bs = &bbuf[b_off + (jr / NR) * b_step..];
                    // A tile of the block over this B panel (each tile sets its rows).
                    let panel = TileSpec {
                        kc,
                        mr: MR,
                        nr: nr.min(NR),
                        rs_a,
                        cs_a,
                        rs_b,
                        rs_c: c.rs,
                        alpha,
                        beta: beta_k,
                    };
                    let max_rows = if pair && direct_a {
                        kern.pair_rows()
                    } else {
                        MR
                    };
                    // A run of equal tiles goes down the rows in one call, unless the
                    // epilogue is due (it runs per tile, while the tile is in L1) or
                    // C's columns are strided (each tile goes through a dense one).
                    let per_tile = (last && fuse) || c.cs != 1;
                    for (ir, mr, tiles) in row_runs(mc, direct_a, max_rows) {
                        let spec = TileSpec { mr, ..panel };
                        let (abuf, a_off) = a_block.tile(ir);
                        // Tiles lie evenly spaced in A: the step is from the first to
                        // the second.
                        let a_step = a_block.tile(ir + mr).1 - a_off;
                        let (calls, col) = if per_tile {
                            (tiles, Column { tiles: 1, a_step })
                        } else {
                            (1, Column { tiles, a_step })
                        };
                        for t in 0..calls {
                            let (ci, cj) = (ic + ir + t * mr, jc + jr);
                            let a = &abuf[a_off + t * a_step..];
                            if c.cs == 1 {
                                let cs = &mut c.data[ci * c.rs + cj..];
                                if pair {
                                    kern.pair_column(&spec, col, a, bs, b_step, cs);
                                } else {
                                    kern.tile_column(&spec, col, a, bs, cs);
                                }
                            } else {
                                tile_through_dense(kern, &spec, a, bs, &mut c, (ci, cj));
                            }
                            if last && fuse {
                                epi.apply_tile(&mut c, ci, mr, cj, nr);
                            }
                        }
                    }
                    jr += nr;
                }
            }
        }
    }
}

/// One tile into a C whose columns are strided, through a dense `MR × NR` tile:
/// `spec.mr ≤ MR` rows, `spec.nr` columns from row `ci`, column `cj` of C (read only
/// when `spec.beta != 0`).
fn tile_through_dense(
    kern: Kernel,
    spec: &TileSpec,
    a: &[f32],
    b: &[f32],
    c: &mut MatMut<'_>,
    (ci, cj): (usize, usize),
) {
    let (rs, cs) = (c.rs, c.cs);
    let at = |i: usize, j: usize| (ci + i) * rs + (cj + j) * cs;
    let mut tmp = [0.0f32; MR * NR];
    if spec.beta != 0.0 {
        for i in 0..spec.mr {
            for j in 0..spec.nr {
                tmp[i * NR + j] = c.data[at(i, j)];
            }
        }
    }
    kern.tile(&TileSpec { rs_c: NR, ..*spec }, a, b, &mut tmp);
    for i in 0..spec.mr {
        for j in 0..spec.nr {
            c.data[at(i, j)] = tmp[i * NR + j];
        }
    }
}

/// A row block of A over one K block, as the micro-kernels read it.
struct ABlock<'s> {
    a: &'s ASrc<'s>,
    /// The block packed into scratch (a plain A not read in place).
    packed: &'s [f32],
    /// A plain A read in place.
    direct: bool,
    /// The block's first row.
    ic: usize,
    /// The K block's first column and length.
    pc: usize,
    kc: usize,
}

impl ABlock<'_> {
    /// `(rs_a, cs_a)`, the same for every tile of the block: the caller's in place,
    /// `(1, MR)` in `MR`-row panels.
    fn strides(&self) -> (usize, usize) {
        match (self.a, self.direct) {
            (ASrc::Plain(a), true) => (a.rs, a.cs),
            _ => (1, MR),
        }
    }

    /// `(buffer, offset)` of the row tile starting `ir` rows into the block.
    fn tile(&self, ir: usize) -> (&[f32], usize) {
        let (ic, pc) = (self.ic, self.pc);
        match (self.a, self.direct) {
            (ASrc::Plain(a), true) => (a.data, (ic + ir) * a.rs + pc * a.cs),
            // `MR`-row panels of `kc` steps, one after another.
            (ASrc::Plain(_), false) => (self.packed, (ir / MR) * MR * self.kc),
            // Panel `(ic + ir) / MR`, its `kc` block from column `pc`.
            (ASrc::Packed(p), _) => (p.data, (ic + ir) * p.k + pc * MR),
        }
    }
}

/// The row tiles of an `mc`-row block, as at most two runs `(first row, rows,
/// tiles)` of equal tiles. Packed A comes in `MR`-row panels: full ones, then the
/// rest. An A read in place is cut into tiles of at most `max_rows` that differ by at
/// most one row (64 = 9·6 + 2·5 at six, not 10·6 + 4): a short tile has too few
/// accumulators to hide the FMA latency.
fn row_runs(
    mc: usize,
    balanced: bool,
    max_rows: usize,
) -> impl Iterator<Item = (usize, usize, usize)> {
    let tiles = mc.div_ceil(max_rows);
    let (long, long_rows, short_rows) = if balanced {
        (mc % tiles, mc / tiles + 1, mc / tiles)
    } else {
        (mc / max_rows, max_rows, mc % max_rows)
    };
    let short = tiles - long;
    [(0, long_rows, long), (long * long_rows, short_rows, short)]
        .into_iter()
        .filter(|&(_, _, tiles)| tiles > 0)
}
