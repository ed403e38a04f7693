//! Criterion microbenchmarks of single engine operations on a book shaped like the `single`
//! workload's (1,000 resting orders on about 770 levels around 100,000 ticks, 2,000 users).
//!
//! Each benchmark times only the operation named (`far_order_and_cancel`: the pair); whatever keeps the book steady (cancelling
//! the placed orders, placing the orders to cancel, refilling the swept levels) runs between
//! timed batches of up to [`BATCH`] operations and is not timed.
//!
//! Run: `cargo bench -p rialto-bench --bench engine`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rialto_bench::harness::{CountingSink, prepare};
use rialto_bench::workload::{SINGLE_START_PRICE, SingleParams, single};
use rialto_core::{Command, Engine, Name, PlaceOrder, Side, SymbolId, SymbolSpec, UserId};

const BATCH: u64 = 100;
const USERS: i64 = 2_000;

struct Fixture {
    engine: Engine,
    seq: u64,
    next_order: i64,
    sink: CountingSink,
}

impl Fixture {
    /// The `single` workload's setup and prefill, nothing else.
    fn new() -> Fixture {
        let w = single(
            &SingleParams {
                commands: 0,
                ..SingleParams::default()
            },
            1,
        );
        let p = prepare(&w).expect("setup and prefill apply");
        Fixture {
            engine: p.engine,
            seq: p.seq,
            next_order: 1 << 40,
            sink: CountingSink::default(),
        }
    }

    fn apply(&mut self, cmd: &Command) {
        self.seq += 1;
        let result = self
            .engine
            .apply(self.seq, self.seq as i64, cmd, &mut self.sink);
        debug_assert!(result.is_ok(), "{cmd:?}: {result:?}");
        black_box(result).ok();
    }

    fn order_id(&mut self) -> i64 {
        self.next_order += 1;
        self.next_order
    }
}

/// The i-th user, cycling over all of them.
fn user(i: u64) -> UserId {
    (i as i64 % USERS) + 1
}

/// A bid price that never crosses: inside the prefill's bid range (all below the start price),
/// spread over 997 ticks so that some join existing levels and some open new ones.
fn passive_bid(i: u64) -> i64 {
    SINGLE_START_PRICE - 1 - (i as i64 * 37) % 997
}

fn place_bid(f: &mut Fixture, i: u64) -> (UserId, i64) {
    let (u, o) = (user(i), f.order_id());
    let cmd = Command::Place(PlaceOrder::limit(
        u,
        o,
        SymbolId(0),
        Side::Buy,
        passive_bid(i),
        3,
    ));
    f.apply(&cmd);
    (u, o)
}

/// Times `timed` over batches; `untimed_before` and `untimed_after` run around each batch.
fn batched(
    f: &mut Fixture,
    iters: u64,
    mut untimed_before: impl FnMut(&mut Fixture, u64) -> Vec<(UserId, i64)>,
    mut timed: impl FnMut(&mut Fixture, u64, &[(UserId, i64)]) -> Vec<(UserId, i64)>,
    mut untimed_after: impl FnMut(&mut Fixture, &[(UserId, i64)]),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BATCH.min(iters - done);
        let prepared = untimed_before(f, n);
        let start = Instant::now();
        let made = timed(f, n, &prepared);
        total += start.elapsed();
        untimed_after(f, &made);
        done += n;
    }
    total
}

fn cancel_all(f: &mut Fixture, orders: &[(UserId, i64)]) {
    for &(user, order) in orders {
        f.apply(&Command::Cancel { user, order });
    }
}

fn place_without_match(c: &mut Criterion) {
    let mut f = Fixture::new();
    let mut k = 0u64;
    c.bench_function("place_gtc_no_match", |b| {
        b.iter_custom(|iters| {
            batched(
                &mut f,
                iters,
                |_, _| Vec::new(),
                |f, n, _| {
                    let mut placed = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        k += 1;
                        placed.push(place_bid(f, k));
                    }
                    placed
                },
                cancel_all,
            )
        })
    });
}

fn cancel(c: &mut Criterion) {
    let mut f = Fixture::new();
    let mut k = 0u64;
    c.bench_function("cancel", |b| {
        b.iter_custom(|iters| {
            batched(
                &mut f,
                iters,
                |f, n| {
                    (0..n)
                        .map(|_| {
                            k += 1;
                            place_bid(f, k)
                        })
                        .collect()
                },
                |f, _, orders| {
                    cancel_all(f, orders);
                    Vec::new()
                },
                |_, _| {},
            )
        })
    });
}

fn move_order(c: &mut Criterion) {
    let mut f = Fixture::new();
    // BATCH resting bids of our own, each moved one tick down and back up in turn: the book
    // keeps its shape, and every move leaves its level and joins the back of another.
    let orders: Vec<(UserId, i64, i64)> = (0..BATCH)
        .map(|i| {
            let (u, o) = place_bid(&mut f, i);
            (u, o, passive_bid(i))
        })
        .collect();
    let mut round = 0u64;
    c.bench_function("move", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = BATCH.min(iters - done);
                round += 1;
                let down = round % 2;
                let start = Instant::now();
                for &(user, order, price) in &orders[..n as usize] {
                    f.apply(&Command::Move {
                        user,
                        order,
                        price: price - down as i64,
                    });
                }
                total += start.elapsed();
                // Orders not moved in a short batch go to the same side as the others.
                for &(user, order, price) in &orders[n as usize..] {
                    f.apply(&Command::Move {
                        user,
                        order,
                        price: price - down as i64,
                    });
                }
                done += n;
            }
            total
        })
    });
}

const SWEEP_LEVELS: i64 = 10;
const SWEEP_LEVEL_QTY: i64 = 5;

/// Adds a second book with a spread of 100,000 ticks: 500 bid levels below 100,000 and 500 ask
/// levels from 200,000, 4 lots each.
fn add_wide_book(f: &mut Fixture, name: &str) -> SymbolId {
    let spec = SymbolSpec {
        symbol: Name::new(name).unwrap(),
        base: Name::new("XBT").unwrap(),
        quote: Name::new("USD").unwrap(),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 1,
        taker_fee: 2,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    };
    f.apply(&Command::AddSymbol(Box::new(spec)));
    let symbol = f.engine.symbol_id(name);
    for i in 0..500u64 {
        let (u, o) = (user(i), f.order_id());
        let bid = PlaceOrder::limit(u, o, symbol, Side::Buy, 99_999 - i as i64, 4);
        f.apply(&Command::Place(bid));
        let (u, o) = (user(i + 1), f.order_id());
        let ask = PlaceOrder::limit(u, o, symbol, Side::Sell, 200_000 + i as i64, 4);
        f.apply(&Command::Place(ask));
    }
    symbol
}

fn market_sweep(c: &mut Criterion) {
    let mut f = Fixture::new();
    // Deep asks from 200,000 as background; the sweeps eat asks refilled between batches at
    // 100,000 and up (one order of 5 lots a level).
    let symbol = add_wide_book(&mut f, "SWEEP");
    let k = std::cell::Cell::new(0u64);
    c.bench_function("market_buy_sweeping_10_levels", |b| {
        b.iter_custom(|iters| {
            batched(
                &mut f,
                iters,
                |f, n| {
                    // Worst level first, so that each level is created at the touch.
                    for level in (0..n as i64 * SWEEP_LEVELS).rev() {
                        k.set(k.get() + 1);
                        let (u, o) = (user(k.get()), f.order_id());
                        let ask = PlaceOrder::limit(
                            u,
                            o,
                            symbol,
                            Side::Sell,
                            100_000 + level,
                            SWEEP_LEVEL_QTY,
                        );
                        f.apply(&Command::Place(ask));
                    }
                    Vec::new()
                },
                |f, n, _| {
                    for _ in 0..n {
                        k.set(k.get() + 1);
                        let (u, o) = (user(k.get()), f.order_id());
                        let qty = SWEEP_LEVELS * SWEEP_LEVEL_QTY;
                        f.apply(&Command::Place(PlaceOrder::market(
                            u,
                            o,
                            symbol,
                            Side::Buy,
                            qty,
                        )));
                    }
                    Vec::new()
                },
                |_, _| {},
            )
        })
    });
    let trades_per_sweep_check = f.engine.resting_orders(symbol).1.len();
    assert_eq!(
        trades_per_sweep_check, 500,
        "every refilled level was swept"
    );
}

/// An order far through a wide spread, then its cancel: the pair a user can send to make a
/// price-indexed book move its index around (crates/core/src/book.rs keeps such lone far levels
/// out of the ladder's window). Both commands are timed, as a pair.
fn far_order_and_cancel(c: &mut Criterion) {
    let mut f = Fixture::new();
    // The bids put in the middle of the spread are far better than every other bid.
    let symbol = add_wide_book(&mut f, "WIDE");
    let mut k = 0u64;
    c.bench_function("far_order_and_cancel", |b| {
        b.iter_custom(|iters| {
            batched(
                &mut f,
                iters,
                |_, _| Vec::new(),
                |f, n, _| {
                    for _ in 0..n {
                        k += 1;
                        let (u, o) = (user(k), f.order_id());
                        let price = 150_000 + (k % 1_000) as i64;
                        f.apply(&Command::Place(PlaceOrder::limit(
                            u,
                            o,
                            symbol,
                            Side::Buy,
                            price,
                            1,
                        )));
                        f.apply(&Command::Cancel { user: u, order: o });
                    }
                    Vec::new()
                },
                |_, _| {},
            )
        })
    });
    assert_eq!(
        f.engine.resting_orders(symbol).0.len(),
        500,
        "every far bid was cancelled"
    );
}

criterion_group!(
    benches,
    place_without_match,
    cancel,
    move_order,
    market_sweep,
    far_order_and_cancel
);
criterion_main!(benches);
