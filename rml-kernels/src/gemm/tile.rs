//! The micro-kernel contract shared by every ISA, and the portable (scalar) kernel.
//!
//! A micro-kernel computes one `mr × nr` tile (`mr ≤ MR`, `nr ≤ NR`; AVX-512's tile
//! pairs `mr ≤ PAIR_MR` and `2·NR` columns) of
//! `alpha · A·B + beta · C` with `kc ≥ 1` steps, reading
//! `A[i, p] = a[i·rs_a + p·cs_a]`, `B[p, j] = b[p·rs_b + j]` and writing
//! `C[i, j] = c[i·rs_c + j]`. With `beta == 0`, C is never read (NaN in C is
//! ignored). Packed operands are the special case `rs_a = 1, cs_a = MR, rs_b = NR`;
//! the small-M path passes the caller's strides directly.

use super::{MR, NR};

/// Most rows of an AVX-512 tile pair: eight on an A read in place (16 zmm
/// accumulators, two B vectors and a broadcast of 32 registers), where packed A
/// comes in `MR`-row panels. 64 rows are then eight tiles, not 9·6 + 2·5.
#[cfg(target_arch = "x86_64")]
pub(crate) const PAIR_MR: usize = 8;

/// Shape, strides and scalars of one micro-kernel call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileSpec {
    pub kc: usize,
    pub mr: usize,
    pub nr: usize,
    pub rs_a: usize,
    pub cs_a: usize,
    pub rs_b: usize,
    pub rs_c: usize,
    pub alpha: f32,
    pub beta: f32,
}

impl TileSpec {
    /// Whether both operands come packed (`rs_a = 1, cs_a = MR, rs_b = NR`): the
    /// SIMD kernels' constant-stride path.
    #[cfg(target_arch = "x86_64")]
    pub fn reads_packed(&self) -> bool {
        self.rs_a == 1 && self.cs_a == MR && self.rs_b == NR
    }

    /// Panics unless every element the tile touches lies inside the three slices.
    /// The drivers only build in-bounds tiles; this is the memory-safety fence in
    /// front of the SIMD kernels.
    pub fn assert_fits(&self, a: usize, b: usize, c: usize) {
        self.assert_fits_rows(a, b, c, MR)
    }

    /// [`assert_fits`](Self::assert_fits) for a kernel of at most `max_mr` rows.
    fn assert_fits_rows(&self, a: usize, b: usize, c: usize, max_mr: usize) {
        assert!(self.kc >= 1 && (1..=max_mr).contains(&self.mr) && (1..=NR).contains(&self.nr));
        let a_need = (self.mr - 1) * self.rs_a + (self.kc - 1) * self.cs_a + 1;
        let b_need = (self.kc - 1) * self.rs_b + self.nr;
        let c_need = (self.mr - 1) * self.rs_c + self.nr;
        assert!(
            a_need <= a && b_need <= b && c_need <= c,
            "gemm tile out of bounds"
        );
    }

    /// [`assert_fits`](Self::assert_fits) for a [`Column`] of full tiles
    /// (`mr == MR`).
    #[cfg(target_arch = "x86_64")]
    pub fn assert_fits_column(&self, a: usize, b: usize, c: usize, col: Column) {
        assert!(self.mr == MR, "a tile column holds full tiles");
        let (a_skip, c_skip) = self.last_tile(a, c, col);
        self.assert_fits(a - a_skip, b, c - c_skip)
    }

    /// [`assert_fits`](Self::assert_fits) for a [`Column`] of tile pairs (the
    /// AVX-512 kernel's): per tile, `nr == NR` columns from the B panel at 0 and as
    /// many from the one `b_step` floats further, into `2·NR` columns of C; at most
    /// [`PAIR_MR`] rows.
    #[cfg(target_arch = "x86_64")]
    pub fn assert_fits_pair_column(
        &self,
        a: usize,
        b: usize,
        c: usize,
        b_step: usize,
        col: Column,
    ) {
        assert!(self.nr == NR, "a tile pair holds two full panels");
        let (a_skip, c_skip) = self.last_tile(a, c, col);
        let (a, c) = (a - a_skip, c - c_skip);
        self.assert_fits_rows(a, b, c, PAIR_MR);
        let b_need = (self.kc - 1) * self.rs_b + NR;
        let c_need = (self.mr - 1) * self.rs_c + 2 * NR;
        assert!(
            b_step.checked_add(b_need).is_some_and(|need| need <= b) && c_need <= c,
            "gemm tile pair out of bounds"
        );
    }

    /// Where the last tile of `col` starts in A and in C, checked to lie inside
    /// slices of `a` and `c` elements. Each tile starts further on than the one
    /// before, so what the last one reads and writes bounds them all.
    #[cfg(target_arch = "x86_64")]
    fn last_tile(&self, a: usize, c: usize, col: Column) -> (usize, usize) {
        assert!(col.tiles >= 1, "a tile column holds at least one tile");
        let last = col.tiles - 1;
        let a_skip = last.checked_mul(col.a_step);
        let c_skip = last
            .checked_mul(self.mr)
            .and_then(|r| r.checked_mul(self.rs_c));
        match (a_skip, c_skip) {
            (Some(a_skip), Some(c_skip)) if a_skip <= a && c_skip <= c => (a_skip, c_skip),
            _ => panic!("gemm tile column out of bounds"),
        }
    }
}

/// `tiles` tiles of `mr` rows stacked down the rows over one B panel (or a pair):
/// tile `t` reads A from `t·a_step` and writes its `mr` rows of C from `t·mr·rs_c`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Column {
    pub tiles: usize,
    pub a_step: usize,
}

/// Stores `alpha · acc + beta · C` for the tile (C ignored when `beta == 0`).
pub(crate) fn store_tile(spec: &TileSpec, acc: &[[f32; NR]; MR], c: &mut [f32]) {
    for (i, acc_row) in acc.iter().enumerate().take(spec.mr) {
        let row = &mut c[i * spec.rs_c..i * spec.rs_c + spec.nr];
        if spec.beta == 0.0 {
            for (v, a) in row.iter_mut().zip(acc_row) {
                *v = spec.alpha * a;
            }
        } else {
            for (v, a) in row.iter_mut().zip(acc_row) {
                *v = spec.alpha * a + spec.beta * *v;
            }
        }
    }
}

/// The portable micro-kernel (any target; LLVM vectorizes the inner loop where it
/// can).
pub(crate) fn tile_scalar(spec: &TileSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
    spec.assert_fits(a.len(), b.len(), c.len());
    let mut acc = [[0.0f32; NR]; MR];
    for p in 0..spec.kc {
        let brow = &b[p * spec.rs_b..p * spec.rs_b + spec.nr];
        for (i, acc_row) in acc.iter_mut().enumerate().take(spec.mr) {
            let av = a[i * spec.rs_a + p * spec.cs_a];
            for (x, bv) in acc_row.iter_mut().zip(brow) {
                *x += av * bv;
            }
        }
    }
    store_tile(spec, &acc, c);
}
