//! The REST and WebSocket API over real sockets (docs/api.md): trading, signatures and
//! replays, malformed and oversized input (nothing applied), admin calls, streams, slow
//! consumers.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rialto_server::RunningServer;
use rialto_server::web::auth::{now_ms, sign, signed_text};
use serde_json::{Value, json};

static WINDOWS: AtomicU64 = AtomicU64::new(0);

/// A receive window (ms) that differs from the previous 50,000: requests this process signs
/// in the same millisecond with the same body are then still distinct requests, not replays.
fn window() -> u64 {
    10_000 + WINDOWS.fetch_add(1, Ordering::SeqCst) % 50_000
}

struct Http {
    addr: SocketAddr,
    /// The client address to connect from (127.0.0.1 unless set: any 127/8 address works).
    source: Option<std::net::IpAddr>,
}

/// A connection to `addr` from `source`, when set.
fn connect_from(addr: SocketAddr, source: Option<std::net::IpAddr>) -> TcpStream {
    let Some(source) = source else {
        return TcpStream::connect(addr).unwrap();
    };
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    socket.into()
}

struct Answer {
    status: u16,
    body: Value,
}

impl Http {
    fn new(server: &RunningServer) -> Http {
        Http {
            addr: server.web_addr.expect("web is on by default"),
            source: None,
        }
    }

    /// Requests from another client address.
    fn from(server: &RunningServer, source: [u8; 4]) -> Http {
        Http {
            source: Some(std::net::IpAddr::from(source)),
            ..Http::new(server)
        }
    }

    /// One request on a fresh connection; the body is parsed as JSON.
    fn raw(&self, method: &str, target: &str, headers: &[(String, String)], body: &[u8]) -> Answer {
        let mut s = connect_from(self.addr, self.source);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut req = format!(
            "{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let status: u16 = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {text:?}"));
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let payload = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        let body = serde_json::from_str(&payload).unwrap_or(Value::String(payload));
        Answer { status, body }
    }

    fn get(&self, target: &str) -> Answer {
        self.raw("GET", &common::int_units(target), &[], b"")
    }

    /// A GET in the default units (decimal strings).
    fn get_decimal(&self, target: &str) -> Answer {
        self.raw("GET", target, &[], b"")
    }

    fn signed(&self, key: &str, secret: &str, method: &str, target: &str, body: &str) -> Answer {
        self.signed_as_is(key, secret, method, &common::int_units(target), body)
    }

    /// A signed request to `target` as given (the default units unless it asks).
    fn signed_as_is(
        &self,
        key: &str,
        secret: &str,
        method: &str,
        target: &str,
        body: &str,
    ) -> Answer {
        let now = now_ms();
        let mut headers = signed_headers(key, secret, now, method, target, body.as_bytes());
        headers.push(("Content-Type".to_string(), "application/json".to_string()));
        self.raw(method, target, &headers, body.as_bytes())
    }
}

/// The four `Rialto-*` headers of a request signed as `key` with `secret` at `ts_ms`, with a
/// fresh receive window.
fn signed_headers(
    key: &str,
    secret: &str,
    ts_ms: i64,
    method: &str,
    target: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    let (ts, n) = (ts_ms.to_string(), window().to_string());
    let sig = sign(secret, &signed_text(key, &ts, &n, method, target, body));
    vec![
        ("Rialto-Key".to_string(), key.to_string()),
        ("Rialto-Timestamp".to_string(), ts),
        ("Rialto-Recv-Window".to_string(), n),
        ("Rialto-Signature".to_string(), sig),
    ]
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A trader's signed calls.
struct Trader<'a> {
    http: &'a Http,
    key: String,
    secret: String,
}

impl<'a> Trader<'a> {
    fn new(http: &'a Http, server: &RunningServer, user: i64) -> Trader<'a> {
        Trader {
            http,
            key: user.to_string(),
            secret: server.credentials.user_secret(user),
        }
    }

    fn call(&self, method: &str, target: &str, body: Value) -> Answer {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        self.http
            .signed(&self.key, &self.secret, method, target, &body)
    }
}

fn admin<'a>(http: &'a Http, server: &RunningServer) -> Trader<'a> {
    Trader {
        http,
        key: "admin".into(),
        secret: server.admin_secret.clone(),
    }
}

fn error_code(a: &Answer) -> &str {
    a.body["error"]["code"].as_str().unwrap_or("<none>")
}

fn balance(t: &Trader, currency: &str) -> (i64, i64) {
    let b = t.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!(b.status, 200, "{:?}", b.body);
    let row = b
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["currency"] == currency)
        .cloned();
    row.map_or((0, 0), |r| {
        (
            r["available"].as_i64().unwrap(),
            r["held"].as_i64().unwrap(),
        )
    })
}

/// Checks until `f` holds, up to 10 s: REST reads the market data feed, which follows the
/// engine a little later, and no message says when it has caught up.
fn eventually(what: &str, f: impl FnMut() -> bool) {
    common::eventually(what, Duration::from_secs(10), f);
}

fn book(http: &Http) -> Value {
    http.get("/api/v1/book/BTC-USD").body
}

#[test]
fn public_endpoints_answer_json() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let symbols = http.get("/api/v1/symbols");
    assert_eq!(symbols.status, 200);
    let names: Vec<&str> = symbols
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["BTC-USD", "ETH-USD", "BTC-PERP"]);
    assert_eq!(symbols.body[0]["price_tick"], "0.01");
    assert!(http.get("/api/v1/time").body["ts_ns"].as_i64().unwrap() > 1_700_000_000_000_000_000);
    let b = book(&http);
    assert_eq!(
        (b["bids"].clone(), b["asks"].clone(), b["seq"].clone()),
        (json!([]), json!([]), json!(0))
    );
    let unknown = http.get("/api/v1/book/NOPE-USD");
    assert_eq!((unknown.status, error_code(&unknown)), (404, "not_found"));
    let bad = http.get("/api/v1/book/BTC-USD?depth=0");
    assert_eq!((bad.status, error_code(&bad)), (400, "bad_request"));
    let nowhere = http.get("/api/v1/nowhere");
    assert_eq!((nowhere.status, error_code(&nowhere)), (404, "not_found"));
    let spec = http.get("/openapi.json");
    assert_eq!(spec.status, 200);
    assert_eq!(spec.body["openapi"], "3.0.3");
    let metrics = http.get("/metrics");
    assert_eq!(metrics.status, 200);
    let text = metrics.body.as_str().unwrap();
    assert!(
        text.contains("rialto_commands_total{type=\"add_user\"} 9"),
        "{text}"
    );
    for name in [
        "rialto_ring_occupancy{ring=\"inbound\"}",
        "rialto_ring_occupancy{ring=\"web_inbound\"}",
        "rialto_ring_occupancy{ring=\"fix_inbound\"}",
        "rialto_ring_occupancy{ring=\"market_data\"}",
        "rialto_rejects_total{reason=\"insufficient_funds\"} 0",
        "rialto_engine_latency_seconds_bucket{le=\"+Inf\"}",
        "rialto_roundtrip_latency_seconds_count",
        "rialto_journal_commit_seconds_sum",
        "rialto_log_appends_total ",
        "rialto_log_appended_bytes_total ",
        "rialto_sessions{protocol=\"binary\"}",
        "rialto_sessions{protocol=\"fix\"}",
        "rialto_sessions{protocol=\"websocket\"} 0",
    ] {
        assert!(text.contains(name), "{name} in {text}");
    }
    // The demo's set-up was journaled and synced at start.
    eventually("a timed journal fsync", || {
        let text = http.get("/metrics").body.as_str().unwrap().to_string();
        let count = text
            .lines()
            .find_map(|l| l.strip_prefix("rialto_journal_fsync_seconds_count "))
            .map(|n| n.parse::<u64>().unwrap());
        count.is_some_and(|n| n > 0)
    });
    // An order goes to the log in a batch: counted, with its records' bytes.
    let trader = Trader::new(&http, &server, 1);
    let placed = trader.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "order": 1, "side": "buy", "price": 1, "qty": 1}),
    );
    assert_eq!(placed.status, 200, "{:?}", placed.body);
    let text = http.get("/metrics").body.as_str().unwrap().to_string();
    let counter = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|n| n.trim().parse::<u64>().unwrap())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let appends = counter("rialto_log_appends_total ");
    let bytes = counter("rialto_log_appended_bytes_total ");
    assert!(
        appends > 0 && bytes >= appends * 24,
        "{appends} batches, {bytes} bytes"
    );
    server.shutdown().unwrap();
}

#[test]
fn traders_place_trade_move_reduce_and_cancel_over_rest() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    let buyer = Trader::new(&http, &server, 2);
    let (btc_before, _) = balance(&seller, "BTC");

    let sell = seller.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "order": 11, "side": "sell", "price": 500_000, "qty": 5}),
    );
    assert_eq!(sell.status, 200, "{:?}", sell.body);
    assert_eq!(sell.body["status"], "new");
    assert_eq!(sell.body["order"], 11);
    eventually("the ask on the book", || {
        book(&http)["asks"] == json!([[500_000, 5]])
    });
    assert_eq!(balance(&seller, "BTC"), (btc_before - 5_000, 5_000));

    let buy = buyer.call("POST", "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "buy", "type": "limit", "tif": "ioc", "price": 500_000, "qty": 2}));
    assert_eq!(buy.status, 200, "{:?}", buy.body);
    eventually("the trade", || {
        let t = http.get("/api/v1/trades/BTC-USD").body;
        t.as_array()
            .is_some_and(|t| t.len() == 1 && t[0]["qty"] == 2 && t[0]["taker_side"] == "buy")
    });
    eventually("the rest of the ask", || {
        book(&http)["asks"] == json!([[500_000, 3]])
    });
    let candles = http.get("/api/v1/candles/BTC-USD").body;
    assert_eq!(candles[0]["volume"], 2);
    assert_eq!(candles[0]["open"], 500_000);
    let l3 = http.get("/api/v1/book/BTC-USD/orders").body;
    assert_eq!(l3["asks"].as_array().unwrap().len(), 1);
    assert_eq!(
        (l3["asks"][0][1].clone(), l3["asks"][0][2].clone()),
        (json!(500_000), json!(3))
    );

    let open = seller.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(
        open.body,
        json!([{"symbol": "BTC-USD", "order": 11, "side": "sell", "type": "limit", "tif": "gtc",
            "price": 500_000, "stop_price": 0, "pending": false, "remaining": 3, "shown": 3,
            "filled": 2, "expire_ts": 0}])
    );
    eventually("the fill in the history", || {
        let h = seller
            .call("GET", "/api/v1/orders/history", Value::Null)
            .body;
        h.as_array().unwrap().iter().any(|e| {
            e["type"] == "fill" && e["order"] == 11 && e["qty"] == 2 && e["liquidity"] == "maker"
        })
    });

    let moved = seller.call("POST", "/api/v1/orders/11/move", json!({"price": 510_000}));
    assert_eq!(moved.status, 200, "{:?}", moved.body);
    let reduced = seller.call("POST", "/api/v1/orders/11/reduce", json!({"qty": 1}));
    assert_eq!(reduced.status, 200);
    eventually("moved and reduced", || {
        book(&http)["asks"] == json!([[510_000, 2]])
    });
    let cancelled = seller.call("DELETE", "/api/v1/orders/11", Value::Null);
    assert_eq!(cancelled.status, 200);
    let again = seller.call("DELETE", "/api/v1/orders/11", Value::Null);
    assert_eq!((again.status, error_code(&again)), (400, "unknown_order"));
    eventually("an empty book", || book(&http)["asks"] == json!([]));

    // Mass cancel, then an order the funds cannot cover.
    for order in [20, 21] {
        let r = seller.call("POST", "/api/v1/orders",
            json!({"symbol": "ETH-USD", "order": order, "side": "sell", "price": 300_000, "qty": 1}));
        assert_eq!(r.status, 200);
    }
    let mass = seller.call("DELETE", "/api/v1/orders?symbol=ETH-USD", Value::Null);
    assert_eq!(mass.status, 200, "{:?}", mass.body);
    assert_eq!(
        seller.call("GET", "/api/v1/orders", Value::Null).body,
        json!([])
    );
    let huge = buyer.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "buy", "price": 500_000, "qty": 1_000_000_000_000i64}),
    );
    assert_eq!(
        (huge.status, error_code(&huge)),
        (400, "insufficient_funds")
    );
    let unknown = buyer.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "DOGE-USD", "side": "buy", "price": 5, "qty": 1}),
    );
    assert_eq!(
        (unknown.status, error_code(&unknown)),
        (400, "unknown_symbol")
    );
    let word = buyer.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "sideways", "price": 5, "qty": 1}),
    );
    assert_eq!((word.status, error_code(&word)), (400, "invalid_order"));
    server.shutdown().unwrap();
}

/// The web's requests go straight into the journal stage's intake (not through the binary
/// gateway's thread): also when that stage has a thread of its own.
#[test]
fn web_orders_reach_a_journal_thread_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.pipeline.threads = rialto_server::config::ThreadLayout::Dedicated;
    });
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    for order in 1..=3u64 {
        let sell = seller.call(
            "POST",
            "/api/v1/orders",
            json!({"symbol": "BTC-USD", "order": order, "side": "sell", "price": 500_000 + order, "qty": 1}),
        );
        assert_eq!(
            (sell.status, &sell.body["status"]),
            (200, &json!("new")),
            "{:?}",
            sell.body
        );
    }
    eventually("three asks on the book", || {
        book(&http)["asks"].as_array().is_some_and(|a| a.len() == 3)
    });
    server.shutdown().unwrap();
}

#[test]
fn bad_signatures_replays_and_malformed_bodies_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let trader = Trader::new(&http, &server, 1);
    let order =
        json!({"symbol": "BTC-USD", "order": 1, "side": "sell", "price": 600_000, "qty": 1})
            .to_string();
    let target = "/api/v1/orders?units=int";

    let unsigned = http.raw("POST", target, &[], order.as_bytes());
    assert_eq!(
        (unsigned.status, error_code(&unsigned)),
        (401, "missing_credentials")
    );

    let wrong = http.signed("1", "not the secret", "POST", target, &order);
    assert_eq!((wrong.status, error_code(&wrong)), (401, "bad_signature"));
    let other_user = http.signed("2", &trader.secret, "POST", target, &order);
    assert_eq!(error_code(&other_user), "bad_signature");
    let nobody = http.signed("alice", "x", "POST", target, &order);
    assert_eq!((nobody.status, error_code(&nobody)), (401, "unknown_key"));

    // A signed request replayed byte for byte.
    let headers = signed_headers(
        "1",
        &trader.secret,
        now_ms(),
        "POST",
        target,
        order.as_bytes(),
    );
    let first = http.raw("POST", target, &headers, order.as_bytes());
    assert_eq!(first.status, 200, "{:?}", first.body);
    let replay = http.raw("POST", target, &headers, order.as_bytes());
    assert_eq!(
        (replay.status, error_code(&replay)),
        (401, "replayed_request")
    );
    // The same signature on a changed body does not match.
    let tampered = order.replace("600000", "1");
    let forged = http.raw("POST", target, &headers, tampered.as_bytes());
    assert_eq!(error_code(&forged), "bad_signature");

    // Two minutes old, and the ends of the timestamp's range (properly signed all the same).
    for old in [now_ms() - 120_000, i64::MIN, i64::MAX, -1] {
        let headers = signed_headers("1", &trader.secret, old, "POST", target, order.as_bytes());
        let stale = http.raw("POST", target, &headers, order.as_bytes());
        assert_eq!(
            (stale.status, error_code(&stale)),
            (401, "stale_request"),
            "timestamp {old}"
        );
    }

    for body in [
        "{",
        "[]",
        "{\"symbol\":\"BTC-USD\"}",
        "{\"symbol\":1,\"side\":\"buy\",\"qty\":1}",
        "{\"symbol\":\"BTC-USD\",\"side\":\"buy\",\"qty\":99999999999999999999999}",
        "{\"symbol\":\"BTC-USD\",\"side\":\"buy\",\"qty\":1,\"surprise\":true}",
    ] {
        let a = http.signed("1", &trader.secret, "POST", target, body);
        assert_eq!(
            (a.status, error_code(&a)),
            (400, "malformed_json"),
            "{body}"
        );
    }
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(70 << 10));
    let too_big = http.signed("1", &trader.secret, "POST", target, &big);
    assert_eq!(
        (too_big.status, error_code(&too_big)),
        (413, "payload_too_large")
    );

    let admin = admin(&http, &server);
    let forbidden = admin.call("POST", target, serde_json::from_str(&order).unwrap());
    assert_eq!(
        (forbidden.status, error_code(&forbidden)),
        (403, "forbidden")
    );
    let not_admin = trader.call(
        "POST",
        "/api/v1/admin/deposits",
        json!({"user": 1, "currency": "USD", "amount": 5, "tx": 77}),
    );
    assert_eq!(
        (not_admin.status, error_code(&not_admin)),
        (403, "forbidden")
    );

    // Only the one good request reached the book. Every request above has its answer, so
    // the engine has applied all that reached it; once market data has replayed that too,
    // the book is final.
    eventually("one order", || book(&http)["asks"] == json!([[600_000, 1]]));
    server.settle_market_data(Duration::from_secs(10));
    assert_eq!(book(&http)["asks"], json!([[600_000, 1]]));
    assert_eq!(
        trader
            .call("GET", "/api/v1/orders", Value::Null)
            .body
            .as_array()
            .unwrap()
            .len(),
        1
    );
    server.shutdown().unwrap();
}

#[test]
fn a_request_signed_before_a_restart_cannot_be_replayed_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let target = "/api/v1/orders?units=int";
    let order =
        json!({"symbol": "BTC-USD", "order": 1, "side": "sell", "price": 600_000, "qty": 1})
            .to_string();
    let server = common::start(dir.path(), |_| {});
    let secret = server.credentials.user_secret(1);
    let signed_at = now_ms();
    let headers = signed_headers("1", &secret, signed_at, "POST", target, order.as_bytes());
    let first = Http::new(&server).raw("POST", target, &headers, order.as_bytes());
    assert_eq!(first.status, 200, "{:?}", first.body);
    server.shutdown().unwrap();

    // The restarted server has forgotten the signatures it accepted, not the time it started:
    // it starts in a later millisecond than the signature's.
    common::eventually(
        "the clock to pass the signature's ms",
        Duration::from_secs(1),
        || now_ms() > signed_at,
    );
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let replayed = http.raw("POST", target, &headers, order.as_bytes());
    assert_eq!(
        (replayed.status, error_code(&replayed)),
        (401, "stale_request")
    );
    let trader = Trader::new(&http, &server, 1);
    let open = trader.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(open.status, 200, "a fresh signature works: {:?}", open.body);
    assert_eq!(open.body.as_array().unwrap().len(), 1, "{:?}", open.body);
    server.shutdown().unwrap();
}

#[test]
fn admins_move_money_add_users_and_symbols_and_take_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let admin = admin(&http, &server);
    let user = admin.call("POST", "/api/v1/admin/users", json!({"user": 42}));
    assert_eq!(user.status, 200, "{:?}", user.body);
    assert_eq!(user.body["secret"], server.credentials.user_secret(42));
    let users = admin.call("GET", "/api/v1/admin/users", Value::Null);
    assert_eq!(users.status, 200, "{:?}", users.body);
    let ids: Vec<i64> = users
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["user"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7, 8, 9, 42]);
    let dup = admin.call("POST", "/api/v1/admin/users", json!({"user": 42}));
    assert_eq!((dup.status, error_code(&dup)), (400, "duplicate_user"));

    let deposit = admin.call(
        "POST",
        "/api/v1/admin/deposits",
        json!({"user": 42, "currency": "USD", "amount": 1000, "tx": 9001}),
    );
    assert_eq!(deposit.status, 200, "{:?}", deposit.body);
    let replayed_tx = admin.call(
        "POST",
        "/api/v1/admin/deposits",
        json!({"user": 42, "currency": "USD", "amount": 1000, "tx": 9001}),
    );
    assert_eq!(error_code(&replayed_tx), "duplicate_tx");
    let withdraw = admin.call(
        "POST",
        "/api/v1/admin/withdrawals",
        json!({"user": 42, "currency": "USD", "amount": 300, "tx": 9002}),
    );
    assert_eq!(withdraw.status, 200);
    let overdraw = admin.call(
        "POST",
        "/api/v1/admin/withdrawals",
        json!({"user": 42, "currency": "USD", "amount": 701, "tx": 9003}),
    );
    assert_eq!(error_code(&overdraw), "insufficient_funds");
    let trader = Trader::new(&http, &server, 42);
    assert_eq!(balance(&trader, "USD"), (700, 0));
    let report = admin.call("GET", "/api/v1/admin/balances/42", Value::Null);
    assert_eq!(report.body["balances"][0]["available"], 700);

    let symbol = admin.call("POST", "/api/v1/admin/symbols", json!({"symbol": "SOL-USD", "base": "SOL", "quote": "USD",
        "base_scale": 100, "quote_scale": 1, "maker_fee": 0, "taker_fee": 0, "price_tick": "0.001", "qty_lot": "0.01"}));
    assert_eq!(symbol.status, 200, "{:?}", symbol.body);
    eventually("the new symbol", || {
        http.get("/api/v1/symbols")
            .body
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["symbol"] == "SOL-USD" && s["price_tick"] == "0.001")
    });
    // The FIX gateway hears of it too (the web's replies travel in a ring of their own): a
    // FIX trader's order on it is taken, not refused as an unknown symbol.
    let mut fix = common::fix::FixClient::connect(server.fix_addr.unwrap(), "TRADER5", "FIX.4.4");
    fix.logon(&server, 5);
    let now = common::fix::transact_time();
    use rialto_fix::tags;
    fix.send(
        "D",
        &[
            (tags::CL_ORD_ID, "SOL1"),
            (tags::HANDL_INST, "1"),
            (tags::SYMBOL, "SOL-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &now),
            (tags::ORDER_QTY, "1"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "2"),
            (tags::TIME_IN_FORCE, "1"),
        ],
    );
    let report = fix.expect("8");
    assert_eq!(report.req(tags::EXEC_TYPE), "0", "{report:?}");
    let venue = admin.call("GET", "/api/v1/admin/venue", Value::Null);
    let usd = venue
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["currency"] == "USD")
        .unwrap()
        .clone();
    assert_eq!(usd["withdrawals"], 300);
    let snap = admin.call("POST", "/api/v1/admin/snapshot", Value::Null);
    assert_eq!(snap.status, 200, "{:?}", snap.body);
    assert_eq!(snap.body["state_hash"].as_str().unwrap().len(), 64);
    server.shutdown().unwrap();
}

// ----- WebSocket ------------------------------------------------------------------------------

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn ws_connect(server: &RunningServer) -> Ws {
    let url = format!("ws://{}/ws?units=int", server.web_addr.unwrap());
    let (ws, _) = tungstenite::connect(url).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    ws
}

/// A connection whose receive buffer stays small (set before connecting, it does not grow),
/// so that a client that does not read pushes back on the server soon.
fn ws_connect_small(server: &RunningServer) -> Ws {
    let addr = server.web_addr.unwrap();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(16 << 10).unwrap();
    socket.connect(&addr.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let plain = tungstenite::stream::MaybeTlsStream::Plain(stream);
    let (ws, _) = tungstenite::client(format!("ws://{addr}/ws?units=int"), plain).unwrap();
    ws
}

fn ws_send(ws: &mut Ws, v: Value) {
    ws.send(tungstenite::Message::text(v.to_string())).unwrap();
}

/// Reads until a message satisfies `f`; returns it.
fn ws_until(ws: &mut Ws, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        match ws.read() {
            Ok(tungstenite::Message::Text(t)) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if std::env::var("WS_TRACE").is_ok() {
                    eprintln!("{what}: {v}");
                }
                if f(&v) {
                    return v;
                }
            }
            Ok(_) => {}
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    }
}

fn ws_login(ws: &mut Ws, server: &RunningServer, user: i64) {
    let secret = server.credentials.user_secret(user);
    let (key, ts, n) = (user.to_string(), now_ms().to_string(), window().to_string());
    let answer = ws_login_with(ws, "login", &key, &secret, &ts, &n);
    assert_eq!(answer["result"]["user"], user, "{answer}");
}

#[test]
fn websocket_streams_book_trades_and_private_fills_and_takes_orders() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    seller.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "order": 1, "side": "sell", "price": 500_100, "qty": 4}),
    );
    eventually("the first ask", || book(&http)["asks"] != json!([]));

    let mut watcher = ws_connect(&server);
    ws_send(
        &mut watcher,
        json!({"id": 1, "op": "subscribe", "ch": "book.BTC-USD"}),
    );
    let snap = ws_until(&mut watcher, "the book snapshot", |v| {
        v["type"] == "snapshot"
    });
    assert_eq!(snap["asks"], json!([[500_100, 4]]));
    let mut seq = snap["seq"].as_u64().unwrap();
    ws_send(
        &mut watcher,
        json!({"id": 2, "op": "subscribe", "ch": "trades.BTC-USD"}),
    );
    ws_until(&mut watcher, "subscribed", |v| v["id"] == 2);

    let mut trader = ws_connect(&server);
    ws_send(
        &mut trader,
        json!({"id": 7, "op": "place", "symbol": "BTC-USD", "side": "buy", "price": 500_100, "qty": 1}),
    );
    let refused = ws_until(&mut trader, "a refusal before login", |v| v["id"] == 7);
    assert_eq!(refused["error"]["code"], "missing_credentials");
    ws_login(&mut trader, &server, 2);
    ws_send(
        &mut trader,
        json!({"id": "u", "op": "subscribe", "ch": "user"}),
    );
    let balances = ws_until(&mut trader, "balances", |v| v["type"] == "balances");
    assert!(
        balances["balances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["currency"] == "USD")
    );
    ws_send(
        &mut trader,
        json!({"id": 8, "op": "place", "symbol": "BTC-USD", "order": 99, "side": "buy", "price": 500_100, "qty": 1}),
    );
    // The answer and the fill travel apart: either may come first.
    let mut placed = Value::Null;
    let mut fill = Value::Null;
    while placed.is_null() || fill.is_null() {
        let v = ws_until(&mut trader, "the answer and the fill", |v| {
            v["id"] == 8 || v["type"] == "fill"
        });
        if v["id"] == 8 {
            placed = v;
        } else {
            fill = v;
        }
    }
    assert_eq!(placed["result"]["status"], "filled", "{placed}");
    assert_eq!(
        (
            fill["order"].clone(),
            fill["qty"].clone(),
            fill["liquidity"].clone()
        ),
        (json!(99), json!(1), json!("taker"))
    );

    // The watcher sees the diff that continues its snapshot, and the trade: each channel
    // is forwarded on its own, so either may come first. (A diff the snapshot already covers
    // may come before both: the book rule drops it.)
    let (mut diff, mut trades) = (Value::Null, Value::Null);
    while diff.is_null() || trades.is_null() {
        let v = ws_until(&mut watcher, "the diff and the trade", |v| {
            (v["type"] == "diff" && v["last"].as_u64().unwrap() > seq) || v["type"] == "trades"
        });
        if v["type"] == "diff" {
            diff = v;
        } else {
            trades = v;
        }
    }
    assert!(
        diff["first"].as_u64().unwrap() <= seq + 1 && seq < diff["last"].as_u64().unwrap(),
        "{diff}"
    );
    assert_eq!(diff["asks"], json!([[500_100, 3]]));
    seq = diff["last"].as_u64().unwrap();
    assert_eq!(trades["trades"][0]["qty"], 1);

    // Bad input gets an error and the connection stays.
    watcher
        .send(tungstenite::Message::text("{not json"))
        .unwrap();
    let e = ws_until(&mut watcher, "an error", |v| v.get("error").is_some());
    assert_eq!(e["error"]["code"], "malformed_json");
    ws_send(&mut watcher, json!({"id": 3, "op": "fly"}));
    assert_eq!(
        ws_until(&mut watcher, "an error", |v| v["id"] == 3)["error"]["code"],
        "bad_request"
    );
    ws_send(
        &mut watcher,
        json!({"id": 4, "op": "subscribe", "ch": "book.NOPE"}),
    );
    assert_eq!(
        ws_until(&mut watcher, "an error", |v| v["id"] == 4)["error"]["code"],
        "not_found"
    );
    seller.call("DELETE", "/api/v1/orders/1", Value::Null);
    let diff = ws_until(&mut watcher, "the next diff", |v| v["type"] == "diff");
    assert_eq!(
        diff["first"].as_u64().unwrap(),
        seq + 1,
        "consecutive diffs"
    );
    assert_eq!(diff["asks"], json!([[500_100, 0]]));

    // An oversized message closes the connection with 1009.
    watcher
        .send(tungstenite::Message::text("x".repeat(100 << 10)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline);
        match watcher.read() {
            Ok(tungstenite::Message::Close(Some(frame))) => {
                assert_eq!(u16::from(frame.code), 1009);
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("expected a close frame, got {e}"),
        }
    }
    server.shutdown().unwrap();
}

/// A login attempt over the socket with the given fields; returns the answer.
fn ws_login_with(ws: &mut Ws, id: &str, key: &str, secret: &str, ts: &str, n: &str) -> Value {
    let sig = sign(secret, &signed_text(key, ts, n, "WS", "/ws", b""));
    ws_send(
        ws,
        json!({"id": id, "op": "login", "key": key, "ts": ts, "recv_window": n, "sig": sig}),
    );
    ws_until(ws, "the login answer", |v| v["id"] == id)
}

/// A request over the socket; returns its answer.
fn ws_call(ws: &mut Ws, request: Value) -> Value {
    let id = request["id"].clone();
    ws_send(ws, request);
    ws_until(ws, "the answer", |v| v["id"] == id)
}

#[test]
fn websocket_login_failures_order_entry_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let rest = Trader::new(&http, &server, 1);
    let open_orders = || rest.call("GET", "/api/v1/orders", Value::Null).body;
    let secret = server.credentials.user_secret(1);
    let mut ws = ws_connect(&server);

    // Logins that fail leave the connection as it was: not logged in.
    let now = now_ms().to_string();
    let wrong = ws_login_with(
        &mut ws,
        "a",
        "1",
        "not the secret",
        &now,
        &window().to_string(),
    );
    assert_eq!(wrong["error"]["code"], "bad_signature", "{wrong}");
    let other = ws_login_with(&mut ws, "b", "2", &secret, &now, &window().to_string());
    assert_eq!(other["error"]["code"], "bad_signature", "{other}");
    let nobody = ws_login_with(&mut ws, "c", "alice", &secret, &now, &window().to_string());
    assert_eq!(nobody["error"]["code"], "unknown_key", "{nobody}");
    for ts in [now_ms() - 120_000, i64::MIN, i64::MAX] {
        let stale = ws_login_with(
            &mut ws,
            "d",
            "1",
            &secret,
            &ts.to_string(),
            &window().to_string(),
        );
        assert_eq!(stale["error"]["code"], "stale_request", "{ts}: {stale}");
    }
    let n = window().to_string();
    let first = ws_login_with(&mut ws, "e", "1", &secret, &now, &n);
    assert_eq!(first["result"]["user"], 1, "{first}");
    let mut second = ws_connect(&server);
    let replayed = ws_login_with(&mut second, "f", "1", &secret, &now, &n);
    assert_eq!(replayed["error"]["code"], "replayed_request", "{replayed}");
    let refused = ws_call(&mut second, json!({"id": 1, "op": "cancel", "order": 1}));
    assert_eq!(refused["error"]["code"], "missing_credentials");

    // Order entry: place, move, reduce, cancel, mass cancel.
    let place = |ws: &mut Ws, id: i64, order: i64, price: i64| {
        ws_call(
            ws,
            json!({"id": id, "op": "place", "symbol": "BTC-USD", "order": order, "side": "sell", "price": price, "qty": 3}),
        )
    };
    assert_eq!(place(&mut ws, 1, 1, 600_000)["result"]["status"], "new");
    let moved = ws_call(
        &mut ws,
        json!({"id": 2, "op": "move", "order": 1, "price": 600_100}),
    );
    assert_eq!(moved["result"]["status"], "accepted", "{moved}");
    let reduced = ws_call(
        &mut ws,
        json!({"id": 3, "op": "reduce", "order": 1, "qty": 1}),
    );
    assert_eq!(reduced["result"]["status"], "accepted", "{reduced}");
    assert_eq!(
        open_orders(),
        json!([{"symbol": "BTC-USD", "order": 1, "side": "sell", "type": "limit", "tif": "gtc",
            "price": 600_100, "stop_price": 0, "pending": false, "remaining": 2, "shown": 2,
            "filled": 0, "expire_ts": 0}])
    );

    // Another user cannot touch it.
    ws_login(&mut second, &server, 2);
    for (id, op) in [
        (4, json!({"op": "cancel", "order": 1})),
        (5, json!({"op": "move", "order": 1, "price": 1})),
        (6, json!({"op": "reduce", "order": 1, "qty": 1})),
    ] {
        let mut request = op;
        request["id"] = json!(id);
        let answer = ws_call(&mut second, request);
        assert_eq!(answer["error"]["code"], "unknown_order", "{answer}");
    }

    // Bad input: an error each, and nothing applied.
    for (id, code, request) in [
        (
            10,
            "malformed_json",
            json!({"op": "place", "symbol": "BTC-USD", "side": "sell", "price": 600_000}),
        ),
        (
            11,
            "malformed_json",
            json!({"op": "place", "symbol": "BTC-USD", "side": "sell", "price": "1", "qty": 1}),
        ),
        (
            12,
            "malformed_json",
            json!({"op": "place", "symbol": "BTC-USD", "side": "sell", "price": 1, "qty": 1e30}),
        ),
        (
            13,
            "unknown_symbol",
            json!({"op": "place", "symbol": "NOPE", "side": "sell", "price": 600_000, "qty": 1}),
        ),
        (
            14,
            "invalid_order",
            json!({"op": "place", "symbol": "BTC-USD", "side": "up", "price": 600_000, "qty": 1}),
        ),
        (15, "malformed_json", json!({"op": "move", "order": 1})),
        (
            16,
            "malformed_json",
            json!({"op": "move", "order": 1, "price": 18_446_744_073_709_551_615u64}),
        ),
        (
            17,
            "malformed_json",
            json!({"op": "reduce", "order": "1", "qty": 1}),
        ),
        (
            18,
            "invalid_qty",
            json!({"op": "reduce", "order": 1, "qty": 0}),
        ),
        (19, "malformed_json", json!({"op": "cancel"})),
        (20, "unknown_order", json!({"op": "cancel", "order": 404})),
    ] {
        let mut request = request;
        request["id"] = json!(id);
        let answer = ws_call(&mut ws, request.clone());
        assert_eq!(answer["error"]["code"], code, "{request} -> {answer}");
    }
    assert_eq!(
        open_orders(),
        json!([{"symbol": "BTC-USD", "order": 1, "side": "sell", "type": "limit", "tif": "gtc",
            "price": 600_100, "stop_price": 0, "pending": false, "remaining": 2, "shown": 2,
            "filled": 0, "expire_ts": 0}])
    );

    assert_eq!(place(&mut ws, 30, 2, 600_200)["result"]["status"], "new");
    let cancelled = ws_call(&mut ws, json!({"id": 31, "op": "cancel", "order": 2}));
    assert_eq!(cancelled["result"]["status"], "accepted", "{cancelled}");
    let again = ws_call(&mut ws, json!({"id": 32, "op": "cancel", "order": 2}));
    assert_eq!(again["error"]["code"], "unknown_order");
    assert_eq!(place(&mut ws, 33, 3, 600_300)["result"]["status"], "new");
    let mass = ws_call(
        &mut ws,
        json!({"id": 34, "op": "mass_cancel", "symbol": "BTC-USD"}),
    );
    assert_eq!(mass["result"]["status"], "accepted", "{mass}");
    assert_eq!(open_orders(), json!([]));
    server.shutdown().unwrap();
}

#[test]
fn websocket_order_log_bbo_and_candle_streams_follow_the_trading() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    let buyer = Trader::new(&http, &server, 2);
    let place = |who: &Trader, order: i64, side: &str, price: i64, qty: i64| {
        let r = who.call(
            "POST",
            "/api/v1/orders",
            json!({"symbol": "BTC-USD", "order": order, "side": side, "price": price, "qty": qty}),
        );
        assert_eq!(r.status, 200, "{:?}", r.body);
    };
    place(&seller, 1, "sell", 500_100, 4);
    eventually("the ask", || book(&http)["asks"] == json!([[500_100, 4]]));

    let mut ws = ws_connect(&server);
    for (id, ch) in [
        (1, "orders.BTC-USD"),
        (2, "bbo.BTC-USD"),
        (3, "candles.BTC-USD"),
    ] {
        ws_send(&mut ws, json!({"id": id, "op": "subscribe", "ch": ch}));
    }
    let l3 = ws_until(&mut ws, "the order log snapshot", |v| {
        v["ch"] == "orders.BTC-USD" && v["type"] == "snapshot"
    });
    assert_eq!(l3["asks"].as_array().unwrap().len(), 1, "{l3}");
    assert_eq!(
        (l3["asks"][0][1].clone(), l3["asks"][0][2].clone()),
        (json!(500_100), json!(4))
    );
    let maker_id = l3["asks"][0][0].clone();
    let mut l3_seq = l3["seq"].as_u64().unwrap();
    let bbo = ws_until(&mut ws, "the first BBO", |v| v["ch"] == "bbo.BTC-USD");
    assert_eq!(
        (bbo["bid"].clone(), bbo["ask"].clone()),
        (Value::Null, json!([500_100, 4]))
    );
    ws_until(&mut ws, "the candle snapshot", |v| {
        v["ch"] == "candles.BTC-USD" && v["type"] == "snapshot"
    });

    // A bid that takes 1 of the 4, then rests below: the log shows the execution and the add,
    // in consecutive seqs; the BBO and the current candle follow.
    place(&buyer, 7, "buy", 500_100, 1);
    place(&buyer, 8, "buy", 499_900, 2);
    // The channels are written apart: read them all until each has shown its part.
    let (mut executed, mut added, mut bbo_moved) = (false, false, false);
    let mut candle = Value::Null;
    while !(executed && added && bbo_moved && !candle.is_null()) {
        let v = ws_until(&mut ws, "the updates", |v| v["type"] != "snapshot");
        if v["ch"] == "bbo.BTC-USD" {
            bbo_moved |= v["bid"] == json!([499_900, 2]) && v["ask"] == json!([500_100, 3]);
        } else if v["ch"] == "candles.BTC-USD" {
            candle = v["candle"].clone();
        } else if v["ch"] == "orders.BTC-USD" {
            for u in v["updates"].as_array().unwrap() {
                let seq = u["seq"].as_u64().unwrap();
                if seq <= l3_seq {
                    continue;
                }
                assert_eq!(seq, l3_seq + 1, "consecutive: {v}");
                l3_seq = seq;
                if u["op"] == "execute" {
                    assert_eq!(
                        (u["order"].clone(), u["qty"].clone()),
                        (maker_id.clone(), json!(1))
                    );
                    executed = true;
                }
                if u["op"] == "add" {
                    assert_eq!(
                        (u["side"].clone(), u["price"].clone(), u["qty"].clone()),
                        (json!("buy"), json!(499_900), json!(2)),
                        "{u}"
                    );
                    added = true;
                }
            }
        }
    }
    assert_eq!(
        (
            candle["open"].clone(),
            candle["close"].clone(),
            candle["volume"].clone(),
            candle["trades"].clone()
        ),
        (json!(500_100), json!(500_100), json!(1), json!(1)),
        "{candle}"
    );
    server.shutdown().unwrap();
}

/// A book side from a snapshot or diff: price -> total.
fn apply_levels(side: &mut std::collections::BTreeMap<i64, i64>, levels: &Value) {
    for level in levels.as_array().unwrap() {
        let (price, qty) = (level[0].as_i64().unwrap(), level[1].as_i64().unwrap());
        match qty {
            0 => side.remove(&price),
            _ => side.insert(price, qty),
        };
    }
}

/// A full-depth book snapshot from a connection of its own.
fn fresh_book_snapshot(server: &RunningServer) -> Value {
    let mut ws = ws_connect(server);
    ws_send(
        &mut ws,
        json!({"id": 1, "op": "subscribe", "ch": "book.BTC-USD"}),
    );
    ws_until(&mut ws, "a snapshot", |v| v["type"] == "snapshot")
}

#[test]
fn a_reader_that_pauses_gets_every_diff_whole_and_in_order() {
    use rialto_core::{Side, SymbolId};
    use rialto_wire::{ClientMsg, NewOrder, ServerMsg};
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});

    // A small receive buffer that nobody reads for a while: what the socket does not take
    // waits in the server's queue for this connection (logged in: a trader's queue may hold
    // more bytes than an anonymous one's).
    let mut reader = ws_connect_small(&server);
    ws_login(&mut reader, &server, 3);
    ws_send(
        &mut reader,
        json!({"id": 1, "op": "subscribe", "ch": "book.BTC-USD"}),
    );
    let snapshot = ws_until(&mut reader, "the snapshot", |v| v["type"] == "snapshot");
    let (mut bids, mut asks) = Default::default();
    apply_levels(&mut bids, &snapshot["bids"]);
    apply_levels(&mut asks, &snapshot["asks"]);
    let mut last = snapshot["seq"].as_u64().unwrap();

    // 5,000 book changes over 500 bid levels: 3,000 places, the last 2,000 each with a
    // cancel of the oldest order, at most 1,000 resting.
    let mut trader = common::trader(&server, 1);
    let mut commands = Vec::new();
    for order in 1..=3_000i64 {
        let price = 400_000 + (order * 7) % 500;
        let place = NewOrder::limit(order, SymbolId(0), Side::Buy, price, 1 + order % 3);
        commands.push(ClientMsg::NewOrder(place));
        if order > 1_000 {
            commands.push(ClientMsg::Cancel {
                order: order - 1_000,
            });
        }
    }
    for chunk in commands.chunks(500) {
        trader.send_batch(chunk).unwrap();
    }
    let (last_cancel, _) = common::recv_until(&mut trader, |m| {
        matches!(m, ServerMsg::Cancelled { order: 2_000, .. })
    });
    let ServerMsg::Cancelled { seq: last_seq, .. } = last_cancel else {
        unreachable!()
    };

    // Once the feed has replayed the last command, the book a new subscriber gets is where
    // the diffs must lead.
    common::market_data_reaches(&server, last_seq);
    let settled = fresh_book_snapshot(&server);
    let target = settled["seq"].as_u64().unwrap();
    assert!(target >= last + 5_000, "{target} after {last}");

    let mut diffs = 0;
    while last < target {
        let diff = ws_until(&mut reader, "the next diff", |v| v["type"] == "diff");
        let first = diff["first"].as_u64().unwrap();
        assert!(first <= last + 1, "a gap: {first} after {last}");
        let next = diff["last"].as_u64().unwrap();
        if next <= last {
            continue; // covered by the snapshot
        }
        apply_levels(&mut bids, &diff["bids"]);
        apply_levels(&mut asks, &diff["asks"]);
        last = next;
        diffs += 1;
    }
    assert_eq!(last, target, "no diff goes past the settled book");
    let (mut want_bids, mut want_asks) = Default::default();
    apply_levels(&mut want_bids, &settled["bids"]);
    apply_levels(&mut want_asks, &settled["asks"]);
    assert_eq!(bids, want_bids);
    assert_eq!(asks, want_asks);
    assert_eq!(bids.len(), 500, "every level holds an order at the end");
    assert!(diffs > 1, "the updates came in {diffs} diffs");
    server.shutdown().unwrap();
}

#[test]
fn a_slow_consumer_is_cut_off_and_others_carry_on() {
    let dir = tempfile::tempdir().unwrap();
    // No rate limit: the slow one's thousands of requests would otherwise be refused (and
    // charged to the address the test's own /metrics calls come from).
    let server = common::start(dir.path(), |c| {
        c.web.max_ws_queue = 8;
        c.web.max_requests_per_sec = 0;
    });
    let http = Http::new(&server);
    let maker = Trader::new(&http, &server, 1);
    // A deep book makes every snapshot large.
    for i in 0..300 {
        let r = maker.call("POST", "/api/v1/orders", json!({"symbol": "BTC-USD", "order": i, "side": "sell", "price": 600_000 + i, "qty": 1}));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    eventually("the deep book", || {
        book(&http)["asks"].as_array().unwrap().len() == 50
    });

    let mut fast = ws_connect(&server);
    ws_send(
        &mut fast,
        json!({"id": 1, "op": "subscribe", "ch": "bbo.BTC-USD"}),
    );
    ws_until(&mut fast, "subscribed", |v| v["id"] == 1);

    // The slow one asks for snapshot after snapshot (3,000 of about 4 KB: more than the
    // kernel's buffers hold) and reads nothing until the server has counted it as a slow
    // consumer.
    let mut slow = ws_connect_small(&server);
    for i in 0..6000 {
        let op = if i % 2 == 0 {
            "subscribe"
        } else {
            "unsubscribe"
        };
        let request = json!({"op": op, "ch": "orders.BTC-USD"}).to_string();
        if slow.send(tungstenite::Message::text(request)).is_err() {
            break; // the server has already closed it
        }
    }
    eventually("the slow consumer to be cut off", || {
        let metrics = http.get("/metrics").body;
        metrics
            .as_str()
            .unwrap()
            .contains("rialto_ws_slow_consumers_total 1")
    });
    // Meanwhile the fast one keeps getting its stream.
    maker.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "order": 1000, "side": "sell", "price": 599_999, "qty": 1}),
    );
    let bbo = ws_until(&mut fast, "the new best ask", |v| {
        v["ask"] == json!([599_999, 1])
    });
    assert_eq!(bbo["ch"], "bbo.BTC-USD");

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut told = false;
    loop {
        assert!(
            Instant::now() < deadline,
            "the slow consumer was not closed"
        );
        match slow.read() {
            Ok(tungstenite::Message::Text(t)) if t.contains("slow_consumer") => told = true,
            Ok(tungstenite::Message::Close(frame)) => {
                assert_eq!(frame.map(|f| u16::from(f.code)), Some(1008));
                break;
            }
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(told, "the slow consumer was told why");
    let metrics = http.get("/metrics").body;
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("rialto_ws_slow_consumers_total 1")
    );
    server.shutdown().unwrap();
}

#[test]
fn every_documented_endpoint_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let spec = http.get("/openapi.json").body;
    for (path, methods) in spec["paths"].as_object().unwrap() {
        let target = path
            .replace("{symbol}", "BTC-USD")
            .replace("{order}", "1")
            .replace("{user}", "1");
        for (method, operation) in methods.as_object().unwrap() {
            let method = method.to_uppercase();
            let answer = http.raw(&method, &target, &[], b"");
            if operation.get("security").is_some() {
                assert_eq!(
                    (answer.status, error_code(&answer)),
                    (401, "missing_credentials"),
                    "{method} {target}"
                );
            } else {
                assert_eq!(answer.status, 200, "{method} {target}: {:?}", answer.body);
            }
        }
    }
    server.shutdown().unwrap();
}

// ----- hardening (docs/api.md "Authentication", "Limits") -------------------------------------

/// A metric's value from /metrics (the first line that starts with `name`).
fn metric(http: &Http, name: &str) -> u64 {
    let text = http.get("/metrics").body.as_str().unwrap().to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn open_order_count(t: &Trader) -> usize {
    let open = t.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(open.status, 200, "{:?}", open.body);
    open.body.as_array().unwrap().len()
}

#[test]
fn a_request_replayed_under_another_spelling_of_its_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // More refusals than the failed-login throttle allows by default: not what this tests.
    let server = common::start(dir.path(), |c| c.web.login_failures_burst = 100);
    let http = Http::new(&server);
    let trader = Trader::new(&http, &server, 1);
    let target = "/api/v1/orders?units=int";
    let order =
        json!({"symbol": "BTC-USD", "side": "sell", "price": 600_000, "qty": 1}).to_string();
    let headers = signed_headers(
        "1",
        &trader.secret,
        now_ms(),
        "POST",
        target,
        order.as_bytes(),
    );
    let first = http.raw("POST", target, &headers, order.as_bytes());
    assert_eq!(first.status, 200, "{:?}", first.body);
    for spelling in ["01", "001", "+1", "1.0", "1e0"] {
        let mut respelled = headers.clone();
        respelled[0].1 = spelling.to_string();
        let replay = http.raw("POST", target, &respelled, order.as_bytes());
        assert_eq!(
            (replay.status, error_code(&replay)),
            (401, "unknown_key"),
            "{spelling:?}"
        );
    }
    // Signed for real under a non-canonical spelling: still no such key.
    let respelled = signed_headers(
        "01",
        &trader.secret,
        now_ms(),
        "POST",
        target,
        order.as_bytes(),
    );
    let answer = http.raw("POST", target, &respelled, order.as_bytes());
    assert_eq!((answer.status, error_code(&answer)), (401, "unknown_key"));
    // The old signed text (without the key) no longer verifies.
    let (ts, n) = (now_ms().to_string(), window().to_string());
    let mut old = b"".to_vec();
    for part in [ts.as_str(), n.as_str(), "POST", target] {
        old.extend_from_slice(part.as_bytes());
        old.push(b'\n');
    }
    old.extend_from_slice(order.as_bytes());
    let old_headers = vec![
        ("Rialto-Key".to_string(), "1".to_string()),
        ("Rialto-Timestamp".to_string(), ts),
        ("Rialto-Recv-Window".to_string(), n),
        ("Rialto-Signature".to_string(), sign(&trader.secret, &old)),
    ];
    let answer = http.raw("POST", target, &old_headers, order.as_bytes());
    assert_eq!((answer.status, error_code(&answer)), (401, "bad_signature"));
    assert_eq!(
        open_order_count(&trader),
        1,
        "only the first request placed an order"
    );

    // A captured WebSocket login, replayed as is and under other spellings of its key.
    let secret = server.credentials.user_secret(2);
    let (ts, n) = (now_ms().to_string(), window().to_string());
    let mut ws = ws_connect(&server);
    let login = ws_login_with(&mut ws, "a", "2", &secret, &ts, &n);
    assert_eq!(login["result"]["user"], 2, "{login}");
    let sig = sign(&secret, &signed_text("2", &ts, &n, "WS", "/ws", b""));
    let mut thief = ws_connect(&server);
    for (id, key) in [("b", json!("02")), ("c", json!("+2")), ("d", json!("002"))] {
        let answer = ws_call(
            &mut thief,
            json!({"id": id, "op": "login", "key": key, "ts": ts, "recv_window": n, "sig": sig}),
        );
        assert_eq!(answer["error"]["code"], "unknown_key", "{key}: {answer}");
    }
    let answer = ws_call(
        &mut thief,
        json!({"id": "e", "op": "login", "key": "2", "ts": ts, "recv_window": n, "sig": sig}),
    );
    assert_eq!(answer["error"]["code"], "replayed_request", "{answer}");
    let refused = ws_call(
        &mut thief,
        json!({"id": "f", "op": "place", "symbol": "BTC-USD", "side": "sell", "price": 600_000, "qty": 1}),
    );
    assert_eq!(refused["error"]["code"], "missing_credentials", "{refused}");
    server.shutdown().unwrap();
}

/// Sends a request head as given and returns the status of the answer, or None when the
/// server closed the connection without one.
fn send_head(addr: SocketAddr, head: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(head); // the server may close before it has read everything
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace().nth(1).and_then(|c| c.parse().ok())
}

#[test]
fn big_headers_are_refused_and_junk_keys_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let addr = http.addr;
    let big = format!(
        "GET /api/v1/time HTTP/1.1\r\nHost: x\r\nRialto-Key: {}\r\n\r\n",
        "1".repeat(200 << 10)
    );
    let status = send_head(addr, big.as_bytes());
    assert!(
        matches!(status, None | Some(431)),
        "a 200 KB header: {status:?}"
    );
    let mut many = "GET /api/v1/time HTTP/1.1\r\nHost: x\r\n".to_string();
    for i in 0..100 {
        many.push_str(&format!("X-Filler-{i}: {i}\r\n"));
    }
    many.push_str("\r\n");
    let status = send_head(addr, many.as_bytes());
    assert!(
        matches!(status, None | Some(431)),
        "100 headers: {status:?}"
    );
    // Just under the limit is fine.
    let fits = format!(
        "GET /api/v1/time HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
        "p".repeat(12 << 10)
    );
    assert_eq!(send_head(addr, fits.as_bytes()), Some(200));

    // Signed requests with keys nobody has: no state is kept for them.
    for i in 0..300 {
        let key = format!("{}{i}", "0".repeat(1 + i % 7));
        let headers = signed_headers(&key, "x", now_ms(), "GET", "/api/v1/time", b"");
        let answer = http.raw("GET", "/api/v1/time", &headers, b"");
        assert!(matches!(answer.status, 200 | 429), "{:?}", answer.body);
    }
    assert_eq!(
        metric(&http, "rialto_web_auth_entries{table=\"signatures\"}"),
        0
    );
    assert_eq!(
        metric(&http, "rialto_web_auth_entries{table=\"rates\"}"),
        1,
        "one address"
    );
    server.shutdown().unwrap();
}

#[test]
fn junk_credentials_are_charged_to_the_address_and_signed_requests_to_their_user() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 5;
        c.web.burst = 5;
    });
    let http = Http::new(&server);
    let junk = [("Rialto-Key".to_string(), "whatever".to_string())];
    let statuses: Vec<u16> = (0..20)
        .map(|_| http.raw("GET", "/api/v1/time", &junk, b"").status)
        .collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| matches!(s, 200 | 429)),
        "{statuses:?}"
    );
    // The address is spent; a correctly signed request is the user's, and goes through.
    let trader = Trader::new(&http, &server, 1);
    let balances = trader.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!(balances.status, 200, "{:?}", balances.body);
    let public = http.get("/api/v1/time");
    assert_eq!((public.status, error_code(&public)), (429, "rate_limited"));
    server.shutdown().unwrap();
}

#[test]
fn websocket_order_entry_is_limited_to_the_users_rate() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 20;
        c.web.burst = 20;
    });
    let mut ws = ws_connect(&server);
    ws_login(&mut ws, &server, 1);
    let started = Instant::now();
    for id in 0..200 {
        ws_send(
            &mut ws,
            json!({"id": id, "op": "place", "symbol": "BTC-USD", "side": "sell", "price": 700_000 + id, "qty": 1}),
        );
    }
    let (mut accepted, mut limited) = (0, 0);
    for _ in 0..200 {
        let answer = ws_until(&mut ws, "an answer", |v| v.get("id").is_some());
        match answer["error"]["code"].as_str() {
            None => accepted += 1,
            Some("rate_limited") => limited += 1,
            Some(other) => panic!("{other}: {answer}"),
        }
    }
    let allowed = 20 + (started.elapsed().as_secs_f64() * 20.0).ceil() as usize;
    assert!(limited > 0, "{accepted} accepted");
    assert!(
        accepted <= allowed,
        "{accepted} accepted, at most {allowed} allowed"
    );
    server.shutdown().unwrap();
}

#[test]
fn the_l3_book_is_capped_per_side_and_says_when_it_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let maker = Trader::new(&http, &server, 1);
    for i in 0..30 {
        let r = maker.call("POST", "/api/v1/orders",
            json!({"symbol": "BTC-USD", "order": i, "side": "sell", "price": 600_000 + i, "qty": 1}));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    eventually("30 orders in the L3 book", || {
        http.get("/api/v1/book/BTC-USD/orders").body["asks"]
            .as_array()
            .unwrap()
            .len()
            == 30
    });
    let whole = http.get("/api/v1/book/BTC-USD/orders").body;
    assert_eq!(whole["truncated"], false);
    let cut = http.get("/api/v1/book/BTC-USD/orders?limit=10").body;
    assert_eq!(cut["asks"].as_array().unwrap().len(), 10);
    assert_eq!(cut["asks"][0], whole["asks"][0], "the best first");
    assert_eq!(cut["truncated"], true);
    for bad in ["0", "1001", "x"] {
        let a = http.get(&format!("/api/v1/book/BTC-USD/orders?limit={bad}"));
        assert_eq!((a.status, error_code(&a)), (400, "bad_request"), "{bad}");
    }
    server.shutdown().unwrap();
}

#[test]
fn websocket_subscribers_that_never_read_are_cut_off_by_the_bytes_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 64 << 10;
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 0;
        c.web.max_ws_queue_bytes_public = cap;
    });
    let http = Http::new(&server);
    let maker = Trader::new(&http, &server, 1);
    for i in 0..300 {
        let r = maker.call("POST", "/api/v1/orders",
            json!({"symbol": "BTC-USD", "order": i, "side": "sell", "price": 600_000 + i, "qty": 1}));
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    eventually("the deep book", || {
        http.get("/api/v1/book/BTC-USD/orders").body["asks"]
            .as_array()
            .unwrap()
            .len()
            == 300
    });
    let snapshot_bytes = http
        .get("/api/v1/book/BTC-USD/orders")
        .body
        .to_string()
        .len()
        + 200;

    // Eight connections ask for snapshot after snapshot and read nothing.
    let churners: Vec<_> = (0..8)
        .map(|_| {
            let mut ws = ws_connect_small(&server);
            std::thread::spawn(move || {
                for i in 0..4_000 {
                    let op = if i % 2 == 0 {
                        "subscribe"
                    } else {
                        "unsubscribe"
                    };
                    let request = json!({"op": op, "ch": "orders.BTC-USD"}).to_string();
                    if ws.send(tungstenite::Message::text(request)).is_err() {
                        break; // cut off
                    }
                }
                ws // kept open: a closed socket would drop what the server has not read
            })
        })
        .collect();
    eventually("all eight cut off", || {
        metric(&http, "rialto_ws_slow_consumers_total") == 8
    });
    let _sockets: Vec<_> = churners.into_iter().map(|c| c.join().unwrap()).collect();
    // No connection's queue ever held more than its cap and one more message.
    let peak = metric(&http, "rialto_ws_queue_peak_bytes") as usize;
    assert!(
        peak <= cap + snapshot_bytes,
        "{peak} bytes queued, cap {cap} + {snapshot_bytes}"
    );
    server.shutdown().unwrap();
}

#[test]
fn failed_logins_are_throttled_per_address_and_per_user() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let here = Http::new(&server);
    let there = Http::from(&server, [127, 0, 0, 2]);
    let secret = server.credentials.user_secret(1);
    let good = Trader::new(&here, &server, 1);
    // Ten wrong signatures for user 1 from here: the burst (web.login_failures_burst).
    for _ in 0..10 {
        let a = here.signed("1", "guess", "GET", "/api/v1/balances", "");
        assert_eq!((a.status, error_code(&a)), (401, "bad_signature"));
    }
    // Now nothing from here is even looked at, not even the right secret, nor a WebSocket login.
    let refused = good.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!(
        (refused.status, error_code(&refused)),
        (429, "too_many_failures")
    );
    let mut ws = ws_connect(&server);
    let (ts, n) = (now_ms().to_string(), window().to_string());
    let login = ws_login_with(
        &mut ws,
        "x",
        "2",
        &server.credentials.user_secret(2),
        &ts,
        &n,
    );
    assert_eq!(login["error"]["code"], "too_many_failures", "{login}");

    // From a clean address user 1 still gets in: a guesser cannot lock a user out.
    let ok = there.signed("1", &secret, "GET", "/api/v1/balances", "");
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    // But once that address fails too, user 1 is refused from it, and user 2 is not.
    let wrong = there.signed("1", "guess", "GET", "/api/v1/balances", "");
    assert_eq!(error_code(&wrong), "bad_signature");
    let user1 = there.signed("1", &secret, "GET", "/api/v1/balances", "");
    assert_eq!(
        (user1.status, error_code(&user1)),
        (429, "too_many_failures")
    );
    let user2 = there.signed(
        "2",
        &server.credentials.user_secret(2),
        "GET",
        "/api/v1/balances",
        "",
    );
    assert_eq!(user2.status, 200, "{:?}", user2.body);
    server.shutdown().unwrap();
}

// ----- amend and the order-id window (docs/api.md) ---------------------------------------------

#[test]
fn traders_amend_over_rest_and_websocket_and_hear_it_on_the_user_channel() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    let mut ws = ws_connect(&server);
    ws_login(&mut ws, &server, 1);
    let subscribed = ws_call(&mut ws, json!({"id": "u", "op": "subscribe", "ch": "user"}));
    assert_eq!(subscribed["result"]["subscribed"], "user", "{subscribed}");

    let sell = seller.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "order": 21, "side": "sell", "price": 600_000, "qty": 5}),
    );
    assert_eq!(sell.status, 200, "{:?}", sell.body);
    // REST: PATCH the order: a smaller total at the same price keeps its place.
    let amended = seller.call("PATCH", "/api/v1/orders/21", json!({"qty": 3}));
    assert_eq!(amended.status, 200, "{:?}", amended.body);
    assert_eq!(amended.body["status"], "accepted");
    let event = ws_until(&mut ws, "the amended event", |v| v["type"] == "amended");
    assert_eq!(
        (
            &event["ch"],
            &event["order"],
            &event["symbol"],
            &event["price"],
            &event["remaining"],
            &event["priority"],
            &event["stop_price"]
        ),
        (
            &json!("user"),
            &json!(21),
            &json!("BTC-USD"),
            &json!(600_000),
            &json!(3),
            &json!("kept"),
            &json!(0)
        )
    );
    assert_eq!(event["seq"], amended.body["seq"]);
    eventually("the smaller ask", || {
        book(&http)["asks"] == json!([[600_000, 3]])
    });
    // WebSocket: the amend op, a new price: priority lost.
    // The op's answer and the user channel's event come on the same socket, in either order.
    ws_send(
        &mut ws,
        json!({"id": 5, "op": "amend", "order": 21, "price": 600_100}),
    );
    let (mut answer, mut event) = (Value::Null, Value::Null);
    while answer.is_null() || event.is_null() {
        let v = ws_until(&mut ws, "the amend's answer and its event", |v| {
            v["id"] == 5 || (v["type"] == "amended" && v["price"] == 600_100)
        });
        if v["id"] == 5 {
            answer = v;
        } else {
            event = v;
        }
    }
    assert_eq!(answer["result"]["status"], "accepted", "{answer}");
    assert_eq!(event["priority"], "lost");
    eventually("the moved ask", || {
        book(&http)["asks"] == json!([[600_100, 3]])
    });
    // Refusals: the engine's reason, the order untouched.
    let none = seller.call("PATCH", "/api/v1/orders/21", json!({}));
    assert_eq!((none.status, error_code(&none)), (400, "invalid_order"));
    let unknown = seller.call("PATCH", "/api/v1/orders/99", json!({"qty": 1}));
    assert_eq!(error_code(&unknown), "unknown_order");
    let junk = seller.call("PATCH", "/api/v1/orders/21", json!({"qty": 1, "size": 2}));
    assert_eq!((junk.status, error_code(&junk)), (400, "malformed_json"));
    let answer = ws_call(
        &mut ws,
        json!({"id": 6, "op": "amend", "order": 21, "price": 0}),
    );
    assert_eq!(answer["error"]["code"], "invalid_price", "{answer}");
    let open = seller.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(
        open.body,
        json!([{"symbol": "BTC-USD", "order": 21, "side": "sell", "type": "limit", "tif": "gtc",
            "price": 600_100, "stop_price": 0, "pending": false, "remaining": 3, "shown": 3,
            "filled": 0, "expire_ts": 0}])
    );
    // The history has it too.
    let h = seller
        .call("GET", "/api/v1/orders/history", Value::Null)
        .body;
    assert!(
        h.as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "amended" && e["priority"] == "kept"),
        "{h}"
    );
    server.shutdown().unwrap();
}

#[test]
fn admins_read_and_set_the_order_id_window() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let admin = admin(&http, &server);
    let trader = Trader::new(&http, &server, 3);
    let settings = admin.call("GET", "/api/v1/admin/settings", Value::Null);
    assert_eq!(settings.status, 200, "{:?}", settings.body);
    assert_eq!(settings.body["order_id_window_ns"], 86_400_000_000_000_i64);
    let order = json!({"symbol": "BTC-USD", "order": 5, "side": "buy", "price": 1, "qty": 1});
    assert_eq!(
        trader.call("POST", "/api/v1/orders", order.clone()).status,
        200
    );
    assert_eq!(
        trader
            .call("DELETE", "/api/v1/orders/5", Value::Null)
            .status,
        200
    );
    let again = trader.call("POST", "/api/v1/orders", order.clone());
    assert_eq!(error_code(&again), "duplicate_order_id");

    let bad = admin.call(
        "POST",
        "/api/v1/admin/settings/order_id_window",
        json!({"window_ns": -1}),
    );
    assert_eq!(error_code(&bad), "invalid_qty");
    let refused = trader.call(
        "POST",
        "/api/v1/admin/settings/order_id_window",
        json!({"window_ns": 0}),
    );
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    let set = admin.call(
        "POST",
        "/api/v1/admin/settings/order_id_window",
        json!({"window_ns": 0}),
    );
    assert_eq!(set.status, 200, "{:?}", set.body);
    let settings = admin.call("GET", "/api/v1/admin/settings", Value::Null);
    assert_eq!(settings.body["order_id_window_ns"], 0);
    assert_eq!(settings.body["seq"], set.body["seq"]);
    assert_eq!(trader.call("POST", "/api/v1/orders", order).status, 200);
    server.shutdown().unwrap();
}

// ----- rulebook part 2 over REST and WebSocket -----------------------------------------------

/// Trading phases and the call auction (docs/rules.md).
#[test]
fn the_status_channel_and_endpoint_follow_the_phases() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let admin = admin(&http, &server);
    let status = http.get("/api/v1/status");
    assert_eq!(status.status, 200, "{:?}", status.body);
    assert_eq!(status.body["symbols"][0]["symbol"], "BTC-USD");
    assert_eq!(status.body["symbols"][0]["phase"], "continuous");
    let mut ws = ws_connect(&server);
    ws_send(&mut ws, json!({"id": 1, "op": "subscribe", "ch": "status"}));
    let snap = ws_until(&mut ws, "the status snapshot", |v| v["type"] == "snapshot");
    assert_eq!(snap["symbols"][1]["phase"], "continuous");
    let bad = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/phase",
        json!({"phase": "nap"}),
    );
    assert_eq!(error_code(&bad), "invalid_phase");
    let set = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/phase",
        json!({"phase": "auction"}),
    );
    assert_eq!(set.status, 200, "{:?}", set.body);
    let phase = ws_until(&mut ws, "the phase change", |v| v["type"] == "phase");
    assert_eq!(
        (&phase["symbol"], &phase["phase"]),
        (&json!("BTC-USD"), &json!("auction"))
    );
    assert_eq!(phase["seq"], set.body["seq"]);
    // Crossing orders rest in the auction; opening uncrosses them.
    let seller = Trader::new(&http, &server, 1);
    let buyer = Trader::new(&http, &server, 2);
    let sell = json!({"symbol": "BTC-USD", "side": "sell", "price": 500_000, "qty": 2});
    let buy = json!({"symbol": "BTC-USD", "side": "buy", "price": 500_100, "qty": 2});
    assert_eq!(seller.call("POST", "/api/v1/orders", sell).status, 200);
    assert_eq!(buyer.call("POST", "/api/v1/orders", buy).status, 200);
    let open = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/phase",
        json!({"phase": "continuous"}),
    );
    assert_eq!(open.status, 200, "{:?}", open.body);
    let auction = ws_until(&mut ws, "the auction result", |v| v["type"] == "auction");
    assert_eq!(
        (&auction["qty"], &auction["imbalance"]),
        (&json!(2), &json!(0))
    );
    let status = http.get("/api/v1/status");
    assert_eq!(status.body["symbols"][0]["phase"], "continuous");
    // A new band or reference price is announced with the symbol's band and reference.
    let band = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/band",
        json!({"band_bps": 500}),
    );
    assert_eq!(band.status, 200, "{:?}", band.body);
    let message = ws_until(&mut ws, "the band message", |v| v["type"] == "band");
    assert_eq!(
        (
            &message["symbol"],
            &message["band_bps"],
            &message["reference"],
            &message["seq"]
        ),
        (
            &json!("BTC-USD"),
            &json!(500),
            &auction["price"],
            &band.body["seq"]
        )
    );
    let reference = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/ref_price",
        json!({"price": 480_000}),
    );
    assert_eq!(reference.status, 200, "{:?}", reference.body);
    let message = ws_until(&mut ws, "the reference message", |v| {
        v["type"] == "band" && v["reference"] == 480_000
    });
    assert_eq!(
        (&message["band_bps"], &message["seq"]),
        (&json!(500), &reference.body["seq"])
    );
    // A refused one is not: the next band message is the next accepted change's.
    let refused = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/band",
        json!({"band_bps": -1}),
    );
    assert_eq!(error_code(&refused), "invalid_qty");
    let band = admin.call(
        "POST",
        "/api/v1/admin/symbols/BTC-USD/band",
        json!({"band_bps": 300}),
    );
    assert_eq!(band.status, 200, "{:?}", band.body);
    let message = ws_until(&mut ws, "the next band message", |v| v["type"] == "band");
    assert_eq!(
        (&message["band_bps"], &message["seq"]),
        (&json!(300), &band.body["seq"])
    );
    let status = http.get("/api/v1/status");
    assert_eq!(status.body["symbols"][0]["band_bps"], 300);
    server.shutdown().unwrap();
}

/// The public book through a call auction: the WebSocket book channel's snapshot and diffs
/// carry the phase, and after the uncross both sides of each trade are filled (the book is the
/// engine's); an iceberg shows only its slice, before and after.
#[test]
fn the_book_channel_carries_the_phase_and_the_uncross_fills_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let admin = admin(&http, &server);
    let phase = |p: &str| {
        let set = admin.call(
            "POST",
            "/api/v1/admin/symbols/BTC-USD/phase",
            json!({ "phase": p }),
        );
        assert_eq!(set.status, 200, "{:?}", set.body);
    };
    phase("auction");
    eventually("the book's phase", || book(&http)["phase"] == "auction");
    let mut ws = ws_connect(&server);
    ws_send(
        &mut ws,
        json!({"id": 1, "op": "subscribe", "ch": "book.BTC-USD"}),
    );
    let snap = ws_until(&mut ws, "the book snapshot", |v| v["type"] == "snapshot");
    assert_eq!(snap["phase"], "auction", "{snap}");
    ws_send(&mut ws, json!({"id": 2, "op": "subscribe", "ch": "status"}));
    ws_until(&mut ws, "the status snapshot", |v| {
        v["ch"] == "status" && v["type"] == "snapshot"
    });
    // Crossing orders rest: a buy of 5 @500_100 (an iceberg showing 2), sells of 3 @500_000
    // and 4 @500_100.
    let buyer = Trader::new(&http, &server, 2);
    let seller = Trader::new(&http, &server, 1);
    let place = |t: &Trader, body: Value| {
        let a = t.call("POST", "/api/v1/orders", body);
        assert_eq!(a.status, 200, "{:?}", a.body);
    };
    place(
        &buyer,
        json!({"symbol": "BTC-USD", "side": "buy", "price": 500_100, "qty": 5, "display_qty": 2}),
    );
    place(
        &seller,
        json!({"symbol": "BTC-USD", "side": "sell", "price": 500_000, "qty": 3}),
    );
    place(
        &seller,
        json!({"symbol": "BTC-USD", "side": "sell", "price": 500_100, "qty": 4}),
    );
    eventually("the crossed book", || {
        let b = book(&http);
        b["bids"] == json!([[500_100, 2]]) && b["asks"] == json!([[500_000, 3], [500_100, 4]])
    });
    phase("continuous");
    // The uncross: 5 lots at 500_100 (buy pressure), the buyer filled in full, 2 left of the
    // second sell.
    // The status channel and the book channel travel apart: either may come first.
    let (mut auction, mut diff) = (Value::Null, Value::Null);
    while auction.is_null() || diff.is_null() {
        let v = ws_until(
            &mut ws,
            "the auction result and the diff with the phase",
            |v| v["type"] == "auction" || (v["type"] == "diff" && v.get("phase").is_some()),
        );
        if v["type"] == "auction" {
            auction = v;
        } else {
            diff = v;
        }
    }
    assert_eq!(
        (&auction["price"], &auction["qty"], &auction["imbalance"]),
        (&json!(500_100), &json!(5), &json!(-2)),
        "{auction}"
    );
    assert_eq!(diff["phase"], "continuous", "{diff}");
    assert_eq!(
        (&diff["bids"], &diff["asks"]),
        (&json!([[500_100, 0]]), &json!([[500_000, 0], [500_100, 2]])),
        "{diff}"
    );
    let b = book(&http);
    assert_eq!(
        (&b["phase"], &b["bids"], &b["asks"]),
        (&json!("continuous"), &json!([]), &json!([[500_100, 2]]))
    );
    server.shutdown().unwrap();
}

/// Stop orders and GTD orders (docs/rules.md).
#[test]
fn stop_and_gtd_orders_over_rest() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let t = Trader::new(&http, &server, 1);
    let stop = t.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "buy",
        "type": "stop_limit", "price": 510_000, "stop_price": 505_000, "qty": 1}),
    );
    assert_eq!(stop.status, 200, "{:?}", stop.body);
    let far = 4_000_000_000_000_000_000_i64;
    let gtd = t.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "buy",
        "tif": "gtd", "expire_ts": far, "price": 1, "qty": 1}),
    );
    assert_eq!(gtd.status, 200, "{:?}", gtd.body);
    let iceberg = t.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "buy",
        "price": 2, "qty": 10, "display_qty": 1}),
    );
    assert_eq!(iceberg.status, 200, "{:?}", iceberg.body);
    // The GTD order rests in the public book, the iceberg shows its slice of 1 (its 9 hidden
    // lots nowhere); the pending stop is not in it.
    eventually(
        "the GTD order and the iceberg's slice in the book, the stop not",
        || {
            let bids = book(&http)["bids"].clone();
            let levels = bids.as_array().cloned().unwrap_or_default();
            levels.contains(&json!([1, 1]))
                && levels.contains(&json!([2, 1]))
                && !levels.iter().any(|l| l[0] == json!(510_000))
        },
    );
    server.shutdown().unwrap();
}

/// "My open orders" says what each order is: its type and time in force, a pending stop as
/// pending with its stop price, an iceberg's shown slice, what has filled and when it expires;
/// REST, the `user` channel's snapshot and the admin's view of the user agree.
#[test]
fn open_orders_carry_type_tif_stop_shown_filled_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let t = Trader::new(&http, &server, 1);
    let buyer = Trader::new(&http, &server, 2);
    let far = 4_000_000_000_000_000_000_i64;
    for body in [
        // Above the trades below (at 600_000), so it stays pending.
        json!({"symbol": "BTC-USD", "order": 31, "side": "buy", "type": "stop_limit",
            "price": 710_000, "stop_price": 700_000, "qty": 1}),
        json!({"symbol": "BTC-USD", "order": 32, "side": "buy", "tif": "gtd",
            "expire_ts": far, "price": 1, "qty": 1}),
        json!({"symbol": "BTC-USD", "order": 33, "side": "buy", "tif": "day", "price": 3, "qty": 1}),
        json!({"symbol": "BTC-USD", "order": 34, "side": "sell", "price": 600_000, "qty": 10,
            "display_qty": 2}),
    ] {
        let placed = t.call("POST", "/api/v1/orders", body);
        assert_eq!(placed.status, 200, "{:?}", placed.body);
    }
    // 3 lots off the iceberg: its first slice of 2, then 1 of the next.
    let take = json!({"symbol": "BTC-USD", "side": "buy", "price": 600_000, "qty": 3});
    assert_eq!(buyer.call("POST", "/api/v1/orders", take).status, 200);

    let open = t.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(open.status, 200, "{:?}", open.body);
    let orders = open.body.as_array().unwrap().clone();
    let by_id = |id: i64| {
        orders
            .iter()
            .find(|o| o["order"] == id)
            .unwrap_or_else(|| panic!("order {id} not in {orders:?}"))
            .clone()
    };
    let fields = |o: &Value| {
        [
            "type",
            "tif",
            "price",
            "stop_price",
            "pending",
            "remaining",
            "shown",
            "filled",
        ]
        .map(|k| o[k].clone())
    };
    assert_eq!(
        fields(&by_id(31)),
        [
            json!("stop_limit"),
            json!("gtc"),
            json!(710_000),
            json!(700_000),
            json!(true),
            json!(1),
            json!(0),
            json!(0)
        ]
    );
    assert_eq!(by_id(31)["expire_ts"], 0);
    assert_eq!(
        fields(&by_id(32)),
        [
            json!("limit"),
            json!("gtd"),
            json!(1),
            json!(0),
            json!(false),
            json!(1),
            json!(1),
            json!(0)
        ]
    );
    assert_eq!(by_id(32)["expire_ts"], far);
    // A DAY order expires at the next day end: after now, at most a day away.
    let day = by_id(33);
    assert_eq!(
        (&day["tif"], &day["type"]),
        (&json!("day"), &json!("limit"))
    );
    let now = http.get("/api/v1/time").body["ts_ns"].as_i64().unwrap();
    let expiry = day["expire_ts"].as_i64().unwrap();
    assert!(expiry > now && expiry <= now + 86_400_000_000_000, "{day}");
    assert_eq!(
        fields(&by_id(34)),
        [
            json!("limit"),
            json!("gtc"),
            json!(600_000),
            json!(0),
            json!(false),
            json!(7),
            json!(1),
            json!(3)
        ]
    );

    // The `user` channel's snapshot of open orders is the same list.
    let mut ws = ws_connect(&server);
    ws_login(&mut ws, &server, 1);
    ws_send(&mut ws, json!({"id": "u", "op": "subscribe", "ch": "user"}));
    let snapshot = ws_until(&mut ws, "the open orders", |v| v["type"] == "orders");
    assert_eq!(snapshot["orders"], open.body);
    // So is the admin's view of the user.
    let admin = admin(&http, &server);
    let detail = admin.call("GET", "/api/v1/admin/balances/1", Value::Null);
    assert_eq!(detail.body["orders"], open.body);
    server.shutdown().unwrap();
}

/// The demo venue's symbols have a 10% band: once BTC-USD has traded, a price more than 10%
/// from that trade is refused, one inside is accepted.
#[test]
fn the_demo_symbols_refuse_prices_outside_their_band() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let status = http.get("/api/v1/status");
    assert_eq!(
        status.body["symbols"][0]["band_bps"], 1_000,
        "{:?}",
        status.body
    );
    let seller = Trader::new(&http, &server, 1);
    let buyer = Trader::new(&http, &server, 2);
    // Before any trade there is no reference: even a far price is accepted.
    let far = json!({"symbol": "BTC-USD", "side": "sell", "price": 900_000_000, "qty": 1});
    assert_eq!(seller.call("POST", "/api/v1/orders", far).status, 200);
    let sell = json!({"symbol": "BTC-USD", "side": "sell", "price": 500_000, "qty": 1});
    let buy = json!({"symbol": "BTC-USD", "side": "buy", "price": 500_000, "qty": 1});
    assert_eq!(seller.call("POST", "/api/v1/orders", sell).status, 200);
    assert_eq!(buyer.call("POST", "/api/v1/orders", buy).status, 200);
    // The trade at 500,000 is the reference: the band is [450,000, 550,000].
    let outside = json!({"symbol": "BTC-USD", "side": "buy", "price": 550_001, "qty": 1});
    let refused = buyer.call("POST", "/api/v1/orders", outside);
    assert_eq!(
        error_code(&refused),
        "price_out_of_band",
        "{:?}",
        refused.body
    );
    let inside = json!({"symbol": "BTC-USD", "side": "buy", "price": 550_000, "qty": 1});
    assert_eq!(buyer.call("POST", "/api/v1/orders", inside).status, 200);
}

// ----- decimal strings (the default units) ------------------------------------------------------

/// A trader's signed call in the default units.
fn call_decimal(t: &Trader, method: &str, target: &str, body: Value) -> Answer {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    t.http
        .signed_as_is(&t.key, &t.secret, method, target, &body)
}

#[test]
fn prices_quantities_balances_and_times_are_decimal_strings_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let (seller, buyer) = (
        Trader::new(&http, &server, 1),
        Trader::new(&http, &server, 2),
    );

    // The demo symbols: a tick of 0.01, a lot of 0.001 BTC (1,000 minor units), one tick of
    // one lot is one USD minor unit, so USD has 5 decimals and BTC 6.
    let info = http.get_decimal("/api/v1/exchange-info");
    assert_eq!(info.status, 200, "{:?}", info.body);
    let btc = &info.body["symbols"][0];
    assert_eq!(
        (&btc["symbol"], &btc["price_tick"], &btc["qty_lot"]),
        (&json!("BTC-USD"), &json!("0.01"), &json!("0.001"))
    );
    assert_eq!(
        (&btc["price_decimals"], &btc["qty_decimals"]),
        (&json!(2), &json!(3))
    );
    assert_eq!(
        (&btc["band_bps"], &btc["phase"]),
        (&json!(1000), &json!("continuous"))
    );
    assert_eq!(btc["taker_fee"], "0.00001", "a quote minor unit per lot");
    assert_eq!(btc["limits"]["min_qty"], "0.001");
    let currencies = &info.body["currencies"];
    let decimals = |name: &str| {
        currencies
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["currency"] == name)
            .unwrap()["decimals"]
            .clone()
    };
    assert_eq!((decimals("USD"), decimals("BTC")), (json!(5), json!(6)));

    // Orders in decimals; off the tick or lot, or a JSON number, is refused and says why.
    let off_tick = call_decimal(
        &seller,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "sell", "price": "65000.505", "qty": "0.002"}),
    );
    assert_eq!(
        (off_tick.status, error_code(&off_tick)),
        (400, "invalid_price")
    );
    let message = off_tick.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("tick 0.01"), "{message}");
    let off_lot = call_decimal(
        &seller,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "sell", "price": "65000.50", "qty": "0.0025"}),
    );
    assert_eq!((off_lot.status, error_code(&off_lot)), (400, "invalid_qty"));
    let number = call_decimal(
        &seller,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "sell", "price": 6500050, "qty": "0.002"}),
    );
    assert_eq!(
        (number.status, error_code(&number)),
        (400, "malformed_json")
    );
    assert_eq!(
        balance(&seller, "BTC"),
        (1_000_000_000_000, 0),
        "nothing was held"
    );

    let placed = call_decimal(
        &seller,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "sell", "price": "65000.50", "qty": "0.002"}),
    );
    assert_eq!(placed.status, 200, "{:?}", placed.body);
    assert!(placed.body["ts_ns"].is_string(), "{:?}", placed.body);
    let ts_ns: i64 = placed.body["ts_ns"].as_str().unwrap().parse().unwrap();
    assert_eq!(placed.body["ts"], ts_ns / 1_000_000);
    let open = call_decimal(&seller, "GET", "/api/v1/orders", Value::Null);
    assert_eq!(
        (
            &open.body[0]["price"],
            &open.body[0]["remaining"],
            &open.body[0]["expire_ts"]
        ),
        (&json!("65000.50"), &json!("0.002"), &json!("0"))
    );
    eventually("the ask in decimals", || {
        http.get_decimal("/api/v1/book/BTC-USD").body["asks"] == json!([["65000.50", "0.002"]])
    });
    // The same book in the engine's integers, when asked.
    assert_eq!(
        http.get_decimal("/api/v1/book/BTC-USD?units=int").body["asks"],
        json!([[6500050, 2]])
    );

    let taken = call_decimal(
        &buyer,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "side": "buy", "type": "market", "qty": "0.001"}),
    );
    assert_eq!(taken.status, 200, "{:?}", taken.body);
    eventually("the trade in decimals", || {
        http.get_decimal("/api/v1/trades/BTC-USD").body[0]["price"] == "65000.50"
    });
    let trade = &http.get_decimal("/api/v1/trades/BTC-USD").body[0];
    assert_eq!(trade["qty"], "0.001");
    assert!(
        trade["ts_ns"].is_string() && trade["ts"].is_i64(),
        "{trade}"
    );
    // Balances in each currency's decimals: the buyer paid 65.00050 USD and a taker fee of
    // 0.00001, and got 0.001 BTC.
    let balances = call_decimal(&buyer, "GET", "/api/v1/balances", Value::Null).body;
    let row = |c: &str| {
        balances
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["currency"] == c)
            .cloned()
    };
    assert_eq!(row("USD").unwrap()["available"], "9999934.99949");
    assert_eq!(row("BTC").unwrap()["available"], "1000000.001000");
    assert_eq!(row("BTC").unwrap()["held"], "0.000000");
    let bad_units = http.get_decimal("/api/v1/time?units=cents");
    assert_eq!(
        (bad_units.status, error_code(&bad_units)),
        (400, "bad_request")
    );
    server.shutdown().unwrap();
}

#[test]
fn websocket_speaks_decimal_strings_unless_the_connection_asks_for_integers() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let url = format!("ws://{}/ws", server.web_addr.unwrap());
    let (mut ws, _) = tungstenite::connect(url).unwrap();
    let mut ints = ws_connect(&server);
    for socket in [&mut ws, &mut ints] {
        let answer = ws_call(
            socket,
            json!({"id": 1, "op": "subscribe", "ch": "book.BTC-USD"}),
        );
        assert_eq!(answer["result"]["subscribed"], "book.BTC-USD", "{answer}");
    }
    ws_login(&mut ws, &server, 1);
    // The answer and the diff may come in either order.
    ws_send(
        &mut ws,
        json!({"id": 2, "op": "place", "symbol": "BTC-USD", "order": 77,
        "side": "buy", "price": "64999.99", "qty": "0.010"}),
    );
    let diff = ws_until(&mut ws, "a decimal diff", |v| v["type"] == "diff");
    assert_eq!(diff["bids"], json!([["64999.99", "0.010"]]), "{diff}");
    assert!(diff["ts_ns"].is_string() && diff["ts"].is_i64(), "{diff}");
    let diff = ws_until(&mut ints, "an integer diff", |v| v["type"] == "diff");
    assert_eq!(diff["bids"], json!([[6499999, 10]]), "{diff}");
    let refused = ws_call(
        &mut ws,
        json!({"id": 3, "op": "place", "symbol": "BTC-USD",
        "side": "buy", "price": "64999.991", "qty": "0.010"}),
    );
    assert_eq!(refused["error"]["code"], "invalid_price", "{refused}");
    // A move in decimals reads the order's own symbol's tick.
    // Its answer and the diff may come in either order.
    ws_send(
        &mut ws,
        json!({"id": 4, "op": "move", "order": 77, "price": "64999.50"}),
    );
    let (mut moved, mut diff) = (Value::Null, Value::Null);
    while moved.is_null() || diff.is_null() {
        let v = ws_until(&mut ws, "the move's answer and diff", |v| {
            v["id"] == 4 || (v["type"] == "diff" && v["bids"].to_string().contains("64999.50"))
        });
        match v["id"] == 4 {
            true => moved = v,
            false => diff = v,
        }
    }
    assert_eq!(moved["result"]["status"], "accepted", "{moved}");
    assert!(
        diff["bids"].to_string().contains(r#"["64999.99","0.000"]"#),
        "{diff}"
    );
    server.shutdown().unwrap();
}

// ----- client order ids and safe retries -------------------------------------------------------

#[test]
fn a_client_order_id_sent_twice_trades_once_and_the_resend_carries_the_first_orders_status() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    let rests = call_decimal(
        &seller,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD", "order": 5, "side": "sell", "price": "65000.00", "qty": "0.005"}),
    );
    assert_eq!(rests.body["status"], "new", "{:?}", rests.body);
    let seller_left = |server: &RunningServer| {
        let http = Http::new(server);
        let seller = Trader::new(&http, server, 1);
        call_decimal(&seller, "GET", "/api/v1/orders", Value::Null).body[0]["remaining"].clone()
    };

    let buyer = Trader::new(&http, &server, 2);
    let ioc = json!({"symbol": "BTC-USD", "client_order_id": "retry-1", "side": "buy",
        "tif": "ioc", "price": "65000.00", "qty": "0.002"});
    let first = call_decimal(&buyer, "POST", "/api/v1/orders", ioc.clone());
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(
        (
            &first.body["status"],
            &first.body["filled"],
            &first.body["client_order_id"]
        ),
        (&json!("filled"), &json!("0.002"), &json!("retry-1"))
    );
    assert_eq!(
        first.body["fills"][0]["price"], "65000.00",
        "{:?}",
        first.body
    );
    // The resend (a client that timed out and retried) is refused and told what happened.
    let again = call_decimal(&buyer, "POST", "/api/v1/orders", ioc.clone());
    assert_eq!(
        (again.status, error_code(&again)),
        (400, "duplicate_order_id")
    );
    let original = &again.body["error"]["order"];
    assert_eq!(
        (&original["order"], &original["status"], &original["filled"]),
        (&first.body["order"], &json!("filled"), &json!("0.002")),
        "{:?}",
        again.body
    );
    assert_eq!(original["fills"].as_array().map(Vec::len), Some(1));
    assert_eq!(seller_left(&server), "0.003", "the resend did not trade");

    // One order by either id.
    let by_cid = call_decimal(
        &buyer,
        "GET",
        "/api/v1/orders/by-client-id/retry-1",
        Value::Null,
    );
    assert_eq!(by_cid.status, 200, "{:?}", by_cid.body);
    assert_eq!(
        (
            &by_cid.body["original_qty"],
            &by_cid.body["remaining"],
            &by_cid.body["side"]
        ),
        (&json!("0.002"), &json!("0.000"), &json!("buy"))
    );
    let id = first.body["order"].as_i64().unwrap();
    let by_id = call_decimal(&buyer, "GET", &format!("/api/v1/orders/{id}"), Value::Null);
    assert_eq!(by_id.body["client_order_id"], "retry-1", "{:?}", by_id.body);
    assert_eq!(by_id.body["status"], "filled");
    let nobody = call_decimal(
        &buyer,
        "GET",
        "/api/v1/orders/by-client-id/never",
        Value::Null,
    );
    assert_eq!((nobody.status, error_code(&nobody)), (404, "not_found"));
    let bad = call_decimal(
        &buyer,
        "GET",
        "/api/v1/orders/by-client-id/not%20valid",
        Value::Null,
    );
    assert_eq!((bad.status, error_code(&bad)), (400, "bad_request"));
    let long = json!({"symbol": "BTC-USD", "client_order_id": "x".repeat(37), "side": "buy",
        "price": "1.00", "qty": "0.001"});
    let long = call_decimal(&buyer, "POST", "/api/v1/orders", long);
    assert_eq!((long.status, error_code(&long)), (400, "malformed_json"));

    // A fill-or-kill that cannot fill is killed, and says so.
    let fok = call_decimal(
        &buyer,
        "POST",
        "/api/v1/orders",
        json!({"symbol": "BTC-USD",
        "client_order_id": "fok-1", "side": "buy", "tif": "fok", "price": "65000.00", "qty": "1.000"}),
    );
    assert_eq!(
        (&fok.body["status"], &fok.body["filled"]),
        (&json!("killed"), &json!("0.000"))
    );
    // A resting order with a client id, then a restart.
    let resting = json!({"symbol": "BTC-USD", "client_order_id": "rest-1", "side": "buy",
        "price": "64000.00", "qty": "0.001"});
    let rested = call_decimal(&buyer, "POST", "/api/v1/orders", resting.clone());
    assert_eq!(rested.body["status"], "new", "{:?}", rested.body);
    server.shutdown().unwrap();

    server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let buyer = Trader::new(&http, &server, 2);
    let after = call_decimal(&buyer, "POST", "/api/v1/orders", ioc);
    assert_eq!(
        (after.status, error_code(&after)),
        (400, "duplicate_order_id")
    );
    // The order ended before the restart: its status comes from the history database.
    let original = &after.body["error"]["order"];
    assert_eq!(
        (
            &original["order"],
            &original["status"],
            &original["filled"],
            &original["original_qty"],
            &original["tif"],
            &original["price"],
        ),
        (
            &json!(id),
            &json!("filled"),
            &json!("0.002"),
            &json!("0.002"),
            &json!("ioc"),
            &json!("65000.00")
        ),
        "{:?}",
        after.body
    );
    assert_eq!(original["fills"][0]["qty"], "0.002", "{:?}", after.body);
    assert_eq!(
        seller_left(&server),
        "0.003",
        "the resend after the restart did not trade"
    );
    let killed = call_decimal(
        &buyer,
        "GET",
        "/api/v1/orders/by-client-id/fok-1",
        Value::Null,
    );
    assert_eq!(
        (
            &killed.body["status"],
            &killed.body["filled"],
            &killed.body["side"]
        ),
        (&json!("killed"), &json!("0.000"), &json!("buy")),
        "{:?}",
        killed.body
    );
    // A live order's status comes from the engine, so it survives the restart.
    let again = call_decimal(&buyer, "POST", "/api/v1/orders", resting);
    assert_eq!(
        (again.status, error_code(&again)),
        (400, "duplicate_order_id")
    );
    let original = &again.body["error"]["order"];
    assert_eq!(
        (
            &original["status"],
            &original["remaining"],
            &original["price"]
        ),
        (&json!("new"), &json!("0.001"), &json!("64000.00")),
        "{:?}",
        again.body
    );
    server.shutdown().unwrap();
}

#[test]
fn websocket_orders_carry_client_order_ids_and_a_resend_is_answered_with_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let url = format!("ws://{}/ws", server.web_addr.unwrap());
    let (mut ws, _) = tungstenite::connect(url).unwrap();
    ws_login(&mut ws, &server, 1);
    let order = json!({"id": 1, "op": "place", "symbol": "BTC-USD", "client_order_id": "ws-1",
        "side": "sell", "price": "70000.00", "qty": "0.004"});
    let placed = ws_call(&mut ws, order.clone());
    assert_eq!(placed["result"]["status"], "new", "{placed}");
    let again = ws_call(&mut ws, order);
    assert_eq!(again["error"]["code"], "duplicate_order_id", "{again}");
    assert_eq!(again["error"]["order"]["status"], "new", "{again}");
    assert_eq!(again["error"]["order"]["remaining"], "0.004", "{again}");
    let status = ws_call(
        &mut ws,
        json!({"id": 2, "op": "order_status", "client_order_id": "ws-1"}),
    );
    assert_eq!(
        status["result"]["order"], placed["result"]["order"],
        "{status}"
    );
    assert_eq!(status["result"]["original_qty"], "0.004", "{status}");
    let unknown = ws_call(
        &mut ws,
        json!({"id": 3, "op": "order_status", "order": 12345}),
    );
    assert_eq!(unknown["error"]["code"], "not_found", "{unknown}");
    // Amend and cancel by the client's id.
    let amended = ws_call(
        &mut ws,
        json!({"id": 4, "op": "amend", "client_order_id": "ws-1", "qty": "0.003"}),
    );
    assert_eq!(amended["result"]["status"], "accepted", "{amended}");
    let cancelled = ws_call(
        &mut ws,
        json!({"id": 5, "op": "cancel", "client_order_id": "ws-1"}),
    );
    assert_eq!(cancelled["result"]["status"], "accepted", "{cancelled}");
    let status = ws_call(
        &mut ws,
        json!({"id": 6, "op": "order_status", "client_order_id": "ws-1"}),
    );
    assert_eq!(
        (&status["result"]["status"], &status["result"]["remaining"]),
        (&json!("cancelled"), &json!("0.000")),
        "{status}"
    );
    let bad = ws_call(
        &mut ws,
        json!({"id": 7, "op": "cancel", "client_order_id": "not valid"}),
    );
    assert_eq!(bad["error"]["code"], "bad_request", "{bad}");
    server.shutdown().unwrap();
}

#[test]
fn rest_amends_and_cancels_an_order_by_its_client_order_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    let order = json!({"symbol": "BTC-USD", "client_order_id": "mine-1", "side": "sell",
        "price": "70000.00", "qty": "0.004"});
    let placed = call_decimal(&seller, "POST", "/api/v1/orders", order);
    assert_eq!(placed.body["status"], "new", "{:?}", placed.body);
    let path = "/api/v1/orders/by-client-id/mine-1";
    let amended = call_decimal(&seller, "PATCH", path, json!({"price": "71000.00"}));
    assert_eq!(amended.status, 200, "{:?}", amended.body);
    let now = call_decimal(&seller, "GET", path, Value::Null);
    assert_eq!(
        (&now.body["price"], &now.body["status"]),
        (&json!("71000.00"), &json!("new")),
        "{:?}",
        now.body
    );
    let cancelled = call_decimal(&seller, "DELETE", path, Value::Null);
    assert_eq!(cancelled.status, 200, "{:?}", cancelled.body);
    let now = call_decimal(&seller, "GET", path, Value::Null);
    assert_eq!(now.body["status"], "cancelled", "{:?}", now.body);
    let open = call_decimal(&seller, "GET", "/api/v1/orders", Value::Null);
    assert_eq!(open.body, json!([]), "nothing left open");
    // Another user's client id names another order: theirs is untouched by ours.
    let buyer = Trader::new(&http, &server, 2);
    let theirs = call_decimal(&buyer, "DELETE", path, Value::Null);
    assert_eq!((theirs.status, error_code(&theirs)), (400, "unknown_order"));
    server.shutdown().unwrap();
}

// ----- the small things ------------------------------------------------------------------------

/// A GET's status line and headers, lowercased.
fn head_of(server: &RunningServer, target: &str) -> String {
    let mut s = TcpStream::connect(server.web_addr.unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_ascii_lowercase();
    text.split_once("\r\n\r\n")
        .map_or(text.clone(), |(h, _)| h.to_string())
}

#[test]
fn wrong_methods_and_unknown_query_parameters_are_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let put = http.raw("PUT", "/api/v1/time", &[], b"");
    assert_eq!((put.status, error_code(&put)), (405, "method_not_allowed"));
    // `levels` is no parameter of the book (it reads `depth`): refused, not ignored.
    let unknown = http.get_decimal("/api/v1/book/BTC-USD?levels=5");
    assert_eq!((unknown.status, error_code(&unknown)), (400, "bad_request"));
    let message = unknown.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("levels") && message.contains("depth"),
        "{message}"
    );
    // Candles read `interval` (and refuse a value they do not know).
    let interval = http.get_decimal("/api/v1/candles/BTC-USD?interval=7m");
    assert_eq!(
        (interval.status, error_code(&interval)),
        (400, "bad_request")
    );
    let twice = http.get_decimal("/api/v1/book/BTC-USD?depth=1&depth=2");
    assert_eq!((twice.status, error_code(&twice)), (400, "bad_request"));
    assert_eq!(
        http.get_decimal("/api/v1/book/BTC-USD?depth=1&units=int")
            .status,
        200
    );
    let trader = Trader::new(&http, &server, 1);
    let unknown = call_decimal(&trader, "GET", "/api/v1/balances?currency=USD", Value::Null);
    assert_eq!((unknown.status, error_code(&unknown)), (400, "bad_request"));
    server.shutdown().unwrap();
}

#[test]
fn a_rate_limited_answer_says_when_to_retry_and_every_answer_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 1;
        c.web.burst = 2;
    });
    let first = head_of(&server, "/api/v1/time");
    assert!(first.starts_with("http/1.1 200"), "{first}");
    assert!(first.contains("x-ratelimit-limit: 1"), "{first}");
    assert!(first.contains("x-ratelimit-remaining: 1"), "{first}");
    let _ = head_of(&server, "/api/v1/time");
    let refused = head_of(&server, "/api/v1/time");
    assert!(refused.starts_with("http/1.1 429"), "{refused}");
    assert!(refused.contains("retry-after: 1"), "{refused}");
    assert!(refused.contains("x-ratelimit-remaining: 0"), "{refused}");
    server.shutdown().unwrap();
}

// ----- futures --------------------------------------------------------------------------------

/// The user's positions over REST (engine integers).
fn positions(t: &Trader) -> Value {
    let p = t.call("GET", "/api/v1/positions", Value::Null);
    assert_eq!(p.status, 200, "{:?}", p.body);
    p.body
}

/// docs/rules.md's example F3 over REST and WebSocket: a user buys a future, the operator
/// moves its mark, the user is liquidated, hears it on its private channel and holds nothing
/// after; the fund pays the shortfall and the venue report shows it.
#[test]
fn a_future_traded_over_rest_is_liquidated_when_the_admin_moves_its_mark() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let http = Http::new(&server);
    let admin = admin(&http, &server);
    let future = json!({"symbol": "IDX-PERP", "base": "IDX", "quote": "USD", "base_scale": 1,
        "quote_scale": 1, "maker_fee": 0, "taker_fee": 0, "type": "future",
        "initial_margin": 100, "maintenance_margin": 50, "mark_price": 1000});
    // Bad futures are refused and add nothing.
    let mut no_mark = future.clone();
    no_mark.as_object_mut().unwrap().remove("mark_price");
    let refused = admin.call("POST", "/api/v1/admin/symbols", no_mark);
    assert_eq!((refused.status, error_code(&refused)), (400, "bad_request"));
    let mut margins_on_spot = future.clone();
    margins_on_spot["type"] = json!("spot");
    let refused = admin.call("POST", "/api/v1/admin/symbols", margins_on_spot);
    assert_eq!((refused.status, error_code(&refused)), (400, "bad_request"));
    let mut option = future.clone();
    option["type"] = json!("option");
    let refused = admin.call("POST", "/api/v1/admin/symbols", option);
    assert_eq!(error_code(&refused), "invalid_symbol");
    let mut loose = future.clone();
    loose["maintenance_margin"] = json!(101);
    let refused = admin.call("POST", "/api/v1/admin/symbols", loose);
    assert_eq!(error_code(&refused), "invalid_symbol");
    let added = admin.call("POST", "/api/v1/admin/symbols", future);
    assert_eq!(added.status, 200, "{:?}", added.body);
    eventually("the future in exchange-info", || {
        let info = http.get("/api/v1/exchange-info").body;
        info["symbols"].as_array().unwrap().iter().any(|s| {
            s["symbol"] == "IDX-PERP"
                && s["type"] == "future"
                && s["initial_margin"] == 100
                && s["maintenance_margin"] == 50
                && s["mark"] == 1000
        })
    });
    let info = http.get("/api/v1/exchange-info").body;
    let spot = info["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["symbol"] == "BTC-USD");
    assert_eq!(spot.unwrap()["type"], "spot");
    assert!(spot.unwrap().get("mark").is_none());

    // User 42 has 200 USD; user 2 sells it 2 lots at 1000; user 3 bids 900 and 850.
    assert_eq!(
        admin
            .call("POST", "/api/v1/admin/users", json!({"user": 42}))
            .status,
        200
    );
    let deposit = admin.call(
        "POST",
        "/api/v1/admin/deposits",
        json!({"user": 42, "currency": "USD", "amount": 200, "tx": 4200}),
    );
    assert_eq!(deposit.status, 200, "{:?}", deposit.body);
    let user = Trader::new(&http, &server, 42);
    let mut ws = ws_connect(&server);
    ws_login(&mut ws, &server, 42);
    ws_send(&mut ws, json!({"id": "u", "op": "subscribe", "ch": "user"}));
    ws_until(&mut ws, "subscribed", |v| v["id"] == "u");
    let mut public = ws_connect(&server);
    ws_send(
        &mut public,
        json!({"id": "s", "op": "subscribe", "ch": "status"}),
    );
    ws_until(&mut public, "the status snapshot", |v| {
        v["type"] == "snapshot"
            && v["symbols"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["symbol"] == "IDX-PERP" && s["mark"] == 1000)
    });
    let order =
        |t: &Trader, id: i64, side: &str, price: i64, qty: i64| {
            let placed = t.call("POST", "/api/v1/orders",
            json!({"symbol": "IDX-PERP", "order": id, "side": side, "price": price, "qty": qty}));
            assert_eq!(placed.status, 200, "{:?}", placed.body);
        };
    order(&Trader::new(&http, &server, 2), 1, "sell", 1000, 2);
    // Above what 200 USD of margin carries: IM 200 + open loss 20.
    let too_big = user.call(
        "POST",
        "/api/v1/orders",
        json!({"symbol": "IDX-PERP", "order": 7, "side": "buy", "price": 1010, "qty": 2}),
    );
    assert_eq!(error_code(&too_big), "insufficient_margin");
    order(&user, 8, "buy", 1000, 2);
    let p = positions(&user);
    assert_eq!(p.as_array().unwrap().len(), 1, "{p}");
    let long = &p[0];
    assert_eq!(
        (long["symbol"].as_str(), long["side"].as_str()),
        (Some("IDX-PERP"), Some("long"))
    );
    assert_eq!(
        (long["size"].as_i64(), long["cost"].as_i64()),
        (Some(2), Some(2000))
    );
    assert_eq!(long["entry_price"], "1000");
    assert_eq!(
        (long["mark"].as_i64(), long["unrealised_pnl"].as_i64()),
        (Some(1000), Some(0))
    );
    // E = 200 + 2·M − 2000 < MM = 100 from M = 949 down.
    assert_eq!(long["liquidation_price"], 949);
    let margin = user.call("GET", "/api/v1/margin", Value::Null).body;
    assert_eq!(
        margin,
        json!([{"currency": "USD", "equity": 200, "initial": 200, "maintenance": 100, "available": 0}])
    );
    ws_until(&mut ws, "the position on the private channel", |v| {
        v["type"] == "positions" && v["positions"][0]["size"] == 2
    });
    let decimal = user
        .http
        .signed_as_is(&user.key, &user.secret, "GET", "/api/v1/positions", "");
    assert_eq!(decimal.body[0]["size"], "2", "{:?}", decimal.body);
    assert_eq!(decimal.body[0]["entry_price"], "1000");

    let bidder = Trader::new(&http, &server, 3);
    order(&bidder, 1, "buy", 900, 1);
    order(&bidder, 2, "buy", 850, 1);
    // The insurance fund (the demo's, then 1000 USD more): bad amounts refused.
    let demo_fund = rialto_server::demo::DEMO_INSURANCE;
    let fund = |amount: i64, tx: i64| {
        admin.call(
            "POST",
            "/api/v1/admin/insurance",
            json!({"currency": "USD", "amount": amount, "tx": tx}),
        )
    };
    assert_eq!(error_code(&fund(0, 4300)), "invalid_qty");
    assert_eq!(
        error_code(&fund(-demo_fund - 1, 4300)),
        "insufficient_funds"
    );
    assert_eq!(fund(1000, 4300).status, 200);
    assert_eq!(error_code(&fund(1000, 4300)), "duplicate_tx");
    // Bad marks change nothing.
    let mark = |symbol: &str, body: Value| {
        admin.call(
            "POST",
            &format!("/api/v1/admin/symbols/{symbol}/mark_price"),
            body,
        )
    };
    assert_eq!(
        error_code(&mark("IDX-PERP", json!({"price": 0}))),
        "invalid_price"
    );
    assert_eq!(
        error_code(&mark("BTC-USD", json!({"price": 1000}))),
        "invalid_symbol"
    );
    assert_eq!(mark("NOPE", json!({"price": 1000})).status, 404);
    assert_eq!(
        error_code(&mark("IDX-PERP", json!({"mark": 1000}))),
        "malformed_json"
    );
    let by_user = user.call(
        "POST",
        "/api/v1/admin/symbols/IDX-PERP/mark_price",
        json!({"price": 930}),
    );
    assert_eq!(by_user.status, 403);
    assert_eq!(positions(&user)[0]["size"], 2);

    let moved = mark("IDX-PERP", json!({"price": 930}));
    assert_eq!(moved.status, 200, "{:?}", moved.body);
    // The liquidation, and the position gone, on the private channel (in either order).
    let (mut liquidated, mut gone) = (Value::Null, false);
    while liquidated.is_null() || !gone {
        let v = ws_until(&mut ws, "the liquidation and the position gone", |v| {
            v["type"] == "liquidated" || (v["type"] == "positions" && v["positions"] == json!([]))
        });
        match v["type"].as_str() {
            Some("liquidated") => liquidated = v,
            _ => gone = true,
        }
    }
    assert_eq!(
        (
            &liquidated["currency"],
            &liquidated["equity"],
            &liquidated["maintenance"],
            &liquidated["shortfall"]
        ),
        (&json!("USD"), &json!(60), &json!(100), &json!(50)),
        "{liquidated}"
    );
    assert_eq!(positions(&user), json!([]));
    assert_eq!(balance(&user, "USD"), (0, 0));
    ws_until(&mut public, "the new mark", |v| {
        v["type"] == "mark" && v["symbol"] == "IDX-PERP" && v["mark"] == 930
    });
    let venue = admin.call("GET", "/api/v1/admin/venue", Value::Null);
    let usd = venue
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["currency"] == "USD")
        .unwrap()
        .clone();
    // The fund paid 50; user 2 is short 2 at 2000, user 3 long 2 at 1750.
    assert_eq!(
        (&usd["insurance"], &usd["position_cost"]),
        (&json!(demo_fund + 950), &json!(-250)),
        "{usd}"
    );
    let seen = admin
        .call("GET", "/api/v1/admin/balances/3", Value::Null)
        .body;
    assert_eq!(seen["positions"][0]["size"], 2, "{seen}");
    assert_eq!(seen["margins"][0]["currency"], "USD", "{seen}");
    server.shutdown().unwrap();
}

// ----- a web side that falls behind (docs/api.md "Gaps", docs/architecture.md) ----------------

#[test]
fn a_web_side_that_falls_behind_loses_user_messages_visibly_and_answers_nothing_stale() {
    use rialto_core::{Side, SymbolId};
    use rialto_wire::{NewOrder, ServerMsg};
    let dir = tempfile::tempdir().unwrap();
    // Room for one batch of user messages: a stalled web side overflows it at once.
    let server = common::start(dir.path(), |c| c.web.user_message_batches = 1);
    let http = Http::new(&server);
    let seller = Trader::new(&http, &server, 1);
    let mut ws = ws_connect(&server);
    ws_login(&mut ws, &server, 1);
    let subscribed = ws_call(&mut ws, json!({"id": "u", "op": "subscribe", "ch": "user"}));
    assert_eq!(subscribed["result"]["subscribed"], "user", "{subscribed}");
    let place = |order: i64, qty: i64| {
        let body = json!({"symbol": "BTC-USD", "order": order, "side": "sell",
            "price": 500_000, "qty": qty});
        let answer = seller.call("POST", "/api/v1/orders", body);
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    };
    // An order that ends while the web side is stalled, and one that stays on the book.
    place(42, 1);
    place(41, 1_000);
    assert_eq!(metric(&http, "rialto_web_user_messages_dropped"), 0);

    let mut buyer = common::trader(&server, 2);
    let stall = server.stall_web_user_messages();
    let mut bought = 0;
    // Trade, one round trip at a time (each a batch of its own or a few), until the gateway
    // has had to drop some: it never waits for the web side.
    while metric(&http, "rialto_web_user_messages_dropped") == 0 {
        assert!(bought < 500, "nothing dropped after {bought} trades");
        bought += 1;
        let order = NewOrder::limit(1_000 + bought, SymbolId(0), Side::Buy, 500_000, 1);
        buyer.place(order).unwrap();
        common::recv_until(&mut buyer, |m| matches!(m, ServerMsg::Trade { .. }));
    }
    drop(stall);

    // The seller's private stream says it lost messages, with the seq they reach.
    let gap = ws_until(&mut ws, "the gap", |v| v["type"] == "gap");
    assert_eq!(gap["ch"], "user", "{gap}");
    assert!(gap["lost"].as_i64().unwrap() >= 1, "{gap}");
    assert!(gap["seq"].as_u64().unwrap() > 0, "{gap}");
    // Order 41's status: quantities from the engine, and a record that says it misses events.
    let live = seller.call("GET", "/api/v1/orders/41", Value::Null);
    assert_eq!(live.status, 200, "{:?}", live.body);
    assert_eq!(live.body["status"], "partially_filled", "{:?}", live.body);
    assert_eq!(live.body["filled"], bought - 1, "{:?}", live.body);
    assert_eq!(
        live.body["remaining"],
        1_000 - (bought - 1),
        "{:?}",
        live.body
    );
    assert_eq!(live.body["incomplete"], true, "{:?}", live.body);
    // Order 42 ended during the stall: its record comes from the history database (or, if
    // that is more than a second behind on a loaded machine, the web side's, flagged
    // incomplete); either way its end and quantity are right.
    let ended = seller.call("GET", "/api/v1/orders/42", Value::Null);
    assert_eq!(ended.status, 200, "{:?}", ended.body);
    assert_eq!(
        (&ended.body["status"], &ended.body["filled"]),
        (&json!("filled"), &json!(1)),
        "{:?}",
        ended.body
    );
    // An order placed after the gap has a whole record again.
    place(43, 1);
    let after = seller.call("GET", "/api/v1/orders/43", Value::Null);
    assert_eq!(after.body["incomplete"], Value::Null, "{:?}", after.body);
    server.shutdown().unwrap();
}
