//! What the feed publishes. Prices are in ticks and quantities in lots, as the engine counts
//! them; a symbol's listing gives the tick and lot sizes.
//!
//! Each symbol numbers its L3 updates (`Added`, `Reduced`, `Executed`, `Deleted`) in one
//! sequence and its L2 updates (`Level`) in another, both from 1 without gaps; trades are
//! numbered by their own consecutive id. A snapshot carries the sequence number of the last
//! update it includes.

use rialto_core::{Phase, Side, SymbolId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// L3: an order joined the back of its price level.
    Added {
        symbol: SymbolId,
        seq: u64,
        order: u64,
        side: Side,
        price: i64,
        qty: i64,
    },
    /// L3: an order's quantity went down to `qty` (> 0) by its owner; it keeps its place.
    Reduced {
        symbol: SymbolId,
        seq: u64,
        order: u64,
        qty: i64,
    },
    /// L3: `qty` of a resting order traded (trade `trade`); at zero the order has left.
    Executed {
        symbol: SymbolId,
        seq: u64,
        order: u64,
        qty: i64,
        trade: u64,
    },
    /// L3: an order left the book (cancelled, or moved: a move is a delete and an add).
    Deleted {
        symbol: SymbolId,
        seq: u64,
        order: u64,
    },
    /// L2: the total quantity resting at `price` on `side` is now `qty` (0: the level is gone).
    Level {
        symbol: SymbolId,
        seq: u64,
        side: Side,
        price: i64,
        qty: i64,
    },
    /// The symbol's trading phase changed (docs/rules.md, "Trading phases"). It takes an L2
    /// sequence number of its own, so an L2 snapshot's phase is exact at its number.
    Phase {
        symbol: SymbolId,
        seq: u64,
        phase: Phase,
    },
    /// A call auction uncrossed at `price`, executing `qty` lots (its trades come before it),
    /// leaving `imbalance` (bids minus asks at that price; > 0: buyers left).
    Auction {
        symbol: SymbolId,
        ts_ns: i64,
        price: i64,
        qty: i64,
        imbalance: i64,
    },
    /// L1: the best bid and offer after L2 update `seq` (price, qty), when either changed.
    Bbo {
        symbol: SymbolId,
        seq: u64,
        bid: Option<(i64, i64)>,
        ask: Option<(i64, i64)>,
    },
    /// The candle a command's trades changed, as it now stands.
    Candle {
        symbol: SymbolId,
        candle: crate::candles::Candle,
    },
    Trade {
        symbol: SymbolId,
        trade: u64,
        ts_ns: i64,
        price: i64,
        qty: i64,
        /// The side of the incoming (taker) order.
        taker_side: Side,
    },
}

impl Update {
    pub fn symbol(&self) -> SymbolId {
        match *self {
            Update::Added { symbol, .. }
            | Update::Reduced { symbol, .. }
            | Update::Executed { symbol, .. }
            | Update::Deleted { symbol, .. }
            | Update::Level { symbol, .. }
            | Update::Phase { symbol, .. }
            | Update::Auction { symbol, .. }
            | Update::Bbo { symbol, .. }
            | Update::Candle { symbol, .. }
            | Update::Trade { symbol, .. } => symbol,
        }
    }

    /// The L3 sequence number, for an L3 update.
    pub fn l3_seq(&self) -> Option<u64> {
        match *self {
            Update::Added { seq, .. }
            | Update::Reduced { seq, .. }
            | Update::Executed { seq, .. }
            | Update::Deleted { seq, .. } => Some(seq),
            _ => None,
        }
    }

    /// The L2 sequence number, for an L2 level update or a phase change.
    pub fn l2_seq(&self) -> Option<u64> {
        match *self {
            Update::Level { seq, .. } | Update::Phase { seq, .. } => Some(seq),
            _ => None,
        }
    }
}

/// Aggregated depth after L2 update `seq`: (price, qty) per level, best first, and the
/// symbol's phase then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L2Snapshot {
    pub seq: u64,
    pub phase: Phase,
    pub bids: Vec<(i64, i64)>,
    pub asks: Vec<(i64, i64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L3Order {
    pub order: u64,
    pub price: i64,
    pub qty: i64,
}

/// Every resting order after L3 update `seq`, in priority order (best price, then oldest),
/// and the symbol's phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct L3Snapshot {
    pub seq: u64,
    pub phase: Phase,
    pub bids: Vec<L3Order>,
    pub asks: Vec<L3Order>,
}

/// An empty book in continuous trading.
impl Default for L2Snapshot {
    fn default() -> Self {
        L2Snapshot {
            seq: 0,
            phase: Phase::Continuous,
            bids: Vec::new(),
            asks: Vec::new(),
        }
    }
}
