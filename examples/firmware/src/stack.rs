//! Stack high-water mark: [`paint`] fills the free stack with a pattern, [`used`]
//! finds the deepest word the program has overwritten since. The stack grows down
//! from `_stack_start` (the top of RAM) towards `_stack_end` (the end of `.bss`), both
//! defined by cortex-m-rt's linker script.

/// The pattern left in stack words nothing has written.
const PAINT: u32 = 0xA5A5_A5A5;
/// Bytes below the current stack pointer left unpainted (this function's own frame).
const MARGIN: usize = 64;

unsafe extern "C" {
    static _stack_start: u32;
    static _stack_end: u32;
}

/// Paints every stack word from `_stack_end` up to just below the stack pointer.
pub fn paint() {
    let limit = (cortex_m::register::msp::read() as usize).saturating_sub(MARGIN);
    let mut word = &raw const _stack_end as usize;
    while word < limit {
        // SAFETY: the words between the end of `.bss` and the stack pointer belong to
        // nothing (there is no heap), are aligned (`_stack_end` is 4-aligned) and lie
        // in RAM; the stack pointer is above `limit`, so no live frame is touched.
        unsafe { core::ptr::write_volatile(word as *mut u32, PAINT) };
        word += 4;
    }
}

/// Bytes of stack in use at the deepest point since [`paint`].
pub fn used() -> usize {
    let top = &raw const _stack_start as usize;
    let mut word = &raw const _stack_end as usize;
    // SAFETY: reads aligned RAM words between the end of `.bss` and the top of RAM.
    while word < top && unsafe { core::ptr::read_volatile(word as *const u32) } == PAINT {
        word += 4;
    }
    top - word
}
