//! `matmul` of two f32 activations (a constant 2-D right operand is a packed
//! [`super::steps::StepKind::Linear`] instead) with equal batch dims: one rml-kernels
//! GEMM per batch entry, transposes expressed as strides. Broadcast batch dims and
//! empty dims are left to rml-core.

use rml_kernels::gemm::{self, MatMut, MatRef};

use super::conv::with_scratch;

/// `out = op(a) · op(b)` per batch entry; `false` (nothing written) when the ranks,
/// batch dims, inner sizes or lengths do not fit.
pub fn matmul(
    (a, a_dims): (&[f32], &[usize]),
    (b, b_dims): (&[f32], &[usize]),
    [transpose_a, transpose_b]: [bool; 2],
    out: &mut [f32],
) -> bool {
    let rank = a_dims.len();
    if rank < 2 || b_dims.len() != rank || a_dims[..rank - 2] != b_dims[..rank - 2] {
        return false;
    }
    let (ra, ca, rb, cb) = (
        a_dims[rank - 2],
        a_dims[rank - 1],
        b_dims[rank - 2],
        b_dims[rank - 1],
    );
    let (m, k) = if transpose_a { (ca, ra) } else { (ra, ca) };
    let (k2, n) = if transpose_b { (cb, rb) } else { (rb, cb) };
    let batch: usize = a_dims[..rank - 2].iter().product();
    let fits = k == k2
        && m * k * n * batch > 0
        && a.len() == batch * ra * ca
        && b.len() == batch * rb * cb
        && out.len() == batch * m * n;
    if !fits {
        return false;
    }
    with_scratch(gemm::gemm_scratch_len(m, n, k), |scratch| {
        for ((a, b), c) in a
            .chunks_exact(ra * ca)
            .zip(b.chunks_exact(rb * cb))
            .zip(out.chunks_exact_mut(m * n))
        {
            let done = (|| {
                let a = MatRef::row_major(a, ra, ca)?;
                let b = MatRef::row_major(b, rb, cb)?;
                let a = if transpose_a { a.t() } else { a };
                let b = if transpose_b { b.t() } else { b };
                gemm::gemm(1.0, a, b, 0.0, MatMut::row_major(c, m, n)?, scratch)
            })();
            debug_assert!(done.is_ok(), "dims are checked above");
        }
    });
    true
}
