//! Market data over FIX: MarketDataRequest (V) subscriptions answered with a snapshot (W) and
//! then incremental refreshes (X) of the L2 book and the trades.
//!
//! FIX market data is one more consumer of the market data thread's feed (crate::feed), like
//! the WebSocket fan-out and the UDP feed: the engine is never asked for a book. While any
//! subscription is open the gateway holds a receiver of the feed's batches (and the feed rings
//! the gateway's bell after each one), and keeps its own copy of every subscribed symbol's L2
//! book, built from one snapshot of the feed and the L2 updates after it:
//!
//! - A symbol's copy starts from the feed's snapshot as of L2 seq S, taken after the receiver
//!   exists, so every update after S is still to come; updates at or below S (which the
//!   receiver may still hold) are skipped, as docs/api.md's snapshot rule says. Each later
//!   update must be the next seq, or the copy is rebuilt.
//! - Each subscription's W is read from that copy, between two rounds of batches, so the X
//!   messages that follow carry exactly what changed after it.
//! - Each turn of the gateway's loop takes the batches that arrived and sends each
//!   subscription one X per symbol: the round's trades, then the difference between the best
//!   `depth` levels before and after the round. Every entry has an RptSeq (83) that rises by
//!   one per entry of that subscription (book and trades alike).
//!
//! Bounded: a subscription whose connection has more than `STALL_BYTES` unsent stops getting
//! X messages; once the client has read its backlog down to `RESUME_BYTES` it gets a fresh W
//! and the X messages resume from it. A receiver that falls behind the feed's broadcast queue
//! (thousands of batches) loses batches: every copy is rebuilt and every subscription gets a
//! fresh W.

use std::collections::BTreeMap;
use std::sync::Arc;

use rialto_core::{Level, Side, SymbolId};
use rialto_fix::{Frame, app, tags};
use rialto_marketdata::Update;
use tokio::sync::broadcast::{self, error::TryRecvError};

use crate::feed::{self, Batch};
use crate::idle::Bell;

/// The deepest book a subscription can ask for (0 means this much).
pub const MAX_DEPTH: usize = 100;
/// A subscription whose connection has this much unsent stops getting updates...
pub const STALL_BYTES: usize = 1 << 20;
/// ...until the client has read it down to this, when it gets a fresh snapshot.
pub const RESUME_BYTES: usize = 64 << 10;
/// Batches taken per turn of the gateway's loop: orders never wait behind a long backlog.
const BATCHES_PER_TURN: usize = 256;
/// MDReqRejReason (281) 8: unsupported MDEntryType.
pub const UNSUPPORTED_ENTRY_TYPE: u8 = b'8';

/// Which FIX session slot a subscription belongs to.
pub type SlotId = usize;

/// The MDEntryTypes (269) a request asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryTypes {
    pub bids: bool,
    pub offers: bool,
    pub trades: bool,
}

impl EntryTypes {
    fn book(self) -> bool {
        self.bids || self.offers
    }

    fn wants(self, entry_type: u8) -> bool {
        match entry_type {
            b'0' => self.bids,
            b'1' => self.offers,
            _ => self.trades,
        }
    }
}

/// A MarketDataRequest as the gateway takes it (decoded on the stack and handled at once:
/// never stored, so its size does not matter).
#[allow(clippy::large_enum_variant)]
pub enum Request<'a> {
    Valid(app::MarketDataRequest<'a>, EntryTypes),
    /// It names an MDEntryType the venue does not publish: answered with a
    /// MarketDataRequestReject (MDReqRejReason 8), not a session Reject.
    UnsupportedEntryType {
        md_req_id: &'a [u8],
    },
}

/// Decodes a MarketDataRequest, reading its MDEntryTypes one by one (the codec merges bids and
/// offers, and rejects types it does not know as a session-level error).
pub fn decode_request<'a>(frame: &Frame<'a>) -> Result<Request<'a>, app::Invalid> {
    let mut types = EntryTypes::default();
    let mut unsupported = false;
    for field in frame.fields().filter_map(Result::ok) {
        if field.tag == tags::MD_ENTRY_TYPE {
            match field.value {
                b"0" => types.bids = true,
                b"1" => types.offers = true,
                b"2" => types.trades = true,
                _ => unsupported = true,
            }
        }
    }
    if unsupported && frame.get(tags::SUBSCRIPTION_REQUEST_TYPE) != Some(b"2") {
        let md_req_id = frame.get(tags::MD_REQ_ID).ok_or(app::Invalid {
            reason: app::reject_reason::REQUIRED_TAG_MISSING,
            ref_tag: tags::MD_REQ_ID,
            text: "MDReqID is required",
        })?;
        return Ok(Request::UnsupportedEntryType { md_req_id });
    }
    app::MarketDataRequest::decode(frame).map(|m| Request::Valid(m, types))
}

#[derive(Clone, Debug)]
pub struct Subscription {
    pub slot: SlotId,
    pub md_req_id: String,
    pub depth: usize,
    pub types: EntryTypes,
    /// The RptSeq of the last entry sent.
    pub rpt_seq: u64,
    /// Its client reads too slowly (or its W must be sent again): no updates until a new W.
    pub stalled: bool,
}

/// One update entry of an incremental refresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// MDUpdateAction: 0 new, 1 change, 2 delete.
    pub action: u8,
    /// MDEntryType: 0 bid, 1 offer, 2 trade.
    pub entry_type: u8,
    pub price_ticks: i64,
    pub qty_lots: i64,
    pub rpt_seq: u64,
}

/// What to send.
#[derive(Clone, Debug)]
pub enum Publish {
    Snapshot {
        slot: SlotId,
        md_req_id: String,
        symbol: SymbolId,
        bids: Vec<Level>,
        asks: Vec<Level>,
    },
    Incremental {
        slot: SlotId,
        md_req_id: String,
        symbol: SymbolId,
        entries: Vec<Entry>,
    },
}

impl Publish {
    pub fn slot(&self) -> SlotId {
        match *self {
            Publish::Snapshot { slot, .. } | Publish::Incremental { slot, .. } => slot,
        }
    }

    pub fn symbol(&self) -> SymbolId {
        match *self {
            Publish::Snapshot { symbol, .. } | Publish::Incremental { symbol, .. } => symbol,
        }
    }
}

/// The gateway's copy of one subscribed symbol's L2 book, and its subscriptions.
#[derive(Default)]
struct SymbolBook {
    subscriptions: Vec<Subscription>,
    /// Price → total, in ticks and lots.
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
    /// The L2 seq the copy is as of: updates at or below it are in it.
    l2_seq: u64,
    /// The last trade id seen: trades at or below it are older than the copy.
    last_trade: u64,
    /// The best `MAX_DEPTH` levels of each side as the subscriptions last saw them.
    shown_bids: Vec<Level>,
    shown_asks: Vec<Level>,
    /// This round: trades (price, qty) in order, and whether a level changed.
    trades: Vec<(i64, i64)>,
    levels_changed: bool,
    /// An update did not follow the copy: rebuild it from the feed.
    broken: bool,
}

impl SymbolBook {
    /// Starts the copy over from the feed (under its lock).
    fn seed(&mut self, feed: &feed::MarketData, symbol: SymbolId) {
        let (l2, last_trade) = {
            let feed = feed.feed();
            // A symbol the feed has not created yet is empty, its numbers at 0.
            (
                feed.l2(symbol, usize::MAX).unwrap_or_default(),
                feed.last_trade(symbol).unwrap_or(0),
            )
        };
        self.bids = l2.bids.into_iter().collect();
        self.asks = l2.asks.into_iter().collect();
        self.l2_seq = l2.seq;
        self.last_trade = last_trade;
        self.shown_bids = best(&self.bids, Side::Buy, MAX_DEPTH);
        self.shown_asks = best(&self.asks, Side::Sell, MAX_DEPTH);
        self.trades.clear();
        self.levels_changed = false;
        self.broken = false;
    }

    fn apply(&mut self, update: &Update) {
        match *update {
            Update::Level {
                seq,
                side,
                price,
                qty,
                ..
            } => {
                if seq <= self.l2_seq {
                    return; // already in the copy
                }
                if seq != self.l2_seq + 1 {
                    self.broken = true;
                    return;
                }
                self.l2_seq = seq;
                let levels = match side {
                    Side::Buy => &mut self.bids,
                    Side::Sell => &mut self.asks,
                };
                if qty > 0 {
                    levels.insert(price, qty);
                } else {
                    levels.remove(&price);
                }
                self.levels_changed = true;
            }
            // A phase change takes an L2 number (FIX market data does not carry phases).
            Update::Phase { seq, .. } if seq > self.l2_seq => {
                if seq != self.l2_seq + 1 {
                    self.broken = true;
                    return;
                }
                self.l2_seq = seq;
            }
            Update::Trade {
                trade, price, qty, ..
            } if trade > self.last_trade => {
                self.last_trade = trade;
                self.trades.push((price, qty));
            }
            _ => {}
        }
    }
}

/// The FIX gateway's market data: its subscriptions and the feed they are served from.
pub struct MarketData {
    feed: Arc<feed::MarketData>,
    /// The gateway's bell, rung by the feed after each batch while `batches` is held.
    bell: Option<Arc<Bell>>,
    /// The feed's batches: held only while a subscription is open (nothing is kept for
    /// nobody).
    batches: Option<broadcast::Receiver<Arc<Batch>>>,
    books: BTreeMap<SymbolId, SymbolBook>,
}

impl MarketData {
    pub fn new(feed: Arc<feed::MarketData>) -> MarketData {
        MarketData {
            feed,
            bell: None,
            batches: None,
            books: BTreeMap::new(),
        }
    }

    /// The bell of the thread that calls [`Self::pump`].
    pub fn set_bell(&mut self, bell: Arc<Bell>) {
        self.bell = Some(bell);
    }

    /// Batches are waiting to be pumped.
    pub fn has_batches(&self) -> bool {
        self.batches.as_ref().is_some_and(|b| !b.is_empty())
    }

    /// Subscriptions open, on all symbols.
    pub fn subscriptions(&self) -> usize {
        self.books.values().map(|b| b.subscriptions.len()).sum()
    }

    /// Adds (or replaces, by slot and MDReqID) a subscription, and publishes its snapshot.
    pub fn subscribe(&mut self, symbol: SymbolId, sub: Subscription, out: &mut Vec<Publish>) {
        if self.batches.is_none() {
            // Before any snapshot is taken: every update after it arrives in a batch.
            self.batches = Some(self.feed.subscribe());
            if let Some(bell) = &self.bell {
                self.feed.wake_on_batches(bell);
            }
        }
        let book = self.books.entry(symbol).or_insert_with(|| {
            let mut book = SymbolBook::default();
            book.seed(&self.feed, symbol);
            book
        });
        book.subscriptions
            .retain(|s| !(s.slot == sub.slot && s.md_req_id == sub.md_req_id));
        let sub = Subscription {
            rpt_seq: 0,
            stalled: false,
            ..sub
        };
        out.push(snapshot_of(
            symbol,
            &book.shown_bids,
            &book.shown_asks,
            &sub,
        ));
        book.subscriptions.push(sub);
    }

    /// A snapshot alone (SubscriptionRequestType 0).
    pub fn snapshot_once(&mut self, symbol: SymbolId, sub: &Subscription, out: &mut Vec<Publish>) {
        match self.books.get(&symbol) {
            Some(book) => out.push(snapshot_of(symbol, &book.shown_bids, &book.shown_asks, sub)),
            None => {
                let mut book = SymbolBook::default();
                book.seed(&self.feed, symbol);
                out.push(snapshot_of(symbol, &book.shown_bids, &book.shown_asks, sub));
            }
        }
    }

    /// Removes one subscription (by request id) or all of a session's (`None`).
    pub fn unsubscribe(&mut self, slot: SlotId, md_req_id: Option<&str>) -> bool {
        let mut found = false;
        for book in self.books.values_mut() {
            book.subscriptions.retain(|s| {
                let hit = s.slot == slot && md_req_id.is_none_or(|id| id == s.md_req_id);
                found |= hit;
                !hit
            });
        }
        self.books.retain(|_, b| !b.subscriptions.is_empty());
        if self.books.is_empty()
            && self.batches.take().is_some()
            && let Some(bell) = &self.bell
        {
            self.feed.stop_waking(bell);
        }
        found
    }

    /// Takes the batches that arrived and publishes what they changed. `backlog(slot)` is
    /// what the slot's connection has not sent yet. Returns the batches taken.
    pub fn pump(&mut self, backlog: impl Fn(SlotId) -> usize, out: &mut Vec<Publish>) -> usize {
        let Some(batches) = &mut self.batches else {
            return 0;
        };
        let mut taken = 0;
        let mut lagged = false;
        while taken < BATCHES_PER_TURN {
            match batches.try_recv() {
                Ok(batch) => {
                    taken += 1;
                    for update in &batch.updates {
                        if let Some(book) = self.books.get_mut(&update.symbol()) {
                            book.apply(update);
                        }
                    }
                }
                Err(TryRecvError::Lagged(n)) => {
                    tracing::warn!(batches = n, "FIX market data fell behind the feed");
                    lagged = true;
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        for (&symbol, book) in self.books.iter_mut() {
            if lagged || book.broken {
                // Batches were lost: start over from the feed, with a fresh W for everyone.
                book.seed(&self.feed, symbol);
                for s in &mut book.subscriptions {
                    s.stalled = true;
                }
            }
            publish_round(symbol, book, &backlog, out);
        }
        taken
    }
}

/// The round's trades and book changes, to each subscription of one symbol; and a fresh W to
/// each stalled subscription whose client has caught up.
fn publish_round(
    symbol: SymbolId,
    book: &mut SymbolBook,
    backlog: &impl Fn(SlotId) -> usize,
    out: &mut Vec<Publish>,
) {
    let trades = std::mem::take(&mut book.trades);
    let mut changes: Vec<(usize, Vec<Entry>)> = Vec::new();
    if book.levels_changed {
        book.levels_changed = false;
        let bids = best(&book.bids, Side::Buy, MAX_DEPTH);
        let asks = best(&book.asks, Side::Sell, MAX_DEPTH);
        // One difference per depth asked for (most subscriptions ask for the same few).
        for s in &book.subscriptions {
            let depth = depth_of(s.depth);
            if s.types.book() && !changes.iter().any(|(d, _)| *d == depth) {
                let mut entries = Vec::new();
                diff_side(b'0', &book.shown_bids, &bids, depth, &mut entries);
                diff_side(b'1', &book.shown_asks, &asks, depth, &mut entries);
                changes.push((depth, entries));
            }
        }
        book.shown_bids = bids;
        book.shown_asks = asks;
    }
    for s in &mut book.subscriptions {
        if s.stalled {
            if backlog(s.slot) <= RESUME_BYTES {
                s.stalled = false;
                out.push(snapshot_of(symbol, &book.shown_bids, &book.shown_asks, s));
            }
            continue;
        }
        let mut entries: Vec<Entry> = Vec::new();
        if s.types.trades {
            entries.extend(trades.iter().map(|&(price, qty)| Entry {
                action: b'0',
                entry_type: b'2',
                price_ticks: price,
                qty_lots: qty,
                rpt_seq: 0,
            }));
        }
        if let Some((_, book_entries)) = changes.iter().find(|(d, _)| *d == depth_of(s.depth)) {
            entries.extend(book_entries.iter().filter(|e| s.types.wants(e.entry_type)));
        }
        if entries.is_empty() {
            continue;
        }
        if backlog(s.slot) > STALL_BYTES {
            s.stalled = true;
            tracing::debug!(slot = s.slot, "FIX market data paused for a slow reader");
            continue;
        }
        for e in &mut entries {
            s.rpt_seq += 1;
            e.rpt_seq = s.rpt_seq;
        }
        out.push(Publish::Incremental {
            slot: s.slot,
            md_req_id: s.md_req_id.clone(),
            symbol,
            entries,
        });
    }
}

/// A subscription's W: the best `depth` levels of the sides it asked for.
fn snapshot_of(
    symbol: SymbolId,
    shown_bids: &[Level],
    shown_asks: &[Level],
    sub: &Subscription,
) -> Publish {
    let depth = depth_of(sub.depth);
    let side = |wanted: bool, shown: &[Level]| match wanted {
        true => shown[..shown.len().min(depth)].to_vec(),
        false => Vec::new(),
    };
    Publish::Snapshot {
        slot: sub.slot,
        md_req_id: sub.md_req_id.clone(),
        symbol,
        bids: side(sub.types.bids, shown_bids),
        asks: side(sub.types.offers, shown_asks),
    }
}

/// MarketDepth as levels: 0 is the full book, up to `MAX_DEPTH`.
fn depth_of(depth: usize) -> usize {
    if depth == 0 {
        MAX_DEPTH
    } else {
        depth.min(MAX_DEPTH)
    }
}

/// The best `depth` levels of one side, best first.
fn best(levels: &BTreeMap<i64, i64>, side: Side, depth: usize) -> Vec<Level> {
    let level = |(&price, &qty): (&i64, &i64)| Level { price, qty };
    match side {
        Side::Buy => levels.iter().rev().take(depth).map(level).collect(),
        Side::Sell => levels.iter().take(depth).map(level).collect(),
    }
}

/// The entries that turn the best `depth` of `old` into the best `depth` of `new` (one side,
/// best first): deletes first, so that a client's book never holds more than `depth` levels.
fn diff_side(entry_type: u8, old: &[Level], new: &[Level], depth: usize, out: &mut Vec<Entry>) {
    let old = &old[..old.len().min(depth)];
    let new = &new[..new.len().min(depth)];
    // Both sides are sorted best first; as a key that rises along the list:
    let key = |l: &Level| {
        if entry_type == b'0' {
            -l.price
        } else {
            l.price
        }
    };
    let entry = |action, l: &Level| Entry {
        action,
        entry_type,
        price_ticks: l.price,
        qty_lots: l.qty,
        rpt_seq: 0,
    };
    let deletes_from = out.len();
    let mut changes = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if key(o) == key(n) => {
                if o.qty != n.qty {
                    changes.push(entry(b'1', n));
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if key(o) < key(n) => {
                out.push(entry(b'2', o));
                i += 1;
            }
            (Some(o), None) => {
                out.push(entry(b'2', o));
                i += 1;
            }
            (_, Some(n)) => {
                changes.push(entry(b'0', n));
                j += 1;
            }
            (None, None) => unreachable!("the loop stops when both are done"),
        }
    }
    debug_assert!(out[deletes_from..].iter().all(|e| e.action == b'2'));
    out.extend(changes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(price: i64, qty: i64) -> Level {
        Level { price, qty }
    }

    /// Applies entries of one side to a book kept best first.
    fn apply(book: &mut Vec<Level>, entries: &[Entry], entry_type: u8) {
        for e in entries.iter().filter(|e| e.entry_type == entry_type) {
            let present = book.iter().any(|l| l.price == e.price_ticks);
            match e.action {
                b'0' => assert!(!present, "new level {} already there", e.price_ticks),
                _ => assert!(present, "level {} is not there", e.price_ticks),
            }
            book.retain(|l| l.price != e.price_ticks);
            if e.action != b'2' {
                book.push(lv(e.price_ticks, e.qty_lots));
            }
        }
        match entry_type {
            b'0' => book.sort_by_key(|l| std::cmp::Reverse(l.price)),
            _ => book.sort_by_key(|l| l.price),
        }
    }

    #[test]
    fn differences_turn_the_old_best_levels_into_the_new() {
        let old_bids = [lv(100, 5), lv(99, 1), lv(97, 2)];
        let new_bids = [lv(101, 1), lv(100, 3), lv(98, 4), lv(97, 2)];
        let old_asks = [lv(102, 2), lv(103, 1)];
        let new_asks = [lv(103, 1), lv(104, 9)];
        for depth in [1, 2, 3, MAX_DEPTH] {
            let mut entries = Vec::new();
            diff_side(b'0', &old_bids, &new_bids, depth, &mut entries);
            diff_side(b'1', &old_asks, &new_asks, depth, &mut entries);
            let mut bids = old_bids[..depth.min(3)].to_vec();
            let mut asks = old_asks[..depth.min(2)].to_vec();
            apply(&mut bids, &entries, b'0');
            apply(&mut asks, &entries, b'1');
            assert_eq!(bids, new_bids[..depth.min(4)], "depth {depth}");
            assert_eq!(asks, new_asks[..depth.min(2)], "depth {depth}");
            // Deletes come before the rest, side by side.
            for side in [b'0', b'1'] {
                let actions: Vec<u8> = entries
                    .iter()
                    .filter(|e| e.entry_type == side)
                    .map(|e| e.action)
                    .collect();
                let first_other = actions.iter().position(|&a| a != b'2');
                assert!(first_other.is_none_or(|i| actions[i..].iter().all(|&a| a != b'2')));
            }
        }
    }

    #[test]
    fn the_copy_skips_what_it_holds_and_breaks_on_a_gap() {
        let level = |seq, price, qty| Update::Level {
            symbol: SymbolId(0),
            seq,
            side: Side::Buy,
            price,
            qty,
        };
        let mut book = SymbolBook {
            l2_seq: 5,
            ..SymbolBook::default()
        };
        book.apply(&level(5, 100, 1)); // at or below the copy's seq: already in it
        assert!(book.bids.is_empty() && !book.levels_changed);
        book.apply(&level(6, 100, 2));
        book.apply(&level(7, 99, 1));
        book.apply(&level(8, 100, 0));
        assert_eq!(book.bids, BTreeMap::from([(99, 1)]));
        assert!(book.levels_changed && !book.broken);
        book.apply(&level(10, 98, 1));
        assert!(book.broken, "seq 9 is missing");
    }

    #[test]
    fn entry_types_are_read_one_by_one() {
        let request = |types: &str| {
            let mut bytes = Vec::new();
            let mut w = rialto_fix::MessageWriter::begin(&mut bytes, b"FIX.4.4", b"V");
            w.str(tags::MD_REQ_ID, b"R1")
                .str(tags::SUBSCRIPTION_REQUEST_TYPE, b"1")
                .uint(tags::MARKET_DEPTH, 0)
                .uint(tags::NO_MD_ENTRY_TYPES, types.len() as u64);
            for t in types.bytes() {
                w.char(tags::MD_ENTRY_TYPE, t);
            }
            w.uint(tags::NO_RELATED_SYM, 1)
                .str(tags::SYMBOL, b"BTC-USD");
            w.finish();
            bytes
        };
        let decoded = |types: &str| {
            let bytes = request(types);
            let (frame, _) = rialto_fix::next_frame(&bytes, 4096).unwrap().unwrap();
            match decode_request(&frame).unwrap() {
                Request::Valid(_, types) => Some(types),
                Request::UnsupportedEntryType { md_req_id } => {
                    assert_eq!(md_req_id, b"R1");
                    None
                }
            }
        };
        let only = |bids, offers, trades| {
            Some(EntryTypes {
                bids,
                offers,
                trades,
            })
        };
        assert_eq!(decoded("0"), only(true, false, false));
        assert_eq!(decoded("1"), only(false, true, false));
        assert_eq!(decoded("2"), only(false, false, true));
        assert_eq!(decoded("012"), only(true, true, true));
        assert_eq!(decoded("04"), None, "4 (opening price) is not published");
    }
}
