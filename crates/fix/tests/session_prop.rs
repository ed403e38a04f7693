//! Random and garbled input streams through `next_frame` and the session: no panic, and `out`
//! only ever holds well-formed messages from us, numbered without gaps.

use proptest::prelude::*;
use rialto_fix::session::{MemoryStore, Outcome, Session, SessionConfig};
use rialto_fix::{MessageWriter, Version, next_frame, tags, time};

const NOW: i64 = 1_795_322_669_000_000_000;
const SEC: i64 = 1_000_000_000;
const TYPES: [&str; 10] = ["A", "0", "1", "2", "3", "4", "5", "D", "F", "ZZ"];

#[derive(Clone, Debug)]
enum Piece {
    /// A counterparty message numbered `next_target + seq_delta`, possibly damaged.
    Message {
        msg_type: usize,
        seq_delta: i64,
        fields: Vec<(u32, String)>,
        damage: Damage,
    },
    Junk(Vec<u8>),
    /// Time passes (seconds) and the timer runs.
    Wait(u8),
    /// The application sends an ExecutionReport.
    SendApp,
}

#[derive(Clone, Debug)]
enum Damage {
    None,
    Byte(usize, u8),
    Cut(usize),
}

fn field() -> impl Strategy<Value = (u32, String)> {
    let tag = prop_oneof![
        Just(tags::POSS_DUP_FLAG),
        Just(tags::ORIG_SENDING_TIME),
        Just(tags::GAP_FILL_FLAG),
        Just(tags::NEW_SEQ_NO),
        Just(tags::BEGIN_SEQ_NO),
        Just(tags::END_SEQ_NO),
        Just(tags::TEST_REQ_ID),
        Just(tags::RESET_SEQ_NUM_FLAG),
        Just(tags::HEART_BT_INT),
        Just(tags::MSG_SEQ_NUM),
        Just(tags::SENDER_COMP_ID),
        Just(tags::CL_ORD_ID),
        1u32..2000,
    ];
    let value = prop_oneof![
        Just("Y".to_string()),
        Just("N".to_string()),
        Just("0".to_string()),
        (0u64..12).prop_map(|n| n.to_string()),
        Just("20261122-04:44:20.000".to_string()),
        "[ -~]{0,6}",
    ];
    (tag, value)
}

fn piece() -> impl Strategy<Value = Piece> {
    let damage = prop_oneof![
        6 => Just(Damage::None),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Damage::Byte(p, b)),
        1 => any::<usize>().prop_map(Damage::Cut),
    ];
    prop_oneof![
        8 => (
            0..TYPES.len(),
            prop_oneof![6 => Just(0i64), 1 => -2i64..3],
            prop::collection::vec(field(), 0..3),
            damage,
        )
            .prop_map(|(msg_type, seq_delta, fields, damage)| Piece::Message {
                msg_type,
                seq_delta,
                fields,
                damage,
            }),
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Piece::Junk),
        1 => any::<u8>().prop_map(|s| Piece::Wait(s % 50)),
        1 => Just(Piece::SendApp),
    ]
}

fn build(msg_type: &str, seq: i64, now: i64, fields: &[(u32, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = MessageWriter::begin(&mut out, b"FIX.4.4", msg_type.as_bytes());
    w.str(tags::SENDER_COMP_ID, b"TRADER1")
        .str(tags::TARGET_COMP_ID, b"RIALTO")
        .int(tags::MSG_SEQ_NUM, seq)
        .timestamp(tags::SENDING_TIME, now);
    if msg_type == "A" {
        w.uint(tags::HEART_BT_INT, 30);
    }
    for (tag, value) in fields {
        w.str(*tag, value.as_bytes());
    }
    w.finish();
    out
}

/// Checks what the session wrote, and follows our sequence numbers.
fn check_out(out: &[u8], next_out: &mut u64) {
    let mut rest = out;
    while !rest.is_empty() {
        let (frame, len) = match next_frame(rest, 1 << 20) {
            Ok(Some(x)) => x,
            other => panic!("bad output {other:?}: {:?}", String::from_utf8_lossy(rest)),
        };
        assert_eq!(frame.begin_string, b"FIX.4.4");
        for f in frame.fields() {
            f.expect("well-formed field");
        }
        assert_eq!(frame.get(tags::SENDER_COMP_ID), Some(&b"RIALTO"[..]));
        assert_eq!(frame.get(tags::TARGET_COMP_ID), Some(&b"TRADER1"[..]));
        let sending = frame.get(tags::SENDING_TIME).expect("SendingTime");
        assert!(time::parse_utc_timestamp(sending).is_some());
        let seq: u64 = std::str::from_utf8(frame.get(tags::MSG_SEQ_NUM).unwrap())
            .unwrap()
            .parse()
            .unwrap();
        if frame.get(tags::POSS_DUP_FLAG) != Some(b"Y") {
            if frame.msg_type == b"A" && frame.get(tags::RESET_SEQ_NUM_FLAG) == Some(b"Y") {
                *next_out = 1;
            }
            assert_eq!(seq, *next_out, "{}", frame.display());
            *next_out += 1;
        } else {
            assert!(seq < *next_out, "a resend beyond what was sent");
        }
        rest = &rest[len..];
    }
}

/// Runs `pieces`; with `auto_logon`, a good Logon goes in after every (re)connect so that
/// the stream reaches the logged-on states. Returns how many messages were delivered.
fn run(pieces: Vec<Piece>, auto_logon: bool) -> usize {
    let config = SessionConfig::new(Version::Fix44, "RIALTO", "TRADER1");
    let mut s = Session::new(config, MemoryStore::new());
    let mut now = NOW;
    s.on_connect(now);
    let mut out = Vec::new();
    let mut next_out = 1u64;
    let mut auth = |_: &rialto_fix::session::Logon<'_>| Ok(());
    let mut input = Vec::new();
    let mut delivered = 0;
    let mut connected_fresh = true;
    for piece in pieces {
        if auto_logon && connected_fresh {
            let logon = build("A", s.next_target_seq() as i64, now, &[]);
            input.extend_from_slice(&logon);
            connected_fresh = false;
        }
        match piece {
            Piece::Message {
                msg_type,
                seq_delta,
                fields,
                damage,
            } => {
                let seq = s.next_target_seq() as i64 + seq_delta;
                let mut bytes = build(TYPES[msg_type], seq, now, &fields);
                match damage {
                    Damage::None => {}
                    Damage::Byte(p, b) => {
                        let n = bytes.len();
                        bytes[p % n] = b;
                    }
                    Damage::Cut(p) => bytes.truncate(p % bytes.len()),
                }
                input.extend_from_slice(&bytes);
            }
            Piece::Junk(bytes) => input.extend_from_slice(&bytes),
            Piece::Wait(secs) => {
                now += i64::from(secs) * SEC;
                if s.on_timer(now, &mut out).unwrap() == Outcome::Disconnect {
                    s.on_disconnect(now).unwrap();
                    s.on_connect(now);
                    input.clear();
                    connected_fresh = true;
                }
            }
            Piece::SendApp => {
                s.send_app(
                    b"8",
                    now,
                    |w| {
                        w.str(tags::CL_ORD_ID, b"x");
                    },
                    &mut out,
                )
                .unwrap();
                // Stored or written, it used a number.
                if !s.is_logged_on() {
                    next_out += 1;
                }
            }
        }
        // Feed whatever whole messages (or garbage) the input holds.
        loop {
            match next_frame(&input, 4096) {
                Ok(None) => break,
                Ok(Some((frame, len))) => {
                    let outcome = s.on_message(&frame, now, &mut auth, &mut out).unwrap();
                    input.drain(..len);
                    delivered += usize::from(outcome == Outcome::Deliver);
                    if outcome == Outcome::Disconnect {
                        check_out(&out, &mut next_out);
                        out.clear();
                        s.on_disconnect(now).unwrap();
                        s.on_connect(now);
                        input.clear();
                        connected_fresh = true;
                        break;
                    }
                }
                Err(g) => {
                    s.on_garbled(&input[..g.skip], now).unwrap();
                    input.drain(..g.skip);
                }
            }
        }
        check_out(&out, &mut next_out);
        out.clear();
        assert_eq!(s.next_sender_seq(), next_out);
    }
    delivered
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_streams_never_break_the_session(pieces in prop::collection::vec(piece(), 1..60)) {
        run(pieces.clone(), true);
        run(pieces, false);
    }

    #[test]
    fn random_bytes_never_break_the_session(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        run(vec![Piece::Junk(bytes)], false);
    }
}

/// The random streams do reach application messages (the property above is not vacuous).
#[test]
fn random_streams_reach_the_logged_on_states() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(piece(), 40..60);
    let delivered: usize = (0..50)
        .map(|_| run(strategy.new_tree(&mut runner).unwrap().current(), true))
        .sum();
    assert!(
        delivered > 100,
        "only {delivered} messages delivered in 50 streams"
    );
}
