//! Nearest-neighbour upsampling (and downsampling) of `[N, C, H, W]` images, for any
//! element type.
//!
//! Output pixel `(oh, ow)` copies input pixel `(src(oh, H, H_out), src(ow, W, W_out))`
//! with PyTorch's `mode="nearest"` rule `src(dst, in, out) = floor(dst * in / out)`,
//! computed here in exact integer arithmetic. (PyTorch evaluates it as
//! `floor(dst * (in / out))` in f32, which lands one lower for some non-integer
//! ratios, such as 2 → 82; for integer scale factors the two agreed on every size
//! checked, inputs up to 64 and factors up to 16.)

use crate::error::{Error, Result};
use crate::ops::window::{dims4, ncl_as_nchw, ncl_as_nchw_mut};
use crate::shape::Shape;
use crate::view::{TensorView, TensorViewMut};

/// The input index that output index `dst` copies when `in_len` elements are
/// resized to `out_len`: `floor(dst * in_len / out_len)`.
pub fn nearest_source_index(dst: usize, in_len: usize, out_len: usize) -> usize {
    let scaled = dst as u128 * in_len as u128 / out_len.max(1) as u128;
    scaled as usize
}

/// The shape `[N, C, H * scale_h, W * scale_w]` of upsampling an `[N, C, H, W]`
/// input by the integer factors `scale = [scale_h, scale_w]` (each at least 1).
pub fn upsample_nearest2d_output_shape(input: &Shape, scale: [usize; 2]) -> Result<Shape> {
    let [n, c, h, w] = dims4(input, "upsample input must have rank 4 [N, C, H, W]")?;
    if scale.contains(&0) {
        return Err(Error::InvalidArgument("upsample scale must be positive"));
    }
    let out_h = h.checked_mul(scale[0]).ok_or(Error::Overflow)?;
    let out_w = w.checked_mul(scale[1]).ok_or(Error::Overflow)?;
    Shape::new(&[n, c, out_h, out_w])
}

/// Resizes `input` (`[N, C, H, W]`) to the size of `output` (`[N, C, H_out, W_out]`)
/// by nearest-neighbour copying (see [`nearest_source_index`]). `N` and `C` must
/// match; an empty input image can only resize to an empty output.
pub fn upsample_nearest2d<T: Copy>(
    input: &TensorView<'_, T>,
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    let [n, c, h, w] = dims4(
        input.shape(),
        "upsample input must have rank 4 [N, C, H, W]",
    )?;
    let [out_n, out_c, out_h, out_w] = dims4(
        output.shape(),
        "upsample output must have rank 4 [N, C, H, W]",
    )?;
    if (out_n, out_c) != (n, c) {
        return Err(Error::ShapeMismatch {
            op: "upsample output batch and channels",
        });
    }
    if (h == 0 && out_h > 0) || (w == 0 && out_w > 0) {
        return Err(Error::InvalidArgument(
            "cannot resize an empty image to a non-empty one",
        ));
    }
    for b in 0..n {
        for ch in 0..c {
            for oh in 0..out_h {
                let ih = nearest_source_index(oh, h, out_h);
                for ow in 0..out_w {
                    let iw = nearest_source_index(ow, w, out_w);
                    output.set(&[b, ch, oh, ow], input.get(&[b, ch, ih, iw])?)?;
                }
            }
        }
    }
    Ok(())
}

/// Upsamples `input` by the integer factors `scale = [scale_h, scale_w]`: every
/// input pixel becomes a `scale_h × scale_w` block. `output` must have the shape
/// [`upsample_nearest2d_output_shape`] returns.
pub fn upsample_nearest2d_scale<T: Copy>(
    input: &TensorView<'_, T>,
    scale: [usize; 2],
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    if *output.shape() != upsample_nearest2d_output_shape(input.shape(), scale)? {
        return Err(Error::ShapeMismatch {
            op: "upsample output",
        });
    }
    upsample_nearest2d(input, output)
}

/// Resizes `input` (`[N, C, L]`) to the length of `output` (`[N, C, L_out]`) by
/// nearest-neighbour copying: [`upsample_nearest2d`] on a height-1 image.
pub fn upsample_nearest1d<T: Copy>(
    input: &TensorView<'_, T>,
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    ncl_as_nchw(input.shape(), "upsample input must have rank 3 [N, C, L]")?;
    ncl_as_nchw(output.shape(), "upsample output must have rank 3 [N, C, L]")?;
    upsample_nearest2d(&input.unsqueeze(2)?, &mut ncl_as_nchw_mut(output)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn source_index_follows_floor_rule() {
        // 3 -> 5: floor(d * 3 / 5) for d = 0..5 is 0, 0, 1, 1, 2.
        let idx: [usize; 5] = core::array::from_fn(|d| nearest_source_index(d, 3, 5));
        assert_eq!(idx, [0, 0, 1, 1, 2]);
        // 5 -> 2 (downsampling): 0, 2.
        assert_eq!(nearest_source_index(1, 5, 2), 2);
        assert_eq!(
            nearest_source_index(usize::MAX - 1, usize::MAX, usize::MAX),
            usize::MAX - 1
        );
    }

    #[test]
    fn scale_two_repeats_blocks() {
        let x = [1u8, 2, 3, 4];
        let xv = TensorView::new(&x, s(&[1, 1, 2, 2])).unwrap();
        let mut out = [0u8; 8];
        let shape = upsample_nearest2d_output_shape(xv.shape(), [1, 2]).unwrap();
        assert_eq!(shape, s(&[1, 1, 2, 4]));
        upsample_nearest2d_scale(
            &xv,
            [1, 2],
            &mut TensorViewMut::new(&mut out, shape).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [1, 1, 2, 2, 3, 3, 4, 4]);
        let mut out = [0u8; 3];
        let row = TensorView::new(&x[..2], s(&[1, 1, 2])).unwrap();
        upsample_nearest1d(
            &row,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 3])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [1, 1, 2]);
    }

    #[test]
    fn invalid_upsampling_is_an_error() {
        let x = [0.0f32; 4];
        let xv = TensorView::new(&x, s(&[1, 1, 2, 2])).unwrap();
        assert_eq!(
            upsample_nearest2d_output_shape(xv.shape(), [0, 2]),
            Err(Error::InvalidArgument("upsample scale must be positive"))
        );
        assert_eq!(
            upsample_nearest2d_output_shape(xv.shape(), [usize::MAX, 1]),
            Err(Error::Overflow)
        );
        assert!(upsample_nearest2d_output_shape(&s(&[2, 2]), [1, 1]).is_err());
        let mut out = [0.0f32; 16];
        let mut wrong_c = TensorViewMut::new(&mut out, s(&[1, 2, 2, 2])).unwrap();
        assert!(matches!(
            upsample_nearest2d(&xv, &mut wrong_c),
            Err(Error::ShapeMismatch { .. })
        ));
        let mut wrong_hw = TensorViewMut::new(&mut out, s(&[1, 1, 3, 4])).unwrap();
        assert_eq!(
            upsample_nearest2d_scale(&xv, [2, 2], &mut wrong_hw),
            Err(Error::ShapeMismatch {
                op: "upsample output"
            })
        );
        let empty = TensorView::new(&x, s(&[1, 1, 0, 2])).unwrap();
        let mut some = TensorViewMut::new(&mut out, s(&[1, 1, 2, 2])).unwrap();
        assert!(upsample_nearest2d(&empty, &mut some).is_err());
        let mut rank3 = TensorViewMut::new(&mut out, s(&[1, 1, 4])).unwrap();
        assert!(upsample_nearest1d(&xv, &mut rank3).is_err());
    }
}
