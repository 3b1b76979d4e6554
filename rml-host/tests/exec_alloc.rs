//! After the first run with given shapes, a single-threaded run of a graph made of
//! linears, fused elementwise programs, aliases, rml-core ops (layer norm), attention
//! on the GEMM, the convolution-family paths (conv2d, conv_transpose2d, group norm,
//! pooling, upsampling, reductions) and data movement (slice, concat, transpose,
//! split) allocates nothing on the heap.

mod exec_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use rml_host::graph::{Executor, Options};

/// Counts allocations made anywhere in the process.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed through.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn runs_after_the_first_allocate_nothing() {
    for doc in [
        exec_support::mlp(32, 3),
        exec_support::tiny20(),
        exec_support::norm_gelu_chain(16, 2),
        exec_support::self_attention(16),
        exec_support::conv_net(),
        exec_support::unrolled_rnn(6, 10, 5),
    ] {
        let (graph, constants) = exec_support::build(&doc);
        // The batch dim "N" is 4.
        let dims: Vec<usize> = graph.values[graph.inputs[0]]
            .ty
            .shape
            .iter()
            .map(|d| d.fixed().unwrap_or(4))
            .collect();
        let x = [exec_support::tensor(&dims, 1)];
        let mut e = Executor::new(graph, &constants, Options::default()).unwrap();
        e.run(&x).unwrap();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..10 {
            e.run(&x).unwrap();
        }
        assert_eq!(ALLOCATIONS.load(Ordering::Relaxed) - before, 0);
    }
}
