//! A client that loads a snapshot and applies the updates after it holds exactly the engine's
//! book: after a long random run, and after a gap it detected and recovered from.

use rialto_core::{
    AmendOrder, Command, Engine, EngineConfig, Name, OrderType, OwnedEvent, PlaceOrder, Side, Stp,
    SymbolId, SymbolSpec, Tif,
};
use rialto_marketdata::{Feed, L2Mirror, L3Mirror, MirrorError, Update};

mod common;
use common::Rng;

const USERS: i64 = 6;
const SYMBOLS: u32 = 2;

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

fn set_up(engine: &mut Engine, feed: &mut Feed, seq: &mut u64) {
    let mut commands = Vec::new();
    for (i, sym) in ["AAA-USD", "BBB-USD"].iter().enumerate() {
        commands.push(Command::AddSymbol(Box::new(SymbolSpec {
            symbol: name(sym),
            base: name(&sym[..3]),
            quote: name("USD"),
            base_scale: 10,
            quote_scale: 1,
            maker_fee: 0,
            taker_fee: i as i64,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        })));
    }
    for user in 1..=USERS {
        commands.push(Command::AddUser { user });
        for currency in ["AAA", "BBB", "USD"] {
            commands.push(Command::AdjustBalance {
                user,
                currency: name(currency),
                amount: 1_000_000_000_000,
                tx: user * 10 + currency.len() as i64 + currency.as_bytes()[0] as i64 * 100,
            });
        }
    }
    for cmd in commands {
        apply(engine, feed, seq, &cmd);
    }
}

/// Applies a command to the engine and then to the feed; returns the feed's updates.
fn apply(engine: &mut Engine, feed: &mut Feed, seq: &mut u64, cmd: &Command) -> Vec<Update> {
    *seq += 1;
    let mut events: Vec<OwnedEvent> = Vec::new();
    let ts_ns = *seq as i64 * 7_000_000_000; // a few trades a minute: several candles
    feed.clear_updates();
    // Every prefetch step sees this command as the one ahead of it (they read real entries:
    // the order it names, its symbol, its slot); the books rebuilt below show they change
    // nothing.
    feed.prefetch_upcoming(|_| Some(cmd));
    let accepted = engine.apply(*seq, ts_ns, cmd, &mut events).is_ok();
    feed.apply(ts_ns, cmd, accepted, &events);
    feed.updates().to_vec()
}

fn random_command(rng: &mut Rng, live: &[(i64, i64)], next_order: &mut i64) -> Command {
    let user = 1 + rng.below(USERS as u64) as i64;
    let symbol = SymbolId(rng.below(SYMBOLS as u64) as u32);
    let pick = |rng: &mut Rng| live[rng.below(live.len() as u64) as usize];
    let price = 100 + rng.below(20) as i64;
    match rng.below(100) {
        0..=49 => {
            *next_order += 1;
            let side = if rng.below(2) == 0 {
                Side::Buy
            } else {
                Side::Sell
            };
            let mut p = PlaceOrder::limit(
                user,
                *next_order,
                symbol,
                side,
                price,
                1 + rng.below(9) as i64,
            );
            p = match rng.below(10) {
                0 => p.with_tif(Tif::Ioc),
                1 => p.with_tif(Tif::Fok),
                2 => PlaceOrder {
                    order_type: Some(OrderType::Market),
                    tif: Some(Tif::Ioc),
                    price: None,
                    ..p
                },
                3 => p.with_post_only(),
                _ => p,
            };
            Command::Place(p.with_stp(match rng.below(3) {
                0 => Stp::CancelMaker,
                1 => Stp::CancelBoth,
                _ => Stp::CancelTaker,
            }))
        }
        50..=64 if !live.is_empty() => {
            let (user, order) = pick(rng);
            Command::Cancel { user, order }
        }
        65..=74 if !live.is_empty() => {
            let (user, order) = pick(rng);
            Command::Move { user, order, price }
        }
        // Amends that keep the place (a smaller total), lose it (a new price or a larger
        // total, trading at once when they cross) or end the order (a total at or below
        // what has filled).
        75..=84 if !live.is_empty() => {
            let (user, order) = pick(rng);
            let new_price = (rng.below(2) == 0).then_some(price);
            let qty = (new_price.is_none() || rng.below(2) == 0).then(|| 1 + rng.below(9) as i64);
            Command::Amend(AmendOrder::with_fields(user, order, new_price, qty, None))
        }
        85..=97 if !live.is_empty() => {
            let (user, order) = pick(rng);
            Command::Reduce {
                user,
                order,
                qty: 1 + rng.below(4) as i64,
            }
        }
        98 => Command::MassCancel {
            user,
            symbol: Some(symbol),
        },
        _ => Command::MassCancel { user, symbol: None },
    }
}

/// The engine's book as an L3 client would see it: (price, qty) of each order in priority
/// order, and the aggregated levels.
type Levels = Vec<(i64, i64)>;

fn engine_view(engine: &Engine, symbol: SymbolId) -> (Levels, Levels) {
    let (bids, asks) = engine.resting_orders(symbol);
    let orders =
        |v: &[rialto_core::RestingOrder]| v.iter().map(|o| (o.price, o.remaining)).collect();
    (orders(&bids), orders(&asks))
}

fn levels(orders: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &(price, qty) in orders {
        match out.last_mut() {
            Some(last) if last.0 == price => last.1 += qty,
            _ => out.push((price, qty)),
        }
    }
    out
}

fn check(engine: &Engine, symbol: SymbolId, l2: &L2Mirror, l3: &L3Mirror) {
    let (bids, asks) = engine_view(engine, symbol);
    let mirrored = |side| {
        l3.book()
            .orders_in_priority(side)
            .iter()
            .map(|o| (o.price, o.qty))
            .collect::<Vec<_>>()
    };
    assert_eq!(mirrored(Side::Buy), bids, "L3 bids of {symbol:?}");
    assert_eq!(mirrored(Side::Sell), asks, "L3 asks of {symbol:?}");
    assert_eq!(l2.bids(), levels(&bids), "L2 bids of {symbol:?}");
    assert_eq!(l2.asks(), levels(&asks), "L2 asks of {symbol:?}");
}

/// The last BBO published for a symbol equals the engine's best levels.
fn check_bbo(engine: &Engine, symbol: SymbolId, published: Bbo) {
    let (bids, asks) = engine_view(engine, symbol);
    let best = |orders: &[(i64, i64)]| levels(orders).first().copied();
    assert_eq!(published, (best(&bids), best(&asks)), "BBO of {symbol:?}");
}

type Bbo = (Option<(i64, i64)>, Option<(i64, i64)>);

fn run(seed: u64, commands: usize, gap_at: Option<usize>) {
    let mut engine = Engine::new(EngineConfig::default());
    let mut feed = Feed::new();
    let mut seq = 0;
    set_up(&mut engine, &mut feed, &mut seq);
    let mut rng = Rng(seed);
    let mut next_order = 0;
    // Each client joins from a snapshot taken part way into the set-up's empty books.
    let symbols: Vec<SymbolId> = (0..SYMBOLS).map(SymbolId).collect();
    let mut l2: Vec<L2Mirror> = Vec::new();
    let mut l3: Vec<L3Mirror> = Vec::new();
    for &s in &symbols {
        let mut m2 = L2Mirror::new();
        m2.load(&feed.l2(s, usize::MAX).unwrap());
        let mut m3 = L3Mirror::new();
        m3.load(&feed.l3(s).unwrap()).unwrap();
        l2.push(m2);
        l3.push(m3);
    }
    let mut trades_seen = vec![0u64; SYMBOLS as usize];
    let mut bbo_seen: Vec<Bbo> = vec![(None, None); SYMBOLS as usize];
    let mut gaps = 0;
    for i in 0..commands {
        let live: Vec<(i64, i64)> = symbols
            .iter()
            .flat_map(|&s| {
                let (b, a) = engine.resting_orders(s);
                b.into_iter().chain(a).map(|o| (o.user, o.order))
            })
            .collect();
        let cmd = random_command(&mut rng, &live, &mut next_order);
        let updates = apply(&mut engine, &mut feed, &mut seq, &cmd);
        // The forced gap: the clients miss every update of a stretch of commands.
        let lost = gap_at.is_some_and(|at| (at..at + 25).contains(&i));
        for u in &updates {
            let s = u.symbol().0 as usize;
            if let Update::Trade { trade, .. } = u {
                assert_eq!(*trade, trades_seen[s] + 1, "trade ids are consecutive");
                trades_seen[s] = *trade;
            }
            if let Update::Bbo { bid, ask, .. } = *u {
                assert_ne!(bbo_seen[s], (bid, ask), "a BBO update changes the BBO");
                bbo_seen[s] = (bid, ask);
            }
            if lost {
                continue;
            }
            for result in [l2[s].apply(u), l3[s].apply(u)] {
                match result {
                    Ok(_) => {}
                    Err(MirrorError::Gap { .. }) => {
                        // Recovery: a fresh snapshot, then carry on with the stream.
                        gaps += 1;
                        l2[s].load(&feed.l2(SymbolId(s as u32), usize::MAX).unwrap());
                        l3[s].load(&feed.l3(SymbolId(s as u32)).unwrap()).unwrap();
                    }
                    Err(e) => panic!("command {i} ({cmd:?}): {e}"),
                }
            }
        }
        let checkpoint = i % 97 == 0 || i + 1 == commands;
        if checkpoint && !lost && gap_at.is_none_or(|at| i < at) {
            {
                for &s in &symbols {
                    check(&engine, s, &l2[s.0 as usize], &l3[s.0 as usize]);
                    check_bbo(&engine, s, bbo_seen[s.0 as usize]);
                }
            }
        }
    }
    assert_eq!(feed.inconsistencies, 0);
    for &s in &symbols {
        check(&engine, s, &l2[s.0 as usize], &l3[s.0 as usize]);
        check_bbo(&engine, s, bbo_seen[s.0 as usize]);
        // And the feed's own snapshots agree with the engine.
        let mut fresh = L3Mirror::new();
        fresh.load(&feed.l3(s).unwrap()).unwrap();
        let mut fresh2 = L2Mirror::new();
        fresh2.load(&feed.l2(s, usize::MAX).unwrap());
        check(&engine, s, &fresh2, &fresh);
    }
    if gap_at.is_some() {
        assert!(gaps > 0, "the lost updates were noticed");
    }
    assert!(
        trades_seen.iter().all(|&t| t > 50),
        "the run traded: {trades_seen:?}"
    );
}

#[test]
fn snapshot_plus_updates_rebuild_the_engine_book() {
    for seed in 1..=4u64 {
        run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 20_000, None);
    }
}

#[test]
fn a_gap_is_detected_and_a_fresh_snapshot_recovers() {
    run(42, 5_000, Some(2_000));
}

#[test]
fn a_feed_started_from_an_engine_continues_its_book() {
    let mut engine = Engine::new(EngineConfig::default());
    let mut feed = Feed::new();
    let mut seq = 0;
    set_up(&mut engine, &mut feed, &mut seq);
    let mut rng = Rng(7);
    let mut next_order = 0;
    let mut live = Vec::new();
    for _ in 0..3_000 {
        let cmd = random_command(&mut rng, &live, &mut next_order);
        apply(&mut engine, &mut feed, &mut seq, &cmd);
        live = (0..SYMBOLS)
            .flat_map(|s| {
                let (b, a) = engine.resting_orders(SymbolId(s));
                b.into_iter().chain(a).map(|o| (o.user, o.order))
            })
            .collect();
    }
    // A restart: the feed begins again from the recovered engine.
    let mut restarted = Feed::from_engine(&engine);
    let mut mirrors: Vec<(L2Mirror, L3Mirror)> = (0..SYMBOLS)
        .map(|s| {
            let mut m2 = L2Mirror::new();
            m2.load(&restarted.l2(SymbolId(s), usize::MAX).unwrap());
            let mut m3 = L3Mirror::new();
            m3.load(&restarted.l3(SymbolId(s)).unwrap()).unwrap();
            (m2, m3)
        })
        .collect();
    for _ in 0..3_000 {
        let cmd = random_command(&mut rng, &live, &mut next_order);
        for u in apply(&mut engine, &mut restarted, &mut seq, &cmd) {
            let (m2, m3) = &mut mirrors[u.symbol().0 as usize];
            m2.apply(&u).unwrap();
            m3.apply(&u).unwrap();
        }
        live = (0..SYMBOLS)
            .flat_map(|s| {
                let (b, a) = engine.resting_orders(SymbolId(s));
                b.into_iter().chain(a).map(|o| (o.user, o.order))
            })
            .collect();
    }
    assert_eq!(restarted.inconsistencies, 0);
    for s in 0..SYMBOLS {
        let (m2, m3) = &mirrors[s as usize];
        check(&engine, SymbolId(s), m2, m3);
    }
}
