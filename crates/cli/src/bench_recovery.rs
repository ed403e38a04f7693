//! `rialto bench recovery`: how long start-up takes with a large book and a long journal tail.
//!
//! Builds the `single` workload's state with `--orders` resting orders (rialto-bench's
//! generator: non-crossing prefill around one price, 2,000+ users), writes its snapshot,
//! journals `--commands` further commands of the generator's mix (places, cancels, moves,
//! reduces: the book stays about as large), then times `recover` and checks that it reaches the
//! same state hash as applying the commands directly.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use rialto_bench::harness::prepare;
use rialto_bench::workload::{Mix, SingleParams, single};
use rialto_journal::{Durability, JournalConfig, JournalWriter, recover, write_snapshot};

#[derive(clap::Args, Debug)]
pub struct RecoveryArgs {
    /// Resting orders in the snapshot.
    #[arg(long, default_value_t = 1_000_000)]
    pub orders: u32,
    /// Journaled commands after the snapshot.
    #[arg(long, default_value_t = 1_000_000)]
    pub commands: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Data directory to build in (default: a temporary one, removed afterwards).
    #[arg(long)]
    pub data: Option<PathBuf>,
}

pub fn run(args: &RecoveryArgs) -> anyhow::Result<()> {
    let params = SingleParams {
        users: (args.orders / 200).max(2_000),
        resting_orders: args.orders,
        commands: args.commands,
        mix: Mix::Generator,
    };
    eprintln!(
        "generating {} orders + {} commands ...",
        args.orders, args.commands
    );
    let workload = single(&params, args.seed);
    // The capacities the live engine used, as a server would configure them.
    let engine_config = workload.config;
    let prepared = prepare(&workload)?;
    let mut engine = prepared.engine;
    let snapshot_seq = prepared.seq;

    let temp;
    let data = match &args.data {
        Some(d) => d.clone(),
        None => {
            temp = tempfile::TempDir::new()?;
            temp.path().to_path_buf()
        }
    };
    let t = Instant::now();
    let bytes = engine.encode_snapshot();
    let path = write_snapshot(&data, snapshot_seq, engine.state_hash(), &bytes)?;
    let snapshot_file_bytes = std::fs::metadata(&path)?.len();
    eprintln!(
        "snapshot at seq {snapshot_seq}: {} resting orders, {} bytes, {} on disk ({:.2} s to write)",
        engine.resting_order_count(),
        bytes.len(),
        snapshot_file_bytes,
        t.elapsed().as_secs_f64()
    );
    drop(bytes);

    let cfg = JournalConfig {
        durability: Durability::Batch {
            interval_us: Durability::DEFAULT_BATCH_INTERVAL_US,
        },
        ..JournalConfig::default()
    };
    let mut writer = JournalWriter::open(&data, cfg, snapshot_seq + 1)?;
    let mut seq = snapshot_seq;
    let t = Instant::now();
    for batch in workload.commands.chunks(64) {
        for cmd in batch {
            seq += 1;
            writer.append(seq, seq as i64, cmd);
        }
        writer.commit()?;
    }
    writer.sync()?;
    let journal_s = t.elapsed().as_secs_f64();
    drop(writer);
    let t = Instant::now();
    for (i, cmd) in workload.commands.iter().enumerate() {
        let seq = snapshot_seq + 1 + i as u64;
        let _ = engine.apply(seq, seq as i64, cmd, &mut ());
    }
    let live_apply_s = t.elapsed().as_secs_f64();
    eprintln!(
        "journaled in {journal_s:.3} s (batch mode, 64 a commit); applying them live took {live_apply_s:.3} s"
    );
    let expected_hash = engine.state_hash();
    let resting_after = engine.resting_order_count();
    drop(engine);
    drop(workload);

    let t = Instant::now();
    let recovered = recover(&data, engine_config).context("recover")?;
    let total = t.elapsed();
    anyhow::ensure!(
        recovered.state_hash == expected_hash && recovered.last_seq == seq,
        "recovered state differs from the live one"
    );
    let replay_s = recovered.replay.as_secs_f64();
    println!(
        "recovery: {} resting orders in the snapshot, {} journaled commands ({} resting after)",
        args.orders, recovered.replayed, resting_after
    );
    println!(
        "snapshot load: {:.3} s ({} bytes on disk; read, CRC, LZ4, decode, hash check)",
        recovered.snapshot_load.as_secs_f64(),
        snapshot_file_bytes
    );
    println!(
        "journal replay: {replay_s:.3} s ({:.2} M commands/s; read, CRC, decode, apply)",
        recovered.replayed as f64 / replay_s / 1e6
    );
    let hash_s = total.as_secs_f64() - replay_s - recovered.snapshot_load.as_secs_f64();
    println!("final state hash: {hash_s:.3} s");
    println!(
        "total: {:.3} s (state hash checked: {})",
        total.as_secs_f64(),
        recovered.engine.state_hash_hex()
    );
    Ok(())
}
