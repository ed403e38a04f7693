//! Fail-over with the command log on NATS JetStream (docs/replication.md): two
//! `rialto serve --log jetstream --role auto` processes over a real three-node cluster on
//! loopback. The leader is killed with SIGKILL; the hot standby takes the lease, and serves
//! the user's earlier orders, each exactly once. A leader paused past its lease (SIGSTOP) and
//! resumed acknowledges nothing more, appends nothing, and exits.

mod common;

#[path = "../../server/tests/common/nats.rs"]
mod nats;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{ON_FREE_PORTS, replay, rialto, split_hash};
use nats::NatsCluster;
use rialto_client::Client;
use rialto_core::{Reason, Side, SymbolId};
use rialto_server::auth::Credentials;
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};

/// A `rialto serve` node; killed (SIGKILL) when dropped.
struct Node {
    child: Child,
    /// Its first stdout line, "rialto serving: orders on ...", once it leads.
    serving: mpsc::Receiver<String>,
}

impl Node {
    fn start(data: &Path, cluster: &NatsCluster) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
            .args(["serve", "--demo", "--log", "jetstream", "--role", "auto"])
            .args(["--nats", &cluster.urls_arg()])
            .args(["--set", "log.lease_ms=1000", "--set", "log.venue=failover"])
            .args(ON_FREE_PORTS)
            .arg("--data")
            .arg(data)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
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
        Node { child, serving }
    }

    /// Sends the node a signal (`STOP`, `CONT`) with kill(1).
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal}");
        // A signal is delivered a moment after kill returns: wait until every thread of the
        // node is stopped (or running again), so that what the test sends next finds it so.
        let stopped = signal == "STOP";
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self.stopped() != stopped {
            assert!(
                std::time::Instant::now() < deadline,
                "kill -{signal} took effect"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether every thread of the node is stopped (state `T` in /proc).
    fn stopped(&self) -> bool {
        let tasks = format!("/proc/{}/task", self.child.id());
        std::fs::read_dir(tasks).unwrap().all(|task| {
            let stat =
                std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
            // The state follows the command name in parentheses.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T'))
        })
    }

    /// The node's exit status, once it exits (within `limit`).
    fn exits_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The order gateway's address, once the node leads (within `limit`).
    fn leads_within(&self, limit: Duration) -> Option<String> {
        let line = self.serving.recv_timeout(limit).ok()?;
        let addr = line
            .split("orders on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("no order address in {line:?}"));
        Some(addr.to_owned())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn login(addr: &str, data: &Path, user: i64) -> Client {
    let mut c = Client::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let secret = Credentials::load_or_create(data).unwrap().user_secret(user);
    c.login(user, secret.as_bytes()).unwrap();
    c
}

fn order(id: i64) -> NewOrder {
    NewOrder::limit(id, SymbolId(0), Side::Buy, 990, 1)
}

/// A node that leads on `dir_a` (its order address) and a standby on `dir_b` holding the
/// same venue key (docs/replication.md: a user's secret works on each node).
fn leader_and_standby(cluster: &NatsCluster, dir_a: &Path, dir_b: &Path) -> (Node, String, Node) {
    let leader = Node::start(dir_a, cluster);
    let addr_a = leader
        .leads_within(Duration::from_secs(30))
        .expect("the first node leads");
    std::fs::copy(dir_a.join("venue.key"), dir_b.join("venue.key")).unwrap();
    let standby = Node::start(dir_b, cluster);
    (leader, addr_a, standby)
}

#[test]
fn after_a_sigkill_of_the_leader_the_standby_serves_every_acknowledged_order_once() {
    let cluster = NatsCluster::start();
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let (leader, addr_a, standby) = leader_and_standby(&cluster, dir_a.path(), dir_b.path());

    let mut t = login(&addr_a, dir_a.path(), 1);
    let mut acked = Vec::new();
    for id in 1..=5 {
        t.place(order(id)).unwrap();
        match t.recv().unwrap() {
            ServerMsg::Accepted { order, seq, .. } if order == id => acked.push(seq),
            other => panic!("order {id}: {other}"),
        }
    }
    assert!(
        standby.leads_within(Duration::from_millis(1_500)).is_none(),
        "the standby must not lead while the leader holds the lease"
    );

    drop(leader); // SIGKILL
    let addr_b = standby
        .leads_within(Duration::from_secs(30))
        .expect("the standby takes over within 30 s");
    let mut t = login(&addr_b, dir_b.path(), 1);
    let open: Vec<i64> = match t.request(&ClientMsg::MyReport { request: 1 }).unwrap() {
        ServerMsg::Report { report, .. } => report.orders.iter().map(|o| o.order).collect(),
        other => panic!("report: {other}"),
    };
    assert_eq!(open, [1, 2, 3, 4, 5], "each acknowledged order once");
    // Resending an acknowledged order after the fail-over does not place it twice.
    t.place(order(5)).unwrap();
    match t.recv().unwrap() {
        ServerMsg::Rejected {
            order: 5, reason, ..
        } => {
            assert_eq!(reason, Reason::DuplicateOrderId)
        }
        other => panic!("resent order 5: {other}"),
    }
    // And the new leader appends after the old one's last command.
    t.place(order(6)).unwrap();
    match t.recv().unwrap() {
        ServerMsg::Accepted { order: 6, seq, .. } => {
            assert!(seq > *acked.last().unwrap(), "seq {seq} after {acked:?}")
        }
        other => panic!("order 6: {other}"),
    };
    let last_seq = match t.request(&ClientMsg::MyReport { request: 2 }).unwrap() {
        ServerMsg::Report { seq, .. } => seq,
        other => panic!("report: {other}"),
    };

    // The stream reads back as a journal does: verified record by record, and dumped as a
    // scenario that replays to the state the log's own reading reaches.
    let nats = cluster.urls_arg();
    let stream = ["--nats", &nats, "--venue", "failover"];
    let verify = rialto(&[&["journal", "verify"][..], &stream].concat(), "");
    assert_eq!(verify.code, Some(0), "{}{}", verify.stdout, verify.stderr);
    assert!(
        verify.stdout.contains(&format!("seq: 1..={last_seq}\n")),
        "{}",
        verify.stdout
    );
    let hash = verify
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("state_hash: "))
        .expect("verify prints the state hash");
    let dump = rialto(&[&["journal", "dump"][..], &stream].concat(), "");
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    assert_eq!(dump.stdout.lines().count() as u64, last_seq);
    let replayed = replay(&dump.stdout, &[]);
    let final_line = replayed.stdout.lines().last().expect("a final line");
    assert_eq!(split_hash(final_line).1, hash);
}

#[test]
fn a_leader_paused_past_its_lease_acknowledges_and_appends_nothing_when_it_resumes() {
    let cluster = NatsCluster::start();
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let (mut leader, addr_a, standby) = leader_and_standby(&cluster, dir_a.path(), dir_b.path());
    let mut t = login(&addr_a, dir_a.path(), 1);
    t.place(order(1)).unwrap();
    assert!(matches!(
        t.recv().unwrap(),
        ServerMsg::Accepted { order: 1, .. }
    ));

    // Paused, the leader cannot renew its lease: the standby takes over.
    leader.signal("STOP");
    t.place(order(2)).unwrap(); // waits in the paused leader's socket
    let addr_b = standby
        .leads_within(Duration::from_secs(30))
        .expect("the standby takes over from a paused leader");
    leader.signal("CONT");
    // The old leader reads order 2 but never acknowledges it, and stops.
    loop {
        match t.recv() {
            Ok(ServerMsg::Accepted { order: 2, .. }) => {
                panic!("a leader that lost its lease acknowledged an order")
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let status = leader
        .exits_within(Duration::from_secs(30))
        .expect("the old leader exits");
    assert!(!status.success(), "it exits with an error: {status}");

    // Nothing of the old leader's after the pause reached the log.
    let mut t = login(&addr_b, dir_b.path(), 1);
    let open: Vec<i64> = match t.request(&ClientMsg::MyReport { request: 1 }).unwrap() {
        ServerMsg::Report { report, .. } => report.orders.iter().map(|o| o.order).collect(),
        other => panic!("report: {other}"),
    };
    assert_eq!(open, [1]);
}
