//! `rialto bench history`: a history database filled with `--fills` fills (two per trade,
//! between `--users` users), then `--queries` reads of one user's last 100 fills, as
//! `GET /api/v1/fills?limit=100` makes them, timed in process (without HTTP): p50, p99, max.
//!
//! The rows go through the writer's own transaction code (`history::db::write`) in batches
//! like the market data thread's; the fill rate is printed too.

use std::time::Instant;

use clap::Args;
use hdrhistogram::Histogram;
use rialto_core::Side;
use rialto_server::history::query::{self, Range};
use rialto_server::history::rows::TradeRow;
use rialto_server::history::{ID_PER_SEQ, Rows, Store, db};

#[derive(Args, Debug)]
pub struct HistoryBenchArgs {
    /// Fills to store (two per trade)
    #[arg(long, default_value_t = 10_000_000)]
    pub fills: u64,
    /// Users the trades are spread over
    #[arg(long, default_value_t = 1_000)]
    pub users: i64,
    /// Reads of a user's last 100 fills
    #[arg(long, default_value_t = 10_000)]
    pub queries: u64,
    /// Trades per write transaction
    #[arg(long, default_value_t = 4_096)]
    pub batch: u64,
    /// The writer's page cache, MiB (the server's `history.writer_cache_mib`)
    #[arg(long, default_value_t = 64)]
    pub cache_mib: usize,
    /// Directory for the database [default: a temporary one, removed after]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// xorshift64*: the same users every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

pub fn run(args: &HistoryBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.users >= 2, "--users must be at least 2");
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    let temp = tempfile::tempdir()?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(rialto_server::history::FILE_NAME);
    let mut conn = db::open_writer(&path, args.cache_mib)?;
    let trades = args.fills.div_ceil(2);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let started = Instant::now();
    let mut seq = db::last_seq(&conn)?;
    let mut written = 0;
    while written < trades {
        let n = args.batch.min(trades - written);
        let mut rows = Rows {
            first_seq: seq + 1,
            ..Rows::default()
        };
        for _ in 0..n {
            seq += 1;
            let maker = (next(&mut rng) % args.users as u64) as i64 + 1;
            let taker = (maker % args.users) + 1;
            let ts_ns = 1_800_000_000_000_000_000 + seq as i64 * 1_000_000;
            let id = seq as i64 * ID_PER_SEQ;
            rows.trades.push(TradeRow {
                id,
                event_id: id,
                seq,
                ts_ns,
                symbol: 0,
                price: 500_000 + (seq % 100) as i64,
                qty: 1,
                taker_side: Side::Buy,
                maker_user: maker,
                maker_order: seq as i64,
                maker_fee: 0,
                taker_user: taker,
                taker_order: seq as i64,
                taker_fee: 1,
            });
            if rows
                .seconds
                .last()
                .is_none_or(|s| s.0 < ts_ns / 1_000_000_000)
            {
                rows.seconds.push((ts_ns / 1_000_000_000, seq));
            }
        }
        rows.last_seq = seq;
        db::write(&mut conn, &rows)?;
        written += n;
    }
    let fill_secs = started.elapsed().as_secs_f64();
    println!(
        "filled {} fills ({trades} trades, {} users) in {fill_secs:.1} s: {:.0} fills/s",
        trades * 2,
        args.users,
        (trades * 2) as f64 / fill_secs.max(1e-9)
    );
    let store = Store::open_readers(&path);
    let mut latency = Histogram::<u64>::new(3)?;
    let mut returned = 0usize;
    for _ in 0..args.queries {
        let user = (next(&mut rng) % args.users as u64) as i64 + 1;
        let range = Range {
            limit: 100,
            ..Range::default()
        };
        let t = Instant::now();
        let fills = store.read(|c| query::fills(c, user, None, &range))?;
        latency.record(t.elapsed().as_nanos() as u64)?;
        returned += fills.len();
    }
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1_000.0;
    println!(
        "last 100 fills of a user, {} queries ({:.1} fills each): p50 {:.0} us, p99 {:.0} us, \
         max {:.0} us (in process, no HTTP)",
        args.queries,
        returned as f64 / args.queries.max(1) as f64,
        us(0.5),
        us(0.99),
        latency.max() as f64 / 1_000.0
    );
    Ok(())
}
