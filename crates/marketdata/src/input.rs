//! What the feed needs to know of each command the engine accepted, as compact records:
//! only what moves the books, a 48-byte record per command and one per trade or cancellation.
//! [`record`] writes them from a command and its events, and [`crate::Feed::apply_inputs`]
//! applies them in one pass, without first copying the events aside.

use rialto_core::{
    Command, OrderId, OrderType, OwnedEvent, Priority, Side, SymbolId, SymbolSpec, Tif, UserId,
};

/// One record. A command's trades and cancellations come first, then one record that ends the
/// command (`Placed`, `Moved`, `Done` or `AddSymbol`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A trade of the command being applied, whose order is always the taker.
    Trade {
        symbol: SymbolId,
        taker_side: Side,
        price: i64,
        qty: i64,
        maker_user: UserId,
        maker_order: OrderId,
    },
    /// A cancellation in the command being applied: of a resting order, or of the part of the
    /// taker that did not rest.
    Cancelled {
        user: UserId,
        order: OrderId,
        qty: i64,
    },
    /// Ends a GTC limit order: it rests with what its trades and cancellations left.
    Placed {
        ts_ns: i64,
        symbol: SymbolId,
        side: Side,
        user: UserId,
        order: OrderId,
        price: i64,
        qty: i64,
    },
    /// Ends a move: the order leaves its level and rests at `price` with what is left.
    Moved {
        ts_ns: i64,
        user: UserId,
        order: OrderId,
        price: i64,
    },
    /// Ends an amend that left the order live (docs/rules.md, "Amend"): `qty` is its new
    /// remaining before any trade of its re-entry. Kept, it shrinks where it is; lost, it
    /// leaves its level and rests at `price` with what its re-entry's trades left.
    Amended {
        ts_ns: i64,
        user: UserId,
        order: OrderId,
        price: i64,
        qty: i64,
        kept: bool,
    },
    /// Ends any other command that changed a book.
    Done { ts_ns: i64 },
    /// A new symbol (boxed: rare, and it would double the size of every record).
    AddSymbol(Box<SymbolSpec>),
}

impl Input {
    /// Whether this record ends a command.
    pub fn ends_command(&self) -> bool {
        !matches!(self, Input::Trade { .. } | Input::Cancelled { .. })
    }

    /// The time of the command this record ends.
    pub fn ts_ns(&self) -> Option<i64> {
        match *self {
            Input::Placed { ts_ns, .. }
            | Input::Moved { ts_ns, .. }
            | Input::Amended { ts_ns, .. }
            | Input::Done { ts_ns } => Some(ts_ns),
            _ => None,
        }
    }
}

/// Appends the records of a command the engine accepted, with the events it produced.
/// Commands that cannot move a book (deposits, users, queries) add nothing.
#[inline]
pub fn record(out: &mut Vec<Input>, ts_ns: i64, cmd: &Command, events: &[OwnedEvent]) {
    match cmd {
        Command::AddSymbol(spec) => {
            out.push(Input::AddSymbol(spec.clone()));
            return;
        }
        // Queries move no book.
        Command::Book { .. } | Command::UserReport { .. } | Command::VenueReport => return,
        // Every other command may trade or cancel: an order's own, or at its start the
        // expiries its time brings, a suspension's cancellations, an uncross's trades.
        _ => {}
    }
    let before = out.len();
    let mut amended = None;
    for event in events {
        match event {
            OwnedEvent::Trade(t) => out.push(Input::Trade {
                symbol: t.symbol,
                taker_side: t.taker_side,
                price: t.price,
                qty: t.qty,
                maker_user: t.maker_user,
                maker_order: t.maker_order,
            }),
            OwnedEvent::Cancelled(c) => out.push(Input::Cancelled {
                user: c.user,
                order: c.order,
                qty: c.qty,
            }),
            OwnedEvent::Amended(a) => amended = Some(a),
            _ => {}
        }
    }
    match cmd {
        Command::Place(p)
            if p.order_type == Some(OrderType::Limit)
                && matches!(p.tif, Some(Tif::Gtc | Tif::Gtd | Tif::Day)) =>
        {
            if let (Some(side), Some(price)) = (p.side, p.price) {
                out.push(Input::Placed {
                    ts_ns,
                    symbol: p.symbol,
                    side,
                    user: p.user,
                    order: p.order,
                    price,
                    qty: p.qty,
                });
            }
        }
        &Command::Move { user, order, price } => out.push(Input::Moved {
            ts_ns,
            user,
            order,
            price,
        }),
        Command::Amend(_) if amended.is_some() => {
            let a = amended.expect("checked");
            out.push(Input::Amended {
                ts_ns,
                user: a.user,
                order: a.order,
                price: a.price,
                qty: a.qty,
                kept: a.priority == Priority::Kept,
            });
        }
        // An amend that ended the order reported its cancellation, as a reduce does.
        // Any other command ends with `Done`, unless it changed nothing (a cancel of an order
        // that had already left, say).
        _ if out.len() > before => out.push(Input::Done { ts_ns }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Input>(), 48);
    }
}
