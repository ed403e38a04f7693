//! The engine against the model (tests/model): random command streams go to both, and after
//! every command the events, the result and the whole visible state must be the same.

mod model;
mod streams;

use std::collections::BTreeMap;

use model::Model;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{TestCaseError, TestRunner};
use rialto_core::{
    CancelReason, Command, Engine, EngineConfig, OrderId, OrderType, OwnedEvent, Reason, Side,
    SymbolId, SymbolSpec, Tif, UserId,
};
use streams::{Op, View};

impl View for Model {
    fn spec(&self, symbol: SymbolId) -> Option<SymbolSpec> {
        self.symbol(symbol)
    }

    fn symbol_count(&self) -> u32 {
        Model::symbol_count(self)
    }

    fn user_ids(&self) -> Vec<UserId> {
        self.users()
    }

    fn live(&self) -> Vec<(UserId, OrderId, SymbolId)> {
        self.live_orders()
    }

    fn available(&self, user: UserId, currency: &str) -> i64 {
        self.balance(user, currency).map_or(0, |b| b.available)
    }

    fn now(&self) -> i64 {
        Model::now(self)
    }

    fn order_state(&self, user: UserId, order: OrderId) -> Option<(i64, i64)> {
        let remaining = self.order_remaining(user, order)?;
        let live = self.live_order_details();
        let o = live.iter().find(|o| (o.user, o.order) == (user, order))?;
        Some((o.filled, remaining))
    }
}

/// Everything a user or an operator can see, engine against model.
fn compare_state(engine: &Engine, model: &Model) -> Result<(), String> {
    fn same<T: PartialEq + std::fmt::Debug>(what: &str, e: T, m: T) -> Result<(), String> {
        if e == m {
            Ok(())
        } else {
            Err(format!("{what}: engine {e:?}\n  model {m:?}"))
        }
    }
    for s in 0..=model.symbol_count() {
        let id = SymbolId(s);
        same("symbol", engine.symbol(id).copied(), model.symbol(id))?;
        same(
            "resting orders",
            engine.resting_orders(id),
            model.resting_orders(id),
        )?;
        let mut stops = Vec::new();
        engine.pending_stops(id, &mut stops);
        same("pending stops", stops, model.pending_stops(id))?;
        same(
            "last trade",
            engine.symbol_status(id).map_or(0, |s| s.last),
            model.last_trade(id),
        )?;
    }
    for s in 0..=model.symbol_count() {
        let id = SymbolId(s);
        same(
            "symbol status",
            engine.symbol_status(id),
            model.symbol_status(id),
        )?;
    }
    same("venue clock", engine.now(), model.now())?;
    same(
        "live orders",
        engine.live_orders(),
        model.live_order_details(),
    )?;
    same(
        "order id window",
        engine.order_id_window(),
        model.order_id_window(),
    )?;
    same(
        "recent ids",
        engine.recent_order_ids(),
        model.recent_order_ids(),
    )?;
    same("users", engine.users(), model.users())?;
    for user in model.users() {
        same(
            "user report",
            engine.user_report(user),
            model.user_report(user),
        )?;
        for currency in model.currencies() {
            same(
                "balance",
                engine.balance(user, &currency),
                model.balance(user, &currency),
            )?;
        }
    }
    same("venue totals", engine.venue_totals(), model.venue_totals())?;
    same(
        "resting order count",
        engine.resting_order_count(),
        model.resting_order_count(),
    )?;
    for (user, order, _) in model.live_orders() {
        same(
            "order remaining",
            engine.order_remaining(user, order),
            model.order_remaining(user, order),
        )?;
    }
    Ok(())
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    run_with(ops, EngineConfig::default())
}

fn run_with(ops: &[Op], config: EngineConfig) -> Result<(), TestCaseError> {
    let mut engine = Engine::new(config);
    let mut model = Model::with_limits(model::Limits::of(&config));
    let mut history: Vec<Command> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let cmd = streams::command(op, &model);
        let ts = streams::timestamp(op, &model);
        history.push(cmd.clone());
        let seq = i as u64 + 1;
        let mut engine_events: Vec<OwnedEvent> = Vec::new();
        let engine_result = engine.apply(seq, ts.unwrap_or(i64::MIN), &cmd, &mut engine_events);
        let mut model_events: Vec<OwnedEvent> = Vec::new();
        let model_result = model.apply_at(ts, &cmd, &mut model_events);
        let mismatch = if (engine_result, &engine_events) != (model_result, &model_events) {
            Some(format!(
                "result/events: engine {engine_result:?} {engine_events:#?}\n  model {model_result:?} {model_events:#?}"
            ))
        } else {
            compare_state(&engine, &model).err()
        };
        if let Some(why) = mismatch {
            let commands: Vec<String> = history.iter().map(|c| format!("  {c:?}")).collect();
            return Err(TestCaseError::fail(format!(
                "after command #{seq}: {why}\ncommands:\n{}",
                commands.join("\n")
            )));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn engine_matches_model(ops in streams::stream(200..=400)) {
        run(&ops)?;
    }

    /// A future beside spot symbols (docs/rules.md, "Futures"): margin checks, positions,
    /// marks, liquidation passes and the fund, against the model's plain reading of the rules.
    #[test]
    fn engine_matches_model_with_futures(ops in streams::futures_stream(150..=300)) {
        run(&ops)?;
    }

    /// One or two users: self-trade prevention at every turn, FOK walks that meet own orders.
    #[test]
    fn engine_matches_model_with_few_users(ops in streams::stream_of(1..=2, 200..=300)) {
        run(&ops)?;
    }

    /// Limits small enough that `limit_exceeded` meets matching, moves, IOC and FOK orders.
    #[test]
    fn engine_matches_model_with_tight_limits(
        ops in streams::stream(200..=300),
        per_user in 1u32..=4,
        venue in 2u32..=8,
    ) {
        let config = EngineConfig {
            max_open_orders_per_user: per_user,
            max_resting_orders: venue,
            ..EngineConfig::default()
        };
        run_with(&ops, config)?;
    }

    /// Ladders on every side from the first level, with windows of a few prices: the window
    /// moves, fills from and spills into the sorted array all the time (crates/core/src/book.rs).
    #[test]
    fn engine_matches_model_with_tiny_ladders(
        ops in streams::stream(200..=400),
        ladder_min_levels in 1usize..=3,
        ladder_cells in 2usize..=12,
    ) {
        let config = EngineConfig {
            ladder_min_levels,
            ladder_cells,
            ..EngineConfig::default()
        };
        run_with(&ops, config)?;
    }
}

/// Counts what the streams reach, per kind of command: results, trades and cancellations.
fn coverage(streams_count: usize) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::<String, usize>::new();
    let mut runner = TestRunner::deterministic();
    let strategy = streams::stream(200..=400);
    for _ in 0..streams_count {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut engine = Engine::new(EngineConfig::default());
        for (i, op) in ops.iter().enumerate() {
            let cmd = streams::command(op, &engine);
            let ts = streams::timestamp(op, &engine).unwrap_or(i64::MIN);
            let mut events = Vec::new();
            let result = engine.apply(i as u64 + 1, ts, &cmd, &mut events);
            for key in outcomes(&engine, &cmd, result, &events) {
                *seen.entry(key).or_default() += 1;
            }
        }
    }
    seen
}

/// Names for what one command did, e.g. "place: insufficient_funds", "move: trade".
fn outcomes(
    engine: &Engine,
    cmd: &Command,
    result: Result<(), Reason>,
    events: &[OwnedEvent],
) -> Vec<String> {
    let kind = match *cmd {
        Command::AddSymbol(_) => "add_symbol",
        Command::AddUser { .. } => "add_user",
        Command::AdjustBalance { .. } => "adjust_balance",
        Command::Place(p) if p.order_type == Some(OrderType::Market) && p.price.is_none() => {
            "unpriced market"
        }
        Command::Place(p)
            if matches!(p.order_type, Some(OrderType::Stop | OrderType::StopLimit)) =>
        {
            "stop"
        }
        Command::Place(p) if p.display_qty().is_some() => "iceberg",
        Command::Place(_) => "place",
        Command::Cancel { .. } => "cancel",
        Command::SetPhase { .. } => "set_phase",
        Command::SetBand { .. } => "set_band",
        Command::SetRefPrice { .. } => "set_ref_price",
        Command::SuspendUser { .. } => "suspend_user",
        Command::ResumeUser { .. } => "resume_user",
        Command::SetMarkPrice { .. } => "set_mark_price",
        Command::FundInsurance { .. } => "fund_insurance",
        Command::Move { .. } => "move",
        Command::Reduce { .. } => "reduce",
        Command::Amend(_) => "amend",
        Command::MassCancel { .. } => "mass_cancel",
        Command::Book { .. } => "book",
        Command::UserReport { .. } => "user_report",
        Command::VenueReport => "venue_report",
        Command::Tick => "tick",
        Command::SetOrderIdWindow { .. } => "set_order_id_window",
    };
    let mut out = vec![match result {
        Ok(()) => format!("{kind}: ok"),
        Err(reason) => format!("{kind}: {reason}"),
    }];
    let mut reasons = Vec::new();
    for e in events {
        match e {
            OwnedEvent::Trade(_) => out.push(format!("{kind}: trade")),
            OwnedEvent::Amended(a) => out.push(format!("{kind}: {}", a.priority)),
            OwnedEvent::Auction(_) => out.push(format!("{kind}: auction")),
            OwnedEvent::Triggered(_) => out.push(format!("{kind}: triggered")),
            OwnedEvent::Cancelled(c) => {
                out.push(format!("{kind}: cancelled {}", c.reason));
                reasons.push(c.reason);
            }
            _ => {}
        }
    }
    if let (Command::MassCancel { .. }, Ok(())) = (cmd, result) {
        match events.len() {
            0 => out.push(format!("{kind}: nothing to cancel")),
            1 => {}
            _ => out.push(format!("{kind}: several orders")),
        }
    }
    if let (Command::Place(p), Err(Reason::DuplicateOrderId)) = (cmd, result)
        && engine.order_remaining(p.user, p.order).is_none()
    {
        out.push("place: duplicate_order_id of an ended order".into());
    }
    if let (Command::Place(p), Ok(())) = (cmd, result)
        && let Some(tif @ (Tif::Gtd | Tif::Day)) = p.tif
        && engine.order_remaining(p.user, p.order).is_some()
    {
        out.push(format!("place: {tif} rested"));
    }
    if let Command::Place(p) = cmd {
        let stp = p.stp.map_or("none", |s| s.as_str());
        if reasons.contains(&CancelReason::Stp) {
            out.push(format!("stp {stp}"));
        }
        if stp == "cancel_both" && reasons.ends_with(&[CancelReason::Stp, CancelReason::Stp]) {
            out.push("stp cancel_both: maker then taker".into());
        }
        let traded = events.iter().any(|e| matches!(e, OwnedEvent::Trade(_)));
        if p.tif == Some(Tif::Fok) && traded {
            out.push(format!("{kind}: fok filled"));
        }
        // An unpriced market order that stopped with liquidity left on the other side: the funds
        // bound of a buy, the proceeds bound of a sell.
        if kind == "unpriced market" && reasons.last() == Some(&CancelReason::Market) {
            let (bids, asks) = engine.resting_orders(p.symbol);
            let other = if p.side == Some(Side::Buy) {
                asks
            } else {
                bids
            };
            if other.iter().any(|o| o.user != p.user) {
                out.push(format!("{kind}: stopped by its bound, traded {traded}"));
            }
        }
    }
    out
}

#[test]
fn streams_reach_every_rule() {
    // 192: the phase and band commands dilute the rarer outcomes of the others.
    let seen = coverage(192);
    let mut expected: Vec<String> = [
        "place: unknown_user",
        "place: unknown_symbol",
        "place: invalid_order",
        "place: invalid_qty",
        "place: invalid_price",
        "place: duplicate_order_id",
        "place: would_take",
        "place: overflow",
        "place: insufficient_funds",
        "place: trade",
        "place: fok filled",
        "place: cancelled ioc",
        "place: cancelled fok",
        "place: cancelled stp",
        "place: cancelled market",
        "unpriced market: trade",
        "unpriced market: fok filled",
        "unpriced market: cancelled fok",
        "unpriced market: cancelled stp",
        "unpriced market: stopped by its bound, traded true",
        "unpriced market: stopped by its bound, traded false",
        "stp cancel_taker",
        "stp cancel_maker",
        "stp cancel_both",
        "stp cancel_both: maker then taker",
        "move: ok",
        "move: trade",
        "move: cancelled stp",
        "move: unknown_order",
        "move: invalid_price",
        "move: would_take",
        "move: overflow",
        "move: insufficient_funds",
        "amend: kept",
        "amend: lost",
        "amend: trade",
        "amend: cancelled reduce",
        "amend: unknown_order",
        "amend: invalid_order",
        "amend: invalid_qty",
        "amend: invalid_price",
        "amend: would_take",
        "amend: overflow",
        "amend: insufficient_funds",
        "reduce: cancelled reduce",
        "reduce: unknown_order",
        "reduce: invalid_qty",
        "cancel: cancelled user",
        "cancel: unknown_order",
        "mass_cancel: ok",
        "mass_cancel: cancelled user",
        "mass_cancel: nothing to cancel",
        "mass_cancel: several orders",
        "mass_cancel: unknown_user",
        "mass_cancel: unknown_symbol",
        "adjust_balance: ok",
        "adjust_balance: unknown_user",
        "adjust_balance: invalid_qty",
        "adjust_balance: duplicate_tx",
        "adjust_balance: insufficient_funds",
        "adjust_balance: overflow",
        "add_symbol: ok",
        "add_symbol: duplicate_symbol",
        "add_symbol: invalid_symbol",
        "add_user: ok",
        "add_user: duplicate_user",
        "book: ok",
        "book: unknown_symbol",
        "book: invalid_qty",
        "user_report: ok",
        "user_report: unknown_user",
        "venue_report: ok",
        "tick: ok",
        "set_order_id_window: ok",
        "set_order_id_window: invalid_qty",
        "place: duplicate_order_id of an ended order",
        "place: user_suspended",
        "move: user_suspended",
        "amend: user_suspended",
        "adjust_balance: user_suspended",
        "suspend_user: ok",
        "suspend_user: cancelled suspended",
        "suspend_user: unknown_user",
        "resume_user: ok",
        "tick: cancelled expired",
        "place: cancelled expired",
        "place: gtd rested",
        "set_phase: cancelled expired",
        "place: day rested",
        "set_phase: ok",
        "set_phase: unknown_symbol",
        "set_phase: invalid_phase",
        "set_phase: trade",
        "set_phase: auction",
        "set_band: ok",
        "set_band: unknown_symbol",
        "set_band: invalid_qty",
        "set_ref_price: ok",
        "set_ref_price: unknown_symbol",
        "set_ref_price: invalid_price",
        "place: symbol_halted",
        "place: symbol_closed",
        "place: symbol_in_auction",
        "place: price_out_of_band",
        "unpriced market: cancelled band",
        "amend: price_out_of_band",
        "amend: symbol_halted",
        "move: price_out_of_band",
        "move: symbol_halted",
        "stop: ok",
        "stop: would_trigger",
        "stop: invalid_order",
        "stop: invalid_price",
        "stop: insufficient_funds",
        "place: triggered",
        "move: triggered",
        "amend: triggered",
        "iceberg: ok",
        "iceberg: invalid_qty",
        "iceberg: invalid_order",
        "iceberg: trade",
        "move: invalid_order",
        "cancel: ok",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    expected.retain(|key| seen.get(key).copied().unwrap_or(0) < 5);
    assert!(
        expected.is_empty(),
        "192 streams reach these fewer than 5 times: {expected:?}\nall: {seen:#?}"
    );
    let trades: usize = seen
        .iter()
        .filter(|(k, _)| k.ends_with(": trade"))
        .map(|(_, v)| v)
        .sum();
    // 10 a stream: halts, closes and calls (no trading) and the new order kinds take their share.
    assert!(trades >= 192 * 10, "only {trades} trades in 192 streams");
}

/// The futures streams reach what the futures rules are about: margin refusals, trades that
/// move positions, mark moves, liquidations (with and without a shortfall), the fund.
#[test]
fn futures_streams_reach_every_futures_rule() {
    let mut seen = BTreeMap::<&str, usize>::new();
    let mut runner = TestRunner::deterministic();
    let strategy = streams::futures_stream(150..=300);
    for _ in 0..64 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut engine = Engine::new(EngineConfig::default());
        for (i, op) in ops.iter().enumerate() {
            let cmd = streams::command(op, &engine);
            let ts = streams::timestamp(op, &engine).unwrap_or(i64::MIN);
            let mut events = Vec::new();
            let result = engine.apply(i as u64 + 1, ts, &cmd, &mut events);
            let mut note = |key| *seen.entry(key).or_default() += 1;
            match (&cmd, result) {
                (_, Err(Reason::InsufficientMargin)) => note("insufficient_margin"),
                (Command::SetMarkPrice { .. }, Ok(())) => note("mark moved"),
                (Command::SetMarkPrice { .. }, Err(Reason::Overflow)) => note("mark overflow"),
                (Command::FundInsurance { .. }, Ok(())) => note("fund"),
                (Command::Place(_), Err(Reason::Overflow)) => note("order overflow"),
                (Command::Place(p), r) if p.symbol == SymbolId(0) => note(match r {
                    Ok(()) => "futures place ok",
                    Err(reason) => reason.as_str(),
                }),
                _ => {}
            }
            for e in &events {
                match e {
                    OwnedEvent::Trade(t) if engine.symbol_status(t.symbol).unwrap().future => {
                        note("futures trade")
                    }
                    OwnedEvent::Liquidated(l) if l.shortfall > 0 => note("liquidation, fund pays"),
                    OwnedEvent::Liquidated(_) => note("liquidation"),
                    OwnedEvent::Cancelled(c) if c.reason == CancelReason::Liquidation => {
                        note("liquidation cancel")
                    }
                    _ => {}
                }
            }
        }
    }
    println!("{seen:#?}");
    for key in [
        "insufficient_margin",
        "mark moved",
        "fund",
        "futures trade",
        "liquidation",
        "liquidation, fund pays",
        "order overflow",
    ] {
        assert!(
            seen.get(key).copied().unwrap_or(0) > 0,
            "never reached: {key}; {seen:#?}"
        );
    }
}
