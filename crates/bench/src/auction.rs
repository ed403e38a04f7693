//! `rialto bench auction`: the opening auction. One symbol's book takes `orders` limit orders
//! during its call (`set_phase auction`: nothing matches, the book crosses), then `set_phase
//! continuous` uncrosses it at one price; the timed part is that one command (docs/rules.md,
//! "Trading phases, halts and auctions").
//!
//! The orders are generated before timing: bids and asks alike priced uniformly over
//! `levels` ticks around a middle price, 1 to 10 lots each, from `users` users, so that about
//! half of each side lies in the crossed part and trades at the uncross.

use std::time::Instant;

use rialto_core::{
    Command, Engine, EngineConfig, Event, EventSink, Name, Phase, PlaceOrder, Side, SymbolId,
    SymbolSpec,
};

use crate::rng::Rng;

#[derive(clap::Args, Debug)]
pub struct AuctionArgs {
    /// Orders resting in the call when it ends.
    #[arg(long, default_value_t = 100_000)]
    pub orders: u32,
    /// Distinct prices the orders are spread over (both sides alike).
    #[arg(long, default_value_t = 2_000)]
    pub levels: u32,
    #[arg(long, default_value_t = 1_000)]
    pub users: u32,
    /// Uncrosses, each of a fresh engine and book; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub passes: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// What the uncross reported, counted without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Uncross {
    trades: u64,
    lots: i64,
    price: i64,
    imbalance: i64,
}

impl EventSink for Uncross {
    fn on_event(&mut self, event: &Event<'_>) {
        match event {
            Event::Trade(_) => self.trades += 1,
            Event::Auction(a) => {
                self.lots = a.qty;
                self.price = a.price;
                self.imbalance = a.imbalance;
            }
            _ => {}
        }
    }
}

const MIDDLE: i64 = 1_000_000;

fn name(s: &str) -> Name {
    Name::new(s).expect("a valid name")
}

/// The commands up to the end of the call: the symbol, funded users, `set_phase auction` and
/// the orders.
fn call(args: &AuctionArgs) -> Vec<Command> {
    let mut cmds = vec![Command::AddSymbol(Box::new(SymbolSpec {
        symbol: name("BTC-USD"),
        base: name("BTC"),
        quote: name("USD"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 1,
        taker_fee: 2,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    }))];
    let users = args.users.max(1) as i64;
    for user in 0..users {
        cmds.push(Command::AddUser { user });
        for (i, currency) in ["USD", "BTC"].iter().enumerate() {
            cmds.push(Command::AdjustBalance {
                user,
                currency: name(currency),
                amount: 1 << 50,
                tx: user * 2 + i as i64,
            });
        }
    }
    cmds.push(Command::SetPhase {
        symbol: SymbolId(0),
        phase: Some(Phase::Auction),
    });
    let mut rng = Rng::new(args.seed);
    let low = MIDDLE - args.levels as i64 / 2;
    for i in 0..args.orders as i64 {
        let side = if rng.coin() { Side::Buy } else { Side::Sell };
        let price = low + rng.below(args.levels.max(1) as u64) as i64;
        let qty = 1 + rng.below(10) as i64;
        cmds.push(Command::Place(PlaceOrder::limit(
            i % users,
            i,
            SymbolId(0),
            side,
            price,
            qty,
        )));
    }
    cmds
}

/// This thread's time on a CPU so far, ns (Linux: the first field of
/// /proc/thread-self/schedstat; `None` elsewhere). On a shared machine the wall time of a short
/// region also counts the time the thread waited for a CPU; this does not.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// One pass's timing of the uncross.
#[derive(Clone, Copy, Debug)]
struct Timing {
    wall_s: f64,
    /// `None` where the CPU time cannot be read.
    cpu_s: Option<f64>,
}

/// One pass: a fresh engine takes the call, then the uncross is timed. Returns its timing and
/// what the uncross reported.
fn pass(cmds: &[Command], args: &AuctionArgs) -> anyhow::Result<(Timing, Uncross)> {
    let mut engine = Engine::new(EngineConfig {
        max_resting_orders: args.orders + 16,
        max_users: args.users + 16,
        max_tx_ids: 2 * args.users + 16,
        expected_levels_per_side: args.levels as usize + 16,
        ..EngineConfig::default()
    });
    let mut seq = 0;
    for cmd in cmds {
        seq += 1;
        engine
            .apply(seq, 0, cmd, &mut ())
            .map_err(|r| anyhow::anyhow!("command {seq} rejected ({r}): {cmd:?}"))?;
    }
    let open = Command::SetPhase {
        symbol: SymbolId(0),
        phase: Some(Phase::Continuous),
    };
    let mut uncross = Uncross::default();
    let cpu_start = thread_cpu_ns();
    let start = Instant::now();
    let result = engine.apply(seq + 1, 0, &open, &mut uncross);
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_s = cpu_start
        .zip(thread_cpu_ns())
        .map(|(a, b)| b.saturating_sub(a) as f64 / 1e9);
    result.map_err(|r| anyhow::anyhow!("set_phase continuous rejected ({r})"))?;
    Ok((Timing { wall_s, cpu_s }, uncross))
}

/// The median of `values` (the lower middle one for an even count).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[(sorted.len() - 1) / 2]
}

pub fn run(args: &AuctionArgs) -> anyhow::Result<()> {
    let cmds = call(args);
    let mut seconds = Vec::new();
    let mut cpu_seconds = Vec::new();
    let mut first = None;
    for _ in 0..args.passes {
        let (timing, uncross) = pass(&cmds, args)?;
        if *first.get_or_insert(uncross) != uncross {
            anyhow::bail!("two uncrosses of the same book differ (engine not deterministic?)");
        }
        seconds.push(timing.wall_s);
        cpu_seconds.extend(timing.cpu_s);
    }
    let uncross = first.expect("at least one pass");
    let wall = median(&seconds);
    let cpu = (cpu_seconds.len() == seconds.len()).then(|| median(&cpu_seconds));
    let ms = |s: f64| s * 1e3;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "build": crate::harness::build_kind(),
                "orders": args.orders,
                "levels": args.levels,
                "users": args.users,
                "seed": args.seed,
                "uncross_ms": ms(wall),
                "uncross_passes_ms": seconds.iter().map(|&s| ms(s)).collect::<Vec<_>>(),
                "uncross_cpu_ms": cpu.map(ms),
                "uncross_cpu_passes_ms": cpu_seconds.iter().map(|&s| ms(s)).collect::<Vec<_>>(),
                "trades": uncross.trades,
                "lots": uncross.lots,
                "price": uncross.price,
                "imbalance": uncross.imbalance,
            })
        );
    } else {
        println!(
            "rialto bench auction: {} orders over {} prices from {} users, seed {}; {} build",
            args.orders,
            args.levels,
            args.users,
            args.seed,
            crate::harness::build_kind()
        );
        println!(
            "uncross:    {} trades, {} lots at {} (imbalance {})",
            uncross.trades, uncross.lots, uncross.price, uncross.imbalance
        );
        let list = |values: &[f64]| {
            values
                .iter()
                .map(|&s| format!("{:.2}", ms(s)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "wall time:  {:.2} ms, the median of {} passes: {} ms (set_phase continuous alone, events counted)",
            ms(wall),
            seconds.len(),
            list(&seconds)
        );
        if let Some(cpu) = cpu {
            println!(
                "on CPU:     {:.2} ms, the median of: {} ms (the same, less the time spent waiting for a CPU)",
                ms(cpu),
                list(&cpu_seconds)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small call uncrosses, trades, and leaves the same result on every pass.
    #[test]
    fn a_small_call_uncrosses() {
        let args = AuctionArgs {
            orders: 2_000,
            levels: 100,
            users: 10,
            passes: 1,
            seed: 7,
            json: false,
        };
        let cmds = call(&args);
        let (_, a) = pass(&cmds, &args).unwrap();
        let (_, b) = pass(&cmds, &args).unwrap();
        assert_eq!(a, b);
        assert!(a.trades > 100 && a.lots > 0, "{a:?}");
        assert!((MIDDLE - 50..MIDDLE + 50).contains(&a.price), "{a:?}");
    }
}
