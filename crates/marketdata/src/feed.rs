//! The server side: turns each command the engine accepted, with its events, into updates.
//!
//! The engine reports trades and cancellations but not which orders came to rest; the feed
//! works that out from the command itself: a GTC limit order (new, or moved to a new price)
//! rests with what neither trades nor cancellations took. The book reconstruction tests hold
//! this against the engine's own book.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use rialto_core::{
    Cancelled, Command, Engine, OrderId, OrderType, OwnedEvent, Side, SymbolId, SymbolSpec, Tif,
    Trade, UserId,
};

use crate::book::{L3Book, LevelChange};
use crate::candles::{Candle, Candles};
use crate::update::{L2Snapshot, L3Snapshot, Update};

/// How many recent trades each symbol keeps for queries.
pub const RECENT_TRADES: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolInfo {
    pub id: SymbolId,
    pub spec: SymbolSpec,
}

/// A best level: (price, qty), or none.
pub type Quote = Option<(i64, i64)>;
type Bbo = (Quote, Quote);

struct SymbolFeed {
    spec: SymbolSpec,
    book: L3Book,
    l3_seq: u64,
    l2_seq: u64,
    last_trade: u64,
    bbo: Bbo,
    candles: Candles,
    trades: VecDeque<Update>,
    traded: bool,
}

impl SymbolFeed {
    fn new(spec: SymbolSpec) -> SymbolFeed {
        SymbolFeed {
            spec,
            book: L3Book::new(),
            l3_seq: 0,
            l2_seq: 0,
            last_trade: 0,
            bbo: (None, None),
            candles: Candles::minutes(),
            trades: VecDeque::with_capacity(RECENT_TRADES),
            traded: false,
        }
    }
}

/// The order of the command being applied, as a taker: what traded and what was cancelled.
#[derive(Clone, Copy, Default)]
struct TakerTally {
    filled: i64,
    cancelled: i64,
}

#[derive(Default)]
pub struct Feed {
    symbols: Vec<SymbolFeed>,
    /// Resting orders: (user, order) -> (symbol, public order number).
    live: FxHashMap<(UserId, OrderId), (SymbolId, u64)>,
    next_order: u64,
    pending: Vec<OwnedEvent>,
    touched: Vec<(SymbolId, Side, i64)>,
    /// Symbols that traded in the command being applied.
    traded: Vec<SymbolId>,
    out: Vec<Update>,
    /// Events that did not fit the feed's book (never expected; tests check it stays 0).
    pub inconsistencies: u64,
}

impl Feed {
    pub fn new() -> Feed {
        Feed::default()
    }

    /// A feed that starts from the engine's current books, all sequences at 0.
    pub fn from_engine(engine: &Engine) -> Feed {
        let mut feed = Feed::new();
        let mut symbols = engine.symbols_by_name();
        symbols.sort_by_key(|(id, _)| *id);
        for (id, spec) in symbols {
            debug_assert_eq!(id.0 as usize, feed.symbols.len());
            let mut sym = SymbolFeed::new(spec);
            let (bids, asks) = engine.resting_orders(id);
            for o in bids.iter().chain(&asks) {
                feed.next_order += 1;
                let order = feed.next_order;
                sym.book
                    .add(order, o.side, o.price, o.remaining)
                    .expect("the engine's book is consistent");
                feed.live.insert((o.user, o.order), (id, order));
            }
            sym.bbo = (sym.book.best(Side::Buy), sym.book.best(Side::Sell));
            feed.symbols.push(sym);
        }
        feed
    }

    /// Records an event of the command being applied (only trades and cancellations matter).
    pub fn on_event(&mut self, event: &OwnedEvent) {
        if matches!(event, OwnedEvent::Trade(_) | OwnedEvent::Cancelled(_)) {
            self.pending.push(event.clone());
        }
    }

    /// Completes a command the engine accepted, whose events came before through
    /// [`Self::on_event`]. Its updates are then in [`Self::updates`].
    pub fn on_applied(&mut self, ts_ns: i64, cmd: &Command) {
        let events = std::mem::take(&mut self.pending);
        match *cmd {
            Command::AddSymbol(spec) => self.symbols.push(SymbolFeed::new(spec)),
            Command::Place(p) => {
                let tally = self.apply_events(ts_ns, (p.user, p.order), &events);
                let rests = p.order_type == Some(OrderType::Limit) && p.tif == Some(Tif::Gtc);
                let rest = p.qty - tally.filled - tally.cancelled;
                if let (true, Some(side), Some(price)) = (rests && rest > 0, p.side, p.price) {
                    self.next_order += 1;
                    self.rest(
                        p.symbol,
                        (p.user, p.order),
                        self.next_order,
                        side,
                        price,
                        rest,
                    );
                }
            }
            Command::Move { user, order, price } => {
                let key = (user, order);
                let Some((symbol, public)) = self.live.remove(&key) else {
                    self.inconsistencies += 1;
                    return;
                };
                let sym = &mut self.symbols[symbol.0 as usize];
                let before = *sym.book.order(public).expect("a live order is on its book");
                sym.l3_seq += 1;
                let seq = sym.l3_seq;
                let change = sym.book.delete(public).expect("just looked up");
                self.touch(symbol, change);
                self.out.push(Update::Deleted {
                    symbol,
                    seq,
                    order: public,
                });
                let tally = self.apply_events(ts_ns, key, &events);
                let rest = before.qty - tally.filled - tally.cancelled;
                if rest > 0 {
                    self.rest(symbol, key, public, before.side, price, rest);
                }
            }
            _ => {
                self.apply_events(ts_ns, (UserId::MIN, OrderId::MIN), &events);
            }
        }
        self.pending = events;
        self.pending.clear();
        self.finish_command();
    }

    /// Applies a command and its events in one call.
    pub fn apply(&mut self, ts_ns: i64, cmd: &Command, events: &[OwnedEvent]) {
        for e in events {
            self.on_event(e);
        }
        self.on_applied(ts_ns, cmd);
    }

    /// The updates produced since the last [`Self::clear_updates`].
    pub fn updates(&self) -> &[Update] {
        &self.out
    }

    /// Takes the updates produced so far.
    pub fn take_updates(&mut self) -> Vec<Update> {
        std::mem::take(&mut self.out)
    }

    pub fn clear_updates(&mut self) {
        self.out.clear();
    }

    fn rest(
        &mut self,
        symbol: SymbolId,
        key: (UserId, OrderId),
        public: u64,
        side: Side,
        price: i64,
        qty: i64,
    ) {
        let Some(sym) = self.symbols.get_mut(symbol.0 as usize) else {
            self.inconsistencies += 1;
            return;
        };
        let Ok(change) = sym.book.add(public, side, price, qty) else {
            self.inconsistencies += 1;
            return;
        };
        sym.l3_seq += 1;
        self.out.push(Update::Added {
            symbol,
            seq: sym.l3_seq,
            order: public,
            side,
            price,
            qty,
        });
        self.live.insert(key, (symbol, public));
        self.touch(symbol, change);
    }

    fn apply_events(
        &mut self,
        ts_ns: i64,
        taker: (UserId, OrderId),
        events: &[OwnedEvent],
    ) -> TakerTally {
        let mut tally = TakerTally::default();
        for event in events {
            match event {
                OwnedEvent::Trade(t) => {
                    if (t.taker_user, t.taker_order) == taker {
                        tally.filled += t.qty;
                    }
                    self.on_trade(ts_ns, t);
                }
                OwnedEvent::Cancelled(c) => {
                    let of_resting_order = self.on_cancelled(c);
                    tally.cancelled += if !of_resting_order && (c.user, c.order) == taker {
                        c.qty
                    } else {
                        0
                    };
                }
                _ => {}
            }
        }
        tally
    }

    fn on_trade(&mut self, ts_ns: i64, t: &Trade) {
        let Some(sym) = self.symbols.get_mut(t.symbol.0 as usize) else {
            self.inconsistencies += 1;
            return;
        };
        sym.last_trade += 1;
        let trade = sym.last_trade;
        let trade_update = Update::Trade {
            symbol: t.symbol,
            trade,
            ts_ns,
            price: t.price,
            qty: t.qty,
            taker_side: t.taker_side,
        };
        sym.candles.on_trade(ts_ns, t.price, t.qty);
        if !sym.traded {
            sym.traded = true;
            self.traded.push(t.symbol);
        }
        if sym.trades.len() == RECENT_TRADES {
            sym.trades.pop_front();
        }
        sym.trades.push_back(trade_update);
        let maker = (t.maker_user, t.maker_order);
        match self.live.get(&maker) {
            Some(&(symbol, public)) if symbol == t.symbol => match sym.book.take(public, t.qty) {
                Ok((change, left)) => {
                    sym.l3_seq += 1;
                    self.out.push(Update::Executed {
                        symbol,
                        seq: sym.l3_seq,
                        order: public,
                        qty: t.qty,
                        trade,
                    });
                    if left == 0 {
                        self.live.remove(&maker);
                    }
                    self.touch(symbol, change);
                }
                Err(_) => self.inconsistencies += 1,
            },
            _ => self.inconsistencies += 1,
        }
        self.out.push(trade_update);
    }

    /// A cancellation of a resting order changes the book (true); one of a taker's unrested
    /// part does not (false).
    fn on_cancelled(&mut self, c: &Cancelled) -> bool {
        let key = (c.user, c.order);
        let Some(&(symbol, public)) = self.live.get(&key) else {
            return false;
        };
        let sym = &mut self.symbols[symbol.0 as usize];
        match sym.book.take(public, c.qty) {
            Ok((change, left)) => {
                sym.l3_seq += 1;
                let seq = sym.l3_seq;
                self.out.push(if left == 0 {
                    self.live.remove(&key);
                    Update::Deleted {
                        symbol,
                        seq,
                        order: public,
                    }
                } else {
                    Update::Reduced {
                        symbol,
                        seq,
                        order: public,
                        qty: left,
                    }
                });
                self.touch(symbol, change);
            }
            Err(_) => self.inconsistencies += 1,
        }
        true
    }

    fn touch(&mut self, symbol: SymbolId, change: LevelChange) {
        self.touched.push((symbol, change.side, change.price));
    }

    /// After a command: one L2 update per level it changed, then the BBO and candle of each
    /// symbol it changed, if they moved.
    fn finish_command(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for &(symbol, side, price) in &touched {
            let sym = &mut self.symbols[symbol.0 as usize];
            sym.l2_seq += 1;
            self.out.push(Update::Level {
                symbol,
                seq: sym.l2_seq,
                side,
                price,
                qty: sym.book.level_qty(side, price),
            });
        }
        touched.dedup_by_key(|t| t.0);
        for &(symbol, _, _) in &touched {
            let sym = &mut self.symbols[symbol.0 as usize];
            let bbo = (sym.book.best(Side::Buy), sym.book.best(Side::Sell));
            if bbo != sym.bbo {
                sym.bbo = bbo;
                self.out.push(Update::Bbo {
                    symbol,
                    seq: sym.l2_seq,
                    bid: bbo.0,
                    ask: bbo.1,
                });
            }
        }
        touched.clear();
        self.touched = touched;
        for (i, sym) in self.symbols.iter_mut().enumerate() {
            if std::mem::take(&mut sym.traded) {
                let candle = *sym
                    .candles
                    .recent(1)
                    .first()
                    .expect("a trade made a candle");
                self.out.push(Update::Candle {
                    symbol: SymbolId(i as u32),
                    candle,
                });
            }
        }
    }

    // ----- queries ---------------------------------------------------------------------------

    pub fn symbols(&self) -> impl Iterator<Item = SymbolInfo> + '_ {
        self.symbols.iter().enumerate().map(|(i, s)| SymbolInfo {
            id: SymbolId(i as u32),
            spec: s.spec,
        })
    }

    pub fn symbol(&self, id: SymbolId) -> Option<SymbolInfo> {
        self.symbols
            .get(id.0 as usize)
            .map(|s| SymbolInfo { id, spec: s.spec })
    }

    pub fn symbol_id(&self, name: &str) -> Option<SymbolId> {
        self.symbols
            .iter()
            .position(|s| s.spec.symbol.as_str() == name)
            .map(|i| SymbolId(i as u32))
    }

    pub fn l2(&self, id: SymbolId, depth: usize) -> Option<L2Snapshot> {
        let s = self.symbols.get(id.0 as usize)?;
        Some(s.book.l2_snapshot(s.l2_seq, depth))
    }

    pub fn l3(&self, id: SymbolId) -> Option<L3Snapshot> {
        let s = self.symbols.get(id.0 as usize)?;
        Some(s.book.l3_snapshot(s.l3_seq))
    }

    /// (L2 sequence, best bid, best ask).
    pub fn bbo(&self, id: SymbolId) -> Option<(u64, Quote, Quote)> {
        let s = self.symbols.get(id.0 as usize)?;
        Some((s.l2_seq, s.bbo.0, s.bbo.1))
    }

    /// The id of the symbol's last trade (0 before any).
    pub fn last_trade(&self, id: SymbolId) -> Option<u64> {
        Some(self.symbols.get(id.0 as usize)?.last_trade)
    }

    /// The last `limit` trades, oldest first.
    pub fn recent_trades(&self, id: SymbolId, limit: usize) -> Option<Vec<Update>> {
        let s = self.symbols.get(id.0 as usize)?;
        let skip = s.trades.len().saturating_sub(limit);
        Some(s.trades.iter().skip(skip).copied().collect())
    }

    pub fn candles(&self, id: SymbolId, limit: usize) -> Option<Vec<Candle>> {
        Some(self.symbols.get(id.0 as usize)?.candles.recent(limit))
    }
}
