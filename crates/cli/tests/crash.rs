//! Crash test: a `rialto serve` under pipelined trading traffic is killed with SIGKILL at
//! random moments and restarted on the same data directory. After every restart:
//!
//! 1. every command any client saw acknowledged is in the journal at the seq its ack carried,
//!    exactly as sent, and its replayed result (ok or the rejection reason) is the one acked;
//! 2. no command appears twice, every order command in the journal was sent by a client, and
//!    each session's journaled commands are a prefix, in order, of what it sent;
//! 3. the recovered state hash equals that of `rialto replay` of `rialto journal dump`;
//! 4. trading goes on: an order is accepted with the seq after the recovered one.
//!
//! On about half the cycles the kill is also a **power loss** (`lose_power`): the journal's
//! writes that no `fdatasync` covered (the server logs each sync, `RIALTO_JOURNAL_SYNC_LOG`)
//! are lost, or kept up to a random byte (torn), and a checkpoint written but not synced is
//! lost, kept or torn. SIGKILL alone keeps the page cache, so it cannot tell the durability
//! modes apart; this does. In `fsync` mode every check above still holds; in `batch` mode
//! acknowledged commands may be lost, but only those no sync covered (the documented window).
//! Pages persisted out of order (a later one kept, an earlier one lost) are not modelled:
//! recovery stops for an operator then (docs/journal-format.md, "Torn tail or corruption").
//! Snapshots are kept whole (they are written to a temporary file, fsynced and renamed, and
//! only once the journal is synced through their seq).
//!
//! `RIALTO_CRASH_SEED` replays a seed (printed at the start), `RIALTO_CRASH_CYCLES` sets the
//! number of kill/restart cycles (default 20). scripts/crash-loop.sh runs a long loop.

mod common;

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{Rng, rialto};
use rialto_client::{Client, ClientError};
use rialto_core::{Reason, Side, SymbolId};
use rialto_server::auth::Credentials;
use rialto_wire::{ClientMsg, NewOrder, RequestKind, ServerMsg};
use serde_json::{Value, json};

const DEFAULT_CYCLES: u64 = 20;
/// Traders per cycle, each its own demo user (1..=TRADERS); the probe order uses PROBE_USER.
const TRADERS: i64 = 4;
const PROBE_USER: i64 = 8;
/// Commands a trader keeps in flight.
const WINDOW: usize = 8;
/// Commands a trader may send per millisecond since its login: paced so that traffic still
/// flows when the kill comes, and so that the journal every later check dumps and replays
/// stays small.
const SENT_PER_MS: u128 = 4;
/// Most commands a trader sends in one cycle.
const MAX_SENT_PER_CYCLE: usize = 2_000;
/// A session waits this long for a frame before it sends more (pacing).
const POLL: Duration = Duration::from_millis(2);
/// Own orders a trader remembers as targets for cancels and moves.
const MAX_TRACKED_ORDERS: usize = 64;
const KILL_AFTER_MS: std::ops::RangeInclusive<u64> = 50..=400;
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// A server silent this long while commands are pending is hung.
const READ_TIMEOUT: Duration = Duration::from_secs(20);

// ----- randomness ----------------------------------------------------------------------------

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
    )
}

// ----- the server as a child process ---------------------------------------------------------

/// How one run of the server is started.
#[derive(Clone, Debug)]
struct ServeOptions {
    durability: &'static str,
    snapshot_every: u64,
    segment_bytes: u64,
}

impl ServeOptions {
    fn for_cycle(cycle: u64, rng: &mut Rng) -> ServeOptions {
        ServeOptions {
            // Mostly batch (acked once written to the OS), fsync on every third run.
            durability: if cycle % 3 == 2 { "fsync" } else { "batch" },
            // Snapshots (and archiving) taken under traffic on some runs, so kills hit them.
            snapshot_every: [1_000_000, 1_000_000, 700, 2_500][rng.below(4) as usize],
            // Small segments on some runs, so kills hit segment rolls.
            segment_bytes: [64 << 20, 16 << 10][rng.below(2) as usize],
        }
    }
}

/// A running `rialto serve`; killed when dropped, so a failed assertion leaves no child.
struct Server {
    child: Child,
    order_addr: SocketAddr,
    admin_addr: SocketAddr,
    /// Everything it wrote on stdout and stderr, a line each.
    log: Arc<Output>,
    readers: Vec<JoinHandle<()>>,
}

/// The lines a child wrote, and how many of its output streams are still open; every new
/// line and every closed stream wakes whoever waits for a line.
#[derive(Default)]
struct Output {
    state: Mutex<Lines>,
    changed: Condvar,
}

#[derive(Default)]
struct Lines {
    lines: Vec<String>,
    open_streams: usize,
}

impl Output {
    fn lines(&self) -> Vec<String> {
        self.state.lock().unwrap().lines.clone()
    }

    /// Waits until a line satisfies `want` and returns it; Err(true) once every stream has
    /// closed without one (the child exited), Err(false) at `deadline`.
    fn wait_for_line(
        &self,
        want: impl Fn(&str) -> bool,
        deadline: Instant,
    ) -> Result<String, bool> {
        let mut state = self.state.lock().unwrap();
        loop {
            if let Some(line) = state.lines.iter().find(|l| want(l)) {
                return Ok(line.clone());
            }
            if state.open_streams == 0 {
                return Err(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(false);
            }
            state = self.changed.wait_timeout(state, left).unwrap().0;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

fn collect_lines(from: impl Read + Send + 'static, log: Arc<Output>) -> JoinHandle<()> {
    log.state.lock().unwrap().open_streams += 1;
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            log.state.lock().unwrap().lines.push(line);
            log.changed.notify_all();
        }
        log.state.lock().unwrap().open_streams -= 1;
        log.changed.notify_all();
    })
}

impl Server {
    /// Starts the server on `data`, retrying with other ports if the chosen ones were taken
    /// meanwhile; returns once it accepts connections.
    fn start(data: &Path, options: &ServeOptions) -> Server {
        let mut last_log = Vec::new();
        for _attempt in 0..5 {
            let order_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let admin_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            if order_addr == admin_addr {
                continue;
            }
            // A fresh sync log per run: the power-loss model reads what this run synced.
            let _ = std::fs::remove_file(sync_log(data));
            let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
                .args(["serve", "--demo", "--data"])
                .arg(data)
                .args(["--listen", &order_addr.to_string()])
                .args(["--admin-listen", &admin_addr.to_string()])
                .args(["--fix-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"])
                .args(["--durability", options.durability])
                .args(["--snapshot-every", &options.snapshot_every.to_string()])
                .args([
                    "--set",
                    &format!("journal.segment_bytes={}", options.segment_bytes),
                ])
                .env("RIALTO_LOG", "info")
                .env("RIALTO_JOURNAL_SYNC_LOG", sync_log(data))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start rialto serve");
            let log = Arc::new(Output::default());
            let readers = vec![
                collect_lines(child.stdout.take().unwrap(), log.clone()),
                collect_lines(child.stderr.take().unwrap(), log.clone()),
            ];
            let mut server = Server {
                child,
                order_addr,
                admin_addr,
                log,
                readers,
            };
            match server.wait_until_serving() {
                Ok(()) => return server,
                Err(exited) => {
                    last_log = server.finish();
                    let taken = last_log.iter().any(|l| l.contains("cannot listen"));
                    assert!(
                        exited && taken,
                        "rialto serve did not start within {START_TIMEOUT:?}; its output:\n{}",
                        last_log.join("\n")
                    );
                }
            }
        }
        panic!(
            "rialto serve could not bind free ports in 5 attempts; last output:\n{}",
            last_log.join("\n")
        );
    }

    /// Ok once the server announced its addresses and the order port accepts a connection;
    /// Err(true) if it exited, Err(false) on the timeout.
    /// (It exited once its output has closed.)
    fn wait_until_serving(&mut self) -> Result<(), bool> {
        let announced = format!("orders on {}", self.order_addr);
        let deadline = Instant::now() + START_TIMEOUT;
        self.log
            .wait_for_line(|l| l.contains(&announced), deadline)?;
        // The line comes once the listeners are bound.
        TcpStream::connect_timeout(&self.order_addr, Duration::from_secs(1))
            .map(drop)
            .map_err(|_| false)
    }

    /// SIGKILL, wait, and the whole output.
    fn finish(&mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        self.log.lines()
    }

    fn output(&self) -> String {
        self.log.lines().join("\n")
    }

    /// `(last_seq, state_hash)` from the `recovered` log line.
    /// The line comes on stderr, read by its own thread, so it may follow the `serving` line of
    /// stdout by a moment: wait for it (seen once in CI).
    fn recovered(&self) -> (u64, String) {
        let deadline = Instant::now() + START_TIMEOUT;
        let line = self
            .log
            .wait_for_line(
                |l| l.contains("recovered") && l.contains("state_hash="),
                deadline,
            )
            .unwrap_or_else(|_| panic!("no `recovered` line in:\n{}", self.output()));
        let field = |name: &str| -> String {
            let at = line
                .find(&format!(" {name}="))
                .unwrap_or_else(|| panic!("no {name} in {line}"));
            line[at + name.len() + 2..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_owned()
        };
        let last_seq = field("last_seq").parse().expect("last_seq is a number");
        (last_seq, field("state_hash"))
    }

    /// Stops it with SIGTERM and expects a clean exit.
    fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
        let Some(status) = common::exit_within(&mut self.child, Duration::from_secs(10)) else {
            panic!(
                "rialto serve did not stop within 10 s of SIGTERM:\n{}",
                self.output()
            );
        };
        assert!(
            status.success(),
            "rialto serve exited with {status} on SIGTERM:\n{}",
            self.output()
        );
    }
}

// ----- what the clients sent and saw --------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Place {
        order: i64,
        symbol: u32,
        side: Side,
        price: i64,
        qty: i64,
    },
    Cancel {
        order: i64,
    },
    Move {
        order: i64,
        price: i64,
    },
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    user: i64,
    cmd: Cmd,
}

impl Sent {
    fn msg(&self) -> ClientMsg {
        match self.cmd {
            Cmd::Place {
                order,
                symbol,
                side,
                price,
                qty,
            } => ClientMsg::NewOrder(NewOrder::limit(order, SymbolId(symbol), side, price, qty)),
            Cmd::Cancel { order } => ClientMsg::Cancel { order },
            Cmd::Move { order, price } => ClientMsg::Move { order, price },
        }
    }

    /// What an Accepted or Rejected for this command carries.
    fn ack_key(&self) -> (i64, RequestKind) {
        match self.cmd {
            Cmd::Place { order, .. } => (order, RequestKind::Place),
            Cmd::Cancel { order } => (order, RequestKind::Cancel),
            Cmd::Move { order, .. } => (order, RequestKind::Move),
        }
    }

    /// The line `rialto journal dump` writes for it.
    fn dump_line(&self) -> Value {
        let user = self.user;
        match self.cmd {
            Cmd::Place {
                order,
                symbol,
                side,
                price,
                qty,
            } => {
                let symbol = ["BTC-USD", "ETH-USD"][symbol as usize];
                json!({
                "cmd": "place", "user": user, "order": order, "symbol": symbol,
                "side": side.as_str(), "type": "limit", "tif": "gtc",
                "price": price, "qty": qty, "post_only": false, "stp": "cancel_taker",
                })
            }
            Cmd::Cancel { order } => json!({"cmd": "cancel", "user": user, "order": order}),
            Cmd::Move { order, price } => {
                json!({"cmd": "move", "user": user, "order": order, "price": price})
            }
        }
    }
}

/// (cmd, user, order) of a journaled order command: each must be unique.
fn identity(line: &Value) -> Option<(String, i64, i64)> {
    let cmd = line["cmd"].as_str()?;
    if !matches!(cmd, "place" | "cancel" | "move") {
        return None;
    }
    Some((
        cmd.to_owned(),
        line["user"].as_i64()?,
        line["order"].as_i64()?,
    ))
}

#[derive(Clone, Debug)]
struct Ack {
    seq: u64,
    sent: Sent,
    /// `None`: accepted; else the rejection reason.
    rejected: Option<Reason>,
}

/// One trader's cycle: everything it sent (in order) and the acks it got.
#[derive(Default)]
struct Session {
    user: i64,
    sent: Vec<Sent>,
    acks: Vec<Ack>,
    trades: u64,
    /// Why it stopped: the connection ending is expected, anything else fails the test.
    end: String,
    end_expected: bool,
}

#[derive(Clone, Copy)]
struct OwnOrder {
    order: i64,
    side: Side,
    moved: bool,
}

/// A trader's memory across cycles: its own orders, never reusing an id.
struct Trader {
    user: i64,
    secret: String,
    rng: Rng,
    orders: VecDeque<OwnOrder>,
}

impl Trader {
    fn price(&mut self, side: Side) -> i64 {
        // Buys 995..=1002, sells 998..=1005: they cross now and then.
        let offset = self.rng.below(8) as i64;
        match side {
            Side::Buy => 995 + offset,
            Side::Sell => 998 + offset,
        }
    }

    /// The next command: mostly places, else a cancel or a move of one of its own orders
    /// (each order is cancelled at most once and moved at most once).
    fn next_command(&mut self, ids: &AtomicI64) -> Sent {
        let roll = self.rng.below(100);
        let cmd = if roll < 55 || self.orders.is_empty() {
            let order = ids.fetch_add(1, Ordering::Relaxed);
            let side = if self.rng.below(2) == 0 {
                Side::Buy
            } else {
                Side::Sell
            };
            let cmd = Cmd::Place {
                order,
                symbol: self.rng.below(2) as u32,
                side,
                price: self.price(side),
                qty: 1 + self.rng.below(5) as i64,
            };
            if self.orders.len() == MAX_TRACKED_ORDERS {
                self.orders.pop_front();
            }
            self.orders.push_back(OwnOrder {
                order,
                side,
                moved: false,
            });
            cmd
        } else {
            let at = self.rng.below(self.orders.len() as u64) as usize;
            let target = self.orders[at];
            if roll < 80 || target.moved {
                self.orders.remove(at);
                Cmd::Cancel {
                    order: target.order,
                }
            } else {
                self.orders[at].moved = true;
                Cmd::Move {
                    order: target.order,
                    price: self.price(target.side),
                }
            }
        };
        Sent {
            user: self.user,
            cmd,
        }
    }
}

/// Trades until the connection ends (the server is killed), keeping WINDOW commands in flight.
fn trade(addr: SocketAddr, trader: &mut Trader, ids: &AtomicI64) -> Session {
    let mut session = Session {
        user: trader.user,
        ..Session::default()
    };
    let mut client = match Client::connect(addr) {
        Ok(c) => c,
        Err(e) => return session.ended(e),
    };
    if let Err(e) = client.set_read_timeout(Some(READ_TIMEOUT)) {
        return session.ended(e);
    }
    if let Err(e) = client.login(trader.user, trader.secret.as_bytes()) {
        return session.ended(e);
    }
    if let Err(e) = client.set_read_timeout(Some(POLL)) {
        return session.ended(e);
    }
    let started = Instant::now();
    let mut last_frame = Instant::now();
    // Indices into `session.sent` of the commands awaiting their ack, oldest first.
    let mut pending = VecDeque::with_capacity(WINDOW);
    let mut batch = Vec::with_capacity(WINDOW);
    loop {
        batch.clear();
        let budget = (started.elapsed().as_millis() * SENT_PER_MS) as usize;
        let budget = budget.min(MAX_SENT_PER_CYCLE);
        while pending.len() + batch.len() < WINDOW && session.sent.len() < budget {
            let sent = trader.next_command(ids);
            // Recorded before the write: a failed write may still have delivered it.
            pending.push_back(session.sent.len());
            session.sent.push(sent);
            batch.push(sent.msg());
        }
        if !batch.is_empty()
            && let Err(e) = client.send_batch(&batch)
        {
            return session.ended(e);
        }
        // With nothing left to send this waits for the connection to end.
        let msg = match client.recv() {
            Ok(msg) => msg,
            Err(e) if e.is_timeout() => {
                if pending.is_empty() || last_frame.elapsed() < READ_TIMEOUT {
                    continue;
                }
                return session.ended(e);
            }
            Err(e) => return session.ended(e),
        };
        last_frame = Instant::now();
        let (seq, order, kind, rejected) = match msg {
            ServerMsg::Accepted {
                seq, order, kind, ..
            } => (seq, order, kind, None),
            ServerMsg::Rejected {
                seq,
                order,
                kind,
                reason,
                ..
            } => (seq, order, kind, Some(reason)),
            ServerMsg::Trade { .. } => {
                session.trades += 1;
                continue;
            }
            ServerMsg::Cancelled { .. } => continue,
            other => {
                session.end = format!("unexpected frame: {other}");
                return session;
            }
        };
        let Some(index) = pending.pop_front() else {
            session.end = format!("an ack for {kind} {order} (seq {seq}) with nothing pending");
            return session;
        };
        let sent = session.sent[index];
        if sent.ack_key() != (order, kind) {
            session.end = format!("ack for {kind} {order} (seq {seq}) answers {sent:?}");
            return session;
        }
        session.acks.push(Ack {
            seq,
            sent,
            rejected,
        });
    }
}

impl Session {
    fn ended(mut self, e: ClientError) -> Session {
        self.end_expected = match &e {
            ClientError::Closed => true,
            ClientError::Io(_) => !e.is_timeout(),
            _ => false,
        };
        self.end = e.to_string();
        self
    }
}

// ----- the history across cycles, and the checks after a restart ----------------------------

/// One cycle's traffic: it starts after the probe order at `probe_seq`.
struct Cycle {
    probe_seq: u64,
    /// Each trader's commands in the order sent.
    sent_by_user: HashMap<i64, Vec<Sent>>,
}

#[derive(Default)]
struct History {
    acks: Vec<Ack>,
    /// Identities of every order command any client sent.
    sent: HashSet<(String, i64, i64)>,
    cycles: Vec<Cycle>,
}

impl History {
    fn note_sent(&mut self, sent: &Sent) {
        let id = identity(&sent.dump_line()).expect("an order command");
        self.sent.insert(id);
    }
}

/// What the checks after one restart found, for the cycle's summary line.
struct Recovered {
    last_seq: u64,
    state_hash: String,
    /// Commands of the cycle just crashed that made it into the journal.
    last_cycle_journaled: usize,
}

/// Checks 1 to 3 (see the top of the file) against the server just restarted on `data`.
fn check_recovery(server: &Server, data: &Path, history: &History, context: &str) -> Recovered {
    let (last_seq, state_hash) = server.recovered();
    let dump = rialto(
        &[
            "journal",
            "dump",
            "--include-archive",
            "--data",
            data.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(
        dump.code,
        Some(0),
        "{context}: journal dump failed:\n{}",
        dump.stderr
    );
    let lines: Vec<Value> = dump
        .stdout
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut line: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{context}: dump line {}: {e}: {l}", i + 1));
            // Each line carries the sequencer's time (`ts`); what a client sent does not.
            let ts = line.as_object_mut().and_then(|o| o.remove("ts"));
            assert!(
                ts.is_some_and(|t| t.is_i64()),
                "{context}: dump line {} has no ts: {l}",
                i + 1
            );
            line
        })
        .collect();
    assert_eq!(
        lines.len() as u64,
        last_seq,
        "{context}: the dump has {} commands, the server recovered to seq {last_seq}",
        lines.len()
    );

    // 3. The recovered state is the journal's.
    let dump_file = data.with_extension("dump.jsonl");
    std::fs::write(&dump_file, &dump.stdout).unwrap();
    let replay = rialto(
        &[
            "replay",
            dump_file.to_str().unwrap(),
            "--final-state",
            "--strict",
        ],
        "",
    );
    assert_eq!(
        replay.code,
        Some(0),
        "{context}: replay of the dump failed:\n{}",
        replay.stderr
    );
    let mut results: Vec<Option<Value>> = vec![None; lines.len() + 1];
    let mut final_hash = None;
    for line in replay.stdout.lines() {
        let v: Value = serde_json::from_str(line).expect("replay writes JSON");
        match v["ev"].as_str() {
            Some("result") => {
                let seq = v["seq"].as_u64().expect("result seq") as usize;
                results[seq] = Some(v);
            }
            Some("final") => final_hash = v["state_hash"].as_str().map(str::to_owned),
            _ => {}
        }
    }
    let final_hash = final_hash.unwrap_or_else(|| panic!("{context}: replay wrote no final line"));
    assert_eq!(
        state_hash, final_hash,
        "{context}: recovered state hash differs from the replay of the journal dump"
    );

    // 1. Nothing acknowledged is lost, and it is what was sent and what was answered.
    for ack in &history.acks {
        let line = lines.get(ack.seq as usize - 1).unwrap_or_else(|| {
            panic!(
                "{context}: acknowledged seq {} ({:?}) is missing: the journal ends at {last_seq}",
                ack.seq, ack.sent
            )
        });
        assert_eq!(
            *line,
            ack.sent.dump_line(),
            "{context}: journal line {} is not the command acknowledged with that seq",
            ack.seq
        );
        let result = results[ack.seq as usize].as_ref().expect("a result a line");
        let replayed = match result["status"].as_str() {
            Some("ok") => None,
            _ => result["reason"].as_str(),
        };
        assert_eq!(
            replayed,
            ack.rejected.map(Reason::as_str),
            "{context}: seq {} was acked {:?} live but replays as {result}",
            ack.seq,
            ack.rejected
        );
    }

    // 2. No duplicates, nothing invented, and each session's commands journaled in order
    //    with only a tail missing.
    let mut seen = HashSet::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(id) = identity(line) {
            assert!(
                history.sent.contains(&id),
                "{context}: journal line {} was never sent: {line}",
                i + 1
            );
            assert!(
                seen.insert(id),
                "{context}: journal line {} is a duplicate: {line}",
                i + 1
            );
        }
    }
    let mut last_cycle_journaled = 0;
    for (c, cycle) in history.cycles.iter().enumerate() {
        let end = history
            .cycles
            .get(c + 1)
            .map_or(last_seq, |next| next.probe_seq - 1);
        let span = &lines[cycle.probe_seq as usize..end as usize];
        last_cycle_journaled = span.len();
        for (user, sent) in &cycle.sent_by_user {
            let journaled: Vec<&Value> = span.iter().filter(|l| l["user"] == *user).collect();
            assert!(
                journaled.len() <= sent.len(),
                "{context}: cycle {c}: user {user} has {} journaled commands, sent {}",
                journaled.len(),
                sent.len()
            );
            for (k, line) in journaled.iter().enumerate() {
                assert_eq!(
                    **line,
                    sent[k].dump_line(),
                    "{context}: cycle {c}: user {user}'s journaled command {k} is not its \
                     command {k} sent"
                );
            }
        }
    }
    let _ = std::fs::remove_file(&dump_file);
    Recovered {
        last_seq,
        state_hash,
        last_cycle_journaled,
    }
}

/// The admin snapshot's hash and seq must be the recovered ones (nothing traded since).
fn check_snapshot(server: &Server, secret: &str, recovered: &Recovered, context: &str) {
    let mut admin = Client::connect(server.admin_addr).expect("connect admin");
    admin.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    admin.admin_login(secret.as_bytes()).expect("admin login");
    match admin.request(&ClientMsg::TakeSnapshot { request: 1 }) {
        Ok(ServerMsg::SnapshotTaken {
            seq, state_hash, ..
        }) => {
            assert_eq!(seq, recovered.last_seq, "{context}: snapshot seq");
            assert_eq!(
                rialto_server::auth::hex(&state_hash),
                recovered.state_hash,
                "{context}: the snapshot's state hash is not the recovered one"
            );
        }
        other => panic!("{context}: TakeSnapshot answered {other:?}"),
    }
}

/// 4. An order is accepted, with the seq after `last_seq`. Returns its ack.
fn probe(server: &Server, secret: &str, ids: &AtomicI64, last_seq: u64, context: &str) -> Ack {
    let mut client = Client::connect(server.order_addr).expect("connect");
    client.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    client
        .login(PROBE_USER, secret.as_bytes())
        .expect("probe login");
    // Far below the market: it rests and never trades.
    let sent = Sent {
        user: PROBE_USER,
        cmd: Cmd::Place {
            order: ids.fetch_add(1, Ordering::Relaxed),
            symbol: 1,
            side: Side::Buy,
            price: 1,
            qty: 1,
        },
    };
    client.send(&sent.msg()).expect("send the probe order");
    match client.recv() {
        Ok(ServerMsg::Accepted { seq, order, .. }) if order == sent.ack_key().0 => {
            assert_eq!(
                seq,
                last_seq + 1,
                "{context}: the first order after recovery"
            );
            Ack {
                seq,
                sent,
                rejected: None,
            }
        }
        other => panic!(
            "{context}: the probe order got {other:?}; server output:\n{}",
            server.output()
        ),
    }
}

#[test]
fn acknowledged_commands_survive_sigkill_and_recovery_matches_the_journal() {
    let seed = env_u64("RIALTO_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let cycles = env_u64("RIALTO_CRASH_CYCLES").unwrap_or(DEFAULT_CYCLES);
    println!("crash test: RIALTO_CRASH_SEED={seed} RIALTO_CRASH_CYCLES={cycles}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ids = Arc::new(AtomicI64::new(1));
    let mut history = History::default();

    let mut options = ServeOptions::for_cycle(0, &mut rng);
    let mut server = Server::start(&data, &options);
    let credentials = Credentials::load_or_create(&data).unwrap();
    let admin_secret = credentials.admin_secret();
    let probe_secret = credentials.user_secret(PROBE_USER);
    let mut traders: Vec<Trader> = (1..=TRADERS)
        .map(|user| Trader {
            user,
            secret: credentials.user_secret(user),
            rng: Rng(seed ^ (user as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)),
            orders: VecDeque::new(),
        })
        .collect();
    let (mut last_seq, _) = server.recovered();
    // The demo set-up is journaled before the server accepts connections.
    last_seq += rialto_server::demo::demo_commands().len() as u64;

    let started = Instant::now();
    for cycle in 0..=cycles {
        let context = format!("seed {seed} cycle {cycle} ({options:?})");
        if cycle > 0 {
            let recovered = check_recovery(&server, &data, &history, &context);
            if cycle % 4 == 0 {
                check_snapshot(&server, &admin_secret, &recovered, &context);
            }
            println!(
                "  recovered to seq {}: {} commands of cycle {} journaled",
                recovered.last_seq,
                recovered.last_cycle_journaled,
                cycle - 1
            );
            last_seq = recovered.last_seq;
        }
        let ack = probe(&server, &probe_secret, &ids, last_seq, &context);
        history.note_sent(&ack.sent);
        let probe_seq = ack.seq;
        history.acks.push(ack);
        if cycle == cycles {
            break;
        }

        let kill_after = Duration::from_millis(rng.in_range(KILL_AFTER_MS));
        let handles: Vec<_> = traders
            .drain(..)
            .map(|mut trader| {
                let ids = ids.clone();
                let addr = server.order_addr;
                std::thread::spawn(move || {
                    let session = trade(addr, &mut trader, &ids);
                    (trader, session)
                })
            })
            .collect();
        // The kill comes at a moment the seed chose, whatever the traders are doing: waiting
        // it out is the test.
        std::thread::sleep(kill_after);
        server.finish();
        let mut summary = Cycle {
            probe_seq,
            sent_by_user: HashMap::new(),
        };
        let (mut sent, mut acked, mut trades) = (0, 0, 0);
        for handle in handles {
            let (trader, session) = handle.join().expect("a trader thread panicked");
            assert!(
                session.end_expected,
                "{context}: user {}'s session ended with: {}; server output:\n{}",
                session.user,
                session.end,
                server.output()
            );
            for s in &session.sent {
                history.note_sent(s);
            }
            sent += session.sent.len();
            acked += session.acks.len();
            trades += session.trades;
            history.acks.extend(session.acks);
            summary.sent_by_user.insert(session.user, session.sent);
            traders.push(trader);
        }
        history.cycles.push(summary);
        println!(
            "cycle {cycle}: {} killed after {kill_after:?}: {sent} sent, {acked} acked, \
             {trades} fills seen",
            options.durability
        );

        let power_loss = rng.below(2) == 0;
        let synced = match power_loss {
            true => Some(lose_power(&data, last_seq, &mut rng)),
            false => None,
        };
        let was_batch = options.durability == "batch";
        options = ServeOptions::for_cycle(cycle + 1, &mut rng);
        drop(server);
        server = Server::start(&data, &options);
        if let Some(synced) = synced {
            let (recovered, _) = server.recovered();
            assert!(
                recovered >= synced,
                "{context}: after a power loss the journal recovered to seq {recovered}, but \
                 seq {synced} had been synced"
            );
            let acked = history.acks.len();
            if was_batch {
                // Acknowledged once written, synced within the interval: what no sync covered
                // may be gone.
                history.acks.retain(|a| a.seq <= recovered);
            }
            println!(
                "  power loss: synced through seq {synced}, recovered to seq {recovered}, \
                 {} acknowledged commands lost{}",
                acked - history.acks.len(),
                if was_batch {
                    " (batch mode's window)"
                } else {
                    ""
                }
            );
        }
    }
    println!(
        "{cycles} kill/restart cycles in {:?}, journal at seq {last_seq}",
        started.elapsed()
    );
    server.terminate();
}

// ----- power loss ----------------------------------------------------------------------------

fn sync_log(data: &Path) -> std::path::PathBuf {
    data.with_extension("sync.log")
}

/// One line of the server's sync log: a segment's state when an `fdatasync` of it returned.
#[derive(Clone, Copy)]
struct Synced {
    records_through: u64,
    count: u64,
    durable_through: u64,
    sealed: bool,
}

/// Turns the data directory a SIGKILL left (the page cache: everything written) into what a
/// power loss at that moment could leave: per segment, what the last sync of this run covered
/// stays, what came after it is lost or torn at a random byte, and a checkpoint slot written
/// after the last sync is lost, kept or torn. Segments this run created and never synced keep
/// only their header. Returns the highest seq a sync covered (`from_seq`, the seq the run
/// started at, when it synced nothing).
fn lose_power(data: &Path, from_seq: u64, rng: &mut Rng) -> u64 {
    use rialto_journal::format::{
        CHECKPOINT_LEN, Checkpoint, SEGMENT_HEADER_LEN, checkpoint_slot, encode_checkpoint,
        journal_dir, list_segments, parse_record,
    };
    let text = std::fs::read_to_string(sync_log(data)).unwrap_or_default();
    let mut syncs: HashMap<String, Vec<Synced>> = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 5, "sync log line {line:?}");
        syncs.entry(f[0].to_owned()).or_default().push(Synced {
            records_through: f[1].parse().unwrap(),
            count: f[2].parse().unwrap(),
            durable_through: f[3].parse().unwrap(),
            sealed: f[4] == "1",
        });
    }
    let mut synced_through = from_seq;
    for (first_seq, path) in list_segments(&journal_dir(data)).unwrap() {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let last = syncs.get(&name).and_then(|s| s.last().copied());
        let last = match last {
            Some(last) => last,
            // Created by this run (its header synced) and never synced since.
            None if first_seq > from_seq => Synced {
                records_through: first_seq - 1,
                count: 0,
                durable_through: first_seq - 1,
                sealed: false,
            },
            None => continue, // untouched by this run
        };
        synced_through = synced_through.max(last.records_through);
        let mut bytes = std::fs::read(&path).unwrap();
        // The synced records end where the record of `records_through` does.
        let mut end = SEGMENT_HEADER_LEN;
        let mut next = first_seq;
        while next <= last.records_through {
            let r = parse_record(&bytes, end).unwrap_or_else(|e| {
                panic!("{name}: synced record of seq {next} at byte {end} is bad: {e:?}")
            });
            end += r.size;
            next += 1;
        }
        // Unsynced bytes: all lost, all kept, or kept up to a random byte.
        let keep = match rng.below(3) {
            0 => 0,
            1 => bytes.len() - end,
            _ => rng.below((bytes.len() - end) as u64 + 1) as usize,
        };
        bytes.truncate(end + keep);
        // Checkpoint slots: as the last sync left them, unless the newest write since
        // persisted (kept) or persisted torn.
        let slot_at = |count: u64, durable: u64, sealed: bool| -> (usize, [u8; CHECKPOINT_LEN]) {
            let c = Checkpoint {
                durable_through: durable,
                count,
                sealed,
            };
            (checkpoint_slot(count), encode_checkpoint(first_seq, &c))
        };
        let mut synced_slots = Vec::new();
        if last.count > 0 {
            synced_slots.push(slot_at(last.count, last.durable_through, last.sealed));
            // The other slot holds the checkpoint before (none before the first: zeros).
            if last.count == 1 {
                synced_slots.push((checkpoint_slot(0), [0; CHECKPOINT_LEN]));
            } else {
                let previous = syncs[&name]
                    .iter()
                    .rev()
                    .find(|s| s.count + 1 == last.count);
                let p = previous.unwrap_or_else(|| {
                    panic!("{name}: the sync log lacks checkpoint {}", last.count - 1)
                });
                synced_slots.push(slot_at(p.count, p.durable_through, p.sealed));
            }
        } else {
            for at in [checkpoint_slot(0), checkpoint_slot(1)] {
                synced_slots.push((at, [0; CHECKPOINT_LEN]));
            }
        }
        let unsynced_checkpoint = synced_slots
            .iter()
            .any(|(at, b)| bytes[*at..*at + CHECKPOINT_LEN] != *b);
        let outcome = if unsynced_checkpoint { rng.below(3) } else { 0 };
        for (at, synced) in synced_slots {
            let now = &mut bytes[at..at + CHECKPOINT_LEN];
            if *now == synced {
                continue;
            }
            match outcome {
                0 => now.copy_from_slice(&synced), // the write was lost
                1 => {}                            // it persisted
                _ => now[rng.below(CHECKPOINT_LEN as u64) as usize] ^= 0x5a, // torn
            }
        }
        std::fs::write(&path, &bytes).unwrap();
    }
    synced_through
}
