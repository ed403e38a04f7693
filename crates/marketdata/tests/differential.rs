//! The feed against the engine under the whole rulebook: random command streams that mix
//! stops and stop-limits, icebergs, amends and moves, GTD and DAY expiries, phases and
//! auctions, price bands and suspensions. After every command, the feed's book (its own
//! snapshots, and clients that follow its updates from a snapshot) must be exactly the
//! engine's: L2 as the engine's `book` query answers it, L3 as the engine's queue with each
//! order's shown quantity.

use std::collections::HashMap;

use rialto_core::{
    AmendOrder, Command, Engine, EngineConfig, Name, OrderType, OwnedEvent, Phase, PlaceOrder,
    Side, Stp, SymbolId, SymbolSpec, Tif, UserId,
};
use rialto_marketdata::{Feed, L2Mirror, L3Mirror, Update};

mod common;
use common::Rng;

const USERS: i64 = 5;
const SYMBOLS: u32 = 2;
const NS_PER_MS: i64 = 1_000_000;

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

/// (bids, asks), best first: (price, qty) of each order or level.
type Sides = (Vec<(i64, i64)>, Vec<(i64, i64)>);

struct Venue {
    engine: Engine,
    feed: Feed,
    seq: u64,
    ts_ns: i64,
    /// Clients that follow the updates from a snapshot taken at the start.
    l2: Vec<L2Mirror>,
    l3: Vec<L3Mirror>,
    /// What the run saw, so that the test knows it reached each case.
    seen: HashMap<&'static str, u64>,
}

impl Venue {
    fn new() -> Venue {
        let mut venue = Venue {
            engine: Engine::new(EngineConfig::default()),
            feed: Feed::new(),
            seq: 0,
            ts_ns: 1_000 * NS_PER_MS,
            l2: Vec::new(),
            l3: Vec::new(),
            seen: HashMap::new(),
        };
        for (i, sym) in ["AAA-USD", "BBB-USD"].iter().enumerate() {
            venue.apply(&Command::AddSymbol(Box::new(SymbolSpec {
                symbol: name(sym),
                base: name(&sym[..3]),
                quote: name("USD"),
                base_scale: 1,
                quote_scale: 1,
                maker_fee: 0,
                taker_fee: i as i64,
                band_bps: 0,
                day_end: 0,
                kind: SymbolSpec::SPOT,
            })));
        }
        for user in 1..=USERS {
            venue.apply(&Command::AddUser { user });
            for (n, currency) in ["AAA", "BBB", "USD"].iter().enumerate() {
                venue.apply(&Command::AdjustBalance {
                    user,
                    currency: name(currency),
                    amount: 1_000_000_000_000,
                    tx: user * 10 + n as i64,
                });
            }
        }
        for s in 0..SYMBOLS {
            let mut m2 = L2Mirror::new();
            m2.load(&venue.feed.l2(SymbolId(s), usize::MAX).unwrap());
            let mut m3 = L3Mirror::new();
            m3.load(&venue.feed.l3(SymbolId(s)).unwrap()).unwrap();
            venue.l2.push(m2);
            venue.l3.push(m3);
        }
        venue
    }

    /// Applies a command to the engine and the feed (whatever the engine answered), and the
    /// feed's updates to the clients.
    fn apply(&mut self, cmd: &Command) -> bool {
        self.seq += 1;
        let mut events: Vec<OwnedEvent> = Vec::new();
        self.feed.clear_updates();
        let accepted = self
            .engine
            .apply(self.seq, self.ts_ns, cmd, &mut events)
            .is_ok();
        self.feed.apply(self.ts_ns, cmd, accepted, &events);
        for e in &events {
            let kind = match e {
                OwnedEvent::Triggered(_) => "triggered",
                OwnedEvent::Auction(_) => "auction",
                OwnedEvent::Cancelled(c) => c.reason.as_str(),
                OwnedEvent::Amended(a) => a.priority.as_str(),
                _ => continue,
            };
            *self.seen.entry(kind).or_default() += 1;
        }
        let updates = self.feed.updates().to_vec();
        for u in &updates {
            if let Update::Auction { .. } = u {
                *self.seen.entry("auction update").or_default() += 1;
            }
            let s = u.symbol().0 as usize;
            if s < self.l2.len() {
                self.l2[s].apply(u).expect("the L2 client follows");
                self.l3[s].apply(u).expect("the L3 client follows");
            }
        }
        accepted
    }

    /// The engine's book as a client should see it: each resting order's (price, shown) in
    /// queue order, and the levels its `book` query gives.
    fn engine_book(&mut self, symbol: SymbolId) -> [Sides; 2] {
        let shown: HashMap<(UserId, i64), i64> = self
            .engine
            .live_orders()
            .into_iter()
            .map(|o| ((o.user, o.order), o.shown))
            .collect();
        let (bids, asks) = self.engine.resting_orders(symbol);
        let orders = |v: &[rialto_core::RestingOrder]| {
            v.iter()
                .map(|o| (o.price, shown[&(o.user, o.order)]))
                .collect::<Vec<_>>()
        };
        let l3 = (orders(&bids), orders(&asks));
        let mut events = Vec::new();
        let depth = 1_000;
        // A query changes nothing, so it takes no seq of its own.
        self.engine
            .apply(
                self.seq,
                self.ts_ns,
                &Command::Book { symbol, depth },
                &mut events,
            )
            .expect("a book query");
        let Some(OwnedEvent::Book { bids, asks, .. }) = events.pop() else {
            panic!("the book query answers a book");
        };
        let levels = |v: &[rialto_core::Level]| v.iter().map(|l| (l.price, l.qty)).collect();
        [l3, (levels(&bids), levels(&asks))]
    }

    fn check(&mut self, step: usize, cmd: &Command) {
        for s in 0..SYMBOLS {
            let symbol = SymbolId(s);
            let [(bids, asks), (level_bids, level_asks)] = self.engine_book(symbol);
            let at = format!("step {step}, {cmd:?}, {symbol:?}");
            let snap3 = self.feed.l3(symbol).unwrap();
            let pairs = |v: &[rialto_marketdata::L3Order]| {
                v.iter().map(|o| (o.price, o.qty)).collect::<Vec<_>>()
            };
            assert_eq!(pairs(&snap3.bids), bids, "L3 bids, {at}");
            assert_eq!(pairs(&snap3.asks), asks, "L3 asks, {at}");
            let snap2 = self.feed.l2(symbol, usize::MAX).unwrap();
            assert_eq!(snap2.bids, level_bids, "L2 bids, {at}");
            assert_eq!(snap2.asks, level_asks, "L2 asks, {at}");
            let phase = self.engine.symbol_status(symbol).unwrap().phase;
            assert_eq!(snap2.phase, phase, "phase, {at}");
            let m3 = self.l3[s as usize].book();
            let mirrored = |side| pairs(&m3.orders_in_priority(side));
            assert_eq!(mirrored(Side::Buy), bids, "L3 client bids, {at}");
            assert_eq!(mirrored(Side::Sell), asks, "L3 client asks, {at}");
            let m2 = &self.l2[s as usize];
            assert_eq!(m2.bids(), level_bids, "L2 client bids, {at}");
            assert_eq!(m2.asks(), level_asks, "L2 client asks, {at}");
            assert_eq!(m2.phase(), Some(phase), "L2 client phase, {at}");
        }
        assert_eq!(self.feed.inconsistencies, 0, "{step}: {cmd:?}");
    }

    /// Live orders to pick from: resting ones and pending stops.
    fn live(&self) -> Vec<(UserId, i64)> {
        self.engine
            .live_orders()
            .into_iter()
            .map(|o| (o.user, o.order))
            .collect()
    }
}

fn random_command(rng: &mut Rng, venue: &Venue, next_order: &mut i64) -> Command {
    let user = 1 + rng.below(USERS as u64) as i64;
    let symbol = SymbolId(rng.below(SYMBOLS as u64) as u32);
    let price = 95 + rng.below(11) as i64;
    let live = venue.live();
    let pick = |rng: &mut Rng| live[rng.below(live.len() as u64) as usize];
    let side = if rng.below(2) == 0 {
        Side::Buy
    } else {
        Side::Sell
    };
    let qty = 1 + rng.below(12) as i64;
    let roll = rng.below(1000);
    match roll {
        0..=399 => {
            *next_order += 1;
            let mut p = PlaceOrder::limit(user, *next_order, symbol, side, price, qty);
            p = match rng.below(20) {
                0 => p.with_tif(Tif::Ioc),
                1 => p.with_tif(Tif::Fok),
                2 | 3 => PlaceOrder::market(user, *next_order, symbol, side, qty),
                4 => p.with_post_only(),
                5..=7 => p
                    .with_tif(Tif::Gtd)
                    .with_expire_ts(venue.ts_ns + (1 + rng.below(40) as i64) * NS_PER_MS),
                8 => p.with_tif(Tif::Day),
                _ => p,
            };
            // Icebergs: a third of the resting limit orders.
            if p.order_type == Some(OrderType::Limit)
                && matches!(p.tif, Some(Tif::Gtc | Tif::Gtd | Tif::Day))
                && qty > 1
                && rng.chance(33)
            {
                p = p.with_display_qty(1 + rng.below(qty as u64 - 1) as i64);
            }
            Command::Place(p.with_stp(match rng.below(3) {
                0 => Stp::CancelMaker,
                1 => Stp::CancelBoth,
                _ => Stp::CancelTaker,
            }))
        }
        // Stops and stop-limits, around the prices that trade.
        400..=519 => {
            *next_order += 1;
            // Mostly on the side of the last trade where it waits (else `would_trigger`).
            let last = venue.engine.symbol_status(symbol).unwrap().last;
            let away = 1 + rng.below(3) as i64;
            let stop_price = match side {
                _ if last == 0 || rng.chance(10) => 95 + rng.below(11) as i64,
                Side::Buy => last + away,
                Side::Sell => (last - away).max(1),
            };
            let limit = rng.chance(60);
            let p = PlaceOrder::limit(user, *next_order, symbol, side, price, qty);
            let p = if limit {
                let p = p.with_order_type(OrderType::StopLimit);
                match rng.below(6) {
                    0 => p.with_tif(Tif::Ioc),
                    1 => p
                        .with_tif(Tif::Gtd)
                        .with_expire_ts(venue.ts_ns + (1 + rng.below(40) as i64) * NS_PER_MS),
                    _ => p,
                }
            } else {
                // A stop with its protection price.
                p.with_order_type(OrderType::Stop).with_tif(Tif::Ioc)
            };
            Command::Place(p.with_stop_price(stop_price))
        }
        520..=599 if !live.is_empty() => {
            let (user, order) = pick(rng);
            Command::Cancel { user, order }
        }
        600..=659 if !live.is_empty() => {
            let (user, order) = pick(rng);
            Command::Move { user, order, price }
        }
        660..=759 if !live.is_empty() => {
            let (user, order) = pick(rng);
            let new_price = rng.chance(50).then_some(price);
            let qty = (new_price.is_none() || rng.chance(50)).then(|| 1 + rng.below(12) as i64);
            let stop = rng.chance(20).then(|| 95 + rng.below(11) as i64);
            Command::Amend(AmendOrder::with_fields(user, order, new_price, qty, stop))
        }
        760..=819 if !live.is_empty() => {
            let (user, order) = pick(rng);
            Command::Reduce {
                user,
                order,
                qty: 1 + rng.below(5) as i64,
            }
        }
        820..=869 => {
            let phase = match rng.below(10) {
                0..=4 => Phase::Continuous,
                5..=7 => Phase::Auction,
                8 => Phase::Halted,
                _ => Phase::Closed,
            };
            Command::SetPhase {
                symbol,
                phase: Some(phase),
            }
        }
        870..=889 => Command::SetBand {
            symbol,
            band_bps: [0, 100, 300, 500][rng.below(4) as usize],
        },
        890..=899 => Command::SetRefPrice { symbol, price },
        900..=905 => Command::SuspendUser { user },
        906..=939 => Command::ResumeUser { user },
        940..=989 => Command::Tick,
        990..=994 => Command::MassCancel {
            user,
            symbol: Some(symbol),
        },
        _ => Command::MassCancel { user, symbol: None },
    }
}

impl Venue {
    /// A restart: the feed begins again from the engine as it stands (icebergs part-hidden,
    /// stops pending, symbols in any phase), and the clients from its snapshots.
    fn restart_feed(&mut self) {
        self.feed = Feed::from_engine(&self.engine);
        for s in 0..SYMBOLS {
            self.l2[s as usize].load(&self.feed.l2(SymbolId(s), usize::MAX).unwrap());
            self.l3[s as usize]
                .load(&self.feed.l3(SymbolId(s)).unwrap())
                .unwrap();
        }
    }
}

fn run(seed: u64, commands: usize) -> HashMap<&'static str, u64> {
    run_with_restart(seed, commands, None)
}

fn run_with_restart(
    seed: u64,
    commands: usize,
    restart_at: Option<usize>,
) -> HashMap<&'static str, u64> {
    let mut venue = Venue::new();
    let mut rng = Rng(seed);
    let mut next_order = 0;
    for step in 0..commands {
        if restart_at == Some(step) {
            venue.restart_feed();
            venue.check(step, &Command::Tick);
        }
        // Time moves on: a few ms a command, now and then past a day's end (DAY orders).
        venue.ts_ns += match rng.below(500) {
            0 => rialto_core::NS_PER_DAY,
            n => (n as i64 % 5) * NS_PER_MS,
        };
        let cmd = random_command(&mut rng, &venue, &mut next_order);
        venue.apply(&cmd);
        venue.check(step, &cmd);
    }
    venue.seen
}

#[test]
fn the_feed_is_the_engine_book_under_the_whole_rulebook() {
    let mut seen: HashMap<&'static str, u64> = HashMap::new();
    for seed in 1..=4u64 {
        for (k, v) in run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 4_000) {
            *seen.entry(k).or_default() += v;
        }
    }
    // The streams reached every case the feed must follow.
    for case in [
        "triggered",
        "auction",
        "auction update",
        "expired",
        "band",
        "suspended",
        "kept",
        "lost",
        "reduce",
        "stp",
    ] {
        assert!(seen.get(case).copied().unwrap_or(0) > 0, "{case}: {seen:?}");
    }
}

#[test]
fn a_feed_started_from_the_engine_continues_its_book() {
    for seed in 5..=6u64 {
        let seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        run_with_restart(seed, 3_000, Some(1_500));
    }
}
