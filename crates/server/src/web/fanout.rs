//! Turns the market data thread's batches into WebSocket stream messages: each message is
//! encoded once per channel and shared by every subscriber of that channel.
//!
//! Batches that arrive together are merged (a book diff carries the final total of each level
//! it names), so a burst of updates costs each subscriber one message per channel, not one per
//! update.
//!
//! A subscriber's snapshot is read from the feed, which runs ahead of this thread: the
//! fan-out may still hold updates the snapshot already has. Each subscriber keeps what its
//! snapshot is as of, and gets nothing at or below it (docs/api.md, the snapshot rule): a
//! message that straddles its snapshot is cut for it alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rialto_core::{Phase, Side, SymbolId};
use rialto_marketdata::feed::Quote;
use rialto_marketdata::{Candle, Update};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::outbox::{Outbox, text_frame};
use super::units::{Catalog, Scales, Units, decimalize};
use super::{AppState, json as j};
use crate::feed::Batch;

/// The longest a stream message waits to be merged with the next updates.
const TICK: Duration = Duration::from_millis(1);
/// How often the fan-out drops the batches that nobody follows (the broadcast queue holds
/// thousands): rarely, so that a venue without WebSocket subscribers spends next to nothing.
const UNFOLLOWED_TICK: Duration = Duration::from_millis(20);

/// Channels by name (`book.BTC-USD`) and units (each message is encoded once per units that
/// someone follows), created when first subscribed.
#[derive(Default)]
pub struct Topics {
    channels: Mutex<HashMap<(String, Units), Arc<Channel>>>,
}

/// Both units, in the order the fan-out encodes them.
const BOTH: [Units; 2] = [Units::Decimal, Units::Int];

/// One channel's subscribers: the outboxes its messages are written into, by connection.
#[derive(Default)]
pub struct Channel {
    subscribers: Mutex<Vec<Subscriber>>,
}

struct Subscriber {
    connection: u64,
    outbox: Arc<Outbox>,
    /// What the subscriber's snapshot is as of: an L2 or L3 seq, or a trade id (docs/api.md).
    /// The snapshot is read from the feed, which runs ahead of the fan-out, so the fan-out
    /// may still hold older updates: it sends nothing at or below this.
    as_of: u64,
}

impl Topics {
    /// Adds a connection to a channel. Its first frame, made by `snapshot` with what it is as
    /// of, goes into its outbox under the channel's lock, so that no message of the channel
    /// comes before it and none falls between.
    pub fn subscribe(
        &self,
        channel: &str,
        units: Units,
        connection: u64,
        outbox: &Arc<Outbox>,
        snapshot: impl FnOnce() -> (Bytes, u64),
    ) -> Arc<Channel> {
        let joined = {
            let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            let key = (channel.to_string(), units);
            channels.entry(key).or_default().clone()
        };
        let mut subscribers = joined.lock();
        let (frame, as_of) = snapshot();
        if outbox.send(frame) {
            subscribers.push(Subscriber {
                connection,
                outbox: outbox.clone(),
                as_of,
            });
        }
        drop(subscribers);
        joined
    }

    /// A channel someone follows (else nothing is encoded for it).
    fn wanted(&self, channel: &str, units: Units) -> Option<Arc<Channel>> {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels
            .get(&(channel.to_string(), units))
            .filter(|c| !c.lock().is_empty())
            .cloned()
    }

    /// Whether any connection follows any channel.
    fn followed(&self) -> bool {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        channels.values().any(|c| !c.lock().is_empty())
    }

    /// Writes one text message to every subscriber of `channel` (a channel without a
    /// snapshot rule of its own: `status`). A subscriber that takes no more leaves it.
    /// `message` is in engine integers; `catalog` makes its decimal form.
    pub fn publish(&self, channel: &str, message: &Value, catalog: impl FnOnce() -> Catalog) {
        let mut catalog = Some(catalog);
        for units in BOTH {
            let Some(joined) = self.wanted(channel, units) else {
                continue;
            };
            let text = match (units, catalog.take()) {
                (Units::Decimal, Some(catalog)) => {
                    let mut message = message.clone();
                    decimalize(&mut message, &catalog(), None);
                    message.to_string()
                }
                _ => message.to_string(),
            };
            let frame = text_frame(&text);
            joined.lock().retain(|s| s.outbox.send(frame.clone()));
        }
    }

    /// The feed started a new epoch: every subscriber of every channel is closed
    /// ([`Outbox::feed_restarted`]) and leaves it.
    fn restart(&self) {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        for channel in channels.values() {
            for subscriber in channel.lock().drain(..) {
                subscriber.outbox.feed_restarted();
            }
        }
    }

    /// Subscribers of one channel, in either units.
    pub fn subscribers(&self, channel: &str) -> usize {
        let channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        BOTH.iter()
            .filter_map(|&u| channels.get(&(channel.to_string(), u)))
            .map(|c| c.lock().len())
            .sum()
    }
}

impl Channel {
    fn lock(&self) -> MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn unsubscribe(&self, connection: u64) {
        self.lock().retain(|s| s.connection != connection);
    }

    /// Writes a message carrying the updates `first..=last` (seqs or trade ids, in order)
    /// into every subscriber's outbox: `whole` to those whose snapshot is older than `first`,
    /// nothing to those whose snapshot holds `last`, and to those in between what
    /// `after(as_of)` makes of the updates after their snapshot (rare: only a subscriber that
    /// joined while the fan-out held older updates). A subscriber that takes no more (slow,
    /// closing) leaves the channel.
    fn publish(&self, first: u64, last: u64, whole: &str, after: impl Fn(u64) -> String) {
        assert!(first <= last, "updates {first}..={last}");
        let whole = text_frame(whole);
        // Cut messages, by the seq they are cut after.
        let mut cut: Vec<(u64, Bytes)> = Vec::new();
        self.lock().retain(|s| {
            if s.as_of < first {
                return s.outbox.send(whole.clone());
            }
            if s.as_of >= last {
                return true; // the snapshot holds all of it
            }
            let frame = match cut.iter().find(|(as_of, _)| *as_of == s.as_of) {
                Some((_, frame)) => frame.clone(),
                None => {
                    let frame = text_frame(&after(s.as_of));
                    cut.push((s.as_of, frame.clone()));
                    frame
                }
            };
            s.outbox.send(frame)
        });
    }
}

/// What one round of batches did to one symbol.
#[derive(Default)]
struct SymbolRound {
    /// L2 updates in seq order: (seq, side, price, total after).
    levels: Vec<(u64, Side, i64, i64)>,
    /// The first and last L2 seq of the round: its levels' and its phase changes'.
    l2_range: Option<(u64, u64)>,
    /// The round's last phase change, with its L2 seq.
    phase: Option<(u64, Phase)>,
    /// Raw updates: encoded only for a channel someone follows.
    l3: Vec<Update>,
    trades: Vec<Update>,
    /// The id of the last trade in the round, which the candle is as of.
    last_trade: u64,
    bbo: Option<(u64, Quote, Quote)>,
    /// The last state of each candle the round changed, oldest first, with the id of the
    /// last trade in it: a round that crosses an interval's end closes one candle and opens
    /// the next, and a follower must see the closed one's final state too.
    candles: Vec<(u64, Candle)>,
}

impl SymbolRound {
    fn widen_l2(&mut self, seq: u64) {
        let first = self.l2_range.map_or(seq, |r| r.0);
        self.l2_range = Some((first, seq));
    }

    /// The final total of each level changed after L2 seq `as_of`.
    fn levels_after(&self, as_of: u64) -> BTreeMap<(Side, i64), i64> {
        self.levels
            .iter()
            .filter(|l| l.0 > as_of)
            .map(|&(_, side, price, qty)| ((side, price), qty))
            .collect()
    }
}

/// The fan-out's thread: writing one round to many sockets takes milliseconds, which would
/// otherwise hold up a web worker. Runs until `stop` (the server nudges the market data
/// outlet so that a waiting fan-out sees it).
///
/// While no connection follows any channel, batches are taken and dropped: nothing is merged
/// for nobody. That loses no update for a connection that subscribes later: it subscribes
/// (under its channel's lock) before the snapshot it starts from is taken, and every batch
/// with updates after that snapshot is sent after it, so the fan-out takes that batch only
/// once the subscription is there to see.
pub fn run(
    state: Arc<AppState>,
    mut batches: broadcast::Receiver<Arc<Batch>>,
    stop: Arc<AtomicBool>,
) {
    let mut rounds: BTreeMap<SymbolId, SymbolRound> = BTreeMap::new();
    // The sequencer time of the oldest batch in the round being merged.
    let mut oldest_ts = 0;
    let take =
        |rounds: &mut BTreeMap<SymbolId, SymbolRound>, oldest_ts: &mut i64, batch: &Batch| {
            if batch.restart {
                // What the old epoch's rounds hold goes out under its numbers first.
                if !rounds.is_empty() {
                    publish(&state, rounds, *oldest_ts);
                }
                state.topics.restart();
                return;
            }
            if !state.topics.followed() {
                return;
            }
            *oldest_ts = match rounds.is_empty() {
                true => batch.ts_ns,
                false => (*oldest_ts).min(batch.ts_ns),
            };
            collect(rounds, batch);
        };
    while !stop.load(Ordering::Relaxed) {
        // Idle: wait for a batch, and publish it at once.
        match batches.blocking_recv() {
            Ok(batch) => take(&mut rounds, &mut oldest_ts, &batch),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                // Subscribers will see the gap in the sequence numbers and resubscribe.
                lagged(&state, n);
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
        // Busy: one round at most every tick, with whatever arrived meanwhile, until a tick
        // brings nothing. Batches are not awaited one by one: each wake-up would cost the
        // market data thread a system call on a machine busy with the engine.
        loop {
            let started = Instant::now();
            if !rounds.is_empty() {
                publish(&state, &mut rounds, oldest_ts);
            }
            let tick = match state.topics.followed() {
                true => TICK,
                false => UNFOLLOWED_TICK,
            };
            std::thread::sleep(tick.saturating_sub(started.elapsed()));
            let mut received = false;
            loop {
                match batches.try_recv() {
                    Ok(batch) => {
                        received = true;
                        take(&mut rounds, &mut oldest_ts, &batch);
                    }
                    Err(broadcast::error::TryRecvError::Lagged(n)) => lagged(&state, n),
                    Err(broadcast::error::TryRecvError::Closed) => return,
                    Err(broadcast::error::TryRecvError::Empty) => break,
                }
            }
            if !received {
                break; // a quiet tick: back to waiting
            }
        }
    }
}

/// Batches lost to a lag matter only to those who follow a channel (they resubscribe).
fn lagged(state: &AppState, batches: u64) {
    if state.topics.followed() {
        tracing::warn!(batches, "WebSocket fan-out fell behind the feed");
    }
}

fn collect(rounds: &mut BTreeMap<SymbolId, SymbolRound>, batch: &Batch) {
    for u in &batch.updates {
        let round = rounds.entry(u.symbol()).or_default();
        match *u {
            Update::Level {
                seq,
                side,
                price,
                qty,
                ..
            } => {
                debug_assert!(round.levels.last().is_none_or(|l| l.0 < seq));
                round.levels.push((seq, side, price, qty));
                round.widen_l2(seq);
            }
            Update::Phase { seq, phase, .. } => {
                round.phase = Some((seq, phase));
                round.widen_l2(seq);
            }
            // Auction results go out on the `status` channel, from the engine's events.
            Update::Auction { .. } => {}
            Update::Bbo { seq, bid, ask, .. } => round.bbo = Some((seq, bid, ask)),
            // A candle changes only with a trade, which comes before it in the same batch.
            Update::Candle { candle, .. } => {
                let as_of = (round.last_trade, candle);
                match round.candles.last_mut() {
                    Some(last) if last.1.start_ns == candle.start_ns => *last = as_of,
                    _ => round.candles.push(as_of),
                }
            }
            Update::Trade { trade, .. } => {
                round.last_trade = trade;
                round.trades.push(*u);
            }
            _ => round.l3.push(*u),
        }
    }
}

/// The seq of an L3 update, or the id of a trade.
fn seq_of(update: &Update) -> u64 {
    match *update {
        Update::Trade { trade, .. } => trade,
        _ => update.l3_seq().unwrap_or(0),
    }
}

/// A book diff, written by hand: it is the busiest stream, and the fields a client checks
/// first (sequence numbers and time) come before the levels, in the order of docs/api.md.
/// With `scales`, prices and quantities are decimal strings and the time is `ts` (ms) and
/// `ts_ns` as a string; without, the engine's integers.
pub fn book_diff(
    name: &str,
    first: u64,
    last: u64,
    ts_ns: i64,
    phase: Option<Phase>,
    levels: &BTreeMap<(Side, i64), i64>,
    scales: Option<&Scales>,
) -> String {
    use std::fmt::Write;
    // A symbol name may hold any character: the channel goes through the JSON encoder.
    let channel = Value::String(format!("book.{name}"));
    let mut text = String::with_capacity(96 + levels.len() * 24);
    let _ = write!(
        text,
        r#"{{"ch":{channel},"type":"diff","first":{first},"last":{last},"#
    );
    let _ = match scales {
        Some(_) => write!(
            text,
            r#""ts":{},"ts_ns":"{ts_ns}","#,
            ts_ns.div_euclid(1_000_000)
        ),
        None => write!(text, r#""ts_ns":{ts_ns},"#),
    };
    if let Some(phase) = phase {
        let _ = write!(text, r#""phase":"{}","#, phase.as_str());
    }
    text.push_str(r#""bids":["#);
    for (i, want) in [Side::Buy, Side::Sell].into_iter().enumerate() {
        if i == 1 {
            text.push_str(r#"],"asks":["#);
        }
        let mut sep = "";
        for (&(_, price), &qty) in levels.iter().filter(|((side, _), _)| *side == want) {
            let _ = match scales {
                Some(s) => write!(text, "{sep}[{},{}]", s.price(price), s.qty(qty)),
                None => write!(text, "{sep}[{price},{qty}]"),
            };
            sep = ",";
        }
    }
    text.push_str("]}");
    text
}

/// Sends one message per channel that changed; `ts_ns` is the sequencer time of the oldest
/// command they carry. Each message is cut, per subscriber, to what its snapshot lacks.
fn publish(state: &AppState, rounds: &mut BTreeMap<SymbolId, SymbolRound>, ts_ns: i64) {
    let names: HashMap<SymbolId, String> = {
        let feed = state.md.feed();
        rounds
            .keys()
            .filter_map(|&id| Some((id, feed.symbol(id)?.spec.symbol.as_str().to_string())))
            .collect()
    };
    let catalog = Catalog::of(state);
    for (id, round) in std::mem::take(rounds) {
        let Some(name) = names.get(&id) else { continue };
        for units in BOTH {
            let scales = match units {
                Units::Decimal => Some(catalog.scales(name).copied().unwrap_or(Scales::ONE)),
                Units::Int => None,
            };
            publish_symbol(state, name, &round, ts_ns, units, scales.as_ref(), &catalog);
        }
    }
}

/// One symbol's round to the subscribers of one units.
fn publish_symbol(
    state: &AppState,
    name: &str,
    round: &SymbolRound,
    ts_ns: i64,
    units: Units,
    scales: Option<&Scales>,
    catalog: &Catalog,
) {
    let topics = &state.topics;
    // A message in engine integers, in this units.
    let encode = |mut message: Value| {
        if scales.is_some() {
            decimalize(&mut message, catalog, Some(name));
        }
        message.to_string()
    };
    if let (Some((first, last)), Some(tx)) = (
        round.l2_range,
        topics.wanted(&format!("book.{name}"), units),
    ) {
        let diff = |as_of: u64| {
            let from = first.max(as_of + 1);
            let phase = round.phase.filter(|p| p.0 > as_of).map(|p| p.1);
            let levels = round.levels_after(as_of);
            book_diff(name, from, last, ts_ns, phase, &levels, scales)
        };
        tx.publish(first, last, &diff(0), diff);
    }
    if let (Some(first), Some(last), Some(tx)) = (
        round.l3.first(),
        round.l3.last(),
        topics.wanted(&format!("orders.{name}"), units),
    ) {
        let ch = format!("orders.{name}");
        let updates = |as_of: u64| {
            let updates: Vec<Value> = round
                .l3
                .iter()
                .filter(|u| seq_of(u) > as_of)
                .map(j::l3_update)
                .collect();
            encode(json!({"ch": ch, "type": "update", "updates": updates}))
        };
        tx.publish(seq_of(first), seq_of(last), &updates(0), updates);
    }
    if let (Some(first), Some(last), Some(tx)) = (
        round.trades.first(),
        round.trades.last(),
        topics.wanted(&format!("trades.{name}"), units),
    ) {
        let ch = format!("trades.{name}");
        let trades = |as_of: u64| {
            let trades: Vec<Value> = round
                .trades
                .iter()
                .filter(|t| seq_of(t) > as_of)
                .map(j::trade)
                .collect();
            encode(json!({"ch": ch, "type": "trades", "trades": trades}))
        };
        tx.publish(seq_of(first), seq_of(last), &trades(0), trades);
    }
    if let (Some((seq, bid, ask)), Some(tx)) =
        (round.bbo, topics.wanted(&format!("bbo.{name}"), units))
    {
        // The BBO and the candle are whole states, each sent as of one seq or trade id:
        // there is nothing to cut, only to skip when the snapshot is as new.
        let bbo = encode(j::bbo(&format!("bbo.{name}"), seq, bid, ask));
        tx.publish(seq, seq, &bbo, |_| bbo.clone());
    }
    if let (false, Some(tx)) = (
        round.candles.is_empty(),
        topics.wanted(&format!("candles.{name}"), units),
    ) {
        for (trade, candle) in &round.candles {
            let message = encode(json!({"ch": format!("candles.{name}"), "type": "candle",
                "last_trade": trade, "candle": j::candle(candle)}));
            tx.publish(*trade, *trade, &message, |_| message.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_book_diff_is_the_json_of_the_api_with_its_levels_by_side() {
        let levels = BTreeMap::from([
            ((Side::Buy, 99), 5),
            ((Side::Buy, 100), 0),
            ((Side::Sell, 101), 7),
        ]);
        let text = book_diff("A\"B", 3, 5, -1, None, &levels, None);
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(
            parsed,
            json!({"ch": "book.A\"B", "type": "diff", "first": 3, "last": 5, "ts_ns": -1,
                   "bids": [[99, 5], [100, 0]], "asks": [[101, 7]]})
        );
        assert!(text.starts_with(r#"{"ch":"book.A\"B","type":"diff","first":3,"#));
        let empty: Value =
            serde_json::from_str(&book_diff("X", 1, 1, 0, None, &BTreeMap::new(), None)).unwrap();
        assert_eq!(empty["bids"], json!([]));
        assert_eq!(empty["asks"], json!([]));
        // A phase change in the diff's range.
        let phased: Value = serde_json::from_str(&book_diff(
            "X",
            4,
            4,
            0,
            Some(Phase::Auction),
            &BTreeMap::new(),
            None,
        ))
        .unwrap();
        assert_eq!(phased["phase"], json!("auction"));
        assert_eq!(
            (phased["first"].clone(), phased["last"].clone()),
            (json!(4), json!(4))
        );
    }

    #[test]
    fn a_round_across_an_interval_end_keeps_the_final_state_of_each_candle() {
        let minute = 60_000_000_000;
        let trade = |id: u64, ts_ns: i64| Update::Trade {
            symbol: SymbolId(0),
            trade: id,
            ts_ns,
            price: 100,
            qty: 1,
            taker_side: Side::Buy,
        };
        let candle = |start_ns: i64, trades: u64| Update::Candle {
            symbol: SymbolId(0),
            candle: Candle {
                start_ns,
                open: 100,
                high: 100,
                low: 100,
                close: 100,
                volume: trades as i64,
                trades,
            },
        };
        let batch = Batch {
            restart: false,
            updates: vec![
                trade(1, 10),
                candle(0, 1),
                trade(2, 20),
                candle(0, 2),
                trade(3, minute),
                candle(minute, 1),
            ],
            ts_ns: 0,
        };
        let mut rounds = BTreeMap::new();
        collect(&mut rounds, &batch);
        let kept: Vec<_> = rounds[&SymbolId(0)]
            .candles
            .iter()
            .map(|(as_of, c)| (*as_of, c.start_ns, c.trades))
            .collect();
        assert_eq!(kept, [(2, 0, 2), (3, minute, 1)]);
    }
}
