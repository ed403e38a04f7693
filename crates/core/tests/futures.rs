//! Futures (docs/rules.md, "Futures"): every rule and reason code, and properties checked after
//! every command of random futures streams: the futures conservation law, PnL zero-sum at the
//! common marks, positions netting to zero, each user's cash equal to its trades' exact sum, no
//! user left below maintenance margin after a liquidation pass unless the book could not absorb
//! its close, the margin sums kept equal to a recomputation, and snapshots that restore the
//! whole futures state (the liquidation index included). Then sums at the edge of i64: no
//! command panics the engine.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rialto_core::{
    AmendOrder, CancelReason, Command, Engine, EngineConfig, Name, OrderType, OwnedEvent, Phase,
    PlaceOrder, Reason, Side, SymbolId, SymbolKind, SymbolSpec, Tif, UserId,
};

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn future(symbol: &str, quote_scale: i64, fees: (i64, i64), margins: (i64, i64, i64)) -> Command {
    Command::AddSymbol(Box::new(SymbolSpec {
        symbol: name(symbol),
        base: name("IDX"),
        quote: name("USD"),
        base_scale: 1,
        quote_scale,
        maker_fee: fees.0,
        taker_fee: fees.1,
        band_bps: 0,
        day_end: 0,
        kind: Some(SymbolKind::Future {
            initial_margin: margins.0,
            maintenance_margin: margins.1,
            mark_price: margins.2,
        }),
    }))
}

/// A spot symbol X, BTC/USD, scales 1, no fees.
fn spot_x() -> Command {
    Command::AddSymbol(Box::new(SymbolSpec {
        symbol: name("X"),
        base: name("BTC"),
        quote: name("USD"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    }))
}

fn deposit(user: UserId, currency: &str, amount: i64, tx: i64) -> Command {
    Command::AdjustBalance {
        user,
        currency: name(currency),
        amount,
        tx,
    }
}

struct Venue {
    engine: Engine,
    seq: u64,
}

impl Venue {
    fn apply(&mut self, cmd: Command) -> (Result<(), Reason>, Vec<OwnedEvent>) {
        self.seq += 1;
        let mut events = Vec::new();
        let result = self.engine.apply(self.seq, i64::MIN, &cmd, &mut events);
        (result, events)
    }

    fn ok(&mut self, cmd: Command) -> Vec<OwnedEvent> {
        let (result, events) = self.apply(cmd.clone());
        assert_eq!(result, Ok(()), "{cmd:?}");
        events
    }

    fn rejected(&mut self, cmd: Command, reason: Reason) {
        let hash = self.engine.state_hash();
        let (result, events) = self.apply(cmd.clone());
        assert_eq!(result, Err(reason), "{cmd:?}");
        assert!(events.is_empty(), "{cmd:?}: {events:?}");
        assert_eq!(self.engine.state_hash(), hash, "{cmd:?} changed the state");
    }

    fn f(&self) -> SymbolId {
        self.engine.symbol_id("F")
    }

    fn available(&self, user: UserId) -> i64 {
        self.engine.balance(user, "USD").unwrap().available
    }

    fn position(&self, user: UserId, symbol: &str) -> Option<(i64, i64)> {
        self.engine
            .positions()
            .into_iter()
            .find(|p| p.0 == user && p.1.as_str() == symbol)
            .map(|p| (p.2, p.3))
    }
}

/// The rules' fresh futures venue: `F` (IDX/USD, scales 1, fees 0, margins 100 and 50, mark
/// 1000); user 1 with 200 USD, users 2 and 3 with 10000.
fn venue() -> Venue {
    let mut v = Venue {
        engine: Engine::new(EngineConfig::default()),
        seq: 0,
    };
    v.ok(future("F", 1, (0, 0), (100, 50, 1000)));
    for (user, amount) in [(1, 200), (2, 10_000), (3, 10_000)] {
        v.ok(Command::AddUser { user });
        v.ok(deposit(user, "USD", amount, user));
    }
    v
}

fn limit(v: &Venue, user: UserId, order: i64, side: Side, price: i64, qty: i64) -> Command {
    Command::Place(PlaceOrder::limit(user, order, v.f(), side, price, qty))
}

fn trades(events: &[OwnedEvent]) -> Vec<(i64, i64, UserId, UserId, i64)> {
    events
        .iter()
        .filter_map(|e| match e {
            OwnedEvent::Trade(t) => {
                Some((t.price, t.qty, t.maker_user, t.taker_user, t.taker_order))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn f1_margin_is_initial_margin_plus_open_loss_and_reducing_is_always_allowed() {
    let mut v = venue();
    v.rejected(
        limit(&v, 1, 1, Side::Buy, 1010, 2),
        Reason::InsufficientMargin,
    );
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 2));
    let events = v.ok(limit(&v, 2, 1, Side::Sell, 1000, 2));
    assert_eq!(trades(&events), [(1000, 2, 1, 2, 1)]);
    assert_eq!(v.position(1, "F"), Some((2, 2000)));
    assert_eq!(v.position(2, "F"), Some((-2, -2000)));
    // Futures hold nothing: the buyer's USD stays available.
    assert_eq!(v.engine.balance(1, "USD").unwrap().held, 0);
    let f = v.f();
    assert!(
        v.ok(Command::SetMarkPrice {
            symbol: f,
            price: 990
        })
        .is_empty()
    );
    assert_eq!(v.engine.user_margin(1, "USD"), Some((180, 200, 100)));
    v.rejected(
        limit(&v, 1, 2, Side::Buy, 990, 1),
        Reason::InsufficientMargin,
    );
    v.ok(limit(&v, 1, 3, Side::Sell, 1000, 1));
    v.rejected(deposit(1, "USD", -1, 9), Reason::InsufficientMargin);
    // A deposit is always welcome, and then the withdrawal of part of it passes.
    v.ok(deposit(1, "USD", 50, 10));
    v.ok(deposit(1, "USD", -30, 11));
}

/// The user report carries the margin of every currency with futures, the figures of
/// `user_margin` and what new futures orders may still use.
#[test]
fn the_user_report_lists_the_margin_per_currency_with_futures() {
    let mut v = venue();
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 2));
    v.ok(limit(&v, 2, 1, Side::Sell, 1000, 2));
    let f = v.f();
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 990,
    });
    let report = v.engine.user_report(1).unwrap();
    assert_eq!(
        report.margins,
        [rialto_core::MarginReport {
            currency: name("USD"),
            equity: 180,
            initial: 200,
            maintenance: 100,
            available: -20,
        }]
    );
    // A user without positions still has its margin in every currency with futures.
    let flat = v.engine.user_report(3).unwrap().margins;
    assert_eq!(flat.len(), 1);
    assert_eq!((flat[0].initial, flat[0].maintenance), (0, 0));
}

#[test]
fn f2_realised_pnl_is_exact_over_partial_closes() {
    let mut v = venue();
    v.ok(limit(&v, 3, 1, Side::Sell, 1000, 1));
    v.ok(limit(&v, 3, 2, Side::Sell, 1001, 2));
    v.ok(limit(&v, 2, 1, Side::Buy, 1001, 3));
    assert_eq!(v.position(2, "F"), Some((3, 3002)));
    v.ok(limit(&v, 3, 3, Side::Buy, 1010, 1));
    v.ok(limit(&v, 2, 2, Side::Sell, 1010, 1));
    assert_eq!(
        (v.available(2), v.position(2, "F")),
        (10_010, Some((2, 2002)))
    );
    assert_eq!(
        (v.available(3), v.position(3, "F")),
        (9_990, Some((-2, -2002)))
    );
    v.ok(limit(&v, 3, 4, Side::Buy, 1010, 2));
    v.ok(limit(&v, 2, 3, Side::Sell, 1010, 2));
    assert_eq!((v.available(2), v.position(2, "F")), (10_028, None));
    assert_eq!((v.available(3), v.position(3, "F")), (9_972, None));
}

#[test]
fn a_fill_that_crosses_zero_closes_then_opens_the_other_way() {
    let mut v = venue();
    v.ok(limit(&v, 3, 1, Side::Sell, 1000, 2));
    v.ok(limit(&v, 2, 1, Side::Buy, 1000, 2));
    v.ok(limit(&v, 3, 2, Side::Buy, 1020, 5));
    v.ok(limit(&v, 2, 2, Side::Sell, 1020, 5));
    // 2 closed at +20 each, 3 opened short at 1020.
    assert_eq!(
        (v.available(2), v.position(2, "F")),
        (10_040, Some((-3, -3060)))
    );
    assert_eq!(
        (v.available(3), v.position(3, "F")),
        (9_960, Some((3, 3060)))
    );
}

#[test]
fn f3_liquidation_closes_through_the_book_and_the_fund_pays_the_shortfall() {
    let mut v = venue();
    v.ok(Command::FundInsurance {
        currency: name("USD"),
        amount: 1000,
        tx: 10,
    });
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 2));
    v.ok(limit(&v, 2, 1, Side::Sell, 1000, 2));
    v.ok(limit(&v, 3, 1, Side::Buy, 900, 1));
    v.ok(limit(&v, 3, 2, Side::Buy, 850, 1));
    let f = v.f();
    let events = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 930,
    });
    assert_eq!(trades(&events), [(900, 1, 3, 1, 0), (850, 1, 3, 1, 0)]);
    let Some(OwnedEvent::Liquidated(l)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        (l.user, l.currency, l.equity, l.maintenance, l.shortfall),
        (1, name("USD"), 60, 100, 50)
    );
    assert_eq!(v.available(1), 0);
    let usd = v.engine.venue_totals()[0];
    assert_eq!((usd.insurance, usd.position_cost), (950, -250));
    assert_eq!(
        usd.available as i128 + usd.insurance as i128 - usd.position_cost,
        21_200
    );
    // A close is not the user's order: its id 0 is never remembered.
    assert!(!v.engine.order_id_taken(1, 0));
}

#[test]
fn a_close_the_book_cannot_absorb_stays_open_and_is_retried_at_the_next_pass() {
    let mut v = venue();
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 2));
    v.ok(limit(&v, 2, 1, Side::Sell, 1000, 2));
    v.ok(limit(&v, 3, 1, Side::Buy, 900, 1));
    // User 1's own resting order on F is cancelled first (reason `liquidation`).
    v.ok(limit(&v, 1, 2, Side::Sell, 1100, 1));
    let f = v.f();
    let events = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 940,
    });
    let cancelled: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            OwnedEvent::Cancelled(c) => Some((c.user, c.order, c.qty, c.reason)),
            _ => None,
        })
        .collect();
    assert_eq!(
        cancelled,
        [
            (1, 2, 1, CancelReason::Liquidation),
            (1, 0, 1, CancelReason::Market)
        ]
    );
    assert_eq!(trades(&events), [(900, 1, 3, 1, 0)]);
    assert!(matches!(events.last(), Some(OwnedEvent::Liquidated(l)) if l.shortfall == 0));
    assert_eq!(v.position(1, "F"), Some((1, 1000)));
    // Once per command; the next trade in F starts a pass that takes the rest.
    v.ok(limit(&v, 3, 2, Side::Buy, 935, 2));
    let events = v.ok(limit(&v, 2, 2, Side::Sell, 935, 1));
    assert_eq!(trades(&events), [(935, 1, 3, 2, 2), (935, 1, 3, 1, 0)]);
    assert_eq!(v.position(1, "F"), None);
}

#[test]
fn setting_the_mark_it_already_has_starts_no_pass() {
    let mut v = venue();
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 2));
    v.ok(limit(&v, 2, 1, Side::Sell, 1000, 2));
    v.ok(limit(&v, 3, 1, Side::Buy, 900, 2));
    let f = v.f();
    // Halted, nothing closes: user 1 stays below maintenance.
    v.ok(Command::SetPhase {
        symbol: f,
        phase: Some(rialto_core::Phase::Halted),
    });
    let events = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 940,
    });
    assert!(matches!(events.as_slice(), [OwnedEvent::Liquidated(l)] if l.user == 1));
    v.ok(Command::SetPhase {
        symbol: f,
        phase: Some(rialto_core::Phase::Continuous),
    });
    assert!(
        v.ok(Command::SetMarkPrice {
            symbol: f,
            price: 940
        })
        .is_empty()
    );
    // A real change does start one.
    let events = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 939,
    });
    assert_eq!(trades(&events), [(900, 2, 3, 1, 0)]);
}

#[test]
fn set_mark_price_reasons() {
    let mut v = venue();
    v.ok(spot_x());
    let (f, x) = (v.f(), v.engine.symbol_id("X"));
    v.rejected(
        Command::SetMarkPrice {
            symbol: SymbolId::NONE,
            price: 1,
        },
        Reason::UnknownSymbol,
    );
    v.rejected(
        Command::SetMarkPrice {
            symbol: x,
            price: 1,
        },
        Reason::InvalidSymbol,
    );
    v.rejected(
        Command::SetMarkPrice {
            symbol: f,
            price: 0,
        },
        Reason::InvalidPrice,
    );
    v.ok(limit(&v, 2, 1, Side::Buy, 1000, 5));
    v.ok(limit(&v, 3, 1, Side::Sell, 1000, 5));
    // Long open interest 5 × price must fit in i64.
    v.rejected(
        Command::SetMarkPrice {
            symbol: f,
            price: i64::MAX / 4,
        },
        Reason::Overflow,
    );
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: i64::MAX / 5,
    });
}

#[test]
fn add_symbol_refuses_bad_futures_and_registers_no_base_currency() {
    let mut v = venue();
    for margins in [(100, 0, 1000), (100, 101, 1000), (100, 50, 0), (0, 0, 1)] {
        v.rejected(future("G", 1, (0, 0), margins), Reason::InvalidSymbol);
    }
    let unknown_type = SymbolSpec {
        symbol: name("G"),
        base: name("IDX"),
        quote: name("USD"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: None,
    };
    v.rejected(
        Command::AddSymbol(Box::new(unknown_type)),
        Reason::InvalidSymbol,
    );
    // `IDX` is F's underlying, not a currency: only USD is known.
    let currencies: Vec<_> = v.engine.venue_totals().iter().map(|t| t.currency).collect();
    assert_eq!(currencies, [name("USD")]);
    v.ok(future("G", 1, (0, 0), (7, 7, 1)));
}

#[test]
fn fund_insurance_reasons_and_its_tx_ids_are_adjust_balances() {
    let mut v = venue();
    let fund = |amount, tx| Command::FundInsurance {
        currency: name("USD"),
        amount,
        tx,
    };
    v.rejected(fund(0, 20), Reason::InvalidQty);
    v.rejected(fund(10, 1), Reason::DuplicateTx);
    v.rejected(fund(-1, 20), Reason::InsufficientFunds);
    v.rejected(fund(i64::MIN, 20), Reason::InsufficientFunds);
    v.ok(fund(100, 20));
    v.rejected(deposit(2, "USD", 5, 20), Reason::DuplicateTx);
    v.rejected(fund(-101, 21), Reason::InsufficientFunds);
    v.ok(fund(-40, 21));
    v.rejected(fund(i64::MAX, 22), Reason::Overflow);
    let usd = v.engine.venue_totals()[0];
    assert_eq!(
        (usd.insurance, usd.deposits, usd.withdrawals),
        (60, 20_300, 40)
    );
    // A new currency by funding.
    v.ok(Command::FundInsurance {
        currency: name("EUR"),
        amount: 5,
        tx: 23,
    });
}

#[test]
fn futures_orders_need_a_price_and_overflow_is_refused() {
    let mut v = venue();
    let f = v.f();
    let market = PlaceOrder::market(2, 1, f, Side::Buy, 1);
    v.rejected(Command::Place(market), Reason::InvalidPrice);
    let stop = PlaceOrder::market(2, 1, f, Side::Sell, 1)
        .with_order_type(OrderType::Stop)
        .with_stop_price(900);
    v.rejected(Command::Place(stop), Reason::InvalidPrice);
    // A market order with a protection price is fine.
    let protected = PlaceOrder {
        price: Some(1000),
        ..PlaceOrder::market(2, 1, f, Side::Buy, 1)
    };
    v.ok(Command::Place(protected));
    v.rejected(
        limit(&v, 2, 2, Side::Buy, i64::MAX / 2, 3),
        Reason::Overflow,
    );
    // Margin beyond i64 (initial margin 100 a lot).
    v.rejected(
        limit(&v, 2, 2, Side::Buy, 1, i64::MAX / 50),
        Reason::Overflow,
    );
    // The spot taker-fee floor does not apply to futures sells.
    v.ok(future("H", 1, (0, 5), (1, 1, 3)));
    let h = v.engine.symbol_id("H");
    v.ok(Command::Place(PlaceOrder::limit(2, 3, h, Side::Sell, 2, 1)));
}

#[test]
fn spot_holds_take_the_margin_check_and_liquidation_cancels_spot_orders_holding_the_currency() {
    let mut v = venue();
    v.ok(spot_x());
    let x = v.engine.symbol_id("X");
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 1));
    v.ok(limit(&v, 2, 1, Side::Sell, 1000, 1));
    // E 200, IM 100: a spot buy may hold 100 USD, not 101.
    v.rejected(
        Command::Place(PlaceOrder::limit(1, 2, x, Side::Buy, 101, 1)),
        Reason::InsufficientMargin,
    );
    v.ok(Command::Place(PlaceOrder::limit(
        1,
        2,
        x,
        Side::Buy,
        100,
        1,
    )));
    // available 100, U at 850 = -150: E -50 < MM 50. The spot order's hold comes back
    // first, so the close's loss of 200 leaves exactly 0 and the fund pays nothing.
    v.ok(limit(&v, 3, 1, Side::Buy, 800, 1));
    let f = v.f();
    let events = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 850,
    });
    assert!(matches!(
        events.first(),
        Some(OwnedEvent::Cancelled(c)) if (c.user, c.order, c.reason) == (1, 2, CancelReason::Liquidation)
    ));
    assert_eq!(trades(&events), [(800, 1, 3, 1, 0)]);
    assert!(
        matches!(events.last(), Some(OwnedEvent::Liquidated(l)) if (l.equity, l.shortfall) == (-50, 0))
    );
    assert_eq!(v.available(1), 0);
}

#[test]
fn a_snapshot_carries_positions_marks_and_the_fund() {
    let mut v = venue();
    v.ok(Command::FundInsurance {
        currency: name("USD"),
        amount: 1000,
        tx: 10,
    });
    v.ok(limit(&v, 1, 1, Side::Buy, 1000, 2));
    v.ok(limit(&v, 2, 1, Side::Sell, 1000, 2));
    v.ok(limit(&v, 3, 1, Side::Buy, 900, 1));
    let f = v.f();
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 960,
    });
    let bytes = v.engine.encode_snapshot();
    let mut restored = Venue {
        engine: Engine::decode_snapshot(&bytes, EngineConfig::default()).unwrap(),
        seq: v.seq,
    };
    assert_eq!(restored.engine.state_hash(), v.engine.state_hash());
    assert_eq!(restored.engine.positions(), v.engine.positions());
    // The restored liquidation index finds user 1 as the original does.
    let a = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 930,
    });
    let b = restored.ok(Command::SetMarkPrice {
        symbol: f,
        price: 930,
    });
    assert_eq!(a, b);
    assert!(a.iter().any(|e| matches!(e, OwnedEvent::Liquidated(_))));
    assert_eq!(restored.engine.state_hash(), v.engine.state_hash());
}

// ----- properties over random futures streams ---------------------------------------------------

const USERS: i64 = 5;

#[derive(Clone, Debug)]
enum Op {
    Place {
        user: i64,
        order: i64,
        h: bool,
        side: Side,
        offset_pct: i64,
        qty: i64,
        ioc: bool,
    },
    Stop {
        user: i64,
        order: i64,
        side: Side,
        trigger_pct: i64,
        qty: i64,
    },
    Cancel {
        user: i64,
        order: i64,
    },
    Mark {
        h: bool,
        offset_pct: i64,
    },
    Deposit {
        user: i64,
        amount: i64,
    },
    Fund {
        amount: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let user = 1..=USERS;
    let side = prop_oneof![Just(Side::Buy), Just(Side::Sell)];
    prop_oneof![
        8 => (user.clone(), 1..30i64, any::<bool>(), side.clone(), -8..=8i64, 1..6i64, any::<bool>())
            .prop_map(|(user, order, h, side, offset_pct, qty, ioc)| Op::Place {
                user, order, h, side, offset_pct, qty, ioc
            }),
        1 => (user.clone(), 30..40i64, side, -10..=10i64, 1..4i64).prop_map(
            |(user, order, side, trigger_pct, qty)| Op::Stop { user, order, side, trigger_pct, qty }
        ),
        2 => (user.clone(), 1..40i64).prop_map(|(user, order)| Op::Cancel { user, order }),
        2 => (any::<bool>(), -15..=15i64).prop_map(|(h, offset_pct)| Op::Mark { h, offset_pct }),
        1 => (user, -500..2000i64).prop_map(|(user, amount)| Op::Deposit { user, amount }),
        1 => (-300..600i64).prop_map(|amount| Op::Fund { amount }),
    ]
}

/// What the properties track beside the engine: per user its net deposits, the exact sum of
/// its futures trades (−d·v less fees) and the shortfalls the fund paid it.
#[derive(Default)]
struct Ledger {
    cash: BTreeMap<UserId, i128>,
    /// Per user what came from outside its PnL: deposits less withdrawals, less fees paid,
    /// plus what the fund paid it.
    outside: BTreeMap<UserId, i128>,
    /// Users a pass liquidated whose close the book did not absorb (or who fell below again
    /// after their liquidation in the same command): they may stay below maintenance until
    /// the next pass.
    excused: Vec<UserId>,
}

struct Run {
    engine: Engine,
    seq: u64,
    tx: i64,
    ledger: Ledger,
    f: SymbolId,
    h: SymbolId,
}

impl Run {
    fn new() -> Run {
        let mut engine = Engine::new(EngineConfig::default());
        let mut seq = 0;
        let mut ledger = Ledger::default();
        let mut setup = vec![
            future("F", 1, (1, 2), (100, 50, 1000)),
            future("H", 3, (0, 1), (60, 30, 500)),
        ];
        for user in 1..=USERS {
            setup.push(Command::AddUser { user });
            let amount = 400 * user;
            setup.push(deposit(user, "USD", amount, user));
            ledger.cash.insert(user, amount as i128);
            ledger.outside.insert(user, amount as i128);
        }
        for cmd in &setup {
            seq += 1;
            assert_eq!(engine.apply(seq, i64::MIN, cmd, &mut ()), Ok(()));
        }
        let (f, h) = (engine.symbol_id("F"), engine.symbol_id("H"));
        Run {
            engine,
            seq,
            tx: 100,
            ledger,
            f,
            h,
        }
    }

    fn mark(&self, symbol: SymbolId) -> i64 {
        self.engine.symbol_status(symbol).unwrap().mark
    }

    fn command(&mut self, op: &Op) -> Command {
        match *op {
            Op::Place {
                user,
                order,
                h,
                side,
                offset_pct,
                qty,
                ioc,
            } => {
                let symbol = if h { self.h } else { self.f };
                let price = (self.mark(symbol) * (100 + offset_pct) / 100).max(1);
                let place = PlaceOrder::limit(user, order, symbol, side, price, qty);
                Command::Place(if ioc { place.with_tif(Tif::Ioc) } else { place })
            }
            Op::Stop {
                user,
                order,
                side,
                trigger_pct,
                qty,
            } => {
                let mark = self.mark(self.f);
                let stop_price = (mark * (100 + trigger_pct) / 100).max(1);
                let price = match side {
                    Side::Buy => stop_price + mark / 20,
                    Side::Sell => (stop_price - mark / 20).max(1),
                };
                Command::Place(PlaceOrder {
                    price: Some(price),
                    ..PlaceOrder::market(user, order, self.f, side, qty)
                        .with_order_type(OrderType::Stop)
                        .with_stop_price(stop_price)
                })
            }
            Op::Cancel { user, order } => Command::Cancel { user, order },
            Op::Mark { h, offset_pct } => {
                let symbol = if h { self.h } else { self.f };
                let price = (self.mark(symbol) * (100 + offset_pct) / 100).max(1);
                Command::SetMarkPrice { symbol, price }
            }
            Op::Deposit { user, amount } => {
                self.tx += 1;
                deposit(user, "USD", amount, self.tx)
            }
            Op::Fund { amount } => {
                self.tx += 1;
                Command::FundInsurance {
                    currency: name("USD"),
                    amount,
                    tx: self.tx,
                }
            }
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        let cmd = self.command(op);
        let marks = (self.mark(self.f), self.mark(self.h));
        self.seq += 1;
        let hash = self.engine.state_hash();
        let mut events = Vec::new();
        let result = self.engine.apply(self.seq, i64::MIN, &cmd, &mut events);
        if result.is_err() {
            if !events.is_empty() || self.engine.state_hash() != hash {
                return Err(format!("{cmd:?} was rejected but changed something"));
            }
            return Ok(());
        }
        if let Command::AdjustBalance { user, amount, .. } = cmd {
            *self.ledger.cash.get_mut(&user).unwrap() += amount as i128;
            *self.ledger.outside.get_mut(&user).unwrap() += amount as i128;
        }
        let mut liquidated = Vec::new();
        let mut passed = marks != (self.mark(self.f), self.mark(self.h));
        for e in &events {
            match e {
                OwnedEvent::Trade(t) => {
                    passed = true;
                    let qs = if t.symbol == self.h { 3 } else { 1 };
                    let value = t.price as i128 * t.qty as i128 * qs;
                    let (buyer, seller, buyer_fee, seller_fee) = match t.taker_side {
                        Side::Buy => (t.taker_user, t.maker_user, t.taker_fee, t.maker_fee),
                        Side::Sell => (t.maker_user, t.taker_user, t.maker_fee, t.taker_fee),
                    };
                    *self.ledger.cash.get_mut(&buyer).unwrap() -= value + buyer_fee as i128;
                    *self.ledger.cash.get_mut(&seller).unwrap() += value - seller_fee as i128;
                    *self.ledger.outside.get_mut(&buyer).unwrap() -= buyer_fee as i128;
                    *self.ledger.outside.get_mut(&seller).unwrap() -= seller_fee as i128;
                }
                OwnedEvent::Liquidated(l) => {
                    *self.ledger.cash.get_mut(&l.user).unwrap() += l.shortfall as i128;
                    *self.ledger.outside.get_mut(&l.user).unwrap() += l.shortfall as i128;
                    liquidated.push(l.user);
                }
                _ => {}
            }
        }
        self.check(passed, &liquidated)
            .map_err(|e| format!("after {cmd:?}: {e}\nevents {events:?}"))
    }

    /// `passed`: the command ran a liquidation pass (a futures trade or a mark change).
    fn check(&mut self, passed: bool, liquidated: &[UserId]) -> Result<(), String> {
        // The margin sums kept per user and future equal a recomputation from the orders.
        self.engine.check_futures_sums()?;
        let totals = self.engine.venue_totals();
        let usd = totals.iter().find(|t| t.currency == name("USD")).unwrap();
        // Conservation: available + held + fees + insurance − Σ cost = deposits − withdrawals.
        let lhs =
            usd.available as i128 + usd.held as i128 + usd.fees as i128 + usd.insurance as i128
                - usd.position_cost;
        if lhs != usd.deposits as i128 - usd.withdrawals as i128 {
            return Err(format!("not conserved: {usd:?}"));
        }
        let positions = self.engine.positions();
        let mut net: BTreeMap<Name, i64> = BTreeMap::new();
        let mut cost: BTreeMap<UserId, i128> = BTreeMap::new();
        for &(user, symbol, lots, c) in &positions {
            *net.entry(symbol).or_default() += lots;
            *cost.entry(user).or_default() += c as i128;
        }
        if let Some((symbol, n)) = net.iter().find(|(_, n)| **n != 0) {
            return Err(format!("{symbol} nets to {n}"));
        }
        // PnL is zero-sum at the common marks: Σ users (realised + unrealised) = 0, realised
        // being what a user's balance gained beyond what came from outside its trading.
        let mut pnl = 0i128;
        for user in 1..=USERS {
            let available = self.engine.balance(user, "USD").unwrap().available as i128;
            pnl += available - self.ledger.outside[&user];
        }
        for &(_, symbol, lots, c) in &positions {
            let (id, qs) = if symbol == name("H") {
                (self.h, 3)
            } else {
                (self.f, 1)
            };
            pnl += lots as i128 * self.mark(id) as i128 * qs - c as i128;
        }
        if pnl != 0 {
            return Err(format!("PnL is not zero-sum: {pnl}"));
        }
        for user in 1..=USERS {
            // Every user's available less its positions' cost is exactly its deposits, its
            // trades' −d·v and fees, and what the fund paid it: for a flat user, its realised
            // PnL is its trades' exact sum.
            let available = self.engine.balance(user, "USD").unwrap().available as i128;
            let c = cost.get(&user).copied().unwrap_or(0);
            if available - c != self.ledger.cash[&user] {
                return Err(format!(
                    "user {user}: available {available} − cost {c} but trades give {}",
                    self.ledger.cash[&user]
                ));
            }
            let (equity, _, maintenance) = self.engine.user_margin(user, "USD").unwrap();
            let open = positions.iter().any(|p| p.0 == user);
            let below = if open {
                equity < maintenance
            } else {
                available < 0
            };
            let excused = if passed {
                liquidated.contains(&user)
            } else {
                self.ledger.excused.contains(&user)
            };
            if below && !excused {
                return Err(format!(
                    "user {user} below maintenance ({equity} < {maintenance}) and not liquidated"
                ));
            }
            if passed {
                self.ledger.excused.retain(|&u| u != user);
                if below {
                    self.ledger.excused.push(user);
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn futures_invariants_hold_after_every_command(ops in prop::collection::vec(op(), 100..300)) {
        let mut run = Run::new();
        for (i, op) in ops.iter().enumerate() {
            if let Err(e) = run.step(op) {
                return Err(TestCaseError::fail(format!("op {i} {op:?}: {e}")));
            }
        }
    }

    #[test]
    fn a_snapshot_mid_stream_restores_the_futures_state(
        ops in prop::collection::vec(op(), 60..160),
        cut in 0usize..60,
    ) {
        let mut run = Run::new();
        for op in &ops[..cut] {
            run.step(op).map_err(TestCaseError::fail)?;
        }
        let bytes = run.engine.encode_snapshot();
        let restored = Engine::decode_snapshot(&bytes, EngineConfig::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(restored.state_hash(), run.engine.state_hash());
        // The margin sums, which the snapshot does not carry, are rebuilt exactly.
        restored.check_futures_sums().map_err(TestCaseError::fail)?;
        let mut twin = Run { engine: restored, ..Run::new() };
        twin.seq = run.seq;
        twin.tx = run.tx;
        for op in &ops[cut..] {
            let (a, b) = (run.command(op), twin.command(op));
            prop_assert_eq!(&a, &b);
            run.seq += 1;
            twin.seq += 1;
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            let ra = run.engine.apply(run.seq, i64::MIN, &a, &mut ea);
            let rb = twin.engine.apply(twin.seq, i64::MIN, &b, &mut eb);
            prop_assert_eq!(ra, rb);
            prop_assert_eq!(ea, eb);
        }
        prop_assert_eq!(run.engine.state_hash(), twin.engine.state_hash());
    }
}

/// The liquidation index finds exactly the users a scan of every position holder would: after
/// a mark move, nobody is left below maintenance with a book deep enough to close them.
#[test]
fn the_index_finds_every_user_below_maintenance_on_a_mark_move() {
    let mut v = Venue {
        engine: Engine::new(EngineConfig::default()),
        seq: 0,
    };
    v.ok(future("F", 1, (0, 0), (100, 50, 1000)));
    let users = 60;
    for user in 1..=users + 1 {
        v.ok(Command::AddUser { user });
        v.ok(deposit(user, "USD", 150 + 3 * user, user));
    }
    v.ok(deposit(users + 1, "USD", 10_000_000, 1_000));
    let f = v.f();
    for user in 1..=users {
        // Longs and shorts alike, each against the big user.
        let (side, other) = if user % 2 == 0 {
            (Side::Buy, Side::Sell)
        } else {
            (Side::Sell, Side::Buy)
        };
        v.ok(Command::Place(PlaceOrder::limit(user, 1, f, side, 1000, 1)));
        v.ok(Command::Place(PlaceOrder::limit(
            users + 1,
            user,
            f,
            other,
            1000,
            1,
        )));
    }
    // Deep books both ways.
    v.ok(Command::Place(PlaceOrder::limit(
        users + 1,
        500,
        f,
        Side::Buy,
        800,
        1000,
    )));
    v.ok(Command::Place(PlaceOrder::limit(
        users + 1,
        501,
        f,
        Side::Sell,
        1200,
        1000,
    )));
    for mark in [960, 930, 1040, 1080, 900] {
        let events = v.ok(Command::SetMarkPrice {
            symbol: f,
            price: mark,
        });
        let liquidated: Vec<UserId> = events
            .iter()
            .filter_map(|e| match e {
                OwnedEvent::Liquidated(l) => Some(l.user),
                _ => None,
            })
            .collect();
        assert!(
            liquidated.windows(2).all(|w| w[0] < w[1]),
            "ascending ids: {liquidated:?}"
        );
        for user in 1..=users {
            let (equity, _, maintenance) = v.engine.user_margin(user, "USD").unwrap();
            assert!(
                v.position(user, "F").is_none() || equity >= maintenance,
                "mark {mark}: user {user} left below maintenance"
            );
        }
    }
}

// ----- never a panic: sums at the edge of i64 --------------------------------------------------

fn cancelled(events: &[OwnedEvent]) -> Vec<(UserId, i64, CancelReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            OwnedEvent::Cancelled(c) => Some((c.user, c.qty, c.reason)),
            _ => None,
        })
        .collect()
}

/// Σ users (available + held) + fees + insurance − Σ K = deposits − withdrawals, in 128 bits,
/// from every user's balance (the venue report's sums saturate).
fn conserved(engine: &Engine, users: &[UserId]) -> Result<(), String> {
    let totals = engine.venue_totals();
    let Some(usd) = totals.iter().find(|t| t.currency == name("USD")) else {
        return Ok(());
    };
    let balances: i128 = users
        .iter()
        .map(|&u| {
            let b = engine.balance(u, "USD").unwrap();
            b.available as i128 + b.held as i128
        })
        .sum();
    let lhs = balances + usd.fees as i128 + usd.insurance as i128 - usd.position_cost;
    let rhs = usd.deposits as i128 - usd.withdrawals as i128;
    if lhs != rhs {
        return Err(format!("not conserved: {lhs} != {rhs}: {usd:?}"));
    }
    Ok(())
}

/// User 2 holds what the venue's deposits leave of i64 (its balance 10,200 short of i64::MAX)
/// and is long 1 lot at 1000 from user 3.
fn rich_long() -> Venue {
    let mut v = venue();
    v.ok(deposit(2, "USD", i64::MAX - 20_200, 20));
    v.ok(limit(&v, 3, 1, Side::Sell, 1000, 1));
    v.ok(limit(&v, 2, 1, Side::Buy, 1000, 1));
    assert_eq!(v.position(2, "F"), Some((1, 1000)));
    assert_eq!(v.available(2), i64::MAX - 10_200);
    v
}

#[test]
fn a_maker_whose_gain_would_pass_i64_is_cancelled_overflow_and_the_close_goes_on() {
    let mut v = rich_long();
    let f = v.f();
    // User 2's sell at 20000 would realise +19000 on a balance 10,200 short of i64::MAX.
    v.ok(limit(&v, 2, 2, Side::Sell, 20_000, 1));
    v.ok(limit(&v, 1, 1, Side::Sell, 20_001, 1));
    // The mark liquidates user 3 (short 1 at 1000): its close meets user 2's sell first.
    let events = v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 20_000,
    });
    assert_eq!(cancelled(&events), vec![(2, 1, CancelReason::Overflow)]);
    assert_eq!(trades(&events), vec![(20_001, 1, 1, 3, 0)]);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, OwnedEvent::Liquidated(l) if l.user == 3 && l.shortfall == 9001))
    );
    assert_eq!(v.position(2, "F"), Some((1, 1000)));
    assert_eq!(v.position(3, "F"), None);
    assert_eq!(v.available(2), i64::MAX - 10_200);
    conserved(&v.engine, &[1, 2, 3]).unwrap();
}

#[test]
fn a_taker_whose_gain_would_pass_i64_stops_its_walk_and_its_rest_is_cancelled_overflow() {
    let mut v = rich_long();
    let f = v.f();
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 20_000,
    });
    v.ok(limit(&v, 1, 1, Side::Buy, 20_000, 1));
    // The bid would realise user 2 +19000: the walk stops before it, and the rest is cancelled
    // although the order would rest (resting there would cross the book).
    let events = v.ok(limit(&v, 2, 2, Side::Sell, 1500, 1));
    assert!(trades(&events).is_empty(), "{events:?}");
    assert_eq!(cancelled(&events), vec![(2, 1, CancelReason::Overflow)]);
    let (bids, asks) = v.engine.resting_orders(f);
    assert_eq!((bids.len(), asks.len()), (1, 0));
    assert_eq!(v.position(2, "F"), Some((1, 1000)));
    conserved(&v.engine, &[1, 2, 3]).unwrap();
}

#[test]
fn an_uncross_trade_that_would_pass_i64_cancels_that_order_and_uncrosses_the_rest() {
    let mut v = rich_long();
    let f = v.f();
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 20_000,
    });
    v.ok(Command::SetPhase {
        symbol: f,
        phase: Some(Phase::Auction),
    });
    // User 2's sell would realise +19000 on a balance 10,200 short of i64::MAX.
    v.ok(limit(&v, 2, 2, Side::Sell, 20_000, 1));
    v.ok(limit(&v, 1, 1, Side::Buy, 20_000, 1));
    let events = v.ok(Command::SetPhase {
        symbol: f,
        phase: Some(Phase::Continuous),
    });
    assert_eq!(cancelled(&events), vec![(2, 1, CancelReason::Overflow)]);
    assert!(trades(&events).is_empty(), "{events:?}");
    let (bids, asks) = v.engine.resting_orders(f);
    assert_eq!((bids.len(), asks.len()), (1, 0));
    conserved(&v.engine, &[1, 2, 3]).unwrap();
    v.engine.check_futures_sums().unwrap();
}

#[test]
fn a_position_cost_that_would_pass_i64_stops_the_walk() {
    let mut v = venue();
    let f = v.f();
    let high = i64::MAX / 5;
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: high,
    });
    for user in 10..17 {
        v.ok(Command::AddUser { user });
        v.ok(deposit(user, "USD", 100, user));
    }
    for user in 10..14 {
        v.ok(limit(&v, user, 1, Side::Buy, high, 1));
    }
    // User 3 sells 4 at the mark: cost −4 × high, 0.8 of i64::MAX.
    let events = v.ok(limit(&v, 3, 1, Side::Sell, high, 4));
    assert_eq!(trades(&events).len(), 4);
    // The mark halves; three more bids at it.
    let low = i64::MAX / 10;
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: low,
    });
    for user in 14..17 {
        v.ok(limit(&v, user, 1, Side::Buy, low, 1));
    }
    // Within the exposure limit ((4 + 3) × low), but the third lot would put the cost past i64.
    // (The mark move left users 10 to 13 below maintenance; these bids close them too.)
    let events = v.ok(limit(&v, 3, 2, Side::Sell, low, 3));
    let own: Vec<_> = trades(&events).into_iter().filter(|t| t.3 == 3).collect();
    assert_eq!(own.len(), 2, "{events:?}");
    let own: Vec<_> = cancelled(&events)
        .into_iter()
        .filter(|c| c.0 == 3)
        .collect();
    assert_eq!(own, vec![(3, 1, CancelReason::Overflow)]);
    assert_eq!(v.position(3, "F"), Some((-6, -4 * high - 2 * low)));
    let mut users = vec![1, 2, 3];
    users.extend(10..17);
    conserved(&v.engine, &users).unwrap();
}

#[test]
fn set_mark_price_counts_the_live_orders_in_its_overflow_check() {
    let mut v = venue();
    let f = v.f();
    v.ok(deposit(2, "USD", i64::MAX / 2, 30));
    // No position (open interest 0), but a resting buy of many lots at a low price.
    let lots = i64::MAX / 4_000;
    v.ok(limit(&v, 2, 1, Side::Buy, 1, lots / 1000));
    v.ok(Command::SetMarkPrice {
        symbol: f,
        price: 2,
    });
    v.rejected(
        Command::SetMarkPrice {
            symbol: f,
            price: i64::MAX / 100,
        },
        Reason::Overflow,
    );
    // The margin figures stay exact and within i64 after the accepted move.
    let (equity, initial, _) = v.engine.user_margin(2, "USD").unwrap();
    assert!(equity > 0 && initial > 0);
}

const EDGE_PRICES: &[i64] = &[
    1,
    2,
    999,
    1000,
    1001,
    1 << 31,
    1 << 50,
    i64::MAX / 1000,
    i64::MAX / 3,
    i64::MAX - 1,
    i64::MAX,
];
const EDGE_QTYS: &[i64] = &[1, 2, 3, 1 << 20, 1 << 40, i64::MAX / 3, i64::MAX];
const EDGE_AMOUNTS: &[i64] = &[
    1,
    1000,
    i64::MAX / 2,
    i64::MAX - 1000,
    i64::MAX,
    -1,
    -1000,
    -(i64::MAX / 2),
    i64::MIN,
];

#[derive(Clone, Debug)]
enum EdgeOp {
    Place {
        user: i64,
        order: i64,
        side: Side,
        price: i64,
        qty: i64,
        ioc: bool,
    },
    Stop {
        user: i64,
        order: i64,
        side: Side,
        stop: i64,
        price: i64,
        qty: i64,
    },
    Move {
        user: i64,
        order: i64,
        price: i64,
    },
    Reduce {
        user: i64,
        order: i64,
        qty: i64,
    },
    Cancel {
        user: i64,
        order: i64,
    },
    Amend {
        user: i64,
        order: i64,
        price: Option<i64>,
        qty: Option<i64>,
    },
    Iceberg {
        user: i64,
        order: i64,
        side: Side,
        price: i64,
        qty: i64,
        display: i64,
    },
    Mark(i64),
    Deposit {
        user: i64,
        amount: i64,
    },
    Fund(i64),
    Report,
    /// An auction (false) or back to continuous, which uncrosses the book (true).
    Phase(bool),
}

/// Mostly values at the edges, some ordinary ones.
fn edge(values: &'static [i64], ordinary: std::ops::RangeInclusive<i64>) -> BoxedStrategy<i64> {
    prop_oneof![3 => prop::sample::select(values), 1 => ordinary].boxed()
}

fn edge_op() -> impl Strategy<Value = EdgeOp> {
    let user = 1..=4i64;
    let order = 1..8i64;
    let side = prop_oneof![Just(Side::Buy), Just(Side::Sell)];
    let price = || edge(EDGE_PRICES, 900..=1100);
    let qty = || edge(EDGE_QTYS, 1..=5);
    prop_oneof![
        6 => (user.clone(), order.clone(), side.clone(), price(), qty(), any::<bool>())
            .prop_map(|(user, order, side, price, qty, ioc)| EdgeOp::Place {
                user, order, side, price, qty, ioc
            }),
        1 => (user.clone(), order.clone(), side.clone(), price(), price(), qty())
            .prop_map(|(user, order, side, stop, price, qty)| EdgeOp::Stop {
                user, order, side, stop, price, qty
            }),
        1 => (user.clone(), order.clone(), price())
            .prop_map(|(user, order, price)| EdgeOp::Move { user, order, price }),
        1 => (user.clone(), order.clone(), qty())
            .prop_map(|(user, order, qty)| EdgeOp::Reduce { user, order, qty }),
        1 => (user.clone(), order.clone(), prop::option::of(price()), prop::option::of(qty()))
            .prop_map(|(user, order, price, qty)| EdgeOp::Amend { user, order, price, qty }),
        1 => (user.clone(), order.clone(), side.clone(), price(), 2..40i64, 1..4i64)
            .prop_map(|(user, order, side, price, qty, display)| EdgeOp::Iceberg {
                user, order, side, price, qty, display
            }),
        1 => (user.clone(), order).prop_map(|(user, order)| EdgeOp::Cancel { user, order }),
        2 => price().prop_map(EdgeOp::Mark),
        2 => (user, edge(EDGE_AMOUNTS, -100..=10_000))
            .prop_map(|(user, amount)| EdgeOp::Deposit { user, amount }),
        1 => edge(EDGE_AMOUNTS, -100..=10_000).prop_map(EdgeOp::Fund),
        1 => Just(EdgeOp::Report),
        1 => any::<bool>().prop_map(EdgeOp::Phase),
    ]
}

fn edge_venue(quote_scale: i64, fees: (i64, i64), margins: (i64, i64), mark: i64) -> Venue {
    let mut v = Venue {
        engine: Engine::new(EngineConfig::default()),
        seq: 0,
    };
    v.ok(future("F", quote_scale, fees, (margins.0, margins.1, mark)));
    for user in 1..=4 {
        v.ok(Command::AddUser { user });
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Streams of values at the edges of i64 (balances, prices, quantities, scales, fees,
    /// margins, marks): the engine never panics, a rejection changes nothing, the futures
    /// conservation law holds after every command and positions net to zero.
    #[test]
    fn values_at_the_edge_never_panic_and_conservation_holds(
        quote_scale in edge(&[1, 7, 1 << 20, 1 << 40, i64::MAX], 1..=10),
        maker_fee in edge(&[0, 1, 1 << 40, i64::MAX / 2], 0..=3),
        extra_fee in edge(&[0, 1, 1 << 40, i64::MAX / 2], 0..=3),
        initial in edge(&[1, 100, 1 << 40, i64::MAX / 2, i64::MAX], 1..=200),
        maintenance_pct in 1..=100i64,
        mark in edge(EDGE_PRICES, 900..=1100),
        ops in prop::collection::vec(edge_op(), 1..120),
    ) {
        let taker_fee = maker_fee.saturating_add(extra_fee);
        let maintenance = ((initial as i128 * maintenance_pct as i128) / 100).max(1) as i64;
        let mut v = edge_venue(quote_scale, (maker_fee, taker_fee), (initial, maintenance), mark);
        let f = v.f();
        let users = [1, 2, 3, 4];
        let mut tx = 100;
        for (i, op) in ops.iter().enumerate() {
            let cmd = match *op {
                EdgeOp::Place { user, order, side, price, qty, ioc } => {
                    let place = PlaceOrder::limit(user, order, f, side, price, qty);
                    Command::Place(if ioc { place.with_tif(Tif::Ioc) } else { place })
                }
                EdgeOp::Stop { user, order, side, stop, price, qty } => Command::Place(PlaceOrder {
                    price: Some(price),
                    ..PlaceOrder::market(user, order, f, side, qty)
                        .with_order_type(OrderType::Stop)
                        .with_stop_price(stop)
                }),
                EdgeOp::Move { user, order, price } => Command::Move { user, order, price },
                EdgeOp::Reduce { user, order, qty } => Command::Reduce { user, order, qty },
                EdgeOp::Cancel { user, order } => Command::Cancel { user, order },
                EdgeOp::Amend { user, order, price, qty } => {
                    Command::Amend(AmendOrder::with_fields(user, order, price, qty, None))
                }
                EdgeOp::Iceberg { user, order, side, price, qty, display } => Command::Place(
                    PlaceOrder::limit(user, order, f, side, price, qty).with_display_qty(display),
                ),
                EdgeOp::Mark(price) => Command::SetMarkPrice { symbol: f, price },
                EdgeOp::Deposit { user, amount } => {
                    tx += 1;
                    deposit(user, "USD", amount, tx)
                }
                EdgeOp::Fund(amount) => {
                    tx += 1;
                    Command::FundInsurance { currency: name("USD"), amount, tx }
                }
                EdgeOp::Report => Command::VenueReport,
                EdgeOp::Phase(continuous) => Command::SetPhase {
                    symbol: f,
                    phase: Some(if continuous { Phase::Continuous } else { Phase::Auction }),
                },
            };
            let hash = v.engine.state_hash();
            let (result, events) = v.apply(cmd.clone());
            if result.is_err() {
                prop_assert!(events.is_empty() && v.engine.state_hash() == hash,
                    "op {} {:?} rejected but changed something", i, cmd);
            }
            conserved(&v.engine, &users)
                .and_then(|()| v.engine.check_futures_sums())
                .map_err(|e| TestCaseError::fail(format!("op {i} {cmd:?}: {e}")))?;
            let net: i128 = v.engine.positions().iter().map(|p| p.2 as i128).sum();
            prop_assert_eq!(net, 0, "op {} {:?}", i, cmd);
            for user in users {
                let _ = v.engine.user_margin(user, "USD");
            }
        }
    }
}
