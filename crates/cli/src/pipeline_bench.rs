//! `rialto bench pipeline`: a workload of `rialto bench engine` (`single` by default, or
//! `multi`) through the in-process pipeline (journal thread with a real journal on disk,
//! engine thread, replies), without sockets.
//!
//! Each command is sent as if by its own session, so its reply names it. Two ways to drive it:
//! - closed loop (the default): a window of commands in flight, for throughput; latency from
//!   the moment a command entered the inbound ring to the moment its reply left the outbound
//!   ring (queueing behind the window included);
//! - `--rates`: commands offered on a fixed schedule, one table row per rate, as `rialto
//!   loadgen` offers them to a server; latency from each command's *scheduled* time to its
//!   reply, so a stall (or a full ring) is charged to every command behind it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use rialto_bench::cli::PrefetchArg;
use rialto_bench::workload;
use rialto_core::{Command, Engine};
use rialto_journal::{Durability, JournalConfig, JournalWriter};
use rialto_server::auth::Credentials;
use rialto_server::config::{DurabilityMode, ThreadLayout};
use rialto_server::idle::WaitStrategy;
use rialto_server::pipeline::{Op, Pipeline, PipelineConfig, Reply, Request, Target};
use rialto_wire::RequestKind;

use crate::loadgen;

#[derive(Args, Debug)]
pub struct PipelineBenchArgs {
    /// fsync, batch or none
    #[arg(long, default_value = "batch")]
    pub durability: DurabilityMode,
    #[arg(long, default_value_t = 1_000)]
    pub batch_interval_us: u64,
    #[command(flatten)]
    pub workload: crate::BenchWorkloadArgs,
    /// Measured commands
    #[arg(long, default_value_t = 1_000_000)]
    pub commands: u64,
    /// Whether the engine stage prefetches what its next commands touch (`pipeline.prefetch`
    /// of `rialto serve`); `off` gives the baseline for comparisons.
    #[arg(long, value_enum, default_value = "auto")]
    pub prefetch: PrefetchArg,
    /// Most commands in flight (sent, not yet answered)
    #[arg(long, default_value_t = 4_096)]
    pub window: usize,
    /// How the pipeline threads wait
    #[arg(long, default_value = "backoff")]
    pub wait: WaitStrategy,
    /// dedicated: the journal and engine stages on threads of their own; shared: on the
    /// driving thread, as `rialto serve` runs them on the gateway's thread on small machines
    #[arg(long, default_value = "auto")]
    pub threads: ThreadLayout,
    /// Where to journal [default: a fresh directory under the current one, removed after]
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Offered rates, commands per second: one fixed-schedule run each, with a fresh
    /// pipeline and journal (instead of the closed loop)
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<u64>,
    /// With --rates, the longest a run lasts (it offers at most --commands)
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

const FIRST_BENCH_SESSION: u64 = 1 << 32;

/// A pipeline journaling into `data_dir`, with the workload's set-up and pre-fill applied
/// (journaled, unmeasured).
fn start_pipeline(
    args: &PipelineBenchArgs,
    w: &workload::Workload,
    data_dir: &Path,
) -> anyhow::Result<Pipeline> {
    let durability = match args.durability {
        DurabilityMode::Fsync => Durability::Fsync,
        DurabilityMode::Batch => Durability::Batch {
            interval_us: args.batch_interval_us,
        },
        DurabilityMode::None => Durability::None,
    };
    let journal = JournalWriter::open(
        data_dir,
        JournalConfig {
            segment_bytes: 256 << 20,
            durability,
            ..JournalConfig::default()
        },
        1,
    )?;
    let mut pipeline = Pipeline::start(
        PipelineConfig {
            ring_capacity: args.window.max(1024).next_power_of_two(),
            batch_max: 1024,
            wait: args.wait,
            snapshot_every: 0,
            data_dir: data_dir.to_path_buf(),
            archive: false,
            last_ts_ns: 0,
            dedicated_threads: args.threads.dedicated(),
            market_data: None,
            metrics: Default::default(),
            prefetch: args.prefetch.into(),
            checkpoint_every: 0,
            intakes: Vec::new(),
            web_outbound: None,
        },
        Engine::new(w.config),
        journal,
        Arc::new(Credentials::from_key([0; 32])),
    )?;
    let setup: Vec<Command> = w
        .setup_commands()
        .chain(w.prefill.iter().cloned())
        .collect();
    pipeline
        .apply_system_commands(setup, Duration::from_secs(600))
        .map_err(|e| anyhow::anyhow!("set-up: {e}"))?;
    Ok(pipeline)
}

/// The request that offers workload command `k`, as session `FIRST_BENCH_SESSION + k`.
fn request(w: &workload::Workload, k: usize) -> Request {
    Request {
        session: FIRST_BENCH_SESSION + k as u64,
        reply: Reply::Order {
            order: 0,
            kind: RequestKind::Place,
        },
        op: Op::Command(w.commands[k].clone()),
    }
}

/// The replies now waiting: calls `answered(k)` for each reply to workload command `k`.
fn take_replies(pipeline: &Pipeline, mut answered: impl FnMut(usize)) -> usize {
    let mut got = 0;
    while let Some(out) = pipeline.outbound.pop() {
        if let Target::Session(s) = out.target
            && s >= FIRST_BENCH_SESSION
        {
            answered((s - FIRST_BENCH_SESSION) as usize);
            got += 1;
        }
    }
    got
}

/// One fixed-schedule run per rate, each on a fresh pipeline and journal: command `k` is due
/// `k / rate` seconds after the start and sent as soon as it is due (later if the inbound
/// ring is full); its latency runs from when it was due to its reply.
fn fixed_rates(
    args: &PipelineBenchArgs,
    w: &workload::Workload,
    label: &str,
    data_dir: &Path,
) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for &rate in &args.rates {
        let dir = data_dir.join(format!("rate-{rate}"));
        let mut pipeline = start_pipeline(args, w, &dir)?;
        let n = ((rate as f64 * args.seconds) as usize).clamp(1, w.commands.len());
        let period_ns = 1e9 / rate as f64;
        let due = |k: usize| Duration::from_nanos((k as f64 * period_ns) as u64);
        let mut h = loadgen::histogram();
        let (mut sent, mut answered) = (0usize, 0usize);
        let started = Instant::now();
        let mut last_sent = Duration::ZERO;
        while answered < n {
            let now = started.elapsed();
            while sent < n && due(sent) <= now {
                if pipeline.inbound.try_push(request(w, sent)).is_err() {
                    break; // back-pressure: it waits, and its latency grows
                }
                sent += 1;
                last_sent = now;
            }
            pipeline.inbound.ring();
            pipeline.do_inline_work();
            let got = take_replies(&pipeline, |k| {
                let late = started.elapsed().saturating_sub(due(k));
                h.record(late.as_nanos().max(1) as u64).ok();
            });
            answered += got;
            if got == 0 {
                anyhow::ensure!(!pipeline.shared.has_failed(), "the pipeline failed");
                std::hint::spin_loop();
            }
        }
        pipeline.close_intake();
        pipeline.join().map_err(|e| anyhow::anyhow!(e))?;
        let achieved = n as f64 / last_sent.max(due(n - 1)).as_secs_f64().max(1e-9);
        let row = loadgen::Row::from_histogram(format!("rialto {rate}/s"), rate, achieved, &h);
        if !args.json {
            eprintln!("{}", loadgen::table_line(&row));
        }
        rows.push(row);
    }
    if args.json {
        let json = serde_json::json!({
            "bench": "pipeline", "workload": label, "schedule": "fixed",
            "dedicated_threads": args.threads.dedicated(),
            "durability": format!("{:?}", args.durability).to_lowercase(),
            "rows": rows.iter().map(loadgen::Row::json).collect::<Vec<_>>(),
        });
        println!("{json}");
    } else {
        println!("{}", loadgen::table(&rows));
        println!(
            "latency: scheduled time -> reply out of the pipeline (no sockets); durability {:?}, {} threads",
            args.durability,
            if args.threads.dedicated() {
                "dedicated"
            } else {
                "shared"
            },
        );
    }
    Ok(())
}

pub fn run(args: &PipelineBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.rates.iter().all(|&r| r > 0), "rates must be positive");
    let (w, label) = args.workload.generate(args.commands, args.seed)?;
    let scratch;
    let data_dir = match &args.data {
        Some(dir) => dir.clone(),
        None => {
            scratch = tempfile::Builder::new()
                .prefix("rialto-bench-pipeline-")
                .tempdir_in(".")
                .context("cannot create a scratch data directory here")?;
            scratch.path().to_path_buf()
        }
    };
    if !args.rates.is_empty() {
        return fixed_rates(args, &w, &label, &data_dir);
    }
    let mut pipeline = start_pipeline(args, &w, &data_dir)?;
    let n = w.commands.len();
    let mut sent_at: Vec<Instant> = Vec::with_capacity(n);
    let mut h = loadgen::histogram();
    let mut answered = 0usize;
    let started = Instant::now();
    while answered < n {
        // Keep the window full. One clock read stamps the burst and one the replies taken
        // together: reading it per command cost about 9% of the driving thread, which on
        // shared threads is the pipeline's thread too. A latency (hundreds of microseconds
        // here) is off by at most the time a burst or a batch of replies takes: microseconds
        // once the window is full.
        let burst_sent = Instant::now();
        while sent_at.len() < n && sent_at.len() - answered < args.window {
            if pipeline
                .inbound
                .try_push(request(&w, sent_at.len()))
                .is_err()
            {
                break;
            }
            sent_at.push(burst_sent);
        }
        pipeline.inbound.ring();
        pipeline.do_inline_work();
        let replies_seen = Instant::now();
        let got = take_replies(&pipeline, |k| {
            let latency = replies_seen.duration_since(sent_at[k]);
            h.record(latency.as_nanos().max(1) as u64).ok();
        });
        answered += got;
        if got == 0 {
            anyhow::ensure!(!pipeline.shared.has_failed(), "the pipeline failed");
            std::hint::spin_loop();
        }
    }
    let elapsed = started.elapsed();
    pipeline.close_intake();
    pipeline.join().map_err(|e| anyhow::anyhow!(e))?;
    let journal_bytes: u64 = std::fs::read_dir(data_dir.join("journal"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    let per_sec = n as f64 / elapsed.as_secs_f64();
    let q = |p: f64| h.value_at_quantile(p);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "bench": "pipeline", "workload": label, "dedicated_threads": args.threads.dedicated(), "durability": format!("{:?}", args.durability).to_lowercase(),
                "commands": n, "window": args.window, "seconds": elapsed.as_secs_f64(),
                "commands_per_sec": per_sec.round(), "journal_bytes": journal_bytes,
                "p50_ns": q(0.5), "p90_ns": q(0.9), "p99_ns": q(0.99), "p99_9_ns": q(0.999),
                "p99_99_ns": q(0.9999), "max_ns": h.max(),
            })
        );
    } else {
        println!(
            "pipeline, {label} workload, durability {:?}, {} threads, window {}: {} commands in {:.3} s = {:.2} M commands/s; journal {:.1} MiB",
            args.durability,
            if args.threads.dedicated() {
                "dedicated"
            } else {
                "shared"
            },
            args.window,
            n,
            elapsed.as_secs_f64(),
            per_sec / 1e6,
            journal_bytes as f64 / (1 << 20) as f64
        );
        println!(
            "latency (into the inbound ring -> reply out): p50 {} ns, p90 {}, p99 {}, p99.9 {}, p99.99 {}, max {}",
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            q(0.9999),
            h.max()
        );
    }
    Ok(())
}
