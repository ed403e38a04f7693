//! `rialto bench liquidation`: the time of a mark move on a future with many position holders
//! (docs/rules.md, "Futures"). `holders` users each hold one lot long against one market maker;
//! their deposits are spread so that a move of the mark to [`LIQUIDATING_MARK`] puts exactly
//! `percent` % of them below maintenance, and a bidder's resting buy absorbs their closes.
//! Two commands are timed: a mark move that liquidates nobody, then the one that liquidates the
//! chosen share. A pass reads only the users its index puts at risk, so the first stays flat as
//! `holders` grows and the second grows with the users liquidated.

use std::time::Instant;

use rialto_core::{
    Command, Engine, EngineConfig, Event, EventSink, Name, PlaceOrder, Side, SymbolKind,
    SymbolSpec, UserId,
};

#[derive(clap::Args, Debug)]
pub struct LiquidationArgs {
    /// Users holding a position.
    #[arg(long, default_value_t = 1_000_000)]
    pub holders: u32,
    /// The share of them the timed mark move liquidates, in percent (1 to 100).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub percent: u32,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

const START: i64 = 100_000;
const INITIAL_MARGIN: i64 = 1_000;
const MAINTENANCE_MARGIN: i64 = 500;
/// Every holder is long one lot at [`START`] with `INITIAL_MARGIN + 10 * (i % 100)` USD: the
/// mark below which holder i is under maintenance is `START + MAINTENANCE_MARGIN − deposit`, so
/// this mark is under the bound of exactly the holders whose `i % 100 < percent`.
const LIQUIDATING_MARK_BASE: i64 = START + MAINTENANCE_MARGIN - INITIAL_MARGIN;
/// The bidder's price: each close loses `START − BID`, 900, less than any holder's deposit, so
/// the fund pays nothing.
const BID: i64 = START - INITIAL_MARGIN + 100;
const MAKER: UserId = -1;
const BIDDER: UserId = -2;

/// The mark the timed move sets for `percent`.
pub const fn liquidating_mark(percent: u32) -> i64 {
    LIQUIDATING_MARK_BASE - 10 * (percent as i64 - 1) - 5
}

/// What a timed command reported, counted without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub liquidated: u64,
    pub trades: u64,
    pub nanos: u128,
}

impl EventSink for Outcome {
    fn on_event(&mut self, event: &Event<'_>) {
        match event {
            Event::Liquidated(_) => self.liquidated += 1,
            Event::Trade(_) => self.trades += 1,
            _ => {}
        }
    }
}

fn name(s: &str) -> Name {
    Name::new(s).expect("a valid name")
}

struct Setup {
    engine: Engine,
    seq: u64,
    tx: i64,
}

impl Setup {
    fn apply(&mut self, cmd: Command) -> anyhow::Result<()> {
        self.seq += 1;
        let seq = self.seq;
        self.engine
            .apply(seq, 0, &cmd, &mut ())
            .map_err(|reason| anyhow::anyhow!("setup command {seq} rejected: {reason}"))
    }

    fn user(&mut self, user: UserId, amount: i64) -> anyhow::Result<()> {
        self.tx += 1;
        self.apply(Command::AddUser { user })?;
        self.apply(Command::AdjustBalance {
            user,
            currency: name("USD"),
            amount,
            tx: self.tx,
        })
    }
}

/// The venue before the timed moves: the future, the users, their positions, the bid.
pub fn venue(holders: u32, percent: u32) -> anyhow::Result<Engine> {
    let mut setup = Setup {
        engine: Engine::new(EngineConfig {
            max_users: holders + 2,
            max_tx_ids: 4 * holders + 16,
            ..EngineConfig::default()
        }),
        seq: 0,
        tx: 0,
    };
    setup.apply(Command::AddSymbol(Box::new(SymbolSpec {
        symbol: name("XBT-PERP"),
        base: name("XBT"),
        quote: name("USD"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: Some(SymbolKind::Future {
            initial_margin: INITIAL_MARGIN,
            maintenance_margin: MAINTENANCE_MARGIN,
            mark_price: START,
        }),
    })))?;
    let symbol = setup.engine.symbol_id("XBT-PERP");
    setup.user(MAKER, 1_000_000_000_000_000)?;
    setup.user(BIDDER, 1_000_000_000_000_000)?;
    let lots = i64::from(holders);
    setup.apply(Command::Place(PlaceOrder::limit(
        MAKER,
        1,
        symbol,
        Side::Sell,
        START,
        lots,
    )))?;
    for i in 0..lots {
        let user = i + 1;
        setup.user(user, INITIAL_MARGIN + 10 * (i % 100))?;
        setup.apply(Command::Place(PlaceOrder::limit(
            user,
            1,
            symbol,
            Side::Buy,
            START,
            1,
        )))?;
    }
    let liquidated = (lots + 99) / 100 * i64::from(percent);
    setup.apply(Command::Place(PlaceOrder::limit(
        BIDDER,
        1,
        symbol,
        Side::Buy,
        BID,
        liquidated,
    )))?;
    Ok(setup.engine)
}

/// Applies `price` as the mark and times it.
pub fn timed_mark(engine: &mut Engine, seq: u64, price: i64) -> anyhow::Result<Outcome> {
    let symbol = engine.symbol_id("XBT-PERP");
    let mut outcome = Outcome::default();
    let start = Instant::now();
    let result = engine.apply(
        seq,
        0,
        &Command::SetMarkPrice { symbol, price },
        &mut outcome,
    );
    outcome.nanos = start.elapsed().as_nanos();
    result.map_err(|reason| anyhow::anyhow!("set_mark_price rejected: {reason}"))?;
    Ok(outcome)
}

pub fn run(args: &LiquidationArgs) -> anyhow::Result<()> {
    let mut engine = venue(args.holders, args.percent)?;
    let seq = engine.last_seq();
    let quiet = timed_mark(&mut engine, seq + 1, START - 1)?;
    let moved = timed_mark(&mut engine, seq + 2, liquidating_mark(args.percent))?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "holders": args.holders,
                "percent": args.percent,
                "quiet_move_ns": quiet.nanos as u64,
                "liquidated": moved.liquidated,
                "trades": moved.trades,
                "liquidating_move_ns": moved.nanos as u64,
            })
        );
    } else {
        println!(
            "bench liquidation: {} position holders; a mark move that liquidates nobody: {} us",
            args.holders,
            quiet.nanos / 1_000
        );
        println!(
            "a mark move that liquidates {} ({}%), {} trades: {} us ({} ns a liquidation)",
            moved.liquidated,
            args.percent,
            moved.trades,
            moved.nanos / 1_000,
            moved.nanos / u128::from(moved.liquidated.max(1))
        );
    }
    Ok(())
}
