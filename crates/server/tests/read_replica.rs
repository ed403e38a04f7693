//! Read replicas (`log.role = "replica"`, docs/replication.md) against a real three-node NATS
//! cluster on loopback: a replica serves the leader's market data with the leader's sequence
//! numbers, refuses whatever would write while it keeps serving, and never leads or appends,
//! even once the leader is gone.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::nats::NatsCluster;
use common::{start, trader};
use rialto_core::{Side, SymbolId};
use rialto_server::RunningServer;
use rialto_server::config::Role;
use rialto_server::replication::{self, Connection};
use rialto_wire::{NewOrder, ServerMsg};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(20);

/// One HTTP request on a fresh connection: the status and the JSON body.
fn http(addr: SocketAddr, method: &str, target: &str, body: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let (_, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, serde_json::from_str(rest).unwrap_or(Value::Null))
}

fn get(server: &RunningServer, target: &str) -> Value {
    let (status, body) = http(server.web_addr.unwrap(), "GET", target, "");
    assert_eq!(status, 200, "GET {target}: {body}");
    body
}

/// An answer without the time it was made at (`ts_ns` of `/exchange-info`).
fn untimed(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.remove("ts_ns");
    }
    v
}

/// Polls until the replica's answer to `target` equals the leader's (but for the time it was
/// made at); returns it.
fn until_equal(leader: &RunningServer, replica: &RunningServer, target: &str) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (a, b) = (untimed(get(leader, target)), untimed(get(replica, target)));
        if a == b {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "{target}: the replica's {b} is not the leader's {a}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn ws(server: &RunningServer) -> Ws {
    let url = format!("ws://{}/ws?units=int", server.web_addr.unwrap());
    let (ws, _) = tungstenite::connect(url).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    ws
}

fn send(ws: &mut Ws, v: Value) {
    ws.send(tungstenite::Message::text(v.to_string())).unwrap();
}

fn next(ws: &mut Ws) -> Value {
    loop {
        match ws.read().expect("a WebSocket message in time") {
            tungstenite::Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            _ => continue,
        }
    }
}

/// Subscribes to the L3 channel and returns its snapshot.
fn subscribe_orders(ws: &mut Ws) -> Value {
    send(
        ws,
        json!({"id": 1, "op": "subscribe", "ch": "orders.BTC-USD"}),
    );
    loop {
        let v = next(ws);
        if v["ch"] == "orders.BTC-USD" && v["type"] == "snapshot" {
            return v;
        }
    }
}

/// The L3 updates (seq, op, order, trade) a subscriber receives until it has seen seq `last`.
fn l3_updates_until(ws: &mut Ws, last: u64) -> Vec<(u64, String, i64, i64)> {
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|u: &(u64, String, i64, i64)| u.0 < last)
    {
        let v = next(ws);
        if v["ch"] != "orders.BTC-USD" || v["type"] != "update" {
            continue;
        }
        for u in v["updates"].as_array().unwrap() {
            seen.push((
                u["seq"].as_u64().unwrap(),
                u["op"].as_str().unwrap().to_string(),
                u["order"].as_i64().unwrap(),
                u["trade"].as_i64().unwrap_or(0),
            ));
        }
    }
    seen
}

fn place(server: &RunningServer, user: i64, order: NewOrder) {
    let id = order.order;
    let mut t = trader(server, user);
    t.place(order).unwrap();
    loop {
        match t.recv().unwrap() {
            ServerMsg::Accepted { order, .. } if order == id => return,
            ServerMsg::Rejected { reason, .. } => panic!("order {id}: {reason:?}"),
            _ => {}
        }
    }
}

#[test]
fn a_replica_serves_the_leaders_market_data_with_its_seqs_refuses_writes_and_never_leads() {
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("replica");
    let dir_a = tempfile::tempdir().unwrap();
    let leader_settings = settings.clone();
    let leader = start(dir_a.path(), move |c| c.log = leader_settings);
    place(
        &leader,
        1,
        NewOrder::limit(1, SymbolId(0), Side::Sell, 1_000, 3),
    );
    place(
        &leader,
        2,
        NewOrder::limit(2, SymbolId(0), Side::Buy, 990, 2),
    );

    // A replica started after the leader's first orders: the same books, trades and seqs.
    let dir_c = tempfile::tempdir().unwrap();
    let mut replica_settings = settings.clone();
    replica_settings.role = Role::Replica;
    let replica = start(dir_c.path(), move |c| c.log = replica_settings);
    assert!(replica.read_only);
    assert_eq!(replica.fix_addr, None, "a replica opens no FIX listener");
    let book = until_equal(&leader, &replica, "/api/v1/book/BTC-USD?units=int");
    assert_eq!(book["asks"], json!([[1_000, 3]]), "{book}");
    until_equal(&leader, &replica, "/api/v1/book/BTC-USD/orders?units=int");

    // Subscribers on both nodes start from the same snapshot and see the same updates.
    let mut on_leader = ws(&leader);
    let mut on_replica = ws(&replica);
    let (snap_a, snap_b) = (
        subscribe_orders(&mut on_leader),
        subscribe_orders(&mut on_replica),
    );
    assert_eq!(snap_a, snap_b);
    // A trade (order 3 takes 2 of order 1), a resting buy and a cancellation.
    place(
        &leader,
        2,
        NewOrder::limit(3, SymbolId(0), Side::Buy, 1_000, 2),
    );
    place(
        &leader,
        2,
        NewOrder::limit(4, SymbolId(0), Side::Buy, 980, 1),
    );
    let mut t = trader(&leader, 2);
    t.cancel(2).unwrap();
    common::recv_until(&mut t, |m| {
        matches!(m, ServerMsg::Cancelled { order: 2, .. })
    });
    let orders = until_equal(&leader, &replica, "/api/v1/book/BTC-USD/orders?units=int");
    let last = orders["seq"].as_u64().unwrap();
    let (seen_a, seen_b) = (
        l3_updates_until(&mut on_leader, last),
        l3_updates_until(&mut on_replica, last),
    );
    assert_eq!(seen_a, seen_b);
    assert!(
        seen_a.iter().any(|u| u.1 == "execute" && u.3 > 0),
        "the trade is there: {seen_a:?}"
    );
    let trades = until_equal(&leader, &replica, "/api/v1/trades/BTC-USD?units=int");
    assert!(!trades.as_array().unwrap().is_empty(), "{trades}");
    until_equal(&leader, &replica, "/api/v1/book/BTC-USD?units=int");
    // The venue's settings come from the replica's own engine.
    until_equal(&leader, &replica, "/api/v1/status?units=int");
    until_equal(&leader, &replica, "/api/v1/exchange-info?units=int");

    // Whatever would write is refused, clearly, and the replica keeps serving.
    let order = json!({"symbol": "BTC-USD", "order": 9, "side": "buy", "price": 990, "qty": 1});
    let (status, body) = http(
        replica.web_addr.unwrap(),
        "POST",
        "/api/v1/orders?units=int",
        &order.to_string(),
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "read_only_replica", "{body}");
    let (status, body) = http(
        replica.web_addr.unwrap(),
        "POST",
        "/api/v1/admin/deposits",
        "{}",
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("read_only_replica"))
    );
    let (status, body) = http(
        replica.web_addr.unwrap(),
        "GET",
        "/api/v1/orders/history",
        "",
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("read_only_replica"))
    );
    send(
        &mut on_replica,
        json!({"id": 7, "op": "place", "symbol": "BTC-USD", "side": "buy", "price": 990, "qty": 1}),
    );
    let refused = loop {
        let v = next(&mut on_replica);
        if v["id"] == 7 {
            break v;
        }
    };
    assert_eq!(refused["error"]["code"], "read_only_replica", "{refused}");
    assert_eq!(
        get(&replica, "/api/v1/book/BTC-USD?units=int"),
        get(&leader, "/api/v1/book/BTC-USD?units=int")
    );

    // The leader goes: the replica does not take the lease, appends nothing, and serves the
    // last state.
    let connection = Connection::open(&settings, Duration::from_secs(10)).unwrap();
    let end = connection.last_stream_seq().unwrap();
    let last_book = get(&leader, "/api/v1/book/BTC-USD?units=int");
    leader.shutdown().unwrap();
    let bucket = connection.lease_bucket().unwrap();
    // Watch for three leases' worth: a standby would have led within one.
    let watch_until = Instant::now() + Duration::from_millis(3 * settings.lease_ms);
    while Instant::now() < watch_until {
        assert_eq!(
            replication::lease_holder(&connection, &bucket).unwrap(),
            None,
            "nobody may take the lease"
        );
        assert_eq!(
            connection.last_stream_seq().unwrap(),
            end,
            "nothing appended"
        );
        assert_eq!(get(&replica, "/api/v1/book/BTC-USD?units=int"), last_book);
        std::thread::sleep(Duration::from_millis(50));
    }
    replica.shutdown().unwrap();
}

/// Polls until the replica's L2 levels of BTC-USD are the leader's (the feed's numbers aside:
/// a replica started from a snapshot numbers its own feed until the next leader's epoch).
fn until_same_levels(leader: &RunningServer, replica: &RunningServer) -> Value {
    let target = "/api/v1/book/BTC-USD?units=int";
    let levels = |server| {
        let book = get(server, target);
        json!({"bids": book["bids"], "asks": book["asks"]})
    };
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (a, b) = (levels(leader), levels(replica));
        if a == b {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "the replica's levels {b} are not the leader's {a}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replica_starts_from_the_snapshot_bucket_once_the_stream_is_trimmed() {
    let cluster = NatsCluster::start();
    let settings = rialto_server::config::LogSettings {
        snapshots_kept: 2,
        ..cluster.log_settings("trimmed")
    };
    let dir_a = tempfile::tempdir().unwrap();
    let leader_settings = settings.clone();
    let leader = start(dir_a.path(), move |c| {
        c.log = leader_settings;
        c.journal.snapshot_every = 4;
    });
    for id in 1..=24 {
        let price = 900 + id;
        place(
            &leader,
            1,
            NewOrder::limit(id, SymbolId(0), Side::Buy, price, 1),
        );
    }
    // The stream is trimmed below the oldest snapshot kept: its first messages, the venue's
    // first commands and the leader's feed epoch among them, are gone.
    let connection = std::sync::Arc::new(Connection::open(&settings, DEADLINE).unwrap());
    let store = rialto_server::snapstore::SnapshotStore::open(connection.clone()).unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let stored = store.list().unwrap();
        let (first, _) = connection.stream_seqs().unwrap();
        if stored.len() == 2 && stored[0].seq > 10 && first == stored[0].stream_seq {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not trimmed: {stored:?}, {first}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let dir_c = tempfile::tempdir().unwrap();
    let mut replica_settings = settings.clone();
    replica_settings.role = Role::Replica;
    let replica = start(dir_c.path(), move |c| c.log = replica_settings);
    assert!(replica.read_only);
    let levels = until_same_levels(&leader, &replica);
    assert_eq!(
        levels["bids"].as_array().map(Vec::len),
        Some(24),
        "{levels}"
    );
    // It follows the stream after the snapshot: a trade on the leader reaches its book.
    place(
        &leader,
        2,
        NewOrder::limit(25, SymbolId(0), Side::Sell, 924, 1),
    );
    let levels = until_same_levels(&leader, &replica);
    assert_eq!(
        levels["bids"].as_array().map(Vec::len),
        Some(23),
        "{levels}"
    );
    until_equal(&leader, &replica, "/api/v1/status?units=int");
}
