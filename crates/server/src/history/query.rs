//! Reading the history: trades, a user's fills and order events, candles, the 24 h ticker.
//!
//! Every list is bounded by `limit` and selected by an id range (ids rise with seqs) and a time
//! range. A time range becomes an id range first through the `seconds` table (the first seq of
//! each second of venue time: sequencer time never goes back), so that it is an index range
//! scan whatever the table's size, then is applied exactly on `ts_ns`.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::db::INTERVALS;
use super::rows::ID_PER_SEQ;

/// What part of a list is wanted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Range {
    /// Inclusive, ns.
    pub start_ns: Option<i64>,
    /// Exclusive, ns.
    pub end_ns: Option<i64>,
    /// Ids at or after this one, oldest first.
    pub from_id: Option<i64>,
    pub limit: usize,
}

impl Range {
    /// From the start (with `from_id` or `start_ns`): the first `limit` oldest first. Otherwise
    /// the last `limit` (before `end_ns`), still answered oldest first.
    fn ascending(&self) -> bool {
        self.from_id.is_some() || self.start_ns.is_some()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TradeOut {
    pub id: i64,
    pub symbol: u32,
    pub ts_ns: i64,
    pub price: i64,
    pub qty: i64,
    pub taker_side: rialto_core::Side,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillOut {
    /// The fill event's id (the cursor of `from_id`).
    pub id: i64,
    pub trade: i64,
    pub order: i64,
    pub symbol: u32,
    pub side: rialto_core::Side,
    pub price: i64,
    pub qty: i64,
    pub fee: i64,
    pub maker: bool,
    pub ts_ns: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventOut {
    pub id: i64,
    pub word: String,
    pub order: i64,
    pub symbol: Option<u32>,
    pub side: Option<rialto_core::Side>,
    pub price: i64,
    pub qty: i64,
    pub stop_price: i64,
    pub kind: Option<String>,
    pub reason: Option<String>,
    pub priority: Option<String>,
    pub ts_ns: i64,
    /// A `place` event's order type and time in force.
    pub order_type: Option<String>,
    pub tif: Option<String>,
}

/// Everything the history holds of one of a user's orders: its events and its first fills,
/// oldest first, and what all its fills add up to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderRecord {
    pub events: Vec<EventOut>,
    pub fills: Vec<FillOut>,
    pub filled: i64,
}

/// One entry of a user's order history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistoryOut {
    Fill(FillOut),
    Event(EventOut),
}

impl HistoryOut {
    pub fn id(&self) -> i64 {
        match self {
            HistoryOut::Fill(f) => f.id,
            HistoryOut::Event(e) => e.id,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandleOut {
    pub start_ns: i64,
    pub open: i64,
    pub high: i64,
    pub low: i64,
    pub close: i64,
    pub volume: i64,
    pub quote_volume: i64,
    pub trades: i64,
}

/// A symbol's last 24 hours (the last 1,440 whole minutes of 1 m candles, the current one
/// included). Prices are `None` before the symbol's first trade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticker {
    pub open: Option<i64>,
    pub high: Option<i64>,
    pub low: Option<i64>,
    pub last: Option<i64>,
    pub volume: i64,
    pub quote_volume: i64,
    pub trades: i64,
}

/// The seq of a command at `ts_ns` is at least this.
fn seq_at_or_after(conn: &Connection, ts_ns: i64) -> rusqlite::Result<i64> {
    let second = ts_ns.div_euclid(1_000_000_000);
    let seq: Option<i64> = conn
        .query_row(
            "SELECT first_seq FROM seconds WHERE second <= ?1 ORDER BY second DESC LIMIT 1",
            [second],
            |r| r.get(0),
        )
        .optional()?;
    Ok(seq.unwrap_or(0))
}

/// The seq of a command before `ts_ns` is below this.
fn seq_bound_before(conn: &Connection, ts_ns: i64) -> rusqlite::Result<i64> {
    let second = ts_ns.div_euclid(1_000_000_000);
    let seq: Option<i64> = conn
        .query_row(
            "SELECT first_seq FROM seconds WHERE second > ?1 ORDER BY second LIMIT 1",
            [second],
            |r| r.get(0),
        )
        .optional()?;
    Ok(seq.unwrap_or(i64::MAX / ID_PER_SEQ))
}

/// The id range (inclusive, exclusive) and time range (inclusive, exclusive) of `range`.
fn bounds(conn: &Connection, range: &Range) -> rusqlite::Result<[i64; 4]> {
    let mut lo = range.from_id.unwrap_or(0);
    let mut hi = i64::MAX;
    if let Some(start) = range.start_ns {
        lo = lo.max(seq_at_or_after(conn, start)?.saturating_mul(ID_PER_SEQ));
    }
    if let Some(end) = range.end_ns {
        hi = seq_bound_before(conn, end)?.saturating_mul(ID_PER_SEQ);
    }
    Ok([
        lo,
        hi,
        range.start_ns.unwrap_or(i64::MIN),
        range.end_ns.unwrap_or(i64::MAX),
    ])
}

fn side(code: i64) -> rusqlite::Result<rialto_core::Side> {
    rialto_core::Side::from_code(code as u8).ok_or_else(|| {
        rusqlite::Error::IntegralValueOutOfRange(0, code) // a corrupt row: reported, not a panic
    })
}

/// Runs `sql` (which takes `?1` a key, `?2..?5` the bounds, `?6` the limit, and has an
/// `ORDER BY id {}` to fill in) and returns its rows oldest first.
fn list<T>(
    conn: &Connection,
    sql: &str,
    key: i64,
    range: &Range,
    map: impl Fn(&Row) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let [lo, hi, start, end] = bounds(conn, range)?;
    let ascending = range.ascending();
    let sql = sql.replace("{}", if ascending { "ASC" } else { "DESC" });
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![key, lo, hi, start, end, range.limit as i64], |r| {
        map(r)
    })?;
    let mut out = rows.collect::<rusqlite::Result<Vec<T>>>()?;
    if !ascending {
        out.reverse();
    }
    Ok(out)
}

pub fn trades(conn: &Connection, symbol: u32, range: &Range) -> rusqlite::Result<Vec<TradeOut>> {
    list(
        conn,
        "SELECT id, symbol, ts_ns, price, qty, taker_side FROM trades
         WHERE symbol = ?1 AND id >= ?2 AND id < ?3 AND ts_ns >= ?4 AND ts_ns < ?5
         ORDER BY id {} LIMIT ?6",
        symbol as i64,
        range,
        |r| {
            Ok(TradeOut {
                id: r.get(0)?,
                symbol: r.get(1)?,
                ts_ns: r.get(2)?,
                price: r.get(3)?,
                qty: r.get(4)?,
                taker_side: side(r.get(5)?)?,
            })
        },
    )
}

fn fill_row(r: &Row) -> rusqlite::Result<FillOut> {
    Ok(FillOut {
        id: r.get(0)?,
        maker: r.get::<_, i64>(1)? == 0,
        trade: r.get(2)?,
        order: r.get(3)?,
        symbol: r.get(4)?,
        side: side(r.get(5)?)?,
        price: r.get(6)?,
        qty: r.get(7)?,
        fee: r.get(8)?,
        ts_ns: r.get(9)?,
    })
}

/// A user's fills (of one symbol, or all).
pub fn fills(
    conn: &Connection,
    user: i64,
    symbol: Option<u32>,
    range: &Range,
) -> rusqlite::Result<Vec<FillOut>> {
    let symbol_filter = match symbol {
        Some(s) => format!("AND symbol = {s}"),
        None => String::new(),
    };
    list(
        conn,
        &format!(
            "SELECT id, liquidity, trade, order_id, symbol, side, price, qty, fee, ts_ns FROM fills
             WHERE user = ?1 AND id >= ?2 AND id < ?3 AND ts_ns >= ?4 AND ts_ns < ?5
             {symbol_filter} ORDER BY id {{}}, liquidity {{}} LIMIT ?6"
        ),
        user,
        range,
        fill_row,
    )
}

const EVENT_COLUMNS: &str = "id, type, order_id, symbol, side, price, qty, stop_price, kind, \
    reason, priority, ts_ns, order_type, tif";

fn event_row(r: &Row) -> rusqlite::Result<EventOut> {
    Ok(EventOut {
        id: r.get(0)?,
        word: r.get(1)?,
        order: r.get(2)?,
        symbol: r.get(3)?,
        side: r.get::<_, Option<i64>>(4)?.map(side).transpose()?,
        price: r.get(5)?,
        qty: r.get(6)?,
        stop_price: r.get(7)?,
        kind: r.get(8)?,
        reason: r.get(9)?,
        priority: r.get(10)?,
        ts_ns: r.get(11)?,
        order_type: r.get(12)?,
        tif: r.get(13)?,
    })
}

/// One order of a user's: its events (all: an order has a few) and its first `max_fills`
/// fills (through the indexes by order, so the user's other history is not read).
pub fn order_record(
    conn: &Connection,
    user: i64,
    order: i64,
    max_fills: usize,
) -> rusqlite::Result<OrderRecord> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM order_events WHERE user = ?1 AND order_id = ?2 ORDER BY id"
    ))?;
    let events = stmt
        .query_map(params![user, order], event_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut stmt = conn.prepare_cached(
        "SELECT id, liquidity, trade, order_id, symbol, side, price, qty, fee, ts_ns FROM fills
         WHERE user = ?1 AND order_id = ?2 ORDER BY id, liquidity LIMIT ?3",
    )?;
    let fills = stmt
        .query_map(params![user, order, max_fills as i64], fill_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let filled: i64 = conn.query_row(
        "SELECT COALESCE(SUM(qty), 0) FROM fills WHERE user = ?1 AND order_id = ?2",
        params![user, order],
        |r| r.get(0),
    )?;
    Ok(OrderRecord {
        events,
        fills,
        filled,
    })
}

/// A user's order history: fills and order events merged by id, bounded by `range.limit`.
pub fn order_history(
    conn: &Connection,
    user: i64,
    range: &Range,
) -> rusqlite::Result<Vec<HistoryOut>> {
    let fills = fills(conn, user, None, range)?;
    let events = list(
        conn,
        &format!(
            "SELECT {EVENT_COLUMNS} FROM order_events
             WHERE user = ?1 AND id >= ?2 AND id < ?3 AND ts_ns >= ?4 AND ts_ns < ?5
             ORDER BY id {{}} LIMIT ?6"
        ),
        user,
        range,
        event_row,
    )?;
    let mut all: Vec<HistoryOut> = fills
        .into_iter()
        .map(HistoryOut::Fill)
        .chain(events.into_iter().map(HistoryOut::Event))
        .collect();
    // Stable: a self-trade's maker fill stays before its taker fill.
    all.sort_by_key(HistoryOut::id);
    if range.ascending() {
        all.truncate(range.limit);
    } else {
        let excess = all.len().saturating_sub(range.limit);
        all.drain(..excess);
    }
    Ok(all)
}

/// The name of a candle interval's length in seconds (`1m`, …, `1d`).
pub fn interval_seconds(name: &str) -> Option<i64> {
    INTERVALS.iter().find(|(_, n)| *n == name).map(|(s, _)| *s)
}

/// A symbol's candles of `interval_s`, selected by start time (`from_id` is not used).
pub fn candles(
    conn: &Connection,
    symbol: u32,
    interval_s: i64,
    range: &Range,
) -> rusqlite::Result<Vec<CandleOut>> {
    let ascending = range.start_ns.is_some();
    let sql = format!(
        "SELECT start_ns, open, high, low, close, volume, quote_volume, trades FROM candles
         WHERE symbol = ?1 AND interval_s = ?2 AND start_ns >= ?3 AND start_ns < ?4
         ORDER BY start_ns {} LIMIT ?5",
        if ascending { "ASC" } else { "DESC" }
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![
            symbol as i64,
            interval_s,
            range.start_ns.unwrap_or(i64::MIN),
            range.end_ns.unwrap_or(i64::MAX),
            range.limit as i64
        ],
        |r| {
            Ok(CandleOut {
                start_ns: r.get(0)?,
                open: r.get(1)?,
                high: r.get(2)?,
                low: r.get(3)?,
                close: r.get(4)?,
                volume: r.get(5)?,
                quote_volume: r.get(6)?,
                trades: r.get(7)?,
            })
        },
    )?;
    let mut out = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    if !ascending {
        out.reverse();
    }
    Ok(out)
}

/// The 24 h ticker of `symbol` at `now_ns`.
pub fn ticker(conn: &Connection, symbol: u32, now_ns: i64) -> rusqlite::Result<Ticker> {
    const MINUTE_NS: i64 = 60_000_000_000;
    let this_minute = now_ns - now_ns.rem_euclid(MINUTE_NS);
    let from = this_minute - 1_439 * MINUTE_NS;
    let window = candles(
        conn,
        symbol,
        60,
        &Range {
            start_ns: Some(from),
            end_ns: None,
            from_id: None,
            limit: 1_440 + 1,
        },
    )?;
    let last: Option<i64> = conn
        .query_row(
            "SELECT price FROM trades WHERE symbol = ?1 ORDER BY id DESC LIMIT 1",
            [symbol as i64],
            |r| r.get(0),
        )
        .optional()?;
    let mut ticker = Ticker {
        open: window.first().map(|c| c.open).or(last),
        high: window.iter().map(|c| c.high).max().or(last),
        low: window.iter().map(|c| c.low).min().or(last),
        last,
        volume: 0,
        quote_volume: 0,
        trades: 0,
    };
    for c in &window {
        ticker.volume = ticker.volume.saturating_add(c.volume);
        ticker.quote_volume = ticker.quote_volume.saturating_add(c.quote_volume);
        ticker.trades += c.trades;
    }
    Ok(ticker)
}
