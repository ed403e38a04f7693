//! The HTTP listener's own accept loop around hyper, so that every connection is held to
//! limits (docs/operations.md, `[web]`):
//!
//! - A connection is *pending* until it has sent a complete first request (a WebSocket: until
//!   it logs in or subscribes). Pending connections are few (`max_pending_connections`, and
//!   `max_connections_per_address` from one address); a new connection over either closes the
//!   oldest pending one ([`PreAuthBudget`]), so a flood of idle or half-sent connections only
//!   pushes out its own, and the newest connection always gets its chance.
//! - Past that it is *established*: at most `max_connections` of them, and
//!   `max_connections_per_address` from one address; a connection over either is answered
//!   503 `busy` and closed.
//! - A request's whole header must arrive within `header_read_timeout_ms` (of the connection
//!   opening, or of the previous answer: the keep-alive idle timeout too), and be at most
//!   `max_header_bytes` in at most `max_headers` fields (else 431).
//! - With TLS on, the handshake must finish within the same header timeout.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

use super::{ApiError, AppState};
use crate::admission::{PeerKey, PreAuthBudget};
use crate::config::WebSettings;

/// A connection's byte stream: TCP, or TLS over it.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The listener's connections: which are pending and which established, and counters.
pub struct Connections {
    inner: Mutex<Table>,
    max_established: usize,
    per_address: usize,
    /// Rung when the last connection closes.
    all_closed: Notify,
    pub accepted: AtomicU64,
    /// Pending connections closed to make room for newer ones.
    pub shed: AtomicU64,
    /// Connections refused for being over `max_connections` or the per-address cap.
    pub refused: AtomicU64,
}

struct Table {
    next_id: u64,
    pending: PreAuthBudget<u64>,
    /// How to close each pending connection.
    closers: HashMap<u64, Arc<Notify>>,
    established: usize,
    established_by_peer: HashMap<PeerKey, usize>,
    open: usize,
}

/// One connection's place in [`Connections`]; dropping it (when the connection ends) frees it.
pub struct Slot {
    connections: Arc<Connections>,
    id: u64,
    peer: PeerKey,
    established: AtomicBool,
    close: Arc<Notify>,
}

impl Connections {
    pub fn new(settings: &WebSettings) -> Connections {
        Connections {
            inner: Mutex::new(Table {
                next_id: 1,
                pending: PreAuthBudget::new(
                    settings.max_pending_connections,
                    settings.max_connections_per_address,
                ),
                closers: HashMap::new(),
                established: 0,
                established_by_peer: HashMap::new(),
                open: 0,
            }),
            max_established: settings.max_connections,
            per_address: settings.max_connections_per_address,
            all_closed: Notify::new(),
            accepted: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new connection from `peer`: pending, closing the oldest pending one if over budget.
    pub fn admit(self: &Arc<Self>, peer: PeerKey) -> Arc<Slot> {
        let close = Arc::new(Notify::new());
        let mut table = self.lock();
        let id = table.next_id;
        table.next_id += 1;
        if let Some(old) = table.pending.admit(id, peer) {
            // notify_one keeps the wake-up for a connection not yet waiting for it.
            if let Some(closer) = table.closers.remove(&old) {
                closer.notify_one();
            }
            self.shed.fetch_add(1, Ordering::Relaxed);
        }
        table.closers.insert(id, close.clone());
        table.open += 1;
        self.accepted.fetch_add(1, Ordering::Relaxed);
        Arc::new(Slot {
            connections: self.clone(),
            id,
            peer,
            established: AtomicBool::new(false),
            close,
        })
    }

    /// (pending, established) connections now.
    pub fn counts(&self) -> (usize, usize) {
        let table = self.lock();
        (table.pending.len(), table.established)
    }

    /// Waits until every connection has closed, or `limit` has passed.
    pub async fn closed(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.all_closed.notified();
            if self.lock().open == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }
}

impl Slot {
    /// The connection has done something worth keeping it for: it leaves the pending budget
    /// for the established ones. False when those are full (in all or for its address): the
    /// caller refuses it.
    pub fn establish(&self) -> bool {
        if self.established.load(Ordering::Relaxed) {
            return true;
        }
        let connections = &self.connections;
        let mut table = connections.lock();
        let mine = table
            .established_by_peer
            .get(&self.peer)
            .copied()
            .unwrap_or(0);
        if table.established >= connections.max_established || mine >= connections.per_address {
            connections.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        table.pending.leave(self.id);
        table.closers.remove(&self.id);
        table.established += 1;
        *table.established_by_peer.entry(self.peer).or_default() += 1;
        self.established.store(true, Ordering::Relaxed);
        true
    }

    pub fn is_established(&self) -> bool {
        self.established.load(Ordering::Relaxed)
    }

    /// Resolves when the connection, still pending, is closed to make room for a newer one.
    pub async fn shed(&self) {
        self.close.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let connections = &self.connections;
        let mut table = connections.lock();
        if self.established.load(Ordering::Relaxed) {
            table.established -= 1;
            if let Some(n) = table.established_by_peer.get_mut(&self.peer) {
                *n -= 1;
                if *n == 0 {
                    table.established_by_peer.remove(&self.peer);
                }
            }
        } else {
            table.pending.leave(self.id);
            table.closers.remove(&self.id);
        }
        table.open -= 1;
        if table.open == 0 {
            connections.all_closed.notify_waiters();
        }
    }
}

/// Accepts connections until `shutdown` turns true, then waits (a few seconds at most) for
/// those open to finish.
pub async fn run(
    state: Arc<AppState>,
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut failures = crate::admission::LogLimiter::new(crate::admission::LOG_EVERY);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, typically: pending connections will be shed or
                // time out and free some.
                failures.note(std::time::Instant::now(), |suppressed| {
                    tracing::warn!(suppressed, "HTTP accept: {e}")
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let slot = state.connections.admit(PeerKey::of(peer.ip()));
        let (state, router, tls) = (state.clone(), router.clone(), tls.clone());
        tokio::spawn(connection(state, router, stream, peer, slot, tls));
    }
    drop(listener);
    state.connections.closed(Duration::from_secs(5)).await;
}

async fn connection(
    state: Arc<AppState>,
    router: Router,
    stream: TcpStream,
    peer: SocketAddr,
    slot: Arc<Slot>,
    tls: Option<TlsAcceptor>,
) {
    let settings = &state.settings;
    let header_timeout = Duration::from_millis(settings.header_read_timeout_ms);
    let _ = stream.set_nodelay(true);
    let transport = match tls {
        None => Transport::Plain(stream),
        Some(acceptor) => {
            let handshake = tokio::time::timeout(header_timeout, acceptor.accept(stream));
            tokio::select! {
                done = handshake => match done {
                    Ok(Ok(stream)) => Transport::Tls(Box::new(stream)),
                    Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake: {e}"),
                    Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
                },
                _ = slot.shed() => return,
            }
        }
    };
    let service = {
        let slot = slot.clone();
        hyper::service::service_fn(move |request| {
            route(router.clone(), slot.clone(), peer, request)
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_header_size(settings.max_header_bytes)
        .max_buf_size(settings.max_header_bytes + (4 << 10))
        .max_headers(settings.max_headers);
    let conn = builder
        .serve_connection(TokioIo::new(transport), service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut shutdown = state.shutdown.clone();
    tokio::select! {
        done = conn.as_mut() => if let Err(e) = done {
            tracing::debug!(%peer, "HTTP connection: {e}");
        },
        // Dropping the connection closes its socket.
        _ = slot.shed() => {}
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
        }
    }
}

/// Whether a request asks for the WebSocket upgrade (which establishes the connection only
/// once it logs in or subscribes).
fn wants_websocket(request: &hyper::Request<Incoming>) -> bool {
    request.uri().path() == "/ws" && request.headers().contains_key(header::UPGRADE)
}

async fn route(
    mut router: Router,
    slot: Arc<Slot>,
    peer: SocketAddr,
    mut request: hyper::Request<Incoming>,
) -> Result<Response, Infallible> {
    if !wants_websocket(&request) && !slot.establish() {
        return Ok(too_many_connections());
    }
    request.extensions_mut().insert(ConnectInfo(peer));
    request.extensions_mut().insert(slot);
    // The router is always ready (axum's Router::poll_ready returns Ready).
    router.call(request).await
}

/// 503 `busy`, and the connection closes after it.
pub fn too_many_connections() -> Response {
    let mut response = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        "too many connections (from this address, or in all): try again later",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
