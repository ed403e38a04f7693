//! API keys over real sockets (docs/api.md, "Authentication" and "API keys"): issued keys with
//! permissions and IP allow-lists, revocation (REST and WebSocket), the timestamp and receive
//! window, replays, clocks that cannot lock anyone else out, and the key store on disk.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use rialto_server::RunningServer;
use rialto_server::web::auth::{now_ms, sign, signed_text};
use serde_json::{Value, json};

struct Answer {
    status: u16,
    head: String,
    body: Value,
}

impl Answer {
    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("<none>")
    }
}

/// A signing client of one key, connecting from `source` (127.0.0.1 unless set).
struct Key {
    addr: SocketAddr,
    source: Option<IpAddr>,
    key: String,
    secret: String,
}

/// Timestamps that rise in this process, as a client that may repeat a request in one ms signs.
static LAST_TS: AtomicI64 = AtomicI64::new(0);

fn fresh_ts() -> i64 {
    let now = now_ms();
    let previous = LAST_TS.fetch_max(now, Ordering::SeqCst);
    if previous < now {
        now
    } else {
        LAST_TS.fetch_add(1, Ordering::SeqCst) + 1
    }
}

impl Key {
    fn new(server: &RunningServer, key: &str, secret: &str) -> Key {
        Key {
            addr: server.web_addr.unwrap(),
            source: None,
            key: key.to_string(),
            secret: secret.to_string(),
        }
    }

    fn default_of(server: &RunningServer, user: i64) -> Key {
        Key::new(
            server,
            &user.to_string(),
            &server.credentials.user_secret(user),
        )
    }

    fn admin(server: &RunningServer) -> Key {
        Key::new(server, "admin", &server.admin_secret)
    }

    fn from(mut self, source: [u8; 4]) -> Key {
        self.source = Some(IpAddr::from(source));
        self
    }

    /// The credential headers of a request signed at `ts_ms` with `window` (None: no header).
    fn headers(
        &self,
        ts_ms: i64,
        window: Option<&str>,
        method: &str,
        target: &str,
        body: &str,
    ) -> Vec<(String, String)> {
        let ts = ts_ms.to_string();
        let text = signed_text(
            &self.key,
            &ts,
            window.unwrap_or(""),
            method,
            target,
            body.as_bytes(),
        );
        let mut headers = vec![
            ("Rialto-Key".to_string(), self.key.clone()),
            ("Rialto-Timestamp".to_string(), ts),
            ("Rialto-Signature".to_string(), sign(&self.secret, &text)),
        ];
        if let Some(window) = window {
            headers.push(("Rialto-Recv-Window".to_string(), window.to_string()));
        }
        headers
    }

    fn call(&self, method: &str, target: &str, body: Value) -> Answer {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let headers = self.headers(fresh_ts(), None, method, target, &body);
        self.raw(method, target, &headers, &body)
    }

    fn raw(&self, method: &str, target: &str, headers: &[(String, String)], body: &str) -> Answer {
        let mut s = match self.source {
            None => TcpStream::connect(self.addr).unwrap(),
            Some(source) => {
                let socket =
                    socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                        .unwrap();
                socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
                socket.connect(&self.addr.into()).unwrap();
                socket.into()
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut request = format!(
            "{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        s.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {text:?}"));
        let body = serde_json::from_str(rest).unwrap_or(Value::String(rest.to_string()));
        Answer {
            status,
            head: head.to_ascii_lowercase(),
            body,
        }
    }
}

/// Creates a key for `user` through the admin API; the client of it.
fn issue(server: &RunningServer, user: i64, terms: Value) -> Key {
    let mut body = terms;
    body["user"] = json!(user);
    let made = Key::admin(server).call("POST", "/api/v1/admin/keys", body);
    assert_eq!(made.status, 200, "{:?}", made.body);
    let (key, secret) = (
        made.body["key"].as_str().unwrap(),
        made.body["secret"].as_str().unwrap(),
    );
    Key::new(server, key, secret)
}

/// Orders are placed in the engine's integers (ticks and lots).
const ORDERS: &str = "/api/v1/orders?units=int";

fn sell_order(order: i64) -> Value {
    json!({"symbol": "BTC-USD", "order": order, "side": "sell", "price": 600_000, "qty": 1})
}

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn ws_connect(server: &RunningServer) -> Ws {
    let url = format!("ws://{}/ws", server.web_addr.unwrap());
    let (ws, _) = tungstenite::connect(url).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    ws
}

/// Sends a request and reads until its answer.
fn ws_call(ws: &mut Ws, request: Value) -> Value {
    let id = request["id"].clone();
    ws.send(tungstenite::Message::text(request.to_string()))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no answer to {request}");
        if let tungstenite::Message::Text(t) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
}

fn ws_login(ws: &mut Ws, key: &Key) -> Value {
    let ts = fresh_ts().to_string();
    let sig = sign(
        &key.secret,
        &signed_text(&key.key, &ts, "", "WS", "/ws", b""),
    );
    ws_call(
        ws,
        json!({"id": "login", "op": "login", "key": key.key, "ts": ts, "sig": sig}),
    )
}

#[test]
fn a_read_only_key_reads_but_cannot_trade_and_a_revoked_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let reader = issue(&server, 1, json!({"label": "watcher"}));
    let trader = issue(&server, 1, json!({"permissions": ["read", "trade"]}));
    assert!(
        reader.key.starts_with("rk") && reader.key.len() == 20,
        "{}",
        reader.key
    );

    // The read-only key reads, and is refused every order path.
    let balances = reader.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!(balances.status, 200, "{:?}", balances.body);
    let refused = reader.call("POST", ORDERS, sell_order(1));
    assert_eq!((refused.status, refused.code()), (403, "permission_denied"));
    let refused = reader.call("DELETE", "/api/v1/orders", Value::Null);
    assert_eq!((refused.status, refused.code()), (403, "permission_denied"));
    let placed = trader.call("POST", ORDERS, sell_order(2));
    assert_eq!(placed.status, 200, "{:?}", placed.body);
    let refused = reader.call("DELETE", "/api/v1/orders/2", Value::Null);
    assert_eq!((refused.status, refused.code()), (403, "permission_denied"));
    let open = reader.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(
        open.body.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        open.body
    );

    // Over the WebSocket too: the login works, order entry does not.
    let mut ws = ws_connect(&server);
    let login = ws_login(&mut ws, &reader);
    assert_eq!(login["result"]["user"], 1, "{login}");
    let mut order = sell_order(3);
    order["price"] = json!("6000.00");
    order["qty"] = json!("0.001");
    order["id"] = json!(1);
    order["op"] = json!("place");
    let answer = ws_call(&mut ws, order.clone());
    assert_eq!(answer["error"]["code"], "permission_denied", "{answer}");
    let status = ws_call(&mut ws, json!({"id": 2, "op": "order_status", "order": 2}));
    assert!(status["result"].is_object(), "reading is allowed: {status}");

    // Lists never show a secret; the user sees their own keys.
    let listed = Key::admin(&server).call("GET", "/api/v1/admin/keys?user=1", Value::Null);
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let listed = listed.body.as_array().unwrap().clone();
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|k| k.get("secret").is_none()),
        "{listed:?}"
    );
    assert_eq!(listed[0]["permissions"], json!(["read"]));
    assert_eq!(listed[1]["permissions"], json!(["read", "trade"]));
    let own = reader.call("GET", "/api/v1/keys", Value::Null);
    assert_eq!(own.body.as_array().map(Vec::len), Some(2), "{:?}", own.body);
    // A read-only key cannot revoke its user's trading key.
    let target = format!("/api/v1/keys/{}", trader.key);
    let refused = reader.call("DELETE", &target, Value::Null);
    assert_eq!((refused.status, refused.code()), (403, "permission_denied"));

    // The trading key logged in on a socket, then revoked by the admin.
    let mut trading_ws = ws_connect(&server);
    assert_eq!(ws_login(&mut trading_ws, &trader)["result"]["user"], 1);
    let target = format!("/api/v1/admin/keys/{}", trader.key);
    let revoked = Key::admin(&server).call("DELETE", &target, Value::Null);
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    assert_eq!(revoked.body["revoked"]["key"], trader.key.as_str());
    let refused = trader.call("POST", ORDERS, sell_order(4));
    assert_eq!((refused.status, refused.code()), (401, "unknown_key"));
    let refused = trader.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!((refused.status, refused.code()), (401, "unknown_key"));
    order["order"] = json!(5);
    let answer = ws_call(&mut trading_ws, order.clone());
    assert_eq!(answer["error"]["code"], "unknown_key", "{answer}");
    let answer = ws_login(&mut ws_connect(&server), &trader);
    assert_eq!(answer["error"]["code"], "unknown_key", "{answer}");
    // Revoking it again: no such key. The user's other keys are untouched.
    let again = Key::admin(&server).call("DELETE", &target, Value::Null);
    assert_eq!((again.status, again.code()), (404, "not_found"));
    assert_eq!(
        reader.call("GET", "/api/v1/balances", Value::Null).status,
        200
    );
    let open = Key::default_of(&server, 1).call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(
        open.body.as_array().map(Vec::len),
        Some(1),
        "only order 2 was placed: {:?}",
        open.body
    );
    // A key may revoke itself.
    let target = format!("/api/v1/keys/{}", reader.key);
    assert_eq!(reader.call("DELETE", &target, Value::Null).status, 200);
    assert_eq!(
        reader.call("GET", "/api/v1/balances", Value::Null).code(),
        "unknown_key"
    );
    server.shutdown().unwrap();
}

#[test]
fn old_timestamps_and_replays_are_refused_within_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let key = issue(&server, 1, json!({"permissions": ["trade"]}));
    let target = "/api/v1/balances";
    let get = |ts: i64, window: Option<&str>| {
        let headers = key.headers(ts, window, "GET", target, "");
        key.raw("GET", target, &headers, "")
    };
    // Older than the default window (5 s), or too far ahead (over 1 s).
    let old = get(now_ms() - 6_000, None);
    assert_eq!((old.status, old.code()), (401, "stale_request"));
    let ahead = get(now_ms() + 5_000, None);
    assert_eq!((ahead.status, ahead.code()), (401, "stale_request"));
    // A request 300 ms old: stale for a window of 200 ms, accepted within one of 10 s. (Its
    // timestamp is after the server's start, which refuses anything signed before it.)
    let signed_at = now_ms();
    // Letting the request age is the test's meaning: wait out 300 ms of the wall clock.
    while now_ms() < signed_at + 300 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let short = get(signed_at, Some("200"));
    assert_eq!((short.status, short.code()), (401, "stale_request"));
    let within = get(signed_at, Some("10000"));
    assert_eq!(within.status, 200, "{:?}", within.body);
    for bad in ["0", "60001", "05000", "-1", "5e3", ""] {
        let answer = get(now_ms(), Some(bad));
        assert_eq!(
            (answer.status, answer.code()),
            (400, "bad_recv_window"),
            "{bad:?}"
        );
    }

    // A request replayed byte for byte within its window: refused, and nothing applied twice.
    let body = sell_order(7).to_string();
    let headers = key.headers(now_ms(), None, "POST", ORDERS, &body);
    let first = key.raw("POST", ORDERS, &headers, &body);
    assert_eq!(first.status, 200, "{:?}", first.body);
    let replay = key.raw("POST", ORDERS, &headers, &body);
    assert_eq!((replay.status, replay.code()), (401, "replayed_request"));
    let open = key.call("GET", "/api/v1/orders", Value::Null);
    assert_eq!(
        open.body.as_array().map(Vec::len),
        Some(1),
        "{:?}",
        open.body
    );

    // The WebSocket login: an old ts is refused, a replayed login too.
    let ts = (now_ms() - 6_000).to_string();
    let sig = sign(
        &key.secret,
        &signed_text(&key.key, &ts, "", "WS", "/ws", b""),
    );
    let stale = ws_call(
        &mut ws_connect(&server),
        json!({"id": 1, "op": "login", "key": key.key, "ts": ts, "sig": sig}),
    );
    assert_eq!(stale["error"]["code"], "stale_request", "{stale}");
    let ts = now_ms().to_string();
    let sig = sign(
        &key.secret,
        &signed_text(&key.key, &ts, "", "WS", "/ws", b""),
    );
    let login = json!({"id": 1, "op": "login", "key": key.key, "ts": ts, "sig": sig});
    let first = ws_call(&mut ws_connect(&server), login.clone());
    assert_eq!(first["result"]["user"], 1, "{first}");
    let replay = ws_call(&mut ws_connect(&server), login);
    assert_eq!(replay["error"]["code"], "replayed_request", "{replay}");
    server.shutdown().unwrap();
}

#[test]
fn a_skewed_clock_locks_out_no_other_key_nor_user() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let skewed = issue(&server, 1, json!({"permissions": ["trade"]}));
    let sibling = issue(&server, 1, json!({"permissions": ["trade"]}));
    let target = "/api/v1/balances";
    // Far more refusals than the failed-login burst (10), from the same address as the others,
    // with clocks an hour ahead and an hour behind, and with the largest timestamp there is.
    for i in 0..40 {
        let ts = match i % 3 {
            0 => now_ms() + 3_600_000,
            1 => now_ms() - 3_600_000,
            _ => 999_999_999_999_999_999,
        };
        let headers = skewed.headers(ts, None, "GET", target, "");
        let answer = skewed.raw("GET", target, &headers, "");
        assert_eq!(
            (answer.status, answer.code()),
            (401, "stale_request"),
            "{i}"
        );
    }
    for other in [
        &sibling,
        &Key::default_of(&server, 1),
        &Key::default_of(&server, 2),
    ] {
        let answer = other.call("GET", target, Value::Null);
        assert_eq!(answer.status, 200, "{}: {:?}", other.key, answer.body);
        let placed = other.call("POST", ORDERS, sell_order(fresh_ts()));
        assert_eq!(placed.status, 200, "{}: {:?}", other.key, placed.body);
    }
    // And the skewed client itself works as soon as its clock is right.
    let answer = skewed.call("GET", target, Value::Null);
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    server.shutdown().unwrap();
}

#[test]
fn an_ip_allow_list_refuses_other_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let key = issue(
        &server,
        1,
        json!({"permissions": ["trade"], "allow_ips": ["127.0.0.2", "10.0.0.0/8"]}),
    );
    let refused = key.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!((refused.status, refused.code()), (403, "ip_not_allowed"));
    let answer = ws_login(&mut ws_connect(&server), &key);
    assert_eq!(answer["error"]["code"], "ip_not_allowed", "{answer}");
    let key = key.from([127, 0, 0, 2]);
    let allowed = key.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!(allowed.status, 200, "{:?}", allowed.body);
    // A malformed allow-list is refused when the key is made.
    for ips in [json!(["10.0.0.0/33"]), json!(["not an address"])] {
        let made = Key::admin(&server).call(
            "POST",
            "/api/v1/admin/keys",
            json!({"user": 1, "allow_ips": ips}),
        );
        assert_eq!((made.status, made.code()), (400, "bad_request"), "{ips}");
    }
    server.shutdown().unwrap();
}

#[test]
fn a_key_over_its_remembered_requests_is_slowed_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| c.web.max_signatures_per_key = 3);
    let busy = issue(&server, 1, json!({}));
    let calm = issue(&server, 1, json!({}));
    let target = "/api/v1/balances";
    for _ in 0..3 {
        assert_eq!(busy.call("GET", target, Value::Null).status, 200);
    }
    let over = busy.call("GET", target, Value::Null);
    assert_eq!((over.status, over.code()), (429, "rate_limited"));
    assert!(over.head.contains("retry-after: "), "{}", over.head);
    assert_eq!(calm.call("GET", target, Value::Null).status, 200);
    server.shutdown().unwrap();
}

#[test]
fn keys_are_stored_without_secrets_bounded_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| c.web.max_api_keys_per_user = 2);
    let kept = issue(
        &server,
        2,
        json!({"permissions": ["trade"], "label": "kept"}),
    );
    let gone = issue(&server, 2, json!({}));
    let third = Key::admin(&server).call("POST", "/api/v1/admin/keys", json!({"user": 2}));
    assert_eq!((third.status, third.code()), (409, "too_many_keys"));
    let nobody = Key::admin(&server).call("POST", "/api/v1/admin/keys", json!({"user": 999}));
    assert_eq!((nobody.status, nobody.code()), (400, "unknown_user"));
    let not_admin = kept.call("POST", "/api/v1/admin/keys", json!({"user": 2}));
    assert_eq!((not_admin.status, not_admin.code()), (403, "forbidden"));
    let target = format!("/api/v1/admin/keys/{}", gone.key);
    assert_eq!(
        Key::admin(&server)
            .call("DELETE", &target, Value::Null)
            .status,
        200
    );

    let store = std::fs::read_to_string(dir.path().join("api-keys.json")).unwrap();
    assert!(store.contains(&kept.key), "{store}");
    assert!(
        !store.contains(&kept.secret),
        "the store holds a secret: {store}"
    );
    assert!(
        !store.contains(&gone.key),
        "a revoked key stays in the store"
    );
    server.shutdown().unwrap();

    let server = common::start(dir.path(), |c| c.web.max_api_keys_per_user = 2);
    let kept = Key::new(&server, &kept.key, &kept.secret);
    let placed = kept.call("POST", ORDERS, sell_order(11));
    assert_eq!(placed.status, 200, "the key survived: {:?}", placed.body);
    let gone = Key::new(&server, &gone.key, &gone.secret);
    let refused = gone.call("GET", "/api/v1/balances", Value::Null);
    assert_eq!((refused.status, refused.code()), (401, "unknown_key"));
    let listed = kept.call("GET", "/api/v1/keys", Value::Null);
    assert_eq!(listed.body[0]["label"], "kept", "{:?}", listed.body);
    server.shutdown().unwrap();
}
