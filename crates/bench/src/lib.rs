//! Benchmark workloads and harness.
