//! Runs one codec operation N times, for `perf stat` (instructions and cycles per operation
//! do not depend on what else the machine is doing, unlike wall time):
//! `perf stat -e instructions:u,cycles:u,branch-misses:u target/release/examples/codec_loop parse 1000000`

use std::hint::black_box;

use rialto_fix::app::NewOrderSingle;
use rialto_fix::{ApplVersion, dict, samples};

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap_or_else(|| "parse".into());
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let report = samples::fill_report();
    let mut out = Vec::with_capacity(1024);
    for i in 0..n {
        match op.as_str() {
            "parse" | "validate" => {
                let (frame, _) = rialto_fix::next_frame(black_box(samples::NEW_ORDER_SINGLE), 4096)
                    .ok()
                    .flatten()
                    .expect("the sample parses");
                if op == "validate" {
                    black_box(NewOrderSingle::decode_validated(ApplVersion::Fix44, &frame).ok());
                } else {
                    black_box(NewOrderSingle::decode(&frame).ok());
                }
            }
            "validate-only" => {
                let (frame, _) = rialto_fix::next_frame(black_box(samples::NEW_ORDER_SINGLE), 4096)
                    .ok()
                    .flatten()
                    .expect("the sample parses");
                black_box(dict::validate(ApplVersion::Fix44, &frame).ok());
            }
            "encode" => {
                out.clear();
                samples::write_execution_report(
                    &mut out,
                    black_box(&report),
                    i,
                    1_795_322_669_123_000_000,
                );
                black_box(&out);
            }
            other => panic!("unknown operation {other}: parse, validate, validate-only or encode"),
        }
    }
}
