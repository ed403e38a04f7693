//! Appends and commits B batches of `place` records, 1,024 a batch (or the second argument),
//! in `batch` durability mode: the journal bench's workload in one process. For instruction
//! counts, which do not depend on what else the machine is doing (wall time does; `perf stat`
//! has no hardware counters on our VM):
//!
//! ```text
//! cargo build --release -p rialto-journal --example append_loop
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/append_loop 200
//! ```
//!
//! minus a run with 0 batches, divided by 204,800 records. Valgrind counts this process's
//! instructions, not the kernel's: the `write` itself is not in the figure.
//!
//! It also prints the median and the fastest tenth of the wall time per batch (appends and the
//! commit, i.e. the `write`), per record: a batch of 1,024 (about 70 µs) is rarely interrupted,
//! so the median of many moves less than criterion's mean on a shared machine. And the CPU
//! time of the writing thread per record (`/proc/thread-self/schedstat`, Linux), which leaves
//! out the time the thread waited for a core and so varies least of the three; the `write`'s
//! kernel work is in it. `target/release/examples/append_loop 3000 [1024]`.

use std::hint::black_box;
use std::time::Instant;

use rialto_core::{Command, PlaceOrder, Side, SymbolId};
use rialto_journal::{Durability, JournalConfig, JournalWriter};

fn main() {
    let batches: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let batch: i64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let cmds: Vec<Command> = (0..batch)
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
    let cpu_start_ns = thread_cpu_ns();
    for _ in 0..batches {
        let start = Instant::now();
        for cmd in &cmds {
            writer.append(seq, seq as i64, black_box(cmd));
            seq += 1;
        }
        black_box(writer.commit().expect("commit"));
        batch_ns.push(start.elapsed().as_nanos() as f64);
    }
    let cpu_ns = thread_cpu_ns()
        .zip(cpu_start_ns)
        .map(|(end, start)| end - start);
    writer.sync().expect("sync");
    if !batch_ns.is_empty() {
        batch_ns.sort_by(f64::total_cmp);
        let per_record =
            |q: f64| batch_ns[(q * (batch_ns.len() - 1) as f64) as usize] / batch as f64;
        let mean = batch_ns.iter().sum::<f64>() / batch_ns.len() as f64 / batch as f64;
        println!(
            "{batches} batches of {batch}: per record {:.1} ns median, {:.1} ns at the 10th \
             percentile, {mean:.1} ns mean; slowest batch {:.0} µs",
            per_record(0.5),
            per_record(0.1),
            batch_ns[batch_ns.len() - 1] / 1000.0,
        );
        if let Some(cpu_ns) = cpu_ns {
            let records = batches as f64 * batch as f64;
            println!(
                "thread CPU time per record {:.1} ns",
                cpu_ns as f64 / records
            );
        }
    }
}

/// Nanoseconds this thread has run on a CPU (the first field of its schedstat), if known.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}
