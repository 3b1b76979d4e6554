//! rml in a WebAssembly module: the zoo MLP compiled into `static` arrays by
//! `rml-static-model`, run on memory the caller provides.
//!
//! The module allocates nothing and has no heap: the host (JavaScript) grows the
//! module's `memory`, places the input, output and scratch buffers at or above the
//! exported `__heap_base` (the first byte Rust does not use), and calls [`rml_run`].
//! Every pointer is checked before it is used: non-null, aligned, inside the memory,
//! above `__heap_base`, and the three buffers must not overlap. `run.mjs` is the host.
#![no_std]

use core::ops::Range;

use rml_static_model::{INPUT_WIDTH, OUTPUT_WIDTH, run, scratch_bytes};

/// [`rml_run`] succeeded.
pub const RML_OK: i32 = 0;
/// A pointer is null or not aligned to 4 bytes, or `rows` is 0.
pub const RML_BAD_ARGUMENT: i32 = 1;
/// A buffer is not inside the caller's part of memory, or two buffers overlap.
pub const RML_BAD_MEMORY: i32 = 2;
/// The scratch is smaller than [`rml_scratch_bytes`].
pub const RML_SCRATCH_TOO_SMALL: i32 = 3;
/// The model failed (a length or shape rml-core rejected).
pub const RML_MODEL_ERROR: i32 = 4;

/// Features per input row.
#[unsafe(no_mangle)]
pub extern "C" fn rml_input_width() -> usize {
    INPUT_WIDTH
}

/// Values per output row.
#[unsafe(no_mangle)]
pub extern "C" fn rml_output_width() -> usize {
    OUTPUT_WIDTH
}

/// Scratch bytes [`rml_run`] needs for `rows` rows (`usize::MAX` when that overflows).
#[unsafe(no_mangle)]
pub extern "C" fn rml_scratch_bytes(rows: usize) -> usize {
    scratch_bytes(rows).unwrap_or(usize::MAX)
}

/// Runs the model on `rows` rows: reads `rows × rml_input_width()` f32 at `x`, writes
/// `rows × rml_output_width()` f32 at `y`, uses `scratch_len` bytes at `scratch`.
/// Returns one of the `RML_*` codes; on any error nothing is written to `y`.
///
/// # Safety
/// The buffers must not be accessed by anything else during the call. Everything
/// else is checked: see the module documentation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_run(
    x: *const f32,
    rows: usize,
    y: *mut f32,
    scratch: *mut u8,
    scratch_len: usize,
) -> i32 {
    if rows == 0
        || [x as usize, y as usize]
            .iter()
            .any(|&p| p == 0 || p % 4 != 0)
        || scratch.is_null()
    {
        return RML_BAD_ARGUMENT;
    }
    let (x_len, y_len) = (
        rows.checked_mul(INPUT_WIDTH),
        rows.checked_mul(OUTPUT_WIDTH),
    );
    let (Some(x_len), Some(y_len)) = (x_len, y_len) else {
        return RML_BAD_MEMORY;
    };
    let spans = [
        f32_span(x as usize, x_len),
        f32_span(y as usize, y_len),
        span(scratch as usize, scratch_len),
    ];
    let [Some(xs), Some(ys), Some(ss)] = spans else {
        return RML_BAD_MEMORY;
    };
    if !fits_caller_memory(&[&xs, &ys, &ss])
        || overlap(&xs, &ys)
        || overlap(&xs, &ss)
        || overlap(&ys, &ss)
    {
        return RML_BAD_MEMORY;
    }
    if scratch_len < rml_scratch_bytes(rows) {
        return RML_SCRATCH_TOO_SMALL;
    }
    // SAFETY: each pointer is non-null and aligned for its type, its range lies in
    // linear memory above `__heap_base` (so no Rust static or stack slot is in it),
    // the three ranges are disjoint, and the caller guarantees nothing else touches
    // them during the call.
    let (x, y, scratch) = unsafe {
        (
            core::slice::from_raw_parts(x, x_len),
            core::slice::from_raw_parts_mut(y, y_len),
            core::slice::from_raw_parts_mut(scratch, scratch_len),
        )
    };
    match run(x, y, scratch) {
        Ok(()) => RML_OK,
        Err(_) => RML_MODEL_ERROR,
    }
}

/// `start..start + len`, or `None` when it wraps.
fn span(start: usize, len: usize) -> Option<Range<usize>> {
    Some(start..start.checked_add(len)?)
}

/// The bytes of `count` f32 values at `start`, or `None` when that overflows.
fn f32_span(start: usize, count: usize) -> Option<Range<usize>> {
    span(start, count.checked_mul(core::mem::size_of::<f32>())?)
}

/// True when two ranges share a byte.
fn overlap(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// True when every range lies between `__heap_base` and the end of linear memory.
#[cfg(target_arch = "wasm32")]
fn fits_caller_memory(spans: &[&Range<usize>]) -> bool {
    unsafe extern "C" {
        /// The first byte past Rust's data and stack (defined by the linker).
        static __heap_base: u8;
    }
    let base = &raw const __heap_base as usize;
    let end = core::arch::wasm32::memory_size(0).saturating_mul(65536);
    spans.iter().all(|s| s.start >= base && s.end <= end)
}

/// Off wasm32 there is no caller region to check against: nothing fits.
#[cfg(not(target_arch = "wasm32"))]
fn fits_caller_memory(_: &[&Range<usize>]) -> bool {
    false
}

#[cfg(target_arch = "wasm32")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
