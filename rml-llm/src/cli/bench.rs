//! `rml-llm bench`.
use clap::Args;
/// Bench.
#[derive(Args)]
pub struct BenchCommand {}
impl BenchCommand {
    /// Run.
    pub fn run(self) -> Result<(), String> {
        Ok(())
    }
}
