//! `rialto bench ...` without the rest of the `rialto` binary: the same subcommands and harness
//! (`rialto_bench::cli`), built in a fraction of the time, for instruction counts of the engine
//! at several commits (docs/benchmarks.md, "What the rulebook costs a plain limit order"):
//!
//! ```text
//! cargo build --release -p rialto-bench --example bench
//! valgrind --tool=callgrind --toggle-collect='*throughput_pass*' \
//!     target/release/examples/bench engine --workload single --commands 300000 --json
//! ```
//!
//! Its allocator is the system's, not the `rialto` binary's huge-page allocator: wall-clock
//! figures of memory-bound workloads may differ; the throughput pass allocates nothing, so its
//! instruction count does not.

use clap::Parser;

#[derive(Parser)]
#[command(name = "bench", about = "rialto bench, alone")]
struct Args {
    #[command(subcommand)]
    command: rialto_bench::cli::BenchCommand,
}

fn main() -> anyhow::Result<()> {
    rialto_bench::cli::run(Args::parse().command)
}
