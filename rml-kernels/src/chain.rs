//! Two binary ops in one pass: `out = second(first(a, b), c)` elementwise, each op
//! rounded on its own (no fused multiply-add), so the bits are those of two
//! [`elementwise::binary`](crate::elementwise::binary) calls while the
//! intermediate stays in a vector register instead of going through memory.

use rml_core::{Error, Result};

use crate::elementwise::BinaryOp;
use crate::simd::{Edges, Simd, dispatch};

/// `out[i] = second(first(a[i], b[i]), c[i])`. Every slice must have `out`'s
/// length ([`Error::LengthMismatch`] otherwise).
pub fn binary_chain(
    [first, second]: [BinaryOp; 2],
    [a, b, c]: [&[f32]; 3],
    out: &mut [f32],
) -> Result<()> {
    let n = out.len();
    if let Some(bad) = [a, b, c].iter().find(|s| s.len() != n) {
        return Err(Error::LengthMismatch {
            expected: n,
            got: bad.len(),
        });
    }
    dispatch!(|V| with_first::<V>(first, second, [a, b, c], out));
    Ok(())
}

/// One binary op on vectors, chosen at compile time.
trait VecOp {
    /// The op on `x` and `y`.
    fn ap<V: Simd>(x: V, y: V) -> V;
}

macro_rules! vec_op {
    ($name:ident, $method:ident) => {
        /// The vector op of one [`BinaryOp`].
        struct $name;

        impl VecOp for $name {
            #[inline(always)]
            fn ap<V: Simd>(x: V, y: V) -> V {
                x.$method(y)
            }
        }
    };
}

vec_op!(AddOp, add);
vec_op!(SubOp, sub);
vec_op!(MulOp, mul);
vec_op!(DivOp, div);
vec_op!(MaxOp, max);
vec_op!(MinOp, min);

/// Picks the first op's type, then [`with_second`].
#[inline(always)]
fn with_first<V: Simd>(first: BinaryOp, second: BinaryOp, abc: [&[f32]; 3], out: &mut [f32]) {
    match first {
        BinaryOp::Add => with_second::<V, AddOp>(second, abc, out),
        BinaryOp::Sub => with_second::<V, SubOp>(second, abc, out),
        BinaryOp::Mul => with_second::<V, MulOp>(second, abc, out),
        BinaryOp::Div => with_second::<V, DivOp>(second, abc, out),
        BinaryOp::Max => with_second::<V, MaxOp>(second, abc, out),
        BinaryOp::Min => with_second::<V, MinOp>(second, abc, out),
    }
}

/// Picks the second op's type, then runs [`chain`].
#[inline(always)]
fn with_second<V: Simd, F: VecOp>(second: BinaryOp, abc: [&[f32]; 3], out: &mut [f32]) {
    match second {
        BinaryOp::Add => chain::<V, F, AddOp>(abc, out),
        BinaryOp::Sub => chain::<V, F, SubOp>(abc, out),
        BinaryOp::Mul => chain::<V, F, MulOp>(abc, out),
        BinaryOp::Div => chain::<V, F, DivOp>(abc, out),
        BinaryOp::Max => chain::<V, F, MaxOp>(abc, out),
        BinaryOp::Min => chain::<V, F, MinOp>(abc, out),
    }
}

/// The loop: whole vectors from `out`'s first vector-aligned element on, and
/// its partial vectors at either end as overlapping whole ones ([`Edges`], as
/// `binary` writes them); an `out` shorter than a vector through padded vectors
/// (as `binary` pads them, with 1.0), so every element gets the bits the two
/// separate ops give it.
#[inline(always)]
fn chain<V: Simd, F: VecOp, G: VecOp>(abc: [&[f32]; 3], out: &mut [f32]) {
    let Some(edges) = Edges::of::<V>(out) else {
        chain_short::<V, F, G>(abc, out);
        return;
    };
    let [a, b, c] = abc;
    let h = edges.head;
    let (a, b, c) = (&a[h..], &b[h..], &c[h..]);
    let out_whole = &mut out[h..];
    let l = V::LANES;
    let main = out_whole.len() - out_whole.len() % l;
    for (((ac, bc), cc), oc) in a[..main]
        .chunks_exact(l)
        .zip(b[..main].chunks_exact(l))
        .zip(c[..main].chunks_exact(l))
        .zip(out_whole[..main].chunks_exact_mut(l))
    {
        chain_at::<V, F, G>([ac, bc, cc], 0).store(oc);
    }
    edges
        .values(
            #[inline(always)]
            |at| chain_at::<V, F, G>(abc, at),
        )
        .store(out);
}

/// The chain over the whole vector at element `at`.
#[inline(always)]
fn chain_at<V: Simd, F: VecOp, G: VecOp>([a, b, c]: [&[f32]; 3], at: usize) -> V {
    G::ap(
        F::ap(V::load(&a[at..]), V::load(&b[at..])),
        V::load(&c[at..]),
    )
}

/// [`chain`] over fewer than `V::LANES` elements, through padded vectors.
#[inline(always)]
fn chain_short<V: Simd, F: VecOp, G: VecOp>([a, b, c]: [&[f32]; 3], out: &mut [f32]) {
    if !out.is_empty() {
        let n = out.len();
        let t: V = F::ap(V::load_tail(&a[..n], 1.0), V::load_tail(&b[..n], 1.0));
        G::ap(t, V::load_tail(&c[..n], 1.0)).store_tail(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::{Operand, binary};
    use crate::testing::for_each_isa;

    /// Values with NaN, infinities, zeros of both signs and subnormals among
    /// ordinary ones.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let special = [
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            0.0,
            -0.0,
            1e-40,
            -3e-39,
        ];
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                if i % 11 == 3 {
                    special[(s as usize) % special.len()]
                } else {
                    (s as f32 / u32::MAX as f32 - 0.5) * 200.0
                }
            })
            .collect()
    }

    /// Bit for bit the two separate `binary` calls (NaN for NaN), for every op
    /// pair, on every ISA, at lengths with and without a tail.
    #[test]
    fn chain_matches_two_binary_calls_bit_for_bit() {
        for_each_isa(|isa| {
            for n in [0, 1, 7, 8, 13, 64, 203] {
                let (a, b, c) = (values(n, 1), values(n, 2), values(n, 3));
                for first in BinaryOp::ALL {
                    for second in BinaryOp::ALL {
                        let mut t = vec![0.0; n];
                        binary(
                            first,
                            Operand::Matrix(&a),
                            Operand::Matrix(&b),
                            n,
                            0..1,
                            &mut t,
                        )
                        .unwrap();
                        let mut want = vec![0.0; n];
                        binary(
                            second,
                            Operand::Matrix(&t),
                            Operand::Matrix(&c),
                            n,
                            0..1,
                            &mut want,
                        )
                        .unwrap();
                        // The output at an offset: a head vector first.
                        let mut got_buf = vec![0.0; n + 5];
                        let got = &mut got_buf[5..];
                        binary_chain([first, second], [&a, &b, &c], got).unwrap();
                        // NaN payloads and signs are not specified (Rust lets the
                        // compiler pick them): any NaN for a NaN.
                        let bits = |v: &[f32]| {
                            v.iter()
                                .map(|x| if x.is_nan() { None } else { Some(x.to_bits()) })
                                .collect::<Vec<_>>()
                        };
                        assert_eq!(bits(got), bits(&want), "{isa:?} {first:?} {second:?} n {n}");
                    }
                }
            }
        });
    }

    #[test]
    fn operands_of_another_length_are_an_error() {
        let mut out = [0.0; 4];
        let err = binary_chain(
            [BinaryOp::Mul, BinaryOp::Add],
            [&[1.0; 4], &[1.0; 3], &[1.0; 4]],
            &mut out,
        );
        assert_eq!(
            err,
            Err(Error::LengthMismatch {
                expected: 4,
                got: 3
            })
        );
    }
}
