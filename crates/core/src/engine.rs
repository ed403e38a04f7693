//! The engine: applies commands to the venue's state (docs/rules.md).
//!
//! Every command is validated fully before anything is mutated, so a rejection changes nothing.
//! Balances are only ever moved between users, holds and the fee ledger; the total of each
//! currency changes only by deposits and withdrawals, whose running total is checked to fit in
//! an i64, so every balance fits too.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::num::NonZeroI64;

use rialto_prefetch::{prefetch, prefetch_first_line, prefetch_index};

use crate::account::{Accounts, Amounts, MAX_CURRENCIES};
use crate::book::{BookSide, Levels, NIL, NodeKind, OrderNode, Orders, level_price};

mod futures;
mod iceberg;
mod stops;

pub(crate) use futures::{FUTURE_BASE, FutureBook, Futures, is_future};

use crate::command::{AmendOrder, Command, PlaceOrder, SymbolKind, SymbolSpec};
use crate::event::{
    Amended, Balance, BookSnapshot, Cancelled, CurrencyTotals, Event, EventSink, Level, LiveOrder,
    OpenOrder, Trade, UserReport,
};
use crate::hasher::FastHash;
use crate::index::IdIndex;
use crate::phases::{MarketControls, beyond_edge, phase_admits_change, phase_admits_order};
use crate::types::{
    CancelReason, CurrencyId, Name, OrderId, OrderType, Phase, Priority, Reason, Side, Stp,
    SymbolId, Tif, UserId,
};
pub(crate) use stops::{OrderExtra, StopEntry};

/// Capacities and limits. Capacities are hints that are allocated at start so that steady-state
/// trading does not allocate; limits are hard and reject with `limit_exceeded`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    pub max_open_orders_per_user: u32,
    /// The capacities below are fixed when the engine starts: it reserves room for each, and a
    /// command that would go past one is rejected `limit_exceeded` (docs/rules.md, "Limits"),
    /// so that no table is rehashed or grown on the engine thread.
    ///
    /// Resting orders of the whole venue, pending stops included.
    pub max_resting_orders: u32,
    pub max_users: u32,
    /// Transfer ids (`adjust_balance`, `fund_insurance`) the venue remembers: each is unique
    /// for the venue's whole life, so the venue takes this many transfers in all.
    pub max_tx_ids: u32,
    /// Order ids the order-id window remembers (orders that ended within the window).
    pub max_window_ids: u32,
    pub max_symbols: u32,
    pub expected_levels_per_side: usize,
    /// A book side with this many price levels gets a ladder: a direct price index over a
    /// window of prices near the touch (crates/core/src/book.rs), 4 bytes and a bit each. The
    /// window starts at an eighth of `ladder_cells` and doubles, up to `ladder_cells`, as the
    /// side gets busier. Tuning only: nothing the engine reports depends on either. 8,192 cells
    /// rather than 4,096: `single` about 4% faster (docs/benchmarks-history.md); ladders from 32 levels
    /// with small windows: a fifth fewer lines prefetched a command on `multi large`.
    pub ladder_min_levels: usize,
    pub ladder_cells: usize,
    /// Pending stop orders per symbol and side that fit before their list grows (a hint).
    pub expected_stops_per_side: usize,
    /// Seeds the hash of the engine's id maps. Nothing the engine reports depends on it; a venue
    /// draws it at random and keeps it secret so that users cannot choose order ids that
    /// collide (docs/rules.md).
    pub hash_seed: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_open_orders_per_user: 100_000,
            max_resting_orders: 1 << 17,
            max_users: 1 << 14,
            max_tx_ids: 1 << 16,
            max_window_ids: 1 << 16,
            max_symbols: 256,
            expected_levels_per_side: 16,
            ladder_min_levels: 32,
            ladder_cells: 8192,
            expected_stops_per_side: 16,
            hash_seed: 0x243f_6a88_85a3_08d3,
        }
    }
}

/// How many commands ahead [`Engine::prefetch_ahead`] loads each link of a command's chain of
/// cache misses (the id index; the order; its level, neighbours, account and book; the book's
/// arrays; the level a move joins; for a new order, one link earlier, the best level it meets
/// or the level it joins): far enough for each link to arrive (a miss is a few hundred ns)
/// before the next link reads it. Tuned on `rialto bench engine --workload multi --size
/// large`, where the first four at [12, 6, 3, 1] and [16, 10, 5, 2] did equally well and
/// [12, 8, 4, 2] slightly worse, and [20, 14, 9, 5, 2] was no better than these.
/// The most slices an iceberg may be cut into: `ceil(remaining / display_qty)` above this is
/// `invalid_qty` (docs/rules.md, "Iceberg orders"). Each slice a taker meets is its own trade,
/// so without a bound one order could make a command report 2^63 trades.
pub const MAX_ICEBERG_SLICES: i64 = 10_000;

/// Nanoseconds in a day: DAY orders expire at a time of day (docs/rules.md, "GTD and DAY").
pub const NS_PER_DAY: i64 = 86_400_000_000_000;

pub const PREFETCH_DISTANCES: [usize; 5] = [16, 10, 5, 2, 1];

/// How many commands past the one about to be applied [`Engine::prefetch_upcoming`] reads.
pub const PREFETCH_LOOKAHEAD: usize = PREFETCH_DISTANCES[0];
const _: () = assert!(
    PREFETCH_DISTANCES[0] > PREFETCH_DISTANCES[1]
        && PREFETCH_DISTANCES[1] > PREFETCH_DISTANCES[2]
        && PREFETCH_DISTANCES[2] > PREFETCH_DISTANCES[3]
        && PREFETCH_DISTANCES[3] > PREFETCH_DISTANCES[4]
);

/// When a loop that applies commands calls [`Engine::prefetch_ahead`] (or
/// [`Engine::prefetch_upcoming`]) before each: `rialto bench engine --prefetch`, and the
/// server's `pipeline.prefetch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase")
)]
pub enum Prefetch {
    /// When the engine's state outgrows the CPU caches ([`Engine::prefetch_pays`]): on a small
    /// venue prefetching only costs time.
    #[default]
    Auto,
    On,
    Off,
}

impl Prefetch {
    /// Whether to prefetch now, on `engine` as it stands.
    pub fn now(self, engine: &Engine) -> bool {
        match self {
            Prefetch::Auto => engine.prefetch_pays(),
            Prefetch::On => true,
            Prefetch::Off => false,
        }
    }
}

/// The size of the orders and accounts from which [`Engine::prefetch_pays`]: larger than the
/// last-level cache of the machines Rialto is measured on.
pub const PREFETCH_PAYS_BYTES: usize = 64 << 20;

/// A resting order as the final state lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestingOrder {
    pub user: UserId,
    pub order: OrderId,
    pub side: Side,
    pub price: i64,
    pub remaining: i64,
}

/// A symbol's terms of trading, copied out of its spec: what orders on it are charged by.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Terms {
    pub base: CurrencyId,
    pub quote: CurrencyId,
    pub base_scale: i64,
    pub quote_scale: i64,
    pub maker_fee: i64,
    pub taker_fee: i64,
}

/// A symbol and its book, laid out by how hot each part is: on a big venue a command finds its
/// symbol cold, and [`Engine::prefetch_ahead`] loads the first line, the side the command
/// works on and the phase and band (four lines), not the whole (eight).
#[repr(C, align(64))]
pub(crate) struct SymbolState {
    // The first line: what every command on the symbol reads.
    pub terms: Terms,
    /// Each side's best price and level (NIL when none), bids first: kept here, in step with
    /// the sides, so that checking whether an order crosses and finding the level it trades with
    /// first do not touch the other side's lines.
    best_prices: [Option<NonZeroI64>; 2],
    best_levels: [u32; 2],
    // Two lines each (aligned to one).
    bids: BookSide,
    asks: BookSide,
    /// The phase and the band (crates/core/src/phases.rs): read by every new order, moved by
    /// every trade; a line of its own.
    pub controls: MarketControls,
    // Cold.
    pub spec: SymbolSpec,
    /// The last trade's price; 0 before the first.
    pub last_trade: i64,
    /// The reference price of the price band (docs/rules.md, "Price bands"); 0 for none.
    pub reference: i64,
    /// Live iceberg orders on the book, so that what does not concern icebergs need not look
    /// for their hidden parts (the uncross's volumes).
    pub icebergs: u32,
    /// Levels in transit (price, level) while a ladder's window moves; kept to avoid allocating
    /// each time.
    scratch: Vec<(i64, u32)>,
    /// Pending stops by side (bids first), each sorted so that the next to trigger is last.
    pub stops: [Vec<StopEntry>; 2],
    /// Trades not yet examined by the stop cascade, one (first price, last price) pair per walk
    /// that traded (a walk's prices are monotonic, so its ends decide what it triggers). Only
    /// kept while the symbol has pending stops.
    pub unexamined: Vec<(i64, i64)>,
    /// A future's margins, mark and liquidation index; `None` for a spot symbol.
    pub future: Option<Box<FutureBook>>,
}

const _: () = assert!(std::mem::offset_of!(SymbolState, bids) == 64);
const _: () = assert!(
    std::mem::offset_of!(SymbolState, controls) % 64 == 0
        && std::mem::size_of::<MarketControls>() <= 64
);
const _: () = assert!(Side::Buy as usize == 0 && Side::Sell as usize == 1);

impl SymbolState {
    fn new(spec: SymbolSpec, base: CurrencyId, quote: CurrencyId, config: &EngineConfig) -> Self {
        let side = |side| {
            BookSide::new(
                side,
                config.expected_levels_per_side,
                config.ladder_min_levels,
                config.ladder_cells,
            )
        };
        SymbolState {
            terms: Terms {
                base,
                quote,
                base_scale: spec.base_scale,
                quote_scale: spec.quote_scale,
                maker_fee: spec.maker_fee,
                taker_fee: spec.taker_fee,
            },
            best_prices: [None; 2],
            best_levels: [NIL; 2],
            bids: side(Side::Buy),
            asks: side(Side::Sell),
            controls: MarketControls::new(base != FUTURE_BASE),
            spec,
            last_trade: 0,
            reference: 0,
            icebergs: 0,
            scratch: Vec::new(),
            stops: [
                Vec::with_capacity(config.expected_stops_per_side),
                Vec::with_capacity(config.expected_stops_per_side),
            ],
            unexamined: Vec::with_capacity(8),
            future: None,
        }
    }

    pub fn side(&self, side: Side) -> &BookSide {
        match side {
            Side::Buy => &self.bids,
            Side::Sell => &self.asks,
        }
    }

    /// Starts loading what a command on an order of `side` reads here: the first line and that
    /// side.
    #[inline]
    pub fn prefetch_side(&self, side: Side) {
        prefetch_first_line(self);
        prefetch(self.side(side));
        prefetch(&self.controls);
    }

    /// The best price on `side`, if any (from the first line: the side itself is not read).
    #[inline]
    pub fn best_price(&self, side: Side) -> Option<i64> {
        self.best_prices[side as usize].map(NonZeroI64::get)
    }

    /// The best level on `side`, if any (from the first line, as [`Self::best_price`]).
    #[inline]
    pub fn best_level(&self, side: Side) -> Option<u32> {
        let level = self.best_levels[side as usize];
        (level != NIL).then_some(level)
    }

    /// Appends order `idx` (whose price is set) to the back of its level on `side`.
    #[inline(always)]
    pub fn push_back(&mut self, side: Side, levels: &mut Levels, orders: &mut Orders, idx: u32) {
        let price = orders.get(idx).price;
        let (book, scratch) = self.book_mut(side);
        book.push_back(levels, orders, scratch, idx);
        self.best_after(side, None, Some(price));
    }

    /// Takes order `idx` out of its level on `side`. The node itself stays allocated.
    #[inline]
    pub fn unlink(&mut self, side: Side, levels: &mut Levels, orders: &mut Orders, idx: u32) {
        let price = orders.get(idx).price;
        let (book, scratch) = self.book_mut(side);
        book.unlink(levels, orders, scratch, idx);
        self.best_after(side, Some(price), None);
    }

    /// Moves order `idx` on `side` to `price`, at the back of its level there (a move that
    /// does not trade).
    #[inline]
    pub fn reprice(
        &mut self,
        side: Side,
        levels: &mut Levels,
        orders: &mut Orders,
        idx: u32,
        price: i64,
    ) {
        let old_price = orders.get(idx).price;
        let (book, scratch) = self.book_mut(side);
        book.reprice(levels, orders, scratch, idx, price);
        self.best_after(side, Some(old_price), Some(price));
    }

    /// A trade at `price`: the last price and the new reference, which the band follows.
    #[inline]
    pub fn traded_at(&mut self, price: i64) {
        self.last_trade = price;
        if self.reference != price {
            self.set_reference(price);
        }
    }

    /// A new reference price (a trade or `set_ref_price`): the band's edges move with it.
    pub fn set_reference(&mut self, price: i64) {
        self.reference = price;
        // Without a band the edges stay open whatever the reference: no work per trade.
        if self.spec.band_bps != 0 {
            self.controls.refresh_edges(price, self.spec.band_bps);
        }
    }

    /// `side`'s book, and the scratch space its changes may need.
    #[inline]
    fn book_mut(&mut self, side: Side) -> (&mut BookSide, &mut Vec<(i64, u32)>) {
        let book = match side {
            Side::Buy => &mut self.bids,
            Side::Sell => &mut self.asks,
        };
        (book, &mut self.scratch)
    }

    /// Keeps the cached best of `side` after an order left it at price `left` and/or joined it
    /// at `joined`. Only an order that left the best price, or joined at or better than it, can
    /// change the best: one behind it joins or leaves a level behind it (and a level keeps its
    /// index when the book re-homes it).
    #[inline]
    fn best_after(&mut self, side: Side, left: Option<i64>, joined: Option<i64>) {
        let changed = self.best_price(side).is_none_or(|best| {
            left == Some(best) || joined.is_some_and(|price| at_or_better(side, price, best))
        });
        if changed {
            self.refresh_best(side);
        }
        self.debug_assert_best(side);
    }

    /// In debug builds (the tests), checks the cached best price and level against the side.
    #[inline]
    fn debug_assert_best(&self, side: Side) {
        debug_assert_eq!(
            self.side(side).best_price_and_level(),
            self.best_price(side).zip(self.best_level(side)),
            "the cached best of the {side:?} side"
        );
    }

    /// Reads `side`'s best price and level again after a change (from lines the change has just
    /// used).
    #[inline]
    fn refresh_best(&mut self, side: Side) {
        // Prices are > 0: zero stands for none.
        let (price, level) = self.side(side).best_price_and_level().unwrap_or((0, NIL));
        let price = NonZeroI64::new(price);
        self.best_prices[side as usize] = price;
        self.best_levels[side as usize] = level;
    }
}

pub(crate) struct CurrencyState {
    pub name: Name,
    pub deposits: i64,
    pub withdrawals: i64,
    pub fees: i64,
    /// The insurance fund (docs/rules.md, "Futures"); may be negative (the venue's loss).
    pub insurance: i64,
}

/// What an incoming order (a new order, or a moved one) brings to the matching loop.
struct Taker {
    account: u32,
    user: UserId,
    order: OrderId,
    side: Side,
    /// `None` for an unpriced market order.
    limit: Option<i64>,
    qty: i64,
    stp: Stp,
    post_only: bool,
    /// Where the unfilled rest goes: `None` rests on the book (limit gtc, gtd, day), else the
    /// reason for its cancellation.
    leftover: Option<CancelReason>,
    /// An iceberg's display quantity (what each slice of its rest shows); 0 for any other order.
    display: i64,
    /// When what rests expires, and whether because it is a DAY order.
    terms: OrderTerms,
    /// A liquidation's close (order id 0, not the user's: its id is never remembered).
    liquidation: bool,
}

/// What a live order keeps beside its node (see [`Engine::order_info`]): when it expires
/// (0: never) and its time in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OrderTerms {
    pub expire_ts: i64,
    pub tif: Tif,
}

/// What a live order keeps beside its node, by node index ([`Engine::order_info`]): its total
/// quantity (filled + remaining), which `amend` needs to know the filled part, and its terms.
/// Kept beside the nodes, not in them, so that a node stays one cache line; written when an
/// order comes to rest and by `reduce` and `amend`, never by a fill. One entry is half a cache
/// line and never straddles two: resting an order touches one line here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(32))]
pub(crate) struct OrderInfo {
    pub total: i64,
    pub terms: OrderTerms,
}

const _: () = assert!(std::mem::size_of::<OrderInfo>() == 32);

impl OrderTerms {
    pub const GTC: OrderTerms = OrderTerms {
        expire_ts: 0,
        tif: Tif::Gtc,
    };
}

/// The first instant strictly after `now` whose time of day (UTC) is `day_end`: when a DAY
/// order placed at `now` expires. `None` past i64.
fn next_day_end(now: i64, day_end: i64) -> Option<i64> {
    let day = NS_PER_DAY as i128;
    let now = now as i128;
    let mut t = now - now.rem_euclid(day) + day_end as i128;
    if t <= now {
        t += day;
    }
    i64::try_from(t).ok()
}

/// What the matching loop did for a taker.
#[derive(Default)]
struct Fills {
    filled: i64,
    /// Buyer: quote paid, price plus fee. Seller: quote received, price minus fee.
    quote: i64,
    /// The price of the last trade; meaningless when nothing filled.
    last_price: i64,
    stopped_by_stp: bool,
    /// The price of the first trade (a walk's prices only ever get worse for its taker, so
    /// its first and last trades decide which stops it triggers); meaningless when nothing
    /// filled.
    first_price: i64,
    /// The walk stopped at the band's edge (docs/rules.md, "Price bands").
    stopped_by_band: bool,
    /// The walk stopped before a fill whose settlement would overflow the taker's side.
    stopped_by_overflow: bool,
}

pub struct Engine {
    pub(crate) config: EngineConfig,
    pub(crate) symbols: Vec<SymbolState>,
    pub(crate) symbol_ids: BTreeMap<Name, SymbolId>,
    pub(crate) currencies: Vec<CurrencyState>,
    pub(crate) currency_ids: BTreeMap<Name, CurrencyId>,
    pub(crate) accounts: Accounts,
    /// User id to account (see [`Engine::account_of`]).
    pub(crate) account_ids: IdIndex,
    pub(crate) orders: Orders,
    /// What each order node keeps beside it, by node index (docs on [`OrderInfo`]).
    pub(crate) order_info: Vec<OrderInfo>,
    /// Live orders that expire, as (expire_ts, user, order, node), soonest first: popped at
    /// step 1 of every command (docs/rules.md, "GTD and DAY"). An entry whose order ended
    /// early stays until it comes up (then it is skipped) or until the heap would grow, when
    /// such entries are dropped: so it never holds more than twice the live expiring orders
    /// plus its reserved capacity.
    pub(crate) expiries: BinaryHeap<Reverse<(i64, UserId, OrderId, u32)>>,
    /// The time of the heap's first entry (`i64::MAX` when it is empty).
    next_expiry_ts: i64,
    /// No later than the first venue time at which step 1 of a command has work: the first
    /// expiry, or the time the oldest id of the order-id window leaves it. Before it, step 1 is
    /// this one comparison; at or after it, step 1 looks and works the time out again (a time
    /// too early costs one look, never a missed expiry).
    pub(crate) housekeeping_at: i64,
    /// What only icebergs and pending stops have, by node index (docs on [`OrderExtra`]); an
    /// ordinary order never reads it.
    pub(crate) order_extras: Vec<OrderExtra>,
    /// Acceptance numbers of pending stops: ties in trigger order go to the lower.
    pub(crate) stop_accepts: u64,
    /// Symbols with unexamined trades (see [`SymbolState::unexamined`]); a symbol may repeat.
    pub(crate) stop_dirty: Vec<u32>,
    /// Whether a command may have left knock-on work (`stop_dirty`, `fut.dirty` or `fut.stale`
    /// not empty): set where they are pushed to, so that a command without any checks one flag.
    pub(crate) knock_on_pending: bool,
    /// Reused by the stop cascade: the stops one round collects, and the walks it examines.
    scratch_triggered: Vec<u32>,
    scratch_walks: Vec<(i64, i64)>,
    /// `(user, order)` of every resting order to its node (see [`Engine::find_order`]).
    pub(crate) order_ids: IdIndex,
    /// Hashes the keys of both id indexes and of `txs`.
    hash: FastHash,
    pub(crate) levels: Levels,
    pub(crate) txs: HashSet<i64, FastHash>,
    pub(crate) last_seq: u64,
    /// How long, in ns of venue time, the id of an order that ended stays taken (0: only live
    /// orders' ids are taken).
    pub(crate) order_id_window: i64,
    /// The orders that ended inside the window, as (ended at, user, order), oldest first (the
    /// clock never goes back, so appending keeps them in time order), and the same ids as a
    /// set to look up. Both hold only one window's worth: older ids are forgotten at the start
    /// of every command.
    pub(crate) recent_ids: VecDeque<(i64, UserId, OrderId)>,
    pub(crate) recent_id_set: HashSet<(UserId, OrderId), FastHash>,
    /// The venue clock, ns since the Unix epoch: the largest command timestamp seen so far
    /// (0 before any). Time never goes back (docs/rules.md, "Time").
    pub(crate) now: i64,
    /// Reused for book snapshots so that queries do not allocate once warm.
    pub(crate) scratch_bids: Vec<Level>,
    pub(crate) scratch_asks: Vec<Level>,
    /// Reused by mass cancel to put a user's orders in canonical order: (symbol name, order id,
    /// node).
    scratch_mass_cancel: Vec<(Name, OrderId, u32)>,
    /// Positions, the liquidation index and the work of liquidation passes
    /// (crates/core/src/engine/futures.rs).
    pub(crate) fut: Futures,
    /// The order each command ahead names, as the second prefetch step found it, at its
    /// sequence number modulo [`FOUND_AHEAD`]: the later steps check that order's key (cached
    /// by then) instead of hashing and probing the id index again. A hint for prefetching
    /// only, never read by `apply`: a stale or wrong one is caught by the key check.
    found_ahead: [Cell<u32>; FOUND_AHEAD],
}

/// Slots of [`Engine::found_ahead`]: more than the distance from the second prefetch step to
/// the last one, so a slot outlives the steps of its command.
const FOUND_AHEAD: usize = 16;
const _: () = assert!(FOUND_AHEAD > PREFETCH_DISTANCES[1]);

/// The hold of a buy of `qty` lots at `price`: `qty * (price * quote_scale + taker_fee)`.
fn buy_hold(qty: i64, price: i64, terms: &Terms) -> Option<i64> {
    price
        .checked_mul(terms.quote_scale)?
        .checked_add(terms.taker_fee)?
        .checked_mul(qty)
}

/// Whether a taker on `side` with `limit` trades against a level at `price`.
#[inline]
fn crosses(side: Side, limit: Option<i64>, price: i64) -> bool {
    match (side, limit) {
        (_, None) => true,
        (Side::Buy, Some(limit)) => limit >= price,
        (Side::Sell, Some(limit)) => limit <= price,
    }
}

/// Whether an iceberg of `remaining` lots shown `display` at a time has more slices than
/// [`MAX_ICEBERG_SLICES`].
#[inline]
fn too_many_slices(remaining: i64, display: i64) -> bool {
    (remaining - 1) / display >= MAX_ICEBERG_SLICES
}

/// Whether an order of this tif rests when it is a limit order.
#[inline]
fn tif_rests(tif: Tif) -> bool {
    matches!(tif, Tif::Gtc | Tif::Gtd | Tif::Day)
}

/// The `invalid_order` checks of a place with a stop type or optional fields (docs/rules.md,
/// "Stop and stop-limit orders", "Iceberg orders").
#[cold]
fn check_order_extras(
    cmd: &PlaceOrder,
    order_type: OrderType,
    tif: Tif,
    rests: bool,
    now: i64,
) -> Result<(), Reason> {
    let stop_tif_ok = order_type != OrderType::Stop || matches!(tif, Tif::Ioc | Tif::Fok);
    let stop_price_ok =
        cmd.stop_price().is_none() || matches!(order_type, OrderType::Stop | OrderType::StopLimit);
    let display_ok = cmd.display_qty().is_none() || rests;
    // GTD needs an expiry after now; no other tif takes one (docs/rules.md, "GTD and DAY").
    let expiry_ok = match (tif, cmd.expire_ts()) {
        (Tif::Gtd, Some(expire_ts)) => expire_ts > now,
        (Tif::Gtd, None) | (_, Some(_)) => false,
        (_, None) => true,
    };
    if stop_tif_ok && stop_price_ok && display_ok && expiry_ok {
        Ok(())
    } else {
        Err(Reason::InvalidOrder)
    }
}

/// A stop's prices: a stop price > 0, and a protection price on a stop buy (whose hold is
/// that of a buy at it).
fn stop_prices_valid(cmd: &PlaceOrder, side: Side) -> bool {
    cmd.stop_price().is_some_and(|stop| stop > 0)
        && !(cmd.order_type == Some(OrderType::Stop) && side == Side::Buy && cmd.price.is_none())
}

/// Whether `price` is at or better than `best` for a resting order on `side`.
#[inline]
fn at_or_better(side: Side, price: i64, best: i64) -> bool {
    match side {
        Side::Buy => price >= best,
        Side::Sell => price <= best,
    }
}

/// A sell's proceeds per lot at `price` would be negative: such a sell is refused, and an
/// unpriced market sell stops before such a level.
#[inline]
fn sell_price_below_fee(price: i64, terms: &Terms) -> bool {
    (price as i128) * (terms.quote_scale as i128) < terms.taker_fee as i128
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        let hash = FastHash {
            seed: config.hash_seed,
        };
        let users = (config.max_users as usize).min(IdIndex::MAX_ENTRIES);
        let orders = (config.max_resting_orders as usize).min(IdIndex::MAX_ENTRIES);
        Engine {
            config,
            symbols: Vec::with_capacity(config.max_symbols as usize),
            symbol_ids: BTreeMap::new(),
            currencies: Vec::new(),
            currency_ids: BTreeMap::new(),
            accounts: Accounts::with_capacity(users),
            account_ids: IdIndex::with_capacity(users),
            orders: Orders::with_capacity(orders),
            order_info: Vec::with_capacity(orders),
            expiries: BinaryHeap::with_capacity(orders),
            next_expiry_ts: i64::MAX,
            housekeeping_at: i64::MAX,
            order_extras: Vec::with_capacity(orders),
            stop_accepts: 0,
            stop_dirty: Vec::with_capacity(8),
            knock_on_pending: false,
            scratch_triggered: Vec::with_capacity(config.expected_stops_per_side),
            scratch_walks: Vec::with_capacity(8),
            order_ids: IdIndex::with_capacity(orders),
            hash,
            // Every level holds at least one resting order.
            levels: Levels::with_capacity(orders),
            txs: HashSet::with_capacity_and_hasher(config.max_tx_ids as usize, hash),
            last_seq: 0,
            now: 0,
            order_id_window: 0,
            recent_ids: VecDeque::with_capacity(config.max_window_ids as usize),
            recent_id_set: HashSet::with_capacity_and_hasher(config.max_window_ids as usize, hash),
            scratch_bids: Vec::new(),
            scratch_asks: Vec::new(),
            scratch_mass_cancel: Vec::new(),
            found_ahead: std::array::from_fn(|_| Cell::new(NIL)),
            fut: Futures::default(),
        }
    }

    /// Applies one command. Events go to `sink` as they happen; the return value is the
    /// command's result. A rejected command changes nothing and reports no event.
    ///
    /// `timestamp_ns` is the command's time: the venue clock becomes the larger of it and the
    /// clock (a timestamp below the clock counts as the clock, so time never goes back). A
    /// command that carries no time passes anything at or below the clock, e.g. `i64::MIN`.
    pub fn apply(
        &mut self,
        seq: u64,
        timestamp_ns: i64,
        cmd: &Command,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        // 0 is "no sequence": a snapshot's rebuild and the engine's own unit tests use it. A
        // query changes nothing and may be asked at the last command's sequence number.
        debug_assert!(
            seq == 0
                || seq > self.last_seq
                || (seq == self.last_seq
                    && matches!(
                        cmd,
                        Command::Book { .. } | Command::UserReport { .. } | Command::VenueReport
                    )),
            "sequence numbers only rise: {seq} after {}",
            self.last_seq
        );
        self.last_seq = seq;
        if timestamp_ns > self.now {
            self.now = timestamp_ns;
        }
        if self.housekeeping_at <= self.now {
            self.housekeeping(sink);
        }
        let result = self.apply_command(cmd, sink);
        if self.knock_on_pending {
            self.knock_on(sink);
        }
        #[cfg(debug_assertions)]
        self.debug_check_holds();
        result
    }

    /// Step 1 of a command (docs/rules.md, "One command"), when [`Self::housekeeping_at`] has
    /// come: ids that left the order-id window are forgotten and due orders expire.
    #[cold]
    #[inline(never)]
    fn housekeeping(&mut self, sink: &mut impl EventSink) {
        if !self.recent_ids.is_empty() {
            self.forget_old_ids();
        }
        if self.next_expiry_ts <= self.now {
            self.expire_due(sink);
        }
        self.refresh_housekeeping();
    }

    /// Works [`Self::housekeeping_at`] out from the expiry heap and the order-id window.
    pub(crate) fn refresh_housekeeping(&mut self) {
        let forget_at = self
            .recent_ids
            .front()
            .map_or(i64::MAX, |&(ended_at, _, _)| {
                ended_at.saturating_add(self.order_id_window)
            });
        self.housekeeping_at = forget_at.min(self.next_expiry_ts);
    }

    /// Knock-on work (docs/rules.md, "One command"): the stops the command's trades triggered,
    /// and the liquidation passes of currencies whose futures traded or marks moved, until
    /// neither finds anything.
    #[cold]
    #[inline(never)]
    fn knock_on(&mut self, sink: &mut impl EventSink) {
        if !self.stop_dirty.is_empty() {
            self.run_stop_cascades(sink);
        }
        if !self.fut.dirty.is_empty() || !self.fut.stale.is_empty() {
            self.knock_on_futures(sink);
        }
        self.knock_on_pending =
            !self.stop_dirty.is_empty() || !self.fut.dirty.is_empty() || !self.fut.stale.is_empty();
    }

    /// The rest of step 3 once futures are involved: passes and cascades in turn.
    #[cold]
    #[inline(never)]
    fn knock_on_futures(&mut self, sink: &mut impl EventSink) {
        // A user is liquidated at most once per command (per currency).
        self.fut.epoch += 1;
        while !self.fut.dirty.is_empty() {
            self.run_liquidation_passes(sink);
            if !self.stop_dirty.is_empty() {
                self.run_stop_cascades(sink);
            }
        }
        if !self.fut.stale.is_empty() {
            self.refresh_stale_keys();
        }
    }

    /// After a move, reduce or amend: a live futures order's margin sums follow its new price
    /// and quantity.
    #[inline(always)]
    fn sync_changed_order(&mut self, user: UserId, order: OrderId) {
        if !self.fut.futures_of.is_empty() {
            self.sync_changed_future_order(user, order);
        }
    }

    /// [`Self::sync_changed_order`] on a venue with futures listed.
    #[inline(never)]
    fn sync_changed_future_order(&mut self, user: UserId, order: OrderId) {
        if let Some(idx) = self.find_order(user, order)
            && is_future(&self.symbols[self.orders.get(idx).symbol as usize].terms)
        {
            self.sync_future_order(idx);
        }
    }

    /// The command itself: checked and applied, or rejected. Always inlined into `apply`: the
    /// futures arms made it big enough that the compiler stopped inlining it, which cost a
    /// plain spot order about a tenth of its speed (`single`, 15 pairs, Nov 27 2026).
    #[inline(always)]
    fn apply_command(&mut self, cmd: &Command, sink: &mut impl EventSink) -> Result<(), Reason> {
        match *cmd {
            Command::Place(ref place) => self.place(place, sink),
            Command::Move { user, order, price } => {
                match self.move_order(user, order, price, sink) {
                    // A futures order that moved without trading has its sums synced.
                    Ok(true) => Ok(()),
                    result => {
                        self.sync_changed_order(user, order);
                        result.map(|_| ())
                    }
                }
            }
            Command::Cancel { user, order } => self.cancel(user, order, sink),
            Command::Reduce { user, order, qty } => {
                let result = self.reduce(user, order, qty, sink);
                self.sync_changed_order(user, order);
                result
            }
            Command::Amend(ref amend) => {
                let result = self.amend(amend, sink);
                self.sync_changed_order(amend.user, amend.order);
                result
            }
            Command::MassCancel { user, symbol } => self.mass_cancel(user, symbol, sink),
            Command::AddSymbol(ref spec) => self.add_symbol(spec),
            Command::AddUser { user } => self.add_user(user),
            Command::AdjustBalance {
                user,
                currency,
                amount,
                tx,
            } => self.adjust_balance(user, currency, amount, tx),
            Command::Book { symbol, depth } => self.book(symbol, depth, sink),
            Command::UserReport { user } => {
                let report = self.user_report(user).ok_or(Reason::UnknownUser)?;
                sink.on_event(&Event::UserReport(&report));
                Ok(())
            }
            Command::VenueReport => {
                sink.on_event(&Event::VenueReport(&self.venue_totals()));
                Ok(())
            }
            Command::Tick => Ok(()),
            Command::SetOrderIdWindow { window } => self.set_order_id_window(window),
            Command::SetPhase { symbol, phase } => self.set_phase(symbol, phase, sink),
            Command::SetBand { symbol, band_bps } => self.set_band(symbol, band_bps),
            Command::SetRefPrice { symbol, price } => self.set_ref_price(symbol, price),
            Command::SuspendUser { user } => self.suspend_user(user, sink),
            Command::SetMarkPrice { symbol, price } => self.set_mark_price(symbol, price),
            Command::FundInsurance {
                currency,
                amount,
                tx,
            } => self.fund_insurance(currency, amount, tx),
            Command::ResumeUser { user } => {
                let account = self.account_of(user).ok_or(Reason::UnknownUser)?;
                self.accounts.get_mut(account).suspended = false;
                Ok(())
            }
        }
    }

    // ----- administration -------------------------------------------------------------------

    fn add_symbol(&mut self, spec: &SymbolSpec) -> Result<(), Reason> {
        if self.symbol_ids.contains_key(&spec.symbol) {
            return Err(Reason::DuplicateSymbol);
        }
        if spec.base_scale <= 0
            || spec.quote_scale <= 0
            || spec.maker_fee < 0
            || spec.taker_fee < spec.maker_fee
            || spec.base == spec.quote
            || spec.band_bps < 0
            || !(0..NS_PER_DAY).contains(&spec.day_end)
        {
            return Err(Reason::InvalidSymbol);
        }
        let future = match spec.kind {
            None => return Err(Reason::InvalidSymbol),
            Some(SymbolKind::Spot) => None,
            Some(SymbolKind::Future {
                initial_margin,
                maintenance_margin,
                mark_price,
            }) => {
                if !(0 < maintenance_margin && maintenance_margin <= initial_margin)
                    || mark_price <= 0
                {
                    return Err(Reason::InvalidSymbol);
                }
                Some(Box::new(FutureBook {
                    initial_margin,
                    maintenance_margin,
                    mark: mark_price,
                    open_interest: 0,
                    live_lots: 0,
                    longs: Default::default(),
                    shorts: Default::default(),
                }))
            }
        };
        // A future's base names its underlying and registers no currency.
        let registered: &[Name] = if future.is_some() {
            &[spec.quote]
        } else {
            &[spec.base, spec.quote]
        };
        let new_currencies = registered
            .iter()
            .filter(|name| !self.currency_ids.contains_key(name))
            .count();
        if self.symbols.len() >= self.config.max_symbols.min(u32::MAX - 1) as usize
            || self.currencies.len() + new_currencies > MAX_CURRENCIES
        {
            return Err(Reason::LimitExceeded);
        }
        let base = if future.is_some() {
            FUTURE_BASE
        } else {
            self.currency_id_or_register(spec.base)
        };
        let quote = self.currency_id_or_register(spec.quote);
        let id = SymbolId(self.symbols.len() as u32);
        let is_future = future.is_some();
        let mut state = SymbolState::new(*spec, base, quote, &self.config);
        state.future = future;
        self.symbols.push(state);
        self.symbol_ids.insert(spec.symbol, id);
        if is_future {
            self.list_future(id.0, quote);
        }
        Ok(())
    }

    pub(crate) fn currency_id_or_register(&mut self, name: Name) -> CurrencyId {
        if let Some(&id) = self.currency_ids.get(&name) {
            return id;
        }
        let id = CurrencyId(self.currencies.len() as u32);
        self.currencies.push(CurrencyState {
            name,
            deposits: 0,
            withdrawals: 0,
            fees: 0,
            insurance: 0,
        });
        self.currency_ids.insert(name, id);
        id
    }

    fn set_order_id_window(&mut self, window: i64) -> Result<(), Reason> {
        if window < 0 {
            return Err(Reason::InvalidQty);
        }
        self.order_id_window = window;
        // A smaller window forgets for good what it no longer covers.
        self.forget_old_ids();
        self.refresh_housekeeping();
        Ok(())
    }

    /// Forgets the ids of orders that ended a window or more ago (all of them under a window
    /// of 0).
    fn forget_old_ids(&mut self) {
        while let Some(&(ended_at, user, order)) = self.recent_ids.front() {
            // Both are venue times, so 0 <= ended_at <= now: the difference fits.
            if self.now - ended_at < self.order_id_window {
                break;
            }
            self.recent_ids.pop_front();
            self.recent_id_set.remove(&(user, order));
        }
    }

    /// Notes that `(user, order)` ended now, so that its id stays taken for the window.
    #[inline(always)]
    fn order_ended(&mut self, user: UserId, order: OrderId) {
        if self.order_id_window > 0 {
            self.remember_ended(user, order);
        }
    }

    /// [`Self::order_ended`] under an order-id window.
    #[inline(never)]
    fn remember_ended(&mut self, user: UserId, order: OrderId) {
        // Full only when the window was switched on with more live orders than it can
        // remember (`window_has_room` keeps it from filling otherwise): the oldest id is
        // forgotten early rather than the table grown.
        if self.recent_ids.len() >= self.config.max_window_ids as usize
            && let Some((_, user, order)) = self.recent_ids.pop_front()
        {
            self.recent_id_set.remove(&(user, order));
        }
        self.recent_ids.push_back((self.now, user, order));
        let fresh = self.recent_id_set.insert((user, order));
        debug_assert!(fresh, "an id taken within the window was used again");
        // The oldest id leaves the window no later than this one.
        self.housekeeping_at = self
            .housekeeping_at
            .min(self.now.saturating_add(self.order_id_window));
    }

    /// Whether a new order's id can be remembered when it ends: every live order will add one
    /// id to the window, and so will the new one.
    #[inline]
    fn window_has_room(&self) -> bool {
        self.order_id_window == 0
            || self.recent_ids.len() + self.orders.live() < self.config.max_window_ids as usize
    }

    /// Whether the venue can remember one more transfer id.
    pub(crate) fn tx_has_room(&self) -> Result<(), Reason> {
        if self.txs.len() >= self.config.max_tx_ids as usize {
            return Err(Reason::LimitExceeded);
        }
        Ok(())
    }

    /// Whether `user` is within the window of an order `order` that ended.
    #[inline]
    fn id_recently_used(&self, user: UserId, order: OrderId) -> bool {
        !self.recent_ids.is_empty() && self.recent_id_set.contains(&(user, order))
    }

    fn add_user(&mut self, user: UserId) -> Result<(), Reason> {
        if self.account_of(user).is_some() {
            return Err(Reason::DuplicateUser);
        }
        if self.accounts.len() >= (self.config.max_users as usize).min(IdIndex::MAX_ENTRIES) {
            return Err(Reason::LimitExceeded);
        }
        let account = self.accounts.push(user);
        self.account_ids.insert(self.hash.hash_one(user), account);
        Ok(())
    }

    fn adjust_balance(
        &mut self,
        user: UserId,
        currency: Name,
        amount: i64,
        tx: i64,
    ) -> Result<(), Reason> {
        let account = self.account_of(user).ok_or(Reason::UnknownUser)?;
        if amount == 0 {
            return Err(Reason::InvalidQty);
        }
        if self.txs.contains(&tx) {
            return Err(Reason::DuplicateTx);
        }
        let known = self.currency_ids.get(&currency).copied();
        let available = known.map_or(0, |c| self.accounts.balance(account, c).available);
        if amount < 0 && self.accounts.get(account).suspended {
            return Err(Reason::UserSuspended);
        }
        if amount < 0 {
            // i64::MIN has no positive counterpart, and no balance can cover it anyway.
            let withdrawal = amount.checked_neg().ok_or(Reason::InsufficientFunds)?;
            if withdrawal > available {
                return Err(Reason::InsufficientFunds);
            }
            let currency = known.expect("a positive available balance implies a known currency");
            let exposed = self.accounts.get(account).futures;
            if exposed {
                self.check_margin_after_spending(account, currency, withdrawal)?;
            }
            self.tx_has_room()?;
            self.accounts.balance_mut(account, currency).available -= withdrawal;
            self.currencies[currency.0 as usize].withdrawals += withdrawal;
            if exposed {
                self.note_stale_margin(account, currency);
            }
        } else {
            let deposits = known.map_or(0, |c| self.currencies[c.0 as usize].deposits);
            if deposits.checked_add(amount).is_none() || available.checked_add(amount).is_none() {
                return Err(Reason::Overflow);
            }
            if known.is_none() && self.currencies.len() >= MAX_CURRENCIES {
                return Err(Reason::LimitExceeded);
            }
            self.tx_has_room()?;
            let currency = self.currency_id_or_register(currency);
            self.accounts.balance_mut(account, currency).available += amount;
            self.currencies[currency.0 as usize].deposits += amount;
        }
        self.txs.insert(tx);
        Ok(())
    }

    // ----- trading --------------------------------------------------------------------------

    /// When a GTD or DAY order placed now expires.
    #[cold]
    #[inline(never)]
    fn expiry_of(&self, cmd: &PlaceOrder, tif: Tif) -> Result<i64, Reason> {
        match tif {
            Tif::Gtd => Ok(cmd.expire_ts().expect("checked at entry")),
            Tif::Day => {
                let day_end = self.symbols[cmd.symbol.0 as usize].spec.day_end;
                next_day_end(self.now, day_end).ok_or(Reason::Overflow)
            }
            Tif::Gtc | Tif::Ioc | Tif::Fok => Ok(0),
        }
    }

    fn place(&mut self, cmd: &PlaceOrder, sink: &mut impl EventSink) -> Result<(), Reason> {
        let account = self.account_of(cmd.user).ok_or(Reason::UnknownUser)?;
        if self.accounts.get(account).suspended {
            return Err(Reason::UserSuspended);
        }
        let symbol = cmd.symbol.0 as usize;
        let sym = self.symbols.get(symbol).ok_or(Reason::UnknownSymbol)?;
        if sym.controls.plain_spot()
            && cmd.order_type == Some(OrderType::Limit)
            && let Some(tif @ (Tif::Gtc | Tif::Ioc)) = cmd.tif
            && let (Some(side), Some(stp)) = (cmd.side, cmd.stp)
            && !cmd.post_only
            && cmd.extras.is_none()
        {
            return self.place_plain(cmd, account, symbol, side, tif, stp, sink);
        }
        let terms = sym.terms;
        if is_future(&terms) {
            // Its margin check reads the account's slot, and a resting rest what its node will
            // count: loading while the checks below run.
            self.fut.prefetch_order(self.orders.next_slot(), account);
        }
        let (Some(side), Some(order_type), Some(tif), Some(stp)) =
            (cmd.side, cmd.order_type, cmd.tif, cmd.stp)
        else {
            return Err(Reason::InvalidOrder);
        };
        let rests = order_type == OrderType::Limit && tif_rests(tif);
        let is_stop = matches!(order_type, OrderType::Stop | OrderType::StopLimit);
        if (order_type == OrderType::Market && !matches!(tif, Tif::Ioc | Tif::Fok))
            || (cmd.post_only && !rests)
        {
            return Err(Reason::InvalidOrder);
        }
        if is_stop || !cmd.extras.is_none() || !matches!(tif, Tif::Gtc | Tif::Ioc | Tif::Fok) {
            check_order_extras(cmd, order_type, tif, rests, self.now)?;
        }
        if cmd.qty <= 0 {
            return Err(Reason::InvalidQty);
        }
        if cmd.display_qty().is_some_and(|display| {
            display <= 0 || display >= cmd.qty || too_many_slices(cmd.qty, display)
        }) {
            return Err(Reason::InvalidQty);
        }
        let limit = match (order_type, cmd.price) {
            (OrderType::Limit | OrderType::StopLimit, None) => return Err(Reason::InvalidPrice),
            (_, Some(price)) if price <= 0 => return Err(Reason::InvalidPrice),
            (_, price) => price,
        };
        if is_stop && !stop_prices_valid(cmd, side) {
            return Err(Reason::InvalidPrice);
        }
        let future = is_future(&terms);
        if future {
            // Every futures order has a price: a market or stop order its protection price.
            if limit.is_none() {
                return Err(Reason::InvalidPrice);
            }
        } else if side == Side::Sell
            && limit.is_some_and(|price| sell_price_below_fee(price, &terms))
        {
            return Err(Reason::InvalidPrice);
        }
        if self.find_order(cmd.user, cmd.order).is_some()
            || self.id_recently_used(cmd.user, cmd.order)
        {
            return Err(Reason::DuplicateOrderId);
        }
        let phase = sym.controls.phase();
        if !sym.controls.unrestricted() {
            phase_admits_order(phase, order_type, tif)?;
            // The band applies to a limit price: a limit or a stop-limit order's (a stop's
            // protection price is not checked).
            if matches!(order_type, OrderType::Limit | OrderType::StopLimit)
                && let Some(price) = limit
            {
                self.check_band(symbol, side, price)?;
            }
        }
        if let Some(stop_price) = cmd.stop_price()
            && self.would_trigger(symbol, side, stop_price)
        {
            return Err(Reason::WouldTrigger);
        }
        // Nothing takes during an auction's call, so post-only has nothing to refuse then.
        if cmd.post_only && phase != Phase::Auction && self.crosses_best(symbol, side, limit) {
            return Err(Reason::WouldTake);
        }
        let expire_ts = match tif {
            Tif::Gtc | Tif::Ioc | Tif::Fok => 0,
            Tif::Gtd | Tif::Day => self.expiry_of(cmd, tif)?,
        };
        let (hold, held_currency) = if future {
            // A futures order holds nothing: margin covers it.
            let price = limit.expect("checked above");
            self.check_future_order(account, symbol, side, price, cmd.qty, NIL)?;
            (0, terms.quote)
        } else {
            let hold = match (side, limit) {
                (Side::Buy, Some(price)) => {
                    buy_hold(cmd.qty, price, &terms).ok_or(Reason::Overflow)?
                }
                (Side::Buy, None) => 0, // an unpriced market buy pays as it goes, within its funds
                (Side::Sell, _) => cmd
                    .qty
                    .checked_mul(terms.base_scale)
                    .ok_or(Reason::Overflow)?,
            };
            let held_currency = if side == Side::Buy {
                terms.quote
            } else {
                terms.base
            };
            let a = self.accounts.get(account);
            let exposed = a.futures;
            if hold > self.accounts.balance(account, held_currency).available {
                return Err(Reason::InsufficientFunds);
            }
            if exposed {
                self.check_margin_after_spending(account, held_currency, hold)?;
            }
            (hold, held_currency)
        };
        if ((rests || is_stop) && !self.has_room_for_order(account)) || !self.window_has_room() {
            return Err(Reason::LimitExceeded);
        }
        if future {
            self.accounts.get_mut(account).futures = true;
        } else if self.accounts.get(account).futures {
            // Its spot spending may lower `available` in a futures currency.
            self.note_stale_margin(account, terms.quote);
            self.note_stale_margin(account, terms.base);
        }
        if is_stop {
            let balance = self.accounts.balance_mut(account, held_currency);
            balance.available -= hold;
            balance.held += hold;
            let stop = stops::NewStop {
                account,
                user: cmd.user,
                order: cmd.order,
                side,
                price: limit,
                qty: cmd.qty,
                stp,
                stop_price: cmd.stop_price().expect("checked above"),
                stop_limit: order_type == OrderType::StopLimit,
                tif,
                expire_ts,
            };
            self.accept_stop(symbol, stop);
            return Ok(());
        }

        let leftover = match (order_type, tif) {
            (OrderType::Limit, Tif::Gtc | Tif::Gtd | Tif::Day) => None,
            (OrderType::Limit, _) => Some(CancelReason::Ioc),
            (OrderType::Market, _) => Some(CancelReason::Market),
            (OrderType::Stop | OrderType::StopLimit, _) => unreachable!("pending above"),
        };
        let taker = Taker {
            account,
            user: cmd.user,
            order: cmd.order,
            side,
            limit,
            qty: cmd.qty,
            stp,
            post_only: cmd.post_only,
            leftover,
            terms: OrderTerms { expire_ts, tif },
            display: cmd.display_qty().unwrap_or(0),
            liquidation: false,
        };
        if tif == Tif::Fok && !self.fok_fillable(symbol, &taker) {
            sink.on_event(&Event::Cancelled(Cancelled {
                symbol: cmd.symbol,
                user: cmd.user,
                order: cmd.order,
                side,
                qty: cmd.qty,
                reason: CancelReason::Fok,
            }));
            self.order_ended(cmd.user, cmd.order);
            return Ok(());
        }
        self.execute(symbol, &taker, None, sink);
        Ok(())
    }

    /// [`Self::place`] of the common order: a limit GTC or IOC order, not post-only and with no
    /// extras, on a spot symbol in `continuous` with no band. The same checks in the same order
    /// as `place`, less those that cannot apply to it (stops, icebergs, expiries, phases, the
    /// band, margin of its own).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn place_plain(
        &mut self,
        cmd: &PlaceOrder,
        account: u32,
        symbol: usize,
        side: Side,
        tif: Tif,
        stp: Stp,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        if cmd.qty <= 0 {
            return Err(Reason::InvalidQty);
        }
        let price = match cmd.price {
            Some(price) if price > 0 => price,
            _ => return Err(Reason::InvalidPrice),
        };
        let terms = self.symbols[symbol].terms;
        if side == Side::Sell && sell_price_below_fee(price, &terms) {
            return Err(Reason::InvalidPrice);
        }
        if self.find_order(cmd.user, cmd.order).is_some()
            || self.id_recently_used(cmd.user, cmd.order)
        {
            return Err(Reason::DuplicateOrderId);
        }
        let (hold, held_currency) = match side {
            Side::Buy => (
                buy_hold(cmd.qty, price, &terms).ok_or(Reason::Overflow)?,
                terms.quote,
            ),
            Side::Sell => (
                cmd.qty
                    .checked_mul(terms.base_scale)
                    .ok_or(Reason::Overflow)?,
                terms.base,
            ),
        };
        let exposed = self.accounts.get(account).futures;
        if hold > self.accounts.balance(account, held_currency).available {
            return Err(Reason::InsufficientFunds);
        }
        if exposed {
            self.check_margin_after_spending(account, held_currency, hold)?;
        }
        let rests = tif == Tif::Gtc;
        if (rests && !self.has_room_for_order(account)) || !self.window_has_room() {
            return Err(Reason::LimitExceeded);
        }
        if exposed {
            // Its spot spending may lower `available` in a futures currency.
            self.note_stale_margin(account, terms.quote);
            self.note_stale_margin(account, terms.base);
        }
        let taker = Taker {
            account,
            user: cmd.user,
            order: cmd.order,
            side,
            limit: Some(price),
            qty: cmd.qty,
            stp,
            post_only: false,
            leftover: if rests { None } else { Some(CancelReason::Ioc) },
            terms: OrderTerms { expire_ts: 0, tif },
            display: 0,
            liquidation: false,
        };
        self.execute_with::<true>(symbol, &taker, None, sink);
        Ok(())
    }

    fn has_room_for_order(&self, account: u32) -> bool {
        self.accounts.get(account).open_orders < self.config.max_open_orders_per_user
            && self.orders.live()
                < (self.config.max_resting_orders as usize).min(IdIndex::MAX_ENTRIES)
    }

    /// Whether an order on `side` at `limit` would trade with the best opposite level now.
    #[inline]
    fn crosses_best(&self, symbol: usize, side: Side, limit: Option<i64>) -> bool {
        self.symbols[symbol]
            .best_price(side.opposite())
            .is_some_and(|best| crosses(side, limit, best))
    }

    /// Walks the opposite side as the taker would, counting the liquidity it would really get.
    fn fok_fillable(&self, symbol: usize, taker: &Taker) -> bool {
        let sym = &self.symbols[symbol];
        let terms = &sym.terms;
        let budget = self.market_buy_budget(sym, taker);
        let band_edge = sym.controls.edge(taker.side);
        let mut needed = taker.qty;
        let mut spent: i64 = 0;
        // Takes up to `available` lots at `price`; true when that filled the order.
        let mut take = |available: i64, price: i64| -> Option<bool> {
            let mut qty = needed.min(available);
            if let Some(budget) = budget {
                let cost = Self::market_buy_lot_cost(terms, price)?;
                qty = qty.min((budget - spent) / cost);
                if qty == 0 {
                    return None;
                }
                spent += qty * cost;
            }
            needed -= qty;
            Some(needed == 0)
        };
        for level_idx in sym
            .side(taker.side.opposite())
            .levels_best_first(&self.levels)
        {
            let price = level_price(&self.levels, &self.orders, level_idx);
            // Only liquidity inside the band counts.
            if !self.level_tradable(terms, taker, price)
                || beyond_edge(taker.side, band_edge, price)
            {
                return false;
            }
            // Icebergs' hidden quantity re-queues behind the level's last order (docs/rules.md,
            // "Iceberg orders"): the walk reaches it only after the whole queue, so it counts
            // only if no own order stopped the walk first.
            let mut hidden: i64 = 0;
            let mut idx = self.levels.get(level_idx).head;
            while idx != NIL {
                let maker = self.orders.get(idx);
                let maker_idx = idx;
                idx = maker.next;
                if maker.account == taker.account {
                    if taker.stp == Stp::CancelMaker {
                        continue;
                    }
                    return false;
                }
                if maker.kind == NodeKind::Iceberg {
                    hidden += self.order_extras[maker_idx as usize].hidden;
                }
                match take(maker.remaining, price) {
                    None => return false,
                    Some(true) => return true,
                    Some(false) => {}
                }
            }
            if hidden > 0 {
                match take(hidden, price) {
                    None => return false,
                    Some(true) => return true,
                    Some(false) => {}
                }
            }
        }
        false
    }

    /// For an unpriced market buy, what it may spend: its available quote balance.
    /// A future's liquidation close (the only unpriced futures order) has no budget; a user
    /// with futures exposure spends at most what its margin leaves (docs/rules.md, "Futures").
    #[inline(always)]
    fn market_buy_budget(&self, sym: &SymbolState, taker: &Taker) -> Option<i64> {
        if taker.side == Side::Buy && taker.limit.is_none() && !is_future(&sym.terms) {
            Some(self.market_buy_funds(sym, taker))
        } else {
            None
        }
    }

    /// What an unpriced market buy may spend: [`Self::market_buy_budget`] when there is one.
    #[inline(never)]
    fn market_buy_funds(&self, sym: &SymbolState, taker: &Taker) -> i64 {
        if self.accounts.get(taker.account).futures {
            return self.spendable_under_margin(taker.account, sym.terms.quote);
        }
        self.accounts
            .balance(taker.account, sym.terms.quote)
            .available
    }

    /// Price plus taker fee of one lot; `None` when it does not fit (no one can pay it).
    fn market_buy_lot_cost(terms: &Terms, price: i64) -> Option<i64> {
        price
            .checked_mul(terms.quote_scale)?
            .checked_add(terms.taker_fee)
    }

    /// Whether the taker may trade at a level of this price (its limit, and an unpriced market
    /// sell's refusal of negative proceeds).
    #[inline]
    fn level_tradable(&self, terms: &Terms, taker: &Taker, price: i64) -> bool {
        crosses(taker.side, taker.limit, price)
            && !(taker.side == Side::Sell
                && taker.limit.is_none()
                && sell_price_below_fee(price, terms)
                && !is_future(terms))
    }

    /// Matches a taker against the book, then rests or cancels its rest and settles its balances.
    /// `node` is the order's existing node for a move (already out of its level, hold released).
    #[inline(always)]
    fn execute(
        &mut self,
        symbol: usize,
        taker: &Taker,
        node: Option<u32>,
        sink: &mut impl EventSink,
    ) {
        // One byte decides the common case: a taker that is not an iceberg on a spot symbol in
        // `continuous` with no band, whose path has no band, phase, slice or margin branches.
        if self.symbols[symbol].controls.plain_spot() && taker.display == 0 {
            self.execute_with::<true>(symbol, taker, node, sink);
        } else {
            self.execute_with::<false>(symbol, taker, node, sink);
        }
    }

    /// [`Self::execute`]; `PLAIN`: the symbol is spot, in `continuous` with no band, and the
    /// taker is no iceberg (so neither a band, a phase, slices nor margin can apply).
    #[inline(never)]
    fn execute_with<const PLAIN: bool>(
        &mut self,
        symbol: usize,
        taker: &Taker,
        node: Option<u32>,
        sink: &mut impl EventSink,
    ) {
        debug_assert!(!PLAIN || (self.symbols[symbol].controls.plain_spot() && taker.display == 0));
        // The band is fixed when the order enters: its own trades do not move it. (Without a
        // band the edges are open: `PLAIN` knows them without reading the controls.)
        let band_edge = if PLAIN {
            match taker.side {
                Side::Buy => i64::MAX,
                Side::Sell => i64::MIN,
            }
        } else {
            self.symbols[symbol].controls.edge(taker.side)
        };
        // Nothing trades outside `continuous` (in an auction orders rest, the book may cross).
        let fills = if PLAIN || self.symbols[symbol].controls.phase() == Phase::Continuous {
            self.match_taker::<PLAIN>(symbol, taker, band_edge, sink)
        } else {
            Fills::default()
        };
        if fills.filled > 0 {
            self.symbols[symbol].set_reference(fills.last_price);
            self.note_walk(symbol, fills.first_price, fills.last_price);
        }
        let sym = &self.symbols[symbol];
        let terms = sym.terms;
        let (base, quote) = (terms.base, terms.quote);
        let unfilled = taker.qty - fills.filled;
        // An order whose own limit lies beyond the band's edge never rests there.
        let limit_beyond_band = !PLAIN
            && taker.leftover.is_none()
            && taker
                .limit
                .is_some_and(|price| beyond_edge(taker.side, band_edge, price));
        let rest_qty = if unfilled > 0
            && taker.leftover.is_none()
            && !fills.stopped_by_stp
            && !fills.stopped_by_overflow
            && !limit_beyond_band
        {
            unfilled
        } else {
            0
        };
        if unfilled > rest_qty {
            let reason = if fills.stopped_by_stp {
                CancelReason::Stp
            } else if fills.stopped_by_overflow {
                CancelReason::Overflow
            } else if fills.stopped_by_band || limit_beyond_band {
                CancelReason::Band
            } else {
                taker
                    .leftover
                    .expect("only a non-resting order leaves an unrested part")
            };
            sink.on_event(&Event::Cancelled(Cancelled {
                symbol: SymbolId(symbol as u32),
                user: taker.user,
                order: taker.order,
                side: taker.side,
                qty: unfilled - rest_qty,
                reason,
            }));
        }

        // Settle the taker in one step: what it paid or received, and a hold for what rests.
        // (A future's taker was settled fill by fill and holds nothing.)
        let (accounts, account) = (&mut self.accounts, taker.account);
        match taker.side {
            _ if !PLAIN && is_future(&terms) => {}
            Side::Buy => {
                let rest_hold = match taker.limit {
                    Some(price) if rest_qty > 0 => {
                        buy_hold(rest_qty, price, &terms).expect("checked at entry")
                    }
                    _ => 0,
                };
                let q = accounts.balance_mut(account, quote);
                q.available -= fills.quote + rest_hold;
                q.held += rest_hold;
                accounts.balance_mut(account, base).available += fills.filled * terms.base_scale;
            }
            Side::Sell => {
                let b = accounts.balance_mut(account, base);
                b.available -= (fills.filled + rest_qty) * terms.base_scale;
                b.held += rest_qty * terms.base_scale;
                accounts.balance_mut(account, quote).available += fills.quote;
            }
        }

        match (node, rest_qty > 0) {
            (Some(idx), true) => {
                let shown = if PLAIN {
                    rest_qty
                } else {
                    self.set_slices(idx, taker.display, rest_qty)
                };
                let n = self.orders.get_mut(idx);
                n.remaining = shown;
                n.price = taker.limit.expect("a resting order has a price");
                self.symbols[symbol].push_back(taker.side, &mut self.levels, &mut self.orders, idx);
                if !PLAIN && is_future(&terms) {
                    self.sync_future_order(idx);
                }
            }
            (Some(idx), false) => self.forget_order_on::<PLAIN>(idx),
            (None, true) => self.rest_new_on::<PLAIN>(symbol, taker, rest_qty, taker.qty),
            (None, false) if !PLAIN && taker.liquidation => {}
            (None, false) => self.order_ended(taker.user, taker.order),
        }
    }

    /// The matching loop: trades while the taker crosses the best opposite level.
    #[inline(always)]
    fn match_taker<const PLAIN: bool>(
        &mut self,
        symbol: usize,
        taker: &Taker,
        band_edge: i64,
        sink: &mut impl EventSink,
    ) -> Fills {
        let terms = self.symbols[symbol].terms;
        let budget = self.market_buy_budget(&self.symbols[symbol], taker);
        let opposite = taker.side.opposite();
        let mut fills = Fills::default();
        while fills.filled < taker.qty {
            let Some(level_idx) = self.symbols[symbol].best_level(opposite) else {
                break;
            };
            // A level's price is its orders': the oldest, which trades first.
            let maker_idx = self.levels.get(level_idx).head;
            let maker = *self.orders.get(maker_idx);
            if !self.level_tradable(&terms, taker, maker.price) {
                break;
            }
            if !PLAIN && beyond_edge(taker.side, band_edge, maker.price) {
                fills.stopped_by_band = true;
                break;
            }
            if maker.account == taker.account {
                match taker.stp {
                    Stp::CancelTaker => {
                        fills.stopped_by_stp = true;
                        break;
                    }
                    Stp::CancelMaker => {
                        self.remove_live_order(maker_idx, CancelReason::Stp, sink);
                        continue;
                    }
                    Stp::CancelBoth => {
                        self.remove_live_order(maker_idx, CancelReason::Stp, sink);
                        fills.stopped_by_stp = true;
                        break;
                    }
                }
            }
            let mut qty = (taker.qty - fills.filled).min(maker.remaining);
            if let Some(budget) = budget {
                let Some(cost) = Self::market_buy_lot_cost(&terms, maker.price) else {
                    break;
                };
                qty = qty.min((budget - fills.quote) / cost);
                if qty == 0 {
                    break;
                }
            }
            if !PLAIN
                && is_future(&terms)
                && let Err(side) = self.check_future_fill(&terms, symbol, &maker, qty, taker)
            {
                // A fill whose settlement would leave i64 (docs/rules.md, "Futures",
                // "Overflow"): the side it would overflow gives way.
                if side == taker.side {
                    fills.stopped_by_overflow = true;
                    break;
                }
                self.remove_live_order(maker_idx, CancelReason::Overflow, sink);
                continue;
            }
            self.fill_maker::<PLAIN>(symbol, maker_idx, qty, taker, sink);
            if fills.filled == 0 {
                fills.first_price = maker.price;
            }
            fills.filled += qty;
            fills.last_price = maker.price;
            // Bounded by the taker's hold on a spot symbol; a future's taker (whose fills are
            // settled one by one) does not use it, and a liquidation close is not bounded by a
            // hold: wrapping, never a panic.
            let notional = maker
                .price
                .wrapping_mul(qty)
                .wrapping_mul(terms.quote_scale);
            let fee = qty.wrapping_mul(terms.taker_fee);
            match taker.side {
                Side::Buy => fills.quote = fills.quote.wrapping_add(notional.wrapping_add(fee)),
                Side::Sell => fills.quote = fills.quote.wrapping_add(notional.wrapping_sub(fee)),
            }
        }
        fills
    }

    /// [`Self::future_fill_fits`] for a fill of `qty` lots of `maker` with the taker.
    #[cold]
    #[inline(never)]
    fn check_future_fill(
        &self,
        terms: &Terms,
        symbol: usize,
        maker: &OrderNode,
        qty: i64,
        taker: &Taker,
    ) -> Result<(), Side> {
        let (buyer, seller, buyer_fee, seller_fee) = match maker.side {
            Side::Buy => (
                maker.account,
                taker.account,
                terms.maker_fee,
                terms.taker_fee,
            ),
            Side::Sell => (
                taker.account,
                maker.account,
                terms.taker_fee,
                terms.maker_fee,
            ),
        };
        self.future_fill_fits(
            symbol,
            buyer,
            seller,
            maker.price,
            qty,
            buyer_fee,
            seller_fee,
        )
    }

    /// Trades `qty` of resting order `maker_idx` with the taker: settles the maker, collects both
    /// fees, reports the trade. The taker is settled by [`Self::execute`].
    #[inline(always)]
    fn fill_maker<const PLAIN: bool>(
        &mut self,
        symbol: usize,
        maker_idx: u32,
        qty: i64,
        taker: &Taker,
        sink: &mut impl EventSink,
    ) {
        let sym = &self.symbols[symbol];
        let terms = sym.terms;
        let (base, quote) = (terms.base, terms.quote);
        let maker = *self.orders.get(maker_idx);
        let price = maker.price;
        let maker_fee = qty * terms.maker_fee;
        let taker_fee = qty * terms.taker_fee;
        if !PLAIN && is_future(&terms) {
            let (buyer, seller, buyer_fee, seller_fee) = match maker.side {
                Side::Buy => (maker.account, taker.account, maker_fee, taker_fee),
                Side::Sell => (taker.account, maker.account, taker_fee, maker_fee),
            };
            self.settle_future_fill(symbol, buyer, seller, price, qty, buyer_fee, seller_fee);
        }
        // Every product here is bounded by a hold that was computed with checked arithmetic on
        // a spot symbol; a future does not use it (a liquidation close is bounded by no hold).
        let notional = price.wrapping_mul(qty).wrapping_mul(terms.quote_scale);
        debug_assert!(
            is_future(&terms)
                || (price as i128 * qty as i128 * terms.quote_scale as i128) == notional as i128,
            "a spot fill's notional is bounded by a hold, so it fits in i64"
        );
        let (accounts, account) = (&mut self.accounts, maker.account);
        match maker.side {
            _ if !PLAIN && is_future(&terms) => {}
            Side::Buy => {
                let q = accounts.balance_mut(account, quote);
                q.held -= notional + taker_fee;
                q.available += taker_fee - maker_fee;
                accounts.balance_mut(account, base).available += qty * terms.base_scale;
            }
            Side::Sell => {
                accounts.balance_mut(account, base).held -= qty * terms.base_scale;
                accounts.balance_mut(account, quote).available += notional - maker_fee;
            }
        }
        self.currencies[quote.0 as usize].fees += maker_fee + taker_fee;
        sink.on_event(&Event::Trade(Trade {
            symbol: SymbolId(symbol as u32),
            price,
            qty,
            maker_user: maker.user,
            maker_order: maker.order,
            taker_user: taker.user,
            taker_order: taker.order,
            taker_side: taker.side,
            maker_fee,
            taker_fee,
        }));
        self.take_from_front_on::<PLAIN>(symbol, maker_idx, qty);
    }

    /// What the order at the front of its level offers a trade now: its remaining quantity,
    /// an iceberg's shown slice.
    #[inline]
    pub(crate) fn front_qty(&self, idx: u32) -> i64 {
        self.orders.get(idx).remaining
    }

    /// The whole quantity of a level, icebergs' hidden parts included: what an uncross can
    /// execute there (the level's total counts shown quantities only).
    pub(crate) fn level_quantity(&self, symbol: usize, level: u32) -> i64 {
        let shown = self.levels.get(level).total;
        let no_icebergs = self.symbols[symbol].icebergs == 0;
        // Debug builds walk the level anyway, to check the count.
        if no_icebergs && !cfg!(debug_assertions) {
            return shown;
        }
        let (mut hidden, mut icebergs) = (0, 0);
        let mut idx = self.levels.get(level).head;
        while idx != NIL {
            let node = self.orders.get(idx);
            if node.kind == NodeKind::Iceberg {
                hidden += self.order_extras[idx as usize].hidden;
                icebergs += 1;
            }
            idx = node.next;
        }
        debug_assert!(!no_icebergs || icebergs == 0, "an iceberg the count missed");
        shown + hidden
    }

    /// Takes `qty` (at most [`Self::front_qty`]) from the order `idx` at the front of its
    /// level, after a trade: an iceberg whose slice is used up shows a new one at the back of
    /// the level; an order with nothing left leaves the book. The one place where a fill
    /// changes the book, for a taker's walk and an uncross alike.
    #[inline(always)]
    pub(crate) fn take_from_front(&mut self, symbol: usize, idx: u32, qty: i64) {
        self.take_from_front_on::<false>(symbol, idx, qty);
    }

    /// [`Self::take_from_front`]; `SPOT`: the symbol is known to be spot.
    #[inline(always)]
    fn take_from_front_on<const SPOT: bool>(&mut self, symbol: usize, idx: u32, qty: i64) {
        let node = *self.orders.get(idx);
        debug_assert!(qty <= node.remaining);
        if qty == node.remaining {
            if node.kind == NodeKind::Iceberg && self.order_extras[idx as usize].hidden > 0 {
                self.next_slice(symbol, idx);
            } else {
                self.symbols[symbol].unlink(node.side, &mut self.levels, &mut self.orders, idx);
                self.forget_order_on::<SPOT>(idx);
                return;
            }
        } else {
            self.orders.get_mut(idx).remaining -= qty;
            self.levels.get_mut(node.level).total -= qty;
        }
        if !SPOT && is_future(&self.symbols[symbol].terms) {
            self.sync_future_order(idx);
        }
    }

    /// Puts the rest of a new order on the book, holding nothing itself (the caller has).
    /// `total` is its quantity with what it has filled.
    #[inline]
    fn rest_new(&mut self, symbol: usize, taker: &Taker, qty: i64, total: i64) {
        self.rest_new_on::<false>(symbol, taker, qty, total);
    }

    /// [`Self::rest_new`]; `PLAIN` as for [`Self::execute_with`].
    fn rest_new_on<const PLAIN: bool>(
        &mut self,
        symbol: usize,
        taker: &Taker,
        qty: i64,
        total: i64,
    ) {
        let price = taker.limit.expect("a resting order has a price");
        let idx = self.new_node(symbol, taker, total, price, qty);
        if !PLAIN && taker.display > 0 {
            let shown = self.set_slices(idx, taker.display, qty);
            self.orders.get_mut(idx).remaining = shown;
        }
        self.symbols[symbol].push_back(taker.side, &mut self.levels, &mut self.orders, idx);
        if !PLAIN && is_future(&self.symbols[symbol].terms) {
            self.sync_future_order(idx);
        }
    }

    /// A node for a new live order of the taker's at `price` with `remaining` (not in any level
    /// yet), linked to its account and the id index.
    #[inline(always)]
    fn new_node(
        &mut self,
        symbol: usize,
        taker: &Taker,
        total: i64,
        price: i64,
        remaining: i64,
    ) -> u32 {
        let account = self.accounts.get_mut(taker.account);
        let idx = self.orders.alloc(OrderNode {
            user: taker.user,
            order: taker.order,
            price,
            remaining,
            account: taker.account,
            symbol: symbol as u32,
            level: NIL,
            prev: NIL,
            next: NIL,
            account_prev: NIL,
            account_next: account.orders_head,
            side: taker.side,
            stp: taker.stp,
            post_only: taker.post_only,
            kind: NodeKind::Plain,
        });
        if account.orders_head != NIL {
            self.orders.get_mut(account.orders_head).account_prev = idx;
        }
        account.orders_head = idx;
        account.open_orders += 1;
        self.set_order_info(
            idx,
            OrderInfo {
                total,
                terms: taker.terms,
            },
        );
        if taker.terms.expire_ts != 0 {
            self.schedule_expiry(taker.terms.expire_ts, taker.user, taker.order, idx);
        }
        self.order_ids
            .insert(self.hash.hash_one((taker.user, taker.order)), idx);
        idx
    }

    /// Records what the order in node `idx` keeps beside its node (the arena hands out a new
    /// index only at its end, so the side table grows with it).
    #[inline]
    fn set_order_info(&mut self, idx: u32, info: OrderInfo) {
        let i = idx as usize;
        if i < self.order_info.len() {
            self.order_info[i] = info;
        } else {
            debug_assert_eq!(
                i,
                self.order_info.len(),
                "order nodes are handed out in order"
            );
            self.order_info.push(info);
        }
    }

    /// Adds an order to the expiry heap, first dropping the entries of orders that ended early
    /// when the heap is full (so that it grows only with the live expiring orders). An order id
    /// placed again into the same node with the same expiry (a DAY order cancelled and placed
    /// again) leaves an entry equal to the live one's: those are dropped too.
    fn schedule_expiry(&mut self, expire_ts: i64, user: UserId, order: OrderId, idx: u32) {
        if self.expiries.len() == self.expiries.capacity() {
            let mut entries = std::mem::take(&mut self.expiries).into_vec();
            entries.sort_unstable();
            entries.dedup();
            entries.retain(|&Reverse((ts, user, order, idx))| {
                self.expiry_is_live(ts, user, order, idx)
            });
            self.expiries = BinaryHeap::from(entries);
        }
        self.expiries.push(Reverse((expire_ts, user, order, idx)));
        self.next_expiry_ts = self.next_expiry().unwrap_or(i64::MAX);
        self.housekeeping_at = self.housekeeping_at.min(self.next_expiry_ts);
    }

    /// Whether an expiry heap entry still stands for a live order.
    fn expiry_is_live(&self, expire_ts: i64, user: UserId, order: OrderId, idx: u32) -> bool {
        self.find_order(user, order) == Some(idx)
            && self.order_info[idx as usize].terms.expire_ts == expire_ts
    }

    /// Step 1 of every command: cancels each live order whose expiry has come, by expiry time,
    /// then user id, then order id (docs/rules.md, "GTD and DAY").
    fn expire_due(&mut self, sink: &mut impl EventSink) {
        while let Some(&Reverse((expire_ts, user, order, idx))) = self.expiries.peek() {
            if expire_ts > self.now {
                break;
            }
            self.expiries.pop();
            if self.expiry_is_live(expire_ts, user, order, idx) {
                self.remove_live_order(idx, CancelReason::Expired, sink);
            }
        }
        self.next_expiry_ts = self.next_expiry().unwrap_or(i64::MAX);
    }

    /// Entering `closed` ends a symbol's trading day: its DAY orders (resting or pending
    /// stops) expire now, in expiry order (docs/rules.md, "GTD and DAY"). Every DAY order is in
    /// the expiry heap, so this costs the expiring orders, not the book.
    pub(crate) fn expire_day_orders(&mut self, symbol: usize, sink: &mut impl EventSink) {
        let mut due: Vec<(i64, UserId, OrderId, u32)> = self
            .expiries
            .iter()
            .map(|Reverse(entry)| *entry)
            .filter(|&(ts, user, order, idx)| {
                self.expiry_is_live(ts, user, order, idx)
                    && self.orders.get(idx).symbol as usize == symbol
                    && self.order_info[idx as usize].terms.tif == Tif::Day
            })
            .collect();
        due.sort_unstable();
        // The same live order may have two equal entries (see `schedule_expiry`): it ends once.
        due.dedup();
        for (_, _, _, idx) in due {
            self.remove_live_order(idx, CancelReason::Expired, sink);
        }
    }

    /// What the live order in node `idx` has filled since it was accepted.
    #[inline]
    pub(crate) fn order_filled(&self, idx: u32) -> i64 {
        self.order_info[idx as usize].total - self.live_remaining(idx)
    }

    /// The whole remaining quantity of the live order in node `idx`: an iceberg's hidden part
    /// included.
    #[inline]
    pub(crate) fn live_remaining(&self, idx: u32) -> i64 {
        let node = self.orders.get(idx);
        match node.kind {
            NodeKind::Iceberg => node.remaining + self.order_extras[idx as usize].hidden,
            NodeKind::Plain | NodeKind::PendingStop => node.remaining,
        }
    }

    /// Every user's `held` is exactly what its live orders need (docs/rules.md): the hold of
    /// each resting order, an iceberg's hidden part included, and of each pending stop (a stop
    /// market sell holds its lots). Costs a walk of every user and live order: the simulator
    /// checks it after every step, debug builds after every command of a small venue.
    pub fn check_holds(&self) -> Result<(), String> {
        let mut needs: Vec<(CurrencyId, i64)> = Vec::new();
        for account in 0..self.accounts.len() as u32 {
            needs.clear();
            let user = self.accounts.user(account);
            let mut idx = self.accounts.get(account).orders_head;
            while idx != NIL {
                let node = self.orders.get(idx);
                let (symbol, remaining) = (node.symbol as usize, self.live_remaining(idx));
                let hold = if node.price == 0 {
                    let terms = &self.symbols[symbol].terms;
                    remaining
                        .checked_mul(terms.base_scale)
                        .map(|h| (terms.base, h))
                } else {
                    self.resting_order_hold(symbol, node.side, node.price, remaining)
                };
                let Some((currency, hold)) = hold else {
                    return Err(format!(
                        "user {user} order {}: its hold overflows",
                        node.order
                    ));
                };
                match needs.iter_mut().find(|(c, _)| *c == currency) {
                    Some((_, need)) => {
                        *need = need.checked_add(hold).ok_or("a user's needs overflow")?;
                    }
                    None => needs.push((currency, hold)),
                }
                idx = node.account_next;
            }
            for (currency, amounts) in self.accounts.balances(account) {
                let need = needs
                    .iter()
                    .find(|(c, _)| *c == currency)
                    .map_or(0, |n| n.1);
                if amounts.held != need {
                    return Err(format!(
                        "user {user}: {} held in currency {}, orders need {need}",
                        amounts.held, currency.0
                    ));
                }
            }
            for &(currency, need) in &needs {
                let held = self.accounts.balance(account, currency).held;
                if held != need {
                    return Err(format!(
                        "user {user}: {held} held in currency {}, orders need {need}",
                        currency.0
                    ));
                }
            }
        }
        Ok(())
    }

    /// Debug builds: [`Self::check_holds`] after every command while the venue is small enough
    /// for the walk to be cheap (the engine's tests, the server's tests, the simulator).
    #[cfg(debug_assertions)]
    fn debug_check_holds(&self) {
        const SMALL_VENUE_ORDERS: usize = 64;
        const SMALL_VENUE_USERS: usize = 256;
        const SMALL_VENUE_CURRENCIES: usize = 16;
        if self.orders.live() <= SMALL_VENUE_ORDERS
            && self.accounts.len() <= SMALL_VENUE_USERS
            && self.currencies.len() <= SMALL_VENUE_CURRENCIES
            && !crate::snapshot::decoding()
            && let Err(e) = self.check_holds()
        {
            panic!("holds broken after seq {}: {e}", self.last_seq);
        }
    }

    /// What a resting order of these terms holds, as (currency, amount), or `None` when that
    /// does not fit in an i64 or the price is not allowed for its side. Used to check snapshots.
    pub(crate) fn resting_order_hold(
        &self,
        symbol: usize,
        side: Side,
        price: i64,
        remaining: i64,
    ) -> Option<(CurrencyId, i64)> {
        let sym = &self.symbols[symbol];
        match side {
            _ if is_future(&sym.terms) => Some((sym.terms.quote, 0)),
            Side::Buy => Some((sym.terms.quote, buy_hold(remaining, price, &sym.terms)?)),
            Side::Sell if sell_price_below_fee(price, &sym.terms) => None,
            Side::Sell => Some((sym.terms.base, remaining.checked_mul(sym.terms.base_scale)?)),
        }
    }

    /// Puts an order from a snapshot on the book, at the back of its level. Holds and balances
    /// come from the snapshot too; the decoder checks that they agree.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore_resting(
        &mut self,
        symbol: usize,
        account: u32,
        order: OrderId,
        side: Side,
        price: i64,
        remaining: i64,
        filled: i64,
        stp: Stp,
        post_only: bool,
        terms: OrderTerms,
    ) {
        let taker = Taker {
            account,
            user: self.accounts.user(account),
            order,
            side,
            limit: Some(price),
            qty: remaining,
            stp,
            post_only,
            leftover: None,
            terms,
            display: 0,
            liquidation: false,
        };
        self.rest_new(symbol, &taker, remaining, filled + remaining);
    }

    /// Starts loading what ending the order in node `idx` touches besides the node itself
    /// (cached by the caller): its neighbours in its account's list, its id index slot, and the
    /// next order of its level. For walks that end many orders one after another (the uncross).
    #[inline]
    pub(crate) fn prefetch_ending(&self, idx: u32) {
        let node = self.orders.get(idx);
        self.orders.prefetch(node.account_prev);
        self.orders.prefetch(node.account_next);
        self.orders.prefetch(node.next);
        self.order_ids
            .prefetch(self.hash.hash_one((node.user, node.order)));
    }

    /// Makes the order in node `idx` an iceberg, counted in its symbol's `icebergs`.
    pub(crate) fn mark_iceberg(&mut self, idx: u32) {
        let node = self.orders.get_mut(idx);
        if node.kind != NodeKind::Iceberg {
            node.kind = NodeKind::Iceberg;
            self.symbols[node.symbol as usize].icebergs += 1;
        }
    }

    /// Frees a node that is out of its level: unlinks it from its account and the id index.
    #[inline]
    fn forget_order(&mut self, idx: u32) {
        self.forget_order_on::<false>(idx);
    }

    /// [`Self::forget_order`]; `SPOT`: the order's symbol is known to be spot.
    fn forget_order_on<const SPOT: bool>(&mut self, idx: u32) {
        let node = *self.orders.get(idx);
        if node.kind == NodeKind::Iceberg {
            self.symbols[node.symbol as usize].icebergs -= 1;
        }
        if !SPOT && is_future(&self.symbols[node.symbol as usize].terms) {
            self.drop_future_order(idx, node.account, node.symbol);
        }
        let account = self.accounts.get_mut(node.account);
        if node.account_prev == NIL {
            account.orders_head = node.account_next;
        } else {
            self.orders.get_mut(node.account_prev).account_next = node.account_next;
        }
        if node.account_next != NIL {
            self.orders.get_mut(node.account_next).account_prev = node.account_prev;
        }
        account.open_orders -= 1;
        self.order_ids
            .remove(self.hash.hash_one((node.user, node.order)), |i| i == idx);
        self.orders.free(idx);
        self.order_ended(node.user, node.order);
    }

    /// The hold a resting order keeps for `qty` of its lots, in (currency, amount).
    #[inline]
    fn resting_hold(&self, node: &OrderNode, qty: i64) -> (CurrencyId, i64) {
        let sym = &self.symbols[node.symbol as usize];
        match node.side {
            _ if is_future(&sym.terms) => (sym.terms.quote, 0),
            Side::Buy => (
                sym.terms.quote,
                buy_hold(qty, node.price, &sym.terms).expect("held at entry"),
            ),
            Side::Sell => (sym.terms.base, qty * sym.terms.base_scale),
        }
    }

    #[inline]
    fn release_hold(&mut self, node: &OrderNode, qty: i64) {
        let (currency, amount) = self.resting_hold(node, qty);
        let balance = self.accounts.balance_mut(node.account, currency);
        balance.held -= amount;
        balance.available += amount;
    }

    /// Ends any live order, resting or pending stop: cancels its whole remaining quantity
    /// (an iceberg's hidden part included) with `reason`, releases its hold and reports it.
    /// Every way an order is cancelled comes here (cancel, reduce, mass cancel, self-trade
    /// prevention, amend to at most its filled part; expiry and suspension too).
    pub(crate) fn remove_live_order(
        &mut self,
        idx: u32,
        reason: CancelReason,
        sink: &mut impl EventSink,
    ) {
        let node = *self.orders.get(idx);
        let remaining = self.live_remaining(idx);
        match node.kind {
            NodeKind::PendingStop => self.unlist_stop(idx),
            NodeKind::Plain | NodeKind::Iceberg => self.symbols[node.symbol as usize].unlink(
                node.side,
                &mut self.levels,
                &mut self.orders,
                idx,
            ),
        }
        self.release_hold(&node, remaining);
        self.forget_order(idx);
        sink.on_event(&Event::Cancelled(Cancelled {
            symbol: SymbolId(node.symbol),
            user: node.user,
            order: node.order,
            side: node.side,
            qty: remaining,
            reason,
        }));
    }

    /// The node of the resting order `(user, order)`, if live.
    #[inline]
    pub(crate) fn find_order(&self, user: UserId, order: OrderId) -> Option<u32> {
        self.order_ids
            .get(self.hash.hash_one((user, order)), |idx| {
                self.is_order(idx, user, order)
            })
    }

    /// Whether node `idx` holds `user`'s order `order`.
    #[inline]
    fn is_order(&self, idx: u32, user: UserId, order: OrderId) -> bool {
        let node = self.orders.get(idx);
        node.order == order && node.user == user
    }

    /// For an order on a future, starts loading the margin sums its change will update (its
    /// user's slot and what it counts there), so that their misses overlap the unlinking.
    #[inline(always)]
    fn prefetch_future_order(&self, idx: u32) {
        let node = self.orders.get(idx);
        if is_future(&self.symbols[node.symbol as usize].terms) {
            self.fut.prefetch_order(idx, node.account);
        }
    }

    /// The account of `user`, if known.
    #[inline]
    pub(crate) fn account_of(&self, user: UserId) -> Option<u32> {
        self.account_ids.get(self.hash.hash_one(user), |account| {
            self.accounts.user(account) == user
        })
    }

    fn cancel(
        &mut self,
        user: UserId,
        order: OrderId,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let idx = self.find_order(user, order).ok_or(Reason::UnknownOrder)?;
        self.prefetch_future_order(idx);
        self.remove_live_order(idx, CancelReason::User, sink);
        Ok(())
    }

    fn reduce(
        &mut self,
        user: UserId,
        order: OrderId,
        qty: i64,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let idx = self.find_order(user, order).ok_or(Reason::UnknownOrder)?;
        if qty <= 0 {
            return Err(Reason::InvalidQty);
        }
        self.prefetch_future_order(idx);
        let node = *self.orders.get(idx);
        if qty >= self.live_remaining(idx) {
            self.remove_live_order(idx, CancelReason::Reduce, sink);
            return Ok(());
        }
        self.release_hold(&node, qty);
        self.take_from_remaining(idx, qty);
        self.order_info[idx as usize].total -= qty;
        sink.on_event(&Event::Cancelled(Cancelled {
            symbol: SymbolId(node.symbol),
            user,
            order,
            side: node.side,
            qty,
            reason: CancelReason::Reduce,
        }));
        Ok(())
    }

    /// Cancels every resting order of `user` (in `symbol` only, when given) as single cancels
    /// would, one after the other in canonical order: by symbol name, then order id. The account's
    /// list is in memory order (newest first, node reuse), which must never reach the output.
    fn mass_cancel(
        &mut self,
        user: UserId,
        symbol: Option<SymbolId>,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let account = self.account_of(user).ok_or(Reason::UnknownUser)?;
        if symbol.is_some_and(|s| self.symbols.get(s.0 as usize).is_none()) {
            return Err(Reason::UnknownSymbol);
        }
        self.cancel_all(account, symbol, CancelReason::User, sink);
        Ok(())
    }

    /// Suspends a user: cancels their live orders as a mass cancel would, with reason
    /// `suspended`, then refuses their orders and withdrawals until resumed (docs/rules.md,
    /// "User suspension"). Suspending a suspended user changes nothing.
    fn suspend_user(&mut self, user: UserId, sink: &mut impl EventSink) -> Result<(), Reason> {
        let account = self.account_of(user).ok_or(Reason::UnknownUser)?;
        if self.accounts.get(account).suspended {
            return Ok(());
        }
        self.cancel_all(account, None, CancelReason::Suspended, sink);
        self.accounts.get_mut(account).suspended = true;
        Ok(())
    }

    /// Cancels every live order of `account` (in `symbol` only, when given) with `reason`, one
    /// after the other in canonical order: by symbol name, then order id.
    fn cancel_all(
        &mut self,
        account: u32,
        symbol: Option<SymbolId>,
        reason: CancelReason,
        sink: &mut impl EventSink,
    ) {
        let user = self.accounts.user(account);
        let mut victims = std::mem::take(&mut self.scratch_mass_cancel);
        victims.clear();
        let mut idx = self.accounts.get(account).orders_head;
        while idx != NIL {
            let node = self.orders.get(idx);
            if symbol.is_none_or(|s| s.0 == node.symbol) {
                let name = self.symbols[node.symbol as usize].spec.symbol;
                victims.push((name, node.order, idx));
            }
            idx = node.account_next;
        }
        // Keys are unique: symbol names are, and so are a user's live order ids.
        victims.sort_unstable_by_key(|&(name, order, _)| (name, order));
        // Nodes are only freed here, never reused or moved, so the collected indices stay valid.
        for &(_, _, idx) in &victims {
            self.remove_live_order(idx, reason, sink);
        }
        assert!(
            symbol.is_some() || self.accounts.get(account).orders_head == NIL,
            "mass cancel left an order of user {user} live"
        );
        self.scratch_mass_cancel = victims;
    }

    /// What an amend of the order at `idx` (`node`, `old_remaining` of it left) to `price` and
    /// `remaining` needs beyond what it holds, checked: for a spot order, the added hold (its
    /// currency and amount, which may be negative), within `available` and, for a user with
    /// futures, within margin; for a future, the margin test of the order as amended.
    fn amended_hold(
        &mut self,
        idx: u32,
        node: &OrderNode,
        old_remaining: i64,
        price: i64,
        remaining: i64,
    ) -> Result<(CurrencyId, i64), Reason> {
        let symbol = node.symbol as usize;
        let terms = self.symbols[symbol].terms;
        if is_future(&terms) {
            self.check_future_order(node.account, symbol, node.side, price, remaining, idx)?;
            return Ok((terms.quote, 0));
        }
        let (currency, old_hold) = self.resting_hold(node, old_remaining);
        let new_hold = match node.side {
            Side::Buy => buy_hold(remaining, price, &terms),
            Side::Sell => remaining.checked_mul(terms.base_scale),
        }
        .ok_or(Reason::Overflow)?;
        // Both holds fit in i64 and are >= 0, so their difference does too.
        let added_hold = new_hold - old_hold;
        if added_hold > self.accounts.balance(node.account, currency).available {
            return Err(Reason::InsufficientFunds);
        }
        if added_hold > 0 && self.accounts.get(node.account).futures {
            self.check_margin_after_spending(node.account, currency, added_hold)?;
            self.note_stale_margin(node.account, currency);
        }
        Ok((currency, added_hold))
    }

    /// The live order a move or amend names. A suspended user has no live order (suspension
    /// cancels them all and refuses new ones), so only a miss needs to ask whether the user is
    /// suspended: `user_suspended` comes before `unknown_order`, and the hot path of a found
    /// order pays no account lookup.
    #[inline(always)]
    fn find_own_live_order(&self, user: UserId, order: OrderId) -> Result<u32, Reason> {
        match self.find_order(user, order) {
            Some(idx) => {
                debug_assert!(
                    !self.accounts.get(self.orders.get(idx).account).suspended,
                    "suspended user {user} has a live order"
                );
                Ok(idx)
            }
            None => Err(self.no_live_order(user)),
        }
    }

    /// Why `user` has no such live order: suspended, or it is unknown.
    #[cold]
    #[inline(never)]
    fn no_live_order(&self, user: UserId) -> Reason {
        match self.account_of(user) {
            Some(account) if self.accounts.get(account).suspended => Reason::UserSuspended,
            _ => Reason::UnknownOrder,
        }
    }

    /// `move`; `Ok(true)` when it left a futures order's margin sums synced (a move that did
    /// not trade), so that the caller need not look the order up again to sync them.
    fn move_order(
        &mut self,
        user: UserId,
        order: OrderId,
        price: i64,
        sink: &mut impl EventSink,
    ) -> Result<bool, Reason> {
        let idx = self.find_own_live_order(user, order)?;
        let node = *self.orders.get(idx);
        let sym = &self.symbols[node.symbol as usize];
        if node.kind != NodeKind::Plain || !sym.controls.plain_spot() {
            if node.kind == NodeKind::Plain && sym.controls.unrestricted() {
                return self.move_future(idx, price, sink);
            }
            return self.move_with_controls(idx, price, sink);
        }
        // A plain order on a spot symbol in `continuous` with no band (the common case, one
        // byte of the symbol's controls): its checks read the symbol's terms once, and nothing
        // is left to sync.
        if price <= 0 || (node.side == Side::Sell && sell_price_below_fee(price, &sym.terms)) {
            return Err(Reason::InvalidPrice);
        }
        self.move_plain_spot(idx, &node, price, Phase::Continuous, sink)?;
        Ok(true)
    }

    /// `move` of a plain order on a future in `continuous` with no band.
    #[inline(always)]
    fn move_future(
        &mut self,
        idx: u32,
        price: i64,
        sink: &mut impl EventSink,
    ) -> Result<bool, Reason> {
        let node = *self.orders.get(idx);
        // The margin check reads the account's slot and balance and the order's sums: their
        // misses overlap instead of following one another.
        self.fut.prefetch_order(idx, node.account);
        self.accounts.prefetch(node.account);
        if !self.move_price_valid(&node, price) {
            return Err(Reason::InvalidPrice);
        }
        self.move_plain(idx, &node, price, Phase::Continuous, sink)
    }

    /// Whether `price` is a price the order in `node` may move to.
    #[inline]
    fn move_price_valid(&self, node: &OrderNode, price: i64) -> bool {
        let terms = &self.symbols[node.symbol as usize].terms;
        price > 0
            && !(node.side == Side::Sell && sell_price_below_fee(price, terms) && !is_future(terms))
    }

    /// `move` of a pending stop or an iceberg, or in a symbol with a phase other than
    /// `continuous` or a band: the checks in their order, then the move.
    #[cold]
    #[inline(never)]
    fn move_with_controls(
        &mut self,
        idx: u32,
        price: i64,
        sink: &mut impl EventSink,
    ) -> Result<bool, Reason> {
        let node = *self.orders.get(idx);
        if is_future(&self.symbols[node.symbol as usize].terms) {
            // The margin check reads the account's slot and balance and the order's sums: their
            // misses overlap instead of following one another.
            self.fut.prefetch_order(idx, node.account);
            self.accounts.prefetch(node.account);
        }
        if node.kind == NodeKind::PendingStop {
            return Err(Reason::InvalidOrder);
        }
        if !self.move_price_valid(&node, price) {
            return Err(Reason::InvalidPrice);
        }
        let symbol = node.symbol as usize;
        let controls = self.symbols[symbol].controls;
        let phase = controls.phase();
        if !controls.unrestricted() {
            phase_admits_change(phase)?;
            self.check_band(symbol, node.side, price)?;
        }
        if node.kind == NodeKind::Iceberg {
            return self.move_iceberg(idx, price, sink).map(|()| false);
        }
        self.move_plain(idx, &node, price, phase, sink)
    }

    /// `move` of a plain resting order whose new price passed every check but funds and
    /// post-only; `Ok(true)` as for [`Self::move_order`] (always for a spot order: it has no
    /// margin sums).
    #[inline(always)]
    fn move_plain(
        &mut self,
        idx: u32,
        node: &OrderNode,
        price: i64,
        phase: Phase,
        sink: &mut impl EventSink,
    ) -> Result<bool, Reason> {
        if is_future(&self.symbols[node.symbol as usize].terms) {
            let symbol = node.symbol as usize;
            // In an auction a move never trades: it rests at the back of its new level.
            let crosses =
                phase == Phase::Continuous && self.crosses_best(symbol, node.side, Some(price));
            if node.post_only && crosses {
                return Err(Reason::WouldTake);
            }
            return self.move_plain_future(idx, node, price, crosses, sink);
        }
        self.move_plain_spot(idx, node, price, phase, sink)?;
        Ok(true)
    }

    /// [`Self::move_plain`] of an order on a spot symbol.
    #[inline(always)]
    fn move_plain_spot(
        &mut self,
        idx: u32,
        node: &OrderNode,
        price: i64,
        phase: Phase,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let symbol = node.symbol as usize;
        let terms = self.symbols[symbol].terms;
        // In an auction a move never trades: it rests at the back of its new level.
        let crosses =
            phase == Phase::Continuous && self.crosses_best(symbol, node.side, Some(price));
        if node.post_only && crosses {
            return Err(Reason::WouldTake);
        }
        if node.side == Side::Buy {
            // What the buy must add to its hold (negative when it frees some); both holds fit
            // in i64 and are >= 0, so the difference fits too.
            let new_hold = buy_hold(node.remaining, price, &terms).ok_or(Reason::Overflow)?;
            let old_hold = buy_hold(node.remaining, node.price, &terms).expect("held at entry");
            let added_hold = new_hold - old_hold;
            // The balance exists: it holds this order's funds. (A user's futures matter only
            // to a hold that grows.)
            let exposed = added_hold > 0 && self.accounts.get(node.account).futures;
            let balance = self.accounts.balance_mut(node.account, terms.quote);
            if added_hold > balance.available {
                return Err(Reason::InsufficientFunds);
            }
            let balance = if exposed {
                self.spot_spending_margin(node.account, terms.quote, added_hold)?
            } else {
                balance
            };
            if !crosses {
                // Nothing can refuse the move now: the hold follows the new price.
                balance.available -= added_hold;
                balance.held += added_hold;
            }
        }
        if !crosses {
            // Nothing can trade (the common case): re-price and join the back of the new level.
            self.symbols[symbol].reprice(node.side, &mut self.levels, &mut self.orders, idx, price);
            return Ok(());
        }
        self.move_crossing(idx, node, price, sink);
        Ok(())
    }

    /// A spot buy's move that adds `added` to its hold, by a user with futures: the margin check
    /// of that spending, then the balance to change.
    #[cold]
    #[inline(never)]
    fn spot_spending_margin(
        &mut self,
        account: u32,
        currency: CurrencyId,
        added: i64,
    ) -> Result<&mut Amounts, Reason> {
        self.check_margin_after_spending(account, currency, added)?;
        self.note_stale_margin(account, currency);
        Ok(self.accounts.balance_mut(account, currency))
    }

    /// [`Self::move_plain`] of an order on a future, out of the spot path's way: the margin
    /// check, then the move; a move that does not trade updates the margin sums from the node
    /// (the order's contribution before and after), without reading the stored one.
    #[inline(never)]
    fn move_plain_future(
        &mut self,
        idx: u32,
        node: &OrderNode,
        price: i64,
        crosses: bool,
        sink: &mut impl EventSink,
    ) -> Result<bool, Reason> {
        let symbol = node.symbol as usize;
        let old = self.plain_contrib(node);
        self.check_future_order_with(
            node.account,
            symbol,
            node.side,
            price,
            node.remaining,
            idx,
            old,
        )?;
        if !crosses {
            self.symbols[symbol].reprice(node.side, &mut self.levels, &mut self.orders, idx, price);
            let new = self.plain_contrib(&OrderNode { price, ..*node });
            self.sync_moved_future_order(idx, node.account, node.symbol, old, new);
            return Ok(true);
        }
        self.move_crossing(idx, node, price, sink);
        Ok(false)
    }

    /// The rest of a move that crosses: the order leaves the book and trades at its new price
    /// as a taker would (what is left rests at the back of its new level).
    #[inline(always)]
    fn move_crossing(&mut self, idx: u32, node: &OrderNode, price: i64, sink: &mut impl EventSink) {
        let (user, order) = (node.user, node.order);
        let symbol = node.symbol as usize;
        self.symbols[symbol].unlink(node.side, &mut self.levels, &mut self.orders, idx);
        self.release_hold(node, node.remaining);
        let taker = Taker {
            account: node.account,
            user,
            order,
            side: node.side,
            limit: Some(price),
            qty: node.remaining,
            stp: node.stp,
            post_only: node.post_only,
            leftover: None,
            terms: self.order_info[idx as usize].terms,
            display: 0,
            liquidation: false,
        };
        self.execute(symbol, &taker, Some(idx), sink);
    }

    /// Amend: a new price and/or total quantity at once (docs/rules.md, "Amend"). Everything
    /// is checked before anything changes, so a rejected amend leaves the order as it was.
    fn amend(&mut self, amend: &AmendOrder, sink: &mut impl EventSink) -> Result<(), Reason> {
        let (user, order) = (amend.user, amend.order);
        let idx = self.find_own_live_order(user, order)?;
        if amend.price().is_none() && amend.qty().is_none() && amend.stop_price().is_none() {
            return Err(Reason::InvalidOrder);
        }
        let node = *self.orders.get(idx);
        if node.kind == NodeKind::PendingStop {
            return self.amend_stop(idx, amend, sink);
        }
        if amend.stop_price().is_some() {
            // Only a pending stop has a stop price.
            return Err(Reason::InvalidOrder);
        }
        if amend.qty().is_some_and(|qty| qty <= 0) {
            return Err(Reason::InvalidQty);
        }
        let display = self.display_of(idx);
        if display > 0
            && let Some(qty) = amend.qty()
            && too_many_slices(qty.saturating_sub(self.order_filled(idx)), display)
        {
            return Err(Reason::InvalidQty);
        }
        let symbol = node.symbol as usize;
        let terms = self.symbols[symbol].terms;
        if let Some(price) = amend.price()
            && (price <= 0
                || (node.side == Side::Sell
                    && sell_price_below_fee(price, &terms)
                    && !is_future(&terms)))
        {
            return Err(Reason::InvalidPrice);
        }
        let old_remaining = self.live_remaining(idx);
        let filled = self.order_info[idx as usize].total - old_remaining;
        let total = amend.qty().unwrap_or(filled + old_remaining);
        if total <= filled {
            // A total at or below what has filled ends the order, as a reduce would.
            self.remove_live_order(idx, CancelReason::Reduce, sink);
            return Ok(());
        }
        let remaining = total - filled;
        let price = amend.price().unwrap_or(node.price);
        let keeps_priority = price == node.price && remaining <= old_remaining;
        let phase = self.symbols[symbol].controls.phase();
        // A halted or closed symbol takes only an amend that lowers the quantity.
        if !(price == node.price && remaining < old_remaining) {
            phase_admits_change(phase)?;
        }
        if price != node.price {
            self.check_band(symbol, node.side, price)?;
        }
        // In an auction an amend never trades.
        let crosses = !keeps_priority
            && phase == Phase::Continuous
            && self.crosses_best(symbol, node.side, Some(price));
        if node.post_only && crosses {
            return Err(Reason::WouldTake);
        }
        let (currency, added_hold) =
            self.amended_hold(idx, &node, old_remaining, price, remaining)?;

        self.order_info[idx as usize].total = total;
        sink.on_event(&Event::Amended(Amended {
            symbol: SymbolId(node.symbol),
            user,
            order,
            side: node.side,
            price,
            stop_price: 0,
            qty: remaining,
            priority: if keeps_priority {
                Priority::Kept
            } else {
                Priority::Lost
            },
        }));
        let display = self.display_of(idx);
        // A re-entry whose own limit lies beyond the band's edge (the band moved since the
        // order's price was checked) never rests there: `execute` cancels it (`band`).
        let beyond_band =
            !keeps_priority && self.symbols[symbol].controls.beyond_edge(node.side, price);
        if crosses || beyond_band {
            // It may trade: re-entered exactly as a move enters it.
            self.symbols[symbol].unlink(node.side, &mut self.levels, &mut self.orders, idx);
            self.release_hold(&node, old_remaining);
            let taker = Taker {
                account: node.account,
                user,
                order,
                side: node.side,
                limit: Some(price),
                qty: remaining,
                stp: node.stp,
                post_only: node.post_only,
                leftover: None,
                terms: self.order_info[idx as usize].terms,
                display,
                liquidation: false,
            };
            self.execute(symbol, &taker, Some(idx), sink);
            return Ok(());
        }
        let balance = self.accounts.balance_mut(node.account, currency);
        balance.available -= added_hold;
        balance.held += added_hold;
        if keeps_priority {
            self.take_from_remaining(idx, old_remaining - remaining);
        } else {
            // The back of its (new) level, as a move that does not trade; an iceberg shows a
            // fresh slice.
            let sym = &mut self.symbols[symbol];
            sym.unlink(node.side, &mut self.levels, &mut self.orders, idx);
            let shown = self.set_slices(idx, display, remaining);
            let n = self.orders.get_mut(idx);
            n.price = price;
            n.remaining = shown;
            self.symbols[symbol].push_back(node.side, &mut self.levels, &mut self.orders, idx);
        }
        Ok(())
    }

    // ----- prefetching -----------------------------------------------------------------------

    /// Starts loading, without waiting, memory that the next few commands will touch, so that
    /// their cache misses overlap with the work of the commands before them. `upcoming[0]` is
    /// the command about to be applied and the rest follow it in order; call it before each
    /// command. It changes nothing and reports nothing: the same commands give the same events
    /// and state with or without it.
    ///
    /// On a venue whose state is larger than the CPU caches, a command waits on a chain of
    /// misses, each address read from the one before: the id index slot, the order, then its
    /// level, neighbours, account and book, then the book's price index (a new order, having
    /// no order to look up, reaches its book's arrays a step sooner, and then the best level it
    /// would trade with), and for a move last the level it joins. So each command is prefetched
    /// in five steps, one link of the chain at a time, at [`PREFETCH_DISTANCES`] commands ahead.
    /// On a small venue (everything cached) it only costs time: see [`Engine::prefetch_pays`].
    #[inline]
    pub fn prefetch_ahead(&self, upcoming: &[Command]) {
        self.prefetch_upcoming(|ahead| upcoming.get(ahead));
    }

    /// [`Engine::prefetch_ahead`] for commands that are not in one slice: `upcoming(n)` is the
    /// command `n` places after the one about to be applied (0), or `None` when there is none
    /// (yet) or it is not a command. The server's engine stage calls it on the commands it has
    /// taken from the journal ahead of applying them; at most [`PREFETCH_LOOKAHEAD`] are read.
    #[inline]
    pub fn prefetch_upcoming<'c>(&self, upcoming: impl Fn(usize) -> Option<&'c Command>) {
        let [index, entries, neighbours, book, landing] = PREFETCH_DISTANCES;
        // Where a command ahead keeps its order in `found_ahead`: its sequence number, if
        // every item ahead is a command (otherwise a slot is missed, which costs a lookup).
        let slot =
            |ahead: usize| &self.found_ahead[(self.last_seq as usize + 1 + ahead) % FOUND_AHEAD];
        if let Some(cmd) = upcoming(index) {
            self.prefetch_index(cmd);
        }
        if let Some(cmd) = upcoming(entries) {
            self.prefetch_entries(cmd, slot(entries));
        }
        if let Some(cmd) = upcoming(neighbours) {
            self.prefetch_neighbours(cmd, slot(neighbours));
        }
        if let Some(cmd) = upcoming(book) {
            self.prefetch_book(cmd, slot(book));
        }
        if let Some(cmd) = upcoming(landing) {
            self.prefetch_landing(cmd, slot(landing));
        }
    }

    /// The order `user` and `order` name: the one the second step left in `found` when its key
    /// matches, else from the id index.
    #[inline]
    fn order_ahead(&self, found: &Cell<u32>, user: UserId, order: OrderId) -> Option<u32> {
        let idx = found.get();
        // The node found commands ago may have been freed since: only prefetching reads it.
        if idx != NIL && {
            let node = self.orders.peek(idx);
            node.order == order && node.user == user
        } {
            return Some(idx);
        }
        self.find_order(user, order)
    }

    /// Whether [`Engine::prefetch_ahead`] is likely to pay here: when the orders and accounts
    /// alone outgrow what a CPU cache holds (see [`PREFETCH_PAYS_BYTES`]). Below that, nearly
    /// every access hits the cache and prefetching is pure overhead (about a third of the
    /// `single` workload's throughput).
    pub fn prefetch_pays(&self) -> bool {
        let bytes = self.orders.live() * std::mem::size_of::<OrderNode>()
            + self.accounts.len() * Accounts::bytes_each();
        bytes >= PREFETCH_PAYS_BYTES
    }

    /// The first link: the id index slots a command looks up, and a new order's book (whose
    /// address the command gives: its chain starts a link further on).
    fn prefetch_index(&self, cmd: &Command) {
        match *cmd {
            Command::Move { user, order, .. }
            | Command::Cancel { user, order }
            | Command::Reduce { user, order, .. } => {
                self.order_ids.prefetch(self.hash.hash_one((user, order)));
            }
            Command::Place(ref p) => {
                self.order_ids
                    .prefetch(self.hash.hash_one((p.user, p.order)));
                self.account_ids.prefetch(self.hash.hash_one(p.user));
                if let (Some(sym), Some(side)) = (self.symbols.get(p.symbol.0 as usize), p.side) {
                    sym.prefetch_side(side);
                }
            }
            _ => {}
        }
    }

    /// The second link: the order named (its slot is cached by now); or a new order's account,
    /// where it would rest, and, should it trade, the other side and the best level there.
    fn prefetch_entries(&self, cmd: &Command, found: &Cell<u32>) {
        match *cmd {
            Command::Move { user, order, .. }
            | Command::Cancel { user, order }
            | Command::Reduce { user, order, .. } => {
                let guess = self.order_ids.guess(self.hash.hash_one((user, order)));
                found.set(guess.unwrap_or(NIL));
                if let Some(idx) = guess {
                    self.orders.prefetch(idx);
                }
            }
            Command::Place(ref p) => {
                if let Some(account) = self.account_ids.guess(self.hash.hash_one(p.user)) {
                    self.accounts.prefetch_with_user(account);
                }
                let (Some(sym), Some(side)) = (self.symbols.get(p.symbol.0 as usize), p.side)
                else {
                    return;
                };
                if let Some(price) = p.price {
                    sym.side(side).prefetch_price(price);
                }
                if let Some(level) = self.level_taken(sym, side, p.price) {
                    prefetch(sym.side(side.opposite()));
                    self.levels.prefetch(level);
                }
            }
            _ => {}
        }
    }

    /// The third link. For an order named by the command (its node is cached by now): what
    /// taking it out of its level and settling it touches. For a new order that trades: the
    /// first order it meets, and the other side's best ends (where an emptied level goes); for
    /// one that rests, the level it joins and the side-table entry of the node it will likely
    /// get.
    fn prefetch_neighbours(&self, cmd: &Command, found: &Cell<u32>) {
        match *cmd {
            Command::Move { user, order, .. }
            | Command::Cancel { user, order }
            | Command::Reduce { user, order, .. } => {
                let Some(idx) = self.order_ahead(found, user, order) else {
                    return;
                };
                let node = self.orders.peek(idx);
                self.levels.prefetch(node.level);
                self.orders.prefetch(node.prev);
                self.orders.prefetch(node.next);
                if matches!(cmd, Command::Reduce { .. }) {
                    // `reduce` lowers the order's total.
                    prefetch_index(&self.order_info, idx as usize);
                }
                // A sell that moves without trading holds the same lots: its account stays
                // untouched (should it trade, `prefetch_book` loads the account).
                let sell_move = matches!(cmd, Command::Move { .. }) && node.side == Side::Sell;
                if !sell_move {
                    self.accounts.prefetch(node.account);
                }
                if let Some(sym) = self.symbols.get(node.symbol as usize) {
                    sym.prefetch_side(node.side);
                }
            }
            Command::Place(ref p) => {
                let (Some(sym), Some(side)) = (self.symbols.get(p.symbol.0 as usize), p.side)
                else {
                    return;
                };
                if let Some(level) = self.level_taken(sym, side, p.price) {
                    self.orders.prefetch(self.levels.peek(level).head);
                    sym.side(side.opposite()).prefetch_best();
                } else {
                    // It rests: the level it joins and what it keeps beside its node, in the
                    // slot it will likely be given (the node itself was freed lately, so it is
                    // cached).
                    if let Some(level) = p.price.and_then(|price| sym.side(side).level_at(price)) {
                        self.levels.prefetch(level);
                    }
                    prefetch_index(&self.order_info, self.orders.next_slot() as usize);
                }
            }
            _ => {}
        }
    }

    /// The fourth link. For a move or a cancel of the last order of its level: the ladder cell
    /// that level leaves. For a move: where its side's arrays will put it (the book's own state
    /// is cached by now), and should it trade, the other side, the best level there and a
    /// sell's account. For a new order that trades: the account of the first order it meets.
    fn prefetch_book(&self, cmd: &Command, found: &Cell<u32>) {
        match *cmd {
            Command::Cancel { user, order } => {
                if let Some(idx) = self.order_ahead(found, user, order) {
                    let node = self.orders.peek(idx);
                    if let Some(sym) = self.symbols.get(node.symbol as usize) {
                        Self::prefetch_level_leaving(sym, node);
                    }
                }
            }
            Command::Move { user, order, price } => {
                let Some(idx) = self.order_ahead(found, user, order) else {
                    return;
                };
                let node = self.orders.peek(idx);
                let Some(sym) = self.symbols.get(node.symbol as usize) else {
                    return;
                };
                Self::prefetch_level_leaving(sym, node);
                sym.side(node.side).prefetch_price(price);
                if let Some(level) = self.level_taken(sym, node.side, Some(price)) {
                    // It trades, as a taker with the order's terms.
                    prefetch(sym.side(node.side.opposite()));
                    self.levels.prefetch(level);
                    prefetch_index(&self.order_info, idx as usize);
                    if node.side == Side::Sell {
                        self.accounts.prefetch(node.account);
                    }
                }
            }
            Command::Place(ref p) => {
                if let (Some(sym), Some(side)) = (self.symbols.get(p.symbol.0 as usize), p.side)
                    && let Some(level) = self.level_taken(sym, side, p.price)
                {
                    let maker = self.orders.peek(self.levels.peek(level).head);
                    self.accounts.prefetch(maker.account);
                }
            }
            _ => {}
        }
    }

    /// When `node` is alone in its level, the ladder cell its leaving empties in `sym`, its
    /// book (its neighbours and its book's own lines are cached by now).
    fn prefetch_level_leaving(sym: &SymbolState, node: &OrderNode) {
        if node.prev == NIL && node.next == NIL {
            sym.side(node.side).prefetch_cell(node.price);
        }
    }

    /// The fifth link, for a move: the level it joins, when there is one (its side's arrays are
    /// cached by now).
    fn prefetch_landing(&self, cmd: &Command, found: &Cell<u32>) {
        if let Command::Move { user, order, price } = *cmd
            && let Some(idx) = self.order_ahead(found, user, order)
        {
            let node = self.orders.peek(idx);
            if let Some(sym) = self.symbols.get(node.symbol as usize)
                && let Some(level) = sym.side(node.side).level_at(price)
            {
                self.levels.prefetch(level);
            }
        }
    }

    /// The level an order on `side` at `price` (`None`: at any price) would trade with first,
    /// if it would trade now: read from its book's first line (cached by the first links), as a
    /// guess for prefetching only.
    fn level_taken(&self, sym: &SymbolState, side: Side, price: Option<i64>) -> Option<u32> {
        let best = sym.best_price(side.opposite())?;
        crosses(side, price, best)
            .then(|| sym.best_level(side.opposite()))
            .flatten()
    }

    // ----- queries --------------------------------------------------------------------------

    fn book(
        &mut self,
        symbol: SymbolId,
        depth: i64,
        sink: &mut impl EventSink,
    ) -> Result<(), Reason> {
        let sym = self
            .symbols
            .get(symbol.0 as usize)
            .ok_or(Reason::UnknownSymbol)?;
        if depth <= 0 {
            return Err(Reason::InvalidQty);
        }
        let depth = usize::try_from(depth).unwrap_or(usize::MAX);
        let (levels, orders) = (&self.levels, &self.orders);
        let to_level = |idx: u32| Level {
            price: level_price(levels, orders, idx),
            qty: levels.get(idx).total,
        };
        self.scratch_bids.clear();
        self.scratch_bids.extend(
            sym.bids
                .levels_best_first(&self.levels)
                .take(depth)
                .map(to_level),
        );
        self.scratch_asks.clear();
        self.scratch_asks.extend(
            sym.asks
                .levels_best_first(&self.levels)
                .take(depth)
                .map(to_level),
        );
        sink.on_event(&Event::Book(BookSnapshot {
            symbol,
            bids: &self.scratch_bids,
            asks: &self.scratch_asks,
        }));
        Ok(())
    }

    /// The id of a symbol by name, or [`SymbolId::NONE`].
    pub fn symbol_id(&self, name: &str) -> SymbolId {
        Name::new(name)
            .and_then(|name| self.symbol_ids.get(&name).copied())
            .unwrap_or(SymbolId::NONE)
    }

    /// The symbol's specification, if it exists.
    pub fn symbol(&self, id: SymbolId) -> Option<&SymbolSpec> {
        self.symbols.get(id.0 as usize).map(|s| &s.spec)
    }

    /// All symbols, sorted by name.
    pub fn symbols_by_name(&self) -> Vec<(SymbolId, SymbolSpec)> {
        self.symbol_ids
            .values()
            .map(|&id| (id, self.symbols[id.0 as usize].spec))
            .collect()
    }

    /// All user ids, ascending.
    pub fn users(&self) -> Vec<UserId> {
        let mut users: Vec<UserId> = self.accounts.users().to_vec();
        users.sort_unstable();
        users
    }

    /// A user's balance in one currency (zero when never touched); `None` for an unknown user.
    pub fn balance(&self, user: UserId, currency: &str) -> Option<Balance> {
        let account = self.account_of(user)?;
        let entry = Name::new(currency)
            .and_then(|name| self.currency_ids.get(&name))
            .map(|&c| self.accounts.balance(account, c));
        Some(entry.map_or(
            Balance {
                available: 0,
                held: 0,
            },
            |e| Balance {
                available: e.available,
                held: e.held,
            },
        ))
    }

    /// A user's non-zero balances (by currency name) and open orders (by symbol name, then order
    /// id); `None` for an unknown user.
    pub fn user_report(&self, user: UserId) -> Option<UserReport> {
        let account_idx = self.account_of(user)?;
        let account = self.accounts.get(account_idx);
        let mut balances: Vec<(Name, Balance)> = self
            .accounts
            .balances(account_idx)
            .filter(|(_, b)| b.available != 0 || b.held != 0)
            .map(|(currency, b)| {
                (
                    self.currencies[currency.0 as usize].name,
                    Balance {
                        available: b.available,
                        held: b.held,
                    },
                )
            })
            .collect();
        balances.sort_by_key(|b| b.0);
        let mut orders = Vec::with_capacity(account.open_orders as usize);
        let mut idx = account.orders_head;
        while idx != NIL {
            let node = self.orders.get(idx);
            let shown = match node.kind {
                NodeKind::PendingStop => 0,
                NodeKind::Plain | NodeKind::Iceberg => node.remaining,
            };
            orders.push(OpenOrder {
                symbol: self.symbols[node.symbol as usize].spec.symbol,
                order: node.order,
                side: node.side,
                order_type: self.order_type_of(idx),
                tif: self.order_info[idx as usize].terms.tif,
                price: node.price,
                stop_price: self.stop_price_of(idx),
                remaining: self.live_remaining(idx),
                shown,
                filled: self.order_filled(idx),
                expire_ts: self.order_info[idx as usize].terms.expire_ts,
            });
            idx = node.account_next;
        }
        orders.sort_by_key(|o| (o.symbol, o.order));
        Some(UserReport {
            user,
            suspended: account.suspended,
            balances,
            orders,
            positions: self.positions_of(account_idx),
            margins: self.margins_of(account_idx),
        })
    }

    /// Totals per currency, sorted by currency name.
    pub fn venue_totals(&self) -> Vec<CurrencyTotals> {
        let mut totals: Vec<CurrencyTotals> = self
            .currencies
            .iter()
            .map(|c| CurrencyTotals {
                currency: c.name,
                deposits: c.deposits,
                withdrawals: c.withdrawals,
                available: 0,
                held: 0,
                fees: c.fees,
                insurance: c.insurance,
                position_cost: 0,
            })
            .collect();
        for (_, currency, b) in self.accounts.all_balances() {
            let t = &mut totals[currency.0 as usize];
            // With futures the users' balances may sum beyond i64 (one's gain is another's
            // open position): saturated, never a panic.
            t.available = t.available.saturating_add(b.available);
            t.held = t.held.saturating_add(b.held);
        }
        for (_, s, p) in self.position_entries() {
            totals[self.symbols[s as usize].terms.quote.0 as usize].position_cost += p.cost as i128;
        }
        totals.sort_by_key(|t| t.currency);
        totals
    }

    /// Resting orders of one symbol in priority order: (bids, asks), best price first, then
    /// oldest first. Empty for an unknown symbol.
    pub fn resting_orders(&self, symbol: SymbolId) -> (Vec<RestingOrder>, Vec<RestingOrder>) {
        let Some(sym) = self.symbols.get(symbol.0 as usize) else {
            return (Vec::new(), Vec::new());
        };
        (self.side_orders(&sym.bids), self.side_orders(&sym.asks))
    }

    fn side_orders(&self, side: &BookSide) -> Vec<RestingOrder> {
        let mut out = Vec::new();
        for level in side.levels_best_first(&self.levels) {
            let mut idx = self.levels.get(level).head;
            while idx != NIL {
                let node = self.orders.get(idx);
                out.push(RestingOrder {
                    user: node.user,
                    order: node.order,
                    side: node.side,
                    price: node.price,
                    remaining: self.live_remaining(idx),
                });
                idx = node.next;
            }
        }
        out
    }

    /// Every live order, by user id then order id, with what it has filled, what the book
    /// shows of it and its expiry (0: never).
    pub fn live_orders(&self) -> Vec<LiveOrder> {
        let mut out = Vec::with_capacity(self.orders.live());
        for account in 0..self.accounts.len() as u32 {
            let mut idx = self.accounts.get(account).orders_head;
            while idx != NIL {
                let node = self.orders.get(idx);
                out.push(LiveOrder {
                    user: node.user,
                    order: node.order,
                    filled: self.order_filled(idx),
                    shown: match node.kind {
                        NodeKind::PendingStop => 0,
                        NodeKind::Plain | NodeKind::Iceberg => node.remaining,
                    },
                    expire_ts: self.order_info[idx as usize].terms.expire_ts,
                });
                idx = node.account_next;
            }
        }
        out.sort_unstable_by_key(|o| (o.user, o.order));
        out
    }

    /// The remaining quantity of a live order, if it is live.
    pub fn order_remaining(&self, user: UserId, order: OrderId) -> Option<i64> {
        self.find_order(user, order)
            .map(|idx| self.live_remaining(idx))
    }

    /// A live iceberg's display quantity; 0 for any other live order, `None` when the order
    /// is not live. (A market data feed that starts from the engine needs it to show the
    /// iceberg's next slices.)
    pub fn order_display_qty(&self, user: UserId, order: OrderId) -> Option<i64> {
        self.find_order(user, order).map(|idx| self.display_of(idx))
    }

    /// Number of resting orders on the whole venue.
    pub fn resting_order_count(&self) -> usize {
        self.orders.live()
    }

    /// The sequence number of the last command applied (0 before any). Carried in snapshots
    /// but not part of the state hash.
    /// The earliest time at which a live order may expire (docs/rules.md, "GTD and DAY"): a
    /// command at or after it expires something, or finds the order already gone. The server
    /// sends a `tick` then when the venue is quiet.
    pub fn next_expiry(&self) -> Option<i64> {
        self.expiries.peek().map(|Reverse(first)| first.0)
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Seqs after the last applied, up to `through`, were lost and the loss accepted (the
    /// journal goes on after them): the next command carries `through + 1`. Changes no state.
    pub fn pass_over_lost_seqs(&mut self, through: u64) {
        assert!(
            through >= self.last_seq,
            "lost seqs {through} lie before the last applied {}",
            self.last_seq
        );
        self.last_seq = through;
    }

    /// Whether `user`'s order id `order` belongs to an order that ended within the order-id
    /// window (docs/rules.md): a new order with that id would be refused as a duplicate.
    pub fn order_id_taken(&self, user: UserId, order: OrderId) -> bool {
        self.id_recently_used(user, order)
    }

    /// How long the id of an order that ended stays taken, ns of venue time.
    pub fn order_id_window(&self) -> i64 {
        self.order_id_window
    }

    /// The ids still inside the window, as (user, order, ended at), by user then order.
    pub fn recent_order_ids(&self) -> Vec<(UserId, OrderId, i64)> {
        let mut ids: Vec<_> = self
            .recent_ids
            .iter()
            .map(|&(ended_at, user, order)| (user, order, ended_at))
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The ids of suspended users, ascending (docs/rules.md, "User suspension").
    pub fn suspended_users(&self) -> Vec<UserId> {
        let mut users: Vec<UserId> = (0..self.accounts.len() as u32)
            .filter(|&a| self.accounts.get(a).suspended)
            .map(|a| self.accounts.user(a))
            .collect();
        users.sort_unstable();
        users
    }

    /// The venue clock: the largest command timestamp applied so far, 0 before any. Part of
    /// the state (and of the state hash).
    pub fn now(&self) -> i64 {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::OwnedEvent;

    fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    /// The contract's own example: a cross with fees, and the balances it leaves.
    #[test]
    fn a_cross_settles_both_sides_and_collects_fees() {
        let mut e = Engine::new(EngineConfig::default());
        let mut events: Vec<OwnedEvent> = Vec::new();
        let cmds = [
            Command::AddSymbol(Box::new(SymbolSpec {
                symbol: name("BTC-USD"),
                base: name("BTC"),
                quote: name("USD"),
                base_scale: 1_000_000,
                quote_scale: 10_000,
                maker_fee: 700,
                taker_fee: 1900,
                band_bps: 0,
                day_end: 0,
                kind: SymbolSpec::SPOT,
            })),
            Command::AddUser { user: 301 },
            Command::AddUser { user: 302 },
            Command::AdjustBalance {
                user: 301,
                currency: name("USD"),
                amount: 2_000_000_000,
                tx: 1,
            },
            Command::AdjustBalance {
                user: 302,
                currency: name("BTC"),
                amount: 12_000_000,
                tx: 2,
            },
        ];
        for (i, c) in cmds.iter().enumerate() {
            assert_eq!(e.apply(i as u64 + 1, 0, c, &mut events), Ok(()));
        }
        let sym = e.symbol_id("BTC-USD");
        let buy = PlaceOrder::limit(301, 5001, sym, Side::Buy, 15400, 12);
        assert_eq!(e.apply(6, 0, &Command::Place(buy), &mut events), Ok(()));
        let sell = PlaceOrder::limit(302, 5002, sym, Side::Sell, 15000, 10).with_tif(Tif::Ioc);
        assert_eq!(e.apply(7, 0, &Command::Place(sell), &mut events), Ok(()));
        assert_eq!(
            events,
            vec![OwnedEvent::Trade(Trade {
                symbol: sym,
                price: 15400,
                qty: 10,
                maker_user: 301,
                maker_order: 5001,
                taker_user: 302,
                taker_order: 5002,
                taker_side: Side::Sell,
                maker_fee: 7000,
                taker_fee: 19000,
            })]
        );
        let bal = |u, c| e.balance(u, c).unwrap();
        assert_eq!(
            bal(301, "USD"),
            Balance {
                available: 151_989_200,
                held: 308_003_800
            }
        );
        assert_eq!(
            bal(301, "BTC"),
            Balance {
                available: 10_000_000,
                held: 0
            }
        );
        assert_eq!(
            bal(302, "USD"),
            Balance {
                available: 1_539_981_000,
                held: 0
            }
        );
        assert_eq!(
            bal(302, "BTC"),
            Balance {
                available: 2_000_000,
                held: 0
            }
        );
        assert_eq!(
            e.venue_totals()
                .iter()
                .find(|t| t.currency == name("USD"))
                .unwrap()
                .fees,
            26_000
        );

        let restored =
            Engine::decode_snapshot(&e.encode_snapshot(), EngineConfig::default()).unwrap();
        assert_eq!(restored.state_hash(), e.state_hash());
        assert_eq!(restored.resting_orders(sym), e.resting_orders(sym));
    }
}
