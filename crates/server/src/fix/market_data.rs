//! Market data over FIX: MarketDataRequest (V) subscriptions answered with a snapshot (W) and
//! then incremental refreshes (X) of the L2 book and the trades.
//!
//! FIX market data is one more consumer of the market data thread's feed (crate::feed), like
//! the WebSocket fan-out and the UDP feed: the engine is never asked for a book. This half
//! holds no reference to the feed: it is fed. While any subscription is open
//! ([`MarketData::wants_batches`]) the runtime holds a receiver of the feed's batches and hands
//! each to [`MarketData::apply`] (the gateway's runtime, [`Intake`], and the simulator alike),
//! and this half keeps its own copy of every subscribed symbol's L2 book, built from one
//! snapshot of the feed ([`BookSeed`], which the runtime reads when [`MarketData::unseeded`]
//! names the symbol) and the L2 updates after it:
//!
//! - A symbol's copy starts from the feed's snapshot as of L2 seq S, taken after the receiver
//!   exists, so every update after S is still to come; updates at or below S (which the
//!   receiver may still hold) are skipped, as docs/api.md's snapshot rule says. Each later
//!   update must be the next seq, or the copy is seeded again.
//! - Each subscription's W is read from that copy, between two rounds of batches, so the X
//!   messages that follow carry exactly what changed after it.
//! - Each turn of the gateway's loop hands over the batches that arrived, then
//!   [`MarketData::publish`] sends each subscription one X per symbol: the round's trades,
//!   then the difference between the best `depth` levels before and after the round. Every
//!   entry has an RptSeq (83) that rises by one per entry of that subscription (book and
//!   trades alike).
//!
//! Bounded: a subscription whose connection has more than `STALL_BYTES` unsent stops getting
//! X messages; once the client has read its backlog down to `RESUME_BYTES` it gets a fresh W
//! and the X messages resume from it. A receiver that falls behind the feed's broadcast queue
//! (thousands of batches) loses batches ([`MarketData::lost`]): every copy is seeded again and
//! every subscription gets a fresh W.

use std::collections::BTreeMap;
use std::sync::Arc;

use rialto_core::{Level, Side, SymbolId};
use rialto_fix::{Frame, app, tags};
use rialto_marketdata::{Feed, Update};
use tokio::sync::broadcast::{self, error::TryRecvError};

use super::FixAgent;
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
    /// A snapshot alone (SubscriptionRequestType 0): it ends with its W.
    pub once: bool,
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
    /// The copy is as of a snapshot of the feed (else it waits for one, and so do its
    /// subscriptions' W).
    seeded: bool,
}

/// One symbol's L2 book as the feed has it: what a copy starts from.
#[derive(Clone, Debug, Default)]
pub struct BookSeed {
    /// (price, total), in ticks and lots, in any order.
    pub bids: Vec<(i64, i64)>,
    pub asks: Vec<(i64, i64)>,
    /// The L2 seq it is as of.
    pub l2_seq: u64,
    /// The last trade id it includes.
    pub last_trade: u64,
}

impl BookSeed {
    /// Reads `symbol`'s book from the feed (the caller holds its lock, having subscribed to
    /// its batches first). A symbol the feed has not created yet is empty, its numbers at 0.
    pub fn of(feed: &Feed, symbol: SymbolId) -> BookSeed {
        let l2 = feed.l2(symbol, usize::MAX).unwrap_or_default();
        BookSeed {
            bids: l2.bids,
            asks: l2.asks,
            l2_seq: l2.seq,
            last_trade: feed.last_trade(symbol).unwrap_or(0),
        }
    }
}

impl SymbolBook {
    /// Starts the copy over from a snapshot of the feed.
    fn seed(&mut self, seed: BookSeed) {
        self.bids = seed.bids.into_iter().collect();
        self.asks = seed.asks.into_iter().collect();
        self.l2_seq = seed.l2_seq;
        self.last_trade = seed.last_trade;
        self.shown_bids = best(&self.bids, Side::Buy, MAX_DEPTH);
        self.shown_asks = best(&self.asks, Side::Sell, MAX_DEPTH);
        self.trades.clear();
        self.levels_changed = false;
        self.seeded = true;
    }

    /// The copy no longer follows the feed: it waits for a new seed, and every subscription
    /// for a fresh W.
    fn unseed(&mut self) {
        self.seeded = false;
        self.trades.clear();
        self.levels_changed = false;
        for s in &mut self.subscriptions {
            s.stalled = true;
        }
    }

    fn apply(&mut self, update: &Update) {
        if !self.seeded {
            return;
        }
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
                    self.unseed();
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
                    self.unseed();
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

/// The FIX gateway's market data: its subscriptions and its copies of their books, fed the
/// feed's batches and snapshots.
#[derive(Default)]
pub struct MarketData {
    books: BTreeMap<SymbolId, SymbolBook>,
}

impl MarketData {
    pub fn new() -> MarketData {
        MarketData::default()
    }

    /// Whether the feed's batches are wanted: while a subscription is open (nothing is kept
    /// for nobody).
    pub fn wants_batches(&self) -> bool {
        !self.books.is_empty()
    }

    /// The symbols whose copy waits for a snapshot of the feed ([`Self::seed`]).
    pub fn unseeded(&self) -> impl Iterator<Item = SymbolId> + '_ {
        self.books
            .iter()
            .filter(|(_, b)| !b.seeded)
            .map(|(&symbol, _)| symbol)
    }

    /// A snapshot of the feed for a symbol that waits for one.
    pub fn seed(&mut self, symbol: SymbolId, seed: BookSeed) {
        if let Some(book) = self.books.get_mut(&symbol) {
            book.seed(seed);
        }
    }

    /// One of the feed's batches, in order.
    pub fn apply(&mut self, batch: &Batch) {
        for update in &batch.updates {
            if let Some(book) = self.books.get_mut(&update.symbol()) {
                book.apply(update);
            }
        }
        if batch.restart {
            // The feed's numbers start again after this batch: no copy can follow them.
            self.lost();
        }
    }

    /// Batches were lost (the receiver fell behind): every copy is seeded again.
    pub fn lost(&mut self) {
        for book in self.books.values_mut() {
            book.unseed();
        }
    }

    /// Subscriptions open, on all symbols.
    pub fn subscriptions(&self) -> usize {
        self.books.values().map(|b| b.subscriptions.len()).sum()
    }

    /// Adds (or replaces, by slot and MDReqID) a subscription, and publishes its snapshot:
    /// at once from a copy that follows the feed, else once the copy is seeded.
    pub fn subscribe(&mut self, symbol: SymbolId, sub: Subscription, out: &mut Vec<Publish>) {
        let book = self.books.entry(symbol).or_default();
        book.subscriptions
            .retain(|s| !(s.slot == sub.slot && s.md_req_id == sub.md_req_id));
        let sub = Subscription {
            rpt_seq: 0,
            stalled: !book.seeded,
            ..sub
        };
        if book.seeded {
            out.push(snapshot_of(
                symbol,
                &book.shown_bids,
                &book.shown_asks,
                &sub,
            ));
        }
        book.subscriptions.push(sub);
    }

    /// A snapshot alone (SubscriptionRequestType 0): at once from a copy that follows the
    /// feed, else once a copy is seeded.
    pub fn snapshot_once(&mut self, symbol: SymbolId, sub: &Subscription, out: &mut Vec<Publish>) {
        let book = self.books.entry(symbol).or_default();
        if book.seeded {
            out.push(snapshot_of(symbol, &book.shown_bids, &book.shown_asks, sub));
        } else {
            book.subscriptions.push(Subscription {
                rpt_seq: 0,
                stalled: true,
                once: true,
                ..sub.clone()
            });
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
        found
    }

    /// Publishes what the batches handed over since the last call changed, and a fresh W to
    /// each subscription that waits for one (once its client has read its backlog).
    /// `backlog(slot)` is what the slot's connection has not sent yet.
    pub fn publish(&mut self, backlog: impl Fn(SlotId) -> usize, out: &mut Vec<Publish>) {
        for (&symbol, book) in self.books.iter_mut() {
            if book.seeded {
                publish_round(symbol, book, &backlog, out);
            }
        }
        self.books.retain(|_, b| !b.subscriptions.is_empty());
    }
}

/// The runtime's side of FIX market data: the receiver of the feed's batches, held while the
/// agent wants them, which hands the agent each batch and the snapshots its copies wait for.
/// The gateway's runtime (runtime.rs) and the simulator use it alike.
#[derive(Default)]
pub struct Intake {
    batches: Option<broadcast::Receiver<Arc<Batch>>>,
    /// The bell of the thread that serves the agent: the feed rings it after each batch
    /// while the receiver is held.
    bell: Option<Arc<Bell>>,
    seeds: Vec<SymbolId>,
}

impl Intake {
    pub fn new() -> Intake {
        Intake::default()
    }

    pub fn set_bell(&mut self, bell: Arc<Bell>) {
        self.bell = Some(bell);
    }

    /// Batches are waiting to be handed over, or copies wait for a snapshot.
    pub fn has_work(&self, agent: &FixAgent) -> bool {
        self.batches.as_ref().is_some_and(|b| !b.is_empty())
            || agent.unseeded_books().next().is_some()
    }

    /// Hands the batches that arrived (at most `BATCHES_PER_TURN`) and the snapshots wanted
    /// to the agent ([`FixAgent::on_market_data`], [`FixAgent::on_book_seed`]); the agent
    /// publishes what they changed at its next [`FixAgent::tick`]. Returns the batches handed
    /// over.
    pub fn serve(&mut self, feed: &feed::MarketData, agent: &mut FixAgent, now_ns: i64) -> usize {
        if !agent.wants_market_data() {
            if self.batches.take().is_some()
                && let Some(bell) = &self.bell
            {
                feed.stop_waking(bell);
            }
            return 0;
        }
        let batches = self.batches.get_or_insert_with(|| {
            // Before any snapshot is taken: every update after it arrives in a batch.
            if let Some(bell) = &self.bell {
                feed.wake_on_batches(bell);
            }
            feed.subscribe()
        });
        let mut taken = 0;
        while taken < BATCHES_PER_TURN {
            match batches.try_recv() {
                Ok(batch) => {
                    taken += 1;
                    agent.on_market_data(&batch, now_ns);
                }
                Err(TryRecvError::Lagged(n)) => {
                    tracing::warn!(batches = n, "FIX market data fell behind the feed");
                    agent.market_data_lost(now_ns);
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        self.seeds.clear();
        self.seeds.extend(agent.unseeded_books());
        if !self.seeds.is_empty() {
            // Under the feed's lock: batches are sent under it, so every update after the
            // snapshot is still to come in the receiver.
            let feed = feed.feed();
            for &symbol in &self.seeds {
                agent.on_book_seed(symbol, BookSeed::of(&feed, symbol), now_ns);
            }
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
        if s.once {
            continue; // its W is out: it ends (below)
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
    book.subscriptions.retain(|s| !s.once || s.stalled);
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
            seeded: true,
            ..SymbolBook::default()
        };
        book.apply(&level(5, 100, 1)); // at or below the copy's seq: already in it
        assert!(book.bids.is_empty() && !book.levels_changed);
        book.apply(&level(6, 100, 2));
        book.apply(&level(7, 99, 1));
        book.apply(&level(8, 100, 0));
        assert_eq!(book.bids, BTreeMap::from([(99, 1)]));
        assert!(book.levels_changed && book.seeded);
        book.apply(&level(10, 98, 1));
        assert!(
            !book.seeded,
            "seq 9 is missing: the copy waits for a new seed"
        );
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
