//! Market data over FIX: MarketDataRequest (V) subscriptions answered with a snapshot (W) and
//! then incremental refreshes (X) of the L2 book and the trades.
//!
//! The book side is computed off the engine's L2 snapshots: while a subscribed symbol may have
//! changed, the gateway asks the engine for its book (a query through the pipeline, never
//! journaled) at most once per `BOOK_POLL`, and publishes the difference from the last one.
//! Every subscriber therefore sees its snapshot followed by exact differences, each entry
//! stamped with an RptSeq (83) that rises by one per entry of that subscription (book and
//! trades alike), so a gap is visible.
//! Trades are published as they happen, from the engine's fill events.

use std::collections::{BTreeMap, HashMap};

use rialto_core::{Level, SymbolId};

/// The deepest book a subscription can ask for (0 means this much).
pub const MAX_DEPTH: usize = 100;

/// Which FIX session slot a subscription belongs to.
pub type SlotId = usize;

#[derive(Clone, Debug)]
pub struct Subscription {
    pub slot: SlotId,
    pub md_req_id: String,
    pub depth: usize,
    /// Bids and offers (in the snapshot, and in updates when `updates`).
    pub book: bool,
    pub trades: bool,
    /// Snapshot and updates (SubscriptionRequestType 1), or the snapshot alone (0).
    pub updates: bool,
    /// Waiting for its snapshot.
    pub fresh: bool,
    /// The RptSeq of the last entry sent.
    pub rpt_seq: u64,
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
        rpt_seq: u64,
    },
    Incremental {
        slot: SlotId,
        md_req_id: String,
        symbol: SymbolId,
        entries: Vec<Entry>,
    },
}

#[derive(Default)]
struct SymbolFeed {
    subscriptions: Vec<Subscription>,
    bids: Vec<Level>,
    asks: Vec<Level>,
    /// A book is known (the first snapshot came back).
    known: bool,
    /// The book may have changed since the last snapshot.
    dirty: bool,
    /// A book query is in flight.
    asked: bool,
}

#[derive(Default)]
pub struct MarketData {
    feeds: BTreeMap<SymbolId, SymbolFeed>,
}

impl MarketData {
    pub fn subscribe(&mut self, symbol: SymbolId, mut sub: Subscription) {
        let feed = self.feeds.entry(symbol).or_default();
        feed.subscriptions
            .retain(|s| !(s.slot == sub.slot && s.md_req_id == sub.md_req_id));
        sub.fresh = true;
        sub.rpt_seq = 0;
        feed.subscriptions.push(sub);
        feed.dirty = true;
    }

    /// Removes one subscription (by request id) or all of a session's (`None`).
    pub fn unsubscribe(&mut self, slot: SlotId, md_req_id: Option<&str>) -> bool {
        let mut found = false;
        for feed in self.feeds.values_mut() {
            feed.subscriptions.retain(|s| {
                let hit = s.slot == slot && md_req_id.is_none_or(|id| id == s.md_req_id);
                found |= hit;
                !hit
            });
        }
        self.feeds
            .retain(|_, f| !f.subscriptions.is_empty() || f.asked);
        found
    }

    /// Something happened in the market: every subscribed book may have changed.
    pub fn mark_all_dirty(&mut self) {
        for feed in self.feeds.values_mut() {
            feed.dirty = true;
        }
    }

    /// Symbols whose book should be asked for now; marks them asked.
    pub fn books_to_ask(&mut self, out: &mut Vec<SymbolId>) {
        for (&symbol, feed) in self.feeds.iter_mut() {
            let wants_book = feed
                .subscriptions
                .iter()
                .any(|s| (s.book && s.updates) || s.fresh);
            if feed.dirty && !feed.asked && wants_book {
                feed.dirty = false;
                feed.asked = true;
                out.push(symbol);
            }
        }
    }

    /// A public trade: published at once to the symbol's trade subscribers.
    pub fn on_trade(
        &mut self,
        symbol: SymbolId,
        price_ticks: i64,
        qty_lots: i64,
        out: &mut Vec<Publish>,
    ) {
        let Some(feed) = self.feeds.get_mut(&symbol) else {
            return;
        };
        feed.dirty = true;
        for s in feed
            .subscriptions
            .iter_mut()
            .filter(|s| s.trades && s.updates && !s.fresh)
        {
            s.rpt_seq += 1;
            let entry = Entry {
                action: b'0',
                entry_type: b'2',
                price_ticks,
                qty_lots,
                rpt_seq: s.rpt_seq,
            };
            out.push(Publish::Incremental {
                slot: s.slot,
                md_req_id: s.md_req_id.clone(),
                symbol,
                entries: vec![entry],
            });
        }
    }

    /// A book snapshot came back from the engine: publish the difference to the subscribers
    /// that have their snapshot, and snapshots to the new ones.
    pub fn on_book(
        &mut self,
        symbol: SymbolId,
        bids: &[Level],
        asks: &[Level],
        out: &mut Vec<Publish>,
    ) {
        let Some(feed) = self.feeds.get_mut(&symbol) else {
            return;
        };
        feed.asked = false;
        if feed.known {
            let mut diffs: HashMap<usize, Vec<Entry>> = HashMap::new();
            for s in feed
                .subscriptions
                .iter()
                .filter(|s| s.book && s.updates && !s.fresh)
            {
                if diffs.contains_key(&s.depth) {
                    continue;
                }
                let mut entries = Vec::new();
                diff_side(
                    b'0',
                    top(&feed.bids, s.depth),
                    top(bids, s.depth),
                    &mut entries,
                );
                diff_side(
                    b'1',
                    top(&feed.asks, s.depth),
                    top(asks, s.depth),
                    &mut entries,
                );
                diffs.insert(s.depth, entries);
            }
            for s in feed
                .subscriptions
                .iter_mut()
                .filter(|s| s.book && s.updates && !s.fresh)
            {
                let Some(entries) = diffs.get(&s.depth).filter(|e| !e.is_empty()) else {
                    continue;
                };
                let mut entries = entries.clone();
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
        feed.bids.clear();
        feed.bids.extend_from_slice(bids);
        feed.asks.clear();
        feed.asks.extend_from_slice(asks);
        feed.known = true;
        for s in feed.subscriptions.iter_mut().filter(|s| s.fresh) {
            s.fresh = false;
            let levels = |side| {
                if s.book {
                    top(side, s.depth).to_vec()
                } else {
                    Vec::new()
                }
            };
            out.push(Publish::Snapshot {
                slot: s.slot,
                md_req_id: s.md_req_id.clone(),
                symbol,
                bids: levels(bids),
                asks: levels(asks),
                rpt_seq: s.rpt_seq,
            });
        }
        // Snapshot-only requests (SubscriptionRequestType 0) end with their snapshot.
        feed.subscriptions.retain(|s| s.updates);
    }
}

fn top(levels: &[Level], depth: usize) -> &[Level] {
    let depth = if depth == 0 {
        MAX_DEPTH
    } else {
        depth.min(MAX_DEPTH)
    };
    &levels[..levels.len().min(depth)]
}

/// The entries that turn `old` into `new` (one side, best first).
fn diff_side(entry_type: u8, old: &[Level], new: &[Level], out: &mut Vec<Entry>) {
    let entry = |action, l: &Level| Entry {
        action,
        entry_type,
        price_ticks: l.price,
        qty_lots: l.qty,
        rpt_seq: 0,
    };
    for l in old {
        if !new.iter().any(|n| n.price == l.price) {
            out.push(entry(b'2', l));
        }
    }
    for l in new {
        match old.iter().find(|o| o.price == l.price) {
            None => out.push(entry(b'0', l)),
            Some(o) if o.qty != l.qty => out.push(entry(b'1', l)),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(price: i64, qty: i64) -> Level {
        Level { price, qty }
    }

    fn apply(book: &mut Vec<Level>, entries: &[Entry], entry_type: u8) {
        for e in entries.iter().filter(|e| e.entry_type == entry_type) {
            book.retain(|l| l.price != e.price_ticks);
            if e.action != b'2' {
                book.push(lv(e.price_ticks, e.qty_lots));
            }
        }
    }

    #[test]
    fn snapshot_then_differences_rebuild_the_book() {
        let mut md = MarketData::default();
        let sub = Subscription {
            slot: 1,
            md_req_id: "R".into(),
            depth: 0,
            book: true,
            trades: true,
            updates: true,
            fresh: true,
            rpt_seq: 0,
        };
        md.subscribe(SymbolId(7), sub);
        let mut asked = Vec::new();
        md.books_to_ask(&mut asked);
        assert_eq!(asked, vec![SymbolId(7)]);
        let mut out = Vec::new();
        md.on_book(
            SymbolId(7),
            &[lv(100, 5), lv(99, 1)],
            &[lv(101, 2)],
            &mut out,
        );
        let Publish::Snapshot { bids, asks, .. } = &out[0] else {
            panic!("a snapshot first")
        };
        let (mut bids, mut asks) = (bids.clone(), asks.clone());
        out.clear();
        md.mark_all_dirty();
        md.books_to_ask(&mut asked);
        let new_bids = [lv(100, 3), lv(98, 4)];
        let new_asks = [lv(101, 2), lv(102, 9)];
        md.on_book(SymbolId(7), &new_bids, &new_asks, &mut out);
        let Publish::Incremental { entries, .. } = &out[0] else {
            panic!("then differences")
        };
        let seqs: Vec<u64> = entries.iter().map(|e| e.rpt_seq).collect();
        assert_eq!(seqs, (1..=entries.len() as u64).collect::<Vec<_>>());
        apply(&mut bids, entries, b'0');
        apply(&mut asks, entries, b'1');
        bids.sort_by_key(|l| std::cmp::Reverse(l.price));
        asks.sort_by_key(|l| l.price);
        assert_eq!(bids, new_bids);
        assert_eq!(asks, new_asks);
    }
}
