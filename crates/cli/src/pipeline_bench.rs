//! `rialto bench pipeline`: the `single` workload through the in-process pipeline (journal
//! thread with a real journal on disk, engine thread, replies), without sockets.
//!
//! Each command is sent as if by its own session, so its reply names it and its latency is
//! measured from the moment it entered the inbound ring to the moment its reply left the
//! outbound ring.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use rialto_bench::workload::{self, SingleParams};
use rialto_core::{Command, Engine};
use rialto_journal::{Durability, JournalConfig, JournalWriter};
use rialto_server::auth::Credentials;
use rialto_server::config::{DurabilityMode, ThreadLayout};
use rialto_server::idle::WaitStrategy;
use rialto_server::pipeline::{Op, Pipeline, PipelineConfig, Reply, Request, Target};
use rialto_wire::RequestKind;

#[derive(Args, Debug)]
pub struct PipelineBenchArgs {
    /// fsync, batch or none
    #[arg(long, default_value = "batch")]
    pub durability: DurabilityMode,
    #[arg(long, default_value_t = 1_000)]
    pub batch_interval_us: u64,
    /// Measured commands of the `single` workload
    #[arg(long, default_value_t = 1_000_000)]
    pub commands: u64,
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
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
}

const FIRST_BENCH_SESSION: u64 = 1 << 32;

pub fn run(args: &PipelineBenchArgs) -> anyhow::Result<()> {
    let params = SingleParams {
        commands: args.commands,
        ..SingleParams::default()
    };
    eprintln!(
        "generating the single workload ({} commands)...",
        args.commands
    );
    let w = workload::single(&params, args.seed);
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
    let durability = match args.durability {
        DurabilityMode::Fsync => Durability::Fsync,
        DurabilityMode::Batch => Durability::Batch {
            interval_us: args.batch_interval_us,
        },
        DurabilityMode::None => Durability::None,
    };
    let journal = JournalWriter::open(
        &data_dir,
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
            data_dir: data_dir.clone(),
            archive: false,
            last_ts_ns: 0,
            dedicated_threads: args.threads.dedicated(),
            market_data: None,
            metrics: Default::default(),
        },
        Engine::new(w.config),
        journal,
        Arc::new(Credentials::from_key([0; 32])),
    )?;

    // Set-up and pre-fill go through the pipeline too (journaled), unmeasured.
    let setup: Vec<Command> = w
        .setup_commands()
        .chain(w.prefill.iter().copied())
        .collect();
    pipeline
        .apply_system_commands(setup, Duration::from_secs(600))
        .map_err(|e| anyhow::anyhow!("set-up: {e}"))?;

    let n = w.commands.len();
    let mut sent_at: Vec<Instant> = Vec::with_capacity(n);
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut answered = 0usize;
    let started = Instant::now();
    while answered < n {
        // Keep the window full.
        while sent_at.len() < n && sent_at.len() - answered < args.window {
            let k = sent_at.len();
            let request = Request {
                session: FIRST_BENCH_SESSION + k as u64,
                reply: Reply::Order {
                    order: 0,
                    kind: RequestKind::Place,
                },
                op: Op::Command(w.commands[k]),
            };
            if pipeline.inbound.try_push(request).is_err() {
                break;
            }
            sent_at.push(Instant::now());
        }
        pipeline.inbound.ring();
        pipeline.do_inline_work();
        let mut got = 0;
        while let Some(out) = pipeline.outbound.pop() {
            if let Target::Session(s) = out.target
                && s >= FIRST_BENCH_SESSION
            {
                let k = (s - FIRST_BENCH_SESSION) as usize;
                h.record(sent_at[k].elapsed().as_nanos().max(1) as u64).ok();
                answered += 1;
                got += 1;
            }
        }
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
                "bench": "pipeline", "workload": "single", "dedicated_threads": args.threads.dedicated(), "durability": format!("{:?}", args.durability).to_lowercase(),
                "commands": n, "window": args.window, "seconds": elapsed.as_secs_f64(),
                "commands_per_sec": per_sec.round(), "journal_bytes": journal_bytes,
                "p50_ns": q(0.5), "p90_ns": q(0.9), "p99_ns": q(0.99), "p99_9_ns": q(0.999),
                "p99_99_ns": q(0.9999), "max_ns": h.max(),
            })
        );
    } else {
        println!(
            "pipeline, single workload, durability {:?}, {} threads, window {}: {} commands in {:.3} s = {:.2} M commands/s; journal {:.1} MiB",
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
