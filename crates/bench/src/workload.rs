//! Deterministic workload generators after exchange-core's benchmark workloads
//! (docs/benchmarks.md).
//!
//! A generator runs a real [`Engine`] beside itself and looks at the events of every command it
//! emits, so that each cancel, move and reduce names an order that is live at that point of the
//! sequence. The generation engine is dropped before anything is measured.
//!
//! Everything is drawn from one seeded [`Rng`]: the same parameters and seed give the same
//! commands on every machine.

use std::collections::HashMap;
use std::fmt;

use rialto_core::{
    CancelReason, Command, Engine, EngineConfig, Event, EventSink, Name, OrderId, OrderType,
    PlaceOrder, Side, SymbolId, SymbolSpec, Tif, UserId,
};

use crate::rng::Rng;

/// The kinds of benchmark command, in the order the mix tables list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gtc,
    Ioc,
    Fok,
    Cancel,
    Move,
    Reduce,
    /// `--mix rulebook`: a stop or stop-limit order, its stop price near the last trade.
    Stop,
    /// `--mix rulebook`: an iceberg (limit GTC with a `display_qty`).
    Iceberg,
    /// `--mix rulebook`: a limit DAY order, placed as a GTC would be.
    Day,
}

/// Number of [`Kind`]s.
pub const KINDS: usize = 9;

impl Kind {
    pub const ALL: [Kind; KINDS] = [
        Kind::Gtc,
        Kind::Ioc,
        Kind::Fok,
        Kind::Cancel,
        Kind::Move,
        Kind::Reduce,
        Kind::Stop,
        Kind::Iceberg,
        Kind::Day,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Gtc => "gtc",
            Kind::Ioc => "ioc",
            Kind::Fok => "fok",
            Kind::Cancel => "cancel",
            Kind::Move => "move",
            Kind::Reduce => "reduce",
            Kind::Stop => "stop",
            Kind::Iceberg => "iceberg",
            Kind::Day => "day",
        }
    }

    fn needs_live_order(self) -> bool {
        matches!(self, Kind::Cancel | Kind::Move | Kind::Reduce)
    }
}

/// The command mix. Both are exchange-core's: WORKLOADS.md allows either.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mix {
    /// What exchange-core's generator printed when run: GTC 12.6%, IOC 1.8%, FOK 0.06%,
    /// cancel 7.2%, move 71.1%, reduce 7.2%. The default: its GTC surplus over the removals is
    /// what lets the generator hold the book at its target size.
    #[default]
    Generator,
    /// exchange-core's published proportions: 9% GTC, 3% IOC, 6% cancel, 82% move.
    Published,
    /// The rulebook mix (issue 30): 10% stop and stop-limit orders, 5% icebergs, 5% DAY
    /// orders, the other 80% in the generator mix's proportions; the venue clock passes the
    /// symbol's day end every [`RULEBOOK_COMMANDS_PER_DAY`] commands. `single` only.
    Rulebook,
}

/// `--mix rulebook`: commands between two day ends of the venue clock.
pub const RULEBOOK_COMMANDS_PER_DAY: i64 = 100_000;
const NS_PER_DAY: i64 = 86_400_000_000_000;

impl Mix {
    /// Weights per 10,000 commands, in [`Kind::ALL`] order.
    pub fn weights(self) -> [u32; KINDS] {
        match self {
            Mix::Generator => [1260, 180, 6, 720, 7114, 720, 0, 0, 0],
            Mix::Published => [900, 300, 0, 600, 8200, 0, 0, 0, 0],
            // The generator mix scaled to 80%, then 10% stops, 5% icebergs, 5% DAY.
            Mix::Rulebook => [1008, 144, 5, 576, 5691, 576, 1000, 500, 500],
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mix::Generator => "generator",
            Mix::Published => "published",
            Mix::Rulebook => "rulebook",
        }
    }

    /// Nanoseconds of venue time between two consecutive commands: command `seq` (setup and
    /// prefill included, from 1) runs at `seq * ts_step()`. 1 for the exchange-core mixes (as
    /// before); for `rulebook`, a day over [`RULEBOOK_COMMANDS_PER_DAY`] commands, so that the
    /// symbol's day end (midnight UTC) passes at every multiple of it.
    pub fn ts_step(self) -> i64 {
        match self {
            Mix::Generator | Mix::Published => 1,
            Mix::Rulebook => NS_PER_DAY / RULEBOOK_COMMANDS_PER_DAY,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mix::Generator => {
                "exchange-core generator mix: GTC 12.6%, IOC 1.8%, FOK 0.06%, cancel 7.2%, \
                 move 71.1%, reduce 7.2%"
            }
            Mix::Published => "exchange-core published mix: GTC 9%, IOC 3%, cancel 6%, move 82%",
            Mix::Rulebook => {
                "rulebook mix: stop/stop-limit 10%, iceberg 5%, DAY 5%, and the generator mix \
                 scaled to 80% (GTC 10.1%, IOC 1.4%, FOK 0.05%, cancel 5.8%, move 56.9%, \
                 reduce 5.8%); a day end every 100,000 commands"
            }
        }
    }

    fn draw(self, rng: &mut Rng) -> Kind {
        let mut roll = rng.below(10_000) as u32;
        for (kind, weight) in Kind::ALL.into_iter().zip(self.weights()) {
            if roll < weight {
                return kind;
            }
            roll -= weight;
        }
        unreachable!("mix weights add up to 10,000")
    }
}

/// `single`: one order book (exchange-core's "single pair exchange").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SingleParams {
    pub users: u32,
    pub resting_orders: u32,
    pub commands: u64,
    pub mix: Mix,
}

impl Default for SingleParams {
    fn default() -> Self {
        SingleParams {
            users: 2_000,
            resting_orders: 1_000,
            commands: 3_000_000,
            mix: Mix::Generator,
        }
    }
}

/// The sizes of `multi` in WORKLOADS.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Medium,
    Large,
    Huge,
}

impl Size {
    pub fn as_str(self) -> &'static str {
        match self {
            Size::Medium => "medium",
            Size::Large => "large",
            Size::Huge => "huge",
        }
    }
}

/// `multi`: many books (exchange-core's medium, large and huge).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultiParams {
    pub symbols: u32,
    /// User-currency pairs; there are about a third as many users, each holding three
    /// currencies.
    pub accounts: u64,
    pub resting_orders: u64,
    pub commands: u64,
    pub mix: Mix,
}

impl MultiParams {
    pub fn size(size: Size) -> MultiParams {
        let (symbols, accounts, resting_orders, commands) = match size {
            Size::Medium => (10_000, 3_300_000, 1_000_000, 3_000_000),
            Size::Large => (50_000, 10_000_000, 3_000_000, 3_000_000),
            Size::Huge => (100_000, 33_000_000, 30_000_000, 10_000_000),
        };
        MultiParams {
            symbols,
            accounts,
            resting_orders,
            commands,
            mix: Mix::Generator,
        }
    }
}

/// Users and their deposits, kept compact and turned into commands on demand: as `Command`
/// values (112 bytes each) the 13 million of them in `multi large` would take 1.5 GB.
#[derive(Clone, Debug)]
pub struct Accounts {
    pub currencies: Vec<Name>,
    /// Per user (ids 1, 2, ...): a bit per currency held.
    pub holdings: Vec<u16>,
    /// Deposited into every account.
    pub amount: i64,
}

impl Accounts {
    pub fn users(&self) -> usize {
        self.holdings.len()
    }

    /// Number of user-currency pairs.
    pub fn accounts(&self) -> u64 {
        self.holdings.iter().map(|h| h.count_ones() as u64).sum()
    }

    /// `add_user` for each user followed by a deposit into each of its currencies. The tx ids
    /// are unique: `user * 16 + currency`.
    pub fn commands(&self) -> impl Iterator<Item = Command> + '_ {
        let amount = self.amount;
        self.holdings
            .iter()
            .enumerate()
            .flat_map(move |(index, &held)| {
                let user = index as UserId + 1;
                let deposits = (0..self.currencies.len())
                    .filter(move |c| held & (1 << c) != 0)
                    .map(move |c| Command::AdjustBalance {
                        user,
                        currency: self.currencies[c],
                        amount,
                        tx: user * 16 + c as i64,
                    });
                std::iter::once(Command::AddUser { user }).chain(deposits)
            })
    }
}

/// What the generator saw while it ran the commands on its own engine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenStats {
    /// Benchmark commands per kind, in [`Kind::ALL`] order (a cancel, move or reduce drawn for a
    /// book with no live order becomes a GTC and is counted as one).
    pub kinds: [u64; KINDS],
    /// Benchmark commands that caused at least one trade.
    pub trading_commands: u64,
    /// The same, per kind.
    pub trading_by_kind: [u64; KINDS],
    /// Trades caused by the benchmark commands.
    pub trades: u64,
    /// Events of the benchmark commands.
    pub events: u64,
    /// Rejected commands anywhere (setup, prefill, benchmark): should be 0.
    pub rejected: u64,
    pub resting_after_prefill: u64,
    pub resting_min: u64,
    pub resting_max: u64,
    pub resting_end: u64,
    /// Most orders resting on one side of one book at any time.
    pub side_orders_max: u64,
    /// Price levels of the busiest book at the end (bids + asks).
    pub levels_end: u64,
    /// Price levels of the busiest book after prefill (bids + asks).
    pub levels_after_prefill: u64,
    /// Stop orders that triggered (`triggered` events of the benchmark commands).
    pub stops_triggered: u64,
    /// Trades whose taker is a triggered stop (the cascades' trades).
    pub cascade_trades: u64,
    /// Orders that expired (DAY orders at a day end).
    pub expired: u64,
    /// Stop orders still pending at the end.
    pub stops_pending_end: u64,
    /// Most stop orders pending at once.
    pub stops_pending_max: u64,
}

impl GenStats {
    /// The realised mix, e.g. "gtc 12.6%, ioc 1.8%, ...".
    pub fn realised_mix(&self) -> String {
        let total: u64 = self.kinds.iter().sum::<u64>().max(1);
        Kind::ALL
            .iter()
            .zip(self.kinds)
            .filter(|&(k, n)| n > 0 || (*k as usize) < 6)
            .map(|(k, n)| format!("{} {:.2}%", k.as_str(), n as f64 * 100.0 / total as f64))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn trading_fraction(&self) -> f64 {
        let total: u64 = self.kinds.iter().sum();
        self.trading_commands as f64 / total.max(1) as f64
    }
}

/// A generated workload: apply [`Workload::setup_commands`], then `prefill`, then `commands`,
/// with consecutive sequence numbers from 1.
pub struct Workload {
    /// "single", "multi medium", ...
    pub name: String,
    pub mix: Mix,
    /// Venue time between consecutive commands ([`Mix::ts_step`]): command `seq` runs at
    /// `seq * ts_step`.
    pub ts_step: i64,
    pub symbols: usize,
    /// `add_symbol` commands.
    pub setup: Vec<Command>,
    /// Users and deposits, applied after `setup`.
    pub accounts: Accounts,
    /// GTC orders that rest without trading, building the starting books.
    pub prefill: Vec<Command>,
    /// The measured commands.
    pub commands: Vec<Command>,
    /// Capacities sized from what the generator saw, so that steady state does not grow tables.
    pub config: EngineConfig,
    pub stats: GenStats,
}

impl Workload {
    /// Symbols, then users and deposits.
    pub fn setup_commands(&self) -> impl Iterator<Item = Command> + '_ {
        self.setup.iter().cloned().chain(self.accounts.commands())
    }

    pub fn setup_len(&self) -> u64 {
        self.setup.len() as u64 + self.accounts.users() as u64 + self.accounts.accounts()
    }

    /// Bytes held by the command vectors and the accounts plan.
    pub fn heap_bytes(&self) -> u64 {
        let cmd = std::mem::size_of::<Command>() as u64;
        (self.setup.capacity() + self.prefill.capacity() + self.commands.capacity()) as u64 * cmd
            + self.accounts.holdings.capacity() as u64 * 2
    }
}

impl fmt::Debug for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workload")
            .field("name", &self.name)
            .field("symbols", &self.symbols)
            .field("users", &self.accounts.users())
            .field("prefill", &self.prefill.len())
            .field("commands", &self.commands.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// Start price of the single book, in ticks.
pub const SINGLE_START_PRICE: i64 = 100_000;
/// The bell's widest deviation in the single book, in ticks: with it the 1,000 prefill orders
/// land on 769 price levels (seed 1).
pub const SINGLE_PRICE_DEVIATION: i64 = 10_000;
const MAKER_FEE: i64 = 1;
const TAKER_FEE: i64 = 2;
const SINGLE_DEPOSIT: i64 = 1_000_000_000_000;
const MULTI_DEPOSIT: i64 = 10_000_000_000;

/// Generates the `single` workload.
pub fn single(params: &SingleParams, seed: u64) -> Workload {
    single_of(params, seed, SymbolSpec::SPOT, "single")
}

/// Initial and maintenance margin per lot of the `futures` workload's future: far below what
/// each user deposits, so that margin never refuses an order of the mix (docs/benchmarks.md).
pub const FUTURES_MARGINS: (i64, i64) = (10_000, 5_000);

/// Generates the `futures` workload: `single`'s book, users and mix on one future (XBT-PERP,
/// quoted in USD, its mark at the start price): every trade moves positions, so the users soon
/// hold positions, and every trade starts a liquidation pass (which finds nobody at risk).
pub fn futures(params: &SingleParams, seed: u64) -> Workload {
    let kind = Some(rialto_core::SymbolKind::Future {
        initial_margin: FUTURES_MARGINS.0,
        maintenance_margin: FUTURES_MARGINS.1,
        mark_price: SINGLE_START_PRICE,
    });
    single_of(params, seed, kind, "futures")
}

fn single_of(
    params: &SingleParams,
    seed: u64,
    kind: Option<rialto_core::SymbolKind>,
    label: &str,
) -> Workload {
    let mut rng = Rng::new(seed);
    let currencies = vec![name("XBT"), name("USD")];
    let accounts = Accounts {
        currencies: currencies.clone(),
        holdings: vec![0b11; params.users as usize],
        amount: SINGLE_DEPOSIT,
    };
    let setup = vec![Command::AddSymbol(Box::new(SymbolSpec {
        symbol: name("XBT-USD"),
        base: currencies[0],
        quote: currencies[1],
        base_scale: 1,
        quote_scale: 1,
        maker_fee: MAKER_FEE,
        taker_fee: TAKER_FEE,
        band_bps: 0,
        day_end: 0,
        kind,
    }))];
    let books = vec![Book::new(
        SymbolId(0),
        SINGLE_START_PRICE,
        SINGLE_PRICE_DEVIATION,
        params.resting_orders as u64,
        0,
    )];
    let users = Users::Range {
        count: params.users as u64,
    };
    let generator = Generator::new(
        &setup,
        &accounts,
        books,
        users,
        params.mix,
        rng.next_u64(),
        params.resting_orders as usize,
        params.commands,
    );
    let prefill_target = [params.resting_orders as u64];
    generator.finish(
        label.to_string(),
        setup,
        accounts,
        &prefill_target,
        None,
        params.commands,
    )
}

/// Currencies of `multi` with their popularity weights (a user's and a symbol's currencies are
/// drawn in these proportions).
const MULTI_CURRENCIES: [(&str, u32); 10] = [
    ("USD", 30),
    ("EUR", 20),
    ("XBT", 14),
    ("ETH", 10),
    ("JPY", 8),
    ("GBP", 6),
    ("CHF", 5),
    ("LTC", 3),
    ("XRP", 2),
    ("DOT", 2),
];
const CURRENCIES_PER_USER: usize = 3;

/// Generates the `multi` workload.
///
/// # Panics
///
/// With [`Mix::Rulebook`], which is for `single` only.
pub fn multi(params: &MultiParams, seed: u64) -> Workload {
    assert!(
        params.mix != Mix::Rulebook,
        "the rulebook mix is for the single workload"
    );
    let mut rng = Rng::new(seed);
    let n_cur = MULTI_CURRENCIES.len();
    let currencies: Vec<Name> = MULTI_CURRENCIES.iter().map(|(n, _)| name(n)).collect();
    let total_weight: u32 = MULTI_CURRENCIES.iter().map(|(_, w)| w).sum();
    let draw_currency = |rng: &mut Rng, not: u16| loop {
        let mut roll = rng.below(total_weight as u64) as u32;
        let mut pick = 0;
        for (i, (_, w)) in MULTI_CURRENCIES.iter().enumerate() {
            if roll < *w {
                pick = i;
                break;
            }
            roll -= w;
        }
        if not & (1 << pick) == 0 {
            return pick;
        }
    };

    // Users, each with three distinct currencies.
    let n_users = (params.accounts / CURRENCIES_PER_USER as u64).max(2) as usize;
    let mut holdings = Vec::with_capacity(n_users);
    for _ in 0..n_users {
        let mut held = 0u16;
        for _ in 0..CURRENCIES_PER_USER {
            held |= 1 << draw_currency(&mut rng, held);
        }
        holdings.push(held);
    }
    // Who can trade each pair: users holding both currencies (index a * n + b, a < b).
    let mut pair_users: Vec<Vec<u32>> = vec![Vec::new(); n_cur * n_cur];
    for (u, &held) in holdings.iter().enumerate() {
        for a in 0..n_cur {
            for b in a + 1..n_cur {
                if held & (1 << a) != 0 && held & (1 << b) != 0 {
                    pair_users[a * n_cur + b].push(u as u32);
                }
            }
        }
    }
    let best_pair = (0..pair_users.len())
        .max_by_key(|&p| pair_users[p].len())
        .expect("at least one pair");

    // Symbols: a currency pair each (pairs repeat across symbols, as in exchange-core), a start
    // price, and a Pareto weight that sets both its share of commands and its book size.
    let mut setup = Vec::with_capacity(params.symbols as usize);
    let mut books = Vec::with_capacity(params.symbols as usize);
    let mut weights = Vec::with_capacity(params.symbols as usize);
    for s in 0..params.symbols {
        let mut pair = best_pair;
        for _ in 0..100 {
            let a = draw_currency(&mut rng, 0);
            let b = draw_currency(&mut rng, 1 << a);
            let p = a.min(b) * n_cur + a.max(b);
            if pair_users[p].len() >= 2 {
                pair = p;
                break;
            }
        }
        // The more popular currency (lower index) is the quote.
        let (quote, base) = (pair / n_cur, pair % n_cur);
        setup.push(Command::AddSymbol(Box::new(SymbolSpec {
            symbol: name(&format!("S{s:06}")),
            base: currencies[base],
            quote: currencies[quote],
            base_scale: 1,
            quote_scale: 1,
            maker_fee: MAKER_FEE,
            taker_fee: TAKER_FEE,
            band_bps: 0,
            day_end: 0,
            kind: SymbolSpec::SPOT,
        })));
        let price = 1_000 + rng.below(199_000) as i64;
        // The same relative deviation as the single book: a tenth of the start price.
        books.push(Book::new(SymbolId(s), price, price / 10, 0, pair as u16));
        weights.push(rng.pareto_1_5());
    }
    let weight_sum: f64 = weights.iter().sum();
    let mut prefill_target = Vec::with_capacity(books.len());
    // Command draw: cumulative integer weights, searched with one uniform draw.
    let mut cumulative = Vec::with_capacity(books.len());
    let mut acc = 0u64;
    for (book, w) in books.iter_mut().zip(&weights) {
        let share = w / weight_sum;
        let target = (share * params.resting_orders as f64).round() as u64;
        book.target_half = (target / 2).max(1) as u32;
        prefill_target.push(target);
        acc += ((share * (1u64 << 40) as f64) as u64).max(1);
        cumulative.push(acc);
    }
    drop(weights);

    let accounts = Accounts {
        currencies,
        holdings,
        amount: MULTI_DEPOSIT,
    };
    let users = Users::Pairs { lists: pair_users };
    let prefill_len: u64 = prefill_target.iter().sum();
    let generator = Generator::new(
        &setup,
        &accounts,
        books,
        users,
        params.mix,
        rng.next_u64(),
        prefill_len as usize,
        params.commands,
    );
    generator.finish(
        format!("multi ({} symbols)", params.symbols),
        setup,
        accounts,
        &prefill_target,
        Some(&cumulative),
        params.commands,
    )
}

fn name(s: &str) -> Name {
    Name::new(s).expect("generator names are short")
}

/// Who may place orders on a book.
enum Users {
    /// Every user, ids `1..=count`.
    Range { count: u64 },
    /// Users holding both currencies of the book's pair (user index = id - 1).
    Pairs { lists: Vec<Vec<u32>> },
}

impl Users {
    fn pick(&self, rng: &mut Rng, pair: u16) -> UserId {
        match self {
            Users::Range { count } => rng.below(*count) as UserId + 1,
            Users::Pairs { lists } => {
                let list = &lists[pair as usize];
                list[rng.below(list.len() as u64) as usize] as UserId + 1
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Live {
    user: UserId,
    order: OrderId,
    price: i64,
    side: Side,
    /// A DAY order: it expires at the next day end.
    day: bool,
}

/// The generator's view of one book.
struct Book {
    id: SymbolId,
    last_price: i64,
    /// Widest deviation of the bell, ticks.
    deviation: i64,
    /// Orders per side the generator steers towards.
    target_half: u32,
    live: Vec<Live>,
    live_per_side: [u64; 2],
    pair: u16,
}

impl Book {
    fn new(id: SymbolId, price: i64, deviation: i64, target: u64, pair: u16) -> Book {
        Book {
            id,
            last_price: price,
            deviation,
            target_half: (target / 2).max(1) as u32,
            live: Vec::new(),
            live_per_side: [0, 0],
            pair,
        }
    }

    /// Lowest price the generator uses: a sell's proceeds must cover the taker fee.
    fn min_price(&self) -> i64 {
        TAKER_FEE + 1
    }
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Buy => 0,
        Side::Sell => 1,
    }
}

/// Collects what the generator needs from the events of one command.
#[derive(Default)]
struct GenSink {
    touched: Vec<(UserId, OrderId)>,
    /// Stop orders the command triggered.
    triggered: Vec<(UserId, OrderId)>,
    last_trade_price: Option<i64>,
    trades: u64,
    /// Trades whose taker is one of `triggered`.
    cascade_trades: u64,
    expired: u64,
    events: u64,
    levels: u64,
}

impl GenSink {
    fn clear(&mut self) {
        self.touched.clear();
        self.triggered.clear();
        self.last_trade_price = None;
        self.trades = 0;
        self.cascade_trades = 0;
        self.expired = 0;
        self.events = 0;
    }
}

impl EventSink for GenSink {
    fn on_event(&mut self, event: &Event<'_>) {
        self.events += 1;
        match event {
            Event::Trade(t) => {
                self.touched.push((t.maker_user, t.maker_order));
                self.touched.push((t.taker_user, t.taker_order));
                self.last_trade_price = Some(t.price);
                self.trades += 1;
                if self
                    .triggered
                    .iter()
                    .any(|&(u, o)| u == t.taker_user && o == t.taker_order)
                {
                    self.cascade_trades += 1;
                }
            }
            Event::Cancelled(c) => {
                self.touched.push((c.user, c.order));
                if c.reason == CancelReason::Expired {
                    self.expired += 1;
                }
            }
            Event::Triggered(t) => self.triggered.push((t.user, t.order)),
            Event::Book(b) => self.levels = (b.bids.len() + b.asks.len()) as u64,
            _ => {}
        }
    }
}

const NOT_LIVE: u32 = u32::MAX;

struct Generator {
    engine: Engine,
    rng: Rng,
    seq: u64,
    books: Vec<Book>,
    /// By order id: the order's index in its book's `live`, or [`NOT_LIVE`].
    live_index: Vec<u32>,
    sink: GenSink,
    users: Users,
    mix: Mix,
    /// Venue time between commands ([`Mix::ts_step`]).
    ts_step: i64,
    /// Pending stop orders by id: their side and limit (or protection) price, to track a
    /// triggered stop-limit that rests.
    stops: HashMap<OrderId, (Side, i64)>,
    stats: GenStats,
    config: EngineConfig,
    prefill: Vec<Command>,
    commands: Vec<Command>,
}

impl Generator {
    #[allow(clippy::too_many_arguments)]
    fn new(
        setup: &[Command],
        accounts: &Accounts,
        books: Vec<Book>,
        users: Users,
        mix: Mix,
        seed: u64,
        prefill_len: usize,
        commands: u64,
    ) -> Generator {
        let config = EngineConfig {
            // Room for whatever rests while the commands are drawn; the timed engine below
            // gets the most that did.
            max_resting_orders: u32::try_from(2 * prefill_len + (1 << 20)).unwrap_or(u32::MAX),
            max_users: accounts.users() as u32,
            max_tx_ids: u32::try_from(4 * accounts.users() + 1024).unwrap_or(u32::MAX),
            // `multi` lists more symbols than the default allows; the timed engine keeps this.
            max_symbols: u32::try_from(
                setup
                    .iter()
                    .filter(|c| matches!(c, Command::AddSymbol(_)))
                    .count(),
            )
            .unwrap_or(u32::MAX)
            .max(EngineConfig::default().max_symbols),
            ..EngineConfig::default()
        };
        let mut g = Generator {
            engine: Engine::new(config),
            rng: Rng::new(seed),
            seq: 0,
            books,
            live_index: vec![NOT_LIVE],
            sink: GenSink::default(),
            users,
            mix,
            ts_step: mix.ts_step(),
            stops: HashMap::new(),
            stats: GenStats::default(),
            config,
            prefill: Vec::with_capacity(prefill_len),
            commands: Vec::with_capacity(commands as usize),
        };
        for cmd in setup.iter().cloned().chain(accounts.commands()) {
            g.apply(&cmd);
        }
        g
    }

    fn apply(&mut self, cmd: &Command) -> bool {
        self.seq += 1;
        self.sink.clear();
        let ok = self
            .engine
            .apply(
                self.seq,
                self.seq as i64 * self.ts_step,
                cmd,
                &mut self.sink,
            )
            .is_ok();
        if !ok {
            self.stats.rejected += 1;
        }
        ok
    }

    fn new_order_id(&mut self) -> OrderId {
        self.live_index.push(NOT_LIVE);
        (self.live_index.len() - 1) as OrderId
    }

    fn add_live(&mut self, b: usize, live: Live) {
        let book = &mut self.books[b];
        self.live_index[live.order as usize] = book.live.len() as u32;
        book.live.push(live);
        let side = side_index(live.side);
        book.live_per_side[side] += 1;
        self.stats.side_orders_max = self.stats.side_orders_max.max(book.live_per_side[side]);
    }

    fn remove_live(&mut self, b: usize, order: OrderId) {
        let book = &mut self.books[b];
        let index = self.live_index[order as usize] as usize;
        let gone = book.live.swap_remove(index);
        debug_assert_eq!(gone.order, order);
        book.live_per_side[side_index(gone.side)] -= 1;
        if let Some(moved) = book.live.get(index) {
            self.live_index[moved.order as usize] = index as u32;
        }
        self.live_index[order as usize] = NOT_LIVE;
    }

    /// After a command on book `b`: follow the last trade price and forget the orders its
    /// events show are no longer live.
    fn settle(&mut self, b: usize) {
        if let Some(price) = self.sink.last_trade_price {
            self.books[b].last_price = price;
        }
        // Triggered stops are no longer pending; a stop-limit that rested is live.
        for i in 0..self.sink.triggered.len() {
            let (user, order) = self.sink.triggered[i];
            let (side, price) = self
                .stops
                .remove(&order)
                .expect("a triggered stop was placed by the generator");
            if self.engine.order_remaining(user, order).is_some() {
                self.add_live(
                    b,
                    Live {
                        user,
                        order,
                        price,
                        side,
                        day: false,
                    },
                );
            }
        }
        for i in 0..self.sink.touched.len() {
            let (user, order) = self.sink.touched[i];
            if self.live_index[order as usize] != NOT_LIVE
                && self.engine.order_remaining(user, order).is_none()
            {
                self.remove_live(b, order);
            }
        }
    }

    /// The bell-shaped price offset of exchange-core's generator: a random width `1 + r^2 *
    /// deviation`, then the mean of four uniform draws folded around zero.
    fn bell_offset(&mut self, deviation: i64) -> i64 {
        let r = self.rng.unit();
        let width = 1 + (r * r * deviation as f64) as i64;
        let sum: i64 = (0..4).map(|_| self.rng.below(width as u64) as i64).sum();
        (sum / 4 * 2 - width).abs()
    }

    /// `1 + r6^3`, r6 uniform in 0..=5, as exchange-core (three separate draws).
    fn size(&mut self) -> i64 {
        1 + (0..3).map(|_| self.rng.below(6) as i64).product::<i64>()
    }

    fn place(&mut self, b: usize, side: Side, price: i64, tif: Tif) -> Command {
        let user = self.users.pick(&mut self.rng, self.books[b].pair);
        let order = self.new_order_id();
        let price = price.max(self.books[b].min_price());
        let qty = self.size();
        let cmd = Command::Place(
            PlaceOrder::limit(user, order, self.books[b].id, side, price, qty).with_tif(tif),
        );
        let ok = self.apply(&cmd);
        self.settle(b);
        if ok
            && matches!(tif, Tif::Gtc | Tif::Day)
            && self.engine.order_remaining(user, order).is_some()
        {
            self.add_live(
                b,
                Live {
                    user,
                    order,
                    price,
                    side,
                    day: tif == Tif::Day,
                },
            );
        }
        cmd
    }

    /// A passive order on `side`: bids at or below the last trade price, asks at or above. With
    /// `strict`, never at it (prefill: nothing may trade).
    fn place_passive(&mut self, b: usize, side: Side, tif: Tif, strict: bool) -> Command {
        let mut offset = self.bell_offset(self.books[b].deviation);
        if strict {
            offset = offset.max(1);
        }
        let last = self.books[b].last_price;
        let price = match side {
            Side::Buy => last - offset,
            Side::Sell => last + offset,
        };
        self.place(b, side, price, tif)
    }

    /// An order on `side` priced into the other side of the last trade price, so that it
    /// takes liquidity.
    fn place_aggressive(&mut self, b: usize, side: Side, tif: Tif, reach: i64) -> Command {
        let offset = self.bell_offset(reach);
        let last = self.books[b].last_price;
        let price = match side {
            Side::Buy => last + offset,
            Side::Sell => last - offset,
        };
        self.place(b, side, price, tif)
    }

    /// An iceberg GTC on a random side, passive while that side is short of its target: 11 to
    /// 136 lots showing a fifth of them.
    fn place_iceberg(&mut self, b: usize) -> Command {
        let side = self.random_side();
        let short =
            self.books[b].live_per_side[side_index(side)] < self.books[b].target_half as u64;
        let offset = self.bell_offset(self.books[b].deviation);
        let last = self.books[b].last_price;
        let (side, price) = match (short, side) {
            (true, Side::Buy) | (false, Side::Sell) => (Side::Buy, last - offset),
            (true, Side::Sell) | (false, Side::Buy) => (Side::Sell, last + offset),
        };
        let user = self.users.pick(&mut self.rng, self.books[b].pair);
        let order = self.new_order_id();
        let price = price.max(self.books[b].min_price());
        let qty = self.size() + 10;
        let cmd = Command::Place(
            PlaceOrder::limit(user, order, self.books[b].id, side, price, qty)
                .with_display_qty(qty / 5),
        );
        let ok = self.apply(&cmd);
        self.settle(b);
        if ok && self.engine.order_remaining(user, order).is_some() {
            self.add_live(
                b,
                Live {
                    user,
                    order,
                    price,
                    side,
                    day: false,
                },
            );
        }
        cmd
    }

    /// A stop (market on trigger, IOC, with a protection price a deviation beyond the stop) or
    /// a stop-limit GTC (its limit up to a hundredth of a deviation beyond the stop), half
    /// each, its stop price 1 to a hundredth of a deviation beyond the last trade price, on the
    /// side that has not triggered yet (a buy stop above, a sell stop below).
    fn place_stop(&mut self, b: usize) -> Command {
        let side = self.random_side();
        let near = (self.books[b].deviation / 100).max(1) as u64;
        let last = self.books[b].last_price;
        let min = self.books[b].min_price();
        let offset = 1 + self.rng.below(near) as i64;
        let limit_stop = self.rng.coin();
        let user = self.users.pick(&mut self.rng, self.books[b].pair);
        let order = self.new_order_id();
        let qty = self.size();
        let (stop, price, order_type, tif) = if limit_stop {
            let beyond = self.rng.below(near) as i64;
            let (stop, price) = match side {
                Side::Buy => (last + offset, last + offset + beyond),
                Side::Sell => (last - offset, last - offset - beyond),
            };
            (stop, price, OrderType::StopLimit, Tif::Gtc)
        } else {
            let reach = self.books[b].deviation;
            let (stop, price) = match side {
                Side::Buy => (last + offset, last + offset + reach),
                Side::Sell => (last - offset, last - offset - reach),
            };
            (stop, price, OrderType::Stop, Tif::Ioc)
        };
        let stop = stop.max(min);
        let price = price.max(min);
        let cmd = Command::Place(
            PlaceOrder::limit(user, order, self.books[b].id, side, price, qty)
                .with_order_type(order_type)
                .with_tif(tif)
                .with_stop_price(stop),
        );
        let ok = self.apply(&cmd);
        self.settle(b);
        if ok {
            self.stops.insert(order, (side, price));
        }
        cmd
    }

    fn random_side(&mut self) -> Side {
        if self.rng.coin() {
            Side::Buy
        } else {
            Side::Sell
        }
    }

    fn random_live(&mut self, b: usize) -> Live {
        let live = &self.books[b].live;
        live[self.rng.below(live.len() as u64) as usize]
    }

    /// One benchmark command on book `b`.
    fn command(&mut self, b: usize) -> Command {
        // A command at or after a day end first expires every DAY order (all live ones were
        // placed since the last day end): forget them before choosing an order to act on.
        let ts = (self.seq as i64 + 1) * self.ts_step;
        if self.engine.next_expiry().is_some_and(|t| t <= ts) {
            for book in 0..self.books.len() {
                let day: Vec<OrderId> = self.books[book]
                    .live
                    .iter()
                    .filter(|o| o.day)
                    .map(|o| o.order)
                    .collect();
                for order in day {
                    self.remove_live(book, order);
                }
            }
        }
        let mut kind = self.mix.draw(&mut self.rng);
        if kind.needs_live_order() && self.books[b].live.is_empty() {
            kind = Kind::Gtc;
        }
        let cmd = match kind {
            Kind::Gtc => {
                // Grow a side that is short of its target; otherwise take from a full one.
                let side = self.random_side();
                if self.books[b].live_per_side[side_index(side)] < self.books[b].target_half as u64
                {
                    self.place_passive(b, side, Tif::Gtc, false)
                } else {
                    let deviation = self.books[b].deviation;
                    self.place_aggressive(b, side.opposite(), Tif::Gtc, deviation)
                }
            }
            Kind::Day => {
                // As a GTC: grow a short side, else take from a full one.
                let side = self.random_side();
                if self.books[b].live_per_side[side_index(side)] < self.books[b].target_half as u64
                {
                    self.place_passive(b, side, Tif::Day, false)
                } else {
                    let deviation = self.books[b].deviation;
                    self.place_aggressive(b, side.opposite(), Tif::Day, deviation)
                }
            }
            Kind::Iceberg => self.place_iceberg(b),
            Kind::Stop => self.place_stop(b),
            Kind::Ioc => {
                let side = self.random_side();
                let book = &self.books[b];
                let hit_short =
                    book.live_per_side[side_index(side.opposite())] < book.target_half as u64;
                if self.mix == Mix::Published && hit_short {
                    // The published mix adds no more orders (9% GTC) than its cancels and IOCs
                    // take (6% + 3%): an IOC against a side short of its target is priced
                    // behind the last trade, so that it mostly expires unfilled and the book
                    // can hold its size.
                    self.place_passive(b, side, Tif::Ioc, false)
                } else {
                    let reach = book.deviation * 2;
                    let last = book.last_price;
                    let price = match side {
                        Side::Buy => last + reach,
                        Side::Sell => last - reach,
                    };
                    self.place(b, side, price, Tif::Ioc)
                }
            }
            Kind::Fok => {
                let side = self.random_side();
                let deviation = self.books[b].deviation;
                self.place_aggressive(b, side, Tif::Fok, deviation)
            }
            Kind::Cancel => {
                let o = self.random_live(b);
                let cmd = Command::Cancel {
                    user: o.user,
                    order: o.order,
                };
                self.apply(&cmd);
                self.settle(b);
                cmd
            }
            Kind::Move => {
                let o = self.random_live(b);
                // A 1% pull towards the last trade price, at least one tick.
                let last = self.books[b].last_price;
                let step = if o.price < last {
                    (last - o.price + 99) / 100
                } else if o.price > last {
                    -((o.price - last + 99) / 100)
                } else if self.rng.coin() {
                    1
                } else {
                    -1
                };
                let price = (o.price + step).max(self.books[b].min_price());
                let cmd = Command::Move {
                    user: o.user,
                    order: o.order,
                    price,
                };
                self.apply(&cmd);
                self.settle(b);
                let index = self.live_index[o.order as usize];
                if index != NOT_LIVE {
                    self.books[b].live[index as usize].price = price;
                }
                cmd
            }
            Kind::Reduce => {
                // As exchange-core: by 1 to the whole remaining quantity. While the order's side
                // is short of its target, a reduce leaves at least one lot (a 1-lot order is
                // passed over for another, up to three tries), so that the book can refill.
                let mut o = self.random_live(b);
                let mut remaining = self.engine.order_remaining(o.user, o.order).unwrap_or(1);
                let short = |g: &Self, o: &Live| {
                    g.books[b].live_per_side[side_index(o.side)] < g.books[b].target_half as u64
                };
                let mut tries = 0;
                while remaining == 1 && tries < 3 && short(self, &o) {
                    o = self.random_live(b);
                    remaining = self.engine.order_remaining(o.user, o.order).unwrap_or(1);
                    tries += 1;
                }
                let qty = if remaining > 1 && short(self, &o) {
                    1 + self.rng.below(remaining as u64 - 1) as i64
                } else {
                    1 + self.rng.below(remaining as u64) as i64
                };
                let cmd = Command::Reduce {
                    user: o.user,
                    order: o.order,
                    qty,
                };
                self.apply(&cmd);
                self.settle(b);
                cmd
            }
        };
        self.stats.kinds[kind as usize] += 1;
        self.stats.events += self.sink.events;
        self.stats.trades += self.sink.trades;
        self.stats.stops_triggered += self.sink.triggered.len() as u64;
        self.stats.cascade_trades += self.sink.cascade_trades;
        self.stats.expired += self.sink.expired;
        if self.sink.trades > 0 {
            self.stats.trading_commands += 1;
            self.stats.trading_by_kind[kind as usize] += 1;
        }
        cmd
    }

    /// Live orders: resting ones and pending stops (the engine counts both).
    fn resting(&self) -> u64 {
        self.books.iter().map(|b| b.live.len() as u64).sum::<u64>() + self.stops.len() as u64
    }

    /// Levels (bids + asks) of the busiest book, from an L2 query on the generation engine.
    fn busiest_book_levels(&mut self) -> u64 {
        let Some(b) = (0..self.books.len()).max_by_key(|&b| self.books[b].live.len()) else {
            return 0;
        };
        let cmd = Command::Book {
            symbol: self.books[b].id,
            depth: i64::MAX,
        };
        self.sink.levels = 0;
        // A query the measured passes never see: it takes no sequence number or time of its
        // own (with `--mix rulebook` a later time could expire orders here, unseen by `settle`),
        // so that every command runs at the same time in the generator as in the passes.
        let ok = self
            .engine
            .apply(
                self.seq,
                self.seq as i64 * self.ts_step,
                &cmd,
                &mut self.sink,
            )
            .is_ok();
        if !ok {
            self.stats.rejected += 1;
        }
        self.sink.levels
    }

    /// Prefill to the per-book targets, then generate the benchmark commands (`cumulative`:
    /// the books' cumulative command weights; `None` for a single book).
    fn finish(
        mut self,
        name: String,
        setup: Vec<Command>,
        accounts: Accounts,
        prefill_target: &[u64],
        cumulative: Option<&[u64]>,
        commands: u64,
    ) -> Workload {
        for (b, &target) in prefill_target.iter().enumerate() {
            for i in 0..target {
                let side = if i % 2 == 0 { Side::Buy } else { Side::Sell };
                let cmd = self.place_passive(b, side, Tif::Gtc, true);
                self.prefill.push(cmd);
            }
        }
        self.stats.resting_after_prefill = self.resting();
        self.stats.levels_after_prefill = self.busiest_book_levels();
        let mut resting_min = self.stats.resting_after_prefill;
        let mut resting_max = resting_min;
        let total_weight = cumulative.map_or(0, |c| *c.last().unwrap_or(&0));
        for _ in 0..commands {
            let b = match cumulative {
                None => 0,
                Some(c) => {
                    let roll = self.rng.below(total_weight);
                    c.partition_point(|&w| w <= roll)
                }
            };
            let cmd = self.command(b);
            self.commands.push(cmd);
            let resting = self.engine.resting_order_count() as u64;
            resting_min = resting_min.min(resting);
            resting_max = resting_max.max(resting);
            self.stats.stops_pending_max =
                self.stats.stops_pending_max.max(self.stops.len() as u64);
        }
        self.stats.resting_min = resting_min;
        self.stats.resting_max = resting_max;
        self.stats.resting_end = self.resting();
        self.stats.stops_pending_end = self.stops.len() as u64;
        debug_assert_eq!(
            self.stats.resting_end,
            self.engine.resting_order_count() as u64
        );
        self.stats.levels_end = self.busiest_book_levels();
        let max_side = self.stats.side_orders_max as usize;
        let config = EngineConfig {
            max_resting_orders: u32::try_from(resting_max + resting_max / 4 + 1024)
                .unwrap_or(u32::MAX),
            max_users: accounts.users() as u32,
            max_tx_ids: u32::try_from(4 * accounts.users() + 1024).unwrap_or(u32::MAX),
            expected_levels_per_side: if cumulative.is_none() {
                max_side + max_side / 4 + 16
            } else {
                self.config.expected_levels_per_side
            },
            expected_stops_per_side: if self.stats.stops_pending_max > 0 {
                let most = self.stats.stops_pending_max as usize;
                most + most / 4 + 16
            } else {
                self.config.expected_stops_per_side
            },
            ..self.config
        };
        Workload {
            name,
            mix: self.mix,
            ts_step: self.mix.ts_step(),
            symbols: self.books.len(),
            setup,
            accounts,
            prefill: self.prefill,
            commands: self.commands,
            config,
            stats: self.stats,
        }
    }
}
