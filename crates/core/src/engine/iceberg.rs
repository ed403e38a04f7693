//! Iceberg orders (docs/rules.md, "Iceberg orders"): what rests shows a slice of at most the
//! display quantity; the rest is hidden. The node's `remaining` is the shown slice (so levels sum
//! shown quantities, and the book and market data show nothing else); the hidden rest and the
//! display quantity are in the engine's `order_extras`, which an ordinary order never reads.
//!
//! When a taker uses up a slice and quantity is hidden, a new slice joins the back of the same
//! level ([`Engine::next_slice`]), and the walk goes on (it may meet the iceberg again there).

use super::{Engine, Reason, Side, Taker, buy_hold, sell_price_below_fee};
use crate::book::NodeKind;
use crate::event::EventSink;

impl Engine {
    /// Splits `rest`, the quantity an order of display quantity `display` (0: not an iceberg)
    /// leaves on the book in node `idx`, into the slice it shows (returned) and the hidden part
    /// (kept in `order_extras`), and marks the node as what it is.
    #[inline]
    pub(super) fn set_slices(&mut self, idx: u32, display: i64, rest: i64) -> i64 {
        if display == 0 {
            debug_assert!(self.orders.get(idx).kind != NodeKind::Iceberg);
            return rest;
        }
        self.set_iceberg_slices(idx, display, rest)
    }

    /// [`Self::set_slices`] for an iceberg.
    #[cold]
    #[inline(never)]
    fn set_iceberg_slices(&mut self, idx: u32, display: i64, rest: i64) -> i64 {
        let shown = display.min(rest);
        self.ensure_extras(idx);
        let extra = &mut self.order_extras[idx as usize];
        extra.display = display;
        extra.hidden = rest - shown;
        self.mark_iceberg(idx);
        shown
    }

    /// The display quantity of the order in node `idx`; 0 when it is not an iceberg.
    #[inline]
    pub(crate) fn display_of(&self, idx: u32) -> i64 {
        match self.orders.get(idx).kind {
            NodeKind::Iceberg => self.order_extras[idx as usize].display,
            NodeKind::Plain | NodeKind::PendingStop => 0,
        }
    }

    /// An iceberg's slice in node `idx` has just been used up (its `remaining` is still the
    /// slice's, as its level's total counts it) and quantity is hidden: a new slice joins the
    /// back of the same level.
    #[cold]
    #[inline(never)]
    pub(super) fn next_slice(&mut self, symbol: usize, idx: u32) {
        let side = self.orders.get(idx).side;
        let extra = &mut self.order_extras[idx as usize];
        let slice = extra.display.min(extra.hidden);
        debug_assert!(
            slice > 0,
            "a used-up slice with nothing hidden ends the order"
        );
        extra.hidden -= slice;
        let sym = &mut self.symbols[symbol];
        sym.unlink(side, &mut self.levels, &mut self.orders, idx);
        self.orders.get_mut(idx).remaining = slice;
        sym.push_back(side, &mut self.levels, &mut self.orders, idx);
    }

    /// Takes `qty` lots (fewer than its whole remaining) from the live order in node `idx`
    /// without moving it: an iceberg loses hidden quantity first, so what it shows becomes
    /// `min(shown, new remaining)` (docs/rules.md: a reduce keeps priority). The caller keeps
    /// holds and totals.
    #[inline]
    pub(super) fn take_from_remaining(&mut self, idx: u32, mut qty: i64) {
        let node = *self.orders.get(idx);
        if node.kind == NodeKind::Iceberg {
            let extra = &mut self.order_extras[idx as usize];
            let from_hidden = qty.min(extra.hidden);
            extra.hidden -= from_hidden;
            qty -= from_hidden;
        }
        if qty == 0 {
            return;
        }
        debug_assert!(qty < node.remaining, "a reduce leaves something shown");
        self.orders.get_mut(idx).remaining -= qty;
        if node.kind != NodeKind::PendingStop {
            self.levels.get_mut(node.level).total -= qty;
        }
    }

    /// `move` of an iceberg (its price checked): it leaves its level and enters again at
    /// `price` for its whole remaining quantity, as a move enters any order; what rests shows a
    /// fresh slice.
    #[cold]
    #[inline(never)]
    pub(super) fn move_iceberg(
        &mut self,
        idx: u32,
        price: i64,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let node = *self.orders.get(idx);
        let symbol = node.symbol as usize;
        let terms = self.symbols[symbol].terms;
        debug_assert!(
            !(node.side == Side::Sell && sell_price_below_fee(price, &terms))
                || super::is_future(&terms)
        );
        let remaining = self.live_remaining(idx);
        // Nothing takes during an auction's call (docs/rules.md, "Trading phases").
        let auction = self.symbols[symbol].controls.phase() == crate::types::Phase::Auction;
        if node.post_only && !auction && self.crosses_best(symbol, node.side, Some(price)) {
            return Err(Reason::WouldTake);
        }
        if super::is_future(&terms) {
            self.check_future_order(node.account, symbol, node.side, price, remaining, idx)?;
        } else if node.side == Side::Buy {
            let new_hold = buy_hold(remaining, price, &terms).ok_or(Reason::Overflow)?;
            let (_, old_hold) = self.resting_hold(&node, remaining);
            let balance = self.accounts.balance(node.account, terms.quote);
            let added_hold = new_hold - old_hold;
            if added_hold > balance.available {
                return Err(Reason::InsufficientFunds);
            }
            if added_hold > 0 && self.accounts.get(node.account).futures {
                self.check_margin_after_spending(node.account, terms.quote, added_hold)?;
                self.note_stale_margin(node.account, terms.quote);
            }
        }
        self.symbols[symbol].unlink(node.side, &mut self.levels, &mut self.orders, idx);
        self.release_hold(&node, remaining);
        let taker = Taker {
            account: node.account,
            user: node.user,
            order: node.order,
            side: node.side,
            limit: Some(price),
            qty: remaining,
            stp: node.stp,
            post_only: node.post_only,
            leftover: None,
            display: self.order_extras[idx as usize].display,
            terms: self.order_info[idx as usize].terms,
            liquidation: false,
        };
        self.execute(symbol, &taker, Some(idx), sink);
        Ok(())
    }
}

impl Engine {
    /// Makes resting order `idx` (restored from a snapshot with its shown slice) an iceberg of
    /// display quantity `display` with `hidden` more lots (the decoder checks its hold).
    pub(crate) fn restore_iceberg(&mut self, idx: u32, display: i64, hidden: i64) {
        let shown = self.orders.get(idx).remaining;
        self.ensure_extras(idx);
        let extra = &mut self.order_extras[idx as usize];
        extra.display = display;
        extra.hidden = hidden;
        self.mark_iceberg(idx);
        self.order_info[idx as usize].total += hidden;
        debug_assert!(shown <= display);
    }
}
