//! Benchmark workloads and harness.

pub mod cli;
