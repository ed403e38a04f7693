//! Benchmark workloads and harness: `rialto bench engine`, `rialto bench auction`,
//! `rialto bench liquidation` and `rialto bench memory` (see docs/benchmarks.md).

pub mod auction;
pub mod cli;
pub mod clock;
pub mod harness;
pub mod liquidation;
pub mod mem;
pub mod memory;
pub mod rng;
pub mod workload;
