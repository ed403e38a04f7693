//! Runs `dict::validate` on the sample NewOrderSingle N times (default 1,000,000), for
//! instruction counts, which unlike wall-clock times do not depend on what else the machine is
//! doing: the count with N minus the count with 0, divided by N, is the cost of one validation
//! without the process start-up.
//!
//! ```text
//! cargo build --release -p rialto-fix --example validate_loop
//! perf stat -e instructions:u target/release/examples/validate_loop 1000000
//! perf stat -e instructions:u target/release/examples/validate_loop 0
//! ```
//!
//! Where perf has no hardware counters (in many VMs it says `<not supported>`), valgrind counts
//! the same thing (its "I refs"); 100,000 iterations are enough:
//!
//! ```text
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/validate_loop 100000
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/validate_loop 0
//! ```

use std::hint::black_box;

use rialto_fix::{ApplVersion, dict, next_frame, samples};

fn main() {
    let iterations: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |a| a.parse())
        .expect("usage: validate_loop [ITERATIONS]");
    let (frame, _) = next_frame(samples::NEW_ORDER_SINGLE, 4096)
        .ok()
        .flatten()
        .expect("the sample parses");
    let mut accepted = 0u64;
    for _ in 0..iterations {
        if dict::validate(ApplVersion::Fix44, black_box(&frame)).is_ok() {
            accepted += 1;
        }
    }
    assert_eq!(accepted, iterations, "the sample must validate");
    println!("{accepted}");
}
