//! The server side: turns each command the engine accepted, with its events, into updates.
//!
//! The engine reports trades and cancellations but not which orders came to rest; the feed
//! works that out from the command itself: a GTC limit order (new, or moved to a new price)
//! rests with what neither trades nor cancellations took. The book reconstruction tests hold
//! this against the engine's own book.

use std::collections::VecDeque;

use rialto_core::{Command, Engine, OrderId, OwnedEvent, Side, SymbolId, SymbolSpec, UserId};

use rialto_prefetch::prefetch_index;

use crate::book::{L3Book, LevelChange};
use crate::candles::{Candle, Candles};
use crate::input::Input;
use crate::live::{LiveOrders, Resting};
use crate::update::{L2Snapshot, L3Snapshot, Update};

/// How many commands ahead [`Feed::prefetch_upcoming`] loads each link of a command's chain:
/// the live order's slot, then its symbol's state, then its entry in the book. (A fourth
/// step for the order's level, at [10, 5, 2, 1], made no difference that the noise let
/// through.)
const FEED_PREFETCH_DISTANCES: [usize; 3] = [8, 3, 1];

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
            // The feed reaches its orders by slot (see `live`).
            book: L3Book::by_slot_only(),
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

/// A trade of the command being applied, whose order is the taker.
struct Fill {
    symbol: SymbolId,
    taker_side: Side,
    price: i64,
    qty: i64,
    maker: (UserId, OrderId),
}

#[derive(Default)]
pub struct Feed {
    symbols: Vec<SymbolFeed>,
    /// Resting orders by (user, order).
    live: LiveOrders,
    next_order: u64,
    /// Level changes of the command being applied: (symbol, side, price, total after).
    touched: Vec<(SymbolId, Side, i64, i64)>,
    /// Symbols that traded in the command being applied.
    traded: Vec<SymbolId>,
    out: Vec<Update>,
    /// Reused by [`Self::apply`].
    scratch: Vec<Input>,
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
                let (_, slot) = sym
                    .book
                    .add_slot(feed.next_order, o.side, o.price, o.remaining)
                    .expect("the engine's book is consistent");
                feed.live
                    .insert((o.user, o.order), Resting { symbol: id, slot });
            }
            sym.bbo = (sym.book.best(Side::Buy), sym.book.best(Side::Sell));
            feed.symbols.push(sym);
        }
        feed
    }

    /// Starts loading, without waiting, what the next commands will touch in the feed's own
    /// state, as [`Engine::prefetch_upcoming`] does in the engine's: `upcoming(n)` is the
    /// command `n` places after the one about to be applied (0). Worth it only on a venue too
    /// big for the CPU caches (when the engine's prefetching pays); it changes nothing.
    pub fn prefetch_upcoming<'c>(&self, upcoming: impl Fn(usize) -> Option<&'c Command>) {
        let [lookup, symbol, order] = FEED_PREFETCH_DISTANCES;
        let named = |cmd: &Command| match *cmd {
            Command::Move { user, order, .. }
            | Command::Cancel { user, order }
            | Command::Reduce { user, order, .. } => Some((user, order)),
            _ => None,
        };
        if let Some(cmd) = upcoming(lookup) {
            if let Some(key) = named(cmd) {
                self.live.prefetch(key);
            } else if let Command::Place(ref p) = *cmd {
                prefetch_index(&self.symbols, p.symbol.0 as usize);
            }
        }
        // The live slot is cached by now: the order's symbol, then its entry in the book.
        if let Some(r) = upcoming(symbol)
            .and_then(named)
            .and_then(|k| self.live.get(k))
        {
            prefetch_index(&self.symbols, r.symbol.0 as usize);
        }
        if let Some(r) = upcoming(order)
            .and_then(named)
            .and_then(|k| self.live.get(k))
            && let Some(sym) = self.symbols.get(r.symbol.0 as usize)
        {
            sym.book.prefetch_order(r.slot);
        }
    }

    /// Applies a command the engine accepted, with its events. Its updates are then in
    /// [`Self::updates`].
    pub fn apply(&mut self, ts_ns: i64, cmd: &Command, events: &[OwnedEvent]) {
        let mut inputs = std::mem::take(&mut self.scratch);
        crate::input::record(&mut inputs, ts_ns, cmd, events);
        self.apply_inputs(&inputs);
        inputs.clear();
        self.scratch = inputs;
    }

    /// Applies the records of whole commands ([`crate::input::record`]).
    pub fn apply_inputs(&mut self, inputs: &[Input]) {
        let mut start = 0;
        for (i, input) in inputs.iter().enumerate() {
            if input.ends_command() {
                self.apply_command(input, &inputs[start..i]);
                start = i + 1;
            }
        }
        if start != inputs.len() {
            // A command cut off without its end: never sent so by `record`.
            self.inconsistencies += 1;
        }
    }

    /// One command: its end record and the trades and cancellations before it.
    fn apply_command(&mut self, end: &Input, events: &[Input]) {
        match *end {
            Input::AddSymbol(ref spec) => self.symbols.push(SymbolFeed::new(**spec)),
            Input::Placed {
                ts_ns,
                symbol,
                side,
                user,
                order,
                price,
                qty,
            } => {
                let taken = self.apply_events(ts_ns, events);
                let rest = qty - taken;
                if rest > 0 {
                    self.next_order += 1;
                    self.rest(symbol, (user, order), self.next_order, side, price, rest);
                }
            }
            Input::Moved {
                ts_ns,
                user,
                order,
                price,
            } => {
                let key = (user, order);
                let Some(Resting { symbol, slot }) = self.live.remove(key) else {
                    self.inconsistencies += 1;
                    return;
                };
                let sym = &mut self.symbols[symbol.0 as usize];
                let before = *sym.book.order_at(slot);
                sym.l3_seq += 1;
                let seq = sym.l3_seq;
                let Ok(change) = sym.book.delete_slot(slot) else {
                    self.inconsistencies += 1;
                    return;
                };
                self.touch(symbol, change);
                self.out.push(Update::Deleted {
                    symbol,
                    seq,
                    order: before.order,
                });
                let taken = self.apply_events(ts_ns, events);
                let rest = before.qty - taken;
                if rest > 0 {
                    self.rest(symbol, key, before.order, before.side, price, rest);
                }
            }
            Input::Amended {
                ts_ns,
                user,
                order,
                price,
                qty,
                kept,
            } => self.apply_amend(ts_ns, (user, order), price, qty, kept, events),
            Input::Done { ts_ns } => {
                self.apply_events(ts_ns, events);
            }
            Input::Trade { .. } | Input::Cancelled { .. } => {
                self.inconsistencies += 1;
                return;
            }
        }
        self.finish_command();
    }

    /// An amend that left the order live: kept, it shrinks in place (an L3 reduce); lost, it
    /// leaves its level and its re-entry rests what its trades left, as a move's does.
    fn apply_amend(
        &mut self,
        ts_ns: i64,
        key: (UserId, OrderId),
        price: i64,
        qty: i64,
        kept: bool,
        events: &[Input],
    ) {
        let Some(Resting { symbol, slot }) = self.live.get(key) else {
            self.inconsistencies += 1;
            return;
        };
        let before = *self.symbols[symbol.0 as usize].book.order_at(slot);
        if kept {
            if !events.is_empty() || qty > before.qty {
                self.inconsistencies += 1; // a kept place never grows nor trades
                return;
            }
            if qty < before.qty {
                self.on_cancelled(key, before.qty - qty);
            }
            return;
        }
        self.live.remove(key);
        let sym = &mut self.symbols[symbol.0 as usize];
        sym.l3_seq += 1;
        let seq = sym.l3_seq;
        let Ok(change) = sym.book.delete_slot(slot) else {
            self.inconsistencies += 1;
            return;
        };
        self.touch(symbol, change);
        self.out.push(Update::Deleted {
            symbol,
            seq,
            order: before.order,
        });
        let taken = self.apply_events(ts_ns, events);
        let rest = qty - taken;
        if rest > 0 {
            self.rest(symbol, key, before.order, before.side, price, rest);
        }
    }

    /// The updates produced since the last [`Self::clear_updates`].
    pub fn updates(&self) -> &[Update] {
        &self.out
    }

    /// Takes the updates produced so far.
    pub fn take_updates(&mut self) -> Vec<Update> {
        let capacity = self.out.capacity();
        std::mem::replace(&mut self.out, Vec::with_capacity(capacity))
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
        let Ok((change, slot)) = sym.book.add_slot(public, side, price, qty) else {
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
        self.live.insert(key, Resting { symbol, slot });
        self.touch(symbol, change);
    }

    /// Applies a command's trades and cancellations; returns how much of the command's own
    /// order they took (all its trades, and cancellations of the part that never rested).
    fn apply_events(&mut self, ts_ns: i64, events: &[Input]) -> i64 {
        let mut taken = 0;
        for event in events {
            match *event {
                Input::Trade {
                    symbol,
                    taker_side,
                    price,
                    qty,
                    maker_user,
                    maker_order,
                } => {
                    taken += qty;
                    let trade = Fill {
                        symbol,
                        taker_side,
                        price,
                        qty,
                        maker: (maker_user, maker_order),
                    };
                    self.on_trade(ts_ns, &trade);
                }
                Input::Cancelled { user, order, qty } => {
                    if !self.on_cancelled((user, order), qty) {
                        taken += qty;
                    }
                }
                _ => self.inconsistencies += 1,
            }
        }
        taken
    }

    fn on_trade(&mut self, ts_ns: i64, t: &Fill) {
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
        match self.live.get(t.maker) {
            Some(Resting { symbol, slot }) if symbol == t.symbol => {
                let order = sym.book.order_at(slot).order;
                match sym.book.take_slot(slot, t.qty) {
                    Ok((change, left)) => {
                        sym.l3_seq += 1;
                        self.out.push(Update::Executed {
                            symbol,
                            seq: sym.l3_seq,
                            order,
                            qty: t.qty,
                            trade,
                        });
                        if left == 0 {
                            self.live.remove(t.maker);
                        }
                        self.touch(symbol, change);
                    }
                    Err(_) => self.inconsistencies += 1,
                }
            }
            _ => self.inconsistencies += 1,
        }
        self.out.push(trade_update);
    }

    /// A cancellation of a resting order changes the book (true); one of a taker's unrested
    /// part does not (false).
    fn on_cancelled(&mut self, key: (UserId, OrderId), qty: i64) -> bool {
        let Some(Resting { symbol, slot }) = self.live.get(key) else {
            return false;
        };
        let sym = &mut self.symbols[symbol.0 as usize];
        let order = sym.book.order_at(slot).order;
        match sym.book.take_slot(slot, qty) {
            Ok((change, left)) => {
                sym.l3_seq += 1;
                let seq = sym.l3_seq;
                self.out.push(if left == 0 {
                    self.live.remove(key);
                    Update::Deleted { symbol, seq, order }
                } else {
                    Update::Reduced {
                        symbol,
                        seq,
                        order,
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
        let LevelChange { side, price, total } = change;
        // A command changes a few levels, often one several times: keep each level's last
        // total.
        match self
            .touched
            .iter_mut()
            .find(|t| (t.0, t.1, t.2) == (symbol, side, price))
        {
            Some(t) => t.3 = total,
            None => self.touched.push((symbol, side, price, total)),
        }
    }

    /// After a command: one L2 update per level it changed, then the BBO and candle of each
    /// symbol it changed, if they moved.
    fn finish_command(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable_by_key(|t| (t.0, t.1, t.2));
        for &(symbol, side, price, qty) in &touched {
            let sym = &mut self.symbols[symbol.0 as usize];
            sym.l2_seq += 1;
            self.out.push(Update::Level {
                symbol,
                seq: sym.l2_seq,
                side,
                price,
                qty,
            });
        }
        let mut i = 0;
        while i < touched.len() {
            let symbol = touched[i].0;
            let sym = &mut self.symbols[symbol.0 as usize];
            // A side's best can only have moved if a level at or through it changed.
            let (mut bid_moved, mut ask_moved) = (false, false);
            while i < touched.len() && touched[i].0 == symbol {
                let (_, side, price, _) = touched[i];
                match side {
                    Side::Buy => bid_moved |= sym.bbo.0.is_none_or(|(best, _)| price >= best),
                    Side::Sell => ask_moved |= sym.bbo.1.is_none_or(|(best, _)| price <= best),
                }
                i += 1;
            }
            let bbo = (
                if bid_moved {
                    sym.book.best(Side::Buy)
                } else {
                    sym.bbo.0
                },
                if ask_moved {
                    sym.book.best(Side::Sell)
                } else {
                    sym.bbo.1
                },
            );
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
        self.traded.sort_unstable();
        for symbol in self.traded.drain(..) {
            let sym = &mut self.symbols[symbol.0 as usize];
            sym.traded = false;
            let candle = sym.candles.last().expect("a trade made a candle");
            self.out.push(Update::Candle { symbol, candle });
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
