//! The FIX codec's speed targets: parse a 214-byte NewOrderSingle into its struct, and write
//! an ExecutionReport with its header (docs/benchmarks.md).

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use rialto_fix::app::NewOrderSingle;
use rialto_fix::samples;

fn parse(c: &mut Criterion) {
    c.bench_function("parse_new_order_single", |b| {
        b.iter(|| {
            let (frame, _) = rialto_fix::next_frame(black_box(samples::NEW_ORDER_SINGLE), 4096)
                .unwrap()
                .unwrap();
            black_box(NewOrderSingle::decode(&frame).unwrap());
        })
    });
}

fn encode(c: &mut Criterion) {
    let report = samples::fill_report();
    let mut out = Vec::with_capacity(1024);
    c.bench_function("encode_execution_report", |b| {
        b.iter(|| {
            out.clear();
            samples::write_execution_report(
                &mut out,
                black_box(&report),
                1234,
                1_795_322_669_123_000_000,
            );
            black_box(&out);
        })
    });
}

criterion_group!(benches, parse, encode);
criterion_main!(benches);
