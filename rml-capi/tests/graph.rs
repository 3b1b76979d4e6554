//! The graph entry points on the bundled transformer block, against the NumPy
//! reference output committed beside it (`scripts/fixtures/bundled_graph.py`).

mod support;

use std::ffi::CStr;

use rml_capi::*;
use support::*;

/// Runs the bundled graph on its committed input and returns output 0's info and data.
fn run_bundled(g: RmlGraph) -> (RmlTensorInfo, Vec<f32>) {
    let (x, dims) = npy_f32("models/graph-default/inputs/x.npy");
    let input = f32_tensor(c"x", &dims, &x);
    // SAFETY: one valid tensor.
    ok(unsafe { rml_graph_run(g, &input, 1) });
    let mut info = std::mem::MaybeUninit::<RmlTensorInfo>::uninit();
    // SAFETY: a size query into a writable info.
    ok(unsafe { rml_graph_get_output(g, 0, info.as_mut_ptr(), std::ptr::null_mut(), 0) });
    // SAFETY: written by the call above.
    let info = unsafe { info.assume_init() };
    let mut out = vec![0f32; info.byte_len / 4];
    // SAFETY: `out` holds byte_len bytes.
    ok(unsafe {
        rml_graph_get_output(
            g,
            0,
            std::ptr::null_mut(),
            out.as_mut_ptr().cast(),
            info.byte_len,
        )
    });
    (info, out)
}

#[test]
fn bundled_graph_matches_numpy() {
    let g = bundled_graph(1);
    let (mut n_in, mut n_out) = (0, 0);
    // SAFETY: writable counts.
    ok(unsafe { rml_graph_input_count(g, &mut n_in) });
    // SAFETY: as above.
    ok(unsafe { rml_graph_output_count(g, &mut n_out) });
    assert_eq!((n_in, n_out), (1, 1));
    let mut declared = std::mem::MaybeUninit::<RmlTensorInfo>::uninit();
    // SAFETY: a writable info.
    ok(unsafe { rml_graph_describe_input(g, 0, declared.as_mut_ptr()) });
    // SAFETY: written above.
    let declared = unsafe { declared.assume_init() };
    // SAFETY: the name lives as long as the graph.
    let name = unsafe { CStr::from_ptr(declared.name) };
    assert_eq!(name, c"x");
    assert_eq!(declared.dtype, RmlDtype::F32);
    assert_eq!(&declared.dims[..declared.rank], &[-1, -1, 16]);
    assert_eq!(declared.byte_len, 0);

    let (info, out) = run_bundled(g);
    // SAFETY: the name lives as long as the graph.
    assert_eq!(unsafe { CStr::from_ptr(info.name) }, c"y");
    let (want, want_dims) = npy_f32("models/graph-default/expected/y.npy");
    assert_eq!(&info.dims[..info.rank], want_dims.as_slice());
    let err = out
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(err < 1e-5, "max error {err} against NumPy");
    ok(rml_graph_free(g));
}

#[test]
fn threads_give_the_same_bits() {
    let (one, two) = (bundled_graph(1), bundled_graph(2));
    assert_eq!(run_bundled(one).1, run_bundled(two).1);
    ok(rml_graph_free(one));
    ok(rml_graph_free(two));
}

#[test]
fn outputs_need_a_run_and_room() {
    let g = bundled_graph(1);
    let mut info = std::mem::MaybeUninit::<RmlTensorInfo>::uninit();
    // SAFETY: a writable info.
    let st = unsafe { rml_graph_get_output(g, 0, info.as_mut_ptr(), std::ptr::null_mut(), 0) };
    fails(st, RmlStatus::InvalidArgument, "has not run");
    let (info, _) = run_bundled(g);
    let mut small = vec![0f32; 4];
    let mut again = std::mem::MaybeUninit::<RmlTensorInfo>::uninit();
    // SAFETY: `small` holds 16 bytes, and the capacity says so.
    let st =
        unsafe { rml_graph_get_output(g, 0, again.as_mut_ptr(), small.as_mut_ptr().cast(), 16) };
    fails(st, RmlStatus::BufferTooSmall, "needs 640 bytes");
    // SAFETY: filled in even though the copy failed.
    assert_eq!(unsafe { again.assume_init() }.byte_len, info.byte_len);
    // SAFETY: as above.
    let st = unsafe { rml_graph_get_output(g, 1, again.as_mut_ptr(), std::ptr::null_mut(), 0) };
    fails(st, RmlStatus::InvalidArgument, "out of range");
    ok(rml_graph_free(g));
}
