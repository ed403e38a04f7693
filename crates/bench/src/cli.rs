//! The `rialto bench ...` subcommands.

/// Benchmarks (placeholder until the harness lands).
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// The engine benchmark.
    Engine,
}

pub fn run(_cmd: BenchCommand) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
