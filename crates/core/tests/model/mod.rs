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

use rialto_core::{
    AmendOrder, Amended, Balance, CancelReason, Cancelled, Command, CurrencyTotals, Level,
    LiveOrder, Name, OpenOrder, OrderId, OrderType, OwnedEvent, PlaceOrder, Priority, Reason,
    RestingOrder, Side, Stp, SymbolId, SymbolSpec, Tif, Trade, UserId, UserReport,
};

/// 2^63 - 1: the largest amount, price, quantity or total the venue can hold.
const MAX: i128 = i64::MAX as i128;

/// The venue's limits (docs/rules.md, `limit_exceeded`); the defaults match
/// `EngineConfig::default()`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_open_orders_per_user: usize,
    pub max_resting_orders: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_open_orders_per_user: 100_000,
            max_resting_orders: 1 << 30,
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
}

#[derive(Clone, Default)]
pub struct Model {
    limits: Limits,
    symbols: Vec<SymbolSpec>,
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
}

fn i64_of(amount: i128) -> i64 {
    i64::try_from(amount).expect("model: an amount passed 64 bits")
}

/// What one lot of a buy at `price` holds: `price * quote_scale + taker_fee`.
fn buy_hold_per_lot(spec: &SymbolSpec, price: i64) -> i128 {
    price as i128 * spec.quote_scale as i128 + spec.taker_fee as i128
}

/// The hold of an order, or `None` when it passes 64 bits (`overflow`). An unpriced market buy
/// holds nothing.
fn hold_of(spec: &SymbolSpec, side: Side, price: Option<i64>, qty: i64) -> Option<i128> {
    let per_lot = match (side, price) {
        (Side::Buy, Some(p)) => buy_hold_per_lot(spec, p),
        (Side::Buy, None) => 0,
        (Side::Sell, _) => spec.base_scale as i128,
    };
    if per_lot > MAX {
        return None;
    }
    let hold = per_lot * qty as i128;
    (hold <= MAX).then_some(hold)
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
            Command::SetOrderIdWindow { window } => {
                if window < 0 {
                    Err(Reason::InvalidQty)
                } else {
                    self.order_id_window = window;
                    self.forget_old_ids();
                    Ok(())
                }
            }
            // Rulebook part 2, not yet applied.
            Command::SetPhase { .. } | Command::SetBand { .. } | Command::SetRefPrice { .. } => {
                Err(Reason::InvalidOrder)
            }
            Command::SuspendUser { user } => self.suspend_user(user, events),
            Command::ResumeUser { user } => {
                if !self.users.contains_key(&user) {
                    return Err(Reason::UnknownUser);
                }
                self.suspended.remove(&user);
                Ok(())
            }
        };
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
        {
            return Err(Reason::InvalidSymbol);
        }
        self.symbols.push(spec);
        self.books.push(Book::default());
        for currency in [spec.base, spec.quote] {
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
        if amount > 0 && (totals.deposits + amount > MAX || bal.available + bal.held + amount > MAX)
        {
            return Err(Reason::Overflow);
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
        // Stops and icebergs: not yet applied.
        if !matches!(order_type, OrderType::Limit | OrderType::Market)
            || p.stop_price().is_some()
            || p.display_qty().is_some()
        {
            return Err(Reason::InvalidOrder);
        }
        let market = order_type == OrderType::Market;
        let rests = !market && matches!(tif, Tif::Gtc | Tif::Gtd | Tif::Day);
        if market && !matches!(tif, Tif::Ioc | Tif::Fok) {
            return Err(Reason::InvalidOrder);
        }
        if p.post_only && !rests {
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
        match p.price {
            None if !market => return Err(Reason::InvalidPrice),
            Some(price) if price <= 0 => return Err(Reason::InvalidPrice),
            Some(price) if side == Side::Sell && below_fee_floor(&spec, price) => {
                return Err(Reason::InvalidPrice);
            }
            _ => {}
        }
        if self.live.contains_key(&(p.user, p.order))
            || self
                .recent
                .iter()
                .any(|&(u, o, _)| (u, o) == (p.user, p.order))
        {
            return Err(Reason::DuplicateOrderId);
        }
        let book = &self.books[p.symbol.0 as usize];
        if let (true, Some(price)) = (p.post_only, p.price)
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
        if hold > self.bal(p.user, hold_currency.as_str()).available {
            return Err(Reason::InsufficientFunds);
        }
        if rests
            && (self.open_orders_of(p.user) >= self.limits.max_open_orders_per_user
                || self.live.len() >= self.limits.max_resting_orders)
        {
            return Err(Reason::LimitExceeded);
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
        };
        if tif == Tif::Fok && self.fok_fillable(&spec, &taker) < p.qty as i128 {
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
                Side::Sell => !below_fee_floor(spec, price),
            },
        }
    }

    /// The fill-or-kill walk: the lots the taker would really get, without touching anything.
    fn fok_fillable(&self, spec: &SymbolSpec, taker: &Taker) -> i128 {
        let unpriced_buy = taker.price.is_none() && taker.side == Side::Buy;
        let mut available = self.bal(taker.user, spec.quote.as_str()).available;
        let mut got: i128 = 0;
        let wanted = taker.remaining as i128;
        let book = &self.books[taker.symbol.0 as usize];
        for maker in book.side(taker.side.opposite()) {
            if got >= wanted || !Self::taker_crosses(spec, taker, maker.price) {
                break;
            }
            if maker.user == taker.user {
                match taker.stp {
                    Stp::CancelMaker => continue,
                    Stp::CancelTaker | Stp::CancelBoth => break,
                }
            }
            let mut lots = (wanted - got).min(maker.remaining as i128);
            if unpriced_buy {
                let afford = Self::affordable(spec, available, maker.price);
                if afford == 0 {
                    break;
                }
                lots = lots.min(afford);
                available -= lots * buy_hold_per_lot(spec, maker.price);
            }
            got += lots;
        }
        got
    }

    /// Matches an accepted taker (its hold already taken), then rests or cancels the rest.
    fn execute(&mut self, spec: SymbolSpec, mut taker: Taker, events: &mut Vec<OwnedEvent>) {
        let s = taker.symbol.0 as usize;
        let opposite = taker.side.opposite();
        let unpriced_buy = taker.price.is_none() && taker.side == Side::Buy;
        while taker.remaining > 0 {
            let Some(maker) = self.books[s].side(opposite).first().copied() else {
                break;
            };
            if !Self::taker_crosses(&spec, &taker, maker.price) {
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
            let mut lots = taker.remaining.min(maker.remaining);
            if unpriced_buy {
                let available = self.bal(taker.user, spec.quote.as_str()).available;
                let afford = Self::affordable(&spec, available, maker.price);
                if afford == 0 {
                    break;
                }
                lots = lots.min(i64_of(afford));
            }
            self.fill(&spec, &mut taker, maker, lots, events);
        }
        if taker.remaining == 0 {
            self.ended(taker.user, taker.order);
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
            Side::Sell => (spec.base, spec.base_scale as i128 * taker.remaining as i128),
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
        self.ended(taker.user, taker.order);
    }

    /// Returns the hold of `qty` lots of a resting order (it is being reduced or removed).
    fn unrest(&mut self, spec: &SymbolSpec, _symbol: SymbolId, order: &Order, qty: i64) {
        let (currency, per_lot) = match order.side {
            Side::Buy => (spec.quote, buy_hold_per_lot(spec, order.price)),
            Side::Sell => (spec.base, spec.base_scale as i128),
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
        // The buyer pays out of its hold (if it has one); the unused part of the hold returns.
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

        let s = taker.symbol.0 as usize;
        let resting = &mut self.books[s].side_mut(maker.side)[0];
        resting.remaining -= lots;
        resting.filled += lots;
        if resting.remaining == 0 {
            self.books[s].side_mut(maker.side).remove(0);
            self.make_dead(maker.user, maker.order);
            self.ended(maker.user, maker.order);
        }
        taker.remaining -= lots;
        taker.filled += lots;
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
        let (side, i) = self.books[symbol.0 as usize]
            .position(user, order)
            .expect("model: a live order is on its book");
        Some((symbol, side, i))
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
        let (symbol, side, i) = self.find(user, order).ok_or(Reason::UnknownOrder)?;
        if qty <= 0 {
            return Err(Reason::InvalidQty);
        }
        let spec = self.symbols[symbol.0 as usize];
        let o = self.books[symbol.0 as usize].side(side)[i];
        let removed = qty.min(o.remaining);
        self.unrest(&spec, symbol, &o, removed);
        if removed == o.remaining {
            self.books[symbol.0 as usize].side_mut(side).remove(i);
        } else {
            self.books[symbol.0 as usize].side_mut(side)[i].remaining -= removed;
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
        let (symbol, side, i) = self.find(user, order).ok_or(Reason::UnknownOrder)?;
        let spec = self.symbols[symbol.0 as usize];
        let book = &self.books[symbol.0 as usize];
        let o = book.side(side)[i];
        if price <= 0 || (side == Side::Sell && below_fee_floor(&spec, price)) {
            return Err(Reason::InvalidPrice);
        }
        if o.post_only && book.would_take(side, price) {
            return Err(Reason::WouldTake);
        }
        let mut rehold = None;
        if side == Side::Buy {
            let new_hold =
                hold_of(&spec, side, Some(price), o.remaining).ok_or(Reason::Overflow)?;
            let old_hold = buy_hold_per_lot(&spec, o.price) * o.remaining as i128;
            if new_hold > self.bal(user, spec.quote.as_str()).available + old_hold {
                return Err(Reason::InsufficientFunds);
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
        let (symbol, side, i) = self.find(a.user, a.order).ok_or(Reason::UnknownOrder)?;
        if a.price().is_none() && a.qty().is_none() && a.stop_price().is_none() {
            return Err(Reason::InvalidOrder);
        }
        // Only a pending stop has a stop price; every live order here rests.
        if a.stop_price().is_some() {
            return Err(Reason::InvalidOrder);
        }
        if a.qty().is_some_and(|q| q <= 0) {
            return Err(Reason::InvalidQty);
        }
        let spec = self.symbols[symbol.0 as usize];
        let o = self.books[symbol.0 as usize].side(side)[i];
        if let Some(price) = a.price()
            && (price <= 0 || (side == Side::Sell && below_fee_floor(&spec, price)))
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
        if !kept && o.post_only && self.books[symbol.0 as usize].would_take(side, price) {
            return Err(Reason::WouldTake);
        }
        let new_hold = hold_of(&spec, side, Some(price), remaining).ok_or(Reason::Overflow)?;
        let old_hold = hold_of(&spec, side, Some(o.price), o.remaining).expect("model: held");
        let currency = match side {
            Side::Buy => spec.quote,
            Side::Sell => spec.base,
        };
        if new_hold > self.bal(a.user, currency.as_str()).available + old_hold {
            return Err(Reason::InsufficientFunds);
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
            self.books[symbol.0 as usize].side_mut(side)[i].remaining = remaining;
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
        };
        self.execute(spec, taker, events);
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
                    Some(level) if level.price == o.price => level.qty += o.remaining,
                    _ => levels.push(Level {
                        price: o.price,
                        qty: o.remaining,
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
                let (symbol, side, i) = self.find(user, order).expect("model: live order");
                let o = self.books[symbol.0 as usize].side(side)[i];
                LiveOrder {
                    user,
                    order,
                    filled: o.filled,
                    shown: o.remaining,
                    expire_ts: o.expire_ts,
                }
            })
            .collect()
    }

    pub fn order_remaining(&self, user: UserId, order: OrderId) -> Option<i64> {
        let (symbol, side, i) = self.find(user, order)?;
        Some(self.books[symbol.0 as usize].side(side)[i].remaining)
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
            let (_, side, i) = self.find(u, order).expect("model: live order");
            let o = self.books[symbol.0 as usize].side(side)[i];
            orders.push(OpenOrder {
                symbol: self.symbols[symbol.0 as usize].symbol,
                order,
                side,
                order_type: OrderType::Limit,
                tif: o.tif,
                price: o.price,
                stop_price: 0,
                remaining: o.remaining,
                shown: o.remaining,
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
        })
    }

    pub fn venue_totals(&self) -> Vec<CurrencyTotals> {
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
                    available: i64_of(available),
                    held: i64_of(held),
                    fees: i64_of(t.fees),
                }
            })
            .collect()
    }

    /// The model's own sanity: conservation, no negative balance, holds that match the book.
    fn check_invariants(&self) {
        let mut expected_held: BTreeMap<(UserId, String), i128> = BTreeMap::new();
        for (s, book) in self.books.iter().enumerate() {
            let spec = &self.symbols[s];
            for o in book.bids.iter().chain(&book.asks) {
                assert!(o.remaining > 0, "model: an empty order rests");
                let (currency, per_lot) = match o.side {
                    Side::Buy => (spec.quote, buy_hold_per_lot(spec, o.price)),
                    Side::Sell => (spec.base, spec.base_scale as i128),
                };
                *expected_held
                    .entry((o.user, currency.as_str().to_string()))
                    .or_default() += per_lot * o.remaining as i128;
            }
            if let (Some(bid), Some(ask)) =
                (book.best_price(Side::Buy), book.best_price(Side::Sell))
            {
                assert!(bid < ask, "model: crossed book");
            }
        }
        for (&user, balances) in &self.users {
            for (currency, b) in balances {
                assert!(b.available >= 0 && b.held >= 0, "model: negative balance");
                let want = expected_held
                    .get(&(user, currency.clone()))
                    .copied()
                    .unwrap_or(0);
                assert_eq!(b.held, want, "model: held differs from the book's holds");
            }
        }
        for t in self.venue_totals() {
            assert_eq!(
                t.available as i128 + t.held as i128 + t.fees as i128,
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
