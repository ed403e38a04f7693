//! The FIX gateway's runtime: the listener, the sockets (TCP or TLS) and the clock around the
//! sans-IO [`FixAgent`], on the gateway's thread, inside its event loop (gateway.rs hands it
//! the FIX listener's and connections' events and the engine's messages for FIX sessions).
//! It reads each socket into the agent's input buffer, pushes the agent's requests into the
//! inbound ring, writes the agent's output and tells it how much each socket took, and closes
//! the sockets of the connections the agent is done with.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mio::net::TcpListener;
use mio::{Interest, Registry, Token};
use rialto_core::UserId;

use super::instruments::Instruments;
use super::market_data::Intake;
use super::{FixAgent, FixConfig, RING_ROOM, RequestSink};
use crate::admission::{LOG_EVERY, LogLimiter};
use crate::auth::Credentials;
use crate::event::Event;
use crate::idle::Bell;
use crate::pipeline::{Request, SessionId, now_ns};
use crate::ring::Ring;
use crate::sockets::{Filled, Transport, fill, write_pending};

/// The inbound ring as the agent's [`RequestSink`].
struct Inbound<'a>(&'a Ring<Request>);

impl RequestSink for Inbound<'_> {
    fn room(&self) -> usize {
        self.0.capacity() - self.0.len()
    }

    fn offer(&mut self, request: Request) -> Result<(), Request> {
        self.0.try_push(request)?;
        self.0.ring();
        Ok(())
    }
}

struct Socket {
    stream: Transport,
    readable: bool,
    /// The peer has shut down its side: read to the end of the stream, short reads or not.
    read_closed: bool,
}

pub struct FixGateway {
    listener: TcpListener,
    sockets: HashMap<SessionId, Socket>,
    agent: FixAgent,
    /// The market data thread's outlet, which FIX market data is served from, and the
    /// receiver of its batches that hands them to the agent.
    feed: Arc<crate::feed::MarketData>,
    intake: Intake,
    /// Connections to write at the next flush (writable again, or TLS bytes waiting).
    writable: Vec<SessionId>,
    /// Reused: the connections to read, to write, to close.
    scratch: Vec<SessionId>,
    closed: Vec<SessionId>,
    /// The FIX gateway's own intake ring into the journal stage (`PipelineConfig::intakes`).
    intake_ring: Arc<Ring<Request>>,
    /// An accept failed: try again at the next housekeeping.
    retry_accept: bool,
    accept_failures: LogLimiter,
}

impl FixGateway {
    /// `feed` is the market data thread's outlet, which FIX market data is served from.
    pub fn bind(
        config: FixConfig,
        credentials: Arc<Credentials>,
        instruments: Instruments,
        feed: Arc<crate::feed::MarketData>,
        intake: Arc<Ring<Request>>,
    ) -> io::Result<FixGateway> {
        let listener = crate::sockets::listen_mio(config.listen)?;
        std::fs::create_dir_all(config.data_dir.join("fix"))?;
        let agent = FixAgent::new(config, credentials, instruments, now_ns(), Instant::now());
        Ok(FixGateway {
            listener,
            sockets: HashMap::new(),
            agent,
            feed,
            intake: Intake::new(),
            intake_ring: intake,
            writable: Vec::new(),
            scratch: Vec::new(),
            closed: Vec::new(),
            retry_accept: false,
            accept_failures: LogLimiter::new(LOG_EVERY),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The bell of the gateway's event loop: the feed rings it after each batch while a FIX
    /// market data subscription is open, and the cluster when a session's store write
    /// finishes.
    pub fn set_bell(&mut self, bell: Arc<Bell>) {
        if let Some(mirror) = &self.agent.config().mirror {
            mirror.set_bell(bell.clone());
        }
        self.intake.set_bell(bell);
    }

    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    pub fn owns(&self, id: SessionId) -> bool {
        self.sockets.contains_key(&id)
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
            if !self.agent.accepts_connections() {
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
            let stream = match Transport::new(stream, self.agent.config().tls.as_ref()) {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!("cannot start TLS on a FIX connection: {e}");
                    continue;
                }
            };
            tracing::debug!(conn = id, %peer, "FIX connection opened");
            if let Some(evicted) = self.agent.open(id, peer.ip(), now_ns())
                && let Some(mut old) = self.sockets.remove(&evicted)
            {
                // Its budget is spent: the oldest connection waiting to log on makes room, at
                // once, so that it never counts as logged on.
                let _ = registry.deregister(old.stream.tcp());
                let _ = old.stream.tcp().shutdown(std::net::Shutdown::Both);
            }
            let socket = Socket {
                stream,
                readable: true,
                read_closed: false,
            };
            self.sockets.insert(id, socket);
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
        if let Some(s) = self.sockets.get_mut(&id) {
            if event.is_readable() || event.is_read_closed() {
                s.readable = true;
            }
            if event.is_read_closed() {
                s.read_closed = true;
            }
            if event.is_writable()
                && (!self.agent.pending_output(id).is_empty() || s.stream.wants_write())
            {
                self.writable.push(id);
            }
        }
    }

    /// Reads and handles what the connections sent. Returns the messages handled.
    pub fn read(&mut self, registry: &Registry) -> usize {
        let now = now_ns();
        let ring = self.intake_ring.clone();
        let mut sink = Inbound(&ring);
        let mut work = self.agent.push_deferred(&mut sink);
        if self.agent.has_deferred() {
            return work;
        }
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        let agent = &self.agent;
        ids.extend(
            self.sockets
                .iter()
                .filter(|&(&id, s)| (s.readable || agent.is_paused(id)) && !agent.is_closing(id))
                .map(|(id, _)| *id),
        );
        for &id in &ids {
            work += self.read_conn(id, now, &mut sink);
            if sink.room() < RING_ROOM {
                break;
            }
        }
        self.scratch = ids;
        self.close_finished(registry, now);
        work
    }

    /// Handles a connection's buffered messages and reads more, until it would block, the
    /// agent takes no more, or the peer closed.
    fn read_conn(&mut self, id: SessionId, now: i64, sink: &mut Inbound<'_>) -> usize {
        let mut handled = 0;
        loop {
            handled += self.agent.handle(id, now, sink);
            let Some(socket) = self.sockets.get_mut(&id) else {
                return handled;
            };
            if !socket.readable || !self.agent.wants_input(id) {
                return handled;
            }
            let Some((input, start, end)) = self.agent.input_buffer(id) else {
                return handled;
            };
            match fill(&mut socket.stream, input, start, end) {
                Filled::Bytes { drained } => {
                    // A short read found the socket empty: wait for the next event.
                    if drained && !socket.read_closed {
                        socket.readable = false;
                    }
                }
                Filled::WouldBlock => {
                    socket.readable = false;
                    return handled;
                }
                Filled::Eof => {
                    socket.readable = false;
                    self.agent.peer_closed(id);
                    return handled;
                }
                // A message longer than the buffer: not one we take.
                Filled::Full | Filled::Failed => {
                    self.agent.peer_closed(id);
                    return handled;
                }
            }
        }
    }

    /// A reply for a FIX session or for the gateway's own queries.
    pub fn on_reply(&mut self, id: SessionId, msg: &Event) {
        self.agent.on_reply(id, msg, now_ns());
    }

    /// A message for a user's sessions (fills and cancels).
    pub fn on_user_message(&mut self, user: UserId, msg: &Event) {
        self.agent.on_user_message(user, msg, now_ns());
    }

    /// A message for everyone (phase changes, symbols added).
    pub fn on_public_message(&mut self, msg: &Event) {
        self.agent.on_public_message(msg, now_ns());
    }

    /// Market data from the feed (its batches handed to the agent, which publishes what they
    /// changed), timers, the symbol list refresh. Returns work done.
    pub fn tick(&mut self, registry: &Registry) -> usize {
        let now = now_ns();
        let mut work = self.intake.serve(&self.feed, &mut self.agent, now);
        let mut sink = Inbound(&self.intake_ring);
        work += self.agent.tick(now, &mut sink);
        self.close_finished(registry, now);
        work
    }

    /// Writes what the agent has ready, telling it how much each socket took.
    pub fn flush(&mut self, registry: &Registry) {
        let now = now_ns();
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.append(&mut self.writable);
        self.agent.flush(now, &mut ids);
        for &id in &ids {
            let Some(socket) = self.sockets.get_mut(&id) else {
                continue;
            };
            let mut taken = 0;
            let ok = write_pending(
                &mut socket.stream,
                self.agent.pending_output(id),
                &mut taken,
            );
            self.agent.wrote(id, taken);
            if !ok {
                self.agent.write_failed(id);
            }
        }
        self.scratch = ids;
        self.close_finished(registry, now);
    }

    /// How long until the agent's next timer is due (zero if it is), if it has one.
    pub fn next_timer(&self) -> Option<std::time::Duration> {
        let due_ns = self.agent.next_timer_ns()?;
        let wait_ns = due_ns.saturating_sub(now_ns()).max(0);
        Some(std::time::Duration::from_nanos(wait_ns as u64))
    }

    /// Open FIX connections.
    pub fn connection_count(&self) -> usize {
        self.sockets.len()
    }

    /// Feed batches (or snapshots a subscription waits for) wait for the next turn of the
    /// loop (checked after the gateway announced that it sleeps: a batch that arrives later
    /// rings its bell).
    pub fn has_market_data(&self) -> bool {
        self.intake.has_work(&self.agent)
    }

    /// Something waits for room in the inbound ring, or a session's store write to the
    /// cluster has finished: look again soon.
    pub fn is_waiting(&self) -> bool {
        self.agent.is_waiting()
    }

    pub fn has_pending_output(&self) -> bool {
        self.agent.has_pending_output()
    }

    /// Logs every session out (the server is stopping) and accepts no more connections.
    pub fn begin_shutdown(&mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.listener);
        self.agent.begin_shutdown(now_ns());
    }

    /// Closes every connection (after the last flush).
    pub fn close_all(&mut self, registry: &Registry) {
        let mut closed = std::mem::take(&mut self.closed);
        self.agent.close_all(now_ns(), &mut closed);
        self.close_sockets(registry, &mut closed);
        self.closed = closed;
    }

    fn close_finished(&mut self, registry: &Registry, now: i64) {
        let mut closed = std::mem::take(&mut self.closed);
        self.agent.take_closed(now, &mut closed);
        self.close_sockets(registry, &mut closed);
        self.closed = closed;
    }

    fn close_sockets(&mut self, registry: &Registry, closed: &mut Vec<SessionId>) {
        for id in closed.drain(..) {
            let Some(mut socket) = self.sockets.remove(&id) else {
                continue;
            };
            let _ = registry.deregister(socket.stream.tcp());
            socket.stream.shutdown_write();
            let _ = socket.stream.tcp().shutdown(std::net::Shutdown::Both);
        }
    }
}
