//! The FIX gateway: FIX 4.2, 4.4 and FIXT.1.1/5.0SP2 sessions on one port, bound to venue
//! users, feeding the same pipeline as the binary gateway (docs/fix.md).
//!
//! It runs on the gateway's thread, inside its event loop: the binary [`crate::gateway`]
//! hands it the FIX listener's and connections' events, the replies for FIX sessions, and
//! every fill and cancel (for the market data it publishes). A FIX session ("slot") outlives
//! its connections: replies and fills that arrive while it is disconnected are stored with
//! their sequence numbers and reach the client by resend after its next Logon.

pub mod instruments;
pub mod market_data;
pub mod orders;
pub mod test_acceptor;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use rialto_core::{Command, SymbolId, UserId};
use rialto_fix::app::{self, ExecutionReport};
use rialto_fix::session::{
    BusinessReject, FileStore, Logon, MessageLog, MessageStore, Outcome, Reject, Session,
    SessionConfig, business_reject_reason,
};
use rialto_fix::{Decimal, Frame, MessageWriter, Version, next_frame, tags};
use rialto_wire::{Liquidity, ServerMsg};

use crate::auth::Credentials;
use crate::pipeline::{Op, Pipeline, Reply, Request, SessionId};
use instruments::{Instrument, Instruments};
use market_data::{MarketData, Publish, Subscription};
use orders::{ClOrdId, Execution, OrderDesk, Report, ToEngine, side_char};

/// Pipeline session ids of FIX sessions are `FIX_SESSION_BASE + slot`.
pub const FIX_SESSION_BASE: SessionId = 1 << 48;
/// The FIX gateway's own queries (books for market data, the symbol list).
pub const FIX_SERVICE_SESSION: SessionId = FIX_SESSION_BASE - 1;
/// How often subscribed books are compared with the engine's.
const BOOK_POLL: Duration = Duration::from_millis(5);
/// How often session timers run (heartbeats, test requests, logon and logout deadlines).
const TIMER_TICK: Duration = Duration::from_millis(50);
/// Requests may only be taken from a connection while the inbound ring has this much room
/// (one message makes at most one request; the rest is slack for the follow-ups).
const RING_ROOM: usize = 4;
/// OrderIDs of a slot start at `(stable slot number + 1) << 40`: apart from each other and
/// from the small ids binary clients usually choose.
const ORDER_ID_SPACE_BITS: u32 = 40;

pub struct FixConfig {
    pub listen: SocketAddr,
    pub comp_id: String,
    /// SenderCompID → (user, cancel on disconnect, a stable number for OrderID ranges).
    pub sessions: HashMap<String, SessionBinding>,
    pub max_connections: usize,
    pub max_message_bytes: usize,
    pub max_clock_skew_ns: i64,
    pub max_msgs_per_sec: u64,
    pub burst: u64,
    pub message_log: bool,
    /// Session stores and message logs go to `data_dir/fix`.
    pub data_dir: PathBuf,
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
    version: Version,
    user: UserId,
    cancel_on_disconnect: bool,
    session: Session<FileStore>,
    desk: OrderDesk,
    conn: Option<SessionId>,
    /// SecurityListRequests waiting for the symbol list.
    security_lists: VecDeque<String>,
}

struct Conn {
    stream: TcpStream,
    /// Received bytes not yet handled are `input[input_start..input_end]`.
    input: Vec<u8>,
    input_start: usize,
    input_end: usize,
    output: Vec<u8>,
    output_pos: usize,
    slot: Option<usize>,
    readable: bool,
    /// Waiting for room in the inbound ring.
    paused: bool,
    /// Close once the output is written.
    closing: bool,
    opened: Instant,
    tokens: f64,
    tokens_at: Instant,
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
    last_book_poll: Instant,
    last_timer: Instant,
    symbols_stale: bool,
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

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl FixGateway {
    pub fn bind(
        config: FixConfig,
        credentials: Arc<Credentials>,
        instruments: Instruments,
    ) -> io::Result<FixGateway> {
        let listener = TcpListener::bind(config.listen)?;
        std::fs::create_dir_all(config.data_dir.join("fix"))?;
        Ok(FixGateway {
            listener,
            conns: HashMap::new(),
            core: Core {
                config,
                credentials,
                slots: Vec::new(),
                slot_index: HashMap::new(),
                instruments,
                market_data: MarketData::default(),
                deferred: VecDeque::new(),
                reports: Vec::new(),
                publishes: Vec::new(),
                shutting_down: false,
            },
            dirty: Vec::new(),
            scratch: Vec::new(),
            offline: Vec::new(),
            // The first tick asks for the symbol list at once.
            last_book_poll: Instant::now()
                .checked_sub(BOOK_POLL)
                .unwrap_or_else(Instant::now),
            last_timer: Instant::now(),
            // Symbols added since the engine was recovered (the demo set-up) come with the
            // first refresh.
            symbols_stale: true,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
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
                    tracing::warn!("FIX accept failed: {e}");
                    return;
                }
            };
            if self.core.shutting_down || self.conns.len() >= self.core.config.max_connections {
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
            tracing::debug!(conn = id, %peer, "FIX connection opened");
            self.conns.insert(
                id,
                Conn {
                    stream,
                    input: vec![0; self.core.config.max_message_bytes + 16 * 1024],
                    input_start: 0,
                    input_end: 0,
                    output: Vec::with_capacity(4096),
                    output_pos: 0,
                    slot: None,
                    readable: true,
                    paused: false,
                    closing: false,
                    opened: Instant::now(),
                    tokens: self.core.config.burst as f64,
                    tokens_at: Instant::now(),
                },
            );
        }
    }

    pub fn on_event(&mut self, id: SessionId, readable: bool, writable: bool) {
        if let Some(c) = self.conns.get_mut(&id) {
            if readable {
                c.readable = true;
            }
            if writable && c.output_pos < c.output.len() {
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
                if room(pipeline) < RING_ROOM || !self.core.deferred.is_empty() {
                    conn.paused = true;
                    break;
                }
                conn.paused = false;
                let buffered = &input[conn.input_start..conn.input_end];
                match next_frame(buffered, max) {
                    Ok(None) => break,
                    Ok(Some((frame, len))) => {
                        if !allow(conn, &self.core.config) {
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
            if conn.input_start > 0 {
                conn.input.copy_within(conn.input_start..conn.input_end, 0);
                conn.input_end -= conn.input_start;
                conn.input_start = 0;
            }
            if conn.input_end == conn.input.len() {
                conn.closing = true; // a message longer than the buffer: not one we take
                return handled;
            }
            match conn.stream.read(&mut conn.input[conn.input_end..]) {
                Ok(0) => {
                    conn.closing = true;
                    conn.readable = false;
                    return handled;
                }
                Ok(n) => conn.input_end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    conn.readable = false;
                    return handled;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
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
    pub fn on_reply(&mut self, id: SessionId, msg: &ServerMsg) {
        if id == FIX_SERVICE_SESSION {
            match msg {
                ServerMsg::Book {
                    symbol, bids, asks, ..
                } => {
                    let mut publishes = std::mem::take(&mut self.core.publishes);
                    self.core
                        .market_data
                        .on_book(*symbol, bids, asks, &mut publishes);
                    self.publish(&mut publishes);
                    self.core.publishes = publishes;
                }
                ServerMsg::SymbolList { symbols, .. } => self.core.instruments.refresh(symbols),
                _ => {}
            }
            return;
        }
        let slot = (id - FIX_SESSION_BASE) as usize;
        if slot >= self.core.slots.len() {
            return;
        }
        let mut reports = std::mem::take(&mut self.core.reports);
        match *msg {
            ServerMsg::Accepted {
                seq,
                ts_ns,
                order,
                kind,
            } => {
                self.core.slots[slot]
                    .desk
                    .on_reply(order, kind, Ok(()), seq, ts_ns, &mut reports);
            }
            ServerMsg::Rejected {
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
            ServerMsg::SymbolList { ref symbols, .. } => {
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

    /// A message for a user's sessions (fills and cancels), and every fill for market data.
    pub fn on_user_message(&mut self, user: UserId, msg: &ServerMsg, pipeline: &mut Pipeline) {
        let mut reports = std::mem::take(&mut self.core.reports);
        for slot in 0..self.core.slots.len() {
            if self.core.slots[slot].user != user {
                continue;
            }
            let desk = &mut self.core.slots[slot].desk;
            match *msg {
                ServerMsg::Trade {
                    seq,
                    ts_ns,
                    order,
                    price,
                    qty,
                    ..
                } => desk.on_trade(order, price, qty, seq, ts_ns, &mut reports),
                ServerMsg::Cancelled {
                    seq,
                    ts_ns,
                    order,
                    qty,
                    reason,
                    ..
                } => {
                    if let Some(follow_up) =
                        desk.on_cancelled(order, qty, reason, seq, ts_ns, &mut reports)
                    {
                        self.core.push(slot, follow_up, pipeline);
                    }
                }
                _ => {}
            }
            self.send_reports(slot, &mut reports);
        }
        self.core.reports = reports;
    }

    /// Every message the engine sends passes here once: fills feed the trade stream, and any
    /// order event may have changed a book.
    pub fn observe(&mut self, msg: &ServerMsg) {
        match *msg {
            ServerMsg::Trade {
                symbol,
                price,
                qty,
                liquidity: Liquidity::Taker,
                ..
            } => {
                let mut publishes = std::mem::take(&mut self.core.publishes);
                self.core
                    .market_data
                    .on_trade(symbol, price, qty, &mut publishes);
                self.publish(&mut publishes);
                self.core.publishes = publishes;
            }
            ServerMsg::Accepted { .. } | ServerMsg::Cancelled { .. } => {
                self.core.market_data.mark_all_dirty()
            }
            ServerMsg::AdminResult { result: Ok(()), .. } => self.symbols_stale = true,
            _ => {}
        }
    }

    /// Timers, market data polls, the symbol list refresh. Returns work done.
    pub fn tick(&mut self, pipeline: &mut Pipeline, registry: &Registry) -> usize {
        let mut work = 0;
        if self.last_book_poll.elapsed() >= BOOK_POLL {
            self.last_book_poll = Instant::now();
            let mut symbols = Vec::new();
            self.core.market_data.books_to_ask(&mut symbols);
            for symbol in symbols {
                let depth = market_data::MAX_DEPTH as i64;
                let request = Request {
                    session: FIX_SERVICE_SESSION,
                    reply: Reply::Book { request: 0 },
                    op: Op::Command(Command::Book { symbol, depth }),
                };
                self.core.push_request(request, pipeline);
                work += 1;
            }
            if self.symbols_stale {
                self.symbols_stale = false;
                let request = Request {
                    session: FIX_SERVICE_SESSION,
                    reply: Reply::Symbols { request: 0 },
                    op: Op::ListSymbols,
                };
                self.core.push_request(request, pipeline);
            }
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
                        if conn.opened.elapsed() > Duration::from_secs(10) {
                            conn.closing = true; // no Logon in time
                        }
                    }
                }
                if conn.output_pos < conn.output.len() {
                    self.dirty.push(id);
                }
            }
            self.close_finished(registry);
        }
        work
    }

    /// Writes pending output, after the session stores: nothing reaches a client before it
    /// is in the store it may be resent from.
    pub fn flush(&mut self, registry: &Registry) {
        for slot in &mut self.core.slots {
            if let Err(e) = slot.session.flush_stores() {
                tracing::error!(session = %slot.name, "FIX store: {e}");
                if let Some(c) = slot.conn.and_then(|id| self.conns.get_mut(&id)) {
                    // What is buffered cannot be resent: close instead of sending it.
                    c.output.truncate(c.output_pos);
                    c.closing = true;
                }
            }
        }
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &id in &dirty {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            while c.output_pos < c.output.len() {
                match c.stream.write(&c.output[c.output_pos..]) {
                    Ok(0) => {
                        c.closing = true;
                        c.output_pos = c.output.len();
                    }
                    Ok(n) => c.output_pos += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        c.closing = true;
                        c.output_pos = c.output.len();
                    }
                }
            }
            if c.output_pos == c.output.len() {
                c.output.clear();
                c.output_pos = 0;
            } else if c.output.len() - c.output_pos > 64 << 20 {
                tracing::warn!(conn = id, "closing a FIX connection that does not read");
                c.output.clear();
                c.output_pos = 0;
                c.closing = true;
            }
        }
        dirty.clear();
        self.dirty = dirty;
        self.close_finished(registry);
    }

    /// Something waits for room in the inbound ring: look again soon.
    pub fn is_waiting(&self) -> bool {
        !self.core.deferred.is_empty() || self.conns.values().any(|c| c.paused)
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
            if let Err(e) = slot.session.flush_stores() {
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
            let _ = registry.deregister(&mut conn.stream);
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            tracing::debug!(conn = id, "FIX connection closed");
            if let Some(slot) = conn.slot {
                self.core.detach(slot);
            }
        }
    }

    fn publish(&mut self, publishes: &mut Vec<Publish>) {
        for p in publishes.drain(..) {
            let (slot, symbol) = match &p {
                Publish::Snapshot { slot, symbol, .. }
                | Publish::Incremental { slot, symbol, .. } => (*slot, *symbol),
            };
            let Some(instrument) = self.core.instruments.by_id(symbol).copied() else {
                continue;
            };
            let version = self.core.slots[slot].version;
            let conn = self.core.slots[slot].conn;
            let out = output_of(&mut self.conns, &mut self.offline, &mut self.dirty, conn);
            let session = &mut self.core.slots[slot].session;
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
                            if version != Version::Fix42 {
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
                w.uint(tags::NO_RELATED_SYM, names.len() as u64);
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

/// SecurityResponseID and RptSeq, not in `tags`.
const SECURITY_RESPONSE_ID: u32 = 322;
const RPT_SEQ: u32 = 83;

fn room(pipeline: &Pipeline) -> usize {
    pipeline.inbound.capacity() - pipeline.inbound.len()
}

/// The connection's message rate (a token bucket).
fn allow(conn: &mut Conn, config: &FixConfig) -> bool {
    if config.max_msgs_per_sec == 0 {
        return true;
    }
    let now = Instant::now();
    let refill = now.duration_since(conn.tokens_at).as_secs_f64() * config.max_msgs_per_sec as f64;
    conn.tokens = (conn.tokens + refill).min(config.burst as f64);
    conn.tokens_at = now;
    if conn.tokens >= 1.0 {
        conn.tokens -= 1.0;
        true
    } else {
        false
    }
}

impl Core {
    fn logout(&mut self, conn: &mut Conn, text: &str) {
        match conn.slot {
            Some(slot) => match self.slots[slot]
                .session
                .logout(text, now_ns(), &mut conn.output)
            {
                Ok(Outcome::Disconnect) | Err(_) => conn.closing = true,
                Ok(_) => {}
            },
            None => conn.closing = true,
        }
    }

    /// The connection of a slot is gone.
    fn detach(&mut self, slot: usize) {
        let now = now_ns();
        let s = &mut self.slots[slot];
        s.conn = None;
        if let Err(e) = s.session.on_disconnect(now) {
            tracing::error!(session = %s.name, "FIX store: {e}");
        }
        self.market_data.unsubscribe(slot, None);
        if self.slots[slot].cancel_on_disconnect && !self.shutting_down {
            let cancels = self.slots[slot].desk.cancel_all();
            tracing::info!(
                session = %self.slots[slot].name,
                orders = cancels.len(),
                "cancel on disconnect"
            );
            for c in cancels {
                let request = self.request(slot, c);
                self.deferred.push_back(request);
            }
        }
    }

    fn request(&self, slot: usize, t: ToEngine) -> Request {
        Request {
            session: FIX_SESSION_BASE + slot as SessionId,
            reply: Reply::Order {
                order: t.order,
                kind: t.kind,
            },
            op: Op::Command(t.command),
        }
    }

    fn push(&mut self, slot: usize, t: ToEngine, pipeline: &mut Pipeline) {
        let request = self.request(slot, t);
        self.push_request(request, pipeline);
    }

    fn push_request(&mut self, request: Request, pipeline: &mut Pipeline) {
        if !self.deferred.is_empty() {
            self.deferred.push_back(request);
            return;
        }
        match pipeline.inbound.try_push(request) {
            Ok(()) => pipeline.inbound.ring(),
            Err(request) => self.deferred.push_back(request),
        }
    }

    /// Writes one report through the slot's session into `out`.
    fn send_report(&mut self, slot: usize, report: &Report, out: &mut Vec<u8>) {
        let version = self.slots[slot].version;
        let now = now_ns();
        let result = match report {
            Report::Execution(exec) => {
                let instrument = self.instruments.by_id(exec.order.symbol).copied();
                let session = &mut self.slots[slot].session;
                let seq = session.next_sender_seq();
                let mut exec_id = [0u8; 48];
                let exec_id = write_exec_id(&mut exec_id, exec.seq, slot, seq);
                let mut order_id = [0u8; 24];
                let order_id = write_order_id(&mut order_id, exec.order.order_id);
                session.send_app(
                    b"8",
                    now,
                    |w| write_execution(w, version, exec, instrument.as_ref(), exec_id, order_id),
                    out,
                )
            }
            Report::CancelReject {
                order_id,
                cl_ord_id,
                orig_cl_ord_id,
                ord_status,
                response_to,
                reason,
                text,
            } => {
                let mut id_buf = [0u8; 24];
                let order_id = write_order_id(&mut id_buf, order_id.unwrap_or(0));
                let reject = app::OrderCancelReject {
                    order_id,
                    cl_ord_id: cl_ord_id.as_bytes(),
                    orig_cl_ord_id: orig_cl_ord_id.as_bytes(),
                    ord_status: *ord_status,
                    response_to: *response_to,
                    reason: *reason,
                    text: text.as_bytes(),
                };
                self.slots[slot]
                    .session
                    .send_app(b"9", now, |w| reject.write(w), out)
            }
            Report::MassCancel {
                cl_ord_id,
                request_type,
                accepted,
                text,
            } => self.slots[slot].session.send_app(
                b"r",
                now,
                |w| {
                    w.str(tags::CL_ORD_ID, cl_ord_id.as_bytes());
                    w.str(tags::ORDER_ID, b"NONE");
                    w.char(tags::MASS_CANCEL_REQUEST_TYPE, *request_type);
                    w.char(
                        tags::MASS_CANCEL_RESPONSE,
                        if *accepted { *request_type } else { b'0' },
                    );
                    if !accepted {
                        w.uint(tags::MASS_CANCEL_REJECT_REASON, 99);
                    }
                    if !text.is_empty() {
                        w.str(tags::TEXT, text.as_bytes());
                    }
                },
                out,
            ),
        };
        if let Err(e) = result {
            tracing::error!(session = %self.slots[slot].name, "FIX store: {e}");
        }
    }

    /// Finds (or creates) the slot a connection's first message names.
    fn attach(&mut self, id: SessionId, conn: &mut Conn, frame: &Frame<'_>) -> Option<usize> {
        let version = Version::from_begin_string(frame.begin_string)?;
        let sender = std::str::from_utf8(frame.get(tags::SENDER_COMP_ID)?).ok()?;
        let binding = *self.config.sessions.get(sender)?;
        let key = (sender.to_string(), version);
        let slot = match self.slot_index.get(&key) {
            Some(&slot) => slot,
            None => {
                let slot = self.open_slot(sender, version, binding).ok()?;
                self.slot_index.insert(key, slot);
                slot
            }
        };
        if let Some(other) = self.slots[slot].conn {
            tracing::warn!(
                session = %self.slots[slot].name,
                conn = id,
                other,
                "refused a second connection for a logged-on FIX session"
            );
            return None;
        }
        self.slots[slot].conn = Some(id);
        self.slots[slot].session.on_connect(now_ns());
        conn.slot = Some(slot);
        Some(slot)
    }

    fn open_slot(
        &mut self,
        sender: &str,
        version: Version,
        binding: SessionBinding,
    ) -> io::Result<usize> {
        let mut config = SessionConfig::new(version, &self.config.comp_id, sender);
        config.max_clock_skew_ns = self.config.max_clock_skew_ns;
        // Written once per turn of the loop, before the sockets (FixGateway::flush).
        config.defer_flush = true;
        let name = config.session_name();
        let dir = self.config.data_dir.join("fix");
        let store = FileStore::open(&dir, &name)?;
        let mut session = Session::new(config, store);
        if self.config.message_log {
            session = session.with_log(MessageLog::open(&dir, &name)?);
        }
        let version_number = match version {
            Version::Fix42 => 0,
            Version::Fix44 => 1,
            Version::Fixt11 => 2,
        };
        let first_id = (binding.number * 3 + version_number + 1) << ORDER_ID_SPACE_BITS;
        let mut desk = OrderDesk::new(binding.user, first_id);
        restore_desk(&mut desk, session.store_mut(), &self.instruments);
        let slot = self.slots.len();
        tracing::info!(session = %name, user = binding.user, live_orders = desk.live_orders().count(), "FIX session opened");
        self.slots.push(Slot {
            name,
            version,
            user: binding.user,
            cancel_on_disconnect: binding.cancel_on_disconnect,
            session,
            desk,
            conn: None,
            security_lists: VecDeque::new(),
        });
        Ok(slot)
    }

    /// One whole message from a connection.
    fn on_frame(
        &mut self,
        id: SessionId,
        conn: &mut Conn,
        frame: &Frame<'_>,
        pipeline: &mut Pipeline,
    ) {
        let slot = match conn.slot {
            Some(slot) => slot,
            None => match self.attach(id, conn, frame) {
                Some(slot) => slot,
                None => {
                    tracing::warn!(
                        conn = id,
                        "FIX connection for no configured session: closed"
                    );
                    conn.closing = true;
                    return;
                }
            },
        };
        let now = now_ns();
        let credentials = &self.credentials;
        let s = &mut self.slots[slot];
        let user = s.user;
        let mut auth = |logon: &Logon<'_>| -> Result<(), String> {
            let Some(username) = logon.username else {
                return Err("Username (553) is required: the venue user id".into());
            };
            if username != user.to_string().as_bytes() {
                return Err("this session belongs to another user".into());
            }
            let password = logon.password.unwrap_or(b"");
            if !credentials.check_user(user, password) {
                return Err("wrong Password (554)".into());
            }
            Ok(())
        };
        let outcome = s
            .session
            .on_message(frame, now, &mut auth, &mut conn.output);
        match outcome {
            Ok(Outcome::Handled) => {}
            Ok(Outcome::LoggedOn) => {
                tracing::info!(session = %s.name, conn = id, "FIX logon");
            }
            Ok(Outcome::Deliver) => self.on_application(slot, conn, frame, pipeline, now),
            Ok(Outcome::Disconnect) => {
                tracing::info!(
                    session = %s.name,
                    reason = s.session.disconnect_reason().unwrap_or(""),
                    "FIX session disconnects"
                );
                conn.closing = true;
            }
            Err(e) => {
                tracing::error!(session = %s.name, "FIX store: {e}");
                conn.closing = true;
            }
        }
    }

    fn on_application(
        &mut self,
        slot: usize,
        conn: &mut Conn,
        frame: &Frame<'_>,
        pipeline: &mut Pipeline,
        now: i64,
    ) {
        let ref_seq = frame
            .get(tags::MSG_SEQ_NUM)
            .and_then(rialto_fix::parse::parse_uint)
            .unwrap_or(0);
        let reject = |s: &mut Session<FileStore>, out: &mut Vec<u8>, invalid: app::Invalid| {
            let r = Reject {
                ref_seq_num: ref_seq,
                ref_tag: (invalid.ref_tag != 0).then_some(invalid.ref_tag),
                ref_msg_type: Some(frame.msg_type),
                reason: invalid.reason,
                text: invalid.text,
            };
            if let Err(e) = s.reject(&r, now, out) {
                tracing::error!("FIX store: {e}");
            }
        };
        let version = self.slots[slot].version;
        if let Err(v) = rialto_fix::dict::validate(version, frame) {
            let invalid = app::Invalid {
                reason: v.reason,
                ref_tag: v.ref_tag.unwrap_or(0),
                text: v.text,
            };
            return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
        }
        let result: Result<Option<ToEngine>, Report> = match frame.msg_type {
            b"D" => match app::NewOrderSingle::decode(frame) {
                Ok(m) => self.slots[slot]
                    .desk
                    .new_order(&m, &self.instruments, now)
                    .map(Some),
                Err(invalid) => {
                    return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                }
            },
            b"F" => match app::OrderCancelRequest::decode(frame) {
                Ok(m) => self.slots[slot].desk.cancel(&m).map(Some),
                Err(invalid) => {
                    return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                }
            },
            b"G" => match app::OrderCancelReplaceRequest::decode(frame) {
                Ok(m) => self.slots[slot]
                    .desk
                    .replace(&m, &self.instruments)
                    .map(Some),
                Err(invalid) => {
                    return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                }
            },
            b"q" => match app::OrderMassCancelRequest::decode(frame) {
                Ok(m) => self.slots[slot]
                    .desk
                    .mass_cancel(&m, &self.instruments)
                    .map(Some),
                Err(invalid) => {
                    return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                }
            },
            b"H" => match app::OrderStatusRequest::decode(frame) {
                Ok(m) => Err(self.slots[slot]
                    .desk
                    .status(m.cl_ord_id, m.symbol, m.side, now)),
                Err(invalid) => {
                    return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                }
            },
            b"V" => match app::MarketDataRequest::decode(frame) {
                Ok(m) => {
                    self.market_data_request(slot, conn, &m, now);
                    Ok(None)
                }
                Err(invalid) => {
                    return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                }
            },
            b"x" if self.slots[slot].version != Version::Fix42 => {
                match app::SecurityListRequest::decode(frame) {
                    Ok(m) => {
                        let req_id = String::from_utf8_lossy(m.security_req_id).into_owned();
                        self.slots[slot].security_lists.push_back(req_id);
                        let request = Request {
                            session: FIX_SESSION_BASE + slot as SessionId,
                            reply: Reply::Symbols { request: 0 },
                            op: Op::ListSymbols,
                        };
                        self.push_request(request, pipeline);
                        Ok(None)
                    }
                    Err(invalid) => {
                        return reject(&mut self.slots[slot].session, &mut conn.output, invalid);
                    }
                }
            }
            other => {
                let r = BusinessReject {
                    ref_seq_num: ref_seq,
                    ref_msg_type: other,
                    ref_id: None,
                    reason: business_reject_reason::UNSUPPORTED_MESSAGE_TYPE,
                    text: "unsupported message type",
                };
                if let Err(e) = self.slots[slot]
                    .session
                    .business_reject(&r, now, &mut conn.output)
                {
                    tracing::error!("FIX store: {e}");
                }
                Ok(None)
            }
        };
        match result {
            Ok(Some(t)) => self.push(slot, t, pipeline),
            Ok(None) => {}
            Err(report) => self.send_report(slot, &report, &mut conn.output),
        }
    }
}

impl Core {
    fn market_data_request(
        &mut self,
        slot: usize,
        conn: &mut Conn,
        m: &app::MarketDataRequest<'_>,
        now: i64,
    ) {
        let md_req_id = String::from_utf8_lossy(m.md_req_id).into_owned();
        if m.subscription_request_type == b'2' {
            self.market_data.unsubscribe(slot, Some(&md_req_id));
            return;
        }
        let refuse = |s: &mut Session<FileStore>, out: &mut Vec<u8>, reason: u8, text: &str| {
            let sent = s.send_app(
                b"Y",
                now,
                |w| {
                    w.str(tags::MD_REQ_ID, md_req_id.as_bytes());
                    w.char(tags::MD_REQ_REJ_REASON, reason);
                    w.str(tags::TEXT, text.as_bytes());
                },
                out,
            );
            if let Err(e) = sent {
                tracing::error!("FIX store: {e}");
            }
        };
        let session = &mut self.slots[slot].session;
        if !matches!(m.subscription_request_type, b'0' | b'1') {
            // MDReqRejReason 4: unsupported SubscriptionRequestType.
            return refuse(
                session,
                &mut conn.output,
                b'4',
                "SubscriptionRequestType must be 0, 1 or 2",
            );
        }
        let mut symbols: Vec<SymbolId> = Vec::new();
        for name in m.symbols() {
            match self.instruments.by_name(name) {
                Some(i) => symbols.push(i.id),
                // MDReqRejReason 0: unknown symbol.
                None => return refuse(session, &mut conn.output, b'0', "unknown symbol"),
            }
        }
        let depth = usize::try_from(m.market_depth).unwrap_or(0);
        for symbol in symbols {
            self.market_data.subscribe(
                symbol,
                Subscription {
                    slot,
                    md_req_id: md_req_id.clone(),
                    depth,
                    book: m.bids_and_offers,
                    trades: m.trades,
                    updates: m.subscription_request_type == b'1',
                    fresh: true,
                    rpt_seq: 0,
                },
            );
        }
    }
}

/// ExecID, unique across the venue: the engine sequence number behind the report, the
/// session's slot, and the report's own MsgSeqNum (a command's fills share its sequence number,
/// and MsgSeqNums repeat across sessions).
fn write_exec_id(buf: &mut [u8; 48], engine_seq: u64, slot: usize, msg_seq: u64) -> &[u8] {
    use std::io::Write as _;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{engine_seq}-{slot}-{msg_seq}");
    let len = cursor.position() as usize;
    &buf[..len]
}

/// OrderID as text; "NONE" for an order the venue never took.
fn write_order_id(buf: &mut [u8; 24], order_id: u64) -> &[u8] {
    if order_id == 0 {
        return b"NONE";
    }
    use std::io::Write as _;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{order_id}");
    let len = cursor.position() as usize;
    &buf[..len]
}

fn write_execution(
    w: &mut MessageWriter<'_>,
    version: Version,
    exec: &Execution,
    instrument: Option<&Instrument>,
    exec_id: &[u8],
    order_id: &[u8],
) {
    let o = &exec.order;
    let zero = Decimal::new(0, 0);
    let figures = instrument.map(|i| exec.figures(i));
    let symbol: &[u8] = match (&exec.raw_symbol, instrument) {
        (Some(raw), _) => raw.as_bytes(),
        (None, Some(i)) => i.name().as_bytes(),
        (None, None) => b"?",
    };
    let report = ExecutionReport {
        order_id,
        exec_id,
        cl_ord_id: exec.cl_ord_id.as_bytes(),
        orig_cl_ord_id: exec.orig_cl_ord_id.as_ref().map(ClOrdId::as_bytes),
        exec_type: exec.exec_type,
        ord_status: o.status,
        symbol,
        side: exec.raw_side.unwrap_or(side_char(o.side)),
        ord_type: Some(o.ord_type),
        time_in_force: o.time_in_force,
        price: exec.raw_price.or(figures.as_ref().and_then(|f| f.price)),
        order_qty: exec.raw_qty.or(figures.as_ref().map(|f| f.order_qty)),
        last: figures.as_ref().and_then(|f| f.last),
        leaves_qty: figures.as_ref().map_or(zero, |f| f.leaves_qty),
        cum_qty: figures.as_ref().map_or(zero, |f| f.cum_qty),
        avg_px: figures.as_ref().map_or(zero, |f| f.avg_px),
        ord_rej_reason: exec.ord_rej_reason,
        transact_time_ns: exec.ts_ns,
        text: exec.text.map(str::as_bytes),
    };
    report.write(version, w);
    if o.engine_id != 0 {
        w.uint(orders::SECONDARY_ORDER_ID, o.engine_id as u64);
    }
}

/// Rebuilds a desk from the ExecutionReports in a session's store (after a restart).
fn restore_desk(desk: &mut OrderDesk, store: &mut FileStore, instruments: &Instruments) {
    let mut buf = Vec::new();
    let mut from = 1;
    loop {
        match store.read_next(from, u64::MAX, &mut buf) {
            Ok(Some((seq, _))) => {
                from = seq + 1;
                if let Ok(Some((frame, _))) = next_frame(&buf, buf.len() + 1)
                    && frame.msg_type == b"8"
                {
                    desk.restore(&frame, instruments);
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::error!("FIX store: cannot read back the orders: {e}");
                return;
            }
        }
    }
}
