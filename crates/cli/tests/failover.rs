//! Fail-over with the command log on NATS JetStream (docs/replication.md): two
//! `rialto serve --log jetstream --role auto` processes over a real three-node cluster on
//! loopback. The leader is killed with SIGKILL; the hot standby takes the lease, and serves
//! the user's earlier orders, each exactly once. A leader paused past its lease (SIGSTOP) and
//! resumed acknowledges nothing more, appends nothing, and exits. Every node takes the venue
//! key from the cluster: a standby started on an empty data directory accepts the secrets the
//! first node gave out, and a node with another key or other settings refuses to join.

mod common;

#[path = "../../server/tests/common/nats.rs"]
mod nats;

#[allow(dead_code)]
#[path = "../../server/tests/common/fix.rs"]
mod fix;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{ON_FREE_PORTS, replay, rialto, split_hash};
use nats::NatsCluster;
use rialto_client::Client;
use rialto_client::failover::{Delivery, FailoverClient};
use rialto_core::{Reason, Side, SymbolId, Tif};
use rialto_server::auth::{Credentials, read_key};
use rialto_wire::{ClientMsg, NewOrder, OrderState, RequestKind, ServerMsg};

/// A `rialto serve` node; killed (SIGKILL) when dropped.
struct Node {
    child: Child,
    /// Its first stdout line, "rialto serving: orders on ...", once it leads.
    serving: mpsc::Receiver<String>,
    /// Its HTTP address, read from that line.
    web: std::cell::RefCell<Option<String>>,
    /// Its FIX address, read from that line.
    fix: std::cell::RefCell<Option<String>>,
}

impl Node {
    fn start(data: &Path, cluster: &NatsCluster) -> Node {
        Node::start_at(data, cluster, "127.0.0.1:0")
    }

    /// A node whose order gateway listens on `listen` once it leads.
    fn start_at(data: &Path, cluster: &NatsCluster, listen: &str) -> Node {
        Node::start_as(data, cluster, listen, "auto")
    }

    /// A node of role `role` (`auto`, `replica`).
    fn start_as(data: &Path, cluster: &NatsCluster, listen: &str, role: &str) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
            .args(["serve", "--demo", "--log", "jetstream", "--role", role])
            .args(["--nats", &cluster.urls_arg()])
            .args(["--set", "log.lease_ms=1000", "--set", "log.venue=failover"])
            .args(["--listen", listen])
            .args(&ON_FREE_PORTS[2..])
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
        Node {
            child,
            serving,
            web: Default::default(),
            fix: Default::default(),
        }
    }

    /// Sends the node a signal (`STOP`, `CONT`, `TERM`) with kill(1).
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{signal}");
        // A signal is delivered a moment after kill returns: wait until every thread of the
        // node is stopped (or running again), so that what the test sends next finds it so.
        if signal == "TERM" {
            return;
        }
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

    /// Whether the node has installed its SIGTERM handler (the signal's bit in `SigCgt` of
    /// /proc/PID/status): from then on SIGTERM asks it to stop rather than killing it.
    fn catches_sigterm(&self) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("SigCgt:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
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
        *self.web.borrow_mut() = line
            .split("web on http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(|w| w.trim_end_matches([',', '/']).to_owned());
        *self.fix.borrow_mut() = line
            .split("FIX on ")
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .map(str::to_owned);
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

/// Logs `user` in at `addr` with the secret derived from the venue key in `data` (which must
/// hold one).
fn login(addr: &str, data: &Path, user: i64) -> Client {
    let mut c = Client::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let key = read_key(data)
        .unwrap()
        .expect("a venue.key in the data directory");
    let secret = Credentials::from_key(key).user_secret(user);
    c.login(user, secret.as_bytes()).unwrap();
    c
}

fn order(id: i64) -> NewOrder {
    NewOrder::limit(id, SymbolId(0), Side::Buy, 990, 1)
}

/// A node that leads on `dir_a` (its order address) and a standby on `dir_b`, both started
/// on empty data directories (the standby takes the venue key from the cluster).
fn leader_and_standby(cluster: &NatsCluster, dir_a: &Path, dir_b: &Path) -> (Node, String, Node) {
    let leader = Node::start(dir_a, cluster);
    let addr_a = leader
        .leads_within(Duration::from_secs(30))
        .expect("the first node leads");
    assert!(read_key(dir_b).unwrap().is_none());
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

    // An API key issued on the first node, and one issued and revoked there.
    let web_a = leader.web.borrow().clone().expect("the leader serves HTTP");
    let admin = Credentials::load_or_create(dir_a.path())
        .unwrap()
        .admin_secret();
    let issue = || {
        let (status, answer) = rialto_cli::order::signed_request(
            &web_a,
            "admin",
            &admin,
            "POST",
            "/api/v1/admin/keys",
            r#"{"user":1,"permissions":["read","trade"]}"#,
        )
        .unwrap();
        assert_eq!(status, 200, "{answer}");
        let made: serde_json::Value = serde_json::from_str(&answer).unwrap();
        (
            made["key"].as_str().unwrap().to_owned(),
            made["secret"].as_str().unwrap().to_owned(),
        )
    };
    let (kept, kept_secret) = issue();
    let (revoked, revoked_secret) = issue();
    let target = format!("/api/v1/admin/keys/{revoked}");
    let (status, answer) =
        rialto_cli::order::signed_request(&web_a, "admin", &admin, "DELETE", &target, "").unwrap();
    assert_eq!(status, 200, "{answer}");

    drop(leader); // SIGKILL
    let addr_b = standby
        .leads_within(Duration::from_secs(30))
        .expect("the standby takes over within 30 s");
    // The secret the first node gave user 1 works on the second, and `rialto secret` prints
    // the same one from either data directory.
    let mut t = login(&addr_b, dir_a.path(), 1);
    let secret = |dir: &Path| {
        let run = rialto(
            &["secret", "--user", "1", "--data", dir.to_str().unwrap()],
            "",
        );
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        run.stdout
    };
    assert_eq!(secret(dir_a.path()), secret(dir_b.path()));
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
    // The keys are the venue's, not the first node's: the kept one places an order on the
    // new leader, the revoked one stays revoked.
    let web_b = standby
        .web
        .borrow()
        .clone()
        .expect("the new leader serves HTTP");
    let body = r#"{"symbol":"BTC-USD","side":"buy","price":"10.00","qty":"0.001"}"#;
    let place = |key: &str, secret: &str| {
        rialto_cli::order::signed_request(&web_b, key, secret, "POST", "/api/v1/orders", body)
            .unwrap()
    };
    let (status, answer) = place(&kept, &kept_secret);
    assert_eq!(status, 200, "the kept key on the new leader: {answer}");
    let (status, answer) = place(&revoked, &revoked_secret);
    assert!(
        status == 401 && answer.contains("unknown_key"),
        "{status} {answer}"
    );
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

#[test]
fn a_standby_and_a_read_replica_whose_nats_servers_are_all_gone_stop_on_sigterm() {
    let mut cluster = NatsCluster::start();
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let dir_c = tempfile::tempdir().unwrap();
    let (leader, _, mut standby) = leader_and_standby(&cluster, dir_a.path(), dir_b.path());
    let mut replica = Node::start_as(dir_c.path(), &cluster, "127.0.0.1:0", "replica");
    assert!(
        replica
            .serving
            .recv_timeout(Duration::from_secs(30))
            .is_ok(),
        "the replica serves"
    );
    // The standby joined the venue (it took the venue key from the cluster) and follows.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while read_key(dir_b.path()).unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the standby joins");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(leader);
    for i in 0..3 {
        cluster.kill(i);
    }
    // Each stops at once (a look at the cluster in progress gives up; it used to wait out
    // its timeout, `log.ack_timeout_ms`, once or twice over).
    for (name, node) in [("standby", &mut standby), ("replica", &mut replica)] {
        node.signal("TERM");
        let status = node
            .exits_within(Duration::from_secs(3))
            .unwrap_or_else(|| panic!("the {name} ignored SIGTERM with no NATS server left"));
        assert!(status.success(), "the {name} stops cleanly: {status}");
    }
}

/// A node started while no NATS server answers retries for 30 s; SIGTERM ends the wait at
/// once, and the node exits cleanly.
#[test]
fn a_node_waiting_for_its_first_nats_connection_stops_on_sigterm() {
    let mut cluster = NatsCluster::start();
    for i in 0..3 {
        cluster.kill(i);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node::start(dir.path(), &cluster);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !node.catches_sigterm() {
        assert!(std::time::Instant::now() < deadline, "the node starts");
        std::thread::sleep(Duration::from_millis(5));
    }
    node.signal("TERM");
    let status = node
        .exits_within(Duration::from_secs(3))
        .expect("the node ignored SIGTERM while it waited for NATS");
    assert!(status.success(), "the node stops cleanly: {status}");
}

#[test]
fn a_node_with_another_venue_key_or_other_settings_refuses_to_join() {
    let cluster = NatsCluster::start();
    let dir_a = tempfile::tempdir().unwrap();
    let leader = Node::start(dir_a.path(), &cluster);
    leader
        .leads_within(Duration::from_secs(30))
        .expect("the first node leads");
    let nats = cluster.urls_arg();
    let serve = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["serve", "--demo", "--log", "jetstream", "--nats", &nats];
        args.extend(["--set", "log.lease_ms=1000", "--set", "log.venue=failover"]);
        args.extend(ON_FREE_PORTS);
        args.extend(["--data", dir.to_str().unwrap()]);
        args.extend(extra);
        rialto(&args, "")
    };

    // A data directory of another venue: its key is not this venue's.
    let dir_c = tempfile::tempdir().unwrap();
    let own_key = Credentials::load_or_create(dir_c.path())
        .unwrap()
        .user_secret(1);
    let run = serve(dir_c.path(), &[]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("holds another venue key") && run.stderr.contains("refuses to join"),
        "{}",
        run.stderr
    );
    let key = read_key(dir_c.path())
        .unwrap()
        .expect("its key is left alone");
    assert_eq!(Credentials::from_key(key).user_secret(1), own_key);

    // Another order-id window would decide duplicates differently.
    let dir_d = tempfile::tempdir().unwrap();
    let run = serve(dir_d.path(), &["--order-id-window", "60"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("this node has `engine.order_id_window_s = 60`"),
        "{}",
        run.stderr
    );
    assert!(
        read_key(dir_d.path()).unwrap().is_none(),
        "a refused node takes no key"
    );
    drop(leader);
}

/// Receives until order `id` is accepted, recording every order accepted meanwhile.
fn wait_for(client: &mut FailoverClient, accepted: &mut BTreeSet<i64>, id: i64) {
    while !accepted.contains(&id) {
        match client.recv().unwrap() {
            Delivery::Msg(ServerMsg::Accepted {
                order,
                kind: RequestKind::Place,
                ..
            }) => assert!(accepted.insert(order), "order {order} accepted twice"),
            Delivery::Msg(ServerMsg::Rejected { order, reason, .. }) => {
                panic!("order {order} rejected: {reason}")
            }
            Delivery::Msg(_) => {}
            other => panic!("{other:?} before the fail-over"),
        }
    }
}

/// A loopback address with a port free a moment ago.
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// User 1's available amount of `currency`, as the node it is logged in at reports it.
fn available(client: &mut FailoverClient, currency: &str) -> i64 {
    match client.request(&ClientMsg::MyReport { request: 1 }).unwrap() {
        ServerMsg::Report { report, .. } => report
            .balances
            .iter()
            .find(|(name, _)| name.as_str() == currency)
            .map_or(0, |(_, balance)| balance.available),
        other => panic!("report: {other}"),
    }
}

#[test]
fn a_client_of_both_nodes_follows_the_fail_over_and_each_of_its_orders_executes_once() {
    const ORDERS: i64 = 50;
    let cluster = NatsCluster::start();
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let (addr_a, addr_b) = (free_addr(), free_addr());
    let leader = Node::start_at(dir_a.path(), &cluster, &addr_a);
    let led = leader.leads_within(Duration::from_secs(30));
    assert_eq!(
        led.as_deref(),
        Some(addr_a.as_str()),
        "the first node leads"
    );
    let standby = Node::start_at(dir_b.path(), &cluster, &addr_b);

    // User 2 bids for 1,000 lots: each of user 1's sells of one lot (immediate-or-cancel)
    // trades at once, so an order executed twice would sell twice.
    let mut maker = login(&addr_a, dir_a.path(), 2);
    maker
        .place(NewOrder::limit(1, SymbolId(0), Side::Buy, 990, 1_000))
        .unwrap();
    assert!(matches!(
        maker.recv().unwrap(),
        ServerMsg::Accepted { order: 1, .. }
    ));
    let key = read_key(dir_a.path()).unwrap().unwrap();
    let secret = Credentials::from_key(key).user_secret(1);
    let mut client = FailoverClient::connect(&[&addr_a, &addr_b], 1, secret.as_bytes()).unwrap();
    assert_eq!(client.addr(), addr_a);
    let sell = |id| NewOrder {
        tif: Some(Tif::Ioc),
        ..NewOrder::limit(id, SymbolId(0), Side::Sell, 990, 1)
    };
    let btc_before = available(&mut client, "BTC");
    let mut accepted = BTreeSet::new();
    client.place(sell(1)).unwrap();
    wait_for(&mut client, &mut accepted, 1);
    let lot = btc_before - available(&mut client, "BTC");
    assert!(lot > 0, "a sell of one lot takes BTC");
    for id in 2..=10 {
        client.place(sell(id)).unwrap();
        wait_for(&mut client, &mut accepted, id);
    }

    // Twenty orders sent and not waited for; the leader paused; twenty more sent, which it
    // never reads; then it dies.
    for id in 11..=30 {
        client.place(sell(id)).unwrap();
    }
    leader.signal("STOP");
    for id in 31..=ORDERS {
        client.place(sell(id)).unwrap();
    }
    assert_eq!(client.in_flight().count(), 40);
    drop(leader); // SIGKILL

    // Every order ends accepted: answered before the drop, found placed at the new leader,
    // or sent again there and answered.
    let mut resent_ids = None;
    while accepted.len() < ORDERS as usize {
        match client.recv().unwrap() {
            Delivery::Msg(ServerMsg::Accepted {
                order,
                kind: RequestKind::Place,
                ..
            }) => assert!(accepted.insert(order), "order {order} accepted twice"),
            Delivery::Msg(ServerMsg::Rejected { order, reason, .. }) => {
                panic!("order {order} rejected: {reason}")
            }
            Delivery::Msg(_) => {}
            Delivery::Reconnected {
                addr,
                placed,
                resent,
            } => {
                assert_eq!(addr, addr_b, "the client moves to the new leader");
                assert!(resent_ids.is_none(), "one fail-over");
                for (order, state) in placed {
                    // An immediate-or-cancel order that was placed has ended.
                    assert_eq!(state, OrderState::Ended, "order {order}");
                    assert!(accepted.insert(order), "order {order} accepted twice");
                }
                resent_ids = Some(resent);
            }
        }
    }
    let resent = resent_ids.expect("the client saw its connection drop");
    for id in 31..=ORDERS {
        assert!(
            resent.contains(&id),
            "order {id}, never read by the old leader, is sent again: {resent:?}"
        );
    }
    assert_eq!(client.in_flight().count(), 0);
    assert!(standby.leads_within(Duration::from_secs(10)).is_some());
    // Exactly once: user 1 sold one lot per order, no more.
    assert_eq!(btc_before - available(&mut client, "BTC"), ORDERS * lot);
    assert_eq!(client.order_status(ORDERS).unwrap(), (OrderState::Ended, 0));
    assert_eq!(
        client.order_status(ORDERS + 1).unwrap(),
        (OrderState::Unknown, 0)
    );
}

/// A FIX client of `node` (which leads) as TRADER1, user 1, whose messages are numbered from
/// `seq`; logged on, the server's Logon returned.
fn fix_logon(node: &Node, data: &Path, seq: u64) -> (fix::FixClient, fix::Msg) {
    let addr = node.fix.borrow().clone().expect("the leader serves FIX");
    let mut client = fix::FixClient::connect(addr.parse().unwrap(), "TRADER1", "FIX.4.4");
    client.seq = seq;
    let key = read_key(data).unwrap().expect("a venue.key");
    client.logon_with(1, &Credentials::from_key(key).user_secret(1));
    let logon = client.expect("A");
    (client, logon)
}

#[test]
fn a_fix_session_resumes_on_the_new_leader_without_a_reset_and_its_gap_is_resent() {
    use rialto_fix::tags;
    let cluster = NatsCluster::start();
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let (leader, _, standby) = leader_and_standby(&cluster, dir_a.path(), dir_b.path());

    // Three orders on the leader; the client reads all three reports but, as if the last two
    // were lost with the connection, counts only the first as received.
    let (mut client, logon) = fix_logon(&leader, dir_a.path(), 1);
    assert_eq!(logon.req(tags::MSG_SEQ_NUM), "1");
    let mut reports = Vec::new();
    for id in ["F1", "F2", "F3"] {
        client.new_order(id, "1", "0.001", "9.90");
        let report = client.expect("8");
        assert_eq!(report.req(tags::EXEC_TYPE), "0", "{report:?}");
        assert_eq!(report.req(tags::CL_ORD_ID), id);
        reports.push(report);
    }
    let received: u64 = reports[0].req(tags::MSG_SEQ_NUM).parse().unwrap();
    let last_sent: u64 = reports[2].req(tags::MSG_SEQ_NUM).parse().unwrap();
    assert_eq!((received, last_sent), (2, 4));
    let next_out = client.seq;

    drop(leader); // SIGKILL: no Logout, nothing flushed on the way out
    standby
        .leads_within(Duration::from_secs(30))
        .expect("the standby takes over");

    // The same session on the new leader, numbers continued on both sides: no reset.
    let (mut client, logon) = fix_logon(&standby, dir_a.path(), next_out);
    assert_eq!(
        logon.get(tags::RESET_SEQ_NUM_FLAG),
        None,
        "no sequence reset: {logon:?}"
    );
    let logon_seq: u64 = logon.req(tags::MSG_SEQ_NUM).parse().unwrap();
    assert_eq!(
        logon_seq,
        last_sent + 1,
        "the new leader numbers after the old one's last message"
    );
    // The gap the client saw (3 on) is resent: the two reports, as first sent, marked as
    // possible duplicates.
    client.send("2", &[(tags::BEGIN_SEQ_NO, "3"), (tags::END_SEQ_NO, "0")]);
    for original in &reports[1..] {
        let resent = client.expect("8");
        assert_eq!(resent.req(tags::POSS_DUP_FLAG), "Y", "{resent:?}");
        for tag in [
            tags::MSG_SEQ_NUM,
            tags::CL_ORD_ID,
            tags::ORDER_ID,
            tags::EXEC_ID,
        ] {
            assert_eq!(resent.req(tag), original.req(tag), "tag {tag}");
        }
        assert_eq!(
            resent.req(tags::ORIG_SENDING_TIME),
            original.req(tags::SENDING_TIME)
        );
    }
    // The new Logon, a session message, is gap-filled.
    let gap_fill = client.expect("4");
    assert_eq!(gap_fill.req(tags::GAP_FILL_FLAG), "Y", "{gap_fill:?}");
    assert_eq!(gap_fill.req(tags::MSG_SEQ_NUM), logon_seq.to_string());
    assert_eq!(gap_fill.req(tags::NEW_SEQ_NO), (logon_seq + 1).to_string());
    // The session goes on: the new leader knows the old one's ClOrdIDs (a cancel by
    // OrigClOrdID), and numbers its messages after the Logon.
    client.send(
        "F",
        &[
            (tags::ORIG_CL_ORD_ID, "F1"),
            (tags::CL_ORD_ID, "F1-C"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &fix::transact_time()),
        ],
    );
    let cancelled = client.expect("8");
    assert_eq!(cancelled.req(tags::EXEC_TYPE), "4", "{cancelled:?}");
    assert_eq!(
        cancelled.req(tags::ORDER_ID),
        reports[0].req(tags::ORDER_ID)
    );
    assert_eq!(
        cancelled.req(tags::MSG_SEQ_NUM),
        (logon_seq + 1).to_string()
    );
    client.new_order("F4", "1", "0.001", "9.90");
    let placed = client.expect("8");
    assert_eq!(placed.req(tags::EXEC_TYPE), "0", "{placed:?}");
    assert_eq!(placed.req(tags::MSG_SEQ_NUM), (logon_seq + 2).to_string());
    // A ClOrdID the old leader placed is still remembered: a new order reusing it is refused.
    client.new_order("F2", "1", "0.001", "9.90");
    let refused = client.expect("8");
    assert_eq!(refused.req(tags::EXEC_TYPE), "8", "{refused:?}");
}
