//! Order entry and account queries, shared by REST and WebSocket.

use std::sync::Arc;

use rialto_core::{
    AmendOrder, Command, OpenOrder, OrderExtras, OrderType, PlaceOrder, Reason, Side, Stp,
    SymbolId, Tif, UserId, UserReport,
};
use rialto_wire::RequestKind;
use serde::Deserialize;
use serde_json::{Value, json};

use super::order_status::{self, Terms};
use super::units::{Amount, Catalog, Measure, Scales, Units};
use super::{ApiError, AppState};
use crate::event::Event;
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
    pub price: Option<Amount>,
    pub qty: Amount,
    #[serde(default)]
    pub post_only: bool,
    #[serde(default)]
    pub stp: Option<String>,
    /// Stop and stop-limit orders: the trade price that triggers them.
    #[serde(default)]
    pub stop_price: Option<Amount>,
    /// An iceberg's displayed quantity.
    #[serde(default)]
    pub display_qty: Option<Amount>,
    /// A GTD order's expiry time, ns of venue time.
    #[serde(default)]
    pub expire_ts: Option<i64>,
    /// The client's own id for the order (docs/api.md, "Client order ids").
    #[serde(default)]
    pub client_order_id: Option<String>,
}

pub fn symbol_id(state: &AppState, name: &str) -> SymbolId {
    // An unknown name goes to the engine as NONE, which rejects it `unknown_symbol` in its
    // rule-given place.
    state.md.feed().symbol_id(name).unwrap_or(SymbolId::NONE)
}

/// An optional request amount in the engine's integers.
fn engine_value(
    amount: Option<&Amount>,
    name: &str,
    measure: Measure,
    units: Units,
    scales: Option<&Scales>,
) -> Result<Option<i64>, ApiError> {
    amount
        .map(|a| a.to_engine(name, measure, units, scales))
        .transpose()
}

/// The engine's words; a word it does not know becomes `None`, which it rejects
/// `invalid_order` (as the binary gateway does). Prices and quantities are read in `units`.
fn place_command(
    state: &AppState,
    user: UserId,
    order: i64,
    body: &PlaceBody,
    units: Units,
) -> Result<PlaceOrder, ApiError> {
    let catalog = Catalog::of(state);
    let scales = catalog.scales(&body.symbol);
    let price = engine_value(body.price.as_ref(), "price", Measure::Price, units, scales)?;
    let qty = body.qty.to_engine("qty", Measure::Qty, units, scales)?;
    let stop_price = engine_value(
        body.stop_price.as_ref(),
        "stop_price",
        Measure::Price,
        units,
        scales,
    )?;
    let display_qty = engine_value(
        body.display_qty.as_ref(),
        "display_qty",
        Measure::Qty,
        units,
        scales,
    )?;
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
    Ok(PlaceOrder {
        user,
        order,
        symbol: symbol_id(state, &body.symbol),
        side: Side::parse(&body.side),
        order_type,
        tif,
        price,
        qty,
        post_only: body.post_only,
        stp,
        extras: OrderExtras::with_fields(stop_price, display_qty, body.expire_ts),
    })
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
        Event::Accepted { seq, ts_ns, .. } => {
            record_accepted(state, user, order, kind, seq, ts_ns);
            Ok(json!({"order": order, "seq": seq, "ts_ns": ts_ns, "status": "accepted"}))
        }
        Event::Rejected {
            seq, ts_ns, reason, ..
        } => {
            record_rejected(state, user, order, kind, reason, seq, ts_ns);
            Err(ApiError::rejected(reason))
        }
        other => Err(unexpected(&other)),
    }
}

fn record_accepted(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    kind: RequestKind,
    seq: u64,
    ts_ns: i64,
) {
    state.history.record(
        user,
        seq,
        json!({"type": "accepted", "order": order, "kind": kind.as_str(), "seq": seq, "ts_ns": ts_ns}),
    );
    super::history::refresh_balances(state, user);
}

fn record_rejected(
    state: &AppState,
    user: UserId,
    order: i64,
    kind: RequestKind,
    reason: Reason,
    seq: u64,
    ts_ns: i64,
) {
    state.history.record(
        user,
        seq,
        json!({"type": "rejected", "order": order, "kind": kind.as_str(), "reason": reason.as_str(), "seq": seq, "ts_ns": ts_ns}),
    );
}

fn unexpected(msg: &Event) -> ApiError {
    tracing::error!(?msg, "unexpected reply to a web request");
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "unexpected reply from the engine",
    )
}

/// The engine's id of a new order: the client's `order`, the one its `client_order_id` maps
/// onto, or one the server picks.
fn new_order_id(state: &AppState, user: UserId, body: &PlaceBody) -> Result<i64, ApiError> {
    match (body.order, body.client_order_id.as_deref()) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "malformed_json",
            "give `order` or `client_order_id`, not both",
        )),
        (Some(order), None) => Ok(order),
        (None, Some(cid)) if order_status::valid_client_order_id(cid) => {
            Ok(order_status::order_id_for(user, cid))
        }
        (None, Some(_)) => Err(ApiError::bad_request(
            "malformed_json",
            format!(
                "`client_order_id` is 1 to {} ASCII letters, digits and . _ - : /",
                order_status::MAX_CLIENT_ORDER_ID
            ),
        )),
        (None, None) => Ok(state.next_order_id()),
    }
}

/// Places an order and answers what became of it: its status (`new`, `partially_filled`,
/// `filled`, `expired`, `killed`, `cancelled`) and its fills. A resent order (the engine's
/// `duplicate_order_id`) is answered with the original's status.
pub async fn place(
    state: &Arc<AppState>,
    user: UserId,
    body: &PlaceBody,
    units: Units,
) -> Result<Value, ApiError> {
    let order = new_order_id(state, user, body)?;
    let cmd = place_command(state, user, order, body, units)?;
    let terms = Terms {
        client_order_id: body.client_order_id.clone(),
        symbol: body.symbol.clone(),
        side: body.side.clone(),
        order_type: cmd.order_type.map_or("", |t| t.as_str()).to_string(),
        tif: cmd.tif.map_or("", |t| t.as_str()).to_string(),
        price: cmd.price,
        qty: cmd.qty,
    };
    let kind = RequestKind::Place;
    let reply = Reply::Order { order, kind };
    match state
        .bridge
        .call(reply, Op::Command(Command::Place(cmd)))
        .await?
    {
        Event::Accepted { seq, ts_ns, .. } => {
            record_accepted(state, user, order, kind, seq, ts_ns);
            state.orders.placed(user, order, terms, seq, ts_ns);
            let mut answer = outcome(state, user, order).await?;
            answer["seq"] = json!(seq);
            answer["ts_ns"] = json!(ts_ns);
            Ok(answer)
        }
        Event::Rejected {
            seq, ts_ns, reason, ..
        } => {
            record_rejected(state, user, order, kind, reason, seq, ts_ns);
            let refusal = ApiError::rejected(reason);
            if reason != Reason::DuplicateOrderId {
                return Err(refusal);
            }
            // An error answer is not converted on its way out: the detail is, here.
            let original = outcome(state, user, order).await?;
            let theirs = original["client_order_id"].as_str();
            if let (Some(theirs), Some(ours)) = (theirs, body.client_order_id.as_deref())
                && theirs != ours
            {
                return Err(ApiError::bad_request(
                    "duplicate_order_id",
                    "another order has the same order id as this client order id: use another",
                ));
            }
            let original = super::units::answer(original, units, state, None);
            Err(refusal.with_detail("order", original))
        }
        other => Err(unexpected(&other)),
    }
}

/// What became of one of the user's orders, once every event the engine sent for it before
/// now is recorded; `status` `unknown` for an order this server has no record of (one that
/// ended before its last start: docs/api.md).
pub async fn outcome(state: &AppState, user: UserId, order: i64) -> Result<Value, ApiError> {
    // The report's reply follows every event of the commands before it, and the gateway hands
    // those to the web side before the reply: wait until they are recorded.
    let (_, report) = report(state, user).await?;
    let caught_up = state.history.caught_up(state.bridge.batches_sent()).await;
    let live = report.orders.iter().find(|o| o.order == order);
    let known = state.orders.status(user, order, live);
    // An ended order this server has no whole record of (it was placed before the last
    // start): the history database has its terms and fills.
    let partial = known
        .as_ref()
        .is_none_or(|k| k["original_qty"].is_null() || k["incomplete"] == true);
    if live.is_none()
        && partial
        && let Some(db) = &state.db
        && let Some(from_history) = super::history::db_order_status(state, db, user, order).await?
    {
        return Ok(from_history);
    }
    let mut answer = known.unwrap_or_else(|| json!({"order": order, "status": "unknown"}));
    if !caught_up {
        // The web side is more than a second behind the engine: the record may miss this
        // order's latest events (its status and live quantities come from the engine).
        answer["behind"] = json!(true);
    }
    Ok(answer)
}

pub async fn cancel(state: &Arc<AppState>, user: UserId, order: i64) -> Result<Value, ApiError> {
    let cmd = Command::Cancel { user, order };
    order_call(state, user, order, RequestKind::Cancel, cmd).await
}

/// The sizes of the symbol of one of the user's live orders, to read a decimal price or
/// quantity for it (an order that is not live is the engine's `unknown_order`).
async fn order_scales(
    state: &AppState,
    user: UserId,
    order: i64,
    units: Units,
) -> Result<Option<Scales>, ApiError> {
    if units == Units::Int {
        return Ok(None);
    }
    let (_, report) = report(state, user).await?;
    let symbol = report
        .orders
        .iter()
        .find(|o| o.order == order)
        .map(|o| o.symbol.as_str().to_string());
    Ok(symbol.and_then(|s| Catalog::of(state).scales(&s).copied()))
}

pub async fn move_order(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    price: &Amount,
    units: Units,
) -> Result<Value, ApiError> {
    let scales = order_scales(state, user, order, units).await?;
    let price = price.to_engine("price", Measure::Price, units, scales.as_ref())?;
    let cmd = Command::Move { user, order, price };
    order_call(state, user, order, RequestKind::Move, cmd).await
}

pub async fn reduce(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    qty: &Amount,
    units: Units,
) -> Result<Value, ApiError> {
    let scales = order_scales(state, user, order, units).await?;
    let qty = qty.to_engine("qty", Measure::Qty, units, scales.as_ref())?;
    let cmd = Command::Reduce { user, order, qty };
    order_call(state, user, order, RequestKind::Reduce, cmd).await
}

/// An amend: a new price, total quantity (fills included) and/or stop price (docs/rules.md,
/// "Amend"); a field left out keeps its value.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmendBody {
    #[serde(default)]
    pub price: Option<Amount>,
    #[serde(default)]
    pub qty: Option<Amount>,
    #[serde(default)]
    pub stop_price: Option<Amount>,
}

pub async fn amend(
    state: &Arc<AppState>,
    user: UserId,
    order: i64,
    body: &AmendBody,
    units: Units,
) -> Result<Value, ApiError> {
    let scales = order_scales(state, user, order, units).await?;
    let s = scales.as_ref();
    let price = engine_value(body.price.as_ref(), "price", Measure::Price, units, s)?;
    let qty = engine_value(body.qty.as_ref(), "qty", Measure::Qty, units, s)?;
    let stop = engine_value(
        body.stop_price.as_ref(),
        "stop_price",
        Measure::Price,
        units,
        s,
    )?;
    let amend = AmendOrder::with_fields(user, order, price, qty, stop);
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
        Event::VenueSettings {
            seq,
            order_id_window_ns,
            symbols,
            ..
        } => {
            let symbols: Vec<Value> = symbols
                .iter()
                .map(|(id, s)| {
                    json!({"symbol": super::history::symbol_name(state, *id), "phase": s.phase.as_str(),
                        "last": s.last, "reference": s.reference, "band_bps": s.band_bps,
                        "type": if s.future { "future" } else { "spot" },
                        "mark": s.future.then_some(s.mark)})
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
        Event::Report { seq, report, .. } => Ok((seq, report)),
        Event::AdminResult {
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
