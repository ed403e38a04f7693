//! Order entry and account queries, shared by REST and WebSocket.

use std::sync::Arc;

use rialto_core::{
    AmendOrder, Command, OpenOrder, OrderExtras, OrderType, PlaceOrder, Side, Stp, SymbolId, Tif,
    UserId, UserReport,
};
use rialto_wire::{RequestKind, ServerMsg};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState};
use crate::pipeline::{Op, Reply};

/// A new order, in the scenario files' words (docs/api.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaceBody {
    pub symbol: String,
    #[serde(default)]
    pub order: Option<i64>,
    pub side: String,
    #[serde(default, rename = "type")]
    pub order_type: Option<String>,
    #[serde(default)]
    pub tif: Option<String>,
    #[serde(default)]
    pub price: Option<i64>,
    pub qty: i64,
    #[serde(default)]
    pub post_only: bool,
    #[serde(default)]
    pub stp: Option<String>,
    /// Stop and stop-limit orders: the trade price that triggers them.
    #[serde(default)]
    pub stop_price: Option<i64>,
    /// An iceberg's displayed quantity.
    #[serde(default)]
    pub display_qty: Option<i64>,
    /// A GTD order's expiry time, ns of venue time.
    #[serde(default)]
    pub expire_ts: Option<i64>,
}

pub fn symbol_id(state: &AppState, name: &str) -> SymbolId {
    // An unknown name goes to the engine as NONE, which rejects it `unknown_symbol` in its
    // rule-given place.
    state.md.feed().symbol_id(name).unwrap_or(SymbolId::NONE)
}

/// The engine's words; a word it does not know becomes `None`, which it rejects
/// `invalid_order` (as the binary gateway does).
fn place_command(state: &AppState, user: UserId, order: i64, body: &PlaceBody) -> PlaceOrder {
    let order_type = match body.order_type.as_deref() {
        None => Some(OrderType::Limit),
        Some(word) => OrderType::parse(word),
    };
    let tif = match body.tif.as_deref() {
        None if order_type == Some(OrderType::Market) => Some(Tif::Ioc),
        None => Some(Tif::Gtc),
        Some(word) => Tif::parse(word),
    };
    let stp = match body.stp.as_deref() {
        None => Some(Stp::CancelTaker),
        Some(word) => Stp::parse(word),
    };
    PlaceOrder {
        user,
        order,
        symbol: symbol_id(state, &body.symbol),
        side: Side::parse(&body.side),
        order_type,
        tif,
        price: body.price,
        qty: body.qty,
        post_only: body.post_only,
        stp,
        extras: OrderExtras::with_fields(body.stop_price, body.display_qty, body.expire_ts),
    }
}

/// Sends an order command; answers what the engine did, and records it in the history.
async fn order_call(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    kind: RequestKind,
    cmd: Command,
) -> Result<Value, ApiError> {
    let reply = Reply::Order { order, kind };
    match state.bridge.call(reply, Op::Command(cmd)).await? {
        ServerMsg::Accepted { seq, ts_ns, .. } => {
            state.history.record(
                user,
                seq,
                json!({"type": "accepted", "order": order, "kind": kind.as_str(), "seq": seq, "ts_ns": ts_ns}),
            );
            super::history::refresh_balances(state, user);
            Ok(json!({"order": order, "seq": seq, "ts_ns": ts_ns, "status": "accepted"}))
        }
        ServerMsg::Rejected {
            seq, ts_ns, reason, ..
        } => {
            state.history.record(
                user,
                seq,
                json!({"type": "rejected", "order": order, "kind": kind.as_str(), "reason": reason.as_str(), "seq": seq, "ts_ns": ts_ns}),
            );
            Err(ApiError::rejected(reason))
        }
        other => Err(unexpected(&other)),
    }
}

fn unexpected(msg: &ServerMsg) -> ApiError {
    tracing::error!(?msg, "unexpected reply to a web request");
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "unexpected reply from the engine",
    )
}

pub async fn place(
    state: &Arc<AppState>,
    user: UserId,
    body: &PlaceBody,
) -> Result<Value, ApiError> {
    let order = body.order.unwrap_or_else(|| state.next_order_id());
    let cmd = Command::Place(place_command(state, user, order, body));
    order_call(state, user, order, RequestKind::Place, cmd).await
}

pub async fn cancel(state: &Arc<AppState>, user: UserId, order: i64) -> Result<Value, ApiError> {
    let cmd = Command::Cancel { user, order };
    order_call(state, user, order, RequestKind::Cancel, cmd).await
}

pub async fn move_order(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    price: i64,
) -> Result<Value, ApiError> {
    let cmd = Command::Move { user, order, price };
    order_call(state, user, order, RequestKind::Move, cmd).await
}

pub async fn reduce(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    qty: i64,
) -> Result<Value, ApiError> {
    let cmd = Command::Reduce { user, order, qty };
    order_call(state, user, order, RequestKind::Reduce, cmd).await
}

/// An amend: a new price, total quantity (fills included) and/or stop price (docs/rules.md,
/// "Amend"); a field left out keeps its value.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmendBody {
    #[serde(default)]
    pub price: Option<i64>,
    #[serde(default)]
    pub qty: Option<i64>,
    #[serde(default)]
    pub stop_price: Option<i64>,
}

pub async fn amend(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    body: &AmendBody,
) -> Result<Value, ApiError> {
    let amend = AmendOrder::with_fields(user, order, body.price, body.qty, body.stop_price);
    order_call(
        state,
        user,
        order,
        RequestKind::Amend,
        Command::Amend(amend),
    )
    .await
}

pub async fn mass_cancel(
    state: &Arc<AppState>,
    user: UserId,
    symbol: Option<&str>,
) -> Result<Value, ApiError> {
    let symbol = symbol.map(|name| symbol_id(state, name));
    let cmd = Command::MassCancel { user, symbol };
    order_call(state, user, 0, RequestKind::MassCancel, cmd).await
}

/// The venue's settings and each symbol's trading status, and the seq they are as of.
pub async fn venue_status(state: &AppState) -> Result<(u64, Value), ApiError> {
    match state
        .bridge
        .call(Reply::Settings { request: 0 }, Op::VenueSettings)
        .await?
    {
        ServerMsg::VenueSettings {
            seq,
            order_id_window_ns,
            symbols,
            ..
        } => {
            let symbols: Vec<Value> = symbols
                .iter()
                .map(|(id, s)| {
                    json!({"symbol": super::history::symbol_name(state, *id), "phase": s.phase.as_str(),
                        "last": s.last, "reference": s.reference, "band_bps": s.band_bps})
                })
                .collect();
            Ok((
                seq,
                json!({"seq": seq, "order_id_window_ns": order_id_window_ns, "symbols": symbols}),
            ))
        }
        other => Err(unexpected(&other)),
    }
}

/// A user's balances and open orders.
/// A user's report, and the venue's seq it is as of.
pub async fn report(state: &AppState, user: UserId) -> Result<(u64, UserReport), ApiError> {
    let op = Op::Command(Command::UserReport { user });
    match state.bridge.call(Reply::Report { request: 0 }, op).await? {
        ServerMsg::Report { seq, report, .. } => Ok((seq, report)),
        ServerMsg::AdminResult {
            result: Err(reason),
            ..
        } => Err(ApiError::rejected(reason)),
        other => Err(unexpected(&other)),
    }
}

pub fn balances_json(report: &UserReport) -> Value {
    Value::Array(
        report
            .balances
            .iter()
            .map(|(currency, b)| json!({"currency": currency.as_str(), "available": b.available, "held": b.held}))
            .collect(),
    )
}

/// Open orders as docs/api.md shows them: each with its type, time in force, stop price (a
/// pending stop is `pending`: it waits for its trigger and is in no book), the quantity the book
/// shows (an iceberg's slice), what has filled and its expiry.
pub fn open_orders_json(report: &UserReport) -> Value {
    Value::Array(report.orders.iter().map(open_order_json).collect())
}

fn open_order_json(o: &OpenOrder) -> Value {
    let pending = matches!(o.order_type, OrderType::Stop | OrderType::StopLimit);
    json!({
        "symbol": o.symbol.as_str(),
        "order": o.order,
        "side": o.side.as_str(),
        "type": o.order_type.as_str(),
        "tif": o.tif.as_str(),
        "price": o.price,
        "stop_price": o.stop_price,
        "pending": pending,
        "remaining": o.remaining,
        "shown": o.shown,
        "filled": o.filled,
        "expire_ts": o.expire_ts,
    })
}
