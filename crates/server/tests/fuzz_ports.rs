//! Seeded random input on every port of a running server, before and after login (bounded:
//! a few hundred connections and a few thousand messages, seconds in all). The server must
//! stay up and answer, refuse what it cannot use, and keep a venue that recovers exactly: the
//! state hash after a restart is the one before it, so nothing was half-applied.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rialto_core::{Side, SymbolId};
use rialto_fix::{MessageWriter, tags};
use rialto_wire::{ClientMsg, NewOrder, ServerMsg, encode_client};

/// xorshift64*: the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.below(max_len) + 1;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Sends `bytes` on a new connection, ends our side, and reads whatever comes until the
/// server closes (or 10 s pass): the server has dealt with the input when this returns.
fn one_shot(addr: SocketAddr, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
}

/// A valid client frame with some of its body bytes (after the 6-byte header) changed.
fn mutated_frame(rng: &mut Rng) -> Vec<u8> {
    let msg = match rng.below(6) {
        0 => ClientMsg::NewOrder(NewOrder::limit(
            rng.next() as i64,
            SymbolId(rng.below(3) as u32),
            if rng.below(2) == 0 {
                Side::Buy
            } else {
                Side::Sell
            },
            rng.next() as i64,
            rng.next() as i64,
        )),
        1 => ClientMsg::Cancel {
            order: rng.next() as i64,
        },
        2 => ClientMsg::Move {
            order: rng.next() as i64,
            price: rng.next() as i64,
        },
        3 => ClientMsg::MassCancel { symbol: None },
        4 => ClientMsg::Book {
            request: rng.next(),
            symbol: SymbolId(rng.below(3) as u32),
            depth: rng.next() as u32,
        },
        _ => ClientMsg::Heartbeat { nonce: rng.next() },
    };
    let mut frame = Vec::new();
    encode_client(&msg, &mut frame);
    for _ in 0..rng.below(4) {
        let at = 4 + rng.below(frame.len() as u64 - 4) as usize;
        frame[at] = rng.next() as u8;
    }
    frame
}

fn fix_message(sender: &str, seq: u64, msg_type: &str, fields: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let mut out = Vec::new();
    let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type.as_bytes());
    w.str(tags::SENDER_COMP_ID, sender.as_bytes())
        .str(tags::TARGET_COMP_ID, b"RIALTO")
        .uint(tags::MSG_SEQ_NUM, seq)
        .timestamp(tags::SENDING_TIME, now);
    for (tag, value) in fields {
        w.str(*tag, value);
    }
    w.finish();
    out
}

/// Printable junk without SOH or '=' (a FIX value), up to `max` bytes.
fn fix_value(rng: &mut Rng, max: u64) -> Vec<u8> {
    let len = rng.below(max) + 1;
    (0..len).map(|_| b'0' + rng.below(75) as u8).collect()
}

#[test]
fn random_input_on_every_port_changes_nothing_it_should_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let mut rng = Rng(0x005e_ed0f_f022);
    let fix_addr = server.fix_addr.unwrap();
    let web_addr = server.web_addr.unwrap();

    // Before any login: raw bytes, frames of every kind, half-valid FIX and HTTP.
    for i in 0..150 {
        one_shot(server.order_addr, &rng.bytes(600));
        one_shot(server.admin_addr, &mutated_frame(&mut rng));
        let junk = vec![
            (tags::USERNAME, fix_value(&mut rng, 40)),
            (rng.below(2000) as u32 + 1, fix_value(&mut rng, 200)),
        ];
        let sender = if i % 2 == 0 {
            "TRADER1".to_string()
        } else {
            String::from_utf8(fix_value(&mut rng, 12)).unwrap()
        };
        one_shot(fix_addr, &fix_message(&sender, rng.below(5), "A", &junk));
        one_shot(fix_addr, &rng.bytes(300));
        let method = ["GET", "POST", "DELETE", "PUT", "\u{0}"][rng.below(5) as usize];
        let path = String::from_utf8_lossy(&fix_value(&mut rng, 60)).into_owned();
        let mut request = format!("{method} /api/v1/{path} HTTP/1.1\r\nHost: x\r\n").into_bytes();
        if rng.below(2) == 0 {
            request.extend_from_slice(b"Rialto-Key: ");
            request.extend(fix_value(&mut rng, 30));
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"Content-Length: 20\r\n\r\n");
        request.extend(rng.bytes(20));
        one_shot(web_addr, &request);
    }

    // Logged in: mutated frames, then another trader's session still answers.
    let mut trader = common::trader(&server, 1);
    let mut frames = Vec::new();
    for _ in 0..2_000 {
        frames.extend(mutated_frame(&mut rng));
    }
    // Sent by user 2 on a raw connection: some mutations end a session (a bad length closes
    // it), and the other sessions must not notice.
    {
        let mut raw = TcpStream::connect(server.order_addr).unwrap();
        let mut login = Vec::new();
        let secret = server.credentials.user_secret(2);
        let secret = rialto_wire::Secret::new(secret.as_bytes()).unwrap();
        encode_client(&ClientMsg::Login { user: 2, secret }, &mut login);
        raw.write_all(&login).unwrap();
        let _ = raw.write_all(&frames);
        let _ = raw.shutdown(Shutdown::Write);
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = Vec::new();
        let _ = raw.read_to_end(&mut sink);
    }
    match trader.request(&ClientMsg::MyReport { request: 7 }).unwrap() {
        ServerMsg::Report { request: 7, .. } => {}
        other => panic!("{other}"),
    }

    // Logged on over FIX: messages with random types and fields, in sequence. The failed
    // Logons above throttle this address (docs/security.md: after 10, one a second), and a
    // throttled Logon is closed without a reply: try once a second until one is answered.
    let secret = server.credentials.user_secret(3);
    let logon = fix_message(
        "TRADER3",
        1,
        "A",
        &[
            (tags::ENCRYPT_METHOD, b"0".to_vec()),
            (tags::HEART_BT_INT, b"30".to_vec()),
            (tags::USERNAME, b"3".to_vec()),
            (tags::PASSWORD, secret.into_bytes()),
        ],
    );
    let mut attempts = 0;
    let mut fix = loop {
        attempts += 1;
        assert!(attempts <= 30, "no Logon answered in 30 attempts");
        let mut fix = TcpStream::connect(fix_addr).unwrap();
        fix.write_all(&logon).unwrap();
        fix.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut reply = [0u8; 512];
        match fix.read(&mut reply) {
            Ok(n) if reply[..n].windows(5).any(|w| w == b"\x0135=A") => break fix,
            // Waiting out the throttle's one-a-second window is the point: no event ends it.
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    let types = [
        "D", "F", "G", "H", "V", "x", "q", "0", "1", "2", "3", "4", "j", "ZZ", "8",
    ];
    let mut burst = Vec::new();
    for seq in 2..500u64 {
        let msg_type = types[rng.below(types.len() as u64) as usize];
        let fields: Vec<(u32, Vec<u8>)> = (0..rng.below(8))
            .map(|_| {
                let tag = [
                    11, 38, 40, 44, 54, 55, 59, 60, 41, 7, 16, 36, 123, 112, 263, 9999,
                ][rng.below(16) as usize];
                (tag, fix_value(&mut rng, 20))
            })
            .collect();
        burst.extend(fix_message("TRADER3", seq, msg_type, &fields));
    }
    // The session may end partway (a SequenceReset to a far number, then "too low"): the
    // rest of the burst then meets a closed socket.
    let _ = fix.write_all(&burst);
    let _ = fix.shutdown(Shutdown::Write);
    fix.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = Vec::new();
    let _ = fix.read_to_end(&mut sink);

    // The server still serves every port.
    let mut again = common::trader(&server, 4);
    match again
        .request(&ClientMsg::ListSymbols { request: 1 })
        .unwrap()
    {
        ServerMsg::SymbolList { .. } => {}
        other => panic!("{other}"),
    }
    let mut http = TcpStream::connect(web_addr).unwrap();
    http.write_all(b"GET /api/v1/symbols HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );

    // Whatever the valid commands among the junk did, it was whole: a restart recovers the
    // same state.
    let before = common::state_hash(&server);
    drop((trader, again));
    server.shutdown().unwrap();
    let server = common::start(dir.path(), |_| {});
    assert_eq!(common::state_hash(&server), before);
    server.shutdown().unwrap();
}
