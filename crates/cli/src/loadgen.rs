//! `rialto loadgen`: offers orders to a running server at fixed rates and measures each
//! command's latency from its *scheduled* send time to its acknowledgement, so that a stall
//! delays (and is charged to) every command scheduled behind it: no coordinated omission.
//!
//! Beside Rialto's figures it measures the floor: a bare 64-byte ping-pong over the same
//! loopback in the same socket mode, so the table shows what the network alone costs here.
//! And before each rate, that rate's floor: the same schedule, connections and socket mode
//! against a bare echo instead of a server, so that Rialto's tails can be read against what
//! this machine does to any open-loop measurement (a stall of either CPU holds up everything
//! scheduled behind it, which a ping-pong charges to one round trip only).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use rialto_bench::rng::Rng;
use rialto_bench::workload::Mix;
use rialto_client::Client;
use rialto_core::{Name, Reason, Side, SymbolId, SymbolSpec, Tif};
use rialto_wire::{ClientMsg, NewOrder, Secret, ServerMsg, decode_server, encode_client};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IoMode {
    /// Busy-poll non-blocking sockets (lowest latency; takes a core).
    Spin,
    /// Sleep between sends instead of spinning; the floor uses blocking reads.
    Block,
}

#[derive(Args, Debug)]
pub struct LoadgenArgs {
    /// A running server's order gateway (127.0.0.1:9100 for `rialto serve`): the load goes
    /// there, and its LOADGEN symbol and users stay in that venue's journal. Without it the
    /// load generator starts a venue of its own (`rialto serve` on a temporary data directory,
    /// stopped and removed at the end)
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// The running server's admin listener (the load generator creates its own symbol and
    /// users); only with --addr
    #[arg(long, default_value = "127.0.0.1:9101")]
    pub admin_addr: SocketAddr,
    /// Admin secret [default: derived from the venue key in --data]; only with --addr
    #[arg(long)]
    pub admin_secret: Option<String>,
    /// The running server's data directory, to read the venue key from; only with --addr
    #[arg(long, default_value = "data")]
    pub data: PathBuf,
    /// Connections, each logged in as its own user
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Offered rates, commands per second, one table row each
    #[arg(long, value_delimiter = ',', default_value = "10000,50000,100000")]
    pub rates: Vec<u64>,
    /// Measured seconds per rate
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Unmeasured seconds before each rate's measurement
    #[arg(long, default_value_t = 1.0)]
    pub warmup_seconds: f64,
    /// Socket mode of the load generator and of the floor measurement
    #[arg(long, value_enum, default_value_t = IoMode::Spin)]
    pub io: IoMode,
    /// Round trips of the floor measurement (0: skip it)
    #[arg(long, default_value_t = 50_000)]
    pub floor_round_trips: u64,
    /// Skip each rate's floor (the same schedule against a bare echo)
    #[arg(long)]
    pub no_rate_floor: bool,
    /// Most live orders per connection; beyond it new orders are replaced by cancels
    #[arg(long, default_value_t = 200)]
    pub max_live_orders: usize,
    /// Pin the load generator (and the floor's client) to this CPU
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Pin the floor's echo thread, which stands in for the server, to this CPU (give the one
    /// the server's `pipeline.gateway_cpu` names, so that the floor is measured across the
    /// same two CPUs as Rialto)
    #[arg(long)]
    pub floor_echo_cpu: Option<usize>,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
}

/// Latency percentiles of one run, nanoseconds.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub label: String,
    pub offered_per_sec: u64,
    pub achieved_per_sec: f64,
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
    pub rejected: u64,
}

impl Row {
    pub fn from_histogram(label: String, offered: u64, achieved: f64, h: &Histogram<u64>) -> Row {
        Row {
            label,
            offered_per_sec: offered,
            achieved_per_sec: achieved,
            count: h.len(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
            rejected: 0,
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "label": self.label, "offered_per_sec": self.offered_per_sec,
            "achieved_per_sec": self.achieved_per_sec.round(), "count": self.count,
            "rejected": self.rejected,
            "p50_ns": self.p50, "p90_ns": self.p90, "p95_ns": self.p95, "p99_ns": self.p99,
            "p99_9_ns": self.p999, "p99_99_ns": self.p9999, "max_ns": self.max,
        })
    }
}

fn micros(ns: u64) -> String {
    if ns >= 10_000_000 {
        format!("{:.0} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

/// One row of the table without its header, printed as each rate finishes.
pub fn table_line(row: &Row) -> String {
    table(std::slice::from_ref(row))
        .lines()
        .nth(1)
        .unwrap_or("")
        .to_string()
}

pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<14} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "run", "offered/s", "achieved/s", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "worst"
    );
    for r in rows {
        out += &format!(
            "{:<14} {:>10} {:>10.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            r.label,
            r.offered_per_sec,
            r.achieved_per_sec,
            micros(r.p50),
            micros(r.p90),
            micros(r.p95),
            micros(r.p99),
            micros(r.p999),
            micros(r.p9999),
            micros(r.max)
        );
    }
    out
}

/// The latency histogram both load generators record into: 1 ns to 60 s, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

// ----- the floor -----------------------------------------------------------------------------

/// Bytes of each ping of the floors (the size of a small order frame and its ack).
const PING_BYTES: usize = 64;

/// Pins the calling floor echo thread to `cpu`, if given; unpinned (with a warning) if that fails.
fn pin_echo_thread(cpu: Option<usize>) {
    if let Some(cpu) = cpu
        && let Err(e) = rialto_server::affinity::pin(cpu)
    {
        eprintln!("the floor's echo thread runs unpinned: {e:#}");
    }
}

/// A bare 64-byte ping-pong over loopback: an echo thread and a client, both in `mode`.
pub fn measure_floor(
    mode: IoMode,
    round_trips: u64,
    echo_cpu: Option<usize>,
) -> anyhow::Result<Row> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        pin_echo_thread(echo_cpu);
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        s.set_nonblocking(mode == IoMode::Spin)?;
        let mut buf = [0u8; PING_BYTES];
        loop {
            if !read_exact_mode(&mut s, &mut buf)? {
                return Ok(());
            }
            s.write_all(&buf)?;
        }
    });
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_nonblocking(mode == IoMode::Spin)?;
    let mut h = histogram();
    let ping = [7u8; PING_BYTES];
    let mut pong = [0u8; PING_BYTES];
    let warmup = round_trips / 10;
    for i in 0..round_trips + warmup {
        let start = Instant::now();
        s.write_all(&ping)?;
        if !read_exact_mode(&mut s, &mut pong)? {
            bail!("the echo thread closed the floor connection");
        }
        if i >= warmup {
            h.record(start.elapsed().as_nanos() as u64).ok();
        }
    }
    drop(s);
    let _ = echo.join();
    Ok(Row::from_histogram(
        format!(
            "floor ({})",
            if mode == IoMode::Spin {
                "spin"
            } else {
                "block"
            }
        ),
        0,
        0.0,
        &h,
    ))
}

/// The floor at one rate: `args.connections` connections offered 64-byte pings on the fixed
/// schedule [`run_rate`] uses, in the same socket mode, each ping's latency from its scheduled
/// send time to its echo. The echo is one busy-polling thread over all connections (`spin`),
/// or a blocking thread per connection (`block`).
pub fn measure_scheduled_floor(args: &LoadgenArgs, rate: u64) -> anyhow::Result<Row> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (mode, connections, echo_cpu) = (args.io, args.connections, args.floor_echo_cpu);
    let echo = std::thread::spawn(move || -> io::Result<()> {
        pin_echo_thread(echo_cpu);
        let mut streams = Vec::new();
        for _ in 0..connections {
            let (s, _) = listener.accept()?;
            s.set_nodelay(true)?;
            streams.push(s);
        }
        match mode {
            IoMode::Spin => echo_spinning(streams),
            IoMode::Block => echo_blocking(streams),
        }
    });
    let mut conns = Vec::new();
    for _ in 0..connections {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        conns.push(FloorConn {
            stream: s,
            output: Vec::new(),
            output_pos: 0,
            received: 0,
            pending: VecDeque::new(),
            scratch: vec![0; READ_CHUNK],
        });
    }
    let mut schedule = Schedule::new(args, rate);
    let mut h = histogram();
    loop {
        let now_ns = schedule.now_ns();
        while let Some((k, scheduled_ns, measured)) = schedule.next_due(now_ns) {
            let c = &mut conns[(k % connections as u64) as usize];
            c.output.extend_from_slice(&[7u8; PING_BYTES]);
            c.pending.push_back((scheduled_ns, measured));
        }
        for c in &mut conns {
            c.flush()?;
        }
        let now_ns = schedule.now_ns();
        for c in &mut conns {
            c.receive(now_ns, &mut h)?;
        }
        if schedule.all_sent() && conns.iter().all(|c| c.pending.is_empty()) {
            break;
        }
        anyhow::ensure!(
            now_ns <= schedule.deadline_ns,
            "the floor's echo stopped answering"
        );
        if mode == IoMode::Block {
            schedule.pause_until_due();
        }
    }
    let measured_ns = schedule.measured_ns();
    drop(conns);
    echo.join()
        .map_err(|_| anyhow::anyhow!("the floor's echo thread panicked"))??;
    let achieved = h.len() as f64 / (measured_ns as f64 / 1e9);
    Ok(Row::from_histogram(
        format!("floor {rate}/s"),
        rate,
        achieved,
        &h,
    ))
}

/// One connection of the scheduled floor.
struct FloorConn {
    stream: TcpStream,
    output: Vec<u8>,
    output_pos: usize,
    /// Bytes of the echo not yet a whole ping.
    received: usize,
    /// Scheduled send time of each ping in flight, and whether it is measured.
    pending: VecDeque<(u64, bool)>,
    scratch: Vec<u8>,
}

impl FloorConn {
    fn flush(&mut self) -> io::Result<()> {
        write_queued(&mut self.stream, &mut self.output, &mut self.output_pos)
    }

    fn receive(&mut self, now_ns: u64, h: &mut Histogram<u64>) -> anyhow::Result<()> {
        let mut arrived = 0;
        let open = read_arrived(&mut self.stream, &mut self.scratch, |bytes| {
            arrived += bytes.len()
        })?;
        anyhow::ensure!(open, "the floor's echo closed a connection");
        self.received += arrived;
        while self.received >= PING_BYTES {
            self.received -= PING_BYTES;
            let (scheduled_ns, measured) = self
                .pending
                .pop_front()
                .context("the floor's echo sent more than it was sent")?;
            if measured {
                h.record(now_ns.saturating_sub(scheduled_ns)).ok();
            }
        }
        Ok(())
    }
}

/// Writes what is queued in `output` from `pos` on, as far as the socket takes it now; once all
/// of it is out, empties the queue.
fn write_queued(stream: &mut TcpStream, output: &mut Vec<u8>, pos: &mut usize) -> io::Result<()> {
    while *pos < output.len() {
        match stream.write(&output[*pos..]) {
            Ok(n) => *pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    output.clear();
    *pos = 0;
    Ok(())
}

/// A fixed schedule of sends at `rate` a second: send `k` is due `k / rate` seconds after the
/// start; the first `warmup` are sent but not measured.
struct Schedule {
    start: Instant,
    interval_ns: f64,
    warmup: u64,
    total: u64,
    /// Sends handed out so far.
    sent: u64,
    /// When the first measured send was due.
    measured_start_ns: u64,
    /// When to give up waiting for answers (well after the last send is due).
    deadline_ns: u64,
}

impl Schedule {
    fn new(args: &LoadgenArgs, rate: u64) -> Schedule {
        let warmup = (args.warmup_seconds * rate as f64) as u64;
        Schedule {
            start: Instant::now(),
            interval_ns: 1e9 / rate as f64,
            warmup,
            total: warmup + (args.seconds * rate as f64) as u64,
            sent: 0,
            measured_start_ns: 0,
            deadline_ns: ((args.warmup_seconds + args.seconds + 30.0) * 1e9) as u64,
        }
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn due_ns(&self, k: u64) -> u64 {
        (k as f64 * self.interval_ns) as u64
    }

    /// The next send if it is due by `now_ns`: its number, when it was due and whether it is
    /// measured.
    fn next_due(&mut self, now_ns: u64) -> Option<(u64, u64, bool)> {
        let k = self.sent;
        if k == self.total || self.due_ns(k) > now_ns {
            return None;
        }
        self.sent += 1;
        let due_ns = self.due_ns(k);
        if k == self.warmup {
            self.measured_start_ns = due_ns;
        }
        Some((k, due_ns, k >= self.warmup))
    }

    fn all_sent(&self) -> bool {
        self.sent == self.total
    }

    /// Time from the first measured send's due time until now.
    fn measured_ns(&self) -> u64 {
        self.now_ns().saturating_sub(self.measured_start_ns)
    }

    /// In `block` mode: sleeps until the next send is due (at most 200 µs, to collect replies;
    /// not at all when it is due within 20 µs).
    fn pause_until_due(&self) {
        let wait = self
            .due_ns(self.sent)
            .saturating_sub(self.now_ns())
            .min(200_000);
        if wait > 20_000 {
            std::thread::sleep(Duration::from_nanos(wait));
        }
    }
}

/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 1 << 16;

/// Hands what has arrived on a non-blocking stream to `on_bytes`, through `scratch` (a buffer
/// kept by the caller: zeroing one on every call costs more than the read). Stops at a short
/// read, which on a stream socket means nothing more is waiting (epoll(7)), so that an empty
/// socket costs no second system call. False at end of stream.
fn read_arrived(
    stream: &mut TcpStream,
    scratch: &mut [u8],
    mut on_bytes: impl FnMut(&[u8]),
) -> io::Result<bool> {
    loop {
        match stream.read(scratch) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                on_bytes(&scratch[..n]);
                if n < scratch.len() {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Echoes every connection on this thread, busy-polling, until all have closed.
fn echo_spinning(streams: Vec<TcpStream>) -> io::Result<()> {
    // Each connection with what it sent and is yet to get back, and how much of that is out.
    let mut open: Vec<(TcpStream, Vec<u8>, usize)> = Vec::new();
    for s in streams {
        s.set_nonblocking(true)?;
        open.push((s, Vec::new(), 0));
    }
    let mut scratch = vec![0; READ_CHUNK];
    while !open.is_empty() {
        open.retain_mut(|(s, backlog, pos)| {
            let read = read_arrived(s, &mut scratch, |bytes| backlog.extend_from_slice(bytes));
            let still_open = read.unwrap_or(false);
            write_queued(s, backlog, pos).is_ok() && still_open
        });
        std::hint::spin_loop();
    }
    Ok(())
}

/// Echoes each connection on a blocking thread of its own, until all have closed.
fn echo_blocking(streams: Vec<TcpStream>) -> io::Result<()> {
    let threads: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            std::thread::spawn(move || {
                let mut buf = [0u8; READ_CHUNK];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes, spinning on WouldBlock; false at end of stream.
fn read_exact_mode(s: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

// ----- set-up --------------------------------------------------------------------------------

const SYMBOL: &str = "LOADGEN";
const CENTER_PRICE: i64 = 100_000;
const FUNDS: i64 = 1_000_000_000_000_000;

fn name(text: &str) -> Name {
    Name::new(text).expect("short name")
}

fn admin_secret(args: &LoadgenArgs, venue: &Venue) -> anyhow::Result<String> {
    if let Some(own) = &venue.own {
        let data = own.dir.path();
        return Ok(rialto_server::auth::Credentials::load_or_create(data)?.admin_secret());
    }
    if let Some(secret) = &args.admin_secret {
        return Ok(secret.clone());
    }
    anyhow::ensure!(
        args.data.join("venue.key").exists(),
        "no --admin-secret and no venue key in {}: pass the server's --data or its admin secret",
        args.data.display()
    );
    Ok(rialto_server::auth::Credentials::load_or_create(&args.data)?.admin_secret())
}

fn admin_call(admin: &mut Client, msg: ClientMsg) -> anyhow::Result<ServerMsg> {
    Ok(admin.request(&msg)?)
}

/// Creates the load generator's symbol (once) and fresh funded users (every run, with ids
/// from the clock so that runs never collide). Returns the symbol and (user, secret) pairs.
fn set_up(args: &LoadgenArgs, venue: &Venue) -> anyhow::Result<(SymbolId, Vec<(i64, Secret)>)> {
    let mut admin = Client::connect(venue.admin_addr)
        .with_context(|| format!("cannot connect to the admin listener {}", venue.admin_addr))?;
    admin.set_read_timeout(Some(Duration::from_secs(10)))?;
    admin.admin_login(admin_secret(args, venue)?.as_bytes())?;
    let spec = SymbolSpec {
        symbol: name(SYMBOL),
        base: name("LGB"),
        quote: name("LGQ"),
        base_scale: 1,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 1,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    };
    match admin_call(&mut admin, ClientMsg::AddSymbol { request: 1, spec })? {
        ServerMsg::AdminResult { result: Ok(()), .. }
        | ServerMsg::AdminResult {
            result: Err(Reason::DuplicateSymbol),
            ..
        } => {}
        other => bail!("adding the symbol {SYMBOL}: {other}"),
    }
    let symbol = match admin_call(&mut admin, ClientMsg::ListSymbols { request: 2 })? {
        ServerMsg::SymbolList { symbols, .. } => symbols
            .iter()
            .find(|(_, s)| s.symbol.as_str() == SYMBOL)
            .map(|(id, _)| *id)
            .context("the load generator's symbol is not listed")?,
        other => bail!("listing symbols: {other}"),
    };
    let first_user = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64
        * 1_000;
    let mut users = Vec::new();
    for i in 0..args.connections as i64 {
        let user = first_user + i;
        let secret = match admin_call(&mut admin, ClientMsg::AddUser { request: 3, user })? {
            ServerMsg::UserAdded { secret, .. } => secret,
            other => bail!("adding user {user}: {other}"),
        };
        for (k, currency) in ["LGB", "LGQ"].iter().enumerate() {
            let msg = ClientMsg::AdjustBalance {
                request: 4,
                user,
                currency: name(currency),
                amount: FUNDS,
                tx: user * 10 + k as i64,
            };
            match admin_call(&mut admin, msg)? {
                ServerMsg::AdminResult { result: Ok(()), .. } => {}
                other => bail!("funding user {user}: {other}"),
            }
        }
        users.push((user, secret));
    }
    Ok((symbol, users))
}

// ----- the measured run ----------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Live {
    order: i64,
    side: Side,
    remaining: i64,
}

struct Pending {
    scheduled_ns: u64,
    measured: bool,
    place_of: Option<i64>,
}

struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    output_pos: usize,
    pending: VecDeque<Pending>,
    live: Vec<Live>,
    next_order: i64,
    rng: Rng,
    scratch: Vec<u8>,
}

fn login(addr: SocketAddr, user: i64, secret: &Secret, seed: u64) -> anyhow::Result<Conn> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut frame = Vec::new();
    encode_client(
        &ClientMsg::Login {
            user,
            secret: secret.clone(),
        },
        &mut frame,
    );
    stream.write_all(&frame)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut input = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some((msg, _)) = decode_server(&input)? {
            match msg {
                ServerMsg::LoginAccepted { .. } => break,
                other => bail!("login of user {user}: {other}"),
            }
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            bail!("the server closed the connection during login");
        }
        input.extend_from_slice(&buf[..n]);
    }
    stream.set_read_timeout(None)?;
    stream.set_nonblocking(true)?;
    Ok(Conn {
        stream,
        input: Vec::with_capacity(1 << 16),
        output: Vec::with_capacity(1 << 16),
        output_pos: 0,
        pending: VecDeque::new(),
        live: Vec::new(),
        next_order: 1,
        rng: Rng::new(seed),
        scratch: vec![0; READ_CHUNK],
    })
}

impl Conn {
    /// The next command of the `single` workload's mix for this connection's user.
    fn next_command(&mut self, symbol: SymbolId, weights: &[u32; 6], max_live: usize) -> ClientMsg {
        let total: u32 = weights.iter().sum();
        let mut pick = self.rng.below(total as u64) as u32;
        let mut kind = 0;
        while pick >= weights[kind] {
            pick -= weights[kind];
            kind += 1;
        }
        // Kinds in the bench generator's order: GTC, IOC, FOK, cancel, move, reduce.
        if (kind >= 3 && self.live.is_empty()) || (kind == 0 && self.live.len() >= max_live) {
            kind = if self.live.is_empty() { 0 } else { 3 };
        }
        let rng = &mut self.rng;
        let side = if rng.coin() { Side::Buy } else { Side::Sell };
        // Buys mostly below the centre and sells above, overlapping a little so some trade.
        let offset = rng.below(60) as i64 - 50;
        let price = match side {
            Side::Buy => CENTER_PRICE + offset,
            Side::Sell => CENTER_PRICE - offset,
        };
        let r6 = rng.below(6) as i64;
        let qty = 1 + r6 * r6 * r6;
        match kind {
            0..=2 => {
                let order = self.next_order;
                self.next_order += 1;
                let tif = [Tif::Gtc, Tif::Ioc, Tif::Fok][kind];
                let aggressive = match side {
                    Side::Buy => CENTER_PRICE + 100,
                    Side::Sell => CENTER_PRICE - 100,
                };
                let price = if tif == Tif::Gtc { price } else { aggressive };
                if tif == Tif::Gtc {
                    self.live.push(Live {
                        order,
                        side,
                        remaining: qty,
                    });
                }
                ClientMsg::NewOrder(NewOrder {
                    tif: Some(tif),
                    ..NewOrder::limit(order, symbol, side, price, qty)
                })
            }
            3 => {
                let i = self.rng.below(self.live.len() as u64) as usize;
                let order = self.live.swap_remove(i).order;
                ClientMsg::Cancel { order }
            }
            4 => {
                let i = self.rng.below(self.live.len() as u64) as usize;
                let live = self.live[i];
                let price = match live.side {
                    Side::Buy => CENTER_PRICE + offset,
                    Side::Sell => CENTER_PRICE - offset,
                };
                ClientMsg::Move {
                    order: live.order,
                    price,
                }
            }
            _ => {
                let i = self.rng.below(self.live.len() as u64) as usize;
                let live = &self.live[i];
                if live.remaining > 1 {
                    // `remaining` drops when the engine reports the reduce (Cancelled).
                    ClientMsg::Reduce {
                        order: live.order,
                        qty: 1,
                    }
                } else {
                    let order = self.live.swap_remove(i).order;
                    ClientMsg::Cancel { order }
                }
            }
        }
    }

    fn forget(&mut self, order: i64, qty: i64) {
        if let Some(i) = self.live.iter().position(|l| l.order == order) {
            self.live[i].remaining -= qty;
            if self.live[i].remaining <= 0 {
                self.live.swap_remove(i);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        write_queued(&mut self.stream, &mut self.output, &mut self.output_pos)
    }

    /// Reads what has arrived; records the latency of every acknowledgement.
    fn receive(
        &mut self,
        now_ns: u64,
        h: &mut Histogram<u64>,
        rejected: &mut u64,
    ) -> anyhow::Result<()> {
        let input = &mut self.input;
        let open = read_arrived(&mut self.stream, &mut self.scratch, |bytes| {
            input.extend_from_slice(bytes)
        })?;
        anyhow::ensure!(open, "the server closed a load connection");
        let mut at = 0;
        while let Some((msg, len)) = decode_server(&self.input[at..])? {
            at += len;
            match msg {
                ServerMsg::Accepted { .. } | ServerMsg::Rejected { .. } => {
                    let p = self
                        .pending
                        .pop_front()
                        .context("an acknowledgement for nothing sent")?;
                    if p.measured {
                        h.record(now_ns.saturating_sub(p.scheduled_ns).max(1)).ok();
                    }
                    if let ServerMsg::Rejected { reason, .. } = msg {
                        *rejected += 1;
                        let _ = reason;
                        if let Some(order) = p.place_of {
                            self.forget(order, i64::MAX);
                        }
                    }
                }
                ServerMsg::Trade { order, qty, .. } | ServerMsg::Cancelled { order, qty, .. } => {
                    self.forget(order, qty)
                }
                ServerMsg::Error { .. } => bail!("the server refused a frame: {msg}"),
                _ => {}
            }
        }
        self.input.drain(..at);
        Ok(())
    }
}

/// Offers `rate` commands a second over all connections for warm-up + measured seconds.
fn run_rate(
    conns: &mut [Conn],
    symbol: SymbolId,
    rate: u64,
    args: &LoadgenArgs,
) -> anyhow::Result<Row> {
    // The exchange-core kinds (the rulebook's stops, icebergs and DAY orders weigh 0 here).
    let all = Mix::Generator.weights();
    let weights: [u32; 6] = all[..6].try_into().expect("six exchange-core kinds");
    let mut schedule = Schedule::new(args, rate);
    let mut h = histogram();
    let mut rejected = 0;
    loop {
        let now_ns = schedule.now_ns();
        // Send everything whose time has come, even if late: the lateness is charged.
        while let Some((k, scheduled_ns, measured)) = schedule.next_due(now_ns) {
            let c = &mut conns[(k % conns.len() as u64) as usize];
            let msg = c.next_command(symbol, &weights, args.max_live_orders);
            let place_of = match &msg {
                ClientMsg::NewOrder(o) => Some(o.order),
                _ => None,
            };
            encode_client(&msg, &mut c.output);
            c.pending.push_back(Pending {
                scheduled_ns,
                measured,
                place_of,
            });
        }
        for c in conns.iter_mut() {
            c.flush()?;
        }
        let now_ns = schedule.now_ns();
        for c in conns.iter_mut() {
            c.receive(now_ns, &mut h, &mut rejected)?;
        }
        if schedule.all_sent() && conns.iter().all(|c| c.pending.is_empty()) {
            break;
        }
        if now_ns > schedule.deadline_ns {
            bail!(
                "the server stopped acknowledging ({} commands outstanding)",
                conns.iter().map(|c| c.pending.len()).sum::<usize>()
            );
        }
        if args.io == IoMode::Block {
            schedule.pause_until_due();
        }
    }
    let measured_ns = schedule.measured_ns();
    let achieved = h.len() as f64 / (measured_ns as f64 / 1e9);
    let mut row = Row::from_histogram(format!("rialto {rate}/s"), rate, achieved, &h);
    row.rejected = rejected;
    Ok(row)
}

pub fn run(args: &LoadgenArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.connections >= 1, "--connections must be at least 1");
    anyhow::ensure!(args.rates.iter().all(|&r| r > 0), "rates must be positive");
    if let Some(cpu) = args.cpu {
        rialto_server::affinity::pin(cpu)?;
    }
    let mut rows = Vec::new();
    if args.floor_round_trips > 0 {
        rows.push(measure_floor(
            args.io,
            args.floor_round_trips,
            args.floor_echo_cpu,
        )?);
        if !args.json {
            eprintln!("{}", table(&rows).trim_end());
        }
    }
    let venue = Venue::of(args)?;
    let (symbol, users) = set_up(args, &venue)?;
    let mut conns = Vec::new();
    for (i, (user, secret)) in users.iter().enumerate() {
        conns.push(login(venue.addr, *user, secret, 0x5eed + i as u64)?);
    }
    for &rate in &args.rates {
        if !args.no_rate_floor {
            let floor = measure_scheduled_floor(args, rate)?;
            if !args.json {
                eprintln!("{}", table_line(&floor));
            }
            rows.push(floor);
        }
        let row = run_rate(&mut conns, symbol, rate, args)?;
        if !args.json {
            eprintln!("{}", table_line(&row));
        }
        rows.push(row);
    }
    if args.json {
        let json = serde_json::json!({
            "connections": args.connections, "io": format!("{:?}", args.io).to_lowercase(),
            "seconds": args.seconds, "warmup_seconds": args.warmup_seconds,
            "mix": Mix::Generator.describe(),
            "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        });
        println!("{json}");
    } else {
        println!("{}", table(&rows));
        println!(
            "latency: scheduled send time -> acknowledgement (accepted or rejected); {} connections, io {:?}; mix: {}",
            args.connections,
            args.io,
            Mix::Generator.describe()
        );
    }
    Ok(())
}

/// Where the load goes: a running server (`--addr`), or a venue of the load generator's own.
struct Venue {
    addr: SocketAddr,
    admin_addr: SocketAddr,
    own: Option<OwnVenue>,
}

/// A `rialto serve` child on a temporary data directory, killed and removed when dropped, so that a measurement leaves nothing in anyone's venue.
struct OwnVenue {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Venue {
    fn of(args: &LoadgenArgs) -> anyhow::Result<Venue> {
        if let Some(addr) = args.addr {
            return Ok(Venue {
                addr,
                admin_addr: args.admin_addr,
                own: None,
            });
        }
        use std::io::BufRead;
        let dir = tempfile::Builder::new()
            .prefix("rialto-loadgen-")
            .tempdir()?;
        let data = dir.path().to_str().context("a temporary path in UTF-8")?;
        let mut child = std::process::Command::new(std::env::current_exe()?)
            .args(["serve", "--data", data, "--listen", "127.0.0.1:0"])
            .args(["--admin-listen", "127.0.0.1:0"])
            .args(["--set", "fix.enabled=false", "--set", "web.enabled=false"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("cannot start a venue of the load generator's own")?;
        let stdout = child.stdout.take().context("the venue's output")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let own = OwnVenue { child, dir };
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let after = |label: &str| -> anyhow::Result<SocketAddr> {
            let word = line
                .split(label)
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .map(|w| w.trim_end_matches(','))
                .with_context(|| format!("the load generator's venue did not start: {line:?}"))?;
            Ok(word.parse()?)
        };
        let (addr, admin_addr) = (after("orders on ")?, after("admin on ")?);
        eprintln!(
            "a venue of the load generator's own: orders on {addr}, data in {} (removed after)",
            own.dir.path().display()
        );
        Ok(Venue {
            addr,
            admin_addr,
            own: Some(own),
        })
    }
}

impl Drop for OwnVenue {
    fn drop(&mut self) {
        // Its journal is thrown away with its directory: nothing to stop cleanly for.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
