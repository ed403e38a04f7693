//! The binary gateway: one thread that owns every socket (mio), pushes the sessions' requests
//! into the pipeline, decides logins, and writes the pipeline's replies back. Each binary
//! session's protocol (decoding, rate limit, the frames it is sent, its output bound) is a
//! state machine without socket or clock, `BinarySession` (server/src/session.rs); this is the
//! runtime around it.
//!
//! Back-pressure: when the inbound ring is full the session stops being read (its frames wait
//! in its buffer and the kernel's), so nothing is dropped and a flood slows only its sender.
//! A session whose unsent output grows past the limit is too slow to keep and is closed.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use rialto_core::{Command, SymbolId, UserId};
use rialto_wire::{ErrorCode, Secret, ServerMsg};
use rustc_hash::FxHashMap;

use crate::admission::{
    LOG_EVERY, LogLimiter, LoginAttempt, LoginRefused, Logins, PRUNE_EVERY, PeerKey, PreAuthBudget,
    ThrottleSettings,
};
use crate::auth::Credentials;
use crate::event::{Event, Outbound, Target};
use crate::fix::{FIX_SERVICE_SESSION, FixGateway};
use crate::idle::{Bell, Idler, MAX_SLEEP, Wait, WaitStrategy};
use crate::metrics::{Metrics, SAMPLE_EVERY};
use crate::pipeline::{Op, Pipeline, Reply, Request, SYSTEM_SESSION, SessionId};
use crate::route::{Route, Router};
use crate::session::{Action, BinarySession, Limits, Role, Sent};
use crate::sockets::{Filled, Transport, fill, write_pending};
use crate::web::bridge::{WEB_MESSAGES_WAIT, WebBridge, WebDelivery};

const ORDER_LISTENER: Token = Token(0);
const ADMIN_LISTENER: Token = Token(1);
const WAKER: Token = Token(2);
const FIX_LISTENER: Token = Token(3);
const FIRST_SESSION: SessionId = 16;
/// How long a clean shutdown waits for slow sessions to take their last replies.
const SHUTDOWN_FLUSH: Duration = Duration::from_secs(2);
/// How long a closed session's unread input is drained (so the close is a FIN, not a reset
/// that would destroy replies still on their way).
const DRAIN_WAIT: Duration = Duration::from_millis(500);
/// How often slow-moving limits (the login deadline) are checked.
const HOUSEKEEPING: Duration = Duration::from_millis(100);

pub struct GatewayConfig {
    pub io: WaitStrategy,
    /// Logged-in sessions on the order port.
    pub max_sessions: usize,
    /// Logged-in sessions on the admin port, counted apart from the order port's.
    pub max_admin_sessions: usize,
    /// Connections that have not logged in yet, per port (over it the oldest is closed) and
    /// from one address on a port.
    pub max_pending_logins: usize,
    pub max_pending_admin_logins: usize,
    pub max_pending_logins_per_address: usize,
    /// A session that has not logged in this long after connecting is closed.
    pub login_timeout: Duration,
    pub max_msgs_per_sec: u64,
    pub burst: u64,
    pub max_output_bytes: usize,
    pub admin_secret: String,
    /// TLS on the order and admin ports.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Where the round-trip latency samples go.
    pub metrics: Arc<Metrics>,
    /// A future whose mark follows its last trade price (the demo's BTC-PERP,
    /// docs/operations.md): set through `set_mark_price`, journaled like any admin command, at
    /// most once every [`MARK_INTERVAL`].
    pub mark_follower: Option<SymbolId>,
}

/// How often at most the mark follower sets a mark.
pub const MARK_INTERVAL: Duration = Duration::from_millis(250);

/// The demo's mark follower: the last trade price it saw of its future, and the mark it last
/// set and when.
struct MarkFollower {
    symbol: SymbolId,
    /// 0 before the first trade.
    last_trade: i64,
    set: i64,
    set_at: Option<Instant>,
}

/// A binary session's runtime: its socket, and the protocol's state machine
/// (server/src/session.rs).
struct Session {
    stream: Transport,
    peer: PeerKey,
    machine: BinarySession,
    /// The socket may hold unread bytes (edge-triggered readiness).
    readable: bool,
    /// The peer has shut down its side: read until the end of the stream, short reads or not
    /// (no further event announces an end that waits behind bytes already reported).
    read_closed: bool,
    /// Set once our side is shut down: input is read and dropped until EOF or the deadline.
    draining_since: Option<Instant>,
}

pub struct Gateway {
    poll: Poll,
    order_listener: TcpListener,
    admin_listener: TcpListener,
    bell: Arc<Bell>,
    /// By session id: keys no client picks (the gateway numbers sessions), so a fast unkeyed
    /// hash is safe.
    sessions: FxHashMap<SessionId, Session>,
    /// Which logged-in sessions each event goes to (server/src/route.rs).
    router: Router,
    next_session: SessionId,
    config: GatewayConfig,
    pipeline: Pipeline,
    /// The FIX gateway, on this thread and this event loop.
    fix: Option<FixGateway>,
    /// The web side's delivery agent, whose duty cycle runs on this thread: the web is a
    /// gateway of its own, with its own rings (its requests go straight to the journal stage,
    /// its events come from the engine stage in a ring of their own; web/bridge.rs).
    web: Option<WebDelivery>,
    metrics: Arc<Metrics>,
    /// Replies routed, for sampling round trips.
    replies: u64,
    /// Sessions with unsent output.
    dirty: Vec<SessionId>,
    /// Sessions on their way out (waiting for replies, or draining input).
    closing: Vec<SessionId>,
    scratch: Vec<SessionId>,
    /// Connections that have not logged in, per port: the order port's and the admin port's
    /// are apart, so that a flood on one port cannot keep the other's users out.
    pending_logins: PreAuthBudget<SessionId>,
    pending_admin_logins: PreAuthBudget<SessionId>,
    /// The login decision, with its failed-login throttles.
    logins: Logins,
    last_prune: Instant,
    refusals: LogLimiter,
    accept_failures: LogLimiter,
    /// A listener whose accept failed (out of file descriptors): try it again at the next
    /// housekeeping, since no new event comes for connections already waiting.
    retry_accept: bool,
    mark: Option<MarkFollower>,
}

impl Gateway {
    /// Binds both listeners (so that a caller learns a port conflict before anything runs).
    pub fn bind(
        order_addr: SocketAddr,
        admin_addr: SocketAddr,
        config: GatewayConfig,
        credentials: Arc<Credentials>,
        pipeline: Pipeline,
        mut fix: Option<FixGateway>,
        web: Option<Arc<WebBridge>>,
    ) -> io::Result<Gateway> {
        let poll = Poll::new()?;
        if let Some(fix) = &mut fix {
            fix.register(poll.registry(), FIX_LISTENER)?;
        }
        let mut order_listener = crate::sockets::listen_mio(order_addr)?;
        let mut admin_listener = crate::sockets::listen_mio(admin_addr)?;
        poll.registry()
            .register(&mut order_listener, ORDER_LISTENER, Interest::READABLE)?;
        poll.registry()
            .register(&mut admin_listener, ADMIN_LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let bell = Bell::for_poll(waker);
        pipeline.outbound.set_bell(bell.clone());
        if let Some(fix) = &mut fix {
            fix.set_bell(bell.clone());
        }
        // The web's requests go straight to the journal stage; when that stage runs on this
        // thread, the web side rings this thread.
        pipeline.set_inline_bell(bell.clone());
        if let Some(web) = &web {
            web.outlet().set_bell(bell.clone());
        }
        let metrics = Arc::clone(&config.metrics);
        Ok(Gateway {
            poll,
            order_listener,
            admin_listener,
            bell,
            sessions: FxHashMap::default(),
            router: Router::new(),
            next_session: FIRST_SESSION,
            pipeline,
            fix,
            web: web.map(|bridge| WebDelivery::new(bridge, metrics.clone(), Instant::now())),
            metrics,
            replies: 0,
            dirty: Vec::new(),
            closing: Vec::new(),
            scratch: Vec::new(),
            pending_logins: PreAuthBudget::new(
                config.max_pending_logins,
                config.max_pending_logins_per_address,
            ),
            pending_admin_logins: PreAuthBudget::new(
                config.max_pending_admin_logins,
                config.max_pending_logins_per_address,
            ),
            logins: Logins::new(
                credentials,
                config.admin_secret.clone(),
                config.max_sessions,
                config.max_admin_sessions,
                ThrottleSettings::default(),
            ),
            last_prune: Instant::now(),
            refusals: LogLimiter::new(LOG_EVERY),
            accept_failures: LogLimiter::new(LOG_EVERY),
            retry_accept: false,
            mark: config.mark_follower.map(|symbol| MarkFollower {
                symbol,
                last_trade: 0,
                set: 0,
                set_at: None,
            }),
            config,
        })
    }

    pub fn order_addr(&self) -> io::Result<SocketAddr> {
        self.order_listener.local_addr()
    }

    pub fn admin_addr(&self) -> io::Result<SocketAddr> {
        self.admin_listener.local_addr()
    }

    pub fn fix_addr(&self) -> Option<io::Result<SocketAddr>> {
        self.fix.as_ref().map(FixGateway::local_addr)
    }

    /// Serves until `stop` turns true, then shuts down in order: stop reading, let the
    /// pipeline drain and sync, deliver the last replies, close. Returns the pipeline's
    /// failure, if any.
    pub fn run(mut self, stop: Arc<AtomicBool>) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        let mut idler = Idler::new(self.config.io);
        let mut work = 1;
        let mut stopping_since: Option<Instant> = None;
        let mut last_housekeeping = Instant::now();
        loop {
            if stopping_since.is_none()
                && (stop.load(Ordering::SeqCst) || self.pipeline.shared.has_failed())
            {
                stopping_since = Some(Instant::now());
                self.begin_shutdown();
            }
            let timeout = match idler.next(work) {
                None | Some(Wait::Spin) => Some(Duration::ZERO),
                Some(Wait::Yield) => {
                    std::thread::yield_now();
                    Some(Duration::ZERO)
                }
                Some(Wait::Sleep) => {
                    if let Some(web) = &mut self.web {
                        web.flush(Instant::now(), true);
                    }
                    self.bell.set_sleeping(true);
                    // A paused session waits for room in the inbound ring, and a closing one
                    // for its deadline, which nobody announces: look again soon.
                    let paused = self.sessions.values().any(|s| s.machine.is_blocked())
                        || self.fix.as_ref().is_some_and(FixGateway::is_waiting);
                    let market_data = self.fix.as_ref().is_some_and(FixGateway::has_market_data);
                    if !self.pipeline.outbound.is_empty()
                        || market_data
                        || self.pipeline.inline_intake_waiting()
                        || self.web.as_ref().is_some_and(WebDelivery::has_work)
                    {
                        Some(Duration::ZERO)
                    } else if paused || !self.closing.is_empty() {
                        Some(Duration::from_micros(100))
                    } else if self.web.as_ref().is_some_and(WebDelivery::has_gap) {
                        // A gap waits for room in the web side's queue, which nobody announces.
                        Some(WEB_MESSAGES_WAIT)
                    } else {
                        // Or until the FIX agent's next timer (a heartbeat, a deadline), if
                        // sooner: nobody announces that either.
                        let fix_timer = self.fix.as_ref().and_then(FixGateway::next_timer);
                        Some(fix_timer.map_or(MAX_SLEEP, |t| t.min(MAX_SLEEP)))
                    }
                }
            };
            let polled = self.poll.poll(&mut events, timeout);
            self.bell.set_sleeping(false);
            if let Err(e) = polled
                && e.kind() != io::ErrorKind::Interrupted
            {
                self.pipeline
                    .shared
                    .fail(format!("gateway poll failed: {e}"));
            }
            work = events.iter().count();
            for event in events.iter() {
                match event.token() {
                    ORDER_LISTENER => self.accept(false),
                    ADMIN_LISTENER => self.accept(true),
                    FIX_LISTENER => {
                        if let Some(fix) = &mut self.fix {
                            fix.accept(self.poll.registry(), &mut self.next_session);
                        }
                    }
                    WAKER => {}
                    Token(t) => {
                        let readable = event.is_readable() || event.is_read_closed();
                        if let Some(s) = self.sessions.get_mut(&(t as SessionId)) {
                            if readable {
                                s.readable = true;
                            }
                            if event.is_read_closed() {
                                s.read_closed = true;
                            }
                            if event.is_writable()
                                && (!s.machine.pending_output().is_empty()
                                    || s.stream.wants_write())
                            {
                                self.dirty.push(t as SessionId);
                            }
                        } else if let Some(fix) = &mut self.fix {
                            fix.on_event(t as SessionId, event);
                        }
                    }
                }
            }
            if stopping_since.is_none() {
                work += self.read_sessions();
                if let Some(fix) = &mut self.fix {
                    work += fix.read(self.poll.registry());
                }
                work += self.follow_mark();
            }
            // Journal and engine, when they share this thread (a no-op otherwise).
            work += self.pipeline.do_inline_work();
            work += self.route_outbound();
            if let Some(fix) = &mut self.fix {
                work += fix.tick(self.poll.registry());
                fix.flush(self.poll.registry());
            }
            self.flush_dirty();
            if let Some(web) = &mut self.web {
                work += web.do_work(Instant::now());
            }
            self.sweep_closing();
            if last_housekeeping.elapsed() >= HOUSEKEEPING {
                last_housekeeping = Instant::now();
                let m = &self.metrics;
                m.binary_sessions
                    .store(self.sessions.len() as u64, Ordering::Relaxed);
                let fix = self.fix.as_ref().map_or(0, FixGateway::connection_count);
                m.fix_sessions.store(fix as u64, Ordering::Relaxed);
                self.close_silent_sessions();
                if std::mem::take(&mut self.retry_accept) {
                    self.accept(false);
                    self.accept(true);
                }
                if let Some(fix) = &mut self.fix {
                    fix.retry_accept(self.poll.registry(), &mut self.next_session);
                }
                if self.last_prune.elapsed() >= PRUNE_EVERY {
                    self.last_prune = Instant::now();
                    self.logins.prune(self.last_prune);
                }
            }
            if let Some(since) = stopping_since {
                let drained = self.pipeline.drained()
                    && self.pipeline.outbound.is_empty()
                    && !self.web.as_ref().is_some_and(WebDelivery::has_work);
                let flushed = self
                    .sessions
                    .values()
                    .all(|s| s.machine.pending_output().is_empty())
                    && !self
                        .fix
                        .as_ref()
                        .is_some_and(FixGateway::has_pending_output);
                if drained && (flushed || since.elapsed() > SHUTDOWN_FLUSH) {
                    break;
                }
            }
        }
        // Every reply is out: say goodbye (best effort) and close.
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for &id in &ids {
            let message = "the server is shutting down".to_string();
            self.queue(
                id,
                &ServerMsg::Error {
                    code: ErrorCode::ShuttingDown,
                    message,
                },
            );
        }
        self.flush_dirty();
        if let Some(fix) = &mut self.fix {
            fix.flush(self.poll.registry());
            fix.close_all(self.poll.registry());
        }
        for id in ids {
            self.shut_down_write(id);
        }
        // Let the clients read to the end and close their side (bounded by DRAIN_WAIT).
        let until = Instant::now() + DRAIN_WAIT + Duration::from_millis(50);
        while !self.sessions.is_empty() && Instant::now() < until {
            let _ = self.poll.poll(&mut events, Some(Duration::from_millis(5)));
            self.sweep_closing();
        }
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
        if let Some(web) = &mut self.web {
            web.close(Instant::now());
        }
        self.pipeline.join()
    }

    fn begin_shutdown(&mut self) {
        tracing::info!("shutting down: no new connections or commands");
        let _ = self.poll.registry().deregister(&mut self.order_listener);
        let _ = self.poll.registry().deregister(&mut self.admin_listener);
        if let Some(fix) = &mut self.fix {
            fix.begin_shutdown(self.poll.registry());
        }
        if let Some(web) = &self.web {
            web.refuse_calls();
        }
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
            if let Some(s) = self.sessions.get_mut(&id) {
                s.machine.stop_reading();
            }
        }
        self.pipeline.close_intake();
    }

    fn accept(&mut self, admin_port: bool) {
        loop {
            let listener = if admin_port {
                &self.admin_listener
            } else {
                &self.order_listener
            };
            let (mut stream, peer) = match listener.accept() {
                Ok(conn) => conn,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    self.retry_accept = true;
                    self.accept_failures.note(Instant::now(), |suppressed| {
                        tracing::warn!(suppressed, "accept failed (retried): {e}")
                    });
                    return;
                }
            };
            let _ = stream.set_nodelay(true);
            let id = self.next_session;
            self.next_session += 1;
            let interest = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = self
                .poll
                .registry()
                .register(&mut stream, Token(id as usize), interest)
            {
                tracing::warn!("cannot register a session: {e}");
                continue;
            }
            let stream = match Transport::new(stream, self.config.tls.as_ref()) {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!("cannot start TLS on a session: {e}");
                    continue;
                }
            };
            tracing::debug!(session = id, %peer, admin_port, "session opened");
            let limits = Limits {
                max_msgs_per_sec: self.config.max_msgs_per_sec,
                burst: self.config.burst,
                max_output_bytes: self.config.max_output_bytes,
            };
            let peer = PeerKey::of(peer.ip());
            let budget = if admin_port {
                &mut self.pending_admin_logins
            } else {
                &mut self.pending_logins
            };
            if let Some(evicted) = budget.admit(id, peer) {
                // The port's budget of connections waiting to log in is spent: the oldest
                // makes room, so that idle sockets cannot keep a real login out.
                self.close(evicted);
            }
            self.sessions.insert(
                id,
                Session {
                    stream,
                    peer,
                    machine: BinarySession::new(id, admin_port, limits, Instant::now()),
                    readable: true,
                    read_closed: false,
                    draining_since: None,
                },
            );
        }
    }
}

impl Gateway {
    /// Moves the pipeline's replies into the sessions' output buffers.
    fn route_outbound(&mut self) -> usize {
        let mut n = 0;
        while let Some(Outbound { target, event }) = self.pipeline.outbound.pop() {
            n += 1;
            if let Event::Accepted { ts_ns, .. } | Event::Rejected { ts_ns, .. } = event {
                self.replies += 1;
                if self.replies.is_multiple_of(SAMPLE_EVERY) {
                    let ns = crate::pipeline::now_ns().saturating_sub(ts_ns);
                    self.metrics.roundtrip_latency.record(ns.max(0) as u64);
                }
            }
            if let (Some(mark), Event::Trade { symbol, price, .. }) = (&mut self.mark, &event)
                && *symbol == mark.symbol
            {
                mark.last_trade = *price;
            }
            if let Some(fix) = &mut self.fix {
                match target {
                    Target::Session(id) if id >= FIX_SERVICE_SESSION => {
                        fix.on_reply(id, &event);
                        continue;
                    }
                    Target::User(user) => fix.on_user_message(user, &event),
                    Target::Public => fix.on_public_message(&event),
                    Target::Session(_) | Target::WebStatus => {}
                }
            }
            // The binary protocol's message, once for every session it goes to.
            let Some(msg) = event.into_wire() else {
                continue; // for the gateways themselves (a symbol added)
            };
            let Gateway {
                router,
                sessions,
                dirty,
                ..
            } = self;
            match router.route(target) {
                Route::Reply(id) => {
                    if let Some(s) = sessions.get_mut(&id) {
                        s.machine.reply_arrived();
                        if s.machine.is_closing() {
                            dirty.push(id); // may be ready to close now
                        }
                    }
                    queue(sessions, dirty, id, &msg)
                }
                Route::Sessions(ids) => {
                    for &id in ids {
                        queue(sessions, dirty, id, &msg);
                    }
                }
            }
        }
        n
    }

    /// The mark follower: once [`MARK_INTERVAL`] has passed since the mark it last set, sets
    /// the mark to the future's last trade price if that differs, as an operator would
    /// (`set_mark_price`, journaled; its reply is dropped). The gateway wakes at least every
    /// `MAX_SLEEP`, so a trade's price becomes the mark within about the interval.
    fn follow_mark(&mut self) -> usize {
        let Some(mark) = &self.mark else {
            return 0;
        };
        let due = mark.set_at.is_none_or(|at| at.elapsed() >= MARK_INTERVAL);
        if mark.last_trade == 0 || mark.last_trade == mark.set || !due {
            return 0;
        }
        let (symbol, price) = (mark.symbol, mark.last_trade);
        let cmd = Command::SetMarkPrice { symbol, price };
        let reply = Reply::Admin { request: 0 };
        if !self.push(SYSTEM_SESSION, reply, Op::Command(cmd)) {
            return 0; // the inbound ring is full: the next turn tries again
        }
        if let Some(mark) = &mut self.mark {
            mark.set = price;
            mark.set_at = Some(Instant::now());
        }
        1
    }

    /// Appends one frame to a session's output; a session too slow to keep up is closed.
    fn queue(&mut self, id: SessionId, msg: &ServerMsg) {
        queue(&mut self.sessions, &mut self.dirty, id, msg);
    }

    fn read_sessions(&mut self) -> usize {
        let mut work = 0;
        self.scratch.clear();
        self.scratch.extend(
            self.sessions
                .iter()
                .filter(|(_, s)| (s.readable || s.machine.is_blocked()) && !s.machine.is_closing())
                .map(|(id, _)| *id),
        );
        let ids = std::mem::take(&mut self.scratch);
        for &id in &ids {
            work += self.read_session(id);
            if self.pipeline.inbound.is_full() {
                break; // the others wait their turn; nothing is lost
            }
        }
        self.scratch = ids;
        if work > 0 {
            self.pipeline.inbound.ring();
        }
        work
    }

    /// Decodes what is buffered, then reads more while there is room and no back-pressure.
    fn read_session(&mut self, id: SessionId) -> usize {
        let mut frames = 0;
        loop {
            // Act on every whole frame already received.
            loop {
                let Some(s) = self.sessions.get_mut(&id) else {
                    return frames;
                };
                let was_empty = s.machine.pending_output().is_empty();
                let action = s.machine.next(Instant::now());
                let closing = s.machine.is_closing();
                if was_empty && !s.machine.pending_output().is_empty() {
                    self.dirty.push(id); // a heartbeat or a refusal to send
                }
                if closing {
                    self.close_after_flush(id);
                    return frames;
                }
                match action {
                    None => break,
                    Some(Action::Request(request)) => {
                        if let Err(request) = self.pipeline.inbound.try_push(request) {
                            if let Some(s) = self.sessions.get_mut(&id) {
                                s.machine.blocked(request);
                            }
                            return frames;
                        }
                        if let Some(s) = self.sessions.get_mut(&id) {
                            s.machine.taken();
                        }
                    }
                    Some(Action::Login { user, secret }) => self.login(id, user, secret),
                }
                frames += 1;
            }
            let Some(s) = self.sessions.get_mut(&id) else {
                return frames;
            };
            if !s.readable {
                return frames;
            }
            // Make room (the partial frame moves to the start of the buffer), then read.
            let (input, start, end) = s.machine.input_buffer();
            match fill(&mut s.stream, input, start, end) {
                Filled::Bytes { drained } => {
                    // Saves the read that would only find the socket empty.
                    if drained && !s.read_closed {
                        s.readable = false;
                    }
                }
                // A full buffer of whole frames is decoded above first.
                Filled::Full => return frames,
                Filled::Eof => {
                    // The client is done sending; it still gets the replies to what it sent.
                    s.readable = false;
                    s.machine.on_eof(Instant::now());
                    self.close_after_flush(id);
                    return frames;
                }
                Filled::WouldBlock => {
                    s.readable = false;
                    return frames;
                }
                Filled::Failed => {
                    self.close(id);
                    return frames;
                }
            }
        }
    }

    /// A request of the gateway's own (the mark follower's), its reply dropped.
    fn push(&mut self, id: SessionId, reply: Reply, op: Op) -> bool {
        let request = Request {
            session: id,
            reply,
            op,
        };
        self.pipeline.inbound.try_push(request).is_ok()
    }

    /// Acts on a session's login, decided by [`Logins::decide`] (server/src/admission.rs).
    fn login(&mut self, id: SessionId, user: UserId, secret: Secret) {
        let last_seq = self
            .pipeline
            .shared
            .applied_seq
            .load(std::sync::atomic::Ordering::Acquire);
        let Some(s) = self.sessions.get(&id) else {
            return;
        };
        let (peer, admin_port) = (s.peer, s.machine.admin_port());
        let now = Instant::now();
        let logged_in = self
            .sessions
            .values()
            .filter(|s| {
                s.machine.admin_port() == admin_port
                    && s.machine.role() != Role::AwaitingLogin
                    && !s.machine.is_closing()
            })
            .count();
        let attempt = LoginAttempt {
            peer,
            admin_port,
            user,
            secret: secret.as_bytes(),
        };
        let role = match self.logins.decide(attempt, logged_in, now) {
            Ok(role) => role,
            Err(refused) => {
                if let LoginRefused::WrongSecret { .. } = refused {
                    self.refusals.note(now, |suppressed| {
                        tracing::warn!(session = id, admin_port, suppressed, "login refused")
                    });
                }
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.machine
                        .refuse_login(now, refused.code(), refused.message());
                }
                return self.close_after_flush(id);
            }
        };
        self.pending_logins.leave(id);
        self.pending_admin_logins.leave(id);
        match role {
            Role::Trader(user) => tracing::debug!(session = id, user, "trader logged in"),
            _ => tracing::info!(session = id, "admin logged in"),
        }
        self.dirty.push(id);
        self.router.logged_in(id, role);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.machine.logged_in(role, last_seq);
        }
    }

    /// Writes pending output of the sessions that have some.
    fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &id in &dirty {
            let Some(s) = self.sessions.get_mut(&id) else {
                continue;
            };
            let (output, pos) = s.machine.output_buffer();
            let failed = !write_pending(&mut s.stream, output, pos);
            s.machine.written();
            let shut = s.machine.ready_to_shut(Instant::now()) && !s.stream.wants_write();
            if failed {
                self.close(id);
            } else if shut && !self.pipeline.shared.intake_closed.load(Ordering::Relaxed) {
                self.shut_down_write(id);
            }
        }
        // Sessions that could not take everything come back with their next writable event.
        dirty.clear();
        self.dirty = dirty;
    }

    fn close_after_flush(&mut self, id: SessionId) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.machine.close_after_flush(Instant::now());
        }
        self.dirty.push(id);
        if !self.closing.contains(&id) {
            self.closing.push(id);
        }
    }

    /// Everything is sent: send our FIN, then drop what the client still sends until it
    /// closes too (or the deadline), so that the kernel never answers with a reset that would
    /// destroy replies the client has not read yet.
    fn shut_down_write(&mut self, id: SessionId) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        s.stream.shutdown_write();
        s.draining_since.get_or_insert_with(Instant::now);
        if !self.closing.contains(&id) {
            self.closing.push(id);
        }
        self.drain(id);
    }

    /// Reads and drops input of a session whose write side is shut; closes it at EOF, on an
    /// error, or at the deadline.
    fn drain(&mut self, id: SessionId) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let Some(since) = s.draining_since else {
            return;
        };
        let mut scratch = [0u8; 4096];
        loop {
            match s.stream.read(&mut scratch) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if since.elapsed() < DRAIN_WAIT {
                        return; // more may come: the next readable event or sweep
                    }
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.close(id);
    }

    /// Closes sessions that connected but did not log in within the deadline.
    fn close_silent_sessions(&mut self) {
        let (deadline, now) = (self.config.login_timeout, Instant::now());
        self.scratch.clear();
        for (&id, s) in self.sessions.iter_mut() {
            if s.machine.login_overdue(now, deadline) {
                self.scratch.push(id);
            }
        }
        let silent = std::mem::take(&mut self.scratch);
        for &id in &silent {
            self.close_after_flush(id);
        }
        self.scratch = silent;
    }

    /// Moves closing sessions along: those whose replies are all out (or overdue) get their
    /// output flushed and their write side shut; those shut drain their input.
    fn sweep_closing(&mut self) {
        if self.closing.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut self.closing);
        for &id in &ids {
            let Some(s) = self.sessions.get(&id) else {
                continue;
            };
            if s.draining_since.is_some() {
                self.drain(id);
            } else if s.machine.close_wait_over(Instant::now()) {
                self.dirty.push(id);
            }
            if self.sessions.contains_key(&id) && !self.closing.contains(&id) {
                self.closing.push(id);
            }
        }
    }

    fn close(&mut self, id: SessionId) {
        let Some(mut s) = self.sessions.remove(&id) else {
            return;
        };
        let _ = self.poll.registry().deregister(s.stream.tcp());
        self.pending_logins.leave(id);
        self.pending_admin_logins.leave(id);
        self.router.closed(id, s.machine.role());
        tracing::debug!(session = id, "session closed");
    }
}

/// Appends one frame to a session's output; a session too slow to keep up is closed.
fn queue(
    sessions: &mut FxHashMap<SessionId, Session>,
    dirty: &mut Vec<SessionId>,
    id: SessionId,
    msg: &ServerMsg,
) {
    let Some(s) = sessions.get_mut(&id) else {
        return; // gone: its replies are dropped
    };
    match s.machine.send(msg) {
        Sent::Queued | Sent::Dropped => {}
        Sent::First => dirty.push(id),
        Sent::Overflow => {
            tracing::warn!(
                session = id,
                "closing a session that does not read its replies"
            );
            dirty.push(id);
        }
    }
}
