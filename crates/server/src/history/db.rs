//! The SQLite file: its schema, the writer's transactions and the readers' queries.
//!
//! One writer (the history thread) and any number of readers (REST handlers, each borrowing
//! a read connection): WAL mode lets them run at once. The file is a cache of the journal:
//! `synchronous = NORMAL` may lose the last transactions on a power loss, and the start-up
//! check rebuilds them from the journal, as it does for anything else missing.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::rows::{EventKind, Rows};

/// Candle intervals kept, in seconds, with their names in the API.
pub const INTERVALS: [(i64, &str); 6] = [
    (60, "1m"),
    (300, "5m"),
    (900, "15m"),
    (3_600, "1h"),
    (14_400, "4h"),
    (86_400, "1d"),
];

const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS trades (
    id INTEGER PRIMARY KEY, symbol INTEGER NOT NULL, ts_ns INTEGER NOT NULL,
    price INTEGER NOT NULL, qty INTEGER NOT NULL, taker_side INTEGER NOT NULL,
    maker_user INTEGER NOT NULL, maker_order INTEGER NOT NULL,
    taker_user INTEGER NOT NULL, taker_order INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS trades_by_symbol ON trades (symbol, id);
CREATE TABLE IF NOT EXISTS fills (
    user INTEGER NOT NULL, id INTEGER NOT NULL, liquidity INTEGER NOT NULL,
    trade INTEGER NOT NULL, order_id INTEGER NOT NULL, symbol INTEGER NOT NULL,
    side INTEGER NOT NULL, price INTEGER NOT NULL, qty INTEGER NOT NULL, fee INTEGER NOT NULL,
    ts_ns INTEGER NOT NULL,
    PRIMARY KEY (user, id, liquidity)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS order_events (
    user INTEGER NOT NULL, id INTEGER NOT NULL, type TEXT NOT NULL, order_id INTEGER NOT NULL,
    symbol INTEGER, side INTEGER, price INTEGER NOT NULL, qty INTEGER NOT NULL,
    stop_price INTEGER NOT NULL, kind TEXT, reason TEXT, priority TEXT, ts_ns INTEGER NOT NULL,
    order_type TEXT, tif TEXT,
    PRIMARY KEY (user, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS order_events_by_order ON order_events (user, order_id, id);
CREATE INDEX IF NOT EXISTS fills_by_order ON fills (user, order_id, id);
CREATE TABLE IF NOT EXISTS candles (
    symbol INTEGER NOT NULL, interval_s INTEGER NOT NULL, start_ns INTEGER NOT NULL,
    open INTEGER NOT NULL, high INTEGER NOT NULL, low INTEGER NOT NULL, close INTEGER NOT NULL,
    volume INTEGER NOT NULL, quote_volume INTEGER NOT NULL, trades INTEGER NOT NULL,
    PRIMARY KEY (symbol, interval_s, start_ns)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seconds (second INTEGER PRIMARY KEY, first_seq INTEGER NOT NULL);
";

/// The page size of a database file the writer creates, bytes. Most of the writer's CPU goes
/// into descending and splitting B-trees (two per order event: the table and its index by
/// order); 32 KiB pages, against SQLite's default 4 KiB, make those trees shallower and split
/// them less often, which cut the writer's CPU per order by about a tenth (docs/benchmarks.md,
/// "History on against off under load"). A file created with another page size keeps it: in
/// WAL mode SQLite cannot change it.
pub const PAGE_SIZE: i64 = 32 * 1024;

/// Opens (creating if needed) the history database at `path`.
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    // Only takes effect on a new file, before anything is written to it (switching to WAL
    // below writes its header).
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

/// Opens the writer's connection, with a page cache of `cache_mib`: the schema made, its
/// version checked.
pub fn open_writer(path: &Path, cache_mib: usize) -> anyhow::Result<Connection> {
    let conn = open(path)?;
    // A negative cache_size is in KiB.
    conn.pragma_update(None, "cache_size", -((cache_mib as i64) << 10))?;
    conn.execute_batch(SCHEMA)?;
    let version: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE key = 'version'", [], |r| {
            r.get(0)
        })
        .optional()?;
    match version {
        None => {
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('version', ?1), ('last_seq', 0)",
                [SCHEMA_VERSION],
            )?;
        }
        Some(SCHEMA_VERSION) => {}
        Some(other) => anyhow::bail!(
            "{} has history schema version {other}, this server knows {SCHEMA_VERSION}",
            path.display()
        ),
    }
    Ok(conn)
}

/// The last seq whose rows are all in the database.
pub fn last_seq(conn: &Connection) -> rusqlite::Result<u64> {
    let seq: i64 = conn.query_row("SELECT value FROM meta WHERE key = 'last_seq'", [], |r| {
        r.get(0)
    })?;
    Ok(seq as u64)
}

fn side_code(side: rialto_core::Side) -> i64 {
    side.code() as i64
}

/// Writes `rows` (the commands after `last_seq`, which it then becomes) in one transaction.
pub fn write(conn: &mut Connection, rows: &Rows) -> rusqlite::Result<()> {
    write_runs(conn, std::slice::from_ref(rows))
}

/// Writes consecutive runs of rows (the commands after `last_seq`, which the last run's end
/// then becomes) in one transaction.
pub fn write_runs(conn: &mut Connection, runs: &[Rows]) -> rusqlite::Result<()> {
    let Some(end) = runs.last() else {
        return Ok(());
    };
    let tx = conn.transaction()?;
    {
        let mut trade = tx.prepare_cached(
            "INSERT INTO trades (id, symbol, ts_ns, price, qty, taker_side, maker_user,
             maker_order, taker_user, taker_order) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
        )?;
        let mut fill = tx.prepare_cached(
            "INSERT OR REPLACE INTO fills (user, id, liquidity, trade, order_id, symbol, side,
             price, qty, fee, ts_ns) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
        )?;
        let mut candles: BTreeMap<(u32, i64, i64), Candle> = BTreeMap::new();
        for t in runs.iter().flat_map(|r| &r.trades) {
            trade.execute(params![
                t.id,
                t.symbol,
                t.ts_ns,
                t.price,
                t.qty,
                side_code(t.taker_side),
                t.maker_user,
                t.maker_order,
                t.taker_user,
                t.taker_order
            ])?;
            let maker_side = t.taker_side.opposite();
            for (user, liquidity, order, side, fee) in [
                (t.maker_user, 0, t.maker_order, maker_side, t.maker_fee),
                (t.taker_user, 1, t.taker_order, t.taker_side, t.taker_fee),
            ] {
                fill.execute(params![
                    user,
                    t.event_id,
                    liquidity,
                    t.id,
                    order,
                    t.symbol,
                    side_code(side),
                    t.price,
                    t.qty,
                    fee,
                    t.ts_ns
                ])?;
            }
            for (interval_s, _) in INTERVALS {
                let width = interval_s * 1_000_000_000;
                let start = t.ts_ns - t.ts_ns.rem_euclid(width);
                candles
                    .entry((t.symbol, interval_s, start))
                    .and_modify(|c| c.add(t.price, t.qty))
                    .or_insert_with(|| Candle::first(t.price, t.qty));
            }
        }
        let mut candle = tx.prepare_cached(
            "INSERT INTO candles (symbol, interval_s, start_ns, open, high, low, close, volume,
             quote_volume, trades) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)
             ON CONFLICT (symbol, interval_s, start_ns) DO UPDATE SET
             high = max(high, excluded.high), low = min(low, excluded.low), close = excluded.close,
             volume = volume + excluded.volume, quote_volume = quote_volume + excluded.quote_volume,
             trades = trades + excluded.trades",
        )?;
        for ((symbol, interval_s, start), c) in &candles {
            candle.execute(params![
                symbol,
                interval_s,
                start,
                c.open,
                c.high,
                c.low,
                c.close,
                c.volume,
                c.quote_volume,
                c.trades
            ])?;
        }
        let mut event = tx.prepare_cached(
            "INSERT OR REPLACE INTO order_events (user, id, type, order_id, symbol, side, price,
             qty, stop_price, kind, reason, priority, ts_ns, order_type, tif)
             VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)",
        )?;
        for e in runs.iter().flat_map(|r| &r.events) {
            let (word, kind, reason, priority) = match e.kind {
                EventKind::Accepted { kind } => ("accepted", Some(kind), None, None),
                EventKind::Rejected { kind, reason } => {
                    ("rejected", Some(kind), Some(reason), None)
                }
                EventKind::Cancelled { reason } => ("cancelled", None, Some(reason), None),
                EventKind::Amended { priority } => ("amended", None, None, Some(priority)),
                EventKind::Triggered => ("triggered", None, None, None),
            };
            event.execute(params![
                e.user,
                e.id,
                word,
                e.order,
                e.symbol,
                e.side.map(side_code),
                e.price,
                e.qty,
                e.stop_price,
                kind,
                reason,
                priority,
                e.ts_ns,
                e.order_type,
                e.tif
            ])?;
        }
        let mut second =
            tx.prepare_cached("INSERT OR IGNORE INTO seconds (second, first_seq) VALUES (?1, ?2)")?;
        for &(s, seq) in runs.iter().flat_map(|r| &r.seconds) {
            second.execute(params![s, seq as i64])?;
        }
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'last_seq'",
            [end.last_seq as i64],
        )?;
    }
    tx.commit()
}

/// Empties every table: the history is then rebuilt from the journal's start.
pub fn clear(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for table in ["trades", "fills", "order_events", "candles", "seconds"] {
        tx.execute(&format!("DELETE FROM {table}"), [])?;
    }
    tx.execute("UPDATE meta SET value = 0 WHERE key = 'last_seq'", [])?;
    tx.commit()
}

/// A candle being built from one transaction's trades.
struct Candle {
    open: i64,
    high: i64,
    low: i64,
    close: i64,
    volume: i64,
    quote_volume: i64,
    trades: i64,
}

impl Candle {
    fn first(price: i64, qty: i64) -> Candle {
        Candle {
            open: price,
            high: price,
            low: price,
            close: price,
            volume: qty,
            quote_volume: price.saturating_mul(qty),
            trades: 1,
        }
    }

    fn add(&mut self, price: i64, qty: i64) {
        self.high = self.high.max(price);
        self.low = self.low.min(price);
        self.close = price;
        self.volume = self.volume.saturating_add(qty);
        self.quote_volume = self.quote_volume.saturating_add(price.saturating_mul(qty));
        self.trades += 1;
    }
}
