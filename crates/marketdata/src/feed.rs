//! The server side: turns each command the engine applied, with its events, into updates.
//!
//! The engine reports trades and cancellations but not which orders came to rest, nor how an
//! iceberg's slices move; the feed works that out (see [`crate::input`]): the command's
//! incoming order, and each stop it triggers, rests with what neither trades nor
//! cancellations took of it, showing an iceberg's slice; a used-up slice with quantity hidden
//! behind it leaves and comes back at the back of its level. The book reconstruction and
//! differential tests hold this against the engine's own book.

use std::collections::VecDeque;

use rialto_core::{
    Command, Engine, OrderId, OrderType, OwnedEvent, Phase, Side, SymbolId, SymbolSpec, UserId,
};

use rialto_prefetch::prefetch_index;
use rustc_hash::FxHashMap;

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

type Key = (UserId, OrderId);

struct SymbolFeed {
    spec: SymbolSpec,
    book: L3Book,
    phase: Phase,
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
            phase: Phase::Continuous,
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

/// A resting iceberg's display quantity and what it hides (the book holds its slice).
#[derive(Clone, Copy, Debug)]
struct Iceberg {
    display: i64,
    hidden: i64,
}

/// A stop or stop-limit order waiting outside the book.
#[derive(Clone, Copy, Debug)]
struct PendingStop {
    symbol: SymbolId,
    side: Side,
    /// A stop-limit (it may rest once triggered); a stop enters as a market order.
    limit: bool,
    price: i64,
    qty: i64,
}

/// The order the command is walking the book with: new, moved or re-entered, or a triggered
/// stop. What is left of it when it is done rests if it may.
#[derive(Clone, Copy, Debug)]
struct Incoming {
    key: Key,
    symbol: SymbolId,
    side: Side,
    price: i64,
    remaining: i64,
    display: i64,
    rests: bool,
    /// Its public number when it had one on the book (a move or an amend keeps it).
    public: Option<u64>,
}

#[derive(Default)]
pub struct Feed {
    symbols: Vec<SymbolFeed>,
    /// Resting orders by (user, order).
    live: LiveOrders,
    /// Resting icebergs by (user, order), with nothing hidden too: only those (an ordinary
    /// order is never looked up while there is none).
    icebergs: FxHashMap<Key, Iceberg>,
    /// Stop orders waiting for their trigger.
    stops: FxHashMap<Key, PendingStop>,
    incoming: Option<Incoming>,
    next_order: u64,
    /// Level changes of the command being applied: (symbol, side, price, total after).
    touched: Vec<(SymbolId, Side, i64, i64)>,
    /// Phase changes of the command being applied.
    phases: Vec<(SymbolId, Phase)>,
    /// Symbols that traded in the command being applied.
    traded: Vec<SymbolId>,
    /// The time of the command being applied.
    ts_ns: i64,
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

    /// A feed that starts from the engine's current books and phases, all sequences at 0.
    pub fn from_engine(engine: &Engine) -> Feed {
        let mut feed = Feed::new();
        let mut symbols = engine.symbols_by_name();
        symbols.sort_by_key(|(id, _)| *id);
        // What the book shows of each live order, and the pending stops' terms.
        let mut shown: FxHashMap<Key, i64> = FxHashMap::default();
        for user in engine.users() {
            let Some(report) = engine.user_report(user) else {
                continue;
            };
            for o in report.orders {
                let key = (user, o.order);
                match o.order_type {
                    OrderType::Stop | OrderType::StopLimit if o.stop_price != 0 => {
                        let symbol = engine.symbol_id(o.symbol.as_str());
                        let limit = o.order_type == OrderType::StopLimit;
                        let stop = PendingStop {
                            symbol,
                            side: o.side,
                            limit,
                            price: o.price,
                            qty: o.remaining,
                        };
                        feed.stops.insert(key, stop);
                    }
                    _ => {
                        shown.insert(key, o.shown);
                    }
                }
            }
        }
        for (id, spec) in symbols {
            debug_assert_eq!(id.0 as usize, feed.symbols.len());
            let mut sym = SymbolFeed::new(spec);
            if let Some(status) = engine.symbol_status(id) {
                sym.phase = status.phase;
            }
            let (bids, asks) = engine.resting_orders(id);
            for o in bids.iter().chain(&asks) {
                let key = (o.user, o.order);
                let slice = shown.get(&key).copied().unwrap_or(o.remaining);
                let display = engine.order_display_qty(o.user, o.order).unwrap_or(0);
                if display > 0 {
                    let hidden = o.remaining - slice;
                    feed.icebergs.insert(key, Iceberg { display, hidden });
                }
                feed.next_order += 1;
                let (_, slot) = sym
                    .book
                    .add_slot(feed.next_order, o.side, o.price, slice)
                    .expect("the engine's book is consistent");
                feed.live.insert(key, Resting { symbol: id, slot });
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

    /// Applies a command the engine applied (`accepted`: not rejected; a rejected command's
    /// expiries still count), with its events. Its updates are then in [`Self::updates`].
    pub fn apply(&mut self, ts_ns: i64, cmd: &Command, accepted: bool, events: &[OwnedEvent]) {
        let mut inputs = std::mem::take(&mut self.scratch);
        crate::input::record(&mut inputs, ts_ns, cmd, accepted, events);
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

    /// One command: its end record and the records before it, in the engine's order.
    fn apply_command(&mut self, end: &Input, records: &[Input]) {
        match *end {
            Input::AddSymbol(ref spec) => {
                self.symbols.push(SymbolFeed::new(**spec));
                return;
            }
            Input::End { ts_ns } => self.ts_ns = ts_ns,
            _ => {
                self.inconsistencies += 1;
                return;
            }
        }
        for record in records {
            self.apply_record(record);
        }
        self.settle_incoming();
        self.finish_command();
    }

    fn apply_record(&mut self, record: &Input) {
        match *record {
            Input::Trade {
                symbol,
                taker_side,
                price,
                qty,
                maker_user,
                maker_order,
                taker_user,
                taker_order,
            } => {
                let taker = (taker_user, taker_order);
                if self.incoming.is_some_and(|i| i.key != taker) {
                    // A trade of another taker (a liquidation's close): the incoming order
                    // is done walking.
                    self.settle_incoming();
                }
                let (trade, print) = self.on_trade(symbol, taker_side, price, qty);
                self.take_resting((maker_user, maker_order), symbol, qty, trade);
                match self.incoming.as_mut() {
                    Some(incoming) => incoming.remaining -= qty,
                    // An uncross: the buy order rests too.
                    None if self.live.get(taker).is_some() => {
                        self.take_resting(taker, symbol, qty, trade)
                    }
                    // A liquidation's close never rests.
                    None if taker_order == 0 => {}
                    None => self.inconsistencies += 1,
                }
                self.out.extend(print);
            }
            Input::Cancelled { user, order, qty } => self.on_cancelled((user, order), qty),
            Input::Incoming {
                symbol,
                side,
                rests,
                user,
                order,
                price,
                qty,
                display,
            } => self.begin_incoming(Incoming {
                key: (user, order),
                symbol,
                side,
                price,
                remaining: qty,
                display,
                rests,
                public: None,
            }),
            Input::Stop {
                symbol,
                side,
                limit,
                user,
                order,
                price,
                qty,
            } => {
                let stop = PendingStop {
                    symbol,
                    side,
                    limit,
                    price,
                    qty,
                };
                self.stops.insert((user, order), stop);
            }
            Input::Moved { user, order, price } => {
                let key = (user, order);
                match self.lift(key) {
                    Some((mut incoming, display)) => {
                        incoming.price = price;
                        incoming.display = display;
                        self.begin_incoming(incoming);
                    }
                    None => self.inconsistencies += 1,
                }
            }
            Input::Amended {
                user,
                order,
                price,
                qty,
                kept,
            } => self.on_amended((user, order), price, qty, kept),
            Input::Triggered { user, order } => {
                self.settle_incoming();
                let key = (user, order);
                match self.stops.remove(&key) {
                    Some(stop) => self.begin_incoming(Incoming {
                        key,
                        symbol: stop.symbol,
                        side: stop.side,
                        price: stop.price,
                        remaining: stop.qty,
                        display: 0,
                        rests: stop.limit,
                        public: None,
                    }),
                    None => self.inconsistencies += 1,
                }
            }
            Input::Phase { symbol, phase } => {
                self.settle_incoming();
                match self.symbols.get_mut(symbol.0 as usize) {
                    Some(sym) if sym.phase != phase => {
                        sym.phase = phase;
                        self.phases.push((symbol, phase));
                    }
                    Some(_) => {}
                    None => self.inconsistencies += 1,
                }
            }
            Input::Auction {
                symbol,
                price,
                qty,
                imbalance,
            } => {
                self.settle_incoming();
                self.out.push(Update::Auction {
                    symbol,
                    ts_ns: self.ts_ns,
                    price,
                    qty,
                    imbalance,
                });
            }
            Input::End { .. } | Input::AddSymbol(_) => self.inconsistencies += 1,
        }
    }

    fn begin_incoming(&mut self, incoming: Incoming) {
        self.settle_incoming();
        self.incoming = Some(incoming);
    }

    /// The incoming order is done: what is left of it rests, if it may.
    fn settle_incoming(&mut self) {
        let Some(incoming) = self.incoming.take() else {
            return;
        };
        if incoming.remaining <= 0 {
            if incoming.remaining < 0 {
                self.inconsistencies += 1;
            }
            return;
        }
        if !incoming.rests {
            // The engine reports what does not rest as cancelled.
            self.inconsistencies += 1;
            return;
        }
        let public = incoming.public.unwrap_or_else(|| {
            self.next_order += 1;
            self.next_order
        });
        let mut shown = incoming.remaining;
        // An iceberg stays one while it lives, even with nothing hidden: an amend that grows
        // it shows a fresh slice.
        if incoming.display > 0 {
            shown = incoming.display.min(incoming.remaining);
            let hidden = incoming.remaining - shown;
            let iceberg = Iceberg {
                display: incoming.display,
                hidden,
            };
            self.icebergs.insert(incoming.key, iceberg);
        }
        let Incoming {
            key,
            symbol,
            side,
            price,
            ..
        } = incoming;
        self.rest(symbol, key, public, side, price, shown);
    }

    /// Takes a resting order off the book to enter it again (a move, an amend that lost its
    /// place): the incoming order it becomes, with its whole remaining, and its display
    /// quantity.
    fn lift(&mut self, key: Key) -> Option<(Incoming, i64)> {
        let Resting { symbol, slot } = self.live.remove(key)?;
        let sym = &mut self.symbols[symbol.0 as usize];
        let before = *sym.book.order_at(slot);
        let Ok(change) = sym.book.delete_slot(slot) else {
            self.inconsistencies += 1;
            return None;
        };
        sym.l3_seq += 1;
        let seq = sym.l3_seq;
        self.touch(symbol, change);
        self.out.push(Update::Deleted {
            symbol,
            seq,
            order: before.order,
        });
        let iceberg = self.icebergs.remove(&key);
        let hidden = iceberg.map_or(0, |i| i.hidden);
        let display = iceberg.map_or(0, |i| i.display);
        let incoming = Incoming {
            key,
            symbol,
            side: before.side,
            price: before.price,
            remaining: before.qty + hidden,
            display,
            rests: true,
            public: Some(before.order),
        };
        Some((incoming, display))
    }

    /// An amend that left the order live.
    fn on_amended(&mut self, key: Key, price: i64, qty: i64, kept: bool) {
        if let Some(stop) = self.stops.get_mut(&key) {
            stop.price = price;
            stop.qty = qty;
            return;
        }
        if kept {
            // It shrinks where it is (hidden quantity first), never grows.
            let total = self.resting_total(key);
            match total {
                Some(total) if qty <= total => {
                    if qty < total {
                        self.on_cancelled(key, total - qty);
                    }
                }
                _ => self.inconsistencies += 1,
            }
            return;
        }
        match self.lift(key) {
            Some((mut incoming, display)) => {
                incoming.price = price;
                incoming.remaining = qty;
                incoming.display = display;
                self.begin_incoming(incoming);
            }
            None => self.inconsistencies += 1,
        }
    }

    /// A resting order's whole remaining (an iceberg's hidden part included).
    fn resting_total(&self, key: Key) -> Option<i64> {
        let Resting { symbol, slot } = self.live.get(key)?;
        let shown = self.symbols[symbol.0 as usize].book.order_at(slot).qty;
        Some(shown + self.hidden_of(key))
    }

    fn hidden_of(&self, key: Key) -> i64 {
        if self.icebergs.is_empty() {
            return 0;
        }
        self.icebergs.get(&key).map_or(0, |i| i.hidden)
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

    fn rest(&mut self, symbol: SymbolId, key: Key, public: u64, side: Side, price: i64, qty: i64) {
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

    /// A trade of the command: its id and its print (published after the executions), and
    /// its candle. The orders it filled are taken by the caller.
    fn on_trade(
        &mut self,
        symbol: SymbolId,
        taker_side: Side,
        price: i64,
        qty: i64,
    ) -> (u64, Option<Update>) {
        let ts_ns = self.ts_ns;
        let Some(sym) = self.symbols.get_mut(symbol.0 as usize) else {
            self.inconsistencies += 1;
            return (0, None);
        };
        sym.last_trade += 1;
        let trade = sym.last_trade;
        let trade_update = Update::Trade {
            symbol,
            trade,
            ts_ns,
            price,
            qty,
            taker_side,
        };
        sym.candles.on_trade(ts_ns, price, qty);
        if !sym.traded {
            sym.traded = true;
            self.traded.push(symbol);
        }
        if sym.trades.len() == RECENT_TRADES {
            sym.trades.pop_front();
        }
        sym.trades.push_back(trade_update);
        (trade, Some(trade_update))
    }

    /// `qty` of a resting order traded (trade `trade`): an execution of its slice. A used-up
    /// slice leaves; an iceberg with quantity hidden then shows a new slice at the back of
    /// its level, under the same public number (docs/market-data.md).
    fn take_resting(&mut self, key: Key, symbol: SymbolId, qty: i64, trade: u64) {
        let Some(Resting { symbol: at, slot }) = self.live.get(key) else {
            self.inconsistencies += 1;
            return;
        };
        if at != symbol {
            self.inconsistencies += 1;
            return;
        }
        let sym = &mut self.symbols[symbol.0 as usize];
        let before = *sym.book.order_at(slot);
        let (order, side, price) = (before.order, before.side, before.price);
        let Ok((change, left)) = sym.book.take_slot(slot, qty) else {
            self.inconsistencies += 1;
            return;
        };
        sym.l3_seq += 1;
        self.out.push(Update::Executed {
            symbol,
            seq: sym.l3_seq,
            order,
            qty,
            trade,
        });
        self.touch(symbol, change);
        if left > 0 {
            return;
        }
        self.live.remove(key);
        let hidden = self.hidden_of(key);
        if hidden == 0 {
            self.icebergs.remove(&key);
            return;
        }
        let iceberg = self.icebergs.get_mut(&key).expect("it hides something");
        let slice = iceberg.display.min(hidden);
        iceberg.hidden -= slice;
        self.rest(symbol, key, order, side, price, slice);
    }

    /// A cancellation: of a resting order (its hidden part first: what it shows shrinks only
    /// when nothing is hidden), of a pending stop, or of the part of the incoming order that
    /// will not rest.
    fn on_cancelled(&mut self, key: Key, qty: i64) {
        let Some(Resting { symbol, slot }) = self.live.get(key) else {
            if let Some(stop) = self.stops.get_mut(&key) {
                stop.qty -= qty;
                if stop.qty <= 0 {
                    self.stops.remove(&key);
                }
            } else if let Some(incoming) = self.incoming.as_mut().filter(|i| i.key == key) {
                incoming.remaining -= qty;
            }
            return;
        };
        let mut qty = qty;
        let hidden = self.hidden_of(key);
        if hidden > 0 {
            let iceberg = self.icebergs.get_mut(&key).expect("it hides something");
            let from_hidden = qty.min(hidden);
            iceberg.hidden -= from_hidden;
            qty -= from_hidden;
            if qty == 0 {
                return;
            }
        }
        let sym = &mut self.symbols[symbol.0 as usize];
        let order = sym.book.order_at(slot).order;
        match sym.book.take_slot(slot, qty) {
            Ok((change, left)) => {
                sym.l3_seq += 1;
                let seq = sym.l3_seq;
                self.out.push(if left == 0 {
                    self.live.remove(key);
                    if !self.icebergs.is_empty() {
                        self.icebergs.remove(&key);
                    }
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

    /// After a command: its phase changes, one L2 update per level it changed, then the BBO and candle of each
    /// symbol it changed, if they moved.
    fn finish_command(&mut self) {
        // A phase change takes the next L2 sequence number: a book snapshot carries the
        // phase, and a client following L2 sees the change in sequence.
        for (symbol, phase) in self.phases.drain(..) {
            let sym = &mut self.symbols[symbol.0 as usize];
            sym.l2_seq += 1;
            self.out.push(Update::Phase {
                symbol,
                seq: sym.l2_seq,
                phase,
            });
        }
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
        Some(s.book.l2_snapshot(s.l2_seq, depth, s.phase))
    }

    pub fn l3(&self, id: SymbolId) -> Option<L3Snapshot> {
        let s = self.symbols.get(id.0 as usize)?;
        Some(s.book.l3_snapshot(s.l3_seq, s.phase))
    }

    /// (L2 sequence, best bid, best ask).
    pub fn bbo(&self, id: SymbolId) -> Option<(u64, Quote, Quote)> {
        let s = self.symbols.get(id.0 as usize)?;
        Some((s.l2_seq, s.bbo.0, s.bbo.1))
    }

    /// The symbol's trading phase.
    pub fn phase(&self, id: SymbolId) -> Option<Phase> {
        Some(self.symbols.get(id.0 as usize)?.phase)
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
