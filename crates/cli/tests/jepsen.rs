//! A Jepsen-style fault test of the replicated log (docs/replication.md, "The fault test"):
//! a three-node NATS cluster and two `rialto serve --log jetstream --role auto` processes on
//! loopback, three traders placing orders through whichever node leads
//! (`rialto_client::failover::FailoverClient`), and a seeded random schedule of faults:
//!
//! - `kill-leader`: SIGKILL of the leading node; the standby takes over; the killed node is
//!   started again on its data directory and follows as a standby;
//! - `pause-leader`: SIGSTOP of the leader for longer than its lease, until the standby leads,
//!   then SIGCONT: orders sent to the paused leader are never acknowledged and never reach the
//!   log, and the old leader exits with an error (its lease check or the log's fence refusing
//!   it);
//! - `kill-nats`: SIGKILL of one nats-server, trading goes on on the other two, and it is
//!   started again on its store;
//! - `restart-standby`: SIGKILL or SIGTERM of the standby, started again;
//! - `restart-replica`: SIGKILL or SIGTERM of a read replica (`--role replica`), started
//!   again (it reads the log from the start).
//!
//! A node that exits on its own (a leader whose appends time out while NATS elects a new
//! stream leader, say) is started again, as a supervisor would, and counted. At the end:
//! every order a trader saw acknowledged is placed exactly once in the log, no order the
//! traders sent is placed twice, every order acknowledged is known to the last leader, and
//! both Rialto nodes and a fresh reading of the stream reach the same state hash at the same
//! seq (each node leads in turn and answers an admin TakeSnapshot); the nodes also compared
//! the leader's checkpoints (every 5,000 commands) while they followed, and none diverged; the
//! replica's market data (L3 books and recent trades, from its public REST) is the last
//! leader's, at the same feed seqs.
//!
//! `JEPSEN_SEED` and `JEPSEN_CYCLES` (20 by default) override the schedule; the seed is
//! printed first, so a failure can be run again. `scripts/jepsen.sh` runs more cycles and
//! prints the summary table.

mod common;

#[path = "../../server/tests/common/nats.rs"]
mod nats;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{Rng, replay, rialto};
use nats::NatsCluster;
use rialto_client::Client;
use rialto_client::failover::{Delivery, FailoverClient};
use rialto_core::{Reason, Side, SymbolId, Tif};
use rialto_server::auth::{Credentials, hex, read_key};
use rialto_wire::{ClientMsg, NewOrder, OrderState, RequestKind, ServerMsg};

const VENUE: &str = "jepsen";
/// A short lease, so that a fail-over takes about a second.
const LEASE_MS: u64 = 1_000;
/// The leader writes its state hash into the log this often; every node compares. Each hash
/// encodes the whole state, so a replica started again late in a long run (it reads the log
/// from the start) pays for every checkpoint before the end: at 25 it took over a minute by
/// cycle 27 (docs/replication.md, "Checkpoints").
const CHECKPOINT_EVERY: u64 = 5_000;
/// The traders (demo users 1..=3) and the user whose orders probe a paused leader.
const TRADERS: [i64; 3] = [1, 2, 3];
const PROBE_USER: i64 = 8;
/// Orders each trader keeps in flight.
const WINDOW: usize = 4;
/// Acknowledgements that must arrive after a fault before the next one.
const PROGRESS: u64 = 12;
/// The longest any awaited event may take (a loaded 2-core machine).
const PATIENCE: Duration = Duration::from_secs(60);
/// Commands a second that a node started again reads the log at least, on top of
/// [`PATIENCE`] (a quiet host reads about 250,000; 12,600 were seen with the host loaded).
const READ_FLOOR: u64 = 5_000;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}

// ----- the Rialto nodes ---------------------------------------------------------------------

/// One `rialto serve` process.
struct Process {
    child: Child,
    /// Its first stdout line, "rialto serving: orders on ..., admin on ...", once it leads.
    serving: mpsc::Receiver<String>,
    /// Its stderr (the log).
    log: PathBuf,
}

impl Process {
    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

/// A Rialto node: its data directory and addresses outlive its processes.
struct Node {
    name: String,
    /// `--role`: `auto` (leader or hot standby) or `replica`.
    role: &'static str,
    dir: tempfile::TempDir,
    /// The order gateway's address whenever this node leads.
    addr: String,
    /// Its web listener (REST and WebSocket): a leader's, or a read replica's.
    web: String,
    process: Option<Process>,
    starts: u32,
}

/// A node's process never outlives the test, whatever ends it (a failed check included): a
/// standby or replica left running would keep retrying NATS servers that are gone.
impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a node's log says of why it stopped leading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stopped {
    /// The log's expected-sequence fence refused an append (`DEPOSED`).
    Fence,
    /// Its own lease check refused to append (the lease was taken, or may have lapsed).
    Lease,
    Other,
}

fn send_signal(pid: &str, signal: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid)
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// Whether every thread of process `pid` is stopped (state `T` in /proc).
fn stopped(pid: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.into_iter().all(|task| {
        let stat = std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T'))
    })
}

/// A GET over plain HTTP/1.1 (the test's own minimal client): the body of a 200, or an error.
fn http_get(addr: &str, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or("no header end")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("{path}: {head}"));
    }
    Ok(body.to_owned())
}

/// A node's public market data as text to compare: each demo symbol's L3 book (with the
/// feed's seq) and its recent trades (with the feed's trade numbers).
fn market_data(web: &str) -> Result<String, String> {
    let mut out = String::new();
    for symbol in ["BTC-USD", "ETH-USD"] {
        for path in [
            format!("/api/v1/book/{symbol}/orders?limit=1000"),
            format!("/api/v1/trades/{symbol}?limit=1000"),
        ] {
            let body = http_get(web, &path)?;
            out += &format!("{path}: {body}\n");
        }
    }
    Ok(out)
}

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let last: Vec<&str> = text.lines().rev().take(lines).collect();
    last.into_iter().rev().collect::<Vec<_>>().join("\n")
}

impl Node {
    fn new(name: &str, role: &'static str) -> Node {
        Node {
            name: name.to_owned(),
            role,
            dir: tempfile::tempdir().unwrap(),
            addr: free_addr(),
            web: free_addr(),
            process: None,
            starts: 0,
        }
    }

    fn start(&mut self, cluster: &NatsCluster, logs: &Path) {
        assert!(self.process.is_none(), "{} runs already", self.name);
        self.starts += 1;
        let log = logs.join(format!("{}-{}.log", self.name, self.starts));
        let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
            .args(["serve", "--demo", "--log", "jetstream", "--role", self.role])
            .args(["--nats", &cluster.urls_arg()])
            .args(["--set", &format!("log.lease_ms={LEASE_MS}")])
            .args(["--set", &format!("log.venue={VENUE}")])
            .args(["--set", &format!("log.checkpoint_every={CHECKPOINT_EVERY}")])
            .args(["--listen", &self.addr])
            .args([
                "--admin-listen",
                "127.0.0.1:0",
                "--fix-listen",
                "127.0.0.1:0",
            ])
            .args(["--web-listen", &self.web])
            .arg("--data")
            .arg(self.dir.path())
            .stdout(Stdio::piped())
            .stderr(File::create(&log).expect("a log file"))
            .spawn()
            .expect("start rialto serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, serving) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            for _ in lines {}
        });
        self.process = Some(Process {
            child,
            serving,
            log,
        });
    }

    fn pid(&self) -> String {
        self.process.as_ref().expect("a running node").pid()
    }

    fn log(&self) -> PathBuf {
        self.process.as_ref().expect("a node started").log.clone()
    }

    /// Its exit status if it has exited (the process is then forgotten).
    fn exited(&mut self) -> Option<ExitStatus> {
        let process = self.process.as_mut()?;
        let status = process.child.try_wait().unwrap()?;
        self.process = None;
        Some(status)
    }

    fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }

    /// SIGTERM, and its exit status (within `PATIENCE`).
    fn terminate(&mut self) -> ExitStatus {
        send_signal(&self.pid(), "TERM");
        self.wait_exit()
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            assert!(Instant::now() < deadline, "{} did not exit", self.name);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The admin address, if this node's process has started to lead since the last look.
    fn leads(&self) -> Option<String> {
        let line = self.process.as_ref()?.serving.try_recv().ok()?;
        let admin = line
            .split("admin on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("no admin address in {line:?}"));
        Some(admin.to_owned())
    }

    /// Whether this node's process has started to serve since the last look (a read
    /// replica: once it has applied the log as far as it reached when it started).
    fn started_serving(&self) -> bool {
        self.process
            .as_ref()
            .is_some_and(|p| p.serving.try_recv().is_ok())
    }

    /// Whether its log says it follows another node's log as a hot standby and has caught up
    /// with it (a standby started again late in a long run reads the log a while first, and
    /// could not take over within the patience).
    fn follows(&self) -> bool {
        self.process.as_ref().is_some_and(|p| {
            std::fs::read_to_string(&p.log)
                .unwrap_or_default()
                .contains("the hot standby is warm")
        })
    }
}

// ----- the traders --------------------------------------------------------------------------

/// What one trader saw.
#[derive(Default)]
struct Record {
    user: i64,
    /// Orders sent (each id once; a resend is the same order).
    sent: BTreeSet<i64>,
    /// Orders acknowledged as placed: an Accepted, found placed after a reconnection, or a
    /// resend refused as a duplicate (its first send was placed).
    acked: BTreeSet<i64>,
    /// Orders acknowledged twice (must stay empty).
    acked_twice: Vec<i64>,
    /// Orders rejected (for a reason of the rules: not placed).
    rejected: BTreeSet<i64>,
    reconnections: u64,
    /// Why the trader stopped early, if it did.
    error: Option<String>,
}

struct Trader {
    handle: JoinHandle<(Record, FailoverClient)>,
}

fn trade_order(rng: &mut Rng, id: i64) -> NewOrder {
    let side = if rng.below(2) == 0 {
        Side::Buy
    } else {
        Side::Sell
    };
    let price = 985 + rng.below(11) as i64;
    let qty = 1 + rng.below(3) as i64;
    let order = NewOrder::limit(id, SymbolId(0), side, price, qty);
    if rng.below(10) < 3 {
        NewOrder {
            tif: Some(Tif::Ioc),
            ..order
        }
    } else {
        order
    }
}

fn start_trader(
    addrs: [String; 2],
    user: i64,
    secret: String,
    seed: u64,
    acks: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    errors: Arc<Mutex<Vec<String>>>,
) -> Trader {
    let handle = std::thread::spawn(move || {
        let (record, client) = trade(addrs, user, secret, seed, acks, stop);
        if let Some(error) = &record.error {
            eprintln!("jepsen: trader {user} stopped: {error}");
            errors
                .lock()
                .unwrap()
                .push(format!("trader {user}: {error}"));
        }
        (record, client)
    });
    Trader { handle }
}

/// A trader's loop: places orders, keeping `WINDOW` in flight, until `stop`; then waits for
/// the answers to those in flight.
fn trade(
    addrs: [String; 2],
    user: i64,
    secret: String,
    seed: u64,
    acks: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> (Record, FailoverClient) {
    {
        let mut client = FailoverClient::connect_with(
            &addrs,
            user,
            secret.as_bytes(),
            Duration::from_millis(500),
            PATIENCE,
        )
        .unwrap_or_else(|e| panic!("trader {user} cannot log in: {e}"));
        let mut rng = Rng(seed);
        let mut record = Record {
            user,
            ..Record::default()
        };
        let mut resent = BTreeSet::new();
        let mut next = 1;
        let mut drain_until = None;
        let mut finishing = false;
        let ack = |record: &mut Record, order: i64| {
            if record.acked.insert(order) {
                acks.fetch_add(1, Ordering::SeqCst);
            } else {
                record.acked_twice.push(order);
            }
        };
        loop {
            if drain_until.is_none() && stop.load(Ordering::SeqCst) {
                drain_until = Some(Instant::now() + PATIENCE);
            }
            if drain_until.is_none() {
                while client.in_flight().count() < WINDOW {
                    record.sent.insert(next);
                    let order = trade_order(&mut rng, next);
                    next += 1;
                    if let Err(e) = client.place(order) {
                        record.error = Some(format!("place: {e}"));
                        return (record, client);
                    }
                }
            } else if client.in_flight().count() == 0 {
                // A reconnection during the last place may still report orders it found
                // placed (no longer in flight): read until the connection is quiet.
                finishing = true;
            } else if drain_until.is_some_and(|d| Instant::now() > d) {
                let left: Vec<i64> = client.in_flight().collect();
                record.error = Some(format!("orders never answered: {left:?}"));
                return (record, client);
            }
            match client.recv() {
                Ok(Delivery::Msg(ServerMsg::Accepted {
                    order,
                    kind: RequestKind::Place,
                    ..
                })) => ack(&mut record, order),
                Ok(Delivery::Msg(ServerMsg::Rejected {
                    order,
                    kind: RequestKind::Place,
                    reason,
                    ..
                })) => {
                    if reason == Reason::DuplicateOrderId && resent.contains(&order) {
                        ack(&mut record, order);
                    } else {
                        record.rejected.insert(order);
                    }
                }
                Ok(Delivery::Msg(_)) => {}
                Ok(Delivery::Reconnected {
                    placed,
                    resent: again,
                    ..
                }) => {
                    record.reconnections += 1;
                    for (order, _) in placed {
                        ack(&mut record, order);
                    }
                    resent.extend(again);
                }
                Err(e) if e.is_timeout() => {
                    if finishing {
                        return (record, client);
                    }
                }
                Err(e) => {
                    record.error = Some(format!("recv: {e}"));
                    return (record, client);
                }
            }
        }
    }
}

// ----- the venue under test -----------------------------------------------------------------

#[derive(Default)]
struct Tally {
    faults: BTreeMap<&'static str, u64>,
    /// Nodes that exited on their own and were started again.
    unplanned_exits: u64,
    /// How each paused leader stopped.
    zombies: BTreeMap<Stopped, u64>,
    /// Orders a paused leader was sent and never acknowledged.
    probes_unacked: u64,
    failover_ms: Vec<u128>,
}

struct Venue {
    cluster: NatsCluster,
    nodes: [Node; 2],
    /// The node that leads and its admin address.
    leader: Option<(usize, String)>,
    logs: tempfile::TempDir,
    /// Every log file a node wrote, for the divergence check and failure messages.
    all_logs: Vec<PathBuf>,
    acks: Arc<AtomicU64>,
    /// What stopped a trader early, as it happens.
    trader_errors: Arc<Mutex<Vec<String>>>,
    tally: Tally,
    /// The probe user's next order id, and every probe order sent to a paused leader.
    next_probe: i64,
    probes: Vec<i64>,
    /// A read replica (`--role replica`), and whether it serves yet.
    replica: Node,
    replica_serves: bool,
}

impl Venue {
    fn start_node(&mut self, i: usize) {
        self.nodes[i].start(&self.cluster, self.logs.path());
        self.all_logs.push(self.nodes[i].log());
    }

    fn start_replica(&mut self) {
        self.replica.start(&self.cluster, self.logs.path());
        self.all_logs.push(self.replica.log());
        self.replica_serves = false;
    }

    /// Looks at both nodes once: notes a node that started to lead, and starts again a node
    /// that exited on its own (`paused`: a node the test paused, not looked at).
    fn supervise(&mut self, paused: Option<usize>) {
        for i in 0..2 {
            if Some(i) == paused {
                continue;
            }
            if let Some(admin) = self.nodes[i].leads() {
                self.leader = Some((i, admin));
            }
            if let Some(status) = self.nodes[i].exited() {
                eprintln!(
                    "jepsen: {} exited on its own ({status}); starting it again. Its log:\n{}",
                    self.nodes[i].name,
                    tail(&self.all_logs_of(i), 5)
                );
                self.tally.unplanned_exits += 1;
                if self.leader.as_ref().is_some_and(|(l, _)| *l == i) {
                    self.leader = None;
                }
                self.start_node(i);
            }
        }
        if self.replica.started_serving() {
            self.replica_serves = true;
        }
        if let Some(status) = self.replica.exited() {
            eprintln!(
                "jepsen: the replica exited on its own ({status}); starting it again. Its log:\n{}",
                tail(&self.log_of(&self.replica), 5)
            );
            self.tally.unplanned_exits += 1;
            self.start_replica();
        }
    }

    /// How long a node started again may take to catch up with the log: [`PATIENCE`] and a
    /// second per [`READ_FLOOR`] commands acknowledged so far (late in a 200-cycle run on a
    /// loaded host, a replica took 101 s to read 1.25 million commands).
    fn catch_up_patience(&self) -> Duration {
        PATIENCE + Duration::from_secs(self.acks.load(Ordering::SeqCst) / READ_FLOOR)
    }

    fn wait_until(&mut self, what: &str, paused: Option<usize>, done: impl Fn(&Venue) -> bool) {
        self.wait_within(PATIENCE, what, paused, done);
    }

    fn wait_within(
        &mut self,
        patience: Duration,
        what: &str,
        paused: Option<usize>,
        done: impl Fn(&Venue) -> bool,
    ) {
        let deadline = Instant::now() + patience;
        loop {
            self.supervise(paused);
            if done(self) {
                return;
            }
            let errors = self.trader_errors.lock().unwrap().clone();
            if !errors.is_empty() {
                panic!("{what}: {}\n{}", errors.join("\n"), self.logs());
            }
            if Instant::now() > deadline {
                panic!("{what} did not happen within {patience:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until node `other_than`'s peer leads; the leader's index.
    fn wait_new_leader(&mut self, not: usize, paused: Option<usize>) -> usize {
        self.wait_until("a fail-over", paused, |v| {
            v.leader.as_ref().is_some_and(|(l, _)| *l != not)
        });
        self.leader.as_ref().unwrap().0
    }

    fn wait_leader(&mut self) -> usize {
        self.wait_until("a leader", None, |v| v.leader.is_some());
        self.leader.as_ref().unwrap().0
    }

    /// Waits until the traders saw `PROGRESS` more acknowledgements.
    fn wait_progress(&mut self) {
        let target = self.acks.load(Ordering::SeqCst) + PROGRESS;
        let acks = self.acks.clone();
        self.wait_until("trading", None, move |_| {
            acks.load(Ordering::SeqCst) >= target
        });
    }

    /// Waits until node `i` follows the leader as a hot standby.
    fn wait_follows(&mut self, i: usize) {
        let patience = self.catch_up_patience();
        self.wait_within(patience, "a standby following", None, |v| {
            v.nodes[i].follows() || v.leader.as_ref().is_some_and(|(l, _)| *l == i)
        });
    }

    fn logs(&self) -> String {
        let mut out = String::new();
        for log in &self.all_logs {
            out += &format!("--- {}:\n{}\n", log.display(), tail(log, 15));
        }
        out + &self.cluster.logs()
    }

    fn secret(&self, user: i64) -> String {
        let key = read_key(self.nodes[0].dir.path())
            .unwrap()
            .expect("a venue key");
        Credentials::from_key(key).user_secret(user)
    }

    /// The leader's (seq, state hash), from an admin TakeSnapshot.
    fn leader_state(&self) -> (u64, String) {
        let (_, admin_addr) = self.leader.as_ref().expect("a leader");
        let key = read_key(self.nodes[0].dir.path()).unwrap().unwrap();
        let mut admin = Client::connect(admin_addr.as_str()).unwrap();
        admin.set_read_timeout(Some(PATIENCE)).unwrap();
        admin
            .admin_login(Credentials::from_key(key).admin_secret().as_bytes())
            .unwrap();
        match admin
            .request(&ClientMsg::TakeSnapshot { request: 1 })
            .unwrap()
        {
            ServerMsg::SnapshotTaken {
                seq, state_hash, ..
            } => (seq, hex(&state_hash)),
            other => panic!("TakeSnapshot: {other}"),
        }
    }

    // ----- the faults -----

    fn kill_leader(&mut self) {
        let l = self.wait_leader();
        let other = 1 - l;
        self.wait_follows(other);
        let killed = Instant::now();
        self.nodes[l].kill();
        self.leader = None;
        self.wait_new_leader(l, None);
        self.tally.failover_ms.push(killed.elapsed().as_millis());
        self.start_node(l);
        self.wait_follows(l);
    }

    fn pause_leader(&mut self) {
        let l = self.wait_leader();
        self.wait_follows(1 - l);
        let mut probe = Client::connect(self.nodes[l].addr.as_str()).unwrap();
        probe.set_read_timeout(Some(PATIENCE)).unwrap();
        probe
            .login(PROBE_USER, self.secret(PROBE_USER).as_bytes())
            .unwrap();
        let pid = self.nodes[l].pid();
        send_signal(&pid, "STOP");
        let deadline = Instant::now() + PATIENCE;
        while !stopped(&pid) {
            assert!(Instant::now() < deadline, "SIGSTOP took effect");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Sent to the paused leader: they wait in its socket until it resumes.
        let probes = self.next_probe..self.next_probe + 3;
        self.next_probe = probes.end;
        for id in probes.clone() {
            probe
                .place(NewOrder::limit(id, SymbolId(0), Side::Buy, 985, 1))
                .unwrap();
        }
        self.probes.extend(probes.clone());
        self.wait_new_leader(l, Some(l));
        send_signal(&pid, "CONT");
        // The old leader reads the probes but must acknowledge none; then it stops.
        loop {
            match probe.recv() {
                Ok(ServerMsg::Accepted { order, .. }) if probes.contains(&order) => panic!(
                    "a leader that lost its lease acknowledged probe order {order}\n{}",
                    self.logs()
                ),
                Ok(_) => {}
                Err(e) if e.is_timeout() => panic!("the old leader neither answered nor closed"),
                Err(_) => break,
            }
        }
        self.tally.probes_unacked += 3;
        let status = self.nodes[l].wait_exit();
        assert!(!status.success(), "the old leader exits with an error");
        let log = std::fs::read_to_string(self.all_logs_of(l)).unwrap_or_default();
        let how = if log.contains("DEPOSED") {
            Stopped::Fence
        } else if log.contains("no longer leads") || log.contains("stops leading") {
            Stopped::Lease
        } else {
            Stopped::Other
        };
        *self.tally.zombies.entry(how).or_default() += 1;
        self.start_node(l);
        self.wait_follows(l);
    }

    fn kill_nats(&mut self, rng: &mut Rng) {
        let n = rng.below(3) as usize;
        self.cluster.kill(n);
        self.wait_progress();
        self.cluster.restart(n);
    }

    /// SIGKILL or SIGTERM of the read replica, started again; waits until it serves.
    fn restart_replica(&mut self, rng: &mut Rng) {
        if rng.below(2) == 0 {
            self.replica.kill();
        } else {
            let status = self.replica.terminate();
            assert!(status.success(), "a replica stopped by SIGTERM exits 0");
        }
        self.start_replica();
        // A replica reads the stream from its start (the run never trims it: docs/replication.md,
        // "Read replicas"), so its start-up grows with the log.
        let patience = self.catch_up_patience();
        self.wait_within(patience, "the replica serving", None, |v| v.replica_serves);
    }

    fn restart_standby(&mut self, rng: &mut Rng) {
        let l = self.wait_leader();
        let s = 1 - l;
        if rng.below(2) == 0 {
            self.nodes[s].kill();
        } else {
            let status = self.nodes[s].terminate();
            assert!(status.success(), "a standby stopped by SIGTERM exits 0");
        }
        self.start_node(s);
        self.wait_follows(s);
    }

    /// The replica's and the last leader's market data (L3 book and recent trades of each
    /// demo symbol, from each node's public REST), once the replica's equals the leader's or
    /// `PATIENCE` has passed; an error if either could not be read.
    fn market_data_of_replica_and_leader(&mut self) -> Result<(String, String), String> {
        let l = self.wait_leader();
        let leader = market_data(&self.nodes[l].web).map_err(|e| format!("the leader: {e}"))?;
        let deadline = Instant::now() + PATIENCE;
        loop {
            self.supervise(None);
            if self.replica_serves {
                let replica =
                    market_data(&self.replica.web).map_err(|e| format!("the replica: {e}"))?;
                if replica == leader || Instant::now() > deadline {
                    return Ok((replica, leader));
                }
            } else if Instant::now() > deadline {
                return Err("the replica did not serve within the patience".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn all_logs_of(&self, i: usize) -> PathBuf {
        self.log_of(&self.nodes[i])
    }

    /// The log file of a node's current (or last) process.
    fn log_of(&self, node: &Node) -> PathBuf {
        let name = format!("{}-{}.log", node.name, node.starts);
        self.logs.path().join(name)
    }
}

#[test]
fn jepsen_every_acknowledged_order_survives_the_faults_exactly_once() {
    let cycles = env_u64("JEPSEN_CYCLES").unwrap_or(20);
    let seed = env_u64("JEPSEN_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("jepsen: seed {seed}, {cycles} cycles (JEPSEN_SEED={seed} JEPSEN_CYCLES={cycles})");
    run(seed, cycles);
}

/// The Place commands in the log and what became of each: `(user, order)` to the number of
/// times it was placed, from `rialto journal dump --nats` replayed with `rialto replay`.
fn placed_in_log(nats: &str) -> (BTreeMap<(i64, i64), u64>, u64) {
    let dump = rialto(&["journal", "dump", "--nats", nats, "--venue", VENUE], "");
    assert_eq!(dump.code, Some(0), "journal dump: {}", dump.stderr);
    let replayed = replay(&dump.stdout, &[]);
    assert_eq!(replayed.code, Some(0), "replay: {}", replayed.stderr);
    let mut ok = BTreeSet::new();
    for line in replayed.stdout.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("a JSON event");
        if event["ev"] == "result" && event["status"] == "ok" {
            ok.insert(event["seq"].as_u64().expect("a result's seq"));
        }
    }
    let mut placed = BTreeMap::new();
    let mut commands = 0;
    for (i, line) in dump.stdout.lines().enumerate() {
        commands += 1;
        let command: serde_json::Value = serde_json::from_str(line).expect("a JSON command");
        if command["cmd"] == "place" && ok.contains(&(i as u64 + 1)) {
            let key = (
                command["user"].as_i64().expect("a place's user"),
                command["order"].as_i64().expect("a place's order"),
            );
            *placed.entry(key).or_default() += 1;
        }
    }
    (placed, commands)
}

fn run(seed: u64, cycles: u64) {
    let mut rng = Rng(seed);
    let mut venue = Venue {
        cluster: NatsCluster::start(),
        nodes: [Node::new("a", "auto"), Node::new("b", "auto")],
        leader: None,
        logs: tempfile::tempdir().unwrap(),
        all_logs: Vec::new(),
        acks: Arc::new(AtomicU64::new(0)),
        trader_errors: Arc::new(Mutex::new(Vec::new())),
        tally: Tally::default(),
        next_probe: 1,
        probes: Vec::new(),
        replica: Node::new("r", "replica"),
        replica_serves: false,
    };
    venue.start_node(0);
    assert_eq!(venue.wait_leader(), 0, "the first node leads");
    venue.start_node(1);
    venue.wait_follows(1);
    venue.start_replica();
    venue.wait_until("the replica serving", None, |v| v.replica_serves);

    let stop = Arc::new(AtomicBool::new(false));
    let addrs = [venue.nodes[0].addr.clone(), venue.nodes[1].addr.clone()];
    let traders: Vec<Trader> = TRADERS
        .iter()
        .map(|&user| {
            start_trader(
                addrs.clone(),
                user,
                venue.secret(user),
                rng.next(),
                venue.acks.clone(),
                stop.clone(),
                venue.trader_errors.clone(),
            )
        })
        .collect();
    venue.wait_progress();
    let started = Instant::now();
    for cycle in 1..=cycles {
        let kind = match rng.below(5) {
            0 => "kill-leader",
            1 => "pause-leader",
            2 => "kill-nats",
            3 => "restart-replica",
            _ => "restart-standby",
        };
        eprintln!(
            "jepsen: cycle {cycle} ({:.1} s): {kind}",
            started.elapsed().as_secs_f64()
        );
        match kind {
            "kill-leader" => venue.kill_leader(),
            "pause-leader" => venue.pause_leader(),
            "kill-nats" => venue.kill_nats(&mut rng),
            "restart-replica" => venue.restart_replica(&mut rng),
            _ => venue.restart_standby(&mut rng),
        }
        *venue.tally.faults.entry(kind).or_default() += 1;
        venue.wait_progress();
    }
    stop.store(true, Ordering::SeqCst);
    let traded: Vec<(Record, FailoverClient)> = traders
        .into_iter()
        .map(|t| t.handle.join().expect("a trader"))
        .collect();
    let mut problems = Vec::new();
    for (record, _) in &traded {
        if let Some(error) = &record.error {
            problems.push(format!("trader {}: {error}", record.user));
        }
    }

    // The last leader knows every acknowledged order, and none of the probes.
    let l = venue.wait_leader();
    let (seq, hash) = venue.leader_state();
    // Asked on a fresh connection to the last leader: a trader's own connection may have
    // broken with the last fault.
    let mut lost = Vec::new();
    for (record, _) in &traded {
        let mut asker = Client::connect(venue.nodes[l].addr.as_str()).unwrap();
        asker.set_read_timeout(Some(PATIENCE)).unwrap();
        asker
            .login(record.user, venue.secret(record.user).as_bytes())
            .unwrap();
        for &order in &record.acked {
            match asker.request(&ClientMsg::OrderStatus { request: 1, order }) {
                Ok(ServerMsg::OrderStatus {
                    state: OrderState::Unknown,
                    ..
                }) => lost.push((record.user, order)),
                Ok(ServerMsg::OrderStatus { .. }) => {}
                other => problems.push(format!(
                    "order status of user {} order {order}: {other:?}",
                    record.user
                )),
            }
        }
    }
    let mut probe = Client::connect(venue.nodes[l].addr.as_str()).unwrap();
    probe.set_read_timeout(Some(PATIENCE)).unwrap();
    probe
        .login(PROBE_USER, venue.secret(PROBE_USER).as_bytes())
        .unwrap();
    for &order in &venue.probes {
        match probe.request(&ClientMsg::OrderStatus { request: 1, order }) {
            Ok(ServerMsg::OrderStatus {
                state: OrderState::Unknown,
                ..
            }) => {}
            other => problems.push(format!(
                "probe order {order} sent to a paused leader: {other:?}"
            )),
        }
    }

    // The stream, read afresh: every record's CRC, the seqs' continuity, every checkpoint the
    // leader wrote, and the state hash the last leader has.
    let nats = venue.cluster.urls_arg();
    let every = CHECKPOINT_EVERY.to_string();
    let verify = rialto(
        &[
            "journal",
            "verify",
            "--nats",
            &nats,
            "--venue",
            VENUE,
            "--checkpoint-every",
            &every,
        ],
        "",
    );
    let mut divergences = 0;
    if verify.code != Some(0) || !verify.stdout.contains(&format!("seq: 1..={seq}\n")) {
        divergences += 1;
        problems.push(format!(
            "journal verify: {}{}",
            verify.stdout, verify.stderr
        ));
    }
    let verified_hash = verify
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("state_hash: "))
        .unwrap_or_default()
        .to_owned();
    if verified_hash != hash {
        divergences += 1;
        problems.push(format!(
            "the stream reads to state hash {verified_hash}, the leader has {hash} at seq {seq}"
        ));
    }
    let (placed, commands) = placed_in_log(&nats);
    let mut duplicated = Vec::new();
    let mut acked = 0;
    let mut missing = Vec::new();
    let mut unanswered_total = 0;
    for (record, _) in &traded {
        acked += record.acked.len();
        for &order in &record.sent {
            let times = placed.get(&(record.user, order)).copied().unwrap_or(0);
            if times > 1 {
                duplicated.push((record.user, order));
            }
            if times == 0 && record.acked.contains(&order) {
                missing.push((record.user, order));
            }
        }
        let unanswered: Vec<i64> = (record.sent.iter())
            .filter(|o| !record.acked.contains(o) && !record.rejected.contains(o))
            .copied()
            .collect();
        for order in unanswered {
            let times = placed.get(&(record.user, order)).copied().unwrap_or(0);
            eprintln!(
                "jepsen: trader {} never learned the fate of order {order} (placed {times} \
                 times in the log)",
                record.user
            );
            unanswered_total += 1;
        }
        for &order in &record.acked_twice {
            duplicated.push((record.user, order));
        }
    }
    for &order in &venue.probes {
        if placed.contains_key(&(PROBE_USER, order)) {
            problems.push(format!(
                "probe order {order} sent to a paused leader is in the log"
            ));
        }
    }
    lost.extend(missing);
    lost.sort();
    lost.dedup();

    // The replica's market data is the leader's as trading ends: the same L3 books at the
    // same feed seqs, the same recent trades with the same trade numbers.
    let replica_matches = match venue.market_data_of_replica_and_leader() {
        // Traded: the leader's books hold orders (`[[order, price, qty]...`).
        Ok((replica, leader)) if replica == leader && leader.contains("[[") => true,
        Ok((replica, leader)) => {
            divergences += 1;
            problems.push(format!(
                "the replica's market data differs from the leader's:\nreplica: {replica}\nleader: {leader}"
            ));
            false
        }
        Err(e) => {
            problems.push(format!("market data: {e}"));
            false
        }
    };
    // Every node at the same seq: each leads in turn (a node stopped cleanly gives the lease
    // up) and answers a TakeSnapshot.
    for _ in 0..2 {
        let l = venue.wait_leader();
        let status = venue.nodes[l].terminate();
        assert!(status.success(), "a leader stopped by SIGTERM exits 0");
        venue.leader = None;
        let now = venue.wait_new_leader(l, None);
        let state = venue.leader_state();
        if state != (seq, hash.clone()) {
            divergences += 1;
            problems.push(format!(
                "node {} is at {state:?} after the fail-over, node {} was at ({seq}, {hash})",
                venue.nodes[now].name, venue.nodes[l].name
            ));
        }
        venue.start_node(l);
        venue.wait_follows(l);
    }
    for log in &venue.all_logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("DIVERGED") {
            divergences += 1;
            problems.push(format!("{}: {}", log.display(), tail(log, 5)));
        }
    }

    let tally = &venue.tally;
    let mut failover = tally.failover_ms.clone();
    failover.sort();
    println!(
        "jepsen summary (seed {seed}, {cycles} cycles, {:.0} s)",
        started.elapsed().as_secs_f64()
    );
    println!("| what | count |");
    println!("|---|---|");
    for (kind, n) in &tally.faults {
        println!("| fault: {kind} | {n} |");
    }
    for (how, n) in &tally.zombies {
        let how = match how {
            Stopped::Fence => "paused leader stopped by the log's fence (DEPOSED)",
            Stopped::Lease => "paused leader stopped by its own lease check",
            Stopped::Other => "paused leader stopped otherwise",
        };
        println!("| {how} | {n} |");
    }
    println!(
        "| probe orders sent to a paused leader (none acknowledged, none in the log) | {} |",
        tally.probes_unacked
    );
    println!(
        "| nodes that exited on their own (started again) | {} |",
        tally.unplanned_exits
    );
    if let (Some(p50), Some(max)) = (
        failover.get(failover.len().saturating_sub(1) / 2),
        failover.last(),
    ) {
        println!("| fail-over after SIGKILL of the leader, p50 / max (ms) | {p50} / {max} |");
    }
    println!("| commands in the log | {commands} |");
    println!(
        "| orders sent | {} |",
        traded.iter().map(|(r, _)| r.sent.len()).sum::<usize>()
    );
    println!("| orders acknowledged | {acked} |");
    println!("| orders sent whose fate the trader never learned | {unanswered_total} |");
    println!(
        "| orders rejected by the rules | {} |",
        traded.iter().map(|(r, _)| r.rejected.len()).sum::<usize>()
    );
    println!(
        "| reconnections of traders | {} |",
        traded.iter().map(|(r, _)| r.reconnections).sum::<u64>()
    );
    println!("| acknowledged orders lost | {} |", lost.len());
    println!("| orders duplicated | {} |", duplicated.len());
    println!(
        "| read replica's market data equals the leader's | {} |",
        if replica_matches { "yes" } else { "no" }
    );
    println!("| divergences | {divergences} |");
    println!("| final seq, state hash | {seq}, {hash} |");
    if unanswered_total > 0 {
        problems.push(format!(
            "{unanswered_total} orders sent whose fate the trader never learned (above)"
        ));
    }
    if !lost.is_empty() {
        problems.push(format!("acknowledged orders lost (user, order): {lost:?}"));
    }
    if !duplicated.is_empty() {
        problems.push(format!("orders placed twice (user, order): {duplicated:?}"));
    }
    assert!(
        problems.is_empty(),
        "seed {seed}: {}\n{}",
        problems.join("\n"),
        venue.logs()
    );
    assert!(acked > 0, "the traders traded");
}
