//! `rml-llm quantize`.
use clap::Args;
/// Quantize.
#[derive(Args)]
pub struct QuantizeCommand {}
impl QuantizeCommand {
    /// Run.
    pub fn run(self) -> Result<(), String> {
        Ok(())
    }
}
