//! `RML_ISA`: the environment variable that makes every kernel of a process run one
//! family (`scalar`, `avx2`, `avx512`, `neon`), so runs and benchmarks can compare the
//! paths on one machine; unset, the best family the CPU supports runs.
#![forbid(unsafe_code)]

use rml_kernels::isa::{self, Isa};

/// The variable's name.
pub const VAR: &str = "RML_ISA";

/// Forces the kernel family `RML_ISA` names, when it is set; an error naming the
/// value when it is not a family or this CPU cannot run it.
pub fn force_from_env() -> Result<(), String> {
    let Some(name) = std::env::var_os(VAR) else {
        return Ok(());
    };
    let name = name.to_string_lossy();
    Isa::parse(&name)
        .and_then(isa::force)
        .map_err(|e| format!("{VAR}={name}: {e}"))
}
