//! The FIX session test acceptor over real sockets, as the QuickFIX acceptance scripts use it:
//! logon, the echo application, PossResend duplicates, rejects, sequence numbers that restart
//! with each connection, one connection per session, hostile input, and the command itself.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rialto_fix::{MessageWriter, next_frame, tags};
use rialto_server::fix::test_acceptor::TestAcceptor;

/// A test acceptor on a free port, stopped (and joined) when dropped.
struct Acceptor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Acceptor {
    fn start() -> Acceptor {
        let acceptor = TestAcceptor::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = acceptor.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || acceptor.run(flag).unwrap());
        Acceptor {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A received message: its type and fields in order (header included, 8 9 35 10 left out).
#[derive(Debug, Clone)]
struct Msg {
    msg_type: String,
    fields: Vec<(u32, String)>,
}

impl Msg {
    fn get(&self, tag: u32) -> Option<&str> {
        self.fields
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, v)| v.as_str())
    }

    fn req(&self, tag: u32) -> &str {
        self.get(tag)
            .unwrap_or_else(|| panic!("tag {tag} missing in {self:?}"))
    }

    /// The fields after our standard header (49 56 34 52).
    fn body(&self) -> Vec<(u32, String)> {
        self.fields
            .iter()
            .filter(|(t, _)| ![49, 56, 34, 52].contains(t))
            .cloned()
            .collect()
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// A minimal initiator (TW talking to ISLD): builds messages field by field, reads whole ones.
struct FixClient {
    stream: TcpStream,
    buf: Vec<u8>,
    seq: u64,
    begin: &'static str,
    sender: &'static str,
    target: &'static str,
}

impl FixClient {
    fn connect(addr: SocketAddr, begin: &'static str) -> FixClient {
        FixClient::connect_as(addr, begin, "TW", "ISLD")
    }

    fn connect_as(
        addr: SocketAddr,
        begin: &'static str,
        sender: &'static str,
        target: &'static str,
    ) -> FixClient {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        FixClient {
            stream,
            buf: Vec::new(),
            seq: 1,
            begin,
            sender,
            target,
        }
    }

    /// A message with our header (49 56 34 52), then `fields` in order.
    fn send(&mut self, msg_type: &str, fields: &[(u32, &str)]) -> u64 {
        let mut out = Vec::new();
        let mut w = MessageWriter::begin(&mut out, self.begin.as_bytes(), msg_type.as_bytes());
        w.str(tags::SENDER_COMP_ID, self.sender.as_bytes())
            .str(tags::TARGET_COMP_ID, self.target.as_bytes())
            .uint(tags::MSG_SEQ_NUM, self.seq)
            .timestamp(tags::SENDING_TIME, now_ns());
        for (tag, value) in fields {
            w.str(*tag, value.as_bytes());
        }
        w.finish();
        self.stream.write_all(&out).unwrap();
        self.seq += 1;
        self.seq - 1
    }

    fn logon(&mut self) -> Msg {
        let mut fields = vec![(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")];
        if self.begin == "FIXT.1.1" {
            fields.push((tags::DEFAULT_APPL_VER_ID, "9"));
        }
        self.send("A", &fields);
        let reply = self.recv();
        assert_eq!(reply.msg_type, "A", "{reply:?}");
        reply
    }

    /// The next message, or None at EOF or after `timeout`.
    fn recv_within(&mut self, timeout: Duration) -> Option<Msg> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some((frame, len))) = next_frame(&self.buf, 1 << 20) {
                let msg = Msg {
                    msg_type: String::from_utf8_lossy(frame.msg_type).into_owned(),
                    fields: frame
                        .fields()
                        .map(|f| {
                            let f = f.unwrap();
                            (f.tag, String::from_utf8_lossy(f.value).into_owned())
                        })
                        .collect(),
                };
                self.buf.drain(..len);
                return Some(msg);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => return None,
            }
        }
    }

    /// The next message that is not a Heartbeat.
    fn recv(&mut self) -> Msg {
        loop {
            let msg = self
                .recv_within(Duration::from_secs(10))
                .expect("a message within 10 s");
            if msg.msg_type != "0" {
                return msg;
            }
        }
    }

    /// Whether the acceptor closes the connection within `timeout` (messages before the close
    /// are skipped).
    fn closed_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    /// A TestRequest and its Heartbeat: proves nothing else was sent before it.
    fn expect_nothing_pending(&mut self, id: &str) {
        self.send("1", &[(tags::TEST_REQ_ID, id)]);
        let hb = self
            .recv_within(Duration::from_secs(10))
            .expect("a Heartbeat");
        assert_eq!(hb.msg_type, "0", "expected only the Heartbeat, got {hb:?}");
        assert_eq!(hb.get(tags::TEST_REQ_ID), Some(id));
    }

    /// Logs out and closes, as the initiator of case 13b does once the Logout is answered; the
    /// acceptor then closes its side.
    fn logout(&mut self) {
        self.send("5", &[]);
        assert_eq!(self.recv().msg_type, "5");
        self.stream.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(self.closed_within(Duration::from_secs(5)));
    }
}

const VERSIONS: [&str; 3] = ["FIX.4.2", "FIX.4.4", "FIXT.1.1"];

fn order(cl_ord_id: &str) -> Vec<(u32, &str)> {
    vec![
        (tags::CL_ORD_ID, cl_ord_id),
        (tags::HANDL_INST, "1"),
        (tags::SYMBOL, "MSFT"),
        (tags::SIDE, "1"),
        (tags::TRANSACT_TIME, "20261122-10:00:00.000"),
        (tags::ORDER_QTY, "100"),
        (tags::ORD_TYPE, "2"),
        (tags::PRICE, "10.5"),
    ]
}

fn owned(fields: &[(u32, &str)]) -> Vec<(u32, String)> {
    fields.iter().map(|(t, v)| (*t, v.to_string())).collect()
}

#[test]
fn the_test_application_answers_as_the_scripts_expect_in_every_version() {
    let acceptor = Acceptor::start();
    for begin in VERSIONS {
        let mut c = FixClient::connect(acceptor.addr, begin);
        let logon = c.logon();
        assert_eq!(logon.req(tags::SENDER_COMP_ID), "ISLD");
        assert_eq!(logon.req(tags::TARGET_COMP_ID), "TW");
        assert_eq!(logon.req(tags::MSG_SEQ_NUM), "1");
        assert_eq!(logon.req(tags::HEART_BT_INT), "30");
        if begin == "FIXT.1.1" {
            assert_eq!(logon.req(tags::DEFAULT_APPL_VER_ID), "9");
        }

        // A NewOrderSingle comes back with the same fields in the same order.
        let sent = order("A1");
        c.send("D", &sent);
        let echo = c.recv();
        assert_eq!(echo.msg_type, "D", "{begin}: {echo:?}");
        assert_eq!(echo.req(tags::MSG_SEQ_NUM), "2");
        assert_eq!(echo.req(tags::SENDER_COMP_ID), "ISLD");
        assert_eq!(echo.body(), owned(&sent), "{begin}");

        // PossResend=Y with a ClOrdID seen already: ignored.
        let mut resent = vec![(tags::POSS_RESEND, "Y")];
        resent.extend(order("A1"));
        c.send("D", &resent);
        c.expect_nothing_pending("after-duplicate");

        // PossResend=Y with a new ClOrdID: echoed, PossResend included (case 19b).
        let mut resent = vec![(tags::POSS_RESEND, "Y")];
        resent.extend(order("A2"));
        c.send("D", &resent);
        let echo = c.recv();
        assert_eq!(echo.msg_type, "D", "{begin}: {echo:?}");
        assert_eq!(echo.body(), owned(&resent), "{begin}");

        // A ClOrdID seen before, without PossResend: echoed like any order.
        c.send("D", &order("A1"));
        assert_eq!(c.recv().req(tags::CL_ORD_ID), "A1");

        // SecurityDefinition: echoed (with the fields each version requires; FIX 4.2 also
        // wants TotalNumSecurities).
        let mut definition = vec![
            (tags::SECURITY_REQ_ID, "R1"),
            (322, "D1"),
            (tags::SECURITY_RESPONSE_TYPE, "1"),
        ];
        if begin == "FIX.4.2" {
            definition.push((tags::TOT_NO_RELATED_SYM, "1"));
        }
        definition.push((tags::SYMBOL, "MSFT"));
        c.send("d", &definition);
        let echo = c.recv();
        assert_eq!(echo.msg_type, "d", "{begin}: {echo:?}");
        assert_eq!(echo.body(), owned(&definition), "{begin}");

        // Anything else: BusinessMessageReject, unsupported message type.
        let seq = c.send("E", &[(66, "L1"), (394, "1"), (73, "0")]);
        let reject = c.recv();
        assert_eq!(reject.msg_type, "j", "{begin}: {reject:?}");
        assert_eq!(reject.req(tags::REF_SEQ_NUM), seq.to_string());
        assert_eq!(reject.req(tags::REF_MSG_TYPE), "E");
        assert_eq!(reject.req(tags::BUSINESS_REJECT_REASON), "3");

        // A value outside its enumeration (Side 0): session Reject, reason 5, by the dictionary.
        let mut bad_side = order("B1");
        for field in bad_side.iter_mut() {
            if field.0 == tags::SIDE {
                field.1 = "0";
            }
        }
        let seq = c.send("D", &bad_side);
        let reject = c.recv();
        assert_eq!(reject.msg_type, "3", "{begin}: {reject:?}");
        assert_eq!(reject.req(tags::REF_SEQ_NUM), seq.to_string());
        assert_eq!(reject.req(tags::SESSION_REJECT_REASON), "5");

        // A NewOrderSingle without ClOrdID: session Reject, required tag missing.
        let seq = c.send("D", &order("X")[1..]);
        let reject = c.recv();
        assert_eq!(reject.msg_type, "3", "{begin}: {reject:?}");
        assert_eq!(reject.req(tags::REF_SEQ_NUM), seq.to_string());
        assert_eq!(reject.req(tags::REF_TAG_ID), "11");
        assert_eq!(reject.req(373), "1");

        c.expect_nothing_pending("end");
        c.logout();
    }
}

/// The cases of issue 29 over the wire, in every version: an empty group is not echoed
/// (case 21 of QuickFIX's scripts), messages above a gap are processed once it is filled (2b),
/// a Reset below the expected number is rejected and the session goes on (11c), and session
/// messages are checked against the dictionary (14a, 14c).
#[test]
fn gaps_resets_empty_groups_and_admin_validation_in_every_version() {
    let acceptor = Acceptor::start();
    for begin in VERSIONS {
        let mut c = FixClient::connect(acceptor.addr, begin);
        c.logon();

        // NoTradingSessions=0: echoed without the empty group.
        let mut sent = order("Z1");
        sent.push((386, "0"));
        c.send("D", &sent);
        let echo = c.recv();
        assert_eq!(echo.msg_type, "D", "{begin}: {echo:?}");
        assert_eq!(echo.body(), owned(&order("Z1")), "{begin}");

        // 3 and 4 arrive above a gap at 2: a ResendRequest for it, then, once 2 is
        // gap-filled, both echoes in order.
        let gap_at = c.seq;
        c.seq += 1;
        c.send("D", &order("Q1"));
        let request = c.recv();
        assert_eq!(request.msg_type, "2", "{begin}: {request:?}");
        assert_eq!(request.req(tags::BEGIN_SEQ_NO), gap_at.to_string());
        assert_eq!(request.req(tags::END_SEQ_NO), gap_at.to_string());
        c.send("D", &order("Q2"));
        let after = c.seq;
        c.seq = gap_at;
        let orig = "20261122-10:00:00.000";
        let new_seq = (gap_at + 1).to_string();
        c.send(
            "4",
            &[
                (tags::POSS_DUP_FLAG, "Y"),
                (tags::ORIG_SENDING_TIME, orig),
                (tags::GAP_FILL_FLAG, "Y"),
                (tags::NEW_SEQ_NO, &new_seq),
            ],
        );
        c.seq = after;
        assert_eq!(c.recv().req(tags::CL_ORD_ID), "Q1", "{begin}");
        assert_eq!(c.recv().req(tags::CL_ORD_ID), "Q2", "{begin}");

        // SequenceReset-Reset to a lower number: Reject 5 on NewSeqNo; nothing else.
        let seq = c.send("4", &[(tags::NEW_SEQ_NO, "1")]);
        let reject = c.recv();
        assert_eq!(reject.msg_type, "3", "{begin}: {reject:?}");
        assert_eq!(reject.req(tags::REF_SEQ_NUM), seq.to_string());
        assert_eq!(reject.req(tags::REF_TAG_ID), "36");
        assert_eq!(reject.req(373), "5");
        assert_eq!(
            reject.req(tags::TEXT),
            "Value is incorrect (out of range) for this tag, field=36"
        );
        // A Reset does not use up its number: the next message takes it.
        c.seq = seq;

        // A Heartbeat with an undefined tag, or one not defined for it. (FIX 5.0 SP2 defines
        // 999, LegUnitOfMeasure: there it is reason 2.)
        let (reason_999, text_999) = match begin {
            "FIXT.1.1" => ("2", "Tag not defined for this message type, field=999"),
            _ => ("0", "Invalid tag number, field=999"),
        };
        for (tag, reason, text) in [
            (999, reason_999, text_999),
            (
                tags::SYMBOL,
                "2",
                "Tag not defined for this message type, field=55",
            ),
        ] {
            c.send("0", &[(tag, "HI")]);
            let reject = c.recv();
            assert_eq!(reject.msg_type, "3", "{begin}: {reject:?}");
            assert_eq!(reject.req(tags::REF_TAG_ID), tag.to_string());
            assert_eq!(reject.req(373), reason, "{begin}");
            assert_eq!(reject.req(tags::TEXT), text, "{begin}");
        }

        c.expect_nothing_pending("end");
        c.logout();
    }
}

#[test]
fn sequence_numbers_and_seen_ids_start_over_with_each_connection() {
    let acceptor = Acceptor::start();
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    c.logon();
    c.send("D", &order("R1"));
    assert_eq!(c.recv().req(tags::MSG_SEQ_NUM), "2");
    // Dropped without a Logout.
    drop(c);

    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    let logon = c.logon();
    assert_eq!(logon.req(tags::MSG_SEQ_NUM), "1", "{logon:?}");
    // The ClOrdID of the last connection is forgotten: a PossResend of it is new here.
    c.send(
        "D",
        &[&[(tags::POSS_RESEND, "Y")][..], &order("R1")].concat(),
    );
    let echo = c.recv();
    assert_eq!(echo.msg_type, "D");
    assert_eq!(echo.req(tags::MSG_SEQ_NUM), "2");
    c.logout();

    // And again after a Logout: a third Logon with 34=1 is accepted.
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    assert_eq!(c.logon().req(tags::MSG_SEQ_NUM), "1");
}

#[test]
fn a_test_request_is_answered_with_its_id() {
    let acceptor = Acceptor::start();
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.2");
    c.logon();
    c.send("1", &[(tags::TEST_REQ_ID, "ping-7")]);
    let hb = c.recv_within(Duration::from_secs(10)).unwrap();
    assert_eq!(hb.msg_type, "0");
    assert_eq!(hb.req(tags::TEST_REQ_ID), "ping-7");
}

/// QuickFIX's current scripts name the counterparty per version; a first message for no
/// session gets no reply, only the close (case 1S.c; QuickFIX's scripts 1c and 1d).
/// Every version logs on, under TW and under its own CompID, and gets its order echoed; FIXT.1.1
/// takes DefaultApplVerID 7, 8 and 9 and refuses others with a Logout naming the value.
#[test]
fn every_version_logs_on_and_is_echoed() {
    let acceptor = Acceptor::start();
    let cases = [
        ("FIX.4.0", "TW40", None),
        ("FIX.4.1", "TW41", None),
        ("FIX.4.2", "TW42", None),
        ("FIX.4.3", "TW43", None),
        ("FIX.4.4", "TW44", None),
        ("FIXT.1.1", "TW50", Some("7")),
        ("FIXT.1.1", "TW50SP1", Some("8")),
        ("FIXT.1.1", "TW50SP2", Some("9")),
    ];
    for (begin, own_comp_id, appl_ver_id) in cases {
        for their in ["TW", own_comp_id] {
            let mut c = FixClient::connect_as(acceptor.addr, begin, their, "ISLD");
            let mut logon = vec![(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")];
            if let Some(id) = appl_ver_id {
                logon.push((tags::DEFAULT_APPL_VER_ID, id));
            }
            c.send("A", &logon);
            let reply = c.recv();
            assert_eq!(reply.msg_type, "A", "{begin} {their}: {reply:?}");
            assert_eq!(reply.get(tags::DEFAULT_APPL_VER_ID), appl_ver_id);
            // FIX 4.0 and 4.1 orders have no TransactTime.
            let mut sent = order("V1");
            if matches!(begin, "FIX.4.0" | "FIX.4.1") {
                sent.retain(|(tag, _)| *tag != tags::TRANSACT_TIME);
            }
            c.send("D", &sent);
            let echo = c.recv();
            assert_eq!(echo.msg_type, "D", "{begin} {their}: {echo:?}");
            assert_eq!(echo.body(), owned(&sent), "{begin} {their}");
            c.logout();
        }
    }
    let mut c = FixClient::connect(acceptor.addr, "FIXT.1.1");
    c.send(
        "A",
        &[
            (tags::ENCRYPT_METHOD, "0"),
            (tags::HEART_BT_INT, "30"),
            (tags::DEFAULT_APPL_VER_ID, "6"),
        ],
    );
    let logout = c.recv();
    assert_eq!(logout.msg_type, "5");
    assert!(
        logout
            .req(tags::TEXT)
            .contains("DefaultApplVerID (1137) 6 not supported")
    );
}

#[test]
fn sessions_are_chosen_by_begin_string_and_comp_ids() {
    let acceptor = Acceptor::start();
    for (begin, their) in [
        ("FIX.4.2", "TW42"),
        ("FIX.4.4", "TW44"),
        ("FIXT.1.1", "TW50SP2"),
    ] {
        let mut c = FixClient::connect_as(acceptor.addr, begin, their, "ISLD");
        let logon = c.logon();
        assert_eq!(logon.req(tags::TARGET_COMP_ID), their);
        c.send("D", &order("P1"));
        let echo = c.recv();
        assert_eq!(echo.req(tags::TARGET_COMP_ID), their);
        assert_eq!(echo.req(tags::CL_ORD_ID), "P1");
        // TW on the same version is another session, usable at the same time.
        let mut tw = FixClient::connect(acceptor.addr, begin);
        assert_eq!(tw.logon().req(tags::TARGET_COMP_ID), "TW");
    }
    for (begin, sender, target) in [
        ("FIX.4.4", "WT", "ISLD"),
        ("FIX.4.4", "TW", "DLSI"),
        ("FIX.4.4", "TW42", "ISLD"),
    ] {
        let mut c = FixClient::connect_as(acceptor.addr, begin, sender, target);
        c.send(
            "A",
            &[(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")],
        );
        assert!(
            c.recv_within(Duration::from_secs(5)).is_none(),
            "{sender}->{target}: no reply expected"
        );
    }
}

#[test]
fn a_second_connection_for_a_session_in_use_is_closed() {
    let acceptor = Acceptor::start();
    let mut first = FixClient::connect(acceptor.addr, "FIX.4.4");
    first.logon();

    let mut second = FixClient::connect(acceptor.addr, "FIX.4.4");
    second.send(
        "A",
        &[(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")],
    );
    assert!(second.closed_within(Duration::from_secs(5)));

    // Other versions are other sessions; the first connection is untouched.
    let mut other = FixClient::connect(acceptor.addr, "FIX.4.2");
    other.logon();
    first.send("D", &order("S1"));
    assert_eq!(first.recv().req(tags::CL_ORD_ID), "S1");
}

#[test]
fn bad_input_closes_the_connection_and_the_acceptor_keeps_serving() {
    let acceptor = Acceptor::start();

    // Not FIX.
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    c.stream.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert!(c.closed_within(Duration::from_secs(5)));

    // An unknown BeginString.
    let mut c = FixClient::connect(acceptor.addr, "FIX.3.9");
    c.send(
        "A",
        &[(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")],
    );
    assert!(c.closed_within(Duration::from_secs(5)));

    // Half a message, then gone: the session is free again at once.
    let mut c = TcpStream::connect(acceptor.addr).unwrap();
    c.write_all(b"8=FIX.4.4\x019=70\x0135=A\x0134=1\x0149=TW")
        .unwrap();
    drop(c);

    // A logged-on client that sends a message bigger than the input limit, in pieces.
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    c.logon();
    let _ = c.stream.write_all(b"8=FIX.4.4\x019=9999999\x0135=D\x01");
    let junk = vec![b'x'; 256 * 1024];
    for _ in 0..8 {
        if c.stream.write_all(&junk).is_err() {
            break;
        }
    }
    assert!(c.closed_within(Duration::from_secs(10)));

    // Garbage after logon is ignored (case 2d): the session goes on.
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    c.logon();
    c.stream
        .write_all(b"8=FIX.4.4\x019=5\x0135=0\x0110=000\x01garbage\x01")
        .unwrap();
    c.expect_nothing_pending("after-garbage");
    c.send("D", &order("G1"));
    assert_eq!(c.recv().req(tags::CL_ORD_ID), "G1");
    c.logout();
}

/// The command as a user runs it: the ready line, a session, then SIGTERM logs it out and
/// the process exits cleanly.
#[test]
fn the_command_prints_its_address_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
        .args(["fix", "test-acceptor", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .strip_prefix("test acceptor listening on ")
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));

    let mut c = FixClient::connect(addr, "FIXT.1.1");
    c.logon();
    c.send("D", &order("C1"));
    assert_eq!(c.recv().req(tags::CL_ORD_ID), "C1");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let logout = c.recv();
    assert_eq!(logout.msg_type, "5", "{logout:?}");
    c.send("5", &[]);
    assert!(c.closed_within(Duration::from_secs(5)));

    let status = common::exit_within(&mut child, Duration::from_secs(10))
        .expect("still running 10 s after SIGTERM");
    assert!(status.success(), "{status}");
}

/// 13b: an unsolicited Logout is answered with a Logout; the acceptor then waits up to 10 s
/// for the counterparty to disconnect, ignoring what comes meanwhile, and closes after that.
#[test]
fn t13b_an_unsolicited_logout_is_answered_and_the_acceptor_waits_10_s_for_the_close() {
    let acceptor = Acceptor::start();
    let mut c = FixClient::connect(acceptor.addr, "FIX.4.4");
    c.logon();
    let start = Instant::now();
    c.send("5", &[]);
    assert_eq!(c.recv().msg_type, "5");
    // Ignored: no Heartbeat, no echo.
    c.send("1", &[(tags::TEST_REQ_ID, "after-logout")]);
    c.send("D", &order("L1"));
    assert!(
        c.recv_within(Duration::from_secs(8)).is_none(),
        "nothing answered, and still open"
    );
    assert!(
        start.elapsed() >= Duration::from_secs(8),
        "closed too early"
    );
    assert!(c.closed_within(Duration::from_secs(5)));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(12),
        "closed after {waited:?}"
    );
}
