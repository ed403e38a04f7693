//! One small test per rule of docs/rules.md, with hand-computed trades, cancellations and
//! balances. Each expectation is checked against the engine and, separately, against the model
//! (tests/model), so these tests also anchor the model that the differential test trusts.

mod model;

use model::{Limits, Model};
use rialto_core::{
    AmendOrder, Amended, AuctionResult, Balance, CancelReason, Cancelled, Command, CurrencyTotals,
    Engine, EngineConfig, Level, LiveOrder, Name, OpenOrder, OrderId, OrderType, OwnedEvent, Phase,
    PhaseChanged, PlaceOrder, Priority, Reason, RestingOrder, Side, Stp, SymbolId, SymbolSpec,
    SymbolStatus, Tif, Trade, UserId, UserReport,
};

// ----- the venue most tests use ---------------------------------------------------------------

/// BTC-USD: 100 base units per lot, 10 quote units per tick per lot, fees 5 (maker) and 25
/// (taker) per lot. A sell must be priced at 3 or more (3 * 10 >= 25).
const S: SymbolId = SymbolId(0);
const BASE_SCALE: i64 = 100;
const QUOTE_SCALE: i64 = 10;
const MAKER_FEE: i64 = 5;
const TAKER_FEE: i64 = 25;

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn spec(symbol: &str, base: &str, quote: &str) -> SymbolSpec {
    SymbolSpec {
        symbol: name(symbol),
        base: name(base),
        quote: name(quote),
        base_scale: BASE_SCALE,
        quote_scale: QUOTE_SCALE,
        maker_fee: MAKER_FEE,
        taker_fee: TAKER_FEE,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    }
}

fn deposit(user: UserId, currency: &str, amount: i64, tx: i64) -> Command {
    Command::AdjustBalance {
        user,
        currency: name(currency),
        amount,
        tx,
    }
}

fn buy(user: UserId, order: OrderId, price: i64, qty: i64) -> PlaceOrder {
    PlaceOrder::limit(user, order, S, Side::Buy, price, qty)
}

fn sell(user: UserId, order: OrderId, price: i64, qty: i64) -> PlaceOrder {
    PlaceOrder::limit(user, order, S, Side::Sell, price, qty)
}

fn market(user: UserId, order: OrderId, side: Side, qty: i64) -> PlaceOrder {
    PlaceOrder::market(user, order, S, side, qty)
}

fn place(p: PlaceOrder) -> Command {
    Command::Place(p)
}

/// A fill on S with the standard fees.
fn trade(
    maker: (UserId, OrderId),
    taker: (UserId, OrderId),
    taker_side: Side,
    price: i64,
    qty: i64,
) -> OwnedEvent {
    OwnedEvent::Trade(Trade {
        symbol: S,
        price,
        qty,
        maker_user: maker.0,
        maker_order: maker.1,
        taker_user: taker.0,
        taker_order: taker.1,
        taker_side,
        maker_fee: qty * MAKER_FEE,
        taker_fee: qty * TAKER_FEE,
    })
}

fn cancelled(
    (user, order): (UserId, OrderId),
    side: Side,
    qty: i64,
    reason: CancelReason,
) -> OwnedEvent {
    OwnedEvent::Cancelled(Cancelled {
        symbol: S,
        user,
        order,
        side,
        qty,
        reason,
    })
}

fn resting(user: UserId, order: OrderId, side: Side, price: i64, remaining: i64) -> RestingOrder {
    RestingOrder {
        user,
        order,
        side,
        price,
        remaining,
    }
}

fn bal(available: i64, held: i64) -> Balance {
    Balance { available, held }
}

/// The engine and the model side by side. Every expectation is checked against both, with a
/// message that says which one disagrees.
struct Venue {
    engine: Engine,
    model: Model,
    seq: u64,
    /// tx ids for `fund`, far from the small ids the tests use.
    next_fund_tx: i64,
}

impl Venue {
    fn empty() -> Venue {
        Venue::with_config(EngineConfig::default())
    }

    fn with_config(config: EngineConfig) -> Venue {
        Venue {
            engine: Engine::new(config),
            model: Model::with_limits(Limits::of(&config)),
            seq: 0,
            next_fund_tx: 1_000_000,
        }
    }

    /// BTC-USD and users 1, 2 and 3, with no money.
    fn standard() -> Venue {
        let mut v = Venue::empty();
        v.setup(Venue::standard_commands());
        v
    }

    fn standard_commands() -> Vec<Command> {
        vec![
            Command::AddSymbol(Box::new(spec("BTC-USD", "BTC", "USD"))),
            Command::AddUser { user: 1 },
            Command::AddUser { user: 2 },
            Command::AddUser { user: 3 },
        ]
    }

    /// Applies commands that must all be accepted.
    fn setup(&mut self, cmds: Vec<Command>) {
        for cmd in cmds {
            let (result, _) = self.run(cmd.clone());
            assert_eq!(result, Ok(()), "setup command {cmd:?}");
        }
    }

    /// Funds a user: `base` BTC and `quote` USD (zero amounts are skipped).
    fn fund(&mut self, user: UserId, base: i64, quote: i64) {
        let tx = self.next_fund_tx;
        self.next_fund_tx += 2;
        let mut cmds = Vec::new();
        if base > 0 {
            cmds.push(deposit(user, "BTC", base, tx));
        }
        if quote > 0 {
            cmds.push(deposit(user, "USD", quote, tx + 1));
        }
        self.setup(cmds);
    }

    /// Applies to both; they must agree. Returns the engine's result and events.
    fn run(&mut self, cmd: Command) -> (Result<(), Reason>, Vec<OwnedEvent>) {
        self.seq += 1;
        let mut model_events = Vec::new();
        let model_result = self.model.apply(&cmd, &mut model_events);
        let mut events = Vec::new();
        let result = self.engine.apply(self.seq, 0, &cmd, &mut events);
        assert_eq!(
            (&result, &events),
            (&model_result, &model_events),
            "engine (left) and model (right) disagree on {cmd:?}"
        );
        (result, events)
    }

    /// The command must be accepted with exactly these events.
    fn expect(&mut self, cmd: Command, events: Vec<OwnedEvent>) {
        self.check(cmd, Ok(()), events);
    }

    /// As [`Self::expect`], for a command that carries the time `ts`.
    fn expect_at(&mut self, ts: i64, cmd: Command, events: Vec<OwnedEvent>) {
        self.check_at(Some(ts), cmd, Ok(()), events);
    }

    /// The venue clock, the same in both.
    fn assert_now(&self, now: i64) {
        assert_eq!(self.model.now(), now, "model: clock");
        assert_eq!(self.engine.now(), now, "engine: clock");
    }

    /// The command must be rejected with `reason`, emit nothing and change nothing.
    fn rejects(&mut self, cmd: Command, reason: Reason) {
        let hash = self.engine.state_hash();
        self.check(cmd.clone(), Err(reason), Vec::new());
        assert_eq!(
            self.engine.state_hash(),
            hash,
            "engine: rejected {cmd:?} changed the state"
        );
    }

    fn check(&mut self, cmd: Command, result: Result<(), Reason>, events: Vec<OwnedEvent>) {
        self.check_at(None, cmd, result, events);
    }

    fn check_at(
        &mut self,
        ts: Option<i64>,
        cmd: Command,
        result: Result<(), Reason>,
        events: Vec<OwnedEvent>,
    ) {
        self.seq += 1;
        let mut model_events = Vec::new();
        let model_result = self.model.apply_at(ts, &cmd, &mut model_events);
        assert_eq!(
            (&model_result, &model_events),
            (&result, &events),
            "model: {cmd:?} (left: model, right: expected)"
        );
        let mut engine_events = Vec::new();
        let ts = ts.unwrap_or(i64::MIN);
        let engine_result = self.engine.apply(self.seq, ts, &cmd, &mut engine_events);
        assert_eq!(
            (&engine_result, &engine_events),
            (&result, &events),
            "engine: {cmd:?} (left: engine, right: expected)"
        );
    }

    fn assert_balance(&self, user: UserId, currency: &str, expected: Balance) {
        assert_eq!(
            self.model.balance(user, currency),
            Some(expected),
            "model: user {user} {currency}"
        );
        assert_eq!(
            self.engine.balance(user, currency),
            Some(expected),
            "engine: user {user} {currency}"
        );
    }

    fn assert_book(&self, symbol: SymbolId, bids: Vec<RestingOrder>, asks: Vec<RestingOrder>) {
        let expected = (bids, asks);
        assert_eq!(self.model.resting_orders(symbol), expected, "model: book");
        assert_eq!(self.engine.resting_orders(symbol), expected, "engine: book");
    }

    fn assert_fees(&self, currency: &str, fees: i64) {
        let of = |totals: Vec<CurrencyTotals>| {
            totals
                .iter()
                .find(|t| t.currency.as_str() == currency)
                .map(|t| t.fees)
        };
        assert_eq!(of(self.model.venue_totals()), Some(fees), "model: fees");
        assert_eq!(of(self.engine.venue_totals()), Some(fees), "engine: fees");
    }
}

// ----- symbols and users ----------------------------------------------------------------------

#[test]
fn symbols_get_ids_in_the_order_they_are_added() {
    let mut v = Venue::empty();
    v.setup(vec![
        Command::AddSymbol(Box::new(spec("ZZZ-USD", "ZZZ", "USD"))),
        Command::AddSymbol(Box::new(spec("AAA-USD", "AAA", "USD"))),
    ]);
    assert_eq!(v.engine.symbol_id("ZZZ-USD"), SymbolId(0));
    assert_eq!(v.engine.symbol_id("AAA-USD"), SymbolId(1));
    assert_eq!(v.engine.symbol_id("BTC-USD"), SymbolId::NONE);
    let empty_book = |symbol| OwnedEvent::Book {
        symbol,
        bids: vec![],
        asks: vec![],
    };
    v.expect(
        Command::Book {
            symbol: SymbolId(1),
            depth: 5,
        },
        vec![empty_book(SymbolId(1))],
    );
    for symbol in [SymbolId(2), SymbolId::NONE] {
        v.rejects(Command::Book { symbol, depth: 5 }, Reason::UnknownSymbol);
    }
}

#[test]
fn add_symbol_rejects_duplicates_before_invalid_specs() {
    let mut v = Venue::empty();
    v.setup(vec![Command::AddSymbol(Box::new(spec(
        "BTC-USD", "BTC", "USD",
    )))]);
    let bad = SymbolSpec {
        base_scale: 0,
        ..spec("BTC-USD", "BTC", "USD")
    };
    v.rejects(Command::AddSymbol(Box::new(bad)), Reason::DuplicateSymbol);
    v.rejects(
        Command::AddSymbol(Box::new(spec("BTC-USD", "ETH", "EUR"))),
        Reason::DuplicateSymbol,
    );
}

#[test]
fn add_symbol_rejects_each_invalid_spec() {
    let mut v = Venue::empty();
    let good = spec("ETH-USD", "ETH", "USD");
    let bad_specs = [
        SymbolSpec {
            base_scale: 0,
            ..good
        },
        SymbolSpec {
            base_scale: -1,
            ..good
        },
        SymbolSpec {
            quote_scale: 0,
            ..good
        },
        SymbolSpec {
            maker_fee: -1,
            taker_fee: 0,
            ..good
        },
        SymbolSpec {
            maker_fee: 6,
            taker_fee: 5,
            ..good
        },
        SymbolSpec {
            quote: name("ETH"),
            ..good
        },
    ];
    for bad in bad_specs {
        v.rejects(Command::AddSymbol(Box::new(bad)), Reason::InvalidSymbol);
    }
    // Equal fees, and zero fees, are fine; the rejected specs took no id.
    v.setup(vec![Command::AddSymbol(Box::new(SymbolSpec {
        maker_fee: 0,
        taker_fee: 0,
        ..good
    }))]);
    assert_eq!(v.engine.symbol_id("ETH-USD"), SymbolId(0));
    v.setup(vec![Command::AddSymbol(Box::new(SymbolSpec {
        maker_fee: 7,
        taker_fee: 7,
        ..spec("ETH-EUR", "ETH", "EUR")
    }))]);
    assert_eq!(v.engine.symbol_id("ETH-EUR"), SymbolId(1));
}

#[test]
fn users_are_any_64_bit_id_and_unique() {
    let mut v = Venue::empty();
    v.setup(vec![
        Command::AddUser { user: i64::MIN },
        Command::AddUser { user: -1 },
        Command::AddUser { user: i64::MAX },
    ]);
    v.rejects(Command::AddUser { user: -1 }, Reason::DuplicateUser);
    assert_eq!(v.engine.users(), vec![i64::MIN, -1, i64::MAX]);
    v.expect(deposit(i64::MIN, "USD", 5, 1), vec![]);
    v.assert_balance(i64::MIN, "USD", bal(5, 0));
}

// ----- balances -------------------------------------------------------------------------------

#[test]
fn deposits_and_withdrawals_move_available_and_venue_totals() {
    let mut v = Venue::standard();
    v.expect(deposit(1, "USD", 1000, 1), vec![]);
    v.expect(deposit(1, "USD", -400, 2), vec![]);
    v.expect(deposit(2, "USD", 50, 3), vec![]);
    v.assert_balance(1, "USD", bal(600, 0));
    v.assert_balance(2, "USD", bal(50, 0));
    v.assert_balance(3, "USD", bal(0, 0));
    let usd = CurrencyTotals {
        currency: name("USD"),
        deposits: 1050,
        withdrawals: 400,
        available: 650,
        held: 0,
        fees: 0,
        insurance: 0,
        position_cost: 0,
    };
    let btc = CurrencyTotals {
        currency: name("BTC"),
        deposits: 0,
        withdrawals: 0,
        available: 0,
        held: 0,
        fees: 0,
        insurance: 0,
        position_cost: 0,
    };
    v.expect(
        Command::VenueReport,
        vec![OwnedEvent::VenueReport(vec![btc, usd])],
    );
}

#[test]
fn adjust_balance_rejections_come_in_rule_order() {
    let mut v = Venue::standard();
    v.expect(deposit(1, "USD", 100, 7), vec![]);
    // unknown_user before invalid_qty (and before duplicate_tx)
    v.rejects(deposit(99, "USD", 0, 7), Reason::UnknownUser);
    // invalid_qty before duplicate_tx
    v.rejects(deposit(1, "USD", 0, 7), Reason::InvalidQty);
    // duplicate_tx before insufficient_funds
    v.rejects(deposit(1, "USD", -1000, 7), Reason::DuplicateTx);
    // duplicate_tx before overflow
    v.rejects(deposit(1, "USD", i64::MAX, 7), Reason::DuplicateTx);
    v.rejects(deposit(1, "USD", -101, 8), Reason::InsufficientFunds);
    v.rejects(deposit(1, "USD", i64::MAX, 8), Reason::Overflow);
    v.assert_balance(1, "USD", bal(100, 0));
}

#[test]
fn a_tx_id_is_unique_across_the_venue_but_a_rejected_one_is_not_used_up() {
    let mut v = Venue::standard();
    v.expect(deposit(1, "USD", 100, 5), vec![]);
    v.rejects(deposit(2, "BTC", 100, 5), Reason::DuplicateTx);
    v.rejects(deposit(1, "USD", -100, 5), Reason::DuplicateTx);
    v.rejects(deposit(2, "USD", -1, 6), Reason::InsufficientFunds);
    v.expect(deposit(2, "USD", 1, 6), vec![]);
    v.rejects(deposit(2, "USD", 1, 6), Reason::DuplicateTx);
    v.assert_balance(1, "USD", bal(100, 0));
    v.assert_balance(2, "USD", bal(1, 0));
    v.assert_balance(2, "BTC", bal(0, 0));
}

#[test]
fn a_withdrawal_cannot_exceed_available_even_at_the_extremes() {
    let mut v = Venue::standard();
    v.rejects(deposit(1, "USD", -1, 1), Reason::InsufficientFunds);
    v.rejects(deposit(1, "USD", i64::MIN, 1), Reason::InsufficientFunds);
    v.expect(deposit(1, "USD", i64::MAX, 1), vec![]);
    v.rejects(deposit(1, "USD", i64::MIN, 2), Reason::InsufficientFunds);
    v.expect(deposit(1, "USD", -i64::MAX, 2), vec![]);
    v.assert_balance(1, "USD", bal(0, 0));
}

#[test]
fn deposits_overflow_on_the_users_balance_or_the_venues_total() {
    let mut v = Venue::standard();
    v.expect(deposit(1, "USD", i64::MAX - 10, 1), vec![]);
    v.rejects(deposit(1, "USD", 11, 2), Reason::Overflow);
    v.expect(deposit(1, "USD", 10, 2), vec![]);
    v.expect(deposit(1, "USD", -i64::MAX, 3), vec![]);
    // User 2 holds nothing, but the venue's total deposits of USD is at 2^63 - 1.
    v.rejects(deposit(2, "USD", 1, 4), Reason::Overflow);
    // Other currencies are separate.
    v.expect(deposit(2, "BTC", i64::MAX, 4), vec![]);
}

#[test]
fn a_deposit_in_a_new_currency_registers_it() {
    let mut v = Venue::standard();
    v.rejects(deposit(1, "EUR", -5, 1), Reason::InsufficientFunds);
    v.expect(deposit(1, "EUR", 5, 1), vec![]);
    v.assert_balance(1, "EUR", bal(5, 0));
    let names: Vec<String> = v
        .engine
        .venue_totals()
        .iter()
        .map(|t| t.currency.as_str().to_string())
        .collect();
    assert_eq!(names, ["BTC", "EUR", "USD"]);
}

#[test]
fn a_venue_has_at_most_65535_currencies() {
    // Engine only: the model has no such limit.
    let mut engine = Engine::new(EngineConfig {
        max_tx_ids: 1 << 17,
        ..EngineConfig::default()
    });
    let mut seq = 0;
    let mut run = |engine: &mut Engine, cmd: Command| {
        seq += 1;
        engine.apply(seq, 1, &cmd, &mut ())
    };
    assert_eq!(run(&mut engine, Command::AddUser { user: 1 }), Ok(()));
    for i in 0..65_535 {
        let cmd = deposit(1, &format!("C{i}"), 1 + i, i);
        assert_eq!(run(&mut engine, cmd), Ok(()), "currency {i}");
    }
    let before = engine.state_hash();
    // A new currency is refused, by a deposit or by a symbol, and changes nothing.
    let refused = [
        deposit(1, "ONE-MORE", 5, 100_000),
        Command::AddSymbol(Box::new(spec("NEW-C0", "NEW", "C0"))),
        Command::AddSymbol(Box::new(spec("C0-NEW", "C0", "NEW"))),
    ];
    for cmd in refused {
        assert_eq!(
            run(&mut engine, cmd.clone()),
            Err(Reason::LimitExceeded),
            "{cmd:?}"
        );
    }
    assert_eq!(engine.state_hash(), before);
    // Known currencies still serve: a symbol on two of them, and more of a user's 65,535
    // balances (three in its own line, the rest beside it).
    assert_eq!(
        run(
            &mut engine,
            Command::AddSymbol(Box::new(spec("C1-C0", "C1", "C0")))
        ),
        Ok(())
    );
    assert_eq!(run(&mut engine, deposit(1, "C60000", 7, 100_001)), Ok(()));
    assert_eq!(engine.balance(1, "C60000"), Some(bal(60_001 + 7, 0)));
    assert_eq!(engine.balance(1, "C2"), Some(bal(3, 0)));
    assert_eq!(engine.user_report(1).unwrap().balances.len(), 65_535);
}

// ----- placing: holds and rejections ----------------------------------------------------------

#[test]
fn a_buy_limit_holds_qty_times_price_times_quote_scale_plus_taker_fee() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    // 2 * (50 * 10 + 25) = 1050
    v.assert_balance(1, "USD", bal(8_950, 1_050));
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 50, 2)], vec![]);
}

#[test]
fn a_sell_limit_holds_qty_times_base_scale() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.expect(place(sell(1, 1, 50, 3)), vec![]);
    v.assert_balance(1, "BTC", bal(700, 300));
}

#[test]
fn a_hold_must_fit_in_available() {
    let mut v = Venue::standard();
    v.fund(1, 299, 1_049);
    v.rejects(place(buy(1, 1, 50, 2)), Reason::InsufficientFunds);
    v.rejects(place(sell(1, 2, 50, 3)), Reason::InsufficientFunds);
    v.fund(1, 1, 1);
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    v.expect(place(sell(1, 2, 51, 3)), vec![]);
    v.assert_balance(1, "USD", bal(0, 1_050));
    v.assert_balance(1, "BTC", bal(0, 300));
}

#[test]
fn place_rejects_unknown_user_before_unknown_symbol() {
    let mut v = Venue::standard();
    let p = PlaceOrder {
        symbol: SymbolId::NONE,
        side: None,
        qty: 0,
        ..buy(9, 1, 50, 1)
    };
    v.rejects(place(p), Reason::UnknownUser);
}

#[test]
fn place_rejects_unknown_symbol_before_invalid_order() {
    let mut v = Venue::standard();
    for symbol in [SymbolId::NONE, SymbolId(1)] {
        let p = PlaceOrder {
            symbol,
            side: None,
            ..buy(1, 1, 50, 1)
        };
        v.rejects(place(p), Reason::UnknownSymbol);
    }
}

#[test]
fn place_rejects_invalid_orders_before_invalid_qty() {
    let mut v = Venue::standard();
    v.fund(1, 10_000, 100_000);
    let base = PlaceOrder {
        qty: 0,
        ..buy(1, 1, 50, 1)
    };
    let invalid = [
        PlaceOrder { side: None, ..base },
        PlaceOrder {
            order_type: None,
            ..base
        },
        PlaceOrder { tif: None, ..base },
        PlaceOrder { stp: None, ..base },
        // a market order cannot rest
        PlaceOrder {
            order_type: Some(OrderType::Market),
            ..base
        },
        // post-only is for limit GTC only
        base.with_tif(Tif::Ioc).with_post_only(),
        base.with_tif(Tif::Fok).with_post_only(),
        PlaceOrder {
            order_type: Some(OrderType::Market),
            tif: Some(Tif::Ioc),
            ..base
        }
        .with_post_only(),
    ];
    for p in invalid {
        v.rejects(place(p), Reason::InvalidOrder);
    }
}

#[test]
fn place_rejects_invalid_qty_before_invalid_price() {
    let mut v = Venue::standard();
    v.fund(1, 10_000, 100_000);
    for qty in [0, -1, i64::MIN] {
        let p = PlaceOrder {
            price: None,
            qty,
            ..buy(1, 1, 50, 1)
        };
        v.rejects(place(p), Reason::InvalidQty);
    }
}

#[test]
fn place_rejects_invalid_prices_before_duplicate_order_id() {
    let mut v = Venue::standard();
    v.fund(1, 10_000, 100_000);
    v.expect(place(sell(1, 1, 60, 1)), vec![]);
    let invalid = [
        PlaceOrder {
            price: None,
            ..buy(1, 1, 50, 1)
        },
        buy(1, 1, 0, 1),
        buy(1, 1, -5, 1),
        buy(1, 1, i64::MIN, 1),
        PlaceOrder {
            price: Some(0),
            ..market(1, 1, Side::Buy, 1)
        },
        PlaceOrder {
            price: Some(-1),
            ..market(1, 1, Side::Sell, 1)
        },
        // 2 * 10 = 20 is below the taker fee of 25: the seller's proceeds would be negative.
        sell(1, 1, 2, 1),
        PlaceOrder {
            price: Some(2),
            ..market(1, 1, Side::Sell, 1)
        },
    ];
    for p in invalid {
        v.rejects(place(p), Reason::InvalidPrice);
    }
    // A buy may be priced below the fee floor; a sell at the floor is fine.
    v.expect(place(buy(1, 2, 1, 1)), vec![]);
    v.expect(place(sell(1, 3, 3, 1)), vec![]);
}

#[test]
fn place_rejects_duplicate_order_ids_among_the_users_live_orders_on_any_symbol() {
    let mut v = Venue::standard();
    v.setup(vec![Command::AddSymbol(Box::new(spec(
        "BTC-EUR", "BTC", "EUR",
    )))]);
    v.fund(1, 10_000, 100_000);
    v.fund(2, 10_000, 100_000);
    v.fund(3, 0, 100_000);
    v.expect(place(buy(1, 7, 40, 1)), vec![]);
    // duplicate_order_id before would_take
    v.expect(place(sell(2, 1, 45, 1)), vec![]);
    v.rejects(
        place(buy(1, 7, 45, 1).with_post_only()),
        Reason::DuplicateOrderId,
    );
    // on another symbol, and for an IOC that would never rest
    let other_symbol = PlaceOrder {
        symbol: SymbolId(1),
        ..buy(1, 7, 40, 1)
    };
    v.rejects(place(other_symbol), Reason::DuplicateOrderId);
    v.rejects(
        place(buy(1, 7, 40, 1).with_tif(Tif::Ioc)),
        Reason::DuplicateOrderId,
    );
    // Another user may use the same number; a gone order's id is free again.
    v.expect(place(buy(3, 7, 30, 1)), vec![]);
    v.expect(
        Command::Cancel { user: 1, order: 7 },
        vec![cancelled((1, 7), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(place(buy(1, 7, 40, 1)), vec![]);
}

#[test]
fn post_only_rejects_would_take_against_any_owner_before_overflow() {
    let mut v = Venue::standard();
    v.fund(1, 10_000, 100_000);
    v.fund(2, 10_000, 100_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(buy(2, 2, 40, 1)), vec![]);
    // crosses: buy price >= best ask, sell price <= best bid, even the user's own order
    v.rejects(place(buy(1, 3, 50, 1).with_post_only()), Reason::WouldTake);
    v.rejects(place(buy(2, 3, 60, 1).with_post_only()), Reason::WouldTake);
    v.rejects(place(sell(2, 3, 40, 1).with_post_only()), Reason::WouldTake);
    // would_take before overflow and insufficient_funds
    v.rejects(
        place(buy(3, 3, i64::MAX, 1).with_post_only()),
        Reason::WouldTake,
    );
    v.rejects(place(buy(3, 3, 60, 1).with_post_only()), Reason::WouldTake);
    // not crossing: rests
    v.expect(place(buy(2, 3, 49, 1).with_post_only()), vec![]);
    v.expect(place(sell(2, 4, 51, 1).with_post_only()), vec![]);
    v.assert_book(
        S,
        vec![
            resting(2, 3, Side::Buy, 49, 1),
            resting(2, 2, Side::Buy, 40, 1),
        ],
        vec![
            resting(1, 1, Side::Sell, 50, 1),
            resting(2, 4, Side::Sell, 51, 1),
        ],
    );
}

#[test]
fn place_rejects_overflow_of_the_hold_before_insufficient_funds() {
    let mut v = Venue::standard();
    // 2 * (i64::MAX / 20 * 10 + 25) passes 2^63 - 1
    v.rejects(place(buy(1, 1, i64::MAX / 20, 2)), Reason::Overflow);
    v.rejects(place(buy(1, 1, i64::MAX, 1)), Reason::Overflow);
    v.rejects(place(buy(1, 1, 1, i64::MAX)), Reason::Overflow);
    // i64::MAX / 100 + 1 lots of 100 base units
    v.rejects(place(sell(1, 1, 50, i64::MAX / 100 + 1)), Reason::Overflow);
    v.rejects(
        place(market(1, 1, Side::Sell, i64::MAX / 100 + 1)),
        Reason::Overflow,
    );
    // fits in 64 bits, but not in available
    v.rejects(
        place(sell(1, 1, 50, i64::MAX / 100)),
        Reason::InsufficientFunds,
    );
    v.rejects(
        place(buy(1, 1, (i64::MAX - 25) / 10, 1)),
        Reason::InsufficientFunds,
    );
}

#[test]
fn place_rejects_limit_exceeded_last() {
    let config = EngineConfig {
        max_open_orders_per_user: 2,
        max_resting_orders: 3,
        ..EngineConfig::default()
    };
    let mut v = Venue::with_config(config);
    v.setup(Venue::standard_commands());
    v.fund(1, 10_000, 100_000);
    v.fund(2, 10_000, 100_000);
    v.expect(place(buy(1, 1, 40, 1)), vec![]);
    v.expect(place(buy(1, 2, 40, 1)), vec![]);
    // insufficient_funds before limit_exceeded
    v.rejects(place(buy(1, 3, 40, 1_000)), Reason::InsufficientFunds);
    v.rejects(place(buy(1, 3, 40, 1)), Reason::LimitExceeded);
    // only GTC orders count against the limit
    v.expect(
        place(buy(1, 3, 40, 1).with_tif(Tif::Ioc)),
        vec![cancelled((1, 3), Side::Buy, 1, CancelReason::Ioc)],
    );
    // the venue-wide limit: 3 resting orders
    v.expect(place(sell(2, 1, 50, 1)), vec![]);
    v.rejects(place(sell(2, 2, 50, 1)), Reason::LimitExceeded);
    // even an order that would trade in full at once
    v.rejects(place(sell(2, 2, 40, 1)), Reason::LimitExceeded);
    v.expect(
        Command::Cancel { user: 1, order: 1 },
        vec![cancelled((1, 1), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(place(buy(1, 3, 40, 1)), vec![]);
}

#[test]
fn the_default_limit_is_100_000_open_orders_per_user() {
    let mut v = Venue::standard();
    v.model.self_check = false;
    v.fund(1, 100_000 * BASE_SCALE + BASE_SCALE, 0);
    for order in 0..100_000 {
        v.expect(place(sell(1, order, 50, 1)), vec![]);
    }
    v.rejects(place(sell(1, 100_000, 50, 1)), Reason::LimitExceeded);
    v.fund(2, 0, 1_000);
    v.expect(
        place(buy(2, 1, 50, 1)),
        vec![trade((1, 0), (2, 1), Side::Buy, 50, 1)],
    );
    v.expect(place(sell(1, 100_000, 50, 1)), vec![]);
}

/// The capacities fixed at start (docs/rules.md, "Limits"), each refused with
/// `limit_exceeded` after every other reason, changing nothing.
#[test]
fn users_symbols_and_tx_ids_stop_at_their_capacities() {
    let config = EngineConfig {
        max_users: 3,
        max_symbols: 1,
        max_tx_ids: 3,
        ..EngineConfig::default()
    };
    let mut v = Venue::with_config(config);
    v.setup(Venue::standard_commands());
    v.rejects(Command::AddUser { user: 1 }, Reason::DuplicateUser);
    v.rejects(Command::AddUser { user: 4 }, Reason::LimitExceeded);
    v.rejects(
        Command::AddSymbol(Box::new(spec("BTC-USD", "BTC", "USD"))),
        Reason::DuplicateSymbol,
    );
    v.rejects(
        Command::AddSymbol(Box::new(spec("ETH-USD", "ETH", "USD"))),
        Reason::LimitExceeded,
    );
    v.expect(deposit(1, "USD", 100, 1), vec![]);
    v.expect(deposit(1, "USD", -10, 2), vec![]);
    v.expect(
        Command::FundInsurance {
            currency: name("USD"),
            amount: 5,
            tx: 3,
        },
        vec![],
    );
    // Three tx ids used: every other reason still comes first, then the capacity.
    v.rejects(deposit(1, "USD", 1, 1), Reason::DuplicateTx);
    v.rejects(deposit(1, "USD", -1_000, 4), Reason::InsufficientFunds);
    v.rejects(deposit(1, "USD", 1, 4), Reason::LimitExceeded);
    v.rejects(deposit(1, "USD", -1, 4), Reason::LimitExceeded);
    v.rejects(
        Command::FundInsurance {
            currency: name("USD"),
            amount: 1,
            tx: 4,
        },
        Reason::LimitExceeded,
    );
    v.assert_balance(1, "USD", bal(90, 0));
}

/// While a window is set, every live order will be remembered when it ends, so a new order
/// is refused once the remembered ids and the live orders fill `max_window_ids`.
#[test]
fn the_order_id_window_stops_at_its_capacity() {
    let config = EngineConfig {
        max_window_ids: 3,
        ..EngineConfig::default()
    };
    let mut v = Venue::with_config(config);
    v.setup(Venue::standard_commands());
    v.fund(1, 0, 10_000);
    v.expect(Command::SetOrderIdWindow { window: 1_000 }, vec![]);
    v.expect_at(100, place(buy(1, 1, 40, 1)), vec![]);
    v.expect(
        Command::Cancel { user: 1, order: 1 },
        vec![cancelled((1, 1), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(place(buy(1, 2, 40, 1)), vec![]);
    v.expect(
        place(buy(1, 3, 40, 1).with_tif(Tif::Ioc)),
        vec![cancelled((1, 3), Side::Buy, 1, CancelReason::Ioc)],
    );
    // Ids 1 and 3 remembered, order 2 live: full, even for an order that would not rest.
    v.rejects(place(buy(1, 4, 40, 1)), Reason::LimitExceeded);
    v.rejects(
        place(buy(1, 4, 40, 1).with_tif(Tif::Ioc)),
        Reason::LimitExceeded,
    );
    // Once the window has passed ids 1 and 3, there is room again.
    v.expect_at(1_100, place(buy(1, 4, 40, 1)), vec![]);
    // With no window there is nothing to remember and no such limit.
    v.expect(Command::SetOrderIdWindow { window: 0 }, vec![]);
    for order in 5..10 {
        v.expect(place(buy(1, order, 40, 1)), vec![]);
    }
}

/// A snapshot that holds more than an engine's capacity is refused, naming the setting.
#[test]
fn a_snapshot_past_the_engines_capacities_is_refused() {
    let mut v = Venue::standard();
    v.fund(1, 10, 10_000); // two tx ids
    v.expect(place(buy(1, 1, 40, 1)), vec![]);
    v.expect(place(buy(1, 2, 40, 1)), vec![]);
    let bytes = v.engine.encode_snapshot();
    for (config, setting) in [
        (
            EngineConfig {
                max_users: 2,
                ..EngineConfig::default()
            },
            "max_users",
        ),
        (
            EngineConfig {
                max_resting_orders: 1,
                ..EngineConfig::default()
            },
            "max_resting_orders",
        ),
        (
            EngineConfig {
                max_tx_ids: 1,
                ..EngineConfig::default()
            },
            "max_tx_ids",
        ),
        (
            EngineConfig {
                max_symbols: 0,
                ..EngineConfig::default()
            },
            "max_symbols",
        ),
    ] {
        let refused = Engine::decode_snapshot(&bytes, config)
            .err()
            .map(|e| e.to_string());
        assert!(
            refused.as_deref().is_some_and(|e| e.contains(setting)),
            "{setting}: {refused:?}"
        );
    }
    let restored = Engine::decode_snapshot(&bytes, EngineConfig::default()).unwrap();
    assert_eq!(restored.state_hash(), v.engine.state_hash());
}

// ----- matching and settlement ----------------------------------------------------------------

#[test]
fn a_taker_buy_trades_at_the_resting_price_and_gets_its_price_improvement_back() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 2)), vec![]);
    v.expect(
        place(buy(2, 1, 52, 2)),
        vec![trade((1, 1), (2, 1), Side::Buy, 50, 2)],
    );
    // buyer held 2 * (520 + 25) = 1090, paid 2 * 500 + 2 * 25 = 1050
    v.assert_balance(2, "USD", bal(8_950, 0));
    v.assert_balance(2, "BTC", bal(200, 0));
    // seller delivered 200 base, received 1000 - 2 * 5
    v.assert_balance(1, "BTC", bal(800, 0));
    v.assert_balance(1, "USD", bal(990, 0));
    v.assert_fees("USD", 60);
    v.assert_fees("BTC", 0);
    v.assert_book(S, vec![], vec![]);
}

#[test]
fn a_maker_buy_pays_the_maker_fee_and_gets_the_fee_difference_back() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 50, 3)), vec![]);
    v.assert_balance(1, "USD", bal(8_425, 1_575));
    v.expect(
        place(sell(2, 1, 50, 2)),
        vec![trade((1, 1), (2, 1), Side::Sell, 50, 2)],
    );
    // 2 lots released 2 * 525 from held, paid 2 * 500 + 2 * 5: 2 * 20 back to available
    v.assert_balance(1, "USD", bal(8_465, 525));
    v.assert_balance(1, "BTC", bal(200, 0));
    // the taker seller pays the taker fee out of its proceeds
    v.assert_balance(2, "USD", bal(1_000 - 50, 0));
    v.assert_balance(2, "BTC", bal(800, 0));
    v.assert_fees("USD", 60);
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 50, 1)], vec![]);
}

#[test]
fn matching_is_best_price_first_then_oldest_first() {
    let mut v = Venue::standard();
    v.fund(1, 10_000, 0);
    v.fund(2, 10_000, 0);
    v.fund(3, 0, 100_000);
    v.expect(place(sell(1, 1, 51, 1)), vec![]);
    v.expect(place(sell(2, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 50, 2)), vec![]);
    v.expect(place(sell(2, 2, 49, 1)), vec![]);
    v.expect(
        place(buy(3, 1, 51, 5)),
        vec![
            trade((2, 2), (3, 1), Side::Buy, 49, 1),
            trade((2, 1), (3, 1), Side::Buy, 50, 1),
            trade((1, 2), (3, 1), Side::Buy, 50, 2),
            trade((1, 1), (3, 1), Side::Buy, 51, 1),
        ],
    );
    // 49*10 + 3*50*10 + 51*10 + 5 * 25 = 2625
    v.assert_balance(3, "USD", bal(100_000 - 2_625, 0));
}

#[test]
fn a_gtc_remainder_rests_with_its_hold() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(
        place(buy(2, 1, 55, 3)),
        vec![trade((1, 1), (2, 1), Side::Buy, 50, 1)],
    );
    // 2 lots rest at 55: 2 * 575 held; paid 525 for the fill
    v.assert_balance(2, "USD", bal(10_000 - 525 - 1_150, 1_150));
    v.assert_book(S, vec![resting(2, 1, Side::Buy, 55, 2)], vec![]);
}

#[test]
fn a_sell_taker_stops_at_its_limit() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 50, 1)), vec![]);
    v.expect(place(buy(1, 2, 48, 1)), vec![]);
    v.expect(
        place(sell(2, 1, 49, 3)),
        vec![trade((1, 1), (2, 1), Side::Sell, 50, 1)],
    );
    v.assert_book(
        S,
        vec![resting(1, 2, Side::Buy, 48, 1)],
        vec![resting(2, 1, Side::Sell, 49, 2)],
    );
    v.assert_balance(2, "BTC", bal(700, 200));
}

#[test]
fn an_ioc_remainder_is_cancelled_and_its_hold_returned() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(
        place(buy(2, 1, 50, 3).with_tif(Tif::Ioc)),
        vec![
            trade((1, 1), (2, 1), Side::Buy, 50, 1),
            cancelled((2, 1), Side::Buy, 2, CancelReason::Ioc),
        ],
    );
    v.assert_balance(2, "USD", bal(10_000 - 525, 0));
    v.assert_book(S, vec![], vec![]);
    // nothing to trade against: the whole IOC is cancelled
    v.expect(
        place(sell(1, 2, 50, 2).with_tif(Tif::Ioc)),
        vec![cancelled((1, 2), Side::Sell, 2, CancelReason::Ioc)],
    );
    v.assert_balance(1, "BTC", bal(900, 0));
}

#[test]
fn an_ioc_needs_the_full_hold_even_if_it_trades_less() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 1_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.rejects(
        place(buy(2, 1, 50, 2).with_tif(Tif::Ioc)),
        Reason::InsufficientFunds,
    );
}

#[test]
fn a_market_order_trades_through_levels_and_cancels_the_rest_as_market() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 50, 1)), vec![]);
    v.expect(place(buy(1, 2, 45, 1)), vec![]);
    v.expect(
        place(market(2, 1, Side::Sell, 3)),
        vec![
            trade((1, 1), (2, 1), Side::Sell, 50, 1),
            trade((1, 2), (2, 1), Side::Sell, 45, 1),
            cancelled((2, 1), Side::Sell, 1, CancelReason::Market),
        ],
    );
    // held 300 base, delivered 200, 100 back; proceeds 950 - 50
    v.assert_balance(2, "BTC", bal(800, 0));
    v.assert_balance(2, "USD", bal(900, 0));
}

#[test]
fn a_market_buy_with_a_protection_price_holds_and_stops_like_a_limit() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 1_100);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 52, 1)), vec![]);
    let protected = PlaceOrder {
        price: Some(51),
        ..market(2, 1, Side::Buy, 2)
    };
    // hold 2 * (510 + 25) = 1070
    v.expect(
        place(protected),
        vec![
            trade((1, 1), (2, 1), Side::Buy, 50, 1),
            cancelled((2, 1), Side::Buy, 1, CancelReason::Market),
        ],
    );
    v.assert_balance(2, "USD", bal(1_100 - 525, 0));
    let too_dear = PlaceOrder {
        price: Some(52),
        ..market(2, 2, Side::Buy, 2)
    };
    v.rejects(place(too_dear), Reason::InsufficientFunds);
}

#[test]
fn an_unpriced_market_buy_is_bounded_by_what_it_can_pay_at_each_level() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 2_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 60, 5)), vec![]);
    // at 50: 1 lot for 525, 1475 left; at 60 a lot costs 625: 2 lots, 225 left, then 0 lots
    v.expect(
        place(market(2, 1, Side::Buy, 10)),
        vec![
            trade((1, 1), (2, 1), Side::Buy, 50, 1),
            trade((1, 2), (2, 1), Side::Buy, 60, 2),
            cancelled((2, 1), Side::Buy, 7, CancelReason::Market),
        ],
    );
    v.assert_balance(2, "USD", bal(225, 0));
    v.assert_balance(2, "BTC", bal(300, 0));
    v.assert_book(S, vec![], vec![resting(1, 2, Side::Sell, 60, 3)]);
}

#[test]
fn an_unpriced_market_buy_without_money_is_ok_and_cancelled() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(
        place(market(2, 1, Side::Buy, 4)),
        vec![cancelled((2, 1), Side::Buy, 4, CancelReason::Market)],
    );
    v.expect(
        place(market(2, 1, Side::Buy, 4).with_tif(Tif::Fok)),
        vec![cancelled((2, 1), Side::Buy, 4, CancelReason::Fok)],
    );
}

#[test]
fn an_unpriced_market_buy_against_an_absurd_price_buys_nothing() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, i64::MAX);
    // a lot at this price costs more than 2^63 - 1: no one can pay for it
    v.expect(place(sell(1, 1, i64::MAX, 1)), vec![]);
    v.expect(
        place(market(2, 1, Side::Buy, 1)),
        vec![cancelled((2, 1), Side::Buy, 1, CancelReason::Market)],
    );
    v.expect(
        place(market(2, 2, Side::Buy, 1).with_tif(Tif::Fok)),
        vec![cancelled((2, 2), Side::Buy, 1, CancelReason::Fok)],
    );
    v.rejects(place(buy(2, 3, i64::MAX, 1)), Reason::Overflow);
    v.assert_balance(2, "USD", bal(i64::MAX, 0));
}

#[test]
fn an_unpriced_market_sell_stops_where_proceeds_would_be_negative() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 3, 1)), vec![]);
    // 2 * 10 = 20 < 25: a seller would owe money
    v.expect(place(buy(1, 2, 2, 1)), vec![]);
    v.expect(
        place(market(2, 1, Side::Sell, 3)),
        vec![
            trade((1, 1), (2, 1), Side::Sell, 3, 1),
            cancelled((2, 1), Side::Sell, 2, CancelReason::Market),
        ],
    );
    // proceeds 30 - 25
    v.assert_balance(2, "USD", bal(5, 0));
    v.assert_book(S, vec![resting(1, 2, Side::Buy, 2, 1)], vec![]);
}

// ----- fill-or-kill ---------------------------------------------------------------------------

#[test]
fn a_fok_that_can_fill_executes_in_full() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 51, 2)), vec![]);
    v.expect(
        place(buy(2, 1, 51, 3).with_tif(Tif::Fok)),
        vec![
            trade((1, 1), (2, 1), Side::Buy, 50, 1),
            trade((1, 2), (2, 1), Side::Buy, 51, 2),
        ],
    );
    v.assert_balance(2, "USD", bal(10_000 - 525 - 2 * 535, 0));
}

#[test]
fn a_fok_that_cannot_fill_changes_nothing_and_is_ok() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 52, 2)), vec![]);
    let hash = v.engine.state_hash();
    v.expect(
        place(buy(2, 1, 51, 2).with_tif(Tif::Fok)),
        vec![cancelled((2, 1), Side::Buy, 2, CancelReason::Fok)],
    );
    v.expect(
        place(market(2, 2, Side::Buy, 4).with_tif(Tif::Fok)),
        vec![cancelled((2, 2), Side::Buy, 4, CancelReason::Fok)],
    );
    assert_eq!(
        v.engine.state_hash(),
        hash,
        "engine: a killed FOK changed state"
    );
    v.assert_balance(2, "USD", bal(10_000, 0));
    v.assert_book(
        S,
        vec![],
        vec![
            resting(1, 1, Side::Sell, 50, 1),
            resting(1, 2, Side::Sell, 52, 2),
        ],
    );
}

#[test]
fn a_fok_is_rejected_before_its_walk_if_the_hold_does_not_fit() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 1_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.rejects(
        place(buy(2, 1, 50, 2).with_tif(Tif::Fok)),
        Reason::InsufficientFunds,
    );
}

#[test]
fn an_unpriced_market_fok_buy_counts_only_what_it_can_pay() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 2_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 60, 5)), vec![]);
    // it can pay for 1 + 2 lots
    v.expect(
        place(market(2, 1, Side::Buy, 4).with_tif(Tif::Fok)),
        vec![cancelled((2, 1), Side::Buy, 4, CancelReason::Fok)],
    );
    v.expect(
        place(market(2, 1, Side::Buy, 3).with_tif(Tif::Fok)),
        vec![
            trade((1, 1), (2, 1), Side::Buy, 50, 1),
            trade((1, 2), (2, 1), Side::Buy, 60, 2),
        ],
    );
    v.assert_balance(2, "USD", bal(225, 0));
}

#[test]
fn an_unpriced_market_fok_sell_counts_only_levels_with_positive_proceeds() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 3, 1)), vec![]);
    v.expect(place(buy(1, 2, 2, 5)), vec![]);
    v.expect(
        place(market(2, 1, Side::Sell, 2).with_tif(Tif::Fok)),
        vec![cancelled((2, 1), Side::Sell, 2, CancelReason::Fok)],
    );
    v.expect(
        place(market(2, 1, Side::Sell, 1).with_tif(Tif::Fok)),
        vec![trade((1, 1), (2, 1), Side::Sell, 3, 1)],
    );
}

/// Asks: user 1's at 50, then user 2's own at 51, then user 1's at 52; user 2 wants 2 lots.
fn fok_walk_venue() -> Venue {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 1_000, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(2, 1, 51, 1)), vec![]);
    v.expect(place(sell(1, 2, 52, 1)), vec![]);
    v
}

#[test]
fn a_fok_walk_stops_at_an_own_order_under_cancel_taker_and_cancel_both() {
    for stp in [Stp::CancelTaker, Stp::CancelBoth] {
        let mut v = fok_walk_venue();
        v.expect(
            place(buy(2, 2, 52, 2).with_tif(Tif::Fok).with_stp(stp)),
            vec![cancelled((2, 2), Side::Buy, 2, CancelReason::Fok)],
        );
        // the own order was not touched either
        v.assert_book(
            S,
            vec![],
            vec![
                resting(1, 1, Side::Sell, 50, 1),
                resting(2, 1, Side::Sell, 51, 1),
                resting(1, 2, Side::Sell, 52, 1),
            ],
        );
        // enough before the own order: it fills without meeting it
        v.expect(
            place(buy(2, 2, 52, 1).with_tif(Tif::Fok).with_stp(stp)),
            vec![trade((1, 1), (2, 2), Side::Buy, 50, 1)],
        );
    }
}

#[test]
fn a_fok_walk_skips_own_orders_under_cancel_maker() {
    let mut v = fok_walk_venue();
    v.expect(
        place(
            buy(2, 2, 52, 2)
                .with_tif(Tif::Fok)
                .with_stp(Stp::CancelMaker),
        ),
        vec![
            trade((1, 1), (2, 2), Side::Buy, 50, 1),
            cancelled((2, 1), Side::Sell, 1, CancelReason::Stp),
            trade((1, 2), (2, 2), Side::Buy, 52, 1),
        ],
    );
    v.assert_book(S, vec![], vec![]);
    // own sell's hold came back: 1000 - 100 + 100 + 200 bought
    v.assert_balance(2, "BTC", bal(1_200, 0));
}

#[test]
fn a_fok_walk_under_cancel_maker_does_not_count_own_liquidity() {
    let mut v = fok_walk_venue();
    v.expect(
        place(
            buy(2, 2, 52, 3)
                .with_tif(Tif::Fok)
                .with_stp(Stp::CancelMaker),
        ),
        vec![cancelled((2, 2), Side::Buy, 3, CancelReason::Fok)],
    );
    v.assert_book(
        S,
        vec![],
        vec![
            resting(1, 1, Side::Sell, 50, 1),
            resting(2, 1, Side::Sell, 51, 1),
            resting(1, 2, Side::Sell, 52, 1),
        ],
    );
}

// ----- self-trade prevention ------------------------------------------------------------------

/// Asks: user 1's 1 lot at 50, user 2's own 2 lots at 51, user 1's 1 lot at 52.
fn stp_venue() -> Venue {
    fok_walk_venue_with_own_qty(2)
}

fn fok_walk_venue_with_own_qty(own_qty: i64) -> Venue {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 1_000, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(2, 1, 51, own_qty)), vec![]);
    v.expect(place(sell(1, 2, 52, 1)), vec![]);
    v
}

#[test]
fn cancel_taker_cancels_the_incoming_remainder_and_keeps_the_resting_order() {
    let mut v = stp_venue();
    // a GTC remainder does not rest after an stp cancel
    v.expect(
        place(buy(2, 2, 52, 3)),
        vec![
            trade((1, 1), (2, 2), Side::Buy, 50, 1),
            cancelled((2, 2), Side::Buy, 2, CancelReason::Stp),
        ],
    );
    v.assert_book(
        S,
        vec![],
        vec![
            resting(2, 1, Side::Sell, 51, 2),
            resting(1, 2, Side::Sell, 52, 1),
        ],
    );
    v.assert_balance(2, "USD", bal(10_000 - 525, 0));
}

#[test]
fn cancel_maker_cancels_the_resting_order_and_matching_goes_on() {
    let mut v = stp_venue();
    v.expect(
        place(buy(2, 2, 52, 3).with_stp(Stp::CancelMaker)),
        vec![
            trade((1, 1), (2, 2), Side::Buy, 50, 1),
            cancelled((2, 1), Side::Sell, 2, CancelReason::Stp),
            trade((1, 2), (2, 2), Side::Buy, 52, 1),
        ],
    );
    // 1 lot rests at 52: hold 545
    v.assert_book(S, vec![resting(2, 2, Side::Buy, 52, 1)], vec![]);
    v.assert_balance(2, "USD", bal(10_000 - 525 - 545 - 545, 545));
    v.assert_balance(2, "BTC", bal(1_200, 0));
}

#[test]
fn cancel_both_reports_the_resting_cancellation_before_the_incoming_one() {
    let mut v = stp_venue();
    v.expect(
        place(buy(2, 2, 52, 3).with_stp(Stp::CancelBoth)),
        vec![
            trade((1, 1), (2, 2), Side::Buy, 50, 1),
            cancelled((2, 1), Side::Sell, 2, CancelReason::Stp),
            cancelled((2, 2), Side::Buy, 2, CancelReason::Stp),
        ],
    );
    v.assert_book(S, vec![], vec![resting(1, 2, Side::Sell, 52, 1)]);
    v.assert_balance(2, "BTC", bal(1_100, 0));
    v.assert_balance(2, "USD", bal(10_000 - 525, 0));
}

#[test]
fn stp_applies_to_market_and_ioc_orders_too() {
    let mut v = stp_venue();
    v.expect(
        place(market(2, 2, Side::Buy, 3)),
        vec![
            trade((1, 1), (2, 2), Side::Buy, 50, 1),
            cancelled((2, 2), Side::Buy, 2, CancelReason::Stp),
        ],
    );
    v.expect(
        place(
            buy(2, 3, 60, 3)
                .with_tif(Tif::Ioc)
                .with_stp(Stp::CancelMaker),
        ),
        vec![
            cancelled((2, 1), Side::Sell, 2, CancelReason::Stp),
            trade((1, 2), (2, 3), Side::Buy, 52, 1),
            cancelled((2, 3), Side::Buy, 2, CancelReason::Ioc),
        ],
    );
}

#[test]
fn an_order_that_does_not_reach_its_own_resting_order_is_not_affected() {
    let mut v = stp_venue();
    v.expect(
        place(buy(2, 2, 50, 2)),
        vec![trade((1, 1), (2, 2), Side::Buy, 50, 1)],
    );
    v.assert_book(
        S,
        vec![resting(2, 2, Side::Buy, 50, 1)],
        vec![
            resting(2, 1, Side::Sell, 51, 2),
            resting(1, 2, Side::Sell, 52, 1),
        ],
    );
}

/// docs/rules.md does not say whether an unpriced market buy's funds bound or self-trade
/// prevention comes first when the next resting order is the buyer's own. Rialto's engine (and
/// the model) decide STP first: an unpriced market order "crosses every level", so the own order
/// is its next match; the funds bound then limits how much it trades. (Reported for rules.md.)
#[test]
fn an_unpriced_market_buy_meets_its_own_order_before_its_funds_bound() {
    let mut v = stp_venue();
    // user 3 has no USD at all
    v.fund(3, 1_000, 0);
    v.expect(place(sell(3, 1, 49, 1)), vec![]);
    v.expect(
        place(market(3, 2, Side::Buy, 1)),
        vec![cancelled((3, 2), Side::Buy, 1, CancelReason::Stp)],
    );
    v.expect(
        place(market(3, 2, Side::Buy, 1).with_stp(Stp::CancelMaker)),
        vec![
            cancelled((3, 1), Side::Sell, 1, CancelReason::Stp),
            cancelled((3, 2), Side::Buy, 1, CancelReason::Market),
        ],
    );
}

#[test]
fn an_unpriced_market_sell_stops_at_the_fee_floor_before_meeting_its_own_order() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 10_000);
    v.fund(2, 0, 10_000);
    v.expect(place(buy(2, 1, 3, 1)), vec![]);
    // user 1's own bid at 2: 2 * 10 < 25, the sell never reaches it
    v.expect(place(buy(1, 1, 2, 1)), vec![]);
    v.expect(
        place(market(1, 2, Side::Sell, 2).with_stp(Stp::CancelBoth)),
        vec![
            trade((2, 1), (1, 2), Side::Sell, 3, 1),
            cancelled((1, 2), Side::Sell, 1, CancelReason::Market),
        ],
    );
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 2, 1)], vec![]);
}

#[test]
fn a_market_fok_with_a_protection_price_counts_only_levels_within_it() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(1, 2, 52, 1)), vec![]);
    let protected = |order, price| {
        place(PlaceOrder {
            price: Some(price),
            ..market(2, order, Side::Buy, 2).with_tif(Tif::Fok)
        })
    };
    v.expect(
        protected(1, 51),
        vec![cancelled((2, 1), Side::Buy, 2, CancelReason::Fok)],
    );
    v.assert_balance(2, "USD", bal(10_000, 0));
    v.expect(
        protected(1, 52),
        vec![
            trade((1, 1), (2, 1), Side::Buy, 50, 1),
            trade((1, 2), (2, 1), Side::Buy, 52, 1),
        ],
    );
    v.assert_balance(2, "USD", bal(10_000 - 525 - 545, 0));
}

// ----- move -----------------------------------------------------------------------------------

fn mv(user: UserId, order: OrderId, price: i64) -> Command {
    Command::Move { user, order, price }
}

#[test]
fn a_move_to_the_same_price_loses_time_priority() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.fund(2, 1_000, 0);
    v.fund(3, 0, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(sell(2, 1, 50, 1)), vec![]);
    v.expect(mv(1, 1, 50), vec![]);
    v.assert_book(
        S,
        vec![],
        vec![
            resting(2, 1, Side::Sell, 50, 1),
            resting(1, 1, Side::Sell, 50, 1),
        ],
    );
    v.expect(
        place(buy(3, 1, 50, 1)),
        vec![trade((2, 1), (3, 1), Side::Buy, 50, 1)],
    );
}

#[test]
fn a_moved_buy_holds_for_its_new_price() {
    let mut v = Venue::standard();
    v.fund(1, 0, 1_200);
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    v.assert_balance(1, "USD", bal(150, 1_050));
    v.expect(mv(1, 1, 40), vec![]);
    v.assert_balance(1, "USD", bal(350, 850));
    // 2 * (570 + 25) = 1190 <= 350 + 850
    v.expect(mv(1, 1, 57), vec![]);
    v.assert_balance(1, "USD", bal(10, 1_190));
    // 2 * 605 = 1210 > 1200: rejected, the order stays as it was
    v.rejects(mv(1, 1, 58), Reason::InsufficientFunds);
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 57, 2)], vec![]);
    v.assert_balance(1, "USD", bal(10, 1_190));
}

#[test]
fn a_rejected_move_keeps_time_priority() {
    let mut v = Venue::standard();
    v.fund(1, 0, 1_050);
    v.fund(2, 0, 10_000);
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    v.expect(place(buy(2, 1, 50, 2)), vec![]);
    v.rejects(mv(1, 1, 51), Reason::InsufficientFunds);
    v.assert_book(
        S,
        vec![
            resting(1, 1, Side::Buy, 50, 2),
            resting(2, 1, Side::Buy, 50, 2),
        ],
        vec![],
    );
}

#[test]
fn a_moved_order_trades_at_once_as_a_taker_and_the_rest_joins_the_new_level() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 40, 3)), vec![]);
    v.expect(place(sell(2, 1, 45, 1)), vec![]);
    v.expect(mv(1, 1, 46), vec![trade((2, 1), (1, 1), Side::Buy, 45, 1)]);
    // taker fee on the fill: paid 450 + 25; 2 lots rest at 46: held 2 * 485
    v.assert_balance(1, "USD", bal(10_000 - 475 - 970, 970));
    // the resting seller was the maker
    v.assert_balance(2, "USD", bal(450 - 5, 0));
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 46, 2)], vec![]);
    v.assert_fees("USD", 30);
}

#[test]
fn a_moved_order_keeps_its_stp_mode() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 10_000);
    v.expect(place(sell(1, 1, 50, 1)), vec![]);
    v.expect(place(buy(1, 2, 40, 2).with_stp(Stp::CancelMaker)), vec![]);
    v.expect(
        mv(1, 2, 50),
        vec![cancelled((1, 1), Side::Sell, 1, CancelReason::Stp)],
    );
    v.assert_book(S, vec![resting(1, 2, Side::Buy, 50, 2)], vec![]);
    v.expect(place(sell(1, 3, 60, 1)), vec![]);
    // default cancel_taker: the moved order itself goes
    v.expect(place(buy(1, 4, 40, 1)), vec![]);
    v.expect(
        mv(1, 4, 60),
        vec![cancelled((1, 4), Side::Buy, 1, CancelReason::Stp)],
    );
    v.assert_balance(1, "USD", bal(10_000 - 2 * 525, 2 * 525));
}

#[test]
fn move_rejections_come_in_rule_order() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 1_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 10, 1).with_post_only()), vec![]);
    v.expect(place(sell(1, 2, 50, 1).with_post_only()), vec![]);
    v.expect(place(sell(2, 1, 40, 1)), vec![]);
    // unknown_order: not live, or someone else's
    v.rejects(mv(1, 9, 0), Reason::UnknownOrder);
    v.rejects(mv(2, 2, 0), Reason::UnknownOrder);
    v.rejects(mv(9, 1, 0), Reason::UnknownOrder);
    // invalid_price before would_take
    v.rejects(mv(1, 1, 0), Reason::InvalidPrice);
    v.rejects(mv(1, 1, -1), Reason::InvalidPrice);
    v.rejects(mv(1, 2, 2), Reason::InvalidPrice);
    // would_take before overflow
    v.rejects(mv(1, 1, i64::MAX), Reason::WouldTake);
    v.rejects(mv(1, 1, 40), Reason::WouldTake);
    v.rejects(mv(1, 2, 10), Reason::WouldTake);
    // overflow before insufficient_funds
    v.expect(place(buy(1, 3, 1, 1)), vec![]);
    v.rejects(mv(1, 3, i64::MAX), Reason::Overflow);
    v.rejects(mv(1, 3, i64::MAX / 10), Reason::Overflow);
    v.rejects(mv(1, 3, (i64::MAX - 25) / 10), Reason::InsufficientFunds);
    // a sell's hold does not depend on its price: any valid price is fine
    v.expect(mv(2, 1, i64::MAX), vec![]);
    v.assert_book(
        S,
        vec![
            resting(1, 1, Side::Buy, 10, 1),
            resting(1, 3, Side::Buy, 1, 1),
        ],
        vec![
            resting(1, 2, Side::Sell, 50, 1),
            resting(2, 1, Side::Sell, i64::MAX, 1),
        ],
    );
}

#[test]
fn a_post_only_order_moved_without_crossing_stays_post_only() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 10, 1).with_post_only()), vec![]);
    v.expect(place(sell(2, 1, 40, 1)), vec![]);
    v.expect(mv(1, 1, 39), vec![]);
    v.rejects(mv(1, 1, 40), Reason::WouldTake);
}

// ----- reduce and cancel ----------------------------------------------------------------------

fn reduce(user: UserId, order: OrderId, qty: i64) -> Command {
    Command::Reduce { user, order, qty }
}

#[test]
fn reduce_keeps_time_priority_and_returns_the_hold() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 0, 10_000);
    v.fund(3, 1_000, 0);
    v.expect(place(buy(1, 1, 50, 3)), vec![]);
    v.expect(place(buy(2, 1, 50, 3)), vec![]);
    v.expect(
        reduce(1, 1, 2),
        vec![cancelled((1, 1), Side::Buy, 2, CancelReason::Reduce)],
    );
    v.assert_balance(1, "USD", bal(10_000 - 525, 525));
    v.expect(
        place(sell(3, 1, 50, 1)),
        vec![trade((1, 1), (3, 1), Side::Sell, 50, 1)],
    );
}

#[test]
fn reduce_to_zero_or_below_removes_the_order_and_reports_what_was_left() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.expect(place(sell(1, 1, 50, 3)), vec![]);
    v.expect(place(sell(1, 2, 50, 3)), vec![]);
    v.expect(
        reduce(1, 1, 3),
        vec![cancelled((1, 1), Side::Sell, 3, CancelReason::Reduce)],
    );
    v.expect(
        reduce(1, 2, i64::MAX),
        vec![cancelled((1, 2), Side::Sell, 3, CancelReason::Reduce)],
    );
    v.assert_book(S, vec![], vec![]);
    v.assert_balance(1, "BTC", bal(1_000, 0));
    v.rejects(reduce(1, 1, 1), Reason::UnknownOrder);
}

#[test]
fn reduce_rejects_unknown_order_before_invalid_qty() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.expect(place(sell(1, 1, 50, 3)), vec![]);
    v.rejects(reduce(2, 1, 0), Reason::UnknownOrder);
    v.rejects(reduce(1, 1, 0), Reason::InvalidQty);
    v.rejects(reduce(1, 1, -1), Reason::InvalidQty);
    v.rejects(reduce(1, 1, i64::MIN), Reason::InvalidQty);
}

#[test]
fn cancel_removes_the_rest_and_returns_the_hold() {
    let mut v = Venue::standard();
    v.fund(1, 0, 10_000);
    v.fund(2, 1_000, 0);
    v.expect(place(buy(1, 1, 50, 3)), vec![]);
    v.expect(
        place(sell(2, 1, 50, 1)),
        vec![trade((1, 1), (2, 1), Side::Sell, 50, 1)],
    );
    v.expect(
        Command::Cancel { user: 1, order: 1 },
        vec![cancelled((1, 1), Side::Buy, 2, CancelReason::User)],
    );
    // paid 500 + 5 for the one lot
    v.assert_balance(1, "USD", bal(10_000 - 505, 0));
    v.rejects(Command::Cancel { user: 1, order: 1 }, Reason::UnknownOrder);
}

#[test]
fn a_user_cannot_touch_another_users_order() {
    let mut v = Venue::standard();
    v.fund(1, 1_000, 0);
    v.expect(place(sell(1, 1, 50, 3)), vec![]);
    v.rejects(Command::Cancel { user: 2, order: 1 }, Reason::UnknownOrder);
    v.rejects(Command::Cancel { user: 9, order: 1 }, Reason::UnknownOrder);
    v.rejects(reduce(2, 1, 1), Reason::UnknownOrder);
    v.rejects(mv(2, 1, 51), Reason::UnknownOrder);
    v.assert_book(S, vec![], vec![resting(1, 1, Side::Sell, 50, 3)]);
}

// ----- mass cancel ----------------------------------------------------------------------------

fn mass_cancel(user: UserId, symbol: Option<SymbolId>) -> Command {
    Command::MassCancel { user, symbol }
}

/// `p` on another symbol than S.
fn on(symbol: SymbolId, p: PlaceOrder) -> Command {
    place(PlaceOrder { symbol, ..p })
}

/// A `user` cancellation of the whole rest of an order on `symbol`.
fn user_cancelled(
    symbol: SymbolId,
    (user, order): (UserId, OrderId),
    side: Side,
    qty: i64,
) -> OwnedEvent {
    OwnedEvent::Cancelled(Cancelled {
        symbol,
        user,
        order,
        side,
        qty,
        reason: CancelReason::User,
    })
}

/// The standard venue plus ZZ (id 1) on the same currencies and scales as BTC-USD.
fn mass_cancel_venue() -> Venue {
    let mut v = Venue::standard();
    v.setup(vec![Command::AddSymbol(Box::new(spec("ZZ", "BTC", "USD")))]);
    v.fund(1, 1_000, 10_000);
    v.fund(2, 1_000, 10_000);
    v
}

const ZZ: SymbolId = SymbolId(1);

#[test]
fn mass_cancel_cancels_every_order_of_the_user_with_its_remaining_qty_and_returns_the_holds() {
    let mut v = mass_cancel_venue();
    v.expect(place(buy(1, 1, 50, 2)), vec![]); // holds 2 * (500 + 25) = 1_050 USD
    v.expect(place(sell(1, 2, 60, 3)), vec![]); // holds 300 BTC
    v.expect(on(ZZ, buy(1, 3, 40, 1)), vec![]); // holds 425 USD
    v.expect(
        place(sell(2, 1, 50, 1)),
        vec![trade((1, 1), (2, 1), Side::Sell, 50, 1)],
    );
    // the fill paid 500 + 5 out of a 525 hold: 20 back, 525 still held for the last lot
    v.assert_balance(1, "USD", bal(10_000 - 1_050 - 425 + 20, 525 + 425));
    v.assert_balance(1, "BTC", bal(1_000 + 100 - 300, 300));
    v.expect(
        mass_cancel(1, None),
        vec![
            user_cancelled(S, (1, 1), Side::Buy, 1),
            user_cancelled(S, (1, 2), Side::Sell, 3),
            user_cancelled(ZZ, (1, 3), Side::Buy, 1),
        ],
    );
    v.assert_balance(1, "USD", bal(10_000 - 505, 0));
    v.assert_balance(1, "BTC", bal(1_000 + 100, 0));
    v.assert_book(S, vec![], vec![]);
    v.assert_book(ZZ, vec![], vec![]);
    assert_eq!(v.engine.resting_order_count(), 0);
    assert_eq!(v.engine.user_report(1).map(|r| r.orders), Some(vec![]));
    // the ids are free again
    v.expect(place(buy(1, 1, 50, 1)), vec![]);
    v.rejects(Command::Cancel { user: 1, order: 2 }, Reason::UnknownOrder);
}

#[test]
fn mass_cancel_of_one_symbol_leaves_the_users_other_symbols_alone() {
    let mut v = mass_cancel_venue();
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    v.expect(on(ZZ, buy(1, 2, 40, 1)), vec![]);
    v.expect(on(ZZ, sell(1, 3, 45, 2)), vec![]);
    v.expect(
        mass_cancel(1, Some(ZZ)),
        vec![
            user_cancelled(ZZ, (1, 2), Side::Buy, 1),
            user_cancelled(ZZ, (1, 3), Side::Sell, 2),
        ],
    );
    v.assert_book(ZZ, vec![], vec![]);
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 50, 2)], vec![]);
    v.assert_balance(1, "USD", bal(10_000 - 1_050, 1_050));
    v.assert_balance(1, "BTC", bal(1_000, 0));
    v.expect(
        mass_cancel(1, Some(S)),
        vec![user_cancelled(S, (1, 1), Side::Buy, 2)],
    );
    v.assert_balance(1, "USD", bal(10_000, 0));
}

#[test]
fn mass_cancel_rejects_unknown_user_before_unknown_symbol() {
    let mut v = mass_cancel_venue();
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    v.rejects(mass_cancel(9, None), Reason::UnknownUser);
    v.rejects(mass_cancel(9, Some(SymbolId::NONE)), Reason::UnknownUser);
    v.rejects(mass_cancel(9, Some(S)), Reason::UnknownUser);
    v.rejects(mass_cancel(1, Some(SymbolId::NONE)), Reason::UnknownSymbol);
    v.rejects(mass_cancel(1, Some(SymbolId(2))), Reason::UnknownSymbol);
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 50, 2)], vec![]);
}

#[test]
fn mass_cancel_with_nothing_to_cancel_is_ok_with_no_event_and_changes_nothing() {
    let mut v = mass_cancel_venue();
    v.expect(place(buy(2, 1, 50, 2)), vec![]);
    let hash = v.engine.state_hash();
    v.expect(mass_cancel(1, None), vec![]);
    v.expect(mass_cancel(3, Some(ZZ)), vec![]);
    assert_eq!(v.engine.state_hash(), hash, "engine: nothing to cancel");
    // idempotent: the second of two identical mass cancels finds nothing
    v.expect(
        mass_cancel(2, None),
        vec![user_cancelled(S, (2, 1), Side::Buy, 2)],
    );
    let hash = v.engine.state_hash();
    v.expect(mass_cancel(2, None), vec![]);
    assert_eq!(v.engine.state_hash(), hash, "engine: repeated mass cancel");
}

/// Determinism: the account's list of orders is newest first and reuses freed nodes, the
/// symbols' ids follow the order they were added; none of it may show in the events.
#[test]
fn mass_cancel_reports_by_symbol_name_then_order_id() {
    let mut v = Venue::standard();
    // ids 0, 1, 2 against names BTC-USD, ZZ, AA-USD: id order is not name order
    v.setup(vec![
        Command::AddSymbol(Box::new(spec("ZZ", "BTC", "USD"))),
        Command::AddSymbol(Box::new(spec("AA-USD", "BTC", "USD"))),
    ]);
    let aa = SymbolId(2);
    v.fund(1, 10_000, 100_000);
    v.expect(place(buy(1, 7, 40, 1)), vec![]);
    v.expect(on(ZZ, sell(1, 1, 60, 1)), vec![]);
    v.expect(on(aa, buy(1, 5, 41, 1)), vec![]);
    v.expect(place(buy(1, 100, 40, 1)), vec![]);
    v.expect(place(sell(1, -2, 61, 2)), vec![]);
    // frees a node in the middle of the account's list, which the next order takes
    v.expect(
        Command::Cancel {
            user: 1,
            order: 100,
        },
        vec![cancelled((1, 100), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(place(buy(1, 3, 39, 1)), vec![]);
    v.expect(on(aa, sell(1, 2, 70, 3)), vec![]);
    v.expect(on(ZZ, buy(1, i64::MIN, 30, 1)), vec![]);
    v.expect(
        mass_cancel(1, None),
        vec![
            user_cancelled(aa, (1, 2), Side::Sell, 3),
            user_cancelled(aa, (1, 5), Side::Buy, 1),
            user_cancelled(S, (1, -2), Side::Sell, 2),
            user_cancelled(S, (1, 3), Side::Buy, 1),
            user_cancelled(S, (1, 7), Side::Buy, 1),
            user_cancelled(ZZ, (1, i64::MIN), Side::Buy, 1),
            user_cancelled(ZZ, (1, 1), Side::Sell, 1),
        ],
    );
    v.assert_balance(1, "USD", bal(100_000, 0));
    v.assert_balance(1, "BTC", bal(10_000, 0));
}

#[test]
fn mass_cancel_leaves_other_users_orders_and_their_priority_and_updates_the_levels() {
    let mut v = mass_cancel_venue();
    v.fund(3, 1_000, 0);
    v.expect(place(buy(1, 1, 50, 2)), vec![]);
    v.expect(place(buy(2, 1, 50, 3)), vec![]);
    v.expect(place(buy(1, 2, 50, 4)), vec![]);
    v.expect(place(buy(1, 3, 48, 1)), vec![]);
    v.expect(place(sell(2, 2, 60, 1)), vec![]);
    v.expect(place(sell(1, 4, 60, 4)), vec![]);
    v.expect(place(sell(1, 5, 62, 1)), vec![]);
    v.expect(on(ZZ, buy(2, 3, 50, 1)), vec![]);
    let book = |bids: Vec<Level>, asks: Vec<Level>| OwnedEvent::Book {
        symbol: S,
        bids,
        asks,
    };
    let level = |price, qty| Level { price, qty };
    let depth = Command::Book {
        symbol: S,
        depth: 10,
    };
    v.expect(
        depth.clone(),
        vec![book(
            vec![level(50, 9), level(48, 1)],
            vec![level(60, 5), level(62, 1)],
        )],
    );
    v.expect(
        mass_cancel(1, None),
        vec![
            user_cancelled(S, (1, 1), Side::Buy, 2),
            user_cancelled(S, (1, 2), Side::Buy, 4),
            user_cancelled(S, (1, 3), Side::Buy, 1),
            user_cancelled(S, (1, 4), Side::Sell, 4),
            user_cancelled(S, (1, 5), Side::Sell, 1),
        ],
    );
    v.expect(depth, vec![book(vec![level(50, 3)], vec![level(60, 1)])]);
    v.assert_book(
        S,
        vec![resting(2, 1, Side::Buy, 50, 3)],
        vec![resting(2, 2, Side::Sell, 60, 1)],
    );
    v.assert_book(ZZ, vec![resting(2, 3, Side::Buy, 50, 1)], vec![]);
    v.assert_balance(2, "USD", bal(10_000 - 1_575 - 525, 1_575 + 525));
    v.assert_balance(2, "BTC", bal(1_000 - 100, 100));
    // user 2's orders still trade where they rest
    v.expect(
        place(sell(3, 1, 50, 1)),
        vec![trade((2, 1), (3, 1), Side::Sell, 50, 1)],
    );
}

// ----- queries --------------------------------------------------------------------------------

#[test]
fn book_reports_levels_best_first_up_to_depth() {
    let mut v = Venue::standard();
    v.fund(1, 10_000, 100_000);
    v.fund(2, 10_000, 100_000);
    v.expect(place(buy(1, 1, 40, 1)), vec![]);
    v.expect(place(buy(2, 1, 40, 2)), vec![]);
    v.expect(place(buy(1, 2, 42, 5)), vec![]);
    v.expect(place(buy(1, 3, 30, 1)), vec![]);
    v.expect(place(sell(1, 4, 45, 1)), vec![]);
    v.expect(place(sell(2, 2, 44, 4)), vec![]);
    let level = |price, qty| Level { price, qty };
    v.expect(
        Command::Book {
            symbol: S,
            depth: 2,
        },
        vec![OwnedEvent::Book {
            symbol: S,
            bids: vec![level(42, 5), level(40, 3)],
            asks: vec![level(44, 4), level(45, 1)],
        }],
    );
    v.expect(
        Command::Book {
            symbol: S,
            depth: i64::MAX,
        },
        vec![OwnedEvent::Book {
            symbol: S,
            bids: vec![level(42, 5), level(40, 3), level(30, 1)],
            asks: vec![level(44, 4), level(45, 1)],
        }],
    );
}

#[test]
fn book_rejects_unknown_symbol_before_invalid_depth() {
    let mut v = Venue::standard();
    v.rejects(
        Command::Book {
            symbol: SymbolId(1),
            depth: 0,
        },
        Reason::UnknownSymbol,
    );
    v.rejects(
        Command::Book {
            symbol: S,
            depth: 0,
        },
        Reason::InvalidQty,
    );
    v.rejects(
        Command::Book {
            symbol: S,
            depth: -1,
        },
        Reason::InvalidQty,
    );
}

#[test]
fn user_report_lists_non_zero_balances_by_name_and_orders_by_symbol_then_id() {
    let mut v = Venue::standard();
    v.setup(vec![Command::AddSymbol(Box::new(spec(
        "B-USDT", "B", "USDT",
    )))]);
    v.fund(1, 1_000, 10_000);
    v.expect(deposit(1, "USDT", 10_000, 1), vec![]);
    v.expect(deposit(1, "B", 500, 2), vec![]);
    v.expect(deposit(1, "ZZ", 1, 3), vec![]);
    v.expect(deposit(1, "ZZ", -1, 4), vec![]);
    v.expect(place(buy(1, 9, 40, 1)), vec![]);
    v.expect(place(buy(1, -3, 41, 1)), vec![]);
    v.expect(
        place(PlaceOrder {
            symbol: SymbolId(1),
            ..sell(1, 5, 50, 2)
        }),
        vec![],
    );
    let open = |symbol: &str, order, side, price, remaining| OpenOrder {
        symbol: name(symbol),
        order,
        side,
        order_type: OrderType::Limit,
        tif: Tif::Gtc,
        price,
        stop_price: 0,
        remaining,
        shown: remaining,
        filled: 0,
        expire_ts: 0,
    };
    let report = UserReport {
        user: 1,
        suspended: false,
        balances: vec![
            (name("B"), bal(300, 200)),
            (name("BTC"), bal(1_000, 0)),
            (name("USD"), bal(10_000 - 425 - 435, 860)),
            (name("USDT"), bal(10_000, 0)),
        ],
        orders: vec![
            open("B-USDT", 5, Side::Sell, 50, 2),
            open("BTC-USD", -3, Side::Buy, 41, 1),
            open("BTC-USD", 9, Side::Buy, 40, 1),
        ],
        positions: Vec::new(),
        margins: Vec::new(),
    };
    v.expect(
        Command::UserReport { user: 1 },
        vec![OwnedEvent::UserReport(report.clone())],
    );
    assert_eq!(v.engine.user_report(1), Some(report));
    v.expect(
        Command::UserReport { user: 2 },
        vec![OwnedEvent::UserReport(UserReport {
            user: 2,
            suspended: false,
            balances: vec![],
            orders: vec![],
            positions: Vec::new(),
            margins: Vec::new(),
        })],
    );
    v.rejects(Command::UserReport { user: 9 }, Reason::UnknownUser);
    assert_eq!(v.engine.user_report(9), None);
}

#[test]
fn venue_report_totals_every_known_currency_with_fees() {
    let mut v = Venue::standard();
    v.setup(vec![Command::AddSymbol(Box::new(spec(
        "ETH-USDT", "ETH", "USDT",
    )))]);
    v.fund(1, 1_000, 0);
    v.fund(2, 0, 10_000);
    v.expect(deposit(2, "USD", -1_000, 1), vec![]);
    v.expect(place(sell(1, 1, 50, 2)), vec![]);
    v.expect(
        place(buy(2, 1, 50, 1)),
        vec![trade((1, 1), (2, 1), Side::Buy, 50, 1)],
    );
    let totals = |currency: &str, deposits, withdrawals, available, held, fees| CurrencyTotals {
        currency: name(currency),
        deposits,
        withdrawals,
        available,
        held,
        fees,
        insurance: 0,
        position_cost: 0,
    };
    v.expect(
        Command::VenueReport,
        vec![OwnedEvent::VenueReport(vec![
            totals("BTC", 1_000, 0, 900, 100, 0),
            totals("ETH", 0, 0, 0, 0, 0),
            totals("USD", 10_000, 1_000, 9_000 - 30, 0, 30),
            totals("USDT", 0, 0, 0, 0, 0),
        ])],
    );
}

#[test]
fn reports_sort_names_as_text_not_by_length() {
    let mut v = Venue::empty();
    v.setup(vec![
        Command::AddSymbol(Box::new(spec("ZZ", "BTC", "USD"))),
        Command::AddSymbol(Box::new(spec("BTC-EURO", "BTC", "EURO"))),
        Command::AddUser { user: 1 },
    ]);
    v.expect(deposit(1, "USD", 1_000, 1), vec![]);
    v.expect(deposit(1, "EURO", 1_000, 2), vec![]);
    v.expect(place(buy(1, 1, 1, 1)), vec![]);
    v.expect(
        place(PlaceOrder {
            symbol: SymbolId(1),
            ..buy(1, 2, 1, 1)
        }),
        vec![],
    );
    let zero = |currency: &str| CurrencyTotals {
        currency: name(currency),
        deposits: 0,
        withdrawals: 0,
        available: 0,
        held: 0,
        fees: 0,
        insurance: 0,
        position_cost: 0,
    };
    v.expect(
        Command::VenueReport,
        vec![OwnedEvent::VenueReport(vec![
            zero("BTC"),
            CurrencyTotals {
                deposits: 1_000,
                available: 965,
                held: 35,
                ..zero("EURO")
            },
            CurrencyTotals {
                deposits: 1_000,
                available: 965,
                held: 35,
                ..zero("USD")
            },
        ])],
    );
    let open = |symbol: &str, order| OpenOrder {
        symbol: name(symbol),
        order,
        side: Side::Buy,
        order_type: OrderType::Limit,
        tif: Tif::Gtc,
        price: 1,
        stop_price: 0,
        remaining: 1,
        shown: 1,
        filled: 0,
        expire_ts: 0,
    };
    v.expect(
        Command::UserReport { user: 1 },
        vec![OwnedEvent::UserReport(UserReport {
            user: 1,
            suspended: false,
            balances: vec![(name("EURO"), bal(965, 35)), (name("USD"), bal(965, 35))],
            orders: vec![open("BTC-EURO", 2), open("ZZ", 1)],
            positions: Vec::new(),
            margins: Vec::new(),
        })],
    );
    let symbols: Vec<String> = v
        .engine
        .symbols_by_name()
        .iter()
        .map(|(_, spec)| spec.symbol.as_str().to_string())
        .collect();
    assert_eq!(symbols, ["BTC-EURO", "ZZ"], "engine: symbols_by_name");
}

// ----- part 2: time ---------------------------------------------------------------------------

#[test]
fn the_clock_takes_the_largest_time_and_never_goes_back() {
    let mut v = Venue::standard();
    v.assert_now(0);
    // Example T1: a tick at 500, then one at 300 leaves the clock at 500.
    v.expect_at(500, Command::Tick, vec![]);
    v.assert_now(500);
    v.expect_at(300, Command::Tick, vec![]);
    v.assert_now(500);
    // Any command may carry a time, whatever its result; one without leaves the clock alone.
    v.expect(Command::Tick, vec![]);
    v.assert_now(500);
    v.expect_at(700, Command::AddUser { user: 4 }, vec![]);
    v.assert_now(700);
    v.check_at(
        Some(900),
        Command::Cancel { user: 1, order: 5 },
        Err(Reason::UnknownOrder),
        vec![],
    );
    v.assert_now(900);
    v.check_at(
        Some(i64::MIN),
        Command::AddUser { user: 4 },
        Err(Reason::DuplicateUser),
        vec![],
    );
    v.assert_now(900);
}

#[test]
fn the_clock_is_part_of_the_state_and_its_snapshot() {
    let mut v = Venue::standard();
    let at_zero = v.engine.state_hash();
    v.expect_at(1_000, Command::Tick, vec![]);
    assert_ne!(v.engine.state_hash(), at_zero, "the clock is in the hash");
    let restored =
        Engine::decode_snapshot(&v.engine.encode_snapshot(), EngineConfig::default()).unwrap();
    assert_eq!(restored.now(), 1_000);
    assert_eq!(restored.state_hash(), v.engine.state_hash());
    // A snapshot of the format before the clock is refused, saying why (the journal has it).
    let mut old = v.engine.encode_snapshot();
    old[8..12].copy_from_slice(&1u32.to_le_bytes());
    let refused = Engine::decode_snapshot(&old, EngineConfig::default())
        .err()
        .expect("a version 1 snapshot is refused");
    assert!(refused.0.contains("version 1"), "{refused}");
    assert!(refused.0.contains("journal"), "{refused}");
}

// ----- part 2: amend --------------------------------------------------------------------------

/// The part-2 examples' venue: symbol X (BTC/USD, both scales 1, no fees) as `S`, and users 1
/// to 4 with 100000 USD and 100 BTC each.
fn example_venue() -> Venue {
    let mut v = Venue::empty();
    let x = SymbolSpec {
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        ..spec("X", "BTC", "USD")
    };
    v.setup(vec![Command::AddSymbol(Box::new(x))]);
    for user in 1..=4 {
        v.setup(vec![
            Command::AddUser { user },
            deposit(user, "USD", 100_000, user * 10),
            deposit(user, "BTC", 100, user * 10 + 1),
        ]);
    }
    v
}

/// A fill on the example venue (no fees).
fn fill(
    maker: (UserId, OrderId),
    taker: (UserId, OrderId),
    side: Side,
    price: i64,
    qty: i64,
) -> OwnedEvent {
    OwnedEvent::Trade(Trade {
        maker_fee: 0,
        taker_fee: 0,
        ..match trade(maker, taker, side, price, qty) {
            OwnedEvent::Trade(t) => t,
            _ => unreachable!(),
        }
    })
}

fn amended(
    (user, order): (UserId, OrderId),
    side: Side,
    price: i64,
    qty: i64,
    priority: Priority,
) -> OwnedEvent {
    OwnedEvent::Amended(Amended {
        symbol: S,
        user,
        order,
        side,
        price,
        stop_price: 0,
        qty,
        priority,
    })
}

fn amend(user: UserId, order: OrderId) -> AmendOrder {
    AmendOrder::new(user, order)
}

impl Venue {
    /// What a live order has filled, the same in both.
    fn assert_filled(&self, user: UserId, order: OrderId, filled: i64) {
        let of = |live: Vec<LiveOrder>| {
            live.iter()
                .find(|o| (o.user, o.order) == (user, order))
                .map(|o| o.filled)
        };
        assert_eq!(
            of(self.model.live_order_details()),
            Some(filled),
            "model: filled"
        );
        assert_eq!(
            of(self.engine.live_orders()),
            Some(filled),
            "engine: filled"
        );
    }
}

#[test]
fn amend_examples_a1_and_a2() {
    let mut v = example_venue();
    v.expect(place(buy(1, 1, 100, 10)), vec![]);
    v.expect(place(buy(2, 1, 100, 5)), vec![]);
    v.expect(
        place(market(3, 1, Side::Sell, 4)),
        vec![fill((1, 1), (3, 1), Side::Sell, 100, 4)],
    );
    v.assert_filled(1, 1, 4);
    // A new total of 8 leaves 8 - 4 filled = 4: fewer, same price, so it keeps its place.
    v.expect(
        Command::Amend(amend(1, 1).with_qty(8)),
        vec![amended((1, 1), Side::Buy, 100, 4, Priority::Kept)],
    );
    v.assert_balance(1, "USD", bal(100_000 - 400 - 400, 400));
    v.assert_book(
        S,
        vec![
            resting(1, 1, Side::Buy, 100, 4),
            resting(2, 1, Side::Buy, 100, 5),
        ],
        vec![],
    );
    // A total at or below what has filled ends the order, as a reduce.
    v.expect(
        Command::Amend(amend(1, 1).with_qty(3)),
        vec![cancelled((1, 1), Side::Buy, 4, CancelReason::Reduce)],
    );
    v.assert_balance(1, "USD", bal(99_600, 0));

    // A2: a new price that crosses trades at once as a taker; the rest rests at the back.
    v.expect(place(buy(1, 2, 99, 5)), vec![]);
    v.expect(place(sell(2, 2, 101, 3)), vec![]);
    v.expect(
        Command::Amend(amend(1, 2).with_price(101)),
        vec![
            amended((1, 2), Side::Buy, 101, 5, Priority::Lost),
            fill((2, 2), (1, 2), Side::Buy, 101, 3),
        ],
    );
    v.assert_filled(1, 2, 3);
    v.rejects(
        Command::Amend(amend(1, 2).with_qty(100_000)),
        Reason::InsufficientFunds,
    );
    v.assert_book(
        S,
        vec![
            resting(1, 2, Side::Buy, 101, 2),
            resting(2, 1, Side::Buy, 100, 5),
        ],
        vec![],
    );
}

#[test]
fn an_amend_keeps_its_place_only_at_the_same_price_without_growing() {
    let mut v = example_venue();
    v.expect(place(sell(1, 1, 105, 5)), vec![]);
    v.expect(place(sell(2, 1, 105, 5)), vec![]);
    v.expect(place(sell(3, 1, 105, 5)), vec![]);
    // Smaller: kept, and the sell's hold of base shrinks with it.
    v.expect(
        Command::Amend(amend(1, 1).with_qty(3)),
        vec![amended((1, 1), Side::Sell, 105, 3, Priority::Kept)],
    );
    v.assert_balance(1, "BTC", bal(97, 3));
    // The same total and price: kept, nothing moves.
    v.expect(
        Command::Amend(amend(1, 1).with_qty(3).with_price(105)),
        vec![amended((1, 1), Side::Sell, 105, 3, Priority::Kept)],
    );
    // Larger: lost, to the back of the level.
    v.expect(
        Command::Amend(amend(2, 1).with_qty(6)),
        vec![amended((2, 1), Side::Sell, 105, 6, Priority::Lost)],
    );
    v.assert_balance(2, "BTC", bal(94, 6));
    v.assert_book(
        S,
        vec![],
        vec![
            resting(1, 1, Side::Sell, 105, 3),
            resting(3, 1, Side::Sell, 105, 5),
            resting(2, 1, Side::Sell, 105, 6),
        ],
    );
    // A new price, even smaller: lost, at the back of the new level.
    v.expect(place(sell(4, 1, 104, 1)), vec![]);
    v.expect(
        Command::Amend(amend(1, 1).with_price(104).with_qty(2)),
        vec![amended((1, 1), Side::Sell, 104, 2, Priority::Lost)],
    );
    v.assert_book(
        S,
        vec![],
        vec![
            resting(4, 1, Side::Sell, 104, 1),
            resting(1, 1, Side::Sell, 104, 2),
            resting(3, 1, Side::Sell, 105, 5),
            resting(2, 1, Side::Sell, 105, 6),
        ],
    );
    v.assert_balance(1, "BTC", bal(98, 2));
}

#[test]
fn filled_survives_move_and_amend_and_reduce_lowers_the_total() {
    let mut v = example_venue();
    v.expect(place(buy(1, 1, 100, 10)), vec![]);
    v.expect(
        place(sell(2, 1, 100, 3)),
        vec![fill((1, 1), (2, 1), Side::Sell, 100, 3)],
    );
    v.expect(
        Command::Move {
            user: 1,
            order: 1,
            price: 98,
        },
        vec![],
    );
    v.assert_filled(1, 1, 3);
    // Total 10, filled 3: a reduce of 2 makes the total 8.
    v.expect(
        Command::Reduce {
            user: 1,
            order: 1,
            qty: 2,
        },
        vec![cancelled((1, 1), Side::Buy, 2, CancelReason::Reduce)],
    );
    // So a new total of 8 changes nothing, and of 4 leaves 1.
    v.expect(
        Command::Amend(amend(1, 1).with_qty(8)),
        vec![amended((1, 1), Side::Buy, 98, 5, Priority::Kept)],
    );
    v.expect(
        Command::Amend(amend(1, 1).with_qty(4)),
        vec![amended((1, 1), Side::Buy, 98, 1, Priority::Kept)],
    );
    v.assert_filled(1, 1, 3);
    v.assert_balance(1, "USD", bal(100_000 - 300 - 98, 98));
}

#[test]
fn amend_rejections_come_in_their_order_and_change_nothing() {
    let mut v = example_venue();
    v.expect(place(buy(1, 1, 100, 2)), vec![]);
    v.expect(place(sell(2, 1, 105, 2)), vec![]);
    v.expect(place(buy(1, 2, 90, 2).with_post_only()), vec![]);
    // Each line would also fail every later check.
    let huge = i64::MAX / 2;
    v.rejects(Command::Amend(amend(1, 9)), Reason::UnknownOrder);
    v.rejects(
        Command::Amend(amend(2, 2).with_qty(0)),
        Reason::UnknownOrder,
    );
    v.rejects(Command::Amend(amend(1, 1)), Reason::InvalidOrder);
    v.rejects(
        Command::Amend(amend(1, 1).with_stop_price(99).with_qty(0)),
        Reason::InvalidOrder,
    );
    v.rejects(
        Command::Amend(amend(1, 1).with_qty(0).with_price(-1)),
        Reason::InvalidQty,
    );
    v.rejects(Command::Amend(amend(1, 1).with_qty(-5)), Reason::InvalidQty);
    // An invalid price is refused even with a total that would end the order.
    v.rejects(
        Command::Amend(amend(1, 1).with_price(0).with_qty(1)),
        Reason::InvalidPrice,
    );
    v.rejects(
        Command::Amend(amend(1, 2).with_price(105).with_qty(huge)),
        Reason::WouldTake,
    );
    v.rejects(
        Command::Amend(amend(1, 1).with_price(i64::MAX)),
        Reason::Overflow,
    );
    v.rejects(Command::Amend(amend(1, 1).with_qty(huge)), Reason::Overflow);
    v.rejects(
        Command::Amend(amend(1, 1).with_qty(2_000)),
        Reason::InsufficientFunds,
    );
    v.rejects(
        Command::Amend(amend(2, 1).with_qty(101)),
        Reason::InsufficientFunds,
    );
    // A post-only order that does not cross may move; a user touches only its own orders.
    v.expect(
        Command::Amend(amend(1, 2).with_price(104)),
        vec![amended((1, 2), Side::Buy, 104, 2, Priority::Lost)],
    );
    v.rejects(
        Command::Amend(amend(2, 2).with_qty(1)),
        Reason::UnknownOrder,
    );
    v.assert_book(
        S,
        vec![
            resting(1, 2, Side::Buy, 104, 2),
            resting(1, 1, Side::Buy, 100, 2),
        ],
        vec![resting(2, 1, Side::Sell, 105, 2)],
    );
}

// ----- part 2: the order-id window ------------------------------------------------------------

impl Venue {
    fn assert_recent_ids(&self, ids: Vec<(UserId, OrderId, i64)>) {
        assert_eq!(self.model.recent_order_ids(), ids, "model: recent ids");
        assert_eq!(self.engine.recent_order_ids(), ids, "engine: recent ids");
    }

    /// As [`Self::rejects`], for a command that carries the time `ts` (which may move the
    /// clock: that alone may change the state).
    fn rejects_at(&mut self, ts: i64, cmd: Command, reason: Reason) {
        self.expect_at(ts, Command::Tick, vec![]);
        let hash = self.engine.state_hash();
        self.check_at(Some(ts), cmd.clone(), Err(reason), Vec::new());
        assert_eq!(
            self.engine.state_hash(),
            hash,
            "engine: rejected {cmd:?} changed the state"
        );
    }
}

#[test]
fn an_id_that_ended_stays_taken_for_the_window() {
    let mut v = example_venue();
    v.rejects(Command::SetOrderIdWindow { window: -1 }, Reason::InvalidQty);
    v.expect(Command::SetOrderIdWindow { window: 1_000 }, vec![]);
    v.expect_at(100, place(buy(1, 7, 100, 2)), vec![]);
    v.expect(
        Command::Cancel { user: 1, order: 7 },
        vec![cancelled((1, 7), Side::Buy, 2, CancelReason::User)],
    );
    v.assert_recent_ids(vec![(1, 7, 100)]);
    // The resend inside the window is refused; another user's order 7 is not.
    v.rejects_at(1_099, place(buy(1, 7, 100, 2)), Reason::DuplicateOrderId);
    v.expect(place(buy(2, 7, 100, 2)), vec![]);
    // At 100 + 1000 the id is forgotten, and free again.
    v.expect_at(1_100, place(buy(1, 7, 100, 2)), vec![]);
    v.assert_recent_ids(vec![]);
    // An order filled in full ends too (at the time of the fill), a killed fill-or-kill too; a
    // rejected one never was an order.
    v.expect_at(
        1_200,
        place(sell(3, 1, 100, 4)),
        vec![
            fill((2, 7), (3, 1), Side::Sell, 100, 2),
            fill((1, 7), (3, 1), Side::Sell, 100, 2),
        ],
    );
    v.expect(
        place(buy(4, 1, 100, 1).with_tif(Tif::Fok)),
        vec![cancelled((4, 1), Side::Buy, 1, CancelReason::Fok)],
    );
    v.rejects(place(buy(4, 2, 100, 0)), Reason::InvalidQty);
    v.assert_recent_ids(vec![
        (1, 7, 1_200),
        (2, 7, 1_200),
        (3, 1, 1_200),
        (4, 1, 1_200),
    ]);
    v.expect(place(buy(4, 2, 100, 1)), vec![]);
    // A smaller window forgets for good what it no longer covers; a window of 0 keeps nothing.
    v.expect_at(1_700, Command::SetOrderIdWindow { window: 500 }, vec![]);
    v.assert_recent_ids(vec![]);
    v.expect(Command::SetOrderIdWindow { window: 0 }, vec![]);
    v.expect(
        Command::Cancel { user: 4, order: 2 },
        vec![cancelled((4, 2), Side::Buy, 1, CancelReason::User)],
    );
    v.assert_recent_ids(vec![]);
    v.expect(Command::SetOrderIdWindow { window: 1_000 }, vec![]);
    v.expect(place(buy(4, 2, 100, 1)), vec![]);
    // The window and the ids are state: in the hash and the snapshot.
    v.expect(
        Command::Reduce {
            user: 4,
            order: 2,
            qty: 1,
        },
        vec![cancelled((4, 2), Side::Buy, 1, CancelReason::Reduce)],
    );
    v.assert_recent_ids(vec![(4, 2, 1_700)]);
    let restored =
        Engine::decode_snapshot(&v.engine.encode_snapshot(), EngineConfig::default()).unwrap();
    assert_eq!(restored.recent_order_ids(), vec![(4, 2, 1_700)]);
    assert_eq!(restored.order_id_window(), 1_000);
    assert_eq!(restored.state_hash(), v.engine.state_hash());
}

// ----- stop and stop-limit orders (part 2) -----------------------------------------------------

/// A `stop` (market once triggered) on S, with its protection price if any.
fn stop(
    user: UserId,
    order: OrderId,
    side: Side,
    stop_price: i64,
    price: Option<i64>,
    qty: i64,
) -> PlaceOrder {
    PlaceOrder {
        price,
        tif: Some(Tif::Ioc),
        ..market(user, order, side, qty)
    }
    .with_order_type(OrderType::Stop)
    .with_stop_price(stop_price)
}

/// A `stop_limit` gtc on S.
fn stop_limit(
    user: UserId,
    order: OrderId,
    side: Side,
    stop_price: i64,
    price: i64,
    qty: i64,
) -> PlaceOrder {
    PlaceOrder::limit(user, order, S, side, price, qty)
        .with_order_type(OrderType::StopLimit)
        .with_stop_price(stop_price)
}

fn triggered((user, order): (UserId, OrderId), side: Side, stop_price: i64) -> OwnedEvent {
    OwnedEvent::Triggered(rialto_core::Triggered {
        symbol: S,
        user,
        order,
        side,
        stop_price,
    })
}

fn pending(
    (user, order): (UserId, OrderId),
    side: Side,
    stop_price: i64,
    price: i64,
    remaining: i64,
) -> rialto_core::PendingStop {
    rialto_core::PendingStop {
        user,
        order,
        side,
        stop_price,
        price,
        remaining,
    }
}

impl Venue {
    /// The pending stops of S in trigger order, the same in both.
    fn assert_stops(&self, expected: Vec<rialto_core::PendingStop>) {
        assert_eq!(self.model.pending_stops(S), expected, "model: stops");
        let mut stops = Vec::new();
        self.engine.pending_stops(S, &mut stops);
        assert_eq!(stops, expected, "engine: stops");
    }

    /// One trade of 1 lot at `price` between users 3 (seller) and 4 (buyer), ids 900 and up.
    fn print(&mut self, price: i64) {
        let id = 900 + self.seq as i64;
        self.expect(place(sell(3, id, price, 1)), vec![]);
        self.expect(
            place(buy(4, id, price, 1)),
            vec![fill((3, id), (4, id), Side::Buy, price, 1)],
        );
    }
}

#[test]
fn stop_example_s1_triggers_on_a_trade_at_its_stop_price() {
    let mut v = example_venue();
    v.print(100);
    v.expect(place(stop_limit(3, 1, Side::Buy, 105, 106, 2)), vec![]);
    v.assert_balance(3, "USD", bal(100_000 + 100 - 212, 212));
    v.assert_book(S, vec![], vec![]);
    v.expect(place(sell(2, 2, 105, 1)), vec![]);
    v.expect(place(sell(2, 3, 106, 5)), vec![]);
    v.expect(
        place(buy(1, 2, 105, 1)),
        vec![
            fill((2, 2), (1, 2), Side::Buy, 105, 1),
            triggered((3, 1), Side::Buy, 105),
            fill((2, 3), (3, 1), Side::Buy, 106, 2),
        ],
    );
    // It paid 212 out of its hold: nothing is left held.
    v.assert_balance(3, "USD", bal(100_000 + 100 - 212, 0));
    v.assert_stops(vec![]);
    v.rejects(
        place(stop(3, 2, Side::Sell, 107, None, 1)),
        Reason::WouldTrigger,
    );
    v.rejects(
        place(stop(3, 3, Side::Buy, 120, None, 1)),
        Reason::InvalidPrice,
    );
}

#[test]
fn stop_example_s2_cascades_round_by_round() {
    let mut v = example_venue();
    v.print(100);
    v.expect(place(buy(1, 11, 99, 1)), vec![]);
    v.expect(place(buy(1, 12, 97, 2)), vec![]);
    v.expect(place(buy(1, 13, 95, 5)), vec![]);
    v.expect(place(stop(3, 1, Side::Sell, 99, None, 2)), vec![]);
    v.expect(place(stop_limit(4, 1, Side::Sell, 97, 95, 3)), vec![]);
    v.assert_stops(vec![
        pending((3, 1), Side::Sell, 99, 0, 2),
        pending((4, 1), Side::Sell, 97, 95, 3),
    ]);
    v.expect(
        place(PlaceOrder {
            tif: Some(Tif::Ioc),
            ..sell(2, 9, 99, 1)
        }),
        vec![
            fill((1, 11), (2, 9), Side::Sell, 99, 1),
            triggered((3, 1), Side::Sell, 99),
            fill((1, 12), (3, 1), Side::Sell, 97, 2),
            triggered((4, 1), Side::Sell, 97),
            fill((1, 13), (4, 1), Side::Sell, 95, 3),
        ],
    );
    v.assert_book(S, vec![resting(1, 13, Side::Buy, 95, 2)], vec![]);
    v.assert_stops(vec![]);
}

#[test]
fn one_trade_triggers_buy_stops_lowest_first_then_sell_stops_highest_first_ties_by_acceptance() {
    let mut v = example_venue();
    v.print(100);
    // Asks for the triggered buys to take; bids for the triggered sells.
    v.expect(place(sell(2, 1, 110, 10)), vec![]);
    v.expect(place(buy(2, 2, 90, 10)), vec![]);
    v.expect(place(stop(1, 1, Side::Buy, 103, Some(110), 1)), vec![]);
    v.expect(place(stop(1, 2, Side::Buy, 102, Some(110), 1)), vec![]);
    v.expect(place(stop(3, 1, Side::Buy, 102, Some(110), 1)), vec![]);
    v.expect(place(stop(1, 3, Side::Sell, 98, None, 1)), vec![]);
    v.expect(place(stop(3, 2, Side::Sell, 99, None, 1)), vec![]);
    v.assert_stops(vec![
        pending((1, 2), Side::Buy, 102, 110, 1),
        pending((3, 1), Side::Buy, 102, 110, 1),
        pending((1, 1), Side::Buy, 103, 110, 1),
        pending((3, 2), Side::Sell, 99, 0, 1),
        pending((1, 3), Side::Sell, 98, 0, 1),
    ]);
    // A trade at 103 triggers the three buys; their trades at 110 trigger nothing more. The
    // sells wait (a trade at 110 is above them).
    v.expect(place(sell(3, 50, 103, 1)), vec![]);
    v.expect(
        place(buy(4, 2, 103, 1)),
        vec![
            fill((3, 50), (4, 2), Side::Buy, 103, 1),
            triggered((1, 2), Side::Buy, 102),
            fill((2, 1), (1, 2), Side::Buy, 110, 1),
            triggered((3, 1), Side::Buy, 102),
            fill((2, 1), (3, 1), Side::Buy, 110, 1),
            triggered((1, 1), Side::Buy, 103),
            fill((2, 1), (1, 1), Side::Buy, 110, 1),
        ],
    );
    // A trade at 90 triggers both sells, the higher stop first.
    v.expect(
        place(sell(4, 3, 90, 1)),
        vec![
            fill((2, 2), (4, 3), Side::Sell, 90, 1),
            triggered((3, 2), Side::Sell, 99),
            fill((2, 2), (3, 2), Side::Sell, 90, 1),
            triggered((1, 3), Side::Sell, 98),
            fill((2, 2), (1, 3), Side::Sell, 90, 1),
        ],
    );
    v.assert_stops(vec![]);
}

#[test]
fn triggered_stops_end_as_the_orders_they_become() {
    let mut v = example_venue();
    v.print(100);
    v.expect(place(sell(2, 1, 105, 1)), vec![]);
    // A stop_limit gtc whose rest rests; a stop (market, protection 105) whose rest is cancelled
    // `market`; a stop_limit ioc: `ioc`; a stop fok that cannot fill: `fok`, nothing traded.
    v.expect(place(stop_limit(1, 1, Side::Buy, 101, 105, 3)), vec![]);
    v.expect(place(stop(3, 1, Side::Buy, 101, Some(105), 2)), vec![]);
    v.expect(
        place(PlaceOrder {
            tif: Some(Tif::Ioc),
            ..stop_limit(4, 1, Side::Buy, 101, 105, 2)
        }),
        vec![],
    );
    v.expect(
        place(PlaceOrder {
            tif: Some(Tif::Fok),
            ..stop(4, 2, Side::Buy, 101, Some(105), 2)
        }),
        vec![],
    );
    v.expect(place(sell(2, 2, 101, 1)), vec![]);
    v.expect(
        place(buy(3, 50, 101, 1)),
        vec![
            fill((2, 2), (3, 50), Side::Buy, 101, 1),
            triggered((1, 1), Side::Buy, 101),
            fill((2, 1), (1, 1), Side::Buy, 105, 1),
            triggered((3, 1), Side::Buy, 101),
            cancelled((3, 1), Side::Buy, 2, CancelReason::Market),
            triggered((4, 1), Side::Buy, 101),
            cancelled((4, 1), Side::Buy, 2, CancelReason::Ioc),
            triggered((4, 2), Side::Buy, 101),
            cancelled((4, 2), Side::Buy, 2, CancelReason::Fok),
        ],
    );
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 105, 2)], vec![]);
    v.assert_filled(1, 1, 1);
    // Every hold of the stops that ended came back.
    v.assert_balance(3, "USD", bal(100_000 + 100 - 101, 0));
    v.assert_balance(4, "USD", bal(100_000 - 100, 0));
    v.assert_balance(1, "USD", bal(100_000 - 105 - 210, 210));
}

#[test]
fn stop_placement_rejections_come_in_their_order_and_change_nothing() {
    // The example venue, with room for two open orders per user.
    let mut v = {
        let mut w = Venue::with_config(EngineConfig {
            max_open_orders_per_user: 2,
            ..EngineConfig::default()
        });
        let x = SymbolSpec {
            base_scale: 1,
            quote_scale: 1,
            maker_fee: 0,
            taker_fee: 0,
            ..spec("X", "BTC", "USD")
        };
        w.setup(vec![Command::AddSymbol(Box::new(x))]);
        for user in 1..=4 {
            w.setup(vec![
                Command::AddUser { user },
                deposit(user, "USD", 100_000, user * 10),
                deposit(user, "BTC", 100, user * 10 + 1),
            ]);
        }
        w
    };
    v.print(100);
    v.expect(place(buy(1, 1, 90, 1)), vec![]);
    let ok = stop(1, 2, Side::Buy, 105, Some(106), 1);
    // Each line would also fail every later check.
    v.rejects(place(PlaceOrder { user: 9, ..ok }), Reason::UnknownUser);
    v.rejects(
        place(PlaceOrder {
            symbol: SymbolId(7),
            ..ok
        }),
        Reason::UnknownSymbol,
    );
    let gtc = PlaceOrder {
        tif: Some(Tif::Gtc),
        qty: 0,
        ..ok
    };
    v.rejects(place(gtc), Reason::InvalidOrder);
    v.rejects(
        place(ok.with_display_qty(1).with_stop_price(0)),
        Reason::InvalidOrder,
    );
    v.rejects(
        place(buy(1, 2, 106, 0).with_stop_price(105)),
        Reason::InvalidOrder,
    );
    v.rejects(
        place(PlaceOrder {
            post_only: true,
            qty: 0,
            ..stop_limit(1, 2, Side::Buy, 105, 106, 1)
        }),
        Reason::InvalidOrder,
    );
    v.rejects(
        place(PlaceOrder {
            qty: 0,
            price: None,
            ..ok
        }),
        Reason::InvalidQty,
    );
    v.rejects(
        place(PlaceOrder { price: None, ..ok }),
        Reason::InvalidPrice,
    );
    v.rejects(place(ok.with_stop_price(0)), Reason::InvalidPrice);
    v.rejects(
        place(PlaceOrder {
            price: None,
            ..stop_limit(1, 2, Side::Sell, 95, 90, 1)
        }),
        Reason::InvalidPrice,
    );
    let mut no_stop_price = ok;
    no_stop_price.extras = rialto_core::OrderExtras::NONE;
    v.rejects(place(no_stop_price), Reason::InvalidPrice);
    v.rejects(
        place(PlaceOrder {
            order: 1,
            ..ok.with_stop_price(100)
        }),
        Reason::DuplicateOrderId,
    );
    v.rejects(place(ok.with_stop_price(100)), Reason::WouldTrigger);
    v.rejects(
        place(stop(1, 2, Side::Sell, 100, None, 1)),
        Reason::WouldTrigger,
    );
    v.rejects(
        place(PlaceOrder {
            price: Some(i64::MAX),
            qty: 2,
            ..ok
        }),
        Reason::Overflow,
    );
    v.rejects(
        place(PlaceOrder { qty: 1_000, ..ok }),
        Reason::InsufficientFunds,
    );
    v.expect(place(ok), vec![]);
    v.rejects(place(PlaceOrder { order: 3, ..ok }), Reason::LimitExceeded);
    // Before a symbol's first trade any stop price is accepted.
    let mut fresh = example_venue();
    fresh.expect(place(stop(1, 1, Side::Sell, 1_000, None, 1)), vec![]);
    fresh.expect(place(stop(1, 2, Side::Buy, 1, Some(5), 1)), vec![]);
}

#[test]
fn a_pending_stop_is_a_live_order_off_the_book() {
    let mut v = example_venue();
    v.print(100);
    v.expect(place(stop(1, 1, Side::Sell, 95, None, 4)), vec![]);
    v.expect(place(stop_limit(1, 2, Side::Buy, 105, 106, 2)), vec![]);
    v.assert_balance(1, "BTC", bal(96, 4));
    v.assert_balance(1, "USD", bal(100_000 - 212, 212));
    // Not in the book or L2.
    v.assert_book(S, vec![], vec![]);
    v.expect(
        Command::Book {
            symbol: S,
            depth: 10,
        },
        vec![OwnedEvent::Book {
            symbol: S,
            bids: vec![],
            asks: vec![],
        }],
    );
    // Its id is taken; move is refused; reduce keeps its place; cancel ends it.
    v.rejects(place(buy(1, 1, 90, 1)), Reason::DuplicateOrderId);
    v.rejects(
        Command::Move {
            user: 1,
            order: 1,
            price: 90,
        },
        Reason::InvalidOrder,
    );
    v.expect(
        Command::Reduce {
            user: 1,
            order: 1,
            qty: 1,
        },
        vec![cancelled((1, 1), Side::Sell, 1, CancelReason::Reduce)],
    );
    v.assert_stops(vec![
        pending((1, 2), Side::Buy, 105, 106, 2),
        pending((1, 1), Side::Sell, 95, 0, 3),
    ]);
    let report = v.engine.user_report(1).unwrap();
    assert_eq!(report, v.model.user_report(1).unwrap());
    assert_eq!(
        report.orders[0],
        OpenOrder {
            symbol: name("X"),
            order: 1,
            side: Side::Sell,
            order_type: OrderType::Stop,
            tif: Tif::Ioc,
            price: 0,
            stop_price: 95,
            remaining: 3,
            shown: 0,
            filled: 0,
            expire_ts: 0,
        }
    );
    v.expect(
        Command::Cancel { user: 1, order: 1 },
        vec![cancelled((1, 1), Side::Sell, 3, CancelReason::User)],
    );
    v.expect(
        Command::MassCancel {
            user: 1,
            symbol: None,
        },
        vec![cancelled((1, 2), Side::Buy, 2, CancelReason::User)],
    );
    v.assert_balance(1, "BTC", bal(100, 0));
    v.assert_balance(1, "USD", bal(100_000, 0));
    v.assert_stops(vec![]);
}

#[test]
fn amending_a_stop_keeps_or_loses_its_place_among_the_stops() {
    let mut v = example_venue();
    v.print(100);
    v.expect(place(stop(1, 1, Side::Sell, 95, None, 4)), vec![]);
    v.expect(place(stop(2, 1, Side::Sell, 95, None, 4)), vec![]);
    let stop_amended = |(user, order), price, stop_price, qty, priority| {
        OwnedEvent::Amended(Amended {
            symbol: S,
            user,
            order,
            side: Side::Sell,
            price,
            stop_price,
            qty,
            priority,
        })
    };
    // A smaller quantity keeps its place.
    v.expect(
        Command::Amend(amend(1, 1).with_qty(3)),
        vec![stop_amended((1, 1), 0, 95, 3, Priority::Kept)],
    );
    v.assert_stops(vec![
        pending((1, 1), Side::Sell, 95, 0, 3),
        pending((2, 1), Side::Sell, 95, 0, 4),
    ]);
    // A protection price is a new price: a new acceptance, behind 2/1.
    v.expect(
        Command::Amend(amend(1, 1).with_price(90)),
        vec![stop_amended((1, 1), 90, 95, 3, Priority::Lost)],
    );
    v.assert_stops(vec![
        pending((2, 1), Side::Sell, 95, 0, 4),
        pending((1, 1), Side::Sell, 95, 90, 3),
    ]);
    // A new stop price moves it; one that already holds against the last trade is refused.
    v.rejects(
        Command::Amend(amend(2, 1).with_stop_price(100)),
        Reason::WouldTrigger,
    );
    v.rejects(
        Command::Amend(amend(2, 1).with_stop_price(0)),
        Reason::InvalidPrice,
    );
    v.rejects(Command::Amend(amend(2, 1).with_qty(0)), Reason::InvalidQty);
    v.rejects(
        Command::Amend(amend(2, 1).with_qty(101)),
        Reason::InsufficientFunds,
    );
    v.expect(
        Command::Amend(amend(2, 1).with_stop_price(94)),
        vec![stop_amended((2, 1), 0, 94, 4, Priority::Lost)],
    );
    v.assert_stops(vec![
        pending((1, 1), Side::Sell, 95, 90, 3),
        pending((2, 1), Side::Sell, 94, 0, 4),
    ]);
    v.assert_balance(2, "BTC", bal(96, 4));
}

#[test]
fn stops_and_icebergs_survive_a_snapshot() {
    let mut v = example_venue();
    v.print(100);
    v.expect(place(stop(1, 1, Side::Sell, 95, None, 4)), vec![]);
    v.expect(place(stop(2, 1, Side::Sell, 95, None, 4)), vec![]);
    v.expect(place(sell(1, 2, 105, 10).with_display_qty(3)), vec![]);
    v.expect(
        place(buy(2, 2, 105, 4)),
        vec![
            fill((1, 2), (2, 2), Side::Buy, 105, 3),
            fill((1, 2), (2, 2), Side::Buy, 105, 1),
        ],
    );
    let restored =
        Engine::decode_snapshot(&v.engine.encode_snapshot(), EngineConfig::default()).unwrap();
    assert_eq!(restored.state_hash(), v.engine.state_hash());
    assert_eq!(restored.live_orders(), v.engine.live_orders());
    let mut stops = Vec::new();
    restored.pending_stops(S, &mut stops);
    assert_eq!(stops, v.model.pending_stops(S));
    // The restored engine goes on as the original: the stops trigger in the same order.
    let mut a = Vec::new();
    let mut b = Vec::new();
    let mut restored = restored;
    let cmd = place(sell(3, 5, 90, 1));
    let _ = v.engine.apply(1_000, 0, &place(buy(4, 5, 90, 10)), &mut a);
    let _ = restored.apply(1_000, 0, &place(buy(4, 5, 90, 10)), &mut b);
    let _ = v.engine.apply(1_001, 0, &cmd, &mut a);
    let _ = restored.apply(1_001, 0, &cmd, &mut b);
    assert_eq!(a, b);
    assert!(a.iter().any(|e| matches!(e, OwnedEvent::Triggered(_))));
    assert_eq!(restored.state_hash(), v.engine.state_hash());
}

// ----- iceberg orders (part 2) -----------------------------------------------------------------

#[test]
fn iceberg_example_i1_shows_slices_that_requeue_at_the_back() {
    let mut v = example_venue();
    let book = |v: &mut Venue, bids: Vec<Level>, asks: Vec<Level>| {
        v.expect(
            Command::Book {
                symbol: S,
                depth: 10,
            },
            vec![OwnedEvent::Book {
                symbol: S,
                bids,
                asks,
            }],
        );
    };
    let level = |price, qty| Level { price, qty };
    v.expect(place(sell(1, 1, 101, 10).with_display_qty(3)), vec![]);
    v.expect(place(sell(2, 1, 101, 2)), vec![]);
    book(&mut v, vec![], vec![level(101, 5)]);
    v.expect(
        place(buy(3, 1, 101, 4)),
        vec![
            fill((1, 1), (3, 1), Side::Buy, 101, 3),
            fill((2, 1), (3, 1), Side::Buy, 101, 1),
        ],
    );
    book(&mut v, vec![], vec![level(101, 4)]);
    // The final state lists it once, at its slice's place, with its whole remaining.
    v.assert_book(
        S,
        vec![],
        vec![
            resting(2, 1, Side::Sell, 101, 1),
            resting(1, 1, Side::Sell, 101, 7),
        ],
    );
    v.expect(
        place(buy(4, 1, 101, 12)),
        vec![
            fill((2, 1), (4, 1), Side::Buy, 101, 1),
            fill((1, 1), (4, 1), Side::Buy, 101, 3),
            fill((1, 1), (4, 1), Side::Buy, 101, 3),
            fill((1, 1), (4, 1), Side::Buy, 101, 1),
        ],
    );
    v.assert_book(S, vec![resting(4, 1, Side::Buy, 101, 4)], vec![]);
    v.assert_balance(1, "BTC", bal(90, 0));
    v.assert_balance(1, "USD", bal(101_010, 0));
}

#[test]
fn iceberg_rejections_and_what_it_shows() {
    let mut v = example_venue();
    v.rejects(
        place(PlaceOrder {
            tif: Some(Tif::Ioc),
            ..sell(1, 1, 101, 10).with_display_qty(3)
        }),
        Reason::InvalidOrder,
    );
    v.rejects(
        place(market(1, 1, Side::Sell, 10).with_display_qty(3)),
        Reason::InvalidOrder,
    );
    v.rejects(
        place(stop_limit(1, 1, Side::Sell, 90, 95, 10).with_display_qty(3)),
        Reason::InvalidOrder,
    );
    v.rejects(
        place(sell(1, 1, 101, 10).with_display_qty(10)),
        Reason::InvalidQty,
    );
    v.rejects(
        place(sell(1, 1, 101, 10).with_display_qty(0)),
        Reason::InvalidQty,
    );
    v.rejects(
        place(sell(1, 1, 101, 10).with_display_qty(-1)),
        Reason::InvalidQty,
    );
    // Rialto's bound: at most MAX_ICEBERG_SLICES slices.
    let slices = rialto_core::MAX_ICEBERG_SLICES;
    v.rejects(
        place(buy(1, 1, 1, slices + 1).with_display_qty(1)),
        Reason::InvalidQty,
    );
    v.expect(place(buy(1, 1, 1, slices).with_display_qty(1)), vec![]);
    // Reduce takes hidden quantity first; the shown part only shrinks to the new remaining.
    v.expect(place(sell(2, 1, 101, 10).with_display_qty(4)), vec![]);
    v.expect(
        Command::Reduce {
            user: 2,
            order: 1,
            qty: 5,
        },
        vec![cancelled((2, 1), Side::Sell, 5, CancelReason::Reduce)],
    );
    let shown = |v: &Venue| {
        let of = |live: Vec<LiveOrder>| {
            live.iter()
                .find(|o| (o.user, o.order) == (2, 1))
                .map(|o| o.shown)
        };
        let m = of(v.model.live_order_details());
        assert_eq!(of(v.engine.live_orders()), m, "shown");
        m
    };
    assert_eq!(shown(&v), Some(4));
    v.expect(
        Command::Reduce {
            user: 2,
            order: 1,
            qty: 3,
        },
        vec![cancelled((2, 1), Side::Sell, 3, CancelReason::Reduce)],
    );
    assert_eq!(shown(&v), Some(2));
    // An amend that keeps priority shows min(shown, new remaining); one that loses it, a fresh
    // slice.
    v.expect(
        Command::Amend(amend(2, 1).with_qty(8)),
        vec![amended((2, 1), Side::Sell, 101, 8, Priority::Lost)],
    );
    assert_eq!(shown(&v), Some(4));
    v.assert_balance(2, "BTC", bal(92, 8));
    // Cancel ends the whole of it.
    v.expect(
        Command::Cancel { user: 2, order: 1 },
        vec![cancelled((2, 1), Side::Sell, 8, CancelReason::User)],
    );
    v.assert_balance(2, "BTC", bal(100, 0));
}

#[test]
fn fill_or_kill_meets_hidden_quantity_only_where_the_walk_would() {
    let mut v = example_venue();
    // Level 101: user 1's iceberg (3 shown, 7 hidden), then user 2's own order.
    v.expect(place(sell(1, 1, 101, 10).with_display_qty(3)), vec![]);
    v.expect(place(sell(2, 1, 101, 5)), vec![]);
    // cancel_taker: the walk takes 3, the iceberg's next slice goes behind 2/1, and 2/1 stops
    // the walk: 3 < 5, killed.
    let fok = |stp| PlaceOrder {
        tif: Some(Tif::Fok),
        stp: Some(stp),
        ..buy(2, 2, 101, 5)
    };
    v.expect(
        place(fok(Stp::CancelTaker)),
        vec![cancelled((2, 2), Side::Buy, 5, CancelReason::Fok)],
    );
    // cancel_maker: 2/1 is skipped, the hidden quantity is reached: filled.
    v.expect(
        place(fok(Stp::CancelMaker)),
        vec![
            fill((1, 1), (2, 2), Side::Buy, 101, 3),
            cancelled((2, 1), Side::Sell, 5, CancelReason::Stp),
            fill((1, 1), (2, 2), Side::Buy, 101, 2),
        ],
    );
    v.assert_book(S, vec![], vec![resting(1, 1, Side::Sell, 101, 5)]);
    // Self-trade prevention cancels an iceberg's whole remaining.
    v.expect(
        place(PlaceOrder {
            stp: Some(Stp::CancelMaker),
            ..buy(1, 2, 101, 1)
        }),
        vec![cancelled((1, 1), Side::Sell, 5, CancelReason::Stp)],
    );
}

// ----- trading phases, halts and auctions; price bands ------------------------------------------

fn set_phase(phase: Phase) -> Command {
    Command::SetPhase {
        symbol: S,
        phase: Some(phase),
    }
}

fn phase_event(phase: Phase) -> OwnedEvent {
    OwnedEvent::Phase(PhaseChanged { symbol: S, phase })
}

/// An uncross trade on S: the sell is the maker, the buy the taker, both pay the maker fee.
fn uncross_fill(
    sell: (UserId, OrderId),
    buy: (UserId, OrderId),
    price: i64,
    qty: i64,
) -> OwnedEvent {
    OwnedEvent::Trade(Trade {
        symbol: S,
        price,
        qty,
        maker_user: sell.0,
        maker_order: sell.1,
        taker_user: buy.0,
        taker_order: buy.1,
        taker_side: Side::Buy,
        maker_fee: qty * MAKER_FEE,
        taker_fee: qty * MAKER_FEE,
    })
}

fn auction_event(price: i64, qty: i64, imbalance: i64) -> OwnedEvent {
    OwnedEvent::Auction(AuctionResult {
        symbol: S,
        price,
        qty,
        imbalance,
    })
}

impl Venue {
    /// The standard venue with users 1-3 funded: 100,000 USD and 100 lots of BTC each.
    fn funded() -> Venue {
        let mut v = Venue::standard();
        for user in 1..=3 {
            v.fund(user, 100 * BASE_SCALE, 100_000);
        }
        v
    }

    fn assert_status(&self, phase: Phase, last: i64, reference: i64, band_bps: i64) {
        let expected = Some(SymbolStatus {
            phase,
            last,
            reference,
            band_bps,
            future: false,
            mark: 0,
        });
        assert_eq!(self.model.symbol_status(S), expected, "model: status");
        assert_eq!(self.engine.symbol_status(S), expected, "engine: status");
    }
}

#[test]
fn set_phase_reports_a_change_and_nothing_else() {
    let mut v = Venue::funded();
    v.assert_status(Phase::Continuous, 0, 0, 0);
    v.rejects(
        Command::SetPhase {
            symbol: SymbolId(1),
            phase: None,
        },
        Reason::UnknownSymbol,
    );
    v.rejects(
        Command::SetPhase {
            symbol: S,
            phase: None,
        },
        Reason::InvalidPhase,
    );
    // The same phase again: ok, no event.
    v.expect(set_phase(Phase::Continuous), vec![]);
    for phase in [
        Phase::Halted,
        Phase::Closed,
        Phase::Auction,
        Phase::Continuous,
    ] {
        v.expect(set_phase(phase), vec![phase_event(phase)]);
        v.assert_status(phase, 0, 0, 0);
    }
}

/// The rulebook's example P1 on the standard venue (fees 5 and 25): the call lets the book
/// cross, and the uncross executes the most it can at one price, both sides at the maker fee.
#[test]
fn an_auction_rests_everything_and_uncrosses_at_one_price() {
    let mut v = Venue::funded();
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    v.expect(place(buy(1, 1, 102, 5)), vec![]);
    v.expect(place(buy(1, 2, 101, 3)), vec![]);
    // Crosses both bids, and post-only is not refused: nothing takes during the call.
    v.expect(place(sell(2, 1, 100, 4).with_post_only()), vec![]);
    v.expect(place(sell(3, 1, 102, 2)), vec![]);
    v.rejects(place(market(3, 2, Side::Sell, 1)), Reason::SymbolInAuction);
    v.rejects(
        place(sell(3, 2, 100, 1).with_tif(Tif::Ioc)),
        Reason::SymbolInAuction,
    );
    v.rejects(
        place(sell(3, 2, 100, 1).with_tif(Tif::Fok)),
        Reason::SymbolInAuction,
    );
    // Before the phase: a duplicate id is refused as such.
    v.rejects(
        place(sell(3, 1, 100, 1).with_tif(Tif::Ioc)),
        Reason::DuplicateOrderId,
    );
    v.assert_book(
        S,
        vec![
            resting(1, 1, Side::Buy, 102, 5),
            resting(1, 2, Side::Buy, 101, 3),
        ],
        vec![
            resting(2, 1, Side::Sell, 100, 4),
            resting(3, 1, Side::Sell, 102, 2),
        ],
    );
    // V(100) = V(101) = 4, V(102) = min(5, 6) = 5: E = 102, I(102) = 5 - 6 = -1.
    v.expect(
        set_phase(Phase::Continuous),
        vec![
            uncross_fill((2, 1), (1, 1), 102, 4),
            uncross_fill((3, 1), (1, 1), 102, 1),
            auction_event(102, 5, -1),
            phase_event(Phase::Continuous),
        ],
    );
    v.assert_book(
        S,
        vec![resting(1, 2, Side::Buy, 101, 3)],
        vec![resting(3, 1, Side::Sell, 102, 1)],
    );
    // User 1 held 5 * (1020 + 25) for order 1 and paid 5 * (1020 + 5) from it; order 2 holds
    // 3 * (1010 + 25).
    v.assert_balance(1, "USD", bal(100_000 - 5 * 1025 - 3 * 1035, 3 * 1035));
    v.assert_balance(1, "BTC", bal(105 * BASE_SCALE, 0));
    v.assert_balance(2, "USD", bal(100_000 + 4 * (1020 - 5), 0));
    v.assert_balance(2, "BTC", bal(96 * BASE_SCALE, 0));
    v.assert_balance(3, "USD", bal(100_000 + 1020 - 5, 0));
    v.assert_balance(3, "BTC", bal(98 * BASE_SCALE, BASE_SCALE));
    v.assert_fees("USD", 2 * 5 * MAKER_FEE);
    // The uncross price is the last price and the reference.
    v.assert_status(Phase::Continuous, 102, 102, 0);
    // Trading goes on as usual.
    v.expect(
        place(buy(2, 2, 102, 1)),
        vec![trade((3, 1), (2, 2), Side::Buy, 102, 1)],
    );
}

/// Example P2's rows: the largest volume, then the smallest imbalance, then market pressure,
/// else the reference clamped into the range (or its middle without one).
#[test]
fn the_uncross_price_follows_volume_imbalance_pressure_and_reference() {
    // (bids, asks, reference, then the uncross price, qty and imbalance), levels as (price, qty).
    type Case<'a> = (
        &'a [(i64, i64)],
        &'a [(i64, i64)],
        Option<i64>,
        i64,
        i64,
        i64,
    );
    let cases: [Case; 6] = [
        (&[(101, 3)], &[(99, 3)], Some(100), 100, 3, 0),
        (&[(101, 3)], &[(99, 3)], Some(105), 101, 3, 0),
        (&[(101, 3)], &[(99, 3)], None, 100, 3, 0),
        (&[(101, 5)], &[(99, 3)], None, 101, 3, 2),
        (
            &[(101, 3), (100, 1)],
            &[(99, 3), (101, 1)],
            Some(100),
            100,
            3,
            1,
        ),
        (
            &[(101, 3), (100, 1)],
            &[(99, 3), (101, 1)],
            Some(110),
            101,
            3,
            -1,
        ),
    ];
    for (bids, asks, reference, price, qty, imbalance) in cases {
        let mut v = Venue::funded();
        if let Some(reference) = reference {
            v.expect(
                Command::SetRefPrice {
                    symbol: S,
                    price: reference,
                },
                vec![],
            );
        }
        v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
        for (i, &(p, q)) in bids.iter().enumerate() {
            v.expect(place(buy(1, i as OrderId, p, q)), vec![]);
        }
        for (i, &(p, q)) in asks.iter().enumerate() {
            v.expect(place(sell(2, i as OrderId, p, q)), vec![]);
        }
        let (_, events) = v.run(set_phase(Phase::Continuous));
        let auction = events
            .iter()
            .find(|e| matches!(e, OwnedEvent::Auction(_)))
            .cloned();
        assert_eq!(
            auction,
            Some(auction_event(price, qty, imbalance)),
            "bids {bids:?} asks {asks:?} reference {reference:?}"
        );
        assert_eq!(events.last(), Some(&phase_event(Phase::Continuous)));
        assert_eq!(v.engine.symbol_status(S).unwrap().reference, price);
    }
}

/// An auction that ends with the book uncrossed reports no auction; the uncross walks each side
/// in price-time priority, from the front of each level.
#[test]
fn an_uncrossed_book_ends_its_auction_without_trades() {
    let mut v = Venue::funded();
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    v.expect(place(buy(1, 1, 100, 2)), vec![]);
    v.expect(place(sell(2, 1, 101, 2)), vec![]);
    v.expect(
        set_phase(Phase::Continuous),
        vec![phase_event(Phase::Continuous)],
    );
    v.assert_status(Phase::Continuous, 0, 0, 0);
    // Bids 3 @101 (1/2 then 3/1) and 2 @100 (1/1); asks 2 @99 (2/2) and 2 @101 (2/1).
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    v.expect(place(buy(1, 2, 101, 1)), vec![]);
    v.expect(place(buy(3, 1, 101, 2)), vec![]);
    v.expect(place(sell(2, 2, 99, 2)), vec![]);
    // V(99) = V(100) = min(5, 2) = 2, V(101) = min(3, 4) = 3: E = 101, I = -1. Each side in
    // priority: the ask at 99 before the one at 101, 1/2 before 3/1 at 101.
    v.expect(
        set_phase(Phase::Continuous),
        vec![
            uncross_fill((2, 2), (1, 2), 101, 1),
            uncross_fill((2, 2), (3, 1), 101, 1),
            uncross_fill((2, 1), (3, 1), 101, 1),
            auction_event(101, 3, -1),
            phase_event(Phase::Continuous),
        ],
    );
    v.assert_book(
        S,
        vec![resting(1, 1, Side::Buy, 100, 2)],
        vec![resting(2, 1, Side::Sell, 101, 1)],
    );
}

/// Example P3: a halt refuses new orders and any amend but one that lowers the quantity;
/// cancels go on; `closed` is the same with its own reason. Moves are refused too.
#[test]
fn a_halt_refuses_orders_but_not_cancels_or_reductions() {
    let mut v = Venue::funded();
    v.expect(place(buy(2, 1, 101, 3)), vec![]);
    v.expect(place(sell(3, 1, 110, 3)), vec![]);
    for (phase, reason) in [
        (Phase::Halted, Reason::SymbolHalted),
        (Phase::Closed, Reason::SymbolClosed),
    ] {
        v.expect(set_phase(phase), vec![phase_event(phase)]);
        v.rejects(place(buy(1, 1, 100, 1)), reason);
        v.rejects(place(market(1, 1, Side::Buy, 1)), reason);
        // The id is checked first.
        v.rejects(place(buy(2, 1, 100, 1)), Reason::DuplicateOrderId);
        v.rejects(
            Command::Move {
                user: 2,
                order: 1,
                price: 100,
            },
            reason,
        );
        v.rejects(Command::Amend(amend(2, 1).with_price(100)), reason);
        // Same price and a larger total is not a reduction.
        v.rejects(Command::Amend(amend(2, 1).with_qty(5)), reason);
        v.rejects(
            Command::Amend(amend(2, 1).with_qty(5).with_price(101)),
            reason,
        );
        // Bad fields are reported before the phase.
        v.rejects(
            Command::Amend(amend(2, 1).with_price(0)),
            Reason::InvalidPrice,
        );
        v.rejects(Command::Amend(amend(2, 1).with_qty(0)), Reason::InvalidQty);
    }
    v.expect(
        Command::Amend(amend(2, 1).with_qty(2).with_price(101)),
        vec![amended((2, 1), Side::Buy, 101, 2, Priority::Kept)],
    );
    v.expect(
        Command::Reduce {
            user: 2,
            order: 1,
            qty: 1,
        },
        vec![cancelled((2, 1), Side::Buy, 1, CancelReason::Reduce)],
    );
    v.expect(
        Command::Cancel { user: 2, order: 1 },
        vec![cancelled((2, 1), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(
        Command::MassCancel {
            user: 3,
            symbol: None,
        },
        vec![cancelled((3, 1), Side::Sell, 3, CancelReason::User)],
    );
}

/// In an auction, amends and moves never trade, and post-only is not checked.
#[test]
fn amends_and_moves_in_an_auction_rest_without_trading() {
    let mut v = Venue::funded();
    v.expect(place(buy(1, 1, 100, 2).with_post_only()), vec![]);
    v.expect(place(sell(2, 1, 105, 2)), vec![]);
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    v.expect(
        Command::Move {
            user: 1,
            order: 1,
            price: 106,
        },
        vec![],
    );
    v.expect(
        Command::Amend(amend(2, 1).with_price(99)),
        vec![amended((2, 1), Side::Sell, 99, 2, Priority::Lost)],
    );
    v.assert_book(
        S,
        vec![resting(1, 1, Side::Buy, 106, 2)],
        vec![resting(2, 1, Side::Sell, 99, 2)],
    );
    v.assert_balance(1, "USD", bal(100_000 - 2 * 1085, 2 * 1085));
    // E: V = 2 on [99, 106], I = 0: no reference, so the middle, 102.
    v.expect(
        set_phase(Phase::Continuous),
        vec![
            uncross_fill((2, 1), (1, 1), 102, 2),
            auction_event(102, 2, 0),
            phase_event(Phase::Continuous),
        ],
    );
}

/// Example B1 on the standard venue: the band refuses a buy above hi and a sell below lo,
/// accepts the others, and stops a market order's walk at its edge.
#[test]
fn a_band_refuses_prices_beyond_it_and_stops_takers_at_its_edge() {
    let mut v = Venue::funded();
    v.fund(3, 0, 10_000_000);
    v.rejects(
        Command::SetRefPrice {
            symbol: SymbolId(1),
            price: 1000,
        },
        Reason::UnknownSymbol,
    );
    v.rejects(
        Command::SetRefPrice {
            symbol: S,
            price: 0,
        },
        Reason::InvalidPrice,
    );
    v.rejects(
        Command::SetBand {
            symbol: SymbolId::NONE,
            band_bps: -1,
        },
        Reason::UnknownSymbol,
    );
    v.rejects(
        Command::SetBand {
            symbol: S,
            band_bps: -1,
        },
        Reason::InvalidQty,
    );
    // A band without a reference is no band.
    v.expect(
        Command::SetBand {
            symbol: S,
            band_bps: 500,
        },
        vec![],
    );
    v.expect(place(buy(1, 9, 5000, 1)), vec![]);
    v.expect(
        Command::Cancel { user: 1, order: 9 },
        vec![cancelled((1, 9), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(
        Command::SetRefPrice {
            symbol: S,
            price: 1000,
        },
        vec![],
    );
    v.assert_status(Phase::Continuous, 0, 1000, 500);
    // w = 50: lo 950, hi 1050.
    v.rejects(place(buy(1, 1, 1051, 1)), Reason::PriceOutOfBand);
    v.expect(place(buy(1, 1, 1050, 1)), vec![]);
    v.expect(place(buy(1, 2, 900, 1)), vec![]);
    v.rejects(place(sell(2, 1, 949, 1)), Reason::PriceOutOfBand);
    // The band comes after the id, before would_take and funds.
    v.rejects(place(sell(1, 1, 900, 1)), Reason::DuplicateOrderId);
    v.rejects(
        place(sell(2, 1, 940, 1).with_post_only()),
        Reason::PriceOutOfBand,
    );
    v.rejects(place(buy(1, 3, 1060, 1_000_000)), Reason::PriceOutOfBand);
    v.expect(
        Command::Cancel { user: 1, order: 1 },
        vec![cancelled((1, 1), Side::Buy, 1, CancelReason::User)],
    );
    v.expect(place(sell(2, 2, 1040, 5)), vec![]);
    v.expect(place(sell(2, 3, 1060, 5)), vec![]);
    // A fill-or-kill counts only what lies inside the band.
    v.expect(
        place(market(3, 9, Side::Buy, 6).with_tif(Tif::Fok)),
        vec![cancelled((3, 9), Side::Buy, 6, CancelReason::Fok)],
    );
    v.expect(
        place(market(3, 1, Side::Buy, 10)),
        vec![
            trade((2, 2), (3, 1), Side::Buy, 1040, 5),
            cancelled((3, 1), Side::Buy, 5, CancelReason::Band),
        ],
    );
    // The trade moved the reference: w = 52, hi 1092, so 1060 is inside now. The band is
    // fixed when the order enters, so the order's own trades do not move it.
    v.assert_status(Phase::Continuous, 1040, 1040, 500);
    v.expect(
        place(market(3, 2, Side::Buy, 1)),
        vec![trade((2, 3), (3, 2), Side::Buy, 1060, 1)],
    );
    // lo is now 1060 - 53 = 1007: the bid at 900 lies beyond it, so a market sell stops there.
    v.expect(
        place(market(2, 4, Side::Sell, 1)),
        vec![cancelled((2, 4), Side::Sell, 1, CancelReason::Band)],
    );
    // A walk that ends because the book ran out inside the band ends as usual.
    v.expect(
        place(market(3, 3, Side::Buy, 5)),
        vec![
            trade((2, 3), (3, 3), Side::Buy, 1060, 4),
            cancelled((3, 3), Side::Buy, 1, CancelReason::Market),
        ],
    );
    // Moves and amends are checked against the band for a price they change.
    v.expect(place(sell(2, 5, 1100, 1)), vec![]);
    v.rejects(
        Command::Move {
            user: 2,
            order: 5,
            price: 1000,
        },
        Reason::PriceOutOfBand,
    );
    v.expect(
        Command::Amend(amend(2, 5).with_qty(2).with_price(1100)),
        vec![amended((2, 5), Side::Sell, 1100, 2, Priority::Lost)],
    );
    v.rejects(
        Command::Amend(amend(2, 5).with_price(1006)),
        Reason::PriceOutOfBand,
    );
    // No band: anything goes again.
    v.expect(
        Command::SetBand {
            symbol: S,
            band_bps: 0,
        },
        vec![],
    );
    v.expect(
        place(sell(2, 6, 3, 1)),
        vec![trade((1, 2), (2, 6), Side::Sell, 900, 1)],
    );
}

/// The uncross is not banded, and its price becomes the reference that the band follows.
#[test]
fn the_uncross_ignores_the_band_and_sets_the_reference() {
    let mut v = Venue::funded();
    v.expect(
        Command::SetRefPrice {
            symbol: S,
            price: 100,
        },
        vec![],
    );
    v.expect(
        Command::SetBand {
            symbol: S,
            band_bps: 1000,
        },
        vec![],
    );
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    // Inside the band at 100: hi 110.
    v.expect(place(buy(1, 1, 110, 3)), vec![]);
    v.expect(place(sell(2, 1, 95, 1)), vec![]);
    // A new reference puts both orders' prices far outside the band (hi 55): the uncross
    // trades there all the same.
    v.expect(
        Command::SetRefPrice {
            symbol: S,
            price: 50,
        },
        vec![],
    );
    // Buy pressure: E = 110, the top of the range.
    v.expect(
        set_phase(Phase::Continuous),
        vec![
            uncross_fill((2, 1), (1, 1), 110, 1),
            auction_event(110, 1, 2),
            phase_event(Phase::Continuous),
        ],
    );
    // Reference 110, w = 11: a buy at 121 is inside now.
    v.assert_status(Phase::Continuous, 110, 110, 1000);
    v.expect(place(buy(1, 2, 121, 1)), vec![]);
    v.rejects(place(buy(1, 3, 122, 1)), Reason::PriceOutOfBand);
}

/// Phases, bands and the prices behind them are state: in the hash and the snapshot, and a
/// snapshot of a crossed book in an auction restores.
#[test]
fn phases_and_bands_survive_a_snapshot() {
    let mut v = Venue::funded();
    v.expect(
        Command::SetRefPrice {
            symbol: S,
            price: 100,
        },
        vec![],
    );
    let before_band = v.engine.state_hash();
    v.expect(
        Command::SetBand {
            symbol: S,
            band_bps: 700,
        },
        vec![],
    );
    assert_ne!(v.engine.state_hash(), before_band);
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    v.expect(place(buy(1, 1, 105, 3)), vec![]);
    v.expect(place(sell(2, 1, 95, 1)), vec![]);
    let restored =
        Engine::decode_snapshot(&v.engine.encode_snapshot(), EngineConfig::default()).unwrap();
    assert_eq!(restored.state_hash(), v.engine.state_hash());
    assert_eq!(restored.symbol_status(S), v.engine.symbol_status(S));
    assert_eq!(restored.resting_orders(S), v.engine.resting_orders(S));
}

/// The uncross meets an iceberg as a taker's walk does (each slice its own trade, the next
/// slice at the back of its level) and counts its hidden part in V; its trades then trigger
/// stops, after the `phase` event. A stop-limit IOC is accepted during the call: it waits.
#[test]
fn the_uncross_walks_iceberg_slices_and_triggers_stops() {
    let mut v = Venue::funded();
    v.expect(set_phase(Phase::Auction), vec![phase_event(Phase::Auction)]);
    let stop = buy(3, 1, 106, 1)
        .with_order_type(OrderType::StopLimit)
        .with_stop_price(105)
        .with_tif(Tif::Ioc);
    v.expect(place(stop), vec![]);
    v.expect(place(buy(1, 1, 105, 5).with_display_qty(2)), vec![]);
    v.expect(place(sell(2, 1, 100, 4)), vec![]);
    v.expect(place(sell(2, 2, 106, 1)), vec![]);
    // V = 4 on [100, 105] with I = +1 (the hidden lots count): buy pressure, E = 105.
    v.expect(
        set_phase(Phase::Continuous),
        vec![
            uncross_fill((2, 1), (1, 1), 105, 2),
            uncross_fill((2, 1), (1, 1), 105, 2),
            auction_event(105, 4, 1),
            phase_event(Phase::Continuous),
            OwnedEvent::Triggered(rialto_core::Triggered {
                symbol: S,
                user: 3,
                order: 1,
                side: Side::Buy,
                stop_price: 105,
            }),
            trade((2, 2), (3, 1), Side::Buy, 106, 1),
        ],
    );
    v.assert_book(S, vec![resting(1, 1, Side::Buy, 105, 1)], vec![]);
    v.assert_status(Phase::Continuous, 106, 106, 0);
}

// ----- GTD and DAY (part 2) -------------------------------------------------------------------

fn gtd(p: PlaceOrder, expire_ts: i64) -> PlaceOrder {
    p.with_tif(Tif::Gtd).with_expire_ts(expire_ts)
}

#[test]
fn gtd_example_e1_expires_before_the_command_and_stands_when_it_is_rejected() {
    let mut v = example_venue();
    v.expect_at(500, place(gtd(buy(1, 1, 100, 5), 1000)), vec![]);
    v.rejects(place(gtd(buy(1, 2, 100, 5), 400)), Reason::InvalidOrder);
    v.rejects(place(gtd(buy(1, 2, 100, 5), 500)), Reason::InvalidOrder);
    let expired = OwnedEvent::Cancelled(Cancelled {
        symbol: S,
        user: 1,
        order: 1,
        side: Side::Buy,
        qty: 5,
        reason: CancelReason::Expired,
    });
    v.check_at(
        Some(1000),
        Command::Cancel { user: 9, order: 9 },
        Err(Reason::UnknownOrder),
        vec![expired],
    );
    v.assert_balance(1, "USD", bal(100_000, 0));
}

#[test]
fn expiry_fields_are_checked_in_the_invalid_order_place() {
    let mut v = example_venue();
    // After unknown_user and unknown_symbol, before invalid_qty.
    v.rejects(place(gtd(buy(9, 1, 100, 0), 0)), Reason::UnknownUser);
    v.rejects(
        place(PlaceOrder {
            symbol: SymbolId(7),
            ..gtd(buy(1, 1, 100, 0), 0)
        }),
        Reason::UnknownSymbol,
    );
    v.rejects(place(gtd(buy(1, 1, 100, 0), 0)), Reason::InvalidOrder);
    v.rejects(
        place(buy(1, 1, 100, 1).with_tif(Tif::Gtd)),
        Reason::InvalidOrder,
    );
    for tif in [Tif::Gtc, Tif::Ioc, Tif::Fok, Tif::Day] {
        v.rejects(
            place(buy(1, 1, 100, 1).with_tif(tif).with_expire_ts(5)),
            Reason::InvalidOrder,
        );
    }
    for tif in [Tif::Gtd, Tif::Day, Tif::Gtc] {
        let market = market(1, 1, Side::Buy, 1).with_tif(tif);
        v.rejects(place(market), Reason::InvalidOrder);
    }
    // Post-only is allowed on a resting tif.
    v.expect(
        place(buy(1, 1, 100, 1).with_tif(Tif::Day).with_post_only()),
        vec![],
    );
    v.expect(place(gtd(sell(2, 1, 101, 1), 9).with_post_only()), vec![]);
}

#[test]
fn day_orders_expire_at_the_symbols_day_end_strictly_after_now() {
    const DAY: i64 = rialto_core::NS_PER_DAY;
    let mut v = example_venue();
    let six = SymbolSpec {
        day_end: 6 * 3_600_000_000_000,
        ..spec("Y", "BTC", "USD")
    };
    v.setup(vec![Command::AddSymbol(Box::new(six))]);
    let y = SymbolId(1);
    v.expect_at(1000, place(buy(1, 1, 100, 1).with_tif(Tif::Day)), vec![]);
    v.expect(
        place(PlaceOrder {
            symbol: y,
            ..buy(1, 2, 1, 1).with_tif(Tif::Day)
        }),
        vec![],
    );
    let expiries: Vec<i64> = v.engine.live_orders().iter().map(|o| o.expire_ts).collect();
    assert_eq!(expiries, vec![DAY, 6 * 3_600_000_000_000]);
    // Placed exactly at a day end: the next one.
    v.expect_at(
        DAY,
        place(buy(1, 3, 100, 1).with_tif(Tif::Day)),
        vec![
            OwnedEvent::Cancelled(Cancelled {
                symbol: y,
                user: 1,
                order: 2,
                side: Side::Buy,
                qty: 1,
                reason: CancelReason::Expired,
            }),
            cancelled_x((1, 1), Side::Buy, 1, CancelReason::Expired),
        ],
    );
    assert_eq!(v.engine.live_orders()[0].expire_ts, 2 * DAY);
    // A DAY order whose expiry would pass i64.
    v.check_at(
        Some(i64::MAX - 1),
        place(buy(1, 4, 100, 1).with_tif(Tif::Day)),
        Err(Reason::Overflow),
        vec![cancelled_x((1, 3), Side::Buy, 1, CancelReason::Expired)],
    );
}

/// A cancellation on the example venue's X.
fn cancelled_x(
    (user, order): (UserId, OrderId),
    side: Side,
    qty: i64,
    reason: CancelReason,
) -> OwnedEvent {
    cancelled((user, order), side, qty, reason)
}

#[test]
fn expiries_come_by_time_then_user_then_order_and_move_and_amend_keep_them() {
    let mut v = example_venue();
    v.expect(place(gtd(buy(2, 5, 90, 1), 300)), vec![]);
    v.expect(place(gtd(buy(1, 7, 90, 1), 300)), vec![]);
    v.expect(place(gtd(buy(1, 6, 90, 1), 300)), vec![]);
    v.expect(place(gtd(buy(3, 1, 90, 1), 200)), vec![]);
    v.expect(
        Command::Move {
            user: 2,
            order: 5,
            price: 91,
        },
        vec![],
    );
    v.expect(
        Command::Amend(amend(1, 7).with_price(92)),
        vec![amended((1, 7), Side::Buy, 92, 1, Priority::Lost)],
    );
    v.check_at(
        Some(300),
        Command::Tick,
        Ok(()),
        vec![
            cancelled_x((3, 1), Side::Buy, 1, CancelReason::Expired),
            cancelled_x((1, 6), Side::Buy, 1, CancelReason::Expired),
            cancelled_x((1, 7), Side::Buy, 1, CancelReason::Expired),
            cancelled_x((2, 5), Side::Buy, 1, CancelReason::Expired),
        ],
    );
    assert!(v.engine.live_orders().is_empty());
}

#[test]
fn an_expiry_that_was_filled_or_cancelled_first_reports_nothing() {
    let mut v = example_venue();
    v.expect(place(gtd(buy(1, 1, 100, 2), 50)), vec![]);
    v.expect(place(gtd(buy(1, 2, 100, 2), 50)), vec![]);
    v.expect(
        place(sell(2, 1, 100, 2)),
        vec![fill((1, 1), (2, 1), Side::Sell, 100, 2)],
    );
    v.expect(
        Command::Cancel { user: 1, order: 2 },
        vec![cancelled_x((1, 2), Side::Buy, 2, CancelReason::User)],
    );
    // The ids are free again and the new orders do not expire.
    v.expect(place(buy(1, 1, 100, 1)), vec![]);
    v.check_at(Some(60), Command::Tick, Ok(()), vec![]);
    assert_eq!(v.engine.live_orders().len(), 1);
}

// ----- user suspension (part 2) ---------------------------------------------------------------

#[test]
fn suspension_cancels_every_live_order_and_refuses_orders_and_withdrawals() {
    let mut v = example_venue();
    v.expect(place(buy(1, 1, 99, 1)), vec![]);
    v.expect(place(sell(1, 2, 110, 2)), vec![]);
    v.expect(place(buy(2, 1, 98, 1)), vec![]);
    v.expect(
        Command::SuspendUser { user: 1 },
        vec![
            cancelled_x((1, 1), Side::Buy, 1, CancelReason::Suspended),
            cancelled_x((1, 2), Side::Sell, 2, CancelReason::Suspended),
        ],
    );
    v.rejects(place(buy(1, 3, 90, 1)), Reason::UserSuspended);
    // user_suspended comes right after unknown_user: before unknown_symbol and invalid_qty.
    v.rejects(
        place(PlaceOrder {
            symbol: SymbolId(7),
            ..buy(1, 3, 90, 0)
        }),
        Reason::UserSuspended,
    );
    v.rejects(deposit(1, "USD", -10, 50), Reason::UserSuspended);
    // Before insufficient_funds, after duplicate_tx.
    v.rejects(deposit(1, "USD", -1_000_000, 51), Reason::UserSuspended);
    v.rejects(deposit(1, "USD", -10, 20), Reason::DuplicateTx);
    v.expect(deposit(1, "USD", 10, 52), vec![]);
    v.rejects(Command::Cancel { user: 1, order: 1 }, Reason::UnknownOrder);
    v.expect(
        Command::MassCancel {
            user: 1,
            symbol: None,
        },
        vec![],
    );
    // Before unknown_order.
    v.rejects(
        Command::Amend(amend(1, 1).with_qty(1)),
        Reason::UserSuspended,
    );
    v.rejects(
        Command::Move {
            user: 1,
            order: 1,
            price: 9,
        },
        Reason::UserSuspended,
    );
    v.rejects(
        Command::Reduce {
            user: 1,
            order: 1,
            qty: 1,
        },
        Reason::UnknownOrder,
    );
    // Idempotent, and the other user is untouched.
    v.expect(Command::SuspendUser { user: 1 }, vec![]);
    v.rejects(Command::SuspendUser { user: 9 }, Reason::UnknownUser);
    v.rejects(Command::ResumeUser { user: 9 }, Reason::UnknownUser);
    assert_eq!(v.engine.suspended_users(), vec![1]);
    assert!(v.engine.user_report(1).unwrap().suspended);
    assert_eq!(v.engine.live_orders().len(), 1);
    v.assert_balance(1, "USD", bal(100_010, 0));
    v.expect(Command::ResumeUser { user: 1 }, vec![]);
    v.expect(Command::ResumeUser { user: 1 }, vec![]);
    assert!(v.engine.suspended_users().is_empty());
    v.expect(place(buy(1, 3, 90, 1)), vec![]);
    v.expect(deposit(1, "USD", -10, 53), vec![]);
}

#[test]
fn suspension_survives_a_snapshot_and_is_in_the_state_hash() {
    let mut v = example_venue();
    let before = v.engine.state_hash();
    v.expect(Command::SuspendUser { user: 2 }, vec![]);
    assert_ne!(v.engine.state_hash(), before);
    v.expect(place(gtd(buy(1, 1, 100, 1), 5_000)), vec![]);
    let restored =
        Engine::decode_snapshot(&v.engine.encode_snapshot(), EngineConfig::default()).unwrap();
    assert_eq!(restored.state_hash(), v.engine.state_hash());
    assert_eq!(restored.suspended_users(), vec![2]);
    assert_eq!(restored.live_orders()[0].expire_ts, 5_000);
    assert_eq!(restored.next_expiry(), Some(5_000));
}

/// `set_phase closed` on S: the `phase` event, then the DAY orders' expiries `expiries`.
fn close_expecting(v: &mut Venue, expiries: Vec<OwnedEvent>) {
    let mut events = vec![OwnedEvent::Phase(rialto_core::PhaseChanged {
        symbol: S,
        phase: rialto_core::Phase::Closed,
    })];
    events.extend(expiries);
    v.expect(
        Command::SetPhase {
            symbol: S,
            phase: Some(rialto_core::Phase::Closed),
        },
        events,
    );
}

#[test]
fn closing_a_symbol_expires_its_day_orders_after_the_phase_event() {
    let mut v = example_venue();
    v.expect(place(buy(2, 1, 90, 1).with_tif(Tif::Day)), vec![]);
    v.expect(place(gtd(buy(1, 1, 90, 1), 5_000)), vec![]);
    v.expect(place(buy(1, 2, 90, 1).with_tif(Tif::Day)), vec![]);
    v.expect(place(buy(3, 1, 80, 1)), vec![]);
    // A pending DAY stop-limit too (nothing has traded: every stop is accepted).
    let day_stop = buy(1, 3, 120, 1)
        .with_order_type(OrderType::StopLimit)
        .with_stop_price(110)
        .with_tif(Tif::Day);
    v.expect(place(day_stop), vec![]);
    close_expecting(
        &mut v,
        vec![
            cancelled_x((1, 2), Side::Buy, 1, CancelReason::Expired),
            cancelled_x((1, 3), Side::Buy, 1, CancelReason::Expired),
            cancelled_x((2, 1), Side::Buy, 1, CancelReason::Expired),
        ],
    );
    // The GTD and GTC orders stay.
    let live: Vec<_> = v
        .engine
        .live_orders()
        .iter()
        .map(|o| (o.user, o.order))
        .collect();
    assert_eq!(live, vec![(1, 1), (3, 1)]);
}

/// A DAY order cancelled and placed again under the same id lands in the same node with the
/// same expiry: closing the symbol still ends it once (a found bug: it was cancelled twice).
#[test]
fn closing_ends_a_day_order_placed_again_under_its_id_once() {
    let mut v = example_venue();
    let day = buy(1, 1, 90, 1).with_tif(Tif::Day);
    for _ in 0..3 {
        v.expect(place(day), vec![]);
        v.expect(
            Command::Cancel { user: 1, order: 1 },
            vec![cancelled_x((1, 1), Side::Buy, 1, CancelReason::User)],
        );
    }
    v.expect(place(day), vec![]);
    close_expecting(
        &mut v,
        vec![cancelled_x((1, 1), Side::Buy, 1, CancelReason::Expired)],
    );
    assert!(v.engine.live_orders().is_empty());
}
