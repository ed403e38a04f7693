//! `rialto bench fix`: the FIX codec on the 214-byte NewOrderSingle and a fill report, timed
//! like QuickFIX/J's `CodecBench` (interop/quickfixj): warm-up rounds, then the median of
//! per-round nanoseconds per operation. The two print the same line format.

use std::hint::black_box;
use std::time::Instant;

use clap::Args;
use rialto_fix::app::NewOrderSingle;
use rialto_fix::{ApplVersion, samples};

#[derive(Args, Debug)]
pub struct FixBenchArgs {
    /// Measured rounds (the median is reported)
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
    /// Operations per round
    #[arg(long, default_value_t = 100_000)]
    pub per_round: usize,
    /// Unmeasured rounds first
    #[arg(long, default_value_t = 5)]
    pub warmup_rounds: usize,
}

fn median_ns_per_op(args: &FixBenchArgs, mut op: impl FnMut(u64)) -> f64 {
    let mut rounds = Vec::with_capacity(args.rounds);
    for round in 0..args.warmup_rounds + args.rounds {
        let start = Instant::now();
        for i in 0..args.per_round {
            op(i as u64);
        }
        let ns = start.elapsed().as_nanos() as f64 / args.per_round as f64;
        if round >= args.warmup_rounds {
            rounds.push(ns);
        }
    }
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

pub fn run(args: &FixBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rounds >= 1 && args.per_round >= 1,
        "rounds and --per-round must be positive"
    );
    let parse = median_ns_per_op(args, |_| {
        let (frame, _) = rialto_fix::next_frame(black_box(samples::NEW_ORDER_SINGLE), 4096)
            .ok()
            .flatten()
            .expect("the sample parses");
        black_box(NewOrderSingle::decode(&frame).ok());
    });
    let parse_validate = median_ns_per_op(args, |_| {
        let (frame, _) = rialto_fix::next_frame(black_box(samples::NEW_ORDER_SINGLE), 4096)
            .ok()
            .flatten()
            .expect("the sample parses");
        black_box(NewOrderSingle::decode_validated(ApplVersion::Fix44, &frame).ok());
    });
    let report = samples::fill_report();
    let mut out = Vec::with_capacity(1024);
    let encode = median_ns_per_op(args, |seq| {
        out.clear();
        samples::write_execution_report(
            &mut out,
            black_box(&report),
            seq,
            1_795_322_669_123_000_000,
        );
        black_box(&out);
    });
    // Written, not printed: a closed pipe (`| head`) ends the output instead of panicking.
    use std::io::Write as _;
    let mut out_text = std::io::stdout().lock();
    let _ = writeln!(
        out_text,
        "rialto parse_new_order_single median_ns={parse:.0}"
    );
    let _ = writeln!(
        out_text,
        "rialto parse_validate_new_order_single median_ns={parse_validate:.0}"
    );
    let _ = writeln!(
        out_text,
        "rialto encode_execution_report median_ns={encode:.0}"
    );
    let _ = writeln!(
        out_text,
        "message bytes: new order single {}, execution report {}",
        samples::NEW_ORDER_SINGLE.len(),
        out.len()
    );
    Ok(())
}
