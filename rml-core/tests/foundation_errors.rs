//! Every error path of the foundation (shapes, strides, broadcasting, views, byte
//! casts, the scratch arena, dtype names) returns the right `Error` variant and never
//! panics.

use rml_core::shape::normalize_axis;
use rml_core::view::Layout;
use rml_core::{
    DType, Error, GgmlType, MAX_RANK, ScratchArena, Shape, Strides, TensorView, TensorViewMut,
    broadcast_shapes,
};

fn s(d: &[usize]) -> Shape {
    Shape::new(d).unwrap()
}

fn layout(dims: &[usize], steps: &[usize], offset: usize) -> Layout {
    Layout {
        shape: s(dims),
        strides: Strides::new(steps).unwrap(),
        offset,
    }
}

#[test]
fn rank_over_the_maximum() {
    let too_many = [1usize; MAX_RANK + 1];
    let err = Error::RankTooHigh {
        rank: MAX_RANK + 1,
        max: MAX_RANK,
    };
    assert_eq!(Shape::new(&too_many), Err(err));
    assert_eq!(Strides::new(&too_many), Err(err));
    assert!(Strides::new(&[1; MAX_RANK]).is_ok());
    // unsqueeze past the maximum rank
    let full = Layout::contiguous(s(&[1; MAX_RANK]));
    assert_eq!(full.unsqueeze(0), Err(err));
    let data = [0u8; 1];
    let v = TensorView::new(&data, s(&[1; MAX_RANK])).unwrap();
    assert_eq!(v.unsqueeze(MAX_RANK).unwrap_err(), err);
}

#[test]
fn bad_axes() {
    let l = Layout::contiguous(s(&[2, 3]));
    assert_eq!(
        normalize_axis(0, 0),
        Err(Error::AxisOutOfRange { axis: 0, rank: 0 })
    );
    assert_eq!(
        normalize_axis(-1, 0),
        Err(Error::AxisOutOfRange { axis: -1, rank: 0 })
    );
    assert_eq!(
        normalize_axis(isize::MIN, 3),
        Err(Error::AxisOutOfRange {
            axis: isize::MIN,
            rank: 3
        })
    );
    assert_eq!(
        s(&[2, 3]).with_dim(2, 1),
        Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
    );
    assert_eq!(
        s(&[2, 3]).without_axis(2),
        Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
    );
    assert_eq!(
        Shape::scalar().without_axis(0),
        Err(Error::AxisOutOfRange { axis: 0, rank: 0 })
    );
    assert_eq!(
        l.transpose(0, 2),
        Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
    );
    assert_eq!(
        l.transpose(-3, 0),
        Err(Error::AxisOutOfRange { axis: -3, rank: 2 })
    );
    assert_eq!(
        l.slice(5, 0, 1, 1),
        Err(Error::AxisOutOfRange { axis: 5, rank: 2 })
    );
    assert_eq!(
        l.unsqueeze(3),
        Err(Error::AxisOutOfRange { axis: 3, rank: 2 })
    );
}

#[test]
fn wrong_shapes() {
    let l = Layout::contiguous(s(&[2, 3]));
    assert_eq!(l.permute(&[0]), Err(Error::ShapeMismatch { op: "permute" }));
    assert_eq!(
        l.permute(&[1, 1]),
        Err(Error::InvalidArgument("permute order is not a permutation"))
    );
    assert_eq!(
        l.permute(&[0, 2]),
        Err(Error::InvalidArgument("permute order is not a permutation"))
    );
    assert_eq!(l.reshape(&[5]), Err(Error::ShapeMismatch { op: "reshape" }));
    assert_eq!(l.offset_of(&[1]), Err(Error::ShapeMismatch { op: "index" }));
    assert_eq!(
        l.offset_of(&[1, 3]),
        Err(Error::IndexOutOfRange { index: 3, len: 3 })
    );
    assert_eq!(
        l.broadcast_to(&s(&[3])),
        Err(Error::ShapeMismatch { op: "broadcast_to" })
    );
    assert_eq!(
        l.broadcast_to(&s(&[4, 2, 4])),
        Err(Error::NotBroadcastable {
            axis: 0,
            lhs: 3,
            rhs: 4
        })
    );
    assert_eq!(
        broadcast_shapes(&s(&[2, 1]), &s(&[8, 4, 3])),
        Err(Error::NotBroadcastable {
            axis: 1,
            lhs: 2,
            rhs: 4
        })
    );
    // Strides of another rank than the shape.
    let mismatched = Layout {
        shape: s(&[2, 3]),
        strides: Strides::new(&[1]).unwrap(),
        offset: 0,
    };
    assert_eq!(
        mismatched.check_fits(100),
        Err(Error::ShapeMismatch { op: "strides" })
    );
    let data = [0f32; 100];
    assert_eq!(
        TensorView::with_layout(&data, mismatched).unwrap_err(),
        Error::ShapeMismatch { op: "strides" }
    );
}

#[test]
fn slice_arguments() {
    let l = Layout::contiguous(s(&[4, 5]));
    assert_eq!(
        l.slice(0, 0, 2, 0),
        Err(Error::InvalidArgument("slice step must be positive"))
    );
    assert_eq!(
        l.slice(1, 0, 6, 1),
        Err(Error::IndexOutOfRange { index: 6, len: 5 })
    );
    assert_eq!(
        l.slice(1, 3, 2, 1),
        Err(Error::IndexOutOfRange { index: 3, len: 5 })
    );
    assert!(l.slice(1, 5, 5, 1).is_ok());
}

#[test]
fn huge_slice_steps_do_not_overflow() {
    // Regression: `stride * step` used to overflow (a panic in debug builds) although
    // a step past the end just keeps one element.
    let data: [i32; 20] = core::array::from_fn(|i| i as i32);
    let v = TensorView::new(&data, s(&[4, 5])).unwrap();
    let one = v.slice(0, 1, 4, usize::MAX).unwrap();
    assert_eq!(one.shape(), &s(&[1, 5]));
    assert_eq!(one.iter().collect::<Vec<_>>(), [5, 6, 7, 8, 9]);
    let none = v.slice(0, 2, 2, usize::MAX).unwrap();
    assert_eq!(none.iter().count(), 0);
    let l = Layout::contiguous(s(&[4, 5]));
    let big = layout(&[3], &[usize::MAX / 2 + 1], 0);
    assert_eq!(big.slice(0, 0, 3, 2), Err(Error::Overflow));
    assert!(l.slice(1, 0, 5, usize::MAX / 2).is_ok());
}

#[test]
fn short_buffers() {
    let data = [0u16; 11];
    assert_eq!(
        TensorView::new(&data, s(&[3, 4])).unwrap_err(),
        Error::BufferTooSmall {
            needed: 12,
            got: 11
        }
    );
    let mut data = [0u16; 11];
    assert_eq!(
        TensorViewMut::new(&mut data, s(&[2, 6])).unwrap_err(),
        Error::BufferTooSmall {
            needed: 12,
            got: 11
        }
    );
    // A strided layout needs offset + sum((d - 1) * stride) + 1 elements.
    let l = layout(&[2, 3], &[10, 2], 3);
    assert_eq!(
        l.check_fits(17),
        Err(Error::BufferTooSmall {
            needed: 18,
            got: 17
        })
    );
    assert_eq!(l.check_fits(18), Ok(()));
    // An empty view fits anywhere.
    assert_eq!(layout(&[0, 3], &[3, 1], 50).check_fits(0), Ok(()));
}

#[test]
fn empty_views_with_a_far_offset_do_not_panic() {
    // Regression: `as_slice` on an empty view whose offset lies past the end of the
    // data used to index out of bounds.
    let data = [1u8, 2, 3];
    let l = layout(&[0], &[1], 50);
    let v = TensorView::with_layout(&data, l).unwrap();
    assert_eq!(v.as_slice(), Ok(&[][..]));
    assert_eq!(v.iter().count(), 0);
    let mut data = [1u8, 2, 3];
    let mut m = TensorViewMut::with_layout(&mut data, l).unwrap();
    assert_eq!(m.as_mut_slice().map(|x| x.len()), Ok(0));
}

#[test]
fn misaligned_and_odd_length_bytes() {
    let words = [0u64; 4];
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    assert_eq!(
        TensorView::<f32>::from_bytes(&bytes[2..10], s(&[2])).unwrap_err(),
        Error::Misaligned { align: 4 }
    );
    assert_eq!(
        TensorView::<f64>::from_bytes(&bytes[4..12], s(&[1])).unwrap_err(),
        Error::Misaligned { align: 8 }
    );
    assert_eq!(
        TensorView::<i16>::from_bytes(&bytes[..7], s(&[3])).unwrap_err(),
        Error::LengthMismatch {
            expected: 6,
            got: 7
        }
    );
    assert_eq!(
        TensorView::<i32>::from_bytes(&bytes[..16], s(&[5])).unwrap_err(),
        Error::LengthMismatch {
            expected: 5,
            got: 4
        }
    );
    let mut words = [0u64; 4];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    assert_eq!(
        TensorViewMut::<f32>::from_bytes(&mut bytes[1..9], s(&[2])).unwrap_err(),
        Error::Misaligned { align: 4 }
    );
    assert_eq!(
        TensorViewMut::<f32>::from_bytes(&mut bytes[..10], s(&[2])).unwrap_err(),
        Error::LengthMismatch {
            expected: 8,
            got: 10
        }
    );
    assert_eq!(
        TensorViewMut::<f32>::from_bytes(&mut bytes[..8], s(&[3])).unwrap_err(),
        Error::LengthMismatch {
            expected: 3,
            got: 2
        }
    );
    assert!(TensorViewMut::<f32>::from_bytes(&mut bytes[4..12], s(&[2])).is_ok());
}

#[test]
fn overflow() {
    let huge = s(&[usize::MAX, 2]);
    assert_eq!(huge.numel_checked(), Err(Error::Overflow));
    assert_eq!(huge.numel(), usize::MAX);
    assert_eq!(
        DType::F32.storage_bytes(usize::MAX / 2),
        Err(Error::Overflow)
    );
    // check_fits: the span of the last element overflows.
    assert_eq!(
        layout(&[3], &[usize::MAX / 2 + 1], 0).check_fits(10),
        Err(Error::Overflow)
    );
    assert_eq!(
        layout(&[2], &[usize::MAX], 1).check_fits(10),
        Err(Error::Overflow)
    );
    assert_eq!(
        layout(&[usize::MAX, 2], &[0, 0], 0).check_fits(10),
        Err(Error::Overflow)
    );
    // offset + span + 1 overflows.
    assert_eq!(
        layout(&[1], &[1], usize::MAX).check_fits(10),
        Err(Error::Overflow)
    );
    let bytes = [0u8; 8];
    assert_eq!(
        TensorView::<u8>::from_bytes(&bytes, huge).unwrap_err(),
        Error::Overflow
    );
    let l = Layout::contiguous(s(&[4]));
    assert_eq!(l.reshape(&[usize::MAX, 3]), Err(Error::Overflow));
    // offset_of on a layout that was never checked against a buffer.
    let wild = layout(&[3], &[usize::MAX], 5);
    assert_eq!(wild.offset_of(&[2]), Err(Error::Overflow));
    let mut buffer = [0u8; 64];
    let mut arena = ScratchArena::new(&mut buffer);
    assert_eq!(arena.alloc::<i32>(usize::MAX / 2), Err(Error::Overflow));
    assert_eq!(arena.used(), 0);
}

#[test]
fn mutable_view_misuse() {
    let mut data = [0i32; 6];
    let bcast = Layout::contiguous(s(&[1, 3]))
        .broadcast_to(&s(&[2, 3]))
        .unwrap();
    assert_eq!(
        TensorViewMut::with_layout(&mut data, bcast).unwrap_err(),
        Error::InvalidArgument("a mutable view cannot broadcast")
    );
    let mut v = TensorViewMut::new(&mut data, s(&[2, 3])).unwrap();
    assert_eq!(
        v.assign([1, 2, 3, 4, 5, 6, 7]),
        Err(Error::LengthMismatch {
            expected: 6,
            got: 7
        })
    );
    assert_eq!(
        v.assign([1, 2]),
        Err(Error::LengthMismatch {
            expected: 6,
            got: 2
        })
    );
    assert_eq!(
        v.set(&[2, 0], 1),
        Err(Error::IndexOutOfRange { index: 2, len: 2 })
    );
    assert_eq!(v.set(&[0], 1), Err(Error::ShapeMismatch { op: "index" }));
    let mut t = v.transpose(0, 1).unwrap();
    assert_eq!(t.as_mut_slice().unwrap_err(), Error::NotContiguous);
    assert_eq!(t.as_view().as_slice().unwrap_err(), Error::NotContiguous);
    assert_eq!(t.reshape(&[6]).unwrap_err(), Error::NotContiguous);
}

#[test]
fn scratch_arena_exhaustion() {
    let mut buffer = [0u64; 4];
    let bytes = bytemuck::cast_slice_mut::<u64, u8>(&mut buffer);
    let mut arena = ScratchArena::new(&mut bytes[..32]);
    let _a: &mut [u8] = arena.alloc(1).unwrap();
    // 7 bytes of padding to align an f64, then 8 bytes each.
    assert_eq!(
        arena.alloc::<f64>(4).unwrap_err(),
        Error::ScratchExhausted {
            needed: 39,
            left: 31
        }
    );
    let three: &mut [f64] = arena.alloc(3).unwrap();
    assert_eq!(three.len(), 3);
    assert_eq!(arena.remaining(), 0);
    assert_eq!(arena.used(), 32);
    assert_eq!(
        arena.alloc::<u8>(1).unwrap_err(),
        Error::ScratchExhausted { needed: 1, left: 0 }
    );
    assert!(arena.alloc::<u8>(0).is_ok());
}

#[test]
fn dtype_names_and_ids() {
    assert_eq!(DType::parse("f33"), Err(Error::UnknownDType));
    assert_eq!(DType::parse(""), Err(Error::UnknownDType));
    assert_eq!(DType::parse("q4_k"), Ok(DType::Q4K));
    assert_eq!(
        DType::from_safetensors_name("U64"),
        Err(Error::UnsupportedDTypeName("U64"))
    );
    assert_eq!(
        GgmlType::from_id(u32::MAX),
        Err(Error::UnknownGgmlType(u32::MAX))
    );
    assert_eq!(
        GgmlType::IQ2_XXS.to_dtype(),
        Err(Error::UnsupportedQuantization(GgmlType::IQ2_XXS))
    );
    assert_eq!(
        DType::Q8_0.storage_bytes(33),
        Err(Error::InvalidArgument(
            "element count is not a multiple of the block size"
        ))
    );
}

#[test]
fn every_error_displays_a_message() {
    let errors = [
        Error::RankTooHigh { rank: 9, max: 8 },
        Error::ShapeMismatch { op: "add" },
        Error::NotBroadcastable {
            axis: 0,
            lhs: 2,
            rhs: 3,
        },
        Error::BufferTooSmall { needed: 4, got: 3 },
        Error::LengthMismatch {
            expected: 4,
            got: 3,
        },
        Error::Misaligned { align: 4 },
        Error::AxisOutOfRange { axis: -3, rank: 2 },
        Error::IndexOutOfRange { index: 5, len: 2 },
        Error::NotContiguous,
        Error::Overflow,
        Error::InvalidArgument("p"),
        Error::UnsupportedDType(DType::Bool),
        Error::UnsupportedDTypeName("F8_E4M3"),
        Error::UnknownDType,
        Error::UnsupportedQuantization(GgmlType::MXFP4),
        Error::UnknownGgmlType(99),
        Error::ScratchExhausted { needed: 8, left: 1 },
    ];
    for e in errors {
        let text = e.to_string();
        assert!(!text.is_empty());
        let _: &dyn std::error::Error = &e;
    }
    assert_eq!(
        Error::NotBroadcastable {
            axis: 0,
            lhs: 2,
            rhs: 3
        }
        .to_string(),
        "shapes are not broadcastable: size 2 vs 3 on axis -1"
    );
}
