//! `rialto bench memory`: what the machine's memory costs the engine today.
//!
//! The `multi` workload is bound by dependent cache misses (see docs/benchmarks.md), and on a
//! shared VM what one miss costs changes from day to day. This measures it directly, so that an
//! engine figure can be read against the machine it came from: a chain of reads over a block,
//! each read's address taken from the one before, visiting every cache line of the block once
//! in a random order. One chain gives the latency of a miss; several chains walked side by side
//! give what overlapping misses cost each (as the engine's prefetching makes them overlap).
//!
//! A third figure is what a prefetch costs amid other work: nothing while the block is within
//! what the TLB maps, since the miss overlaps the work; past that, on a CPU whose prefetches
//! wait for their page walk before the instructions behind them can retire, about a page walk
//! each. That is where a big venue's prefetching stops hiding its misses (docs/benchmarks.md).

use std::time::Instant;

use crate::rng::Rng;

/// u64 slots per 64-byte cache line: the chain uses the first slot of each line.
const SLOTS_PER_LINE: usize = 8;

/// The largest block measured (its lines are numbered in u32, and it must fit in memory twice
/// over while the cycle is built).
pub const MAX_BLOCK_MIB: usize = 64 << 10;

/// One block size's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryRow {
    pub bytes: usize,
    /// Nanoseconds per read with one chain (each read waits for the one before).
    pub one_chain_ns: f64,
    /// Nanoseconds per read with `chains` chains walked in step.
    pub many_chains_ns: f64,
    pub chains: usize,
    /// Nanoseconds a prefetch of a random line of the block adds to a step of other work
    /// (about 40 ns of it): near zero within the TLB's reach.
    pub prefetch_stall_ns: f64,
}

/// A block whose cache lines form one random cycle: line `i`'s first slot holds the slot index
/// of the next line to read. Sattolo's shuffle gives a single cycle, so a chain started
/// anywhere visits every line before it repeats one (a shorter cycle would stay in the cache
/// and report the cache's speed, not the memory's).
pub struct Cycle {
    pub block: Vec<u64>,
    /// The lines in the order the cycle visits them.
    order: Vec<u32>,
}

impl Cycle {
    pub fn random(lines: usize, seed: u64) -> Cycle {
        let mut order: Vec<u32> = (0..lines as u32).collect();
        let mut rng = Rng::new(seed);
        for i in (1..lines).rev() {
            let j = rng.below(i as u64) as usize;
            order.swap(i, j);
        }
        let mut block = vec![0u64; lines * SLOTS_PER_LINE];
        for (i, &line) in order.iter().enumerate() {
            let next = order[(i + 1) % lines];
            block[line as usize * SLOTS_PER_LINE] = next as u64 * SLOTS_PER_LINE as u64;
        }
        Cycle { block, order }
    }

    /// `n` starting slots spread evenly along the cycle: chains walked from them read
    /// different lines for `lines / n` steps each.
    fn spread_starts(&self, n: usize) -> Vec<u64> {
        let lines = self.order.len();
        (0..n)
            .map(|k| self.order[k * lines / n] as u64 * SLOTS_PER_LINE as u64)
            .collect()
    }
}

/// Walks chains of `block` from `starts`, in step, for `steps` reads each; returns the time per
/// read (all chains' reads counted) and the final positions folded into one (so the walk is
/// not optimised away).
fn walk(block: &[u64], starts: &[u64], steps: usize) -> (f64, u64) {
    let mut at = starts.to_vec();
    let begin = Instant::now();
    for _ in 0..steps {
        for slot in at.iter_mut() {
            *slot = block[*slot as usize];
        }
    }
    let ns = begin.elapsed().as_nanos() as f64;
    let reads = (steps * starts.len()).max(1) as f64;
    (ns / reads, at.iter().fold(0, |a, &b| a ^ b))
}

/// Dependent multiply steps of work between two prefetches in [`prefetch_stall`]: about 40 ns
/// on the VMs in docs/benchmarks.md, so that only a few prefetches fit in the CPU's window of
/// instructions in flight, as between the prefetches of an engine command.
const WORK_STEPS: u32 = 30;

#[inline(always)]
fn work(mut x: u64) -> u64 {
    for _ in 0..WORK_STEPS {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(7) ^ (x >> 3);
    }
    x
}

/// Steps of [`work`], each after a prefetch of line `lines[i]` of `block` when `prefetch`;
/// returns the time per step and the work's result (so that it is not optimised away). The
/// lines are never read: only the prefetch instruction is measured.
fn work_steps(block: &[u64], lines: &[u32], prefetch: bool) -> (f64, u64) {
    let mut x = 1;
    let begin = Instant::now();
    for &line in lines {
        if prefetch {
            rialto_prefetch::prefetch_index(block, line as usize * SLOTS_PER_LINE);
        }
        x = work(x);
    }
    let ns = begin.elapsed().as_nanos() as f64;
    (ns / lines.len().max(1) as f64, x)
}

/// What a prefetch of a random line of `block` adds to a step of other work, in ns (`steps`
/// steps with and without the prefetch).
fn prefetch_stall(block: &[u64], steps: usize, seed: u64) -> f64 {
    let lines = (block.len() / SLOTS_PER_LINE) as u64;
    let mut rng = Rng::new(seed ^ 0x5bd1_e995);
    let targets: Vec<u32> = (0..steps).map(|_| rng.below(lines) as u32).collect();
    let (with, a) = work_steps(block, &targets, true);
    let (without, b) = work_steps(block, &targets, false);
    std::hint::black_box(a ^ b);
    with - without
}

/// Measures one block of `bytes` (rounded down to whole lines, at least two): `reads` reads
/// with one chain, then as many shared among `chains` chains.
pub fn measure(bytes: usize, reads: usize, chains: usize, seed: u64) -> MemoryRow {
    let lines = (bytes / (SLOTS_PER_LINE * 8)).max(2);
    let chains = chains.clamp(1, lines);
    let cycle = Cycle::random(lines, seed);
    let starts = cycle.spread_starts(chains);
    // A warm-up walk faults the pages in and fills the TLB as the timed walks will.
    walk(&cycle.block, &starts[..1], reads.min(lines) / 4);
    let (one_chain_ns, a) = walk(&cycle.block, &starts[..1], reads);
    let (many_chains_ns, b) = walk(&cycle.block, &starts, reads / chains);
    std::hint::black_box(a ^ b);
    let prefetch_stall_ns = prefetch_stall(&cycle.block, reads / 4, seed);
    MemoryRow {
        bytes: lines * SLOTS_PER_LINE * 8,
        one_chain_ns,
        many_chains_ns,
        chains,
        prefetch_stall_ns,
    }
}

/// The table `rialto bench memory` prints.
pub fn to_table(rows: &[MemoryRow]) -> String {
    let mut s = String::from(
        "block        1 chain ns/read   N chains ns/read    ns a prefetch adds to work\n",
    );
    for r in rows {
        s += &format!(
            "{:>9}    {:>15.1}   {:>10.1} (N = {})   {:>10.1}\n",
            human_bytes(r.bytes),
            r.one_chain_ns,
            r.many_chains_ns,
            r.chains,
            r.prefetch_stall_ns
        );
    }
    s
}

/// The JSON `rialto bench memory --json` prints.
pub fn to_json(rows: &[MemoryRow]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                serde_json::json!({
                    "bytes": r.bytes,
                    "one_chain_ns": r.one_chain_ns,
                    "many_chains_ns": r.many_chains_ns,
                    "chains": r.chains,
                    "prefetch_stall_ns": r.prefetch_stall_ns,
                })
            })
            .collect(),
    )
}

fn human_bytes(bytes: usize) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_visits_every_line_once_before_repeating() {
        for lines in [2usize, 3, 64, 1000] {
            let block = Cycle::random(lines, 7).block;
            let mut seen = vec![false; lines];
            let mut at = 0usize;
            for _ in 0..lines {
                let line = at / SLOTS_PER_LINE;
                assert!(!seen[line], "line {line} read twice in a cycle of {lines}");
                seen[line] = true;
                at = block[at] as usize;
            }
            assert_eq!(at, 0, "the chain is back at its start after {lines} reads");
        }
    }

    #[test]
    fn a_small_block_reports_its_size_and_positive_times() {
        let row = measure(64 << 10, 20_000, 4, 1);
        assert_eq!(row.bytes, 64 << 10);
        assert_eq!(row.chains, 4);
        assert!(row.one_chain_ns > 0.0 && row.many_chains_ns > 0.0);
        assert!(row.prefetch_stall_ns.is_finite());
        assert!(to_table(&[row]).contains("64 KiB"));
    }
}
