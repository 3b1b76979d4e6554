//! Nearest upsampling against the NumPy fixtures (values are copied: exact match).

use rml_core::ops::upsample::{
    upsample_nearest1d, upsample_nearest2d, upsample_nearest2d_output_shape,
    upsample_nearest2d_scale,
};
use rml_core::{Shape, TensorViewMut};

use crate::fixture::{cases, f32_tensor, name, pair};

#[test]
fn upsample_nearest_matches_numpy() {
    for case in cases("upsample.json") {
        let name = name(&case);
        let x = f32_tensor(&case["input"]);
        let expected = f32_tensor(&case["expected"]);
        // Once from the dense input, once from an axis-reversed (strided) copy.
        let reversed = x.reversed();
        for (input, layout) in [(x.view(), "dense"), (reversed.view(), "strided")] {
            let mut out = vec![f32::NAN; expected.data.len()];
            let mut ov = TensorViewMut::new(&mut out, expected.shape).unwrap();
            if case["scale"].is_null() {
                upsample_nearest2d(&input, &mut ov).unwrap();
            } else {
                let scale = pair(&case["scale"]);
                let shape = upsample_nearest2d_output_shape(&x.shape, scale).unwrap();
                assert_eq!(shape, expected.shape, "{name}: output shape");
                upsample_nearest2d_scale(&input, scale, &mut ov).unwrap();
            }
            assert_eq!(out, expected.data, "{name} ({layout})");
        }

        // Height-1 images are also 1-D sequences: the 1-D op must agree.
        if let [n, c, 1, l] = *x.shape.dims() {
            let out_l = expected.shape.dims()[3];
            let xv = x.view().reshape(&[n, c, l]).unwrap();
            let mut out1 = vec![f32::NAN; expected.data.len()];
            let shape1 = Shape::new(&[n, c, out_l]).unwrap();
            upsample_nearest1d(&xv, &mut TensorViewMut::new(&mut out1, shape1).unwrap()).unwrap();
            assert_eq!(out1, expected.data, "{name} (1-D)");
        }
    }
}
