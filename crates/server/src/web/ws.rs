//! The WebSocket API (docs/api.md): public channels, a private `user` channel after login,
//! and order entry.
//!
//! The upgrade is done here rather than by the web framework so that the connection keeps its
//! TCP socket: every frame goes through the connection's [`Outbox`], into which the fan-out
//! writes stream messages directly. The WebSocket library reads and parses the client's
//! frames and answers pings and the close handshake through the same outbox.
//!
//! Limits: a connection must log in or subscribe within `ws_login_timeout_ms` (until then it
//! is a pending connection of the listener, and may be shed for a newer one); one from which
//! nothing arrives for half of `ws_idle_timeout_ms` is pinged, and closed once nothing has
//! arrived for all of it; every request is charged to the rate of the logged-in user, or of
//! the client address before a login.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use rialto_core::UserId;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, handshake::derive_accept_key};

use super::auth::{Access, Payer};
use super::fanout::Channel;
use super::listener::{Slot, Transport};
use super::outbox::{Duplex, Input, Outbox, SLOW_WRITE, text_frame};
use super::units::{self, Amount, Units};
use super::{ApiError, AppState, MAX_BODY_BYTES, Principal, json as j, orders};
use crate::admission::PeerKey;

/// Close code for a message over the size limit (RFC 6455 "message too big").
const CLOSE_TOO_BIG: u16 = 1009;
/// Close code for a slow consumer, a login deadline missed or a connection shed ("policy
/// violation").
const CLOSE_POLICY: u16 = 1008;
/// Close code for an idle connection ("going away").
const CLOSE_IDLE: u16 = 1001;
/// Close code when the established connections are full ("try again later").
const CLOSE_TRY_LATER: u16 = 1013;
/// The library refuses (and drops the connection on) messages over this; ours is the
/// smaller [`MAX_BODY_BYTES`], answered with an error and a proper close.
const HARD_MESSAGE_LIMIT: usize = 1 << 20;
/// After its close frame, how long a connection reads and discards what the client still
/// sends: closing with unread input would reset the connection and lose the close frame.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Numbers connections, so that a channel can tell its subscribers apart.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

pub async fn upgrade(State(state): State<Arc<AppState>>, mut request: Request) -> Response {
    let live = state.metrics.ws_connections();
    if live >= state.settings.max_ws_connections as u64 {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "too many WebSocket connections",
        )
        .into_response_body();
    }
    // `/ws?units=int`: the engine's integers on this connection (docs/api.md, "Units").
    let units = match Units::of(request.uri()) {
        Ok(units) => units,
        Err(e) => return e.into_response_body(),
    };
    let Some(key) = websocket_key(&request) else {
        return ApiError::bad_request(
            "bad_request",
            "expected a WebSocket upgrade (version 13) on /ws",
        )
        .into_response_body();
    };
    // The listener gives every request its connection's slot and peer.
    let slot = request.extensions().get::<Arc<Slot>>().cloned();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let (Some(slot), Some(peer)) = (slot, peer) else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "a request from outside the listener",
        )
        .into_response_body();
    };
    let accept = derive_accept_key(key.as_bytes());
    let upgrading = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let upgraded = match upgrading.await {
            Ok(upgraded) => upgraded,
            Err(e) => return tracing::debug!("WebSocket upgrade: {e}"),
        };
        match upgraded.downcast::<TokioIo<Transport>>() {
            Ok(parts) => {
                let transport = parts.io.into_inner();
                connection(state, transport, parts.read_buf, slot, peer, units).await
            }
            Err(_) => tracing::error!("a WebSocket upgrade over an unknown transport"),
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(Body::empty())
        .unwrap_or_default()
}

/// The client's key, when the request is a WebSocket upgrade this server speaks.
fn websocket_key(request: &Request) -> Option<String> {
    let headers = request.headers();
    let has = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    let upgrade = request.method() == axum::http::Method::GET
        && has(header::CONNECTION, "upgrade")
        && has(header::UPGRADE, "websocket")
        && headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .is_some_and(|v| v == "13");
    let key = headers.get(header::SEC_WEBSOCKET_KEY)?.to_str().ok()?;
    upgrade.then(|| key.to_string())
}

impl ApiError {
    fn into_response_body(self) -> Response {
        axum::response::IntoResponse::into_response(self)
    }
}

#[derive(Deserialize)]
struct WsRequest {
    id: Option<Value>,
    op: String,
    #[serde(flatten)]
    args: Value,
}

/// How a connection ends, as its close frame says.
struct Ending {
    code: u16,
    reason: &'static str,
    /// A last message before the close (for a slow consumer, whose queue is dropped).
    notice: Option<String>,
    /// The client closed: the library has answered, and nothing more is read.
    by_client: bool,
}

impl Ending {
    fn new(code: u16, reason: &'static str) -> Ending {
        Ending {
            code,
            reason,
            notice: None,
            by_client: false,
        }
    }
}

/// What a connection follows.
enum Subscription {
    /// A public channel, which writes into the connection's outbox.
    Channel(Arc<Channel>),
    /// The private stream, forwarded by a task of its own while `active` holds (the task
    /// sends under that lock, so once unsubscribing has cleared it nothing more is sent: no
    /// message of this subscription comes after the unsubscribe's answer).
    User {
        active: Arc<std::sync::Mutex<bool>>,
        task: tokio::task::JoinHandle<()>,
    },
}

struct Connection {
    state: Arc<AppState>,
    id: u64,
    outbox: Arc<Outbox>,
    subscriptions: HashMap<String, Subscription>,
    user: Option<UserId>,
    /// The key the connection logged in with.
    access: Option<Access>,
    peer: PeerKey,
    peer_ip: std::net::IpAddr,
    slot: Arc<Slot>,
    /// How this connection writes and reads prices, quantities and amounts.
    units: Units,
    /// Set when the connection must end after its current answer.
    ending: Option<Ending>,
}

async fn connection(
    state: Arc<AppState>,
    transport: Transport,
    already_read: bytes::Bytes,
    slot: Arc<Slot>,
    peer: SocketAddr,
    units: Units,
) {
    state.metrics.ws_opened();
    let settings = &state.settings;
    let (max_frames, max_bytes) = (settings.max_ws_queue, settings.max_ws_queue_bytes_public);
    let stats = state.queue_stats.clone();
    let (outbox, flusher, input) = match transport {
        Transport::Plain(socket) => {
            let socket = Arc::new(socket);
            let outbox = Arc::new(Outbox::new(
                Some(socket.clone()),
                max_frames,
                max_bytes,
                stats,
            ));
            let flusher = tokio::spawn(outbox.clone().flush());
            (outbox, flusher, Input::Tcp(socket))
        }
        Transport::Tls(stream) => {
            let (reader, writer) = tokio::io::split(*stream);
            let outbox = Arc::new(Outbox::new(None, max_frames, max_bytes, stats));
            let flusher = tokio::spawn(outbox.clone().flush_tls(writer));
            (outbox, flusher, Input::Tls(Box::new(reader)))
        }
    };
    let io = Duplex {
        input,
        outbox: outbox.clone(),
        already_read,
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .max_message_size(Some(HARD_MESSAGE_LIMIT))
        .max_frame_size(Some(HARD_MESSAGE_LIMIT));
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let mut shutdown = state.shutdown.clone();
    let mut conn = Connection {
        state: state.clone(),
        id: NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed),
        outbox: outbox.clone(),
        subscriptions: HashMap::new(),
        user: None,
        access: None,
        peer: PeerKey::of(peer.ip()),
        peer_ip: peer.ip(),
        slot,
        units,
        ending: None,
    };
    let login_deadline = Instant::now() + Duration::from_millis(settings.ws_login_timeout_ms);
    let idle = Duration::from_millis(settings.ws_idle_timeout_ms);
    // When something last arrived, and whether the connection has been pinged since.
    let (mut heard, mut pinged) = (Instant::now(), false);
    let ending = loop {
        if let Some(ending) = conn.ending.take() {
            break ending;
        }
        let quiet_until = heard + if pinged { idle } else { idle / 2 };
        let established = conn.slot.is_established();
        tokio::select! {
            frame = ws.next() => {
                (heard, pinged) = (Instant::now(), false);
                match frame {
                Some(Ok(Message::Text(text))) if text.len() > MAX_BODY_BYTES => {
                    break too_big();
                }
                Some(Ok(Message::Text(text))) => conn.on_text(&text).await,
                Some(Ok(Message::Binary(b))) if b.len() > MAX_BODY_BYTES => break too_big(),
                Some(Ok(Message::Binary(_))) => conn.reply(None, Err(ApiError::bad_request(
                    "malformed_json", "send requests as text frames of JSON"))),
                Some(Ok(Message::Close(_))) | None => {
                    break Ending { by_client: true, ..Ending::new(1000, "bye") };
                }
                Some(Ok(_)) => {} // ping and pong are answered by the library
                Some(Err(e)) => {
                    tracing::debug!("WebSocket read: {e}");
                    break Ending::new(1002, "protocol error");
                }
            }},
            _ = tokio::time::sleep_until(quiet_until) => {
                if pinged {
                    break Ending::new(CLOSE_IDLE, "idle");
                }
                pinged = true;
                let _ = ws.send(Message::Ping(bytes::Bytes::new())).await;
            }
            _ = tokio::time::sleep_until(login_deadline), if !established => {
                break Ending::new(CLOSE_POLICY, "no login or subscription in time");
            }
            _ = conn.slot.shed(), if !established => {
                break Ending::new(CLOSE_POLICY, "too many connections waiting to log in");
            }
            slow = outbox.troubled() => {
                if !slow {
                    break Ending { by_client: true, ..Ending::new(1006, "broken") };
                }
                if outbox.was_restarted() {
                    let notice = json!({"ch": "error", "error": {"code": "feed_restarted",
                        "message": "the market data feed started a new epoch (another node leads \
                                    the venue): its numbers start again; connect and subscribe again"}});
                    break Ending { notice: Some(notice.to_string()), ..Ending::new(CLOSE_TRY_LATER, "feed restarted") };
                }
                state.metrics.ws_slow_consumer();
                let notice = json!({"ch": "error", "error": {"code": "slow_consumer",
                    "message": "this connection fell too far behind its streams and is closed"}});
                break Ending { notice: Some(notice.to_string()), ..Ending::new(CLOSE_POLICY, "slow consumer") };
            }
            _ = shutdown.changed() => break Ending::new(1001, "server stopping"),
        }
    };
    conn.unsubscribe_all();
    outbox.close(ending.notice.as_deref().map(text_frame));
    if !ending.by_client {
        let close = CloseFrame {
            code: CloseCode::from(ending.code),
            reason: ending.reason.into(),
        };
        let _ = ws.send(Message::Close(Some(close))).await;
        let _ = tokio::time::timeout(LINGER, async {
            while let Some(Ok(message)) = ws.next().await {
                if let Message::Close(_) = message {
                    break;
                }
            }
        })
        .await;
    }
    outbox.seal();
    let mut flusher = flusher;
    if tokio::time::timeout(SLOW_WRITE, &mut flusher)
        .await
        .is_err()
    {
        flusher.abort();
    }
    state.metrics.ws_closed();
}

fn too_big() -> Ending {
    let error = ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("a message is at most {MAX_BODY_BYTES} bytes"),
    );
    Ending {
        notice: Some(error.body().to_string()),
        ..Ending::new(CLOSE_TOO_BIG, "message too big")
    }
}

/// Forwards a user's private stream into the outbox until it is aborted, leaving out what
/// the snapshot (as of `snapshot_seq`) already shows; falling so far behind that messages
/// were overwritten makes a slow consumer.
async fn forward_user_stream(
    mut rx: broadcast::Receiver<super::history::UserMessage>,
    state: Arc<AppState>,
    units: Units,
    outbox: Arc<Outbox>,
    snapshot_seq: u64,
    active: Arc<std::sync::Mutex<bool>>,
) {
    loop {
        match rx.recv().await {
            Ok(message) if message.seq <= snapshot_seq => {}
            Ok(message) => {
                let text = units::answer((*message.message).clone(), units, &state, None);
                let active = active.lock().unwrap_or_else(|e| e.into_inner());
                if !*active || !outbox.send(text_frame(&text.to_string())) {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => return outbox.overflow(),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

fn field<'a>(args: &'a Value, name: &str) -> Option<&'a Value> {
    args.get(name)
}

/// A price or quantity field, read in the connection's units by the order calls.
fn need_amount(args: &Value, name: &str) -> Result<Amount, ApiError> {
    field(args, name)
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| {
            ApiError::bad_request(
                "malformed_json",
                format!("`{name}` must be a decimal string (an integer with ?units=int)"),
            )
        })
}

/// The order a request names: by `client_order_id` (mapped as a place maps it) or by `order`.
fn order_named(args: &Value, user: UserId) -> Result<i64, ApiError> {
    match field(args, "client_order_id") {
        Some(Value::String(cid)) if super::order_status::valid_client_order_id(cid) => {
            Ok(super::order_status::order_id_for(user, cid))
        }
        Some(_) => Err(ApiError::bad_request(
            "bad_request",
            "a client order id is 1 to 36 ASCII letters, digits and . _ - : /",
        )),
        None => need_i64(args, "order"),
    }
}

fn need_i64(args: &Value, name: &str) -> Result<i64, ApiError> {
    field(args, name)
        .and_then(Value::as_i64)
        .ok_or_else(|| ApiError::bad_request("malformed_json", format!("`{name}` must be an i64")))
}

impl Connection {
    /// Sends a reply or a snapshot; when the connection takes no more, it is closing anyway.
    fn send(&self, message: Value) {
        self.outbox.send(text_frame(&message.to_string()));
    }

    /// Sends a message made in engine integers, in the connection's units.
    fn send_in_units(&self, message: Value) {
        self.send(units::answer(message, self.units, &self.state, None));
    }

    fn unsubscribe(&mut self, channel: &str) -> bool {
        match self.subscriptions.remove(channel) {
            Some(Subscription::Channel(c)) => c.unsubscribe(self.id),
            Some(Subscription::User { active, task }) => {
                *active.lock().unwrap_or_else(|e| e.into_inner()) = false;
                task.abort();
            }
            None => return false,
        }
        true
    }

    fn unsubscribe_all(&mut self) {
        let channels: Vec<String> = self.subscriptions.keys().cloned().collect();
        for channel in channels {
            self.unsubscribe(&channel);
        }
    }

    fn reply(&self, id: Option<Value>, result: Result<Value, ApiError>) {
        let id = id.unwrap_or(Value::Null);
        self.send(match result {
            Ok(result) => json!({"id": id, "result": result}),
            Err(e) => json!({"id": id, "error": e.error_json()}),
        });
    }

    /// Who this connection's requests are charged to.
    fn payer(&self) -> Payer {
        match self.access {
            Some(access) => Payer::Key(access.key),
            None => Payer::Address(self.peer),
        }
    }

    async fn on_text(&mut self, text: &str) {
        let parsed: Result<WsRequest, _> = serde_json::from_str(text);
        let id = parsed.as_ref().ok().and_then(|r| r.id.clone());
        if let Err(e) = self.state.auth.allow(self.payer()) {
            return self.reply(id, Err(e));
        }
        let request = match parsed {
            Ok(r) => r,
            Err(e) => {
                return self.reply(
                    None,
                    Err(ApiError::bad_request(
                        "malformed_json",
                        format!("not a request: {e}"),
                    )),
                );
            }
        };
        let result = self.handle(&request).await;
        let result = result.map(|v| units::answer(v, self.units, &self.state, None));
        self.reply(id, result);
    }

    /// The connection is worth keeping: it leaves the listener's pending connections, unless
    /// the established ones are full, which ends it.
    fn establish(&mut self) -> Result<(), ApiError> {
        if self.slot.establish() {
            return Ok(());
        }
        self.ending = Some(Ending::new(CLOSE_TRY_LATER, "too many connections"));
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "too many connections (from this address, or in all): try again later",
        ))
    }

    async fn handle(&mut self, request: &WsRequest) -> Result<Value, ApiError> {
        let args = &request.args;
        let state = self.state.clone();
        // A read replica serves the public channels only: a login's private streams and every
        // order need the sequencer.
        if state.bridge.is_read_only()
            && !matches!(request.op.as_str(), "subscribe" | "unsubscribe")
        {
            return Err(ApiError::read_only_replica());
        }
        match request.op.as_str() {
            "subscribe" => {
                let channel = field(args, "ch").and_then(Value::as_str).unwrap_or("");
                self.subscribe(channel).await
            }
            "unsubscribe" => {
                let channel = field(args, "ch").and_then(Value::as_str).unwrap_or("");
                match self.unsubscribe(channel) {
                    true => Ok(json!({"unsubscribed": channel})),
                    false => Err(ApiError::bad_request(
                        "bad_request",
                        "not subscribed to that channel",
                    )),
                }
            }
            "login" => self.login(args),
            "place" => {
                let user = self.trader()?;
                let body: orders::PlaceBody =
                    serde_json::from_value(without_meta(args)).map_err(|e| {
                        ApiError::bad_request("malformed_json", format!("not an order: {e}"))
                    })?;
                orders::place(&state, user, &body, self.units).await
            }
            "cancel" => {
                let user = self.trader()?;
                orders::cancel(&state, user, order_named(args, user)?).await
            }
            "move" => {
                let user = self.trader()?;
                let price = need_amount(args, "price")?;
                let order = order_named(args, user)?;
                orders::move_order(&state, user, order, &price, self.units).await
            }
            "reduce" => {
                let user = self.trader()?;
                let qty = need_amount(args, "qty")?;
                let order = order_named(args, user)?;
                orders::reduce(&state, user, order, &qty, self.units).await
            }
            "amend" => {
                let user = self.trader()?;
                let order = order_named(args, user)?;
                let mut fields = without_meta(args);
                if let Some(map) = fields.as_object_mut() {
                    map.remove("order");
                    map.remove("client_order_id");
                }
                let body: orders::AmendBody = serde_json::from_value(fields).map_err(|e| {
                    ApiError::bad_request("malformed_json", format!("not an amend: {e}"))
                })?;
                orders::amend(&state, user, order, &body, self.units).await
            }
            "order_status" => {
                let user = self.reader()?;
                let order = order_named(args, user)?;
                let status = orders::outcome(&state, user, order).await?;
                match status["status"].as_str() {
                    Some("unknown") => Err(ApiError::not_found(format!(
                        "no order {order} of this user is live or known to this run of the server"
                    ))),
                    _ => Ok(status),
                }
            }
            "mass_cancel" => {
                let user = self.trader()?;
                let symbol = field(args, "symbol").and_then(Value::as_str);
                orders::mass_cancel(&state, user, symbol).await
            }
            other => Err(ApiError::bad_request(
                "bad_request",
                format!("unknown op {other:?}"),
            )),
        }
    }

    /// The logged-in user, while the key it logged in with is not revoked.
    fn reader(&self) -> Result<UserId, ApiError> {
        let (Some(user), Some(access)) = (self.user, self.access) else {
            return Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "missing_credentials",
                "log in first",
            ));
        };
        if let Some(id) = access.key.issued_id()
            && !self.state.keys.exists(id)
        {
            return Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "unknown_key",
                "the API key this connection logged in with was revoked",
            ));
        }
        Ok(user)
    }

    /// The logged-in user, when the key may trade.
    fn trader(&self) -> Result<UserId, ApiError> {
        let user = self.reader()?;
        self.access.expect("logged in").need_trade()?;
        Ok(user)
    }

    fn login(&mut self, args: &Value) -> Result<Value, ApiError> {
        let text = |name: &str| -> String {
            match field(args, name) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            }
        };
        if field(args, "nonce").is_some() {
            return Err(ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "bad_signature",
                "nonce is no longer used: sign key, ts, recv_window, WS and /ws (docs/api.md)",
            ));
        }
        let (key, ts, sig) = (text("key"), text("ts"), text("sig"));
        let window = field(args, "recv_window").map(|_| text("recv_window"));
        let signed = super::auth::Signed {
            key: &key,
            timestamp_ms: &ts,
            recv_window_ms: window.as_deref(),
            signature: &sig,
        };
        let access = self
            .state
            .auth
            .verify(&self.state, &signed, self.peer_ip, "WS", "/ws", b"")
            .map_err(|refusal| *refusal.error)?;
        match access.principal {
            Principal::User(user) => {
                self.establish()?;
                self.user = Some(user);
                self.access = Some(access);
                self.outbox
                    .set_byte_limit(self.state.settings.max_ws_queue_bytes);
                Ok(json!({"user": user}))
            }
            Principal::Admin => Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                "forbidden",
                "the WebSocket API is for traders: log in with a user's key",
            )),
        }
    }

    async fn subscribe(&mut self, channel: &str) -> Result<Value, ApiError> {
        if self.subscriptions.contains_key(channel) {
            return Err(ApiError::bad_request("bad_request", "already subscribed"));
        }
        let state = self.state.clone();
        if channel == "user" {
            let user = self.reader()?;
            // Subscribe first, then read: nothing falls between.
            let rx = state.history.subscribe(user, state.settings.max_ws_queue);
            let (seq, report) = orders::report(&state, user).await?;
            self.send_in_units(json!({"ch": "user", "type": "balances", "seq": seq, "balances": orders::balances_json(&report)}));
            self.send_in_units(json!({"ch": "user", "type": "orders", "seq": seq, "orders": orders::open_orders_json(&report)}));
            if let Some(message) = super::history::positions_message(&state, seq, &report).await {
                self.send_in_units(message);
            }
            let active = Arc::new(std::sync::Mutex::new(true));
            let task = tokio::spawn(forward_user_stream(
                rx,
                state.clone(),
                self.units,
                self.outbox.clone(),
                seq,
                active.clone(),
            ));
            self.subscriptions
                .insert(channel.to_string(), Subscription::User { active, task });
            return Ok(json!({"subscribed": channel}));
        }
        if channel == super::history::STATUS_CHANNEL {
            // The snapshot is read before joining (reading waits for the engine), so it is
            // read again after: a phase change in between is in the second snapshot, and a
            // message whose seq is at or below a snapshot's is already in it (docs/api.md).
            let snapshot = |seq: u64, mut settings: Value| {
                json!({"ch": channel, "type": "snapshot", "seq": seq,
                    "symbols": settings["symbols"].take()})
            };
            let (seq, settings) = orders::venue_status(&state).await?;
            let message = units::answer(snapshot(seq, settings), self.units, &state, None);
            self.establish()?;
            let joined = state
                .topics
                .subscribe(channel, self.units, self.id, &self.outbox, || {
                    (text_frame(&message.to_string()), seq)
                });
            self.subscriptions
                .insert(channel.to_string(), Subscription::Channel(joined));
            let (again, settings) = orders::venue_status(&state).await?;
            if again != seq {
                self.send_in_units(snapshot(again, settings));
            }
            return Ok(json!({"subscribed": channel}));
        }
        let Some((kind, name)) = channel.split_once('.') else {
            return Err(ApiError::bad_request(
                "bad_request",
                format!("unknown channel {channel:?}"),
            ));
        };
        if !matches!(kind, "book" | "orders" | "trades" | "bbo" | "candles") {
            return Err(ApiError::bad_request(
                "bad_request",
                format!("unknown channel {channel:?}"),
            ));
        }
        // A channel exists only for a listed symbol (no table entry for any name a client
        // makes up); then subscribe first and read the snapshot after, so nothing falls between.
        let id = state
            .md
            .feed()
            .symbol_id(name)
            .ok_or_else(|| ApiError::unknown_symbol(name))?;
        // The snapshot goes into the outbox as the connection joins the channel, both under
        // the channel's lock: no stream message comes before it, and none falls between. The
        // feed runs ahead of the fan-out, so the snapshot also says what it is as of (an L2 or
        // L3 seq, or a trade id), and the fan-out sends nothing at or below that after it.
        let catalog = (self.units == Units::Decimal).then(|| units::Catalog::of(&state));
        let snapshot = || {
            let feed = state.md.feed();
            let (message, as_of) = match kind {
                "book" => {
                    let l2 = feed.l2(id, usize::MAX).expect("known");
                    let mut m = j::l2(name, &l2);
                    m["ch"] = json!(channel);
                    m["type"] = json!("snapshot");
                    (m, l2.seq)
                }
                "orders" => {
                    let l3 = feed.l3(id).expect("known");
                    let mut m = j::l3(name, &l3);
                    m["ch"] = json!(channel);
                    m["type"] = json!("snapshot");
                    (m, l3.seq)
                }
                "trades" => {
                    let trades = feed.recent_trades(id, 50).expect("known");
                    let last_trade = feed.last_trade(id).expect("known");
                    let m = json!({"ch": channel, "type": "snapshot", "last_trade": last_trade,
                        "trades": trades.iter().map(j::trade).collect::<Vec<_>>()});
                    (m, last_trade)
                }
                "bbo" => {
                    let (seq, bid, ask) = feed.bbo(id).expect("known");
                    (j::bbo(channel, seq, bid, ask), seq)
                }
                _ => {
                    let candles = feed.candles(id, 60).expect("known");
                    let last_trade = feed.last_trade(id).expect("known");
                    let m = json!({"ch": channel, "type": "snapshot", "last_trade": last_trade,
                        "candles": candles.iter().map(j::candle).collect::<Vec<_>>()});
                    (m, last_trade)
                }
            };
            // The catalog was read before: the feed is locked here.
            let mut message = message;
            if let Some(catalog) = &catalog {
                units::decimalize(&mut message, catalog, Some(name));
            }
            (text_frame(&message.to_string()), as_of)
        };
        self.establish()?;
        let joined = state
            .topics
            .subscribe(channel, self.units, self.id, &self.outbox, snapshot);
        self.subscriptions
            .insert(channel.to_string(), Subscription::Channel(joined));
        Ok(json!({"subscribed": channel}))
    }
}

/// The request's own fields without the envelope (`id`, `op`).
fn without_meta(args: &Value) -> Value {
    let mut args = args.clone();
    if let Some(map) = args.as_object_mut() {
        map.remove("id");
        map.remove("op");
    }
    args
}
