//! The WebSocket API (docs/api.md): public channels, a private `user` channel after login,
//! and order entry.
//!
//! Each connection has a writer task fed by a bounded queue. Stream messages go into that
//! queue without waiting: a connection whose queue is full (or whose channel subscription
//! fell behind) is a slow consumer, told so and closed, while everyone else carries on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures_util::stream::{BoxStream, SelectAll, SplitSink};
use futures_util::{FutureExt, SinkExt, StreamExt};
use rialto_core::UserId;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

use super::{ApiError, AppState, MAX_BODY_BYTES, Principal, json as j, orders};

/// Close code for a message over the size limit (RFC 6455 "message too big").
const CLOSE_TOO_BIG: u16 = 1009;
/// Close code for a slow consumer ("policy violation").
const CLOSE_POLICY: u16 = 1008;
/// The library refuses (and drops the connection on) messages over this; ours is the
/// smaller [`MAX_BODY_BYTES`], answered with an error and a proper close.
const HARD_MESSAGE_LIMIT: usize = 1 << 20;
/// After its close frame, how long a connection reads and discards what the client still
/// sends: closing with unread input would reset the connection and lose the close frame.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest a subscriber's socket may take to accept one burst of messages.
const SLOW_WRITE: std::time::Duration = std::time::Duration::from_secs(5);

pub async fn upgrade(State(state): State<Arc<AppState>>, ws: WebSocketUpgrade) -> Response {
    let live = state.metrics.ws_connections();
    if live >= state.settings.max_ws_connections as u64 {
        return ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "too many WebSocket connections",
        )
        .into_response_body();
    }
    ws.max_message_size(HARD_MESSAGE_LIMIT)
        .max_frame_size(HARD_MESSAGE_LIMIT)
        .on_upgrade(move |socket| connection(state, socket))
}

impl ApiError {
    fn into_response_body(self) -> Response {
        axum::response::IntoResponse::into_response(self)
    }
}

#[derive(Deserialize)]
struct Request {
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
    notice: Option<Utf8Bytes>,
}

/// What the reading side hands the connection's writer.
enum Out {
    /// A reply or a snapshot, written in turn.
    Text(Utf8Bytes),
    /// A stream to follow from now on (after the snapshot sent before it), until `cancel`.
    Follow {
        rx: broadcast::Receiver<Utf8Bytes>,
        cancel: Arc<AtomicBool>,
    },
}

struct Connection {
    state: Arc<AppState>,
    out: mpsc::Sender<Out>,
    /// Rung when the writer's queue is full, or by the writer when a stream leaves it behind.
    slow: Arc<Notify>,
    /// Each subscription's cancel flag, by channel.
    subscriptions: HashMap<String, Arc<AtomicBool>>,
    user: Option<UserId>,
}

async fn connection(state: Arc<AppState>, socket: WebSocket) {
    state.metrics.ws_opened();
    let (sink, mut stream) = socket.split();
    let (out, queue) = mpsc::channel::<Out>(state.settings.max_ws_queue);
    let (end_tx, end_rx) = oneshot::channel::<Ending>();
    let mut shutdown = state.shutdown.clone();
    let slow = Arc::new(Notify::new());
    let writer = tokio::spawn(write_loop(sink, queue, end_rx, slow.clone()));

    let mut conn = Connection {
        state: state.clone(),
        out,
        slow: slow.clone(),
        subscriptions: HashMap::new(),
        user: None,
    };
    let ending = loop {
        tokio::select! {
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) if text.len() > MAX_BODY_BYTES => {
                    break too_big();
                }
                Some(Ok(Message::Text(text))) => conn.on_text(&text).await,
                Some(Ok(Message::Binary(b))) if b.len() > MAX_BODY_BYTES => break too_big(),
                Some(Ok(Message::Binary(_))) => conn.reply(None, Err(ApiError::bad_request(
                    "malformed_json", "send requests as text frames of JSON"))),
                Some(Ok(Message::Close(_))) | None => break Ending { code: 1000, reason: "bye", notice: None },
                Some(Ok(_)) => {} // ping and pong are answered by the library
                Some(Err(e)) => {
                    tracing::debug!("WebSocket read: {e}");
                    break Ending { code: 1002, reason: "protocol error", notice: None };
                }
            },
            _ = slow.notified() => {
                conn.state.metrics.ws_slow_consumer();
                let notice = json!({"ch": "error", "error": {"code": "slow_consumer",
                    "message": "this connection fell too far behind its streams and is closed"}});
                break Ending { code: CLOSE_POLICY, reason: "slow consumer",
                    notice: Some(Utf8Bytes::from(notice.to_string())) };
            }
            _ = shutdown.changed() => break Ending { code: 1001, reason: "server stopping", notice: None },
        }
    };
    drop(conn);
    let _ = end_tx.send(ending);
    let _ = tokio::time::timeout(LINGER, async {
        while let Some(Ok(message)) = stream.next().await {
            if let Message::Close(_) = message {
                break;
            }
        }
    })
    .await;
    let _ = writer.await;
    state.metrics.ws_closed();
}

fn too_big() -> Ending {
    let error = ApiError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("a message is at most {MAX_BODY_BYTES} bytes"),
    );
    Ending {
        code: CLOSE_TOO_BIG,
        reason: "message too big",
        notice: Some(Utf8Bytes::from(error.body().to_string())),
    }
}

fn close(code: u16, reason: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from_static(reason),
    }))
}

/// A stream's messages until its subscription is cancelled (checked as each one arrives).
fn follow(
    rx: broadcast::Receiver<Utf8Bytes>,
    cancel: Arc<AtomicBool>,
) -> BoxStream<'static, Result<Utf8Bytes, Lagged>> {
    futures_util::stream::unfold(rx, move |mut rx| {
        let cancel = cancel.clone();
        async move {
            let item = match rx.recv().await {
                Ok(message) => Ok(message),
                Err(broadcast::error::RecvError::Lagged(_)) => Err(Lagged),
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            if cancel.load(Ordering::Relaxed) {
                return None;
            }
            Some((item, rx))
        }
    })
    .boxed()
}

/// A stream subscriber fell so far behind that messages it never read were overwritten.
struct Lagged;

/// The connection's one writer: replies and snapshots from the reading side, and the
/// messages of every stream it follows, read straight from the streams' channels. A burst is
/// written with one flush. A subscriber that lags behind a stream, or whose socket takes
/// longer than [`SLOW_WRITE`] to take a burst, is a slow consumer.
async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<Out>,
    mut end_rx: oneshot::Receiver<Ending>,
    slow: Arc<Notify>,
) {
    let mut streams: SelectAll<BoxStream<'static, Result<Utf8Bytes, Lagged>>> = SelectAll::new();
    loop {
        let first = tokio::select! {
            biased;
            ending = &mut end_rx => {
                if let Ok(ending) = ending {
                    // A socket that takes nothing (a slow consumer's) must not keep the
                    // connection's task alive.
                    let _ = tokio::time::timeout(SLOW_WRITE, async {
                        if let Some(notice) = ending.notice {
                            let _ = sink.send(Message::Text(notice)).await;
                        } else {
                            while let Ok(out) = queue.try_recv() {
                                if let Out::Text(message) = out {
                                    let _ = sink.feed(Message::Text(message)).await;
                                }
                            }
                        }
                        let _ = sink.send(close(ending.code, ending.reason)).await;
                    })
                    .await;
                }
                return;
            }
            out = queue.recv() => match out {
                Some(Out::Text(message)) => message,
                Some(Out::Follow { rx, cancel }) => {
                    streams.push(follow(rx, cancel));
                    continue;
                }
                None => return,
            },
            Some(item) = streams.next(), if !streams.is_empty() => match item {
                Ok(message) => message,
                Err(Lagged) => {
                    slow.notify_one();
                    // Wait for the reading side to end the connection.
                    streams = SelectAll::new();
                    continue;
                }
            },
        };
        let burst = async {
            let mut next = Some(first);
            while let Some(message) = next {
                sink.feed(Message::Text(message)).await?;
                // Whatever else is ready goes out with the same flush.
                next = loop {
                    match queue.try_recv() {
                        Ok(Out::Text(message)) => break Some(message),
                        Ok(Out::Follow { rx, cancel }) => streams.push(follow(rx, cancel)),
                        Err(_) => match streams.next().now_or_never() {
                            Some(Some(Ok(message))) => break Some(message),
                            Some(Some(Err(Lagged))) => {
                                slow.notify_one();
                                break None;
                            }
                            _ => break None,
                        },
                    }
                };
            }
            sink.flush().await
        };
        match tokio::time::timeout(SLOW_WRITE, burst).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                slow.notify_one();
                return;
            }
        }
    }
}

fn field<'a>(args: &'a Value, name: &str) -> Option<&'a Value> {
    args.get(name)
}

fn need_i64(args: &Value, name: &str) -> Result<i64, ApiError> {
    field(args, name)
        .and_then(Value::as_i64)
        .ok_or_else(|| ApiError::bad_request("malformed_json", format!("`{name}` must be an i64")))
}

impl Connection {
    /// Queues a message; a full queue makes this a slow consumer.
    fn send(&self, message: Value) {
        if self
            .out
            .try_send(Out::Text(Utf8Bytes::from(message.to_string())))
            .is_err()
        {
            self.slow.notify_one();
        }
    }

    /// Follows a stream from now on: after whatever was sent before (its snapshot).
    fn follow(&mut self, channel: &str, rx: broadcast::Receiver<Utf8Bytes>) {
        let cancel = Arc::new(AtomicBool::new(false));
        self.subscriptions
            .insert(channel.to_string(), cancel.clone());
        if self.out.try_send(Out::Follow { rx, cancel }).is_err() {
            self.slow.notify_one();
        }
    }

    fn reply(&self, id: Option<Value>, result: Result<Value, ApiError>) {
        let id = id.unwrap_or(Value::Null);
        self.send(match result {
            Ok(result) => json!({"id": id, "result": result}),
            Err(e) => json!({"id": id, "error": {"code": e.code, "message": e.message}}),
        });
    }

    async fn on_text(&mut self, text: &str) {
        let request: Request = match serde_json::from_str(text) {
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
        let id = request.id.clone();
        let result = self.handle(&request).await;
        self.reply(id, result);
    }

    async fn handle(&mut self, request: &Request) -> Result<Value, ApiError> {
        let args = &request.args;
        let state = self.state.clone();
        match request.op.as_str() {
            "subscribe" => {
                let channel = field(args, "ch").and_then(Value::as_str).unwrap_or("");
                self.subscribe(channel).await
            }
            "unsubscribe" => {
                let channel = field(args, "ch").and_then(Value::as_str).unwrap_or("");
                match self.subscriptions.remove(channel) {
                    Some(cancel) => {
                        cancel.store(true, Ordering::Relaxed);
                        Ok(json!({"unsubscribed": channel}))
                    }
                    None => Err(ApiError::bad_request(
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
                orders::place(&state, user, &body).await
            }
            "cancel" => {
                let user = self.trader()?;
                orders::cancel(&state, user, need_i64(args, "order")?).await
            }
            "move" => {
                let user = self.trader()?;
                orders::move_order(
                    &state,
                    user,
                    need_i64(args, "order")?,
                    need_i64(args, "price")?,
                )
                .await
            }
            "reduce" => {
                let user = self.trader()?;
                orders::reduce(
                    &state,
                    user,
                    need_i64(args, "order")?,
                    need_i64(args, "qty")?,
                )
                .await
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

    fn trader(&self) -> Result<UserId, ApiError> {
        self.user.ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::UNAUTHORIZED,
                "missing_credentials",
                "log in first",
            )
        })
    }

    fn login(&mut self, args: &Value) -> Result<Value, ApiError> {
        let text = |name: &str| -> String {
            match field(args, name) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            }
        };
        let (key, ts, nonce, sig) = (text("key"), text("ts"), text("nonce"), text("sig"));
        let signed = super::auth::Signed {
            key: &key,
            timestamp_ms: &ts,
            nonce: &nonce,
            signature: &sig,
        };
        match self
            .state
            .auth
            .verify(&self.state, &signed, "WS", "/ws", b"")?
        {
            Principal::User(user) => {
                self.user = Some(user);
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
            let user = self.trader()?;
            // Subscribe first, then read: nothing falls between.
            let rx = state.history.subscribe(user);
            let report = orders::report(&state, user).await?;
            self.send(json!({"ch": "user", "type": "balances", "balances": orders::balances_json(&report)}));
            self.send(json!({"ch": "user", "type": "orders", "orders": orders::open_orders_json(&report)}));
            self.follow(channel, rx);
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
        let rx = state.topics.subscribe(channel);
        let first = {
            let feed = state.md.feed();
            match kind {
                "book" => {
                    let l2 = feed.l2(id, usize::MAX).expect("known");
                    let mut m = j::l2(name, &l2);
                    m["ch"] = json!(channel);
                    m["type"] = json!("snapshot");
                    m
                }
                "orders" => {
                    let l3 = feed.l3(id).expect("known");
                    let mut m = j::l3(name, &l3);
                    m["ch"] = json!(channel);
                    m["type"] = json!("snapshot");
                    m
                }
                "trades" => {
                    let trades = feed.recent_trades(id, 50).expect("known");
                    json!({"ch": channel, "type": "snapshot", "trades": trades.iter().map(j::trade).collect::<Vec<_>>()})
                }
                "bbo" => {
                    let (seq, bid, ask) = feed.bbo(id).expect("known");
                    j::bbo(channel, seq, bid, ask)
                }
                _ => {
                    let candles = feed.candles(id, 60).expect("known");
                    json!({"ch": channel, "type": "snapshot", "candles": candles.iter().map(j::candle).collect::<Vec<_>>()})
                }
            }
        };
        self.send(first);
        self.follow(channel, rx);
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
