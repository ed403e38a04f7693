//! HTTP: the REST API, the WebSocket API, /metrics and the web console (docs/api.md).
//!
//! It runs on its own small tokio runtime. Commands reach the pipeline through the gateway
//! thread ([`bridge`]); market data comes from the market data thread's batches ([`fanout`])
//! and its feed's snapshots.

pub mod assets;
pub mod auth;
pub mod bridge;
pub mod fanout;
mod futures;
mod history;
mod json;
pub mod keys;
pub mod listener;
mod order_status;
mod orders;
pub mod outbox;
mod rest;
pub mod units;
mod ws;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rialto_core::{Reason, UserId};
use tokio::sync::{mpsc, watch};

use crate::auth::Credentials;
use crate::config::{InstrumentSettings, WebSettings};
use crate::feed::MarketData;
use bridge::{CallError, WebBridge};

/// The largest request body, and the largest WebSocket message, accepted.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// How long a call waits for the engine's answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// An error as the API reports it: an HTTP status and a stable code (docs/api.md).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// More about the refusal, beside `code` and `message` (a resent order's original: its
    /// status, under `order`).
    pub detail: Option<(&'static str, serde_json::Value)>,
    /// A 429's `Retry-After`, in seconds.
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            detail: None,
            retry_after_s: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn rejected(reason: Reason) -> ApiError {
        ApiError::bad_request(
            reason.as_str(),
            format!("the engine rejected the command: {}", reason.as_str()),
        )
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// What a read replica answers to whatever needs the sequencer (docs/api.md).
    pub fn read_only_replica() -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only_replica",
            "this node is a read replica: it serves market data and a few read-only queries; \
             send orders, admin commands and this request to the venue's leader",
        )
    }

    pub fn unknown_symbol(name: &str) -> ApiError {
        ApiError::not_found(format!("no symbol named {name:?}"))
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after_s = Some(seconds);
        self
    }

    pub fn with_detail(mut self, name: &'static str, value: serde_json::Value) -> ApiError {
        self.detail = Some((name, value));
        self
    }

    /// The `error` object of an answer.
    pub fn error_json(&self) -> serde_json::Value {
        let mut error = serde_json::json!({"code": self.code, "message": self.message});
        if let Some((name, value)) = &self.detail {
            error[*name] = value.clone();
        }
        error
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error": self.error_json()})
    }
}

impl From<CallError> for ApiError {
    fn from(e: CallError) -> ApiError {
        match e {
            CallError::Busy => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "the server's intake is full: try again",
            ),
            CallError::ShuttingDown => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the server is stopping",
            ),
            CallError::Timeout => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                "no answer from the engine in time (the command may still apply)",
            ),
            CallError::ReadOnlyReplica => ApiError::read_only_replica(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after_s {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// Who signed a private request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Principal {
    User(UserId),
    Admin,
}

/// Everything the handlers share.
pub struct AppState {
    pub settings: WebSettings,
    pub bridge: Arc<WebBridge>,
    pub md: Arc<MarketData>,
    pub credentials: Arc<Credentials>,
    pub admin_secret: String,
    /// Issued API keys (docs/api.md, "API keys").
    pub keys: Arc<keys::KeyStore>,
    /// Decimal tick and lot sizes by symbol name, for display.
    pub instruments: Mutex<BTreeMap<String, InstrumentSettings>>,
    pub auth: auth::Guard,
    pub history: history::Histories,
    /// What became of each order (GET /api/v1/orders/{id}, place answers).
    pub orders: order_status::OrderStatuses,
    /// The history database, when `[history]` is on (history.rs serves it).
    pub db: Option<Arc<crate::history::Store>>,
    pub topics: fanout::Topics,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub shutdown: watch::Receiver<bool>,
    /// The listener's connections, pending and established.
    pub connections: Arc<listener::Connections>,
    /// What the WebSocket outboxes have queued.
    pub queue_stats: Arc<outbox::QueueStats>,
    /// Whether the listener speaks TLS.
    pub tls: bool,
    /// The engine's limit on a user's open orders (`[engine] max_open_orders_per_user`).
    pub max_open_orders_per_user: u32,
    /// Server-chosen order ids: clock-based so that they do not repeat across restarts.
    next_order_id: std::sync::atomic::AtomicI64,
}

impl AppState {
    pub fn next_order_id(&self) -> i64 {
        self.next_order_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// What the web side needs from the rest of the server.
pub struct WebParts {
    pub settings: WebSettings,
    pub instruments: BTreeMap<String, InstrumentSettings>,
    pub credentials: Arc<Credentials>,
    pub admin_secret: String,
    pub keys: Arc<keys::KeyStore>,
    pub bridge: Arc<WebBridge>,
    pub user_messages: mpsc::Receiver<bridge::WebBatch>,
    pub md: Arc<MarketData>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The history database, when `[history]` is on.
    pub history: Option<Arc<crate::history::Store>>,
    /// When this run of the server began (ms since the Unix epoch): requests signed earlier
    /// are refused.
    pub started_ms: i64,
    /// TLS for the listener (`[tls]`), when on.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The engine's limit, for exchange-info.
    pub max_open_orders_per_user: u32,
}

pub struct WebServer {
    pub addr: SocketAddr,
    thread: JoinHandle<()>,
}

impl WebServer {
    /// Waits for the web thread (after the stop flag is set).
    pub fn join(self) {
        let _ = self.thread.join();
    }
}

/// Binds the HTTP listener (before anything else starts, so that a port conflict stops the
/// server early).
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serves on a runtime thread of its own until `stop` turns true.
pub fn start(
    parts: WebParts,
    listener: std::net::TcpListener,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<WebServer> {
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rialto-web")
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name("rialto-web-main".into())
        .spawn(move || runtime.block_on(serve(parts, listener, stop)))?;
    Ok(WebServer { addr, thread })
}

async fn serve(parts: WebParts, listener: std::net::TcpListener, stop: Arc<AtomicBool>) {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let now_us = crate::pipeline::now_ns() / 1_000;
    let state = Arc::new(AppState {
        auth: auth::Guard::new(&parts.settings, parts.started_ms),
        connections: Arc::new(listener::Connections::new(&parts.settings)),
        queue_stats: Arc::default(),
        tls: parts.tls.is_some(),
        max_open_orders_per_user: parts.max_open_orders_per_user,
        settings: parts.settings,
        bridge: parts.bridge,
        md: parts.md.clone(),
        credentials: parts.credentials,
        admin_secret: parts.admin_secret,
        keys: parts.keys,
        instruments: Mutex::new(parts.instruments),
        history: history::Histories::default(),
        orders: order_status::OrderStatuses::default(),
        db: parts.history,
        topics: fanout::Topics::default(),
        metrics: parts.metrics,
        shutdown: shutdown_rx,
        next_order_id: std::sync::atomic::AtomicI64::new(now_us),
    });
    let fanout = {
        let (state, batches, stop) = (state.clone(), parts.md.subscribe(), stop.clone());
        std::thread::Builder::new()
            .name("rialto-fanout".into())
            .spawn(move || fanout::run(state, batches, stop))
    };
    tokio::spawn(history::run(state.clone(), parts.user_messages));
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("web listener: {e}");
            return;
        }
    };
    let app = rest::router(state.clone());
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The listener and every connection watch this: the listener stops accepting, HTTP
        // connections finish their request, WebSocket connections close themselves.
        let _ = shutdown_tx.send(true);
    });
    let tls = parts.tls.map(|config| {
        // The HTTP listener speaks HTTP/1.1 only (WebSocket upgrades need it).
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    listener::run(state.clone(), listener, app, tls, state.shutdown.clone()).await;
    match fanout {
        Ok(fanout) => {
            state.md.nudge();
            let _ = tokio::task::spawn_blocking(move || fanout.join()).await;
        }
        Err(e) => tracing::error!("WebSocket fan-out thread: {e}"),
    }
}
