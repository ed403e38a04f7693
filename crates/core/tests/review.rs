//! Review tests: snapshot decoding against crafted bytes, and deep books (many levels, holes,
//! compactions) against the model.

mod model;

use model::Model;
use rialto_core::{
    Command, Engine, EngineConfig, Name, OwnedEvent, PlaceOrder, Side, Stp, SymbolId, SymbolSpec,
    Tif,
};

// ----- crafted snapshots ----------------------------------------------------------------------

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn name(&mut self, s: &str) {
        self.u8(s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
    }
}

/// One symbol B-Q (fees 0, quote_scale 1), one user 1 holding `held` base (available 0, all of
/// it deposited), and the given resting sells `(price, remaining)` in priority order.
fn snapshot_with_sells(base_scale: i64, held: i64, sells: &[(i64, i64)]) -> Vec<u8> {
    snapshot_version_with_sells(4, base_scale, held, sells)
}

/// The layout of snapshot `version` (3: before futures; 4: with the insurance fund, the
/// symbol's type and the positions).
fn snapshot_version_with_sells(
    version: u32,
    base_scale: i64,
    held: i64,
    sells: &[(i64, i64)],
) -> Vec<u8> {
    let futures = version >= 4;
    let mut b = W(Vec::new());
    b.i64(0); // now
    b.u64(2);
    for (name, deposits) in [("B", held), ("Q", 0)] {
        b.name(name);
        b.i64(deposits);
        b.i64(0);
        b.i64(0);
        if futures {
            b.i64(0); // insurance
        }
    }
    b.u64(1);
    b.name("B-Q");
    b.name("B");
    b.name("Q");
    // scales, fees, band_bps, day_end
    for v in [base_scale, 1, 0, 0, 0, 0] {
        b.i64(v);
    }
    if futures {
        b.u8(0); // spot
    }
    // last trade, reference price
    b.i64(0);
    b.i64(0);
    b.u64(1); // users
    b.i64(1);
    b.u32(1);
    b.u32(0); // currency B
    b.i64(0);
    b.i64(held);
    if futures {
        b.u64(0); // positions
    }
    b.i64(0); // order_id_window
    b.u64(0); // recent order ids
    b.u64(0); // suspended users
    b.u64(0); // tx ids
    b.u64(0); // bids
    b.u64(sells.len() as u64);
    for (i, &(price, remaining)) in sells.iter().enumerate() {
        b.i64(1);
        b.i64(i as i64);
        b.i64(price);
        b.i64(remaining);
        b.i64(0); // filled
        b.u8(Stp::CancelTaker.code());
        b.u8(0);
        b.u8(Tif::Gtc.code());
        b.i64(0); // expire_ts
    }
    b.u64(0); // icebergs
    b.u64(0); // pending stops
    b.u8(0); // the symbol's phase: continuous
    let mut out = W(Vec::new());
    out.0.extend_from_slice(b"RIALTOSS");
    out.u32(version);
    out.u64(0);
    out.u64(b.0.len() as u64);
    out.0.extend_from_slice(&b.0);
    out.0
}

fn decode_does_not_panic(bytes: &[u8]) -> Result<bool, String> {
    std::panic::catch_unwind(|| Engine::decode_snapshot(bytes, EngineConfig::default()).is_ok())
        .map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
}

/// Two sells at one price whose remaining quantities sum past i64::MAX: `restore_resting`
/// does not check `remaining * base_scale` for sells, so `BookSide::push_back` adds the level
/// total `level.total += remaining` before `check_invariants` can refuse the held amount.
#[test]
fn decoding_two_huge_sells_at_one_price_is_refused_not_a_panic() {
    let bytes = snapshot_with_sells(1, 1, &[(1, i64::MAX), (1, i64::MAX)]);
    assert_eq!(decode_does_not_panic(&bytes), Ok(false));
}

/// Nine sells at distinct prices with `remaining * base_scale` far past i64: `check_invariants`
/// sums the needs in i128, which overflows: a panic in debug builds; in release builds the sum
/// wraps to exactly `held` (2^62) and the snapshot is ACCEPTED, with orders needing 2^128 + 2^62
/// base units held by 2^62. Any later cancel/reduce/fill of these orders computes
/// `qty * base_scale` unchecked and wraps (release) or panics (debug).
#[test]
fn decoding_sells_whose_hold_overflows_is_refused() {
    let base_scale = 1i64 << 62;
    // sum of remaining = 8 * (2^63 - 1) + 9 = 2^66 + 1; times 2^62 = 2^128 + 2^62.
    let mut sells: Vec<(i64, i64)> = (1..=8).map(|p| (p, i64::MAX)).collect();
    sells.push((9, 9));
    let bytes = snapshot_with_sells(base_scale, 1 << 62, &sells);
    assert_eq!(decode_does_not_panic(&bytes), Ok(false));
}

/// The same layout with a consistent state decodes (so the two tests above fail for the reason
/// they name, not for a layout mistake).
#[test]
fn the_crafted_layout_decodes_when_consistent() {
    let bytes = snapshot_with_sells(10, 70, &[(1, 3), (2, 4)]);
    let e = Engine::decode_snapshot(&bytes, EngineConfig::default()).unwrap();
    assert_eq!(e.encode_snapshot(), bytes);
    // A version 3 snapshot (before futures) of the same state still loads, as that state.
    let old = snapshot_version_with_sells(3, 10, 70, &[(1, 3), (2, 4)]);
    let from_old = Engine::decode_snapshot(&old, EngineConfig::default()).unwrap();
    assert_eq!(from_old.encode_snapshot(), bytes);
}

// ----- deep books against the model ------------------------------------------------------------

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Hundreds of levels a side, emptied and refilled far from the touch (holes, hole reuse,
/// pops of empty runs, compactions), moves next to their old level, IOC sweeps through many
/// levels; engine and model must agree on every event, result and the whole book, and every
/// snapshot must decode to the same state.
#[test]
fn deep_books_agree_with_the_model() {
    let name = |s| Name::new(s).unwrap();
    for seed in 1..=6u64 {
        let mut rng = Lcg(seed);
        let mut engine = Engine::new(EngineConfig::default());
        let mut model = Model::new();
        model.self_check = false;
        let spec = SymbolSpec {
            symbol: name("X-Y"),
            base: name("X"),
            quote: name("Y"),
            base_scale: 3,
            quote_scale: 2,
            maker_fee: 1,
            taker_fee: 4,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        };
        let mut setup = vec![Command::AddSymbol(Box::new(spec))];
        for u in 1..=4 {
            setup.push(Command::AddUser { user: u });
            for (c, tx) in [("X", u * 2), ("Y", u * 2 + 1)] {
                setup.push(Command::AdjustBalance {
                    user: u,
                    currency: name(c),
                    amount: 1 << 50,
                    tx,
                });
            }
        }
        let sym = SymbolId(0);
        let mut seq = 0u64;
        let mut run = |engine: &mut Engine, model: &mut Model, cmd: Command| {
            seq += 1;
            let mut ee: Vec<OwnedEvent> = Vec::new();
            let mut me: Vec<OwnedEvent> = Vec::new();
            let er = engine.apply(seq, 0, &cmd, &mut ee);
            let mr = model.apply(&cmd, &mut me);
            assert_eq!((er, &ee), (mr, &me), "seed {seed} #{seq}: {cmd:?}");
            assert_eq!(
                engine.resting_orders(sym),
                model.resting_orders(sym),
                "seed {seed} #{seq}: {cmd:?}"
            );
        };
        for c in setup {
            run(&mut engine, &mut model, c);
        }
        let mut next_id = 0i64;
        for step in 0..6000 {
            let live = model.live_orders();
            let pick = |rng: &mut Lcg| live[rng.below(live.len() as u64) as usize];
            let user = 1 + rng.below(4) as i64;
            // Phases: build deep books, then thin them out far from the touch, then mix.
            let r = rng.below(100);
            let place_below = if (step / 1000) % 2 == 0 { 60 } else { 15 };
            let cmd = if live.is_empty() || r < place_below {
                next_id += 1;
                let side = if rng.below(2) == 0 {
                    Side::Buy
                } else {
                    Side::Sell
                };
                // Bids 1..=600, asks 601..=1200: wide books that rarely cross on their own.
                let price = match side {
                    Side::Buy => 1 + rng.below(600) as i64,
                    Side::Sell => 601 + rng.below(600) as i64,
                };
                let mut p =
                    PlaceOrder::limit(user, next_id, sym, side, price, 1 + rng.below(5) as i64);
                if rng.below(20) == 0 {
                    // An IOC sweep deep into the other side.
                    p.price = Some(match side {
                        Side::Buy => 601 + rng.below(600) as i64,
                        Side::Sell => 1 + rng.below(600) as i64,
                    });
                    p.tif = Some(Tif::Ioc);
                    p.stp = Some(Stp::ALL[rng.below(3) as usize]);
                }
                Command::Place(p)
            } else if r < 75 {
                let (u, o, _) = pick(&mut rng);
                Command::Cancel { user: u, order: o }
            } else if r < 90 {
                let (u, o, _) = pick(&mut rng);
                let (bids, _) = model.resting_orders(sym);
                let is_bid = bids.iter().any(|b| b.user == u && b.order == o);
                let old = if is_bid {
                    bids.iter()
                        .find(|b| b.user == u && b.order == o)
                        .unwrap()
                        .price
                } else {
                    model
                        .resting_orders(sym)
                        .1
                        .iter()
                        .find(|a| a.user == u && a.order == o)
                        .unwrap()
                        .price
                };
                let delta = rng.below(5) as i64 - 2;
                Command::Move {
                    user: u,
                    order: o,
                    price: (old + delta).max(1),
                }
            } else if r < 97 {
                let (u, o, _) = pick(&mut rng);
                Command::Reduce {
                    user: u,
                    order: o,
                    qty: 1 + rng.below(3) as i64,
                }
            } else {
                Command::Book {
                    symbol: sym,
                    depth: 1 + rng.below(700) as i64,
                }
            };
            run(&mut engine, &mut model, cmd);
            if step % 500 == 499 {
                let bytes = engine.encode_snapshot();
                let restored = Engine::decode_snapshot(&bytes, EngineConfig::default()).unwrap();
                assert_eq!(restored.state_hash(), engine.state_hash());
            }
        }
    }
}
