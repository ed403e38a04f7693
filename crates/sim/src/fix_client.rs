//! Simulated FIX traders: two venue users that trade through the server's real FIX gateway
//! state machine (server/src/fix, `FixAgent`) over simulated byte pipes, as `net.rs` does for
//! the binary gateway. Each logs on (FIX 4.4, with its user's password), sends NewOrderSingle,
//! OrderCancelRequest and OrderCancelReplaceRequest written with the FIX crate's encoder, and
//! keeps its view of its open orders from nothing but the ExecutionReports it decodes. Each
//! also subscribes to market data (MarketDataRequest, V, at a depth drawn from the seed) and
//! rebuilds both symbols' L2 books from the snapshots (W) and incremental refreshes (X) it
//! decodes; the gateway is fed by the node's market data replica, as `rialto serve` feeds it
//! from the market data thread (server/src/fix/market_data.rs, `Intake`). The seed decides
//! how many bytes each pipe moves when (partial writes included).
//!
//! After a crash the gateway starts over with new session stores (FIX session recovery across
//! a crash is not simulated yet, docs/simulation.md): the traders log on afresh, take the
//! engine's open orders as they are, and leave the orders from before the crash out of their
//! view (nothing of the new gateway knows them).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rialto_core::{Command, Engine, SymbolId, UserId};
use rialto_fix::decimal::Decimal;
use rialto_fix::{Frame, MessageWriter, next_frame, tags};
use rialto_server::auth::Credentials;
use rialto_server::feed::MarketData;
use rialto_server::fix::instruments::Instruments;
use rialto_server::fix::market_data::{Intake, MAX_DEPTH};
use rialto_server::fix::{
    FIX_SERVICE_SESSION, FIX_SESSION_BASE, FixAgent, FixConfig, RequestSink, SessionBinding,
};
use rialto_server::pipeline::{Outbound, Request, SessionId, Target};
use rialto_server::ring::Ring;

use crate::rng::Rng;

use crate::net::part;

/// The FIX traders' users: funded in the venue's set-up ([`genesis_commands`]), apart from the
/// binary traders' (the demo's users 1 to 8).
pub const FIX_USERS: [UserId; 2] = [21, 22];
const COMP_IDS: [&str; 2] = ["SIMFIX1", "SIMFIX2"];
/// What a trader may have written and the gateway not yet read.
const MAX_UNREAD_BYTES: usize = 16 * 1024;
/// Prices (in cents) and quantities (in lots of 0.001) as the binary traders use them.
const PRICE_MIN: i64 = 49_500;
const PRICE_MAX: i64 = 50_500;
/// The traders' HeartBtInt, in seconds: short, so that their quiet spells (up to 4 s) bring
/// the gateway's heartbeats and TestRequests, which they answer.
const HEART_BT_INT: &str = "1";
/// The chance per turn to act that a trader falls quiet instead, in millionths.
const QUIET_SPELL_PPM: u64 = 20_000;
/// Connection ids of the FIX side (apart from the binary sessions').
const FIRST_CONN: SessionId = 1 << 40;
/// The symbols the traders trade and watch.
const SYMBOLS: [&str; 2] = ["BTC-USD", "ETH-USD"];
/// The MarketDepth a trader asks for is one of these (0: the full book, as far as the
/// gateway sends: `MAX_DEPTH` levels a side).
const DEPTHS: [usize; 4] = [0, 1, 5, 10];

/// The FIX users' accounts, funded like the demo's users.
pub fn genesis_commands() -> Vec<Command> {
    FIX_USERS
        .into_iter()
        .flat_map(rialto_server::demo::funded_user)
        .collect()
}

/// The FIX gateway's own intake ring (into the journal stage) as its sink.
struct Inbound<'a>(&'a Ring<Request>);

impl RequestSink for Inbound<'_> {
    fn room(&self) -> usize {
        self.0.capacity() - self.0.len()
    }

    fn offer(&mut self, request: Request) -> Result<(), Request> {
        self.0.try_push(request)
    }
}

/// One symbol's L2 book as a trader rebuilds it from W and X: price → quantity, in ticks
/// (cents) and lots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct L2View {
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
}

impl L2View {
    fn side(&mut self, entry_type: &[u8]) -> Option<&mut BTreeMap<i64, i64>> {
        match entry_type {
            b"0" => Some(&mut self.bids),
            b"1" => Some(&mut self.asks),
            _ => None, // a trade
        }
    }

    /// The best `depth` levels of each side.
    fn best(&self, depth: usize) -> L2View {
        L2View {
            bids: self
                .bids
                .iter()
                .rev()
                .take(depth)
                .map(|(&p, &q)| (p, q))
                .collect(),
            asks: self
                .asks
                .iter()
                .take(depth)
                .map(|(&p, &q)| (p, q))
                .collect(),
        }
    }
}

/// One order as the trader's ExecutionReports tell it.
#[derive(Clone, Debug)]
struct OrderView {
    /// The ClOrdID a cancel or replace names as OrigClOrdID.
    cl_ord_id: String,
    symbol: String,
    side: &'static str,
    /// The engine's id (SecondaryOrderID), which the checker compares with the engine's.
    engine_id: i64,
    leaves_lots: i64,
}

struct FixTrader {
    user: UserId,
    comp_id: &'static str,
    conn: SessionId,
    logged_on: bool,
    /// The MsgSeqNum of our next message, and the one we expect next.
    seq_out: u64,
    seq_in: u64,
    up: Vec<u8>,
    down: Vec<u8>,
    next_cl_ord: u64,
    /// ClOrdIDs sent and not yet answered (a report or a cancel reject naming them).
    pending: BTreeSet<String>,
    /// Open orders by OrderID (37), as the reports tell.
    orders: BTreeMap<String, OrderView>,
    /// Engine ids of orders from before the last crash, left out of the view.
    legacy: BTreeSet<i64>,
    /// The trader sends nothing of its own before this time (it still answers TestRequests).
    quiet_until_ns: i64,
    /// The MarketDepth it subscribes with.
    md_depth: usize,
    /// The books its W and X messages built, by symbol (one from its first W on).
    books: BTreeMap<String, L2View>,
}

/// The FIX gateway of the simulated node and its traders.
pub struct FixSide {
    agent: FixAgent,
    /// The node's market data (its replica's feed) and the receiver that hands its batches to
    /// the gateway.
    feed: Arc<MarketData>,
    intake: Intake,
    /// [`SYMBOLS`]' ids.
    symbol_ids: Vec<SymbolId>,
    traders: Vec<FixTrader>,
    rng: Rng,
    incarnation: u32,
    credentials: Arc<Credentials>,
    next_conn: SessionId,
    /// FIX requests the traders sent (NewOrderSingle, cancels, replaces).
    pub commands: u64,
    /// Times the traders' views were compared with the engine's.
    pub view_checks: u64,
    /// Times the traders' rebuilt books were compared with the market data replica's.
    pub book_checks: u64,
}

fn agent(
    root: &Path,
    incarnation: u32,
    credentials: &Arc<Credentials>,
    engine: &Engine,
    now_ns: i64,
    anchor: Instant,
) -> Result<FixAgent, String> {
    let data_dir = root.join(format!("node-{incarnation}"));
    std::fs::create_dir_all(data_dir.join("fix"))
        .map_err(|e| format!("cannot make the FIX gateway's directory: {e}"))?;
    let sessions = COMP_IDS
        .iter()
        .zip(FIX_USERS)
        .enumerate()
        .map(|(number, (comp_id, user))| {
            let binding = SessionBinding {
                user,
                cancel_on_disconnect: false,
                number: number as u64,
            };
            (comp_id.to_string(), binding)
        })
        .collect::<HashMap<_, _>>();
    let config = FixConfig {
        listen: "127.0.0.1:0".parse().expect("an address"),
        comp_id: "RIALTO".into(),
        sessions,
        max_connections: 8,
        max_pending_logons: 8,
        max_pending_logons_per_address: 8,
        logon_timeout: Duration::from_secs(30),
        message_log_max_bytes: 1 << 20,
        message_log_files: 1,
        max_message_bytes: 4096,
        max_clock_skew_ns: 120_000_000_000,
        allow_user_defined_tags: false,
        max_msgs_per_sec: 0,
        burst: 1,
        message_log: false,
        tls: None,
        data_dir,
        mirror: None,
    };
    let settings = rialto_server::config::ServerConfig::default().instruments;
    let mut instruments = Instruments::new(&settings);
    instruments.refresh(&engine.symbols_by_name());
    Ok(FixAgent::new(
        config,
        credentials.clone(),
        instruments,
        now_ns,
        anchor,
    ))
}

impl FixSide {
    /// The FIX gateway of a node that has just started on `engine`, fed by `feed` (the node's
    /// market data replica's), and its traders, who log on to it (afresh after a crash: see
    /// the module's documentation).
    pub fn start(
        previous: Option<FixSide>,
        rng: &mut Rng,
        root: &Path,
        engine: &Engine,
        feed: Arc<MarketData>,
        now_ns: i64,
        anchor: Instant,
    ) -> Result<FixSide, String> {
        let credentials = Arc::new(Credentials::from_key([7; 32]));
        let mut side = match previous {
            Some(mut side) => {
                side.incarnation += 1;
                side.agent = agent(root, side.incarnation, &credentials, engine, now_ns, anchor)?;
                side.feed = feed;
                side.intake = Intake::new();
                side
            }
            None => FixSide {
                agent: agent(root, 0, &credentials, engine, now_ns, anchor)?,
                feed,
                intake: Intake::new(),
                symbol_ids: SYMBOLS.iter().map(|name| engine.symbol_id(name)).collect(),
                traders: FIX_USERS
                    .iter()
                    .zip(COMP_IDS)
                    .map(|(&user, comp_id)| FixTrader {
                        user,
                        comp_id,
                        conn: 0,
                        logged_on: false,
                        seq_out: 1,
                        seq_in: 1,
                        up: Vec::new(),
                        down: Vec::new(),
                        next_cl_ord: 1,
                        pending: BTreeSet::new(),
                        orders: BTreeMap::new(),
                        legacy: BTreeSet::new(),
                        quiet_until_ns: 0,
                        md_depth: DEPTHS[rng.below(DEPTHS.len() as u64) as usize],
                        books: BTreeMap::new(),
                    })
                    .collect(),
                rng: rng.fork(),
                incarnation: 0,
                credentials: credentials.clone(),
                next_conn: FIRST_CONN,
                commands: 0,
                view_checks: 0,
                book_checks: 0,
            },
        };
        for t in &mut side.traders {
            t.conn = side.next_conn;
            side.next_conn += 1;
            t.logged_on = false;
            t.seq_out = 1;
            t.seq_in = 1;
            t.up.clear();
            t.down.clear();
            t.pending.clear();
            t.orders.clear();
            t.books.clear();
            t.legacy = engine
                .user_report(t.user)
                .map(|r| r.orders.iter().map(|o| o.order).collect())
                .unwrap_or_default();
            side.agent
                .open(t.conn, [127, 0, 0, 1].into(), now_ns)
                .map_or(Ok(()), |_| Err("a FIX connection was evicted"))?;
            let password = side.credentials.user_secret(t.user);
            let user = t.user.to_string();
            let fields = [
                (tags::ENCRYPT_METHOD, "0"),
                (tags::HEART_BT_INT, HEART_BT_INT),
                (tags::USERNAME, user.as_str()),
                (tags::PASSWORD, password.as_str()),
            ];
            t.write("A", now_ns, &fields);
        }
        Ok(side)
    }

    /// Each logged-on trader with no request unanswered may send one: mostly limit orders,
    /// some IOC, cancels and replaces of its open orders. (One at a time: the FIX gateway
    /// takes a message only while its intake ring has room for its follow-ups, so with the
    /// smallest rings its traders wait longest, and the checker compares views only when
    /// every trader is answered.)
    pub fn act(&mut self, now_ns: i64) {
        for t in &mut self.traders {
            let busy = !t.pending.is_empty() || t.up.len() >= MAX_UNREAD_BYTES;
            if !t.logged_on || busy || now_ns < t.quiet_until_ns || !self.rng.chance(400_000) {
                continue;
            }
            if self.rng.chance(QUIET_SPELL_PPM) {
                t.quiet_until_ns = now_ns + self.rng.range(100_000_000, 4_000_000_000);
                continue;
            }
            t.act(&mut self.rng, now_ns);
            self.commands += 1;
        }
    }

    /// One turn of the FIX side of the network: the gateway's timers, part of each trader's
    /// bytes into the gateway, its requests into its intake ring as far as there is room, one
    /// write of its output taken in part, and the traders read what they have. With `all`
    /// every byte moves. Returns the bytes moved; an error for what contradicts FIX.
    pub fn network(
        &mut self,
        inbound: &Ring<Request>,
        now_ns: i64,
        all: bool,
        trace: &mut dyn FnMut(String),
    ) -> Result<usize, String> {
        let mut sink = Inbound(inbound);
        self.agent.push_deferred(&mut sink);
        // The feed's batches and snapshots, then what they changed goes out with the timers.
        self.intake.serve(&self.feed, &mut self.agent, now_ns);
        self.agent.tick(now_ns, &mut sink);
        let mut moved = 0;
        let mut order: Vec<usize> = (0..self.traders.len()).collect();
        if self.rng.below(2) == 0 {
            order.reverse();
        }
        for i in order {
            let t = &mut self.traders[i];
            let n = if all {
                t.up.len()
            } else {
                part(&mut self.rng, t.up.len())
            };
            let taken = self.agent.receive(t.conn, &t.up[..n]);
            t.up.drain(..taken);
            moved += taken;
            self.agent.handle(t.conn, now_ns, &mut sink);
        }
        let mut to_write = Vec::new();
        self.agent.flush(now_ns, &mut to_write);
        for t in &mut self.traders {
            let pending = self.agent.pending_output(t.conn);
            let n = if all {
                pending.len()
            } else {
                part(&mut self.rng, pending.len())
            };
            t.down.extend_from_slice(&pending[..n]);
            self.agent.wrote(t.conn, n);
            moved += n;
            t.read(now_ns, trace)?;
            if self.agent.is_closing(t.conn) {
                return Err(format!(
                    "the FIX gateway closed user {}'s connection",
                    t.user
                ));
            }
        }
        Ok(moved)
    }

    /// An event of the engine stage, as the gateway's `route_outbound` hands it to the FIX
    /// gateway.
    pub fn deliver(&mut self, out: &Outbound, now_ns: i64) {
        match out.target {
            Target::Session(session)
                if session == FIX_SERVICE_SESSION || session >= FIX_SESSION_BASE =>
            {
                self.agent.on_reply(session, &out.event, now_ns)
            }
            Target::User(user) if FIX_USERS.contains(&user) => {
                self.agent.on_user_message(user, &out.event, now_ns)
            }
            Target::Public => self.agent.on_public_message(&out.event, now_ns),
            _ => {}
        }
    }

    /// Every request answered and every byte delivered.
    pub fn quiet(&self) -> bool {
        !self.agent.has_deferred()
            && self
                .traders
                .iter()
                .all(|t| t.logged_on && t.pending.is_empty() && t.up.is_empty())
    }

    /// Each trader's rebuilt L2 books against the market data replica's feed, when the
    /// gateway has been handed every batch the feed sent and each trader has read everything
    /// it was sent: they must be the feed's best `depth` levels of each side, as of the
    /// feed's last sequence number.
    fn check_books(&mut self) -> Result<(), String> {
        if self.intake.has_work(&self.agent) {
            return Ok(());
        }
        let read_all = |t: &FixTrader| {
            t.logged_on
                && t.down.is_empty()
                && t.books.len() == SYMBOLS.len()
                && self.agent.pending_output(t.conn).is_empty()
        };
        if !self.traders.iter().all(read_all) {
            return Ok(());
        }
        let feed = self.feed.feed();
        for t in &self.traders {
            let depth = if t.md_depth == 0 {
                MAX_DEPTH
            } else {
                t.md_depth
            };
            for (name, &id) in SYMBOLS.iter().zip(&self.symbol_ids) {
                let l2 = feed.l2(id, usize::MAX).unwrap_or_default();
                let replica = L2View {
                    bids: l2.bids.into_iter().collect(),
                    asks: l2.asks.into_iter().collect(),
                }
                .best(depth);
                let rebuilt = &t.books[*name];
                if *rebuilt != replica {
                    return Err(format!(
                        "FIX user {}'s {name} book rebuilt from W and X (depth {depth}) {rebuilt:?} \
                         differs from the market data replica's {replica:?} at L2 seq {}",
                        t.user, l2.seq
                    ));
                }
            }
        }
        self.book_checks += 1;
        Ok(())
    }

    /// Each trader's view of its open orders against the engine's (orders from before the last
    /// crash left out), once every request of theirs is answered (the engine has settled and
    /// every byte was delivered: `Sim::check`); and each trader's rebuilt books against the
    /// market data replica's.
    pub fn check(&mut self, engine: &Engine) -> Result<(), String> {
        self.check_books()?;
        if !self.quiet() {
            return Ok(());
        }
        self.view_checks += 1;
        for t in &self.traders {
            let engine_view: BTreeMap<i64, i64> = engine
                .user_report(t.user)
                .map(|r| {
                    r.orders
                        .iter()
                        .filter(|o| !t.legacy.contains(&o.order))
                        .map(|o| (o.order, o.remaining))
                        .collect()
                })
                .unwrap_or_default();
            let view: BTreeMap<i64, i64> = t
                .orders
                .values()
                .map(|o| (o.engine_id, o.leaves_lots))
                .collect();
            if view != engine_view {
                return Err(format!(
                    "FIX user {}'s view of its open orders {view:?} differs from the engine's \
                     {engine_view:?} at seq {}",
                    t.user,
                    engine.last_seq()
                ));
            }
        }
        Ok(())
    }
}

impl FixTrader {
    /// Writes one message with the next MsgSeqNum.
    fn write(&mut self, msg_type: &str, now_ns: i64, fields: &[(u32, &str)]) {
        let mut w = MessageWriter::begin(&mut self.up, b"FIX.4.4", msg_type.as_bytes());
        w.str(tags::SENDER_COMP_ID, self.comp_id.as_bytes())
            .str(tags::TARGET_COMP_ID, b"RIALTO")
            .uint(tags::MSG_SEQ_NUM, self.seq_out)
            .timestamp(tags::SENDING_TIME, now_ns);
        for (tag, value) in fields {
            w.str(*tag, value.as_bytes());
        }
        w.finish();
        self.seq_out += 1;
    }

    fn act(&mut self, rng: &mut Rng, now_ns: i64) {
        let mut time = Vec::new();
        rialto_fix::time::write_utc_timestamp(&mut time, now_ns);
        let time = String::from_utf8(time).expect("a timestamp is ASCII");
        let cl_ord_id = format!("{}-{}", self.comp_id, self.next_cl_ord);
        self.next_cl_ord += 1;
        // Orders with no request of ours in flight.
        let idle: Vec<&OrderView> = self
            .orders
            .values()
            .filter(|o| !self.pending.contains(&o.cl_ord_id))
            .collect();
        let roll = rng.below(100);
        if roll < 32 && !idle.is_empty() {
            let o = idle[rng.below(idle.len() as u64) as usize].clone();
            let qty = lots_text(o.leaves_lots);
            if roll < 20 {
                let fields = [
                    (tags::ORIG_CL_ORD_ID, o.cl_ord_id.as_str()),
                    (tags::CL_ORD_ID, cl_ord_id.as_str()),
                    (tags::SYMBOL, o.symbol.as_str()),
                    (tags::SIDE, o.side),
                    (tags::TRANSACT_TIME, time.as_str()),
                    (tags::ORDER_QTY, qty.as_str()),
                ];
                self.write("F", now_ns, &fields);
            } else {
                let price = price_text(rng.range(PRICE_MIN, PRICE_MAX));
                let qty = lots_text(rng.range(1, 20));
                let fields = [
                    (tags::ORIG_CL_ORD_ID, o.cl_ord_id.as_str()),
                    (tags::CL_ORD_ID, cl_ord_id.as_str()),
                    (tags::HANDL_INST, "1"),
                    (tags::SYMBOL, o.symbol.as_str()),
                    (tags::SIDE, o.side),
                    (tags::TRANSACT_TIME, time.as_str()),
                    (tags::ORDER_QTY, qty.as_str()),
                    (tags::ORD_TYPE, "2"),
                    (tags::PRICE, price.as_str()),
                ];
                self.write("G", now_ns, &fields);
            }
            // The order is busy until the answer names the new ClOrdID.
            self.pending.insert(o.cl_ord_id);
        } else {
            let symbol = SYMBOLS[rng.below(2) as usize];
            let side = ["1", "2"][rng.below(2) as usize];
            let price = price_text(rng.range(PRICE_MIN, PRICE_MAX));
            let qty = lots_text(rng.range(1, 20));
            let tif = if roll >= 90 { "3" } else { "1" };
            let fields = [
                (tags::CL_ORD_ID, cl_ord_id.as_str()),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, symbol),
                (tags::SIDE, side),
                (tags::TRANSACT_TIME, time.as_str()),
                (tags::ORDER_QTY, qty.as_str()),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, price.as_str()),
                (tags::TIME_IN_FORCE, tif),
            ];
            self.write("D", now_ns, &fields);
        }
        self.pending.insert(cl_ord_id);
    }

    /// Decodes the whole messages received and answers what the session layer asks.
    fn read(&mut self, now_ns: i64, trace: &mut dyn FnMut(String)) -> Result<(), String> {
        let down = std::mem::take(&mut self.down);
        let mut at = 0;
        loop {
            let (frame, len) = match next_frame(&down[at..], usize::MAX) {
                Ok(Some(whole)) => whole,
                Ok(None) => break,
                Err(e) => return Err(format!("FIX user {}: garbled input: {e:?}", self.user)),
            };
            at += len;
            let text = |tag| {
                frame
                    .get(tag)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default()
            };
            let msg_type = String::from_utf8_lossy(frame.msg_type).into_owned();
            trace(format!(
                "fix {} <- {msg_type} {} {} {} {} {}",
                self.user,
                text(tags::CL_ORD_ID),
                text(tags::EXEC_TYPE),
                text(tags::ORD_STATUS),
                text(tags::LEAVES_QTY),
                text(tags::TEXT)
            ));
            let seq: u64 = text(tags::MSG_SEQ_NUM).parse().unwrap_or(0);
            if seq != self.seq_in {
                return Err(format!(
                    "FIX user {}: MsgSeqNum {seq} where {} was next",
                    self.user, self.seq_in
                ));
            }
            self.seq_in += 1;
            match msg_type.as_str() {
                "A" => {
                    self.logged_on = true;
                    self.subscribe(now_ns);
                }
                "W" => self.snapshot(&frame)?,
                "X" => self.incremental(&frame)?,
                // A symbol's phase changed: nothing the trader keeps.
                "f" => {}
                "0" => {}
                "1" => {
                    let id = text(tags::TEST_REQ_ID);
                    self.write("0", now_ns, &[(tags::TEST_REQ_ID, id.as_str())]);
                }
                "8" => self.report(&text)?,
                "9" => {
                    // A cancel or replace refused: the order stays as it was.
                    self.pending.remove(&text(tags::CL_ORD_ID));
                    self.pending.remove(&text(tags::ORIG_CL_ORD_ID));
                }
                other => {
                    return Err(format!(
                        "FIX user {}: unexpected {other}: {}",
                        self.user,
                        text(tags::TEXT)
                    ));
                }
            }
        }
        self.down = down[at..].to_vec();
        Ok(())
    }

    /// Subscribes to both symbols' bids, offers and trades at its depth, one request each.
    fn subscribe(&mut self, now_ns: i64) {
        let depth = self.md_depth.to_string();
        for symbol in SYMBOLS {
            let md_req_id = format!("md-{symbol}");
            let fields = [
                (tags::MD_REQ_ID, md_req_id.as_str()),
                (tags::SUBSCRIPTION_REQUEST_TYPE, "1"),
                (tags::MARKET_DEPTH, depth.as_str()),
                (tags::NO_MD_ENTRY_TYPES, "3"),
                (tags::MD_ENTRY_TYPE, "0"),
                (tags::MD_ENTRY_TYPE, "1"),
                (tags::MD_ENTRY_TYPE, "2"),
                (tags::NO_RELATED_SYM, "1"),
                (tags::SYMBOL, symbol),
            ];
            self.write("V", now_ns, &fields);
        }
    }

    /// A W: the symbol's book starts over from its entries.
    fn snapshot(&mut self, frame: &Frame<'_>) -> Result<(), String> {
        let symbol = String::from_utf8_lossy(frame.get(tags::SYMBOL).unwrap_or_default());
        let mut book = L2View::default();
        let mut entry_type: &[u8] = b"";
        let mut price = None;
        for field in frame.fields().filter_map(Result::ok) {
            match field.tag {
                tags::MD_ENTRY_TYPE => entry_type = field.value,
                tags::MD_ENTRY_PX => price = Some(self.units(field.value, 2)?),
                tags::MD_ENTRY_SIZE => {
                    let (Some(side), Some(price)) = (book.side(entry_type), price.take()) else {
                        return Err(format!("FIX user {}: a W entry out of order", self.user));
                    };
                    let qty = units_of(field.value, 3)
                        .ok_or_else(|| format!("FIX user {}: MDEntrySize", self.user))?;
                    side.insert(price, qty);
                }
                _ => {}
            }
        }
        self.books.insert(symbol.into_owned(), book);
        Ok(())
    }

    /// An X: each entry (MDUpdateAction first, then its type, symbol, price and size) changes
    /// one level; trades change no level.
    fn incremental(&mut self, frame: &Frame<'_>) -> Result<(), String> {
        let user = self.user;
        let bad = |what: &str| format!("FIX user {user}: {what} in an X");
        let mut action: &[u8] = b"";
        let mut entry_type: &[u8] = b"";
        let mut symbol: &[u8] = b"";
        let mut price = None;
        for field in frame.fields().filter_map(Result::ok) {
            match field.tag {
                tags::MD_UPDATE_ACTION => action = field.value,
                tags::MD_ENTRY_TYPE => entry_type = field.value,
                tags::SYMBOL => symbol = field.value,
                tags::MD_ENTRY_PX => price = Some(units_of(field.value, 2).ok_or(bad("a price"))?),
                tags::MD_ENTRY_SIZE => {
                    let qty = units_of(field.value, 3).ok_or(bad("a size"))?;
                    let price = price.take().ok_or(bad("a size before its price"))?;
                    let name = String::from_utf8_lossy(symbol);
                    let book = self
                        .books
                        .get_mut(name.as_ref())
                        .ok_or(bad("a symbol with no W before"))?;
                    let Some(side) = book.side(entry_type) else {
                        continue; // a trade
                    };
                    match action {
                        b"0" if side.contains_key(&price) => return Err(bad("a new level held")),
                        b"1" | b"2" if !side.contains_key(&price) => {
                            return Err(bad("a change of a level not held"));
                        }
                        b"2" => {
                            side.remove(&price);
                        }
                        b"0" | b"1" => {
                            side.insert(price, qty);
                        }
                        _ => return Err(bad("an MDUpdateAction")),
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn units(&self, text: &[u8], decimals: u8) -> Result<i64, String> {
        units_of(text, decimals).ok_or_else(|| {
            format!(
                "FIX user {}: {:?} is not a number of {decimals} decimals",
                self.user,
                String::from_utf8_lossy(text)
            )
        })
    }

    fn report(&mut self, text: &dyn Fn(u32) -> String) -> Result<(), String> {
        let cl_ord_id = text(tags::CL_ORD_ID);
        let orig = text(tags::ORIG_CL_ORD_ID);
        let order_id = text(tags::ORDER_ID);
        let exec_type = text(tags::EXEC_TYPE);
        let leaves = units_of(text(tags::LEAVES_QTY).as_bytes(), 3)
            .ok_or_else(|| format!("FIX user {}: LeavesQty {:?}", self.user, text(151)))?;
        self.pending.remove(&cl_ord_id);
        if !orig.is_empty() {
            self.pending.remove(&orig);
        }
        if leaves == 0 || order_id == "NONE" {
            self.orders.remove(&order_id);
            return Ok(());
        }
        let engine_id: i64 = text(SECONDARY_ORDER_ID)
            .parse()
            .map_err(|_| format!("FIX user {}: no SecondaryOrderID on {order_id}", self.user))?;
        let side = if text(tags::SIDE) == "1" { "1" } else { "2" };
        let known = self.orders.get(&order_id).map(|o| o.cl_ord_id.clone());
        // The order's ClOrdID changes with an accepted replace (or its first report).
        let current = match (exec_type.as_str(), known) {
            ("5", _) | (_, None) => cl_ord_id,
            (_, Some(known)) => known,
        };
        self.orders.insert(
            order_id,
            OrderView {
                cl_ord_id: current,
                symbol: text(tags::SYMBOL),
                side,
                engine_id,
                leaves_lots: leaves,
            },
        );
        Ok(())
    }
}

/// SecondaryOrderID: the engine's id of the order.
const SECONDARY_ORDER_ID: u32 = 198;

/// Cents as a price ("495.07").
fn price_text(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// Lots of 0.001 as a quantity ("0.017").
fn lots_text(lots: i64) -> String {
    format!("{}.{:03}", lots / 1000, lots % 1000)
}

/// A decimal in units of 10^-`decimals` (None for anything finer or not a number), parsed by
/// the FIX crate's `Decimal`.
fn units_of(text: &[u8], decimals: u8) -> Option<i64> {
    let value = Decimal::parse(text).ok().filter(|d| d.scale <= decimals)?;
    value.to_units(Decimal::new(1, decimals)).ok()
}
