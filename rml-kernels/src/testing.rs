//! Helpers shared by the kernel tests (vector kernels and GEMM alike): the size
//! sets, a small deterministic RNG, ULP distance, and a loop over every ISA path
//! this machine can run.
//!
//! Public so integration tests and benchmarks can use it; it is test support, not
//! part of the kernel API. Under Miri (`cfg(miri)`) the size sets shrink so the
//! interpreted runs stay short: use [`SIZES`] and [`test_len`] rather than literal
//! sizes.

/// True when the tests run under Miri (sizes are cut to keep it fast).
pub const MIRI: bool = cfg!(miri);

/// Lengths every kernel is tested at: 0, 1, primes, around the vector widths (4,
/// 8, 32) and a larger ragged one; fewer under Miri.
pub const SIZES: &[usize] = if MIRI {
    &[0, 1, 3, 8, 13]
} else {
    &[
        0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 127, 257, 1031,
    ]
};

/// `native` normally, `miri` under Miri: for loop counts and large sizes.
pub const fn test_len(native: usize, miri: usize) -> usize {
    if MIRI { miri } else { native }
}

/// SplitMix64: a tiny, seedable, deterministic generator for test data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub const fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fills `out` with uniform values in `[lo, hi)`.
    pub fn fill(&mut self, out: &mut [f32], lo: f32, hi: f32) {
        for v in out {
            *v = self.uniform(lo, hi);
        }
    }
}

/// Distance of `got` from the exact value `want`, in units in the last place of
/// the f32 nearest `want` (subnormal spacing below the normal range). NaN vs NaN
/// and equal infinities are 0; any other mismatch with NaN or infinity is `inf`.
pub fn ulp_error(got: f32, want: f64) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let w32 = want as f32;
    if want.is_infinite() || got.is_infinite() {
        return if got as f64 == want || (got == w32 && w32.is_infinite()) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let a = (w32.abs()).max(f32::MIN_POSITIVE);
    let ulp = (f32::from_bits(a.to_bits() + 1) - a) as f64;
    // For values that round to f32::MAX, use the spacing below it.
    let ulp = if ulp.is_finite() {
        ulp
    } else {
        (f32::MAX - f32::from_bits(0x7f7f_fffe)) as f64
    };
    (got as f64 - want).abs() / ulp
}

/// The process-wide lock every test that forces an ISA holds (`isa::force` is
/// global: two such tests interleaving would run each other's kernels).
#[cfg(feature = "std")]
pub fn isa_lock() -> std::sync::MutexGuard<'static, ()> {
    use std::sync::Mutex;
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` once per ISA this machine supports, with that ISA forced, holding
/// [`isa_lock`]; restores the detected ISA afterwards (also when `f` panics).
#[cfg(feature = "std")]
pub fn for_each_isa(mut f: impl FnMut(crate::isa::Isa)) {
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = crate::isa::force(crate::isa::detect());
        }
    }
    let _guard = isa_lock();
    let _restore = Restore;
    for isa in crate::isa::ALL_ISAS {
        if isa.is_supported() {
            crate::isa::force(isa).expect("supported ISA");
            f(isa);
        }
    }
}

/// Logistic sigmoid in f64, in the form that cannot overflow.
fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + libm::exp(-x))
    } else {
        let e = libm::exp(x);
        e / (1.0 + e)
    }
}

/// The f64 oracle for [`crate::elementwise::UnaryOp`]: libm formulas the vector kernels'
/// error bounds are measured against (tests and `examples/math_error.rs`).
pub fn unary_reference(op: crate::elementwise::UnaryOp, x: f64) -> f64 {
    use crate::elementwise::UnaryOp;
    match op {
        UnaryOp::Exp => libm::exp(x),
        UnaryOp::Log => libm::log(x),
        UnaryOp::Tanh => libm::tanh(x),
        UnaryOp::Sigmoid => sigmoid64(x),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Gelu => 0.5 * x * libm::erfc(-x / core::f64::consts::SQRT_2),
        UnaryOp::GeluTanh => {
            let u = libm::sqrt(2.0 / core::f64::consts::PI) * (x + 0.044715 * x * x * x);
            x / (1.0 + libm::exp(-2.0 * u))
        }
        UnaryOp::Silu => x * sigmoid64(x),
        UnaryOp::Softplus => x.max(0.0) + libm::log1p(libm::exp(-x.abs())),
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        UnaryOp::Sqrt => libm::sqrt(x),
        UnaryOp::Square => x * x,
        UnaryOp::Recip => 1.0 / x,
    }
}
