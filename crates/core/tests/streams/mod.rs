//! Random command streams for the differential and property tests.
//!
//! A stream is a list of abstract [`Op`]s that proptest generates and shrinks; each op becomes a
//! concrete [`Command`] only when it is applied, against a [`View`] of the venue at that moment.
//! That is how "cancel a live order" or "withdraw everything" stays meaningful while shrinking
//! removes ops around it. Ranges are small on purpose: 2-3 symbols, 3-6 users, prices a few
//! ticks around the taker-fee floor and ids from a short list, so that orders cross, collide and
//! meet their own users' orders all the time.
#![allow(dead_code)]

use proptest::prelude::*;
use rialto_core::{
    AmendOrder, Command, Engine, Name, OrderId, OrderType, Phase, PlaceOrder, Side, Stp, SymbolId,
    SymbolSpec, Tif, UserId,
};

/// Names of different lengths, so that "sorted by name" is not the same as "sorted by length".
pub const CURRENCIES: [&str; 6] = ["USD", "BTC", "EURO", "X", "ETH", "JPY"];
pub const SYMBOLS: [&str; 3] = ["SYM0", "S1", "A-LONGER-NAME"];
/// Users are added from the front of this list; the rest are unknown until an `AddUser` op.
pub const USERS: [UserId; 8] = [1, 2, 3, -7, i64::MAX, i64::MIN, 42, 0];
pub const ORDER_IDS: [OrderId; 16] = [
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    -1,
    -2,
    i64::MAX,
    i64::MIN,
];

/// `(base_scale, quote_scale, maker_fee, taker_fee)`; the first five are valid.
pub const PROFILES: [(i64, i64, i64, i64); 9] = [
    (1, 1, 0, 0),
    (100, 10, 2, 25),
    (1_000_000, 1_000, 500, 1_000),
    (
        1_000_000_000,
        1_000_000_000_000,
        10_000_000_000,
        5_000_000_000_000,
    ),
    (1, 1, 3, 7),
    (0, 1, 0, 0),
    (1, 1, 5, 4),
    (1, -1, 0, 0),
    (1, 1, -1, 0),
];
const VALID_PROFILES: u8 = 5;

#[derive(Clone, Copy, Debug)]
pub enum Px {
    /// A few ticks around the symbol's taker-fee floor.
    Near(u8),
    /// Near the 64-bit limit, to reach overflow.
    Huge(u8),
    /// The fee floor times a power of ten: from affordable to far beyond any deposit.
    Steep(u8),
    /// Zero or negative.
    Bad(u8),
    Missing,
}

#[derive(Clone, Copy, Debug)]
pub enum Qty {
    Small(u8),
    Huge(u8),
    Bad(u8),
}

/// The total quantity an amend asks for.
#[derive(Clone, Copy, Debug)]
pub enum AmendQty {
    Absent,
    /// The order's current total (filled + remaining) plus this: mostly a little less (keeps
    /// priority), sometimes more, sometimes at or below what has filled (ends the order).
    Delta(i8),
    /// The current total plus a power of ten: from affordable to far beyond any deposit.
    Steep(u8),
    Raw(Qty),
}

#[derive(Clone, Copy, Debug)]
pub enum Amount {
    /// `(1 + m % 9) * 10^(e % 18)`.
    Deposit(u8, u8),
    Max(u8),
    Zero,
    WithdrawAll,
    WithdrawMore,
    WithdrawHalf,
    WithdrawMin,
}

/// An order to touch: most of the time a live one (`pick` among them), else any pair.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub live: bool,
    pub pick: u16,
    pub user: u8,
    pub order: u8,
}

#[derive(Clone, Debug)]
pub enum Op {
    AddSymbol {
        name: u8,
        base: u8,
        quote: u8,
        profile: u8,
        /// A future (only in [`futures_stream`]).
        future: bool,
    },
    AddUser {
        user: u8,
    },
    Adjust {
        user: u8,
        currency: u8,
        amount: Amount,
        tx: u16,
    },
    Place {
        user: u8,
        order: u8,
        symbol: u8,
        side: bool,
        kind: u8,
        price: Px,
        market_priced: bool,
        qty: Qty,
        /// Post-only one time in five on a limit GTC, rarely on anything else.
        post_only: u8,
        stp: u8,
        /// One time in a hundred each: no side, type, tif or stp word.
        garble: u8,
        /// On a limit GTC, one time in eight GTD (expiring within 50 ms) and one in eight DAY;
        /// rarely an expiry where none is allowed.
        expiry: u8,
    },
    Cancel {
        target: Target,
    },
    Move {
        target: Target,
        price: Px,
    },
    Reduce {
        target: Target,
        qty: Qty,
    },
    Amend {
        target: Target,
        /// `None`: no new price.
        price: Option<Px>,
        qty: AmendQty,
        /// One time in three a stop price too (only a pending stop takes one).
        stop: u8,
    },
    /// Rare, as on a real venue; its user and symbol are unknown more often than elsewhere so
    /// that its rejections show up too.
    MassCancel {
        user: u8,
        symbol: u8,
    },
    Book {
        symbol: u8,
        depth: u8,
    },
    UserReport {
        user: u8,
    },
    VenueReport,
    /// Sets the order-id window: mostly some microseconds, sometimes 0, rarely negative.
    SetWindow {
        choice: u8,
    },
    /// Moves the clock forward by `step` microseconds, or one time in four tries to move it
    /// back (which leaves it where it is).
    Tick {
        step: u16,
        back: bool,
        /// Rarely a whole day forward, so that DAY orders expire.
        day: bool,
    },
    /// Suspends or resumes a user (rare).
    Suspend {
        user: u8,
        resume: bool,
    },
    /// A symbol's phase: mostly `continuous`, often `auction` (so that books cross in a call
    /// and uncross when it ends), sometimes `halted` or `closed`, rarely an unknown word.
    SetPhase {
        symbol: u8,
        phase: u8,
    },
    /// A band of some basis points, none, or sometimes a negative one.
    SetBand {
        symbol: u8,
        choice: u8,
    },
    SetRefPrice {
        symbol: u8,
        price: Px,
    },
    /// A future's mark: a few ticks around where it trades, sometimes a bad or huge price.
    SetMark {
        symbol: u8,
        price: Px,
    },
    /// Adds to or takes from a currency's insurance fund.
    Fund {
        currency: u8,
        amount: Amount,
        tx: u16,
    },
}

/// What an op needs to know about the venue to become a command.
pub trait View {
    fn spec(&self, symbol: SymbolId) -> Option<SymbolSpec>;
    fn symbol_count(&self) -> u32;
    fn user_ids(&self) -> Vec<UserId>;
    /// Live orders `(user, order, symbol)`, sorted by user then order.
    fn live(&self) -> Vec<(UserId, OrderId, SymbolId)>;
    fn available(&self, user: UserId, currency: &str) -> i64;
    /// A live order's (filled, remaining).
    fn order_state(&self, user: UserId, order: OrderId) -> Option<(i64, i64)>;
    /// The venue clock.
    fn now(&self) -> i64;
}

impl View for Engine {
    fn spec(&self, symbol: SymbolId) -> Option<SymbolSpec> {
        self.symbol(symbol).copied()
    }

    fn symbol_count(&self) -> u32 {
        (0..)
            .take_while(|&i| self.symbol(SymbolId(i)).is_some())
            .count() as u32
    }

    fn user_ids(&self) -> Vec<UserId> {
        self.users()
    }

    fn live(&self) -> Vec<(UserId, OrderId, SymbolId)> {
        let mut live = Vec::new();
        for s in 0..View::symbol_count(self) {
            let (bids, asks) = self.resting_orders(SymbolId(s));
            live.extend(
                bids.iter()
                    .chain(&asks)
                    .map(|o| (o.user, o.order, SymbolId(s))),
            );
        }
        live.sort();
        live
    }

    fn available(&self, user: UserId, currency: &str) -> i64 {
        self.balance(user, currency).map_or(0, |b| b.available)
    }

    fn now(&self) -> i64 {
        Engine::now(self)
    }

    fn order_state(&self, user: UserId, order: OrderId) -> Option<(i64, i64)> {
        let remaining = self.order_remaining(user, order)?;
        let live = self.live_orders();
        let o = live.iter().find(|o| (o.user, o.order) == (user, order))?;
        Some((o.filled, remaining))
    }
}

// ----- strategies -----------------------------------------------------------------------------

fn px() -> impl Strategy<Value = Px> {
    prop_oneof![
        20 => any::<u8>().prop_map(Px::Near),
        1 => any::<u8>().prop_map(Px::Huge),
        2 => any::<u8>().prop_map(Px::Steep),
        1 => any::<u8>().prop_map(Px::Bad),
        1 => Just(Px::Missing),
    ]
}

fn qty() -> impl Strategy<Value = Qty> {
    prop_oneof![
        30 => any::<u8>().prop_map(Qty::Small),
        1 => any::<u8>().prop_map(Qty::Huge),
        1 => any::<u8>().prop_map(Qty::Bad),
    ]
}

fn amend_qty() -> impl Strategy<Value = AmendQty> {
    prop_oneof![
        3 => Just(AmendQty::Absent),
        6 => (-4i8..=3).prop_map(AmendQty::Delta),
        1 => any::<u8>().prop_map(AmendQty::Steep),
        1 => qty().prop_map(AmendQty::Raw),
    ]
}

fn amount() -> impl Strategy<Value = Amount> {
    prop_oneof![
        12 => (any::<u8>(), any::<u8>()).prop_map(|(e, m)| Amount::Deposit(e, m)),
        1 => any::<u8>().prop_map(Amount::Max),
        1 => Just(Amount::Zero),
        1 => Just(Amount::WithdrawAll),
        2 => Just(Amount::WithdrawMore),
        2 => Just(Amount::WithdrawHalf),
        1 => Just(Amount::WithdrawMin),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    (0u8..5, any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(live, pick, user, order)| Target {
        live: live != 0,
        pick,
        user,
        order,
    })
}

fn place() -> impl Strategy<Value = Op> {
    (
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<bool>()),
        (any::<u8>(), px(), 0u8..10, qty()),
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
    )
        .prop_map(
            |(
                (user, order, symbol, side),
                (kind, price, market_priced, qty),
                (post_only, stp, garble, expiry),
            )| Op::Place {
                user,
                order,
                symbol,
                side,
                kind,
                price,
                market_priced: market_priced < 3,
                qty,
                post_only,
                stp,
                garble,
                expiry,
            },
        )
}

/// Any op, in proportions that keep the book busy.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        60 => place(),
        3 => target().prop_map(|target| Op::Cancel { target }),
        8 => (target(), px()).prop_map(|(target, price)| Op::Move { target, price }),
        3 => (target(), qty()).prop_map(|(target, qty)| Op::Reduce { target, qty }),
        8 => (target(), prop::option::weighted(0.5, px()), amend_qty(), any::<u8>()).prop_map(
            |(target, price, qty, stop)| Op::Amend { target, price, qty, stop }
        ),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(user, symbol)| Op::MassCancel { user, symbol }),
        10 => (any::<u8>(), any::<u8>(), amount(), 0u16..40).prop_map(
            |(user, currency, amount, tx)| Op::Adjust { user, currency, amount, tx }
        ),
        4 => (any::<u8>(), any::<u8>()).prop_map(|(symbol, depth)| Op::Book { symbol, depth }),
        3 => any::<u8>().prop_map(|user| Op::UserReport { user }),
        2 => Just(Op::VenueReport),
        2 => (any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()).prop_map(
            |(name, base, quote, profile)| Op::AddSymbol { name, base, quote, profile, future: false }
        ),
        1 => any::<u8>().prop_map(|user| Op::AddUser { user }),
        1 => any::<u8>().prop_map(|choice| Op::SetWindow { choice }),
        2 => (any::<u16>(), prop::bool::weighted(0.25), prop::bool::weighted(0.05))
            .prop_map(|(step, back, day)| Op::Tick { step, back, day }),
        1 => (any::<u8>(), prop::bool::weighted(0.75)).prop_map(|(user, resume)| Op::Suspend { user, resume }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(symbol, phase)| Op::SetPhase { symbol, phase }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(symbol, choice)| Op::SetBand { symbol, choice }),
        1 => (any::<u8>(), px()).prop_map(|(symbol, price)| Op::SetRefPrice { symbol, price }),
    ]
}

/// Any op of [`op`], and the futures operator's: marks and the insurance fund.
pub fn futures_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => op(),
        3 => (any::<u8>(), px()).prop_map(|(symbol, price)| Op::SetMark { symbol, price }),
        1 => (any::<u8>(), amount(), 0u16..40)
            .prop_map(|(currency, amount, tx)| Op::Fund { currency, amount, tx }),
    ]
}

/// A stream whose first symbol is a future (margins of a few lots' value, so that deposits
/// both cover and fail them), with marks moving and the fund changing.
pub fn futures_stream(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<Op>> {
    (setup(2..=5), prop::collection::vec(futures_op(), len)).prop_map(|(mut ops, more)| {
        if let Some(Op::AddSymbol { future, .. }) = ops.first_mut() {
            *future = true;
        }
        // The future and one spot symbol: half the orders go to the future.
        let mut symbols = 0;
        ops.retain(|op| {
            let keep = !matches!(op, Op::AddSymbol { .. }) || symbols < 2;
            symbols += matches!(op, Op::AddSymbol { .. }) as usize;
            keep
        });
        ops.extend(more);
        ops
    })
}

/// A setup deposit's power of ten: mostly enough to trade a few lots on every symbol, sometimes
/// so little that funds run out (and bound unpriced market buys).
fn exponent() -> impl Strategy<Value = u8> {
    prop_oneof![4 => 14u8..=17, 1 => 0u8..=13]
}

/// The opening of every stream: 2-3 valid symbols, `users` users, and a deposit for every user
/// in every currency the symbols can use.
pub fn setup(users: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<Op>> {
    (
        prop::collection::vec((any::<u8>(), any::<u8>(), 0..VALID_PROFILES), 2..=3),
        users,
        prop::collection::vec((exponent(), any::<u8>()), 30),
    )
        .prop_map(|(symbols, users, deposits)| {
            let mut ops = Vec::new();
            for (i, (base, quote, profile)) in symbols.into_iter().enumerate() {
                let base = base % 5;
                let quote = (base + 1 + quote % 4) % 5;
                ops.push(Op::AddSymbol {
                    name: i as u8,
                    base,
                    quote,
                    profile,
                    future: false,
                });
            }
            for user in 0..users {
                ops.push(Op::AddUser { user: user as u8 });
            }
            for (i, (e, m)) in deposits.into_iter().enumerate().take(users * 5) {
                ops.push(Op::Adjust {
                    // `Adjust` picks known users by index
                    user: (i / 5) as u8,
                    currency: (i % 5) as u8,
                    amount: Amount::Deposit(e, m),
                    tx: 1_000 + i as u16,
                });
            }
            ops
        })
}

/// A whole stream: the setup with 3-6 users, then `len` random ops.
pub fn stream(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<Op>> {
    stream_of(3..=6, len)
}

/// A stream with a chosen number of users; with 1 or 2, orders meet their own all the time.
pub fn stream_of(
    users: std::ops::RangeInclusive<usize>,
    len: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = Vec<Op>> {
    (setup(users), prop::collection::vec(op(), len)).prop_map(|(mut ops, more)| {
        ops.extend(more);
        ops
    })
}

// ----- ops to commands ------------------------------------------------------------------------

fn name(s: &str) -> Name {
    Name::new(s).expect("stream names are valid")
}

fn user_of(view: &impl View, choice: u8) -> UserId {
    let users = view.user_ids();
    // mostly a known user; one time in sixteen any id of the list, known or not
    if choice % 16 == 15 || users.is_empty() {
        USERS[(choice / 16) as usize % USERS.len()]
    } else {
        users[choice as usize % users.len()]
    }
}

fn symbol_of(view: &impl View, choice: u8) -> SymbolId {
    let count = view.symbol_count();
    match choice % 32 {
        31 => SymbolId::NONE,
        30 => SymbolId(count),
        _ if count == 0 => SymbolId(0),
        c => SymbolId(c as u32 % count),
    }
}

/// The spec used to pick prices: the symbol's, or a plain one for an unknown symbol.
fn spec_or_plain(view: &impl View, symbol: SymbolId) -> SymbolSpec {
    view.spec(symbol).unwrap_or(SymbolSpec {
        symbol: name("NONE"),
        base: name("USD"),
        quote: name("BTC"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    })
}

fn price_of(spec: &SymbolSpec, px: Px) -> Option<i64> {
    let qs = spec.quote_scale.max(1);
    let floor = ((spec.taker_fee + qs - 1) / qs).max(1);
    Some(match px {
        Px::Near(k) => (floor - 2 + (k % 10) as i64).max(1),
        Px::Huge(k) => [
            i64::MAX,
            i64::MAX / qs,
            (i64::MAX / qs).saturating_add(1),
            (i64::MAX - spec.taker_fee) / qs,
            i64::MAX / 2,
            1 << 40,
        ][k as usize % 6],
        Px::Steep(k) => floor.saturating_mul(10i64.pow((k % 16) as u32)),
        Px::Bad(k) => [0, -1, i64::MIN][k as usize % 3],
        Px::Missing => return None,
    })
}

fn qty_of(spec: &SymbolSpec, qty: Qty) -> i64 {
    let bs = spec.base_scale.max(1);
    match qty {
        Qty::Small(k) => 1 + (k % 6) as i64,
        Qty::Huge(k) => [
            i64::MAX,
            i64::MAX / 2,
            1 << 40,
            i64::MAX / bs,
            (i64::MAX / bs).saturating_add(1),
        ][k as usize % 5],
        Qty::Bad(k) => [0, -1, i64::MIN][k as usize % 3],
    }
}

/// The `(user, order, symbol)` an op targets.
fn target_of(view: &impl View, t: Target) -> (UserId, OrderId, SymbolId) {
    let live = view.live();
    if t.live && !live.is_empty() {
        live[t.pick as usize % live.len()]
    } else {
        (
            user_of(view, t.user),
            ORDER_IDS[t.order as usize % ORDER_IDS.len()],
            SymbolId(0),
        )
    }
}

/// Turns an op into the command it means for the venue as `view` shows it now.
/// The time an op's command carries, if any (the engine's `timestamp_ns`).
pub fn timestamp(op: &Op, view: &impl View) -> Option<i64> {
    match *op {
        Op::Tick { step, back, day } => {
            let step = step as i64 * 1000 + if day { rialto_core::NS_PER_DAY } else { 0 };
            Some(if back {
                view.now() - step
            } else {
                view.now() + step
            })
        }
        // One place in ten carries a time a little ahead, so that expiries also come before
        // an order (and stand when it is rejected).
        Op::Place { garble, .. } if garble % 10 == 5 => Some(view.now() + 20_000_000),
        _ => None,
    }
}

pub fn command(op: &Op, view: &impl View) -> Command {
    match *op {
        Op::Tick { .. } => Command::Tick,
        Op::Suspend { user, resume } => {
            // As a mass cancel: the user is unknown more often than elsewhere.
            let user = if user % 4 == 3 {
                USERS[(user / 4) as usize % USERS.len()].wrapping_add(1000)
            } else {
                user_of(view, user)
            };
            if resume {
                Command::ResumeUser { user }
            } else {
                Command::SuspendUser { user }
            }
        }
        Op::SetWindow { choice } => Command::SetOrderIdWindow {
            window: match choice % 8 {
                0 => 0,
                1 => -1 - (choice / 8) as i64,
                c => (c as i64) * 10_000_000,
            },
        },
        Op::AddSymbol {
            name: n,
            base,
            quote,
            profile,
            future,
        } => {
            let (base_scale, quote_scale, maker_fee, taker_fee) =
                PROFILES[profile as usize % PROFILES.len()];
            // A future: margins of a few lots' value, the mark where the stream's prices are.
            let kind = if future {
                let floor = ((taker_fee + quote_scale.max(1) - 1) / quote_scale.max(1)).max(1);
                let lot = (floor + 3).saturating_mul(quote_scale.max(1));
                let initial_margin = lot.saturating_mul(1 + (profile % 3) as i64);
                Some(rialto_core::SymbolKind::Future {
                    initial_margin,
                    maintenance_margin: (initial_margin / 2).max(1),
                    mark_price: floor + 3,
                })
            } else {
                SymbolSpec::SPOT
            };
            // names from the first three only: at most three symbols, mostly duplicates
            Command::AddSymbol(Box::new(SymbolSpec {
                symbol: name(SYMBOLS[n as usize % SYMBOLS.len()]),
                base: name(CURRENCIES[base as usize % CURRENCIES.len()]),
                quote: name(CURRENCIES[quote as usize % CURRENCIES.len()]),
                base_scale,
                quote_scale,
                maker_fee,
                taker_fee,
                band_bps: 0,
                // Some symbols end their day at 06:00 UTC.
                day_end: if profile % 2 == 0 {
                    0
                } else {
                    6 * 3_600_000_000_000
                },
                kind,
            }))
        }
        Op::AddUser { user } => Command::AddUser {
            user: USERS[user as usize % USERS.len()],
        },
        Op::Adjust {
            user,
            currency,
            amount,
            tx,
        } => {
            let user = user_of(view, user);
            let currency = CURRENCIES[currency as usize % CURRENCIES.len()];
            let available = view.available(user, currency);
            let amount = match amount {
                Amount::Deposit(e, m) => (1 + (m % 9) as i64) * 10i64.pow((e % 18) as u32),
                Amount::Max(k) => [i64::MAX, i64::MAX - 1, i64::MAX / 2][k as usize % 3],
                Amount::Zero => 0,
                Amount::WithdrawAll => -available,
                Amount::WithdrawMore => available.checked_add(1).map_or(i64::MIN, |a| -a),
                Amount::WithdrawHalf => -(available / 2).max(1),
                Amount::WithdrawMin => i64::MIN,
            };
            Command::AdjustBalance {
                user,
                currency: name(currency),
                amount,
                tx: tx as i64,
            }
        }
        Op::Place {
            user,
            order,
            symbol,
            side,
            kind,
            price,
            market_priced,
            qty,
            post_only,
            stp,
            garble,
            expiry,
        } => {
            let symbol = symbol_of(view, symbol);
            let spec = spec_or_plain(view, symbol);
            let (order_type, tif) = match kind % 50 {
                0..=23 | 45..=47 => {
                    let order_type = if kind % 50 < 24 {
                        OrderType::Limit
                    } else {
                        OrderType::StopLimit
                    };
                    match expiry % 8 {
                        0 => (order_type, Tif::Gtd),
                        1 => (order_type, Tif::Day),
                        _ => (order_type, Tif::Gtc),
                    }
                }
                24..=28 => (OrderType::Limit, Tif::Ioc),
                29..=32 => (OrderType::Limit, Tif::Fok),
                33..=36 => (OrderType::Market, Tif::Ioc),
                37..=38 => (OrderType::Market, Tif::Fok),
                39 => (OrderType::Market, Tif::Gtc),
                40..=43 => (OrderType::Stop, Tif::Ioc),
                44 => (OrderType::Stop, Tif::Fok),
                48 => (OrderType::StopLimit, Tif::Ioc),
                _ => (OrderType::StopLimit, Tif::Fok),
            };
            let limit_gtc =
                order_type == OrderType::Limit && matches!(tif, Tif::Gtc | Tif::Gtd | Tif::Day);
            let stop = matches!(order_type, OrderType::Stop | OrderType::StopLimit);
            // GTD: from 50 ms ahead down to (rarely) already past; rarely one on another tif.
            let expire_ts = match (tif, expiry / 8 % 32) {
                (Tif::Gtd, e) => Some(view.now() + 1_000_000 * (e as i64 % 51) - 1_000_000),
                (_, 0) => Some(view.now() + 1),
                _ => None,
            };
            let post_only = post_only % 40 == 0 || (limit_gtc && post_only % 5 == 1);
            // A futures market or stop order is mostly priced (its protection price), so that
            // it trades rather than meets `invalid_price`.
            let future = matches!(spec.kind, Some(rialto_core::SymbolKind::Future { .. }));
            let price = match order_type {
                OrderType::Market | OrderType::Stop
                    if !(market_priced || future && kind % 8 != 0) =>
                {
                    None
                }
                _ => price_of(&spec, price),
            };
            let garble = garble % 100;
            // Stop prices near where trades happen; one time in five a limit GTC is an
            // iceberg (display 1 to 3 of 1 to 6 lots: sometimes not below qty); rarely a field
            // where the rules forbid it, or a stop price that is missing or not positive.
            let stop_price = price_of(&spec, Px::Near(stp.wrapping_mul(7) ^ kind));
            let mut extras = rialto_core::OrderExtras::with_fields(None, None, expire_ts);
            if (stop && garble != 6) || garble == 5 {
                extras = extras.with_stop_price(if garble == 7 {
                    -(stp as i64 % 2)
                } else {
                    stop_price.unwrap_or(1)
                });
            }
            if (limit_gtc && kind / 50 == 1) || garble == 4 {
                extras = extras.with_display_qty(1 + (stp / 3) as i64 % 3);
            }
            Command::Place(PlaceOrder {
                user: user_of(view, user),
                order: ORDER_IDS[order as usize % ORDER_IDS.len()],
                symbol,
                side: (garble != 0).then_some(if side { Side::Buy } else { Side::Sell }),
                order_type: (garble != 1).then_some(order_type),
                tif: (garble != 2).then_some(tif),
                price,
                qty: qty_of(&spec, qty),
                post_only,
                stp: (garble != 3).then_some(Stp::ALL[stp as usize % 3]),
                extras,
            })
        }
        Op::Cancel { target } => {
            let (user, order, _) = target_of(view, target);
            Command::Cancel { user, order }
        }
        Op::Move { target, price } => {
            let (user, order, symbol) = target_of(view, target);
            let spec = spec_or_plain(view, symbol);
            Command::Move {
                user,
                order,
                price: price_of(&spec, price).unwrap_or(0),
            }
        }
        Op::Reduce { target, qty } => {
            let (user, order, symbol) = target_of(view, target);
            let spec = spec_or_plain(view, symbol);
            Command::Reduce {
                user,
                order,
                qty: qty_of(&spec, qty),
            }
        }
        Op::Amend {
            target,
            price,
            qty,
            stop,
        } => {
            let (user, order, symbol) = target_of(view, target);
            let spec = spec_or_plain(view, symbol);
            let (filled, remaining) = view.order_state(user, order).unwrap_or((0, 1));
            let qty = match qty {
                AmendQty::Absent => None,
                AmendQty::Delta(d) => Some(filled + remaining + d as i64),
                AmendQty::Steep(k) => {
                    Some((filled + remaining).saturating_add(10i64.pow((k % 16) as u32)))
                }
                AmendQty::Raw(q) => Some(qty_of(&spec, q)),
            };
            let price = price.map(|px| price_of(&spec, px).unwrap_or(0));
            let stop_price =
                (stop % 3 == 0).then(|| price_of(&spec, Px::Near(stop / 3)).unwrap_or(1));
            Command::Amend(AmendOrder::with_fields(user, order, price, qty, stop_price))
        }
        Op::MassCancel { user, symbol } => Command::MassCancel {
            user: if user % 8 == 7 {
                USERS[(user / 8) as usize % USERS.len()]
            } else {
                user_of(view, user)
            },
            symbol: match symbol % 8 {
                0..=2 => None,
                3 => Some(SymbolId::NONE),
                4 => Some(SymbolId(view.symbol_count())),
                _ => Some(symbol_of(view, symbol / 8)),
            },
        },
        Op::Book { symbol, depth } => Command::Book {
            symbol: symbol_of(view, symbol),
            depth: [1, 2, 3, 10, 0, -1][depth as usize % 6],
        },
        Op::UserReport { user } => Command::UserReport {
            user: user_of(view, user),
        },
        Op::VenueReport => Command::VenueReport,
        Op::SetPhase { symbol, phase } => Command::SetPhase {
            symbol: symbol_of(view, symbol),
            phase: match phase % 16 {
                0..=6 => Some(Phase::Continuous),
                7..=12 => Some(Phase::Auction),
                13 => Some(Phase::Halted),
                14 => Some(Phase::Closed),
                _ => None,
            },
        },
        Op::SetBand { symbol, choice } => Command::SetBand {
            symbol: symbol_of(view, symbol),
            // Prices are a few ticks: a band narrower than 20% is mostly a single price.
            band_bps: match choice % 8 {
                0..=3 => 0,
                4 => -1 - (choice / 8) as i64,
                c => [10_000, 30_000, 100_000][c as usize - 5],
            },
        },
        Op::SetMark { symbol, price } => {
            let symbol = symbol_of(view, symbol);
            let spec = spec_or_plain(view, symbol);
            Command::SetMarkPrice {
                symbol,
                price: price_of(&spec, price).unwrap_or(0),
            }
        }
        Op::Fund {
            currency,
            amount,
            tx,
        } => Command::FundInsurance {
            currency: name(CURRENCIES[currency as usize % CURRENCIES.len()]),
            amount: match amount {
                Amount::Deposit(e, m) => (1 + (m % 9) as i64) * 10i64.pow((e % 18) as u32),
                Amount::Max(k) => [i64::MAX, i64::MAX - 1, i64::MAX / 2][k as usize % 3],
                Amount::Zero => 0,
                Amount::WithdrawMin => i64::MIN,
                _ => -1 - (tx as i64 % 100),
            },
            tx: tx as i64,
        },
        Op::SetRefPrice { symbol, price } => {
            let symbol = symbol_of(view, symbol);
            let spec = spec_or_plain(view, symbol);
            Command::SetRefPrice {
                symbol,
                price: price_of(&spec, price).unwrap_or(0),
            }
        }
    }
}
