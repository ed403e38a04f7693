//! Turns the market data thread's batches into WebSocket stream messages: each message is
//! encoded once per channel and shared by every subscriber of that channel.
//!
//! Batches that arrive together are merged (a book diff carries the final total of each level
//! it names), so a burst of updates costs each subscriber one message per channel, not one per
//! update.
//!
//! The fan-out paces itself by its subscribers: a channel's next message waits (merging what
//! arrives meanwhile) until all but a few of its subscribers (one in [`STRAGGLERS_PER`], at
//! least one) have written the previous one to their socket, or [`MAX_HOLD`] has passed.
//! Under a load the sockets cannot take at one message per tick, messages grow instead of
//! queues, so latency stays that of one round of writes instead of growing with a backlog.
//! Stragglers do not hold the others back; one that falls a whole channel backlog behind, or
//! whose socket stops taking data, is cut off as a slow consumer (see `ws`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::Utf8Bytes;
use rialto_core::{Side, SymbolId};
use rialto_marketdata::feed::Quote;
use rialto_marketdata::{Candle, Update};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{AppState, json as j};
use crate::feed::Batch;

/// Messages a channel keeps for a subscriber that has not read them yet; one further behind
/// is a slow consumer.
const CHANNEL_BACKLOG: usize = 1024;
/// How long updates wait to be merged with the next ones when subscribers keep up.
const TICK: Duration = Duration::from_millis(1);
/// The longest updates wait for subscribers that have not written the channel's previous
/// message yet.
pub const MAX_HOLD: Duration = Duration::from_millis(250);
/// Of each this many subscribers of a channel, one (and always at least one) may still be
/// writing its previous message when the next one goes out: stragglers do not hold the
/// others back.
const STRAGGLERS_PER: usize = 100;

/// One stream message, encoded once and shared by every subscriber.
#[derive(Clone, Debug)]
pub struct Frame {
    pub text: Utf8Bytes,
    /// Counts the subscribers that have written it to their socket, for the fan-out's pacing
    /// (none: not paced).
    pub written: Option<Arc<AtomicUsize>>,
}

impl Frame {
    pub fn unpaced(text: Utf8Bytes) -> Frame {
        Frame {
            text,
            written: None,
        }
    }
}

/// A channel's outlet and what became of its last message.
struct Topic {
    sender: broadcast::Sender<Frame>,
    /// The last message: its write count, the subscribers it went to, when it went.
    last: Option<(Arc<AtomicUsize>, usize, Instant)>,
}

impl Topic {
    /// Whether the next message may go: nearly every subscriber of the last one wrote it,
    /// or it has waited long enough.
    fn ready(&self, now: Instant) -> bool {
        let Some((written, receivers, sent)) = &self.last else {
            return true;
        };
        let needed = receivers.saturating_sub((receivers / STRAGGLERS_PER).max(1));
        written.load(Ordering::Relaxed) >= needed || now.duration_since(*sent) >= MAX_HOLD
    }
}

/// Channels by name (`book.BTC-USD`), created when first subscribed.
#[derive(Default)]
pub struct Topics {
    topics: Mutex<HashMap<String, Topic>>,
}

/// Whether a channel could take a message now.
enum Outlet {
    /// Nobody listens: drop what it would carry.
    Unwanted,
    /// Its subscribers are still writing the last message: keep merging.
    Busy,
    Ready,
}

impl Topics {
    pub fn subscribe(&self, channel: &str) -> broadcast::Receiver<Frame> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics
            .entry(channel.to_string())
            .or_insert_with(|| Topic {
                sender: broadcast::channel(CHANNEL_BACKLOG).0,
                last: None,
            })
            .sender
            .subscribe()
    }

    fn outlet(&self, channel: &str, now: Instant) -> Outlet {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        match topics.get(channel) {
            Some(t) if t.sender.receiver_count() > 0 => {
                if t.ready(now) {
                    Outlet::Ready
                } else {
                    Outlet::Busy
                }
            }
            _ => Outlet::Unwanted,
        }
    }

    /// Sends a message to a channel's subscribers, counting their writes.
    fn send(&self, channel: &str, message: Value, now: Instant) {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let Some(topic) = topics.get_mut(channel) else {
            return;
        };
        let written = Arc::new(AtomicUsize::new(0));
        let frame = Frame {
            text: Utf8Bytes::from(message.to_string()),
            written: Some(written.clone()),
        };
        if let Ok(receivers) = topic.sender.send(frame) {
            topic.last = Some((written, receivers, now));
        }
    }

    /// Subscribers of one channel.
    pub fn subscribers(&self, channel: &str) -> usize {
        let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics.get(channel).map_or(0, |t| t.sender.receiver_count())
    }
}

/// A book diff being merged: first and last L2 sequence, the final total of each level, and
/// the sequencer time of the oldest command it carries.
struct BookDiff {
    first: u64,
    last: u64,
    levels: BTreeMap<(Side, i64), i64>,
    ts_ns: i64,
}

/// What one symbol's channels have yet to send.
#[derive(Default)]
struct SymbolRound {
    book: Option<BookDiff>,
    l3: Option<Vec<Update>>,
    trades: Option<Vec<Update>>,
    bbo: Option<(u64, Quote, Quote)>,
    candle: Option<Candle>,
}

impl SymbolRound {
    fn is_empty(&self) -> bool {
        self.book.is_none()
            && self.l3.is_none()
            && self.trades.is_none()
            && self.bbo.is_none()
            && self.candle.is_none()
    }
}

pub async fn run(state: Arc<AppState>, mut batches: broadcast::Receiver<Arc<Batch>>) {
    let mut rounds: BTreeMap<SymbolId, SymbolRound> = BTreeMap::new();
    loop {
        // Wait for a batch (or, with updates held back for busy channels, at most a tick),
        // then take whatever else arrives within a tick.
        let next = if rounds.is_empty() {
            Some(batches.recv().await)
        } else {
            tokio::select! {
                batch = batches.recv() => Some(batch),
                _ = tokio::time::sleep(TICK) => None,
            }
        };
        match next {
            Some(Ok(batch)) => {
                collect(&mut rounds, &batch);
                tokio::time::sleep(TICK).await;
            }
            Some(Err(broadcast::error::RecvError::Lagged(n))) => {
                // Subscribers will see the gap in the sequence numbers and resubscribe.
                tracing::warn!(batches = n, "WebSocket fan-out fell behind the feed");
            }
            Some(Err(broadcast::error::RecvError::Closed)) => return,
            None => {}
        }
        loop {
            match batches.try_recv() {
                Ok(batch) => collect(&mut rounds, &batch),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    tracing::warn!(batches = n, "WebSocket fan-out fell behind the feed");
                }
                Err(_) => break,
            }
        }
        publish(&state, &mut rounds);
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
                let diff = round.book.get_or_insert_with(|| BookDiff {
                    first: seq,
                    last: seq,
                    levels: BTreeMap::new(),
                    ts_ns: batch.ts_ns,
                });
                diff.last = seq;
                diff.levels.insert((side, price), qty);
            }
            Update::Bbo { seq, bid, ask, .. } => round.bbo = Some((seq, bid, ask)),
            Update::Candle { candle, .. } => round.candle = Some(candle),
            Update::Trade { .. } => round.trades.get_or_insert_default().push(*u),
            _ => round.l3.get_or_insert_default().push(*u),
        }
    }
}

/// Sends each channel's pending message if the channel may take it now; drops what no one
/// listens to; keeps the rest, to merge with what comes next.
fn publish(state: &AppState, rounds: &mut BTreeMap<SymbolId, SymbolRound>) {
    let names: HashMap<SymbolId, String> = {
        let feed = state.md.feed();
        rounds
            .keys()
            .filter_map(|&id| Some((id, feed.symbol(id)?.spec.symbol.as_str().to_string())))
            .collect()
    };
    let now = Instant::now();
    let topics = &state.topics;
    rounds.retain(|id, round| {
        let Some(name) = names.get(id) else {
            return false;
        };
        flush(topics, &format!("book.{name}"), &mut round.book, now, |ch, diff| {
            let side = |want: Side| {
                let levels: Vec<Value> = diff
                    .levels
                    .iter()
                    .filter(|((side, _), _)| *side == want)
                    .map(|(&(_, price), &qty)| json!([price, qty]))
                    .collect();
                Value::Array(levels)
            };
            json!({"ch": ch, "type": "diff", "first": diff.first, "last": diff.last, "ts_ns": diff.ts_ns, "bids": side(Side::Buy), "asks": side(Side::Sell)})
        });
        flush(topics, &format!("orders.{name}"), &mut round.l3, now, |ch, l3| {
            let updates: Vec<Value> = l3.iter().map(j::l3_update).collect();
            json!({"ch": ch, "type": "update", "updates": updates})
        });
        flush(topics, &format!("trades.{name}"), &mut round.trades, now, |ch, trades| {
            let trades: Vec<Value> = trades.iter().map(j::trade).collect();
            json!({"ch": ch, "type": "trades", "trades": trades})
        });
        flush(topics, &format!("bbo.{name}"), &mut round.bbo, now, |ch, (seq, bid, ask)| {
            j::bbo(ch, seq, bid, ask)
        });
        flush(topics, &format!("candles.{name}"), &mut round.candle, now, |ch, candle| {
            json!({"ch": ch, "type": "candle", "candle": j::candle(&candle)})
        });
        !round.is_empty()
    });
}

/// One channel's part of [`publish`]: `message` builds the message from what is pending.
fn flush<T>(
    topics: &Topics,
    channel: &str,
    pending: &mut Option<T>,
    now: Instant,
    message: impl FnOnce(&str, T) -> Value,
) {
    if pending.is_none() {
        return;
    }
    match topics.outlet(channel, now) {
        Outlet::Unwanted => *pending = None,
        Outlet::Busy => {}
        Outlet::Ready => {
            let data = pending.take().expect("checked above");
            topics.send(channel, message(channel, data), now);
        }
    }
}
