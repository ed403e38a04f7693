//! The FIX gateway: FIX 4.2, 4.4 and FIXT.1.1/5.0SP2 sessions on one port, bound to venue
//! users, feeding the same pipeline as the binary gateway (docs/fix.md).
//!
//! Two halves. [`FixAgent`] (this file, core.rs) is the gateway's logic as a state machine
//! with no socket and no clock: connections opened, bytes received (split anywhere), the
//! peer's close, how much of its output a socket took, the time (nanoseconds since the
//! epoch, given by the caller, also for its timers), the engine's events and the room in the
//! inbound ring go in; requests for the pipeline (through a [`RequestSink`]), bytes to write
//! per connection, connections to close and the next timer deadline come out. Logon checks
//! (credentials, failed-logon throttles, the pre-logon budget) are its decisions.
//! [`FixGateway`] (runtime.rs) is its runtime on the gateway's thread, inside its event
//! loop: the listener, the sockets (TCP or TLS), the clock and the inbound ring; the binary
//! [`crate::gateway`] hands it the FIX listener's and connections' events, the replies for
//! FIX sessions and their users' fills and cancels. Market data comes from the market data
//! thread's feed, whose batches and snapshots the runtime hands to the agent (market_data.rs,
//! `Intake`: the agent holds no reference to the feed); each session's store (its file, and with a replicated log
//! its copy in the cluster: fixstore.rs) is written by the session layer inside the agent.
//!
//! A FIX session ("slot") outlives its connections: replies and fills that arrive while it is
//! disconnected are stored with their sequence numbers and reach the client by resend after
//! its next Logon.

mod core;
pub mod instruments;
pub mod market_data;
pub mod orders;
mod runtime;
pub mod test_acceptor;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rialto_core::{SymbolId, UserId};
use rialto_fix::app::{self, ExecutionReport};
use rialto_fix::session::{
    BusinessReject, Logon, MessageLog, MessageStore, Outcome, Reject, Session, SessionConfig,
    business_reject_reason,
};
use rialto_fix::{ApplVersion, Decimal, Frame, MessageWriter, Version, next_frame, tags};

use crate::admission::{
    LOG_EVERY, LogLimiter, LoginThrottle, PRUNE_EVERY, PeerKey, PreAuthBudget, ThrottleSettings,
    Throttled,
};
use crate::auth::Credentials;
use crate::event::Event;
use crate::fixstore::{FixMirror, SessionStore};
use crate::pipeline::{Op, Reply, Request, SessionId};
use crate::sockets::TokenBucket;
use instruments::{Instrument, Instruments};
use market_data::{EntryTypes, MarketData, Publish, Subscription};
use orders::{ClOrdId, Execution, OrderDesk, Report, ToEngine, side_char};
pub use runtime::FixGateway;

/// Pipeline session ids of FIX sessions are `FIX_SESSION_BASE + slot`.
pub const FIX_SESSION_BASE: SessionId = 1 << 48;
/// The FIX gateway's own queries (the symbol list).
pub const FIX_SERVICE_SESSION: SessionId = FIX_SESSION_BASE - 1;
/// How often session timers run (heartbeats, test requests, logon and logout deadlines), ns.
const TIMER_TICK_NS: i64 = 50_000_000;
/// Requests may only be taken from a connection while the inbound ring has this much room
/// (one message makes at most one request; the rest is slack for the follow-ups).
const RING_ROOM: usize = 4;
/// A resend in progress writes its next chunk once its connection has less than this unsent.
const RESEND_LOW_WATER: usize = 64 << 10;
/// A connection whose output waiting for its session's store in the cluster is over this is
/// paused (its input is not read) until the cluster has caught up.
const STORE_BACKLOG_BYTES: usize = 1 << 20;
/// A connection whose unsent output passes this does not read what it is sent (a slow
/// reader): its output is dropped and it is closed.
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;
/// OrderIDs of a slot start at `(stable slot number + 1) << 40`: apart from each other and
/// from the small ids binary clients usually choose.
const ORDER_ID_SPACE_BITS: u32 = 40;

pub struct FixConfig {
    pub listen: SocketAddr,
    pub comp_id: String,
    /// SenderCompID → (user, cancel on disconnect, a stable number for OrderID ranges).
    pub sessions: HashMap<String, SessionBinding>,
    pub max_connections: usize,
    /// Connections that have not logged on, in all and from one address (evicting the oldest).
    pub max_pending_logons: usize,
    pub max_pending_logons_per_address: usize,
    /// A connection that has not logged on after this long is closed.
    pub logon_timeout: Duration,
    /// The message log's cap per file, and how many full files are kept beside the current.
    pub message_log_max_bytes: u64,
    pub message_log_files: u32,
    pub max_message_bytes: usize,
    pub max_clock_skew_ns: i64,
    pub allow_user_defined_tags: bool,
    pub max_msgs_per_sec: u64,
    pub burst: u64,
    pub message_log: bool,
    /// TLS on the FIX port.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Session stores and message logs go to `data_dir/fix`.
    pub data_dir: PathBuf,
    /// A replicated venue's leader: session stores are kept in the cluster too, and taken
    /// from it when a session opens (fixstore.rs).
    pub mirror: Option<FixMirror>,
}

#[derive(Clone, Copy, Debug)]
pub struct SessionBinding {
    pub user: UserId,
    pub cancel_on_disconnect: bool,
    pub number: u64,
}

/// One FIX session: a (SenderCompID, version) pair, with its sequence numbers and orders.
struct Slot {
    name: String,
    user: UserId,
    cancel_on_disconnect: bool,
    session: Session<SessionStore>,
    desk: OrderDesk,
    conn: Option<SessionId>,
    /// SecurityListRequests waiting for the symbol list.
    security_lists: VecDeque<String>,
}

/// Where the pipeline's requests go: the runtime's inbound ring, or a test's queue.
pub trait RequestSink {
    /// Requests that would fit now.
    fn room(&self) -> usize;
    /// Takes the request, or hands it back when there is no room (the agent holds it and
    /// offers it again, in order, before any later one).
    fn offer(&mut self, request: Request) -> Result<(), Request>;
}

/// One connection as the agent sees it: no socket, only its bytes.
struct Conn {
    peer: PeerKey,
    /// Received bytes not yet handled are `input[input_start..input_end]`.
    input: Vec<u8>,
    input_start: usize,
    input_end: usize,
    output: Vec<u8>,
    output_pos: usize,
    /// `output[..sendable]` may be written: its messages are in the session's store (with a
    /// replicated log, the cluster has acknowledged them; fixstore.rs).
    sendable: usize,
    /// Output waiting for the cluster: (the store's write that holds it, the end of it).
    store_marks: VecDeque<(u64, usize)>,
    slot: Option<usize>,
    /// Waiting for room in the inbound ring.
    paused: bool,
    /// Close once the output is written.
    closing: bool,
    opened_ns: i64,
    /// The connection's message rate.
    bucket: TokenBucket,
}

impl Conn {
    /// Makes the output its session's store has acknowledged writable: `needed` is the
    /// store's write that holds everything stored so far, `acknowledged` the last one the
    /// cluster confirmed (fixstore.rs, `SessionStore::tickets`). Whether more may be written.
    fn release(&mut self, needed: u64, acknowledged: u64) -> bool {
        let before = self.sendable;
        while let Some(&(ticket, end)) = self.store_marks.front() {
            if ticket > acknowledged {
                break;
            }
            self.sendable = self.sendable.max(end);
            self.store_marks.pop_front();
        }
        if needed <= acknowledged {
            self.sendable = self.output.len();
            self.store_marks.clear();
        } else {
            match self.store_marks.back_mut() {
                Some((ticket, end)) if *ticket == needed => *end = self.output.len(),
                _ => self.store_marks.push_back((needed, self.output.len())),
            }
        }
        self.sendable = self.sendable.min(self.output.len());
        self.sendable > before
    }

    /// The output up to `output_pos` is written (or dropped): start the buffer again.
    fn consumed(&mut self) {
        let n = self.output_pos;
        self.output.drain(..n);
        self.output_pos = 0;
        self.sendable = self.sendable.saturating_sub(n);
        for (_, end) in &mut self.store_marks {
            *end = end.saturating_sub(n);
        }
    }
}

/// The caller's time, as the agent last heard it. Nanoseconds since the epoch: the FIX
/// session layer's SendingTime and timers. The failed-logon throttle and the message-rate
/// buckets take `Instant`s: they count from `anchor`, the `Instant` the caller paired with
/// `anchor_ns` (a clock that goes back holds them still until it catches up).
#[derive(Clone, Copy, Debug)]
struct Clock {
    now_ns: i64,
    anchor: Instant,
    anchor_ns: i64,
}

impl Clock {
    fn instant(&self) -> Instant {
        let since = self.now_ns.saturating_sub(self.anchor_ns).max(0);
        self.anchor + Duration::from_nanos(since as u64)
    }
}

/// The state every connection handler needs besides its connection.
struct Core {
    clock: Clock,
    config: FixConfig,
    credentials: Arc<Credentials>,
    slots: Vec<Slot>,
    slot_index: HashMap<(String, Version), usize>,
    instruments: Instruments,
    market_data: MarketData,
    /// Requests that found the inbound ring full, in order.
    deferred: VecDeque<Request>,
    reports: Vec<Report>,
    publishes: Vec<Publish>,
    shutting_down: bool,
    /// Connections that have not logged on yet.
    pending_logons: PreAuthBudget<SessionId>,
    throttle: LoginThrottle<UserId>,
    refusals: LogLimiter,
    last_prune_ns: i64,
    /// Connections whose Logon waits for its session's store to be read from the cluster
    /// (fixstore.rs, `FixMirror::poll_read`), with the session's name.
    awaiting_store: HashMap<SessionId, String>,
}

/// The FIX gateway's logic with no socket and no clock (the module's documentation says what
/// goes in and out). Every method that may act takes the time, `now_ns`.
pub struct FixAgent {
    conns: HashMap<SessionId, Conn>,
    core: Core,
    /// Connections with output to write, as [`FixAgent::flush`] gives them out.
    dirty: Vec<SessionId>,
    /// Output of a slot with no connection (its messages are stored, not written).
    offline: Vec<u8>,
    last_timer_ns: i64,
    symbols_stale: bool,
    /// [`MAX_OUTPUT_BYTES`] (a test sets less).
    max_output_bytes: usize,
}

/// Where a slot's messages go: its connection's output, or (with no connection) a scratch
/// buffer, since the session stores them for a resend after the next Logon.
fn output_of<'a>(
    conns: &'a mut HashMap<SessionId, Conn>,
    offline: &'a mut Vec<u8>,
    dirty: &mut Vec<SessionId>,
    conn: Option<SessionId>,
) -> &'a mut Vec<u8> {
    match conn.and_then(|id| conns.get_mut(&id).map(|c| (id, c))) {
        Some((id, c)) => {
            dirty.push(id);
            &mut c.output
        }
        None => {
            offline.clear();
            offline
        }
    }
}

impl FixAgent {
    /// `now_ns` and `anchor` are one moment on the caller's two clocks (the epoch's and the
    /// monotonic one; see `Clock`).
    pub fn new(
        config: FixConfig,
        credentials: Arc<Credentials>,
        instruments: Instruments,
        now_ns: i64,
        anchor: Instant,
    ) -> FixAgent {
        let pending_logons = PreAuthBudget::new(
            config.max_pending_logons,
            config.max_pending_logons_per_address,
        );
        FixAgent {
            conns: HashMap::new(),
            core: Core {
                clock: Clock {
                    now_ns,
                    anchor,
                    anchor_ns: now_ns,
                },
                config,
                credentials,
                slots: Vec::new(),
                slot_index: HashMap::new(),
                instruments,
                market_data: MarketData::new(),
                deferred: VecDeque::new(),
                reports: Vec::new(),
                publishes: Vec::new(),
                shutting_down: false,
                pending_logons,
                throttle: LoginThrottle::new(ThrottleSettings::default()),
                refusals: LogLimiter::new(LOG_EVERY),
                last_prune_ns: now_ns,
                awaiting_store: HashMap::new(),
            },
            dirty: Vec::new(),
            offline: Vec::new(),
            last_timer_ns: now_ns,
            // Symbols added since the engine was recovered (the demo set-up) come with the
            // first refresh.
            symbols_stale: true,
            max_output_bytes: MAX_OUTPUT_BYTES,
        }
    }

    pub fn config(&self) -> &FixConfig {
        &self.core.config
    }

    /// The time moves on (never back: an earlier time is ignored).
    fn at(&mut self, now_ns: i64) {
        self.core.clock.now_ns = self.core.clock.now_ns.max(now_ns);
    }

    /// Whether the market data feed's batches are wanted: while a MarketDataRequest
    /// subscription is open (the runtime holds a receiver of the feed's batches meanwhile:
    /// market_data.rs, `Intake`).
    pub fn wants_market_data(&self) -> bool {
        self.core.market_data.wants_batches()
    }

    /// One of the feed's batches, in order; what it changed goes out at the next
    /// [`FixAgent::tick`].
    pub fn on_market_data(&mut self, batch: &crate::feed::Batch, now_ns: i64) {
        self.at(now_ns);
        self.core.market_data.apply(batch);
    }

    /// Batches of the feed were lost (its receiver fell behind): every subscribed book waits
    /// for a fresh snapshot ([`FixAgent::on_book_seed`]), every subscription for a fresh W.
    pub fn market_data_lost(&mut self, now_ns: i64) {
        self.at(now_ns);
        self.core.market_data.lost();
    }

    /// The symbols whose book waits for a snapshot of the feed, taken after the receiver of
    /// its batches exists ([`FixAgent::on_book_seed`]).
    pub fn unseeded_books(&self) -> impl Iterator<Item = SymbolId> + '_ {
        self.core.market_data.unseeded()
    }

    /// A snapshot of the feed for a symbol that waits for one.
    pub fn on_book_seed(&mut self, symbol: SymbolId, seed: market_data::BookSeed, now_ns: i64) {
        self.at(now_ns);
        self.core.market_data.seed(symbol, seed);
    }

    pub fn owns(&self, id: SessionId) -> bool {
        self.conns.contains_key(&id)
    }

    /// Whether a new connection would be taken: not while shutting down, nor with
    /// `max_connections` logged on. One that is not is dropped without a word (FIX has
    /// nothing to say before a Logon).
    pub fn accepts_connections(&self) -> bool {
        let logged_on = self.conns.len() - self.core.pending_logons.len();
        !self.core.shutting_down && logged_on < self.core.config.max_connections
    }

    /// A connection `id` from `peer` opened. Returns a connection evicted to make room (the
    /// oldest one not logged on, when the pre-logon budget is spent): it is forgotten at once
    /// (it has no session to detach), and the runtime closes its socket without a word.
    pub fn open(&mut self, id: SessionId, peer: IpAddr, now_ns: i64) -> Option<SessionId> {
        self.at(now_ns);
        let peer = PeerKey::of(peer);
        let evicted = self
            .core
            .pending_logons
            .admit(id, peer)
            .filter(|evicted| self.conns.remove(evicted).is_some());
        let burst = self.core.config.burst;
        self.conns.insert(
            id,
            Conn {
                peer,
                input: vec![0; self.core.config.max_message_bytes + 16 * 1024],
                input_start: 0,
                input_end: 0,
                output: Vec::with_capacity(4096),
                output_pos: 0,
                sendable: 0,
                store_marks: VecDeque::new(),
                slot: None,
                paused: false,
                closing: false,
                opened_ns: now_ns,
                bucket: TokenBucket::new_at(burst, self.core.clock.instant()),
            },
        );
        evicted
    }

    /// The input buffer of a connection and the bounds of its unhandled bytes, for the
    /// runtime to read into in place (`sockets::fill`), advancing the end by what it read.
    pub fn input_buffer(&mut self, id: SessionId) -> Option<(&mut [u8], &mut usize, &mut usize)> {
        let c = self.conns.get_mut(&id)?;
        Some((&mut c.input, &mut c.input_start, &mut c.input_end))
    }

    /// Copies received bytes into a connection's input; returns how many fit (the rest waits
    /// with the caller until messages are handled). A connection whose buffer is full without
    /// a whole message in it sends a message longer than any we take: it is closed.
    pub fn receive(&mut self, id: SessionId, bytes: &[u8]) -> usize {
        let Some(c) = self.conns.get_mut(&id) else {
            return 0;
        };
        crate::sockets::receive_into(&mut c.input, &mut c.input_start, &mut c.input_end, bytes)
    }

    /// Whether the connection takes more input now (not closing, not waiting for room in the
    /// inbound ring or for its store).
    pub fn wants_input(&self, id: SessionId) -> bool {
        self.conns.get(&id).is_some_and(|c| !c.closing && !c.paused)
    }

    /// Whether the connection waits for room in the inbound ring (or for its store): its
    /// buffered messages are handled again without any new byte.
    pub fn is_paused(&self, id: SessionId) -> bool {
        self.conns.get(&id).is_some_and(|c| c.paused && !c.closing)
    }

    pub fn is_closing(&self, id: SessionId) -> bool {
        self.conns.get(&id).is_none_or(|c| c.closing)
    }

    /// The peer closed its side, or the connection broke (a message cut off is dropped with
    /// it): the connection closes once its output is written.
    pub fn peer_closed(&mut self, id: SessionId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.closing = true;
        }
    }

    /// Requests that found the sink full go first, in order. Returns how many went.
    pub fn push_deferred(&mut self, sink: &mut dyn RequestSink) -> usize {
        let mut n = 0;
        while let Some(request) = self.core.deferred.pop_front() {
            if let Err(request) = sink.offer(request) {
                self.core.deferred.push_front(request);
                break;
            }
            n += 1;
        }
        n
    }

    /// Whether requests wait for room in the sink.
    pub fn has_deferred(&self) -> bool {
        !self.core.deferred.is_empty()
    }

    /// Handles the whole messages buffered on a connection, while the sink has room for
    /// their requests. Returns the messages handled.
    pub fn handle(&mut self, id: SessionId, now_ns: i64, sink: &mut dyn RequestSink) -> usize {
        self.at(now_ns);
        let Some(conn) = self.conns.get_mut(&id) else {
            return 0;
        };
        let mut handled = 0;
        let max = self.core.config.max_message_bytes;
        // The input leaves the connection meanwhile: a frame borrows it while the handlers
        // write to the connection.
        let input = std::mem::take(&mut conn.input);
        while !conn.closing {
            if sink.room() < RING_ROOM
                || !self.core.deferred.is_empty()
                || conn.output.len() - conn.sendable > STORE_BACKLOG_BYTES
                || self.core.store_read_pending(id)
            {
                conn.paused = true;
                break;
            }
            conn.paused = false;
            let buffered = &input[conn.input_start..conn.input_end];
            match next_frame(buffered, max) {
                Ok(None) => {
                    if conn.input_end - conn.input_start == input.len() {
                        // A message longer than the buffer: not one we take.
                        conn.closing = true;
                    }
                    break;
                }
                Ok(Some((frame, len))) => {
                    let config = &self.core.config;
                    let now = self.core.clock.instant();
                    if !conn
                        .bucket
                        .take_at(config.max_msgs_per_sec, config.burst, now)
                    {
                        tracing::warn!(conn = id, "FIX connection over its message rate");
                        self.core.logout(conn, "message rate limit exceeded");
                        break;
                    }
                    handled += 1;
                    self.core.on_frame(id, conn, &frame, sink);
                    if !self.core.awaiting_store.is_empty()
                        && self.core.awaiting_store.contains_key(&id)
                    {
                        // Its Logon is handled again once the session's store is read.
                        conn.paused = true;
                        break;
                    }
                    conn.input_start += len;
                }
                Err(garbled) => {
                    let skip = garbled.skip.min(buffered.len()).max(1);
                    tracing::debug!(conn = id, reason = garbled.reason, "garbled FIX input");
                    if let Some(slot) = conn.slot {
                        let chunk = &input[conn.input_start..conn.input_start + skip];
                        let session = &mut self.core.slots[slot].session;
                        if let Err(e) = session.on_garbled(chunk, self.core.clock.now_ns) {
                            tracing::error!("FIX store: {e}");
                            conn.closing = true;
                        }
                    } else {
                        conn.closing = true; // garbage before a Logon: not FIX
                    }
                    conn.input_start += skip;
                }
            }
        }
        conn.input = input;
        if conn.output_pos < conn.output.len() {
            self.dirty.push(id);
        }
        handled
    }

    /// A reply for a FIX session or for the gateway's own queries.
    pub fn on_reply(&mut self, id: SessionId, msg: &Event, now_ns: i64) {
        self.at(now_ns);
        if id == FIX_SERVICE_SESSION {
            if let Event::SymbolList { symbols, .. } = msg {
                self.core.instruments.refresh(symbols);
            }
            return;
        }
        let slot = (id - FIX_SESSION_BASE) as usize;
        if slot >= self.core.slots.len() {
            return;
        }
        let mut reports = std::mem::take(&mut self.core.reports);
        match *msg {
            Event::Accepted {
                seq,
                ts_ns,
                order,
                kind,
            } => {
                self.core.slots[slot]
                    .desk
                    .on_reply(order, kind, Ok(()), seq, ts_ns, &mut reports);
            }
            Event::Rejected {
                seq,
                ts_ns,
                order,
                kind,
                reason,
            } => {
                self.core.slots[slot].desk.on_reply(
                    order,
                    kind,
                    Err(reason),
                    seq,
                    ts_ns,
                    &mut reports,
                );
            }
            Event::SymbolList { ref symbols, .. } => {
                self.core.instruments.refresh(symbols);
                if let Some(req_id) = self.core.slots[slot].security_lists.pop_front() {
                    self.send_security_list(slot, &req_id);
                }
            }
            _ => {}
        }
        self.send_reports(slot, &mut reports);
        self.core.reports = reports;
    }

    /// A message for a user's sessions (fills and cancels).
    pub fn on_user_message(&mut self, user: UserId, msg: &Event, now_ns: i64) {
        self.at(now_ns);
        let mut reports = std::mem::take(&mut self.core.reports);
        for slot in 0..self.core.slots.len() {
            if self.core.slots[slot].user != user {
                continue;
            }
            let desk = &mut self.core.slots[slot].desk;
            match *msg {
                // Order 0: the close of a liquidation, the venue's order (docs/fix.md).
                Event::Trade {
                    seq,
                    ts_ns,
                    order: 0,
                    symbol,
                    side,
                    price,
                    qty,
                    ..
                } => desk.on_liquidation_trade(symbol, side, price, qty, seq, ts_ns, &mut reports),
                Event::Cancelled {
                    seq,
                    ts_ns,
                    order: 0,
                    symbol,
                    side,
                    qty,
                    ..
                } => desk.on_liquidation_cancelled(symbol, side, qty, seq, ts_ns, &mut reports),
                Event::Trade {
                    seq,
                    ts_ns,
                    order,
                    price,
                    qty,
                    ..
                } => desk.on_trade(order, price, qty, seq, ts_ns, &mut reports),
                Event::Cancelled {
                    seq,
                    ts_ns,
                    order,
                    qty,
                    reason,
                    ..
                } => {
                    desk.on_cancelled(order, qty, reason, seq, ts_ns, &mut reports);
                }
                Event::Triggered {
                    seq, ts_ns, order, ..
                } => desk.on_triggered(order, seq, ts_ns, &mut reports),
                _ => {}
            }
            self.send_reports(slot, &mut reports);
        }
        self.core.reports = reports;
    }

    /// A message for everyone: a symbol added joins the instrument list (it is tradable at
    /// once); a symbol's phase change goes to every logged-on session as SecurityStatus (f)
    /// with its SecurityTradingStatus (docs/fix.md, "Trading phases").
    pub fn on_public_message(&mut self, msg: &Event, now_ns: i64) {
        self.at(now_ns);
        if let Event::SymbolAdded { symbol, spec, .. } = *msg {
            self.core.instruments.add(symbol, spec);
            return;
        }
        let Event::PhaseChanged {
            symbol,
            phase,
            ts_ns,
            ..
        } = *msg
        else {
            return;
        };
        let Some(name) = self
            .core
            .instruments
            .by_id(symbol)
            .map(|i| i.name().to_string())
        else {
            return;
        };
        for slot in 0..self.core.slots.len() {
            if !self.core.slots[slot].session.is_logged_on() {
                continue;
            }
            let conn = self.core.slots[slot].conn;
            let out = output_of(&mut self.conns, &mut self.offline, &mut self.dirty, conn);
            let session = &mut self.core.slots[slot].session;
            let result = session.send_app(
                b"f",
                self.core.clock.now_ns,
                |w| {
                    w.str(tags::SYMBOL, name.as_bytes());
                    w.uint(SECURITY_TRADING_STATUS, security_trading_status(phase));
                    w.timestamp(tags::TRANSACT_TIME, ts_ns);
                },
                out,
            );
            if let Err(e) = result {
                tracing::error!("FIX store: {e}");
            }
        }
    }

    /// When the agent next needs the time without any other input (a heartbeat or test
    /// request to send, a logon or logout deadline), if ever. Timers run at most every 50 ms
    /// ([`FixAgent::tick`]), so never earlier than 50 ms after the last run.
    pub fn next_timer_ns(&self) -> Option<i64> {
        let logon_timeout_ns = self.core.config.logon_timeout.as_nanos() as i64;
        let deadline = self
            .conns
            .values()
            .filter_map(|c| match c.slot {
                Some(slot) => self.core.slots[slot].session.next_deadline_ns(),
                None => Some(
                    c.opened_ns
                        .saturating_add(logon_timeout_ns)
                        .saturating_add(1),
                ),
            })
            .min()?;
        Some(deadline.max(self.last_timer_ns + TIMER_TICK_NS))
    }

    /// Market data (what the feed's batches handed over since the last tick changed), the
    /// symbol list refresh, and the timers when they are due. Returns work done.
    pub fn tick(&mut self, now_ns: i64, sink: &mut dyn RequestSink) -> usize {
        self.at(now_ns);
        let work = self.publish_market_data();
        if self.symbols_stale {
            self.symbols_stale = false;
            let request = Request {
                session: FIX_SERVICE_SESSION,
                reply: Reply::Symbols { request: 0 },
                op: Op::ListSymbols,
            };
            self.core.push_request(request, sink);
        }
        if now_ns >= self.last_timer_ns + TIMER_TICK_NS {
            self.last_timer_ns = now_ns;
            self.run_timers(now_ns);
        }
        work
    }

    fn run_timers(&mut self, now: i64) {
        let logon_timeout_ns = self.core.config.logon_timeout.as_nanos() as i64;
        for (&id, conn) in &mut self.conns {
            match conn.slot {
                // Its messages wait for room in the inbound ring (or for its store): we are not
                // reading them, so its silence is ours, not the counterparty's. Its heartbeats
                // and the silence limit resume once it is read again.
                Some(_) if conn.paused => {}
                Some(slot) => {
                    let session = &mut self.core.slots[slot].session;
                    match session.on_timer(now, &mut conn.output) {
                        Ok(Outcome::Disconnect) => conn.closing = true,
                        Ok(_) => {}
                        Err(e) => {
                            tracing::error!("FIX store: {e}");
                            conn.closing = true;
                        }
                    }
                }
                // Its Logon waits for the session's store, a read with a timeout of its own.
                None if self.core.awaiting_store.contains_key(&id) => {}
                None => {
                    if now.saturating_sub(conn.opened_ns) > logon_timeout_ns {
                        conn.closing = true; // no Logon in time
                    }
                }
            }
            if conn.output_pos < conn.output.len() {
                self.dirty.push(id);
            }
        }
        let conns = &self.conns;
        self.core
            .awaiting_store
            .retain(|id, _| conns.contains_key(id));
        if now.saturating_sub(self.core.last_prune_ns) >= PRUNE_EVERY.as_nanos() as i64 {
            self.core.last_prune_ns = now;
            self.core.throttle.prune(self.core.clock.instant());
        }
    }

    /// Gets the output ready to write, after the session stores: nothing reaches a client
    /// before it is in the store it may be resent from. With a replicated log a session's
    /// output waits for the cluster's acknowledgement of its store (fixstore.rs) without
    /// holding up the other sessions'. `to_write` receives the connections with output (or
    /// told to write since): the runtime writes [`FixAgent::pending_output`] of each and
    /// tells [`FixAgent::wrote`].
    pub fn flush(&mut self, now_ns: i64, to_write: &mut Vec<SessionId>) {
        self.at(now_ns);
        self.pump_resends();
        for slot in &mut self.core.slots {
            if let Err(e) = slot.session.flush_stores() {
                tracing::error!(session = %slot.name, "FIX store: {e}");
                if let Some(c) = slot.conn.and_then(|id| self.conns.get_mut(&id)) {
                    // What is not stored cannot be resent: close instead of sending it.
                    c.output.truncate(c.sendable.max(c.output_pos));
                    c.closing = true;
                }
            }
        }
        let slots = &self.core.slots;
        for (&id, c) in &mut self.conns {
            let (needed, acknowledged) = c
                .slot
                .map_or((0, 0), |s| slots[s].session.store().tickets());
            if c.release(needed, acknowledged) {
                self.dirty.push(id);
            }
        }
        to_write.append(&mut self.dirty);
        to_write.sort_unstable();
        to_write.dedup();
        to_write.retain(|id| self.conns.contains_key(id));
    }

    /// Has the connection's output written at the next flush.
    pub fn mark_dirty(&mut self, id: SessionId) {
        if self.conns.contains_key(&id) {
            self.dirty.push(id);
        }
    }

    /// The bytes of a connection that may be written now (stored, and with a replicated log
    /// acknowledged by the cluster).
    pub fn pending_output(&self, id: SessionId) -> &[u8] {
        match self.conns.get(&id) {
            Some(c) => &c.output[c.output_pos..c.sendable.max(c.output_pos)],
            None => &[],
        }
    }

    /// The socket took `n` bytes of [`FixAgent::pending_output`] (a partial write when fewer
    /// than offered). A connection whose unsent output is past the bound is closed as a slow
    /// reader, its output dropped.
    pub fn wrote(&mut self, id: SessionId, n: usize) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.output_pos = (c.output_pos + n).min(c.sendable.max(c.output_pos));
        // Output held for the cluster keeps the buffer from emptying: drop what is written
        // once it is at least half of it (each byte moves at most once or so).
        let compact = c.output_pos >= RESEND_LOW_WATER && c.output_pos * 2 >= c.output.len();
        if c.output_pos == c.output.len() || compact {
            c.consumed();
        }
        if c.output.len() - c.output_pos > self.max_output_bytes {
            tracing::warn!(conn = id, "closing a FIX connection that does not read");
            c.output_pos = c.output.len();
            c.consumed();
            c.closing = true;
        }
    }

    /// Nothing more can be written to the connection: its output is dropped and it closes.
    pub fn write_failed(&mut self, id: SessionId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.closing = true;
            c.output_pos = c.output.len();
            c.consumed();
        }
    }

    /// Connections that are closing and have written everything: the agent forgets them
    /// (their sessions detach, cancelling on disconnect where configured) and `closed`
    /// receives their ids for the runtime to close their sockets.
    pub fn take_closed(&mut self, now_ns: i64, closed: &mut Vec<SessionId>) {
        self.at(now_ns);
        let first = closed.len();
        closed.extend(
            self.conns
                .iter()
                .filter(|(_, c)| c.closing && c.output_pos >= c.output.len())
                .map(|(id, _)| *id),
        );
        closed[first..].sort_unstable();
        for &id in &closed[first..] {
            let Some(conn) = self.conns.remove(&id) else {
                continue;
            };
            self.core.pending_logons.leave(id);
            tracing::debug!(conn = id, "FIX connection closed");
            if let Some(slot) = conn.slot {
                self.core.detach(slot);
            }
        }
    }

    /// Writes the next chunk of every resend in progress whose connection has read what it
    /// was sent: a resend costs what the counterparty reads, one chunk per turn of the loop,
    /// and other sessions' messages go between its chunks.
    fn pump_resends(&mut self) {
        let now = self.core.clock.now_ns;
        for slot in &mut self.core.slots {
            if !slot.session.is_resending() {
                continue;
            }
            let Some(c) = slot.conn.and_then(|id| self.conns.get_mut(&id)) else {
                continue;
            };
            if c.closing || c.output.len() - c.output_pos >= RESEND_LOW_WATER {
                continue;
            }
            let chunk = slot.session.config().resend_chunk_bytes;
            if let Err(e) = slot.session.pump_resend(now, &mut c.output, chunk) {
                tracing::error!(session = %slot.name, "FIX store: {e}");
                c.closing = true;
            }
            self.dirty.extend(slot.conn);
        }
    }

    /// Whether a resend waits only for the loop to come round (its connection has read
    /// everything, so no event will announce it).
    fn resend_ready(&self) -> bool {
        self.core.slots.iter().any(|slot| {
            slot.session.is_resending()
                && slot
                    .conn
                    .and_then(|id| self.conns.get(&id))
                    .is_some_and(|c| !c.closing && c.output.len() - c.output_pos < RESEND_LOW_WATER)
        })
    }

    /// Open FIX connections.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Something waits for room in the inbound ring, or a session's store write to the
    /// cluster has finished: look again soon.
    pub fn is_waiting(&self) -> bool {
        // A Logon waiting for its store is not looked at again until the read's end rings.
        let awaiting = &self.core.awaiting_store;
        !self.core.deferred.is_empty()
            || self
                .conns
                .iter()
                .any(|(id, c)| c.paused && !c.closing && !awaiting.contains_key(id))
            || awaiting.keys().any(|&id| !self.core.store_read_pending(id))
            || self.resend_ready()
            || self
                .core
                .slots
                .iter()
                .any(|s| s.session.store().write_finished())
    }

    pub fn has_pending_output(&self) -> bool {
        self.conns.values().any(|c| c.output_pos < c.output.len())
    }

    /// Logs every session out (the server is stopping) and takes no more connections.
    pub fn begin_shutdown(&mut self, now_ns: i64) {
        self.at(now_ns);
        self.core.shutting_down = true;
        for (&id, conn) in &mut self.conns {
            self.core.logout(conn, "the server is shutting down");
            self.dirty.push(id);
        }
    }

    /// Drops every connection's unwritten output and settles the stores (after the last
    /// flush); `closed` receives the connections for the runtime to close.
    pub fn close_all(&mut self, now_ns: i64, closed: &mut Vec<SessionId>) {
        for c in self.conns.values_mut() {
            c.closing = true;
            c.output_pos = c.output.len();
        }
        self.take_closed(now_ns, closed);
        for slot in &mut self.core.slots {
            let settled = slot.session.store_mut().settle();
            if let Err(e) = settled.and_then(|()| {
                slot.session
                    .flush_stores()
                    .map_err(|e| io::Error::other(e.to_string()))
            }) {
                tracing::error!(session = %slot.name, "FIX store: {e}");
            }
        }
    }

    /// Sends what the feed's batches handed over changed to the subscribers, and a fresh W to
    /// those that wait for one.
    fn publish_market_data(&mut self) -> usize {
        let mut publishes = std::mem::take(&mut self.core.publishes);
        let (conns, slots) = (&self.conns, &self.core.slots);
        let backlog = |slot: usize| {
            slots[slot]
                .conn
                .and_then(|id| conns.get(&id))
                .map_or(0, |c| c.output.len() - c.output_pos)
        };
        self.core.market_data.publish(backlog, &mut publishes);
        let work = publishes.len();
        for p in publishes.drain(..) {
            let slot = p.slot();
            let conn = self.core.slots[slot].conn;
            let out = output_of(&mut self.conns, &mut self.offline, &mut self.dirty, conn);
            let now = self.core.clock.now_ns;
            write_market_data(
                &mut self.core.slots[slot],
                &self.core.instruments,
                p,
                now,
                out,
            );
        }
        self.core.publishes = publishes;
        work
    }

    fn send_security_list(&mut self, slot: usize, req_id: &str) {
        let names: Vec<String> = self
            .core
            .instruments
            .all()
            .map(|i| i.name().to_string())
            .collect();
        let conn = self.core.slots[slot].conn;
        let out = output_of(&mut self.conns, &mut self.offline, &mut self.dirty, conn);
        let session = &mut self.core.slots[slot].session;
        let response_id = format!("{req_id}-list");
        let result = session.send_app(
            b"y",
            self.core.clock.now_ns,
            |w| {
                w.str(tags::SECURITY_REQ_ID, req_id.as_bytes());
                w.str(SECURITY_RESPONSE_ID, response_id.as_bytes());
                w.char(tags::SECURITY_REQUEST_RESULT, b'0');
                // An empty group is left out, not sent as a count of 0.
                if !names.is_empty() {
                    w.uint(tags::NO_RELATED_SYM, names.len() as u64);
                }
                for name in &names {
                    w.str(tags::SYMBOL, name.as_bytes());
                }
            },
            out,
        );
        if let Err(e) = result {
            tracing::error!("FIX store: {e}");
        }
    }

    fn send_reports(&mut self, slot: usize, reports: &mut Vec<Report>) {
        let conn = self.core.slots[slot].conn;
        for report in reports.drain(..) {
            let out = output_of(&mut self.conns, &mut self.offline, &mut self.dirty, conn);
            self.core.send_report(slot, &report, out);
        }
    }
}

/// Writes one market data message (W or X) of a slot's session into `out`.
fn write_market_data(
    slot: &mut Slot,
    instruments: &Instruments,
    p: Publish,
    now: i64,
    out: &mut Vec<u8>,
) {
    let Some(instrument) = instruments.by_id(p.symbol()).copied() else {
        return;
    };
    let version = slot.session.default_appl_version();
    let session = &mut slot.session;
    let result = match p {
        Publish::Snapshot {
            md_req_id,
            bids,
            asks,
            ..
        } => session.send_app(
            b"W",
            now,
            |w| {
                w.str(tags::MD_REQ_ID, md_req_id.as_bytes());
                w.str(tags::SYMBOL, instrument.name().as_bytes());
                w.uint(tags::NO_MD_ENTRIES, (bids.len() + asks.len()) as u64);
                for (entry_type, levels) in [(b'0', &bids), (b'1', &asks)] {
                    for l in levels.iter() {
                        w.char(tags::MD_ENTRY_TYPE, entry_type);
                        w.decimal(tags::MD_ENTRY_PX, instrument.price(l.price));
                        w.decimal(tags::MD_ENTRY_SIZE, instrument.qty(l.qty));
                    }
                }
            },
            out,
        ),
        Publish::Incremental {
            md_req_id, entries, ..
        } => session.send_app(
            b"X",
            now,
            |w| {
                w.str(tags::MD_REQ_ID, md_req_id.as_bytes());
                w.uint(tags::NO_MD_ENTRIES, entries.len() as u64);
                for e in &entries {
                    w.char(tags::MD_UPDATE_ACTION, e.action);
                    w.char(tags::MD_ENTRY_TYPE, e.entry_type);
                    w.str(tags::SYMBOL, instrument.name().as_bytes());
                    w.decimal(tags::MD_ENTRY_PX, instrument.price(e.price_ticks));
                    w.decimal(tags::MD_ENTRY_SIZE, instrument.qty(e.qty_lots));
                    // RptSeq came with FIX 4.4.
                    if version >= ApplVersion::Fix44 {
                        w.uint(RPT_SEQ, e.rpt_seq);
                    }
                }
            },
            out,
        ),
    };
    if let Err(e) = result {
        tracing::error!("FIX store: {e}");
    }
}

/// SecurityResponseID and RptSeq, not in `tags`.
const SECURITY_RESPONSE_ID: u32 = 322;
const RPT_SEQ: u32 = 83;

/// SecurityTradingStatus (326).
const SECURITY_TRADING_STATUS: u32 = 326;

/// A phase as FIX's SecurityTradingStatus: 17 ready to trade, 21 pre-open (the call auction
/// collecting orders), 2 trading halt, 18 not available for trading (closed).
fn security_trading_status(phase: rialto_core::Phase) -> u64 {
    use rialto_core::Phase;
    match phase {
        Phase::Continuous => 17,
        Phase::Auction => 21,
        Phase::Halted => 2,
        Phase::Closed => 18,
    }
}
