//! Views against a dense model: random chains of transpose, permute, slice and
//! unsqueeze must read the same elements as the same operations applied to a plain
//! copied array; layout algebra (transpose twice, inverse permutations, reshape of
//! contiguous data) and `check_fits` against brute-force bounds.

use proptest::prelude::*;
use rml_core::view::Layout;
use rml_core::{Error, Shape, Strides, TensorView, TensorViewMut};

/// A dense row-major array: the independent model the views are checked against.
#[derive(Clone, Debug)]
struct Dense {
    dims: Vec<usize>,
    vals: Vec<u32>,
}

/// All multi-indices of `dims` in row-major order.
fn indices(dims: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; dims.len()];
    for _ in 0..n {
        out.push(index.clone());
        for axis in (0..dims.len()).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

impl Dense {
    fn get(&self, index: &[usize]) -> u32 {
        let flat = index
            .iter()
            .zip(&self.dims)
            .fold(0, |acc, (&i, &d)| acc * d + i);
        self.vals[flat]
    }

    /// A new array of `dims` whose element at `i` is `self.get(source(i))`.
    fn map(&self, dims: Vec<usize>, source: impl Fn(&[usize]) -> Vec<usize>) -> Dense {
        let vals = indices(&dims)
            .iter()
            .map(|i| self.get(&source(i)))
            .collect();
        Dense { dims, vals }
    }

    fn permute(&self, order: &[usize]) -> Dense {
        let dims = order.iter().map(|&a| self.dims[a]).collect();
        self.map(dims, |i| {
            let mut j = vec![0; i.len()];
            for (k, &a) in order.iter().enumerate() {
                j[a] = i[k];
            }
            j
        })
    }

    fn slice(&self, axis: usize, start: usize, end: usize, step: usize) -> Dense {
        let mut dims = self.dims.clone();
        dims[axis] = (end - start).div_ceil(step);
        self.map(dims, |i| {
            let mut j = i.to_vec();
            j[axis] = start + i[axis] * step;
            j
        })
    }

    fn unsqueeze(&self, axis: usize) -> Dense {
        let mut dims = self.dims.clone();
        dims.insert(axis, 1);
        Dense {
            dims,
            vals: self.vals.clone(),
        }
    }
}

/// A layout change with raw parameters, reduced to valid values when applied.
#[derive(Clone, Debug)]
enum Op {
    Transpose(usize, usize),
    Permute(Vec<usize>),
    Slice(usize, usize, usize, usize),
    Unsqueeze(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..8, 0usize..8).prop_map(|(a, b)| Op::Transpose(a, b)),
        Just((0..8).collect::<Vec<usize>>())
            .prop_shuffle()
            .prop_map(Op::Permute),
        (0usize..8, 0usize..8, 0usize..8, 1usize..4)
            .prop_map(|(a, s, e, st)| Op::Slice(a, s, e, st)),
        (0usize..8).prop_map(Op::Unsqueeze),
    ]
}

/// Applies `op` to both the view and the model (skipping it where it does not apply).
fn apply<'a>(v: TensorView<'a, u32>, m: Dense, op: &Op) -> (TensorView<'a, u32>, Dense) {
    let rank = m.dims.len();
    match *op {
        Op::Transpose(a, b) if rank > 0 => {
            let (a, b) = (a % rank, b % rank);
            let mut order: Vec<usize> = (0..rank).collect();
            order.swap(a, b);
            // Negative axes count from the end.
            let t = v.transpose(a as isize - rank as isize, b as isize).unwrap();
            (t, m.permute(&order))
        }
        Op::Permute(ref p) => {
            let order: Vec<usize> = p.iter().copied().filter(|&a| a < rank).collect();
            (v.permute(&order).unwrap(), m.permute(&order))
        }
        Op::Slice(a, s, e, step) if rank > 0 => {
            let axis = a % rank;
            let len = m.dims[axis];
            let (s, e) = (s % (len + 1), e % (len + 1));
            let (s, e) = (s.min(e), s.max(e));
            let sliced = v.slice(axis as isize, s, e, step).unwrap();
            (sliced, m.slice(axis, s, e, step))
        }
        Op::Unsqueeze(a) if rank < 6 => {
            let axis = a % (rank + 1);
            (v.unsqueeze(axis).unwrap(), m.unsqueeze(axis))
        }
        _ => (v, m),
    }
}

/// A base shape, a prefix of unused elements before the view, and a chain of ops.
fn case() -> impl Strategy<Value = (Vec<usize>, usize, Vec<Op>)> {
    (
        prop::collection::vec(prop_oneof![1 => Just(0usize), 8 => 1usize..5], 0..=4),
        0usize..4,
        prop::collection::vec(op(), 0..6),
    )
}

fn build<'a>(
    data: &'a [u32],
    dims: &[usize],
    prefix: usize,
    ops: &[Op],
) -> (TensorView<'a, u32>, Dense) {
    let shape = Shape::new(dims).unwrap();
    let mut layout = Layout::contiguous(shape);
    layout.offset = prefix;
    let mut v = TensorView::with_layout(data, layout).unwrap();
    let numel: usize = dims.iter().product();
    let mut m = Dense {
        dims: dims.to_vec(),
        vals: data[prefix..prefix + numel].to_vec(),
    };
    for op in ops {
        (v, m) = apply(v, m, op);
    }
    (v, m)
}

/// Data whose value at each position is the position, plus a little slack at the end.
fn data_for(dims: &[usize], prefix: usize) -> Vec<u32> {
    let numel: usize = dims.iter().product();
    (0..(prefix + numel + 2) as u32).collect()
}

#[test]
fn empty_dense_mutable_views_are_accepted() {
    // Regression: the dense strides of [2, 0] are [0, 1], and the aliasing check used
    // to reject this empty view as a broadcast.
    let mut data = [7u32; 2];
    let mut v = TensorViewMut::new(&mut data, Shape::new(&[2, 0]).unwrap()).unwrap();
    v.fill(1);
    assert_eq!(v.assign(core::iter::empty()), Ok(()));
    assert_eq!(data, [7, 7]);
    let mut none: [u32; 0] = [];
    assert!(TensorViewMut::new(&mut none, Shape::new(&[3, 0, 2]).unwrap()).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_views_read_what_the_dense_model_holds((dims, prefix, ops) in case()) {
        let data = data_for(&dims, prefix);
        let (v, m) = build(&data, &dims, prefix, &ops);
        prop_assert_eq!(v.shape().dims(), &m.dims[..]);
        prop_assert_eq!(v.layout().check_fits(data.len()), Ok(()));
        // iter() in row-major order equals index-by-index get, and the model.
        let all = indices(&m.dims);
        let got: Vec<u32> = v.iter().collect();
        prop_assert_eq!(&got, &m.vals);
        for (i, index) in all.iter().enumerate() {
            prop_assert_eq!(v.get(index), Ok(got[i]));
            prop_assert_eq!(m.get(index), got[i]);
        }
        // Every offset is inside the data.
        prop_assert!(v.layout().offsets().all(|o| o < data.len()));
        prop_assert_eq!(v.layout().offsets().len(), m.vals.len());
        // Rows: each row start plus its stride walks the model's rows in order.
        let rows = v.rows();
        let (row_len, row_stride) = (rows.row_len(), rows.row_stride());
        let mut flat = Vec::new();
        for start in rows {
            flat.extend((0..row_len).map(|j| data[start + j * row_stride]));
        }
        prop_assert_eq!(&flat, &m.vals);
        // Out-of-range indices are errors, not panics.
        if let Some(axis) = m.dims.iter().position(|&d| d > 0) {
            let mut index = vec![0; m.dims.len()];
            index[axis] = m.dims[axis];
            let is_out_of_range = matches!(v.get(&index), Err(Error::IndexOutOfRange { .. }));
            prop_assert!(is_out_of_range);
        }
    }

    #[test]
    fn transposing_twice_is_the_identity((dims, prefix, ops) in case(), a in -8isize..8, b in -8isize..8) {
        let data = data_for(&dims, prefix);
        let (v, _) = build(&data, &dims, prefix, &ops);
        let l = *v.layout();
        let rank = l.shape.rank() as isize;
        let valid = |x: isize| -rank <= x && x < rank;
        match l.transpose(a, b) {
            Ok(t) => {
                prop_assert!(valid(a) && valid(b));
                prop_assert_eq!(t.transpose(a, b), Ok(l));
                prop_assert_eq!(t.transpose(b, a), Ok(l));
            }
            Err(e) => {
                prop_assert!(!valid(a) || !valid(b));
                let is_axis_error = matches!(e, Error::AxisOutOfRange { .. });
                prop_assert!(is_axis_error);
            }
        }
    }

    #[test]
    fn permuting_back_is_the_identity(
        ((dims, prefix, ops), perm) in case().prop_flat_map(|c| {
            let data = data_for(&c.0, c.1);
            let rank = build(&data, &c.0, c.1, &c.2).1.dims.len();
            (Just(c), Just((0..rank).collect::<Vec<usize>>()).prop_shuffle())
        })
    ) {
        let data = data_for(&dims, prefix);
        let (v, m) = build(&data, &dims, prefix, &ops);
        let mut inverse = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        let p = v.permute(&perm).unwrap();
        prop_assert_eq!(*p.permute(&inverse).unwrap().layout(), *v.layout());
        // Element [i] of the permuted view is element [j] with j[perm[k]] = i[k].
        let pm = m.permute(&perm);
        prop_assert_eq!(p.iter().collect::<Vec<_>>(), pm.vals);
    }

    #[test]
    fn reshaping_contiguous_views_preserves_order(
        dims in prop::collection::vec(1usize..5, 1..=4),
        prefix in 0usize..4,
        cut in 0usize..4,
        pick in 0usize..4,
    ) {
        let data = data_for(&dims, prefix);
        let base = TensorView::with_layout(&data, Layout {
            offset: prefix,
            ..Layout::contiguous(Shape::new(&dims).unwrap())
        }).unwrap();
        // Dropping leading rows keeps the view contiguous.
        let keep = dims[0] - cut % dims[0];
        let v = base.slice(0, dims[0] - keep, dims[0], 1).unwrap();
        prop_assert!(v.layout().is_contiguous());
        let shape: Vec<usize> = v.shape().dims().to_vec();
        let numel: usize = shape.iter().product();
        let target: Vec<usize> = match pick {
            0 => vec![numel],
            1 => shape.iter().rev().copied().collect(),
            2 => {
                let mut t = vec![1];
                t.extend_from_slice(&shape);
                t.push(1);
                t
            }
            _ => {
                let mut t = shape.clone();
                if t.len() >= 2 {
                    let last = t.pop().unwrap();
                    *t.last_mut().unwrap() *= last;
                }
                t
            }
        };
        let r = v.reshape(&target).unwrap();
        prop_assert_eq!(r.shape().dims(), &target[..]);
        prop_assert_eq!(r.iter().collect::<Vec<_>>(), v.iter().collect::<Vec<_>>());
        prop_assert_eq!(r.as_slice(), v.as_slice());
        let mut wrong = target.clone();
        wrong.push(2);
        prop_assert_eq!(v.reshape(&wrong).unwrap_err(), Error::ShapeMismatch { op: "reshape" });
        // A transposed view with two axes longer than 1 is not contiguous.
        if shape.len() >= 2 && shape[0] > 1 && shape[shape.len() - 1] > 1 {
            let t = v.transpose(0, -1).unwrap();
            prop_assert_eq!(t.reshape(&[numel]).unwrap_err(), Error::NotContiguous);
        }
    }

    #[test]
    fn check_fits_rejects_every_too_short_buffer(
        dims in prop::collection::vec(0usize..4, 0..=4),
        steps_seed in prop::collection::vec(0usize..7, 4),
        offset in 0usize..10,
    ) {
        let steps = &steps_seed[..dims.len()];
        let layout = Layout {
            shape: Shape::new(&dims).unwrap(),
            strides: Strides::new(steps).unwrap(),
            offset,
        };
        // Brute force: one past the largest offset any element has.
        let needed = indices(&dims)
            .iter()
            .map(|i| offset + i.iter().zip(steps).map(|(&i, &s)| i * s).sum::<usize>() + 1)
            .max();
        match needed {
            None => {
                for len in 0..3 {
                    prop_assert_eq!(layout.check_fits(len), Ok(()));
                }
            }
            Some(needed) => {
                for len in 0..needed {
                    prop_assert_eq!(layout.check_fits(len), Err(Error::BufferTooSmall { needed, got: len }));
                }
                prop_assert_eq!(layout.check_fits(needed), Ok(()));
                prop_assert_eq!(layout.check_fits(needed + 5), Ok(()));
                let data = vec![0u8; needed - 1];
                prop_assert!(TensorView::with_layout(&data, layout).is_err());
            }
        }
    }

    #[test]
    fn mutable_views_write_exactly_their_elements((dims, prefix, ops) in case()) {
        let data = data_for(&dims, prefix);
        let (v, _) = build(&data, &dims, prefix, &ops);
        let layout = *v.layout();
        let offsets: Vec<usize> = layout.offsets().collect();
        let mut out = vec![u32::MAX; data.len()];
        let mut m = TensorViewMut::with_layout(&mut out, layout).unwrap();
        m.assign((0..offsets.len() as u32).map(|x| x + 1_000)).unwrap();
        for (k, &o) in offsets.iter().enumerate() {
            prop_assert_eq!(out[o], k as u32 + 1_000);
        }
        let untouched = out.iter().filter(|&&x| x == u32::MAX).count();
        prop_assert_eq!(untouched, data.len() - offsets.len());
    }
}
