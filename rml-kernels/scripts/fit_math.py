#!/usr/bin/env python3
"""Derives the polynomial coefficients of rml-kernels' vector math (src/math.rs).

Each approximation is a near-minimax polynomial found by Lawson's algorithm
(iteratively reweighted least squares converging to the minimax fit) on a dense
Chebyshev-distributed grid, in float64, with the error weighted so that it is the
*relative* error of the final function. Coefficients are printed rounded to f32 as
Rust constants, highest degree first (Horner order); the printed max error is that
of the f32-rounded coefficients evaluated in float64 (the f32 evaluation error is
measured separately by the Rust tests and `examples/math_error.rs`).

Run:  python3 rml-kernels/scripts/fit_math.py      (needs numpy only)
"""
import math

import numpy as np


def cheb_grid(a, b, n=8001):
    k = np.arange(n)
    return 0.5 * (a + b) + 0.5 * (b - a) * np.cos(np.pi * (k + 0.5) / n)[::-1]


def lawson(u, target, weight, degree, iters=200):
    """Minimax fit of sum_k c_k u^k to target, minimising max |weight*(p-target)|."""
    v = np.vander(u, degree + 1, increasing=True)
    lw = np.ones_like(u) / len(u)
    c = None
    for _ in range(iters):
        sw = np.sqrt(lw) * weight
        c, *_ = np.linalg.lstsq(v * sw[:, None], target * sw, rcond=None)
        err = np.abs(weight * (v @ c - target))
        lw = lw * err
        lw /= lw.sum()
    return c


def lawson_basis(v, target, weight, iters=300):
    """Minimax fit of v @ c to target (columns of v: the basis), as `lawson`."""
    lw = np.ones(len(target)) / len(target)
    c = None
    for _ in range(iters):
        sw = np.sqrt(lw) * weight
        c, *_ = np.linalg.lstsq(v * sw[:, None], target * sw, rcond=None)
        err = np.abs(weight * (v @ c - target))
        lw = lw * err
        lw /= lw.sum()
    return c


def erf_table():
    """erf(a) = c_i + t P_i(t), t = a - i/2, i = round(2a) clamped to 7 (AVX2 erf).

    Interval i covers [i/2 - 1/4, i/2 + 1/4) (interval 0: [0, 1/4), where c_0 = 0
    and t = a, so small arguments keep their relative precision; interval 7:
    [3.25, 4], where erf rounds to 1 from 3.92). `c_i` is erf(i/2) rounded to f32
    and the degree-5 `P_i` is fitted to the relative error of erf around it.
    Printed as one row per coefficient (highest degree first, then `c_i`), eight
    intervals per row: the `vpermps` tables.
    """
    erf = np.vectorize(math.erf)
    rows = [[] for _ in range(7)]
    worst = 0.0
    for i in range(8):
        lo, hi = max(0.5 * i - 0.25, 1e-7), (0.5 * i + 0.25 if i < 7 else 4.0)
        a = cheb_grid(lo, hi)
        t = a - 0.5 * i
        ci = float(np.float32(math.erf(0.5 * i)))
        v = np.vander(t, 6, increasing=True) * t[:, None]
        c = lawson_basis(v, erf(a) - ci, 1.0 / erf(a))
        c32 = c.astype(np.float32).astype(np.float64)
        worst = max(worst, np.max(np.abs((v @ c32 + ci - erf(a)) / erf(a))))
        for k, coef in enumerate(c32[::-1]):
            rows[k].append(coef)
        rows[6].append(ci)
    print(f"// ERF_T: degree 5 per interval, max relative error {worst:.3e}")
    print("const ERF_T: [[f32; 8]; 7] = [")
    for r in rows:
        print("    [" + ", ".join(f"{float(np.float32(x))!r}" for x in r) + "],")
    print("];")


def rust_f32(x):
    """The shortest decimal that reads back as f32 `x`, digits grouped by 3 as in
    src/math.rs (for example `-0.019_444_201`, `1.635_691_8e-6`)."""
    text = np.format_float_scientific(np.float32(x), unique=True, exp_digits=1)
    mantissa, exponent = text.split("e")
    exponent = int(exponent)
    if -5 <= exponent < 0 or exponent == 0:
        text, exponent = np.format_float_positional(np.float32(x), unique=True), None
        mantissa = text
    sign = "-" if mantissa.startswith("-") else ""
    whole, _, frac = mantissa.lstrip("-").partition(".")
    frac = "_".join(frac[k:k + 3] for k in range(0, len(frac), 3)) or "0"
    tail = f"e{exponent}" if exponent is not None else ""
    return f"{sign}{whole}.{frac}{tail}"


def fit_interval(f, a, center, degree, rows):
    """Fits `f(a) = c + t P(t)`, `t = a - center`, on the grid `a` for a table.

    `c` is `f(center)` rounded to f32 and the degree-`degree` `P` is fitted to the
    relative error of `f`, its coefficients rounded to f32 one at a time (lowest
    degree first), each round followed by a refit of the higher ones, so the later
    fits absorb the rounding. Appends the coefficients to `rows` (highest degree
    first, then `c`: one table row each) and returns the max relative error of the
    rounded fit in float64.
    """
    t = a - center
    ci = float(np.float32(f(center)))
    v = np.vander(t, degree, increasing=True) * t[:, None]
    target, weight = f(a) - ci, 1.0 / f(a)
    fixed = []
    for k in range(degree):
        done = v[:, :k] @ np.array(fixed) if fixed else 0.0
        c = lawson_basis(v[:, k:], target - done, weight)
        fixed.append(float(np.float32(c[0])))
    c32 = np.array(fixed)
    for k, coef in enumerate(c32[::-1]):
        rows[k].append(coef)
    rows[degree].append(ci)
    return np.max(np.abs((v @ c32 + ci - f(a)) / f(a)))


def print_table(name, rows, sign=1.0):
    """Prints `rows` as a Rust `[[f32; N]; M]` constant, each entry times `sign`."""
    print(f"const {name}: [[f32; {len(rows[0])}]; {len(rows)}] = [")
    for r in rows:
        print("    [" + ", ".join(rust_f32(sign * x) for x in r) + "],")
    print("];")


# `a Phi(-a) e^{a^2/2}`, Phi(-a) = erfc(a/sqrt2)/2: a scaled Mills ratio, near
# 1/sqrt(2 pi) and slowly varying for a >= 3.75 (GELU's tail, times e^{-a^2/2}).
scaled_mills = np.vectorize(
    lambda a: a * 0.5 * math.erfc(a / math.sqrt(2.0)) * math.exp(a * a / 2))


def gelu_table():
    """GELU's sixteen-interval table, `i = round(2a)`, `t = a - i/2`, `a = |x|`.

    Intervals 0-7 (`a < 3.75`, the AVX2 table): `-Phi(-a) = c_i + t P_i(t)`.
    Phi(-a) = erfc(a/sqrt2)/2 is the standard normal's lower tail, so GELU is
    `relu(x) - a Phi(-a)`: the table holds -Phi(-a) so that the last step is one
    FMA. Interval i covers [i/2 - 1/4, i/2 + 1/4] (interval 0: [0, 1/4]).
    Intervals 8-15 (`3.75 <= a < 12`, vectors with a lane past 3.75):
    `-a Phi(-a) e^{a^2/2}` (a scaled Mills ratio, near -1/sqrt(2 pi) and slowly
    varying), which the kernel multiplies by `e^{-a^2/2}`; interval 15 stretches
    to [7.25, 12]. Degree-6 `P_i` (see `fit_interval`; the fit is of the positive
    function, negated when printed). Printed as one row per coefficient (highest
    degree first, then `c_i`), sixteen intervals per row: the `vpermps` tables.
    """
    phi = np.vectorize(lambda a: 0.5 * math.erfc(a / math.sqrt(2.0)))
    degree = 6
    rows = [[] for _ in range(degree + 1)]
    worst = [0.0, 0.0]
    for i in range(16):
        f = phi if i < 8 else scaled_mills
        a = cheb_grid(max(0.5 * i - 0.25, 0.0), 0.5 * i + 0.25 if i < 15 else 12.0)
        err = fit_interval(f, a, 0.5 * i, degree, rows)
        worst[i >= 8] = max(worst[i >= 8], err)
    print(f"// GELU_T: degree 6 per interval, max relative error {worst[0]:.3e} "
          f"(intervals 0-7), {worst[1]:.3e} (8-15)")
    print_table("GELU_T", rows, -1.0)


def gelu_tail():
    """GELU's tail polynomial on AVX2: `-a Phi(-a) e^{a^2/2} = sum_k c_k t^k`,
    `t = a - 7.875`, on `[3.75, 12]` (where `gelu_table` has intervals 8-15), one
    degree-11 polynomial instead of the sixteen-entry table that takes AVX2 two
    `vpermps` and a blend per coefficient. Fitted as `fit_interval` fits an
    interval (the same relative error), printed lowest degree first (math.rs
    evaluates it by Estrin's scheme), negated as the table is.
    """
    degree = 11
    rows = [[] for _ in range(degree + 1)]
    err = fit_interval(scaled_mills, cheb_grid(3.75, 12.0), 7.875, degree, rows)
    coefficients = [-r[0] for r in rows][::-1]
    print(f"// GELU_TAIL: degree {degree}, max relative error {err:.3e}")
    print(f"const GELU_TAIL: [f32; {degree + 1}] = [" +
          ", ".join(rust_f32(c) for c in coefficients) + "];")


def softplus_table():
    """log1p(e^{-a}) = c_i + t P_i(t), t = a - i, i = round(a) clamped to 15 (softplus).

    Softplus is `max(x, 0) + log1p(e^{-a})`, `a = |x|`; the table covers `a <
    15.5` (beyond, the kernel's formula). Interval i covers [i - 1/2, i + 1/2]
    (interval 0: [0, 1/2]); `f` falls like `e^{-a}`, so a degree-6 `P_i` per unit
    interval fits its relative error (see `fit_interval`). Printed as one row per
    coefficient (highest degree first, then `c_i`), sixteen intervals per row.
    """
    f = np.vectorize(lambda a: math.log1p(math.exp(-a)))
    degree = 6
    rows = [[] for _ in range(degree + 1)]
    worst = 0.0
    for i in range(16):
        a = cheb_grid(max(i - 0.5, 0.0), i + 0.5)
        worst = max(worst, fit_interval(f, a, float(i), degree, rows))
    print(f"// SOFTPLUS_T: degree 6 per interval, max relative error {worst:.3e}")
    print_table("SOFTPLUS_T", rows)


def tanh_table():
    """tanh(a) = c_i + t P_i(t), t = a - i w, i = floor(a / w), w = 0.3125.

    Thirty-two intervals [i w, (i + 1) w] cover a = |x| up to 10 (tanh rounds to
    1 from 9.01; the kernel clamps a to 31.5 w, so i stops at 31), fitted a
    little past both ends (the kernel's rounded a / w may put a lane a hair
    outside). `t >= 0`, so `c_i` and `t P_i(t)` never cancel;
    interval 0 has `c_0 = 0`, keeping small arguments' relative precision. A
    degree-6 `P_i` reaches the f32 rounding of the `c_i` (3.6e-8; sixteen
    intervals of twice the width needed degree 8 for that, two more lookups per
    vector; see `fit_interval`). Printed as one row per coefficient (highest
    degree first, then `c_i`), thirty-two intervals per row (AVX-512 `vpermi2ps`
    tables).
    """
    f = np.vectorize(math.tanh)
    degree, w = 6, 0.3125
    rows = [[] for _ in range(degree + 1)]
    worst = 0.0
    for i in range(32):
        a = cheb_grid(max(i * w - 1e-3, 0.0), (i + 1) * w + 1e-3)
        worst = max(worst, fit_interval(f, a, i * w, degree, rows))
    print(f"// TANH_T: degree 6 per interval, max relative error {worst:.3e}")
    print_table("TANH_T", rows)


def exp2_sixteenths():
    """`2^{j/16}` for j in 0..16, each rounded to the nearest f32 from its
    float64 value (`EXP2_SIXTEENTHS`: AVX-512's exp and GELU's `e^{-a^2/2}`); entry 8 is
    sqrt 2, which clippy wants spelled as the constant."""
    print("const EXP2_SIXTEENTHS: [f32; 16] = [")
    for j in range(16):
        value = "core::f32::consts::SQRT_2" if j == 8 else rust_f32(2.0 ** (j / 16))
        print(f"    {value},")
    print("];")


def exp2_sixteenths_lo():
    """`2^{j/16}` less its f32 (`EXP2_SIXTEENTHS`), rounded to f32: the low
    parts AVX-512's exp adds back (`EXP2_SIXTEENTHS_LO`)."""
    print("const EXP2_SIXTEENTHS_LO: [f32; 16] = [")
    for j in range(16):
        value = 2.0 ** (j / 16)
        print(f"    {rust_f32(value - float(np.float32(value)))},")
    print("];")


def report(name, c, u, target, weight):
    c32 = c.astype(np.float32).astype(np.float64)
    v = np.vander(u, len(c), increasing=True)
    err = np.max(np.abs(weight * (v @ c32 - target)))
    print(f"// {name}: degree {len(c) - 1}, max weighted error {err:.3e}")
    consts = ", ".join(f"{float(np.float32(x))!r}" for x in c[::-1])
    print(f"const {name}: [f32; {len(c)}] = [{consts}];")
    return err


def main():
    erfc = np.vectorize(math.erfc)

    # exp(r) = 1 + r + r^2 q(r); relative error of exp. |r| <= ln2/2, and
    # |r| <= ln2/32 for AVX-512's exp after the 2^{j/16} table.
    for name, half_width, degree in [("EXP_Q", math.log(2) / 2, 4),
                                     ("EXP16_Q", math.log(2) / 32, 1)]:
        r = cheb_grid(-half_width, half_width)
        q = (np.expm1(r) - r) / r**2
        w = r**2 / np.exp(r)
        report(name, lawson(r, q, w, degree), r, q, w)

    # 2^r = 1 + r P(r) for arguments in binary units (GELU-tanh's); relative
    # error of 2^r. |r| <= 1/2, and |r| <= 1/32 after AVX-512's table. P's
    # constant term is ln2 rounded to f32 and the rest is fitted around it:
    # rounding a free fit's constant term would cost EXP2_P 1.6e-8 (3.6e-9 so).
    # (math.rs writes that term as `core::f32::consts::LN_2`.)
    ln2_f32 = float(np.float32(math.log(2)))
    for name, half_width, degree in [("EXP2_P", 0.5, 5), ("EXP2_16_P", 1 / 32, 2)]:
        r = cheb_grid(-half_width, half_width)
        pp = np.expm1(r * math.log(2)) / r
        w = r / np.exp2(r)
        rest = lawson(r, (pp - ln2_f32) / r, w * r, degree - 1)
        report(name, np.concatenate([[ln2_f32], rest]), r, pp, w)

    # log(m) = 2s + s^3 R(s^2), s = (m-1)/(m+1), m in [sqrt(1/2), sqrt(2)).
    smax = (math.sqrt(2) - 1) / (math.sqrt(2) + 1)
    s = cheb_grid(1e-4, smax)
    u = s * s
    rr = (2 * np.arctanh(s) - 2 * s) / s**3
    w = s**3 / (2 * np.arctanh(s))
    report("LOG_R", lawson(u, rr, w, 3), u, rr, w)

    # log1p(t) = 2s + s^3 R(s^2), s = t/(2+t) in [0, 1/3] for t in [0, 1] (softplus).
    s = cheb_grid(1e-4, 1.0 / 3.0)
    u = s * s
    rr = (2 * np.arctanh(s) - 2 * s) / s**3
    w = s**3 / (2 * np.arctanh(s))
    report("LOG1P_R", lawson(u, rr, w, 4), u, rr, w)

    # erf(x) = x Q(x^2) for |x| <= ERF_SMALL = 0.875; relative error.
    x = cheb_grid(1e-4, 0.875)
    u = x * x
    qq = np.vectorize(math.erf)(x) / x
    report("ERF_Q", lawson(u, qq, np.ones_like(u) / qq, 7), u, qq, np.ones_like(u) / qq)

    # erfc(x) = exp(-x^2) H(x - 0.875) for 0.875 <= x <= 4 (erf only); the error
    # weighted as its effect on erf = 1 - erfc.
    x = cheb_grid(0.875, 4.0)
    h = erfc(x) * np.exp(x * x)
    w = erfc(x) / np.vectorize(math.erf)(x) / h
    report("ERF_H", lawson(x - 0.875, h, w, 8), x - 0.875, h, w)

    # erfc(x) = exp(-x^2) G(t), t = 1/(1 + x/2), for 0 <= x <= 10 (GELU's whole
    # range: GELU = x/2 erfc(-x/sqrt2) never cancels); relative error of erfc.
    x = cheb_grid(0.0, 10.0)
    t = 1.0 / (1.0 + 0.5 * x)
    g = erfc(x) * np.exp(x * x)
    report("ERFC_G", lawson(t, g, 1.0 / g, 10), t, g, 1.0 / g)

    erf_table()
    gelu_table()
    gelu_tail()
    softplus_table()
    tanh_table()
    exp2_sixteenths()
    exp2_sixteenths_lo()


if __name__ == "__main__":
    main()
