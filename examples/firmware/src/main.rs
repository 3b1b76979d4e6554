//! rml on a Cortex-M4F with no heap: runs the zoo MLP compiled into `static` arrays by
//! `rml-static-model` on its fixture input, with a `static` scratch buffer, and prints
//! the output rows over semihosting (`y[i]: v v v …`, each value in Rust's shortest
//! round-trip form) and the stack high-water mark, then exits QEMU with the run's
//! status.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use panic_semihosting as _;
use rml_static_model::{INPUT, INPUT_ROWS, OUTPUT_WIDTH, SOURCE, run, scratch_bytes};

mod stack;

/// The scratch [`run`] needs for the fixture's rows.
const SCRATCH_BYTES: usize = match scratch_bytes(INPUT_ROWS) {
    Some(bytes) => bytes,
    None => panic!("the fixture's scratch size overflows"),
};

#[entry]
fn main() -> ! {
    // cortex-m-rt hands `static mut` items of the entry function out as `&mut`
    // references, once, so these live in .bss without any `unsafe`.
    static mut SCRATCH: [u8; SCRATCH_BYTES] = [0; SCRATCH_BYTES];
    static mut OUTPUT: [f32; INPUT_ROWS * OUTPUT_WIDTH] = [0.0; INPUT_ROWS * OUTPUT_WIDTH];

    stack::paint();
    hprintln!("rml firmware: {} ({} rows)", SOURCE, INPUT_ROWS);
    let status = match run(&INPUT, OUTPUT, SCRATCH) {
        Ok(()) => {
            for (i, row) in OUTPUT.chunks(OUTPUT_WIDTH).enumerate() {
                hprintln!("y[{}]:{}", i, Row(row));
            }
            debug::EXIT_SUCCESS
        }
        Err(e) => {
            hprintln!("rml firmware: error: {}", e);
            debug::EXIT_FAILURE
        }
    };
    hprintln!(
        "rml firmware: stack high-water mark {} bytes",
        stack::used()
    );
    debug::exit(status);
    loop {
        cortex_m::asm::wfi();
    }
}

/// Formats a row as space-separated round-trip floats.
struct Row<'a>(&'a [f32]);

impl core::fmt::Display for Row<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.iter().try_for_each(|v| write!(f, " {v:?}"))
    }
}
