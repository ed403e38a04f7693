//! A minimal FIX initiator for the server's tests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rialto_fix::{MessageWriter, next_frame, tags};
use rialto_server::RunningServer;

/// One message from `sender` to RIALTO, sent now.
pub fn message(
    begin: &str,
    msg_type: &str,
    sender: &str,
    seq: u64,
    fields: &[(u32, &str)],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = MessageWriter::begin(&mut out, begin.as_bytes(), msg_type.as_bytes());
    w.str(tags::SENDER_COMP_ID, sender.as_bytes())
        .str(tags::TARGET_COMP_ID, b"RIALTO")
        .uint(tags::MSG_SEQ_NUM, seq)
        .timestamp(tags::SENDING_TIME, now_ns());
    for (tag, value) in fields {
        w.str(*tag, value.as_bytes());
    }
    w.finish();
    out
}

/// A minimal FIX initiator for tests: builds messages field by field, reads whole messages.
pub struct FixClient {
    pub stream: TcpStream,
    buf: Vec<u8>,
    /// The MsgSeqNum of the next message sent.
    pub seq: u64,
    comp_id: String,
    begin: &'static str,
    /// The DefaultApplVerID (1137) a FIXT.1.1 Logon names (default 9, FIX 5.0SP2).
    pub default_appl_ver_id: &'static str,
}

/// A received message: its type and fields in order.
#[derive(Debug, Clone)]
pub struct Msg {
    pub msg_type: String,
    pub fields: Vec<(u32, String)>,
    /// The message as received.
    pub bytes: Vec<u8>,
}

impl Msg {
    pub fn get(&self, tag: u32) -> Option<&str> {
        self.fields
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, v)| v.as_str())
    }

    pub fn req(&self, tag: u32) -> &str {
        self.get(tag)
            .unwrap_or_else(|| panic!("tag {tag} missing in {self:?}"))
    }
}

pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

impl FixClient {
    pub fn connect(addr: SocketAddr, comp_id: &str, begin: &'static str) -> FixClient {
        FixClient::over(TcpStream::connect(addr).unwrap(), comp_id, begin)
    }

    /// A client over a connection made elsewhere (from a chosen local address, say).
    pub fn over(stream: TcpStream, comp_id: &str, begin: &'static str) -> FixClient {
        stream.set_nodelay(true).unwrap();
        FixClient {
            stream,
            buf: Vec::new(),
            seq: 1,
            comp_id: comp_id.into(),
            begin,
            default_appl_ver_id: "9",
        }
    }

    pub fn send(&mut self, msg_type: &str, fields: &[(u32, &str)]) {
        let out = message(self.begin, msg_type, &self.comp_id, self.seq, fields);
        self.seq += 1;
        self.stream.write_all(&out).unwrap();
    }

    /// The next message, or None at EOF or after `timeout`.
    pub fn recv_within(&mut self, timeout: Duration) -> Option<Msg> {
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
                    bytes: self.buf[..len].to_vec(),
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

    /// Asserts that the connection closes without a message (well within 10 s, so that it is
    /// the close and not a timeout).
    pub fn expect_closed_without_a_message(&mut self) {
        let start = Instant::now();
        let msg = self.recv_within(Duration::from_secs(10));
        assert!(msg.is_none(), "a close without a message, got {msg:?}");
        assert!(start.elapsed() < Duration::from_secs(8), "not closed");
    }

    /// The next message that is not a Heartbeat.
    pub fn recv(&mut self) -> Msg {
        loop {
            let msg = self
                .recv_within(Duration::from_secs(10))
                .expect("a message within 10 s");
            if msg.msg_type != "0" {
                return msg;
            }
        }
    }

    pub fn expect(&mut self, msg_type: &str) -> Msg {
        let msg = self.recv();
        assert_eq!(msg.msg_type, msg_type, "expected {msg_type}, got {msg:?}");
        msg
    }

    pub fn logon(&mut self, server: &RunningServer, user: i64) -> Msg {
        self.logon_with(user, &server.credentials.user_secret(user));
        self.expect("A")
    }

    /// Sends a Logon as `user` with `password` (the answer is the caller's to read).
    pub fn logon_with(&mut self, user: i64, password: &str) {
        let user_text = user.to_string();
        let mut fields = vec![
            (tags::ENCRYPT_METHOD, "0"),
            (tags::HEART_BT_INT, "30"),
            (tags::USERNAME, user_text.as_str()),
            (tags::PASSWORD, password),
        ];
        if self.begin == "FIXT.1.1" {
            fields.push((tags::DEFAULT_APPL_VER_ID, self.default_appl_ver_id));
        }
        self.send("A", &fields);
    }

    pub fn new_order(&mut self, cl_ord_id: &str, side: &str, qty: &str, price: &str) {
        let now = transact_time();
        self.send(
            "D",
            &[
                (tags::CL_ORD_ID, cl_ord_id),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, side),
                (tags::TRANSACT_TIME, &now),
                (tags::ORDER_QTY, qty),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, price),
                (tags::TIME_IN_FORCE, "1"),
            ],
        );
    }
}

pub fn transact_time() -> String {
    let mut b = Vec::new();
    rialto_fix::time::write_utc_timestamp(&mut b, now_ns());
    String::from_utf8(b).unwrap()
}
