//! Trading phases, halts and auctions, and price bands (docs/rules.md, "Trading phases, halts
//! and auctions" and "Price bands").
//!
//! Each symbol keeps its [`MarketControls`]: the phase, the band in basis points, the reference
//! and last trade prices, and the band's edges worked out from them whenever one changes, so
//! that an order's checks and a taker's walk compare with two plain integers.
//!
//! The uncross that ends an auction works on the distinct prices of the crossed part of the
//! book only: the executable volume V and the imbalance I are step functions of the price that
//! change only at an order's price, so between two neighbouring order prices they are constant,
//! and one pass over the levels finds the equilibrium price E (O(levels), whatever the spread of
//! prices). The walk then pairs bids at or above E with asks at or below E, each side from the
//! front of its best level, at E.

use crate::engine::Engine;
use crate::event::{AuctionResult, Event, EventSink, Level, PhaseChanged, SymbolStatus, Trade};
use crate::types::{CancelReason, OrderType, Phase, Reason, Side, SymbolId, Tif};

/// A symbol's phase and its band's edges: what every new order of the symbol is checked
/// against, on a cache line of their own. The band itself (`spec.band_bps`) and the prices it
/// follows (`last_trade`, `reference`) live in the symbol's state; the edges are worked out
/// again whenever the band or the reference changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MarketControls {
    phase: Phase,
    /// `continuous` with no band: what a new order need not check further (the common case,
    /// one branch on the hot path).
    unrestricted: bool,
    /// `unrestricted` on a spot symbol: a plain order's move and a plain limit order's match
    /// take their short paths (no band, no phase, no margin), decided by this one byte.
    plain_spot: bool,
    /// The symbol is spot (not a future): fixed when it is listed.
    spot: bool,
    /// The highest price a buy may be placed at or trade at (`hi`), and the lowest for a sell
    /// (`lo`), clamped into i64 (a price is a positive i64, so clamping changes no comparison):
    /// `i64::MAX` and `i64::MIN` when there is no band.
    buy_edge: i64,
    sell_edge: i64,
}

impl MarketControls {
    /// `continuous`, no band, on a spot symbol (`spot`) or a future.
    pub fn new(spot: bool) -> MarketControls {
        MarketControls {
            phase: Phase::Continuous,
            unrestricted: true,
            plain_spot: spot,
            spot,
            buy_edge: i64::MAX,
            sell_edge: i64::MIN,
        }
    }

    #[inline]
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// True in `continuous` with no band: nothing of this module applies to a new order.
    #[inline]
    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// [`Self::unrestricted`] and the symbol is spot.
    #[inline]
    pub fn plain_spot(&self) -> bool {
        self.plain_spot
    }

    pub fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.refresh_unrestricted();
    }

    fn refresh_unrestricted(&mut self) {
        self.unrestricted = self.phase == Phase::Continuous
            && self.buy_edge == i64::MAX
            && self.sell_edge == i64::MIN;
        self.plain_spot = self.unrestricted && self.spot;
    }

    /// Works the edges out for reference `reference` (0: none) and a band of `band_bps` (0:
    /// none): `w = floor(R * band_bps / 10000)`, `hi = R + w`, `lo = R - w`, in 128 bits.
    pub fn refresh_edges(&mut self, reference: i64, band_bps: i64) {
        if band_bps == 0 || reference == 0 {
            (self.buy_edge, self.sell_edge) = (i64::MAX, i64::MIN);
            self.refresh_unrestricted();
            return;
        }
        let reference = reference as i128;
        // Both factors are i64 and >= 0: the product fits in i128.
        let width = reference * band_bps as i128 / 10_000;
        let clamp = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        self.buy_edge = clamp(reference + width);
        self.sell_edge = clamp(reference - width);
        self.refresh_unrestricted();
    }

    /// The band's edge for an order on `side`: the worst price it may trade at.
    #[inline]
    pub fn edge(&self, side: Side) -> i64 {
        match side {
            Side::Buy => self.buy_edge,
            Side::Sell => self.sell_edge,
        }
    }

    /// Whether `price` lies beyond the band's edge for an order on `side` (a buy above `hi`, a
    /// sell below `lo`).
    #[inline]
    pub fn beyond_edge(&self, side: Side, price: i64) -> bool {
        beyond_edge(side, self.edge(side), price)
    }
}

/// Whether `price` lies beyond `edge` for an order on `side`.
#[inline]
pub(crate) fn beyond_edge(side: Side, edge: i64, price: i64) -> bool {
    match side {
        Side::Buy => price > edge,
        Side::Sell => price < edge,
    }
}

/// What a symbol's phase says of a new order of this type and tif: `Ok` when it may be placed.
/// In an auction only orders that can rest, and stops whatever their tif (they wait), are
/// accepted.
pub(crate) fn phase_admits_order(
    phase: Phase,
    order_type: OrderType,
    tif: Tif,
) -> Result<(), Reason> {
    match phase {
        Phase::Continuous => Ok(()),
        Phase::Halted => Err(Reason::SymbolHalted),
        Phase::Closed => Err(Reason::SymbolClosed),
        Phase::Auction => {
            let pending_stop = matches!(order_type, OrderType::Stop | OrderType::StopLimit);
            let takes_at_once =
                order_type == OrderType::Market || matches!(tif, Tif::Ioc | Tif::Fok);
            if takes_at_once && !pending_stop {
                Err(Reason::SymbolInAuction)
            } else {
                Ok(())
            }
        }
    }
}

/// What a symbol's phase says of an amend or a move that does more than lower a quantity.
pub(crate) fn phase_admits_change(phase: Phase) -> Result<(), Reason> {
    match phase {
        Phase::Continuous | Phase::Auction => Ok(()),
        Phase::Halted => Err(Reason::SymbolHalted),
        Phase::Closed => Err(Reason::SymbolClosed),
    }
}

/// The uncross price and what executes there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Equilibrium {
    pub price: i64,
    /// V(E): the lots that execute.
    pub volume: i64,
    /// I(E) = B(E) - S(E).
    pub imbalance: i64,
}

/// The equilibrium of a crossed book (§6 steps 1-4). `bids` are the bid levels priced at or
/// above the best ask, best (highest) first; `asks` the ask levels priced at or below the best
/// bid, best (lowest) first; both non-empty. `reference` is the symbol's reference price, 0 for
/// none.
///
/// For a price p strictly between two neighbouring order prices q < q', no bid and no ask is
/// priced in (q, q'), so B(p) = B(q') and S(p) = S(q): such a run of prices is one candidate,
/// and so is each order price. Both are read in one ascending pass.
pub(crate) fn equilibrium(bids: &[Level], asks: &[Level], reference: i64) -> Equilibrium {
    debug_assert!(!bids.is_empty() && !asks.is_empty());
    // Totals are bounded by what the orders hold (deposits fit in i64); summed in i128 anyway.
    let bid_total: i128 = bids.iter().map(|l| l.qty as i128).sum();
    let mut best = Best::default();
    let (mut bid_i, mut ask_i) = (bids.len(), 0);
    // Bids priced below the current price, asks priced at or below it.
    let (mut bids_below, mut asks_upto) = (0i128, 0i128);
    loop {
        let next_bid = bid_i.checked_sub(1).map(|i| bids[i].price);
        let next_ask = asks.get(ask_i).map(|l| l.price);
        let Some(price) = min_some(next_bid, next_ask) else {
            break;
        };
        while ask_i < asks.len() && asks[ask_i].price == price {
            asks_upto += asks[ask_i].qty as i128;
            ask_i += 1;
        }
        best.consider(price, price, bid_total - bids_below, asks_upto);
        while bid_i > 0 && bids[bid_i - 1].price == price {
            bids_below += bids[bid_i - 1].qty as i128;
            bid_i -= 1;
        }
        let following = min_some(
            bid_i.checked_sub(1).map(|i| bids[i].price),
            asks.get(ask_i).map(|l| l.price),
        );
        if let Some(following) = following
            && following - price > 1
        {
            best.consider(price + 1, following - 1, bid_total - bids_below, asks_upto);
        }
    }
    let (x1, x2) = (best.low, best.high);
    let price = if best.all_buy_pressure {
        x2
    } else if best.all_sell_pressure {
        x1
    } else {
        let reference = if reference > 0 {
            reference
        } else {
            x1 + (x2 - x1) / 2
        };
        reference.clamp(x1, x2)
    };
    let buys: i128 = bids
        .iter()
        .filter(|l| l.price >= price)
        .map(|l| l.qty as i128)
        .sum();
    let sells: i128 = asks
        .iter()
        .filter(|l| l.price <= price)
        .map(|l| l.qty as i128)
        .sum();
    Equilibrium {
        price,
        volume: buys.min(sells) as i64,
        imbalance: (buys - sells) as i64,
    }
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The candidates kept so far: the largest V, then the smallest |I|, as the range of prices
/// [low, high] (one range: V rises then falls, and I only falls, as the price rises) and
/// whether I is positive, or negative, on all of it.
#[derive(Default)]
struct Best {
    volume: i128,
    abs_imbalance: i128,
    low: i64,
    high: i64,
    all_buy_pressure: bool,
    all_sell_pressure: bool,
}

impl Best {
    /// Prices `low..=high` (ascending across calls), with B = `buys` and S = `sells` on all of
    /// them.
    fn consider(&mut self, low: i64, high: i64, buys: i128, sells: i128) {
        let volume = buys.min(sells);
        let imbalance = buys - sells;
        if volume <= 0 {
            return;
        }
        let better =
            volume > self.volume || (volume == self.volume && imbalance.abs() < self.abs_imbalance);
        if better {
            *self = Best {
                volume,
                abs_imbalance: imbalance.abs(),
                low,
                high,
                all_buy_pressure: imbalance > 0,
                all_sell_pressure: imbalance < 0,
            };
        } else if volume == self.volume && imbalance.abs() == self.abs_imbalance {
            self.high = high;
            self.all_buy_pressure &= imbalance > 0;
            self.all_sell_pressure &= imbalance < 0;
        }
    }
}

impl Engine {
    /// `set_phase`: any phase may follow any. Entering `continuous` with a crossed book
    /// uncrosses it first; entering `closed` expires the symbol's DAY orders after the `phase`
    /// event.
    pub(crate) fn set_phase(
        &mut self,
        symbol: SymbolId,
        phase: Option<Phase>,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let s = symbol.0 as usize;
        if s >= self.symbols.len() {
            return Err(Reason::UnknownSymbol);
        }
        let phase = phase.ok_or(Reason::InvalidPhase)?;
        if self.symbols[s].controls.phase() == phase {
            return Ok(());
        }
        self.symbols[s].controls.set_phase(phase);
        let uncrossed = if phase == Phase::Continuous {
            self.uncross(s, sink)
        } else {
            None
        };
        sink.on_event(&Event::Phase(PhaseChanged { symbol, phase }));
        if phase == Phase::Closed {
            self.expire_day_orders(s, sink);
        }
        if let Some(price) = uncrossed {
            // The stop cascade of the uncross trades (all at E): `apply` runs it after this
            // command's own events, so after the `phase` event.
            self.note_walk(s, price, price);
        }
        Ok(())
    }

    /// `set_band`: the band in basis points of the reference price, 0 for none.
    pub(crate) fn set_band(&mut self, symbol: SymbolId, band_bps: i64) -> Result<(), Reason> {
        let sym = self
            .symbols
            .get_mut(symbol.0 as usize)
            .ok_or(Reason::UnknownSymbol)?;
        if band_bps < 0 {
            return Err(Reason::InvalidQty);
        }
        sym.spec.band_bps = band_bps;
        sym.controls.refresh_edges(sym.reference, band_bps);
        Ok(())
    }

    /// `set_ref_price`: the reference price until the next trade.
    pub(crate) fn set_ref_price(&mut self, symbol: SymbolId, price: i64) -> Result<(), Reason> {
        let sym = self
            .symbols
            .get_mut(symbol.0 as usize)
            .ok_or(Reason::UnknownSymbol)?;
        if price <= 0 {
            return Err(Reason::InvalidPrice);
        }
        sym.set_reference(price);
        Ok(())
    }

    /// A symbol's phase, last trade price, reference price and band; `None` for an unknown
    /// symbol.
    pub fn symbol_status(&self, symbol: SymbolId) -> Option<SymbolStatus> {
        let sym = self.symbols.get(symbol.0 as usize)?;
        Some(SymbolStatus {
            phase: sym.controls.phase(),
            last: sym.last_trade,
            reference: sym.reference,
            band_bps: sym.spec.band_bps,
            future: sym.future.is_some(),
            mark: sym.future.as_deref().map_or(0, |f| f.mark),
        })
    }

    /// Whether a new limit (or stop-limit) order on `side` at `price` is inside the band: a buy
    /// priced above `hi` or a sell below `lo` is `price_out_of_band`.
    #[inline]
    pub(crate) fn check_band(&self, symbol: usize, side: Side, price: i64) -> Result<(), Reason> {
        if self.symbols[symbol].controls.beyond_edge(side, price) {
            Err(Reason::PriceOutOfBand)
        } else {
            Ok(())
        }
    }

    /// Uncrosses symbol `s`'s book, if crossed, at one price (§6): trades, then the `auction`
    /// event. The uncross price when anything traded.
    fn uncross(&mut self, s: usize, sink: &mut impl EventSink) -> Option<i64> {
        let mut price = None;
        loop {
            let (traded, again) = self.uncross_once(s, sink);
            price = traded.or(price);
            if !again {
                return price;
            }
        }
    }

    /// One uncross at one price; `true` when a futures trade whose settlement would leave i64
    /// cancelled an order (reason `overflow`) and the rest must be uncrossed again.
    fn uncross_once(&mut self, s: usize, sink: &mut impl EventSink) -> (Option<i64>, bool) {
        let sym = &self.symbols[s];
        let (Some(best_bid), Some(best_ask)) =
            (sym.best_price(Side::Buy), sym.best_price(Side::Sell))
        else {
            return (None, false);
        };
        if best_bid < best_ask {
            return (None, false);
        }
        let (mut bids, mut asks) = (
            std::mem::take(&mut self.scratch_bids),
            std::mem::take(&mut self.scratch_asks),
        );
        self.crossed_levels(s, Side::Buy, best_ask, &mut bids);
        self.crossed_levels(s, Side::Sell, best_bid, &mut asks);
        let found = equilibrium(&bids, &asks, self.symbols[s].reference);
        (self.scratch_bids, self.scratch_asks) = (bids, asks);

        let (mut volume, mut again) = (0, false);
        while let (Some(bid_level), Some(ask_level)) = (
            self.symbols[s].best_level(Side::Buy),
            self.symbols[s].best_level(Side::Sell),
        ) {
            let bid_idx = self.levels.get(bid_level).head;
            let ask_idx = self.levels.get(ask_level).head;
            let (bid, ask) = (*self.orders.get(bid_idx), *self.orders.get(ask_idx));
            if bid.price < found.price || ask.price > found.price {
                break;
            }
            // Most uncross trades end an order: a chain of cache misses each (its account
            // neighbours, its id slot, the next order), started here to overlap.
            self.prefetch_ending(bid_idx);
            self.prefetch_ending(ask_idx);
            let qty = self.front_qty(bid_idx).min(self.front_qty(ask_idx));
            let terms = self.symbols[s].terms;
            if crate::engine::is_future(&terms)
                && let Err(side) = self.future_fill_fits(
                    s,
                    bid.account,
                    ask.account,
                    found.price,
                    qty,
                    terms.maker_fee,
                    terms.maker_fee,
                )
            {
                let victim = if side == Side::Buy { bid_idx } else { ask_idx };
                self.remove_live_order(victim, CancelReason::Overflow, sink);
                again = true;
                break;
            }
            self.uncross_trade(s, bid_idx, ask_idx, found.price, qty, sink);
            volume += qty;
        }
        debug_assert!(again || volume == found.volume, "the uncross executes V(E)");
        let sym = &self.symbols[s];
        debug_assert!(
            again
                || sym
                    .best_price(Side::Buy)
                    .zip(sym.best_price(Side::Sell))
                    .is_none_or(|(bid, ask)| bid < ask),
            "the book is crossed after the uncross"
        );
        if volume == 0 {
            return (None, again);
        }
        sink.on_event(&Event::Auction(AuctionResult {
            symbol: SymbolId(s as u32),
            price: found.price,
            qty: volume,
            imbalance: found.imbalance,
        }));
        (Some(found.price), again)
    }

    /// The levels of `side` that lie in the crossed part of the book (a bid at or above `limit`,
    /// the best ask; an ask at or below `limit`, the best bid), best first, with the quantity
    /// each holds.
    fn crossed_levels(&self, s: usize, side: Side, limit: i64, out: &mut Vec<Level>) {
        out.clear();
        let (levels, orders) = (&self.levels, &self.orders);
        for level in self.symbols[s].side(side).levels_best_first(levels) {
            let price = crate::book::level_price(levels, orders, level);
            if beyond_edge(side.opposite(), limit, price) {
                break;
            }
            out.push(Level {
                price,
                qty: self.level_quantity(s, level),
            });
        }
    }

    /// One uncross trade of `qty` between the buy order `bid_idx` and the sell order `ask_idx`
    /// at `price` (at or below the buy's price, at or above the sell's): both pay the maker fee;
    /// the buy's hold for those lots (at its own price, with the taker fee) is released and it
    /// pays from it. The sell is reported as the maker, the buy as the taker.
    fn uncross_trade(
        &mut self,
        s: usize,
        bid_idx: u32,
        ask_idx: u32,
        price: i64,
        qty: i64,
        sink: &mut impl EventSink,
    ) {
        let terms = self.symbols[s].terms;
        let (bid, ask) = (*self.orders.get(bid_idx), *self.orders.get(ask_idx));
        let fee = qty * terms.maker_fee;
        if crate::engine::is_future(&terms) {
            self.settle_future_fill(s, bid.account, ask.account, price, qty, fee, fee);
        } else {
            self.settle_spot_uncross(s, &bid, &ask, price, qty, fee);
        }
        self.currencies[terms.quote.0 as usize].fees += 2 * fee;
        self.symbols[s].traded_at(price);
        sink.on_event(&Event::Trade(Trade {
            symbol: SymbolId(s as u32),
            price,
            qty,
            maker_user: ask.user,
            maker_order: ask.order,
            taker_user: bid.user,
            taker_order: bid.order,
            taker_side: Side::Buy,
            maker_fee: fee,
            taker_fee: fee,
        }));
        self.take_from_front(s, bid_idx, qty);
        self.take_from_front(s, ask_idx, qty);
    }

    /// The balances of a spot uncross trade: the buy's hold for those lots (at its own price,
    /// with the taker fee) is released and it pays from it.
    fn settle_spot_uncross(
        &mut self,
        s: usize,
        bid: &crate::book::OrderNode,
        ask: &crate::book::OrderNode,
        price: i64,
        qty: i64,
        fee: i64,
    ) {
        let terms = self.symbols[s].terms;
        // Every product is bounded by the buy's hold, computed with checked arithmetic.
        let held = qty * (bid.price * terms.quote_scale + terms.taker_fee);
        let notional = price * qty * terms.quote_scale;
        let buyer = self.accounts.balance_mut(bid.account, terms.quote);
        buyer.held -= held;
        buyer.available += held - notional - fee;
        self.accounts.balance_mut(bid.account, terms.base).available += qty * terms.base_scale;
        self.accounts.balance_mut(ask.account, terms.base).held -= qty * terms.base_scale;
        self.accounts
            .balance_mut(ask.account, terms.quote)
            .available += notional - fee;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn levels(list: &[(i64, i64)]) -> Vec<Level> {
        list.iter()
            .map(|&(price, qty)| Level { price, qty })
            .collect()
    }

    /// The rulebook's example P2, row by row (prices only).
    #[test]
    fn equilibrium_follows_the_worked_examples() {
        let e = |bids: &[(i64, i64)], asks: &[(i64, i64)], r| {
            equilibrium(&levels(bids), &levels(asks), r).price
        };
        assert_eq!(e(&[(101, 3)], &[(99, 3)], 100), 100);
        assert_eq!(e(&[(101, 3)], &[(99, 3)], 105), 101);
        assert_eq!(e(&[(101, 3)], &[(99, 3)], 0), 100);
        assert_eq!(e(&[(101, 5)], &[(99, 3)], 0), 101);
        assert_eq!(e(&[(101, 3), (100, 1)], &[(99, 3), (101, 1)], 100), 100);
        assert_eq!(e(&[(101, 3), (100, 1)], &[(99, 3), (101, 1)], 110), 101);
        // P1: bids 5 @102, 3 @101; asks 4 @100, 2 @102 (the ask at 102 is in the crossed part).
        let p1 = equilibrium(
            &levels(&[(102, 5), (101, 3)]),
            &levels(&[(100, 4), (102, 2)]),
            0,
        );
        assert_eq!(
            p1,
            Equilibrium {
                price: 102,
                volume: 5,
                imbalance: -1
            }
        );
    }

    /// Against the definition itself, price by price, on small random crossed books.
    #[test]
    fn equilibrium_agrees_with_a_scan_of_every_price() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..2000 {
            let mut bids: Vec<(i64, i64)> = (0..1 + next(4))
                .map(|_| (90 + next(20) as i64, 1 + next(5) as i64))
                .collect();
            let mut asks: Vec<(i64, i64)> = (0..1 + next(4))
                .map(|_| (90 + next(20) as i64, 1 + next(5) as i64))
                .collect();
            let reference = [0, 85, 95, 100, 120][next(5) as usize];
            bids.sort_by_key(|l| std::cmp::Reverse(l.0));
            asks.sort();
            bids.dedup_by_key(|l| l.0);
            asks.dedup_by_key(|l| l.0);
            let (best_bid, best_ask) = (bids[0].0, asks[0].0);
            if best_bid < best_ask {
                continue;
            }
            let crossed_bids: Vec<_> = bids.iter().copied().filter(|l| l.0 >= best_ask).collect();
            let crossed_asks: Vec<_> = asks.iter().copied().filter(|l| l.0 <= best_bid).collect();
            let got = equilibrium(&levels(&crossed_bids), &levels(&crossed_asks), reference);
            assert_eq!(
                got,
                scan(&bids, &asks, reference),
                "{bids:?} {asks:?} r={reference}"
            );
        }
    }

    /// §6 read literally: every integer price from 1 to 200.
    fn scan(bids: &[(i64, i64)], asks: &[(i64, i64)], reference: i64) -> Equilibrium {
        let at = |p: i64| {
            let b: i64 = bids.iter().filter(|l| l.0 >= p).map(|l| l.1).sum();
            let s: i64 = asks.iter().filter(|l| l.0 <= p).map(|l| l.1).sum();
            (b.min(s), b - s)
        };
        let max_v = (1..200).map(|p| at(p).0).max().unwrap();
        let kept: Vec<i64> = (1..200).filter(|&p| at(p).0 == max_v).collect();
        let min_i = kept.iter().map(|&p| at(p).1.abs()).min().unwrap();
        let kept: Vec<i64> = kept
            .into_iter()
            .filter(|&p| at(p).1.abs() == min_i)
            .collect();
        let (x1, x2) = (kept[0], *kept.last().unwrap());
        let price = if kept.iter().all(|&p| at(p).1 > 0) {
            x2
        } else if kept.iter().all(|&p| at(p).1 < 0) {
            x1
        } else if reference > 0 {
            reference.clamp(x1, x2)
        } else {
            ((x1 + x2) / 2).clamp(x1, x2)
        };
        Equilibrium {
            price,
            volume: at(price).0,
            imbalance: at(price).1,
        }
    }
}
