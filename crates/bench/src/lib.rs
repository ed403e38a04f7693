//! Benchmark workloads and harness: `rialto bench engine` (see docs/benchmarks.md).

pub mod cli;
pub mod clock;
pub mod harness;
pub mod mem;
pub mod rng;
pub mod workload;
