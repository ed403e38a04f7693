//! What the feed needs to know of each command the engine applied, as compact records in the
//! order the engine reported its events: only what moves the books or says how a symbol
//! trades. [`record`] writes them from a command, its result and its events, and
//! [`crate::Feed::apply_inputs`] applies them in one pass, without first copying the events
//! aside.
//!
//! The engine reports trades and cancellations but not which orders came to rest. The feed
//! follows the *incoming* order of the command (a new order, a moved or re-entered one, then
//! each stop the command triggers) and rests what neither trades nor cancellations took of
//! it; so it knows, from the command, each incoming order's side, price and display quantity,
//! and from `place` the terms of each pending stop until it triggers.

use rialto_core::{
    Command, OrderId, OrderType, OwnedEvent, Phase, Priority, Side, SymbolId, SymbolSpec, Tif,
    UserId,
};

/// One record. A command's records end with `End` (or are one `AddSymbol`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A trade. The maker rests; the taker is the incoming order, or in an uncross a resting
    /// buy order, or a liquidation's close (order 0), which never rests.
    Trade {
        symbol: SymbolId,
        taker_side: Side,
        price: i64,
        qty: i64,
        maker_user: UserId,
        maker_order: OrderId,
        taker_user: UserId,
        taker_order: OrderId,
    },
    /// A cancellation: of a resting order (all or part, an iceberg's hidden part first), of a
    /// pending stop, or of the part of the incoming order that will not rest.
    Cancelled {
        user: UserId,
        order: OrderId,
        qty: i64,
    },
    /// A new order enters as the incoming order: `rests` says whether what is left of it
    /// joins the book (a limit order whose tif rests); `display` is an iceberg's display
    /// quantity (0: none).
    Incoming {
        symbol: SymbolId,
        side: Side,
        rests: bool,
        user: UserId,
        order: OrderId,
        price: i64,
        qty: i64,
        display: i64,
    },
    /// A stop or stop-limit order was accepted: it waits outside the book. `limit`: a
    /// stop-limit, which may rest once triggered, at `price`.
    Stop {
        symbol: SymbolId,
        side: Side,
        limit: bool,
        user: UserId,
        order: OrderId,
        price: i64,
        qty: i64,
    },
    /// A move: the order leaves its level and enters again at `price` as the incoming order.
    Moved {
        user: UserId,
        order: OrderId,
        price: i64,
    },
    /// An amend that left the order live (docs/rules.md, "Amend"): `qty` is its new
    /// remaining. A resting order that kept its place shrinks where it is; one that lost it
    /// leaves its level and enters again at `price` as the incoming order. A pending stop
    /// takes the new terms.
    Amended {
        user: UserId,
        order: OrderId,
        price: i64,
        qty: i64,
        kept: bool,
    },
    /// A pending stop triggered: it enters as the incoming order (the one before it has
    /// come to rest).
    Triggered { user: UserId, order: OrderId },
    /// A symbol's phase changed.
    Phase { symbol: SymbolId, phase: Phase },
    /// A call auction uncrossed: its price, the lots it executed and the imbalance left
    /// (bids minus asks at that price).
    Auction {
        symbol: SymbolId,
        price: i64,
        qty: i64,
        imbalance: i64,
    },
    /// Ends a command, with its time.
    End { ts_ns: i64 },
    /// A new symbol (boxed: rare, and it would make every record bigger).
    AddSymbol(Box<SymbolSpec>),
}

impl Input {
    /// Whether this record ends a command.
    pub fn ends_command(&self) -> bool {
        matches!(self, Input::End { .. } | Input::AddSymbol(_))
    }

    /// The time of the command this record ends.
    pub fn ts_ns(&self) -> Option<i64> {
        match *self {
            Input::End { ts_ns } => Some(ts_ns),
            _ => None,
        }
    }
}

/// The record that starts the command's own work, if it has one: a new order, a stop, or a
/// move. (An amend's record goes where its `amended` event is.)
fn start_of(cmd: &Command) -> Option<Input> {
    match cmd {
        Command::Place(p) => {
            let (side, kind) = (p.side?, p.order_type.unwrap_or(OrderType::Limit));
            Some(match kind {
                OrderType::Stop | OrderType::StopLimit => Input::Stop {
                    symbol: p.symbol,
                    side,
                    limit: kind == OrderType::StopLimit,
                    user: p.user,
                    order: p.order,
                    price: p.price.unwrap_or(0),
                    qty: p.qty,
                },
                OrderType::Limit | OrderType::Market => Input::Incoming {
                    symbol: p.symbol,
                    side,
                    rests: kind == OrderType::Limit
                        && matches!(p.tif.unwrap_or(Tif::Gtc), Tif::Gtc | Tif::Gtd | Tif::Day),
                    user: p.user,
                    order: p.order,
                    price: p.price.unwrap_or(0),
                    qty: p.qty,
                    display: p.display_qty().unwrap_or(0),
                },
            })
        }
        &Command::Move { user, order, price } => Some(Input::Moved { user, order, price }),
        _ => None,
    }
}

/// Appends the records of a command the engine applied (`accepted`: it was not rejected),
/// with the events it produced. A rejected command's events (the expiries its time brought)
/// still count. Commands that move no book and change no phase add nothing.
#[inline]
pub fn record(
    out: &mut Vec<Input>,
    ts_ns: i64,
    cmd: &Command,
    accepted: bool,
    events: &[OwnedEvent],
) {
    match cmd {
        Command::AddSymbol(spec) if accepted => {
            out.push(Input::AddSymbol(spec.clone()));
            return;
        }
        // Queries move no book.
        Command::Book { .. } | Command::UserReport { .. } | Command::VenueReport => return,
        _ => {}
    }
    let before = out.len();
    let mut start = if accepted { start_of(cmd) } else { None };
    for event in events {
        // The command's own work begins after the expiries its time brought.
        let expiry = matches!(event, OwnedEvent::Cancelled(c)
            if c.reason == rialto_core::CancelReason::Expired);
        if !expiry && let Some(s) = start.take() {
            out.push(s);
        }
        match event {
            OwnedEvent::Trade(t) => out.push(Input::Trade {
                symbol: t.symbol,
                taker_side: t.taker_side,
                price: t.price,
                qty: t.qty,
                maker_user: t.maker_user,
                maker_order: t.maker_order,
                taker_user: t.taker_user,
                taker_order: t.taker_order,
            }),
            OwnedEvent::Cancelled(c) => out.push(Input::Cancelled {
                user: c.user,
                order: c.order,
                qty: c.qty,
            }),
            OwnedEvent::Amended(a) => out.push(Input::Amended {
                user: a.user,
                order: a.order,
                price: a.price,
                qty: a.qty,
                kept: a.priority == Priority::Kept,
            }),
            OwnedEvent::Triggered(t) => out.push(Input::Triggered {
                user: t.user,
                order: t.order,
            }),
            OwnedEvent::Auction(a) => out.push(Input::Auction {
                symbol: a.symbol,
                price: a.price,
                qty: a.qty,
                imbalance: a.imbalance,
            }),
            OwnedEvent::Phase(p) => out.push(Input::Phase {
                symbol: p.symbol,
                phase: p.phase,
            }),
            // A liquidation changes no book by itself: its closes are trades above.
            OwnedEvent::Liquidated(_)
            | OwnedEvent::Book { .. }
            | OwnedEvent::UserReport(_)
            | OwnedEvent::VenueReport(_) => {}
        }
    }
    if let Some(s) = start {
        out.push(s);
    }
    // A command that changed nothing (a cancel of an order that had already left, say) adds
    // nothing.
    if out.len() > before {
        out.push(Input::End { ts_ns });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trade names its taker (an uncross fills resting orders on both sides), so a record
    /// is 56 bytes: seven words and the tag.
    #[test]
    fn a_record_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Input>(), 56);
    }
}
