//! Invariants of the engine over random command streams (tests/streams), checked after every
//! command: funds and quantity are conserved, nothing goes negative, books are crossed only
//! outside `continuous`,
//! a rejected command changes nothing, replays and snapshot restores are exact, and corrupt
//! snapshot bytes are refused rather than trusted.

mod streams;

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rialto_core::{
    CancelReason, Command, Engine, EngineConfig, OrderId, OwnedEvent, Phase, PlaceOrder, Reason,
    Side, SymbolId, UserId,
};
use streams::{Op, View};

type Outcome = (Result<(), Reason>, Vec<OwnedEvent>);

/// Applies `cmd` at time `ts` (none: it carries no time and the clock stays).
fn apply(engine: &mut Engine, seq: u64, ts: Option<i64>, cmd: &Command) -> Outcome {
    let mut events = Vec::new();
    let result = engine.apply(seq, ts.unwrap_or(i64::MIN), cmd, &mut events);
    (result, events)
}

fn fail(what: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(what.into())
}

/// The state invariants: conservation per currency, no negative amount, every user's `held`
/// equal to what its live orders (resting and pending stops) hold, books in priority order and
/// never crossed, stops in trigger order.
fn check_state(engine: &Engine) -> Result<(), String> {
    // Expiry comes first in every command: after one, no live order is past its time.
    if let Some(o) = engine
        .live_orders()
        .iter()
        .find(|o| o.expire_ts != 0 && o.expire_ts <= engine.now())
    {
        return Err(format!(
            "order {o:?} is live at {} past its expiry",
            engine.now()
        ));
    }
    let suspended = engine.suspended_users();
    if let Some(o) = engine
        .live_orders()
        .iter()
        .find(|o| suspended.contains(&o.user))
    {
        return Err(format!("suspended user {} has a live order {o:?}", o.user));
    }
    let totals = engine.venue_totals();
    for t in &totals {
        let name = t.currency;
        if t.deposits < 0 || t.withdrawals < 0 || t.available < 0 || t.held < 0 || t.fees < 0 {
            return Err(format!("{name}: a negative total in {t:?}"));
        }
        let have = t.available as i128 + t.held as i128 + t.fees as i128;
        if have != t.deposits as i128 - t.withdrawals as i128 {
            return Err(format!("{name} is not conserved: {t:?}"));
        }
    }

    // What the resting orders hold, per (user, currency).
    let mut holds: BTreeMap<(UserId, String), i128> = BTreeMap::new();
    let mut resting = 0;
    for s in 0..View::symbol_count(engine) {
        let symbol = SymbolId(s);
        let spec = *engine.symbol(symbol).ok_or("a counted symbol is missing")?;
        let (bids, asks) = engine.resting_orders(symbol);
        resting += bids.len() + asks.len();
        for (side, orders) in [(Side::Buy, &bids), (Side::Sell, &asks)] {
            for pair in orders.windows(2) {
                let in_order = match side {
                    Side::Buy => pair[0].price >= pair[1].price,
                    Side::Sell => pair[0].price <= pair[1].price,
                };
                if !in_order {
                    return Err(format!("{symbol:?} {side} out of priority order: {pair:?}"));
                }
            }
            for o in orders.iter() {
                if o.side != side || o.remaining <= 0 || o.price <= 0 {
                    return Err(format!("{symbol:?}: bad resting order {o:?}"));
                }
                if engine.order_remaining(o.user, o.order) != Some(o.remaining) {
                    return Err(format!("order_remaining disagrees with the book for {o:?}"));
                }
                let (currency, per_lot) = match side {
                    Side::Buy => (
                        spec.quote,
                        o.price as i128 * spec.quote_scale as i128 + spec.taker_fee as i128,
                    ),
                    Side::Sell => (spec.base, spec.base_scale as i128),
                };
                *holds
                    .entry((o.user, currency.as_str().to_string()))
                    .or_default() += per_lot * o.remaining as i128;
            }
        }
        // Pending stops are live and hold funds too, and come in trigger order.
        let mut stops = Vec::new();
        engine.pending_stops(symbol, &mut stops);
        resting += stops.len();
        for pair in stops.windows(2) {
            let in_order = match (pair[0].side, pair[1].side) {
                (Side::Buy, Side::Buy) => pair[0].stop_price <= pair[1].stop_price,
                (Side::Sell, Side::Sell) => pair[0].stop_price >= pair[1].stop_price,
                (Side::Buy, Side::Sell) => true,
                (Side::Sell, Side::Buy) => false,
            };
            if !in_order {
                return Err(format!("{symbol:?} stops out of trigger order: {pair:?}"));
            }
        }
        for stop in &stops {
            if engine.order_remaining(stop.user, stop.order) != Some(stop.remaining) {
                return Err(format!("order_remaining disagrees with the stop {stop:?}"));
            }
            let (currency, per_lot) = match stop.side {
                Side::Buy if stop.price > 0 => (
                    spec.quote,
                    stop.price as i128 * spec.quote_scale as i128 + spec.taker_fee as i128,
                ),
                Side::Buy => return Err(format!("a stop buy without a price: {stop:?}")),
                Side::Sell => (spec.base, spec.base_scale as i128),
            };
            *holds
                .entry((stop.user, currency.as_str().to_string()))
                .or_default() += per_lot * stop.remaining as i128;
        }
        // Only an auction's call (or a halt or close that follows one) leaves a book crossed:
        // entering `continuous` uncrosses it.
        let continuous = engine.symbol_status(symbol).map(|s| s.phase) == Some(Phase::Continuous);
        if let (Some(bid), Some(ask), true) = (bids.first(), asks.first(), continuous)
            && bid.price >= ask.price
        {
            return Err(format!("{symbol:?} is crossed: {bid:?} / {ask:?}"));
        }
    }
    if engine.resting_order_count() != resting {
        return Err(format!(
            "resting_order_count {} but the books hold {resting}",
            engine.resting_order_count()
        ));
    }

    let mut sums: BTreeMap<String, (i128, i128)> = BTreeMap::new();
    for user in engine.users() {
        let report = engine
            .user_report(user)
            .ok_or("a listed user has no report")?;
        for (currency, b) in &report.balances {
            if b.available < 0 || b.held < 0 {
                return Err(format!("user {user} {currency}: negative {b:?}"));
            }
            if engine.balance(user, currency.as_str()) != Some(*b) {
                return Err(format!(
                    "user {user} {currency}: balance() and report disagree"
                ));
            }
            let want = holds
                .remove(&(user, currency.as_str().to_string()))
                .unwrap_or(0);
            if b.held as i128 != want {
                return Err(format!(
                    "user {user} {currency}: held {} but its orders hold {want}",
                    b.held
                ));
            }
            let sum = sums.entry(currency.as_str().to_string()).or_default();
            sum.0 += b.available as i128;
            sum.1 += b.held as i128;
        }
    }
    if let Some(((user, currency), hold)) = holds.into_iter().find(|(_, h)| *h != 0) {
        return Err(format!(
            "user {user}'s orders hold {hold} {currency} it does not have"
        ));
    }
    for t in &totals {
        let (available, held) = sums.remove(t.currency.as_str()).unwrap_or((0, 0));
        if (available, held) != (t.available as i128, t.held as i128) {
            return Err(format!(
                "{}: venue totals {t:?}, users sum to {available}/{held}",
                t.currency
            ));
        }
    }
    Ok(())
}

/// Quantity conservation: for every accepted order, qty = traded + cancelled + remaining.
#[derive(Default)]
struct QtyLedger {
    /// Orders placed and not yet finished: qty, traded, cancelled.
    open: BTreeMap<(UserId, OrderId), (i64, i64, i64)>,
}

impl QtyLedger {
    /// Step 1's expiries: each ends its order in full.
    fn expire(&mut self, events: &[OwnedEvent]) -> Result<(), String> {
        for event in events {
            let OwnedEvent::Cancelled(c) = event else {
                return Err(format!("step 1 reported {event:?}"));
            };
            let (qty, traded, cancelled) = self
                .open
                .remove(&(c.user, c.order))
                .ok_or_else(|| format!("expired an order not live: {c:?}"))?;
            if traded + cancelled + c.qty != qty || c.reason != CancelReason::Expired {
                return Err(format!("{c:?} of an order of {qty} with {traded} traded"));
            }
        }
        Ok(())
    }

    fn record(&mut self, engine: &Engine, cmd: &Command, outcome: &Outcome) -> Result<(), String> {
        let (result, events) = outcome;
        if let (Ok(()), Command::Place(p)) = (result, cmd)
            && self.open.insert((p.user, p.order), (p.qty, 0, 0)).is_some()
        {
            return Err(format!("placed {p:?} over a live order"));
        }
        for event in events {
            let mut add = |key: (UserId, OrderId), traded: i64, cancelled: i64| {
                let rec = self
                    .open
                    .get_mut(&key)
                    .ok_or_else(|| format!("an event names an order not live: {event:?}"))?;
                rec.1 += traded;
                rec.2 += cancelled;
                Ok::<(), String>(())
            };
            match event {
                OwnedEvent::Trade(t) => {
                    if t.qty <= 0 {
                        return Err(format!("empty trade {t:?}"));
                    }
                    add((t.maker_user, t.maker_order), t.qty, 0)?;
                    add((t.taker_user, t.taker_order), t.qty, 0)?;
                }
                OwnedEvent::Cancelled(c) => {
                    if c.qty <= 0 {
                        return Err(format!("empty cancellation {c:?}"));
                    }
                    add((c.user, c.order), 0, c.qty)?;
                }
                OwnedEvent::Amended(a) => {
                    // An amend sets a new total: what traded, what was cancelled, and the new
                    // remaining.
                    let rec = self
                        .open
                        .get_mut(&(a.user, a.order))
                        .ok_or_else(|| format!("an amend names an order not live: {a:?}"))?;
                    rec.0 = rec.1 + rec.2 + a.qty;
                }
                _ => {}
            }
        }
        let mut broken = None;
        self.open
            .retain(|&(user, order), &mut (qty, traded, cancelled)| {
                let remaining = engine.order_remaining(user, order).unwrap_or(0);
                if traded + cancelled + remaining != qty {
                    broken = Some(format!(
                        "order ({user}, {order}): qty {qty} != traded {traded} + cancelled \
                     {cancelled} + remaining {remaining}"
                    ));
                }
                remaining > 0
            });
        if let Some(broken) = broken {
            return Err(broken);
        }
        if self.open.len() != engine.resting_order_count() {
            return Err("a live order was never placed".into());
        }
        for o in engine.live_orders() {
            let traded = self.open.get(&(o.user, o.order)).map_or(0, |rec| rec.1);
            if o.filled != traded {
                return Err(format!("{o:?} filled, but its trades add up to {traded}"));
            }
        }
        Ok(())
    }
}

/// After an accepted mass cancel: none of the user's orders is left where it cancelled, each
/// event is a `user` cancellation of one of them, in canonical order (symbol name, then order
/// id), and nothing to cancel means nothing changed.
fn check_mass_cancel(
    engine: &Engine,
    user: UserId,
    symbol: Option<SymbolId>,
    events: &[OwnedEvent],
    hash_before: [u8; 32],
) -> Result<(), String> {
    let name_of = |id: SymbolId| engine.symbol(id).map(|s| s.symbol);
    let wanted = symbol.map(name_of);
    let report = engine
        .user_report(user)
        .ok_or("mass cancel of an unknown user")?;
    if let Some(o) = report
        .orders
        .iter()
        .find(|o| wanted.is_none_or(|w| w == Some(o.symbol)))
    {
        return Err(format!("mass cancel left {o:?}"));
    }
    let mut keys = Vec::new();
    for event in events {
        let OwnedEvent::Cancelled(c) = event else {
            return Err(format!("mass cancel emitted {event:?}"));
        };
        if c.user != user || c.reason != CancelReason::User || symbol.is_some_and(|s| s != c.symbol)
        {
            return Err(format!("mass cancel emitted {c:?}"));
        }
        let name = name_of(c.symbol).ok_or("a cancellation on an unknown symbol")?;
        keys.push((name.as_str().to_string(), c.order));
    }
    if !keys.is_sorted() {
        return Err(format!("mass cancel out of canonical order: {keys:?}"));
    }
    if events.is_empty() && engine.state_hash() != hash_before {
        return Err("a mass cancel with nothing to cancel changed the state".into());
    }
    Ok(())
}

fn is_query(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Book { .. } | Command::UserReport { .. } | Command::VenueReport
    )
}

fn check_stream(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut engine = Engine::new(EngineConfig::default());
    let mut ledger = QtyLedger::default();
    let mut history = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let cmd = streams::command(op, &engine);
        let ts = streams::timestamp(op, &engine);
        history.push(cmd.clone());
        let seq = i as u64 + 1;
        let now_before = engine.now();
        // Step 1 (the clock and the expiries it brings) stands even for a rejected command:
        // compare with the state after a tick at the same time.
        let (hash_before, step_one) = match ts {
            None => (engine.state_hash(), Vec::new()),
            Some(ts) => {
                let mut twin =
                    Engine::decode_snapshot(&engine.encode_snapshot(), EngineConfig::default())
                        .map_err(|e| fail(format!("snapshot: {e}")))?;
                let (_, events) = apply(&mut twin, seq, Some(ts), &Command::Tick);
                (twin.state_hash(), events)
            }
        };
        let outcome = apply(&mut engine, seq, ts, &cmd);
        let checked = (|| {
            let (result, events) = &outcome;
            if !events.starts_with(&step_one) {
                return Err(format!(
                    "expiries {step_one:?} do not come first in {events:?}"
                ));
            }
            let events = &events[step_one.len()..].to_vec();
            let killed_fok = matches!(
                events.as_slice(),
                [OwnedEvent::Cancelled(c)] if c.reason == CancelReason::Fok
            );
            // A killed fill-or-kill changes nothing, but for its id under an order-id window.
            let killed_fok = killed_fok && engine.order_id_window() == 0;
            if result.is_err() || is_query(&cmd) || killed_fok || matches!(cmd, Command::Tick) {
                if result.is_err() && !events.is_empty() {
                    return Err(format!("rejected, yet emitted {events:?}"));
                }
                if engine.state_hash() != hash_before {
                    return Err(format!("{result:?}, yet the state changed"));
                }
            }
            if engine.last_seq() != seq {
                return Err(format!("last_seq {} after seq {seq}", engine.last_seq()));
            }
            let now_expected = ts.map_or(now_before, |ts| ts.max(now_before));
            if engine.now() != now_expected {
                return Err(format!(
                    "clock {} after {now_before} and {ts:?}",
                    engine.now()
                ));
            }
            check_state(&engine)?;
            if let (Ok(()), &Command::MassCancel { user, symbol }) = (result, &cmd) {
                check_mass_cancel(&engine, user, symbol, events, hash_before)?;
            }
            ledger.expire(&step_one)?;
            ledger.record(&engine, &cmd, &(*result, events.clone()))
        })();
        if let Err(why) = checked {
            let commands: Vec<String> = history.iter().map(|c| format!("  {c:?}")).collect();
            return Err(fail(format!(
                "after command #{seq} {cmd:?} -> {:?}: {why}\ncommands:\n{}",
                outcome.0,
                commands.join("\n")
            )));
        }
    }
    Ok(())
}

/// Applies the stream to two engines side by side (the second built with `config`); from
/// `restore_at` on, the second is a copy restored from the first's snapshot. Events, results and
/// hashes must stay identical.
fn check_twin(
    ops: &[Op],
    restore_at: Option<usize>,
    config: EngineConfig,
) -> Result<(), TestCaseError> {
    let mut first = Engine::new(EngineConfig::default());
    let mut second = Engine::new(config);
    for (i, op) in ops.iter().enumerate() {
        if restore_at == Some(i) {
            let bytes = first.encode_snapshot();
            second = Engine::decode_snapshot(&bytes, config)
                .map_err(|e| fail(format!("own snapshot refused after #{i}: {e:?}")))?;
            prop_assert_eq!(second.state_hash(), first.state_hash());
            prop_assert_eq!(
                Engine::snapshot_state_hash(&bytes),
                Some(first.state_hash())
            );
            prop_assert_eq!(second.last_seq(), first.last_seq());
            prop_assert!(second.encode_snapshot() == bytes, "re-encoding differs");
        }
        let cmd = streams::command(op, &first);
        let ts = streams::timestamp(op, &first);
        let seq = i as u64 + 1;
        let a = apply(&mut first, seq, ts, &cmd);
        let b = apply(&mut second, seq, ts, &cmd);
        prop_assert_eq!(&a, &b, "command #{} {:?}", seq, cmd);
        prop_assert_eq!(first.state_hash(), second.state_hash(), "after #{}", seq);
    }
    prop_assert!(first.encode_snapshot() == second.encode_snapshot());
    Ok(())
}

fn run_to_end(ops: &[Op]) -> Engine {
    let mut engine = Engine::new(EngineConfig::default());
    for (i, op) in ops.iter().enumerate() {
        let cmd = streams::command(op, &engine);
        let ts = streams::timestamp(op, &engine);
        let _ = apply(&mut engine, i as u64 + 1, ts, &cmd);
    }
    engine
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    Truncate(usize),
    FlipBit(usize, u8),
    Append(u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        1 => any::<usize>().prop_map(Damage::Truncate),
        4 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Damage::FlipBit(at, bit)),
        1 => any::<u8>().prop_map(Damage::Append),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariants_hold_after_every_command(ops in streams::stream(200..=400)) {
        check_stream(&ops)?;
    }

    /// The hash depends on the state, not on the history: an order placed and cancelled again
    /// (or refused) leaves no trace in it, unless the order-id window keeps its id.
    #[test]
    fn an_order_placed_and_cancelled_leaves_the_hash_as_it_was(
        ops in streams::stream(100..=300),
        who in any::<prop::sample::Index>(),
        symbol in 0u32..3,
        buy in any::<bool>(),
        price in 1i64..=12,
    ) {
        let mut engine = run_to_end(&ops);
        let window_keeps_ids = engine.order_id_window() > 0;
        let users = engine.users();
        let user = users[who.index(users.len())];
        // 999 is not among the stream's order ids, so it cannot be a live one.
        let side = if buy { Side::Buy } else { Side::Sell };
        let place = PlaceOrder::limit(user, 999, SymbolId(symbol), side, price, 1);
        let hash = engine.state_hash();
        let seq = engine.last_seq() + 1;
        let (result, events) = apply(&mut engine, seq, None, &Command::Place(place));
        prop_assume!(events.is_empty(), "it traded");
        if result.is_ok() {
            let (cancel, _) = apply(&mut engine, seq + 1, None, &Command::Cancel { user, order: 999 });
            prop_assert_eq!(cancel, Ok(()));
        }
        if result.is_ok() && window_keeps_ids {
            let kept = engine.recent_order_ids().iter().any(|&(u, o, _)| (u, o) == (user, 999));
            prop_assert!(kept, "the window forgot the id of an order that just ended");
        } else {
            prop_assert_eq!(engine.state_hash(), hash, "{:?} left a trace", result);
        }
    }

    #[test]
    fn replaying_a_stream_gives_the_same_events_and_state(ops in streams::stream(200..=300)) {
        check_twin(&ops, None, EngineConfig::default())?;
    }

    /// The per-side level hint, the hash seed (it only places keys in buckets) and the ladder
    /// (it only indexes levels): none of them may change a single event or hash.
    #[test]
    fn tuning_changes_nothing(
        ops in streams::stream(200..=300),
        levels in 0usize..=2,
        hash_seed in any::<u64>(),
        ladder_min_levels in 1usize..=200,
        ladder_cells in 2usize..=100,
    ) {
        let config = EngineConfig {
            expected_levels_per_side: levels,
            hash_seed,
            ladder_min_levels,
            ladder_cells,
            ..EngineConfig::default()
        };
        check_twin(&ops, None, config)?;
    }

    /// Prefetching only reads: the same stream applied with `prefetch_ahead` before every
    /// command gives the same results, events and state as without it.
    #[test]
    fn prefetching_changes_nothing(ops in streams::stream(200..=300)) {
        let mut plain = Engine::new(EngineConfig::default());
        let mut commands = Vec::new();
        let mut times = Vec::new();
        let mut outcomes = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let cmd = streams::command(op, &plain);
            let ts = streams::timestamp(op, &plain);
            outcomes.push(apply(&mut plain, i as u64 + 1, ts, &cmd));
            commands.push(cmd);
            times.push(ts);
        }
        let mut prefetching = Engine::new(EngineConfig::default());
        for (i, cmd) in commands.iter().enumerate() {
            prefetching.prefetch_ahead(&commands[i..]);
            let outcome = apply(&mut prefetching, i as u64 + 1, times[i], cmd);
            prop_assert_eq!(&outcome, &outcomes[i], "command #{} {:?}", i + 1, cmd);
        }
        prop_assert_eq!(prefetching.state_hash(), plain.state_hash());
    }

    #[test]
    fn restoring_a_snapshot_mid_stream_changes_nothing(
        ops in streams::stream(200..=300),
        cut in any::<prop::sample::Index>(),
    ) {
        let at = cut.index(ops.len());
        check_twin(&ops, Some(at), EngineConfig::default())?;
    }

    #[test]
    fn damaged_snapshots_are_refused_or_valid(
        ops in streams::stream(50..=150),
        damages in prop::collection::vec(damage(), 1..32),
    ) {
        let engine = run_to_end(&ops);
        let bytes = engine.encode_snapshot();
        for d in damages {
            let mut bad = bytes.clone();
            match d {
                Damage::Truncate(at) => bad.truncate(at % bytes.len()),
                Damage::FlipBit(at, bit) => bad[at % bytes.len()] ^= 1 << bit,
                Damage::Append(byte) => bad.push(byte),
            }
            match Engine::decode_snapshot(&bad, EngineConfig::default()) {
                Err(_) => {}
                Ok(decoded) => {
                    prop_assert!(
                        matches!(d, Damage::FlipBit(..)),
                        "{:?} was accepted", d
                    );
                    // Whatever it decoded to is a state the rules allow, encoded canonically,
                    // and the engine keeps working on it.
                    check_state(&decoded).map_err(|e| fail(format!("{d:?} decoded: {e}")))?;
                    prop_assert!(decoded.encode_snapshot() == bad, "{:?}: not canonical", d);
                    let mut decoded = decoded;
                    let mut seq = decoded.last_seq();
                    for op in ops.iter().rev().take(20) {
                        seq = seq.wrapping_add(1);
                        let cmd = streams::command(op, &decoded);
                        let ts = streams::timestamp(op, &decoded);
                        let _ = apply(&mut decoded, seq, ts, &cmd);
                        check_state(&decoded)
                            .map_err(|e| fail(format!("{d:?} then {cmd:?}: {e}")))?;
                    }
                }
            }
        }
    }
}

#[test]
fn a_restored_engine_continues_from_the_snapshots_sequence_number() {
    let mut engine = Engine::new(EngineConfig::default());
    assert_eq!(
        apply(&mut engine, 7, None, &Command::AddUser { user: 1 }).0,
        Ok(())
    );
    assert_eq!(engine.last_seq(), 7);
    let bytes = engine.encode_snapshot();
    let restored = Engine::decode_snapshot(&bytes, EngineConfig::default()).unwrap();
    assert_eq!(restored.last_seq(), 7);
    assert_eq!(restored.encode_snapshot(), bytes);
}

#[test]
fn a_snapshot_of_a_fresh_engine_restores() {
    let engine = Engine::new(EngineConfig::default());
    let bytes = engine.encode_snapshot();
    let restored = Engine::decode_snapshot(&bytes, EngineConfig::default()).unwrap();
    assert_eq!(restored.state_hash(), engine.state_hash());
    assert_eq!(restored.encode_snapshot(), bytes);
    assert!(Engine::decode_snapshot(&[], EngineConfig::default()).is_err());
    assert!(Engine::decode_snapshot(&bytes[..bytes.len() - 1], EngineConfig::default()).is_err());
}

#[test]
fn the_hex_hash_and_symbol_lookups_agree_with_the_state() {
    let mut engine = Engine::new(EngineConfig::default());
    let hex = |hash: [u8; 32]| hash.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(engine.state_hash_hex(), hex(engine.state_hash()));
    let empty_hash = engine.state_hash();
    let spec = rialto_core::SymbolSpec {
        symbol: rialto_core::Name::new("BTC-USD").unwrap(),
        base: rialto_core::Name::new("BTC").unwrap(),
        quote: rialto_core::Name::new("USD").unwrap(),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: rialto_core::SymbolSpec::SPOT,
    };
    assert_eq!(
        apply(&mut engine, 1, None, &Command::AddSymbol(Box::new(spec))).0,
        Ok(())
    );
    assert_ne!(engine.state_hash(), empty_hash);
    assert_eq!(engine.state_hash_hex(), hex(engine.state_hash()));
    assert_eq!(engine.state_hash_hex().len(), 64);
    assert_eq!(engine.symbol_id("BTC-USD"), SymbolId(0));
    assert_eq!(engine.symbol_id("ETH-USD"), SymbolId::NONE);
    assert_eq!(engine.symbol(SymbolId(0)), Some(&spec));
    assert_eq!(engine.symbol(SymbolId(1)), None);
    assert_eq!(engine.symbol(SymbolId::NONE), None);
    assert_eq!(engine.symbols_by_name(), vec![(SymbolId(0), spec)]);
}
