//! Append + commit of batches of `place` commands, as the journal thread does it: in `batch`
//! durability mode (one write per commit, fdatasync every 1000 µs on a background thread) with
//! batches of 64 and 1,024 (the journal thread commits whatever the inbound ring holds, up to
//! `pipeline.batch_max` = 1,024), in `none` mode, and in `fsync` mode (an fdatasync, with the
//! segment's checkpoint written into it, per commit: what the disk costs). Criterion reports the time per batch and
//! the throughput in commands; per command = per batch / batch size.
//!
//! Run: `cargo bench -p rialto-journal --bench append`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rialto_core::{Command, PlaceOrder, Side, SymbolId};
use rialto_journal::{Durability, JournalConfig, JournalWriter};

/// Start over in a fresh directory once this much is written, so that a long run does not
/// fill the disk (the restart is not timed).
const MAX_BYTES_PER_DIR: u64 = 256 << 20;

fn commands(batch: usize) -> Vec<Command> {
    (0..batch as i64)
        .map(|i| {
            let side = if i % 2 == 0 { Side::Buy } else { Side::Sell };
            Command::Place(PlaceOrder::limit(
                1 + i % 97,
                1_000_000 + i,
                SymbolId(0),
                side,
                100_000 + i,
                1 + i % 9,
            ))
        })
        .collect()
}

fn open(dir: &Path, durability: Durability, next_seq: u64) -> JournalWriter {
    let cfg = JournalConfig {
        durability,
        ..JournalConfig::default()
    };
    JournalWriter::open(dir, cfg, next_seq).expect("open journal")
}

fn bench_mode(c: &mut Criterion, label: &str, durability: Durability, batch: usize) {
    let cmds = commands(batch);
    let mut group = c.benchmark_group("journal_append");
    group.throughput(Throughput::Elements(batch as u64));
    group.bench_function(label, |b| {
        b.iter_custom(|iters| {
            let mut dir = tempfile::TempDir::new().expect("temp dir");
            let mut writer = open(dir.path(), durability, 1);
            let mut written = 0u64;
            let mut elapsed = Duration::ZERO;
            let mut seq = 1u64;
            for _ in 0..iters {
                if written > MAX_BYTES_PER_DIR {
                    writer.sync().expect("sync");
                    dir = tempfile::TempDir::new().expect("temp dir");
                    writer = open(dir.path(), durability, seq);
                    written = 0;
                }
                let start = Instant::now();
                for cmd in &cmds {
                    writer.append(seq, seq as i64, cmd);
                    seq += 1;
                }
                black_box(writer.commit().expect("commit"));
                elapsed += start.elapsed();
                written += 67 * batch as u64; // a place record is 67 bytes
            }
            writer.sync().expect("sync");
            elapsed
        })
    });
    group.finish();
}

fn append(c: &mut Criterion) {
    let batch_mode = Durability::Batch {
        interval_us: Durability::DEFAULT_BATCH_INTERVAL_US,
    };
    bench_mode(c, "batch_of_64_places_batch_mode", batch_mode, 64);
    bench_mode(c, "batch_of_1024_places_batch_mode", batch_mode, 1024);
    bench_mode(c, "batch_of_64_places_none_mode", Durability::None, 64);
    // An fdatasync a commit (with the checkpoint written into it): the disk's figure.
    bench_mode(c, "batch_of_64_places_fsync_mode", Durability::Fsync, 64);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).sample_size(30);
    targets = append
}
criterion_main!(benches);
