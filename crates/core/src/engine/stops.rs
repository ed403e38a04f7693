//! Stop and stop-limit orders (docs/rules.md, "Stop and stop-limit orders").
//!
//! A pending stop is a live order like any other: it has a node in the same arena as resting
//! orders, is in the same id index and on its account's list (so `find_order`, `cancel`,
//! `reduce`, `mass_cancel`, `amend`, the order-id window, `limit_exceeded`, expiry and
//! suspension all find it), holds funds, and is ended by [`Engine::remove_live_order`]. Its node
//! is marked [`NodeKind::PendingStop`] and is in no level.
//!
//! Each symbol keeps its pending stops per side in a `Vec` sorted so that the next to trigger is
//! last: buy stops by stop price descending, sell stops ascending, ties by acceptance number
//! descending. Triggering pops from the end (O(1) each); nothing is scanned per trade.
//!
//! The cascade ([`Engine::run_stop_cascades`]) runs after a command's own events. A walk that
//! traded on a symbol with pending stops notes its first and last trade prices in the symbol's
//! `unexamined` list ([`Engine::note_walk`]): a walk's prices only get worse for its taker, so
//! the stops its trades trigger, in the order the rules give trade by trade, are those its
//! first trade triggers, then those its last one does.

use super::sell_price_below_fee;
use super::{
    CancelReason, Engine, Event, EventSink, OrderTerms, OrderType, Reason, Side, Taker, Tif,
};
use crate::book::NodeKind;
use crate::command::AmendOrder;
use crate::event::{Amended, Cancelled, PendingStop, Triggered};
use crate::types::{OrderId, Priority, Stp, SymbolId, UserId};

/// What only some live orders have, by node index (kept beside the nodes so that a node stays
/// one cache line): an iceberg's display quantity and hidden part, a pending stop's trigger.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OrderExtra {
    /// Iceberg: the quantity not shown.
    pub hidden: i64,
    /// Iceberg: the size of each slice.
    pub display: i64,
    /// Pending stop: its stop price.
    pub stop_price: i64,
    /// Pending stop: its acceptance number (ties in trigger order go to the lower).
    pub accept: u64,
    /// Pending stop: a limit order once triggered (`stop_limit`), else a market order.
    pub stop_limit: bool,
    /// Pending stop: the tif of the order it becomes.
    pub tif: Tif,
}

impl OrderExtra {
    pub const NONE: OrderExtra = OrderExtra {
        hidden: 0,
        display: 0,
        stop_price: 0,
        accept: 0,
        stop_limit: false,
        tif: Tif::Gtc,
    };
}

/// A pending stop in its symbol's trigger list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StopEntry {
    pub stop_price: i64,
    pub accept: u64,
    pub node: u32,
}

/// Where `entry` sorts in a `side` trigger list (ascending; the next to trigger last).
fn trigger_key(side: Side, entry: &StopEntry) -> (i64, std::cmp::Reverse<u64>) {
    // Stop prices are > 0, so negation cannot overflow.
    let price = match side {
        Side::Buy => -entry.stop_price,
        Side::Sell => entry.stop_price,
    };
    (price, std::cmp::Reverse(entry.accept))
}

/// Whether a `side` stop at `stop_price` triggers on a trade at `price`.
#[inline]
fn triggers(side: Side, stop_price: i64, price: i64) -> bool {
    match side {
        Side::Buy => price >= stop_price,
        Side::Sell => price <= stop_price,
    }
}

/// A pending stop's terms as [`Engine::accept_stop`] takes them.
pub(super) struct NewStop {
    pub account: u32,
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    /// Its limit (stop_limit) or protection (stop) price; `None` for a stop sell without one.
    pub price: Option<i64>,
    pub qty: i64,
    pub stp: Stp,
    pub stop_price: i64,
    pub stop_limit: bool,
    pub tif: Tif,
    /// When it expires, triggered or not (docs/rules.md, "GTD and DAY").
    pub expire_ts: i64,
}

impl Engine {
    /// `would_trigger`: whether a `side` stop at `stop_price` already holds against the last
    /// trade (never before the symbol's first trade).
    pub(crate) fn would_trigger(&self, symbol: usize, side: Side, stop_price: i64) -> bool {
        let last = self.symbols[symbol].last_trade;
        last > 0 && triggers(side, stop_price, last)
    }

    /// Makes node `idx` ready for `order_extras` (the table grows with the arena).
    #[inline]
    pub(super) fn ensure_extras(&mut self, idx: u32) {
        let need = idx as usize + 1;
        if self.order_extras.len() < need {
            self.order_extras.resize(need, OrderExtra::NONE);
        }
    }

    /// Accepts a new pending stop whose checks have passed and whose hold the caller has taken.
    #[cold]
    #[inline(never)]
    pub(super) fn accept_stop(&mut self, symbol: usize, stop: NewStop) {
        let taker = Taker {
            account: stop.account,
            user: stop.user,
            order: stop.order,
            side: stop.side,
            limit: stop.price,
            qty: stop.qty,
            stp: stop.stp,
            post_only: false,
            leftover: None,
            display: 0,
            liquidation: false,
            terms: OrderTerms {
                expire_ts: stop.expire_ts,
                tif: stop.tif,
            },
        };
        let idx = self.new_node(symbol, &taker, stop.qty, stop.price.unwrap_or(0), stop.qty);
        self.orders.get_mut(idx).kind = NodeKind::PendingStop;
        self.ensure_extras(idx);
        let extra = &mut self.order_extras[idx as usize];
        extra.stop_price = stop.stop_price;
        extra.stop_limit = stop.stop_limit;
        extra.tif = stop.tif;
        self.list_stop(idx);
        if super::is_future(&self.symbols[symbol].terms) {
            self.sync_future_order(idx);
        }
    }

    /// Enters pending stop `idx` in its symbol's trigger list with a new acceptance number.
    pub(super) fn list_stop(&mut self, idx: u32) {
        let node = *self.orders.get(idx);
        self.stop_accepts += 1;
        let extra = &mut self.order_extras[idx as usize];
        extra.accept = self.stop_accepts;
        let entry = StopEntry {
            stop_price: extra.stop_price,
            accept: extra.accept,
            node: idx,
        };
        let list = &mut self.symbols[node.symbol as usize].stops[node.side as usize];
        let key = trigger_key(node.side, &entry);
        let at = list.partition_point(|e| trigger_key(node.side, e) < key);
        list.insert(at, entry);
    }

    /// Takes pending stop `idx` out of its symbol's trigger list.
    #[cold]
    #[inline(never)]
    pub(super) fn unlist_stop(&mut self, idx: u32) {
        let node = *self.orders.get(idx);
        let extra = &self.order_extras[idx as usize];
        let entry = StopEntry {
            stop_price: extra.stop_price,
            accept: extra.accept,
            node: idx,
        };
        let list = &mut self.symbols[node.symbol as usize].stops[node.side as usize];
        let key = trigger_key(node.side, &entry);
        let at = list.partition_point(|e| trigger_key(node.side, e) < key);
        assert_eq!(list.get(at), Some(&entry), "a pending stop is in its list");
        list.remove(at);
    }

    /// Notes a walk's trades on `symbol`: the last trade price, and the trades for the stop
    /// cascade when the symbol has pending stops. The uncross of an auction notes its trades
    /// here too.
    #[inline]
    pub(crate) fn note_walk(&mut self, symbol: usize, first_price: i64, last_price: i64) {
        let sym = &mut self.symbols[symbol];
        sym.last_trade = last_price;
        if sym.stops[0].is_empty() && sym.stops[1].is_empty() {
            return;
        }
        self.note_walk_for_stops(symbol, first_price, last_price);
    }

    /// The part of [`Self::note_walk`] only a symbol with pending stops pays for.
    #[cold]
    #[inline(never)]
    fn note_walk_for_stops(&mut self, symbol: usize, first_price: i64, last_price: i64) {
        let sym = &mut self.symbols[symbol];
        if sym.unexamined.is_empty() {
            self.stop_dirty.push(symbol as u32);
            self.knock_on_pending = true;
        }
        sym.unexamined.push((first_price, last_price));
    }

    /// The stop cascade (docs/rules.md, "One command", step 3a) of every symbol with
    /// unexamined trades, symbols by name, each until a round collects nothing. `apply` runs it
    /// after each command's own events; anything else that trades (an uncross) runs it too.
    #[cold]
    #[inline(never)]
    pub(crate) fn run_stop_cascades(&mut self, sink: &mut impl EventSink) {
        while !self.stop_dirty.is_empty() {
            let (pos, _) = self
                .stop_dirty
                .iter()
                .enumerate()
                .min_by_key(|&(_, &s)| self.symbols[s as usize].spec.symbol)
                .expect("not empty");
            let symbol = self.stop_dirty.swap_remove(pos) as usize;
            self.run_stop_cascade(symbol, sink);
        }
    }

    /// One symbol's cascade: rounds of examining the unexamined trades, collecting the stops
    /// they trigger, and entering those (whose trades are the next round's).
    fn run_stop_cascade(&mut self, symbol: usize, sink: &mut impl EventSink) {
        let mut walks = std::mem::take(&mut self.scratch_walks);
        let mut triggered = std::mem::take(&mut self.scratch_triggered);
        loop {
            walks.clear();
            std::mem::swap(&mut walks, &mut self.symbols[symbol].unexamined);
            triggered.clear();
            for &(first, last) in &walks {
                self.collect_triggered(symbol, first, &mut triggered);
                if last != first {
                    self.collect_triggered(symbol, last, &mut triggered);
                }
            }
            if triggered.is_empty() {
                break;
            }
            for &idx in &triggered {
                self.trigger_stop(idx, sink);
            }
        }
        // A symbol noted again during its own cascade was examined to the end here.
        self.stop_dirty.retain(|&s| s as usize != symbol);
        self.symbols[symbol].unexamined.clear();
        self.scratch_walks = walks;
        self.scratch_triggered = triggered;
    }

    /// Takes the stops a trade at `price` triggers out of the trigger lists, in trigger order:
    /// buy stops (lowest stop price first), then sell stops (highest first).
    fn collect_triggered(&mut self, symbol: usize, price: i64, out: &mut Vec<u32>) {
        for side in [Side::Buy, Side::Sell] {
            let list = &mut self.symbols[symbol].stops[side as usize];
            while let Some(entry) = list.last()
                && triggers(side, entry.stop_price, price)
            {
                out.push(entry.node);
                list.pop();
            }
        }
    }

    /// Enters triggered stop `idx` (already out of its trigger list) as an incoming order with
    /// its own id, side, stp and held funds; no new funds check, no result of its own.
    fn trigger_stop(&mut self, idx: u32, sink: &mut impl EventSink) {
        let node = *self.orders.get(idx);
        let extra = self.order_extras[idx as usize];
        let symbol = node.symbol as usize;
        sink.on_event(&Event::Triggered(Triggered {
            symbol: SymbolId(node.symbol),
            user: node.user,
            order: node.order,
            side: node.side,
            stop_price: extra.stop_price,
        }));
        // It takes as the order it becomes; `execute` settles it from its released hold.
        self.release_hold(&node, node.remaining);
        self.orders.get_mut(idx).kind = NodeKind::Plain;
        let leftover = match (extra.stop_limit, extra.tif) {
            (false, _) => Some(CancelReason::Market),
            (true, Tif::Ioc | Tif::Fok) => Some(CancelReason::Ioc),
            (true, _) => None,
        };
        let taker = Taker {
            account: node.account,
            user: node.user,
            order: node.order,
            side: node.side,
            limit: (node.price > 0).then_some(node.price),
            qty: node.remaining,
            stp: node.stp,
            post_only: false,
            leftover,
            display: 0,
            liquidation: false,
            terms: self.order_info[idx as usize].terms,
        };
        if extra.tif == Tif::Fok && !self.fok_fillable(symbol, &taker) {
            sink.on_event(&Event::Cancelled(Cancelled {
                symbol: SymbolId(node.symbol),
                user: node.user,
                order: node.order,
                side: node.side,
                qty: node.remaining,
                reason: CancelReason::Fok,
            }));
            self.forget_order(idx);
            return;
        }
        self.execute(symbol, &taker, Some(idx), sink);
    }

    /// `amend` of a pending stop (its user and fields checked for presence): a new stop price,
    /// price and/or quantity. It keeps its place among the stops when its prices are unchanged
    /// and its quantity does not grow; otherwise it counts as a new acceptance. It never trades
    /// here.
    #[cold]
    #[inline(never)]
    pub(super) fn amend_stop(
        &mut self,
        idx: u32,
        amend: &AmendOrder,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        if amend.qty().is_some_and(|qty| qty <= 0) {
            return Err(Reason::InvalidQty);
        }
        let node = *self.orders.get(idx);
        let extra = self.order_extras[idx as usize];
        let symbol = node.symbol as usize;
        let terms = self.symbols[symbol].terms;
        if let Some(price) = amend.price()
            && (price <= 0
                || (node.side == Side::Sell
                    && sell_price_below_fee(price, &terms)
                    && !super::is_future(&terms)))
        {
            return Err(Reason::InvalidPrice);
        }
        if amend.stop_price().is_some_and(|stop| stop <= 0) {
            return Err(Reason::InvalidPrice);
        }
        // A pending stop has filled nothing, so any valid total is its new remaining.
        let remaining = amend.qty().unwrap_or(node.remaining);
        let price = amend.price().unwrap_or(node.price);
        let stop_price = amend.stop_price().unwrap_or(extra.stop_price);
        self.check_stop_amend_phase_and_band(idx, price, stop_price, remaining)?;
        if self.would_trigger(symbol, node.side, stop_price) {
            return Err(Reason::WouldTrigger);
        }
        let keeps_priority =
            price == node.price && stop_price == extra.stop_price && remaining <= node.remaining;
        let (currency, added_hold) =
            self.amended_hold(idx, &node, node.remaining, price, remaining)?;

        let balance = self.accounts.balance_mut(node.account, currency);
        balance.available -= added_hold;
        balance.held += added_hold;
        self.order_info[idx as usize].total = remaining;
        if !keeps_priority {
            self.unlist_stop(idx);
        }
        let n = self.orders.get_mut(idx);
        n.price = price;
        n.remaining = remaining;
        if !keeps_priority {
            self.order_extras[idx as usize].stop_price = stop_price;
            self.list_stop(idx);
        }
        sink.on_event(&Event::Amended(Amended {
            symbol: SymbolId(node.symbol),
            user: node.user,
            order: node.order,
            side: node.side,
            price,
            stop_price,
            qty: remaining,
            priority: if keeps_priority {
                Priority::Kept
            } else {
                Priority::Lost
            },
        }));
        Ok(())
    }

    /// A symbol's pending stops in trigger order (buy stops from the lowest stop price, then
    /// sell stops from the highest, ties in acceptance order), appended to `out`.
    pub fn pending_stops(&self, symbol: SymbolId, out: &mut Vec<PendingStop>) {
        let Some(sym) = self.symbols.get(symbol.0 as usize) else {
            return;
        };
        for side in [Side::Buy, Side::Sell] {
            for entry in sym.stops[side as usize].iter().rev() {
                let node = self.orders.get(entry.node);
                out.push(PendingStop {
                    user: node.user,
                    order: node.order,
                    side,
                    stop_price: entry.stop_price,
                    price: node.price,
                    remaining: node.remaining,
                });
            }
        }
    }

    /// Puts a pending stop from a snapshot in its trigger list (after those restored before
    /// it: snapshots list stops in trigger order). Holds come from the snapshot.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore_stop(
        &mut self,
        symbol: usize,
        account: u32,
        order: OrderId,
        side: Side,
        price: Option<i64>,
        qty: i64,
        stp: Stp,
        stop_price: i64,
        stop_limit: bool,
        tif: Tif,
        expire_ts: i64,
    ) {
        let stop = NewStop {
            account,
            user: self.accounts.user(account),
            order,
            side,
            price,
            qty,
            stp,
            stop_price,
            stop_limit,
            tif,
            expire_ts,
        };
        self.accept_stop(symbol, stop);
    }

    /// A pending stop's type (true: stop_limit) and tif.
    pub(crate) fn stop_terms(&self, idx: u32) -> (bool, Tif) {
        let extra = &self.order_extras[idx as usize];
        (extra.stop_limit, extra.tif)
    }

    /// The stop price of the live order in node `idx`, 0 when it is not a pending stop.
    pub(crate) fn stop_price_of(&self, idx: u32) -> i64 {
        match self.orders.get(idx).kind {
            NodeKind::PendingStop => self.order_extras[idx as usize].stop_price,
            NodeKind::Plain | NodeKind::Iceberg => 0,
        }
    }

    /// The type a live order reports: a pending stop's, else `limit`.
    /// The phase and the band for an amend of the pending stop in node `idx` to these terms: a
    /// halted or closed symbol takes only one that lowers the quantity; a stop-limit's new
    /// limit price must lie inside the band (docs/rules.md, "Trading phases", "Price bands").
    fn check_stop_amend_phase_and_band(
        &self,
        idx: u32,
        price: i64,
        stop_price: i64,
        remaining: i64,
    ) -> Result<(), Reason> {
        let node = self.orders.get(idx);
        let symbol = node.symbol as usize;
        let only_lowers_qty = price == node.price
            && stop_price == self.order_extras[idx as usize].stop_price
            && remaining < node.remaining;
        if !only_lowers_qty {
            crate::phases::phase_admits_change(self.symbols[symbol].controls.phase())?;
        }
        if price != node.price && self.order_type_of(idx) == OrderType::StopLimit {
            self.check_band(symbol, node.side, price)?;
        }
        Ok(())
    }

    pub(crate) fn order_type_of(&self, idx: u32) -> OrderType {
        match self.orders.get(idx).kind {
            NodeKind::PendingStop if self.order_extras[idx as usize].stop_limit => {
                OrderType::StopLimit
            }
            NodeKind::PendingStop => OrderType::Stop,
            NodeKind::Plain | NodeKind::Iceberg => OrderType::Limit,
        }
    }
}
