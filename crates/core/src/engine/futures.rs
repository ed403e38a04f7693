//! Futures in margin mode (docs/rules.md, "Futures"): positions with exact cost, realised PnL
//! on every fill, cross margin per quote currency, the mark price, liquidation and the
//! insurance fund.
//!
//! A future is a symbol whose `terms.base` is [`FUTURE_BASE`]: the spot path tells the two
//! apart from the first line of the symbol it has already loaded, and only branches where a
//! future settles differently (a fill, a hold, a margin check).
//!
//! **The liquidation index.** A liquidation pass must find the users below maintenance margin
//! without examining every position holder. For a user whose only position in a currency is
//! one future `s`, `E − MM` is linear in the mark of `s`: a long (N > 0) is below maintenance
//! exactly when `mark < ceil((K + mm·N − available) / (N·qs))`, a short exactly when `mark >
//! floor((available − K − mm·|N|) / (|N|·qs))`. That bound is the user's key in `s`'s `longs` or
//! `shorts` (ordered sets), recomputed whenever the user's position or `available` in that
//! currency changes ([`Engine::rekey`]). A pass reads only the keys past the mark: O(log n + k)
//! for k users at risk out of n. Users with positions in two or more futures of the currency,
//! or with none and `available < 0`, are in `always` and examined at every pass of their
//! currency (their bound would depend on several marks). A stale key can only be too cautious
//! (see [`Engine::note_stale_margin`]), so it costs an examination, never a missed
//! liquidation.

use std::collections::{BTreeMap, BTreeSet};

use super::{CancelReason, Engine, EventSink, OrderTerms, Side, Taker};
use crate::book::NIL;
use crate::event::{Event, Liquidated, MarginReport, Position};
use crate::types::{CurrencyId, Name, Phase, Reason, Stp, SymbolId, UserId};

/// `terms.base` of a future: its base names the underlying and is no currency.
pub(crate) const FUTURE_BASE: CurrencyId = CurrencyId(u32::MAX);

/// Whether a symbol of these terms is a future.
#[inline(always)]
pub(crate) fn is_future(terms: &super::Terms) -> bool {
    terms.base == FUTURE_BASE
}

/// A future's own state beside its book.
pub(crate) struct FutureBook {
    pub initial_margin: i64,
    pub maintenance_margin: i64,
    pub mark: i64,
    /// The sum of all long positions, lots (`set_mark_price` checks it times the price).
    pub open_interest: i64,
    /// Users whose only position in the currency is long here: (liquidation bound, user,
    /// account); below maintenance when the mark is below the bound.
    pub longs: BTreeSet<(i128, UserId, u32)>,
    /// The same for shorts; below maintenance when the mark is above the bound.
    pub shorts: BTreeSet<(i128, UserId, u32)>,
}

/// A position: signed lots and signed cost (quote minor units).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PositionState {
    pub lots: i64,
    pub cost: i64,
}

/// Where a (user, currency) sits in the liquidation index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RiskKey {
    Long(u32, i128),
    Short(u32, i128),
    Always,
}

/// The engine's futures state.
#[derive(Default)]
pub(crate) struct Futures {
    /// (account, symbol) to its open position; flat positions are removed.
    pub positions: BTreeMap<(u32, u32), PositionState>,
    /// (account, currency) to its place in the liquidation index.
    pub risk: BTreeMap<(u32, u32), RiskKey>,
    /// (currency, user, account) examined at every pass of the currency.
    pub always: BTreeSet<(u32, UserId, u32)>,
    /// Per currency id, its futures' symbol ids, by symbol name.
    pub futures_of: Vec<Vec<u32>>,
    /// Currencies whose futures traded or whose mark moved since the last pass.
    pub dirty: Vec<u32>,
    dirty_spare: Vec<u32>,
    /// (account, currency) whose `available` may have fallen since their key was computed.
    pub stale: Vec<(u32, u32)>,
    /// (account, currency) liquidated during the current command.
    pub liquidated: Vec<(u32, u32)>,
    scratch_candidates: Vec<(UserId, u32)>,
}

/// A user's margin in one currency (docs/rules.md, "Futures"), all in 128 bits.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Margin {
    pub available: i64,
    pub unrealised: i128,
    pub initial: i128,
    pub maintenance: i128,
    pub positions: u32,
}

impl Margin {
    pub fn equity(&self) -> i128 {
        self.available as i128 + self.unrealised
    }
}

/// An order counted differently in a margin computation: the order in node `skip` is left out
/// (NIL: none) and `add`, (symbol, side, price, lots), is counted in.
#[derive(Clone, Copy)]
pub(crate) struct OrderChange {
    pub skip: u32,
    pub add: Option<(u32, Side, i64, i64)>,
}

impl OrderChange {
    pub const NONE: OrderChange = OrderChange {
        skip: NIL,
        add: None,
    };
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl Engine {
    /// The futures of currency `c`, by symbol name.
    pub(crate) fn futures_of(&self, c: CurrencyId) -> &[u32] {
        self.fut
            .futures_of
            .get(c.0 as usize)
            .map_or(&[][..], |v| v.as_slice())
    }

    pub(crate) fn future_book(&self, symbol: usize) -> &FutureBook {
        self.symbols[symbol]
            .future
            .as_deref()
            .expect("a future has its book")
    }

    fn future_book_mut(&mut self, symbol: usize) -> &mut FutureBook {
        self.symbols[symbol]
            .future
            .as_deref_mut()
            .expect("a future has its book")
    }

    /// Registers future `symbol` (just added) with its quote currency.
    pub(crate) fn list_future(&mut self, symbol: u32, quote: CurrencyId) {
        let q = quote.0 as usize;
        if self.fut.futures_of.len() <= q {
            self.fut.futures_of.resize_with(q + 1, Vec::new);
        }
        let name = self.symbols[symbol as usize].spec.symbol;
        let list = &self.fut.futures_of[q];
        let at = list.partition_point(|&s| self.symbols[s as usize].spec.symbol < name);
        self.fut.futures_of[q].insert(at, symbol);
    }

    /// The margin of `account` in currency `c`, with `change` applied to its orders. Costs the
    /// user's futures in `c` times its live orders.
    pub(crate) fn margin(&self, account: u32, c: CurrencyId, change: OrderChange) -> Margin {
        let mut m = Margin {
            available: self.accounts.balance(account, c).available,
            ..Margin::default()
        };
        for &s in self.futures_of(c) {
            let sym = &self.symbols[s as usize];
            let book = sym.future.as_deref().expect("a future");
            let (qs, mark) = (sym.terms.quote_scale as i128, book.mark as i128);
            let pos = self
                .fut
                .positions
                .get(&(account, s))
                .copied()
                .unwrap_or_default();
            let (n, k) = (pos.lots as i128, pos.cost as i128);
            if n != 0 {
                m.positions += 1;
                m.unrealised += n * mark * qs - k;
                m.maintenance += book.maintenance_margin as i128 * n.abs();
            }
            let (mut buys, mut sells, mut open_loss) = (0i128, 0i128, 0i128);
            let mut count = |side: Side, price: i64, lots: i64| {
                let (price, lots) = (price as i128, lots as i128);
                match side {
                    Side::Buy => {
                        buys += lots;
                        open_loss += lots * (price - mark).max(0) * qs;
                    }
                    Side::Sell => {
                        sells += lots;
                        open_loss += lots * (mark - price).max(0) * qs;
                    }
                }
            };
            let mut idx = self.accounts.get(account).orders_head;
            while idx != NIL {
                let node = self.orders.get(idx);
                if node.symbol == s && idx != change.skip {
                    count(node.side, node.price, self.live_remaining(idx));
                }
                idx = node.account_next;
            }
            if let Some((symbol, side, price, lots)) = change.add
                && symbol == s
            {
                count(side, price, lots);
            }
            if n != 0 || buys != 0 || sells != 0 {
                m.initial += book.initial_margin as i128 * (n + buys).max(sells - n) + open_loss;
            }
        }
        m
    }

    /// The margin check of a futures order entering, moving or changing (docs/rules.md,
    /// "Futures"): `overflow` when its exposure or the margin leaves i64; accepted when equity
    /// covers the initial margin after it or it does not raise the initial margin.
    pub(crate) fn check_future_order(
        &self,
        account: u32,
        symbol: usize,
        side: Side,
        price: i64,
        lots: i64,
        skip: u32,
    ) -> Result<(), Reason> {
        let sym = &self.symbols[symbol];
        let c = sym.terms.quote;
        let book = self.future_book(symbol);
        // The exposure on this future after the change: |N| + PB + PS (+ this order).
        let pos = self
            .fut
            .positions
            .get(&(account, symbol as u32))
            .copied()
            .unwrap_or_default();
        let mut lots_total = pos.lots.unsigned_abs() as i128 + lots as i128;
        let mut idx = self.accounts.get(account).orders_head;
        while idx != NIL {
            let node = self.orders.get(idx);
            if node.symbol == symbol as u32 && idx != skip {
                lots_total += self.live_remaining(idx) as i128;
            }
            idx = node.account_next;
        }
        let exposure = lots_total * price.max(book.mark) as i128 * sym.terms.quote_scale as i128;
        if exposure > i64::MAX as i128 {
            return Err(Reason::Overflow);
        }
        let before = self.margin(account, c, OrderChange::NONE);
        let after = self.margin(
            account,
            c,
            OrderChange {
                skip,
                add: Some((symbol as u32, side, price, lots)),
            },
        );
        if after.initial > i64::MAX as i128 {
            return Err(Reason::Overflow);
        }
        if after.equity() - after.initial >= 0 || after.initial <= before.initial {
            Ok(())
        } else {
            Err(Reason::InsufficientMargin)
        }
    }

    /// The margin check of a spot hold or a withdrawal of `amount` in currency `c` by a user
    /// who may have futures exposure: `available + min(0, U) − IM >= 0` after it.
    #[cold]
    #[inline(never)]
    pub(crate) fn check_margin_after_spending(
        &self,
        account: u32,
        c: CurrencyId,
        amount: i64,
    ) -> Result<(), Reason> {
        let m = self.margin(account, c, OrderChange::NONE);
        if m.positions == 0 && m.initial == 0 {
            return Ok(());
        }
        let left = m.available as i128 - amount as i128 + m.unrealised.min(0) - m.initial;
        if left >= 0 {
            Ok(())
        } else {
            Err(Reason::InsufficientMargin)
        }
    }

    /// What an unpriced spot market buy by a user with futures exposure may spend in `c`.
    #[cold]
    #[inline(never)]
    pub(crate) fn spendable_under_margin(&self, account: u32, c: CurrencyId) -> i64 {
        let m = self.margin(account, c, OrderChange::NONE);
        let free = m.available as i128 + m.unrealised.min(0) - m.initial;
        saturate(free.min(m.available as i128)).max(0)
    }

    /// `available` of `account` in `c` may have fallen (a spot hold or spend): its key is
    /// refreshed after the command.
    #[cold]
    #[inline(never)]
    pub(crate) fn note_stale_margin(&mut self, account: u32, c: CurrencyId) {
        if !self.futures_of(c).is_empty() {
            self.fut.stale.push((account, c.0));
        }
    }

    /// One fill of a future: `qty` lots at `price` between the buyer and the seller, each
    /// paying its fee from `available` of the quote (docs/rules.md, "Futures").
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn settle_future_fill(
        &mut self,
        symbol: usize,
        buyer: u32,
        seller: u32,
        price: i64,
        qty: i64,
        buyer_fee: i64,
        seller_fee: i64,
    ) {
        let terms = self.symbols[symbol].terms;
        let v = price as i128 * terms.quote_scale as i128;
        for (account, d, fee) in [(buyer, qty, buyer_fee), (seller, -qty, seller_fee)] {
            let (realised, oi_change) = self.apply_position_fill(account, symbol as u32, d, v);
            let balance = self.accounts.balance_mut(account, terms.quote);
            let available = balance.available as i128 + realised - fee as i128;
            balance.available =
                i64::try_from(available).expect("a futures balance fits i64 (overflow checks)");
            let book = self.future_book_mut(symbol);
            book.open_interest += oi_change;
            self.accounts.get_mut(account).futures = true;
            self.rekey(account, terms.quote);
        }
        self.mark_dirty(terms.quote);
    }

    /// Applies a fill of `d` signed lots at value `v` a lot to a position: returns the realised
    /// PnL and the change of the open interest.
    fn apply_position_fill(&mut self, account: u32, symbol: u32, d: i64, v: i128) -> (i128, i64) {
        let pos = self
            .fut
            .positions
            .get(&(account, symbol))
            .copied()
            .unwrap_or_default();
        let (mut n, mut k, d) = (pos.lots as i128, pos.cost as i128, d as i128);
        let mut realised = 0;
        let mut opening = d;
        if n != 0 && (n > 0) != (d > 0) {
            let closed = d.abs().min(n.abs());
            // Toward zero, exact: the cost of the lots closed.
            let r = k * closed / n.abs();
            k -= r;
            n += d.signum() * closed;
            realised = -d.signum() * closed * v - r;
            opening = d - d.signum() * closed;
        }
        n += opening;
        k += opening * v;
        debug_assert!(n != 0 || k == 0, "a flat position has no cost");
        let lots = i64::try_from(n).expect("lots fit i64");
        let cost = i64::try_from(k).expect("a position's cost fits i64 (overflow checks)");
        if lots == 0 {
            self.fut.positions.remove(&(account, symbol));
        } else {
            self.fut
                .positions
                .insert((account, symbol), PositionState { lots, cost });
        }
        (realised, lots.max(0) - pos.lots.max(0))
    }

    pub(crate) fn mark_dirty(&mut self, c: CurrencyId) {
        if !self.fut.dirty.contains(&c.0) {
            self.fut.dirty.push(c.0);
        }
    }

    /// Puts (account, c) where it belongs in the liquidation index (see the module's doc).
    pub(crate) fn rekey(&mut self, account: u32, c: CurrencyId) {
        let user = self.accounts.user(account);
        match self.fut.risk.remove(&(account, c.0)) {
            Some(RiskKey::Long(s, key)) => {
                self.future_book_mut(s as usize)
                    .longs
                    .remove(&(key, user, account));
            }
            Some(RiskKey::Short(s, key)) => {
                self.future_book_mut(s as usize)
                    .shorts
                    .remove(&(key, user, account));
            }
            Some(RiskKey::Always) => {
                self.fut.always.remove(&(c.0, user, account));
            }
            None => {}
        }
        let available = self.accounts.balance(account, c).available as i128;
        let mut held = None;
        let mut count = 0;
        for &s in self.futures_of(c) {
            if let Some(&pos) = self.fut.positions.get(&(account, s)) {
                count += 1;
                held = Some((s, pos));
            }
        }
        let key = match (count, held) {
            (0, _) if available < 0 => RiskKey::Always,
            (0, _) => return,
            (1, Some((s, pos))) => {
                let sym = &self.symbols[s as usize];
                let book = sym.future.as_deref().expect("a future");
                let (n, k) = (pos.lots as i128, pos.cost as i128);
                let (mm, qs) = (
                    book.maintenance_margin as i128,
                    sym.terms.quote_scale as i128,
                );
                if n > 0 {
                    let t = k + mm * n - available;
                    // ceil(t / (n * qs)) with a positive divisor.
                    RiskKey::Long(s, -((-t).div_euclid(n * qs)))
                } else {
                    let s_bound = available - k - mm * n.abs();
                    RiskKey::Short(s, s_bound.div_euclid(n.abs() * qs))
                }
            }
            _ => RiskKey::Always,
        };
        match key {
            RiskKey::Long(s, bound) => {
                self.future_book_mut(s as usize)
                    .longs
                    .insert((bound, user, account));
            }
            RiskKey::Short(s, bound) => {
                self.future_book_mut(s as usize)
                    .shorts
                    .insert((bound, user, account));
            }
            RiskKey::Always => {
                self.fut.always.insert((c.0, user, account));
            }
        }
        self.fut.risk.insert((account, c.0), key);
    }

    /// Refreshes the keys of users whose `available` may have fallen.
    #[cold]
    #[inline(never)]
    pub(crate) fn refresh_stale_keys(&mut self) {
        let mut stale = std::mem::take(&mut self.fut.stale);
        for &(account, c) in &stale {
            self.rekey(account, CurrencyId(c));
        }
        stale.clear();
        self.fut.stale = stale;
    }

    /// Step 3b (docs/rules.md, "One command"): a liquidation pass for every currency whose
    /// futures traded or whose mark moved, currencies by name.
    #[cold]
    #[inline(never)]
    pub(crate) fn run_liquidation_passes(&mut self, sink: &mut impl EventSink) {
        if !self.fut.stale.is_empty() {
            self.refresh_stale_keys();
        }
        let mut dirty = std::mem::take(&mut self.fut.dirty);
        self.fut.dirty = std::mem::take(&mut self.fut.dirty_spare);
        dirty.sort_unstable_by_key(|&c| self.currencies[c as usize].name);
        for &c in &dirty {
            self.liquidation_pass(CurrencyId(c), sink);
        }
        dirty.clear();
        self.fut.dirty_spare = dirty;
    }

    /// One pass over currency `c`: the users the index puts at risk, ascending by id, each
    /// checked against the state at its turn.
    fn liquidation_pass(&mut self, c: CurrencyId, sink: &mut impl EventSink) {
        let mut after: Option<UserId> = None;
        loop {
            let mut candidates = std::mem::take(&mut self.fut.scratch_candidates);
            candidates.clear();
            for &s in self.futures_of(c) {
                let book = self.future_book(s as usize);
                let mark = book.mark as i128;
                let longs = book.longs.range((mark + 1, UserId::MIN, 0)..);
                let shorts = book.shorts.range(..(mark, UserId::MIN, 0));
                candidates.extend(
                    longs
                        .chain(shorts)
                        .map(|&(_, user, account)| (user, account)),
                );
            }
            candidates.extend(
                self.fut
                    .always
                    .range((c.0, UserId::MIN, 0)..=(c.0, UserId::MAX, u32::MAX))
                    .map(|&(_, user, account)| (user, account)),
            );
            candidates.retain(|&(user, _)| after.is_none_or(|a| user > a));
            candidates.sort_unstable();
            candidates.dedup();
            let mut liquidated = false;
            for &(user, account) in &candidates {
                after = Some(user);
                if self.fut.liquidated.contains(&(account, c.0)) {
                    continue;
                }
                let m = self.margin(account, c, OrderChange::NONE);
                let below = if m.positions > 0 {
                    m.equity() < m.maintenance
                } else {
                    m.available < 0
                };
                if below {
                    self.liquidate(account, c, m, sink);
                    liquidated = true;
                    break;
                }
                // A cautious (stale) key: put it right.
                self.rekey(account, c);
            }
            self.fut.scratch_candidates = candidates;
            if !liquidated {
                break;
            }
        }
    }

    /// Liquidates `account` in currency `c` (docs/rules.md, "Futures", steps 1 to 4).
    fn liquidate(
        &mut self,
        account: u32,
        c: CurrencyId,
        before: Margin,
        sink: &mut impl EventSink,
    ) {
        let user = self.accounts.user(account);
        self.cancel_for_liquidation(account, c, sink);
        for i in 0..self.futures_of(c).len() {
            let s = self.futures_of(c)[i];
            let Some(pos) = self.fut.positions.get(&(account, s)).copied() else {
                continue;
            };
            if self.symbols[s as usize].controls.phase() != Phase::Continuous {
                continue;
            }
            let taker = Taker {
                account,
                user,
                order: 0,
                side: if pos.lots > 0 { Side::Sell } else { Side::Buy },
                limit: None,
                qty: pos.lots.abs(),
                stp: Stp::CancelMaker,
                post_only: false,
                leftover: Some(CancelReason::Market),
                display: 0,
                terms: OrderTerms {
                    expire_ts: 0,
                    tif: crate::types::Tif::Ioc,
                },
                liquidation: true,
            };
            self.execute(s as usize, &taker, None, sink);
        }
        let flat = self
            .futures_of(c)
            .iter()
            .all(|&s| !self.fut.positions.contains_key(&(account, s)));
        let balance = self.accounts.balance_mut(account, c);
        let shortfall = if flat && balance.available < 0 {
            let shortfall = balance.available.checked_neg().unwrap_or(i64::MAX);
            balance.available += shortfall;
            self.currencies[c.0 as usize].insurance -= shortfall;
            shortfall
        } else {
            0
        };
        self.fut.liquidated.push((account, c.0));
        self.rekey(account, c);
        sink.on_event(&Event::Liquidated(Liquidated {
            user,
            currency: self.currencies[c.0 as usize].name,
            equity: saturate(before.equity()),
            maintenance: saturate(before.maintenance),
            shortfall,
        }));
    }

    /// Step 1 of a liquidation: the user's live orders on futures quoted in `c` and its spot
    /// orders that hold `c`, by symbol name then order id, reason `liquidation`.
    fn cancel_for_liquidation(&mut self, account: u32, c: CurrencyId, sink: &mut impl EventSink) {
        let mut victims = std::mem::take(&mut self.scratch_mass_cancel);
        victims.clear();
        let mut idx = self.accounts.get(account).orders_head;
        while idx != NIL {
            let node = self.orders.get(idx);
            let terms = &self.symbols[node.symbol as usize].terms;
            let holds_c = if is_future(terms) {
                terms.quote == c
            } else {
                match node.side {
                    Side::Buy => terms.quote == c,
                    Side::Sell => terms.base == c,
                }
            };
            if holds_c {
                let name = self.symbols[node.symbol as usize].spec.symbol;
                victims.push((name, node.order, idx));
            }
            idx = node.account_next;
        }
        victims.sort_unstable_by_key(|&(name, order, _)| (name, order));
        for &(_, _, idx) in &victims {
            self.remove_live_order(idx, CancelReason::Liquidation, sink);
        }
        self.scratch_mass_cancel = victims;
    }

    /// `set_mark_price`: a future's new mark; a change starts a liquidation pass.
    pub(crate) fn set_mark_price(&mut self, symbol: SymbolId, price: i64) -> Result<(), Reason> {
        let s = symbol.0 as usize;
        let sym = self.symbols.get(s).ok_or(Reason::UnknownSymbol)?;
        let Some(book) = sym.future.as_deref() else {
            return Err(Reason::InvalidSymbol);
        };
        if price <= 0 {
            return Err(Reason::InvalidPrice);
        }
        if book.mark == price {
            return Ok(());
        }
        let value = book.open_interest as i128 * price as i128 * sym.terms.quote_scale as i128;
        if value > i64::MAX as i128 {
            return Err(Reason::Overflow);
        }
        let quote = sym.terms.quote;
        self.future_book_mut(s).mark = price;
        self.mark_dirty(quote);
        Ok(())
    }

    /// `fund_insurance`: adds to or takes from a currency's fund; counts in deposits and
    /// withdrawals, and shares the tx ids of `adjust_balance`.
    pub(crate) fn fund_insurance(
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
        let known = self.currency_ids.get(&currency).copied();
        let fund = known.map_or(0, |c| self.currencies[c.0 as usize].insurance);
        if amount < 0 {
            let taken = amount.checked_neg().ok_or(Reason::InsufficientFunds)?;
            if taken > fund {
                return Err(Reason::InsufficientFunds);
            }
            let c = known.expect("a positive fund implies a known currency");
            let state = &mut self.currencies[c.0 as usize];
            state.insurance -= taken;
            state.withdrawals += taken;
        } else {
            let deposits = known.map_or(0, |c| self.currencies[c.0 as usize].deposits);
            if deposits.checked_add(amount).is_none() || fund.checked_add(amount).is_none() {
                return Err(Reason::Overflow);
            }
            if known.is_none() && self.currencies.len() >= crate::account::MAX_CURRENCIES {
                return Err(Reason::LimitExceeded);
            }
            let c = self.currency_id_or_register(currency);
            let state = &mut self.currencies[c.0 as usize];
            state.insurance += amount;
            state.deposits += amount;
        }
        self.txs.insert(tx);
        Ok(())
    }

    /// A user's open positions, by symbol name.
    pub(crate) fn positions_of(&self, account: u32) -> Vec<Position> {
        let mut out: Vec<Position> = self
            .fut
            .positions
            .range((account, 0)..=(account, u32::MAX))
            .map(|(&(_, s), p)| Position {
                symbol: self.symbols[s as usize].spec.symbol,
                lots: p.lots,
                cost: p.cost,
            })
            .collect();
        out.sort_by_key(|p| p.symbol);
        out
    }

    /// A user's margin in every currency some future is quoted in, by currency name.
    pub(crate) fn margins_of(&self, account: u32) -> Vec<MarginReport> {
        let mut out: Vec<MarginReport> = (0..self.fut.futures_of.len())
            .filter(|&c| !self.fut.futures_of[c].is_empty())
            .map(|c| {
                let m = self.margin(account, CurrencyId(c as u32), OrderChange::NONE);
                MarginReport {
                    currency: self.currencies[c].name,
                    equity: saturate(m.equity()),
                    initial: saturate(m.initial),
                    maintenance: saturate(m.maintenance),
                    available: saturate(m.equity() - m.initial),
                }
            })
            .collect();
        out.sort_by_key(|m| m.currency);
        out
    }

    /// Every open position as (user, symbol name, lots, cost), by user id then symbol name.
    pub fn positions(&self) -> Vec<(UserId, Name, i64, i64)> {
        let mut out: Vec<_> = self
            .fut
            .positions
            .iter()
            .map(|(&(account, s), p)| {
                (
                    self.accounts.user(account),
                    self.symbols[s as usize].spec.symbol,
                    p.lots,
                    p.cost,
                )
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// A user's margin in one currency as (equity, initial, maintenance), saturated to i64;
    /// `None` for an unknown user or currency.
    pub fn user_margin(&self, user: UserId, currency: &str) -> Option<(i64, i64, i64)> {
        let account = self.account_of(user)?;
        let c = *self.currency_ids.get(&Name::new(currency)?)?;
        let m = self.margin(account, c, OrderChange::NONE);
        Some((
            saturate(m.equity()),
            saturate(m.initial),
            saturate(m.maintenance),
        ))
    }

    /// Restores a position from a snapshot (its account's key is set by the caller's
    /// [`Self::rebuild_futures_index`]).
    pub(crate) fn restore_position(&mut self, account: u32, symbol: u32, lots: i64, cost: i64) {
        self.fut
            .positions
            .insert((account, symbol), PositionState { lots, cost });
        let book = self.future_book_mut(symbol as usize);
        book.open_interest += lots.max(0);
        self.accounts.get_mut(account).futures = true;
    }

    /// After a snapshot's orders are restored: the exposure flag of every user with a futures
    /// order (a user with a position has it already).
    pub(crate) fn flag_futures_orders(&mut self) {
        for account in 0..self.accounts.len() as u32 {
            let mut idx = self.accounts.get(account).orders_head;
            while idx != NIL {
                let node = self.orders.get(idx);
                if is_future(&self.symbols[node.symbol as usize].terms) {
                    self.accounts.get_mut(account).futures = true;
                }
                idx = node.account_next;
            }
        }
    }

    /// After a snapshot's positions and balances are decoded: the liquidation index.
    pub(crate) fn rebuild_futures_index(&mut self) {
        let mut pairs: Vec<(u32, CurrencyId)> = Vec::new();
        for (&(account, s), _) in self.fut.positions.iter() {
            pairs.push((account, self.symbols[s as usize].terms.quote));
        }
        for (account, c, b) in self.accounts.all_balances() {
            if b.available < 0 {
                pairs.push((account, c));
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        for (account, c) in pairs {
            self.rekey(account, c);
        }
    }
}
