//! Events: what the engine reports while it applies a command. The command's result (ok or a
//! rejection reason) is the return value of [`crate::Engine::apply`] and comes after its events.

use crate::types::{
    CancelReason, Name, OrderId, OrderType, Phase, Priority, Side, SymbolId, Tif, UserId,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trade {
    pub symbol: SymbolId,
    /// The resting order's price.
    pub price: i64,
    pub qty: i64,
    pub maker_user: UserId,
    pub maker_order: OrderId,
    pub taker_user: UserId,
    pub taker_order: OrderId,
    pub taker_side: Side,
    /// Total fee charged to the maker for this fill, quote minor units.
    pub maker_fee: i64,
    /// Total fee charged to the taker for this fill, quote minor units.
    pub taker_fee: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled {
    pub symbol: SymbolId,
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    /// Quantity that left the book or was never executed.
    pub qty: i64,
    pub reason: CancelReason,
}

/// An accepted amend: the order's terms after it. When it lost priority, the trades and
/// cancellations of its re-entry follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amended {
    pub symbol: SymbolId,
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    pub price: i64,
    /// 0 for an order that is not a pending stop.
    pub stop_price: i64,
    /// The new remaining quantity.
    pub qty: i64,
    pub priority: Priority,
}

/// A pending stop order has triggered: it enters the book now, as an incoming order; its own
/// trades and cancellations follow (docs/rules.md, "Stop and stop-limit orders").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Triggered {
    pub symbol: SymbolId,
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    pub stop_price: i64,
}

/// The uncross of a call auction: its price, the lots executed and what was left over
/// (`imbalance` = bids minus asks at that price; > 0: buyers left). Follows the uncross trades.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuctionResult {
    pub symbol: SymbolId,
    pub price: i64,
    pub qty: i64,
    pub imbalance: i64,
}

/// A user's margin in one currency fell below maintenance and its futures positions there were
/// closed (docs/rules.md, "Futures"). Follows the liquidation's cancellations and trades.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liquidated {
    pub user: UserId,
    pub currency: Name,
    /// Equity and maintenance margin in `currency` before the liquidation (saturated to i64).
    pub equity: i64,
    pub maintenance: i64,
    /// What the insurance fund paid (0 if nothing).
    pub shortfall: i64,
}

/// A user's position in a future: signed lots (long > 0) and signed cost (quote minor units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub symbol: Name,
    pub lots: i64,
    pub cost: i64,
}

/// A user's margin in one quote currency that has futures (docs/rules.md, "Futures"), each
/// figure saturated to i64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarginReport {
    pub currency: Name,
    /// `available(c) + U`: the balance plus the unrealised profit at the marks.
    pub equity: i64,
    /// The initial margin of positions and orders, with their open loss.
    pub initial: i64,
    pub maintenance: i64,
    /// `equity − initial`: what new futures orders may still use (< 0: none).
    pub available: i64,
}

/// A symbol's trading phase changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseChanged {
    pub symbol: SymbolId,
    pub phase: Phase,
}

/// A symbol's trading state: its phase, last trade price and reference price (0: none yet),
/// and its price band (basis points; 0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolStatus {
    pub phase: Phase,
    pub last: i64,
    pub reference: i64,
    pub band_bps: i64,
    /// Whether it is a future, and its mark price (0 for a spot symbol).
    pub future: bool,
    pub mark: i64,
}

/// A stop order waiting for its trigger, as the final state lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingStop {
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    pub stop_price: i64,
    /// 0 for a stop without a limit or protection price.
    pub price: i64,
    pub remaining: i64,
}

/// A live order as the final state lists it: how much it has filled, how much of it the book
/// shows, and when it expires (0: never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveOrder {
    pub user: UserId,
    pub order: OrderId,
    pub filled: i64,
    pub shown: i64,
    pub expire_ts: i64,
}

/// One aggregated price level: price and total remaining quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub price: i64,
    pub qty: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookSnapshot<'a> {
    pub symbol: SymbolId,
    /// Best first.
    pub bids: &'a [Level],
    /// Best first.
    pub asks: &'a [Level],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Balance {
    pub available: i64,
    pub held: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOrder {
    pub symbol: Name,
    pub order: OrderId,
    pub side: Side,
    pub order_type: OrderType,
    pub tif: Tif,
    /// The limit price; 0 for a stop without one.
    pub price: i64,
    /// 0 for an order that is not a pending stop.
    pub stop_price: i64,
    pub remaining: i64,
    /// The quantity the book shows: `remaining` but for an iceberg (its slice) or a pending
    /// stop (0).
    pub shown: i64,
    /// Executed since it was accepted.
    pub filled: i64,
    /// 0 for an order that never expires.
    pub expire_ts: i64,
}

/// A user's balances (by currency name, sorted) and open orders (by symbol, then order id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserReport {
    pub user: UserId,
    pub suspended: bool,
    pub balances: Vec<(Name, Balance)>,
    pub orders: Vec<OpenOrder>,
    /// Open futures positions, by symbol name.
    pub positions: Vec<Position>,
    /// The margin in each currency that some future is quoted in, by currency name.
    pub margins: Vec<MarginReport>,
}

/// Venue totals for one currency. Conservation: `available + held + fees + insurance -
/// position_cost = deposits - withdrawals`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurrencyTotals {
    pub currency: Name,
    pub deposits: i64,
    pub withdrawals: i64,
    pub available: i64,
    pub held: i64,
    pub fees: i64,
    /// The insurance fund (docs/rules.md, "Futures").
    pub insurance: i64,
    /// The summed cost of all positions in futures quoted in this currency (i128: a sum of
    /// i64 costs).
    pub position_cost: i128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    Trade(Trade),
    Cancelled(Cancelled),
    Amended(Amended),
    Triggered(Triggered),
    Auction(AuctionResult),
    Phase(PhaseChanged),
    Liquidated(Liquidated),
    Book(BookSnapshot<'a>),
    UserReport(&'a UserReport),
    VenueReport(&'a [CurrencyTotals]),
}

/// Receives events as the engine produces them. Implementations must not assume an event
/// outlives the call (book snapshots borrow the engine's scratch space).
pub trait EventSink {
    fn on_event(&mut self, event: &Event<'_>);
}

/// Discards every event.
impl EventSink for () {
    fn on_event(&mut self, _: &Event<'_>) {}
}

/// An owned copy of an event, for tests and tools that keep events around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedEvent {
    Trade(Trade),
    Cancelled(Cancelled),
    Amended(Amended),
    Triggered(Triggered),
    Auction(AuctionResult),
    Phase(PhaseChanged),
    Liquidated(Liquidated),
    Book {
        symbol: SymbolId,
        bids: Vec<Level>,
        asks: Vec<Level>,
    },
    UserReport(UserReport),
    VenueReport(Vec<CurrencyTotals>),
}

impl From<&Event<'_>> for OwnedEvent {
    fn from(event: &Event<'_>) -> Self {
        match *event {
            Event::Trade(t) => OwnedEvent::Trade(t),
            Event::Cancelled(c) => OwnedEvent::Cancelled(c),
            Event::Amended(a) => OwnedEvent::Amended(a),
            Event::Triggered(t) => OwnedEvent::Triggered(t),
            Event::Auction(a) => OwnedEvent::Auction(a),
            Event::Phase(p) => OwnedEvent::Phase(p),
            Event::Liquidated(l) => OwnedEvent::Liquidated(l),
            Event::Book(b) => OwnedEvent::Book {
                symbol: b.symbol,
                bids: b.bids.to_vec(),
                asks: b.asks.to_vec(),
            },
            Event::UserReport(r) => OwnedEvent::UserReport(r.clone()),
            Event::VenueReport(t) => OwnedEvent::VenueReport(t.to_vec()),
        }
    }
}

/// Collects owned events.
impl EventSink for Vec<OwnedEvent> {
    fn on_event(&mut self, event: &Event<'_>) {
        self.push(OwnedEvent::from(event));
    }
}
