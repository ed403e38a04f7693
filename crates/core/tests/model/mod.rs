//! A deliberately simple second implementation of Rialto's rules, written from `docs/rules.md`
//! alone (not from the engine), for the differential and unit tests.
//!
//! Sorted `Vec`s of orders per side, `BTreeMap`s for users and balances, `i128` arithmetic for
//! every amount (a product of two `i64` always fits, so "would it pass 2^63 - 1?" is a plain
//! comparison). Speed and cleverness are non-goals: each rule should read next to the sentence of
//! the rules it implements. The model asserts its own invariants (no negative balance, every
//! amount fits 64 bits) so that a model bug fails loudly instead of agreeing with a wrong engine.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

mod futures;
use futures::{Fut, is_fut};

use rialto_core::{
    AmendOrder, Amended, AuctionResult, Balance, CancelReason, Cancelled, Command, CurrencyTotals,
    Level, LiveOrder, Name, OpenOrder, OrderId, OrderType, OwnedEvent, PendingStop, Phase,
    PhaseChanged, PlaceOrder, Priority, Reason, RestingOrder, Side, Stp, SymbolId, SymbolSpec,
    SymbolStatus, Tif, Trade, Triggered, UserId, UserReport,
};

/// 2^63 - 1: the largest amount, price, quantity or total the venue can hold.
const MAX: i128 = i64::MAX as i128;

/// The venue's limits (docs/rules.md, `limit_exceeded`); the defaults match
/// `EngineConfig::default()`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_open_orders_per_user: usize,
    pub max_resting_orders: usize,
    pub max_users: usize,
    pub max_tx_ids: usize,
    pub max_window_ids: usize,
    pub max_symbols: usize,
}

impl Limits {
    /// The limits an engine of `config` applies.
    pub fn of(config: &rialto_core::EngineConfig) -> Limits {
        Limits {
            max_open_orders_per_user: config.max_open_orders_per_user as usize,
            max_resting_orders: config.max_resting_orders as usize,
            max_users: config.max_users as usize,
            max_tx_ids: config.max_tx_ids as usize,
            max_window_ids: config.max_window_ids as usize,
            max_symbols: config.max_symbols as usize,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_open_orders_per_user: 100_000,
            max_resting_orders: 1 << 17,
            max_users: 1 << 14,
            max_tx_ids: 1 << 16,
            max_window_ids: 1 << 16,
            max_symbols: 256,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Order {
    user: UserId,
    order: OrderId,
    side: Side,
    price: i64,
    remaining: i64,
    /// Executed since it was accepted (moves and amends keep it).
    filled: i64,
    stp: Stp,
    post_only: bool,
    /// Time in force (gtc, gtd or day) and when it expires (0: never).
    tif: Tif,
    expire_ts: i64,
    /// An iceberg's display quantity; 0 for any other order.
    display: i64,
    /// What the book shows of it: `remaining`, or an iceberg's current slice.
    shown: i64,
}

/// A pending stop order (rules.md, "Stop and stop-limit orders"): not in the book.
#[derive(Clone, Copy, Debug)]
struct Stop {
    user: UserId,
    order: OrderId,
    side: Side,
    stop_price: i64,
    /// Limit (stop_limit) or protection (stop) price.
    price: Option<i64>,
    remaining: i64,
    stp: Stp,
    stop_limit: bool,
    tif: Tif,
    /// Acceptance order: ties in trigger order go to the earlier.
    accepted: u64,
    /// When it expires, triggered or not (0: never).
    expire_ts: i64,
}

#[derive(Clone, Default)]
struct Book {
    /// Priority order: highest price first, then oldest first.
    bids: Vec<Order>,
    /// Priority order: lowest price first, then oldest first.
    asks: Vec<Order>,
}

impl Book {
    fn side(&self, side: Side) -> &Vec<Order> {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut Vec<Order> {
        match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        }
    }

    /// Joins the back of its price level.
    fn insert(&mut self, order: Order) {
        let orders = self.side_mut(order.side);
        let at = orders.partition_point(|o| match order.side {
            Side::Buy => o.price >= order.price,
            Side::Sell => o.price <= order.price,
        });
        orders.insert(at, order);
    }

    fn position(&self, user: UserId, order: OrderId) -> Option<(Side, usize)> {
        for side in [Side::Buy, Side::Sell] {
            if let Some(i) = self
                .side(side)
                .iter()
                .position(|o| o.user == user && o.order == order)
            {
                return Some((side, i));
            }
        }
        None
    }

    fn best_price(&self, side: Side) -> Option<i64> {
        self.side(side).first().map(|o| o.price)
    }

    /// Would a `side` order at `price` cross the best opposite order (whoever owns it)?
    fn would_take(&self, side: Side, price: i64) -> bool {
        self.best_price(side.opposite())
            .is_some_and(|best| crosses(side, price, best))
    }
}

/// A symbol's phase and band (rules "Trading phases, halts and auctions", "Price bands").
#[derive(Clone, Copy, Debug)]
struct Controls {
    phase: Phase,
    band_bps: i64,
    /// The last trade price or the last `set_ref_price`, whichever came later; 0: none.
    reference: i64,
    /// The last trade price; 0: none yet.
    last: i64,
}

impl Controls {
    /// The band `(lo, hi)`, if there is one: `w = floor(R * band_bps / 10000)`.
    fn band(&self) -> Option<(i128, i128)> {
        if self.band_bps == 0 || self.reference == 0 {
            return None;
        }
        let r = self.reference as i128;
        let w = r * self.band_bps as i128 / 10_000;
        Some((r - w, r + w))
    }

    /// Is `price` beyond the band's edge for a `side` order (a buy above hi, a sell below lo)?
    fn beyond(&self, side: Side, price: i64) -> bool {
        self.band().is_some_and(|(lo, hi)| match side {
            Side::Buy => price as i128 > hi,
            Side::Sell => (price as i128) < lo,
        })
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Bal {
    available: i128,
    held: i128,
}

#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    deposits: i128,
    withdrawals: i128,
    fees: i128,
    insurance: i128,
}

/// The order that is trading now: a new order, or a moved one.
#[derive(Clone, Copy, Debug)]
struct Taker {
    symbol: SymbolId,
    user: UserId,
    order: OrderId,
    side: Side,
    /// The limit or protection price; `None` for an unpriced market order.
    price: Option<i64>,
    remaining: i64,
    /// Executed so far, since the order was first accepted.
    filled: i64,
    tif: Tif,
    /// When what rests of it expires (0: never).
    expire_ts: i64,
    market: bool,
    stp: Stp,
    post_only: bool,
    /// An iceberg's display quantity (0: not an iceberg).
    display: i64,
    /// The band as it stood when the order entered: `(lo, hi)`.
    band: Option<(i128, i128)>,
    /// A liquidation's close (order 0, never remembered).
    liquidation: bool,
}

impl Taker {
    /// Is a level at `price` beyond the band this taker entered with?
    fn beyond_band(&self, price: i64) -> bool {
        self.band.is_some_and(|(lo, hi)| match self.side {
            Side::Buy => price as i128 > hi,
            Side::Sell => (price as i128) < lo,
        })
    }
}

#[derive(Clone, Default)]
pub struct Model {
    limits: Limits,
    symbols: Vec<SymbolSpec>,
    /// Each symbol's phase and band, by symbol id.
    controls: Vec<Controls>,
    books: Vec<Book>,
    /// Every currency the venue knows, by name.
    currencies: BTreeMap<String, Totals>,
    /// Users and their balances by currency name.
    users: BTreeMap<UserId, BTreeMap<String, Bal>>,
    txs: BTreeSet<i64>,
    /// Live orders and their symbol.
    live: BTreeMap<(UserId, OrderId), SymbolId>,
    /// Number of live orders per user.
    open: BTreeMap<UserId, usize>,
    /// The venue clock: the largest command time so far, 0 at the start.
    now: i64,
    /// How long the id of an ended order stays taken.
    order_id_window: i64,
    /// Orders that ended inside the window: (user, order, ended at).
    recent: Vec<(UserId, OrderId, i64)>,
    /// Suspended users.
    suspended: BTreeSet<UserId>,
    /// Checks the model's own invariants after every command (slow on big books).
    pub self_check: bool,
    /// Pending stops per symbol, in acceptance order.
    stops: Vec<Vec<Stop>>,
    /// Acceptances of stops so far.
    accepted: u64,
    /// Last trade price per symbol (0: none).
    last: Vec<i64>,
    /// Futures by symbol id.
    futs: BTreeMap<usize, Fut>,
    /// Open positions: (user, symbol) to (lots, cost).
    positions: BTreeMap<(UserId, usize), (i128, i128)>,
    /// Currencies whose futures traded or whose mark moved since the last pass.
    dirty: BTreeSet<String>,
    /// (user, currency) liquidated during the current command.
    liquidated: BTreeSet<(UserId, String)>,
}

fn i64_of(amount: i128) -> i64 {
    i64::try_from(amount).expect("model: an amount passed 64 bits")
}

/// What one lot of a buy at `price` holds: `price * quote_scale + taker_fee`.
fn buy_hold_per_lot(spec: &SymbolSpec, price: i64) -> i128 {
    if is_fut(spec) {
        return 0;
    }
    price as i128 * spec.quote_scale as i128 + spec.taker_fee as i128
}

/// The hold of an order, or `None` when it passes 64 bits (`overflow`). An unpriced market buy
/// holds nothing.
fn hold_of(spec: &SymbolSpec, side: Side, price: Option<i64>, qty: i64) -> Option<i128> {
    let per_lot = match (side, price) {
        (Side::Buy, Some(p)) => buy_hold_per_lot(spec, p),
        (Side::Buy, None) => 0,
        (Side::Sell, _) => sell_hold_per_lot(spec),
    };
    if per_lot > MAX {
        return None;
    }
    let hold = per_lot * qty as i128;
    (hold <= MAX).then_some(hold)
}

/// What one lot of a sell holds: its base (a future's orders hold nothing).
fn sell_hold_per_lot(spec: &SymbolSpec) -> i128 {
    if is_fut(spec) {
        0
    } else {
        spec.base_scale as i128
    }
}

/// What an order of display quantity `display` (0: not an iceberg) shows of `remaining`.
fn slice(display: i64, remaining: i64) -> i64 {
    if display == 0 {
        remaining
    } else {
        display.min(remaining)
    }
}

/// A sell whose `price * quote_scale` is below the taker fee would have negative proceeds.
fn below_fee_floor(spec: &SymbolSpec, price: i64) -> bool {
    (price as i128) * (spec.quote_scale as i128) < spec.taker_fee as i128
}

/// Does a `side` order at `price` cross an opposite order at `other`?
/// When a DAY order placed at `now` expires: the first instant strictly after `now` whose time
/// of day is `day_end` (`None` past i64).
fn day_expiry(now: i64, day_end: i64) -> Option<i64> {
    let day = rialto_core::NS_PER_DAY as i128;
    let midnight = (now as i128).div_euclid(day) * day;
    let mut t = midnight + day_end as i128;
    if t <= now as i128 {
        t += day;
    }
    i64::try_from(t).ok()
}

fn crosses(side: Side, price: i64, other: i64) -> bool {
    match side {
        Side::Buy => price >= other,
        Side::Sell => price <= other,
    }
}

impl Model {
    pub fn new() -> Model {
        Model::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Model {
        Model {
            limits,
            self_check: true,
            ..Model::default()
        }
    }

    /// Applies one command that carries no time.
    pub fn apply(&mut self, cmd: &Command, events: &mut Vec<OwnedEvent>) -> Result<(), Reason> {
        self.apply_at(None, cmd, events)
    }

    /// Applies one command at time `ts` (none: the clock stays): its events go to `events`,
    /// the result is returned.
    pub fn apply_at(
        &mut self,
        ts: Option<i64>,
        cmd: &Command,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        // Time first: a time below the clock counts as the clock.
        if let Some(ts) = ts {
            self.now = self.now.max(ts);
        }
        self.forget_old_ids();
        self.liquidated.clear();
        self.expire_due(events);
        // Expiries stand even when the command is then rejected.
        let before = events.len();
        let result = match *cmd {
            Command::AddSymbol(ref spec) => self.add_symbol(**spec),
            Command::AddUser { user } => self.add_user(user),
            Command::AdjustBalance {
                user,
                currency,
                amount,
                tx,
            } => self.adjust_balance(user, currency, amount, tx),
            Command::Place(place) => self.place(&place, events),
            Command::Cancel { user, order } => self.cancel(user, order, events),
            Command::Move { user, order, price } => self.move_order(user, order, price, events),
            Command::Reduce { user, order, qty } => self.reduce(user, order, qty, events),
            Command::Amend(ref amend) => self.amend(amend, events),
            Command::MassCancel { user, symbol } => self.mass_cancel(user, symbol, events),
            Command::Book { symbol, depth } => self.book(symbol, depth, events),
            Command::UserReport { user } => match self.user_report(user) {
                Some(report) => {
                    events.push(OwnedEvent::UserReport(report));
                    Ok(())
                }
                None => Err(Reason::UnknownUser),
            },
            Command::VenueReport => {
                events.push(OwnedEvent::VenueReport(self.venue_totals()));
                Ok(())
            }
            Command::Tick => Ok(()),
            Command::SetPhase { symbol, phase } => self.set_phase(symbol, phase, events),
            Command::SetBand { symbol, band_bps } => {
                if symbol.0 as usize >= self.symbols.len() {
                    Err(Reason::UnknownSymbol)
                } else if band_bps < 0 {
                    Err(Reason::InvalidQty)
                } else {
                    self.symbols[symbol.0 as usize].band_bps = band_bps;
                    self.controls[symbol.0 as usize].band_bps = band_bps;
                    Ok(())
                }
            }
            Command::SetRefPrice { symbol, price } => {
                if symbol.0 as usize >= self.symbols.len() {
                    Err(Reason::UnknownSymbol)
                } else if price <= 0 {
                    Err(Reason::InvalidPrice)
                } else {
                    self.controls[symbol.0 as usize].reference = price;
                    Ok(())
                }
            }
            Command::SetOrderIdWindow { window } => {
                if window < 0 {
                    Err(Reason::InvalidQty)
                } else {
                    self.order_id_window = window;
                    self.forget_old_ids();
                    Ok(())
                }
            }
            Command::SuspendUser { user } => self.suspend_user(user, events),
            Command::SetMarkPrice { symbol, price } => self.set_mark_price(symbol, price),
            Command::FundInsurance {
                currency,
                amount,
                tx,
            } => self.fund_insurance(currency, amount, tx),
            Command::ResumeUser { user } => {
                if !self.users.contains_key(&user) {
                    return Err(Reason::UnknownUser);
                }
                self.suspended.remove(&user);
                Ok(())
            }
        };
        self.stop_cascade(before, events);
        self.knock_on_futures(events);
        assert!(
            result.is_ok() || events.len() == before,
            "model: a rejected command emitted events"
        );
        if self.self_check {
            self.check_invariants();
        }
        result
    }

    // ----- symbols, users, balances -------------------------------------------------------

    fn add_symbol(&mut self, spec: SymbolSpec) -> Result<(), Reason> {
        if self.symbols.iter().any(|s| s.symbol == spec.symbol) {
            return Err(Reason::DuplicateSymbol);
        }
        if spec.base_scale <= 0
            || spec.quote_scale <= 0
            || spec.maker_fee < 0
            || spec.taker_fee < spec.maker_fee
            || spec.base == spec.quote
            || spec.band_bps < 0
            || !(0..86_400_000_000_000).contains(&spec.day_end)
        {
            return Err(Reason::InvalidSymbol);
        }
        let fut = match spec.kind {
            None => return Err(Reason::InvalidSymbol),
            Some(rialto_core::SymbolKind::Spot) => None,
            Some(rialto_core::SymbolKind::Future {
                initial_margin,
                maintenance_margin,
                mark_price,
            }) => {
                if !(0 < maintenance_margin && maintenance_margin <= initial_margin)
                    || mark_price <= 0
                {
                    return Err(Reason::InvalidSymbol);
                }
                Some(Fut {
                    initial: initial_margin as i128,
                    maintenance: maintenance_margin as i128,
                    mark: mark_price,
                })
            }
        };
        if self.symbols.len() >= self.limits.max_symbols {
            return Err(Reason::LimitExceeded);
        }
        if let Some(f) = fut {
            self.futs.insert(self.symbols.len(), f);
        }
        self.symbols.push(spec);
        self.controls.push(Controls {
            phase: Phase::Continuous,
            band_bps: spec.band_bps,
            reference: 0,
            last: 0,
        });
        self.books.push(Book::default());
        self.stops.push(Vec::new());
        self.last.push(0);
        // A future's base names its underlying and registers no currency.
        let registered = if fut.is_some() {
            vec![spec.quote]
        } else {
            vec![spec.base, spec.quote]
        };
        for currency in registered {
            self.currencies
                .entry(currency.as_str().to_string())
                .or_default();
        }
        Ok(())
    }

    fn add_user(&mut self, user: UserId) -> Result<(), Reason> {
        if self.users.contains_key(&user) {
            return Err(Reason::DuplicateUser);
        }
        if self.users.len() >= self.limits.max_users {
            return Err(Reason::LimitExceeded);
        }
        self.users.insert(user, BTreeMap::new());
        Ok(())
    }

    fn adjust_balance(
        &mut self,
        user: UserId,
        currency: Name,
        amount: i64,
        tx: i64,
    ) -> Result<(), Reason> {
        if !self.users.contains_key(&user) {
            return Err(Reason::UnknownUser);
        }
        if amount == 0 {
            return Err(Reason::InvalidQty);
        }
        if self.txs.contains(&tx) {
            return Err(Reason::DuplicateTx);
        }
        if amount < 0 && self.suspended.contains(&user) {
            return Err(Reason::UserSuspended);
        }
        let currency = currency.as_str().to_string();
        let bal = self.bal(user, &currency);
        let totals = self.currencies.get(&currency).copied().unwrap_or_default();
        let amount = amount as i128;
        if amount < 0 && -amount > bal.available {
            return Err(Reason::InsufficientFunds);
        }
        if amount < 0 {
            self.check_margin_after_spending(user, &currency, -amount)?;
        }
        if amount > 0 && (totals.deposits + amount > MAX || bal.available + bal.held + amount > MAX)
        {
            return Err(Reason::Overflow);
        }
        if self.txs.len() >= self.limits.max_tx_ids {
            return Err(Reason::LimitExceeded);
        }
        self.txs.insert(tx);
        let totals = self.currencies.entry(currency.clone()).or_default();
        if amount > 0 {
            totals.deposits += amount;
        } else {
            totals.withdrawals -= amount;
        }
        self.bal_mut(user, &currency).available += amount;
        Ok(())
    }

    fn bal(&self, user: UserId, currency: &str) -> Bal {
        self.users
            .get(&user)
            .and_then(|b| b.get(currency))
            .copied()
            .unwrap_or_default()
    }

    fn bal_mut(&mut self, user: UserId, currency: &str) -> &mut Bal {
        self.users
            .get_mut(&user)
            .expect("model: balance of an unknown user")
            .entry(currency.to_string())
            .or_default()
    }

    /// Moves `amount` of `user`'s `currency` from available to held (negative: back).
    fn hold(&mut self, user: UserId, currency: &str, amount: i128) {
        if amount == 0 {
            return;
        }
        let bal = self.bal_mut(user, currency);
        bal.available -= amount;
        bal.held += amount;
    }

    // ----- orders ---------------------------------------------------------------------------

    fn spec(&self, symbol: SymbolId) -> Option<SymbolSpec> {
        self.symbols.get(symbol.0 as usize).copied()
    }

    fn open_orders_of(&self, user: UserId) -> usize {
        self.open.get(&user).copied().unwrap_or(0)
    }

    fn make_live(&mut self, user: UserId, order: OrderId, symbol: SymbolId) {
        self.live.insert((user, order), symbol);
        *self.open.entry(user).or_default() += 1;
    }

    /// Ids of orders that ended a window or more ago are free again.
    fn forget_old_ids(&mut self) {
        let (now, window) = (self.now, self.order_id_window);
        self.recent
            .retain(|&(_, _, ended_at)| now - ended_at < window);
    }

    /// An order ended (filled, cancelled, killed): its id stays taken for the window.
    fn ended(&mut self, user: UserId, order: OrderId) {
        if self.order_id_window > 0 {
            // Full only when the window was switched on over more live orders than it holds.
            if self.recent.len() >= self.limits.max_window_ids {
                self.recent.remove(0);
            }
            self.recent.push((user, order, self.now));
        }
    }

    fn make_dead(&mut self, user: UserId, order: OrderId) {
        self.live.remove(&(user, order));
        *self
            .open
            .get_mut(&user)
            .expect("model: user with live orders") -= 1;
    }

    fn place(&mut self, p: &PlaceOrder, events: &mut Vec<OwnedEvent>) -> Result<(), Reason> {
        if !self.users.contains_key(&p.user) {
            return Err(Reason::UnknownUser);
        }
        if self.suspended.contains(&p.user) {
            return Err(Reason::UserSuspended);
        }
        let spec = self.spec(p.symbol).ok_or(Reason::UnknownSymbol)?;
        let (Some(side), Some(order_type), Some(tif), Some(stp)) =
            (p.side, p.order_type, p.tif, p.stp)
        else {
            return Err(Reason::InvalidOrder);
        };
        let market = order_type == OrderType::Market;
        let stop = matches!(order_type, OrderType::Stop | OrderType::StopLimit);
        let resting_limit =
            order_type == OrderType::Limit && matches!(tif, Tif::Gtc | Tif::Gtd | Tif::Day);
        if market && !matches!(tif, Tif::Ioc | Tif::Fok) {
            return Err(Reason::InvalidOrder);
        }
        // GTD needs an expiry after now; no other tif takes one.
        match (tif, p.expire_ts()) {
            (Tif::Gtd, Some(ts)) if ts > self.now => {}
            (Tif::Gtd, _) | (_, Some(_)) => return Err(Reason::InvalidOrder),
            _ => {}
        }
        if order_type == OrderType::Stop && !matches!(tif, Tif::Ioc | Tif::Fok) {
            return Err(Reason::InvalidOrder);
        }
        if p.post_only && !resting_limit {
            return Err(Reason::InvalidOrder);
        }
        if p.stop_price().is_some() && !stop {
            return Err(Reason::InvalidOrder);
        }
        if p.display_qty().is_some() && !resting_limit {
            return Err(Reason::InvalidOrder);
        }
        // GTD needs an expiry after now; no other tif takes one.
        match (tif, p.expire_ts()) {
            (Tif::Gtd, Some(ts)) if ts > self.now => {}
            (Tif::Gtd, _) | (_, Some(_)) => return Err(Reason::InvalidOrder),
            _ => {}
        }
        if p.qty <= 0 {
            return Err(Reason::InvalidQty);
        }
        // At most MAX_ICEBERG_SLICES slices (Rialto's bound on the trades one order can make).
        if let Some(display) = p.display_qty()
            && (display <= 0
                || display >= p.qty
                || (p.qty as i128 + display as i128 - 1) / display as i128
                    > rialto_core::MAX_ICEBERG_SLICES as i128)
        {
            return Err(Reason::InvalidQty);
        }
        match p.price {
            None if !market && order_type != OrderType::Stop => return Err(Reason::InvalidPrice),
            None if order_type == OrderType::Stop && side == Side::Buy => {
                return Err(Reason::InvalidPrice);
            }
            Some(price) if price <= 0 => return Err(Reason::InvalidPrice),
            Some(price)
                if side == Side::Sell && !is_fut(&spec) && below_fee_floor(&spec, price) =>
            {
                return Err(Reason::InvalidPrice);
            }
            _ => {}
        }
        if stop && p.stop_price().is_none_or(|sp| sp <= 0) {
            return Err(Reason::InvalidPrice);
        }
        // Every futures order has a price: a market or stop order its protection price.
        if is_fut(&spec) && p.price.is_none() {
            return Err(Reason::InvalidPrice);
        }
        if self.live.contains_key(&(p.user, p.order))
            || self
                .recent
                .iter()
                .any(|&(u, o, _)| (u, o) == (p.user, p.order))
        {
            return Err(Reason::DuplicateOrderId);
        }
        let controls = self.controls[p.symbol.0 as usize];
        let pending_stop = matches!(order_type, OrderType::Stop | OrderType::StopLimit);
        match controls.phase {
            Phase::Continuous => {}
            Phase::Halted => return Err(Reason::SymbolHalted),
            Phase::Closed => return Err(Reason::SymbolClosed),
            // Stops wait whatever their tif; what would take at once is refused.
            Phase::Auction => {
                if !pending_stop && (market || tif == Tif::Ioc || tif == Tif::Fok) {
                    return Err(Reason::SymbolInAuction);
                }
            }
        }
        if let (OrderType::Limit | OrderType::StopLimit, Some(price)) = (order_type, p.price)
            && controls.beyond(side, price)
        {
            return Err(Reason::PriceOutOfBand);
        }
        if let Some(stop_price) = p.stop_price()
            && self.already_triggered(p.symbol, side, stop_price)
        {
            return Err(Reason::WouldTrigger);
        }
        let book = &self.books[p.symbol.0 as usize];
        if let (true, Some(price)) = (p.post_only, p.price)
            && controls.phase != Phase::Auction
            && book.would_take(side, price)
        {
            return Err(Reason::WouldTake);
        }
        let expire_ts = match tif {
            Tif::Gtd => p.expire_ts().expect("model: checked above"),
            Tif::Day => day_expiry(self.now, spec.day_end).ok_or(Reason::Overflow)?,
            _ => 0,
        };
        let hold = hold_of(&spec, side, p.price, p.qty).ok_or(Reason::Overflow)?;
        let hold_currency = match side {
            Side::Buy => spec.quote,
            Side::Sell => spec.base,
        };
        if is_fut(&spec) {
            let price = p.price.expect("model: checked");
            self.check_future_order(p.user, p.symbol.0 as usize, side, price, p.qty, None)?;
        } else {
            if hold > self.bal(p.user, hold_currency.as_str()).available {
                return Err(Reason::InsufficientFunds);
            }
            self.check_margin_after_spending(p.user, hold_currency.as_str(), hold)?;
        }
        let window_full = self.order_id_window > 0
            && self.recent.len() + self.live.len() >= self.limits.max_window_ids;
        if (resting_limit || stop)
            && (self.open_orders_of(p.user) >= self.limits.max_open_orders_per_user
                || self.live.len() >= self.limits.max_resting_orders)
            || window_full
        {
            return Err(Reason::LimitExceeded);
        }

        if stop {
            self.hold(p.user, hold_currency.as_str(), hold);
            self.accepted += 1;
            self.stops[p.symbol.0 as usize].push(Stop {
                user: p.user,
                order: p.order,
                side,
                stop_price: p.stop_price().expect("model: checked"),
                price: p.price,
                remaining: p.qty,
                stp,
                stop_limit: order_type == OrderType::StopLimit,
                tif,
                accepted: self.accepted,
                expire_ts,
            });
            self.make_live(p.user, p.order, p.symbol);
            return Ok(());
        }
        let taker = Taker {
            symbol: p.symbol,
            user: p.user,
            order: p.order,
            side,
            price: p.price,
            remaining: p.qty,
            filled: 0,
            tif,
            expire_ts,
            market,
            stp,
            post_only: p.post_only,
            display: p.display_qty().unwrap_or(0),
            band: controls.band(),
            liquidation: false,
        };
        if tif == Tif::Fok && self.fok_fillable(&spec, &taker, hold) < p.qty as i128 {
            events.push(OwnedEvent::Cancelled(Cancelled {
                symbol: p.symbol,
                user: p.user,
                order: p.order,
                side,
                qty: p.qty,
                reason: CancelReason::Fok,
            }));
            self.ended(p.user, p.order);
            return Ok(());
        }
        self.hold(p.user, hold_currency.as_str(), hold);
        self.execute(spec, taker, events);
        Ok(())
    }

    /// Would a `side` stop at `stop_price` already trigger on the symbol's last trade?
    fn already_triggered(&self, symbol: SymbolId, side: Side, stop_price: i64) -> bool {
        let last = self.last[symbol.0 as usize];
        last != 0
            && match side {
                Side::Buy => last >= stop_price,
                Side::Sell => last <= stop_price,
            }
    }

    /// The stop cascade: the trades printed since event `from`, examined in print order, each
    /// collecting the stops it triggers; then those enter one after another; their trades are
    /// the next round's.
    fn stop_cascade(&mut self, mut from: usize, events: &mut Vec<OwnedEvent>) {
        loop {
            let trades: Vec<(SymbolId, i64)> = events[from..]
                .iter()
                .filter_map(|e| match e {
                    OwnedEvent::Trade(t) => Some((t.symbol, t.price)),
                    _ => None,
                })
                .collect();
            from = events.len();
            let mut collected: Vec<(SymbolId, Stop)> = Vec::new();
            for (symbol, price) in trades {
                let stops = &mut self.stops[symbol.0 as usize];
                let mut buys: Vec<Stop> = stops
                    .iter()
                    .filter(|s| s.side == Side::Buy && price >= s.stop_price)
                    .copied()
                    .collect();
                buys.sort_by_key(|s| (s.stop_price, s.accepted));
                let mut sells: Vec<Stop> = stops
                    .iter()
                    .filter(|s| s.side == Side::Sell && price <= s.stop_price)
                    .copied()
                    .collect();
                sells.sort_by_key(|s| (-s.stop_price, s.accepted));
                for s in buys.into_iter().chain(sells) {
                    stops.retain(|o| (o.user, o.order) != (s.user, s.order));
                    collected.push((symbol, s));
                }
            }
            if collected.is_empty() {
                return;
            }
            for (symbol, stop) in collected {
                self.trigger(symbol, stop, events);
            }
        }
    }

    /// A triggered stop enters as an incoming order, its funds already held.
    fn trigger(&mut self, symbol: SymbolId, stop: Stop, events: &mut Vec<OwnedEvent>) {
        let spec = self.symbols[symbol.0 as usize];
        events.push(OwnedEvent::Triggered(Triggered {
            symbol,
            user: stop.user,
            order: stop.order,
            side: stop.side,
            stop_price: stop.stop_price,
        }));
        self.make_dead(stop.user, stop.order);
        let mut taker = Taker {
            symbol,
            user: stop.user,
            order: stop.order,
            side: stop.side,
            price: stop.price,
            remaining: stop.remaining,
            filled: 0,
            tif: stop.tif,
            expire_ts: stop.expire_ts,
            market: !stop.stop_limit,
            stp: stop.stp,
            post_only: false,
            display: 0,
            // The band is fixed when the stop enters, at its trigger.
            band: self.controls[symbol.0 as usize].band(),
            liquidation: false,
        };
        if stop.tif == Tif::Fok && self.fok_fillable(&spec, &taker, 0) < stop.remaining as i128 {
            self.end_taker(&spec, &mut taker, CancelReason::Fok, events);
            return;
        }
        self.execute(spec, taker, events);
    }

    /// Lots an unpriced market buy can pay for at `price` out of `available`.
    fn affordable(spec: &SymbolSpec, available: i128, price: i64) -> i128 {
        available / buy_hold_per_lot(spec, price)
    }

    /// Does the taker still cross a resting order at `price`? (The funds bound of an unpriced
    /// market buy is checked separately.)
    fn taker_crosses(spec: &SymbolSpec, taker: &Taker, price: i64) -> bool {
        match taker.price {
            Some(limit) => crosses(taker.side, limit, price),
            None => match taker.side {
                Side::Buy => true,
                Side::Sell => is_fut(spec) || !below_fee_floor(spec, price),
            },
        }
    }

    /// The fill-or-kill walk: the lots the taker would really get, decided by running the walk
    /// itself on a copy of the venue (rules.md: iceberg slices re-queue, own orders stop the
    /// walk or are skipped as its stp says). `hold` is what the taker would hold (0 when it
    /// already does).
    fn fok_fillable(&self, spec: &SymbolSpec, taker: &Taker, hold: i128) -> i128 {
        let mut copy = self.clone();
        let hold_currency = match taker.side {
            Side::Buy => spec.quote,
            Side::Sell => spec.base,
        };
        copy.hold(taker.user, hold_currency.as_str(), hold);
        let mut events = Vec::new();
        let walk = Taker {
            tif: Tif::Ioc,
            ..*taker
        };
        copy.execute(*spec, walk, &mut events);
        events
            .iter()
            .map(|e| match e {
                OwnedEvent::Trade(t)
                    if (t.taker_user, t.taker_order) == (taker.user, taker.order) =>
                {
                    t.qty as i128
                }
                _ => 0,
            })
            .sum()
    }

    /// Matches an accepted taker (its hold already taken), then rests or cancels the rest.
    fn execute(&mut self, spec: SymbolSpec, mut taker: Taker, events: &mut Vec<OwnedEvent>) {
        let s = taker.symbol.0 as usize;
        let opposite = taker.side.opposite();
        let unpriced_buy = taker.price.is_none() && taker.side == Side::Buy && !is_fut(&spec);
        // Nothing trades outside `continuous`: the order rests (only resting orders get here).
        let matching = self.controls[s].phase == Phase::Continuous;
        let mut stopped_by_band = false;
        while taker.remaining > 0 && matching {
            let Some(maker) = self.books[s].side(opposite).first().copied() else {
                break;
            };
            if !Self::taker_crosses(&spec, &taker, maker.price) {
                break;
            }
            if taker.beyond_band(maker.price) {
                stopped_by_band = true;
                break;
            }
            // Self-trade prevention is decided when the order meets its match, before the funds
            // bound of an unpriced market buy limits how much it trades there (the rules leave
            // this order open; this is the engine's reading: "crosses every level").
            if maker.user == taker.user {
                if matches!(taker.stp, Stp::CancelMaker | Stp::CancelBoth) {
                    self.books[s].side_mut(opposite).remove(0);
                    self.unrest(&spec, taker.symbol, &maker, maker.remaining);
                    events.push(cancelled(taker.symbol, &maker, CancelReason::Stp));
                }
                if matches!(taker.stp, Stp::CancelTaker | Stp::CancelBoth) {
                    self.end_taker(&spec, &mut taker, CancelReason::Stp, events);
                    return;
                }
                continue;
            }
            let mut lots = taker.remaining.min(maker.shown);
            if unpriced_buy {
                let available = self.spendable(taker.user, spec.quote.as_str());
                let afford = Self::affordable(&spec, available, maker.price);
                if afford == 0 {
                    break;
                }
                lots = lots.min(i64_of(afford));
            }
            if is_fut(&spec) {
                match self.overflow_gives_way(&spec, &taker, opposite, lots, events) {
                    Some(true) => continue,
                    Some(false) => {
                        self.end_taker(&spec, &mut taker, CancelReason::Overflow, events);
                        return;
                    }
                    None => {}
                }
            }
            self.fill(&spec, &mut taker, maker, lots, events);
        }
        if taker.remaining == 0 {
            if !taker.liquidation {
                self.ended(taker.user, taker.order);
            }
            return;
        }
        // Nothing rests beyond the band on the side that would take.
        let rests = !taker.market && matches!(taker.tif, Tif::Gtc | Tif::Gtd | Tif::Day);
        let limit_beyond_band = rests && taker.price.is_some_and(|p| taker.beyond_band(p));
        if stopped_by_band || limit_beyond_band {
            self.end_taker(&spec, &mut taker, CancelReason::Band, events);
            return;
        }
        match taker.tif {
            Tif::Gtc | Tif::Gtd | Tif::Day => {
                let order = Order {
                    user: taker.user,
                    order: taker.order,
                    side: taker.side,
                    price: taker.price.expect("model: a resting order has a price"),
                    remaining: taker.remaining,
                    filled: taker.filled,
                    stp: taker.stp,
                    post_only: taker.post_only,
                    tif: taker.tif,
                    expire_ts: taker.expire_ts,
                    display: taker.display,
                    shown: slice(taker.display, taker.remaining),
                };
                self.books[s].insert(order);
                self.make_live(taker.user, taker.order, taker.symbol);
            }
            Tif::Ioc if taker.market => {
                self.end_taker(&spec, &mut taker, CancelReason::Market, events)
            }
            Tif::Ioc => self.end_taker(&spec, &mut taker, CancelReason::Ioc, events),
            Tif::Fok => panic!("model: the fill-or-kill walk promised a full fill"),
        }
    }

    /// Cancels the taker's remainder and returns its hold.
    fn end_taker(
        &mut self,
        spec: &SymbolSpec,
        taker: &mut Taker,
        reason: CancelReason,
        events: &mut Vec<OwnedEvent>,
    ) {
        let (currency, hold) = match taker.side {
            Side::Buy => (
                spec.quote,
                taker.price.map_or(0, |p| buy_hold_per_lot(spec, p)) * taker.remaining as i128,
            ),
            Side::Sell => (spec.base, sell_hold_per_lot(spec) * taker.remaining as i128),
        };
        self.hold(taker.user, currency.as_str(), -hold);
        events.push(OwnedEvent::Cancelled(Cancelled {
            symbol: taker.symbol,
            user: taker.user,
            order: taker.order,
            side: taker.side,
            qty: taker.remaining,
            reason,
        }));
        taker.remaining = 0;
        if !taker.liquidation {
            self.ended(taker.user, taker.order);
        }
    }

    /// Returns the hold of `qty` lots of a resting order (it is being reduced or removed).
    fn unrest(&mut self, spec: &SymbolSpec, _symbol: SymbolId, order: &Order, qty: i64) {
        let (currency, per_lot) = match order.side {
            Side::Buy => (spec.quote, buy_hold_per_lot(spec, order.price)),
            Side::Sell => (spec.base, sell_hold_per_lot(spec)),
        };
        self.hold(order.user, currency.as_str(), -(per_lot * qty as i128));
        if qty == order.remaining {
            self.make_dead(order.user, order.order);
            self.ended(order.user, order.order);
        }
    }

    /// One fill of `lots` between the taker and the best resting order `maker`.
    fn fill(
        &mut self,
        spec: &SymbolSpec,
        taker: &mut Taker,
        maker: Order,
        lots: i64,
        events: &mut Vec<OwnedEvent>,
    ) {
        let q = lots as i128;
        let price = maker.price;
        let notional = q * price as i128 * spec.quote_scale as i128;
        let base_amount = q * spec.base_scale as i128;
        let maker_fee = q * spec.maker_fee as i128;
        let taker_fee = q * spec.taker_fee as i128;
        let (buyer, seller, buyer_fee, seller_fee, buyer_hold_price) = match taker.side {
            Side::Buy => (taker.user, maker.user, taker_fee, maker_fee, taker.price),
            Side::Sell => (
                maker.user,
                taker.user,
                maker_fee,
                taker_fee,
                Some(maker.price),
            ),
        };
        let (quote, base) = (spec.quote.as_str(), spec.base.as_str());
        if is_fut(spec) {
            let s = taker.symbol.0 as usize;
            self.settle_future_fill(s, buyer, seller, price, lots, buyer_fee, seller_fee);
        } else {
            // The buyer pays out of its hold (if it has one); the unused part of the hold
            // returns.
            if let Some(hold_price) = buyer_hold_price {
                self.hold(buyer, quote, -(q * buy_hold_per_lot(spec, hold_price)));
            }
            self.bal_mut(buyer, quote).available -= notional + buyer_fee;
            self.bal_mut(buyer, base).available += base_amount;
            self.bal_mut(seller, base).held -= base_amount;
            self.bal_mut(seller, quote).available += notional - seller_fee;
            self.currencies
                .get_mut(quote)
                .expect("model: a symbol's quote currency is known")
                .fees += maker_fee + taker_fee;
        }

        let s = taker.symbol.0 as usize;
        let resting = &mut self.books[s].side_mut(maker.side)[0];
        resting.remaining -= lots;
        resting.filled += lots;
        resting.shown -= lots;
        if resting.remaining == 0 {
            self.books[s].side_mut(maker.side).remove(0);
            self.make_dead(maker.user, maker.order);
            self.ended(maker.user, maker.order);
        } else if resting.shown == 0 {
            // An iceberg's used-up slice: a new one joins the back of the level.
            let mut next = self.books[s].side_mut(maker.side).remove(0);
            next.shown = slice(next.display, next.remaining);
            self.books[s].insert(next);
        }
        self.last[s] = price;
        taker.remaining -= lots;
        taker.filled += lots;
        self.controls[s].last = price;
        self.controls[s].reference = price;
        events.push(OwnedEvent::Trade(Trade {
            symbol: taker.symbol,
            price,
            qty: lots,
            maker_user: maker.user,
            maker_order: maker.order,
            taker_user: taker.user,
            taker_order: taker.order,
            taker_side: taker.side,
            maker_fee: i64_of(maker_fee),
            taker_fee: i64_of(taker_fee),
        }));
    }

    /// The live order `(user, order)`: its symbol, side and index in its side.
    fn find(&self, user: UserId, order: OrderId) -> Option<(SymbolId, Side, usize)> {
        let symbol = *self.live.get(&(user, order))?;
        let (side, i) = self.books[symbol.0 as usize].position(user, order)?;
        Some((symbol, side, i))
    }

    /// The pending stop `(user, order)`: its symbol and index in the symbol's stops.
    fn find_stop(&self, user: UserId, order: OrderId) -> Option<(SymbolId, usize)> {
        let symbol = *self.live.get(&(user, order))?;
        let i = self.stops[symbol.0 as usize]
            .iter()
            .position(|s| (s.user, s.order) == (user, order))?;
        Some((symbol, i))
    }

    /// Returns the hold of `qty` lots of a pending stop.
    fn unhold_stop(&mut self, spec: &SymbolSpec, stop: &Stop, qty: i64) {
        let (currency, hold) = match stop.side {
            Side::Buy => (
                spec.quote,
                buy_hold_per_lot(spec, stop.price.expect("model: a stop buy has a price"))
                    * qty as i128,
            ),
            Side::Sell => (spec.base, sell_hold_per_lot(spec) * qty as i128),
        };
        self.hold(stop.user, currency.as_str(), -hold);
    }

    /// Ends pending stop `i` of `symbol`: its hold back, `cancelled` with `reason`.
    fn cancel_stop(
        &mut self,
        symbol: SymbolId,
        i: usize,
        reason: CancelReason,
        events: &mut Vec<OwnedEvent>,
    ) {
        let spec = self.symbols[symbol.0 as usize];
        let stop = self.stops[symbol.0 as usize].remove(i);
        self.unhold_stop(&spec, &stop, stop.remaining);
        self.make_dead(stop.user, stop.order);
        self.ended(stop.user, stop.order);
        events.push(OwnedEvent::Cancelled(Cancelled {
            symbol,
            user: stop.user,
            order: stop.order,
            side: stop.side,
            qty: stop.remaining,
            reason,
        }));
    }

    fn cancel(
        &mut self,
        user: UserId,
        order: OrderId,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        self.cancel_for(user, order, CancelReason::User, events)
    }

    fn cancel_for(
        &mut self,
        user: UserId,
        order: OrderId,
        reason: CancelReason,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        if let Some((symbol, i)) = self.find_stop(user, order) {
            self.cancel_stop(symbol, i, reason, events);
            return Ok(());
        }
        let (symbol, side, i) = self.find(user, order).ok_or(Reason::UnknownOrder)?;
        let spec = self.symbols[symbol.0 as usize];
        let o = self.books[symbol.0 as usize].side_mut(side).remove(i);
        self.unrest(&spec, symbol, &o, o.remaining);
        events.push(cancelled(symbol, &o, reason));
        Ok(())
    }

    /// Step 1 of a command: every live order whose expiry has come is cancelled, by expiry
    /// time, then user, then order.
    fn expire_due(&mut self, events: &mut Vec<OwnedEvent>) {
        let mut due: Vec<(i64, UserId, OrderId)> = Vec::new();
        for book in &self.books {
            for o in book.bids.iter().chain(&book.asks) {
                if o.expire_ts != 0 && o.expire_ts <= self.now {
                    due.push((o.expire_ts, o.user, o.order));
                }
            }
        }
        for stops in &self.stops {
            for s in stops {
                if s.expire_ts != 0 && s.expire_ts <= self.now {
                    due.push((s.expire_ts, s.user, s.order));
                }
            }
        }
        due.sort();
        for (_, user, order) in due {
            self.cancel_for(user, order, CancelReason::Expired, events)
                .expect("model: a due order is live");
        }
    }

    /// Cancels every live order of the user (reason `suspended`, in mass-cancel order), then
    /// refuses their orders and withdrawals.
    fn suspend_user(&mut self, user: UserId, events: &mut Vec<OwnedEvent>) -> Result<(), Reason> {
        if !self.users.contains_key(&user) {
            return Err(Reason::UnknownUser);
        }
        if self.suspended.contains(&user) {
            return Ok(());
        }
        self.cancel_every(user, None, CancelReason::Suspended, events);
        self.suspended.insert(user);
        Ok(())
    }

    fn reduce(
        &mut self,
        user: UserId,
        order: OrderId,
        qty: i64,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        if !self.live.contains_key(&(user, order)) {
            return Err(Reason::UnknownOrder);
        }
        if qty <= 0 {
            return Err(Reason::InvalidQty);
        }
        if let Some((symbol, i)) = self.find_stop(user, order) {
            let stop = self.stops[symbol.0 as usize][i];
            if qty >= stop.remaining {
                self.cancel_stop(symbol, i, CancelReason::Reduce, events);
                return Ok(());
            }
            let spec = self.symbols[symbol.0 as usize];
            self.unhold_stop(&spec, &stop, qty);
            self.stops[symbol.0 as usize][i].remaining -= qty;
            events.push(OwnedEvent::Cancelled(Cancelled {
                symbol,
                user,
                order,
                side: stop.side,
                qty,
                reason: CancelReason::Reduce,
            }));
            return Ok(());
        }
        let (symbol, side, i) = self.find(user, order).expect("model: live");
        let spec = self.symbols[symbol.0 as usize];
        let o = self.books[symbol.0 as usize].side(side)[i];
        let removed = qty.min(o.remaining);
        self.unrest(&spec, symbol, &o, removed);
        if removed == o.remaining {
            self.books[symbol.0 as usize].side_mut(side).remove(i);
        } else {
            // Hidden quantity goes first: the shown part only shrinks to the new remaining.
            let r = &mut self.books[symbol.0 as usize].side_mut(side)[i];
            r.remaining -= removed;
            r.shown = r.shown.min(r.remaining);
        }
        events.push(OwnedEvent::Cancelled(Cancelled {
            qty: removed,
            ..cancelled_of(symbol, &o, CancelReason::Reduce)
        }));
        Ok(())
    }

    /// Every live order of the user (on `symbol` when given), by symbol name then order id, each
    /// cancelled as `cancel` would.
    fn mass_cancel(
        &mut self,
        user: UserId,
        symbol: Option<SymbolId>,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        if !self.users.contains_key(&user) {
            return Err(Reason::UnknownUser);
        }
        if let Some(symbol) = symbol
            && self.spec(symbol).is_none()
        {
            return Err(Reason::UnknownSymbol);
        }
        self.cancel_every(user, symbol, CancelReason::User, events);
        Ok(())
    }

    fn cancel_every(
        &mut self,
        user: UserId,
        symbol: Option<SymbolId>,
        reason: CancelReason,
        events: &mut Vec<OwnedEvent>,
    ) {
        let mut targets: Vec<(String, OrderId)> = self
            .live
            .iter()
            .filter(|&(&(u, _), &s)| u == user && symbol.is_none_or(|want| want == s))
            .map(|(&(_, order), &s)| {
                (
                    self.symbols[s.0 as usize].symbol.as_str().to_string(),
                    order,
                )
            })
            .collect();
        targets.sort();
        for (_, order) in targets {
            self.cancel_for(user, order, reason, events)
                .expect("model: a live order can be cancelled");
        }
    }

    fn move_order(
        &mut self,
        user: UserId,
        order: OrderId,
        price: i64,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        if self.suspended.contains(&user) {
            return Err(Reason::UserSuspended);
        }
        if !self.live.contains_key(&(user, order)) {
            return Err(Reason::UnknownOrder);
        }
        // A pending stop cannot be moved (amend changes its prices).
        let (symbol, side, i) = self.find(user, order).ok_or(Reason::InvalidOrder)?;
        let spec = self.symbols[symbol.0 as usize];
        let book = &self.books[symbol.0 as usize];
        let o = book.side(side)[i];
        if price <= 0 || (side == Side::Sell && !is_fut(&spec) && below_fee_floor(&spec, price)) {
            return Err(Reason::InvalidPrice);
        }
        let controls = self.controls[symbol.0 as usize];
        match controls.phase {
            Phase::Halted => return Err(Reason::SymbolHalted),
            Phase::Closed => return Err(Reason::SymbolClosed),
            Phase::Continuous | Phase::Auction => {}
        }
        if controls.beyond(side, price) {
            return Err(Reason::PriceOutOfBand);
        }
        if o.post_only && controls.phase != Phase::Auction && book.would_take(side, price) {
            return Err(Reason::WouldTake);
        }
        let mut rehold = None;
        if is_fut(&spec) {
            let s = symbol.0 as usize;
            self.check_future_order(user, s, side, price, o.remaining, Some(order))?;
        } else if side == Side::Buy {
            let new_hold =
                hold_of(&spec, side, Some(price), o.remaining).ok_or(Reason::Overflow)?;
            let old_hold = buy_hold_per_lot(&spec, o.price) * o.remaining as i128;
            if new_hold > self.bal(user, spec.quote.as_str()).available + old_hold {
                return Err(Reason::InsufficientFunds);
            }
            if new_hold > old_hold {
                self.check_margin_after_spending(user, spec.quote.as_str(), new_hold - old_hold)?;
            }
            rehold = Some((old_hold, new_hold));
        }
        self.books[symbol.0 as usize].side_mut(side).remove(i);
        self.make_dead(user, order);
        if let Some((old_hold, new_hold)) = rehold {
            self.hold(user, spec.quote.as_str(), new_hold - old_hold);
        }
        let taker = Taker {
            symbol,
            user,
            order,
            side,
            price: Some(price),
            remaining: o.remaining,
            filled: o.filled,
            tif: o.tif,
            expire_ts: o.expire_ts,
            market: false,
            stp: o.stp,
            post_only: o.post_only,
            display: o.display,
            band: controls.band(),
            liquidation: false,
        };
        self.execute(spec, taker, events);
        Ok(())
    }

    /// Amend: the order's total (filled included) and/or price change at once. A total at or
    /// below what has filled ends the order as a reduce; otherwise it keeps its place only at
    /// the same price without growing, and is entered again as a move otherwise.
    fn amend(&mut self, a: &AmendOrder, events: &mut Vec<OwnedEvent>) -> Result<(), Reason> {
        if self.suspended.contains(&a.user) {
            return Err(Reason::UserSuspended);
        }
        if !self.live.contains_key(&(a.user, a.order)) {
            return Err(Reason::UnknownOrder);
        }
        if a.price().is_none() && a.qty().is_none() && a.stop_price().is_none() {
            return Err(Reason::InvalidOrder);
        }
        if let Some((symbol, i)) = self.find_stop(a.user, a.order) {
            return self.amend_stop(symbol, i, a, events);
        }
        let (symbol, side, i) = self.find(a.user, a.order).expect("model: live");
        // Only a pending stop has a stop price; every live order here rests.
        if a.stop_price().is_some() {
            return Err(Reason::InvalidOrder);
        }
        if a.qty().is_some_and(|q| q <= 0) {
            return Err(Reason::InvalidQty);
        }
        let spec = self.symbols[symbol.0 as usize];
        let o = self.books[symbol.0 as usize].side(side)[i];
        // An iceberg stays within MAX_ICEBERG_SLICES slices.
        if o.display > 0
            && let Some(q) = a.qty()
            && (q as i128 - o.filled as i128 + o.display as i128 - 1) / o.display as i128
                > rialto_core::MAX_ICEBERG_SLICES as i128
        {
            return Err(Reason::InvalidQty);
        }
        if let Some(price) = a.price()
            && (price <= 0
                || (side == Side::Sell && !is_fut(&spec) && below_fee_floor(&spec, price)))
        {
            return Err(Reason::InvalidPrice);
        }
        let total = a.qty().unwrap_or(o.filled + o.remaining);
        if total <= o.filled {
            self.books[symbol.0 as usize].side_mut(side).remove(i);
            self.unrest(&spec, symbol, &o, o.remaining);
            events.push(cancelled(symbol, &o, CancelReason::Reduce));
            return Ok(());
        }
        let remaining = total - o.filled;
        let price = a.price().unwrap_or(o.price);
        let kept = price == o.price && remaining <= o.remaining;
        let controls = self.controls[symbol.0 as usize];
        // Halted or closed: only an amend that lowers the quantity, at the same price.
        let only_lowers_qty = price == o.price && remaining < o.remaining;
        match controls.phase {
            Phase::Halted if !only_lowers_qty => return Err(Reason::SymbolHalted),
            Phase::Closed if !only_lowers_qty => return Err(Reason::SymbolClosed),
            _ => {}
        }
        if price != o.price && controls.beyond(side, price) {
            return Err(Reason::PriceOutOfBand);
        }
        if !kept
            && o.post_only
            && controls.phase != Phase::Auction
            && self.books[symbol.0 as usize].would_take(side, price)
        {
            return Err(Reason::WouldTake);
        }
        let new_hold = hold_of(&spec, side, Some(price), remaining).ok_or(Reason::Overflow)?;
        let old_hold = hold_of(&spec, side, Some(o.price), o.remaining).expect("model: held");
        let currency = match side {
            Side::Buy => spec.quote,
            Side::Sell => spec.base,
        };
        if is_fut(&spec) {
            let s = symbol.0 as usize;
            self.check_future_order(a.user, s, side, price, remaining, Some(a.order))?;
        } else {
            if new_hold > self.bal(a.user, currency.as_str()).available + old_hold {
                return Err(Reason::InsufficientFunds);
            }
            if new_hold > old_hold {
                self.check_margin_after_spending(a.user, currency.as_str(), new_hold - old_hold)?;
            }
        }
        events.push(OwnedEvent::Amended(Amended {
            symbol,
            user: a.user,
            order: a.order,
            side,
            price,
            stop_price: 0,
            qty: remaining,
            priority: if kept { Priority::Kept } else { Priority::Lost },
        }));
        self.hold(a.user, currency.as_str(), new_hold - old_hold);
        if kept {
            let r = &mut self.books[symbol.0 as usize].side_mut(side)[i];
            r.remaining = remaining;
            r.shown = r.shown.min(remaining);
            return Ok(());
        }
        self.books[symbol.0 as usize].side_mut(side).remove(i);
        self.make_dead(a.user, a.order);
        let taker = Taker {
            symbol,
            user: a.user,
            order: a.order,
            side,
            price: Some(price),
            remaining,
            filled: o.filled,
            tif: o.tif,
            expire_ts: o.expire_ts,
            market: false,
            stp: o.stp,
            post_only: o.post_only,
            display: o.display,
            band: controls.band(),
            liquidation: false,
        };
        self.execute(spec, taker, events);
        Ok(())
    }

    // ----- phases and auctions ---------------------------------------------------------------

    fn set_phase(
        &mut self,
        symbol: SymbolId,
        phase: Option<Phase>,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        let s = symbol.0 as usize;
        if s >= self.symbols.len() {
            return Err(Reason::UnknownSymbol);
        }
        let phase = phase.ok_or(Reason::InvalidPhase)?;
        if self.controls[s].phase == phase {
            return Ok(());
        }
        self.controls[s].phase = phase;
        if phase == Phase::Continuous {
            self.uncross(symbol, events);
        }
        events.push(OwnedEvent::Phase(PhaseChanged { symbol, phase }));
        if phase == Phase::Closed {
            // The symbol's trading day ends: its DAY orders expire, in expiry order.
            let book = &self.books[s];
            let mut due: Vec<(i64, UserId, OrderId)> = book
                .bids
                .iter()
                .chain(&book.asks)
                .filter(|o| o.tif == Tif::Day)
                .map(|o| (o.expire_ts, o.user, o.order))
                .chain(
                    self.stops[s]
                        .iter()
                        .filter(|st| st.tif == Tif::Day)
                        .map(|st| (st.expire_ts, st.user, st.order)),
                )
                .collect();
            due.sort();
            for (_, user, order) in due {
                self.cancel_for(user, order, CancelReason::Expired, events)
                    .expect("model: a DAY order is live");
            }
        }
        Ok(())
    }

    /// B(p) and S(p): the bids priced at or above p, the asks at or below it.
    fn auction_sums(&self, s: usize, p: i64) -> (i128, i128) {
        let book = &self.books[s];
        let b = book.bids.iter().filter(|o| o.price >= p);
        let a = book.asks.iter().filter(|o| o.price <= p);
        (
            b.map(|o| o.remaining as i128).sum(),
            a.map(|o| o.remaining as i128).sum(),
        )
    }

    /// The uncross: the price with the largest V, then the smallest |I|, then market pressure
    /// or the reference price clamped into the range; then bids at or above it and asks at or
    /// below it are paired off in priority order at that price.
    fn uncross(&mut self, symbol: SymbolId, events: &mut Vec<OwnedEvent>) {
        let s = symbol.0 as usize;
        let book = &self.books[s];
        let (Some(bid), Some(ask)) = (book.best_price(Side::Buy), book.best_price(Side::Sell))
        else {
            return;
        };
        if bid < ask {
            return;
        }
        // V and I change only at order prices: every order price and its two neighbours
        // cover every run of prices on which they are constant, and the ends of the range kept.
        let mut candidates: BTreeSet<i64> = BTreeSet::new();
        for o in book.bids.iter().chain(&book.asks) {
            let neighbours = [
                o.price.checked_sub(1),
                Some(o.price),
                o.price.checked_add(1),
            ];
            candidates.extend(neighbours.into_iter().flatten().filter(|&p| p > 0));
        }
        let at = |p: i64| {
            let (b, s) = self.auction_sums(s, p);
            (b.min(s), b - s)
        };
        let max_v = candidates
            .iter()
            .map(|&p| at(p).0)
            .max()
            .expect("model: prices");
        let kept: Vec<i64> = candidates
            .iter()
            .copied()
            .filter(|&p| at(p).0 == max_v)
            .collect();
        let min_i = kept
            .iter()
            .map(|&p| at(p).1.abs())
            .min()
            .expect("model: kept");
        let kept: Vec<i64> = kept
            .into_iter()
            .filter(|&p| at(p).1.abs() == min_i)
            .collect();
        let (x1, x2) = (kept[0], kept[kept.len() - 1]);
        let e = if kept.iter().all(|&p| at(p).1 > 0) {
            x2
        } else if kept.iter().all(|&p| at(p).1 < 0) {
            x1
        } else {
            let r = self.controls[s].reference;
            let r = if r > 0 {
                r
            } else {
                ((x1 as i128 + x2 as i128) / 2) as i64
            };
            r.clamp(x1, x2)
        };
        let (v, imbalance) = at(e);
        let spec = self.symbols[s];
        let mut volume: i128 = 0;
        loop {
            let book = &self.books[s];
            let (Some(&b), Some(&a)) = (book.bids.first(), book.asks.first()) else {
                break;
            };
            if b.price < e || a.price > e {
                break;
            }
            // Each side's front shows at most its slice (an iceberg's hidden part re-queues).
            let lots = b.shown.min(a.shown);
            self.uncross_fill(&spec, symbol, b, a, e, lots, events);
            volume += lots as i128;
        }
        assert_eq!(volume, v, "model: the uncross executes V(E)");
        if volume > 0 {
            events.push(OwnedEvent::Auction(AuctionResult {
                symbol,
                price: e,
                qty: i64_of(volume),
                imbalance: i64_of(imbalance),
            }));
        }
    }

    /// One uncross trade: the buy pays `e` plus the maker fee out of its hold (taken at its
    /// own price with the taker fee), the sell receives `e` less the maker fee.
    #[allow(clippy::too_many_arguments)]
    fn uncross_fill(
        &mut self,
        spec: &SymbolSpec,
        symbol: SymbolId,
        b: Order,
        a: Order,
        e: i64,
        lots: i64,
        events: &mut Vec<OwnedEvent>,
    ) {
        let q = lots as i128;
        let notional = q * e as i128 * spec.quote_scale as i128;
        let fee = q * spec.maker_fee as i128;
        let (quote, base) = (spec.quote.as_str(), spec.base.as_str());
        if is_fut(spec) {
            self.settle_future_fill(symbol.0 as usize, b.user, a.user, e, lots, fee, fee);
        } else {
            self.hold(b.user, quote, -(q * buy_hold_per_lot(spec, b.price)));
            self.bal_mut(b.user, quote).available -= notional + fee;
            self.bal_mut(b.user, base).available += q * spec.base_scale as i128;
            self.bal_mut(a.user, base).held -= q * spec.base_scale as i128;
            self.bal_mut(a.user, quote).available += notional - fee;
            self.currencies
                .get_mut(quote)
                .expect("model: a symbol's quote currency is known")
                .fees += 2 * fee;
        }
        let s = symbol.0 as usize;
        for side in [Side::Buy, Side::Sell] {
            let front = &mut self.books[s].side_mut(side)[0];
            front.remaining -= lots;
            front.filled += lots;
            front.shown -= lots;
            let front = *front;
            if front.remaining == 0 {
                self.books[s].side_mut(side).remove(0);
                self.make_dead(front.user, front.order);
                self.ended(front.user, front.order);
            } else if front.shown == 0 {
                // An iceberg's used-up slice: a new one joins the back of the level.
                let mut next = self.books[s].side_mut(side).remove(0);
                next.shown = slice(next.display, next.remaining);
                self.books[s].insert(next);
            }
        }
        self.last[s] = e;
        self.controls[s].last = e;
        self.controls[s].reference = e;
        events.push(OwnedEvent::Trade(Trade {
            symbol,
            price: e,
            qty: lots,
            maker_user: a.user,
            maker_order: a.order,
            taker_user: b.user,
            taker_order: b.order,
            taker_side: Side::Buy,
            maker_fee: i64_of(fee),
            taker_fee: i64_of(fee),
        }));
    }

    /// A symbol's phase, last trade price, reference price and band, as the engine's
    /// `symbol_status` gives them.
    pub fn symbol_status(&self, symbol: SymbolId) -> Option<SymbolStatus> {
        let c = self.controls.get(symbol.0 as usize)?;
        Some(SymbolStatus {
            phase: c.phase,
            last: c.last,
            reference: c.reference,
            band_bps: c.band_bps,
            future: self.futs.contains_key(&(symbol.0 as usize)),
            mark: self.futs.get(&(symbol.0 as usize)).map_or(0, |f| f.mark),
        })
    }

    /// Amend of a pending stop: new stop price, price and/or quantity; it keeps its place
    /// among the stops only when both prices stay and the quantity does not grow, and is
    /// checked against the last trade again.
    fn amend_stop(
        &mut self,
        symbol: SymbolId,
        i: usize,
        a: &AmendOrder,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        if a.qty().is_some_and(|q| q <= 0) {
            return Err(Reason::InvalidQty);
        }
        let spec = self.symbols[symbol.0 as usize];
        let stop = self.stops[symbol.0 as usize][i];
        if let Some(price) = a.price()
            && (price <= 0
                || (stop.side == Side::Sell && !is_fut(&spec) && below_fee_floor(&spec, price)))
        {
            return Err(Reason::InvalidPrice);
        }
        if a.stop_price().is_some_and(|sp| sp <= 0) {
            return Err(Reason::InvalidPrice);
        }
        let remaining = a.qty().unwrap_or(stop.remaining);
        let price = a.price().or(stop.price);
        let stop_price = a.stop_price().unwrap_or(stop.stop_price);
        let controls = self.controls[symbol.0 as usize];
        let only_lowers_qty =
            price == stop.price && stop_price == stop.stop_price && remaining < stop.remaining;
        match controls.phase {
            Phase::Halted if !only_lowers_qty => return Err(Reason::SymbolHalted),
            Phase::Closed if !only_lowers_qty => return Err(Reason::SymbolClosed),
            _ => {}
        }
        if let (true, Some(p)) = (stop.stop_limit && price != stop.price, price)
            && controls.beyond(stop.side, p)
        {
            return Err(Reason::PriceOutOfBand);
        }
        if self.already_triggered(symbol, stop.side, stop_price) {
            return Err(Reason::WouldTrigger);
        }
        let kept =
            price == stop.price && stop_price == stop.stop_price && remaining <= stop.remaining;
        let new_hold = hold_of(&spec, stop.side, price, remaining).ok_or(Reason::Overflow)?;
        let old_hold = hold_of(&spec, stop.side, stop.price, stop.remaining).expect("model: held");
        let currency = match stop.side {
            Side::Buy => spec.quote,
            Side::Sell => spec.base,
        };
        if is_fut(&spec) {
            let price = price.expect("model: a futures stop has a price");
            let s = symbol.0 as usize;
            self.check_future_order(a.user, s, stop.side, price, remaining, Some(a.order))?;
        } else {
            if new_hold > self.bal(a.user, currency.as_str()).available + old_hold {
                return Err(Reason::InsufficientFunds);
            }
            if new_hold > old_hold {
                self.check_margin_after_spending(a.user, currency.as_str(), new_hold - old_hold)?;
            }
        }
        self.hold(a.user, currency.as_str(), new_hold - old_hold);
        if !kept {
            self.accepted += 1;
        }
        let accepted = self.accepted;
        let s = &mut self.stops[symbol.0 as usize][i];
        s.remaining = remaining;
        s.price = price;
        s.stop_price = stop_price;
        if !kept {
            s.accepted = accepted;
        }
        events.push(OwnedEvent::Amended(Amended {
            symbol,
            user: a.user,
            order: a.order,
            side: stop.side,
            price: price.unwrap_or(0),
            stop_price,
            qty: remaining,
            priority: if kept { Priority::Kept } else { Priority::Lost },
        }));
        Ok(())
    }

    fn book(
        &self,
        symbol: SymbolId,
        depth: i64,
        events: &mut Vec<OwnedEvent>,
    ) -> Result<(), Reason> {
        let book = self
            .books
            .get(symbol.0 as usize)
            .ok_or(Reason::UnknownSymbol)?;
        if depth <= 0 {
            return Err(Reason::InvalidQty);
        }
        let levels = |orders: &Vec<Order>| {
            let mut levels: Vec<Level> = Vec::new();
            for o in orders {
                match levels.last_mut() {
                    Some(level) if level.price == o.price => level.qty += o.shown,
                    _ => levels.push(Level {
                        price: o.price,
                        qty: o.shown,
                    }),
                }
            }
            levels.truncate(usize::try_from(depth).unwrap_or(usize::MAX));
            levels
        };
        events.push(OwnedEvent::Book {
            symbol,
            bids: levels(&book.bids),
            asks: levels(&book.asks),
        });
        Ok(())
    }

    // ----- views, for comparing with the engine ----------------------------------------------

    pub fn now(&self) -> i64 {
        self.now
    }

    pub fn order_id_window(&self) -> i64 {
        self.order_id_window
    }

    /// Ids still inside the window: (user, order, ended at), by user then order.
    pub fn recent_order_ids(&self) -> Vec<(UserId, OrderId, i64)> {
        let mut ids = self.recent.clone();
        ids.sort();
        ids
    }

    pub fn symbol_count(&self) -> u32 {
        self.symbols.len() as u32
    }

    pub fn symbol(&self, symbol: SymbolId) -> Option<SymbolSpec> {
        self.spec(symbol)
    }

    pub fn users(&self) -> Vec<UserId> {
        self.users.keys().copied().collect()
    }

    pub fn currencies(&self) -> Vec<String> {
        self.currencies.keys().cloned().collect()
    }

    /// Live orders: `(user, order, symbol)`, by user then order id.
    pub fn live_orders(&self) -> Vec<(UserId, OrderId, SymbolId)> {
        self.live.iter().map(|(&(u, o), &s)| (u, o, s)).collect()
    }

    /// Every live order with what it has filled, its shown part and expiry, by user and order.
    pub fn live_order_details(&self) -> Vec<LiveOrder> {
        self.live
            .keys()
            .map(|&(user, order)| {
                let Some((symbol, side, i)) = self.find(user, order) else {
                    // A pending stop: nothing filled, nothing shown.
                    let (symbol, i) = self.find_stop(user, order).expect("model: live stop");
                    return LiveOrder {
                        user,
                        order,
                        filled: 0,
                        shown: 0,
                        expire_ts: self.stops[symbol.0 as usize][i].expire_ts,
                    };
                };
                let o = self.books[symbol.0 as usize].side(side)[i];
                LiveOrder {
                    user,
                    order,
                    filled: o.filled,
                    shown: o.shown,
                    expire_ts: o.expire_ts,
                }
            })
            .collect()
    }

    pub fn order_remaining(&self, user: UserId, order: OrderId) -> Option<i64> {
        if let Some((symbol, i)) = self.find_stop(user, order) {
            return Some(self.stops[symbol.0 as usize][i].remaining);
        }
        let (symbol, side, i) = self.find(user, order)?;
        Some(self.books[symbol.0 as usize].side(side)[i].remaining)
    }

    /// A symbol's pending stops in trigger order: buy stops from the lowest stop price, then
    /// sell stops from the highest, ties in acceptance order.
    pub fn pending_stops(&self, symbol: SymbolId) -> Vec<PendingStop> {
        let Some(stops) = self.stops.get(symbol.0 as usize) else {
            return Vec::new();
        };
        let mut buys: Vec<&Stop> = stops.iter().filter(|s| s.side == Side::Buy).collect();
        buys.sort_by_key(|s| (s.stop_price, s.accepted));
        let mut sells: Vec<&Stop> = stops.iter().filter(|s| s.side == Side::Sell).collect();
        sells.sort_by_key(|s| (-s.stop_price, s.accepted));
        buys.into_iter()
            .chain(sells)
            .map(|s| PendingStop {
                user: s.user,
                order: s.order,
                side: s.side,
                stop_price: s.stop_price,
                price: s.price.unwrap_or(0),
                remaining: s.remaining,
            })
            .collect()
    }

    /// The symbol's last trade price, 0 before any.
    pub fn last_trade(&self, symbol: SymbolId) -> i64 {
        self.last.get(symbol.0 as usize).copied().unwrap_or(0)
    }

    pub fn resting_order_count(&self) -> usize {
        self.live.len()
    }

    pub fn resting_orders(&self, symbol: SymbolId) -> (Vec<RestingOrder>, Vec<RestingOrder>) {
        let Some(book) = self.books.get(symbol.0 as usize) else {
            return (Vec::new(), Vec::new());
        };
        let list = |orders: &Vec<Order>| {
            orders
                .iter()
                .map(|o| RestingOrder {
                    user: o.user,
                    order: o.order,
                    side: o.side,
                    price: o.price,
                    remaining: o.remaining,
                })
                .collect()
        };
        (list(&book.bids), list(&book.asks))
    }

    pub fn balance(&self, user: UserId, currency: &str) -> Option<Balance> {
        self.users.get(&user)?;
        let bal = self.bal(user, currency);
        Some(Balance {
            available: i64_of(bal.available),
            held: i64_of(bal.held),
        })
    }

    pub fn user_report(&self, user: UserId) -> Option<UserReport> {
        let balances = self
            .users
            .get(&user)?
            .iter()
            .filter(|(_, b)| b.available != 0 || b.held != 0)
            .map(|(currency, b)| {
                (
                    Name::new(currency).expect("model: currency names are valid"),
                    Balance {
                        available: i64_of(b.available),
                        held: i64_of(b.held),
                    },
                )
            })
            .collect();
        let mut orders: Vec<OpenOrder> = Vec::new();
        for (&(u, order), &symbol) in &self.live {
            if u != user {
                continue;
            }
            let name = self.symbols[symbol.0 as usize].symbol;
            if let Some((_, i)) = self.find_stop(u, order) {
                let stop = self.stops[symbol.0 as usize][i];
                orders.push(OpenOrder {
                    symbol: name,
                    order,
                    side: stop.side,
                    order_type: if stop.stop_limit {
                        OrderType::StopLimit
                    } else {
                        OrderType::Stop
                    },
                    tif: stop.tif,
                    price: stop.price.unwrap_or(0),
                    stop_price: stop.stop_price,
                    remaining: stop.remaining,
                    shown: 0,
                    filled: 0,
                    expire_ts: stop.expire_ts,
                });
                continue;
            }
            let (_, side, i) = self.find(u, order).expect("model: live order");
            let o = self.books[symbol.0 as usize].side(side)[i];
            orders.push(OpenOrder {
                symbol: name,
                order,
                side,
                order_type: OrderType::Limit,
                tif: o.tif,
                price: o.price,
                stop_price: 0,
                remaining: o.remaining,
                shown: o.shown,
                filled: o.filled,
                expire_ts: o.expire_ts,
            });
        }
        orders.sort_by(|a, b| (a.symbol.as_str(), a.order).cmp(&(b.symbol.as_str(), b.order)));
        Some(UserReport {
            user,
            suspended: self.suspended.contains(&user),
            balances,
            orders,
            positions: self.positions_of(user),
            margins: self.margins_of(user),
        })
    }

    pub fn venue_totals(&self) -> Vec<CurrencyTotals> {
        let costs = self.position_costs();
        self.currencies
            .iter()
            .map(|(currency, t)| {
                let (mut available, mut held) = (0i128, 0i128);
                for balances in self.users.values() {
                    if let Some(b) = balances.get(currency) {
                        available += b.available;
                        held += b.held;
                    }
                }
                CurrencyTotals {
                    currency: Name::new(currency).expect("model: currency names are valid"),
                    deposits: i64_of(t.deposits),
                    withdrawals: i64_of(t.withdrawals),
                    available: available.clamp(i64::MIN as i128, MAX) as i64,
                    held: held.clamp(i64::MIN as i128, MAX) as i64,
                    fees: i64_of(t.fees),
                    insurance: i64_of(t.insurance),
                    position_cost: costs.get(currency).copied().unwrap_or(0),
                }
            })
            .collect()
    }

    /// The model's own sanity: conservation, no negative balance, holds that match the book.
    fn check_invariants(&self) {
        let mut expected_held: BTreeMap<(UserId, String), i128> = BTreeMap::new();
        for (s, book) in self.books.iter().enumerate() {
            let spec = &self.symbols[s];
            for stop in &self.stops[s] {
                assert!(stop.remaining > 0, "model: an empty stop waits");
                let (currency, per_lot) = match stop.side {
                    Side::Buy => (spec.quote, buy_hold_per_lot(spec, stop.price.unwrap())),
                    Side::Sell => (spec.base, sell_hold_per_lot(spec)),
                };
                *expected_held
                    .entry((stop.user, currency.as_str().to_string()))
                    .or_default() += per_lot * stop.remaining as i128;
            }
            for o in book.bids.iter().chain(&book.asks) {
                assert!(o.remaining > 0, "model: an empty order rests");
                assert!(
                    o.shown > 0
                        && o.shown <= o.remaining
                        && (o.display == 0 || o.shown <= o.display),
                    "model: an order shows {} of {}",
                    o.shown,
                    o.remaining
                );
                let (currency, per_lot) = match o.side {
                    Side::Buy => (spec.quote, buy_hold_per_lot(spec, o.price)),
                    Side::Sell => (spec.base, sell_hold_per_lot(spec)),
                };
                *expected_held
                    .entry((o.user, currency.as_str().to_string()))
                    .or_default() += per_lot * o.remaining as i128;
            }
            // Only an auction (or a halt after one) leaves a book crossed.
            if let (Some(bid), Some(ask), Phase::Continuous) = (
                book.best_price(Side::Buy),
                book.best_price(Side::Sell),
                self.controls[s].phase,
            ) {
                assert!(bid < ask, "model: crossed book");
            }
        }
        for (&user, balances) in &self.users {
            for (currency, b) in balances {
                // A futures currency's available may go negative (docs/rules.md, "Futures").
                let futures_currency = !self.futures_of(currency).is_empty();
                assert!(
                    (b.available >= 0 || futures_currency) && b.held >= 0,
                    "model: negative balance"
                );
                let want = expected_held
                    .get(&(user, currency.clone()))
                    .copied()
                    .unwrap_or(0);
                assert_eq!(b.held, want, "model: held differs from the book's holds");
            }
        }
        for t in self.venue_totals() {
            assert_eq!(
                t.available as i128 + t.held as i128 + t.fees as i128 + t.insurance as i128
                    - t.position_cost,
                t.deposits as i128 - t.withdrawals as i128,
                "model: {} is not conserved",
                t.currency
            );
        }
    }
}

fn cancelled_of(symbol: SymbolId, o: &Order, reason: CancelReason) -> Cancelled {
    Cancelled {
        symbol,
        user: o.user,
        order: o.order,
        side: o.side,
        qty: o.remaining,
        reason,
    }
}

fn cancelled(symbol: SymbolId, o: &Order, reason: CancelReason) -> OwnedEvent {
    OwnedEvent::Cancelled(cancelled_of(symbol, o, reason))
}
