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
//!
//! **Lazy keys.** A key need not be the exact bound, only a cautious one: for a long a key at
//! or above the bound, for a short at or below. When the user's position or `available`
//! changes, [`Engine::rekey`] keeps the key it has while it is still cautious (one product
//! checks it, no division) and only then writes a new one, 1/256 of the way from the exact
//! bound toward the mark (when the user is safe at the mark, the key stays on the safe side of
//! it). So the fees and small PnL that move a user's bound a little toward the mark cost no
//! update of the ordered sets. A key that comes into a pass although the user is safe is put
//! right by [`Engine::rekey_exact`] (the same rule from the exact bound), which also keys a
//! user after a liquidation.
//!
//! **The margin sums.** A margin check must not walk the user's orders: per account and future
//! a [`Slot`] keeps the position and PB, PS and the open loss at the mark, and per order node a
//! [`Contrib`] what that order counts there. Every change of a live futures order goes through
//! [`Engine::sync_future_order`] or [`Engine::drop_future_order`]; a mark move re-syncs that
//! future's orders. [`Engine::check_futures_sums`] recomputes everything for the tests.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::{CancelReason, Engine, EventSink, OrderTerms, Side, Taker};
use rialto_prefetch::prefetch_index;

use crate::book::NIL;
use crate::event::{Event, Liquidated, MarginReport, Position};
use crate::types::{CurrencyId, Name, Phase, Reason, Stp, SymbolId, UserId};

/// `terms.base` of a future: its base names the underlying and is no currency.
pub(crate) const FUTURE_BASE: CurrencyId = CurrencyId(u32::MAX);

/// A new liquidation key is set 1/`KEY_ROOM` of the way from the user's bound toward the mark
/// (see the module's doc, "Lazy keys"): room enough that a fee or a small PnL does not move
/// the bound past it, small enough that a mark move examines few users beyond those at risk (a
/// safe user is examined once the mark has gone 255/256 of the way to its bound from where it
/// was when the key was set; docs/rules.md, "Futures").
const KEY_ROOM: i128 = 256;

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
    /// The remaining lots of every live order on the future (resting, hidden, pending).
    pub live_lots: i128,
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

/// A user's state in one future: its position, and the sums over its live orders there that
/// its margin needs (PB, PS and the open loss at the future's mark), kept up to date as orders
/// enter, fill, change and leave and as the mark moves, so that a margin costs the user's
/// futures, not its orders.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    pub symbol: u32,
    /// The future's quote currency.
    pub quote: u32,
    pub pos: PositionState,
    /// PB: the remaining lots of the user's live buy orders on the future.
    pub buys: i64,
    /// PS: the same for sells.
    pub sells: i64,
    /// OL at the future's mark, quote minor units.
    pub open_loss: i128,
    /// In an account's first slot: whether the account has further slots (so that a margin
    /// check can tell from this line alone that the future is the user's only one).
    pub more: bool,
}

/// What one live futures order counts in its user's [`Slot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Contrib {
    pub lots: i64,
    pub buy: bool,
    /// `max(0, P − M) * quote_scale` for a buy, `max(0, M − P) * quote_scale` for a sell.
    pub loss_lot: i128,
}

impl Contrib {
    fn of(side: Side, price: i64, lots: i64, mark: i64, quote_scale: i64) -> Contrib {
        let diff = match side {
            Side::Buy => price as i128 - mark as i128,
            Side::Sell => mark as i128 - price as i128,
        };
        Contrib {
            lots,
            buy: side == Side::Buy,
            loss_lot: diff.max(0) * quote_scale as i128,
        }
    }

    #[inline]
    fn loss(&self) -> i128 {
        mul_wide(self.lots as i128, self.loss_lot)
            .unwrap_or_else(|| (self.lots as i128).saturating_mul(self.loss_lot))
    }
}

impl Slot {
    /// No slot (in [`Futures`]'s flat vector): no symbol has this id.
    const NONE: Slot = Slot {
        symbol: u32::MAX,
        quote: u32::MAX,
        pos: PositionState { lots: 0, cost: 0 },
        buys: 0,
        sells: 0,
        open_loss: 0,
        more: false,
    };

    /// Counts `c` in (`sign` 1) or out (−1).
    fn count(&mut self, c: Contrib, sign: i64) {
        if c.buy {
            self.buys += sign * c.lots;
        } else {
            self.sells += sign * c.lots;
        }
        self.open_loss += sign as i128 * c.loss();
    }
}

/// Where a (user, currency) sits in the liquidation index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RiskKey {
    Long(u32, i128),
    Short(u32, i128),
    Always,
}

/// A user's place in the liquidation index for one currency, and the last command (by the
/// engine's count of futures commands) in which it was liquidated there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RiskEntry {
    pub currency: u32,
    pub key: Option<RiskKey>,
    pub liquidated_in: u64,
}

impl RiskEntry {
    /// No entry (in [`Futures`]'s flat vector).
    const NONE: RiskEntry = RiskEntry {
        currency: u32::MAX,
        key: None,
        liquidated_in: 0,
    };
}

/// The engine's futures state.
///
/// An account's slots and risk entries are one per future (currency) it ever had a position or
/// an order in, kept when flat (no allocation when it comes back). Most users trade one future:
/// the first slot and the first risk entry of every account are in flat vectors indexed by
/// account, a single read away; further ones in per-account vectors beside them.
#[derive(Default)]
pub(crate) struct Futures {
    /// Per account (dense id), its first slot ([`Slot::NONE`] when it has none).
    first_slot: Vec<Slot>,
    /// Per account, its further slots (empty for most).
    more_slots: Vec<Vec<Slot>>,
    /// Per order node, what it counts in its slot (zero for a spot order and a free node).
    pub contrib: Vec<Contrib>,
    /// Per account, its first place in the liquidation index ([`RiskEntry::NONE`]: none).
    first_risk: Vec<RiskEntry>,
    /// Per account, its places in further currencies.
    more_risk: Vec<Vec<RiskEntry>>,
    /// (currency, user, account) examined at every pass of the currency.
    pub always: BTreeSet<(u32, UserId, u32)>,
    /// Per currency id, its futures' symbol ids, by symbol name.
    pub futures_of: Vec<Vec<u32>>,
    /// Currencies whose futures traded or whose mark moved since the last pass.
    pub dirty: Vec<u32>,
    dirty_spare: Vec<u32>,
    /// (account, currency) whose `available` may have fallen since their key was computed.
    pub stale: Vec<(u32, u32)>,
    /// Counts the commands that ran liquidation passes (what `liquidated_in` refers to).
    pub epoch: u64,
    /// While a pass runs: the accounts whose positions its closes moved.
    pub in_pass: bool,
    pub touched: Vec<u32>,
    scratch_candidates: Vec<(UserId, u32)>,
    scratch_extra: BinaryHeap<Reverse<(UserId, u32)>>,
}

/// The vector of `first` sized for `account`: to every account the engine has (`accounts`), so
/// that it grows with the accounts, not with each new one that trades a future.
#[inline]
fn grow_for<T: Clone>(v: &mut Vec<T>, account: usize, accounts: usize, none: T) {
    if v.len() <= account {
        v.resize(accounts.max(account + 1), none);
    }
}

impl Futures {
    /// The slots of `account`, in the order they were made.
    #[inline]
    pub fn slots_of(&self, account: u32) -> impl Iterator<Item = &Slot> + '_ {
        let a = account as usize;
        let first = self
            .first_slot
            .get(a)
            .filter(|s| s.symbol != Slot::NONE.symbol);
        let more = self.more_slots.get(a).map_or(&[][..], |v| v.as_slice());
        first.into_iter().chain(more)
    }

    /// The slot of (`account`, `symbol`), if it has one.
    #[inline]
    pub fn slot(&self, account: u32, symbol: u32) -> Option<&Slot> {
        let a = account as usize;
        match self.first_slot.get(a) {
            Some(first) if first.symbol == symbol => Some(first),
            Some(first) if first.symbol != Slot::NONE.symbol => {
                self.more_slots.get(a)?.iter().find(|s| s.symbol == symbol)
            }
            _ => None,
        }
    }

    /// The slot of (`account`, `symbol`) when it is the account's only one.
    #[inline]
    fn sole_slot(&self, account: u32, symbol: u32) -> Option<&Slot> {
        self.first_slot
            .get(account as usize)
            .filter(|s| s.symbol == symbol && !s.more)
    }

    /// Starts loading what a margin check and a change of order node `idx` of `account` read:
    /// the account's first slot and what the order counts there.
    #[inline(always)]
    pub fn prefetch_order(&self, idx: u32, account: u32) {
        prefetch_index(&self.first_slot, account as usize);
        prefetch_index(&self.contrib, idx as usize);
    }

    /// The slot of (`account`, `symbol`), made if missing; `accounts` is the engine's count of
    /// accounts.
    #[inline]
    fn slot_mut(
        &mut self,
        account: u32,
        symbol: u32,
        quote: CurrencyId,
        accounts: usize,
    ) -> &mut Slot {
        let a = account as usize;
        grow_for(&mut self.first_slot, a, accounts, Slot::NONE);
        let first = &mut self.first_slot[a];
        if first.symbol == symbol {
            return first;
        }
        let made = Slot {
            symbol,
            quote: quote.0,
            ..Slot::default()
        };
        if first.symbol == Slot::NONE.symbol {
            *first = made;
            return first;
        }
        first.more = true;
        Self::more_slot_mut(&mut self.more_slots, a, made)
    }

    /// A slot beyond the account's first (off the hot path).
    #[cold]
    #[inline(never)]
    fn more_slot_mut(more: &mut Vec<Vec<Slot>>, a: usize, made: Slot) -> &mut Slot {
        if more.len() <= a {
            more.resize_with(a + 1, Vec::new);
        }
        let slots = &mut more[a];
        let at = match slots.iter().position(|s| s.symbol == made.symbol) {
            Some(at) => at,
            None => {
                slots.push(made);
                slots.len() - 1
            }
        };
        &mut slots[at]
    }

    /// The key of (`account`, currency `c`) in the liquidation index, if it has one.
    #[inline]
    fn risk_key(&self, account: u32, c: u32) -> Option<RiskKey> {
        let a = account as usize;
        match self.first_risk.get(a) {
            Some(first) if first.currency == c => first.key,
            Some(first) if first.currency != RiskEntry::NONE.currency => {
                self.more_risk.get(a)?.iter().find(|e| e.currency == c)?.key
            }
            _ => None,
        }
    }

    /// The last command in which (`account`, currency `c`) was liquidated (0: never).
    #[inline]
    fn liquidated_in(&self, account: u32, c: u32) -> u64 {
        let a = account as usize;
        let first = self.first_risk.get(a);
        if let Some(first) = first
            && first.currency == c
        {
            return first.liquidated_in;
        }
        self.more_risk
            .get(a)
            .and_then(|v| v.iter().find(|e| e.currency == c))
            .map_or(0, |e| e.liquidated_in)
    }

    /// The entry of (`account`, currency `c`), made if missing; `accounts` is the engine's
    /// count of accounts.
    fn risk_entry(&mut self, account: u32, c: u32, accounts: usize) -> &mut RiskEntry {
        let a = account as usize;
        grow_for(&mut self.first_risk, a, accounts, RiskEntry::NONE);
        let made = RiskEntry {
            currency: c,
            ..RiskEntry::NONE
        };
        let first = &mut self.first_risk[a];
        if first.currency == c {
            return first;
        }
        if first.currency == RiskEntry::NONE.currency {
            *first = made;
            return first;
        }
        let more = &mut self.more_risk;
        if more.len() <= a {
            more.resize_with(a + 1, Vec::new);
        }
        let entries = &mut more[a];
        let at = match entries.iter().position(|e| e.currency == c) {
            Some(at) => at,
            None => {
                entries.push(made);
                entries.len() - 1
            }
        };
        &mut entries[at]
    }
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

/// One future's term of the initial margin: `initial_margin · max(N + PB, PS − N) + OL`, zero
/// with no position and no order.
#[inline]
fn initial_term(book: &FutureBook, slot: &Slot) -> i128 {
    let n = slot.pos.lots as i128;
    let (buys, sells) = (slot.buys as i128, slot.sells as i128);
    if n != 0 || buys != 0 || sells != 0 {
        book.initial_margin as i128 * (n + buys).max(sells - n) + slot.open_loss
    } else {
        0
    }
}

/// `a * b`, exact, or `None` past i128. When both factors fit i64 (nearly always: prices,
/// lots and scales are i64) the product is one widening multiply, which cannot overflow; only
/// larger factors take the checked 128-bit multiply.
#[inline(always)]
fn mul_wide(a: i128, b: i128) -> Option<i128> {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(a), Ok(b)) => Some(a as i128 * b as i128),
        _ => a.checked_mul(b),
    }
}

/// `a.div_euclid(d)` for `d > 0`: in 64 bits when both fit (the same quotient; 64-bit
/// division overflows only for a divisor of −1), else in 128.
#[inline(always)]
fn div_euclid_pos(a: i128, d: i128) -> i128 {
    debug_assert!(d > 0);
    match (i64::try_from(a), i64::try_from(d)) {
        (Ok(a), Ok(d)) => a.div_euclid(d) as i128,
        _ => a.div_euclid(d),
    }
}

/// `a / d` (toward zero) for `d > 0`, in 64 bits when both fit, else in 128.
#[inline(always)]
fn div_pos(a: i128, d: i128) -> i128 {
    debug_assert!(d > 0);
    match (i64::try_from(a), i64::try_from(d)) {
        (Ok(a), Ok(d)) => (a / d) as i128,
        _ => a / d,
    }
}

fn saturate(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[inline]
fn fits_i64(v: i128) -> bool {
    i64::try_from(v).is_ok()
}

/// `price * quote_scale`, the value of one lot; `None` beyond i64.
#[inline]
fn lot_value(price: i64, quote_scale: i64) -> Option<i128> {
    let v = price as i128 * quote_scale as i128;
    fits_i64(v).then_some(v)
}

/// A position after a fill of `d` signed lots at value `v` a lot (docs/rules.md, "Futures"),
/// and the PnL it realises; `None` when its lots, its cost or the PnL would leave i64. Every
/// product is of two i64-sized factors, so nothing here overflows i128.
fn position_after(pos: PositionState, d: i64, v: i128) -> Option<(PositionState, i128)> {
    let (mut n, mut k, d) = (pos.lots as i128, pos.cost as i128, d as i128);
    let mut realised = 0;
    let mut opening = d;
    if n != 0 && (n > 0) != (d > 0) {
        let closed = d.abs().min(n.abs());
        // Toward zero, exact: the cost of the lots closed.
        let r = div_pos(k * closed, n.abs());
        k -= r;
        n += d.signum() * closed;
        let value = closed * v;
        if !fits_i64(value) {
            return None;
        }
        realised = -d.signum() * value - r;
        opening = d - d.signum() * closed;
    }
    n += opening;
    let added = opening * v;
    if !fits_i64(added) {
        return None;
    }
    k += added;
    debug_assert!(n != 0 || k == 0, "a flat position has no cost");
    let lots = i64::try_from(n).ok()?;
    let cost = i64::try_from(k).ok()?;
    Some((PositionState { lots, cost }, realised))
}

impl Engine {
    /// The futures of currency `c`, by symbol name.
    pub(crate) fn futures_of(&self, c: CurrencyId) -> &[u32] {
        self.fut
            .futures_of
            .get(c.0 as usize)
            .map_or(&[][..], |v| v.as_slice())
    }

    #[inline]
    pub(crate) fn future_book(&self, symbol: usize) -> &FutureBook {
        self.symbols[symbol]
            .future
            .as_deref()
            .expect("a future has its book")
    }

    #[inline]
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
    /// user's futures (its slots), never its orders.
    pub(crate) fn margin(&self, account: u32, c: CurrencyId, change: OrderChange) -> Margin {
        let mut m = Margin {
            available: self.accounts.balance(account, c).available,
            ..Margin::default()
        };
        let skip = (change.skip != NIL).then(|| {
            (
                self.orders.get(change.skip).symbol,
                self.fut.contrib[change.skip as usize],
            )
        });
        let add = change.add.map(|(symbol, side, price, lots)| {
            let sym = &self.symbols[symbol as usize];
            let mark = self.future_book(symbol as usize).mark;
            (
                symbol,
                Contrib::of(side, price, lots, mark, sym.terms.quote_scale),
            )
        });
        let mut added = add.is_none();
        for slot in self.fut.slots_of(account) {
            if slot.quote != c.0 {
                continue;
            }
            let mut slot = *slot;
            if let Some((symbol, contrib)) = skip
                && symbol == slot.symbol
            {
                slot.count(contrib, -1);
            }
            if let Some((symbol, contrib)) = add
                && symbol == slot.symbol
            {
                slot.count(contrib, 1);
                added = true;
            }
            self.count_margin(&mut m, &slot);
        }
        if !added && let Some((symbol, contrib)) = add {
            let mut slot = Slot {
                symbol,
                quote: c.0,
                ..Slot::default()
            };
            slot.count(contrib, 1);
            self.count_margin(&mut m, &slot);
        }
        m
    }

    /// Adds one future's terms to a margin (docs/rules.md, "Futures").
    #[inline]
    fn count_margin(&self, m: &mut Margin, slot: &Slot) {
        let sym = &self.symbols[slot.symbol as usize];
        let book = sym.future.as_deref().expect("a future");
        let (qs, mark) = (sym.terms.quote_scale as i128, book.mark as i128);
        let (n, k) = (slot.pos.lots as i128, slot.pos.cost as i128);
        if n != 0 {
            m.positions += 1;
            m.unrealised += n * mark * qs - k;
            m.maintenance = m
                .maintenance
                .saturating_add(book.maintenance_margin as i128 * n.abs());
        }
        // Each term is bounded (docs/rules.md, "Futures", "Overflow"), their sum over many
        // futures is not: saturated, which every comparison reads rightly.
        m.initial = m.initial.saturating_add(initial_term(book, slot));
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
        let skipped = if skip != NIL {
            self.fut.contrib[skip as usize]
        } else {
            Contrib::default()
        };
        self.check_future_order_with(account, symbol, side, price, lots, skip, skipped)
    }

    /// What live plain order `node` counts in its slot, from the node alone: its contribution
    /// is synced at every change and again at every mark move, so it is the one of its side,
    /// price and remaining quantity at the future's mark (a move reads this instead of the
    /// stored one: one cache line fewer).
    #[inline]
    pub(crate) fn plain_contrib(&self, node: &crate::book::OrderNode) -> Contrib {
        let sym = &self.symbols[node.symbol as usize];
        let mark = self.future_book(node.symbol as usize).mark;
        Contrib::of(
            node.side,
            node.price,
            node.remaining,
            mark,
            sym.terms.quote_scale,
        )
    }

    /// [`Self::check_future_order`] with what order `skip` counts now given (`skipped`; zero
    /// when `skip` is NIL).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_future_order_with(
        &self,
        account: u32,
        symbol: usize,
        side: Side,
        price: i64,
        lots: i64,
        skip: u32,
        skipped: Contrib,
    ) -> Result<(), Reason> {
        let sym = &self.symbols[symbol];
        let c = sym.terms.quote;
        let book = self.future_book(symbol);
        // The exposure on this future after the change: |N| + PB + PS (+ this order).
        let slot = self
            .fut
            .slot(account, symbol as u32)
            .copied()
            .unwrap_or_default();
        let mut lots_total = slot.pos.lots.unsigned_abs() as i128
            + slot.buys as i128
            + slot.sells as i128
            + lots as i128;
        lots_total -= skipped.lots as i128;
        // Each factor fits i64 and their product may not fit i128: checked.
        let exposure = mul_wide(
            lots_total,
            price.max(book.mark) as i128 * sym.terms.quote_scale as i128,
        )
        .filter(|&e| fits_i64(e));
        if exposure.is_none() {
            return Err(Reason::Overflow);
        }
        // The common case, the user's only future in the currency: its margin is this slot's
        // terms alone, the same figures as `margin` gives, from the slot and `available`.
        if let Some(sole) = self.fut.sole_slot(account, symbol as u32) {
            let add = Contrib::of(side, price, lots, book.mark, sym.terms.quote_scale);
            let mut changed = *sole;
            if skip != NIL && (skipped.lots, skipped.buy) == (add.lots, add.buy) {
                // A move: the same lots on the same side out and in, so only the open loss
                // changes (in the order `count` would change it).
                changed.open_loss -= skipped.loss();
                changed.open_loss += add.loss();
            } else {
                if skip != NIL {
                    changed.count(skipped, -1);
                }
                changed.count(add, 1);
            }
            let initial = initial_term(book, &changed);
            if initial > i64::MAX as i128 {
                return Err(Reason::Overflow);
            }
            if initial <= initial_term(book, sole) {
                return Ok(());
            }
            let (n, k) = (sole.pos.lots as i128, sole.pos.cost as i128);
            let unrealised = if n != 0 {
                n * book.mark as i128 * sym.terms.quote_scale as i128 - k
            } else {
                0
            };
            let equity = self.accounts.balance(account, c).available as i128 + unrealised;
            return if equity - initial >= 0 {
                Ok(())
            } else {
                Err(Reason::InsufficientMargin)
            };
        }
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
        // The margin before the change only matters when equity does not cover the initial
        // margin after it: most orders are accepted on `after` alone.
        if after.equity() - after.initial >= 0
            || after.initial <= self.margin(account, c, OrderChange::NONE).initial
        {
            Ok(())
        } else {
            Err(Reason::InsufficientMargin)
        }
    }

    /// Brings what live order `idx` counts in its user's slot up to date with its side, price,
    /// remaining quantity and its future's mark. Every change of a live futures order ends
    /// here or in [`Self::drop_future_order`] (a spot order: nothing to do).
    pub(crate) fn sync_future_order(&mut self, idx: u32) {
        let node = *self.orders.get(idx);
        let sym = &self.symbols[node.symbol as usize];
        let Some(book) = sym.future.as_deref() else {
            return;
        };
        let lots = self.live_remaining(idx);
        let new = Contrib::of(
            node.side,
            node.price,
            lots,
            book.mark,
            sym.terms.quote_scale,
        );
        self.replace_contrib(idx, node.account, node.symbol, new);
    }

    /// A plain futures order `idx` of `account` moved without trading: it counted `old` and
    /// now counts `new` (the same lots and side at another price), which [`Self::sync_future_order`]
    /// would find, without reading the node or the stored contribution again.
    #[inline]
    pub(crate) fn sync_moved_future_order(
        &mut self,
        idx: u32,
        account: u32,
        symbol: u32,
        old: Contrib,
        new: Contrib,
    ) {
        debug_assert_eq!(self.fut.contrib.get(idx as usize), Some(&old));
        debug_assert_eq!((old.lots, old.buy), (new.lots, new.buy));
        self.fut.contrib[idx as usize] = new;
        // A live order's slot exists: most often the account's first.
        let delta = new.loss() - old.loss();
        match self.fut.first_slot.get_mut(account as usize) {
            Some(first) if first.symbol == symbol => first.open_loss += delta,
            _ => {
                let quote = self.symbols[symbol as usize].terms.quote;
                let accounts = self.accounts.len();
                self.fut
                    .slot_mut(account, symbol, quote, accounts)
                    .open_loss += delta;
            }
        }
    }

    /// Order `idx` (a futures order's node, about to be freed) counts no more.
    #[cold]
    #[inline(never)]
    pub(crate) fn drop_future_order(&mut self, idx: u32, account: u32, symbol: u32) {
        if self
            .fut
            .contrib
            .get(idx as usize)
            .is_some_and(|c| *c != Contrib::default())
        {
            self.replace_contrib(idx, account, symbol, Contrib::default());
        }
    }

    fn replace_contrib(&mut self, idx: u32, account: u32, symbol: u32, new: Contrib) {
        let i = idx as usize;
        if self.fut.contrib.len() <= i {
            self.fut.contrib.resize(i + 1, Contrib::default());
        }
        let old = std::mem::replace(&mut self.fut.contrib[i], new);
        let quote = self.symbols[symbol as usize].terms.quote;
        let accounts = self.accounts.len();
        let slot = self.fut.slot_mut(account, symbol, quote, accounts);
        slot.count(old, -1);
        slot.count(new, 1);
        self.future_book_mut(symbol as usize).live_lots += new.lots as i128 - old.lots as i128;
    }

    /// Recomputes every slot's sums from the orders themselves and compares (a check for tests
    /// and debug builds: the sums kept up to date must equal a full recomputation).
    pub fn check_futures_sums(&self) -> Result<(), String> {
        let mut expected: Vec<Vec<Slot>> = Vec::new();
        let mut live = vec![0i128; self.symbols.len()];
        for account in 0..self.accounts.len() as u32 {
            let mut slots: Vec<Slot> = self
                .fut
                .slots_of(account)
                .map(|s| Slot {
                    buys: 0,
                    sells: 0,
                    open_loss: 0,
                    ..*s
                })
                .collect();
            let mut idx = self.accounts.get(account).orders_head;
            while idx != NIL {
                let node = self.orders.get(idx);
                let sym = &self.symbols[node.symbol as usize];
                if let Some(book) = sym.future.as_deref() {
                    let lots = self.live_remaining(idx);
                    let c = Contrib::of(
                        node.side,
                        node.price,
                        lots,
                        book.mark,
                        sym.terms.quote_scale,
                    );
                    live[node.symbol as usize] += lots as i128;
                    match slots.iter_mut().find(|s| s.symbol == node.symbol) {
                        Some(slot) => slot.count(c, 1),
                        None => return Err(format!("account {account}: an order without a slot")),
                    }
                }
                idx = node.account_next;
            }
            expected.push(slots);
        }
        for account in 0..self.accounts.len() as u32 {
            let kept: Vec<Slot> = self.fut.slots_of(account).copied().collect();
            if kept != expected[account as usize] {
                return Err(format!(
                    "account {account}: kept {kept:?}, recomputed {:?}",
                    expected[account as usize]
                ));
            }
        }
        for (s, sym) in self.symbols.iter().enumerate() {
            if let Some(book) = sym.future.as_deref()
                && book.live_lots != live[s]
            {
                return Err(format!(
                    "symbol {s}: live lots {} != {}",
                    book.live_lots, live[s]
                ));
            }
        }
        Ok(())
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
            self.knock_on_pending = true;
        }
    }

    /// Whether a fill of `qty` lots at `price` between `buyer` and `seller` (fees per lot
    /// `buyer_fee_lot` and `seller_fee_lot`) can be settled: every sum it changes (both
    /// positions' lots and cost, both users' `available`, the open interest, the currency's
    /// fees) stays within i64. `Err(side)` names the side whose own settlement would leave it
    /// (the buyer's first); a fee total that would leave it is the buyer's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn future_fill_fits(
        &self,
        symbol: usize,
        buyer: u32,
        seller: u32,
        price: i64,
        qty: i64,
        buyer_fee_lot: i64,
        seller_fee_lot: i64,
    ) -> Result<(), Side> {
        let terms = self.symbols[symbol].terms;
        let fees = self.currencies[terms.quote.0 as usize].fees as i128
            + qty as i128 * buyer_fee_lot as i128
            + qty as i128 * seller_fee_lot as i128;
        if !fits_i64(fees) {
            return Err(Side::Buy);
        }
        let Some(v) = lot_value(price, terms.quote_scale) else {
            return Err(Side::Buy);
        };
        let mut oi = self.future_book(symbol).open_interest as i128;
        for (account, d, fee, side) in [
            (buyer, qty, buyer_fee_lot, Side::Buy),
            (seller, -qty, seller_fee_lot, Side::Sell),
        ] {
            let pos = self.position(account, symbol as u32);
            let Some((after, realised)) = position_after(pos, d, v) else {
                return Err(side);
            };
            let available = self.accounts.balance(account, terms.quote).available as i128
                + realised
                - qty as i128 * fee as i128;
            if !fits_i64(available) {
                return Err(side);
            }
            oi += (after.lots.max(0) - pos.lots.max(0)) as i128;
        }
        if !fits_i64(oi) {
            return Err(Side::Buy);
        }
        Ok(())
    }

    /// One fill of a future: `qty` lots at `price` between the buyer and the seller, each
    /// paying its fee from `available` of the quote (docs/rules.md, "Futures"). The caller
    /// checked it with [`Self::future_fill_fits`].
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
        let v = lot_value(price, terms.quote_scale).unwrap_or(0);
        for (account, d, fee) in [(buyer, qty, buyer_fee), (seller, -qty, seller_fee)] {
            let (realised, oi_change) = self.apply_position_fill(account, symbol as u32, d, v);
            let balance = self.accounts.balance_mut(account, terms.quote);
            let available = balance.available as i128 + realised - fee as i128;
            debug_assert!(fits_i64(available), "checked by future_fill_fits");
            balance.available = saturate(available);
            let book = self.future_book_mut(symbol);
            book.open_interest = book.open_interest.saturating_add(oi_change);
            self.accounts.get_mut(account).futures = true;
            self.rekey(account, terms.quote);
        }
        self.mark_dirty(terms.quote);
    }

    /// The open position of `account` in future `symbol` (zero when flat).
    #[inline]
    pub(crate) fn position(&self, account: u32, symbol: u32) -> PositionState {
        self.fut
            .slot(account, symbol)
            .map_or(PositionState::default(), |s| s.pos)
    }

    /// Applies a fill of `d` signed lots at value `v` a lot to a position: returns the realised
    /// PnL and the change of the open interest.
    fn apply_position_fill(&mut self, account: u32, symbol: u32, d: i64, v: i128) -> (i128, i64) {
        let quote = self.symbols[symbol as usize].terms.quote;
        let accounts = self.accounts.len();
        let slot = self.fut.slot_mut(account, symbol, quote, accounts);
        let pos = slot.pos;
        let after = position_after(pos, d, v);
        debug_assert!(after.is_some(), "checked by future_fill_fits");
        let (after, realised) = after.unwrap_or((pos, 0));
        slot.pos = after;
        if self.fut.in_pass {
            self.fut.touched.push(account);
        }
        (realised, after.lots.max(0) - pos.lots.max(0))
    }

    pub(crate) fn mark_dirty(&mut self, c: CurrencyId) {
        if !self.fut.dirty.contains(&c.0) {
            self.fut.dirty.push(c.0);
            self.knock_on_pending = true;
        }
    }

    /// Puts (account, c) where it belongs in the liquidation index (see the module's doc), or
    /// leaves it where it is while its key is still cautious (see [`Self::rekey_exact`]).
    pub(crate) fn rekey(&mut self, account: u32, c: CurrencyId) {
        self.rekey_with(account, c, false);
    }

    /// Puts (account, c) where it belongs in the liquidation index, its key recomputed: after
    /// an examination that found the user safe (a cautious key kept by [`Self::rekey`] would
    /// bring it back at every pass) and after a liquidation.
    pub(crate) fn rekey_exact(&mut self, account: u32, c: CurrencyId) {
        self.rekey_with(account, c, true);
    }

    /// A bound with room toward the mark (see the module's doc, "Lazy keys"): 1/256 of the
    /// way from the exact `bound` to `mark` when the user is safe at the mark, else the bound.
    /// For a long the stored key must not be below the exact bound, for a short not above.
    #[inline]
    fn cautious_bound(bound: i128, mark: i128, long: bool) -> i128 {
        if long && bound < mark {
            bound + (mark - bound) / KEY_ROOM
        } else if !long && bound > mark {
            bound - (bound - mark) / KEY_ROOM
        } else {
            bound
        }
    }

    fn rekey_with(&mut self, account: u32, c: CurrencyId, exact: bool) {
        let available = self.accounts.balance(account, c).available as i128;
        let mut held = None;
        let mut count = 0;
        for slot in self.fut.slots_of(account) {
            if slot.quote == c.0 && slot.pos.lots != 0 {
                count += 1;
                held = Some((slot.symbol, slot.pos));
            }
        }
        let key = match (count, held) {
            (0, _) if available < 0 => Some(RiskKey::Always),
            (0, _) => None,
            (1, Some((s, pos))) => {
                let sym = &self.symbols[s as usize];
                let book = sym.future.as_deref().expect("a future");
                let (n, k) = (pos.lots as i128, pos.cost as i128);
                let (mm, qs) = (
                    book.maintenance_margin as i128,
                    sym.terms.quote_scale as i128,
                );
                let mark = book.mark as i128;
                // Every factor below is an i64 or a sum of three i64-sized terms: no overflow
                // in i128, except the check of a kept key (checked).
                let kept = if exact {
                    None
                } else {
                    self.fut.risk_key(account, c.0)
                };
                if n > 0 {
                    let t = k + mm * n - available;
                    let d = n * qs;
                    // Below maintenance exactly when mark < ceil(t / d); a key b is cautious
                    // when b >= ceil(t / d), that is b * d >= t.
                    if let Some(RiskKey::Long(s0, b)) = kept
                        && s0 == s
                        && mul_wide(b, d).is_some_and(|bd| bd >= t)
                    {
                        return;
                    }
                    // ceil(t / d) with a positive divisor.
                    let bound = -div_euclid_pos(-t, d);
                    Some(RiskKey::Long(s, Self::cautious_bound(bound, mark, true)))
                } else {
                    let x = available - k - mm * n.abs();
                    let d = n.abs() * qs;
                    // Below maintenance exactly when mark > floor(x / d); a key b is cautious
                    // when b <= floor(x / d), that is b * d <= x.
                    if let Some(RiskKey::Short(s0, b)) = kept
                        && s0 == s
                        && mul_wide(b, d).is_some_and(|bd| bd <= x)
                    {
                        return;
                    }
                    let bound = div_euclid_pos(x, d);
                    Some(RiskKey::Short(s, Self::cautious_bound(bound, mark, false)))
                }
            }
            _ => Some(RiskKey::Always),
        };
        let accounts = self.accounts.len();
        let entry = self.fut.risk_entry(account, c.0, accounts);
        let old = entry.key;
        if old == key {
            return;
        }
        entry.key = key;
        let user = self.accounts.user(account);
        match old {
            Some(RiskKey::Long(s, bound)) => {
                self.future_book_mut(s as usize)
                    .longs
                    .remove(&(bound, user, account));
            }
            Some(RiskKey::Short(s, bound)) => {
                self.future_book_mut(s as usize)
                    .shorts
                    .remove(&(bound, user, account));
            }
            Some(RiskKey::Always) => {
                self.fut.always.remove(&(c.0, user, account));
            }
            None => {}
        }
        match key {
            Some(RiskKey::Long(s, bound)) => {
                self.future_book_mut(s as usize)
                    .longs
                    .insert((bound, user, account));
            }
            Some(RiskKey::Short(s, bound)) => {
                self.future_book_mut(s as usize)
                    .shorts
                    .insert((bound, user, account));
            }
            Some(RiskKey::Always) => {
                self.fut.always.insert((c.0, user, account));
            }
            None => {}
        }
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
    /// checked against the state at its turn. The index is read once; a liquidation's closes
    /// can only change the margin of the users they trade with, which join the pass if their
    /// id is still ahead. O(log n + k) for k users at risk, plus those the closes trade with.
    fn liquidation_pass(&mut self, c: CurrencyId, sink: &mut impl EventSink) {
        let mut candidates = std::mem::take(&mut self.fut.scratch_candidates);
        let mut extra = std::mem::take(&mut self.fut.scratch_extra);
        candidates.clear();
        extra.clear();
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
        candidates.sort_unstable();
        candidates.dedup();
        let mut next = 0;
        let mut after: Option<UserId> = None;
        loop {
            // The next candidate by id: from the index's list or from those closes traded with.
            let from_list = candidates.get(next).copied();
            let from_extra = extra.peek().map(|r| r.0);
            let (user, account) = match (from_list, from_extra) {
                (None, None) => break,
                (Some(a), Some(b)) if b < a => {
                    extra.pop();
                    b
                }
                (Some(a), _) => {
                    next += 1;
                    a
                }
                (None, Some(b)) => {
                    extra.pop();
                    b
                }
            };
            if after.is_some_and(|a| user <= a) {
                continue;
            }
            after = Some(user);
            let epoch = self.fut.epoch;
            if self.fut.liquidated_in(account, c.0) == epoch {
                continue;
            }
            let m = self.margin(account, c, OrderChange::NONE);
            let below = if m.positions > 0 {
                m.equity() < m.maintenance
            } else {
                m.available < 0
            };
            if below {
                self.fut.in_pass = true;
                self.liquidate(account, c, m, sink);
                self.fut.in_pass = false;
                for i in 0..self.fut.touched.len() {
                    let other = self.fut.touched[i];
                    let other_user = self.accounts.user(other);
                    if other_user > user {
                        extra.push(Reverse((other_user, other)));
                    }
                }
                self.fut.touched.clear();
            } else {
                // A cautious (stale) key: put it right.
                self.rekey_exact(account, c);
            }
        }
        self.fut.scratch_candidates = candidates;
        self.fut.scratch_extra = extra;
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
            let pos = self.position(account, s);
            if pos.lots == 0 {
                continue;
            }
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
            .fut
            .slots_of(account)
            .all(|slot| slot.quote != c.0 || slot.pos.lots == 0);
        let balance = self.accounts.balance_mut(account, c);
        let shortfall = if flat && balance.available < 0 {
            // The fund pays what it can without leaving i64 (at most down to i64::MIN); any
            // rest stays a negative balance, examined again at the next pass.
            let fund = self.currencies[c.0 as usize].insurance;
            let room = fund as i128 - i64::MIN as i128;
            let shortfall = saturate((-(balance.available as i128)).min(room));
            balance.available += shortfall;
            self.currencies[c.0 as usize].insurance -= shortfall;
            shortfall
        } else {
            0
        };
        let epoch = self.fut.epoch;
        let accounts = self.accounts.len();
        self.fut.risk_entry(account, c.0, accounts).liquidated_in = epoch;
        self.rekey_exact(account, c);
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
        // Bounding the value of every position and order at the new mark keeps each term of
        // every user's margin within i64 (docs/rules.md, "Futures", "Overflow").
        let lots = book.open_interest as i128 + book.live_lots;
        let value = lots.checked_mul(price as i128 * sym.terms.quote_scale as i128);
        if value.is_none_or(|v| !fits_i64(v)) {
            return Err(Reason::Overflow);
        }
        let quote = sym.terms.quote;
        self.future_book_mut(s).mark = price;
        self.resync_future_orders(s);
        self.mark_dirty(quote);
        Ok(())
    }

    /// After a mark move: the open loss of every live order on future `s`. O(its orders).
    fn resync_future_orders(&mut self, s: usize) {
        let mut orders = std::mem::take(&mut self.scratch_mass_cancel);
        orders.clear();
        let sym = &self.symbols[s];
        for side in [&sym.bids, &sym.asks] {
            for level in side.levels_best_first(&self.levels) {
                let mut idx = self.levels.get(level).head;
                while idx != NIL {
                    orders.push((sym.spec.symbol, 0, idx));
                    idx = self.orders.get(idx).next;
                }
            }
        }
        for stops in &sym.stops {
            orders.extend(stops.iter().map(|e| (sym.spec.symbol, 0, e.node)));
        }
        for &(_, _, idx) in &orders {
            self.sync_future_order(idx);
        }
        self.scratch_mass_cancel = orders;
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
            self.tx_has_room()?;
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
            self.tx_has_room()?;
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
            .slots_of(account)
            .filter(|slot| slot.pos.lots != 0)
            .map(|slot| Position {
                symbol: self.symbols[slot.symbol as usize].spec.symbol,
                lots: slot.pos.lots,
                cost: slot.pos.cost,
            })
            .collect();
        out.sort_by_key(|p| p.symbol);
        out
    }

    /// Every open position as (account, symbol id, position), by account then symbol id.
    pub(crate) fn position_entries(&self) -> impl Iterator<Item = (u32, u32, PositionState)> + '_ {
        (0..self.fut.first_slot.len() as u32).flat_map(|account| {
            self.fut
                .slots_of(account)
                .filter(|slot| slot.pos.lots != 0)
                .map(move |slot| (account, slot.symbol, slot.pos))
        })
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
            .position_entries()
            .map(|(account, s, p)| {
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
        let quote = self.symbols[symbol as usize].terms.quote;
        let accounts = self.accounts.len();
        self.fut.slot_mut(account, symbol, quote, accounts).pos = PositionState { lots, cost };
        let book = self.future_book_mut(symbol as usize);
        book.open_interest += lots.max(0);
        self.accounts.get_mut(account).futures = true;
    }

    /// After a snapshot's orders are restored: the exposure flag of every user with a futures
    /// order (a user with a position has it already), and what each such order counts.
    pub(crate) fn flag_futures_orders(&mut self) {
        for account in 0..self.accounts.len() as u32 {
            let mut idx = self.accounts.get(account).orders_head;
            while idx != NIL {
                let node = *self.orders.get(idx);
                if is_future(&self.symbols[node.symbol as usize].terms) {
                    self.accounts.get_mut(account).futures = true;
                    self.sync_future_order(idx);
                }
                idx = node.account_next;
            }
        }
    }

    /// After a snapshot's positions and balances are decoded: the liquidation index.
    pub(crate) fn rebuild_futures_index(&mut self) {
        let mut pairs: Vec<(u32, CurrencyId)> = Vec::new();
        for (account, s, _) in self.position_entries() {
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
