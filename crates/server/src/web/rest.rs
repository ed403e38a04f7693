//! The HTTP routes: REST (public, private, admin), /ws, /metrics, /openapi.json, the console.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, FromRequest, Path, Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use rialto_core::{Command, Name, SymbolSpec, UserId};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::auth::{Access, Payer};
use super::units::{self, Amount, Catalog, Measure, Units};
use super::{ApiError, AppState, MAX_BODY_BYTES, Principal, json as j, orders};
use crate::admission::PeerKey;
use crate::config::InstrumentSettings;
use crate::event::Event;
use crate::pipeline::{Op, Reply};

type Shared = State<Arc<AppState>>;
type ApiResult = Result<Json<Value>, ApiError>;

/// The checked-in OpenAPI description, served as is.
pub const OPENAPI: &str = include_str!("../../../../docs/openapi.json");

pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/time", get(time))
        .route("/symbols", get(symbols))
        .route("/exchange-info", get(exchange_info))
        .route("/book/{symbol}", get(book))
        .route("/book/{symbol}/orders", get(book_orders))
        .route("/trades/{symbol}", get(trades))
        .route("/trades/{symbol}/history", get(trade_history))
        .route("/candles/{symbol}", get(candles))
        .route("/ticker/24h", get(ticker))
        .route("/fills", get(fills))
        .route("/orders", post(place).get(open_orders).delete(mass_cancel))
        .route("/orders/history", get(history))
        .route(
            "/orders/{order}",
            get(one_order).delete(cancel).patch(amend),
        )
        .route(
            "/orders/by-client-id/{cid}",
            get(by_client_id)
                .delete(cancel_by_client_id)
                .patch(amend_by_client_id),
        )
        .route("/orders/{order}/move", post(move_order))
        .route("/orders/{order}/reduce", post(reduce))
        .route("/balances", get(balances))
        .route("/positions", get(positions))
        .route("/margin", get(margin))
        .route("/admin/deposits", post(deposit))
        .route("/admin/withdrawals", post(withdraw))
        .route("/admin/users", post(add_user).get(list_users))
        .route("/admin/symbols", post(add_symbol))
        .route("/admin/venue", get(venue))
        .route("/status", get(status))
        .route("/admin/settings", get(settings))
        .route("/admin/symbols/{symbol}/phase", post(set_phase))
        .route("/admin/symbols/{symbol}/band", post(set_band))
        .route("/admin/symbols/{symbol}/ref_price", post(set_ref_price))
        .route("/admin/symbols/{symbol}/mark_price", post(set_mark_price))
        .route("/admin/insurance", post(fund_insurance))
        .route("/admin/users/{user}/suspend", post(suspend_user))
        .route("/admin/users/{user}/resume", post(resume_user))
        .route("/admin/settings/order_id_window", post(set_order_id_window))
        .route("/admin/snapshot", post(snapshot))
        .route("/admin/balances/{user}", get(user_balances))
        .route("/admin/keys", post(create_key).get(list_keys))
        .route("/admin/keys/{key}", delete(revoke_key))
        .route("/keys", get(own_keys))
        .route("/keys/{key}", delete(revoke_own_key))
        .route_layer(middleware::from_fn(known_query))
        .route_layer(middleware::from_fn_with_state(state.clone(), read_only))
        .fallback(api_not_found)
        .method_not_allowed_fallback(method_not_allowed);
    Router::new()
        .nest("/api/v1", api)
        .route("/ws", get(super::ws::upgrade))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .fallback(super::assets::serve)
        .layer(middleware::from_fn_with_state(state.clone(), admission))
        .with_state(state)
}

async fn api_not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no endpoint {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not a method of {}", uri.path()),
    )
}

/// The query parameters each endpoint reads, besides `units` (every endpoint's).
fn query_parameters(route: &str) -> &'static [&'static str] {
    match route {
        "/book/{symbol}" => &["depth"],
        "/book/{symbol}/orders" | "/trades/{symbol}" => &["limit"],
        "/candles/{symbol}" => &["limit", "interval", "start_time", "end_time"],
        "/trades/{symbol}/history" | "/orders/history" => {
            &["limit", "start_time", "end_time", "from_id"]
        }
        "/fills" => &["limit", "start_time", "end_time", "from_id", "symbol"],
        "/ticker/24h" => &["symbol"],
        "/orders" => &["symbol"],
        "/admin/keys" => &["user"],
        _ => &[],
    }
}

/// The GET endpoints a read replica refuses although they write nothing: they answer from
/// what the sequencer tells the web side of each user's orders as they happen, which a
/// replica never hears.
const NOT_ON_A_REPLICA: [&str; 3] = [
    "/api/v1/orders/history",
    "/api/v1/orders/{order}",
    "/api/v1/orders/by-client-id/{cid}",
];

/// A read replica refuses every request that would write (every method but GET) before it
/// reads it, and the GETs of [`NOT_ON_A_REPLICA`]; the bridge refuses the GETs that need the
/// sequencer and answers those its engine can.
async fn read_only(State(state): Shared, request: Request, next: Next) -> Response {
    if state.bridge.is_read_only() {
        let route = request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map(|m| m.as_str().to_string())
            .unwrap_or_default();
        if request.method() != axum::http::Method::GET || NOT_ON_A_REPLICA.contains(&route.as_str())
        {
            return ApiError::read_only_replica().into_response();
        }
    }
    next.run(request).await
}

/// Refuses a query parameter the endpoint does not read (`/book/X?levels=5` would
/// otherwise answer 50 levels as if asked), or one given twice.
async fn known_query(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|m| m.as_str().trim_start_matches("/api/v1").to_string())
        .unwrap_or_default();
    let allowed = query_parameters(&route);
    let mut seen: Vec<&str> = Vec::new();
    for pair in request.uri().query().unwrap_or("").split('&') {
        if pair.is_empty() {
            continue;
        }
        let name = pair.split_once('=').map_or(pair, |(name, _)| name);
        if name != "units" && !allowed.contains(&name) {
            let known = match allowed {
                [] => "none but units".to_string(),
                names => format!("{} and units", names.join(", ")),
            };
            return ApiError::bad_request(
                "bad_request",
                format!("unknown query parameter {name:?} (this endpoint reads {known})"),
            )
            .into_response();
        }
        if seen.contains(&name) {
            return ApiError::bad_request(
                "bad_request",
                format!("the query parameter {name:?} is given twice"),
            )
            .into_response();
        }
        seen.push(name);
    }
    next.run(request).await
}

/// Who signed a request, as [`admission`] found it; private endpoints read it.
#[derive(Clone)]
struct Signer(Result<Access, ApiError>);

/// Every request is checked here once, and charged to a rate: a correctly signed request to
/// its signer's, anything else (unsigned, or signed wrongly) to its client address's. A
/// request that carries any `Rialto-*` credential header is verified, whatever its endpoint.
async fn admission(
    State(state): Shared,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let peer_ip = peer.ip();
    let peer = PeerKey::of(peer_ip);
    let (parts, body) = request.into_parts();
    let signed = super::auth::HEADERS
        .iter()
        .any(|name| parts.headers.contains_key(*name));
    let (signer, payer, body) = if signed {
        let body = match read_body(&state, body).await {
            Ok(body) => body,
            Err(e) => {
                let _ = state.auth.allow(Payer::Address(peer));
                return e.into_response();
            }
        };
        // The request target as the client sent it, which its signature covers.
        let target = parts
            .uri
            .path_and_query()
            .map_or(parts.uri.path(), |pq| pq.as_str());
        let verdict = super::auth::Signed::from_headers(&parts.headers)
            .map_err(super::auth::Refusal::from)
            .and_then(|signed| {
                let method = parts.method.as_str();
                state
                    .auth
                    .verify(&state, &signed, peer_ip, method, target, &body)
            });
        let payer = match &verdict {
            Ok(access) => Payer::Key(access.key),
            Err(refusal) => refusal.signed_by.map_or(Payer::Address(peer), Payer::Key),
        };
        (verdict.map_err(|r| *r.error), payer, Body::from(body))
    } else {
        let unsigned = Err(super::auth::missing_credentials());
        (unsigned, Payer::Address(peer), body)
    };
    let left = match state.auth.allow(payer) {
        Ok(left) => left,
        Err(e) => return rate_headers(e.into_response(), state.auth.rate(), 0),
    };
    let mut request = Request::from_parts(parts, body);
    request.extensions_mut().insert(Signer(signer));
    rate_headers(next.run(request).await, state.auth.rate(), left)
}

/// The payer's rate (`X-RateLimit-Limit`, requests a second) and what is left of its burst
/// (`X-RateLimit-Remaining`), on every answer of a server with a rate.
fn rate_headers(mut response: Response, rate: u64, left: u64) -> Response {
    if rate > 0 {
        let headers = response.headers_mut();
        headers.insert("x-ratelimit-limit", rate.into());
        headers.insert("x-ratelimit-remaining", left.into());
    }
    response
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn metrics(State(state): Shared) -> impl IntoResponse {
    use std::fmt::Write;
    use std::sync::atomic::Ordering::Relaxed;
    let mut text = state.metrics.render();
    let connections = &state.connections;
    let (pending, established) = connections.counts();
    let (signatures, buckets) = state.auth.entries();
    let _ = write!(
        text,
        "# TYPE rialto_http_connections gauge\n\
         rialto_http_connections{{state=\"pending\"}} {pending}\n\
         rialto_http_connections{{state=\"established\"}} {established}\n\
         # TYPE rialto_http_connections_total counter\n\
         rialto_http_connections_total{{outcome=\"accepted\"}} {}\n\
         rialto_http_connections_total{{outcome=\"shed\"}} {}\n\
         rialto_http_connections_total{{outcome=\"refused\"}} {}\n\
         # TYPE rialto_ws_queue_peak_bytes gauge\n\
         rialto_ws_queue_peak_bytes {}\n\
         # TYPE rialto_web_auth_entries gauge\n\
         rialto_web_auth_entries{{table=\"signatures\"}} {signatures}\n\
         rialto_web_auth_entries{{table=\"rates\"}} {buckets}\n",
        connections.accepted.load(Relaxed),
        connections.shed.load(Relaxed),
        connections.refused.load(Relaxed),
        state.queue_stats.peak_bytes.load(Relaxed),
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

// ----- helpers ---------------------------------------------------------------------------------

/// Reads a body of at most [`MAX_BODY_BYTES`], which must arrive within the header timeout
/// (a client trickling its body would hold its connection).
async fn read_body(state: &AppState, body: Body) -> Result<Bytes, ApiError> {
    let limit = std::time::Duration::from_millis(state.settings.header_read_timeout_ms);
    match tokio::time::timeout(limit, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(_)) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        )),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            "the body did not arrive in time",
        )),
    }
}

/// Who signed the request (checked by [`admission`]), and its body.
async fn authorize(state: &AppState, request: Request) -> Result<(Access, Bytes), ApiError> {
    let signer = request.extensions().get::<Signer>().cloned();
    let who = signer.map_or_else(|| Err(super::auth::missing_credentials()), |s| s.0)?;
    let body = read_body(state, request.into_body()).await?;
    Ok((who, body))
}

/// A request signed by a user's key (any permission: every key may read): the user, the
/// key, and the body.
struct Account(UserId, Access, Bytes);

impl FromRequest<Arc<AppState>> for Account {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        match authorize(state, request).await? {
            (
                access @ Access {
                    principal: Principal::User(user),
                    ..
                },
                body,
            ) => Ok(Account(user, access, body)),
            _ => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the admin key does not trade: use a user's key",
            )),
        }
    }
}

/// A request signed by a user's key with the `trade` permission: the user, and the body.
struct Trader(UserId, Bytes);

impl FromRequest<Arc<AppState>> for Trader {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        let Account(user, access, body) = Account::from_request(request, state).await?;
        access.need_trade()?;
        Ok(Trader(user, body))
    }
}

/// A request signed by the admin key: its body.
struct Admin(Bytes);

impl FromRequest<Arc<AppState>> for Admin {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        match authorize(state, request).await? {
            (
                Access {
                    principal: Principal::Admin,
                    ..
                },
                body,
            ) => Ok(Admin(body)),
            _ => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "an admin endpoint needs the admin key",
            )),
        }
    }
}

pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("malformed_json", format!("the body is not valid: {e}")))
}

/// A numeric query parameter, `default` when absent, at most `max`.
pub(super) fn query_number(
    uri: &Uri,
    name: &str,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match query_value(uri, name) {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(n) if n >= 1 && n <= max => Ok(n),
            _ => Err(ApiError::bad_request(
                "bad_request",
                format!("{name} must be a number from 1 to {max}"),
            )),
        },
    }
}

pub fn query_value(uri: &Uri, name: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| v.to_string())
    })
}

fn path_order(text: &str) -> Result<i64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request("bad_request", "the order id must be an i64"))
}

/// Resolves a symbol name the feed knows.
fn known_symbol(state: &AppState, name: &str) -> Result<rialto_core::SymbolId, ApiError> {
    state
        .md
        .feed()
        .symbol_id(name)
        .ok_or_else(|| ApiError::unknown_symbol(name))
}

// ----- public ---------------------------------------------------------------------------------

/// An answer made in engine integers, in the units the request asked for.
fn reply(state: &AppState, uri: &Uri, value: Value, symbol: Option<&str>) -> ApiResult {
    Ok(Json(units::answer(value, Units::of(uri)?, state, symbol)))
}

async fn time(State(state): Shared, uri: Uri) -> ApiResult {
    reply(
        &state,
        &uri,
        json!({"ts_ns": crate::pipeline::now_ns()}),
        None,
    )
}

async fn symbols(State(state): Shared, uri: Uri) -> ApiResult {
    let list: Vec<Value> = {
        let instruments = state.instruments.lock().unwrap_or_else(|e| e.into_inner());
        let feed = state.md.feed();
        feed.symbols()
            .map(|info| j::symbol(&info, instruments.get(info.spec.symbol.as_str())))
            .collect()
    };
    reply(&state, &uri, Value::Array(list), None)
}

/// Every symbol's sizes, decimals, band, limits and phase, and every currency's decimals
/// (docs/api.md, "Exchange info").
async fn exchange_info(State(state): Shared, uri: Uri) -> ApiResult {
    let units = Units::of(&uri)?;
    let (seq, status) = orders::venue_status(&state).await?;
    let catalog = Catalog::of(&state);
    let max_open = state.max_open_orders_per_user;
    let symbols: Vec<Value> = {
        let feed = state.md.feed();
        feed.symbols()
            .map(|info| {
                let name = info.spec.symbol.as_str();
                let status = status["symbols"]
                    .as_array()
                    .and_then(|list| list.iter().find(|s| s["symbol"] == name))
                    .cloned()
                    .unwrap_or(Value::Null);
                j::exchange_symbol(&info, catalog.scales(name), &status, max_open)
            })
            .collect()
    };
    let currencies: Vec<Value> = catalog
        .currencies
        .iter()
        .map(|(name, minor)| {
            json!({"currency": name, "decimals": minor.scale, "minor_unit": minor.to_string()})
        })
        .collect();
    let info = json!({"seq": seq, "ts_ns": crate::pipeline::now_ns(),
        "symbols": symbols, "currencies": currencies});
    Ok(Json(units::answer(info, units, &state, None)))
}

async fn book(State(state): Shared, Path(symbol): Path<String>, uri: Uri) -> ApiResult {
    let depth = query_number(&uri, "depth", 50, 1000)?;
    let id = known_symbol(&state, &symbol)?;
    let snapshot = state.md.feed().l2(id, depth).expect("a known symbol");
    reply(&state, &uri, j::l2(&symbol, &snapshot), Some(&symbol))
}

/// Orders a side of the L3 book answers at most (and by default).
pub const L3_LIMIT: usize = 1_000;

async fn book_orders(State(state): Shared, Path(symbol): Path<String>, uri: Uri) -> ApiResult {
    let limit = query_number(&uri, "limit", L3_LIMIT, L3_LIMIT)?;
    let id = known_symbol(&state, &symbol)?;
    let mut snapshot = state.md.feed().l3(id).expect("a known symbol");
    let truncated = snapshot.bids.len() > limit || snapshot.asks.len() > limit;
    snapshot.bids.truncate(limit);
    snapshot.asks.truncate(limit);
    let mut answer = j::l3(&symbol, &snapshot);
    answer["truncated"] = json!(truncated);
    reply(&state, &uri, answer, Some(&symbol))
}

async fn trades(State(state): Shared, Path(symbol): Path<String>, uri: Uri) -> ApiResult {
    let limit = query_number(&uri, "limit", 100, 1000)?;
    let id = known_symbol(&state, &symbol)?;
    let trades = state
        .md
        .feed()
        .recent_trades(id, limit)
        .expect("a known symbol");
    let trades = Value::Array(trades.iter().map(j::trade).collect());
    reply(&state, &uri, trades, Some(&symbol))
}

/// Every trade since the venue began, from the history database, by stable trade id.
async fn trade_history(State(state): Shared, Path(symbol): Path<String>, uri: Uri) -> ApiResult {
    let id = known_symbol(&state, &symbol)?;
    let db = state.db.clone().ok_or_else(super::history::history_off)?;
    let range = super::history::range(&uri, 100, super::history::MAX_LIMIT)?;
    let trades = super::history::db_trades(&db, id, range).await?;
    reply(&state, &uri, trades, Some(&symbol))
}

async fn candles(State(state): Shared, Path(symbol): Path<String>, uri: Uri) -> ApiResult {
    let id = known_symbol(&state, &symbol)?;
    let interval = query_value(&uri, "interval").unwrap_or_else(|| "1m".to_string());
    let Some(interval_s) = crate::history::query::interval_seconds(&interval) else {
        return Err(ApiError::bad_request(
            "bad_request",
            "interval must be one of 1m, 5m, 15m, 1h, 4h, 1d",
        ));
    };
    let range = super::history::range(&uri, 60, 1440)?;
    // The last 1 m candles are the feed's, as on the candle channel (the database may lag
    // behind it under load); other intervals and time ranges are the database's.
    let recent = interval_s == 60 && range.start_ns.is_none() && range.end_ns.is_none();
    let candles = if let Some(db) = state.db.as_ref().filter(|_| !recent) {
        super::history::db_candles(db, id, interval_s, range).await?
    } else if recent {
        let candles = state
            .md
            .feed()
            .candles(id, range.limit)
            .expect("a known symbol");
        Value::Array(candles.iter().map(j::candle).collect())
    } else {
        return Err(super::history::history_off());
    };
    reply(&state, &uri, candles, Some(&symbol))
}

/// The 24 h ticker of every symbol, or of `?symbol=` (one object).
async fn ticker(State(state): Shared, uri: Uri) -> ApiResult {
    let db = state.db.clone().ok_or_else(super::history::history_off)?;
    let tickers = match query_value(&uri, "symbol") {
        Some(name) => {
            let id = known_symbol(&state, &name)?;
            let mut list = super::history::db_tickers(&state, &db, vec![id]).await?;
            list.pop().unwrap_or(Value::Null)
        }
        None => {
            let ids: Vec<_> = state.md.feed().symbols().map(|s| s.id).collect();
            Value::Array(super::history::db_tickers(&state, &db, ids).await?)
        }
    };
    reply(&state, &uri, tickers, None)
}

// ----- private --------------------------------------------------------------------------------

async fn place(State(state): Shared, uri: Uri, Trader(user, body): Trader) -> ApiResult {
    let units = Units::of(&uri)?;
    let order: orders::PlaceBody = parse_json(&body)?;
    let answer = orders::place(&state, user, &order, units).await?;
    reply(&state, &uri, answer, Some(&order.symbol))
}

/// One of the user's orders, by the engine's id: its terms, status, quantities, times and fills.
async fn one_order(
    State(state): Shared,
    Path(order): Path<String>,
    uri: Uri,
    Account(user, ..): Account,
) -> ApiResult {
    let order = path_order(&order)?;
    let answer = known_order(orders::outcome(&state, user, order).await?)?;
    reply(&state, &uri, answer, None)
}

/// One of the user's orders, by the client order id it was placed with.
async fn by_client_id(
    State(state): Shared,
    Path(cid): Path<String>,
    uri: Uri,
    Account(user, ..): Account,
) -> ApiResult {
    let order = client_order(user, &cid)?;
    let mut answer = known_order(orders::outcome(&state, user, order).await?)?;
    answer["client_order_id"] = json!(cid);
    reply(&state, &uri, answer, None)
}

/// The engine's order id of one of `user`'s client order ids (a malformed one is refused).
fn client_order(user: UserId, cid: &str) -> Result<i64, ApiError> {
    if !super::order_status::valid_client_order_id(cid) {
        return Err(ApiError::bad_request(
            "bad_request",
            "a client order id is 1 to 36 ASCII letters, digits and . _ - : /",
        ));
    }
    Ok(super::order_status::order_id_for(user, cid))
}

async fn cancel_by_client_id(
    State(state): Shared,
    Path(cid): Path<String>,
    uri: Uri,
    Trader(user, _): Trader,
) -> ApiResult {
    let answer = orders::cancel(&state, user, client_order(user, &cid)?).await?;
    reply(&state, &uri, answer, None)
}

async fn amend_by_client_id(
    State(state): Shared,
    Path(cid): Path<String>,
    uri: Uri,
    Trader(user, body): Trader,
) -> ApiResult {
    let (order, units) = (client_order(user, &cid)?, Units::of(&uri)?);
    let body: orders::AmendBody = parse_json(&body)?;
    let answer = orders::amend(&state, user, order, &body, units).await?;
    reply(&state, &uri, answer, None)
}

/// A status the server has a record of, or 404.
fn known_order(status: Value) -> Result<Value, ApiError> {
    match status["status"].as_str() {
        Some("unknown") => Err(ApiError::not_found(format!(
            "no order {} of this user is live or known to this run of the server",
            status["order"]
        ))),
        _ => Ok(status),
    }
}

async fn cancel(
    State(state): Shared,
    Path(order): Path<String>,
    uri: Uri,
    Trader(user, _): Trader,
) -> ApiResult {
    let answer = orders::cancel(&state, user, path_order(&order)?).await?;
    reply(&state, &uri, answer, None)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceBody {
    price: Amount,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QtyBody {
    qty: Amount,
}

async fn move_order(
    State(state): Shared,
    Path(order): Path<String>,
    uri: Uri,
    Trader(user, body): Trader,
) -> ApiResult {
    let (order, units) = (path_order(&order)?, Units::of(&uri)?);
    let PriceBody { price } = parse_json(&body)?;
    let answer = orders::move_order(&state, user, order, &price, units).await?;
    reply(&state, &uri, answer, None)
}

async fn amend(
    State(state): Shared,
    Path(order): Path<String>,
    uri: Uri,
    Trader(user, body): Trader,
) -> ApiResult {
    let (order, units) = (path_order(&order)?, Units::of(&uri)?);
    let body: orders::AmendBody = parse_json(&body)?;
    let answer = orders::amend(&state, user, order, &body, units).await?;
    reply(&state, &uri, answer, None)
}

async fn reduce(
    State(state): Shared,
    Path(order): Path<String>,
    uri: Uri,
    Trader(user, body): Trader,
) -> ApiResult {
    let (order, units) = (path_order(&order)?, Units::of(&uri)?);
    let QtyBody { qty } = parse_json(&body)?;
    let answer = orders::reduce(&state, user, order, &qty, units).await?;
    reply(&state, &uri, answer, None)
}

async fn mass_cancel(State(state): Shared, uri: Uri, Trader(user, _): Trader) -> ApiResult {
    let symbol = query_value(&uri, "symbol");
    let answer = orders::mass_cancel(&state, user, symbol.as_deref()).await?;
    reply(&state, &uri, answer, None)
}

async fn open_orders(State(state): Shared, uri: Uri, Account(user, ..): Account) -> ApiResult {
    let (_, report) = orders::report(&state, user).await?;
    reply(&state, &uri, orders::open_orders_json(&report), None)
}

async fn balances(State(state): Shared, uri: Uri, Account(user, ..): Account) -> ApiResult {
    let (_, report) = orders::report(&state, user).await?;
    reply(&state, &uri, orders::balances_json(&report), None)
}

/// The user's futures positions: size, entry price, mark, unrealised profit and, where it is
/// exact, the liquidation price (docs/api.md, "Futures").
async fn positions(State(state): Shared, uri: Uri, Account(user, ..): Account) -> ApiResult {
    let (_, report, settings) = super::futures::report_and_settings(&state, user).await?;
    let positions = super::futures::positions_json(&state, &report, &settings);
    reply(&state, &uri, positions, None)
}

/// The user's margin in each currency that has futures.
async fn margin(State(state): Shared, uri: Uri, Account(user, ..): Account) -> ApiResult {
    let (_, report) = orders::report(&state, user).await?;
    reply(&state, &uri, super::futures::margins_json(&report), None)
}

async fn history(State(state): Shared, uri: Uri, Account(user, ..): Account) -> ApiResult {
    if let Some(db) = &state.db {
        let range = super::history::range(&uri, 100, super::history::MAX_LIMIT)?;
        let events = super::history::db_order_history(&state, db, user, range).await?;
        return reply(&state, &uri, events, None);
    }
    let limit = query_number(&uri, "limit", 100, super::history::HISTORY_LEN)?;
    let name = |symbol| super::history::symbol_name(&state, symbol);
    let events = Value::Array(state.history.recent(user, limit, name));
    reply(&state, &uri, events, None)
}

/// The key's fills (of `?symbol=`, or all), from the history database.
async fn fills(State(state): Shared, uri: Uri, Account(user, ..): Account) -> ApiResult {
    let db = state.db.clone().ok_or_else(super::history::history_off)?;
    let symbol = match query_value(&uri, "symbol") {
        Some(name) => Some(known_symbol(&state, &name)?),
        None => None,
    };
    let range = super::history::range(&uri, 100, super::history::MAX_LIMIT)?;
    let fills = super::history::db_fills(&state, &db, user, symbol, range).await?;
    reply(&state, &uri, fills, None)
}

// ----- admin ----------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Transfer {
    user: UserId,
    currency: String,
    amount: Amount,
    tx: i64,
}

/// Sends an admin command; answers with its sequence number.
async fn admin_call(state: &AppState, cmd: Command) -> ApiResult {
    match state
        .bridge
        .call(Reply::Admin { request: 0 }, Op::Command(cmd))
        .await?
    {
        Event::AdminResult { seq, result, .. } => match result {
            Ok(()) => Ok(Json(json!({"seq": seq, "status": "accepted"}))),
            Err(reason) => Err(ApiError::rejected(reason)),
        },
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "unexpected reply",
        )),
    }
}

fn currency(name: &str) -> Result<Name, ApiError> {
    Name::new(name).ok_or_else(|| {
        ApiError::bad_request("malformed_json", "a currency is 1 to 23 bytes of UTF-8")
    })
}

async fn transfer(state: &Arc<AppState>, uri: &Uri, body: &[u8], deposit: bool) -> ApiResult {
    let t: Transfer = parse_json(body)?;
    let minor = Measure::Amount(Catalog::of(state).currency_minor(&t.currency));
    let amount = t.amount.to_engine("amount", minor, Units::of(uri)?, None)?;
    if amount <= 0 {
        return Err(ApiError::rejected(rialto_core::Reason::InvalidQty));
    }
    let amount = if deposit { amount } else { -amount };
    let cmd = Command::AdjustBalance {
        user: t.user,
        currency: currency(&t.currency)?,
        amount,
        tx: t.tx,
    };
    let answer = admin_call(state, cmd).await?;
    // The user's private stream hears of the new balance.
    super::history::refresh_balances(state, t.user);
    Ok(answer)
}

async fn deposit(State(state): Shared, uri: Uri, Admin(body): Admin) -> ApiResult {
    transfer(&state, &uri, &body, true).await
}

async fn withdraw(State(state): Shared, uri: Uri, Admin(body): Admin) -> ApiResult {
    transfer(&state, &uri, &body, false).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUser {
    user: UserId,
}

async fn add_user(State(state): Shared, Admin(body): Admin) -> ApiResult {
    let NewUser { user } = parse_json(&body)?;
    let op = Op::Command(Command::AddUser { user });
    match state.bridge.call(Reply::AddUser { request: 0 }, op).await? {
        Event::UserAdded {
            seq, user, secret, ..
        } => Ok(Json(
            json!({"user": user, "secret": String::from_utf8_lossy(secret.as_bytes()), "seq": seq}),
        )),
        Event::AdminResult {
            result: Err(reason),
            ..
        } => Err(ApiError::rejected(reason)),
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "unexpected reply",
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSymbol {
    symbol: String,
    base: String,
    quote: String,
    base_scale: i64,
    quote_scale: i64,
    maker_fee: i64,
    taker_fee: i64,
    #[serde(default)]
    price_tick: Option<String>,
    #[serde(default)]
    qty_lot: Option<String>,
    /// `spot` (the default) or `future`, with the three fields below (engine integers).
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    initial_margin: Option<i64>,
    #[serde(default)]
    maintenance_margin: Option<i64>,
    #[serde(default)]
    mark_price: Option<i64>,
}

/// A new symbol's kind: a future needs its margins and mark, a spot symbol takes none; an
/// unknown word is the engine's `invalid_symbol`.
fn symbol_kind(s: &NewSymbol) -> Result<Option<rialto_core::SymbolKind>, ApiError> {
    let margins = (s.initial_margin, s.maintenance_margin, s.mark_price);
    match s.kind.as_deref() {
        None | Some("spot") => match margins {
            (None, None, None) => Ok(SymbolSpec::SPOT),
            _ => Err(ApiError::bad_request(
                "bad_request",
                "initial_margin, maintenance_margin and mark_price are for a future (\"type\": \"future\")",
            )),
        },
        Some("future") => match margins {
            (Some(initial_margin), Some(maintenance_margin), Some(mark_price)) => {
                Ok(Some(rialto_core::SymbolKind::Future {
                    initial_margin,
                    maintenance_margin,
                    mark_price,
                }))
            }
            _ => Err(ApiError::bad_request(
                "bad_request",
                "a future needs initial_margin, maintenance_margin and mark_price",
            )),
        },
        Some(_) => Ok(None),
    }
}

async fn add_symbol(State(state): Shared, Admin(body): Admin) -> ApiResult {
    let s: NewSymbol = parse_json(&body)?;
    let decimal = |text: &Option<String>| -> Result<String, ApiError> {
        let text = text.clone().unwrap_or_else(|| "1".to_string());
        match rialto_fix::Decimal::parse(text.as_bytes()) {
            Ok(d) if d.mantissa > 0 => Ok(text),
            _ => Err(ApiError::bad_request(
                "malformed_json",
                "price_tick and qty_lot are positive decimals",
            )),
        }
    };
    let settings = InstrumentSettings {
        price_tick: decimal(&s.price_tick)?,
        qty_lot: decimal(&s.qty_lot)?,
    };
    let spec = SymbolSpec {
        symbol: currency(&s.symbol)?,
        base: currency(&s.base)?,
        quote: currency(&s.quote)?,
        base_scale: s.base_scale,
        quote_scale: s.quote_scale,
        maker_fee: s.maker_fee,
        taker_fee: s.taker_fee,
        band_bps: 0,
        day_end: 0,
        kind: symbol_kind(&s)?,
    };
    let answer = admin_call(&state, Command::AddSymbol(Box::new(spec))).await?;
    state
        .instruments
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(s.symbol, settings);
    Ok(answer)
}

async fn list_users(State(state): Shared, _: Admin) -> ApiResult {
    match state
        .bridge
        .call(Reply::Users { request: 0 }, Op::ListUsers)
        .await?
    {
        Event::UserList { users, .. } => Ok(Json(Value::Array(
            users.iter().map(|u| json!({"user": u})).collect(),
        ))),
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "unexpected reply",
        )),
    }
}

async fn venue(State(state): Shared, uri: Uri, _: Admin) -> ApiResult {
    let op = Op::Command(Command::VenueReport);
    match state.bridge.call(Reply::VenueReport { request: 0 }, op).await? {
        Event::VenueReport { totals, .. } => reply(&state, &uri, Value::Array(
            totals
                .iter()
                .map(|t| {
                    json!({"currency": t.currency.as_str(), "deposits": t.deposits, "withdrawals": t.withdrawals,
                        "available": t.available, "held": t.held, "fees": t.fees,
                        "insurance": t.insurance,
                        "position_cost": t.position_cost.clamp(i64::MIN as i128, i64::MAX as i128) as i64})
                })
                .collect(),
        ), None),
        _ => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "unexpected reply")),
    }
}

/// The venue's settings, as of the `seq` the reply names.
async fn settings(State(state): Shared, uri: Uri, _: Admin) -> ApiResult {
    let settings = orders::venue_status(&state).await?.1;
    reply(&state, &uri, settings, None)
}

/// Each symbol's trading status (public).
async fn status(State(state): Shared, uri: Uri) -> ApiResult {
    let (seq, mut settings) = orders::venue_status(&state).await?;
    let status = json!({"seq": seq, "symbols": settings["symbols"].take()});
    reply(&state, &uri, status, None)
}

/// A symbol named in a path, or 404.
fn path_symbol(state: &AppState, name: &str) -> Result<rialto_core::SymbolId, ApiError> {
    state
        .md
        .feed()
        .symbol_id(name)
        .ok_or_else(|| ApiError::unknown_symbol(name))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseBody {
    phase: String,
}

async fn set_phase(
    State(state): Shared,
    Path(symbol): Path<String>,
    Admin(body): Admin,
) -> ApiResult {
    let symbol = path_symbol(&state, &symbol)?;
    let PhaseBody { phase } = parse_json(&body)?;
    // An unknown word is the engine's `invalid_phase`.
    let phase = rialto_core::Phase::parse(&phase);
    admin_call(&state, Command::SetPhase { symbol, phase }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BandBody {
    band_bps: i64,
}

async fn set_band(
    State(state): Shared,
    Path(symbol): Path<String>,
    Admin(body): Admin,
) -> ApiResult {
    let symbol = path_symbol(&state, &symbol)?;
    let BandBody { band_bps } = parse_json(&body)?;
    admin_call(&state, Command::SetBand { symbol, band_bps }).await
}

async fn set_ref_price(
    State(state): Shared,
    Path(name): Path<String>,
    uri: Uri,
    Admin(body): Admin,
) -> ApiResult {
    let (symbol, price) = symbol_and_price(&state, &name, &uri, &body)?;
    admin_call(&state, Command::SetRefPrice { symbol, price }).await
}

/// The symbol of an admin path and the price of its body (`{"price": …}`), in ticks.
fn symbol_and_price(
    state: &AppState,
    name: &str,
    uri: &Uri,
    body: &[u8],
) -> Result<(rialto_core::SymbolId, i64), ApiError> {
    let symbol = path_symbol(state, name)?;
    let PriceBody { price } = parse_json(body)?;
    let catalog = Catalog::of(state);
    let price = price.to_engine(
        "price",
        Measure::Price,
        Units::of(uri)?,
        catalog.scales(name),
    )?;
    Ok((symbol, price))
}

/// Sets a future's mark price; a pass may liquidate users (docs/rules.md, "Futures").
async fn set_mark_price(
    State(state): Shared,
    Path(name): Path<String>,
    uri: Uri,
    Admin(body): Admin,
) -> ApiResult {
    let (symbol, price) = symbol_and_price(&state, &name, &uri, &body)?;
    admin_call(&state, Command::SetMarkPrice { symbol, price }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsuranceBody {
    currency: String,
    amount: Amount,
    tx: i64,
}

/// Adds to (amount > 0) or takes from (< 0) a currency's insurance fund.
async fn fund_insurance(State(state): Shared, uri: Uri, Admin(body): Admin) -> ApiResult {
    let InsuranceBody {
        currency: name,
        amount,
        tx,
    } = parse_json(&body)?;
    let minor = Measure::Amount(Catalog::of(&state).currency_minor(&name));
    let amount = amount.to_engine("amount", minor, Units::of(&uri)?, None)?;
    let cmd = Command::FundInsurance {
        currency: currency(&name)?,
        amount,
        tx,
    };
    admin_call(&state, cmd).await
}

fn path_user(user: &str) -> Result<UserId, ApiError> {
    user.parse()
        .map_err(|_| ApiError::bad_request("bad_request", "a user id is a 64-bit integer"))
}

async fn suspend_user(State(state): Shared, Path(user): Path<String>, _: Admin) -> ApiResult {
    let user = path_user(&user)?;
    admin_call(&state, Command::SuspendUser { user }).await
}

async fn resume_user(State(state): Shared, Path(user): Path<String>, _: Admin) -> ApiResult {
    let user = path_user(&user)?;
    admin_call(&state, Command::ResumeUser { user }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderIdWindow {
    window_ns: i64,
}

async fn set_order_id_window(State(state): Shared, Admin(body): Admin) -> ApiResult {
    let OrderIdWindow { window_ns } = parse_json(&body)?;
    admin_call(&state, Command::SetOrderIdWindow { window: window_ns }).await
}

async fn snapshot(State(state): Shared, _: Admin) -> ApiResult {
    match state
        .bridge
        .call(Reply::Snapshot { request: 0 }, Op::TakeSnapshot)
        .await?
    {
        Event::SnapshotTaken {
            seq, state_hash, ..
        } => Ok(Json(
            json!({"seq": seq, "state_hash": crate::auth::hex(&state_hash)}),
        )),
        Event::AdminResult {
            result: Err(reason),
            ..
        } => Err(ApiError::rejected(reason)),
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "unexpected reply",
        )),
    }
}

async fn user_balances(
    State(state): Shared,
    Path(user): Path<String>,
    uri: Uri,
    _: Admin,
) -> ApiResult {
    let user: UserId = user
        .parse()
        .map_err(|_| ApiError::bad_request("bad_request", "the user id must be an i64"))?;
    let (_, report, settings) = super::futures::report_and_settings(&state, user).await?;
    let answer = json!({
        "user": user,
        "balances": orders::balances_json(&report),
        "orders": orders::open_orders_json(&report),
        "positions": super::futures::positions_json(&state, &report, &settings),
        "margins": super::futures::margins_json(&report),
    });
    reply(&state, &uri, answer, None)
}

// ----- API keys -------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyBody {
    user: UserId,
    #[serde(default)]
    permissions: Vec<String>,
    #[serde(default)]
    allow_ips: Vec<String>,
    #[serde(default)]
    label: String,
}

fn key_error(e: super::keys::KeyError) -> ApiError {
    use super::keys::KeyError;
    let message = e.to_string();
    match e {
        KeyError::Invalid(_) => ApiError::bad_request("bad_request", message),
        KeyError::TooMany { .. } | KeyError::StoreFull => {
            ApiError::new(StatusCode::CONFLICT, "too_many_keys", message)
        }
        KeyError::NotFound => ApiError::not_found("no such API key (of this user)"),
        KeyError::Io(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message),
    }
}

/// Creates an API key for a user the engine knows; the answer holds its secret, shown once.
async fn create_key(State(state): Shared, Admin(body): Admin) -> ApiResult {
    let k: KeyBody = parse_json(&body)?;
    let perms = super::keys::Perms::parse(&k.permissions)
        .map_err(|e| ApiError::bad_request("bad_request", e))?;
    let known = match state
        .bridge
        .call(Reply::Users { request: 0 }, Op::ListUsers)
        .await?
    {
        Event::UserList { users, .. } => users.contains(&k.user),
        _ => false,
    };
    if !known {
        return Err(ApiError::rejected(rialto_core::Reason::UnknownUser));
    }
    let new = super::keys::NewKey {
        user: k.user,
        perms,
        allow_ips: k.allow_ips,
        label: k.label,
    };
    let store = state.keys.clone();
    let now = super::auth::now_ms();
    let made = tokio::task::spawn_blocking(move || store.create(new, now))
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "panicked"))?
        .map_err(key_error)?;
    tracing::info!(key = %made["key"], user = k.user, "API key created");
    Ok(Json(made))
}

/// Every issued key, or a user's (`?user=`), without secrets.
async fn list_keys(State(state): Shared, uri: Uri, _: Admin) -> ApiResult {
    let user = match query_value(&uri, "user") {
        Some(text) => Some(path_user(&text)?),
        None => None,
    };
    Ok(Json(Value::Array(state.keys.list(user))))
}

async fn revoke(state: &AppState, key: String, user: Option<UserId>) -> ApiResult {
    let store = state.keys.clone();
    let gone = tokio::task::spawn_blocking(move || store.revoke(&key, user))
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "panicked"))?
        .map_err(key_error)?;
    tracing::info!(key = %gone["key"], user = %gone["user"], "API key revoked");
    Ok(Json(json!({"revoked": gone})))
}

async fn revoke_key(State(state): Shared, Path(key): Path<String>, _: Admin) -> ApiResult {
    revoke(&state, key, None).await
}

/// The signer's issued keys, without secrets (any key of the user may read them).
async fn own_keys(State(state): Shared, Account(user, ..): Account) -> ApiResult {
    Ok(Json(Value::Array(state.keys.list(Some(user)))))
}

/// Revokes one of the signer's keys: a key may revoke itself; another key needs `trade`
/// (so that a leaked read-only key cannot revoke its user's trading keys).
async fn revoke_own_key(
    State(state): Shared,
    Path(key): Path<String>,
    Account(user, access, _): Account,
) -> ApiResult {
    if access.key.issued_id() != Some(key.as_str()) {
        access.need_trade()?;
    }
    revoke(&state, key, Some(user)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operations this file registers under /api/v1, read from its own source: each
    /// route's path with the methods its line names (`post(place).get(open_orders)`).
    fn routed_operations() -> std::collections::BTreeSet<(String, String)> {
        let mut operations = std::collections::BTreeSet::new();
        // A route that rustfmt wrapped (`.route(` alone on its line) is joined into one line.
        let mut lines = Vec::new();
        let mut wrapped: Option<String> = None;
        for line in include_str!("rest.rs").lines() {
            let line = line.trim();
            match wrapped.as_mut() {
                Some(joined) if line.starts_with(')') => {
                    lines.push(std::mem::take(joined) + ")");
                    wrapped = None;
                }
                Some(joined) if joined.ends_with('(') => joined.push_str(line),
                Some(joined) => *joined = format!("{joined} {line}"),
                None if line == ".route(" => wrapped = Some(line.to_string()),
                None => lines.push(line.to_string()),
            }
        }
        for line in &lines {
            let Some(rest) = line.strip_prefix(".route(\"/") else {
                continue;
            };
            let Some((path, handlers)) = rest.split_once('"') else {
                continue;
            };
            if matches!(path, "ws" | "metrics" | "openapi.json") {
                continue;
            }
            for method in ["get", "post", "put", "patch", "delete"] {
                let named = handlers.contains(&format!(" {method}("))
                    || handlers.contains(&format!(".{method}("));
                if named {
                    operations.insert((format!("/api/v1/{path}"), method.to_string()));
                }
            }
        }
        operations
    }

    /// The checked-in description is valid OpenAPI 3 by a real validator (Python's
    /// openapi-spec-validator, which .ci/run installs), not only parseable JSON.
    #[test]
    fn the_openapi_description_passes_a_validator() {
        use std::io::Write;
        let script = "import json, sys\n\
                      from openapi_spec_validator import validate\n\
                      validate(json.load(sys.stdin))\n\
                      print('valid')";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs (with openapi-spec-validator: see .ci/run)");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(OPENAPI.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.starts_with(b"valid"),
            "docs/openapi.json is not valid OpenAPI: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn the_openapi_description_lists_every_operation() {
        let spec: Value = serde_json::from_str(OPENAPI).unwrap();
        let mut documented = std::collections::BTreeSet::new();
        for (path, item) in spec["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.insert((path.clone(), method.clone()));
            }
        }
        let routed = routed_operations();
        assert!(routed.len() >= 20, "the route lines were read: {routed:?}");
        assert_eq!(documented, routed);
    }
}
