//! The FIX gateway's state machine driven without sockets or clocks: bytes, time and room in
//! the inbound ring given by the test.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rialto_core::Command;
use rialto_fix::{MessageWriter, next_frame, tags};

use super::*;

const USER: UserId = 7;
/// 2026-01-01, in ns since the epoch.
const T0: i64 = 1_767_225_600_000_000_000;
const SECOND: i64 = 1_000_000_000;

/// The inbound ring as a test sees it: `capacity` requests until the test takes them.
/// `refuse` makes every offer fail whatever `room` says (another producer filled the ring).
struct Queue {
    requests: VecDeque<Request>,
    capacity: usize,
    refuse: bool,
}

impl RequestSink for Queue {
    fn room(&self) -> usize {
        self.capacity - self.requests.len()
    }

    fn offer(&mut self, request: Request) -> Result<(), Request> {
        if self.refuse || self.requests.len() == self.capacity {
            return Err(request);
        }
        self.requests.push_back(request);
        Ok(())
    }
}

struct Harness {
    agent: FixAgent,
    ring: Queue,
    credentials: Arc<Credentials>,
    now: i64,
    seq: u64,
    _dir: tempfile::TempDir,
}

use super::orders::tests::instruments;

fn config(data_dir: &std::path::Path) -> FixConfig {
    let binding = SessionBinding {
        user: USER,
        cancel_on_disconnect: true,
        number: 0,
    };
    FixConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        comp_id: "RIALTO".into(),
        sessions: HashMap::from([("CLIENT".to_string(), binding)]),
        max_connections: 10,
        max_pending_logons: 10,
        max_pending_logons_per_address: 10,
        logon_timeout: Duration::from_secs(5),
        message_log_max_bytes: 1 << 20,
        message_log_files: 1,
        max_message_bytes: 4096,
        max_clock_skew_ns: 120 * SECOND,
        allow_user_defined_tags: false,
        max_msgs_per_sec: 0,
        burst: 100,
        message_log: false,
        tls: None,
        data_dir: data_dir.to_path_buf(),
        mirror: None,
    }
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("fix")).unwrap();
        let credentials = Arc::new(Credentials::from_key([3; 32]));
        let agent = FixAgent::new(
            config(dir.path()),
            credentials.clone(),
            instruments(),
            T0,
            Instant::now(),
        );
        Harness {
            agent,
            ring: Queue {
                requests: VecDeque::new(),
                capacity: 1024,
                refuse: false,
            },
            credentials,
            now: T0,
            seq: 1,
            _dir: dir,
        }
    }

    /// A message from the client, with the next MsgSeqNum.
    fn message(&mut self, msg_type: &str, fields: &[(u32, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type.as_bytes());
        w.str(tags::SENDER_COMP_ID, b"CLIENT")
            .str(tags::TARGET_COMP_ID, b"RIALTO")
            .uint(tags::MSG_SEQ_NUM, self.seq)
            .timestamp(tags::SENDING_TIME, self.now);
        for (tag, value) in fields {
            w.str(*tag, value.as_bytes());
        }
        w.finish();
        self.seq += 1;
        out
    }

    fn logon_message(&mut self) -> Vec<u8> {
        let password = self.credentials.user_secret(USER);
        let user = USER.to_string();
        let fields = [
            (tags::ENCRYPT_METHOD, "0"),
            (tags::HEART_BT_INT, "30"),
            (tags::USERNAME, user.as_str()),
            (tags::PASSWORD, password.as_str()),
        ];
        self.message("A", &fields)
    }

    fn new_order(&mut self, cl_ord_id: &str) -> Vec<u8> {
        let mut time = Vec::new();
        rialto_fix::time::write_utc_timestamp(&mut time, self.now);
        let time = String::from_utf8(time).unwrap();
        let fields = [
            (tags::CL_ORD_ID, cl_ord_id),
            (tags::HANDL_INST, "1"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, time.as_str()),
            (tags::ORDER_QTY, "0.5"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "100"),
            (tags::TIME_IN_FORCE, "1"),
        ];
        self.message("D", &fields)
    }

    /// Bytes arrive on `id` and the agent handles what it can.
    fn receive(&mut self, id: SessionId, bytes: &[u8]) {
        assert_eq!(self.agent.receive(id, bytes), bytes.len());
        self.agent.handle(id, self.now, &mut self.ring);
    }

    /// Everything the connection may be sent now, as a socket that takes it all would.
    fn sent(&mut self, id: SessionId) -> Vec<String> {
        let mut ids = Vec::new();
        self.agent.flush(self.now, &mut ids);
        let bytes = self.agent.pending_output(id).to_vec();
        self.agent.wrote(id, bytes.len());
        msg_types(&bytes)
    }

    fn logged_on(&mut self, id: SessionId) {
        self.agent.open(id, "10.0.0.1".parse().unwrap(), self.now);
        let logon = self.logon_message();
        self.receive(id, &logon);
        assert_eq!(self.sent(id), ["A"]);
    }

    fn closed(&mut self) -> Vec<SessionId> {
        let mut closed = Vec::new();
        self.agent.take_closed(self.now, &mut closed);
        closed
    }

    /// The order ids of the place commands the ring took, in order (the test takes them).
    fn placed(&mut self) -> Vec<i64> {
        self.ring
            .requests
            .drain(..)
            .map(|r| match (r.op, r.reply) {
                (Op::Command(Command::Place(_)), Reply::Order { order, .. }) => order,
                other => panic!("not a place: {other:?}"),
            })
            .collect()
    }
}

fn msg_types(mut bytes: &[u8]) -> Vec<String> {
    let mut types = Vec::new();
    while let Ok(Some((frame, len))) = next_frame(bytes, usize::MAX) {
        types.push(String::from_utf8(frame.msg_type.to_vec()).unwrap());
        bytes = &bytes[len..];
    }
    assert!(bytes.is_empty(), "a message cut off in the output");
    types
}

#[test]
fn a_logon_split_anywhere_logs_on_once_it_is_whole() {
    let mut logon = Harness::new().logon_message();
    // The same Logon, cut at every byte (a new agent each time: a session logs on once).
    for cut in 1..logon.len() {
        let mut h = Harness::new();
        logon = h.logon_message();
        h.agent.open(1, "10.0.0.1".parse().unwrap(), h.now);
        h.receive(1, &logon[..cut]);
        assert!(h.sent(1).is_empty(), "answered half a Logon cut at {cut}");
        assert!(!h.agent.is_closing(1));
        h.receive(1, &logon[cut..]);
        assert_eq!(h.sent(1), ["A"], "cut at {cut}");
    }
    // And a byte at a time.
    let mut h = Harness::new();
    let logon = h.logon_message();
    h.agent.open(1, "10.0.0.1".parse().unwrap(), h.now);
    for b in &logon {
        h.receive(1, std::slice::from_ref(b));
    }
    assert_eq!(h.sent(1), ["A"]);
}

#[test]
fn a_logon_with_a_wrong_password_closes_without_a_word() {
    let mut h = Harness::new();
    h.agent.open(1, "10.0.0.1".parse().unwrap(), h.now);
    let fields = [
        (tags::ENCRYPT_METHOD, "0"),
        (tags::HEART_BT_INT, "30"),
        (tags::USERNAME, "7"),
        (tags::PASSWORD, "guess"),
    ];
    let logon = h.message("A", &fields);
    h.receive(1, &logon);
    assert!(h.sent(1).is_empty());
    assert_eq!(h.closed(), [1]);
    assert!(!h.agent.owns(1));
}

#[test]
fn a_partial_write_leaves_the_rest_for_the_next_write() {
    let mut h = Harness::new();
    h.agent.open(1, "10.0.0.1".parse().unwrap(), h.now);
    let logon = h.logon_message();
    h.receive(1, &logon);
    let mut ids = Vec::new();
    h.agent.flush(h.now, &mut ids);
    assert_eq!(ids, [1]);
    let whole = h.agent.pending_output(1).to_vec();
    h.agent.wrote(1, 10);
    assert_eq!(h.agent.pending_output(1), &whole[10..]);
    // More output queues behind the unwritten rest.
    let request = h.message("1", &[(tags::TEST_REQ_ID, "probe")]);
    h.receive(1, &request);
    h.agent.flush(h.now, &mut ids);
    let rest = h.agent.pending_output(1).to_vec();
    assert_eq!(&rest[..whole.len() - 10], &whole[10..]);
    assert_eq!(msg_types(&rest[whole.len() - 10..]), ["0"]);
    h.agent.wrote(1, rest.len());
    assert!(h.agent.pending_output(1).is_empty());
    assert!(!h.agent.has_pending_output());
}

#[test]
fn a_slow_reader_past_the_output_bound_is_closed_and_its_output_dropped() {
    let mut h = Harness::new();
    h.agent.max_output_bytes = 1000;
    h.logged_on(1);
    let mut ids = Vec::new();
    let mut requests = 0;
    // TestRequests answered by Heartbeats the client never reads.
    while !h.agent.is_closing(1) {
        let request = h.message("1", &[(tags::TEST_REQ_ID, "probe")]);
        h.receive(1, &request);
        h.agent.flush(h.now, &mut ids);
        for &id in &ids {
            h.agent.wrote(id, 0);
        }
        requests += 1;
        assert!(requests < 100, "never closed");
    }
    assert!(requests > 5, "closed before the bound: {requests}");
    assert!(h.agent.pending_output(1).is_empty());
    assert_eq!(h.closed(), [1]);
}

#[test]
fn a_disconnect_mid_message_drops_the_half_message_and_the_session_logs_on_again() {
    let mut h = Harness::new();
    h.logged_on(1);
    let order = h.new_order("o1");
    h.receive(1, &order[..order.len() / 2]);
    h.agent.peer_closed(1);
    h.agent.handle(1, h.now, &mut h.ring);
    assert_eq!(h.closed(), [1]);
    // Nothing of the half order reached the engine; the close cancels nothing (no order).
    assert!(h.ring.requests.is_empty());
    assert!(h.agent.push_deferred(&mut h.ring) == 0);
    // The session is free for the next connection, and its sequence numbers go on.
    h.agent.open(2, "10.0.0.1".parse().unwrap(), h.now);
    let logon = h.logon_message();
    h.receive(2, &logon);
    // Our Logon, then a ResendRequest for the half order's MsgSeqNum (never received).
    assert_eq!(h.sent(2), ["A", "2"]);
}

/// The orders `bytes` (after a Logon) place through a ring that always has room.
fn unhindered(bytes: &[u8]) -> Vec<i64> {
    let mut h = Harness::new();
    h.logged_on(1);
    h.receive(1, bytes);
    h.placed()
}

#[test]
fn a_full_inbound_ring_pauses_the_connection_and_its_requests_go_in_order() {
    let mut h = Harness::new();
    h.logged_on(1);
    h.ring.capacity = RING_ROOM + 2;
    let mut orders = Vec::new();
    for i in 0..6 {
        orders.extend(h.new_order(&format!("o{i}")));
    }
    h.receive(1, &orders);
    // Taken while the ring had RING_ROOM left; the rest waits in the connection's buffer.
    assert_eq!(h.ring.requests.len(), 3);
    assert!(h.agent.is_paused(1));
    assert!(h.agent.is_waiting());
    let mut placed = h.placed();
    // Room again: the same bytes are handled, no new input needed.
    while h.agent.is_paused(1) {
        h.agent.handle(1, h.now, &mut h.ring);
        placed.extend(h.placed());
    }
    assert_eq!(placed, unhindered(&orders));
}

#[test]
fn requests_refused_by_the_ring_are_held_and_offered_again_in_order_first() {
    let mut h = Harness::new();
    h.logged_on(1);
    h.ring.refuse = true;
    let first = h.new_order("o1");
    h.receive(1, &first);
    assert!(h.agent.has_deferred());
    // While a request is held no later message is handled (it would overtake it).
    let second = h.new_order("o2");
    h.receive(1, &second);
    assert!(h.agent.is_paused(1));
    assert_eq!(h.agent.push_deferred(&mut h.ring), 0);
    h.ring.refuse = false;
    assert_eq!(h.agent.push_deferred(&mut h.ring), 1);
    h.agent.handle(1, h.now, &mut h.ring);
    let placed = h.placed();
    assert_eq!(placed, unhindered(&[first, second].concat()));
}

#[test]
fn heartbeats_test_requests_and_the_silence_limit_follow_the_given_time() {
    let mut h = Harness::new();
    h.logged_on(1);
    let deadline = h
        .agent
        .next_timer_ns()
        .expect("a logged-on session has timers");
    assert_eq!(
        deadline,
        T0 + 30 * SECOND,
        "a heartbeat after HeartBtInt of quiet"
    );
    h.now = deadline - 1;
    h.agent.tick(h.now, &mut h.ring);
    assert!(h.sent(1).is_empty(), "nothing before the deadline");
    // Timers run at most every 50 ms: the next run is then.
    h.now = h.agent.next_timer_ns().unwrap();
    assert_eq!(h.now, deadline - 1 + TIMER_TICK_NS);
    h.agent.tick(h.now, &mut h.ring);
    assert_eq!(h.sent(1), ["0"]);
    // The client stays silent: a TestRequest at HeartBtInt + 20 %, then the connection closes.
    h.now = h.agent.next_timer_ns().unwrap();
    assert_eq!(h.now, T0 + 36 * SECOND, "HeartBtInt + 20 % after the Logon");
    h.agent.tick(h.now, &mut h.ring);
    assert_eq!(h.sent(1), ["1"]);
    let mut types = Vec::new();
    while !h.agent.is_closing(1) {
        h.now = h.agent.next_timer_ns().unwrap();
        assert!(h.now < T0 + 120 * SECOND);
        h.agent.tick(h.now, &mut h.ring);
        types.extend(h.sent(1));
    }
    // Silent for HeartBtInt + 20 % after the TestRequest (our Heartbeats go on meanwhile).
    assert_eq!(h.now, T0 + 72 * SECOND, "{types:?}");
    assert!(types.iter().all(|t| t == "0"), "{types:?}");
    assert_eq!(h.closed(), [1]);
}

#[test]
fn a_connection_that_never_logs_on_closes_at_the_logon_timeout() {
    let mut h = Harness::new();
    h.agent.open(1, "10.0.0.1".parse().unwrap(), h.now);
    let deadline = h.agent.next_timer_ns().unwrap();
    assert_eq!(deadline, T0 + 5 * SECOND + 1);
    h.now = deadline - 1;
    h.agent.tick(h.now, &mut h.ring);
    assert!(!h.agent.is_closing(1));
    h.now = h.agent.next_timer_ns().unwrap();
    h.agent.tick(h.now, &mut h.ring);
    assert!(h.agent.is_closing(1));
    assert_eq!(h.closed(), [1]);
}

#[test]
fn cancel_on_disconnect_cancels_the_open_orders_through_the_ring() {
    let mut h = Harness::new();
    h.logged_on(1);
    let order = h.new_order("o1");
    h.receive(1, &order);
    let placed = h.placed();
    let event = Event::Accepted {
        seq: 1,
        ts_ns: h.now,
        order: placed[0],
        kind: rialto_wire::RequestKind::Place,
    };
    h.agent.on_reply(FIX_SESSION_BASE, &event, h.now);
    assert_eq!(h.sent(1), ["8"]);
    h.agent.peer_closed(1);
    assert_eq!(h.closed(), [1]);
    h.agent.push_deferred(&mut h.ring);
    let cancels: Vec<_> = h.ring.requests.drain(..).map(|r| r.op).collect();
    assert!(
        matches!(&cancels[..], [Op::Command(Command::Cancel { order, .. })] if *order == placed[0]),
        "{cancels:?}"
    );
}

#[test]
fn a_connection_paused_for_the_ring_is_not_timed_out_for_the_silence_the_gateway_causes() {
    let mut h = Harness::new();
    h.logged_on(1);
    // The symbol list query of the first tick, out of the way.
    h.agent.tick(h.now, &mut h.ring);
    h.ring.requests.clear();
    h.ring.capacity = RING_ROOM - 1;
    let order = h.new_order("o1");
    h.receive(1, &order);
    assert!(h.agent.is_paused(1));
    // Far past HeartBtInt + 20 % twice: the client's messages wait unread in our buffer.
    for _ in 0..100 {
        h.now += SECOND;
        h.agent.tick(h.now, &mut h.ring);
    }
    assert!(!h.agent.is_closing(1));
    assert!(h.sent(1).is_empty(), "no TestRequest for our own silence");
    // Room again: the order goes, and the timers resume from the client's message.
    h.ring.capacity = 1024;
    h.agent.handle(1, h.now, &mut h.ring);
    assert_eq!(h.placed().len(), 1);
    assert!(!h.agent.is_paused(1));
    assert!(h.agent.next_timer_ns().unwrap() > h.now);
}
