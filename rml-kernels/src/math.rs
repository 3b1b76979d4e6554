//! Vectorized transcendental functions on f32: exp, log, tanh, sigmoid, erf, GELU
//! (erf and tanh forms), SiLU and softplus.
//!
//! Every function is one branch-free algorithm written over `crate::simd::Simd`,
//! so the AVX2, NEON and scalar paths compute the same formulas (the scalar path
//! rounds `a * b + c` twice where the others fuse it), except erf, GELU, softplus
//! and tanh, which have table-driven forms for the ISAs whose eight-entry table
//! lookup is one instruction (AVX2, AVX-512; sixteen or thirty-two entries take
//! one on AVX-512, two and a blend or four and three blends on AVX2, which is why
//! the tanh and softplus tables run on AVX-512 only). The
//! slice functions here check lengths and dispatch through
//! [`crate::elementwise::unary`].
//!
//! # Algorithms
//! - `exp`: `x = n ln2 + r`, `|r| <= ln2/2` (Cody–Waite two-constant reduction),
//!   `e^r = 1 + r + r^2 q(r)` with a degree-4 near-minimax `q`, then scaling by
//!   `2^n` as two factors `2^n1 * 2^n2` so results near overflow and in the
//!   subnormal range are rounded once. Where the result is known to be normal
//!   (erf, tanh, GELU's and softplus' common cases) one factor `2^n` and no clamp.
//!   On AVX-512 instead `x = (k + j/16) ln2 + r`, `|r| <= ln2/32`, and `e^x =
//!   2^k 2^{j/16} e^r` with `2^{j/16}` from a sixteen-entry `vpermps` table and
//!   `e^r = 1 + r + r^2 q(r)`, `q` linear (`exp_sixteenths`): two multiplies and
//!   FMAs fewer per vector; in L1 on a Zen 4 exp 1.24x, SiLU and GELU-tanh 1.1x,
//!   softmax 1.12x faster, and sigmoid, which adds the table's low parts to stay
//!   within its bound, 1.08x (session 41).
//! - Common cases: exp, log, sigmoid, SiLU, GELU-tanh, softplus and GELU test
//!   each vector once (`all_in`, a compare and a mask test) and, when every lane
//!   lies in the range where no special value, subnormal or clamp can occur, run a
//!   shorter formula that gives the same values as the full one there (tested
//!   lane for lane); otherwise the full, branch-free formula. The one-lane scalar
//!   path always runs the full one. The unary kernels hand the functions two
//!   vectors at a time, and all of these but softplus (and GELU on AVX2 only)
//!   send both down the common case when both qualify (`pair_common`,
//!   `gelu_pair_v`): one straight run of code in which the two vectors'
//!   dependency chains interleave.
//! - `log`: `x = 2^e m`, `m` in `[sqrt(1/2), sqrt(2))` straight from the bits
//!   (subtract the bits of `sqrt(1/2)`, shift and mask: no compare or select),
//!   `s = (m-1)/(m+1)`, `log m = 2s + s^3 R(s^2)` (degree-3 `R`), plus `e ln2` in
//!   two parts; subnormals are prescaled by `2^23` and special values patched in
//!   by selects, both skipped in the common case (positive normal finite lanes).
//!   (A division-free `f - f^2/2 + f^3 P(f)`, `f = m - 1`, degree-7 `P`, was
//!   more accurate, 0.89 ULP, and no faster on AVX2: 1.50 µs against 1.28 µs per
//!   2048 values in one quiet A/B pair.)
//! - `tanh`: `E / (E + 2)` with `E = e^{2|x|} - 1 = 2^n (e^r - 1) + (2^n - 1)`
//!   (`e^r - 1 = r + r^2 q(r)`, exp's polynomial without its `1 +`, so `E` keeps
//!   full relative precision near 0 and one formula serves every `x`), `|x|`
//!   clamped to 10 (tanh rounds to 1 from 9.01), the sign restored, with one
//!   correction for the roundings of `E + 2` and the division. On AVX-512
//!   instead `c_i + t P_i(t)` on thirty-two intervals of width 0.3125 (`i =
//!   floor(|x| / 0.3125)`, `t >= 0`, `t P_i(t)` of degree 6, `tanh_table_v`):
//!   1.34 ULP, and 1.45x faster than the formula with session 18's sixteen
//!   intervals and degree 8, 1.07x faster again with these (session 40).
//! - `sigmoid`: `1 / (1 + e^{-|x|})`, or `e^{-|x|} / (1 + e^{-|x|})` for `x < 0`,
//!   with `e^{-|x|}` carried scaled by `2^24` so negative inputs keep full
//!   relative precision down to the subnormal range (also in SiLU, GELU-tanh).
//! - `erf`: `x Q(x^2)` (degree-7 `Q`) for `|x| < 0.875`, else
//!   `1 - e^{-x^2} H(|x| - 0.875)` (degree-8 `H`, `|x|` clamped to 4, where erf
//!   rounds to 1), sign restored: no division. On AVX2 instead `c_i + t P_i(t)`
//!   on eight intervals of `|x|` (`i = round(2|x|)`, `t = |x| - i/2`, degree-5
//!   `P_i`), the coefficients read from `vpermps` tables (`erf_table_v`).
//! - GELU (erf form) `x/2 (1 + erf(x/sqrt2))`: `x/2 erfc(|z|)` for `x < 0`, else
//!   `x - x/2 erfc(|z|)`, `z = x/sqrt2` (neither cancels, so one formula serves
//!   every `x`, with no small-argument branch), `erfc(a) = e^{-a^2} G(1 / (1 +
//!   a/2))` (degree-10 `G` fitted on `[0, 10]`, relative error 1.3e-8), and `x^2/2`
//!   carried as an exact two-float product so the negative tail is accurate
//!   relative to its tiny value. The common case `|x| < 12` drops the clamp and
//!   the `2^24` scaling that keeps subnormal results of the far negative tail
//!   accurate. On AVX2 and AVX-512, lanes with `|x| < 3.75` instead take
//!   `relu(x) - a Phi(-a)`, `a = |x|`, with the normal tail `Phi(-a)` from eight
//!   `vpermps` tables (degree-6 `P_i` per interval, `gelu_table_v`): no division,
//!   no exponential, 1.9x faster. A vector with a lane at `3.75 <= |x| < 12`
//!   takes the eight, then `e^{-a^2/2}` times the slowly varying `a Phi(-a)
//!   e^{a^2/2}`: on AVX-512 from eight more intervals of the table (sixteen in
//!   all, `gelu_wide_v`), on AVX2 from one degree-11 polynomial (`gelu_tail_v`,
//!   by Estrin's scheme), the exponential as `2^k 2^{j/16}` (a sixteen-entry
//!   table) times a cubic (`exp_neg_half_sq_v`).
//! - GELU (tanh form) `x/2 (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`:
//!   computed as the identical `x sigmoid(2u)`, free of cancellation, with `2u`
//!   formed as `t = 2u log2 e` (`log2 e` folded into the cubic's constants) and
//!   the exponential taken as `2^-|t|` (`Binary`): its reduction `t - round(t)`
//!   (or to sixteenths on AVX-512) is exact, a subtraction where `e^x` needs a
//!   multiply and two FMAs; 1.17x faster on AVX-512 (session 42), and no less
//!   accurate, since `t` carries the same rounding as `2u`.
//! - SiLU `x sigmoid(x)`; softplus `max(x, 0) + log1p(e^{-|x|})` with
//!   `log1p(t) = 2 atanh(s) = 2s + s^3 R(s^2)`, `s = t/(2+t)` in `[0, 1/3]`
//!   (degree-4 `R`): no rounded `1 + t` to correct and no exponent split (a NaN
//!   input reaches the result through `t`); the common case `|x| < 87` takes
//!   `e^{-|x|}` with one scaling. On AVX-512, lanes with `|x| < 15.5` instead
//!   take `log1p(e^{-|x|})` from sixteen-entry `vpermps` tables (unit
//!   intervals, degree-6 `P_i`, `softplus_table_v`): no division, no exponential,
//!   2x faster there (on AVX2, whose sixteen-entry lookups take three
//!   instructions, the formula is faster on the Zen 3).
//!
//! Polynomial coefficients come from `rml-kernels/scripts/fit_math.py` (Lawson
//! near-minimax fits in float64, rounded to f32).
//!
//! # Accuracy
//! The constants `*_MAX_ULP` state the largest error, in units in the last place of
//! the f32 result, against the correctly rounded value (from f64 libm), over every
//! input whose result is a normal f32 (measured values in each constant's doc, on
//! every 509th f32 bit pattern, AVX2 and scalar alike); `MATH_SUBNORMAL_ABS`
//! bounds the absolute error where the result is subnormal. Special values: NaN in gives NaN out;
//! infinities give the mathematical limits (`exp(-inf) = 0`, `log(0) = -inf`,
//! `log(x < 0) = NaN`, `tanh(±inf) = ±1`, …) except `gelu(-inf)`,
//! `gelu_tanh(-inf)` and `silu(-inf)`, which are NaN (`-inf * 0`) as in the
//! frameworks. The tests in this module and `examples/math_error.rs` measure these
//! bounds over dense sweeps of the f32 range on every path the machine runs.

use rml_core::Result;

use crate::elementwise::{UnaryOp, unary, unary_inplace};
use crate::simd::{Simd, clamp};

/// Max error of [`exp`] in ULP (normal results; measured 0.98).
pub const EXP_MAX_ULP: f64 = 1.5;
/// Max error of [`log`] in ULP (measured 1.86).
pub const LOG_MAX_ULP: f64 = 2.5;
/// Max error of [`tanh`] in ULP (measured 1.67; over every f32: 1.76 on the
/// scalar and AVX2 paths, 1.31 on AVX-512).
pub const TANH_MAX_ULP: f64 = 2.0;
/// Max error of [`sigmoid`] in ULP (normal results; measured 2.52).
pub const SIGMOID_MAX_ULP: f64 = 3.0;
/// Max error of [`erf`] in ULP (measured 2.44 on the portable paths, in the
/// `|x| < 0.875` branch; 2.21 with the AVX2 table form).
pub const ERF_MAX_ULP: f64 = 3.0;
/// Max error of [`gelu`] (erf form) in ULP (normal results; measured over every
/// f32: 7.88 on the scalar path, 5.75 on AVX2 and AVX-512).
pub const GELU_MAX_ULP: f64 = 8.0;
/// Max error of [`gelu_tanh`] in ULP for `x >= GELU_TANH_TAIL_X` (measured over
/// every f32: 13.7 on the scalar path, 12.0 on AVX2, 12.5 on AVX-512). The f32
/// rounding of `u` is amplified by `|u|` through the exponential, as in any f32
/// evaluation of this formula.
pub const GELU_TANH_MAX_ULP: f64 = 20.0;
/// Below this input, [`GELU_TANH_TAIL_MAX_ULP`] applies instead.
pub const GELU_TANH_TAIL_X: f32 = -3.0;
/// Max error of [`gelu_tanh`] in ULP for `x < GELU_TANH_TAIL_X`, normal results
/// (measured over every f32: 178 on the scalar path, 192 on AVX2, 193 on AVX-512).
pub const GELU_TANH_TAIL_MAX_ULP: f64 = 256.0;
/// Max error of [`silu`] in ULP (normal results; measured 2.97).
pub const SILU_MAX_ULP: f64 = 4.0;
/// Max error of [`softplus`] in ULP (normal results; measured 2.53; over every
/// f32: 2.80 on the scalar path, 1.62 on AVX-512's table form).
pub const SOFTPLUS_MAX_ULP: f64 = 4.0;
/// Max absolute error where a result is subnormal (measured 1.33e-43 for
/// [`gelu_tanh`] over every f32, at most 1e-44 for the others).
pub const MATH_SUBNORMAL_ABS: f64 = 1.5e-43;

// --- coefficients (from scripts/fit_math.py; highest degree first) ---------------

const EXP_Q: [f32; 5] = [
    0.001_381_461_3,
    0.008_368_71,
    0.041_668_39,
    0.166_665_21,
    0.499_999_94,
];
/// `e^r = 1 + r + r^2 q(r)`, `|r| <= ln2/32` ([`exp_sixteenths`]).
const EXP16_Q: [f32; 2] = [0.166_667_21, 0.500_016_15];
/// `2^r = 1 + r P(r)`, `|r| <= 1/2` ([`Binary`] arguments): relative error
/// 3.6e-9, `P(0)` being `ln2` rounded to f32.
const EXP2_P: [f32; 6] = [
    0.000_153_243_15,
    0.001_339_095_9,
    0.009_618_518,
    0.055_503_596,
    0.240_226_48,
    core::f32::consts::LN_2,
];
/// `2^r = 1 + r P(r)`, `|r| <= 1/32` ([`Binary`] arguments on the table).
const EXP2_16_P: [f32; 3] = [0.055_502_385, 0.240_234_29, core::f32::consts::LN_2];
const LOG_R: [f32; 4] = [0.235_814_72, 0.285_373_48, 0.400_003_34, 0.666_666_6];
/// `log1p(t) = 2s + s^3 R(s^2)`, `s = t/(2+t)` in `[0, 1/3]` (softplus).
const LOG1P_R: [f32; 5] = [
    0.242_895_54,
    0.214_307_41,
    0.286_165_95,
    0.399_988_9,
    0.666_666_75,
];
const ERF_Q: [f32; 8] = [
    -1.067_265_7e-5,
    0.000_115_545_75,
    -0.000_851_662_8,
    0.005_222_850_5,
    -0.026_865_952,
    0.112_837_9,
    -0.376_126_38,
    // The fitted constant term is 2/sqrt(pi) rounded to f32.
    core::f32::consts::FRAC_2_SQRT_PI,
];
/// `erfc(x) e^{x^2} = H(x - ERF_SMALL)` on `[ERF_SMALL, 4]` (erf only; GELU's wider
/// range uses `ERFC_G`).
const ERF_H: [f32; 9] = [
    0.000_145_499_91,
    -0.001_452_804,
    0.006_749_852_6,
    -0.020_502_11,
    0.048_722_487,
    -0.100_634_93,
    0.187_922_7,
    -0.315_832_35,
    0.464_311_57,
];
/// `tanh a = c_i + t P_i(t)` on thirty-two intervals of `a` (see `tanh_table_v`):
/// rows 0-5 are the coefficients of `P_i` (`t P_i(t)` of degree 6), highest
/// degree first, row 6 the `c_i` (`tanh(i TANH_STEP)` in f32); column `i` is
/// interval `i`, `[i TANH_STEP, (i + 1) TANH_STEP]`. Max relative error 3.6e-8 in
/// float64 with these f32 coefficients (`scripts/fit_math.py`), the rounding of
/// the `c_i`.
const TANH_T: [[f32; 32]; 7] = [
    [
        -0.044_491_787,
        -0.057_380_192,
        0.035_161_47,
        0.059_942_815,
        -0.002_505_493_1,
        0.019_635_92,
        0.034_524_22,
        0.000_670_963_2,
        0.015_493_746,
        -0.025_400_748,
        -0.041_706_353,
        0.006_155_45,
        -0.014_801_383,
        0.027_784_007,
        -0.020_203_711,
        0.018_157_72,
        -0.025_489_958,
        -0.032_380_916,
        -0.037_993_97,
        0.032_773_61,
        -0.003_849_331,
        0.005_779_830_3,
        0.014_781_162,
        -0.014_997_031,
        -0.022_479_843,
        -0.042_015_385,
        0.005_034_31,
        0.036_214_76,
        0.013_387_813,
        -0.038_347_2,
        -0.020_525_776,
        -0.010_986_656,
    ],
    [
        0.147_703_23,
        0.037_743_624,
        -0.093_338_78,
        -0.088_961_55,
        -0.006_157_334,
        -0.014_129_135,
        -0.025_411_487,
        0.003_025_349,
        -0.011_259_377,
        0.023_510_428,
        0.037_172_835,
        -0.004_974_236_2,
        0.013_149_864,
        -0.024_156_095,
        0.017_714_567,
        -0.015_829_926,
        0.022_287_987,
        0.028_299_99,
        0.033_199_44,
        -0.028_630_573,
        0.003_364_543_4,
        -0.005_048_873_4,
        -0.012_913_451_5,
        0.013_102_707,
        0.019_640_12,
        0.036_707_71,
        -0.004_398_298,
        -0.031_639_785,
        -0.011_696_541,
        0.033_502_858,
        0.017_932_788,
        0.009_598_73,
    ],
    [
        -0.002_153_625_7,
        0.159_734,
        0.148_524_66,
        0.054_436_292,
        -0.016_432_445,
        -0.020_913_811,
        -0.011_348_057,
        -0.013_219_621,
        -0.003_598_153_6,
        -0.011_422_382,
        -0.013_925_727,
        0.000_381_114_63,
        -0.004_791_116,
        0.007_280_25,
        -0.005_775_874_5,
        0.004_897_565,
        -0.007_087_817,
        -0.008_960_811,
        -0.010_494_075,
        0.009_028_678,
        -0.001_066_317_1,
        0.001_591_271_8,
        0.004_074_689,
        -0.004_136_338_4,
        -0.006_199_463_3,
        -0.011_586_424,
        0.001_388_153_9,
        0.009_986_564,
        0.003_691_806_7,
        -0.010_574_685,
        -0.005_660_221,
        -0.003_029_698_3,
    ],
    [
        -0.333_190_95,
        -0.219_705_69,
        -0.019_155_234,
        0.093_286_9,
        0.108_808_17,
        0.080_889_58,
        0.050_519_537,
        0.030_274_607,
        0.016_422_536,
        0.010_270_549,
        0.006_607_679_7,
        0.002_499_185,
        0.002_014_989,
        -0.000_245_244_5,
        0.001_171_182_1,
        -0.000_448_428_04,
        0.001_066_990_3,
        0.001_266_664_4,
        0.001_444_977_1,
        -0.001_198_050_6,
        0.000_152_808_22,
        -0.000_209_242_61,
        -0.000_545_846,
        0.000_558_222,
        0.000_835_282_55,
        0.001_560_078_1,
        -0.000_186_644_07,
        -0.001_344_193_8,
        -0.000_496_898_8,
        0.001_423_512_2,
        0.000_761_951_15,
        0.000_407_843_1,
    ],
    [
        -3.073_144_2e-6,
        -0.274_965_85,
        -0.383_954_73,
        -0.338_437_02,
        -0.237_894_94,
        -0.147_660_6,
        -0.085_608_5,
        -0.047_884_863,
        -0.026_207_082,
        -0.014_265_062,
        -0.007_737_532_3,
        -0.004_104_752,
        -0.002_234_121_6,
        -0.001_132_384_5,
        -0.000_669_998_5,
        -0.000_306_249_28,
        -0.000_227_724_25,
        -0.000_155_837_89,
        -0.000_120_840_035,
        0.000_031_514_723,
        -0.000_021_877_611,
        2.490_388e-6,
        0.000_022_501_985,
        -0.000_029_449_375,
        -0.000_041_940_36,
        -0.000_076_755_68,
        8.767_894_5e-6,
        0.000_065_406_69,
        0.000_024_148_374,
        -0.000_069_510_49,
        -0.000_037_206_282,
        -0.000_019_915_089,
    ],
    [
        1.0,
        0.908_366_8,
        0.692_419_1,
        0.461_138_96,
        0.280_414_88,
        0.161_265_39,
        0.089_797_616,
        0.049_108_42,
        0.026_592_214,
        0.014_322_774,
        0.007_692_120_5,
        0.004_124_657_3,
        0.002_209_903_2,
        0.001_183_457_4,
        0.000_633_659_5,
        0.000_339_201_9,
        0.000_181_602_15,
        0.000_097_222_63,
        0.000_052_056_035,
        0.000_027_824_506,
        0.000_014_909_358_5,
        7.974_613e-6,
        4.259_836_7e-6,
        2.297_130_8e-6,
        1.240_292_4e-6,
        6.861_331e-7,
        3.468_335_6e-7,
        1.607_691e-7,
        9.050_395e-8,
        8.222_17e-8,
        4.401_010_4e-8,
        2.355_691_1e-8,
    ],
    [
        0.0,
        0.302_709_73,
        0.554_599_7,
        0.734_071_5,
        0.848_283_65,
        0.915_824_53,
        0.954_045_24,
        0.975_136_7,
        0.986_614_3,
        0.992_812_8,
        0.996_146_56,
        0.997_935_53,
        0.998_894_45,
        0.999_408_07,
        0.999_683_14,
        0.999_830_37,
        0.999_909_2,
        0.999_951_4,
        0.999_974,
        0.999_986_05,
        0.999_992_55,
        0.999_996,
        0.999_997_85,
        0.999_998_87,
        0.999_999_4,
        0.999_999_7,
        0.999_999_8,
        0.999_999_9,
        0.999_999_94,
        1.0,
        1.0,
        1.0,
    ],
];
/// `log1p(e^{-a}) = c_i + t P_i(t)` on sixteen intervals of `a` (see
/// `softplus_table_v`): rows 0-5 are the coefficients of the degree-6 `P_i`,
/// highest degree first, row 6 the `c_i` (`log1p(e^{-i})` in f32); column `i` is
/// interval `i`, `[i - 1/2, i + 1/2]`. Max relative error 4.9e-8 in float64 with
/// these f32 coefficients (`scripts/fit_math.py`).
const SOFTPLUS_T: [[f32; 16]; 7] = [
    [
        0.000_447_730_8,
        -0.000_069_123_43,
        -0.000_119_485_87,
        -7.106_598_3e-6,
        0.000_013_132_558,
        7.382_768e-6,
        3.122_593_4e-6,
        1.226_659_6e-6,
        4.602_527_2e-7,
        1.692_763_6e-7,
        6.270_397e-8,
        2.315_123e-8,
        8.490_458e-9,
        3.074_511e-9,
        1.145_068_4e-9,
        4.237_264e-10,
    ],
    [
        -0.000_194_885_75,
        0.001_005_829_8,
        0.000_180_251_6,
        -0.000_152_803_91,
        -0.000_111_789_59,
        -0.000_050_628_412,
        -0.000_020_005_353,
        -7.554_548e-6,
        -2.806_875_7e-6,
        -1.036_708_2e-6,
        -3.814_858_8e-7,
        -1.402_808_5e-7,
        -5.166_719e-8,
        -1.900_539_1e-8,
        -6.999_828e-9,
        -2.571_653_3e-9,
    ],
    [
        -0.005_080_524_4,
        -0.001_471_172_3,
        0.001_619_000_9,
        0.001_372_027_1,
        0.000_657_608_3,
        0.000_265_974_3,
        0.000_101_275_335,
        0.000_037_720_107,
        0.000_013_940_683,
        5.137_863_4e-6,
        1.891_096_3e-6,
        6.958_091_5e-7,
        2.560_167e-7,
        9.421_081e-8,
        3.465_268_3e-8,
        1.274_631_96e-8,
    ],
    [
        -0.000_037_489_335,
        -0.015_140_25,
        -0.013_327_579,
        -0.006_815_609_5,
        -0.002_837_9,
        -0.001_093_140_6,
        -0.000_409_037_43,
        -0.000_151_420_65,
        -0.000_055_832_61,
        -0.000_020_556_93,
        -7.564_959_6e-6,
        -2.783_352_3e-6,
        -1.023_965e-6,
        -3.767_024_7e-7,
        -1.385_792_2e-7,
        -5.098_170_8e-8,
    ],
    [
        0.125_004_93,
        0.098_305_87,
        0.052_496_687,
        0.022_588_337,
        0.008_831_393,
        0.003_324_027_2,
        0.001_233_251_9,
        0.000_455_110_8,
        0.000_167_618_87,
        0.000_061_689_585,
        0.000_022_697_91,
        8.350_582e-6,
        3.072_068_5e-6,
        1.130_156e-6,
        4.157_630_5e-7,
        1.529_511_7e-7,
    ],
    [
        -0.500_000_24,
        -0.268_941_5,
        -0.119_202_93,
        -0.047_425_866,
        -0.017_986_21,
        -0.006_692_852,
        -0.002_472_623_3,
        -0.000_911_051_3,
        -0.000_335_350_2,
        -0.000_123_394_61,
        -0.000_045_397_872,
        -0.000_016_701_42,
        -6.144_175e-6,
        -2.260_324_4e-6,
        -8.315_282_7e-7,
        -3.059_022_3e-7,
    ],
    [
        // c_0 = log1p(e^0) = ln 2 rounded to f32.
        core::f32::consts::LN_2,
        0.313_261_7,
        0.126_928_02,
        0.048_587_352,
        0.018_149_927,
        0.006_715_348_5,
        0.002_475_685_2,
        0.000_911_466_4,
        0.000_335_406_37,
        0.000_123_402_19,
        0.000_045_398_898,
        0.000_016_701_56,
        6.144_193_3e-6,
        2.260_327e-6,
        8.315_284e-7,
        3.059_022_6e-7,
    ],
];
/// `erf a = c_i + t P_i(t)` on eight intervals (see `erf_table_v`): rows 0-5 are
/// the coefficients of `P_i`, highest degree first, row 6 the `c_i` (erf(i/2)
/// in f32); column `i` is interval `i`. Max relative error 5.3e-8 in float64
/// with these f32 coefficients.
const ERF_T: [[f32; 8]; 7] = [
    [
        -0.019_444_201,
        -0.049_170_81,
        0.003_955_439_7,
        0.017_908_396,
        -0.001_422_678,
        0.000_829_642_7,
        0.002_131_080_5,
        -2.782_538_1e-5,
    ],
    [
        0.118_207_06,
        0.007_835_806,
        -0.067_656_845,
        -0.015_223_33,
        0.012_849_548,
        0.006_150_576_3,
        0.001_041_282_2,
        8.970_303e-6,
    ],
    [
        -0.000_688_137,
        0.183_070_12,
        0.069_203_146,
        -0.044_463_567,
        -0.034_238_22,
        -0.008_964_669,
        -0.001_317_369_9,
        -3.407_416_8e-5,
    ],
    [
        -0.376_086_38,
        -0.146_476_27,
        0.138_327_91,
        0.138_757_21,
        0.048_226_12,
        0.008_349_706,
        0.000_788_807_35,
        4.534_143_6e-5,
    ],
    [
        -8.518_419_5e-7,
        -0.439_391_82,
        -0.415_107_07,
        -0.178_399_19,
        -0.041_339_51,
        -0.005_437_606,
        -0.000_411_278_5,
        -2.164_486_8e-5,
    ],
    [
        core::f32::consts::FRAC_2_SQRT_PI,
        0.878_782_63,
        0.415_107_7,
        0.118_930_29,
        0.020_666_987,
        0.002_178_284,
        0.000_139_253_05,
        5.399_427e-6,
    ],
    [
        0.0,
        0.520_499_9,
        0.842_700_8,
        0.966_105_16,
        0.995_322_3,
        0.999_593,
        0.999_977_9,
        0.999_999_3,
    ],
];
/// `erfc(a) e^{a^2} = G(1 / (1 + a/2))` on `[0, 10]`, relative error 1.3e-8.
const ERFC_G: [f32; 11] = [
    0.027_748_168,
    -0.209_857_23,
    0.640_463_9,
    -0.966_040_9,
    0.683_393_8,
    -0.251_372_84,
    0.285_076,
    0.223_446_34,
    0.285_290_06,
    0.281_844_17,
    8.570_462e-6,
];

const LOG2E: f32 = core::f32::consts::LOG2_E;
/// ln 2 split: the high part has 9 significant bits, so `n * LN2_HI` is exact for
/// `|n| <= 2^15`.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Below this, `e^x * 2^k` is under half the smallest subnormal for `k <= 24`.
const EXP_LO: f32 = -125.0;
const EXP_HI: f32 = 88.8;
/// `tanh` is 1 in f32 beyond this (`2 e^{-20} < 2^-25`).
const TANH_ONE: f32 = 10.0;
/// `tanh` corrects the roundings of `e^{2|x|} - 1 + 2` and of its division
/// below this `e^{2|x|} - 1` (|x| < 6.9); above, they cost at most a ULP.
const TANH_FIX_MAX: f32 = 1_048_576.0;
const ERF_SMALL: f32 = 0.875;
const FRAC_1_SQRT_2: f32 = core::f32::consts::FRAC_1_SQRT_2;

#[inline(always)]
fn horner<V: Simd>(x: V, c: &[f32]) -> V {
    let mut acc = V::splat(c[0]);
    for &k in &c[1..] {
        acc = acc.mul_add(x, V::splat(k));
    }
    acc
}

/// `e^x`.
#[inline(always)]
pub(crate) fn exp_v<V: Simd>(x: V) -> V {
    exp_in::<V, Natural>(x)
}

/// The exponential of `a` in unit `U` (`e^a`, or `2^a` for a caller whose
/// argument comes in binary units at no cost: softmax, whose one FMA `x log2 e -
/// max log2 e` replaces `x - max`). Every input, on every path.
#[inline(always)]
pub(crate) fn exp_in<V: Simd, U: ExpUnit>(a: V) -> V {
    if exp_is_normal::<V, U>(a) {
        return exp_normal_v::<V, U, false>(a);
    }
    exp_scaled_v::<V, U, false>(a, 0.0)
}

/// [`exp_in`]'s common case: every result a normal f32, so one scaling by 2^n and
/// no clamp (the same bits: both scalings of the full path are exact there).
#[inline(always)]
fn exp_is_normal<V: Simd, U: ExpUnit>(a: V) -> bool {
    let normal = -EXP_NORMAL_LO * U::E;
    common_case(a, -normal, normal)
}

/// `(n, e^r - 1)` with `x = n ln2 + r`, `|r| <= ln2/2` (for `|x| < 126`):
/// `e^r - 1 = r + r^2 q(r)`.
#[inline(always)]
fn expm1_reduce<V: Simd>(x: V) -> (V, V) {
    let n = x.mul(V::splat(LOG2E)).round();
    let r = n.mul_add(V::splat(-LN2_HI), x);
    let r = n.mul_add(V::splat(-LN2_LO), r);
    (n, r.mul(r).mul_add(horner(r, &EXP_Q), r))
}

/// The unit an exponential's argument `a` comes in: [`Natural`] for `e^a`,
/// [`Binary`] for `2^a`. Each reduces `a` to `2^n e^r` for the polynomial, or
/// on AVX-512's table to `2^{k + j/16} e^r`.
pub(crate) trait ExpUnit {
    /// The argument that stands for `e^1` (`1`, or `log2 e`): range limits
    /// written for natural arguments scale by it.
    const E: f32;
    /// `(n, e^r)` with `a` standing for `2^n e^r`, `n` integral, `|r| <= ln2/2`
    /// (for `|a| < 126 E`).
    fn reduce<V: Simd>(a: V) -> (V, V);
    /// `(s, w, e^r - 1)` with `a` standing for `2^w e^r`, `w = k + j/16`,
    /// `|r| <= ln2/32`, and `s = w + ROUND_SIXTEENTHS` holding `j` in its low
    /// bits for the table (see [`exp_sixteenths`]).
    fn reduce_sixteenths<V: Simd>(a: V) -> (V, V, V);
}

/// Natural arguments, `e^x`: `r = x - w ln2` by two FMAs on the two parts of
/// `ln2` (Cody–Waite), `w` rounded from `x log2 e`.
pub(crate) struct Natural;

/// Binary arguments, `2^t`, for a caller that can fold `log2 e` into its own
/// constants at no cost (GELU-tanh, where `t = 2u log2 e` is no less accurate
/// than `2u`; softmax, through [`exp_in`]): `r = t - w` is exact, so the
/// reduction is a subtraction where [`Natural`]'s is a multiply and two FMAs
/// (AVX-512 GELU-tanh 1.17x faster in L1 on a Zen 4, session 42).
pub(crate) struct Binary;

impl ExpUnit for Natural {
    const E: f32 = 1.0;

    #[inline(always)]
    fn reduce<V: Simd>(x: V) -> (V, V) {
        let (n, m) = expm1_reduce(x);
        (n, m.add(V::splat(1.0)))
    }

    #[inline(always)]
    fn reduce_sixteenths<V: Simd>(x: V) -> (V, V, V) {
        let s = x.mul_add(V::splat(LOG2E), V::splat(ROUND_SIXTEENTHS));
        let w = s.sub(V::splat(ROUND_SIXTEENTHS));
        let r = w.mul_add(V::splat(-LN2_HI), x);
        let r = w.mul_add(V::splat(-LN2_LO), r);
        (s, w, r.mul(r).mul_add(horner(r, &EXP16_Q), r))
    }
}

impl ExpUnit for Binary {
    const E: f32 = LOG2E;

    #[inline(always)]
    fn reduce<V: Simd>(t: V) -> (V, V) {
        let n = t.round();
        let r = t.sub(n);
        (n, r.mul_add(horner(r, &EXP2_P), V::splat(1.0)))
    }

    #[inline(always)]
    fn reduce_sixteenths<V: Simd>(t: V) -> (V, V, V) {
        let s = t.add(V::splat(ROUND_SIXTEENTHS));
        let w = s.sub(V::splat(ROUND_SIXTEENTHS));
        let r = t.sub(w);
        (s, w, r.mul(horner(r, &EXP2_16_P)))
    }
}

/// The exponential of `a` (unit `U`) for `a` in `[EXP_NORMAL_LO, 88] U::E`,
/// where it is a normal f32: no clamp and a single scaling by `2^n`, the same
/// value as [`exp_scaled_v`] with `k = 0` there (both scalings are exact on
/// normal results). NaN gives NaN. On AVX-512 from [`exp_sixteenths`]
/// (`LOW_PARTS` is its).
#[inline(always)]
fn exp_normal_v<V: Simd, U: ExpUnit, const LOW_PARTS: bool>(a: V) -> V {
    if V::FAST_LOOKUP16 {
        let (w, p) = exp_sixteenths::<V, U, LOW_PARTS>(a);
        return p.mul_pow2_floor(w);
    }
    let (n, p) = U::reduce(a);
    p.mul_pow2_normal(n)
}

/// `(w, p)` with `e^x = 2^floor(w) p` (for `|x| < 126`; `x` in unit `U`),
/// where [`Simd::lookup16`] is one instruction (AVX-512): `w = round(x log2 e)`
/// to a multiple of 1/16, `k + j/16` (`j` in 0..16 from the low bits of `w +
/// ROUND_SIXTEENTHS`), `r = x - w ln2` (`|r| <= ln2/32`; `16w` has 11 bits and
/// `LN2_HI` 9, so `w LN2_HI` and the first FMA are exact) and `p = 2^{j/16}
/// e^r = T + T (e^r - 1)`, `T` from [`EXP2_SIXTEENTHS`], `e^r - 1 = r + r^2
/// q(r)` with `q` linear ([`EXP16_Q`]); for [`Binary`] `r = t - w`, exact, and
/// `2^r - 1 = r P(r)` ([`EXP2_16_P`]). Against [`Natural::reduce`]: seven
/// multiplies and FMAs where it has nine, a subtraction and a lookup where it
/// has a round and an add (AVX-512 exp 1.25x faster on a Zen 4, session 41).
/// `T`'s rounding leaves exp within 0.99 ULP over every f32 (1.01 with
/// [`Natural::reduce`]); with `LOW_PARTS`, `T + T_lo` ([`EXP2_SIXTEENTHS_LO`]) is
/// `2^{j/16}` to twice f32's precision and `p = T + (T (e^r - 1) + T_lo)`: 0.57
/// ULP, for one lookup and one add more (exp then 1.15x faster than with
/// [`Natural::reduce`], not 1.25x).
#[inline(always)]
fn exp_sixteenths<V: Simd, U: ExpUnit, const LOW_PARTS: bool>(x: V) -> (V, V) {
    let (s, w, m) = U::reduce_sixteenths(x);
    if LOW_PARTS {
        let t = s.lookup16(&EXP2_SIXTEENTHS);
        return (w, t.mul_add(m, s.lookup16(&EXP2_SIXTEENTHS_LO)).add(t));
    }
    (w, times_two_sixteenths(s, m))
}

/// `2^{j/16} (1 + m)` as `T + T m`, one FMA, `T` from [`EXP2_SIXTEENTHS`] at the
/// sixteenths `j` held in the low bits of `s` (a sum with [`ROUND_SIXTEENTHS`]).
#[inline(always)]
fn times_two_sixteenths<V: Simd>(s: V, m: V) -> V {
    let t = s.lookup16(&EXP2_SIXTEENTHS);
    t.mul_add(m, t)
}

/// `e^x - 1` for `x` in `[0, 88]`, with full relative precision near 0: `2^n
/// (e^r - 1) + (2^n - 1)`, where `e^r - 1 = r + r^2 q(r)` has no rounded `1 +`
/// and `2^n - 1` is exact. NaN gives NaN.
#[inline(always)]
fn expm1_normal_v<V: Simd>(x: V) -> V {
    let (n, m) = expm1_reduce(x);
    let p = n.pow2();
    p.mul_add(m, p.sub(V::splat(1.0)))
}

/// The lower end of [`exp_normal_v`]'s range (`n = round(x log2 e) >= -126`).
const EXP_NORMAL_LO: f32 = -87.0;

/// Whether a kernel may take its common-case path for the vector `x`: every lane
/// in `[lo, hi)`, where the common-case formula gives the same values as the full
/// one. The one-lane scalar type always runs the full path, which is branch-free,
/// so LLVM keeps auto-vectorizing its loop (a branch per element would stop that).
#[inline(always)]
fn common_case<V: Simd>(x: V, lo: f32, hi: f32) -> bool {
    V::LANES > 1 && x.all_in(lo, hi)
}

/// `e^x * 2^k` (`x` in unit `U`) for integral `k` in `[0, 50]`, rounded once:
/// lets callers form tiny results whose intermediate `e^x` would be subnormal.
/// On AVX-512 from [`exp_sixteenths`] (`LOW_PARTS` is its).
#[inline(always)]
fn exp_scaled_v<V: Simd, U: ExpUnit, const LOW_PARTS: bool>(x: V, k: f32) -> V {
    let x = clamp(x, EXP_LO * U::E, EXP_HI * U::E);
    let (n, p) = if V::FAST_LOOKUP16 {
        let (w, p) = exp_sixteenths::<V, U, LOW_PARTS>(x);
        (w.floor(), p)
    } else {
        U::reduce(x)
    };
    let n1 = n.mul(V::splat(0.5)).round();
    let n2 = n.sub(n1).add(V::splat(k));
    p.mul_pow2(n1).mul_pow2(n2)
}

/// `(e, ln m)` with `x = 2^e m`, for positive normal finite `x` (no special
/// values: the caller handles them, or cannot meet them).
#[inline(always)]
fn log_parts<V: Simd>(x: V) -> (V, V) {
    let (e, m) = x.exponent_mantissa();
    let one = V::splat(1.0);
    let s = m.sub(one).div(m.add(one));
    let u = s.mul(s);
    (e, s.mul(u).mul_add(horner(u, &LOG_R), s.add(s)))
}

/// `e ln 2 + lm`, with `ln 2` in two parts.
#[inline(always)]
fn log_join<V: Simd>(e: V, lm: V) -> V {
    e.mul_add(V::splat(LN2_HI), e.mul_add(V::splat(LN2_LO), lm))
}

/// [`log_v`]'s common case: every lane positive, normal and finite, so no lane
/// needs the subnormal prescale or a special value.
#[inline(always)]
fn log_is_common<V: Simd>(x: V) -> bool {
    common_case(x, f32::MIN_POSITIVE, f32::INFINITY)
}

/// `ln x` for [`log_is_common`] vectors (the full path's `e + 0` is `e`).
#[inline(always)]
fn log_common<V: Simd>(x: V) -> V {
    let (e, lm) = log_parts(x);
    log_join(e, lm)
}

/// `ln x`.
#[inline(always)]
pub(crate) fn log_v<V: Simd>(x: V) -> V {
    if log_is_common(x) {
        return log_common(x);
    }
    let tiny = x.lt(V::splat(f32::MIN_POSITIVE));
    let xs = V::select(tiny, x.mul(V::splat(8_388_608.0)), x);
    let (e, lm) = log_parts(xs);
    let e = e.add(V::select(tiny, V::splat(-23.0), V::splat(0.0)));
    let y = log_join(e, lm);
    let zero = V::splat(0.0);
    let y = V::select(x.lt(zero), V::splat(f32::NAN), y);
    let y = V::select(x.eq(zero), V::splat(f32::NEG_INFINITY), y);
    let y = V::select(x.eq(V::splat(f32::INFINITY)), x, y);
    V::select(x.is_nan(), x, y)
}

/// `tanh x`: from [`TANH_T`] where [`Simd::lookup32`] is one instruction
/// (AVX-512), else by [`tanh_formula_v`].
#[inline(always)]
pub(crate) fn tanh_v<V: Simd>(x: V) -> V {
    if V::FAST_LOOKUP16 {
        return tanh_table_v(x);
    }
    tanh_formula_v(x)
}

/// The width of [`TANH_T`]'s intervals: thirty-two cover `[0, TANH_ONE]`.
const TANH_STEP: f32 = 0.3125;
/// The table form's clamp of `|x|`: the middle of the last interval, so the
/// interval index needs no clamp of its own, and past 9.01, so tanh is 1 there.
const TANH_TABLE_MAX: f32 = 31.5 * TANH_STEP;

/// `tanh x` as a piecewise polynomial: `tanh a = c_i + t P_i(t)`, `a = |x|`
/// clamped to `TANH_TABLE_MAX`, `i = floor(a / TANH_STEP)` (at most 31, by that
/// clamp), `t = a - i TANH_STEP` (exact, `>= 0`: `c_i` and `t P_i(t)` never
/// cancel), `t P_i(t)` of degree 6, the sign restored. Seven lookups per vector
/// (one `vpermi2ps` each on AVX-512, issued at `vpermps`'s rate) and six FMAs in
/// the polynomial: sixteen intervals of twice the width needed degree 8 for the
/// same error, nine lookups and eight FMAs, and with the index clamped besides
/// ran 6 % slower on a Zen 4 (session 40). Interval 0 has `c_0 = 0` and `t = a`,
/// so small arguments keep full relative precision. NaN stays NaN (through `t`).
#[inline(always)]
fn tanh_table_v<V: Simd>(x: V) -> V {
    let a = x.abs().min_bound(TANH_TABLE_MAX);
    // floor(a / step) as round(a / step - 1/2), at most 31 (the clamp of `a`).
    let steps = a.mul_add(V::splat(1.0 / TANH_STEP), V::splat(-0.5));
    let s = steps.add(V::splat(ROUND_MAGIC));
    interval_table(a, s, TANH_STEP, &TANH_T).copysign(x)
}

/// `tanh x` from `e^{2|x|} - 1`: every input, on every path.
#[inline(always)]
fn tanh_formula_v<V: Simd>(x: V) -> V {
    // tanh rounds to ±1 from |x| = 9.01; the clamp keeps e^{2|x|} normal.
    let a = x.abs().min_bound(TANH_ONE);
    let e = expm1_normal_v(a.add(a));
    // q = e / d, d = e + 2 rounded; then one correction for the rounding of d
    // (`derr`, exact: |e| < 2 or the term is negligible) and of the division
    // (`q d - e`, exact by FMA), scaled by 1/d ~ (1 - q)/2.
    let two = V::splat(2.0);
    let d = e.add(two);
    let derr = two.sub(d).add(e);
    let q = e.div(d);
    let k = q.mul_add(derr, q.mul_err(d, e));
    let k = V::select(e.lt(V::splat(TANH_FIX_MAX)), k, V::splat(0.0));
    let half = V::splat(0.5);
    k.mul_add(q.mul_add(half, V::splat(-0.5)), q).copysign(x)
}

/// `2^24`, and its inverse: the scale of `exp_scaled_v` in sigmoid and SiLU.
const TWO_24: f32 = 16_777_216.0;
const TWO_M24: f32 = 1.0 / TWO_24;

/// Where every lane has `|x|` below this, the `e^{-|x|}` (≥ 1.8e-35) of sigmoid, SiLU
/// and GELU-tanh and the products formed from it are normal f32s: their common-case
/// path.
const SIGMOID_COMMON: f32 = 80.0;

/// Returns `(2^24 e^-|x|, 1 + e^-|x|)` (`x` in unit `U`; `LOW_PARTS`: see
/// [`exp_sixteenths`]).
#[inline(always)]
fn sigmoid_parts<V: Simd, U: ExpUnit, const LOW_PARTS: bool>(x: V) -> (V, V) {
    let e24 = exp_scaled_v::<V, U, LOW_PARTS>(x.abs().mul(V::splat(-1.0)), 24.0);
    (e24, V::splat(1.0).add(e24.mul(V::splat(TWO_M24))))
}

/// Returns `(e^-|x|, 1 + e^-|x|)` for lanes with `|x| < SIGMOID_COMMON U::E`: one
/// scaling by `2^n` where [`sigmoid_parts`] clamps and scales twice, and `e` is
/// its `e24 · 2^-24` exactly (every scaling is exact on normal values). So a
/// quotient `e/d` rounds like its `(e24/d)·2^-24`, and `(x·e)/d` like
/// `((x·e24)/d)·2^-24` (where `x·e` is subnormal, `e = 1` and `d = 2`, and both
/// paths round `x/2` once).
#[inline(always)]
fn sigmoid_parts_common<V: Simd, U: ExpUnit, const LOW_PARTS: bool>(x: V) -> (V, V) {
    let e = exp_normal_v::<V, U, LOW_PARTS>(x.abs().mul(V::splat(-1.0)));
    (e, V::splat(1.0).add(e))
}

/// `1 / (1 + e^-x)`: `1/d` for `x >= 0` and `e^x/d` below, with `d = 1 +
/// e^-|x|`, one division and one rounding either way (a reciprocal times `e^x`
/// rounds twice, and with SiLU's two products it was 10 % slower on the Zen 3).
/// For `x < 0` the result carries `e^x`'s error whole, so AVX-512 takes its
/// exponential with the table's low parts: without them sigmoid measured 3.09
/// ULP over every f32, past [`SIGMOID_MAX_ULP`] (with them 2.40, as before).
#[inline(always)]
pub(crate) fn sigmoid_v<V: Simd>(x: V) -> V {
    if sigmoid_is_common::<V, Natural>(x) {
        return sigmoid_common(x);
    }
    let negative = x.lt(V::splat(0.0));
    // For x < 0 e^x is carried scaled by 2^24, so that a subnormal result is
    // rounded at the end (2^24 / d is exact for x >= 0).
    let (e24, d) = sigmoid_parts::<V, Natural, true>(x);
    V::select(negative, e24, V::splat(TWO_24))
        .div(d)
        .mul(V::splat(TWO_M24))
}

/// Sigmoid for [`sigmoid_is_common`] vectors.
#[inline(always)]
fn sigmoid_common<V: Simd>(x: V) -> V {
    let (e, d) = sigmoid_parts_common::<V, Natural, true>(x);
    V::select(x.lt(V::splat(0.0)), e, V::splat(1.0)).div(d)
}

/// Whether every lane of `v` (in unit `U`) lies in the common case of sigmoid,
/// SiLU and GELU-tanh: `|v| < SIGMOID_COMMON` in natural units.
#[inline(always)]
fn sigmoid_is_common<V: Simd, U: ExpUnit>(v: V) -> bool {
    let common = SIGMOID_COMMON * U::E;
    common_case(v, -common, common)
}

/// `x sigmoid(x)`.
#[inline(always)]
pub(crate) fn silu_v<V: Simd>(x: V) -> V {
    times_sigmoid::<V, Natural>(x, x)
}

/// `x sigmoid(v)` (`v` in unit `U`), for SiLU (`v = x`) and GELU-tanh; `x` and `v`
/// have the same sign: `x/d`, or `(x e^v)/d` for `v < 0`, one division (see
/// [`sigmoid_v`]).
/// Within their bounds without the exponential table's low parts (SiLU 3.67 ULP
/// over every f32 on AVX-512, bound 4), so 1.07x faster than with them.
#[inline(always)]
fn times_sigmoid<V: Simd, U: ExpUnit>(x: V, v: V) -> V {
    if sigmoid_is_common::<V, U>(v) {
        return times_sigmoid_common::<V, U>(x, v);
    }
    let negative = v.lt(V::splat(0.0));
    // x itself is not scaled: 2^24 x may overflow.
    let (e24, d) = sigmoid_parts::<V, U, false>(v);
    let q = V::select(negative, x.mul(e24), x).div(d);
    V::select(negative, q.mul(V::splat(TWO_M24)), q)
}

/// [`times_sigmoid`] for [`sigmoid_is_common`] `v`.
#[inline(always)]
fn times_sigmoid_common<V: Simd, U: ExpUnit>(x: V, v: V) -> V {
    let (e, d) = sigmoid_parts_common::<V, U, false>(v);
    V::select(v.lt(V::splat(0.0)), x.mul(e), x).div(d)
}

/// `ln(1 + e^x)`: from [`SOFTPLUS_T`] where [`Simd::lookup16`] is one
/// instruction (AVX-512) and `|x| < SOFTPLUS_TABLE_MAX`, else by
/// [`softplus_formula_v`]. On AVX2 a sixteen-entry lookup is two `vpermps` and a
/// blend, seven of them per vector: the table form beat the formula on a Zen 5
/// (0.85 against 0.99 µs per 2048, session 18), where four pipes shuffle, but
/// not on the Zen 3 (2.23 against 1.55 µs, session 27), whose AVX2 path is the
/// one CPUs without AVX-512 run. Which of the two a lane gets depends on that
/// lane alone.
#[inline(always)]
pub(crate) fn softplus_v<V: Simd>(x: V) -> V {
    if !V::FAST_LOOKUP16 {
        return softplus_formula_v(x);
    }
    let table = softplus_table_v(x);
    if x.all_in(-SOFTPLUS_TABLE_MAX, SOFTPLUS_TABLE_MAX) {
        return table;
    }
    let near = x.abs().lt(V::splat(SOFTPLUS_TABLE_MAX));
    V::select(near, table, softplus_formula_v(x))
}

/// Softplus' table range: `|x| < 15.5`, where [`softplus_table_v`] applies.
const SOFTPLUS_TABLE_MAX: f32 = 15.5;

/// Softplus as `max(x, 0) + f(a)`, `f(a) = log1p(e^{-a})`, `a = |x|`, with `f`
/// from a piecewise polynomial: `f(a) = c_i + t P_i(t)` ([`SOFTPLUS_T`]), `i =
/// round(a)`, `t = a - i` (exact). No clamp: below `SOFTPLUS_TABLE_MAX`, `i <=
/// 15` already. The negative side is `f(a)`
/// alone, to its full relative precision; no division and no exponential, against
/// [`softplus_formula_v`]'s one of each. Lanes with `a >= SOFTPLUS_TABLE_MAX` and
/// NaN get garbage, which the caller replaces.
#[inline(always)]
fn softplus_table_v<V: Simd>(x: V) -> V {
    let a = x.abs();
    let f = interval_table(a, interval_index(a, 1.0), 1.0, &SOFTPLUS_T);
    V::splat(0.0).max_skip_nan(x).add(f)
}

/// `ln(1 + e^x)` as `max(x, 0) + log1p(e^{-|x|})`: every input, on every path.
#[inline(always)]
fn softplus_formula_v<V: Simd>(x: V) -> V {
    let zero = V::splat(0.0);
    let na = x.abs().mul(V::splat(-1.0));
    // Where e^{-|x|} is normal (and x not NaN), one scaling by 2^n suffices.
    let t = if common_case(x, EXP_NORMAL_LO, -EXP_NORMAL_LO) {
        exp_normal_v::<V, Natural, false>(na)
    } else {
        exp_v(na)
    };
    // log1p(t) = 2 atanh(s), s = t/(2+t) in [0, 1/3]: no rounding of 1 + t to
    // correct, no exponent split (a NaN input reaches l through t).
    let s = t.div(V::splat(2.0).add(t));
    let u = s.mul(s);
    let l = s.mul(u).mul_add(horner(u, &LOG1P_R), s.add(s));
    // max(x, 0), one `maxps` on x86 (a NaN x gives NaN through `l` either way).
    zero.max_skip_nan(x).add(l)
}

/// `erf x`.
#[inline(always)]
pub(crate) fn erf_v<V: Simd>(x: V) -> V {
    if V::FAST_LOOKUP {
        return erf_table_v(x);
    }
    let u = x.mul(x);
    let small = x.mul(horner(u, &ERF_Q));
    let a = clamp(x.abs(), 0.0, 4.0);
    let h = horner(a.sub(V::splat(ERF_SMALL)), &ERF_H);
    // -a^2 >= -16: e^{-a^2} is normal.
    let e = exp_normal_v::<V, Natural, false>(a.mul(a).mul(V::splat(-1.0)));
    let large = V::splat(1.0).sub(h.mul(e)).copysign(x);
    V::select(x.abs().lt(V::splat(ERF_SMALL)), small, large)
}

/// GELU's table range: `|x| < 3.75`, where [`gelu_table_v`] applies.
const GELU_TABLE_MAX: f32 = 3.75;

/// GELU's piecewise polynomial `c_i + t P_i(t)` on sixteen intervals of `a = |x|`
/// (see `gelu_table_v`, `gelu_wide_v`): rows 0-5 are the coefficients of the
/// degree-6 `P_i`, highest degree first, row 6 the `c_i`; column `i` is interval
/// `i`. Columns 0-7 (`a < 3.75`) give minus the standard normal's lower tail,
/// `-Phi(-a) = -erfc(a/sqrt2)/2`; columns 8-15 (`3.75 <= a < 12`, column 15
/// stretched over `[7.25, 12]`) give `-a Phi(-a) e^{a^2/2}`, which varies slowly
/// (near `-1/sqrt(2 pi)`). Max relative error 1.03e-7 and 7.6e-8 in float64 with
/// these f32 coefficients (`scripts/fit_math.py`).
const GELU_T: [[f32; 16]; 7] = [
    [
        -0.001_394_958_6,
        -0.002_673_986_1,
        -0.001_770_407,
        0.000_850_408,
        0.001_321_910_1,
        0.000_495_811_17,
        -0.000_112_293_32,
        -0.000_176_702_57,
        0.000_883_357_5,
        -0.001_709_537_5,
        0.000_229_257_22,
        -0.001_121_975,
        0.001_615_922,
        -0.001_292_653_1,
        -0.001_520_700_4,
        3.278_144_7e-8,
    ],
    [
        0.010_595_649,
        0.004_568_007_3,
        -0.003_963_401,
        -0.005_818_682_7,
        -0.002_259_376_7,
        0.000_640_596_67,
        0.001_099_478_6,
        0.000_580_656_87,
        -0.000_043_089_938,
        -0.000_021_818_958,
        -0.000_013_171_245,
        -7.621_443e-6,
        -4.547_427_6e-6,
        -2.871_958e-6,
        -1.796_117_9e-6,
        -6.868_108e-7,
    ],
    [
        -0.000_133_455_8,
        0.020_131_102,
        0.020_140_832,
        0.006_051_36,
        -0.004_497_476_4,
        -0.005_932_472,
        -0.003_323_543_1,
        -0.001_177_487_8,
        0.000_105_611_434,
        0.000_269_678_95,
        0.000_044_072_523,
        0.000_146_049_45,
        -0.000_125_345_8,
        0.000_138_482_75,
        0.000_154_262_32,
        7.075_570_5e-6,
    ],
    [
        -0.066_476_11,
        -0.044_008_13,
        -1.635_691_8e-6,
        0.026_981_696,
        0.026_995_64,
        0.015_337_931,
        0.005_909_361,
        0.001_636_227_7,
        -0.000_771_002_9,
        -0.000_482_835_17,
        -0.000_312_849_47,
        -0.000_208_969_37,
        -0.000_143_367_27,
        -0.000_100_714_075,
        -0.000_072_270_42,
        -0.000_051_920_037,
    ],
    [
        -6.970_736e-7,
        -0.088_015_296,
        -0.120_984_785,
        -0.097_137_71,
        -0.053_991,
        -0.021_910_401,
        -0.006_647_778_7,
        -0.001_527_189_6,
        0.002_878_081_8,
        0.001_951_638_3,
        0.001_369_938_3,
        0.000_981_716_3,
        0.000_727_104_2,
        0.000_539_855_4,
        0.000_411_001_62,
        0.000_321_133_44,
    ],
    [
        0.398_942_3,
        0.352_065_32,
        0.241_970_73,
        0.129_517_6,
        0.053_990_968,
        0.017_528_297,
        0.004_431_847,
        0.000_872_682_95,
        -0.009_211_780_5,
        -0.006_831_82,
        -0.005_190_527_5,
        -0.004_026_646_3,
        -0.003_180_947_6,
        -0.002_553_136,
        -0.002_078_159_2,
        -0.001_712_756_3,
    ],
    [
        -0.5,
        -0.308_537_54,
        -0.158_655_26,
        -0.066_807_2,
        -0.022_750_132,
        -0.006_209_665_4,
        -0.001_349_898,
        -0.000_232_629_09,
        -0.377_642_57,
        -0.381_615_25,
        -0.384_596_53,
        -0.386_884_8,
        -0.388_675_9,
        -0.390_101_88,
        -0.391_254_37,
        -0.392_198_23,
    ],
];

/// `1.5 * 2^23`: adding it to `s` in `[0, 2^22)` rounds `s` to an integer `i`
/// held in the low mantissa bits (what [`Simd::lookup8`] reads); subtracting it
/// again gives `i` as a float.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `erf x` as a piecewise polynomial: `erf a = c_i + t P_i(t)`, `a = |x|` clamped
/// to 4, `i = round(2a)` clamped to 7, `t = a - i/2` (exact), degree-5 `P_i`; the
/// coefficients of all eight intervals of a power sit in one `vpermps` table.
/// Interval 0 has `c_0 = 0` and `t = a`, so small arguments keep full relative
/// precision. Taken where [`Simd::lookup8`] is one instruction (AVX2).
#[inline(always)]
fn erf_table_v<V: Simd>(x: V) -> V {
    let a = x.abs().min_bound(4.0);
    // NaN stays NaN through the index and `t` (its lookup index is 0).
    let s = interval_index(a, 2.0).min_bound(ROUND_MAGIC + 7.0);
    interval_table(a, s, 0.5, &ERF_T).copysign(x)
}

/// The piecewise polynomial of a table like [`ERF_T`] at `a`: `c_i + t P_i(t)`
/// on intervals of width `step` (0.5, 0.625 or 1), `s` holding interval `i` as
/// `i + ROUND_MAGIC` ([`interval_index`] for intervals centred on `i step`; the
/// caller rounds `a / step - 1/2` for intervals starting there; clamped as it
/// needs), `t = a - i step` (exact: `i step` is, and so is the difference, by
/// Sterbenz), the rows holding `P_i`'s coefficients highest degree first, then
/// `c_i`, one interval per column; [`TableRow::lookup`] reads a row's entry for
/// each lane's interval.
#[inline(always)]
fn interval_table<V: Simd, R: TableRow>(a: V, s: V, step: f32, table: &[R]) -> V {
    let t = s.sub(V::splat(ROUND_MAGIC)).mul_add(V::splat(-step), a);
    let mut p = table[0].lookup(s);
    for row in &table[1..] {
        p = p.mul_add(t, row.lookup(s));
    }
    p
}

/// A row of an [`interval_table`]: eight, sixteen or thirty-two entries, read by
/// the [`Simd`] lookup of that width. A trait rather than a lookup function passed
/// in, so that the lookup is inlined on every path: passed as a function item
/// (`V::lookup16`) it went through an `Fn::call` shim, which LLVM left out of line
/// in the kernels' colder copies (a vector alone at the head or tail), and there,
/// compiled without AVX2, not even the intrinsics inlined (GELU of eight values:
/// 130 ns, against 35 with the lookups inlined; Zen 3, session 47).
trait TableRow {
    /// Each lane of `s` (an interval `i` held as `i + ROUND_MAGIC`) becomes this
    /// row's entry `i`.
    fn lookup<V: Simd>(&self, s: V) -> V;
}

impl TableRow for [f32; 8] {
    #[inline(always)]
    fn lookup<V: Simd>(&self, s: V) -> V {
        s.lookup8(self)
    }
}

impl TableRow for [f32; 16] {
    #[inline(always)]
    fn lookup<V: Simd>(&self, s: V) -> V {
        s.lookup16(self)
    }
}

impl TableRow for [f32; 32] {
    #[inline(always)]
    fn lookup<V: Simd>(&self, s: V) -> V {
        s.lookup32(self)
    }
}

/// `round(a per_step) + ROUND_MAGIC`, the interval of `a` among intervals of
/// width `1 / per_step` centred on its multiples, as [`interval_table`] takes it:
/// one FMA (`a per_step` is exact for `per_step` a power of two, so it rounds
/// as `round(a per_step)` would). Clamp it with `min_bound(ROUND_MAGIC + last)`.
#[inline(always)]
fn interval_index<V: Simd>(a: V, per_step: f32) -> V {
    a.mul_add(V::splat(per_step), V::splat(ROUND_MAGIC))
}

/// GELU's common case: inputs in `[-GELU_FAST, GELU_FAST)`, where `e^{-x^2/2}`,
/// `erfc(|x|/sqrt2)` and the result are normal (or the input is).
const GELU_FAST: f32 = 12.0;
/// Below this input GELU rounds to -0, above its negation to `x`.
const GELU_ZERO: f32 = -14.5;

/// For GELU at `x` (`xc`: `x` clamped to `±14.5`): `(x/2, G(t) (1 - lo), -x^2/2)`
/// with `erfc(|x|/sqrt2) = e^{-x^2/2} G(t) (1 - lo)`; `x^2/2 = sq + lo` exactly.
#[inline(always)]
fn gelu_parts<V: Simd>(x: V, xc: V) -> (V, V, V) {
    let half = V::splat(0.5);
    let one = V::splat(1.0);
    // 1 / (1 + a/2) with a = |x|/sqrt2.
    let t = one.div(xc.abs().mul_add(V::splat(FRAC_1_SQRT_2 * 0.5), one));
    let p = xc.mul(xc);
    let lo = xc.mul_err(xc, p);
    // e^{-(sq + lo)} = e^{-sq} (1 - lo) to first order (|lo| < 2^-20 sq).
    let g = horner(t, &ERFC_G).mul(lo.mul_add(V::splat(-0.5), one));
    (x.mul(half), g, p.mul(V::splat(-0.5)))
}

/// `x/2 (1 + erf(x / sqrt 2))`. Where [`Simd::lookup8`] is one instruction
/// (AVX2, AVX-512): from the first eight intervals of [`GELU_T`] when every lane
/// has `|x| < GELU_TABLE_MAX` (a network's usual inputs), else, with the same
/// bits on those lanes, from all sixteen ([`gelu_wide_v`]) where a sixteen-entry
/// lookup is one instruction too (AVX-512), or from the eight and a polynomial
/// past them ([`gelu_tail_v`], AVX2). Elsewhere by [`gelu_formula_v`]. Which
/// form a lane gets depends on that lane alone, so an element's bits do not
/// depend on its neighbours.
#[inline(always)]
pub(crate) fn gelu_v<V: Simd>(x: V) -> V {
    if !V::FAST_LOOKUP {
        return gelu_formula_v(x);
    }
    if V::FAST_LOOKUP16 {
        // A sixteen-entry lookup costs what an eight-entry one does (AVX-512), so
        // one evaluation of the table serves both forms: on intervals 0-7 it
        // reads the eight-interval form's entries, with the same `t`.
        let a = x.abs();
        let p = gelu_table16(a);
        let relu = relu_v(x);
        if x.all_in(-GELU_TABLE_MAX, GELU_TABLE_MAX) {
            return a.mul_add(p, relu);
        }
        return gelu_wide_v(x, a, p, relu);
    }
    // Evaluated before the test, though a vector that fails it does not use it:
    // so placed, normal inputs ran 0.28 µs per 2048 on AVX-512 against 0.31 with
    // the evaluation inside the branch, and mixed vectors no slower.
    let a = x.abs();
    let table = gelu_table_v(x, a);
    if x.all_in(-GELU_TABLE_MAX, GELU_TABLE_MAX) {
        return table;
    }
    gelu_past_fast(x, a, gelu_tail_v(x, a, table))
}

/// GELU as `relu(x) - a Phi(-a)`, `a = |x|`, with the normal tail `Phi(-a)` from
/// a piecewise polynomial: `-Phi(-a) = c_i + t P_i(t)` ([`GELU_T`], negated so
/// the last step is one FMA), `i = round(2a)`, `t = a - i/2` (exact). For `x < 0`
/// that is `x Phi(x)`, for `x >= 0` it is `x - x Phi(-x)`, rounded once; neither
/// side cancels (the negative tail keeps its relative precision, and `Phi(-a) <=
/// 1/2`). No division and no exponential, against [`gelu_formula_v`]'s one of
/// each. Lanes with `a >= GELU_TABLE_MAX` (their index leaves the table) and NaN
/// get garbage, which the caller replaces.
#[inline(always)]
fn gelu_table_v<V: Simd>(x: V, a: V) -> V {
    let s = interval_index(a, 2.0);
    let p = interval_table(a, s, 0.5, &GELU_T_LOW);
    a.mul_add(p, relu_v(x))
}

/// The first eight columns of [`GELU_T`]: its `|x| < GELU_TABLE_MAX` intervals.
const GELU_T_LOW: [[f32; 8]; 7] = low_halves(&GELU_T);

/// The first eight entries of each row of `table`.
const fn low_halves<const R: usize>(table: &[[f32; 16]; R]) -> [[f32; 8]; R] {
    let mut low = [[0.0; 8]; R];
    let mut row = 0;
    while row < R {
        low[row] = *table[row].first_chunk::<8>().expect("16 entries");
        row += 1;
    }
    low
}

/// `max(x, 0)` with NaN giving 0 (GELU's NaN lanes are replaced by its callers).
#[inline(always)]
fn relu_v<V: Simd>(x: V) -> V {
    x.max_skip_nan(V::splat(0.0))
}

/// `c_i + t P_i(t)` from all sixteen intervals of [`GELU_T`], `i = round(2a)`
/// clamped to 15, `t = a - i/2`: `-Phi(-a)` on intervals 0-7 (`a <
/// GELU_TABLE_MAX`, the same value as [`gelu_table_v`]'s), `-a Phi(-a) e^{a^2/2}`
/// on 8-15.
#[inline(always)]
fn gelu_table16<V: Simd>(a: V) -> V {
    let s = interval_index(a, 2.0).min_bound(ROUND_MAGIC + 15.0);
    interval_table(a, s, 0.5, &GELU_T)
}

/// GELU from all sixteen intervals of [`GELU_T`], given `a = |x|`, `p =
/// gelu_table16(a)` and `relu = relu_v(x)`: `relu + m p`, where `m = a` on
/// intervals 0-7, exactly as in [`gelu_table_v`], and `m = e^{-a^2/2}`
/// ([`exp_neg_half_sq_v`]) on 8-15. Lanes with `|x| >= GELU_FAST` and NaN take
/// [`gelu_formula_v`]. One division-free form for every `|x| < GELU_FAST`: 1.5x
/// faster on AVX-512 than running the eight-interval form and the formula side
/// by side on a vector that holds a lane past 3.75 (and 1.1x on AVX2, whose
/// [`Simd::lookup16`] takes two `vpermps` and a blend; AVX2 has since taken
/// [`gelu_tail_v`]).
#[inline(always)]
fn gelu_wide_v<V: Simd>(x: V, a: V, p: V, relu: V) -> V {
    gelu_past_fast(x, a, gelu_wide_sum(a, p, exp_neg_half_sq_v(a), relu))
}

/// `y` (GELU for lanes with `|x| < GELU_FAST`, `a = |x|`) with the other lanes
/// and NaN from [`gelu_formula_v`], which runs only when a lane needs it.
#[inline(always)]
fn gelu_past_fast<V: Simd>(x: V, a: V, y: V) -> V {
    if x.all_in(-GELU_FAST, GELU_FAST) {
        return y;
    }
    V::select(a.lt(V::splat(GELU_FAST)), y, gelu_formula_v(x))
}

/// [`gelu_wide_v`]'s last step for lanes with `|x| < GELU_FAST`: `relu + m p`,
/// `m = a` below `GELU_TABLE_MAX`, else `e = e^{-a^2/2}`.
#[inline(always)]
fn gelu_wide_sum<V: Simd>(a: V, p: V, e: V, relu: V) -> V {
    V::select(a.lt(V::splat(GELU_TABLE_MAX)), a, e).mul_add(p, relu)
}

/// The middle of `[GELU_TABLE_MAX, GELU_FAST]`, where [`GELU_TAIL`] is centred.
const GELU_TAIL_MID: f32 = 7.875;

/// `-a Phi(-a) e^{a^2/2} = sum_k c_k t^k` on `[GELU_TABLE_MAX, GELU_FAST]`, `t
/// = a - GELU_TAIL_MID`, `c_k = GELU_TAIL[k]`: the function intervals 8-15 of
/// [`GELU_T`] tabulate, as one degree-11 polynomial (max relative error 3.6e-8
/// in float64 with these f32 coefficients, `scripts/fit_math.py`).
const GELU_TAIL: [f32; 12] = [
    -0.392_797_95,
    -0.001_492_365_8,
    0.000_268_210_54,
    -0.000_042_270_527,
    6.135_118_4e-6,
    -8.520_431e-7,
    1.207_062_5e-7,
    -1.506_023_6e-8,
    1.107_749_3e-9,
    -1.653_719e-10,
    5.817_55e-11,
    -6.204_281_4e-12,
];

/// GELU for lanes with `|x| < GELU_FAST`, given `a = |x|` and `table =
/// gelu_table_v(x, a)`: `table` below `GELU_TABLE_MAX`, else `relu(x) + e^{-a^2/2}
/// q(a)` with `q` the [`GELU_TAIL`] polynomial. Where a sixteen-entry lookup
/// takes two `vpermps` and a blend (AVX2), the polynomial's eleven FMAs cost
/// less than the seven lookups of [`gelu_wide_v`]. They run by Estrin's scheme
/// but the last, `c_0 + t h(t)`: a chain five FMAs deep instead of eleven, with
/// Horner's accuracy (the final step's rounding dominates, the other terms
/// being small beside `c_0`; float64 simulation of the f32 steps: max relative
/// error 8.5e-8, Horner 8.4e-8, Estrin throughout 1.8e-7). Zen 3, uniform
/// input on `[-8, 8)`, 2048 values in L1, alternated rounds: the table
/// 3.08-3.18 µs, the polynomial by Horner 3.02-3.05, by Estrin throughout
/// 2.96-2.99, so 2.83-2.95.
#[inline(always)]
fn gelu_tail_v<V: Simd>(x: V, a: V, table: V) -> V {
    let [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11] = GELU_TAIL;
    let t = a.sub(V::splat(GELU_TAIL_MID));
    let t2 = t.mul(t);
    let t4 = t2.mul(t2);
    // h(t) = c1 + c2 t + ... + c11 t^10: pairs, then pairs of pairs.
    let c12 = V::splat(c2).mul_add(t, V::splat(c1));
    let c34 = V::splat(c4).mul_add(t, V::splat(c3));
    let c56 = V::splat(c6).mul_add(t, V::splat(c5));
    let c78 = V::splat(c8).mul_add(t, V::splat(c7));
    let c9_10 = V::splat(c10).mul_add(t, V::splat(c9));
    let c1_4 = c34.mul_add(t2, c12);
    let c5_8 = c78.mul_add(t2, c56);
    let c9_11 = V::splat(c11).mul_add(t2, c9_10);
    let h = c9_11.mul_add(t4.mul(t4), c5_8.mul_add(t4, c1_4));
    let q = h.mul_add(t, V::splat(c0));
    let tail = exp_neg_half_sq_v(a).mul_add(q, relu_v(x));
    V::select(a.lt(V::splat(GELU_TABLE_MAX)), table, tail)
}

/// GELU of two vectors, the same bits as [`gelu_v`] on each. On AVX2 (the table
/// path whose sixteen-entry lookup is two `vpermps` and a blend) both vectors go
/// down one branch when they agree: both in the eight-interval range, or both
/// with a lane past it and none at `GELU_FAST` or beyond (uniform input; there
/// [`gelu_tail_v`]). Their long dependency chains then interleave in one
/// straight run of code, as in [`pair_common`] (Zen 3, 2048 values in L1:
/// uniform input 3.46 -> 3.14 µs, standard-normal 1.26 -> 1.15). Vectors that
/// disagree take [`gelu_v`] one after the other, and so do AVX-512 (whose form
/// evaluates the sixteen intervals before its test; a pairing there is not
/// measured) and the formula paths.
#[inline(always)]
pub(crate) fn gelu_pair_v<V: Simd>([x0, x1]: [V; 2]) -> [V; 2] {
    if V::FAST_LOOKUP && !V::FAST_LOOKUP16 {
        let (a0, a1) = (x0.abs(), x1.abs());
        let t0 = x0.all_in(-GELU_TABLE_MAX, GELU_TABLE_MAX);
        let t1 = x1.all_in(-GELU_TABLE_MAX, GELU_TABLE_MAX);
        if t0 && t1 {
            return [gelu_table_v(x0, a0), gelu_table_v(x1, a1)];
        }
        if !t0 && !t1 && x0.all_in(-GELU_FAST, GELU_FAST) && x1.all_in(-GELU_FAST, GELU_FAST) {
            let (table0, table1) = (gelu_table_v(x0, a0), gelu_table_v(x1, a1));
            return [gelu_tail_v(x0, a0, table0), gelu_tail_v(x1, a1, table1)];
        }
    }
    [gelu_v(x0), gelu_v(x1)]
}

/// `2^{j/16}` for `j` in 0..16, rounded to f32 ([`exp_sixteenths`]' and
/// [`exp_neg_half_sq_v`]'s table; `scripts/fit_math.py` prints it).
const EXP2_SIXTEENTHS: [f32; 16] = [
    1.0,
    1.044_273_7,
    1.090_507_7,
    1.138_788_6,
    1.189_207_1,
    1.241_857_8,
    1.296_839_6,
    1.354_255_6,
    core::f32::consts::SQRT_2,
    1.476_826_2,
    1.542_210_8,
    1.610_490_3,
    1.681_792_9,
    1.756_252_2,
    1.834_008_1,
    1.915_206_6,
];

/// `2^{j/16} - EXP2_SIXTEENTHS[j]`, rounded to f32: the low parts of
/// [`exp_sixteenths`]' table, for sigmoid (see [`sigmoid_v`];
/// `scripts/fit_math.py` prints them).
const EXP2_SIXTEENTHS_LO: [f32; 16] = [
    0.0,
    4.833_47e-8,
    -1.307_754e-8,
    5.386_222_3e-8,
    3.797_635_3e-8,
    4.496_838e-8,
    -4.018_999_5e-8,
    -1.012_334_9e-8,
    2.420_323_5e-8,
    -4.500_899e-8,
    8.070_905e-9,
    9.836_217e-9,
    -2.475_532_7e-8,
    -9.235_77e-9,
    -1.123_927_8e-8,
    9.845_328e-9,
];

/// `1.5 * 2^19`: adding it to `s` in `(-2^18, 2^18)` rounds `s` to a multiple
/// of 1/16, held in the low mantissa bits as `16 s` (the sixteenths
/// [`Simd::lookup16`] reads in the low four); subtracting it again gives that
/// multiple.
const ROUND_SIXTEENTHS: f32 = 786_432.0;

/// `e^{-a^2/2}` for `a` in `[0, GELU_FAST]`. With `w = round(-a^2 8/ln2) / 16 =
/// k + j/16` (`k` integral, `j` in 0..16, read by [`Simd::lookup16`] from the
/// low bits of `w + ROUND_SIXTEENTHS`), the argument reduces to `rho = a^2 + 2w
/// ln2` (`|rho| <= ln2/16`), and `e^{-a^2/2} = 2^k 2^{j/16} e^{-rho/2}`, the
/// last a cubic (its truncation `rho^4/384 < 1e-8`), `2^k`, `k = floor(w)`, by
/// [`Simd::mul_pow2_floor_normal`] of `w` itself (the result is normal, at least
/// `e^-72`). `a^2 + 2w LN2_HI` is one FMA ([`Simd::mul_add_cancel`]): `a^2` held
/// exactly, `2w LN2_HI` exact (`16w` has 11 bits, `LN2_HI` 9), one rounding, to a
/// number below 0.09. (Unfused, on the scalar path, `a^2` rounded minus `2w
/// LN2_HI` is exact too: both are multiples of the first's ulp, `2w LN2_HI` being
/// one of 2^-12, and their difference is small.) Then `2w LN2_LO`. Against
/// [`exp_normal_v`] with a separate correction for the rounding of `a^2`: a cubic where that takes
/// degree 6, and no two-float square. GELU on uniform [-8, 8), AVX-512, µs per
/// 2048: 0.62-0.72 before this function, 0.45-0.49 now (docs/kernels.md).
/// Other lanes (a NaN, `a > GELU_FAST`) get garbage, which the caller replaces.
#[inline(always)]
fn exp_neg_half_sq_v<V: Simd>(a: V) -> V {
    // Any multiple of 1/16 near `-a^2/(2 ln2)` does: the reduction below is exact for it.
    let s = a
        .mul(a)
        .mul_add(V::splat(-0.5 * LOG2E), V::splat(ROUND_SIXTEENTHS));
    let w = s.sub(V::splat(ROUND_SIXTEENTHS));
    let rho = a.mul_add_cancel(a, w.mul(V::splat(2.0 * LN2_HI)));
    let rho = w.mul_add(V::splat(2.0 * LN2_LO), rho);
    // e^{-rho/2} - 1 = -rho/2 + rho^2/8 - rho^3/48.
    let m = rho
        .mul_add(V::splat(-1.0 / 48.0), V::splat(0.125))
        .mul_add(rho, V::splat(-0.5))
        .mul(rho);
    times_two_sixteenths(s, m).mul_pow2_floor_normal(w)
}

/// `x/2 (1 + erf(x / sqrt 2))` as `x/2 erfc(-x/sqrt2)` with `erfc(a) = e^{-a^2}
/// G(1/(1 + a/2))`: every input, on every path.
#[inline(always)]
fn gelu_formula_v<V: Simd>(x: V) -> V {
    let neg = x.lt(V::splat(0.0));
    if common_case(x, -GELU_FAST, GELU_FAST) {
        // The full path below with every scaling by 2^24 dropped: exact here,
        // so both give the same values.
        let (hx, g, nsq) = gelu_parts(x, x);
        let m = hx.mul(g.mul(exp_normal_v::<V, Natural, false>(nsq)));
        return V::select(neg, m, x.sub(m));
    }
    let xc = clamp(x, GELU_ZERO, -GELU_ZERO);
    let (hx, g, nsq) = gelu_parts(x, xc);
    // erfc scaled by 2^24, so a subnormal result on the negative side is
    // rounded once, at the end.
    let ge24 = g.mul(exp_scaled_v::<V, Natural, false>(nsq, 24.0));
    let lower = hx.mul(ge24).mul(V::splat(TWO_M24));
    // Below the clamp the result rounds to -0 (and -inf gives NaN, `-inf * 0`).
    let lower = V::select(x.lt(V::splat(GELU_ZERO)), x.mul(V::splat(0.0)), lower);
    // Above the clamp the result is x (and +inf stays +inf, not `inf - inf`).
    let upper = x.sub(hx.mul(ge24.mul(V::splat(TWO_M24))));
    let upper = V::select(V::splat(-GELU_ZERO).lt(x), x, upper);
    V::select(neg, lower, upper)
}

/// `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, i.e. `x sigmoid(2u)`, with
/// `2u` handed over as `t = 2u log2 e` ([`Binary`]): `log2 e` folded into the
/// cubic's constants costs nothing, and the exponential's reduction is then exact.
#[inline(always)]
pub(crate) fn gelu_tanh_v<V: Simd>(x: V) -> V {
    times_sigmoid::<V, Binary>(x, gelu_tanh_arg(x))
}

/// GELU-tanh's `t = 2u log2 e`, `u = sqrt(2/pi) (x + 0.044715 x^3)`.
#[inline(always)]
fn gelu_tanh_arg<V: Simd>(x: V) -> V {
    // 2 sqrt(2/pi) log2 e and 2 sqrt(2/pi) 0.044715 log2 e.
    const K0: f32 = 2.302_208_2;
    const K1: f32 = 0.102_943_24;
    x.mul(x).mul_add(V::splat(K1), V::splat(K0)).mul(x)
}

/// Two vectors through a kernel with a common-case branch: where both pass
/// `test`, both take `common` side by side, one straight run of code in which
/// their dependency chains interleave; otherwise each takes `one`, its own test
/// and branch. One vector after the other, the second's independent work sits
/// behind the first's whole chain in program order, where the scheduler does not
/// reach it in time (Zen 3, AVX2, 2048 values in L1, paired: sigmoid and SiLU
/// 1.2x, GELU-tanh 1.14x, exp and log 1.1x faster). `common` gives
/// what `one` gives on such vectors (each kernel's common case is tested lane
/// for lane against its full path), so the pairing changes no bits.
#[inline(always)]
fn pair_common<V: Simd>(
    [x0, x1]: [V; 2],
    test: impl Fn(V) -> bool,
    common: impl Fn(V) -> V,
    one: impl Fn(V) -> V,
) -> [V; 2] {
    if test(x0) && test(x1) {
        return [common(x0), common(x1)];
    }
    [one(x0), one(x1)]
}

/// [`exp_v`] on two vectors ([`pair_common`]).
#[inline(always)]
pub(crate) fn exp_pair_v<V: Simd>(x: [V; 2]) -> [V; 2] {
    pair_common(
        x,
        #[inline(always)]
        |v| exp_is_normal::<V, Natural>(v),
        #[inline(always)]
        |v| exp_normal_v::<V, Natural, false>(v),
        #[inline(always)]
        |v| exp_v(v),
    )
}

/// [`log_v`] on two vectors ([`pair_common`]).
#[inline(always)]
pub(crate) fn log_pair_v<V: Simd>(x: [V; 2]) -> [V; 2] {
    pair_common(
        x,
        #[inline(always)]
        |v| log_is_common(v),
        #[inline(always)]
        |v| log_common(v),
        #[inline(always)]
        |v| log_v(v),
    )
}

/// [`sigmoid_v`] on two vectors ([`pair_common`]).
#[inline(always)]
pub(crate) fn sigmoid_pair_v<V: Simd>(x: [V; 2]) -> [V; 2] {
    pair_common(
        x,
        #[inline(always)]
        |v| sigmoid_is_common::<V, Natural>(v),
        #[inline(always)]
        |v| sigmoid_common(v),
        #[inline(always)]
        |v| sigmoid_v(v),
    )
}

/// [`silu_v`] on two vectors ([`pair_common`]).
#[inline(always)]
pub(crate) fn silu_pair_v<V: Simd>(x: [V; 2]) -> [V; 2] {
    pair_common(
        x,
        #[inline(always)]
        |v| sigmoid_is_common::<V, Natural>(v),
        #[inline(always)]
        |v| times_sigmoid_common::<V, Natural>(v, v),
        #[inline(always)]
        |v| silu_v(v),
    )
}

/// [`gelu_tanh_v`] on two vectors ([`pair_common`]); the test is on
/// [`gelu_tanh_arg`], which the common form computes again (the same value,
/// evaluated once).
#[inline(always)]
pub(crate) fn gelu_tanh_pair_v<V: Simd>(x: [V; 2]) -> [V; 2] {
    pair_common(
        x,
        #[inline(always)]
        |v| sigmoid_is_common::<V, Binary>(gelu_tanh_arg(v)),
        #[inline(always)]
        |v| times_sigmoid_common::<V, Binary>(v, gelu_tanh_arg(v)),
        #[inline(always)]
        |v| gelu_tanh_v(v),
    )
}

macro_rules! math_fn {
    ($(#[$doc:meta])* $name:ident, $inplace:ident, $op:ident) => {
        $(#[$doc])*
        ///
        /// `y[i] = f(x[i])`; `x` and `y` must have the same length
        /// ([`rml_core::Error::LengthMismatch`] otherwise).
        pub fn $name(x: &[f32], y: &mut [f32]) -> Result<()> {
            unary(UnaryOp::$op, x, y)
        }

        $(#[$doc])*
        ///
        /// In place: `x[i] = f(x[i])`.
        pub fn $inplace(x: &mut [f32]) {
            unary_inplace(UnaryOp::$op, x)
        }
    };
}

math_fn!(
    /// `e^x` (error: [`EXP_MAX_ULP`]).
    exp, exp_inplace, Exp
);
math_fn!(
    /// Natural logarithm (error: [`LOG_MAX_ULP`]).
    log, log_inplace, Log
);
math_fn!(
    /// Hyperbolic tangent (error: [`TANH_MAX_ULP`]).
    tanh, tanh_inplace, Tanh
);
math_fn!(
    /// Logistic sigmoid `1 / (1 + e^-x)` (error: [`SIGMOID_MAX_ULP`]).
    sigmoid, sigmoid_inplace, Sigmoid
);
math_fn!(
    /// Error function (error: [`ERF_MAX_ULP`]).
    erf, erf_inplace, Erf
);
math_fn!(
    /// GELU, exact (erf) form `x/2 (1 + erf(x/√2))` (error: [`GELU_MAX_ULP`]).
    gelu, gelu_inplace, Gelu
);
math_fn!(
    /// GELU, tanh approximation (error: [`GELU_TANH_MAX_ULP`]).
    gelu_tanh, gelu_tanh_inplace, GeluTanh
);
math_fn!(
    /// SiLU (swish) `x sigmoid(x)` (error: [`SILU_MAX_ULP`]).
    silu, silu_inplace, Silu
);
math_fn!(
    /// Softplus `ln(1 + e^x)` (error: [`SOFTPLUS_MAX_ULP`]).
    softplus, softplus_inplace, Softplus
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::UnaryOp;
    use crate::simd::{MAX_LANES, dispatch};
    use crate::testing::{for_each_isa, test_len, ulp_error, unary_reference};

    /// `pow2`, `mul_pow2` and `mul_pow2_floor` (AVX-512: `vscalefps`) on every
    /// path against f64 arithmetic: `2^n` exactly, and `p 2^n` rounded once,
    /// subnormal results too, `mul_pow2_floor` and `floor` from `n` plus
    /// sixteenths.
    #[test]
    fn pow2_scalings_are_exact_or_rounded_once() {
        let ps = [
            1.0f32,
            1.5,
            1.999_999_9,
            0.75,
            -1.25,
            1.234_567_9,
            0.500_000_06,
        ];
        // 2^n built from its bits (Miri perturbs `powi` within its error bound).
        let two_to = |n: i32| f64::from_bits(((n + 1023) as u64) << 52);
        for_each_isa(|isa| {
            for n in -126..=127 {
                let nf = n as f32;
                let mut out = [0.0f32; MAX_LANES];
                dispatch!(|V| V::splat(nf).pow2().store(&mut out));
                assert_eq!(out[0], two_to(n) as f32, "{}: pow2({n})", isa.name());
                for p in ps {
                    dispatch!(|V| V::splat(p).mul_pow2(V::splat(nf)).store(&mut out));
                    let want = (p as f64 * two_to(n)) as f32;
                    assert_eq!(
                        out[0].to_bits(),
                        want.to_bits(),
                        "{}: {p:e} * 2^{n} = {:e}, want {want:e}",
                        isa.name(),
                        out[0]
                    );
                    let w = nf + 0.9375;
                    dispatch!(|V| V::splat(p).mul_pow2_floor(V::splat(w)).store(&mut out));
                    let got = out[0].to_bits();
                    assert_eq!(got, want.to_bits(), "{}: {p:e} * 2^floor({w})", isa.name());
                }
                for frac in [0.0, 0.0625, 0.5, 0.9375] {
                    let w = nf + frac;
                    dispatch!(|V| V::splat(w).floor().store(&mut out));
                    assert_eq!(out[0], nf, "{}: floor({w})", isa.name());
                }
            }
        });
    }

    /// The table-driven erf on every path's `lookup8`: AVX2 runs it in
    /// production, scalar and NEON only here. Against f64 libm, within the bound.
    #[test]
    fn erf_table_form_within_bound_on_every_path() {
        let n = test_len(200_000, 64);
        let mut xs: Vec<f32> = (0..n)
            .map(|i| -5.0 + 10.0 * (i as f32 / n as f32))
            .collect();
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            -1e-40,
            0.25,
            3.75,
            3.92,
            4.0,
            1e30,
        ]);
        for_each_isa(|isa| {
            for &x in &xs {
                let mut out = [0.0f32; MAX_LANES];
                dispatch!(|V| erf_table_v(V::splat(x)).store(&mut out));
                let want = unary_reference(UnaryOp::Erf, x as f64);
                let e = ulp_error(out[0], want);
                assert!(
                    e <= ERF_MAX_ULP && out[0].is_sign_negative() == x.is_sign_negative()
                        || x.is_nan() && e == 0.0,
                    "{}: erf({x:e}) = {:e}, want {want:e} ({e} ulp)",
                    isa.name(),
                    out[0]
                );
            }
        });
    }

    /// `lookup8`, `lookup16` and `lookup32` on every path read entry `i` for the
    /// index `i + ROUND_MAGIC` the table forms build, each lane its own (lane `l`
    /// of round `i` asks for entry `i + 7 l`, wrapped to the table).
    #[test]
    fn lookups_read_the_entry_at_each_index_on_every_path() {
        let table: [f32; 32] = core::array::from_fn(|i| 100.0 + i as f32);
        let first16: &[f32; 16] = table[..16].try_into().unwrap();
        for_each_isa(|isa| {
            for i in 0..32 {
                for size in [8, 16, 32] {
                    let entry = |lane: usize| (i + 7 * lane) % size;
                    let s: [f32; MAX_LANES] =
                        core::array::from_fn(|lane| entry(lane) as f32 + ROUND_MAGIC);
                    let mut out = [0.0f32; MAX_LANES];
                    let lanes = dispatch!(|V| {
                        let v = V::load(&s);
                        let y = match size {
                            8 => v.lookup8(table[..8].try_into().unwrap()),
                            16 => v.lookup16(first16),
                            _ => v.lookup32(&table),
                        };
                        y.store(&mut out);
                        V::LANES
                    });
                    for (lane, &got) in out[..lanes].iter().enumerate() {
                        let want = table[entry(lane)];
                        assert_eq!(got, want, "{}: lookup{size}, lane {lane}", isa.name());
                    }
                }
            }
        });
    }

    /// A table-driven form, for [`check_table_form`].
    #[derive(Clone, Copy)]
    enum Form {
        /// `gelu_table_v`: GELU_T's first eight intervals.
        Gelu8,
        /// `gelu_wide_v`: all sixteen.
        Gelu16,
        /// `gelu_tail_v`: the eight, then `GELU_TAIL`.
        GeluTail,
        /// `softplus_table_v`.
        Softplus,
        /// `tanh_table_v`.
        Tanh,
    }

    /// Checks a table-driven form on every path against f64 libm, within its
    /// function's bound: densely over `|x| < max`, at its interval edges (four
    /// f32 steps either side of each, both signs), and at `extra`.
    fn check_table_form(form: Form, max: f32, edges: impl Iterator<Item = f32>, extra: &[f32]) {
        let (op, bound) = match form {
            Form::Softplus => (UnaryOp::Softplus, SOFTPLUS_MAX_ULP),
            Form::Tanh => (UnaryOp::Tanh, TANH_MAX_ULP),
            Form::Gelu8 | Form::Gelu16 | Form::GeluTail => (UnaryOp::Gelu, GELU_MAX_ULP),
        };
        let n = test_len(200_000, 64);
        let mut xs: Vec<f32> = (0..n)
            .map(|i| max * (2.0 * i as f32 / n as f32 - 1.0))
            .collect();
        for edge in edges {
            let bits = edge.to_bits();
            for x in (bits - 4..=bits + 4).map(f32::from_bits) {
                xs.extend([x, -x]);
            }
        }
        xs.extend(extra);
        for_each_isa(|isa| {
            for &x in xs.iter().filter(|x| x.abs() < max) {
                let mut out = [0.0f32; MAX_LANES];
                dispatch!(|V| {
                    let v = V::splat(x);
                    let y = match form {
                        Form::Gelu8 => gelu_table_v(v, v.abs()),
                        Form::Gelu16 => {
                            let a = v.abs();
                            gelu_wide_v(v, a, gelu_table16(a), relu_v(v))
                        }
                        Form::GeluTail => {
                            let a = v.abs();
                            gelu_tail_v(v, a, gelu_table_v(v, a))
                        }
                        Form::Softplus => softplus_table_v(v),
                        Form::Tanh => tanh_table_v(v),
                    };
                    y.store(&mut out)
                });
                let want = unary_reference(op, x as f64);
                let e = ulp_error(out[0], want);
                assert!(
                    e <= bound,
                    "{}: {}({x:e}) = {:e}, want {want:e} ({e} ulp)",
                    isa.name(),
                    op.name(),
                    out[0]
                );
            }
        });
    }

    /// The table-driven GELU on every path's `lookup8` (AVX2 and AVX-512 run it
    /// in production).
    #[test]
    fn gelu_table_form_within_bound_on_every_path() {
        let edges = (0..8).map(|i| 0.25 + 0.5 * i as f32);
        let extra = [0.0, -0.0, f32::MIN_POSITIVE, -1e-40, 1e-30, -3.749_999_8];
        check_table_form(Form::Gelu8, GELU_TABLE_MAX, edges, &extra);
    }

    /// The sixteen-interval GELU on every path's `lookup16` (AVX-512 runs it in
    /// production for vectors with a lane past 3.75).
    #[test]
    fn gelu_wide_form_within_bound_on_every_path() {
        let edges = (0..16).map(|i| 0.25 + 0.5 * i as f32);
        let extra = [0.0, -0.0, -1e-40, -3.75, 3.75, -11.999_999, 11.999_999];
        check_table_form(Form::Gelu16, GELU_FAST, edges, &extra);
    }

    /// The eight intervals and the tail polynomial on every path's `lookup8`
    /// (AVX2 runs it in production for vectors with a lane past 3.75): densely,
    /// at the eight intervals' edges and either side of the switch at 3.75 and
    /// the polynomial's centre, out to `GELU_FAST`.
    #[test]
    fn gelu_tail_form_within_bound_on_every_path() {
        let edges = (0..8)
            .map(|i| 0.25 + 0.5 * i as f32)
            .chain([GELU_TABLE_MAX, GELU_TAIL_MID]);
        let extra = [0.0, -0.0, -1e-40, -11.999_999, 11.999_999];
        check_table_form(Form::GeluTail, GELU_FAST, edges, &extra);
    }

    /// GELU's `e^{-a^2/2}` on every path within 1.25 ULP of f64 libm's (1.06
    /// seen; a table entry three f32 steps off fails it), densely over `[0,
    /// GELU_FAST]` and at `a` where `v = round(-a^2 8/ln2)` moves to the next
    /// sixteenth (the table index) or the next power of two (`k`).
    #[test]
    fn exp_neg_half_sq_within_bound_on_every_path() {
        let n = test_len(400_000, 64);
        let mut xs: Vec<f32> = (0..=n).map(|i| GELU_FAST * i as f32 / n as f32).collect();
        for v in [1, 15, 16, 17, 31, 32, 33, 512, 1023, 1024, 1600] {
            // a^2 = (v - 1/2) ln2/8 either side: where `16w` steps from v - 1 to v.
            let a = ((v as f64 - 0.5) * core::f64::consts::LN_2 / 8.0).sqrt() as f32;
            let bits = a.to_bits();
            xs.extend((bits - 2..=bits + 2).map(f32::from_bits));
        }
        for_each_isa(|isa| {
            for &a in &xs {
                let mut out = [0.0f32; MAX_LANES];
                dispatch!(|V| exp_neg_half_sq_v(V::splat(a)).store(&mut out));
                let want = libm::exp(-0.5 * f64::from(a) * f64::from(a));
                let e = ulp_error(out[0], want);
                let at = format!("{}: e^(-a^2/2) at {a:e}", isa.name());
                assert!(e <= 1.25, "{at} = {:e}, want {want:e} ({e} ulp)", out[0]);
            }
        });
    }

    /// The exponential's reductions in both units ([`Natural`] `e^x`, [`Binary`]
    /// `2^t`) on every path against f64 libm: [`exp_sixteenths`] (on every path's
    /// `lookup16`; AVX-512 runs it) without and with the table's low parts within
    /// 1.1 and 0.65 ULP (natural: 0.99 and 0.57 over every f32 on AVX-512; an
    /// entry one f32 step off, or a low part of the wrong sign, fails it), and
    /// [`ExpUnit::reduce`] (the other paths) within 1.25, densely over the common
    /// range and either side of where `t` (`x log2 e`) rounds to the next
    /// sixteenth or integer.
    #[test]
    fn exp_reductions_within_bound_on_every_path() {
        use core::f64::consts::LN_2;
        let n = test_len(400_000, 24);
        let (lo, hi) = (
            f64::from(EXP_NORMAL_LO) / LN_2,
            -f64::from(EXP_NORMAL_LO) / LN_2,
        );
        let mut ts: Vec<f64> = (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / n as f64)
            .collect();
        let sixteenths = [
            -2007, -1000, -17, -16, -15, -1, 0, 1, 7, 8, 15, 16, 17, 31, 1000, 2000,
        ];
        ts.extend(sixteenths.map(|v| (v as f64 + 0.5) / 16.0));
        ts.extend([-125.5, -1.5, -0.5, 0.5, 1.5, 124.5]);
        for_each_isa(|isa| {
            for &t in &ts {
                for a in near(t as f32) {
                    check_exp_unit::<Binary>(isa.name(), a, libm::exp2(f64::from(a)));
                }
                for x in near((t * LN_2) as f32) {
                    check_exp_unit::<Natural>(isa.name(), x, libm::exp(f64::from(x)));
                }
            }
        });
    }

    /// [`exp_in`] in binary units (softmax's) against f64 `exp2` on every path, within
    /// [`EXP_MAX_ULP`] (subnormal results in their spacing): each value of the
    /// common range alone in a vector, which then takes the common case, and
    /// beside a NaN, which sends the vector down the full path, with the same bits
    /// both ways; and the full path's own range (subnormal results, underflow,
    /// overflow, infinities, NaN).
    #[test]
    fn exp2_same_bits_on_both_paths_within_bound() {
        let n = test_len(100_000, 24);
        let common = (0..=n).map(|i| -125.0 + 250.0 * i as f32 / n as f32);
        let edges = [-125.5, -125.0, -124.5, -0.5, 0.5, 124.5, 125.0, 125.5];
        let full = [
            -126.5,
            -130.3,
            -149.0,
            -149.5,
            -150.0,
            -151.0,
            -180.0,
            -1e30,
            127.5,
            127.999_99,
            128.0,
            200.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
        ];
        let ts: Vec<f32> = common.chain(edges.iter().flat_map(|&e| near(e))).collect();
        for_each_isa(|isa| {
            for &t in ts.iter().chain(&full) {
                let mut beside_nan = [f32::NAN; MAX_LANES];
                beside_nan[0] = t;
                let mut out = [[0.0f32; MAX_LANES]; 2];
                dispatch!(|V| {
                    exp_in::<V, Binary>(V::splat(t)).store(&mut out[0]);
                    exp_in::<V, Binary>(V::load(&beside_nan)).store(&mut out[1]);
                });
                let (alone, mixed) = (out[0][0], out[1][0]);
                let want = libm::exp2(f64::from(t));
                let e = ulp_error(alone, want);
                let at = format!("{}: exp2({t:e}) = {alone:e}", isa.name());
                assert!(e <= EXP_MAX_ULP, "{at}, want {want:e} ({e} ulp)");
                let same = alone.to_bits() == mixed.to_bits() || alone.is_nan() && mixed.is_nan();
                assert!(same, "{at} alone, {mixed:e} beside a NaN");
            }
        });
    }

    /// `a` and the two f32s either side of it.
    fn near(a: f32) -> [f32; 5] {
        let (down, up) = (a.next_down(), a.next_up());
        [down.next_down(), down, a, up, up.next_up()]
    }

    /// Asserts [`exp_sixteenths`] (without and with low parts) and
    /// [`ExpUnit::reduce`] of `a` (unit `U`) within their bounds of `want`.
    fn check_exp_unit<U: ExpUnit>(isa: &str, a: f32, want: f64) {
        let mut out = [[0.0f32; MAX_LANES]; 3];
        dispatch!(|V| {
            let (w, p) = exp_sixteenths::<V, U, false>(V::splat(a));
            p.mul_pow2_floor(w).store(&mut out[0]);
            let (w, p) = exp_sixteenths::<V, U, true>(V::splat(a));
            p.mul_pow2_floor(w).store(&mut out[1]);
            let (n, p) = U::reduce(V::splat(a));
            p.mul_pow2_normal(n).store(&mut out[2]);
        });
        let unit = core::any::type_name::<U>();
        for (got, bound, form) in [
            (out[0][0], 1.1, "table"),
            (out[1][0], 0.65, "table with low parts"),
            (out[2][0], 1.25, "reduce"),
        ] {
            let e = ulp_error(got, want);
            let at = format!("{isa}: {unit} {form} at {a:e}, bound {bound}");
            assert!(e <= bound, "{at}: {got:e}, want {want:e} ({e} ulp)");
        }
    }

    /// The table-driven tanh on every path's `lookup32` (AVX-512 runs it in
    /// production), past its clamp too.
    #[test]
    fn tanh_table_form_within_bound_on_every_path() {
        let edges = (1..32)
            .map(|i| TANH_STEP * i as f32)
            .chain([TANH_TABLE_MAX]);
        let extra = [
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -1e-40,
            1e-30,
            9.01,
            TANH_ONE,
            11.5,
        ];
        check_table_form(Form::Tanh, 12.0, edges, &extra);
    }

    /// The table-driven softplus on every path's `lookup16` (AVX-512 runs it in
    /// production).
    #[test]
    fn softplus_table_form_within_bound_on_every_path() {
        let edges = (0..16).map(|i| 0.5 + i as f32);
        let extra = [0.0, -0.0, f32::MIN_POSITIVE, -1e-40, 1e-30, -15.499_999];
        check_table_form(Form::Softplus, SOFTPLUS_TABLE_MAX, edges, &extra);
    }

    /// A vector mixing table lanes and formula lanes (GELU: |x| >= 3.75 and >= 12;
    /// softplus: |x| >= 15.5; NaN, inf), or common-case lanes and full-path lanes
    /// (exp: |x| >= 87; sigmoid, SiLU, GELU-tanh: |x| >= 80), gives every lane the
    /// bits that input gets alone.
    #[test]
    fn lanes_do_not_depend_on_their_neighbours() {
        type MathFn = fn(&[f32], &mut [f32]) -> Result<()>;
        let xs = [
            1.0,
            3.75,
            -3.7,
            -3.75,
            0.3,
            12.5,
            -20.0,
            f32::NAN,
            -0.6,
            f32::NEG_INFINITY,
            2.0,
            -1e-3,
            3.749_999_8,
            -4.0,
            0.0,
            7.0,
        ];
        let softplus_xs = [
            1.0,
            15.5,
            -15.4,
            -15.5,
            0.3,
            20.0,
            -100.0,
            f32::NAN,
            -0.6,
            f32::INFINITY,
            2.0,
            -1e-3,
            15.499_999,
            -16.0,
            0.0,
            -7.0,
        ];
        // Every other value sends its vector down the full path, whatever the
        // lane count and the head the kernel peels.
        let mut common = vec![0.0f32; test_len(4000, 40)];
        crate::testing::Rng::new(7).fill(&mut common, -20.0, 20.0);
        common.extend([1.0, -1e-40, -1e-3, -79.9, 79.9, 5e-39, -0.0, 0.0]);
        let full = [
            100.0,
            -87.5,
            f32::NAN,
            f32::NEG_INFINITY,
            f32::INFINITY,
            -90.0,
            88.5,
            -1e30,
            1e30,
            -100.0,
            f32::MAX,
            -88.0,
        ];
        let mixed: Vec<f32> = common
            .into_iter()
            .zip(full.into_iter().cycle())
            .flat_map(<[f32; 2]>::from)
            .collect();
        let cases = [
            (gelu as MathFn, &xs[..]),
            (softplus, &softplus_xs),
            (exp, &mixed),
            (sigmoid, &mixed),
            (silu, &mixed),
            (gelu_tanh, &mixed),
        ];
        for (f, xs) in cases {
            for_each_isa(|isa| {
                let mut together = vec![0.0f32; xs.len()];
                f(xs, &mut together).unwrap();
                for (&x, &y) in xs.iter().zip(&together) {
                    let mut alone = [0.0f32; 1];
                    f(&[x], &mut alone).unwrap();
                    assert!(
                        y.to_bits() == alone[0].to_bits() || y.is_nan() && alone[0].is_nan(),
                        "{}: f({x:e}) = {y:e} among others, {:e} alone",
                        isa.name(),
                        alone[0]
                    );
                }
            });
        }
    }
}
