//! `rialto bench fix-md`: FIX market data against the WebSocket feed, in one server. A trader
//! places bids at new price levels at a fixed rate (cancelling each a while later); one FIX
//! session subscribed to BTC-USD's book (MarketDataRequest) and one WebSocket connection
//! subscribed to `book.BTC-USD` each stamp the arrival of every new level. A level's latency
//! runs from the sequencer's time of its order (which the order's acknowledgement carries) to
//! the arrival of the X, or of the WebSocket diff, that shows it.
//!
//! Server and clients run in this one process on loopback, sharing the machine's cores.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use rialto_core::{Side, SymbolId};
use rialto_fix::{Decimal, MessageWriter, next_frame, tags};
use rialto_server::config::ServerConfig;
use rialto_server::pipeline::now_ns;
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};

use crate::ws_bench::{client_text_frame, server_frame};

#[derive(Args, Debug)]
pub struct FixMdBenchArgs {
    /// New bid levels per second (each order is cancelled `window` orders later, so the
    /// engine takes twice this many commands)
    #[arg(long, default_value_t = 1_000)]
    pub rate: u64,
    /// Measured seconds (after one second of warm-up)
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Orders resting at once (each at a level of its own; at most 100, FIX's full depth)
    #[arg(long, default_value_t = 50)]
    pub window: u64,
}

/// Bids go to BASE_PRICE + (order % LEVELS) ticks: a level is new when its order is placed.
const BASE_PRICE: i64 = 100_000;
const LEVELS: i64 = 200;

/// A new level seen by a client: (price in ticks, arrival ns).
type Arrivals = Vec<(i64, i64)>;

/// The FIX subscriber: logs on as `TRADER2`, subscribes to BTC-USD's bids, and stamps each
/// X entry that adds a bid level.
fn fix_subscriber(
    addr: SocketAddr,
    password: String,
    ready: std::sync::mpsc::Sender<()>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Arrivals> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut seq = 1;
    let mut send = |stream: &mut TcpStream, msg_type: &[u8], fields: &[(u32, &[u8])]| {
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type);
        w.str(tags::SENDER_COMP_ID, b"TRADER2")
            .str(tags::TARGET_COMP_ID, b"RIALTO")
            .uint(tags::MSG_SEQ_NUM, seq)
            .timestamp(tags::SENDING_TIME, now_ns());
        for (tag, value) in fields {
            w.str(*tag, value);
        }
        w.finish();
        seq += 1;
        stream.write_all(&out)
    };
    send(
        &mut stream,
        b"A",
        &[
            (tags::ENCRYPT_METHOD, b"0"),
            (tags::HEART_BT_INT, b"30"),
            (tags::USERNAME, b"2"),
            (tags::PASSWORD, password.as_bytes()),
        ],
    )?;
    let request: &[(u32, &[u8])] = &[
        (tags::MD_REQ_ID, b"BENCH"),
        (tags::SUBSCRIPTION_REQUEST_TYPE, b"1"),
        (tags::MARKET_DEPTH, b"0"),
        (tags::NO_MD_ENTRY_TYPES, b"1"),
        (tags::MD_ENTRY_TYPE, b"0"),
        (tags::NO_RELATED_SYM, b"1"),
        (tags::SYMBOL, b"BTC-USD"),
    ];
    let tick = Decimal::new(1, 2);
    let mut arrivals = Vec::new();
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    let mut subscribed = false;
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut chunk) {
            Ok(0) => anyhow::bail!("the FIX connection closed"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let arrived = now_ns();
        let mut consumed = 0;
        while let Ok(Some((frame, len))) = next_frame(&buf[consumed..], 1 << 20) {
            consumed += len;
            match frame.msg_type {
                b"A" if !subscribed => {
                    subscribed = true;
                    send(&mut stream, b"V", request)?;
                }
                b"W" => {
                    let _ = ready.send(());
                }
                b"X" => {
                    let mut new_bid = false;
                    for f in frame.fields().filter_map(Result::ok) {
                        match f.tag {
                            tags::MD_UPDATE_ACTION => new_bid = f.value == b"0",
                            tags::MD_ENTRY_TYPE => new_bid &= f.value == b"0",
                            tags::MD_ENTRY_PX if new_bid => {
                                let price = Decimal::parse(f.value)
                                    .ok()
                                    .and_then(|p| p.to_units(tick).ok())
                                    .context("an MDEntryPx off the tick")?;
                                arrivals.push((price, arrived));
                            }
                            _ => {}
                        }
                    }
                }
                b"Y" | b"3" | b"5" => anyhow::bail!("refused: {:?}", frame),
                _ => {}
            }
        }
        buf.drain(..consumed);
    }
    Ok(arrivals)
}

/// The WebSocket subscriber: `book.BTC-USD`, stamping each level that a diff shows with a
/// quantity (a new level: the trader's orders are each alone at their level).
fn ws_subscriber(
    addr: SocketAddr,
    ready: std::sync::mpsc::Sender<()>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Arrivals> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let request = format!(
        "GET /ws?units=int HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    let mut upgraded = false;
    let mut arrivals = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut chunk) {
            Ok(0) => anyhow::bail!("the WebSocket closed"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let arrived = now_ns();
        if !upgraded {
            let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            anyhow::ensure!(buf.starts_with(b"HTTP/1.1 101"), "the upgrade was refused");
            buf.drain(..at + 4);
            upgraded = true;
            stream.write_all(&client_text_frame(
                r#"{"id":1,"op":"subscribe","ch":"book.BTC-USD"}"#,
            ))?;
        }
        let mut consumed = 0;
        while let Some((opcode, payload, len)) = server_frame(&buf[consumed..])? {
            consumed += len;
            if opcode != 0x1 {
                continue;
            }
            let m: serde_json::Value = serde_json::from_slice(payload)?;
            match m["type"].as_str() {
                Some("snapshot") => {
                    let _ = ready.send(());
                }
                Some("diff") => {
                    for level in m["bids"].as_array().into_iter().flatten() {
                        if level[1].as_i64().is_some_and(|q| q > 0) {
                            arrivals.push((level[0].as_i64().unwrap_or(0), arrived));
                        }
                    }
                }
                _ => {}
            }
        }
        buf.drain(..consumed);
    }
    Ok(arrivals)
}

/// Latencies of the new levels a client saw, matched in order to the orders that made them:
/// (placed at, sequencer ns) → histogram of arrival − sequencer time, for orders placed after
/// the warm-up.
fn latencies(placed: &[(i64, i64)], arrivals: &Arrivals, from_ns: i64) -> (Histogram<u64>, usize) {
    let mut due: HashMap<i64, VecDeque<i64>> = HashMap::new();
    for &(price, ts) in placed {
        due.entry(price).or_default().push_back(ts);
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let mut unmatched = 0;
    for &(price, arrived) in arrivals {
        match due.get_mut(&price).and_then(VecDeque::pop_front) {
            Some(ts) if ts >= from_ns => hist.saturating_record((arrived - ts).max(1) as u64),
            Some(_) => {}
            None => unmatched += 1,
        }
    }
    (hist, unmatched)
}

pub fn run(args: &FixMdBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=100).contains(&args.window) && args.rate > 0,
        "--window must be 1-100, --rate above 0"
    );
    let data = tempfile::tempdir()?;
    let mut config = ServerConfig {
        data_dir: data.path().to_path_buf(),
        listen: "127.0.0.1:0".parse()?,
        admin_listen: "127.0.0.1:0".parse()?,
        demo: true,
        ..ServerConfig::default()
    };
    config.gateway.max_msgs_per_sec = 0;
    config.fix.listen = "127.0.0.1:0".parse()?;
    config.web.listen = "127.0.0.1:0".parse()?;
    let server = rialto_server::start(config)?;
    let fix_addr = server.fix_addr.context("FIX is on")?;
    let web_addr = server.web_addr.context("web is on")?;
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let fix = {
        let (password, ready, stop) = (
            server.credentials.user_secret(2),
            ready_tx.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || fix_subscriber(fix_addr, password, ready, stop))
    };
    let ws = {
        let (ready, stop) = (ready_tx, stop.clone());
        std::thread::spawn(move || ws_subscriber(web_addr, ready, stop))
    };
    for _ in 0..2 {
        ready
            .recv_timeout(Duration::from_secs(10))
            .context("a subscriber got no snapshot")?;
    }

    // The trader: one new level every 1/rate s; the order `window` before is cancelled first.
    let mut trader = rialto_client::Client::connect(server.order_addr)?;
    trader.set_read_timeout(Some(Duration::from_secs(10)))?;
    trader.login(1, server.credentials.user_secret(1).as_bytes())?;
    let orders = (args.seconds + 1) * args.rate;
    let start = Instant::now();
    let warm_up_ends = now_ns() + 1_000_000_000;
    let mut placed: Vec<(i64, i64)> = Vec::with_capacity(orders as usize);
    let mut acks = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    for i in 0..orders as i64 {
        let due = start + Duration::from_nanos(i as u64 * 1_000_000_000 / args.rate);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let mut batch = Vec::with_capacity(2);
        if i >= args.window as i64 {
            batch.push(ClientMsg::Cancel {
                order: i + 1 - args.window as i64,
            });
        }
        let price = BASE_PRICE + i % LEVELS;
        batch.push(ClientMsg::NewOrder(NewOrder::limit(
            i + 1,
            SymbolId(0),
            Side::Buy,
            price,
            1,
        )));
        trader.send_batch(&batch)?;
        loop {
            match trader.recv()? {
                ServerMsg::Accepted { order, ts_ns, .. } if order == i + 1 => {
                    let now = now_ns();
                    if ts_ns >= warm_up_ends {
                        acks.saturating_record((now - ts_ns).max(1) as u64);
                    }
                    placed.push((price, ts_ns));
                    break;
                }
                ServerMsg::Rejected { order, reason, .. } if order == i + 1 => {
                    anyhow::bail!("order {order} rejected: {reason:?}")
                }
                _ => {}
            }
        }
    }
    let offered = orders as f64 / start.elapsed().as_secs_f64();
    // Let the last updates arrive, then stop the subscribers.
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    let fix = fix
        .join()
        .map_err(|_| anyhow::anyhow!("FIX subscriber panicked"))??;
    let ws = ws
        .join()
        .map_err(|_| anyhow::anyhow!("WS subscriber panicked"))??;
    server.shutdown()?;

    let (fix_hist, fix_unmatched) = latencies(&placed, &fix, warm_up_ends);
    let (ws_hist, ws_unmatched) = latencies(&placed, &ws, warm_up_ends);
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "{} new levels at {:.0}/s ({} measured); from the sequencer's time of each order:",
        orders,
        offered,
        acks.len()
    );
    for (name, hist, seen, unmatched) in [
        ("acknowledgement", &acks, placed.len(), 0),
        ("FIX X", &fix_hist, fix.len(), fix_unmatched),
        ("WebSocket diff", &ws_hist, ws.len(), ws_unmatched),
    ] {
        println!(
            "  {name:<16} p50 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms  ({} samples, {seen} seen, {unmatched} unmatched)",
            ms(hist.value_at_quantile(0.5)),
            ms(hist.value_at_quantile(0.99)),
            ms(hist.value_at_quantile(0.999)),
            ms(hist.max()),
            hist.len(),
        );
    }
    let ratio =
        |q| fix_hist.value_at_quantile(q) as f64 / ws_hist.value_at_quantile(q).max(1) as f64;
    println!(
        "  FIX / WebSocket: p50 {:.2}x, p99 {:.2}x",
        ratio(0.5),
        ratio(0.99)
    );
    Ok(())
}
