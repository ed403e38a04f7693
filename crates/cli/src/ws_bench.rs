//! `rialto bench ws`: WebSocket fan-out. Many subscribers follow one symbol's book stream
//! while a trader changes the book at a fixed rate of L2 updates per second; each subscriber
//! measures, for every diff it receives, the time from the sequencer's stamp on the oldest
//! command the diff carries to its arrival (so a diff's latency is that of its oldest update).
//!
//! Server and subscribers run in this one process on loopback, sharing the machine's cores.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use rialto_client::Client;
use rialto_core::{Side, SymbolId};
use rialto_server::config::{DurabilityMode, ServerConfig};
use rialto_server::pipeline::now_ns;
use rialto_wire::{ClientMsg, NewOrder};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

#[derive(Args, Debug)]
pub struct WsBenchArgs {
    /// WebSocket connections subscribed to book.BTC-USD
    #[arg(long, default_value_t = 1_000)]
    pub subscribers: usize,
    /// L2 updates per second to cause (half order placements, half cancellations)
    #[arg(long, default_value_t = 50_000)]
    pub rate: u64,
    /// Measured seconds (after two seconds of warm-up)
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Threads for the subscribers' runtime
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Bid levels the updates spread over, uniformly. A diff carries each level it names once,
    /// so the fewer the levels, the more updates merge (a busy top of book); the default is
    /// the hard case
    #[arg(long, default_value_t = 2_000)]
    pub levels: u64,
    /// Each subscriber's socket receive buffer in bytes (0: the system's, which grows to
    /// megabytes). A small one makes a subscriber that cannot keep up push back on the server
    /// at once, instead of messages queueing unread in the kernel
    #[arg(long, default_value_t = 0)]
    pub client_rcvbuf: u32,
}

/// The integer after `"key":` in a JSON text (the subscribers read only what they measure).
fn field(text: &str, key: &str) -> Option<i64> {
    let at = text.find(key)? + key.len();
    let digits: String = text[at..]
        .chars()
        .skip_while(|c| *c == '"' || *c == ':')
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

#[derive(Default)]
struct Totals {
    messages: AtomicU64,
    updates: AtomicU64,
    closed: AtomicU64,
}

async fn subscriber(
    url: String,
    rcvbuf: u32,
    measuring: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    totals: Arc<Totals>,
    ready: tokio::sync::mpsc::Sender<()>,
) -> anyhow::Result<Histogram<u64>> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    // The library zeroes its whole read buffer (128 KiB by default) before every read; with
    // many small messages that zeroing would be most of a subscriber's work.
    let config = WebSocketConfig::default().read_buffer_size(16 * 1024);
    let addr: std::net::SocketAddr = url
        .trim_start_matches("ws://")
        .trim_end_matches("/ws")
        .parse()?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    if rcvbuf > 0 {
        socket.set_recv_buffer_size(rcvbuf)?;
    }
    let stream = socket.connect(addr).await?;
    let (mut ws, _) =
        tokio_tungstenite::client_async_with_config(&url, stream, Some(config)).await?;
    ws.send(Message::text(
        r#"{"id":1,"op":"subscribe","ch":"book.BTC-USD"}"#,
    ))
    .await?;
    let mut announced = false;
    while !stop.load(Ordering::Relaxed) {
        let next = tokio::time::timeout(Duration::from_millis(200), ws.next()).await;
        let text = match next {
            Err(_) => continue,
            Ok(Some(Ok(Message::Text(t)))) => t,
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(_)) | None) => {
                totals.closed.fetch_add(1, Ordering::Relaxed);
                break;
            }
        };
        if !announced && text.contains("\"snapshot\"") {
            announced = true;
            let _ = ready.send(()).await;
            continue;
        }
        if !text.contains("\"diff\"") || !measuring.load(Ordering::Relaxed) {
            continue;
        }
        if let (Some(ts), Some(first), Some(last)) = (
            field(&text, "\"ts_ns\""),
            field(&text, "\"first\""),
            field(&text, "\"last\""),
        ) {
            hist.saturating_record((now_ns() - ts).max(1) as u64);
            totals.messages.fetch_add(1, Ordering::Relaxed);
            totals
                .updates
                .fetch_add((last - first + 1).max(0) as u64, Ordering::Relaxed);
        }
    }
    Ok(hist)
}

/// Places and cancels orders on bid levels far from any ask, so that each command changes
/// exactly one level and nothing trades.
fn drive(
    addr: std::net::SocketAddr,
    secret: String,
    rate: u64,
    levels: u64,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut client = Client::connect(addr)?;
    client.login(1, secret.as_bytes())?;
    client.set_read_timeout(Some(Duration::from_millis(1)))?;
    let per_ms = (rate / 2 / 1000).max(1);
    let mut next_order = 1i64;
    let mut live = std::collections::VecDeque::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let start = Instant::now();
    let mut ticks = 0u64;
    while !stop.load(Ordering::Relaxed) {
        ticks += 1;
        let mut batch = Vec::with_capacity(per_ms as usize * 2);
        for _ in 0..per_ms {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let price = 400_000 + (rng % levels) as i64;
            batch.push(ClientMsg::NewOrder(NewOrder::limit(
                next_order,
                SymbolId(0),
                Side::Buy,
                price,
                1,
            )));
            live.push_back(next_order);
            next_order += 1;
            if live.len() > 1_000 {
                let order = live.pop_front().expect("not empty");
                batch.push(ClientMsg::Cancel { order });
            }
        }
        client.send_batch(&batch)?;
        while let Ok(Some(_)) = client.try_recv() {}
        // Keep the schedule: one batch per millisecond since the start.
        let due = start + Duration::from_millis(ticks);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

pub fn run(args: &WsBenchArgs) -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let mut config = ServerConfig {
        data_dir: data.path().to_path_buf(),
        listen: "127.0.0.1:0".parse()?,
        admin_listen: "127.0.0.1:0".parse()?,
        demo: true,
        ..ServerConfig::default()
    };
    config.journal.durability = DurabilityMode::None;
    config.fix.enabled = false;
    config.gateway.max_msgs_per_sec = 0;
    config.web.listen = "127.0.0.1:0".parse()?;
    config.web.max_ws_connections = args.subscribers + 16;
    let server = rialto_server::start(config)?;
    let url = format!("ws://{}/ws", server.web_addr.context("web is on")?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads)
        .enable_all()
        .build()?;
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let totals = Arc::new(Totals::default());
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(args.subscribers);
    let tasks: Vec<_> = (0..args.subscribers)
        .map(|_| {
            runtime.spawn(subscriber(
                url.clone(),
                args.client_rcvbuf,
                measuring.clone(),
                stop.clone(),
                totals.clone(),
                ready_tx.clone(),
            ))
        })
        .collect();
    runtime.block_on(async {
        for _ in 0..args.subscribers {
            ready_rx.recv().await;
        }
    });
    eprintln!(
        "{} subscribers have their snapshots; driving {} L2 updates/s over {} levels",
        args.subscribers, args.rate, args.levels
    );

    let driver_stop = Arc::new(AtomicBool::new(false));
    let driver = {
        let (addr, secret, rate, levels, stop) = (
            server.order_addr,
            server.credentials.user_secret(1),
            args.rate,
            args.levels.max(1),
            driver_stop.clone(),
        );
        std::thread::spawn(move || drive(addr, secret, rate, levels, stop))
    };
    std::thread::sleep(Duration::from_secs(2));
    let l2_seq = || {
        server
            .market_data
            .feed()
            .bbo(SymbolId(0))
            .map_or(0, |b| b.0)
    };
    let seq0 = l2_seq();
    measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(args.seconds));
    measuring.store(false, Ordering::SeqCst);
    let elapsed = started.elapsed().as_secs_f64();
    let produced = l2_seq() - seq0;
    driver_stop.store(true, Ordering::SeqCst);
    driver
        .join()
        .map_err(|_| anyhow::anyhow!("driver panicked"))??;
    stop.store(true, Ordering::SeqCst);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    for t in tasks {
        if let Ok(Ok(h)) = runtime.block_on(t) {
            hist.add(h)?;
        }
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
    println!(
        "subscribers {}, L2 updates {:.0}/s (offered {}), diffs delivered {:.0}/s in all ({:.0} updates/s in all), connections closed {}",
        args.subscribers,
        produced as f64 / elapsed,
        args.rate,
        totals.messages.load(Ordering::Relaxed) as f64 / elapsed,
        totals.updates.load(Ordering::Relaxed) as f64 / elapsed,
        totals.closed.load(Ordering::Relaxed),
    );
    println!(
        "delivery latency (us): p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}",
        us(0.5),
        us(0.9),
        us(0.99),
        us(0.999),
        hist.max() as f64 / 1e3
    );
    server.shutdown()?;
    Ok(())
}
