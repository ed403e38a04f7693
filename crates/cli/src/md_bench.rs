//! `rialto bench market-data`: what the market data feed costs the thread that journals and
//! applies commands, on the `single` workload or a `multi` venue.
//!
//! Each run does what the pipeline's journal and engine stages do on one thread (their
//! layout on two cores): batches of 1,024 commands are encoded as journal records, then
//! applied to the engine with their events collected. The `feed` runs also hand each batch's
//! records to the market data thread through the production tap and ring (one copy per
//! batch); that thread replays them on its replica of the engine and builds the
//! L1/L2/L3/trade/candle updates on the other core. Runs alternate (baseline, feed, ...) so
//! that a noisy machine hurts both alike; medians compare. Throughput is reported per second
//! of wall time and per second of the thread's own CPU time.
//!
//! The feed runs share one channel, after a warm-up run that is not counted, as a server
//! that has been running does: the chunk buffers that a lagging market data thread made the
//! tap allocate are kept for reuse. `--cold` gives each run a new channel, so that the tap
//! allocates (and the kernel faults in) a buffer for every batch the replica is behind.
//!
//! On a big `multi` venue both the engine thread and the replica prefetch what their next
//! commands touch, as `rialto serve` does with `pipeline.prefetch`; `--prefetch off` shows what
//! that buys each (the replica's lag is the time market data takes to catch up).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;
use rialto_bench::cli::PrefetchArg;
use rialto_bench::harness;
use rialto_bench::workload;
use rialto_core::{Command, Engine, OwnedEvent};
use rialto_journal::format::encode_record;
use rialto_server::feed::MarketData;
use rialto_server::pipeline::{JournalTap, MdChannel, Prefetch, Shared};

/// The bench hands every batch over without waiting: it measures what the feed costs the
/// engine, so its spill has no bound (the server's is `market_data.max_spill_mib`).
const SPILL_UNBOUNDED: usize = usize::MAX;

/// Commands per batch, as the journal stage takes them at most (`pipeline.batch_max`).
const BATCH: usize = 1024;

#[derive(Args, Debug)]
pub struct MdBenchArgs {
    #[command(flatten)]
    pub workload: crate::BenchWorkloadArgs,
    /// Measured commands
    #[arg(long, default_value_t = 1_000_000)]
    pub commands: u64,
    /// Whether the engine thread and the market data replica prefetch what their next commands
    /// touch (`pipeline.prefetch` of `rialto serve`: `auto` on venues too big for the caches)
    #[arg(long, value_enum, default_value = "auto")]
    pub prefetch: PrefetchArg,
    /// Runs of each kind (baseline and feed, alternating)
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Slots in the market data ring (each a batch's records)
    #[arg(long, default_value_t = 1024)]
    pub ring: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Only hand the records over: the consumer thread drops them instead of building market
    /// data (separates the hand-off's cost from the feed's use of the other core)
    #[arg(long)]
    pub drain_only: bool,
    /// A new market data channel for every run, without a warm-up: the cost of a fresh
    /// server's first lag
    #[arg(long)]
    pub cold: bool,
    /// Run only one kind (for instruction counts under valgrind:
    /// `--toggle-collect='*apply_commands*'`)
    #[arg(long, value_parser = ["baseline", "feed"])]
    pub only: Option<String>,
}

/// The journal and engine stages' loop: encode a batch as journal records, hand a copy to
/// market data (with a tap), apply the batch (prefetching ahead with `prefetch`). Never
/// inlined, so that instruction counts can single it out.
#[inline(never)]
fn apply_commands(
    engine: &mut Engine,
    mut seq: u64,
    commands: &[Command],
    prefetch: bool,
    mut tap: Option<&mut JournalTap>,
    shared: &Shared,
    channel: &MdChannel,
) {
    let mut records: Vec<u8> = Vec::with_capacity(BATCH * 128);
    let mut events: Vec<OwnedEvent> = Vec::with_capacity(64);
    let mut applied = 0;
    for batch in commands.chunks(BATCH) {
        records.clear();
        for (i, cmd) in batch.iter().enumerate() {
            let n = seq + 1 + i as u64;
            encode_record(&mut records, n, n as i64, cmd);
        }
        if let Some(tap) = &mut tap {
            tap.send(&records);
            tap.hand_off();
        }
        for cmd in batch {
            if prefetch {
                engine.prefetch_ahead(&commands[applied..]);
            }
            applied += 1;
            seq += 1;
            events.clear();
            let _ = engine.apply(seq, seq as i64, cmd, &mut events);
        }
        shared.applied_seq.store(seq, Ordering::Release);
        if tap.is_some() {
            channel.chunks.ring();
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
    /// Whether the engine thread prefetched.
    prefetched: bool,
}

fn one_run(
    w: &workload::Workload,
    commands: &[Command],
    feed: bool,
    args: &MdBenchArgs,
    channel: &Arc<MdChannel>,
) -> anyhow::Result<Run> {
    let prepared = harness::prepare(w)?;
    let mut engine = prepared.engine;
    let prefetch = Prefetch::from(args.prefetch);
    let prefetched = prefetch.now(&engine);
    let channel = match args.cold {
        true => MdChannel::new(args.ring, SPILL_UNBOUNDED),
        false => channel.clone(),
    };
    let shared = Arc::new(Shared::default());
    shared.applied_seq.store(prepared.seq, Ordering::SeqCst);
    let market_data = MarketData::new(&engine);
    let md_thread = if !feed {
        None
    } else if args.drain_only {
        let (channel, shared) = (channel.clone(), shared.clone());
        Some(std::thread::spawn(move || {
            while !(shared.engine_done.load(Ordering::SeqCst) && channel.chunks.is_empty()) {
                match channel.chunks.pop() {
                    Some(chunk) => channel.recycle(chunk),
                    None => std::thread::yield_now(),
                }
            }
        }))
    } else {
        let replica = Engine::decode_snapshot(&engine.encode_snapshot(), w.config)
            .map_err(|e| anyhow::anyhow!("cannot copy the engine: {e:?}"))?;
        Some(market_data.spawn(channel.clone(), shared.clone(), replica, prefetch, None)?)
    };
    let mut tap = feed.then(|| JournalTap::new(channel.clone()));

    let start = Instant::now();
    let cpu_start = thread_cpu();
    apply_commands(
        &mut engine,
        prepared.seq,
        commands,
        prefetched,
        tap.as_mut(),
        &shared,
        &channel,
    );
    let elapsed = start.elapsed();
    let cpu = thread_cpu() - cpu_start;
    let engine_done = Instant::now();
    if let Some(tap) = &mut tap {
        while tap.spilled() > 0 {
            tap.hand_off();
            std::thread::yield_now();
        }
    }
    shared.engine_done.store(true, Ordering::SeqCst);
    channel.chunks.ring_always();
    if let Some(thread) = md_thread {
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("the market data thread panicked"))?;
    }
    if shared.has_failed() {
        anyhow::bail!("the market data thread failed");
    }
    if feed && !args.drain_only {
        let (replayed, applied) = (market_data.applied_seq(), engine.last_seq());
        anyhow::ensure!(
            replayed == applied,
            "market data replayed up to {replayed}, the engine applied {applied}"
        );
    }
    let drain = engine_done.elapsed();
    Ok(Run {
        throughput: commands.len() as f64 / elapsed.as_secs_f64(),
        cpu_throughput: commands.len() as f64 / cpu.as_secs_f64(),
        drain,
        prefetched,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: &MdBenchArgs) -> anyhow::Result<()> {
    let (w, label) = args.workload.generate(args.commands, args.seed)?;
    let (mut base, mut with_feed) = (Vec::new(), Vec::new());
    let (mut base_cpu, mut feed_cpu) = (Vec::new(), Vec::new());
    let mut drains = Vec::new();
    let mut prefetched = false;
    let channel = MdChannel::new(args.ring, SPILL_UNBOUNDED);
    if let Some(kind) = &args.only {
        let r = one_run(&w, &w.commands, kind == "feed", args, &channel)?;
        println!(
            "{kind}: {:.0} cmd/s ({:.0} per CPU s)",
            r.throughput, r.cpu_throughput
        );
        return Ok(());
    }
    if !args.cold {
        let r = one_run(&w, &w.commands, true, args, &channel)?;
        println!(
            "warm-up (not counted): with feed {:.0} cmd/s ({:.0} per CPU s)",
            r.throughput, r.cpu_throughput
        );
    }
    for i in 0..args.runs {
        let b = one_run(&w, &w.commands, false, args, &channel)?;
        let f = one_run(&w, &w.commands, true, args, &channel)?;
        println!(
            "run {}: baseline {:.0} cmd/s ({:.0} per CPU s), with feed {:.0} cmd/s ({:.0} per CPU s); market data caught up {:.1} ms after the engine",
            i + 1,
            b.throughput,
            b.cpu_throughput,
            f.throughput,
            f.cpu_throughput,
            f.drain.as_secs_f64() * 1e3
        );
        prefetched = b.prefetched;
        drains.push(f.drain.as_secs_f64() * 1e3);
        base.push(b.throughput);
        with_feed.push(f.throughput);
        base_cpu.push(b.cpu_throughput);
        feed_cpu.push(f.cpu_throughput);
    }
    let (b, f) = (median(base), median(with_feed));
    let (bc, fc) = (median(base_cpu), median(feed_cpu));
    println!(
        "{label}, {} commands a run; prefetching (engine thread and replica): {}",
        w.commands.len(),
        if prefetched { "on" } else { "off" }
    );
    println!(
        "median lag: market data caught up {:.1} ms after the engine",
        median(drains)
    );
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
