//! Every caller mistake the C API promises to catch returns its status code and a
//! message naming the argument, and never crashes: null pointers, non-UTF-8
//! strings, unknown dtypes, wrong shapes and byte lengths, freed, forged and
//! foreign handles, bad flags and options, buffers too small.

mod support;

use std::ffi::{CStr, c_char, c_void};
use std::ptr::{null, null_mut};

use rml_capi::*;
use support::*;

const NOT_UTF8: &CStr = c"models/\xff\xfe.json";

#[test]
fn status_names_and_version() {
    // SAFETY: static strings.
    let name = |s: i32| unsafe { CStr::from_ptr(rml_status_name(s)) };
    assert_eq!(name(RmlStatus::Dtype as i32), c"RML_STATUS_DTYPE");
    assert_eq!(name(RmlStatus::Panic as i32), c"RML_STATUS_PANIC");
    assert_eq!(name(99), c"RML_STATUS_UNKNOWN");
    // SAFETY: a static string.
    let version = unsafe { CStr::from_ptr(rml_version()) };
    assert_eq!(version.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn load_rejects_bad_paths_and_out_pointers() {
    let mut g: RmlGraph = 7;
    // SAFETY: every pointer is null or valid.
    unsafe {
        fails(
            rml_graph_load(null(), 1, &mut g),
            RmlStatus::NullPointer,
            "path",
        );
        assert_eq!(g, 0, "a failed load clears *out");
        let path = c_path("models/graph-default/transformer_block.json");
        fails(
            rml_graph_load(path.as_ptr(), 1, null_mut()),
            RmlStatus::NullPointer,
            "out",
        );
        fails(
            rml_graph_load(NOT_UTF8.as_ptr(), 1, &mut g),
            RmlStatus::InvalidUtf8,
            "path",
        );
        let missing = c_path("models/graph-default/missing.json");
        fails(
            rml_graph_load(missing.as_ptr(), 1, &mut g),
            RmlStatus::Load,
            "missing.json",
        );
        // A file that is not a graph.
        let gguf = c_path("models/default/rml-tiny-llama.gguf");
        fails(
            rml_graph_load(gguf.as_ptr(), 1, &mut g),
            RmlStatus::Load,
            "rml-tiny-llama.gguf",
        );
        let mut l: RmlLlm = 7;
        fails(rml_llm_load(null(), &mut l), RmlStatus::NullPointer, "path");
        fails(
            rml_llm_load(NOT_UTF8.as_ptr(), &mut l),
            RmlStatus::InvalidUtf8,
            "path",
        );
        fails(
            rml_llm_load(missing.as_ptr(), &mut l),
            RmlStatus::Load,
            "missing.json",
        );
        assert_eq!(l, 0);
        let misaligned = (&raw mut g).cast::<u8>().wrapping_add(1).cast::<RmlGraph>();
        fails(
            rml_graph_load(path.as_ptr(), 1, misaligned),
            RmlStatus::InvalidArgument,
            "aligned",
        );
    }
}

#[test]
fn freed_forged_and_foreign_handles_are_rejected() {
    let g = bundled_graph(1);
    let l = bundled_llm();
    let mut n = 0;
    // SAFETY: valid count pointer; the handles are what is under test.
    unsafe {
        fails(
            rml_graph_input_count(0, &mut n),
            RmlStatus::InvalidHandle,
            "null handle",
        );
        fails(
            rml_graph_input_count(12345, &mut n),
            RmlStatus::InvalidHandle,
            "not a handle",
        );
        fails(
            rml_graph_input_count(l, &mut n),
            RmlStatus::InvalidHandle,
            "another kind",
        );
        fails(rml_llm_free(g), RmlStatus::InvalidHandle, "another kind");
        let text = c"hi";
        fails(
            rml_llm_tokenize(g, text.as_ptr(), 0, null_mut(), 0, &mut n),
            RmlStatus::InvalidHandle,
            "another kind",
        );
        ok(rml_graph_free(g));
        fails(
            rml_graph_input_count(g, &mut n),
            RmlStatus::InvalidHandle,
            "freed",
        );
        fails(
            rml_graph_run(g, null(), 0),
            RmlStatus::InvalidHandle,
            "freed",
        );
        fails(rml_graph_free(g), RmlStatus::InvalidHandle, "freed");
        ok(rml_llm_free(l));
        fails(
            rml_llm_generate(
                l,
                [1u32].as_ptr(),
                1,
                null(),
                None,
                null_mut(),
                null_mut(),
                0,
                null_mut(),
            ),
            RmlStatus::InvalidHandle,
            "freed",
        );
    }
}

/// Runs the bundled graph on one tensor built by `edit` from a correct one.
fn run_with(g: RmlGraph, edit: impl FnOnce(&mut RmlTensor)) -> RmlStatus {
    let (x, dims) = npy_f32("models/graph-default/inputs/x.npy");
    let mut t = f32_tensor(c"x", &dims, &x);
    edit(&mut t);
    // SAFETY: the tensor's pointers are valid or deliberately null/short, which the
    // library must catch before reading.
    unsafe { rml_graph_run(g, &t, 1) }
}

#[test]
fn wrong_tensors_are_rejected() {
    let g = bundled_graph(1);
    fails(
        run_with(g, |t| t.dtype = RmlDtype::I64 as u32),
        RmlStatus::Shape,
        "need 1280 bytes",
    );
    let ints = [0i64; 160];
    fails(
        run_with(g, |t| {
            t.dtype = RmlDtype::I64 as u32;
            t.data = ints.as_ptr().cast();
            t.byte_len = 1280;
        }),
        RmlStatus::Dtype,
        "declares F32",
    );
    fails(
        run_with(g, |t| t.dtype = 9),
        RmlStatus::Dtype,
        "unknown dtype code 9",
    );
    let wrong = [2i64, 5, 8];
    fails(
        run_with(g, |t| {
            t.dims = wrong.as_ptr();
            t.byte_len = 2 * 5 * 8 * 4;
        }),
        RmlStatus::Shape,
        "input \"x\"",
    );
    let flat = [160i64];
    fails(
        run_with(g, |t| {
            t.dims = flat.as_ptr();
            t.rank = 1;
        }),
        RmlStatus::Shape,
        "input \"x\"",
    );
    fails(
        run_with(g, |t| t.byte_len -= 4),
        RmlStatus::Shape,
        "byte_len is 636",
    );
    let negative = [-2i64, 5, 16];
    fails(
        run_with(g, |t| t.dims = negative.as_ptr()),
        RmlStatus::Shape,
        "negative dim",
    );
    fails(run_with(g, |t| t.rank = 9), RmlStatus::Shape, "rank 9");
    fails(
        run_with(g, |t| t.data = null()),
        RmlStatus::NullPointer,
        "data",
    );
    fails(
        run_with(g, |t| t.dims = null()),
        RmlStatus::NullPointer,
        "dims",
    );
    fails(
        run_with(g, |t| t.name = null()),
        RmlStatus::NullPointer,
        "name",
    );
    fails(
        run_with(g, |t| t.name = NOT_UTF8.as_ptr()),
        RmlStatus::InvalidUtf8,
        "name",
    );
    fails(
        run_with(g, |t| t.name = c"z".as_ptr()),
        RmlStatus::InvalidArgument,
        "no input \"z\"",
    );
    let odd = [0i64; 4];
    let misaligned = odd.as_ptr().cast::<u8>().wrapping_add(4).cast::<i64>();
    fails(
        run_with(g, |t| t.dims = misaligned),
        RmlStatus::InvalidArgument,
        "aligned",
    );
    // SAFETY: null with a count, and no inputs at all.
    unsafe {
        fails(
            rml_graph_run(g, null(), 1),
            RmlStatus::NullPointer,
            "inputs",
        );
        fails(
            rml_graph_run(g, null(), 0),
            RmlStatus::InvalidArgument,
            "missing",
        );
    }
    let (x, dims) = npy_f32("models/graph-default/inputs/x.npy");
    let twice = [f32_tensor(c"x", &dims, &x), f32_tensor(c"x", &dims, &x)];
    // SAFETY: two valid tensors.
    fails(
        unsafe { rml_graph_run(g, twice.as_ptr(), 2) },
        RmlStatus::InvalidArgument,
        "twice",
    );
    // A failed run leaves no outputs to read; a good one still works after all this.
    // SAFETY: null info and data are allowed.
    let st = unsafe { rml_graph_get_output(g, 0, null_mut(), null_mut(), 0) };
    fails(st, RmlStatus::InvalidArgument, "has not run");
    ok(run_with(g, |_| {}));
    ok(rml_graph_free(g));
}

#[test]
fn llm_calls_reject_bad_arguments() {
    let l = bundled_llm();
    let mut n = 0;
    let mut ids = [0u32; 2];
    let mut text = [0 as c_char; 4];
    // SAFETY: every pointer is null or valid for its stated size.
    unsafe {
        fails(
            rml_llm_tokenize(l, null(), 0, null_mut(), 0, &mut n),
            RmlStatus::NullPointer,
            "text",
        );
        fails(
            rml_llm_tokenize(l, NOT_UTF8.as_ptr(), 0, null_mut(), 0, &mut n),
            RmlStatus::InvalidUtf8,
            "text",
        );
        let long = c"The for statement is used to iterate";
        fails(
            rml_llm_tokenize(l, long.as_ptr(), 8, ids.as_mut_ptr(), 2, &mut n),
            RmlStatus::InvalidArgument,
            "flag",
        );
        fails(
            rml_llm_tokenize(l, long.as_ptr(), 0, ids.as_mut_ptr(), 2, &mut n),
            RmlStatus::BufferTooSmall,
            "do not fit",
        );
        assert!(n > 2, "the count is reported");
        fails(
            rml_llm_tokenize(l, long.as_ptr(), 0, ids.as_mut_ptr(), 2, null_mut()),
            RmlStatus::NullPointer,
            "count",
        );
        fails(
            rml_llm_detokenize(
                l,
                [300u32, 301, 302].as_ptr(),
                3,
                0,
                text.as_mut_ptr(),
                4,
                &mut n,
            ),
            RmlStatus::BufferTooSmall,
            "bytes with its NUL",
        );
        fails(
            rml_llm_detokenize(l, null(), 3, 0, text.as_mut_ptr(), 4, &mut n),
            RmlStatus::NullPointer,
            "tokens",
        );

        let generate = |prompt: &[u32], options: &RmlGenerateOptions| {
            rml_llm_generate(
                l,
                prompt.as_ptr(),
                prompt.len(),
                options,
                None,
                null_mut(),
                null_mut(),
                0,
                null_mut(),
            )
        };
        let defaults = rml_generate_options_default();
        fails(
            generate(&[1, 1_000_000], &defaults),
            RmlStatus::InvalidArgument,
            "prompt[1] = 1000000",
        );
        fails(
            generate(&[], &defaults),
            RmlStatus::InvalidArgument,
            "empty",
        );
        let bad: [*const c_char; 1] = [NOT_UTF8.as_ptr()];
        let option_cases = [
            (
                RmlGenerateOptions {
                    temperature: f32::NAN,
                    ..defaults
                },
                RmlStatus::InvalidArgument,
                "temperature",
            ),
            (
                RmlGenerateOptions {
                    top_p: 0.0,
                    ..defaults
                },
                RmlStatus::InvalidArgument,
                "top_p",
            ),
            (
                RmlGenerateOptions {
                    context: usize::MAX,
                    ..defaults
                },
                RmlStatus::InvalidArgument,
                "context",
            ),
            (
                RmlGenerateOptions {
                    context: 1,
                    ..defaults
                },
                RmlStatus::InvalidArgument,
                "positions",
            ),
            (
                RmlGenerateOptions {
                    stop_strings: bad.as_ptr(),
                    n_stop_strings: 1,
                    ..defaults
                },
                RmlStatus::InvalidUtf8,
                "stop_strings[0]",
            ),
            (
                RmlGenerateOptions {
                    stop_strings: null(),
                    n_stop_strings: 1,
                    ..defaults
                },
                RmlStatus::NullPointer,
                "stop_strings",
            ),
        ];
        for (options, status, needle) in &option_cases {
            fails(generate(&[1, 2], options), *status, needle);
        }
        fails(
            rml_llm_generate(
                l,
                null(),
                2,
                null(),
                None,
                null_mut(),
                null_mut(),
                0,
                null_mut(),
            ),
            RmlStatus::NullPointer,
            "prompt",
        );
    }
    ok(rml_llm_free(l));
}

/// A callback that frees the handle it generates with, then generates again on it.
unsafe extern "C" fn free_midway(_: *const c_char, _: usize, user: *mut c_void) -> i32 {
    // SAFETY: `user` is the test's (handle, statuses) pair.
    let (l, seen) = unsafe { &mut *user.cast::<(RmlLlm, Vec<RmlStatus>)>() };
    seen.push(rml_llm_free(*l));
    // SAFETY: a valid one-token prompt; the handle is freed.
    seen.push(unsafe {
        rml_llm_generate(
            *l,
            [1u32].as_ptr(),
            1,
            null(),
            None,
            null_mut(),
            null_mut(),
            0,
            null_mut(),
        )
    });
    1
}

#[test]
fn freeing_inside_the_callback_is_safe() {
    let l = bundled_llm();
    let mut state: (RmlLlm, Vec<RmlStatus>) = (l, Vec::new());
    let options = RmlGenerateOptions {
        temperature: 0.0,
        stop_at_eos: 0,
        ..rml_generate_options_default()
    };
    let mut result = std::mem::MaybeUninit::<RmlGeneration>::uninit();
    // SAFETY: valid pointers; `state` outlives the call.
    ok(unsafe {
        rml_llm_generate(
            l,
            [1u32, 300].as_ptr(),
            2,
            &options,
            Some(free_midway),
            (&raw mut state).cast(),
            null_mut(),
            0,
            result.as_mut_ptr(),
        )
    });
    // SAFETY: written by the successful call.
    let result = unsafe { result.assume_init() };
    assert_eq!(result.stop_reason, RmlStopReason::Cancelled);
    assert_eq!(state.1, [RmlStatus::Ok, RmlStatus::InvalidHandle]);
    fails(rml_llm_free(l), RmlStatus::InvalidHandle, "freed");
}

#[test]
fn errors_are_per_thread() {
    // SAFETY: a null path is what is under test.
    fails(
        unsafe { rml_llm_load(null(), null_mut()) },
        RmlStatus::NullPointer,
        "out",
    );
    let other = std::thread::spawn(last_error).join().unwrap();
    assert_eq!(other, "");
}
