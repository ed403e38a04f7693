//! The command log on NATS JetStream (docs/replication.md), against a real three-node
//! cluster on loopback: what a leader acknowledges is in the stream, a fresh node rebuilds
//! the same state from it, a standby takes over from a leader that stops, and the
//! expected-sequence fence refuses a writer that is behind.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use common::nats::NatsCluster;
use common::{start, state_hash, trader};
use rialto_core::{Command, EngineConfig, Side, SymbolId};
use rialto_server::RunningServer;
use rialto_server::config::{LogSettings, ServerConfig};
use rialto_server::replication::{self, Connection, JetStreamLog};
use rialto_server::snapstore::SnapshotStore;
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};

fn on_jetstream(settings: &LogSettings) -> impl FnOnce(&mut ServerConfig) + Send + 'static {
    let settings = settings.clone();
    move |config| config.log = settings
}

/// Places resting buy orders `ids` for user 1; returns the seq of each acknowledgement.
fn place_resting(server: &RunningServer, ids: std::ops::RangeInclusive<i64>) -> Vec<u64> {
    let mut t = trader(server, 1);
    ids.map(|id| {
        t.place(NewOrder::limit(id, SymbolId(0), Side::Buy, 990, 1))
            .unwrap();
        match t.recv().unwrap() {
            ServerMsg::Accepted { seq, order, .. } if order == id => seq,
            other => panic!("order {id}: {other}"),
        }
    })
    .collect()
}

fn report(server: &RunningServer, user: i64) -> rialto_core::UserReport {
    match trader(server, user)
        .request(&ClientMsg::MyReport { request: 1 })
        .unwrap()
    {
        ServerMsg::Report { report, .. } => report,
        other => panic!("report: {other}"),
    }
}

fn open_order_ids(server: &RunningServer, user: i64) -> Vec<i64> {
    match trader(server, user)
        .request(&ClientMsg::MyReport { request: 1 })
        .unwrap()
    {
        ServerMsg::Report { report, .. } => report.orders.iter().map(|o| o.order).collect(),
        other => panic!("report: {other}"),
    }
}

/// Starts a node on `dir` beside `leader`, checks that it does not lead while the leader holds
/// the lease, stops the leader cleanly and returns the node once it leads.
fn hand_over(leader: RunningServer, dir: &Path, settings: &LogSettings) -> RunningServer {
    let (path, settings) = (dir.to_path_buf(), settings.clone());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(start(&path, on_jetstream(&settings)));
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(1_500)).is_err(),
        "the second node must not lead while the leader holds the lease"
    );
    within(Duration::from_secs(20), move || leader.shutdown().unwrap());
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the second node leads once the leader gave up the lease")
}

/// Runs `f` on a thread and waits at most `limit` for its result.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("not done within {limit:?}"))
}

#[test]
fn acknowledged_orders_are_in_the_stream_and_a_standby_and_a_fresh_node_rebuild_the_same_state() {
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("rebuild");
    let dir_a = tempfile::tempdir().unwrap();
    let leader = start(dir_a.path(), on_jetstream(&settings));
    let seqs = place_resting(&leader, 1..=8);
    let hash = state_hash(&leader);

    // A fresh node reads the whole stream: the same commands, the same state, and every
    // checkpoint the leader wrote agrees with it.
    let engine_config = ServerConfig::default().engine_config();
    let rebuilt = replication::rebuild(&settings, engine_config).unwrap();
    assert_eq!(rebuilt.engine.last_seq(), *seqs.last().unwrap());
    assert_eq!(rebuilt.engine.state_hash(), hash);
    assert!(
        rebuilt.checkpoints_matched > 0,
        "the leader wrote checkpoints"
    );

    // A standby follows while the leader leads, and takes over when it stops.
    let dir_b = tempfile::tempdir().unwrap();
    let new_leader = hand_over(leader, dir_b.path(), &settings);
    assert_eq!(state_hash(&new_leader), hash);
    assert_eq!(open_order_ids(&new_leader, 1), (1..=8).collect::<Vec<_>>());
    // It appends after the old leader's commands.
    let next = place_resting(&new_leader, 9..=9);
    assert_eq!(next, [seqs.last().unwrap() + 1]);
    new_leader.shutdown().unwrap();
}

#[test]
fn the_expected_sequence_fence_refuses_a_second_writer() {
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("fence");
    let dir = tempfile::tempdir().unwrap();
    let leader = start(dir.path(), on_jetstream(&settings));
    let seqs = place_resting(&leader, 1..=1);

    // A second writer that knows the stream's end appends: it wins.
    let connection = Arc::new(Connection::open(&settings, Duration::from_secs(10)).unwrap());
    let end = connection.last_stream_seq().unwrap();
    let mut second = JetStreamLog::new(connection.clone(), end);
    second.append(seqs[0] + 1, 0, &Command::AddUser { user: 77 });
    second.commit().unwrap();
    // A writer that is one message behind is refused.
    let mut behind = JetStreamLog::new(connection, end);
    behind.append(seqs[0] + 1, 0, &Command::AddUser { user: 78 });
    let refused = behind.commit().unwrap_err().to_string();
    assert!(refused.contains("DEPOSED"), "{refused}");

    // The leader's next append fails the same way: its trader is never acknowledged, and the
    // leader stops, saying why.
    let mut t = trader(&leader, 1);
    t.place(NewOrder::limit(2, SymbolId(0), Side::Buy, 990, 1))
        .unwrap();
    loop {
        match t.recv() {
            Ok(ServerMsg::Accepted { order: 2, .. }) => panic!("a deposed leader acknowledged"),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let stopped = within(Duration::from_secs(20), move || leader.wait());
    let why = format!("{:#}", stopped.unwrap_err());
    assert!(why.contains("DEPOSED"), "{why}");
}

#[test]
fn an_append_refused_in_the_middle_of_a_pipeline_commits_nothing_at_or_after_it() {
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("pipeline");
    let connection = Arc::new(Connection::open(&settings, Duration::from_secs(10)).unwrap());
    let end = connection.last_stream_seq().unwrap();
    let mut log = JetStreamLog::new(connection.clone(), end);
    log.set_max_in_flight(8);
    let add_user = |user: u64| Command::AddUser { user: user as i64 };
    // Two batches sent before either is answered, both committed in order.
    for seq in 1..=2 {
        log.append(seq, 0, &add_user(seq));
        log.submit().unwrap();
    }
    assert_eq!(log.batches_in_flight(), 2);
    log.drain().unwrap();
    assert_eq!(
        (log.batches_in_flight(), log.last_stream_seq()),
        (0, end + 2)
    );

    // Another writer extends the log; this one, not knowing, sends three batches at once.
    let mut other = JetStreamLog::new(connection.clone(), end + 2);
    other.append(3, 0, &add_user(99));
    other.commit().unwrap();
    for seq in 3..=5 {
        log.append(seq, 0, &add_user(seq));
        log.submit().unwrap();
    }
    // The first is refused by the fence, and nothing at or after it counts as committed,
    // then or later.
    let refused = log.poll(true).unwrap_err().to_string();
    assert!(refused.contains("DEPOSED"), "{refused}");
    assert_eq!(log.batches_in_flight(), 3);
    assert!(log.drain().unwrap_err().to_string().contains("DEPOSED"));
    // The second expected the stream's end to be where the other writer's message now is:
    // it is refused all the same (it names the message it follows), as is the third; the
    // log ends with the other writer's message.
    let rebuilt = replication::rebuild(&settings, EngineConfig::default()).unwrap();
    assert_eq!(
        (rebuilt.stream_seq, rebuilt.engine.last_seq()),
        (end + 3, 3),
        "the log holds batches 1 and 2 and the other writer's, nothing after"
    );
    assert_eq!(rebuilt.engine.users(), [1, 2, 99]);
}

#[test]
fn a_new_leader_claims_the_log_end_so_an_old_leaders_late_append_is_refused() {
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("claim");
    let connection = Arc::new(Connection::open(&settings, Duration::from_secs(10)).unwrap());
    // An old leader that passed its lease check and was paused before its append reached the
    // stream: a writer at the stream's end (jepsen.rs found one, seed 1).
    let mut old = JetStreamLog::new(connection.clone(), connection.last_stream_seq().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let mut leading = replication::start_node(
        connection.clone(),
        &settings,
        dir.path(),
        EngineConfig::default(),
        &stop,
    )
    .unwrap();

    // The old leader's append arrives after the new leader took over: refused.
    old.append(1, 0, &Command::AddUser { user: 77 });
    let refused = old.commit().unwrap_err().to_string();
    assert!(refused.contains("DEPOSED"), "{refused}");
    assert_eq!(leading.log.last_stream_seq(), 1, "the new leader's claim");
    // The new leader appends after its claim, and readers pass the claim over.
    leading.log.append(1, 0, &Command::AddUser { user: 5 });
    leading.log.commit().unwrap();
    let rebuilt = replication::rebuild(&settings, EngineConfig::default()).unwrap();
    assert_eq!((rebuilt.stream_seq, rebuilt.applied), (2, 1));
    drop(leading);
}

#[test]
fn a_standby_whose_state_differs_at_a_checkpoint_stops_loudly() {
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("diverge");
    let dir_a = tempfile::tempdir().unwrap();
    let leader = start(dir_a.path(), on_jetstream(&settings));
    let dir_b = tempfile::tempdir().unwrap();
    let path_b = dir_b.path().to_path_buf();
    let standby_settings = settings.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut config = ServerConfig {
            data_dir: path_b,
            ..ServerConfig::default()
        };
        on_jetstream(&standby_settings)(&mut config);
        let _ = tx.send(rialto_server::start(config).map(|_| ()));
    });
    // The standby follows (the demo set-up's seqs, hashed at every 5th) and does not lead.
    assert!(rx.recv_timeout(Duration::from_millis(1_500)).is_err());

    // A checkpoint that is not the venue's state: the standby must not go on from it.
    let connection = Arc::new(Connection::open(&settings, Duration::from_secs(10)).unwrap());
    let end = connection.last_stream_seq().unwrap();
    let mut writer = JetStreamLog::new(connection, end);
    writer.publish_checkpoint(5, &[0xee; 32]).unwrap();
    let stopped = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the standby stops");
    let why = format!("{:#}", stopped.unwrap_err());
    assert!(why.contains("DIVERGED at seq 5"), "{why}");
    let _ = leader.shutdown();
}

#[test]
fn a_node_with_an_empty_data_dir_starts_from_the_snapshot_bucket_once_the_stream_is_trimmed() {
    let cluster = NatsCluster::start();
    let settings = LogSettings {
        snapshots_kept: 2,
        ..cluster.log_settings("trim")
    };
    let dir_a = tempfile::tempdir().unwrap();
    let leader_settings = settings.clone();
    let leader = start(dir_a.path(), move |config| {
        on_jetstream(&leader_settings)(config);
        config.journal.snapshot_every = 4;
    });
    let seqs = place_resting(&leader, 1..=24);
    let balances = report(&leader, 1);

    // Several snapshots later: the bucket keeps the newest two, and the stream begins at the
    // message holding the oldest kept snapshot's last command (trimmed below it, never above).
    let connection = Arc::new(Connection::open(&settings, Duration::from_secs(10)).unwrap());
    let store = SnapshotStore::open(connection.clone()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (stored, first) = loop {
        let stored = store.list().unwrap();
        let (first, _) = connection.stream_seqs().unwrap();
        let taken_during_the_orders = stored.first().is_some_and(|s| s.seq >= seqs[0]);
        if stored.len() == 2 && taken_during_the_orders && first == stored[0].stream_seq {
            break (stored, first);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stream was not trimmed below the oldest kept snapshot: {stored:?}, first \
             stream seq {first}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(first > 1, "the stream's first message moved up");
    assert!(stored[0].seq < stored[1].seq);

    // `journal verify` reads a trimmed stream from the oldest kept snapshot; `journal dump`,
    // which starts at seq 1, refuses it.
    let engine_config = ServerConfig::default().engine_config();
    let verified = replication::rebuild(&settings, engine_config).unwrap();
    assert_eq!(verified.engine.last_seq(), seqs[23]);
    let hash = verified.engine.state_hash();
    let dump = replication::rebuild_each(&settings, engine_config, &mut |_, _, _, _| {});
    let refused = format!("{:#}", dump.err().expect("dump refuses a trimmed stream"));
    assert!(refused.contains("trimmed"), "{refused}");

    // A damaged snapshot, newest in the bucket, is refused; the node takes the next older one.
    let mut damaged = std::fs::read(
        rialto_journal::list_snapshots(dir_a.path())
            .unwrap()
            .last()
            .unwrap()
            .1
            .clone(),
    )
    .unwrap();
    let at = damaged.len() - 1;
    damaged[at] ^= 0xff;
    store.put(seqs[23] + 1_000, 1, &[0; 32], &damaged).unwrap();

    // A node with an empty data directory follows as a standby; the whole stream is no longer
    // there, so it can only have started from a snapshot of the bucket.
    let dir_b = tempfile::tempdir().unwrap();
    let new_leader = hand_over(leader, dir_b.path(), &settings);
    assert_eq!(state_hash(&new_leader), hash);
    assert_eq!(report(&new_leader, 1), balances);
    assert_eq!(open_order_ids(&new_leader, 1), (1..=24).collect::<Vec<_>>());
    let next = place_resting(&new_leader, 25..=25);
    assert_eq!(next, [seqs[23] + 1]);
    new_leader.shutdown().unwrap();
}

#[test]
fn a_leader_and_a_standby_ride_out_the_restart_of_each_nats_server_in_turn() {
    let mut cluster = NatsCluster::start();
    // A lease long enough to outlast the cluster's elections after a kill: this test is about
    // the nodes trying again, not about the lease lapsing.
    let settings = LogSettings {
        lease_ms: 30_000,
        ack_timeout_ms: 2_000,
        ..cluster.log_settings("transient")
    };
    let dir_a = tempfile::tempdir().unwrap();
    let leader = start(dir_a.path(), on_jetstream(&settings));
    let dir_b = tempfile::tempdir().unwrap();
    let (path_b, standby_settings) = (dir_b.path().to_path_buf(), settings.clone());
    let (tx, standby) = mpsc::channel();
    std::thread::spawn(move || {
        let mut config = ServerConfig {
            data_dir: path_b,
            ..ServerConfig::default()
        };
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.admin_listen = "127.0.0.1:0".parse().unwrap();
        config.fix.listen = "127.0.0.1:0".parse().unwrap();
        config.web.listen = "127.0.0.1:0".parse().unwrap();
        on_jetstream(&standby_settings)(&mut config);
        let _ = tx.send(rialto_server::start(config));
    });
    // The standby has joined the venue (it took the venue key) before the first kill.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !dir_b.path().join("venue.key").exists() {
        assert!(std::time::Instant::now() < deadline, "the standby joins");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut t = trader(&leader, 1);
    // Elections after a kill take seconds: the order is answered once the cluster is back.
    t.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut placed = Vec::new();
    let mut place = |t: &mut rialto_client::Client, id: i64, cluster: &NatsCluster| {
        t.place(NewOrder::limit(id, SymbolId(0), Side::Buy, 990, 1))
            .unwrap();
        match t.recv() {
            Ok(ServerMsg::Accepted { order, .. }) if order == id => placed.push(id),
            other => panic!("order {id}: {other:?}; the NATS logs: {}", cluster.logs()),
        }
    };
    place(&mut t, 1, &cluster);
    for i in 0..3 {
        let id = 10 * (i as i64 + 1);
        cluster.kill(i);
        // Orders go on while one of three is down (a majority holds the stream)...
        place(&mut t, id, &cluster);
        cluster.restart(i);
        // ... and after it is back.
        place(&mut t, id + 1, &cluster);
        match standby.try_recv() {
            Err(mpsc::TryRecvError::Empty) => {}
            Ok(Ok(_)) => panic!("the standby leads while the leader holds the lease"),
            Ok(Err(e)) => panic!(
                "the standby stopped on n{i}'s restart: {e:#}; the logs: {}",
                cluster.logs()
            ),
            Err(e) => panic!("{e}"),
        }
    }
    let hash = state_hash(&leader);
    within(Duration::from_secs(20), move || leader.shutdown().unwrap());
    let new_leader = standby
        .recv_timeout(Duration::from_secs(60))
        .expect("the standby leads once the leader gave up the lease")
        .expect("the standby starts to lead");
    assert_eq!(state_hash(&new_leader), hash);
    assert_eq!(open_order_ids(&new_leader, 1), placed);
    new_leader.shutdown().unwrap();
}

#[test]
fn a_fix_session_whose_store_write_is_stalled_holds_only_its_own_output() {
    use common::fix::FixClient;
    use rialto_fix::tags;
    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("fixstall");
    let dir = tempfile::tempdir().unwrap();
    let leader = start(dir.path(), on_jetstream(&settings));
    let fix_addr = leader.fix_addr.expect("FIX is on");
    let mut slow = FixClient::connect(fix_addr, "TRADER1", "FIX.4.4");
    slow.logon(&leader, 1);
    let mut other = FixClient::connect(fix_addr, "TRADER2", "FIXT.1.1");
    other.logon(&leader, 2);

    // TRADER1's next store write waits for the cluster (as a slow or stalled bucket would).
    leader.stall_fix_store("FIX.4.4-RIALTO-TRADER1");
    slow.new_order("S1", "1", "0.010", "100.00");
    // TRADER2's order, after TRADER1's in the engine, is answered meanwhile...
    other.new_order("O1", "1", "0.010", "101.00");
    let answer = other.expect("8");
    assert_eq!(answer.req(tags::CL_ORD_ID), "O1");
    // ... while TRADER1's report (built in the same turn or before) is held: it is not in
    // the cluster yet, so it must not be on the wire.
    let held = slow.recv_within(Duration::from_millis(1));
    assert!(
        held.is_none(),
        "sent before its store was acknowledged: {held:?}"
    );
    // Once the cluster takes the write, the report goes out.
    leader.release_fix_store();
    let report = slow.expect("8");
    assert_eq!(report.req(tags::CL_ORD_ID), "S1");
    assert_eq!(report.req(tags::EXEC_TYPE), "0", "{report:?}");
    within(Duration::from_secs(20), move || leader.shutdown().unwrap());
}

#[test]
fn a_fix_logon_waits_for_its_stores_read_from_the_cluster_without_holding_up_other_sessions() {
    use common::fix::FixClient;
    use rialto_fix::tags;
    let cluster = NatsCluster::start();
    let mut settings = cluster.log_settings("fixread");
    // A read of a session's store gives up after four times this: 2 s.
    settings.ack_timeout_ms = 500;
    let dir = tempfile::tempdir().unwrap();
    let leader = start(dir.path(), on_jetstream(&settings));
    let fix_addr = leader.fix_addr.expect("FIX is on");

    // TRADER1's store is read from the cluster at its first Logon; the cluster is slow for it.
    leader.stall_fix_store("FIX.4.4-RIALTO-TRADER1");
    let mut slow = FixClient::connect(fix_addr, "TRADER1", "FIX.4.4");
    slow.logon_with(1, &leader.credentials.user_secret(1));
    // TRADER2 logs on (its own read) and trades meanwhile...
    let mut other = FixClient::connect(fix_addr, "TRADER2", "FIXT.1.1");
    other.logon(&leader, 2);
    other.new_order("O1", "1", "0.010", "101.00");
    assert_eq!(other.expect("8").req(tags::CL_ORD_ID), "O1");
    // ... while TRADER1's Logon waits for its store.
    let early = slow.recv_within(Duration::from_millis(1));
    assert!(
        early.is_none(),
        "answered before its store was read: {early:?}"
    );
    leader.release_fix_store();
    let logon = slow.expect("A");
    assert_eq!(logon.req(tags::MSG_SEQ_NUM), "1");
    slow.new_order("S1", "1", "0.010", "100.00");
    assert_eq!(slow.expect("8").req(tags::CL_ORD_ID), "S1");

    // A read that does not end in time refuses the Logon, saying why, and only that one.
    leader.stall_fix_store("FIX.4.2-RIALTO-TRADER1");
    let mut refused = FixClient::connect(fix_addr, "TRADER1", "FIX.4.2");
    refused.logon_with(1, &leader.credentials.user_secret(1));
    other.new_order("O2", "1", "0.010", "101.00");
    assert_eq!(other.expect("8").req(tags::CL_ORD_ID), "O2");
    let logout = refused.expect("5");
    assert!(
        logout
            .req(tags::TEXT)
            .contains("could not be read from the cluster"),
        "{logout:?}"
    );
    assert!(
        refused.recv_within(Duration::from_secs(5)).is_none(),
        "closed"
    );
    // Once the cluster answers, the session logs on.
    leader.release_fix_store();
    let mut again = FixClient::connect(fix_addr, "TRADER1", "FIX.4.2");
    again.logon(&leader, 1);
    within(Duration::from_secs(20), move || leader.shutdown().unwrap());
}

/// Waits on the test thread for `done`, woken by the mirrors' bell (each write and read of a
/// FIX store rings it when it ends).
fn wait_for(bell: &rialto_server::idle::Bell, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        bell.set_sleeping(true);
        if !done() {
            std::thread::park_timeout(Duration::from_millis(100));
        }
        bell.set_sleeping(false);
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 30 s"
        );
    }
}

#[test]
fn a_deposed_leaders_late_fix_messages_never_replace_what_the_new_leader_stored() {
    use rialto_fix::session::MessageStore;
    use rialto_server::fixstore::{FixMirror, SessionStore};
    use std::task::Poll;

    let cluster = NatsCluster::start();
    let settings = cluster.log_settings("fixterm");
    let connection = Connection::open(&settings, Duration::from_secs(30)).unwrap();
    let bell = rialto_server::idle::Bell::for_thread(std::thread::current());
    let session = "FIX.4.4-RIALTO-TRADER1";
    // Three leaders in turn; `old` is deposed while it still holds the session open.
    let mirror = |term| {
        let mirror = FixMirror::open_as_term(&connection, term).unwrap();
        mirror.set_bell(bell.clone());
        mirror
    };
    let (old, new, third) = (mirror(5), mirror(9), mirror(12));
    let open = |mirror: &FixMirror, dir: &Path| {
        let mut read = Poll::Pending;
        wait_for(&bell, "reading the store", || {
            read = mirror.poll_read(session);
            read.is_ready()
        });
        let Poll::Ready(read) = read else {
            unreachable!()
        };
        read.unwrap();
        SessionStore::open(dir, session, Some(mirror)).unwrap()
    };
    // Stores messages `seqs` (their text `{label}-{seq}`), then writes them to the cluster.
    let send = |store: &mut SessionStore, label: &str, seqs: std::ops::RangeInclusive<u64>| {
        for seq in seqs.clone() {
            let text = format!("{label}-{seq}");
            store.store(seq, 0, text.as_bytes()).unwrap();
        }
        store.set_next_sender_seq(seqs.end() + 1).unwrap();
        let mut outcome = Ok(());
        wait_for(&bell, "writing the store", || {
            outcome = store.flush();
            let (holds_all, acknowledged) = store.tickets();
            outcome.is_err() || acknowledged >= holds_all
        });
        outcome
    };
    let messages = |store: &mut SessionStore| {
        let (mut found, mut from, mut buf) = (Vec::new(), 1, Vec::new());
        while let Some((seq, _)) = store.read_next(from, u64::MAX, &mut buf).unwrap() {
            found.push(format!("{seq}:{}", String::from_utf8_lossy(&buf)));
            from = seq + 1;
        }
        found
    };

    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut on_old = open(&old, dirs[0].path());
    send(&mut on_old, "old", 1..=3).unwrap();
    // The new leader takes the session over and sends 4 and 5.
    let mut on_new = open(&new, dirs[1].path());
    assert_eq!(on_new.next_sender_seq(), 4);
    send(&mut on_new, "new", 4..=5).unwrap();
    // The deposed leader's write of 4 to 6, in flight when it lost the lease, lands now: its
    // messages reach the bucket and its numbers are refused.
    let late = send(&mut on_old, "zombie", 4..=6);
    assert!(late.is_err(), "the deposed leader's numbers were accepted");
    // The next leader resends what the new leader sent, and numbers its next message 6.
    let mut on_third = open(&third, dirs[2].path());
    assert_eq!(on_third.next_sender_seq(), 6);
    assert_eq!(
        messages(&mut on_third),
        ["1:old-1", "2:old-2", "3:old-3", "4:new-4", "5:new-5"]
    );
}
