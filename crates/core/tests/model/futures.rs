//! Futures in the model (docs/rules.md, "Futures"), as the rules read: positions with exact
//! cost, realised PnL on every fill, cross margin per quote currency recomputed from the orders
//! each time, the liquidation pass over every user in id order, the insurance fund. Nothing is
//! kept up to date incrementally and there is no index: that is the engine's business.

use std::collections::BTreeMap;

use rialto_core::{
    CancelReason, Cancelled, Liquidated, Name, OwnedEvent, Phase, Reason, Side, Stp, SymbolId,
    SymbolKind, SymbolSpec, Tif, UserId,
};

use super::{MAX, Model, Taker};

/// A future's margins and mark.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fut {
    pub initial: i128,
    pub maintenance: i128,
    pub mark: i64,
}

/// A user's margin in one currency: available, unrealised, initial, maintenance, positions.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Margin {
    pub available: i128,
    pub unrealised: i128,
    pub initial: i128,
    pub maintenance: i128,
    pub positions: usize,
}

impl Margin {
    pub fn equity(&self) -> i128 {
        self.available + self.unrealised
    }
}

pub(super) fn is_fut(spec: &SymbolSpec) -> bool {
    matches!(spec.kind, Some(SymbolKind::Future { .. }))
}

fn sat(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, MAX) as i64
}

fn fits(v: i128) -> bool {
    (i64::MIN as i128..=MAX).contains(&v)
}

/// A position after a fill of `d` signed lots at `v` a lot, and the PnL realised; `None` when
/// a figure would leave i64.
fn after_fill(lots: i128, cost: i128, d: i128, v: i128) -> Option<(i128, i128, i128)> {
    let (mut n, mut k) = (lots, cost);
    let mut realised = 0;
    let mut open = d;
    if n != 0 && (n > 0) != (d > 0) {
        let closed = d.abs().min(n.abs());
        let r = k * closed / n.abs();
        k -= r;
        n += d.signum() * closed;
        if !fits(closed * v) {
            return None;
        }
        realised = -d.signum() * closed * v - r;
        open = d - d.signum() * closed;
    }
    if !fits(open * v) {
        return None;
    }
    n += open;
    k += open * v;
    (fits(n) && fits(k)).then_some((n, k, realised))
}

impl Model {
    pub(super) fn futures_of(&self, currency: &str) -> Vec<usize> {
        let mut out: Vec<usize> = (0..self.symbols.len())
            .filter(|&s| self.futs.contains_key(&s) && self.symbols[s].quote.as_str() == currency)
            .collect();
        out.sort_by_key(|&s| self.symbols[s].symbol);
        out
    }

    /// The user's live orders on future `s` as (order id, side, price, remaining): resting and
    /// pending stops.
    fn orders_on(&self, user: UserId, s: usize) -> Vec<(i64, Side, i64, i64)> {
        let book = &self.books[s];
        let mut out: Vec<_> = book
            .bids
            .iter()
            .chain(&book.asks)
            .filter(|o| o.user == user)
            .map(|o| (o.order, o.side, o.price, o.remaining))
            .collect();
        out.extend(
            self.stops[s]
                .iter()
                .filter(|st| st.user == user)
                .map(|st| (st.order, st.side, st.price.unwrap_or(0), st.remaining)),
        );
        out
    }

    /// The margin of `user` in `currency`, leaving out its order `skip` and counting `add`
    /// (symbol, side, price, lots) in.
    pub(super) fn margin(
        &self,
        user: UserId,
        currency: &str,
        skip: Option<i64>,
        add: Option<(usize, Side, i64, i64)>,
    ) -> Margin {
        let mut m = Margin {
            available: self.bal(user, currency).available,
            ..Margin::default()
        };
        for s in self.futures_of(currency) {
            let f = self.futs[&s];
            let qs = self.symbols[s].quote_scale as i128;
            let mark = f.mark as i128;
            let (n, k) = self.positions.get(&(user, s)).copied().unwrap_or((0, 0));
            if n != 0 {
                m.positions += 1;
                m.unrealised += n * mark * qs - k;
                m.maintenance = m.maintenance.saturating_add(f.maintenance * n.abs());
            }
            let mut orders: Vec<(Side, i64, i64)> = self
                .orders_on(user, s)
                .into_iter()
                .filter(|o| Some(o.0) != skip)
                .map(|o| (o.1, o.2, o.3))
                .collect();
            if let Some((a, side, price, lots)) = add
                && a == s
            {
                orders.push((side, price, lots));
            }
            let (mut buys, mut sells, mut open_loss) = (0i128, 0i128, 0i128);
            for (side, price, lots) in orders {
                let (p, l) = (price as i128, lots as i128);
                match side {
                    Side::Buy => {
                        buys += l;
                        open_loss += l * (p - mark).max(0) * qs;
                    }
                    Side::Sell => {
                        sells += l;
                        open_loss += l * (mark - p).max(0) * qs;
                    }
                }
            }
            if n != 0 || buys != 0 || sells != 0 {
                m.initial = m
                    .initial
                    .saturating_add(f.initial * (n + buys).max(sells - n) + open_loss);
            }
        }
        m
    }

    /// The check of a futures order entering or changing (`skip`: the order it replaces).
    pub(super) fn check_future_order(
        &self,
        user: UserId,
        s: usize,
        side: Side,
        price: i64,
        lots: i64,
        skip: Option<i64>,
    ) -> Result<(), Reason> {
        let f = self.futs[&s];
        let spec = self.symbols[s];
        let (n, _) = self.positions.get(&(user, s)).copied().unwrap_or((0, 0));
        let others: i128 = self
            .orders_on(user, s)
            .iter()
            .filter(|o| Some(o.0) != skip)
            .map(|o| o.3 as i128)
            .sum();
        let total = n.abs() + others + lots as i128;
        let exposure = total.checked_mul(price.max(f.mark) as i128 * spec.quote_scale as i128);
        if exposure.is_none_or(|e| e > MAX) {
            return Err(Reason::Overflow);
        }
        let currency = spec.quote.as_str();
        let before = self.margin(user, currency, None, None);
        let after = self.margin(user, currency, skip, Some((s, side, price, lots)));
        if after.initial > MAX {
            return Err(Reason::Overflow);
        }
        if after.equity() - after.initial >= 0 || after.initial <= before.initial {
            Ok(())
        } else {
            Err(Reason::InsufficientMargin)
        }
    }

    /// A spot hold or a withdrawal of `amount` in `currency`: `available + min(0, U) − IM >= 0`
    /// after it.
    pub(super) fn check_margin_after_spending(
        &self,
        user: UserId,
        currency: &str,
        amount: i128,
    ) -> Result<(), Reason> {
        let m = self.margin(user, currency, None, None);
        if m.positions == 0 && m.initial == 0 {
            return Ok(());
        }
        if m.available - amount + m.unrealised.min(0) - m.initial >= 0 {
            Ok(())
        } else {
            Err(Reason::InsufficientMargin)
        }
    }

    /// What an unpriced spot market buy may spend in `currency`.
    pub(super) fn spendable(&self, user: UserId, currency: &str) -> i128 {
        let m = self.margin(user, currency, None, None);
        let free = m.available + m.unrealised.min(0) - m.initial;
        free.min(m.available).max(0)
    }

    /// Whether a fill can be settled within i64; `Err(side)` names the side that cannot.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn future_fill_fits(
        &self,
        s: usize,
        buyer: UserId,
        seller: UserId,
        price: i64,
        qty: i64,
        buyer_fee_lot: i64,
        seller_fee_lot: i64,
    ) -> Result<(), Side> {
        let spec = self.symbols[s];
        let quote = spec.quote.as_str();
        let fees = self.currencies[quote].fees
            + qty as i128 * buyer_fee_lot as i128
            + qty as i128 * seller_fee_lot as i128;
        if !fits(fees) {
            return Err(Side::Buy);
        }
        let v = price as i128 * spec.quote_scale as i128;
        if !fits(v) {
            return Err(Side::Buy);
        }
        let mut oi = self.open_interest(s);
        for (user, d, fee, side) in [
            (buyer, qty, buyer_fee_lot, Side::Buy),
            (seller, -qty, seller_fee_lot, Side::Sell),
        ] {
            let (n, k) = self.positions.get(&(user, s)).copied().unwrap_or((0, 0));
            let Some((n2, _, realised)) = after_fill(n, k, d as i128, v) else {
                return Err(side);
            };
            let available = self.bal(user, quote).available + realised - qty as i128 * fee as i128;
            if !fits(available) {
                return Err(side);
            }
            oi += n2.max(0) - n.max(0);
        }
        if !fits(oi) {
            return Err(Side::Buy);
        }
        Ok(())
    }

    fn open_interest(&self, s: usize) -> i128 {
        self.positions
            .iter()
            .filter(|((_, sym), _)| *sym == s)
            .map(|(_, &(n, _))| n.max(0))
            .sum()
    }

    /// Settles one futures fill (checked with [`Self::future_fill_fits`]): both positions, the
    /// realised PnL and fees into `available`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle_future_fill(
        &mut self,
        s: usize,
        buyer: UserId,
        seller: UserId,
        price: i64,
        qty: i64,
        buyer_fee: i128,
        seller_fee: i128,
    ) {
        let spec = self.symbols[s];
        let quote = spec.quote.as_str().to_string();
        let v = price as i128 * spec.quote_scale as i128;
        for (user, d, fee) in [(buyer, qty, buyer_fee), (seller, -qty, seller_fee)] {
            let (n, k) = self.positions.get(&(user, s)).copied().unwrap_or((0, 0));
            let (n2, k2, realised) = after_fill(n, k, d as i128, v).expect("model: checked");
            if n2 == 0 {
                self.positions.remove(&(user, s));
            } else {
                self.positions.insert((user, s), (n2, k2));
            }
            self.bal_mut(user, &quote).available += realised - fee;
        }
        self.currencies.get_mut(&quote).unwrap().fees += buyer_fee + seller_fee;
        self.dirty.insert(quote);
    }

    pub(super) fn set_mark_price(&mut self, symbol: SymbolId, price: i64) -> Result<(), Reason> {
        let s = symbol.0 as usize;
        let spec = self.symbols.get(s).copied().ok_or(Reason::UnknownSymbol)?;
        let Some(f) = self.futs.get(&s).copied() else {
            return Err(Reason::InvalidSymbol);
        };
        if price <= 0 {
            return Err(Reason::InvalidPrice);
        }
        if f.mark == price {
            return Ok(());
        }
        let book = &self.books[s];
        let live: i128 = book
            .bids
            .iter()
            .chain(&book.asks)
            .map(|o| o.remaining as i128)
            .chain(self.stops[s].iter().map(|st| st.remaining as i128))
            .sum();
        let lots = self.open_interest(s) + live;
        if lots
            .checked_mul(price as i128 * spec.quote_scale as i128)
            .is_none_or(|v| v > MAX)
        {
            return Err(Reason::Overflow);
        }
        self.futs.get_mut(&s).unwrap().mark = price;
        self.dirty.insert(spec.quote.as_str().to_string());
        Ok(())
    }

    pub(super) fn fund_insurance(
        &mut self,
        currency: Name,
        amount: i64,
        tx: i64,
    ) -> Result<(), Reason> {
        if amount == 0 {
            return Err(Reason::InvalidQty);
        }
        if self.txs.contains(&tx) {
            return Err(Reason::DuplicateTx);
        }
        let name = currency.as_str().to_string();
        let totals = self.currencies.get(&name).copied().unwrap_or_default();
        let amount = amount as i128;
        if amount < 0 {
            if -amount > totals.insurance {
                return Err(Reason::InsufficientFunds);
            }
        } else if totals.deposits + amount > MAX || totals.insurance + amount > MAX {
            return Err(Reason::Overflow);
        }
        if self.txs.len() >= self.limits.max_tx_ids {
            return Err(Reason::LimitExceeded);
        }
        self.txs.insert(tx);
        let t = self.currencies.entry(name).or_default();
        t.insurance += amount;
        if amount > 0 {
            t.deposits += amount;
        } else {
            t.withdrawals -= amount;
        }
        Ok(())
    }

    /// Step 3b: passes for every currency whose futures traded or whose mark moved, and the
    /// stop cascades their closes start, until neither finds anything.
    pub(super) fn knock_on_futures(&mut self, events: &mut Vec<OwnedEvent>) {
        while !self.dirty.is_empty() {
            let from = events.len();
            let dirty = std::mem::take(&mut self.dirty);
            for currency in dirty {
                self.liquidation_pass(&currency, events);
            }
            self.stop_cascade(from, events);
        }
    }

    /// Every user, ascending by id, examined against the state at its turn.
    fn liquidation_pass(&mut self, currency: &str, events: &mut Vec<OwnedEvent>) {
        let users: Vec<UserId> = self.users.keys().copied().collect();
        for user in users {
            if self.liquidated.contains(&(user, currency.to_string())) {
                continue;
            }
            let m = self.margin(user, currency, None, None);
            let below = if m.positions > 0 {
                m.equity() < m.maintenance
            } else {
                m.available < 0
            };
            if below {
                self.liquidate(user, currency, m, events);
            }
        }
    }

    fn liquidate(
        &mut self,
        user: UserId,
        currency: &str,
        before: Margin,
        events: &mut Vec<OwnedEvent>,
    ) {
        self.liquidated.insert((user, currency.to_string()));
        // 1. Its orders on futures quoted in the currency and its spot orders holding it.
        let mut victims: Vec<(Name, i64)> = Vec::new();
        for (&(u, order), &symbol) in &self.live {
            if u != user {
                continue;
            }
            let spec = self.symbols[symbol.0 as usize];
            let side = match self.find(u, order) {
                Some((_, side, _)) => side,
                None => {
                    let (_, i) = self.find_stop(u, order).expect("model: live");
                    self.stops[symbol.0 as usize][i].side
                }
            };
            let holds = if is_fut(&spec) {
                spec.quote.as_str() == currency
            } else {
                match side {
                    Side::Buy => spec.quote.as_str() == currency,
                    Side::Sell => spec.base.as_str() == currency,
                }
            };
            if holds {
                victims.push((spec.symbol, order));
            }
        }
        victims.sort_by(|a, b| (a.0.as_str(), a.1).cmp(&(b.0.as_str(), b.1)));
        for (_, order) in victims {
            self.cancel_for(user, order, CancelReason::Liquidation, events)
                .expect("model: a live order");
        }
        // 2. Each position closed by an IOC market order, by symbol name.
        for s in self.futures_of(currency) {
            let Some(&(n, _)) = self.positions.get(&(user, s)) else {
                continue;
            };
            if self.controls[s].phase != Phase::Continuous {
                continue;
            }
            let taker = Taker {
                symbol: SymbolId(s as u32),
                user,
                order: 0,
                side: if n > 0 { Side::Sell } else { Side::Buy },
                price: None,
                remaining: n.abs() as i64,
                filled: 0,
                tif: Tif::Ioc,
                expire_ts: 0,
                market: true,
                stp: Stp::CancelMaker,
                post_only: false,
                display: 0,
                band: self.controls[s].band(),
                liquidation: true,
            };
            self.execute(self.symbols[s], taker, events);
        }
        // 3. The fund pays what a flat user owes.
        let flat = self
            .futures_of(currency)
            .iter()
            .all(|&s| !self.positions.contains_key(&(user, s)));
        let available = self.bal(user, currency).available;
        let shortfall = if flat && available < 0 {
            let fund = self.currencies[currency].insurance;
            let pay = (-available).min(fund - i64::MIN as i128);
            self.bal_mut(user, currency).available += pay;
            self.currencies.get_mut(currency).unwrap().insurance -= pay;
            pay
        } else {
            0
        };
        events.push(OwnedEvent::Liquidated(Liquidated {
            user,
            currency: Name::new(currency).unwrap(),
            equity: sat(before.equity()),
            maintenance: sat(before.maintenance),
            shortfall: sat(shortfall),
        }));
    }

    /// A futures taker's fill with `maker` would overflow: the maker is cancelled (and the
    /// walk goes on, `true`) or the taker stops (`false`).
    pub(super) fn overflow_gives_way(
        &mut self,
        spec: &SymbolSpec,
        taker: &Taker,
        maker_side: Side,
        lots: i64,
        events: &mut Vec<OwnedEvent>,
    ) -> Option<bool> {
        let s = taker.symbol.0 as usize;
        let maker = self.books[s].side(maker_side)[0];
        let (buyer, seller, bf, sf) = match taker.side {
            Side::Buy => (taker.user, maker.user, spec.taker_fee, spec.maker_fee),
            Side::Sell => (maker.user, taker.user, spec.maker_fee, spec.taker_fee),
        };
        let Err(side) = self.future_fill_fits(s, buyer, seller, maker.price, lots, bf, sf) else {
            return None;
        };
        if side == taker.side {
            return Some(false);
        }
        self.books[s].side_mut(maker_side).remove(0);
        self.unrest(spec, taker.symbol, &maker, maker.remaining);
        events.push(OwnedEvent::Cancelled(Cancelled {
            symbol: taker.symbol,
            user: maker.user,
            order: maker.order,
            side: maker.side,
            qty: maker.remaining,
            reason: CancelReason::Overflow,
        }));
        Some(true)
    }

    /// Positions of `user` as (symbol name, lots, cost), by symbol name.
    pub(super) fn positions_of(&self, user: UserId) -> Vec<rialto_core::Position> {
        let mut out: Vec<_> = self
            .positions
            .iter()
            .filter(|((u, _), _)| *u == user)
            .map(|(&(_, s), &(n, k))| rialto_core::Position {
                symbol: self.symbols[s].symbol,
                lots: n as i64,
                cost: k as i64,
            })
            .collect();
        out.sort_by_key(|p| p.symbol);
        out
    }

    /// The user's margin in every currency some future is quoted in, by currency name.
    pub(super) fn margins_of(&self, user: UserId) -> Vec<rialto_core::MarginReport> {
        self.currencies
            .keys()
            .filter(|c| !self.futures_of(c).is_empty())
            .map(|c| {
                let m = self.margin(user, c, None, None);
                rialto_core::MarginReport {
                    currency: Name::new(c).expect("a currency name"),
                    equity: sat(m.equity()),
                    initial: sat(m.initial),
                    maintenance: sat(m.maintenance),
                    available: sat(m.equity() - m.initial),
                }
            })
            .collect()
    }

    /// Σ cost of the positions in futures quoted in each currency.
    pub(super) fn position_costs(&self) -> BTreeMap<String, i128> {
        let mut out = BTreeMap::new();
        for (&(_, s), &(_, k)) in &self.positions {
            *out.entry(self.symbols[s].quote.as_str().to_string())
                .or_default() += k;
        }
        out
    }

    pub fn positions(&self) -> Vec<(UserId, Name, i64, i64)> {
        let mut out: Vec<_> = self
            .positions
            .iter()
            .map(|(&(u, s), &(n, k))| (u, self.symbols[s].symbol, n as i64, k as i64))
            .collect();
        out.sort_unstable();
        out
    }

    pub fn user_margin(&self, user: UserId, currency: &str) -> Option<(i64, i64, i64)> {
        self.users.get(&user)?;
        if !self.currencies.contains_key(currency) {
            return None;
        }
        let m = self.margin(user, currency, None, None);
        Some((sat(m.equity()), sat(m.initial), sat(m.maintenance)))
    }
}
