//! Snapshot encoding of the whole state, and the state hash (SHA-256 of the snapshot body).
//!
//! The body is canonical: it lists the state in an order that does not depend on how the state
//! was reached (users by id, balances by currency id, orders in priority order, tx ids sorted),
//! so equal states have equal bytes and `decode(encode(s))` encodes to the same bytes again.
//! Decoding trusts nothing: it checks every field and every invariant (holds match the resting
//! orders, funds are conserved, books are uncrossed) and returns an error rather than building a
//! state that could not have been reached. The byte layout is in docs/snapshot-format.md.

use std::cell::Cell;
use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::command::SymbolSpec;
use crate::engine::{Engine, EngineConfig, OrderTerms};
use crate::types::{CurrencyId, Name, Side, Stp, Tif};

const MAGIC: &[u8; 8] = b"RIALTOSS";
/// 2 added the part-2 state, 4 futures (docs/snapshot-format.md, "Versions").
const VERSION: u32 = 4;
/// The oldest version still decoded: 3 is 4 without futures (a venue with none).
const OLDEST_VERSION: u32 = 3;
/// magic + version + last_seq + body length.
const HEADER_LEN: usize = 8 + 4 + 8 + 8;

/// Why a snapshot could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotError(pub String);

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid snapshot: {}", self.0)
    }
}

impl std::error::Error for SnapshotError {}

fn err<T>(what: impl Into<String>) -> Result<T, SnapshotError> {
    Err(SnapshotError(what.into()))
}

struct Writer(Vec<u8>);

impl Writer {
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
    fn name(&mut self, name: Name) {
        self.u8(name.as_str().len() as u8);
        self.0.extend_from_slice(name.as_str().as_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], SnapshotError> {
        if self.bytes.len() - self.pos < n {
            return err(format!("truncated in {what} at byte {}", self.pos));
        }
        let slice = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }
    fn u8(&mut self, what: &str) -> Result<u8, SnapshotError> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn i64(&mut self, what: &str) -> Result<i64, SnapshotError> {
        Ok(i64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn name(&mut self, what: &str) -> Result<Name, SnapshotError> {
        let len = self.u8(what)? as usize;
        let bytes = self.take(len, what)?;
        let text =
            std::str::from_utf8(bytes).or_else(|_| err(format!("{what}: name is not UTF-8")))?;
        Name::new(text).map_or_else(|| err(format!("{what}: name length {len}")), Ok)
    }
    /// A count of entries of at least `min_entry_len` bytes each, checked against what is left so
    /// that a corrupt count cannot make us reserve absurd memory.
    fn count(&mut self, min_entry_len: usize, what: &str) -> Result<usize, SnapshotError> {
        let count = self.u64(what)?;
        let left = (self.bytes.len() - self.pos) as u64;
        if count.saturating_mul(min_entry_len as u64) > left {
            return err(format!(
                "{what}: count {count} exceeds the remaining {left} bytes"
            ));
        }
        Ok(count as usize)
    }
}

impl Engine {
    /// The canonical binary encoding of the whole state (header + body).
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let body = self.encode_body();
        let mut w = Writer(Vec::with_capacity(HEADER_LEN + body.len()));
        w.0.extend_from_slice(MAGIC);
        w.u32(VERSION);
        w.u64(self.last_seq);
        w.u64(body.len() as u64);
        w.0.extend_from_slice(&body);
        w.0
    }

    /// SHA-256 of the snapshot body: equal states share it. It covers the venue's state, not the
    /// position in the command log (`last_seq` is in the header only).
    pub fn state_hash(&self) -> [u8; 32] {
        Sha256::digest(self.encode_body()).into()
    }

    /// [`Self::state_hash`] as 64 lowercase hex digits.
    pub fn state_hash_hex(&self) -> String {
        self.state_hash()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The state hash of an encoded snapshot, computed from its bytes without decoding it (for
    /// a thread that writes snapshots beside the engine). `None` if the header is malformed.
    pub fn snapshot_state_hash(snapshot: &[u8]) -> Option<[u8; 32]> {
        let body_len = u64::from_le_bytes(snapshot.get(20..28)?.try_into().ok()?);
        let body = snapshot.get(HEADER_LEN..)?;
        if snapshot.get(..8)? != MAGIC || body.len() as u64 != body_len {
            return None;
        }
        Some(Sha256::digest(body).into())
    }

    fn encode_body(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(
            64 + self.orders.live() * 34 + self.accounts.len() * 40,
        ));
        w.i64(self.now);
        w.u64(self.currencies.len() as u64);
        for c in &self.currencies {
            w.name(c.name);
            w.i64(c.deposits);
            w.i64(c.withdrawals);
            w.i64(c.fees);
            w.i64(c.insurance);
        }
        w.u64(self.symbols.len() as u64);
        for s in &self.symbols {
            w.name(s.spec.symbol);
            w.name(s.spec.base);
            w.name(s.spec.quote);
            w.i64(s.spec.base_scale);
            w.i64(s.spec.quote_scale);
            w.i64(s.spec.maker_fee);
            w.i64(s.spec.taker_fee);
            w.i64(s.spec.band_bps);
            w.i64(s.spec.day_end);
            match s.future.as_deref() {
                None => w.u8(0),
                Some(f) => {
                    w.u8(1);
                    w.i64(f.initial_margin);
                    w.i64(f.maintenance_margin);
                    w.i64(f.mark);
                }
            }
            w.i64(s.last_trade);
            w.i64(s.reference);
        }
        let mut accounts: Vec<u32> = (0..self.accounts.len() as u32).collect();
        accounts.sort_unstable_by_key(|&a| self.accounts.user(a));
        w.u64(accounts.len() as u64);
        for a in accounts {
            let mut balances: Vec<_> = self
                .accounts
                .balances(a)
                .filter(|(_, b)| b.available != 0 || b.held != 0)
                .collect();
            balances.sort_unstable_by_key(|&(currency, _)| currency);
            w.i64(self.accounts.user(a));
            w.u32(balances.len() as u32);
            for (currency, b) in balances {
                w.u32(currency.0);
                w.i64(b.available);
                w.i64(b.held);
            }
        }
        // Positions (docs/snapshot-format.md, section 2b): by user id, then symbol id.
        let mut positions: Vec<(i64, u32, i64, i64)> = self
            .position_entries()
            .map(|(account, s, p)| (self.accounts.user(account), s, p.lots, p.cost))
            .collect();
        positions.sort_unstable();
        w.u64(positions.len() as u64);
        for (user, symbol, lots, cost) in positions {
            w.i64(user);
            w.u32(symbol);
            w.i64(lots);
            w.i64(cost);
        }
        w.i64(self.order_id_window);
        let mut recent: Vec<(i64, i64, i64)> = self.recent_ids.iter().copied().collect();
        recent.sort_unstable();
        w.u64(recent.len() as u64);
        for (ended_at, user, order) in recent {
            w.i64(ended_at);
            w.i64(user);
            w.i64(order);
        }
        let suspended = self.suspended_users();
        w.u64(suspended.len() as u64);
        for user in suspended {
            w.i64(user);
        }
        let mut txs: Vec<i64> = self.txs.iter().copied().collect();
        txs.sort_unstable();
        w.u64(txs.len() as u64);
        for tx in txs {
            w.i64(tx);
        }
        for id in 0..self.symbols.len() {
            let (bids, asks) = self.resting_orders(crate::SymbolId(id as u32));
            for side in [bids, asks] {
                w.u64(side.len() as u64);
                for o in side {
                    let idx = self
                        .find_order(o.user, o.order)
                        .expect("a listed order is live");
                    let node = self.orders.get(idx);
                    w.i64(o.user);
                    w.i64(o.order);
                    w.i64(o.price);
                    // What the level holds of it: an iceberg's shown slice (section 6 adds
                    // its hidden part).
                    w.i64(node.remaining);
                    w.i64(self.order_filled(idx));
                    w.u8(node.stp.code());
                    w.u8(node.post_only as u8);
                    let terms = self.order_info[idx as usize].terms;
                    w.u8(terms.tif.code());
                    w.i64(terms.expire_ts);
                }
            }
        }
        self.encode_stops_and_icebergs(&mut w);
        // Phases (docs/rules.md, "Trading phases, halts and auctions"): per symbol, by id. (The
        // band, the reference and the last price are with each symbol above.)
        for s in &self.symbols {
            w.u8(s.controls.phase().code());
        }
        w.0
    }

    /// Section 6 (docs/snapshot-format.md): per symbol its icebergs' hidden parts and its
    /// pending stops.
    fn encode_stops_and_icebergs(&self, w: &mut Writer) {
        let mut pending = Vec::new();
        for id in 0..self.symbols.len() {
            let symbol = crate::SymbolId(id as u32);
            let (bids, asks) = self.resting_orders(symbol);
            let icebergs: Vec<_> = bids
                .iter()
                .chain(&asks)
                .filter_map(|o| {
                    let idx = self.find_order(o.user, o.order).expect("live");
                    let display = self.display_of(idx);
                    (display > 0).then_some((o.user, o.order, display, o.remaining))
                })
                .collect();
            w.u64(icebergs.len() as u64);
            for (user, order, display, remaining) in icebergs {
                w.i64(user);
                w.i64(order);
                w.i64(display);
                w.i64(remaining);
            }
            pending.clear();
            self.pending_stops(symbol, &mut pending);
            w.u64(pending.len() as u64);
            for stop in &pending {
                let idx = self.find_order(stop.user, stop.order).expect("live");
                let node = self.orders.get(idx);
                let (stop_limit, tif) = self.stop_terms(idx);
                w.i64(stop.user);
                w.i64(stop.order);
                w.u8(stop.side.code());
                w.i64(stop.stop_price);
                w.i64(stop.price);
                w.i64(stop.remaining);
                w.u8(node.stp.code());
                w.u8(stop_limit as u8);
                w.u8(tif.code());
                w.i64(self.order_info[idx as usize].terms.expire_ts);
            }
        }
    }

    /// Rebuilds an engine from [`Self::encode_snapshot`] output, validating everything.
    pub fn decode_snapshot(bytes: &[u8], config: EngineConfig) -> Result<Engine, SnapshotError> {
        let mut r = Reader { bytes, pos: 0 };
        if r.take(8, "magic")? != MAGIC {
            return err("not a Rialto snapshot (bad magic)");
        }
        let version = r.u32("version")?;
        if version < OLDEST_VERSION {
            // Versions 1 and 2 lack part of the rulebook's state (the venue clock, phases, bands,
            // stops...): guessing it would give this replica a state no other has. The journal
            // has what is missing.
            return err(format!(
                "version {version} predates part of the rulebook's state; recover from the \
                 journal instead"
            ));
        }
        if version > VERSION {
            return err(format!("unsupported version {version}"));
        }
        let last_seq = r.u64("last_seq")?;
        let body_len = r.u64("body length")?;
        if body_len != (bytes.len() - HEADER_LEN) as u64 {
            return err(format!(
                "body length {body_len} but {} bytes follow the header",
                bytes.len() - HEADER_LEN
            ));
        }
        let mut engine = Engine::new(config);
        let outer = DECODING.with(|d| d.replace(true));
        let decoded = decode_body(&mut r, &mut engine, version);
        DECODING.with(|d| d.set(outer));
        decoded?;
        // After the body: rebuilding symbols and users goes through `apply`, which moves it.
        engine.last_seq = last_seq;
        if r.pos != bytes.len() {
            return err(format!("{} trailing bytes", bytes.len() - r.pos));
        }
        Ok(engine)
    }
}

/// A snapshot that holds more than the engine's capacities is refused with a clear error: the
/// engine never grows past what it reserved at start (docs/rules.md, "Limits").
fn fits(count: usize, capacity: u32, what: &str, setting: &str) -> Result<(), SnapshotError> {
    if count > capacity as usize {
        return err(format!(
            "the snapshot holds {count} {what}, more than this engine's capacity of {capacity} \
             (raise engine.{setting})"
        ));
    }
    Ok(())
}

/// Whether this thread is decoding a snapshot (whose rebuild goes through `apply`).
#[cfg(debug_assertions)]
pub(crate) fn decoding() -> bool {
    DECODING.with(Cell::get)
}

thread_local! {
    /// Set while a snapshot is decoded: the decoder rebuilds symbols and users through
    /// `apply` before it restores the balances, so its commands are not checked one by one
    /// (the decoder checks the whole state at its end).
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// [`fits`] for `more` live orders beside those restored so far.
fn fits_orders(engine: &Engine, more: usize) -> Result<(), SnapshotError> {
    let resting = engine.orders.live() + more;
    let capacity = engine.config.max_resting_orders;
    fits(resting, capacity, "resting orders", "max_resting_orders")
}

fn decode_body(r: &mut Reader<'_>, engine: &mut Engine, version: u32) -> Result<(), SnapshotError> {
    let futures = version >= 4;
    let now = r.i64("now")?;
    let currencies = r.count(25, "currencies")?;
    if currencies > crate::account::MAX_CURRENCIES {
        return err(format!(
            "{currencies} currencies, more than a venue can have"
        ));
    }
    let mut totals = Vec::with_capacity(currencies);
    for _ in 0..currencies {
        let name = r.name("currency name")?;
        if engine.currency_ids.contains_key(&name) {
            return err(format!("currency {name} listed twice"));
        }
        engine.currency_id_or_register(name);
        let (deposits, withdrawals, fees) =
            (r.i64("deposits")?, r.i64("withdrawals")?, r.i64("fees")?);
        // The fund may be negative (the venue's loss).
        let insurance = if futures { r.i64("insurance")? } else { 0 };
        if deposits < 0 || withdrawals < 0 || fees < 0 {
            return err(format!("currency {name}: negative total"));
        }
        totals.push((deposits, withdrawals, fees, insurance));
    }
    for (c, (deposits, withdrawals, fees, insurance)) in engine.currencies.iter_mut().zip(totals) {
        (c.deposits, c.withdrawals, c.fees, c.insurance) = (deposits, withdrawals, fees, insurance);
    }

    let symbols = r.count(35, "symbols")?;
    fits(symbols, engine.config.max_symbols, "symbols", "max_symbols")?;
    for _ in 0..symbols {
        let mut spec = SymbolSpec {
            symbol: r.name("symbol name")?,
            base: r.name("base currency")?,
            quote: r.name("quote currency")?,
            base_scale: r.i64("base_scale")?,
            quote_scale: r.i64("quote_scale")?,
            maker_fee: r.i64("maker_fee")?,
            taker_fee: r.i64("taker_fee")?,
            band_bps: r.i64("band_bps")?,
            day_end: r.i64("day_end")?,
            kind: SymbolSpec::SPOT,
        };
        if futures {
            spec.kind = match r.u8("symbol type")? {
                0 => SymbolSpec::SPOT,
                1 => Some(crate::command::SymbolKind::Future {
                    initial_margin: r.i64("initial_margin")?,
                    maintenance_margin: r.i64("maintenance_margin")?,
                    mark_price: r.i64("mark_price")?,
                }),
                other => return err(format!("symbol {}: type {other}", spec.symbol)),
            };
        }
        let is_future = spec.kind != SymbolSpec::SPOT;
        let (last_trade, reference) = (r.i64("last trade")?, r.i64("reference price")?);
        if last_trade < 0 || reference < 0 {
            return err(format!("symbol {}: negative price", spec.symbol));
        }
        if !(is_future || engine.currency_ids.contains_key(&spec.base))
            || !engine.currency_ids.contains_key(&spec.quote)
        {
            return err(format!("symbol {}: unknown currency", spec.symbol));
        }
        let before = engine.currencies.len();
        if let Err(reason) = engine.apply(0, 0, &crate::Command::AddSymbol(Box::new(spec)), &mut ())
        {
            return err(format!("symbol {}: {reason}", spec.symbol));
        }
        debug_assert_eq!(before, engine.currencies.len());
        let state = engine.symbols.last_mut().expect("just added");
        (state.last_trade, state.reference) = (last_trade, reference);
    }

    let users = r.count(12, "users")?;
    fits(users, engine.config.max_users, "users", "max_users")?;
    let mut previous = None;
    for _ in 0..users {
        let user = r.i64("user id")?;
        if previous.is_some_and(|p| p >= user) {
            return err(format!("user {user} out of order or repeated"));
        }
        previous = Some(user);
        engine
            .apply(0, 0, &crate::Command::AddUser { user }, &mut ())
            .or_else(|reason| err(format!("user {user}: {reason}")))?;
        let account = engine.account_of(user).expect("just added");
        let balances = r.u32("balance count")?;
        let mut previous_currency = None;
        for _ in 0..balances {
            let currency = r.u32("balance currency")?;
            let (available, held) = (r.i64("available")?, r.i64("held")?);
            if currency as usize >= engine.currencies.len()
                || previous_currency.is_some_and(|p| p >= currency)
            {
                return err(format!("user {user}: bad currency index {currency}"));
            }
            previous_currency = Some(currency);
            // `available` may be negative in a currency that backs futures (docs/rules.md).
            if (available < 0 && !futures) || held < 0 || (available == 0 && held == 0) {
                return err(format!(
                    "user {user}: balance ({available}, {held}) not allowed"
                ));
            }
            *engine.accounts.balance_mut(account, CurrencyId(currency)) =
                crate::account::Amounts { available, held };
        }
    }

    if futures {
        decode_positions(r, engine)?;
    }
    // Before any order: with funds conserved, every hold and every level total is bounded by a
    // currency's deposits, which fit in an i64, so restoring orders cannot overflow.
    check_conservation(engine)?;

    let window = r.i64("order_id_window")?;
    if window < 0 {
        return err(format!("order_id_window {window}"));
    }
    engine.order_id_window = window;
    let recent = r.count(24, "recent order ids")?;
    fits(
        recent,
        engine.config.max_window_ids,
        "recent order ids",
        "max_window_ids",
    )?;
    let mut previous_recent = None;
    for _ in 0..recent {
        let entry = (r.i64("ended_at")?, r.i64("user")?, r.i64("order")?);
        let (ended_at, user, order) = entry;
        if previous_recent.is_some_and(|p| p >= entry) {
            return err(format!(
                "recent id ({user}, {order}) out of order or repeated"
            ));
        }
        previous_recent = Some(entry);
        // Only ids still inside the window are kept, and they ended at a venue time.
        if ended_at < 0 || ended_at > now || now - ended_at >= window {
            return err(format!("recent id ({user}, {order}): ended at {ended_at}"));
        }
        if !engine.recent_id_set.insert((user, order)) {
            return err(format!("recent id ({user}, {order}) listed twice"));
        }
        engine.recent_ids.push_back(entry);
    }

    let suspended = r.count(8, "suspended users")?;
    let mut previous_suspended = None;
    for _ in 0..suspended {
        let user = r.i64("suspended user")?;
        if previous_suspended.is_some_and(|p| p >= user) {
            return err(format!("suspended user {user} out of order or repeated"));
        }
        previous_suspended = Some(user);
        let Some(account) = engine.account_of(user) else {
            return err(format!("suspended user {user}: unknown user"));
        };
        engine.accounts.get_mut(account).suspended = true;
    }

    let txs = r.count(8, "tx ids")?;
    fits(txs, engine.config.max_tx_ids, "tx ids", "max_tx_ids")?;
    let mut previous_tx = None;
    for _ in 0..txs {
        let tx = r.i64("tx id")?;
        if previous_tx.is_some_and(|p| p >= tx) {
            return err(format!("tx {tx} out of order or repeated"));
        }
        previous_tx = Some(tx);
        engine.txs.insert(tx);
    }

    // What each user's resting orders hold, by (account, currency), summed as they are read.
    let mut needs: BTreeMap<(u32, u32), i64> = BTreeMap::new();
    for symbol in 0..engine.symbols.len() {
        for side in [Side::Buy, Side::Sell] {
            let orders = r.count(51, "orders")?;
            fits_orders(engine, orders)?;
            let mut previous_price: Option<i64> = None;
            for _ in 0..orders {
                let (user, order) = (r.i64("order user")?, r.i64("order id")?);
                let (price, remaining) = (r.i64("order price")?, r.i64("order remaining")?);
                let filled = r.i64("order filled")?;
                let stp = Stp::from_code(r.u8("order stp")?);
                let post_only = r.u8("order post_only")?;
                let tif = Tif::from_code(r.u8("order tif")?);
                let expire_ts = r.i64("order expire_ts")?;
                let what = format!("order ({user}, {order})");
                // A resting order rests until cancelled or its expiry, which lies ahead: an
                // order whose time had come was expired by the command that moved the clock.
                let terms = match (tif, expire_ts) {
                    (Some(Tif::Gtc), 0) => OrderTerms::GTC,
                    (Some(tif @ (Tif::Gtd | Tif::Day)), ts) if ts > now => {
                        OrderTerms { expire_ts: ts, tif }
                    }
                    _ => return err(format!("{what}: tif {tif:?} expiring at {expire_ts}")),
                };
                let Some(account) = engine.account_of(user) else {
                    return err(format!("{what}: unknown user"));
                };
                let (Some(stp), true) = (stp, post_only <= 1) else {
                    return err(format!("{what}: bad flags"));
                };
                if price <= 0 || remaining <= 0 {
                    return err(format!("{what}: price {price}, remaining {remaining}"));
                }
                if filled < 0 || filled.checked_add(remaining).is_none() {
                    return err(format!("{what}: filled {filled}"));
                }
                let worse_than_previous = match side {
                    Side::Buy => previous_price.is_some_and(|p| price > p),
                    Side::Sell => previous_price.is_some_and(|p| price < p),
                };
                if worse_than_previous {
                    return err(format!("{what}: out of priority order"));
                }
                previous_price = Some(price);
                if engine.find_order(user, order).is_some() {
                    return err(format!("{what}: listed twice"));
                }
                if engine.recent_id_set.contains(&(user, order)) {
                    return err(format!("{what}: its id is also a recently ended order's"));
                }
                let Some((currency, hold)) =
                    engine.resting_order_hold(symbol, side, price, remaining)
                else {
                    return err(format!(
                        "{what}: its hold overflows or its price is below the fee"
                    ));
                };
                let held = engine.accounts.balance(account, currency).held;
                let need = needs.entry((account, currency.0)).or_insert(0);
                match need.checked_add(hold) {
                    Some(total) if total <= held => *need = total,
                    _ => return err(format!("{what}: orders need more than the user holds")),
                }
                engine.restore_resting(
                    symbol,
                    account,
                    order,
                    side,
                    price,
                    remaining,
                    filled,
                    stp,
                    post_only == 1,
                    terms,
                );
            }
        }
    }
    decode_stops_and_icebergs(r, engine, &mut needs, now)?;
    decode_phases(r, engine)?;
    check_invariants(engine, needs)?;
    engine.flag_futures_orders();
    // Last: rebuilding the state through `apply` above must not move the clock.
    engine.now = now;
    engine.refresh_housekeeping();
    Ok(())
}

/// Section 6: icebergs' hidden parts and pending stops (their holds added to
/// `needs`).
fn decode_stops_and_icebergs(
    r: &mut Reader<'_>,
    engine: &mut Engine,
    needs: &mut BTreeMap<(u32, u32), i64>,
    now: i64,
) -> Result<(), SnapshotError> {
    let mut add_need = |engine: &Engine, account: u32, hold: Option<(CurrencyId, i64)>, what| {
        let Some((currency, hold)) = hold else {
            return err(format!(
                "{what}: its hold overflows or its price is below the fee"
            ));
        };
        let held = engine.accounts.balance(account, currency).held;
        let need = needs.entry((account, currency.0)).or_insert(0);
        match need.checked_add(hold) {
            Some(total) if total <= held => {
                *need = total;
                Ok(())
            }
            _ => err(format!("{what}: orders need more than the user holds")),
        }
    };
    for symbol in 0..engine.symbols.len() {
        let icebergs = r.count(32, "icebergs")?;
        for _ in 0..icebergs {
            let (user, order) = (r.i64("iceberg user")?, r.i64("iceberg order")?);
            let (display, remaining) = (r.i64("display_qty")?, r.i64("iceberg remaining")?);
            let what = format!("iceberg ({user}, {order})");
            let idx = engine
                .find_order(user, order)
                .filter(|&idx| engine.orders.get(idx).symbol as usize == symbol)
                .ok_or_else(|| SnapshotError(format!("{what}: not a resting order here")))?;
            let node = *engine.orders.get(idx);
            if engine.display_of(idx) != 0
                || display <= 0
                || node.remaining > display
                || remaining < node.remaining
                || (remaining - 1) / display >= crate::MAX_ICEBERG_SLICES
            {
                return err(format!("{what}: display {display}, remaining {remaining}"));
            }
            let hidden = remaining - node.remaining;
            let hold = engine.resting_order_hold(symbol, node.side, node.price, hidden);
            add_need(engine, node.account, hold, what)?;
            engine.restore_iceberg(idx, display, hidden);
        }
        let stops = r.count(51, "pending stops")?;
        fits_orders(engine, stops)?;
        let mut previous: Option<(Side, i64)> = None;
        for _ in 0..stops {
            let (user, order) = (r.i64("stop user")?, r.i64("stop order")?);
            let side = Side::from_code(r.u8("stop side")?);
            let (stop_price, price) = (r.i64("stop price")?, r.i64("stop limit price")?);
            let remaining = r.i64("stop remaining")?;
            let stp = Stp::from_code(r.u8("stop stp")?);
            let stop_limit = r.u8("stop type")?;
            let tif = crate::types::Tif::from_code(r.u8("stop tif")?);
            let expire_ts = r.i64("stop expire_ts")?;
            let what = format!("pending stop ({user}, {order})");
            let (Some(side), Some(stp), Some(tif), true) = (side, stp, tif, stop_limit <= 1) else {
                return err(format!("{what}: bad flags"));
            };
            let Some(account) = engine.account_of(user) else {
                return err(format!("{what}: unknown user"));
            };
            let in_order = match previous {
                None => true,
                Some((Side::Buy, p)) => side == Side::Sell || stop_price >= p,
                Some((Side::Sell, p)) => side == Side::Sell && stop_price <= p,
            };
            previous = Some((side, stop_price));
            let tif_ok = match stop_limit {
                0 => matches!(tif, crate::types::Tif::Ioc | crate::types::Tif::Fok),
                _ => true,
            };
            // As a resting order's: only GTD and DAY expire, and not before now.
            let expiry_ok = match tif {
                Tif::Gtd | Tif::Day => expire_ts > now,
                _ => expire_ts == 0,
            };
            if !in_order
                || stop_price <= 0
                || remaining <= 0
                || price < 0
                || !tif_ok
                || !expiry_ok
                || (price == 0 && (stop_limit == 1 || side == Side::Buy))
                || engine.would_trigger(symbol, side, stop_price)
            {
                return err(format!(
                    "{what}: stop price {stop_price}, price {price}, qty {remaining}"
                ));
            }
            if engine.find_order(user, order).is_some()
                || engine.recent_id_set.contains(&(user, order))
            {
                return err(format!("{what}: its id is taken"));
            }
            let hold = if price == 0 {
                remaining
                    .checked_mul(engine.symbols[symbol].terms.base_scale)
                    .map(|h| (engine.symbols[symbol].terms.base, h))
            } else {
                engine.resting_order_hold(symbol, side, price, remaining)
            };
            add_need(engine, account, hold, what)?;
            engine.restore_stop(
                symbol,
                account,
                order,
                side,
                (price > 0).then_some(price),
                remaining,
                stp,
                stop_price,
                stop_limit == 1,
                tif,
                expire_ts,
            );
        }
    }
    Ok(())
}

/// The section of phases: per symbol, its phase. Then each symbol's band edges are worked out
/// from its band and reference price (read with the symbol).
fn decode_phases(r: &mut Reader<'_>, engine: &mut Engine) -> Result<(), SnapshotError> {
    for sym in &mut engine.symbols {
        let Some(phase) = crate::types::Phase::from_code(r.u8("phase")?) else {
            return err(format!("symbol {}: bad phase", sym.spec.symbol));
        };
        sym.controls.set_phase(phase);
        let reference = sym.reference;
        sym.set_reference(reference);
    }
    Ok(())
}

/// Books are uncrossed (but in an auction, or a halt or close that followed one), no suspended
/// user has a live order, and every user's `held` is exactly what its resting orders need.
fn check_invariants(
    engine: &Engine,
    mut needs: BTreeMap<(u32, u32), i64>,
) -> Result<(), SnapshotError> {
    for (symbol, sym) in engine.symbols.iter().enumerate() {
        if let (Some(bid), Some(ask)) = (
            sym.side(Side::Buy).best_price(),
            sym.side(Side::Sell).best_price(),
        ) && bid >= ask
            && sym.controls.phase() == crate::types::Phase::Continuous
        {
            return err(format!(
                "book {} is crossed",
                engine.symbols[symbol].spec.symbol
            ));
        }
    }
    // Suspension cancels all of a user's orders and refuses new ones.
    if let Some(user) = engine.suspended_users().into_iter().find(|&user| {
        engine
            .account_of(user)
            .is_some_and(|account| engine.accounts.get(account).open_orders > 0)
    }) {
        return err(format!("suspended user {user} has live orders"));
    }
    for (account, currency, b) in engine.accounts.all_balances() {
        let need = needs.remove(&(account, currency.0)).unwrap_or(0);
        if need != b.held {
            return err(format!(
                "user {}: held {} but orders need {need}",
                engine.accounts.user(account),
                b.held
            ));
        }
    }
    // Anything left is a need with no balance entry at all; needs are only recorded when they fit
    // under a held balance, so this cannot happen, but a corrupt snapshot must never pass.
    if let Some(((account, _), need)) = needs.into_iter().find(|(_, need)| *need != 0) {
        let user = engine.accounts.user(account);
        return err(format!(
            "user {user}: orders need {need} but nothing is held"
        ));
    }
    Ok(())
}

/// Per currency: the sum over users of available + held, plus fees and the insurance fund,
/// minus the cost of the positions in futures quoted in it, equals deposits minus withdrawals.
fn check_conservation(engine: &Engine) -> Result<(), SnapshotError> {
    let mut sums = vec![0i128; engine.currencies.len()];
    for (_, currency, b) in engine.accounts.all_balances() {
        sums[currency.0 as usize] += b.available as i128 + b.held as i128;
    }
    for (_, s, p) in engine.position_entries() {
        sums[engine.symbols[s as usize].terms.quote.0 as usize] -= p.cost as i128;
    }
    for (c, sum) in engine.currencies.iter().zip(sums) {
        let total = sum + c.fees as i128 + c.insurance as i128;
        if total != c.deposits as i128 - c.withdrawals as i128 {
            return err(format!("currency {}: funds not conserved", c.name));
        }
    }
    Ok(())
}

/// The positions (version 4): by user id then symbol id, each in a future, not flat, a cost of
/// the lots' sign; then the liquidation index is rebuilt from them and the balances.
fn decode_positions(r: &mut Reader<'_>, engine: &mut Engine) -> Result<(), SnapshotError> {
    let count = r.count(28, "positions")?;
    let mut previous = None;
    for _ in 0..count {
        let (user, symbol) = (r.i64("position user")?, r.u32("position symbol")?);
        let (lots, cost) = (r.i64("lots")?, r.i64("cost")?);
        if previous.is_some_and(|p| p >= (user, symbol)) {
            return err(format!(
                "position ({user}, {symbol}) out of order or repeated"
            ));
        }
        previous = Some((user, symbol));
        let Some(account) = engine.account_of(user) else {
            return err(format!("position of unknown user {user}"));
        };
        if engine
            .symbols
            .get(symbol as usize)
            .is_none_or(|s| s.future.is_none())
        {
            return err(format!(
                "user {user}: position in symbol {symbol}, not a future"
            ));
        }
        if lots == 0 || (cost != 0 && (cost > 0) != (lots > 0)) {
            return err(format!(
                "user {user}: position ({lots}, {cost}) not allowed"
            ));
        }
        let oi = engine.future_book(symbol as usize).open_interest;
        if oi.checked_add(lots.max(0)).is_none() {
            return err(format!("symbol {symbol}: open interest overflows"));
        }
        engine.restore_position(account, symbol, lots, cost);
    }
    let mut net = vec![0i128; engine.symbols.len()];
    for (_, s, p) in engine.position_entries() {
        net[s as usize] += p.lots as i128;
    }
    if let Some(s) = net.iter().position(|&n| n != 0) {
        return err(format!("symbol {s}: positions do not net to zero"));
    }
    engine.rebuild_futures_index();
    Ok(())
}
