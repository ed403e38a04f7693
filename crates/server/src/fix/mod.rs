//! The FIX gateway: FIX 4.2, 4.4 and FIXT.1.1/5.0SP2 sessions on one port, bound to venue
//! users, feeding the same pipeline as the binary gateway (docs/fix.md).
//!
//! It runs on the gateway's thread, inside its event loop: the binary [`crate::gateway`]
//! hands it the FIX listener's and connections' events, the replies for FIX sessions and
//! their users' fills and cancels; market data comes from the market data thread's feed
//! (market_data.rs). A FIX session ("slot") outlives
//! its connections: replies and fills that arrive while it is disconnected are stored with
//! their sequence numbers and reach the client by resend after its next Logon.

mod core;
pub mod instruments;
pub mod market_data;
pub mod orders;
pub mod test_acceptor;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Interest, Registry, Token};
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
use crate::idle::Bell;
use crate::pipeline::{Op, Pipeline, Reply, Request, SessionId, now_ns};
use crate::sockets::{Filled, TokenBucket, Transport, fill, write_pending};
use instruments::{Instrument, Instruments};
use market_data::{EntryTypes, MarketData, Publish, Subscription};
use orders::{ClOrdId, Execution, OrderDesk, Report, ToEngine, side_char};

/// Pipeline session ids of FIX sessions are `FIX_SESSION_BASE + slot`.
pub const FIX_SESSION_BASE: SessionId = 1 << 48;
/// The FIX gateway's own queries (the symbol list).
pub const FIX_SERVICE_SESSION: SessionId = FIX_SESSION_BASE - 1;
/// How often session timers run (heartbeats, test requests, logon and logout deadlines).
const TIMER_TICK: Duration = Duration::from_millis(50);
/// Requests may only be taken from a connection while the inbound ring has this much room
/// (one message makes at most one request; the rest is slack for the follow-ups).
const RING_ROOM: usize = 4;
/// A resend in progress writes its next chunk once its connection has less than this unsent.
const RESEND_LOW_WATER: usize = 64 << 10;
/// A connection whose output waiting for its session's store in the cluster is over this is
/// paused (its input is not read) until the cluster has caught up.
const STORE_BACKLOG_BYTES: usize = 1 << 20;
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

struct Conn {
    stream: Transport,
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
    readable: bool,
    /// The peer has shut down its side: read to the end of the stream, short reads or not.
    read_closed: bool,
    /// Waiting for room in the inbound ring.
    paused: bool,
    /// Close once the output is written.
    closing: bool,
    opened: Instant,
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

/// The state every connection handler needs besides its connection.
struct Core {
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
    last_prune: Instant,
}

pub struct FixGateway {
    listener: TcpListener,
    conns: HashMap<SessionId, Conn>,
    core: Core,
    dirty: Vec<SessionId>,
    /// Reused for the connections to read.
    scratch: Vec<SessionId>,
    /// Output of a slot with no connection (its messages are stored, not written).
    offline: Vec<u8>,
    last_timer: Instant,
    symbols_stale: bool,
    /// An accept failed: try again at the next housekeeping.
    retry_accept: bool,
    accept_failures: LogLimiter,
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

impl FixGateway {
    /// `feed` is the market data thread's outlet, which FIX market data is served from.
    pub fn bind(
        config: FixConfig,
        credentials: Arc<Credentials>,
        instruments: Instruments,
        feed: Arc<crate::feed::MarketData>,
    ) -> io::Result<FixGateway> {
        let listener = crate::sockets::listen_mio(config.listen)?;
        std::fs::create_dir_all(config.data_dir.join("fix"))?;
        let pending_logons = PreAuthBudget::new(
            config.max_pending_logons,
            config.max_pending_logons_per_address,
        );
        Ok(FixGateway {
            listener,
            conns: HashMap::new(),
            core: Core {
                config,
                credentials,
                slots: Vec::new(),
                slot_index: HashMap::new(),
                instruments,
                market_data: MarketData::new(feed),
                deferred: VecDeque::new(),
                reports: Vec::new(),
                publishes: Vec::new(),
                shutting_down: false,
                pending_logons,
                throttle: LoginThrottle::new(ThrottleSettings::default()),
                refusals: LogLimiter::new(LOG_EVERY),
                last_prune: Instant::now(),
            },
            dirty: Vec::new(),
            scratch: Vec::new(),
            offline: Vec::new(),
            last_timer: Instant::now(),
            // Symbols added since the engine was recovered (the demo set-up) come with the
            // first refresh.
            symbols_stale: true,
            retry_accept: false,
            accept_failures: LogLimiter::new(LOG_EVERY),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The bell of the gateway's event loop: the feed rings it after each batch while a FIX
    /// market data subscription is open.
    pub fn set_bell(&mut self, bell: Arc<Bell>) {
        if let Some(mirror) = &self.core.config.mirror {
            mirror.set_bell(bell.clone());
        }
        self.core.market_data.set_bell(bell);
    }

    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    pub fn owns(&self, id: SessionId) -> bool {
        self.conns.contains_key(&id)
    }

    /// Accepts every waiting connection; ids come from the gateway's counter.
    pub fn accept(&mut self, registry: &Registry, next_id: &mut SessionId) {
        loop {
            let (mut stream, peer) = match self.listener.accept() {
                Ok(conn) => conn,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    self.retry_accept = true;
                    self.accept_failures.note(Instant::now(), |suppressed| {
                        tracing::warn!(suppressed, "FIX accept failed (retried): {e}")
                    });
                    return;
                }
            };
            let logged_on = self.conns.len() - self.core.pending_logons.len();
            if self.core.shutting_down || logged_on >= self.core.config.max_connections {
                continue; // dropped: FIX has nothing to say before a Logon
            }
            let _ = stream.set_nodelay(true);
            let id = *next_id;
            *next_id += 1;
            let interest = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = registry.register(&mut stream, Token(id as usize), interest) {
                tracing::warn!("cannot register a FIX connection: {e}");
                continue;
            }
            let stream = match Transport::new(stream, self.core.config.tls.as_ref()) {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!("cannot start TLS on a FIX connection: {e}");
                    continue;
                }
            };
            tracing::debug!(conn = id, %peer, "FIX connection opened");
            let peer = PeerKey::of(peer.ip());
            if let Some(evicted) = self.core.pending_logons.admit(id, peer)
                && let Some(mut old) = self.conns.remove(&evicted)
            {
                // Its budget is spent: the oldest connection waiting to log on makes room, at
                // once (it has no session to detach), so that it never counts as logged on.
                let _ = registry.deregister(old.stream.tcp());
                let _ = old.stream.tcp().shutdown(std::net::Shutdown::Both);
            }
            self.conns.insert(
                id,
                Conn {
                    stream,
                    peer,
                    input: vec![0; self.core.config.max_message_bytes + 16 * 1024],
                    input_start: 0,
                    input_end: 0,
                    output: Vec::with_capacity(4096),
                    output_pos: 0,
                    sendable: 0,
                    store_marks: VecDeque::new(),
                    slot: None,
                    readable: true,
                    read_closed: false,
                    paused: false,
                    closing: false,
                    opened: Instant::now(),
                    bucket: TokenBucket::new(self.core.config.burst),
                },
            );
        }
    }

    /// Accepts again if an accept failed (out of file descriptors): the connections
    /// already waiting bring no new event.
    pub fn retry_accept(&mut self, registry: &Registry, next_id: &mut SessionId) {
        if std::mem::take(&mut self.retry_accept) {
            self.accept(registry, next_id);
        }
    }

    pub fn on_event(&mut self, id: SessionId, event: &mio::event::Event) {
        if let Some(c) = self.conns.get_mut(&id) {
            if event.is_readable() || event.is_read_closed() {
                c.readable = true;
            }
            if event.is_read_closed() {
                c.read_closed = true;
            }
            let writable = event.is_writable();
            if writable && (c.output_pos < c.output.len() || c.stream.wants_write()) {
                self.dirty.push(id);
            }
        }
    }

    /// Reads and handles what the connections sent. Returns the messages handled.
    pub fn read(&mut self, pipeline: &mut Pipeline, registry: &Registry) -> usize {
        let mut work = self.push_deferred(pipeline);
        if !self.core.deferred.is_empty() {
            return work;
        }
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.extend(
            self.conns
                .iter()
                .filter(|(_, c)| (c.readable || c.paused) && !c.closing)
                .map(|(id, _)| *id),
        );
        for &id in &ids {
            work += self.read_conn(id, pipeline);
            if room(pipeline) < RING_ROOM {
                break;
            }
        }
        self.scratch = ids;
        self.close_finished(registry);
        work
    }

    fn read_conn(&mut self, id: SessionId, pipeline: &mut Pipeline) -> usize {
        let Some(conn) = self.conns.get_mut(&id) else {
            return 0;
        };
        let mut handled = 0;
        let max = self.core.config.max_message_bytes;
        loop {
            // Handle every whole message already here. The input leaves the connection
            // meanwhile: a frame borrows it while the handlers write to the connection.
            let input = std::mem::take(&mut conn.input);
            while !conn.closing {
                if room(pipeline) < RING_ROOM
                    || !self.core.deferred.is_empty()
                    || conn.output.len() - conn.sendable > STORE_BACKLOG_BYTES
                {
                    conn.paused = true;
                    break;
                }
                conn.paused = false;
                let buffered = &input[conn.input_start..conn.input_end];
                match next_frame(buffered, max) {
                    Ok(None) => break,
                    Ok(Some((frame, len))) => {
                        let config = &self.core.config;
                        if !conn.bucket.take(config.max_msgs_per_sec, config.burst) {
                            tracing::warn!(conn = id, "FIX connection over its message rate");
                            self.core.logout(conn, "message rate limit exceeded");
                            break;
                        }
                        handled += 1;
                        self.core.on_frame(id, conn, &frame, pipeline);
                        conn.input_start += len;
                    }
                    Err(garbled) => {
                        let now = now_ns();
                        let skip = garbled.skip.min(buffered.len()).max(1);
                        tracing::debug!(conn = id, reason = garbled.reason, "garbled FIX input");
                        if let Some(slot) = conn.slot {
                            let chunk = &input[conn.input_start..conn.input_start + skip];
                            if let Err(e) = self.core.slots[slot].session.on_garbled(chunk, now) {
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
            if conn.output_pos < conn.output.len() && !self.dirty.contains(&id) {
                self.dirty.push(id);
            }
            if conn.closing || conn.paused || !conn.readable {
                return handled;
            }
            // Compact, then read more.
            let input = &mut conn.input;
            match fill(
                &mut conn.stream,
                input,
                &mut conn.input_start,
                &mut conn.input_end,
            ) {
                Filled::Bytes { drained } => {
                    // A short read found the socket empty: wait for the next event.
                    if drained && !conn.read_closed {
                        conn.readable = false;
                    }
                }
                Filled::WouldBlock => {
                    conn.readable = false;
                    return handled;
                }
                Filled::Eof => {
                    conn.closing = true;
                    conn.readable = false;
                    return handled;
                }
                // A message longer than the buffer: not one we take.
                Filled::Full | Filled::Failed => {
                    conn.closing = true;
                    return handled;
                }
            }
        }
    }

    fn push_deferred(&mut self, pipeline: &mut Pipeline) -> usize {
        let mut n = 0;
        while let Some(request) = self.core.deferred.pop_front() {
            if let Err(request) = pipeline.inbound.try_push(request) {
                self.core.deferred.push_front(request);
                break;
            }
            n += 1;
        }
        if n > 0 {
            pipeline.inbound.ring();
        }
        n
    }

    /// A reply for a FIX session or for the gateway's own queries.
    pub fn on_reply(&mut self, id: SessionId, msg: &Event) {
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
    pub fn on_user_message(&mut self, user: UserId, msg: &Event) {
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

    /// A message for everyone: a symbol's phase change goes to every logged-on session as
    /// SecurityStatus (f) with its SecurityTradingStatus (docs/fix.md, "Trading phases").
    pub fn on_public_message(&mut self, msg: &Event) {
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
                now_ns(),
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

    /// Every message the engine sends passes here once: a change of the symbols refreshes
    /// the list.
    pub fn observe(&mut self, msg: &Event) {
        if let Event::AdminResult { result: Ok(()), .. } = msg {
            self.symbols_stale = true;
        }
    }

    /// Market data from the feed, timers, the symbol list refresh. Returns work done.
    pub fn tick(&mut self, pipeline: &mut Pipeline, registry: &Registry) -> usize {
        let work = self.pump_market_data();
        if self.symbols_stale {
            self.symbols_stale = false;
            let request = Request {
                session: FIX_SERVICE_SESSION,
                reply: Reply::Symbols { request: 0 },
                op: Op::ListSymbols,
            };
            self.core.push_request(request, pipeline);
        }
        if self.last_timer.elapsed() >= TIMER_TICK {
            self.last_timer = Instant::now();
            let now = now_ns();
            let ids: Vec<SessionId> = self.conns.keys().copied().collect();
            for id in ids {
                let Some(conn) = self.conns.get_mut(&id) else {
                    continue;
                };
                match conn.slot {
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
                    None => {
                        if conn.opened.elapsed() > self.core.config.logon_timeout {
                            conn.closing = true; // no Logon in time
                        }
                    }
                }
                if conn.output_pos < conn.output.len() {
                    self.dirty.push(id);
                }
            }
            self.close_finished(registry);
            if self.core.last_prune.elapsed() >= PRUNE_EVERY {
                self.core.last_prune = Instant::now();
                self.core.throttle.prune(self.core.last_prune);
            }
        }
        work
    }

    /// Writes pending output, after the session stores: nothing reaches a client before it
    /// is in the store it may be resent from. With a replicated log a session's output waits
    /// for the cluster's acknowledgement of its store (fixstore.rs) without holding up the
    /// other sessions'.
    pub fn flush(&mut self, registry: &Registry) {
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
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &id in &dirty {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            let end = c.sendable.max(c.output_pos);
            if !write_pending(&mut c.stream, &c.output[..end], &mut c.output_pos) {
                c.closing = true;
                c.output_pos = c.output.len();
            }
            // Output held for the cluster keeps the buffer from emptying: drop what is
            // written once it is at least half of it (each byte moves at most once or so).
            let compact = c.output_pos >= RESEND_LOW_WATER && c.output_pos * 2 >= c.output.len();
            if c.output_pos == c.output.len() || compact {
                c.consumed();
            }
            if c.output.len() - c.output_pos > 64 << 20 {
                tracing::warn!(conn = id, "closing a FIX connection that does not read");
                c.output_pos = c.output.len();
                c.consumed();
                c.closing = true;
            }
        }
        dirty.clear();
        self.dirty = dirty;
        self.close_finished(registry);
    }

    /// Writes the next chunk of every resend in progress whose connection has read what it
    /// was sent: a resend costs what the counterparty reads, one chunk per turn of the loop,
    /// and other sessions' messages go between its chunks.
    fn pump_resends(&mut self) {
        let now = now_ns();
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

    /// Feed batches wait for the next turn of the loop (checked after the gateway announced
    /// that it sleeps: one that arrives later rings its bell).
    pub fn has_market_data(&self) -> bool {
        self.core.market_data.has_batches()
    }

    /// Something waits for room in the inbound ring, or a session's store write to the
    /// cluster has finished: look again soon.
    pub fn is_waiting(&self) -> bool {
        !self.core.deferred.is_empty()
            || self.conns.values().any(|c| c.paused)
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

    /// Logs every session out (the server is stopping) and accepts no more connections.
    pub fn begin_shutdown(&mut self, registry: &Registry) {
        self.core.shutting_down = true;
        let _ = registry.deregister(&mut self.listener);
        let ids: Vec<SessionId> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(conn) = self.conns.get_mut(&id) {
                self.core.logout(conn, "the server is shutting down");
                self.dirty.push(id);
            }
        }
    }

    /// Closes every connection (after the last flush).
    pub fn close_all(&mut self, registry: &Registry) {
        for c in self.conns.values_mut() {
            c.closing = true;
            c.output_pos = c.output.len();
        }
        self.close_finished(registry);
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

    fn close_finished(&mut self, registry: &Registry) {
        let done: Vec<SessionId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.closing && c.output_pos >= c.output.len())
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            let Some(mut conn) = self.conns.remove(&id) else {
                continue;
            };
            let _ = registry.deregister(conn.stream.tcp());
            conn.stream.shutdown_write();
            let _ = conn.stream.tcp().shutdown(std::net::Shutdown::Both);
            self.core.pending_logons.leave(id);
            tracing::debug!(conn = id, "FIX connection closed");
            if let Some(slot) = conn.slot {
                self.core.detach(slot);
            }
        }
    }

    /// Takes the feed's batches that arrived and sends what they changed to the subscribers.
    fn pump_market_data(&mut self) -> usize {
        let mut publishes = std::mem::take(&mut self.core.publishes);
        let (conns, slots) = (&self.conns, &self.core.slots);
        let backlog = |slot: usize| {
            slots[slot]
                .conn
                .and_then(|id| conns.get(&id))
                .map_or(0, |c| c.output.len() - c.output_pos)
        };
        let batches = self.core.market_data.pump(backlog, &mut publishes);
        for p in publishes.drain(..) {
            let slot = p.slot();
            let conn = self.core.slots[slot].conn;
            let out = output_of(&mut self.conns, &mut self.offline, &mut self.dirty, conn);
            write_market_data(&mut self.core.slots[slot], &self.core.instruments, p, out);
        }
        self.core.publishes = publishes;
        batches
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
            now_ns(),
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
fn write_market_data(slot: &mut Slot, instruments: &Instruments, p: Publish, out: &mut Vec<u8>) {
    let Some(instrument) = instruments.by_id(p.symbol()).copied() else {
        return;
    };
    let version = slot.session.default_appl_version();
    let session = &mut slot.session;
    let now = now_ns();
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

fn room(pipeline: &Pipeline) -> usize {
    pipeline.inbound.capacity() - pipeline.inbound.len()
}

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
