//! The portable SIMD vocabulary the vector kernels are written in.
//!
//! [`Simd`] is a vector of `f32` lanes with the handful of operations the math,
//! elementwise, softmax, norm, reduction and conversion kernels need. Each kernel is
//! written once as a generic `#[inline(always)]` function over `V: Simd` and
//! instantiated for [`scalar::F32x1`] (every target), `avx2::F32x8` and
//! `avx512::F32x16` (x86_64) and `neon::F32x4` (aarch64) by [`dispatch!`]. All intrinsics and every `unsafe`
//! block of the vector kernels live in the per-arch files of this module; the
//! generic kernels are safe code over slices.
//!
//! Loads and stores take slices and check their length (the check folds away after
//! `chunks_exact`), so no generic code handles raw pointers.

pub(crate) mod scalar;

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;

#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
pub(crate) mod neon;

/// Widest vector any path uses, in f32 lanes (sizes tail buffers).
pub(crate) const MAX_LANES: usize = 16;

/// A vector of `LANES` f32 values.
///
/// Semantics every implementation keeps: `max`/`min` propagate NaN from either
/// operand; `round` rounds half to even and is only used on `|x| < 2^22`; `pow2`
/// takes integral values in `[-126, 127]`; `exponent_mantissa` is only meaningful
/// for positive normal inputs; masks are produced by comparisons, which are false
/// when either side is NaN.
pub(crate) trait Simd: Copy {
    /// Number of f32 lanes.
    const LANES: usize;
    /// Whether [`Simd::lookup8`] is a single instruction (AVX2 `vpermps`): kernels
    /// with a table-driven form take it only then; the others keep their portable
    /// formula.
    const FAST_LOOKUP: bool;
    /// Whether [`Simd::lookup16`] and [`Simd::lookup32`] are single instructions
    /// too (AVX-512): the table forms of tanh and softplus, whose seven lookups per
    /// vector the AVX2 emulation makes slower than their formulas, are taken only
    /// then.
    const FAST_LOOKUP16: bool;
    /// The result of a lane-wise comparison.
    type Mask: Copy;

    /// Loads the first `LANES` elements of `s` (panics if `s` is shorter).
    fn load(s: &[f32]) -> Self;
    /// Stores to the first `LANES` elements of `s` (panics if `s` is shorter).
    fn store(self, s: &mut [f32]);
    /// Loads the `s.len() < LANES` elements of a partial vector (a head or a
    /// tail), the missing lanes set to `pad`. Portable through a stack buffer by
    /// default; AVX2 and AVX-512 use masked loads.
    #[inline(always)]
    fn load_tail(s: &[f32], pad: f32) -> Self {
        let mut buf = [pad; MAX_LANES];
        buf[..s.len()].copy_from_slice(s);
        Self::load(&buf)
    }
    /// Stores the first `s.len() < LANES` lanes to `s` (a partial vector).
    /// Portable through a stack buffer by default; AVX2 and AVX-512 use masked
    /// stores.
    #[inline(always)]
    fn store_tail(self, s: &mut [f32]) {
        let mut buf = [0.0f32; MAX_LANES];
        self.store(&mut buf);
        let n = s.len();
        s.copy_from_slice(&buf[..n]);
    }
    /// Loads `LANES` IEEE binary16 values (bit patterns) and widens them exactly.
    fn load_f16(s: &[u16]) -> Self;
    /// Narrows to IEEE binary16 with round-to-nearest-even and stores the bits.
    fn store_f16(self, s: &mut [u16]);
    /// Loads `LANES` bfloat16 values (bit patterns) and widens them exactly.
    fn load_bf16(s: &[u16]) -> Self;
    /// Loads `4 · LANES` bfloat16 values and widens them exactly into four
    /// vectors, in order: four [`Simd::load_bf16`] by default. NEON quiets NaNs
    /// on the 16-bit values of each whole register and then widens it into two,
    /// about half the operations; AVX2 widens each eight with one byte shuffle
    /// and quiets NaNs only when one of the four vectors (a cache line of
    /// bfloat16) holds one, as AVX-512 does for its four (two lines).
    #[inline(always)]
    fn load_bf16_quad(s: &[u16]) -> [Self; 4] {
        let l = Self::LANES;
        [
            Self::load_bf16(s),
            Self::load_bf16(&s[l..]),
            Self::load_bf16(&s[2 * l..]),
            Self::load_bf16(&s[3 * l..]),
        ]
    }
    /// Narrows to bfloat16 with round-to-nearest-even and stores the bits.
    fn store_bf16(self, s: &mut [u16]);
    /// Narrows four vectors to bfloat16 and stores the `4 · LANES` values in
    /// order: four [`Simd::store_bf16`] by default. AVX2 gathers each two
    /// vectors' halves with two byte shuffles and one reorder into one store;
    /// AVX2 and AVX-512 skip the NaN handling when none of the four vectors
    /// holds a NaN, as [`Simd::load_bf16_quad`] does.
    #[inline(always)]
    fn store_bf16_quad([a, b, c, d]: [Self; 4], s: &mut [u16]) {
        let l = Self::LANES;
        a.store_bf16(s);
        b.store_bf16(&mut s[l..]);
        c.store_bf16(&mut s[2 * l..]);
        d.store_bf16(&mut s[3 * l..]);
    }

    /// Every lane set to `v`.
    fn splat(v: f32) -> Self;
    /// Lane-wise `self + o`.
    fn add(self, o: Self) -> Self;
    /// Lane-wise `self - o`.
    fn sub(self, o: Self) -> Self;
    /// Lane-wise `self * o`.
    fn mul(self, o: Self) -> Self;
    /// Lane-wise `self / o`.
    fn div(self, o: Self) -> Self;
    /// `self * b + c`, fused where the ISA has FMA.
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// `self * b + c` rounded once, as an FMA gives it, for `c` such that `p + c`
    /// is exact, `p = self * b` rounded (`c = 0`; `-c` within a factor 2 of `p`,
    /// by Sterbenz; both on a grid fine enough for the difference). Where
    /// [`Simd::mul_add`] is not fused (the scalar path): `p + c`, then `p`'s
    /// rounding error ([`Simd::mul_err`]) added in the one rounding.
    #[inline(always)]
    fn mul_add_cancel(self, b: Self, c: Self) -> Self {
        self.mul_add(b, c)
    }
    /// The rounding error of `p = self * b`: exactly `self * b - p` (for finite
    /// products away from overflow and underflow).
    fn mul_err(self, b: Self, p: Self) -> Self;
    /// Lane-wise maximum, NaN if either lane is NaN.
    fn max(self, o: Self) -> Self;
    /// Lane-wise minimum, NaN if either lane is NaN.
    fn min(self, o: Self) -> Self;
    /// `min(self, bound)` for a bound that is never NaN; a NaN lane of `self`
    /// stays NaN (one instruction on AVX2, where [`Simd::min`] takes three).
    fn min_bound(self, bound: f32) -> Self;
    /// Lane-wise `self > o ? self : o`: the maximum where neither lane is NaN, `o`
    /// where either is NaN or they tie. One instruction on x86 (`maxps(self, o)`),
    /// where [`Simd::max`] takes three. Softmax's running maximum (`o` the
    /// accumulator, which so never turns NaN; a NaN shows up in the sum) and ReLU
    /// (`self` zero, `o` the input: NaN and `-0.0` stay).
    fn max_skip_nan(self, o: Self) -> Self;
    /// Absolute value (clears the sign bit).
    fn abs(self) -> Self;
    /// Square root (correctly rounded).
    fn sqrt(self) -> Self;
    /// Round to nearest integer, ties to even (`|self| < 2^22`).
    fn round(self) -> Self;
    /// Round toward minus infinity (`|self| < 2^22`).
    fn floor(self) -> Self;
    /// Lane-wise `self < o`.
    fn lt(self, o: Self) -> Self::Mask;
    /// Lane-wise `self == o`.
    fn eq(self, o: Self) -> Self::Mask;
    /// Lanes that are NaN.
    fn is_nan(self) -> Self::Mask;
    /// Whether any lane is NaN: one compare and a mask test.
    fn any_nan(self) -> bool;
    /// Whether every lane lies in `[lo, hi)` (false if any lane is NaN): the
    /// test that sends a whole vector down a kernel's common-case path. For a
    /// symmetric range (`lo == -hi`) the vector paths test `|x| < hi`, which also
    /// turns down a lane at exactly `lo`: that vector takes the full path, which
    /// gives the same values.
    fn all_in(self, lo: f32, hi: f32) -> bool;
    /// `m ? a : b` lane-wise.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// `2^self` for integral lanes in `[-126, 127]`.
    fn pow2(self) -> Self;
    /// Stores a whole vector to `s[..LANES]`, which must start on a `LANES * 4`-byte
    /// boundary, past the caches where the ISA can (AVX2 and AVX-512 `vmovntps`): for
    /// outputs too big to stay cached, it skips reading each line before writing
    /// it. A plain store by default. Panics if `s` is short or misaligned; a caller
    /// ends a run of these with [`store_fence`].
    #[inline(always)]
    fn store_stream(self, s: &mut [f32]) {
        self.store(s)
    }
    /// `self · 2^n` for integral lanes of `n` in `[-126, 127]`, rounded once (the
    /// product of a normal `self` with `n.pow2()`, which is what the default
    /// computes). AVX-512 does it in one `vscalefps` where the default takes four
    /// operations.
    #[inline(always)]
    fn mul_pow2(self, n: Self) -> Self {
        self.mul(n.pow2())
    }
    /// `self · 2^n` for integral lanes of `n` where `self` and the product are
    /// both normal f32s: then `n` only moves the exponent field, so AVX2 adds
    /// `n << 23` to the bit pattern (an integer add where [`Simd::mul_pow2`]
    /// builds `2^n` and multiplies: exp 8–11 % faster on the Zen 3), the same
    /// bits as the product. The other paths multiply.
    #[inline(always)]
    fn mul_pow2_normal(self, n: Self) -> Self {
        self.mul_pow2(n)
    }
    /// `self · 2^floor(n)` for `floor(n)` in `[-126, 127]`, rounded once: one
    /// `vscalefps` on AVX-512, which floors its exponent operand itself, where
    /// the default adds the [`Simd::floor`].
    #[inline(always)]
    fn mul_pow2_floor(self, n: Self) -> Self {
        self.mul_pow2(n.floor())
    }
    /// [`Simd::mul_pow2_floor`] where `self` and the product are both normal
    /// f32s: AVX2 adds `floor(n) << 23` to the bit pattern
    /// ([`Simd::mul_pow2_normal`]) where its `mul_pow2_floor` builds `2^floor(n)`
    /// and multiplies (GELU on uniform input 1.03x faster on the Zen 3, session
    /// 47); AVX-512 keeps its one `vscalefps`. The same bits either way.
    #[inline(always)]
    fn mul_pow2_floor_normal(self, n: Self) -> Self {
        self.mul_pow2_normal(n.floor())
    }
    /// For positive normal lanes: `(e, m)` with `self = 2^e · m`, `e` integral and
    /// `m` in `[√½, √2)` (split at the bit pattern [`SQRT_HALF_BITS`]: integer
    /// subtract, shift, mask and add, no compare).
    fn exponent_mantissa(self) -> (Self, Self);
    /// Eight-entry table lookup: each lane becomes `table[bits & 7]`, where `bits`
    /// is that lane's bit pattern (so `i + 1.5 * 2^23` selects entry `i` for
    /// integral `i` in `0..8`).
    fn lookup8(self, table: &[f32; 8]) -> Self;
    /// Sixteen-entry table lookup: each lane becomes `table[bits & 15]` (see
    /// [`Simd::lookup8`]). One `vpermps` on AVX-512; two and a blend on AVX2.
    fn lookup16(self, table: &[f32; 16]) -> Self;
    /// Thirty-two-entry table lookup: each lane becomes `table[bits & 31]` (see
    /// [`Simd::lookup8`]). One `vpermi2ps` on AVX-512, which costs what a
    /// `vpermps` does; four and three blends on AVX2.
    fn lookup32(self, table: &[f32; 32]) -> Self;
    /// Lane-wise the larger of `|self|` and `acc` compared as unsigned bit
    /// patterns (`acc` holding sign-free patterns): folded over values from 0, it
    /// ends a NaN pattern exactly when one of them was NaN, since every NaN's
    /// pattern exceeds infinity's. Integer operations, which issue beside the
    /// float ones: a NaN-propagating maximum's NaN test off the float pipes.
    fn abs_max_bits(self, acc: Self) -> Self;
    /// `|self|` with the sign bit of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// Sum of the lanes (in an ISA-specific order).
    fn reduce_sum(self) -> f32;
    /// Maximum of the lanes, NaN if any lane is NaN.
    fn reduce_max(self) -> f32;
    /// The f64 sums of four rows of `cols` values (`rows[i * cols..][..cols]`),
    /// each from `-0.0` adding its values in order: the bits of a sequential f64
    /// sum whatever the ISA. Portable by default; AVX2 transposes 4 × 4 blocks so
    /// the four rows add side by side in one register.
    #[inline(always)]
    fn sum4_rows_f64(rows: &[f32], cols: usize) -> [f64; 4] {
        let mut acc = [-0.0f64; 4];
        for c in 0..cols {
            for (i, a) in acc.iter_mut().enumerate() {
                *a += f64::from(rows[i * cols + c]);
            }
        }
        acc
    }
    /// The f64 sums of squared deviations `(v − means[i])²` of four rows of `cols`
    /// values, each from `-0.0` adding its terms in order (each term rounded once
    /// to f64 before it is added, no fused multiply-add): the bits of a sequential
    /// two-pass variance sum whatever the ISA. Portable by default; AVX2 transposes
    /// like [`Simd::sum4_rows_f64`].
    #[inline(always)]
    fn sum4_sq_dev_rows_f64(rows: &[f32], cols: usize, means: [f64; 4]) -> [f64; 4] {
        let mut acc = [-0.0f64; 4];
        for c in 0..cols {
            for (i, a) in acc.iter_mut().enumerate() {
                let d = f64::from(rows[i * cols + c]) - means[i];
                *a += d * d;
            }
        }
        acc
    }
    /// `dst[i] = f32(((f64(src[i]) − mean) · inv_std) · w + b)` over `min(len)`
    /// values, each operation rounded in f64 (no fused multiply-add) and the result
    /// once to f32: rml-core's normalization formula, the same bits whatever the
    /// ISA. Portable by default; AVX2 takes four f64 lanes at a time, AVX-512 eight.
    #[inline(always)]
    fn affine_f64(src: &[f32], dst: &mut [f32], [mean, inv_std, w, b]: [f64; 4]) {
        for (o, &v) in dst.iter_mut().zip(src) {
            *o = ((f64::from(v) - mean) * inv_std * w + b) as f32;
        }
    }
}

/// The f32 quiet bit: set in a NaN's bits, it makes the NaN quiet (as `half`
/// does when it converts one).
#[cfg(target_arch = "x86_64")]
pub(crate) const QUIET_BIT: i32 = 0x40_0000;

/// The bits of the f32 just below `√½` (0.70710677): `exponent_mantissa` subtracts
/// them so the mantissa lands in `[√½, √2)` and the exponent borrows as needed.
pub(crate) const SQRT_HALF_BITS: i32 = 0x3f35_04f3;

/// The two sixteen-entry halves of a [`Simd::lookup32`] table, for the ISAs that
/// build that lookup from sixteen-entry ones.
#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "aarch64", target_feature = "neon")
))]
#[inline(always)]
pub(crate) fn halves(table: &[f32; 32]) -> (&[f32; 16], &[f32; 16]) {
    let (low, rest) = table.split_first_chunk::<16>().expect("32 entries");
    (low, rest.first_chunk::<16>().expect("32 entries"))
}

/// How many leading elements of `out` lie before its first byte aligned to a
/// whole `V` vector of f32 (at most `out.len()`; 0 for one-lane types on f32, as
/// an `f32` is always 4-byte aligned). Elementwise kernels cover those with one
/// whole vector that overlaps the first aligned one ([`Edges`]), and the rest with
/// aligned vectors, so that none of their loops' stores straddles two cache lines:
/// on 16-byte-aligned buffers in L1, AVX-512 `add` ran at half speed (0.10 µs per
/// 2048 against 0.05 aligned, session 16).
#[inline(always)]
pub(crate) fn head_len<V: Simd, T>(out: &[T]) -> usize {
    let bytes = V::LANES * core::mem::size_of::<f32>();
    let past = out.as_ptr().addr() % bytes;
    if past == 0 {
        0
    } else {
        ((bytes - past) / core::mem::size_of::<T>()).min(out.len())
    }
}

/// Where a call over `n >= V::LANES` values of an output `y` puts its edge
/// vectors: a whole vector over `y[..LANES]` when `y` does not start on a vector
/// boundary (the head), and one over `y[n - LANES..]` when whole vectors from the
/// first boundary leave values over (the tail). Each overlaps the aligned whole
/// vectors, whose values it writes again, the same bits: every elementwise op's
/// value in a lane depends on that lane alone (the paired unary ops included).
/// A masked store costs far more than a plain one on AVX2 (Zen 3, 24 values one
/// past a boundary: ReLU 15 -> 7-8 ns, exp 26 -> 18 ns, against masked edges).
#[derive(Clone, Copy)]
pub(crate) struct Edges {
    /// Values before `y`'s first vector boundary (0 when it starts on one).
    pub(crate) head: usize,
    /// Where the tail vector starts, if there is one.
    pub(crate) tail: Option<usize>,
}

impl Edges {
    /// The edges of an output `y` (none on the one-lane path), or `None` when `y`
    /// is shorter than a vector: that goes through one padded vector.
    #[inline(always)]
    pub(crate) fn of<V: Simd>(y: &[f32]) -> Option<Self> {
        let (n, l) = (y.len(), V::LANES);
        let tail_at = n.checked_sub(l)?;
        let head = head_len::<V, _>(y);
        let tail = ((n - head) % l != 0).then_some(tail_at);
        Some(Edges { head, tail })
    }

    /// The edge vectors' values, `vector_at(at)` giving the kernel's vector for
    /// `y[at..at + LANES]`: taken after an out-of-place loop, or before an
    /// in-place one overwrites the input. The closure must be
    /// `#[inline(always)]`, as every closure between `dispatch!` and the
    /// intrinsics.
    #[inline(always)]
    pub(crate) fn values<V: Simd>(self, vector_at: impl Fn(usize) -> V) -> EdgeValues<V> {
        let head = if self.head > 0 {
            Some(vector_at(0))
        } else {
            None
        };
        let tail = self.tail.map(
            #[inline(always)]
            |at| (at, vector_at(at)),
        );
        EdgeValues { head, tail }
    }
}

/// The vectors of an output's [`Edges`], ready to store.
pub(crate) struct EdgeValues<V> {
    /// The head vector, for `y[..LANES]`.
    head: Option<V>,
    /// Where the tail vector goes, and the vector.
    tail: Option<(usize, V)>,
}

impl<V: Simd> EdgeValues<V> {
    /// Stores the vectors to the output `y` they were taken for.
    #[inline(always)]
    pub(crate) fn store(self, y: &mut [f32]) {
        if let Some(v) = self.head {
            v.store(y);
        }
        if let Some((at, v)) = self.tail {
            v.store(&mut y[at..]);
        }
    }
}

/// Stores a whole vector to `y`, past the caches ([`Simd::store_stream`]) when
/// `S` (then `y` must start on a vector boundary). A const parameter, so that the
/// kernels' loops carry no test per store: with a run-time flag inside them the
/// scalar ReLU, which LLVM then no longer auto-vectorized, ran 5× slower and the
/// AVX-512 `mul_row` 15 % slower.
#[inline(always)]
pub(crate) fn put<V: Simd, const S: bool>(v: V, y: &mut [f32]) {
    if S {
        v.store_stream(y);
    } else {
        v.store(y);
    }
}

/// Orders the non-temporal stores before it ([`Simd::store_stream`]) before every
/// later store, as the x86 memory model needs for another thread to see them in
/// order. A no-op off x86_64.
#[inline(always)]
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` is SSE, always present on x86_64; it touches no memory.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    }
}

/// Asks for the cache line holding `p` into L1 (a hint: never faults, whatever the
/// address, so `p` may lie past a slice's end). A no-op off x86_64.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint (SSE, always present on x86_64); it never faults,
    // whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How far ahead a streaming kernel asks for lines: 8 KiB. The hardware
/// prefetchers alone keep too few lines in flight for kernels that spend several
/// instructions per line (variance 64 MiB: 1.8–2.1 ms, with a 4 KiB prefetch
/// 1.46–2.0 against a `sum` of 1.1–1.7, session 16). 8 KiB against 4 KiB in
/// session 19, twelve alternated runs of 15 calls over 64 MiB: variance 90 % →
/// 101 % of `sum`'s rate on average, max 94 % → 97 % (the spread ±10 %). On the
/// Xeon of session 21 the streamed elementwise kernels gained most: 64 MiB exp
/// 17–19 → 27–29 GB/s, SiLU 15–17 → 24–26 (docs/kernels.md).
pub(crate) const STREAM_AHEAD_BYTES: usize = 8 << 10;

/// Bytes per cache line on every machine the kernels target.
const LINE_BYTES: usize = 64;

/// Asks for the lines [`STREAM_AHEAD_BYTES`] past each line of `block`: hints,
/// which may point into the rows after this one or past the buffer.
#[inline(always)]
pub(crate) fn prefetch_ahead<T>(block: &[T]) {
    let first = block.as_ptr().cast::<u8>();
    for line in (0..core::mem::size_of_val(block)).step_by(LINE_BYTES) {
        prefetch(first.wrapping_add(line + STREAM_AHEAD_BYTES));
    }
}

/// How many far-apart parts of its input a streamed loop reads side by side
/// ([`for_each_step_in_streams`]). A core keeps more DRAM reads in flight over
/// several sequential streams than over one, each followed by the hardware
/// prefetchers (`gemm_peers.sh`'s 64 MiB read on the Zen 2 of session 52: 18.3-18.8
/// GB/s as one stream, 26.7-27.5 as four), as the quantized GEMV's `four_streams`
/// and the f32 GEMV's weight rows use.
const STREAMS: usize = 4;

/// Input bytes each stream takes per turn of [`for_each_step_in_streams`]: a few
/// lines. A turn of a whole 4 KiB page lost the gain of four streams (64 MiB
/// f32 -> f16 on the Zen 2 of session 52: 4.4 ms, as one stream; 256 bytes to 1
/// KiB 3.0-3.1 ms, 128 bytes 3.25).
const STREAM_TURN_BYTES: usize = 512;

/// Calls `f(i)` once for every step `i` in `0..steps` of a streamed loop whose
/// steps each read `step_bytes` of input: the steps are cut into [`STREAMS`]
/// equal parts, walked in lockstep, [`STREAM_TURN_BYTES`] from each part in
/// turn; the steps left over at the end go in order. `f` must not depend on the
/// order of the steps.
#[inline(always)]
pub(crate) fn for_each_step_in_streams(steps: usize, step_bytes: usize, mut f: impl FnMut(usize)) {
    let turn = (STREAM_TURN_BYTES / step_bytes.max(1)).max(1);
    let part = steps / STREAMS / turn * turn;
    for first in (0..part).step_by(turn) {
        for stream in 0..STREAMS {
            let at = stream * part + first;
            for i in at..at + turn {
                f(i);
            }
        }
    }
    for i in STREAMS * part..steps {
        f(i);
    }
}

/// One pass's part of the requests for the lines [`STREAM_AHEAD_BYTES`] past a
/// row that several passes over it share: pass `p` of `n` asks for the `p`-th of
/// `n` equal parts, one line for every `n` it reads, so requests go out while
/// every pass runs (a row kernel whose later passes find the row in L1 would
/// otherwise leave memory idle while they run).
#[derive(Clone, Copy)]
pub(crate) struct AheadShare {
    /// The next line to ask for (a hint address, never read).
    next: *const u8,
    /// Bytes read since the last request.
    read: usize,
    /// Bytes read per request: `n` lines.
    per_request: usize,
}

impl AheadShare {
    /// Pass `pass` of `passes` (`pass < passes`) over `row`.
    #[inline(always)]
    pub(crate) fn new(row: &[f32], pass: usize, passes: usize) -> AheadShare {
        debug_assert!(pass < passes, "pass {pass} of {passes}");
        let part = core::mem::size_of_val(row) / passes;
        let first = row.as_ptr().cast::<u8>();
        AheadShare {
            next: first.wrapping_add(STREAM_AHEAD_BYTES + pass * part),
            read: 0,
            per_request: passes * LINE_BYTES,
        }
    }

    /// Asks for the current line again, then counts `bytes` more read and moves
    /// on (asking) by a line for each `n` lines' worth. Asking again at every
    /// call rather than once a line: 64 MiB layer norm, Zen 3, session 34, three
    /// alternated runs, 21.7-22.2 -> 23.3-25.0 GB/s (71-74 -> 78-88 % of `copy`);
    /// RMS norm and variance level.
    #[inline(always)]
    pub(crate) fn ask(&mut self, bytes: usize) {
        prefetch(self.next);
        self.read += bytes;
        while self.read >= self.per_request {
            self.next = self.next.wrapping_add(LINE_BYTES);
            prefetch(self.next);
            self.read -= self.per_request;
        }
    }
}

/// Calls `f` on each of `items` (each `item_bytes` of a row read), `ahead`'s
/// share, when given, first asking for its part. Two loops, so the one that asks
/// for nothing carries no request state (with it, the one-lane norms' scaling
/// loop was no longer vectorized and ran twice as slow).
#[inline(always)]
pub(crate) fn for_each_asking<T>(
    items: impl Iterator<Item = T>,
    ahead: Option<AheadShare>,
    item_bytes: usize,
    mut f: impl FnMut(T),
) {
    match ahead {
        Some(mut share) => {
            for item in items {
                share.ask(item_bytes);
                f(item);
            }
        }
        None => {
            for item in items {
                f(item);
            }
        }
    }
}

/// Correctly rounded f32 square root: the hardware instruction through `std`
/// when available, `libm` otherwise (libm's x86 version is inline assembly,
/// which Miri cannot run).
#[inline(always)]
pub(crate) fn sqrt_f32(x: f32) -> f32 {
    #[cfg(feature = "std")]
    {
        x.sqrt()
    }
    #[cfg(not(feature = "std"))]
    {
        libm::sqrtf(x)
    }
}

/// Lane-wise clamp of `x` to `[lo, hi]` that keeps NaN lanes NaN.
#[inline(always)]
pub(crate) fn clamp<V: Simd>(x: V, lo: f32, hi: f32) -> V {
    let (lo, hi) = (V::splat(lo), V::splat(hi));
    V::select(x.lt(lo), lo, V::select(hi.lt(x), hi, x))
}

/// Runs `$body` with the type alias `$V` bound to the active ISA's vector type.
///
/// `$body` is compiled once per ISA; the AVX2 instance runs inside a function with
/// `#[target_feature(enable = "avx2,fma,f16c")]`, the AVX-512 one inside one that
/// adds `avx512f`. Everything between that function
/// and the intrinsics (this closure, the generic kernels, the `Simd` methods) is
/// `#[inline(always)]`, so the intrinsics land in a function compiled with the
/// features and inline; a plain closure here would stay an out-of-line call and
/// leave every intrinsic a function call (10x slower than scalar).
macro_rules! dispatch {
    (|$V:ident| $body:expr) => {{
        match $crate::isa::active() {
            #[cfg(target_arch = "x86_64")]
            $crate::isa::Isa::Avx512 => {
                // SAFETY: `isa::active()` only returns `Avx512` when the CPU
                // supports AVX-512F, AVX2, FMA and F16C (`isa::force` refuses
                // unsupported ISAs).
                unsafe {
                    $crate::simd::avx512::run(
                        #[inline(always)]
                        || {
                            #[allow(dead_code)]
                            type $V = $crate::simd::avx512::F32x16;
                            $body
                        },
                    )
                }
            }
            #[cfg(target_arch = "x86_64")]
            isa if isa.has_avx2() => {
                // SAFETY: `isa::active()` only returns an ISA with the AVX2 kernels
                // (`Avx2`, `Avx512`) when the CPU supports AVX2, FMA and F16C
                // (`isa::force` refuses unsupported ISAs).
                unsafe {
                    $crate::simd::avx2::run(
                        #[inline(always)]
                        || {
                            #[allow(dead_code)]
                            type $V = $crate::simd::avx2::F32x8;
                            $body
                        },
                    )
                }
            }
            #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
            $crate::isa::Isa::Neon => {
                #[allow(dead_code)]
                type $V = $crate::simd::neon::F32x4;
                $body
            }
            _ => $crate::simd::scalar::run(
                #[inline(always)]
                || {
                    #[allow(dead_code)]
                    type $V = $crate::simd::scalar::F32x1;
                    $body
                },
            ),
        }
    }};
}
pub(crate) use dispatch;

/// [`dispatch!`] with the const `$S` bound to `$stream`: `true` for an output
/// written past the caches, which then ends with [`store_fence`]. One instance
/// of `$body` per ISA and per value of `$S`, so no loop tests the flag.
macro_rules! dispatch_streamed {
    ($stream:expr, |$V:ident, $S:ident| $body:expr) => {{
        if $stream {
            const $S: bool = true;
            $crate::simd::dispatch!(|$V| $body);
            $crate::simd::store_fence();
        } else {
            const $S: bool = false;
            $crate::simd::dispatch!(|$V| $body);
        }
    }};
}
pub(crate) use dispatch_streamed;

#[cfg(test)]
mod tests {
    use super::{STREAM_TURN_BYTES, STREAMS, for_each_step_in_streams};

    /// Every step is visited exactly once, whatever is left over, and the first
    /// turns come from the starts of the four parts.
    #[test]
    fn streamed_steps_visit_each_step_once_from_four_parts() {
        for step_bytes in [4, 64, 128, 512, 4096] {
            let turn = (STREAM_TURN_BYTES / step_bytes).max(1);
            for steps in [
                0,
                1,
                3,
                4,
                5,
                31,
                32,
                33,
                4 * turn - 1,
                4 * turn,
                4 * turn + 1,
                1000,
            ] {
                let mut seen = vec![0u32; steps];
                let mut order = Vec::new();
                for_each_step_in_streams(steps, step_bytes, |i| {
                    seen[i] += 1;
                    order.push(i);
                });
                assert!(
                    seen.iter().all(|&n| n == 1),
                    "{steps} steps of {step_bytes} B"
                );
                let part = steps / STREAMS / turn * turn;
                if part > 0 {
                    let starts: Vec<usize> = (0..STREAMS).map(|s| order[s * turn]).collect();
                    let want: Vec<usize> = (0..STREAMS).map(|s| s * part).collect();
                    assert_eq!(starts, want, "{steps} steps of {step_bytes} B");
                }
            }
        }
    }
}
