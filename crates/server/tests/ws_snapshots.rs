//! WebSocket subscriptions during random trading (docs/api.md, "WebSocket"): after its
//! snapshot a subscription gets nothing the snapshot already holds and nothing older than it,
//! on every public channel, however often a client subscribes and unsubscribes; and a
//! long-lived subscription's snapshot plus stream rebuild exactly what REST shows at a quiet
//! point.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rialto_core::{Side, SymbolId};
use rialto_server::RunningServer;
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};
use serde_json::{Value, json};

const SYMBOL: &str = "BTC-USD";
const CHANNELS: [&str; 5] = ["book", "orders", "trades", "bbo", "candles"];
/// Subscribe-all-five, unsubscribe-all-five rounds of the churning client.
const CHURN_ROUNDS: usize = 1_000;
const TRADERS: i64 = 3;
const MID: i64 = 500_000;
/// A price no trader uses: the marker order that ends the test rests there alone.
const MARKER_PRICE: i64 = 1;

type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

fn ws_connect(server: &RunningServer) -> Ws {
    let url = format!("ws://{}/ws?units=int", server.web_addr.unwrap());
    let (ws, _) = tungstenite::connect(url).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    ws
}

fn ws_send(ws: &mut Ws, v: Value) {
    ws.send(tungstenite::Message::text(v.to_string())).unwrap();
}

fn ws_read(ws: &mut Ws) -> Value {
    loop {
        match ws.read() {
            Ok(tungstenite::Message::Text(t)) => return serde_json::from_str(&t).unwrap(),
            Ok(tungstenite::Message::Close(c)) => panic!("closed by the server: {c:?}"),
            Ok(_) => {}
            Err(e) => panic!("WebSocket read: {e}"),
        }
    }
}

/// The next text message, or None when none comes within `wait`.
fn ws_read_within(ws: &mut Ws, wait: Duration) -> Option<Value> {
    let set = |ws: &mut Ws, t: Duration| {
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(t)).unwrap();
        }
    };
    set(ws, wait);
    let out = loop {
        match ws.read() {
            Ok(tungstenite::Message::Text(t)) => break Some(serde_json::from_str(&t).unwrap()),
            Ok(tungstenite::Message::Close(c)) => panic!("closed by the server: {c:?}"),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break None;
            }
            Err(e) => panic!("WebSocket read: {e}"),
        }
    };
    set(ws, Duration::from_secs(10));
    out
}

/// A public GET, parsed as JSON.
fn get(addr: SocketAddr, target: &str) -> Value {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let target = common::int_units(target);
    let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let (head, mut rest) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{target}: {head}");
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return serde_json::from_str(rest).unwrap();
    }
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    serde_json::from_str(&body).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an i64: {v}"))
}

/// A small deterministic generator (xorshift64*), so that a failure can be rerun.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

/// One trader: places, crosses, moves, reduces and cancels at random around the mid price
/// until `stop`, then makes sure every command it sent has been applied. Returns the client,
/// kept open so that no cancel-on-disconnect changes the book after the quiet point.
fn trade(server: &RunningServer, user: i64, stop: &AtomicBool) -> rialto_client::Client {
    let mut client = common::trader(server, user);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ user as u64);
    let mut live: Vec<i64> = Vec::new();
    let mut next_order = 1;
    let mut batch = Vec::new();
    let mut fence = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10 {
            let pick = rng.below(100);
            let msg = if live.len() > 40 || (pick < 25 && !live.is_empty()) {
                let order = live.swap_remove(rng.below(live.len() as u64) as usize);
                ClientMsg::Cancel { order }
            } else if pick < 35 && !live.is_empty() {
                let order = live[rng.below(live.len() as u64) as usize];
                let price = MID - 15 + rng.below(31) as i64;
                ClientMsg::Move { order, price }
            } else if pick < 42 && !live.is_empty() {
                let order = live[rng.below(live.len() as u64) as usize];
                ClientMsg::Reduce { order, qty: 1 }
            } else {
                // Buys and sells overlap by 10 ticks: about a third of them cross.
                let side = if rng.below(2) == 0 {
                    Side::Buy
                } else {
                    Side::Sell
                };
                let off = rng.below(21) as i64;
                let price = match side {
                    Side::Buy => MID - 15 + off,
                    Side::Sell => MID - 5 + off,
                };
                let qty = 1 + rng.below(5) as i64;
                next_order += 1;
                live.push(next_order);
                ClientMsg::NewOrder(NewOrder::limit(next_order, SymbolId(0), side, price, qty))
            };
            batch.push(msg);
        }
        // Wait for the answer to the batch's last order before the next batch (a bounded
        // backlog); other frames go by.
        next_order += 1;
        fence = next_order;
        let quiet = NewOrder::limit(fence, SymbolId(0), Side::Buy, MID - 100, 1);
        batch.push(ClientMsg::NewOrder(quiet));
        live.push(fence);
        client.send_batch(&batch).unwrap();
        batch.clear();
        answered(&mut client, fence);
    }
    assert!(fence > 0, "trader {user} sent nothing");
    client
}

/// Waits for the answer to order `order` (which the gateway gives after every earlier command
/// of the session has been applied).
fn answered(client: &mut rialto_client::Client, order: i64) {
    common::recv_until(
        client,
        |m| matches!(m, ServerMsg::Accepted { order: o, .. } | ServerMsg::Rejected { order: o, .. } if *o == order),
    );
}

/// What one subscription has seen of one channel: where its stream must go on from.
#[derive(Default)]
struct Follow {
    /// book, orders: the last L2/L3 seq; bbo: the last BBO seq; trades: the last trade id.
    last: u64,
    /// trades: the ids in the snapshot.
    snapshot_trades: HashSet<u64>,
    /// candles: the newest candle seen (start, trades in it).
    candle: Option<(i64, u64)>,
    /// candles: the last trade id the candles are as of.
    candle_trade: u64,
}

impl Follow {
    /// Takes a snapshot; returns it for whoever rebuilds from it.
    fn snapshot(kind: &str, m: &Value) -> Follow {
        let mut f = Follow::default();
        match kind {
            "book" | "orders" | "bbo" => f.last = u(&m["seq"]),
            "trades" => {
                f.snapshot_trades = m["trades"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| u(&t["trade"]))
                    .collect();
                f.last = f.snapshot_trades.iter().copied().max().unwrap_or(0);
                if let Some(last) = m.get("last_trade") {
                    assert!(u(last) >= f.last, "{m}");
                    f.last = u(last);
                }
            }
            _ => {
                f.candle = m["candles"]
                    .as_array()
                    .unwrap()
                    .last()
                    .map(|c| (i(&c["start_ns"]), u(&c["trades"])));
                f.candle_trade = m.get("last_trade").map_or(0, u);
            }
        }
        f
    }

    /// Checks a stream message against the snapshot and the messages before it: nothing the
    /// snapshot holds, nothing older, nothing missing.
    fn check(&mut self, kind: &str, m: &Value) {
        match kind {
            "book" => {
                assert_eq!(m["type"], "diff", "{m}");
                let (first, last) = (u(&m["first"]), u(&m["last"]));
                assert_eq!(
                    first,
                    self.last + 1,
                    "a diff that is not the next after {}: {m}",
                    self.last
                );
                assert!(last >= first, "{m}");
                self.last = last;
            }
            "orders" => {
                assert_eq!(m["type"], "update", "{m}");
                for update in m["updates"].as_array().unwrap() {
                    let seq = u(&update["seq"]);
                    assert_eq!(
                        seq,
                        self.last + 1,
                        "an L3 update that is not the next after {}: {m}",
                        self.last
                    );
                    self.last = seq;
                }
            }
            "trades" => {
                assert_eq!(m["type"], "trades", "{m}");
                for t in m["trades"].as_array().unwrap() {
                    let id = u(&t["trade"]);
                    assert!(
                        !self.snapshot_trades.contains(&id),
                        "trade {id} was in the snapshot: {m}"
                    );
                    assert_eq!(
                        id,
                        self.last + 1,
                        "a trade that is not the next after {}: {m}",
                        self.last
                    );
                    self.last = id;
                }
            }
            "bbo" => {
                let seq = u(&m["seq"]);
                assert!(
                    seq > self.last,
                    "a BBO as of {seq} after one as of {}: {m}",
                    self.last
                );
                self.last = seq;
            }
            _ => {
                assert_eq!(m["type"], "candle", "{m}");
                let c = &m["candle"];
                let (start, trades) = (i(&c["start_ns"]), u(&c["trades"]));
                if let Some((was_start, was_trades)) = self.candle {
                    assert!(
                        start > was_start || (start == was_start && trades > was_trades),
                        "a candle older than the last ({was_start}, {was_trades} trades): {m}"
                    );
                }
                self.candle = Some((start, trades));
                let as_of = u(m
                    .get("last_trade")
                    .expect("a candle says which trade it is as of"));
                assert!(
                    as_of > self.candle_trade,
                    "a candle as of trade {as_of} after {}: {m}",
                    self.candle_trade
                );
                self.candle_trade = as_of;
            }
        }
    }
}

/// The channel kind of a stream message (`book` for `book.BTC-USD`), if it is one.
fn kind_of(m: &Value) -> Option<&'static str> {
    let ch = m["ch"].as_str()?;
    let (kind, symbol) = ch.split_once('.')?;
    assert_eq!(symbol, SYMBOL, "{m}");
    CHANNELS.iter().copied().find(|k| *k == kind)
}

/// Subscribes to all five channels and unsubscribes again, `CHURN_ROUNDS` times, checking
/// every subscription's stream. Returns the subscriptions made.
fn churn(server: &RunningServer) -> usize {
    let mut ws = ws_connect(server);
    let mut id = 0u64;
    let mut made = 0;
    for _ in 0..CHURN_ROUNDS {
        let mut follows: HashMap<&str, Follow> = HashMap::new();
        let first_id = id + 1;
        for kind in CHANNELS {
            id += 1;
            ws_send(
                &mut ws,
                json!({"id": id, "op": "subscribe", "ch": format!("{kind}.{SYMBOL}")}),
            );
        }
        let mut answers = 0;
        while answers < CHANNELS.len() || follows.len() < CHANNELS.len() {
            let m = ws_read(&mut ws);
            if let Some(kind) = kind_of(&m) {
                let snapshot =
                    m["type"] == "snapshot" || (kind == "bbo" && !follows.contains_key(kind));
                match follows.get_mut(kind) {
                    Some(f) => f.check(kind, &m),
                    None => {
                        assert!(snapshot, "a stream message before its snapshot: {m}");
                        follows.insert(kind, Follow::snapshot(kind, &m));
                    }
                }
            } else {
                assert!(m.get("result").is_some(), "{m}");
                assert!(u(&m["id"]) >= first_id, "{m}");
                answers += 1;
            }
        }
        made += CHANNELS.len();
        for kind in CHANNELS {
            id += 1;
            ws_send(
                &mut ws,
                json!({"id": id, "op": "unsubscribe", "ch": format!("{kind}.{SYMBOL}")}),
            );
        }
        let mut answers = 0;
        while answers < CHANNELS.len() {
            let m = ws_read(&mut ws);
            match kind_of(&m) {
                Some(kind) => follows.get_mut(kind).expect("subscribed").check(kind, &m),
                None => {
                    assert!(m.get("result").is_some(), "{m}");
                    answers += 1;
                }
            }
        }
    }
    made
}

/// A venue rebuilt from one subscription's snapshots and streams.
#[derive(Default)]
struct Rebuilt {
    l2_seq: u64,
    bids: BTreeMap<i64, i64>,
    asks: BTreeMap<i64, i64>,
    l3_seq: u64,
    /// Orders by number: (side, price, qty); and each level's orders in time priority.
    orders: HashMap<u64, (String, i64, i64)>,
    queues: BTreeMap<(String, i64), Vec<u64>>,
    trades: Vec<Value>,
    bbo: Value,
    candles: BTreeMap<i64, Value>,
}

impl Rebuilt {
    fn levels(side: &mut BTreeMap<i64, i64>, levels: &Value) {
        for level in levels.as_array().unwrap() {
            match (i(&level[0]), i(&level[1])) {
                (price, 0) => side.remove(&price),
                (price, qty) => side.insert(price, qty),
            };
        }
    }

    fn add(&mut self, order: u64, side: &str, price: i64, qty: i64) {
        assert!(
            self.orders
                .insert(order, (side.to_string(), price, qty))
                .is_none(),
            "order {order} twice"
        );
        self.queues
            .entry((side.to_string(), price))
            .or_default()
            .push(order);
    }

    fn remove(&mut self, order: u64) {
        let (side, price, _) = self.orders.remove(&order).expect("a known order");
        let queue = self.queues.get_mut(&(side.clone(), price)).unwrap();
        queue.retain(|o| *o != order);
        if queue.is_empty() {
            self.queues.remove(&(side, price));
        }
    }

    fn apply(&mut self, kind: &str, m: &Value, snapshot: bool) {
        match (kind, snapshot) {
            ("book", true) => {
                self.l2_seq = u(&m["seq"]);
                Rebuilt::levels(&mut self.bids, &m["bids"]);
                Rebuilt::levels(&mut self.asks, &m["asks"]);
            }
            ("book", false) => {
                self.l2_seq = u(&m["last"]);
                Rebuilt::levels(&mut self.bids, &m["bids"]);
                Rebuilt::levels(&mut self.asks, &m["asks"]);
            }
            ("orders", true) => {
                self.l3_seq = u(&m["seq"]);
                for (side, orders) in [("buy", &m["bids"]), ("sell", &m["asks"])] {
                    for o in orders.as_array().unwrap() {
                        self.add(u(&o[0]), side, i(&o[1]), i(&o[2]));
                    }
                }
            }
            ("orders", false) => {
                for up in m["updates"].as_array().unwrap() {
                    self.l3_seq = u(&up["seq"]);
                    let order = u(&up["order"]);
                    match up["op"].as_str().unwrap() {
                        "add" => self.add(
                            order,
                            up["side"].as_str().unwrap(),
                            i(&up["price"]),
                            i(&up["qty"]),
                        ),
                        "reduce" => {
                            self.orders.get_mut(&order).expect("a known order").2 = i(&up["qty"])
                        }
                        "execute" => {
                            let left = {
                                let o = self.orders.get_mut(&order).expect("a known order");
                                o.2 -= i(&up["qty"]);
                                o.2
                            };
                            assert!(left >= 0, "{up}");
                            if left == 0 {
                                self.remove(order);
                            }
                        }
                        "delete" => self.remove(order),
                        other => panic!("unknown op {other}"),
                    }
                }
            }
            ("trades", _) => self
                .trades
                .extend(m["trades"].as_array().unwrap().iter().cloned()),
            ("bbo", _) => self.bbo = json!([m["bid"], m["ask"]]),
            ("candles", true) => {
                for c in m["candles"].as_array().unwrap() {
                    self.candles.insert(i(&c["start_ns"]), c.clone());
                }
            }
            _ => {
                let c = &m["candle"];
                self.candles.insert(i(&c["start_ns"]), c.clone());
            }
        }
    }

    /// The L3 book as REST shows it: bids best (highest) first, asks lowest first, each level
    /// in time priority.
    fn l3_side(&self, side: &str) -> Value {
        let mut levels: Vec<(&(String, i64), &Vec<u64>)> =
            self.queues.iter().filter(|((s, _), _)| s == side).collect();
        if side == "buy" {
            levels.reverse();
        }
        let orders = levels
            .into_iter()
            .flat_map(|((_, price), queue)| queue.iter().map(move |o| (o, *price)))
            .map(|(o, price)| json!([o, price, self.orders[o].2]))
            .collect();
        Value::Array(orders)
    }

    /// Differences from what REST shows now (none: the same venue).
    fn differences(&self, addr: SocketAddr) -> Vec<String> {
        let mut out = Vec::new();
        let mut same = |what: &str, rebuilt: Value, rest: Value| {
            if rebuilt != rest {
                out.push(format!("{what}: rebuilt {rebuilt} REST {rest}"));
            }
        };
        let book = get(addr, &format!("/api/v1/book/{SYMBOL}?depth=1000"));
        let side = |levels: &BTreeMap<i64, i64>, best_high: bool| {
            let mut v: Vec<Value> = levels.iter().map(|(p, q)| json!([p, q])).collect();
            if best_high {
                v.reverse();
            }
            Value::Array(v)
        };
        same("L2 seq", json!(self.l2_seq), book["seq"].clone());
        same("L2 bids", side(&self.bids, true), book["bids"].clone());
        same("L2 asks", side(&self.asks, false), book["asks"].clone());
        let top = |levels: &Value| {
            levels
                .as_array()
                .unwrap()
                .first()
                .cloned()
                .unwrap_or(Value::Null)
        };
        same(
            "BBO",
            self.bbo.clone(),
            json!([top(&book["bids"]), top(&book["asks"])]),
        );
        let l3 = get(addr, &format!("/api/v1/book/{SYMBOL}/orders?limit=1000"));
        same("L3 seq", json!(self.l3_seq), l3["seq"].clone());
        same("L3 bids", self.l3_side("buy"), l3["bids"].clone());
        same("L3 asks", self.l3_side("sell"), l3["asks"].clone());
        let trades = get(addr, &format!("/api/v1/trades/{SYMBOL}?limit=1000"));
        let n = trades.as_array().unwrap().len().min(self.trades.len());
        let tail = &self.trades[self.trades.len() - n..];
        let rest_tail = &trades.as_array().unwrap()[trades.as_array().unwrap().len() - n..];
        same("trades", json!(tail), json!(rest_tail));
        let volume = |t: &[Value]| t.iter().map(|t| i(&t["qty"])).sum::<i64>();
        same("volume", json!(volume(tail)), json!(volume(rest_tail)));
        let candles = get(addr, &format!("/api/v1/candles/{SYMBOL}?limit=60"));
        let kept = candles.as_array().unwrap().len();
        let rebuilt: Vec<Value> = self.candles.values().cloned().collect();
        same(
            "candles",
            json!(rebuilt[rebuilt.len().saturating_sub(kept)..]),
            candles,
        );
        out
    }
}

/// Follows all five channels on one connection from the start of trading, checking every
/// message, until the marker order rests (the venue is quiet); then reads on until the
/// rebuilt venue is REST's, and returns the trades it rebuilt.
fn follow_to_the_end(server: &RunningServer, started: &AtomicBool) -> usize {
    let addr = server.web_addr.unwrap();
    let mut ws = ws_connect(server);
    for (id, kind) in CHANNELS.iter().enumerate() {
        ws_send(
            &mut ws,
            json!({"id": id, "op": "subscribe", "ch": format!("{kind}.{SYMBOL}")}),
        );
    }
    started.store(true, Ordering::SeqCst);
    let mut follows: HashMap<&str, Follow> = HashMap::new();
    let mut rebuilt = Rebuilt::default();
    let mut quiet = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "the rebuilt venue never matched REST: {:?}",
            rebuilt.differences(addr)
        );
        // Once quiet, nothing more may come while REST (served by other threads and the
        // history database) catches up: read with a short timeout and look again.
        let m = if quiet {
            match ws_read_within(&mut ws, Duration::from_millis(200)) {
                Some(m) => m,
                None => {
                    if follows.len() == CHANNELS.len() && rebuilt.differences(addr).is_empty() {
                        return rebuilt.trades.len();
                    }
                    continue;
                }
            }
        } else {
            ws_read(&mut ws)
        };
        let Some(kind) = kind_of(&m) else { continue };
        let snapshot = !follows.contains_key(kind);
        match follows.get_mut(kind) {
            Some(f) => f.check(kind, &m),
            None => {
                follows.insert(kind, Follow::snapshot(kind, &m));
            }
        }
        rebuilt.apply(kind, &m, snapshot);
        quiet |= kind == "orders"
            && m["updates"].as_array().is_some_and(|ups| {
                ups.iter()
                    .any(|up| up["op"] == "add" && up["price"] == MARKER_PRICE)
            });
        // Once quiet, every message read may be the last one the venue's state needs.
        if quiet && follows.len() == CHANNELS.len() && rebuilt.differences(addr).is_empty() {
            return rebuilt.trades.len();
        }
    }
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn no_subscription_gets_what_its_snapshot_holds_and_snapshot_plus_stream_is_the_venue() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 0;
        c.gateway.max_msgs_per_sec = 0;
        // The follower reads every message of a busy venue on a shared machine: what is
        // tested is what it receives, not how slow a reader may be (web_limits.rs tests that).
        c.web.max_ws_queue = 1 << 20;
        c.web.max_ws_queue_bytes_public = 256 << 20;
        c.web.max_ws_queue_bytes = 256 << 20;
    });
    let begun = Instant::now();
    let stop = AtomicBool::new(false);
    let follower_started = AtomicBool::new(false);
    let (subscriptions, trades) = std::thread::scope(|s| {
        let traders: Vec<_> = (1..=TRADERS)
            .map(|user| {
                let (server, stop) = (&server, &stop);
                s.spawn(move || trade(server, user, stop))
            })
            .collect();
        let follower = s.spawn(|| follow_to_the_end(&server, &follower_started));
        // A failed check must still stop the traders, or the scope would wait for them.
        let _stop = StopOnDrop(&stop);
        let subscriptions = churn(&server);
        stop.store(true, Ordering::SeqCst);
        let clients: Vec<_> = traders.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(follower_started.load(Ordering::SeqCst));
        // Every trader's commands are applied: the marker comes after all of them.
        let mut marker = common::trader(&server, TRADERS + 1);
        marker
            .place(NewOrder::limit(1, SymbolId(0), Side::Buy, MARKER_PRICE, 1))
            .unwrap();
        answered(&mut marker, 1);
        let trades = follower.join().unwrap();
        drop(clients);
        (subscriptions, trades)
    });
    assert!(subscriptions >= 3_000, "{subscriptions} subscriptions");
    assert!(
        trades > 100,
        "only {trades} trades: the test trades too little to prove much"
    );
    eprintln!(
        "{subscriptions} subscriptions, {trades} trades followed, in {:?}",
        begun.elapsed()
    );
    server.shutdown().unwrap();
}

/// The private `user` channel, subscribed again and again while its user trades: its snapshot
/// says what seq it is as of, and nothing at or below that seq follows it.
#[test]
fn the_user_channel_sends_nothing_its_snapshot_holds() {
    use rialto_server::web::auth::{now_ms, sign, signed_text};
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 0;
        c.gateway.max_msgs_per_sec = 0;
        // The follower reads every message of a busy venue on a shared machine: what is
        // tested is what it receives, not how slow a reader may be (web_limits.rs tests that).
        c.web.max_ws_queue = 1 << 20;
        c.web.max_ws_queue_bytes_public = 256 << 20;
        c.web.max_ws_queue_bytes = 256 << 20;
    });
    let stop = AtomicBool::new(false);
    let (rounds, streamed) = std::thread::scope(|s| {
        let traders: Vec<_> = (1..=TRADERS)
            .map(|user| {
                let (server, stop) = (&server, &stop);
                s.spawn(move || trade(server, user, stop))
            })
            .collect();
        let _stop = StopOnDrop(&stop);
        let mut ws = ws_connect(&server);
        let secret = server.credentials.user_secret(1);
        let ts = now_ms().to_string();
        let sig = sign(&secret, &signed_text("1", &ts, "", "WS", "/ws", b""));
        ws_send(
            &mut ws,
            json!({"id": 0, "op": "login", "key": "1", "ts": ts, "sig": sig}),
        );
        assert_eq!(ws_read(&mut ws)["result"]["user"], 1);
        let mut streamed = 0;
        let rounds = 300u64;
        for round in 1..=rounds {
            ws_send(
                &mut ws,
                json!({"id": 2 * round, "op": "subscribe", "ch": "user"}),
            );
            let mut snapshot_seq = None;
            let mut this_round = 0;
            let mut unsubscribed = false;
            loop {
                let m = ws_read(&mut ws);
                if m.get("id").is_some_and(|id| id == 2 * round + 1) {
                    break;
                }
                // Unsubscribe once this subscription has streamed something.
                if this_round == 1 && !unsubscribed {
                    unsubscribed = true;
                    ws_send(
                        &mut ws,
                        json!({"id": 2 * round + 1, "op": "unsubscribe", "ch": "user"}),
                    );
                }
                if m["ch"] != "user" {
                    continue; // the subscribe answer
                }
                let seq = u(&m["seq"]);
                match (m["type"].as_str(), snapshot_seq) {
                    (Some("balances") | Some("orders"), None) => {
                        if m["type"] == "orders" {
                            snapshot_seq = Some(seq);
                        }
                    }
                    // On a venue with futures the snapshot ends with the positions.
                    (Some("positions"), Some(s)) if seq == s => {}
                    (_, Some(s)) => {
                        assert!(seq > s, "{m} after a snapshot as of seq {s}");
                        streamed += 1;
                        this_round += 1;
                    }
                    (_, None) => panic!("a stream message before the snapshot: {m}"),
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        drop(
            traders
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>(),
        );
        (rounds, streamed)
    });
    assert!(streamed >= rounds, "only {streamed} stream messages");
    eprintln!("{rounds} user subscriptions, {streamed} stream messages after their snapshots");
    server.shutdown().unwrap();
}
