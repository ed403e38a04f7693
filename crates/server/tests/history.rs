//! Durable history (docs/api.md, "Durable history"): trades, fills, order events, candles and
//! the 24 h ticker served from `<data>/history.sqlite`, across restarts, and rebuilt from the
//! journal when the database is lost or behind.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rialto_core::{Side, SymbolId};
use rialto_server::RunningServer;
use rialto_server::web::auth::{now_ms, sign, signed_text};
use rialto_wire::{NewOrder, ServerMsg};
use serde_json::Value;

const BTC: SymbolId = SymbolId(0);
const PRICE: i64 = 500_000;
const ID_PER_SEQ: i64 = 1_000_000;

static WINDOWS: AtomicU64 = AtomicU64::new(0);

/// One HTTP/1.1 request on a fresh connection: the status and the JSON body.
fn request(addr: SocketAddr, target: &str, headers: &[(String, String)]) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let body = if head.to_ascii_lowercase().contains("chunked") {
        let mut body = String::new();
        let mut rest = rest;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            body.push_str(&tail[..n]);
            rest = tail[n..].trim_start_matches("\r\n");
        }
        body
    } else {
        rest.to_string()
    };
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A GET in the engine's integers (the numbers these tests compare).
fn get(server: &RunningServer, target: &str) -> (u16, Value) {
    request(server.web_addr.unwrap(), &common::int_units(target), &[])
}

/// A GET signed with `user`'s key, in the engine's integers.
fn get_as(server: &RunningServer, user: i64, target: &str) -> (u16, Value) {
    let target = &common::int_units(target);
    let secret = server.credentials.user_secret(user);
    let (key, ts) = (user.to_string(), now_ms().to_string());
    // A receive window of its own: the same GET twice in one millisecond is two requests.
    let window = (10_000 + WINDOWS.fetch_add(1, Ordering::SeqCst) % 50_000).to_string();
    let sig = sign(
        &secret,
        &signed_text(&key, &ts, &window, "GET", target, b""),
    );
    let headers = [
        ("Rialto-Key", key),
        ("Rialto-Timestamp", ts),
        ("Rialto-Recv-Window", window),
        ("Rialto-Signature", sig),
    ]
    .map(|(k, v)| (k.to_string(), v));
    request(server.web_addr.unwrap(), target, &headers)
}

fn ok(answer: (u16, Value)) -> Value {
    assert_eq!(answer.0, 200, "{}", answer.1);
    answer.1
}

fn ids(list: &Value, field: &str) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v[field].as_i64().unwrap())
        .collect()
}

/// Waits until the history has written `seq` (a counter its writer keeps; nothing announces it).
fn written(server: &RunningServer, seq: u64) {
    let store = server.history.as_ref().expect("history is on");
    common::eventually(
        &format!("the history to write seq {seq}"),
        Duration::from_secs(30),
        || store.written_seq.load(Ordering::Acquire) >= seq,
    );
}

/// Waits until the wall clock's millisecond moves on, so that the next command has a later ms.
fn next_ms() {
    let now = now_ms();
    let deadline = Instant::now() + Duration::from_secs(1);
    while now_ms() == now {
        assert!(Instant::now() < deadline);
        std::hint::spin_loop();
    }
}

/// User 1 sells one lot at `price`, user 2 buys it: returns the buy's seq (the trade's).
fn trade(server: &RunningServer, order: i64, price: i64) -> u64 {
    let mut seller = common::trader(server, 1);
    let mut buyer = common::trader(server, 2);
    seller
        .place(NewOrder::limit(order, BTC, Side::Sell, price, 1))
        .unwrap();
    common::recv_until(&mut seller, |m| matches!(m, ServerMsg::Accepted { .. }));
    buyer
        .place(NewOrder::limit(order, BTC, Side::Buy, price, 1))
        .unwrap();
    let (accepted, _) = common::recv_until(&mut buyer, |m| matches!(m, ServerMsg::Accepted { .. }));
    let ServerMsg::Accepted { seq, .. } = accepted else {
        unreachable!()
    };
    common::recv_until(&mut buyer, |m| matches!(m, ServerMsg::Trade { .. }));
    written(server, seq);
    seq
}

#[test]
fn trades_fills_order_events_candles_and_the_ticker_come_from_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let mut seqs = Vec::new();
    let mut ts_ms = Vec::new();
    for i in 0..5 {
        next_ms();
        let seq = trade(&server, 100 + i, PRICE + i * 10);
        seqs.push(seq);
        let trades = ok(get(&server, "/api/v1/trades/BTC-USD/history?limit=1"));
        ts_ms.push(trades[0]["ts_ns"].as_i64().unwrap() / 1_000_000);
    }
    let trade_ids: Vec<i64> = seqs.iter().map(|&s| s as i64 * ID_PER_SEQ).collect();

    // Ids are the seq's, the newest `limit` by default, oldest first; from_id pages forward.
    let all = ok(get(&server, "/api/v1/trades/BTC-USD/history"));
    assert_eq!(ids(&all, "trade_id"), trade_ids);
    assert_eq!(all[4]["price"], PRICE + 40);
    assert_eq!(all[4]["taker_side"], "buy");
    let last_two = ok(get(&server, "/api/v1/trades/BTC-USD/history?limit=2"));
    assert_eq!(ids(&last_two, "trade_id"), trade_ids[3..]);
    let page = ok(get(
        &server,
        &format!(
            "/api/v1/trades/BTC-USD/history?from_id={}&limit=2",
            trade_ids[1]
        ),
    ));
    assert_eq!(ids(&page, "trade_id"), trade_ids[1..3]);
    // start_time inclusive, end_time exclusive, in ms.
    let window = ok(get(
        &server,
        &format!(
            "/api/v1/trades/BTC-USD/history?start_time={}&end_time={}",
            ts_ms[1], ts_ms[3]
        ),
    ));
    assert_eq!(ids(&window, "trade_id"), trade_ids[1..3]);
    let since = ok(get(
        &server,
        &format!(
            "/api/v1/trades/BTC-USD/history?start_time={}&limit=1",
            ts_ms[2]
        ),
    ));
    assert_eq!(ids(&since, "trade_id"), trade_ids[2..3]);
    assert_eq!(
        ok(get(&server, "/api/v1/trades/ETH-USD/history")),
        Value::Array(vec![])
    );

    // The taker's fills, paged by the fill's id.
    let fills = ok(get_as(&server, 2, "/api/v1/fills"));
    assert_eq!(ids(&fills, "trade_id"), trade_ids);
    assert!(
        fills
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["liquidity"] == "taker" && f["side"] == "buy" && f["symbol"] == "BTC-USD")
    );
    let fill_ids = ids(&fills, "id");
    let page = ok(get_as(
        &server,
        2,
        &format!("/api/v1/fills?from_id={}&limit=3", fill_ids[2]),
    ));
    assert_eq!(ids(&page, "id"), fill_ids[2..]);
    assert_eq!(
        ok(get_as(&server, 2, "/api/v1/fills?symbol=ETH-USD")),
        Value::Array(vec![])
    );
    let maker = ok(get_as(&server, 1, "/api/v1/fills?limit=1"));
    assert_eq!(maker[0]["liquidity"], "maker");
    assert_eq!(maker[0]["side"], "sell");

    // The maker's order history: each sell accepted, then its fill at the buy's seq.
    let history = ok(get_as(&server, 1, "/api/v1/orders/history?limit=4"));
    let types: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["accepted", "fill", "accepted", "fill"]);
    assert_eq!(history[2]["kind"], "place");
    assert_eq!(history[2]["order"], 104);
    assert_eq!(history[3]["seq"], seqs[4]);

    // Candles of every interval hold the five trades.
    for interval in ["1m", "5m", "15m", "1h", "4h", "1d"] {
        let candles = ok(get(
            &server,
            &format!("/api/v1/candles/BTC-USD?interval={interval}&start_time=0"),
        ));
        let sum = |field: &str| -> i64 {
            candles
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c[field].as_i64().unwrap())
                .sum()
        };
        assert_eq!((sum("volume"), sum("trades")), (5, 5), "{interval}");
    }
    let (status, bad) = get(&server, "/api/v1/candles/BTC-USD?interval=2m");
    assert_eq!(
        (status, &bad["error"]["code"]),
        (400, &Value::from("bad_request"))
    );

    // The ticker.
    let t = ok(get(&server, "/api/v1/ticker/24h?symbol=BTC-USD"));
    assert_eq!(
        (&t["open"], &t["high"], &t["low"], &t["last"]),
        (
            &Value::from(PRICE),
            &Value::from(PRICE + 40),
            &Value::from(PRICE),
            &Value::from(PRICE + 40)
        )
    );
    assert_eq!(
        (&t["volume"], &t["change"]),
        (&Value::from(5), &Value::from(40))
    );
    assert_eq!(t["quote_volume"], 5 * PRICE + 100);
    assert_eq!(t["change_percent"], "0.008");
    // By default (decimal units) prices and amounts are strings, as everywhere in the API.
    let (status, t) = request(
        server.web_addr.unwrap(),
        "/api/v1/ticker/24h?symbol=BTC-USD",
        &[],
    );
    assert_eq!(status, 200, "{t}");
    // The test venue's tick is 0.01: 500,040 ticks are 5000.40.
    assert_eq!(
        (&t["last"], &t["change"]),
        (&Value::from("5000.40"), &Value::from("0.40"))
    );
    let every = ok(get(&server, "/api/v1/ticker/24h"));
    // The demo's three symbols; ETH-USD has not traded.
    let every = every.as_array().unwrap();
    assert_eq!(every.len(), 3);
    let eth = every.iter().find(|t| t["symbol"] == "ETH-USD").unwrap();
    assert_eq!(eth["last"], Value::Null);

    // Bad ranges are refused.
    for target in [
        "/api/v1/trades/BTC-USD/history?start_time=soon",
        "/api/v1/trades/BTC-USD/history?limit=0",
        "/api/v1/trades/BTC-USD/history?limit=1001",
        "/api/v1/trades/BTC-USD/history?start_time=5&end_time=5",
        "/api/v1/trades/BTC-USD/history?from_id=-1",
    ] {
        let (status, body) = get(&server, target);
        assert_eq!(status, 400, "{target}: {body}");
    }
    server.shutdown().unwrap();
}

/// Everything the history serves for users 1 and 2.
fn everything(server: &RunningServer) -> Vec<Value> {
    vec![
        ok(get(server, "/api/v1/trades/BTC-USD/history?limit=1000")),
        ok(get(
            server,
            "/api/v1/candles/BTC-USD?interval=1m&start_time=0",
        )),
        ok(get(server, "/api/v1/candles/BTC-USD?interval=1d")),
        ok(get_as(server, 1, "/api/v1/orders/history?limit=1000")),
        ok(get_as(server, 2, "/api/v1/fills?limit=1000")),
    ]
}

/// A server over `dir`, once its history has caught up with the recovered venue.
fn restart(dir: &Path) -> RunningServer {
    let server = common::start(dir, |_| {});
    written(&server, server.market_data.applied_seq());
    server
}

#[test]
fn history_survives_a_restart_and_trade_ids_never_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let server = restart(dir.path());
    for i in 0..3 {
        trade(&server, 10 + i, PRICE);
    }
    let before = everything(&server);
    server.shutdown().unwrap();

    let server = restart(dir.path());
    assert_eq!(everything(&server), before);
    let seq = trade(&server, 20, PRICE);
    let trades = ok(get(&server, "/api/v1/trades/BTC-USD/history"));
    let now = ids(&trades, "trade_id");
    assert_eq!(now.len(), 4);
    assert_eq!(now[..3], ids(&before[0], "trade_id")[..]);
    assert_eq!(now[3], seq as i64 * ID_PER_SEQ);
    assert!(now.windows(2).all(|w| w[0] < w[1]), "{now:?}");
    server.shutdown().unwrap();
}

#[test]
fn a_lost_or_behind_database_is_rebuilt_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let server = restart(dir.path());
    let mut seqs = Vec::new();
    for i in 0..4 {
        seqs.push(trade(&server, 30 + i, PRICE + i));
        if i == 1 {
            // The rebuild starts from a snapshot when one is at or before the gap.
            common::state_hash(&server);
        }
    }
    let before = everything(&server);
    server.shutdown().unwrap();
    let db = dir.path().join("history.sqlite");

    // Behind: the rows of the last two trades, and the candles, never made it.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let keep = seqs[1] as i64;
        conn.execute_batch(&format!(
            "DELETE FROM trades WHERE id > {keep}999999; DELETE FROM fills WHERE id > {keep}999999;
             DELETE FROM order_events WHERE id > {keep}999999; DELETE FROM candles;
             UPDATE meta SET value = {keep} WHERE key = 'last_seq';"
        ))
        .unwrap();
    }
    let server = restart(dir.path());
    // Candles have no seq: the test took them all, so only those of trades after seq[1]
    // come back; the rest of the history is whole again.
    let after = everything(&server);
    assert_eq!(
        [&after[0], &after[3], &after[4]],
        [&before[0], &before[3], &before[4]]
    );
    let volume: i64 = after[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["volume"].as_i64().unwrap())
        .sum();
    assert_eq!(volume, 2, "{}", after[1]);
    server.shutdown().unwrap();

    // Lost: the whole file.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let server = restart(dir.path());
    assert_eq!(everything(&server), before);
    server.shutdown().unwrap();

    // Unusable: not a database at all. It is put aside, and the history rebuilt.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::write(
        &db,
        b"not a database, but long enough to look like a header of one",
    )
    .unwrap();
    let server = restart(dir.path());
    assert_eq!(everything(&server), before);
    server.shutdown().unwrap();
    let aside = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy()
                .starts_with("history.sqlite.unusable-")
        })
        .count();
    assert_eq!(aside, 1);
}

#[test]
fn with_history_off_there_is_no_database_and_the_feed_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| c.history.enabled = false);
    assert!(server.history.is_none());
    let mut seller = common::trader(&server, 1);
    seller
        .place(NewOrder::limit(1, BTC, Side::Sell, PRICE, 1))
        .unwrap();
    common::recv_until(&mut seller, |m| matches!(m, ServerMsg::Accepted { .. }));
    let mut buyer = common::trader(&server, 2);
    buyer
        .place(NewOrder::limit(1, BTC, Side::Buy, PRICE, 1))
        .unwrap();
    let (trade, _) = common::recv_until(&mut buyer, |m| matches!(m, ServerMsg::Trade { .. }));
    let ServerMsg::Trade { seq, .. } = trade else {
        unreachable!()
    };
    common::market_data_reaches(&server, seq);
    assert_ne!(
        ok(get(&server, "/api/v1/trades/BTC-USD")),
        Value::Array(vec![]),
        "the feed never showed the trade"
    );
    let (status, body) = get_as(&server, 2, "/api/v1/fills");
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &Value::from("history_off"))
    );
    for target in ["/api/v1/ticker/24h", "/api/v1/trades/BTC-USD/history"] {
        let (status, body) = get(&server, target);
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &Value::from("history_off"))
        );
    }
    assert!(!dir.path().join("history.sqlite").exists());
    server.shutdown().unwrap();
}
