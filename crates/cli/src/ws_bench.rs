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
use hdrhistogram::Histogram;
use rialto_client::Client;
use rialto_core::{Side, SymbolId};
use rialto_server::config::{DurabilityMode, ServerConfig};
use rialto_server::pipeline::now_ns;
use rialto_server::web::fanout::book_diff;
use rialto_server::web::outbox::text_frame;
use rialto_wire::{ClientMsg, NewOrder};

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
    /// Skip the floor: the same fan-out from one thread writing one pre-encoded frame to
    /// plain sockets, measured first with the same subscribers
    #[arg(long)]
    pub no_floor: bool,
}

/// The integer after `"key":` in the head of a JSON text (a book diff names its sequence
/// numbers and time before its levels, so the subscribers never scan the levels).
fn field(head: &[u8], key: &[u8]) -> Option<i64> {
    let at = head.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = head[at..].strip_prefix(b":")?;
    let (negative, digits) = match rest.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, rest),
    };
    let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    let value: i64 = std::str::from_utf8(&digits[..len]).ok()?.parse().ok()?;
    Some(if negative { -value } else { value })
}

#[derive(Default)]
struct Totals {
    messages: AtomicU64,
    updates: AtomicU64,
    closed: AtomicU64,
    /// Diffs whose `first` was not the previous diff's `last` + 1.
    gaps: AtomicU64,
}

/// One WebSocket frame from the server: (opcode, payload, bytes it took), or `None` when the
/// buffer does not hold all of it yet.
pub(crate) fn server_frame(buf: &[u8]) -> anyhow::Result<Option<(u8, &[u8], usize)>> {
    let [b0, b1, ..] = *buf else { return Ok(None) };
    anyhow::ensure!(
        b0 & 0x80 != 0,
        "a fragmented message (the server sends whole ones)"
    );
    anyhow::ensure!(b1 & 0x80 == 0, "a masked frame from the server");
    let (len, header) = match b1 & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (
            u64::from_be_bytes(buf[2..10].try_into().expect("8 bytes")) as usize,
            10,
        ),
        126 | 127 => return Ok(None),
        n => (n as usize, 2),
    };
    let total = header + len;
    Ok((buf.len() >= total).then(|| (b0 & 0x0f, &buf[header..total], total)))
}

/// A client's text frame: masked, as RFC 6455 requires of clients.
pub(crate) fn client_text_frame(text: &str) -> Vec<u8> {
    let mask = [0x5a, 0x17, 0xc3, 0x9e];
    let mut frame = vec![0x81];
    match text.len() {
        n @ 0..126 => frame.push(0x80 | n as u8),
        n => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(text.bytes().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    frame
}

/// A subscriber that does no more than it must, so that the machine's time goes to the server
/// being measured: its own WebSocket framing over a plain socket (the handshake, then whole
/// frames parsed in place from a buffer that is never zeroed), and only the head of each diff
/// read. It checks that each diff follows the one before.
async fn subscriber(
    addr: std::net::SocketAddr,
    rcvbuf: u32,
    measuring: Arc<AtomicBool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    totals: Arc<Totals>,
    ready: tokio::sync::mpsc::Sender<()>,
) -> anyhow::Result<Histogram<u64>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    if rcvbuf > 0 {
        socket.set_recv_buffer_size(rcvbuf)?;
    }
    let mut stream = socket.connect(addr).await?;
    stream.set_nodelay(true)?;
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let head_end = loop {
        anyhow::ensure!(
            stream.read_buf(&mut buf).await? > 0,
            "closed in the handshake"
        );
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    anyhow::ensure!(buf.starts_with(b"HTTP/1.1 101"), "the upgrade was refused");
    buf.drain(..head_end);
    let subscribe = client_text_frame(r#"{"id":1,"op":"subscribe","ch":"book.BTC-USD"}"#);
    stream.write_all(&subscribe).await?;

    let mut announced = false;
    let mut last_seq: Option<i64> = None;
    loop {
        let mut consumed = 0;
        while let Some((opcode, payload, len)) = server_frame(&buf[consumed..])? {
            consumed += len;
            match opcode {
                0x1 => {}
                0x8 => {
                    totals.closed.fetch_add(1, Ordering::Relaxed);
                    return Ok(hist);
                }
                _ => continue,
            }
            if !announced {
                // The snapshot comes first, then the reply to the subscription.
                announced = true;
                let _ = ready.send(()).await;
                continue;
            }
            let head = &payload[..payload.len().min(256)];
            let (Some(first), Some(last), Some(ts)) = (
                field(head, b"\"first\""),
                field(head, b"\"last\""),
                field(head, b"\"ts_ns\""),
            ) else {
                continue; // the reply to the subscription
            };
            if !measuring.load(Ordering::Relaxed) {
                last_seq = Some(last);
                continue;
            }
            if last_seq.is_some_and(|seq| first != seq + 1) {
                totals.gaps.fetch_add(1, Ordering::Relaxed);
            }
            last_seq = Some(last);
            hist.saturating_record((now_ns() - ts).max(1) as u64);
            totals.messages.fetch_add(1, Ordering::Relaxed);
            totals
                .updates
                .fetch_add((last - first + 1).max(0) as u64, Ordering::Relaxed);
        }
        buf.drain(..consumed);
        buf.reserve(16 * 1024);
        tokio::select! {
            read = stream.read_buf(&mut buf) => {
                if read? == 0 {
                    totals.closed.fetch_add(1, Ordering::Relaxed);
                    return Ok(hist);
                }
            }
            _ = stop.changed() => return Ok(hist),
        }
    }
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

/// What one pass measured.
struct Measured {
    hist: Histogram<u64>,
    seconds: f64,
    /// L2 updates the source produced while measuring.
    produced: u64,
    totals: Arc<Totals>,
}

impl Measured {
    fn print(&self, label: &str, args: &WsBenchArgs) {
        let per_s = |n: u64| n as f64 / self.seconds;
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        println!(
            "{label}: subscribers {}, L2 updates {:.0}/s (offered {}), diffs delivered {:.0}/s in all ({:.0} updates/s in all), connections closed {}, gaps {}",
            args.subscribers,
            per_s(self.produced),
            args.rate,
            per_s(load(&self.totals.messages)),
            per_s(load(&self.totals.updates)),
            load(&self.totals.closed),
            load(&self.totals.gaps),
        );
        let us = |q: f64| self.hist.value_at_quantile(q) as f64 / 1e3;
        println!(
            "{label}: delivery latency (us): p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}",
            us(0.5),
            us(0.9),
            us(0.99),
            us(0.999),
            self.hist.max() as f64 / 1e3
        );
    }
}

/// Connects the subscribers to `addr`, waits for every snapshot, starts the source with
/// `start_source`, warms up for two seconds and measures for `args.seconds`, then stops the
/// source before the subscribers; `produced` reads the source's count of L2 updates so far.
fn measure(
    args: &WsBenchArgs,
    addr: std::net::SocketAddr,
    start_source: impl FnOnce(),
    stop_source: impl FnOnce(),
    produced: impl Fn() -> u64,
) -> anyhow::Result<Measured> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads)
        .enable_all()
        .build()?;
    let measuring = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let totals = Arc::new(Totals::default());
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(args.subscribers);
    let tasks: Vec<_> = (0..args.subscribers)
        .map(|_| {
            runtime.spawn(subscriber(
                addr,
                args.client_rcvbuf,
                measuring.clone(),
                stopped.clone(),
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
    start_source();
    std::thread::sleep(Duration::from_secs(2));
    let produced0 = produced();
    measuring.store(true, Ordering::SeqCst);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(args.seconds));
    measuring.store(false, Ordering::SeqCst);
    let seconds = started.elapsed().as_secs_f64();
    let produced = produced() - produced0;
    stop_source();
    let _ = stop.send(true);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    for t in tasks {
        if let Ok(Ok(h)) = runtime.block_on(t) {
            hist.add(h)?;
        }
    }
    Ok(Measured {
        hist,
        seconds,
        produced,
        totals,
    })
}

/// The floor: the least any server could do for this fan-out in the same layout. One thread
/// makes the same stream of L2 updates (stamped with the millisecond they are due, as the
/// trader's batches are), merges whatever is due into one diff with Rialto's encoder and
/// framing, and writes that one frame to every subscriber's plain blocking socket, then again. No engine,
/// no journal, no runtime, no queue per connection.
fn floor_server(
    listener: std::net::TcpListener,
    args: &WsBenchArgs,
    produced: Arc<AtomicU64>,
    go: std::sync::mpsc::Receiver<()>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let mut sockets = Vec::with_capacity(args.subscribers);
    while sockets.len() < args.subscribers {
        let (mut socket, _) = listener.accept()?;
        socket.set_nodelay(true)?;
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            anyhow::ensure!(socket.read(&mut byte)? == 1, "closed in the handshake");
            head.push(byte[0]);
        }
        // The accept key of the subscribers' fixed key (RFC 6455's own example).
        socket.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        )?;
        socket.write_all(&text_frame(
            r#"{"ch":"book.BTC-USD","type":"snapshot","seq":0,"bids":[],"asks":[]}"#,
        ))?;
        sockets.push(socket);
    }
    go.recv()?;
    let per_ms = (args.rate / 1000).max(1);
    let levels = args.levels.max(1);
    let mut totals = vec![0i64; levels as usize];
    let mut round = std::collections::BTreeMap::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let (start, start_ns) = (Instant::now(), now_ns());
    let (mut due_ms, mut seq) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let now_ms = start.elapsed().as_millis() as u64;
        let (first, mut oldest_ns) = (seq + 1, None);
        while due_ms < now_ms {
            due_ms += 1;
            oldest_ns.get_or_insert(start_ns + due_ms as i64 * 1_000_000);
            for _ in 0..per_ms {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let level = (rng % levels) as usize;
                // An order added, or one taken away when the level has any.
                totals[level] += if rng & (1 << 40) != 0 || totals[level] == 0 {
                    1
                } else {
                    -1
                };
                seq += 1;
                round.insert((Side::Buy, 400_000 + level as i64), totals[level]);
            }
        }
        let Some(oldest_ns) = oldest_ns else {
            std::thread::sleep(
                (start + Duration::from_millis(due_ms + 1))
                    .saturating_duration_since(Instant::now()),
            );
            continue;
        };
        let diff = book_diff("BTC-USD", first, seq, oldest_ns, None, &round, None);
        let frame = text_frame(&diff);
        for socket in &mut sockets {
            match socket.write_all(&frame) {
                Ok(()) => {}
                // The subscribers go once the measurement is over.
                Err(_) if stop.load(Ordering::Relaxed) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        produced.store(seq, Ordering::Relaxed);
        round.clear();
    }
    Ok(())
}

fn measure_floor(args: &WsBenchArgs) -> anyhow::Result<Measured> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let produced = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let server =
            scope.spawn(|| floor_server(listener, args, produced.clone(), go_rx, stop.clone()));
        let measured = measure(
            args,
            addr,
            // Moved in: if measuring fails before the start, the server stops waiting.
            move || {
                let _ = go_tx.send(());
            },
            || stop.store(true, Ordering::SeqCst),
            || produced.load(Ordering::Relaxed),
        );
        stop.store(true, Ordering::SeqCst);
        let served = server
            .join()
            .map_err(|_| anyhow::anyhow!("the floor's server panicked"))?;
        served.and(measured)
    })
}

fn measure_rialto(args: &WsBenchArgs) -> anyhow::Result<Measured> {
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
    let web_addr = server.web_addr.context("web is on")?;
    let driver_stop = Arc::new(AtomicBool::new(false));
    let mut driver = None;
    let l2_seq = || {
        server
            .market_data
            .feed()
            .bbo(SymbolId(0))
            .map_or(0, |b| b.0)
    };
    let measured = measure(
        args,
        web_addr,
        || {
            let (addr, secret, rate, levels, stop) = (
                server.order_addr,
                server.credentials.user_secret(1),
                args.rate,
                args.levels.max(1),
                driver_stop.clone(),
            );
            driver = Some(std::thread::spawn(move || {
                drive(addr, secret, rate, levels, stop)
            }));
        },
        || driver_stop.store(true, Ordering::SeqCst),
        l2_seq,
    );
    driver_stop.store(true, Ordering::SeqCst);
    if let Some(driver) = driver {
        driver
            .join()
            .map_err(|_| anyhow::anyhow!("driver panicked"))??;
    }
    server.shutdown()?;
    measured
}

pub fn run(args: &WsBenchArgs) -> anyhow::Result<()> {
    eprintln!(
        "{} subscribers; {} L2 updates/s over {} levels; the floor first",
        args.subscribers, args.rate, args.levels
    );
    let floor = if args.no_floor {
        None
    } else {
        Some(measure_floor(args)?)
    };
    let rialto = measure_rialto(args)?;
    if let Some(floor) = &floor {
        floor.print("floor", args);
    }
    rialto.print("rialto", args);
    Ok(())
}
