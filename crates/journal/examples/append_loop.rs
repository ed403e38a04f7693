//! Appends and commits B batches of 1,024 `place` records (the journal bench's workload) in
//! `batch` durability mode, for instruction counts, which do not depend on what else the
//! machine is doing (wall time does; `perf stat` has no hardware counters on our VM):
//!
//! ```text
//! cargo build --release -p rialto-journal --example append_loop
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/append_loop 200
//! ```
//!
//! minus a run with 0 batches, divided by 204,800 records. Valgrind counts this process's
//! instructions, not the kernel's: the `write` itself is not in the figure.
//!
//! It also prints the median and the fastest tenth of the wall time per batch (append of 1,024
//! records + commit, i.e. the `write`), per record. On a shared machine a batch (about 70 µs)
//! is rarely interrupted, so the median of many batches moves less than criterion's mean:
//! `target/release/examples/append_loop 3000`.

use std::hint::black_box;
use std::time::Instant;

use rialto_core::{Command, PlaceOrder, Side, SymbolId};
use rialto_journal::{Durability, JournalConfig, JournalWriter};

const BATCH: i64 = 1024;

fn main() {
    let batches: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let cmds: Vec<Command> = (0..BATCH)
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
        .collect();
    let dir = tempfile::TempDir::new().expect("temp dir");
    let cfg = JournalConfig {
        durability: Durability::Batch {
            interval_us: Durability::DEFAULT_BATCH_INTERVAL_US,
        },
        ..JournalConfig::default()
    };
    let mut writer = JournalWriter::open(dir.path(), cfg, 1).expect("open journal");
    let mut seq = 1u64;
    let mut batch_ns = Vec::with_capacity(batches as usize);
    for _ in 0..batches {
        let start = Instant::now();
        for cmd in &cmds {
            writer.append(seq, seq as i64, black_box(cmd));
            seq += 1;
        }
        black_box(writer.commit().expect("commit"));
        batch_ns.push(start.elapsed().as_nanos() as f64);
    }
    writer.sync().expect("sync");
    if !batch_ns.is_empty() {
        batch_ns.sort_by(f64::total_cmp);
        let per_record =
            |q: f64| batch_ns[(q * (batch_ns.len() - 1) as f64) as usize] / BATCH as f64;
        println!(
            "{batches} batches of {BATCH}: per record {:.1} ns median, {:.1} ns at the 10th percentile",
            per_record(0.5),
            per_record(0.1)
        );
    }
}
