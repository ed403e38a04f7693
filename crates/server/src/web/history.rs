//! Each user's recent order events (REST order history) and private stream (WebSocket `user`).
//!
//! Fills and cancellations come from the gateway for every user, whichever gateway the order
//! came through; acceptances and rejections are those of commands sent over REST and
//! WebSocket. Kept in memory only: the last [`HISTORY_LEN`] per user since the server started.
//! Fills and cancellations are kept as they came (every user's, at the engine's pace) and
//! written as JSON only when someone reads the history or follows the user's stream.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use rialto_core::{SymbolId, UserId};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::AppState;
use super::units::Catalog;
use crate::event::Event;

pub const HISTORY_LEN: usize = 1000;
/// The most messages a user's stream holds for a subscriber that has not forwarded them yet,
/// whatever `[web] max_ws_queue` says (the stream's slots are allocated when it is made).
const MAX_STREAM_BACKLOG: usize = 1 << 16;

/// One entry of a user's history.
enum Entry {
    /// A fill or cancellation, as the gateway handed it over.
    Message(Event),
    /// An event already in its JSON form (an object with a `type`).
    Json(Value),
}

/// One message of a user's stream, with the seq of the venue state it is as of: a
/// subscription drops those at or below its snapshot's seq, which the snapshot already shows.
/// In engine integers: each subscriber writes it in its connection's units.
#[derive(Clone, Debug)]
pub struct UserMessage {
    pub seq: u64,
    pub message: Arc<Value>,
}

#[derive(Default)]
pub struct Histories {
    events: Mutex<HashMap<UserId, VecDeque<Entry>>>,
    streams: Mutex<HashMap<UserId, broadcast::Sender<UserMessage>>>,
    /// Each symbol's band and reference price last published on the `status` channel, so that
    /// a mark change is not also announced as a band change.
    published_bands: Mutex<HashMap<SymbolId, (i64, i64)>>,
    /// Users whose balances are being fetched for their stream.
    refreshing: Mutex<HashSet<UserId>>,
    /// Batches from the gateway recorded so far, and a bell for those who wait for one.
    batches_done: std::sync::atomic::AtomicU64,
    batch_bell: tokio::sync::Notify,
}

impl Histories {
    /// Records an event (an object with a `type`) of the command at `seq` and sends it to the
    /// user's stream.
    pub fn record(&self, user: UserId, seq: u64, event: Value) {
        if let Some(tx) = self.stream(user) {
            send_event(&tx, seq, &event);
        }
        self.push(user, Entry::Json(event));
    }

    fn push(&self, user: UserId, entry: Entry) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let list = events.entry(user).or_default();
        if list.len() == HISTORY_LEN {
            list.pop_front();
        }
        list.push_back(entry);
    }

    /// The last `limit` events, oldest first; `name` gives a symbol's name.
    pub fn recent(
        &self,
        user: UserId,
        limit: usize,
        name: impl Fn(SymbolId) -> String,
    ) -> Vec<Value> {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.get(&user).map_or_else(Vec::new, |list| {
            let skip = list.len().saturating_sub(limit);
            list.iter()
                .skip(skip)
                .filter_map(|entry| match entry {
                    Entry::Message(msg) => message_json(msg, &name),
                    Entry::Json(event) => Some(event.clone()),
                })
                .collect()
        })
    }

    /// Waits (a second at most) until the first `batches` batches from the gateway are
    /// recorded ([`super::bridge::WebBridge::batches_sent`]); false if they are not by then.
    pub async fn caught_up(&self, batches: u64) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let wait = async {
            loop {
                let bell = self.batch_bell.notified();
                if self.batches_done.load(SeqCst) >= batches {
                    return;
                }
                bell.await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(1), wait)
            .await
            .is_ok()
    }

    /// A receiver of the user's stream. A subscriber more than `backlog` messages behind it
    /// (the connection's `[web] max_ws_queue`) is a slow consumer.
    pub fn subscribe(&self, user: UserId, backlog: usize) -> broadcast::Receiver<UserMessage> {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams
            .entry(user)
            .or_insert_with(|| broadcast::channel(backlog.clamp(1, MAX_STREAM_BACKLOG)).0)
            .subscribe()
    }

    fn stream(&self, user: UserId) -> Option<broadcast::Sender<UserMessage>> {
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams
            .get(&user)
            .filter(|s| s.receiver_count() > 0)
            .cloned()
    }

    pub fn send_to_stream(&self, user: UserId, seq: u64, message: Value) {
        if let Some(tx) = self.stream(user) {
            let message = Arc::new(message);
            let _ = tx.send(UserMessage { seq, message });
        }
    }
}

/// Receives fills and cancellations from the gateway, in order, and the gaps where the
/// gateway had to drop some because this side fell behind.
pub async fn run(state: Arc<AppState>, mut batches: mpsc::Receiver<super::bridge::WebBatch>) {
    loop {
        state.bridge.unstalled().await;
        let Some(batch) = batches.recv().await else {
            break;
        };
        let mut counted = u64::from(!batch.messages.is_empty());
        if let Some(gap) = batch.gap {
            counted += gap.batches;
            announce_gap(&state, &gap);
        }
        for (user, msg) in batch.messages {
            match user {
                Some(user) => record(&state, user, msg),
                None => publish_status(&state, &msg),
            }
        }
        state
            .history
            .batches_done
            .fetch_add(counted, std::sync::atomic::Ordering::SeqCst);
        state.history.batch_bell.notify_waiters();
    }
}

/// Messages were lost before this point (docs/api.md, "Gaps"): each user concerned gets a
/// `gap` event in their history and on their private stream (whose subscribers subscribe
/// again for a fresh snapshot), and the records of their orders placed before it are marked
/// incomplete, so that an order's status comes from the engine and the history database, or
/// says `incomplete`, rather than show a record that misses a fill. Lost public messages give
/// a `gap` on the `status` channel.
fn announce_gap(state: &Arc<AppState>, gap: &super::bridge::Gap) {
    tracing::warn!(
        messages = gap.messages,
        users = gap.users.len(),
        "the web side fell behind: user messages dropped"
    );
    for (&user, &(seq, lost)) in &gap.users {
        state.orders.mark_gap(user, seq);
        let event = json!({"type": "gap", "seq": seq, "lost": lost});
        if let Some(tx) = state.history.stream(user) {
            send_event(&tx, seq, &event);
        }
        state.history.push(user, Entry::Json(event));
    }
    if let Some(seq) = gap.public_seq {
        let event = json!({"ch": STATUS_CHANNEL, "type": "gap", "seq": seq});
        state
            .topics
            .publish(STATUS_CHANNEL, &event, || Catalog::of(state));
    }
}

/// A phase change, an auction result, a new band or reference price or a future's new mark,
/// to the public `status` channel (docs/api.md).
fn publish_status(state: &AppState, msg: &Event) {
    let event = match *msg {
        Event::VenueSettings {
            seq, ref symbols, ..
        } => {
            for (symbol, s) in symbols {
                let name = symbol_name(state, *symbol);
                let band = (s.band_bps, s.reference);
                let before = state
                    .history
                    .published_bands
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(*symbol, band);
                if !s.future || before != Some(band) {
                    let event = json!({"ch": "status", "type": "band", "symbol": name,
                        "band_bps": s.band_bps, "reference": s.reference, "last": s.last, "seq": seq});
                    state
                        .topics
                        .publish(STATUS_CHANNEL, &event, || Catalog::of(state));
                }
                if s.future {
                    let event = json!({"ch": "status", "type": "mark", "symbol": name,
                        "mark": s.mark, "seq": seq});
                    state
                        .topics
                        .publish(STATUS_CHANNEL, &event, || Catalog::of(state));
                }
            }
            return;
        }
        Event::PhaseChanged {
            seq,
            ts_ns,
            symbol,
            phase,
        } => json!({"ch": "status", "type": "phase", "symbol": symbol_name(state, symbol),
            "phase": phase.as_str(), "seq": seq, "ts_ns": ts_ns}),
        Event::Auction {
            seq,
            ts_ns,
            symbol,
            price,
            qty,
            imbalance,
        } => json!({"ch": "status", "type": "auction", "symbol": symbol_name(state, symbol),
            "price": price, "qty": qty, "imbalance": imbalance, "seq": seq, "ts_ns": ts_ns}),
        _ => return,
    };
    state
        .topics
        .publish(STATUS_CHANNEL, &event, || Catalog::of(state));
}

/// The public channel of phase changes and auction results.
pub const STATUS_CHANNEL: &str = "status";

/// Adds one fill or cancellation to its user's history and stream.
fn record(state: &Arc<AppState>, user: UserId, msg: Event) {
    state.orders.observe(user, &msg, || match msg {
        Event::Trade { symbol, .. }
        | Event::Cancelled { symbol, .. }
        | Event::Amended { symbol, .. } => symbol_name(state, symbol),
        _ => String::new(),
    });
    let seq = match msg {
        Event::Trade { seq, .. }
        | Event::Cancelled { seq, .. }
        | Event::Amended { seq, .. }
        | Event::Triggered { seq, .. }
        | Event::Liquidated { seq, .. } => seq,
        _ => return,
    };
    if let Some(tx) = state.history.stream(user)
        && let Some(event) = message_json(&msg, &|symbol| symbol_name(state, symbol))
    {
        send_event(&tx, seq, &event);
        refresh_balances(state, user);
    }
    state.history.push(user, Entry::Message(msg));
}

/// Sends a history event to a user's stream, marked as the `user` channel's.
fn send_event(tx: &broadcast::Sender<UserMessage>, seq: u64, event: &Value) {
    let mut message = event.clone();
    message["ch"] = json!("user");
    let message = Arc::new(message);
    let _ = tx.send(UserMessage { seq, message });
}

/// A symbol's name as the feed knows it (`?` for none).
pub fn symbol_name(state: &AppState, symbol: SymbolId) -> String {
    state
        .md
        .feed()
        .symbol(symbol)
        .map_or_else(|| "?".to_string(), |s| s.spec.symbol.as_str().to_string())
}

/// A fill or cancellation as a history event (None for other messages).
fn message_json(msg: &Event, name: &impl Fn(SymbolId) -> String) -> Option<Value> {
    Some(match *msg {
        Event::Trade {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            price,
            qty,
            fee,
            liquidity,
        } => {
            json!({"type": "fill", "order": order, "symbol": name(symbol), "side": side.as_str(),
            "price": price, "qty": qty, "fee": fee, "liquidity": liquidity.as_str(), "seq": seq, "ts_ns": ts_ns})
        }
        Event::Cancelled {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            qty,
            reason,
        } => {
            json!({"type": "cancelled", "order": order, "symbol": name(symbol), "side": side.as_str(),
            "qty": qty, "reason": reason.as_str(), "seq": seq, "ts_ns": ts_ns})
        }
        Event::Amended {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            price,
            stop_price,
            remaining,
            priority,
        } => {
            json!({"type": "amended", "order": order, "symbol": name(symbol), "side": side.as_str(),
            "price": price, "stop_price": stop_price, "remaining": remaining,
            "priority": priority.as_str(), "seq": seq, "ts_ns": ts_ns})
        }
        Event::Triggered {
            seq,
            ts_ns,
            order,
            symbol,
            side,
            stop_price,
        } => {
            json!({"type": "triggered", "order": order, "symbol": name(symbol), "side": side.as_str(),
            "stop_price": stop_price, "seq": seq, "ts_ns": ts_ns})
        }
        Event::Liquidated {
            seq,
            ts_ns,
            currency,
            equity,
            maintenance,
            shortfall,
        } => {
            json!({"type": "liquidated", "currency": currency.as_str(), "equity": equity,
            "maintenance": maintenance, "shortfall": shortfall, "seq": seq, "ts_ns": ts_ns})
        }
        _ => return None,
    })
}

/// Sends the user's balances to their stream, if anyone listens; one fetch at a time per user.
pub fn refresh_balances(state: &Arc<AppState>, user: UserId) {
    if state.history.stream(user).is_none() {
        return;
    }
    if !state
        .history
        .refreshing
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(user)
    {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        // Let a burst of fills settle into one fetch.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        state
            .history
            .refreshing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&user);
        if let Ok((seq, report)) = super::orders::report(&state, user).await {
            state.history.send_to_stream(
                user,
                seq,
                json!({"ch": "user", "type": "balances", "seq": seq, "balances": super::orders::balances_json(&report)}),
            );
            if let Some(message) = positions_message(&state, seq, &report).await {
                state.history.send_to_stream(user, seq, message);
            }
        }
    });
}

/// The user stream's `positions` message (positions and margins, in engine integers), on a
/// venue with futures; `None` without.
pub async fn positions_message(
    state: &AppState,
    seq: u64,
    report: &rialto_core::UserReport,
) -> Option<Value> {
    if report.margins.is_empty() && report.positions.is_empty() {
        return None;
    }
    let (_, settings) = super::orders::venue_status(state).await.ok()?;
    let positions = super::futures::positions_json(state, report, &settings);
    Some(
        json!({"ch": "user", "type": "positions", "seq": seq, "positions": positions,
        "margins": super::futures::margins_json(report)}),
    )
}

// ----- the history database (`[history]`) ------------------------------------------------------

use crate::history::query::{self, FillOut, HistoryOut, Range};
use crate::history::{ID_PER_SEQ, Store};
use axum::http::Uri;

use super::ApiError;

/// How long a history read waits for the writer to reach the venue's seq as of the request.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Most entries one history call answers.
pub const MAX_LIMIT: usize = 1_000;

fn query_i64(uri: &Uri, name: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
    match super::rest::query_value(uri, name) {
        None => Ok(None),
        Some(text) => match text.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::bad_request(
                "bad_request",
                format!("{name} must be a whole number from {min} to {max}"),
            )),
        },
    }
}

/// `start_time`, `end_time` (ms), `from_id` and `limit` of a history request.
pub fn range(uri: &Uri, default_limit: usize, max_limit: usize) -> Result<Range, ApiError> {
    const MAX_MS: i64 = i64::MAX / 1_000_000;
    let start_ms = query_i64(uri, "start_time", 0, MAX_MS)?;
    let end_ms = query_i64(uri, "end_time", 0, MAX_MS)?;
    if let (Some(start), Some(end)) = (start_ms, end_ms)
        && start >= end
    {
        return Err(ApiError::bad_request(
            "bad_request",
            "start_time must be before end_time",
        ));
    }
    Ok(Range {
        start_ns: start_ms.map(|ms| ms * 1_000_000),
        end_ns: end_ms.map(|ms| ms * 1_000_000),
        from_id: query_i64(uri, "from_id", 0, i64::MAX)?,
        limit: super::rest::query_number(uri, "limit", default_limit, max_limit)?,
    })
}

/// Runs a query on a read connection, off the async workers.
async fn read<T: Send + 'static>(
    db: &Arc<Store>,
    f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    let db = db.clone();
    let internal = |e: String| {
        tracing::error!("history query: {e}");
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the history database could not answer",
        )
    };
    // Read-your-writes: the history as of the request, unless the writer is far behind.
    let seq = db.seq_to_wait_for();
    let deadline = tokio::time::Instant::now() + CATCH_UP_WAIT;
    while db.written_seq.load(std::sync::atomic::Ordering::Acquire) < seq
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    tokio::task::spawn_blocking(move || db.read(f))
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(|e| internal(format!("{e:#}")))
}

/// `history_off` for an endpoint that only the history database serves.
pub fn history_off() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "history_off",
        "the server runs without its history database ([history] enabled = false)",
    )
}

pub async fn db_trades(db: &Arc<Store>, symbol: SymbolId, range: Range) -> Result<Value, ApiError> {
    let trades = read(db, move |c| query::trades(c, symbol.0, &range)).await?;
    Ok(Value::Array(
        trades
            .iter()
            .map(|t| {
                json!({"trade_id": t.id, "ts_ns": t.ts_ns, "price": t.price, "qty": t.qty,
                    "taker_side": t.taker_side.as_str()})
            })
            .collect(),
    ))
}

fn fill_json(f: &FillOut, name: &impl Fn(SymbolId) -> String) -> Value {
    json!({"type": "fill", "id": f.id, "trade_id": f.trade, "order": f.order,
        "symbol": name(SymbolId(f.symbol)), "side": f.side.as_str(), "price": f.price,
        "qty": f.qty, "fee": f.fee, "liquidity": if f.maker { "maker" } else { "taker" },
        "seq": f.id / ID_PER_SEQ, "ts_ns": f.ts_ns})
}

pub async fn db_fills(
    state: &AppState,
    db: &Arc<Store>,
    user: UserId,
    symbol: Option<SymbolId>,
    range: Range,
) -> Result<Value, ApiError> {
    let fills = read(db, move |c| {
        query::fills(c, user, symbol.map(|s| s.0), &range)
    })
    .await?;
    let name = |symbol| symbol_name(state, symbol);
    Ok(Value::Array(
        fills.iter().map(|f| fill_json(f, &name)).collect(),
    ))
}

pub async fn db_order_history(
    state: &AppState,
    db: &Arc<Store>,
    user: UserId,
    range: Range,
) -> Result<Value, ApiError> {
    let entries = read(db, move |c| query::order_history(c, user, &range)).await?;
    let name = |symbol| symbol_name(state, symbol);
    let list = entries
        .iter()
        .map(|entry| match entry {
            HistoryOut::Fill(f) => fill_json(f, &name),
            HistoryOut::Event(e) => {
                let mut v = json!({"type": e.word, "id": e.id, "order": e.order,
                    "seq": e.id / ID_PER_SEQ, "ts_ns": e.ts_ns});
                if let Some(kind) = &e.kind {
                    v["kind"] = json!(kind);
                }
                if let Some(reason) = &e.reason {
                    v["reason"] = json!(reason);
                }
                if let (Some(symbol), Some(side)) = (e.symbol, e.side) {
                    v["symbol"] = json!(name(SymbolId(symbol)));
                    v["side"] = json!(side.as_str());
                }
                match e.word.as_str() {
                    "accepted" if e.kind.as_deref() == Some("place") => {
                        v["order_type"] = json!(e.order_type);
                        v["tif"] = json!(e.tif);
                        v["price"] = json!((e.price != 0).then_some(e.price));
                        v["qty"] = json!(e.qty);
                        v["stop_price"] = json!((e.stop_price != 0).then_some(e.stop_price));
                    }
                    "cancelled" => v["qty"] = json!(e.qty),
                    "triggered" => v["stop_price"] = json!(e.stop_price),
                    "amended" => {
                        v["price"] = json!(e.price);
                        v["stop_price"] = json!(e.stop_price);
                        v["remaining"] = json!(e.qty);
                        v["priority"] = json!(e.priority);
                    }
                    _ => {}
                }
                v
            }
        })
        .collect();
    Ok(Value::Array(list))
}

/// An ended order's status from the history database, in the shape of
/// [`super::order_status::OrderStatuses::status`] (engine integers; the client order id is
/// not kept there): `None` for an order the history does not hold.
pub async fn db_order_status(
    state: &AppState,
    db: &Arc<Store>,
    user: UserId,
    order: i64,
) -> Result<Option<Value>, ApiError> {
    let record = read(db, move |c| {
        query::order_record(c, user, order, super::order_status::FILLS_KEPT)
    })
    .await?;
    let placed = record
        .events
        .iter()
        .find(|e| e.word == "accepted" && e.kind.as_deref() == Some("place"));
    let Some(placed) = placed else {
        // Never accepted (a rejected place, or another user's id): nothing to show.
        return Ok(None);
    };
    let cancelled = record.events.iter().rev().find(|e| e.word == "cancelled");
    let status = match cancelled.and_then(|e| e.reason.as_deref()) {
        Some("fok") => "killed",
        Some("ioc" | "market" | "expired") => "expired",
        Some(_) => "cancelled",
        None => "filled",
    };
    let updated_ns = record
        .events
        .iter()
        .map(|e| e.ts_ns)
        .chain(record.fills.iter().map(|f| f.ts_ns))
        .max();
    let fills: Vec<Value> = record
        .fills
        .iter()
        .map(|f| {
            json!({"price": f.price, "qty": f.qty, "fee": f.fee,
                "liquidity": if f.maker { "maker" } else { "taker" },
                "seq": f.id / ID_PER_SEQ, "ts_ns": f.ts_ns})
        })
        .collect();
    let name = |symbol| symbol_name(state, SymbolId(symbol));
    Ok(Some(json!({
        "order": order,
        "client_order_id": null,
        "symbol": placed.symbol.map(name),
        "side": placed.side.map(|s| s.as_str()),
        "type": placed.order_type,
        "tif": placed.tif,
        "price": (placed.price != 0).then_some(placed.price),
        "status": status,
        "original_qty": placed.qty,
        "filled": record.filled,
        "remaining": 0,
        "placed_ns": placed.ts_ns,
        "updated_ns": updated_ns,
        "fills": fills,
    })))
}

pub async fn db_candles(
    db: &Arc<Store>,
    symbol: SymbolId,
    interval_s: i64,
    range: Range,
) -> Result<Value, ApiError> {
    let candles = read(db, move |c| query::candles(c, symbol.0, interval_s, &range)).await?;
    Ok(Value::Array(
        candles
            .iter()
            .map(|c| {
                // The shape of the feed's candles (`json::candle`), as on the candle channel.
                json!({"start_ns": c.start_ns, "open": c.open, "high": c.high, "low": c.low,
                    "close": c.close, "volume": c.volume, "trades": c.trades})
            })
            .collect(),
    ))
}

/// The 24 h ticker of each symbol in `symbols`.
pub async fn db_tickers(
    state: &AppState,
    db: &Arc<Store>,
    symbols: Vec<SymbolId>,
) -> Result<Vec<Value>, ApiError> {
    let now_ns = crate::pipeline::now_ns();
    let ids = symbols.clone();
    let tickers = read(db, move |c| {
        ids.iter()
            .map(|s| query::ticker(c, s.0, now_ns))
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .await?;
    Ok(symbols
        .iter()
        .zip(tickers)
        .map(|(symbol, t)| {
            let change = t.last.zip(t.open).map(|(last, open)| last - open);
            let percent = change.zip(t.open).and_then(|(change, open)| {
                (open != 0).then(|| format!("{:.3}", change as f64 * 100.0 / open as f64))
            });
            json!({"symbol": symbol_name(state, *symbol), "open": t.open, "high": t.high,
                "low": t.low, "last": t.last, "volume": t.volume, "quote_volume": t.quote_volume,
                "trades": t.trades, "change": change, "change_percent": percent,
                "ts_ns": now_ns})
        })
        .collect())
}
