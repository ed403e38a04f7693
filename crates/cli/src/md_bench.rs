//! `rialto bench market-data`: what the market data feed costs the engine on the `single`
//! workload.
//!
//! Each run applies the workload's commands on one thread the way the pipeline's engine
//! stage does (events collected per command). The `feed` runs also hand every accepted
//! command and its events to the market data thread through the production tap and ring, and
//! that thread builds the L1/L2/L3/trade/candle updates on the other core. Runs alternate
//! (baseline, feed, baseline, ...) so that a noisy machine hurts both alike; medians compare.
//! Throughput is reported per second of wall time and per second of the engine thread's own
//! CPU time: the second is what the feed costs the engine's work, whatever else the machine
//! runs on its cores.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;
use rialto_bench::harness;
use rialto_bench::workload::{self, SingleParams};
use rialto_core::{Command, OwnedEvent};
use rialto_marketdata::Feed;
use rialto_server::feed::MarketData;
use rialto_server::pipeline::{MarketDataTap, MdChannel, Shared};

#[derive(Args, Debug)]
pub struct MdBenchArgs {
    /// Measured commands of the `single` workload
    #[arg(long, default_value_t = 3_000_000)]
    pub commands: u64,
    /// Runs of each kind (baseline and feed, alternating)
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Slots in the market data ring
    #[arg(long, default_value_t = 65_536)]
    pub ring: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only hand the inputs over: the consumer thread drops them instead of building market
    /// data (separates the hand-off's cost from the feed's use of the other core)
    #[arg(long)]
    pub drain_only: bool,
    /// Run only one kind (for instruction counts under valgrind:
    /// `--toggle-collect='*apply_commands*'`)
    #[arg(long, value_parser = ["baseline", "feed"])]
    pub only: Option<String>,
}

/// The engine's loop, as the pipeline's engine stage runs it: events collected per command,
/// and with a tap, accepted commands handed to market data. Never inlined, so that
/// instruction counts can single it out.
#[inline(never)]
fn apply_commands(
    engine: &mut rialto_core::Engine,
    mut seq: u64,
    commands: &[Command],
    mut tap: Option<&mut MarketDataTap>,
) {
    let mut events: Vec<OwnedEvent> = Vec::with_capacity(64);
    for cmd in commands {
        seq += 1;
        events.clear();
        let result = engine.apply(seq, seq as i64, cmd, &mut events);
        if let (Some(tap), Ok(())) = (&mut tap, result) {
            tap.send_applied(seq as i64, cmd, &events);
        }
    }
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

struct Run {
    /// Commands per second of wall time on the engine thread.
    throughput: f64,
    /// Commands per second of the engine thread's CPU time.
    cpu_throughput: f64,
    /// After the engine finished, how long the market data thread took to catch up.
    drain: Duration,
}

fn one_run(
    w: &workload::Workload,
    commands: &[Command],
    feed: bool,
    args: &MdBenchArgs,
) -> anyhow::Result<Run> {
    let ring = args.ring;
    let prepared = harness::prepare(w)?;
    let mut engine = prepared.engine;
    let channel = MdChannel::new(ring);
    let shared = Arc::new(Shared::default());
    let market_data = MarketData::new(Feed::from_engine(&engine));
    let md_thread = if args.drain_only {
        let (channel, shared) = (channel.clone(), shared.clone());
        std::thread::spawn(move || {
            while !(shared.engine_done.load(Ordering::SeqCst) && channel.batches.is_empty()) {
                match channel.batches.pop() {
                    Some(batch) => channel.recycle(batch),
                    None => std::thread::yield_now(),
                }
            }
        })
    } else {
        market_data.spawn(channel.clone(), shared.clone())?
    };
    let mut tap = feed.then(|| MarketDataTap::new(channel.clone()));

    let start = Instant::now();
    let cpu_start = thread_cpu();
    apply_commands(&mut engine, prepared.seq, commands, tap.as_mut());
    let elapsed = start.elapsed();
    let cpu = thread_cpu() - cpu_start;
    let engine_done = Instant::now();
    if let Some(tap) = &mut tap {
        tap.hand_off();
        while tap.spilled() > 0 {
            tap.hand_off();
            std::thread::yield_now();
        }
    }
    shared.engine_done.store(true, Ordering::SeqCst);
    md_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the market data thread panicked"))?;
    let drain = engine_done.elapsed();
    Ok(Run {
        throughput: commands.len() as f64 / elapsed.as_secs_f64(),
        cpu_throughput: commands.len() as f64 / cpu.as_secs_f64(),
        drain,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: &MdBenchArgs) -> anyhow::Result<()> {
    let params = SingleParams {
        commands: args.commands,
        ..SingleParams::default()
    };
    eprintln!(
        "generating the single workload ({} commands)...",
        args.commands
    );
    let w = workload::single(&params, args.seed);
    let (mut base, mut with_feed) = (Vec::new(), Vec::new());
    let (mut base_cpu, mut feed_cpu) = (Vec::new(), Vec::new());
    if let Some(kind) = &args.only {
        let r = one_run(&w, &w.commands, kind == "feed", args)?;
        println!(
            "{kind}: {:.0} cmd/s ({:.0} per CPU s)",
            r.throughput, r.cpu_throughput
        );
        return Ok(());
    }
    for i in 0..args.runs {
        let b = one_run(&w, &w.commands, false, args)?;
        let f = one_run(&w, &w.commands, true, args)?;
        println!(
            "run {}: baseline {:.0} cmd/s ({:.0} per CPU s), with feed {:.0} cmd/s ({:.0} per CPU s); market data caught up {:.1} ms after the engine",
            i + 1,
            b.throughput,
            b.cpu_throughput,
            f.throughput,
            f.cpu_throughput,
            f.drain.as_secs_f64() * 1e3
        );
        base.push(b.throughput);
        with_feed.push(f.throughput);
        base_cpu.push(b.cpu_throughput);
        feed_cpu.push(f.cpu_throughput);
    }
    let (b, f) = (median(base), median(with_feed));
    let (bc, fc) = (median(base_cpu), median(feed_cpu));
    println!(
        "median wall: baseline {b:.0} cmd/s, with feed {f:.0} cmd/s: {:.1}% less",
        (b - f) / b * 100.0
    );
    println!(
        "median engine CPU: baseline {bc:.0} cmd/s, with feed {fc:.0} cmd/s: the feed costs the engine {:.1}%",
        (bc - fc) / bc * 100.0
    );
    Ok(())
}
