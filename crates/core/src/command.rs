//! Commands: everything that can change or query the state of the venue.
//!
//! Commands are plain values: every trading command keeps its data inline, with no heap, in 80
//! bytes (56 before stops, icebergs and GTD added an order's optional fields), so a command
//! stream or a ring of them costs about a cache line a command. Only `add_symbol`, an
//! administrative command, keeps its spec (three names and six numbers, 120 bytes) on the heap:
//! inline, it would grow every command.
//!
//! Symbols are named by [`SymbolId`] (resolve a name with [`crate::Engine::symbol_id`]); a word
//! a gateway could not recognise (an unknown side, type, tif or stp) arrives as `None` so the
//! engine reports `invalid_order` in its rule-given place.

use crate::types::{Name, OrderId, OrderType, Phase, Side, Stp, SymbolId, Tif, UserId};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Boxed to keep every other command small (see above).
    AddSymbol(Box<SymbolSpec>),
    AddUser {
        user: UserId,
    },
    /// Deposit (amount > 0) or withdraw (amount < 0) to or from `available`.
    AdjustBalance {
        user: UserId,
        currency: Name,
        amount: i64,
        tx: i64,
    },
    Place(PlaceOrder),
    Cancel {
        user: UserId,
        order: OrderId,
    },
    Move {
        user: UserId,
        order: OrderId,
        price: i64,
    },
    Reduce {
        user: UserId,
        order: OrderId,
        qty: i64,
    },
    /// Cancels every resting order of `user`: in one symbol, or in all of them when `None`.
    MassCancel {
        user: UserId,
        symbol: Option<SymbolId>,
    },
    /// An L2 snapshot of one symbol, `depth` levels a side.
    Book {
        symbol: SymbolId,
        depth: i64,
    },
    /// A user's balances and open orders.
    UserReport {
        user: UserId,
    },
    /// Venue totals per currency, fees collected included.
    VenueReport,
    /// Changes a live order's price and/or total quantity at once (docs/rules.md, "Amend").
    Amend(AmendOrder),
    /// Sets how long (ns of venue time) the id of an order that ended stays taken
    /// (docs/rules.md, "Order ids are not reused within a window"). An operator command.
    SetOrderIdWindow {
        window: i64,
    },
    /// Only moves the venue clock (docs/rules.md, "Time"): the time is the command's
    /// timestamp, an argument of [`crate::Engine::apply`] like every command's.
    Tick,
    /// Sets a symbol's trading phase (docs/rules.md, "Trading phases, halts and auctions");
    /// `None` is a phase word the gateway did not know (`invalid_phase`). An operator command.
    SetPhase {
        symbol: SymbolId,
        phase: Option<Phase>,
    },
    /// Sets a symbol's price band in basis points of its reference price, 0 for none
    /// (docs/rules.md, "Price bands"). An operator command.
    SetBand {
        symbol: SymbolId,
        band_bps: i64,
    },
    /// Sets a symbol's reference price (docs/rules.md, "Price bands"). An operator command.
    SetRefPrice {
        symbol: SymbolId,
        price: i64,
    },
    /// Cancels a user's live orders and refuses their new orders and withdrawals until
    /// [`Command::ResumeUser`] (docs/rules.md, "User suspension"). An operator command.
    SuspendUser {
        user: UserId,
    },
    ResumeUser {
        user: UserId,
    },
    /// Sets a future's mark price (docs/rules.md, "Futures"). An operator command.
    SetMarkPrice {
        symbol: SymbolId,
        price: i64,
    },
    /// Adds to (amount > 0) or takes from (< 0) a currency's insurance fund (docs/rules.md,
    /// "Futures"); `tx` shares the id space of [`Command::AdjustBalance`]. An operator command.
    FundInsurance {
        currency: Name,
        amount: i64,
        tx: i64,
    },
}

// Keeps the size the module's doc promises: a larger variant would grow every command.
const _: () = assert!(std::mem::size_of::<Command>() == 80);

/// An amend: which order, and the fields to change. A field left out keeps its value.
///
/// Kept as values and a mask of the fields present rather than as `Option`s so that the
/// command stays within the size above; an absent field's value is always 0, so equal amends
/// compare equal. Build one with [`AmendOrder::new`] and the `with_*` methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmendOrder {
    pub user: UserId,
    pub order: OrderId,
    price: i64,
    qty: i64,
    stop_price: i64,
    present: u8,
}

impl AmendOrder {
    const PRICE: u8 = 1;
    const QTY: u8 = 2;
    const STOP_PRICE: u8 = 4;

    /// An amend of `(user, order)` that changes nothing yet (the engine rejects it as it is).
    pub fn new(user: UserId, order: OrderId) -> Self {
        AmendOrder {
            user,
            order,
            price: 0,
            qty: 0,
            stop_price: 0,
            present: 0,
        }
    }

    /// An amend with the fields given, the others left out.
    pub fn with_fields(
        user: UserId,
        order: OrderId,
        price: Option<i64>,
        qty: Option<i64>,
        stop_price: Option<i64>,
    ) -> Self {
        let mut amend = AmendOrder::new(user, order);
        if let Some(price) = price {
            amend = amend.with_price(price);
        }
        if let Some(qty) = qty {
            amend = amend.with_qty(qty);
        }
        if let Some(stop_price) = stop_price {
            amend = amend.with_stop_price(stop_price);
        }
        amend
    }

    /// The new limit price.
    pub fn with_price(self, price: i64) -> Self {
        AmendOrder {
            price,
            present: self.present | Self::PRICE,
            ..self
        }
    }

    /// The new **total** quantity, the part already filled included (as FIX `OrderQty`).
    pub fn with_qty(self, qty: i64) -> Self {
        AmendOrder {
            qty,
            present: self.present | Self::QTY,
            ..self
        }
    }

    /// The new stop price of a pending stop order.
    pub fn with_stop_price(self, stop_price: i64) -> Self {
        AmendOrder {
            stop_price,
            present: self.present | Self::STOP_PRICE,
            ..self
        }
    }

    pub fn price(&self) -> Option<i64> {
        (self.present & Self::PRICE != 0).then_some(self.price)
    }

    pub fn qty(&self) -> Option<i64> {
        (self.present & Self::QTY != 0).then_some(self.qty)
    }

    pub fn stop_price(&self) -> Option<i64> {
        (self.present & Self::STOP_PRICE != 0).then_some(self.stop_price)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolSpec {
    pub symbol: Name,
    pub base: Name,
    pub quote: Name,
    /// Base minor units per lot.
    pub base_scale: i64,
    /// Quote minor units per tick per lot.
    pub quote_scale: i64,
    /// Quote minor units per lot.
    pub maker_fee: i64,
    /// Quote minor units per lot.
    pub taker_fee: i64,
    /// The price band around the reference price, in basis points; 0 for none.
    pub band_bps: i64,
    /// When DAY orders expire: ns after midnight UTC, in [0, 86,400 s).
    pub day_end: i64,
    /// Spot or a future with its margins; `None` for a type word the gateway did not know
    /// (`invalid_symbol`).
    pub kind: Option<SymbolKind>,
}

impl SymbolSpec {
    /// The kind of a spot symbol, for spec literals.
    pub const SPOT: Option<SymbolKind> = Some(SymbolKind::Spot);
}

/// What a symbol trades (docs/rules.md, "Futures").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    /// Base against quote: both currencies move.
    Spot,
    /// A linear future settled in its quote: positions, margin and a mark price; nothing of
    /// `base` moves.
    Future {
        /// Quote minor units per lot of exposure (orders and positions).
        initial_margin: i64,
        /// Quote minor units per lot of position.
        maintenance_margin: i64,
        /// The mark price, ticks.
        mark_price: i64,
    },
}

impl SymbolKind {
    /// The scenario word: `spot` or `future`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SymbolKind::Spot => "spot",
            SymbolKind::Future { .. } => "future",
        }
    }
}

/// The optional fields of an order beyond a plain limit or market order: the stop price of a
/// stop, the displayed quantity of an iceberg, the expiry time of a GTD order.
///
/// Each field is a value with [`i64::MIN`] standing for "absent", so that the three take 24
/// bytes and a command stays small (a mask of the fields present would cost a padded word).
/// A field given as `i64::MIN` is kept as `i64::MIN + 1`: both are refused alike (a stop
/// price or displayed quantity must be above 0, an expiry after now), so the engine's answer
/// is the same. [`OrderExtras::NONE`] has no field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderExtras {
    stop_price: i64,
    display_qty: i64,
    expire_ts: i64,
}

impl OrderExtras {
    const ABSENT: i64 = i64::MIN;

    pub const NONE: OrderExtras = OrderExtras {
        stop_price: Self::ABSENT,
        display_qty: Self::ABSENT,
        expire_ts: Self::ABSENT,
    };

    /// Extras with the fields given, the others left out.
    pub fn with_fields(
        stop_price: Option<i64>,
        display_qty: Option<i64>,
        expire_ts: Option<i64>,
    ) -> Self {
        let mut extras = OrderExtras::NONE;
        if let Some(v) = stop_price {
            extras = extras.with_stop_price(v);
        }
        if let Some(v) = display_qty {
            extras = extras.with_display_qty(v);
        }
        if let Some(v) = expire_ts {
            extras = extras.with_expire_ts(v);
        }
        extras
    }

    /// `value` as a present field: anything but the marker of an absent one.
    const fn present(value: i64) -> i64 {
        if value == Self::ABSENT {
            Self::ABSENT + 1
        } else {
            value
        }
    }

    const fn field(value: i64) -> Option<i64> {
        if value == Self::ABSENT {
            None
        } else {
            Some(value)
        }
    }

    pub fn with_stop_price(self, stop_price: i64) -> Self {
        OrderExtras {
            stop_price: Self::present(stop_price),
            ..self
        }
    }

    pub fn with_display_qty(self, display_qty: i64) -> Self {
        OrderExtras {
            display_qty: Self::present(display_qty),
            ..self
        }
    }

    pub fn with_expire_ts(self, expire_ts: i64) -> Self {
        OrderExtras {
            expire_ts: Self::present(expire_ts),
            ..self
        }
    }

    pub fn stop_price(&self) -> Option<i64> {
        Self::field(self.stop_price)
    }

    pub fn display_qty(&self) -> Option<i64> {
        Self::field(self.display_qty)
    }

    pub fn expire_ts(&self) -> Option<i64> {
        Self::field(self.expire_ts)
    }

    /// No field present: a plain limit or market order.
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaceOrder {
    pub user: UserId,
    pub order: OrderId,
    pub symbol: SymbolId,
    pub side: Option<Side>,
    pub order_type: Option<OrderType>,
    pub tif: Option<Tif>,
    pub price: Option<i64>,
    pub qty: i64,
    pub post_only: bool,
    pub stp: Option<Stp>,
    pub extras: OrderExtras,
}

impl PlaceOrder {
    /// A GTC limit order with the default self-trade prevention.
    pub fn limit(
        user: UserId,
        order: OrderId,
        symbol: SymbolId,
        side: Side,
        price: i64,
        qty: i64,
    ) -> Self {
        PlaceOrder {
            user,
            order,
            symbol,
            side: Some(side),
            order_type: Some(OrderType::Limit),
            tif: Some(Tif::Gtc),
            price: Some(price),
            qty,
            post_only: false,
            stp: Some(Stp::CancelTaker),
            extras: OrderExtras::NONE,
        }
    }

    /// An unpriced market IOC order with the default self-trade prevention.
    pub fn market(user: UserId, order: OrderId, symbol: SymbolId, side: Side, qty: i64) -> Self {
        PlaceOrder {
            order_type: Some(OrderType::Market),
            tif: Some(Tif::Ioc),
            price: None,
            ..PlaceOrder::limit(user, order, symbol, side, 0, qty)
        }
    }

    pub fn with_tif(self, tif: Tif) -> Self {
        PlaceOrder {
            tif: Some(tif),
            ..self
        }
    }

    pub fn with_stp(self, stp: Stp) -> Self {
        PlaceOrder {
            stp: Some(stp),
            ..self
        }
    }

    pub fn with_post_only(self) -> Self {
        PlaceOrder {
            post_only: true,
            ..self
        }
    }

    pub fn with_order_type(self, order_type: OrderType) -> Self {
        PlaceOrder {
            order_type: Some(order_type),
            ..self
        }
    }

    pub fn with_stop_price(self, stop_price: i64) -> Self {
        PlaceOrder {
            extras: self.extras.with_stop_price(stop_price),
            ..self
        }
    }

    pub fn with_display_qty(self, display_qty: i64) -> Self {
        PlaceOrder {
            extras: self.extras.with_display_qty(display_qty),
            ..self
        }
    }

    pub fn with_expire_ts(self, expire_ts: i64) -> Self {
        PlaceOrder {
            extras: self.extras.with_expire_ts(expire_ts),
            ..self
        }
    }

    pub fn stop_price(&self) -> Option<i64> {
        self.extras.stop_price()
    }

    pub fn display_qty(&self) -> Option<i64> {
        self.extras.display_qty()
    }

    pub fn expire_ts(&self) -> Option<i64> {
        self.extras.expire_ts()
    }
}

#[cfg(test)]
mod tests {
    use super::OrderExtras;

    #[test]
    fn an_extra_given_as_the_absent_marker_stays_present() {
        let extras = OrderExtras::with_fields(Some(i64::MIN), Some(i64::MIN), Some(i64::MIN));
        assert!(!extras.is_none());
        assert_eq!(extras.stop_price(), Some(i64::MIN + 1));
        assert_eq!(extras.display_qty(), Some(i64::MIN + 1));
        assert_eq!(extras.expire_ts(), Some(i64::MIN + 1));
        let one = OrderExtras::NONE.with_display_qty(5);
        assert_eq!(
            (one.stop_price(), one.display_qty(), one.expire_ts()),
            (None, Some(5), None)
        );
        assert!(OrderExtras::with_fields(None, None, None).is_none());
    }
}
